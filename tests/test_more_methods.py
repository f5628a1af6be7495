"""More of PyTorch's tensor methods against PyTorch: the in-place view ops ``squeeze_``,
``unsqueeze_`` and ``t_`` (shapes, versions, grad_fn names, errors, and their aliases),
``.H``, ``masked_scatter``, ``put`` and ``index_put`` with their in-place forms,
``poisson`` and ``nn.functional.gumbel_softmax``."""
import warnings

import numpy as np
import pytest

import strategies as S  # noqa: F401 - makes the source tree importable
import tapegrad as tg
from oracle import outcome

torch = pytest.importorskip("torch")

D = "float64"


def _same(call):
    ours, theirs = outcome(tg, call), outcome(torch, call)
    assert ours == theirs, f"\ntapegrad: {ours}\nPyTorch:  {theirs}"
    return ours


def _x(L, shape=(2, 3), rg=False):
    v = np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape) / 4.0
    return L.tensor(v, dtype=getattr(L, D), requires_grad=rg)


def _nonleaf(L, shape=(2, 3)):
    return _x(L, shape, rg=True) * 2.0


# ---------------------------------------------------------------------------------------------
# squeeze_, unsqueeze_, t_
# ---------------------------------------------------------------------------------------------
def _in_place_then(op, shape):
    def call(L):
        y = _nonleaf(L, shape)
        r = op(y)
        assert r is y
        return y, y._version
    return call


RESHAPE_IN_PLACE = {
    "squeeze_()": (lambda y: y.squeeze_(), (1, 3, 1)),
    "squeeze_(dim)": (lambda y: y.squeeze_(0), (1, 3, 1)),
    "squeeze_(dim) of a size > 1": (lambda y: y.squeeze_(1), (1, 3, 1)),
    "squeeze_(dims)": (lambda y: y.squeeze_((0, 2)), (1, 3, 1)),
    "squeeze_(-1)": (lambda y: y.squeeze_(-1), (2, 1)),
    "unsqueeze_(0)": (lambda y: y.unsqueeze_(0), (2, 3)),
    "unsqueeze_(-1)": (lambda y: y.unsqueeze_(-1), (2, 3)),
    "unsqueeze_ of 0-d": (lambda y: y.unsqueeze_(0), ()),
    "t_ of a matrix": (lambda y: y.t_(), (2, 3)),
    "t_ of a row": (lambda y: y.t_(), (1, 3)),
    "t_ of a vector": (lambda y: y.t_(), (3,)),
}


@pytest.mark.parametrize("name", sorted(RESHAPE_IN_PLACE))
def test_in_place_view_ops_match_pytorch(name):
    op, shape = RESHAPE_IN_PLACE[name]
    _same(_in_place_then(op, shape))

    def grad(L):
        x = _x(L, shape, rg=True)
        y = x * 2.0
        op(y)
        w = L.tensor(np.arange(y.numel(), dtype=np.float64).reshape(tuple(y.shape)) - 1.5,
                     dtype=getattr(L, D))
        (y * w).sum().backward()
        return x.grad
    _same(grad)

    def plain(L):
        y = _x(L, shape)
        op(y)
        return y, y._version, y + 1.0
    _same(plain)


BAD_RESHAPE_IN_PLACE = {
    "squeeze_ out of range": lambda L: _x(L).squeeze_(5),
    "unsqueeze_ out of range": lambda L: _x(L).unsqueeze_(-4),
    "t_ of 3-D": lambda L: _x(L, (2, 3, 4)).t_(),
    "t_ of a leaf": lambda L: _x(L, rg=True).t_(),
    "unsqueeze_ of a leaf": lambda L: _x(L, rg=True).unsqueeze_(0),
    "squeeze_ of a view of a leaf": lambda L: _x(L, (1, 3), rg=True)[0:1].squeeze_(),
}


@pytest.mark.parametrize("name", sorted(BAD_RESHAPE_IN_PLACE))
def test_in_place_view_op_errors_match_pytorch(name):
    assert _same(BAD_RESHAPE_IN_PLACE[name])[0] == "error"


def test_a_value_saved_before_an_in_place_view_op_is_refused():
    def call(L):
        y = _nonleaf(L, (3, 1))
        s = y.sin()
        y.squeeze_()
        s.sum().backward()
    ours, theirs = outcome(tg, call), outcome(torch, call)
    assert ours[0] == theirs[0] == "error" and ours[1] == theirs[1] == "RuntimeError"
    assert "modified by an inplace operation" in ours[2]


