"""The gradient arena of a sweep: cleared part by part just before each part's first use,
written whole by a matrix product's first contribution, handed over as ``.grad`` when the
leaf gradients are large; and the BLAS behind the compiled matrix products."""
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
from tapegrad.tape import state


def _poison(n=1 << 15):
    """A gradient arena full of nan: any part the sweep forgot to clear comes out nan."""
    state.grads = np.full(max(n, state.grads.size), np.nan)


def _numerical_grads(fn, values, eps=1e-6):
    grads = []
    for i, v in enumerate(values):
        g = np.empty_like(v)
        for j in np.ndindex(v.shape):
            plus = [w.copy() for w in values]
            minus = [w.copy() for w in values]
            plus[i][j] += eps
            minus[i][j] -= eps
            with tg.no_grad():
                hi = fn(*map(tg.tensor, plus)).item()
                lo = fn(*map(tg.tensor, minus)).item()
            g[j] = (hi - lo) / (2 * eps)
        grads.append(g)
    return grads


def _layer(x, w, b, v):
    return ((x @ w + b).relu() @ v).sum()


def _reused(x, w, b, v):
    # w's first gradient comes from the product of w * w, a later record: the matrix
    # product's contribution is added, not written
    h = x @ w
    return (h * h).sum() + (w * w).sum() * b.sum() + (h @ v).mean()


def _reused_left(x, w, b, v):
    # the other way round: x's first gradient comes from x * x, w's from the product
    return ((x @ w) @ v).sum() + (x * x).sum() * b.sum()


def _concatenated(x, w, b, v):
    h = x @ w
    return tg.cat([h, 2.0 * h + b], dim=0).tanh().sum() + (h @ v).sum()


def _square(x, w, b, v):
    # a matrix product of a record with itself: both gradients go to one place
    s = (w.T @ w)
    return (s @ s).sum() + (x @ w).sum() + (b * v.sum()).sum()


def _batched(x, w, b, v):
    # (2, m, k) @ (k, n): a batched product over a hidden broadcast of w
    xs = tg.stack([x, x * 0.5])
    return ((xs @ w + b).sin() @ v).sum()


def _sums(x, w, b, v):
    # sums, differences and relus write their inputs' first gradients; h + h and x - x
    # write one and then add to it
    h = x @ w
    s = (h + h) - (x - x).sum() + (h - 1.0).relu() + (2.0 - h) + (h + b)
    return (s.relu() @ v).sum()


PROGRAMS = [_layer, _reused, _reused_left, _concatenated, _square, _batched, _sums]


@given(program=st.sampled_from(PROGRAMS), m=st.integers(1, 4), k=st.integers(1, 4),
       n=st.integers(1, 4), seed=st.integers(0, 2**31 - 1))
def test_matrix_product_gradients_with_an_arena_full_of_nan(program, m, k, n, seed):
    """Every part of the arena is cleared or written whole before it is read: with nan in
    it beforehand, eager and replayed gradients still match finite differences."""
    rng = np.random.default_rng(seed)
    values = [rng.standard_normal(s) for s in ((m, k), (k, n), (n,), (n, 3))]
    want = _numerical_grads(program, values)
    compiled = tg.compile(program)
    for run in (program, compiled, compiled, compiled):
        leaves = [tg.tensor(v, requires_grad=True) for v in values]
        loss = run(*leaves)
        _poison()
        loss.backward()
        for leaf, w in zip(leaves, want):
            np.testing.assert_allclose(leaf.grad.detach().numpy(), w, rtol=1e-5, atol=1e-6)


def test_a_large_gradient_is_handed_over_and_never_overwritten():
    """A leaf gradient of at least 4096 values becomes ``.grad`` as it is, arena and all;
    the next backward takes another arena, so the first ``.grad`` keeps its values."""
    rng = np.random.default_rng(0)
    w = tg.tensor(rng.standard_normal((64, 64)), requires_grad=True)
    state.grads = np.empty(0)   # the arena this backward takes is its own size
    (w * w).sum().backward()
    first = w.grad
    arena = first.detach().numpy().base
    assert arena is not None and arena.size > 64 * 64   # a view of the arena, no copy
    assert not np.shares_memory(arena, state.grads)
    want = 2 * w.detach().numpy()
    w.grad = None
    (w * 3.0).sum().backward()
    np.testing.assert_array_equal(first.detach().numpy(), want)
    np.testing.assert_array_equal(w.grad.detach().numpy(), np.full((64, 64), 3.0))
    # accumulating into a handed-over .grad adds in place, as into any .grad
    (w * w).sum().backward()
    np.testing.assert_array_equal(w.grad.detach().numpy(), 3.0 + want)


def test_a_small_gradient_is_copied_out_of_the_arena():
    w = tg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    (w * w).sum().backward()
    assert not np.shares_memory(w.grad.detach().numpy(), state.grads)
    (w * 2.0).sum().backward()   # reuses the arena: the first .grad must be unaffected
    np.testing.assert_array_equal(w.grad.detach().numpy(), 2 * np.arange(6.0).reshape(2, 3) + 2)


