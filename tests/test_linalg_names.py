"""The linear-algebra names of PyTorch's top level and Tensor that tapegrad lacked: the old
``svd`` (V not transposed) and ``qr``, ``adjoint``/``mH``, and ``renorm``/``renorm_``.  Each
is compared with PyTorch: values, ``grad_fn`` names, gradients, warnings and error texts;
renorm's gradient also with central differences, and both through ``tapegrad.compile``."""
import warnings

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

rng = np.random.default_rng(7)
TALL = rng.normal(size=(4, 3))
WIDE = rng.normal(size=(2, 5))
BATCH = rng.normal(size=(2, 3, 4))
SQUARE = rng.normal(size=(3, 3))


def _name(m, t):
    if t.grad_fn is None:
        return None
    return type(t.grad_fn).__name__ if m is torch else t.grad_fn.name()


def outcome(m, prog, value):
    """(values, grad_fn names, input gradient, warnings) of ``prog``, or the error."""
    x = m.tensor(value, dtype=m.float64, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = prog(m, x)
        except (RuntimeError, TypeError, IndexError) as e:
            return "error", type(e).__name__, str(e).replace("tapegrad.", "torch.")
    texts = [str(w.message).split(" (Triggered internally")[0] for w in caught]
    outs = list(out) if isinstance(out, tuple) else [out]
    names = [_name(m, t) for t in outs]
    # a weighted sum that reads every element, so a wrong gradient of any output shows
    total = sum((t * m.tensor(np.cos(np.arange(t.numel())).reshape(tuple(t.shape)))).sum()
                for t in outs if t.requires_grad)
    grad = None
    if not isinstance(total, int):
        total.backward()
        grad = None if x.grad is None else np.array(x.grad.tolist())
    return ([np.array(t.tolist()) for t in outs], names, grad, texts,
            [tuple(t.shape) for t in outs], type(out).__name__)


def _sign_fixed(m, out):
    """U and V with each singular vector's sign chosen so its largest entry is positive, and
    the gauge-invariant product U diag(S) V^T: what two LAPACK calls must agree on."""
    U, S, V = out
    k = S.shape[-1]
    pick = U[..., :, :k].abs().argmax(-2, keepdim=True)
    sign = m.sign(U[..., :, :k].gather(-2, pick))
    return (U[..., :, :k] * sign, S, V[..., :, :k] * sign,
            U[..., :, :k] @ m.diag_embed(S) @ V[..., :, :k].mT)


PROGRAMS = {
    # svd: values, shapes, names; gradients of gauge-invariant functions
    "svd_tall": (lambda m, x: m.svd(x), TALL),
    "svd_wide": (lambda m, x: m.svd(x), WIDE),
    "svd_batch": (lambda m, x: x.svd(), BATCH),
    "svd_not_some": (lambda m, x: m.svd(x, some=False), TALL),
    "svd_not_some_wide": (lambda m, x: x.svd(False), WIDE),
    "svd_no_uv": (lambda m, x: m.svd(x, compute_uv=False), TALL),
    "svd_no_uv_not_some": (lambda m, x: m.svd(x, False, False), BATCH),
    "svd_square": (lambda m, x: m.svd(x), SQUARE),
    "svd_vector": (lambda m, x: m.svd(x[0]), TALL),
    "svd_vector_no_uv": (lambda m, x: m.svd(x[0], compute_uv=False), TALL),
    "svd_0d": (lambda m, x: m.svd(x[0, 0]), TALL),
    "svd_long": (lambda m, x: m.svd(x.long()), TALL),
    "svd_empty": (lambda m, x: m.svd(x[:0]), TALL),
    "svd_empty_batch": (lambda m, x: m.svd(x[:, :0], some=False), BATCH),
    "svd_reconstructed": (lambda m, x: _sign_fixed(m, m.svd(x))[3], TALL),
    "svd_sign_fixed": (lambda m, x: _sign_fixed(m, m.svd(x)), TALL),
    "svd_sign_fixed_batch": (lambda m, x: _sign_fixed(m, x.svd()), BATCH),
    "svd_sign_fixed_full": (lambda m, x: _sign_fixed(m, m.svd(x, some=False))[:3], WIDE),
    "svd_u_squared": (lambda m, x: m.svd(x)[0] ** 2, TALL),
    "svd_v_squared": (lambda m, x: m.svd(x)[2] ** 2, WIDE),
    # qr
    "qr_tall": (lambda m, x: m.qr(x), TALL),
    "qr_wide": (lambda m, x: x.qr(), WIDE),
    "qr_batch": (lambda m, x: m.qr(x, some=True), BATCH),
    "qr_complete_wide": (lambda m, x: m.qr(x, some=False), WIDE),
    "qr_complete_square": (lambda m, x: x.qr(False), SQUARE),
    "qr_vector": (lambda m, x: m.qr(x[0]), TALL),
    "qr_long": (lambda m, x: m.qr(x.long()), TALL),
    "qr_empty": (lambda m, x: m.qr(x[:0]), TALL),
    # adjoint, mH
    "adjoint": (lambda m, x: m.adjoint(x), TALL),
    "adjoint_method": (lambda m, x: x.adjoint(), BATCH),
    "mH": (lambda m, x: x.mH, BATCH),
    "mH_matrix": (lambda m, x: x.mH * 2.0, WIDE),
    "mH_empty": (lambda m, x: x[:0].mH, TALL),
    "adjoint_0d": (lambda m, x: x[0, 0].adjoint(), TALL),
    "mH_0d": (lambda m, x: x[0, 0].mH, TALL),
    "mT_0d": (lambda m, x: x[0, 0].mT, TALL),
    "mT_vector": (lambda m, x: x[0].mT, TALL),
    "adjoint_0d_leaf": (lambda m, x: m.tensor(2.0).adjoint(), TALL),
    "adjoint_vector": (lambda m, x: m.adjoint(x[0]), TALL),
    "mH_vector": (lambda m, x: x[0].mH, TALL),
    # renorm: some slices scaled, some kept; every dim; several p
    "renorm_rows": (lambda m, x: m.renorm(x, 2, 0, 1.5), TALL),
    "renorm_cols": (lambda m, x: m.renorm(x, 2, 1, 1.5), TALL),
    "renorm_negative_dim": (lambda m, x: x.renorm(1, -1, 2.0), BATCH),
    "renorm_batch_dim0": (lambda m, x: x.renorm(2, 0, 2.5), BATCH),
    "renorm_batch_dim1": (lambda m, x: x.renorm(3, 1, 1.0), BATCH),
    "renorm_inf": (lambda m, x: m.renorm(x, float("inf"), 0, 1.0), TALL),
    "renorm_half": (lambda m, x: m.renorm(x, 0.5, 1, 3.0), TALL),
    "renorm_int_maxnorm": (lambda m, x: m.renorm(x, 2, 0, 1), TALL),
    "renorm_zero_maxnorm": (lambda m, x: m.renorm(x, 2, 0, 0.0), TALL),
    "renorm_none_scaled": (lambda m, x: m.renorm(x, 2, 0, 100.0), TALL),
    "renorm_zero_rows": (lambda m, x: m.renorm(x * 0.0, 2, 0, 1.0), TALL),
    "renorm_empty": (lambda m, x: m.renorm(x[:0], 2, 0, 1.0), TALL),
    "renorm_empty_other": (lambda m, x: m.renorm(x[:0], 2, 1, 1.0), TALL),
    "renorm_in_place": (lambda m, x: (x * 1.0).renorm_(2, 1, 0.5), TALL),
    "renorm_in_place_plain": (lambda m, x: x.detach().clone().renorm_(2, 0, 0.5), TALL),
    "renorm_p0": (lambda m, x: m.renorm(x, 0, 0, 1.0), TALL),
    "renorm_p_negative": (lambda m, x: m.renorm(x, -1, 0, 1.0), TALL),
    "renorm_p_nan": (lambda m, x: m.renorm(x, float("nan"), 0, 1.0), TALL),
    "renorm_maxnorm_negative": (lambda m, x: m.renorm(x, 2, 0, -1.0), TALL),
    "renorm_maxnorm_nan": (lambda m, x: m.renorm(x, 2, 0, float("nan")), TALL),
    "renorm_dim_high": (lambda m, x: m.renorm(x, 2, 2, 1.0), TALL),
    "renorm_dim_low": (lambda m, x: m.renorm(x, 2, -3, 1.0), TALL),
    "renorm_vector": (lambda m, x: m.renorm(x[0], 2, 0, 1.0), TALL),
    "renorm_0d": (lambda m, x: m.renorm(x[0, 0], 2, 0, 1.0), TALL),
}


# PyTorch warns these once a process (TORCH_WARN_ONCE), tapegrad at every call
WARNS = {"qr_": "torch.qr is deprecated", "adjoint_0d": "adjoint() is deprecated on 0-D",
         "mH_0d": "Tensor.mH is deprecated on 0-D",
         "mT_0d": "Tensor.mT is deprecated on 0-D"}


@pytest.mark.parametrize("case", sorted(PROGRAMS))
def test_matches_pytorch(case):
    prog, value = PROGRAMS[case]
    got, want = outcome(tg, prog, value), outcome(torch, prog, value)
    if want[0] == "error":
        assert got == want
        return
    values, names, grad, texts, shapes, kind = got
    assert (names, shapes, kind) == (want[1], want[4], want[5])
    assert set(want[3]) <= set(texts)
    warned = [w for key, w in WARNS.items() if case.startswith(key) and "long" not in case]
    assert [w for w in warned if not any(w in t for t in texts)] == []
    assert len(texts) == len(warned)
    # the vectors of LAPACK's SVD are NumPy's (tapegrad) and PyTorch's: each may differ in
    # sign, so raw factors are compared in absolute value and their gradients in the
    # sign-fixed cases, where a flip cannot change the function
    raw_svd = case.startswith("svd_") and not any(
        k in case for k in ("sign_fixed", "reconstructed", "squared", "no_uv"))
    for a, b in zip(values, want[0]):
        if raw_svd:
            a, b = np.abs(a), np.abs(b)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    if raw_svd:
        return
    if want[2] is None:
        assert grad is None
    else:
        np.testing.assert_allclose(grad, want[2], rtol=1e-9, atol=1e-10)


def test_renorm_values_are_pytorchs_to_an_ulp():
    """The scale factor and the product round as PyTorch's kernel rounds them; the norm is
    tapegrad's vector_norm, whose sum of squares may round a last bit differently."""
    x = rng.normal(size=(6, 7)) * 3.0
    for p, dim in ((2, 0), (2, 1), (1, 0), (3.5, 1), (float("inf"), 0)):
        got = tg.renorm(tg.tensor(x), p, dim, 1.25).numpy()
        want = torch.renorm(torch.tensor(x), p, dim, 1.25).numpy()
        np.testing.assert_allclose(got, want, rtol=5e-16, atol=0)
        if p in (1, float("inf")):   # no sum of squares: the same bits
            np.testing.assert_array_equal(got, want)


def test_adjoint_and_mH_are_views():
    x = tg.tensor(TALL)
    for y in (x.adjoint(), x.mH, tg.adjoint(x)):
        assert y._base is x
        y[0, 1] = 5.0
    assert x[1, 0].item() == 5.0


def _central(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        grad[i] = (f(up) - f(down)) / (2 * eps)
    return grad


@pytest.mark.parametrize("p,dim", [(2, 0), (1, 1), (3.0, -1), (float("inf"), 1)])
def test_renorm_gradient_matches_central_differences(p, dim):
    x0 = rng.normal(size=(3, 4)) + 0.1   # away from the norms' kinks
    w = rng.normal(size=(3, 4))

    def f(v):
        return float((tg.renorm(tg.tensor(v), p, dim, 0.8) * tg.tensor(w)).sum())
    x = tg.tensor(x0, requires_grad=True)
    (tg.renorm(x, p, dim, 0.8) * tg.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), _central(f, x0), rtol=1e-6, atol=1e-7)


def test_svd_gradient_matches_central_differences():
    """A function of U, S and V that a sign flip of a singular pair leaves alone."""
    x0 = TALL.copy()

    def loss(m, x):
        U, S, V = m.svd(x)
        return (U ** 2 * m.tensor(np.arange(12.0).reshape(4, 3))).sum() + (S ** 3).sum() + \
            ((V ** 2) * m.tensor(np.arange(9.0).reshape(3, 3))).sum()

    x = tg.tensor(x0, requires_grad=True)
    loss(tg, x).backward()
    np.testing.assert_allclose(x.grad.numpy(),
                               _central(lambda v: float(loss(tg, tg.tensor(v))), x0),
                               rtol=1e-6, atol=1e-6)


def test_renorm_in_place_changes_the_tensor_and_checks_first():
    t = tg.tensor(TALL.copy())
    before = t.numpy().copy()
    with pytest.raises(RuntimeError, match="non-positive-norm"):
        t.renorm_(0, 0, 1.0)
    np.testing.assert_array_equal(t.numpy(), before)   # bad input corrupts nothing
    out = t.renorm_(2, 0, 1.0)
    assert out is t
    np.testing.assert_allclose(t.numpy(), torch.tensor(before).renorm_(2, 0, 1.0).numpy(),
                               rtol=5e-16, atol=0)


def test_qr_warns_as_pytorch_once_per_call():
    with pytest.warns(UserWarning, match="torch.qr is deprecated"):
        tg.qr(tg.tensor(SQUARE))


@pytest.mark.parametrize("fn", [
    lambda m, x: (m.renorm(x, 2, 0, 1.0) * 3.0).sum(),
    lambda m, x: (m.svd(x)[1] ** 2).sum() + (m.svd(x, compute_uv=False)[1]).sum(),
    lambda m, x: (x.mH @ x).sum() + m.adjoint(x).sum(),
], ids=["renorm", "svd", "adjoint"])
def test_compiled_calls_follow_changing_inputs(fn):
    """Which slices renorm scales depends on the values: a replay must decide it anew."""
    compiled = tg.compile(lambda x: fn(tg, x))
    for k in range(4):
        data = rng.normal(size=(4, 3)) * (0.3 + k)
        x1, x2 = tg.tensor(data, requires_grad=True), tg.tensor(data, requires_grad=True)
        got, want = compiled(x1), fn(tg, x2)
        got.backward()
        want.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-13)
        np.testing.assert_allclose(x1.grad.numpy(), x2.grad.numpy(), rtol=1e-12, atol=1e-13)
        t = torch.tensor(data, requires_grad=True)
        fn(torch, t).backward()
        np.testing.assert_allclose(x1.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-10)
    assert compiled.stats.replays >= 1


