"""Activation functions as ops of their own: gelu, silu, mish, elu/selu/celu, leaky_relu (and
the in-place forms of these four), hardtanh/relu6, hardsigmoid, hardswish, logsigmoid,
softshrink, hardshrink, and sinc.

Written as composites of where/mul/erf, these recorded three to six nodes named
``WhereBackward0`` or ``MulBackward0`` where PyTorch records one ``GeluBackward0``, and their
gradients at the edges (nan, the kinks, tiny and huge inputs) were the composite's, not
PyTorch's.  Each block below is PyTorch's CPU formula (the scalar path of its kernels), in
PyTorch's order of operations, so that values and gradients are its bits where the C
library's functions are.

The rules follow the elementwise family's signatures (see ``elementwise.py``).  Parameters:
``c`` is the record's scalar, ``p0``/``p1`` its two ``faux`` values.  Eager mode computes
the forward with the same scalar rule (``forward_array``), so eager and replayed values
are the same bits.
"""
import math

import numpy as np

from .._config import inline, kernel
from .table import ELEMENTWISE, LINEAR, READS_OUT, READS_X0, constants, declare

_PI = math.pi
_SQRT1_2 = 0.7071067811865476                  # M_SQRT1_2
_GELU_PDF = 1.1283791670955126 * _SQRT1_2 * 0.5   # M_2_SQRTPI * M_SQRT1_2 / 2
_GELU_BETA = 1.4142135623730951 * 1.1283791670955126 * 0.5   # M_SQRT2 * M_2_SQRTPI / 2
_GELU_KAPPA = 0.044715
# PyTorch's hardsigmoid gradient multiplies by 1.0f / 6.0f, a float32 constant, in double
# precision too: its gradient is 0.1666666716337204, not 1/6, and so is ours
_ONE_SIXTH_F32 = float(np.float32(1.0) / np.float32(6.0))


def _graph_mask(F, compare, x, bound):
    """A recorded comparison (a mask that replays with its input, never a constant)."""
    return F._compare(compare, x, bound)


# --- gelu, exact: x * Phi(x) -----------------------------------------------------------------
@inline
def gelu_fwd(x0, x1, x2, c, p0, p1):
    return x0 * 0.5 * (1.0 + math.erf(x0 * _SQRT1_2))


@inline
def gelu_vjp(g, x0, x1, x2, out, c, p0, p1):
    cdf = 0.5 * (1.0 + math.erf(x0 * _SQRT1_2))
    pdf = _GELU_PDF * np.exp(x0 * x0 * -0.5)
    return g * (cdf + x0 * pdf)


@inline
def gelu_d2(x0, out, c, p0, p1):
    # d/dx (Phi + x phi) = 2 phi - x^2 phi
    return _GELU_PDF * np.exp(x0 * x0 * -0.5) * (2.0 - x0 * x0)


def gelu_graph(F, g, x0, x1, out, c, p0=0.0, p1=0.0):
    cdf = F.mul(F.add(F.erf(F.mul(x0, _SQRT1_2)), 1.0), 0.5)
    pdf = F.mul(F.exp(F.mul(F.mul(x0, x0), -0.5)), _GELU_PDF)
    return F.mul(g, F.add(cdf, F.mul(x0, pdf))), None


GELU = declare(128, "GeluBackward0", family=ELEMENTWISE, reads=READS_X0,
               forward=gelu_fwd, vjp0=gelu_vjp, d2=gelu_d2, graph=gelu_graph)


# --- gelu, approximate="tanh" ------------------------------------------------------------------
@inline
def gelu_tanh_fwd(x0, x1, x2, c, p0, p1):
    inner = _GELU_BETA * (x0 + _GELU_KAPPA * (x0 * x0 * x0))
    return 0.5 * x0 * (1.0 + np.tanh(inner))


@inline
def gelu_tanh_vjp(g, x0, x1, x2, out, c, p0, p1):
    x_sq = x0 * x0
    t = np.tanh(_GELU_BETA * (x0 + _GELU_KAPPA * (x_sq * x0)))
    left_derivative = 0.5 * (1.0 + t)
    inner_derivative = _GELU_BETA * (1.0 + 3.0 * _GELU_KAPPA * x_sq)
    right_derivative = 0.5 * x0 * (1.0 - t * t) * inner_derivative
    return g * (left_derivative + right_derivative)


