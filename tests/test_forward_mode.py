"""Forward mode and second order: the compiled tangent sweep, jvp, jacobian, hvp, hessian.

Every opcode's tangent rule is checked two ways on the shared op cases: against central
finite differences (J t), and against the reverse sweep by the transpose identity
``<J t, u> == <t, J^T u>``, which holds to rounding and so also pins the conventions at
kinks and ties.  The transforms are checked against finite differences, against reverse
mode, and against ``torch.autograd.functional`` where PyTorch is installed.
"""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import op_cases as C
import strategies as S  # noqa: F401 - makes the source tree importable
import tapegrad as tg
import tapegrad.functional as TF
from tapegrad import higher
from tapegrad import ops as K

TG = C.Lib(tg, TF)
EPS = 1e-6


def _leaves(drawn):
    return [tg.tensor(a, requires_grad=f) for a, f in zip(drawn.arrays, drawn.rg)]


def _closure(case, drawn):
    """fn(*differentiable inputs) with the inputs that require no grad fixed."""
    def fn(*ts):
        it = iter(ts)
        args = [next(it) if f else tg.tensor(a) for a, f in zip(drawn.arrays, drawn.rg)]
        return case.run(TG, args, drawn)
    return fn


def _central(fn, xs, ts):
    """(f(x + eps t) - f(x - eps t)) / 2 eps, evaluated without recording."""
    with tg.no_grad():
        plus = fn(*[tg.tensor(x + EPS * t) for x, t in zip(xs, ts)])._value
        minus = fn(*[tg.tensor(x - EPS * t) for x, t in zip(xs, ts)])._value
    return (np.asarray(plus, dtype=np.float64) - np.asarray(minus, dtype=np.float64)) / (2 * EPS)


# ---------------------------------------------------------------------------------------------
# Every opcode's tangent rule
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", C.CASES, ids=lambda c: c.id)
@given(data=st.data())
def test_tangent_matches_differences_and_reverse(case, data):
    drawn = data.draw(case.strategy(), label="inputs")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), label="seed"))
    fn = _closure(case, drawn)
    xs = [a for a, f in zip(drawn.arrays, drawn.rg) if f]
    ts = [rng.standard_normal(x.shape) for x in xs]
    out, jv = tg.jvp(fn, tuple(tg.tensor(x) for x in xs), tuple(tg.tensor(t) for t in ts))
    jv = jv._value

    # eager value and reverse mode on the same inputs
    leaves = [tg.tensor(x, requires_grad=True) for x in xs]
    want = fn(*leaves)
    assert jv.shape == want._value.shape
    np.testing.assert_array_equal(out._value, want._value)

    # J t against central differences
    fd = _central(fn, xs, ts)
    np.testing.assert_allclose(jv, fd, rtol=1e-4, atol=1e-5)

    # <J t, u> == <t, J^T u>
    u = rng.standard_normal(want._value.shape)
    grads = tg.autograd.grad(want, leaves, grad_outputs=tg.tensor(u), allow_unused=True,
                             materialize_grads=True)
    terms_fwd = jv * u
    terms_rev = [g._value * t for g, t in zip(grads, ts)]
    lhs = float(terms_fwd.sum())
    rhs = float(sum(tr.sum() for tr in terms_rev))
    scale = float(np.abs(terms_fwd).sum() + sum(np.abs(tr).sum() for tr in terms_rev))
    assert abs(lhs - rhs) <= 1e-10 * (1.0 + scale), (lhs, rhs)


@pytest.mark.parametrize("route", ["curvature", "create_graph"])
@pytest.mark.parametrize("case", C.CASES, ids=lambda c: c.id)
@settings(max_examples=10)
@given(data=st.data())
def test_hvp_matches_differences_of_the_gradient(case, route, data):
    """Second order through every op, by both routes (the curvature sweep over fn's tape,
    and the tangent sweep over the recorded create_graph gradient), against central
    differences of the gradient."""
    with pytest.MonkeyPatch.context() as mp:
        if route == "create_graph":
            mp.setattr(higher, "_curvature", lambda *args: None)
        _check_hvp(case, data)


