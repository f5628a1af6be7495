"""``multilabel_margin_loss`` and ``triplet_margin_with_distance_loss`` (``nn.functional``
exports them), composed from recorded ops.

The multi-label hinge loss of a sample with scores ``x`` (C of them) and target classes ``y``
(class indices up to the first -1) is ``sum over targets j, non-targets i of
max(0, 1 - (x[y_j] - x[i])) / C``, as PyTorch's kernel sums it: a term counts only where it
is positive (no gradient at 0), and a class listed twice counts twice.  The composite is
shown as PyTorch's one node, ``MultilabelMarginLossBackward0``.
"""
import numpy as np

import tapegrad as tg
from tapegrad.functional import named_node as _named
from tapegrad.tape import state as _state

# (nn.functional imports this module at its end, when these are defined)
from ._loss_reduction import check_reduction as _check_reduction
from ._loss_reduction import legacy_reduction as _legacy_reduction
from ._loss_reduction import reduce as _reduce


def multilabel_margin_loss(input, target, size_average=None, reduce=None,  # noqa: A002
                           reduction="mean"):
    """The multi-label hinge loss of ``(N, C)`` (or ``(C,)``) scores and class indices of the
    same shape, each row's classes ending at its first -1: per sample, the sum over its
    target classes ``j`` and the other classes ``i`` of ``max(0, 1 - x[j] + x[i])``, over C.

    Example:
        >>> F.multilabel_margin_loss(tg.tensor([[0.1, 0.2, 0.4, 0.8]]),
        ...                          tg.tensor([[3, 0, -1, 1]]))
        tensor(0.8500)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    shape = tuple(input.shape)
    if not (len(shape) == 1 and shape[0] or len(shape) == 2 and shape[1]):
        raise RuntimeError("Expected non-empty vector or matrix with optional 0-dim batch "
                           f"size, but got: {list(shape)}")
    if tuple(target.shape) != shape:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of "
                           f"size: {list(shape)}")
    if target.dtype != tg.int64:
        raise RuntimeError(f"expected scalar type Long but found {target.dtype.scalar_name}")
    c = shape[-1]
    labels = target._value.reshape(-1, c)
    if ((labels < -1) | (labels >= c)).any():
        raise RuntimeError("argument #2 'target' is out of range")
    trace = _state.trace
    if trace is not None and input.requires_grad:
        # which pairs count is read from the targets' values, on the side
        trace.opaque("multilabel_margin_loss's target classes")
    # a row's targets are its classes before its first -1
    listed = np.cumprod(labels >= 0, axis=1).astype(bool)                 # (N, C)
    rows = np.arange(labels.shape[0])[:, None]
    is_target = np.zeros(labels.shape, dtype=bool)
    is_target[np.broadcast_to(rows, labels.shape)[listed], labels[listed]] = True
    x = input.reshape(-1, c)
    target_scores = x.gather(1, tg.tensor(np.where(listed, labels, 0)))   # (N, C): x[y_j]
    margins = 1.0 - target_scores.unsqueeze(2) + x.unsqueeze(1)          # (N, j, i)
    pairs = tg.tensor(listed[:, :, None] & ~is_target[:, None, :])
    terms = tg.where(pairs & (margins > 0.0), margins, 0.0)
    loss = terms.sum((1, 2)) / c
    if len(shape) == 1:
        loss = loss.reshape(())
    return _named(_reduce(loss, reduction), "MultilabelMarginLossBackward0", input)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """The triplet loss ``max(0, margin + d(anchor, positive) - d(anchor, negative))`` under
    a distance function of two tensors (``pairwise_distance`` if None); with ``swap``, the
    smaller of ``d(anchor, negative)`` and ``d(positive, negative)`` is the negative's.

    Example:
        >>> a, p, n = tg.tensor([[0.0, 0.0]]), tg.tensor([[3.0, 4.0]]), tg.tensor([[1.0, 0.0]])
        >>> F.triplet_margin_with_distance_loss(a, p, n)
        tensor(5.0000)
    """
    _check_reduction(reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a_dim, p_dim, n_dim = anchor.ndim, positive.ndim, negative.ndim
    if not (a_dim == p_dim and p_dim == n_dim):
        raise RuntimeError("The anchor, positive, and negative tensors are expected to have "
                           f"the same number of dimensions, but got: anchor {a_dim}D, "
                           f"positive {p_dim}D, and negative {n_dim}D inputs")
    if distance_function is None:
        distance_function = tg.pairwise_distance
    dist_pos = distance_function(anchor, positive)
    dist_neg = distance_function(anchor, negative)
    if swap:
        dist_neg = tg.minimum(dist_neg, distance_function(positive, negative))
    loss = tg.clamp_min(margin + dist_pos - dist_neg, 0)
    return _reduce(loss, reduction)
