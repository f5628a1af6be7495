"""The op table seen from the user's side: one ``Case`` per (opcode, family of call forms).

A case draws float64 input arrays (which of them require grad, too), extra parameters (dims,
scalars, keys, masks) and a call form, and applies the form to tensors of a library ``m``:
tapegrad or PyTorch, spelled the same way.  ``test_ops_grad`` checks every case's gradient
against finite differences; ``test_vs_torch`` runs every case in both libraries.
"""
import math

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import strategies as S
from tapegrad import ops as K

RG_BOTH = ((True, True), (True, False), (False, True))


class Drawn:
    """Inputs of one example: arrays (made into tensors), requires_grad flags, parameters."""

    __slots__ = ("arrays", "rg", "params", "form")

    def __init__(self, arrays, rg, params, form):
        self.arrays, self.rg, self.params, self.form = list(arrays), tuple(rg), params, form

    def __repr__(self):
        shapes = [a.shape for a in self.arrays]
        return (f"Drawn(form={self.form!r}, shapes={shapes}, rg={self.rg}, "
                f"params={self.params!r}, arrays={[a.tolist() for a in self.arrays]!r})")


class Case:
    """An opcode and the call forms that record it.

    ``inputs`` is a strategy of ``(arrays, rg, params)``; each form is
    ``fn(m, *tensors, **params)`` returning one tensor.  The result's own record has the
    case's opcode, or with ``deep`` some record of its graph has (an op that only a
    differentiable backward records).
    """

    def __init__(self, id, op, inputs, forms, deep=False):
        self.id, self.op, self.inputs, self.forms, self.deep = id, op, inputs, forms, deep

    def strategy(self):
        return st.tuples(self.inputs, st.sampled_from(sorted(self.forms))).map(
            lambda t: Drawn(t[0][0], t[0][1], t[0][2], t[1]))

    def run(self, m, tensors, drawn):
        return self.forms[drawn.form](m, *tensors, **drawn.params)

    def __repr__(self):
        return f"Case({self.id})"


# ---------------------------------------------------------------------------------------------
# Input builders
# ---------------------------------------------------------------------------------------------
def one(elements=None, shape=None, **params):
    """One array that requires grad; ``params`` are strategies of extra parameters."""
    @st.composite
    def build(draw):
        x = draw(S.arrays(shape if shape is not None else S.shapes(), elements))
        return [x], (True,), {k: draw(v) for k, v in params.items()}
    return build()


def two(pair_strategy=None, rg=RG_BOTH):
    """Two broadcastable arrays and which of them require grad."""
    @st.composite
    def build(draw):
        a, b = draw(pair_strategy if pair_strategy is not None else S.pair())
        return [a, b], draw(st.sampled_from(rg)), {}
    return build()


def scalars(low=-3.0, high=3.0, ints=True, nonzero=False):
    """Python scalars: floats, and ints when allowed."""
    fl = S.nonzero(S.GAP, high) if nonzero else S.reals(low, high)
    if not ints:
        return fl
    it = st.integers(int(math.ceil(low)), int(math.floor(high)))
    if nonzero:
        it = it.filter(lambda v: v != 0)
    return st.one_of(fl, it)


def distinct_one(magnitudes=False, shape=None, **params):
    @st.composite
    def build(draw):
        sh = draw(shape if shape is not None else S.shapes())
        x = draw(S.distinct(sh, magnitudes=magnitudes))
        return [x], (True,), {k: (v(sh, draw) if callable(v) else draw(v))
                              for k, v in params.items()}
    return build()


def with_shape(elements=None, min_dims=0, max_dims=S.MAX_DIMS, shape=None, **params):
    """One array plus parameters that depend on its shape: ``params`` maps a name to a
    function ``(shape, draw) -> value``."""
    @st.composite
    def build(draw):
        sh = draw(shape if shape is not None else S.shapes(min_dims=min_dims, max_dims=max_dims))
        x = draw(S.arrays(sh, elements))
        return [x], (True,), {k: v(sh, draw) for k, v in params.items()}
    return build()


def _dim(allow_none=False, allow_tuple=False, allow_empty_tuple=False):
    return lambda sh, draw: draw(S.dims(len(sh), allow_none=allow_none, allow_tuple=allow_tuple,
                                        allow_empty_tuple=allow_empty_tuple))


def _keepdim(sh, draw):
    return draw(st.booleans())


# ---------------------------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------------------------
CASES = []


def add(*cases):
    CASES.extend(cases)


add(
    Case("add", K.ADD, two(), {
        "op": lambda m, a, b: a + b,
        "method": lambda m, a, b: a.add(b),
        "function": lambda m, a, b: m.add(a, b),
    }),
    Case("add_fanout", K.ADD, one(), {"x+x": lambda m, x: x + x}),
    Case("add_scalar", K.ADD_S, one(c=scalars()), {
        "x+c": lambda m, x, c: x + c,
        "c+x": lambda m, x, c: c + x,
        "method": lambda m, x, c: x.add(c),
    }),
    Case("sub", K.SUB, two(), {
        "op": lambda m, a, b: a - b,
        "method": lambda m, a, b: a.sub(b),
        "function": lambda m, a, b: m.sub(a, b),
        "subtract": lambda m, a, b: m.subtract(a, b),
    }),
    Case("sub_scalar", K.SUB_S, one(c=scalars()), {
        "x-c": lambda m, x, c: x - c,
        "method": lambda m, x, c: x.sub(c),
    }),
    Case("rsub_scalar", K.RSUB_S, one(c=scalars()), {"c-x": lambda m, x, c: c - x}),
    Case("mul", K.MUL, two(), {
        "op": lambda m, a, b: a * b,
        "method": lambda m, a, b: a.mul(b),
        "function": lambda m, a, b: m.mul(a, b),
        "multiply": lambda m, a, b: m.multiply(a, b),
    }),
    Case("mul_fanout", K.MUL, one(), {"x*x": lambda m, x: x * x}),
    Case("mul_scalar", K.MUL_S, one(c=scalars()), {
        "x*c": lambda m, x, c: x * c,
        "c*x": lambda m, x, c: c * x,
        "method": lambda m, x, c: x.mul(c),
    }),
    Case("div", K.DIV, two(S.pair(S.reals(), S.nonzero(0.2))), {
        "op": lambda m, a, b: a / b,
        "method": lambda m, a, b: a.div(b),
        "function": lambda m, a, b: m.div(a, b),
        "true_divide": lambda m, a, b: m.true_divide(a, b),
    }),
    Case("div_fanout", K.DIV, one(S.nonzero(0.2)), {"x/x": lambda m, x: x / x}),
    Case("div_scalar", K.DIV_S, one(c=scalars(nonzero=True)), {
        "x/c": lambda m, x, c: x / c,
        "method": lambda m, x, c: x.div(c),
    }),
    # c / x is recorded as reciprocal(x) * c, as PyTorch records it
    Case("rdiv_scalar", K.MUL_S, one(S.nonzero(0.2), c=scalars()), {
        "c/x": lambda m, x, c: c / x,
    }),
    Case("reciprocal", K.RECIPROCAL, one(S.nonzero(0.2)), {
        "method": lambda m, x: x.reciprocal(),
        "function": lambda m, x: m.reciprocal(x),
    }),
    Case("neg", K.NEG, one(), {
        "op": lambda m, x: -x,
        "method": lambda m, x: x.neg(),
        "function": lambda m, x: m.neg(x),
    }),
    Case("pow", K.POW, two(S.pair(S.positive(0.2, 3.0), S.reals(-2.0, 2.0))), {
        "op": lambda m, a, b: a ** b,
        "method": lambda m, a, b: a.pow(b),
        "function": lambda m, a, b: m.pow(a, b),
    }),
    Case("pow_fanout", K.POW, one(S.positive(0.2, 2.0)), {"x**x": lambda m, x: x ** x}),
    Case("pow_int_exponent", K.POW_S, one(S.nonzero(0.2), c=st.integers(-3, 4)), {
        "x**c": lambda m, x, c: x ** c,
        "method": lambda m, x, c: x.pow(c),
        "function": lambda m, x, c: m.pow(x, c),
    }),
    Case("pow_float_exponent", K.POW_S, one(S.positive(0.2, 3.0), c=S.reals(-2.5, 2.5)), {
        "x**c": lambda m, x, c: x ** c,
        "method": lambda m, x, c: x.pow(c),
    }),
    Case("rpow_scalar", K.RPOW_S, one(S.reals(-2.0, 2.0), c=S.positive(0.2, 3.0)), {
        "c**x": lambda m, x, c: c ** x,
        "function": lambda m, x, c: m.pow(c, x),
    }),
)

# ---------------------------------------------------------------------------------------------
# Elementwise functions
# ---------------------------------------------------------------------------------------------


_AWAY_FROM_POLES = st.one_of(
    S.reals(0.1, 6.0),
    st.builds(lambda whole, part: whole + part, st.integers(-3, -1), S.reals(0.15, 0.85)))


