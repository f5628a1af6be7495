"""``slice_scatter``, ``select_scatter``, ``diagonal_scatter``, ``scatter_reduce`` and
``scatter_reduce_`` against PyTorch: values, the result's ``grad_fn`` name, the gradients of
input and source (tied amax/amin values sharing, prod with zeros, include_self left out),
integer and bool inputs, 0-d, empty and negative dims, PyTorch's errors, central
differences, and compiled calls whose index values change between calls."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

rng = np.random.default_rng(11)
# PyTorch warns that its index_reduce is in beta (tapegrad does not)
pytestmark = pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta:UserWarning")


def _name(m, y):
    return y.grad_fn.name() if m is tg else type(y.grad_fn).__name__


def run(m, fn, *arrays):
    """fn's value, node name and the gradients of its float arguments (weighted sum)."""
    args = [m.tensor(a, dtype=m.float64, requires_grad=True) for a in arrays]
    y = fn(m, *args)
    w = m.tensor(np.linspace(0.5, 2.5, y.numel()).reshape(tuple(y.shape)), dtype=m.float64)
    (y * w).sum().backward()
    grads = [None if a.grad is None else np.array(a.grad.tolist()) for a in args]
    return np.array(y.tolist()), tuple(y.shape), _name(m, y), grads


def check(fn, *arrays, rtol=0.0):
    got, want = run(tg, fn, *arrays), run(torch, fn, *arrays)
    np.testing.assert_allclose(got[0], want[0], rtol=rtol, atol=0)
    assert got[1:3] == want[1:3]
    for g, w in zip(got[3], want[3]):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=0)


def raised(fn):
    try:
        fn()
    except Exception as e:   # noqa: BLE001 - the type is what is compared
        return type(e), str(e).replace("tapegrad.", "torch.")
    return None


# --- slice_scatter, select_scatter, diagonal_scatter ----------------------------------------
SLICES = [((3, 4), 1, 1, 3, 1), ((3, 4), 0, None, None, 2), ((3, 4), -1, -3, None, 2),
          ((3, 4), 1, -10, 10, 1), ((3, 4), 1, 5, 9, 1), ((3, 4), 1, 3, 1, 1),
          ((5,), 0, 1, 4, 2), ((2, 3, 4), -2, 0, 2, 1), ((2, 3, 4), 2, 1, None, 3),
          ((0, 3), 1, 0, 2, 1), ((3, 4), 1, None, 2, 1)]


@pytest.mark.parametrize("shape, dim, start, end, step", SLICES)
def test_slice_scatter(shape, dim, start, end, step):
    x = rng.normal(size=shape)
    part = np.empty(shape)[(slice(None),) * (dim % len(shape)) + (slice(start, end, step),)]
    src = rng.normal(size=part.shape)
    check(lambda m, a, b: m.slice_scatter(a, b * 3, dim, start, end, step), x, src)
    check(lambda m, a, b: a.slice_scatter(b, dim=dim, start=start, end=end, step=step), x, src)


@pytest.mark.parametrize("shape, dim, index", [((3, 4), 0, 1), ((3, 4), 1, -1), ((3, 4), -1, 0),
                                               ((5,), 0, 4), ((5,), 0, -5), ((2, 3, 4), 1, 2),
                                               ((2, 0, 4), 2, 1), ((2, 3, 4), -3, -1)])
def test_select_scatter(shape, dim, index):
    x = rng.normal(size=shape)
    src = rng.normal(size=np.take(np.empty(shape), index, axis=dim).shape)
    check(lambda m, a, b: m.select_scatter(a, b * 3, dim, index), x, src)
    check(lambda m, a, b: a.select_scatter(b, dim, index), x, src)


