"""Tensor methods and operators, spelled as PyTorch spells them, bound to the functional ops."""
import functools
import inspect
import numbers

import numpy as np

from . import _argtypes, _device, _dtype, _promote, autograd, legacy
from . import comparison as _comparison
from . import ops as K
from . import derived as D
from . import functional as F
from ._promote import cast as _cast
from . import creation as _creation
from .tape import state
from .tensor import Tensor


def _binop(fn):
    def method(self, other):
        return fn(self, other)
    return method


def _rbinop(fn):
    def method(self, other):
        return fn(F.as_tensor_arg(other) if not F._is_scalar(other) else other, self) \
            if not F._is_scalar(other) else fn(self, other)
    return method


def _radd(self, other):
    return F.add(self, other)


def _rmul(self, other):
    return F.mul(self, other)


def _rsub(self, other):
    return F.rsub(self, other)


def _rtruediv(self, other):
    return F.rdiv(self, other)


def _rpow(self, other):
    return F.rpow(self, other)


def _rmatmul(self, other):
    return F.matmul(F.as_tensor_arg(other), self)


def _backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(self)/d(leaf) into every leaf's ``.grad``.

    A non-scalar needs ``gradient`` (same shape as self); ``retain_graph=True`` keeps the
    saved values so that the graph can be swept again.
    """
    if (gradient is None and self._tape is not None and self._tape.program is not None
            and not create_graph and inputs is None
            and autograd.program_backward(self, retain_graph)):
        return
    autograd.backward(self, None if gradient is None else (gradient,), retain_graph,
                      create_graph, inputs)


def _max(self, dim=None, keepdim=False, *, other=None):
    return F.max(self, dim, keepdim, other=other)


def _min(self, dim=None, keepdim=False, *, other=None):
    return F.min(self, dim, keepdim, other=other)


def _size_args(fn):
    def method(self, *shape):
        return fn(self, *shape)
    return method


_TO_FORMS = (
    " * (tapegrad.device device = None, tapegrad.dtype dtype = None, bool non_blocking = False, "
    "bool copy = False, *, memory_format = None)\n"
    " * (tapegrad.dtype dtype, bool non_blocking = False, bool copy = False, *, "
    "memory_format = None)\n"
    " * (Tensor tensor, bool non_blocking = False, bool copy = False, *, memory_format = None)\n")


def _is_dtype(a):
    return isinstance(a, _dtype.dtype) or a is float or a is int or a is bool


def _to_error(args, kwargs):
    got = [_typename(a) for a in args] + [f"{k}={_typename(v)}" for k, v in kwargs.items()]
    return TypeError("to() received an invalid combination of arguments - got "
                     f"({', '.join(got)}), but expected one of:\n{_TO_FORMS}")


def _typename(a):
    if isinstance(a, _dtype.dtype):
        return "tapegrad.dtype"
    if isinstance(a, _device.device):
        return "tapegrad.device"
    if isinstance(a, Tensor):
        return "Tensor"
    return type(a).__name__


def parse_to(args, kwargs):
    """``(device, dtype, non_blocking, copy)`` from the arguments of ``Tensor.to`` or
    ``Module.to``, in PyTorch's three forms: ``to(device=None, dtype=None, non_blocking,
    copy)``, ``to(dtype, non_blocking, copy)`` and ``to(tensor, non_blocking, copy)``."""
    if args and _is_dtype(args[0]):
        names = ("dtype", "non_blocking", "copy")
    elif args and isinstance(args[0], Tensor):
        names = ("tensor", "non_blocking", "copy")
    else:
        names = ("device", "dtype", "non_blocking", "copy")
    if len(args) > len(names) or set(kwargs) - {"device", "dtype", "non_blocking", "copy",
                                                 "memory_format"} - set(names):
        raise _to_error(args, kwargs)
    given = dict(zip(names, args))
    if set(given) & set(kwargs):
        raise _to_error(args, kwargs)
    given.update(kwargs)
    if "tensor" in given:
        if "device" in given or "dtype" in given:
            raise _to_error(args, kwargs)
        given["dtype"] = given["tensor"].dtype
    device, dtype = given.get("device"), given.get("dtype")
    non_blocking, copy = given.get("non_blocking", False), given.get("copy", False)
    if not (device is None or isinstance(device, (str, _device.device))
            or (isinstance(device, int) and not isinstance(device, bool))) \
            or not (dtype is None or _is_dtype(dtype)) \
            or not isinstance(non_blocking, bool) or not isinstance(copy, bool) \
            or not (given.get("memory_format") is None
                    or isinstance(given["memory_format"], _device.memory_format)):
        raise _to_error(args, kwargs)
    return _device.check(device), _dtype.resolve(dtype), non_blocking, copy


def _to(self, *args, **kwargs):
    """This tensor as another dtype (``to(tapegrad.int32)``, ``to('cpu', tapegrad.int64)``,
    ``to(other)``); itself when nothing changes, unless ``copy=True``."""
    device, dt, _, copy = parse_to(args, kwargs)
    _device.check_memory_format(kwargs.get("memory_format"), self._value.ndim, "to")
    # PyTorch copies for 'cpu:0': a device with an index is not the tensor's device ('cpu')
    copy = copy or device.index is not None
    if dt is None or dt.np == self._value.dtype:
        if not copy:
            return self
        # PyTorch records a copy as ToCopyBackward0; a clone has the same gradient
        return F.clone(self) if self._rg else Tensor._make(self._value.copy())
    return _astype(self, dt)


def _astype(self, dtype):
    dt = _dtype.resolve(dtype)
    if self._value.dtype == dt.np:
        return self
    trace = state.trace
    if trace is not None and self._rg:
        if dt.is_floating_point:
            # traced integer and bool data is already floats on the tape; a record of its
            # own tells compile that what reads it reads floats (replay._integer_misuse)
            return trace.as_float(self, dt.np)
        trace.opaque(f"conversion of traced values to {dt.name}")
    if dt.is_floating_point and self._rg:
        return self
    return Tensor._make(_cast(self._value, dt))


_TYPE_NAMES = {"float64": "DoubleTensor", "int64": "LongTensor", "int32": "IntTensor",
               "int16": "ShortTensor", "int8": "CharTensor", "uint8": "ByteTensor",
               "bool": "BoolTensor"}


def _type(self, dtype=None, non_blocking=False, **kwargs):
    """``x.type()``: the tensor type's name; ``x.type(dtype)``: ``x`` as ``dtype``."""
    if dtype is None:
        return "tapegrad." + _TYPE_NAMES[self.dtype.name]
    if isinstance(dtype, type(legacy.DoubleTensor)):       # x.type(tapegrad.LongTensor)
        dtype = dtype.dtype
    if isinstance(dtype, str):
        names = {f"{lib}.{v}": k for k, v in _TYPE_NAMES.items() for lib in ("torch", "tapegrad")}
        if dtype not in names:
            raise ValueError(f"invalid type: '{dtype}'")
        dtype = names[dtype]
    return _astype(self, dtype)


