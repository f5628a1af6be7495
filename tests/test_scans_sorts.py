"""Scans and sorts (#16) against PyTorch: values, gradients, grad_fn names, result types,
dtypes, edge inputs (0-d, empty, ties, nan, zeros, integers), error texts, and compiled
replays with new values."""
import math
import warnings

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

nan, inf = math.nan, math.inf


def _leaf(m, a, rg):
    a = np.asarray(a)
    if a.dtype.kind == "f":
        return m.tensor(a, dtype=m.float64, requires_grad=rg)
    return m.tensor(a)


def _parts(r):
    """(values, indices or None) of a result that is a tensor or a (values, indices) tuple."""
    if isinstance(r, tuple):
        assert hasattr(r, "values") and hasattr(r, "indices")
        assert r.values is r[0] and r.indices is r[1]
        return r[0], r[1]
    return r, None


def _np(t):
    return t.detach().numpy()


def _same(got, want, what):
    got, want = _np(got), _np(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14, equal_nan=True,
                                   err_msg=what)
    else:
        assert np.array_equal(got, want), f"{what}: {got} != {want}"


def compare(fn, a, check_grad=True, check_indices=True):
    """fn(m, x) in both libraries: values, indices, grad_fn name, and the gradient of a
    weighted sum of the values."""
    res = {}
    for m in (tg, torch):
        x = _leaf(m, a, np.asarray(a).dtype.kind == "f")
        res[m] = (x, fn(m, x))
    (xg, rg), (xt, rt) = res[tg], res[torch]
    assert type(rg).__name__ == type(rt).__name__, (type(rg), type(rt))
    vg, ig = _parts(rg)
    vt, it = _parts(rt)
    _same(vg, vt, "values")
    if it is not None and check_indices:
        _same(ig, it, "indices")
    name_t = None if vt.grad_fn is None else vt.grad_fn.name()
    name_g = None if vg.grad_fn is None else vg.grad_fn.name()
    assert name_g == name_t
    if check_grad and vt.requires_grad and vt.numel():
        w = np.cos(np.arange(vt.numel())).reshape(tuple(vt.shape))
        (vt * torch.tensor(w)).sum().backward()
        (vg * tg.tensor(w)).sum().backward()
        _same(xg.grad, xt.grad, "gradient")


X = np.array([[3.0, -1.0, 2.0, 0.5], [0.0, 2.0, -5.0, 1.5], [1.0, 1.25, 4.0, -2.0]])
TIES = np.array([[1.0, 2.0, 1.0, 2.0, 1.0], [3.0, 3.0, 3.0, 0.0, 3.0]])
NANS = np.array([[2.0, nan, 1.0, nan, 0.5], [1.0, 3.0, nan, 3.0, -1.0]])
ZEROS = np.array([[2.0, 0.0, 3.0, 0.0], [0.0, 1.5, -2.0, 4.0], [1.0, 2.0, 0.0, 3.0]])
INTS = np.array([[3, 1, 2], [0, 5, -4]], dtype=np.int64)