def unary(name, op, elements):
    return Case(name, op, one(elements), {
        "method": lambda m, x: getattr(x, name)(),
        "function": lambda m, x: getattr(m, name)(x),
    })


add(
    unary("exp", K.EXP, S.reals(-4.0, 4.0)),
    unary("log", K.LOG, S.positive(0.1, 5.0)),
    unary("log1p", K.LOG1P, S.reals(-0.9, 4.0)),
    unary("expm1", K.EXPM1, S.reals(-4.0, 4.0)),
    unary("sqrt", K.SQRT, S.positive(0.1, 5.0)),
    unary("sin", K.SIN, S.reals(-6.0, 6.0)),
    unary("cos", K.COS, S.reals(-6.0, 6.0)),
    unary("tan", K.TAN, S.reals(-1.3, 1.3)),
    unary("tanh", K.TANH, S.reals(-4.0, 4.0)),
    unary("sinh", K.SINH, S.reals(-4.0, 4.0)),
    unary("cosh", K.COSH, S.reals(-4.0, 4.0)),
    unary("asin", K.ASIN, S.reals(-0.9, 0.9)),
    unary("acos", K.ACOS, S.reals(-0.9, 0.9)),
    unary("atan", K.ATAN, S.reals(-4.0, 4.0)),
    unary("asinh", K.ASINH, S.reals(-4.0, 4.0)),
    unary("acosh", K.ACOSH, S.positive(1.1, 5.0)),
    unary("atanh", K.ATANH, S.reals(-0.9, 0.9)),
    unary("log2", K.LOG2, S.positive(0.1, 5.0)),
    unary("log10", K.LOG10, S.positive(0.1, 5.0)),
    unary("exp2", K.EXP2, S.reals(-4.0, 4.0)),
    unary("rsqrt", K.RSQRT, S.positive(0.1, 5.0)),
    unary("erf", K.ERF, S.reals(-3.0, 3.0)),
    unary("erfc", K.ERFC, S.reals(-3.0, 3.0)),
    # away from the poles at 0, -1, -2 (built, not filtered: a one-example-per-case test
    # draws every case at once, and filters there add up)
    unary("lgamma", K.LGAMMA, _AWAY_FROM_POLES),
    unary("digamma", K.DIGAMMA, _AWAY_FROM_POLES),
    unary("erfinv", K.ERFINV, S.reals(-0.95, 0.95)),
    # (away from 0.5, where PyTorch's trigamma switches to its reflection formula: its value
    # jumps there by about 6e-10 relative, which central differences across it amplify)
    Case("polygamma", K.POLYGAMMA, one(S.avoiding([0.5], 0.3, 6.0, gap=1e-4),
                                       n=st.integers(1, 3)), {
        "function": lambda m, x, n: m.polygamma(n, x),
        "method": lambda m, x, n: x.polygamma(n),
        "special": lambda m, x, n: m.special.polygamma(n, x),
    }),
    # modified Bessel functions, across the switch of series at |x| = 8; the scaled ones
    # have a kink (i0e) or a jump of the second derivative (i1e) at 0, so stay away from it
    Case("i0", K.I0, one(S.reals(-9.0, 9.0)), {
        "function": lambda m, x: m.i0(x),
        "method": lambda m, x: x.i0(),
        "special": lambda m, x: m.special.i0(x),
    }),
    Case("i0e", K.I0E, one(S.nonzero(S.GAP, 9.0)), {
        "special": lambda m, x: m.special.i0e(x),
    }),
    Case("i1", K.I1, one(S.reals(-9.0, 9.0)), {
        "special": lambda m, x: m.special.i1(x),
    }),
    Case("i1e", K.I1E, one(S.nonzero(S.GAP, 9.0)), {
        "special": lambda m, x: m.special.i1e(x),
    }),
    # piecewise constant (frac: piecewise linear): away from the jumps
    unary("floor", K.FLOOR, S.avoiding(range(-3, 4))),
    unary("ceil", K.CEIL, S.avoiding(range(-3, 4))),
    unary("trunc", K.TRUNC, S.avoiding(range(-3, 4))),
    unary("round", K.ROUND, S.avoiding([k + 0.5 for k in range(-4, 4)])),
    unary("sign", K.SIGN, S.nonzero()),
    unary("frac", K.FRAC, S.avoiding(range(-3, 4))),
    Case("round_decimals", K.ROUND_DECIMALS,
         one(S.avoiding([k / 10 + 0.05 for k in range(-31, 31)], gap=0.01)), {
             "function": lambda m, x: m.round(x, decimals=1),
             "method": lambda m, x: x.round(decimals=1),
         }),
    unary("sigmoid", K.SIGMOID, S.reals(-8.0, 8.0)),
    unary("relu", K.RELU, S.nonzero()),
    Case("abs", K.ABS, one(S.nonzero()), {
        "method": lambda m, x: x.abs(),
        "function": lambda m, x: m.abs(x),
        "builtin": lambda m, x: abs(x),
    }),
)


@st.composite
def _softplus_inputs(draw):
    beta = draw(st.sampled_from([1.0, 2.0, 0.5]))
    threshold = draw(st.sampled_from([20.0, 1.0, 3.0]))
    # keep clear of beta*x == threshold, where the output switches formula
    x = draw(S.arrays(S.shapes(), S.avoiding([threshold / beta], -6.0, 6.0, gap=0.1)))
    return [x], (True,), {"beta": beta, "threshold": threshold}


add(Case("softplus", K.SOFTPLUS, _softplus_inputs(), {
    "default": lambda m, x, beta, threshold: m.F.softplus(x),
    "beta": lambda m, x, beta, threshold: m.F.softplus(x, beta=beta),
    "both": lambda m, x, beta, threshold: m.F.softplus(x, beta, threshold),
}))


# the activation ops (ops/activation.py): kinks and branch points kept a gap away, for the
# central differences
def _activation(name, op, elements, forms):
    return Case(name, op, one(elements), forms)


add(
    _activation("gelu", K.GELU, S.reals(-4.0, 4.0), {
        "function": lambda m, x: m.nn.functional.gelu(x),
        "module": lambda m, x: m.nn.GELU()(x),
    }),
    _activation("gelu_tanh", K.GELU_TANH, S.reals(-4.0, 4.0), {
        "function": lambda m, x: m.nn.functional.gelu(x, approximate="tanh"),
        "module": lambda m, x: m.nn.GELU(approximate="tanh")(x),
    }),
    _activation("silu", K.SILU, S.reals(-5.0, 5.0), {
        "function": lambda m, x: m.nn.functional.silu(x),
        "module": lambda m, x: m.nn.SiLU()(x),
    }),
    _activation("mish", K.MISH, S.reals(-5.0, 5.0), {
        "function": lambda m, x: m.nn.functional.mish(x),
        "module": lambda m, x: m.nn.Mish()(x),
    }),
    _activation("elu", K.ELU, S.avoiding([0.0], -4.0, 3.0), {
        "function": lambda m, x: m.nn.functional.elu(x),
        "alpha": lambda m, x: m.nn.functional.elu(x, alpha=0.4),
        "selu": lambda m, x: m.nn.functional.selu(x),
        "module": lambda m, x: m.nn.ELU(2.0)(x),
    }),
    _activation("celu", K.CELU, S.avoiding([0.0], -4.0, 3.0), {
        "function": lambda m, x: m.nn.functional.celu(x),
        "alpha": lambda m, x: m.nn.functional.celu(x, alpha=0.6),
        "module": lambda m, x: m.nn.CELU(1.5)(x),
    }),
    _activation("leaky_relu", K.LEAKY_RELU, S.avoiding([0.0]), {
        "function": lambda m, x: m.nn.functional.leaky_relu(x),
        "slope": lambda m, x: m.nn.functional.leaky_relu(x, 0.3),
        "module": lambda m, x: m.nn.LeakyReLU(0.05)(x),
    }),
    _activation("hardtanh", K.HARDTANH, S.avoiding([-1.0, 1.0, 0.0, 6.0, -0.5, 2.0], -3.0, 7.0), {
        "function": lambda m, x: m.nn.functional.hardtanh(x),
        "bounds": lambda m, x: m.nn.functional.hardtanh(x, -0.5, 2.0),
        "relu6": lambda m, x: m.nn.functional.relu6(x),
        "module": lambda m, x: m.nn.ReLU6()(x),
    }),
    _activation("hardsigmoid", K.HARDSIGMOID, S.avoiding([-3.0, 3.0], -5.0, 5.0), {
        "function": lambda m, x: m.nn.functional.hardsigmoid(x),
        "module": lambda m, x: m.nn.Hardsigmoid()(x),
    }),
    _activation("hardswish", K.HARDSWISH, S.avoiding([-3.0, 3.0], -5.0, 5.0), {
        "function": lambda m, x: m.nn.functional.hardswish(x),
        "module": lambda m, x: m.nn.Hardswish()(x),
    }),
    _activation("logsigmoid", K.LOG_SIGMOID, S.reals(-6.0, 6.0), {
        "function": lambda m, x: m.nn.functional.logsigmoid(x),
        "module": lambda m, x: m.nn.LogSigmoid()(x),
    }),
    _activation("softshrink", K.SOFTSHRINK, S.avoiding([-0.5, 0.5, -1.0, 1.0]), {
        "function": lambda m, x: m.nn.functional.softshrink(x),
        "lambd": lambda m, x: m.nn.functional.softshrink(x, 1.0),
        "module": lambda m, x: m.nn.Softshrink()(x),
    }),
    _activation("hardshrink", K.HARDSHRINK, S.avoiding([-0.5, 0.5, -1.0, 1.0]), {
        "function": lambda m, x: m.nn.functional.hardshrink(x),
        "lambd": lambda m, x: m.nn.functional.hardshrink(x, 1.0),
        "module": lambda m, x: m.nn.Hardshrink()(x),
    }),
    # the in-place forms: other nodes, whose gradient is computed from the result
    _activation("elu_", K.ELU_RESULT, S.avoiding([0.0], -4.0, 3.0), {
        "elu_": lambda m, x: m.nn.functional.elu(x * 1.0, inplace=True),
        "alpha": lambda m, x: m.nn.functional.elu(x * 1.0, alpha=0.4, inplace=True),
        "selu_": lambda m, x: m.nn.functional.selu(x * 1.0, inplace=True),
        "module": lambda m, x: m.nn.ELU(2.0, inplace=True)(x * 1.0),
    }),
    _activation("celu_", K.CELU_RESULT, S.avoiding([0.0], -4.0, 3.0), {
        "celu_": lambda m, x: m.nn.functional.celu(x * 1.0, inplace=True),
        "alpha": lambda m, x: m.nn.functional.celu(x * 1.0, alpha=0.6, inplace=True),
    }),
    _activation("leaky_relu_", K.LEAKY_RELU_RESULT, S.avoiding([0.0]), {
        "leaky_relu_": lambda m, x: m.nn.functional.leaky_relu(x * 1.0, inplace=True),
        "module": lambda m, x: m.nn.LeakyReLU(0.2, inplace=True)(x * 1.0),
    }),
    # (away from 0, where PyTorch's gradient formula, ours too, cancels: differences of it
    # are no reference for the second order there; the edge tests take 0 and tiny values)
    _activation("sinc", K.SINC, S.avoiding([0.0], -3.0, 3.0, gap=0.3), {
        "function": lambda m, x: m.sinc(x),
        "method": lambda m, x: x.sinc(),
        "special": lambda m, x: m.special.sinc(x),
    }),
)


