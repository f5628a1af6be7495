"""tapegrad.linalg against PyTorch: values, gradients, node names, second order, forward
mode, compiled replay and error texts, on fixed inputs (the hypothesis properties of the
ops are the ``linalg_*`` cases of ``op_cases``)."""
import math
import warnings

import numpy as np
import pytest

import strategies  # noqa: F401 - makes the source tree importable
import tapegrad as tg

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(16)
A3 = RNG.standard_normal((3, 3)) + 3.0 * np.eye(3)
AB = RNG.standard_normal((2, 3, 3)) + np.diag([3.0, -3.0, 3.0])
B32 = RNG.standard_normal((3, 2))
SPD = A3 @ A3.T + np.eye(3)
TALL = RNG.standard_normal((2, 5, 3))
WIDE = RNG.standard_normal((3, 5))
LOW_RANK = RNG.standard_normal((5, 2)) @ RNG.standard_normal((2, 4))    # rank 2
# singular values 2, 2, 2: repeated (an SVD's vectors are not unique; A^+ is)
REPEATED = 2.0 * np.linalg.qr(RNG.standard_normal((5, 3)))[0]
B52 = RNG.standard_normal((5, 2))


def both(fn, *arrays, rg=None):
    """fn on leaves of both libraries; returns ((tapegrad leaves, out), (torch leaves, out))."""
    rg = rg or (True,) * len(arrays)
    tl = [tg.tensor(a, requires_grad=f) for a, f in zip(arrays, rg)]
    pl = [torch.tensor(a, requires_grad=f) for a, f in zip(arrays, rg)]
    return (tl, fn(tg, *tl)), (pl, fn(torch, *pl))


def close(a, b, rtol=1e-10, atol=1e-12):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


def check_against_torch(fn, *arrays, rg=None):
    (tl, to), (pl, po) = both(fn, *arrays, rg=rg)
    close(to, po)
    assert type(to.grad_fn).__name__ == type(po.grad_fn).__name__
    cot = RNG.standard_normal(tuple(po.shape))
    to.backward(tg.tensor(cot))
    po.backward(torch.tensor(cot))
    for a, b in zip(tl, pl):
        if b.grad is None:
            assert a.grad is None
        else:
            close(a.grad, b.grad)


