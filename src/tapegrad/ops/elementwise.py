"""Elementwise ops: arithmetic and functions of one or two tensors of one shape.

Broadcasting never reaches these rules: the recorder expands operands to the output shape
first with a hidden expansion, whose backward is the reducing sum.

Each op is one block of scalar rules, all with fixed signatures:

* ``forward(x0, x1, x2, c, p0, p1) -> out``
* ``vjp0(g, x0, x1, x2, out, c, p0, p1)`` / ``vjp1(...)``: the contribution of incoming
  gradient ``g`` to input 0 / input 1.  Linear in ``g``, so the tangent (forward mode) rule
  is the same function applied to a tangent.
* ``d2(x0, out, c, p0, p1)``: the second derivative of a one-input op (forward over
  reverse adds ``g * d2 * t``); two-input ops give an array ``curvature`` rule instead, and
  ops whose derivative is constant where it exists give ``LINEAR``.

``x2`` is ``where``'s condition, ``c`` the record's scalar (``fp``), ``p0``/``p1`` its two
``faux`` parameters (clamp's bounds, softplus's beta and threshold).  The family's loops
below are written once and call these rules; the sweep's one-element path and generated code
(``codegen.py``) call the same rules, so all of them compute the same bits.

A rule that masks a contribution returns 0.0 (never ``g * 0.0``: an infinite ``g`` must not
turn into nan where the mask is closed).
"""
import math
import operator

import numpy as np

from .._config import inline, kernel, rule
from .memory import view_f64
from .table import (ELEMENTWISE, LINEAR, READS_OUT, READS_X0, READS_X1, constants, declare)


@inline
def _seg(arr, off, n):
    return arr[off:off + n]


@inline
def no_vjp(g, x0, x1, x2, out, c, p0, p1):
    """The second input's rule of a one-input op (never called)."""
    return 0.0


# ---------------------------------------------------------------------------------------------
# The family's loops
# ---------------------------------------------------------------------------------------------
@inline
def _params(r, ip, faux, params):
    if params:
        return faux[ip[r]], faux[ip[r] + 1]
    return 0.0, 0.0


