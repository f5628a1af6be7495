"""PyTorch's legacy constructors and tensor types: ``Tensor(2, 3)``, ``Tensor([1, 2])``,
``x.new(...)``, and ``DoubleTensor``, ``LongTensor``, ... (``isinstance(x, LongTensor)``,
``x.type(DoubleTensor)``, ``set_default_tensor_type``).

One rule builds them all (``construct``): no argument gives an empty vector, integers or a
``Size`` a tensor of that shape (uninitialized, as PyTorch's: here ``empty``'s), a sequence
or array a tensor of that data, a tensor of the type's dtype an alias of it (a view that
records ``AliasBackward0``); anything else is refused with PyTorch's message.
``Tensor(...)`` makes the default dtype, float64 (PyTorch's is float32, which tapegrad does
not have).  ``FloatTensor`` is float64 for the reason ``tapegrad.float`` and ``.float()``
are: programs name it to mean "the floating type" (``x.type(FloatTensor)``,
``FloatTensor(data)``), and keep running, in float64.  ``HalfTensor`` and
``BFloat16Tensor`` exist, and making one raises tapegrad's unsupported-dtype error, as
``.half()`` does.
"""
import warnings

import numpy as np

from . import _device, _dtype, settings
from . import creation
from . import tensor as _tensor_module
from .tensor import Size, Tensor

__all__ = ["DoubleTensor", "FloatTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
           "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
           "set_default_tensor_type", "typename", "is_storage", "range"]

# (the C++ names PyTorch's messages give the dtypes: its TensorOptions text here, random_'s
# bounds and the continuous draws' dtype errors in inplace.py)
_C_TYPE = _dtype.C_TYPE_NAMES

_SIGNATURES = ("\n * (*, tapegrad.device device = None)\n * (tapegrad.Storage storage)\n"
               " * (Tensor other)\n * (tuple of ints size, *, tapegrad.device device = None)\n"
               " * (object data, *, tapegrad.device device = None)\n")


def options(dt):
    """PyTorch's text for the options of a tensor of dtype ``dt`` (its TypeErrors quote it)."""
    return (f"TensorOptions(dtype={_C_TYPE[dt.name]}, device=cpu, layout=Strided, "
            "requires_grad=false (default), pinned_memory=false (default), "
            "memory_format=(nullopt))")


def _is_int(n):
    return isinstance(n, (int, np.integer))     # (bool is an int here, as in PyTorch)


def _described(a):
    if isinstance(a, list):
        return f"list of [{', '.join(type(v).__name__ for v in a)}]"
    return "Tensor" if isinstance(a, Tensor) else type(a).__name__


def _invalid_combination(args, kwargs):
    got = [_described(a) if isinstance(a, Tensor) else type(a).__name__ for a in args]
    got += [f"{k}=tapegrad.dtype" if isinstance(v, _dtype.dtype) else f"{k}={type(v).__name__}"
            for k, v in kwargs.items()]
    # PyTorch says why its first signature, (*, device=None), did not match
    if kwargs:
        why = f"some of the keywords were incorrect: {', '.join(kwargs)}"
    else:
        why = ("some of the arguments have invalid types: ("
               + ", ".join(f"!{_described(a)}!" for a in args) + ")")
    first, rest = _SIGNATURES.split("\n * (tapegrad.Storage", 1)
    return TypeError(f"new() received an invalid combination of arguments - got "
                     f"({', '.join(got)}), but expected one of:{first}\n"
                     f"      didn't match because {why}\n * (tapegrad.Storage{rest}")


def construct(dt, args, kwargs):
    """A new tensor of dtype ``dt`` from the legacy constructor's arguments (the module
    docstring has the rule)."""
    device = kwargs.pop("device", None)
    if kwargs:
        raise _invalid_combination(args, kwargs)
    _device.check(device)
    if not args:
        return creation.empty(0, dtype=dt)
    first = args[0]
    if len(args) == 1:
        if isinstance(first, Tensor):
            if first.dtype != dt:
                raise TypeError(f"expected {options(dt)} (got {options(first.dtype)})")
            return first[...]       # an alias (AliasBackward0 when recorded), as PyTorch's
        if isinstance(first, Size):
            return _shaped(dt, tuple(first))
        if isinstance(first, (list, tuple, np.ndarray)):
            return creation.tensor(first, dtype=dt)
        if isinstance(first, str):
            raise TypeError("new(): invalid data type 'str'")
        if not _is_int(first) or isinstance(first, (bool, np.bool_)):
            raise TypeError(f"new(): data must be a sequence (got {type(first).__name__})")
        return _shaped(dt, (first,))
    if not _is_int(first) or isinstance(first, (bool, np.bool_)):
        raise _invalid_combination(args, {})
    for pos, n in enumerate(args[1:], start=2):
        if not _is_int(n):
            raise TypeError(f"new(): argument 'size' failed to unpack the object at pos {pos} "
                            f"with error \"type must be tuple of ints,but got "
                            f"{type(n).__name__}\"")
    return _shaped(dt, args)


