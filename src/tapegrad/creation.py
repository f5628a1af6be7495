"""Making tensors: from data, filled, ranges, random."""
import functools
import numbers

import numpy as np

from . import _device, _dtype
from ._generator import Generator
from ._promote import cast as _cast
from ._promote import checked_cast
from .tensor import Tensor, read_value
from .views import expose

# the generator manual_seed seeds (torch.default_generator): a fresh process starts from
# a seed of the operating system's entropy, as PyTorch's does
default_generator = Generator()
default_generator.manual_seed(int(np.random.SeedSequence().entropy % (1 << 63)))
_rng = default_generator._rng


def manual_seed(seed):
    """Seed tapegrad's random generator (rand, randn, nn init, dropout, shuffling) and
    return it (``tapegrad.default_generator``).  The numbers drawn after it are
    PyTorch's for the same seed.

    Example:
        >>> _ = tg.manual_seed(0); tg.rand(2)
        tensor([0.9701, 0.7078])
        >>> _ = tg.manual_seed(0); tg.randn(2)
        tensor([ 1.5410, -0.2934])
    """
    return default_generator.manual_seed(seed)


def generator():
    """The stream behind tapegrad's random functions (``_random_stream.RandomStream``)."""
    return _rng


def stream_for(generator=None):
    """The stream a draw uses: ``generator``'s (a ``tapegrad.Generator``), or for None the
    global one that ``manual_seed`` seeds."""
    if generator is None:
        return _rng
    if isinstance(generator, Generator):
        return generator._rng
    raise TypeError(f"generator must be a tapegrad.Generator, not {type(generator).__name__}")


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


def _scan_dtypes(data, found):
    """Collect the dtype of every element of nested ``data``: a NumPy number or array and a
    tensor bring their own, Python numbers bool, int64 or float64."""
    kind = type(data)
    if kind is float:   # the common cases first: this runs once per element
        found.add(_dtype.float64)
    elif kind is int:
        found.add(_dtype.int64)
    elif isinstance(data, (list, tuple)):
        for d in data:
            _scan_dtypes(d, found)
    elif isinstance(data, Tensor):
        found.add(data.dtype)
    elif isinstance(data, (np.ndarray, np.generic)) and data.dtype.kind in "biuf":
        found.add(_dtype.from_numpy_dtype(data.dtype))
    elif isinstance(data, bool):
        found.add(_dtype.bool_)
    elif isinstance(data, numbers.Integral):
        found.add(_dtype.int64)
    elif isinstance(data, numbers.Real):
        found.add(_dtype.float64)
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
    if isinstance(data, np.generic):   # a NumPy number keeps its type, as an array would
        data = np.asarray(data)
    if isinstance(data, np.ndarray):
        if data.dtype.kind in "cOSUV":
            raise TypeError(
                f"can't convert np.ndarray of type numpy.{data.dtype}. The only supported "
                "types are: float64, float32, float16, int64, int32, int16, int8, uint8, "
                "and bool.")
        dt = dtype or _dtype.from_numpy_dtype(data.dtype)
        return np.array(_cast(data, dt), copy=True, order="C")
    if isinstance(data, Tensor):
        read_value(data, "tensor(...) of a tensor")   # a compiled call guards the copy
        dt = dtype or data.dtype
        return np.array(_cast(data._value, dt), copy=True, order="C")
    if isinstance(data, str) or isinstance(data, bytes):
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    _nested_shape(data)
    found = set()
    _scan_dtypes(data, found)
    # the elements' common type, as PyTorch infers it ([np.uint8(1), np.int8(2)] is int16);
    # empty lists are float, as in PyTorch
    natural = functools.reduce(_dtype.promote_types, found) if found else _dtype.float64
    try:
        value = np.array(_unwrap(data), dtype=natural.np, order="C")
    except OverflowError:
        # a Python int beyond int64: PyTorch's message and type
        raise ValueError("Overflow when unpacking long long") from None
    return value if dtype is None else checked_cast(value, dtype, c_name=False)


