"""Normal, Bernoulli, Categorical, Uniform, Laplace, Exponential and Independent, each built
from the tapegrad ops PyTorch's class calls, so values, gradients and the random draws after
``manual_seed`` are PyTorch's."""
import math
from numbers import Number

import tapegrad as tg

from . import constraints
from .distribution import (Distribution, _sum_rightmost, broadcast_all, lazy_property,
                           logits_to_probs, probs_to_logits)

__all__ = ["Bernoulli", "Categorical", "Exponential", "ExponentialFamily", "Independent",
           "Laplace", "Normal", "OneHotCategorical", "Uniform"]


class ExponentialFamily(Distribution):
    """Base class of the distributions of an exponential family (Normal, Bernoulli,
    Exponential here), as PyTorch's: ``kl_divergence`` between two different families of
    it raises PyTorch's NotImplementedError.

    Example:
        >>> from tapegrad.distributions import ExponentialFamily, Normal
        >>> isinstance(Normal(0.0, 1.0), ExponentialFamily)
        True
    """


def _standard_normal(shape, dtype):
    # PyTorch draws eps with Tensor.normal_ on an empty tensor of the sample's shape
    return tg.empty(shape, dtype=dtype).normal_()


def _expand_params(self, cls, names, batch_shape, _instance):
    new = self._get_checked_instance(cls, _instance)
    batch_shape = tg.Size(batch_shape)
    for name in names:
        if name in self.__dict__:
            setattr(new, name, self.__dict__[name].expand(batch_shape))
    Distribution.__init__(new, batch_shape, validate_args=False)
    new._validate_args = self._validate_args
    return new


def _class_mixing_in(self, mixin):
    # the class that lists ``mixin`` among its bases (Normal for _LocationScale), which its
    # expand makes: a subclass with its own __init__ and no expand of its own gets PyTorch's
    # error naming that class
    return next(c for c in type(self).__mro__ if mixin in c.__bases__)


