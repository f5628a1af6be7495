"""A custom ``@njit`` op against the same op built in, and against PyTorch's
``autograd.Function`` (issue: "your own differentiable ops").

The chain is W1's shape: ``K = 2000`` records of one elementwise op, ``y = tanh(y)``, on a
tensor of ``n`` values (n = 1, W1's size, and n = 1000), forward and backward.  Rows:

* **tapegrad built-in** -- ``tapegrad.tanh``, eager (record + backward) and compiled
  (``tapegrad.compile``: replay + backward);
* **tapegrad custom** -- the same function as a ``tapegrad.custom_op`` of two ``@njit``
  kernels (forward, vjp), eager and compiled;
* **tapegrad elementwise** -- the same function as a ``tapegrad.elementwise_op`` of its
  scalar rules (value, derivative): on one-value records, compiled replay runs it in
  generated code, as it runs the built-in;
* **torch built-in** / **torch Function** -- ``torch.tanh``, and a ``torch.autograd.Function``
  whose forward and backward call ``torch.tanh`` and multiply (its backward is Python).
JAX's rows (``jax.jit`` of ``grad`` over a ``lax.fori_loop`` of the op, built-in and
``custom_vjp``) need jax, which is optional: reported as not installed without it.

The first-use cost of a new custom op (its wrappers compile when a pass first needs them)
is measured before the timed rounds: defining an op, its first backward, its first replay.
Timing follows bench/timing.py (interleaved rounds, one pinned CPU).

Run: ``python -m bench.custom_ops [--quick] [--json PATH]``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from bench.machine import REPO_DIR, one_thread_everywhere, pin_to_one_cpu  # noqa: E402

one_thread_everywhere()

PINNED = pin_to_one_cpu()
sys.path.insert(0, os.path.join(REPO_DIR, "src"))

import numba  # noqa: E402
import numpy as np  # noqa: E402

from bench.timing import Entry, TimingConfig, call_batch, run_rounds, summarize  # noqa: E402

K = 2000
SIZES = (1, 1000)


@numba.njit
def tanh_forward(x, out, p):
    for i in range(x.size):
        out[i] = np.tanh(x[i])


@numba.njit
def tanh_vjp(x, out, g, gx, p):
    for i in range(x.size):
        gx[i] = g[i] * (1.0 - out[i] * out[i])


@numba.njit
def tanh_value(x, p):
    return np.tanh(x)


@numba.njit
def tanh_derivative(x, out, p):
    return 1.0 - out * out


def first_use():
    """Seconds to define a new custom op, run its first backward and its first replay
    (the kernels above are compiled by numba already: the wrappers are what is new)."""
    import tapegrad as tg
    t0 = time.perf_counter()
    op = tg.custom_op(f"FirstUse{time.perf_counter_ns()}", tanh_forward, vjp=tanh_vjp)
    t1 = time.perf_counter()
    x = tg.tensor([0.5], requires_grad=True)
    op(x).sum().backward()
    t2 = time.perf_counter()
    fn = tg.compile(lambda v: op(v).sum())
    fn(x)
    fn(x)
    t3 = time.perf_counter()
    return {"define_s": t1 - t0, "first_backward_s": t2 - t1, "first_replay_s": t3 - t2}


def tapegrad_rows(n):
    import tapegrad as tg
    op = tg.custom_op("BenchTanh", tanh_forward, vjp=tanh_vjp)
    scalar_op = tg.elementwise_op("BenchTanhScalar", tanh_value, tanh_derivative)
    x0 = np.linspace(0.1, 0.9, n)

    def chain(step):
        def run(x):
            y = x
            for _ in range(K):
                y = step(y)
            return y.sum()
        return run

    rows = {}
    for name, step in (("built-in", tg.tanh), ("custom", op), ("elementwise", scalar_op)):
        fn = chain(step)
        compiled = tg.compile(fn)

        def eager(fn=fn):
            x = tg.tensor(x0, requires_grad=True)
            fn(x).backward()
            return x.grad

        def replay(compiled=compiled):
            x = tg.tensor(x0, requires_grad=True)
            compiled(x).backward()
            return x.grad

        rows[f"tapegrad {name} eager"] = eager
        rows[f"tapegrad {name} compiled"] = replay
    # steady state: a compiled chain runs generated code from its third replay on, and a
    # custom op's generated code compiles in this process (its first use is timed apart,
    # above); the bench's warm-up stops early for calls as slow as that compile
    for key, fn in rows.items():
        if key.endswith("compiled"):
            for _ in range(5):
                fn()
    # the chains' gradients agree
    a = rows["tapegrad built-in eager"]().numpy()
    for kind in ("custom", "elementwise"):
        b = rows[f"tapegrad {kind} compiled"]().numpy()
        assert np.allclose(a, b, rtol=1e-12, atol=1e-300), (kind, a, b)
    return rows


def torch_rows(n):
    try:
        import torch
    except ImportError:
        return {}
    torch.set_num_threads(1)

    class Tanh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out = torch.tanh(x)
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, g):
            (out,) = ctx.saved_tensors
            return g * (1.0 - out * out)

    x0 = torch.tensor(np.linspace(0.1, 0.9, n))
    rows = {}
    for name, step in (("built-in", torch.tanh), ("Function", Tanh.apply)):
        def run(step=step):
            x = x0.clone().requires_grad_(True)
            y = x
            for _ in range(K):
                y = step(y)
            y.sum().backward()
            return x.grad
        rows[f"torch {name}"] = run
    return rows


def jax_rows(n):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}

    @jax.custom_vjp
    def tanh(x):
        return jnp.tanh(x)

    def tanh_fwd(x):
        out = jnp.tanh(x)
        return out, out

    def tanh_bwd(out, g):
        return (g * (1.0 - out * out),)

    tanh.defvjp(tanh_fwd, tanh_bwd)
    x0 = jnp.asarray(np.linspace(0.1, 0.9, n))
    rows = {}
    for name, step in (("built-in", jnp.tanh), ("custom_vjp", tanh)):
        def loss(x, step=step):
            # a fori_loop, as W5 under jit: XLA fails on the unrolled 2000-op chain here
            # ("Unknown MLIR failure", jax 0.10.2)
            return jax.lax.fori_loop(0, K, lambda _, y: step(y), x).sum()
        g = jax.jit(jax.grad(loss))
        g(x0).block_until_ready()
        rows[f"jax.jit {name}"] = lambda g=g: g(x0).block_until_ready()
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    config = TimingConfig.quick() if args.quick else TimingConfig.full()
    report = {"pinned": PINNED, "first_use": first_use(), "sizes": {}}
    print(f"first use of a new custom op: {report['first_use']}")
    for n in SIZES:
        rows = {**tapegrad_rows(n), **torch_rows(n), **jax_rows(n)}
        entries = [Entry(key, call_batch(fn)) for key, fn in rows.items()]
        run_rounds(entries, config)
        table = {e.key: summarize(e.samples["call"]) for e in entries}
        report["sizes"][n] = table
        floor = table["tapegrad built-in compiled"]["median_s"]
        print(f"\nK = {K} records of {n} value{'s' if n > 1 else ''}, forward + backward")
        print(f"{'':32s} {'median ms':>10s} {'ns/record':>10s} {'vs built-in compiled':>22s}")
        for key, s in table.items():
            print(f"{key:32s} {1e3 * s['median_s']:10.3f} {1e9 * s['median_s'] / K:10.1f} "
                  f"{s['median_s'] / floor:21.2f}x")
        if "jax.jit built-in" not in table:
            print("jax: not installed (optional peer)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
