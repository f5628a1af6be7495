"""Sparsity patterns read off the tape, colourings, and compressed Jacobians and Hessians.

Patterns must hold every nonzero of the dense derivative (a conservative pattern is fine, a
missed nonzero is a bug); on stencils, banded and block problems they must be exact.  The
compressed results must equal the dense ``jacobian``/``hessian`` to 1e-12."""
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

import strategies as S  # noqa: F401 - makes the source tree importable
import tapegrad as tg
from tapegrad import colouring


def bratu_residual(n, lam=6.0):
    """The 2-D Bratu residual on an n x n grid with zero boundary values: the five-point
    Laplacian plus lam * exp(u), flattened."""
    h2 = 1.0 / (n + 1) ** 2

    def residual(u):
        grid = u.reshape(n, n)
        rows = tg.zeros(1, n)
        cols = tg.zeros(n + 2, 1)
        padded = tg.cat([cols, tg.cat([rows, grid, rows], 0), cols], 1)
        lap = (padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]
               - 4.0 * grid) / h2
        return (lap + lam * grid.exp()).reshape(-1)
    return residual


def five_point_pattern(n):
    """The pattern of the five-point stencil on an n x n grid (diagonal included)."""
    one_d = sp.diags([np.ones(n - 1), np.ones(n), np.ones(n - 1)], [-1, 0, 1], dtype=float)
    shift = sp.diags([np.ones(n - 1), np.ones(n - 1)], [-1, 1], dtype=float)
    return (sp.kron(sp.identity(n), one_d) + sp.kron(shift, sp.identity(n))).toarray() != 0


def rosenbrock(v):
    return (100.0 * (v[1:] - v[:-1] ** 2) ** 2 + (1.0 - v[:-1]) ** 2).sum()


def dense_jacobian(fn, x):
    y = fn(tg.tensor(x))
    return tg.jacobian(fn)(tg.tensor(x)).numpy().reshape(y.numel(), x.size)


def dense_hessian(fn, x):
    return tg.hessian(fn)(tg.tensor(x)).numpy()


def assert_covers(pattern, dense):
    """Every nonzero of dense is in the pattern."""
    missed = (dense != 0) & ~pattern.toarray()
    assert not missed.any(), f"pattern misses {np.argwhere(missed).tolist()}"


# ---------------------------------------------------------------------------------------------
# patterns, exact where the structure is known
# ---------------------------------------------------------------------------------------------
def test_bratu_pattern_is_the_five_point_stencil():
    n = 7
    pattern = tg.jacobian_sparsity(bratu_residual(n), np.full(n * n, 0.1))
    assert pattern.shape == (n * n, n * n)
    assert pattern.dtype == bool
    np.testing.assert_array_equal(pattern.toarray(), five_point_pattern(n))


def test_banded_pattern_is_exact():
    f = lambda v: v[2:] * v[1:-1] - v[:-2].sin()   # noqa: E731
    pattern = tg.jacobian_sparsity(f, np.linspace(0.1, 1.0, 8)).toarray()
    expected = np.zeros((6, 8), dtype=bool)
    for i in range(6):
        expected[i, i:i + 3] = True
    np.testing.assert_array_equal(pattern, expected)


def test_block_patterns_of_reductions_and_softmax_are_exact():
    blocks = np.kron(np.eye(4, dtype=bool), np.ones((1, 3), dtype=bool))
    x = np.linspace(-1.0, 1.0, 12)
    summed = tg.jacobian_sparsity(lambda v: (v.reshape(4, 3) ** 2).sum(1), x)
    np.testing.assert_array_equal(summed.toarray(), blocks)
    soft = tg.jacobian_sparsity(lambda v: v.reshape(4, 3).softmax(1).reshape(-1), x)
    np.testing.assert_array_equal(soft.toarray(), np.kron(np.eye(4), np.ones((3, 3))) != 0)
    # a reduction over the leading axis of a (3, 4) view: column sums
    cols = tg.jacobian_sparsity(lambda v: v.reshape(3, 4).exp().sum(0), x)
    np.testing.assert_array_equal(cols.toarray(), np.tile(np.eye(4, dtype=bool), (1, 3)))


