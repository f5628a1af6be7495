"""Integer and bool tensor arguments of a compiled function are data, like float tensors
(issue 16): their values go into the replay, and only what Python reads of them -- ``.item()``,
indexing by their values, a branch -- is a guard.  A compiled training step that gets a new
batch of labels each call replays; one that does integer arithmetic on them (``labels - 1``)
runs eagerly, giving eager mode's dtypes.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tapegrad as tg
from tapegrad import nn

F = nn.functional
N, D, C = 6, 4, 3


def _weights():
    return tg.tensor(np.linspace(-0.5, 0.5, D * C).reshape(D, C), requires_grad=True)


def _data(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((N, D)), rng.integers(0, C, N)


def _step_matches_eager(compiled, loss, X, W, labels, *extra):
    out = compiled(tg.tensor(X), W, tg.tensor(labels), *extra)
    W.grad = None
    out.backward()
    got_value, got_grad = out.item(), W.grad._value.copy()
    W_e = tg.tensor(W._value, requires_grad=True)
    want = loss(tg.tensor(X), W_e, tg.tensor(labels), *extra)
    want.backward()
    np.testing.assert_allclose(got_value, want.item(), rtol=1e-13)
    np.testing.assert_allclose(got_grad, W_e.grad._value, rtol=1e-12, atol=1e-15)
    assert out.grad_fn is not None


LOSSES = {
    "cross_entropy": lambda X, W, y: F.cross_entropy(X @ W, y),
    "cross_entropy-sum": lambda X, W, y: F.cross_entropy(X @ W, y, reduction="sum"),
    "nll_loss-weight-ignore": lambda X, W, y, w: F.nll_loss(
        F.log_softmax(X @ W, 1), y, weight=w, ignore_index=1),
    "module": lambda X, W, y: nn.CrossEntropyLoss()(X @ W, y),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_training_step_with_new_labels_each_call_replays(name):
    loss = LOSSES[name]
    extra = (tg.tensor([0.5, 2.0, 1.0]),) if "weight" in name else ()
    compiled = tg.compile(loss)
    W = _weights()
    for call in range(6):
        X, labels = _data(call)
        _step_matches_eager(compiled, loss, X, W, labels, *extra)
        with tg.no_grad():
            W -= 0.1 * W.grad
    assert compiled.stats.records == 1 and compiled.stats.replays == 5, \
        compiled.stats.as_dict()


@given(labels=st.lists(hnp.arrays(np.int64, N, elements=st.integers(-1, C - 1)),
                       min_size=2, max_size=4))
def test_labels_over_their_whole_range_replay_as_eager(labels):
    loss = LOSSES["nll_loss-weight-ignore"]
    weight = tg.tensor([0.5, 2.0, 0.0])
    compiled = tg.compile(loss)
    W = _weights()
    X = _data(0)[0]
    for y in labels:
        _step_matches_eager(compiled, loss, X, W, np.where(y == -1, 1, y), weight)
    assert compiled.stats.records == 1


def test_out_of_bounds_labels_raise_as_in_eager_mode():
    loss = LOSSES["cross_entropy"]
    compiled = tg.compile(loss)
    W = _weights()
    X, labels = _data(0)
    compiled(tg.tensor(X), W, tg.tensor(labels))
    labels[2] = C + 4
    for fn in (loss, compiled):
        with pytest.raises(IndexError, match=f"Target {C + 4} is out of bounds"):
            fn(tg.tensor(X), W, tg.tensor(labels))


def test_python_reads_of_integer_arguments_are_guards():
    def f(x, idx, k):
        if int(k) > 1:                       # a branch on a value
            x = x * 2.0
        return x[idx].sum() * k.item()       # indexing by values, item()

    compiled = tg.compile(f)
    x = tg.tensor(np.arange(5.0), requires_grad=True)
    calls = [([0, 2], 1), ([0, 2], 1), ([4, 1], 1), ([4, 1], 3), ([4, 1], 3)]
    for idx, k in calls:
        got = compiled(x, tg.tensor(idx), tg.tensor(k))
        assert got.item() == f(x, tg.tensor(idx), tg.tensor(k)).item()
    # recorded again when the values read changed, replayed when they repeat
    assert compiled.stats.records == 3 and compiled.stats.replays == 2


def test_bool_mask_argument_is_data():
    def masked_mean(x, mask):
        return (x * mask).sum() / mask.sum()

    compiled = tg.compile(masked_mean)
    rng = np.random.default_rng(1)
    for _ in range(5):
        xv, mv = rng.standard_normal(8), rng.random(8) > 0.4
        mv[0] = True
        x = tg.tensor(xv, requires_grad=True)
        got = compiled(x, tg.tensor(mv))
        got.backward()
        xe = tg.tensor(xv, requires_grad=True)
        want = masked_mean(xe, tg.tensor(mv))
        want.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-13)
        np.testing.assert_allclose(x.grad._value, xe.grad._value, rtol=1e-13)
    assert compiled.stats.records == 1 and compiled.stats.replays == 4


def test_integer_results_keep_eager_dtypes():
    def f(x, labels, mask):
        return (x * labels.float()).sum(), labels.sum(), labels.view(2, -1), (labels == 1), \
            mask.sum(), labels.max()

    compiled = tg.compile(f)
    rng = np.random.default_rng(2)
    for _ in range(4):
        xv, lv, mv = rng.standard_normal(6), rng.integers(0, 5, 6), rng.random(6) > 0.5
        got = compiled(tg.tensor(xv, requires_grad=True), tg.tensor(lv), tg.tensor(mv))
        want = f(tg.tensor(xv, requires_grad=True), tg.tensor(lv), tg.tensor(mv))
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g._value, w._value, rtol=1e-13)
            assert g.requires_grad == w.requires_grad
    assert compiled.stats.records == 1 and compiled.stats.replays == 3


ARITHMETIC = {
    "labels - 1 as an index": lambda x, labels: x[labels - 1].sum(),
    "labels * 2 returned": lambda x, labels: (x.sum(), labels * 2),
    "-labels returned": lambda x, labels: (x.sum(), tg.neg(labels)),
    "cat of labels": lambda x, labels: (x.sum(), tg.cat([labels, labels])),
    "where of labels": lambda x, labels: (x.sum(), tg.where(labels > 1, labels, labels)),
}


@pytest.mark.parametrize("name", list(ARITHMETIC))
def test_integer_arithmetic_on_an_integer_argument_runs_eagerly(name):
    f = ARITHMETIC[name]
    compiled = tg.compile(f)
    for labels in ([1, 2, 3], [3, 1, 1], [2, 2, 1]):
        x = tg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        got = compiled(x, tg.tensor(labels))
        want = f(tg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True), tg.tensor(labels))
        for g, w in zip(*(o if isinstance(o, tuple) else (o,) for o in (got, want))):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g._value, w._value)
    assert compiled.stats.replays == 0
    assert any("integer arithmetic" in why for why, _ in compiled.stats.eager_reasons)


class Box:
    def __init__(self, labels):
        self.labels = labels


def test_integer_tensors_held_by_an_object_argument_are_state():
    def f(x, box):
        return x[box.labels].sum()

    compiled = tg.compile(f)
    box = Box(tg.tensor([0, 1]))
    for labels in (None, None, [2, 2], None):
        if labels is not None:
            box.labels = tg.tensor(labels)    # (a tensor is guarded by identity)
        x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
        assert compiled(x, box).item() == f(x, box).item()
    assert compiled.stats.records == 2 and compiled.stats.replays == 2