@pytest.mark.parametrize("shape, offset, d1, d2", [
    ((3, 4), 0, 0, 1), ((3, 4), 1, 0, 1), ((3, 4), -2, 0, 1), ((3, 4), 2, 1, 0),
    ((3, 4), 7, 0, 1), ((3, 4), -5, 0, 1), ((2, 3, 4), 0, 0, 2), ((2, 3, 4), -1, -1, 1),
    ((2, 3, 4), 1, -2, -1), ((3, 3), 0, -1, -2)])
def test_diagonal_scatter(shape, offset, d1, d2):
    x = rng.normal(size=shape)
    src = rng.normal(size=np.diagonal(np.empty(shape), offset, d1 % len(shape),
                                      d2 % len(shape)).shape)
    check(lambda m, a, b: m.diagonal_scatter(a, b * 3, offset, d1, d2), x, src)
    check(lambda m, a, b: a.diagonal_scatter(b, offset=offset, dim1=d1, dim2=d2), x, src)


@pytest.mark.parametrize("dtype", ["int64", "bool"])
def test_view_scatters_keep_the_input_dtype(dtype):
    """An integer or bool input keeps its dtype, a float source cast into it (and the
    other way round), as PyTorch's copy does."""
    results = []
    for m in (tg, torch):
        x = m.tensor([[1, 0, 3], [4, 5, 0]], dtype=getattr(m, dtype))
        xf = m.zeros(2, 3, dtype=m.float64)
        s = m.tensor([[7.9], [-2.5]], dtype=m.float64)
        got = [m.slice_scatter(x, s, 1, 0, 1), m.select_scatter(x, s[:, 0], 1, 2),
               m.diagonal_scatter(x, s[:, 0]), m.slice_scatter(xf, x[:, :1], 1, 1, 2)]
        results.append([(str(t.dtype).split(".")[-1], t.tolist()) for t in got])
    assert results[0] == results[1]


VIEW_BAD = {
    "slice_shape": lambda m: m.slice_scatter(m.zeros(3, 4), m.ones(3, 3), 1, 0, 2),
    "slice_rank": lambda m: m.slice_scatter(m.zeros(3, 4), m.ones(2), 1, 0, 2),
    "slice_dim": lambda m: m.slice_scatter(m.zeros(3, 4), m.ones(3, 2), 2),
    "slice_step0": lambda m: m.slice_scatter(m.zeros(3, 4), m.ones(3, 2), 1, 0, 4, 0),
    "slice_step_negative": lambda m: m.slice_scatter(m.zeros(3, 4), m.ones(3, 2), 1, 0, 4, -1),
    "slice_0d": lambda m: m.slice_scatter(m.tensor(1.0), m.tensor(2.0)),
    "slice_src_number": lambda m: m.slice_scatter(m.zeros(3, 4), 1.0),
    "select_range": lambda m: m.select_scatter(m.zeros(3, 4), m.ones(4), 0, 3),
    "select_range_negative": lambda m: m.select_scatter(m.zeros(3, 4), m.ones(4), 0, -4),
    "select_shape": lambda m: m.select_scatter(m.zeros(3, 4), m.ones(3), 0, 1),
    "select_broadcast": lambda m: m.select_scatter(m.zeros(3, 4), m.ones(1), 0, 1),
    "select_dim": lambda m: m.select_scatter(m.zeros(3, 4), m.ones(4), 2, 1),
    "select_0d": lambda m: m.select_scatter(m.tensor(1.0), m.tensor(2.0), 0, 0),
    "select_index_float": lambda m: m.select_scatter(m.zeros(3, 4), m.ones(4), 0, 1.5),
    "diagonal_shape": lambda m: m.diagonal_scatter(m.zeros(3, 4), m.ones(4)),
    "diagonal_same_dims": lambda m: m.diagonal_scatter(m.zeros(3, 4), m.ones(3), 0, -1, 1),
    "diagonal_dim": lambda m: m.diagonal_scatter(m.zeros(3, 4), m.ones(3), 0, 0, 2),
    "diagonal_1d": lambda m: m.diagonal_scatter(m.ones(3), m.ones(3)),
    "diagonal_0d": lambda m: m.diagonal_scatter(m.tensor(1.0), m.ones(1)),
}