def test_broadcast_index_and_concatenation_patterns_are_exact():
    x = np.linspace(0.5, 1.5, 6)
    outer = lambda v: (v[:3].reshape(3, 1) * v[3:].reshape(1, 3)).reshape(-1)   # noqa: E731
    expected = np.zeros((9, 6), dtype=bool)
    for i in range(3):
        for j in range(3):
            expected[3 * i + j, [i, 3 + j]] = True
    np.testing.assert_array_equal(tg.jacobian_sparsity(outer, x).toarray(), expected)
    idx = np.array([5, 0, 0, 2])
    picked = tg.jacobian_sparsity(lambda v: v[tg.tensor(idx)].tanh(), x).toarray()
    np.testing.assert_array_equal(picked, np.eye(6, dtype=bool)[idx])
    stacked = tg.jacobian_sparsity(lambda v: tg.stack([v[:3], v[3:] * 2], 1).reshape(-1), x)
    np.testing.assert_array_equal(stacked.toarray(), np.eye(6, dtype=bool)[[0, 3, 1, 4, 2, 5]])


def test_matrix_product_patterns_follow_rows_and_columns():
    a = np.arange(12.0).reshape(2, 6)
    a[0, 0] = 0.0
    pattern = tg.jacobian_sparsity(lambda v: tg.tensor(a) @ v, np.ones(6))
    # the zero in a is a value (an argument could change it), not structure
    assert pattern.toarray().all()
    # x as a (3, 2) matrix: output (i, j) reads column j of x only
    b = np.ones((4, 3))
    cols = tg.jacobian_sparsity(lambda v: (tg.tensor(b) @ v.reshape(3, 2)).reshape(-1),
                                np.ones(6)).toarray()
    expected = np.zeros((8, 6), dtype=bool)
    for i in range(4):
        for j in range(2):
            expected[2 * i + j, j::2] = True
    np.testing.assert_array_equal(cols, expected)
    # a product of two parts of x: the left row's and the right column's entries, and in
    # the Hessian each left entry with each right one, nothing within one factor
    f = lambda v: (v[:4].reshape(2, 2) @ v[4:].reshape(2, 1)).sum()   # noqa: E731
    x = np.linspace(0.5, 1.0, 6)
    hess = tg.hessian_sparsity(f, x)
    assert_covers(hess, dense_hessian(f, x))
    hess = hess.toarray()
    assert not hess[:4, :4].any() and not hess[4:, 4:].any()
    assert hess[:4, 4:].all()   # conservative: left row entries meet both right entries


def test_an_op_not_modelled_connects_everything(monkeypatch):
    # the fallback for any record the propagation does not model (here: products, with
    # their rule switched off) makes every output entry depend on every input entry
    from tapegrad import sparsity
    monkeypatch.setattr(sparsity, "_product_sides", lambda *args: None)
    f = lambda v: (v[:4].reshape(2, 2) @ v[4:].reshape(2, 1)).reshape(-1).sin()   # noqa: E731
    x = np.linspace(0.5, 1.0, 6)
    pattern = tg.jacobian_sparsity(f, x)
    assert pattern.toarray().all()
    hess = tg.hessian_sparsity(lambda v: f(v).sum(), x)
    assert hess.toarray().all()
    np.testing.assert_allclose(tg.sparse_hessian(lambda v: f(v).sum())(x).toarray(),
                               dense_hessian(lambda v: f(v).sum(), x), rtol=1e-12, atol=1e-12)


