"""Functions PyTorch exposes at top level as well as in ``torch.nn.functional``.

PyTorch's ATen functions are bound in ``torch`` itself, so programs call ``torch.selu(x)``,
``torch.dropout(x, 0.5, True)`` or ``torch.conv2d(x, w)`` as often as ``F.selu(x)``.  Under
``import tapegrad as torch`` those calls stopped with an AttributeError although tapegrad
has each function in ``nn.functional``.  The wrappers here give them PyTorch's top-level
signatures, which are not always nn.functional's (``dropout(input, p, train)`` takes three
required arguments, ``max_pool2d`` has no ``return_indices``, ``rrelu`` a ``generator``),
and check their tensor arguments as PyTorch's argument parser does.  No op is defined here:
each wrapper calls the function that already records PyTorch's nodes.  A few other ATen
names live here for the same reason: ``rsub``, ``scalar_tensor``, ``split_with_sizes``,
``detach``, ``is_inference`` and the window functions (``hann_window``, ...).
"""
import functools
import inspect
import math
import numbers

import numpy as np

from . import _dtype
from . import _device
from . import creation as _creation
from . import function as _function
from . import functional as _functional
from ._argtypes import not_tensor as _not_tensor
from ._argtypes import type_name as _type_name
from ._generator import Generator as _Generator
from .nn import functional as _F
from .tape import state as _state
from .tensor import Tensor

__all__ = ["alpha_dropout", "celu", "celu_", "dropout", "feature_alpha_dropout",
           "feature_dropout", "relu_", "rrelu", "rrelu_", "selu", "selu_", "threshold",
           "threshold_",
           "adaptive_avg_pool1d", "avg_pool1d", "bilinear", "conv1d", "conv2d", "max_pool1d",
           "max_pool2d", "pairwise_distance", "pixel_shuffle", "rms_norm",
           "batch_norm", "embedding", "group_norm", "instance_norm", "layer_norm",
           "binary_cross_entropy_with_logits", "cosine_embedding_loss", "hinge_embedding_loss",
           "kl_div", "margin_ranking_loss", "poisson_nll_loss", "triplet_margin_loss",
           "detach", "is_inference", "rsub", "scalar_tensor", "split_with_sizes",
           "bartlett_window", "blackman_window", "hamming_window", "hann_window",
           "kaiser_window", "channel_shuffle", "pixel_unshuffle", "unravel_index", "asarray",
           "adaptive_max_pool1d", "max_pool1d_with_indices", "conv3d", "max_pool3d",
           "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
           "native_channel_shuffle"]

_MISSING = object()


def _tensors(*names, optional=()):
    """Decorator: the arguments ``names`` of the function must be tensors (or None where the
    parameter's default is None or it is named in ``optional``), else PyTorch's TypeError,
    which gives the position only for an argument passed by position.  The check runs
    before the wrapped function, which would otherwise fail on ``x.ndim`` with an
    AttributeError or take a list as data."""
    def decorate(fn):
        params = list(inspect.signature(fn).parameters.values())
        checks = [(i, p.name, p.default is None or p.name in optional)
                  for i, p in enumerate(params) if p.name in names]

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            for i, name, optional in checks:
                if i < len(args):
                    obj, pos = args[i], i + 1
                else:
                    obj, pos = kwargs.get(name, _MISSING), None
                if obj is _MISSING or isinstance(obj, Tensor) or (optional and obj is None):
                    continue
                raise _not_tensor(fn.__name__, name, pos, obj)
            return fn(*args, **kwargs)
        return checked
    return decorate


def _dropped(input, p, train, feature, alpha, fname, inplace=False):
    """PyTorch's parser refuses a ``p`` that is not a number (a one-element tensor is one)
    and a ``train`` that is not a bool (an int too); then ATen checks the range of ``p``,
    whether it is used or not, and returns ``input`` itself when nothing is dropped, before
    feature dropout's check of the rank.  ``inplace``: the ``dropout_`` forms."""
    if isinstance(p, Tensor) and p.numel() == 1:
        p = p.item()
    # (a bool is a number to PyTorch's parser: torch.dropout(x, True, False) runs)
    if not isinstance(p, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{fname}(): argument 'p' (position 2) must be float, not "
                        f"{_type_name(p)}")
    if not isinstance(train, (bool, np.bool_)):
        raise TypeError(f"{fname}(): argument 'train' (position 3) must be bool, not "
                        f"{_type_name(train)}")
    if p < 0.0 or p > 1.0:
        # (ATen's text prints p as C++ streams a double: 2, not 2.0)
        raise RuntimeError("dropout probability has to be between 0 and 1, but got "
                           f"{float(p):g}")
    if p == 0 or not train or input.numel() == 0:
        return input
    return _F._dropout_impl(input, float(p), True, inplace, feature, alpha)