SCANS = {
    "cumsum": lambda m, x: m.cumsum(x, 1),
    "cumsum -1": lambda m, x: x.cumsum(-1),
    "cumsum 0": lambda m, x: x.cumsum(dim=0),
    "cumprod": lambda m, x: m.cumprod(x, 1),
    "cumprod 0": lambda m, x: x.cumprod(0),
    "logcumsumexp": lambda m, x: m.logcumsumexp(x, 1),
    "logcumsumexp 0": lambda m, x: x.logcumsumexp(-2),
    "cummax": lambda m, x: m.cummax(x, 1),
    "cummin": lambda m, x: x.cummin(0),
    "diff": lambda m, x: m.diff(x),
    "diff n=2 dim=0": lambda m, x: x.diff(2, 0),
    "diff n=9": lambda m, x: m.diff(x, n=9),
    "diff prepend append": lambda m, x: m.diff(x, dim=1, prepend=m.ones(x.shape[0], 1),
                                               append=m.zeros(x.shape[0], 2)),
}
SORTS = {
    "sort": lambda m, x: m.sort(x),
    "sort dim 0": lambda m, x: x.sort(0),
    "sort descending": lambda m, x: m.sort(x, descending=True),
    "sort stable": lambda m, x: m.sort(x, dim=0, stable=True),
    "sort stable descending": lambda m, x: x.sort(stable=True, descending=True),
    "msort": lambda m, x: m.msort(x),
    "argsort": lambda m, x: m.argsort(x, dim=1),
    "argsort descending": lambda m, x: x.argsort(0, True),
    "topk": lambda m, x: m.topk(x, 2),
    "topk smallest": lambda m, x: x.topk(2, largest=False),
    "topk 0": lambda m, x: m.topk(x, 0, dim=0),
    "topk all": lambda m, x: m.topk(x, 2, dim=0),
    "kthvalue": lambda m, x: m.kthvalue(x, 2),
    "kthvalue keepdim": lambda m, x: x.kthvalue(1, 0, keepdim=True),
    "median": lambda m, x: m.median(x),
    "median dim": lambda m, x: x.median(1),
    "median dim keepdim": lambda m, x: m.median(x, 0, keepdim=True),
    "nanmedian": lambda m, x: m.nanmedian(x),
    "nanmedian dim": lambda m, x: x.nanmedian(dim=1),
    "mode": lambda m, x: m.mode(x),
    "mode dim 0": lambda m, x: x.mode(0),
}
# tie-free selections of one entry: with ties PyTorch's selection algorithm picks its own
# index among the tied entries (the values agree, the indices and gradients may not)
PICKS_ONE = {"topk", "topk smallest", "topk all", "kthvalue", "kthvalue keepdim",
             "median dim", "median dim keepdim", "nanmedian dim", "mode", "mode dim 0"}


# (logcumsumexp of integers raises, see test_errors; diff with float padding needs floats)
SCAN_DATA = [(name, data) for name in sorted(SCANS) for data in ("X", "ZEROS", "TIES", "INTS")
             if not (data == "INTS" and name.startswith(("logcumsumexp", "diff p")))]


@pytest.mark.parametrize("name,data", SCAN_DATA)
def test_scans_match_pytorch(name, data):
    compare(SCANS[name], globals()[data])


@pytest.mark.parametrize("name", sorted(SCANS))
def test_scans_with_nan(name):
    # a nan's gradient is nan in both libraries, wherever it reaches
    compare(SCANS[name], NANS)


# (PyTorch's mode of a slice holding nan depends on its sort's order: not compared)
SORT_DATA = [(name, data) for name in sorted(SORTS) for data in ("X", "TIES", "NANS", "INTS")
             if not (data == "NANS" and name.startswith("mode"))]


@pytest.mark.parametrize("name,data", SORT_DATA)
def test_sorts_match_pytorch(name, data):
    a = globals()[data]
    tied = data in ("TIES", "NANS", "INTS") and name in PICKS_ONE
    if data == "INTS" and name.startswith(("median", "nanmedian", "mode", "kthvalue", "topk")):
        tied = True
    compare(SORTS[name], a, check_grad=not tied, check_indices=not tied)


ZERO_DIM = {
    "cumsum": lambda m, x: m.cumsum(x, 0), "cumsum -1": lambda m, x: x.cumsum(-1),
    "cumprod": lambda m, x: m.cumprod(x, 0), "logcumsumexp": lambda m, x: x.logcumsumexp(-1),
    "cummax": lambda m, x: m.cummax(x, 0), "cummin": lambda m, x: x.cummin(-1),
    "sort": lambda m, x: m.sort(x), "sort descending": lambda m, x: x.sort(0, True),
    "sort stable": lambda m, x: m.sort(x, stable=True), "msort": lambda m, x: m.msort(x),
    "argsort": lambda m, x: m.argsort(x), "topk": lambda m, x: m.topk(x, 1),
    "topk 0": lambda m, x: x.topk(0), "kthvalue": lambda m, x: m.kthvalue(x, 1, 0),
    "kthvalue keepdim": lambda m, x: x.kthvalue(1, -1, True), "median": lambda m, x: x.median(),
    "median dim": lambda m, x: m.median(x, 0), "median keepdim": lambda m, x: x.median(-1, True),
    "nanmedian": lambda m, x: m.nanmedian(x), "nanmedian dim": lambda m, x: x.nanmedian(0),
    "mode": lambda m, x: m.mode(x), "mode keepdim": lambda m, x: x.mode(0, True),
}