CALLS = {
    "inv": (lambda m, a: m.linalg.inv(a), [AB]),
    "inverse": (lambda m, a: m.inverse(a), [A3]),
    "inverse method": (lambda m, a: a.inverse(), [A3]),
    "solve": (lambda m, a, b: m.linalg.solve(a, b), [A3, B32]),
    "solve batch broadcast": (lambda m, a, b: m.linalg.solve(a, b), [AB, B32]),
    "solve vector": (lambda m, a, b: m.linalg.solve(a, b), [AB, B32[:, 0]]),
    "solve batched vectors": (lambda m, a, b: m.linalg.solve(a, b), [AB, AB[:, :, 0]]),
    "solve right": (lambda m, a, b: m.linalg.solve(a, b, left=False), [AB, B32.T[None]]),
    "det": (lambda m, a: m.linalg.det(a), [AB]),
    "det top": (lambda m, a: m.det(a), [A3]),
    "det method": (lambda m, a: a.det(), [AB]),
    "slogdet": (lambda m, a: m.linalg.slogdet(a).logabsdet, [AB]),
    "slogdet top": (lambda m, a: m.slogdet(a)[1], [A3]),
    "slogdet method": (lambda m, a: a.slogdet().logabsdet, [AB]),
    "logdet": (lambda m, a: m.logdet(a @ a.mT), [AB]),
    "logdet method": (lambda m, a: (a @ a.mT).logdet(), [A3]),
    "cholesky": (lambda m, a: m.linalg.cholesky(a @ a.mT + m.eye(3, dtype=a.dtype)), [AB]),
    "cholesky upper": (lambda m, a: m.linalg.cholesky(a @ a.mT, upper=True), [A3]),
    "cross": (lambda m, a, b: m.linalg.cross(a, b), [AB, A3[None]]),
    "cross dim": (lambda m, a, b: m.linalg.cross(a, b, dim=1), [AB, AB[::-1].copy()]),
    "cross top": (lambda m, a, b: m.cross(a, b, dim=0), [A3, A3.T.copy()]),
    "cross method": (lambda m, a, b: a.cross(b, dim=-1), [A3, B32[:1, :1] * A3]),
    "vector_norm": (lambda m, a: m.linalg.vector_norm(a), [AB]),
    "vector_norm ord dim": (lambda m, a: m.linalg.vector_norm(a, 3, (0, 2), True), [AB]),
    "vector_norm inf": (lambda m, a: m.linalg.vector_norm(a, float("inf"), -1), [AB]),
    "matrix_norm": (lambda m, a: m.linalg.matrix_norm(a), [AB]),
    "matrix_norm 1": (lambda m, a: m.linalg.matrix_norm(a, 1), [AB]),
    "matrix_norm -1": (lambda m, a: m.linalg.matrix_norm(a, -1, keepdim=True), [AB]),
    "matrix_norm inf": (lambda m, a: m.linalg.matrix_norm(a, float("inf"), (0, 2)), [AB]),
    "matrix_norm -inf": (lambda m, a: m.linalg.matrix_norm(a, -float("inf")), [AB]),
    "norm": (lambda m, a: m.linalg.norm(a), [AB]),
    "norm vector ord": (lambda m, a: m.linalg.norm(a[0, 0], 1), [AB]),
    "norm matrix ord": (lambda m, a: m.linalg.norm(a, "fro"), [A3]),
    "norm dim": (lambda m, a: m.linalg.norm(a, dim=(1, 2)), [AB]),
    "vecdot": (lambda m, a, b: m.linalg.vecdot(a, b), [AB, A3]),
    "multi_dot": (lambda m, a, b: m.linalg.multi_dot([a, b, b.T]), [A3, B32]),
    "multi_dot vectors": (lambda m, a, b: m.linalg.multi_dot([a[0], a, b]), [A3, B32]),
    "matrix_power": (lambda m, a: m.linalg.matrix_power(a, 3), [AB]),
    "matrix_power -2": (lambda m, a: m.linalg.matrix_power(a, -2), [A3]),
    "matrix_power 1": (lambda m, a: m.linalg.matrix_power(a, 1) * 2, [A3]),
    # the decompositions: eigen- and singular vectors through functions of them that do not
    # depend on their signs; A is not symmetric (PyTorch's gradient is symmetric all the same)
    "eigvalsh": (lambda m, a: m.linalg.eigvalsh(a), [AB]),
    "eigvalsh upper": (lambda m, a: m.linalg.eigvalsh(a, UPLO="U"), [AB]),
    "eigh eigenvalues": (lambda m, a: m.linalg.eigh(a).eigenvalues, [A3]),
    "eigh vectors": (lambda m, a: (lambda r: r.eigenvectors ** 2 * r.eigenvalues.unsqueeze(-2))(
        m.linalg.eigh(a)), [AB]),
    "eigh rebuilt upper": (lambda m, a: (lambda r: (r.eigenvectors * r.eigenvalues.unsqueeze(-2))
                                         @ r.eigenvectors.mT)(m.linalg.eigh(a, UPLO="U")), [AB]),
    "svdvals": (lambda m, a: m.linalg.svdvals(a), [AB]),
    "svdvals tall": (lambda m, a: m.linalg.svdvals(a), [B32]),
    "svd rebuilt": (lambda m, a: (lambda r: (r.U * r.S.unsqueeze(-2)) @ r.Vh)(
        m.linalg.svd(a, full_matrices=False)), [AB]),
    "svd vectors": (lambda m, a: (lambda r: r.U ** 3 * r.U + r.Vh.mT ** 4 * r.S.unsqueeze(-2))(
        m.linalg.svd(a)), [AB]),
    "svd tall U": (lambda m, a: m.linalg.svd(a, full_matrices=False).U ** 2, [B32]),
    "svd tall full U": (lambda m, a: m.linalg.svd(a).U[:, :2] ** 2, [B32]),
    "svd wide Vh": (lambda m, a: m.linalg.svd(a, full_matrices=False).Vh ** 2, [B32.T.copy()]),
    "svd wide full Vh": (lambda m, a: m.linalg.svd(a).Vh[:2] ** 2, [B32.T.copy()]),
    "qr Q": (lambda m, a: m.linalg.qr(a).Q, [AB]),
    "qr R": (lambda m, a: m.linalg.qr(a).R, [AB]),
    "qr tall": (lambda m, a: (lambda r: r.Q ** 2 @ r.R)(m.linalg.qr(a)), [B32]),
    "qr wide": (lambda m, a: (lambda r: r.Q.mT @ r.R ** 3)(m.linalg.qr(a)), [B32.T.copy()]),
    "qr wide complete": (lambda m, a: m.linalg.qr(a, mode="complete").R, [B32.T.copy()]),
    "matrix_norm 2": (lambda m, a: m.linalg.matrix_norm(a, 2), [AB]),
    "matrix_norm -2 dim": (lambda m, a: m.linalg.matrix_norm(a, -2, (0, 2)), [AB]),
    "matrix_norm nuc keepdim": (lambda m, a: m.linalg.matrix_norm(a, "nuc", (2, 0), True),
                                [AB]),
    "norm 2": (lambda m, a: m.linalg.norm(a, 2), [A3]),
    # triangular solves, pseudo-inverses, least squares, matrix exponentials
    "solve_triangular upper": (lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True),
                               [A3, B32]),
    "solve_triangular lower batch broadcast": (
        lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False), [AB, B32]),
    "solve_triangular right": (lambda m, a, b: m.linalg.solve_triangular(
        a, b, upper=True, left=False), [AB, B32.T[None].copy()]),
    "solve_triangular unitriangular": (lambda m, a, b: m.linalg.solve_triangular(
        a, b, upper=False, unitriangular=True), [A3, B32]),
    "solve_triangular right unit upper": (lambda m, a, b: m.linalg.solve_triangular(
        a, b, upper=True, left=False, unitriangular=True), [AB, B32.T.copy()]),
    "solve_triangular 1x1": (lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True),
                             [A3[:1, :1] + 1.0, B32[:1]]),
    "pinv tall batch": (lambda m, a: m.linalg.pinv(a), [TALL]),
    "pinv wide": (lambda m, a: m.linalg.pinv(a), [WIDE]),
    "pinv square": (lambda m, a: m.linalg.pinv(a), [AB]),
    "pinv rank-deficient": (lambda m, a: m.linalg.pinv(a), [LOW_RANK]),
    "pinv rank-deficient wide": (lambda m, a: m.linalg.pinv(a), [LOW_RANK.T.copy()]),
    "pinv repeated singular values": (lambda m, a: m.linalg.pinv(a), [REPEATED]),
    "pinv hermitian": (lambda m, a: m.linalg.pinv(a, hermitian=True), [SPD]),
    "pinv rtol": (lambda m, a: m.linalg.pinv(a, rtol=0.4), [TALL]),
    "pinv atol": (lambda m, a: m.linalg.pinv(a, atol=1.5), [TALL]),
    "pinv 1x1": (lambda m, a: m.linalg.pinv(a), [A3[:1, :1]]),
    "pinverse": (lambda m, a: m.pinverse(a), [WIDE]),
    "pinverse rcond": (lambda m, a: m.pinverse(a, rcond=0.3), [LOW_RANK]),
    "pinverse method": (lambda m, a: a.pinverse(), [TALL]),
    "matrix_exp": (lambda m, a: m.linalg.matrix_exp(a), [AB]),
    "matrix_exp large norm": (lambda m, a: m.linalg.matrix_exp(3.0 * a), [A3]),
    "matrix_exp small norm": (lambda m, a: m.linalg.matrix_exp(1e-3 * a), [A3]),
    "matrix_exp top": (lambda m, a: m.matrix_exp(a), [A3]),
    "matrix_exp method": (lambda m, a: a.matrix_exp(), [AB]),
    "matrix_exp 1x1": (lambda m, a: m.linalg.matrix_exp(a), [A3[:1, :1]]),
    "lstsq tall": (lambda m, a, b: m.linalg.lstsq(a, b).solution, [TALL, B52[None]]),
    "lstsq wide": (lambda m, a, b: m.linalg.lstsq(a, b).solution, [WIDE, B32]),
    "lstsq square": (lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd").solution,
                     [AB, B32[None]]),
    "lstsq vector": (lambda m, a, b: m.linalg.lstsq(a, b).solution, [TALL, TALL[:, :, 0]]),
    "lstsq rank-deficient": (lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd").solution,
                             [LOW_RANK, B52]),
    "lstsq gels": (lambda m, a, b: m.linalg.lstsq(a, b, driver="gels").solution,
                   [TALL, B52[None]]),
    "lstsq gelss wide": (lambda m, a, b: m.linalg.lstsq(a, b, driver="gelss").solution,
                         [WIDE, B32]),
    "lstsq residuals": (lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd").residuals,
                        [TALL, B52[None]]),
    "lstsq residuals gels vector": (
        lambda m, a, b: m.linalg.lstsq(a, b, driver="gels").residuals, [TALL[0], B52[:, 0]]),
    "lstsq residuals gelss": (lambda m, a, b: m.linalg.lstsq(a, b, driver="gelss").residuals,
                              [TALL, B52[None]]),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_values_gradients_and_names_match_pytorch(name):
    fn, arrays = CALLS[name]
    check_against_torch(fn, *arrays)


def test_solve_with_one_operand_requiring_grad():
    for rg in ((True, False), (False, True)):
        check_against_torch(lambda m, a, b: m.linalg.solve(a, b), AB, B32, rg=rg)
        check_against_torch(lambda m, a, b: m.linalg.cross(a, b), AB, A3[None], rg=rg)


def test_slogdet_sign_and_result_types():
    (_, to), (_, po) = both(lambda m, a: m.linalg.slogdet(a), AB)
    close(to.sign, po.sign)
    assert type(to).__name__ == type(po).__name__ == "linalg_slogdet"
    assert type(to.sign.grad_fn).__name__ == "LinalgSlogdetBackward0"
    (_, to), (_, po) = both(lambda m, a: m.slogdet(a), A3)
    assert type(to).__name__ == type(po).__name__ == "slogdet"


def test_logdet_of_negative_and_singular_matrices():
    neg = np.diag([1.0, -2.0])
    for a in (neg, np.zeros((2, 2))):
        close(tg.logdet(tg.tensor(a)), torch.logdet(torch.tensor(a)))


