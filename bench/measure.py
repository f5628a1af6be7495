"""Measure one in-process workload (W1-W5) across all peers.

Steps, in order: set up every peer on its own copy of the inputs; time each one's first
call (this includes any JIT compile) and keep its result; cross-check every result against
the reference; then time the steady state in interleaved rounds (``bench.timing``).
A peer that errors is reported with its error and left out; a peer whose gradients
disagree is still timed but its row is marked invalid.
"""
from __future__ import annotations

import copy
import time

from bench import check
from bench.peers import Peer, describe_error
from bench.progress import Progress, log
from bench.timing import Entry, TimingConfig, call_batch, run_rounds, split_batch, summarize
from bench.workloads import WORKLOADS, make_inputs, work_units


def measure_workload(name: str, peers: list[Peer], config: TimingConfig, size: int | None = None,
                     quick: bool = False, first_call_only_after_s: float | None = None,
                     progress: bool = True, label: str | None = None) -> dict:
    """Run workload ``name`` (optionally at another ``size``) for ``peers``; JSON-ready dict.

    ``quick``: leave out the pairs a peer lists in ``quick_skip``.
    ``first_call_only_after_s``: a peer whose first call took longer than this is not timed
    further (the scaling sweep uses it to stop at sizes that take too long).
    """
    workload = WORKLOADS[name]
    base = make_inputs(name, size)
    rows: dict[str, dict] = {}
    results, calls = {}, {}
    with Progress(label or name, total=len(peers), enabled=progress) as bar:
        for peer in peers:
            row = rows[peer.name] = {"status": "ok", "note": peer.notes.get(name, "")}
            setup = peer.setups.get(name)
            if setup is None:
                row["status"] = "undefined" if row["note"] else "not implemented"
                bar.update()
                continue
            if quick and name in peer.quick_skip:
                row.update(status="skipped", note=f"left out of --quick: {peer.quick_skip[name]}")
                bar.update()
                continue
            bar.status(f"{peer.name}: first call")
            try:
                call = setup(copy.deepcopy(base))
                start = time.perf_counter()
                result = call()
                row["first_call_s"] = time.perf_counter() - start
            except Exception as exc:  # a library failing a workload is a result, not a crash
                row.update(status="error", note=describe_error(exc))
                log(f"[{name}] {peer.name}: ERROR {row['note']}")
                bar.update()
                continue
            results[peer.name], calls[peer.name] = result, call
            bar.update()

        reference = check.pick_reference(results)
        for peer_name, result in results.items():
            _check(name, rows[peer_name], peer_name, result, results[reference], reference)

        entries = []
        for peer in peers:
            if peer.name not in calls:
                continue
            row = rows[peer.name]
            limit = first_call_only_after_s
            if limit is not None and row["first_call_s"] > limit:
                row["timed"] = False
                row["note"] = _join(row["note"], "first call only (too slow to repeat)")
                continue
            entries.append(Entry(peer.name, call_batch(calls[peer.name])))
            if name in peer.splits:
                split_entry = _split_entry(name, peer, base, results[reference], row)
                if split_entry is not None:
                    entries.append(split_entry)
        bar.status("timed rounds")
        run_rounds(entries, config, bar)

    for entry in entries:
        peer_name, _, kind = entry.key.partition("/")
        row = rows[peer_name]
        if kind == "split":
            row["split"] = {metric: summarize(values) for metric, values in entry.samples.items()}
        else:
            row.update(summarize(entry.samples["call"]), batch=entry.calls_per_batch, timed=True)
            row["samples_s"] = entry.samples["call"]
    return {"workload": name, "title": workload.title, "size": size or workload.default_size,
            "units": work_units(name, base), "per_unit": workload.per_unit,
            "reference": reference, "rows": rows}


def _check(workload: str, row: dict, peer_name: str, result, reference_result, reference: str):
    err, where = check.relative_error(result, reference_result)
    row["rel_err"] = err
    row["checked_against"] = reference
    if err > check.TOLERANCE:
        row["status"] = "invalid"
        row["note"] = _join(row["note"], f"GRADIENT MISMATCH vs {reference}: rel err {err:.2e} "
                                         f"in {where}")
        log(f"!!! [{workload}] {peer_name}: gradient mismatch against {reference}: relative "
            f"error {err:.3e} in {where} (tolerance {check.TOLERANCE:g}); timing marked INVALID")


def _split_entry(name: str, peer: Peer, base: dict, reference_result, row: dict) -> Entry | None:
    """Forward/backward timing entry on a separate instance, warmed and checked first."""
    try:
        forward, backward = peer.splits[name](copy.deepcopy(base))
        result = backward(forward())
    except Exception as exc:
        row["note"] = _join(row["note"], f"fwd/bwd split failed: {describe_error(exc)}")
        return None
    err, _ = check.relative_error(result, reference_result)
    if err > check.TOLERANCE:
        row["note"] = _join(row["note"], f"fwd/bwd split disagrees (rel err {err:.1e}); not timed")
        return None
    return Entry(f"{peer.name}/split", split_batch(forward, backward), metrics=("fwd", "bwd"))


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
