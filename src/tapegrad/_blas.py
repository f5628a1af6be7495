"""Which BLAS the compiled matrix products call.

Every kernel that multiplies matrices calls one C symbol, ``tapegrad_xxgemm``, with the
by-value signature of numba's own dgemm helper (the one ``np.dot`` calls inside ``@njit``,
which loads scipy's OpenBLAS); a product with a vector calls ``tapegrad_xxgemv``, numba's
dgemv helper's.  The symbol is bound here, once per process, before any
kernel is linked, so the cached kernels stay the same whichever library is behind it:

* ``default`` -- numba's helper, i.e. scipy's OpenBLAS;
* ``mkl`` -- Intel MKL's ``dgemm`` from ``libmkl_rt`` (``pip install tapegrad[mkl]``),
  through a small compiled adapter: on Intel CPUs its products are faster (W3's first
  layer, 256x784 @ 784x256: 1.21 ms against OpenBLAS's 1.30 ms here).

``TAPEGRAD_BLAS`` chooses: ``auto`` (the default: MKL when installed), ``mkl`` (an error if
it is not) or ``default``.  ``tapegrad.blas()`` names the library in use.
"""
import ctypes
import ctypes.util
import glob
import os
import sys

import llvmlite.binding as llvm
import numba
import numpy as np
from numba import _helperlib

SYMBOL = "tapegrad_xxgemm"
GEMV_SYMBOL = "tapegrad_xxgemv"
_MKL_SYMBOL = "tapegrad_mkl_dgemm"
_MKL_GEMV_SYMBOL = "tapegrad_mkl_dgemv"
_CHOICES = ("auto", "mkl", "default")

_t = numba.types
_f64p, _i32p, _i8p = _t.CPointer(_t.float64), _t.CPointer(_t.int32), _t.CPointer(_t.int8)
# numba_xxgemm's own signature: kind ('d'), transa, transb, m, n, k, alpha*, a*, lda, b*,
# ldb, beta*, c*, ldc -- column-major, the integers by value
XXGEMM_SIGNATURE = _t.intc(_t.char, _t.char, _t.char, _t.intp, _t.intp, _t.intp,
                           _f64p, _f64p, _t.intp, _f64p, _t.intp, _f64p, _f64p, _t.intp)
# the same function as the kernels declare it: the matrices a, b and c by address (an
# integer, the same register as a pointer), so that a kernel can pass an argument's own array
XXGEMM_BY_ADDRESS = _t.intc(_t.char, _t.char, _t.char, _t.intp, _t.intp, _t.intp, _f64p,
                            _t.intp, _t.intp, _t.intp, _t.intp, _f64p, _t.intp, _t.intp)
# numba_xxgemv's: kind, trans, m, n, alpha*, a*, lda, x*, beta*, y* -- y = alpha op(A) x +
# beta y, A (m, n) column-major, x and y contiguous.  A product with a vector goes here, not
# to dgemm: OpenBLAS's dgemm with one column is a general kernel that packs the matrix first
# (W8's backward, (16, 10^5) @ (10^5,): 2.8 ms against dgemv's 0.3 ms)
XXGEMV_SIGNATURE = _t.intc(_t.char, _t.char, _t.intp, _t.intp, _f64p, _f64p, _t.intp, _f64p,
                           _f64p, _f64p)
XXGEMV_BY_ADDRESS = _t.intc(_t.char, _t.char, _t.intp, _t.intp, _f64p, _t.intp, _t.intp,
                            _t.intp, _f64p, _t.intp)
# the Fortran dgemm and dgemv: every argument a pointer, 32-bit integers (MKL's LP64 interface)
_MKL_DGEMM = _t.ExternalFunction(_MKL_SYMBOL, _t.void(
    _i8p, _i8p, _i32p, _i32p, _i32p, _f64p, _f64p, _i32p, _f64p, _i32p, _f64p, _f64p, _i32p))
_MKL_DGEMV = _t.ExternalFunction(_MKL_GEMV_SYMBOL, _t.void(
    _i8p, _i32p, _i32p, _f64p, _f64p, _i32p, _f64p, _i32p, _f64p, _f64p, _i32p))


