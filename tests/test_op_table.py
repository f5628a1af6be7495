"""The op table itself: every op declared once with every rule its family needs, every
pass reaching every op through dispatchers written from the table, no default branch that
could hand one op another's rule, tape files that stay readable as ops are added, and numba's
cache noticing an edit to a rule in any of the table's files."""
import copy
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import ops as K
from tapegrad.ops import dispatch, entries
from tapegrad.ops import sweeps as S
from tapegrad.ops import table as T
from tapegrad.tape import NO_EXT

FIXTURES = Path(__file__).parent / "fixtures"
SRC = Path(tg.__file__).resolve().parent


def test_every_op_has_the_rules_its_family_needs():
    for code, info in T.OPS.items():
        for rule in T.REQUIRED[info.family]:
            assert rule in info.rules, (info, rule)
        if info.family == T.ELEMENTWISE:
            assert ("vjp1" in info.rules) == (info.arity == 2), info
            assert "d2" in info.rules or "curvature" in info.rules, info
            assert info.params in (0, 2)


def test_declare_refuses_an_op_without_its_rules():
    with pytest.raises(ValueError, match="lacks the rules"):
        T.declare(9999, "NopeBackward0", family=T.ELEMENTWISE, forward=None)
    with pytest.raises(ValueError, match="lacks the rules"):
        T.declare(9999, "NopeBackward0", family=T.ARRAY, backward=None, forward=None)
    with pytest.raises(ValueError, match="declared twice"):
        T.declare(K.TANH, "TanhBackward0", family=T.DATA)
    assert 9999 not in T.OPS


def _branches(source, name):
    """The opcodes the generated function ``name`` has a branch for."""
    body = source.split(f"def {name}(")[1].split("\n\n\n")[0]
    return {int(line.split("o == ")[1].split(":")[0]) for line in body.splitlines()
            if "o == " in line}


def test_every_op_reaches_every_pass_through_the_generated_dispatchers():
    one = dispatch.one_element_source()
    functions = set(dir(dispatch.entries_module()))
    for code, info in T.OPS.items():
        if info.family == T.DATA:
            # values, comparisons and guards: no gradient; only a comparison is recomputed
            assert f"backward_{code}" not in functions
            assert (f"forward_{code}" in functions) == (code == K.CMP)
            continue
        for pass_ in ("backward", "forward", "tangent"):
            assert f"{pass_}_{code}" in functions, (info, pass_)
        curvature = info.rules.get("curvature")
        has_curvature = "d2" in info.rules or curvature not in (None, T.LINEAR)
        assert (f"curvature_{code}" in functions) == has_curvature, info
        # hot ops also run inlined on one-element records; the others only through entries
        for name in ("vjp_one", "forward_one"):
            assert (code in _branches(one, name)) == info.hot, (info, name)
        assert (code in _branches(one, "d2_one")) == (info.hot and "d2" in info.rules)


def test_only_elementwise_ops_are_hot():
    assert all(info.family == T.ELEMENTWISE for info in T.OPS.values() if info.hot)
    with pytest.raises(ValueError, match="only elementwise ops are hot"):
        T.declare(9998, "NopeBackward0", family=T.ARRAY, hot=True, backward=None,
                  forward=None, tangent=None, curvature=None)
    assert 9998 not in T.OPS


def test_reads_for_says_per_input_what_its_gradient_reads():
    # (the eager recorder leaves out the values no gradient reads: mul's by data)
    assert T.OPS[K.MUL].reads_for == (T.READS_X1, T.READS_X0)
    for info in T.OPS.values():
        if info.reads_for is not None:
            assert len(info.reads_for) == info.arity, info
            assert all(flags & ~info.reads == 0 for flags in info.reads_for), info
    with pytest.raises(ValueError, match="reads_for"):
        T.declare(9997, "NopeBackward0", family=T.ELEMENTWISE, arity=2, reads=T.READS_X0,
                  reads_for=(T.READS_X1, 0), forward=None, vjp0=None, vjp1=None, d2=None)
    assert 9997 not in T.OPS


def test_the_generated_chains_end_in_nan_not_a_default_rule():
    """An op without a branch gets nan from a one-element chain (the sweeps never ask one for
    an op it has no branch for: they check the family first), not another op's rule."""
    one = dispatch.one_element_source()
    for name in ("vjp_one", "forward_one", "d2_one"):
        body = one.split(f"def {name}(")[1].split("\n\n\n")[0].rstrip()
        last = body.splitlines()[-1].strip()
        assert last in ("return nan, nan", "return nan"), (name, last)
        assert "else" not in body