@pytest.mark.parametrize("case", ["diag", "triangular", "integer", "permuted", "batch"])
def test_det_is_exact_where_pytorchs_is(case):
    # PyTorch multiplies LU's diagonal; NumPy's det went through log|det| and exp, so det of
    # 2 I printed tensor(7.999999999999998) and det([[1, 2], [3, 4]]) -2.0000000000000004
    a = {"diag": np.eye(3) * 2.0,
         "triangular": np.array([[2.0, 5.0, 1.0], [0.0, -3.0, 7.0], [0.0, 0.0, 0.5]]),
         "integer": np.array([[1.0, 2.0], [3.0, 4.0]]),
         "permuted": np.array([[0.0, 0.0, 3.0], [0.0, 2.0, 0.0], [4.0, 0.0, 0.0]]),
         "batch": np.stack([np.eye(4) * 3.0, np.diag([1.0, -1.0, 2.0, 0.5])])}[case]
    want = torch.linalg.det(torch.tensor(a))
    got = tg.linalg.det(tg.tensor(a))
    assert got.tolist() == want.tolist() and repr(got) == repr(want)
    x = tg.tensor(a, requires_grad=True)
    f = tg.compile(lambda x: tg.linalg.det(x) * 1.0)
    for _ in range(3):
        assert f(x).tolist() == want.tolist()     # the compiled rule takes the same product
    assert f.stats.replays > 0


def test_det_of_a_singular_matrix_is_the_cofactor():
    # PyTorch's first backward at an exactly singular matrix returns LU's values (zeros here);
    # tapegrad gives the cofactor, the derivative, which PyTorch's create_graph pass gives
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    x = tg.tensor(a, requires_grad=True)
    tg.linalg.det(x).backward()
    p = torch.tensor(a, requires_grad=True)
    (g,) = torch.autograd.grad(torch.linalg.det(p), p, create_graph=True)
    close(x.grad, g)
    close(x.grad, np.array([[4.0, -2.0], [-2.0, 1.0]]))


def test_deprecated_cholesky_names_its_node_and_warns():
    x = tg.tensor(SPD, requires_grad=True)
    with pytest.warns(UserWarning, match="torch.cholesky is deprecated"):
        out = x.cholesky()
    assert type(out.grad_fn).__name__ == "CholeskyBackward0"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = torch.tensor(SPD, requires_grad=True)
        ref = p.cholesky(upper=True)
        close(tg.cholesky(x, upper=True), ref)


