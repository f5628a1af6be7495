"""Activations, losses and dropout as functions, composed from tapegrad tensor ops.

Everything here records ordinary ops on the tape, so gradients come from the ops' own
backward rules. Shapes: ``N`` is the batch, ``C`` the number of classes.
"""
import math
import warnings

import numpy as np

import tapegrad as tg
from tapegrad import functional as _elementwise
from tapegrad import inplace as _inplace
from tapegrad import ops as _ops
from tapegrad.creation import generator as _generator
from tapegrad.tape import state as _state
from tapegrad.tensor import _wrap_dim, read_value
from tapegrad.views import ViewOf as _ViewOf

from ._loss_reduction import REDUCTIONS as _REDUCTIONS
from ._loss_reduction import check_reduction as _check_reduction
from ._loss_reduction import legacy_reduction as _legacy_reduction
from ._loss_reduction import reduce as _reduce

_named = _elementwise.named_node

from .grid_sampling import affine_grid, grid_sample  # noqa: E402,F401 - spatial transformers
from .ctc import ctc_loss  # noqa: E402,F401 - the CTC loss, one op with its own backward

__all__ = [
    "relu_", "elu_", "selu_", "celu_", "leaky_relu_", "hardtanh_", "threshold_",
    "linear", "relu", "tanh", "sigmoid", "softmax", "log_softmax", "dropout",
    "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
    "rrelu", "rrelu_",
    "mse_loss", "l1_loss", "nll_loss", "cross_entropy", "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "gelu", "silu", "elu", "selu", "celu", "leaky_relu", "softplus", "mish", "hardtanh", "relu6",
    "hardsigmoid", "hardswish", "softsign", "logsigmoid", "tanhshrink", "softshrink",
    "hardshrink", "threshold", "prelu", "glu", "softmin", "huber_loss", "smooth_l1_loss", "kl_div",
    "poisson_nll_loss", "gaussian_nll_loss", "margin_ranking_loss", "cosine_embedding_loss",
    "pairwise_distance", "triplet_margin_loss", "normalize", "cosine_similarity", "layer_norm",
    "group_norm", "batch_norm", "embedding", "embedding_bag", "one_hot", "pad", "bilinear",
    "scaled_dot_product_attention", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "unfold", "fold", "max_pool2d", "avg_pool2d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "rms_norm", "max_pool1d", "avg_pool1d",
    "max_pool3d", "avg_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
    "max_pool3d_with_indices", "adaptive_max_pool1d", "max_unpool1d", "max_unpool2d",
    "max_unpool3d", "lp_pool1d", "lp_pool2d", "lp_pool3d", "adaptive_avg_pool3d",
    "local_response_norm", "adaptive_max_pool3d", "affine_grid", "grid_sample",
    "instance_norm", "soft_margin_loss", "multilabel_soft_margin_loss", "hinge_embedding_loss",
    "multi_margin_loss", "pixel_shuffle", "adaptive_max_pool2d", "interpolate",
    "gumbel_softmax", "pixel_unshuffle", "ctc_loss", "pdist", "upsample", "upsample_nearest",
    "upsample_bilinear", "channel_shuffle", "native_channel_shuffle",
    "multilabel_margin_loss", "triplet_margin_with_distance_loss",
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices", "fractional_max_pool2d", "fractional_max_pool3d",
    "fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices",
    "multi_head_attention_forward",
]



def _not_differentiable(function, name, value):
    """PyTorch's error for a weight that requires grad where its op has no gradient for it
    (checked in grad mode, before the op's own checks of its inputs)."""
    if isinstance(value, tg.Tensor) and value.requires_grad and tg.is_grad_enabled():
        raise RuntimeError(
            f"The function '{function}' is not differentiable with respect to argument "
            f"'{name}'. This input cannot have requires_grad True.")


def _constant(array):
    """A float64 tensor holding ``array`` (no gradient flows into it)."""
    # (ascontiguousarray makes a 0-d array 1-d: the reshape keeps a 0-d input 0-d)
    return tg.from_numpy(np.ascontiguousarray(array, dtype=np.float64).reshape(np.shape(array)))


# ---------------------------------------------------------------------------------------------
# Layers and activations
# ---------------------------------------------------------------------------------------------


def linear(input, weight, bias=None):
    """``input @ weight.T + bias``.

    Shape: input ``(*, in)``, weight ``(out, in)``, bias ``(out,)`` -> ``(*, out)``.

    Example:
        >>> x = tg.tensor([[-1.0, 0.0, 2.0]])
        >>> w = tg.tensor([[1.0, 1.0, 1.0], [0.5, 0.0, -0.5]])
        >>> F.linear(x, w, tg.tensor([0.0, 1.0]))
        tensor([[ 1.0000, -0.5000]])
    """
    # PyTorch's decomposition, which its graph shows: weight.t() (TBackward0); a 2-D input
    # with a bias is one addmm; a contiguous input of other rank, with a bias of one row,
    # is flattened to rows for that addmm and viewed back (ViewBackward0); anything else is
    # a matmul, then the bias added (AddBackward0)
    transposed = weight.t() if weight.ndim == 2 else weight.T
    if bias is None or weight.ndim != 2:
        out = input @ transposed
        return out if bias is None else out + bias
    if input.ndim == 2:
        return _addmm(bias, input, transposed)
    if bias.ndim >= 1 and bias.numel() == bias.shape[-1] and input.is_contiguous():
        rows = input.reshape(-1, input.shape[-1]) if input.ndim else input
        return _addmm(bias, rows, transposed).view(*input.shape[:-1], weight.shape[0])
    out = input @ transposed
    if bias.ndim > out.ndim or any(b not in (1, o) for b, o in zip(bias.shape[::-1],
                                                                 out.shape[::-1])):
        # PyTorch adds the bias in place (output.add_(bias)): it cannot grow the output
        grown = _elementwise.broadcast_shape(tuple(out.shape), tuple(bias.shape))
        raise RuntimeError(f"output with shape {list(out.shape)} doesn't match the "
                           f"broadcast shape {list(grown)}")
    return out + bias


def _addmm(bias, rows, transposed):
    """``rows @ transposed + bias`` as PyTorch's one addmm, which expands the bias to the
    product's shape first (and raises expand's errors where it cannot)."""
    _elementwise.check_addmm_dtypes(bias, rows, transposed)
    target = (rows.shape[0], transposed.shape[-1])
    if bias.ndim > 2 or any(b not in (1, t) for b, t in zip(bias.shape[::-1], target[::-1])):
        bias.expand(*target)
    return _named(rows @ transposed + bias, "AddmmBackward0", bias, rows, transposed)


def relu(input, inplace=False):
    """``max(input, 0)`` elementwise; ``inplace`` overwrites ``input`` and returns it.

    Shape: that of ``input``.

    Example:
        >>> F.relu(tg.tensor([[-1.0, 0.0, 2.0]]))
        tensor([[0., 0., 2.]])
    """
    return input.relu_() if inplace else tg.relu(input)


def tanh(input):
    """``tanh(input)`` elementwise, as ``tapegrad.tanh``.

    Shape: that of ``input``.

    Example:
        >>> F.tanh(tg.tensor([0.0, 1.0]))
        tensor([0.0000, 0.7616])
    """
    # a method call, as PyTorch's: a list gets its AttributeError (no attribute 'tanh')
    return input.tanh()


def sigmoid(input):
    """``1 / (1 + exp(-input))`` elementwise, as ``tapegrad.sigmoid``.

    Shape: that of ``input``.

    Example:
        >>> F.sigmoid(tg.tensor([0.0, 2.0]))
        tensor([0.5000, 0.8808])
    """
    # a method call, as PyTorch's (see tanh)
    return input.sigmoid()


def _implicit_dim(name, ndim, stacklevel):
    # PyTorch's legacy rule when no dim is given: 0 for 0-, 1- and 3-d inputs, else 1
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
        "dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``exp(x) / sum(exp(x))`` along ``dim`` (without ``dim``: PyTorch's deprecated implicit
    choice, with its warning).

    Shape: that of ``input``; the values along ``dim`` sum to 1.

    Example:
        >>> F.softmax(tg.tensor([[1.0, 2.0, 3.0]]), dim=1)
        tensor([[0.0900, 0.2447, 0.6652]])
    """
    if dim is None:
        dim = _implicit_dim("softmax", input.ndim, _stacklevel)
    return tg.softmax(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``x - logsumexp(x)`` along ``dim``: the log of ``softmax``, computed without overflow.

    Shape: that of ``input``.

    Example:
        >>> F.log_softmax(tg.tensor([[1.0, 2.0, 3.0]]), dim=1)
        tensor([[-2.4076, -1.4076, -0.4076]])
    """
    if dim is None:
        dim = _implicit_dim("log_softmax", input.ndim, _stacklevel)
    return tg.log_softmax(input, dim, dtype)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``, in
    training mode; the identity otherwise. The mask is drawn from tapegrad's generator
    (seeded by ``tapegrad.manual_seed``) as PyTorch draws it, so it is PyTorch's mask for
    the same seed; ``inplace`` overwrites ``input``.

    Shape: that of ``input``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> F.dropout(tg.ones(6), p=0.5)
        tensor([0., 0., 2., 0., 0., 0.])
        >>> F.dropout(tg.ones(3), p=0.5, training=False)
        tensor([1., 1., 1.])
    """
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input.mul_(0.0) if inplace else input * 0.0
    # PyTorch's noise: bernoulli_(1 - p) (a uniform draw below 1 - p keeps), over 1 - p
    keep = _generator().random(tuple(input.shape)) < 1.0 - p
    scale = _constant(keep * (1.0 / (1.0 - p)))
    return input.mul_(scale) if inplace else input * scale


_ALPHA_DROP = 1.7580993408473766   # PyTorch's alpha_dropout: -(selu's lower limit)


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropout_impl(input, p, training, inplace, feature, alpha):
    """PyTorch's CPU ``_dropout_impl``: one bernoulli_(1 - p) draw per element (or, with
    ``feature``, per (sample, channel)), then either ``input * (noise / (1 - p))`` or, with
    ``alpha``, ``input * (noise * a) + b``; every step rounded on its own, as PyTorch's."""
    if feature and input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if p == 0.0 or not training or input.numel() == 0:
        return input
    if p == 1.0:
        return input.mul_(0.0) if inplace else input * 0.0
    shape = tuple(input.shape)
    if feature:
        shape = shape[:2] + (1,) * (len(shape) - 2)
    noise = (_generator().random(shape) < 1.0 - p).astype(np.float64)
    if not alpha:
        scale = _constant(noise / (1.0 - p))
        return input.mul_(scale) if inplace else input * scale
    a = 1.0 / math.sqrt((_ALPHA_DROP * _ALPHA_DROP * p + 1) * (1 - p))
    # (noise - 1) is exact; its product and the shift are rounded apart, as the C++ steps
    shift = _constant((noise - 1.0) * (_ALPHA_DROP * a) + _ALPHA_DROP * a * p)
    scale = _constant(noise * a)
    return input.mul_(scale).add_(shift) if inplace else input * scale + shift


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of a (N, C, L) or (C, L) input with probability ``p`` and scale
    the rest by ``1 / (1 - p)``, in training mode (PyTorch's draws for the same seed).

    Example:
        >>> _ = tg.manual_seed(0)
        >>> F.dropout1d(tg.ones(1, 3, 2))
        tensor([[[0., 0.],
                 [0., 0.],
                 [2., 2.]]])
    """
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. "
            "Note that dropout1d exists to provide channel-wise dropout on inputs with 1 "
            "spatial dimension, a channel dimension, and an optional batch dimension "
            "(i.e. 2D or 3D inputs).")
    return _unbatched_feature_dropout(input, p, training, inplace, input.ndim == 3)


def _unbatched_feature_dropout(input, p, training, inplace, batched):
    # PyTorch treats an unbatched input as a batch of one (drawing the same words)
    if batched:
        return _dropout_impl(input, p, training, inplace, True, False)
    input = input.unsqueeze_(0) if inplace else input.unsqueeze(0)
    out = _dropout_impl(input, p, training, inplace, True, False)
    return out.squeeze_(0) if inplace else out.squeeze(0)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of a (N, C, H, W) input with probability ``p`` and scale the
    rest by ``1 / (1 - p)``, in training mode.  A 3-D input is taken as (N, C, L) with a
    warning, as PyTorch does.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> F.dropout2d(tg.ones(1, 3, 1, 2))
        tensor([[[[0., 0.]],
        <BLANKLINE>
                 [[0., 0.]],
        <BLANKLINE>
                 [[2., 2.]]]])
    """
    _check_p(p)
    if input.ndim not in (3, 4):
        warnings.warn(
            f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated "
            "and will result in an error in a future release. To retain the behavior "
            "and silence this warning, please use dropout instead. Note that dropout2d "
            "exists to provide channel-wise dropout on inputs with 2 spatial dimensions, "
            "a channel dimension, and an optional batch dimension (i.e. 3D or 4D inputs).",
            stacklevel=2)
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
            "1D dropout behavior is desired - input is interpreted as shape (N, C, L), where C "
            "is the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=2)
    return _dropout_impl(input, p, training, inplace, True, False)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of a (N, C, D, H, W) or (C, D, H, W) input with probability
    ``p`` and scale the rest by ``1 / (1 - p)``, in training mode.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> F.dropout3d(tg.ones(1, 3, 1, 1, 1)).reshape(-1)
        tensor([0., 0., 2.])
    """
    _check_p(p)
    if input.ndim not in (4, 5):
        warnings.warn(
            f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated "
            "and will result in an error in a future release. To retain the behavior "
            "and silence this warning, please use dropout instead. Note that dropout3d "
            "exists to provide channel-wise dropout on inputs with 3 spatial dimensions, "
            "a channel dimension, and an optional batch dimension (i.e. 4D or 5D inputs).",
            stacklevel=2)
    return _unbatched_feature_dropout(input, p, training, inplace, input.ndim == 5)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout (for SELU networks): dropped elements are set to selu's negative
    saturation and the result is scaled and shifted to keep mean and variance; the identity
    unless ``training``.  PyTorch's draws and roundings.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> F.alpha_dropout(tg.ones(3), 0.5, training=True)
        tensor([-0.7792, -0.7792,  1.6656])
    """
    _check_p(p)
    return _dropout_impl(input, p, training, inplace, False, True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole channels (dims 0 and 1 pick a channel): see ``alpha_dropout``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> F.feature_alpha_dropout(tg.ones(1, 3, 1), 0.5, training=True).reshape(-1)
        tensor([-0.7792, -0.7792,  1.6656])
    """
    _check_p(p)
    return _dropout_impl(input, p, training, inplace, True, True)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """A sample of the Gumbel-softmax distribution: ``softmax((logits + g) / tau)`` along
    ``dim``, with ``g`` standard Gumbel noise drawn from tapegrad's generator.  With
    ``hard``, the one-hot vector of the sample's largest entry, whose gradient is the soft
    sample's (PyTorch's straight-through ``y_hard - y_soft.detach() + y_soft``).

    Example:
        >>> _ = tg.manual_seed(0)
        >>> y = F.gumbel_softmax(tg.zeros(2, 3), hard=True)
        >>> (y > 0.5).sum(-1)
        tensor([1, 1])
    """
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    gumbels = tg.empty_like(logits).exponential_().log().neg()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = tg.zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


# ---------------------------------------------------------------------------------------------
# Regression losses
# ---------------------------------------------------------------------------------------------


def _warn_size(input, target, stacklevel=3):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input size "
            f"({input.shape}). This will likely lead to incorrect results due to broadcasting. "
            "Please ensure they have the same size.", stacklevel=stacklevel)


def mse_loss(input, target, reduction="mean"):
    """``(input - target)**2``, reduced; input and target broadcast (with a warning, as in
    PyTorch, when their shapes differ).

    Shape: ``()`` with ``reduction`` ``"mean"`` (default) or ``"sum"``; the broadcast shape
    of input and target with ``"none"``.

    Example:
        >>> F.mse_loss(tg.tensor([1.0, 2.0]), tg.tensor([0.0, 0.0]))
        tensor(2.5000)
        >>> F.mse_loss(tg.tensor([1.0, 2.0]), tg.tensor([0.0, 0.0]), reduction="none")
        tensor([1., 4.])
    """
    _check_reduction(reduction)
    _warn_size(input, target)
    diff = input - target
    return _named(_reduce(diff * diff, reduction), "MseLossBackward0", input, target)


def l1_loss(input, target, reduction="mean"):
    """``|input - target|``, reduced.

    Shape: as for ``mse_loss``.

    Example:
        >>> F.l1_loss(tg.tensor([1.0, -2.0]), tg.tensor([0.0, 0.0]))
        tensor(1.5000)
    """
    _check_reduction(reduction)
    _warn_size(input, target)
    return _reduce(tg.abs(input - target), reduction)


# ---------------------------------------------------------------------------------------------
# Classification losses
# ---------------------------------------------------------------------------------------------


def _class_last(input, target):
    """Flatten to (M, C) scores and (M,) integer targets (a tensor); also return the shape of
    an unreduced loss. Accepts (C,) with a 0-d target, (N, C) with (N,), and (N, C, d1, ...)
    with (N, d1, ...)."""
    target = target if isinstance(target, tg.Tensor) else tg.tensor(np.asarray(target))
    t = target._value
    if t.dtype != np.int64 and t.dtype != np.uint8:
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {_dtype_name(t)}")
    if input.ndim == 0:
        raise ValueError("Expected 1 or more dimensions (got 0)")
    if input.ndim == 1:
        if t.ndim > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        if t.ndim == 1 and t.shape[0] != 1:
            raise ValueError("For 1D input, 1D target must have size 1, but got target size: "
                             f"{t.shape[0]}")
        # (a target of one element, 0-d or not, gives a 0-d loss, as in PyTorch)
        return input.unsqueeze(0), target.reshape(1), ()
    n, c = input.shape[0], input.shape[1]
    if t.ndim == 0 or t.shape[0] != n:
        got = t.shape[0] if t.ndim else 0   # (PyTorch's word for a 0-d target)
        raise ValueError(f"Expected input batch_size ({n}) to match target batch_size ({got}).")
    if input.ndim == 2:
        if t.ndim != 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        return input, target, t.shape
    if input.ndim == 4 and t.ndim != 3:
        raise RuntimeError("only batches of spatial targets supported (3D tensors) but got "
                           f"targets of dimension: {t.ndim}")
    if t.shape != (n,) + tuple(input.shape[2:]):
        raise RuntimeError(
            f"size mismatch (got input: {list(input.shape)} , target: {list(t.shape)}")
    # (N, C, d1, ...) -> (N, d1, ..., C) -> (M, C)
    order = (0,) + tuple(range(2, input.ndim)) + (1,)
    return input.permute(*order).reshape(-1, c), target.reshape(-1), t.shape


def _dtype_name(array):
    return tg.from_numpy(np.empty(0, array.dtype)).dtype.scalar_name   # ("Long", "Int", ...)


def _check_class_weight(weight, n_classes, spatial, prefix=""):
    """PyTorch's check of a loss's class weights: one 1-D weight per class, or none."""
    if weight is None:
        return
    shape = list(weight.shape) if isinstance(weight, tg.Tensor) else list(np.shape(weight))
    if shape == [n_classes]:
        return
    if spatial:   # (the loss of 4-D scores words it without the numbers)
        raise RuntimeError("weight tensor should be defined either for all or no classes")
    raise RuntimeError(f"{prefix}weight tensor should be defined either for all {n_classes} "
                       f"classes or no classes but got weight tensor of shape: {shape}")


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of integer class targets given log-probabilities.

    input (N, C) (or (C,), or (N, C, d1, ...)); target (N,) int (or 0-d, or (N, d1, ...));
    weight (C,) rescales each class. Targets equal to ``ignore_index`` contribute nothing;
    ``mean`` divides by the summed weight of the counted targets.

    Shape: ``()``, or the target's shape with ``reduction="none"``.

    Example:
        >>> logp = F.log_softmax(tg.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 2.0]]), dim=1)
        >>> F.nll_loss(logp, tg.tensor([0, 2]))
        tensor(0.2395)
    """
    _check_reduction(reduction)
    _not_differentiable("nll_loss_forward", "weight", weight)
    if input.ndim == 3 or input.ndim > 4:
        return _nll_spatial(input, target, weight, ignore_index, reduction)
    scores, target, out_shape = _class_last(input, target)
    c = scores.shape[1]
    _check_class_weight(weight, c, input.ndim == 4)
    if _traced(target):
        # the targets are a compiled function's data: picked by comparison, so that a replay
        # takes new targets (indexing by them would bake their values into the tape)
        picked, w, counted = _picked_by_comparison(scores, target, weight, ignore_index, c)
    else:
        picked, w, counted = _picked_by_index(scores, target._value, weight, ignore_index, c)
        if counted is None:   # no weight, nothing ignored
            if reduction == "none":
                return _nll_named((-picked).reshape(tuple(out_shape)), input)
            return _nll_named(-picked.sum() if reduction == "sum" else -picked.mean(), input)
    # rows of ignored targets are 0 and pass no gradient (not 0 times the gradient: with
    # every target ignored that is 0 / 0, where PyTorch gives 0)
    rows = tg.where(counted, -picked if w is None else picked * -w, 0.0)
    if reduction == "none":
        loss = rows.reshape(tuple(out_shape))
    elif reduction == "sum":
        loss = rows.sum()
    else:
        total = counted.double().sum() if w is None else tg.where(counted, w, 0.0).sum()
        loss = rows.sum() / total
    return _nll_named(loss, input)


def _nll_spatial(input, target, weight, ignore_index, reduction):  # noqa: A002
    """nll_loss of (N, C, d1) or (N, C, d1, ..., dk) scores, k >= 3, as PyTorch routes it:
    the scores viewed as (N, C, 1, d1 * ... * dk) and the targets as (N, 1, d1 * ... * dk)
    through the loss of 4-D scores, an unreduced loss viewed back to (N, d1, ..., dk).  So
    its graph is PyTorch's: NllLoss2DBackward0 reading a view of the scores."""
    target = target if isinstance(target, tg.Tensor) else tg.tensor(np.asarray(target))
    n, c = input.shape[0], input.shape[1]
    t_shape = tuple(target.shape)
    if not t_shape or t_shape[0] != n:
        got = t_shape[0] if t_shape else 0   # (PyTorch's word for a 0-d target here)
        raise ValueError(f"Expected input batch_size ({n}) to match target batch_size ({got}).")
    out_shape = (n,) + tuple(input.shape[2:])
    if t_shape != out_shape:
        raise RuntimeError(f"Expected target size {list(out_shape)}, got {list(t_shape)}")
    rest = math.prod(out_shape[1:])
    loss = nll_loss(input.contiguous().view(n, c, 1, rest),
                    target.contiguous().view(n, 1, rest), weight, ignore_index, reduction)
    return loss.view(out_shape) if reduction == "none" else loss


def _nll_named(loss, input):  # noqa: A002
    # (PyTorch computes a loss over 4-D scores with another op, NllLoss2DBackward0; one over
    # 3-D or more than 4-D scores reads them through a view as 4-D: _nll_spatial)
    if input.ndim <= 2:
        return _named(loss, "NllLossBackward0", input)
    return _named(loss, "NllLoss2DBackward0", input) if input.ndim == 4 else loss


def _traced(t):
    """Whether ``t`` holds traced values: an input of a function ``compile`` records (or is
    computed from one).  Only such tensors require grad when they are integers."""
    return t._rg and _state.trace is not None


def _out_of_bounds(target):
    return IndexError(f"Target {target} is out of bounds.")


def _picked_by_index(scores, t, weight, ignore_index, c):
    """Each row's score at its target (targets known now), the weight of each row's class
    (a tensor, recorded: the weight may be a compiled function's input; None without one)
    and the mask of counted rows (None when no weight is given and nothing is ignored)."""
    counted = t != ignore_index
    bad = counted & ((t < 0) | (t >= c))
    if bad.any():
        raise _out_of_bounds(t[bad][0])
    safe = tg.from_numpy(np.where(counted, t, 0).astype(np.int64))
    picked = scores[tg.arange(scores.shape[0]), safe]            # (M,)
    if weight is None:
        return picked, None, None if counted.all() else tg.from_numpy(counted)
    weight = weight if isinstance(weight, tg.Tensor) else _constant(weight)
    return picked, weight[safe], tg.from_numpy(counted)


def _picked_by_comparison(scores, t, weight, ignore_index, c):
    """``_picked_by_index`` for traced targets, from comparisons: the same values."""
    counted = t != ignore_index
    # out-of-bounds targets raise as in eager mode; a replay guards that there are none
    outside = (((t < 0).double() + (t >= c).double()) * counted.double()).sum()
    if outside.item() != 0.0:
        values = t._value
        first = values[(values != ignore_index) & ((values < 0) | (values >= c))][0]
        raise _out_of_bounds(int(first))
    onehot = t.unsqueeze(1) == tg.arange(c)                     # (M, C)
    picked = tg.where(onehot, scores, 0.0).sum(1)               # one term per row: exact
    if weight is None:
        return picked, None, counted
    weight = weight if isinstance(weight, tg.Tensor) else _constant(weight)
    return picked, tg.where(onehot, weight, 0.0).sum(1), counted


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    """Softmax cross-entropy of unnormalised scores: ``nll_loss(log_softmax(input, 1), ...)``.

    ``target`` is integer class indices (see ``nll_loss`` for shapes), or class probabilities
    of the same shape as ``input`` (then ``mean`` divides by the number of samples).

    Shape: input ``(N, C)``, target ``(N,)`` -> ``()`` (``(N,)`` with ``reduction="none"``).

    Example:
        >>> scores = tg.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 2.0]], requires_grad=True)
        >>> loss = F.cross_entropy(scores, tg.tensor([0, 1]))
        >>> print(f"{loss.item():.4f}")
        1.2395
        >>> loss.backward(); scores.grad.shape
        tapegrad.Size([2, 3])
    """
    _check_reduction(reduction)
    class_dim = 0 if input.ndim == 1 else 1
    logp = tg.log_softmax(input, class_dim)
    t_value = target._value if isinstance(target, tg.Tensor) else np.asarray(target)
    # as PyTorch decides: a target of input's shape holds class probabilities, any other
    # class indices (a floating one of another shape is refused there for its dtype)
    if tuple(t_value.shape) != tuple(input.shape):
        nll = nll_loss(logp, target, weight, ignore_index, reduction)
        if not label_smoothing > 0.0:   # (PyTorch ignores a negative one)
            return nll
        if label_smoothing > 1.0:
            raise RuntimeError(_smoothing_range(label_smoothing))
        return _smoothed_by_index(logp, nll, target, weight, ignore_index, reduction,
                                  class_dim, label_smoothing)
    if t_value.dtype.kind != "f":
        raise RuntimeError("Expected floating point type for target with class probabilities, "
                           f"got {_dtype_name(t_value)}")
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    n_classes = input.shape[class_dim]
    _check_class_weight(weight, n_classes, False, "cross_entropy: ")
    if label_smoothing > 0.0:
        if label_smoothing > 1.0:
            raise RuntimeError(_smoothing_range(label_smoothing))
        # the target mixed with the uniform distribution, then the loss as without smoothing
        target = target * (1 - label_smoothing) + label_smoothing / n_classes
    terms = logp * target
    if weight is not None:
        shape = [1] * input.ndim
        shape[class_dim] = -1
        weight = weight if isinstance(weight, tg.Tensor) else _constant(weight)
        terms = terms * weight.reshape(shape)
    # PyTorch's own forms, so that the result's node is its: -sum over the classes for
    # "none", minus the whole sum for "sum", that divided by the number of samples (numel /
    # C, in integers) for "mean"
    if reduction == "none":
        return -terms.sum(class_dim)
    if reduction == "sum":
        return -terms.sum()
    if input.numel() == 0:   # (PyTorch fills the empty sum with nan in place)
        total = terms.sum()
        return -_named(total * float("nan"), "FillBackward2", total)
    total = -terms.sum()
    return _named(total / (input.numel() // n_classes), "DivBackward1", total)


def _smoothing_range(label_smoothing):
    return f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing:g}"


def _smoothed_by_index(logp, nll, target, weight, ignore_index, reduction, class_dim,
                       label_smoothing):
    """cross_entropy with class-index targets and ``label_smoothing`` s, as PyTorch builds
    it: ``(1 - s) * nll + (s / C) * smooth``, where a row's ``smooth`` is minus the sum of
    its log-probabilities (each weighted by its class's weight, if given), 0 for an ignored
    row, reduced as the loss is (a mean divides by the counted rows, or by their weights)."""
    n_classes = logp.shape[class_dim]
    target = target if isinstance(target, tg.Tensor) else tg.as_tensor(target)
    ignored = target == ignore_index
    if weight is not None:
        weight = weight if isinstance(weight, tg.Tensor) else _constant(weight)
        shape = [1] * logp.ndim
        shape[class_dim] = -1
        smooth = -(logp * weight.reshape(shape)).sum(class_dim)
    else:
        smooth = -logp.sum(class_dim)
    smooth = smooth.masked_fill(ignored, 0.0)
    if reduction == "mean":
        if weight is not None:
            smooth = smooth.sum() / weight[target[~ignored]].sum()
        else:
            smooth = smooth.sum() / (~ignored).sum()
    elif reduction == "sum":
        smooth = smooth.sum()
    # (products with a number: PyTorch's C++ names them MulBackward1)
    return (_named(nll * (1 - label_smoothing), "MulBackward1", nll)
            + _named(smooth * (label_smoothing / n_classes), "MulBackward1", smooth))


def _check_same_size(input, target):
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"Using a target size ({target.shape}) that is different to the input size "
            f"({input.shape}) is deprecated. Please ensure they have the same size.")


def _all_in_unit_interval(x):
    """Whether every element of tensor ``x`` is in [0, 1] (NaN is not: both comparisons
    are false for it), counted with comparisons so that a compiled call guards the count."""
    inside = ((x >= 0.0).double() * (x <= 1.0).double()).sum()
    return inside.item() == x.numel()


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """``-(t * log(x) + (1 - t) * log(1 - x))`` with each log floored at -100, as PyTorch
    does; input (probabilities in [0, 1]) and target of one shape; weight broadcasts.

    One op of the table per element (``<BinaryCrossEntropyBackward0>``), with PyTorch's
    gradients: ``(x - t) / max((1 - x) x, 1e-12)`` for the input (finite at 0 and 1) and
    ``-logit(x)`` for the target.  The range check is counted with comparisons, so that a
    compiled call guards it (a replay whose input leaves [0, 1] records again, and raises as
    eager mode does).  A weight or a reduction comes after the op, so the result's
    ``grad_fn`` is then ``<MulBackward0>``, ``<MeanBackward0>`` or ``<SumBackward0>``.

    Shape: ``()``, or the input's shape with ``reduction="none"``.

    Example:
        >>> F.binary_cross_entropy(tg.tensor([0.9, 0.2]), tg.tensor([1.0, 0.0]))
        tensor(0.1643)
    """
    _check_reduction(reduction)
    _check_same_size(input, target)
    if target.dtype != input.dtype:
        raise RuntimeError(f"Found dtype {target.dtype.scalar_name} but expected "
                           f"{input.dtype.scalar_name}")
    _not_differentiable("binary_cross_entropy", "weight", weight)
    for name, values in (("input", input), ("target", target)):
        if not _all_in_unit_interval(values):
            raise RuntimeError(f"all elements of {name} should be between 0 and 1")
    loss = _elementwise.binary_cross_entropy(input, target)
    if weight is not None:
        loss = loss * weight
    return _named(_reduce(loss, reduction), "BinaryCrossEntropyBackward0", input, target)


def _floating(x):
    return x.dtype.is_floating_point if isinstance(x, tg.Tensor) else \
        np.asarray(x).dtype.kind == "f"


def _step(strict, loose):
    """The step function H from the comparisons ``x > 0`` and ``x >= 0`` (1, 1/2 at 0, 0):
    comparisons, so that a compiled call recomputes it from its input."""
    return (strict.double() + loose.double()) * 0.5


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean",
                                     pos_weight=None):
    """``binary_cross_entropy(sigmoid(input), target)`` in a form that never overflows and
    keeps the gradient ``sigmoid(x) - t`` accurate; input and target of one shape;
    ``pos_weight`` (broadcast along the last dimension) scales the positive term, ``weight``
    the whole loss.

    With ``H`` the step function (1/2 at 0) and ``tail = log(1 + exp(-|x|))``:
    ``loss = x * (H(x) - t) + tail``, which is ``max(x, 0) - x t + tail``. Writing the linear
    part as one product matters for the gradient: summing the separate terms' gradients
    (1 from max(x, 0), -t, ...) rounds before they cancel, and losing ~1e-16 absolute against
    a gradient of sigmoid(-30) ~ 1e-13 was a 1e-3 relative error. H(0) = 1/2 gives
    d loss / dx = sigmoid(0) - t at x == 0, as in PyTorch.

    Shape: ``()``, or the input's shape with ``reduction="none"``.

    Example:
        >>> F.binary_cross_entropy_with_logits(tg.tensor([2.0, -1.0]), tg.tensor([1.0, 0.0]))
        tensor(0.2201)
    """
    _check_reduction(reduction)
    if tuple(target.shape) != tuple(input.shape):
        # (not binary_cross_entropy's text: PyTorch words this one otherwise)
        raise ValueError(f"Target size ({target.shape}) must be the same as input size "
                         f"({input.shape})")
    if target.dtype.is_floating_point is False and target.dtype is not tg.bool \
            and input.dtype.is_floating_point:
        # (PyTorch computes the loss in place in a tensor of the target's type)
        raise RuntimeError(f"result type {input.dtype.scalar_name} can't be cast to the "
                           f"desired output type {target.dtype.scalar_name}")
    _not_differentiable("binary_cross_entropy_with_logits", "weight", weight)
    _not_differentiable("binary_cross_entropy_with_logits", "pos_weight", pos_weight)
    tail = tg.log1p(tg.exp(-tg.abs(input)))              # log(1 + exp(-|x|)) <= log 2
    if pos_weight is None:
        loss = input * (_step(input > 0.0, input >= 0.0) - target) + tail
    else:
        # (1 - t) x - lw * log_sigmoid(x) with lw = 1 + (pos_weight - 1) t, where
        # -log_sigmoid(x) = max(-x, 0) + tail = x * (H(-x) ... ) + tail as above
        log_weight = (pos_weight - 1.0) * target + 1.0
        step_neg = _step(input < 0.0, input <= 0.0)      # H(-x)
        loss = input * ((1.0 - target) - log_weight * step_neg) + log_weight * tail
    if weight is not None:
        loss = loss * weight
    return _named(_reduce(loss, reduction), "BinaryCrossEntropyWithLogitsBackward0", input,
                  target)


