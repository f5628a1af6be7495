"""Making tensors: from data, filled, ranges, random."""
import numbers

import numpy as np

from . import _dtype
from .tensor import Tensor, read_value

_rng = np.random.default_rng()


def manual_seed(seed):
    """Seed tapegrad's random generator (rand, randn, nn init, dropout)."""
    global _rng
    _rng = np.random.default_rng(int(seed))
    return _rng


def generator():
    """The NumPy Generator behind tapegrad's random functions."""
    return _rng


def _leaf(value, requires_grad):
    t = Tensor._make(value)
    if requires_grad:
        if value.dtype.kind != "f":   # the factories' wording, not requires_grad_()'s
            raise RuntimeError(
                "Only Tensors of floating point and complex dtype can require gradients")
        t.requires_grad_(True)
    return t


def _is_seq(d):
    if isinstance(d, (list, tuple)):
        return True
    if isinstance(d, Tensor):
        d = d._value
    return isinstance(d, np.ndarray) and d.ndim > 0


def _nested_shape(data):
    """Shape of nested sequences, found as PyTorch finds it (following first elements), then
    checked with PyTorch's errors for ragged ones."""
    sizes = []
    d = data
    while _is_seq(d):
        sizes.append(len(d))
        if not len(d):
            break
        d = d[0]
    _check_nested(data, sizes, 0)
    return tuple(sizes)


def _check_nested(data, sizes, dim):
    if dim == len(sizes):
        if _is_seq(data):
            raise TypeError(f"must be real number, not {type(data).__name__}")
        return
    if not _is_seq(data):
        raise TypeError("not a sequence")
    if len(data) != sizes[dim]:
        raise ValueError(
            f"expected sequence of length {sizes[dim]} at dim {dim} (got {len(data)})")
    for item in data:
        _check_nested(item, sizes, dim + 1)


def _scan_kinds(data, kinds):
    if isinstance(data, (list, tuple)):
        for d in data:
            _scan_kinds(d, kinds)
    elif isinstance(data, Tensor):
        kinds.add(data._value.dtype.kind)
    elif isinstance(data, np.ndarray):
        kinds.add(data.dtype.kind)
    elif isinstance(data, bool) or isinstance(data, np.bool_):
        kinds.add("b")
    elif isinstance(data, numbers.Integral):
        kinds.add("i")
    elif isinstance(data, numbers.Real):
        kinds.add("f")
    elif isinstance(data, complex):
        raise TypeError("tapegrad does not support complex numbers")
    else:
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")


def _unwrap(data):
    if isinstance(data, Tensor):
        read_value(data, "tensor(...) of a tensor")   # a compiled call guards the copy
        return data._value
    if isinstance(data, (list, tuple)):
        return [_unwrap(d) for d in data]
    return data


def _to_array(data, dtype):
    """NumPy array for ``data`` with PyTorch's dtype inference (float64 default float)."""
    if isinstance(data, np.ndarray):
        if data.dtype.kind in "cOSUV":
            raise TypeError(
                f"can't convert np.ndarray of type numpy.{data.dtype}. The only supported "
                "types are: float64, float32, float16, int64, int32, int16, int8, uint8, "
                "and bool.")
        dt = dtype or _dtype.from_numpy_dtype(data.dtype)
        return np.array(data, dtype=dt.np, copy=True, order="C")
    if isinstance(data, Tensor):
        read_value(data, "tensor(...) of a tensor")   # a compiled call guards the copy
        dt = dtype or _dtype.from_numpy_dtype(data._value.dtype)
        return np.array(data._value, dtype=dt.np, copy=True, order="C")
    if isinstance(data, str) or isinstance(data, bytes):
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    _nested_shape(data)
    kinds = set()
    _scan_kinds(data, kinds)
    if dtype is None:
        if "f" in kinds:
            dtype = _dtype.float64
        elif "i" in kinds or "u" in kinds:
            dtype = _dtype.int64
        elif "b" in kinds:
            dtype = _dtype.bool_
        else:
            dtype = _dtype.float64  # empty lists are float, as in PyTorch
    return np.array(_unwrap(data), dtype=dtype.np, order="C")


def tensor(data, dtype=None, requires_grad=False, device=None):
    """A new leaf tensor holding a copy of ``data`` (nested lists, scalars, ndarrays)."""
    dt = _dtype.resolve(dtype)
    return _leaf(_to_array(data, dt), requires_grad)