def test_cross_without_dim_takes_the_first_dim_of_size_3():
    a, b = RNG.standard_normal((3, 3)), RNG.standard_normal((3, 3))
    with pytest.warns(UserWarning, match="without specifying the dim"):
        out = tg.cross(tg.tensor(a), tg.tensor(b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        close(out, torch.cross(torch.tensor(a), torch.tensor(b)))


def test_matrix_power_zero_is_identity_with_a_zero_gradient():
    (tl, to), (pl, po) = both(lambda m, a: m.linalg.matrix_power(a, 0), AB)
    close(to, po)
    to.sum().backward()
    po.sum().backward()
    close(tl[0].grad, pl[0].grad)


# ---------------------------------------------------------------------------------------------
# Second order, forward mode, compile, vmap
# ---------------------------------------------------------------------------------------------
SCALARS = {
    "inv": lambda m, x: (m.linalg.inv(x.reshape(3, 3)) ** 2).sum(),
    "solve": lambda m, x: (m.linalg.solve(x.reshape(3, 3), x[:3]) ** 3).sum(),
    "solve right": lambda m, x: m.linalg.solve(x.reshape(3, 3), x[3:6].reshape(1, 3),
                                               left=False).sum() ** 2,
    "det": lambda m, x: m.linalg.det(x.reshape(3, 3)) ** 2,
    "slogdet": lambda m, x: m.linalg.slogdet(x.reshape(3, 3)).logabsdet,
    "cholesky": lambda m, x: (m.linalg.cholesky(
        x.reshape(3, 3) @ x.reshape(3, 3).mT) ** 2).sum(),
    "cholesky upper": lambda m, x: m.linalg.cholesky(
        x.reshape(3, 3) @ x.reshape(3, 3).mT, upper=True)[0].sum() ** 2,
    "cross": lambda m, x: (m.linalg.cross(x[:3], x[3:6]) * x[6:]).sum() ** 2,
    # symmetric matrices: a perturbation of the input is one of the matrix as a whole
    "eigvalsh": lambda m, x: (m.linalg.eigvalsh(x.reshape(3, 3) + x.reshape(3, 3).mT)
                              ** 3).sum(),
    "eigh": lambda m, x: (lambda r: (r.eigenvectors ** 4).sum() + (r.eigenvectors[:, :1]
                                     * r.eigenvalues).sum() ** 2)(
        m.linalg.eigh(x.reshape(3, 3) + x.reshape(3, 3).mT, UPLO="U")),
    "svdvals": lambda m, x: (m.linalg.svdvals(x.reshape(3, 3)) ** 3).sum(),
    "svd": lambda m, x: (lambda r: (r.U ** 4).sum() + (r.Vh ** 4).sum() * r.S[0])(
        m.linalg.svd(x.reshape(3, 3))),
    "svd tall": lambda m, x: (lambda r: (r.U ** 4).sum() + (r.Vh ** 4).sum() * r.S[1])(
        m.linalg.svd(x[:8].reshape(4, 2), full_matrices=False)),
    "svd wide": lambda m, x: (lambda r: (r.U ** 4).sum() + (r.Vh ** 2).sum() * r.S[1])(
        m.linalg.svd(x[1:].reshape(2, 4), full_matrices=False)),
    "qr": lambda m, x: (lambda r: (r.Q ** 3).sum() + (r.R ** 3).sum())(
        m.linalg.qr(x.reshape(3, 3))),
    "qr tall": lambda m, x: (lambda r: (r.Q ** 3).sum() + (r.R ** 3).sum())(
        m.linalg.qr(x[:8].reshape(4, 2))),
    "qr wide": lambda m, x: (lambda r: (r.Q ** 3).sum() + (r.R ** 3).sum())(
        m.linalg.qr(x[1:].reshape(2, 4))),
    "matrix_norm 2": lambda m, x: m.linalg.matrix_norm(x.reshape(3, 3), 2) ** 2,
    "solve_triangular": lambda m, x: (m.linalg.solve_triangular(
        x.reshape(3, 3), x[:3].reshape(3, 1), upper=True) ** 3).sum(),
    "solve_triangular right unit": lambda m, x: m.linalg.solve_triangular(
        x.reshape(3, 3), x[3:6].reshape(1, 3), upper=False, left=False,
        unitriangular=True).sum() ** 2,
    "pinv wide": lambda m, x: (m.linalg.pinv(x[:6].reshape(2, 3)) ** 2).sum(),
    "pinv tall": lambda m, x: (m.linalg.pinv(x[3:].reshape(3, 2)) ** 3).sum(),
    "matrix_exp": lambda m, x: (m.linalg.matrix_exp(x.reshape(3, 3)) ** 2).sum(),
    "lstsq": lambda m, x: (m.linalg.lstsq(x[:6].reshape(3, 2),
                                          x[3:].reshape(3, 2)).solution ** 2).sum(),
    "lstsq residuals": lambda m, x: m.linalg.lstsq(
        x[:6].reshape(3, 2), x[3:].reshape(3, 2), driver="gelsd").residuals.sum() ** 2,
}
X9 = A3.reshape(-1)


@pytest.mark.parametrize("name", sorted(SCALARS))
def test_hessian_matches_pytorch(name):
    fn = SCALARS[name]
    got = tg.hessian(lambda x: fn(tg, x))(tg.tensor(X9))
    want = torch.autograd.functional.hessian(lambda x: fn(torch, x), torch.tensor(X9))
    close(got, want, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", sorted(SCALARS))
def test_create_graph_gradient_of_gradient(name):
    fn = SCALARS[name]
    x = tg.tensor(X9, requires_grad=True)
    (g,) = tg.autograd.grad(fn(tg, x), x, create_graph=True)
    (g * g).sum().backward()
    p = torch.tensor(X9, requires_grad=True)
    (gp,) = torch.autograd.grad(fn(torch, p), p, create_graph=True)
    (gp * gp).sum().backward()
    close(g, gp)
    close(x.grad, p.grad, rtol=1e-8, atol=1e-10)


def test_create_graph_of_det_at_a_singular_matrix_refuses():
    x = tg.tensor(np.array([[1.0, 2.0], [2.0, 4.0]]), requires_grad=True)
    with pytest.raises(NotImplementedError, match="singular"):
        tg.autograd.grad(tg.linalg.det(x), x, create_graph=True)


@pytest.mark.parametrize("name", sorted(SCALARS))
def test_jvp_matches_pytorch(name):
    # of a scalar function the jvp is <grad, t>: PyTorch's gradient is the reference
    fn = SCALARS[name]
    t = RNG.standard_normal(9)
    _, got = tg.jvp(lambda x: fn(tg, x), (tg.tensor(X9),), (tg.tensor(t),))
    p = torch.tensor(X9, requires_grad=True)
    fn(torch, p).backward()
    close(got, (p.grad * torch.tensor(t)).sum(), rtol=1e-9)


JVPS = {
    # PyTorch's forward rules take the direction as given (not symmetrised for eigh)
    "eigvalsh": lambda m, x: m.linalg.eigvalsh(x.reshape(3, 3)),
    "eigh": lambda m, x: (lambda r: r.eigenvectors ** 2 * r.eigenvalues)(
        m.linalg.eigh(x.reshape(3, 3), UPLO="U")),
    "svd": lambda m, x: (lambda r: m.cat([(r.U ** 2).reshape(-1), r.S, (r.Vh ** 2).reshape(-1)]))(
        m.linalg.svd(x.reshape(3, 3))),
    "svd tall full": lambda m, x: (lambda r: m.cat([(r.U[:, :2] ** 2).reshape(-1),
                                                    r.U[:, 2:].reshape(-1) * 0.0 + 1.0]))(
        m.linalg.svd(x[:8].reshape(4, 2))),
    "svd wide full": lambda m, x: m.linalg.svd(x[1:].reshape(2, 4)).Vh[:2] ** 2,
    "qr": lambda m, x: (lambda r: m.cat([r.Q.reshape(-1), r.R.reshape(-1)]))(
        m.linalg.qr(x.reshape(3, 3))),
    "qr wide": lambda m, x: (lambda r: m.cat([r.Q.reshape(-1), r.R.reshape(-1)]))(
        m.linalg.qr(x[1:].reshape(2, 4))),
}


# PyTorch's forward-mode AD scripts a helper with torch.jit on first use, which warns
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("name", sorted(JVPS))
def test_decomposition_jvp_matches_pytorchs_jvp(name):
    fn = JVPS[name]
    t = RNG.standard_normal(9)
    _, got = tg.jvp(lambda x: fn(tg, x), (tg.tensor(X9),), (tg.tensor(t),))
    fw = torch.autograd.forward_ad
    with fw.dual_level():
        want = fw.unpack_dual(fn(torch, fw.make_dual(torch.tensor(X9), torch.tensor(t)))).tangent
    close(got, want, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", sorted(SCALARS))
def test_compiled_replay_on_new_values(name):
    fn = SCALARS[name]
    f = tg.compile(lambda x: fn(tg, x))
    for x in (X9, (A3 + 0.3 * np.eye(3)).reshape(-1)):
        a = tg.tensor(x, requires_grad=True)
        out = f(a)
        out.backward()
        p = torch.tensor(x, requires_grad=True)
        ref = fn(torch, p)
        ref.backward()
        close(out, ref)
        close(a.grad, p.grad, rtol=1e-9)
    assert f.stats.replays == 1


def test_vmap_over_matrices():
    xs = AB.reshape(2, 9)
    got = tg.vmap(lambda x: tg.linalg.det(x.reshape(3, 3)) + tg.linalg.inv(
        x.reshape(3, 3)).sum())(tg.tensor(xs))
    want = torch.vmap(lambda x: torch.linalg.det(x.reshape(3, 3)) + torch.linalg.inv(
        x.reshape(3, 3)).sum())(torch.tensor(xs))
    close(got, want)


# ---------------------------------------------------------------------------------------------
# Errors: the same type and text as PyTorch's
# ---------------------------------------------------------------------------------------------
F64 = dict(dtype=np.float64)
ERRORS = {
    "inv singular": lambda m: m.linalg.inv(m.zeros(2, 2, dtype=m.float64)),
    "inv singular batch": lambda m: m.linalg.inv(m.tensor(np.stack([np.eye(2),
                                                                    np.zeros((2, 2))]))),
    "inv singular second pivot": lambda m: m.linalg.inv(m.tensor([[1.0, 2.0], [2.0, 4.0]],
                                                                 dtype=m.float64)),
    "inv not square": lambda m: m.linalg.inv(m.zeros(3, 2, dtype=m.float64)),
    "inv 1-d": lambda m: m.linalg.inv(m.zeros(3, dtype=m.float64)),
    "inv integer": lambda m: m.linalg.inv(m.ones(3, 3, dtype=m.int64)),
    "det not square": lambda m: m.linalg.det(m.zeros(3, 2, dtype=m.float64)),
    "det integer": lambda m: m.linalg.det(m.ones(3, 3, dtype=m.int64)),
    "slogdet not square": lambda m: m.linalg.slogdet(m.zeros(3, 2, dtype=m.float64)),
    "solve singular": lambda m: m.linalg.solve(m.zeros(2, 2, dtype=m.float64),
                                               m.ones(2, dtype=m.float64)),
    "solve singular batch": lambda m: m.linalg.solve(m.zeros(3, 2, 2, dtype=m.float64),
                                                     m.ones(3, 2, dtype=m.float64)),
    "solve shapes": lambda m: m.linalg.solve(m.eye(3, dtype=m.float64),
                                             m.ones(4, 3, dtype=m.float64)),
    "solve shapes right": lambda m: m.linalg.solve(m.eye(3, dtype=m.float64),
                                                   m.ones(3, dtype=m.float64), left=False),
    "solve right vector": lambda m: m.linalg.solve(m.ones(1, 1, 1, dtype=m.float64),
                                                   m.ones(1, 1, dtype=m.float64), left=False),
    "solve not square": lambda m: m.linalg.solve(m.ones(3, 2, dtype=m.float64),
                                                 m.ones(3, dtype=m.float64)),
    "cholesky not pd": lambda m: m.linalg.cholesky(-m.eye(3, dtype=m.float64)),
    "cholesky not pd order 2": lambda m: m.linalg.cholesky(
        m.tensor([[1.0, 2.0], [3.0, -1.0]], dtype=m.float64), upper=True),
    "cholesky not pd batch": lambda m: m.linalg.cholesky(
        m.tensor(np.stack([np.eye(2), np.diag([1.0, -1.0])]))),
    "cholesky not square": lambda m: m.linalg.cholesky(m.zeros(3, 2, dtype=m.float64)),
    "cross length": lambda m: m.linalg.cross(m.ones(2, 3, dtype=m.float64),
                                             m.ones(2, 2, dtype=m.float64)),
    "cross ndim": lambda m: m.linalg.cross(m.ones(2, 3, dtype=m.float64),
                                           m.ones(3, dtype=m.float64)),
    "cross length 4": lambda m: m.linalg.cross(m.ones(2, 4, dtype=m.float64),
                                               m.ones(2, 4, dtype=m.float64)),
    "matrix_norm order": lambda m: m.linalg.matrix_norm(m.eye(3, dtype=m.float64), 3),
    "matrix_norm 1-d": lambda m: m.linalg.matrix_norm(m.ones(3, dtype=m.float64)),
    "norm 3-d with ord": lambda m: m.linalg.norm(m.ones(2, 2, 2, dtype=m.float64), ord=2),
    "matrix_power not square": lambda m: m.linalg.matrix_power(m.ones(2, 3,
                                                                     dtype=m.float64), 2),
    "multi_dot one": lambda m: m.linalg.multi_dot([m.eye(2, dtype=m.float64)]),
    "trace 3-d": lambda m: m.trace(m.ones(2, 2, 2, dtype=m.float64)),
    "eigh UPLO": lambda m: m.linalg.eigh(m.eye(2, dtype=m.float64), UPLO="X"),
    "eigvalsh not square": lambda m: m.linalg.eigvalsh(m.ones(2, 3, dtype=m.float64)),
    "svd 1-d": lambda m: m.linalg.svd(m.ones(3, dtype=m.float64)),
    "qr mode": lambda m: m.linalg.qr(m.eye(2, dtype=m.float64), mode="full"),
    "qr r backward": lambda m: m.linalg.qr(m.ones(3, 2, dtype=m.float64, requires_grad=True),
                                           mode="r").R.sum().backward(),
    "qr r backward wide": lambda m: m.linalg.qr(
        m.ones(2, 3, dtype=m.float64, requires_grad=True), mode="r").R.sum().backward(),
    "qr complete tall backward": lambda m: m.linalg.qr(
        m.eye(3, 2, dtype=m.float64).requires_grad_(), mode="complete").Q.sum().backward(),
    "solve_triangular not square": lambda m: m.linalg.solve_triangular(
        m.ones(2, 3, dtype=m.float64), m.ones(2, 1, dtype=m.float64), upper=False),
    "solve_triangular B 1-d": lambda m: m.linalg.solve_triangular(
        m.ones(2, 2, dtype=m.float64), m.ones(2, dtype=m.float64), upper=False),
    "solve_triangular A 1-d": lambda m: m.linalg.solve_triangular(
        m.ones(2, dtype=m.float64), m.ones(2, 3, dtype=m.float64), upper=True),
    "solve_triangular shapes": lambda m: m.linalg.solve_triangular(
        m.ones(2, 2, dtype=m.float64), m.ones(3, 1, dtype=m.float64), upper=False),
    "solve_triangular shapes right": lambda m: m.linalg.solve_triangular(
        m.ones(2, 2, dtype=m.float64), m.ones(1, 3, dtype=m.float64), upper=False,
        left=False),
    "solve_triangular integer": lambda m: m.linalg.solve_triangular(
        m.ones(2, 2, dtype=m.int64), m.ones(2, 3, dtype=m.int64), upper=True),
    "solve_triangular batch": lambda m: m.linalg.solve_triangular(
        m.ones(2, 2, 2, dtype=m.float64), m.ones(3, 2, 1, dtype=m.float64), upper=True),
    "pinv 1-d": lambda m: m.linalg.pinv(m.ones(3, dtype=m.float64)),
    "pinv integer": lambda m: m.linalg.pinv(m.ones(3, 3, dtype=m.int64)),
    "pinverse 1-d": lambda m: m.pinverse(m.ones(3, dtype=m.float64)),
    "matrix_exp not square": lambda m: m.linalg.matrix_exp(m.ones(3, 2, dtype=m.float64)),
    "matrix_exp 1-d": lambda m: m.linalg.matrix_exp(m.ones(3, dtype=m.float64)),
    "matrix_exp integer": lambda m: m.linalg.matrix_exp(m.ones(3, 3, dtype=m.int64)),
    "lstsq driver": lambda m: m.linalg.lstsq(m.ones(5, 3, dtype=m.float64),
                                             m.ones(5, 2, dtype=m.float64), driver="foo"),
    "lstsq rows": lambda m: m.linalg.lstsq(m.ones(5, 3, dtype=m.float64),
                                           m.ones(4, 2, dtype=m.float64)),
    "lstsq rows vector": lambda m: m.linalg.lstsq(m.ones(5, 3, dtype=m.float64),
                                                  m.ones(4, dtype=m.float64)),
    "lstsq 1-d": lambda m: m.linalg.lstsq(m.ones(5, dtype=m.float64),
                                          m.ones(5, 2, dtype=m.float64)),
    "lstsq dims": lambda m: m.linalg.lstsq(m.ones(3, 3, dtype=m.float64),
                                           m.ones(2, 3, 3, dtype=m.float64)),
    "lstsq vector of a batch": lambda m: m.linalg.lstsq(m.ones(2, 3, 3, dtype=m.float64),
                                                        m.ones(3, dtype=m.float64)),
    "lstsq batch": lambda m: m.linalg.lstsq(m.ones(2, 3, 3, dtype=m.float64),
                                            m.ones(4, 3, 3, dtype=m.float64)),
    "lstsq integer": lambda m: m.linalg.lstsq(m.ones(3, 3, dtype=m.int64),
                                              m.ones(3, 3, dtype=m.int64)),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_match_pytorch(name):
    with pytest.raises(Exception) as want:
        ERRORS[name](torch)
    with pytest.raises(Exception) as got:
        ERRORS[name](tg)
    assert str(got.value) == str(want.value)
    assert isinstance(got.value, RuntimeError) == isinstance(want.value, RuntimeError)
    assert isinstance(got.value, tg.linalg.LinAlgError) == isinstance(
        want.value, torch.linalg.LinAlgError)


def test_decompositions_are_numpys_values_recorded():
    """Recording leaves the values as NumPy's LAPACK calls give them (signs included)."""
    x = tg.tensor(AB, requires_grad=True)
    w, v = np.linalg.eigh(AB, UPLO="U")
    got = tg.linalg.eigh(x, UPLO="U")
    np.testing.assert_array_equal(got.eigenvalues.detach().numpy(), w)
    np.testing.assert_array_equal(got.eigenvectors.detach().numpy(), v)
    np.testing.assert_array_equal(tg.linalg.eigvalsh(x).detach().numpy(), np.linalg.eigvalsh(AB))
    for full in (True, False):
        for want, t in zip(np.linalg.svd(B32, full_matrices=full),
                           tg.linalg.svd(tg.tensor(B32, requires_grad=True), full)):
            np.testing.assert_array_equal(t.detach().numpy(), want)
    np.testing.assert_array_equal(tg.linalg.svdvals(x).detach().numpy(),
                                  np.linalg.svd(AB, compute_uv=False))
    for mode in ("reduced", "complete"):
        for a in (B32, B32.T):
            for want, t in zip(np.linalg.qr(a, mode=mode),
                               tg.linalg.qr(tg.tensor(a, requires_grad=True), mode)):
                np.testing.assert_array_equal(t.detach().numpy(), want)
    r = tg.linalg.qr(x, mode="r")
    np.testing.assert_array_equal(r.R.detach().numpy(), np.linalg.qr(AB, mode="r"))
    assert tuple(r.Q.shape) == tuple(torch.linalg.qr(torch.tensor(AB), mode="r").Q.shape)


DECOMPOSITIONS = {
    "eigh": lambda m, a: m.linalg.eigh(a),
    "eigh upper": lambda m, a: m.linalg.eigh(a, UPLO="U"),
    "eigvalsh": lambda m, a: (m.linalg.eigvalsh(a),),
    "svd": lambda m, a: m.linalg.svd(a),
    "svd reduced": lambda m, a: m.linalg.svd(a, full_matrices=False),
    "svdvals": lambda m, a: (m.linalg.svdvals(a),),
    "qr": lambda m, a: m.linalg.qr(a),
    "qr complete": lambda m, a: m.linalg.qr(a, mode="complete"),
    "qr r": lambda m, a: m.linalg.qr(a, mode="r"),
}


@pytest.mark.parametrize("name", sorted(DECOMPOSITIONS))
def test_decomposition_outputs_have_pytorchs_node_names_and_shapes(name):
    (_, got), (_, want) = both(DECOMPOSITIONS[name], A3[:, :3] if "svd" not in name and
                               "qr" not in name else B32)
    assert len(got) == len(want)
    for t, p in zip(got, want):
        assert tuple(t.shape) == tuple(p.shape)
        assert type(t.grad_fn).__name__ == type(p.grad_fn).__name__
        assert t.grad_fn.name() == p.grad_fn.name()


def _eigh_loss(m, a):
    r = m.linalg.eigh(a)
    return (r.eigenvectors ** 2 * r.eigenvalues.unsqueeze(-2)).sum() + (
        r.eigenvalues ** 2).sum()


def _svd_loss(m, a):
    r = m.linalg.svd(a, full_matrices=False)
    return (r.U ** 4).sum() + (r.Vh ** 4 * r.S.unsqueeze(-1)).sum() + (r.S ** 3).sum()


def _qr_loss(m, a):
    r = m.linalg.qr(a)
    return (r.Q ** 3).sum() + (r.R ** 3).sum()


def _shaped(shape, apart):
    """Entries in [-0.5, 0.5] and a separating diagonal (see op_cases)."""
    a = RNG.uniform(-0.5, 0.5, shape)
    k = min(shape[-2:])
    idx = np.arange(k)
    a[..., idx, idx] += apart[:k]
    return a


@pytest.mark.parametrize("shape", [(1, 1), (0, 3, 3), (2, 0, 0), (3, 1, 1), (4, 4), (2, 2, 3, 3),
                                   (5, 5)])
def test_eigh_values_and_gradients_over_shapes_match_pytorch(shape):
    a = _shaped(shape, 6.0 * np.arange(shape[-1]))
    (tl, to), (pl, po) = both(_eigh_loss, a)
    close(to, po)
    to.backward()
    po.backward()
    close(tl[0].grad, pl[0].grad, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("shape", [(1, 1), (0, 2, 3), (2, 0, 3), (2, 3, 0), (3, 1), (1, 3),
                                   (2, 4, 2), (2, 2, 4), (2, 1, 3, 3), (5, 5)])
@pytest.mark.parametrize("loss", ["svd", "qr"])
def test_svd_and_qr_values_and_gradients_over_shapes_match_pytorch(shape, loss):
    a = _shaped(shape, 2.0 + 4.0 * np.arange(min(shape[-2:])))
    fn = _svd_loss if loss == "svd" else _qr_loss
    (tl, to), (pl, po) = both(fn, a)
    close(to, po)
    to.backward()
    po.backward()
    close(tl[0].grad, pl[0].grad, rtol=1e-9, atol=1e-11)


def test_gradients_at_repeated_eigen_and_singular_values_are_pytorchs():
    """Vectors of a repeated eigenvalue (singular value) are not unique: their gradient is
    inf or nan in both libraries, while the values' gradient stays finite."""
    eye = np.eye(3)
    losses = {
        "vectors": lambda m, a: m.linalg.eigh(a).eigenvectors.sum(),
        "vectors unused": lambda m, a: m.linalg.eigh(a).eigenvalues.sum(),
        "singular vectors": lambda m, a: m.linalg.svd(a).U.sum(),
        "singular values": lambda m, a: m.linalg.svdvals(a).sum(),
    }
    for name, fn in losses.items():
        (tl, to), (pl, po) = both(fn, eye)
        to.backward()
        po.backward()
        got, want = tl[0].grad.numpy(), pl[0].grad.numpy()
        np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want), err_msg=name)
        close(got, want)
        assert np.isfinite(got).all() == ("values" in name or "unused" in name), name


def test_decomposition_gradients_match_central_differences():
    def fns(m):
        return [lambda a: _eigh_loss(m, a + a.mT), lambda a: _svd_loss(m, a),
                lambda a: _qr_loss(m, a), lambda a: _svd_loss(m, a[:, :2]),
                lambda a: _qr_loss(m, a[:2])]
    eps = 1e-6
    a0 = A3 + np.diag([0.0, 3.0, 6.0])
    for k, fn in enumerate(fns(tg)):
        x = tg.tensor(a0, requires_grad=True)
        fn(x).backward()
        fd = np.zeros_like(a0)
        for idx in np.ndindex(a0.shape):
            d = np.zeros_like(a0)
            d[idx] = eps
            with tg.no_grad():
                fd[idx] = (fn(tg.tensor(a0 + d)).item() - fn(tg.tensor(a0 - d)).item()) / (2 * eps)
        np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-6, atol=1e-5, err_msg=str(k))


def test_matrix_norm_of_singular_values_has_pytorchs_nodes():
    for o in (2, -2, "nuc"):
        for keepdim in (False, True):
            (_, to), (_, po) = both(lambda m, a: m.linalg.matrix_norm(a, o, keepdim=keepdim), AB)
            close(to, po)
            assert type(to.grad_fn).__name__ == type(po.grad_fn).__name__
    p = torch.tensor(SPD)
    t = tg.tensor(SPD)
    with tg.no_grad():
        close(tg.linalg.matrix_norm(tg.tensor(SPD, requires_grad=True), "nuc"),
              torch.linalg.matrix_norm(p, "nuc"))
    close(tg.linalg.matrix_norm(t, 2), torch.linalg.matrix_norm(p, 2))


def test_compiled_decompositions_replay_each_output():
    """The outputs are records of their own: a compiled function keeps them apart (not
    merged as one record) and replays each on new values."""
    def fn(x):
        a = x.reshape(3, 3)
        r = tg.linalg.eigh(a + a.mT)
        u, s, vh = tg.linalg.svd(a)
        q, rr = tg.linalg.qr(a)
        return ((r.eigenvectors ** 2 * r.eigenvalues).sum() + (u ** 4).sum() + s.sum()
                + (vh ** 3 * vh).sum() + (q ** 3).sum() + (rr ** 2).sum())
    f = tg.compile(fn)
    for x in (X9, (A3 + 0.3 * np.eye(3)).reshape(-1), (A3.T - 0.2).reshape(-1)):
        a = tg.tensor(x, requires_grad=True)
        out = f(a)
        out.backward()
        b = tg.tensor(x, requires_grad=True)
        ref = fn(b)
        ref.backward()
        close(out, ref)
        close(a.grad, b.grad, rtol=1e-9)
    assert f.stats.replays == 2


def test_inv_ex_reports_instead_of_raising():
    got = tg.linalg.inv_ex(tg.tensor(np.stack([np.eye(2), np.zeros((2, 2))])))
    want = torch.linalg.inv_ex(torch.tensor(np.stack([np.eye(2), np.zeros((2, 2))])))
    assert got.info.tolist() == want.info.tolist()
    close(tg.linalg.inv_ex(tg.tensor(A3)).inverse, torch.linalg.inv(torch.tensor(A3)))


def test_second_backward_without_retain_graph_fails_as_in_pytorch():
    errors = []
    for m in (tg, torch):
        x = m.tensor(A3, requires_grad=True)
        y = m.linalg.det(x)
        y.backward()
        try:
            y.backward()
        except RuntimeError as e:
            errors.append(str(e).replace("torch.", "tapegrad."))
    assert len(errors) == 2 and errors[0] == errors[1]


def test_dir_lists_the_public_names():
    assert "solve" in dir(tg.linalg) and "LinAlgError" in dir(tg.linalg)
    assert "linalg" in dir(tg)
    assert math.isclose(float(tg.linalg.det(tg.eye(2))), 1.0)


@pytest.mark.parametrize("call", ["inv", "solve", "cholesky"])
def test_compiled_call_on_a_failing_matrix_raises_as_eager(call):
    """The replayed op cannot raise: it gives nan, a guard sees it, and the call runs eagerly,
    which raises PyTorch's error (not a stale or silent result)."""
    fns = {"inv": lambda a: tg.linalg.inv(a).sum(),
           "solve": lambda a: tg.linalg.solve(a, tg.ones(2)).sum(),
           "cholesky": lambda a: tg.linalg.cholesky(a).sum()}
    f = tg.compile(fns[call])
    good = tg.tensor([[2.0, 0.5], [0.5, 1.0]], requires_grad=True)
    f(good).backward()
    np.testing.assert_allclose(f(good)._value, fns[call](good)._value)
    bad = tg.tensor([[1.0, 2.0], [2.0, 4.0]] if call != "cholesky" else [[1.0, 2.0], [2.0, 1.0]],
                    requires_grad=True)
    with pytest.raises(tg.linalg.LinAlgError):
        fns[call](bad)
    with pytest.raises(tg.linalg.LinAlgError):
        f(bad)


def test_saved_tape_with_linalg_ops_loads_and_runs(tmp_path):
    def fn(x, y):
        a = x.reshape(3, 3)
        return (tg.linalg.solve(a, y) ** 2).sum() + tg.linalg.det(a) + tg.linalg.slogdet(
            a).logabsdet + tg.linalg.inv(a).sum() + tg.linalg.cross(a, y.mT).sum() + \
            tg.linalg.cholesky(a @ a.mT, upper=True).sum() + \
            (tg.linalg.eigh(a + a.mT).eigenvectors ** 2).sum() + \
            (tg.linalg.svd(a).U ** 4).sum() + (tg.linalg.qr(a).R ** 2).sum()
    compiled = tg.compile(fn)
    y = RNG.standard_normal((3, 3))
    compiled(tg.tensor(X9, requires_grad=True), tg.tensor(y))
    path = tmp_path / "linalg.tape"
    compiled.tape.save(path)
    loaded = tg.load_tape(path)
    x2 = (A3 + 0.2).reshape(-1)
    got = loaded(tg.tensor(x2), tg.tensor(y))
    want = fn(tg.tensor(x2), tg.tensor(y))
    close(got, want)


# ---------------------------------------------------------------------------------------------
# solve_triangular, pinv, lstsq, matrix_exp: shapes, fields, edge cases
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("driver", [None, "gelsy", "gelsd", "gelss", "gels"])
@pytest.mark.parametrize("shapes", [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((3, 3), (3, 1)),
                                    ((2, 5, 3), (2, 5, 2)), ((1, 4, 2), (3, 4, 1)),
                                    ((5, 3), (5,)), ((2, 4, 3), (2, 4)), ((5, 2), (5, 2)),
                                    ((0, 3), (0, 2)), ((3, 0), (3, 2)), ((0, 0), (0, 2)),
                                    ((0, 4, 2), (1, 4, 1))])
def test_lstsq_fields_match_pytorch(driver, shapes):
    """Which of residuals, rank and singular_values are filled, their shapes and dtypes and
    values, per driver, for tall, wide, square, batched, vector and empty problems; the rank
    of a rank-deficient matrix too (the (5, 2) case is of rank 1)."""
    sa, sb = shapes
    a = RNG.standard_normal(sa)
    if sa == (5, 2):
        a[:, 1] = 2.0 * a[:, 0]
    b = RNG.standard_normal(sb)
    got = tg.linalg.lstsq(tg.tensor(a), tg.tensor(b), driver=driver)
    want = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
    assert type(got).__name__ == type(want).__name__ == "linalg_lstsq"
    assert got._fields == ("solution", "residuals", "rank", "singular_values")
    for g, w, field in zip(got, want, got._fields):
        assert tuple(g.shape) == tuple(w.shape), field
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1], field
        if field in ("solution", "residuals") and sa in ((5, 2), (3, 0)) and driver == "gels":
            continue        # PyTorch's gels assumes full rank (see lstsq's docstring)
        close(g, w, rtol=1e-9, atol=1e-12)


def test_lstsq_rcond_decides_the_rank_as_pytorch():
    a = np.diag([1.0, 1e-3, 1e-8])
    b = np.ones((3, 1))
    for rcond in (None, 1e-5, 1e-2):
        for driver in ("gelsd", "gelss"):
            got = tg.linalg.lstsq(tg.tensor(a), tg.tensor(b), rcond, driver=driver)
            want = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), rcond, driver=driver)
            assert int(got.rank) == int(want.rank)
            close(got.solution, want.solution, rtol=1e-9)