@_tensors("input")
def dropout(input, p, train):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` when
    ``train``; ``input`` itself otherwise.  PyTorch's mask for the same seed.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> tg.dropout(tg.ones(6), 0.5, True)
        tensor([0., 0., 2., 0., 0., 0.])
    """
    return _dropped(input, p, train, False, False, "dropout")


@_tensors("input")
def alpha_dropout(input, p, train):
    """Alpha dropout (for SELU networks) when ``train``: see ``nn.functional.alpha_dropout``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> tg.alpha_dropout(tg.ones(3), 0.5, True)
        tensor([-0.7792, -0.7792,  1.6656])
    """
    return _dropped(input, p, train, False, True, "alpha_dropout")


@_tensors("input")
def feature_dropout(input, p, train):
    """Dropout of whole channels (dims 0 and 1 pick one) when ``train``: what
    ``nn.functional.dropout2d`` computes for a batched input.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> tg.feature_dropout(tg.ones(1, 3, 2), 0.5, True)
        tensor([[[0., 0.],
                 [0., 0.],
                 [2., 2.]]])
    """
    return _dropped(input, p, train, True, False, "feature_dropout")


@_tensors("input")
def feature_alpha_dropout(input, p, train):
    """Alpha dropout of whole channels when ``train``: see ``alpha_dropout``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> tg.feature_alpha_dropout(tg.ones(1, 3, 1), 0.5, True).reshape(-1)
        tensor([-0.7792, -0.7792,  1.6656])
    """
    return _dropped(input, p, train, True, True, "feature_alpha_dropout")


@_tensors("input")
def selu(input):
    """Scaled ELU with PyTorch's constants (``nn.functional.selu``).

    Example:
        >>> tg.selu(tg.tensor([-1.0, 0.0, 2.0]))
        tensor([-1.1113,  0.0000,  2.1014])
    """
    return _F.selu(input)


@_tensors("input")
def selu_(input):
    """``selu`` written into ``input``, which is returned.

    Example:
        >>> x = tg.tensor([-1.0, 2.0])
        >>> _ = tg.selu_(x)
        >>> x
        tensor([-1.1113,  2.1014])
    """
    return _F.selu(input, True)


@_tensors("input")
def celu(input, alpha=1.0):
    """Continuously differentiable ELU (``nn.functional.celu``).

    Example:
        >>> tg.celu(tg.tensor([-1.0, 0.0, 2.0]), 2.0)
        tensor([-0.7869,  0.0000,  2.0000])
    """
    return _F.celu(input, alpha)


@_tensors("input")
def celu_(input, alpha=1.0):
    """``celu`` written into ``input``, which is returned.

    Example:
        >>> x = tg.tensor([-1.0, 2.0])
        >>> _ = tg.celu_(x)
        >>> x
        tensor([-0.6321,  2.0000])
    """
    return _F.celu(input, alpha, True)


def _stream(fname, generator):
    """The stream ``generator`` draws from; PyTorch's TypeError for what is not one."""
    if generator is not None and not isinstance(generator, _Generator):
        raise TypeError(f"{fname}(): argument 'generator' must be tapegrad.Generator, not "
                        f"{_type_name(generator)}")
    return _creation.stream_for(generator)


@_tensors("input")
def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """Randomized leaky ReLU (``nn.functional.rrelu``); in training the slopes are drawn
    from ``generator`` (a ``tapegrad.Generator``; the global one when None), PyTorch's
    numbers for the same seed.

    Example:
        >>> g = tg.Generator().manual_seed(0)
        >>> tg.rrelu(tg.tensor([-1.0, 2.0, -3.0]), training=True, generator=g)
        tensor([-0.3271,  2.0000, -0.8174])
    """
    return _F._rrelu(input, lower, upper, training, False, _stream("rrelu", generator))


@_tensors("input")
def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """``rrelu`` written into ``input``, which is returned.

    Example:
        >>> x = tg.tensor([-1.0, 2.0])
        >>> _ = tg.rrelu_(x)
        >>> x
        tensor([-0.2292,  2.0000])
    """
    return _F._rrelu(input, lower, upper, training, True, _stream("rrelu_", generator))


@_tensors("input")
def threshold(input, threshold, value):
    """``x`` where ``x > threshold``, ``value`` elsewhere.

    Example:
        >>> tg.threshold(tg.tensor([-1.0, 0.5, 2.0]), 0.5, -9.0)
        tensor([-9., -9.,  2.])
    """
    return _F.threshold(input, threshold, value)


@_tensors("input")
def threshold_(input, threshold, value):
    """``threshold`` written into ``input``, which is returned.

    Example:
        >>> x = tg.tensor([-1.0, 2.0])
        >>> _ = tg.threshold_(x, 0.0, 5.0)
        >>> x
        tensor([5., 2.])
    """
    return _F.threshold(input, threshold, value, True)


@_tensors("input")
def relu_(input):
    """``relu`` written into ``input``, which is returned.

    Example:
        >>> x = tg.tensor([-1.0, 2.0])
        >>> _ = tg.relu_(x)
        >>> x
        tensor([0., 2.])
    """
    return _F.relu(input, True)


@_tensors("input", "weight", "bias")
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d cross-correlation (``nn.functional.conv1d``).

    Example:
        >>> tg.conv1d(tg.tensor([[[1.0, 2.0, 3.0, 4.0]]]), tg.tensor([[[1.0, -1.0]]]))
        tensor([[[-1., -1., -1.]]])
    """
    return _F.conv1d(input, weight, bias, stride, padding, dilation, groups)


@_tensors("input", "weight", "bias")
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d cross-correlation (``nn.functional.conv2d``).

    Example:
        >>> tg.conv2d(tg.arange(9.0).reshape(1, 1, 3, 3), tg.ones(1, 1, 2, 2))
        tensor([[[[ 8., 12.],
                  [20., 24.]]]])
    """
    return _F.conv2d(input, weight, bias, stride, padding, dilation, groups)


def _stride(stride):
    """PyTorch's top-level pools default ``stride`` to an empty list, nn.functional's to
    None: both mean "the kernel size"."""
    if isinstance(stride, (tuple, list)) and len(stride) == 0:
        return None
    return stride


@_tensors("input")
def avg_pool1d(input, kernel_size, stride=(), padding=0, ceil_mode=False,
               count_include_pad=True):
    """The mean of each window along the last dimension (``nn.functional.avg_pool1d``;
    ``stride`` defaults to the kernel size).

    Example:
        >>> tg.avg_pool1d(tg.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2)
        tensor([[[2., 1.]]])
    """
    return _F.avg_pool1d(input, kernel_size, _stride(stride), padding, ceil_mode,
                         count_include_pad)


@_tensors("input")
def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """The largest value of each window along the last dimension
    (``nn.functional.max_pool1d`` without ``return_indices``).

    Example:
        >>> tg.max_pool1d(tg.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2)
        tensor([[[3., 2.]]])
    """
    return _F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


@_tensors("input")
def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """The largest value of each 2-d window (``nn.functional.max_pool2d`` without
    ``return_indices``).

    Example:
        >>> tg.max_pool2d(tg.arange(16.0).reshape(1, 1, 4, 4), 2)
        tensor([[[[ 5.,  7.],
                  [13., 15.]]]])
    """
    out = _F.max_pool2d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)
    # an unbatched input is pooled as a batch of one and squeezed; PyTorch's kernel takes
    # it as it is, and its result's node is the pool's
    if input.ndim == 3:
        _functional.named_node(out, "MaxPool2DWithIndicesBackward0", input)
    return out


@_tensors("input")
def adaptive_avg_pool1d(input, output_size):
    """Means over ``output_size`` windows that tile the last dimension
    (``nn.functional.adaptive_avg_pool1d``).

    Example:
        >>> tg.adaptive_avg_pool1d(tg.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2)
        tensor([[[2., 1.]]])
    """
    return _F.adaptive_avg_pool1d(input, output_size)


@_tensors("input")
def pixel_shuffle(input, upscale_factor):
    """``(*, C r^2, H, W)`` rearranged to ``(*, C, H r, W r)`` (``nn.functional``'s).

    Example:
        >>> tg.pixel_shuffle(tg.arange(4.0).reshape(1, 4, 1, 1), 2)
        tensor([[[[0., 1.],
                  [2., 3.]]]])
    """
    return _F.pixel_shuffle(input, upscale_factor)


@_tensors("x1", "x2")
def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The ``p``-norm of ``x1 - x2 + eps`` along the last dimension
    (``nn.functional.pairwise_distance``).

    Example:
        >>> tg.pairwise_distance(tg.tensor([[3.0, 0.0]]), tg.tensor([[0.0, 4.0]]), eps=0.0)
        tensor([5.])
    """
    return _F.pairwise_distance(x1, x2, p, eps, keepdim)


@_tensors("input1", "input2", "weight", "bias")
def bilinear(input1, input2, weight, bias=None):
    """``x1^T A x2 + b`` for each output feature (``nn.functional.bilinear``).

    Example:
        >>> tg.bilinear(tg.ones(1, 2), tg.ones(1, 3), tg.ones(4, 2, 3))
        tensor([[6., 6., 6., 6.]])
    """
    return _F.bilinear(input1, input2, weight, bias)


@_tensors("input", "weight")
def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Divide by the root mean square over the last ``normalized_shape`` dimensions
    (``nn.functional.rms_norm``).

    Example:
        >>> tg.rms_norm(tg.tensor([3.0, 4.0]), [2])
        tensor([0.8485, 1.1314])
    """
    return _F.rms_norm(input, normalized_shape, weight, eps)


# The top-level normalisations take PyTorch's ATen signatures: the flags for cuDNN (which
# changes nothing on the CPU) and, for batch_norm and instance_norm, every argument required
# and weight and bias before the running statistics.


@_tensors("input", "weight", "bias")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    """Normalise over the last ``len(normalized_shape)`` dimensions
    (``nn.functional.layer_norm``; ``cudnn_enable`` is ignored, as on PyTorch's CPU).

    Example:
        >>> tg.layer_norm(tg.tensor([[1.0, 3.0]]), [2])
        tensor([[-1.0000,  1.0000]])
    """
    return _F.layer_norm(input, normalized_shape, weight, bias, eps)


@_tensors("input", "weight", "bias")
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    """Normalise groups of channels of each sample (``nn.functional.group_norm``;
    ``cudnn_enabled`` is ignored).

    Example:
        >>> tg.group_norm(tg.tensor([[1.0, 3.0]]), 1)
        tensor([[-1.0000,  1.0000]])
    """
    return _F.group_norm(input, num_groups, weight, bias, eps)


@_tensors("input", "weight", "bias", "running_mean", "running_var",
          optional=("weight", "bias", "running_mean", "running_var"))
def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled):
    """Normalise each channel over the batch (``nn.functional.batch_norm``, whose argument
    order differs: here weight and bias come first and every argument is required).

    Example:
        >>> tg.batch_norm(tg.tensor([[1.0], [3.0]]), None, None, None, None, True, 0.1,
        ...               1e-5, False)
        tensor([[-1.0000],
                [ 1.0000]])
    """
    return _F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                         eps)


@_tensors("input", "weight", "bias", "running_mean", "running_var",
          optional=("weight", "bias", "running_mean", "running_var"))
def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum,
                  eps, cudnn_enabled):
    """Normalise each channel of each sample (``nn.functional.instance_norm``, with every
    argument required and weight and bias first).

    Example:
        >>> tg.instance_norm(tg.tensor([[[1.0, 3.0]]]), None, None, None, None, True, 0.1,
        ...                  1e-5, False)
        tensor([[[-1.0000,  1.0000]]])
    """
    return _F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                            momentum, eps)


@_tensors("weight", "indices")
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` picked by ``indices`` (``nn.functional.embedding`` with the weight
    first).  ``padding_idx`` -1 (any negative) means none: ATen's convention; a row
    ``padding_idx`` >= 0 gets no gradient.

    Example:
        >>> tg.embedding(tg.tensor([[0.0, 1.0], [2.0, 3.0]]), tg.tensor([1, 1, 0]))
        tensor([[2., 3.],
                [2., 3.],
                [0., 1.]])
    """
    padding = None if padding_idx < 0 else padding_idx
    return _F.embedding(indices, weight, padding, scale_grad_by_freq=scale_grad_by_freq,
                        sparse=sparse)


def _check_reduction(fname, reduction, position):
    """PyTorch's parser takes an int (not a bool, not nn.functional's string)."""
    if isinstance(reduction, bool) or not isinstance(reduction, (int, np.integer)):
        where = "" if position is None else f" (position {position})"
        raise TypeError(f"{fname}(): argument 'reduction'{where} must be int, not "
                        f"{_type_name(reduction)}")


# (The reduction's default is 0, none, in every top-level loss here: ATen's schema says
# Mean, but PyTorch's Python binding of these functions gives an unreduced loss when the
# argument is left out -- measured on PyTorch 2.13, torch.kl_div(x, t).shape == x.shape.)


def _reduction(reduction):
    """nn.functional's string for ATen's code: 1 mean, 2 sum, any other none (ATen applies
    mean or sum for those two codes and returns the loss as it is for the rest)."""
    return {1: "mean", 2: "sum"}.get(int(reduction), "none")


def _int_reduction(fname, position):
    """Decorator: the function's ``reduction`` argument (parameter number ``position``,
    1-based) checked as PyTorch's parser checks it, naming its position when it was passed
    by position."""
    def decorate(fn):
        @functools.wraps(fn)
        def checked(*args, **kwargs):
            if len(args) >= position:
                _check_reduction(fname, args[position - 1], position)
            elif "reduction" in kwargs:
                _check_reduction(fname, kwargs["reduction"], None)
            return fn(*args, **kwargs)
        return checked
    return decorate


@_tensors("input", "target")
@_int_reduction("kl_div", 3)
def kl_div(input, target, reduction=0, *, log_target=False):
    """Kullback-Leibler divergence (``nn.functional.kl_div``) with ATen's ``reduction`` code:
    0 none, 1 mean (over every element, as ATen's), 2 sum.

    Example:
        >>> tg.kl_div(tg.tensor([-1.0, -2.0]), tg.tensor([0.5, 0.5]), 2)
        tensor(0.8069)
    """
    code = _reduction(reduction)
    # (nn.functional's "mean" warns that it is not "batchmean"; ATen's mean code does not)
    loss = _F.kl_div(input, target, reduction="none" if code == "mean" else code,
                     log_target=log_target)
    return loss.mean() if code == "mean" else loss


@_tensors("input", "target", "weight", "pos_weight")
@_int_reduction("binary_cross_entropy_with_logits", 5)
def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                     reduction=0):
    """``nn.functional.binary_cross_entropy_with_logits`` with ATen's order (``pos_weight``
    before ``reduction``) and ``reduction`` code (0 none, 1 mean, 2 sum).

    Example:
        >>> tg.binary_cross_entropy_with_logits(tg.tensor([0.0]), tg.tensor([1.0]), None,
        ...                                     None, 1)
        tensor(0.6931)
    """
    return _F.binary_cross_entropy_with_logits(input, target, weight, _reduction(reduction),
                                             pos_weight)


@_tensors("input1", "input2", "target")
@_int_reduction("cosine_embedding_loss", 5)
def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    """``nn.functional.cosine_embedding_loss`` with ATen's ``reduction`` code.

    Example:
        >>> tg.cosine_embedding_loss(tg.tensor([[1.0, 0.0]]), tg.tensor([[0.0, 1.0]]),
        ...                          tg.tensor([1.0]), 0.0, 1)
        tensor(1.)
    """
    return _F.cosine_embedding_loss(input1, input2, target, margin,
                                    reduction=_reduction(reduction))


@_tensors("input", "target")
@_int_reduction("hinge_embedding_loss", 4)
def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    """``nn.functional.hinge_embedding_loss`` with ATen's ``reduction`` code.

    Example:
        >>> tg.hinge_embedding_loss(tg.tensor([0.3, 2.0]), tg.tensor([-1.0, 1.0]), 1.0, 0)
        tensor([0.7000, 2.0000])
    """
    return _F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


@_tensors("input1", "input2", "target")
@_int_reduction("margin_ranking_loss", 5)
def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    """``nn.functional.margin_ranking_loss`` with ATen's ``reduction`` code.

    Example:
        >>> tg.margin_ranking_loss(tg.tensor([1.0]), tg.tensor([2.0]), tg.tensor([1.0]), 0.0, 1)
        tensor(1.)
    """
    return _F.margin_ranking_loss(input1, input2, target, margin,
                                  reduction=_reduction(reduction))


@_tensors("input", "target")
@_int_reduction("poisson_nll_loss", 6)
def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    """``nn.functional.poisson_nll_loss`` with every argument required and ATen's
    ``reduction`` code.

    Example:
        >>> tg.poisson_nll_loss(tg.tensor([0.0]), tg.tensor([2.0]), True, False, 1e-8, 1)
        tensor(1.)
    """
    return _F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                               reduction=_reduction(reduction))


@_tensors("anchor", "positive", "negative")
@_int_reduction("triplet_margin_loss", 8)
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-06, swap=False,
                        reduction=0):
    """``nn.functional.triplet_margin_loss`` with ATen's ``reduction`` code.

    Example:
        >>> tg.triplet_margin_loss(tg.tensor([[0.0]]), tg.tensor([[1.0]]), tg.tensor([[3.0]]),
        ...                        eps=0.0, reduction=1)
        tensor(0.)
    """
    return _F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                  reduction=_reduction(reduction))



@_tensors("input")
def detach(input):
    """``input.detach()``: the same values, cut from the graph.

    Example:
        >>> tg.detach(tg.ones(2, requires_grad=True)).requires_grad
        False
    """
    return input.detach()


@_tensors("input")
def is_inference(input):
    """``input.is_inference()``: whether it was made under ``inference_mode``.

    Example:
        >>> tg.is_inference(tg.ones(2))
        False
    """
    return input.is_inference()


def _is_number(obj):
    return isinstance(obj, (numbers.Number, np.generic)) and not isinstance(obj, Tensor)


_RSUB_OVERLOADS = ("rsub() received an invalid combination of arguments - got ({}), but "
                   "expected one of:\n * (Tensor input, Tensor other, *, Number alpha = 1)\n"
                   " * (Tensor input, Number other, Number alpha = 1)\n")


def _rsub_arguments(fn):
    """PyTorch's TypeError for an ``input`` that is not a tensor or an ``other`` that is
    neither a tensor nor a number: rsub has two overloads, so its parser lists both and the
    types it got (positional ones as PyTorch writes them; keyword arguments as
    ``name=type``, in the order given, where PyTorch's order and separators differ)."""
    @functools.wraps(fn)
    def checked(*args, **kwargs):
        input = args[0] if args else kwargs.get("input")
        other = args[1] if len(args) > 1 else kwargs.get("other")
        if not isinstance(input, Tensor) or not (isinstance(other, Tensor)
                                                 or _is_number(other)):
            got = [_type_name(a) for a in args]
            got += [f"{k}={_type_name(v)}" for k, v in kwargs.items()]
            raise TypeError(_RSUB_OVERLOADS.format(", ".join(got)))
        return fn(*args, **kwargs)
    return checked


@_rsub_arguments
def rsub(input, other, alpha=1):
    """``other - alpha * input`` ("reversed subtraction"); ``other`` a tensor or a number.
    Recorded as PyTorch's one node, ``RsubBackward0`` for a tensor ``other``,
    ``RsubBackward1`` for a number.

    Example:
        >>> tg.rsub(tg.tensor([1.0, 2.0]), 5.0)
        tensor([4., 3.])
    """
    if isinstance(other, Tensor):
        out = _functional.sub(other, input, alpha=alpha)
        return _functional.named_node(out, "RsubBackward0", input, other)
    if alpha == 1:
        return _functional.rsub(input, other)
    # (other - alpha * input: PyTorch's one node computes the product and the difference
    # in one kernel; here they are two records, the result named as PyTorch's)
    out = _functional.rsub(input * alpha, other)
    return _functional.named_node(out, "RsubBackward1", input)


def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=False,
                  requires_grad=False):
    """A 0-d tensor holding the number ``s``, of ``dtype`` (the default floating type when
    None, even for an int ``s``, as PyTorch's).

    Example:
        >>> tg.scalar_tensor(3)
        tensor(3.)
    """
    if not _is_number(s):
        raise TypeError(f"scalar_tensor(): argument 's' (position 1) must be Number, not "
                        f"{_type_name(s)}")
    dtype = _dtype.get_default_dtype() if dtype is None else dtype
    return _creation.tensor(s, dtype=dtype, device=device, requires_grad=requires_grad)


