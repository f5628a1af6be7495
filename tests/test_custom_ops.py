"""Custom ops made of numba kernels (tapegrad.custom_op): values and gradients against PyTorch
and SciPy, through the backward sweep, compile, vmap, jvp and hessian; errors; tape files.

The ops are the kinds users bring: an elementwise polynomial with a parameter, a two-input
op, a Bessel function by its series, a cubic Hermite spline whose knots are parameters, and
an explicit stencil step whose output is smaller than its input.
"""
import subprocess
import sys

import hypothesis.strategies as st
import numba
import numpy as np
import pytest
import scipy.interpolate
import scipy.special
import torch
from hypothesis import given, settings

import tapegrad as tg
from tapegrad.testing import gradcheck, gradgradcheck


# --- a * x^3 (one input, one parameter), every kernel -------------------------------------
@numba.njit
def cube(x, out, p):
    for i in range(x.size):
        out[i] = p[0] * x[i] ** 3


@numba.njit
def cube_vjp(x, out, g, gx, p):
    for i in range(x.size):
        gx[i] = g[i] * 3.0 * p[0] * x[i] ** 2


@numba.njit
def cube_jvp(x, tx, out, tout, p):
    for i in range(x.size):
        tout[i] = tx[i] * 3.0 * p[0] * x[i] ** 2


@numba.njit
def cube_curvature(x, tx, out, g, gx, p):
    for i in range(x.size):
        gx[i] = g[i] * 6.0 * p[0] * x[i] * tx[i]


CUBE = tg.custom_op("Cube", cube, vjp=cube_vjp, jvp=cube_jvp, curvature=cube_curvature)


# --- sin(x) * y (two inputs) ---------------------------------------------------------------
@numba.njit
def sinmul(x, y, out, p):
    for i in range(x.size):
        out[i] = np.sin(x[i]) * y[i]


@numba.njit
def sinmul_vjp(x, y, out, g, gx, gy, p):
    for i in range(x.size):
        gx[i] = g[i] * np.cos(x[i]) * y[i]
        gy[i] = g[i] * np.sin(x[i])


@numba.njit
def sinmul_jvp(x, y, tx, ty, out, tout, p):
    for i in range(x.size):
        tout[i] = np.cos(x[i]) * y[i] * tx[i] + np.sin(x[i]) * ty[i]


@numba.njit
def sinmul_curvature(x, y, tx, ty, out, g, gx, gy, p):
    for i in range(x.size):
        gx[i] = g[i] * (-np.sin(x[i]) * y[i] * tx[i] + np.cos(x[i]) * ty[i])
        gy[i] = g[i] * np.cos(x[i]) * tx[i]


SINMUL = tg.custom_op("SinMul", sinmul, vjp=sinmul_vjp, jvp=sinmul_jvp,
                      curvature=sinmul_curvature)


# --- J0 by its power series: J0' = -J1, J0'' = J1/x - J0 ---------------------------------
@numba.njit
def _j0_j1(x):
    q = (x / 2.0) ** 2
    term0, term1 = 1.0, x / 2.0
    j0, j1 = term0, term1
    for k in range(1, 60):
        term0 *= -q / (k * k)
        term1 *= -q / (k * (k + 1))
        j0 += term0
        j1 += term1
    return j0, j1


@numba.njit
def bessel_j0(x, out, p):
    for i in range(x.size):
        out[i] = _j0_j1(x[i])[0]


@numba.njit
def bessel_j0_vjp(x, out, g, gx, p):
    for i in range(x.size):
        gx[i] = -g[i] * _j0_j1(x[i])[1]


@numba.njit
def bessel_j0_jvp(x, tx, out, tout, p):
    for i in range(x.size):
        tout[i] = -tx[i] * _j0_j1(x[i])[1]


@numba.njit
def bessel_j0_curvature(x, tx, out, g, gx, p):
    for i in range(x.size):
        j0, j1 = _j0_j1(x[i])
        # J1/x -> 1/2 at 0
        ratio = j1 / x[i] if x[i] != 0.0 else 0.5
        gx[i] = g[i] * (ratio - j0) * tx[i]


J0 = tg.custom_op("BesselJ0", bessel_j0, vjp=bessel_j0_vjp, jvp=bessel_j0_jvp,
                  curvature=bessel_j0_curvature)


# --- a cubic Hermite spline; params = knots, values, slopes (3 m numbers) -----------------
@numba.njit
def _segment(p, v):
    m = p.size // 3
    k = 0
    while k < m - 2 and v >= p[k + 1]:
        k += 1
    return k, m