def test_lstsq_node_names_and_results_without_a_gradient():
    a = tg.tensor(TALL, requires_grad=True)
    r = tg.linalg.lstsq(a, tg.tensor(B52[None]), driver="gelsd")
    p = torch.linalg.lstsq(torch.tensor(TALL, requires_grad=True), torch.tensor(B52[None]),
                           driver="gelsd")
    for g, w in zip(r, p):
        assert (g.grad_fn is None) == (w.grad_fn is None)
        if w.grad_fn is not None:
            assert type(g.grad_fn).__name__ == w.grad_fn.name() == "LinalgLstsqBackward0"
    # gelsy's empty residuals are a node of PyTorch's too
    empty = tg.linalg.lstsq(a, tg.tensor(B52[None])).residuals
    assert tuple(empty.shape) == (0,) and type(empty.grad_fn).__name__ == "LinalgLstsqBackward0"
    assert tg.linalg.lstsq(tg.tensor(TALL), tg.tensor(B52[None])).solution.grad_fn is None


def test_lstsq_solution_and_residuals_together():
    (tl, (x, res)), (pl, (xp, resp)) = both(
        lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd")[:2], TALL, B52[None])
    cx, cr = RNG.standard_normal(tuple(xp.shape)), RNG.standard_normal(tuple(resp.shape))
    ((x * tg.tensor(cx)).sum() + (res * tg.tensor(cr)).sum()).backward()
    ((xp * torch.tensor(cx)).sum() + (resp * torch.tensor(cr)).sum()).backward()
    for a, b in zip(tl, pl):
        close(a.grad, b.grad)


@pytest.mark.parametrize("name", ["solve_triangular", "pinv", "matrix_exp", "lstsq"])
@pytest.mark.parametrize("batch", [(0,), (1,), (2, 1)])
def test_batches_including_empty_ones_match_pytorch(name, batch):
    n = 3
    a = RNG.standard_normal(batch + (n, n)) + 3.0 * np.eye(n)
    b = RNG.standard_normal(batch + (n, 2))
    fns = {"solve_triangular": lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True),
           "pinv": lambda m, a, b: m.linalg.pinv(a) @ b,
           "matrix_exp": lambda m, a, b: m.linalg.matrix_exp(a) @ b,
           "lstsq": lambda m, a, b: m.linalg.lstsq(a, b).solution}
    check_against_torch(fns[name], a, b)


