"""Numba settings decided once, for every compiled kernel in tapegrad.

`kernel` is the decorator all kernels use. `cache=True` needs a writable cache location;
on a read-only install (site-packages and $HOME not writable) numba raises at import time,
so we point it at a per-user temp directory first.
"""
import hashlib
import os
import tempfile

import numba
from numba.core.caching import CompileResultCacheImpl, FunctionCache


def _ensure_cache_dir():
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    here = os.path.dirname(os.path.abspath(__file__))
    probe = os.path.join(here, "__pycache__")
    try:
        os.makedirs(probe, exist_ok=True)
        test = os.path.join(probe, ".write_probe")
        with open(test, "w"):
            pass
        os.remove(test)
        return
    except OSError:
        pass
    fallback = os.path.join(tempfile.gettempdir(), f"tapegrad-numba-{os.getuid()}")
    os.makedirs(fallback, exist_ok=True)
    numba.config.CACHE_DIR = fallback


_ensure_cache_dir()


def generated_dir():
    """Where generated kernels (codegen.py) are written: beside numba's cache."""
    base = numba.config.CACHE_DIR or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "__pycache__")
    folder = os.path.join(base, "tapegrad_generated")
    os.makedirs(folder, exist_ok=True)
    return folder


# ---------------------------------------------------------------------------------------------
# numba's disk cache, keyed on every file the kernels are compiled from
# ---------------------------------------------------------------------------------------------
# numba invalidates a cached function when the file that defines it changes, but the kernels
# inline rules from the op table's other modules (and generated code inlines them too): an
# edit there would leave a stale sweep in the cache.  So each cached function's freshness
# stamp also carries a digest of the kernel sources.
_HERE = os.path.dirname(os.path.abspath(__file__))
_KERNEL_SOURCES = ("_config.py", "_blas.py", "ops")
_digest = None


def kernel_sources_digest():
    """A digest of the source files tapegrad's kernels are compiled from."""
    global _digest
    if _digest is None:
        h = hashlib.sha256()
        for entry in _KERNEL_SOURCES:
            path = os.path.join(_HERE, entry)
            files = ([os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".py")]
                     if os.path.isdir(path) else [path])
            for name in files:
                with open(name, "rb") as f:
                    h.update(os.path.relpath(name, _HERE).encode() + b"\0" + f.read() + b"\0")
        _digest = h.hexdigest()
    return _digest


def _stamped(locator):
    class Stamped(locator):
        def get_source_stamp(self):
            return (super().get_source_stamp(), kernel_sources_digest())
    Stamped.__name__ = f"Stamped{locator.__name__}"
    return Stamped


class _CacheImpl(CompileResultCacheImpl):
    _locator_classes = [_stamped(c) for c in CompileResultCacheImpl._locator_classes]


class _Cache(FunctionCache):
    _impl_class = _CacheImpl


def cache_for(fn):
    """The disk cache a compiled ``fn`` loads from and saves to (stamped as above)."""
    return _Cache(fn)


# A compile that takes longer than this says so once on stderr: on a fresh machine the first
# calls compile kernels for seconds, and a silent terminal reads as a hang.
_NOTICE_AFTER = 1.0
_noticed = False


def report_compile(compile_fn, what):
    """Run ``compile_fn()``; if it is still running after a second, say once per process what
    is compiling (TAPEGRAD_QUIET=1 silences it)."""
    global _noticed
    if _noticed or os.environ.get("TAPEGRAD_QUIET"):
        return compile_fn()
    import sys
    import threading

    def notice():
        global _noticed
        if not _noticed:
            _noticed = True
            print(f"tapegrad: compiling kernels ({what}); this happens once per machine, "
                  "later runs load them from numba's cache", file=sys.stderr, flush=True)
    timer = threading.Timer(_NOTICE_AFTER, notice)
    timer.daemon = True
    timer.start()
    try:
        return compile_fn()
    finally:
        timer.cancel()


def _cached(options):
    """A decorator compiling with ``options`` and caching on disk under the stamp above
    (what ``cache=True`` does, with this cache instead of numba's default one)."""
    def decorate(fn):
        dispatcher = numba.njit(**options)(fn)
        dispatcher._cache = _Cache(dispatcher.py_func)
        return dispatcher
    return decorate


# error_model='numpy': division by zero gives inf/nan like NumPy instead of raising, and
# the division fast path is kept (the 'python' model was 6x slower on divisions).
# fastmath stays off: it changes NaN/inf behaviour, which must follow IEEE.
kernel = _cached(dict(nogil=True, error_model="numpy"))
inline = numba.njit(inline="always", error_model="numpy")
# An op's whole-record rule.  The sweeps never call one: they call an op's entry through a
# table of addresses (ops/entries.py; inlining every rule into every sweep made numba's
# compile of the sweeps take minutes and gigabytes).  Each entry calls one rule, and takes
# it inlined: one compile instead of two on first use (a rule compiled on its own cost each
# entry 0.1-0.2 s more on a fresh machine).
rule = numba.njit(inline="always", nogil=True, error_model="numpy")

# Kernels whose loop over samples runs on numba's threads.  Cached like the others: on numba
# 0.68 here a parallel kernel loaded from the cache in a fresh process gave the same results
# (tests/test_batch.py runs one in a child process).
parallel_kernel = _cached(dict(parallel=True, nogil=True, error_model="numpy"))
prange = numba.prange