def test_writes_into_a_tensor_are_followed():
    def f(v):
        y = v * 1.0
        y[2] = v[0] * v[4]
        y[3:5] = v[:2].exp()
        return y
    x = np.linspace(0.5, 1.0, 5)
    expected = np.array([[1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [1, 0, 0, 0, 1], [1, 0, 0, 0, 0],
                         [0, 1, 0, 0, 0]], dtype=bool)
    pattern = tg.jacobian_sparsity(f, x)
    assert_covers(pattern, dense_jacobian(f, x))
    np.testing.assert_array_equal(pattern.toarray(), expected)
    np.testing.assert_allclose(tg.sparse_jacobian(f)(x).toarray(), dense_jacobian(f, x),
                               rtol=1e-12, atol=1e-12)


def test_constant_output_and_input_handed_back():
    x = np.ones(3)
    assert tg.jacobian_sparsity(lambda v: tg.ones(2), x).nnz == 0
    np.testing.assert_array_equal(tg.jacobian_sparsity(lambda v: v, x).toarray(), np.eye(3))


def test_rosenbrock_hessian_pattern_is_tridiagonal():
    n = 9
    pattern = tg.hessian_sparsity(rosenbrock, np.full(n, 0.5)).toarray()
    expected = np.abs(np.subtract.outer(np.arange(n), np.arange(n))) <= 1
    np.testing.assert_array_equal(pattern, expected)


def test_hessian_pattern_of_blocks_and_of_linear_terms():
    x = np.linspace(0.1, 1.2, 12)
    # linear terms couple nothing; a square of a block's sum couples the whole block
    f = lambda v: 3.0 * v.sum() + (v.reshape(4, 3).sum(1) ** 2).sum()   # noqa: E731
    pattern = tg.hessian_sparsity(f, x).toarray()
    np.testing.assert_array_equal(pattern, np.kron(np.eye(4), np.ones((3, 3))) != 0)
    assert tg.hessian_sparsity(lambda v: (2.0 * v).sum() + v[0], x).nnz == 0
    # x * y couples x with y only; x / y also y with itself
    prod = tg.hessian_sparsity(lambda v: (v[0] * v[1]), x).toarray()
    assert prod[0, 1] and prod[1, 0] and not prod[0, 0] and not prod[1, 1]
    quot = tg.hessian_sparsity(lambda v: (v[0] / v[1]), x).toarray()
    assert quot[0, 1] and quot[1, 1] and not quot[0, 0]


def test_dense_hessians_are_patterned_and_too_dense_ones_refused(monkeypatch):
    from tapegrad import sparsity
    f = lambda v: v.sum() ** 2 + (v * v).sum()   # noqa: E731
    assert tg.hessian_sparsity(f, np.ones(30)).toarray().all()
    monkeypatch.setattr(sparsity, "MAX_PAIRS", 500)
    with pytest.raises(ValueError, match="more than 500 entries"):
        tg.hessian_sparsity(f, np.ones(30))
    # small enough: merged along the way, not refused
    assert tg.hessian_sparsity(lambda v: (v[1:] * v[:-1]).sum() + (v ** 3).sum(),
                               np.ones(100)).nnz == 298


def test_a_record_the_output_does_not_read_adds_no_pairs():
    def f(v):
        (v * v).exp()          # computed and dropped
        return v.sum()
    assert tg.hessian_sparsity(f, np.ones(4)).nnz == 0


# ---------------------------------------------------------------------------------------------
# random programs: the pattern covers the dense result, compressed values equal it
# ---------------------------------------------------------------------------------------------
N = 6
UNARY = {
    "sin": lambda v: v.sin(),
    "tanh": lambda v: v.tanh(),
    "square": lambda v: v * v,
    "exp": lambda v: (0.3 * v).exp(),
    "neg": lambda v: -v,
    "relu": lambda v: (v + 0.05).relu(),
}
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (1.5 + b * b),
    "max": lambda a, b: tg.maximum(a, b + 0.01),
}


@st.composite
def programs(draw):
    """A list of steps, each reading earlier values of a pool that starts with x."""
    steps = []
    for k in range(draw(st.integers(1, 7))):
        pool = k + 1
        kind = draw(st.sampled_from(["unary", "binary", "gather", "roll", "pick", "block",
                                     "softmax", "where", "matmul", "write"]))
        i = draw(st.integers(0, pool - 1))
        j = draw(st.integers(0, pool - 1))
        if kind == "unary":
            steps.append((kind, draw(st.sampled_from(sorted(UNARY))), i))
        elif kind == "binary":
            steps.append((kind, draw(st.sampled_from(sorted(BINARY))), i, j))
        elif kind == "gather":
            idx = draw(st.lists(st.integers(0, N - 1), min_size=N, max_size=N))
            steps.append((kind, np.array(idx), i))
        elif kind == "roll":
            steps.append((kind, draw(st.integers(1, N - 1)), i))
        elif kind == "pick":
            steps.append((kind, draw(st.integers(0, N - 1)), draw(st.integers(0, N - 1)), i, j))
        elif kind == "block":
            steps.append((kind, draw(st.sampled_from([(2, 3), (3, 2)])), i))
        elif kind == "softmax":
            steps.append((kind, i))
        elif kind == "matmul":
            steps.append((kind, draw(st.booleans()), i, j))
        elif kind == "write":
            # into zeros (a written tensor that depends on no input) or into a copy of i
            steps.append((kind, draw(st.booleans()), draw(st.integers(0, N - 2)),
                          draw(st.integers(0, N - 2)), i, j))
        else:
            mask = draw(st.lists(st.booleans(), min_size=N, max_size=N))
            steps.append((kind, np.array(mask), i, j))
    return steps


