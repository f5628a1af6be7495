"""``nn.functional.ctc_loss`` and ``nn.CTCLoss`` against PyTorch in float64: losses and the
gradient with respect to ``log_probs`` (to the bit where the kernels agree, within 1e-12
otherwise), the grad_fn chain of each reduction, padded and concatenated targets, lengths
as tensors or tuples, unbatched input, ``zero_infinity``, and PyTorch's errors."""
import re

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

import tapegrad as tg
from oracle import message
from tapegrad import nn

RTOL = 1e-12


def _chain(t):
    """The grad_fn names from ``t`` back along first inputs."""
    names, fn = [], t.grad_fn
    while fn is not None:
        names.append(re.sub(r"^(torch|tapegrad)::autograd::", "", fn.name()))
        nxt = fn.next_functions
        fn = nxt[0][0] if nxt else None
    return names


def _run(lib, x, targets, il, tl, as_tensors, cot_seed=3, **kwargs):
    lp = lib.tensor(x, requires_grad=True)
    lengths = (lib.tensor(il), lib.tensor(tl)) if as_tensors else (tuple(il), tuple(tl))
    loss = lib.nn.functional.ctc_loss(lp, lib.tensor(targets), *lengths, **kwargs)
    cot = np.random.default_rng(cot_seed).standard_normal(tuple(loss.shape))
    loss.backward(lib.tensor(cot))
    return loss.detach().numpy(), lp.grad.numpy(), _chain(loss), tuple(loss.shape)


def _log_probs(rng, shape):
    x = rng.standard_normal(shape) * 2
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _compare(ours, theirs, exact=True):
    assert ours[2] == theirs[2] and ours[3] == theirs[3]
    if exact:
        np.testing.assert_array_equal(ours[0], theirs[0])
        np.testing.assert_array_equal(ours[1], theirs[1])
    else:
        np.testing.assert_allclose(ours[0], theirs[0], rtol=RTOL, atol=0)
        np.testing.assert_allclose(ours[1], theirs[1], rtol=RTOL, atol=1e-14)


@st.composite
def _problems(draw):
    t_max = draw(st.integers(1, 8))
    n = draw(st.integers(1, 4))
    c = draw(st.integers(2, 6))
    blank = draw(st.integers(0, c - 1))
    others = [k for k in range(c) if k != blank]
    tl = [draw(st.integers(0, 4)) for _ in range(n)]
    il = [draw(st.integers(0, t_max)) for _ in range(n)]
    # a label may repeat (then alignments need a blank between), or be the blank itself
    labels = [[draw(st.sampled_from(others if draw(st.integers(0, 9)) else range(c)))
               for _ in range(k)] for k in tl]
    return t_max, n, c, blank, il, tl, labels


@given(problem=_problems(), reduction=st.sampled_from(["none", "mean", "sum"]),
       zero_infinity=st.booleans(), padded=st.booleans(), as_tensors=st.booleans(),
       seed=st.integers(0, 2**20))
def test_ctc_loss_matches_pytorch(problem, reduction, zero_infinity, padded, as_tensors, seed):
    t_max, n, c, blank, il, tl, labels = problem
    x = _log_probs(np.random.default_rng(seed), (t_max, n, c))
    if padded:
        width = max(tl) + (seed % 2)
        targets = np.full((n, width), seed % c, dtype=np.int64)
        for b, row in enumerate(labels):
            targets[b, :len(row)] = row
    else:
        targets = np.array([k for row in labels for k in row], dtype=np.int64)
    kwargs = dict(blank=blank, reduction=reduction, zero_infinity=zero_infinity)
    ours = _run(tg, x, targets, il, tl, as_tensors, **kwargs)
    theirs = _run(torch, x, targets, il, tl, as_tensors, **kwargs)
    # the loss of each sample and its gradient are the kernels' bits; a reduction adds
    # rounding of its own, as PyTorch's
    _compare(ours, theirs, exact=reduction == "none")


@given(t_max=st.integers(1, 6), c=st.integers(2, 5), s=st.integers(0, 3),
       reduction=st.sampled_from(["none", "mean", "sum"]), seed=st.integers(0, 2**20))
