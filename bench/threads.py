"""W4 with one thread and with all of them: tapegrad against PyTorch's default threading.

W4 (shared/bench/WORKLOADS.md): ``loss = sum(tanh(x)*x + exp(-x*x))`` and ``dloss/dx`` for
``x`` of 10^7 standard normal values (seed 4).  Rows, each timed as a whole call (forward,
backward, reading the gradient):

* **tapegrad eager / compiled, 1 thread** -- ``tapegrad.set_num_threads(1)``;
* **tapegrad eager / compiled, N threads** -- numba's count (the CPUs this process may run
  on): generated backward loops of 10^5 positions or more without a sum run on them
  (codegen.PARALLEL_MIN); NumPy's ufuncs in the forward stay on one thread;
* **torch, 1 thread** and **torch, default** -- ``torch.set_num_threads(1)`` and the count
  PyTorch starts with;
* **jax.jit** -- at XLA's default threading (an optional peer).

Each call sets its own thread count first, so the rows can share one process and be timed
in bench/timing.py's interleaved rounds (no CPU pinning here: the point is using them all).
Before timing, every row's loss and gradient are checked against NumPy's (rtol 1e-10).

Run: ``python -m bench.threads [--quick] [--json PATH]``.
"""
from __future__ import annotations

import json
import os
import sys

from bench.machine import REPO_DIR, load_average

sys.path.insert(0, os.path.join(REPO_DIR, "src"))

import numpy as np  # noqa: E402

from bench.timing import Entry, TimingConfig, call_batch, run_rounds, summarize  # noqa: E402

N = 10**7
RTOL = 1e-10


def _x():
    return np.random.default_rng(4).standard_normal(N)


def _reference(xv):
    t = np.tanh(xv)
    return float(np.sum(t * xv + np.exp(-xv * xv))), (1 - t * t) * xv + t - 2 * xv * np.exp(-xv * xv)


def _tapegrad(compiled, threads):
    import tapegrad as tg
    x = tg.tensor(_x(), requires_grad=True)

    def loss_of(x):
        return (tg.tanh(x) * x + tg.exp(-x * x)).sum()
    fn = tg.compile(loss_of) if compiled else loss_of

    def call():
        tg.set_num_threads(threads)
        x.grad = None
        loss = fn(x)
        loss.backward()
        return loss.item(), x.grad.numpy()
    return call


def _torch(threads):
    import torch
    x = torch.from_numpy(_x()).requires_grad_(True)

    def call():
        torch.set_num_threads(threads)
        x.grad = None
        loss = (torch.tanh(x) * x + torch.exp(-x * x)).sum()
        loss.backward()
        return loss.item(), x.grad.numpy()
    return call


def _jax():
    os.environ.setdefault("JAX_ENABLE_X64", "1")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    x = jnp.asarray(_x())
    value_and_grad = jax.jit(jax.value_and_grad(
        lambda x: jnp.sum(jnp.tanh(x) * x + jnp.exp(-x * x))))

    def call():
        loss, g = value_and_grad(x)
        return float(loss), np.asarray(g)
    return call


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=os.path.join(REPO_DIR, "bench", "results",
                                                       "threads.json"))
    args = parser.parse_args(argv)
    import numba
    import torch
    cores = numba.get_num_threads()
    torch_default = torch.get_num_threads()
    rows = {"tapegrad eager, 1 thread": lambda: _tapegrad(False, 1),
            f"tapegrad eager, {cores} threads": lambda: _tapegrad(False, cores),
            "tapegrad compiled, 1 thread": lambda: _tapegrad(True, 1),
            f"tapegrad compiled, {cores} threads": lambda: _tapegrad(True, cores),
            "torch, 1 thread": lambda: _torch(1),
            f"torch, default ({torch_default} threads)": lambda: _torch(torch_default),
            "jax.jit, default": _jax}
    loss_want, grad_want = _reference(_x())
    entries, notes = [], {}
    for name, make in rows.items():
        try:
            call = make()
        except ImportError as exc:
            notes[name] = f"not installed ({exc.name}; optional peer)"
            continue
        for _ in range(4):     # compiled: generated on its third replay; eager: its third sweep
            loss, grad = call()
        assert abs(loss - loss_want) <= RTOL * abs(loss_want), (name, loss, loss_want)
        np.testing.assert_allclose(grad, grad_want, rtol=RTOL, atol=1e-14, err_msg=name)
        entries.append(Entry(name, call_batch(call)))
        print(f"threads: {name} checked", file=sys.stderr)
    config = (TimingConfig.quick() if args.quick else
              TimingConfig(budget_s=20.0, min_rounds=7, max_rounds=41, target_batch_s=0.02,
                           max_batch=10, slow_call_s=5.0, slow_min_rounds=3))
    load_start = load_average()
    run_rounds(entries, config)
    load_end = load_average()
    result = {e.key: summarize(e.samples["call"]) for e in entries}
    torch_default_s = result.get(f"torch, default ({torch_default} threads)", {}).get("median_s")
    print(f"W4 (x of 10^7), float64, {cores} CPUs, not pinned; load average {load_start} -> "
          f"{load_end}")
    print()
    print("| library | ms per call, median | × torch default |")
    print("|---|---:|---:|")
    for name, r in result.items():
        ratio = f"{r['median_s'] / torch_default_s:.2f}×" if torch_default_s else "—"
        print(f"| {name} | {r['median_s'] * 1e3:.1f} | {ratio} |")
    for name, note in notes.items():
        print(f"{name}: {note}")
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"cpus": cores, "torch_default_threads": torch_default,
                   "load_average": {"start": load_start, "end": load_end},
                   "rows": result, "notes": notes}, f, indent=1)


if __name__ == "__main__":
    main()