def _bounds(which):
    @st.composite
    def build(draw):
        lo = draw(st.one_of(S.reals(-2.0, 0.5), st.integers(-2, 0)))
        hi = draw(st.one_of(S.reals(0.6, 2.5), st.integers(1, 2)))
        points = [p for p, used in ((lo, which in ("min", "both")), (hi, which in ("max", "both")))
                  if used]
        x = draw(S.arrays(S.shapes(), S.avoiding(points, -3.0, 3.0)))
        return [x], (True,), {"lo": lo, "hi": hi}
    return build()


@st.composite
def _tensor_bounds(draw):
    """x, lo <= hi broadcasting with x, all at least GAP apart elementwise (``separated_pair``
    twice, with the bounds pair shifted apart)."""
    # the bounds broadcast to x's shape (PyTorch's backward fails when they would widen it)
    sx = draw(S.shapes())
    sl, sh = (draw(S.squashed(sx)) for _ in range(2))
    x = draw(S.arrays(sx, S.reals(0.0, 0.4))) + draw(S.arrays(sx, st.integers(-3, 2).map(float)))
    lo = draw(S.arrays(sl, S.reals(0.5, 0.9))) + draw(S.arrays(sl, st.integers(-3, 0).map(float)))
    hi = lo.max() + draw(S.arrays(sh, st.integers(1, 3).map(float)))
    return [x, lo, hi], draw(st.sampled_from([(True, True, True), (True, False, False),
                                               (False, True, True)])), {}


add(
    Case("clamp_both", K.CLAMP, _bounds("both"), {
        "method": lambda m, x, lo, hi: x.clamp(lo, hi),
        "keywords": lambda m, x, lo, hi: x.clamp(min=lo, max=hi),
        "function": lambda m, x, lo, hi: m.clamp(x, lo, hi),
        "clip": lambda m, x, lo, hi: x.clip(lo, hi),
    }),
    Case("clamp_min", K.CLAMP, _bounds("min"), {
        "method": lambda m, x, lo, hi: x.clamp(min=lo),
        "function": lambda m, x, lo, hi: m.clamp(x, min=lo),
        "positional": lambda m, x, lo, hi: m.clamp(x, lo),
    }),
    Case("clamp_max", K.CLAMP, _bounds("max"), {
        "method": lambda m, x, lo, hi: x.clamp(max=hi),
        "function": lambda m, x, lo, hi: m.clamp(x, None, hi),
    }),
    Case("clamp_min_method", K.CLAMP_MIN, _bounds("min"), {
        "method": lambda m, x, lo, hi: x.clamp_min(lo),
        "function": lambda m, x, lo, hi: m.clamp_min(x, lo),
    }),
    Case("clamp_max_method", K.CLAMP_MAX, _bounds("max"), {
        "method": lambda m, x, lo, hi: x.clamp_max(hi),
        "function": lambda m, x, lo, hi: m.clamp_max(x, hi),
    }),
    # tensor bounds: values picked by comparisons (wheres), shown as PyTorch's one
    # ClampBackward0 node
    Case("clamp_tensor_bounds", K.WHERE, _tensor_bounds(), {
        "both": lambda m, x, lo, hi: x.clamp(lo, hi),
        "keywords": lambda m, x, lo, hi: m.clamp(x, min=lo, max=hi),
    }),
    Case("maximum", K.MAXIMUM, two(S.separated_pair()), {
        "function": lambda m, a, b: m.maximum(a, b),
        "method": lambda m, a, b: a.maximum(b),
        "max(a, b)": lambda m, a, b: m.max(a, b),
    }),
    Case("minimum", K.MINIMUM, two(S.separated_pair()), {
        "function": lambda m, a, b: m.minimum(a, b),
        "method": lambda m, a, b: a.minimum(b),
        "min(a, b)": lambda m, a, b: m.min(a, b),
    }),
    # y away from 0: the branch cut (y = 0, x < 0) is a jump
    Case("atan2", K.ATAN2, two(S.pair(S.nonzero(0.2), S.reals())), {
        "function": lambda m, a, b: m.atan2(a, b),
        "method": lambda m, a, b: a.atan2(b),
        "arctan2": lambda m, a, b: m.arctan2(a, b),
    }),
    Case("hypot", K.HYPOT, two(S.pair(S.nonzero(0.2), S.reals())), {
        "function": lambda m, a, b: m.hypot(a, b),
        "method": lambda m, a, b: a.hypot(b),
    }),
    Case("xlogy", K.XLOGY, two(S.pair(S.reals(), S.positive(0.2, 3.0))), {
        "function": lambda m, a, b: m.xlogy(a, b),
        "method": lambda m, a, b: a.xlogy(b),
    }),
    Case("xlog1py", K.XLOG1PY, two(S.pair(S.reals(), S.positive(-0.8, 3.0))), {
        "function": lambda m, a, b: m.xlog1py(a, b) if m.__name__ == "tapegrad" else
        m.special.xlog1py(a, b),
    }),
    # quotients in (-0.9, 0.9): away from the jumps of the rest at whole quotients
    Case("fmod", K.FMOD, two(S.pair(S.nonzero(0.1, 0.9), S.reals(1.0, 3.0))), {
        "function": lambda m, a, b: m.fmod(a, b),
        "method": lambda m, a, b: a.fmod(b),
    }),
    Case("remainder", K.REMAINDER, two(S.pair(S.nonzero(0.1, 0.9), S.nonzero(1.0, 3.0))), {
        "function": lambda m, a, b: m.remainder(a, b),
        "method": lambda m, a, b: a.remainder(b),
        "op": lambda m, a, b: a % b,
    }),
    Case("copysign", K.COPYSIGN, two(S.pair(S.nonzero(0.2), S.nonzero(0.2))), {
        "function": lambda m, a, b: m.copysign(a, b),
        "method": lambda m, a, b: a.copysign(b),
    }),
    # probabilities away from 0 and 1 (where the floors make kinks), targets inside [0, 1]
    # (a central difference must not step out of it: the range check raises); one shape, as
    # PyTorch requires.  test_nn checks 0 and 1 themselves.
    Case("binary_cross_entropy", K.BINARY_CROSS_ENTROPY,
         two(S.pair(S.reals(0.05, 0.95), S.reals(0.05, 0.95),
                    shapes_strategy=S.shapes().map(lambda sh: (sh, sh)))), {
             "function": lambda m, a, b: m.nn.functional.binary_cross_entropy(
                 a, b, reduction="none"),
             "module": lambda m, a, b: m.nn.BCELoss(reduction="none")(a, b),
         }),
    Case("logaddexp", K.LOGADDEXP, two(), {
        "function": lambda m, a, b: m.logaddexp(a, b),
        "method": lambda m, a, b: a.logaddexp(b),
    }),
)