@numba.njit
def _hermite(p, v):
    """value, first and second derivative of the spline at v."""
    k, m = _segment(p, v)
    x0, x1 = p[k], p[k + 1]
    y0, y1, s0, s1 = p[m + k], p[m + k + 1], p[2 * m + k], p[2 * m + k + 1]
    h = x1 - x0
    t = (v - x0) / h
    h00, h10, h01, h11 = 2 * t**3 - 3 * t**2 + 1, t**3 - 2 * t**2 + t, -2 * t**3 + 3 * t**2, t**3 - t**2
    d00, d10, d01, d11 = 6 * t**2 - 6 * t, 3 * t**2 - 4 * t + 1, -6 * t**2 + 6 * t, 3 * t**2 - 2 * t
    e00, e10, e01, e11 = 12 * t - 6, 6 * t - 4, -12 * t + 6, 6 * t - 2
    value = h00 * y0 + h10 * h * s0 + h01 * y1 + h11 * h * s1
    first = (d00 * y0 + d10 * h * s0 + d01 * y1 + d11 * h * s1) / h
    second = (e00 * y0 + e10 * h * s0 + e01 * y1 + e11 * h * s1) / (h * h)
    return value, first, second


@numba.njit
def spline(x, out, p):
    for i in range(x.size):
        out[i] = _hermite(p, x[i])[0]


@numba.njit
def spline_vjp(x, out, g, gx, p):
    for i in range(x.size):
        gx[i] = g[i] * _hermite(p, x[i])[1]


@numba.njit
def spline_jvp(x, tx, out, tout, p):
    for i in range(x.size):
        tout[i] = tx[i] * _hermite(p, x[i])[1]


@numba.njit
def spline_curvature(x, tx, out, g, gx, p):
    for i in range(x.size):
        gx[i] = g[i] * _hermite(p, x[i])[2] * tx[i]


SPLINE = tg.custom_op("Spline", spline, vjp=spline_vjp, jvp=spline_jvp,
                      curvature=spline_curvature)
KNOTS = np.array([-2.0, -0.5, 0.7, 2.0])
KNOT_VALUES = np.array([1.0, -0.3, 0.8, 0.1])
KNOT_SLOPES = np.array([0.5, 1.2, -0.7, 0.3])
SPLINE_PARAMS = np.concatenate([KNOTS, KNOT_VALUES, KNOT_SLOPES])


# --- one explicit heat-equation step on the interior: out has n - 2 values ----------------
@numba.njit
def heat(x, out, p):
    for i in range(out.size):
        out[i] = x[i + 1] + p[0] * (x[i] - 2.0 * x[i + 1] + x[i + 2])


@numba.njit
def heat_vjp(x, out, g, gx, p):
    for i in range(out.size):
        gx[i] += p[0] * g[i]
        gx[i + 1] += (1.0 - 2.0 * p[0]) * g[i]
        gx[i + 2] += p[0] * g[i]


@numba.njit
def heat_jvp(x, tx, out, tout, p):
    heat(tx, tout, p)


@numba.njit
def heat_curvature(x, tx, out, g, gx, p):
    pass   # linear: no second-order term


HEAT = tg.custom_op("HeatStep", heat, vjp=heat_vjp, jvp=heat_jvp, curvature=heat_curvature,
                    shape=lambda s: (s[0] - 2,))


def _torch_heat(x, k):
    return x[1:-1] + k * (x[:-2] - 2.0 * x[1:-1] + x[2:])


# ---------------------------------------------------------------------------------------------
# Values and gradients against PyTorch
# ---------------------------------------------------------------------------------------------
finite = st.floats(-3.0, 3.0, allow_nan=False)


def _vector(min_size=0, max_size=6):
    return st.lists(finite, min_size=min_size, max_size=max_size).map(np.array)


def _both(values):
    return (tg.tensor(values, requires_grad=True),
            torch.tensor(values, dtype=torch.float64, requires_grad=True))


@settings(max_examples=30, deadline=None)
@given(_vector(), st.floats(-2.0, 2.0))
def test_cube_matches_pytorch_in_value_gradient_and_name(v, a):
    x, xt = _both(v)
    y = CUBE(x, params=[a])
    yt = a * xt ** 3
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-14, atol=1e-14)
    assert type(y.grad_fn).__name__ == "CubeBackward" and repr(y).endswith(
        "grad_fn=<CubeBackward>)")
    g = np.linspace(-1, 1, v.size)
    y.backward(tg.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-13, atol=1e-13)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 5).flatmap(lambda n: st.tuples(_vector(n, n), _vector(n, n))))
def test_a_two_input_op_matches_pytorch(pair):
    (x, xt), (y, yt) = _both(pair[0]), _both(pair[1])
    out = SINMUL(x, y)
    out_t = torch.sin(xt) * yt
    np.testing.assert_allclose(out.detach().numpy(), out_t.detach().numpy(), rtol=1e-14,
                               atol=1e-15)
    (out * out).sum().backward()
    (out_t * out_t).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(y.grad.numpy(), yt.grad.numpy(), rtol=1e-12, atol=1e-13)