# ---------------------------------------------------------------------------------------------
# More activations.  Most are one op of the table each (``ops/activation.py``), with
# PyTorch's grad_fn name and formulas; the rest are composites of recorded ops, whose
# grad_fn is that of the formula's last op.  A composite's branches are ``where``s on
# comparisons, so a compiled replay re-evaluates them.
# ---------------------------------------------------------------------------------------------

# PyTorch's SELU constants (Klambauer et al. 2017)
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _activate(input, inplace, formula):
    """``formula(input)``, or with ``inplace=True`` ``input`` overwritten with it (what
    PyTorch's in-place activations return). The formula then reads a clone: its ops save
    their operands for the backward pass, and overwriting the one they saved would make
    that pass refuse (PyTorch's fused in-place ops save their result instead)."""
    if not inplace:
        return formula(input)
    return input.copy_(formula(input.clone() if input.requires_grad else input))


def _as_it_is(t):
    """A handle on t's value and node as they are now, which an in-place change of t then
    leaves alone: what the node of that change lists as its input."""
    if t._tape is None:
        return t
    return _elementwise._new_result(t._tape, t._r, t._value)


def _named_in_place(out, name, before):
    """``out``, a tensor an op built from other ops changed in place, shown as PyTorch's one
    node for that op (``ThresholdBackward1``), listing ``before``'s node (``_as_it_is``).  A
    view changed in place keeps the node its base's change gives it (AsStridedBackward0),
    as in PyTorch."""
    if type(out._alias) is _ViewOf:
        return out
    return _named(out, name, before)


def _activation(input, inplace, name, code, c=0.0, params=None, in_place_code=None):
    """One activation op of the table (``ops/activation.py``); with ``inplace=True``
    written into ``input`` and recorded as op ``in_place_code`` (by default ``code``
    itself), as PyTorch records ``hardtanh_`` as ``HardtanhBackward0`` and ``elu_`` as
    ``EluBackward1``."""
    if inplace:
        return _inplace.activation_(input, name, in_place_code or code, c, params)
    return _elementwise.activation(code, input, c, params)


def _refused_in_place(inplace, slope):
    """PyTorch's in-place elu, celu and leaky_relu compute their gradient from the result,
    which a negative slope makes ambiguous (its backward raises): those are computed out of
    place here and written back, with the out-of-place gradient."""
    return inplace and slope < 0


def gelu(input, approximate="none"):
    """Gaussian error linear unit: ``x * Phi(x)`` with ``Phi`` the standard normal CDF, or its
    tanh approximation with ``approximate="tanh"``.

    Shape: that of ``input``.

    Example:
        >>> F.gelu(tg.tensor([-1.0, 0.0, 1.0]))
        tensor([-0.1587,  0.0000,  0.8413])
        >>> F.gelu(tg.tensor([1.0]), approximate="tanh")
        tensor([0.8412])
    """
    if approximate == "none":
        return _elementwise.activation(_ops.GELU, input)
    if approximate == "tanh":
        return _elementwise.activation(_ops.GELU_TANH, input)
    raise RuntimeError("approximate argument must be either none or tanh.")


def silu(input, inplace=False):
    """Sigmoid linear unit (swish): ``x * sigmoid(x)``.

    Shape: that of ``input``.

    Example:
        >>> F.silu(tg.tensor([-1.0, 0.0, 2.0]))
        tensor([-0.2689,  0.0000,  1.7616])
    """
    return _activation(input, inplace, "silu_", _ops.SILU)


def elu(input, alpha=1.0, inplace=False):
    """Exponential linear unit: ``x`` for ``x > 0``, ``alpha * (exp(x) - 1)`` otherwise.

    Shape: that of ``input``.

    Example:
        >>> F.elu(tg.tensor([-1.0, 0.0, 2.0]))
        tensor([-0.6321,  0.0000,  2.0000])
    """
    params = (float(alpha), 1.0)
    if _refused_in_place(inplace, alpha):
        return _activate(input, True, lambda x: _elementwise.activation(_ops.ELU, x, 1.0, params))
    return _activation(input, inplace, "elu_", _ops.ELU, 1.0, params, _ops.ELU_RESULT)


def selu(input, inplace=False):
    """Scaled ELU with PyTorch's fixed constants: ``scale * elu(x, alpha)``, ``alpha`` ~ 1.6733
    and ``scale`` ~ 1.0507.

    Shape: that of ``input``.

    Example:
        >>> F.selu(tg.tensor([-1.0, 0.0, 2.0]))
        tensor([-1.1113,  0.0000,  2.1014])
    """
    # (PyTorch's selu is its elu with a scale: an EluBackward0 node, EluBackward1 in place)
    return _activation(input, inplace, "selu_", _ops.ELU, _SELU_SCALE,
                       (_SELU_ALPHA * _SELU_SCALE, 1.0), _ops.ELU_RESULT)


def celu(input, alpha=1.0, inplace=False):
    """Continuously differentiable ELU: ``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``.

    Shape: that of ``input``.

    Example:
        >>> F.celu(tg.tensor([-1.0, 0.0, 2.0]), alpha=2.0)
        tensor([-0.7869,  0.0000,  2.0000])
    """
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    c, params = 1.0 / float(np.float32(alpha)), (float(alpha), 1.0 / float(alpha))
    if _refused_in_place(inplace, alpha):
        return _activate(input, True, lambda x: _elementwise.activation(_ops.CELU, x, c, params))
    return _activation(input, inplace, "celu_", _ops.CELU, c, params, _ops.CELU_RESULT)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``x`` for ``x > 0``, ``negative_slope * x`` otherwise.

    Shape: that of ``input``.

    Example:
        >>> F.leaky_relu(tg.tensor([-2.0, 0.0, 3.0]), negative_slope=0.1)
        tensor([-0.2000,  0.0000,  3.0000])
    """
    slope = float(negative_slope)
    if _refused_in_place(inplace, slope):
        return _activate(input, True, lambda x: _elementwise.activation(_ops.LEAKY_RELU, x, slope))
    return _activation(input, inplace, "leaky_relu_", _ops.LEAKY_RELU, slope,
                       in_place_code=_ops.LEAKY_RELU_RESULT)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: ``x`` above 0; ``a * x`` at or below 0, with ``a`` drawn from
    uniform(lower, upper) for each such element while ``training`` (PyTorch's draws, in
    order), and ``(lower + upper) / 2`` otherwise.  One node, ``RreluWithNoiseBackward0``,
    whose gradient is the slope used.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> F.rrelu(tg.tensor([-1.0, 2.0, -3.0]), training=True)
        tensor([-0.3271,  2.0000, -0.8174])
        >>> F.rrelu(tg.tensor([-1.0, 2.0]))
        tensor([-0.2292,  2.0000])
    """
    return _rrelu(input, lower, upper, training, inplace, _generator())


def _rrelu(input, lower, upper, training, inplace, stream):
    """``rrelu`` drawing its slopes from ``stream`` (tapegrad.rrelu takes a generator)."""
    lower, upper = float(lower), float(upper)
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    before = _as_it_is(input) if inplace else input
    if not training:
        out = leaky_relu(input, (lower + upper) / 2, inplace)
    else:
        if _state.trace is not None:
            # which elements draw a slope depends on their signs: a replay must not reuse
            # them (nor skip the draws)
            _state.trace.opaque("rrelu in training draws a slope per element <= 0")
        x = input._value
        hit = ~(x > 0.0)                    # (NaN draws nothing and passes through)
        hit &= ~np.isnan(x)
        noise = np.ones(x.shape, np.float64)
        # (ATen's per-element uniform_real_distribution rounds the product and the sum
        # apart, unlike uniform_'s fused kernel: checked bit for bit against torch)
        u = stream.random(int(np.count_nonzero(hit)))
        noise[hit] = u * (upper - lower) + lower
        noise = _constant(noise)
        out = input.mul_(noise) if inplace else input * noise
    return _named_in_place(out, "RreluWithNoiseBackward1", before) if inplace else \
        _named(out, "RreluWithNoiseBackward0", input)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    """``rrelu`` in place: ``input`` is overwritten and returned.

    Example:
        >>> x = tg.tensor([-1.0, 2.0])
        >>> _ = F.rrelu_(x)
        >>> x
        tensor([-0.2292,  2.0000])
    """
    return rrelu(input, lower, upper, training, inplace=True)


def relu_(input):
    """``relu`` in place: ``input`` is overwritten and returned (``ReluBackward0``).

    Example:
        >>> x = tg.tensor([-1.0, 2.0])
        >>> F.relu_(x) is x, x
        (True, tensor([0., 2.]))
    """
    return relu(input, inplace=True)


def elu_(input, alpha=1.0):
    """``elu`` in place: ``input`` is overwritten and returned (``EluBackward1``).

    Example:
        >>> x = tg.tensor([-1.0, 2.0])
        >>> _ = F.elu_(x); x
        tensor([-0.6321,  2.0000])
    """
    return elu(input, alpha, inplace=True)


def selu_(input):
    """``selu`` in place: ``input`` is overwritten and returned (``EluBackward1``).

    Example:
        >>> x = tg.tensor([-1.0, 2.0])
        >>> _ = F.selu_(x); x
        tensor([-1.1113,  2.1014])
    """
    return selu(input, inplace=True)