# --- LU -------------------------------------------------------------------------------------
SING = [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]
RHS = rng.normal(size=(3, 2))
RHS_BATCH = rng.normal(size=(2, 3, 2))
SQ_BATCH = rng.normal(size=(2, 3, 3))


def _int32(m, values):
    return m.tensor(values, dtype=m.int32)


LU_PROGRAMS = {
    "lu_factor": (lambda m, x: m.linalg.lu_factor(x), SQUARE),
    "lu_factor_batch": (lambda m, x: m.linalg.lu_factor(x), SQ_BATCH),
    "lu_factor_wide": (lambda m, x: m.linalg.lu_factor(x), WIDE),
    "lu_factor_tall": (lambda m, x: m.linalg.lu_factor(x), TALL),
    "lu_factor_batch_wide": (lambda m, x: m.linalg.lu_factor(x), BATCH),
    "lu_factor_ex": (lambda m, x: m.linalg.lu_factor_ex(x), SQUARE),
    "lu_factor_ex_singular": (lambda m, x: m.linalg.lu_factor_ex(x)[1:], SING),
    "lu_factor_singular": (lambda m, x: m.linalg.lu_factor(x), SING),
    "lu_factor_ex_check": (lambda m, x: m.linalg.lu_factor_ex(x, check_errors=True), SING),
    "lu_factor_batch_singular": (
        lambda m, x: m.linalg.lu_factor(m.stack([x * 0.0 + m.eye(3), x])), SING),
    "lu_factor_no_pivot": (lambda m, x: m.linalg.lu_factor(x, pivot=False), SQUARE),
    "lu_factor_vector": (lambda m, x: m.linalg.lu_factor(x[0]), SQUARE),
    "lu_factor_long": (lambda m, x: m.linalg.lu_factor(x.long()), SQUARE),
    "lu_factor_empty": (lambda m, x: m.linalg.lu_factor(x[:0]), SQUARE),
    "lu_factor_empty_batch": (lambda m, x: m.linalg.lu_factor(x[:, :0]), SQ_BATCH),
    "torch_lu": (lambda m, x: m.lu(x), SQUARE),
    "torch_lu_infos": (lambda m, x: m.lu(x, get_infos=True), SQ_BATCH),
    "torch_lu_singular": (lambda m, x: x.lu(get_infos=True), SING),
    "torch_lu_method": (lambda m, x: x.lu(), WIDE),
    "linalg_lu": (lambda m, x: m.linalg.lu(x), SQUARE),
    "linalg_lu_tall": (lambda m, x: m.linalg.lu(x), TALL),
    "linalg_lu_wide_batch": (lambda m, x: m.linalg.lu(x), BATCH),
    "linalg_lu_singular": (lambda m, x: m.linalg.lu(x)[1:], SING),
    "lu_unpack": (lambda m, x: m.lu_unpack(*m.linalg.lu_factor(x)), SQUARE),
    "lu_unpack_tall": (lambda m, x: m.lu_unpack(*m.linalg.lu_factor(x)), TALL),
    "lu_unpack_wide_batch": (lambda m, x: m.lu_unpack(*m.linalg.lu_factor(x)), BATCH),
    "lu_unpack_of_data": (lambda m, x: m.lu_unpack(x, _int32(m, [3, 3, 3])), SQUARE),
    "lu_unpack_no_pivots": (
        lambda m, x: m.lu_unpack(x, _int32(m, [2, 3, 3]), unpack_pivots=False), SQUARE),
    "lu_unpack_long_pivots": (lambda m, x: m.lu_unpack(x, m.tensor([3, 3, 3])), SQUARE),
    "lu_solve": (lambda m, x: m.linalg.lu_solve(*m.linalg.lu_factor(x), m.tensor(RHS)),
                 SQUARE),
    "lu_solve_grad_b": (lambda m, x: m.linalg.lu_solve(*m.linalg.lu_factor(
        m.tensor(SQUARE)), x), RHS),
    "lu_solve_of_data": (lambda m, x: m.linalg.lu_solve(x, _int32(m, [3, 2, 3]),
                                                        m.tensor(RHS)), SQUARE),
    "lu_solve_adjoint": (lambda m, x: m.linalg.lu_solve(*m.linalg.lu_factor(x),
                                                        m.tensor(RHS), adjoint=True), SQUARE),
    "lu_solve_right": (lambda m, x: m.linalg.lu_solve(*m.linalg.lu_factor(x),
                                                      m.tensor(RHS).mT, left=False), SQUARE),
    "lu_solve_right_adjoint": (lambda m, x: m.linalg.lu_solve(
        *m.linalg.lu_factor(x), m.tensor(RHS).mT, left=False, adjoint=True), SQUARE),
    "lu_solve_batch": (lambda m, x: m.linalg.lu_solve(*m.linalg.lu_factor(x),
                                                      m.tensor(RHS_BATCH)), SQ_BATCH),
    "lu_solve_broadcast_b": (lambda m, x: m.linalg.lu_solve(*m.linalg.lu_factor(x),
                                                            m.tensor(RHS)), SQ_BATCH),
    "lu_solve_b_batch": (lambda m, x: m.linalg.lu_solve(*m.linalg.lu_factor(m.tensor(
        SQUARE)), x), RHS_BATCH),
    "torch_lu_solve": (lambda m, x: m.lu_solve(m.tensor(RHS), *m.lu(x)), SQUARE),
    "torch_lu_solve_method": (lambda m, x: x.lu_solve(*m.linalg.lu_factor(m.tensor(SQUARE))),
                              RHS),
    "lu_solve_vector_b": (lambda m, x: m.linalg.lu_solve(*m.linalg.lu_factor(x),
                                                         m.tensor(RHS[:, 0])), SQUARE),
    "lu_solve_bad_shape": (lambda m, x: m.linalg.lu_solve(*m.linalg.lu_factor(x),
                                                          m.tensor(RHS[:2])), SQUARE),
    "lu_solve_bad_dtype": (lambda m, x: m.linalg.lu_solve(*m.linalg.lu_factor(x),
                                                          m.tensor(RHS).long()), SQUARE),
    "lu_solve_not_square": (lambda m, x: m.linalg.lu_solve(x, _int32(m, [1, 2]),
                                                           m.tensor(RHS[:2])), WIDE),
    "lu_solve_long_pivots": (lambda m, x: m.linalg.lu_solve(x, m.tensor([1, 2, 3]),
                                                            m.tensor(RHS)), SQUARE),
}