def test_an_input_used_twice_gets_both_contributions():
    # the vjp assigns gx; the engine adds it to what the input's other uses give
    x, xt = _both(np.array([0.3, -1.2, 2.0]))
    (SINMUL(x, x) + CUBE(x, params=[1.5])).sum().backward()
    (torch.sin(xt) * xt + 1.5 * xt ** 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-13)


def test_the_stencil_step_changes_the_shape_and_matches_pytorch():
    v = np.sin(np.linspace(0, 3, 9))
    x, xt = _both(v)
    u = x
    ut = xt
    for _ in range(3):   # three steps: 9 -> 3 values
        u = HEAT(u, params=[0.25])
        ut = _torch_heat(ut, 0.25)
    assert u.shape == (3,)
    np.testing.assert_allclose(u.detach().numpy(), ut.detach().numpy(), rtol=1e-14)
    (u ** 2).sum().backward()
    (ut ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-13, atol=1e-15)


def test_the_bessel_series_matches_scipy_in_value_and_both_derivatives():
    v = np.linspace(-6.0, 6.0, 13)
    x = tg.tensor(v, requires_grad=True)
    y = J0(x)
    np.testing.assert_allclose(y.detach().numpy(), scipy.special.j0(v), rtol=1e-10,
                               atol=1e-12)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), -scipy.special.j1(v), rtol=1e-10, atol=1e-12)
    h = tg.hessian(lambda t: J0(t).sum())(tg.tensor(v))
    # J0'' = -J0 + J1 / x  (-1/2 at 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.where(v == 0, -0.5, -scipy.special.j0(v) + scipy.special.j1(v) / v)
    np.testing.assert_allclose(h.numpy(), np.diag(want), rtol=1e-9, atol=1e-11)


def test_the_spline_matches_scipy_with_knots_as_parameters():
    v = np.linspace(-1.9, 1.9, 11)
    ref = scipy.interpolate.CubicHermiteSpline(KNOTS, KNOT_VALUES, KNOT_SLOPES)
    x = tg.tensor(v, requires_grad=True)
    y = SPLINE(x, params=SPLINE_PARAMS)
    np.testing.assert_allclose(y.detach().numpy(), ref(v), rtol=1e-13, atol=1e-14)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), ref.derivative()(v), rtol=1e-12, atol=1e-13)
    h = tg.hessian(lambda t: SPLINE(t, params=SPLINE_PARAMS).sum())(tg.tensor(v))
    np.testing.assert_allclose(h.numpy(), np.diag(ref.derivative(2)(v)), rtol=1e-11,
                               atol=1e-12)


# ---------------------------------------------------------------------------------------------
# gradcheck and gradgradcheck, for every op here
# ---------------------------------------------------------------------------------------------
CHECKED = {
    "cube": (lambda x: CUBE(x, params=[0.7]), [np.array([0.3, -1.1, 1.6])]),
    "sinmul": (lambda x, y: SINMUL(x, y), [np.array([0.2, 1.4]), np.array([-0.5, 2.0])]),
    "j0": (lambda x: J0(x), [np.array([-2.0, 0.0, 0.4, 3.3])]),
    "spline": (lambda x: SPLINE(x, params=SPLINE_PARAMS), [np.array([-1.2, 0.1, 1.5])]),
    "heat": (lambda x: HEAT(x, params=[0.3]) ** 2, [np.array([0.1, 0.5, -0.4, 0.9, 0.2])]),
}


@pytest.mark.parametrize("name", sorted(CHECKED))
def test_gradcheck_and_gradgradcheck_pass(name):
    fn, values = CHECKED[name]
    xs = [tg.tensor(v, requires_grad=True) for v in values]
    assert gradcheck(fn, *xs)
    assert gradgradcheck(fn, *xs)


def test_gradcheck_and_gradgradcheck_catch_wrong_kernels():
    @numba.njit
    def wrong_vjp(x, out, g, gx, p):
        for i in range(x.size):
            gx[i] = g[i] * 2.0 * p[0] * x[i] ** 2    # 2 where 3 belongs

    @numba.njit
    def wrong_curvature(x, tx, out, g, gx, p):
        for i in range(x.size):
            gx[i] = g[i] * 5.0 * p[0] * x[i] * tx[i]   # 5 where 6 belongs

    bad_first = tg.custom_op("CubeWrongVjp", cube, vjp=wrong_vjp)
    bad_second = tg.custom_op("CubeWrongCurvature", cube, vjp=cube_vjp, jvp=cube_jvp,
                              curvature=wrong_curvature)
    x = tg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    assert not gradcheck(lambda t: bad_first(t, params=[1.0]), x, raise_exception=False)
    with pytest.raises(AssertionError, match="gradcheck failed"):
        gradcheck(lambda t: bad_first(t, params=[1.0]), x)
    assert gradcheck(lambda t: bad_second(t, params=[1.0]), x)
    with pytest.raises(AssertionError, match="gradgradcheck failed"):
        gradgradcheck(lambda t: bad_second(t, params=[1.0]), x)