@st.composite
def _where_inputs(draw):
    sc, sa, sb = draw(S.broadcast_shapes(3))
    cond = draw(S.arrays(sc, st.booleans()).map(lambda c: c.astype(bool)))
    a = draw(S.arrays(sa))
    b = draw(S.arrays(sb))
    rg = draw(st.sampled_from(RG_BOTH))
    c = draw(S.reals())
    return [a, b], rg, {"cond": cond, "c": c}


add(
    Case("where", K.WHERE, _where_inputs(), {
        "function": lambda m, a, b, cond, c: m.where(m.tensor(cond), a, b),
    }),
    # the condition comes from x itself: keep x away from where it flips
    Case("where_scalar", K.WHERE, one(S.avoiding([0.5]), c=S.reals()), {
        "scalar other": lambda m, x, c: m.where(x > 0.5, x, c),
        "scalar input": lambda m, x, c: m.where(x > 0.5, c, x),
    }),
)

# ---------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------


def _reduction(name, op, elements, dim, keepdim=True, function=True):
    """sum/mean-like: ``x.name(dim, keepdim)`` in method, keyword and function forms."""
    params = {"dim": dim}
    if keepdim:
        params["keepdim"] = _keepdim
        forms = {
            "method": lambda m, x, dim, keepdim: getattr(x, name)(dim, keepdim),
            "keywords": lambda m, x, dim, keepdim: getattr(x, name)(dim=dim, keepdim=keepdim),
        }
        if function:
            forms["function"] = lambda m, x, dim, keepdim: getattr(m, name)(x, dim,
                                                                          keepdim=keepdim)
    else:
        forms = {"method": lambda m, x, dim: getattr(x, name)(dim)}
    return Case(f"{name}_dim", op, with_shape(elements, **params), forms)


add(
    Case("sum_all", K.SUM, one(), {
        "method": lambda m, x: x.sum(),
        "function": lambda m, x: m.sum(x),
    }),
    _reduction("sum", K.SUM_DIM, None, _dim(allow_tuple=True, allow_empty_tuple=True)),
    Case("mean_all", K.MEAN, one(), {
        "method": lambda m, x: x.mean(),
        "function": lambda m, x: m.mean(x),
    }),
    _reduction("mean", K.MEAN_DIM, None, _dim(allow_tuple=True, allow_empty_tuple=True)),
    Case("prod_all", K.PROD, one(S.reals(-1.5, 1.5)), {
        "method": lambda m, x: x.prod(),
        "function": lambda m, x: m.prod(x),
    }),
    _reduction("prod", K.PROD_DIM, S.reals(-1.5, 1.5), _dim()),
    Case("max_all", K.MAX, distinct_one(), {
        "method": lambda m, x: x.max(),
        "function": lambda m, x: m.max(x),
    }),
    Case("min_all", K.MIN, distinct_one(), {
        "method": lambda m, x: x.min(),
        "function": lambda m, x: m.min(x),
    }),
)


def _extreme_dim(name, op):
    return Case(f"{name}_dim", op, distinct_one(dim=_dim(), keepdim=_keepdim), {
        "values": lambda m, x, dim, keepdim: getattr(x, name)(dim, keepdim).values,
        "index 0": lambda m, x, dim, keepdim: getattr(x, name)(dim=dim, keepdim=keepdim)[0],
        "function": lambda m, x, dim, keepdim: getattr(m, name)(x, dim, keepdim)[0],
    })


def _amax(name, op):
    return Case(name, op, distinct_one(dim=_dim(allow_tuple=True, allow_empty_tuple=True),
                                       keepdim=_keepdim), {
        "method": lambda m, x, dim, keepdim: getattr(x, name)(dim, keepdim),
        "function": lambda m, x, dim, keepdim: getattr(m, name)(x, dim, keepdim=keepdim),
        "no dim": lambda m, x, dim, keepdim: getattr(x, name)(),
    })


add(_extreme_dim("max", K.MAX_DIM), _extreme_dim("min", K.MIN_DIM),
    _amax("amax", K.AMAX), _amax("amin", K.AMIN))


@st.composite
def _var_inputs(draw, std):
    sh = draw(S.shapes())
    x = draw(S.distinct(sh))
    dim = draw(S.dims(len(sh), allow_tuple=True))
    spelling = draw(st.sampled_from(["default", "correction", "unbiased"]))
    if spelling == "correction":
        corr = draw(st.sampled_from([0, 1, 2, 0.5]))
    elif spelling == "unbiased":
        corr = 1 if draw(st.booleans()) else 0
    else:
        corr = 1
    count = S.reduced_count(sh, dim)
    # var is smooth only where count > correction; std also needs var > 0
    assume(count - corr > 0 and (count >= 2 or not std))
    return [x], (True,), {"dim": dim, "spelling": spelling, "corr": corr,
                          "keepdim": draw(st.booleans())}


def _var_forms(name):
    def run(m, x, dim, spelling, corr, keepdim):
        f = getattr(x, name)
        if dim is None:
            if spelling == "correction":
                return f(correction=corr)
            if spelling == "unbiased":
                return f(unbiased=bool(corr))
            return f()
        if spelling == "correction":
            return f(dim, correction=corr, keepdim=keepdim)
        if spelling == "unbiased":
            return f(dim, bool(corr), keepdim)
        return f(dim, keepdim=keepdim)

    def function(m, x, dim, spelling, corr, keepdim):
        if spelling == "correction":
            return getattr(m, name)(x, dim, correction=corr, keepdim=keepdim)
        return getattr(m, name)(x, dim, keepdim=keepdim) if spelling == "default" else \
            getattr(m, name)(x, dim, unbiased=bool(corr), keepdim=keepdim)
    return {"method": run, "function": function}


add(
    Case("var", K.VAR, _var_inputs(False), _var_forms("var")),
    Case("std", K.STD, _var_inputs(True), _var_forms("std")),
    Case("logsumexp", K.LOGSUMEXP, with_shape(S.reals(-5.0, 5.0), dim=_dim(allow_tuple=True),
                                              keepdim=_keepdim), {
        "method": lambda m, x, dim, keepdim: x.logsumexp(dim, keepdim),
        "function": lambda m, x, dim, keepdim: m.logsumexp(x, dim=dim, keepdim=keepdim),
    }),
    Case("softmax", K.SOFTMAX, with_shape(S.reals(-5.0, 5.0), dim=_dim()), {
        "method": lambda m, x, dim: x.softmax(dim),
        "function": lambda m, x, dim: m.softmax(x, dim),
        "keyword": lambda m, x, dim: m.softmax(x, dim=dim),
    }),
    Case("log_softmax", K.LOG_SOFTMAX, with_shape(S.reals(-5.0, 5.0), dim=_dim()), {
        "method": lambda m, x, dim: x.log_softmax(dim),
        "function": lambda m, x, dim: m.log_softmax(x, dim),
        "keyword": lambda m, x, dim: m.log_softmax(x, dim=dim),
    }),
)


@st.composite
def _norm_inputs(draw):
    p = draw(st.sampled_from([2, 2.0, "fro", 1, math.inf, -math.inf, 3, 1.5, 0.5]))
    sh = draw(S.shapes())
    if p in (math.inf, -math.inf):
        x = draw(S.distinct(sh, magnitudes=True))
    else:
        x = draw(S.arrays(sh, S.nonzero(0.1)))
    dim = draw(S.dims(len(sh), allow_tuple=True, allow_empty_tuple=True))
    # the Frobenius norm over more than two dims is an error in both libraries
    assume(not (p == "fro" and isinstance(dim, (list, tuple)) and len(dim) > 2))
    return [x], (True,), {"p": p, "dim": dim, "keepdim": draw(st.booleans())}


add(Case("norm", K.NORM, _norm_inputs(), {
    "positional": lambda m, x, p, dim, keepdim: x.norm(p, dim, keepdim),
    "keywords": lambda m, x, p, dim, keepdim: x.norm(p=p, dim=dim, keepdim=keepdim),
    "function": lambda m, x, p, dim, keepdim: m.norm(x, p, dim, keepdim),
    "p only": lambda m, x, p, dim, keepdim: x.norm(p),
}))

# ---------------------------------------------------------------------------------------------
# Linear algebra
# ---------------------------------------------------------------------------------------------


@st.composite
def _matmul_inputs(draw):
    form, sa, sb = draw(S.matmul_shapes())
    a = draw(S.arrays(sa))
    b = draw(S.arrays(sb))
    return [a, b], draw(st.sampled_from(RG_BOTH)), {"shapes": form}


def _named_product(m, a, b, shapes):
    name = {"dot": "dot", "mv": "mv", "mm": "mm"}.get(shapes, "matmul")
    return getattr(m, name)(a, b)


