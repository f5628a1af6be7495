"""Special functions (lgamma, digamma, polygamma, erfinv, the modified Bessel functions i0,
i0e, i1, i1e, ``tapegrad.special``) against PyTorch: values to the last bits on a grid with
edge values, gradients, and errors."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

GRID = np.concatenate([np.linspace(-4.75, 12.0, 91), [1e-8, 0.5, 1.0, 2.0, 10.0, 10.5, 25.0,
                                                      1e3, 1e6, 1e18, -0.5, -2.5]])
EDGES = np.array([0.0, -0.0, -1.0, -2.0, np.inf, -np.inf, np.nan])


def _close(ours, theirs, rtol):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol,
                               atol=0, equal_nan=True)


@pytest.mark.parametrize("name,rtol", [("lgamma", 1e-15), ("digamma", 1e-13)])
def test_gamma_family_values(name, rtol):
    for x in (GRID, EDGES):
        _close(getattr(tg, name)(tg.tensor(x)), getattr(torch, name)(torch.tensor(x)), rtol)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_polygamma_values(n):
    x = GRID[(GRID > 0)]
    _close(tg.polygamma(n, tg.tensor(x)), torch.polygamma(n, torch.tensor(x)), 1e-13)
    neg = np.array([-0.5, -1.25, -2.75])
    _close(tg.polygamma(n, tg.tensor(neg)), torch.polygamma(n, torch.tensor(neg)), 1e-10)


def test_erfinv_values():
    y = np.concatenate([np.linspace(-0.999999, 0.999999, 201), [1e-300, -1e-12, 0.5,
                                                                 1 - 1e-15, -1 + 1e-15]])
    _close(tg.erfinv(tg.tensor(y)), torch.erfinv(torch.tensor(y)), 2e-15)
    edge = np.array([1.0, -1.0, 0.0, -0.0, 1.5, -2.0, np.nan])
    ours, theirs = tg.erfinv(tg.tensor(edge)).numpy(), torch.erfinv(torch.tensor(edge)).numpy()
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(np.signbit(ours), np.signbit(theirs))


@pytest.mark.parametrize("name,x", [
    ("lgamma", [0.3, 1.5, 4.0, -1.5]), ("digamma", [0.3, 1.5, 4.0, -1.5]),
    ("erfinv", [-0.9, 0.1, 0.7]),
])
def test_gradients_and_second_derivatives(name, x):
    a = tg.tensor(x, requires_grad=True)
    at = torch.tensor(x, requires_grad=True)
    y, yt = getattr(tg, name)(a), getattr(torch, name)(at)
    assert y.grad_fn.name() == yt.grad_fn.name()
    (g,) = tg.autograd.grad(y.sum(), a, create_graph=True)
    (gt,) = torch.autograd.grad(yt.sum(), at, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-13)
    (h,) = tg.autograd.grad(g.sum(), a)
    (ht,) = torch.autograd.grad(gt.sum(), at)
    np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-10)
    hess = tg.hessian(lambda v: getattr(tg, name)(v).sum())(tg.tensor(x))
    np.testing.assert_allclose(np.diag(hess.numpy()), ht.numpy(), rtol=1e-10)


def test_polygamma_and_mvlgamma_gradients():
    x = np.array([0.7, 2.0, 5.5])
    for n in (1, 2):
        a, at = tg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        tg.polygamma(n, a).sum().backward()
        torch.polygamma(n, at).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), at.grad.numpy(), rtol=1e-12)
    m = np.array([[3.0, 4.5], [2.2, 7.0]])
    for p in (1, 2, 3):
        a, at = tg.tensor(m, requires_grad=True), torch.tensor(m, requires_grad=True)
        y, yt = tg.mvlgamma(a, p), torch.mvlgamma(at, p)
        np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-15)
        y.sum().backward()
        yt.sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), at.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(tg.special.multigammaln(tg.tensor(m), p).numpy(),
                                   torch.special.multigammaln(torch.tensor(m), p).numpy(),
                                   rtol=1e-15)
    with pytest.raises(RuntimeError, match=r"All elements must be greater than \(p-1\)/2"):
        tg.mvlgamma(tg.tensor([0.4]), 2)
    with pytest.raises(RuntimeError, match="polygamma\\(n, x\\) does not support negative n"):
        tg.polygamma(-1, tg.ones(1))


@pytest.mark.parametrize("name", ["expit", "logit", "gammaln", "psi", "entr", "ndtr", "ndtri",
                                  "log_ndtr", "erfcx", "sinc", "xlog1py", "xlogy"])
def test_special_namespace(name):
    x = np.array([0.05, 0.3, 0.5, 0.9, 0.0])
    if name in ("xlog1py", "xlogy"):
        args = (x, x[::-1] + 0.1)
    else:
        args = (x,)
    ours = getattr(tg.special, name)(*(tg.tensor(a, requires_grad=True) for a in args))
    theirs = getattr(torch.special, name)(*(torch.tensor(a) for a in args))
    np.testing.assert_allclose(ours.detach().numpy(), theirs.numpy(), rtol=1e-14, atol=1e-300)


def test_tails_of_log_ndtr_and_erfcx():
    x = np.array([-5.0, -19.9, -20.1, -40.0, -300.0, 3.0])
    a, at = tg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, yt = tg.special.log_ndtr(a), torch.special.log_ndtr(at)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-14)
    y.sum().backward()
    # the gradient phi(x) / Phi(x) to 40 digits: PyTorch's is 4e-12 off at -300
    import mpmath as mp   # (installed with PyTorch, through sympy)
    mp.mp.dps = 40
    exact = [float(mp.npdf(mp.mpf(v)) / mp.ncdf(mp.mpf(v))) for v in x]
    np.testing.assert_allclose(a.grad.numpy(), exact, rtol=1e-13)
    big = np.array([-3.0, 0.5, 19.0, 21.0, 100.0, 1e5])
    np.testing.assert_allclose(tg.special.erfcx(tg.tensor(big)).numpy(),
                               torch.special.erfcx(torch.tensor(big)).numpy(), rtol=1e-14)


def test_compiled_special_functions_replay():
    def f(x):
        return (tg.lgamma(x) + tg.digamma(x) + tg.erfinv(x / 10.0) + tg.polygamma(2, x)).sum()
    compiled = tg.compile(f)
    for seed in range(3):
        x = np.random.default_rng(seed).uniform(0.5, 5.0, 6)
        a, b = tg.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True)
        got, want = compiled(a), f(b)
        got.backward()
        want.backward()
        assert abs(got.item() - want.item()) <= 1e-13 * abs(want.item())
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-14)
    assert compiled.stats.replays == 2


BESSEL = ["i0", "i0e", "i1", "i1e"]
BESSEL_GRID = np.concatenate([np.linspace(-30.0, 30.0, 241), [7.999999999, 8.0, 8.000000001,
                                                              1e-300, -1e-12, 1e-3, 100.0,
                                                              700.0, 713.9, 1e5, 1e300]])
BESSEL_EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 714.0, -714.0])


@pytest.mark.parametrize("name", BESSEL)
def test_bessel_values(name):
    ours = getattr(tg.special, name)(tg.tensor(BESSEL_GRID))
    _close(ours, getattr(torch.special, name)(torch.tensor(BESSEL_GRID)), 4e-15)
    ours = getattr(tg.special, name)(tg.tensor(BESSEL_EDGES)).numpy()
    theirs = getattr(torch.special, name)(torch.tensor(BESSEL_EDGES)).numpy()
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(np.signbit(ours), np.signbit(theirs))


def test_i0_names_and_in_place():
    x = np.array([-2.0, 0.5, 9.0])
    for ours in (tg.i0(tg.tensor(x)), tg.tensor(x).i0(), tg.special.i0(tg.tensor(x))):
        _close(ours, torch.i0(torch.tensor(x)), 4e-15)
    a = tg.tensor(x, requires_grad=True)
    b = a * 1.0
    assert b.i0_() is b
    assert b.grad_fn.name() == "I0Backward0"
    b.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), torch.special.i1(torch.tensor(x)).numpy(),
                               rtol=1e-15)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        tg.tensor(x, requires_grad=True).i0_()


@pytest.mark.parametrize("name", BESSEL)
def test_bessel_gradients_and_second_derivatives(name):
    x = [-9.5, -3.0, -0.7, 0.0, 0.4, 1.0, 2.5, 8.0, 8.5, 20.0]
    a = tg.tensor(x, requires_grad=True)
    at = torch.tensor(x, requires_grad=True, dtype=torch.float64)
    y, yt = getattr(tg.special, name)(a), getattr(torch.special, name)(at)
    assert y.grad_fn.name() == yt.grad_fn.name()
    (g,) = tg.autograd.grad(y.sum(), a, create_graph=True)
    (gt,) = torch.autograd.grad(yt.sum(), at, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-14, atol=1e-300)
    (h,) = tg.autograd.grad(g.sum(), a)
    (ht,) = torch.autograd.grad(gt.sum(), at)
    np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-12, atol=1e-15)
    hess = tg.hessian(lambda v: getattr(tg.special, name)(v).sum())(tg.tensor(x))
    np.testing.assert_allclose(np.diag(hess.numpy()), ht.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", BESSEL)
def test_bessel_second_derivatives_near_zero_against_mpmath(name):
    """The curvature rule sums I1'' by its series near 0, where the closed form
    I1 - I0/x + 2 I1/x**2 loses every digit (PyTorch's double backward does)."""
    import mpmath as mp
    mp.mp.dps = 40
    x = [1e-8, -1e-5, 3e-3, -0.3, 0.9, -0.999, 1.0, 1.5, -4.0, 8.5]
    order = 0 if name.startswith("i0") else 1
    scaled = name.endswith("e")

    def exact(v):
        f = (lambda t: mp.besseli(order, t) * mp.exp(-abs(t))) if scaled else (
            lambda t: mp.besseli(order, t))
        # one-sided away from 0 (the scaled ones are not twice differentiable there)
        return float(mp.diff(f, mp.mpf(v), 2, direction=1 if v > 0 else -1))
    hess = tg.hessian(lambda v: getattr(tg.special, name)(v).sum())(tg.tensor(x))
    want = np.array([exact(v) for v in x])
    # the series near 0 to the last bits; beyond, the closed forms cancel a little (as
    # PyTorch's: the second derivative is small beside its terms)
    np.testing.assert_allclose(np.diag(hess.numpy())[:7], want[:7], rtol=2e-14)
    np.testing.assert_allclose(np.diag(hess.numpy())[7:], want[7:], rtol=1e-12)
    # forward over reverse agrees with central differences of the gradient
    h = 1e-6
    xs = np.array(x[3:])

    def grad_at(v):
        a = tg.tensor(v, requires_grad=True)
        getattr(tg.special, name)(a).sum().backward()
        return a.grad.numpy()
    diffs = (grad_at(xs + h) - grad_at(xs - h)) / (2 * h)
    np.testing.assert_allclose(np.diag(hess.numpy())[3:], diffs, rtol=1e-7, atol=1e-8)


def test_compiled_bessel_functions_replay():
    def f(x):
        return (tg.i0(x) + tg.special.i0e(x) + tg.special.i1(x) * tg.special.i1e(x)).sum()
    compiled = tg.compile(f)
    for seed in range(3):
        x = np.random.default_rng(seed).uniform(-10.0, 10.0, 6)
        a, b = tg.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True)
        got, want = compiled(a), f(b)
        got.backward()
        want.backward()
        assert abs(got.item() - want.item()) <= 1e-14 * abs(want.item())
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-14)
    assert compiled.stats.replays == 2
