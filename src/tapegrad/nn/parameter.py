"""``torch.nn.parameter``: where library code imports ``Parameter`` and ``Buffer`` from, and
the uninitialized parameters and buffers of the lazy modules (``nn.LazyLinear``, ...).

Example:
    >>> from tapegrad.nn.parameter import Buffer, Parameter
    >>> Parameter is nn.Parameter and Buffer is nn.Buffer
    True
"""
import tapegrad as tg
from tapegrad import _device
from tapegrad.tensor import Tensor

from .modules import Buffer, Parameter

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer", "is_lazy",
           "UninitializedTensorMixin"]

# The methods PyTorch lets an uninitialized tensor call (its _allowed_methods); properties
# (dtype, requires_grad, grad, data, ...) are allowed too, and read the empty value
_ALLOWED = frozenset({"size", "copy_", "is_complex", "is_floating_point", "half", "float",
                      "double", "char", "short", "int", "long", "cuda", "cpu", "to",
                      "get_device"})

# Python's operators on an uninitialized tensor name, in PyTorch's error, the method they
# reach (p + 1 reaches TensorBase.add); the others name a Python function of torch.Tensor
_OPERATORS = {
    "__add__": "method 'add'", "__radd__": "method 'add'", "__iadd__": "method 'add_'",
    "__sub__": "method 'sub'", "__mul__": "method 'mul'", "__rmul__": "method 'mul'",
    "__truediv__": "method 'div'", "__matmul__": "method 'matmul'", "__neg__": "method 'neg'",
    "__abs__": "method 'abs'", "__mod__": "method 'remainder'", "__eq__": "method '__eq__'",
    "__ne__": "method 'ne'", "__lt__": "method 'lt'", "__gt__": "method 'gt'",
    "__le__": "method 'le'", "__ge__": "method 'ge'", "__bool__": "method '__bool__'",
    "__float__": "method '__float__'", "__int__": "method '__int__'",
    "__index__": "method '__index__'", "__iter__": "method 'dim'",
    "__getitem__": "slot wrapper '__getitem__'", "__setitem__": "slot wrapper '__setitem__'",
    "__rsub__": "function Tensor.__rsub__", "__rtruediv__": "function Tensor.__rdiv__",
    "__pow__": "function TensorBase.pow", "__rpow__": "function Tensor.__rpow__",
    "__len__": "function Tensor.__len__", "__floordiv__": "function Tensor.__floordiv__",
    "__format__": "function Tensor.__format__", "__array__": "function Tensor.__array__",
    "__contains__": "function Tensor.__contains__",
    "__reversed__": "function Tensor.__reversed__",
}


def _refusal(cls, what):
    """PyTorch's error for an uninitialized tensor given to ``what``."""
    return ValueError(
        f"Attempted to use an uninitialized parameter in {what}. This error happens when you "
        "are using a `LazyModule` or explicitly manipulating "
        f"`tapegrad.nn.parameter.{cls.__name__}` objects. When using LazyModules Call "
        "`forward` with a dummy batch to initialize the parameters before calling tapegrad "
        "functions")


def _method_label(name):
    return f"<method '{name}' of 'tapegrad._C.TensorBase' objects>"


def _refusing_operator(name, label):
    def operator(self, *args, **kwargs):
        kind, _, rest = label.partition(" ")
        if kind == "method" or kind == "slot":
            text = f"<{label} of 'tapegrad._C.TensorBase' objects>"
        else:
            text = f"<{label}>"
        raise _refusal(type(self), text)
    operator.__name__ = name
    return operator