@pytest.mark.parametrize("case", sorted(VIEW_BAD))
def test_view_scatter_errors(case):
    got, want = raised(lambda: VIEW_BAD[case](tg)), raised(lambda: VIEW_BAD[case](torch))
    assert want is not None
    assert got == want


def test_view_scatters_against_central_differences():
    x = tg.tensor(rng.uniform(0.5, 2.0, (3, 4)), dtype=tg.float64, requires_grad=True)
    s = tg.tensor(rng.uniform(0.5, 2.0, (5, 4)), dtype=tg.float64, requires_grad=True)
    for fn in (lambda a, b: tg.slice_scatter(a, b[:3, :2], 1, 1, 4, 2),
               lambda a, b: tg.select_scatter(a, b[0], 0, -1),
               lambda a, b: tg.diagonal_scatter(a, b[0, :3])):
        assert tg.testing.gradcheck(fn, x, s)

# --- scatter_reduce ------------------------------------------------------------------------
REDUCES = ["sum", "prod", "mean", "amax", "amin"]
# (self, dim, index, src): data with ties (self among them), zeros (one and several in a
# slot, and self zero), infinities, NaN, a 0-d case and an empty index
TIES_X = np.array([[2.0, 5.0, 1.0, 0.0], [3.0, 3.0, -1.0, 2.0]])
TIES_S = np.array([[2.0, 5.0, 3.0, 1.0], [2.0, 3.0, 1.0, 0.0], [3.0, 3.0, 1.0, 2.0]])
ZEROS_X = np.array([[0.0, 2.0, 3.0], [1.5, -2.0, 0.0]])
ZEROS_S = np.array([[0.0, 4.0, 0.0], [2.0, 0.0, 0.5], [3.0, 1.0, 0.0]])
# (src is index's shape: with a larger src PyTorch's own backward fails, see
# test_scatter_reduce_larger_source)
CASES = {
    "random_dim0": (rng.normal(size=(4, 3)), 0, rng.integers(0, 4, (5, 3)),
                    rng.normal(size=(5, 3))),
    "random_dim1": (rng.normal(size=(3, 5)), 1, rng.integers(0, 5, (3, 7)),
                    rng.normal(size=(3, 7))),
    "random_negative_dim": (rng.normal(size=(2, 3, 4)), -1, rng.integers(0, 4, (2, 3, 6)),
                            rng.normal(size=(2, 3, 6))),
    "random_middle_dim": (rng.normal(size=(2, 3, 4)), 1, rng.integers(0, 3, (2, 5, 4)),
                          rng.normal(size=(2, 5, 4))),
    "index_smaller_than_self": (rng.normal(size=(4, 5)), 0, rng.integers(0, 4, (6, 3)),
                                rng.normal(size=(6, 3))),
    "ties": (TIES_X, 0, np.array([[0, 0, 1, 0], [0, 1, 1, 1], [0, 1, 0, 1]]), TIES_S),
    "zeros": (ZEROS_X, 0, np.array([[0, 1, 1], [0, 1, 1], [0, 1, 0]]), ZEROS_S),
    "zeros_one_row": (ZEROS_X, 1, np.array([[0, 0, 2], [1, 1, 1]]), ZEROS_S[:2]),
    "infinities": (np.array([np.inf, 1.0, -np.inf, 2.0]), 0, np.array([0, 0, 2, 1, 3, 3]),
                   np.array([np.inf, 3.0, -np.inf, -np.inf, np.inf, 1.0])),
    "nans": (np.array([np.nan, 1.0, 2.0, 3.0]), 0, np.array([0, 1, 1, 2, 3]),
             np.array([2.0, np.nan, 3.0, np.nan, 1.0])),
    "one_dim_repeats": (rng.normal(size=5), 0, np.array([4, 4, 4, 0, 4, 2, 2, 4, 4, 4, 4, 4]),
                        rng.normal(size=12)),
    "zero_dim": (np.array(1.5), 0, np.array(0), np.array(-2.5)),
    "zero_dim_one_element": (np.array(1.5), -1, np.array([0]), np.array([-2.5])),
    "empty_index": (rng.normal(size=(2, 3)), 1, np.zeros((2, 0), np.int64),
                    rng.normal(size=(2, 0))),
    "empty_input": (np.zeros((0, 3)), 0, np.zeros((0, 3), np.int64), np.zeros((0, 3))),
}


