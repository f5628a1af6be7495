"""``--scaling``: how the per-unit cost moves with size (W1 ops, W4 elements, W5 steps).

Each point is a full ``measure_workload`` run (cross-check included) at that size. Per-op
overhead should flatten out as the chain grows; a library whose cost per unit keeps
rising has something super-linear in it (a graph sort, a compile that grows with the
program). A peer is not run at the next size when its call scaled linearly to that size
would exceed ``cap_s``, or when its first call already did. A first call that is mostly
compile is scaled too only where the peer says its compile grows with the size: jax.jit's
compile of the unrolled W1 chain grows faster than linearly (8 s at 2000 ops, 112 s at
5000 here), while a ``fori_loop`` or a numba kernel compiles once whatever the size.

W1 stops at 15000 ops: d loss/dx shrinks ~17 decades per 1000 ops (7e-35 at 2000, 9e-171 at
10000) and at 20000 it is 1e-323, a subnormal. XLA flushes subnormals to zero, so the
cross-check could no longer tell a right gradient from a wrong one.
"""
from __future__ import annotations

import gc

from bench.measure import measure_workload
from bench.peers import Peer
from bench.progress import log
from bench.timing import TimingConfig

SIZES = {
    "W1": (100, 500, 2000, 5000, 15000),
    "W4": (10**3, 10**4, 10**5, 10**6, 10**7),
    "W5": (10, 100, 1000, 10000),
}
QUICK_SIZES = {
    "W1": (100, 2000, 15000),
    "W4": (10**3, 10**5, 10**7),
    "W5": (10, 1000, 10000),
}


def run_scaling(peers: list[Peer], config: TimingConfig, quick: bool, cap_s: float,
                workloads=("W1", "W4", "W5"), progress: bool = True) -> dict:
    """Sweep sizes per workload; JSON-ready dict ``{workload: [point, ...]}``."""
    sizes = QUICK_SIZES if quick else SIZES
    out: dict[str, list] = {}
    for name in workloads:
        dropped: dict[str, str] = {}
        points = []
        for size, next_size in zip(sizes[name], sizes[name][1:] + (None,)):
            active = [p for p in peers if name in p.setups and p.name not in dropped]
            point = measure_workload(name, active, config, size=size, progress=progress,
                                     first_call_only_after_s=cap_s, label=f"{name} @ {size:g}")
            for peer_name, reason in dropped.items():
                point["rows"][peer_name] = {"status": "skipped", "note": reason}
            for peer in active if next_size else ():
                row = point["rows"][peer.name]
                growth = next_size / size
                first, steady = row.get("first_call_s", 0.0), row.get("median_s", 0.0)
                if name in peer.compile_grows_with_size:
                    first *= growth
                predicted = max(first, steady * growth)
                if row["status"] == "error":
                    dropped[peer.name] = f"not run above {size:g}: error"
                elif predicted > cap_s:
                    dropped[peer.name] = (f"not run above {size:g}: a call at {next_size:g} "
                                          f"would take about {predicted:.0f} s (cap {cap_s:g} s)")
                else:
                    continue
                log(f"[scaling {name}] {peer.name}: {dropped[peer.name]}")
            points.append(point)
            gc.collect()
        out[name] = points
    return out
