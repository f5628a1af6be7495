"""ContinuousBernoulli, the density on [0, 1] proportional to p^x (1 - p)^(1 - x), and
GeneralizedPareto, as PyTorch's: both drawn by their ``icdf`` of one uniform draw, with the
Taylor expansions PyTorch uses near p = 1/2 and the same ``where`` guards, so values,
gradients and seeded draws are PyTorch's."""
import math
from numbers import Number

import tapegrad as tg

from . import constraints
from ._univariate import ExponentialFamily, _BinaryParam
from .distribution import (Distribution, broadcast_all, clamp_probs, lazy_property,
                           logits_to_probs)

__all__ = ["ContinuousBernoulli", "GeneralizedPareto"]


class ContinuousBernoulli(_BinaryParam, ExponentialFamily):
    """The continuous Bernoulli distribution on [0, 1], given ``probs`` or ``logits`` (not
    both); within ``lims`` around 1/2, where the closed forms lose precision, Taylor
    expansions stand in for them.

    Example:
        >>> from tapegrad.distributions import ContinuousBernoulli
        >>> ContinuousBernoulli(tg.tensor([0.5])).mean
        tensor([0.5000])
    """
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
            # checked here (not only by the base class) because they are clamped next
            if validate_args is not None:
                if not bool(self.arg_constraints["probs"].check(self.probs).all()):
                    raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = tg.Size() if is_scalar else self._param.size()
        self._lims = lims
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        batch_shape = tg.Size(batch_shape)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(batch_shape))
                new._param = new.__dict__[name]
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    def _outside_unstable_region(self):
        return tg.le(self.probs, self._lims[0]) | tg.gt(self.probs, self._lims[1])

    def _cut_probs(self):
        return tg.where(self._outside_unstable_region(), self.probs,
                        self._lims[0] * tg.ones_like(self.probs))

    def _cont_bern_log_norm(self):
        # log of the normalising constant, as a function of probs
        cut_probs = self._cut_probs()
        below_half = tg.where(tg.le(cut_probs, 0.5), cut_probs, tg.zeros_like(cut_probs))
        above_half = tg.where(tg.ge(cut_probs, 0.5), cut_probs, tg.ones_like(cut_probs))
        log_norm = (tg.log(tg.abs(tg.log1p(-cut_probs) - tg.log(cut_probs)))
                    - tg.where(tg.le(cut_probs, 0.5), tg.log1p(-2.0 * below_half),
                               tg.log(2.0 * above_half - 1.0)))
        x = tg.pow(self.probs - 0.5, 2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return tg.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut_probs = self._cut_probs()
        mus = (cut_probs / (2.0 * cut_probs - 1.0)
               + 1.0 / (tg.log1p(-cut_probs) - tg.log(cut_probs)))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * tg.pow(x, 2)) * x
        return tg.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self):
        return tg.sqrt(self.variance)

    @property
    def variance(self):
        cut_probs = self._cut_probs()
        variances = (cut_probs * (cut_probs - 1.0) / tg.pow(1.0 - 2.0 * cut_probs, 2)
                     + 1.0 / tg.pow(tg.log1p(-cut_probs) - tg.log(cut_probs), 2))
        x = tg.pow(self.probs - 0.5, 2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return tg.where(self._outside_unstable_region(), variances, taylor)

    def sample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        u = tg.rand(shape, dtype=self.probs.dtype)
        with tg.no_grad():
            return self.icdf(u)

    def rsample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        u = tg.rand(shape, dtype=self.probs.dtype)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return (-tg.nn.functional.binary_cross_entropy_with_logits(logits, value,
                                                                   reduction="none")
                + self._cont_bern_log_norm())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut_probs = self._cut_probs()
        cdfs = ((tg.pow(cut_probs, value) * tg.pow(1.0 - cut_probs, 1.0 - value)
                 + cut_probs - 1.0) / (2.0 * cut_probs - 1.0))
        unbounded = tg.where(self._outside_unstable_region(), cdfs, value)
        return tg.where(tg.le(value, 0.0), tg.zeros_like(value),
                        tg.where(tg.ge(value, 1.0), tg.ones_like(value), unbounded))

    def icdf(self, value):
        cut_probs = self._cut_probs()
        closed_form = ((tg.log1p(-cut_probs + value * (2.0 * cut_probs - 1.0))
                        - tg.log1p(-cut_probs))
                       / (tg.log(cut_probs) - tg.log1p(-cut_probs)))
        return tg.where(self._outside_unstable_region(), closed_form, value)

    def entropy(self):
        log_probs0 = tg.log1p(-self.probs)
        log_probs1 = tg.log(self.probs)
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        # the log normalising constant as a function of the natural parameter
        outside = tg.le(x, self._lims[0] - 0.5) | tg.gt(x, self._lims[1] - 0.5)
        cut = tg.where(outside, x, (self._lims[0] - 0.5) * tg.ones_like(x))
        log_norm = tg.log(tg.abs(tg.special.expm1(cut))) - tg.log(tg.abs(cut))
        taylor = 0.5 * x + tg.pow(x, 2) / 24.0 - tg.pow(x, 4) / 2880.0
        return tg.where(outside, log_norm, taylor)


class GeneralizedPareto(Distribution):
    """The generalised Pareto distribution with ``loc``, ``scale`` and ``concentration``
    (exponential at concentration 0, bounded above when it is negative).

    Example:
        >>> from tapegrad.distributions import GeneralizedPareto
        >>> GeneralizedPareto(0.0, 1.0, 0.0).mean
        tensor(1.)
    """
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive,
                       "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        if all(isinstance(v, Number) for v in (loc, scale, concentration)):
            batch_shape = tg.Size()
        else:
            batch_shape = self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(GeneralizedPareto, _instance)
        batch_shape = tg.Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        return self.icdf(tg.rand(shape, dtype=self.loc.dtype))

    def _z(self, x):
        return (x - self.loc) / self.scale

    def _safe_concentration(self):
        # concentration 0 is the exponential limit: 1 stands in where the formulas divide
        eq_zero = tg.isclose(self.concentration, tg.tensor(0.0))
        return eq_zero, tg.where(eq_zero, tg.ones_like(self.concentration),
                                 self.concentration)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        y = 1 / safe_conc + tg.ones_like(z)
        where_nonzero = tg.where(y == 0, y, y * tg.log1p(safe_conc * z))
        return -self.scale.log() - tg.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        return tg.where(eq_zero, -z, -tg.log1p(safe_conc * z) / safe_conc)

    def log_cdf(self, value):
        return tg.log1p(-tg.exp(self.log_survival_function(value)))

    def cdf(self, value):
        return tg.exp(self.log_cdf(value))

    def icdf(self, value):
        concentration = self.concentration
        eq_zero = tg.isclose(concentration, tg.zeros_like(concentration))
        safe_conc = tg.where(eq_zero, tg.ones_like(concentration), concentration)
        logu = tg.log1p(-value)
        where_nonzero = self.loc + self.scale / safe_conc * tg.expm1(-safe_conc * logu)
        return tg.where(eq_zero, self.loc - self.scale * logu, where_nonzero)

    @property
    def mean(self):
        valid = self.concentration < 1
        safe_conc = tg.where(valid, self.concentration, 0.5)
        return tg.where(valid, self.loc + self.scale / (1 - safe_conc), math.nan)

    @property
    def variance(self):
        valid = self.concentration < 0.5
        safe_conc = tg.where(valid, self.concentration, 0.25)
        result = self.scale ** 2 / ((1 - safe_conc) ** 2 * (1 - 2 * safe_conc))
        return tg.where(valid, result, math.nan)

    def entropy(self):
        return tg.broadcast_to(tg.log(self.scale) + self.concentration + 1, self._batch_shape)

    @property
    def mode(self):
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        lower = self.loc
        upper = tg.where(self.concentration < 0, lower - self.scale / self.concentration,
                         math.inf)
        return constraints.interval(lower, upper)
