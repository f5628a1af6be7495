"""Making tensors: from data, filled, ranges, random."""
import functools
import math
import numbers

import numpy as np

from . import _device, _dtype, _factory_args, _frames
from ._generator import Generator
from ._promote import cast as _cast
from ._quiet import quiet_begin, quiet_end
from ._promote import checked_cast
from .tensor import SCALAR_OF_REQUIRES_GRAD, Size, Tensor, read_value
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
    # (a tensor inside a list is one number, as in PyTorch: [t, u] of one-element tensors of
    # any shape is a vector, of larger ones a ValueError -- see _unwrap)
    if isinstance(d, (list, tuple)):
        return True
    if isinstance(d, np.ndarray) and d.ndim > 0:
        _frames.warn_program(_ARRAYS_IN_A_LIST, once="arrays in a list", through_own=True)
        return True
    return False


# PyTorch's warning (once per process) when nested data holds NumPy arrays
_ARRAYS_IN_A_LIST = (
    "Creating a tensor from a list of numpy.ndarrays is extremely slow. Please consider "
    "converting the list to a single numpy.ndarray with numpy.array() before converting to a "
    "tensor.")


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
        if data._value.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        if data._rg:
            _frames.warn_program(SCALAR_OF_REQUIRES_GRAD, once=SCALAR_OF_REQUIRES_GRAD,
                                 through_own=True)
        return data._value.reshape(())
    if isinstance(data, (list, tuple)):
        return [_unwrap(d) for d in data]
    return data


def _to_array(data, dtype):
    """NumPy array for ``data`` with PyTorch's dtype inference (float64 default float)."""
    if type(data) is not list:     # (a list, the common case, needs none of these)
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
        if isinstance(data, (str, bytes)):
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


