"""The process's CPU pinning and a description of the machine the figures come from.

``pin_to_one_cpu`` must run before NumPy, torch or XLA start their thread pools, so that
every thread they create inherits the single-CPU affinity (so do W6's child processes).
This module imports nothing heavy at module level for that reason.
"""
from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one_thread_everywhere() -> None:
    """Ask every library for one thread, float64 in JAX (unless the caller's environment
    says otherwise): call before NumPy, numba, torch or JAX are imported."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "NUMBA_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                                       "intra_op_parallelism_threads=1")
    os.environ.setdefault("JAX_ENABLE_X64", "1")


def pin_to_one_cpu(cpu: int | None = None) -> int | None:
    """Pin this process to ``cpu`` (default: the last CPU it may run on); return it."""
    if not hasattr(os, "sched_setaffinity"):
        return None  # not Linux: nothing to pin with, the report says so
    allowed = sorted(os.sched_getaffinity(0))
    # the last CPU rather than CPU 0, which tends to take more of the machine's interrupts
    chosen = allowed[-1] if cpu is None else cpu
    os.sched_setaffinity(0, {chosen})
    return chosen


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def blas_info() -> list[dict]:
    """Thread pools NumPy & co. loaded (BLAS flavour, kernel, threads), via threadpoolctl."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keep = ("user_api", "internal_api", "version", "num_threads", "architecture", "filepath")
    return [{k: info.get(k) for k in keep} for info in threadpool_info()]


def git_revision() -> str:
    try:
        rev = subprocess.run(["git", "-C", REPO_DIR, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO_DIR, "status", "--porcelain", "--", "src"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (rev or "unknown") + (" + uncommitted changes in src/" if dirty else "")


def load_average() -> list[float] | None:
    """1/5/15-minute load: another busy process on a 2-core machine shows up here."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine_info(pinned_cpu: int | None, env_vars: tuple[str, ...], versions: dict,
                 load_at_start: list[float] | None) -> dict:
    """Everything needed to say which machine and software produced the figures."""
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu_model": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "pinned_cpu": pinned_cpu,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "git_revision": git_revision(),
        "env": {name: os.environ.get(name) for name in env_vars},
        "blas": blas_info(),
        "load_average": {"start": load_at_start, "end": load_average()},
        "versions": versions,
    }
