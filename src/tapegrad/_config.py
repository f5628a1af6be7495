"""Numba settings decided once, for every compiled kernel in tapegrad.

`kernel` is the decorator all kernels use. `cache=True` needs a writable cache location;
on a read-only install (site-packages and $HOME not writable) numba raises at import time,
so we point it at a per-user temp directory first.
"""
import os
import tempfile

import numba


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

# error_model='numpy': division by zero gives inf/nan like NumPy instead of raising, and
# the division fast path is kept (the 'python' model was 6x slower on divisions).
# fastmath stays off: it changes NaN/inf behaviour, which must follow IEEE.
kernel = numba.njit(cache=True, nogil=True, error_model="numpy")
inline = numba.njit(inline="always", error_model="numpy")

# Kernels whose loop over samples runs on numba's threads.  Cached like the others: on numba
# 0.68 here a parallel kernel loaded from the cache in a fresh process gave the same results
# (tests/test_batch.py runs one in a child process).
parallel_kernel = numba.njit(parallel=True, cache=True, nogil=True, error_model="numpy")
prange = numba.prange