add(Case("matmul", K.MATMUL, _matmul_inputs(), {
    "@": lambda m, a, b, shapes: a @ b,
    "method": lambda m, a, b, shapes: a.matmul(b),
    "function": lambda m, a, b, shapes: m.matmul(a, b),
    "named": _named_product,
}))


# tapegrad.linalg's ops.  Matrices are kept well conditioned, so that central differences
# and the two libraries' LAPACK calls agree: drawn entries in [-0.5, 0.5], and the forms add
# a diagonal of +-3 (strictly diagonally dominant for n <= 3, whatever the entries: the
# replay test's rotated inputs too; the determinant is far from 0 and negative for n = 2).
@st.composite
def _square(draw, batch):
    n = draw(st.integers(1, 3))
    return draw(S.arrays(batch + (n, n), S.reals(-0.5, 0.5)))


def _wc(m, a):
    n = a.shape[-1]
    return a + m.tensor(np.diag([3.0, -3.0, 3.0][:n]))


@st.composite
def _one_square(draw):
    batch = draw(S.shapes(0, 2, max_side=2))
    return [draw(_square(batch))], (True,), {}


add(Case("linalg_inv", K.LINALG_INV, _one_square(), {
    "linalg": lambda m, a: m.linalg.inv(_wc(m, a)),
    "inverse": lambda m, a: m.inverse(_wc(m, a)),
    "method": lambda m, a: _wc(m, a).inverse(),
}))


@st.composite
def _solve_inputs(draw):
    ba, bb = draw(S.broadcast_shapes(2, 0, 2, 2))
    a = draw(_square(ba))
    n = a.shape[-1]
    k = draw(st.integers(1, 3))
    kind = draw(st.sampled_from(["left", "right", "vector"]))
    if kind == "vector":
        # a 1-D right-hand side; A's batch stays A's own (PyTorch reads (*, n) as vectors
        # only when B has exactly A's batch)
        b = draw(S.arrays((n,)))
    else:
        b = draw(S.arrays(bb + ((n, k) if kind == "left" else (k, n))))
    # a right solve of what PyTorch reads as vectors is an error in both libraries
    # (test_linalg checks it)
    assume(kind != "right" or not (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1]))
    return [a, b], draw(st.sampled_from(RG_BOTH)), {"left": kind != "right"}


add(Case("linalg_solve", K.LINALG_SOLVE, _solve_inputs(), {
    "function": lambda m, a, b, left: m.linalg.solve(_wc(m, a), b, left=left),
}))


add(Case("linalg_det", K.LINALG_DET, _one_square(), {
    "linalg": lambda m, a: m.linalg.det(_wc(m, a)),
    "det": lambda m, a: m.det(_wc(m, a)),
    "method": lambda m, a: _wc(m, a).det(),
}))

add(Case("linalg_slogdet", K.LINALG_SLOGDET, _one_square(), {
    "linalg": lambda m, a: m.linalg.slogdet(_wc(m, a)).logabsdet,
    "top": lambda m, a: m.slogdet(_wc(m, a))[1],
    "method": lambda m, a: _wc(m, a).slogdet()[1],
}))


@st.composite
def _spd_factor(draw):
    batch = draw(S.shapes(0, 2, max_side=2))
    n = draw(st.integers(1, 3))
    return [draw(S.arrays(batch + (n, n), S.reals(-1.0, 1.0)))], (True,), {
        "upper": draw(st.booleans())}


def _spd(m, a):
    # symmetric positive-definite and a function of every entry of a: perturbations of a
    # stay symmetric, as the Cholesky rules assume
    return a @ a.mT + m.eye(a.shape[-1], dtype=a.dtype)


add(Case("linalg_cholesky", K.LINALG_CHOLESKY, _spd_factor(), {
    "function": lambda m, a, upper: m.linalg.cholesky(_spd(m, a), upper=upper),
    "lower": lambda m, a, upper: m.linalg.cholesky(_spd(m, a)),
}))


# The decompositions.  Drawn entries in [-0.5, 0.5] plus a separating diagonal keep the
# eigenvalues (Gershgorin discs of radius <= 2 about 0, 6, 12 for a + a^T) and singular
# values (Weyl: within ||a||_2 <= 1.5 of 2, 6, 10) apart and the singular values positive, so
# that the vectors are well defined, R is invertible and differences see the derivative.
# Vectors enter through functions invariant to their signs (LAPACK's choices, which NumPy's
# and PyTorch's builds need not share): those cases are ``deep``.
def _sym_apart(m, a):
    n = a.shape[-1]
    return a + a.mT + m.tensor(np.diag([0.0, 6.0, 12.0][:n]))


@st.composite
def _decomposition_input(draw):
    batch = draw(S.shapes(0, 2, max_side=2))
    rows, cols = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    return [draw(S.arrays(batch + (rows, cols), S.reals(-0.5, 0.5)))], (True,), {}


def _apart(m, a):
    rows, cols = a.shape[-2:]
    d = np.zeros((rows, cols))
    for i in range(min(rows, cols)):
        d[i, i] = 2.0 + 4.0 * i
    return a + m.tensor(d)


def _k(a):
    return min(a.shape[-2:])


def _qr_input(m, a):
    """Full column rank (diagonal 3, 8, 13; ||a + 0.7 tril(1, -1)||_2 < 2.8), and no column
    has zeros below the diagonal: there LAPACK's reflector is the identity (a zero column
    needs no reflection), while any perturbation flips the signs of that row of R and that
    column of Q, a jump that differences see."""
    rows, cols = a.shape[-2:]
    d = np.zeros((rows, cols))
    for i in range(rows):
        for j in range(cols):
            d[i, j] = 3.0 + 5.0 * i if i == j else (0.7 if i > j else 0.0)
    return a + m.tensor(d)


add(Case("linalg_eigh", K.LINALG_EIGH, _one_square(), {
    "eigvalsh": lambda m, a: m.linalg.eigvalsh(_sym_apart(m, a)),
    "eigenvalues": lambda m, a: m.linalg.eigh(_sym_apart(m, a)).eigenvalues,
    "upper": lambda m, a: m.linalg.eigvalsh(_sym_apart(m, a), UPLO="U"),
}))

add(Case("linalg_eigh_vectors", K.LINALG_EIGH, _one_square(), {
    "squares": lambda m, a: m.linalg.eigh(_sym_apart(m, a)).eigenvectors ** 2,
    "weighted": lambda m, a: (lambda r: r.eigenvectors * r.eigenvectors
                              * r.eigenvalues.unsqueeze(-2))(m.linalg.eigh(_sym_apart(m, a))),
    "projector": lambda m, a: (lambda v: v[..., :1] @ v[..., :1].mT)(
        m.linalg.eigh(_sym_apart(m, a), UPLO="U").eigenvectors),
}, deep=True))

add(Case("linalg_svd", K.LINALG_SVD, _decomposition_input(), {
    "svdvals": lambda m, a: m.linalg.svdvals(_apart(m, a)),
    "S": lambda m, a: m.linalg.svd(_apart(m, a), full_matrices=False).S,
    "S full": lambda m, a: m.linalg.svd(_apart(m, a)).S,
}))

add(Case("linalg_svd_vectors", K.LINALG_SVD, _decomposition_input(), {
    "U": lambda m, a: m.linalg.svd(_apart(m, a), full_matrices=False).U ** 2,
    "Vh": lambda m, a: m.linalg.svd(_apart(m, a), full_matrices=False).Vh ** 2,
    "U full": lambda m, a: m.linalg.svd(_apart(m, a)).U[..., :_k(a)] ** 2,
    "Vh full": lambda m, a: m.linalg.svd(_apart(m, a)).Vh[..., :_k(a), :] ** 2,
    "outer": lambda m, a: (lambda r: (r.U[..., :1] * r.S[..., :1].unsqueeze(-1))
                           @ r.Vh[..., :1, :])(m.linalg.svd(_apart(m, a))),
}, deep=True))

add(Case("linalg_qr", K.LINALG_QR, _decomposition_input(), {
    "Q": lambda m, a: m.linalg.qr(_qr_input(m, a)).Q,
    "R": lambda m, a: m.linalg.qr(_qr_input(m, a)).R,
    # complete factors have a derivative when rows <= cols (then they are the reduced ones)
    "complete R": lambda m, a: m.linalg.qr(
        _qr_input(m, a), mode="complete" if a.shape[-2] <= a.shape[-1] else "reduced").R,
}))


# solve_triangular: B's batch broadcasts with A's; the forms read A's upper or lower triangle
# (with _wc's diagonal of +-3, or ones when unitriangular)
@st.composite
def _triangular_inputs(draw):
    ba, bb = draw(S.broadcast_shapes(2, 0, 2, 2))
    a = draw(_square(ba))
    n = a.shape[-1]
    k = draw(st.integers(1, 3))
    left = draw(st.booleans())
    b = draw(S.arrays(bb + ((n, k) if left else (k, n))))
    return [a, b], draw(st.sampled_from(RG_BOTH)), {
        "left": left, "upper": draw(st.booleans()), "unit": draw(st.booleans())}