def test_gradgradcheck_checks_builtin_ops_too():
    x = tg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    assert gradgradcheck(lambda t: (t.sin() * t).exp(), x)


# ---------------------------------------------------------------------------------------------
# compile, vmap, jvp, hessian
# ---------------------------------------------------------------------------------------------
def _objective(x, y):
    u = HEAT(SPLINE(x, params=SPLINE_PARAMS), params=[0.2])
    return (SINMUL(u, J0(y[1:-1])) + CUBE(u, params=[0.5])).sum()


def test_compile_replays_the_custom_kernels_and_equals_eager():
    fn = tg.compile(_objective)
    rng = np.random.default_rng(0)
    for _ in range(4):
        a, b = rng.uniform(-1.5, 1.5, 6), rng.uniform(-3, 3, 6)
        x, y = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
        got = fn(x, y)
        got.backward()
        xe, ye = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
        want = _objective(xe, ye)
        want.backward()
        assert got.item() == pytest.approx(want.item(), rel=1e-14, abs=1e-14)
        np.testing.assert_allclose(x.grad.numpy(), xe.grad.numpy(), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(y.grad.numpy(), ye.grad.numpy(), rtol=1e-13, atol=1e-14)
    assert fn.stats.replays == 3 and fn.stats.eager == 0


def test_a_parameter_that_changes_between_calls_is_not_baked_in():
    alpha = 2.0
    fn = tg.compile(lambda x: CUBE(x, params=[alpha]).sum())
    x = tg.tensor([1.0, 2.0])
    assert fn(x).item() == 18.0
    alpha = 3.0
    assert fn(x).item() == 27.0
    by_argument = tg.compile(lambda x, a: CUBE(x, params=[a]).sum())
    assert by_argument(x, 2.0).item() == 18.0 and by_argument(x, 3.0).item() == 27.0


def test_vmap_of_grad_runs_the_kernels_per_sample():
    f = lambda x: (CUBE(x, params=[1.5]) * J0(x)).sum()   # noqa: E731
    batch = np.linspace(-2, 2, 12).reshape(4, 3)
    got = tg.vmap(tg.grad(f))(tg.tensor(batch))
    # (torch.special.bessel_j0 has no derivative: the reference is written out)
    want = 4.5 * batch ** 2 * scipy.special.j0(batch) - 1.5 * batch ** 3 * scipy.special.j1(batch)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)


def test_jvp_and_hessian_match_pytorch():
    v = np.array([0.4, -0.9, 1.3, 0.2])
    t = np.array([1.0, -0.5, 0.25, 2.0])

    def ours(z):
        return SINMUL(z[:2] * 1.0, z[2:] * 1.0) * CUBE(z[:2] * 1.0, params=[0.8])

    def theirs(z):
        return torch.sin(z[:2]) * z[2:] * (0.8 * z[:2] ** 3)

    out, tan = tg.func.jvp(ours, (tg.tensor(v),), (tg.tensor(t),))
    out_t, tan_t = torch.autograd.functional.jvp(theirs, torch.tensor(v), torch.tensor(t))
    np.testing.assert_allclose(out.numpy(), out_t.numpy(), rtol=1e-14)
    np.testing.assert_allclose(tan.numpy(), tan_t.numpy(), rtol=1e-13, atol=1e-15)
    h = tg.hessian(lambda z: ours(z).sum())(tg.tensor(v))
    h_t = torch.autograd.functional.hessian(lambda z: theirs(z).sum(), torch.tensor(v))
    np.testing.assert_allclose(h.numpy(), h_t.numpy(), rtol=1e-12, atol=1e-13)


# ---------------------------------------------------------------------------------------------
# Errors: clear, at the point of use, and nothing left half done
# ---------------------------------------------------------------------------------------------
def test_a_missing_kernel_is_named_where_it_is_needed():
    only_forward = tg.custom_op("CubeForwardOnly", cube)
    no_jvp = tg.custom_op("CubeNoJvp", cube, vjp=cube_vjp)
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = only_forward(x, params=[1.0])    # recording needs no vjp
    with pytest.raises(RuntimeError, match="'CubeForwardOnly' has no vjp kernel, which "
                                           "backward needs: pass vjp="):
        y.sum().backward()
    assert x.grad is None
    with pytest.raises(RuntimeError, match="'CubeNoJvp' has no jvp kernel, which forward "
                                           "mode"):
        tg.func.jvp(lambda t: no_jvp(t, params=[1.0]), (x.detach(),), (tg.ones(2),))
    with pytest.raises(RuntimeError, match="no jvp kernel|no curvature kernel"):
        tg.hessian(lambda t: no_jvp(t, params=[1.0]).sum())(x.detach())
    # the op still works where it has what it needs
    no_jvp(x, params=[1.0]).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])