@pytest.mark.parametrize("case", sorted(LU_PROGRAMS))
def test_lu_matches_pytorch(case):
    prog, value = LU_PROGRAMS[case]
    got, want = outcome(tg, prog, value), outcome(torch, prog, value)
    if want[0] == "error":
        assert got == want
        return
    values, names, grad, texts, shapes, kind = got
    assert (names, shapes, kind) == (want[1], want[4], want[5])
    assert set(want[3]) <= set(texts)
    # PyTorch warns its deprecations once a process; tapegrad at every call
    if case.startswith("torch_lu"):
        assert texts and all("is deprecated in favor of torch.linalg.lu_" in t for t in texts)
    else:
        assert texts == []
    for a, b in zip(values, want[0]):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    if want[2] is None:
        assert grad is None
    else:
        np.testing.assert_allclose(grad, want[2], rtol=1e-9, atol=1e-10)


def test_lu_unpack_without_data_gives_empty_factors_in_the_graph():
    """PyTorch's backward through them raises (a triu of a 1-D gradient); tapegrad's gives
    LU a zero gradient."""
    outs = []
    for m in (tg, torch):
        x = m.tensor(SQUARE, requires_grad=True)
        P, L, U = m.lu_unpack(x, _int32(m, [2, 3, 3]), False)
        outs.append((P.tolist(), L.shape, U.shape, _name(m, L), _name(m, U)))
    assert outs[0][1:] == outs[1][1:] == ((0,), (0,), "LuUnpackBackward0", "LuUnpackBackward0")
    assert outs[0][0] == outs[1][0]
    x = tg.tensor(SQUARE, requires_grad=True)
    (tg.lu_unpack(x, _int32(tg, [2, 3, 3]), False)[1].sum() + x.sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((3, 3)))