add(Case("linalg_solve_triangular", K.LINALG_SOLVE_TRIANGULAR, _triangular_inputs(), {
    "function": lambda m, a, b, left, upper, unit: m.linalg.solve_triangular(
        _wc(m, a), b, upper=upper, left=left, unitriangular=unit),
}))


# pinv and lstsq: tall, wide and square matrices, kept of full rank and well conditioned by
# 3 on the (rectangular) diagonal (singular values in [1.5, 4.5] for entries in [-0.5, 0.5])
@st.composite
def _rectangular(draw, batch):
    m, n = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    return draw(S.arrays(batch + (m, n), S.reals(-0.5, 0.5)))


def _wr(m, a):
    rows, cols = a.shape[-2:]
    return a + m.tensor(3.0 * np.eye(rows, cols))


@st.composite
def _one_rectangular(draw):
    batch = draw(S.shapes(0, 2, max_side=2))
    return [draw(_rectangular(batch))], (True,), {}


add(Case("linalg_pinv", K.LINALG_PINV, _one_rectangular(), {
    "linalg": lambda m, a: m.linalg.pinv(_wr(m, a)),
    "pinverse": lambda m, a: m.pinverse(_wr(m, a)),
    "method": lambda m, a: _wr(m, a).pinverse(),
    "hermitian": lambda m, a: m.linalg.pinv(
        _wr(m, a) @ _wr(m, a).mT + m.tensor(np.eye(a.shape[-2])), hermitian=True),
}))

add(Case("linalg_matrix_exp", K.LINALG_MATRIX_EXP, _one_square(), {
    "linalg": lambda m, a: m.linalg.matrix_exp(a),
    "top": lambda m, a: m.matrix_exp(4.0 * a),
    "method": lambda m, a: a.matrix_exp(),
}))


@st.composite
def _lstsq_inputs(draw):
    # lstsq broadcasts batches of the same number of dims (B of one dim fewer is a vector)
    ba, bb = draw(S.broadcast_shapes(2, 0, 2, 2))
    nd = max(len(ba), len(bb))
    ba, bb = (1,) * (nd - len(ba)) + ba, (1,) * (nd - len(bb)) + bb
    a = draw(_rectangular(ba))
    rows = a.shape[-2]
    if draw(st.booleans()):
        b = draw(S.arrays(a.shape[:-1]))        # a vector right-hand side of A's batch
    else:
        b = draw(S.arrays(bb + (rows, draw(st.integers(1, 3)))))
    return [a, b], draw(st.sampled_from(RG_BOTH)), {
        "driver": draw(st.sampled_from([None, "gelsy", "gelsd", "gelss", "gels"]))}


def _residuals(m, a, b, driver):
    # residuals come only for tall A of full rank, from the drivers other than gelsy: n rows
    # of 3 I below A (and of ones below B) make any A so
    a = _wr(m, a)
    n = a.shape[-1]
    a = m.cat([a, m.tensor(np.broadcast_to(3.0 * np.eye(n), a.shape[:-2] + (n, n)).copy())], -2)
    if b.ndim == a.ndim - 1:
        b = m.cat([b, m.tensor(np.ones(tuple(b.shape[:-1]) + (n,)))], -1)
    else:
        b = m.cat([b, m.tensor(np.ones(tuple(b.shape[:-2]) + (n, b.shape[-1])))], -2)
    return m.linalg.lstsq(a, b, driver="gelsd" if driver in (None, "gelsy") else driver).residuals


add(Case("linalg_lstsq", K.LINALG_LSTSQ, _lstsq_inputs(), {
    "solution": lambda m, a, b, driver: m.linalg.lstsq(_wr(m, a), b, driver=driver).solution,
    "rcond": lambda m, a, b, driver: m.linalg.lstsq(_wr(m, a), b, 1e-10).solution,
    "residuals": _residuals,
}))

@st.composite
def _cross_inputs(draw):
    base = draw(S.shapes(0, 2, max_side=3))
    d = draw(st.integers(0, len(base)))
    sa = tuple(s if draw(st.booleans()) else 1 for s in base)
    sb = tuple(s if draw(st.booleans()) else 1 for s in base)
    a = draw(S.arrays(sa[:d] + (3,) + sa[d:]))
    b = draw(S.arrays(sb[:d] + (3,) + sb[d:]))
    dim = d - len(base) - 1 if draw(st.booleans()) else d
    return [a, b], draw(st.sampled_from(RG_BOTH)), {"dim": dim}


add(Case("linalg_cross", K.LINALG_CROSS, _cross_inputs(), {
    "linalg": lambda m, a, b, dim: m.linalg.cross(a, b, dim=dim),
    "top": lambda m, a, b, dim: m.cross(a, b, dim=dim),
    "method": lambda m, a, b, dim: a.cross(b, dim=dim),
}))

# ---------------------------------------------------------------------------------------------
# Structure
# ---------------------------------------------------------------------------------------------


@st.composite
def _getitem_inputs(draw):
    sh = draw(S.shapes())
    x = draw(S.arrays(sh))
    return [x], (True,), {"key": draw(S.index_keys(sh))}


def _perm(sh, draw):
    p = draw(st.permutations(range(len(sh))))
    return tuple(d - len(sh) if draw(st.booleans()) else d for d in p)


def _expand_target(sh, draw):
    lead = draw(st.lists(st.integers(1, 3), max_size=2))
    target = [draw(st.integers(1, 3)) if s == 1 else s for s in sh]
    target = [t if draw(st.integers(0, 3)) else -1 for t in target]
    return tuple(lead) + tuple(target)


def _same_numel(sh, draw):
    n = int(np.prod(sh, dtype=np.int64))
    out = []
    while n > 1 and len(out) < 3:
        divs = [d for d in range(1, n + 1) if n % d == 0]
        d = draw(st.sampled_from(divs))
        out.append(d)
        n //= d
    if n > 1:
        out.append(n)
    out += [1] * draw(st.integers(0, 1))
    out = draw(st.permutations(out))
    if out and draw(st.booleans()):
        out[draw(st.integers(0, len(out) - 1))] = -1
    return tuple(out)


def _resolved(x, target):
    """``target`` with its -1 worked out for x's number of elements."""
    return np.empty(tuple(x.shape)).reshape(target).shape


def _flatten_range(sh, draw):
    nd = len(sh)
    if nd == 0:
        return (0, -1)
    a = draw(st.integers(0, nd - 2))
    b = draw(st.integers(a + 1, nd - 1))
    return (a - nd if draw(st.booleans()) else a, b - nd if draw(st.booleans()) else b)


def _squeeze_dims(sh, draw):
    nd = len(sh)
    if nd == 0:
        return draw(st.sampled_from([None, 0, -1]))
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none":
        return None
    if kind == "int":
        return draw(S.one_dim(nd))
    return tuple(draw(st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=nd,
                               unique_by=lambda d: d % nd)))


add(
    Case("getitem", K.GATHER, _getitem_inputs(), {
        "index": lambda m, x, key: x[m.index_key(key)],
    }),
    Case("permute", K.GATHER, with_shape(perm=_perm), {
        "tuple": lambda m, x, perm: x.permute(perm),
        "args": lambda m, x, perm: x.permute(*perm) if perm else x.permute(perm),
        "function": lambda m, x, perm: m.permute(x, perm),
    }),
    Case("transpose", K.GATHER, with_shape(
        d0=lambda sh, draw: draw(S.one_dim(len(sh))),
        d1=lambda sh, draw: draw(S.one_dim(len(sh)))), {
        "method": lambda m, x, d0, d1: x.transpose(d0, d1),
        "function": lambda m, x, d0, d1: m.transpose(x, d0, d1),
    }),
    Case("t", K.GATHER, with_shape(max_dims=2), {
        "method": lambda m, x: x.t(),
        "function": lambda m, x: m.t(x),
    }),
    Case("T", K.GATHER, with_shape(min_dims=2, max_dims=2), {"T": lambda m, x: x.T}),
    Case("mT", K.GATHER, with_shape(min_dims=2), {"mT": lambda m, x: x.mT}),
    Case("expand", K.GATHER, with_shape(target=_expand_target), {
        "tuple": lambda m, x, target: x.expand(target),
        "args": lambda m, x, target: x.expand(*target) if target else x.expand(target),
        "broadcast_to": lambda m, x, target: x.broadcast_to(
            tuple(s if t == -1 else t for s, t in zip(
                (1,) * (len(target) - x.ndim) + tuple(x.shape), target))),
        "expand_as": lambda m, x, target: x.expand_as(m.zeros(
            tuple(s if t == -1 else t for s, t in zip(
                (1,) * (len(target) - x.ndim) + tuple(x.shape), target)))),
    }),
    Case("reshape", K.RESHAPE, with_shape(target=_same_numel), {
        "reshape": lambda m, x, target: x.reshape(target),
        "reshape args": lambda m, x, target: x.reshape(*target) if target else x.reshape(target),
        "view": lambda m, x, target: x.view(target),
        "function": lambda m, x, target: m.reshape(x, target),
    }),
    # a 1-D tensor flattens to itself, with no record: 0-d and 2-D and up only
    Case("flatten", K.RESHAPE, with_shape(shape=S.shapes().filter(lambda s: len(s) != 1),
                                          span=_flatten_range), {
        "method": lambda m, x, span: x.flatten(*span),
        "function": lambda m, x, span: m.flatten(x, span[0], span[1]),
        "all": lambda m, x, span: x.flatten(),
    }),
    Case("squeeze", K.RESHAPE, with_shape(dims=_squeeze_dims), {
        "method": lambda m, x, dims: x.squeeze() if dims is None else x.squeeze(dims),
        "function": lambda m, x, dims: m.squeeze(x) if dims is None else m.squeeze(x, dims),
    }),
    Case("unsqueeze", K.RESHAPE, with_shape(
        dim=lambda sh, draw: draw(st.integers(-len(sh) - 1, len(sh)))), {
        "method": lambda m, x, dim: x.unsqueeze(dim),
        "function": lambda m, x, dim: m.unsqueeze(x, dim),
    }),
    Case("clone", K.RESHAPE, one(), {
        "method": lambda m, x: x.clone(),
        "function": lambda m, x: m.clone(x),
    }),
    Case("view_as", K.RESHAPE, with_shape(target=_same_numel), {
        "view_as": lambda m, x, target: x.view_as(m.zeros(_resolved(x, target))),
        "reshape_as": lambda m, x, target: x.reshape_as(m.zeros(_resolved(x, target))),
    }),
)