def _reduce_fn(dim, index, reduce, include_self, method=False):
    def fn(m, x, s):
        idx = m.tensor(index, dtype=m.int64)
        if method:
            return (x * 1).scatter_reduce_(dim, idx, s * 1, reduce, include_self=include_self)
        return m.scatter_reduce(x, dim, idx, s, reduce, include_self=include_self)
    return fn


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_scatter_reduce(case, reduce, include_self):
    x, dim, index, src = CASES[case]
    # sums and products of several sources round in another order than PyTorch's kernel
    # (tapegrad reduces rows, PyTorch adds into the output one source at a time): an ulp
    rtol = 0.0 if reduce in ("amax", "amin") else 1e-14
    check(_reduce_fn(dim, index, reduce, include_self), x, src, rtol=rtol)


@pytest.mark.parametrize("reduce", REDUCES)
def test_scatter_reduce_larger_source(reduce):
    """A source larger than the index: only the part the index covers is read (values as
    PyTorch's; PyTorch's own backward then fails on the source's shape, tapegrad gives the
    rest of the source a zero gradient)."""
    x, index, src = rng.normal(size=(3, 4)), rng.integers(0, 3, (2, 3)), rng.normal(size=(4, 5))
    want = torch.scatter_reduce(torch.tensor(x), 0, torch.tensor(index), torch.tensor(src),
                                reduce).numpy()
    s = tg.tensor(src, dtype=tg.float64, requires_grad=True)
    y = tg.scatter_reduce(tg.tensor(x, dtype=tg.float64), 0, tg.tensor(index), s, reduce)
    np.testing.assert_allclose(np.array(y.tolist()), want, rtol=1e-15, atol=0)
    y.sum().backward()
    grad = np.array(s.grad.tolist())
    assert grad.shape == (4, 5) and not grad[2:].any() and not grad[:, 3:].any()


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCES)
def test_scatter_reduce_in_place(reduce, include_self):
    x, dim, index, src = CASES["ties"]
    check(_reduce_fn(dim, index, reduce, include_self, method=True), x, src, rtol=1e-14)
    check(lambda m, a, b: a.scatter_reduce(dim, m.tensor(index), b, reduce=reduce,
                                           include_self=include_self), x, src, rtol=1e-14)