@pytest.mark.parametrize("shape", [(3, 3), (2, 4), (4, 2), (2, 3, 3)])
def test_lu_gradient_matches_central_differences(shape):
    x0 = rng.normal(size=shape) + 2.0 * np.eye(*shape[-2:])
    w = rng.normal(size=shape)

    def f(v):
        return float((tg.linalg.lu_factor(tg.tensor(v)).LU * tg.tensor(w)).sum())
    x = tg.tensor(x0, requires_grad=True)
    (tg.linalg.lu_factor(x).LU * tg.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), _central(f, x0), rtol=1e-6, atol=1e-7)


def test_lu_second_order_matches_pytorch():
    """The backward is made of tapegrad ops: create_graph differentiates it."""
    grads = []
    for m in (tg, torch):
        x = m.tensor(SQUARE, dtype=m.float64, requires_grad=True)
        y = (m.linalg.lu_factor(x).LU ** 2).sum()
        (g,) = m.autograd.grad(y, x, create_graph=True)
        (g * m.tensor(SQUARE)).sum().backward()
        grads.append(np.array(x.grad.tolist()))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-9, atol=1e-10)


def test_compiled_lu_follows_changing_pivots():
    """The pivots (and the permutation lu_unpack and lu_solve read from them) depend on the
    values: a compiled call runs eagerly and says why, and is right for every input."""
    def f(m, x, b):
        LU, pivots = m.linalg.lu_factor(x)
        return (m.linalg.lu_solve(LU, pivots, b) ** 2).sum() + \
            (m.lu_unpack(LU, pivots).L * 3.0).sum()

    compiled = tg.compile(lambda x, b: f(tg, x, b))
    for k in range(4):
        a = rng.normal(size=(3, 3))
        a[k % 3] *= 10.0           # a different largest pivot each time
        b = rng.normal(size=(3, 2))
        x1, x2 = tg.tensor(a, requires_grad=True), tg.tensor(a, requires_grad=True)
        got, want = compiled(x1, tg.tensor(b)), f(tg, x2, tg.tensor(b))
        got.backward()
        want.backward()
        assert got.item() == want.item()
        np.testing.assert_array_equal(x1.grad.numpy(), x2.grad.numpy())
        t = torch.tensor(a, requires_grad=True)
        ref = f(torch, t, torch.tensor(b))
        ref.backward()
        np.testing.assert_allclose(got.item(), ref.item(), rtol=1e-12)
        np.testing.assert_allclose(x1.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-10)
    assert compiled.stats.replays == 0
    assert compiled.stats.eager_reasons