@_tensors("input")
def split_with_sizes(input, split_sizes, dim=0):
    """``input`` cut along ``dim`` into pieces of the lengths ``split_sizes`` (which must
    add up to its size there): ``split`` with a list.

    Example:
        >>> tg.split_with_sizes(tg.arange(5.0), [2, 3])
        (tensor([0., 1.]), tensor([2., 3., 4.]))
    """
    if not isinstance(split_sizes, (list, tuple)):
        raise TypeError("split_with_sizes(): argument 'split_sizes' (position 2) must be "
                        f"tuple of ints, not {_type_name(split_sizes)}")
    return _functional.split(input, list(split_sizes), dim)


def _window(name, window_length, dtype, requires_grad, make):
    """A window of ``window_length`` points made by ``make(n)`` (a NumPy float64 array of
    n points), with PyTorch's checks and its cases of 0 points (empty) and 1 (one)."""
    if isinstance(window_length, bool) or not isinstance(window_length, (int, np.integer)):
        raise TypeError(f"{name}(): argument 'window_length' (position 1) must be int, not "
                        f"{_type_name(window_length)}")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got "
                           f"window_length={window_length}")
    dtype = _dtype.get_default_dtype() if dtype is None else dtype
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dtype}")
    if window_length <= 1:
        values = np.ones(window_length)
    else:
        values = make(int(window_length))
    return _creation.tensor(values, dtype=dtype, requires_grad=requires_grad)


