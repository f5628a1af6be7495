"""``ctc_loss``: the connectionist temporal classification loss, as PyTorch's CPU kernels
compute it (``nn.functional`` exports it; ``nn.CTCLoss`` calls it).

The loss of each sample is ``-log p(target | log_probs)``, summed over every alignment of the
target (with blanks between and around its labels, repeats merged) to the input's frames.
It is one recorded op, ``CtcLossBackward0``, with its own backward, both written as PyTorch
writes them (Graves et al., 2006):

* forward, the alpha recursion over the extended target ``l'`` (blank, l1, blank, l2, ...,
  blank): ``log_alpha[t, s] = logsumexp(log_alpha[t-1, s], log_alpha[t-1, s-1],
  log_alpha[t-1, s-2] where l'[s] != l'[s-2]) + log_probs[t, l'[s]]``, each log-sum-exp taken
  about the largest term, the loss ``-logsumexp`` of the last two states at the last frame;
* backward, the beta recursion the other way and, for each frame and label, the log of the
  summed ``alpha * beta`` of the states showing that label (``lcab``); the gradient of
  ``log_probs[t, c]`` is ``(exp(lp) - exp(lcab + nll - lp)) * grad_out``, 0 beyond a sample's
  input length.

The kernels use ``math.exp`` and ``math.log``, the C library's, as PyTorch's scalar loops do,
in PyTorch's order: the values and gradients are PyTorch's bits.  Around the op, as PyTorch:
``zero_infinity`` replaces infinite losses by 0 (``WhereBackward0``), ``"mean"`` divides each
loss by its target length (at least 1) and averages, ``"sum"`` adds.
"""
import math

import numpy as np

import tapegrad as tg
from tapegrad.tensor import Tensor

from .._config import kernel

__all__ = ["ctc_loss"]

_NEG_INF = -math.inf


@kernel
def _sample(b, input_lengths, target_lengths, offsets, log_alpha):
    """Sample ``b``'s input and target lengths, where its labels start in the flat targets,
    and its ``log_alpha`` (T, 2 * S_max + 1): what both kernels read first for each sample."""
    return input_lengths[b], target_lengths[b], offsets[b], log_alpha[b]


@kernel
def _log_sum_exp3(x1, x2, x3):
    """``log(exp(x1) + exp(x2) + exp(x3))`` taken about the largest term (about 0 when all
    are -inf, so there is no -inf - -inf): one step of the alpha and of the beta recursion,
    PyTorch's arithmetic in its order; an absent term is passed as -inf."""
    xmax = x1
    if x2 > xmax:
        xmax = x2
    if x3 > xmax:
        xmax = x3
    if xmax == _NEG_INF:
        xmax = 0.0
    return math.log(math.exp(x1 - xmax) + math.exp(x2 - xmax) + math.exp(x3 - xmax)) + xmax