def test_scatter_reduce_in_place_writes_the_tensor():
    got = []
    for m in (tg, torch):
        x = m.tensor([1.0, 2.0, 3.0], dtype=m.float64)
        out = x.scatter_reduce_(0, m.tensor([0, 0, 2]), m.tensor([5.0, 4.0, 1.0],
                                                                 dtype=m.float64), "amin")
        got.append((out is x, x.tolist()))
    assert got[0] == got[1]
    leaf = tg.ones(3, dtype=tg.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        leaf.scatter_reduce_(0, tg.tensor([0]), tg.ones(1, dtype=tg.float64), "sum")
    assert leaf.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_scatter_reduce_integers(dtype, reduce, include_self):
    """Integer means round toward minus infinity, as PyTorch's (a floor division)."""
    x = np.array([[-5, 7, 3], [2, -9, 4]])
    src = np.array([[2, -3, 4], [-7, 6, 1], [9, 9, -2]])
    index = np.array([[0, 0, 1], [0, 1, 1], [1, 0, 0]])
    results = []
    for m in (tg, torch):
        dt = getattr(m, dtype)
        err = raised(lambda: m.scatter_reduce(m.tensor(x, dtype=dt), 0, m.tensor(index),
                                              m.tensor(src, dtype=dt), reduce,
                                              include_self=include_self))
        if err is not None:
            results.append(err)
            continue
        y = m.scatter_reduce(m.tensor(x, dtype=dt), 0, m.tensor(index),
                             m.tensor(src, dtype=dt), reduce, include_self=include_self)
        results.append((str(y.dtype).split(".")[-1], y.tolist()))
    assert results[0] == results[1]


def test_scatter_reduce_against_central_differences():
    """Gradients of every reduction (no ties, no zeros: where the derivative exists) against
    central differences, beyond agreeing with PyTorch."""
    x = tg.tensor(rng.uniform(0.5, 2.0, (3, 4)), dtype=tg.float64, requires_grad=True)
    s = tg.tensor(rng.uniform(0.5, 2.0, (5, 4)), dtype=tg.float64, requires_grad=True)
    index = tg.tensor(rng.integers(0, 3, (5, 4)))
    for reduce in REDUCES:
        for include_self in (True, False):
            assert tg.testing.gradcheck(
                lambda a, b: tg.scatter_reduce(a, 0, index, b, reduce,
                                               include_self=include_self),
                x, s)


REDUCE_BAD = {
    "reduce_name": lambda m: m.scatter_reduce(m.zeros(3, 4), 0, m.tensor([[0, 1]]),
                                              m.ones(2, 2), "foo"),
    "index_dtype": lambda m: m.scatter_reduce(m.zeros(3, 4), 0, m.zeros(2, 2),
                                              m.ones(2, 2), "sum"),
    "index_dtype_before_reduce": lambda m: m.scatter_reduce(m.zeros(3, 4), 0, m.zeros(2, 2),
                                                            m.ones(2, 2), "foo"),
    "index_list": lambda m: m.scatter_reduce(m.zeros(3, 4), 0, [[0]], m.ones(2, 2), "sum"),
    "src_number": lambda m: m.scatter_reduce(m.zeros(3, 4), 0, m.tensor([[0]]), 1.0, "sum"),
    "src_dtype": lambda m: m.scatter_reduce(m.zeros(3, 4), 0, m.tensor([[0]]),
                                            m.ones(1, 1, dtype=m.int64), "sum"),
    "index_above": lambda m: m.scatter_reduce(m.zeros(3, 4), 0, m.tensor([[5]]),
                                              m.ones(2, 2), "amax"),
    "index_negative": lambda m: m.scatter_reduce(m.zeros(3, 4), 0, m.tensor([[-1]]),
                                                 m.ones(2, 2), "sum"),
    "dim": lambda m: m.scatter_reduce(m.zeros(3, 4), 2, m.tensor([[0]]), m.ones(2, 2), "sum"),
    "index_rank": lambda m: m.scatter_reduce(m.zeros(3, 4), 0, m.tensor([0]), m.ones(2, 2),
                                             "sum"),
    "index_wider_than_self": lambda m: m.scatter_reduce(
        m.zeros(3, 4), 0, m.zeros(2, 5, dtype=m.int64), m.ones(2, 6), "sum"),
    "index_larger_than_src": lambda m: m.scatter_reduce(
        m.zeros(3, 4), 0, m.zeros(4, 2, dtype=m.int64), m.ones(2, 2), "prod"),
    "zero_dim_out_of_range": lambda m: m.scatter_reduce(m.tensor(1.0), 0, m.tensor(1),
                                                        m.tensor(3.0), "sum"),
    "bool_mean": lambda m: m.scatter_reduce(m.zeros(3, dtype=m.bool), 0, m.tensor([0]),
                                            m.ones(1, dtype=m.bool), "mean"),
    "scatter_wider": lambda m: m.scatter(m.zeros(3, 4), 0, m.zeros(2, 5, dtype=m.int64),
                                         m.ones(2, 2)),
    "scatter_add_index_dtype": lambda m: m.scatter_add(m.zeros(3, 4), 0, m.zeros(2, 2),
                                                       m.ones(2, 2)),
}


@pytest.mark.parametrize("case", sorted(REDUCE_BAD))
def test_scatter_reduce_errors(case):
    got, want = raised(lambda: REDUCE_BAD[case](tg)), raised(lambda: REDUCE_BAD[case](torch))
    assert want is not None
    assert got == want


def test_bad_input_corrupts_nothing():
    x = tg.tensor([1.0, 2.0, 3.0], dtype=tg.float64)
    with pytest.raises(RuntimeError):
        x.scatter_reduce_(0, tg.tensor([7]), tg.ones(1, dtype=tg.float64), "sum")
    with pytest.raises(RuntimeError):
        x.scatter_reduce_(0, tg.tensor([0]), tg.ones(1, dtype=tg.float64), "max")
    assert x.tolist() == [1.0, 2.0, 3.0]


# --- compiled calls ---------------------------------------------------------------------------
COMPILED = {
    "slice_scatter": lambda x, s, i: tg.slice_scatter(x, s[:2] * 2, 0, 1, 3).pow(2).sum(),
    "select_scatter": lambda x, s, i: tg.select_scatter(x, s[0] * 2, 0, 1).pow(2).sum(),
    "diagonal_scatter": lambda x, s, i: tg.diagonal_scatter(x, s[0, :2] * 2, 1).pow(2).sum(),
}
for _r in REDUCES:
    for _inc in (True, False):
        COMPILED[f"{_r}_{_inc}"] = (
            lambda r, inc: lambda x, s, i: tg.scatter_reduce(
                x, 0, i, s * 2, r, include_self=inc).pow(2).sum())(_r, _inc)


@pytest.mark.parametrize("name", sorted(COMPILED))
def test_compiled_calls_take_new_index_values(name):
    """Index values decide where sources land: a compiled call with new indices (and new
    values, so ties move) gives eager's answer and gradients."""
    program = COMPILED[name]
    compiled = tg.compile(program)
    indices = ([[0, 1, 2], [0, 1, 2]], [[2, 2, 2], [0, 0, 1]], [[1, 1, 1], [1, 1, 1]],
               [[0, 1, 2], [0, 1, 2]], [[3, 0, 1], [3, 3, 0]])
    for k, idx in enumerate(indices):
        xv = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [2.0, 2.0, 2.0], [0.5, 1.5, 1.0]])
        sv = np.array([[1.0, 2.0, 3.0], [1.0, 2.5, 1.0]]) * (1 + (k % 2))
        got = []
        for fn in (compiled, program):
            x = tg.tensor(xv, dtype=tg.float64, requires_grad=True)
            s = tg.tensor(sv, dtype=tg.float64, requires_grad=True)
            y = fn(x, s, tg.tensor(idx))
            y.backward()
            got.append((y.item(), x.grad.tolist(), s.grad.tolist()))
        assert got[0] == got[1]
    if name.startswith(("amax_False", "amin_False")):
        # which values tie with the input's decides the gradient: those calls run eagerly
        assert any("scatter_reduce" in why for why, _ in compiled.stats.eager_reasons)
    else:
        assert compiled.stats.eager == 0


