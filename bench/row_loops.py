"""Two row-by-row loops from real PyTorch programs (ADBench's bundle adjustment), against
PyTorch, at several sizes, to show how their cost grows with the number of rows p.

* **fill** -- ``err = empty(p, 2); for j: err[j] = w * x[j] + w[0] * w[1]``, then
  ``(err ** 2).sum().backward()``: a buffer written row by row.  Each write costs the row,
  not the buffer (a WRITE record), so time and memory grow linearly in p.
* **jacobian** -- for each row j, ``res = f(cam[j], x[j])`` (two outputs) and one
  ``backward(retain_graph=True)`` per output, as ADBench computes Jacobians.  Each backward
  plans and sweeps its own graph: the graphs of earlier rows are on other tapes.

Columns: median seconds per call and per row; the ratio to PyTorch.  Peak memory is not
measured here (tests/test_write_in_place.py checks what one write allocates).
Timing follows bench/timing.py (interleaved rounds, one pinned CPU).

Run: ``python -m bench.row_loops [--quick] [--json PATH]``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from bench.machine import REPO_DIR, one_thread_everywhere, pin_to_one_cpu  # noqa: E402

one_thread_everywhere()

PINNED = pin_to_one_cpu()
sys.path.insert(0, os.path.join(REPO_DIR, "src"))

import numpy as np  # noqa: E402

from bench.timing import Entry, TimingConfig, call_batch, run_rounds, summarize  # noqa: E402

SIZES = (250, 1000, 4000)


def fill(lib, p):
    w = lib.tensor([1.5, -0.5], requires_grad=True)
    xs = lib.tensor(np.linspace(0.0, 1.0, p))

    def call():
        err = lib.empty((p, 2), dtype=lib.float64)
        for j in range(p):
            err[j] = w * xs[j] + w[0] * w[1]
        w.grad = None
        (err ** 2).sum().backward()
    return call


def jacobian(lib, p):
    rng = np.random.default_rng(0)
    cams = [lib.tensor(rng.uniform(0.1, 1.0, 11), requires_grad=True) for _ in range(p)]
    xs = [lib.tensor(rng.uniform(0.1, 1.0, 3) + [0.0, 0.0, 3.0], requires_grad=True)
          for _ in range(p)]

    def f(cam, x):
        xc = x - cam[3:6]
        return (xc[0:2] / xc[2] * cam[6] + cam[7:9]) * cam[0]

    def call():
        for j in range(p):
            res = f(cams[j], xs[j])
            for item in res:
                cams[j].grad = None
                xs[j].grad = None
                item.backward(retain_graph=True)
    return call


def libraries():
    import tapegrad
    libs = {"tapegrad": tapegrad}
    try:
        import torch
    except ImportError:
        return libs
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    libs["torch"] = torch
    return libs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    config = TimingConfig.quick() if args.quick else TimingConfig.full()
    libs = libraries()
    report = {"pinned": PINNED, "loops": {}}
    for name, make in (("fill", fill), ("jacobian", jacobian)):
        print(f"\n{name}: {make.__doc__ or ''}".rstrip())
        print(f"{'rows':>6s} {'library':>9s} {'median s':>10s} {'us/row':>8s} {'vs torch':>9s}")
        for p in SIZES:
            entries = [Entry(key, call_batch(make(lib, p))) for key, lib in libs.items()]
            run_rounds(entries, config)
            table = {e.key: summarize(e.samples["call"]) for e in entries}
            report["loops"].setdefault(name, {})[p] = table
            for key, s in table.items():
                ratio = (f"{s['median_s'] / table['torch']['median_s']:8.2f}x"
                         if "torch" in table else "        -")
                print(f"{p:6d} {key:>9s} {s['median_s']:10.4f} {1e6 * s['median_s'] / p:8.1f} "
                      f"{ratio}")
    if "torch" not in libs:
        print("torch: not installed (optional peer)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
