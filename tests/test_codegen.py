"""Generated code for replayed tapes of one-element records (codegen.py).

The interpreter (``ops.forward`` / ``ops.sweep``) is proven against eager mode and finite
differences elsewhere; generated code is written from the same expressions, so here it must
give the interpreter's values and gradients bit for bit (up to the sign of a zero
gradient), on every scalar rule, with edge values, inside rolled loops and around guards.
"""
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
from tapegrad import codegen
from tapegrad import ops as K
from tapegrad.functional import softplus
from tapegrad.tape import NO_EXT, state

EDGES = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -2.0])
VALUES = st.one_of(EDGES, st.floats(-3.0, 3.0, allow_nan=False))

# One form per scalar rule: (x, y) -> tensor, with x, y of shape () (x of shape (3,) for the
# gather).  Each is applied three times in a loop, so that its records roll into a loop.
FORMS = {
    K.ADD: lambda x, y: x + y,
    K.ADD_S: lambda x, y: x + 1.5,
    K.SUB: lambda x, y: x - y,
    K.SUB_S: lambda x, y: x - 0.5,
    K.RSUB_S: lambda x, y: 2.0 - x,
    K.MUL: lambda x, y: x * y,
    K.MUL_S: lambda x, y: x * 1.1,
    K.DIV: lambda x, y: x / y,
    K.DIV_S: lambda x, y: x / 3.0,
    K.NEG: lambda x, y: -x,
    K.POW: lambda x, y: x.abs() ** y,
    K.POW_S: lambda x, y: x ** 2.0 + x ** 0.0,
    K.RPOW_S: lambda x, y: 2.0 ** x + 0.0 ** x,
    K.RECIPROCAL: lambda x, y: x.reciprocal(),
    K.EXP: lambda x, y: tg.exp(x * 0.1),
    K.LOG: lambda x, y: tg.log(x.abs()),
    K.LOG1P: lambda x, y: tg.log1p(x.abs()),
    K.LOGIT: lambda x, y: tg.logit(tg.sigmoid(x)),
    # the activation ops (ops/activation.py), parameters in the record's scalar and faux
    K.GELU: lambda x, y: tg.nn.functional.gelu(x),
    K.GELU_TANH: lambda x, y: tg.nn.functional.gelu(x, approximate="tanh"),
    K.SILU: lambda x, y: tg.nn.functional.silu(x),
    K.MISH: lambda x, y: tg.nn.functional.mish(x),
    K.ELU: lambda x, y: tg.nn.functional.selu(x) + tg.nn.functional.elu(y, 0.5),
    K.CELU: lambda x, y: tg.nn.functional.celu(x, 0.7),
    K.LEAKY_RELU: lambda x, y: tg.nn.functional.leaky_relu(x, 0.2),
    K.HARDTANH: lambda x, y: tg.nn.functional.hardtanh(x, -0.5, 1.5),
    K.HARDSIGMOID: lambda x, y: tg.nn.functional.hardsigmoid(x * 4.0),
    K.HARDSWISH: lambda x, y: tg.nn.functional.hardswish(x * 4.0),
    K.LOG_SIGMOID: lambda x, y: tg.nn.functional.logsigmoid(x),
    K.SOFTSHRINK: lambda x, y: tg.nn.functional.softshrink(x, 0.3),
    K.HARDSHRINK: lambda x, y: tg.nn.functional.hardshrink(x, 0.3),
    K.SINC: lambda x, y: tg.sinc(x),
    K.EXPM1: lambda x, y: tg.expm1(x * 0.1),
    K.SQRT: lambda x, y: tg.sqrt(x.abs()),
    K.ABS: lambda x, y: x.abs() - y,
    K.SIN: lambda x, y: tg.sin(x),
    K.COS: lambda x, y: tg.cos(x),
    K.TAN: lambda x, y: tg.tan(x * 0.3),
    K.TANH: lambda x, y: tg.tanh(x),
    K.SINH: lambda x, y: tg.sinh(x * 0.5),
    K.COSH: lambda x, y: tg.cosh(x * 0.5),
    K.ASIN: lambda x, y: tg.asin(tg.tanh(x)),
    K.ACOS: lambda x, y: tg.acos(tg.tanh(x)),
    K.ATAN: lambda x, y: tg.atan(x),
    K.ASINH: lambda x, y: tg.asinh(x),
    K.ACOSH: lambda x, y: tg.acosh(x * x + 1.5),
    K.ATANH: lambda x, y: tg.atanh(tg.tanh(x) * 0.9),
    K.LOG2: lambda x, y: tg.log2(x.abs() + 0.5),
    K.LOG10: lambda x, y: tg.log10(x.abs() + 0.5),
    K.EXP2: lambda x, y: tg.exp2(x),
    K.RSQRT: lambda x, y: tg.rsqrt(x.abs() + 0.5),
    K.ERF: lambda x, y: tg.erf(x),
    K.ERFC: lambda x, y: tg.erfc(x),
    K.LGAMMA: lambda x, y: tg.lgamma(x.abs() + 0.5),
    K.DIGAMMA: lambda x, y: tg.digamma(x.abs() + 0.5),
    K.POLYGAMMA: lambda x, y: tg.polygamma(2, x.abs() + 0.5),
    K.ERFINV: lambda x, y: tg.erfinv(tg.tanh(x) * 0.9),
    K.I0: lambda x, y: tg.i0(x * 3.0),
    K.I0E: lambda x, y: tg.special.i0e(x * 3.0 + 0.5),
    K.I1: lambda x, y: tg.special.i1(x * 3.0),
    K.I1E: lambda x, y: tg.special.i1e(x * 3.0 + 0.5),
    K.FLOOR: lambda x, y: tg.floor(x * 3.0) * x,
    K.CEIL: lambda x, y: tg.ceil(x * 3.0) * x,
    K.TRUNC: lambda x, y: tg.trunc(x * 3.0) * x,
    K.ROUND: lambda x, y: tg.round(x * 3.0) * x,
    K.ROUND_DECIMALS: lambda x, y: tg.round(x, decimals=1) * x + tg.round(x * 50.0, decimals=-1),
    K.SIGN: lambda x, y: tg.sign(x) * x,
    K.FRAC: lambda x, y: tg.frac(x * 3.0),
    K.SIGMOID: lambda x, y: tg.sigmoid(x),
    K.RELU: lambda x, y: tg.relu(x - y),
    K.SOFTPLUS: lambda x, y: softplus(x, beta=2.0, threshold=1.0),
    K.CLAMP: lambda x, y: x.clamp(-0.5, 0.5) + y,
    K.CLAMP_MIN: lambda x, y: x.clamp_min(0.0) - y,
    K.CLAMP_MAX: lambda x, y: x.clamp_max(1.0) + y,
    K.MAXIMUM: lambda x, y: tg.maximum(x, y),
    K.MINIMUM: lambda x, y: tg.minimum(x, y) - 0.25,
    K.WHERE: lambda x, y: tg.where(x > y, x * y, x - y),
    K.ATAN2: lambda x, y: tg.atan2(x, y),
    K.HYPOT: lambda x, y: tg.hypot(x, y),
    K.XLOGY: lambda x, y: tg.xlogy(x, y.abs() + 0.5),
    K.XLOG1PY: lambda x, y: tg.xlog1py(x, y.abs()),
    K.FMOD: lambda x, y: tg.fmod(x, y.abs() + 0.5),
    K.REMAINDER: lambda x, y: tg.remainder(x, y.abs() + 0.5),
    K.COPYSIGN: lambda x, y: tg.copysign(x, y),
    K.LOGADDEXP: lambda x, y: tg.logaddexp(x, y),
    K.BINARY_CROSS_ENTROPY: lambda x, y: tg.nn.functional.binary_cross_entropy(
        tg.sigmoid(x), tg.sigmoid(y), reduction="none"),
    K.CMP: lambda x, y: tg.where(x <= y, x, y) + (x != y) * 1.0,
    K.SUM: lambda x, y: (x * y).reshape(1).sum(),
    K.MEAN: lambda x, y: (x - y).reshape(1).mean(),
    K.SUM_DIM: lambda x, y: (x * y).reshape(1).sum(0),
    K.MEAN_DIM: lambda x, y: (x + y).reshape(1).mean(0),
    K.RESHAPE: lambda x, y: (x * y).reshape(1).reshape(()),
    K.EXPAND_S: lambda x, y: (x.reshape(1) + y).reshape(()),
}