def _converter(dt):
    """``.long()``, ``.int()``, ...: this tensor as ``dt``."""
    def method(self, memory_format=None):
        return _astype(self, dt)
    return method


def _cuda(self, device=None, non_blocking=False, memory_format=None):
    _device.check("cuda")


def _logical(fn, self, dim, keepdim):
    """all()/any(): bool results, no gradient.  While tracing, recorded as comparisons a
    replay recomputes: the count of zeros (all) or nonzeros (any) compared with 0.  Reading
    the input's values here instead would guard every one of them, and a compiled call
    would record again whenever any of them changed; a Python ``if`` on the result guards
    only its own value."""
    from .tensor import read_value
    if state.trace is not None and self._rg and self._value.dtype != np.uint8:
        hits = F._compare(np.not_equal if fn is np.any else np.equal, self, 0)
        count = hits.sum() if dim is None else hits.sum(dim, keepdim)
        return F._compare(np.greater if fn is np.any else np.equal, count, 0)
    read_value(self, f"{fn.__name__}()")
    axis = None if dim is None else F._dims(self, dim)
    value = np.asarray(fn(self._value, axis=axis, keepdims=keepdim))
    # PyTorch keeps uint8 for all()/any() of uint8 tensors (masks from before bool existed)
    return Tensor._make(value.astype(np.uint8) if self._value.dtype == np.uint8 else value)