def test_an_exception_inside_a_kernel_is_reported_with_its_message():
    @numba.njit(boundscheck=True)
    def overrun_vjp(x, out, g, gx, p):
        for i in range(x.size + 1):
            gx[i] = g[i]

    @numba.njit
    def raising_forward(x, out, p):
        if x[0] < 0.0:
            raise ValueError("x[0] must not be negative")
        for i in range(x.size):
            out[i] = x[i]

    overrun = tg.custom_op("Overrun", cube, vjp=overrun_vjp)
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = overrun(x, params=[1.0]).sum()
    with pytest.raises(RuntimeError, match="'Overrun': its vjp kernel raised IndexError"):
        y.backward()
    assert x.grad is None
    picky = tg.custom_op("Picky", raising_forward)
    with pytest.raises(RuntimeError, match="its forward kernel raised ValueError: x.0. must"):
        picky(-tg.ones(3))
    # while recording: the kernel writes the output's arena slot; raising, it leaves the tape
    # as it was
    w = tg.ones(3, requires_grad=True)
    negative = -w
    tape = negative._tape
    before = (len(tape.op), tape.top, len(tape.aux))
    with pytest.raises(RuntimeError, match="its forward kernel raised ValueError: x.0. must"):
        picky(negative)
    assert (len(tape.op), tape.top, len(tape.aux)) == before
    assert picky(negative * -2.0).tolist() == [2.0, 2.0, 2.0]
    (negative * negative).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 2.0, 2.0])
    # inside a compiled replay: the kernel's own message, raised from the replay
    fn = tg.compile(lambda t: picky(t).sum())
    assert fn(tg.ones(2)).item() == 2.0
    assert fn(2.0 * tg.ones(2)).item() == 4.0 and fn.stats.replays == 1
    with pytest.raises(RuntimeError, match="its forward kernel raised ValueError: x.0. must"):
        fn(-tg.ones(2))
    assert fn(3.0 * tg.ones(2)).item() == 6.0   # and the next call is right again


def test_a_kernel_numba_cannot_compile_is_reported_where_the_op_is_used():
    @numba.njit
    def untyped_vjp(x, out, g, gx, p):
        gx[0] = "not a number"

    broken = tg.custom_op("BrokenVjp", cube, vjp=untyped_vjp)
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    (CUBE(x, params=[1.0]).sum()).backward()   # other ops' backward is not held up by it
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])
    with pytest.raises(RuntimeError, match="'BrokenVjp': numba could not compile its vjp"):
        broken(x, params=[1.0]).sum().backward()
    with pytest.raises(RuntimeError, match="'BrokenVjp': numba could not compile its vjp"):
        broken(x, params=[1.0]).sum().backward()


