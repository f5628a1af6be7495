"""VonMises, the circular distribution of angles, as PyTorch's: its Bessel functions by the
same polynomial approximations, and draws by Best and Fisher's rejection sampler taking
PyTorch's uniform triples in PyTorch's order, so seeded samples are PyTorch's."""
import math

import tapegrad as tg

from . import constraints
from .distribution import Distribution, broadcast_all, lazy_property

__all__ = ["VonMises"]


def _eval_poly(y, coef):
    # Horner's rule, highest coefficient last in ``coef``
    result = coef[-1]
    for c in reversed(coef[:-1]):
        result = c + y * result
    return result


# the polynomial approximations of I0 and I1 (Abramowitz and Stegun 9.8.1 to 9.8.4), below
# and above x = 3.75
_BESSEL_COEF_SMALL = (
    (1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2),
    (0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2, 0.32411e-3),
)
_BESSEL_COEF_LARGE = (
    (0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2, -0.2057706e-1,
     0.2635537e-1, -0.1647633e-1, 0.392377e-2),
    (0.39894228, -0.3988024e-1, -0.362018e-2, 0.163801e-2, -0.1031555e-1, 0.2282967e-1,
     -0.2895312e-1, 0.1787654e-1, -0.420059e-2),
)


def _log_modified_bessel_fn(x, order=0):
    # log I_order(x) for x > 0 and order 0 or 1
    if order not in (0, 1):
        raise AssertionError(f"order must be 0 or 1, got {order}")
    y = x / 3.75
    small = _eval_poly(y * y, _BESSEL_COEF_SMALL[order])
    if order == 1:
        small = x.abs() * small
    small = small.log()
    large = x - 0.5 * x.log() + _eval_poly(3.75 / x, _BESSEL_COEF_LARGE[order]).log()
    return tg.where(x < 3.75, small, large)


def _rejection_sample(loc, concentration, proposal_r, shape):
    # every round draws three uniforms for every element, accepted or not, until all are
    x = tg.zeros(shape, dtype=loc.dtype)
    done = tg.zeros(shape, dtype=tg.bool)
    while not bool(done.all()):
        u1, u2, u3 = tg.rand((3,) + tuple(shape), dtype=loc.dtype).unbind()
        z = tg.cos(math.pi * u1)
        f = (1 + proposal_r * z) / (proposal_r + z)
        c = concentration * (proposal_r - f)
        accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
        if bool(accept.any()):
            x = tg.where(accept, (u3 - 0.5).sign() * f.acos(), x)
            done = done | accept
    return (x + math.pi + loc) % (2 * math.pi) - math.pi


class VonMises(Distribution):
    """The von Mises distribution of an angle with mean direction ``loc`` and
    ``concentration``; ``loc`` and values may be any real number, read modulo 2 pi.

    Example:
        >>> from tapegrad.distributions import VonMises
        >>> VonMises(tg.tensor([1.0]), tg.tensor([1.0])).mean
        tensor([1.])
    """
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, tg.Size(), validate_args)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.concentration * tg.cos(value - self.loc)
        return (log_prob - math.log(2 * math.pi)
                - _log_modified_bessel_fn(self.concentration, order=0))

    # the sampler works in double precision whatever the parameters' dtype (in single
    # precision it can loop for ever at small concentrations)
    @lazy_property
    def _loc(self):
        return self.loc.to(tg.double)

    @lazy_property
    def _concentration(self):
        return self.concentration.to(tg.double)

    @lazy_property
    def _proposal_r(self):
        kappa = self._concentration
        tau = 1 + (1 + 4 * kappa ** 2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        proposal_r = (1 + rho ** 2) / (2 * rho)
        return tg.where(kappa < 1e-5, 1 / kappa + kappa, proposal_r)

    def sample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        with tg.no_grad():
            return _rejection_sample(self._loc, self._concentration, self._proposal_r,
                                     shape).to(self.loc.dtype)

    def expand(self, batch_shape, _instance=None):
        # a new instance from the expanded parameters (the base class has no expand)
        validate_args = self.__dict__.get("_validate_args")
        return type(self)(self.loc.expand(batch_shape),
                          self.concentration.expand(batch_shape),
                          validate_args=validate_args)

    @property
    def mean(self):
        return self.loc       # the circular mean

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        # the circular variance, 1 - I1(k) / I0(k)
        return 1 - (_log_modified_bessel_fn(self.concentration, order=1)
                    - _log_modified_bessel_fn(self.concentration, order=0)).exp()