def _bitwise(fn, kernel):
    """``&``, ``|``, ``^``: integers and bools only, as in PyTorch."""
    def method(self, other):
        dt = _promote.result_dtype(self, other)
        if dt.is_floating_point:
            raise NotImplementedError(
                f'"{kernel}_cpu" not implemented for \'{dt.scalar_name}\'')
        return F._compare(fn, self, other)
    return method


def _invert(self):
    if self._value.dtype.kind == "f":
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors")
    trace = state.trace
    if trace is not None and self._rg:
        if self._value.dtype.kind == "b":
            # not of traced bool data (a comparison's result): recorded as == False
            return F._compare(np.equal, self, False)
        trace.opaque("~ of traced integer values")
    return Tensor._make(np.invert(self._value))


def _bitwise_not(self):
    """``bitwise_not()``: ``~``, whose refusal of a float tensor PyTorch words as a missing
    kernel here (the operator raises a TypeError)."""
    if self._value.dtype.kind == "f":
        raise NotImplementedError("\"bitwise_not_cpu\" not implemented for 'Double'")
    return _invert(self)


def _new_made_by(fname):
    """x.new_zeros(*size, ...) and its kin (``creation.new_filled``)."""
    def method(self, *size, dtype=None, device=None, requires_grad=False, **rare):
        return _creation.new_filled(self, fname, size, dtype, device, requires_grad, rare)
    method.__name__ = fname
    return method