def tensor(data, dtype=None, requires_grad=False, device=None, pin_memory=False):
    """A new leaf tensor holding a copy of ``data`` (nested lists, scalars, ndarrays).

    Its dtype follows the data as PyTorch's does (float64 for floats, int64 for integers,
    bool), unless ``dtype`` is given.  Shape: that of the nesting of ``data``; ``()`` for a
    scalar.

    Example:
        >>> x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        >>> x.shape, x.dtype, x.is_leaf
        (tapegrad.Size([2, 2]), tapegrad.float64, True)
        >>> tg.tensor(3)
        tensor(3)
    """
    dt = _dtype.resolve(dtype)
    _device.check(device)
    return _leaf(_to_array(data, dt), requires_grad)


def as_tensor(data, dtype=None, device=None):
    """``data`` as a tensor: ``data`` itself when it is already a tensor and ``dtype`` is None
    (or its own), a tensor sharing the memory of a row-major NumPy array of a tapegrad dtype
    (as ``from_numpy``), else a copy as ``tensor(data, dtype)`` makes.

    Shape: that of ``data``.

    Example:
        >>> x = tg.tensor([1.0, 2.0])
        >>> tg.as_tensor(x) is x
        True
        >>> tg.as_tensor([[1, 2]]).shape
        tapegrad.Size([1, 2])
    """
    _device.check(device)
    dt = _dtype.resolve(dtype)
    if isinstance(data, Tensor) and (dt is None or dt.np == data._value.dtype):
        return data
    if (type(data) is np.ndarray and data.flags.c_contiguous and data.dtype.kind in "fiub"
            and (dt is None or dt.np == data.dtype) and _own_dtype(data.dtype)):
        return from_numpy(data)     # PyTorch's as_tensor shares the array's memory too
    return tensor(data, dt)


def _own_dtype(np_dtype):
    """Whether tapegrad holds values of ``np_dtype`` as they are (no conversion)."""
    try:
        return _dtype.from_numpy_dtype(np_dtype).np == np_dtype
    except TypeError:
        return False


