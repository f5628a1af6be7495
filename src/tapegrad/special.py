"""``tapegrad.special``: PyTorch's ``torch.special`` names for special functions.

Most are tapegrad's ops under their SciPy-style names (``expit`` is ``sigmoid``, ``gammaln``
is ``lgamma``, ``psi`` is ``digamma``); the rest are built from recorded ops.
"""
import math

import numpy as np

from . import derived as D
from . import functional as F
from ._public import public_dir

__all__ = ["erf", "erfc", "erfinv", "erfcx", "expit", "logit", "exp2", "expm1", "log1p",
           "gammaln", "digamma", "psi", "polygamma", "multigammaln", "xlogy", "xlog1py",
           "sinc", "entr", "ndtr", "ndtri", "log_ndtr", "logsumexp", "softmax",
           "log_softmax", "round", "i0", "i0e", "i1", "i1e"]

erf = F.erf
erfc = F.erfc
erfinv = F.erfinv
expit = F.sigmoid
exp2 = F.exp2
expm1 = F.expm1
log1p = F.log1p
gammaln = F.lgamma
digamma = F.digamma
psi = F.digamma
polygamma = F.polygamma
multigammaln = F.mvlgamma
xlogy = F.xlogy
xlog1py = D.xlog1py
logit = D.logit
sinc = D.sinc
logsumexp = F.logsumexp
round = F.round  # noqa: A001 - PyTorch's name
i0 = F.i0
i0e = F.i0e
i1 = F.i1
i1e = F.i1e


_tensor = F.as_tensor_arg


def softmax(input, dim, *, dtype=None):  # noqa: A002 - PyTorch's argument name
    """``softmax`` along ``dim``.

    Example:
        >>> tg.special.softmax(tg.tensor([0.0, 0.0]), 0)
        tensor([0.5000, 0.5000])
    """
    return F.softmax(_tensor(input), dim)


def log_softmax(input, dim, *, dtype=None):  # noqa: A002
    """``log_softmax`` along ``dim``.

    Example:
        >>> tg.special.log_softmax(tg.tensor([0.0, 0.0]), 0)
        tensor([-0.6931, -0.6931])
    """
    return F.log_softmax(_tensor(input), dim)


def entr(input):  # noqa: A002
    """Elementwise entropy term ``-x log x`` (0 at 0, -inf below 0).

    Example:
        >>> tg.special.entr(tg.tensor([0.0, 0.5]))
        tensor([0.0000, 0.3466])
    """
    x = _tensor(input)
    neg = F._compare(np.less, x, 0.0)
    # (+ 0.0: the entropy term of 0 is +0, where -(0 log 0) would be -0)
    return F.where(neg, -math.inf, F.add(F.neg(F.xlogy(x, x)), 0.0))


def ndtr(input):  # noqa: A002
    """The standard normal distribution function ``(1 + erf(x / sqrt 2)) / 2``.

    Example:
        >>> tg.special.ndtr(tg.tensor([0.0]))
        tensor([0.5000])
    """
    x = _tensor(input)
    return F.mul(F.erfc(F.mul(x, -math.sqrt(0.5))), 0.5)


def ndtri(input):  # noqa: A002
    """The inverse of ``ndtr``: ``sqrt 2 * erfinv(2 p - 1)``.

    Example:
        >>> tg.special.ndtri(tg.tensor([0.5, 0.975]))
        tensor([0.0000, 1.9600])
    """
    p = _tensor(input)
    return F.mul(F.erfinv(F.sub(F.mul(p, 2.0), 1.0)), math.sqrt(2.0))


def _tail_series(t):
    """sum_k (-1)**k (2k-1)!! / (2 t**2)**k for k < 8: erfc(t) = exp(-t**2) / (t sqrt(pi))
    times this, to float64 precision for t >= 14."""
    u = F.reciprocal(F.mul(F.mul(t, t), 2.0))
    total = F.add(F.mul(u, 0.0), 1.0)
    term = total
    for k in range(1, 8):
        term = F.mul(F.mul(term, u), -(2.0 * k - 1.0))
        total = F.add(total, term)
    return total


def log_ndtr(input):  # noqa: A002
    """``log(ndtr(x))``, accurate far into the lower tail (where ndtr underflows).

    Example:
        >>> tg.special.log_ndtr(tg.tensor([-40.0]))
        tensor([-804.6084])
    """
    x = _tensor(input)
    t = F.mul(x, -math.sqrt(0.5))
    low = F._compare(np.less, x, -20.0)
    # each branch sees inputs of its own range only, so no inf or nan reaches the gradient
    t_direct = F.where(low, 0.0, t)
    t_tail = F.where(low, t, 20.0)
    direct = F.log(F.mul(F.erfc(t_direct), 0.5))
    tail = F.add(F.sub(F.neg(F.mul(t_tail, t_tail)),
                       F.log(F.mul(F.mul(t_tail, 2.0), math.sqrt(math.pi)))),
                 F.log(_tail_series(t_tail)))
    return F.where(low, tail, direct)


def erfcx(input):  # noqa: A002
    """The scaled complementary error function ``exp(x**2) erfc(x)``, finite for large x.

    Example:
        >>> tg.special.erfcx(tg.tensor([0.0, 30.0]))
        tensor([1.0000, 0.0188])
    """
    x = _tensor(input)
    high = F._compare(np.greater, x, 20.0)
    x_direct = F.where(high, 0.0, x)
    x_tail = F.where(high, x, 20.0)
    direct = F.mul(F.exp(F.mul(x_direct, x_direct)), F.erfc(x_direct))
    tail = F.div(_tail_series(x_tail), F.mul(x_tail, math.sqrt(math.pi)))
    return F.where(high, tail, direct)


__dir__ = public_dir(globals())   # tab completion offers __all__, not the imports
