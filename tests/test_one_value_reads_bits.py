"""A number broadcast against a vector (``a + b * x``) is read by the eager record where it
is, at every element, instead of through a recorded expansion of it to the vector's size
(``functional._binary``; a replay, and an eager run that forward mode or second order will
sweep, still records the expansion).  Whichever way it is recorded, the values and the
gradients must be the same to the bit; through create_graph, whose recorded graph differs by
the expansions, within rounding."""
import contextlib

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.ops as K
from tapegrad import hot_tapes
from tapegrad.tape import state


@contextlib.contextmanager
def _expanded():
    """Record numbers broadcast against vectors as expansions, as a replay records them."""
    state.one_value_reads = False
    try:
        yield
    finally:
        state.one_value_reads = True


def _one_value_expansions(t):
    tape = t._tape
    return sum(1 for r in range(len(tape.op))
               if tape.op[r] == K.EXPAND_S and tape.size[tape.a0[r]] == 1)


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


@given(op=st.sampled_from(sorted(OPS)), n=st.integers(2, 40), p_grad=st.booleans(),
       v_grad=st.booleans(), order=st.sampled_from([1, 2]),
       seed=st.integers(0, 2**31 - 1))
def test_reading_one_value_where_it_is_changes_no_bit(op, n, p_grad, v_grad, order, seed):
    rng = np.random.default_rng(seed)
    p_value = float(rng.uniform(0.5, 2.0))
    v_value = rng.standard_normal(n)
    with _expanded():
        _run(tg, op, p_value, v_value, p_grad, v_grad, order)   # (tapes sized alike)
        want = _run(tg, op, p_value, v_value, p_grad, v_grad, order)
    got = _run(tg, op, p_value, v_value, p_grad, v_grad, order)
    for g, w in zip(got, want):
        if order == 1:
            np.testing.assert_array_equal(np.asarray(g).view(np.int64),
                                          np.asarray(w).view(np.int64))
        else:
            # (the create_graph gradient's own graph differs by the expansions, so its
            # second derivative's sums may round apart in the last bit)
            np.testing.assert_allclose(g, w, rtol=1e-14, atol=1e-15)
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
        expansions = _one_value_expansions(loss)
        loss.backward()
        out.append((loss.item(), [p.grad.item() for p in params], expansions))
        with tg.no_grad():
            for p in params:
                p -= 1e-6 * p.grad
                p.grad = None
    return out


@pytest.mark.parametrize("hot", [False, True])
def test_the_cubic_fit_records_no_expansion_with_the_same_bits(hot, monkeypatch):
    """The interpreter's sweep and a hot tape's generated one alike."""
    monkeypatch.setattr(hot_tapes, "ENABLED", hot)
    monkeypatch.setattr(hot_tapes, "_WORK", 0)
    state.tape, state.last_used = None, 0
    _cubic_fit(1)
    got = _cubic_fit(6)
    state.tape, state.last_used = None, 0
    with _expanded():
        _cubic_fit(1)
        want = _cubic_fit(6)
    assert [count for _, _, count in got] == [0] * 6
    assert [count for _, _, count in want] == [4] * 6
    assert [(loss, grads) for loss, grads, _ in got] == [(loss, grads) for loss, grads, _ in want]