# zero_, fill_, copy_, x[:] = v and the in-place forms of elu, celu and leaky_relu: in-place
# ops, which a compiled function runs eagerly, so generated code never holds their records
IN_PLACE = {K.ZERO, K.FILL, K.FILL_T, K.COPY, K.ELU_RESULT, K.CELU_RESULT, K.LEAKY_RELU_RESULT}


def test_every_scalar_rule_has_a_form():
    scalar = {c for c in K.OPS if codegen._scalar_rules(c) is not None}
    assert set(FORMS) >= scalar - {K.BCAST, K.GATHER} - IN_PLACE | {K.CMP}


def _program(form):
    def program(x, y):
        u = x
        for _ in range(3):
            u = form(u, y) * 0.5 + u * 0.25
        return u * y
    return program


def _poison_gradient_arena():
    """Fill the shared gradient arena with nan: generated code clears what it uses itself,
    and a gradient it forgot to clear would come out nan."""
    state.grads[:] = np.nan


def _run(compiled, x, y):
    xs = tg.tensor(x, requires_grad=True)
    ys = tg.tensor(y, requires_grad=True)
    out = compiled(xs, ys)
    _poison_gradient_arena()
    out.backward()
    return out.item(), xs.grad.item(), ys.grad.item()


def _same_bits(got, want):
    # equal as numbers: a gradient that is exactly zero may be -0.0 in generated code where
    # the interpreter has +0.0 (codegen._assign_first_terms); everything else is bit for bit
    np.testing.assert_array_equal(np.array(got), np.array(want))


@pytest.mark.parametrize("code", sorted(FORMS), ids=lambda c: K.OPS[c].name + f"_{c}")
@given(values=st.lists(st.tuples(VALUES, VALUES), min_size=2, max_size=4))
def test_generated_code_gives_the_interpreters_bits(code, values):
    program = _program(FORMS[code])
    generated = tg.compile(program, codegen=True)
    interpreted = tg.compile(program, codegen=False)
    for x, y in values:
        _same_bits(_run(generated, x, y), _run(interpreted, x, y))
    assert code in set(generated.tape.template.op)
    assert generated.stats.generated == 1, generated.stats.not_generated
    assert interpreted.stats.generated == 0


@given(values=st.lists(st.tuples(VALUES, VALUES), min_size=2, max_size=3),
       k=st.integers(0, 2))
def test_a_gathered_element_of_a_vector(values, k):
    def program(v, y):
        u = v[k] * y
        for j in range(3):
            u = u * v[(k + j) % 3] + y
        return u

    generated = tg.compile(program, codegen=True)
    interpreted = tg.compile(program, codegen=False)
    for x, y in values:
        vec = np.array([x, y, x - y])
        res = []
        for fn in (generated, interpreted):
            vs = tg.tensor(vec, requires_grad=True)
            ys = tg.tensor(y, requires_grad=True)
            out = fn(vs, ys)
            _poison_gradient_arena()
            out.backward()
            res.append((out.item(), vs.grad.numpy().tolist(), ys.grad.item()))
        _same_bits(res[0][0], res[1][0])
        _same_bits(res[0][1], res[1][1])
        _same_bits(res[0][2], res[1][2])
    assert K.GATHER in set(generated.tape.template.op)
    assert generated.stats.generated == 1, generated.stats.not_generated


def lotka_volterra(steps):
    def ode(a, b, c, d):
        u = v = tg.tensor(1.0)
        for _ in range(steps):
            uv = u * v
            du = a * u - b * uv
            dv = d * uv - c * v
            u = u + 0.01 * du
            v = v + 0.01 * dv
        return (u - 1.5) ** 2 + (v - 0.5) ** 2
    return ode