def test_flags_are_read_off_the_table():
    for code, info in T.OPS.items():
        assert S._ONE[code] == info.hot
        assert S._SCALAR_CURVATURE[code] == (info.hot and "d2" in info.rules)
        assert S._FIRST_WRITE[code] == info.first_write
        assert S._NO_RULE[code] == (info.family == T.DATA)
        kind = S._CURVATURE[code]
        if info.family == T.DATA or info.rules.get("curvature") == T.LINEAR:
            assert kind == 0
        elif "d2" in info.rules or info.rules.get("curvature") is not None:
            assert kind == 1
        else:
            assert kind == -1
    undeclared = [c for c in range(S._NO_RULE.size) if c not in T.OPS]
    assert all(S._CURVATURE[c] == -1 for c in undeclared)


def _columns(y):
    tape = y._tape
    i8 = np.int64
    cols = [np.array(col, dtype=i8) for col in (tape.op, tape.a0, tape.a1, tape.voff,
                                                 tape.size, tape.ip)]
    return tape, cols, np.array(tape.fp, dtype=np.float64)


@pytest.mark.parametrize("n", [1, 3])
def test_an_unknown_opcode_is_an_error_in_every_pass(n):
    """A record whose opcode has no rule stops each pass and names the record."""
    x = tg.tensor(np.linspace(0.5, 1.5, n), requires_grad=True)
    y = x * 3.0
    tape, (op, a0, a1, voff, size, ip), fp = _columns(y)
    gap = next(c for c in range(max(T.OPS)) if c not in T.OPS)
    bad = [max(T.OPS) + 1, gap]   # past the table, and a gap inside it
    aux, faux = np.frombuffer(tape.aux, dtype=np.int64), np.frombuffer(tape.faux)
    lo, hi = a0[y._r], y._r + 1   # the leaf's record and y's (the tape may hold older ones)
    for code in bad:
        op[y._r] = code
        m = len(op)
        need = np.zeros(m, dtype=np.uint8)
        need[lo:hi] = 1
        goff = np.concatenate([[0], np.cumsum(size)[:-1]]).astype(np.int64)
        grads = np.zeros(int(size.sum()))
        vals = np.array(tape.vals)
        assert K.sweep(op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, NO_EXT, grads,
                       need, hi, lo, 0) == y._r
        assert K.forward(op, a0, a1, voff, size, ip, fp, aux, faux, vals, NO_EXT, lo, hi) == \
            -2 - y._r
        tans = np.zeros(len(vals))
        dep = np.zeros(m, dtype=np.uint8)
        dep[lo] = 1    # the leaf x's record
        assert K.tangent(op, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, 1, len(vals),
                         dep, lo, hi) == y._r
        dg = np.zeros((1, len(grads)))
        assert K.curvature(op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, tans,
                           len(vals), dg, need, hi, lo) == y._r


def test_an_op_without_a_curvature_rule_is_reported_not_skipped():
    """pow with a tensor exponent has no curvature rule: the kernel names its record (the
    caller then takes another route) instead of treating it as linear."""
    assert K.OPS[K.POW].rules["curvature"] is None
    assert S._CURVATURE[K.POW] == -1


def test_entries_compile_on_first_use_and_only_then():
    # an op no test below uses before this point keeps a zero entry until a tape holds it
    code = K.SINH
    if entries.TABLE[entries.BACKWARD, code] == 0:
        x = tg.tensor([0.25, -0.5, 1.0], requires_grad=True)
        x.sinh().sum().backward()
        assert entries.TABLE[entries.BACKWARD, code] > 0
        np.testing.assert_allclose(x.grad.numpy(), np.cosh([0.25, -0.5, 1.0]), rtol=1e-15)
    assert entries.TABLE[entries.BACKWARD, K.LEAF] in (0, -1)


_RESUMED = """
import numpy as np, tapegrad as tg
from tapegrad.ops import entries
rng = np.random.default_rng(5)
a = tg.tensor(rng.standard_normal((3, 4)), requires_grad=True)
b = tg.tensor(rng.standard_normal((4, 2)), requires_grad=True)
# the ops at the top of the program below get their entries now, the others when a pass
# reaches them: each pass then stops halfway through its records and goes on from there
(a * 2.0 + 1.0).tanh().sum().backward()
tg.func.jvp(lambda u: (u * 2.0 + 1.0).tanh().sum(), (a,), (tg.ones(3, 4),))
def top(h):
    return (h * 2.0 + 1.0).tanh().sum()
def program():
    a.grad = b.grad = None
    h = (a @ b).sinh()
    y = h * h.sigmoid() + h.max(0).values - h.amin(0)
    top(y.cumsum(0)).backward()
    t = tg.func.jvp(lambda u: top((u @ b).sinh()), (a,), (tg.ones(3, 4),))[1]
    z = tg.compile(lambda u: top((u @ b).softmax(1).sinh()))
    return (a.grad.numpy().copy(), b.grad.numpy().copy(), t.item(),
            [z(a.detach() * k).item() for k in (1.0, 2.0, 3.0)])
missing = int((entries.TABLE[entries.BACKWARD] == 0).sum())
first = program()
assert int((entries.TABLE[entries.BACKWARD] == 0).sum()) < missing
again = program()                       # every entry there from the start
for u, v in zip(first, again):
    np.testing.assert_array_equal(np.asarray(u), np.asarray(v))
print("ok")
"""