class UninitializedTensorMixin:
    """What the uninitialized parameters and buffers share: an empty value until
    ``materialize(shape)`` gives them one and the class they become (``cls_to_become``).

    Until then, as in PyTorch, ``shape`` and ``share_memory_`` raise RuntimeError, Tensor
    methods other than ``size``, ``to``, the dtype conversions, ``copy_`` and a few more raise
    ValueError, and so do Python's operators; properties (``dtype``, ``requires_grad``,
    ``grad``, ``data``) answer for the empty value.
    """

    __slots__ = ()

    def materialize(self, shape, device=None, dtype=None):
        """Give this tensor an (uninitialized) value of ``shape`` and make it the class it
        stands for (``Parameter`` or ``Tensor``); ``dtype`` defaults to its own."""
        if dtype is None:
            dtype = self.dtype
        if device is not None:
            _device.check(device)
        self.data = tg.empty(shape, dtype=dtype)
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError(
            "Can't access the shape of an uninitialized parameter or buffer. This error "
            "usually happens in `load_state_dict` when trying to load an uninitialized "
            "parameter into an initialized one. Call `forward` to initialize the parameters "
            "before accessing their attributes.")

    def share_memory_(self):
        raise RuntimeError(
            "Can't share memory on an uninitialized parameter or buffer. Call `forward` to "
            "initialize the parameters before calling `module.share_memory()`.")

    def __repr__(self):
        return f"<{type(self).__name__}>"

    __str__ = __repr__

    def __hash__(self):
        return id(self)

    def __reduce_ex__(self, protocol):
        return (type(self), (self.requires_grad,))

    def __getattribute__(self, name):
        if name[0] != "_" and name not in _ALLOWED and \
                name not in UninitializedTensorMixin.__dict__:
            member = Tensor.__dict__.get(name)
            if callable(member) and not isinstance(member, type):
                raise _refusal(type(self), _method_label(name))
        return object.__getattribute__(self, name)


for _name, _label in _OPERATORS.items():
    setattr(UninitializedTensorMixin, _name, _refusing_operator(_name, _label))
del _name, _label


def is_lazy(param):
    """Whether ``param`` is an ``UninitializedParameter`` or ``UninitializedBuffer``.

    Example:
        >>> is_lazy(UninitializedParameter()), is_lazy(nn.Parameter(tg.zeros(1)))
        (True, False)
    """
    return isinstance(param, UninitializedTensorMixin)


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A ``Parameter`` whose shape is not known yet: the weights of a lazy module before its
    first call.  It holds no values: ``shape`` raises, and so does any op but the dtype and
    device conversions; ``materialize(shape)`` makes it a ``Parameter``.

    Example:
        >>> p = UninitializedParameter()
        >>> p, p.requires_grad
        (<UninitializedParameter>, True)
        >>> p.materialize((2, 3))
        >>> type(p).__name__, p.shape
        ('Parameter', tapegrad.Size([2, 3]))
    """

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        if device is not None:
            _device.check(device)
        p = Tensor._make(tg.empty(0, dtype=dtype)._value, cls=cls)
        if requires_grad:
            Tensor.requires_grad_(p, True)   # (the method itself refuses, as in PyTorch)
        return p

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass  # everything happens in __new__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.requires_grad, None, self.dtype)
        memo[id(self)] = result
        return result


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet (a lazy batch norm's running statistics before
    its first call); ``materialize(shape)`` makes it a plain tensor.

    Example:
        >>> b = UninitializedBuffer()
        >>> b, b.requires_grad, b.persistent
        (<UninitializedBuffer>, False, True)
    """

    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        if device is not None:
            _device.check(device)
        b = Tensor._make(tg.empty(0, dtype=dtype)._value, cls=cls)
        if requires_grad:
            Tensor.requires_grad_(b, True)
        # the persistence is the class, as for Buffer: a Tensor has no room for more
        if not persistent:
            b.__class__ = _NonPersistentUninitializedBuffer
        return b

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        pass  # everything happens in __new__

    persistent = True

    @property
    def data(self):
        # PyTorch keeps the subclass here (a Parameter's data is a plain tensor)
        t = Tensor.data.fget(self)
        t.__class__ = UninitializedBuffer
        return t

    @data.setter
    def data(self, other):
        Tensor.data.fset(self, other)

    def __deepcopy__(self, memo):
        # PyTorch's UninitializedBuffer has no deepcopy of its own: Tensor's refuses
        raise _refusal(type(self), "<function Tensor.__deepcopy__>")


class _NonPersistentUninitializedBuffer(UninitializedBuffer):
    """An ``UninitializedBuffer(persistent=False)``."""

    __slots__ = ()
    persistent = False


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
