"""The torch.linalg names tapegrad lacked -- matmul, diagonal, vander, cond, solve_ex,
cholesky_ex (and inv_ex's singular results), tensorinv, tensorsolve -- and
``autograd.inference_mode``, ``Tensor.apply_`` and ``Tensor.map_``, each compared with
PyTorch: values, dtypes, shapes, ``grad_fn`` names, result-tuple types and fields, input
gradients, and error types and texts."""
import math
import warnings

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

rng = np.random.default_rng(23)
SQUARE = rng.normal(size=(3, 3)) + 2.0 * np.eye(3)
BATCH = rng.normal(size=(2, 3, 3)) + np.diag([2.0, -2.0, 2.0])
TALL = rng.normal(size=(4, 3))
WIDE = rng.normal(size=(2, 5))
RHS = rng.normal(size=(3, 2))
VEC = np.array([0.5, -1.25, 2.0, 1.5])
SPD = SQUARE @ SQUARE.T + np.eye(3)
# not positive-definite at its second leading minor: 4 * (-3) - 2 * 2 < 0
NOT_PD = np.array([[4.0, 2.0, 1.0], [2.0, -3.0, 0.0], [1.0, 0.0, 5.0]])
# singular: its second row is twice the first (an exact zero pivot in LU)
SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]])
# positive-definite read from either triangle, a different matrix from each
LOPSIDED = SPD + np.triu(rng.normal(size=(3, 3)), 1) * 0.5
T4 = rng.normal(size=(2, 3, 6)) + np.eye(6).reshape(2, 3, 6) * 3.0
T_INV = rng.normal(size=(6, 2, 3)) + np.eye(6).reshape(6, 2, 3) * 3.0