METHODS = {
    "__add__": F.add, "__radd__": _radd,
    "__sub__": F.sub, "__rsub__": _rsub,
    "__mul__": F.mul, "__rmul__": _rmul,
    "__truediv__": F.div, "__rtruediv__": _rtruediv,
    "__pow__": F.pow, "__rpow__": _rpow,
    "__matmul__": F.matmul, "__rmatmul__": _rmatmul,
    "__neg__": F.neg, "__pos__": lambda self: self, "__abs__": F.abs,
    "__lt__": lambda a, b: F._compare(np.less, a, b),
    "__le__": lambda a, b: F._compare(np.less_equal, a, b),
    "__gt__": lambda a, b: F._compare(np.greater, a, b),
    "__ge__": lambda a, b: F._compare(np.greater_equal, a, b),
    "__eq__": lambda a, b: F._compare(np.equal, a, b),
    "__ne__": lambda a, b: F._compare(np.not_equal, a, b),
    "__and__": _bitwise(np.bitwise_and, "bitwise_and"),
    "__or__": _bitwise(np.bitwise_or, "bitwise_or"),
    "__xor__": _bitwise(np.bitwise_xor, "bitwise_xor"),
    "__invert__": _invert,
    "__lshift__": _bitwise(np.left_shift, "lshift"),
    "__rshift__": _bitwise(np.right_shift, "rshift"),
    "bitwise_and": _bitwise(np.bitwise_and, "bitwise_and"),
    "bitwise_or": _bitwise(np.bitwise_or, "bitwise_or"),
    "bitwise_xor": _bitwise(np.bitwise_xor, "bitwise_xor"),
    "bitwise_left_shift": _bitwise(np.left_shift, "lshift"),
    "bitwise_right_shift": _bitwise(np.right_shift, "rshift"),
    "bitwise_not": _bitwise_not,
    "__getitem__": F.getitem,
    "add": F.add, "sub": F.sub, "mul": F.mul, "div": F.div, "pow": F.pow, "neg": F.neg,
    "subtract": F.sub, "multiply": F.mul, "divide": F.div, "true_divide": F.div,
    "matmul": F.matmul, "mm": D.mm, "dot": D.dot, "mv": D.mv, "bmm": D.bmm,
    "exp": F.exp, "log": F.log, "log1p": F.log1p, "expm1": F.expm1, "sqrt": F.sqrt,
    "abs": F.abs, "sin": F.sin, "cos": F.cos, "tan": F.tan, "tanh": F.tanh,
    "sinh": F.sinh, "cosh": F.cosh, "asin": F.asin, "acos": F.acos, "atan": F.atan,
    "asinh": F.asinh, "acosh": F.acosh, "atanh": F.atanh, "arcsin": F.asin, "arccos": F.acos,
    "arctan": F.atan, "arcsinh": F.asinh, "arccosh": F.acosh, "arctanh": F.atanh,
    "log2": F.log2, "log10": F.log10, "exp2": F.exp2, "rsqrt": F.rsqrt, "erf": F.erf,
    "erfc": F.erfc, "square": F.square, "floor": F.floor, "ceil": F.ceil, "trunc": F.trunc,
    "fix": F.trunc, "round": F.round, "sign": F.sign, "frac": F.frac, "isnan": F.isnan,
    "isinf": F.isinf, "isposinf": F.isposinf, "isneginf": F.isneginf, "isfinite": F.isfinite,
    "logical_not": F.logical_not, "logical_and": F.logical_and, "logical_or": F.logical_or,
    "logical_xor": F.logical_xor, "outer": F.outer, "ger": F.outer,
    "sigmoid": F.sigmoid, "relu": F.relu, "reciprocal": F.reciprocal,
    "clamp": F.clamp, "clip": F.clamp, "clamp_min": F.clamp_min, "clamp_max": F.clamp_max,
    "maximum": F.maximum, "minimum": F.minimum,
    "atan2": F.atan2, "arctan2": F.atan2, "hypot": F.hypot, "xlogy": F.xlogy,
    "fmod": F.fmod, "remainder": F.remainder, "copysign": F.copysign,
    "logaddexp": F.logaddexp, "__mod__": F.remainder,
    "__rmod__": lambda self, other: F.remainder(other, self),
    "tril": D.tril, "triu": D.triu, "diag": D.diag, "diag_embed": D.diag_embed,
    "diagflat": D.diagflat, "masked_fill": D.masked_fill,
    "masked_select": D.masked_select, "index_fill": D.index_fill, "index_add": D.index_add,
    "index_copy": D.index_copy, "scatter": D.scatter, "scatter_add": D.scatter_add,
    "slice_scatter": D.slice_scatter, "select_scatter": D.select_scatter,
    "diagonal_scatter": D.diagonal_scatter, "scatter_reduce": D.scatter_reduce,
    "index_reduce": D.index_reduce,
    "kron": D.kron, "addmm": D.addmm, "addmv": D.addmv, "addr": D.addr,
    "baddbmm": D.baddbmm, "addbmm": D.addbmm, "addcmul": D.addcmul, "addcdiv": D.addcdiv,
    "lerp": D.lerp, "dist": D.dist, "nonzero": D.nonzero, "argwhere": D.argwhere,
    "count_nonzero": D.count_nonzero, "bincount": D.bincount, "unique": D.unique,
    "histc": D.histc, "sgn": D.sgn, "deg2rad": D.deg2rad, "rad2deg": D.rad2deg,
    "sinc": D.sinc, "nan_to_num": D.nan_to_num, "unflatten": D.unflatten,
    "bernoulli": D.bernoulli, "multinomial": D.multinomial,
    "take_along_dim": D.take_along_dim, "rot90": D.rot90, "logit": D.logit,
    "xlog1py": D.xlog1py, "float_power": D.float_power, "fmax": D.fmax, "fmin": D.fmin,
    "nansum": D.nansum, "nanmean": D.nanmean, "cov": D.cov, "corrcoef": D.corrcoef,
    "isreal": D.isreal, "heaviside": D.heaviside, "frexp": D.frexp, "ldexp": D.ldexp,
    "is_nonzero": D.is_nonzero, "isin": D.isin,
    "repeat_interleave": D.repeat_interleave_method,
    "ravel": D.ravel, "inner": D.inner, "vdot": D.vdot, "aminmax": D.aminmax,
    "signbit": D.signbit, "tensor_split": D.tensor_split, "hsplit": D.hsplit,
    "vsplit": D.vsplit, "dsplit": D.dsplit, "absolute": F.abs, "negative": F.neg,
    "positive": D.positive, "quantile": D.quantile, "nanquantile": D.nanquantile,
    "logaddexp2": D.logaddexp2,
    "unique_consecutive": D.unique_consecutive,
    "greater": D.greater, "greater_equal": D.greater_equal, "less": D.less,
    "less_equal": D.less_equal, "not_equal": D.not_equal, "type": _type,
    "where": lambda self, condition, other: F.where(condition, self, other),
    "allclose": lambda self, other, rtol=1e-05, atol=1e-08, equal_nan=False:
        _comparison.allclose(self, other, rtol, atol, equal_nan),
    "isclose": lambda self, other, rtol=1e-05, atol=1e-08, equal_nan=False:
        _comparison.isclose(self, other, rtol, atol, equal_nan),
    "equal": lambda self, other: _comparison.equal(self, other),
    "lgamma": F.lgamma, "digamma": F.digamma, "erfinv": F.erfinv, "mvlgamma": F.mvlgamma,
    "i0": F.i0, "masked_scatter": D.masked_scatter, "put": D.put, "index_put": D.index_put,
    "polygamma": lambda self, n: F.polygamma(n, self),
    "floor_divide": F.floor_divide, "__floordiv__": F.floor_divide,
    "__rfloordiv__": lambda self, other: F.floor_divide(other, self),
    "ndimension": lambda self: self._value.ndim,
    "element_size": lambda self: self._value.dtype.itemsize,
    "sum": F.sum, "mean": F.mean, "prod": F.prod, "max": _max, "min": _min,
    "amax": F.amax, "amin": F.amin, "argmax": F.argmax, "argmin": F.argmin,
    "var": F.var, "std": F.std, "logsumexp": F.logsumexp, "softmax": F.softmax,
    "log_softmax": F.log_softmax, "norm": F.norm,
    "reshape": F.reshape, "view": F.view, "flatten": F.flatten, "squeeze": F.squeeze,
    "unsqueeze": F.unsqueeze, "expand": F.expand, "expand_as": F.expand_as,
    "broadcast_to": F.broadcast_to, "permute": F.permute, "transpose": F.transpose,
    "t": F.t, "clone": F.clone, "narrow": F.narrow, "select": F.select, "split": F.split,
    "unfold": F.unfold, "chunk": F.chunk, "unbind": F.unbind, "diagonal": F.diagonal,
    "split_with_sizes": lambda self, split_sizes, dim=0: F.split(self, list(split_sizes), dim),
    "lt": lambda a, b: F._compare(np.less, a, b), "le": lambda a, b: F._compare(np.less_equal, a, b),
    "gt": lambda a, b: F._compare(np.greater, a, b),
    "ge": lambda a, b: F._compare(np.greater_equal, a, b),
    "eq": lambda a, b: F._compare(np.equal, a, b), "ne": lambda a, b: F._compare(np.not_equal, a, b),
    "backward": _backward,
    "to": _to, "double": _converter(_dtype.float64),
    # float32 does not exist yet: .float() gives float64, the dtype tapegrad computes in
    "float": _converter(_dtype.float64), "half": _converter(_dtype.float16),
    "long": _converter(_dtype.int64), "int": _converter(_dtype.int32),
    "short": _converter(_dtype.int16), "char": _converter(_dtype.int8),
    "byte": _converter(_dtype.uint8), "bool": _converter(_dtype.bool_),
    "contiguous": F.contiguous, "cpu": lambda self, memory_format=None: self, "cuda": _cuda,
    "new_tensor": _creation.new_tensor, "new_zeros": _new_made_by("new_zeros"),
    "new_ones": _new_made_by("new_ones"), "new_empty": _new_made_by("new_empty"),
    "new_full": _creation.new_full,
    "index_select": F.index_select, "flip": F.flip, "fliplr": F.fliplr, "flipud": F.flipud,
    "roll": F.roll, "repeat": F.repeat, "tile": F.tile, "gather": F.gather, "take": F.take,
    "movedim": F.movedim, "moveaxis": F.movedim, "swapaxes": F.swapaxes,
    "swapdims": F.swapaxes,
    "view_as": lambda self, other: F.reshape(self, *other.shape),
    "reshape_as": lambda self, other: F.reshape(self, *other.shape),
    "type_as": lambda self, other: _astype(self, other.dtype),
    "all": lambda self, dim=None, keepdim=False: _logical(np.all, self, dim, keepdim),
    "any": lambda self, dim=None, keepdim=False: _logical(np.any, self, dim, keepdim),
}