@inline
def _operands(r, a0, a1, voff, size, ip, vals, binary, cond):
    """out, x0, x1, x2 of record r (x1/x2 stand in as x0 where the op has none)."""
    n = size[r]
    out = _seg(vals, voff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    x1 = _seg(vals, voff[a1[r]], n) if binary else x0
    x2 = _seg(vals, voff[ip[r]], n) if cond else x0
    return out, x0, x1, x2


@inline
def _accumulate(gx, keep, g, x0, x1, x2, out, c, p0, p1, vjp):
    """gx += vjp(g, ...) elementwise; without ``keep`` the contributions are written (an
    input's first gradient: no clearing pass before).  -0.0, not 0.0, is what a written
    contribution is added to: -0.0 + v is v for every v, -0.0 included, as PyTorch's first
    gradient is the contribution itself (one loop: two cost the first compile of every
    entry a tenth of a second)."""
    for i in range(gx.size):
        gx[i] = (gx[i] if keep else -0.0) + vjp(g[i], x0[i], x1[i], x2[i], out[i], c, p0, p1)


@inline
def _operand(vals, voff, ext, s, n):
    """Record s's n values: in the arena, or, where ``ext[s]`` holds an address, where they
    are -- a large eager constant an op reads in place (``functional._binary``; only such an
    op's record reads it, and every reader of the arena as it is fills it first)."""
    if s < ext.size and ext[s] != 0:
        return view_f64(ext[s], n)
    return _seg(vals, voff[s], n)


@rule
def backward1(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
              beta1, vjp0, params):
    """A one-input op's backward: gx0 += vjp0(...) (written where beta0 is 0)."""
    n = size[r]
    p0, p1 = _params(r, ip, faux, params)
    x0 = _seg(vals, voff[a0[r]], n)
    _accumulate(_seg(grads, goff[a0[r]], n), beta0 != 0.0, _seg(grads, goff[r], n), x0, x0, x0,
                _seg(vals, voff[r], n), fp[r], p0, p1, vjp0)


@rule
def backward2(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
              beta1, vjp0, vjp1, cond):
    """A two-input op's backward, for each input that needs a gradient."""
    n = size[r]
    out = _seg(vals, voff[r], n)
    x0 = _operand(vals, voff, ext, a0[r], n)
    x1 = _operand(vals, voff, ext, a1[r], n)
    x2 = _seg(vals, voff[ip[r]], n) if cond else x0
    g = _seg(grads, goff[r], n)
    c = fp[r]
    s0, s1 = a0[r], a1[r]
    if s0 >= 0 and need[s0]:
        _accumulate(_seg(grads, goff[s0], n), beta0 != 0.0, g, x0, x1, x2, out, c, 0.0, 0.0,
                    vjp0)
    if s1 >= 0 and need[s1]:
        _accumulate(_seg(grads, goff[s1], n), beta1 != 0.0, g, x0, x1, x2, out, c, 0.0, 0.0,
                    vjp1)


@rule
def forward(r, a0, a1, voff, size, ip, fp, faux, vals, fwd, binary, params, cond):
    n = size[r]
    c = fp[r]
    p0, p1 = _params(r, ip, faux, params)
    out, x0, x1, x2 = _operands(r, a0, a1, voff, size, ip, vals, binary, cond)
    for i in range(n):
        out[i] = fwd(x0[i], x1[i], x2[i], c, p0, p1)


@rule
def tangent(r, a0, a1, voff, size, ip, fp, faux, vals, tans, b, d0, d1, vjp0, vjp1, binary,
            params, cond):
    """The tangent of record r for the seed whose tangent arena starts at ``b``.  A term of an
    input that depends on no seed is left out, as the backward leaves out an input that needs
    no gradient (so that inf * 0 does not turn into nan)."""
    n = size[r]
    c = fp[r]
    p0, p1 = _params(r, ip, faux, params)
    out, x0, x1, x2 = _operands(r, a0, a1, voff, size, ip, vals, binary, cond)
    # views, not offsets into ``tans``: indexed from 0 by the loop counter, LLVM vectorises
    # these loops (about 4x faster on long records); the input-dependence branches stay
    # outside the loops for the same reason
    tout = _seg(tans, b + voff[r], n)
    t0 = _seg(tans, b + voff[a0[r]], n)
    if binary:
        t1 = _seg(tans, b + voff[a1[r]], n)
        if d0 and d1:
            for i in range(n):
                tout[i] = (0.0 + vjp0(t0[i], x0[i], x1[i], x2[i], out[i], c, p0, p1)
                           + vjp1(t1[i], x0[i], x1[i], x2[i], out[i], c, p0, p1))
        elif d0:
            for i in range(n):
                tout[i] = 0.0 + vjp0(t0[i], x0[i], x1[i], x2[i], out[i], c, p0, p1)
        elif d1:
            for i in range(n):
                tout[i] = 0.0 + vjp1(t1[i], x0[i], x1[i], x2[i], out[i], c, p0, p1)
        else:
            tout[:] = 0.0
    else:
        for i in range(n):
            tout[i] = vjp0(t0[i], x0[i], x1[i], x2[i], out[i], c, p0, p1)


@rule
def curvature(r, a0, voff, goff, size, ip, fp, faux, vals, grads, tans, b, dg, d2, params):
    """Forward over reverse for a one-input op: dgx += g * f''(x) * t."""
    n = size[r]
    c = fp[r]
    p0, p1 = _params(r, ip, faux, params)
    g = _seg(grads, goff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    out = _seg(vals, voff[r], n)
    t0 = _seg(tans, b + voff[a0[r]], n)   # a view: see tangent
    gx0 = _seg(dg, goff[a0[r]], n)
    for i in range(n):
        gx0[i] += g[i] * d2(x0[i], out[i], c, p0, p1) * t0[i]


# ---------------------------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------------------------
# --- add, sub (a tensor or a number on the right) ------------------------------------------
@inline
def add_fwd(x0, x1, x2, c, p0, p1):
    return x0 + x1


@inline
def add_s_fwd(x0, x1, x2, c, p0, p1):
    return x0 + c


@inline
def sub_fwd(x0, x1, x2, c, p0, p1):
    return x0 - x1


@inline
def sub_s_fwd(x0, x1, x2, c, p0, p1):
    return x0 - c


@inline
def pass_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g


@inline
def negate_vjp(g, x0, x1, x2, out, c, p0, p1):
    return -g


ADD = declare(10, "AddBackward0", family=ELEMENTWISE, arity=2, first_write=True,
              python=operator.add, forward=add_fwd, vjp0=pass_vjp, vjp1=pass_vjp,
              curvature=LINEAR, hot=True)
ADD_S = declare(11, "AddBackward0", family=ELEMENTWISE, first_write=True, python=operator.add,
                forward=add_s_fwd, vjp0=pass_vjp, curvature=LINEAR, hot=True)
SUB = declare(12, "SubBackward0", family=ELEMENTWISE, arity=2, first_write=True,
              python=operator.sub, forward=sub_fwd, vjp0=pass_vjp, vjp1=negate_vjp,
              curvature=LINEAR, hot=True)
SUB_S = declare(13, "SubBackward0", family=ELEMENTWISE, first_write=True, python=operator.sub,
                forward=sub_s_fwd, vjp0=pass_vjp, curvature=LINEAR, hot=True)


# --- rsub (number - tensor), neg ---------------------------------------------------------------
@inline
def rsub_s_fwd(x0, x1, x2, c, p0, p1):
    return c - x0


@inline
def neg_fwd(x0, x1, x2, c, p0, p1):
    return -x0


RSUB_S = declare(14, "RsubBackward1", family=ELEMENTWISE, python=lambda x, c: c - x,
                 forward=rsub_s_fwd, vjp0=negate_vjp, curvature=LINEAR, hot=True)
NEG = declare(19, "NegBackward0", family=ELEMENTWISE, python=operator.neg, forward=neg_fwd,
              vjp0=negate_vjp, curvature=LINEAR, hot=True)


# --- zero_, fill_, copy_ when recorded: the values written, nothing for the values replaced --
# (recorded as x * 0 + value they gave nan where x held inf or nan; PyTorch's give the value)
@inline
def zero_fwd(x0, x1, x2, c, p0, p1):
    return 0.0


@inline
def fill_fwd(x0, x1, x2, c, p0, p1):
    return c


@inline
def copy_fwd(x0, x1, x2, c, p0, p1):
    return x1


def replaced_graph(F, g, x0, x1, out, c):
    return None, None


def copied_graph(F, g, x0, x1, out, c):
    return None, g


ZERO = declare(123, "ZeroBackward0", family=ELEMENTWISE, forward=zero_fwd, vjp0=no_vjp,
               curvature=LINEAR, graph=replaced_graph)
# fill_ with a number (kept in the record's fp) and with a 0-d tensor, and copy_ of a source
# that broadcasts to the written tensor: the gradient goes to the value written
FILL = declare(124, "FillBackward2", family=ELEMENTWISE, forward=fill_fwd, vjp0=no_vjp,
               curvature=LINEAR, graph=replaced_graph)
FILL_T = declare(125, "FillBackward3", family=ELEMENTWISE, arity=2, forward=copy_fwd,
                 vjp0=no_vjp, vjp1=pass_vjp, curvature=LINEAR, graph=copied_graph)
COPY = declare(126, "CopyBackwards", family=ELEMENTWISE, arity=2, forward=copy_fwd,
               vjp0=no_vjp, vjp1=pass_vjp, curvature=LINEAR, graph=copied_graph)


# --- mul ---------------------------------------------------------------------------------------
@inline
def mul_fwd(x0, x1, x2, c, p0, p1):
    return x0 * x1


@inline
def mul_vjp0(g, x0, x1, x2, out, c, p0, p1):
    return g * x1


@inline
def mul_vjp1(g, x0, x1, x2, out, c, p0, p1):
    return g * x0


@rule
def mul_curvature(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, tans, b, dg,
                  need):
    # d(g * x1)/dx1 = g: each input's gradient moves with the other's tangent
    n = size[r]
    g = _seg(grads, goff[r], n)
    if need[a0[r]]:
        t1 = b + voff[a1[r]]
        gx0 = _seg(dg, goff[a0[r]], n)
        for i in range(n):
            gx0[i] += g[i] * tans[t1 + i]
    if need[a1[r]]:
        t0 = b + voff[a0[r]]
        gx1 = _seg(dg, goff[a1[r]], n)
        for i in range(n):
            gx1[i] += g[i] * tans[t0 + i]


MUL = declare(15, "MulBackward0", family=ELEMENTWISE, arity=2, reads=READS_X0 | READS_X1,
              reads_for=(READS_X1, READS_X0), python=operator.mul, forward=mul_fwd,
              vjp0=mul_vjp0, vjp1=mul_vjp1, curvature=mul_curvature, hot=True)


# --- mul by a number ---------------------------------------------------------------------------
@inline
def mul_s_fwd(x0, x1, x2, c, p0, p1):
    return x0 * c


@inline
def mul_s_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * c


MUL_S = declare(16, "MulBackward0", family=ELEMENTWISE, frees=True, python=operator.mul,
                forward=mul_s_fwd, vjp0=mul_s_vjp, curvature=LINEAR, hot=True)


# --- div ---------------------------------------------------------------------------------------
@inline
def div_fwd(x0, x1, x2, c, p0, p1):
    return x0 / x1


@inline
def div_vjp0(g, x0, x1, x2, out, c, p0, p1):
    return g / x1


@inline
def div_vjp1(g, x0, x1, x2, out, c, p0, p1):
    # d(x0/x1)/dx1 = -x0/x1**2, written so that it matches PyTorch's rounding
    return -g * ((x0 / x1) / x1)


@rule
def div_curvature(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, tans, b, dg,
                  need):
    n = size[r]
    g = _seg(grads, goff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    x1 = _seg(vals, voff[a1[r]], n)
    t0 = b + voff[a0[r]]
    t1 = b + voff[a1[r]]
    if need[a0[r]]:
        gx0 = _seg(dg, goff[a0[r]], n)
        for i in range(n):
            gx0[i] -= g[i] * tans[t1 + i] / (x1[i] * x1[i])
    if need[a1[r]]:
        gx1 = _seg(dg, goff[a1[r]], n)
        for i in range(n):
            q = x1[i] * x1[i]
            gx1[i] += g[i] * (2.0 * x0[i] * tans[t1 + i] / (q * x1[i]) - tans[t0 + i] / q)


DIV = declare(17, "DivBackward0", family=ELEMENTWISE, arity=2, reads=READS_X0 | READS_X1,
              reads_for=(READS_X1, READS_X0 | READS_X1), python=operator.truediv,
              forward=div_fwd, vjp0=div_vjp0, vjp1=div_vjp1, curvature=div_curvature,
              hot=True)


# --- div by a number ---------------------------------------------------------------------------
@inline
def div_s_fwd(x0, x1, x2, c, p0, p1):
    return x0 / c


@inline
def div_s_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g / c


DIV_S = declare(18, "DivBackward0", family=ELEMENTWISE, frees=True, python=operator.truediv,
                forward=div_s_fwd, vjp0=div_s_vjp, curvature=LINEAR, hot=True)


# --- pow: tensor ** tensor -----------------------------------------------------------------
@inline
def pow_fwd(x0, x1, x2, c, p0, p1):
    return x0 ** x1


@inline
def pow_vjp0(g, x0, x1, x2, out, c, p0, p1):
    # PyTorch masks the exponent-0 case so that 0**0 has gradient 0, not nan
    return g * x1 * x0 ** (x1 - 1.0) if x1 != 0.0 else 0.0


@inline
def pow_vjp1(g, x0, x1, x2, out, c, p0, p1):
    # base 0 with exponent >= 0: the limit of out*log(base) is 0
    return 0.0 if (x0 == 0.0 and x1 >= 0.0) else g * out * np.log(x0)


# no curvature rule: hessians through it take the create_graph route
POW = declare(20, "PowBackward1", family=ELEMENTWISE, arity=2,
              reads=READS_X0 | READS_X1 | READS_OUT,
              reads_for=(READS_X0 | READS_X1, READS_X0 | READS_X1 | READS_OUT), masks=True,
              forward=pow_fwd, vjp0=pow_vjp0, vjp1=pow_vjp1, curvature=None, hot=True)


# --- pow: tensor ** number -----------------------------------------------------------------
@inline
def power(x, c):
    """x ** c as eager mode computes it (functional._float_pow): NumPy squares, takes the
    square root and the reciprocal for 2, 0.5 and -1, and PyTorch multiplies for 3 and -2;
    the C library's pow, which the other exponents use, is off by an ulp for those in
    places.  x ** 0 is 1 for every x, nan included, as pow gives it, without the call (the
    second derivative of a square reads it for every element).  The exponents a square's
    derivatives use, 0 and 1, are tested first: in the sweeps' loops each test runs per
    element."""
    if c == 0.0:
        return 1.0
    if c == 1.0:
        return x
    if c == 2.0:
        return x * x
    if c == 3.0:
        return x * x * x
    if c == -2.0:
        return 1.0 / (x * x)
    if c == 0.5:
        return np.sqrt(x)
    if c == -1.0:
        return 1.0 / x
    return x ** c


# Eager mode's powers, computed by the rules' own expressions: NumPy's power is its own SIMD
# code where the CPU has AVX-512, which differs from the C library's pow (the compiled rules')
# in the last bit for about one input in twenty, so a compiled call gave other bits than eager.
@kernel
def _power_loop(x, c, out):
    for i in range(x.size):
        out[i] = power(x[i], c)


@kernel
def _pow_loop(x, y, out):
    for i in range(x.size):
        out[i] = x[i] ** y[i]


@kernel
def _rpow_loop(c, x, out):
    for i in range(x.size):
        out[i] = c ** x[i]


def _flat_result(shape, out):
    """A new array of ``shape``, or ``out`` (contiguous), and its flat view."""
    result = np.empty(shape) if out is None else out
    return result, result.reshape(-1)


def power_array(x, c, out=None):
    """x ** c for float64 array ``x`` and a number ``c``, as ``power`` computes it."""
    x = np.asarray(x, dtype=np.float64, order="C")   # (ascontiguousarray makes 0-d 1-d)
    result, flat = _flat_result(x.shape, out)
    _power_loop(x.reshape(-1), float(c), flat)
    return result


def pow_array(x, y, out=None):
    """x ** y elementwise for float64 arrays that broadcast, as the POW rule computes it."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    shape = np.broadcast_shapes(x.shape, y.shape)
    result, flat = _flat_result(shape, out)
    _pow_loop(_flat_operand(x, shape), _flat_operand(y, shape), flat)
    return result


def _flat_operand(a, shape):
    # broadcast by copying: the views np.broadcast_arrays gives warn (a FutureWarning) when
    # the kernel's compiler reads their writeable flag to type a new signature
    if a.shape != shape:
        a = np.broadcast_to(a, shape).copy()
    return np.ascontiguousarray(a).reshape(-1)


def rpow_array(c, x, out=None):
    """c ** x for a number ``c`` and float64 array ``x``, as the RPOW_S rule computes it."""
    x = np.asarray(x, dtype=np.float64, order="C")
    result, flat = _flat_result(x.shape, out)
    _rpow_loop(float(c), x.reshape(-1), flat)
    return result


@inline
def pow_s_fwd(x0, x1, x2, c, p0, p1):
    return power(x0, c)


@inline
def pow_s_vjp(g, x0, x1, x2, out, c, p0, p1):
    return 0.0 if c == 0.0 else g * (c * power(x0, c - 1.0))


@inline
def pow_s_d2(x0, out, c, p0, p1):
    # c == 0 and c == 1 have a constant derivative (PyTorch's 0 for c == 0)
    return 0.0 if (c == 0.0 or c == 1.0) else c * (c - 1.0) * power(x0, c - 2.0)


POW_S = declare(21, "PowBackward0", family=ELEMENTWISE, reads=READS_X0, forward=pow_s_fwd,
                vjp0=pow_s_vjp, d2=pow_s_d2, hot=True)


# --- pow: number ** tensor -----------------------------------------------------------------
@inline
def rpow_s_fwd(x0, x1, x2, c, p0, p1):
    return c ** x0


@inline
def rpow_s_vjp(g, x0, x1, x2, out, c, p0, p1):
    # 0**x: PyTorch gives gradient 0 where x >= 0
    return g * out * np.log(c) if (c != 0.0 or x0 < 0.0) else 0.0


@inline
def rpow_s_d2(x0, out, c, p0, p1):
    # base 0: the derivative is a constant mask
    return 0.0 if c == 0.0 else out * np.log(c) * np.log(c)


RPOW_S = declare(22, "PowBackward2", family=ELEMENTWISE, reads=READS_OUT, forward=rpow_s_fwd,
                 vjp0=rpow_s_vjp, d2=rpow_s_d2, hot=True)


# --- reciprocal ----------------------------------------------------------------------------
@inline
def reciprocal_fwd(x0, x1, x2, c, p0, p1):
    return 1.0 / x0


@inline
def reciprocal_vjp(g, x0, x1, x2, out, c, p0, p1):
    return -g * (out * out)


@inline
def reciprocal_d2(x0, out, c, p0, p1):
    return 2.0 * out * out * out


RECIPROCAL = declare(23, "ReciprocalBackward0", family=ELEMENTWISE, reads=READS_OUT,
                     forward=reciprocal_fwd, vjp0=reciprocal_vjp, d2=reciprocal_d2, hot=True)


# ---------------------------------------------------------------------------------------------
# Functions.  Rules reuse the saved output where the math allows: numba's transcendental
# functions are scalar libm calls, and the forward already paid for one.
# ---------------------------------------------------------------------------------------------
# --- exp -------------------------------------------------------------------------------------
@inline
def exp_fwd(x0, x1, x2, c, p0, p1):
    return np.exp(x0)


@inline
def exp_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * out


@inline
def exp_d2(x0, out, c, p0, p1):
    return out


EXP = declare(30, "ExpBackward0", family=ELEMENTWISE, reads=READS_OUT, python=math.exp,
              numpy=np.exp, forward=exp_fwd, vjp0=exp_vjp, d2=exp_d2, hot=True)


# --- log -------------------------------------------------------------------------------------
@inline
def log_fwd(x0, x1, x2, c, p0, p1):
    return np.log(x0)


@inline
def log_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g / x0


@inline
def log_d2(x0, out, c, p0, p1):
    return -1.0 / (x0 * x0)


LOG = declare(31, "LogBackward0", family=ELEMENTWISE, reads=READS_X0, python=math.log,
              numpy=np.log, forward=log_fwd, vjp0=log_vjp, d2=log_d2, hot=True)


# --- log1p -----------------------------------------------------------------------------------
@inline
def log1p_fwd(x0, x1, x2, c, p0, p1):
    return np.log1p(x0)


@inline
def log1p_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g / (x0 + 1.0)


@inline
def log1p_d2(x0, out, c, p0, p1):
    return -1.0 / ((x0 + 1.0) * (x0 + 1.0))


LOG1P = declare(32, "Log1PBackward0", family=ELEMENTWISE, reads=READS_X0, python=math.log1p,
                numpy=np.log1p, forward=log1p_fwd, vjp0=log1p_vjp, d2=log1p_d2)


# --- logit (log(x / (1 - x)); with eps, of x clamped to [eps, 1 - eps] first) ---------------
@inline
def logit_fwd(x0, x1, x2, c, p0, p1):
    return np.log(x0 / (1.0 - x0))


@inline
def logit_vjp(g, x0, x1, x2, out, c, p0, p1):
    # PyTorch's: nan outside [0, 1] (where the value is nan too), g / 0 = inf at 0 and 1
    if x0 < 0.0 or x0 > 1.0:
        return np.nan
    return g / (x0 * (1.0 - x0))


@inline
def logit_d2(x0, out, c, p0, p1):
    if x0 < 0.0 or x0 > 1.0:
        return np.nan
    d = x0 * (1.0 - x0)
    return (2.0 * x0 - 1.0) / (d * d)


def logit_graph(F, g, x0, x1, out, c):
    return F.div(g, F.mul(x0, F.rsub(x0, 1.0))), None


def logit_array(x, out=None):
    return np.log(np.divide(x, np.subtract(1.0, x)), out=out)


LOGIT = declare(127, "LogitBackward0", family=ELEMENTWISE, reads=READS_X0, numpy=logit_array,
                forward=logit_fwd, vjp0=logit_vjp, d2=logit_d2, graph=logit_graph)


# --- expm1 -----------------------------------------------------------------------------------
@inline
def expm1_fwd(x0, x1, x2, c, p0, p1):
    return np.expm1(x0)


@inline
def expm1_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * (out + 1.0)


@inline
def expm1_d2(x0, out, c, p0, p1):
    return out + 1.0


EXPM1 = declare(33, "Expm1Backward0", family=ELEMENTWISE, reads=READS_OUT, python=math.expm1,
                numpy=np.expm1, forward=expm1_fwd, vjp0=expm1_vjp, d2=expm1_d2)


# --- sqrt ------------------------------------------------------------------------------------
@inline
def sqrt_fwd(x0, x1, x2, c, p0, p1):
    return np.sqrt(x0)


@inline
def sqrt_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g / (2.0 * out)


@inline
def sqrt_d2(x0, out, c, p0, p1):
    return -0.25 / (out * out * out)


SQRT = declare(34, "SqrtBackward0", family=ELEMENTWISE, reads=READS_OUT, python=math.sqrt,
               forward=sqrt_fwd, vjp0=sqrt_vjp, d2=sqrt_d2, hot=True)


# --- abs -------------------------------------------------------------------------------------
@inline
def abs_fwd(x0, x1, x2, c, p0, p1):
    return abs(x0)


@inline
def abs_vjp(g, x0, x1, x2, out, c, p0, p1):
    # sgn: 0 at 0 and at nan, as PyTorch's
    return g if x0 > 0.0 else (-g if x0 < 0.0 else 0.0)


ABS = declare(35, "AbsBackward0", family=ELEMENTWISE, reads=READS_X0, masks=True,
              forward=abs_fwd, vjp0=abs_vjp, curvature=LINEAR, hot=True)


# --- sin -------------------------------------------------------------------------------------
@inline
def sin_fwd(x0, x1, x2, c, p0, p1):
    return np.sin(x0)


@inline
def sin_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * np.cos(x0)


@inline
def sin_d2(x0, out, c, p0, p1):
    return -np.sin(x0)


SIN = declare(36, "SinBackward0", family=ELEMENTWISE, reads=READS_X0, python=math.sin,
              numpy=np.sin, forward=sin_fwd, vjp0=sin_vjp, d2=sin_d2, hot=True)


# --- cos -------------------------------------------------------------------------------------
@inline
def cos_fwd(x0, x1, x2, c, p0, p1):
    return np.cos(x0)


@inline
def cos_vjp(g, x0, x1, x2, out, c, p0, p1):
    return -(g * np.sin(x0))


@inline
def cos_d2(x0, out, c, p0, p1):
    return -np.cos(x0)


COS = declare(37, "CosBackward0", family=ELEMENTWISE, reads=READS_X0, python=math.cos,
              numpy=np.cos, forward=cos_fwd, vjp0=cos_vjp, d2=cos_d2, hot=True)


# --- tan -------------------------------------------------------------------------------------
@inline
def tan_fwd(x0, x1, x2, c, p0, p1):
    return np.tan(x0)


@inline
def tan_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * (1.0 + out * out)      # tan' = 1 + tan**2 reuses the saved output


@inline
def tan_d2(x0, out, c, p0, p1):
    return 2.0 * out * (1.0 + out * out)


TAN = declare(38, "TanBackward0", family=ELEMENTWISE, reads=READS_OUT, python=math.tan,
              numpy=np.tan, forward=tan_fwd, vjp0=tan_vjp, d2=tan_d2)


# --- tanh ------------------------------------------------------------------------------------
@inline
def tanh_fwd(x0, x1, x2, c, p0, p1):
    return np.tanh(x0)


@inline
def tanh_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * (1.0 - out * out)      # tanh' = 1 - tanh**2 reuses the saved output


@inline
def tanh_d2(x0, out, c, p0, p1):
    return -2.0 * out * (1.0 - out * out)


TANH = declare(39, "TanhBackward0", family=ELEMENTWISE, reads=READS_OUT, python=math.tanh,
               numpy=np.tanh, forward=tanh_fwd, vjp0=tanh_vjp, d2=tanh_d2, hot=True)


# --- sigmoid ---------------------------------------------------------------------------------
@inline
def sigmoid_fwd(x0, x1, x2, c, p0, p1):
    return 1.0 / (1.0 + np.exp(-x0))


@inline
def sigmoid_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * ((1.0 - out) * out)


@inline
def sigmoid_d2(x0, out, c, p0, p1):
    return out * (1.0 - out) * (1.0 - 2.0 * out)


SIGMOID = declare(40, "SigmoidBackward0", family=ELEMENTWISE, reads=READS_OUT,
                  forward=sigmoid_fwd, vjp0=sigmoid_vjp, d2=sigmoid_d2, hot=True)


# --- sinh ------------------------------------------------------------------------------------
@inline
def sinh_fwd(x0, x1, x2, c, p0, p1):
    return np.sinh(x0)


@inline
def sinh_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * np.cosh(x0)


@inline
def sinh_d2(x0, out, c, p0, p1):
    return out                         # sinh'' = sinh, the saved output


def sinh_graph(F, g, x0, x1, out, c):
    # cosh(x) = (exp(x) + exp(-x)) / 2, in differentiable ops (create_graph)
    return F.mul(g, F.div(F.add(F.exp(x0), F.exp(F.neg(x0))), 2.0)), None


SINH = declare(49, "SinhBackward0", family=ELEMENTWISE, reads=READS_X0, python=math.sinh,
               numpy=np.sinh, forward=sinh_fwd, vjp0=sinh_vjp, d2=sinh_d2, graph=sinh_graph)


# --- cosh, and the inverse trigonometric and hyperbolic functions ---------------------------
# Their derivatives are PyTorch's formulas; each op's graph rule (create_graph) writes the same
# derivative in differentiable ops.
@inline
def cosh_fwd(x0, x1, x2, c, p0, p1):
    return np.cosh(x0)


@inline
def cosh_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * np.sinh(x0)


@inline
def cosh_d2(x0, out, c, p0, p1):
    return out                         # cosh'' = cosh, the saved output


def cosh_graph(F, g, x0, x1, out, c):
    return F.mul(g, F.sinh(x0)), None


COSH = declare(50, "CoshBackward0", family=ELEMENTWISE, reads=READS_X0, python=math.cosh,
               numpy=np.cosh, forward=cosh_fwd, vjp0=cosh_vjp, d2=cosh_d2, graph=cosh_graph)


@inline
def asin_fwd(x0, x1, x2, c, p0, p1):
    return np.arcsin(x0)


@inline
def asin_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g / np.sqrt(1.0 - x0 * x0)


@inline
def asin_d2(x0, out, c, p0, p1):
    q = 1.0 - x0 * x0
    return x0 / (q * np.sqrt(q))


def asin_graph(F, g, x0, x1, out, c):
    return F.div(g, F.sqrt(F.rsub(F.mul(x0, x0), 1.0))), None


ASIN = declare(51, "AsinBackward0", family=ELEMENTWISE, reads=READS_X0, python=math.asin,
               numpy=np.arcsin, forward=asin_fwd, vjp0=asin_vjp, d2=asin_d2, graph=asin_graph)


@inline
def acos_fwd(x0, x1, x2, c, p0, p1):
    return np.arccos(x0)


@inline
def acos_vjp(g, x0, x1, x2, out, c, p0, p1):
    return -(g / np.sqrt(1.0 - x0 * x0))


@inline
def acos_d2(x0, out, c, p0, p1):
    q = 1.0 - x0 * x0
    return -(x0 / (q * np.sqrt(q)))


def acos_graph(F, g, x0, x1, out, c):
    return F.neg(F.div(g, F.sqrt(F.rsub(F.mul(x0, x0), 1.0)))), None


ACOS = declare(52, "AcosBackward0", family=ELEMENTWISE, reads=READS_X0, python=math.acos,
               numpy=np.arccos, forward=acos_fwd, vjp0=acos_vjp, d2=acos_d2, graph=acos_graph)


@inline
def atan_fwd(x0, x1, x2, c, p0, p1):
    return np.arctan(x0)


@inline
def atan_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g / (x0 * x0 + 1.0)


@inline
def atan_d2(x0, out, c, p0, p1):
    q = x0 * x0 + 1.0
    return -2.0 * x0 / (q * q)


def atan_graph(F, g, x0, x1, out, c):
    return F.div(g, F.add(F.mul(x0, x0), 1.0)), None


ATAN = declare(53, "AtanBackward0", family=ELEMENTWISE, reads=READS_X0, python=math.atan,
               numpy=np.arctan, forward=atan_fwd, vjp0=atan_vjp, d2=atan_d2, graph=atan_graph)


@inline
def asinh_fwd(x0, x1, x2, c, p0, p1):
    return np.arcsinh(x0)


@inline
def asinh_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g / np.sqrt(x0 * x0 + 1.0)


@inline
def asinh_d2(x0, out, c, p0, p1):
    q = x0 * x0 + 1.0
    return -(x0 / (q * np.sqrt(q)))


def asinh_graph(F, g, x0, x1, out, c):
    return F.div(g, F.sqrt(F.add(F.mul(x0, x0), 1.0))), None


ASINH = declare(54, "AsinhBackward0", family=ELEMENTWISE, reads=READS_X0, python=math.asinh,
                numpy=np.arcsinh, forward=asinh_fwd, vjp0=asinh_vjp, d2=asinh_d2,
                graph=asinh_graph)


@inline
def acosh_fwd(x0, x1, x2, c, p0, p1):
    return np.arccosh(x0)


@inline
def acosh_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g / np.sqrt(x0 * x0 - 1.0)


@inline
def acosh_d2(x0, out, c, p0, p1):
    q = x0 * x0 - 1.0
    return -(x0 / (q * np.sqrt(q)))


def acosh_graph(F, g, x0, x1, out, c):
    return F.div(g, F.sqrt(F.sub(F.mul(x0, x0), 1.0))), None


ACOSH = declare(55, "AcoshBackward0", family=ELEMENTWISE, reads=READS_X0, python=math.acosh,
                numpy=np.arccosh, forward=acosh_fwd, vjp0=acosh_vjp, d2=acosh_d2,
                graph=acosh_graph)


@inline
def atanh_fwd(x0, x1, x2, c, p0, p1):
    return np.arctanh(x0)


@inline
def atanh_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g / (1.0 - x0 * x0)


@inline
def atanh_d2(x0, out, c, p0, p1):
    q = 1.0 - x0 * x0
    return 2.0 * x0 / (q * q)


def atanh_graph(F, g, x0, x1, out, c):
    return F.div(g, F.rsub(F.mul(x0, x0), 1.0)), None


ATANH = declare(56, "AtanhBackward0", family=ELEMENTWISE, reads=READS_X0, python=math.atanh,
                numpy=np.arctanh, forward=atanh_fwd, vjp0=atanh_vjp, d2=atanh_d2,
                graph=atanh_graph)


# --- log2, log10, exp2 ---------------------------------------------------------------------------
_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


@inline
def log2_fwd(x0, x1, x2, c, p0, p1):
    return np.log2(x0)


@inline
def log2_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g / (x0 * 0.6931471805599453)


@inline
def log2_d2(x0, out, c, p0, p1):
    return -1.0 / (x0 * x0 * 0.6931471805599453)


def log2_graph(F, g, x0, x1, out, c):
    return F.div(g, F.mul(x0, _LN2)), None


LOG2 = declare(57, "Log2Backward0", family=ELEMENTWISE, reads=READS_X0, python=math.log2,
               numpy=np.log2, forward=log2_fwd, vjp0=log2_vjp, d2=log2_d2, graph=log2_graph)


@inline
def log10_fwd(x0, x1, x2, c, p0, p1):
    return np.log10(x0)


@inline
def log10_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g / (x0 * 2.302585092994046)


@inline
def log10_d2(x0, out, c, p0, p1):
    return -1.0 / (x0 * x0 * 2.302585092994046)


def log10_graph(F, g, x0, x1, out, c):
    return F.div(g, F.mul(x0, _LN10)), None


LOG10 = declare(58, "Log10Backward0", family=ELEMENTWISE, reads=READS_X0, python=math.log10,
                numpy=np.log10, forward=log10_fwd, vjp0=log10_vjp, d2=log10_d2,
                graph=log10_graph)


@inline
def exp2_fwd(x0, x1, x2, c, p0, p1):
    return np.exp2(x0)


@inline
def exp2_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * out * 0.6931471805599453


@inline
def exp2_d2(x0, out, c, p0, p1):
    return out * (0.6931471805599453 * 0.6931471805599453)


def exp2_graph(F, g, x0, x1, out, c):
    return F.mul(F.mul(g, out), _LN2), None


EXP2 = declare(59, "Exp2Backward0", family=ELEMENTWISE, reads=READS_OUT, numpy=np.exp2,
               forward=exp2_fwd, vjp0=exp2_vjp, d2=exp2_d2, graph=exp2_graph)


# --- rsqrt --------------------------------------------------------------------------------------
@inline
def rsqrt_fwd(x0, x1, x2, c, p0, p1):
    return 1.0 / np.sqrt(x0)


@inline
def rsqrt_vjp(g, x0, x1, x2, out, c, p0, p1):
    return -0.5 * g * (out * out * out)


@inline
def rsqrt_d2(x0, out, c, p0, p1):
    o2 = out * out
    return 0.75 * o2 * o2 * out


def rsqrt_graph(F, g, x0, x1, out, c):
    return F.mul(F.mul(g, F.mul(F.mul(out, out), out)), -0.5), None


RSQRT = declare(24, "RsqrtBackward0", family=ELEMENTWISE, reads=READS_OUT, forward=rsqrt_fwd,
                vjp0=rsqrt_vjp, d2=rsqrt_d2, graph=rsqrt_graph, hot=True)


# --- erf, erfc -----------------------------------------------------------------------------------
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


@inline
def erf_fwd(x0, x1, x2, c, p0, p1):
    return math.erf(x0)


@inline
def erf_vjp(g, x0, x1, x2, out, c, p0, p1):
    return 1.1283791670955126 * np.exp(-(x0 * x0)) * g


@inline
def erf_d2(x0, out, c, p0, p1):
    return -2.0 * x0 * 1.1283791670955126 * np.exp(-(x0 * x0))


def erf_graph(F, g, x0, x1, out, c):
    return F.mul(F.mul(F.exp(F.neg(F.mul(x0, x0))), _TWO_OVER_SQRT_PI), g), None


@kernel
def _erf_loop(x, out, complement):
    for i in range(x.size):
        out[i] = math.erfc(x[i]) if complement else math.erf(x[i])


def _erf_array(x, out, complement):
    # eager mode computes erf as the compiled rules do, with the C library's erf: SciPy's
    # differs in the last bit for a fifth of the inputs (and takes 0.4 s to import)
    # (np.asarray, not ascontiguousarray, which makes a 0-d x 1-d: erf of tensor(0.3) was
    # shaped (1,))
    x = np.asarray(x, dtype=np.float64, order="C")
    result = np.empty(x.shape) if out is None else out
    _erf_loop(x.reshape(-1), result.reshape(-1), complement)
    return result


def erf_array(x, out=None):
    """erf of every element of array ``x`` (into ``out``, contiguous, when given)."""
    return _erf_array(x, out, False)


def erfc_array(x, out=None):
    """erfc of every element of array ``x`` (into ``out``, contiguous, when given)."""
    return _erf_array(x, out, True)


ERF = declare(25, "ErfBackward0", family=ELEMENTWISE, reads=READS_X0, python=math.erf,
              numpy=erf_array, forward=erf_fwd, vjp0=erf_vjp, d2=erf_d2, graph=erf_graph)


@inline
def erfc_fwd(x0, x1, x2, c, p0, p1):
    return math.erfc(x0)


@inline
def erfc_vjp(g, x0, x1, x2, out, c, p0, p1):
    return -1.1283791670955126 * np.exp(-(x0 * x0)) * g


@inline
def erfc_d2(x0, out, c, p0, p1):
    return 2.0 * x0 * 1.1283791670955126 * np.exp(-(x0 * x0))


def erfc_graph(F, g, x0, x1, out, c):
    return F.mul(F.mul(F.exp(F.neg(F.mul(x0, x0))), -_TWO_OVER_SQRT_PI), g), None


ERFC = declare(26, "ErfcBackward0", family=ELEMENTWISE, reads=READS_X0, python=math.erfc,
               numpy=erfc_array, forward=erfc_fwd, vjp0=erfc_vjp, d2=erfc_d2,
               graph=erfc_graph)


# --- floor, ceil, round, trunc, sign: piecewise constant, a zero gradient as PyTorch's --------
@inline
def zero_vjp(g, x0, x1, x2, out, c, p0, p1):
    return 0.0


@inline
def zero_d2(x0, out, c, p0, p1):
    return 0.0


def zero_graph(F, g, x0, x1, out, c):
    return F.mul(g, 0.0), None


@inline
def floor_fwd(x0, x1, x2, c, p0, p1):
    return np.floor(x0)


FLOOR = declare(27, "FloorBackward0", family=ELEMENTWISE, numpy=np.floor, forward=floor_fwd,
                vjp0=zero_vjp, d2=zero_d2, graph=zero_graph)


@inline
def ceil_fwd(x0, x1, x2, c, p0, p1):
    return np.ceil(x0)


CEIL = declare(28, "CeilBackward0", family=ELEMENTWISE, numpy=np.ceil, forward=ceil_fwd,
               vjp0=zero_vjp, d2=zero_d2, graph=zero_graph)


@inline
def round_fwd(x0, x1, x2, c, p0, p1):
    return np.rint(x0)                 # halves to even, as PyTorch's round


ROUND = declare(29, "RoundBackward0", family=ELEMENTWISE, numpy=np.rint, forward=round_fwd,
                vjp0=zero_vjp, d2=zero_d2, graph=zero_graph)


@inline
def round_decimals_fwd(x0, x1, x2, c, p0, p1):
    # c decimals; PyTorch's order of operations (functional._round_decimals likewise)
    if c >= 0.0:
        scale = 10.0 ** c
        return np.rint(x0 * scale) / scale
    scale = 10.0 ** (-c)
    return np.rint(x0 / scale) * scale


ROUND_DECIMALS = declare(78, "RoundBackward1", family=ELEMENTWISE, forward=round_decimals_fwd,
                         vjp0=zero_vjp, d2=zero_d2, graph=zero_graph)


@inline
def trunc_fwd(x0, x1, x2, c, p0, p1):
    return np.trunc(x0)


TRUNC = declare(79, "TruncBackward0", family=ELEMENTWISE, numpy=np.trunc, forward=trunc_fwd,
                vjp0=zero_vjp, d2=zero_d2, graph=zero_graph)


@inline
def sign_fwd(x0, x1, x2, c, p0, p1):
    # 0 for nan and for both zeros, as PyTorch's sign (NumPy's gives nan and keeps -0.0)
    return 1.0 if x0 > 0.0 else (-1.0 if x0 < 0.0 else 0.0)


SIGN = declare(80, "SignBackward0", family=ELEMENTWISE, forward=sign_fwd, vjp0=zero_vjp,
               d2=zero_d2, graph=zero_graph)


@inline
def frac_fwd(x0, x1, x2, c, p0, p1):
    return x0 - np.trunc(x0)


@inline
def frac_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g


def frac_graph(F, g, x0, x1, out, c):
    return g, None


FRAC = declare(81, "FracBackward0", family=ELEMENTWISE, forward=frac_fwd, vjp0=frac_vjp,
               curvature=LINEAR, graph=frac_graph)


# --- relu ------------------------------------------------------------------------------------
@inline
def relu_fwd(x0, x1, x2, c, p0, p1):
    return x0 if (x0 > 0.0 or x0 != x0) else 0.0


@inline
def relu_vjp(g, x0, x1, x2, out, c, p0, p1):
    # PyTorch zeroes where the result is <= 0: a nan result passes the gradient
    return 0.0 if out <= 0.0 else g


RELU = declare(41, "ReluBackward0", family=ELEMENTWISE, reads=READS_OUT, masks=True,
               first_write=True, forward=relu_fwd, vjp0=relu_vjp, curvature=LINEAR, hot=True)


# --- softplus: p0 = beta, p1 = threshold ---------------------------------------------------
@inline
def softplus_fwd(x0, x1, x2, c, p0, p1):
    bx = p0 * x0
    return x0 if bx > p1 else np.log1p(np.exp(bx)) / p0


@inline
def softplus_vjp(g, x0, x1, x2, out, c, p0, p1):
    bx = p0 * x0
    if bx > p1:
        return g
    z = np.exp(bx)
    return g * z / (z + 1.0)


@inline
def softplus_d2(x0, out, c, p0, p1):
    if p0 * x0 > p1:
        return 0.0
    z = 1.0 / (1.0 + np.exp(-p0 * x0))
    return p0 * z * (1.0 - z)


SOFTPLUS = declare(42, "SoftplusBackward0", family=ELEMENTWISE, reads=READS_X0, params=2,
                   masks=True, forward=softplus_fwd, vjp0=softplus_vjp, d2=softplus_d2)


# --- clamp, clamp_min, clamp_max: p0 = lower bound, p1 = upper bound -------------------------
@inline
def clamp_fwd(x0, x1, x2, c, p0, p1):
    if x0 != x0:
        return x0
    if p0 > p1:
        return p1
    return min(max(x0, p0), p1)


@inline
def clamp_vjp(g, x0, x1, x2, out, c, p0, p1):
    # PyTorch passes the gradient where lo <= x <= hi: the bounds pass it, nan does not
    return g if (x0 >= p0 and x0 <= p1) else 0.0


CLAMP = declare(43, "ClampBackward1", family=ELEMENTWISE, reads=READS_X0, params=2,
                masks=True, forward=clamp_fwd, vjp0=clamp_vjp, curvature=LINEAR)
# x.clamp_min(lo) / x.clamp_max(hi): PyTorch's own nodes; the same rules and parameters
CLAMP_MIN = declare(47, "ClampMinBackward0", family=ELEMENTWISE, reads=READS_X0, params=2,
                    masks=True, forward=clamp_fwd, vjp0=clamp_vjp, curvature=LINEAR)
CLAMP_MAX = declare(48, "ClampMaxBackward0", family=ELEMENTWISE, reads=READS_X0, params=2,
                    masks=True, forward=clamp_fwd, vjp0=clamp_vjp, curvature=LINEAR)


# --- maximum, minimum: c = +1 for maximum, -1 for minimum ------------------------------------
@inline
def maximum_fwd(x0, x1, x2, c, p0, p1):
    if x0 != x0 or x1 != x1:
        return x0 + x1      # nan propagates
    return x0 if (x0 - x1) * c >= 0.0 else x1


@inline
def maximum_vjp0(g, x0, x1, x2, out, c, p0, p1):
    # ties split the gradient in halves, as PyTorch does; a nan operand makes the nan output,
    # which takes the gradient from both sides.  Compared, not subtracted: inf - inf would
    # make equal infinities look like nan.
    if x0 == x1:
        return 0.5 * g
    if x0 != x0 or x1 != x1 or (x0 > x1) == (c > 0.0):
        return g
    return 0.0


@inline
def maximum_vjp1(g, x0, x1, x2, out, c, p0, p1):
    if x0 == x1:
        return 0.5 * g
    if x0 != x0 or x1 != x1 or not ((x0 > x1) == (c > 0.0)):
        return g
    return 0.0


MAXIMUM = declare(44, "MaximumBackward0", family=ELEMENTWISE, arity=2,
                  reads=READS_X0 | READS_X1, masks=True, forward=maximum_fwd,
                  vjp0=maximum_vjp0, vjp1=maximum_vjp1, curvature=LINEAR)
MINIMUM = declare(45, "MinimumBackward0", family=ELEMENTWISE, arity=2,
                  reads=READS_X0 | READS_X1, masks=True, forward=maximum_fwd,
                  vjp0=maximum_vjp0, vjp1=maximum_vjp1, curvature=LINEAR)


# --- where: x2 is the condition, a CONST record of 0/1 values named by ip ----------------------
@inline
def where_fwd(x0, x1, x2, c, p0, p1):
    return x0 if x2 != 0.0 else x1


@inline
def where_vjp0(g, x0, x1, x2, out, c, p0, p1):
    return g if x2 != 0.0 else 0.0


@inline
def where_vjp1(g, x0, x1, x2, out, c, p0, p1):
    return 0.0 if x2 != 0.0 else g


WHERE = declare(46, "WhereBackward0", family=ELEMENTWISE, arity=2, frees=True, masks=True,
                condition=True, forward=where_fwd, vjp0=where_vjp0, vjp1=where_vjp1, curvature=LINEAR)


# ---------------------------------------------------------------------------------------------
# Functions of two tensors
# ---------------------------------------------------------------------------------------------
# Eager mode runs these through a compiled loop over the same scalar forward the sweeps use, so
# that eager, replay and generated code agree to the bit (NumPy's ufuncs may round otherwise).
@kernel
def _pair_loop(x0, x1, out, which):
    for i in range(out.size):
        a, b = x0[i], x1[i]
        if which == 0:
            out[i] = atan2_fwd(a, b, 0.0, 0.0, 0.0, 0.0)
        elif which == 1:
            out[i] = hypot_fwd(a, b, 0.0, 0.0, 0.0, 0.0)
        elif which == 2:
            out[i] = xlogy_fwd(a, b, 0.0, 0.0, 0.0, 0.0)
        elif which == 3:
            out[i] = fmod_fwd(a, b, 0.0, 0.0, 0.0, 0.0)
        elif which == 4:
            out[i] = remainder_fwd(a, b, 0.0, 0.0, 0.0, 0.0)
        elif which == 5:
            out[i] = copysign_fwd(a, b, 0.0, 0.0, 0.0, 0.0)
        elif which == 7:
            out[i] = xlog1py_fwd(a, b, 0.0, 0.0, 0.0, 0.0)
        elif which == 8:
            out[i] = binary_cross_entropy_fwd(a, b, 0.0, 0.0, 0.0, 0.0)
        else:
            out[i] = logaddexp_fwd(a, b, 0.0, 0.0, 0.0, 0.0)


def _pair_array(which):
    def run(a, b, out=None):
        shape = np.broadcast_shapes(np.shape(a), np.shape(b))
        # contiguous writeable float64 copies where needed: one compiled signature
        a, b = (np.require(np.broadcast_to(v, shape) if np.shape(v) != shape else v,
                           np.float64, "CW") for v in (a, b))
        result = np.empty(shape) if out is None else out
        _pair_loop(a.reshape(-1), b.reshape(-1), result.reshape(-1), which)
        return result
    return run


# --- atan2(x0, x1): the angle of the point (x1, x0) -------------------------------------------
@inline
def atan2_fwd(x0, x1, x2, c, p0, p1):
    return math.atan2(x0, x1)


@inline
def _atan2_recip(x0, x1):
    """1 / (self**2 + other**2), 0 where that is inf: PyTorch fills it so, and the gradient
    at the origin (or where the squares underflow) is 0, not nan."""
    recip = 1.0 / (x0 * x0 + x1 * x1)
    return 0.0 if math.isinf(recip) else recip


@inline
def atan2_vjp0(g, x0, x1, x2, out, c, p0, p1):
    # PyTorch's order of rounding: grad * other * recip
    return g * x1 * _atan2_recip(x0, x1)


@inline
def atan2_vjp1(g, x0, x1, x2, out, c, p0, p1):
    return g * -x0 * _atan2_recip(x0, x1)


def atan2_graph(F, g, x0, x1, out, c):
    recip = F.reciprocal(F.add(F.mul(x0, x0), F.mul(x1, x1)))
    recip = F.where(F._compare(np.equal, recip, math.inf), 0.0, recip)
    return F.mul(F.mul(g, x1), recip), F.mul(F.mul(g, F.neg(x0)), recip)


# no curvature rule: hessians through the two-input ops below take the create_graph route
ATAN2 = declare(3, "Atan2Backward0", family=ELEMENTWISE, arity=2, reads=READS_X0 | READS_X1,
                forward=atan2_fwd, vjp0=atan2_vjp0, vjp1=atan2_vjp1, graph=atan2_graph,
                curvature=None)
atan2_array = _pair_array(0)


# --- hypot: sqrt(x0**2 + x1**2) without overflow ---------------------------------------------
@inline
def hypot_fwd(x0, x1, x2, c, p0, p1):
    return math.hypot(x0, x1)


@inline
def hypot_vjp0(g, x0, x1, x2, out, c, p0, p1):
    # PyTorch's order of rounding: grad * self / result
    return g * x0 / out


@inline
def hypot_vjp1(g, x0, x1, x2, out, c, p0, p1):
    return g * x1 / out


def hypot_graph(F, g, x0, x1, out, c):
    return F.div(F.mul(g, x0), out), F.div(F.mul(g, x1), out)


HYPOT = declare(4, "HypotBackward0", family=ELEMENTWISE, arity=2,
                reads=READS_X0 | READS_X1 | READS_OUT,
                reads_for=(READS_X0 | READS_OUT, READS_X1 | READS_OUT), forward=hypot_fwd,
                vjp0=hypot_vjp0, vjp1=hypot_vjp1, graph=hypot_graph, curvature=None)
hypot_array = _pair_array(1)


# --- xlogy: x0 * log(x1), 0 where x0 is 0 (unless x1 is nan) --------------------------------
@inline
def xlogy_fwd(x0, x1, x2, c, p0, p1):
    if x1 != x1:
        return x1
    if x0 == 0.0:
        return 0.0
    return x0 * math.log(x1) if x1 > 0.0 else (x0 * -math.inf if x1 == 0.0 else math.nan)


@inline
def xlogy_vjp0(g, x0, x1, x2, out, c, p0, p1):
    # PyTorch: xlogy(grad, other), 0 where self is 0 and other <= 0
    if x0 == 0.0 and x1 <= 0.0:
        return 0.0
    return xlogy_fwd(g, x1, x2, c, p0, p1)


@inline
def xlogy_vjp1(g, x0, x1, x2, out, c, p0, p1):
    return g * x0 / x1


def _masked_at_zero(F, g, x0, x1, edge, fn):
    """fn(g, x1), 0 where x0 is 0 and x1 <= edge (the gradient of xlogy/xlog1py's x0)."""
    full = fn(g, x1)
    return F.where(F._compare(np.equal, x0, 0.0),
                   F.where(F._compare(np.less_equal, x1, edge), 0.0, full), full)


def xlogy_graph(F, g, x0, x1, out, c):
    return _masked_at_zero(F, g, x0, x1, 0.0, F.xlogy), F.div(F.mul(g, x0), x1)


XLOGY = declare(5, "XlogyBackward0", family=ELEMENTWISE, arity=2, reads=READS_X0 | READS_X1,
                forward=xlogy_fwd, vjp0=xlogy_vjp0, vjp1=xlogy_vjp1, graph=xlogy_graph,
                curvature=None)
xlogy_array = _pair_array(2)


# --- xlog1py: x0 * log1p(x1), 0 where x0 is 0 (unless x1 is nan) ----------------------------
@inline
def xlog1py_fwd(x0, x1, x2, c, p0, p1):
    if x1 != x1:
        return x1
    if x0 == 0.0:
        return 0.0
    return x0 * np.log1p(x1)


@inline
def xlog1py_vjp0(g, x0, x1, x2, out, c, p0, p1):
    # PyTorch: xlog1py(grad, other), 0 where self is 0 and other <= -1
    if x0 == 0.0 and x1 <= -1.0:
        return 0.0
    return xlog1py_fwd(g, x1, x2, c, p0, p1)


@inline
def xlog1py_vjp1(g, x0, x1, x2, out, c, p0, p1):
    return g * x0 / (x1 + 1.0)


def xlog1py_graph(F, g, x0, x1, out, c):
    return (_masked_at_zero(F, g, x0, x1, -1.0, F.xlog1py),
            F.div(F.mul(g, x0), F.add(x1, 1.0)))


XLOG1PY = declare(112, "SpecialXlog1PyBackward0", family=ELEMENTWISE, arity=2,
                  reads=READS_X0 | READS_X1, forward=xlog1py_fwd, vjp0=xlog1py_vjp0,
                  vjp1=xlog1py_vjp1, graph=xlog1py_graph, curvature=None)
xlog1py_array = _pair_array(7)


# --- fmod, remainder: the rest of x0 / x1 truncated (sign of x0) or floored (sign of x1) ----
@inline
def fmod_fwd(x0, x1, x2, c, p0, p1):
    return np.fmod(x0, x1)


@inline
def remainder_fwd(x0, x1, x2, c, p0, p1):
    m = np.fmod(x0, x1)
    if m != 0.0 and (m < 0.0) != (x1 < 0.0):
        m += x1
    return m


@inline
def fmod_vjp1(g, x0, x1, x2, out, c, p0, p1):
    # -grad * div(self, other, rounding_mode="trunc")
    return -g * np.trunc(x0 / x1)


@inline
def remainder_vjp1(g, x0, x1, x2, out, c, p0, p1):
    # -grad * div(self, other, rounding_mode="floor")
    return -g * np.floor(x0 / x1)


def fmod_graph(F, g, x0, x1, out, c):
    return g, F.neg(F.mul(g, F.trunc(F.div(x0, x1))))


def remainder_graph(F, g, x0, x1, out, c):
    return g, F.neg(F.mul(g, F.floor(F.div(x0, x1))))


# input 0's gradient reads nothing: PyTorch saves the operands for input 1's only
FMOD = declare(6, "FmodBackward1", family=ELEMENTWISE, arity=2, reads=READS_X0 | READS_X1,
               reads_for=(0, READS_X0 | READS_X1), forward=fmod_fwd, vjp0=pass_vjp,
               vjp1=fmod_vjp1, graph=fmod_graph, curvature=LINEAR)
REMAINDER = declare(7, "RemainderBackward1", family=ELEMENTWISE, arity=2,
                    reads=READS_X0 | READS_X1, reads_for=(0, READS_X0 | READS_X1),
                    forward=remainder_fwd,
                    vjp0=pass_vjp,
                    vjp1=remainder_vjp1, graph=remainder_graph, curvature=LINEAR)
fmod_array = _pair_array(3)
remainder_array = _pair_array(4)


# --- copysign: |x0| with the sign of x1 -------------------------------------------------------
@inline
def copysign_fwd(x0, x1, x2, c, p0, p1):
    return math.copysign(x0, x1)


@inline
def copysign_vjp0(g, x0, x1, x2, out, c, p0, p1):
    # PyTorch: grad * (result / self), 0 where self is 0
    return 0.0 if x0 == 0.0 else g * (out / x0)


def copysign_graph(F, g, x0, x1, out, c):
    nonzero = F._compare(np.not_equal, x0, 0.0)
    ratio = F.where(nonzero, F.div(out, F.where(nonzero, x0, 1.0)), 0.0)
    return F.mul(g, ratio), F.mul(g, 0.0)


COPYSIGN = declare(8, "CopysignBackward0", family=ELEMENTWISE, arity=2,
                   reads=READS_X0 | READS_OUT, reads_for=(READS_X0 | READS_OUT, 0),
                   forward=copysign_fwd, vjp0=copysign_vjp0,
                   vjp1=zero_vjp, graph=copysign_graph, curvature=LINEAR)
copysign_array = _pair_array(5)


# --- logaddexp: log(exp(x0) + exp(x1)) without overflow --------------------------------------
@inline
def logaddexp_fwd(x0, x1, x2, c, p0, p1):
    if x0 == x1 and math.isinf(x0):     # (inf - inf would be nan)
        return x0
    hi = x1 if x0 < x1 else x0
    return hi + np.log1p(np.exp(-abs(x0 - x1)))


@inline
def logaddexp_vjp0(g, x0, x1, x2, out, c, p0, p1):
    return g / (1.0 + np.exp(x1 - x0))


@inline
def logaddexp_vjp1(g, x0, x1, x2, out, c, p0, p1):
    return g / (1.0 + np.exp(x0 - x1))


def logaddexp_graph(F, g, x0, x1, out, c):
    return (F.div(g, F.add(F.exp(F.sub(x1, x0)), 1.0)),
            F.div(g, F.add(F.exp(F.sub(x0, x1)), 1.0)))


LOGADDEXP = declare(9, "LogaddexpBackward0", family=ELEMENTWISE, arity=2,
                    reads=READS_X0 | READS_X1, forward=logaddexp_fwd, vjp0=logaddexp_vjp0,
                    vjp1=logaddexp_vjp1, graph=logaddexp_graph, curvature=None)
logaddexp_array = _pair_array(6)


# --- binary cross entropy of probabilities x0 against targets x1 ----------------------------
# PyTorch's CPU kernel: each log floored at -100 (a probability of exactly 0 or 1 gives a
# finite loss), and the input's gradient divided by (1 - x) x floored at 1e-12 (finite, and 0
# where x equals its target, at 0 and 1 too).  The target's gradient is -logit(x).
_BCE_LOG_FLOOR = -100.0
# PyTorch's floor is the float32 constant 1e-12, i.e. 9.99999996e-13 in float64
_BCE_EPSILON = float(np.float32(1e-12))


@inline
def binary_cross_entropy_fwd(x0, x1, x2, c, p0, p1):
    return ((x1 - 1.0) * max(math.log1p(-x0), _BCE_LOG_FLOOR)
            - x1 * max(math.log(x0), _BCE_LOG_FLOOR))


@inline
def binary_cross_entropy_vjp0(g, x0, x1, x2, out, c, p0, p1):
    return g * (x0 - x1) / max((1.0 - x0) * x0, _BCE_EPSILON)


@inline
def binary_cross_entropy_vjp1(g, x0, x1, x2, out, c, p0, p1):
    return -math.log(x0 / (1.0 - x0)) * g


def binary_cross_entropy_graph(F, g, x0, x1, out, c):
    one_minus = F.add(F.neg(x0), 1.0)
    gx0 = F.div(F.mul(g, F.sub(x0, x1)), F.clamp_min(F.mul(one_minus, x0), _BCE_EPSILON))
    return gx0, F.mul(F.neg(F.log(F.div(x0, one_minus))), g)


BINARY_CROSS_ENTROPY = declare(121, "BinaryCrossEntropyBackward0", family=ELEMENTWISE,
                               arity=2, reads=READS_X0 | READS_X1,
                               forward=binary_cross_entropy_fwd,
                               vjp0=binary_cross_entropy_vjp0,
                               vjp1=binary_cross_entropy_vjp1,
                               graph=binary_cross_entropy_graph, curvature=None)
binary_cross_entropy_array = _pair_array(8)


# ---------------------------------------------------------------------------------------------
# Special functions: log-gamma, its derivatives (digamma, polygamma) and the inverse of erf
# ---------------------------------------------------------------------------------------------
def _zeta_tail_denominators(count):
    """(2j)! / B_2j for j = 1..count: the Euler-Maclaurin tail of the Hurwitz zeta function,
    from Bernoulli numbers computed exactly here (rather than typed in)."""
    from fractions import Fraction
    bern = [Fraction(1)]
    for m in range(1, 2 * count + 1):
        bern.append(-sum(math.comb(m + 1, k) * bern[k] for k in range(m)) / (m + 1))
    return np.array([float(Fraction(math.factorial(2 * j)) / bern[2 * j])
                     for j in range(1, count + 1)])


_ZETA_TAIL = _zeta_tail_denominators(12)
_EPS = 2.0 ** -53
_PSI_AT_10 = 2.25175258906672110764    # digamma(10) = H_9 - Euler's gamma, rounded


@inline
def hurwitz_zeta(s, q):
    """sum over k >= 0 of (q + k) ** -s, for s > 1: nine terms (more while q + k <= 9), then
    the Euler-Maclaurin remainder."""
    if s == 1.0:
        return math.inf
    if s < 1.0:
        return math.nan
    if q <= 0.0:
        # (np.floor: see digamma_scalar)
        if q == np.floor(q):
            return math.inf
        if s != np.floor(s):
            return math.nan
    total = q ** -s
    a = q
    b = 0.0
    i = 0
    while i < 9 or a <= 9.0:
        i += 1
        a += 1.0
        b = a ** -s
        total += b
        if abs(b / total) < _EPS:
            return total
    w = a
    total += b * w / (s - 1.0)
    total -= 0.5 * b
    rising = 1.0
    k = 0.0
    for j in range(12):
        rising *= s + k
        b /= w
        t = rising * b / _ZETA_TAIL[j]
        total += t
        if abs(t / total) < _EPS:
            return total
        k += 1.0
        rising *= s + k
        b /= w
        k += 1.0
    return total


@inline
def digamma_scalar(x):
    if x == 0.0:
        return math.copysign(math.inf, -x)
    if x < 0.0:
        # (np.trunc stays a float: math.trunc is an int64 in compiled code, which wraps for
        # |x| >= 2**63 and made digamma(-1e300), a pole, a finite number)
        whole = np.trunc(x)
        if x == whole:
            return math.nan
        # reflection: psi(x) = psi(1 - x) - pi / tan(pi x), with x's fraction for accuracy
        frac = x - whole
        return digamma_scalar_positive(1.0 - x) - math.pi / math.tan(math.pi * frac)
    return digamma_scalar_positive(x)


@inline
def digamma_scalar_positive(x):
    # recurrence up to 10, then psi's asymptotic series in 1/x**2 (Bernoulli numbers)
    result = 0.0
    while x < 10.0:
        result -= 1.0 / x
        x += 1.0
    if x == 10.0:
        return result + _PSI_AT_10
    series = 0.0
    if x < 1.0e17:
        z = 1.0 / (x * x)
        series = z * (((((((1.0 / 12.0) * z - 691.0 / 32760.0) * z + 1.0 / 132.0) * z
                         - 1.0 / 240.0) * z + 1.0 / 252.0) * z - 1.0 / 120.0) * z
                      + 1.0 / 12.0)
    return result + math.log(x) - 0.5 / x - series


@inline
def polygamma_scalar(n, x):
    """The n-th derivative of digamma (n >= 1 a whole number kept as a float)."""
    if n == 1.0:
        # trigamma: reflection below 1/2, six steps of recurrence, then its series
        sign = 1.0
        result = 0.0
        if x < 0.5:
            sign = -1.0
            s = math.sin(math.pi * x)
            result -= (math.pi * math.pi) / (s * s)
            x = 1.0 - x
        for _ in range(6):
            result += 1.0 / (x * x)
            x += 1.0
        ixx = 1.0 / (x * x)
        result += (1.0 + 1.0 / (2.0 * x)
                   + ixx * (1.0 / 6.0 - ixx * (1.0 / 30.0 - ixx * (1.0 / 42.0)))) / x
        return sign * result
    sign = 1.0 if n % 2.0 == 1.0 else -1.0
    return sign * math.exp(math.lgamma(n + 1.0)) * hurwitz_zeta(n + 1.0, x)


@kernel
def _special_loop(x, out, which, n):
    for i in range(x.size):
        v = x[i]
        if which == 0:
            out[i] = math.lgamma(v)
        elif which == 1:
            out[i] = digamma_scalar(v)
        elif which == 2:
            out[i] = polygamma_scalar(n, v)
        elif which == 3:
            out[i] = erfinv_scalar(v)
        elif which == 4:
            out[i] = i0_scalar(v)
        elif which == 5:
            out[i] = i0e_scalar(v)
        elif which == 6:
            out[i] = i1_scalar(v)
        else:
            out[i] = i1e_scalar(v)


def _special_array(which):
    def run(x, out=None, n=0.0):
        x = np.require(x, np.float64, "CW")
        result = np.empty(x.shape) if out is None else out
        _special_loop(x.reshape(-1), result.reshape(-1), which, float(n))
        return result
    return run


# --- lgamma: log |gamma(x)| --------------------------------------------------------------------
@inline
def lgamma_fwd(x0, x1, x2, c, p0, p1):
    return math.lgamma(x0)


@inline
def lgamma_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * digamma_scalar(x0)


@inline
def lgamma_d2(x0, out, c, p0, p1):
    return polygamma_scalar(1.0, x0)


def lgamma_graph(F, g, x0, x1, out, c):
    return F.mul(g, F.digamma(x0)), None


LGAMMA = declare(113, "LgammaBackward0", family=ELEMENTWISE, reads=READS_X0,
                 python=math.lgamma, forward=lgamma_fwd, vjp0=lgamma_vjp, d2=lgamma_d2,
                 graph=lgamma_graph)
lgamma_array = _special_array(0)


# --- digamma: the derivative of lgamma ---------------------------------------------------------
@inline
def digamma_fwd(x0, x1, x2, c, p0, p1):
    return digamma_scalar(x0)


@inline
def digamma_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * polygamma_scalar(1.0, x0)


@inline
def digamma_d2(x0, out, c, p0, p1):
    return polygamma_scalar(2.0, x0)


def digamma_graph(F, g, x0, x1, out, c):
    return F.mul(g, F.polygamma(1, x0)), None


DIGAMMA = declare(114, "DigammaBackward0", family=ELEMENTWISE, reads=READS_X0,
                  forward=digamma_fwd, vjp0=digamma_vjp, d2=digamma_d2, graph=digamma_graph)
digamma_array = _special_array(1)


# --- polygamma(n, x): c = n >= 1 ---------------------------------------------------------------
@inline
def polygamma_fwd(x0, x1, x2, c, p0, p1):
    return polygamma_scalar(c, x0)


@inline
def polygamma_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * polygamma_scalar(c + 1.0, x0)


@inline
def polygamma_d2(x0, out, c, p0, p1):
    return polygamma_scalar(c + 2.0, x0)


def polygamma_graph(F, g, x0, x1, out, c):
    return F.mul(g, F.polygamma(int(c) + 1, x0)), None


POLYGAMMA = declare(115, "PolygammaBackward0", family=ELEMENTWISE, reads=READS_X0,
                    forward=polygamma_fwd, vjp0=polygamma_vjp, d2=polygamma_d2,
                    graph=polygamma_graph)
polygamma_array = _special_array(2)


# --- erfinv: the inverse of erf on (-1, 1) -----------------------------------------------------
@inline
def erfinv_scalar(y):
    if y != y or y < -1.0 or y > 1.0:
        return math.nan
    if y == 1.0 or y == -1.0:
        return math.copysign(math.inf, y)
    if y == 0.0:
        return y
    # a closed-form first guess (relative error about 2e-3: Winitzki's), then Halley steps
    # on erf(x) = y, which triple the correct digits each, and a last Newton step
    a = 0.147
    ln = math.log((1.0 - y) * (1.0 + y))
    t = 2.0 / (math.pi * a) + 0.5 * ln
    x = math.sqrt(math.sqrt(t * t - ln / a) - t)
    if abs(y) <= 0.5:
        x = math.copysign(x, y)
        for _ in range(2):
            f = math.erf(x) - y
            d = _TWO_OVER_SQRT_PI * math.exp(-(x * x))
            x -= f / (d * (1.0 + x * f / d))
        return x - (math.erf(x) - y) / (_TWO_OVER_SQRT_PI * math.exp(-(x * x)))
    # toward +-1, erf(x) - y cancels: solve erfc(x) = 1 - |y| (exact) for x > 0 instead
    z = 1.0 - abs(y)
    for _ in range(3):
        f = math.erfc(x) - z
        d = _TWO_OVER_SQRT_PI * math.exp(-(x * x))
        x -= f / (x * f - d)
    x += (math.erfc(x) - z) / (_TWO_OVER_SQRT_PI * math.exp(-(x * x)))
    return math.copysign(x, y)


@inline
def erfinv_fwd(x0, x1, x2, c, p0, p1):
    return erfinv_scalar(x0)


@inline
def erfinv_vjp(g, x0, x1, x2, out, c, p0, p1):
    # PyTorch's order: grad * 0.5 * sqrt(pi) * exp(erfinv(x) ** 2)
    return g * 0.5 * _SQRT_PI * np.exp(out * out)


@inline
def erfinv_d2(x0, out, c, p0, p1):
    d = 0.5 * _SQRT_PI * np.exp(out * out)
    return 2.0 * out * d * d


def erfinv_graph(F, g, x0, x1, out, c):
    return F.mul(F.mul(g, 0.5 * _SQRT_PI), F.exp(F.mul(out, out))), None


_SQRT_PI = math.sqrt(math.pi)
ERFINV = declare(116, "ErfinvBackward0", family=ELEMENTWISE, reads=READS_X0 | READS_OUT,
                 forward=erfinv_fwd, vjp0=erfinv_vjp, d2=erfinv_d2, graph=erfinv_graph)
erfinv_array = _special_array(3)


# ---------------------------------------------------------------------------------------------
# Modified Bessel functions of the first kind, orders 0 and 1, and their scalings by e^-|x|
# ---------------------------------------------------------------------------------------------
# Chebyshev series of Cephes (as PyTorch's): e^-x I0(x) on [0, 8] in y = x/2 - 2, and
# e^-x sqrt(x) I0(x) on (8, inf) in y = 32/x - 2; the same for I1 (divided by x on [0, 8])
_I0_A = np.array([
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-09,
    -1.30002500998624804212e-08, 6.04699502254191894932e-08, -2.67079385394061173391e-07,
    1.11738753912010371815e-06, -4.41673835845875056359e-06, 1.64484480707288970893e-05,
    -5.75419501008210370398e-05, 1.88502885095841655729e-04, -5.76375574538582365885e-04,
    1.63947561694133579842e-03, -4.32430999505057594430e-03, 1.05464603945949983183e-02,
    -2.37374148058994688156e-02, 4.93052842396707084878e-02, -9.49010970480476444210e-02,
    1.71620901522208775349e-01, -3.04682672343198398683e-01, 6.76795274409476084995e-01])
_I0_B = np.array([
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
    3.39623202570838634515e-09, 2.26666899049817806459e-08, 2.04891858946906374183e-07,
    2.89137052083475648297e-06, 6.88975834691682398426e-05, 3.36911647825569408990e-03,
    8.04490411014108831608e-01])
_I1_A = np.array([
    2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
    -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
    3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
    -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-09,
    9.38153738649577178388e-09, -4.44505912879632808065e-08, 2.00329475355213526229e-07,
    -8.56872026469545474066e-07, 3.47025130813767847674e-06, -1.32731636560394358279e-05,
    4.78156510755005422638e-05, -1.61760815825896745588e-04, 5.12285956168575772895e-04,
    -1.51357245063125314899e-03, 4.15642294431288815669e-03, -1.05640848946261981558e-02,
    2.47264490306265168283e-02, -5.29459812080949914269e-02, 1.02643658689847095384e-01,
    -1.76416518357834055153e-01, 2.52587186443633654823e-01])
_I1_B = np.array([
    7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
    -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
    -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
    4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
    -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
    3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
    -3.83538038596423702205e-09, -2.63146884688951950684e-08, -2.51223623787020892529e-07,
    -3.88256480887769039346e-06, -1.10588938762623716291e-04, -9.76109749136146840777e-03,
    7.78576235018280120474e-01])
# PyTorch's i1/i1e backward takes the limit 1/2 for |x| <= machine epsilon (not only at 0)
_DBL_EPS = 2.0 ** -52


@inline
def _chbevl(y, coef):
    """sum'_k coef[k] T_k(y / 2), by Clenshaw's recurrence in Cephes's order of operations."""
    b0 = coef[0]
    b1 = 0.0
    b2 = 0.0
    for i in range(1, coef.size):
        b2 = b1
        b1 = b0
        b0 = y * b1 - b2 + coef[i]
    return 0.5 * (b0 - b2)


@inline
def i0e_scalar(v):
    x = abs(v)
    if x <= 8.0:
        return _chbevl(x / 2.0 - 2.0, _I0_A)
    return _chbevl(32.0 / x - 2.0, _I0_B) / math.sqrt(x)


@inline
def i0_scalar(v):
    x = abs(v)
    if x <= 8.0:
        return math.exp(x) * _chbevl(x / 2.0 - 2.0, _I0_A)
    return math.exp(x) * _chbevl(32.0 / x - 2.0, _I0_B) / math.sqrt(x)


@inline
def i1e_scalar(v):
    x = abs(v)
    if x <= 8.0:
        out = _chbevl(x / 2.0 - 2.0, _I1_A) * x
    else:
        out = _chbevl(32.0 / x - 2.0, _I1_B) / math.sqrt(x)
    return -out if v < 0.0 else out


@inline
def i1_scalar(v):
    x = abs(v)
    if x <= 8.0:
        out = math.exp(x) * x * _chbevl(x / 2.0 - 2.0, _I1_A)
    else:
        out = math.exp(x) * _chbevl(32.0 / x - 2.0, _I1_B) / math.sqrt(x)
    return -out if v < 0.0 else out


@inline
def _sgn(x):
    # 0 at 0 and at nan, as PyTorch's sgn
    return 1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0)


@inline
def i1_slope(x, out):
    """I1'(x) = I0(x) - I1(x) / x (out = I1(x)), 1/2 where |x| <= eps: PyTorch's i1
    backward (and I0's second derivative)."""
    if abs(x) <= _DBL_EPS:
        return 0.5
    return i0_scalar(x) - out * (1.0 / x)


@inline
def i1e_slope(x, out):
    """d/dx e^-|x| I1(x) = i0e(x) - i1e(x) (sgn x + 1/x) (out = i1e(x)), 1/2 where
    |x| <= eps: PyTorch's i1e backward."""
    if abs(x) <= _DBL_EPS:
        return 0.5
    return i0e_scalar(x) - out * (_sgn(x) + 1.0 / x)


@inline
def i1_curvature_series(x):
    """I1''(x) = sum over k >= 1 of k (2k + 1) / 2 (x/2)**(2k-1) / (k! (k+1)!), for |x| < 1
    (the closed form I1 - I0/x + 2 I1/x**2 cancels near 0)."""
    h = 0.5 * x
    q = h * h
    term = h / 2.0          # (x/2)**(2k-1) / (k! (k+1)!) at k = 1
    total = 1.5 * term
    for k in range(2, 12):
        term *= q / (k * (k + 1.0))
        total += 0.5 * k * (2.0 * k + 1.0) * term
    return total


@inline
def i1_d2_scalar(x):
    if abs(x) < 1.0:
        return i1_curvature_series(x)
    out = i1_scalar(x)
    return out - i1_slope(x, out) / x + out / (x * x)


@inline
def i1e_d2_scalar(x):
    # e^-|x| (I1'' - 2 sgn(x) I1' + I1): at 0 it jumps from 1 to -1 (0 at 0, sgn's value)
    out = i1e_scalar(x)
    s = _sgn(x)
    if abs(x) < 1.0:
        scaled_slope = i0e_scalar(x) - out / x if x != 0.0 else 0.5
        return math.exp(-abs(x)) * i1_curvature_series(x) - 2.0 * s * scaled_slope + out
    e0 = i0e_scalar(x)
    slope = e0 - out * (s + 1.0 / x)
    return (out - s * e0) - slope * (s + 1.0 / x) + out / (x * x)


# --- i0: I0(x); gradient I1(x) -----------------------------------------------------------------
@inline
def i0_fwd(x0, x1, x2, c, p0, p1):
    return i0_scalar(x0)


@inline
def i0_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * i1_scalar(x0)


@inline
def i0_d2(x0, out, c, p0, p1):
    return i1_slope(x0, i1_scalar(x0))


def i0_graph(F, g, x0, x1, out, c):
    return F.mul(g, F.i1(x0)), None


I0 = declare(117, "I0Backward0", family=ELEMENTWISE, reads=READS_X0, forward=i0_fwd,
             vjp0=i0_vjp, d2=i0_d2, graph=i0_graph)
i0_array = _special_array(4)


# --- i0e: e^-|x| I0(x); gradient i1e(x) - sgn(x) i0e(x) ------------------------------------------
@inline
def i0e_fwd(x0, x1, x2, c, p0, p1):
    return i0e_scalar(x0)


@inline
def i0e_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * (i1e_scalar(x0) - _sgn(x0) * out)


@inline
def i0e_d2(x0, out, c, p0, p1):
    s = _sgn(x0)
    e1 = i1e_scalar(x0)
    return i1e_slope(x0, e1) - s * (e1 - s * out)


def i0e_graph(F, g, x0, x1, out, c):
    return F.mul(g, F.sub(F.i1e(x0), F.mul(F.sign(x0), out))), None


I0E = declare(118, "SpecialI0EBackward0", family=ELEMENTWISE, reads=READS_X0 | READS_OUT,
              forward=i0e_fwd, vjp0=i0e_vjp, d2=i0e_d2, graph=i0e_graph)
i0e_array = _special_array(5)


# --- i1: I1(x); gradient I0(x) - I1(x) / x ------------------------------------------------------
@inline
def i1_fwd(x0, x1, x2, c, p0, p1):
    return i1_scalar(x0)


@inline
def i1_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * i1_slope(x0, out)


@inline
def i1_d2(x0, out, c, p0, p1):
    return i1_d2_scalar(x0)


# Below this |x| the create_graph rules of i1 and i1e take I1'(x) from its series: the closed
# form I0(x) - I1(x)/x is accurate, but its derivative cancels (at x = 1e-14 a hessian through
# it was 6e-5 where the true value is 4e-15).
_I1_SERIES_BELOW = 0.01


def _i1_slope_near_zero(F, x0):
    """(|x0| < 0.01, I1'(x0) by its series there (0 elsewhere), x0 with 1 there): the series
    1/2 + 3x^2/16 + 5x^4/384 + 7x^6/18432 (next term below 1e-21 of the first there)."""
    small = F._compare(np.less, F.abs(x0), _I1_SERIES_BELOW)
    xs = F.where(small, x0, 0.0)
    x2 = F.mul(xs, xs)
    series = F.add(F.mul(F.add(F.mul(F.add(F.mul(x2, 7.0 / 18432.0), 5.0 / 384.0), x2),
                               3.0 / 16.0), x2), 0.5)
    return small, xs, series, F.where(small, 1.0, x0)


def i1_graph(F, g, x0, x1, out, c):
    small, _, series, safe = _i1_slope_near_zero(F, x0)
    slope = F.sub(F.i0(safe), F.mul(F.i1(safe), F.reciprocal(safe)))
    return F.mul(g, F.where(small, series, slope)), None


I1 = declare(119, "SpecialI1Backward0", family=ELEMENTWISE, reads=READS_X0 | READS_OUT,
             forward=i1_fwd, vjp0=i1_vjp, d2=i1_d2, graph=i1_graph)
i1_array = _special_array(6)


# --- i1e: e^-|x| I1(x); gradient i0e(x) - i1e(x) (sgn x + 1/x) -----------------------------------
@inline
def i1e_fwd(x0, x1, x2, c, p0, p1):
    return i1e_scalar(x0)


@inline
def i1e_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * i1e_slope(x0, out)


@inline
def i1e_d2(x0, out, c, p0, p1):
    return i1e_d2_scalar(x0)


def i1e_graph(F, g, x0, x1, out, c):
    # i1e'(x) = e^-|x| (I1'(x) - sgn(x) I1(x)); near 0 with I1' from its series
    small, xs, series, safe = _i1_slope_near_zero(F, x0)
    near = F.mul(F.exp(F.neg(F.abs(xs))), F.sub(series, F.mul(F.sign(xs), F.i1(xs))))
    slope = F.sub(F.i0e(safe), F.mul(F.i1e(safe), F.add(F.sign(safe), F.reciprocal(safe))))
    return F.mul(g, F.where(small, near, slope)), None


I1E = declare(120, "SpecialI1EBackward0", family=ELEMENTWISE, reads=READS_X0 | READS_OUT,
              forward=i1e_fwd, vjp0=i1e_vjp, d2=i1e_d2, graph=i1e_graph)
i1e_array = _special_array(7)

constants(globals())