@st.composite
def _cat_inputs(draw, stack):
    base = draw(S.shapes(min_dims=0 if stack else 1))
    nd = len(base)
    dim = draw(st.integers(-nd - 1, nd)) if stack else draw(S.one_dim(nd))
    k = draw(st.integers(1, 4))
    arrays, rg = [], []
    for _ in range(k):
        sh = list(base)
        if not stack:
            sh[dim % nd] = draw(st.integers(1, 3))
        arrays.append(draw(S.arrays(tuple(sh))))
        rg.append(draw(st.booleans()))
    # the same tensor may appear several times in the list (fan-out)
    order = draw(st.lists(st.integers(0, k - 1), min_size=1, max_size=5)) if \
        all(a.shape == arrays[0].shape for a in arrays) else list(range(k))
    if not any(rg[i] for i in order):
        rg[draw(st.sampled_from(order))] = True
    return arrays, tuple(rg), {"dim": dim, "order": tuple(order)}


def _cat_forms(name):
    return {
        "list": lambda m, *ts, dim, order: getattr(m, name)([ts[i] for i in order], dim),
        "tuple": lambda m, *ts, dim, order: getattr(m, name)(tuple(ts[i] for i in order),
                                                             dim=dim),
    }


add(
    Case("cat", K.CAT, _cat_inputs(False), _cat_forms("cat")),
    Case("stack", K.STACK, _cat_inputs(True), _cat_forms("stack")),
)



def _grad_of_gather(m, x, key):
    """d/dx sum(x[key]**3), kept differentiable: its graph scatters the gathered gradient
    back (finite differences evaluate it with grad mode off, hence enable_grad)."""
    with m.enable_grad():
        z = x if x.requires_grad else x.detach().requires_grad_()
        g, = m.autograd.grad((z[m.index_key(key)] ** 3).sum(), z, create_graph=True)
    return g


add(Case("grad_of_gather", K.SCATTER, _getitem_inputs(), {"create_graph": _grad_of_gather},
         deep=True))


@st.composite
def _write_inputs(draw):
    """A buffer of at least two values, a basic key into it (a row, a run of rows, one
    element) and a source of the written part's shape, or of a shape that broadcasts to it."""
    rows = draw(st.integers(2, 4))
    tail = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    kind = draw(st.sampled_from(["row", "rows", "element"]))
    if kind == "row":
        key, part = draw(st.integers(-rows, rows - 1)), tail
    elif kind == "rows":
        # (less than all rows: PyTorch copies into the whole tensor, CopyBackwards)
        start = draw(st.integers(0, rows - 1))
        stop = draw(st.integers(start, rows - 1 if start == 0 else rows))
        key, part = slice(start, stop), (stop - start,) + tail
    else:
        key, part = (draw(st.integers(0, rows - 1)),) + tuple(
            draw(st.integers(0, d - 1)) for d in tail), ()
    part = part[draw(st.integers(0, len(part))):]     # broadcast over leading dims
    arrays = [draw(S.arrays((rows,) + tail)), draw(S.arrays(part))]
    return arrays, draw(st.sampled_from(((True, True), (True, False)))), {"key": key}


def _written(m, x, v, key):
    """``buf[key] = v`` into a recorded buffer: a write into its memory (CopySlices)."""
    buf = x * 1.5
    buf[key] = v * 2.0
    return buf


add(Case("setitem", K.WRITE, _write_inputs(), {"setitem": _written}))


@st.composite
def _fitting_source(draw, zero_d=False, copied=False):
    """A tensor and a source that broadcasts to its shape: a 0-d one into one of at least a
    dim with ``zero_d``; with ``copied`` none of those (which ``x[...] = v`` fills)."""
    shape = draw(S.shapes(min_dims=1 if zero_d else 0))
    if zero_d:
        part = ()
    else:
        part = shape[draw(st.integers(0, len(shape) - 1 if copied and shape else len(shape))):]
        part = tuple(1 if draw(st.booleans()) else d for d in part)
    arrays = [draw(S.arrays(shape)), draw(S.arrays(part))]
    return arrays, draw(st.sampled_from(((True, True), (True, False), (False, True)))), {}


def _all_set(m, a, b):
    """``buf[:] = v``: a key that picks all of buf writes into buf itself (copy_ / fill_)."""
    buf = a * 1.5
    buf[...] = b * 2.0
    return buf


# Writes of a source's elements into a tensor (REPLACE).  The targets are distinct: of a
# repeated target the last write wins, and PyTorch gives the overwritten sources the gradient
# at their target too, which is no derivative of the values (central differences see none);
# tests/test_repeated_indices.py checks repeated targets against PyTorch.
def _distinct(draw, n, k, negative=False):
    """k distinct positions among n, in a drawn order (with ``negative``, some counted from
    the end)."""
    picked = draw(st.permutations(range(n)))[:k]
    return [p - n if negative and draw(st.booleans()) else p for p in picked]


@st.composite
def _row_write_inputs(draw, negative=True):
    """x of rows, distinct rows of it and values of the written rows' shape or one that
    broadcasts to it."""
    rows = draw(st.integers(1, 4))
    tail = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    idx = _distinct(draw, rows, draw(st.integers(1, rows)), negative)
    part = (len(idx),) + tail
    part = part[draw(st.integers(0, len(part))):]
    arrays = [draw(S.arrays((rows,) + tail)), draw(S.arrays(part))]
    return arrays, draw(st.sampled_from(RG_BOTH)), {"rows": tuple(idx)}


def _index_put_(m, x, v, rows):
    y = x * 1.5
    y.index_put_((m.tensor(rows),), v)
    return y


def _set_rows(m, x, v, rows):
    y = x * 1.5
    y[m.tensor(rows)] = v
    return y


@st.composite
def _scatter_inputs(draw):
    """x, a dim, an index whose entries along dim are distinct in every line (each element's
    target is its position with that coordinate replaced), and a source of the index's
    shape (PyTorch's backward fails for a larger one: its gradient is the index's shape)."""
    shape = draw(S.shapes(min_dims=1))
    nd = len(shape)
    dim = draw(S.one_dim(nd))
    d = dim % nd
    ishape = tuple(draw(st.integers(1, shape[j])) for j in range(nd))
    lines = int(np.prod(ishape)) // ishape[d]
    index = np.moveaxis(np.array([_distinct(draw, shape[d], ishape[d])
                                  for _ in range(lines)]).reshape(
        ishape[:d] + ishape[d + 1:] + (ishape[d],)), -1, d)
    arrays = [draw(S.arrays(shape)), draw(S.arrays(ishape))]
    return arrays, draw(st.sampled_from(RG_BOTH)), {"dim": dim, "index": index.tolist()}


def _scatter_(m, x, src, dim, index):
    y = x * 1.5
    y.scatter_(dim, m.tensor(index), src)
    return y


@st.composite
def _index_copy_inputs(draw):
    """x, a dim, distinct indices along it and a source of x's shape but for that dim."""
    shape = draw(S.shapes(min_dims=1))
    dim = draw(S.one_dim(len(shape)))
    idx = _distinct(draw, shape[dim], draw(st.integers(1, shape[dim])))
    sshape = tuple(len(idx) if j == dim % len(shape) else n for j, n in enumerate(shape))
    arrays = [draw(S.arrays(shape)), draw(S.arrays(sshape))]
    return arrays, draw(st.sampled_from(RG_BOTH)), {"dim": dim, "index": tuple(idx)}


def _index_copy_(m, x, src, dim, index):
    y = x * 1.5
    y.index_copy_(dim, m.tensor(index), src)
    return y


