"""Containers that register what they hold, as ``torch.nn``'s do: ``ModuleList``,
``ModuleDict``, ``ParameterList``, ``ParameterDict``.

The lists register their items under the names "0", "1", ... and the dicts under their keys,
so ``parameters()``, ``state_dict()`` and ``named_modules()`` see them with PyTorch's names.
"""
import operator
from collections import OrderedDict
from collections import abc
from itertools import chain

from tapegrad.tensor import Tensor, _typename

from .modules import Module, Parameter, _addindent

__all__ = ["ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _absolute_index(container, idx):
    """The item name of list index ``idx`` (negative counts from the end)."""
    idx = operator.index(idx)
    if not -len(container) <= idx < len(container):
        raise IndexError(f"index {idx} is out of range")
    return str(idx % len(container))


def _check_iterable(values, who, what="iterable"):
    if not isinstance(values, abc.Iterable) or isinstance(values, Tensor):
        raise TypeError(f"{who} should be called with an {what}, but got "
                        f"{type(values).__name__}")


def _pairs(items, who):
    """(key, value) pairs of a mapping, or of an iterable of 2-item sequences."""
    for j, item in enumerate(items):
        if not isinstance(item, abc.Iterable):
            raise TypeError(f"{who} update sequence element #{j} should be Iterable; is"
                            f"{type(item).__name__}")
        if len(item) != 2:
            raise ValueError(f"{who} update sequence element #{j} has length {len(item)}; 2 "
                             "is required")
        yield item[0], item[1]


class ModuleList(Module):
    """Modules in a list: indexed, sliced, iterated, appended to like a Python list.

    Their parameters are the list's (and its owner's) parameters.

    Example:
        >>> layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
        >>> layers.append(nn.ReLU())
        ModuleList(...)
        >>> len(layers), len(list(layers.parameters())), layers[-1]
        (4, 6, ReLU())
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self += modules

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[_absolute_index(self, idx)]

    def __setitem__(self, idx, module):
        setattr(self, _absolute_index(self, idx), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, _absolute_index(self, idx))
        # renumber, so that the names stay 0..n-1
        self._modules = OrderedDict((str(i), m) for i, m in enumerate(self._modules.values()))

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        combined = ModuleList()
        for i, module in enumerate(chain(self, other)):
            combined.add_module(str(i), module)
        return combined

    def insert(self, index, module):
        """Insert ``module`` before ``index``."""
        for i in range(len(self._modules), index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def extend(self, modules):
        _check_iterable(modules, "ModuleList.extend")
        offset = len(self)
        for i, module in enumerate(modules):
            self.add_module(str(offset + i), module)
        return self

    def __repr__(self):
        """One line per run of equal modules: ``(0-2): 3 x Linear(...)``, as PyTorch prints."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs = []   # [first index, last index, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = [_addindent(f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}", 2)
                 for a, b, r in runs]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """Modules by name, in insertion order; indexed and updated like a Python dict.

    Example:
        >>> blocks = nn.ModuleDict({"enc": nn.Linear(4, 2), "act": nn.Tanh()})
        >>> list(blocks.keys()), blocks["act"]
        (['enc', 'act'], Tanh())
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        """Add or replace modules from a mapping or an iterable of (name, module) pairs."""
        _check_iterable(modules, "ModuleDict.update", "iterable of key/value pairs")
        items = modules.items() if isinstance(modules, (abc.Mapping, ModuleDict)) else \
            _pairs(modules, "ModuleDict")
        for key, module in items:
            self[key] = module


def _tensor_line(p, dtype_text):
    kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
    size = "x".join(str(d) for d in p.shape)
    return f"{kind} containing: [{dtype_text} of size {size}]"


def _object_line(p):
    return f"Object of type: {type(p).__name__}"


class ParameterList(Module):
    """Values in a list, tensors among them turned into registered Parameters.

    Example:
        >>> ps = nn.ParameterList([tg.zeros(2), tg.ones(3)])
        >>> len(ps), type(ps[0]).__name__, [tuple(p.shape) for p in ps.parameters()]
        (2, 'Parameter', [(2,), (3,)])
    """

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            out = type(self)()
            for i in range(*idx.indices(len(self))):
                out.append(self[i])
            return out
        return getattr(self, _absolute_index(self, idx))

    def __setitem__(self, idx, param):
        # every way of adding an item ends here: the one place tensors become Parameters
        if isinstance(param, Tensor) and not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, _absolute_index(self, idx), param)

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, parameters):
        return self.extend(parameters)

    def append(self, value):
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        _check_iterable(values, "ParameterList.extend")
        for value in values:
            self.append(value)
        return self

    def extra_repr(self):
        return "\n".join(
            f"  ({k}): " + (_tensor_line(p, repr(p.dtype)) if isinstance(p, Tensor)
                            else _object_line(p))
            for k, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """Values by string key, tensors among them turned into registered Parameters.  A plain
    dict is added in sorted key order, an OrderedDict or pairs in their own order (as in
    PyTorch).

    Example:
        >>> pd = nn.ParameterDict({"b": tg.zeros(2), "a": tg.ones(1)})
        >>> list(pd.keys()), pd["a"].requires_grad
        (['a', 'b'], True)
    """

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _key_to_attr(key):
        if not isinstance(key, str):
            raise TypeError(
                "Index given to ParameterDict cannot be used as a key as it is not a string "
                f"(type is '{type(key).__name__}'). Open an issue on github if you need "
                "non-string keys.")
        return key

    def __getitem__(self, key):
        return getattr(self, self._key_to_attr(key))

    def __setitem__(self, key, value):
        self._keys[key] = None
        attr = self._key_to_attr(key)
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, attr, value)

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, self._key_to_attr(key))

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def copy(self):
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for k in list(self._keys):
            del self[k]

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def popitem(self):
        k = next(reversed(self._keys))
        return k, self.pop(k)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None):
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def update(self, parameters):
        _check_iterable(parameters, "ParametersDict.update", "iterable of key/value pairs")
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            items = parameters.items()
        elif isinstance(parameters, abc.Mapping):
            items = sorted(parameters.items())
        else:
            items = _pairs(parameters, "ParameterDict")
        for key, value in items:
            self[key] = value

    def extra_repr(self):
        # PyTorch names the type here as torch.typename does: "tapegrad.DoubleTensor"
        return "\n".join(
            f"  ({k}): " + (_tensor_line(p, _typename(p))
                            if isinstance(p, Tensor) else _object_line(p))
            for k, p in self.items())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")

    def __or__(self, other):
        merged = self.copy()
        merged.update(other)
        return merged

    def __ror__(self, other):
        merged = other.copy()
        merged.update(self)
        return merged

    def __ior__(self, other):
        self.update(other)
        return self