def tensor(*args, dtype=None, device=None, requires_grad=False, **rare):
    """A new leaf tensor holding a copy of ``data`` (nested lists, scalars, ndarrays):
    ``tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False)``.

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
    if args and isinstance(args[0], Tensor):
        _frames.warn_program(_COPY_CONSTRUCT)
    if len(args) != 1 or rare or not _plain(dtype, device, requires_grad):
        return _general("tensor", _tensor_of, args, _called(rare, dtype, device, requires_grad))
    return _leaf(_to_array(args[0], _dtype.resolve(dtype)), requires_grad)


# PyTorch's warning for ``torch.tensor(t)`` of a tensor t
_COPY_CONSTRUCT = (
    "To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
    "sourceTensor.detach().clone().requires_grad_(True), rather than "
    "tapegrad.tensor(sourceTensor).")


def _tensor_of(data, dtype, requires_grad):
    return _leaf(_to_array(data, _dtype.resolve(dtype)), requires_grad)


def as_tensor(*args, dtype=None, device=None, **rare):
    """``data`` as a tensor (``as_tensor(data, *, dtype=None, device=None)``): ``data`` itself
    when it is already a tensor and ``dtype`` is None (or its own), a tensor sharing the
    memory of a row-major NumPy array of a tapegrad dtype (as ``from_numpy``), else a copy as
    ``tensor(data, dtype=dtype)`` makes.

    Shape: that of ``data``.

    Example:
        >>> x = tg.tensor([1.0, 2.0])
        >>> tg.as_tensor(x) is x
        True
        >>> tg.as_tensor([[1, 2]]).shape
        tapegrad.Size([1, 2])
    """
    if len(args) != 1 or rare or not _plain(dtype, device, False):
        return _general("as_tensor", _as_tensor_of, args, _called(rare, dtype, device, False))
    return _as_tensor_of(args[0], dtype)


def _as_tensor_of(data, dtype, requires_grad=False):
    dt = _dtype.resolve(dtype)
    if isinstance(data, Tensor) and (dt is None or dt.np == data._value.dtype):
        return data
    if (type(data) is np.ndarray and data.flags.c_contiguous and data.dtype.kind in "fiub"
            and (dt is None or dt.np == data.dtype) and _own_dtype(data.dtype)):
        return from_numpy(data)     # PyTorch's as_tensor shares the array's memory too
    return _tensor_of(data, dt, False)


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


# --- the factories' two paths ------------------------------------------------------------------
# Each factory reads its common calls -- sizes as Python ints, dtype a tapegrad dtype or None,
# device None or the CPU, requires_grad a bool -- on a fast path of its own (a wrong type
# there would cost every call a parse), and gives any other call to ``_general``, which binds
# it as PyTorch does (_factory_args) and raises PyTorch's errors.  Both end in the factory's
# maker (``_zeros``, ``_rand``, ...), which takes PyTorch's argument names.

def _plain_shape(size):
    """``size`` (a factory's positional arguments) as a tuple when it is the common form --
    ints, or one tuple, list or Size of ints -- else None (for ``_general`` to read)."""
    if len(size) == 1:
        first = size[0]
        if type(first) is int:
            return size
        if type(first) is tuple or type(first) is list or type(first) is Size:
            size = first
    elif not size:
        return None     # zeros(): PyTorch's missing-argument error
    for s in size:
        if type(s) is not int:
            return None
    return tuple(size)


def _plain(dtype, device, requires_grad, generator=None):
    """Whether the common keywords hold what the fast path takes as it is."""
    return ((dtype is None or type(dtype) is _dtype.dtype)
            and (device is None or type(device) is str and device == "cpu"
                 or type(device) is _device.device and device.type == "cpu")
            and (requires_grad is False or requires_grad is True)
            and (generator is None or type(generator) is Generator))


def _called(rare, dtype, device, requires_grad, **others):
    """The keywords a call gave (those left at their defaults are taken as not given)."""
    kwargs = {k: v for k, v in (("dtype", dtype), ("device", device), *others.items())
              if v is not None}
    if requires_grad is not False:
        kwargs["requires_grad"] = requires_grad
    kwargs.update(rare)
    return kwargs


def _general(fname, make, args, kwargs):
    """``fname(*args, **kwargs)`` made by ``make`` (the factory's maker, called with the bound
    arguments by PyTorch's names), with PyTorch's handling of the keywords every factory
    takes: ``device``, ``layout``, ``pin_memory`` and ``out``."""
    bound = _factory_args.parse(fname, args, kwargs)
    layout = bound.pop("layout", None)
    if layout is not None and layout is not _device.strided:
        raise RuntimeError(f"tapegrad makes strided tensors only, not {layout}")
    if bound.pop("pin_memory", False):
        raise RuntimeError("pin_memory=True requires a CUDA or other accelerator backend; no "
                           "pinned memory allocator is available on this system.")
    _device.check(bound.pop("device", None))
    if "dtype" in bound:
        bound["dtype"] = _dtype.resolve(bound["dtype"])
    requires_grad = bool(bound.pop("requires_grad", False))
    out = bound.pop("out", None)
    if out is None:
        return make(**bound, requires_grad=requires_grad)
    return _written(fname, make, bound, out, requires_grad)


def _written(fname, make, bound, out, requires_grad):
    """``out=``: the result in ``out``'s dtype (a ``dtype`` given must be it), ``out``
    resized to its shape and overwritten; ``out`` returned, requiring grad when asked."""
    if out.requires_grad:
        raise RuntimeError(f"aten::{fname}(): functions with out=... arguments don't support "
                           "automatic differentiation, but one of the arguments requires grad.")
    if bound["dtype"] is None:
        bound["dtype"] = out.dtype
    elif bound["dtype"] != out.dtype:
        raise RuntimeError(f"dtype {bound['dtype'].scalar_name} does not match dtype of out "
                           f"parameter ({out.dtype.scalar_name})")
    result = make(**bound, requires_grad=False)
    if out.shape != result.shape:
        out.resize_(result.shape)
    out.copy_(result)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _checked_shape(size, fname):
    """``size`` (ints), refused with PyTorch's error when a dimension is negative."""
    for s in size:
        if s < 0:
            if fname == "zeros":
                raise RuntimeError("zeros: Dimension size must be non-negative.")
            raise RuntimeError(
                f"Trying to create tensor with negative dimension {s}: {list(size)}")
    return size


def _filled(shape, fill, dt, requires_grad):
    """A leaf of ``shape`` holding ``fill`` (a Python number) as ``dt``."""
    if dt.np.kind in "iu":
        fill = checked_cast(np.asarray(fill), dt)   # PyTorch's overflow check
    return _leaf(np.full(shape, fill, dtype=dt.np), requires_grad)


def _maker_of_filled(fill, fname):
    """The maker of ``zeros``, ``ones`` or ``empty``: ``fill`` in every element."""
    def make(size, dtype, requires_grad, memory_format=None):
        if memory_format is not None:   # (empty's only)
            _device.check_memory_format(memory_format, len(size), fname)
        return _filled(_checked_shape(size, fname), fill, _dtype.resolve(dtype) or
                       _dtype.float64, requires_grad)
    return make


_zeros = _maker_of_filled(0, "zeros")
_ones = _maker_of_filled(1, "ones")
_empty = _maker_of_filled(0, "empty")   # (tapegrad's "uninitialized" memory is zeros)


def zeros(*size, dtype=None, device=None, requires_grad=False, **rare):
    """A new leaf tensor of zeros, float64 unless ``dtype`` says otherwise.

    Shape: ``size``, given as numbers (``zeros(2, 3)``), one sequence (``zeros((2, 3))``) or
    by keyword (``zeros(size=(2, 3))``).  Keywords as PyTorch's: ``dtype``, ``device``,
    ``requires_grad``, ``out``, ``layout`` (strided), ``pin_memory`` (False).

    Example:
        >>> tg.zeros(2, 3)
        tensor([[0., 0., 0.],
                [0., 0., 0.]])
    """
    shape = _plain_shape(size)
    if shape is None or rare or not _plain(dtype, device, requires_grad):
        return _general("zeros", _zeros, size, _called(rare, dtype, device, requires_grad))
    return _zeros(shape, dtype, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False, **rare):
    """A new leaf tensor of ones, float64 unless ``dtype`` says otherwise.

    Shape and keywords: as for ``zeros``.

    Example:
        >>> tg.ones(2, 2, requires_grad=True)
        tensor([[1., 1.],
                [1., 1.]], requires_grad=True)
    """
    shape = _plain_shape(size)
    if shape is None or rare or not _plain(dtype, device, requires_grad):
        return _general("ones", _ones, size, _called(rare, dtype, device, requires_grad))
    return _ones(shape, dtype, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False, **rare):
    """A new leaf tensor whose values are to be overwritten (tapegrad fills it with zeros).

    Shape and keywords: as for ``zeros``, and ``memory_format``.

    Example:
        >>> tg.empty(3).shape
        tapegrad.Size([3])
    """
    shape = _plain_shape(size)
    if shape is None or rare or not _plain(dtype, device, requires_grad):
        return _general("empty", _empty, size, _called(rare, dtype, device, requires_grad))
    return _empty(shape, dtype, requires_grad)


def _fill_dtype(fill_value):
    """The dtype ``full`` gives a fill value when no dtype is given: bool, int64 or float64."""
    if isinstance(fill_value, Tensor):
        return fill_value.dtype
    if isinstance(fill_value, (bool, np.bool_)):
        return _dtype.bool_
    if isinstance(fill_value, numbers.Integral):
        return _dtype.int64
    return _dtype.float64


def _full(size, fill_value, dtype, requires_grad):
    dt = _dtype.resolve(dtype) or _fill_dtype(fill_value)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return _filled(_checked_shape(size, "full"), fill_value, dt, requires_grad)


def full(*args, dtype=None, device=None, requires_grad=False, **rare):
    """A new leaf tensor filled with ``fill_value``: ``full(size, fill_value, *, dtype=None,
    ...)``; its dtype follows the value (bool, int64 or float64) unless ``dtype`` is given.

    Shape: ``size`` (a sequence).  Keywords: as for ``zeros``.

    Example:
        >>> tg.full((2, 2), 7.0)
        tensor([[7., 7.],
                [7., 7.]])
        >>> tg.full((3,), 2).dtype
        tapegrad.int64
    """
    shape = _plain_shape(args[:1]) if len(args) == 2 and type(args[0]) is not int else None
    if (shape is None or rare or not _plain(dtype, device, requires_grad)
            or type(args[1]) is not float and type(args[1]) is not int):
        return _general("full", _full, args, _called(rare, dtype, device, requires_grad))
    return _full(shape, args[1], dtype, requires_grad)


# --- *_like ------------------------------------------------------------------------------------
def _maker_of_like(fill, fname):
    """The maker of ``zeros_like``, ``ones_like`` or ``empty_like``."""
    def make(input, dtype, requires_grad, memory_format=None):  # noqa: A002 - PyTorch's name
        if memory_format is not None:   # (input.ndim costs a call)
            _device.check_memory_format(memory_format, input.ndim, fname)
        return _filled(input._value.shape, fill, _dtype.resolve(dtype) or input.dtype,
                       requires_grad)
    return make


_zeros_like = _maker_of_like(0, "zeros_like")
_ones_like = _maker_of_like(1, "ones_like")
_empty_like = _maker_of_like(0, "empty_like")


def zeros_like(*args, dtype=None, device=None, requires_grad=False, **rare):
    """A new leaf tensor of zeros with ``input``'s shape and dtype (or ``dtype``):
    ``zeros_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None,
    layout=None, pin_memory=False)``.

    Example:
        >>> tg.zeros_like(tg.ones(2, 3)).shape
        tapegrad.Size([2, 3])
    """
    if (len(args) != 1 or not isinstance(args[0], Tensor) or rare
            or not _plain(dtype, device, requires_grad)):
        return _general("zeros_like", _zeros_like, args,
                        _called(rare, dtype, device, requires_grad))
    return _zeros_like(args[0], dtype, requires_grad)


def ones_like(*args, dtype=None, device=None, requires_grad=False, **rare):
    """A new leaf tensor of ones with ``input``'s shape and dtype (or ``dtype``); keywords as
    for ``zeros_like``.

    Example:
        >>> tg.ones_like(tg.zeros(2))
        tensor([1., 1.])
    """
    if (len(args) != 1 or not isinstance(args[0], Tensor) or rare
            or not _plain(dtype, device, requires_grad)):
        return _general("ones_like", _ones_like, args,
                        _called(rare, dtype, device, requires_grad))
    return _ones_like(args[0], dtype, requires_grad)


def empty_like(*args, dtype=None, device=None, requires_grad=False, **rare):
    """A new leaf tensor with ``input``'s shape and dtype, to be overwritten (filled with
    zeros); keywords as for ``zeros_like``.

    Example:
        >>> tg.empty_like(tg.ones(2, 3)).shape
        tapegrad.Size([2, 3])
    """
    if (len(args) != 1 or not isinstance(args[0], Tensor) or rare
            or not _plain(dtype, device, requires_grad)):
        return _general("empty_like", _empty_like, args,
                        _called(rare, dtype, device, requires_grad))
    return _empty_like(args[0], dtype, requires_grad)


def _full_like(input, fill_value, dtype, requires_grad, memory_format=None):  # noqa: A002
    if memory_format is not None:
        _device.check_memory_format(memory_format, input.ndim, "full_like")
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return _filled(input._value.shape, fill_value, _dtype.resolve(dtype) or input.dtype,
                   requires_grad)


def full_like(*args, dtype=None, device=None, requires_grad=False, **rare):
    """A new leaf tensor with ``input``'s shape and dtype (or ``dtype``), filled with
    ``fill_value``: ``full_like(input, fill_value, *, ...)``, keywords as for ``zeros_like``.

    Example:
        >>> tg.full_like(tg.zeros(3), 0.5)
        tensor([0.5000, 0.5000, 0.5000])
    """
    if (len(args) != 2 or not isinstance(args[0], Tensor) or rare
            or type(args[1]) is not float and type(args[1]) is not int
            or not _plain(dtype, device, requires_grad)):
        return _general("full_like", _full_like, args,
                        _called(rare, dtype, device, requires_grad))
    return _full_like(args[0], args[1], dtype, requires_grad)


# --- random ------------------------------------------------------------------------------------
def _random_dtype(dtype, kernel, default=None):
    """The floating dtype random floats are drawn in; PyTorch's error for an integer one."""
    dt = _dtype.resolve(dtype) or default or _dtype.float64
    if not dt.is_floating_point:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{dt.scalar_name}\'')
    return dt


def _rand(size, dtype, requires_grad, generator=None):
    _random_dtype(dtype, "check_uniform_bounds")
    return _leaf(stream_for(generator).random(_checked_shape(size, "rand")), requires_grad)


def _randn(size, dtype, requires_grad, generator=None):
    _random_dtype(dtype, "normal_kernel_cpu")
    return _leaf(stream_for(generator).standard_normal(_checked_shape(size, "randn")),
                 requires_grad)


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False, **rare):
    """Draws from U[0, 1) from tapegrad's generator (``manual_seed``), or from
    ``generator`` (a ``tapegrad.Generator``), float64.

    Shape and keywords: as for ``zeros``, and ``generator``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> x = tg.rand(2, 3)
        >>> x.shape, bool(((x >= 0) & (x < 1)).all())
        (tapegrad.Size([2, 3]), True)
    """
    shape = _plain_shape(size)
    if shape is None or rare or not _plain(dtype, device, requires_grad, generator):
        return _general("rand", _rand, size,
                        _called(rare, dtype, device, requires_grad, generator=generator))
    return _rand(shape, dtype, requires_grad, generator)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False, **rare):
    """Draws from the standard normal N(0, 1) from tapegrad's generator (``manual_seed``),
    or from ``generator`` (a ``tapegrad.Generator``), float64.

    Shape and keywords: as for ``rand``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> tg.randn(3, 2, requires_grad=True).shape
        tapegrad.Size([3, 2])
    """
    shape = _plain_shape(size)
    if shape is None or rare or not _plain(dtype, device, requires_grad, generator):
        return _general("randn", _randn, size,
                        _called(rare, dtype, device, requires_grad, generator=generator))
    return _randn(shape, dtype, requires_grad, generator)