def run_program(steps, v):
    pool = [v]
    for step in steps:
        kind = step[0]
        if kind == "unary":
            pool.append(UNARY[step[1]](pool[step[2]]))
        elif kind == "binary":
            pool.append(BINARY[step[1]](pool[step[2]], pool[step[3]]))
        elif kind == "gather":
            pool.append(pool[step[2]][tg.tensor(step[1])])
        elif kind == "roll":
            a, k = pool[step[2]], step[1]
            pool.append(tg.cat([a[k:], a[:k]]))
        elif kind == "pick":
            _, p, q, i, j = step
            pool.append(pool[i] + pool[j][p] * pool[j][q])
        elif kind == "block":
            shape = step[1]
            blocks = pool[step[2]].reshape(*shape)
            pool.append((blocks.sum(1, keepdim=True) * blocks).reshape(-1))
        elif kind == "softmax":
            pool.append(pool[step[1]].reshape(2, 3).softmax(1).reshape(-1))
        elif kind == "write":
            _, into_zeros, p, q, i, j = step
            target = tg.zeros(N) if into_zeros else pool[i] * 1.0
            target[p:p + 2] = pool[j][q:q + 2].sin()
            pool.append(target)
        elif kind == "matmul":
            _, constant, i, j = step
            if constant:   # a fixed banded (3, 3) factor on the right
                band = np.eye(3) + np.eye(3, k=1)
                pool.append((pool[i].reshape(2, 3) @ tg.tensor(band)).reshape(-1))
            else:          # two recorded factors: (6, 2) @ (2, 1)
                pool.append((pool[i].reshape(6, 1) @ pool[j][1:3].reshape(1, 2)).sum(1))
        else:
            _, mask, i, j = step
            pool.append(tg.where(tg.tensor(mask), pool[i], pool[j]))
    return pool


def vector_program(steps):
    def f(v):
        pool = run_program(steps, v)
        return tg.cat([pool[-1], pool[-2]])
    return f


def scalar_program(steps):
    def f(v):
        pool = run_program(steps, v)
        return (pool[-1] * pool[-2]).sum() + pool[-1].tanh().sum()
    return f


@given(programs(), st.integers(0, 2 ** 31 - 1))
def test_random_programs_jacobian(steps, seed):
    x = np.random.default_rng(seed).uniform(-1.0, 1.0, N)
    f = vector_program(steps)
    dense = dense_jacobian(f, x)
    assert_covers(tg.jacobian_sparsity(f, x), dense)
    jac = tg.sparse_jacobian(f)
    got = jac(x)
    assert sp.issparse(got) and got.format == "csr"
    np.testing.assert_allclose(got.toarray(), dense, rtol=1e-12, atol=1e-12)
    plan = jac.last_plan
    pattern = plan.pattern()
    if plan.mode == "forward":
        assert colouring.is_column_colouring(pattern, plan.colours)
    else:
        assert colouring.is_column_colouring(pattern.T, plan.colours)


@given(programs(), st.integers(0, 2 ** 31 - 1), st.booleans())
def test_random_programs_one_sweep_per_colour_in_a_reused_arena(steps, seed, hessian):
    """Large tapes sweep once per colour, in one tangent arena that is not zeroed between
    colours nor between calls: every value must still equal the dense result."""
    from tapegrad import compressed, higher
    rng = np.random.default_rng(seed)
    f = (scalar_program if hessian else vector_program)(steps)
    derivative = (tg.sparse_hessian if hessian else tg.sparse_jacobian)(f)
    dense = dense_hessian if hessian else dense_jacobian
    saved = compressed._ONE_SWEEP_VALUES, higher._TANGENT_BUDGET
    compressed._ONE_SWEEP_VALUES = higher._TANGENT_BUDGET = 0
    try:
        for _ in range(3):
            x = rng.uniform(-1.0, 1.0, N)
            np.testing.assert_allclose(derivative(x).toarray(), dense(f, x), rtol=1e-12,
                                       atol=1e-12)
    finally:
        compressed._ONE_SWEEP_VALUES, higher._TANGENT_BUDGET = saved