def _name(m, t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


def _error(m, e):
    kind = "LinAlgError" if isinstance(e, m.linalg.LinAlgError) else type(e).__name__
    return "error", kind, str(e).replace("tapegrad.", "torch.")


def outcome(m, prog, arrays, backward=True):
    """(values, dtypes, shapes, grad_fn names, tuple type and fields, input gradients) of
    ``prog`` on float64 leaves that require grad, or the error it raised."""
    xs = [m.tensor(a, dtype=m.float64, requires_grad=True) for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            out = prog(m, *xs)
        except (RuntimeError, TypeError, IndexError, ValueError) as e:
            return _error(m, e)
    outs = list(out) if isinstance(out, tuple) else [out]
    kind = (type(out).__name__, getattr(out, "__match_args__", None))
    values = [np.array(t.tolist()) for t in outs]
    dtypes = [str(t.dtype).replace("tapegrad.", "torch.") for t in outs]
    shapes = [tuple(t.shape) for t in outs]
    names = [_name(m, t) for t in outs]
    grads = None
    if backward:
        # a weighted sum that reads every element, so a wrong gradient of any output shows
        total = sum((t * m.tensor(np.cos(np.arange(t.numel())).reshape(tuple(t.shape)))).sum()
                    for t in outs if t.requires_grad)
        if not isinstance(total, int):
            try:
                total.backward()
            except RuntimeError as e:
                # (PyTorch's text ends in a hint, tapegrad's in where the change was made)
                text = str(e).replace("tapegrad.", "torch.")
                return "backward error", text.split(" Hint:")[0].split(" It was modified")[0]
            grads = [None if x.grad is None else np.array(x.grad.tolist()) for x in xs]
    return values, dtypes, shapes, names, kind, grads


def compare(prog, arrays, backward=True, rtol=1e-10, atol=1e-12):
    got = outcome(tg, prog, arrays, backward)
    want = outcome(torch, prog, arrays, backward)
    if isinstance(want[0], str) or isinstance(got[0], str):
        assert got == want
        return
    values, dtypes, shapes, names, kind, grads = got
    assert (dtypes, shapes, names, kind) == want[1:5]
    for a, b in zip(values, want[0]):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    if want[5] is None:
        assert grads is None
        return
    for a, b in zip(grads, want[5]):
        if b is None:
            assert a is None
        else:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-10)


def _deprecated(fn, *args, **kwargs):
    """fn's result, its deprecation warning let pass (PyTorch warns once a process)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


INF = math.inf
PROGRAMS = {
    # matmul: PyTorch's nodes for each pairing of ranks
    "matmul_mm": (lambda m, a, b: m.linalg.matmul(a, b), [SQUARE, RHS]),
    "matmul_mv": (lambda m, a, b: m.linalg.matmul(a, b[:, 0]), [SQUARE, RHS]),
    "matmul_dot": (lambda m, a, b: m.linalg.matmul(a[0], b[:, 0]), [SQUARE, RHS]),
    "matmul_vm": (lambda m, a, b: m.linalg.matmul(b[:, 1], a), [SQUARE, RHS]),
    "matmul_batch": (lambda m, a, b: m.linalg.matmul(a, b), [BATCH, RHS]),
    "matmul_keywords": (lambda m, a, b: m.linalg.matmul(input=a, other=b), [SQUARE, RHS]),
    "matmul_mismatch": (lambda m, a, b: m.linalg.matmul(a, b.T), [SQUARE, RHS]),
    "matmul_0d": (lambda m, a: m.linalg.matmul(a[0, 0], a), [SQUARE]),
    "matmul_list": (lambda m, a: m.linalg.matmul(a, [1.0, 2.0, 3.0]), [SQUARE]),
    "matmul_number": (lambda m, a: m.linalg.matmul(a, 2.0), [SQUARE]),
    # diagonal: the last two dims by default, keywords only
    "diagonal": (lambda m, a: m.linalg.diagonal(a), [BATCH]),
    "diagonal_offset": (lambda m, a: m.linalg.diagonal(a, offset=1), [TALL]),
    "diagonal_below": (lambda m, a: m.linalg.diagonal(a, offset=-2), [TALL]),
    "diagonal_dims": (lambda m, a: m.linalg.diagonal(a, dim1=0, dim2=2), [BATCH]),
    "diagonal_same_dims": (lambda m, a: m.linalg.diagonal(a, dim1=1, dim2=1), [BATCH]),
    "diagonal_vector": (lambda m, a: m.linalg.diagonal(a[0]), [TALL]),
    "diagonal_dim_out": (lambda m, a: m.linalg.diagonal(a, dim1=3), [BATCH]),
    # vander: increasing powers, a column of ones and a cumulative product
    "vander": (lambda m, x: m.linalg.vander(x), [VEC]),
    "vander_N": (lambda m, x: m.linalg.vander(x, N=6), [VEC]),
    "vander_N2": (lambda m, x: m.linalg.vander(x, N=2), [VEC]),
    "vander_batch": (lambda m, x: m.linalg.vander(x), [TALL]),
    "vander_0d": (lambda m, x: m.linalg.vander(x[0], N=3), [VEC]),
    "vander_empty": (lambda m, x: m.linalg.vander(x[:0], N=3), [VEC]),
    "vander_long": (lambda m, x: m.linalg.vander((x * 4).long()), [VEC]),
    "vander_int": (lambda m, x: m.linalg.vander((x * 4).int(), N=3), [VEC]),
    "vander_bool": (lambda m, x: m.linalg.vander(x > 0), [VEC]),
    "vander_N1": (lambda m, x: m.linalg.vander(x, N=1), [VEC]),
    "vander_N0": (lambda m, x: m.linalg.vander(x, N=0), [VEC]),
    "vander_0d_default": (lambda m, x: m.linalg.vander(x[0]), [VEC]),
    "vander_float_N": (lambda m, x: m.linalg.vander(x, N=2.0), [VEC]),
    # cond: singular values, or norms of A and its inverse
    "cond": (lambda m, a: m.linalg.cond(a), [SQUARE]),
    "cond_2": (lambda m, a: m.linalg.cond(a, 2), [BATCH]),
    "cond_minus_2": (lambda m, a: m.linalg.cond(a, -2), [SQUARE]),
    "cond_tall": (lambda m, a: m.linalg.cond(a), [TALL]),
    "cond_wide_minus_2": (lambda m, a: m.linalg.cond(a, -2.0), [WIDE]),
    "cond_fro": (lambda m, a: m.linalg.cond(a, "fro"), [SQUARE]),
    "cond_nuc": (lambda m, a: m.linalg.cond(a, "nuc"), [BATCH]),
    "cond_inf": (lambda m, a: m.linalg.cond(a, INF), [SQUARE]),
    "cond_minus_inf": (lambda m, a: m.linalg.cond(a, -INF), [BATCH]),
    "cond_1": (lambda m, a: m.linalg.cond(a, 1), [SQUARE]),
    "cond_minus_1": (lambda m, a: m.linalg.cond(a, p=-1), [BATCH]),
    "cond_1_float": (lambda m, a: m.linalg.cond(a, 1.0), [SQUARE]),
    "cond_singular_1": (lambda m, a: m.linalg.cond(a, 1), [SINGULAR]),
    "cond_singular_fro": (lambda m, a: m.linalg.cond(a, "fro"), [SINGULAR]),
    "cond_empty": (lambda m, a: m.linalg.cond(a[:0, :0]), [SQUARE]),
    "cond_empty_1": (lambda m, a: m.linalg.cond(a[:, :0, :0], 1), [BATCH]),
    "cond_empty_fro": (lambda m, a: m.linalg.cond(a[:0, :0], "fro"), [SQUARE]),
    "cond_empty_wide": (lambda m, a: m.linalg.cond(a[:, :0, :]), [BATCH]),
    "cond_wide_1": (lambda m, a: m.linalg.cond(a, 1), [WIDE]),
    "cond_wide_1_float": (lambda m, a: m.linalg.cond(a, 1.0), [WIDE]),
    "cond_wide_inf": (lambda m, a: m.linalg.cond(a, INF), [WIDE]),
    "cond_wide_minus_inf": (lambda m, a: m.linalg.cond(a, -INF), [WIDE]),
    "cond_wide_fro": (lambda m, a: m.linalg.cond(a, "fro"), [WIDE]),
    "cond_wide_nuc": (lambda m, a: m.linalg.cond(a, "nuc"), [WIDE]),
    "cond_wide_bad_name": (lambda m, a: m.linalg.cond(a, "abc"), [WIDE]),
    "cond_bad_name": (lambda m, a: m.linalg.cond(a, "abc"), [SQUARE]),
    "cond_3": (lambda m, a: m.linalg.cond(a, 3), [SQUARE]),
    "cond_wide_3_float": (lambda m, a: m.linalg.cond(a, 3.0), [WIDE]),
    "cond_2_5": (lambda m, a: m.linalg.cond(a, 2.5), [SQUARE]),
    "cond_0": (lambda m, a: m.linalg.cond(a, 0), [SQUARE]),
    "cond_nan": (lambda m, a: m.linalg.cond(a, math.nan), [WIDE]),
    "cond_vector": (lambda m, a: m.linalg.cond(a[0]), [SQUARE]),
    "cond_vector_1": (lambda m, a: m.linalg.cond(a[0], 1), [SQUARE]),
    "cond_vector_fro": (lambda m, a: m.linalg.cond(a[0], "fro"), [SQUARE]),
    "cond_long": (lambda m, a: m.linalg.cond(a.long()), [SQUARE]),
    "cond_long_1": (lambda m, a: m.linalg.cond(a.long(), 1), [SQUARE]),
    "cond_long_fro": (lambda m, a: m.linalg.cond(a.long(), "fro"), [SQUARE]),
    "cond_long_nuc": (lambda m, a: m.linalg.cond(a.long(), "nuc"), [SQUARE]),
    # solve_ex and inv_ex: PyTorch's solve and inverse with their info
    "solve_ex": (lambda m, a, b: m.linalg.solve_ex(a, b), [SQUARE, RHS]),
    "solve_ex_vector": (lambda m, a, b: m.linalg.solve_ex(a, b[:, 0]), [BATCH, RHS]),
    "solve_ex_right": (lambda m, a, b: m.linalg.solve_ex(a, b.T, left=False), [SQUARE, RHS]),
    "solve_ex_batch": (lambda m, a, b: m.linalg.solve_ex(a, b), [BATCH, RHS]),
    "solve_ex_broadcast": (lambda m, a, b: m.linalg.solve_ex(a, b.expand(4, 1, 3, 2)),
                           [BATCH, RHS]),
    "solve_ex_check": (lambda m, a, b: m.linalg.solve_ex(a, b, check_errors=True),
                       [SQUARE, RHS]),
    "solve_ex_long": (lambda m, a, b: m.linalg.solve_ex(a.long(), b), [SQUARE, RHS]),
    "solve_ex_long_b": (lambda m, a, b: m.linalg.solve_ex(a, b.long()), [SQUARE, RHS]),
    "solve_ex_shapes": (lambda m, a, b: m.linalg.solve_ex(a, b.T), [SQUARE, RHS]),
    "solve_ex_not_square": (lambda m, a, b: m.linalg.solve_ex(a, b), [TALL, RHS]),
    "solve_ex_list": (lambda m, a: m.linalg.solve_ex(a, [1.0, 2.0, 3.0]), [SQUARE]),
    "inv_ex": (lambda m, a: m.linalg.inv_ex(a), [BATCH]),
    "inv_ex_vector": (lambda m, a: m.linalg.inv_ex(a[0]), [SQUARE]),
    "inv_ex_long": (lambda m, a: m.linalg.inv_ex(a.long()), [SQUARE]),
    "inv_ex_not_square": (lambda m, a: m.linalg.inv_ex(a), [TALL]),
    # cholesky_ex
    "cholesky_ex": (lambda m, a: m.linalg.cholesky_ex(a), [SPD]),
    "cholesky_ex_upper": (lambda m, a: m.linalg.cholesky_ex(a, upper=True), [SPD]),
    "cholesky_ex_check": (lambda m, a: m.linalg.cholesky_ex(a, check_errors=True), [SPD]),
    "cholesky_ex_batch": (lambda m, a: m.linalg.cholesky_ex(a @ a.mT + m.eye(3)), [BATCH]),
    "cholesky_ex_long": (lambda m, a: m.linalg.cholesky_ex(a.long()), [SPD]),
    "cholesky_ex_vector": (lambda m, a: m.linalg.cholesky_ex(a[0]), [SPD]),
    "cholesky_ex_not_square": (lambda m, a: m.linalg.cholesky_ex(a), [TALL]),
    "cholesky_ex_empty": (lambda m, a: m.linalg.cholesky_ex(a[:0, :0]), [SPD]),
    # upper=True reads the upper triangle, as PyTorch's does (the gradient is symmetric)
    "cholesky_upper_triangle": (lambda m, a: m.linalg.cholesky(a, upper=True), [LOPSIDED]),
    "cholesky_lower_triangle": (lambda m, a: m.linalg.cholesky(a), [LOPSIDED]),
    "cholesky_ex_upper_triangle": (lambda m, a: m.linalg.cholesky_ex(a, upper=True),
                                   [LOPSIDED]),
    "cholesky_method_upper_triangle": (lambda m, a: _deprecated(a.cholesky, upper=True),
                                       [LOPSIDED]),
    "cholesky_upper_not_pd": (lambda m, a: m.linalg.cholesky(a, upper=True),
                              [np.array([[4.0, 100.0], [2.0, 5.0]])]),
    # tensorinv and tensorsolve
    "tensorinv": (lambda m, a: m.linalg.tensorinv(a, ind=1), [T_INV]),
    "tensorinv_default": (lambda m, a: m.linalg.tensorinv(a.reshape(2, 3, 3, 2)), [T_INV]),
    "tensorinv_matrix": (lambda m, a: m.linalg.tensorinv(a, 1), [SQUARE]),
    "tensorinv_1x1": (lambda m, a: m.linalg.tensorinv(a[:1, :1], 1), [SQUARE]),
    "tensorinv_ind_0": (lambda m, a: m.linalg.tensorinv(a, ind=0), [T_INV]),
    "tensorinv_ind_negative": (lambda m, a: m.linalg.tensorinv(a, ind=-1), [T_INV]),
    "tensorinv_ind_float": (lambda m, a: m.linalg.tensorinv(a, 2.0), [T_INV]),
    "tensorinv_ind_3": (lambda m, a: m.linalg.tensorinv(a, ind=3), [T_INV]),
    "tensorinv_mismatch": (lambda m, a: m.linalg.tensorinv(a, ind=2), [T_INV]),
    "tensorinv_long": (lambda m, a: m.linalg.tensorinv(a.long(), ind=1), [T_INV]),
    "tensorinv_empty": (lambda m, a: m.linalg.tensorinv(a[:0, :0], 1), [SQUARE]),
    "tensorsolve": (lambda m, a, b: m.linalg.tensorsolve(a, b), [T4, RHS.T]),
    "tensorsolve_vector": (lambda m, a, b: m.linalg.tensorsolve(a, b.reshape(-1)),
                           [T_INV, RHS]),
    "tensorsolve_dims": (lambda m, a, b: m.linalg.tensorsolve(a, b, dims=(0,)),
                         [T_INV, RHS.T]),
    "tensorsolve_dims_list": (lambda m, a, b: m.linalg.tensorsolve(a, b, dims=[0]),
                              [T_INV, RHS.T]),
    "tensorsolve_dims_int": (lambda m, a, b: m.linalg.tensorsolve(a, b, dims=0),
                             [T_INV, RHS.T]),
    "tensorsolve_dims_out": (lambda m, a, b: m.linalg.tensorsolve(a, b, dims=(5,)),
                             [T_INV, RHS.T]),
    "tensorsolve_dims_repeated": (lambda m, a, b: m.linalg.tensorsolve(a, b, dims=(1, 1)),
                                  [T_INV, RHS]),
    "tensorsolve_mismatch": (lambda m, a, b: m.linalg.tensorsolve(a, b[0]), [T_INV, RHS.T]),
    "tensorsolve_long": (lambda m, a, b: m.linalg.tensorsolve(a.long(), b.reshape(-1)),
                         [T_INV, RHS]),
    "tensorsolve_long_b": (lambda m, a, b: m.linalg.tensorsolve(a, b.reshape(-1).long()),
                           [T_INV, RHS]),
}


@pytest.mark.parametrize("case", sorted(PROGRAMS))
def test_matches_pytorch(case):
    prog, arrays = PROGRAMS[case]
    compare(prog, arrays)


# Singular and not positive-definite inputs: info, the values PyTorch's LAPACK leaves (nan
# and inf included) and the errors with check_errors
FAILING = {
    "solve_ex_singular": (lambda m, a, b: m.linalg.solve_ex(a, b), [SINGULAR, RHS]),
    "solve_ex_singular_vector": (lambda m, a, b: m.linalg.solve_ex(a, b[:, 0]),
                                 [SINGULAR, RHS]),
    "solve_ex_singular_right": (lambda m, a, b: m.linalg.solve_ex(a.mT, b.T, left=False),
                                [SINGULAR, RHS]),
    "solve_ex_singular_batch": (
        lambda m, a, b: m.linalg.solve_ex(m.stack([a, a * 0.0 + m.eye(3), a]), b),
        [SINGULAR, RHS]),
    "solve_ex_singular_broadcast": (
        lambda m, a, b: m.linalg.solve_ex(m.stack([m.eye(3), a]), b.expand(4, 1, 3, 2)),
        [SINGULAR, RHS]),
    "solve_ex_singular_check": (lambda m, a, b: m.linalg.solve_ex(a, b, check_errors=True),
                                [SINGULAR, RHS]),
    "solve_ex_singular_batch_check": (
        lambda m, a, b: m.linalg.solve_ex(m.stack([m.eye(3), a]), b, check_errors=True),
        [SINGULAR, RHS]),
    "solve_singular_broadcast": (
        lambda m, a, b: m.linalg.solve(m.stack([m.eye(3), a]), b.expand(2, 2, 3, 2)),
        [SINGULAR, RHS]),
    "inv_ex_singular": (lambda m, a: m.linalg.inv_ex(a), [SINGULAR]),
    "inv_ex_singular_batch": (lambda m, a: m.linalg.inv_ex(m.stack([m.eye(3), a])),
                              [SINGULAR]),
    "inv_ex_singular_check": (lambda m, a: m.linalg.inv_ex(a, check_errors=True),
                              [SINGULAR]),
    "inv_ex_singular_batch_check": (
        lambda m, a: m.linalg.inv_ex(m.stack([m.eye(3), a]), check_errors=True), [SINGULAR]),
    "inv_ex_zero": (lambda m, a: m.linalg.inv_ex(a * 0.0), [SINGULAR]),
    "cholesky_ex_not_pd": (lambda m, a: m.linalg.cholesky_ex(a), [NOT_PD]),
    "cholesky_ex_not_pd_upper": (lambda m, a: m.linalg.cholesky_ex(a, upper=True), [NOT_PD]),
    "cholesky_ex_not_pd_first": (lambda m, a: m.linalg.cholesky_ex(-a), [SPD]),
    "cholesky_ex_not_pd_last": (lambda m, a: m.linalg.cholesky_ex(a - 2.0 * m.eye(3)),
                                [np.diag([4.0, 9.0, 1.0])]),
    "cholesky_ex_not_pd_batch": (
        lambda m, a, b: m.linalg.cholesky_ex(m.stack([b, a, -b])), [NOT_PD, SPD]),
    "cholesky_ex_not_pd_check": (lambda m, a: m.linalg.cholesky_ex(a, check_errors=True),
                                 [NOT_PD]),
    "cholesky_ex_not_pd_batch_check": (
        lambda m, a, b: m.linalg.cholesky_ex(m.stack([b, a]), check_errors=True),
        [NOT_PD, SPD]),
    "cholesky_ex_not_pd_upper_triangle": (lambda m, a: m.linalg.cholesky_ex(a, upper=True),
                                          [np.array([[4.0, 100.0], [2.0, 5.0]])]),
    "cholesky_ex_nan": (lambda m, a: m.linalg.cholesky_ex(a * math.nan), [SPD]),
    "cond_singular_batch": (lambda m, a, b: m.linalg.cond(m.stack([a, b]), -1),
                            [SINGULAR, SQUARE]),
    "cond_zero_inf": (lambda m, a: m.linalg.cond(a * 0.0, INF), [SQUARE]),
    "cond_zero": (lambda m, a: m.linalg.cond(a * 0.0), [SQUARE]),
    "tensorinv_singular": (lambda m, a: m.linalg.tensorinv(a.reshape(3, 3, 1), 1),
                           [SINGULAR]),
    "tensorsolve_singular": (lambda m, a, b: m.linalg.tensorsolve(a, b[:, 0]),
                             [SINGULAR, RHS]),
}


@pytest.mark.parametrize("case", sorted(FAILING))
def test_failing_matrices_match_pytorch(case):
    prog, arrays = FAILING[case]
    compare(prog, arrays, backward=False)


def test_a_singular_matrix_in_a_batch_keeps_the_others_gradients():
    """solve_ex's gradient for an invertible matrix of a batch that holds a singular one
    is PyTorch's; the singular one's is not finite."""
    def run(m):
        a = m.tensor(np.stack([SQUARE, SINGULAR]), requires_grad=True)
        b = m.tensor(RHS, requires_grad=True)
        x = m.linalg.solve_ex(a, b).result
        (x[0] * m.tensor(np.cos(np.arange(6)).reshape(3, 2))).sum().backward()
        return a.grad.numpy(), b.grad.numpy()
    (ga, gb), (wa, wb) = run(tg), run(torch)
    np.testing.assert_allclose(ga[0], wa[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gb, wb, rtol=1e-10, atol=1e-12)


def test_keyword_only_arguments_refuse_positions():
    """(PyTorch's text names linalg_diagonal(), tapegrad's Python's diagonal(): see the
    report)"""
    for m in (tg, torch):
        with pytest.raises(TypeError, match="takes 1 positional argument but 2 were given"):
            m.linalg.diagonal(m.ones(2, 2), 1)
        with pytest.raises(TypeError, match="takes 1 positional argument but 2 were given"):
            m.linalg.vander(m.ones(2), 3)


def test_cond_through_the_inverse_has_pytorchs_gradient_where_it_has_one():
    """PyTorch's backward through cond with 1, inf, 'fro' ... refuses (its in-place fill of
    the inverse, matched above); with the fill's node left out, tapegrad's composite gives
    the gradient of norm(A) * norm(inv(A)): checked against PyTorch's of that product."""
    for p in ("fro", 1, -INF):
        a_tg = tg.tensor(BATCH, requires_grad=True)
        a_pt = torch.tensor(BATCH, requires_grad=True)
        for m, a in ((tg, a_tg), (torch, a_pt)):
            (m.linalg.matrix_norm(a, p) * m.linalg.matrix_norm(m.linalg.inv(a), p)).sum() \
                .backward()
        got = tg.linalg.cond(tg.tensor(BATCH), p).numpy()
        want = torch.linalg.cond(torch.tensor(BATCH), p).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12)
        np.testing.assert_allclose(a_tg.grad.numpy(), a_pt.grad.numpy(), rtol=1e-10)


