"""``slice_scatter``, ``select_scatter`` and ``diagonal_scatter`` against PyTorch: values,
the result's ``grad_fn`` name, the gradients of input and source, integer and bool inputs,
empty and negative dims, PyTorch's errors, central differences and compiled calls."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

rng = np.random.default_rng(11)


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


# --- compiled calls ---------------------------------------------------------------------------
COMPILED = {
    "slice_scatter": lambda x, s, i: tg.slice_scatter(x, s[:2] * 2, 0, 1, 3).pow(2).sum(),
    "select_scatter": lambda x, s, i: tg.select_scatter(x, s[0] * 2, 0, 1).pow(2).sum(),
    "diagonal_scatter": lambda x, s, i: tg.diagonal_scatter(x, s[0, :2] * 2, 1).pow(2).sum(),
}


@pytest.mark.parametrize("name", sorted(COMPILED))
def test_compiled_calls_take_new_index_values(name):
    """A compiled call with new values gives eager's answer and gradients."""
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
    assert compiled.stats.eager == 0
