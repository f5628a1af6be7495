"""Numba settings decided once, for every compiled kernel in tapegrad.

`kernel` is the decorator all kernels use. `cache=True` needs a writable cache location;
on a read-only install (site-packages and $HOME not writable) numba raises at import time,
so we point it at a per-user temp directory first.
"""
import os

import numba
from numba.core.caching import CompileResultCacheImpl, FunctionCache

from . import _kernel_cache

# (see _kernel_cache.fallback_dir: a read-only install caches in a temp directory)
if _kernel_cache.fallback_dir():
    numba.config.CACHE_DIR = _kernel_cache.fallback_dir()


def generated_dir():
    """Where generated kernels (codegen.py) are written: beside numba's cache."""
    folder = os.path.join(_kernel_cache.cache_dir(), "tapegrad_generated")
    os.makedirs(folder, exist_ok=True)
    return folder


# ---------------------------------------------------------------------------------------------
# numba's disk cache, keyed on every file the kernels are compiled from
# ---------------------------------------------------------------------------------------------
# numba invalidates a cached function when the file that defines it changes, but the kernels
# inline rules from the op table's other modules (and generated code inlines them too): an
# edit there would leave a stale sweep in the cache.  So each cached function's freshness
# stamp also carries a digest of the kernel sources.
kernel_sources_digest = _kernel_cache.kernel_sources_digest


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
