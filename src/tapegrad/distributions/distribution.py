"""The ``Distribution`` base class, as ``torch.distributions.Distribution``."""
import warnings

import tapegrad as tg

from . import constraints

__all__ = ["Distribution"]


class lazy_property:
    """A parameter computed from another on first use (``probs`` from ``logits`` or back),
    then stored on the instance, as PyTorch's ``lazy_property``."""

    def __init__(self, fn):
        self.wrapped = fn
        self.__doc__ = fn.__doc__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        with tg.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def broadcast_all(*values):
    # numbers become tensors of the default dtype (of a tensor's dtype where one is given),
    # then all broadcast together, as torch.distributions.utils.broadcast_all
    tensors = [v for v in values if isinstance(v, tg.Tensor)]
    dtype = tensors[0].dtype if tensors else tg.get_default_dtype()
    values = [v if isinstance(v, tg.Tensor) else tg.tensor(v, dtype=dtype) for v in values]
    return tg.broadcast_tensors(*values)


def _fill(t, mask, value):
    # PyTorch writes ``t[mask] = value``, an index_put_ on a tensor that is no view (its
    # grad_fn IndexPutBackward0); tapegrad's masked __setitem__ records CopySlices, so the
    # write is spelled as the index_put_ it is
    t.index_put_((mask,), tg.tensor(value, dtype=t.dtype))


def _sum_rightmost(value, dim):
    if dim == 0:
        return value
    return value.reshape(value.shape[:value.dim() - dim] + (-1,)).sum(-1)


def clamp_probs(probs):
    eps = tg.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    ps = clamp_probs(probs)
    if is_binary:
        return tg.log(ps) - tg.log1p(-ps)
    return tg.log(ps)


def logits_to_probs(logits, is_binary=False):
    if is_binary:
        return tg.sigmoid(logits)
    return tg.nn.functional.softmax(logits, dim=-1)


class Distribution:
    """Base class of probability distributions: ``batch_shape``, ``event_shape``,
    ``sample``/``rsample``, ``log_prob``, ``entropy`` and argument validation, as
    ``torch.distributions.Distribution``.

    Example:
        >>> from tapegrad.distributions import Normal
        >>> Normal(tg.zeros(3), tg.ones(3)).batch_shape
        tapegrad.Size([3])
    """
    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        """Turn validation of arguments and of ``log_prob`` values on or off for every
        distribution made afterwards without ``validate_args``.

        Example:
            >>> from tapegrad.distributions import Distribution
            >>> Distribution.set_default_validate_args(True)
        """
        if value not in [True, False]:
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=tg.Size(), event_shape=tg.Size(), validate_args=None):
        self._batch_shape = tg.Size(batch_shape)
        self._event_shape = tg.Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(
                    f"{self.__class__} does not define `arg_constraints`. Please set "
                    "`arg_constraints = {}` or initialize the distribution with "
                    "`validate_args=False` to turn off validation.", stacklevel=2)
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param),
                                                             lazy_property):
                    continue   # not made yet: the parameter it is made from was checked
                value = getattr(self, param)
                if not bool(constraint.check(value).all()):
                    raise ValueError(
                        f"Expected parameter {param} "
                        f"({type(value).__name__} of shape {tuple(value.shape)}) "
                        f"of distribution {self!r} "
                        f"to satisfy the constraint {constraint!r}, "
                        f"but found invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None):
        """A distribution of the same kind with its parameters expanded to ``batch_shape``.

        Example:
            >>> from tapegrad.distributions import Normal
            >>> Normal(0.0, 1.0).expand((2,)).batch_shape
            tapegrad.Size([2])
        """
        raise NotImplementedError

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def arg_constraints(self):
        raise NotImplementedError

    @property
    def support(self):
        raise NotImplementedError

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=tg.Size()):
        """A draw of shape ``sample_shape + batch_shape + event_shape``, outside autograd.

        Example:
            >>> from tapegrad.distributions import Normal
            >>> Normal(tg.zeros(2), tg.ones(2)).sample((3,)).shape
            tapegrad.Size([3, 2])
        """
        with tg.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=tg.Size()):
        """A reparameterised draw: gradients flow to the parameters.

        Example:
            >>> from tapegrad.distributions import Normal
            >>> Normal(tg.zeros(2), tg.ones(2)).rsample().shape
            tapegrad.Size([2])
        """
        raise NotImplementedError

    def sample_n(self, n):
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.",
                      FutureWarning, stacklevel=2)
        return self.sample(tg.Size((n,)))

    def log_prob(self, value):
        """The log density (or mass) at ``value``.

        Example:
            >>> from tapegrad.distributions import Normal
            >>> Normal(0.0, 1.0).log_prob(tg.tensor(0.0))
            tensor(-0.9189)
        """
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        return tg.exp(self.entropy())

    def _extended_shape(self, sample_shape=tg.Size()):
        return tg.Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value):
        if not isinstance(value, tg.Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = len(value.size()) - len(self._event_shape)
        if value.size()[event_dim_start:] != self._event_shape:
            raise ValueError("The right-most size of value must match event_shape: "
                             f"{value.size()} vs {self._event_shape}.")
        actual_shape = value.size()
        expected_shape = tg.Size(tuple(self._batch_shape) + tuple(self._event_shape))
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError("Value is not broadcastable with batch_shape+event_shape: "
                                 f"{actual_shape} vs {expected_shape}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample "
                          "validation. Please initialize the distribution with "
                          "`validate_args=False` to turn off validation.", stacklevel=2)
            return
        if not bool(support.check(value).all()):
            raise ValueError(
                "Expected value argument "
                f"({type(value).__name__} of shape {tuple(value.shape)}) "
                f"to be within the support ({support!r}) "
                f"of the distribution {self!r}, "
                f"but found invalid values:\n{value}")

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        # a one-element parameter prints as its tensor, any other as its size
        shown = [self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()
                 for p in names]
        args = ", ".join(f"{p}: {v}" for p, v in zip(names, shown))
        return self.__class__.__name__ + "(" + args + ")"