def _params(values):
    return [tg.tensor(v, requires_grad=True) for v in values]


def _same_as_interpreter(program, make_args, n_calls=3):
    """Generated code against the interpreter (bit for bit) and eager mode (to 1e-12);
    returns the generated source."""
    generated = tg.compile(program, codegen=True)
    interpreted = tg.compile(program, codegen=False)
    for seed in range(n_calls):
        got_args, want_args, eager_args = make_args(seed), make_args(seed), make_args(seed)
        got, want = generated(*got_args), interpreted(*want_args)
        _poison_gradient_arena()
        got.backward()
        want.backward()
        _same_bits(got.item(), want.item())
        for a, b in zip(got_args, want_args):
            assert (a.grad is None) == (b.grad is None) == (not a.requires_grad)
            if a.grad is not None:
                _same_bits(a.grad.numpy(), b.grad.numpy())
        eager = program(*eager_args)
        eager.backward()
        np.testing.assert_allclose(got.item(), eager.item(), rtol=1e-12)
        for a, e in zip(got_args, eager_args):
            if a.grad is not None:
                np.testing.assert_allclose(a.grad.numpy(), e.grad.numpy(), rtol=1e-12)
    assert generated.stats.generated == 1, generated.stats.not_generated
    return generated.tape.program.source


def test_a_long_loop_rolls_into_a_short_program():
    values = ((1.5, 1.0, 3.0, 1.0), (1.4, 0.9, 3.1, 1.2), (1.6, 1.1, 2.9, 0.8))
    source = _same_as_interpreter(lotka_volterra(1000), lambda i: _params(values[i]))
    # 11 000 records: one loop in the forward, one in the backward
    assert source.count("for k in range(") == 2
    assert source.count("\n") < 600


def test_guards_inside_a_rolled_loop_re_record_when_the_branch_changes():
    def program(x, w):
        u = x
        for _ in range(12):
            if u > 0.0:       # a guard on the comparison in every trip of the loop
                u = u * w - 0.3
            else:
                u = u * w + 0.7
        return u * u

    generated = tg.compile(program, codegen=True)
    rng = np.random.default_rng(5)
    for x in rng.uniform(-1.0, 1.0, 12):
        xs, ws = tg.tensor(x, requires_grad=True), tg.tensor(0.9, requires_grad=True)
        xe, we = tg.tensor(x, requires_grad=True), tg.tensor(0.9, requires_grad=True)
        got, want = generated(xs, ws), program(xe, we)
        got.backward()
        want.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
        np.testing.assert_allclose([xs.grad.item(), ws.grad.item()],
                                   [xe.grad.item(), we.grad.item()], rtol=1e-12)
    stats = generated.stats
    assert stats.rerecords, "some inputs take other branches"
    assert stats.replays > 0 and stats.generated >= 1


def test_a_failing_guard_is_reported_by_the_generated_forward():
    def program(x):
        u = x
        for _ in range(5):
            u = u * 1.5 if u < 10.0 else u - 1.0
        return u

    generated = tg.compile(program, codegen=True)
    generated(tg.tensor(1.0, requires_grad=True))      # records: always the first branch
    generated(tg.tensor(1.1, requires_grad=True))      # replays, builds the program
    variant = generated.tape
    assert variant.program is not None
    vals = variant._instance().vals
    op, a0, a1, voff, size, ip, fp, aux, faux = variant.cols
    leaf = variant.arg_records[0]
    vals[voff[leaf]] = 5.0           # 5 * 1.5 = 7.5, then 11.25: the third guard fails
    bad = variant.program.forward(vals, NO_EXT, fp, ip, faux)
    assert op[bad] == K.GUARD
    assert bad == K.forward(op, a0, a1, voff, size, ip, fp, aux, faux, vals.copy(), NO_EXT,
                            0, len(op))


def test_hot_tapes_get_generated_code_on_their_own():
    small = tg.compile(lambda x: (x * 2.0 + 1.0) * x)
    large = tg.compile(lotka_volterra(20))
    for _ in range(6):
        small(tg.tensor(0.5, requires_grad=True)).backward()
        large(*_params((1.5, 1.0, 3.0, 1.0))).backward()
    assert small.stats.generated == 0 and small.tape.program is None
    assert large.stats.generated == 1 and large.tape.program is not None
    never = tg.compile(lotka_volterra(20), codegen=False)
    for _ in range(6):
        never(*_params((1.5, 1.0, 3.0, 1.0)))
    assert never.stats.generated == 0


def test_tapes_of_vectors_beyond_what_generated_code_calls_stay_with_the_interpreter():
    # cat reads its inputs from a list in its side data: no call of its rules is generated
    fn = tg.compile(lambda x: (tg.cat([x * x, x]) * 2.0).sum(), codegen=True)
    for n in range(3):
        x = tg.tensor([1.0, 2.0, float(n)], requires_grad=True)
        fn(x).backward()
        np.testing.assert_array_equal(x.grad.numpy(), 4 * x.detach().numpy() + 2.0)
    assert fn.stats.generated == 0
    assert "is not elementwise" in fn.stats.not_generated[0]


def test_a_matrix_product_between_loops_calls_its_own_rules():
    def program(x, w):
        u = (x * x) @ w * 0.5 - 1.0      # (no NumPy function: the forward is generated)
        return (u * u).sum()
    source = _same_as_interpreter(program, lambda i: [
        tg.tensor(np.linspace(-1.0, 1.0, 12).reshape(3, 4) + i, requires_grad=True),
        tg.tensor(np.cos(np.arange(8.0)).reshape(4, 2), requires_grad=True)])
    assert f"call(table[{codegen._E.FORWARD}, {K.MATMUL}]" in source
    assert f"call(table[{codegen._E.BACKWARD}, {K.MATMUL}]" in source


# Random layered programs: matrix products, bias broadcasts over rows, indexing, reshapes and
# sums over a dim between elementwise loops, against the interpreter bit for bit
_LAYER_STEPS = ["matmul", "bias", "tanh", "relu", "rows", "reshape", "sum0", "mean1",
                "scale", "square"]