def test_a_compiled_upper_cholesky_reads_the_upper_triangle():
    f = tg.compile(lambda a: tg.linalg.cholesky(a, upper=True) * 2.0)
    for scale in (1.0, 2.0, 3.0):
        got = f(tg.tensor(LOPSIDED * scale)).numpy()
        want = torch.linalg.cholesky(torch.tensor(LOPSIDED * scale), upper=True) * 2.0
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-12)


def test_cond_values_are_numpys_condition_numbers():
    for p in (None, 2, -2, "fro", "nuc", INF, -INF, 1, -1):
        got = tg.linalg.cond(tg.tensor(BATCH), p).numpy()
        np.testing.assert_allclose(got, np.linalg.cond(BATCH, p), rtol=1e-12)


def test_the_names_are_public():
    for name in ("matmul", "diagonal", "vander", "cond", "solve_ex", "cholesky_ex", "inv_ex",
                 "tensorinv", "tensorsolve"):
        assert name in tg.linalg.__all__ and name in dir(tg.linalg)
        assert callable(getattr(tg.linalg, name))
    assert tg.linalg.solve_ex.__module__ == "tapegrad.linalg"


def test_result_tuples_pickle_and_print_as_pytorchs():
    import pickle
    r = tg.linalg.cholesky_ex(tg.tensor(NOT_PD))
    assert pickle.loads(pickle.dumps(r)).info.item() == 2
    want = repr(torch.linalg.cholesky_ex(torch.tensor(NOT_PD, dtype=torch.float32)))
    got = repr(r).replace("tapegrad.", "torch.")
    assert got.splitlines()[0] == want.splitlines()[0]
    assert r.info.dtype == tg.int32 and r.L is r[0]