def _shaped(dt, shape):
    shape = tuple(int(n) for n in shape)
    negative = [n for n in shape if n < 0]
    if negative:
        raise RuntimeError(f"Trying to create tensor with negative dimension {negative[0]}: "
                           f"{list(shape)}")
    return creation.empty(*shape, dtype=dt)


def tensor_new(cls, *args, **kwargs):
    """``Tensor(...)``: the legacy constructor in the default dtype; a subclass of Tensor gets
    an instance of itself."""
    made = construct(_dtype.get_default_dtype(), args, dict(kwargs))
    if cls is Tensor:
        return made
    if args and isinstance(args[0], Tensor):
        # an alias would have to be a view of args[0]; a subclass instance made here is not
        raise TypeError(f"{cls.__name__}(tensor): make the subclass from data or a size")
    return Tensor._make(made._value, cls=cls)


# ---------------------------------------------------------------------------------------------
# The typed classes
# ---------------------------------------------------------------------------------------------
class _LegacyType(type):
    """The class of ``DoubleTensor`` and its kin: calling one is the legacy constructor in its
    dtype, ``isinstance`` asks a tensor's dtype, and Tensor's methods are reachable through
    it (``DoubleTensor.add``), as through PyTorch's."""

    def __call__(cls, *args, **kwargs):
        return construct(cls.dtype, args, dict(kwargs))

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype

    def __subclasscheck__(cls, sub):
        return sub is cls

    def __getattr__(cls, name):
        if name.startswith("__"):       # (what tools ask of any class is not forwarded)
            raise AttributeError(name)
        return getattr(Tensor, name)

    def __repr__(cls):
        return f"<class 'tapegrad.{cls.__name__}'>"


def _legacy_type(name, dt):
    doc = (f"``tapegrad.{name}``: the legacy constructor for {dt.name} tensors "
           f"(``{name}(2, 3)``, ``{name}([1, 2])``), and ``isinstance(x, {name})`` asks "
           f"whether x is one.")
    return _LegacyType(name, (), {"dtype": dt, "is_cuda": False, "is_sparse": False,
                                  "__module__": "tapegrad", "__doc__": doc})


DoubleTensor = _legacy_type("DoubleTensor", _dtype.float64)
FloatTensor = _legacy_type("FloatTensor", _dtype.float64)    # as tapegrad.float (above)
HalfTensor = _legacy_type("HalfTensor", _dtype.float16)
BFloat16Tensor = _legacy_type("BFloat16Tensor", _dtype.bfloat16)
LongTensor = _legacy_type("LongTensor", _dtype.int64)
IntTensor = _legacy_type("IntTensor", _dtype.int32)
ShortTensor = _legacy_type("ShortTensor", _dtype.int16)
CharTensor = _legacy_type("CharTensor", _dtype.int8)
ByteTensor = _legacy_type("ByteTensor", _dtype.uint8)
BoolTensor = _legacy_type("BoolTensor", _dtype.bool_)

TYPES = {t.__name__: t for t in (DoubleTensor, FloatTensor, HalfTensor, BFloat16Tensor,
                                 LongTensor, IntTensor, ShortTensor, CharTensor, ByteTensor,
                                 BoolTensor)}


_warned = []


def set_default_tensor_type(t):
    """PyTorch's deprecated way to set the default dtype: ``t`` is a floating legacy type or
    its name (``"torch.DoubleTensor"``).  Warns once, as PyTorch does (every time after
    ``set_warn_always(True)``).

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     tg.set_default_tensor_type(tg.DoubleTensor)
        >>> tg.get_default_dtype()
        tapegrad.float64
    """
    if isinstance(t, str):
        module, _, name = t.rpartition(".")
        if module not in ("torch", "tapegrad") or name not in TYPES:
            raise ModuleNotFoundError(f"No module named '{module or t}'")
        t = TYPES[name]
    if not isinstance(t, _LegacyType):
        raise TypeError("invalid type object: only floating-point types are supported as the "
                        "default type")
    if not t.dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    if not _warned or settings.is_warn_always_enabled():     # once, as PyTorch's
        _warned.append(True)
        warnings.warn("tapegrad.set_default_tensor_type() is deprecated as of PyTorch 2.1, "
                      "please use tapegrad.set_default_dtype() and "
                      "tapegrad.set_default_device() as alternatives.", UserWarning,
                      stacklevel=2)
    _dtype.set_default_dtype(t.dtype)


