"""``kl_divergence(p, q)`` and ``register_kl``, as ``torch.distributions.kl``: the function
for a pair of types is the most specific registered one, found through the classes' bases."""
import functools
import math
import warnings

import tapegrad as tg

from .distribution import Distribution, _fill, _sum_rightmost
from ._multivariate import (LowRankMultivariateNormal, MultivariateNormal,
                           _batch_lowrank_logdet, _batch_lowrank_mahalanobis,
                           _batch_mahalanobis, _batch_trace_XXT)
from ._univariate import (Bernoulli, Categorical, Exponential, ExponentialFamily, Independent,
                          Laplace, Normal, OneHotCategorical, Uniform)
from ._gamma import Beta, Dirichlet, Gamma
from ._by_icdf import ContinuousBernoulli
from ._transformed import (Binomial, Cauchy, Geometric, Gumbel, HalfNormal, Pareto, Poisson,
                           TransformedDistribution)

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}   # the (type_p, type_q) pairs registered
_KL_MEMOIZE = {}    # what each pair of concrete types met so far resolved to

inf = math.inf


def register_kl(type_p, type_q):
    """Decorator registering ``fun(p, q)`` as the KL divergence of a pair of types.

    Example:
        >>> from tapegrad.distributions import Normal, register_kl
        >>> class MyNormal(Normal):
        ...     pass
        >>> @register_kl(MyNormal, MyNormal)
        ... def _kl(p, q):
        ...     return tg.zeros(p.batch_shape)
    """
    # PyTorch's test reads `not isinstance(...) and issubclass(...)`: a non-class fails in
    # issubclass with its TypeError, a class that is no Distribution is accepted
    if not isinstance(type_p, type) and issubclass(type_p, Distribution):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not isinstance(type_q, type) and issubclass(type_q, Distribution):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()          # a new pair may be more specific for some types
        return fun
    return decorator


@functools.total_ordering
class _Match:
    # orders pairs of types: one pair is below another when its types are subclasses,
    # compared left to right
    __slots__ = ["types"]

    def __init__(self, *types):
        self.types = types

    def __eq__(self, other):
        return self.types == other.types

    def __le__(self, other):
        for x, y in zip(self.types, other.types):
            if not issubclass(x, y):
                return False
            if x is not y:
                break
        return True


def _dispatch_kl(type_p, type_q):
    matches = [(sp, sq) for sp, sq in _KL_REGISTRY
               if issubclass(type_p, sp) and issubclass(type_q, sq)]
    if not matches:
        return NotImplemented
    left_p, left_q = min(_Match(*m) for m in matches).types
    right_q, right_p = min(_Match(*reversed(m)) for m in matches).types
    left_fun = _KL_REGISTRY[left_p, left_q]
    right_fun = _KL_REGISTRY[right_p, right_q]
    if left_fun is not right_fun:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). "
                      f"Please register_kl({left_p.__name__}, {right_q.__name__})",
                      RuntimeWarning, stacklevel=2)
    return left_fun


def kl_divergence(p, q):
    """The Kullback-Leibler divergence KL(p || q), batched over the batch shape.

    Example:
        >>> from tapegrad.distributions import Normal, kl_divergence
        >>> kl_divergence(Normal(0.0, 1.0), Normal(1.0, 1.0))
        tensor(0.5000)
    """
    try:
        fun = _KL_MEMOIZE[type(p), type(q)]
    except KeyError:
        fun = _dispatch_kl(type(p), type(q))
        _KL_MEMOIZE[type(p), type(q)] = fun
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{p.__class__.__name__} and q type {q.__class__.__name__}")
    return fun(p, q)