def from_numpy(array):
    """A tensor sharing ``array``'s memory when it is float64/int64/bool and C-contiguous.

    Shape: ``array.shape``.

    Example:
        >>> import numpy as np
        >>> a = np.zeros(3)
        >>> t = tg.from_numpy(a)
        >>> a[0] = 5.0
        >>> t
        tensor([5., 0., 0.])
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    dt = _dtype.from_numpy_dtype(array.dtype)
    if array.dtype == dt.np and array.flags.c_contiguous:
        out = Tensor._make(array)
        expose(out)     # NumPy holds this memory: the tensor's views read it too
        return out
    return Tensor._make(np.require(_cast(array, dt), requirements="C"))


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


def _filled(shape, fill, dt, requires_grad):
    """A leaf of ``shape`` holding ``fill`` (a Python number) as ``dt``."""
    if dt.np.kind in "iu":
        fill = checked_cast(np.asarray(fill), dt)   # PyTorch's overflow check
    return _leaf(np.full(shape, fill, dtype=dt.np), requires_grad)


def _new(size, fill, dtype, requires_grad, device):
    dt = _dtype.resolve(dtype) or _dtype.float64
    _device.check(device)
    return _filled(_size(size), fill, dt, requires_grad)


def zeros(*size, dtype=None, requires_grad=False, device=None):
    """A new leaf tensor of zeros, float64 unless ``dtype`` says otherwise.

    Shape: ``size``, given as numbers (``zeros(2, 3)``) or one sequence (``zeros((2, 3))``).

    Example:
        >>> tg.zeros(2, 3)
        tensor([[0., 0., 0.],
                [0., 0., 0.]])
    """
    if any(isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s < 0
           for s in (size[0] if len(size) == 1 and isinstance(size[0], (tuple, list))
                     else size)):
        raise RuntimeError("zeros: Dimension size must be non-negative.")   # (PyTorch's own)
    return _new(size, 0, dtype, requires_grad, device)


def ones(*size, dtype=None, requires_grad=False, device=None):
    """A new leaf tensor of ones, float64 unless ``dtype`` says otherwise.

    Shape: ``size``, given as numbers (``ones(2, 2)``) or one sequence (``ones((2, 2))``).

    Example:
        >>> tg.ones(2, 2, requires_grad=True)
        tensor([[1., 1.],
                [1., 1.]], requires_grad=True)
    """
    return _new(size, 1, dtype, requires_grad, device)


def empty(*size, dtype=None, requires_grad=False, device=None):
    """A new leaf tensor whose values are to be overwritten (tapegrad fills it with zeros).

    Shape: ``size``, as for ``zeros``.

    Example:
        >>> tg.empty(3).shape
        tapegrad.Size([3])
    """
    return _new(size, 0, dtype, requires_grad, device)


def full(size, fill_value, dtype=None, requires_grad=False, device=None):
    """A new leaf tensor filled with ``fill_value``; its dtype follows the value (bool, int64
    or float64) unless ``dtype`` is given.

    Shape: ``size`` (a sequence).

    Example:
        >>> tg.full((2, 2), 7.0)
        tensor([[7., 7.],
                [7., 7.]])
        >>> tg.full((3,), 2).dtype
        tapegrad.int64
    """
    if dtype is None:
        if isinstance(fill_value, bool):
            dtype = _dtype.bool_
        elif isinstance(fill_value, numbers.Integral):
            dtype = _dtype.int64
    return _new((tuple(size),), fill_value, dtype, requires_grad, device)


def _like(x, fill, dtype, requires_grad, device):
    dt = _dtype.resolve(dtype) or x.dtype
    _device.check(device)
    return _filled(x._value.shape, fill, dt, requires_grad)


def zeros_like(x, dtype=None, requires_grad=False, device=None, *, memory_format=None):
    """A new leaf tensor of zeros with ``x``'s shape and dtype (or ``dtype``).

    Example:
        >>> tg.zeros_like(tg.ones(2, 3)).shape
        tapegrad.Size([2, 3])
    """
    _device.check_memory_format(memory_format, x.ndim, "zeros_like")
    return _like(x, 0, dtype, requires_grad, device)


def ones_like(x, dtype=None, requires_grad=False, device=None, *, memory_format=None):
    """A new leaf tensor of ones with ``x``'s shape and dtype (or ``dtype``).

    Example:
        >>> tg.ones_like(tg.zeros(2))
        tensor([1., 1.])
    """
    _device.check_memory_format(memory_format, x.ndim, "ones_like")
    return _like(x, 1, dtype, requires_grad, device)


def empty_like(x, dtype=None, requires_grad=False, device=None, *, memory_format=None):
    """A new leaf tensor with ``x``'s shape and dtype, to be overwritten (filled with zeros).

    Example:
        >>> tg.empty_like(tg.ones(2, 3)).shape
        tapegrad.Size([2, 3])
    """
    _device.check_memory_format(memory_format, x.ndim, "empty_like")
    return _like(x, 0, dtype, requires_grad, device)


def full_like(x, fill_value, dtype=None, requires_grad=False, device=None, *,
              memory_format=None):
    """A new leaf tensor with ``x``'s shape and dtype (or ``dtype``), filled with ``fill_value``.

    Example:
        >>> tg.full_like(tg.zeros(3), 0.5)
        tensor([0.5000, 0.5000, 0.5000])
    """
    _device.check_memory_format(memory_format, x.ndim, "full_like")
    return _like(x, fill_value, dtype, requires_grad, device)


def _random_dtype(dtype, device, kernel, default=None):
    """The floating dtype random floats are drawn in; PyTorch's error for an integer one."""
    dt = _dtype.resolve(dtype) or default or _dtype.float64
    _device.check(device)
    if not dt.is_floating_point:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{dt.scalar_name}\'')
    return dt


def rand_like(x, dtype=None, requires_grad=False, device=None, *, memory_format=None):
    """Draws from U[0, 1) in a new leaf tensor of ``x``'s shape (float64).

    Example:
        >>> tg.rand_like(tg.zeros(2, 3)).shape
        tapegrad.Size([2, 3])
    """
    _random_dtype(dtype, device, "check_uniform_bounds", x.dtype)
    _device.check_memory_format(memory_format, x.ndim, "rand_like")
    return _leaf(_rng.random(x._value.shape), requires_grad)


