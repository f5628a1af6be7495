"""``tapegrad.nn.utils.parametrizations``: ready-made parametrizations, as in
``torch.nn.utils.parametrizations`` (``weight_norm`` so far)."""
from . import parametrize
from .modules import Module
from .utils import _norm_except_dim, _weight_norm

__all__ = ["weight_norm"]


class _WeightNorm(Module):
    """``weight = g * v / |v|`` from ``(g, v)`` = ``(original0, original1)``."""

    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim   # -1: one norm over the whole tensor

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Weight normalisation as a parametrization: ``module.<name>`` is recomputed from the
    magnitude ``parametrizations.<name>.original0`` (the norms of the slices along ``dim``;
    ``dim=None``: one norm of the whole tensor) and the direction ``original1`` on every
    read.  Returns ``module``.

    Example:
        >>> lin = weight_norm(nn.Linear(3, 2))
        >>> list(lin.state_dict())
        ['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
        >>> lin.weight.grad_fn.name()
        'WeightNormInterfaceBackward0'
    """
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
