"""TransformedDistribution and the distributions PyTorch builds on it (LogNormal, HalfNormal,
HalfCauchy, Gumbel, Pareto, Weibull, InverseGamma), with Cauchy, StudentT, Poisson, Geometric
and Binomial: each from the ops PyTorch's class calls, so values, gradients and draws after
``manual_seed`` are PyTorch's."""
import math
from numbers import Number

import tapegrad as tg

from . import constraints
from ._gamma import Chi2, Gamma
from ._ops import binomial
from ._univariate import (Exponential, ExponentialFamily, Independent, Normal, Uniform,
                          _BinaryParam, _BinaryProbsOrLogits, _expand_params, _LocationScale,
                          _Rate, _standard_normal)
from .distribution import Distribution, _fill, _sum_rightmost, broadcast_all
from .transforms import (AbsTransform, AffineTransform, ComposeTransform, ExpTransform,
                         PowerTransform, Transform)

__all__ = ["Binomial", "Cauchy", "Geometric", "Gumbel", "HalfCauchy", "HalfNormal",
           "InverseGamma", "LogNormal", "Pareto", "Poisson", "StudentT",
           "TransformedDistribution", "Weibull"]

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


class _FoldedAtZero(TransformedDistribution):
    """``abs(X)`` for X symmetric about 0 with scale ``scale`` (the subclass's ``_symmetric``):
    X's density doubled on [0, inf), as PyTorch's HalfNormal and HalfCauchy compute it."""
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        base_dist = self._symmetric(scale)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    scale = _base_dist_parameter("scale")

    @property
    def mode(self):
        return tg.zeros_like(self.scale)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._folded_log_prob(value)

    def _folded_log_prob(self, value):
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


class HalfNormal(_FoldedAtZero):
    """The distribution of ``abs(X)`` for X normal with mean 0 and deviation ``scale``.

    Example:
        >>> from tapegrad.distributions import HalfNormal
        >>> HalfNormal(1.0, validate_args=False).log_prob(tg.tensor(-1.0))
        tensor(-inf)
    """

    @staticmethod
    def _symmetric(scale):
        return Normal(0, scale, validate_args=False)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)


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


class Pareto(TransformedDistribution):
    """The Pareto (type I) distribution with minimum ``scale`` and tail index ``alpha``:
    ``scale * exp(E)`` for E exponential with rate ``alpha``.

    Example:
        >>> from tapegrad.distributions import Pareto
        >>> Pareto(1.0, 3.0).mean
        tensor(1.5000)
    """
    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        base_dist = Exponential(self.alpha, validate_args=validate_args)
        transforms = [ExpTransform(), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Pareto, _instance)
        new.scale = self.scale.expand(batch_shape)
        new.alpha = self.alpha.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        # alpha <= 1 has no finite mean: clamping to 1 divides by zero and gives inf
        alpha = self.alpha.clamp(min=1)
        return alpha * self.scale / (alpha - 1)

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        # likewise infinite for alpha <= 2
        alpha = self.alpha.clamp(min=2)
        return self.scale.pow(2) * alpha / ((alpha - 1).pow(2) * (alpha - 2))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than_eq(self.scale)

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())


def _weibull_transforms(scale, concentration_reciprocal):
    return [PowerTransform(exponent=concentration_reciprocal),
            AffineTransform(loc=0, scale=scale)]


class Weibull(TransformedDistribution):
    """The Weibull distribution with scale ``scale`` and shape ``concentration``:
    ``scale * E ** (1 / concentration)`` for E standard exponential.

    Example:
        >>> from tapegrad.distributions import Weibull
        >>> Weibull(2.0, 1.0).mean
        tensor(2.)
    """
    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base_dist = Exponential(tg.ones_like(self.scale), validate_args=validate_args)
        super().__init__(base_dist,
                         _weibull_transforms(self.scale, self.concentration_reciprocal),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        # the transforms hold the parameters, so they are rebuilt from the expanded ones
        new = self._get_checked_instance(Weibull, _instance)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.concentration_reciprocal = new.concentration.reciprocal()
        TransformedDistribution.__init__(
            new, self.base_dist.expand(batch_shape),
            _weibull_transforms(new.scale, new.concentration_reciprocal), validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.scale * tg.exp(tg.lgamma(1 + self.concentration_reciprocal))

    @property
    def mode(self):
        # nan below concentration 1 (a negative base to a fractional power), as PyTorch's
        return (self.scale * ((self.concentration - 1) / self.concentration)
                ** self.concentration.reciprocal())

    @property
    def variance(self):
        return self.scale.pow(2) * (
            tg.exp(tg.lgamma(1 + 2 * self.concentration_reciprocal))
            - tg.exp(2 * tg.lgamma(1 + self.concentration_reciprocal)))

    def entropy(self):
        return (_EULER * (1 - self.concentration_reciprocal)
                + tg.log(self.scale * self.concentration_reciprocal) + 1)


class InverseGamma(TransformedDistribution):
    """The distribution of 1 / X for X gamma with shape ``concentration`` and rate ``rate``.

    Example:
        >>> from tapegrad.distributions import InverseGamma
        >>> InverseGamma(3.0, 4.0).mean
        tensor(2.)
    """
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        base_dist = Gamma(concentration, rate, validate_args=validate_args)
        minus_one = -base_dist.rate.new_ones(())
        super().__init__(base_dist, PowerTransform(minus_one), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(InverseGamma, _instance)
        return super().expand(batch_shape, _instance=new)

    concentration = _base_dist_parameter("concentration")
    rate = _base_dist_parameter("rate")

    @property
    def mean(self):
        mean = self.rate / (self.concentration - 1)
        return tg.where(self.concentration > 1, mean, math.inf)

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        variance = self.rate.square() / ((self.concentration - 1).square()
                                         * (self.concentration - 2))
        return tg.where(self.concentration > 2, variance, math.inf)

    def entropy(self):
        return (self.concentration + self.rate.log() + self.concentration.lgamma()
                - (1 + self.concentration) * self.concentration.digamma())


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


class HalfCauchy(_FoldedAtZero):
    """The distribution of ``abs(X)`` for X Cauchy with median 0 and half width ``scale``.

    Example:
        >>> from tapegrad.distributions import HalfCauchy
        >>> HalfCauchy(1.0).cdf(tg.tensor(1.0))
        tensor(0.5000)
    """

    @staticmethod
    def _symmetric(scale):
        return Cauchy(0, scale, validate_args=False)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfCauchy, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return tg.full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype)

    @property
    def variance(self):
        return self.base_dist.variance

    def log_prob(self, value):
        # unlike HalfNormal's, a number is made a tensor once validated, as PyTorch's does
        if self._validate_args:
            self._validate_sample(value)
        return self._folded_log_prob(tg.as_tensor(value, dtype=self.scale.dtype))


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