def test_a_pass_stopped_at_an_uncompiled_entry_goes_on_from_there():
    """In a fresh process every entry is missing: each pass stops at the first record whose
    entry it needs, which is compiled, and goes on from there (the backward sweep with what
    of the gradient arena it had cleared).  The results equal a second run's, where every
    entry is there from the start."""
    out = subprocess.run([sys.executable, "-c", _RESUMED], capture_output=True, text=True,
                         env=dict(os.environ, TAPEGRAD_QUIET="1"), timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")


def test_a_tape_file_written_before_the_op_table_was_reorganised_still_loads():
    """tests/fixtures/tape_a1bbce0.npz was saved by tapegrad at a1bbce0, before ops were
    added; it must replay to the values and gradients it gave then."""
    loaded = tg.load_tape(FIXTURES / "tape_a1bbce0.npz")
    want = np.load(FIXTURES / "tape_a1bbce0_expected.npz")
    x = tg.tensor(want["x"], requires_grad=True)
    w = tg.tensor(want["w"], requires_grad=True)
    out = loaded(x, w)
    out.backward()
    np.testing.assert_allclose(out.item(), float(want["out"]), rtol=1e-13)
    np.testing.assert_allclose(x.grad.numpy(), want["gx"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), want["gw"], rtol=1e-12, atol=1e-12)


def test_a_tape_file_lists_the_opcodes_it_uses_and_adding_ops_keeps_it_readable(tmp_path,
                                                                              monkeypatch):
    f = tg.compile(lambda a: (a.sinh() * a).sum())
    x = tg.tensor([0.5, 1.5], requires_grad=True)
    f(x)
    path = tmp_path / "t.npz"
    f.tape.save(path)
    saved = np.load(path)
    assert saved["opcodes"].tolist() == sorted(set(saved["op"].tolist()))
    assert K.SINH in saved["opcodes"].tolist()
    assert saved["opnames"].tolist() == [K.OPS[c].name for c in saved["opcodes"].tolist()]
    # a later table with one more op reads it
    later = copy.copy(T.OPS[K.CONST])
    later.code, later.name = 9998, "LaterBackward0"
    monkeypatch.setitem(T.OPS, 9998, later)
    out = tg.load_tape(path)(x)
    np.testing.assert_allclose(out.item(), float((np.sinh([0.5, 1.5]) * [0.5, 1.5]).sum()))
    # a table where an opcode the file uses means something else refuses it
    changed = copy.copy(T.OPS[K.SINH])
    changed.name = "CoshBackward0"
    monkeypatch.setitem(T.OPS, K.SINH, changed)
    with pytest.raises(ValueError, match="was SinhBackward0"):
        tg.load_tape(path)
    changed.name, changed.layout = "SinhBackward0", 2
    with pytest.raises(ValueError, match="layout 2"):
        tg.load_tape(path)


def test_an_edit_to_a_rule_in_another_file_reaches_the_cached_sweep(tmp_path):
    """numba's cache keys a kernel on its own file; the sweeps inline and call rules from the
    table's other files.  Copy the package, fill the cache, edit tanh's derivative in
    ops/elementwise.py, and check that a fresh process computes with the edit."""
    pkg = tmp_path / "src" / "tapegrad"
    shutil.copytree(SRC, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), TAPEGRAD_QUIET="1",
               PYTHONPATH=str(tmp_path / "src"))
    program = textwrap.dedent("""
        import tapegrad as tg
        assert tg.__file__.startswith(%r), tg.__file__
        x = tg.tensor([0.5], requires_grad=True)       # one value: the inlined scalar path
        y = tg.tensor([0.5, 1.0], requires_grad=True)  # two: the compiled entry
        x.tanh().sum().backward()
        y.tanh().sum().backward()
        print(x.grad.item(), y.grad[1].item())
    """ % str(pkg))

    def run():
        done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, done.stderr
        return [float(v) for v in done.stdout.split()]

    before = run()
    np.testing.assert_allclose(before, [1 - np.tanh(0.5) ** 2, 1 - np.tanh(1.0) ** 2])
    rules = pkg / "ops" / "elementwise.py"
    text = rules.read_text()
    edited = text.replace("return g * (1.0 - out * out)      # tanh'",
                          "return g * (2.0 - out * out)      # tanh'")
    assert edited != text
    rules.write_text(edited)
    after = run()
    np.testing.assert_allclose(after, [2 - np.tanh(0.5) ** 2, 2 - np.tanh(1.0) ** 2])