def _rand_like(input, dtype, requires_grad, generator=None,  # noqa: A002 - PyTorch's name
               memory_format=None):
    dt = _random_dtype(dtype, "check_uniform_bounds", input.dtype)
    if memory_format is not None:
        _device.check_memory_format(memory_format, input.ndim, "rand_like")
    return _leaf(_cast(stream_for(generator).random(input._value.shape), dt), requires_grad)


def _randn_like(input, dtype, requires_grad, generator=None,  # noqa: A002 - PyTorch's name
                memory_format=None):
    dt = _random_dtype(dtype, "normal_kernel_cpu", input.dtype)
    if memory_format is not None:
        _device.check_memory_format(memory_format, input.ndim, "randn_like")
    return _leaf(_cast(stream_for(generator).standard_normal(input._value.shape), dt),
                 requires_grad)


def rand_like(*args, generator=None, dtype=None, device=None, requires_grad=False, **rare):
    """Draws from U[0, 1) in a new leaf tensor of ``input``'s shape and (floating) dtype;
    keywords as for ``zeros_like``, and ``generator``.

    Example:
        >>> tg.rand_like(tg.zeros(2, 3)).shape
        tapegrad.Size([2, 3])
    """
    if (len(args) != 1 or not isinstance(args[0], Tensor) or rare
            or not _plain(dtype, device, requires_grad, generator)):
        return _general("rand_like", _rand_like, args,
                        _called(rare, dtype, device, requires_grad, generator=generator))
    return _rand_like(args[0], dtype, requires_grad, generator)