def _infinite_like(tensor):
    return tg.full_like(tensor, inf)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    softplus = tg.nn.functional.softplus
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    _fill(t1, q.probs == 0, inf)
    _fill(t1, p.probs == 0, 0)
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    _fill(t2, q.probs == 1, inf)
    _fill(t2, p.probs == 1, 0)
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    _fill(t, (q.probs == 0).expand_as(t), inf)
    _fill(t, (p.probs == 0).expand_as(t), 0)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    # PyTorch computes a same-family pair by a Bregman divergence; every family here has
    # its own formula registered, so only different families reach this
    if type(p) is not type(q):
        raise NotImplementedError(
            "The cross KL-divergence between different exponential families cannot "
            "                            be computed using Bregman divergences")
    raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                              f"{p.__class__.__name__} and q type {q.__class__.__name__}")


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * tg.exp(-loc_abs_diff / p.scale)
    return t1 + t2 + t3 - 1


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two Multivariate Normals with"
            "                          different event shapes cannot be computed")
    Lp, Lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = (Lq.diagonal(dim1=-2, dim2=-1).log().sum(-1)
                  - Lp.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    batch = tuple(tg.broadcast_shapes(tuple(Lq.shape[:-2]), tuple(Lp.shape[:-2])))
    n = p.event_shape[0]
    X = tg.linalg.solve_triangular(Lq.expand(batch + (n, n)), Lp.expand(batch + (n, n)),
                                   upper=False)
    term2 = X.reshape(-1, n * n).pow(2).sum(-1).reshape(tuple(X.shape[:-2]))  # tr(X X^T)
    term3 = _batch_mahalanobis(Lq, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    _fill(result, (q.low > p.low) | (q.high < p.high), inf)
    return result


@register_kl(Exponential, Uniform)
def _kl_exponential_infinity(p, q):
    return _infinite_like(p.rate)


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var_normal = q.scale.pow(2)
    rate_sqr = p.rate.pow(2)
    t1 = 0.5 * tg.log(rate_sqr * var_normal * 2 * math.pi)
    t2 = rate_sqr.reciprocal()
    t3 = q.loc / p.rate
    t4 = q.loc.pow(2) * 0.5
    return t1 - 1 + (t2 - t3 + t4) / var_normal


@register_kl(Laplace, Exponential)
@register_kl(Laplace, Uniform)
def _kl_laplace_infinity(p, q):
    return _infinite_like(p.loc)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var_normal = q.scale.pow(2)
    scale_sqr_var_ratio = p.scale.pow(2) / var_normal
    t1 = 0.5 * tg.log(2 * scale_sqr_var_ratio / math.pi)
    t2 = 0.5 * p.loc.pow(2)
    t3 = p.loc * q.loc
    t4 = 0.5 * q.loc.pow(2)
    return -t1 + scale_sqr_var_ratio + (t2 - t3 + t4) / var_normal - 1


@register_kl(Normal, Exponential)
@register_kl(Normal, Uniform)
def _kl_normal_infinity(p, q):
    return _infinite_like(p.loc)


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    loc_diff = p.loc - q.loc
    scale_ratio = p.scale / q.scale
    loc_diff_scale_ratio = loc_diff / p.scale
    t1 = tg.log(scale_ratio)
    t2 = math.sqrt(2 / math.pi) * p.scale * tg.exp(-0.5 * loc_diff_scale_ratio.pow(2))
    t3 = loc_diff * tg.erf(math.sqrt(0.5) * loc_diff_scale_ratio)
    return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    _fill(result, p.low < q.support.lower_bound, inf)
    return result


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = common_term.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist),
                          p.reinterpreted_batch_ndims)


# --- the gamma family, the transformed distributions and the discrete ones --------------------
_EULER = 0.57721566490153286060


def _x_log_x(t):
    return t * t.log()


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_params_p = p.concentration1 + p.concentration0
    sum_params_q = q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + sum_params_p.lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + sum_params_q.lgamma()
    t3 = (p.concentration1 - q.concentration1) * tg.digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * tg.digamma(p.concentration0)
    t5 = (sum_params_q - sum_params_p) * tg.digamma(sum_params_p)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if (p.total_count < q.total_count).any():
        raise NotImplementedError("KL between Binomials where q.total_count > "
                                  "p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p()
                          - (-q.probs).log1p())
    inf_idxs = p.total_count > q.total_count
    kl.index_put_((inf_idxs,), _infinite_like(kl[inf_idxs]))
    return kl


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p_concentration = p.concentration.sum(-1)
    sum_q_concentration = q.concentration.sum(-1)
    t1 = sum_p_concentration.lgamma() - sum_q_concentration.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sum_p_concentration.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = tg.lgamma(q.concentration) - tg.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * tg.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * _EULER
    t3 = tg.exp(ct2 + (1 + ct1).lgamma() - ct3)
    return t1 + t2 + t3 - (1 + _EULER)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - tg.log1p(-q.probs) / p.probs - q.logits


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms:
        raise NotImplementedError
    if p.event_shape != q.event_shape:
        raise NotImplementedError
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    t2 = (4 * p.scale * q.scale).log()
    return t1 - t2


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return (-p.entropy() - q.rate.log()
            + q.rate * (p.concentration1 / (p.concentration1 + p.concentration0)))


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    t1 = -p.entropy()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (q.concentration - 1) * (p.concentration1.digamma()
                                  - (p.concentration1 + p.concentration0).digamma())
    t4 = q.rate * p.concentration1 / (p.concentration1 + p.concentration0)
    return t1 + t2 - t3 + t4


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    E_beta = p.concentration1 / (p.concentration1 + p.concentration0)
    var_normal = q.scale.pow(2)
    t1 = -p.entropy()
    t2 = 0.5 * (var_normal * 2 * math.pi).log()
    t3 = (E_beta * (1 - E_beta) / (p.concentration1 + p.concentration0 + 1)
          + E_beta.pow(2)) * 0.5
    t4 = q.loc * E_beta
    t5 = q.loc.pow(2) * 0.5
    return t1 + t2 + (t3 - t4 + t5) / var_normal


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    _fill(result, (q.low > p.support.lower_bound) | (q.high < p.support.upper_bound), inf)
    return result


