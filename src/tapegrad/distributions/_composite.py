"""Distributions PyTorch builds from others: Multinomial (counts of categorical draws),
MixtureSameFamily, LogisticNormal (a normal through stick breaking), LKJCholesky (betas and
directions on spheres), Kumaraswamy (a uniform
through powers),
FisherSnedecor (a ratio of gammas), NegativeBinomial (a gamma-mixed Poisson), the relaxed
Bernoulli and one-hot categorical (Gumbel noise over a temperature) and the straight-through
one-hot categorical. Each draws what PyTorch's class draws, in the same order, so seeded
samples are PyTorch's."""
import math
from numbers import Number

import tapegrad as tg

from . import constraints
from ._gamma import Beta, Gamma
from ._transformed import _EULER, Binomial, TransformedDistribution
from ._univariate import Categorical, Normal, OneHotCategorical, Uniform, _BinaryParam
from .distribution import (Distribution, _fill, broadcast_all, clamp_probs, lazy_property)
from .transforms import (AffineTransform, ExpTransform, PowerTransform, SigmoidTransform,
                         StickBreakingTransform)

__all__ = ["ExpRelaxedCategorical", "FisherSnedecor", "Kumaraswamy", "LKJCholesky",
           "LogisticNormal",
           "LogitRelaxedBernoulli", "MixtureSameFamily", "Multinomial", "NegativeBinomial",
           "OneHotCategoricalStraightThrough", "RelaxedBernoulli", "RelaxedOneHotCategorical"]


def _kumaraswamy_moment(a, b, n):
    # E[X^n] = b B(1 + n/a, b), through lgamma as PyTorch computes it
    arg = 1 + n / a
    return b * tg.exp(tg.lgamma(arg) + tg.lgamma(b) - tg.lgamma(arg + b))


class Kumaraswamy(TransformedDistribution):
    """The Kumaraswamy distribution on [0, 1]: ``(1 - U^(1/b))^(1/a)`` for U uniform,
    a = ``concentration1``, b = ``concentration0``.

    Example:
        >>> from tapegrad.distributions import Kumaraswamy
        >>> Kumaraswamy(1.0, 1.0).mean
        tensor(0.5000)
    """
    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1,
                                                                 concentration0)
        base_dist = Uniform(tg.full_like(self.concentration0, 0),
                            tg.full_like(self.concentration0, 1), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()),
                      AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _kumaraswamy_moment(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        a, b = self.concentration1, self.concentration0
        log_mode = b.reciprocal() * (-b).log1p() - (-b * a).log1p()
        _fill(log_mode, (b < 1) | (a < 1), float("nan"))
        return log_mode.exp()

    @property
    def variance(self):
        return (_kumaraswamy_moment(self.concentration1, self.concentration0, 2)
                - tg.pow(self.mean, 2))

    def entropy(self):
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        harmonic = tg.digamma(self.concentration0 + 1) + _EULER
        return t0 + t1 * harmonic - tg.log(self.concentration1) - tg.log(self.concentration0)


class FisherSnedecor(Distribution):
    """The F distribution with ``df1`` and ``df2`` degrees of freedom: a ratio of two gamma
    draws (the first df1's, then df2's).

    Example:
        >>> from tapegrad.distributions import FisherSnedecor
        >>> FisherSnedecor(tg.tensor([3.0]), tg.tensor([6.0])).mean
        tensor([1.5000])
    """
    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        if isinstance(df1, Number) and isinstance(df2, Number):
            batch_shape = tg.Size()
        else:
            batch_shape = self.df1.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(FisherSnedecor, _instance)
        batch_shape = tg.Size(batch_shape)
        new.df1 = self.df1.expand(batch_shape)
        new.df2 = self.df2.expand(batch_shape)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        df2 = self.df2.clone()
        _fill(df2, df2 <= 2, float("nan"))
        return df2 / (df2 - 2)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        _fill(mode, self.df1 <= 2, float("nan"))
        return mode

    @property
    def variance(self):
        df2 = self.df2.clone()
        _fill(df2, df2 <= 4, float("nan"))
        return (2 * df2.pow(2) * (self.df1 + df2 - 2)
                / (self.df1 * (df2 - 2).pow(2) * (df2 - 4)))

    def rsample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        x1 = self._gamma1.rsample(sample_shape).view(shape)
        x2 = self._gamma2.rsample(sample_shape).view(shape)
        tiny = tg.finfo(x2.dtype).tiny
        x2.clamp_(min=tiny)
        ratio = x1 / x2
        ratio.clamp_(min=tiny)
        return ratio

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        half1, half2 = self.df1 * 0.5, self.df2 * 0.5
        ratio = self.df1 / self.df2
        t1 = (half1 + half2).lgamma() - half1.lgamma() - half2.lgamma()
        t2 = half1 * ratio.log() + (half1 - 1) * tg.log(value)
        t3 = (half1 + half2) * tg.log1p(ratio * value)
        return t1 + t2 - t3


class _BinaryParamAmongOthers(_BinaryParam):
    """``probs`` or ``logits`` (not both) broadcast with other parameters: what
    LogitRelaxedBernoulli and NegativeBinomial share in how they keep their parameter."""

    def _take_binary_param(self, probs, logits, *others):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        name, param = ("probs", probs) if probs is not None else ("logits", logits)
        values = broadcast_all(*others, param)
        setattr(self, name, values[-1])
        self._param = values[-1]
        return isinstance(param, Number), values[:-1]

    def _expand_binary_param(self, new, batch_shape):
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(batch_shape))
                new._param = new.__dict__[name]


