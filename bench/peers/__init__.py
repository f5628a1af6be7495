"""Peer libraries, one module each, loaded lazily.

A peer module defines ``peers() -> list[Peer]``. Importing the module imports its library,
so a library that is missing (or broken) only costs that peer: ``load_peers`` records a
note and carries on.

Contract of a setup: ``setup(inputs) -> call``, where ``inputs`` is the peer's own copy of
``bench.workloads.make_inputs(...)`` (it may mutate it) and ``call()`` computes one call of
the workload and returns ``(loss, grads)``: ``loss`` a Python float and ``grads`` a tuple
of NumPy arrays (or NumPy scalars). For W2/W3 the call is a full training step that also
applies the SGD update; it returns the gradients from *before* the update.

A split (W1 only) is ``split(inputs) -> (forward, backward)``: ``forward()`` records and
returns a handle, ``backward(handle)`` computes the gradients; used for the fwd/bwd column.
"""
from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

Result = tuple  # (loss: float, grads: tuple[np.ndarray, ...])
Setup = Callable[[dict], Callable[[], Result]]
Split = Callable[[dict], tuple]


@dataclass
class Peer:
    """One library (or one mode of a library, such as jax eager vs jax.jit)."""

    name: str
    description: str
    versions: dict[str, str]
    setups: dict[str, Setup] = field(default_factory=dict)
    splits: dict[str, Split] = field(default_factory=dict)
    # W6: Python source run as ``python -c SNIPPET``; it must print the gradient of
    # sum(x*x) as a JSON list on its last line. Several cases (tapegrad warm/cold) allowed.
    startup: list[StartupCase] = field(default_factory=list)
    # per-workload notes shown in the report, e.g. why a workload is not defined
    notes: dict[str, str] = field(default_factory=dict)
    # workloads left out of --quick runs, with the reason (a compile or a call of many seconds)
    quick_skip: dict[str, str] = field(default_factory=dict)
    # workloads whose first-call compile grows with the size (an unrolled trace); --scaling
    # extrapolates the first call of these, not only the steady call
    compile_grows_with_size: tuple[str, ...] = ()


@dataclass
class StartupCase:
    """One W6 row: a snippet plus the environment its child process gets."""

    name: str
    code: str
    # called once per run; returns environment overrides (e.g. a fresh NUMBA_CACHE_DIR)
    env: Callable[[], dict] = dict
    check: bool = True  # False for python_bare, which computes nothing
    note: str = ""
    quick_skip: str = ""  # why --quick leaves this case out (empty: it runs)
    # a figure the child prints about itself, read from its stdout: (what it is, a function
    # of the stdout giving seconds, or None where it printed none), e.g. the demo's own
    # timing of its first backward
    reading: tuple[str, Callable[[str], float | None]] | None = None


# Module name -> what to say when it cannot be imported. Order is the report's column order.
PEER_MODULES = (
    "floor_peer",
    "numpy_peer",
    "tapegrad_peer",
    "torch_peer",
    "jax_peer",
    "autograd_peer",
    "micrograd_peer",
)


def load_peers(only: set[str] | None = None) -> tuple[list[Peer], dict[str, str]]:
    """Import every peer module; return the peers that loaded and a note per failure.

    ``only`` filters by peer name (``jax_jit``) or module stem (``jax``).
    """
    loaded: list[Peer] = []
    skipped: dict[str, str] = {}
    for module_name in PEER_MODULES:
        stem = module_name.removesuffix("_peer")
        if only is not None and not any(n == stem or n.startswith(stem + "_") for n in only):
            continue  # not asked for: do not pay for importing its library
        try:
            module = importlib.import_module(f"bench.peers.{module_name}")
            found = module.peers()
        except Exception as exc:  # any failure to import is a skip, never a crash
            skipped[stem] = describe_error(exc)
            continue
        for peer in found:
            if only is None or peer.name in only or stem in only:
                loaded.append(peer)
    return loaded, skipped


def describe_error(exc: BaseException) -> str:
    """The exception as one short line, with the innermost frame for context."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" ({frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}".replace("\n", " ")[:300]


def package_version(dist: str) -> str:
    """Installed version of a distribution, or '?' when metadata is missing."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"