def _periodic(periodic, formula):
    """``formula`` for a symmetric window of n points; periodic: n + 1 points, the last
    dropped (the window of a DFT period), as PyTorch makes it."""
    if periodic:
        return lambda n: formula(n + 1)[:n]
    return formula


def _cosine(alpha, beta):
    # PyTorch's steps: arange * (2 pi / (n - 1)), cos, * -beta, + alpha
    return lambda n: np.cos(np.arange(n, dtype=np.float64) * (2 * math.pi / (n - 1))) \
        * -beta + alpha


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                pin_memory=False, requires_grad=False):
    """The Hann window ``0.5 - 0.5 cos(2 pi k / (N - 1))``, ``N = window_length`` (+1 when
    ``periodic``, the last point then dropped).

    Example:
        >>> tg.hann_window(4, dtype=tg.float64)
        tensor([0.0000, 0.5000, 1.0000, 0.5000])
    """
    return _window("hann_window", window_length, dtype, requires_grad,
                   _periodic(periodic, _cosine(0.5, 0.5)))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, pin_memory=False, requires_grad=False):
    """The Hamming window ``alpha - beta cos(2 pi k / (N - 1))`` (see ``hann_window``).

    Example:
        >>> tg.hamming_window(3, False, dtype=tg.float64)
        tensor([0.0800, 1.0000, 0.0800])
    """
    return _window("hamming_window", window_length, dtype, requires_grad,
                   _periodic(periodic, _cosine(float(alpha), float(beta))))


