"""Writes whose target index repeats: ``scatter``/``scatter_`` (source form), ``index_put``/
``index_put_`` and ``x[idx] = v`` (accumulate=False), ``index_copy``/``index_copy_``,
``put``/``put_``.  The forward keeps the last write of a repeated target (PyTorch's serial
CPU order), and PyTorch's formulas give every source element the gradient at its target
(``grad.gather(dim, index)``, ``grad[indices]``), the overwritten ones too, while the input
gets the gradient of the elements nothing was written to.  Checked against PyTorch with
hypothesis over index patterns with repeats, eagerly, compiled (replayed with new values),
per sample (vmap), with create_graph and forward mode, and the part of the rule that is a
derivative against central differences."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg

torch = pytest.importorskip("torch")


def _index_put(m, x, s, i):
    return x.index_put((m.tensor(i),), s)


def _index_put_(m, x, s, i):
    y = x * 1
    y.index_put_((m.tensor(i),), s)
    return y


def _setitem(m, x, s, i):
    y = x * 1
    y[m.tensor(i)] = s
    return y


def _index_copy(m, x, s, i):
    return x.index_copy(0, m.tensor(i), s)


def _index_copy_(m, x, s, i):
    y = x * 1
    y.index_copy_(0, m.tensor(i), s)
    return y


def _put(m, x, s, i):
    return x.put(m.tensor(i), s)


def _put_(m, x, s, i):
    y = x * 1
    y.put_(m.tensor(i), s)
    return y


# (x of shape (n, 2); s of shape (len(i), 2); i: rows of x, repeats allowed)
ROW_OPS = {"index_put": _index_put, "index_put_": _index_put_, "setitem": _setitem,
           "index_copy": _index_copy, "index_copy_": _index_copy_}
# (x of shape (n, 2); s of shape (len(i),); i: flat positions of x)
FLAT_OPS = {"put": _put, "put_": _put_}


def _scatter(m, x, s, i):
    return x.scatter(0, m.tensor(i), s)


def _scatter_(m, x, s, i):
    y = x * 1
    y.scatter_(0, m.tensor(i), s)
    return y


def _scatter_fn(m, x, s, i):
    return m.scatter(x, 1, m.tensor(i).T, s.T)


# (x of shape (n, 2); s of shape (k, 2); i of shape (k, 2): rows of x per column)
SCATTER_OPS = {"scatter": _scatter, "scatter_": _scatter_, "torch.scatter dim 1": _scatter_fn}
OPS = {**ROW_OPS, **FLAT_OPS, **SCATTER_OPS}


def _arrays(name, n, index):
    rng = np.random.default_rng(len(index) * 7 + n)
    x = rng.normal(size=(n, 2))
    k = len(index)
    if name in FLAT_OPS:
        return x, rng.normal(size=k), np.array(index) % (2 * n)
    if name in SCATTER_OPS:
        i = np.stack([np.array(index) % n, np.array(index[::-1]) % n], 1)
        if name == "torch.scatter dim 1":
            return x.T.copy(), rng.normal(size=(k, 2)), i
        return x, rng.normal(size=(k, 2)), i
    return x, rng.normal(size=(k, 2)), np.array(index) % n


def run(m, name, x, s, i, weights):
    xt = m.tensor(x, requires_grad=True)
    st_ = m.tensor(s, requires_grad=True)
    y = OPS[name](m, xt, st_, i)
    (y * m.tensor(weights(y.shape))).sum().backward()
    return (y.detach().numpy(), type(y.grad_fn).__name__, xt.grad.numpy(), st_.grad.numpy())


def _weights(shape):
    return np.linspace(0.5, 3.0, int(np.prod(shape))).reshape(tuple(shape))



# index patterns with many repeats: few distinct targets, several writes each
INDEX = st.lists(st.integers(0, 3), min_size=1, max_size=9)


@pytest.mark.parametrize("name", sorted(OPS))
@settings(max_examples=15, deadline=None)
@given(index=INDEX, n=st.integers(2, 4))
def test_repeated_targets_match_pytorch(name, index, n):
    x, s, i = _arrays(name, n, index)
    got = run(tg, name, x, s, i, _weights)
    want = run(torch, name, x, s, i, _weights)
    np.testing.assert_array_equal(got[0], want[0])      # the last write wins
    assert got[1] == want[1]     # x[idx] = v too: IndexPutBackward0
    np.testing.assert_array_equal(got[2], want[2])
    np.testing.assert_array_equal(got[3], want[3])      # overwritten sources too


def test_every_overwritten_source_gets_the_gradient_at_its_target():
    x = tg.zeros(3, requires_grad=True)
    s = tg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = x.index_put((tg.tensor([1, 1, 2, 1]),), s)
    (y * tg.tensor([10.0, 20.0, 30.0])).sum().backward()
    assert y.tolist() == [0.0, 4.0, 3.0]
    assert s.grad.tolist() == [20.0, 20.0, 30.0, 20.0]
    assert x.grad.tolist() == [10.0, 0.0, 0.0]


@pytest.mark.parametrize("name", sorted(OPS))
def test_compiled_replays_match_pytorch(name):
    index = [1, 0, 1, 1, 2]
    x0, s0, i = _arrays(name, 3, index)

    def body(x, s):
        return OPS[name](tg, x, s, i)
    compiled = tg.compile(body)
    rng = np.random.default_rng(5)
    for _ in range(4):
        x, s = rng.normal(size=x0.shape), rng.normal(size=s0.shape)
        results = []
        for m, fn in ((tg, compiled), (torch, None)):
            xt = m.tensor(x, requires_grad=True)
            st_ = m.tensor(s, requires_grad=True)
            y = fn(xt, st_) if fn is not None else OPS[name](torch, xt, st_, i)
            (y * m.tensor(_weights(y.shape))).sum().backward()
            results.append((y.detach().numpy(), xt.grad.numpy(), st_.grad.numpy()))
        for a, b in zip(*results):
            np.testing.assert_array_equal(a, b)
    if name.endswith("_") or name == "setitem":
        # a compiled call runs in-place ops eagerly (stats say why): eager's numbers above
        assert compiled.stats.eager == 3, compiled.stats.as_dict()
    else:
        assert compiled.stats.replays == 3, compiled.stats.as_dict()


@pytest.mark.parametrize("name", ["index_put", "scatter", "setitem", "put"])
def test_per_sample_gradients_match_pytorch(name):
    index = [2, 2, 0, 2]
    x0, s0, i = _arrays(name, 3, index)
    rng = np.random.default_rng(6)
    batch = rng.normal(size=(5,) + s0.shape)
    w = _weights(x0.shape)
    x = x0

    def loss(m, s):
        return (OPS[name](m, m.tensor(x), s, i) ** 2 * m.tensor(w)).sum()
    values, grads = tg.per_sample_value_and_grad(lambda s: loss(tg, s))(tg.tensor(batch))
    for k in range(len(batch)):
        s = torch.tensor(batch[k], requires_grad=True)
        v = loss(torch, s)
        v.backward()
        np.testing.assert_allclose(values.numpy()[k], v.item(), rtol=1e-14)
        np.testing.assert_allclose(grads.numpy()[k], s.grad.numpy(), rtol=1e-14, atol=0)


@pytest.mark.parametrize("name", ["index_put", "scatter", "index_copy", "put"])
def test_second_order_matches_pytorch(name):
    x, s, i = _arrays(name, 3, [0, 1, 0, 0])
    results = []
    for m in (tg, torch):
        xt = m.tensor(x, requires_grad=True)
        st_ = m.tensor(s, requires_grad=True)
        y = OPS[name](m, xt, st_, i)
        loss = (y ** 3).sum()
        gx, gs = m.autograd.grad(loss, (xt, st_), create_graph=True)
        ((gs ** 2).sum() + (gx * xt).sum()).backward()
        results.append((gx.detach().numpy(), gs.detach().numpy(), xt.grad.numpy(),
                        st_.grad.numpy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")   # (torch.func's jit import)
def test_forward_mode_takes_the_written_tangent():
    x, s, i = _arrays("index_put", 3, [0, 1, 0, 2, 0])
    tx, ts = np.ones_like(x) * 0.5, np.arange(s.size, dtype=float).reshape(s.shape)
    got = tg.func.jvp(lambda a, b: _index_put(tg, a, b, i), (tg.tensor(x), tg.tensor(s)),
                      (tg.tensor(tx), tg.tensor(ts)))
    want = torch.func.jvp(lambda a, b: _index_put(torch, a, b, i),
                          (torch.tensor(x), torch.tensor(s)),
                          (torch.tensor(tx), torch.tensor(ts)))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("name", sorted(OPS))
@settings(max_examples=4, deadline=None)
@given(index=INDEX)
def test_central_differences_where_the_rule_is_a_derivative(name, index):
    # the input's gradient and that of the sources whose write survives are derivatives of
    # the values; an overwritten source's PyTorch gradient is not (its value changes nothing)
    x, s, i = _arrays(name, 3, index)
    _, _, gx, gs = run(tg, name, x, s, i, _weights)
    w = _weights(OPS[name](tg, tg.tensor(x), tg.tensor(s), i).shape)

    def f(xa, sa):
        return float((OPS[name](tg, tg.tensor(xa), tg.tensor(sa), i).numpy() * w).sum())
    h = 1e-6
    for arr, grad, is_x in ((x, gx, True), (s, gs, False)):
        for k in range(arr.size):
            step = np.zeros(arr.size)
            step[k] = h
            step = step.reshape(arr.shape)
            if is_x:
                fd = (f(x + step, s) - f(x - step, s)) / (2 * h)
            else:
                fd = (f(x, s + step) - f(x, s - step)) / (2 * h)
            if not is_x and abs(fd) < 1e-9:
                continue    # an overwritten source: PyTorch's rule is no derivative there
            np.testing.assert_allclose(grad.reshape(-1)[k], fd, rtol=1e-6, atol=1e-8)


def _second_backward_error(m, y):
    y.sum().backward()
    try:
        y.sum().backward()
    except RuntimeError as e:
        return str(e).replace("torch.", "tapegrad.")
    return None


@pytest.mark.parametrize("name", ["index_put", "scatter", "index_copy", "put"])
def test_second_backward_fails_as_in_pytorch_also_compiled(name):
    # PyTorch's nodes save their indices, which a backward without retain_graph frees; a
    # replayed tape is freed as a recorded one
    x, s, i = _arrays(name, 3, [0, 1, 0, 0])
    compiled = tg.compile(lambda a, b: OPS[name](tg, a, b, i))
    errors = []
    for m, fn in ((torch, lambda a, b: OPS[name](torch, a, b, i)), (tg, OPS[name]),
                  (tg, compiled), (tg, compiled)):
        xt = m.tensor(x, requires_grad=True)
        st_ = m.tensor(s, requires_grad=True)
        y = fn(xt, st_) if fn is compiled or m is torch else fn(m, xt, st_, i)
        errors.append(_second_backward_error(m, y))
    assert errors[0] is not None and "second time" in errors[0]
    assert errors[1:] == errors[:1] * 3
    assert compiled.stats.replays == 1, compiled.stats.as_dict()