def typename(obj, /):
    """The type of ``obj`` as a string: a tensor's legacy type (``'tapegrad.LongTensor'``),
    else its class's module and qualified name (a builtin's bare name), as PyTorch's.

    Example:
        >>> tg.typename(tg.tensor([1, 2])), tg.typename(3), tg.typename(np.zeros(2))
        ('tapegrad.LongTensor', 'int', 'numpy.ndarray')
    """
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module, qualname = type(obj).__module__ or "", type(obj).__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


def is_storage(obj, /):
    """Whether ``obj`` is a storage object: tapegrad has none (a tensor's memory is its own
    NumPy array), so False.

    Example:
        >>> tg.is_storage(tg.zeros(2))
        False
    """
    return False


def _c_number(v):
    """A double as C++'s stream prints it (six significant digits, ``inf``, ``nan``)."""
    return "%g" % v


def range(start=0, end=None, step=1, *, dtype=None, requires_grad=False,  # noqa: A001
          device=None):
    """Deprecated: the values ``start, start + step, ...`` up to and *including* ``end``,
    ``floor((end - start) / step) + 1`` of them, of the default dtype (float64) unless
    ``dtype`` says otherwise, after PyTorch's ``UserWarning`` pointing at ``arange``.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     tg.range(1, 2, 0.25)
        tensor([1.0000, 1.2500, 1.5000, 1.7500, 2.0000])
    """
    if end is None:
        raise TypeError('range() missing 1 required positional arguments: "end"')
    warnings.warn("torch.range is deprecated and will be removed in a future release because "
                  "its behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=2)
    dt = _dtype.resolve(dtype) or _dtype.get_default_dtype()
    _device.check(device)
    first, last, stride = (float(v) for v in (start, end, step))
    if not (stride > 0 or stride < 0):
        raise RuntimeError("step must be nonzero")
    if not (np.isfinite(first) and np.isfinite(last)):
        raise RuntimeError(f"unsupported range: {_c_number(first)} -> {_c_number(last)}")
    if not ((stride > 0 and last >= first) or (stride < 0 and last <= first)):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    size = int((last - first) / stride + 1)
    values = first + stride * np.arange(size, dtype=np.float64)
    return creation._leaf(values.astype(dt.np), requires_grad)


_tensor_module.LEGACY.new = tensor_new

from ._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())


# --- Variable: the wrapper PyTorch folded into Tensor, still imported by older programs -------
class VariableMeta(type):
    """Every tensor is a Variable (``isinstance(x, Variable)``), as in PyTorch, where the two
    merged: older programs test for it."""

    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)


class Variable(metaclass=VariableMeta):
    """``Variable(data, requires_grad=False)``: what PyTorch's legacy wrapper gives now -- a
    tensor detached from ``data``'s history that shares its memory (a write through one is
    seen by the other), requiring grad as asked; no ``data`` gives an empty vector.
    ``volatile`` has no effect beyond PyTorch's warning."""

    def __new__(cls, data=None, requires_grad=False, volatile=False, **kwargs):
        for name in kwargs:
            raise TypeError(f"'{name}' is an invalid keyword argument for this function")
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` "
                          "instead.", stacklevel=2)
        if data is None:
            return creation.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError("Variable data has to be a tensor, but got "
                            f"{_tensor_module._typename(data)}")
        if requires_grad and not data.dtype.is_floating_point:
            # (its own text, not requires_grad_'s)
            raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                               "gradients")
        result = data.detach()
        if requires_grad:
            result.requires_grad_(True)
        return result


Variable.__module__ = VariableMeta.__module__ = "tapegrad.autograd.variable"


def variable(*args, **kwargs):
    """``autograd.variable(...)``: PyTorch's refusal of the function it replaced with
    ``tensor``."""
    raise RuntimeError("tapegrad.autograd.variable(...) is deprecated, use tapegrad.tensor(...) "
                       "instead")
