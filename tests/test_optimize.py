"""tapegrad.optimize: SciPy's optimisers, root finders and stiff integrators fed with compiled
derivatives solve SciPy's documented problems to SciPy's reported solutions."""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.integrate import solve_ivp
from scipy.optimize import least_squares, minimize, rosen, rosen_der, rosen_hess, root

import strategies as S  # noqa: F401 - makes the source tree importable
import tapegrad as tg
from tapegrad.optimize import ODE, Objective, Residual
from test_sparse import bratu_residual


def rosenbrock(v):
    return (100.0 * (v[1:] - v[:-1] ** 2) ** 2 + (1.0 - v[:-1]) ** 2).sum()


X0 = np.array([1.3, 0.7, 0.8, 1.9, 1.2])   # SciPy tutorial's starting point


def test_rosenbrock_callables_match_scipys_own():
    f = Objective(rosenbrock)
    x = np.random.default_rng(0).uniform(-1.0, 2.0, 7)
    assert f.fun(x) == pytest.approx(rosen(x), rel=1e-14)
    np.testing.assert_allclose(f.jac(x), rosen_der(x), rtol=1e-12)
    np.testing.assert_allclose(f.hess(x).toarray(), rosen_hess(x), rtol=1e-12, atol=1e-12)
    p = np.arange(7.0)
    np.testing.assert_allclose(f.hessp(x, p), rosen_hess(x) @ p, rtol=1e-12, atol=1e-10)
    value, grad = f.fun_and_jac(x)
    assert value == f.fun(x) and np.array_equal(grad, f.jac(x))


def test_rosenbrock_newton_cg_with_hessp():
    # the SciPy tutorial's Newton-CG with hessp: the solution [1, 1, 1, 1, 1]
    f = Objective(rosenbrock)
    res = minimize(f.fun, X0, method="Newton-CG", jac=f.jac, hessp=f.hessp,
                   options={"xtol": 1e-8})
    assert res.success
    np.testing.assert_allclose(res.x, np.ones(5), atol=1e-7)


def test_trust_constr_with_the_sparse_hessian_and_jac_true():
    f = Objective(rosenbrock)
    res = minimize(f.fun_and_jac, X0, jac=True, hess=f.hess, method="trust-constr",
                   options={"gtol": 1e-10, "xtol": 1e-12})
    np.testing.assert_allclose(res.x, np.ones(5), atol=1e-6)
    dense = Objective(rosenbrock, sparse=False)
    res = minimize(dense.fun, X0, jac=dense.jac, hess=dense.hess, method="trust-exact")
    # the same iterates as with SciPy's own hand-written derivatives
    scipys = minimize(rosen, X0, jac=rosen_der, hess=rosen_hess, method="trust-exact")
    assert res.nit == scipys.nit
    np.testing.assert_allclose(res.x, scipys.x, rtol=1e-10)


def test_value_and_gradient_come_from_one_replay():
    compiled = tg.compile(rosenbrock)
    f = Objective(compiled)
    x = np.full(5, 0.5)
    f.fun(x)
    calls = compiled.stats.calls
    f.jac(x)                    # the same point: kept from fun
    assert compiled.stats.calls == calls
    f.jac(x + 1.0)
    assert compiled.stats.calls == calls + 1


def test_args_are_passed_on_and_key_the_cache():
    f = Objective(lambda v, a, b: ((v - a) ** 2).sum() * b)
    x = np.zeros(3)
    a = np.array([1.0, 2.0, 3.0])
    assert f.fun(x, a, 2.0) == pytest.approx(28.0)
    np.testing.assert_allclose(f.jac(x, a, 2.0), -4.0 * a)
    np.testing.assert_allclose(f.jac(x, a, 1.0), -2.0 * a)   # other args: not the cached one
    res = minimize(f.fun, x, args=(a, 2.0), jac=f.jac, hess=f.hess, method="Newton-CG")
    np.testing.assert_allclose(res.x, a, atol=1e-8)


def broyden_tridiagonal(x):
    # SciPy's least_squares tutorial: a large sparse system, f_i = (3 - x_i) x_i - x_{i-1}
    # - 2 x_{i+1} + 1 with x_{-1} = x_n = 0
    zero = tg.zeros(1)
    left = tg.cat([zero, x[:-1]])
    right = tg.cat([x[1:], zero])
    return (3.0 - x) * x + 1.0 - left - 2.0 * right