def _H(self):
    """The conjugate transpose of a matrix (the transpose: tapegrad's values are real)."""
    nd = self._value.ndim
    if nd == 2:
        return F.transpose(self, 0, 1)
    if nd == 0:
        import warnings
        warnings.warn("Tensor.H is deprecated on 0-D tensors. Consider using x.conj().",
                      UserWarning, stacklevel=2)
        return self
    hint = " For batches of matrices, consider using tensor.mH" if nd > 2 else ""
    raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {nd}-D "
                       f"tensor.{hint}")


PROPERTIES = {
    "H": property(_H),
    "T": property(F.numpy_T),
    "mT": property(F.mT),
    "is_cuda": property(lambda self: False),
    "is_cpu": property(lambda self: True),
}


_OPERATORS = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__pow__", "__rpow__", "__matmul__", "__rmatmul__",
              "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "__and__", "__or__",
              "__xor__", "__lshift__", "__rshift__", "__mod__", "__rmod__", "__floordiv__",
              "__rfloordiv__")
_OPERANDS = (Tensor, numbers.Number, np.ndarray, np.generic)
_PLAIN_OPERANDS = frozenset({Tensor, float, int, bool})


def _operator(fn):
    """A binary operator that returns NotImplemented for an operand that is not a tensor, a
    number or a NumPy array, as PyTorch's do: ``x + "a"`` and ``x + [1, 2]`` raise Python's
    TypeError, ``x == None`` is False."""
    def method(self, other):
        # exact types first: isinstance with numbers.Number (an ABC) costs more than the rest
        # of the check, and x * 2.0 is the hot path of scalar code
        if other.__class__ in _PLAIN_OPERANDS or isinstance(other, _OPERANDS):
            return fn(self, other)
        return NotImplemented
    method.__name__ = getattr(fn, "__name__", "operator")
    return method


