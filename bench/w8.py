"""W8: mid-size vectorised eager code -- the PyTorch tutorial's cubic fit (workload text:
shared/bench/WORKLOADS.md, "W8").

Two variants, each at N = 10^2, 10^3, 10^4, 10^5 points ``x = linspace(-pi, pi, N)``,
``y = sin(x)`` (the same NumPy arrays are converted by every library):

* **cubic** -- parameters ``a, b, c, d`` (0-d, starting at 0.1, 0.2, -0.1, 0.05); one step is
  ``y_pred = a + b*x + c*x**2 + d*x**3; loss = (y_pred - y).pow(2).sum(); loss.backward()``,
  then under ``no_grad`` ``p -= 1e-6 * p.grad; p.grad = None`` for each parameter.
* **linear** -- a fixed ``(N, 16)`` feature matrix ``X`` of standard normal draws from
  ``numpy.random.default_rng(8)`` (drawn afresh for each N, followed by the starting weights
  ``w = 0.1 * standard_normal(16)`` from the same generator); one step is
  ``loss = ((X @ w - y)**2).mean()``, backward, the same SGD update of ``w``.

"Per step" is all of it: forward, backward and the update.  Rows:

* **tapegrad eager** -- the step as written above, through tapegrad's PyTorch-like API;
* **tapegrad compiled** -- ``tapegrad.compile`` of a function computing the loss from the
  parameters and the data (passed as arguments), then ``.backward()`` on its result and the
  same ``no_grad`` update; after the warm-up its ``stats.replays`` must be > 0 (a warning
  is printed, and recorded in the JSON, when it is not: the row then measures eager calls);
* **torch eager** -- PyTorch CPU eager, float64, ``torch.set_num_threads(1)``;
* **numpy by hand** -- loss and analytic gradient written out with NumPy (parameters are
  Python floats; the powers of ``x`` are recomputed every step as eager code does): the floor
  for eager code;
* **jax.jit** -- ``jax.jit`` of ``value_and_grad`` plus the update, returning the new
  parameters; jax is an optional peer, reported as not installed without it.

Before anything is timed, every library's loss, gradients and updated parameters after one
step from the starting point are asserted to agree with NumPy's (rtol 1e-10).  Then each
row gets 50 untimed warm-up steps, and bench/timing.py's interleaved rounds (its own few
warm-up calls, then rounds in a rotating order; one pinned CPU, one thread everywhere, GC
on) give the median and min per step.  The table shows the median in µs and its ratio to
PyTorch eager; the JSON holds median, min and sample count.  The parameters move by the
SGD steps during timing (thousands of steps per row); that changes values, not the work.

One departure from the workload text: the cubic's SGD step is ``min(1e-6, 1e-3 / N)``, not
1e-6 at every N.  Its loss is a *sum*, so its Hessian grows with N (largest eigenvalue about
``2 * N * pi**6 / 7``) and lr 1e-6 diverges for N >= 10^4: the parameters overflow to
inf/NaN within a few hundred steps, and the rows would time arithmetic on NaNs.  Up to
N = 10^3 (the tutorial uses 2000 points) the step is 1e-6; the linear variant's loss is a
mean and keeps 1e-6.  After the timed rounds each row's loss is checked to be finite.

Run: ``python -m bench.w8 [--quick] [--json PATH]``.
"""
from __future__ import annotations

import json
import math
import os
import sys

from bench.machine import (REPO_DIR, load_average, one_thread_everywhere,
                           pin_to_one_cpu)

one_thread_everywhere()

PINNED = pin_to_one_cpu()
sys.path.insert(0, os.path.join(REPO_DIR, "src"))

import numpy as np  # noqa: E402

from bench.timing import (Entry, call_batch, run_rounds, script_arguments,  # noqa: E402
                          summarize)

SIZES = (10 ** 2, 10 ** 3, 10 ** 4, 10 ** 5)
VARIANTS = ("cubic", "linear")
FEATURES = 16
CUBIC_START = (0.1, 0.2, -0.1, 0.05)
LR = 1e-6
CUBIC_LR_SCALE = 1e-3   # the cubic's lr is min(LR, CUBIC_LR_SCALE / N): see the docstring
WARMUP_STEPS = 50
RTOL = 1e-10
ROWS = ("tapegrad eager", "tapegrad compiled", "torch eager", "numpy by hand", "jax.jit")
TITLES = {
    "cubic": "y_pred = a + b*x + c*x**2 + d*x**3; loss = (y_pred - y).pow(2).sum()",
    "linear": f"loss = ((X @ w - y)**2).mean(), X (N, {FEATURES}) seeded normal",
}


def make_data(variant, n):
    """The NumPy arrays every library starts from: x, y, and (X, w0) or the cubic's start."""
    x = np.linspace(-math.pi, math.pi, n)
    y = np.sin(x)
    if variant == "cubic":
        return {"x": x, "y": y, "start": np.array(CUBIC_START), "lr": lr_for(variant, n)}
    rng = np.random.default_rng(8)
    X = rng.standard_normal((n, FEATURES))
    return {"x": x, "y": y, "X": X, "start": 0.1 * rng.standard_normal(FEATURES),
            "lr": lr_for(variant, n)}