# --- index_reduce ---------------------------------------------------------------------------
INDEX_CASES = {
    "ties_dim0": (TIES_X, 0, np.array([0, 1, 0]), TIES_S[:, :4]),
    "ties_dim1": (TIES_X, 1, np.array([3, 3, 0, 3, 1]), np.array([[2.0, 0.0, 2.0, 5.0, 3.0],
                                                                  [2.0, 3.0, -1.0, 2.0, 3.0]])),
    "zeros": (ZEROS_X, 1, np.array([2, 0, 2, 2]), np.array([[0.0, 1.0, 2.0, 0.0],
                                                           [3.0, 0.0, 0.0, 4.0]])),
    "random_negative_dim": (rng.normal(size=(2, 3, 4)), -1, rng.integers(0, 4, 7),
                            rng.normal(size=(2, 3, 7))),
    "random_middle_dim": (rng.normal(size=(2, 3, 4)), 1, rng.integers(0, 3, 5),
                          rng.normal(size=(2, 5, 4))),
    "infinities": (np.array([np.inf, 1.0, -np.inf, 2.0]), 0, np.array([0, 0, 2, 1, 3, 3]),
                   np.array([np.inf, 3.0, -np.inf, -np.inf, np.inf, 1.0])),
    "zero_dim": (np.array(1.5), 0, np.array([0, 0]), np.array(-2.5)),
    "zero_dim_index": (rng.normal(size=(3, 2)), 0, np.array(2), rng.normal(size=(1, 2))),
    "empty_index": (rng.normal(size=(2, 3)), 1, np.zeros(0, np.int64), np.zeros((2, 0))),
}


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCES[1:])
@pytest.mark.parametrize("case", sorted(INDEX_CASES))
def test_index_reduce(case, reduce, include_self):
    x, dim, index, src = INDEX_CASES[case]
    if case == "zero_dim":
        index = np.array([0])
    rtol = 0.0 if reduce in ("amax", "amin") else 1e-14

    def fn(m, a, b):
        idx = m.tensor(index, dtype=m.int64)
        return m.index_reduce(a, dim, idx, b, reduce, include_self=include_self)

    def method(m, a, b):
        idx = m.tensor(index, dtype=m.int64)
        return (a * 1).index_reduce_(dim, idx, b, reduce, include_self=include_self)
    check(fn, x, src, rtol=rtol)
    check(method, x, src, rtol=rtol)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCES[1:])
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_index_reduce_integers(dtype, reduce, include_self):
    """Integer means round toward minus infinity; bool inputs work only as PyTorch's kernels
    allow (not 0-d or 1-D, no mean)."""
    x = np.array([[-5, 7, 3], [2, -9, 4]])
    src = np.array([[2, -3, 4, 1], [-7, 6, 1, 0]])
    index = np.array([0, 2, 0, 0])
    for xv, sv, idx, dim in ((x, src, index, 1), (x[0], src[0], index, 0),
                             (x[0, 0], src[0, 0], index[:1], 0), (x, src[:, :0], index[:0], 1)):
        results = []
        for m in (tg, torch):
            dt = getattr(m, dtype)

            def call():
                return m.index_reduce(m.tensor(xv, dtype=dt), dim, m.tensor(idx),
                                      m.tensor(sv, dtype=dt), reduce,
                                      include_self=include_self)
            err = raised(call)
            if err is not None:
                results.append(err)
                continue
            y = call()
            results.append((str(y.dtype).split(".")[-1], y.tolist()))
        assert results[0] == results[1]