def test_compiled_lu_solve_with_given_pivots_runs_eagerly():
    """Pivots passed in (not computed in the call): lu_solve's permutation still comes from
    their values, so a replay with other pivots must not reuse the traced one."""
    LU = tg.tensor(np.triu(SQUARE) + np.tril(SQUARE, -1) * 0.1 + 3.0 * np.eye(3))
    compiled = tg.compile(lambda b, p: tg.linalg.lu_solve(LU, p, b).sum())
    for piv in ([1, 2, 3], [3, 2, 3], [2, 3, 3], [3, 3, 3]):
        p = tg.tensor(piv, dtype=tg.int32)
        b = tg.tensor(RHS)
        got = compiled(b, p).item()
        want = torch.linalg.lu_solve(torch.tensor(LU.numpy()), torch.tensor(piv,
                                     dtype=torch.int32), torch.tensor(RHS)).sum().item()
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert compiled.stats.replays == 0


# --- cholesky_inverse, triangular_solve -----------------------------------------------------
CHOL = np.linalg.cholesky(SQUARE @ SQUARE.T + np.eye(3))
CHOL_BATCH = np.linalg.cholesky(SQ_BATCH @ np.swapaxes(SQ_BATCH, -1, -2) + np.eye(3))
TRI = np.triu(SQUARE) + 2.0 * np.eye(3)