def celu_(input, alpha=1.0):
    """``celu`` in place: ``input`` is overwritten and returned (``CeluBackward1``).

    Example:
        >>> x = tg.tensor([-1.0, 2.0])
        >>> _ = F.celu_(x, 2.0); x
        tensor([-0.7869,  2.0000])
    """
    return celu(input, alpha, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    """``leaky_relu`` in place: ``input`` is overwritten and returned (``LeakyReluBackward1``).

    Example:
        >>> x = tg.tensor([-1.0, 2.0])
        >>> _ = F.leaky_relu_(x, 0.1); x
        tensor([-0.1000,  2.0000])
    """
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """``hardtanh`` in place: ``input`` is overwritten and returned (``HardtanhBackward0``).

    Example:
        >>> x = tg.tensor([-3.0, 0.5, 2.0])
        >>> _ = F.hardtanh_(x); x
        tensor([-1.0000,  0.5000,  1.0000])
    """
    return hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input, threshold, value):
    """``threshold`` in place: ``input`` is overwritten and returned.

    Example:
        >>> x = tg.tensor([-1.0, 0.5, 2.0])
        >>> _ = F.threshold_(x, 0.5, -9.0); x
        tensor([-9., -9.,  2.])
    """
    return globals()["threshold"](input, threshold, value, inplace=True)


def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold``
    (where the two agree to float precision). One recorded op (``SoftplusBackward0``).

    Shape: that of ``input``.

    Example:
        >>> F.softplus(tg.tensor([-1.0, 0.0, 30.0]))
        tensor([ 0.3133,  0.6931, 30.0000])
    """
    return _elementwise.softplus(input, beta=beta, threshold=threshold)


def mish(input, inplace=False):
    """``x * tanh(softplus(x))``.

    Shape: that of ``input``.

    Example:
        >>> F.mish(tg.tensor([-1.0, 0.0, 1.0]))
        tensor([-0.3034,  0.0000,  0.8651])
    """
    return _activation(input, inplace, "mish_", _ops.MISH)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``input`` clipped to ``[min_val, max_val]``.

    Shape: that of ``input``.

    Example:
        >>> F.hardtanh(tg.tensor([-2.0, 0.5, 3.0]))
        tensor([-1.0000,  0.5000,  1.0000])
    """
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _activation(input, inplace, "hardtanh_", _ops.HARDTANH, 0.0,
                       (float(min_val), float(max_val)))


def relu6(input, inplace=False):
    """``min(max(x, 0), 6)``: ``hardtanh(x, 0, 6)``.

    Shape: that of ``input``.

    Example:
        >>> F.relu6(tg.tensor([-1.0, 3.0, 7.0]))
        tensor([0., 3., 6.])
    """
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input, inplace=False):
    """``relu6(x + 3) / 6``: 0 below -3, 1 above 3, linear in between.

    Shape: that of ``input``.

    Example:
        >>> F.hardsigmoid(tg.tensor([-4.0, 0.0, 1.5]))
        tensor([0.0000, 0.5000, 0.7500])
    """
    return _activation(input, inplace, "hardsigmoid_", _ops.HARDSIGMOID)


def hardswish(input, inplace=False):
    """``x * relu6(x + 3) / 6``: 0 below -3, ``x`` above 3. The gradient strictly inside
    ``(-3, 3)`` is ``x / 3 + 1/2``; at -3 it is 0 and at 3 it is 1, as in PyTorch.

    Shape: that of ``input``.

    Example:
        >>> F.hardswish(tg.tensor([-4.0, 1.0, 4.0]))
        tensor([-0.0000,  0.6667,  4.0000])
    """
    return _activation(input, inplace, "hardswish_", _ops.HARDSWISH)


def softsign(input):
    """``x / (1 + |x|)``.

    Shape: that of ``input``.

    Example:
        >>> F.softsign(tg.tensor([-1.0, 0.0, 3.0]))
        tensor([-0.5000,  0.0000,  0.7500])
    """
    # (input.abs(), as PyTorch: a list gets its AttributeError, no attribute 'abs')
    return input / (input.abs() + 1)


def logsigmoid(input):
    """``log(sigmoid(x))``, computed as ``min(x, 0) - log(1 + exp(-|x|))``, which neither
    overflows nor loses the small values; the gradient at 0 is 1/2 as in PyTorch.

    Shape: that of ``input``.

    Example:
        >>> F.logsigmoid(tg.tensor([-100.0, 0.0, 2.0]))
        tensor([-100.0000,   -0.6931,   -0.1269])
    """
    return _elementwise.activation(_ops.LOG_SIGMOID, input)


def tanhshrink(input):
    """``x - tanh(x)``.

    Shape: that of ``input``.

    Example:
        >>> F.tanhshrink(tg.tensor([0.0, 1.0]))
        tensor([0.0000, 0.2384])
    """
    # (input.tanh(), as PyTorch: a list gets its AttributeError, no attribute 'tanh')
    return input - input.tanh()


def _check_lambd(lambd):
    if lambd < 0:
        # PyTorch states the range of the input's dtype: float64 here
        raise RuntimeError("lambda must be in range [0, 1.79769e+308] for input dtype Double, "
                           f"but found {float(lambd):g}")


