"""Structural ops on small tensors, per op: indexing, ``cat``, ``stack``, sums and means over
dims, ``reshape``, transposes, and batched matrix products (issue: "per-op overhead of
structural ops ... at most PyTorch's, and batched matmul forward+backward at most 1.2x").

Each case is one op on small float64 tensors that require grad (``x`` is (8, 6), ``b`` is
(4, 5, 6), ``c`` is (4, 6, 3)), for tapegrad and PyTorch eager (one thread), as a training
step meets it: the op, then ``y.backward(g)`` with a fixed gradient ``g`` of y's shape (no
reduction added), and the inputs' ``.grad`` reset to None -- the two parts timed apart:

* **fwd** -- the op, recorded (its inputs require grad);
* **bwd** -- ``y.backward(g)`` and the reset: the whole backward call of a one-op graph,
  PyTorch's engine start-up and tapegrad's plan and sweep included.

Before timing, every case's value and input gradients are asserted to agree with PyTorch's
(rtol 1e-12).  Timing is bench/timing.py's: interleaved rounds, one pinned CPU, medians.  The
table gives µs per op and tapegrad's time over PyTorch's.

Run: ``python -m bench.structural [--quick] [--json PATH]``.
"""
from __future__ import annotations

import json
import os
import sys

from bench.machine import (REPO_DIR, load_average, one_thread_everywhere,
                           pin_to_one_cpu)

one_thread_everywhere()

PINNED = pin_to_one_cpu()
sys.path.insert(0, os.path.join(REPO_DIR, "src"))

import numpy as np  # noqa: E402

from bench.timing import (Entry, run_rounds, script_arguments, split_batch,  # noqa: E402
                          summarize)

RTOL = 1e-12
LIBRARIES = ("tapegrad", "torch")


def _inputs(lib):
    rng = np.random.default_rng(3)
    arrays = {"x": rng.standard_normal((8, 6)), "y": rng.standard_normal((8, 6)),
              "b": rng.standard_normal((4, 5, 6)), "c": rng.standard_normal((4, 6, 3)),
              "a": rng.standard_normal((128, 16, 16)), "w": rng.standard_normal((16, 16))}
    return {k: lib.tensor(v, requires_grad=True) for k, v in arrays.items()}


# name -> (the op, the inputs it reads)
CASES = {
    "x[2]": (lambda L, t: t["x"][2], ("x",)),
    "x[:, 1:3]": (lambda L, t: t["x"][:, 1:3], ("x",)),
    "x[[0, 2, 5]]": (lambda L, t: t["x"][[0, 2, 5]], ("x",)),
    "cat([x, y])": (lambda L, t: L.cat([t["x"], t["y"]]), ("x", "y")),
    "stack([x, y])": (lambda L, t: L.stack([t["x"], t["y"]]), ("x", "y")),
    "x.sum()": (lambda L, t: t["x"].sum(), ("x",)),
    "x.sum(1)": (lambda L, t: t["x"].sum(1), ("x",)),
    "x.mean(0)": (lambda L, t: t["x"].mean(0), ("x",)),
    "x.reshape(6, 8)": (lambda L, t: t["x"].reshape(6, 8), ("x",)),
    "x.t()": (lambda L, t: t["x"].t(), ("x",)),
    "b.transpose(1, 2)": (lambda L, t: t["b"].transpose(1, 2), ("b",)),
    "b @ c (4 x 5x6 @ 6x3)": (lambda L, t: t["b"] @ t["c"], ("b", "c")),
    "a @ w (128 x 16x16 @ 16x16)": (lambda L, t: t["a"] @ t["w"], ("a", "w")),
}


def _library(name):
    if name == "torch":
        import torch
        torch.set_num_threads(1)
        return torch
    import tapegrad
    return tapegrad


def _calls(L, case):
    """(forward call, backward call, check) for one library and case."""
    op, reads = CASES[case]
    t = _inputs(L)
    shape = tuple(op(L, t).shape)
    g = L.tensor(np.linspace(0.5, 1.5, int(np.prod(shape))).reshape(shape))

    def forward():
        return op(L, t)

    def backward(y):
        y.backward(g)
        for k in reads:
            t[k].grad = None

    def check():
        y = op(L, t)
        y.backward(g)
        out = [y.detach().numpy().copy()] + [t[k].grad.numpy().copy() for k in reads]
        for k in reads:
            t[k].grad = None
        return out

    return forward, backward, check


def run(config):
    libs = {name: _library(name) for name in LIBRARIES}
    results = {}
    for case in CASES:
        entries = []
        checks = {}
        for name, L in libs.items():
            forward, backward, check = _calls(L, case)
            checks[name] = check()
            entries.append(Entry(name, split_batch(forward, backward), ("fwd", "bwd")))
        for got, want in zip(checks["tapegrad"], checks["torch"]):
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-14, err_msg=case)
        run_rounds(entries, config)
        results[case] = {f"{e.key}/{m}": summarize(e.samples[m])
                         for e in entries for m in e.metrics}
        print(f"structural {case}: done", file=sys.stderr)
    return results


def render(results):
    lines = ["Structural ops on small float64 tensors that require grad, per op: µs, median "
             "(tapegrad / PyTorch)", "",
             "| op | fwd tapegrad | fwd PyTorch | ratio | bwd tapegrad | bwd PyTorch "
             "| ratio |", "|---|---:|---:|---:|---:|---:|---:|"]
    for case, rows in results.items():
        cells = []
        for kind in ("fwd", "bwd"):
            tg_s = rows[f"tapegrad/{kind}"]["median_s"]
            torch_s = rows[f"torch/{kind}"]["median_s"]
            cells += [f"{tg_s * 1e6:.2f}", f"{torch_s * 1e6:.2f}", f"{tg_s / torch_s:.2f}x"]
        lines.append(f"| `{case}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    args = script_arguments(__doc__, "structural.json", argv)
    load_start = load_average()
    results = run(args.config)
    load_end = load_average()
    print(f"structural ops on CPU {PINNED}, one thread, float64; load average {load_start} -> "
          f"{load_end}")
    print()
    print(render(results))
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"pinned_cpu": PINNED, "quick": args.quick,
                   "load_average": {"start": load_start, "end": load_end},
                   "cases": results}, f, indent=1)


if __name__ == "__main__":
    main()