def _check_hvp(case, data):
    drawn = data.draw(case.strategy(), label="inputs")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), label="seed"))
    fn = _closure(case, drawn)
    xs = [a for a, f in zip(drawn.arrays, drawn.rg) if f]
    # Where the gradient itself is not differentiable, PyTorch's conventions (which the
    # recorded gradient follows) are not what differences see: pow masks the exponent-0
    # case, and prod's out/x loses the product of the others when it underflows.
    assume(not (case.op == K.POW and len(drawn.arrays) > 1 and np.any(drawn.arrays[1] == 0)))
    assume(case.op not in (K.PROD, K.PROD_DIM) or
           not any(np.any((x != 0) & (np.abs(x) < 1e-8)) for x in drawn.arrays))
    with tg.no_grad():
        u = rng.standard_normal(np.shape(fn(*[tg.tensor(x) for x in xs])._value))
    rest = xs[1:]

    def scalar(x):
        return (fn(x, *[tg.tensor(r) for r in rest]) * tg.tensor(u)).sum()

    def gradient(x):
        with tg.enable_grad():
            leaf = tg.tensor(x._value, requires_grad=True)
            out = scalar(leaf)
            if not out.requires_grad:
                return tg.zeros(x.shape)
            (g,) = tg.autograd.grad(out, leaf, allow_unused=True, materialize_grads=True)
        return g

    t = rng.standard_normal(xs[0].shape)
    hv = tg.hvp(scalar, tg.tensor(xs[0]), tg.tensor(t))._value
    assert hv.shape == xs[0].shape
    np.testing.assert_allclose(hv, _central(gradient, [xs[0]], [t]), rtol=1e-4, atol=1e-5)


KINKS = {
    # op at its kink or tie: the tangent must be the transpose of what backward does there
    "abs at 0": (lambda x: x.abs(), [np.array([0.0, -0.0, 1.5, -2.0])]),
    "relu at 0": (lambda x: x.relu(), [np.array([0.0, 1.0, -1.0])]),
    "clamp at bounds": (lambda x: x.clamp(-1.0, 1.0), [np.array([-1.0, 1.0, 0.5, 2.0])]),
    "maximum ties": (lambda x, y: tg.maximum(x, y), [np.array([1.0, 2.0, 3.0]),
                                                     np.array([1.0, 0.0, 3.0])]),
    "minimum ties": (lambda x, y: tg.minimum(x, y), [np.array([1.0, 2.0]),
                                                     np.array([1.0, 5.0])]),
    "max ties": (lambda x: x.max(), [np.array([2.0, 1.0, 2.0])]),
    "amax ties": (lambda x: x.amax(0), [np.array([[2.0, 1.0], [2.0, 3.0]])]),
    "max(dim) ties": (lambda x: x.max(1)[0], [np.array([[2.0, 2.0, 1.0], [0.0, 4.0, 4.0]])]),
    "inf-norm ties": (lambda x: x.norm(float("inf")), [np.array([-2.0, 2.0, 1.0])]),
    "prod with a zero": (lambda x: x.prod(), [np.array([0.0, 2.0, 3.0])]),
    "prod(dim) with zeros": (lambda x: x.prod(0), [np.array([[0.0, 2.0], [0.0, 3.0]])]),
    "norm of zeros": (lambda x: x.norm(), [np.zeros(3)]),
    "pow 0**0": (lambda x, y: x ** y, [np.array([0.0, 2.0]), np.array([0.0, 1.5])]),
}


@pytest.mark.parametrize("name", sorted(KINKS))
def test_tangent_is_the_transpose_of_backward_at_kinks(name):
    fn, xs = KINKS[name]
    rng = np.random.default_rng(7)
    ts = [rng.standard_normal(x.shape) for x in xs]
    _, jv = tg.jvp(fn, tuple(tg.tensor(x) for x in xs), tuple(tg.tensor(t) for t in ts))
    leaves = [tg.tensor(x, requires_grad=True) for x in xs]
    out = fn(*leaves)
    for j in range(out._value.size):
        u = np.zeros(out._value.size)
        u[j] = 1.0
        grads = tg.autograd.grad(out, leaves, grad_outputs=tg.tensor(u.reshape(out.shape)),
                                 retain_graph=True, allow_unused=True, materialize_grads=True)
        rev = sum(float((g._value * t).sum()) for g, t in zip(grads, ts))
        got = jv._value.reshape(-1)[j]
        assert got == pytest.approx(rev, rel=1e-12, abs=1e-12), (name, j, got, rev)