# ---- autograd.inference_mode -------------------------------------------------------------
def test_inference_mode_is_reachable_where_pytorch_has_it():
    assert tg.autograd.inference_mode is tg.inference_mode
    assert tg.autograd.grad_mode.inference_mode is tg.inference_mode
    assert "inference_mode" in dir(tg.autograd)
    from tapegrad.autograd import inference_mode
    x = tg.tensor([1.0], requires_grad=True)
    with inference_mode():
        assert not (x * 2.0).requires_grad
    assert (x * 2.0).requires_grad


# ---- Tensor.apply_ and Tensor.map_ ---------------------------------------------------------
def _double(v):
    return v * 2.0 + len(type(v).__name__)      # (the type's name: floats arrive as float)


ELEMENTWISE = {
    "apply": lambda m: m.tensor([1.0, 2.0, 3.0], dtype=m.float64).apply_(_double),
    "apply_matrix": lambda m: m.tensor(TALL).apply_(lambda v: v ** 2),
    "apply_view": lambda m: m.tensor(TALL).t().apply_(lambda v: -v),
    "apply_long": lambda m: m.tensor([1, 2, -3]).apply_(lambda v: v / 2),
    "apply_long_type": lambda m: m.tensor([1, 2]).apply_(lambda v: len(type(v).__name__)),
    "apply_bool": lambda m: m.tensor([True, False]).apply_(lambda v: not v),
    "apply_bool_answer": lambda m: m.tensor([1.0, 2.0]).apply_(lambda v: v > 1.5),
    "apply_tensor_answer": lambda m: m.tensor([1.0, 2.0]).apply_(lambda v: m.tensor(5.0)),
    "apply_0d": lambda m: m.tensor(2.0).apply_(lambda v: v + 1),
    "apply_empty": lambda m: m.zeros(0).apply_(lambda v: 1 / 0),
    "apply_str": lambda m: m.tensor([1.0, 2.0]).apply_(lambda v: "a"),
    "apply_none": lambda m: m.tensor([1.0, 2.0]).apply_(lambda v: None),
    "apply_not_callable": lambda m: m.tensor([1.0, 2.0]).apply_(3),
    "apply_requires_grad": lambda m: m.tensor([1.0], requires_grad=True).apply_(abs),
    "apply_non_leaf": lambda m: (m.tensor([1.0], requires_grad=True) * 2).apply_(abs),
    "apply_detached": lambda m: m.tensor([1.0], requires_grad=True).detach().apply_(
        lambda v: v + 3),
    "map": lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]]).map_(
        m.tensor([10.0, 20.0]), lambda a, b: a * b + len(type(b).__name__)),
    "map_same_shape": lambda m: m.tensor(TALL).map_(m.tensor(TALL * 3), lambda a, b: a - b),
    "map_long": lambda m: m.tensor([1, 2]).map_(m.tensor([1, 2]), lambda a, b: a * 1.7),
    "map_dtype": lambda m: m.tensor([1.0, 2.0]).map_(m.tensor([1, 2]), lambda a, b: a),
    "map_dtype_long": lambda m: m.tensor([1, 2]).map_(m.tensor([0.5, 0.5]), lambda a, b: a),
    "map_shape": lambda m: m.tensor([1.0, 2.0, 3.0]).map_(m.ones(2), lambda a, b: a),
    "map_rank": lambda m: m.tensor([1.0, 2.0, 3.0]).map_(m.ones(3, 1), lambda a, b: a),
    "map_bigger": lambda m: m.ones(1).map_(m.tensor([1.0, 2.0, 3.0]), lambda a, b: a),
    "map_list": lambda m: m.tensor([1.0, 2.0]).map_([1.0, 2.0], lambda a, b: a),
    "map_requires_grad": lambda m: m.tensor([1.0], requires_grad=True).map_(
        m.ones(1), lambda a, b: a),
    "map_other_requires_grad": lambda m: m.tensor([1.0]).map_(
        m.ones(1, requires_grad=True), lambda a, b: a),
}