def test_a_handed_over_gradient_does_not_keep_a_much_larger_arena():
    """A small share of a big arena is copied: it would keep the whole arena alive."""
    big = tg.tensor(np.ones(1 << 16), requires_grad=True)
    (big * big).sum().backward()
    w = tg.tensor(np.ones(4096), requires_grad=True)
    state.grads = np.empty(1 << 16)
    (w * w).sum().backward()
    assert w.grad.detach().numpy().base is None or w.grad.detach().numpy().base.size == 4096


_MATMUL_CHECK = """
import numpy as np, tapegrad as tg
from tapegrad.tape import state
print(tg.blas())
rng = np.random.default_rng(1)
# (products with a vector -- a dimension of 1, or a 1-D operand -- go to dgemv, in each of its
# four orientations over the forward and the two gradients; the rest to dgemm)
for m, k, n in [(3, 4, 5), (1, 6, 1), (7, 1, 2), (2, 0, 3), (0, 2, 2), (40, 30, 20),
                (300, 16, 1), (1, 16, 300), (16, 1, 300), (300, 1, 16), (5, 3, ()), ((), 3, 5),
                ((), 4, ())]:
    A = rng.standard_normal((m, k) if m != () else (k,))
    B = rng.standard_normal((k, n) if n != () else (k,))
    f = tg.compile(lambda a, b: (a @ b).sin().sum())
    for _ in range(3):
        a, b = tg.tensor(A, requires_grad=True), tg.tensor(B, requires_grad=True)
        loss = f(a, b)
        state.grads = np.full(max(1 << 12, state.grads.size), np.nan)   # stale nan
        loss.backward()
        g = np.cos(A @ B)
        np.testing.assert_allclose(loss.item(), np.sin(A @ B).sum(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(a.grad.detach().numpy(),
                                   np.multiply.outer(g, B) if n == () else g @ B.T,
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(b.grad.detach().numpy(),
                                   np.multiply.outer(A, g) if m == () else A.T @ g,
                                   rtol=1e-12, atol=1e-12)
"""


def _run_with_blas(choice):
    env = dict(os.environ, TAPEGRAD_BLAS=choice)
    return subprocess.run([sys.executable, "-c", _MATMUL_CHECK], env=env,
                          capture_output=True, text=True, timeout=600)


def test_default_blas_gives_the_matrix_products_and_their_gradients():
    done = _run_with_blas("default")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["default"]


def test_mkl_gives_the_same_products_where_it_is_installed():
    """``auto`` takes MKL where ``pip install tapegrad[mkl]`` put it, else the default."""
    from tapegrad import _blas
    done = _run_with_blas("auto")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["mkl" if _blas._mkl_library() else "default"]
    forced = _run_with_blas("mkl")
    if _blas._mkl_library():
        assert forced.returncode == 0, forced.stderr
        assert forced.stdout.split() == ["mkl"]
    else:
        assert forced.returncode != 0
        assert "TAPEGRAD_BLAS=mkl, but MKL is not installed" in forced.stderr


def test_an_unknown_blas_choice_is_refused_at_import():
    done = _run_with_blas("openblas64")
    assert done.returncode != 0
    assert "TAPEGRAD_BLAS must be one of auto, mkl, default, got 'openblas64'" in done.stderr


def test_a_given_seed_is_read_where_it_is_and_left_as_it_was():
    """The sweeps only read a seed: the caller's gradient serves without a copy, is never
    written, and changing it afterwards changes no ``.grad``."""
    rng = np.random.default_rng(7)
    a = tg.tensor(rng.standard_normal((32, 16, 16)), requires_grad=True)
    w = tg.tensor(rng.standard_normal((16, 16)), requires_grad=True)
    seed = rng.standard_normal((32, 16, 16))
    g = tg.tensor(seed.copy())
    y = a @ w
    y.backward(g)
    np.testing.assert_array_equal(g.numpy(), seed)
    want_w = np.einsum("bij,bik->jk", a.detach().numpy(), seed)
    np.testing.assert_allclose(w.grad.numpy(), want_w, rtol=1e-12, atol=1e-12)
    kept = w.grad.numpy().copy()
    g.numpy()[...] = 1.0
    np.testing.assert_array_equal(w.grad.numpy(), kept)
    # the same seed for two outputs that are one record: summed, as PyTorch sums them
    a.grad = w.grad = None
    y = (a @ w).sum()
    tg.autograd.backward([y, y], [tg.tensor(2.0), tg.tensor(3.0)])
    np.testing.assert_allclose(w.grad.numpy(), 5.0 * a.detach().numpy().sum(axis=(0, 1))[:, None]
                               * np.ones((1, 16)), rtol=1e-12)

