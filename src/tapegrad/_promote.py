"""PyTorch's result dtypes for ops that NumPy computes on integer and bool values.

NumPy and PyTorch agree on the dtype of an op between two arrays, but not on 0-d tensors and
Python numbers: PyTorch lets them decide only when they are of a higher category (an int32
tensor plus a 0-d int64 tensor is int32, NumPy says int64), and converts a Python integer to
the tensor's integer type, wrapping around (a uint8 tensor plus 300 adds 44; NumPy refuses
300 for uint8).  Float results need nothing: every floating value in tapegrad is float64,
which NumPy gives too.  So these helpers only cast integer and bool operands, and only on
values that need no gradient.
"""
import numpy as np

from . import _dtype
from ._quiet import quiet_begin, quiet_end
from .tensor import Tensor


def _operand(x):
    if isinstance(x, Tensor):
        return x.dtype, x._value.ndim
    return _dtype.of_number(x), None


def result_dtype(*xs):
    """PyTorch's result dtype of an elementwise op on tensors and Python numbers."""
    return _dtype.result_type(*(_operand(x) for x in xs))


def wrapped(c, np_dtype):
    """A Python integer as PyTorch converts it for an op with an integer tensor: into that
    tensor's type, wrapping around (as a C cast from int64 does)."""
    return np.int64(c).astype(np_dtype)


def cast(value, dt):
    """The array ``value`` as ``dt``, converted as PyTorch converts: floats truncate toward
    zero and integers wrap; NaN and out-of-range floats give what the C cast gives (PyTorch
    leaves them undefined), without NumPy's warning."""
    if value.dtype == dt.np:
        return value
    tok = quiet_begin()
    try:
        return value.astype(dt.np)
    finally:
        quiet_end(tok)


# the C++ type names PyTorch's overflow errors use outside tensor()
_C_NAMES = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "int32": "int",
            "int64": "int64_t"}


def checked_cast(value, dt, c_name=True):
    """``cast`` of Python numbers (``value`` an array of them), with PyTorch's overflow check:
    an integer type takes the integers in its range and, if unsigned, their negatives too (-1
    becomes 255 in uint8), and the floats in its range (no NaN, infinity, or -0.2 for uint8).
    PyTorch's error names the C++ type, except for ``tensor()`` (``c_name=False``)."""
    if dt.np.kind in "iu" and value.dtype.kind in "iuf" and value.size:
        info = np.iinfo(dt.np)
        if value.dtype.kind == "f":
            low = float(info.min)
            bad = not np.isfinite(value).all()
        else:
            low = -int(info.max) if dt.np.kind == "u" else int(info.min)
            bad = False
        if bad or value.min() < low or value.max() > info.max:
            name = _C_NAMES[dt.name] if c_name else dt.name
            raise RuntimeError(f"value cannot be converted to type {name} without overflow")
    return cast(value, dt)


def scalar_for(v, c):
    """The operand NumPy should get for the Python number ``c`` next to the integer or bool
    array ``v``, so that its result has PyTorch's dtype and values."""
    if v.dtype.kind in "iu" and isinstance(c, (int, np.integer)) and \
            not isinstance(c, (bool, np.bool_)):
        return wrapped(c, v.dtype)
    return c


def values(a, b):
    """The values of tensors ``a`` and ``b`` (neither floating) cast to PyTorch's result
    dtype, so that a NumPy ufunc on them gives PyTorch's result."""
    va, vb = a._value, b._value
    if va.dtype == vb.dtype:   # the usual case: nothing to decide
        return va, vb
    dt = result_dtype(a, b)
    return (va if va.dtype == dt.np else va.astype(dt.np),
            vb if vb.dtype == dt.np else vb.astype(dt.np))