def _layered(steps):
    def program(x, w, b, a):
        u = x
        for step in steps:
            if step == "matmul":
                u = u @ w[:u.shape[1], :u.shape[1]]
            elif step == "bias":
                u = u + b[:u.shape[1]]
            elif step == "tanh":
                u = u.tanh()
            elif step == "relu":
                u = u.relu() - 0.1 * u
            elif step == "rows":
                u = u[[0, 2, 1, 0]] if u.shape[0] >= 3 else u * 1.5
            elif step == "reshape":
                # (every shape holds a multiple of 6 values, at most 6 columns)
                u = u.reshape(-1, 3) if u.shape[1] != 3 else u.reshape(-1, 6)
            elif step == "sum0":
                u = u + u.sum(0, keepdim=True) * 0.25
            elif step == "mean1":
                u = u - u.mean(1, keepdim=True)
            elif step == "scale":
                u = u * a
            else:
                u = u * u
        return (u * u).mean() + (x * a).sum() + (w.sum() - b.sum()) * a
    return program


@pytest.mark.parametrize("rows", [5, 300])
@settings(max_examples=10)   # (each example compiles a program: one to three seconds)
@given(steps=st.lists(st.sampled_from(_LAYER_STEPS), min_size=1, max_size=7))
def test_random_layered_programs(rows, steps):
    rng = np.random.default_rng(len(steps))
    xv = rng.uniform(-1.0, 1.0, (rows, 6))
    wv, bv = rng.uniform(-0.5, 0.5, (6, 6)), rng.uniform(-0.5, 0.5, 6)

    def args(i):
        return [tg.tensor(xv + 0.1 * i, requires_grad=True), tg.tensor(wv, requires_grad=True),
                tg.tensor(bv, requires_grad=True), tg.tensor(0.8 - 0.1 * i, requires_grad=True)]
    _same_as_interpreter(_layered(steps), args, n_calls=2)


def test_a_small_tape_is_generated_once_it_has_replayed_often():
    from tapegrad import replay
    rng = np.random.default_rng(3)
    X, y = tg.tensor(rng.standard_normal((20, 4))), tg.tensor(rng.standard_normal(20))
    w = tg.tensor(np.zeros(4), requires_grad=True)
    fn = tg.compile(lambda w, X, y: ((X @ w - y) ** 2).mean())
    grads = []
    for _ in range(replay._GENERATE_AFTER_SMALL + 2):
        fn(w, X, y).backward()
        grads.append(w.grad.numpy().copy())
        w.grad = None
        # (under 1,024 values: not generated at the third replay, as a larger tape is)
        assert fn.stats.generated == (fn.stats.replays >= replay._GENERATE_AFTER_SMALL)
    assert fn.tape.program is not None
    for g in grads[1:]:
        _same_bits(g, grads[0])


def test_backward_from_another_output_uses_the_interpreter():
    def program(a, b):
        u = a
        for _ in range(5):
            u = u * b + 0.1
        return u * u, u

    generated = tg.compile(program, codegen=True)
    for x in (0.3, 0.4, 0.5):
        a, b = tg.tensor(x, requires_grad=True), tg.tensor(0.8, requires_grad=True)
        ae, be = tg.tensor(x, requires_grad=True), tg.tensor(0.8, requires_grad=True)
        _, u = generated(a, b)
        _, ue = program(ae, be)
        u.backward()
        ue.backward()
        np.testing.assert_allclose([a.grad.item(), b.grad.item()],
                                   [ae.grad.item(), be.grad.item()], rtol=1e-12)


def test_the_same_tape_reuses_its_generated_module():
    ode = lotka_volterra(30)
    first, second = tg.compile(ode, codegen=True), tg.compile(ode, codegen=True)
    for fn in (first, second):
        fn(*_params((1.5, 1.0, 3.0, 1.0)))
        fn(*_params((1.5, 1.0, 3.0, 1.0)))
    assert first.tape.program.path == second.tape.program.path
    assert first.tape.program.forward is second.tape.program.forward


def test_long_straight_code_is_not_generated():
    kinds = np.random.default_rng(0).integers(0, 4, 2 * codegen.MAX_STATEMENTS)

    def program(x):
        u = x
        for kind in kinds:     # no repeating pattern to roll into a loop
            if kind == 0:
                u = u * 1.001
            elif kind == 1:
                u = u + 0.001
            elif kind == 2:
                u = tg.sin(u)
            else:
                u = u - 0.002
        return u

    fn = tg.compile(program, codegen=True)
    fn(tg.tensor(1.0, requires_grad=True))
    fn(tg.tensor(1.0, requires_grad=True))
    assert fn.stats.generated == 0
    assert "written out" in fn.stats.not_generated[0]


def test_values_from_two_trips_back():
    def program(a, b, w):
        for _ in range(20):
            a, b = b, a * w + b * 0.3      # b of trip k reads b of trips k-1 and k-2
        return a * b

    def args(seed):
        x, y, w = np.random.default_rng(seed).uniform(0.5, 1.0, 3)
        return [tg.tensor(v, requires_grad=True) for v in (x, y, w)]

    assert "for k in range(" in _same_as_interpreter(program, args)


def test_a_value_of_the_trip_before_read_after_a_record_with_parameters():
    # c of the trip before is kept in a local across the trip; clamp reads its bounds into
    # locals of its own, which once had the same name and overwrote it
    def program(x):
        a, before = x * 1.0, x * 0.5
        for _ in range(40):
            c = a * 0.9
            a = c.clamp(-0.7, 0.7) + before * 0.1
            before = c
        return a.sum()

    def args(seed):
        return [tg.tensor([(0.3, 0.8, -0.4)[seed]], requires_grad=True)]

    assert "for k in range(" in _same_as_interpreter(program, args)


