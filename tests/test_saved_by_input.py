"""What a two-input op's backward reads depends on which inputs need a gradient, as PyTorch
saves only what those gradients read (``x * w`` with only w requiring grad saves x, not w).
So a change in place of a value no needed gradient reads is no error, and a second backward
through a record that saved nothing is none either.  Each case runs in tapegrad and PyTorch:
the same error text, or the same gradients.

A tensor that requires no grad is copied onto the tape when an op reads it; changed in place
afterwards, the backward refuses it where it reads that copy, as PyTorch refuses the tensor
it saved."""
import re

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

V0 = [1.5, 2.5, 0.7]
V1 = [0.8, -1.3, 2.2]
M0 = [[1.5, 2.5, 0.7], [0.3, -0.4, 1.1]]
M1 = [[0.8, -1.3], [2.2, 0.6], [-0.9, 1.7]]

OPS = {
    "mul": (lambda m, a, b: a * b, V0, V1),
    "div": (lambda m, a, b: a / b, V0, V1),
    "pow": (lambda m, a, b: a ** b, V0, V1),     # (a positive base: the log in its gradient)
    "hypot": (lambda m, a, b: m.hypot(a, b), V0, V1),
    "fmod": (lambda m, a, b: m.fmod(a, b), V0, V1),
    "remainder": (lambda m, a, b: m.remainder(a, b), V0, V1),
    "copysign": (lambda m, a, b: m.copysign(a, b), V0, V1),
    "atan2": (lambda m, a, b: m.atan2(a, b), V0, V1),
    "xlogy": (lambda m, a, b: m.xlogy(a, b), V0, [0.8, 1.3, 2.2]),
    "logaddexp": (lambda m, a, b: m.logaddexp(a, b), V0, V1),
    "maximum": (lambda m, a, b: m.maximum(a, b), V0, V1),
    "add": (lambda m, a, b: a + b, V0, V1),
    "sub": (lambda m, a, b: a - b, V0, V1),
    "dot": (lambda m, a, b: a @ b, V0, V1),
    "mm": (lambda m, a, b: a @ b, M0, M1),
    "cross": (lambda m, a, b: m.linalg.cross(a, b), V0, V1),
    "scalar_mul": (lambda m, a, b: a * b, [2.0], V1),
}
GRADS = [(True, False), (False, True), (True, True)]
# what is changed in place between the forward and the backward: an input (a leaf, or a
# value computed from one), the result, or nothing but a second backward
CHANGES = ["leaf0", "leaf1", "value0", "value1", "result", "twice"]