@pytest.mark.parametrize("name", ["solve_triangular", "pinv", "matrix_exp", "lstsq"])
def test_empty_matrices_match_pytorch(name):
    fns = {"solve_triangular": (lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False),
                                [np.zeros((2, 0, 0)), np.zeros((2, 0, 3))]),
           "pinv": (lambda m, a: m.linalg.pinv(a), [np.zeros((0, 3))]),
           "matrix_exp": (lambda m, a: m.linalg.matrix_exp(a), [np.zeros((2, 0, 0))]),
           "lstsq": (lambda m, a, b: m.linalg.lstsq(a, b).solution,
                     [np.zeros((0, 3)), np.zeros((0, 2))])}
    fn, arrays = fns[name]
    (tl, to), (pl, po) = both(fn, *arrays)
    close(to, po)
    assert type(to.grad_fn).__name__ == po.grad_fn.name()
    to.sum().backward()
    po.sum().backward()
    for a, b in zip(tl, pl):
        close(a.grad, b.grad)


def test_singular_triangular_matrix_gives_infs_as_pytorch():
    a = np.array([[1.0, 0.0], [2.0, 0.0]])
    got = tg.linalg.solve_triangular(tg.tensor(a), tg.tensor(np.ones((2, 1))), upper=False)
    want = torch.linalg.solve_triangular(torch.tensor(a), torch.ones(2, 1, dtype=torch.float64),
                                         upper=False)
    close(got, want)
    assert np.isinf(got._value[1, 0])