def test_a_vector_read_one_element_per_trip():
    def program(v, w):
        u = w
        for j in range(12):
            u = u * v[j] + w        # gradients of v's elements move by 1 per trip, not 3
        return u

    def args(seed):
        rng = np.random.default_rng(seed)
        return [tg.tensor(rng.uniform(-1, 1, 12), requires_grad=True),
                tg.tensor(rng.uniform(0.5, 1.0), requires_grad=True)]

    assert "for k in range(" in _same_as_interpreter(program, args)


def test_value_and_grad_of_a_generated_tape_is_the_general_paths():
    def program(a, b, unused, c):
        u = a * b
        for _ in range(30):
            u = u * b + tg.sin(c * u)
        return u * u

    fast = tg.value_and_grad(tg.compile(program, codegen=True), argnums=(0, 1, 2, 3))
    general = tg.value_and_grad(tg.compile(program, codegen=False), argnums=(0, 1, 2, 3))
    eager = tg.value_and_grad(program, argnums=(0, 1, 2, 3))
    one = tg.grad(tg.compile(program, codegen=True), argnums=1)
    for seed in range(4):
        a, b, c = (float(v) for v in np.random.default_rng(seed).uniform(0.2, 0.9, 3))
        args = (a, b, 7.0, c)
        (v1, g1), (v2, g2), (v3, g3) = fast(*args), general(*args), eager(*args)
        _same_bits(v1.item(), v2.item())
        _same_bits([g.item() for g in g1], [g.item() for g in g2])
        np.testing.assert_allclose([g.item() for g in g1], [g.item() for g in g3], rtol=1e-12)
        assert g1[2].item() == 0.0 and not g1[0].requires_grad
        _same_bits(one(*args).item(), g2[1].item())


def _three_args(seed):
    x, y, w = np.random.default_rng(seed).uniform(0.5, 1.0, 3)
    return [tg.tensor(v, requires_grad=True) for v in (x, y, w)]


def test_code_after_a_loop_reads_values_of_earlier_trips():
    # the gradients of trips 1, 3 and 6 receive terms from outside the loop: the loop must
    # read them from the arena, the others start at zero in locals
    def program(x, y, w):
        u, saved = x, []
        for _ in range(10):
            u = tg.sin(u) * w + y * 0.1
            saved.append(u)
        return u * saved[3] + saved[6] * saved[1]

    source = _same_as_interpreter(program, _three_args)
    assert "for k in range(" in source


def test_one_loop_after_another():
    # the second loop's first trip reads the first loop's last: its gradient is handed over
    # through the arena
    def program(x, y, w):
        u, v = x, y
        for _ in range(8):
            u = u * w + v * 0.1
        for _ in range(8):
            v = tg.sin(v) - u * w
            u = u * 0.9
        return u * v

    source = _same_as_interpreter(program, _three_args)
    assert source.count("for k in range(") >= 4


def test_a_rolled_backward_keeps_its_gradients_in_locals():
    # in the ODE nothing outside the loop adds to the gradient of a trip's records but the
    # trip after: the loop neither reads nor writes the gradient arena, and the backward
    # clears only the few addresses outside it, not the whole arena
    fn = tg.compile(lotka_volterra(1000), codegen=True)
    for _ in range(2):
        fn(*_params((1.5, 1.0, 3.0, 1.0)))
    source = fn.tape.program.source
    backward = source[source.index("def backward"):].split("\n")
    start = next(i for i, ln in enumerate(backward) if ln.startswith("    for k in range("))
    end = next(i for i in range(start + 1, len(backward)) if not backward[i].startswith(" " * 8))
    loop = backward[start + 1:end]
    assert loop and not [ln for ln in loop if "grads[" in ln]
    cleared = [ln for ln in backward if "grads[" in ln and ln.endswith("= 0.0")]
    assert 0 < len(cleared) <= 8


def test_a_gradient_local_takes_its_first_unconditional_term_by_assignment():
    body = ["gr0 = 0.0", "gr1 = 0.0", "hr2 = 0.0",
            "if x0 > 0.0:", "    gr1 += g",        # conditional: gr1 keeps its addition
            "gr0 -= g * x1", "gr0 += g",            # only the first term is assigned
            "gr1 += g * c",
            "x1 = hr2", "hr2 += g"]                 # read first: stays an addition
    assert codegen._assign_first_terms(body) == [
        "gr0 = 0.0", "gr1 = 0.0", "hr2 = 0.0",
        "if x0 > 0.0:", "    gr1 += g",
        "gr0 = -(g * x1)", "gr0 += g",
        "gr1 += g * c",
        "x1 = hr2", "hr2 += g"]


# backward() of a replayed tape with generated code takes a short path (autograd.
# program_backward); everything it does not handle must still behave as in eager mode.
def _generated_ode(steps=30):
    fn = tg.compile(lotka_volterra(steps), codegen=True)
    fn(*_params((1.5, 1.0, 3.0, 1.0)))
    fn(*_params((1.5, 1.0, 3.0, 1.0)))
    assert fn.stats.generated == 1
    return fn


def _eager_grads(values, twice=False, scale=1.0):
    ps = _params(values)
    loss = lotka_volterra(30)(*ps)
    loss.backward()
    return [scale * (2.0 if twice else 1.0) * p.grad.item() for p in ps]


def test_generated_backward_twice_raises_as_in_eager_mode():
    fn = _generated_ode()
    loss = fn(*_params((1.5, 1.0, 3.0, 1.0)))
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_generated_backward_with_retain_graph_accumulates(monkeypatch):
    from tapegrad import autograd
    taken = []
    short = autograd.program_backward
    monkeypatch.setattr(autograd, "program_backward",
                        lambda *a: taken.append(short(*a)) or taken[-1])
    fn = _generated_ode()
    ps = _params((1.5, 1.0, 3.0, 1.0))
    loss = fn(*ps)
    loss.backward(retain_graph=True)
    loss.backward()
    assert taken == [True, True]    # both sweeps took the short path
    np.testing.assert_allclose([p.grad.item() for p in ps],
                               _eager_grads((1.5, 1.0, 3.0, 1.0), twice=True), rtol=1e-12)