@given(programs(), st.integers(0, 2 ** 31 - 1))
def test_random_programs_hessian(steps, seed):
    x = np.random.default_rng(seed).uniform(-1.0, 1.0, N)
    f = scalar_program(steps)
    dense = dense_hessian(f, x)
    assert_covers(tg.hessian_sparsity(f, x), dense)
    hess = tg.sparse_hessian(f)
    np.testing.assert_allclose(hess(x).toarray(), dense, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# colourings
# ---------------------------------------------------------------------------------------------
def test_five_point_stencil_needs_five_colours():
    pattern = sp.csr_matrix(five_point_pattern(30))
    colours = colouring.colour_columns(pattern)
    assert colouring.is_column_colouring(pattern, colours)
    assert colours.max() + 1 == 5
    rows = colouring.colour_rows(pattern)
    assert colouring.is_column_colouring(pattern.T, rows)


def test_star_colouring_uses_the_symmetry():
    # an arrow: a dense first row and column, and the diagonal.  A column colouring of it
    # needs n colours (every column shares row 0), a star colouring two
    n = 8
    f = lambda v: v[0] * v.sum() + (v ** 3).sum()   # noqa: E731
    x = np.linspace(0.5, 1.5, n)
    pattern = tg.hessian_sparsity(f, x)
    assert colouring.colour_columns(pattern).max() + 1 == n
    colours = colouring.colour_symmetric(pattern)
    assert colours.max() + 1 == 2
    assert colouring.star_sources(pattern, colours) is not None
    hess = tg.sparse_hessian(f)
    np.testing.assert_allclose(hess(x).toarray(), dense_hessian(f, x), rtol=1e-12, atol=1e-12)
    assert hess.last_plan.n_colours == 2


def test_star_sources_refuse_a_colouring_that_cannot_recover():
    # a path 0-1-2-3 coloured 0, 1, 0, 1 is two-coloured: entry (1, 2) is neither alone in
    # its colour in row 1 nor in row 2
    path = sp.csr_matrix(np.abs(np.subtract.outer(np.arange(4), np.arange(4))) <= 1)
    assert colouring.star_sources(path, np.array([0, 1, 0, 1])) is None
    assert colouring.star_sources(path, np.array([0, 1, 2, 0])) is not None
    stencil = sp.csr_matrix(five_point_pattern(12))
    colours = colouring.colour_symmetric(stencil)
    assert colours.max() + 1 == 5
    assert colouring.star_sources(stencil, colours) is not None


def test_colouring_validator_rejects_a_clash():
    pattern = sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 1]], dtype=bool))
    assert colouring.is_column_colouring(pattern, np.array([0, 1, 0]))
    assert not colouring.is_column_colouring(pattern, np.array([0, 0, 1]))
    assert not colouring.is_column_colouring(pattern, np.array([0, 1]))


def test_tridiagonal_and_dense_colour_counts():
    tri = sp.csr_matrix(np.abs(np.subtract.outer(np.arange(50), np.arange(50))) <= 1)
    assert colouring.colour_columns(tri).max() + 1 == 3
    full = sp.csr_matrix(np.ones((4, 7), dtype=bool))
    assert colouring.colour_columns(full).max() + 1 == 7
    assert colouring.colour_rows(full).max() + 1 == 4
    # diagonal: one colour; an empty pattern too
    assert colouring.colour_columns(sp.identity(5, format="csr")).max() == 0
    assert colouring.colour_columns(sp.csr_matrix((3, 4))).max() == 0


# ---------------------------------------------------------------------------------------------
# compressed evaluation
# ---------------------------------------------------------------------------------------------
def test_bratu_sparse_jacobian_equals_dense_and_uses_five_sweeps():
    n = 12
    f = bratu_residual(n)
    jac = tg.sparse_jacobian(f)
    rng = np.random.default_rng(0)
    for _ in range(2):
        x = rng.uniform(0.0, 0.5, n * n)
        np.testing.assert_allclose(jac(x).toarray(), dense_jacobian(f, x), rtol=1e-12,
                                   atol=1e-12)
    assert jac.last_plan.mode == "forward"
    assert jac.last_plan.n_colours == 5