@inline
def gelu_tanh_d2(x0, out, c, p0, p1):
    x_sq = x0 * x0
    t = np.tanh(_GELU_BETA * (x0 + _GELU_KAPPA * (x_sq * x0)))
    du = _GELU_BETA * (1.0 + 3.0 * _GELU_KAPPA * x_sq)
    d = 1.0 - t * t
    # d/dx [(1 + t)/2 + x (1 - t^2) u' / 2] with t = tanh(u)
    return d * du - x0 * t * d * du * du + 3.0 * _GELU_BETA * _GELU_KAPPA * x_sq * d


def gelu_tanh_graph(F, g, x0, x1, out, c, p0=0.0, p1=0.0):
    x_sq = F.mul(x0, x0)
    t = F.tanh(F.mul(F.add(x0, F.mul(F.mul(x_sq, x0), _GELU_KAPPA)), _GELU_BETA))
    left = F.mul(F.add(t, 1.0), 0.5)
    du = F.mul(F.add(F.mul(x_sq, 3.0 * _GELU_KAPPA), 1.0), _GELU_BETA)
    right = F.mul(F.mul(F.mul(x0, 0.5), F.rsub(F.mul(t, t), 1.0)), du)
    return F.mul(g, F.add(left, right)), None


GELU_TANH = declare(129, "GeluBackward0", family=ELEMENTWISE, reads=READS_X0,
                    forward=gelu_tanh_fwd, vjp0=gelu_tanh_vjp, d2=gelu_tanh_d2,
                    graph=gelu_tanh_graph)


# --- silu: x * sigmoid(x) ----------------------------------------------------------------------
@inline
def silu_fwd(x0, x1, x2, c, p0, p1):
    return x0 / (1.0 + np.exp(-x0))


@inline
def silu_vjp(g, x0, x1, x2, out, c, p0, p1):
    s = 1.0 / (1.0 + np.exp(-x0))
    return g * s * (1.0 + x0 * (1.0 - s))


@inline
def silu_d2(x0, out, c, p0, p1):
    s = 1.0 / (1.0 + np.exp(-x0))
    return s * (1.0 - s) * (2.0 + x0 * (1.0 - 2.0 * s))


def silu_graph(F, g, x0, x1, out, c, p0=0.0, p1=0.0):
    s = F.sigmoid(x0)
    return F.mul(F.mul(g, s), F.add(F.mul(x0, F.rsub(s, 1.0)), 1.0)), None


SILU = declare(130, "SiluBackward0", family=ELEMENTWISE, reads=READS_X0,
               forward=silu_fwd, vjp0=silu_vjp, d2=silu_d2, graph=silu_graph)


# --- mish: x * tanh(softplus(x)) ---------------------------------------------------------------
@inline
def mish_fwd(x0, x1, x2, c, p0, p1):
    return x0 * np.tanh(np.log1p(np.exp(x0)))


@inline
def mish_vjp(g, x0, x1, x2, out, c, p0, p1):
    s = 1.0 / (1.0 + np.exp(-x0))
    t = np.tanh(np.log1p(np.exp(x0)))
    return g * (t + x0 * s * (1.0 - t * t))


@inline
def mish_d2(x0, out, c, p0, p1):
    s = 1.0 / (1.0 + np.exp(-x0))
    t = np.tanh(np.log1p(np.exp(x0)))
    d = 1.0 - t * t
    # t' = d s, s' = s (1 - s): d/dx [t + x s d] = d s (2 + x (1 - s) - 2 x s t)
    return d * s * (2.0 + x0 * (1.0 - s) - 2.0 * x0 * s * t)


def mish_graph(F, g, x0, x1, out, c, p0=0.0, p1=0.0):
    s = F.sigmoid(x0)
    t = F.tanh(F.log1p(F.exp(x0)))
    return F.mul(g, F.add(t, F.mul(F.mul(x0, s), F.rsub(F.mul(t, t), 1.0)))), None