def test_in_place_view_ops_on_aliases_keep_them_in_step():
    def call(L):
        base = _x(L, (2, 3)).clone()
        v = base[1]           # a view of the base
        d = base.view(3, 2)   # another
        base.t_()             # the base's elements change order, not its memory
        base[0, 1] = 100.0    # (the element at row 1, column 0 of the old base)
        v.unsqueeze_(0)
        v.add_(1.0)
        d.t_()
        d[1, 2] = -7.0
        return base, v, d, base._version, v._version, d._version
    _same(call)

    def recorded(L):
        x = _x(L, (2, 3), rg=True)
        y = x * 1.0
        v = y[1]
        v.unsqueeze_(0)
        grad_fn = v.grad_fn.name()
        (v * L.tensor([[1.0, 2.0, 3.0]], dtype=getattr(L, D))).sum().backward()
        return v, grad_fn, x.grad
    _same(recorded)


def test_squeeze_under_no_grad_keeps_the_history_and_t_refuses_to_reorder_it():
    x = tg.tensor([[1.0], [2.0], [3.0]], requires_grad=True)
    y = x * 2.0
    with tg.no_grad():
        y.squeeze_()
    assert y.shape == (3,) and y.grad_fn.name() == "MulBackward0"
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2.0], [2.0], [2.0]])
    z = tg.ones(2, 3, requires_grad=True) * 2.0
    with tg.no_grad(), pytest.raises(RuntimeError, match="t_\\(\\) without recording"):
        z.t_()
    assert z.shape == (2, 3)
    w = tg.ones(1, 3, requires_grad=True) * 2.0
    with tg.no_grad():
        w.t_()          # a row's order is a column's
    assert w.shape == (3, 1)


def test_compiled_function_with_in_place_view_ops():
    def f(x):
        y = x * 2.0
        y.unsqueeze_(0)
        y.t_()
        return (y * y).sum() + y[0, 0]
    compiled = tg.compile(f)
    for seed in range(3):
        v = np.random.default_rng(seed).normal(size=3)
        a, b = tg.tensor(v, requires_grad=True), tg.tensor(v, requires_grad=True)
        got, want = compiled(a), f(b)
        got.backward()
        want.backward()
        assert got.item() == want.item()
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


# ---------------------------------------------------------------------------------------------
# .H
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 3), (3,), (2, 3, 4), (1, 1)])
def test_H_matches_pytorch(shape):
    _same(lambda L: _nonleaf(L, shape).H)

    def grad(L):
        x = _x(L, shape, rg=True)
        (x.H * x.H).sum().backward()
        return x.grad
    if len(shape) == 2:
        _same(grad)


def test_H_of_0_d_warns_and_is_the_tensor():
    x = tg.tensor(1.5, requires_grad=True)
    with pytest.warns(UserWarning, match="Tensor.H is deprecated on 0-D tensors"):
        h = x.H
    assert h is x


# ---------------------------------------------------------------------------------------------
# masked_scatter, put, index_put
# ---------------------------------------------------------------------------------------------
def _src(L, n, rg=True):
    return L.tensor(np.arange(10.0, 10.0 + n), dtype=getattr(L, D), requires_grad=rg)


MASK = [[True, False, True], [False, True, False]]

# name -> (method, args(L, s), keywords): x.method(*args) and x.method_(*args) on x * 1.0
SCATTERS = {
    "masked_scatter": ("masked_scatter", lambda L, s: (L.tensor(MASK), s), {}),
    "masked_scatter broadcast mask": ("masked_scatter",
                                      lambda L, s: (L.tensor([False, True, True]), s), {}),
    "masked_scatter of nothing": ("masked_scatter",
                                  lambda L, s: (L.tensor([[False] * 3] * 2), s), {}),
    "put": ("put", lambda L, s: (L.tensor([0, -1, 3]), s[:3]), {}),
    "put accumulate": ("put", lambda L, s: (L.tensor([[0, 5], [0, 0]]), s[:4].reshape(2, 2)),
                       {"accumulate": True}),
    "index_put": ("index_put", lambda L, s: ((L.tensor([0, 1]), L.tensor([2, 0])), s[:2]), {}),
    "index_put one index": ("index_put", lambda L, s: ((L.tensor([1]),), s[:3]), {}),
    "index_put broadcast value": ("index_put", lambda L, s: ([L.tensor([1, 0])], s[4]), {}),
    "index_put bool": ("index_put", lambda L, s: ((L.tensor(MASK),), s[:3]), {}),
    "index_put accumulate": ("index_put", lambda L, s: (
        (L.tensor([0, 0, 1]), L.tensor([1, 1, 2])), s[:3]), {"accumulate": True}),
    "index_put a row for each": ("index_put", lambda L, s: (
        (L.tensor([0, 1]),), s[:3].reshape(1, 3)), {}),
}