def _ir(m, dim=0, index=(0, 2, 0), src=(3, 4), reduce="prod", x=(3, 4), src_dtype=None,
        index_dtype=None):
    xs = m.zeros(x, dtype=m.float64)
    s = m.ones(src, dtype=getattr(m, src_dtype or "float64"))
    i = m.tensor(list(index) if not isinstance(index, int) else index,
                 dtype=getattr(m, index_dtype or "int64"))
    return m.index_reduce(xs, dim, i, s, reduce)


INDEX_BAD = {
    "reduce_sum": lambda m: _ir(m, reduce="sum"),
    "reduce_name": lambda m: _ir(m, reduce="foo"),
    "index_float": lambda m: _ir(m, index_dtype="float64"),
    "index_2d": lambda m: m.index_reduce(m.zeros(3, 4), 0, m.tensor([[0, 1, 0]]), m.ones(3, 4),
                                         "amax"),
    "src_dtype": lambda m: _ir(m, src_dtype="int64"),
    "count": lambda m: _ir(m, src=(2, 4)),
    "count_dim1": lambda m: _ir(m, dim=1, src=(3, 2)),
    "shape": lambda m: _ir(m, src=(3, 2)),
    "rank": lambda m: _ir(m, index=(1, 1), src=(2, 4, 1)),
    "one_dim_source": lambda m: _ir(m, src=(4,)),
    "zero_dim_source": lambda m: _ir(m, src=()),
    "zero_dim_self": lambda m: _ir(m, x=(), index=(0, 0), src=(2,)),
    "index_above": lambda m: _ir(m, index=(0, 3, 0)),
    "index_negative": lambda m: _ir(m, index=(0, -1, 0), reduce="amin"),
    "dim": lambda m: _ir(m, dim=5),
    "index_list": lambda m: m.index_reduce(m.zeros(3), 0, [0], m.ones(1), "prod"),
    "source_number": lambda m: m.index_reduce(m.zeros(3), 0, m.tensor([0]), 1.0, "prod"),
}