register_kl(Exponential, Beta)(_kl_exponential_infinity)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    t1 = -q.concentration * tg.log(ratio)
    return (t1 + ratio + q.concentration.lgamma() + q.concentration * _EULER
            - (1 + _EULER))


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    scale_rate_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = scale_rate_prod.log() - 1
    t2 = tg.exp(loc_scale_ratio) * scale_rate_prod / (scale_rate_prod + 1)
    t3 = scale_rate_prod.reciprocal()
    return t1 - loc_scale_ratio + t2 + t3


@register_kl(Gamma, Beta)
@register_kl(Gamma, Uniform)
def _kl_gamma_infinity(p, q):
    return _infinite_like(p.concentration)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    beta_scale_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = ((p.concentration - 1) * p.concentration.digamma() - p.concentration.lgamma()
          - p.concentration)
    t2 = beta_scale_prod.log() + p.concentration / beta_scale_prod
    t3 = (tg.exp(loc_scale_ratio) * (1 + beta_scale_prod.reciprocal()).pow(-p.concentration)
          - loc_scale_ratio)
    return t1 + t2 + t3


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    var_normal = q.scale.pow(2)
    beta_sqr = p.rate.pow(2)
    t1 = (0.5 * tg.log(beta_sqr * var_normal * 2 * math.pi) - p.concentration
          - p.concentration.lgamma())
    t2 = 0.5 * (p.concentration.pow(2) + p.concentration) / beta_sqr
    t3 = q.loc * p.concentration / p.rate
    t4 = 0.5 * q.loc.pow(2)
    return (t1 + (p.concentration - 1) * p.concentration.digamma()
            + (t2 - t3 + t4) / var_normal)


@register_kl(Gumbel, Beta)
@register_kl(Gumbel, Exponential)
@register_kl(Gumbel, Gamma)
@register_kl(Gumbel, Uniform)
def _kl_gumbel_infinity(p, q):
    return _infinite_like(p.loc)


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    param_ratio = p.scale / q.scale
    t1 = (param_ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * param_ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * _EULER - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (_EULER + 1)


register_kl(Laplace, Beta)(_kl_laplace_infinity)
register_kl(Laplace, Gamma)(_kl_laplace_infinity)
register_kl(Normal, Beta)(_kl_normal_infinity)
register_kl(Normal, Gamma)(_kl_normal_infinity)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_scale_ratio = p.loc / q.scale
    var_scale_sqr_ratio = (p.scale / q.scale).pow(2)
    loc_scale_ratio = q.loc / q.scale
    t1 = var_scale_sqr_ratio.log() * 0.5
    t2 = mean_scale_ratio - loc_scale_ratio
    t3 = tg.exp(-mean_scale_ratio + 0.5 * var_scale_sqr_ratio + loc_scale_ratio)
    return -t1 + t2 + t3 - (0.5 * (1 + math.log(2 * math.pi)))


@register_kl(Poisson, Bernoulli)
@register_kl(Poisson, Binomial)
def _kl_poisson_infinity(p, q):
    return _infinite_like(p.rate)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    common_term = p.high - p.low
    t1 = tg.log(common_term)
    t2 = ((q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term)
          / common_term)
    t3 = ((q.concentration0 - 1)
          * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + common_term) / common_term)
    t4 = (q.concentration1.lgamma() + q.concentration0.lgamma()
          - (q.concentration1 + q.concentration0).lgamma())
    result = t3 + t4 - t1 - t2
    _fill(result, (p.high > q.support.upper_bound) | (p.low < q.support.lower_bound), inf)
    return result


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    common_term = p.high - p.low
    t1 = common_term.log()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = ((1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term)
          / common_term)
    t4 = q.rate * (p.high + p.low) / 2
    result = -t1 + t2 + t3 + t4
    _fill(result, p.low < q.support.lower_bound, inf)
    return result


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    common_term = q.scale / (p.high - p.low)
    high_loc_diff = (p.high - q.loc) / q.scale
    low_loc_diff = (p.low - q.loc) / q.scale
    t1 = common_term.log() + 0.5 * (high_loc_diff + low_loc_diff)
    t2 = common_term * (tg.exp(-high_loc_diff) - tg.exp(-low_loc_diff))
    return t1 - t2