MISH = declare(131, "MishBackward0", family=ELEMENTWISE, reads=READS_X0,
               forward=mish_fwd, vjp0=mish_vjp, d2=mish_d2, graph=mish_graph)


# --- elu, selu, celu: c = scale (poscoef), p0 = alpha * scale (negcoef), p1 = input_scale ----
@inline
def elu_fwd(x0, x1, x2, c, p0, p1):
    return np.expm1(x0 * p1) * p0 if x0 <= 0.0 else x0 * c


@inline
def elu_vjp(g, x0, x1, x2, out, c, p0, p1):
    # (nan is not <= 0: it takes the linear piece, as PyTorch's scalar kernel)
    return g * p1 * p0 * np.exp(x0 * p1) if x0 <= 0.0 else g * c


@inline
def elu_d2(x0, out, c, p0, p1):
    return p1 * p1 * p0 * np.exp(x0 * p1) if x0 <= 0.0 else 0.0


def elu_graph(F, g, x0, x1, out, c, p0=0.0, p1=0.0):
    negative = F.mul(F.mul(F.mul(g, p1), p0), F.exp(F.mul(x0, p1)))
    return F.where(_graph_mask(F, np.less_equal, x0, 0.0), negative, F.mul(g, c)), None


ELU = declare(132, "EluBackward0", family=ELEMENTWISE, reads=READS_X0, params=2,
              forward=elu_fwd, vjp0=elu_vjp, d2=elu_d2, graph=elu_graph)


# celu: p0 = alpha, p1 = 1 / alpha (the forward's input scale), c = 1 / float32(alpha): PyTorch's
# backward takes its input scale as 1.0 / alpha.toFloat(), which differs from 1 / alpha from
# the eighth digit on, and so do its gradients -- ours follow
@inline
def celu_fwd(x0, x1, x2, c, p0, p1):
    return np.expm1(x0 * p1) * p0 if x0 <= 0.0 else x0


@inline
def celu_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * c * p0 * np.exp(x0 * c) if x0 <= 0.0 else g


@inline
def celu_d2(x0, out, c, p0, p1):
    return c * c * p0 * np.exp(x0 * c) if x0 <= 0.0 else 0.0


def celu_graph(F, g, x0, x1, out, c, p0=0.0, p1=0.0):
    negative = F.mul(F.mul(F.mul(g, c), p0), F.exp(F.mul(x0, c)))
    return F.where(_graph_mask(F, np.less_equal, x0, 0.0), negative, g), None


CELU = declare(133, "CeluBackward0", family=ELEMENTWISE, reads=READS_X0, params=2,
               forward=celu_fwd, vjp0=celu_vjp, d2=celu_d2, graph=celu_graph)


# --- leaky_relu: c = negative slope --------------------------------------------------------------
@inline
def leaky_relu_fwd(x0, x1, x2, c, p0, p1):
    return x0 if x0 > 0.0 else x0 * c


@inline
def leaky_relu_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g if x0 > 0.0 else g * c


def leaky_relu_graph(F, g, x0, x1, out, c, p0=0.0, p1=0.0):
    return F.where(_graph_mask(F, np.greater, x0, 0.0), g, F.mul(g, c)), None


LEAKY_RELU = declare(134, "LeakyReluBackward0", family=ELEMENTWISE, reads=READS_X0,
                     forward=leaky_relu_fwd, vjp0=leaky_relu_vjp, curvature=LINEAR,
                     graph=leaky_relu_graph)


# --- hardtanh (and relu6): p0 = min_val, p1 = max_val ------------------------------------------
@inline
def hardtanh_fwd(x0, x1, x2, c, p0, p1):
    # PyTorch's clamp: nan stays nan; max(-0.0, 0.0) keeps -0.0 (std::max's first argument)
    if x0 != x0:
        return x0
    v = p0 if x0 < p0 else x0
    return p1 if p1 < v else v


@inline
def hardtanh_vjp(g, x0, x1, x2, out, c, p0, p1):
    # zero at and beyond the bounds; nan compares false and passes the gradient
    return 0.0 if (x0 <= p0 or x0 >= p1) else g