@pytest.mark.parametrize("case", sorted(INDEX_BAD))
def test_index_reduce_errors(case):
    got, want = raised(lambda: INDEX_BAD[case](tg)), raised(lambda: INDEX_BAD[case](torch))
    assert want is not None
    assert got == want


def test_index_reduce_against_central_differences():
    x = tg.tensor(rng.uniform(0.5, 2.0, (3, 4)), dtype=tg.float64, requires_grad=True)
    s = tg.tensor(rng.uniform(0.5, 2.0, (3, 6)), dtype=tg.float64, requires_grad=True)
    index = tg.tensor([3, 0, 3, 1, 3, 0])
    for reduce in REDUCES[1:]:
        for include_self in (True, False):
            assert tg.testing.gradcheck(
                lambda a, b: tg.index_reduce(a, 1, index, b, reduce, include_self=include_self),
                x, s)


@pytest.mark.parametrize("reduce", REDUCES[1:])
def test_index_reduce_compiled_with_new_indices(reduce):
    def program(x, s, i):
        return tg.index_reduce(x, 0, i, s * 2, reduce).pow(2).sum()
    compiled = tg.compile(program)
    for idx in ([0, 1], [3, 3], [2, 0], [0, 1]):
        got = []
        for fn in (compiled, program):
            x = tg.tensor([[1.0, 2.0], [4.0, 2.0], [2.0, 2.0], [0.5, 1.5]], requires_grad=True)
            s = tg.tensor([[1.0, 2.0], [2.0, 2.5]], requires_grad=True)
            y = fn(x, s, tg.tensor(idx))
            y.backward()
            got.append((y.item(), x.grad.tolist(), s.grad.tolist()))
        assert got[0] == got[1]
    assert compiled.stats.eager == 0


@pytest.mark.parametrize("reduce", REDUCES)
def test_scatter_reduce_second_derivatives(reduce):
    """create_graph: the gradients are themselves differentiable, as PyTorch's."""
    results = []
    for m in (tg, torch):
        x = m.tensor([2.0, 5.0, 1.0, 3.0], dtype=m.float64, requires_grad=True)
        s = m.tensor([2.0, 0.5, 3.0, 1.5, 4.0], dtype=m.float64, requires_grad=True)
        y = m.scatter_reduce(x, 0, m.tensor([0, 0, 1, 2, 2]), s, reduce).pow(2).sum()
        gx, gs = m.autograd.grad(y, (x, s), create_graph=True)
        hx, hs = m.autograd.grad(gx.pow(2).sum() + gs.sum(), (x, s))
        results.append(np.concatenate([hx.tolist(), hs.tolist()]))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-14, atol=0)