def test_generated_backward_refuses_a_leaf_changed_in_place():
    fn = _generated_ode()
    ps = _params((1.5, 1.0, 3.0, 1.0))
    loss = fn(*ps)
    with tg.no_grad():
        ps[0].mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_generated_backward_runs_leaf_hooks_and_fills_retained_grads():
    fn = _generated_ode()
    ps = _params((1.5, 1.0, 3.0, 1.0))
    ps[2].register_hook(lambda g: g * 3.0)
    loss = fn(*ps)
    loss.retain_grad()
    loss.backward()
    want = _eager_grads((1.5, 1.0, 3.0, 1.0))
    want[2] *= 3.0
    np.testing.assert_allclose([p.grad.item() for p in ps], want, rtol=1e-12)
    assert loss.grad.item() == 1.0


def test_generated_backward_with_one_tensor_passed_twice():
    fn = _generated_ode()
    a, b, c = _params((1.5, 1.0, 3.0))
    fn(a, b, c, b).backward()
    ae, be, ce = _params((1.5, 1.0, 3.0))
    lotka_volterra(30)(ae, be, ce, be).backward()
    np.testing.assert_allclose([a.grad.item(), b.grad.item(), c.grad.item()],
                               [ae.grad.item(), be.grad.item(), ce.grad.item()], rtol=1e-12)


def test_generated_backward_accumulates_into_existing_grads():
    fn = _generated_ode()
    ps = _params((1.5, 1.0, 3.0, 1.0))
    for p in ps:
        p.grad = tg.tensor(1.0)
    fn(*ps).backward()
    np.testing.assert_allclose([p.grad.item() for p in ps],
                               [1.0 + g for g in _eager_grads((1.5, 1.0, 3.0, 1.0))],
                               rtol=1e-12)
    assert all(p.grad.shape == () for p in ps)


# --- tapes of vectors (codegen.generate_vectors) ---------------------------------------------
ELEMENTWISE_FORMS = sorted(c for c in FORMS
                           if c == K.CMP or K.OPS[c].family == "elementwise")


def _vector_program(form):
    # a 0-d parameter broadcast against vectors, the op, and a sum of all values: one loop
    def program(x, y, s):
        u = form(x * s, y) * 0.5 + x
        return (u * y).sum()
    return program


def _run_vectors(fn, x, y, s):
    args = [tg.tensor(x, requires_grad=True), tg.tensor(y, requires_grad=True),
            tg.tensor(s, requires_grad=True)]
    out = fn(*args)
    _poison_gradient_arena()
    out.backward()
    return [out.item()] + [a.grad.numpy().tolist() for a in args]


@pytest.mark.parametrize("code", ELEMENTWISE_FORMS, ids=lambda c: K.OPS[c].name + f"_{c}")
@given(values=st.lists(st.tuples(st.lists(VALUES, min_size=4, max_size=4),
                                 st.lists(VALUES, min_size=4, max_size=4), VALUES),
                       min_size=2, max_size=3))
def test_generated_loops_over_vectors_give_the_interpreters_bits(code, values):
    program = _vector_program(FORMS[code])
    generated = tg.compile(program, codegen=True)
    interpreted = tg.compile(program, codegen=False)
    for x, y, s in values:
        got, want = _run_vectors(generated, x, y, s), _run_vectors(interpreted, x, y, s)
        for g, w in zip(got, want):
            _same_bits(g, w)
    assert code in set(generated.tape.template.op)
    assert generated.stats.generated == 1, generated.stats.not_generated
    assert generated.tape.program.source.count("for k in range(4):") >= 1


def _cubic_fit(a, b, c, d, x, y):
    # PyTorch's tutorial fit of sin(x) (bench W8)
    y_pred = a + b * x + c * x ** 2 + d * x ** 3
    return (y_pred - y).pow(2).sum()


def _cubic_args(seed, n=300):
    rng = np.random.default_rng(seed)
    x = np.linspace(-np.pi, np.pi, n)
    return (_params(rng.uniform(-1.0, 1.0, 4)) + [tg.tensor(x), tg.tensor(np.sin(x))])


def test_the_cubic_fit_runs_as_one_loop_each_way_storing_only_what_the_backward_reads():
    source = _same_as_interpreter(_cubic_fit, _cubic_args)
    assert source.count("for k in range(300):") == 2
    # stored: x**2 and x**3 (the gradients of c and d read them) and the residual (its
    # square's gradient reads it); not the broadcasts, products and sums of the forward
    assert len(re.findall(r"vals\[\d+ \+ k\] = ", source)) == 3


def test_the_arena_a_generated_forward_left_incomplete_is_filled_in_for_other_readers():
    fn = tg.compile(lambda a, x: ((x * a).sin() * 0.5 + x * a * a).sum(), codegen=True)
    fn_big = tg.compile(lambda a, x: ((x * a) * 0.5 + x * a * a).sum(), codegen=True)

    def eager(a, x):
        return ((x * a) * 0.5 + x * a * a).sum()

    x = tg.tensor(np.linspace(0.1, 1.0, 50))
    for _ in range(2):
        a = tg.tensor(0.7, requires_grad=True)
        fn(a, x).backward()
    assert fn.tape.program.forward is None      # sin: NumPy's forward, generated backward
    assert not fn.tape.program.partial
    fn_big(tg.tensor(0.7, requires_grad=True), x)     # records; the calls below replay
    for _ in range(2):
        a, ae = tg.tensor(0.7, requires_grad=True), tg.tensor(0.7, requires_grad=True)
        loss = fn_big(a, x)
        assert fn_big.tape.program.partial
        # a hook on the output takes the interpreter's sweep, which reads every value
        seen = []
        loss.register_hook(lambda g: seen.append(g.item()))
        loss.backward()
        want = eager(ae, x)
        want.backward()
        assert seen == [1.0]
        np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-13)
        np.testing.assert_allclose(a.grad.item(), ae.grad.item(), rtol=1e-13)
    # and so do second derivatives, through the recorded gradient
    a = tg.tensor(0.7, requires_grad=True)
    (ga,) = tg.autograd.grad(fn_big(a, x), [a], create_graph=True)
    ga.backward()
    np.testing.assert_allclose(a.grad.item(), 2 * x.numpy().sum(), rtol=1e-12)