@pytest.mark.parametrize("name", sorted(ZERO_DIM))
def test_zero_dim(name):
    compare(ZERO_DIM[name], np.array(2.5))


def test_zero_dim_diff():
    for m in (tg, torch):
        with pytest.raises(RuntimeError, match="diff expects input to be at least one-dim"):
            m.diff(m.tensor(2.0))


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "logcumsumexp", "cummax", "cummin",
                                  "sort", "argsort", "msort"])
def test_empty(name):
    fn = {"cumsum": lambda m, x: m.cumsum(x, 0), "cumprod": lambda m, x: x.cumprod(1),
          "logcumsumexp": lambda m, x: m.logcumsumexp(x, 0),
          "cummax": lambda m, x: m.cummax(x, 0), "cummin": lambda m, x: x.cummin(1),
          "sort": lambda m, x: m.sort(x, 0), "argsort": lambda m, x: x.argsort(),
          "msort": lambda m, x: m.msort(x)}[name]
    compare(fn, np.zeros((0, 3)))
    compare(fn, np.zeros((2, 0)))


def test_empty_medians_and_topk():
    compare(lambda m, x: m.median(x), np.zeros(0))
    compare(lambda m, x: m.nanmedian(x), np.zeros((0, 2)))
    compare(lambda m, x: m.median(x, 1), np.zeros((0, 3)))
    compare(lambda m, x: m.topk(x, 0), np.zeros((2, 0)))


def test_stable_sort_keeps_ties_in_order():
    a = np.array([2.0, 1.0, 2.0, 1.0, nan, 2.0, nan, 1.0])
    for descending in (False, True):
        compare(lambda m, x: m.sort(x, descending=descending), a)
        compare(lambda m, x: m.sort(x, descending=descending, stable=True), a)


def test_integer_and_bool_dtypes():
    compare(lambda m, x: m.cumsum(x, 0), np.array([True, False, True]))
    compare(lambda m, x: m.cumprod(x, 0), np.array([True, True, False]))
    compare(lambda m, x: m.cummax(x, 0), np.array([True, False, True]))
    compare(lambda m, x: m.sort(x), np.array([True, False, True]))
    compare(lambda m, x: m.diff(x), np.array([True, False, False, True]))
    compare(lambda m, x: m.cumsum(x, 1, dtype=m.float64), INTS)
    compare(lambda m, x: m.cumsum(x, 1, dtype=m.int64), X.astype(np.int64))


def test_result_types_print_like_pytorch_names():
    r = tg.sort(tg.tensor([2.0, 1.0]))
    assert type(r).__name__ == "sort"
    assert repr(r) == ("tapegrad.return_types.sort(\nvalues=tensor([1., 2.]),\n"
                       "indices=tensor([1, 0]))")
    assert tg.topk(tg.tensor([2.0, 1.0]), 1).indices.dtype == tg.int64
    values, indices = tg.cummax(tg.tensor([1.0, 3.0]), 0)
    assert indices.tolist() == [0, 1]


def test_in_place_scans():
    for m in (tg, torch):
        x = m.tensor([[1.0, 2.0], [3.0, 4.0]])
        assert x.cumsum_(0) is x
        assert x.tolist() == [[1.0, 2.0], [4.0, 6.0]]
        assert x.cumprod_(-1) is x
        assert x.tolist() == [[1.0, 2.0], [4.0, 24.0]]
    leaf = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = leaf * 1.0
    y.cumsum_(0)
    assert y.grad_fn.name() == "CumsumBackward0"
    y.sum().backward()
    assert leaf.grad.tolist() == [3.0, 2.0, 1.0]