def as_tensor(data, dtype=None):
    if isinstance(data, Tensor) and dtype is None:
        return data
    return tensor(data, dtype)


def from_numpy(array):
    """A tensor sharing ``array``'s memory when it is float64/int64/bool and C-contiguous."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    dt = _dtype.from_numpy_dtype(array.dtype)
    if array.dtype == dt.np and array.flags.c_contiguous:
        return Tensor._make(array)
    return Tensor._make(np.ascontiguousarray(array, dtype=dt.np))


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(f"size must be a tuple of ints, got {type(s).__name__}")
        if s < 0:
            raise RuntimeError(
                f"Trying to create tensor with negative dimension {s}: {list(size)}")
    return tuple(int(s) for s in size)


def _filled(size, fill, dtype, requires_grad):
    dt = _dtype.resolve(dtype) or _dtype.float64
    return _leaf(np.full(_size(size), fill, dtype=dt.np), requires_grad)


def zeros(*size, dtype=None, requires_grad=False, device=None):
    return _filled(size, 0, dtype, requires_grad)


def ones(*size, dtype=None, requires_grad=False, device=None):
    return _filled(size, 1, dtype, requires_grad)


def empty(*size, dtype=None, requires_grad=False, device=None):
    return _filled(size, 0, dtype, requires_grad)


def full(size, fill_value, dtype=None, requires_grad=False, device=None):
    if dtype is None:
        if isinstance(fill_value, bool):
            dtype = _dtype.bool_
        elif isinstance(fill_value, numbers.Integral):
            dtype = _dtype.int64
    return _filled((tuple(size),), fill_value, dtype, requires_grad)


def _like(x, fill, dtype, requires_grad):
    dt = _dtype.resolve(dtype) or x.dtype
    return _leaf(np.full(x._value.shape, fill, dtype=dt.np), requires_grad)


def zeros_like(x, dtype=None, requires_grad=False):
    return _like(x, 0, dtype, requires_grad)


def ones_like(x, dtype=None, requires_grad=False):
    return _like(x, 1, dtype, requires_grad)


def empty_like(x, dtype=None, requires_grad=False):
    return _like(x, 0, dtype, requires_grad)


def full_like(x, fill_value, dtype=None, requires_grad=False):
    return _like(x, fill_value, dtype, requires_grad)


def rand_like(x, dtype=None, requires_grad=False):
    return _leaf(_rng.random(x._value.shape), requires_grad)


def randn_like(x, dtype=None, requires_grad=False):
    return _leaf(_rng.standard_normal(x._value.shape), requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad=False, device=None):
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    args = (start, end, step)
    if dtype is None:
        is_float = any(isinstance(a, float) or (isinstance(a, Tensor) and a.is_floating_point())
                       for a in args)
        dtype = _dtype.float64 if is_float else _dtype.int64
    dt = _dtype.resolve(dtype)
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    return _leaf(np.arange(start, end, step, dtype=dt.np), requires_grad)


def linspace(start, end, steps, dtype=None, requires_grad=False, device=None):
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dt = _dtype.resolve(dtype) or _dtype.float64
    return _leaf(np.linspace(start, end, int(steps), dtype=np.float64).astype(dt.np),
                 requires_grad)


def eye(n, m=None, dtype=None, requires_grad=False, device=None):
    dt = _dtype.resolve(dtype) or _dtype.float64
    return _leaf(np.eye(n, m, dtype=dt.np), requires_grad)


def rand(*size, dtype=None, requires_grad=False, generator=None, device=None):
    _dtype.resolve(dtype)
    return _leaf(_rng.random(_size(size)), requires_grad)


def randn(*size, dtype=None, requires_grad=False, generator=None, device=None):
    _dtype.resolve(dtype)
    return _leaf(_rng.standard_normal(_size(size)), requires_grad)


def randint(low, high=None, size=(), dtype=None, requires_grad=False):
    if high is None:
        low, high = 0, low
    return _leaf(_rng.integers(low, high, size=tuple(size), dtype=np.int64), requires_grad)


def randperm(n, dtype=None):
    return _leaf(_rng.permutation(int(n)).astype(np.int64), False)