def randn_like(*args, generator=None, dtype=None, device=None, requires_grad=False, **rare):
    """Draws from N(0, 1) in a new leaf tensor of ``input``'s shape and (floating) dtype;
    keywords as for ``rand_like``.

    Example:
        >>> tg.randn_like(tg.zeros(4)).shape
        tapegrad.Size([4])
    """
    if (len(args) != 1 or not isinstance(args[0], Tensor) or rare
            or not _plain(dtype, device, requires_grad, generator)):
        return _general("randn_like", _randn_like, args,
                        _called(rare, dtype, device, requires_grad, generator=generator))
    return _randn_like(args[0], dtype, requires_grad, generator)


def _randint(high, size, dtype, requires_grad, low=0, generator=None):
    dt = _dtype.resolve(dtype) or _dtype.int64
    if dt is _dtype.bool_:
        raise RuntimeError("to - 1 is out of bounds for bool")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    draws = stream_for(generator).integers(low, high, size=_checked_shape(size, "randint"),
                                           dtype=np.int64)
    return _leaf(_cast(draws, dt), requires_grad)


def randint(*args, generator=None, dtype=None, device=None, requires_grad=False, **rare):
    """Integers drawn uniformly from ``[low, high)``: ``randint(low=0, high, size, *,
    generator=None, dtype=None, ...)``, int64 unless ``dtype`` says otherwise.

    Shape: ``size`` (a sequence).

    Example:
        >>> _ = tg.manual_seed(0)
        >>> y = tg.randint(0, 3, (5,))
        >>> y.dtype, y.shape, bool(((y >= 0) & (y < 3)).all())
        (tapegrad.int64, tapegrad.Size([5]), True)
    """
    n = len(args)
    shape = (_plain_shape(args[-1:]) if n in (2, 3) and type(args[-1]) is not int
             and type(args[0]) is int and type(args[-2]) is int else None)
    if shape is None or rare or not _plain(dtype, device, requires_grad, generator):
        return _general("randint", _randint, args,
                        _called(rare, dtype, device, requires_grad, generator=generator))
    return _randint(args[-2], shape, dtype, requires_grad, args[0] if n == 3 else 0, generator)