def hardtanh_graph(F, g, x0, x1, out, c, p0=0.0, p1=0.0):
    inside = F.where(_graph_mask(F, np.greater_equal, x0, p1), 0.0, g)
    return F.where(_graph_mask(F, np.less_equal, x0, p0), 0.0, inside), None


HARDTANH = declare(135, "HardtanhBackward0", family=ELEMENTWISE, reads=READS_X0, params=2,
                   forward=hardtanh_fwd, vjp0=hardtanh_vjp, curvature=LINEAR,
                   graph=hardtanh_graph)


# --- hardsigmoid: relu6(x + 3) / 6 ------------------------------------------------------------
@inline
def _relu6_of_x_plus_3(x0):
    # std::min(std::max(x + 3, 0), 6): nan stays nan
    v = x0 + 3.0
    v = 0.0 if v < 0.0 else v
    return 6.0 if 6.0 < v else v


@inline
def hardsigmoid_fwd(x0, x1, x2, c, p0, p1):
    return _relu6_of_x_plus_3(x0) / 6.0


@inline
def hardsigmoid_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * _ONE_SIXTH_F32 if (x0 > -3.0 and x0 < 3.0) else 0.0


def hardsigmoid_graph(F, g, x0, x1, out, c, p0=0.0, p1=0.0):
    below_3 = F.where(_graph_mask(F, np.less, x0, 3.0), F.mul(g, _ONE_SIXTH_F32), 0.0)
    return F.where(_graph_mask(F, np.greater, x0, -3.0), below_3, 0.0), None


HARDSIGMOID = declare(136, "HardsigmoidBackward0", family=ELEMENTWISE, reads=READS_X0,
                      forward=hardsigmoid_fwd, vjp0=hardsigmoid_vjp, curvature=LINEAR,
                      graph=hardsigmoid_graph)


# --- hardswish: x * relu6(x + 3) / 6 ----------------------------------------------------------
@inline
def hardswish_fwd(x0, x1, x2, c, p0, p1):
    return x0 * _relu6_of_x_plus_3(x0) / 6.0


@inline
def hardswish_vjp(g, x0, x1, x2, out, c, p0, p1):
    # 0 up to -3 (included), x / 3 + 1/2 inside, 1 from 3 on (and at nan)
    if x0 <= -3.0:
        return 0.0
    if x0 < 3.0:
        return g * (x0 / 3.0 + 0.5)
    return g


@inline
def hardswish_d2(x0, out, c, p0, p1):
    return 1.0 / 3.0 if (x0 > -3.0 and x0 < 3.0) else 0.0


def hardswish_graph(F, g, x0, x1, out, c, p0=0.0, p1=0.0):
    middle = F.mul(g, F.add(F.div(x0, 3.0), 0.5))
    upper = F.where(_graph_mask(F, np.less, x0, 3.0), middle, g)
    return F.where(_graph_mask(F, np.less_equal, x0, -3.0), 0.0, upper), None


HARDSWISH = declare(137, "HardswishBackward0", family=ELEMENTWISE, reads=READS_X0,
                    forward=hardswish_fwd, vjp0=hardswish_vjp, d2=hardswish_d2,
                    graph=hardswish_graph)


# --- logsigmoid: min(x, 0) - log1p(exp(-|x|)) ---------------------------------------------------
@inline
def log_sigmoid_fwd(x0, x1, x2, c, p0, p1):
    low = 0.0 if 0.0 < x0 else x0
    return low - np.log1p(np.exp(-abs(x0)))


@inline
def log_sigmoid_vjp(g, x0, x1, x2, out, c, p0, p1):
    z = np.exp(-abs(x0))
    if x0 < 0.0:
        return g * (1.0 - z / (1.0 + z))
    return g * (0.0 + z / (1.0 + z))


@inline
def log_sigmoid_d2(x0, out, c, p0, p1):
    s = 1.0 / (1.0 + np.exp(-x0))
    return -s * (1.0 - s)


def log_sigmoid_graph(F, g, x0, x1, out, c, p0=0.0, p1=0.0):
    # d/dx log(sigmoid(x)) = sigmoid(-x)
    return F.mul(g, F.sigmoid(F.neg(x0))), None