def _mkl_library():
    """The path of MKL's single dynamic library, or None: pip's ``mkl`` wheel puts it in the
    environment's ``lib`` folder; otherwise wherever the loader finds it."""
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        found = sorted(glob.glob(os.path.join(prefix, "lib", "libmkl_rt.so*")))
        if found:
            return found[0]
    return ctypes.util.find_library("mkl_rt")


def _mkl_adapter():
    """A compiled function with numba_xxgemm's signature that calls MKL's Fortran dgemm."""
    @numba.cfunc(XXGEMM_SIGNATURE, cache=True, nopython=True)
    def mkl_xxgemm(kind, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        flags = np.empty(2, np.int8)
        flags[0], flags[1] = transa, transb
        ints = np.empty(6, np.int32)
        ints[0], ints[1], ints[2], ints[3], ints[4], ints[5] = m, n, k, lda, ldb, ldc
        _MKL_DGEMM(flags[0:].ctypes, flags[1:].ctypes, ints[0:].ctypes, ints[1:].ctypes,
                   ints[2:].ctypes, alpha, a, ints[3:].ctypes, b, ints[4:].ctypes, beta, c,
                   ints[5:].ctypes)
        return 0
    return mkl_xxgemm


def _mkl_gemv_adapter():
    """The same for numba_xxgemv's signature and MKL's dgemv (both vectors contiguous)."""
    @numba.cfunc(XXGEMV_SIGNATURE, cache=True, nopython=True)
    def mkl_xxgemv(kind, trans, m, n, alpha, a, lda, x, beta, y):
        flags = np.empty(1, np.int8)
        flags[0] = trans
        ints = np.empty(4, np.int32)
        ints[0], ints[1], ints[2], ints[3] = m, n, lda, 1
        _MKL_DGEMV(flags[0:].ctypes, ints[0:].ctypes, ints[1:].ctypes, alpha, a,
                   ints[2:].ctypes, x, ints[3:].ctypes, beta, y, ints[3:].ctypes)
        return 0
    return mkl_xxgemv


def _bind_mkl(path):
    lib = ctypes.CDLL(path)
    lib.MKL_Set_Interface_Layer.argtypes = [ctypes.c_int]
    lib.MKL_Set_Interface_Layer(0)   # LP64: 32-bit integers, as the adapters pass them
    llvm.add_symbol(_MKL_SYMBOL, ctypes.cast(lib.dgemm, ctypes.c_void_p).value)
    llvm.add_symbol(_MKL_GEMV_SYMBOL, ctypes.cast(lib.dgemv, ctypes.c_void_p).value)
    adapters = _mkl_adapter(), _mkl_gemv_adapter()
    llvm.add_symbol(SYMBOL, adapters[0].address)
    llvm.add_symbol(GEMV_SYMBOL, adapters[1].address)
    return lib, adapters


def _bind():
    choice = os.environ.get("TAPEGRAD_BLAS", "auto").strip().lower() or "auto"
    if choice not in _CHOICES:
        raise ValueError(f"TAPEGRAD_BLAS must be one of {', '.join(_CHOICES)}, got {choice!r}")
    if choice != "default":
        path = _mkl_library()
        if path is not None:
            try:
                return "mkl", _bind_mkl(path)
            except (OSError, AttributeError) as exc:
                if choice == "mkl":
                    raise ImportError(f"TAPEGRAD_BLAS=mkl: could not load {path}: {exc}")
        elif choice == "mkl":
            raise ImportError("TAPEGRAD_BLAS=mkl, but MKL is not installed "
                              "(pip install tapegrad[mkl])")
    llvm.add_symbol(SYMBOL, _helperlib.c_helpers["xxgemm"])
    llvm.add_symbol(GEMV_SYMBOL, _helperlib.c_helpers["xxgemv"])
    return "default", None


_NAME, _KEEP = _bind()   # _KEEP: the library and adapter, alive as long as the symbol


def blas():
    """The BLAS behind compiled matrix products: ``"mkl"`` or ``"default"`` (scipy's).

    ``"mkl"`` where ``pip install tapegrad[mkl]`` put MKL and ``TAPEGRAD_BLAS`` is ``auto``
    (the default) or ``mkl``.

    Example:
        >>> tg.blas() in ("mkl", "default")
        True
    """
    return _NAME
