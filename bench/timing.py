"""Interleaved round-robin timing.

The machine's speed drifts (up to ~2x over seconds on a shared VM), so libraries are never
timed one after the other: every round runs one batch of each library, in an order rotated
from round to round, and each library's figure is the median (and min) over its rounds.
A batch repeats the call ``n`` times so that fast calls are not dominated by the timer.

Libraries differ by 10^6 in call time (hand-written floor vs micrograd), so each entry gets
its own number of rounds from a shared time budget, with at least ``min_rounds``; an
entry with fewer rounds than the busiest one has its rounds spread evenly over the whole
run, so it still samples the same stretch of machine drift. The GC stays on: libraries
that create cyclic garbage pay for it, as they would in a user's program.
"""
from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

Batch = Callable[[int], tuple]  # run n calls, return per-call seconds for each metric

WARMUP_CALLS = 5   # untimed calls per entry before calibration ...
WARMUP_S = 0.5     # ... unless they take longer than this together


@dataclass(frozen=True)
class TimingConfig:
    """How much time the timed rounds of one workload may take."""

    budget_s: float  # all entries' timed rounds together, about
    min_rounds: int  # samples per entry, unless a single call exceeds slow_call_s
    max_rounds: int
    target_batch_s: float  # calls per batch chosen so a batch lasts about this long
    max_batch: int
    slow_call_s: float  # entries slower than this per call ...
    slow_min_rounds: int  # ... are guaranteed only this many samples

    @classmethod
    def full(cls) -> TimingConfig:
        return cls(budget_s=20.0, min_rounds=7, max_rounds=201, target_batch_s=0.02,
                   max_batch=2000, slow_call_s=5.0, slow_min_rounds=3)

    @classmethod
    def sweep(cls) -> TimingConfig:
        """Per point of ``--scaling``: many points, so a smaller budget than ``full``."""
        return cls(budget_s=6.0, min_rounds=5, max_rounds=51, target_batch_s=0.01,
                   max_batch=1000, slow_call_s=1.0, slow_min_rounds=2)

    @classmethod
    def quick(cls) -> TimingConfig:
        return cls(budget_s=1.5, min_rounds=3, max_rounds=41, target_batch_s=0.005,
                   max_batch=500, slow_call_s=0.5, slow_min_rounds=1)


@dataclass
class Entry:
    """One thing to time: a key (``torch`` or ``torch/split``), and how to run a batch."""

    key: str
    batch: Batch
    metrics: tuple[str, ...] = ("call",)
    samples: dict[str, list[float]] = field(default_factory=dict)
    calls_per_batch: int = 1


def script_arguments(doc: str, json_name: str, argv=None):
    """The arguments of a workload's own script (``--quick``, ``--json``), with ``config``:
    the quick budgets, or the per-point budgets of a sweep over sizes."""
    import argparse
    import os
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--json", default=os.path.join(here, "results", json_name))
    args = parser.parse_args(argv)
    args.config = TimingConfig.quick() if args.quick else TimingConfig.sweep()
    return args


def call_batch(fn: Callable[[], object]) -> Batch:
    """Time ``n`` back-to-back calls of ``fn`` as one interval."""

    def batch(n: int) -> tuple[float]:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        return ((time.perf_counter() - start) / n,)

    return batch


def split_batch(forward: Callable[[], object], backward: Callable[[object], object]) -> Batch:
    """Time forward and backward separately, call by call (calls are milliseconds long)."""

    def batch(n: int) -> tuple[float, float]:
        t_fwd = t_bwd = 0.0
        for _ in range(n):
            t0 = time.perf_counter()
            handle = forward()
            t1 = time.perf_counter()
            backward(handle)
            t2 = time.perf_counter()
            t_fwd += t1 - t0
            t_bwd += t2 - t1
        return (t_fwd / n, t_bwd / n)

    return batch


def run_rounds(entries: list[Entry], config: TimingConfig, progress=None) -> None:
    """Fill ``entry.samples`` (per-call seconds, one value per round) for every entry."""
    if not entries:
        return
    gc.collect()  # start from a clean heap; the GC then stays on during timing

    # Warm-up: a few untimed calls each (at most WARMUP_CALLS, stopping once one entry has
    # spent WARMUP_S), so that a library whose steady state comes a few calls after its first
    # (tapegrad.compile builds generated code on its third replay; lazy kernel loading) is
    # calibrated and timed in that steady state. The first call is reported apart anyway.
    for entry in entries:
        start = time.perf_counter()
        for _ in range(WARMUP_CALLS):
            entry.batch(1)
            if time.perf_counter() - start > WARMUP_S:
                break

    # Round 0 calibrates: one call each, in order. It is kept as a sample only for entries
    # so slow that their batch is a single call anyway.
    if progress:
        progress.add_total(len(entries))
    first = {}
    per_call_of = {}
    for entry in entries:
        first[entry.key] = entry.batch(1)
        per_call_of[entry.key] = _calibrate(entry, max(sum(first[entry.key]), 1e-9), config)
        per_call = per_call_of[entry.key]
        entry.calls_per_batch = max(1, min(config.max_batch, int(config.target_batch_s / per_call)))
        if progress:
            progress.update()

    share = config.budget_s / len(entries)
    wanted = {}
    for entry in entries:
        per_call = per_call_of[entry.key]
        batch_s = per_call * entry.calls_per_batch
        floor = config.min_rounds if per_call <= config.slow_call_s else config.slow_min_rounds
        rounds = max(floor, min(config.max_rounds, int(share / batch_s)))
        if entry.calls_per_batch == 1:
            _record(entry, first[entry.key])
            rounds -= 1
        wanted[entry.key] = rounds

    total_rounds = max(wanted.values())
    schedule = {key: _spread(k, total_rounds) for key, k in wanted.items()}
    if progress:
        progress.add_total(sum(wanted.values()))
    for r in range(total_rounds):
        shift = r % len(entries)
        for entry in entries[shift:] + entries[:shift]:  # rotate the order every round
            if r in schedule[entry.key]:
                _record(entry, entry.batch(entry.calls_per_batch))
                if progress:
                    progress.update()


def _calibrate(entry: Entry, per_call: float, config: TimingConfig) -> float:
    """Seconds per call to size the batches with, from a first call that took ``per_call``.

    One call alone is a poor measure of a fast entry: a garbage collection or a cold cache
    line in it once made a 10 µs call look like 3 ms, and the entry was timed in batches of
    6 calls, where its per-call overheads showed.  So an entry whose first call is well under
    a batch's target takes the fastest of two more single calls, then a short batch of about
    a tenth of the target, and is sized by the fastest of these."""
    if per_call >= config.target_batch_s / 2:
        return per_call
    for _ in range(2):
        per_call = min(per_call, max(sum(entry.batch(1)), 1e-9))
    n = int(config.target_batch_s / 10 / per_call)
    if n > 1:
        per_call = min(per_call, max(sum(entry.batch(n)), 1e-9))
    return per_call


def _record(entry: Entry, values: tuple) -> None:
    for metric, value in zip(entry.metrics, values):
        entry.samples.setdefault(metric, []).append(value)


def _spread(k: int, total: int) -> set[int]:
    """``k`` round indices spread evenly over ``range(total)``."""
    if k <= 0:
        return set()
    return {int((j + 0.5) * total / k) for j in range(k)}


def summarize(samples: list[float]) -> dict:
    """Median, min and count of per-call seconds."""
    return {"median_s": statistics.median(samples), "min_s": min(samples), "n": len(samples)}