class LogitRelaxedBernoulli(_BinaryParamAmongOthers, Distribution):
    """The logit of a relaxed Bernoulli variable: logistic noise plus the logits, over the
    ``temperature``.

    Example:
        >>> from tapegrad.distributions import RelaxedBernoulli
        >>> RelaxedBernoulli(tg.tensor(0.5), probs=tg.tensor([0.3])).base_dist.batch_shape
        tapegrad.Size([1])
    """
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        is_scalar, _ = self._take_binary_param(probs, logits)
        batch_shape = tg.Size() if is_scalar else self._param.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogitRelaxedBernoulli, _instance)
        batch_shape = tg.Size(batch_shape)
        new.temperature = self.temperature
        self._expand_binary_param(new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(shape))
        uniforms = clamp_probs(tg.rand(shape, dtype=probs.dtype))
        return (uniforms.log() - (-uniforms).log1p() + probs.log()
                - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value.mul(self.temperature)
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class _RelaxedThroughTransform(TransformedDistribution):
    """A relaxed variable: its base distribution's draw through one transform, the base
    holding the temperature and the parameters (shown here, as PyTorch's classes show them)."""

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs


class RelaxedBernoulli(_RelaxedThroughTransform):
    """The relaxed (concrete) Bernoulli distribution on (0, 1): the sigmoid of a
    ``LogitRelaxedBernoulli`` draw with ``temperature`` and ``probs`` or ``logits``.

    Example:
        >>> from tapegrad.distributions import RelaxedBernoulli
        >>> RelaxedBernoulli(tg.tensor(0.5), logits=tg.tensor([0.0])).probs
        tensor([0.5000])
    """
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base_dist = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base_dist, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)


