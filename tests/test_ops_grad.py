"""Every op's gradient against central finite differences in float64.

Each case of ``op_cases.CASES`` is a hypothesis property: random shapes (0-d and size-1
sides included), broadcast pairs, call forms, which inputs require grad; the result must be
recorded with the case's opcode and ``tapegrad.testing.gradcheck`` (a random-projection VJP
check) must pass.  Two bookkeeping tests keep the table honest: every user-visible opcode
has a case, and every opcode has a branch in the compiled sweep.
"""
import inspect
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import op_cases as C
import strategies as S  # noqa: F401 - makes the source tree importable
import tapegrad as tg
import tapegrad.functional as TF
from tapegrad import ops as K
from tapegrad.ops import activation as ops_activation
from tapegrad.ops import elementwise as ops_elementwise
from tapegrad.ops import linalg as ops_linalg
from tapegrad.ops import reduce as ops_reduce
from tapegrad.ops import structure as ops_structure
from tapegrad.ops import custom as ops_custom
from tapegrad.ops import scan as ops_scan
from tapegrad.tape import NO_EXT
from tapegrad.testing import gradcheck

TG = C.Lib(tg, TF)

# Not user-visible: records that only bring values onto the tape, the hidden expansions of
# implicit broadcasting (exercised by every broadcasting case), and data records that carry
# no gradient (comparisons and guards of traced functions).
NO_GRADIENT = set(K.NO_GRADIENT)
EXPANSIONS = {code for code, info in K.OPS.items() if info.name == "Broadcast"}
HIDDEN = {K.LEAF, K.CONST, K.EXTERN} | EXPANSIONS | NO_GRADIENT
# (the custom opcode runs users' numba kernels, which PyTorch has no counterpart of: the ops
# of tests/test_custom_ops.py check it against PyTorch and SciPy)
VISIBLE = set(K.OPS) - HIDDEN - {K.CUSTOM}

# opcode -> the cases that record it
COVERAGE = {}
for _case in C.CASES:
    COVERAGE.setdefault(_case.op, []).append(_case.id)


def declared_opcodes():
    """``NAME -> code`` for every ``NAME = declare(code, ...)`` line of the op table's
    family modules."""
    found = {}
    for module in (ops_elementwise, ops_activation, ops_reduce, ops_linalg, ops_structure,
                   ops_scan, ops_custom):
        src = inspect.getsource(module)
        for name, code in re.findall(r"^([A-Z][A-Z0-9_]*) = declare\((\d+),", src, re.M):
            assert name not in found, f"{name} declared twice"
            found[name] = int(code)
    return found


def recorded_op(t):
    """The opcode of the record that produced tensor t."""
    assert t._tape is not None, "the result was not recorded"
    return t._tape.op[t._r]


def graph_ops(t):
    """The opcodes of every record t's value was computed from, on t's tape."""
    tape, seen, todo = t._tape, set(), [t._r]
    codes = set()
    while todo:
        r = todo.pop()
        if r < 0 or r in seen:
            continue
        seen.add(r)
        codes.add(tape.op[r])
        todo += [tape.a0[r], tape.a1[r]]
    return codes


def make_leaves(drawn):
    return [tg.tensor(a, requires_grad=f) for a, f in zip(drawn.arrays, drawn.rg)]


@pytest.mark.parametrize("case", C.CASES, ids=lambda c: c.id)
@given(data=st.data())
def test_gradient_matches_finite_differences(case, data):
    drawn = data.draw(case.strategy(), label="inputs")
    leaves = make_leaves(drawn)
    out = case.run(TG, leaves, drawn)
    code = recorded_op(out)
    if case.deep:
        assert case.op in graph_ops(out), f"{case.id} recorded no {K.OPS[case.op].name}"
    else:
        assert code == case.op, (
            f"{case.id} ({drawn.form}) recorded {K.OPS[code].name}/{code}, expected "
            f"{K.OPS[case.op].name}/{case.op}")
    gradcheck(lambda *ts: case.run(TG, list(ts), drawn), *leaves)


# ---------------------------------------------------------------------------------------------
# Bookkeeping
# ---------------------------------------------------------------------------------------------
def test_only_value_records_are_hidden():
    """What the engine hides from grad_fn is what this suite may leave out, and no more."""
    assert set(K.HIDDEN) == HIDDEN
    assert K.BCAST in EXPANSIONS
    assert ({K.LEAF, K.EXTERN} | EXPANSIONS).isdisjoint(NO_GRADIENT)


def test_every_visible_opcode_has_a_gradient_case():
    missing = {K.OPS[c].name + f"/{c}" for c in VISIBLE - set(COVERAGE)}
    assert not missing, f"opcodes without a gradient test: {sorted(missing)}"
    unknown = set(COVERAGE) - VISIBLE
    assert not unknown, f"cases claim opcodes that are not user-visible: {sorted(unknown)}"
    assert set(COVERAGE) == VISIBLE


def test_declarations_are_the_op_table():
    names = declared_opcodes()
    assert sorted(names.values()) == sorted(K.OPS), "declared opcodes not in OPS"
    for name, code in names.items():
        assert getattr(K, name) == code
        assert K.OPS[code].const == name


# PyTorch's hand-written nodes, whose names have no number (CopySlices: ``buf[j] = v``)
_HAND_WRITTEN = {"CopySlices", "CopyBackwards"}


def test_every_opcode_has_a_pytorch_name():
    for code, info in K.OPS.items():
        assert info.code == code
        # (a custom op's variants are the names users give their ops)
        names = [info.name] + (list(info.variants.values())
                               if info.variants and code != K.CUSTOM else [])
        for n in names:
            assert re.fullmatch(r"[A-Z][A-Za-z0-9]*", n), (code, n)
        if code in VISIBLE and info.name not in _HAND_WRITTEN:
            assert info.name.endswith(tuple("0123456789")), (code, info.name)


def test_unknown_opcode_is_reported_by_the_sweep():
    """An opcode with no rule stops the sweep and names the record (no silent zero)."""
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3.0
    tape = y._tape
    i8 = np.int64
    op, a0, a1, voff, size, ip = (np.array(col, dtype=i8) for col in (
        tape.op, tape.a0, tape.a1, tape.voff, tape.size, tape.ip))
    fp = np.array(tape.fp, dtype=np.float64)
    op[y._r] = max(K.OPS) + 1
    n = len(op)
    need = np.ones(n, dtype=np.uint8)
    goff = np.concatenate([[0], np.cumsum(size)[:-1]]).astype(i8)
    grads = np.zeros(int(size.sum()))
    aux = np.zeros(1, dtype=i8)
    faux = np.zeros(1)
    bad = K.sweep(op, a0, a1, voff, goff, size, ip, fp, aux, faux, tape.vals, NO_EXT, grads,
                  need, n, 0, 0)
    assert bad == y._r