@st.composite
def _put_inputs(draw):
    """x, distinct flat positions of it (negative ones count from the end) and a source of
    as many elements."""
    shape = draw(S.shapes())
    n = int(np.prod(shape, dtype=np.int64))
    idx = _distinct(draw, n, draw(st.integers(1, n)), negative=True)
    arrays = [draw(S.arrays(shape)), draw(S.arrays((len(idx),)))]
    return arrays, draw(st.sampled_from(RG_BOTH)), {"index": tuple(idx)}


def _put_(m, x, src, index):
    y = x * 1.5
    y.put_(m.tensor(index), src)
    return y


@st.composite
def _masked_scatter_inputs(draw):
    """x, a mask of its shape and a source with at least as many elements as the mask
    holds (the rest are not read)."""
    shape = draw(S.shapes())
    mask = draw(hnp.arrays(np.bool_, shape))
    count = int(mask.sum())
    arrays = [draw(S.arrays(shape)), draw(S.arrays((count + draw(st.integers(0, 2)),)))]
    return arrays, draw(st.sampled_from(RG_BOTH)), {"mask": mask.tolist()}


def _masked_scatter_(m, x, src, mask):
    y = x * 1.5
    y.masked_scatter_(m.tensor(mask), src)
    return y


add(
    Case("index_put", K.REPLACE, _row_write_inputs(), {
        "method": lambda m, x, v, rows: x.index_put((m.tensor(rows),), v),
        "index_put_": _index_put_,
        "setitem": _set_rows,
    }),
    Case("scatter", K.REPLACE, _scatter_inputs(), {
        "method": lambda m, x, src, dim, index: x.scatter(dim, m.tensor(index), src),
        "function": lambda m, x, src, dim, index: m.scatter(x, dim, m.tensor(index), src),
        "scatter_": _scatter_,
    }),
    Case("index_copy", K.REPLACE, _index_copy_inputs(), {
        "method": lambda m, x, src, dim, index: x.index_copy(dim, m.tensor(index), src),
        "function": lambda m, x, src, dim, index: m.index_copy(x, dim, m.tensor(index), src),
        "index_copy_": _index_copy_,
    }),
    Case("put", K.REPLACE, _put_inputs(), {
        "method": lambda m, x, src, index: x.put(m.tensor(index), src),
        "put_": _put_,
    }),
    Case("masked_scatter", K.REPLACE, _masked_scatter_inputs(), {
        "method": lambda m, x, src, mask: x.masked_scatter(m.tensor(mask), src),
        "function": lambda m, x, src, mask: m.masked_scatter(x, m.tensor(mask), src),
        "masked_scatter_": _masked_scatter_,
    }),
)


# (logit(x, eps=0.2) clamps x to [0.2, 0.8]: a kink at each end, where central differences
# average the two sides, so the values keep a gap from both)
add(Case("logit", K.LOGIT, one(S.avoiding((0.2, 0.8), 0.05, 0.95)), {
    "function": lambda m, x: m.logit(x),
    "method": lambda m, x: x.logit(),
    "eps": lambda m, x: m.logit(x, eps=0.2),
    "special": lambda m, x: m.special.logit(x),
}))


# zero_/fill_/copy_ on a recorded tensor: the values written, a gradient for the value only
add(
    Case("zero_", K.ZERO, one(), {"zero_": lambda m, x: (x * 1.5).zero_()}),
    Case("fill_", K.FILL, one(c=scalars()), {"fill_": lambda m, x, c: (x * 1.5).fill_(c)}),
    Case("fill_tensor", K.FILL_T, _fitting_source(zero_d=True), {
        "fill_": lambda m, a, b: (a * 1.5).fill_(b * 2.0),
        "setitem": _all_set,
    }),
    Case("copy_", K.COPY, _fitting_source(), {"copy_": lambda m, a, b: (a * 1.5).copy_(b * 2.0)}),
    Case("setitem_all", K.COPY, _fitting_source(copied=True), {"setitem": _all_set}),
)

# ---------------------------------------------------------------------------------------------
# Scans and sorts (#16).  Selections by value (sort, topk, kthvalue, median/mode along a dim,
# cummax/cummin) draw distinct values: at a tie the selection has a kink, where central
# differences see no derivative, and PyTorch's choice among tied entries is its algorithm's.
# ---------------------------------------------------------------------------------------------
def _dim_and_k(lowest):
    """(dim, k) with k in [lowest, size along dim] (a 0-d tensor: size 1)."""
    def draw_it(sh, draw):
        d = draw(S.dims(len(sh), allow_none=False, allow_tuple=False))
        side = sh[d] if sh else 1
        return d, draw(st.integers(lowest, side))
    return draw_it


add(
    Case("cumsum", K.CUMSUM, with_shape(dim=_dim()), {
        "method": lambda m, x, dim: x.cumsum(dim),
        "function": lambda m, x, dim: m.cumsum(x, dim),
        "keyword": lambda m, x, dim: m.cumsum(x, dim=dim),
    }),
    Case("cumprod", K.CUMPROD, with_shape(S.reals(-1.5, 1.5), dim=_dim()), {
        "method": lambda m, x, dim: x.cumprod(dim),
        "function": lambda m, x, dim: m.cumprod(x, dim=dim),
    }),
    Case("logcumsumexp", K.LOGCUMSUMEXP, with_shape(S.reals(-5.0, 5.0), dim=_dim()), {
        "method": lambda m, x, dim: x.logcumsumexp(dim),
        "function": lambda m, x, dim: m.logcumsumexp(x, dim),
    }),
    Case("cummax", K.GATHER, distinct_one(dim=_dim()), {
        "method": lambda m, x, dim: x.cummax(dim).values,
        "function": lambda m, x, dim: m.cummax(x, dim)[0],
    }),
    Case("cummin", K.GATHER, distinct_one(dim=_dim()), {
        "method": lambda m, x, dim: x.cummin(dim).values,
        "function": lambda m, x, dim: m.cummin(x, dim=dim)[0],
    }),
    Case("sort", K.GATHER, distinct_one(dim=_dim(), descending=st.booleans()), {
        "method": lambda m, x, dim, descending: x.sort(dim, descending).values,
        "stable": lambda m, x, dim, descending: m.sort(x, dim=dim, descending=descending,
                                                       stable=True)[0],
        "msort": lambda m, x, dim, descending: m.msort(x) if x.dim() else x.sort()[0],
    }),
    Case("topk", K.GATHER, distinct_one(sel=_dim_and_k(0), largest=st.booleans()), {
        "method": lambda m, x, sel, largest: x.topk(sel[1], sel[0], largest).values,
        "keywords": lambda m, x, sel, largest: m.topk(x, k=sel[1], dim=sel[0],
                                                      largest=largest).values,
    }),
    Case("kthvalue", K.GATHER, distinct_one(sel=_dim_and_k(1), keepdim=st.booleans()), {
        "method": lambda m, x, sel, keepdim: x.kthvalue(sel[1], sel[0], keepdim).values,
        "function": lambda m, x, sel, keepdim: m.kthvalue(x, sel[1], dim=sel[0],
                                                          keepdim=keepdim)[0],
    }),
    Case("median_dim", K.GATHER, distinct_one(dim=_dim(), keepdim=st.booleans()), {
        "method": lambda m, x, dim, keepdim: x.median(dim, keepdim).values,
        "nanmedian": lambda m, x, dim, keepdim: m.nanmedian(x, dim, keepdim=keepdim)[0],
        "mode": lambda m, x, dim, keepdim: m.mode(x, dim, keepdim).values,
    }),
    Case("median_all", K.MEDIAN, distinct_one(), {
        "method": lambda m, x: x.median(),
        "function": lambda m, x: m.median(x),
    }),
    Case("nanmedian_all", K.NANMEDIAN, distinct_one(), {
        "method": lambda m, x: x.nanmedian(),
        "function": lambda m, x: m.nanmedian(x),
    }),
    Case("diff", K.SUB, with_shape(min_dims=1, dim=_dim(), n=lambda sh, draw: draw(
        st.integers(0, 3))), {
        "method": lambda m, x, dim, n: x.diff(n, dim) if n else x.diff(1, dim),
        "function": lambda m, x, dim, n: m.diff(x, n=n or 1, dim=dim),
    }),
)


CASES_BY_ID = {c.id: c for c in CASES}
assert len(CASES_BY_ID) == len(CASES), "case ids must be unique"


# ---------------------------------------------------------------------------------------------
# The two libraries, spelled alike
# ---------------------------------------------------------------------------------------------
class Lib:
    """A library namespace: its top-level functions, ``F`` for the functional extras
    (softplus), and how to turn a drawn indexing key into one for this library."""

    def __init__(self, module, functional):
        self.module, self.F = module, functional

    def __getattr__(self, name):
        return getattr(self.module, name)

    def index_key(self, key):
        return S.key_for(self.module, key)

    def leaf(self, array, requires_grad):
        return self.module.tensor(array, requires_grad=requires_grad)

    def __repr__(self):
        return self.module.__name__
