"""Probability distributions, as ``torch.distributions``: parameters, ``sample`` and
``rsample`` (PyTorch's draws after ``manual_seed``), ``log_prob``, ``entropy``, argument
validation and ``kl_divergence``, built from differentiable tapegrad ops so gradients flow
through ``rsample``, ``log_prob`` and the divergences.

Example:
    >>> import tapegrad.distributions as D
    >>> q = D.Normal(tg.zeros(2), tg.ones(2))
    >>> D.kl_divergence(q, D.Normal(0.0, 1.0))
    tensor([0., 0.])
"""
from . import constraints, transforms
from .distribution import Distribution
from ._univariate import (Bernoulli, Categorical, Exponential, ExponentialFamily, Independent,
                          Laplace, Normal, OneHotCategorical, Uniform)
from ._multivariate import LowRankMultivariateNormal, MultivariateNormal
from ._gamma import Beta, Chi2, Dirichlet, Gamma
from ._transformed import (Binomial, Cauchy, Geometric, Gumbel, HalfCauchy, HalfNormal,
                           InverseGamma, LogNormal, Pareto, Poisson, StudentT,
                           TransformedDistribution, Weibull)
from ._composite import (FisherSnedecor, Kumaraswamy, LKJCholesky, LogisticNormal,
                         MixtureSameFamily, Multinomial, NegativeBinomial,
                         OneHotCategoricalStraightThrough, RelaxedBernoulli,
                         RelaxedOneHotCategorical)
from ._by_icdf import ContinuousBernoulli, GeneralizedPareto
from ._von_mises import VonMises
from .constraint_registry import biject_to, transform_to
from .kl import kl_divergence, register_kl
from .transforms import *  # noqa: F401,F403  (the transforms, as PyTorch's package has them)
from .transforms import __all__ as _transform_names

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2",
           "ContinuousBernoulli", "Dirichlet", "Distribution", "Exponential",
           "ExponentialFamily", "FisherSnedecor", "Gamma", "GeneralizedPareto", "Geometric",
           "Gumbel", "HalfCauchy", "HalfNormal", "Independent", "InverseGamma",
           "Kumaraswamy", "LKJCholesky", "Laplace", "LogNormal",
           "LowRankMultivariateNormal", "LogisticNormal", "MixtureSameFamily",
           "Multinomial", "MultivariateNormal", "NegativeBinomial", "Normal",
           "OneHotCategorical", "OneHotCategoricalStraightThrough", "Pareto", "Poisson",
           "RelaxedBernoulli", "RelaxedOneHotCategorical", "StudentT",
           "TransformedDistribution", "Uniform", "VonMises", "Weibull", "biject_to",
           "kl_divergence", "register_kl", "transform_to"]
__all__ += _transform_names

from .._public import public_dir as _public_dir  # noqa: E402
__dir__ = _public_dir(globals(), ("constraints", "constraint_registry", "transforms"))