def test_unbatched_log_probs(t_max, c, s, reduction, seed):
    rng = np.random.default_rng(seed)
    x = _log_probs(rng, (t_max, c))
    targets = rng.integers(1, c, size=s)
    il, tl = int(rng.integers(0, t_max + 1)), s
    results = []
    for lib in (tg, torch):
        lp = lib.tensor(x, requires_grad=True)
        loss = lib.nn.functional.ctc_loss(lp, lib.tensor(targets), lib.tensor(il),
                                          lib.tensor(tl), reduction=reduction)
        loss.backward()
        results.append((loss.detach().numpy(), lp.grad.numpy(), _chain(loss),
                        tuple(loss.shape)))
    _compare(*results, exact=False)


def test_grad_fn_chains_and_the_module():
    rng = np.random.default_rng(0)
    x = _log_probs(rng, (5, 2, 4))
    targets = np.array([[1, 2, 2], [3, 1, 0]])
    for reduction in ("none", "mean", "sum"):
        for zero_infinity in (False, True):
            results = []
            for lib in (tg, torch):
                module = lib.nn.CTCLoss(blank=0, reduction=reduction,
                                        zero_infinity=zero_infinity)
                assert repr(module) == "CTCLoss()"
                assert (module.blank, module.reduction, module.zero_infinity) == \
                    (0, reduction, zero_infinity)
                lp = lib.tensor(x, requires_grad=True)
                loss = module(lp, lib.tensor(targets), lib.tensor([5, 2]), lib.tensor([3, 2]))
                results.append(_chain(loss))
            assert results[0] == results[1]
    # the node's own name and its link to log_probs
    lp = tg.tensor(x, requires_grad=True)
    loss = tg.nn.functional.ctc_loss(lp, tg.tensor(targets), (5, 4), (3, 2), reduction="none")
    assert loss.grad_fn.name() == "CtcLossBackward0"
    assert loss.grad_fn.next_functions[0][0].name() == "tapegrad::autograd::AccumulateGrad"


def test_impossible_alignments_are_infinite_or_zeroed():
    rng = np.random.default_rng(1)
    x = _log_probs(rng, (4, 3, 3))
    # sample 0: 3 frames cannot hold "1 1 2" (which needs 4); sample 2: no frame at all
    targets = np.array([[1, 1, 2], [2, 1, 0], [1, 0, 0]])
    for zero_infinity in (False, True):
        for reduction in ("none", "mean", "sum"):
            ours = _run(tg, x, targets, (3, 4, 0), (3, 2, 1), False, reduction=reduction,
                        zero_infinity=zero_infinity)
            theirs = _run(torch, x, targets, (3, 4, 0), (3, 2, 1), False,
                          reduction=reduction, zero_infinity=zero_infinity)
            _compare(ours, theirs, exact=reduction == "none")


def test_no_grad_and_log_probs_without_grad():
    x = _log_probs(np.random.default_rng(2), (4, 2, 3))
    for lib in (tg, torch):
        with lib.no_grad():
            loss = lib.nn.functional.ctc_loss(lib.tensor(x, requires_grad=True),
                                              lib.tensor([[1, 2], [2, 2]]), (4, 4), (2, 2))
        assert loss.grad_fn is None and not loss.requires_grad
    ours = tg.nn.functional.ctc_loss(tg.tensor(x), tg.tensor([[1, 2], [2, 2]]), (4, 4), (2, 2),
                                     reduction="none")
    theirs = torch.nn.functional.ctc_loss(torch.tensor(x), torch.tensor([[1, 2], [2, 2]]),
                                          (4, 4), (2, 2), reduction="none")
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_the_gradient_is_not_differentiable_again():
    x = _log_probs(np.random.default_rng(4), (4, 2, 3))
    outcomes = []
    for lib in (tg, torch):
        lp = lib.tensor(x, requires_grad=True)
        loss = lib.nn.functional.ctc_loss(lp, lib.tensor([[1, 2], [2, 1]]), (4, 3), (2, 2))
        g, = lib.autograd.grad(loss, lp, create_graph=True)
        # (tapegrad's gradient reaches lp through a view of the node PyTorch shows, whose
        # grad_fn is then ViewBackward0 where PyTorch's is NotImplemented)
        outcomes.append(g.requires_grad)
        with pytest.raises(RuntimeError) as info:
            g.sum().backward()
        outcomes.append(message(info.value))
    assert outcomes[:2] == outcomes[2:]


def _outcome(fn):
    try:
        result = fn()
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        return type(e).__name__, message(e)
    return "value", tuple(np.atleast_1d(result.detach().numpy()).tolist())