def test_a_vector_output_is_stored_and_its_own_backward_is_the_interpreters():
    def program(a, x):
        u = x * a + 1.0
        return (u * u).sum(), u

    generated = tg.compile(program, codegen=True)
    x = tg.tensor(np.linspace(0.0, 1.0, 40))
    for _ in range(3):
        a, ae = tg.tensor(0.3, requires_grad=True), tg.tensor(0.3, requires_grad=True)
        loss, u = generated(a, x)
        loss_e, u_e = program(ae, x)
        np.testing.assert_array_equal(u.detach().numpy(), u_e.detach().numpy())
        u.backward(tg.ones(40))
        u_e.backward(tg.ones(40))
        np.testing.assert_allclose(a.grad.item(), ae.grad.item(), rtol=1e-13)
    assert generated.stats.generated == 1


@pytest.mark.parametrize("n", [64, 2048])
def test_loops_after_a_whole_sum_and_values_read_across_loops(n):
    # (from 1024 values the replay sums with NumPy, between two generated kernels)
    def program(a, x, w):
        u = x * a + w           # loop 1
        m = u.mean()            # its sum
        v = (u - m) * w         # loop 2 reads the mean: a new loop, reading u and w again
        return (v * v).sum() + (u * x).sum() * 0.5
    source = _same_as_interpreter(program, lambda i: [
        tg.tensor(0.2 + 0.1 * i, requires_grad=True),
        tg.tensor(np.linspace(-1.0, 1.0, n), requires_grad=True),
        tg.tensor(np.cos(np.arange(n) * (1.0 + i)), requires_grad=True)])
    assert source.count(f"for k in range({n}):") >= (4 if n < 1024 else 2)
    assert (".sum()" in source) == (n >= 1024)


def test_one_value_broadcast_to_two_shapes_in_one_loop():
    # (the replay merges equal broadcasts: two shapes of one size stay two records)
    def program(a, x, z):
        return (x * a).sum() + (z * a + z).sum()
    source = _same_as_interpreter(program, lambda i: [
        tg.tensor(1.5 + i, requires_grad=True),
        tg.tensor(np.linspace(-2.0, 3.0, 33), requires_grad=True),
        tg.tensor(np.sin(np.arange(33.0)).reshape(3, 11), requires_grad=True)])
    # the last broadcast adds to a's gradient in the loop, the other after it
    assert source.count("for k in range(33):") == 3


def test_tapes_of_vectors_get_generated_loops_once_hot_and_large_enough():
    x = tg.tensor(np.linspace(-1.0, 1.0, 2000))
    small = tg.compile(lambda a, x: (x[:8] * a).sum())
    large = tg.compile(lambda a, x: (x * a).sum())
    for _ in range(5):
        small(tg.tensor(1.5, requires_grad=True), x).backward()
        large(tg.tensor(1.5, requires_grad=True), x).backward()
    assert small.stats.generated == 0
    assert large.stats.generated == 1


def test_a_write_to_an_output_outlives_filling_in_the_arena():
    def program(a, x):
        u = x * a + 1.0
        return (u * u * a).sum(), u

    fn = tg.compile(program, codegen=True)
    x = tg.tensor(np.linspace(0.0, 1.0, 40))
    fn(tg.tensor(0.3, requires_grad=True), x)
    a = tg.tensor(0.3, requires_grad=True)
    loss, u = fn(a, x)
    assert fn.tape.program.partial     # u * u is left out of the arena
    u.detach().numpy()[0] = 99.0       # (PyTorch: the same storage, no version change)
    loss.register_hook(lambda g: None)  # the interpreter's sweep: the arena is filled in
    loss.backward()
    assert u[0].item() == 99.0
    assert u[1].item() == x[1].item() * 0.3 + 1.0


@pytest.mark.parametrize("n", [300, 5000])
def test_the_cubic_fit_compiled_gives_eager_modes_bits(n):
    # eager mode sums 1024 values or more with NumPy (pairwise), and so does the replay,
    # generated or not; below that the generated loop sums in order, as the interpreter does
    args = [_cubic_args(0, n) for _ in range(2)]
    got = tg.compile(_cubic_fit, codegen=True)
    for _ in range(3):
        loss = got(*args[0])
        loss.backward()
        eager = _cubic_fit(*args[1])
        eager.backward()
        np.testing.assert_allclose(loss.item(), eager.item(), rtol=1e-13)
        if n >= 1024:
            assert loss.item() == eager.item()
        for p, q in zip(args[0][:4], args[1][:4]):
            np.testing.assert_allclose(p.grad.item(), q.grad.item(), rtol=1e-13)
            p.grad = q.grad = None
    assert got.stats.generated == 1, got.stats.not_generated


@pytest.mark.parametrize("n", [50, 3000])
def test_a_broadcast_read_in_a_later_loop(n):
    # the replay merges the two broadcasts of a into one record, which the loop after the
    # mean reads again: from its source, its gradient there kept in memory for the first
    def program(a, x):
        u = x * a + x
        m = u.mean()
        v = (u - m) * a
        return (v * v).sum()
    source = _same_as_interpreter(program, lambda i: [
        tg.tensor(0.5 + i, requires_grad=True),
        tg.tensor(np.cos(np.arange(n) * 0.37), requires_grad=True)])
    forward = source.split("def backward")[0]
    assert len(re.findall(r"^    b\d+ = vals\[", forward, re.M)) >= 2


# Random programs over vectors: loops split by whole sums, broadcasts read across loops,
# parameters broadcast several times, values read by later loops.  Generated against the
# interpreter bit for bit, and against eager mode.
_UNARY_STEPS = [lambda u: u * 0.5 - 0.25, lambda u: tg.tanh(u), lambda u: u.relu(),
                lambda u: u.clamp(-1.0, 1.0), lambda u: u * u, lambda u: -u]