def lr_for(variant, n):
    """The SGD step: 1e-6, except where it would make the cubic's sum loss diverge."""
    return min(LR, CUBIC_LR_SCALE / n) if variant == "cubic" else LR


# ---------------------------------------------------------------------------------------------
# the libraries: each setup returns (step, extra) where step(record=None) runs one full step
# and, given a dict, fills it with the loss, the gradients and the updated parameters as
# NumPy values (only for the check before timing)
# ---------------------------------------------------------------------------------------------
def _tensor_lib_step(lib, variant, data, compiled):
    """tapegrad and torch share the step's code: the API is the same."""
    as_tensor = lib.tensor if lib.__name__ == "tapegrad" else lib.from_numpy
    y = as_tensor(data["y"])
    if variant == "cubic":
        x = as_tensor(data["x"])
        params = [lib.tensor(float(v), dtype=lib.float64, requires_grad=True)
                  for v in data["start"]]

        def loss_of(a, b, c, d, x, y):
            y_pred = a + b * x + c * x ** 2 + d * x ** 3
            return (y_pred - y).pow(2).sum()
        inputs = (x, y)
    else:
        X = as_tensor(data["X"])
        params = [lib.tensor(data["start"].copy(), requires_grad=True)]

        def loss_of(w, X, y):
            return ((X @ w - y) ** 2).mean()
        inputs = (X, y)

    fn = lib.compile(loss_of) if compiled else loss_of
    lr = data["lr"]

    def step(record=None):
        loss = fn(*params, *inputs)
        loss.backward()
        if record is not None:
            record["loss"] = float(loss.item())
            record["grads"] = [p.grad.detach().numpy().copy() for p in params]
        with lib.no_grad():
            for p in params:
                p -= lr * p.grad
                p.grad = None
        if record is not None:
            record["params"] = [p.detach().numpy().copy() for p in params]

    return step, (fn if compiled else None)


def tapegrad_eager(variant, data):
    import tapegrad as tg
    return _tensor_lib_step(tg, variant, data, compiled=False)


def tapegrad_compiled(variant, data):
    import tapegrad as tg
    return _tensor_lib_step(tg, variant, data, compiled=True)


def torch_eager(variant, data):
    import torch
    torch.set_num_threads(1)
    return _tensor_lib_step(torch, variant, data, compiled=False)


def numpy_by_hand(variant, data):
    x, y, lr = data["x"], data["y"], data["lr"]
    if variant == "cubic":
        params = [float(v) for v in data["start"]]

        def step(record=None):
            a, b, c, d = params
            x2 = x * x
            x3 = x2 * x
            r = a + b * x + c * x2 + d * x3 - y
            loss = r @ r
            g = 2.0 * r
            grads = [float(g.sum()), float(g @ x), float(g @ x2), float(g @ x3)]
            for i in range(4):
                params[i] -= lr * grads[i]
            if record is not None:
                record["loss"] = float(loss)
                record["grads"] = [np.array(v) for v in grads]
                record["params"] = [np.array(v) for v in params]
        return step, None

    X = data["X"]
    w = data["start"].copy()
    scale = 2.0 / x.size

    def step(record=None):
        r = X @ w - y
        loss = (r @ r) / x.size
        g = scale * (X.T @ r)
        w[...] -= lr * g
        if record is not None:
            record["loss"] = float(loss)
            record["grads"] = [g.copy()]
            record["params"] = [w.copy()]
    return step, None


def jax_jit(variant, data):
    import jax
    import jax.numpy as jnp
    y, lr = jnp.asarray(data["y"]), data["lr"]
    if variant == "cubic":
        x = jnp.asarray(data["x"])
        state = [tuple(jnp.asarray(float(v)) for v in data["start"])]

        def loss_of(params, x, y):
            a, b, c, d = params
            return jnp.sum((a + b * x + c * x ** 2 + d * x ** 3 - y) ** 2)
        inputs = (x, y)
    else:
        X = jnp.asarray(data["X"])
        state = [(jnp.asarray(data["start"]),)]

        def loss_of(params, X, y):
            (w,) = params
            return jnp.mean((X @ w - y) ** 2)
        inputs = (X, y)

    @jax.jit
    def update(params, *inputs):
        loss, grads = jax.value_and_grad(loss_of)(params, *inputs)
        return tuple(p - lr * g for p, g in zip(params, grads)), loss, grads

    def step(record=None):
        params, loss, grads = update(state[0], *inputs)
        jax.block_until_ready(params)
        state[0] = params
        if record is not None:
            record["loss"] = float(loss)
            record["grads"] = [np.asarray(g) for g in grads]
            record["params"] = [np.asarray(p) for p in params]
    return step, None