def _blackman(n):
    w = np.arange(n, dtype=np.float64) * (math.pi / (n - 1))
    return np.cos(w * 4) * 0.08 - np.cos(w * 2) * 0.5 + 0.42


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    pin_memory=False, requires_grad=False):
    """The Blackman window ``0.42 - 0.5 cos(2 pi k / (N - 1)) + 0.08 cos(4 pi k / (N - 1))``.

    Example:
        >>> tg.blackman_window(5, False)[1:4]
        tensor([0.3400, 1.0000, 0.3400])
    """
    return _window("blackman_window", window_length, dtype, requires_grad,
                   _periodic(periodic, _blackman))


def _bartlett(n):
    w = np.arange(n, dtype=np.float64) * (2.0 / (n - 1))
    half = ((n - 1) >> 1) + 1
    w[half:] = -w[half:] + 2      # PyTorch's mul_(-1).add_(2) on the second half
    return w


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    pin_memory=False, requires_grad=False):
    """The triangular (Bartlett) window rising from 0 to 1 and back.

    Example:
        >>> tg.bartlett_window(5, False, dtype=tg.float64)
        tensor([0.0000, 0.5000, 1.0000, 0.5000, 0.0000])
    """
    return _window("bartlett_window", window_length, dtype, requires_grad,
                   _periodic(periodic, _bartlett))


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, pin_memory=False, requires_grad=False):
    """The Kaiser window ``I0(beta sqrt(1 - ((k - a) / a)^2)) / I0(beta)``, ``a = (N - 1) /
    2``, with ``I0`` the modified Bessel function of order 0.

    Example:
        >>> tg.kaiser_window(3, False, 1.0, dtype=tg.float64)
        tensor([0.7898, 1.0000, 0.7898])
    """
    beta = float(beta)

    def make(n):
        a = (n - 1) / 2.0
        k = np.arange(n, dtype=np.float64)
        # (abs: rounding can leave 1 - x^2 a hair below 0 at the ends, as PyTorch guards)
        arg = beta * np.sqrt(np.abs(1 - ((k - a) / a) ** 2))
        i0 = _functional.i0(_creation.tensor(np.append(arg, beta)))._value
        return i0[:-1] / i0[-1]
    return _window("kaiser_window", window_length, dtype, requires_grad,
                   _periodic(periodic, make))