OLD_PROGRAMS = {
    "cholesky_inverse": (lambda m, x: m.cholesky_inverse(x), CHOL),
    "cholesky_inverse_upper": (lambda m, x: x.cholesky_inverse(upper=True), CHOL.T.copy()),
    "cholesky_inverse_batch": (lambda m, x: m.cholesky_inverse(x), CHOL_BATCH),
    "cholesky_inverse_full_matrix": (lambda m, x: m.cholesky_inverse(x, True), SQUARE + 3.0),
    "cholesky_inverse_empty": (lambda m, x: m.cholesky_inverse(x[:0, :0]), CHOL),
    "cholesky_inverse_vector": (lambda m, x: m.cholesky_inverse(x[0]), CHOL),
    "cholesky_inverse_not_square": (lambda m, x: m.cholesky_inverse(x[:2]), CHOL),
    "cholesky_inverse_long": (lambda m, x: m.cholesky_inverse(x.long()), CHOL),
    "triangular_solve": (lambda m, x: m.triangular_solve(m.tensor(RHS), x), TRI),
    "triangular_solve_lower": (lambda m, x: m.triangular_solve(m.tensor(RHS), x.mT, False),
                               TRI),
    "triangular_solve_transpose": (lambda m, x: m.triangular_solve(m.tensor(RHS), x,
                                                                   transpose=True), TRI),
    "triangular_solve_unit": (lambda m, x: x.triangular_solve(m.tensor(TRI), False, True,
                                                              True), RHS),
    "triangular_solve_full_a": (lambda m, x: m.triangular_solve(m.tensor(RHS), x),
                                SQUARE + 3.0 * np.eye(3)),
    "triangular_solve_batch_b": (lambda m, x: m.triangular_solve(m.tensor(RHS_BATCH), x), TRI),
    "triangular_solve_grad_b": (lambda m, x: m.triangular_solve(x, m.tensor(TRI)), RHS_BATCH),
    "triangular_solve_vector": (lambda m, x: m.triangular_solve(m.tensor(RHS[:, 0]), x), TRI),
    "triangular_solve_vector_a": (lambda m, x: m.triangular_solve(x, x[0]), RHS),
    "triangular_solve_bad_shape": (lambda m, x: m.triangular_solve(m.tensor(RHS[:2]), x), TRI),
}