# Pareto's support starts at its scale: a distribution with mass below it (every other one
# but a Uniform above the scale) is infinitely far from it, and a Pareto is from any
# distribution on a bounded interval


@register_kl(Beta, Pareto)
def _kl_beta_infinity(p, q):
    return _infinite_like(p.concentration1)


register_kl(Exponential, Pareto)(_kl_exponential_infinity)
register_kl(Gamma, Pareto)(_kl_gamma_infinity)
register_kl(Gumbel, Pareto)(_kl_gumbel_infinity)
register_kl(Laplace, Pareto)(_kl_laplace_infinity)
register_kl(Normal, Pareto)(_kl_normal_infinity)


@register_kl(Pareto, Beta)
@register_kl(Pareto, Uniform)
def _kl_pareto_infinity(p, q):
    return _infinite_like(p.scale)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * (p.scale / q.scale).log() - alpha_ratio.log() + alpha_ratio - 1
    _fill(result, p.support.lower_bound < q.support.lower_bound, inf)
    return result


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    scale_times_rate = p.scale * q.rate
    result = ((p.alpha / scale_times_rate).log() - p.alpha.reciprocal()
              + p.alpha * scale_times_rate / (p.alpha - 1) - 1)
    _fill(result, p.alpha <= 1, inf)        # p has no finite mean
    return result


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    mean_log = p.scale.log() + p.alpha.reciprocal()     # E[log X] under p
    result = (p.alpha.log() - mean_log
              + q.concentration.lgamma() - q.concentration * q.rate.log()
              + (1 - q.concentration) * mean_log
              + q.rate * p.alpha * p.scale / (p.alpha - 1) - 1)
    _fill(result, p.alpha <= 1, inf)
    return result


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    twice_variance = 2 * q.scale.pow(2)
    mean_over_alpha = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * mean_over_alpha.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * mean_over_alpha - q.loc).pow(2)
    result = t1 - t2 + (t3 + t4) / twice_variance - 1
    _fill(result, p.alpha <= 2, inf)        # p has no finite variance
    return result


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * width).log()
    t2 = (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    result = t2 * (q.alpha + 1) - t1
    _fill(result, p.low < q.support.lower_bound, inf)
    return result


# ContinuousBernoulli: its support is [0, 1], so it is infinitely far from a distribution on
# a half line beginning above 0 (Pareto), and one with mass outside [0, 1] is infinitely far
# from it


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + tg.log1p(-p.probs)
    t3 = -q._cont_bern_log_norm() - tg.log1p(-q.probs)
    return t1 + t2 + t3


def _minus_entropy_plus_cross_term(p, q):
    # -H(p) - E_p[log q], log q(x) = x logits + log(1 - probs) + log normaliser
    return -p.entropy() - p.mean * q.logits - tg.log1p(-q.probs) - q._cont_bern_log_norm()


register_kl(Beta, ContinuousBernoulli)(_minus_entropy_plus_cross_term)


@register_kl(ContinuousBernoulli, Pareto)
def _kl_continuous_bernoulli_infinity(p, q):
    return _infinite_like(p.probs)


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - tg.log(q.rate) + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    t1 = -p.entropy()
    t2 = 0.5 * (math.log(2.0 * math.pi) + tg.square(q.loc / q.scale)) + tg.log(q.scale)
    t3 = ((p.variance + tg.square(p.mean) - 2.0 * q.loc * p.mean)
          / (2.0 * tg.square(q.scale)))
    return t1 + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    # PyTorch's test: infinite unless the uniform reaches past both ends of [0, 1]
    outside = (tg.ge(q.low, p.support.lower_bound)
               | tg.le(q.high, p.support.upper_bound))
    return tg.where(outside, tg.ones_like(result) * inf, result)


register_kl(Exponential, ContinuousBernoulli)(_kl_exponential_infinity)
register_kl(Gamma, ContinuousBernoulli)(_kl_gamma_infinity)
register_kl(Gumbel, ContinuousBernoulli)(_kl_gumbel_infinity)
register_kl(Laplace, ContinuousBernoulli)(_kl_laplace_infinity)
register_kl(Normal, ContinuousBernoulli)(_kl_normal_infinity)
register_kl(Pareto, ContinuousBernoulli)(_kl_pareto_infinity)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    result = _minus_entropy_plus_cross_term(p, q)
    outside = (tg.ge(p.high, q.support.upper_bound)
               | tg.le(p.low, q.support.lower_bound))
    return tg.where(outside, tg.ones_like(result) * inf, result)


# LowRankMultivariateNormal: inv(q's covariance) through Woodbury, inv(qD) - A^T A with
# A = C^-1 qW^T inv(qD), so the trace term splits into traces of X X^T


def _same_event_shape(p, q, what):
    if p.event_shape != q.event_shape:
        raise ValueError(f"KL-divergence between two {what} with"
                         "                          different event shapes cannot be computed")


def _lowrank_logdet(d):
    return _batch_lowrank_logdet(d._unbroadcasted_cov_factor, d._unbroadcasted_cov_diag,
                                 d._capacitance_tril)


def _lowrank_woodbury_factor(q):
    qWt_qDinv = q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2)
    return tg.linalg.solve_triangular(q._capacitance_tril, qWt_qDinv, upper=False)