def test_large_tapes_sweep_once_per_colour(monkeypatch):
    from tapegrad import compressed
    monkeypatch.setattr(compressed, "_ONE_SWEEP_VALUES", 0)
    f = bratu_residual(6)
    x = np.random.default_rng(3).uniform(0.0, 0.5, 36)
    np.testing.assert_allclose(tg.sparse_jacobian(f)(x).toarray(), dense_jacobian(f, x),
                               rtol=1e-12, atol=1e-12)


def test_plan_is_reused_for_new_values():
    f = bratu_residual(5)
    jac = tg.sparse_jacobian(f)
    jac(np.full(25, 0.1))
    first = jac.last_plan
    jac(np.full(25, 0.3))
    assert jac.last_plan is first


def test_reverse_mode_when_rows_need_fewer_colours():
    # one dense column (v[0] times everything) and one dense row (a sum)
    f = lambda v: tg.cat([v.sum().reshape(1), v[1:] * 2.0])   # noqa: E731
    x = np.linspace(0.2, 1.0, 9)
    jac = tg.sparse_jacobian(f)
    np.testing.assert_allclose(jac(x).toarray(), dense_jacobian(f, x), rtol=1e-12,
                               atol=1e-12)
    assert jac.last_plan.mode == "reverse"
    assert jac.last_plan.n_colours == 2


def test_rosenbrock_sparse_hessian_equals_dense_with_three_colours():
    hess = tg.sparse_hessian(rosenbrock)
    x = np.random.default_rng(1).uniform(-1.0, 2.0, 40)
    got = hess(x)
    np.testing.assert_allclose(got.toarray(), dense_hessian(rosenbrock, x), rtol=1e-12,
                               atol=1e-12)
    assert hess.last_plan.n_colours == 3
    assert abs(got - got.T).max() == 0.0


def test_hessian_with_an_op_without_a_curvature_rule():
    # prod has no compiled curvature rule: the products come from the recorded gradient
    f = lambda v: v.reshape(3, 2).prod(1).sum() + (v ** 3).sum()   # noqa: E731
    x = np.linspace(0.5, 1.5, 6)
    np.testing.assert_allclose(tg.sparse_hessian(f)(x).toarray(), dense_hessian(f, x),
                               rtol=1e-12, atol=1e-12)


def test_another_path_gets_its_own_pattern():
    def f(v):
        if float(v[0]) > 0:
            return v[1:] * v[:-1]
        return v[1:] + v[0] * v[-1]
    jac = tg.sparse_jacobian(f)
    pos, neg = np.linspace(0.5, 1.0, 5), np.linspace(-1.0, 1.0, 5)
    for x in (pos, neg, pos, neg):
        np.testing.assert_allclose(jac(x).toarray(), dense_jacobian(f, x), rtol=1e-12,
                                   atol=1e-12)
    # one plan per tape structure: the two replayed paths (and the recording of the second
    # path, which holds a record its replay prunes); later calls reuse them
    kept = len(jac._plans)
    assert kept >= 2
    jac(pos)
    jac(neg)
    assert len(jac._plans) == kept


def test_hessian_of_another_path_is_not_read_with_the_first_pattern():
    def f(v):
        if float(v.sum()) > 0:
            return (v[1:] * v[:-1]).sum()          # couples neighbours
        return (v[0] * v).sum() + (v ** 4).sum()   # an arrow and a diagonal
    hess = tg.sparse_hessian(f)
    pos, neg = np.linspace(0.5, 1.0, 6), np.linspace(-1.0, 0.2, 6)
    for x in (pos, neg, pos, neg, neg):
        np.testing.assert_allclose(hess(x).toarray(), dense_hessian(f, x), rtol=1e-12,
                                   atol=1e-12)
        assert_covers(hess.sparsity(x), dense_hessian(f, x))


def test_compiled_functions_are_taken_as_they_are():
    f = tg.compile(bratu_residual(4))
    jac = tg.sparse_jacobian(f)
    assert jac.fn is f
    x = np.full(16, 0.2)
    np.testing.assert_allclose(jac(x).toarray(), dense_jacobian(f, x), rtol=1e-12, atol=1e-12)


