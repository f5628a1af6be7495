"""``tapegrad.nn.utils.prune``: zeroing parts of a module's parameter through a stored mask,
as in ``torch.nn.utils.prune``.

Pruning ``weight`` moves the parameter to ``weight_orig``, registers the 0/1 buffer
``weight_mask`` and makes ``weight`` a plain attribute that a forward pre-hook (the pruning
method itself) recomputes as ``weight_orig * weight_mask`` before every call, so gradients
reach ``weight_orig`` and are zero where the mask is.  Pruning the same tensor again
combines the methods in a ``PruningContainer``: the new method sees only the entries (or
channels) the old mask keeps.  ``remove`` makes the pruned tensor a parameter again.

The random methods draw from the global generator the way PyTorch's do (``rand_like`` of the
tensor for unstructured pruning, ``rand`` of the channel count for structured pruning), and
the magnitude methods choose through ``topk``, so a seeded program prunes the same entries.
"""
import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

import tapegrad as tg

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
           "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask", "identity",
           "random_unstructured", "l1_unstructured", "random_structured", "ln_structured",
           "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


class BasePruningMethod(ABC):
    """A way of choosing which entries of a tensor to zero.

    Subclasses define ``compute_mask(t, default_mask)`` and ``PRUNING_TYPE`` ("unstructured",
    "structured" -- with a ``dim`` attribute -- or "global").  An applied method is also the
    forward pre-hook that refreshes the pruned tensor before each call of its module.
    """
    # (``_tensor_name`` is set by ``apply``; a method never applied has none, as in PyTorch)

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The new mask for ``t``: ``default_mask`` (the mask so far) with more entries set to 0."""

    def apply_mask(self, module):
        """The pruned tensor: the module's ``<name>_orig`` times its ``<name>_mask``."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def _merged_with_existing(cls, module, name, args, kwargs):
        """A new ``cls(*args, **kwargs)`` for ``name``, joined to the pruning hook ``name``
        has already (which leaves the module's hooks: the result is registered anew)."""
        previous = [(key, hook) for key, hook in module._forward_pre_hooks.items()
                    if isinstance(hook, BasePruningMethod) and hook._tensor_name == name]
        if len(previous) > 1:
            raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor {name} "
                                 f"of module {module}. Use a PruningContainer.")
        for key, _ in previous:
            del module._forward_pre_hooks[key]
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if not previous:
            return method
        old = previous[0][1]
        if isinstance(old, PruningContainer):
            old.add_pruning_method(method)
            return old
        container = PruningContainer(old)
        container.add_pruning_method(method)
        return container

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune ``module``'s tensor ``name`` with a new ``cls(*args, **kwargs)`` (combined with
        any pruning ``name`` had) and return the method now hooked on the module.

        ``importance_scores`` (the tensor's shape) rank the entries instead of the tensor.
        """
        method = cls._merged_with_existing(module, name, args, kwargs)
        orig = getattr(module, name)
        if importance_scores is not None:
            if importance_scores.shape != orig.shape:
                raise AssertionError(
                    f"importance_scores should have the same shape as parameter {name} of "
                    f"{module}, got {importance_scores.shape} vs {orig.shape}")
        else:
            importance_scores = orig
        first_pruning = not isinstance(method, PruningContainer)
        if first_pruning:
            # the parameter itself moves: an optimizer holding it keeps training it
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = tg.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone(
                memory_format=tg.contiguous_format)
        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            # a refused amount or dim leaves the module as it was
            if first_pruning:
                orig = getattr(module, name + "_orig")
                module.register_parameter(name, orig)
                del module._parameters[name + "_orig"]
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """``t`` with this method's mask applied (the module-free form of ``apply``)."""
        if importance_scores is not None:
            if importance_scores.shape != t.shape:
                raise AssertionError(
                    f"importance_scores should have the same shape as tensor t, got "
                    f"{importance_scores.shape} vs {t.shape}")
        else:
            importance_scores = t
        if default_mask is None:
            default_mask = tg.ones_like(t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module):
        """Make the pruned tensor the parameter ``<name>`` again (the same Parameter object
        that was ``<name>_orig``, now holding the pruned values) and drop the mask."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be removed")
        pruned = self.apply_mask(module)
        if hasattr(module, self._tensor_name):
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        orig.data = pruned.data
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        setattr(module, self._tensor_name, orig)


class PruningContainer(BasePruningMethod):
    """The pruning methods applied, in turn, to one tensor; its mask is the last method's,
    computed on what the earlier ones left."""

    def __init__(self, *args):
        self._pruning_methods = ()
        if len(args) == 1:
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method):
        """Append ``method`` (which must prune the same tensor name)."""
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(
                "Can only add pruning methods acting on the parameter named "
                f"'{self._tensor_name}' to PruningContainer {self}. Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        """The last method's mask, computed on the part of ``t`` the mask so far keeps: the
        kept entries (unstructured), the kept channels (structured) or all of it (global)."""
        method = self._pruning_methods[-1]
        new_mask = default_mask.to(dtype=t.dtype)
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            region = default_mask == 1
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to have '
                                     "the attribute `dim` defined.")
            ndim = t.dim()
            dim = method.dim + ndim if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor with dimensions {ndim}")
            others = [d for d in range(ndim) if d != dim]
            kept_channels = default_mask.sum(dim=others) != 0
            region = tuple(kept_channels if d == dim else slice(None) for d in range(ndim))
        elif kind == "global":
            region = tuple(slice(None) for _ in t.shape)
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        partial = method.compute_mask(t[region], default_mask=default_mask[region])
        new_mask[region] = partial.to(dtype=new_mask.dtype)
        return new_mask


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones (the machinery without the zeros)."""
    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


def _check_amount(amount):
    """Refuse an amount that is neither a count >= 0 nor a fraction in [0, 1]."""
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if isinstance(amount, numbers.Integral):
        bad = amount < 0
    else:
        bad = float(amount) > 1.0 or float(amount) < 0.0
    if bad:
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a "
                         f"non-negative integer")


