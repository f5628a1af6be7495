"""Activations, losses and dropout as functions, composed from tapegrad tensor ops.

Everything here records ordinary ops on the tape, so gradients come from the ops' own
backward rules. Shapes: ``N`` is the batch, ``C`` the number of classes.
"""
import warnings

import numpy as np

import tapegrad as tg
from tapegrad.creation import generator as _generator
from tapegrad.tape import state as _state

__all__ = [
    "linear", "relu", "tanh", "sigmoid", "softmax", "log_softmax", "dropout",
    "mse_loss", "l1_loss", "nll_loss", "cross_entropy", "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
]

_REDUCTIONS = ("none", "mean", "sum")


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    return loss.sum()


def _check_reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _not_differentiable(function, name, value):
    """PyTorch's error for a weight that requires grad where its op has no gradient for it
    (checked in grad mode, before the op's own checks of its inputs)."""
    if isinstance(value, tg.Tensor) and value.requires_grad and tg.is_grad_enabled():
        raise RuntimeError(
            f"The function '{function}' is not differentiable with respect to argument "
            f"'{name}'. This input cannot have requires_grad True.")


def _constant(array):
    """A float64 tensor holding ``array`` (no gradient flows into it)."""
    return tg.from_numpy(np.ascontiguousarray(array, dtype=np.float64))


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
    out = input @ weight.T
    return out if bias is None else out + bias


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
    return tg.tanh(input)


def sigmoid(input):
    """``1 / (1 + exp(-input))`` elementwise, as ``tapegrad.sigmoid``.

    Shape: that of ``input``.

    Example:
        >>> F.sigmoid(tg.tensor([0.0, 2.0]))
        tensor([0.5000, 0.8808])
    """
    return tg.sigmoid(input)


def _implicit_dim(name, ndim, stacklevel):
    # PyTorch's legacy rule when no dim is given: 0 for 0-, 1- and 3-d inputs, else 1
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
        "dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None):
    """``exp(x) / sum(exp(x))`` along ``dim`` (without ``dim``: PyTorch's deprecated implicit
    choice, with its warning).

    Shape: that of ``input``; the values along ``dim`` sum to 1.

    Example:
        >>> F.softmax(tg.tensor([[1.0, 2.0, 3.0]]), dim=1)
        tensor([[0.0900, 0.2447, 0.6652]])
    """
    if dim is None:
        dim = _implicit_dim("softmax", input.ndim, 3)
    return tg.softmax(input, dim)