# ---------------------------------------------------------------------------------------------
# Bookkeeping (every op's tangent rule is checked in test_op_table.py, from the table)
# ---------------------------------------------------------------------------------------------
def test_unknown_opcode_is_reported_by_the_tangent_sweep():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3.0
    tape = y._tape
    op, a0, a1, voff, size, ip = (np.array(col, dtype=np.int64) for col in (
        tape.op, tape.a0, tape.a1, tape.voff, tape.size, tape.ip))
    fp = np.array(tape.fp, dtype=np.float64)
    op[y._r] = max(K.OPS) + 1
    dep = np.zeros(len(op), dtype=np.uint8)
    dep[a0[y._r]] = 1
    tans = np.zeros(tape.top)
    bad = K.tangent(op, a0, a1, voff, size, ip, fp, np.zeros(1, dtype=np.int64), np.zeros(1),
                    tape.vals, tans, 1, tape.top, dep, 0, len(op))
    assert bad == y._r


# ---------------------------------------------------------------------------------------------
# Transforms against finite differences and reverse mode
# ---------------------------------------------------------------------------------------------
def wide(x):       # R^3 -> R^(2x4): forward sweeps
    a = tg.tensor(np.arange(12.0).reshape(3, 4) / 7.0)
    y = (x.sin() * x.sum()).unsqueeze(0) @ a
    return tg.cat([y, tg.stack([x[0] * x[1], x[1] * x[2], x[2].exp(), x.prod()]).unsqueeze(0)],
                  0)


def narrow(x):     # R^(2x3) -> R^2: reverse sweeps
    return tg.stack([tg.logsumexp(x, 1).sum(), (x.tanh() ** 2).mean() * x[0, 1]])


def scalar(x):     # R^(2x3) -> R
    w = tg.tensor(np.array([[0.5, -1.0], [2.0, 0.3], [-0.7, 1.1]]))
    h = (x @ w).tanh()
    return tg.softmax(h, 1)[:, 0].sum() + (x ** 2).sum().sqrt() + x.sigmoid().prod() + \
        tg.maximum(x, x * 0.5).sum() * x[1, 2]


def smooth_scalar(x):   # R^(2x3) -> R with only ops the curvature sweep has rules for
    w = tg.tensor(np.array([[0.5, -1.0], [2.0, 0.3], [-0.7, 1.1]]))
    h = (x @ w).tanh()
    return tg.log_softmax(h, 1)[:, 0].sum() + (x ** 2).sum().sqrt() / x[0, 0].exp() + \
        tg.logsumexp(x.sin() * x, 1).sum() + (x.relu() * x.sigmoid() / (x * x + 1.0)).mean()


def _fd_jacobian(fn, x):
    flat = x.reshape(-1)
    cols = []
    for j in range(flat.size):
        e = np.zeros(flat.size)
        e[j] = 1.0
        cols.append(_central(fn, [x], [e.reshape(x.shape)]).reshape(-1))
    with tg.no_grad():
        yshape = fn(tg.tensor(x))._value.shape
    return np.stack(cols, 1).reshape(yshape + x.shape)


def _reverse_jacobian(fn, x):
    leaf = tg.tensor(x, requires_grad=True)
    y = fn(leaf)
    rows = []
    for i in range(y._value.size):
        u = np.zeros(y._value.size)
        u[i] = 1.0
        (g,) = tg.autograd.grad(y, leaf, grad_outputs=tg.tensor(u.reshape(y.shape)),
                                retain_graph=True, allow_unused=True, materialize_grads=True)
        rows.append(g._value.reshape(-1))
    return np.array(rows).reshape(y._value.shape + x.shape)


def _reverse_hessian(fn, x):
    """Reverse over reverse: the create_graph gradient, then a reverse sweep per entry."""
    leaf = tg.tensor(x, requires_grad=True)
    (g,) = tg.autograd.grad(fn(leaf), leaf, create_graph=True)
    flat = g.reshape(-1)
    rows = []
    for i in range(x.size):
        (r,) = tg.autograd.grad(flat[i], leaf, retain_graph=True, allow_unused=True,
                                materialize_grads=True)
        rows.append(r._value.reshape(-1))
    return np.array(rows).reshape(x.shape + x.shape)