def run(m, op, grads, change):
    """The outcome of the program ``op`` makes, with the inputs ``grads`` says require grad,
    and ``change`` made."""
    f, v0, v1 = OPS[op]
    p = [m.tensor(v, dtype=m.float64, requires_grad=g) for v, g in zip((v0, v1), grads)]
    x = list(p)
    if change.startswith("value"):
        x = [t * 2.0 for t in p]
    y = f(m, *x)
    if change == "result":
        y.add_(0.5)
    elif change.startswith("leaf"):
        with m.no_grad():
            p[int(change[-1])].mul_(1.25)
    elif change.startswith("value"):
        x[int(change[-1])].mul_(1.25)
    try:
        y.sum().backward()
        if change == "twice":
            y.sum().backward()
    except RuntimeError as e:
        text = str(e).split(" Hint: ")[0].replace("torch.", "tapegrad.")
        # (tapegrad adds where the change was made; PyTorch a hint)
        return "error", re.sub(r" It was modified by .*$", "", text)
    return "grads", [None if t.grad is None else np.array(t.grad.tolist()) for t in p]


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("grads", GRADS, ids=["grad0", "grad1", "both"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_a_change_reaches_the_backward_as_in_pytorch(op, grads, change):
    got = run(tg, op, grads, change)
    want = run(torch, op, grads, change)
    assert got[0] == want[0], (got, want)
    if want[0] == "error":
        assert got[1] == want[1]
        return
    for g, w in zip(got[1], want[1]):
        if w is None:
            assert g is None
        else:
            np.testing.assert_allclose(g, w, rtol=1e-14, atol=0)


def test_some_cases_raise_and_some_do_not():
    """The table above is no vacuous agreement: it holds both outcomes, for the same op."""
    assert run(tg, "mul", (True, False), "leaf0")[0] == "grads"     # x saved, not w
    assert run(tg, "mul", (True, True), "leaf0")[0] == "error"      # w saved for x's
    assert run(tg, "div", (True, True), "value0")[0] == "error"      # read for x1's
    assert run(tg, "div", (True, False), "value0")[0] == "grads"
    assert run(tg, "fmod", (True, False), "twice")[0] == "grads"        # nothing saved
    assert run(tg, "fmod", (False, True), "twice")[0] == "error"
    assert run(tg, "pow", (True, False), "result")[0] == "error"      # outputs always saved
    assert run(tg, "mul", (True, False), "result")[0] == "grads"


def _constant_programs():
    """Programs where a tensor that requires no grad is read, then changed in place: by
    ops not recorded, through a view, or by a recorded in-place op (which keeps its own copy
    of the value it replaces, as PyTorch's does).  ``read(t)`` is how an op reads it: t
    itself, or a copy."""
    def start(m):
        w = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        w2 = m.tensor([0.5, -2.0], dtype=m.float64, requires_grad=True)
        y = m.tensor([3.0, 4.0], dtype=m.float64)
        return w, w2, y

    def read_then_recorded_change(m, read):
        w, w2, y = start(m)
        z = w2 * read(y)
        y.div_(w)
        return (z.sum() + y.sum()), (w, w2)

    def recorded_change_only(m, read):
        w, w2, y = start(m)
        y.div_(w)
        return y.sum(), (w,)

    def recorded_then_unrecorded(m, read):
        w, w2, y = start(m)
        z = w2 * read(y)
        y.div_(w)
        with m.no_grad():
            y.mul_(2)
        return z.sum(), (w2,)

    def recorded_change_then_read_by_none(m, read):
        w, w2, y = start(m)
        y.div_(w)
        w2 * y
        with m.no_grad():
            y.mul_(2)
        return y.sum(), (w,)

    def recorded_change_read_then_changed(m, read):
        # (the versions in the message: 1 after div_, 2 after mul_)
        w, w2, y = start(m)
        y.div_(w)
        z = w2 * y
        with m.no_grad():
            y.mul_(2)
        return z.sum(), (w2,)

    def changed_before_recorded_change(m, read):
        # (the versions in the message count the two changes before div_ too)
        w, w2, y = start(m)
        with m.no_grad():
            y.mul_(3)
        y.mul_(2)
        y.div_(w)
        z = w2 * y
        with m.no_grad():
            y.mul_(2)
        return z.sum(), (w2,)

    def changed_read_then_recorded_change(m, read):
        w, w2, y = start(m)
        y.mul_(3)
        z = w2 * read(y)
        y.div_(w)
        return z.sum(), (w2,)

    def read_then_changed_then_recorded_change(m, read):
        w, w2, y = start(m)
        z = w2 * read(y)
        with m.no_grad():
            y.mul_(3)
        y.div_(w)
        return z.sum(), (w2,)

    def read_then_add_(m, read):
        w, w2, y = start(m)
        z = w2 * read(y)
        y.add_(w)
        return z.sum(), (w2,)

    def element_read_then_other_element_set(m, read):
        w, w2, y = start(m)
        z = w2 * read(y[0])
        y[1] = 5.0
        return z.sum(), (w2,)

    def view_read_then_base_changed(m, read):
        w, w2, y = start(m)
        z = w2 * read(y[:1])
        y.mul_(2.0)
        return z.sum(), (w2,)

    def read_by_add_only(m, read):
        w, w2, y = start(m)
        z = w2 + read(y)
        y.mul_(2.0)
        return z.sum(), (w2,)

    def read_then_changed_then_read_again(m, read):
        w, w2, y = start(m)
        z = w2 * read(y)
        y.mul_(2.0)
        return (z + w * read(y)).sum(), (w, w2)

    return {f.__name__: f for f in (
        read_then_recorded_change, recorded_change_only, recorded_then_unrecorded,
        recorded_change_then_read_by_none, recorded_change_read_then_changed,
        changed_before_recorded_change, changed_read_then_recorded_change,
        read_then_changed_then_recorded_change, read_then_add_,
        element_read_then_other_element_set, view_read_then_base_changed, read_by_add_only,
        read_then_changed_then_read_again)}


CONSTANT_PROGRAMS = _constant_programs()
# where an op read the tensor before the change and saved it: PyTorch raises, and so does
# tapegrad, whose tape holds a copy of the tensor but checks its version as PyTorch checks
# the tensor it saved
READ_BEFORE_CHANGE = {"read_then_recorded_change", "recorded_then_unrecorded",
                      "changed_read_then_recorded_change",
                      "read_then_changed_then_recorded_change", "read_then_add_",
                      "element_read_then_other_element_set", "view_read_then_base_changed",
                      "read_then_changed_then_read_again"}


def _as_is(t):
    return t


def _copy(t):
    return t.clone()


def _outcome(m, program, read=_as_is):
    loss, leaves = CONSTANT_PROGRAMS[program](m, read)
    try:
        loss.backward()
    except RuntimeError as e:
        text = str(e).split(" Hint: ")[0].replace("torch.", "tapegrad.")
        return "error", re.sub(r" It was modified by .*$", "", text)
    return "grads", [t.grad.tolist() for t in leaves]


@pytest.mark.parametrize("read", [_as_is, _copy], ids=["itself", "a_copy"])
@pytest.mark.parametrize("program", sorted(CONSTANT_PROGRAMS))
def test_a_constant_changed_in_place_reaches_the_backward_as_in_pytorch(program, read):
    expected = _outcome(torch, program, read)
    if program in READ_BEFORE_CHANGE:
        # (the copy read instead is never changed: the change reaches no backward)
        assert expected[0] == ("error" if read is _as_is else "grads")
    assert _outcome(tg, program, read) == expected