@pytest.mark.parametrize("case", sorted(OLD_PROGRAMS))
def test_old_names_match_pytorch(case):
    prog, value = OLD_PROGRAMS[case]
    got, want = outcome(tg, prog, value), outcome(torch, prog, value)
    if want[0] == "error":
        assert got == want
        return
    values, names, grad, texts, shapes, kind = got
    assert (names, shapes, kind) == (want[1], want[4], want[5])
    assert set(want[3]) <= set(texts)
    if case.startswith("triangular_solve"):
        assert len(texts) == 1 and "torch.triangular_solve is deprecated" in texts[0]
    else:
        assert texts == []
    for a, b in zip(values, want[0]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    if case == "cholesky_inverse_full_matrix":
        # PyTorch's gradient multiplies by the whole input, the triangle it did not read
        # included; tapegrad's by the triangle (the factor it inverted): they differ here
        # (and agree for every triangular input above)
        assert not np.allclose(grad, want[2])
        return
    np.testing.assert_allclose(grad, want[2], rtol=1e-9, atol=1e-10)


def test_cholesky_inverse_gradient_matches_central_differences():
    x0 = CHOL.copy()
    w = rng.normal(size=(3, 3))

    def f(v):
        return float((tg.cholesky_inverse(tg.tensor(v)) * tg.tensor(w)).sum())
    x = tg.tensor(x0, requires_grad=True)
    (tg.cholesky_inverse(x) * tg.tensor(w)).sum().backward()
    # the upper triangle of a lower factor is not read: its central difference is 0, while
    # the gradient there (PyTorch's too) is that of L treated as full
    lower = np.tril(np.ones((3, 3), dtype=bool))
    np.testing.assert_allclose(x.grad.numpy()[lower], _central(f, x0)[lower], rtol=1e-6,
                               atol=1e-7)