def softshrink(input, lambd=0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, 0 in between.

    Shape: that of ``input``.

    Example:
        >>> F.softshrink(tg.tensor([-1.0, 0.2, 2.0]))
        tensor([-0.5000,  0.0000,  1.5000])
    """
    _check_lambd(lambd)
    return _elementwise.activation(_ops.SOFTSHRINK, input, float(lambd))


def hardshrink(input, lambd=0.5):
    """``x`` where ``|x| > lambd``, 0 elsewhere.

    Shape: that of ``input``.

    Example:
        >>> F.hardshrink(tg.tensor([-1.0, 0.2, 2.0]))
        tensor([-1.,  0.,  2.])
    """
    return _elementwise.activation(_ops.HARDSHRINK, input, float(lambd))


def threshold(input, threshold, value, inplace=False):
    """``x`` where ``x > threshold``, ``value`` elsewhere.

    Shape: that of ``input``.

    Example:
        >>> F.threshold(tg.tensor([-1.0, 0.5, 2.0]), 0.5, -9.0)
        tensor([-9., -9.,  2.])
    """
    before = _as_it_is(input) if inplace else input
    out = _activate(input, inplace, lambda x: tg.where(x <= threshold, float(value), x))
    return _named_in_place(out, "ThresholdBackward1", before) if inplace else \
        _named(out, "ThresholdBackward0", input)


def prelu(input, weight):
    """``x`` for ``x > 0``, ``weight * x`` otherwise, with a learnt slope: one ``weight`` for
    all channels, or one per channel (dimension 1 of ``input``).

    Shape: that of ``input``; weight ``(1,)`` or ``(C,)``.

    ``grad_fn``: ``<PreluKernelBackward0>``.

    Example:
        >>> F.prelu(tg.tensor([[-2.0, 3.0]]), tg.tensor([0.25]))
        tensor([[-0.5000,  3.0000]])
    """
    channels = input.shape[1] if input.ndim >= 2 else (input.shape[0] if input.ndim else 1)
    if weight.numel() != 1:
        if weight.numel() != channels:
            raise RuntimeError(
                "Mismatch of parameter numbers and input channel size. Found parameter "
                f"numbers = {weight.numel()} and channel size = {channels}.")
        if input.ndim >= 2:
            weight = weight.reshape(_channel_shape(input))
    return _named(tg.where(input > 0.0, input, weight * input), "PreluKernelBackward0", input,
                  weight)


def glu(input, dim=-1):
    """Gated linear unit: split ``input`` in halves ``a, b`` along ``dim``, ``a * sigmoid(b)``.

    Shape: ``input``'s with ``dim`` halved.

    Example:
        >>> F.glu(tg.tensor([[1.0, 2.0, 0.0, 100.0]]))
        tensor([[0.5000, 2.0000]])
    """
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = _wrap_dim(dim, input.ndim)
    if input.shape[d] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size "
                           f"{input.shape[d]}")
    first, second = tg.chunk(input, 2, d)
    return _named(first * tg.sigmoid(second), "GluBackward0", input)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-input, dim)``.

    Shape: that of ``input``.

    Example:
        >>> F.softmin(tg.tensor([[1.0, 2.0, 3.0]]), dim=1)
        tensor([[0.6652, 0.2447, 0.0900]])
    """
    if dim is None:
        dim = _implicit_dim("softmin", input.ndim, _stacklevel)
    if dtype is not None:
        input = input.to(dtype)
    return tg.softmax(-input, dim)


# ---------------------------------------------------------------------------------------------
# More losses
# ---------------------------------------------------------------------------------------------


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``0.5 * d**2`` where ``d = |input - target| < delta``, ``delta * (d - delta / 2)``
    beyond: quadratic near the target, linear (less sensitive to outliers) far from it.
    ``weight`` (optional) scales each element's loss before the reduction.

    Shape: as for ``mse_loss``.

    Example:
        >>> F.huber_loss(tg.tensor([0.5, 3.0]), tg.zeros(2), reduction="none")
        tensor([0.1250, 2.5000])
    """
    _check_reduction(reduction)
    _warn_size(input, target)
    diff = input - target
    if not delta > 0:   # (after the broadcast: a size mismatch is PyTorch's first error)
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    distance = tg.abs(diff)
    loss = tg.where(distance < delta, 0.5 * diff * diff, delta * (distance - 0.5 * delta))
    if weight is not None:
        loss = loss * weight
    return _named(_reduce(loss, reduction), "HuberLossBackward0", input, target)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """``0.5 * d**2 / beta`` where ``d = |input - target| < beta``, ``d - beta / 2`` beyond
    (``l1_loss`` for ``beta=0``): ``huber_loss / beta``.

    Shape: as for ``mse_loss``.

    Example:
        >>> F.smooth_l1_loss(tg.tensor([0.5, 3.0]), tg.zeros(2), reduction="none")
        tensor([0.1250, 2.5000])
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0.0:
        return l1_loss(input, target, reduction=reduction)
    _warn_size(input, target)
    diff = input - target
    distance = tg.abs(diff)
    loss = tg.where(distance < beta, 0.5 * diff * diff / beta, distance - 0.5 * beta)
    return _named(_reduce(loss, reduction), "SmoothL1LossBackward0", input, target)


def _xlogx(t):
    """``t * log(t)`` with 0 at ``t == 0`` (nan below 0, as ``xlogy``); the log never sees 0,
    so the unused branch's gradient is finite."""
    zero = t == 0.0
    return tg.where(zero, 0.0, t * tg.log(tg.where(zero, 1.0, t)))


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Kullback-Leibler divergence of ``target`` from the distribution whose log-probabilities
    are ``input``: ``target * (log(target) - input)`` (0 where target is 0), or
    ``exp(target) * (target - input)`` with ``log_target``. ``reduction="batchmean"`` divides
    the sum by the batch size (the true KL divergence); ``"mean"`` divides by the number of
    elements, with PyTorch's warning.

    Shape: ``()``, or the broadcast shape with ``reduction="none"``.

    Example:
        >>> logq = tg.log(tg.tensor([[0.5, 0.5]]))
        >>> F.kl_div(logq, tg.tensor([[0.9, 0.1]]), reduction="batchmean")
        tensor(0.3681)
    """
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support "
            "size.'batchmean' divides only by the batch size, and aligns with the KL div math "
            "definition.'mean' will be changed to behave the same as 'batchmean' in the next "
            "major release.", stacklevel=2)
    if reduction not in _REDUCTIONS + ("batchmean",):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if not (_floating(input) and _floating(target)):
        raise RuntimeError("kl_div: Integral inputs not supported.")
    if log_target:
        loss = tg.exp(target) * (target - input)
    else:
        loss = _xlogx(target) - target * input
    if reduction == "batchmean":
        total = loss.sum()
        return total / input.shape[0] if input.ndim != 0 else total
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """Negative log-likelihood of counts ``target`` under a Poisson distribution with rate
    ``exp(input)`` (``log_input=True``) or ``input``: ``exp(input) - target * input``, or
    ``input - target * log(input + eps)``. ``full`` adds Stirling's approximation of
    ``log(target!)`` for targets above 1.

    Shape: ``()``, or the broadcast shape with ``reduction="none"``.

    Example:
        >>> F.poisson_nll_loss(tg.tensor([0.0, 1.0]), tg.tensor([1.0, 2.0]))
        tensor(0.8591)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_input:
        loss = tg.exp(input) - target * input
    else:
        loss = input - target * tg.log(input + eps)
    if full:
        stirling = (target * tg.log(target) - target
                    + 0.5 * tg.log(2.0 * math.pi * target))
        loss = loss + tg.where(target <= 1.0, 0.0, stirling)
    return _reduce(loss, reduction)


def _raised_to_keeping_gradient(t, low):
    """``max(t, low)`` whose gradient is that of ``t`` everywhere: what PyTorch's in-place
    clamp under ``no_grad`` gives. The lift is computed under ``no_grad`` only when some
    element is below ``low`` (a compiled call guards that count, and runs such calls
    eagerly)."""
    if not _count(t < low):
        return t
    with tg.no_grad():
        lift = tg.clamp(t, min=low) - t
    return t + lift


def _count(condition):
    """How many elements of a bool tensor are true, read through a recorded sum so that a
    compiled call guards the count."""
    return condition.double().sum().item()


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """Negative log-likelihood of ``target`` under normal distributions with means ``input``
    and variances ``var``: ``0.5 * (log(var) + (input - target)**2 / var)`` (plus
    ``0.5 * log(2 pi)`` with ``full``). ``var`` may have one dimension fewer than ``input`` or
    one dimension of size 1 (one variance shared along it), or be a float. Variances below
    ``eps`` count as ``eps`` with their gradient passed through unchanged, as in PyTorch.

    Shape: ``()``, or the input's shape with ``reduction="none"``.

    Example:
        >>> F.gaussian_nll_loss(tg.tensor([0.0, 1.0]), tg.tensor([1.0, 1.0]), tg.ones(2))
        tensor(0.2500)
    """
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = tg.full(tuple(input.shape), float(var))
    elif _count(var < 0.0):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (input.ndim == var.ndim and sum(
                b for a, b in zip(input.shape, var.shape) if a != b) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in _REDUCTIONS:
        raise ValueError(reduction + " is not valid")
    # PyTorch clamps a clone under no_grad: the value is eps, the gradient that of var
    var = _raised_to_keeping_gradient(var, eps)
    diff = input - target
    loss = 0.5 * (tg.log(var) + diff * diff / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """``max(0, -target * (input1 - input2) + margin)``: with ``target`` 1 (-1), ``input1``
    should rank above (below) ``input2`` by at least ``margin``.

    Shape: input1, input2 and target of one shape (or broadcastable) -> ``()``, or that shape
    with ``reduction="none"``.

    Example:
        >>> F.margin_ranking_loss(tg.tensor([1.0, 0.0]), tg.tensor([0.0, 1.0]),
        ...                       tg.tensor([1.0, 1.0]), margin=0.5)
        tensor(0.7500)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(
            "margin_ranking_loss : All input tensors should have same dimension but got sizes: "
            f"input1: {input1.shape}, input2: {input2.shape}, target: {target.shape} ")
    loss = tg.clamp_min(-target * (input1 - input2) + margin, 0.0)
    return _reduce(loss, reduction)


# PyTorch's EPSILON of cosine_embedding_loss is a float: 1e-12 rounded to float32 (1 - 4e-9
# times 1e-12), which moves the cosine of vectors of norm ~1e-6 by ~1e-9
_COSINE_EPSILON = float(np.float32(1e-12))


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """``1 - cos(input1, input2)`` where ``target`` is 1, ``max(0, cos - margin)`` where it
    is -1 (0 for other targets), with the cosine along the last dimension computed as
    PyTorch does (``1e-12``, rounded to float32 as there, added to each squared norm).

    Shape: inputs ``(N, D)`` or ``(D,)``, target ``(N,)`` or ``()`` -> ``()`` (the target's
    shape with ``reduction="none"``).

    Example:
        >>> a = tg.tensor([[1.0, 0.0], [1.0, 1.0]])
        >>> b = tg.tensor([[0.0, 1.0], [1.0, 1.0]])
        >>> F.cosine_embedding_loss(a, b, tg.tensor([1.0, -1.0]), reduction="none")
        tensor([1.0000, 1.0000])
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if input1.ndim != input2.ndim:
        raise RuntimeError(f"cosine_embedding_loss : All input tensors should have same "
                           f"dimension but got sizes: input1: {input1.shape}, input2: "
                           f"{input2.shape}, target: {target.shape} ")
    if input1.ndim not in (1, 2) or target.ndim != input1.ndim - 1:
        raise RuntimeError(f"{input1.ndim}D target tensor expects {input1.ndim - 1}D input "
                           f"tensors, but found inputs with sizes {input1.shape} and "
                           f"{input2.shape}.")
    dim = input1.ndim - 1
    dot = (input1 * input2).sum(dim)
    squared1 = (input1 * input1).sum(dim) + _COSINE_EPSILON
    squared2 = (input2 * input2).sum(dim) + _COSINE_EPSILON
    cos = dot / tg.sqrt(squared1 * squared2)
    positive = tg.where(target == 1, 1.0 - cos, 0.0)
    negative = tg.where(target == -1, tg.clamp_min(cos - margin, 0.0), 0.0)
    return _reduce(positive + negative, reduction)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The ``p``-norm of ``x1 - x2 + eps`` along the last dimension (``eps`` keeps the
    gradient finite where the two are equal).

    Shape: ``(N, D)`` and ``(N, D)`` (or broadcastable, or ``(D,)``) -> ``(N,)``.

    Example:
        >>> F.pairwise_distance(tg.tensor([[3.0, 0.0]]), tg.tensor([[0.0, 4.0]]), eps=0.0)
        tensor([5.])
    """
    dim = max(x1.ndim, x2.ndim) - 1
    if dim < 0:
        return tg.abs(x1 - x2 + eps) if p != 0 else ((x1 - x2 + eps) != 0).double()
    # PyTorch's nodes: its C++ add of a number (AddBackward1) and its norm (NormBackward1)
    diff = x1 - x2
    shifted = _named(diff + eps, "AddBackward1", diff)
    return _named(tg.norm(shifted, p, dim, keepdim), "NormBackward1", shifted)


def pdist(input, p=2):  # noqa: A002
    """The ``p``-norm distance between each pair of rows ``i < j`` of an ``(N, M)`` matrix,
    as a flat ``(N (N - 1) / 2,)`` tensor in row order (``tapegrad.pdist``; one node,
    ``PdistBackward0``).

    Example:
        >>> F.pdist(tg.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]), p=1)
        tensor([7., 1., 6.])
    """
    return tg.pdist(input, p)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """``max(d(anchor, positive) - d(anchor, negative) + margin, 0)`` with ``d`` the
    ``pairwise_distance``; ``swap`` uses the smaller of ``d(anchor, negative)`` and
    ``d(positive, negative)``.

    Shape: three ``(N, D)`` (or ``(D,)``) -> ``()`` (``(N,)`` with ``reduction="none"``).

    Example:
        >>> a, pos, neg = tg.tensor([[0.0, 0.0]]), tg.tensor([[1.0, 0.0]]), tg.tensor([[0.0, 1.5]])
        >>> F.triplet_margin_loss(a, pos, neg, eps=0.0)
        tensor(0.5000)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    dims = (anchor.ndim, positive.ndim, negative.ndim)
    if len(set(dims)) != 1:
        raise RuntimeError(
            "The anchor, positive, and negative tensors are expected to have the same number "
            f"of dimensions, but got: anchor {dims[0]}D, positive {dims[1]}D, and negative "
            f"{dims[2]}D inputs")
    to_positive = pairwise_distance(anchor, positive, p, eps)
    to_negative = pairwise_distance(anchor, negative, p, eps)
    if swap:
        to_negative = tg.minimum(to_negative, pairwise_distance(positive, negative, p, eps))
    return _reduce(tg.clamp_min(margin + to_positive - to_negative, 0.0), reduction)


# ---------------------------------------------------------------------------------------------
# Normalisation and distances
# ---------------------------------------------------------------------------------------------


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input / max(norm_p(input, dim), eps)``: unit ``p``-norm slices along ``dim``.

    Shape: that of ``input``.

    Example:
        >>> F.normalize(tg.tensor([[3.0, 4.0], [0.0, 0.0]]))
        tensor([[0.6000, 0.8000],
                [0.0000, 0.0000]])
    """
    if out is not None:
        raise NotImplementedError("normalize(out=...) is not supported")
    return input / tg.clamp_min(tg.norm(input, p, dim, keepdim=True), eps).expand_as(input)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``sum(x1 * x2) / (max(|x1|, eps) * max(|x2|, eps))`` along ``dim``, inputs broadcast;
    each input is divided by its clamped norm first, as PyTorch does, and, as there, a norm
    raised to ``eps`` keeps its gradient.

    Shape: the broadcast shape without ``dim``.

    Example:
        >>> F.cosine_similarity(tg.tensor([[1.0, 0.0], [1.0, 1.0]]), tg.tensor([[1.0, 1.0]]))
        tensor([0.7071, 1.0000])
    """
    shape = tuple(_elementwise.broadcast_shape(tuple(x1.shape), tuple(x2.shape)))
    x1, x2 = x1.expand(*shape), x2.expand(*shape)
    norm1 = _raised_to_keeping_gradient(tg.norm(x1, 2, dim, keepdim=True), eps)
    norm2 = _raised_to_keeping_gradient(tg.norm(x2, 2, dim, keepdim=True), eps)
    return ((x1 / norm1) * (x2 / norm2)).sum(dim)


def _centred(input, dims):
    """``input - mean`` over ``dims``, and the mean: corrected once by the mean of the
    residuals, which is the exact mean of equal values and the nearest to the mean of nearly
    equal ones.  A normalised group of such values is its residuals over ``sqrt(eps)``
    (~3e-3), so the first mean's rounding showed ~300 times larger, and differently in a
    compiled replay, which sums in another order than NumPy."""
    mean = input.mean(dims, keepdim=True)
    mean = mean + (input - mean).mean(dims, keepdim=True)
    return input - mean, mean


def _normalized(input, dims, eps):
    """``(input - mean) / sqrt(var + eps)`` with the mean and the biased variance over
    ``dims``."""
    centred, _ = _centred(input, dims)
    variance = (centred * centred).mean(dims, keepdim=True)
    return centred / tg.sqrt(variance + eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the last ``len(normalized_shape)`` dimensions (which must be
    ``normalized_shape``) to mean 0 and variance 1, then scale by ``weight`` and shift by
    ``bias`` (both of shape ``normalized_shape``).

    Shape: that of ``input``.

    Example:
        >>> F.layer_norm(tg.tensor([[1.0, 2.0, 3.0]]), (3,))
        tensor([[-1.2247,  0.0000,  1.2247]])
    """
    normalized_shape = ((normalized_shape,) if isinstance(normalized_shape, int)
                        else tuple(normalized_shape))
    k = len(normalized_shape)
    if k == 0 or tuple(input.shape[input.ndim - k:]) != normalized_shape or input.ndim < k:
        expected = ", ".join(["*"] + [str(s) for s in normalized_shape])
        raise RuntimeError(
            f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
            f"[{expected}], but got input of size{list(input.shape)}")
    out = _normalized(input, tuple(range(input.ndim - k, input.ndim)), eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return _named(out, "NativeLayerNormBackward0", input, weight, bias)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``input / sqrt(mean(input**2) + eps)`` over the last ``len(normalized_shape)``
    dimensions, times ``weight``; ``eps`` defaults to float64's machine epsilon, as PyTorch's
    does for a float64 input.

    Shape: that of ``input``.

    Example:
        >>> F.rms_norm(tg.tensor([[3.0, -4.0]]), (2,))
        tensor([[ 0.8485, -1.1314]])
    """
    normalized_shape = ((normalized_shape,) if isinstance(normalized_shape, int)
                        else tuple(normalized_shape))
    k = len(normalized_shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != normalized_shape:
        expected = ", ".join(["*"] + [str(s) for s in normalized_shape])
        raise RuntimeError(
            f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
            f"[{expected}], but got input of size{list(input.shape)}")
    eps = float(np.finfo(np.float64).eps) if eps is None else eps
    dims = tuple(range(input.ndim - k, input.ndim))
    out = input * tg.rsqrt((input * input).mean(dims, keepdim=True) + eps)
    return out if weight is None else out * weight


def _channel_shape(input):
    """The shape that broadcasts a per-channel ``(C,)`` tensor against ``(N, C, *)``."""
    return (1, -1) + (1,) * (input.ndim - 2)


def _group_norm(input, num_groups, weight, bias, eps):
    if input.ndim < 2:
        raise RuntimeError(
            f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    n, c = input.shape[0], input.shape[1]
    if c % num_groups:
        raise RuntimeError(
            "Expected number of channels in input to be divisible by num_groups, but got input "
            f"of shape {list(input.shape)} and num_groups={num_groups}")
    _verify_batch_size([n * c // num_groups, num_groups] + list(input.shape[2:]))
    grouped = input.reshape(n, num_groups, -1)
    out = _normalized(grouped, 2, eps).reshape(tuple(input.shape))
    if weight is not None:
        out = out * weight.reshape(_channel_shape(input))
    if bias is not None:
        out = out + bias.reshape(_channel_shape(input))
    return out


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Split the channels of ``(N, C, *)`` into ``num_groups`` groups and normalise each
    group of each sample over its channels and positions; then scale and shift each channel
    by ``weight`` and ``bias`` (``(C,)``).

    Shape: that of ``input``.

    Example:
        >>> F.group_norm(tg.tensor([[[1.0], [3.0], [5.0], [5.0]]]), 2).flatten()
        tensor([-1.0000,  1.0000,  0.0000,  0.0000])
    """
    return _named(_group_norm(input, num_groups, weight, bias, eps),
                  "NativeGroupNormBackward0", input, weight, bias)


def _verify_batch_size(size):
    # the values per channel: every dimension but the channel dimension (1)
    if size[0] * math.prod(size[2:]) == 1:
        raise ValueError(
            f"Expected more than 1 value per channel when training, got input size {size}")


def _check_batch_norm_arguments(channels, training, **per_channel):
    """PyTorch's checks of batch norm's per-channel tensors, in its order: each one given
    holds one value per channel, and evaluation needs the running statistics."""
    for name, tensor in per_channel.items():
        if tensor is None:
            if not training and name.startswith("running"):
                raise RuntimeError(f"{name} must be defined in evaluation mode")
        elif tensor.numel() != channels:
            raise RuntimeError(f"{name} should contain {channels} elements not "
                               f"{tensor.numel()}")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalise each channel of ``(N, C, *)`` with statistics over the batch and positions
    (``training``) or with ``running_mean`` and ``running_var``; then scale and shift each
    channel by ``weight`` and ``bias``. In training, given running statistics are updated in
    place: ``running = (1 - momentum) * running + momentum * batch`` with the unbiased batch
    variance, as PyTorch does.

    Shape: that of ``input``.

    Example:
        >>> mean, var = tg.zeros(2), tg.ones(2)
        >>> F.batch_norm(tg.tensor([[1.0, 2.0], [3.0, 6.0]]), mean, var, training=True)
        tensor([[-1.0000, -1.0000],
                [ 1.0000,  1.0000]])
        >>> mean, var
        (tensor([0.2000, 0.4000]), tensor([1.1000, 1.7000]))
    """
    if training:
        _verify_batch_size(input.shape)
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected input of at least 2 dimensions (got "
                         f"{input.ndim}D input)")
    _check_batch_norm_arguments(input.shape[1], training, running_mean=running_mean,
                                running_var=running_var, weight=weight, bias=bias)
    channel = _channel_shape(input)
    dims = (0,) + tuple(range(2, input.ndim))
    if training:
        centred, mean = _centred(input, dims)
        variance = (centred * centred).mean(dims, keepdim=True)
        out = centred / tg.sqrt(variance + eps)
        if running_mean is not None or running_var is not None:
            count = input.numel() // input.shape[1]
            with tg.no_grad():
                if running_mean is not None:
                    running_mean.mul_(1.0 - momentum).add_(mean.reshape(-1) * momentum)
                if running_var is not None:
                    unbiased = variance.reshape(-1) * (count / (count - 1))
                    running_var.mul_(1.0 - momentum).add_(unbiased * momentum)
    else:
        out = (input - running_mean.reshape(channel)) / tg.sqrt(
            running_var.reshape(channel) + eps)
    if weight is not None:
        out = out * weight.reshape(channel)
    if bias is not None:
        out = out + bias.reshape(channel)
    return _named(out, "NativeBatchNormBackward0", input, weight, bias)


# ---------------------------------------------------------------------------------------------
# Embeddings, one-hot, padding, attention
# ---------------------------------------------------------------------------------------------


def _check_indices(indices, what):
    kind = indices._value.dtype.kind
    if kind not in "iu":
        name = {"f": "DoubleTensor", "b": "BoolTensor"}.get(kind, "Tensor")
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got tapegrad.{name} instead (while checking arguments for "
            f"{what})")


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` picked by the integer ``input``: a lookup table. The row
    ``padding_idx`` gets no gradient. ``max_norm`` first rescales (in place, without
    recording) each looked-up row whose ``norm_type``-norm exceeds it.

    Shape: input ``(*)`` int, weight ``(V, D)`` -> ``(*, D)``.

    Example:
        >>> table = tg.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
        >>> F.embedding(tg.tensor([[2, 1]]), table)
        tensor([[[3., 4.],
                 [1., 2.]]])
    """
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse are not supported")
    table = weight
    input = input if isinstance(input, tg.Tensor) else tg.tensor(np.asarray(input))
    _check_indices(input, "embedding")
    rows = weight.shape[0]
    if padding_idx is not None:
        if padding_idx > 0:
            assert padding_idx < rows, "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -rows, "Padding_idx must be within num_embeddings"
            padding_idx = rows + padding_idx
    if max_norm is not None:
        _check_rows(input._value, rows)
        _renorm_rows(weight, np.unique(input._value), max_norm, norm_type)
    if padding_idx is not None:
        # the padding row still gives its values, but no gradient reaches it
        keep = tg.from_numpy((np.arange(rows) != padding_idx).reshape(rows, 1))
        # (detach: a compiled call runs eagerly rather than freeze the row's values)
        weight = tg.where(keep, weight, weight.detach())
    if _traced(input):
        # the indices are a compiled function's data: rows picked by a one-hot product (one
        # term per output, so exact for finite weights), which a replay recomputes from new
        # indices; the range check is a guarded count
        outside = ((input < 0).double() + (input >= rows).double()).sum()
        if outside.item() != 0.0:
            raise IndexError("index out of range in self")
        return _named((input.unsqueeze(-1) == tg.arange(rows)).double() @ weight,
                      "EmbeddingBackward0", table)
    _check_rows(input._value, rows)
    return _named(weight[input], "EmbeddingBackward0", table)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,  # noqa: A002
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of ``weight``'s rows, without the intermediate
    embeddings.  A 2-d ``input`` is ``B`` bags of ``N`` indices; a 1-d one is cut into bags
    where ``offsets`` say (each bag's start; with ``include_last_offset`` one more offset
    closes the list, and, as in PyTorch, the last bag runs to the end of ``input``).
    ``per_sample_weights`` (``mode="sum"`` only) weigh each index; ``padding_idx`` entries
    are left out of their bag (and of a mean's count); an empty bag gives zeros.

    Shape: ``(B, embedding_dim)``.

    Example:
        >>> weight = tg.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        >>> F.embedding_bag(tg.tensor([0, 1, 2, 2]), weight, tg.tensor([0, 2]), mode="sum")
        tensor([[ 4.,  6.],
                [10., 12.]])
        >>> F.embedding_bag(tg.tensor([[0, 2]]), weight, mode="max")
        tensor([[5., 6.]])
    """
    input = input if isinstance(input, tg.Tensor) else tg.tensor(np.asarray(input))
    if weight._value.dtype.kind in "iu" and input.is_floating_point():
        warnings.warn("Argument order of nn.functional.embedding_bag was changed. "
                      "Usage `embedding_bag(weight, input, ...)` is deprecated, "
                      "and should now be `embedding_bag(input, weight, ...)`.", stacklevel=2)
        weight, input = input, weight
    if per_sample_weights is not None and input.shape != per_sample_weights.shape:
        raise ValueError(
            f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, "
            f"then it must have the same shape as the input ({input.shape})")
    if weight.ndim != 2:
        raise ValueError(
            f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if input.ndim == 2:
        if offsets is not None:
            # PyTorch's type shows as <class 'torch.Tensor'>: ours by its public name too
            kind = "<class 'tapegrad.Tensor'>" if type(offsets) is tg.Tensor else type(offsets)
            raise ValueError(
                "if input is 2D, then offsets has to be None, as input is treated is a "
                "mini-batch of fixed length sequences. However, found offsets of type "
                f"{kind}")
        offsets = np.arange(0, input.numel(), input.shape[1], dtype=np.int64)
        include_last_offset = False
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(
            f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if mode == "max":
        if scale_grad_by_freq:
            raise ValueError("max mode does not support scaling the gradient by the frequency")
        if sparse:
            raise ValueError("max mode does not support sparse weights")
    elif mode not in ("sum", "mean"):
        raise ValueError("mode has to be one of sum, mean or max")
    _check_indices(input, "embedding_bag")
    # the bags are worked out from the index values here: a compiled function guards them
    # (new indices record again rather than replay the old bags)
    read_value(input, "embedding_bag's indices")
    if isinstance(offsets, tg.Tensor):
        _check_indices(offsets, "embedding_bag")
        read_value(offsets, "embedding_bag's offsets")
        offsets = offsets._value
    idx = input._value.astype(np.int64)
    rows = weight.shape[0]
    bad = (idx < 0) | (idx >= rows)
    if bad.any():
        raise RuntimeError("embedding_bag: Expected idx >= 0 && idx < num_embeddings but "
                           f"found idx to be {idx[bad.argmax()]}")
    if max_norm is not None:
        _renorm_rows(weight, np.unique(idx), max_norm, norm_type)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. per_sample_weights is only "
            f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
            "on GitHub.")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError(
            "embedding_bag: scale_grad_by_freq and sparse are not supported")
    if padding_idx is not None:
        if not -rows <= padding_idx < rows:
            raise RuntimeError(f"padding_idx must be within the number of embeddings, -{rows} "
                               f"through {rows - 1}, but got {padding_idx}")
        padding_idx = padding_idx + rows if padding_idx < 0 else padding_idx
    starts, ends = _bag_bounds(np.asarray(offsets), idx.size, include_last_offset)
    bags = starts.size
    # every position that falls in a bag, in input order (PyTorch's summation order), with
    # its bag; padding entries drop out here, so they are not counted in a mean either
    lengths = ends - starts
    bag_of = np.repeat(np.arange(bags), lengths)
    positions = (np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
                 + np.repeat(starts, lengths)).astype(np.int64)
    if padding_idx is not None:
        keep = idx[positions] != padding_idx
        bag_of, positions = bag_of[keep], positions[keep]
    picked = idx[positions]
    dim = weight.shape[1]
    if mode == "max":
        out = _bag_max(weight, picked, bag_of, bags, dim)
    else:
        gathered = weight[tg.from_numpy(picked)]
        if per_sample_weights is not None:
            gathered = gathered * per_sample_weights[tg.from_numpy(positions)].unsqueeze(1)
        out = tg.zeros(bags, dim, dtype=weight.dtype).index_add(
            0, tg.from_numpy(bag_of), gathered)
        if mode == "mean":
            counts = np.maximum(np.bincount(bag_of, minlength=bags), 1)
            out = out / tg.from_numpy(counts.astype(weight._value.dtype).reshape(bags, 1))
    return _named(out, "EmbeddingBagBackward0", weight, per_sample_weights)


def _bag_bounds(offsets, n, include_last_offset):
    """Each bag's [start, end) in the flattened input, with PyTorch's checks of
    ``offsets``."""
    offsets = offsets.astype(np.int64)
    if offsets.size:
        if offsets[0] != 0:
            kind = "Int" if offsets.dtype.itemsize == 4 else "Long"
            raise RuntimeError(
                "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to "
                f"start from position 0. However, got {offsets[0]}\n[ tapegrad.{kind}Tensor{{}} ]")
        if offsets[-1] > n:
            raise RuntimeError(f"offsets[-1] can not be greater than input's length {n} but "
                               f"got offsets[-1] of {offsets[-1]}")
        if (np.diff(offsets) < 0).any():
            # PyTorch reads memory outside the bag here; an error is the one safe answer
            raise RuntimeError("embedding_bag: offsets have to be non-decreasing")
    if include_last_offset:
        # the last offset only says how many bags there are: as in PyTorch, the last bag
        # runs to the end of the input even where that offset is smaller
        if offsets.size < 2:
            return offsets[:0], offsets[:0]
        return offsets[:-1], np.append(offsets[1:-1], n).astype(np.int64)
    return offsets, np.append(offsets[1:], n).astype(np.int64)


def _bag_max(weight, picked, bag_of, bags, dim):
    """Per bag and column, the largest of the bag's rows; an empty bag gives zeros (and no
    gradient).  The bags are laid out as a padded (bags, longest, dim) gather whose maximum
    is a recorded op, so a compiled function replays it with new weights (the choice is
    not frozen at record time)."""
    counts = np.bincount(bag_of, minlength=bags)
    longest = int(counts.max()) if bags else 0
    filled = tg.from_numpy((counts > 0).reshape(bags, 1))
    if longest == 0:
        # no rows at all: zeros that still come from the weight, as PyTorch's node does
        return tg.where(filled, weight[tg.from_numpy(np.zeros((bags, dim), dtype=np.int64)),
                                       tg.from_numpy(np.zeros((bags, dim), dtype=np.int64))],
                        tg.zeros((), dtype=weight.dtype))
    slot = np.arange(picked.size) - np.repeat(np.cumsum(counts) - counts, counts)
    rows = np.zeros((bags, longest), dtype=np.int64)
    rows[bag_of, slot] = picked
    present = np.zeros((bags, longest, 1), dtype=bool)
    present[bag_of, slot] = True
    gathered = tg.where(tg.from_numpy(present), weight[tg.from_numpy(rows)],
                        tg.tensor(-math.inf, dtype=weight.dtype))
    out = gathered.max(dim=1).values
    return tg.where(filled, out, tg.zeros((), dtype=weight.dtype))


def _check_rows(index, rows):
    if index.size and (index.min() < 0 or index.max() >= rows):
        raise IndexError("index out of range in self")


def _renorm_rows(weight, rows, max_norm, norm_type):
    with tg.no_grad():
        for row in rows:
            norm = float(tg.norm(weight[int(row)], norm_type).item())
            if norm > max_norm:
                weight[int(row)] = weight[int(row)] * (max_norm / (norm + 1e-7))


def one_hot(tensor, num_classes=-1):
    """``(..., num_classes)`` int64 tensor with a 1 at each element's class index, 0
    elsewhere; ``num_classes=-1`` takes one more than the largest index.

    Shape: ``(*)`` -> ``(*, num_classes)``.

    Example:
        >>> F.one_hot(tg.tensor([0, 2]))
        tensor([[1, 0, 0],
                [0, 0, 1]])
    """
    if tensor._value.dtype != np.int64:
        raise RuntimeError(
            "one_hot is only applicable to index tensor of type LongTensor.")
    if tensor.numel() == 0:
        if num_classes == -1:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        return tg.zeros(*tensor.shape, num_classes, dtype=tg.int64)
    # the classes are compared with recorded ops; Python reads (and a compiled call
    # guards) only what decides the shape and the errors: the numbers of classes out of
    # range, which new classes leave at 0, and without num_classes the largest class
    if _count(tensor < 0):
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        largest = tensor.max()
        read_value(largest, "one_hot's number of classes")
        num_classes = int(largest.item()) + 1
    elif _count(tensor >= num_classes):
        raise RuntimeError("Class values must be smaller than num_classes.")
    # (a where of integers, not .long() of the comparison, which a compiled call runs eagerly)
    return tg.where(tensor.unsqueeze(-1) == tg.arange(num_classes), 1, 0)


def _pad_indices(size, before, after, mode):
    """Source index along one dimension for each output position of a reflect, replicate or
    circular pad."""
    positions = np.arange(-before, size + after)
    if mode == "replicate":
        return np.clip(positions, 0, size - 1)
    if mode == "circular":
        return positions % size
    period = 2 * (size - 1)                              # reflect, edges not repeated
    folded = np.abs(positions) % period if period else np.zeros_like(positions)
    return np.where(folded < size, folded, period - folded)


def pad(input, pad, mode="constant", value=None):
    """Pad (or, with negative amounts, crop) the last ``len(pad) // 2`` dimensions: ``pad``
    is ``(left, right)`` for the last dimension, then for the one before, and so on. Modes:
    ``"constant"`` (``value``, default 0), ``"reflect"``, ``"replicate"``, ``"circular"``.

    Shape: each padded dimension grows by its two amounts.

    Example:
        >>> F.pad(tg.tensor([[1.0, 2.0]]), (1, 2), value=9.0)
        tensor([[9., 1., 2., 9., 9.]])
        >>> F.pad(tg.tensor([[1.0, 2.0, 3.0]]), (2, 1), mode="reflect")
        tensor([[3., 2., 1., 2., 3., 2.]])
    """
    pad = tuple(pad)
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(
            f"Padding length should be less than or equal to two times the input dimension "
            f"but got padding length {len(pad)} and input of dimension {input.ndim}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(
            f"Unrecognised padding mode {mode}")
    if mode != "constant" and value is not None and value != 0:
        raise ValueError(f"Padding mode \"{mode}\" doesn't take in value argument.")
    dims = len(pad) // 2
    if mode != "constant" and (dims > 3 or input.ndim not in (dims + 1, dims + 2)):
        # the other modes pad 1 to 3 trailing dimensions of a batch of channels, as PyTorch's
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    out = input
    for k in range(len(pad) // 2):
        dim = input.ndim - 1 - k
        before, after = pad[2 * k], pad[2 * k + 1]
        size = out.shape[dim]
        if mode == "constant":
            out = _constant_pad(out, dim, before, after, 0.0 if value is None else value)
            continue
        if mode == "reflect" and (before >= size or after >= size):
            raise RuntimeError(
                f"Argument #4: Padding size should be less than the corresponding input "
                f"dimension, but got: padding ({before}, {after}) at dimension {dim} of input "
                f"{list(input.shape)}")
        if mode == "circular" and (before > size or after > size):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        index = tg.from_numpy(_pad_indices(size, before, after, mode).astype(np.int64))
        out = out.index_select(dim, index)
    if mode == "constant":
        return _named(out, "ConstantPadNdBackward0", input)
    if mode == "circular":
        return out    # (PyTorch's is a composite too: copies into slices, CopySlices)
    return _named(out, _PAD_NODES[mode] % (len(pad) // 2), input)


_PAD_NODES = {"reflect": "ReflectionPad%dDBackward0", "replicate": "ReplicationPad%dDBackward0"}


def _constant_pad(input, dim, before, after, value):
    """``value`` blocks concatenated on both sides of ``dim`` (a negative amount crops)."""
    if before < 0:
        input = input.narrow(dim, -before, input.shape[dim] + before)
        before = 0
    if after < 0:
        input = input.narrow(dim, 0, input.shape[dim] + after)
        after = 0
    parts = []
    for amount in (before, None, after):
        if amount is None:
            parts.append(input)
        elif amount:
            shape = list(input.shape)
            shape[dim] = amount
            parts.append(tg.full(tuple(shape), float(value), dtype=input.dtype))
    return tg.cat(parts, dim) if len(parts) > 1 else input


def bilinear(input1, input2, weight, bias=None):
    """``y_k = input1 @ weight[k] @ input2 + bias[k]`` for each output ``k``.

    Shape: input1 ``(*, in1)``, input2 ``(*, in2)``, weight ``(out, in1, in2)``, bias
    ``(out,)`` -> ``(*, out)``.

    Example:
        >>> w = tg.tensor([[[1.0, 0.0], [0.0, 2.0]]])
        >>> F.bilinear(tg.tensor([[1.0, 1.0]]), tg.tensor([[3.0, 4.0]]), w)
        tensor([[11.]])
    """
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got "
                           f"{list(input1.shape[:-1])} and {list(input2.shape[:-1])}")
    # PyTorch's decomposition, which its graph shows: the inputs viewed as rows, one
    # trilinear product of (rows, out), viewed back to (*, out), then the bias added
    rows1 = input1.reshape(-1, input1.shape[-1])
    rows2 = input2.reshape(-1, input2.shape[-1])
    # (rows, 1, 1, in1) @ (out, in1, in2) -> (rows, out, 1, in2); then the dot with rows2
    left = rows1.unsqueeze(-2).unsqueeze(-2) @ weight
    product = (left * rows2.unsqueeze(-2).unsqueeze(-2)).sum(-1).squeeze(-1)
    product = _named(product, "TrilinearBackward0", rows1, weight, rows2)
    out = product.view(*input1.shape[:-1], weight.shape[0])
    return out if bias is None else out + bias


# ---------------------------------------------------------------------------------------------
# Convolution and pooling: windows gathered with one index_select (indices from the shapes
# only, so a compiled replay reuses them), then a matrix product or a reduction
# ---------------------------------------------------------------------------------------------


def _pair(value, n, name="kernel_size"):
    """``value`` as an ``n``-tuple of ints (an int is repeated)."""
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} "
                           f"values to match the convolution dimensions, but got "
                           f"{name}={list(value)}")
    return value


def _windows(input, kernel, stride, dilation, spatial):
    """Every window of the (already padded) ``(N, C, *spatial)`` input: ``(N, C, *out,
    *kernel)``, gathered in one ``index_select`` over the flattened positions."""
    out = []
    for size, k, st, d in zip(spatial, kernel, stride, dilation):
        length = (size - d * (k - 1) - 1) // st + 1
        if length <= 0:
            return None, None
        out.append(length)
    # position of window w's tap t along each dim: w * stride + t * dilation
    grids = np.meshgrid(*[np.arange(o) * st for o, st in zip(out, stride)],
                        *[np.arange(k) * d for k, d in zip(kernel, dilation)], indexing="ij")
    n_dims = len(spatial)
    flat = np.zeros(grids[0].shape, dtype=np.int64)
    for axis in range(n_dims):
        flat = flat * spatial[axis] + grids[axis] + grids[n_dims + axis]
    n, c = input.shape[0], input.shape[1]
    gathered = input.reshape(n, c, -1).index_select(2, tg.from_numpy(flat.reshape(-1)))
    return gathered.reshape(n, c, *out, *kernel), tuple(out)


def _padding_amounts(padding, kernel, dilation, stride, n):
    """``padding`` (ints or "valid"/"same") as (before, after) per spatial dim."""
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * n
        if padding != "same":
            raise ValueError(f"Invalid padding string '{padding}', should be one of "
                             "{'valid', 'same'}")
        if any(st != 1 for st in stride):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        # the odd pixel of an even total goes after, as in PyTorch
        totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return [(t // 2, t - t // 2) for t in totals]
    return [(p, p) for p in _pair(padding, n, "padding")]


def _pad_spatial(input, amounts, value=0.0):
    if not any(before or after for before, after in amounts):
        return input
    flat = []
    for before, after in reversed(amounts):        # F.pad lists the last dimension first
        flat += [before, after]
    return pad(input, tuple(flat), value=value)


def _convolution(input, weight, bias, stride, padding, dilation, groups, n):
    unbatched = input.ndim == n + 1
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(
            f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to conv{n}d, but got "
            f"input of size: {list(input.shape)}")
    if unbatched:
        input = input.unsqueeze(0)
    kernel = tuple(weight.shape[2:])
    stride, dilation = _pair(stride, n, "stride"), _pair(dilation, n, "dilation")
    channels = input.shape[1]
    if channels != weight.shape[1] * groups:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {list(weight.shape)}, expected input"
            f"{list(input.shape)} to have {weight.shape[1] * groups} channels, but got "
            f"{channels} channels instead")
    padded = _pad_spatial(input, _padding_amounts(padding, kernel, dilation, stride, n))
    windows, out = _windows(padded, kernel, stride, dilation, tuple(padded.shape[2:]))
    if windows is None:
        sizes = " x ".join(str(s) for s in padded.shape[2:])
        taps = " x ".join(str(k) for k in kernel)
        raise RuntimeError(
            f"Calculated padded input size per channel: ({sizes}). Kernel size: ({taps}). "
            "Kernel size can't be greater than actual input size")
    batch, per_group, out_channels = input.shape[0], channels // groups, weight.shape[0]
    positions, taps = math.prod(out), per_group * math.prod(kernel)
    # (N, G, C/G, *out, *k) -> (N, G, positions, C/G * taps) @ (G, C/G * taps, O/G)
    order = (0, 1) + tuple(range(3, 3 + n)) + (2,) + tuple(range(3 + n, 3 + 2 * n))
    columns = windows.reshape(batch, groups, per_group, *out, *kernel).permute(*order)
    columns = columns.reshape(batch, groups, positions, taps)
    kernels = weight.reshape(groups, out_channels // groups, taps).transpose(1, 2)
    result = (columns @ kernels).permute(0, 1, 3, 2).reshape(batch, out_channels, *out)
    if bias is not None:
        result = result + bias.reshape((1, -1) + (1,) * n)
    result = _named(result, "ConvolutionBackward0", input, weight, bias)
    return result.squeeze(0) if unbatched else result


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d cross-correlation (PyTorch's convolution) of ``(N, C_in, L)`` with ``weight``
    ``(C_out, C_in / groups, k)``; ``padding`` an int or "valid"/"same".

    Shape: -> ``(N, C_out, L_out)``, ``L_out = (L + 2 padding - dilation (k - 1) - 1) //
    stride + 1``; unbatched ``(C_in, L)`` gives ``(C_out, L_out)``.

    Example:
        >>> F.conv1d(tg.tensor([[[1.0, 2.0, 3.0, 4.0]]]), tg.tensor([[[1.0, -1.0]]]))
        tensor([[[-1., -1., -1.]]])
    """
    return _convolution(input, weight, bias, stride, padding, dilation, groups, 1)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d cross-correlation (PyTorch's convolution) of ``(N, C_in, H, W)`` with ``weight``
    ``(C_out, C_in / groups, kH, kW)``: each output is the dot product of a window with a
    kernel.

    Shape: -> ``(N, C_out, H_out, W_out)`` (see ``conv1d`` per dimension).

    Example:
        >>> x = tg.arange(9.0).reshape(1, 1, 3, 3)
        >>> F.conv2d(x, tg.ones(1, 1, 2, 2))
        tensor([[[[ 8., 12.],
                  [20., 24.]]]])
    """
    return _convolution(input, weight, bias, stride, padding, dilation, groups, 2)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-d cross-correlation (PyTorch's convolution) of ``(N, C_in, D, H, W)`` with
    ``weight`` ``(C_out, C_in / groups, kD, kH, kW)``: volumes and video.

    Shape: -> ``(N, C_out, D_out, H_out, W_out)`` (see ``conv1d`` per dimension).

    Example:
        >>> F.conv3d(tg.ones(1, 1, 3, 3, 3), tg.ones(1, 1, 2, 2, 2)).shape
        tapegrad.Size([1, 1, 2, 2, 2])
    """
    return _convolution(input, weight, bias, stride, padding, dilation, groups, 3)


def _spread(x, dim, step):
    """x with ``step - 1`` zeros between neighbours along ``dim``: a strided convolution's
    input seen from its transpose."""
    if step == 1 or x.shape[dim] == 0:
        return x
    length = x.shape[dim]
    # (.., L, 1, ..) padded to (.., L, step, ..), flattened to (.., L * step, ..), cut
    widened = x.unsqueeze(dim + 1)
    after = widened.ndim - dim - 2                 # dims after the new one: F.pad goes last-first
    widened = pad(widened, (0, 0) * after + (0, step - 1))
    shape = list(x.shape)
    shape[dim] = length * step
    return widened.reshape(shape).narrow(dim, 0, (length - 1) * step + 1)


def _transposed_geometry(input, weight, bias, stride, padding, output_padding, groups,
                         dilation, n):
    """Check a transposed convolution's arguments as PyTorch does (a 1-d one is reported as
    PyTorch's 2-d of height 1) and return them as n-tuples."""
    name = f"conv_transpose{n}d"
    if isinstance(padding, str):
        raise TypeError(f"{name}(): argument 'padding' must be tuple of ints, not str")
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(
            f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {name}, but got "
            f"input of size: {list(input.shape)}")
    stride, padding = _pair(stride, n, "stride"), _pair(padding, n, "padding")
    output_padding = _pair(output_padding, n, "output_padding")
    dilation = _pair(dilation, n, "dilation")
    shown = 2 if n == 1 else n     # (PyTorch runs a 1-d one as a 2-d one of height 1)
    axes = ("depth", "height", "width")[3 - shown:]

    def listing(label, values, default, sep=" "):
        values = (default,) * (shown - n) + tuple(values)
        return sep.join(f"{label}_{a}: {v}" for a, v in zip(axes, values))
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero, but got "
                           + listing("dilation", dilation, 1, ", "))
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if weight.shape[0] % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension "
            f"0, but got weight of size [{list(weight.shape)}] instead")
    batched = input if input.ndim == n + 2 else input.unsqueeze(0)
    if batched.shape[1] != weight.shape[0]:
        raise RuntimeError(
            f"Given transposed=1, weight of size {list(weight.shape)}, expected "
            f"input{list(batched.shape)} to have {weight.shape[0]} channels, but got "
            f"{batched.shape[1]} channels instead")
    out_channels = weight.shape[1] * groups
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_channels):
        raise RuntimeError(
            f"Given transposed=1, weight of size {list(weight.shape)}, expected bias to be "
            f"1-dimensional with {out_channels} elements, but got bias of size "
            f"{list(bias.shape)} instead")
    if any(not (o < s or o < d) for o, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError(
            "output padding must be smaller than either stride or dilation, but got "
            + " ".join([listing("output_padding", output_padding, 0),
                        listing("stride", stride, 1), listing("dilation", dilation, 1)]))
    kernel = tuple(weight.shape[2:])
    sizes = tuple(batched.shape[2:])
    out = tuple((size - 1) * s - 2 * p + d * (k - 1) + o + 1 for size, s, p, d, k, o in
                zip(sizes, stride, padding, dilation, kernel, output_padding))
    if any(size < 1 for size in out):
        given = " x ".join(str(v) for v in (1,) * (shown - n) + sizes)
        calculated = " x ".join(str(v) for v in (1,) * (shown - n) + out)
        raise RuntimeError(f"Given input size per channel: ({given}). Calculated output size "
                           f"per channel: ({calculated}). Output size is too small")
    return stride, padding, output_padding, dilation


def _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, n):
    """The transpose (the gradient with respect to the input) of ``conv{n}d``, computed as
    that convolution of the input spread by ``stride`` and padded by ``dilation * (k - 1) -
    padding``, with the kernels flipped and their in and out channels swapped; shown as
    PyTorch's one ``ConvolutionBackward0`` node."""
    stride, padding, output_padding, dilation = _transposed_geometry(
        input, weight, bias, stride, padding, output_padding, groups, dilation, n)
    unbatched = input.ndim == n + 1
    batched = input.unsqueeze(0) if unbatched else input
    spread = batched
    for axis, s in enumerate(stride):
        spread = _spread(spread, 2 + axis, s)
    kernel = tuple(weight.shape[2:])
    for axis in range(n):
        reach = dilation[axis] * (kernel[axis] - 1)
        before, after = reach - padding[axis], reach - padding[axis] + output_padding[axis]
        dim = 2 + axis
        if before < 0:       # (padding past the kernel's reach cuts the spread input)
            spread = spread.narrow(dim, -before, spread.shape[dim] + before)
            before = 0
        if after < 0:
            spread = spread.narrow(dim, 0, spread.shape[dim] + after)
            after = 0
        amounts = [(0, 0)] * n
        amounts[axis] = (before, after)
        spread = _pad_spatial(spread, amounts)
    in_per_group, out_per_group = weight.shape[0] // groups, weight.shape[1]
    kernels = weight.reshape(groups, in_per_group, out_per_group, *kernel).transpose(1, 2)
    kernels = kernels.reshape(groups * out_per_group, in_per_group, *kernel)
    kernels = kernels.flip(tuple(range(2, 2 + n)))
    result = _convolution(spread, kernels, bias, 1, 0, dilation, groups, n)
    result = _named(result, "ConvolutionBackward0", batched, weight, bias)
    return result.squeeze(0) if unbatched else result


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-d transposed convolution ("deconvolution") of ``(N, C_in, L)`` with ``weight``
    ``(C_in, C_out / groups, k)``: each input value adds a scaled kernel to the output, the
    gradient of ``conv1d`` with respect to its input.

    Shape: -> ``(N, C_out, L_out)``, ``L_out = (L - 1) stride - 2 padding + dilation (k - 1)
    + output_padding + 1``; unbatched ``(C_in, L)`` gives ``(C_out, L_out)``.

    Example:
        >>> F.conv_transpose1d(tg.tensor([[[1.0, 2.0]]]), tg.tensor([[[1.0, 10.0]]]))
        tensor([[[ 1., 12., 20.]]])
    """
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 1)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-d transposed convolution ("deconvolution") of ``(N, C_in, H, W)`` with ``weight``
    ``(C_in, C_out / groups, kH, kW)``: upsampling in decoders and generators, the gradient
    of ``conv2d`` with respect to its input.

    Shape: -> ``(N, C_out, H_out, W_out)`` (see ``conv_transpose1d`` per dimension).

    Example:
        >>> F.conv_transpose2d(tg.ones(1, 1, 2, 2), tg.ones(1, 1, 2, 2), stride=2)
        tensor([[[[1., 1., 1., 1.],
                  [1., 1., 1., 1.],
                  [1., 1., 1., 1.],
                  [1., 1., 1., 1.]]]])
    """
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 2)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """3-d transposed convolution of ``(N, C_in, D, H, W)`` with ``weight``
    ``(C_in, C_out / groups, kD, kH, kW)``, the gradient of ``conv3d`` with respect to its
    input.

    Shape: -> ``(N, C_out, D_out, H_out, W_out)`` (see ``conv_transpose1d`` per dimension).

    Example:
        >>> F.conv_transpose3d(tg.ones(1, 1, 2, 2, 2), tg.ones(1, 1, 2, 2, 2), stride=2).shape
        tapegrad.Size([1, 1, 4, 4, 4])
    """
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 3)


def _block_geometry(kernel_size, dilation, padding, stride, order):
    """im2col's four pairs, checked in ``order`` (PyTorch's: unfold and fold differ)."""
    pairs = {}
    for name, value in (("kernel_size", kernel_size), ("dilation", dilation),
                        ("padding", padding), ("stride", stride)):
        value = (value, value) if isinstance(value, int) else tuple(value)
        if len(value) != 2:
            raise RuntimeError(f"It is expected {name} equals to 2, but got size {len(value)}")
        pairs[name] = value
    checks = {
        "kernel_size": (lambda v: v > 0, "kernel size should be greater than zero", "kernel"),
        "dilation": (lambda v: v > 0, "dilation should be greater than zero", "dilation"),
        "padding": (lambda v: v >= 0, "padding should be non-negative", "pad"),
        "stride": (lambda v: v > 0, "stride should be greater than zero", "stride"),
    }
    for name in order:
        good, text, label = checks[name]
        h, w = pairs[name]
        if not (good(h) and good(w)):
            raise RuntimeError(f"{text}, but got {label}_height: {h} {label}_width: {w}")
    return pairs["kernel_size"], pairs["dilation"], pairs["padding"], pairs["stride"]


def _blocks_per_dim(size, k, d, p, s):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Every sliding block of a batch of images as a column (im2col): ``(N, C, H, W)`` ->
    ``(N, C * kH * kW, L)``, L the blocks, row-major; the channel varies slowest in a
    column, then the kernel's row and column.  ``grad_fn``: ``<Im2ColBackward0>``.

    Example:
        >>> F.unfold(tg.arange(9.0).reshape(1, 1, 3, 3), 2)
        tensor([[[0., 1., 3., 4.],
                 [1., 2., 4., 5.],
                 [3., 4., 6., 7.],
                 [4., 5., 7., 8.]]])
    """
    if input.ndim < 3:
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-input.ndim}, {input.ndim - 1}], but got {input.ndim})")
    kernel, dilation, padding, stride = _block_geometry(
        kernel_size, dilation, padding, stride, ("kernel_size", "dilation", "padding", "stride"))
    shape = tuple(input.shape)
    if input.ndim not in (3, 4) or 0 in shape[-3:]:
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with possibly 0 batch size "
                           f"and other non-zero dimensions for input, but got: {list(shape)}")
    blocks = tuple(_blocks_per_dim(size, k, d, p, s) for size, k, d, p, s in
                   zip(shape[-2:], kernel, dilation, padding, stride))
    if min(blocks) < 1:
        raise RuntimeError(
            f"Given input with spatial size {shape[-2:]}, kernel_size={kernel}, "
            f"dilation={dilation}, padding={padding}, calculated shape of the array of "
            f"sliding blocks as {blocks}, but its components must be at least one.")
    batched = input if input.ndim == 4 else input.unsqueeze(0)
    n, c = batched.shape[0], batched.shape[1]
    if n == 0:      # (no images: nothing to gather)
        columns = batched.reshape(0, c * math.prod(kernel), math.prod(blocks))
    else:
        padded = _pad_spatial(batched, [(p, p) for p in padding])
        windows, _ = _windows(padded, kernel, stride, dilation, tuple(padded.shape[2:]))
        # (N, C, bH, bW, kH, kW) -> (N, C, kH, kW, bH, bW) -> (N, C kH kW, bH bW)
        columns = windows.permute(0, 1, 4, 5, 2, 3).reshape(n, c * math.prod(kernel),
                                                             math.prod(blocks))
    if input.ndim == 3:
        columns = columns.squeeze(0)
    return _named(columns, "Im2ColBackward0", input)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """The columns of sliding blocks summed back into images (col2im), the transpose of
    ``unfold``: ``(N, C * kH * kW, L)`` -> ``(N, C, *output_size)``; values of blocks that
    overlap add up.  ``grad_fn``: ``<Col2ImBackward0>``.

    Example:
        >>> F.fold(tg.ones(1, 4, 4), (3, 3), 2)
        tensor([[[[1., 2., 1.],
                  [2., 4., 2.],
                  [1., 2., 1.]]]])
    """
    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    if len(size) != 2:
        raise RuntimeError(f"It is expected output_size equals to 2, but got size {len(size)}")
    kernel, dilation, padding, stride = _block_geometry(
        kernel_size, dilation, padding, stride, ("kernel_size", "stride", "dilation", "padding"))
    shape = tuple(input.shape)
    if input.ndim not in (2, 3) or 0 in shape[-2:]:
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           f"batch size and non-zero dimensions for input, but got: "
                           f"{list(shape)}")
    taps = math.prod(kernel)
    if shape[-2] % taps:
        raise RuntimeError(
            f"Expected size of input's dimension 1 to be divisible by the product of "
            f"kernel_size, but got input.size(1)={shape[-2]} and kernel_size={kernel}.")
    blocks = tuple(_blocks_per_dim(o, k, d, p, s) for o, k, d, p, s in
                   zip(size, kernel, dilation, padding, stride))
    if shape[-1] != blocks[0] * blocks[1] or min(blocks) < 1:
        raise RuntimeError(
            f"Given output_size={size}, kernel_size={kernel}, dilation={dilation}, "
            f"padding={padding}, stride={stride}, expected size of input's dimension 2 to "
            f"match the calculated number of sliding blocks {blocks[0]} * {blocks[1]} = "
            f"{blocks[0] * blocks[1]}, but got input.size(2)={shape[-1]}.")
    batched = input if input.ndim == 3 else input.unsqueeze(0)
    n, c = batched.shape[0], shape[-2] // taps
    padded = (size[0] + 2 * padding[0], size[1] + 2 * padding[1])
    # where each column entry (image, channel, tap row, tap column, block) lands in the
    # padded output: indices from the shapes only, so a compiled replay reuses them
    rows = (np.arange(blocks[0]) * stride[0])[None, :] + \
        (np.arange(kernel[0]) * dilation[0])[:, None]        # (kH, bH)
    cols = (np.arange(blocks[1]) * stride[1])[None, :] + \
        (np.arange(kernel[1]) * dilation[1])[:, None]        # (kW, bW)
    spot = rows[:, None, :, None] * padded[1] + cols[None, :, None, :]   # (kH, kW, bH, bW)
    plane = padded[0] * padded[1]
    base = np.arange(n * c).reshape(n, c, 1, 1, 1, 1) * plane
    index = (base + spot[None, None]).reshape(-1)
    if n == 0:      # (no images: nothing to add up)
        image = batched.reshape(0, c, *size)
    else:
        summed = _elementwise.scatter_add_flat(batched, index, n * c * plane)
        image = summed.reshape(n, c, *padded)
        image = image[:, :, padding[0]:padding[0] + size[0],
                      padding[1]:padding[1] + size[1]]
    if input.ndim == 2:
        image = image.squeeze(0)
    return _named(image, "Col2ImBackward0", input)


def _pool_geometry(spatial, kernel, stride, padding, dilation, ceil_mode):
    """PyTorch's pooling output size per dimension (``pooling_output_shape``): with
    ``ceil_mode`` a last, partial window is kept if it starts inside the input or its left
    padding.  Also the extra right padding that partial window needs (0 without it)."""
    out, extra = [], []
    for size, k, s, p, d in zip(spatial, kernel, stride, padding, dilation):
        reach = size + 2 * p - d * (k - 1) - 1
        length = (reach + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and length > 0 and (length - 1) * s >= size + p:
            length -= 1
        out.append(length)
        extra.append(max(0, (length - 1) * s + d * (k - 1) + 1 - (size + 2 * p)))
    return tuple(out), tuple(extra)


def _pool_taps(spatial, kernel, stride, padding, dilation, out):
    """For each window and tap (``(*out, taps)``, taps in PyTorch's scan order): the tap's
    flat position in the unpadded ``spatial`` plane and whether it lies inside the input.
    From the shapes only, so a compiled replay reuses them."""
    n = len(spatial)
    grids = np.meshgrid(*[np.arange(o) * s - p for o, s, p in zip(out, stride, padding)],
                        *[np.arange(k) * d for k, d in zip(kernel, dilation)], indexing="ij")
    flat = np.zeros(grids[0].shape, dtype=np.int64)
    inside = np.ones(grids[0].shape, dtype=bool)
    for axis in range(n):
        position = grids[axis] + grids[n + axis]
        inside &= (position >= 0) & (position < spatial[axis])
        flat = flat * spatial[axis] + position
    # PyTorch's starting index of a window: its first tap at or right of 0 in every dimension
    # (a window whose taps all fall in the padding, possible with dilation, keeps it although
    # it lies outside the plane)
    start = np.zeros(tuple(out), dtype=np.int64)
    for axis in range(n):
        first = np.arange(out[axis]) * stride[axis] - padding[axis]
        first = np.where(first < 0, first + (-first + dilation[axis] - 1) // dilation[axis]
                         * dilation[axis], first)
        start = start * spatial[axis] + first.reshape((-1,) + (1,) * (n - 1 - axis))
    return flat.reshape(*out, -1), inside.reshape(*out, -1), start


def _pool_windows(input, kernel_size, stride, padding, dilation, fill, n, name,
                  ceil_mode=False):
    unbatched = input.ndim == n + 1
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"{name}: Expected {n + 1}D or {n + 2}D (batch mode) tensor for "
                           f"input, but got: {list(input.shape)}")
    if unbatched:
        input = input.unsqueeze(0)
    kernel = _pair(kernel_size, n)
    stride = kernel if stride is None or stride == [] or stride == () else _pair(stride, n,
                                                                                "stride")
    padding, dilation = _pair(padding, n, "padding"), _pair(dilation, n, "dilation")
    if any(2 * p > k for p, k in zip(padding, kernel)):
        raise RuntimeError("pad should be at most half of effective kernel size, but got "
                           f"pad={padding[0]}, kernel_size={kernel[0]} and dilation="
                           f"{dilation[0]}")
    spatial = tuple(input.shape[2:])
    if name == "avg_pool3d" and any(size < k for size, k in zip(spatial, kernel)):
        # (PyTorch's 3-d average pool compares the unpadded input with the kernel first)
        raise RuntimeError(f"input image (T: {spatial[0]} H: {spatial[1]} W: {spatial[2]}) "
                           f"smaller than kernel size (kT: {kernel[0]} kH: {kernel[1]} "
                           f"kW: {kernel[2]})")
    out, extra = _pool_geometry(spatial, kernel, stride, padding, dilation, ceil_mode)
    if min(out) < 1:
        channels = input.shape[1]
        raise RuntimeError(
            f"Given input size: ({'x'.join(str(s) for s in (channels, *spatial))}). "
            f"Calculated output size: ({'x'.join(str(s) for s in (channels, *out))}). "
            "Output size is too small")
    # ceil_mode's partial last window reads past the padding: more of the fill there
    padded = _pad_spatial(input, [(p, p + e) for p, e in zip(padding, extra)], fill)
    windows, _ = _windows(padded, kernel, stride, dilation, tuple(padded.shape[2:]))
    windows = windows[(slice(None), slice(None)) + tuple(slice(0, o) for o in out)]
    windows = windows.reshape(*windows.shape[:2 + n], -1)
    return windows, unbatched, (kernel, stride, padding, dilation, out, extra, spatial)


def _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, n,
              name):
    windows, unbatched, (kernel, stride, padding, dilation, out, _, spatial) = \
        _pool_windows(input, kernel_size, stride, padding, dilation, -math.inf, n, name,
                      ceil_mode)
    flat, inside, start = _pool_taps(spatial, kernel, stride, padding, dilation, out)
    result, index = _first_maximum(windows, flat, inside, start, return_indices)
    if unbatched:
        result = result.squeeze(0)
        index = None if index is None else index.squeeze(0)
    # (an unbatched input too is one PyTorch node)
    result = _named(result, f"MaxPool{n}DWithIndicesBackward0", input)
    return (result, index) if return_indices else result


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The largest value of each ``kernel_size`` window (``stride`` defaults to the kernel
    size); the gradient goes to the first largest element of a window, as in PyTorch.
    ``ceil_mode`` keeps a last partial window (PyTorch's rule: it must start inside the
    input or its left padding); ``return_indices`` also returns each maximum's flat
    position within its ``(H, W)`` plane (int64), as ``max_unpool2d`` takes them.

    Shape: ``(N, C, H, W)`` -> ``(N, C, H_out, W_out)``.

    Example:
        >>> F.max_pool2d(tg.arange(16.0).reshape(1, 1, 4, 4), 2)
        tensor([[[[ 5.,  7.],
                  [13., 15.]]]])
    """
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
                     2, "max_pool2d")


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """``max_pool2d`` over three spatial dimensions: the largest value of each
    ``kernel_size`` window of ``(N, C, D, H, W)`` or ``(C, D, H, W)``; indices are flat
    positions within each ``(D, H, W)`` volume.

    Example:
        >>> F.max_pool3d(tg.arange(8.0).reshape(1, 1, 2, 2, 2), 2)
        tensor([[[[[7.]]]]])
    """
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
                     3, "max_pool3d")


def _first_maximum(windows, flat=None, inside=None, start=None, return_indices=False):
    """The maximum over the last dimension as PyTorch's max-pool kernels take it: a running
    maximum over the taps, not max(dim) (its argmax would be baked into a compiled tape) nor
    amax (which shares the gradient among ties). A later tap wins only if strictly larger
    (ties keep the first, whose element gets the gradient) or nan.  PyTorch scans the real
    (unpadded) taps only, starting from the first one: where ``inside`` (``(*out, taps)``)
    says a window begins in the padding, its first real tap is taken whatever its value
    (a -inf input there keeps its index and gradient).  With ``return_indices`` the
    ``flat`` position of the winning tap is carried along with the same comparisons, so a
    compiled replay recomputes it too."""
    result = windows[..., 0]
    index = None
    if return_indices:
        # the index of the window's first tap if it is inside, else PyTorch's start
        first = np.where(inside[..., 0], flat[..., 0], start)
        index = tg.from_numpy(np.ascontiguousarray(np.broadcast_to(first, result.shape)))
    seen = None if inside is None else inside[..., 0].copy()
    for tap in range(1, windows.shape[-1]):
        value = windows[..., tap]
        # (value != value: nan, as a comparison a replay recomputes; isnan is guarded; nested
        # wheres, as a replay does not take | of traced values)
        nan, larger = value != value, value > result
        first = None
        if seen is not None:
            first = inside[..., tap] & ~seen
            seen |= inside[..., tap]
            first = tg.from_numpy(np.ascontiguousarray(first)) if first.any() else None
        if return_indices:
            position = tg.from_numpy(np.ascontiguousarray(flat[..., tap]))
            index = tg.where(nan, position, tg.where(larger, position, index))
            if first is not None:
                index = tg.where(first, position, index)
        result = tg.where(nan, value, tg.where(larger, value, result))
        if first is not None:
            result = tg.where(first, value, result)
    return result, index


def _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override, n, name):
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    windows, unbatched, (kernel, stride, padding, _, out, extra, spatial) = _pool_windows(
        input, kernel_size, stride, padding, 1, 0.0, n, name, ceil_mode)
    total = windows.sum(-1)
    if divisor_override:
        result = total / divisor_override
    elif (count_include_pad or not any(padding)) and not any(extra):
        result = total / math.prod(kernel)
    else:
        # PyTorch divides by the window clipped to the input and its padding
        # (count_include_pad) or to the input alone: a box, so per dimension the count of
        # its taps inside, multiplied (from the shapes only)
        counts = np.ones(())
        for size, k, s, p, o in zip(spatial, kernel, stride, padding, out):
            start = np.arange(o) * s - p
            low, high = (-p, size + p) if count_include_pad else (0, size)
            along = np.minimum(start + k, high) - np.maximum(start, low)
            counts = np.multiply.outer(counts, along.astype(np.float64))
        result = total / _constant(counts)
    if unbatched:
        result = result.squeeze(0)
    return _named(result, f"AvgPool{n}DBackward0", input)   # (one node, unbatched too)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """The mean of each ``kernel_size`` window (zero padding counted unless
    ``count_include_pad=False``; ``divisor_override`` replaces the divisor).  ``ceil_mode``
    keeps a last partial window (PyTorch's rule), averaged over its part inside the input
    and padding.

    Shape: ``(N, C, H, W)`` -> ``(N, C, H_out, W_out)``.

    Example:
        >>> F.avg_pool2d(tg.arange(16.0).reshape(1, 1, 4, 4), 2)
        tensor([[[[ 2.5000,  4.5000],
                  [10.5000, 12.5000]]]])
    """
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override, 2, "avg_pool2d")


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """``avg_pool2d`` over three spatial dimensions of ``(N, C, D, H, W)`` or
    ``(C, D, H, W)``.

    Example:
        >>> F.avg_pool3d(tg.arange(8.0).reshape(1, 1, 2, 2, 2), 2)
        tensor([[[[[3.5000]]]]])
    """
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override, 3, "avg_pool3d")


def _adaptive_average_matrix(size, out):
    """``(out, size)`` matrix whose row ``i`` averages PyTorch's adaptive window ``i``:
    ``floor(i * size / out)`` to ``ceil((i + 1) * size / out)``."""
    matrix = np.zeros((out, size))
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix


def _adaptive_avg_pool(input, output_size, n, name):
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"{name}(): Expected {n + 1}D or {n + 2}D tensor, but got "
                           f"{list(input.shape)}")
    sizes = (output_size,) * n if isinstance(output_size, int) or output_size is None \
        else tuple(output_size)
    if len(sizes) == 1 and n > 1:
        sizes = sizes * n
    spatial = input.shape[input.ndim - n:]
    sizes = tuple(s if o is None else o for s, o in zip(spatial, sizes))
    if sizes == (1,) * n:
        # PyTorch's global average is a mean (node too)
        return input.mean(tuple(range(-n, 0)), True)
    out = input
    # one averaging product per spatial dimension (the matrices depend on the shapes only)
    for k, (size, target) in enumerate(zip(spatial, sizes)):
        dim = input.ndim - n + k
        averaged = out.movedim(dim, -1) @ _constant(_adaptive_average_matrix(size, target).T)
        out = averaged.movedim(-1, dim)
    return _named(out, f"AdaptiveAvgPool{n}DBackward0", input)


def adaptive_avg_pool1d(input, output_size):
    """Average pooling into ``output_size`` windows (PyTorch's window bounds), whatever the
    input length.

    Shape: ``(N, C, L)`` -> ``(N, C, output_size)``.

    Example:
        >>> F.adaptive_avg_pool1d(tg.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0]]]), 2)
        tensor([[[2.0000, 4.0000]]])
    """
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional "
                           "tensor for argument #1 'self' (while checking arguments for "
                           "adaptive_avg_pool1d)")
    if not isinstance(output_size, int):
        if len(output_size) != 1:
            raise RuntimeError("adaptive_avg_pool1d() argument 'output_size' should contain "
                               f"one int (got {len(output_size)})")
        output_size, = output_size
    # PyTorch pools a (..., 1, L) image and squeezes it: its nodes are those
    out = _adaptive_avg_pool(input.unsqueeze(-2), (1, output_size), 2, "adaptive_avg_pool1d")
    return out.squeeze(-2)


def adaptive_avg_pool2d(input, output_size):
    """Average pooling into an ``output_size`` grid of windows (an int for a square one,
    ``None`` to keep a dimension), whatever the input size: ``output_size=1`` is the global
    average of each channel.

    Shape: ``(N, C, H, W)`` -> ``(N, C, *output_size)``.

    Example:
        >>> F.adaptive_avg_pool2d(tg.arange(16.0).reshape(1, 1, 4, 4), 1)
        tensor([[[[7.5000]]]])
    """
    return _adaptive_avg_pool(input, output_size, 2, "adaptive_avg_pool2d")


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """Divide each value by ``(k + alpha * mean of the squares over size neighbouring
    channels) ** beta``: the window of channel ``c`` covers ``c - size // 2`` to
    ``c + (size - 1) // 2``, channels beyond the edges counting as zeros (the mean is always
    over ``size``), as PyTorch's average pooling of the squares.

    Shape: ``(N, C, *)`` with at least one dimension after ``C``, unchanged.

    Example:
        >>> F.local_response_norm(tg.tensor([[[1.0], [2.0]]]), 2, alpha=1.0, beta=1.0, k=0.0)
        tensor([[[2.0000],
                 [0.8000]]])
    """
    if input.dim() < 3:
        raise ValueError("Expected 3D or higher dimensionality                          "
                         f"input (got {input.dim()} dimensions)")
    if input.numel() == 0:
        return input
    squares = input * input
    channels = input.shape[1]
    before, after = size // 2, (size - 1) // 2
    # zero channels on both sides, then the window sums as a sum of shifted slices (built from
    # differentiable slicing, so gradients, replay and vmap come with them)
    pad_shape = list(input.shape)
    parts = []
    if before:
        pad_shape[1] = before
        parts.append(tg.zeros(pad_shape, dtype=input.dtype))
    parts.append(squares)
    if after:
        pad_shape[1] = after
        parts.append(tg.zeros(pad_shape, dtype=input.dtype))
    padded = tg.cat(parts, 1) if len(parts) > 1 else squares
    window = padded.narrow(1, 0, channels)
    for shift in range(1, size):
        window = window + padded.narrow(1, shift, channels)
    return input / (window / size * alpha + k).pow(beta)


def adaptive_avg_pool3d(input, output_size):
    """Average pooling into an ``output_size`` volume of windows (an int for a cube, ``None``
    to keep a dimension), whatever the input size: ``output_size=1`` is the global average.

    Shape: ``(N, C, D, H, W)`` or ``(C, D, H, W)`` -> ``(..., *output_size)``.

    Example:
        >>> F.adaptive_avg_pool3d(tg.arange(8.0).reshape(1, 1, 2, 2, 2), 1)
        tensor([[[[[3.5000]]]]])
    """
    return _adaptive_avg_pool(input, output_size, 3, "adaptive_avg_pool3d")


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """``softmax(query @ key^T * scale + mask) @ value`` with ``scale = 1 / sqrt(E)`` by
    default; a bool ``attn_mask`` keeps the positions where it is True, a float one is added;
    ``is_causal`` keeps positions at or below the diagonal.  A query masked everywhere gives
    zeros, as in PyTorch.

    Shape: query ``(*, L, E)``, key ``(*, S, E)``, value ``(*, S, Ev)`` -> ``(*, L, Ev)``.

    Example:
        >>> q = k = tg.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> F.scaled_dot_product_attention(q, k, tg.tensor([[1.0], [3.0]]), is_causal=True)
        tensor([[1.0000],
                [2.3395]])
    """
    if enable_gqa:
        raise NotImplementedError("scaled_dot_product_attention: enable_gqa is not supported")
    length, source = query.shape[-2], key.shape[-2]
    factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * factor
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                               "set when is_causal=True")
        attn_mask = tg.from_numpy(np.tril(np.ones((length, source), dtype=bool)))
    if attn_mask is not None:
        if attn_mask._value.dtype == np.bool_:
            scores = tg.where(attn_mask, scores, -math.inf)
        else:
            scores = scores + attn_mask
    # a query whose every score is -inf (masked everywhere) attends nowhere: zeros and no
    # gradient, as PyTorch's safe softmax gives, not softmax's nan.  Counted with comparisons,
    # which a compiled replay recomputes; its scores are made 0 first, so that no nan reaches
    # softmax's gradient either
    nowhere = (scores != -math.inf).double().sum(-1, keepdim=True) == 0.0
    weights = tg.where(nowhere, 0.0, tg.softmax(tg.where(nowhere, 0.0, scores), -1))
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return weights @ value


# ---------------------------------------------------------------------------------------------
# Multi-head attention: the computation behind nn.MultiheadAttention, as PyTorch's functional
# form (one implementation for both, so the module's numbers and errors are the function's)
# ---------------------------------------------------------------------------------------------


def _attention_is_batched(query, key, value, key_padding_mask, attn_mask, num_heads):
    """Whether attention runs on a batch (3-D query) or on one sequence (2-D), after
    PyTorch's checks that every other input has the matching rank."""
    if query.dim() == 3:
        if key.dim() != 3 or value.dim() != 3:
            raise AssertionError(
                "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found "
                f"{key.dim()}-D and {value.dim()}-D tensors respectively")
        if key_padding_mask is not None and key_padding_mask.dim() != 2:
            raise AssertionError(
                "For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D "
                f"but found {key_padding_mask.dim()}-D tensor instead")
        if attn_mask is not None and attn_mask.dim() not in (2, 3):
            raise AssertionError(
                "For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D "
                f"but found {attn_mask.dim()}-D tensor instead")
        return True
    if query.dim() == 2:
        if key.dim() != 2 or value.dim() != 2:
            raise AssertionError(
                "For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found "
                f"{key.dim()}-D and {value.dim()}-D tensors respectively")
        if key_padding_mask is not None and key_padding_mask.dim() != 1:
            raise AssertionError(
                "For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D "
                f"but found {key_padding_mask.dim()}-D tensor instead")
        if attn_mask is not None:
            if attn_mask.dim() not in (2, 3):
                raise AssertionError(
                    "For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or "
                    f"3-D but found {attn_mask.dim()}-D tensor instead")
            # one sequence: a 3-D mask holds one (L, S) mask per head
            per_head = (num_heads, query.shape[0], key.shape[0])
            if attn_mask.dim() == 3 and tuple(attn_mask.shape) != per_head:
                raise AssertionError(f"Expected `attn_mask` shape to be {per_head} but got "
                                     f"{attn_mask.shape}")
        return False
    raise AssertionError("query should be unbatched 2D or batched 3D tensor but received "
                         f"{query.dim()}-D query tensor")


def _additive_mask(mask, name, other_dtype, other_name, dtype):
    """``mask`` as scores to add: a bool mask becomes -inf where True and 0 elsewhere (of
    ``dtype``), a float mask is already that.  PyTorch warns when the two masks of one call
    have different dtypes (``other_dtype`` None skips the check)."""
    if mask is None:
        return None
    is_float = tg.is_floating_point(mask)
    if mask.dtype != tg.bool and not is_float:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    if other_dtype is not None and mask.dtype != other_dtype:
        warnings.warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same "
                      "type for both instead.", stacklevel=3)
    if is_float:
        return mask
    return tg.zeros_like(mask, dtype=dtype).masked_fill_(mask, -math.inf)


def _project_packed(query, key, value, weight, bias):
    """The query, key and value projections from one packed ``(3 E, E)`` weight.  Self-
    attention (one tensor for all three) projects once and splits; a shared key and value
    project together; PyTorch's graph has these shapes, and so the same gradients' sums."""
    embed = query.shape[-1]
    if key is value and query is key:
        both = linear(query, weight, bias).unflatten(-1, (3, embed))
        split = both.unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
        return split[0], split[1], split[2]
    if key is value:
        query_weight, pair_weight = weight.split([embed, 2 * embed])
        query_bias, pair_bias = (None, None) if bias is None else bias.split([embed, 2 * embed])
        pair = linear(key, pair_weight, pair_bias).unflatten(-1, (2, embed))
        split = pair.unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
        return linear(query, query_weight, query_bias), split[0], split[1]
    weights = weight.chunk(3)
    biases = (None,) * 3 if bias is None else bias.chunk(3)
    return tuple(linear(t, w, b) for t, w, b in zip((query, key, value), weights, biases))


def _project_separately(query, key, value, weights, bias):
    """The projections from three weights ``(E, E)``, ``(E, kdim)``, ``(E, vdim)`` (key and
    value may have their own sizes), checked against the inputs' sizes as PyTorch checks."""
    embed = query.shape[-1]
    biases = (None,) * 3 if bias is None else bias.chunk(3)
    for role, tensor, weight in zip(("query", "key", "value"), (query, key, value), weights):
        if tuple(weight.shape) != (embed, tensor.shape[-1]):
            raise AssertionError(f"expecting {role} weights shape of "
                                 f"{(embed, tensor.shape[-1])}, but got {weight.shape}")
    for role, b in zip(("query", "key", "value"), biases):
        if b is not None and tuple(b.shape) != (embed,):
            raise AssertionError(f"expecting {role} bias shape of {(embed,)}, but got "
                                 f"{b.shape}")
    return tuple(linear(t, w, b) for t, w, b in zip((query, key, value), weights, biases))


def _heads_first(projected, static, role, batch, heads, head_dim):
    """``(S, N, E)`` -> ``(N * heads, S, head_dim)``, or the given ``static_k``/``static_v``
    (already in that layout, checked) in its place."""
    if static is None:
        return projected.view(projected.shape[0], batch * heads, head_dim).transpose(0, 1)
    if static.size(0) != batch * heads:
        raise AssertionError(f"expecting static_{role}.size(0) of {batch * heads}, but got "
                             f"{static.size(0)}")
    if static.size(2) != head_dim:
        raise AssertionError(f"expecting static_{role}.size(2) of {head_dim}, but got "
                             f"{static.size(2)}")
    return static


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """Multi-head attention as ``nn.MultiheadAttention`` computes it, with its weights passed
    in: project query, key and value (``in_proj_weight`` packed ``(3 E, E)``, or
    ``q/k/v_proj_weight`` with ``use_separate_proj_weight``), append ``bias_k``/``bias_v``
    and a zero key/value (``add_zero_attn``) if asked, attend in ``num_heads`` heads with
    scores scaled by ``1 / sqrt(E / num_heads)`` plus the masks, and project with
    ``out_proj_weight``.  Returns ``(output, weights)``; the weights (averaged over heads
    unless ``average_attn_weights=False``) only with ``need_weights``, else ``None``.

    Masks: bool ones are True where attention is *not* allowed, float ones are added.
    Dropout on the weights applies only with ``training``.

    Shape: query ``(L, N, E)`` or ``(L, E)``, key ``(S, N, Ek)``, value ``(S, N, Ev)``,
    ``key_padding_mask`` ``(N, S)``, ``attn_mask`` ``(L, S)`` or ``(N * num_heads, L, S)``
    -> ``(L, N, E)``, weights ``(N, L, S)``.

    Example:
        >>> x = tg.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> out, weights = F.multi_head_attention_forward(
        ...     x, x, x, 2, 1, tg.eye(2).repeat(3, 1), None, None, None, False, 0.0,
        ...     tg.eye(2), None)
        >>> weights
        tensor([[0.6698, 0.3302],
                [0.3302, 0.6698]])
        >>> out
        tensor([[0.6698, 0.3302],
                [0.3302, 0.6698]])
    """
    is_batched = _attention_is_batched(query, key, value, key_padding_mask, attn_mask,
                                       num_heads)
    if not is_batched:                       # one sequence: run it as a batch of one
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    length, batch, embed_dim = query.shape
    source = key.shape[0]
    key_padding_mask = _additive_mask(
        key_padding_mask, "key_padding_mask", None if attn_mask is None else attn_mask.dtype,
        "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError(
            "Need attn_mask if specifying the is_causal hint. You may use the Transformer "
            "module method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        # scaled_dot_product_attention makes the causal mask itself
        attn_mask = None
    else:
        attn_mask = _additive_mask(attn_mask, "attn_mask", None, "", query.dtype)
        if key_padding_mask is not None:
            is_causal = False                # the padding merged in makes the mask not causal
    if embed_dim != embed_dim_to_check:
        raise AssertionError(
            f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {tg.Size(key.shape[:2])} do "
                                 f"not match value's {tg.Size(value.shape[:2])}")
    elif tuple(key.shape) != tuple(value.shape):
        raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")

    if not use_separate_proj_weight:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        q, k, v = _project_packed(query, key, value, in_proj_weight, in_proj_bias)
    else:
        for role, weight in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if weight is None:
                raise AssertionError(
                    f"use_separate_proj_weight is True but {role}_proj_weight is None")
        q, k, v = _project_separately(query, key, value,
                                      (q_proj_weight, k_proj_weight, v_proj_weight),
                                      in_proj_bias)

    if attn_mask is not None:                # one (L, S) mask for all, or one per batch-head
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (length, source):
                raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but "
                                   f"should be {(length, source)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (batch * num_heads, length, source):
                raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but "
                                   f"should be {(batch * num_heads, length, source)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

    if bias_k is not None and bias_v is not None:
        # one more key and value, learnt, which every query may attend to
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = tg.cat([k, bias_k.repeat(1, batch, 1)])
        v = tg.cat([v, bias_v.repeat(1, batch, 1)])
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    elif bias_k is not None:
        raise AssertionError("bias_k is set but bias_v is None")
    elif bias_v is not None:
        raise AssertionError("bias_v is set but bias_k is None")

    q = q.view(length, batch * num_heads, head_dim).transpose(0, 1)
    k = _heads_first(k, static_k, "k", batch, num_heads, head_dim)
    v = _heads_first(v, static_v, "v", batch, num_heads, head_dim)
    if add_zero_attn:                        # one more key and value, of zeros
        zeros = (batch * num_heads, 1, head_dim)
        k = tg.cat([k, tg.zeros(zeros, dtype=k.dtype)], dim=1)
        v = tg.cat([v, tg.zeros(zeros, dtype=v.dtype)], dim=1)
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    source = k.size(1)

    if key_padding_mask is not None:         # merged into the attention mask, per batch-head
        if key_padding_mask.shape[0] != batch:
            raise AssertionError(f"Expected key_padded_mask.shape[0] to be {batch}, but got "
                                 f"{key_padding_mask.shape[0]}")
        if key_padding_mask.shape[1] != source:
            raise AssertionError(f"Expected key_padded_mask.shape[1] to be {source}, but got "
                                 f"{key_padding_mask.shape[1]}")
        key_padding_mask = key_padding_mask.view(batch, 1, 1, source).expand(
            -1, num_heads, -1, -1).reshape(batch * num_heads, 1, source)
        attn_mask = key_padding_mask if attn_mask is None else attn_mask + key_padding_mask
    if not training:
        dropout_p = 0.0

    if need_weights:
        q_scaled = q * math.sqrt(1.0 / float(head_dim))
        if attn_mask is None:
            scores = tg.bmm(q_scaled, k.transpose(-2, -1))
        else:
            scores = tg.baddbmm(attn_mask, q_scaled, k.transpose(-2, -1))
        weights = softmax(scores, dim=-1)
        if dropout_p > 0.0:
            weights = dropout(weights, p=dropout_p)
        attended = tg.bmm(weights, v).transpose(0, 1).reshape(length * batch, embed_dim)
        out = linear(attended, out_proj_weight, out_proj_bias)
        out = out.view(length, batch, out.size(1))
        weights = weights.view(batch, num_heads, length, source)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not is_batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights

    # without the weights: scaled_dot_product_attention on (N, heads, L, S)
    if attn_mask is not None:
        if attn_mask.size(0) == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.view(batch, num_heads, -1, source)
    q = q.view(batch, num_heads, length, head_dim)
    k = k.view(batch, num_heads, source, head_dim)
    v = v.view(batch, num_heads, source, head_dim)
    attended = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    attended = attended.permute(2, 0, 1, 3).reshape(batch * length, embed_dim)
    out = linear(attended, out_proj_weight, out_proj_bias)
    out = out.view(length, batch, out.size(1))
    if not is_batched:
        out = out.squeeze(1)
    return out, None


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports


# ---------------------------------------------------------------------------------------------
# 1-d pools, instance_norm, margin losses and pixel_shuffle, from the ops above
# ---------------------------------------------------------------------------------------------
def _one(v):
    return v[0] if isinstance(v, (tuple, list)) else v


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """``max_pool2d`` along the last dimension of ``(N, C, L)`` or ``(C, L)``.

    Example:
        >>> F.max_pool1d(tg.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2)
        tensor([[[3., 2.]]])
    """
    if input.ndim not in (2, 3):
        raise RuntimeError(f"max_pool1d() Expected 2D or 3D input tensor, but got "
                           f"{list(input.shape)}")
    stride = kernel_size if stride is None or stride == [] else stride
    out, _ = _pool_geometry((input.shape[-1],), (_one(kernel_size),), (_one(stride),),
                            (_one(padding),), (_one(dilation),), ceil_mode)
    if out[0] < 1 and not return_indices:    # (with indices PyTorch goes on to 2-d's text)
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {out[0]}")
    # PyTorch pools a (..., 1, L) image and squeezes it: its nodes are those, and the
    # indices within a (1, L) plane are those within the row
    out = max_pool2d(input.unsqueeze(-2), (1, _one(kernel_size)), (1, _one(stride)),
                     (0, _one(padding)), (1, _one(dilation)), ceil_mode, return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """``avg_pool2d`` along the last dimension of ``(N, C, L)`` or ``(C, L)``.

    Example:
        >>> F.avg_pool1d(tg.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2)
        tensor([[[2., 1.]]])
    """
    if input.ndim not in (2, 3):
        raise RuntimeError(f"avg_pool1d() Expected 2D or 3D input tensor, but got "
                           f"{list(input.shape)}")
    stride = kernel_size if stride is None or stride == [] else stride
    out = avg_pool2d(input.unsqueeze(-2), (1, _one(kernel_size)), (1, _one(stride)),
                     (0, _one(padding)), ceil_mode, count_include_pad)
    return out.squeeze(-2)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalise each channel of each sample of ``(N, C, *)`` over its positions (or, without
    ``use_input_stats``, with the per-channel ``running_mean`` and ``running_var``). Given
    running statistics are updated in place with the mean over the samples of each one's
    statistics, as PyTorch does.

    Example:
        >>> F.instance_norm(tg.tensor([[[1.0, 3.0], [2.0, 2.0]]]))
        tensor([[[-1.0000,  1.0000],
                 [ 0.0000,  0.0000]]])
    """
    shape = input.shape
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError("Expected running_mean and running_var to be defined when "
                           "use_input_stats is false")
    if use_input_stats and (len(shape) < 2 or math.prod(shape[2:]) == 1):
        raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                         f"{shape}")
    # PyTorch's: each (sample, channel) pair a channel of a one-sample batch_norm (its nodes:
    # View, NativeBatchNorm over the view and the repeated weight and bias, View)
    n, c = shape[0], shape[1]
    affine = []
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            t = t.repeat(n)
            if t.numel() != n * c:
                raise RuntimeError(f"{name} should contain {n * c} elements not {t.numel()}")
        affine.append(t)
    # the running statistics repeated per sample, moved by batch_norm, then averaged back
    stats = [None if t is None else t.detach().repeat(n) for t in (running_mean, running_var)]
    out = batch_norm(input.reshape(1, n * c, *shape[2:]), *stats, *affine, use_input_stats,
                     momentum, eps)
    if use_input_stats:
        with tg.no_grad():
            for t, moved in zip((running_mean, running_var), stats):
                if t is not None:
                    t.copy_(moved.reshape(n, c).mean(0))
    return out.reshape(shape)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``log(1 + exp(-target * input))`` for targets of +1/-1, reduced.

    Example:
        >>> F.soft_margin_loss(tg.tensor([0.0]), tg.tensor([1.0]))
        tensor(0.6931)
    """
    _check_reduction(reduction)
    return _named(_reduce(tg.log1p(tg.exp(-target * input)), reduction),
                  "SoftMarginLossBackward0", input)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """The binary cross-entropy of each of ``C`` labels of ``(N, C)`` scores, averaged over
    the labels, then reduced over the samples.

    Example:
        >>> F.multilabel_soft_margin_loss(tg.tensor([[0.0, 0.0]]), tg.tensor([[1.0, 0.0]]))
        tensor(0.6931)
    """
    _check_reduction(reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss.sum(input.ndim - 1) / input.shape[-1], reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """``input`` where the target is 1, ``max(0, margin - input)`` where it is -1, reduced.

    Example:
        >>> F.hinge_embedding_loss(tg.tensor([0.3, 2.0]), tg.tensor([1.0, -1.0]))
        tensor(0.1500)
    """
    _check_reduction(reduction)
    zeros = tg.zeros_like(input)
    margin_clamp = (margin - input).clamp_min(0)
    loss = tg.where(target != 1, margin_clamp, zeros) + tg.where(target != -1, input, zeros)
    return _reduce(loss, reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """The multi-class hinge loss of ``(N, C)`` scores and class indices: the mean over the
    other classes ``i`` of ``max(0, margin - x[y] + x[i]) ** p`` (times ``weight[y]``).  As in
    PyTorch's kernel, a term counts only where ``margin - x[y] + x[i] > 0`` (no gradient at
    0, nor from nan).

    Example:
        >>> F.multi_margin_loss(tg.tensor([[0.1, 0.2, 0.4, 0.8]]), tg.tensor([3]))
        tensor(0.3250)
    """
    _check_reduction(reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    unbatched = input.ndim <= 1
    x = input.reshape(1, -1) if unbatched else input
    target = target if isinstance(target, tg.Tensor) else tg.tensor(np.asarray(target))
    y = target.reshape(-1)
    c = x.shape[1]
    # each row's class picked by comparison, not by indexing with the targets: a compiled
    # call would guard the targets' values and record again for new ones; the range check
    # is a count, which it guards instead
    if _count(y < 0) + _count(y >= c):
        raise RuntimeError("target out of range")
    onehot = y.unsqueeze(1) == tg.arange(c)                      # (N, C)
    picked = tg.where(onehot, x, 0.0).sum(1, keepdim=True)      # one term per row: exact
    z = margin - picked + x
    terms = tg.where(z > 0.0, z * z if p == 2 else z, 0.0)
    if weight is not None:
        weight = weight if isinstance(weight, tg.Tensor) else _constant(weight)
        terms = terms * tg.where(onehot, weight, 0.0).sum(1, keepdim=True)
    loss = tg.where(onehot, 0.0, terms).sum(1) / c
    if unbatched:
        loss = loss.reshape(())
    return _named(_reduce(loss, reduction), "MultiMarginLossBackward0", input)


def pixel_unshuffle(input, downscale_factor):
    """``(*, C, H r, W r)`` rearranged to ``(*, C r^2, H, W)``: the inverse of
    ``pixel_shuffle``; one node, ``PixelUnshuffleBackward0``.

    Example:
        >>> F.pixel_unshuffle(tg.arange(4.0).reshape(1, 1, 2, 2), 2).reshape(-1)
        tensor([0., 1., 2., 3.])
    """
    r = downscale_factor
    if input.ndim < 3:
        raise RuntimeError("pixel_unshuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *batch, c, h, w = input.shape
    if h % r:
        raise RuntimeError("pixel_unshuffle expects height to be divisible by "
                           f"downscale_factor, but input.size(-2)={h} is not divisible by {r}")
    if w % r:
        raise RuntimeError("pixel_unshuffle expects width to be divisible by "
                           f"downscale_factor, but input.size(-1)={w} is not divisible by {r}")
    n = len(batch)
    # (rows h r + i and columns w r + j go to channel c r^2 + i r + j)
    x = input.reshape(*batch, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    out = x.reshape(*batch, c * r * r, h // r, w // r)
    return _named(out, "PixelUnshuffleBackward0", input)


def channel_shuffle(input, groups):
    """The channels (dim 1) of ``(N, C, *)`` split into ``groups`` groups and interleaved
    (``tapegrad.channel_shuffle``; one node, ``ChannelShuffleBackward0``).

    Example:
        >>> F.channel_shuffle(tg.arange(6.0).reshape(1, 6, 1), 3).reshape(-1)
        tensor([0., 2., 4., 1., 3., 5.])
    """
    return tg.channel_shuffle(input, groups)


def native_channel_shuffle(input, groups):
    """``channel_shuffle``'s values without a derivative (``tapegrad.native_channel_shuffle``:
    a backward through it raises, as PyTorch's does).

    Example:
        >>> F.native_channel_shuffle(tg.arange(6.0).reshape(1, 6, 1), 2).reshape(-1)
        tensor([0., 3., 1., 4., 2., 5.])
    """
    return tg.native_channel_shuffle(input, groups)


def pixel_shuffle(input, upscale_factor):
    """``(*, C r^2, H, W)`` rearranged to ``(*, C, H r, W r)``.

    Example:
        >>> F.pixel_shuffle(tg.arange(4.0).reshape(1, 4, 1, 1), 2)
        tensor([[[[0., 1.],
                  [2., 3.]]]])
    """
    r = upscale_factor
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got "
                           f"input with {input.ndim} dimension(s)")
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    n = len(batch)
    x = input.reshape(*batch, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return _named(x.reshape(*batch, c // (r * r), h * r, w * r), "PixelShuffleBackward0", input)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max pooling into an ``output_size`` grid of windows (PyTorch's adaptive window bounds;
    an int for a square grid, ``None`` to keep a dimension); the gradient goes to the first
    largest element of a window (the last nan of one with nans), as in PyTorch.

    Shape: ``(N, C, H, W)`` or ``(C, H, W)`` -> ``(..., out_H, out_W)``.

    Example:
        >>> F.adaptive_max_pool2d(tg.arange(16.0).reshape(1, 1, 4, 4), 1)
        tensor([[[[15.]]]])
    """
    if input.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got "
                           f"{list(input.shape)}")
    sizes = (output_size,) * 2 if isinstance(output_size, int) or output_size is None \
        else tuple(output_size)
    h, w = input.shape[-2:]
    oh, ow = (s if o is None else o for s, o in zip((h, w), sizes))

    def bounds(i, size, out):
        return (i * size) // out, -((-(i + 1) * size) // out)
    rows, index_rows = [], []
    for i in range(oh):
        h0, h1 = bounds(i, h, oh)
        cells, index_cells = [], []
        for j in range(ow):
            w0, w1 = bounds(j, w, ow)
            window = input[..., h0:h1, w0:w1]
            # flat positions of the window's elements in the (H, W) plane, in scan order
            flat = (np.arange(h0, h1)[:, None] * w + np.arange(w0, w1)[None, :]).reshape(-1)
            value, index = _first_maximum(window.reshape(*window.shape[:-2], -1), flat,
                                          np.ones(flat.shape, dtype=bool), flat[0],
                                          return_indices)
            cells.append(value)
            index_cells.append(index)
        rows.append(tg.stack(cells, -1))
        if return_indices:
            index_rows.append(tg.stack(index_cells, -1))
    result = _named(tg.stack(rows, -2), "AdaptiveMaxPool2DBackward0", input)
    return (result, tg.stack(index_rows, -2)) if return_indices else result


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max pooling into ``output_size`` windows (PyTorch's adaptive window bounds) of
    ``(N, C, L)`` or ``(C, L)``; ``return_indices`` also returns each maximum's position.

    Example:
        >>> F.adaptive_max_pool1d(tg.tensor([[[1.0, 3.0, 2.0, 0.0, 5.0]]]), 2)
        tensor([[[3., 5.]]])
    """
    if input.ndim not in (2, 3):
        raise RuntimeError(f"adaptive_max_pool1d() Expected 2D or 3D input tensor, but got "
                           f"{list(input.shape)}")
    if not isinstance(output_size, int):
        if len(output_size) != 1:
            raise RuntimeError("adaptive_max_pool1d() argument 'output_size' should contain "
                               f"one int (got {len(output_size)})")
        output_size, = output_size
    # PyTorch pools a (..., 1, L) image and squeezes it: its nodes are those
    out = adaptive_max_pool2d(input.unsqueeze(-2), (1, output_size), return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max pooling into an ``output_size`` volume of windows (PyTorch's adaptive window
    bounds; an int for a cube, ``None`` to keep a dimension); the gradient goes to the first
    largest element of a window, as ``adaptive_max_pool2d``'s.  ``return_indices`` also
    returns each maximum's flat position in its ``(D, H, W)`` volume.

    Shape: ``(N, C, D, H, W)`` or ``(C, D, H, W)`` -> ``(..., *output_size)``.

    Example:
        >>> F.adaptive_max_pool3d(tg.arange(8.0).reshape(1, 1, 2, 2, 2), 1)
        tensor([[[[[7.]]]]])
    """
    if input.ndim not in (4, 5):
        raise RuntimeError(f"adaptive_max_pool3d(): Expected 4D or 5D tensor, but got: "
                           f"{list(input.shape)}")
    sizes = (output_size,) * 3 if isinstance(output_size, int) or output_size is None \
        else tuple(output_size)
    spatial = input.shape[-3:]
    outs = [s if o is None else o for s, o in zip(spatial, sizes)]

    def bounds(i, size, out):
        return (i * size) // out, -((-(i + 1) * size) // out)
    _, h, w = spatial
    planes, index_planes = [], []
    for a in range(outs[0]):
        d0, d1 = bounds(a, spatial[0], outs[0])
        rows, index_rows = [], []
        for b in range(outs[1]):
            h0, h1 = bounds(b, spatial[1], outs[1])
            cells, index_cells = [], []
            for c in range(outs[2]):
                w0, w1 = bounds(c, spatial[2], outs[2])
                window = input[..., d0:d1, h0:h1, w0:w1]
                # flat positions of the window's elements in the (D, H, W) volume, in the
                # order PyTorch's kernel scans them (depth, then rows, then columns)
                flat = ((np.arange(d0, d1)[:, None, None] * h
                         + np.arange(h0, h1)[None, :, None]) * w
                        + np.arange(w0, w1)[None, None, :]).reshape(-1)
                value, index = _first_maximum(window.reshape(*window.shape[:-3], -1), flat,
                                              np.ones(flat.shape, dtype=bool), flat[0],
                                              return_indices)
                cells.append(value)
                index_cells.append(index)
            rows.append(tg.stack(cells, -1))
            if return_indices:
                index_rows.append(tg.stack(index_cells, -1))
        planes.append(tg.stack(rows, -2))
        if return_indices:
            index_planes.append(tg.stack(index_rows, -2))
    result = _named(tg.stack(planes, -3), "AdaptiveMaxPool3DBackward0", input)
    return (result, tg.stack(index_planes, -3)) if return_indices else result


_INTERPOLATE_MODES = ("nearest | linear | bilinear | bicubic | trilinear | lanczos | area | "
                      "nearest-exact")
# the modes that need one input rank, and PyTorch's name for their node
_INTERPOLATE_RANK = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}
_INTERPOLATE_NODE = {"linear": "UpsampleLinear1D", "bilinear": "UpsampleBilinear2D",
                     "bicubic": "UpsampleBicubic2D", "trilinear": "UpsampleTrilinear3D"}


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):  # noqa: A002
    """``adaptive_max_pool1d`` that also returns the indices (whatever ``return_indices``
    says).

    Example:
        >>> adaptive_max_pool1d_with_indices(tg.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2)[1]
        tensor([[[1, 2]]])
    """
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):  # noqa: A002
    """``adaptive_max_pool2d`` that also returns the indices (whatever ``return_indices``
    says).

    Example:
        >>> adaptive_max_pool2d_with_indices(tg.arange(16.0).reshape(1, 1, 4, 4), 1)[1]
        tensor([[[[15]]]])
    """
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):  # noqa: A002
    """``adaptive_max_pool3d`` that also returns the indices (whatever ``return_indices``
    says).

    Example:
        >>> adaptive_max_pool3d_with_indices(tg.arange(8.0).reshape(1, 1, 2, 2, 2), 1)[1]
        tensor([[[[[7]]]]])
    """
    return adaptive_max_pool3d(input, output_size, True)


def _interpolate_sizes(input, size, scale_factor, recompute_scale_factor, mode):
    """PyTorch's argument checks of ``interpolate``, in its order: the output size and the
    scale factor (None when PyTorch's kernel would derive the scale from the sizes) of each
    spatial dimension."""
    n = input.ndim - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != n:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got "
                    f"input with spatial dimensions of {list(input.shape[2:])} and output size "
                    f"of {size}. Please provide input tensor in (N, C, d1, d2, ...,dK) format "
                    "and output size in (o1, o2, ...,oK) format.")
            if not all(_is_integer(v) for v in size):
                raise TypeError(
                    "expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                    f"Tuple[int, int, int], but got size with types {[type(v) for v in size]}")
            sizes = [int(v) for v in size]
        else:
            sizes = [int(size)] * n
        factors = [None] * n
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != n:
                raise ValueError(
                    "Input and scale_factor must have the same number of spatial dimensions, "
                    f"but got input with spatial dimensions of {list(input.shape[2:])} and "
                    f"scale_factor of shape {scale_factor}. Please provide input tensor in "
                    "(N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.")
            factors = [float(v) for v in scale_factor]
        else:
            factors = [float(scale_factor)] * n
        # PyTorch truncates ``in * scale`` (in double) to the output size
        sizes = [int(input.shape[2 + k] * factors[k]) for k in range(n)]
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if recompute_scale_factor or mode == "area":
        factors = [None] * n       # the kernel then takes in / out as the scale
    return sizes, factors


def _is_integer(value):
    if isinstance(value, (bool, np.bool_)):
        return isinstance(value, bool)
    if isinstance(value, (int, np.integer)):
        return True
    return isinstance(value, tg.Tensor) and not value.is_floating_point()


def _check_output_sizes(in_sizes, out_sizes):
    """PyTorch's kernels' check that no size is zero or negative (its text per rank)."""
    if all(s > 0 for s in in_sizes) and all(s > 0 for s in out_sizes):
        return
    letters = "DHW"[3 - len(in_sizes):]
    shown_in = ", ".join(f"{c}: {s}" for c, s in zip(letters, in_sizes))
    shown_out = ", ".join(f"{c}: {s}" for c, s in zip(letters, out_sizes))
    joint = " and " if len(in_sizes) == 1 else " "
    raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                       f"({shown_in}){joint}output ({shown_out})")


def _source_scale(in_size, out_size, align_corners, factor):
    """PyTorch's area_pixel_compute_scale (in double): the step in input coordinates per
    output pixel; a given scale factor counts as ``1 / factor``, not ``in / out``."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    if factor is not None and factor > 0:
        return 1.0 / factor
    return in_size / out_size


def _source_positions(in_size, out_size, align_corners, factor, cubic):
    """PyTorch's area_pixel_compute_source_index for every output pixel: the real input
    coordinate it samples (half-pixel centres unless ``align_corners``; linear modes clamp a
    negative one to 0, cubic keeps it)."""
    scale = _source_scale(in_size, out_size, align_corners, factor)
    dst = np.arange(out_size, dtype=np.float64)
    if align_corners:
        return scale * dst
    src = scale * (dst + 0.5) - 0.5
    return src if cubic else np.maximum(src, 0.0)


def _linear_taps(in_size, out_size, align_corners, factor):
    """The two input indices and weights of each output pixel of linear interpolation."""
    if in_size == out_size:
        # PyTorch's kernel copies when the sizes agree, whatever the scale factor says
        index = np.arange(out_size)
        return [(index, np.ones(out_size)), (index, np.zeros(out_size))]
    src = _source_positions(in_size, out_size, align_corners, factor, cubic=False)
    low = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    frac = np.clip(src - low, 0.0, 1.0)
    high = low + (low < in_size - 1)
    return [(low, 1.0 - frac), (high, frac)]


def _cubic_taps(in_size, out_size, align_corners, factor):
    """The four input indices (clamped to the border, as PyTorch reads them) and the cubic
    convolution weights (Keys, A = -0.75) of each output pixel of bicubic interpolation."""
    src = _source_positions(in_size, out_size, align_corners, factor, cubic=True)
    low = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    t = np.clip(src - low, 0.0, 1.0)
    a = -0.75

    def near(x):        # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):         # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    weights = (far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t))
    return [(np.clip(low - 1 + j, 0, in_size - 1), weights[j]) for j in range(4)]


def _weighted_gather(input, dim, taps):
    """``sum_j input[..., index_j, ...] * weight_j`` along ``dim``: one resampling pass made
    of index_select, products and sums, so its gradient, replay and vmap come from theirs."""
    shape = [1] * input.ndim
    shape[dim] = -1
    out = None
    for index, weight in taps:
        term = input.index_select(dim, tg.tensor(np.asarray(index, dtype=np.int64))) \
            * _constant(np.asarray(weight, dtype=np.float64).reshape(shape))
        out = term if out is None else out + term
    return out


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dimensions of ``(N, C, *spatial)`` to ``size`` or by
    ``scale_factor``, as PyTorch: ``"nearest"`` (source index ``floor(i * scale)``),
    ``"nearest-exact"`` (``floor((i + 0.5) * scale)``), ``"linear"`` / ``"bilinear"`` /
    ``"trilinear"`` for 3-D / 4-D / 5-D input and ``"bicubic"`` (4-D; cubic convolution with
    ``A = -0.75``, border pixels repeated) with ``align_corners`` (default False: half-pixel
    centres, and a given ``scale_factor`` is used as the scale unless
    ``recompute_scale_factor``), and ``"area"`` (adaptive average pooling).  ``antialias``
    is not supported.

    Example:
        >>> F.interpolate(tg.tensor([[[1.0, 2.0]]]), scale_factor=2)
        tensor([[[1., 1., 2., 2.]]])
        >>> F.interpolate(tg.tensor([[[1.0, 2.0]]]), scale_factor=2, mode="linear")
        tensor([[[1.0000, 1.2500, 1.7500, 2.0000]]])
    """
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating "
                             "modes: linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    n = input.ndim - 2
    sizes, factors = _interpolate_sizes(input, size, scale_factor, recompute_scale_factor, mode)
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.ndim == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos "
                         "modes and requires a 4-D tensor as input")
    rank = _INTERPOLATE_RANK.get(mode)
    if mode in ("nearest", "area", "nearest-exact"):
        supported = input.ndim in (3, 4, 5)
    else:
        supported = input.ndim == rank or (mode == "lanczos" and input.ndim == 4)
    if not supported:
        if mode in ("linear", "bilinear", "trilinear") and input.ndim in (3, 4, 5):
            raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                      f"{rank}D input")
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported "
                                  f"(got {input.ndim}D) for the modes: {_INTERPOLATE_MODES} "
                                  f"(got {mode})")
    if mode == "lanczos":
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
    if antialias:
        raise NotImplementedError(f"interpolate: antialias=True (mode {mode!r}) is not "
                                  "supported by tapegrad")
    in_sizes = list(input.shape[2:])
    if mode == "area":
        # PyTorch pools adaptively to the (recomputed) output size: nodes and all
        if n == 1:
            return adaptive_avg_pool1d(input, sizes[0])
        return _adaptive_avg_pool(input, tuple(sizes), n, f"adaptive_avg_pool{n}d")
    _check_output_sizes(in_sizes, sizes)
    out = input
    for k in range(n):
        dim, in_size, out_size, factor = 2 + k, in_sizes[k], sizes[k], factors[k]
        if mode in ("nearest", "nearest-exact"):
            # PyTorch's nearest kernels hold the scale in float32
            scale = np.float32(in_size) / np.float32(out_size) \
                if factor is None or factor <= 0 else np.float32(1.0 / factor)
            dst = np.arange(out_size) + (0.5 if mode == "nearest-exact" else 0.0)
            src = np.floor((dst * scale).astype(np.float32)).astype(np.int64)
            # (PyTorch's nearest backward, not its forward, takes out == in and out == 2 in
            # as a copy and a halving whatever the scale factor: a scale_factor that is not
            # 1 or 2 but gives such sizes has a different gradient there; not mirrored)
            out = out.index_select(dim, tg.tensor(np.minimum(src, in_size - 1)))
        elif mode == "bicubic":
            out = _weighted_gather(out, dim, _cubic_taps(in_size, out_size, align_corners,
                                                         factor))
        else:
            out = _weighted_gather(out, dim, _linear_taps(in_size, out_size, align_corners,
                                                          factor))
    if mode == "nearest":
        name = f"UpsampleNearest{n}DBackward0"
    elif mode == "nearest-exact":
        name = f"UpsampleNearestExact{n}DBackward0"
    else:
        name = f"{_INTERPOLATE_NODE[mode]}Backward0"
    return _named(out, name, input)


def _deprecated_upsample(name):
    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=3)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated: ``interpolate(input, size, scale_factor, mode, align_corners)``, after
    PyTorch's ``UserWarning`` that says so.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     F.upsample(tg.tensor([[[1.0, 2.0]]]), scale_factor=2)
        tensor([[[1., 1., 2., 2.]]])
    """
    _deprecated_upsample("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(input, size, scale_factor, mode="nearest")``, after
    PyTorch's ``UserWarning`` that says so.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     F.upsample_nearest(tg.tensor([[[[1.0, 2.0]]]]), size=(1, 4))
        tensor([[[[1., 1., 2., 2.]]]])
    """
    _deprecated_upsample("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(input, size, scale_factor, mode="bilinear",
    align_corners=True)`` (corner pixels aligned), after PyTorch's ``UserWarning`` that says
    so.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     F.upsample_bilinear(tg.tensor([[[[1.0, 2.0]]]]), size=(1, 3))
        tensor([[[[1.0000, 1.5000, 2.0000]]]])
    """
    _deprecated_upsample("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def _unpool_output_size(input, kernel, stride, padding, output_size):
    """PyTorch's unpooled spatial size: the pool's input size that gives ``input``'s, or
    ``output_size`` (with or without the leading N, C) if it is one of those."""
    n = len(kernel)
    default = [(input.shape[input.ndim - n + d] - 1) * stride[d] + kernel[d] - 2 * padding[d]
               for d in range(n)]
    if output_size is None:
        return _nonnegative(default)
    if len(output_size) == n + 2:
        output_size = output_size[2:]
    if len(output_size) != n:
        raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} "
                         f"elements, but it has a length of '{len(output_size)}'")
    for d in range(n):
        low, high = default[d] - stride[d], default[d] + stride[d]
        if not low < output_size[d] < high:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between '
                             f'{low} and {high})')
    return _nonnegative([int(s) for s in output_size])


def _nonnegative(size):
    for d, length in enumerate(size):
        if length < 0:
            raise ValueError(f"max_unpooling: output_size must contain non-negative spatial "
                             f"dimensions, but got output_size[{d}]={length}")
    return size


def _guarded_any(mask, kind):
    """Whether ``mask`` holds a True, as a value a compiled replay checks (a guard) and
    recomputes from its inputs (``any()`` itself makes a replay record again)."""
    if mask.numel() == 0:
        return False
    found = mask.double().amax() > 0.0
    read_value(found, kind)
    return bool(found._value)


def _unpool_in_windows(input, indices, size, n, kernel, stride, padding):
    """max_unpool when every index lies in its own pool window (the window of the same
    kernel, stride and padding at the value's place) and no two values share a position:
    what max_pool gives without overlapping windows.  Each value goes to each tap of its
    window where the index names that tap: comparisons and a scatter at positions from the
    shapes only, which a compiled replay recomputes for new indices (a scatter at the
    indices' own values would record them).  The two conditions are guarded values; None
    where they fail (the general scatter then)."""
    spatial = tuple(input.shape[input.ndim - n:])
    if input.numel() == 0:
        return None
    grids = np.meshgrid(*[np.arange(o) * s - p for o, s, p in zip(spatial, stride, padding)],
                        *[np.arange(k) for k in kernel], indexing="ij")
    flat = np.zeros(grids[0].shape, dtype=np.int64)
    inside = np.ones(grids[0].shape, dtype=bool)
    for axis in range(n):
        position = grids[axis] + grids[n + axis]
        inside &= (position >= 0) & (position < size[axis])
        flat = flat * size[axis] + position
    flat, inside = flat.reshape(*spatial, -1), inside.reshape(*spatial, -1)
    # (a tap outside the output never matches: -1 is no index that got this far)
    taps = tg.from_numpy(np.ascontiguousarray(np.where(inside, flat, -1)))
    match = indices.unsqueeze(-1) == taps                        # (*batch, *spatial, taps)
    if _guarded_any(match.double().sum(-1) != 1.0, "max_unpool's indices in their windows"):
        return None
    plane = math.prod(size)
    planes = math.prod(input.shape[:input.ndim - n])
    # the scatter's positions: each plane's taps, those outside sent to a tap they do not
    # reach (they carry zeros)
    target = (np.arange(planes).reshape(-1, 1) * plane
              + np.where(inside, flat, 0).reshape(1, -1)).reshape(-1)
    writes = _elementwise.scatter_add_flat(match.double(), target, planes * plane)
    if _guarded_any(writes > 1.0, "max_unpool's check for repeated indices"):
        return None
    # (where, not a product with the match: a nan or inf value times 0 is no 0)
    spread = tg.where(match, input.unsqueeze(-1), 0.0)
    return _elementwise.scatter_add_flat(spread, target, planes * plane)


def _max_unpool(input, indices, size, name, n, kernel, stride, padding):
    """Each value of ``input`` written at its flat position ``indices`` of a zero
    ``size``-plane (per image and channel).  Where positions repeat, the last write is the
    value, as in PyTorch's loop, and PyTorch's gradient still gathers the output's gradient
    at every position, the overwritten ones included."""
    if indices.dtype != tg.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: "
                           f"{indices.dtype.scalar_name}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape)}) but got indices tensor with shape: "
                           f"{list(indices.shape)}")
    if input.ndim not in (n + 1, n + 2) or input.numel() == 0 and input.ndim != n + 2:
        raise RuntimeError(f"Input to max_unpooling{n}d should be a {n + 1}d or {n + 2}d "
                           f"Tensor, but got a tensor with {input.ndim} dimensions.")
    plane = math.prod(size)
    if plane == 0:      # (nothing to write: PyTorch checks no index)
        return _named(tg.zeros(*input.shape[:input.ndim - n], *size, dtype=input.dtype)
                      + 0.0 * input.sum(), f"MaxUnpool{n}DBackward0", input)
    # (the check reads a value: a compiled replay guards that none is out of range)
    if _guarded_any(indices < 0, "max_unpool's index check") or \
            _guarded_any(indices >= plane, "max_unpool's index check"):
        # PyTorch's loop goes on past a wrong index and reports the last one
        positions = indices._value
        wrong = (positions < 0) | (positions >= plane)
        raise RuntimeError(f"Found an invalid max index: {positions[wrong].reshape(-1)[-1]} "
                           f"(output volumes are of size {'x'.join(str(s) for s in size)})")
    batch = tuple(input.shape[:input.ndim - n])
    windowed = _unpool_in_windows(input, indices, size, n, kernel, stride, padding)
    if windowed is not None:
        return _named(windowed.reshape(*batch, *size), f"MaxUnpool{n}DBackward0", input)
    values = input.reshape(*batch, -1)
    where = indices.reshape(*batch, -1)
    zeros = tg.zeros(*batch, plane, dtype=input.dtype)
    # Positions written twice (overlapping pool windows that share a maximum) are read as a
    # guarded bool, so a compiled replay of the usual case stays a plain scatter
    writes = zeros.scatter_add(-1, where, tg.ones(*batch, values.shape[-1],
                                                  dtype=input.dtype))
    if not _guarded_any(writes > 1.0, "max_unpool's check for repeated indices"):
        out = zeros.scatter(-1, where, values)
    else:
        # the value of the last write, plus a scatter-add of a zero whose gradient is a
        # gather at every position: PyTorch's backward, which the overwritten values get too
        # (a value minus itself is 0 only if finite: an inf or nan carries no gradient there)
        constant = values.detach()
        carrier = tg.where(values - constant == 0.0, values - constant, 0.0)
        out = zeros.scatter(-1, where, constant) + zeros.scatter_add(-1, where, carrier)
    return _named(out.reshape(*batch, *size), f"MaxUnpool{n}DBackward0", input)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of ``max_pool1d(..., return_indices=True)``: each value put back at its
    index of a zero ``(N, C, L_out)`` row, ``L_out = (L - 1) * stride - 2 * padding +
    kernel_size`` unless ``output_size`` gives one within ``stride`` of it.

    Example:
        >>> out, idx = F.max_pool1d(tg.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2, return_indices=True)
        >>> F.max_unpool1d(out, idx, 2)
        tensor([[[0., 3., 2., 0.]]])
    """
    kernel = _pair(kernel_size, 1)
    stride = kernel if stride is None else _pair(stride, 1, "stride")
    size = _unpool_output_size(input, kernel, stride, _pair(padding, 1, "padding"),
                               output_size)
    # PyTorch unpools a (..., L, 1) image and squeezes it: its nodes and texts are those
    out = _max_unpool(input.unsqueeze(-1), indices.unsqueeze(-1), size + [1], "max_unpool2d",
                      2, kernel + (1,), stride + (1,), _pair(padding, 1, "padding") + (0,))
    return out.squeeze(-1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of ``max_pool2d(..., return_indices=True)``: each value put back at its
    flat index of a zero ``(H_out, W_out)`` plane (zeros elsewhere); ``H_out = (H - 1) *
    stride - 2 * padding + kernel_size`` unless ``output_size`` gives one within ``stride``
    of it.  Where indices repeat the last value is kept; every value gets the gradient at
    its index, as in PyTorch.

    Example:
        >>> x = tg.arange(16.0).reshape(1, 1, 4, 4)
        >>> out, idx = F.max_pool2d(x, 2, return_indices=True)
        >>> F.max_unpool2d(out, idx, 2)
        tensor([[[[ 0.,  0.,  0.,  0.],
                  [ 0.,  5.,  0.,  7.],
                  [ 0.,  0.,  0.,  0.],
                  [ 0., 13.,  0., 15.]]]])
    """
    kernel = _pair(kernel_size, 2)
    stride = kernel if stride is None else _pair(stride, 2, "stride")
    padding = _pair(padding, 2, "padding")
    size = _unpool_output_size(input, kernel, stride, padding, output_size)
    return _max_unpool(input, indices, size, "max_unpool2d", 2, kernel, stride, padding)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """``max_unpool2d`` for ``max_pool3d``'s output and indices: ``(N, C, D, H, W)`` or
    ``(C, D, H, W)``.

    Example:
        >>> x = tg.arange(8.0).reshape(1, 1, 2, 2, 2)
        >>> out, idx = F.max_pool3d(x, 2, return_indices=True)
        >>> F.max_unpool3d(out, idx, 2).flatten()
        tensor([0., 0., 0., 0., 0., 0., 0., 7.])
    """
    kernel = _pair(kernel_size, 3)
    stride = kernel if stride is None else _pair(stride, 3, "stride")
    padding = _pair(padding, 3, "padding")
    size = _unpool_output_size(input, kernel, stride, padding, output_size)
    return _max_unpool(input, indices, size, "max_unpool3d", 3, kernel, stride, padding)


def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, n):
    """PyTorch's composition: the average pool of ``x ** p``, times the window size, to the
    power ``1 / p`` (a negative average, from negative x and odd p, is taken as 0)."""
    kernel = _pair(kernel_size, n)
    if norm_type in (math.inf, -math.inf):      # the largest (smallest) |x| of each window
        peak = (max_pool1d, max_pool2d, max_pool3d)[n - 1]
        if norm_type > 0:
            return peak(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        return -peak(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    pool = (avg_pool1d, avg_pool2d, avg_pool3d)[n - 1]
    if stride is not None:
        out = pool(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = pool(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return (tg.sign(out) * relu(tg.abs(out))).mul(math.prod(kernel)).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """The ``norm_type``-norm of each window along the last dimension:
    ``(sum x ** p) ** (1 / p)``.

    Example:
        >>> F.lp_pool1d(tg.tensor([[[3.0, 4.0, 1.0, 0.0]]]), 2, 2)
        tensor([[[5., 1.]]])
    """
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """The ``norm_type``-norm of each ``kernel_size`` window: ``(sum x ** p) ** (1 / p)``.

    Example:
        >>> F.lp_pool2d(tg.tensor([[[[3.0, 4.0], [0.0, 0.0]]]]), 2, 2)
        tensor([[[[5.]]]])
    """
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``lp_pool2d`` over three spatial dimensions.

    Example:
        >>> F.lp_pool3d(tg.ones(1, 1, 2, 2, 2), 2, 2)
        tensor([[[[[2.8284]]]]])
    """
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 3)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """``max_pool1d`` that also returns the indices (whatever ``return_indices`` says).

    Example:
        >>> F.max_pool1d_with_indices(tg.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2)[1]
        tensor([[[1, 2]]])
    """
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """``max_pool2d`` that also returns the indices (whatever ``return_indices`` says).

    Example:
        >>> F.max_pool2d_with_indices(tg.arange(16.0).reshape(1, 1, 4, 4), 2)[1]
        tensor([[[[ 5,  7],
                  [13, 15]]]])
    """
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """``max_pool3d`` that also returns the indices (whatever ``return_indices`` says).

    Example:
        >>> F.max_pool3d_with_indices(tg.arange(8.0).reshape(1, 1, 2, 2, 2), 2)[1]
        tensor([[[[[7]]]]])
    """
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


# the multi-label and distance-function margin losses, fractional max pooling and the
# adaptive pools' *_with_indices names (their modules import this one: last)
from .margin_losses import (multilabel_margin_loss,  # noqa: E402,F401
                            triplet_margin_with_distance_loss)
from .fractional_pool import (fractional_max_pool2d,  # noqa: E402,F401
                              fractional_max_pool2d_with_indices, fractional_max_pool3d,
                              fractional_max_pool3d_with_indices)