def test_threads_running_custom_ops_each_get_their_own_result_or_error():
    import threading

    @numba.njit
    def checked_forward(x, out, p):
        if x[0] < 0.0:
            raise ValueError("negative")
        for i in range(x.size):
            out[i] = 2.0 * x[i]

    checked = tg.custom_op("Checked", checked_forward)
    fn = tg.compile(lambda t: checked(t).sum())
    fn(tg.ones(3))
    results, errors = {}, {}

    def worker(k):
        try:
            for _ in range(200):
                v = -1.0 if k % 2 else float(k)
                results[k] = fn(tg.full((3,), v)).item()
        except RuntimeError as exc:
            errors[k] = str(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {0: 0.0, 2: 12.0}
    assert sorted(errors) == [1, 3] and all("raised ValueError: negative" in e
                                            for e in errors.values())


def test_bad_definitions_and_calls_are_refused():
    with pytest.raises(TypeError, match=r"takes \(x, out, p\) or \(x, y, out, p\)"):
        tg.custom_op("Nope", lambda x, p: None)
    with pytest.raises(TypeError, match=r"vjp kernel of a 1-input op takes \(x, out, g, gx, "
                                        r"p\), not 4"):
        tg.custom_op("Nope", cube, vjp=lambda x, out, g, p: None)
    with pytest.raises(ValueError, match="must be an identifier"):
        tg.custom_op("no name", cube)
    with pytest.raises(TypeError, match="takes 1 tensor input, got 2"):
        CUBE(tg.ones(2), tg.ones(2))
    with pytest.raises(TypeError, match="params are numbers"):
        CUBE(tg.ones(2), params=[tg.tensor(1.0)])
    odd = tg.custom_op("OddShape", cube, shape=lambda s: "three")
    with pytest.raises(TypeError, match="shape returned 'three'"):
        odd(tg.ones(2))


def test_create_graph_through_a_custom_op_says_what_to_use_instead():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = CUBE(x, params=[1.0]).sum()
    with pytest.raises(NotImplementedError, match="tapegrad.hessian"):
        tg.autograd.grad(y, x, create_graph=True)


# ---------------------------------------------------------------------------------------------
# Tape files: loaded only where the same kernels are defined under the same name
# ---------------------------------------------------------------------------------------------
def _saved_bytes():
    global CUBE
    # this module's 'Cube' again: another module may have defined one of its own since (the
    # docs' example does), which a tape saved with this one's kernels would not load against
    CUBE = tg.custom_op("Cube", cube, vjp=cube_vjp, jvp=cube_jvp, curvature=cube_curvature)
    fn = tg.compile(lambda x: (CUBE(x, params=[2.0]) * J0(x)).sum())
    fn(tg.tensor([0.5, 1.0]))
    return fn.variants()[0].to_bytes()


def test_a_saved_tape_with_custom_ops_loads_and_replays():
    loaded = tg.load_tape(_saved_bytes())
    v = np.array([0.3, -1.4])
    x = tg.tensor(v, requires_grad=True)
    out = loaded(x)
    out.backward()
    want = (2.0 * v ** 3 * scipy.special.j0(v)).sum()
    assert out.item() == pytest.approx(want, rel=1e-12)
    dwant = 6.0 * v ** 2 * scipy.special.j0(v) - 2.0 * v ** 3 * scipy.special.j1(v)
    np.testing.assert_allclose(x.grad.numpy(), dwant, rtol=1e-11)


def test_a_tape_file_is_refused_where_the_op_is_missing_or_different(tmp_path):
    path = tmp_path / "custom.npz"
    path.write_bytes(_saved_bytes())
    # a process that never defined the op
    code = ("import tapegrad as tg\n"
            "try:\n"
            f"    tg.load_tape({str(path)!r})\n"
            "except ValueError as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600)
    assert "custom op 'Cube', which is not defined in this process" in out.stdout, out
    # this process, after 'Cube' was defined again with another kernel
    global CUBE
    old = CUBE
    try:
        tg.custom_op("Cube", cube, vjp=heat_vjp)
        with pytest.raises(ValueError, match="saved with other kernels"):
            tg.load_tape(str(path))
    finally:
        CUBE = tg.custom_op("Cube", cube, vjp=cube_vjp, jvp=cube_jvp, curvature=cube_curvature)
        assert CUBE is not old
    tg.load_tape(str(path))   # the same kernels again: it loads


_OPS_MODULE = '''
import numba
import tapegrad as tg


@numba.njit
def shifted_square(x, out, p):
    def square(v):            # a nested function: its code object is among the kernel's
        return v * v
    for i in range(x.size):
        out[i] = square(x[i] - p[0])


@numba.njit
def shifted_square_vjp(x, out, g, gx, p):
    for i in range(x.size):
        gx[i] = 2.0 * (x[i] - p[0]) * g[i]


OP = tg.custom_op("ShiftedSquare", shifted_square, vjp=shifted_square_vjp)
'''


def test_a_tape_file_loads_in_another_process_that_defines_the_same_op(tmp_path):
    import importlib.util
    source = tmp_path / "shifted_ops.py"
    source.write_text(_OPS_MODULE)
    spec = importlib.util.spec_from_file_location("shifted_ops", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = tg.compile(lambda x: (module.OP(x, params=[0.5]) * x).sum())
    fn(tg.tensor([1.0, 2.0]))
    path = tmp_path / "shifted.npz"
    fn.variants()[0].save(str(path))
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
            "import shifted_ops, tapegrad as tg\n"
            f"loaded = tg.load_tape({str(path)!r})\n"
            "x = tg.tensor([3.0, -1.0], requires_grad=True)\n"
            "out = loaded(x)\n"
            "out.backward()\n"
            "print(out.item(), x.grad.tolist())\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr
    value, grad = run.stdout.strip().split(" ", 1)
    x = np.array([3.0, -1.0])
    assert float(value) == pytest.approx(float(((x - 0.5) ** 2 * x).sum()), rel=1e-14)
    assert eval(grad) == pytest.approx(list(2 * (x - 0.5) * x + (x - 0.5) ** 2), rel=1e-14)


# ---------------------------------------------------------------------------------------------
# elementwise_op: an op from its rules on one element, called by generated code too
# ---------------------------------------------------------------------------------------------
@numba.njit
def softclip(x, p):              # p[0] * tanh(x / p[0])
    return p[0] * np.tanh(x / p[0])


@numba.njit
def softclip_d(x, y, p):
    t = y / p[0]
    return 1.0 - t * t


@numba.njit
def softclip_d2(x, y, p):
    t = y / p[0]
    return -2.0 * t * (1.0 - t * t) / p[0]


@numba.njit
def expmul(x, y, p):             # exp(x) * y + p[0] * x * y
    return np.exp(x) * y + p[0] * x * y


@numba.njit
def expmul_d(x, y, z, p):
    return np.exp(x) * y + p[0] * y, np.exp(x) + p[0] * x


@numba.njit
def expmul_d2(x, y, z, p):
    return np.exp(x) * y, np.exp(x) + p[0], 0.0


SOFTCLIP = tg.elementwise_op("SoftClip", softclip, softclip_d, softclip_d2)
EXPMUL = tg.elementwise_op("ExpMul", expmul, expmul_d, expmul_d2)


def _torch_softclip(x, c):
    return c * torch.tanh(x / c)


def _torch_expmul(x, y, c):
    return torch.exp(x) * y + c * x * y


@settings(max_examples=30, deadline=None)
@given(_vector(), st.floats(0.5, 3.0))
def test_an_elementwise_op_matches_pytorch(v, c):
    x, xt = _both(v)
    y = SOFTCLIP(x, params=[c])
    yt = _torch_softclip(xt, c)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-14, atol=1e-15)
    assert repr(y).endswith("grad_fn=<SoftClipBackward>)") or v.size == 0
    (y * y).sum().backward()
    (yt * yt).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-13, atol=1e-14)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([((3,), (3,)), ((2, 3), (3,)), ((4, 1), (1, 2)), ((), (2,)),
                        ((0,), (1,)), ((2, 1), ())]),
       st.integers(0, 2 ** 16), st.floats(-1.0, 1.0))