def randn_like(x, dtype=None, requires_grad=False, device=None, *, memory_format=None):
    """Draws from N(0, 1) in a new leaf tensor of ``x``'s shape (float64).

    Example:
        >>> tg.randn_like(tg.zeros(4)).shape
        tapegrad.Size([4])
    """
    _random_dtype(dtype, device, "normal_kernel_cpu", x.dtype)
    _device.check_memory_format(memory_format, x.ndim, "randn_like")
    return _leaf(_rng.standard_normal(x._value.shape), requires_grad)


def _no_bool(dt, kernel):
    if dt is _dtype.bool_:
        raise NotImplementedError(f'"{kernel}" not implemented for \'Bool\'')


def arange(start, end=None, step=1, dtype=None, requires_grad=False, device=None):
    """Values from ``start`` (0 when only one bound is given) up to, not including, ``end``,
    ``step`` apart; int64 when all of them are integers, else float64.

    Shape: ``(ceil((end - start) / step),)``.

    Example:
        >>> tg.arange(4)
        tensor([0, 1, 2, 3])
        >>> tg.arange(0, 1, 0.25)
        tensor([0.0000, 0.2500, 0.5000, 0.7500])
    """
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
    _device.check(device)
    _no_bool(dt, "arange_cpu")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    return _leaf(np.arange(start, end, step, dtype=dt.np), requires_grad)


def linspace(start, end, steps, dtype=None, requires_grad=False, device=None):
    """``steps`` evenly spaced values from ``start`` to ``end``, both included (float64).

    Shape: ``(steps,)``.

    Example:
        >>> tg.linspace(0, 1, 5)
        tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000])
    """
    if not isinstance(steps, (int, np.integer)) or isinstance(steps, bool):
        # a fractional count would be rounded silently by NumPy: PyTorch refuses it
        got = ", ".join(type(a).__name__ if not isinstance(a, Tensor) else "Tensor"
                        for a in (start, end, steps))
        raise TypeError(f"linspace() received an invalid combination of arguments - got "
                        f"({got}), but expected one of: (Number start, Number end, int steps)")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dt = _dtype.resolve(dtype) or _dtype.float64
    _device.check(device)
    _no_bool(dt, "linspace_cpu")
    values = (_linspace_as_pytorch(float(start), float(end), int(steps))
              if dt is _dtype.float64 else np.linspace(start, end, int(steps), dtype=np.float64))
    return _leaf(_cast(values, dt), requires_grad)


