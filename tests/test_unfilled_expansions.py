"""A number broadcast against a vector (``a + b * x``) is recorded as a hidden expansion of
the number to the vector's size.  In eager mode, where no rule of the op reads those values
in the backward (an add or a sub; a mul whose other operand needs no gradient), they are left
out of the arena (``Tape.leave_unfilled``), and a reader that takes the arena as it is (a
differentiable backward) has them written first (``Tape.fill_arena``).  Whatever is left out,
the values and gradients must be those of a recorder that writes everything, to the bit."""
import contextlib

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
from tapegrad import functional, hot_tapes


@contextlib.contextmanager
def _unfilled_from(n):
    before = functional._UNFILLED_FROM
    functional._UNFILLED_FROM = n
    try:
        yield
    finally:
        functional._UNFILLED_FROM = before


OPS = {
    "add": lambda p, v: p + v,
    "radd": lambda p, v: v + p,
    "sub": lambda p, v: p - v,
    "rsub": lambda p, v: v - p,
    "mul": lambda p, v: p * v,
    "rmul": lambda p, v: v * p,
    "div": lambda p, v: v / p,
    "rdiv": lambda p, v: p / v,
    "max": lambda p, v: _lib(p).maximum(p, v),
    # ops whose gradient for one input reads less than the other's (reads_for)
    "fmod": lambda p, v: _lib(p).fmod(p, v),
    "rfmod": lambda p, v: _lib(p).fmod(v, p),
    "remainder": lambda p, v: _lib(p).remainder(p, v),
    "rremainder": lambda p, v: _lib(p).remainder(v, p),
    "copysign": lambda p, v: _lib(p).copysign(p, v),
    "rcopysign": lambda p, v: _lib(p).copysign(v, p),
    "hypot": lambda p, v: _lib(p).hypot(p, v),
    "pow": lambda p, v: p ** v,
}


def _lib(t):
    return tg if isinstance(t, tg.Tensor) else torch


def _run(lib, op, p_value, v_value, p_grad, v_grad, order):
    """A two-step program over one number p and one vector v, and its gradients (first
    order, or of the squared first-order gradients with create_graph)."""
    p = lib.tensor(p_value, requires_grad=p_grad)
    v = lib.tensor(v_value, requires_grad=v_grad)
    s = lib.tensor(0.5, requires_grad=True)   # (so that something needs a gradient)
    y = OPS[op](p, v)
    loss = ((y * s) ** 2).sum() + OPS[op](p, y).sum()
    if lib is tg:
        _poison(loss)
    leaves = [t for t in (p, v, s) if t.requires_grad]
    if order == 1:
        loss.backward()
        grads = [t.grad for t in leaves]
    else:
        gs = lib.autograd.grad(loss, leaves, create_graph=True)
        (sum((g * g).sum() for g in gs) * s).backward()
        grads = [t.grad for t in leaves]
    return [float(loss.item())] + [np.asarray(g.detach().numpy(), dtype=np.float64).copy()
                                   for g in grads]


def _poison(t):
    """nan where values were left out (the arena's chunks are reused, so the earlier run's
    values might stand there by chance): a rule reading them would show."""
    tape = t._tape
    for off, n, _ in tape.unfilled or ():
        tape.vals[off:off + n] = np.nan


@given(op=st.sampled_from(sorted(OPS)), n=st.integers(2, 40), p_grad=st.booleans(),
       v_grad=st.booleans(), order=st.sampled_from([1, 2]),
       seed=st.integers(0, 2**31 - 1))
def test_left_out_values_change_no_bit(op, n, p_grad, v_grad, order, seed):
    rng = np.random.default_rng(seed)
    p_value = float(rng.uniform(0.5, 2.0))
    v_value = rng.standard_normal(n)
    with _unfilled_from(10**12):
        _run(tg, op, p_value, v_value, p_grad, v_grad, order)   # (tapes sized alike)
        want = _run(tg, op, p_value, v_value, p_grad, v_grad, order)
    with _unfilled_from(2):
        got = _run(tg, op, p_value, v_value, p_grad, v_grad, order)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).view(np.int64), np.asarray(w).view(np.int64))
    theirs = _run(torch, op, p_value, v_value, p_grad, v_grad, order)
    for g, t in zip(got, theirs):
        np.testing.assert_allclose(g, t, rtol=1e-10, atol=1e-12)


def _cubic_fit(steps, n=5_000):
    """PyTorch's tutorial fit (W8): four numbers broadcast against x, each step."""
    xs = np.linspace(-np.pi, np.pi, n)
    x, y = tg.tensor(xs), tg.tensor(np.sin(xs))
    params = [tg.tensor(v, requires_grad=True) for v in (0.1, -0.2, 0.3, 0.05)]
    a, b, c, d = params
    out = []
    for _ in range(steps):
        loss = ((a + b * x + c * x ** 2 + d * x ** 3 - y) ** 2).sum()
        left_out = len(loss._tape.unfilled or ())
        _poison(loss)
        loss.backward()
        out.append((loss.item(), [p.grad.item() for p in params], left_out))
        with tg.no_grad():
            for p in params:
                p -= 1e-6 * p.grad
                p.grad = None
    return out


@pytest.mark.parametrize("hot", [False, True])
def test_the_cubic_fit_leaves_its_four_expansions_out_with_the_same_bits(hot, monkeypatch):
    """By default, from 1,024 values; the interpreter's sweep and a hot tape's generated one
    alike (a, b*x, c*x**2, d*x**3: x needs no gradient, so no rule reads them)."""
    monkeypatch.setattr(hot_tapes, "ENABLED", hot)
    monkeypatch.setattr(hot_tapes, "_WORK", 0)
    _cubic_fit(1)
    got = _cubic_fit(6)
    with _unfilled_from(10**12):
        want = _cubic_fit(6)
    assert [left for _, _, left in got] == [4] * 6
    assert [left for _, _, left in want] == [0] * 6
    assert [(loss, grads) for loss, grads, _ in got] == [(loss, grads) for loss, grads, _ in want]


def test_a_differentiable_backward_fills_them_in_first():
    """The create_graph rules take values from the arena as it is (``higher._handle``): the
    values left out are written before they run, as a full recorder would have them."""
    with _unfilled_from(2):
        x = tg.tensor(np.linspace(0.0, 1.0, 50))
        b = tg.tensor(1.5, requires_grad=True)
        w = tg.tensor(np.ones(50), requires_grad=True)
        loss = ((b * x + b) * w).sum()
        tape = loss._tape
        spans = list(tape.unfilled)
        assert len(spans) == 2
        for off, n, _ in spans:
            tape.vals[off:off + n] = np.nan    # (what the arena held is anybody's)
        gw, = tg.autograd.grad(loss, w, create_graph=True)
        assert tape.unfilled is None
        for off, n, value in spans:
            np.testing.assert_array_equal(tape.vals[off:off + n], np.full(n, 1.5))
        gw.sum().backward()
    np.testing.assert_array_equal(gw.detach().numpy(), 1.5 * np.linspace(0.0, 1.0, 50) + 1.5)
    assert b.grad.item() == pytest.approx(75.0)
