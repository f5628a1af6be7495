"""A compiled function called with an argument that has a history (computed from tensors
that require grad) gives the gradient to those tensors, as PyTorch does.  A recording's
arguments are the leaves of its tape, where its gradients stop; so such calls run eagerly,
and ``fn.stats`` says why.  A loaded tape, which has no eager function, refuses them."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

X = np.array([[0.5, -1.25, 2.0], [1.5, 0.75, -0.5]])
W = np.array([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.25]])


def _loss(m, h, w):
    return (m.tanh(h @ w) ** 2).sum()


def _grads(m, call, x0, w0, before):
    x = m.tensor(x0, requires_grad=True)
    w = m.tensor(w0, requires_grad=True)
    call(before(m, x), w).backward()
    return x.grad.numpy().copy(), w.grad.numpy().copy()


BEFORE = {
    "times two": lambda m, x: x * 2.0,
    "a transposed view": lambda m, x: x.t().t(),
    "a row slice": lambda m, x: x[:, :],
    "exp": lambda m, x: m.exp(x),
}


@pytest.mark.parametrize("before", sorted(BEFORE))
def test_gradient_reaches_the_tensors_behind_an_argument(before):
    f = tg.compile(lambda h, w: _loss(tg, h, w))
    f(tg.tensor(X, requires_grad=True), tg.tensor(W, requires_grad=True))  # recorded on leaves
    want = _grads(torch, lambda h, w: _loss(torch, h, w), X, W, BEFORE[before])
    for k in range(3):
        got = _grads(tg, f, X + k, W, BEFORE[before]) if k else \
            _grads(tg, f, X, W, BEFORE[before])
        if k == 0:
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
        else:
            eager = _grads(tg, lambda h, w: _loss(tg, h, w), X + k, W, BEFORE[before])
            for g, w in zip(got, eager):
                np.testing.assert_array_equal(g, w)
    assert f.stats.eager == 3 and f.stats.replays == 0, f.stats
    assert any("has a history" in r for r in f.stats.eager_reasons), f.stats.eager_reasons
    # a leaf again: replayed
    got = _grads(tg, f, X, W, lambda m, x: x)
    np.testing.assert_allclose(got[0], _grads(torch, lambda h, w: _loss(torch, h, w), X, W,
                                              lambda m, x: x)[0], rtol=1e-10, atol=1e-12)
    assert f.stats.replays == 1, f.stats


def test_first_call_with_a_history_records_nothing():
    f = tg.compile(lambda h, w: _loss(tg, h, w))
    got = _grads(tg, f, X, W, BEFORE["times two"])
    want = _grads(torch, lambda h, w: _loss(torch, h, w), X, W, BEFORE["times two"])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-10, atol=1e-12)
    assert f.stats.records == 0 and f.stats.eager == 1, f.stats


def test_a_history_inside_a_list_argument():
    f = tg.compile(lambda hs, w: sum(_loss(tg, h, w) for h in hs))
    for k in range(3):
        x = tg.tensor(X, requires_grad=True)
        w = tg.tensor(W, requires_grad=True)
        hs = [x, x * 3.0] if k else [x, x.detach() * 3.0]
        f(hs, w).backward()
        xt = torch.tensor(X, requires_grad=True)
        wt = torch.tensor(W, requires_grad=True)
        hst = [xt, xt * 3.0] if k else [xt, xt.detach() * 3.0]
        sum(_loss(torch, h, wt) for h in hst).backward()
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert f.stats.eager == 2, f.stats


def test_a_loaded_tape_refuses_an_argument_with_a_history():
    f = tg.compile(lambda h, w: _loss(tg, h, w))
    f(tg.tensor(X), tg.tensor(W))
    loaded = tg.load_tape(f.variants()[0].to_bytes())
    x = tg.tensor(X, requires_grad=True)
    with pytest.raises(ValueError, match="argument 0 has a history"):
        loaded(x * 2.0, tg.tensor(W, requires_grad=True))
    out = loaded(x, tg.tensor(W))
    out.backward()
    xt = torch.tensor(X, requires_grad=True)
    _loss(torch, xt, torch.tensor(W)).backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
