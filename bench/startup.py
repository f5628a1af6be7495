"""W6: time a fresh interpreter that imports a library and computes one gradient.

Each case runs as ``python -c SNIPPET`` in a child that inherits this process's
environment (one thread everywhere) and CPU pinning. One untimed run per case first warms
the OS file cache (and, for tapegrad's warm-cache case, fills its numba cache); then
``runs`` timed rounds are interleaved across cases. Every run's printed gradient is
checked against ``2*x``.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from bench.peers import Peer, StartupCase
from bench.progress import Progress, log
from bench.workloads import make_inputs

TIMEOUT_S = 600  # a cold compile of a big dispatch kernel takes seconds, not minutes

BARE = StartupCase("python_bare", "pass", check=False, note="python -c pass, for reference")


def measure_startup(peers: list[Peer], runs: int, quick: bool = False,
                    progress: bool = True) -> dict:
    """Run every peer's startup cases; JSON-ready dict keyed by case name."""
    cases = [BARE] + [case for peer in peers for case in peer.startup]
    expected = 2.0 * np.array(make_inputs("W6")["x"])
    rows: dict[str, dict] = {}
    with Progress("W6", total=len(cases) * (runs + 1), enabled=progress) as bar:
        live = []
        for case in cases:  # untimed warm-up run
            rows[case.name] = {"status": "ok", "note": case.note, "samples_s": []}
            if quick and case.quick_skip:
                rows[case.name].update(status="skipped",
                                       note=f"left out of --quick: {case.quick_skip}")
                bar.update(runs + 1)
                continue
            bar.status(f"{case.name}: warm-up")
            _, problem, _ = _run(case, expected)
            if problem:
                rows[case.name].update(status="error", note=problem)
                log(f"[W6] {case.name}: ERROR {problem}")
                bar.update(runs + 1)
                continue
            live.append(case)
            bar.update()
        for r in range(runs):
            shift = r % max(1, len(live))
            for case in live[shift:] + live[:shift]:
                bar.status(f"run {r + 1}/{runs}: {case.name}")
                seconds, problem, reading = _run(case, expected)
                row = rows[case.name]
                if reading is not None:
                    row.setdefault("readings_s", []).append(reading)
                if problem:
                    row["status"] = "invalid"
                    row["note"] = f"run {r + 1}: {problem}"
                    log(f"!!! [W6] {case.name}: {problem}")
                row["samples_s"].append(seconds)
                bar.update()
    for row in rows.values():
        if row["samples_s"]:
            row.update(median_s=statistics.median(row["samples_s"]), min_s=min(row["samples_s"]),
                       n=len(row["samples_s"]))
        if row.get("readings_s"):
            row["reading_median_s"] = statistics.median(row["readings_s"])
    return {"workload": "W6", "runs": runs, "rows": rows}


def _run(case: StartupCase, expected: np.ndarray) -> tuple[float, str | None, float | None]:
    """Wall time of one child process, what went wrong (None when all is well), and the
    case's ``reading`` of its output (None without one)."""
    env = dict(os.environ)
    # Python's bytecode cache as on a user's machine: with PYTHONDONTWRITEBYTECODE set (as
    # in some sandboxes and containers) every import of a package installed from source,
    # tapegrad's editable install included, compiles all of its modules again (about 0.2 s
    # for tapegrad here), while peers installed from wheels have theirs already.  The
    # untimed first run of each case writes the cache.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(case.env())
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", case.code], env=env, capture_output=True,
                              text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return TIMEOUT_S, f"timed out after {TIMEOUT_S} s", None
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no stderr)"]
        return seconds, f"exit code {proc.returncode}: {tail[0][:200]}", None
    reading = case.reading[1](proc.stdout) if case.reading else None
    if case.reading and reading is None:
        return seconds, f"{case.reading[0]}: not found in its output", None
    if not case.check:
        return seconds, None, reading
    try:
        grad = np.array(json.loads(proc.stdout.strip().splitlines()[-1]), dtype=np.float64)
    except (ValueError, IndexError):
        return seconds, f"could not read a gradient from stdout {proc.stdout[-200:]!r}", None
    if grad.shape != expected.shape or not np.allclose(grad, expected, rtol=1e-12, atol=0):
        return seconds, f"gradient {grad.tolist()} != 2*x", None
    return seconds, None, reading