def _randint_like(input, high, dtype, requires_grad, low=0,  # noqa: A002 - PyTorch's name
                  generator=None, memory_format=None):
    if memory_format is not None:
        _device.check_memory_format(memory_format, input.ndim, "randint_like")
    if isinstance(high, Tensor):
        high = high.item()
    return _randint(high, input._value.shape, dtype or input.dtype, requires_grad, low,
                    generator)


def randint_like(*args, generator=None, dtype=None, device=None, requires_grad=False, **rare):
    """Integers drawn uniformly from ``[low, high)`` in a new tensor of ``input``'s shape and,
    unless ``dtype`` says otherwise, dtype: ``randint_like(input, low=0, high, *, ...)``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> tg.randint_like(tg.zeros(2, 3), 10)
        tensor([[4., 9., 3.],
                [0., 3., 9.]])
    """
    n = len(args)
    if (n not in (2, 3) or not isinstance(args[0], Tensor)
            or type(args[1]) is not int or type(args[-1]) is not int or rare
            or not _plain(dtype, device, requires_grad, generator)):
        return _general("randint_like", _randint_like, args,
                        _called(rare, dtype, device, requires_grad, generator=generator))
    return _randint_like(args[0], args[-1], dtype, requires_grad, args[1] if n == 3 else 0,
                         generator)