def _error(fn, *args):
    """(type, message) of what fn raises in each library."""
    out = []
    for m in (tg, torch):
        conv = [_leaf(m, a, False) if isinstance(a, np.ndarray) else a for a in args]
        with pytest.raises(Exception) as info:
            fn(m, *conv)
        out.append((type(info.value), str(info.value).replace("torch.", "tapegrad.")))
    return out


@pytest.mark.parametrize("fn, args", [
    (lambda m, x: m.cumsum(x, 2), (X,)),
    (lambda m, x: x.cumprod(-3), (X,)),
    (lambda m, x: m.cumsum(x, 1), (np.array(1.0),)),
    (lambda m, x: m.logcumsumexp(x, 0), (INTS,)),
    (lambda m, x: m.topk(x, 5), (X,)),
    (lambda m, x: m.topk(x, -1), (X,)),
    (lambda m, x: m.kthvalue(x, 5), (X,)),
    (lambda m, x: m.kthvalue(x, 0, 0), (X,)),
    (lambda m, x: m.sort(x, 3), (X,)),
    (lambda m, x: m.median(x, 0), (np.zeros((0, 2)),)),
    (lambda m, x: m.diff(x), (np.array(1.0),)),
    (lambda m, x: m.diff(x, n=-1), (X,)),
    (lambda m, x: m.cummax(x, 2), (X,)),
])
def test_errors(fn, args):
    (tg_type, tg_msg), (pt_type, pt_msg) = _error(fn, *args)
    assert issubclass(tg_type, pt_type) or tg_type is pt_type
    assert tg_msg == pt_msg


# --- second order ------------------------------------------------------------------------------
SECOND = {
    "cumsum": lambda m, x: (x * x).cumsum(1).sin().sum(),
    "cumprod": lambda m, x: x.cumprod(1).sin().sum(),
    "logcumsumexp": lambda m, x: x.logcumsumexp(0).sin().sum(),
    "median": lambda m, x: (x * x).median() * x.sum(),
    "nanmedian": lambda m, x: (x * x).nanmedian() * x.sum(),
    "sort": lambda m, x: ((x * x).sort(1).values * m.arange(4.0)).sum(),
    "topk": lambda m, x: ((x * x).topk(2, 0).values ** 3).sum(),
    "cummax": lambda m, x: ((x * x).cummax(1).values ** 2).sum(),
    "kthvalue": lambda m, x: ((x * x).kthvalue(2, 1).values ** 2).sum(),
    "median dim": lambda m, x: ((x * x).median(0).values ** 2).sum(),
    "diff": lambda m, x: (x.diff(dim=0) ** 3).sum(),
}
A = np.array([[3.0, 1.0, 2.0, -0.5], [0.5, 2.0, 5.0, 1.25], [-1.0, 0.25, 1.5, 2.5]])


@pytest.mark.parametrize("name", sorted(SECOND))
def test_hessian_and_create_graph(name):
    f = SECOND[name]
    ht = torch.autograd.functional.hessian(lambda x: f(torch, x), torch.tensor(A))
    hg = tg.hessian(lambda x: f(tg, x))(tg.tensor(A))
    np.testing.assert_allclose(hg.numpy(), ht.numpy(), rtol=1e-10, atol=1e-12)
    x = tg.tensor(A, requires_grad=True)
    g, = tg.autograd.grad(f(tg, x), x, create_graph=True)
    gg, = tg.autograd.grad((g * g).sum(), x)
    xt = torch.tensor(A, requires_grad=True)
    g2, = torch.autograd.grad(f(torch, xt), xt, create_graph=True)
    gg2, = torch.autograd.grad((g2 * g2).sum(), xt)
    np.testing.assert_allclose(gg.numpy(), gg2.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(SECOND))
