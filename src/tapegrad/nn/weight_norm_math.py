"""The arithmetic of weight normalisation, shared by ``nn.utils.weight_norm`` (the hook API)
and ``nn.utils.parametrizations.weight_norm``: a module of its own, below both, so neither
imports the other for it."""
import tapegrad as tg
from tapegrad.functional import named_node as _named


def _norm_except_dim(v, dim):
    """The 2-norm of each slice of ``v`` along ``dim`` (kept as a size-1 axis everywhere
    else); ``dim=-1`` means the norm of the whole tensor (0-d).  Reshaped as PyTorch's
    ``norm_except_dim`` reshapes, so the sums run in its order."""
    if dim == -1:
        return tg.norm(v)
    last = v.ndim - 1
    if dim == 0:
        shape = (v.shape[0],) + (1,) * last
        return tg.norm(v.reshape(v.shape[0], -1), 2, 1).reshape(shape)
    if dim == last:
        shape = (1,) * last + (v.shape[-1],)
        return tg.norm(v.reshape(-1, v.shape[-1]), 2, 0).reshape(shape)
    return _norm_except_dim(v.transpose(0, dim), 0).transpose(0, dim)


def _weight_norm(v, g, dim=0):
    """``v * (g / norm_except_dim(v, dim))``: the weight that ``weight_norm`` recomputes from
    its direction ``v`` and magnitude ``g``.

    Where PyTorch runs its fused kernel (``dim`` the first or last axis) the node is
    ``WeightNormInterfaceBackward0``; elsewhere it is the ``MulBackward0`` of the product.

    Example:
        >>> tg._weight_norm(tg.tensor([[3.0, 4.0]]), tg.tensor([[10.0]]), 0)
        tensor([[6., 8.]])
    """
    w = v * (g / _norm_except_dim(v, dim))
    if dim == 0 or dim == v.ndim - 1:
        return _named(w, "WeightNormInterfaceBackward0", v, g)
    return w
