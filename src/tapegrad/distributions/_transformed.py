"""TransformedDistribution and the distributions PyTorch builds on it (LogNormal, HalfNormal,
Gumbel), with Cauchy, StudentT, Poisson, Geometric and Binomial: each from the ops PyTorch's
class calls, so values, gradients and draws after ``manual_seed`` are PyTorch's."""
import math
from numbers import Number

import tapegrad as tg

from . import constraints
from ._gamma import Chi2
from ._ops import binomial
from ._univariate import (ExponentialFamily, Independent, Normal, Uniform, _BinaryParam,
                          _BinaryProbsOrLogits, _expand_params, _LocationScale, _Rate,
                          _standard_normal)
from .distribution import Distribution, _fill, _sum_rightmost, broadcast_all
from .transforms import AbsTransform, AffineTransform, ComposeTransform, ExpTransform, Transform

__all__ = ["Binomial", "Cauchy", "Geometric", "Gumbel", "HalfNormal", "LogNormal", "Poisson",
           "StudentT", "TransformedDistribution"]

_EULER = 0.57721566490153286060


def _base_dist_parameter(name):
    # a parameter kept only by the base distribution (LogNormal's loc and scale are its
    # Normal's), so that expand, which expands base_dist, expands it too
    def parameter(self):
        return getattr(self.base_dist, name)
    parameter.__name__ = name
    return property(parameter)


class TransformedDistribution(Distribution):
    """A base distribution pushed through a list of transforms: ``sample`` applies them,
    ``log_prob`` inverts them and subtracts their log-determinants.

    Example:
        >>> from tapegrad.distributions import Normal, TransformedDistribution
        >>> from tapegrad.distributions.transforms import ExpTransform
        >>> d = TransformedDistribution(Normal(0.0, 1.0), [ExpTransform()])
        >>> d.log_prob(tg.tensor(1.0))
        tensor(-0.9189)
    """
    arg_constraints = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            self.transforms = [transforms]
        elif isinstance(transforms, list):
            if not all(isinstance(t, Transform) for t in transforms):
                raise ValueError("transforms must be a Transform or a list of Transforms")
            self.transforms = transforms
        else:
            raise ValueError(f"transforms must be a Transform or list, but was {transforms}")
        base_shape = tg.Size(tuple(base_distribution.batch_shape)
                             + tuple(base_distribution.event_shape))
        base_event_dim = len(base_distribution.event_shape)
        transform = ComposeTransform(self.transforms)
        if len(base_shape) < transform.domain.event_dim:
            raise ValueError("base_distribution needs to have shape with size at least "
                             f"{transform.domain.event_dim}, but got {base_shape}.")
        forward_shape = tg.Size(transform.forward_shape(base_shape))
        expanded_base_shape = tg.Size(transform.inverse_shape(forward_shape))
        if base_shape != expanded_base_shape:
            base_batch_shape = expanded_base_shape[:len(expanded_base_shape) - base_event_dim]
            base_distribution = base_distribution.expand(base_batch_shape)
        reinterpreted_batch_ndims = transform.domain.event_dim - base_event_dim
        if reinterpreted_batch_ndims > 0:
            base_distribution = Independent(base_distribution, reinterpreted_batch_ndims)
        self.base_dist = base_distribution
        change = transform.codomain.event_dim - transform.domain.event_dim
        event_dim = max(transform.codomain.event_dim, base_event_dim + change)
        cut = len(forward_shape) - event_dim
        super().__init__(forward_shape[:cut], forward_shape[cut:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(TransformedDistribution, _instance)
        batch_shape = tg.Size(batch_shape)
        shape = tg.Size(tuple(batch_shape) + tuple(self.event_shape))
        for t in reversed(self.transforms):
            shape = t.inverse_shape(shape)
        base_batch_shape = shape[:len(shape) - len(self.base_dist.event_shape)]
        new.base_dist = self.base_dist.expand(base_batch_shape)
        new.transforms = self.transforms
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=False)
    def support(self):
        if not self.transforms:
            return self.base_dist.support
        support = self.transforms[-1].codomain
        if len(self.event_shape) > support.event_dim:
            support = constraints.independent(support, len(self.event_shape)
                                              - support.event_dim)
        return support

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    def sample(self, sample_shape=tg.Size()):
        with tg.no_grad():
            x = self.base_dist.sample(sample_shape)
            for transform in self.transforms:
                x = transform(x)
            return x

    def rsample(self, sample_shape=tg.Size()):
        x = self.base_dist.rsample(sample_shape)
        for transform in self.transforms:
            x = transform(x)
        return x

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        event_dim = len(self.event_shape)
        log_prob = 0.0
        y = value
        for transform in reversed(self.transforms):
            x = transform.inv(y)
            event_dim += transform.domain.event_dim - transform.codomain.event_dim
            log_prob = log_prob - _sum_rightmost(transform.log_abs_det_jacobian(x, y),
                                                 event_dim - transform.domain.event_dim)
            y = x
        return log_prob + _sum_rightmost(self.base_dist.log_prob(y),
                                         event_dim - len(self.base_dist.event_shape))

    def _monotonize_cdf(self, value):
        sign = 1
        for transform in self.transforms:
            sign = sign * transform.sign
        if isinstance(sign, int) and sign == 1:
            return value
        return sign * (value - 0.5) + 0.5

    def cdf(self, value):
        for transform in self.transforms[::-1]:
            value = transform.inv(value)
        if self._validate_args:
            self.base_dist._validate_sample(value)
        return self._monotonize_cdf(self.base_dist.cdf(value))

    def icdf(self, value):
        value = self.base_dist.icdf(self._monotonize_cdf(value))
        for transform in self.transforms:
            value = transform(value)
        return value


class LogNormal(TransformedDistribution):
    """The distribution of exp(X) for X normal with mean ``loc`` and deviation ``scale``.

    Example:
        >>> from tapegrad.distributions import LogNormal
        >>> LogNormal(0.0, 1.0).mode
        tensor(0.3679)
    """
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base_dist = Normal(loc, scale, validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    loc = _base_dist_parameter("loc")
    scale = _base_dist_parameter("scale")

    @property
    def mean(self):
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self):
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self):
        scale_sq = self.scale.pow(2)
        return scale_sq.expm1() * (2 * self.loc + scale_sq).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc


class HalfNormal(TransformedDistribution):
    """The distribution of ``abs(X)`` for X normal with mean 0 and deviation ``scale``.

    Example:
        >>> from tapegrad.distributions import HalfNormal
        >>> HalfNormal(1.0, validate_args=False).log_prob(tg.tensor(-1.0))
        tensor(-inf)
    """
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        base_dist = Normal(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    scale = _base_dist_parameter("scale")

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self):
        return tg.zeros_like(self.scale)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return tg.where(value >= 0, log_prob, -math.inf)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class Gumbel(TransformedDistribution):
    """The Gumbel (type I extreme value) distribution with location ``loc`` and scale
    ``scale``, drawn as loc - scale * log(-log(U)).

    Example:
        >>> from tapegrad.distributions import Gumbel
        >>> Gumbel(0.0, 1.0).mode
        tensor(0.)
    """
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        finfo = tg.finfo(self.loc.dtype)
        if isinstance(loc, Number) and isinstance(scale, Number):
            base_dist = Uniform(finfo.tiny, 1 - finfo.eps, validate_args=validate_args)
        else:
            base_dist = Uniform(tg.full_like(self.loc, finfo.tiny),
                                tg.full_like(self.loc, 1 - finfo.eps),
                                validate_args=validate_args)
        transforms = [ExpTransform().inv,
                      AffineTransform(loc=0, scale=-tg.ones_like(self.scale)),
                      ExpTransform().inv,
                      AffineTransform(loc=loc, scale=-self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gumbel, _instance)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    @property
    def mean(self):
        return self.loc + self.scale * _EULER

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def entropy(self):
        return self.scale.log() + (1 + _EULER)


class Cauchy(_LocationScale, Distribution):
    """The Cauchy (Lorentz) distribution with median ``loc`` and half width ``scale``.

    Example:
        >>> from tapegrad.distributions import Cauchy
        >>> Cauchy(0.0, 1.0).cdf(tg.tensor(0.0))
        tensor(0.5000)
    """
    @property
    def mean(self):
        return tg.full(tuple(self._extended_shape()), math.nan, dtype=self.loc.dtype)

    @property
    def variance(self):
        return tg.full(tuple(self._extended_shape()), math.inf, dtype=self.loc.dtype)

    def rsample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        eps = self.loc.new(shape).cauchy_()
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (-math.log(math.pi) - self.scale.log()
                - (((value - self.loc) / self.scale) ** 2).log1p())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return tg.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return tg.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class StudentT(Distribution):
    """Student's t distribution with ``df`` degrees of freedom, location ``loc`` and scale
    ``scale``.

    Example:
        >>> from tapegrad.distributions import StudentT
        >>> StudentT(tg.tensor([1.0, 3.0])).variance
        tensor([nan, 3.])
    """
    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = _expand_params(self, StudentT, ("df", "loc", "scale"), batch_shape, _instance)
        new._chi2 = self._chi2.expand(batch_shape)
        return new

    @property
    def mean(self):
        m = self.loc.clone()
        _fill(m, self.df <= 1, math.nan)
        return m

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        m = self.df.clone()
        big = self.df > 2
        m.index_put_((big,), self.scale[big].pow(2) * self.df[big] / (self.df[big] - 2))
        _fill(m, (self.df <= 2) & (self.df > 1), math.inf)
        _fill(m, self.df <= 1, math.nan)
        return m

    def rsample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        X = _standard_normal(shape, self.df.dtype)
        Z = self._chi2.rsample(sample_shape)
        Y = X * tg.rsqrt(Z / self.df)
        return self.loc + self.scale * Y

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        Z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
             + tg.lgamma(0.5 * self.df) - tg.lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * tg.log1p(y ** 2.0 / self.df) - Z

    def entropy(self):
        lbeta = (tg.lgamma(0.5 * self.df) + math.lgamma(0.5)
                 - tg.lgamma(0.5 * (self.df + 1)))
        return (self.scale.log()
                + 0.5 * (self.df + 1) * (tg.digamma(0.5 * (self.df + 1))
                                         - tg.digamma(0.5 * self.df))
                + 0.5 * self.df.log() + lbeta)


class Poisson(_Rate, ExponentialFamily):
    """The Poisson distribution with rate ``rate``.

    Example:
        >>> from tapegrad.distributions import Poisson
        >>> Poisson(tg.tensor([2.5])).mode
        tensor([2.])
    """
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        with tg.no_grad():
            return tg.poisson(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - (value + 1).lgamma()

    @property
    def _natural_params(self):
        return (tg.log(self.rate),)

    def _log_normalizer(self, x):
        return tg.exp(x)


class Geometric(_BinaryProbsOrLogits, Distribution):
    """The number of failures before the first success of Bernoulli trials with success
    probability ``probs`` (or ``logits``).

    Example:
        >>> from tapegrad.distributions import Geometric
        >>> Geometric(probs=tg.tensor([0.25])).mean
        tensor([3.])
    """
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        given = probs if probs is not None else logits
        batch_shape = tg.Size() if isinstance(given, Number) else given.size()
        super().__init__(batch_shape, validate_args=validate_args)
        if self._validate_args and probs is not None:
            value = self.probs
            valid = value > 0
            if not valid.all():
                raise ValueError(
                    "Expected parameter probs "
                    f"({type(value).__name__} of shape {tuple(value.shape)}) "
                    f"of distribution {self!r} "
                    f"to be positive but found invalid values:\n{value.data[~valid]}")

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Geometric, ("probs", "logits"), batch_shape, _instance)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return tg.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        tiny = tg.finfo(self.probs.dtype).tiny
        with tg.no_grad():
            u = self.probs.new(shape).uniform_(tiny, 1)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = probs.clone()
        _fill(probs, (probs == 1) & (value == 0), 0)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return tg.nn.functional.binary_cross_entropy_with_logits(
            self.logits, self.probs, reduction="none") / self.probs


def _clamp_by_zero(x):
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(_BinaryParam, Distribution):
    """The number of successes in ``total_count`` Bernoulli trials with success
    probability ``probs`` (or ``logits``).

    Example:
        >>> from tapegrad.distributions import Binomial
        >>> Binomial(10, tg.tensor([0.25])).mean
        tensor([2.5000])
    """
    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.type_as(self.probs)
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.type_as(self.logits)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_keeping_param(Binomial, ("total_count", "probs", "logits"),
                                          batch_shape, _instance)

    def _new(self, *args, **kwargs):
        return self._param.new(*args, **kwargs)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        with tg.no_grad():
            return binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_factorial_n = tg.lgamma(self.total_count + 1)
        log_factorial_k = tg.lgamma(value + 1)
        log_factorial_nmk = tg.lgamma(self.total_count - value + 1)
        normalize_term = (self.total_count * _clamp_by_zero(self.logits)
                          + self.total_count * tg.log1p(tg.exp(-tg.abs(self.logits)))
                          - log_factorial_n)
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize_term

    def entropy(self):
        total_count = int(self.total_count.max())
        if not self.total_count.min() == total_count:
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(tg.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        total_count = int(self.total_count.max())
        if not self.total_count.min() == total_count:
            raise NotImplementedError(
                "Inhomogeneous total count not supported by `enumerate_support`.")
        values = tg.arange(1 + total_count, dtype=self._param.dtype)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
