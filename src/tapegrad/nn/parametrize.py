"""``tapegrad.nn.utils.parametrize``: a module's parameter computed by other modules from
stored tensors, as in ``torch.nn.utils.parametrize``.

``register_parametrization(module, "weight", p)`` moves the parameter into
``module.parametrizations.weight`` (a ``ParametrizationList``) as ``original`` -- or
``original0``, ``original1``, ... when ``p.right_inverse`` splits it into several tensors --
and gives the module a class ``Parametrized<Its class>`` whose property ``weight`` runs the
list on every read (once per ``cached()`` block).  State-dict keys, repr, errors and the
class swap follow PyTorch.
"""
import collections.abc
import copy
from contextlib import contextmanager

import tapegrad as tg
from tapegrad.tensor import Tensor

from .containers import ModuleDict, ModuleList
from .modules import Parameter

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized",
           "remove_parametrizations", "type_before_parametrizations"]

_cache_depth = 0
_cache = {}


@contextmanager
def cached():
    """Within this block each parametrized tensor is computed once, at its first read, and
    that result is reused (the cache is emptied when the outermost block ends).

    Example:
        >>> lin = nn.Linear(2, 2)
        >>> _ = register_parametrization(lin, "weight", nn.Identity())
        >>> with cached():
        ...     lin.weight is lin.weight
        True
    """
    global _cache_depth, _cache
    _cache_depth += 1
    try:
        yield
    finally:
        _cache_depth -= 1
        if not _cache_depth:
            _cache = {}


def _register_parameter_or_buffer(module, name, value):
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _set_values(dest, src):
    """``dest`` takes ``src``'s values (and shape) in place, as PyTorch's ``set_`` does."""
    with tg.no_grad():
        dest.data = src.detach()