def test_extra_arguments_are_passed_on():
    f = lambda v, scale: v[1:] * v[:-1] * scale   # noqa: E731
    jac = tg.sparse_jacobian(f)
    x = np.linspace(1.0, 2.0, 4)
    np.testing.assert_allclose(jac(x, 3.0).toarray(),
                               3.0 * dense_jacobian(lambda v: v[1:] * v[:-1], x), rtol=1e-12)


def test_trivial_outputs():
    x = np.ones(3)
    assert tg.sparse_jacobian(lambda v: tg.ones(2))(x).nnz == 0
    np.testing.assert_array_equal(tg.sparse_jacobian(lambda v: v)(x).toarray(), np.eye(3))
    assert tg.sparse_hessian(lambda v: tg.ones(()))(x).nnz == 0
    assert tg.sparse_hessian(lambda v: v.sum() * 2.0)(x).nnz == 0


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda: tg.jacobian_sparsity(lambda v: v, np.ones((2, 2))),
    lambda: tg.hessian_sparsity(lambda v: v.sum(), np.ones((2, 2))),
    lambda: tg.sparse_jacobian(lambda v: v)(np.ones((2, 2))),
    lambda: tg.sparse_hessian(lambda v: v.sum())(np.float64(1.0)),
])
def test_x_must_be_a_vector(call):
    with pytest.raises(ValueError, match="1-D vector"):
        call()


def test_hessian_needs_a_scalar_and_jacobian_a_tensor():
    with pytest.raises(ValueError, match="single element"):
        tg.hessian_sparsity(lambda v: v * 2.0, np.ones(3))
    with pytest.raises(ValueError, match="single element"):
        tg.sparse_hessian(lambda v: v * 2.0)(np.ones(3))
    with pytest.raises(TypeError, match="must return a tensor"):
        tg.jacobian_sparsity(lambda v: 3.0, np.ones(3))


def _repeated_writes(m, v):
    y = v * 1.0
    y = y.index_put((m.tensor([1, 1, 3]),), v[2:5] * 2.0)
    y[m.tensor([0, 0])] = v[3:5].exp()
    return y.scatter(0, m.tensor([4, 4]), v[:2] * v[1])


def test_writes_with_repeated_targets_cover_both_sweeps():
    # an entry written twice keeps the last value, but PyTorch's gradient (a reverse sweep's
    # Jacobian row) reaches both sources: the pattern holds both; an entry written to by
    # none keeps the input's (index_put, x[idx] = v and scatter record REPLACE)
    torch = pytest.importorskip("torch")
    x = np.linspace(0.5, 1.0, 5)
    expected = np.array([[0, 0, 0, 1, 1], [0, 0, 1, 1, 0], [0, 0, 1, 0, 0], [0, 0, 0, 0, 1],
                         [1, 1, 0, 0, 0]], dtype=bool)
    pattern = tg.jacobian_sparsity(lambda v: _repeated_writes(tg, v), x)
    np.testing.assert_array_equal(pattern.toarray(), expected)
    jacrev = torch.func.jacrev(lambda v: _repeated_writes(torch, v))(torch.tensor(x))
    assert_covers(pattern, jacrev.numpy())
    h = 1e-6
    fd = np.stack([(_repeated_writes(tg, tg.tensor(x + h * e)).numpy()
                    - _repeated_writes(tg, tg.tensor(x - h * e)).numpy()) / (2 * h)
                   for e in np.eye(5)], 1)
    assert_covers(pattern, np.abs(fd) > 1e-8)


def test_reverse_sparse_jacobian_through_a_repeated_write_is_pytorchs():
    # row 0 is the last of two writes (of v[1] and v[2]) and row 1 reads v[1] apart from it:
    # had the pattern left out the overwritten v[1], both rows would share one reverse
    # sweep, which adds row 0's gradient for v[1] into row 1's entry
    torch = pytest.importorskip("torch")

    def f(v, m=tg):
        y = v[:3] * 1.0
        y[m.tensor([0, 0])] = v[m.tensor([1, 2])]
        return m.stack([y[0], v[1] * 2.0 + v[0] + v[3] + v[4] + v[5]])
    x = np.linspace(0.5, 1.0, 6)
    jac = tg.sparse_jacobian(f)
    got = jac(x).toarray()
    assert jac.last_plan.mode == "reverse"
    want = torch.func.jacrev(lambda v: f(v, torch))(torch.tensor(x)).numpy()
    np.testing.assert_array_equal(got, want)
