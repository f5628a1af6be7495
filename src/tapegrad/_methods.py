"""Tensor methods and operators, spelled as PyTorch spells them, bound to the functional ops."""
import numpy as np

from . import autograd
from . import functional as F
from .creation import tensor as _tensor
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


def _max(self, dim=None, keepdim=False):
    return F.max(self, dim, keepdim)


def _min(self, dim=None, keepdim=False):
    return F.min(self, dim, keepdim)


def _size_args(fn):
    def method(self, *shape):
        return fn(self, *shape)
    return method


def _to(self, *args, **kwargs):
    dtype = kwargs.get("dtype")
    for a in args:
        if not isinstance(a, str):
            dtype = a
    if dtype is None:
        return self
    return _astype(self, dtype)


def _astype(self, dtype):
    from . import _dtype
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
    return Tensor._make(self._value.astype(dt.np))


def _logical(fn, self, dim, keepdim):
    """all()/any(): bool results, no gradient (read like a comparison while tracing)."""
    from .tensor import read_value
    read_value(self, f"{fn.__name__}()")
    axis = None if dim is None else F._dims(self, dim)
    return Tensor._make(np.asarray(fn(self._value, axis=axis, keepdims=keepdim)))


def _invert(self):
    trace = state.trace
    if trace is not None and self._rg:
        if self._value.dtype.kind == "b":
            # not of traced bool data (a comparison's result): recorded as == False
            return F._compare(np.equal, self, False)
        trace.opaque("~ of traced integer values")
    return Tensor._make(np.invert(self._value))


def _new_tensor(self, data, dtype=None, requires_grad=False):
    return _tensor(data, dtype=dtype or self.dtype, requires_grad=requires_grad)


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
    "__and__": lambda a, b: F._compare(np.bitwise_and, a, b),
    "__or__": lambda a, b: F._compare(np.bitwise_or, a, b),
    "__xor__": lambda a, b: F._compare(np.bitwise_xor, a, b),
    "__invert__": _invert,
    "__getitem__": F.getitem,
    "add": F.add, "sub": F.sub, "mul": F.mul, "div": F.div, "pow": F.pow, "neg": F.neg,
    "subtract": F.sub, "multiply": F.mul, "divide": F.div, "true_divide": F.div,
    "matmul": F.matmul, "mm": F.matmul, "dot": F.matmul, "mv": F.matmul, "bmm": F.matmul,
    "exp": F.exp, "log": F.log, "log1p": F.log1p, "expm1": F.expm1, "sqrt": F.sqrt,
    "abs": F.abs, "sin": F.sin, "cos": F.cos, "tan": F.tan, "tanh": F.tanh,
    "sigmoid": F.sigmoid, "relu": F.relu, "reciprocal": F.reciprocal,
    "clamp": F.clamp, "clip": F.clamp, "clamp_min": F.clamp_min, "clamp_max": F.clamp_max,
    "maximum": F.maximum, "minimum": F.minimum,
    "sum": F.sum, "mean": F.mean, "prod": F.prod, "max": _max, "min": _min,
    "amax": F.amax, "amin": F.amin, "argmax": F.argmax, "argmin": F.argmin,
    "var": F.var, "std": F.std, "logsumexp": F.logsumexp, "softmax": F.softmax,
    "log_softmax": F.log_softmax, "norm": F.norm,
    "reshape": F.reshape, "view": F.view, "flatten": F.flatten, "squeeze": F.squeeze,
    "unsqueeze": F.unsqueeze, "expand": F.expand, "expand_as": F.expand_as,
    "broadcast_to": F.broadcast_to, "permute": F.permute, "transpose": F.transpose,
    "t": F.t, "clone": F.clone,
    "lt": lambda a, b: F._compare(np.less, a, b), "le": lambda a, b: F._compare(np.less_equal, a, b),
    "gt": lambda a, b: F._compare(np.greater, a, b),
    "ge": lambda a, b: F._compare(np.greater_equal, a, b),
    "eq": lambda a, b: F._compare(np.equal, a, b), "ne": lambda a, b: F._compare(np.not_equal, a, b),
    "backward": _backward,
    "to": _to, "double": lambda self: _astype(self, np.float64),
    "float": lambda self: _astype(self, np.float64),
    "long": lambda self: _astype(self, np.int64), "int": lambda self: _astype(self, np.int64),
    "bool": lambda self: _astype(self, np.bool_),
    "contiguous": F.contiguous, "cpu": lambda self: self,
    "new_tensor": _new_tensor,
    "view_as": lambda self, other: F.reshape(self, *other.shape),
    "reshape_as": lambda self, other: F.reshape(self, *other.shape),
    "type_as": lambda self, other: _astype(self, other.dtype),
    "all": lambda self, dim=None, keepdim=False: _logical(np.all, self, dim, keepdim),
    "any": lambda self, dim=None, keepdim=False: _logical(np.any, self, dim, keepdim),
}

PROPERTIES = {
    "T": property(F.numpy_T),
    "mT": property(F.mT),
}


def install():
    from .inplace import METHODS as IN_PLACE
    for name, fn in {**METHODS, **IN_PLACE}.items():
        setattr(Tensor, name, fn)
    for name, prop in PROPERTIES.items():
        setattr(Tensor, name, prop)


del _rbinop, _size_args