LP = _log_probs(np.random.default_rng(5), (5, 2, 4))
BAD = [
    "F.ctc_loss(lp, t, (5, 4, 3), (3, 2))",
    "F.ctc_loss(lp, t, (5, 4), (3,))",
    "F.ctc_loss(lp, t, (6, 4), (3, 2))",
    "F.ctc_loss(lp, t, (-1, 4), (3, 2))",
    "F.ctc_loss(lp, t, (5, 4), (4, 2))",
    "F.ctc_loss(lp, t, (5, 4), (-1, 2))",
    "F.ctc_loss(lp, t, (5, 4), (3, 2), blank=4)",
    "F.ctc_loss(lp, t, (5, 4), (3, 2), blank=-1)",
    "F.ctc_loss(lp, lib.tensor([1, 2, 2, 3]), (5, 4), (3, 2))",
    "F.ctc_loss(lp, lib.tensor([1, 2, 2, 3, 1, 0]), (5, 4), (3, 2))",
    "F.ctc_loss(lp, t[:1], (5, 4), (3, 2))",
    "F.ctc_loss(lp, t, (5, 4), (3, 2), reduction='bad')",
    "F.ctc_loss(lp, t, lib.tensor([5, 4]), (3, 2))",
    "F.ctc_loss(lp, t, (5, 4), lib.tensor([3, 2]))",
    "F.ctc_loss(lp, t, (5.0, 4), (3, 2))",
    "F.ctc_loss(lp, t, (5, 4), (3, 2), blank=1.5)",
    "F.ctc_loss(lp, [[1, 2, 2], [3, 1, 0]], (5, 4), (3, 2))",
    "F.ctc_loss(lp, t, lib.tensor([5.0, 4.0]), lib.tensor([3.0, 2.0]))",
    "F.ctc_loss(lp, t, lib.tensor([5, 4]), lib.tensor([3.0, 2.0]))",
    "F.ctc_loss(lp, t, lib.tensor([[5, 4]]), lib.tensor([3, 2]))",
    "F.ctc_loss(lp, t, lib.tensor(5), lib.tensor([3, 2]))",
    "F.ctc_loss(lp[0], t, (5, 4), (3, 2))",
    "F.ctc_loss(lp[:, 0, 0], t, (5,), (3,))",
    "F.ctc_loss(lp.unsqueeze(0), t, (5, 4), (3, 2))",
    "F.ctc_loss(lp, t.unsqueeze(0), (5, 4), (3, 2))",
    "F.ctc_loss(lp, t.double(), (5, 4), (3, 2))",
    "F.ctc_loss(lp, t > 1, (5, 4), (3, 2))",
    "F.ctc_loss(lp, t, [5, 4], [3, 2])",
    "F.ctc_loss(lp, t, lib.tensor([5, 4], dtype=lib.int32), lib.tensor([3, 2]))",
    "F.ctc_loss(lp.long(), t, (5, 4), (3, 2))",
    "F.ctc_loss(lp.bool(), t, (5,), (3, 2))",
    "F.ctc_loss(lp[:0], t, (5, 4), (3, 2))",
    "F.ctc_loss(lp[:, :, :0], t, (5, 4), (3, 2), blank=3)",
    "F.ctc_loss(lp, t, (0, 4), (0, 2))",
    "F.ctc_loss(lp, t, (5, 4), (0, 0), reduction='none')",
]


@pytest.mark.parametrize("call", BAD)
def test_arguments_as_pytorch_checks_them(call):
    results = []
    for lib in (tg, torch):
        env = {"F": lib.nn.functional, "lib": lib, "lp": lib.tensor(LP, requires_grad=True),
               "t": lib.tensor([[1, 2, 2], [3, 1, 0]])}
        results.append(_outcome(lambda: eval(call, env)))
    ours, theirs = results
    if ours[0] == "value":
        assert theirs[0] == "value"
        np.testing.assert_allclose(ours[1], theirs[1], rtol=RTOL)
    else:
        assert ours == theirs


def test_a_label_outside_the_classes_is_refused():
    # (PyTorch's CPU kernel reads out of bounds there: tapegrad raises instead)
    with pytest.raises(IndexError, match=re.escape("target label 7 is out of range for 4")):
        tg.nn.functional.ctc_loss(tg.tensor(LP), tg.tensor([[7, 2, 2], [3, 1, 0]]), (5, 4),
                                  (3, 2))