def _lowrank_mahalanobis(q, p):
    return _batch_lowrank_mahalanobis(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag,
                                      q.loc - p.loc, q._capacitance_tril)


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrankmultivariatenormal_lowrankmultivariatenormal(p, q):
    _same_event_shape(p, q, "Low Rank Multivariate Normals")
    term1 = _lowrank_logdet(q) - _lowrank_logdet(p)
    term3 = _lowrank_mahalanobis(q, p)
    A = _lowrank_woodbury_factor(q)
    term21 = (p._unbroadcasted_cov_diag / q._unbroadcasted_cov_diag).sum(-1)
    term22 = _batch_trace_XXT(p._unbroadcasted_cov_factor
                              * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
    term23 = _batch_trace_XXT(A * p._unbroadcasted_cov_diag.sqrt().unsqueeze(-2))
    term24 = _batch_trace_XXT(A.matmul(p._unbroadcasted_cov_factor))
    term2 = term21 + term22 - term23 - term24
    return 0.5 * (term1 + term2 + term3 - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_multivariatenormal_lowrankmultivariatenormal(p, q):
    _same_event_shape(p, q, "(Low Rank) Multivariate Normals")
    term1 = (_lowrank_logdet(q)
             - 2 * p._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    term3 = _lowrank_mahalanobis(q, p)
    A = _lowrank_woodbury_factor(q)
    term21 = _batch_trace_XXT(p._unbroadcasted_scale_tril
                              * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
    term22 = _batch_trace_XXT(A.matmul(p._unbroadcasted_scale_tril))
    return 0.5 * (term1 + term21 - term22 + term3 - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrankmultivariatenormal_multivariatenormal(p, q):
    _same_event_shape(p, q, "(Low Rank) Multivariate Normals")
    term1 = (2 * q._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
             - _lowrank_logdet(p))
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, (q.loc - p.loc))
    # inv(q_tril q_tril^T) (pW pW^T + pD): both parts solved against q's factor
    batch = tuple(tg.broadcast_shapes(tuple(q._unbroadcasted_scale_tril.shape[:-2]),
                                      tuple(p._unbroadcasted_cov_factor.shape[:-2])))
    n = p.event_shape[0]
    q_scale_tril = q._unbroadcasted_scale_tril.expand(batch + (n, n))
    p_cov_factor = p._unbroadcasted_cov_factor.expand(batch + (n, p.cov_factor.size(-1)))
    p_cov_diag = tg.diag_embed(p._unbroadcasted_cov_diag.sqrt()).expand(batch + (n, n))
    term21 = _batch_trace_XXT(tg.linalg.solve_triangular(q_scale_tril, p_cov_factor,
                                                         upper=False))
    term22 = _batch_trace_XXT(tg.linalg.solve_triangular(q_scale_tril, p_cov_diag,
                                                         upper=False))
    return 0.5 * (term1 + term21 + term22 + term3 - p.event_shape[0])
