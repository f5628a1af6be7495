"""``tapegrad.nn.utils.parametrizations``: ready-made parametrizations, as in
``torch.nn.utils.parametrizations`` (``weight_norm`` and ``spectral_norm`` so far)."""
import tapegrad as tg
from tapegrad.tensor import Tensor

from . import functional as F
from . import parametrize
from .modules import Module
from .weight_norm_math import _norm_except_dim, _weight_norm

__all__ = ["weight_norm", "spectral_norm"]


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


class _SpectralNorm(Module):
    """``weight / sigma``, ``sigma`` the largest singular value of ``weight`` (flattened to a
    matrix around ``dim``) estimated by power iteration on the buffers ``_u`` and ``_v``:
    15 steps when made, ``n_power_iterations`` per call in training mode.  A 1-d weight is
    just normalised."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError("Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but "
                             f"got n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            with tg.no_grad():
                # u drawn before v, as PyTorch draws them: the same numbers after one seed
                u = tg.empty(h, dtype=weight.dtype).normal_(0, 1)
                v = tg.empty(w, dtype=weight.dtype).normal_(0, 1)
                self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
                self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations):
        with tg.no_grad():
            # the buffers change in place (PyTorch's out=): u first, then v
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(tg.mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(tg.mv(weight_mat.t(), self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        # copies: the graph of sigma must not see the next call's in-place update
        u, v = self._u.clone(), self._v.clone()
        sigma = tg.vdot(u, tg.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Spectral normalisation as a parametrization: ``module.<name>`` reads as the stored
    ``parametrizations.<name>.original`` divided by its spectral norm, estimated by power
    iteration on the buffers ``parametrizations.<name>.0._u`` and ``._v`` (which advance in
    training mode).  ``dim`` is the output axis (default 0, 1 for the transposed
    convolutions).  Returns ``module``.

    Example:
        >>> lin = spectral_norm(nn.Linear(4, 3))
        >>> list(lin.state_dict())
        ['bias', 'parametrizations.weight.original', 'parametrizations.weight.0._u', \
'parametrizations.weight.0._v']
        >>> bool(tg.linalg.matrix_norm(lin.weight, 2) < 1.01)
        True
    """
    from .conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