def _randperm(n, dtype, requires_grad, generator=None):
    dt = _dtype.resolve(dtype) or _dtype.int64
    _no_bool(dt, "randperm")
    return _leaf(_cast(stream_for(generator).permutation(int(n)), dt), requires_grad)


def randperm(*args, generator=None, dtype=None, device=None, requires_grad=False, **rare):
    """A random permutation of the integers ``range(n)``, int64: ``randperm(n, *,
    generator=None, dtype=None, ...)``.

    Shape: ``(n,)``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> sorted(tg.randperm(4).tolist())
        [0, 1, 2, 3]
    """
    if (len(args) != 1 or type(args[0]) is not int or rare
            or not _plain(dtype, device, requires_grad, generator)):
        return _general("randperm", _randperm, args,
                        _called(rare, dtype, device, requires_grad, generator=generator))
    return _randperm(args[0], dtype, requires_grad, generator)


# --- ranges ------------------------------------------------------------------------------------
def _no_bool(dt, kernel):
    if dt is _dtype.bool_:
        raise NotImplementedError(f'"{kernel}" not implemented for \'Bool\'')


def _number(x):
    """A Python number for a 0-d tensor given where PyTorch takes a Number."""
    return x.item() if isinstance(x, Tensor) else x


def _is_floating(x):
    return (isinstance(x, (float, np.floating))
            or isinstance(x, Tensor) and x.is_floating_point())


def _arange(end, dtype, requires_grad, start=0, step=1):
    """``arange``'s maker for any Numbers (0-d tensors, NumPy scalars among them)."""
    if dtype is None:
        floating = _is_floating(start) or _is_floating(end) or _is_floating(step)
        dtype = _dtype.float64 if floating else _dtype.int64
    return _range(_number(start), _number(end), _number(step), _dtype.resolve(dtype),
                  requires_grad)