@kernel
def _alpha(lp, targets, offsets, input_lengths, target_lengths, blank, log_alpha, nll):
    """The forward pass: ``log_alpha`` (N, T, 2 * S_max + 1) and ``nll`` (N,) from ``lp``
    (T, N, C) and the targets (flat, sample b's labels from ``offsets[b]``)."""
    for b in range(lp.shape[1]):
        t_len, s_len, off, la = _sample(b, input_lengths, target_lengths, offsets, log_alpha)
        if t_len == 0:
            # no frame: only the empty target has a path (of probability 1)
            nll[b] = 0.0 if s_len == 0 else math.inf
            continue
        for s in range(la.shape[1]):
            la[0, s] = _NEG_INF
        la[0, 0] = lp[0, b, blank]
        if s_len > 0:
            la[0, 1] = lp[0, b, targets[off]]
        for t in range(1, t_len):
            for s in range(2 * s_len + 1):
                current = blank if s % 2 == 0 else targets[off + s // 2]
                la2 = la[t - 1, s - 1] if s > 0 else _NEG_INF
                if s > 1 and (blank if s % 2 == 0 else targets[off + (s - 2) // 2]) != current:
                    la3 = la[t - 1, s - 2]
                else:
                    la3 = _NEG_INF
                la[t, s] = _log_sum_exp3(la[t - 1, s], la2, la3) + lp[t, b, current]
        last = t_len - 1
        if s_len == 0:
            # no label: the one path stays on the blank, with no last label to merge
            nll[b] = -la[last, 0]
        else:
            l1 = la[last, 2 * s_len]
            l2 = la[last, 2 * s_len - 1]
            m = max(l1, l2)
            if m == _NEG_INF:
                m = 0.0
            nll[b] = -(math.log(math.exp(l1 - m) + math.exp(l2 - m)) + m)


@kernel
def _gradient(lp, targets, offsets, input_lengths, target_lengths, blank, log_alpha, nll,
              grad_out, zero_infinity, log_beta, grad):
    """The backward pass: ``grad`` (T, N, C) of the losses weighted by ``grad_out`` (N,);
    ``log_beta`` is scratch of ``log_alpha``'s shape."""
    n_labels = lp.shape[2]
    t_max = lp.shape[0]
    for b in range(lp.shape[1]):
        t_len, s_len, off, la = _sample(b, input_lengths, target_lengths, offsets, log_alpha)
        lb = log_beta[b]
        if zero_infinity and nll[b] == math.inf:
            for t in range(t_max):
                for c in range(n_labels):
                    grad[t, b, c] = 0.0
            continue
        # grad first holds log(sum of alpha * beta) of each frame and label: -inf is the
        # log of the empty sum
        for t in range(t_max):
            for c in range(n_labels):
                grad[t, b, c] = _NEG_INF
            for s in range(lb.shape[1]):
                lb[t, s] = _NEG_INF
        if t_len > 0:
            last = t_len - 1
            lb[last, 2 * s_len] = lp[last, b, blank]
            grad[last, b, blank] = la[last, 2 * s_len] + lb[last, 2 * s_len]
            if s_len > 0:
                current = targets[off + s_len - 1]
                lb[last, 2 * s_len - 1] = lp[last, b, current]
                # (a blank and a label: different, nothing to add up)
                grad[last, b, current] = la[last, 2 * s_len - 1] + lb[last, 2 * s_len - 1]
        for t in range(t_len - 2, -1, -1):
            for s in range(2 * s_len, -1, -1):
                current = blank if s % 2 == 0 else targets[off + s // 2]
                lb2 = lb[t + 1, s + 1] if s < 2 * s_len else _NEG_INF
                if s < 2 * s_len - 1 and \
                        (blank if s % 2 == 0 else targets[off + (s + 2) // 2]) != current:
                    lb3 = lb[t + 1, s + 2]
                else:
                    lb3 = _NEG_INF
                lb[t, s] = _log_sum_exp3(lb[t + 1, s], lb2, lb3) + lp[t, b, current]
                log_alpha_beta = la[t, s] + lb[t, s]
                lcab = grad[t, b, current]
                if lcab == _NEG_INF:
                    grad[t, b, current] = log_alpha_beta
                else:
                    m = max(lcab, log_alpha_beta)
                    grad[t, b, current] = math.log(math.exp(lcab - m)
                                                   + math.exp(log_alpha_beta - m)) + m
        gr = grad_out[b]
        for t in range(t_len):
            for c in range(n_labels):
                v = lp[t, b, c]
                grad[t, b, c] = (math.exp(v) - math.exp(grad[t, b, c] + nll[b] - v)) * gr
        for t in range(t_len, t_max):
            for c in range(n_labels):
                grad[t, b, c] = 0.0


_CTC_FUNCTION = None


def _ctc_function():
    """The autograd.Function behind the op, made on first use (function.py loads autograd's
    machinery, which this module need not load at import)."""
    global _CTC_FUNCTION
    if _CTC_FUNCTION is not None:
        return _CTC_FUNCTION
    from tapegrad.function import BackwardCFunction, Function

    class _NotDifferentiableTwice(Function):
        """The gradient under ``create_graph``: PyTorch's has a node that refuses."""

        @staticmethod
        def forward(ctx, value, log_probs, grad_out):
            return Tensor._make(value)

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("derivative for aten::_ctc_loss_backward is not implemented")

    _NotDifferentiableTwice._backward_cls = type(
        "NotImplemented", (BackwardCFunction,),
        {"__slots__": (), "__module__": "tapegrad.autograd.function"})

    class CtcLoss(Function):
        @staticmethod
        def forward(ctx, log_probs, plan):
            lp = np.ascontiguousarray(log_probs._value)
            log_alpha, nll = _forward(lp, plan)
            ctx.plan, ctx.lp, ctx.log_alpha, ctx.nll = plan, lp, log_alpha, nll
            ctx.save_for_backward(log_probs)
            return Tensor._make(nll)

        @staticmethod
        def backward(ctx, grad_out):
            ctx.saved_tensors      # (raises if log_probs was changed in place since)
            targets, offsets, il, tl, blank, zero_infinity = ctx.plan
            grad = np.empty(ctx.lp.shape)
            _gradient(ctx.lp, targets, offsets, il, tl, blank, ctx.log_alpha, ctx.nll,
                      np.ascontiguousarray(grad_out._value, dtype=np.float64),
                      zero_infinity, np.empty(ctx.log_alpha.shape), grad)
            if tg.is_grad_enabled() and (grad_out.requires_grad or
                                         ctx.needs_input_grad[0]):
                log_probs, = ctx.saved_tensors
                return _NotDifferentiableTwice.apply(grad, log_probs, grad_out), None
            return Tensor._make(grad), None

    # PyTorch's node (a Function's would be "CtcLossBackward")
    CtcLoss._backward_cls = type(
        "CtcLossBackward0", (BackwardCFunction,),
        {"__slots__": (), "__module__": "tapegrad.autograd.function"})
    _CTC_FUNCTION = CtcLoss
    return CtcLoss


def _forward(lp, plan):
    targets, offsets, il, tl, _, _ = plan
    s_max = int(tl.max()) if tl.size else 0
    log_alpha = np.empty((lp.shape[1], lp.shape[0], 2 * s_max + 1))
    nll = np.empty(lp.shape[1])
    _alpha(lp, targets, offsets, il, tl, plan[4], log_alpha, nll)
    return log_alpha, nll


# ---------------------------------------------------------------------------------------------
# the arguments, checked as PyTorch checks them
# ---------------------------------------------------------------------------------------------
_WHERE = " (while checking arguments for ctc_loss_allocate_outputs)"
_OVERLOADS = ("(Tensor log_probs, Tensor targets, tuple of ints input_lengths, tuple of ints "
              "target_lengths, int blank = 0, int reduction = at::Reduction::Mean, bool "
              "zero_infinity = False)",
              "(Tensor log_probs, Tensor targets, Tensor input_lengths, Tensor target_lengths, "
              "int blank = 0, int reduction = at::Reduction::Mean, bool zero_infinity = False)")


def _plain_name(value):
    """A value's type as PyTorch's argument parser lists what it got."""
    if isinstance(value, Tensor):
        return "Tensor"
    t = type(value)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def _type_name(value):
    """A value's type as the parser describes it against an overload (with the types of a
    sequence's items, one level deep)."""
    if isinstance(value, tuple):
        return f"tuple of ({', '.join(_plain_name(v) for v in value)})"
    if isinstance(value, list):
        return f"list of [{', '.join(_plain_name(v) for v in value)}]"
    return _plain_name(value)


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_ints(value):
    return isinstance(value, (tuple, list)) and all(_is_int(v) for v in value)


def _bad_arguments(args):
    """PyTorch's TypeError for arguments that fit neither of ctc_loss's overloads.  (Its
    parser marks every argument but a tensor given for a tensor: so does this.)"""
    got = ", ".join(_plain_name(a) for a in args)
    lines = [f"ctc_loss() received an invalid combination of arguments - got ({got}), but "
             "expected one of:"]
    for overload, tensors in zip(_OVERLOADS, ((0, 1), (0, 1, 2, 3))):
        marked = ", ".join(_type_name(a) if i in tensors and isinstance(a, Tensor)
                           else f"!{_type_name(a)}!" for i, a in enumerate(args))
        lines.append(f" * {overload}")
        lines.append(f"      didn't match because some of the arguments have invalid types: "
                     f"({marked})")
    return TypeError("\n".join(lines) + "\n")


def _lengths(value, name):
    """A tensor's or a sequence's lengths as int64 values."""
    if isinstance(value, Tensor):
        if value._value.dtype.kind not in "iu":
            raise RuntimeError(f"{name} must be integral")
        return np.ascontiguousarray(value._value.reshape(-1), dtype=np.int64)
    return np.array([int(v) for v in value], dtype=np.int64)


def _plan(log_probs, targets, il, tl, blank):
    """(targets, offsets, input lengths, target lengths, blank): the kernels' arguments,
    after PyTorch's checks."""
    ndim = log_probs.dim()
    if ndim != 3:
        raise RuntimeError(f"Expected 3-dimensional tensor, but got {ndim}-dimensional tensor "
                           f"for argument #1 'log_probs'{_WHERE}")
    tdim = targets.dim()
    if not 1 <= tdim <= 2:
        raise RuntimeError(f"Expected 1 to 2 dimensions, but got {tdim}-dimensional tensor "
                           f"for argument #2 'targets'{_WHERE}")
    t_max, n, c = log_probs.shape
    if not 0 <= blank < c:
        raise RuntimeError("blank must be in label range")
    if il.size != n:
        raise RuntimeError("input_lengths must be of size batch_size")
    if tl.size != n:
        raise RuntimeError("target_lengths must be of size batch_size")
    labels = targets._value.astype(np.int64)
    for length in tl:
        if length < 0:
            raise RuntimeError(f"Expected target_lengths to have value at least 0, but got "
                               f"value {length}{_WHERE}")
    s_max = int(tl.max()) if n else 0
    if tdim == 1:
        offsets = np.concatenate([[0], np.cumsum(tl)[:-1]]).astype(np.int64)
        total = int(tl.sum())
        if labels.shape[0] != total:
            raise RuntimeError(f"Expected tensor to have size {total} at dimension 0, but got "
                               f"size {labels.shape[0]} for argument #2 'targets'{_WHERE}")
        flat = np.ascontiguousarray(labels)
    else:
        if labels.shape[0] != n:
            raise RuntimeError(f"Expected tensor to have size {n} at dimension 0, but got "
                               f"size {labels.shape[0]} for argument #2 'targets'{_WHERE}")
        if labels.shape[1] < s_max:
            raise RuntimeError(f"Expected tensor to have size at least {s_max} at dimension 1, "
                               f"but got size {labels.shape[1]} for argument #2 "
                               f"'targets'{_WHERE}")
        offsets = np.arange(n, dtype=np.int64) * labels.shape[1]
        flat = np.ascontiguousarray(labels).reshape(-1)
    for length in il:
        if length < 0:
            raise RuntimeError(f"Expected input_lengths to have value at least 0, but got "
                               f"value {length}{_WHERE}")
        if length > t_max:
            raise RuntimeError(f"Expected input_lengths to have value at most {t_max}, but "
                               f"got value {length}{_WHERE}")
    # PyTorch reads out of bounds for a label outside [0, C): refused here instead
    used = np.concatenate([flat[o:o + k] for o, k in zip(offsets, tl)]) if n else flat[:0]
    if used.size and (used.min() < 0 or used.max() >= c):
        bad = used[(used < 0) | (used >= c)][0]
        raise IndexError(f"ctc_loss: target label {bad} is out of range for {c} classes")
    return flat, offsets, il, tl, int(blank)


def _check_reduction(reduction):
    # (nn.functional's check, which imports this module: PyTorch's _Reduction.get_enum)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """The connectionist temporal classification loss of ``targets`` given the frames'
    log-probabilities ``log_probs`` (T, N, C) (or (T, C) for one sample), as
    ``torch.nn.functional.ctc_loss``.

    ``targets`` are padded (N, S) or concatenated 1-d (the samples' labels one after the
    other); ``input_lengths`` and ``target_lengths`` (tensors or tuples of ints, one per
    sample) say how many frames and labels each sample has.  ``blank`` is the blank label.
    ``reduction``: ``"none"`` (N,), ``"sum"``, or ``"mean"`` (each loss divided by its target
    length, at least 1, then averaged).  ``zero_infinity`` makes impossible alignments'
    infinite losses (and their gradients) 0.

    Example:
        >>> log_probs = tg.full((3, 1, 2), 0.5).log()    # blank or 1, even odds, 3 frames
        >>> F.ctc_loss(log_probs, tg.tensor([[1]]), (3,), (1,), reduction="sum")
        tensor(0.2877)
    """
    if isinstance(input_lengths, Tensor) != isinstance(target_lengths, Tensor) or not (
            isinstance(log_probs, Tensor) and isinstance(targets, Tensor)) or not (
            isinstance(input_lengths, Tensor) or (_is_ints(input_lengths)
                                                  and _is_ints(target_lengths))) or \
            not _is_int(blank) or not isinstance(zero_infinity, bool):
        _check_reduction(reduction)
        raise _bad_arguments((log_probs, targets, input_lengths, target_lengths, blank,
                              {"none": 0, "mean": 1, "sum": 2}[reduction], zero_infinity))
    _check_reduction(reduction)
    il = _lengths(input_lengths, "input_lengths")
    tl = _lengths(target_lengths, "target_lengths")
    batched = log_probs.dim() == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    if lp._value.dtype.kind != "f":
        raise NotImplementedError(
            f"\"ctc_loss_cpu\" not implemented for '{lp.dtype.scalar_name}'")
    if lp._value.size == 0:
        raise RuntimeError("log_probs tensor must not be empty")
    flat, offsets, il, tl, blank = _plan(lp, targets, il, tl, blank)
    plan = (flat, offsets, il, tl, blank, bool(zero_infinity))
    if lp.requires_grad and tg.is_grad_enabled():
        res = _ctc_function().apply(lp, plan)
    else:
        res = Tensor._make(_forward(np.ascontiguousarray(lp._value), plan)[1])
    if zero_infinity:
        res = tg.where(res == math.inf, tg.zeros(()), res)
    if reduction == "mean":
        return (res / tg.tensor(tl.astype(np.float64)).clamp_min(1)).mean()
    if reduction == "sum":
        return res.sum()
    return res if batched else res.squeeze(0)


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