_BINARY_STEPS = [lambda u, v: u + v, lambda u, v: u - v, lambda u, v: u * v,
                 lambda u, v: tg.maximum(u, v), lambda u, v: tg.where(u > v, u, v * 0.5)]


@st.composite
def _vector_programs(draw):
    steps = []
    for _ in range(draw(st.integers(2, 9))):
        kind = draw(st.sampled_from(["unary", "binary", "param", "reduce"]))
        steps.append((kind, draw(st.integers(0, 10 ** 6)), draw(st.integers(0, 10 ** 6))))
    return steps


def _build(steps):
    def program(x, w, a, b):
        vectors, numbers = [x, w], [a, b]
        for kind, i, j in steps:
            u = vectors[i % len(vectors)]
            if kind == "unary":
                vectors.append(_UNARY_STEPS[j % len(_UNARY_STEPS)](u))
            elif kind == "binary":
                v = vectors[j % len(vectors)]
                vectors.append(_BINARY_STEPS[i % len(_BINARY_STEPS)](u, v))
            elif kind == "param":
                vectors.append(u * numbers[j % len(numbers)] + numbers[i % len(numbers)])
            else:
                s = u.mean() if j % 2 else u.sum() * 0.01
                numbers.append(tg.tanh(s))
        return ((vectors[-1] * vectors[-2]).sum() + numbers[-1] * numbers[-2]
                + (x * a).mean())
    return program


@pytest.mark.parametrize("n", [7, 1500])
@given(steps=_vector_programs())
def test_random_programs_over_vectors(n, steps):
    program = _build(steps)
    rng = np.random.default_rng(len(steps))
    xv, wv = rng.uniform(-1.5, 1.5, n), rng.uniform(-1.5, 1.5, n)

    def args():
        return [tg.tensor(xv, requires_grad=True), tg.tensor(wv),
                tg.tensor(0.7, requires_grad=True), tg.tensor(-0.4, requires_grad=True)]

    generated = tg.compile(program, codegen=True)
    interpreted = tg.compile(program, codegen=False)
    for _ in range(2):
        results = []
        for fn in (generated, interpreted, program):
            xs = args()
            out = fn(*xs)
            _poison_gradient_arena()
            out.backward()
            results.append([out.item()] + [None if t.grad is None else t.grad.numpy()
                                           for t in xs])
        (got, want, eager) = results
        for g, w, e in zip(got, want, eager):
            assert (g is None) == (w is None) == (e is None)
            if g is not None:
                _same_bits(g, w)
                np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)
    assert generated.stats.generated == 1, generated.stats.not_generated


def test_generated_loops_read_large_arguments_where_they_are():
    n = 20000     # (tape.IN_PLACE_MIN values or more)
    generated = tg.compile(_cubic_fit, codegen=True)
    interpreted = tg.compile(_cubic_fit, codegen=False)
    for seed in range(3):
        got_args, want_args = _cubic_args(seed, n), _cubic_args(seed, n)
        got, want = generated(*got_args), interpreted(*want_args)
        got.backward()
        want.backward()
        _same_bits(got.item(), want.item())
        for p, q in zip(got_args[:4], want_args[:4]):
            _same_bits(p.grad.item(), q.grad.item())
    variant = generated.tape
    x_rec = variant.arg_records[4]
    assert x_rec in variant.read_in_place
    assert f"d{x_rec} = view_f64(ext[{x_rec}]" in variant.program.source
    # the general paths copy the arguments in first: a hook takes the interpreter's sweep,
    # a non-contiguous argument is copied as before
    args = _cubic_args(7, n)
    loss = generated(*args)
    loss.register_hook(lambda g: g * 2.0)
    loss.backward()
    eager_args = _cubic_args(7, n)
    (_cubic_fit(*eager_args) * 2.0).backward()
    for p, q in zip(args[:4], eager_args[:4]):
        np.testing.assert_allclose(p.grad.item(), q.grad.item(), rtol=1e-12)
    wide = np.linspace(-np.pi, np.pi, 2 * n)
    args = _cubic_args(8, n)[:4] + [tg.tensor(wide)[::2], tg.tensor(np.sin(wide))[::2]]
    loss = generated(*args)
    loss.backward()
    eager_args = _cubic_args(8, n)[:4] + [tg.tensor(wide)[::2], tg.tensor(np.sin(wide))[::2]]
    want = _cubic_fit(*eager_args)
    want.backward()
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-12)
    for p, q in zip(args[:4], eager_args[:4]):
        np.testing.assert_allclose(p.grad.item(), q.grad.item(), rtol=1e-12)


def test_an_argument_read_in_place_changed_before_backward_is_refused_as_in_pytorch():
    torch = pytest.importorskip("torch")
    n = 20000
    fn = tg.compile(lambda a, x, y: ((x * a - y) ** 2).sum(), codegen=True)
    for _ in range(3):
        fn(tg.tensor(1.0, requires_grad=True), tg.tensor(np.ones(n)), tg.tensor(np.zeros(n)))
    assert fn.stats.generated == 1 and len(fn.tape.read_in_place) == 2
    a, x, y = tg.tensor(1.0, requires_grad=True), tg.tensor(np.ones(n)), tg.tensor(np.zeros(n))
    loss = fn(a, x, y)
    x.mul_(2.0)       # x is saved for a's gradient
    at = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    xt, yt = torch.ones(n, dtype=torch.float64), torch.zeros(n, dtype=torch.float64)
    loss_t = ((xt * at - yt) ** 2).sum()
    xt.mul_(2.0)
    with pytest.raises(RuntimeError) as want:
        loss_t.backward()
    with pytest.raises(RuntimeError) as got:
        loss.backward()
    assert str(got.value).split(":")[0] == str(want.value).split(":")[0]
    assert "is at version 1; expected version 0 instead" in str(got.value)
    # y is not: the backward reads the residual, as PyTorch's does
    a, x, y = tg.tensor(1.0, requires_grad=True), tg.tensor(np.ones(n)), tg.tensor(np.zeros(n))
    loss = fn(a, x, y)
    y.add_(1.0)
    loss.backward()
    assert a.grad.item() == 2.0 * n