points = st.integers(0, 2 ** 32 - 1).map(lambda s: np.random.default_rng(s))


@given(rng=points)
def test_jacobian_forward_and_reverse_paths(rng):
    for fn, shape in ((wide, (3,)), (narrow, (2, 3))):
        x = rng.uniform(-1.5, 1.5, shape)
        jac = tg.jacobian(fn)(tg.tensor(x))._value
        rev = _reverse_jacobian(fn, x)
        assert jac.shape == rev.shape
        np.testing.assert_allclose(jac, rev, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(jac, _fd_jacobian(fn, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scalar", [scalar, smooth_scalar], ids=["prod_route", "curvature"])
@given(rng=points)
def test_hessian_and_hvp(scalar, rng):
    x = rng.uniform(-1.5, 1.5, (2, 3))
    v = rng.standard_normal((2, 3))
    hess = tg.hessian(scalar)(tg.tensor(x))._value
    assert hess.shape == (2, 3, 2, 3)
    np.testing.assert_allclose(hess, _reverse_hessian(scalar, x), rtol=1e-10, atol=1e-12)

    def gradient(t):
        (g,) = tg.autograd.grad(scalar(t), t, create_graph=True)
        return g

    def grad_of(t):
        with tg.enable_grad():
            leaf = tg.tensor(t._value, requires_grad=True)
            return gradient(leaf).detach()

    np.testing.assert_allclose(hess, _fd_jacobian(grad_of, x), rtol=1e-5, atol=1e-6)
    hv = tg.hvp(scalar, tg.tensor(x), tg.tensor(v))._value
    assert hv.shape == x.shape
    flat_h = hess.reshape(x.size, x.size)
    np.testing.assert_allclose(hv, (flat_h @ v.reshape(-1)).reshape(x.shape), rtol=1e-10,
                               atol=1e-12)


def test_hessian_in_several_sweeps(monkeypatch):
    """With room for few seeds per sweep the Hessian is assembled from chunks."""
    x = np.linspace(-1.0, 1.0, 7)
    def fn(t):
        return (t.sin() * tg.cat([t[-1:], t[:-1]])).sum() + (t ** 4).sum()

    whole = tg.hessian(fn)(tg.tensor(x))._value
    monkeypatch.setattr(higher, "_TANGENT_BUDGET", 1)
    chunked = tg.hessian(fn)(tg.tensor(x))._value
    np.testing.assert_array_equal(whole, chunked)
    np.testing.assert_allclose(whole, _reverse_hessian(fn, x), rtol=1e-10, atol=1e-12)


def test_jvp_tuples_identity_and_constants():
    x, y = np.array([0.5, -1.0]), np.array([2.0, 3.0])
    tx, ty = np.array([1.0, 2.0]), np.array([-0.5, 0.25])
    outs, jvs = tg.jvp(lambda a, b: (a * b, a, tg.tensor([1.0, 2.0])),
                       (tg.tensor(x), tg.tensor(y)), (tg.tensor(tx), tg.tensor(ty)))
    assert isinstance(outs, tuple) and isinstance(jvs, tuple) and len(jvs) == 3
    np.testing.assert_allclose(outs[0]._value, x * y)
    np.testing.assert_allclose(jvs[0]._value, tx * y + x * ty)
    np.testing.assert_array_equal(jvs[1]._value, tx)
    np.testing.assert_array_equal(jvs[2]._value, np.zeros(2))
    assert not jvs[0].requires_grad and not outs[0].requires_grad


def test_hvp_and_hessian_of_functions_linear_or_constant():
    x = tg.tensor([1.0, 2.0])
    np.testing.assert_array_equal(tg.hvp(lambda t: t.sum() * 3.0, x, x)._value, np.zeros(2))
    np.testing.assert_array_equal(tg.hessian(lambda t: tg.tensor(1.0))(x)._value,
                                  np.zeros((2, 2)))


def test_bad_input_names_the_shapes():
    x = tg.tensor([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"\(2,\).*\(3,\)"):
        tg.jvp(lambda t: t * 2.0, x, tg.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"2 primals but 1 tangents"):
        tg.jvp(lambda a, b: a * b, (x, x), (x,))
    with pytest.raises(ValueError, match=r"\(3, 1\).*\(3,\)"):
        tg.hvp(lambda t: t.sum(), x, tg.tensor([[1.0], [2.0], [3.0]]))
    with pytest.raises(RuntimeError, match="single element"):
        tg.hvp(lambda t: t * 2.0, x, x)
    with pytest.raises(RuntimeError, match="single element"):
        tg.hessian(lambda t: t * 2.0)(x)
    with pytest.raises(TypeError, match="tensor"):
        tg.jacobian(lambda t: 3.0)(x)
    # the recorder is left usable
    y = tg.tensor([1.0], requires_grad=True)
    (y * 2.0).sum().backward()
    assert y.grad._value.tolist() == [2.0]


def lotka_volterra(p, steps=200, dt=0.01, lib=tg):
    """The ODE's loss, in tapegrad (or, with lib=torch, in PyTorch)."""
    a, b, c, d = p[0], p[1], p[2], p[3]
    u = lib.tensor(1.0)
    v = lib.tensor(1.0)
    for _ in range(steps):
        u, v = u + dt * (a * u - b * u * v), v + dt * (d * u * v - c * v)
    return (u - 1.5) ** 2 + (v - 0.5) ** 2


def test_hvp_of_an_ode_matches_reverse_over_reverse():
    p = np.array([1.5, 1.0, 3.0, 1.0])
    v = np.array([0.3, -1.0, 0.5, 2.0])
    hv = tg.hvp(lotka_volterra, tg.tensor(p), tg.tensor(v))._value
    want = _reverse_hessian(lotka_volterra, p) @ v
    np.testing.assert_allclose(hv, want, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# PyTorch as the oracle
# ---------------------------------------------------------------------------------------------
def _torch_twins():
    torch = pytest.importorskip("torch")

    def wide_t(x):
        a = torch.tensor(np.arange(12.0).reshape(3, 4) / 7.0)
        y = (x.sin() * x.sum()).unsqueeze(0) @ a
        return torch.cat([y, torch.stack([x[0] * x[1], x[1] * x[2], x[2].exp(),
                                          x.prod()]).unsqueeze(0)], 0)

    def narrow_t(x):
        return torch.stack([torch.logsumexp(x, 1).sum(), (x.tanh() ** 2).mean() * x[0, 1]])

    def scalar_t(x):
        w = torch.tensor(np.array([[0.5, -1.0], [2.0, 0.3], [-0.7, 1.1]]))
        h = (x @ w).tanh()
        return torch.softmax(h, 1)[:, 0].sum() + (x ** 2).sum().sqrt() + \
            x.sigmoid().prod() + torch.maximum(x, x * 0.5).sum() * x[1, 2]

    def smooth_scalar_t(x):
        w = torch.tensor(np.array([[0.5, -1.0], [2.0, 0.3], [-0.7, 1.1]]))
        h = (x @ w).tanh()
        return torch.log_softmax(h, 1)[:, 0].sum() + (x ** 2).sum().sqrt() / x[0, 0].exp() + \
            torch.logsumexp(x.sin() * x, 1).sum() + \
            (x.relu() * x.sigmoid() / (x * x + 1.0)).mean()

    def lotka_t(p, steps=200, dt=0.01):
        return lotka_volterra(p, steps, dt, lib=torch)

    return torch, wide_t, narrow_t, scalar_t, lotka_t, smooth_scalar_t


@given(rng=points)
def test_against_torch(rng):
    torch, wide_t, narrow_t, scalar_t, lotka_t, smooth_t = _torch_twins()
    AF = torch.autograd.functional
    for fn, fn_t, shape in ((wide, wide_t, (3,)), (narrow, narrow_t, (2, 3))):
        x = rng.uniform(-1.5, 1.5, shape)
        t = rng.standard_normal(shape)
        got = tg.jacobian(fn)(tg.tensor(x))._value
        want = AF.jacobian(fn_t, torch.tensor(x)).numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        out, jv = tg.jvp(fn, tg.tensor(x), tg.tensor(t))
        out_t, jv_t = AF.jvp(fn_t, torch.tensor(x), torch.tensor(t))
        assert jv._value.shape == tuple(jv_t.shape) and out._value.shape == tuple(out_t.shape)
        np.testing.assert_allclose(out._value, out_t.numpy(), rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(jv._value, jv_t.numpy(), rtol=1e-12, atol=1e-12)
    x = rng.uniform(-1.5, 1.5, (2, 3))
    v = rng.standard_normal((2, 3))
    for fn, fn_t in ((scalar, scalar_t), (smooth_scalar, smooth_t)):
        got = tg.hessian(fn)(tg.tensor(x))._value
        want = AF.hessian(fn_t, torch.tensor(x)).numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
        hv = tg.hvp(fn, tg.tensor(x), tg.tensor(v))._value
        _, hv_t = AF.hvp(fn_t, torch.tensor(x), torch.tensor(v))
        assert hv.shape == tuple(hv_t.shape)
        np.testing.assert_allclose(hv, hv_t.numpy(), rtol=1e-10, atol=1e-12)


def test_ode_hvp_and_zero_dim_against_torch():
    torch, _, _, _, lotka_t, _ = _torch_twins()
    AF = torch.autograd.functional
    p = np.array([1.5, 1.0, 3.0, 1.0])
    v = np.array([0.3, -1.0, 0.5, 2.0])
    hv = tg.hvp(lotka_volterra, tg.tensor(p), tg.tensor(v))._value
    _, hv_t = AF.hvp(lotka_t, torch.tensor(p), torch.tensor(v))
    np.testing.assert_allclose(hv, hv_t.numpy(), rtol=1e-10, atol=1e-12)
    # 0-d input and output: shapes () as PyTorch's
    x = 0.7
    got = tg.hessian(lambda t: t.sin() * t)(tg.tensor(x))._value
    want = AF.hessian(lambda t: t.sin() * t, torch.tensor(x)).numpy()
    assert got.shape == want.shape == ()
    assert got == pytest.approx(float(want), rel=1e-14)
    jac = tg.jacobian(lambda t: t.exp())(tg.tensor(x))._value
    jac_t = AF.jacobian(lambda t: t.exp(), torch.tensor(x)).numpy()
    assert jac.shape == jac_t.shape == ()


# ---------------------------------------------------------------------------------------------
# Compiled functions replay their tapes
# ---------------------------------------------------------------------------------------------
def _close(a, b):
    # replay recomputes values in compiled code: the last bit may differ from eager NumPy
    np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)


def test_compiled_functions_replay_and_agree():
    clv = tg.compile(lotka_volterra)
    v = tg.tensor([0.3, -1.0, 0.5, 2.0])
    for k in range(3):
        p = tg.tensor(np.array([1.5, 1.0, 3.0, 1.0]) * (1.0 + 0.05 * k))
        _close(tg.hvp(clv, p, v)._value,
                                      tg.hvp(lotka_volterra, p, v)._value)
        _close(tg.hessian(clv)(p)._value,
                                      tg.hessian(lotka_volterra)(p)._value)
    # the forward tape is replayed and swept by the curvature kernel
    assert clv.stats.records == 1 and clv.stats.replays == 5

    # var has no curvature rule: the recorded create_graph gradient is replayed
    def smooth(x):
        return (x * x).var() * x[0]

    cs = tg.compile(smooth)
    for k in range(3):
        x = tg.tensor([0.5 + k, -1.0, 2.0])
        _close(tg.hessian(cs)(x)._value, tg.hessian(smooth)(x)._value)
    (gradient,) = cs._derived.values()
    assert gradient.stats.records == 1 and gradient.stats.replays == 2

    cw = tg.compile(wide)
    for k in range(3):
        x = tg.tensor(np.array([0.3, -0.8, 1.1]) + 0.1 * k)
        _close(tg.jacobian(cw)(x)._value, tg.jacobian(wide)(x)._value)
        t = tg.tensor([1.0, -2.0, 0.5])
        _close(tg.jvp(cw, x, t)[1]._value, tg.jvp(wide, x, t)[1]._value)
    assert cw.stats.records == 1 and cw.stats.replays == 5


def test_compiled_second_order_never_reuses_stale_masks_or_branches():
    """relu's recorded backward holds a mask read from values, and a Python branch reads a
    value: the compiled hessian must follow both to the new inputs."""
    def masked(x):
        # var sends it to the create_graph gradient, whose masks are read from values
        return (x.relu() * x ** 2).sum() + tg.maximum(x, x * 0.5).sum() * x[0] + \
            (x.abs() * x).var()

    def branchy(x):
        return (x ** 3).sum() if float(x.sum()) > 0 else (x.sin() * 2.0).sum()

    for fn in (masked, branchy):
        cf = tg.compile(fn)
        for xv in ([1.0, -1.0], [-1.0, 0.5], [2.0, 3.0], [-2.0, -3.0]):
            x = tg.tensor(xv)
            _close(tg.hessian(cf)(x)._value, tg.hessian(fn)(x)._value)
            _close(tg.hvp(cf, x, x)._value, tg.hvp(fn, x, x)._value)


def test_create_graph_through_a_mask_runs_a_compiled_function_eagerly():
    def fn(x):
        (g,) = tg.autograd.grad((x.abs() * x).sum(), x, create_graph=True)
        return g * x

    cf = tg.compile(fn)
    for xv in ([1.0, -2.0], [-1.0, 2.0]):
        x = tg.tensor(xv, requires_grad=True)
        np.testing.assert_array_equal(cf(x)._value, fn(tg.tensor(xv, requires_grad=True))._value)
    assert cf.stats.replays == 0 and cf.stats.eager == 1
    assert any("AbsBackward0" in reason for reason, _ in cf.stats.eager_reasons)


def test_double_backward_through_a_constant_matrix():
    """The reverse-over-reverse oracle: a gradient of a gradient through x @ W with W a
    constant, whose second backward seeds W's record on the older tape."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((30, 20))
    x = tg.tensor(rng.standard_normal(20), requires_grad=True)
    out = (tg.tensor(w) @ x).tanh()
    v = tg.zeros(30, requires_grad=True)
    (g,) = tg.autograd.grad(out, x, grad_outputs=v, create_graph=True)
    (jv,) = tg.autograd.grad(g.sum(), v)
    slope = 1.0 - np.tanh(w @ x._value) ** 2
    np.testing.assert_allclose(jv._value, slope * (w @ np.ones(20)), rtol=1e-12, atol=1e-12)


def test_compiled_function_called_inside_is_followed():
    """A compiled function called inside fn would replay on a tape of its own: the inputs
    would reach the result through it, unseen by a sweep over fn's tape."""
    inner = tg.compile(lambda t: t.sin() * 2.0)
    warm = tg.tensor([1.0, 2.0], requires_grad=True)
    inner(warm)
    inner(warm)   # replays from now on

    def fn(t):
        return (inner(t) * t).sum()

    x = np.array([0.3, 1.2])
    want = np.diag(4.0 * np.cos(x) - 2.0 * np.sin(x) * x)
    for f in (fn, tg.compile(fn)):
        for _ in range(2):
            np.testing.assert_allclose(tg.hessian(f)(tg.tensor(x))._value, want, rtol=1e-14)
            np.testing.assert_allclose(tg.jvp(f, tg.tensor(x), tg.tensor([1.0, 0.0]))[1]._value,
                                       2.0 * np.cos(x[0]) * x[0] + 2.0 * np.sin(x[0]),
                                       rtol=1e-14)


SECOND_ORDER_EDGES = {
    # PyTorch masks pow's exponent-0 case: the Hessian is not symmetric there
    "pow at exponent 0": ("x[0] ** x[1]", [1.0, 0.0]),
    "x ** x": ("(x ** x).sum()", [1.0, 2.0]),
    "prod 0-d at 0": ("x.prod()", 0.0),
    "prod with one zero": ("x.prod()", [0.0, 2.0, 3.0]),
    "prod with two zeros": ("x.prod()", [0.0, 2.0, 0.0]),
    "prod(dim) with zeros": ("x.prod(0).sum()", [[0.0, 2.0], [3.0, 0.0], [1.5, 4.0]]),
    "prod(dim) of one entry": ("(x.prod(1) ** 2).sum()", [[0.0], [3.0]]),
}


@pytest.mark.parametrize("name", sorted(SECOND_ORDER_EDGES))
def test_hessian_edges_against_torch(name):
    torch = pytest.importorskip("torch")
    expr, value = SECOND_ORDER_EDGES[name]
    fn = eval("lambda x: " + expr)  # noqa: S307 - the same expression in both libraries
    got = tg.hessian(fn)(tg.tensor(value))._value
    want = torch.autograd.functional.hessian(fn, torch.tensor(value)).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