LOG_SIGMOID = declare(138, "LogSigmoidBackward0", family=ELEMENTWISE, reads=READS_X0,
                      forward=log_sigmoid_fwd, vjp0=log_sigmoid_vjp, d2=log_sigmoid_d2,
                      graph=log_sigmoid_graph)


# --- softshrink, hardshrink: c = lambd --------------------------------------------------------
@inline
def softshrink_fwd(x0, x1, x2, c, p0, p1):
    if x0 > c:
        return x0 - c
    if x0 < -c:
        return x0 + c
    return x0 * 0.0


@inline
def shrink_vjp(g, x0, x1, x2, out, c, p0, p1):
    return 0.0 if (x0 >= -c and x0 <= c) else g


def shrink_graph(F, g, x0, x1, out, c, p0=0.0, p1=0.0):
    # (nan is outside: it passes the gradient)
    below = F.where(_graph_mask(F, np.less_equal, x0, c), 0.0, g)
    return F.where(_graph_mask(F, np.greater_equal, x0, -c), below, g), None


SOFTSHRINK = declare(139, "SoftshrinkBackward0", family=ELEMENTWISE, reads=READS_X0,
                     forward=softshrink_fwd, vjp0=shrink_vjp, curvature=LINEAR,
                     graph=shrink_graph)


@inline
def hardshrink_fwd(x0, x1, x2, c, p0, p1):
    return 0.0 if (x0 >= -c and x0 <= c) else x0


HARDSHRINK = declare(140, "HardshrinkBackward0", family=ELEMENTWISE, reads=READS_X0,
                     forward=hardshrink_fwd, vjp0=shrink_vjp, curvature=LINEAR,
                     graph=shrink_graph)


# --- the in-place forms of elu, selu, celu and leaky_relu --------------------------------------
# PyTorch's elu_, selu_, celu_ and leaky_relu_ are other nodes (EluBackward1, CeluBackward1,
# LeakyReluBackward1) whose gradient is computed from the result: g * s * (out + alpha) for
# out <= 0 (the result is alpha * (exp(x s) - 1)).  Same parameters as the blocks above.
@inline
def elu_result_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * p1 * (out + p0) if out <= 0.0 else g * c


@inline
def elu_result_d2(x0, out, c, p0, p1):
    return p1 * p1 * (out + p0) if out <= 0.0 else 0.0


def elu_result_graph(F, g, x0, x1, out, c, p0=0.0, p1=0.0):
    negative = F.mul(F.mul(g, p1), F.add(out, p0))
    return F.where(_graph_mask(F, np.less_equal, out, 0.0), negative, F.mul(g, c)), None


ELU_RESULT = declare(142, "EluBackward1", family=ELEMENTWISE, reads=READS_OUT, params=2,
                     forward=elu_fwd, vjp0=elu_result_vjp, d2=elu_result_d2,
                     graph=elu_result_graph)


@inline
def celu_result_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * c * (out + p0) if out <= 0.0 else g


@inline
def celu_result_d2(x0, out, c, p0, p1):
    return c * c * (out + p0) if out <= 0.0 else 0.0


def celu_result_graph(F, g, x0, x1, out, c, p0=0.0, p1=0.0):
    negative = F.mul(F.mul(g, c), F.add(out, p0))
    return F.where(_graph_mask(F, np.less_equal, out, 0.0), negative, g), None


CELU_RESULT = declare(143, "CeluBackward1", family=ELEMENTWISE, reads=READS_OUT, params=2,
                      forward=celu_fwd, vjp0=celu_result_vjp, d2=celu_result_d2,
                      graph=celu_result_graph)


# (the result is positive where the input is, for the slopes >= 0 an in-place leaky_relu
# takes: the input's rules give the result's bits)
LEAKY_RELU_RESULT = declare(144, "LeakyReluBackward1", family=ELEMENTWISE, reads=READS_X0,
                            forward=leaky_relu_fwd, vjp0=leaky_relu_vjp, curvature=LINEAR,
                            graph=leaky_relu_graph)


# --- sinc: sin(pi x) / (pi x), 1 at 0 ---------------------------------------------------------
@inline
def sinc_fwd(x0, x1, x2, c, p0, p1):
    if x0 == 0.0:
        return 1.0
    u = _PI * x0
    return np.sin(u) / u