@pytest.mark.parametrize("case", sorted(ELEMENTWISE))
def test_elementwise_methods_match_pytorch(case):
    def run(m):
        try:
            t = ELEMENTWISE[case](m)
        except (RuntimeError, TypeError, ZeroDivisionError) as e:
            return _error(m, e)
        return t.tolist(), str(t.dtype).replace("tapegrad.", "torch."), t.requires_grad
    got, want = run(tg), run(torch)
    if got[0] != "error" and want[0] != "error":
        np.testing.assert_allclose(np.array(got[0], dtype=float),
                                   np.array(want[0], dtype=float), rtol=1e-15)
        assert got[1:] == want[1:]
    else:
        assert got == want


def test_apply_writes_in_order_and_keeps_what_was_done_before_an_error():
    def run(m):
        x = m.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=m.float64)
        seen = []
        x.t().apply_(lambda v: seen.append(v) or v)
        y = m.tensor([1.0, 2.0, 3.0], dtype=m.float64)
        with pytest.raises(ZeroDivisionError):
            y.apply_(lambda v: 1 / (v - 2))
        return seen, y.tolist()
    assert run(tg) == run(torch)


def test_apply_through_a_view_reaches_the_base_and_is_counted():
    x = tg.tensor([1.0, 2.0, 3.0, 4.0])
    before = x._version
    x[1:3].apply_(lambda v: v * 10)
    assert x.tolist() == [1.0, 20.0, 30.0, 4.0]
    assert x._version > before       # (PyTorch does not count it: see the report)


def test_a_value_saved_for_backward_that_apply_changes_is_caught():
    """w * x saves x for w's gradient: changing x in place afterwards is counted, and the
    backward refuses.  (PyTorch's apply_ counts no version: its backward silently reads
    the new values, a gradient of [103, 104] here; see the report.)"""
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    x = tg.tensor([3.0, 4.0])
    y = (w * x).sum()
    x.apply_(lambda v: v + 100.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*is at version "
                                           "1; expected version 0"):
        y.backward()
    z = tg.tensor([3.0, 4.0])
    y = (w * z).sum()
    z.map_(tg.ones(2), lambda a, b: a + b)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_map_reads_the_other_tensors_elements_broadcast():
    x = tg.zeros(2, 3)
    x.map_(tg.tensor([1.0, 2.0, 3.0]), lambda a, b: a + b)
    assert x.tolist() == [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]


def test_apply_under_no_grad_still_refuses_a_tensor_that_requires_grad():
    x = tg.tensor([1.0], requires_grad=True)
    with tg.no_grad(), pytest.raises(RuntimeError, match="Can't call apply_"):
        x.apply_(abs)