def _fused_multiply_add(a, b, c):
    """``a * b + c`` rounded once, as an FMA instruction gives it (NumPy has no fma):
    Dekker's exact product and Knuth's exact sum make it ``total + sum_err + product_err``
    exactly; the two errors are added rounding to odd, so that adding them to ``total``
    rounds once (Boldo and Melquiond), not twice at a tie."""
    split = 134217729.0                 # 2**27 + 1: halves of a double's 53 bits
    t = split * a
    a_hi = t - (t - a)
    a_lo = a - a_hi
    t = split * b
    b_hi = t - (t - b)
    b_lo = b - b_hi
    product = a * b
    product_err = ((a_hi * b_hi - product) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    total = product + c
    back = total - product
    sum_err = (product - (total - back)) + (c - back)
    err = sum_err + product_err
    back = err - sum_err
    err_err = (sum_err - (err - back)) + (product_err - back)
    # round to odd: an inexact even sum moves to its odd neighbour toward the exact one
    to_odd = (err_err != 0) & ((err.view(np.int64) & 1) == 0)
    err = np.where(to_odd, np.nextafter(err, np.where(err_err > 0, np.inf, -np.inf)), err)
    return total + err


def _linspace_as_pytorch(start, end, steps):
    """PyTorch's CPU linspace in float64: the first half ``start + step * i``, the second
    ``end - step * (steps - 1 - i)``, each a fused multiply-add as its compiled kernel
    computes it (NumPy's ``start + i * step`` differs in the last bit, which moves
    histogram elements that lie on an edge to the neighbouring bin)."""
    if steps <= 1:
        return np.full(steps, start, dtype=np.float64)
    step = (end - start) / (steps - 1)
    half = steps // 2
    i = np.arange(steps, dtype=np.float64)
    values = np.empty(steps, dtype=np.float64)
    values[:half] = _fused_multiply_add(step, i[:half], start)
    values[half:] = _fused_multiply_add(-step, steps - 1 - i[half:], end)
    return values


def eye(n, m=None, dtype=None, requires_grad=False, device=None):
    """The identity matrix: ones on the diagonal, zeros elsewhere.

    Shape: ``(n, m)``, ``(n, n)`` when ``m`` is None.

    Example:
        >>> tg.eye(2)
        tensor([[1., 0.],
                [0., 1.]])
    """
    dt = _dtype.resolve(dtype) or _dtype.float64
    _device.check(device)
    return _leaf(np.eye(n, m, dtype=dt.np), requires_grad)


def rand(*size, dtype=None, requires_grad=False, generator=None, device=None):
    """Draws from U[0, 1) from tapegrad's generator (``manual_seed``), or from
    ``generator`` (a ``tapegrad.Generator``), float64.

    Shape: ``size``, as for ``zeros``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> x = tg.rand(2, 3)
        >>> x.shape, bool(((x >= 0) & (x < 1)).all())
        (tapegrad.Size([2, 3]), True)
    """
    _random_dtype(dtype, device, "check_uniform_bounds")
    return _leaf(stream_for(generator).random(_size(size)), requires_grad)


def randn(*size, dtype=None, requires_grad=False, generator=None, device=None):
    """Draws from the standard normal N(0, 1) from tapegrad's generator (``manual_seed``),
    or from ``generator`` (a ``tapegrad.Generator``), float64.

    Shape: ``size``, as for ``zeros``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> tg.randn(3, 2, requires_grad=True).shape
        tapegrad.Size([3, 2])
    """
    _random_dtype(dtype, device, "normal_kernel_cpu")
    return _leaf(stream_for(generator).standard_normal(_size(size)), requires_grad)


def randint(low, high=None, size=None, *, generator=None, dtype=None, requires_grad=False,
            device=None):
    """Integers drawn uniformly from ``[low, high)`` (``[0, low)`` when ``high`` is None), int64.

    Shape: ``size`` (a sequence; ``()`` for one number).

    Example:
        >>> _ = tg.manual_seed(0)
        >>> y = tg.randint(0, 3, (5,))
        >>> y.dtype, y.shape, bool(((y >= 0) & (y < 3)).all())
        (tapegrad.int64, tapegrad.Size([5]), True)
    """
    if size is None and not isinstance(high, int):
        low, high, size = 0, low, high
    if size is None:
        raise TypeError("randint() missing required argument 'size'")
    dt = _dtype.resolve(dtype) or _dtype.int64
    _device.check(device)
    if dt is _dtype.bool_:
        raise RuntimeError("to - 1 is out of bounds for bool")
    return _leaf(_cast(stream_for(generator).integers(low, high, size=_size((size,)), dtype=np.int64), dt),
                 requires_grad)


def randint_like(x, low=0, high=None, *, dtype=None, requires_grad=False, device=None):
    """Integers drawn uniformly from ``[low, high)`` (``[0, low)`` when ``high`` is None) in
    a new tensor of ``x``'s shape and, unless ``dtype`` says otherwise, dtype.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> tg.randint_like(tg.zeros(2, 3), 10)
        tensor([[4., 9., 3.],
                [0., 3., 9.]])
    """
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(x.shape), dtype=dtype or x.dtype,
                   requires_grad=requires_grad, device=device)


def randperm(n, *, generator=None, dtype=None, requires_grad=False, device=None):
    """A random permutation of the integers ``range(n)``, int64.

    Shape: ``(n,)``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> sorted(tg.randperm(4).tolist())
        [0, 1, 2, 3]
    """
    dt = _dtype.resolve(dtype) or _dtype.int64
    _device.check(device)
    _no_bool(dt, "randperm")
    return _leaf(_cast(stream_for(generator).permutation(int(n)), dt), requires_grad)