SETUPS = {"tapegrad eager": tapegrad_eager, "tapegrad compiled": tapegrad_compiled,
          "torch eager": torch_eager, "numpy by hand": numpy_by_hand, "jax.jit": jax_jit}


def _check(name, got, want):
    """Assert one step of ``name`` agrees with NumPy's: loss, gradients, updated parameters."""
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=RTOL, atol=0,
                               err_msg=f"{name}: loss")
    for what in ("grads", "params"):
        assert len(got[what]) == len(want[what]), (name, what)
        for i, (g, w) in enumerate(zip(got[what], want[what])):
            np.testing.assert_allclose(np.asarray(g, dtype=float).reshape(np.shape(w)), w,
                                       rtol=RTOL, atol=0, err_msg=f"{name}: {what}[{i}]")


def run_size(variant, n, config):
    data = make_data(variant, n)
    reference = {}
    numpy_by_hand(variant, data)[0](reference)
    notes, entries, compiled_fns, steps = {}, [], {}, {}
    for name in ROWS:
        try:
            # a fresh state for the check, another one for timing: both start at the start
            check_step, _ = SETUPS[name](variant, data)
            got = {}
            check_step(got)
            _check(name, got, reference)
            step, fn = SETUPS[name](variant, data)
        except ImportError as exc:
            notes[name] = f"not installed ({exc.name}; optional peer)"
            continue
        if fn is not None:
            compiled_fns[name] = fn
        for _ in range(WARMUP_STEPS):
            step()
        steps[name] = step
        entries.append(Entry(name, call_batch(step)))
    for name, fn in compiled_fns.items():
        stats = fn.stats
        if stats.replays <= 0:
            notes[name] = f"did not replay: {stats}"
            print(f"WARNING: W8 {variant} N={n}: {name} did not replay after "
                  f"{WARMUP_STEPS} warm-up steps ({stats})", file=sys.stderr)
    run_rounds(entries, config)
    result = {e.key: summarize(e.samples["call"]) for e in entries}
    for name, step in steps.items():
        after = {}
        step(after)
        if not np.isfinite(after["loss"]):
            notes[name] = f"loss not finite after timing ({after['loss']})"
            print(f"WARNING: W8 {variant} N={n}: {name}: {notes[name]}", file=sys.stderr)
    for name, fn in compiled_fns.items():
        result[name]["stats"] = str(fn.stats)
    for name, note in notes.items():
        result.setdefault(name, {})["note"] = note
    return result


def render(variant, table):
    """One markdown table: µs per step (median) and × PyTorch eager, a column per N."""
    lr = ("min(1e-6, 1e-3/N)" if variant == "cubic" else f"{LR:g}")
    lines = [f"W8 {variant}: {TITLES[variant]}; backward; SGD lr {lr}",
             "µs per step, median (× PyTorch eager)", "",
             "| library | " + " | ".join(f"N={n:,}" for n in SIZES) + " |",
             "|---|" + "---:|" * len(SIZES)]
    missing = []
    for name in ROWS:
        cells = []
        for n in SIZES:
            r = table[n].get(name, {})
            if "median_s" not in r:
                cells.append("—")
                continue
            torch_s = table[n].get("torch eager", {}).get("median_s")
            ratio = f" ({r['median_s'] / torch_s:.2f}×)" if torch_s else ""
            cells.append(f"{r['median_s'] * 1e6:.1f}{ratio}")
        if all(c == "—" for c in cells):
            missing.append(name)
            continue
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for name in ROWS:
        notes = {table[n][name]["note"] for n in SIZES if "note" in table[n].get(name, {})}
        for note in sorted(notes):
            if name == "jax.jit" and note.startswith("not installed"):
                lines.append("jax: not installed (optional peer)")
            else:
                lines.append(f"{name}: {note}")
    return "\n".join(lines)


def measure(config):
    """variant -> N -> row -> summary, every variant at every size (``python -m bench``
    runs this too, with ``--workloads W8``)."""
    results = {}
    for variant in VARIANTS:
        results[variant] = {}
        for n in SIZES:
            results[variant][n] = run_size(variant, n, config)
            print(f"W8 {variant} N={n}: done", file=sys.stderr)
    return results


def main(argv=None):
    args = script_arguments(__doc__, "w8.json", argv)
    config = args.config
    load_start = load_average()
    results = measure(config)
    load_end = load_average()
    print(f"W8 on CPU {PINNED}, one thread, float64; load average {load_start} -> {load_end}")
    for variant in VARIANTS:
        print()
        print(render(variant, results[variant]))
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"pinned_cpu": PINNED, "quick": args.quick,
                   "load_average": {"start": load_start, "end": load_end},
                   "warmup_steps": WARMUP_STEPS,
                   "lr": {v: {str(n): lr_for(v, n) for n in SIZES} for v in VARIANTS},
                   "variants": {v: {str(n): rows for n, rows in table.items()}
                                for v, table in results.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