def test_jvp_and_vmap(name):
    f = SECOND[name]
    v = np.cos(np.arange(A.size)).reshape(A.shape)
    # torch.func.jvp is forward mode proper (torch.autograd.functional.jvp's double-backward
    # trick gives nan for logcumsumexp)
    with warnings.catch_warnings():   # torch.func's first use warns about torch.jit.script
        warnings.simplefilter("ignore", DeprecationWarning)
        _, jt = torch.func.jvp(lambda x: f(torch, x), (torch.tensor(A),), (torch.tensor(v),))
        vt = torch.vmap(torch.func.grad(lambda x: f(torch, x)))(
            torch.tensor(np.stack([A, A[::-1] * 1.3])))
    _, jg = tg.jvp(lambda x: f(tg, x), (tg.tensor(A),), (tg.tensor(v),))
    np.testing.assert_allclose(jg.numpy(), jt.numpy(), rtol=1e-10, atol=1e-12)
    xs = np.stack([A, A[::-1] * 1.3])
    vg = tg.vmap(tg.func.grad(lambda x: f(tg, x)))(tg.tensor(xs))
    np.testing.assert_allclose(vg.numpy(), vt.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dim", [0, 1])
def test_cumprod_second_order_with_zeros(dim):
    """create_graph and hessians through cumprod of an input holding zeros (one or several
    per slice): no 0/0 anywhere."""
    a = np.array([[0.0, 2.0, 0.0, 3.0], [1.5, 0.0, 0.0, 0.5], [0.0, -1.0, 2.0, 3.0]])
    f = lambda m, x: (x.cumprod(dim) ** 2 * m.tensor(np.cos(np.arange(12.0)).reshape(3, 4))
                      ).sum()  # noqa: E731
    ht = torch.autograd.functional.hessian(lambda x: f(torch, x), torch.tensor(a))
    hg = tg.hessian(lambda x: f(tg, x))(tg.tensor(a))
    np.testing.assert_allclose(hg.numpy(), ht.numpy(), rtol=1e-10, atol=1e-12)
    x = tg.tensor(a, requires_grad=True)
    g, = tg.autograd.grad(f(tg, x), x, create_graph=True)
    gg, = tg.autograd.grad((g * g).sum(), x)
    xt = torch.tensor(a, requires_grad=True)
    g2, = torch.autograd.grad(f(torch, xt), xt, create_graph=True)
    gg2, = torch.autograd.grad((g2 * g2).sum(), xt)
    np.testing.assert_allclose(gg.numpy(), gg2.numpy(), rtol=1e-10, atol=1e-12)


def test_cumprod_gradient_with_several_zeros():
    a = np.array([[0.0, 2.0, 0.0, 3.0, 1.5], [1.0, 0.0, 0.0, 0.0, 2.0], [0.0, 0.0, 1.0, 2.0, 3.0]])
    compare(lambda m, x: m.cumprod(x, 1), a)
    compare(lambda m, x: m.cumprod(x, 0), a)


def test_logcumsumexp_infinities():
    a = np.array([[-inf, -inf, 1.0, -inf, 2.0], [-inf, 0.0, inf, 1.0, -inf]])
    got = tg.logcumsumexp(tg.tensor(a), 1)
    want = torch.logcumsumexp(torch.tensor(a), 1)
    _same(got, want, "values")
    big = np.array([1000.0, 1000.0, -1000.0, 999.0])
    compare(lambda m, x: m.logcumsumexp(x, 0), big)


# --- compiled replays with new values --------------------------------------------------------
COMPILED = {
    "cumsum": lambda x: (x * x).cumsum(1),
    "cumprod": lambda x: x.cumprod(0) * 2.0,
    "logcumsumexp": lambda x: x.logcumsumexp(1),
    "median": lambda x: x.median() * x,
    "nanmedian": lambda x: x.nanmedian() + x,
    "sort": lambda x: (x * 2.0).sort(1).values,
    "sort tuple": lambda x: x.sort(0, descending=True),
    "topk": lambda x: x.topk(2),
    "kthvalue": lambda x: x.kthvalue(2, 0).values,
    "cummax": lambda x: x.cummax(1),
    "median dim": lambda x: x.median(0).values * 3.0,
    "mode": lambda x: x.mode(1).values,
    "argsort": lambda x: x.argsort(1) * 1.0,
    "diff": lambda x: x.diff(dim=0),
}


@pytest.mark.parametrize("name", sorted(COMPILED))
def test_compiled_second_call_with_other_values(name):
    fn = COMPILED[name]
    cf = tg.compile(fn)
    inputs = [X, X[::-1] * -1.5 + 0.25, X[:, ::-1].copy(), X]
    for a in inputs:
        got, want = cf(tg.tensor(a, requires_grad=True)), fn(tg.tensor(a, requires_grad=True))
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g.detach().numpy(), w.detach().numpy())
        # the gradient through the compiled call is eager's too
        first = lambda r: r[0] if isinstance(r, tuple) else r  # noqa: E731
        x1, x2 = tg.tensor(a, requires_grad=True), tg.tensor(a, requires_grad=True)
        out1, out2 = first(cf(x1)), first(fn(x2))
        assert out1.requires_grad == out2.requires_grad
        if out2.requires_grad:
            g1, = tg.autograd.grad(out1.sum(), x1)
            g2, = tg.autograd.grad(out2.sum(), x2)
            np.testing.assert_allclose(g1.numpy(), g2.numpy(), rtol=1e-14)
    assert cf.stats.calls == 2 * len(inputs)