def test_a_two_input_elementwise_op_broadcasts_as_pytorch_does(shapes, seed, c):
    rng = np.random.default_rng(seed)
    (x, xt), (y, yt) = (_both(rng.uniform(-2, 2, s)) for s in shapes)
    out, out_t = EXPMUL(x, y, params=[c]), _torch_expmul(xt, yt, c)
    assert out.shape == out_t.shape
    np.testing.assert_allclose(out.detach().numpy(), out_t.detach().numpy(), rtol=1e-13,
                               atol=1e-14)
    (out * out).sum().backward()
    (out_t * out_t).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(y.grad.numpy(), yt.grad.numpy(), rtol=1e-12, atol=1e-13)


def test_an_elementwise_op_passes_gradcheck_and_gradgradcheck_and_hessian():
    v = tg.tensor([0.3, -1.2, 2.0], requires_grad=True)
    w = tg.tensor([1.1, 0.4, -0.7], requires_grad=True)
    assert gradcheck(lambda a: SOFTCLIP(a, params=[1.5]), v)
    assert gradgradcheck(lambda a: SOFTCLIP(a, params=[1.5]), v)
    assert gradcheck(lambda a, b: EXPMUL(a, b, params=[0.6]), v, w)
    assert gradgradcheck(lambda a, b: EXPMUL(a, b, params=[0.6]), v, w)
    z = np.array([0.3, -1.2, 2.0, 1.1, 0.4, -0.7])

    def ours(t):
        return (SOFTCLIP(EXPMUL(t[:3] * 1.0, t[3:] * 1.0, params=[0.6]), params=[1.5])).sum()

    def theirs(t):
        return _torch_softclip(_torch_expmul(t[:3], t[3:], 0.6), 1.5).sum()

    h = tg.hessian(ours)(tg.tensor(z))
    h_t = torch.autograd.functional.hessian(theirs, torch.tensor(z))
    np.testing.assert_allclose(h.numpy(), h_t.numpy(), rtol=1e-11, atol=1e-12)
    tangent = np.linspace(-1.0, 1.0, 6)
    _, tan = tg.func.jvp(ours, (tg.tensor(z),), (tg.tensor(tangent),))
    _, tan_t = torch.autograd.functional.jvp(theirs, torch.tensor(z), torch.tensor(tangent))
    np.testing.assert_allclose(tan.numpy(), tan_t.numpy(), rtol=1e-12)