class _LocationScale:
    """What Normal, Laplace and Cauchy share: real ``loc`` and positive ``scale`` broadcast
    together (a 0-d batch when both are numbers), ``loc`` the mode and (but for Cauchy's,
    which has none) the mean."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        if isinstance(loc, Number) and isinstance(scale, Number):
            batch_shape = tg.Size()
        else:
            batch_shape = self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, _class_mixing_in(self, _LocationScale), ("loc", "scale"),
                              batch_shape, _instance)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc


class Normal(_LocationScale, ExponentialFamily):
    """The normal distribution with mean ``loc`` and standard deviation ``scale``.

    Example:
        >>> from tapegrad.distributions import Normal
        >>> Normal(tg.zeros(3), tg.ones(3))
        Normal(loc: tapegrad.Size([3]), scale: tapegrad.Size([3]))
    """
    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def sample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        with tg.no_grad():
            return tg.normal(self.loc.expand(shape), self.scale.expand(shape))

    def rsample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        return (-((value - self.loc) ** 2) / (2 * var) - self.scale.log()
                - math.log(math.sqrt(2 * math.pi)))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + tg.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * tg.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + tg.log(self.scale)


class Laplace(_LocationScale, Distribution):
    """The Laplace distribution with location ``loc`` and scale ``scale``.

    Example:
        >>> from tapegrad.distributions import Laplace
        >>> Laplace(0.0, 1.0).entropy()
        tensor(1.6931)
    """
    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def rsample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        finfo = tg.finfo(self.loc.dtype)
        # uniform on (eps - 1, 1): PyTorch's draw, which keeps log1p(-|u|) finite
        u = self.loc.new(shape).uniform_(finfo.eps - 1, 1)
        return self.loc - self.scale * u.sign() * tg.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -tg.log(2 * self.scale) - tg.abs(value - self.loc) / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * tg.expm1(
            -(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * tg.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + tg.log(2 * self.scale)


class _Rate:
    """What Exponential and Poisson share: their one parameter, ``rate`` (a 0-d batch when it
    is a number)."""

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = tg.Size() if isinstance(rate, Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, _class_mixing_in(self, _Rate), ("rate",), batch_shape,
                              _instance)


class Exponential(_Rate, ExponentialFamily):
    """The exponential distribution with rate ``rate``.

    Example:
        >>> from tapegrad.distributions import Exponential
        >>> Exponential(tg.tensor([2.0])).mean
        tensor([0.5000])
    """
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return tg.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        return self.rate.new(shape).exponential_() / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - tg.exp(-self.rate * value)

    def icdf(self, value):
        return -tg.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - tg.log(self.rate)


class Uniform(Distribution):
    """The uniform distribution on the half-open interval ``[low, high)``.

    Example:
        >>> from tapegrad.distributions import Uniform
        >>> Uniform(0.0, 2.0).mean
        tensor(1.)
    """
    has_rsample = True

    @property
    def arg_constraints(self):
        return {"low": constraints.less_than(self.high),
                "high": constraints.greater_than(self.low)}

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        if isinstance(low, Number) and isinstance(high, Number):
            batch_shape = tg.Size()
        else:
            batch_shape = self.low.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Uniform, ("low", "high"), batch_shape, _instance)

    @property
    def support(self):
        return constraints.interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return math.nan * self.high

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        rand = tg.rand(shape, dtype=self.low.dtype)
        return self.low + rand * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        lb = self.low.le(value).type_as(self.low)
        ub = self.high.gt(value).type_as(self.low)
        return tg.log(lb.mul(ub)) - tg.log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        result = (value - self.low) / (self.high - self.low)
        return result.clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return tg.log(self.high - self.low)


class _BinaryProbsOrLogits:
    """What Bernoulli, Binomial and Geometric share: the success probability given as
    ``probs`` or as ``logits`` (not both), the other made from it on first use."""

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)


class _BinaryParam(_BinaryProbsOrLogits):
    """Bernoulli's and Binomial's part beyond that: ``_param``, the one of ``probs`` and
    ``logits`` given, whose size is ``param_shape``, and kept by ``expand``."""

    def _expand_keeping_param(self, cls, names, batch_shape, _instance):
        new = _expand_params(self, cls, names, batch_shape, _instance)
        new._param = new.__dict__["logits" if "logits" in self.__dict__ else "probs"]
        return new

    @property
    def param_shape(self):
        return self._param.size()


class Bernoulli(_BinaryParam, ExponentialFamily):
    """The Bernoulli distribution, given ``probs`` or ``logits`` (not both).

    Example:
        >>> from tapegrad.distributions import Bernoulli
        >>> Bernoulli(logits=tg.tensor([0.0])).probs
        tensor([0.5000])
    """
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = tg.Size() if is_scalar else self._param.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_keeping_param(Bernoulli, ("probs", "logits"), batch_shape,
                                          _instance)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs)
        mode[self.probs == 0.5] = math.nan
        return mode

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        with tg.no_grad():
            return tg.bernoulli(self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -tg.nn.functional.binary_cross_entropy_with_logits(logits, value,
                                                                  reduction="none")

    def entropy(self):
        return tg.nn.functional.binary_cross_entropy_with_logits(self.logits, self.probs,
                                                                 reduction="none")

    def enumerate_support(self, expand=True):
        values = tg.arange(2, dtype=self._param.dtype)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values


class Categorical(Distribution):
    """The categorical distribution over the categories ``0`` to ``K - 1``, given ``probs``
    or ``logits`` (not both) whose last dimension has the K categories.

    Example:
        >>> from tapegrad.distributions import Categorical
        >>> Categorical(probs=tg.tensor([1.0, 3.0])).probs
        tensor([0.2500, 0.7500])
    """
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            # normalised, so log_prob is a gather of them
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.ndimension() > 1 else tg.Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = tg.Size(batch_shape)
        param_shape = tuple(batch_shape) + (self._num_events,)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(param_shape))
                new._param = new.__dict__[name]
        new._num_events = self._num_events
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return self._param.size()

    @property
    def mean(self):
        return tg.full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype)

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    @property
    def variance(self):
        return tg.full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype)

    def sample(self, sample_shape=tg.Size()):
        sample_shape = tg.Size(sample_shape)
        probs_2d = self.probs.reshape(-1, self._num_events)
        with tg.no_grad():
            samples_2d = tg.multinomial(probs_2d, sample_shape.numel(), True).T
        return samples_2d.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = tg.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self):
        min_real = tg.finfo(self.logits.dtype).min
        logits = tg.clamp(self.logits, min=min_real)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = tg.arange(self._num_events, dtype=tg.int64)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values


class Independent(Distribution):
    """Reinterprets the rightmost ``reinterpreted_batch_ndims`` batch dimensions of a
    distribution as event dimensions: ``log_prob`` sums over them.

    Example:
        >>> from tapegrad.distributions import Independent, Normal
        >>> Independent(Normal(tg.zeros(2, 3), tg.ones(2, 3)), 1).event_shape
        tapegrad.Size([3])
    """
    arg_constraints = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        if reinterpreted_batch_ndims > len(base_distribution.batch_shape):
            raise ValueError(
                "Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), "
                f"actual {reinterpreted_batch_ndims} vs {len(base_distribution.batch_shape)}")
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = reinterpreted_batch_ndims + len(base_distribution.event_shape)
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__(shape[:len(shape) - event_dim], shape[len(shape) - event_dim:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Independent, _instance)
        batch_shape = tg.Size(batch_shape)
        new.base_dist = self.base_dist.expand(
            tuple(batch_shape) + tuple(self.event_shape[:self.reinterpreted_batch_ndims]))
        new.reinterpreted_batch_ndims = self.reinterpreted_batch_ndims
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self):
        if self.reinterpreted_batch_ndims > 0:
            return False
        return self.base_dist.has_enumerate_support

    @constraints.dependent_property
    def support(self):
        result = self.base_dist.support
        if self.reinterpreted_batch_ndims:
            result = constraints.independent(result, self.reinterpreted_batch_ndims)
        return result

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=tg.Size()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=tg.Size()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return _sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return _sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def enumerate_support(self, expand=True):
        if self.reinterpreted_batch_ndims > 0:
            raise NotImplementedError("Enumeration over cartesian product is not implemented")
        return self.base_dist.enumerate_support(expand=expand)

    def __repr__(self):
        return f"{self.__class__.__name__}({self.base_dist}, {self.reinterpreted_batch_ndims})"


class OneHotCategorical(Distribution):
    """The categorical distribution with one-hot vectors as its values (event shape
    ``(K,)``), given ``probs`` or ``logits``.

    Example:
        >>> from tapegrad.distributions import OneHotCategorical
        >>> OneHotCategorical(probs=tg.tensor([0.0, 1.0])).sample()
        tensor([0., 1.])
    """
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(OneHotCategorical, _instance)
        batch_shape = tg.Size(batch_shape)
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _param(self):
        return self._categorical._param

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        probs = self._categorical.probs
        mode = probs.argmax(dim=-1)
        return tg.nn.functional.one_hot(mode, num_classes=probs.shape[-1]).to(probs)

    @property
    def variance(self):
        return self._categorical.probs * (1 - self._categorical.probs)

    @property
    def param_shape(self):
        return self._categorical.param_shape

    def sample(self, sample_shape=tg.Size()):
        probs = self._categorical.probs
        indices = self._categorical.sample(tg.Size(sample_shape))
        return tg.nn.functional.one_hot(indices, self._categorical._num_events).to(probs)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        indices = value.max(-1)[1]
        return self._categorical.log_prob(indices)

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self.event_shape[0]
        values = tg.eye(n, dtype=self._param.dtype)
        values = values.view((n,) + (1,) * len(self.batch_shape) + (n,))
        if expand:
            values = values.expand((n,) + tuple(self.batch_shape) + (n,))
        return values