@_tensors("input")
def pixel_unshuffle(input, downscale_factor):
    """``(*, C, H r, W r)`` rearranged to ``(*, C r^2, H, W)``: the inverse of
    ``pixel_shuffle`` (``nn.functional.pixel_unshuffle``); one node,
    ``PixelUnshuffleBackward0``.

    Example:
        >>> tg.pixel_unshuffle(tg.arange(4.0).reshape(1, 1, 2, 2), 2).reshape(-1)
        tensor([0., 1., 2., 3.])
    """
    return _F.pixel_unshuffle(input, downscale_factor)


@_tensors("input")
def channel_shuffle(input, groups):
    """The channels (dim 1) of ``(N, C, *)`` split into ``groups`` groups and interleaved:
    channel ``g (C / groups) + k`` goes to ``k groups + g``.  One node,
    ``ChannelShuffleBackward0``.

    Example:
        >>> tg.channel_shuffle(tg.arange(4.0).reshape(1, 4, 1), 2).reshape(-1)
        tensor([0., 2., 1., 3.])
    """
    if input.ndim <= 2:
        raise RuntimeError("channel_shuffle expects input with > 2 dims, but got input with "
                           f"sizes {list(input.shape)}")
    if groups <= 0:
        raise RuntimeError("Number of groups to divide channels in must be positive. Value of "
                           f"groups:{groups}")
    n, c, *rest = input.shape
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {groups} groups.")
    x = input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return _functional.named_node(x.reshape(n, c, *rest), "ChannelShuffleBackward0", input)