def test_saved_tape_with_scans_round_trips(tmp_path):
    """A saved tape holding the new records loads (its checks accept them) and replays as the
    compiled function does."""
    def fn(x):
        return (x.cumsum(1) * x.cumprod(0)).logcumsumexp(1).sum() + x.median() + x.nanmedian()
    compiled = tg.compile(fn)
    compiled(tg.tensor(X, requires_grad=True))
    path = tmp_path / "scans.npz"
    compiled.tape.save(path)
    loaded = tg.load_tape(path)
    for a in (X, X * 0.5 - 1.0):
        x1, x2 = tg.tensor(a, requires_grad=True), tg.tensor(a, requires_grad=True)
        y1, y2 = loaded(x1), fn(x2)
        np.testing.assert_allclose(y1.item(), y2.item(), rtol=1e-13)
        y1.backward()
        y2.backward()
        np.testing.assert_allclose(x1.grad.numpy(), x2.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("call", [
    lambda m, x: m.max(x, 1), lambda m, x: m.min(x, 0, keepdim=True), lambda m, x: m.sort(x, 1),
    lambda m, x: m.topk(x, 2), lambda m, x: m.kthvalue(x, 1, 0), lambda m, x: m.median(x, 1),
    lambda m, x: m.mode(x, 1), lambda m, x: m.cummax(x, 1), lambda m, x: m.cummin(x, 0),
    lambda m, x: m.aminmax(x), lambda m, x: m.linalg.slogdet(x[:, :2]),
    lambda m, x: m.linalg.qr(x), lambda m, x: x.max(dim=1)])
def test_result_tuples_print_as_pytorchs(call):
    """Printed with ``torch`` read as ``tapegrad``, a result tuple is PyTorch's text: its
    type's name, one field a line."""
    x = np.array([[3.0, 1.0, 2.0], [0.5, 4.0, 4.0]])
    torch = pytest.importorskip("torch")
    want = repr(call(torch, torch.tensor(x, dtype=torch.float64)))
    got = repr(call(tg, tg.tensor(x)))
    assert got == want.replace("torch.", "tapegrad.").replace(", dtype=tapegrad.float64", "")
    assert type(call(tg, tg.tensor(x))).__module__ == "tapegrad.return_types"