def log_softmax(input, dim=None):
    """``x - logsumexp(x)`` along ``dim``: the log of ``softmax``, computed without overflow.

    Shape: that of ``input``.

    Example:
        >>> F.log_softmax(tg.tensor([[1.0, 2.0, 3.0]]), dim=1)
        tensor([[-2.4076, -1.4076, -0.4076]])
    """
    if dim is None:
        dim = _implicit_dim("log_softmax", input.ndim, 3)
    return tg.log_softmax(input, dim)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``, in
    training mode; the identity otherwise. The mask is drawn from tapegrad's generator
    (seeded by ``tapegrad.manual_seed``); ``inplace`` overwrites ``input``.

    Shape: that of ``input``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> F.dropout(tg.ones(6), p=0.5)
        tensor([2., 0., 0., 0., 2., 2.])
        >>> F.dropout(tg.ones(3), p=0.5, training=False)
        tensor([1., 1., 1.])
    """
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input.mul_(0.0) if inplace else input * 0.0
    keep = _generator().random(tuple(input.shape)) >= p
    scale = _constant(keep * (1.0 / (1.0 - p)))
    return input.mul_(scale) if inplace else input * scale


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
    return _reduce(diff * diff, reduction)


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
    if t.dtype.kind not in "iu":
        raise RuntimeError(f"expected scalar type Long but found {_dtype_name(t)}")
    if input.ndim == 0:
        raise ValueError("Expected 1 or more dimensions (got 0)")
    if input.ndim == 1:
        if t.ndim != 0:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        return input.unsqueeze(0), target.reshape(1), ()
    n, c = input.shape[0], input.shape[1]
    if t.ndim == 0 or t.shape[0] != n:
        got = t.shape[0] if t.ndim else 1
        raise ValueError(f"Expected input batch_size ({n}) to match target batch_size ({got}).")
    if input.ndim == 2:
        if t.ndim != 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        return input, target, t.shape
    if t.shape != (n,) + tuple(input.shape[2:]):
        raise RuntimeError(
            f"size mismatch (got input: {list(input.shape)} , target: {list(t.shape)}")
    # (N, C, d1, ...) -> (N, d1, ..., C) -> (M, C)
    order = (0,) + tuple(range(2, input.ndim)) + (1,)
    return input.permute(*order).reshape(-1, c), target.reshape(-1), t.shape


def _dtype_name(array):
    return {"f": "Double", "b": "Bool"}.get(array.dtype.kind, str(array.dtype))


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
    scores, target, out_shape = _class_last(input, target)
    c = scores.shape[1]
    if _traced(target):
        # the targets are a compiled function's data: picked by comparison, so that a replay
        # takes new targets (indexing by them would bake their values into the tape)
        picked, w, counted = _picked_by_comparison(scores, target, weight, ignore_index, c)
    else:
        picked, w, counted = _picked_by_index(scores, target._value, weight, ignore_index, c)
        if counted is None:   # no weight, nothing ignored
            if reduction == "none":
                return (-picked).reshape(tuple(out_shape))
            return -picked.sum() if reduction == "sum" else -picked.mean()
    # rows of ignored targets are 0 and pass no gradient (not 0 times the gradient: with
    # every target ignored that is 0 / 0, where PyTorch gives 0)
    rows = tg.where(counted, -picked if w is None else picked * -w, 0.0)
    if reduction == "none":
        return rows.reshape(tuple(out_shape))
    if reduction == "sum":
        return rows.sum()
    total = counted.double().sum() if w is None else tg.where(counted, w, 0.0).sum()
    return rows.sum() / total


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
    if label_smoothing != 0.0:
        raise NotImplementedError("label_smoothing is not supported yet")
    class_dim = 0 if input.ndim == 1 else 1
    logp = tg.log_softmax(input, class_dim)
    t_value = target._value if isinstance(target, tg.Tensor) else np.asarray(target)
    if t_value.dtype.kind != "f":
        return nll_loss(logp, target, weight, ignore_index, reduction)
    # class probabilities
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(
            f"Expected target size {list(input.shape)}, got {list(target.shape)}")
    if weight is not None:
        shape = [1] * input.ndim
        shape[class_dim] = -1
        weight = weight if isinstance(weight, tg.Tensor) else _constant(weight)
        logp = logp * weight.reshape(shape)
    per_sample = -(logp * target).sum(class_dim)
    if reduction == "mean" and input.ndim > 1:
        # PyTorch divides by the number of samples, i.e. numel / C
        return per_sample.sum() / (input.numel() // input.shape[1])
    return _reduce(per_sample, reduction)


def _check_same_size(input, target):
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"Using a target size ({target.shape}) that is different to the input size "
            f"({input.shape}) is deprecated. Please ensure they have the same size.")


def _log_or_floor(x, mask, log_fn, neutral):
    """``max(log_fn(x), -100)`` where ``mask``, -100 elsewhere, with no inf/nan reaching the
    backward pass: the log only ever sees ``neutral`` in the masked-out places."""
    safe = tg.where(mask, x, neutral)
    return tg.clamp(tg.where(mask, log_fn(safe), -100.0), min=-100.0)


def _all_in_unit_interval(x):
    """Whether every element of tensor ``x`` is in [0, 1] (NaN is not: both comparisons
    are false for it), counted with comparisons so that a compiled call guards the count."""
    inside = ((x >= 0.0).double() * (x <= 1.0).double()).sum()
    return inside.item() == x.numel()


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """``-(t * log(x) + (1 - t) * log(1 - x))`` with each log floored at -100, as PyTorch
    does; input (probabilities in [0, 1]) and target of one shape; weight broadcasts.

    Computed with tensor ops throughout, masks and the range check included, so that a
    compiled call recomputes them (the check as a guard: a replay whose input leaves [0, 1]
    records again, and raises as eager mode does).

    Shape: ``()``, or the input's shape with ``reduction="none"``.

    Example:
        >>> F.binary_cross_entropy(tg.tensor([0.9, 0.2]), tg.tensor([1.0, 0.0]))
        tensor(0.1643)
    """
    _check_reduction(reduction)
    _check_same_size(input, target)
    _not_differentiable("binary_cross_entropy", "weight", weight)
    for name, values in (("input", input), ("target", target)):
        if not _all_in_unit_interval(values):
            raise RuntimeError(f"all elements of {name} should be between 0 and 1")
    log_x = _log_or_floor(input, input > 0.0, tg.log, 1.0)
    log_1mx = _log_or_floor(input, input < 1.0, lambda v: tg.log1p(-v), 0.0)
    loss = (target - 1.0) * log_1mx - target * log_x
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


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
    _check_same_size(input, target)
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
    return _reduce(loss, reduction)


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