def test_vmap_of_grad_through_an_elementwise_op():
    f = lambda x: EXPMUL(SOFTCLIP(x, params=[1.5]), x, params=[0.3]).sum()   # noqa: E731
    batch = np.linspace(-2, 2, 12).reshape(4, 3)
    got = tg.vmap(tg.grad(f))(tg.tensor(batch))
    xt = torch.tensor(batch, requires_grad=True)
    _torch_expmul(_torch_softclip(xt, 1.5), xt, 0.3).sum().backward()
    np.testing.assert_allclose(got.numpy(), xt.grad.numpy(), rtol=1e-13, atol=1e-14)


def _scalar_loop(x, y):
    for _ in range(30):
        x = SOFTCLIP(EXPMUL(x, y * 0.5, params=[0.25]) * 0.3, params=[1.5])
    return x.sum()


def test_an_elementwise_op_runs_in_generated_code_with_the_interpreters_bits():
    generated = tg.compile(_scalar_loop, codegen=True)
    interpreted = tg.compile(_scalar_loop, codegen=False)
    for values in ((0.4, -0.8), (1.5, 0.3), (-2.0, 2.5), (0.0, -1.0)):
        args = [[tg.tensor([v], requires_grad=True) for v in values] for _ in range(3)]
        got, want = generated(*args[0]), interpreted(*args[1])
        eager = _scalar_loop(*args[2])
        for out in (got, want, eager):
            out.backward()
        assert got.item() == want.item()
        for a, b, e in zip(*args):
            assert a.grad.item() == b.grad.item()
            assert a.grad.item() == pytest.approx(e.grad.item(), rel=1e-13)
        assert got.item() == pytest.approx(eager.item(), rel=1e-14)
    assert generated.stats.generated == 1, generated.stats.not_generated
    source = generated.tape.program.source
    assert "_derivative(" in source and "for k in range(" in source


def test_a_custom_op_without_scalar_rules_stays_with_the_interpreter_and_says_why():
    fn = tg.compile(lambda x: CUBE(CUBE(x, params=[0.5]), params=[0.5]).sum(), codegen=True)
    for _ in range(2):
        x = tg.tensor([0.7], requires_grad=True)
        fn(x).backward()
    assert fn.stats.replays == 1 and fn.stats.generated == 0
    assert "'Cube' has no scalar rules" in " ".join(fn.stats.not_generated)
    np.testing.assert_allclose(x.grad.numpy(), [9 * 0.0625 * 0.7 ** 8],   # d/dx 0.0625 x^9
                               rtol=1e-13)


def test_generated_code_checks_the_op_it_was_written_for():
    from tapegrad.ops import custom
    k = custom.REGISTRY[SOFTCLIP._kernels.ident]
    assert custom.scalar_rules(k.ident, k.digest)[0] is k.scalar[0]
    with pytest.raises(RuntimeError, match="has not defined"):
        custom.scalar_rules(k.ident, k.digest + 1)


def test_elementwise_ops_with_other_rules_have_other_digests():
    @numba.njit
    def other_d(x, y, p):
        return 1.0 - (y / p[0]) ** 2

    same = tg.elementwise_op("SoftClip", softclip, softclip_d, softclip_d2)
    other = tg.elementwise_op("SoftClip", softclip, other_d, softclip_d2)
    assert same._kernels.digest == SOFTCLIP._kernels.digest
    assert other._kernels.digest != SOFTCLIP._kernels.digest


def test_an_elementwise_op_without_a_second_derivative_says_what_hessian_needs():
    first_only = tg.elementwise_op("SoftClipFirst", softclip, softclip_d)
    x = tg.tensor([0.5, -0.25])
    with pytest.raises(RuntimeError, match="'SoftClipFirst' has no second derivative, which "
                                           r"second derivatives \(hessian, hvp\) needs: pass "
                                           "second_derivative= to tapegrad.elementwise_op"):
        tg.hessian(lambda t: first_only(t, params=[1.0]).sum())(x)
    y = tg.tensor([0.5, -0.25], requires_grad=True)
    first_only(y, params=[1.0]).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), 1.0 - np.tanh([0.5, -0.25]) ** 2, rtol=1e-14)


def test_bad_elementwise_definitions_are_refused():
    with pytest.raises(TypeError, match=r"value takes \(x, p\) or \(x, y, p\), not 1"):
        tg.elementwise_op("Bad", lambda x: x, softclip_d)
    with pytest.raises(TypeError, match="a derivative function is required"):
        tg.elementwise_op("Bad", softclip, None)
    with pytest.raises(TypeError, match=r"derivative of a 1-input op takes \(x, y, p\), not 2"):
        tg.elementwise_op("Bad", softclip, lambda x, p: x)
    with pytest.raises(TypeError, match=r"second_derivative of a 2-input op takes "
                                        r"\(x, y, z, p\), not 3"):
        tg.elementwise_op("Bad", expmul, expmul_d, lambda x, y, p: x)
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        EXPMUL(tg.ones(3), tg.ones(4), params=[1.0])