def _range(start, end, step, dt, requires_grad):
    """The values of ``arange`` from Python numbers, as ``dt``."""
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if dt is _dtype.bool_:
        _no_bool(dt, "arange_cpu")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    return _leaf(np.arange(start, end, step, dtype=dt.np), requires_grad)


def arange(*args, dtype=None, device=None, requires_grad=False, **rare):
    """Values from ``start`` (0 when only one bound is given) up to, not including, ``end``,
    ``step`` apart: ``arange(end)``, ``arange(start, end, step=1, *, dtype=None, ...)``;
    int64 when all of them are integers, else float64.

    Shape: ``(ceil((end - start) / step),)``.

    Example:
        >>> tg.arange(4)
        tensor([0, 1, 2, 3])
        >>> tg.arange(0, 1, 0.25)
        tensor([0.0000, 0.2500, 0.5000, 0.7500])
    """
    n = len(args)
    if n == 1:
        start, end, step = 0, args[0], 1
    elif n == 2:
        (start, end), step = args, 1
    elif n == 3:
        start, end, step = args
    if (not 0 < n < 4 or rare or not _plain(dtype, device, requires_grad)
            or type(start) not in _PY_NUMBERS or type(end) not in _PY_NUMBERS
            or type(step) not in _PY_NUMBERS):
        return _general("arange", _arange, args, _called(rare, dtype, device, requires_grad))
    if dtype is None:
        floating = type(start) is float or type(end) is float or type(step) is float
        return _range(start, end, step, _dtype.float64 if floating else _dtype.int64,
                      requires_grad)
    return _range(start, end, step, _dtype.resolve(dtype), requires_grad)


# the types of the numbers the fast paths take as they are (a bool is no number there)
_PY_NUMBERS = frozenset((int, float))


def _linspace(start, end, steps, dtype, requires_grad):
    """``linspace``'s maker for any Numbers (0-d tensors among them)."""
    return _spaced(_number(start), _number(end), steps, dtype, requires_grad)


def _spaced(start, end, steps, dtype, requires_grad):
    """The values of ``linspace`` from Python numbers."""
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dt = _dtype.resolve(dtype) or _dtype.float64
    if dt is _dtype.bool_:
        _no_bool(dt, "linspace_cpu")
    if dt is _dtype.float64:
        values = _linspace_as_pytorch(float(start), float(end), steps)
    else:
        values = _cast(np.linspace(start, end, steps, dtype=np.float64), dt)
    return _leaf(values, requires_grad)


def linspace(*args, dtype=None, device=None, requires_grad=False, **rare):
    """``steps`` evenly spaced values from ``start`` to ``end``, both included (float64):
    ``linspace(start, end, steps, *, dtype=None, ...)``.

    Shape: ``(steps,)``.

    Example:
        >>> tg.linspace(0, 1, 5)
        tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000])
    """
    if (len(args) != 3 or type(args[2]) is not int or rare
            or not _plain(dtype, device, requires_grad)
            or type(args[0]) not in _PY_NUMBERS or type(args[1]) not in _PY_NUMBERS):
        return _general("linspace", _linspace, args,
                        _called(rare, dtype, device, requires_grad))
    return _spaced(*args, dtype, requires_grad)


def _logspace(start, end, steps, dtype, requires_grad, base=10.0):
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dt = _dtype.resolve(dtype) or _dtype.float64
    _no_bool(dt, "logspace_cpu")
    exponents = np.linspace(float(_number(start)), float(_number(end)), int(steps))
    return _leaf(_cast(np.power(float(base), exponents), dt), requires_grad)


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
    token = quiet_begin()   # (np.errstate costs more than the rest for a few values)
    try:
        step = np.float64(end) - start
        step = step / (steps - 1)
        half = steps // 2
        i = np.arange(steps, dtype=np.float64)
        values = np.empty(steps, dtype=np.float64)
        if math.isfinite(start) and math.isfinite(end) and abs(step) < 1e290:
            # both halves in one pass: step * i + start, then -step * (steps - 1 - i) + end
            first = i < half
            values = _fused_multiply_add(np.where(first, step, -step),
                                         np.where(first, i, steps - 1 - i),
                                         np.where(first, start, end))
        else:
            # infinities and nan propagate through the plain formula as through the fused
            # one; a step past 1e290 would overflow the exact product's halves (its values
            # may then be a rounding off PyTorch's)
            values[:half] = start + step * i[:half]
            values[half:] = end - step * (steps - 1 - i[half:])
    finally:
        quiet_end(token)
    return values