# Tensor with tensor and tensor with a float, the cases of nearly every +, - and * in
# arithmetic code, go straight to the recorders: through add (its operands' and alpha's
# checks) and _arith they passed three frames and a dozen tests, about a tenth of an op.
# Bool tensors take the general path (sub's refusal of them, True + True's promotion).
_ARITHMETIC = {"__add__": (K.ADD, K.ADD_S, np.add), "__radd__": (K.ADD, K.ADD_S, np.add),
               "__sub__": (K.SUB, K.SUB_S, np.subtract),
               "__mul__": (K.MUL, K.MUL_S, np.multiply),
               "__rmul__": (K.MUL, K.MUL_S, np.multiply)}


def _arithmetic_operator(name, fn):
    """``_operator(fn)`` with the straight paths above for operator ``name``."""
    code, code_s, ufunc = _ARITHMETIC[name]
    binary, with_scalar, general = F._binary, F._with_scalar, _operator(fn)

    def method(self, other):
        cls = other.__class__
        if self._value.dtype.kind != "b":
            if cls is Tensor and other._value.dtype.kind != "b":
                return binary(code, self, other, ufunc)
            if cls is float:
                return with_scalar(code_s, self, other, ufunc)
        return general(self, other)
    method.__name__ = getattr(fn, "__name__", "operator")
    return method


def _matrix_operator(fn):
    """``@``, which PyTorch's Tensor leaves to Python for a number too: ``x @ 2.0`` raises
    Python's TypeError (unsupported operand types), not matmul's error about dimensions."""
    def method(self, other):
        if isinstance(other, (numbers.Number, np.generic)):
            return NotImplemented
        return fn(self, other)
    method.__name__ = getattr(fn, "__name__", "operator")
    return method