@pytest.mark.parametrize("name", sorted(SCATTERS))
@pytest.mark.parametrize("in_place", [False, True])
def test_scatters_match_pytorch(name, in_place):
    method, args, kwargs = SCATTERS[name]

    def call(L):
        x = _x(L, rg=True)
        s = _src(L, 8)
        base = x * 1.0
        y = getattr(base, method + ("_" if in_place else ""))(*args(L, s), **kwargs)
        if in_place:
            assert y is base and base._version == 1
        w = L.tensor(np.arange(y.numel(), dtype=np.float64).reshape(tuple(y.shape)) + 0.5,
                     dtype=getattr(L, D))
        (y * w).sum().backward()
        return y, x.grad, s.grad
    _same(call)


TOP_LEVEL = {
    "masked_scatter widening": lambda L, x, s: L.masked_scatter(
        x[0], L.tensor([[True, False, True], [True, True, False]]), s),
    "put": lambda L, x, s: L.put(x, L.tensor([4]), s[:1]),
    "index_put": lambda L, x, s: L.index_put(x, (L.tensor([1]), L.tensor([1])), s[0], True),
    "index_put_": lambda L, x, s: L.index_put_(x, (L.tensor([1]), L.tensor([1])), s[0]),
}


@pytest.mark.parametrize("name", sorted(TOP_LEVEL))
def test_top_level_scatters_match_pytorch(name):
    def call(L):
        x = _x(L, rg=True)
        s = _src(L, 8)
        y = TOP_LEVEL[name](L, x * 1.0, s)
        y.sum().backward()
        return y, x.grad, s.grad
    _same(call)


BAD_SCATTERS = {
    "masked_scatter float mask": lambda L: _x(L).masked_scatter(
        L.ones(2, 3, dtype=getattr(L, D)), _src(L, 8, False)),
    "masked_scatter short source": lambda L: _x(L).masked_scatter(
        L.ones(2, 3, dtype=L.bool), _src(L, 5, False)),
    "masked_scatter dtypes": lambda L: _x(L).masked_scatter(
        L.ones(2, 3, dtype=L.bool), L.ones(6, dtype=L.int64)),
    "masked_scatter number": lambda L: _x(L).masked_scatter(L.ones(2, 3, dtype=L.bool), 1.0),
    "masked_scatter bad shape": lambda L: _x(L).masked_scatter(
        L.ones(2, 2, dtype=L.bool), _src(L, 8, False)),
    "masked_scatter_ widening": lambda L: _x(L)[0].masked_scatter_(
        L.ones(2, 3, dtype=L.bool), _src(L, 8, False)),
    "put out of range": lambda L: _x(L).put(L.tensor([6]), _src(L, 1, False)),
    "put out of range below": lambda L: _x(L).put(L.tensor([-7]), _src(L, 1, False)),
    "put float index": lambda L: _x(L).put(L.tensor([0.0], dtype=L.float64),
                                           _src(L, 1, False)),
    "put counts": lambda L: _x(L).put(L.tensor([0, 1]), _src(L, 1, False)),
    "put dtypes": lambda L: _x(L).put(L.tensor([0]), L.tensor([1])),
    "put_ of a leaf": lambda L: _x(L, rg=True).put_(L.tensor([0]), _src(L, 1, False)),
    "index_put not a tuple": lambda L: _x(L).index_put(L.tensor([0]), _src(L, 1, False)),
    "index_put out of range": lambda L: _x(L).index_put((L.tensor([5]),), _src(L, 1, False)),
    "index_put float index": lambda L: _x(L).index_put((L.tensor([1.0]),), _src(L, 1, False)),
    "index_put too many": lambda L: _x(L).index_put((L.tensor([1]),) * 3, _src(L, 1, False)),
    "index_put dtypes": lambda L: _x(L).index_put((L.tensor([1]),), L.tensor(1)),
    "index_put number": lambda L: _x(L).index_put((L.tensor([1]),), 2.0),
    "index_put None": lambda L: _x(L).index_put([L.tensor([1]), None], _src(L, 1, False)),
    "index_put shapes": lambda L: _x(L).index_put((L.tensor([0, 1]), L.tensor([1])),
                                                  _src(L, 2, False).reshape(2, 1)),
    "index_put leading 1s": lambda L: _x(L).index_put((L.tensor([0, 1]),),
                                                      _src(L, 3, False).reshape(1, 1, 3)),
    "index_put_ of a leaf": lambda L: _x(L, rg=True).index_put_((L.tensor([0]),),
                                                                _src(L, 1, False)),
}