@inline
def sinc_vjp(g, x0, x1, x2, out, c, p0, p1):
    # 0 where pi x^2 is 0 -- at 0, and where it underflows (a subnormal x), as PyTorch's;
    # where it overflows the quotient is 0 too
    d = x0 * x0 * _PI
    if d == 0.0:
        return 0.0
    u = x0 * _PI
    return g * (u * np.cos(u) - np.sin(u)) / d


@inline
def sinc_d2(x0, out, c, p0, p1):
    u = x0 * _PI
    if abs(u) < 0.05:
        # the series of sinc'' about 0 (the closed form cancels there): -1/3 + u^2/10 - ...
        # (its next term, u^8 / 443520, is below 1e-16 here)
        w = u * u
        return _PI * _PI * (-1.0 / 3.0 + w * (0.1 + w * (-1.0 / 168.0 + w / 6480.0)))
    s, co = np.sin(u), np.cos(u)
    return _PI * _PI * ((2.0 - u * u) * s - 2.0 * u * co) / (u * u * u)


def sinc_graph(F, g, x0, x1, out, c, p0=0.0, p1=0.0):
    d = F.mul(F.mul(x0, x0), _PI)
    zero = _graph_mask(F, np.equal, d, 0.0)
    safe = F.where(zero, 1.0, x0)
    u = F.mul(safe, _PI)
    quotient = F.div(F.sub(F.mul(u, F.cos(u)), F.sin(u)), F.mul(F.mul(safe, safe), _PI))
    return F.where(zero, 0.0, F.mul(g, quotient)), None


SINC = declare(141, "SincBackward0", family=ELEMENTWISE, reads=READS_X0,
               forward=sinc_fwd, vjp0=sinc_vjp, d2=sinc_d2, graph=sinc_graph)


# ---------------------------------------------------------------------------------------------
# Eager mode: the forward rule over an array (the bits a replay computes)
# ---------------------------------------------------------------------------------------------
@kernel
def _forward_loop(x, out, which, c, p0, p1):
    for i in range(x.size):
        v = x[i]
        if which == GELU:
            out[i] = gelu_fwd(v, v, v, c, p0, p1)
        elif which == GELU_TANH:
            out[i] = gelu_tanh_fwd(v, v, v, c, p0, p1)
        elif which == SILU:
            out[i] = silu_fwd(v, v, v, c, p0, p1)
        elif which == MISH:
            out[i] = mish_fwd(v, v, v, c, p0, p1)
        elif which == ELU or which == ELU_RESULT:
            out[i] = elu_fwd(v, v, v, c, p0, p1)
        elif which == CELU or which == CELU_RESULT:
            out[i] = celu_fwd(v, v, v, c, p0, p1)
        elif which == LEAKY_RELU or which == LEAKY_RELU_RESULT:
            out[i] = leaky_relu_fwd(v, v, v, c, p0, p1)
        elif which == HARDTANH:
            out[i] = hardtanh_fwd(v, v, v, c, p0, p1)
        elif which == HARDSIGMOID:
            out[i] = hardsigmoid_fwd(v, v, v, c, p0, p1)
        elif which == HARDSWISH:
            out[i] = hardswish_fwd(v, v, v, c, p0, p1)
        elif which == LOG_SIGMOID:
            out[i] = log_sigmoid_fwd(v, v, v, c, p0, p1)
        elif which == SOFTSHRINK:
            out[i] = softshrink_fwd(v, v, v, c, p0, p1)
        elif which == HARDSHRINK:
            out[i] = hardshrink_fwd(v, v, v, c, p0, p1)
        else:
            out[i] = sinc_fwd(v, v, v, c, p0, p1)


def forward_array(code, x, out=None, c=0.0, p0=0.0, p1=0.0):
    """Op ``code``'s forward of every element of array ``x`` (into ``out`` when given)."""
    x = np.require(x, np.float64, "C")
    result = np.empty(x.shape) if out is None else out
    _forward_loop(x.reshape(-1), result.reshape(-1), code, float(c), float(p0), float(p1))
    return result


constants(globals())