def test_least_squares_with_jac_sparsity_and_with_the_sparse_jacobian():
    n = 200
    r = Residual(broyden_tridiagonal)
    x0 = -np.ones(n)
    pattern = r.jac_sparsity(x0)
    expected = sp.diags([np.ones(n - 1), np.ones(n), np.ones(n - 1)], [-1, 0, 1]).toarray()
    np.testing.assert_array_equal(pattern.toarray(), expected != 0)
    by_differences = least_squares(r.fun, x0, jac_sparsity=pattern, method="trf")
    by_sweeps = least_squares(r.fun, x0, jac=r.jac, method="trf")
    assert by_differences.cost < 1e-20 and by_sweeps.cost < 1e-20
    np.testing.assert_allclose(by_sweeps.x, by_differences.x, atol=1e-9)
    assert sp.issparse(r.jac(x0))
    dense = Residual(broyden_tridiagonal, sparse=False)
    res = least_squares(dense.fun, x0[:20], jac=dense.jac, method="lm")
    assert res.cost < 1e-20


def robertson(t, y):
    return tg.stack([-0.04 * y[0] + 1e4 * y[1] * y[2],
                     0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2,
                     3e7 * y[1] ** 2])


def robertson_numpy(t, y):
    return np.array([-0.04 * y[0] + 1e4 * y[1] * y[2],
                     0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2,
                     3e7 * y[1] ** 2])


@pytest.mark.parametrize("method,sparse", [("Radau", True), ("BDF", True), ("LSODA", False)])
def test_stiff_robertson_matches_finite_differences(method, sparse):
    ode = ODE(robertson, sparse=sparse)
    y = np.array([0.5, 1e-4, 0.3])
    exact = np.array([[-0.04, 1e4 * y[2], 1e4 * y[1]],
                      [0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1]],
                      [0.0, 6e7 * y[1], 0.0]])
    jac = ode.jac(0.0, y)
    np.testing.assert_allclose(jac.toarray() if sparse else jac, exact, rtol=1e-13)
    span, y0 = (0.0, 1e4), [1.0, 0.0, 0.0]
    ours = solve_ivp(ode.fun, span, y0, method=method, jac=ode.jac, rtol=1e-8, atol=1e-10)
    theirs = solve_ivp(robertson_numpy, span, y0, method=method, rtol=1e-8, atol=1e-10)
    assert ours.success and theirs.success
    np.testing.assert_allclose(ours.y[:, -1], theirs.y[:, -1], rtol=1e-5, atol=1e-10)
    np.testing.assert_allclose(ours.y[:, -1].sum(), 1.0, rtol=1e-8)   # mass is conserved


def test_ode_time_reaches_the_function_as_a_tensor():
    seen = []

    def f(t, y):
        seen.append(type(t))
        return -50.0 * (y - t.cos())
    ode = ODE(f)
    sol = solve_ivp(ode.fun, (0.0, 1.0), [0.0], method="Radau", jac=ode.jac)
    assert sol.success and set(seen) == {tg.Tensor}
    np.testing.assert_allclose(ode.jac(0.3, np.array([1.0])).toarray(), [[-50.0]])


def test_bratu_2d_solved_by_root():
    n, lam = 10, 1.0
    r = Residual(bratu_residual(n, lam), sparse=False)
    ours = root(r.fun, np.zeros(n * n), jac=r.jac, method="hybr")
    theirs = root(r.fun, np.zeros(n * n), method="hybr")
    assert ours.success
    assert np.abs(r.fun(ours.x)).max() < 1e-8
    np.testing.assert_allclose(ours.x, theirs.x, atol=1e-7)
    # the lower-branch solution of Bratu is positive and symmetric about the grid's centre
    u = ours.x.reshape(n, n)
    assert u.min() > 0
    np.testing.assert_allclose(u, u.T, atol=1e-10)
    np.testing.assert_allclose(u, u[::-1], atol=1e-10)


@pytest.mark.parametrize("call", [
    lambda: Objective(rosenbrock).fun(np.ones((2, 2))),
    lambda: Residual(lambda v: v).jac(np.ones((2, 2))),
    lambda: Objective(rosenbrock).hessp(np.ones(3), np.ones(2)),
    lambda: Objective(lambda v: v * 2.0).fun(np.ones(3)),
])
def test_bad_input_is_refused(call):
    with pytest.raises(ValueError):
        call()