@pytest.mark.parametrize("name", sorted(BAD_SCATTERS))
def test_scatter_errors_match_pytorch(name):
    assert _same(BAD_SCATTERS[name])[0] == "error"


# ---------------------------------------------------------------------------------------------
# poisson, gumbel_softmax
# ---------------------------------------------------------------------------------------------
def test_poisson_draws_from_the_generator():
    rate = tg.tensor([[0.0, 0.5], [3.0, 40.0]])
    tg.manual_seed(3)
    a = tg.poisson(rate)
    tg.manual_seed(3)
    b = tg.poisson(rate)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert a.shape == (2, 2) and a.dtype == tg.float64 and not a.requires_grad
    assert a[0, 0].item() == 0.0 and np.all(a.numpy() == np.round(a.numpy()))
    g = tg.Generator().manual_seed(5)
    many = tg.poisson(tg.full((20000,), 4.0), generator=g)
    assert abs(many.mean().item() - 4.0) < 0.1 and abs(many.var().item() - 4.0) < 0.3
    r = tg.tensor([1.0, 2.0], requires_grad=True)
    assert not tg.poisson(r).requires_grad


@pytest.mark.parametrize("call", [
    lambda L: L.poisson(L.tensor([-1.0], dtype=L.float64)),
    lambda L: L.poisson(L.tensor([1, 2])),
])
def test_poisson_errors_match_pytorch(call):
    assert _same(call)[0] == "error"


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("dim", [-1, 0])
def test_gumbel_softmax_is_pytorchs_formula_on_the_same_noise(hard, dim):
    logits = np.array([[0.5, -1.0, 2.0], [0.1, 0.2, 0.3]])
    tau = 0.7
    tg.manual_seed(11)
    x = tg.tensor(logits, requires_grad=True)
    y = tg.nn.functional.gumbel_softmax(x, tau=tau, hard=hard, dim=dim)
    tg.manual_seed(11)      # the same draws again: the noise the call used
    noise = -tg.empty(2, 3).exponential_().log()
    xt = torch.tensor(logits, requires_grad=True)
    soft = ((xt + torch.tensor(noise.numpy())) / tau).softmax(dim)
    if hard:
        one_hot = torch.zeros_like(xt).scatter_(dim, soft.max(dim, keepdim=True)[1], 1.0)
        yt = one_hot - soft.detach() + soft
    else:
        yt = soft
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-14, atol=1e-16)
    assert y.grad_fn.name() == yt.grad_fn.name()
    w = np.array([[1.0, -2.0, 0.5], [3.0, 0.0, 1.0]])
    (y * tg.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-13, atol=1e-15)
    # the real thing draws the same kind of output
    t_out = torch.nn.functional.gumbel_softmax(xt, tau=tau, hard=hard, dim=dim)
    assert t_out.grad_fn.name() == y.grad_fn.name() and tuple(t_out.shape) == tuple(y.shape)
    if hard:
        v = y.detach().numpy()
        assert set(np.round(v, 12).ravel().tolist()) == {0.0, 1.0}
        np.testing.assert_allclose(v.sum(dim), 1.0, rtol=1e-15)


def test_gumbel_softmax_errors_and_eps_warning():
    call = lambda L: L.nn.functional.gumbel_softmax(L.zeros(2, 3, dtype=L.float64),  # noqa
                                                    dim=2)
    assert _same(call)[0] == "error"
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated"):
        tg.nn.functional.gumbel_softmax(tg.zeros(3), eps=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tg.nn.functional.gumbel_softmax(tg.zeros(3))