def _is_sequence(value):
    return isinstance(value, collections.abc.Sequence) and not isinstance(value, Tensor)


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the tensor(s) they start
    from (``original``, or ``original0``, ``original1``, ... when the first one's
    ``right_inverse`` returns a sequence).

    Example:
        >>> lin = nn.Linear(2, 2)
        >>> _ = register_parametrization(lin, "weight", nn.Identity())
        >>> type(lin.parametrizations.weight).__name__, list(lin.state_dict())
        ('ParametrizationList', ['bias', 'parametrizations.weight.original'])
    """

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = original.shape, original.dtype
        new = original
        with tg.no_grad():
            # what the stored tensors are: right_inverse of the value, last module first
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, Tensor) and not _is_sequence(new):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors "
                             f"(list, tuple...). Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError(
                    "When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                    f"original.dtype: {original.dtype}\n"
                    f"right_inverse(original).dtype: {new.dtype}")
            if new is not original:
                _set_values(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, part in enumerate(new):
                if not isinstance(part, Tensor):
                    raise ValueError(
                        "'right_inverse' must return a Tensor or a Sequence of tensors "
                        "(list, tuple...). "
                        f"Got element {i} of the sequence with type {type(part).__name__}.")
                if isinstance(original, Parameter):
                    part = Parameter(part.detach(), original.requires_grad)
                else:
                    part = part.detach().requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", part)
        if not self.unsafe:
            # the parametrized tensor must look like the one it replaces
            value = self()
            if not isinstance(value, Tensor):
                raise ValueError(
                    f"A parametrization must return a tensor. Got {type(value).__name__}.")
            if value.dtype != dtype:
                raise ValueError(
                    "Registering a parametrization may not change the dtype of the tensor, "
                    "unless `unsafe` flag is enabled.\n"
                    f"unparametrized dtype: {dtype}\nparametrized dtype: {value.dtype}")
            if value.shape != shape:
                raise ValueError(
                    "Registering a parametrization may not change the shape of the tensor, "
                    "unless `unsafe` flag is enabled.\n"
                    f"unparametrized shape: {shape}\nparametrized shape: {value.shape}")

    def right_inverse(self, value):
        """Store what makes the list return ``value`` (``module.weight = value``)."""
        with tg.no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not "
                                       "implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(
                        f"`right_inverse` should return a tensor. Got {type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(
                        f"The tensor returned by `right_inverse` has dtype {value.dtype} "
                        f"while `original` has dtype {self.original.dtype}")
                _set_values(self.original, value)
                return
            if not _is_sequence(value):
                raise ValueError("'right_inverse' must return a sequence of tensors. "
                                 f"Got {type(value).__name__}.")
            if len(value) != self.ntensors:
                raise ValueError("'right_inverse' must return a sequence of tensors of length "
                                 f"{self.ntensors}. Got a sequence of length {len(value)}.")
            for i, tensor in enumerate(value):
                stored = getattr(self, f"original{i}")
                if not isinstance(tensor, Tensor):
                    raise ValueError(
                        "'right_inverse' must return a sequence of tensors or reference-type "
                        f"opaques. Got element {i} of type {type(tensor).__name__}.")
                if stored.dtype != tensor.dtype:
                    raise ValueError(
                        f"Tensor {i} returned by `right_inverse` has dtype {tensor.dtype} "
                        f"while `original{i}` has dtype {stored.dtype}")
                _set_values(stored, tensor)

    def forward(self):
        modules = list(self)
        if self.is_tensor:
            x = modules[0](self.original)
        else:
            x = modules[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in modules[1:]:
            x = module(x)
        return x


def _getstate(self):
    raise RuntimeError(
        "Serialization of parametrized modules is only supported through state_dict(). See:\n"
        "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
        "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training")


def _deepcopy(self, memo):
    # pickling is refused (__getstate__), so deepcopy copies the instance dict itself
    done = memo.get(id(self))
    if done is not None:
        return done
    replica = self.__new__(self.__class__)
    memo[id(self)] = replica
    replica.__dict__ = copy.deepcopy(self.__dict__, memo)
    return replica


def _inject_new_class(module):
    """Give ``module`` a class of its own (``Parametrized<Name>``) to carry the properties."""
    cls = module.__class__
    namespace = {"__getstate__": _getstate}
    if not hasattr(cls, "__deepcopy__"):
        namespace["__deepcopy__"] = _deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), namespace)


def _inject_property(module, tensor_name):
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute named '{tensor_name}'")

    def get_parametrized(self):
        parametrization = self.parametrizations[tensor_name]
        if not _cache_depth:
            return parametrization()
        key = (id(self), tensor_name)
        value = _cache.get(key)
        if value is None:
            value = _cache[key] = parametrization()
        return value

    def set_original(self, value):
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Make ``module.<tensor_name>`` the output of ``parametrization`` (a Module) applied to
    what is stored; a second registration on the same name chains after the first.

    The parameter (or buffer) moves to ``module.parametrizations.<tensor_name>.original``;
    if ``parametrization`` has ``right_inverse``, what is stored is ``right_inverse`` of the
    current value (several tensors, ``original0``, ``original1``, ..., when it returns a
    sequence).  ``unsafe=True`` skips the checks that the shape and dtype stay the same.
    Returns ``module``.

    Example:
        >>> class Symmetric(nn.Module):
        ...     def forward(self, x):
        ...         return x.triu() + x.triu(1).transpose(0, 1)
        >>> lin = register_parametrization(nn.Linear(3, 3), "weight", Symmetric())
        >>> type(lin).__name__, bool((lin.weight == lin.weight.T).all())
        ('ParametrizedLinear', True)
    """
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            current = getattr(module, tensor_name)
            value = parametrization(current)
            if not isinstance(value, Tensor):
                raise ValueError(
                    f"A parametrization must return a tensor. Got {type(value).__name__}.")
            if value.dtype != current.dtype:
                raise ValueError(
                    "Registering a parametrization may not change the dtype of the tensor, "
                    "unless the `unsafe` flag is enabled.\n"
                    f"module.{tensor_name}.dtype: {current.dtype}\n"
                    f"parametrization(module.{tensor_name}).dtype: {value.dtype}")
            if value.shape != current.shape:
                raise ValueError(
                    "Registering a parametrization may not change the shape of the tensor, "
                    "unless the `unsafe` flag is enabled.\n"
                    f"module.{tensor_name}.shape: {current.shape}\n"
                    f"parametrization(module.{tensor_name}).shape: {value.shape}")
            if hasattr(parametrization, "right_inverse"):
                try:
                    back = parametrization.right_inverse(value)
                except NotImplementedError:
                    pass
                else:
                    if not isinstance(back, Tensor):
                        raise ValueError("parametrization.right_inverse must return a tensor. "
                                         f"Got: {type(back).__name__}")
                    if back.dtype != current.dtype:
                        raise ValueError(
                            "The tensor returned by parametrization.right_inverse must have "
                            f"the same dtype as module.{tensor_name}, unless the `unsafe` "
                            f"flag is enabled.\nmodule.{tensor_name}.dtype: {current.dtype}\n"
                            f"returned dtype: {back.dtype}")
                    if back.shape != current.shape:
                        raise ValueError(
                            "The tensor returned by parametrization.right_inverse must have "
                            f"the same shape as module.{tensor_name}, unless the `unsafe` "
                            f"flag is enabled.\nmodule.{tensor_name}.shape: {current.shape}\n"
                            f"returned shape: {back.shape}")
        chain = module.parametrizations[tensor_name]
        chain.append(parametrization)
        chain.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        chain = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = chain
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    return module


def is_parametrized(module, tensor_name=None):
    """Whether ``module`` has any parametrization (or one on ``tensor_name``).

    Example:
        >>> is_parametrized(nn.Linear(2, 2))
        False
    """
    parametrizations = getattr(module, "parametrizations", None)
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Take the parametrizations off ``tensor_name``: it becomes a plain parameter (or
    buffer) again, holding its current parametrized value (``leave_parametrized=True``) or
    the stored ``original``.  The module gets its own class back with the last one.

    Example:
        >>> lin = register_parametrization(nn.Linear(2, 2), "weight", nn.Identity())
        >>> type(remove_parametrizations(lin, "weight")).__name__
        'Linear'
    """
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    chain = module.parametrizations[tensor_name]
    if chain.is_tensor:
        original = chain.original
        if leave_parametrized:
            with tg.no_grad():
                value = getattr(module, tensor_name)
            _set_values(original, value)
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                             "that is parametrized in terms of a sequence of tensors.")
        value = getattr(module, tensor_name)
        original = Parameter(value.detach()) if value.requires_grad else value
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module):
    """The class ``module`` had before its first parametrization.

    Example:
        >>> lin = register_parametrization(nn.Linear(2, 2), "weight", nn.Identity())
        >>> type_before_parametrizations(lin).__name__
        'Linear'
    """
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