class _NativeChannelShuffle(_function.Function):
    """``channel_shuffle``'s values under a node whose backward refuses, as PyTorch's
    ``native_channel_shuffle`` has no derivative."""

    @staticmethod
    def forward(ctx, input, groups):  # noqa: A002
        return channel_shuffle(input, groups)

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("derivative for aten::native_channel_shuffle is not implemented")


@_tensors("input")
def native_channel_shuffle(input, groups):
    """``channel_shuffle``'s values and errors; as in PyTorch, the result has no derivative:
    a backward through it raises ``derivative for aten::native_channel_shuffle is not
    implemented``, and its node is named ``torch::autograd::NotImplemented``.

    Example:
        >>> tg.native_channel_shuffle(tg.arange(4.0).reshape(1, 4, 1), 2).reshape(-1)
        tensor([0., 2., 1., 3.])
    """
    if not (_state.grad_enabled and input.requires_grad):
        return channel_shuffle(input, groups)
    return _NativeChannelShuffle.apply(input, groups)


def _not_implemented_name(self):
    return "torch::autograd::NotImplemented"


# PyTorch's node for an op without a derivative: class NotImplemented, named with its C++
# namespace
_NativeChannelShuffle._backward_cls = type(
    "NotImplemented", (_NativeChannelShuffle._backward_cls,),
    {"__slots__": (), "__module__": "tapegrad.autograd.function",
     "name": _not_implemented_name})