# PyTorch's names of a method's arguments where its function calls them otherwise (the
# method Tensor.split(split_size) of torch.split(tensor, split_size_or_sections))
_METHOD_KEYWORDS = {"split": {"split_size": "split_size_or_sections"}}


def _numpy_keywords(name, fn):
    """Method ``name``, ``fn``, taking NumPy's ``axis`` and ``keepdims`` for its ``dim`` and
    ``keepdim`` as PyTorch's methods do (``x.sum(axis=1)``), and PyTorch's names of its
    arguments (``_METHOD_KEYWORDS``), or fn itself where it has
    neither, already renames them (an argument check: _argtypes.guard), or warns (its
    warning names the caller's line, which a frame in between would take)."""
    if not inspect.isfunction(fn) or getattr(fn, "_argument_check", False):
        return fn
    aliases = _argtypes.keyword_aliases(fn)
    if name in _METHOD_KEYWORDS:
        aliases = {**(aliases or {}), **_METHOD_KEYWORDS[name]}
    if aliases is None or _argtypes.warns(fn):
        return fn
    renamed = _argtypes.renamed

    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        if kwargs:
            kwargs = renamed(aliases, kwargs, name)
        return fn(self, *args, **kwargs)
    return method


def install():
    from .inplace import METHODS as IN_PLACE
    from .inplace import _in_place_methods
    from .linalg import _METHODS as LINALG   # det, inverse, slogdet, cholesky, cross, ...
    from .more_ops import METHODS as MORE    # gcd, nextafter, angle, sum_to_size, ...
    from .strided_views import as_strided, as_strided_
    from .histograms import histogram
    MORE = {**MORE, "as_strided": as_strided, "as_strided_": as_strided_,
            "histogram": histogram}
    # the hand-written in-place ops take precedence over the recomputed ones
    for name, fn in {**METHODS, **_in_place_methods(METHODS), **IN_PLACE, **LINALG,
                     **MORE}.items():
        if name in ("__matmul__", "__rmatmul__"):
            fn = _matrix_operator(fn)
        setattr(Tensor, name, _arithmetic_operator(name, fn) if name in _ARITHMETIC else
                _operator(fn) if name in _OPERATORS else _numpy_keywords(name, fn))
    for name, prop in PROPERTIES.items():
        setattr(Tensor, name, prop)
    from .inplace import _recomputed_
    from .linalg import _mH
    Tensor.mH = property(_mH)
    # renorm_'s composite reads the old values in several records: it runs on a copy, as
    # PyTorch saves one, so that only the copy's record reads the tensor that changes
    Tensor.renorm_ = _recomputed_("renorm_", lambda self, *args, **kwargs:
                                  LINALG["renorm"](F.clone(self), *args, **kwargs))


del _rbinop, _size_args


# --- scans and sorts (#16) --------------------------------------------------------------------
def _scan_in_place(name, out_of_place, ufunc):
    """``x.cumsum_(dim)`` / ``x.cumprod_(dim)``: the running sum or product written into x
    (its dtype kept, as PyTorch's in-place scans keep it)."""
    def method(self, dim, *, dtype=None):
        from .inplace import _unary_

        def write(v, dim, dtype=None):
            if v.ndim:
                ufunc.accumulate(v, axis=F._scan_dim(self, dim)[0], out=v)
        return _unary_(name, out_of_place, write)(self, dim, dtype=dtype)
    method.__name__ = name
    return method


METHODS.update({
    "cumsum": F.cumsum, "cumprod": F.cumprod, "logcumsumexp": F.logcumsumexp,
    "cummax": F.cummax, "cummin": F.cummin, "diff": F.diff, "sort": F.sort,
    "argsort": F.argsort, "msort": F.msort, "topk": F.topk, "kthvalue": F.kthvalue,
    "median": F.median, "nanmedian": F.nanmedian, "mode": F.mode,
    "cumsum_": _scan_in_place("cumsum_", F.cumsum, np.add),
    "cumprod_": _scan_in_place("cumprod_", F.cumprod, np.multiply),
})
