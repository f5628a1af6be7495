"""The random ops of the gamma family as tensor functions, as PyTorch's ``torch._standard_gamma``,
``torch._sample_dirichlet``, ``torch.binomial`` and their gradient helpers: PyTorch's draws
after ``manual_seed``, and the implicit reparameterisation gradients of its kernels (a Gamma
draw's ``grad_fn`` is ``<StandardGammaBackward0>``, a Dirichlet draw's ``_DirichletBackward``)."""
import numpy as np

import tapegrad as tg

from ..creation import stream_for
from ..function import BackwardCFunction, Function
from . import _sampling as S

__all__ = ["standard_gamma", "standard_gamma_grad", "sample_dirichlet", "dirichlet_grad",
           "binomial", "Dirichlet"]


def _values(t):
    return np.ascontiguousarray(t.detach().numpy(), dtype=np.float64)


def _float_only(t, name):
    if not t.dtype.is_floating_point:
        raise NotImplementedError(f'"{name}" not implemented for '
                                  f"'{str(t.dtype).split('.')[-1].capitalize()}'")


class _StandardGamma(Function):
    @staticmethod
    def forward(ctx, alpha, generator=None):
        x = tg.tensor(S.standard_gamma_array(_values(alpha), stream_for(generator)),
                      dtype=alpha.dtype)
        ctx.save_for_backward(alpha, x)
        return x

    @staticmethod
    def backward(ctx, grad):
        alpha, x = ctx.saved_tensors
        return grad * standard_gamma_grad(alpha, x), None


# PyTorch's node of _standard_gamma is a built-in one
_StandardGamma._backward_cls = type(
    "StandardGammaBackward0", (BackwardCFunction,),
    {"__slots__": (), "__module__": "tapegrad.autograd.function",
     "__repr__": lambda self: f"<StandardGammaBackward0 object at {hex(id(self))}>"})


def standard_gamma(alpha, generator=None):
    """A draw of Gamma(alpha, 1) for each element of ``alpha`` (PyTorch's, after the same
    seed), differentiable in ``alpha`` by implicit reparameterisation.

    Example:
        >>> from tapegrad.distributions._ops import standard_gamma
        >>> standard_gamma(tg.tensor([0.0])).item() > 0
        True
    """
    _float_only(alpha, "gamma_cpu")
    return _StandardGamma.apply(alpha, generator)


def standard_gamma_grad(alpha, x):
    """d x / d alpha of Gamma(alpha, 1) draws ``x`` at a fixed CDF value (no gradient), as
    ``torch._standard_gamma_grad``."""
    return tg.tensor(S.standard_gamma_grad_array(_values(alpha), _values(x)), dtype=x.dtype)


def sample_dirichlet(alpha, generator=None):
    """Dirichlet draws over the last dimension of ``alpha``, as ``torch._sample_dirichlet``
    (no gradient)."""
    _float_only(alpha, "dirichlet")
    gamma = S.standard_gamma_array(_values(alpha), stream_for(generator))
    total = S.last_dim_sum(gamma) if gamma.size else gamma
    return tg.tensor(S.normalise_dirichlet(gamma, total), dtype=alpha.dtype)


def dirichlet_grad(x, alpha, total):
    """The reparameterisation gradient of Beta(alpha, total - alpha) draws ``x``, over
    ``1 - x``, as ``torch._dirichlet_grad`` (no gradient)."""
    return tg.tensor(S.dirichlet_grad_array(_values(x), _values(alpha), _values(total)),
                     dtype=x.dtype)


class _Dirichlet(Function):
    @staticmethod
    def forward(ctx, concentration):
        x = sample_dirichlet(concentration)
        ctx.save_for_backward(x, concentration)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        x, concentration = ctx.saved_tensors
        total = concentration.sum(-1, True).expand_as(concentration)
        grad = dirichlet_grad(x, concentration, total)
        return grad * (grad_output - (x * grad_output).sum(-1, True))


_Dirichlet.backward._once_differentiable = True
Dirichlet = _Dirichlet


def binomial(count, prob, generator=None):
    """Binomial draws with ``count`` trials of success probability ``prob`` (broadcast),
    as ``torch.binomial``: PyTorch's numbers after the same seed, no gradient.

    Example:
        >>> tg.binomial(tg.tensor([0.0, 5.0, 5.0]), tg.tensor([0.5, 0.0, 1.0]))
        tensor([0., 0., 5.])
    """
    _float_only(count, "binomial_cpu")
    shape = tg.broadcast_shapes(tuple(count.shape), tuple(prob.shape))
    c = np.broadcast_to(_values(count), shape)
    p = np.broadcast_to(_values(prob), shape)
    return tg.tensor(S.binomial_array(c, p, stream_for(generator)), dtype=count.dtype)