def test_solve_triangular_reads_only_its_triangle():
    noise = np.triu(RNG.standard_normal((3, 3)), 1)
    for unit in (False, True):
        low = np.tril(A3)
        x = tg.linalg.solve_triangular(tg.tensor(low + noise), tg.tensor(B32), upper=False,
                                       unitriangular=unit)
        ref = tg.linalg.solve_triangular(tg.tensor(low), tg.tensor(B32), upper=False,
                                         unitriangular=unit)
        close(x, ref, rtol=0, atol=0)
    a = tg.tensor(A3 + noise, requires_grad=True)
    tg.linalg.solve_triangular(a, tg.tensor(B32), upper=False, unitriangular=True).sum().backward()
    assert np.all(np.triu(a.grad._value) == 0.0)


@pytest.mark.parametrize("name", ["solve_triangular", "solve_triangular right unit",
                                  "pinv wide", "pinv tall", "matrix_exp", "lstsq",
                                  "lstsq residuals"])
def test_solve_pinv_lstsq_exp_gradients_match_central_differences(name):
    x = tg.tensor(X9, requires_grad=True)
    assert tg.testing.gradcheck(lambda t: SCALARS[name](tg, t), x)


def test_pinv_hermitian_reads_the_lower_triangle():
    sym = SPD + np.triu(RNG.standard_normal((3, 3)), 1)
    got = tg.linalg.pinv(tg.tensor(sym), hermitian=True)
    want = torch.linalg.pinv(torch.tensor(sym), hermitian=True)
    close(got, want)