def unravel_index(indices, shape):
    """The coordinates in an array of ``shape`` of the flat (row-major) ``indices``: a tuple
    of int64 tensors, one per dimension.  As PyTorch's, indices are not bounds-checked:
    coordinate ``i`` is ``(indices // prod(shape[i + 1:])) % shape[i]`` with floor division,
    so -1 is the last element.

    Example:
        >>> tg.unravel_index(tg.tensor([5, 7]), (2, 4))
        (tensor([1, 1]), tensor([1, 3]))
    """
    # (indices.is_complex(): a list gets PyTorch's AttributeError, as there)
    if indices.is_complex() or indices.is_floating_point() or indices.dtype == _dtype.bool_:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    elif isinstance(shape, (tuple, list)):
        for dim in shape:
            if not isinstance(dim, (int, np.integer)):
                raise TypeError("expected 'shape' sequence to only contain ints, but got "
                                f"{type(dim)}")
        shape = tuple(int(d) for d in shape)
    else:
        raise TypeError(f"expected 'shape' to be int or sequence of ints, but got {type(shape)}")
    if any(d < 0 for d in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {shape}")
    if _state.trace is not None:
        # the coordinates are computed from the indices' values: a replay would keep these
        _state.trace.opaque("unravel_index reads its indices' values")
    strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    values = np.asarray(indices._value, dtype=np.int64)
    if values.size and (0 in strides or 0 in shape):
        raise RuntimeError("ZeroDivisionError")       # (PyTorch's integer division by 0)
    # NumPy's // and % on integers floor, as PyTorch's floor_divide and %
    coords = [(values // s) % d for s, d in zip(strides, shape)]
    return tuple(_creation.tensor(c, dtype=_dtype.int64) for c in coords)



def _cannot_alias(source, target):
    return ValueError(f"can't alias tensor with dtype '{source.scalar_name}' into dtype "
                      f"'{target.scalar_name}'.")


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=None):
    """``obj`` as a tensor, sharing its memory where it can (PyTorch's ``asarray``, for
    tensors, NumPy arrays, numbers and nested sequences).  A tensor of the asked ``dtype``
    comes back itself (``copy=True``: a clone, recorded), of another a converted copy; a
    row-major NumPy array of a tapegrad dtype is shared as ``from_numpy`` shares it;
    anything else is copied as ``tensor`` copies it.  ``copy=False`` where a copy is needed
    raises PyTorch's ValueError.  ``requires_grad``, when given, is set on the result (on
    ``obj`` itself when that is the result, as PyTorch does).

    Example:
        >>> x = tg.tensor([1.0, 2.0])
        >>> tg.asarray(x) is x
        True
        >>> tg.asarray([[1, 2]], dtype=tg.float64)
        tensor([[1., 2.]])
    """
    _device.check(device)
    dt = _dtype.resolve(dtype)
    if isinstance(obj, Tensor):
        if dt is not None and dt != obj.dtype:
            if copy is False:
                raise _cannot_alias(obj.dtype, dt)
            # (an unspecified requires_grad follows obj's, in PyTorch 2.13: a converted
            # copy of a tensor that requires grad must be able to)
            wanted = obj.requires_grad if requires_grad is None else requires_grad
            if wanted and not dt.is_floating_point:
                raise RuntimeError("Only Tensors of floating point and complex dtype can "
                                   "require gradients")
            out = obj.to(dt)
        else:
            out = obj.clone() if copy else obj
    elif isinstance(obj, np.ndarray):
        out = None if copy else _creation.as_tensor(obj, dtype=dt)
        if out is not None and not np.shares_memory(out._value, obj):
            if copy is False:
                raise _cannot_alias(_dtype.from_numpy_dtype(obj.dtype), out.dtype)
            out = None
        if out is None:
            out = _creation.tensor(obj, dtype=dt)
    else:
        if copy is False:
            raise ValueError("can't alias arbitrary sequence into a tensor.")
        # (the factory's requires_grad: its error for an integer tensor is PyTorch's here)
        return _creation.tensor(obj, dtype=dt, requires_grad=bool(requires_grad))
    if requires_grad is not None and out.requires_grad != bool(requires_grad):
        out.requires_grad_(bool(requires_grad))
    return out



def _check_2d_or_3d(input, fname):
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional "
                           f"tensor for argument #1 'self' (while checking arguments for "
                           f"{fname})")


@_tensors("input")
def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1,
                            ceil_mode=False):
    """``max_pool1d`` and, for each output, the index (along the last dimension of
    ``input``) of the element it took: PyTorch's (values, indices) pair.

    Example:
        >>> tg.max_pool1d_with_indices(tg.tensor([[[1.0, 3.0, 2.0, 5.0]]]), 2)
        (tensor([[[3., 5.]]]), tensor([[[1, 3]]]))
    """
    _check_2d_or_3d(input, "max_pool1d")
    # (the indices come from the same comparisons as the values: a replay recomputes them)
    return _F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode,
                         True)


@_tensors("input")
def adaptive_max_pool1d(input, output_size):
    """The largest value of each of ``output_size`` windows tiling the last dimension
    (PyTorch's adaptive bounds), and its index there: PyTorch's (values, indices) pair.

    Example:
        >>> tg.adaptive_max_pool1d(tg.tensor([[[1.0, 3.0, 2.0, 5.0, 4.0]]]), 2)
        (tensor([[[3., 5.]]]), tensor([[[1, 3]]]))
    """
    _check_2d_or_3d(input, "adaptive_max_pool1d")
    return _F.adaptive_max_pool1d(input, _F._one(output_size), True)



@_tensors("input", "weight", "bias")
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-d cross-correlation of ``(N, C_in, D, H, W)`` with ``weight`` ``(C_out, C_in /
    groups, kD, kH, kW)`` (``nn.functional.conv3d``).

    Example:
        >>> tg.conv3d(tg.ones(1, 1, 2, 2, 2), tg.ones(1, 1, 2, 2, 2))
        tensor([[[[[8.]]]]])
    """
    return _F.conv3d(input, weight, bias, stride, padding, dilation, groups)


@_tensors("input", "weight", "bias")
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-d transposed convolution (``nn.functional.conv_transpose1d``).

    Example:
        >>> tg.conv_transpose1d(tg.tensor([[[1.0, 2.0]]]), tg.tensor([[[1.0, 10.0]]]))
        tensor([[[ 1., 12., 20.]]])
    """
    return _F.conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups,
                               dilation)


@_tensors("input", "weight", "bias")
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-d transposed convolution (``nn.functional.conv_transpose2d``).

    Example:
        >>> tg.conv_transpose2d(tg.ones(1, 1, 2, 2), tg.ones(1, 1, 2, 2), stride=2).shape
        tapegrad.Size([1, 1, 4, 4])
    """
    return _F.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups,
                               dilation)


@_tensors("input", "weight", "bias")
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """3-d transposed convolution (``nn.functional.conv_transpose3d``).

    Example:
        >>> tg.conv_transpose3d(tg.ones(1, 1, 2, 2, 2), tg.ones(1, 1, 1, 1, 1)).shape
        tapegrad.Size([1, 1, 2, 2, 2])
    """
    return _F.conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups,
                               dilation)


@_tensors("input")
def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """The largest value of each 3-d window of ``(N, C, D, H, W)`` or ``(C, D, H, W)``;
    the gradient goes to the window's first largest element, as in PyTorch.

    Example:
        >>> tg.max_pool3d(tg.arange(8.0).reshape(1, 2, 2, 2), 2)
        tensor([[[[7.]]]])
    """
    return _F.max_pool3d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)