class ExpRelaxedCategorical(Distribution):
    """The log of a relaxed one-hot categorical variable: log-softmax of the logits plus
    Gumbel noise, over the ``temperature``.

    Example:
        >>> from tapegrad.distributions import RelaxedOneHotCategorical
        >>> RelaxedOneHotCategorical(tg.tensor(1.0), probs=tg.ones(2, 3)).base_dist.event_shape
        tapegrad.Size([3])
    """
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector      # the values lie on a submanifold of it
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ExpRelaxedCategorical, _instance)
        batch_shape = tg.Size(batch_shape)
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    def rsample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        uniforms = clamp_probs(tg.rand(shape, dtype=self.logits.dtype))
        gumbels = -((-(uniforms.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value):
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_scale = (tg.full_like(self.temperature, float(k)).lgamma()
                     - self.temperature.log().mul(-(k - 1)))
        score = logits - value.mul(self.temperature)
        score = (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(_RelaxedThroughTransform):
    """The relaxed (concrete, Gumbel-softmax) one-hot categorical distribution on the
    simplex: exp of an ``ExpRelaxedCategorical`` draw.

    Example:
        >>> from tapegrad.distributions import RelaxedOneHotCategorical
        >>> RelaxedOneHotCategorical(tg.tensor(1.0), probs=tg.ones(3)).probs
        tensor([0.3333, 0.3333, 0.3333])
    """
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base_dist = ExpRelaxedCategorical(temperature, probs, logits,
                                          validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedOneHotCategorical, _instance)
        return super().expand(batch_shape, _instance=new)


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """A one-hot categorical whose ``rsample`` is the one-hot draw with the gradient of the
    probabilities (the straight-through estimator).

    Example:
        >>> from tapegrad.distributions import OneHotCategoricalStraightThrough
        >>> OneHotCategoricalStraightThrough(probs=tg.tensor([0.0, 1.0])).rsample()
        tensor([0., 1.])
    """
    has_rsample = True

    def rsample(self, sample_shape=tg.Size()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())


class NegativeBinomial(_BinaryParamAmongOthers, Distribution):
    """The number of successes before ``total_count`` failures of Bernoulli trials with
    success probability ``probs`` (or ``logits``); drawn as a Poisson of a gamma draw.

    Example:
        >>> from tapegrad.distributions import NegativeBinomial
        >>> NegativeBinomial(tg.tensor([4.0]), probs=tg.tensor([0.5])).mean
        tensor([4.])
    """
    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        _, (total_count,) = self._take_binary_param(probs, logits, total_count)
        self.total_count = total_count.type_as(self._param)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(NegativeBinomial, _instance)
        batch_shape = tg.Size(batch_shape)
        new.total_count = self.total_count.expand(batch_shape)
        self._expand_binary_param(new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.total_count * tg.exp(self.logits)

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / tg.sigmoid(-self.logits)

    @lazy_property
    def _gamma(self):
        return Gamma(concentration=self.total_count, rate=tg.exp(-self.logits),
                     validate_args=False)

    def sample(self, sample_shape=tg.Size()):
        with tg.no_grad():
            rate = self._gamma.sample(sample_shape=sample_shape)
            return tg.poisson(rate)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logsigmoid = tg.nn.functional.logsigmoid
        log_unnormalized = (self.total_count * logsigmoid(-self.logits)
                            + value * logsigmoid(self.logits))
        log_normalization = (-tg.lgamma(self.total_count + value) + tg.lgamma(1.0 + value)
                             + tg.lgamma(self.total_count))
        # the mass at 0 of NegativeBinomial(0, p) is 1, where lgamma(0) would be inf
        log_normalization = log_normalization.masked_fill(self.total_count + value == 0.0,
                                                          0.0)
        return log_unnormalized - log_normalization


class Multinomial(Distribution):
    """The counts of ``total_count`` categorical draws with ``probs`` (or ``logits``) over
    the last dimension's categories.

    Example:
        >>> from tapegrad.distributions import Multinomial
        >>> Multinomial(4, probs=tg.tensor([0.0, 1.0])).sample()
        tensor([0., 4.])
    """
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        # the per-category binomials, for the entropy's sum over counts
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = tg.Size(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=tg.Size()):
        sample_shape = tg.Size(sample_shape)
        # total_count categorical draws first in the sample shape, then moved last and
        # counted per category
        samples = self._categorical.sample(tg.Size((self.total_count,) + tuple(sample_shape)))
        order = list(range(1, samples.dim())) + [0]
        samples = samples.permute(*order)
        counts = tg.zeros(tuple(self._extended_shape(sample_shape)), dtype=samples.dtype)
        counts.scatter_add_(-1, samples, tg.ones_like(samples))
        return counts.type_as(self.probs)

    def entropy(self):
        n = tg.tensor(self.total_count)
        term1 = n * self._categorical.entropy() - tg.lgamma(n + 1)
        counts = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = tg.exp(self._binomial.log_prob(counts))
        term2 = (binomial_probs * tg.lgamma(counts + 1)).sum([0, -1])
        return term1 + term2

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        logits = logits.clone()
        log_factorial_n = tg.lgamma(value.sum(-1) + 1)
        log_factorial_xs = tg.lgamma(value + 1).sum(-1)
        # a category of probability 0 drawn 0 times adds nothing (not 0 * -inf)
        _fill(logits, (value == 0) & (logits == -math.inf), 0.0)
        log_powers = (logits * value).sum(-1)
        return log_factorial_n - log_factorial_xs + log_powers


class MixtureSameFamily(Distribution):
    """A mixture of the components that are the last batch dimension of
    ``component_distribution``, weighted by the Categorical ``mixture_distribution``.

    Example:
        >>> from tapegrad.distributions import Categorical, MixtureSameFamily, Normal
        >>> mix = MixtureSameFamily(Categorical(probs=tg.tensor([0.5, 0.5])),
        ...                         Normal(tg.tensor([-1.0, 1.0]), tg.ones(2)))
        >>> mix.mean
        tensor(0.)
    """
    arg_constraints = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an "
                             " instance of torch.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution needs to be an "
                             "instance of torch.distributions.Distribution")
        mixture_batch = mixture_distribution.batch_shape
        component_batch = component_distribution.batch_shape[:-1]
        for size1, size2 in zip(reversed(mixture_batch), reversed(component_batch)):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mixture_batch}) is not "
                                 "compatible with `component_distribution."
                                 f"batch_shape`({component_batch})")
        km = mixture_distribution.logits.shape[-1]
        kc = component_distribution.batch_shape[-1]
        if km != kc:
            raise ValueError(f"`mixture_distribution component` ({km}) does not"
                             " equal `component_distribution.batch_shape[-1]`"
                             f" ({kc})")
        self._num_component = km
        event_shape = component_distribution.event_shape
        self._event_ndims = len(event_shape)
        super().__init__(batch_shape=component_batch, event_shape=event_shape,
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = tg.Size(batch_shape)
        new = self._get_checked_instance(MixtureSameFamily, _instance)
        new._component_distribution = self._component_distribution.expand(
            tg.Size(tuple(batch_shape) + (self._num_component,)))
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._num_component = self._num_component
        new._event_ndims = self._event_ndims
        Distribution.__init__(new, batch_shape=batch_shape,
                              event_shape=new._component_distribution.event_shape,
                              validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property
    def support(self):
        return constraints.MixtureSameFamilyConstraint(self._component_distribution.support)

    @property
    def mixture_distribution(self):
        return self._mixture_distribution

    @property
    def component_distribution(self):
        return self._component_distribution

    @property
    def mean(self):
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        return tg.sum(probs * self.component_distribution.mean, dim=-1 - self._event_ndims)

    @property
    def variance(self):
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        within = tg.sum(probs * self.component_distribution.variance,
                        dim=-1 - self._event_ndims)
        between = tg.sum(probs * (self.component_distribution.mean
                                  - self._pad(self.mean)).pow(2.0),
                         dim=-1 - self._event_ndims)
        return within + between

    def cdf(self, x):
        cdf_x = self.component_distribution.cdf(self._pad(x))
        return tg.sum(cdf_x * self.mixture_distribution.probs, dim=-1)

    def log_prob(self, x):
        if self._validate_args:
            self._validate_sample(x)
        log_prob_x = self.component_distribution.log_prob(self._pad(x))
        log_mix_prob = tg.log_softmax(self.mixture_distribution.logits, dim=-1)
        return tg.logsumexp(log_prob_x + log_mix_prob, dim=-1)

    def sample(self, sample_shape=tg.Size()):
        with tg.no_grad():
            # the component indices are drawn first, then every component's sample
            gather_dim = len(sample_shape) + len(self.batch_shape)
            event_shape = tuple(self.event_shape)
            mix_sample = self.mixture_distribution.sample(sample_shape)
            mix_shape = tuple(mix_sample.shape)
            comp_samples = self.component_distribution.sample(sample_shape)
            index = mix_sample.reshape(mix_shape + (1,) * (len(event_shape) + 1))
            index = index.repeat((1,) * len(mix_shape) + (1,) + event_shape)
            return tg.gather(comp_samples, gather_dim, index).squeeze(gather_dim)

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mixture_dimensions(self, x):
        dist_batch_ndims = len(self.batch_shape)
        cat_batch_ndims = len(self.mixture_distribution.batch_shape)
        pad_ndims = 0 if cat_batch_ndims == 1 else dist_batch_ndims - cat_batch_ndims
        shape = tuple(x.shape)
        return x.reshape(shape[:-1] + (1,) * pad_ndims + shape[-1:]
                         + (1,) * self._event_ndims)

    def __repr__(self):
        return (f"MixtureSameFamily(\n  {self.mixture_distribution},"
                f"\n  {self.component_distribution})")


class LogisticNormal(TransformedDistribution):
    """The logistic-normal distribution on the simplex: a normal vector with ``loc`` and
    ``scale`` through stick breaking (K - 1 normals give K probabilities).

    Example:
        >>> from tapegrad.distributions import LogisticNormal
        >>> LogisticNormal(tg.zeros(2), tg.ones(2)).event_shape
        tapegrad.Size([3])
    """
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base_dist = Normal(loc, scale, validate_args=validate_args)
        if not base_dist.batch_shape:
            base_dist = base_dist.expand([1])
        super().__init__(base_dist, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogisticNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self):
        return self.base_dist.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.base_dist.scale


class LKJCholesky(Distribution):
    """The LKJ distribution of Cholesky factors of ``dim`` x ``dim`` correlation matrices,
    with ``concentration``; drawn by the onion method: a beta draw per row for its squared
    length below the diagonal, then a uniform direction from normal draws.

    Example:
        >>> from tapegrad.distributions import LKJCholesky
        >>> LKJCholesky(3, 0.5).event_shape
        tapegrad.Size([3, 3])
    """
    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError("Expected dim to be an integer greater than or equal to 2. "
                             f"Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = tg.arange(self.dim - 1, dtype=self.concentration.dtype)
        offset = tg.cat([offset.new_zeros((1,)), offset])
        self._beta = Beta(offset + 0.5, marginal_conc.unsqueeze(-1) - 0.5 * offset)
        super().__init__(self.concentration.size(), tg.Size((dim, dim)), validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = tg.Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(tuple(batch_shape) + (self.dim,))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=tg.Size()):
        y = self._beta.sample(sample_shape).unsqueeze(-1)
        u_normal = tg.randn(tuple(self._extended_shape(sample_shape)), dtype=y.dtype).tril(-1)
        u_hypersphere = u_normal / u_normal.norm(dim=-1, keepdim=True)
        u_hypersphere[..., 0, :].fill_(0.0)      # the first row's 0 / 0
        w = tg.sqrt(y) * u_hypersphere
        diag_elems = tg.clamp(1 - tg.sum(w ** 2, dim=-1), min=tg.finfo(w.dtype).tiny).sqrt()
        w += tg.diag_embed(diag_elems)
        return w

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = tg.arange(2, self.dim + 1)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = tg.sum(order * diag_elems.log(), dim=-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = tg.lgamma(alpha) * dm1
        numerator = tg.mvlgamma(alpha - 0.5, dm1)
        normalize_term = 0.5 * dm1 * math.log(math.pi) + numerator - denominator
        return unnormalized_log_pdf - normalize_term