def _count_to_prune(amount, size):
    """How many of ``size`` units ``amount`` prunes (a fraction rounds half to even)."""
    if isinstance(amount, numbers.Integral):
        if amount > size:
            raise ValueError(f"amount={amount} should be smaller than the number of parameters "
                             f"to prune={size}")
        return amount
    return round(amount * size)


def _check_structured(t, dim):
    shape = t.shape
    if len(shape) <= 1:
        raise ValueError("Structured pruning can only be applied to multidimensional tensors. "
                         f"Found tensor of shape {shape} with {len(shape)} dims")
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")


def _channel_mask(t, dim, channels):
    """Ones on the ``channels`` (indices or a boolean mask) of ``t`` along ``dim``, else 0."""
    mask = tg.zeros_like(t)
    mask[tuple(channels if d == dim % t.dim() else slice(None) for d in range(t.dim()))] = 1
    return mask


class RandomUnstructured(BasePruningMethod):
    """Prunes ``amount`` of the still-unpruned entries, chosen at random."""
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        k = _count_to_prune(self.amount, t.nelement())
        mask = default_mask.clone(memory_format=tg.contiguous_format)
        if k != 0:
            # the k entries with the largest uniform draws, as PyTorch chooses them
            chosen = tg.topk(tg.rand_like(t).view(-1), k=k).indices
            mask.view(-1)[chosen] = 0
        return mask

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes the ``amount`` entries of smallest magnitude (ties resolved as ``topk`` does)."""
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        k = _count_to_prune(self.amount, t.nelement())
        mask = default_mask.clone(memory_format=tg.contiguous_format)
        if k != 0:
            chosen = tg.topk(tg.abs(t).view(-1), k=k, largest=False).indices
            mask.view(-1)[chosen] = 0
        return mask

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prunes ``amount`` of the channels along ``dim``, chosen at random."""
    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _check_amount(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _check_structured(t, self.dim)
        channels = t.shape[self.dim]
        k = _count_to_prune(self.amount, channels)
        if k == 0:
            return default_mask
        # one draw per channel; those above the k-th smallest draw are kept
        draws = tg.rand(channels)
        threshold = tg.kthvalue(draws, k=k).values
        mask = _channel_mask(t, self.dim, draws > threshold)
        mask *= default_mask.to(dtype=mask.dtype)
        return mask

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


def _channel_norms(t, n, dim):
    """The ``n``-norm of each slice of ``t`` along ``dim``."""
    others = list(range(t.dim()))
    del others[dim]
    return tg.norm(t, p=n, dim=others)


class LnStructured(BasePruningMethod):
    """Prunes the ``amount`` channels along ``dim`` of smallest ``n``-norm."""
    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _check_amount(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _check_structured(t, self.dim)
        channels = t.shape[self.dim]
        k = _count_to_prune(self.amount, channels)
        # (the norms and topk run before k == 0 is known to keep all: their errors come first)
        kept = tg.topk(_channel_norms(t, self.n, self.dim), k=channels - k, largest=True).indices
        if k == 0:
            return default_mask
        mask = _channel_mask(t, self.dim, kept)
        mask *= default_mask.to(dtype=mask.dtype)
        return mask

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where a given ``mask`` is 0."""
    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if default_mask.shape != self.mask.shape:
            raise AssertionError(f"default_mask shape {default_mask.shape} must match self.mask "
                                 f"shape {self.mask.shape}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def identity(module, name):
    """Give ``module.<name>`` the pruning machinery with an all-ones mask; returns ``module``.

    Example:
        >>> from tapegrad.nn.utils import prune
        >>> m = prune.identity(nn.Linear(2, 3), "weight")
        >>> m.weight_mask
        tensor([[1., 1.],
                [1., 1.],
                [1., 1.]])
    """
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Prune ``amount`` (a count, or a fraction) of ``module.<name>``'s unpruned entries at
    random; returns ``module``."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Prune the ``amount`` entries of ``module.<name>`` of smallest magnitude (or smallest
    ``importance_scores``); returns ``module``.

    Example:
        >>> from tapegrad.nn.utils import prune
        >>> m = nn.Linear(2, 1)
        >>> with tg.no_grad():
        ...     _ = m.weight.copy_(tg.tensor([[0.5, -2.0]]))
        >>> m = prune.l1_unstructured(m, "weight", amount=1)
        >>> m.weight_mask
        tensor([[0., 1.]])
    """
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Prune ``amount`` of ``module.<name>``'s channels along ``dim`` at random; returns
    ``module``."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Prune the ``amount`` channels of ``module.<name>`` along ``dim`` of smallest ``n``-norm
    (of ``importance_scores`` if given); returns ``module``."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the ``(module, name)`` tensors of ``parameters`` together, as one vector, with
    ``pruning_method(**kwargs)`` (an unstructured method class); each gets its share of the
    combined mask through ``custom_from_mask``.  ``importance_scores`` maps ``(module, name)``
    to scores used in place of that tensor."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    # (parameters is read more than once: a generator would be empty the second time, as in
    # PyTorch; the tensors are flattened by view, as parameters_to_vector flattens them)
    scores = tg.cat([importance_scores.get((module, name), getattr(module, name)).view(-1)
                     for module, name in parameters])
    default_mask = tg.cat(
        [getattr(module, name + "_mask", tg.ones_like(getattr(module, name))).view(-1)
         for module, name in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError('Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. '
                        f"Found method {pruning_method} of type {method.PRUNING_TYPE}")
    container.add_pruning_method(method)
    final_mask = container.compute_mask(scores, default_mask)
    start = 0
    for module, name in parameters:
        param = getattr(module, name)
        size = param.numel()
        custom_from_mask(module, name, mask=final_mask[start:start + size].view_as(param))
        start += size


def custom_from_mask(module, name, mask):
    """Prune ``module.<name>`` where ``mask`` is 0; returns ``module``."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name):
    """Make ``module.<name>`` a plain parameter again, holding its pruned values; returns
    ``module``.

    Example:
        >>> from tapegrad.nn.utils import prune
        >>> m = prune.remove(prune.identity(nn.Linear(2, 3), "weight"), "weight")
        >>> sorted(dict(m.named_parameters()))
        ['bias', 'weight']
    """
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning "
                     f"can be removed")


def is_pruned(module):
    """Whether ``module`` or any of its submodules has a pruning hook."""
    return any(isinstance(hook, BasePruningMethod)
               for _, sub in module.named_modules() for hook in sub._forward_pre_hooks.values())


# Programs see these under ``tapegrad.nn.utils.prune`` (the path they import them by), and
# their reprs and errors name that module as PyTorch's name torch.nn.utils.prune
for _name in __all__:
    globals()[_name].__module__ = "tapegrad.nn.utils.prune"
del _name

from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
