"""After a caught error the engine is consistent: what was recorded before the error still
differentiates correctly, and the next forward and backward are right.  A single op that
rejects its arguments records nothing at all.
"""
import numpy as np
import pytest

import strategies as S  # noqa: F401 - makes the source tree importable
import tapegrad as tg
from bad_calls import BAD_CALLS
from tapegrad.tape import state


def leaves(seed=0):
    rng = np.random.default_rng(seed)
    av, bv = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    return av, bv, tg.tensor(av, requires_grad=True), tg.tensor(bv, requires_grad=True)


def expected(av, bv):
    """Gradients of sum(sin(a*b)) + sum(2*exp(a)) with respect to a and b."""
    c = np.cos(av * bv)
    return c * bv + 2.0 * np.exp(av), c * av


def assert_grads(a, b, av, bv, times=1):
    ga, gb = expected(av, bv)
    np.testing.assert_allclose(a.grad._value, times * ga, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b.grad._value, times * gb, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_a_caught_error_leaves_the_engine_consistent(name):
    av, bv, a, b = leaves()
    before = (a * b).sin()  # recorded before the error, used after it
    with pytest.raises(Exception):
        BAD_CALLS[name](tg)
    (before.sum() + (a.exp() * 2.0).sum()).backward()
    assert_grads(a, b, av, bv)
    # a fresh forward and backward, from scratch, accumulating
    ((a * b).sin().sum() + (2.0 * a.exp()).sum()).backward()
    assert_grads(a, b, av, bv, times=2)


class Recorded:
    """Inputs for the rejected ops, all already on the tape: x (2, 3), v (4,), s 0-d and
    x3 (1, 2, 3) floats, and a (2, 3) bool mask."""

    def __init__(self, a, b):
        self.x = a * 1.0
        self.v = (b * 1.0).reshape(-1)[:4]
        self.s = (a * b).sum()
        self.x3 = self.x.unsqueeze(0)
        self.mask = a._value > 0


# Ops rejecting arguments that are already recorded
SINGLE_OP_ERRORS = {
    "add": lambda r: r.x + r.v,
    "mul": lambda r: r.v * r.x,
    "pow": lambda r: r.x ** r.v,
    "maximum": lambda r: tg.maximum(r.x, r.v),
    "where": lambda r: tg.where(tg.tensor(r.mask), r.x, r.v),
    "matmul": lambda r: r.x @ r.v,
    "matmul 0-d": lambda r: r.s @ r.v,
    "sum dim": lambda r: r.x.sum(2),
    "mean dims": lambda r: r.x.mean((0, 0)),
    "prod dim": lambda r: r.v.prod(1),
    "max dim": lambda r: r.x.max(5),
    "amax dim": lambda r: r.x.amax(-3),
    "var dim": lambda r: r.x.var(2),
    "logsumexp dim": lambda r: r.x.logsumexp(3),
    "softmax dim": lambda r: r.x.softmax(2),
    "norm dim": lambda r: r.x.norm(dim=4),
    "getitem int": lambda r: r.x[7],
    "getitem too many": lambda r: r.v[0, 0],
    "getitem list": lambda r: r.v[[0, 9]],
    "getitem mask": lambda r: r.v[r.mask],
    "getitem 0-d": lambda r: r.s[0],
    "cat": lambda r: tg.cat([r.x, r.v]),
    "cat 0-d": lambda r: tg.cat([r.v, r.s]),
    "stack": lambda r: tg.stack([r.x, r.v]),
    "reshape": lambda r: r.x.reshape(4, 2),
    "view": lambda r: r.x.view(-1, 4),
    "expand": lambda r: r.x.expand(3, 3),
    "permute": lambda r: r.x.permute(0, 0),
    "transpose": lambda r: r.x.transpose(0, 2),
    "unsqueeze": lambda r: r.x.unsqueeze(5),
    "flatten": lambda r: r.x.flatten(1, 0),
    "t": lambda r: r.x3.t(),
    "clamp": lambda r: r.x.clamp(),
}


def tape_state():
    tape = state.tape
    if tape is None:
        return None
    return tape, len(tape), tape.top, len(tape.aux), len(tape.faux)


@pytest.mark.parametrize("name", sorted(SINGLE_OP_ERRORS))
def test_a_rejected_op_records_nothing(name):
    av, bv, a, b = leaves(1)
    r = Recorded(a, b)
    snapshot = tape_state()
    assert snapshot is not None and snapshot[0] is r.x._tape
    with pytest.raises((RuntimeError, IndexError, ValueError, TypeError)):
        SINGLE_OP_ERRORS[name](r)
    assert tape_state() == snapshot
    (r.x.sin().sum() * 0.0 + (a * b).sin().sum() + (2.0 * a.exp()).sum()).backward()
    assert_grads(a, b, av, bv)