def logspace(*args, dtype=None, device=None, requires_grad=False, **rare):
    """``steps`` numbers ``base ** t`` for t evenly spaced from ``start`` to ``end``:
    ``logspace(start, end, steps, base=10.0, *, dtype=None, ...)``.

    Example:
        >>> tg.logspace(0, 2, 3)
        tensor([  1.,  10., 100.])
    """
    if (len(args) not in (3, 4) or type(args[2]) is not int or rare
            or not _plain(dtype, device, requires_grad)
            or type(args[0]) not in _PY_NUMBERS or type(args[1]) not in _PY_NUMBERS
            or type(args[-1]) not in _PY_NUMBERS):
        return _general("logspace", _logspace, args,
                        _called(rare, dtype, device, requires_grad))
    return _logspace(*args[:3], dtype, requires_grad, *args[3:])


def _eye(n, dtype, requires_grad, m=None):
    if n < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {n}")
    if m is not None and m < 0:
        raise RuntimeError(f"m must be greater or equal to 0, got {m}")
    dt = _dtype.resolve(dtype) or _dtype.float64
    return _leaf(np.eye(n, m, dtype=dt.np), requires_grad)


def eye(*args, dtype=None, device=None, requires_grad=False, **rare):
    """The identity matrix: ones on the diagonal, zeros elsewhere: ``eye(n, m=None, *,
    dtype=None, ...)``.

    Shape: ``(n, m)``, ``(n, n)`` when ``m`` is not given.

    Example:
        >>> tg.eye(2)
        tensor([[1., 0.],
                [0., 1.]])
    """
    if (len(args) not in (1, 2) or type(args[0]) is not int or type(args[-1]) is not int
            or rare or not _plain(dtype, device, requires_grad)):
        return _general("eye", _eye, args, _called(rare, dtype, device, requires_grad))
    return _eye(args[0], dtype, requires_grad, args[1] if len(args) == 2 else None)


# --- x.new_* -----------------------------------------------------------------------------------
_NEW_MAKERS = {"new_zeros": _zeros, "new_ones": _ones, "new_empty": _empty}


def new_filled(self, fname, size, dtype, device, requires_grad, rare):
    """``self.new_zeros(*size, ...)`` (``fname`` is the method's name) and its kin: the
    factory's tensor in ``self``'s dtype unless ``dtype`` says otherwise."""
    make = _NEW_MAKERS[fname]
    shape = _plain_shape(size)
    if shape is None or rare or not _plain(dtype, device, requires_grad):
        return _general(fname, lambda dtype, **bound: make(dtype=dtype or self.dtype, **bound),
                        size, _called(rare, dtype, device, requires_grad))
    return make(shape, dtype or self.dtype, requires_grad)


def new_full(self, *args, dtype=None, device=None, requires_grad=False, **rare):
    """``self.new_full(size, fill_value, *, dtype=None, ...)``: ``full``'s tensor in
    ``self``'s dtype unless ``dtype`` says otherwise."""
    def make(dtype, **bound):
        return _full(dtype=dtype or self.dtype, **bound)
    if len(args) == 2 and not rare and _plain(dtype, device, requires_grad):
        shape = _plain_shape(args[:1]) if type(args[0]) is not int else None
        if shape is not None and type(args[1]) in (int, float):
            return make(dtype, size=shape, fill_value=args[1], requires_grad=requires_grad)
    return _general("new_full", make, args, _called(rare, dtype, device, requires_grad))


def new_tensor(self, *args, dtype=None, device=None, requires_grad=False, **rare):
    """``self.new_tensor(data, *, dtype=None, ...)``: ``tensor(data)`` in ``self``'s dtype
    unless ``dtype`` says otherwise."""
    def make(data, dtype, requires_grad):
        return _tensor_of(data, dtype or self.dtype, requires_grad)
    if len(args) == 1 and not rare and _plain(dtype, device, requires_grad):
        return make(args[0], dtype, requires_grad)
    return _general("new_tensor", make, args, _called(rare, dtype, device, requires_grad))