def test_matrix_exp_matches_scipy():
    import scipy.linalg as scipy_linalg   # a core dependency: no skip
    # matrix exponentials are accurate normwise (an entry much smaller than the largest one
    # is compared against the largest).  At norms near 100 scipy's expm and PyTorch's differ
    # by 3e-12 normwise, and tapegrad agrees with PyTorch's to 1e-14
    rng = np.random.default_rng(31)
    for scale in (1e-6, 0.1, 1.0, 10.0, 50.0):
        for _ in range(5):
            a = scale * rng.standard_normal((4, 4))
            got = tg.linalg.matrix_exp(tg.tensor(a))
            torch_value = torch.linalg.matrix_exp(torch.tensor(a)).numpy()
            norm = np.abs(torch_value).max()
            close(got, torch_value, rtol=0, atol=5e-14 * norm)
            close(got, scipy_linalg.expm(a), rtol=0, atol=1e-11 * norm)


def test_vmap_of_the_new_ops():
    xs = AB.reshape(2, 9)

    def fn(m, x):
        a = x.reshape(3, 3)
        return (m.linalg.matrix_exp(0.3 * a).sum() + m.linalg.pinv(a[:2]).sum()
                + m.linalg.solve_triangular(a, a[:, :1], upper=True).sum()
                + m.linalg.lstsq(a[:, :2], a[:, 2:]).solution.sum())
    got = tg.vmap(lambda x: fn(tg, x))(tg.tensor(xs))
    want = torch.vmap(lambda x: fn(torch, x))(torch.tensor(xs))
    close(got, want)


def test_saved_tape_with_the_new_ops_loads_and_runs(tmp_path):
    def fn(x, y):
        a = x.reshape(3, 3)
        return (tg.linalg.solve_triangular(a, y, upper=True, left=False) ** 2).sum() + \
            tg.linalg.pinv(a[:2]).sum() + tg.linalg.matrix_exp(0.5 * a).sum() + \
            tg.linalg.lstsq(a, y.mT, driver="gelsd").solution.sum() + \
            tg.linalg.lstsq(a[:, :2], y[0], driver="gelsd").residuals.sum()
    compiled = tg.compile(fn)
    y = RNG.standard_normal((3, 3))
    compiled(tg.tensor(X9, requires_grad=True), tg.tensor(y))
    path = tmp_path / "linalg_more.tape"
    compiled.tape.save(path)
    loaded = tg.load_tape(path)
    x2 = (A3 + 0.2).reshape(-1)
    close(loaded(tg.tensor(x2), tg.tensor(y)), fn(tg.tensor(x2), tg.tensor(y)))


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("b_shape", [(3, 2), (2, 3, 1)])
def test_cholesky_solve_values_and_gradients_match_torch(upper, b_shape):
    rng = np.random.default_rng(41)
    m = rng.standard_normal((3, 3))
    factor = np.linalg.cholesky(m @ m.T + 3 * np.eye(3))
    factor = factor.T.copy() if upper else factor
    b = rng.standard_normal(b_shape)
    (tl, to), (pl, po) = both(lambda lib, b_, f_: lib.cholesky_solve(b_, f_, upper=upper),
                              b, factor)
    close(to, po, rtol=1e-13)
    # a solve with the product of the factors, shown as PyTorch's one node
    assert to.grad_fn.name() == type(po.grad_fn).__name__ == "CholeskySolveBackward0"
    cot = rng.standard_normal(tuple(po.shape))
    to.backward(tg.tensor(cot))
    po.backward(torch.tensor(cot))
    for a, b_ in zip(tl, pl):
        close(a.grad, b_.grad, rtol=1e-12)


@pytest.mark.parametrize("kwargs", [{}, {"hermitian": True}, {"atol": 0.5}, {"rtol": 0.3},
                                    {"atol": 0.1, "rtol": 0.2}])
def test_matrix_rank_matches_torch(kwargs):
    rng = np.random.default_rng(43)
    low = rng.standard_normal((2, 4, 2)) @ rng.standard_normal((2, 2, 4))
    spread = np.diag([3.0, 1.0, 0.4, 1e-9])
    for a in (low, low @ low.transpose(0, 2, 1), spread, np.zeros((0, 3)), np.zeros((2, 3, 0))):
        if kwargs.get("hermitian") and a.shape[-1] != a.shape[-2]:
            continue
        got = tg.linalg.matrix_rank(tg.tensor(a), **kwargs)
        want = torch.linalg.matrix_rank(torch.tensor(a), **kwargs)
        assert got.dtype == tg.int64 and got.tolist() == want.tolist(), (a.shape, kwargs)
