"""The gradient of ``linalg.det`` is the cofactor matrix, also at and near a singular matrix.
Near one, det itself is a rounding error times the cofactors, so the gradient must come from
the same LU factors as det (PyTorch's formula): an inverse from another factorisation gave a
quarter of the cofactors of a rank-2 3x3 matrix.  Compared with cofactors from minors and
with PyTorch."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg

torch = pytest.importorskip("torch")


def _cofactors(a):
    n = a.shape[0]
    c = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, 0), j, 1)
            c[i, j] = (-1) ** (i + j) * (np.linalg.det(minor) if n > 1 else 1.0)
    return c


def _det_grad(m, a):
    x = m.tensor(a, requires_grad=True)
    m.linalg.det(x).backward()
    return x.grad.numpy().copy()


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 5), seed=st.integers(0, 2 ** 32 - 1), exact=st.booleans())
def test_rank_deficient_matrices_get_their_cofactors(n, seed, exact):
    rng = np.random.default_rng(seed)
    if exact:   # small integers: the product is exactly of rank n - 1
        a = rng.integers(-3, 4, (n, n - 1)).astype(float) @ \
            rng.integers(-3, 4, (n - 1, n)).astype(float)
    else:       # rounding leaves det a tiny nonzero number, or zero
        a = rng.standard_normal((n, n - 1)) @ rng.standard_normal((n - 1, n))
    want = _cofactors(a)
    scale = max(1.0, np.abs(want).max())
    np.testing.assert_allclose(_det_grad(tg, a), want, rtol=0, atol=1e-9 * scale)


def test_the_rank_two_matrix_that_showed_it():
    a = (np.arange(1.0, 13.0).reshape(3, 4) / 7 + 0.1)[:, :3]
    got = _det_grad(tg, a)
    np.testing.assert_allclose(got, _cofactors(a), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got, _det_grad(torch, a), rtol=1e-9, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 6), seed=st.integers(0, 2 ** 32 - 1))
def test_invertible_matrices_as_pytorch(n, seed):
    a = np.random.default_rng(seed).standard_normal((n, n))
    np.testing.assert_allclose(_det_grad(tg, a), _det_grad(torch, a), rtol=1e-9, atol=1e-12)


def test_forward_mode_and_compile_use_the_same_cofactors():
    a = (np.arange(1.0, 13.0).reshape(3, 4) / 7 + 0.1)[:, :3]
    want = _cofactors(a)
    direction = np.linspace(-1.0, 1.0, 9).reshape(3, 3)
    _, tangent = tg.func.jvp(tg.linalg.det, (tg.tensor(a),), (tg.tensor(direction),))
    assert tangent.item() == pytest.approx(float((want * direction).sum()), abs=1e-12)
    f = tg.compile(lambda x: tg.linalg.det(x))
    for _ in range(3):
        x = tg.tensor(a, requires_grad=True)
        f(x).backward()
        np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-9, atol=1e-12)
    assert f.stats.replays == 2, f.stats
