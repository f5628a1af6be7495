"""The op table: every differentiable op, declared once.

A tape record is one row of int64 columns ``op, a0, a1, voff, size, ip`` and one float64
column ``fp``:

* ``a0``/``a1`` -- the records that produced the inputs (-1: none);
* ``voff``/``size`` -- where the output value lives in the tape's value arena;
* ``ip`` -- an offset into the tape's int side array ``aux`` (shapes, indices, extra inputs)
  or into its float side array ``faux``;
* ``fp`` -- a scalar operand (``x + 2.0`` keeps the 2.0 here).

For each op this file declares, side by side: its opcode (append-only: saved tapes store
codes), its PyTorch ``grad_fn`` name, which saved values its backward reads, and its compiled
backward, forward and tangent (forward-mode) rules. ``sweep``, ``forward`` and ``tangent``
dispatch over the opcodes; because numba's on-disk cache only notices edits in the file that
defines the cached function, every rule the kernels inline lives here, in this one file.

Kernel vocabulary: ``g`` is the incoming gradient, ``x0``/``x1`` the input values, ``out``
the op's own value, ``gx0``/``gx1`` the input gradients (accumulated with ``+=``), ``t0``/
``t1``/``tout`` the offsets of the input and output tangents in the tangent arena.
"""
import numba
import numpy as np

from . import _blas
from ._config import inline, kernel, parallel_kernel, prange

# ---------------------------------------------------------------------------------------------
# Declarations
# ---------------------------------------------------------------------------------------------
READS_X0, READS_X1, READS_OUT = 1, 2, 4


class OpInfo:
    """Static facts about an opcode, used by the Python side of the engine."""

    __slots__ = ("code", "name", "reads", "frees", "variants")

    def __init__(self, code, name, reads, frees, variants):
        self.code, self.name, self.reads, self.frees = code, name, reads, frees
        self.variants = variants


OPS = {}


def declare(code, name, reads=0, frees=None, variants=None):
    """Register an opcode.

    ``name`` is the PyTorch grad_fn class name; ``variants`` maps a variant number (stored as
    ``aux[ip]``) to a name when one opcode stands for several PyTorch nodes (getitem is a
    ``SelectBackward0`` or a ``SliceBackward0`` ...). ``frees``: whether PyTorch's node keeps
    saved tensors, i.e. whether a second backward through it without ``retain_graph`` fails;
    it defaults to "the backward reads a saved value".
    """
    if code in OPS:
        raise ValueError(f"opcode {code} declared twice")
    OPS[code] = OpInfo(code, name, reads, bool(reads) if frees is None else frees, variants)
    return code


# Records that only bring a value onto the tape (not shown as grad_fn nodes).
LEAF = declare(0, "AccumulateGrad")          # a leaf that requires grad; value copied in
CONST = declare(1, "Constant")               # a value that needs no gradient
EXTERN = declare(2, "Extern")                # a tensor recorded on an older tape

# Arithmetic.  Broadcasting never reaches these rules: the recorder expands operands to the
# output shape first with a hidden GATHER, whose backward is the reducing sum.
ADD = declare(10, "AddBackward0")
ADD_S = declare(11, "AddBackward0")
SUB = declare(12, "SubBackward0")
SUB_S = declare(13, "SubBackward0")
RSUB_S = declare(14, "RsubBackward1")
MUL = declare(15, "MulBackward0", READS_X0 | READS_X1)
MUL_S = declare(16, "MulBackward0", frees=True)
DIV = declare(17, "DivBackward0", READS_X0 | READS_X1)
DIV_S = declare(18, "DivBackward0", frees=True)
NEG = declare(19, "NegBackward0")
POW = declare(20, "PowBackward1", READS_X0 | READS_X1 | READS_OUT)
POW_S = declare(21, "PowBackward0", READS_X0)
RPOW_S = declare(22, "PowBackward2", READS_OUT)
RECIPROCAL = declare(23, "ReciprocalBackward0", READS_OUT)

# Elementwise functions.
EXP = declare(30, "ExpBackward0", READS_OUT)
LOG = declare(31, "LogBackward0", READS_X0)
LOG1P = declare(32, "Log1PBackward0", READS_X0)
EXPM1 = declare(33, "Expm1Backward0", READS_OUT)
SQRT = declare(34, "SqrtBackward0", READS_OUT)
ABS = declare(35, "AbsBackward0", READS_X0)
SIN = declare(36, "SinBackward0", READS_X0)
COS = declare(37, "CosBackward0", READS_X0)
TAN = declare(38, "TanBackward0", READS_OUT)
TANH = declare(39, "TanhBackward0", READS_OUT)
SIGMOID = declare(40, "SigmoidBackward0", READS_OUT)
RELU = declare(41, "ReluBackward0", READS_OUT)
SOFTPLUS = declare(42, "SoftplusBackward0", READS_X0)
CLAMP = declare(43, "ClampBackward1", READS_X0)
MAXIMUM = declare(44, "MaximumBackward0", READS_X0 | READS_X1)
MINIMUM = declare(45, "MinimumBackward0", READS_X0 | READS_X1)
WHERE = declare(46, "WhereBackward0", frees=True)
# x.clamp_min(lo) / x.clamp_max(hi): PyTorch's own nodes; same rule and faux layout as CLAMP
CLAMP_MIN = declare(47, "ClampMinBackward0", READS_X0)
CLAMP_MAX = declare(48, "ClampMaxBackward0", READS_X0)

# Reductions over an (outer, reduced, inner) view of the input: aux[ip:ip+3] = O, R, I.
SUM = declare(60, "SumBackward0")
SUM_DIM = declare(61, "SumBackward1")
MEAN = declare(62, "MeanBackward0")
MEAN_DIM = declare(63, "MeanBackward1")
PROD = declare(64, "ProdBackward0", READS_X0 | READS_OUT)
PROD_DIM = declare(65, "ProdBackward1", READS_X0 | READS_OUT)
MAX = declare(66, "MaxBackward1", READS_X0 | READS_OUT)
MIN = declare(67, "MinBackward1", READS_X0 | READS_OUT)
AMAX = declare(68, "AmaxBackward0", READS_X0 | READS_OUT)
AMIN = declare(69, "AminBackward0", READS_X0 | READS_OUT)
MAX_DIM = declare(70, "MaxBackward0", frees=True)   # routes to the argmax kept in aux
MIN_DIM = declare(71, "MinBackward0", frees=True)
VAR = declare(72, "VarBackward0", READS_X0)
STD = declare(73, "StdBackward0", READS_X0 | READS_OUT)
LOGSUMEXP = declare(74, "LogsumexpBackward0", READS_X0 | READS_OUT)
SOFTMAX = declare(75, "SoftmaxBackward0", READS_OUT)
LOG_SOFTMAX = declare(76, "LogSoftmaxBackward0", READS_OUT)
NORM = declare(77, "LinalgVectorNormBackward0", READS_X0 | READS_OUT)

# Linear algebra: aux[ip:ip+5] = variant, B, M, K, N for (B,M,K) @ (B,K,N).
MATMUL = declare(90, "MmBackward0", READS_X0 | READS_X1, variants={
    0: "MmBackward0", 1: "DotBackward0", 2: "MvBackward0", 3: "SqueezeBackward4",
    4: "UnsafeViewBackward0", 5: "CloneBackward0", 6: "TransposeBackward0"})

# Structure.  GATHER is every op that picks input elements: out[k] = x[aux[ip+2+k]].
_GATHER_NAMES = {
    0: "Expand", 1: "ExpandBackward0", 2: "SelectBackward0", 3: "SliceBackward0",
    4: "IndexBackward0", 5: "PermuteBackward0", 6: "TransposeBackward0", 7: "TBackward0",
    8: "AliasBackward0", 9: "UnsqueezeBackward0", 10: "SqueezeBackward0",
    11: "SqueezeBackward1", 12: "ViewBackward0", 13: "CloneBackward0", 14: "CopySlices",
    15: "SqueezeBackward2", 16: "UnsafeViewBackward0", 17: "ReshapeAliasBackward0",
}
GATHER = declare(100, "IndexBackward0", variants=_GATHER_NAMES)
# RESHAPE keeps the flat order: out = x.  aux[ip] = variant (names as for GATHER).
RESHAPE = declare(101, "ViewBackward0", variants=_GATHER_NAMES)
# CAT/STACK: aux[ip] = k inputs, then k (record, offset-in-output-block, block-size) rows,
# then O (outer count) and the output's block length.
CAT = declare(102, "CatBackward0")
STACK = declare(103, "StackBackward0")
# A hidden expansion for implicit broadcasting: same rule as GATHER, no grad_fn of its own.
BCAST = declare(104, "Broadcast")
# The transpose of GATHER: out[aux[ip+2+k]] += x[k] for k < size of x; aux[ip+1] = size of x.
# Differentiable backward passes (create_graph=True) use it to undo a gather.
SCATTER = declare(105, "IndexAddBackward0")
# Implicit broadcasting of a binary op's operand, described by strides instead of an index
# table: aux[ip] = ndim, then the output shape, then the source stride of each output dim
# (0 where the operand is broadcast).  Same meaning as BCAST, without O(n) side data.
EXPAND_S = declare(106, "Broadcast")

# Data records, recorded only while ``tapegrad.compile`` traces a function, so that replay
# recomputes them: comparisons (aux-free; ip = 0 lt, 1 le, 2 gt, 3 ge, 4 eq, 5 ne; a1 = -1
# compares with fp) and guards (a Python read of a value: replay checks that a0's value still
# equals faux[ip:ip+size]).  Neither carries a gradient.
CMP = declare(110, "Comparison")
GUARD = declare(111, "Guard")

HIDDEN = frozenset({LEAF, CONST, EXTERN, BCAST, EXPAND_S, CMP, GUARD})
NO_GRADIENT = frozenset({CONST, CMP, GUARD})

# ---------------------------------------------------------------------------------------------
# Backward rules (compiled, inlined into the sweep)
# ---------------------------------------------------------------------------------------------


@inline
def _seg(arr, off, n):
    return arr[off:off + n]


@inline
def _row_broadcast(strides, nd, inner):
    """Whether an expand's source strides make it a bias broadcast over rows: one contiguous
    run of ``inner`` values repeated (every stride 0 but the last, which is 1)."""
    if inner == 0 or strides[nd - 1] != 1:
        return False
    for d in range(nd - 1):
        if strides[d] != 0:
            return False
    return True


@inline
def add_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need, beta0, beta1,
            sign):
    # (sub_bwd with sign -1; beta 0: the gradient is written, its first contribution)
    n = size[r]
    g = _seg(grads, goff[r], n)
    if need[a0[r]]:
        gx0 = _seg(grads, goff[a0[r]], n)
        if beta0 == 0.0:
            gx0[:] = g
        else:
            for i in range(n):
                gx0[i] += g[i]
    if a1[r] >= 0 and need[a1[r]]:
        gx1 = _seg(grads, goff[a1[r]], n)
        if beta1 == 0.0:
            for i in range(n):
                gx1[i] = sign * g[i]
        elif sign > 0.0:
            for i in range(n):
                gx1[i] += g[i]
        else:
            for i in range(n):
                gx1[i] -= g[i]


@inline
def neg_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    n = size[r]
    g = _seg(grads, goff[r], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    for i in range(n):
        gx0[i] -= g[i]


@inline
def mul_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    n = size[r]
    g = _seg(grads, goff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    x1 = _seg(vals, voff[a1[r]], n)
    if need[a0[r]]:
        gx0 = _seg(grads, goff[a0[r]], n)
        for i in range(n):
            gx0[i] += g[i] * x1[i]
    if need[a1[r]]:
        gx1 = _seg(grads, goff[a1[r]], n)
        for i in range(n):
            gx1[i] += g[i] * x0[i]


@inline
def mul_s_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    n = size[r]
    c = fp[r]
    g = _seg(grads, goff[r], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    for i in range(n):
        gx0[i] += g[i] * c


@inline
def div_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    n = size[r]
    g = _seg(grads, goff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    x1 = _seg(vals, voff[a1[r]], n)
    if need[a0[r]]:
        gx0 = _seg(grads, goff[a0[r]], n)
        for i in range(n):
            gx0[i] += g[i] / x1[i]
    if need[a1[r]]:
        # d(x0/x1)/dx1 = -x0/x1**2, written so that it matches PyTorch's rounding
        gx1 = _seg(grads, goff[a1[r]], n)
        for i in range(n):
            gx1[i] += -g[i] * ((x0[i] / x1[i]) / x1[i])


@inline
def div_s_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    n = size[r]
    c = fp[r]
    g = _seg(grads, goff[r], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    for i in range(n):
        gx0[i] += g[i] / c


@inline
def pow_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    n = size[r]
    g = _seg(grads, goff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    x1 = _seg(vals, voff[a1[r]], n)
    out = _seg(vals, voff[r], n)
    if need[a0[r]]:
        gx0 = _seg(grads, goff[a0[r]], n)
        for i in range(n):
            # PyTorch masks the exponent-0 case so that 0**0 has gradient 0, not nan
            if x1[i] != 0.0:
                gx0[i] += g[i] * x1[i] * x0[i] ** (x1[i] - 1.0)
    if need[a1[r]]:
        gx1 = _seg(grads, goff[a1[r]], n)
        for i in range(n):
            # base 0 with exponent >= 0: the limit of out*log(base) is 0
            if not (x0[i] == 0.0 and x1[i] >= 0.0):
                gx1[i] += g[i] * out[i] * np.log(x0[i])


@inline
def pow_s_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    n = size[r]
    c = fp[r]
    if c == 0.0:
        return
    g = _seg(grads, goff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    for i in range(n):
        gx0[i] += g[i] * c * x0[i] ** (c - 1.0)


@inline
def rpow_s_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    n = size[r]
    base = fp[r]
    g = _seg(grads, goff[r], n)
    out = _seg(vals, voff[r], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    if base == 0.0:
        # 0**x: PyTorch gives gradient 0 where x >= 0
        x0 = _seg(vals, voff[a0[r]], n)
        for i in range(n):
            if x0[i] < 0.0:
                gx0[i] += g[i] * out[i] * np.log(base)
        return
    lb = np.log(base)
    for i in range(n):
        gx0[i] += g[i] * out[i] * lb


@inline
def reciprocal_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    n = size[r]
    g = _seg(grads, goff[r], n)
    out = _seg(vals, voff[r], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    for i in range(n):
        gx0[i] += -g[i] * (out[i] * out[i])


# Unary rules reuse the saved output where the math allows: numba's transcendental
# functions are scalar libm calls, NumPy's are vectorised, and the forward already paid.
# One rule serves them all: `kind` picks the local derivative, the loop stays tight.
@inline
def unary_bwd(o, r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    n = size[r]
    g = _seg(grads, goff[r], n)
    out = _seg(vals, voff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    if o == EXP:
        for i in range(n):
            gx0[i] += g[i] * out[i]
    elif o == LOG:
        for i in range(n):
            gx0[i] += g[i] / x0[i]
    elif o == LOG1P:
        for i in range(n):
            gx0[i] += g[i] / (x0[i] + 1.0)
    elif o == EXPM1:
        for i in range(n):
            gx0[i] += g[i] * (out[i] + 1.0)
    elif o == SQRT:
        for i in range(n):
            gx0[i] += g[i] / (2.0 * out[i])
    elif o == ABS:
        # sgn: 0 at 0 and at nan, as PyTorch's
        for i in range(n):
            if x0[i] > 0.0:
                gx0[i] += g[i]
            elif x0[i] < 0.0:
                gx0[i] -= g[i]
    elif o == SIN:
        for i in range(n):
            gx0[i] += g[i] * np.cos(x0[i])
    elif o == COS:
        for i in range(n):
            gx0[i] -= g[i] * np.sin(x0[i])
    elif o == TAN:
        # tan' = 1 + tan**2 reuses the saved output
        for i in range(n):
            gx0[i] += g[i] * (1.0 + out[i] * out[i])
    elif o == TANH:
        # tanh' = 1 - tanh**2 reuses the saved output
        for i in range(n):
            gx0[i] += g[i] * (1.0 - out[i] * out[i])
    elif o == SIGMOID:
        for i in range(n):
            gx0[i] += g[i] * ((1.0 - out[i]) * out[i])


@inline
def relu_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need, beta0):
    n = size[r]
    g = _seg(grads, goff[r], n)
    out = _seg(vals, voff[r], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    # PyTorch zeroes where the result is <= 0: a nan result passes the gradient
    if beta0 == 0.0:
        for i in range(n):
            gx0[i] = 0.0 if out[i] <= 0.0 else g[i]
    else:
        for i in range(n):
            if not (out[i] <= 0.0):
                gx0[i] += g[i]


@inline
def softplus_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    n = size[r]
    beta = faux[ip[r]]
    threshold = faux[ip[r] + 1]
    g = _seg(grads, goff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    for i in range(n):
        bx = beta * x0[i]
        if bx > threshold:
            gx0[i] += g[i]
        else:
            z = np.exp(bx)
            gx0[i] += g[i] * z / (z + 1.0)


@inline
def clamp_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    n = size[r]
    lo = faux[ip[r]]
    hi = faux[ip[r] + 1]
    g = _seg(grads, goff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    for i in range(n):
        # PyTorch passes the gradient where lo <= x <= hi: the bounds pass it, nan does not
        if x0[i] >= lo and x0[i] <= hi:
            gx0[i] += g[i]


@inline
def maximum_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    # ties split the gradient in halves, as PyTorch does; sign flips it into minimum
    n = size[r]
    sign = fp[r]
    g = _seg(grads, goff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    x1 = _seg(vals, voff[a1[r]], n)
    n0 = need[a0[r]]
    n1 = need[a1[r]]
    gx0 = _seg(grads, goff[a0[r]], n)
    gx1 = _seg(grads, goff[a1[r]], n)
    for i in range(n):
        u = x0[i]
        v = x1[i]
        # compared, not subtracted: inf - inf would make equal infinities look like nan
        if u == v:
            if n0:
                gx0[i] += 0.5 * g[i]
            if n1:
                gx1[i] += 0.5 * g[i]
        elif u != u or v != v:
            # a nan operand: the nan output takes the gradient from both sides
            if n0:
                gx0[i] += g[i]
            if n1:
                gx1[i] += g[i]
        elif (u > v) == (sign > 0.0):
            if n0:
                gx0[i] += g[i]
        elif n1:
            gx1[i] += g[i]


@inline
def where_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    # the condition is a CONST record of 0/1 values named by ip
    n = size[r]
    g = _seg(grads, goff[r], n)
    cond = _seg(vals, voff[ip[r]], n)
    n0 = a0[r] >= 0 and need[a0[r]]
    n1 = a1[r] >= 0 and need[a1[r]]
    for i in range(n):
        if cond[i] != 0.0:
            if n0:
                grads[goff[a0[r]] + i] += g[i]
        elif n1:
            grads[goff[a1[r]] + i] += g[i]


# --- reductions: input viewed as (O, R, I), output as (O, I) ---------------------------------
@inline
def sum_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    # MEAN shares this rule with fp = 1/R; SUM has fp = 1
    o_n, r_n, i_n = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
    scale = fp[r]
    g = _seg(grads, goff[r], o_n * i_n)
    gx0 = _seg(grads, goff[a0[r]], o_n * r_n * i_n)
    if i_n == 1:
        for o in range(o_n):
            go = g[o] * scale
            gx0[o * r_n:(o + 1) * r_n] += go
        return
    for o in range(o_n):
        gb = g[o * i_n:(o + 1) * i_n]
        for k in range(r_n):
            base = (o * r_n + k) * i_n
            gx0[base:base + i_n] += gb * scale


@inline
def prod_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    # PyTorch's rule, zeros and all.  aux[ip+3] = mode: 0 over a dim, 1 over everything,
    # 2 a 0-d input (the gradient passes).  Without a zero anywhere in the input: g*out/x.
    # Otherwise each entry gets the product of the others (prefix * suffix products), except
    # that the full product of an input with several zeros has gradient 0.
    o_n, r_n, i_n = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
    mode = aux[ip[r] + 3]
    n_in = o_n * r_n * i_n
    g = _seg(grads, goff[r], o_n * i_n)
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], n_in)
    gx0 = _seg(grads, goff[a0[r]], n_in)
    if mode == 2:
        for p in range(n_in):
            gx0[p] += g[p]
        return
    zeros = 0
    for p in range(n_in):
        if x0[p] == 0.0:
            zeros += 1
    if zeros == 0:
        for o in range(o_n):
            for k in range(r_n):
                for i in range(i_n):
                    j = o * i_n + i
                    p = (o * r_n + k) * i_n + i
                    gx0[p] += g[j] * (out[j] / x0[p])
        return
    if mode == 1 and zeros > 1:
        return
    prefix = np.empty(r_n)
    for o in range(o_n):
        for i in range(i_n):
            j = o * i_n + i
            acc = 1.0
            for k in range(r_n):
                prefix[k] = acc
                acc *= x0[(o * r_n + k) * i_n + i]
            acc = 1.0
            for k in range(r_n - 1, -1, -1):
                p = (o * r_n + k) * i_n + i
                gx0[p] += g[j] * (prefix[k] * acc)
                acc *= x0[p]


@inline
def extreme_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    # max()/min(): the gradient is split evenly among the entries equal to the result (the
    # nan entries when the result is nan)
    o_n, r_n, i_n = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
    g = _seg(grads, goff[r], o_n * i_n)
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
    gx0 = _seg(grads, goff[a0[r]], o_n * r_n * i_n)
    for o in range(o_n):
        for i in range(i_n):
            j = o * i_n + i
            ties = 0
            for k in range(r_n):
                v = x0[(o * r_n + k) * i_n + i]
                if v == out[j] or (v != v and out[j] != out[j]):
                    ties += 1
            if ties == 0:
                continue
            share = g[j] / ties
            for k in range(r_n):
                p = (o * r_n + k) * i_n + i
                v = x0[p]
                if v == out[j] or (v != v and out[j] != out[j]):
                    gx0[p] += share


@inline
def amax_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    # amax/amin: g / (number of entries equal to the result), times that mask.  Unlike
    # max()/min() a nan result matches nothing, so its slice gets g/0 * 0 = nan, as in PyTorch.
    o_n, r_n, i_n = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
    g = _seg(grads, goff[r], o_n * i_n)
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
    gx0 = _seg(grads, goff[a0[r]], o_n * r_n * i_n)
    for o in range(o_n):
        for i in range(i_n):
            j = o * i_n + i
            ties = 0
            for k in range(r_n):
                if x0[(o * r_n + k) * i_n + i] == out[j]:
                    ties += 1
            share = g[j] / ties if ties else g[j] * np.nan
            for k in range(r_n):
                p = (o * r_n + k) * i_n + i
                gx0[p] += share * (1.0 if x0[p] == out[j] else 0.0)


@inline
def select_dim_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    # max(dim)/min(dim): all of the gradient goes to the index the forward returned
    o_n, r_n, i_n = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
    g = _seg(grads, goff[r], o_n * i_n)
    gx0 = _seg(grads, goff[a0[r]], o_n * r_n * i_n)
    idx = aux[ip[r] + 3: ip[r] + 3 + o_n * i_n]
    for o in range(o_n):
        for i in range(i_n):
            j = o * i_n + i
            gx0[(o * r_n + idx[j]) * i_n + i] += g[j]


@inline
def var_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    # fp = 1 / (R - correction) (inf when R == correction); aux[ip+3] = is_std,
    # aux[ip+4] = whether the reduction is over everything (dim=None or a 0-d input).
    # STD first divides by 2*std, with 0 where std is 0.  As in PyTorch, a full reduction
    # with R <= correction has gradient inf (nan where x equals the mean), not 2/(R-c).
    o_n, r_n, i_n = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
    is_std = aux[ip[r] + 3]
    full = aux[ip[r] + 4]
    scale = 2.0 * fp[r]
    no_dof = full and (fp[r] < 0.0 or fp[r] == np.inf)
    g = _seg(grads, goff[r], o_n * i_n)
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
    gx0 = _seg(grads, goff[a0[r]], o_n * r_n * i_n)
    for o in range(o_n):
        for i in range(i_n):
            j = o * i_n + i
            mean = 0.0
            for k in range(r_n):
                mean += x0[(o * r_n + k) * i_n + i]
            mean /= r_n
            gj = g[j]
            if is_std:
                gj = gj / (out[j] * 2.0) if out[j] != 0.0 else 0.0
            for k in range(r_n):
                p = (o * r_n + k) * i_n + i
                if no_dof:
                    gx0[p] += gj * (np.nan if x0[p] == mean else np.inf)
                else:
                    gx0[p] += scale * gj * (x0[p] - mean)


@inline
def logsumexp_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    o_n, r_n, i_n = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
    g = _seg(grads, goff[r], o_n * i_n)
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
    gx0 = _seg(grads, goff[a0[r]], o_n * r_n * i_n)
    for o in range(o_n):
        for k in range(r_n):
            for i in range(i_n):
                p = (o * r_n + k) * i_n + i
                j = o * i_n + i
                gx0[p] += g[j] * np.exp(x0[p] - out[j])


@inline
def softmax_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    # gx = out * (g - sum(g * out)) along the reduced axis
    o_n, r_n, i_n = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
    n = o_n * r_n * i_n
    g = _seg(grads, goff[r], n)
    out = _seg(vals, voff[r], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    for o in range(o_n):
        for i in range(i_n):
            dot = 0.0
            for k in range(r_n):
                p = (o * r_n + k) * i_n + i
                dot += g[p] * out[p]
            for k in range(r_n):
                p = (o * r_n + k) * i_n + i
                gx0[p] += out[p] * (g[p] - dot)


@inline
def log_softmax_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    # gx = g - exp(out) * sum(g) along the reduced axis
    o_n, r_n, i_n = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
    n = o_n * r_n * i_n
    g = _seg(grads, goff[r], n)
    out = _seg(vals, voff[r], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    for o in range(o_n):
        for i in range(i_n):
            total = 0.0
            for k in range(r_n):
                total += g[(o * r_n + k) * i_n + i]
            for k in range(r_n):
                p = (o * r_n + k) * i_n + i
                gx0[p] += g[p] - np.exp(out[p]) * total


@inline
def norm_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    # p-norm: d||x||/dx = sgn(x) |x|^(p-1) / ||x||^(p-1), in PyTorch's spelling per range of
    # p (so that zeros, infinities and nan come out as PyTorch's): a zero norm gets gradient
    # 0 for p >= 1, a zero entry gets 0 for p < 1; sgn is 0 at 0 and at nan.
    o_n, r_n, i_n = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
    p_ord = fp[r]
    g = _seg(grads, goff[r], o_n * i_n)
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
    gx0 = _seg(grads, goff[a0[r]], o_n * r_n * i_n)
    for o in range(o_n):
        for k in range(r_n):
            for i in range(i_n):
                q = (o * r_n + k) * i_n + i
                j = o * i_n + i
                x = x0[q]
                sgn = 1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0)
                if p_ord == 2.0:
                    if out[j] != 0.0:
                        gx0[q] += g[j] * (x / out[j])
                elif p_ord == 1.0:
                    gx0[q] += sgn * g[j]
                elif p_ord == np.inf or p_ord == -np.inf:
                    # like amax/amin of |x|: split among the ties
                    ties = 0
                    for m in range(r_n):
                        if abs(x0[(o * r_n + m) * i_n + i]) == out[j]:
                            ties += 1
                    if abs(x) == out[j]:
                        gx0[q] += sgn * (g[j] / ties)
                elif p_ord < 1.0:
                    scaled = 0.0 if x == 0.0 else sgn * abs(x) ** (p_ord - 1.0)
                    gx0[q] += scaled * g[j] * out[j] ** (1.0 - p_ord)
                else:
                    scale = 0.0 if out[j] == 0.0 else g[j] / out[j] ** (p_ord - 1.0)
                    if p_ord < 2.0:
                        gx0[q] += sgn * abs(x) ** (p_ord - 1.0) * scale
                    else:
                        gx0[q] += x * abs(x) ** (p_ord - 2.0) * scale


# --- linear algebra ----------------------------------------------------------------------------
# BLAS dgemm with numba's own helper's signature (the one np.dot calls), bound by _blas to
# scipy's OpenBLAS or to MKL: C = alpha op(A) op(B) + beta C, column-major.  With beta = 1 a
# matrix product adds straight into the gradient arena; np.dot would make a temporary (1.6 MB
# for W3's first layer) and then a second pass to add it.  The matrices go by address (an
# integer): an operand may be an argument's own array rather than a copy in the arena (see
# ``value_at``).  Declared here rather than taken from numba.np.linalg so that importing
# tapegrad does not import scipy.linalg (170 ms); numba's helper loads scipy's BLAS on its
# first call.
_DGEMM = numba.types.ExternalFunction(_blas.SYMBOL, _blas.XXGEMM_BY_ADDRESS)
_KIND, _N, _T = ord("d"), ord("N"), ord("T")


@inline
def value_at(vals, voff, ext, s, offset):
    """The address of record s's value, ``offset`` values in.  ``ext[s]``, where nonzero, is
    the address of the array a replay reads argument s from in place (only matrix products
    read such a record, and only through this); otherwise the value is in the arena.  A
    kernel's caller keeps both alive."""
    if s < ext.size and ext[s] != 0:
        return ext[s] + 8 * offset
    return vals.ctypes.data + 8 * (voff[s] + offset)


@inline
def gemm(c, a, b, m, k, n, trans_a, trans_b, beta):
    """Row-major ``c (m, n) = op(a) @ op(b) + beta * c``: c a 1-D arena slice, a and b the
    operands' addresses; op transposes where trans_a / trans_b: then a is stored (k, m), b
    is stored (n, k)."""
    if m == 0 or n == 0:
        return
    if k == 0:
        if beta == 0.0:
            c[:m * n] = 0.0
        return
    scalars = np.empty(2)
    scalars[0], scalars[1] = 1.0, beta
    # row-major c is column-major c.T = op(b).T @ op(a).T: swap the operands
    lda = m if trans_a else k
    ldb = k if trans_b else n
    _DGEMM(_KIND, _T if trans_b else _N, _T if trans_a else _N, n, m, k, scalars[0:].ctypes,
           b, ldb, a, lda, scalars[1:].ctypes, c.ctypes.data, n)


@inline
def _first_write(r, a0, a1, goff, size, need, start, fresh):
    """The betas of record r's rule (a matrix product, an elementwise sum or difference, a
    relu) for its two inputs: 0.0 for an input whose gradient it writes instead of adding
    to, when grads[start:fresh], the part of the arena it adds to first, is exactly those
    gradients (one, or both one below the other, as ``plan`` lays them out); (1.0, 1.0),
    and the part is to be cleared, otherwise."""
    s0, s1 = a0[r], a1[r]
    f0 = s0 >= 0 and need[s0] and goff[s0] < fresh
    f1 = s1 >= 0 and need[s1] and goff[s1] < fresh and s1 != s0
    if f0 and f1:
        if (goff[s0] + size[s0] == fresh and goff[s1] + size[s1] == goff[s0]
                and start == goff[s1]):
            return 0.0, 0.0
    elif f0:
        if goff[s0] + size[s0] == fresh and start == goff[s0]:
            return 0.0, 1.0
    elif f1:
        if goff[s1] + size[s1] == fresh and start == goff[s1]:
            return 1.0, 0.0
    return 1.0, 1.0


@inline
def matmul_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
               beta1):
    # beta 0: the operand's gradient is written, not added to (its first contribution)
    b_n, m, k, n = aux[ip[r] + 1], aux[ip[r] + 2], aux[ip[r] + 3], aux[ip[r] + 4]
    for b in range(b_n):
        g = grads.ctypes.data + 8 * (goff[r] + b * m * n)
        if need[a0[r]]:
            # gx0 (m, k) += g (m, n) @ x1.T, x1 stored (k, n)
            gemm(grads[goff[a0[r]] + b * m * k: goff[a0[r]] + (b + 1) * m * k], g,
                 value_at(vals, voff, ext, a1[r], b * k * n), m, n, k, False, True, beta0)
        if need[a1[r]]:
            # gx1 (k, n) += x0.T @ g, x0 stored (m, k)
            gemm(grads[goff[a1[r]] + b * k * n: goff[a1[r]] + (b + 1) * k * n],
                 value_at(vals, voff, ext, a0[r], b * m * k), g, k, m, n, True, False, beta1)


# --- structure ------------------------------------------------------------------------------------
@inline
def gather_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    # aux[ip] = variant, aux[ip+1] = n; scatter-add handles repeated indices
    if not need[a0[r]]:
        return  # a hidden expansion of an operand that takes no gradient
    n = size[r]
    g = _seg(grads, goff[r], n)
    base = goff[a0[r]]
    idx = aux[ip[r] + 2: ip[r] + 2 + n]
    for k in range(n):
        grads[base + idx[k]] += g[k]


@inline
def expand_s_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    # walk the output in order, moving the source position by the strides: gx[src] += g[k]
    n = size[r]
    nd = aux[ip[r]]
    shp = aux[ip[r] + 1: ip[r] + 1 + nd]
    strides = aux[ip[r] + 1 + nd: ip[r] + 1 + 2 * nd]
    g = _seg(grads, goff[r], n)
    gx0 = grads[goff[a0[r]]:]
    if nd == 0:
        if n == 1:
            gx0[0] += g[0]
        return
    # the last axis as one run per step of the walk: a bias broadcast over rows (stride 1)
    # becomes a vector add, one over columns (stride 0) a running sum; per element the
    # additions happen in the same order as a walk one element at a time
    inner = shp[nd - 1]
    step = strides[nd - 1]
    if _row_broadcast(strides, nd, inner):
        # a bias broadcast over rows (every stride 0 but the last): column sums in a
        # local accumulator over a 2-D view, same additions in the same order.  Adding
        # each row into gx0 as an arena slice took 51 us for W3's (256, 256) bias
        # gradient inside the sweep, this 9 us (an explicit 1-D loop into gx0: 34 us).
        rows = g.reshape((n // inner, inner))
        acc = gx0[:inner].copy()
        for k in range(n // inner):
            for i in range(inner):
                acc[i] += rows[k, i]
        gx0[:inner] = acc
        return
    count = np.zeros(nd, dtype=np.int64)
    src = 0
    k = 0
    while k < n:
        if step == 1:
            gx0[src:src + inner] += g[k:k + inner]
        elif step == 0:
            acc = gx0[src]
            for i in range(inner):
                acc += g[k + i]
            gx0[src] = acc
        else:
            for i in range(inner):
                gx0[src + i * step] += g[k + i]
        k += inner
        d = nd - 2
        while d >= 0:
            count[d] += 1
            src += strides[d]
            if count[d] < shp[d]:
                break
            src -= strides[d] * shp[d]
            count[d] = 0
            d -= 1


@inline
def scatter_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    # gx[k] = g[idx[k]]: the gather that this scatter undoes
    n_in = aux[ip[r] + 1]
    base = goff[r]
    gx0 = _seg(grads, goff[a0[r]], n_in)
    idx = aux[ip[r] + 2: ip[r] + 2 + n_in]
    for k in range(n_in):
        gx0[k] += grads[base + idx[k]]


@inline
def reshape_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    n = size[r]
    g = _seg(grads, goff[r], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    for i in range(n):
        gx0[i] += g[i]


@inline
def cat_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need):
    # the output is O blocks; input j owns a run of aux[.. + 2] values inside each block
    k_in = aux[ip[r]]
    rows = ip[r] + 1
    o_n = aux[rows + 3 * k_in]
    block = aux[rows + 3 * k_in + 1]
    g = _seg(grads, goff[r], o_n * block)
    for j in range(k_in):
        src = aux[rows + 3 * j]
        if not need[src]:
            continue
        start = aux[rows + 3 * j + 1]
        width = aux[rows + 3 * j + 2]
        gx = _seg(grads, goff[src], o_n * width)
        for o in range(o_n):
            gx[o * width:(o + 1) * width] += g[o * block + start: o * block + start + width]


# ---------------------------------------------------------------------------------------------
# The sweeps
# ---------------------------------------------------------------------------------------------
@inline
def _touch(s, need, goff, size, top):
    """Lay out record s's gradient just below ``top`` if it is needed and has no place yet."""
    if s >= 0 and need[s] and goff[s] == -2:
        goff[s] = top - size[s]
        return top - size[s]
    return top


@kernel
def plan(op, a0, a1, size, ip, aux, seeds, n_rec, need, goff):
    """Mark the records that lead to a seed and need a gradient; lay out their gradients.

    need[r] = 1 for records on a path from a seed down to a leaf; goff[r] is the offset of
    record r's gradient in the gradient arena.  Returns ``(total, fresh)``: the arena length
    needed, and where the part ``sweep`` clears itself (``[0, fresh)``) ends.

    Two passes: forward, which records depend on a leaf at all (a broadcast copy of a constant
    does not, and its rule must not run: it would write to a gradient that has no place);
    backward, which of those a seed reaches.  Then the layout, from the top of the arena
    down: the seeds (the caller clears and seeds them), then every other gradient in the
    order the sweep first adds to it, so that the sweep can clear each just before it is
    used, when it is about to be in cache anyway, and a matrix product can write its first
    contribution instead of adding it.  A tape of numbers only is laid out in record order
    and cleared by the caller.
    """
    for r in range(n_rec):
        o = op[r]
        dep = 0
        if o == LEAF or o == EXTERN:
            dep = 1
        elif o == CAT or o == STACK:
            k_in = aux[ip[r]]
            for j in range(k_in):
                if need[aux[ip[r] + 1 + 3 * j]]:
                    dep = 1
        elif o != CONST and o != CMP and o != GUARD:
            if (a0[r] >= 0 and need[a0[r]]) or (a1[r] >= 0 and need[a1[r]]):
                dep = 1
        need[r] = dep
    for s in seeds:
        if need[s]:
            need[s] = 3
    for r in range(n_rec - 1, -1, -1):
        if need[r] != 3:
            continue
        o = op[r]
        if o == CAT or o == STACK:
            k_in = aux[ip[r]]
            for j in range(k_in):
                src = aux[ip[r] + 1 + 3 * j]
                if need[src]:
                    need[src] = 3
            continue
        if a0[r] >= 0 and need[a0[r]]:
            need[a0[r]] = 3
        if a1[r] >= 0 and need[a1[r]]:
            need[a1[r]] = 3
    for r in range(n_rec):
        need[r] = 1 if need[r] == 3 else 0
        goff[r] = -1
    # -2: a gradient some rule the sweep runs adds to (every needed record but the seeds)
    for r in range(n_rec):
        if need[r] and not _no_rule(op[r]):
            o = op[r]
            if o == CAT or o == STACK:
                for j in range(aux[ip[r]]):
                    src = aux[ip[r] + 1 + 3 * j]
                    if need[src]:
                        goff[src] = -2
            else:
                if a0[r] >= 0 and need[a0[r]]:
                    goff[a0[r]] = -2
                if a1[r] >= 0 and need[a1[r]]:
                    goff[a1[r]] = -2
    total = 0
    one_element = True
    for r in range(n_rec):
        if need[r]:
            total += size[r]
            one_element = one_element and size[r] == 1
    if one_element:
        # a tape of numbers: record order, all cleared by the caller (a tiny arena; and
        # generated code rolls a loop of records from the strides of this layout)
        total = 0
        for r in range(n_rec):
            if need[r]:
                goff[r] = total
                total += 1
        return total, 0
    top = total
    for s in seeds:
        if need[s] and goff[s] < 0:
            top -= size[s]
            goff[s] = top
    for r in range(n_rec):
        if need[r] and goff[r] == -1:
            # not a seed and no rule adds to it (none such, as need is built): cleared by
            # the caller with the seeds
            top -= size[r]
            goff[r] = top
    fresh = top
    for r in range(n_rec - 1, -1, -1):
        if need[r] and not _no_rule(op[r]):
            o = op[r]
            if o == CAT or o == STACK:
                for j in range(aux[ip[r]]):
                    top = _touch(aux[ip[r] + 1 + 3 * j], need, goff, size, top)
            else:
                top = _touch(a0[r], need, goff, size, top)
                top = _touch(a1[r], need, goff, size, top)
    return total, fresh


@inline
def _no_rule(o):
    """Records the sweep passes over: they have no inputs to send a gradient to."""
    return o <= EXTERN or o == CMP or o == GUARD


@inline
def _touched_start(r, op, a0, a1, goff, ip, aux, need, fresh):
    """The start of the lowest gradient record r's rule adds to (``fresh`` if none)."""
    start = fresh
    o = op[r]
    if o == CAT or o == STACK:
        for j in range(aux[ip[r]]):
            s = aux[ip[r] + 1 + 3 * j]
            if need[s]:
                start = min(start, goff[s])
    else:
        s = a0[r]
        if s >= 0 and need[s]:
            start = min(start, goff[s])
        s = a1[r]
        if s >= 0 and need[s]:
            start = min(start, goff[s])
    return start


@kernel
def sweep(op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, hi, lo,
          fresh):
    """Run the backward rules of records hi-1 down to lo, accumulating into ``grads``.

    ``grads[:fresh]`` is not cleared: ``plan`` laid it out, from the top down, in the order
    the rules first add to it, and each part is cleared here just before (pass 0 for an
    arena cleared beforehand, and for a sweep in pieces).  A matrix product, a sum, a
    difference or a relu writes its first contribution instead (beta = 0): no clearing pass
    at all for the largest gradients (``_first_write``).
    ``ext``: arguments read in place (see ``value_at``; empty: none).
    """
    for r in range(hi - 1, lo - 1, -1):
        if not need[r]:
            continue
        o = op[r]
        if _no_rule(o):
            continue
        beta0 = beta1 = 1.0
        # (fresh stays 0 on a tape of numbers: nothing of this on the per-op path)
        start = _touched_start(r, op, a0, a1, goff, ip, aux, need, fresh) if fresh else 0
        if start < fresh:
            # (the one-element path below always adds: its records are cleared)
            if o == MATMUL or (size[r] > 1 and (o == ADD or o == ADD_S or o == SUB or
                                                o == SUB_S or o == RELU)):
                beta0, beta1 = _first_write(r, a0, a1, goff, size, need, start, fresh)
            if beta0 == 1.0 and beta1 == 1.0:
                grads[start:fresh] = 0.0
            fresh = start
        if size[r] == 1 and o < RELU:
            # One-element records (ODE loops, per-op chains) index the arenas directly: the
            # general rules build array views, which cost refcounting on every record.  The
            # code is written out here because an inlined helper taking the arrays was 5x slower.
            g = grads[goff[r]]
            i0 = a0[r]
            x = vals[voff[i0]]
            c = fp[r]
            if o == ADD or o == SUB:
                if need[i0]:
                    grads[goff[i0]] += g
                i1 = a1[r]
                if need[i1]:
                    grads[goff[i1]] += g if o == ADD else -g
                continue
            elif o == MUL:
                i1 = a1[r]
                if need[i0]:
                    grads[goff[i0]] += g * vals[voff[i1]]
                if need[i1]:
                    grads[goff[i1]] += g * x
                continue
            elif o == ADD_S or o == SUB_S:
                grads[goff[i0]] += g
                continue
            elif o == MUL_S:
                grads[goff[i0]] += g * c
                continue
            elif o == DIV_S:
                grads[goff[i0]] += g / c
                continue
            elif o == RSUB_S or o == NEG:
                grads[goff[i0]] -= g
                continue
            elif o == TANH:
                y = vals[voff[r]]
                grads[goff[i0]] += g * (1.0 - y * y)
                continue
            elif o == SIN:
                grads[goff[i0]] += g * np.cos(x)
                continue
            elif o == EXP:
                grads[goff[i0]] += g * vals[voff[r]]
                continue
        if o == ADD or o == ADD_S:
            add_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need, beta0,
                    beta1, 1.0)
        elif o == SUB or o == SUB_S:
            add_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need, beta0,
                    beta1, -1.0)
        elif o == RSUB_S or o == NEG:
            neg_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == MUL:
            mul_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == MUL_S:
            mul_s_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == DIV:
            div_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == DIV_S:
            div_s_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == POW:
            pow_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == POW_S:
            pow_s_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == RPOW_S:
            rpow_s_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == RECIPROCAL:
            reciprocal_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == EXP or o == LOG or o == LOG1P or o == EXPM1 or o == SQRT or o == ABS or \
                o == SIN or o == COS or o == TAN or o == TANH or o == SIGMOID:
            unary_bwd(o, r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == RELU:
            relu_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need, beta0)
        elif o == SOFTPLUS:
            softplus_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == CLAMP or o == CLAMP_MIN or o == CLAMP_MAX:
            clamp_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == MAXIMUM or o == MINIMUM:
            maximum_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == WHERE:
            where_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == SUM or o == SUM_DIM or o == MEAN or o == MEAN_DIM:
            sum_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == PROD or o == PROD_DIM:
            prod_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == MAX or o == MIN:
            extreme_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == AMAX or o == AMIN:
            amax_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == MAX_DIM or o == MIN_DIM:
            select_dim_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == VAR or o == STD:
            var_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == LOGSUMEXP:
            logsumexp_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == SOFTMAX:
            softmax_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == LOG_SOFTMAX:
            log_softmax_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == NORM:
            norm_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == MATMUL:
            matmul_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need,
                       beta0, beta1)
        elif o == EXPAND_S:
            expand_s_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == SCATTER:
            scatter_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == GATHER or o == BCAST:
            gather_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == RESHAPE:
            reshape_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        elif o == CAT or o == STACK:
            cat_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need)
        else:
            return r
    return -1



# ---------------------------------------------------------------------------------------------
# Scalar rules for generated code (codegen.py): one-element records as Python source
# ---------------------------------------------------------------------------------------------
# A replayed tape whose records all hold one value is turned into straight-line (and rolled
# loop) code; these are the rules it is written from.  Each row: the forward, then the
# backward contribution to the first and to the second input.  Names: ``x0``, ``x1``, ``x2``
# (WHERE's condition), ``out``, ``c`` (fp), ``lo``/``hi`` (faux[ip], faux[ip + 1]), ``g``;
# ``gx0``/``gx1`` are the input gradients.  The expressions are the interpreter's own, term
# for term (forward above, sweep's rules above that), so generated code gives the same bits.
SCALAR_RULES = {
    ADD: ("out = x0 + x1", "gx0 += g", "gx1 += g"),
    ADD_S: ("out = x0 + c", "gx0 += g", None),
    SUB: ("out = x0 - x1", "gx0 += g", "gx1 -= g"),
    SUB_S: ("out = x0 - c", "gx0 += g", None),
    RSUB_S: ("out = c - x0", "gx0 -= g", None),
    MUL: ("out = x0 * x1", "gx0 += g * x1", "gx1 += g * x0"),
    MUL_S: ("out = x0 * c", "gx0 += g * c", None),
    DIV: ("out = x0 / x1", "gx0 += g / x1", "gx1 += -g * ((x0 / x1) / x1)"),
    DIV_S: ("out = x0 / c", "gx0 += g / c", None),
    NEG: ("out = -x0", "gx0 -= g", None),
    POW: ("out = x0 ** x1",
          "if x1 != 0.0:\n    gx0 += g * x1 * x0 ** (x1 - 1.0)",
          "if not (x0 == 0.0 and x1 >= 0.0):\n    gx1 += g * out * np.log(x0)"),
    POW_S: ("out = x0 ** c", "if c != 0.0:\n    gx0 += g * c * x0 ** (c - 1.0)", None),
    RPOW_S: ("out = c ** x0", "if c != 0.0 or x0 < 0.0:\n    gx0 += g * out * np.log(c)",
             None),
    RECIPROCAL: ("out = 1.0 / x0", "gx0 += -g * (out * out)", None),
    EXP: ("out = np.exp(x0)", "gx0 += g * out", None),
    LOG: ("out = np.log(x0)", "gx0 += g / x0", None),
    LOG1P: ("out = np.log1p(x0)", "gx0 += g / (x0 + 1.0)", None),
    EXPM1: ("out = np.expm1(x0)", "gx0 += g * (out + 1.0)", None),
    SQRT: ("out = np.sqrt(x0)", "gx0 += g / (2.0 * out)", None),
    ABS: ("out = abs(x0)", "if x0 > 0.0:\n    gx0 += g\nelif x0 < 0.0:\n    gx0 -= g", None),
    SIN: ("out = np.sin(x0)", "gx0 += g * np.cos(x0)", None),
    COS: ("out = np.cos(x0)", "gx0 -= g * np.sin(x0)", None),
    TAN: ("out = np.tan(x0)", "gx0 += g * (1.0 + out * out)", None),
    TANH: ("out = np.tanh(x0)", "gx0 += g * (1.0 - out * out)", None),
    SIGMOID: ("out = 1.0 / (1.0 + np.exp(-x0))", "gx0 += g * ((1.0 - out) * out)", None),
    RELU: ("out = x0 if (x0 > 0.0 or x0 != x0) else 0.0",
           "if not (out <= 0.0):\n    gx0 += g", None),
    SOFTPLUS: ("out = x0 if lo * x0 > hi else np.log1p(np.exp(lo * x0)) / lo",
               "if lo * x0 > hi:\n    gx0 += g\nelse:\n    z = np.exp(lo * x0)\n"
               "    gx0 += g * z / (z + 1.0)", None),
    CLAMP: ("out = x0 if x0 != x0 else (hi if lo > hi else min(max(x0, lo), hi))",
            "if x0 >= lo and x0 <= hi:\n    gx0 += g", None),
    # c is +1 for maximum, -1 for minimum; ties split the gradient as PyTorch does
    MAXIMUM: ("out = x0 + x1 if (x0 != x0 or x1 != x1) else (x0 if (x0 - x1) * c >= 0.0 "
              "else x1)",
              "if x0 == x1:\n    gx0 += 0.5 * g\nelif x0 != x0 or x1 != x1 or "
              "(x0 > x1) == (c > 0.0):\n    gx0 += g",
              "if x0 == x1:\n    gx1 += 0.5 * g\nelif x0 != x0 or x1 != x1 or "
              "not ((x0 > x1) == (c > 0.0)):\n    gx1 += g"),
    WHERE: ("out = x0 if x2 != 0.0 else x1", "if x2 != 0.0:\n    gx0 += g",
            "if x2 == 0.0:\n    gx1 += g"),
    # one-element reductions and copies: acc = 0.0; acc += x is 0.0 + x (-0.0 becomes 0.0)
    SUM: ("out = 0.0 + x0", "gx0 += g * c", None),
    RESHAPE: ("out = x0", "gx0 += g", None),
    GATHER: ("out = x0", "gx0 += g", None),
}
SCALAR_RULES[CLAMP_MIN] = SCALAR_RULES[CLAMP_MAX] = SCALAR_RULES[CLAMP]
SCALAR_RULES[MINIMUM] = SCALAR_RULES[MAXIMUM]
SCALAR_RULES[SUM_DIM] = SCALAR_RULES[MEAN] = SCALAR_RULES[MEAN_DIM] = SCALAR_RULES[SUM]
SCALAR_RULES[BCAST] = SCALAR_RULES[EXPAND_S] = SCALAR_RULES[GATHER]
# comparisons (ip[r] = kind, compared with x1 or with c) and guards are written by codegen


# ---------------------------------------------------------------------------------------------
# Forward rules (compiled replay): recompute record r's value from its inputs' values
# ---------------------------------------------------------------------------------------------
@inline
def _ins(r, a0, a1, voff, size, vals):
    n = size[r]
    return (_seg(vals, voff[r], n), _seg(vals, voff[a0[r]], n),
            _seg(vals, voff[a1[r]], n) if a1[r] >= 0 else _seg(vals, voff[r], 0))


@inline
def elementwise_fwd(o, r, a0, a1, voff, size, ip, fp, faux, vals):
    out, x0, x1 = _ins(r, a0, a1, voff, size, vals)
    n = out.size
    c = fp[r]
    if o == ADD:
        for i in range(n):
            out[i] = x0[i] + x1[i]
    elif o == ADD_S:
        for i in range(n):
            out[i] = x0[i] + c
    elif o == SUB:
        for i in range(n):
            out[i] = x0[i] - x1[i]
    elif o == SUB_S:
        for i in range(n):
            out[i] = x0[i] - c
    elif o == RSUB_S:
        for i in range(n):
            out[i] = c - x0[i]
    elif o == MUL:
        for i in range(n):
            out[i] = x0[i] * x1[i]
    elif o == MUL_S:
        for i in range(n):
            out[i] = x0[i] * c
    elif o == DIV:
        for i in range(n):
            out[i] = x0[i] / x1[i]
    elif o == DIV_S:
        for i in range(n):
            out[i] = x0[i] / c
    elif o == NEG:
        for i in range(n):
            out[i] = -x0[i]
    elif o == POW:
        for i in range(n):
            out[i] = x0[i] ** x1[i]
    elif o == POW_S:
        for i in range(n):
            out[i] = x0[i] ** c
    elif o == RPOW_S:
        for i in range(n):
            out[i] = c ** x0[i]
    elif o == RECIPROCAL:
        for i in range(n):
            out[i] = 1.0 / x0[i]
    elif o == EXP:
        for i in range(n):
            out[i] = np.exp(x0[i])
    elif o == LOG:
        for i in range(n):
            out[i] = np.log(x0[i])
    elif o == LOG1P:
        for i in range(n):
            out[i] = np.log1p(x0[i])
    elif o == EXPM1:
        for i in range(n):
            out[i] = np.expm1(x0[i])
    elif o == SQRT:
        for i in range(n):
            out[i] = np.sqrt(x0[i])
    elif o == ABS:
        for i in range(n):
            out[i] = abs(x0[i])
    elif o == SIN:
        for i in range(n):
            out[i] = np.sin(x0[i])
    elif o == COS:
        for i in range(n):
            out[i] = np.cos(x0[i])
    elif o == TAN:
        for i in range(n):
            out[i] = np.tan(x0[i])
    elif o == TANH:
        for i in range(n):
            out[i] = np.tanh(x0[i])
    elif o == SIGMOID:
        for i in range(n):
            out[i] = 1.0 / (1.0 + np.exp(-x0[i]))
    elif o == RELU:
        for i in range(out.size):
            x = x0[i]
            out[i] = x if (x > 0.0 or x != x) else 0.0
    elif o == SOFTPLUS:
        beta = faux[ip[r]]
        threshold = faux[ip[r] + 1]
        for i in range(out.size):
            bx = beta * x0[i]
            out[i] = x0[i] if bx > threshold else np.log1p(np.exp(bx)) / beta
    elif o == CLAMP or o == CLAMP_MIN or o == CLAMP_MAX:
        lo = faux[ip[r]]
        hi = faux[ip[r] + 1]
        for i in range(out.size):
            x = x0[i]
            if x != x:
                out[i] = x
            elif lo > hi:
                out[i] = hi
            else:
                out[i] = min(max(x, lo), hi)
    elif o == MAXIMUM or o == MINIMUM:
        for i in range(out.size):
            u = x0[i]
            v = x1[i]
            if u != u or v != v:
                out[i] = u + v  # nan propagates
            elif (u - v) * c >= 0.0:
                out[i] = u
            else:
                out[i] = v
    elif o == CMP:
        k = ip[r]
        for i in range(out.size):
            v = x1[i] if a1[r] >= 0 else c
            u = x0[i]
            if k == 0:
                res = u < v
            elif k == 1:
                res = u <= v
            elif k == 2:
                res = u > v
            elif k == 3:
                res = u >= v
            elif k == 4:
                res = u == v
            else:
                res = u != v
            out[i] = 1.0 if res else 0.0
    else:
        return False
    return True


@inline
def reduce_fwd(o, r, a0, voff, ip, fp, aux, vals):
    o_n, r_n, i_n = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
    for ob in range(o_n):
        for i in range(i_n):
            j = ob * i_n + i
            if o == SUM or o == SUM_DIM or o == MEAN or o == MEAN_DIM:
                acc = 0.0
                for k in range(r_n):
                    acc += x0[(ob * r_n + k) * i_n + i]
                # divided by the count, as NumPy's mean does (fp = 1/count rounds differently)
                out[j] = acc / r_n if (o == MEAN or o == MEAN_DIM) else acc
            elif o == PROD or o == PROD_DIM:
                acc = 1.0
                for k in range(r_n):
                    acc *= x0[(ob * r_n + k) * i_n + i]
                out[j] = acc
            elif o == MAX or o == AMAX or o == MIN or o == AMIN or o == MAX_DIM or o == MIN_DIM:
                is_max = o == MAX or o == AMAX or o == MAX_DIM
                best = x0[ob * r_n * i_n + i]
                arg = 0
                for k in range(1, r_n):
                    v = x0[(ob * r_n + k) * i_n + i]
                    if best != best:
                        break
                    if v != v or (v > best if is_max else v < best):
                        best = v
                        arg = k
                out[j] = best
                if o == MAX_DIM or o == MIN_DIM:
                    aux[ip[r] + 3 + j] = arg
            elif o == VAR or o == STD:
                # shifted by the slice's first value: a constant slice has variance exactly 0
                shift = x0[ob * r_n * i_n + i] if r_n > 0 else 0.0
                mean = 0.0
                for k in range(r_n):
                    mean += x0[(ob * r_n + k) * i_n + i] - shift
                mean /= r_n
                acc = 0.0
                for k in range(r_n):
                    d = x0[(ob * r_n + k) * i_n + i] - shift - mean
                    acc += d * d
                v = acc * fp[r]
                out[j] = np.sqrt(v) if o == STD else v
            elif o == LOGSUMEXP:
                m = -np.inf
                for k in range(r_n):
                    m = max(m, x0[(ob * r_n + k) * i_n + i])
                if not np.isfinite(m):
                    m = 0.0
                acc = 0.0
                for k in range(r_n):
                    acc += np.exp(x0[(ob * r_n + k) * i_n + i] - m)
                out[j] = np.log(acc) + m
            elif o == NORM:
                p_ord = fp[r]
                acc = 0.0
                if p_ord == np.inf or p_ord == -np.inf:
                    acc = abs(x0[ob * r_n * i_n + i]) if r_n > 0 else 0.0
                    for k in range(r_n):
                        a = abs(x0[(ob * r_n + k) * i_n + i])
                        acc = max(acc, a) if p_ord > 0 else min(acc, a)
                    out[j] = acc
                else:
                    for k in range(r_n):
                        a = abs(x0[(ob * r_n + k) * i_n + i])
                        acc += a * a if p_ord == 2.0 else (a if p_ord == 1.0 else a ** p_ord)
                    out[j] = np.sqrt(acc) if p_ord == 2.0 else (
                        acc if p_ord == 1.0 else acc ** (1.0 / p_ord))


@inline
def softmax_fwd(o, r, a0, voff, ip, aux, vals):
    o_n, r_n, i_n = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
    n = o_n * r_n * i_n
    out = _seg(vals, voff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    for ob in range(o_n):
        for i in range(i_n):
            m = -np.inf
            for k in range(r_n):
                m = max(m, x0[(ob * r_n + k) * i_n + i])
            # an infinite maximum is not replaced (unlike logsumexp): PyTorch's softmax of a
            # row holding +inf, or of an all -inf row, is nan
            total = 0.0
            for k in range(r_n):
                total += np.exp(x0[(ob * r_n + k) * i_n + i] - m)
            for k in range(r_n):
                p = (ob * r_n + k) * i_n + i
                if o == SOFTMAX:
                    out[p] = np.exp(x0[p] - m) / total
                else:
                    out[p] = x0[p] - m - np.log(total)


@inline
def structure_fwd(o, r, a0, a1, voff, size, ip, aux, vals, ext):
    n = size[r]
    out = _seg(vals, voff[r], n)
    if o == MATMUL:
        b_n, m, k, nn = aux[ip[r] + 1], aux[ip[r] + 2], aux[ip[r] + 3], aux[ip[r] + 4]
        for b in range(b_n):
            # straight into the arena: no temporary and no copy of the product
            gemm(out[b * m * nn:(b + 1) * m * nn], value_at(vals, voff, ext, a0[r], b * m * k),
                 value_at(vals, voff, ext, a1[r], b * k * nn), m, k, nn, False, False, 0.0)
    elif o == EXPAND_S:
        nd = aux[ip[r]]
        shp = aux[ip[r] + 1: ip[r] + 1 + nd]
        strides = aux[ip[r] + 1 + nd: ip[r] + 1 + 2 * nd]
        x0 = vals[voff[a0[r]]:]
        if nd == 0:
            if n == 1:
                out[0] = x0[0]
            return True
        # the last axis as one run per step of the walk (see expand_s_bwd)
        inner = shp[nd - 1]
        step = strides[nd - 1]
        if _row_broadcast(strides, nd, inner):
            # a bias broadcast over rows: the same run in every row, written from a local
            # copy through a 2-D view (W3's (256, 256): 9 us; a slice copy per row: 20 us)
            row = x0[:inner].copy()
            rows = out.reshape((n // inner, inner))
            for k in range(n // inner):
                for i in range(inner):
                    rows[k, i] = row[i]
            return True
        count = np.zeros(nd, dtype=np.int64)
        src = 0
        k = 0
        while k < n:
            if step == 1:
                out[k:k + inner] = x0[src:src + inner]
            else:
                for i in range(inner):
                    out[k + i] = x0[src + i * step]
            k += inner
            d = nd - 2
            while d >= 0:
                count[d] += 1
                src += strides[d]
                if count[d] < shp[d]:
                    break
                src -= strides[d] * shp[d]
                count[d] = 0
                d -= 1
    elif o == SCATTER:
        n_in = aux[ip[r] + 1]
        x0 = _seg(vals, voff[a0[r]], n_in)
        idx = aux[ip[r] + 2: ip[r] + 2 + n_in]
        out[:] = 0.0
        for k in range(n_in):
            out[idx[k]] += x0[k]
    elif o == GATHER or o == BCAST:
        src = voff[a0[r]]
        idx = aux[ip[r] + 2: ip[r] + 2 + n]
        for k in range(n):
            out[k] = vals[src + idx[k]]
    elif o == RESHAPE:
        out[:] = _seg(vals, voff[a0[r]], n)
    elif o == CAT or o == STACK:
        k_in = aux[ip[r]]
        rows = ip[r] + 1
        o_n = aux[rows + 3 * k_in]
        block = aux[rows + 3 * k_in + 1]
        for j in range(k_in):
            src = aux[rows + 3 * j]
            start = aux[rows + 3 * j + 1]
            width = aux[rows + 3 * j + 2]
            x = _seg(vals, voff[src], o_n * width)
            for ob in range(o_n):
                out[ob * block + start: ob * block + start + width] = x[ob * width:(ob + 1) * width]
    elif o == WHERE:
        cond = _seg(vals, voff[ip[r]], n)
        x0 = _seg(vals, voff[a0[r]], n)
        x1 = _seg(vals, voff[a1[r]], n)
        for i in range(n):
            out[i] = x0[i] if cond[i] != 0.0 else x1[i]
    else:
        return False
    return True


@kernel
def forward(op, a0, a1, voff, size, ip, fp, aux, faux, vals, ext, lo, hi):
    """Recompute records lo..hi-1 from their inputs (LEAF values were refreshed by the caller,
    in the arena or, for the records ``ext`` names, in place: see ``value_at``).

    Returns -1, or the index of the first GUARD whose value differs from the recorded one.
    """
    for r in range(lo, hi):
        o = op[r]
        if o <= EXTERN:
            continue
        if size[r] == 1 and o < RELU:
            # one-element records index the arena directly (see the same path in sweep)
            x = vals[voff[a0[r]]]
            c = fp[r]
            done = True
            if o == ADD:
                v = x + vals[voff[a1[r]]]
            elif o == SUB:
                v = x - vals[voff[a1[r]]]
            elif o == MUL:
                v = x * vals[voff[a1[r]]]
            elif o == ADD_S:
                v = x + c
            elif o == SUB_S:
                v = x - c
            elif o == MUL_S:
                v = x * c
            elif o == DIV_S:
                v = x / c
            elif o == RSUB_S:
                v = c - x
            elif o == NEG:
                v = -x
            elif o == POW_S:
                v = x ** c
            elif o == TANH:
                v = np.tanh(x)
            elif o == SIN:
                v = np.sin(x)
            elif o == EXP:
                v = np.exp(x)
            else:
                v = 0.0
                done = False
            if done:
                vals[voff[r]] = v
                continue
        if o == GUARD:
            n = size[r]
            got = _seg(vals, voff[a0[r]], n)
            want = faux[ip[r]:ip[r] + n]
            for i in range(n):
                if got[i] != want[i] and not (got[i] != got[i] and want[i] != want[i]):
                    return r
            continue
        if o == SUM or o == SUM_DIM or o == MEAN or o == MEAN_DIM or o == PROD or \
                o == PROD_DIM or o == MAX or o == MIN or o == AMAX or o == AMIN or \
                o == MAX_DIM or o == MIN_DIM or o == VAR or o == STD or o == LOGSUMEXP or \
                o == NORM:
            reduce_fwd(o, r, a0, voff, ip, fp, aux, vals)
        elif o == SOFTMAX or o == LOG_SOFTMAX:
            softmax_fwd(o, r, a0, voff, ip, aux, vals)
        elif not structure_fwd(o, r, a0, a1, voff, size, ip, aux, vals, ext):
            if not elementwise_fwd(o, r, a0, a1, voff, size, ip, fp, faux, vals):
                return -2 - r
    return -1


@kernel
def replay_rows(op, a0, a1, voff, goff, size, ip, fp, aux, faux, template, arg_recs, arg_offs,
                inputs, out_rec, need, total, want_grad, values, grads_out, status, lo, hi):
    """Rows lo..hi-1 of ``batch_replay``, with value and gradient arenas of their own."""
    vals = template.copy()
    no_ext = np.zeros(0, np.int64)
    grads = np.zeros(max(total, 1))
    n = op.size
    n_out = size[out_rec]
    for b in range(lo, hi):
        for j in range(arg_recs.size):
            r = arg_recs[j]
            m = size[r]
            vals[voff[r]:voff[r] + m] = inputs[b, arg_offs[j]:arg_offs[j] + m]
        bad = forward(op, a0, a1, voff, size, ip, fp, aux, faux, vals, no_ext, 0, n)
        status[b] = bad
        if bad != -1:
            continue
        values[b, :] = vals[voff[out_rec]:voff[out_rec] + n_out]
        if want_grad:
            grads[:] = 0.0
            grads[goff[out_rec]] = 1.0
            sweep(op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, no_ext, grads, need,
                  n, 0, 0)
            for j in range(arg_recs.size):
                r = arg_recs[j]
                m = size[r]
                if need[r]:
                    grads_out[b, arg_offs[j]:arg_offs[j] + m] = grads[goff[r]:goff[r] + m]
                else:
                    grads_out[b, arg_offs[j]:arg_offs[j] + m] = 0.0


@kernel
def batch_replay(op, a0, a1, voff, goff, size, ip, fp, aux, faux, template, arg_recs, arg_offs,
                 inputs, out_rec, need, total, want_grad, values, grads_out, status):
    """Replay one tape for each row of ``inputs`` (one sample per row) in a single call.

    Each row holds the flat values of the argument records ``arg_recs`` at ``arg_offs``; the
    output record's value goes to ``values[b]`` and, with ``want_grad`` (a one-element
    output), the gradients of the argument records to ``grads_out[b]``.  ``status[b]`` is -1,
    or the GUARD record that failed for that sample (its results are then not written).
    """
    replay_rows(op, a0, a1, voff, goff, size, ip, fp, aux, faux, template, arg_recs, arg_offs,
                inputs, out_rec, need, total, want_grad, values, grads_out, status, 0,
                inputs.shape[0])


@parallel_kernel
def batch_replay_parallel(op, a0, a1, voff, goff, size, ip, fp, aux, faux, template, arg_recs,
                          arg_offs, inputs, out_rec, need, total, want_grad, values, grads_out,
                          status, chunks):
    """``batch_replay`` with the rows split into ``chunks`` contiguous blocks run on numba's
    threads.  Each block has its own arenas and its own copy of ``aux`` (max(dim)'s forward
    writes its argmax there); rows are independent, so the results are the sequential ones."""
    bsz = inputs.shape[0]
    for c in prange(chunks):
        replay_rows(op, a0, a1, voff, goff, size, ip, fp, aux.copy(), faux, template, arg_recs,
                    arg_offs, inputs, out_rec, need, total, want_grad, values, grads_out,
                    status, c * bsz // chunks, (c + 1) * bsz // chunks)


# ---------------------------------------------------------------------------------------------
# Tangent rules (forward mode): the tangent of record r's value from its inputs' tangents
# ---------------------------------------------------------------------------------------------
# The tangent arena ``tans`` is flat: seed k's tangent of record r sits at
# ``b + voff[r]`` with ``b = k * stride``, the layout of ``vals`` once per seed.  The rules
# index it with offsets instead of slicing (a view per record costs refcounting).  ``t0``/
# ``t1`` are the input tangents' offsets, ``tout`` the output's; ``d0``/``d1`` whether an
# input depends on a seed at all: a term of an input that does not is left out, as the
# backward leaves out an input that needs no gradient (so inf * 0 does not turn into nan).
# At kinks and ties each rule takes the derivative its backward rule takes, so that
# <J t, u> == <t, J^T u> holds exactly there too.
@inline
def elementwise_tan(o, r, a0, a1, voff, size, ip, fp, faux, vals, tans, b, d0, d1):
    n = size[r]
    tout = b + voff[r]
    t0 = b + voff[a0[r]] if a0[r] >= 0 else 0
    t1 = b + voff[a1[r]] if a1[r] >= 0 else 0
    x0 = _seg(vals, voff[a0[r]], n) if a0[r] >= 0 else _seg(vals, voff[r], n)
    x1 = _seg(vals, voff[a1[r]], n) if a1[r] >= 0 else _seg(vals, voff[r], 0)
    out = _seg(vals, voff[r], n)
    c = fp[r]
    if o == ADD or o == SUB:
        s = 1.0 if o == ADD else -1.0
        for i in range(n):
            acc = 0.0
            if d0:
                acc += tans[t0 + i]
            if d1:
                acc += s * tans[t1 + i]
            tans[tout + i] = acc
    elif o == ADD_S or o == SUB_S:
        for i in range(n):
            tans[tout + i] = tans[t0 + i]
    elif o == RSUB_S or o == NEG:
        for i in range(n):
            tans[tout + i] = -tans[t0 + i]
    elif o == MUL:
        for i in range(n):
            acc = 0.0
            if d0:
                acc += tans[t0 + i] * x1[i]
            if d1:
                acc += tans[t1 + i] * x0[i]
            tans[tout + i] = acc
    elif o == MUL_S:
        for i in range(n):
            tans[tout + i] = tans[t0 + i] * c
    elif o == DIV:
        for i in range(n):
            acc = 0.0
            if d0:
                acc += tans[t0 + i] / x1[i]
            if d1:
                acc += -tans[t1 + i] * ((x0[i] / x1[i]) / x1[i])
            tans[tout + i] = acc
    elif o == DIV_S:
        for i in range(n):
            tans[tout + i] = tans[t0 + i] / c
    elif o == POW:
        for i in range(n):
            acc = 0.0
            if d0 and x1[i] != 0.0:
                acc += tans[t0 + i] * x1[i] * x0[i] ** (x1[i] - 1.0)
            if d1 and not (x0[i] == 0.0 and x1[i] >= 0.0):
                acc += tans[t1 + i] * out[i] * np.log(x0[i])
            tans[tout + i] = acc
    elif o == POW_S:
        for i in range(n):
            tans[tout + i] = 0.0 if c == 0.0 else tans[t0 + i] * c * x0[i] ** (c - 1.0)
    elif o == RPOW_S:
        lb = np.log(c)
        for i in range(n):
            if c == 0.0 and not x0[i] < 0.0:
                tans[tout + i] = 0.0
            else:
                tans[tout + i] = tans[t0 + i] * out[i] * lb
    elif o == RECIPROCAL:
        for i in range(n):
            tans[tout + i] = -tans[t0 + i] * (out[i] * out[i])
    elif o == EXP:
        for i in range(n):
            tans[tout + i] = tans[t0 + i] * out[i]
    elif o == LOG:
        for i in range(n):
            tans[tout + i] = tans[t0 + i] / x0[i]
    elif o == LOG1P:
        for i in range(n):
            tans[tout + i] = tans[t0 + i] / (x0[i] + 1.0)
    elif o == EXPM1:
        for i in range(n):
            tans[tout + i] = tans[t0 + i] * (out[i] + 1.0)
    elif o == SQRT:
        for i in range(n):
            tans[tout + i] = tans[t0 + i] / (2.0 * out[i])
    elif o == ABS:
        for i in range(n):
            x = x0[i]
            tans[tout + i] = tans[t0 + i] if x > 0.0 else (-tans[t0 + i] if x < 0.0 else 0.0)
    elif o == SIN:
        for i in range(n):
            tans[tout + i] = tans[t0 + i] * np.cos(x0[i])
    elif o == COS:
        for i in range(n):
            tans[tout + i] = -tans[t0 + i] * np.sin(x0[i])
    elif o == TAN:
        for i in range(n):
            tans[tout + i] = tans[t0 + i] * (1.0 + out[i] * out[i])
    elif o == TANH:
        for i in range(n):
            tans[tout + i] = tans[t0 + i] * (1.0 - out[i] * out[i])
    elif o == SIGMOID:
        for i in range(n):
            tans[tout + i] = tans[t0 + i] * ((1.0 - out[i]) * out[i])
    elif o == RELU:
        for i in range(n):
            tans[tout + i] = 0.0 if out[i] <= 0.0 else tans[t0 + i]
    elif o == SOFTPLUS:
        beta = faux[ip[r]]
        threshold = faux[ip[r] + 1]
        for i in range(n):
            bx = beta * x0[i]
            if bx > threshold:
                tans[tout + i] = tans[t0 + i]
            else:
                z = np.exp(bx)
                tans[tout + i] = tans[t0 + i] * z / (z + 1.0)
    elif o == CLAMP or o == CLAMP_MIN or o == CLAMP_MAX:
        lo = faux[ip[r]]
        hi = faux[ip[r] + 1]
        for i in range(n):
            tans[tout + i] = tans[t0 + i] if (x0[i] >= lo and x0[i] <= hi) else 0.0
    elif o == MAXIMUM or o == MINIMUM:
        for i in range(n):
            u = x0[i]
            v = x1[i]
            w0 = 0.0
            w1 = 0.0
            if u == v:
                w0 = 0.5
                w1 = 0.5
            elif u != u or v != v:
                w0 = 1.0
                w1 = 1.0
            elif (u > v) == (c > 0.0):
                w0 = 1.0
            else:
                w1 = 1.0
            acc = 0.0
            if d0 and w0 != 0.0:
                acc += w0 * tans[t0 + i]
            if d1 and w1 != 0.0:
                acc += w1 * tans[t1 + i]
            tans[tout + i] = acc
    elif o == WHERE:
        cond = _seg(vals, voff[ip[r]], n)
        for i in range(n):
            if cond[i] != 0.0:
                tans[tout + i] = tans[t0 + i] if d0 else 0.0
            else:
                tans[tout + i] = tans[t1 + i] if d1 else 0.0
    else:
        return False
    return True


@inline
def reduce_tan(o, r, a0, voff, ip, fp, aux, vals, tans, b):
    # input viewed as (O, R, I), output as (O, I); each rule is its backward's transpose
    o_n, r_n, i_n = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
    n_in = o_n * r_n * i_n
    tout = b + voff[r]
    t0 = b + voff[a0[r]]
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], n_in)
    if o == SUM or o == SUM_DIM or o == MEAN or o == MEAN_DIM:
        scale = fp[r]
        for ob in range(o_n):
            for i in range(i_n):
                acc = 0.0
                for k in range(r_n):
                    acc += tans[t0 + (ob * r_n + k) * i_n + i]
                tans[tout + ob * i_n + i] = acc * scale
    elif o == PROD or o == PROD_DIM:
        mode = aux[ip[r] + 3]
        if mode == 2:
            for p in range(n_in):
                tans[tout + p] = tans[t0 + p]
            return
        zeros = 0
        for p in range(n_in):
            if x0[p] == 0.0:
                zeros += 1
        for ob in range(o_n):
            for i in range(i_n):
                j = ob * i_n + i
                acc = 0.0
                if zeros == 0:
                    for k in range(r_n):
                        p = (ob * r_n + k) * i_n + i
                        acc += tans[t0 + p] * (out[j] / x0[p])
                elif not (mode == 1 and zeros > 1):
                    # each entry's weight: the product of the others, prefix times suffix
                    for k in range(r_n):
                        w = 1.0
                        for m in range(r_n):
                            if m != k:
                                w *= x0[(ob * r_n + m) * i_n + i]
                        acc += tans[t0 + (ob * r_n + k) * i_n + i] * w
                tans[tout + j] = acc
    elif o == MAX or o == MIN or o == AMAX or o == AMIN:
        nan_matches = o == MAX or o == MIN
        for ob in range(o_n):
            for i in range(i_n):
                j = ob * i_n + i
                ties = 0
                acc = 0.0
                for k in range(r_n):
                    p = (ob * r_n + k) * i_n + i
                    v = x0[p]
                    if v == out[j] or (nan_matches and v != v and out[j] != out[j]):
                        ties += 1
                        acc += tans[t0 + p]
                if ties:
                    tans[tout + j] = acc / ties
                else:
                    # amax of a nan slice: its backward hands out g/0 * 0
                    tans[tout + j] = 0.0 if nan_matches else np.nan
    elif o == MAX_DIM or o == MIN_DIM:
        for ob in range(o_n):
            for i in range(i_n):
                j = ob * i_n + i
                tans[tout + j] = tans[t0 + (ob * r_n + aux[ip[r] + 3 + j]) * i_n + i]
    elif o == VAR or o == STD:
        is_std = aux[ip[r] + 3]
        full = aux[ip[r] + 4]
        scale = 2.0 * fp[r]
        no_dof = full and (fp[r] < 0.0 or fp[r] == np.inf)
        for ob in range(o_n):
            for i in range(i_n):
                j = ob * i_n + i
                mean = 0.0
                for k in range(r_n):
                    mean += x0[(ob * r_n + k) * i_n + i]
                mean /= r_n
                acc = 0.0
                for k in range(r_n):
                    p = (ob * r_n + k) * i_n + i
                    if no_dof:
                        acc += tans[t0 + p] * (np.nan if x0[p] == mean else np.inf)
                    else:
                        acc += scale * tans[t0 + p] * (x0[p] - mean)
                if is_std:
                    acc = acc / (out[j] * 2.0) if out[j] != 0.0 else 0.0
                tans[tout + j] = acc
    elif o == LOGSUMEXP:
        for ob in range(o_n):
            for i in range(i_n):
                j = ob * i_n + i
                acc = 0.0
                for k in range(r_n):
                    p = (ob * r_n + k) * i_n + i
                    acc += tans[t0 + p] * np.exp(x0[p] - out[j])
                tans[tout + j] = acc
    elif o == SOFTMAX or o == LOG_SOFTMAX:
        # softmax: J = diag(s) - s s^T;  log_softmax: J = I - 1 s^T (s = exp(out))
        outs = _seg(vals, voff[r], n_in)
        for ob in range(o_n):
            for i in range(i_n):
                dot = 0.0
                for k in range(r_n):
                    p = (ob * r_n + k) * i_n + i
                    s = outs[p] if o == SOFTMAX else np.exp(outs[p])
                    dot += s * tans[t0 + p]
                for k in range(r_n):
                    p = (ob * r_n + k) * i_n + i
                    if o == SOFTMAX:
                        tans[tout + p] = outs[p] * (tans[t0 + p] - dot)
                    else:
                        tans[tout + p] = tans[t0 + p] - dot
    elif o == NORM:
        p_ord = fp[r]
        for ob in range(o_n):
            for i in range(i_n):
                j = ob * i_n + i
                acc = 0.0
                for k in range(r_n):
                    q = (ob * r_n + k) * i_n + i
                    x = x0[q]
                    sgn = 1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0)
                    t = tans[t0 + q]
                    if p_ord == 2.0:
                        if out[j] != 0.0:
                            acc += t * (x / out[j])
                    elif p_ord == 1.0:
                        acc += sgn * t
                    elif p_ord == np.inf or p_ord == -np.inf:
                        ties = 0
                        for m in range(r_n):
                            if abs(x0[(ob * r_n + m) * i_n + i]) == out[j]:
                                ties += 1
                        if abs(x) == out[j]:
                            acc += sgn * (t / ties)
                    elif p_ord < 1.0:
                        scaled = 0.0 if x == 0.0 else sgn * abs(x) ** (p_ord - 1.0)
                        acc += scaled * t * out[j] ** (1.0 - p_ord)
                    else:
                        scale = 0.0 if out[j] == 0.0 else t / out[j] ** (p_ord - 1.0)
                        if p_ord < 2.0:
                            acc += sgn * abs(x) ** (p_ord - 1.0) * scale
                        else:
                            acc += x * abs(x) ** (p_ord - 2.0) * scale
                tans[tout + j] = acc


@inline
def structure_tan(o, r, a0, a1, voff, size, ip, aux, vals, tans, b, d0, d1, dep):
    n = size[r]
    tout = b + voff[r]
    if o == MATMUL:
        b_n, m, k, nn = aux[ip[r] + 1], aux[ip[r] + 2], aux[ip[r] + 3], aux[ip[r] + 4]
        for bb in range(b_n):
            acc = np.zeros((m, nn))
            if d0:
                s0 = b + voff[a0[r]] + bb * m * k
                x1 = vals[voff[a1[r]] + bb * k * nn: voff[a1[r]] + (bb + 1) * k * nn]
                acc += np.dot(tans[s0:s0 + m * k].reshape((m, k)), x1.reshape((k, nn)))
            if d1:
                s1 = b + voff[a1[r]] + bb * k * nn
                x0 = vals[voff[a0[r]] + bb * m * k: voff[a0[r]] + (bb + 1) * m * k]
                acc += np.dot(x0.reshape((m, k)), tans[s1:s1 + k * nn].reshape((k, nn)))
            tans[tout + bb * m * nn: tout + (bb + 1) * m * nn] = acc.reshape(m * nn)
    elif o == EXPAND_S:
        nd = aux[ip[r]]
        shp = aux[ip[r] + 1: ip[r] + 1 + nd]
        strides = aux[ip[r] + 1 + nd: ip[r] + 1 + 2 * nd]
        t0 = b + voff[a0[r]]
        count = np.zeros(nd, dtype=np.int64)
        src = 0
        for q in range(n):
            tans[tout + q] = tans[t0 + src]
            d = nd - 1
            while d >= 0:
                count[d] += 1
                src += strides[d]
                if count[d] < shp[d]:
                    break
                src -= strides[d] * shp[d]
                count[d] = 0
                d -= 1
    elif o == SCATTER:
        n_in = aux[ip[r] + 1]
        t0 = b + voff[a0[r]]
        for q in range(n):
            tans[tout + q] = 0.0
        for q in range(n_in):
            tans[tout + aux[ip[r] + 2 + q]] += tans[t0 + q]
    elif o == GATHER or o == BCAST:
        t0 = b + voff[a0[r]]
        for q in range(n):
            tans[tout + q] = tans[t0 + aux[ip[r] + 2 + q]]
    elif o == RESHAPE:
        t0 = b + voff[a0[r]]
        if t0 != tout:
            for q in range(n):
                tans[tout + q] = tans[t0 + q]
    elif o == CAT or o == STACK:
        k_in = aux[ip[r]]
        rows = ip[r] + 1
        o_n = aux[rows + 3 * k_in]
        block = aux[rows + 3 * k_in + 1]
        for j in range(k_in):
            src = aux[rows + 3 * j]
            start = aux[rows + 3 * j + 1]
            width = aux[rows + 3 * j + 2]
            ts = b + voff[src]
            live = dep[src] != 0
            for ob in range(o_n):
                for q in range(width):
                    tans[tout + ob * block + start + q] = tans[ts + ob * width + q] if live else 0.0
    else:
        return False
    return True


@kernel
def tangent(op, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, n_seeds, stride, dep, lo,
            hi):
    """Forward-mode sweep: tangents of records lo..hi-1, for ``n_seeds`` seeds at once.

    ``tans`` holds n_seeds arenas of ``stride`` values laid out as ``vals``; the caller
    writes the seeds into the tangents of the seeded records and sets ``dep`` to 1 there.
    The sweep marks the other records that depend on a seed (``dep``) and computes their
    tangents; the rest keep the zeros the caller filled in.  Returns -1, or the first record
    whose opcode has no tangent rule.
    """
    for r in range(lo, hi):
        if dep[r]:
            continue
        o = op[r]
        if o <= EXTERN or o == CMP or o == GUARD:
            continue
        if o == CAT or o == STACK:
            for j in range(aux[ip[r]]):
                if dep[aux[ip[r] + 1 + 3 * j]]:
                    dep[r] = 1
        elif (a0[r] >= 0 and dep[a0[r]]) or (a1[r] >= 0 and dep[a1[r]]):
            dep[r] = 1
        if not dep[r]:
            continue
        d0 = a0[r] >= 0 and dep[a0[r]] != 0
        d1 = a1[r] >= 0 and dep[a1[r]] != 0
        if size[r] == 1 and o < RELU:
            # one-element records (ODE loops, their recorded gradients) index the arenas
            # directly, as in sweep: the general rules' array views cost more than the math
            x = vals[voff[a0[r]]]
            c = fp[r]
            done = True
            for s in range(n_seeds):
                b = s * stride
                t = tans[b + voff[a0[r]]] if d0 else 0.0
                if o == ADD or o == SUB:
                    u = tans[b + voff[a1[r]]] if d1 else 0.0
                    v = t + u if o == ADD else t - u
                elif o == MUL:
                    v = 0.0
                    if d0:
                        v += t * vals[voff[a1[r]]]
                    if d1:
                        v += tans[b + voff[a1[r]]] * x
                elif o == ADD_S or o == SUB_S:
                    v = t
                elif o == MUL_S:
                    v = t * c
                elif o == DIV_S:
                    v = t / c
                elif o == RSUB_S or o == NEG:
                    v = -t
                elif o == TANH:
                    y = vals[voff[r]]
                    v = t * (1.0 - y * y)
                elif o == SIN:
                    v = t * np.cos(x)
                elif o == EXP:
                    v = t * vals[voff[r]]
                else:
                    done = False
                    break
                tans[b + voff[r]] = v
            if done:
                continue
        for s in range(n_seeds):
            b = s * stride
            if o == SUM or o == SUM_DIM or o == MEAN or o == MEAN_DIM or o == PROD or \
                    o == PROD_DIM or o == MAX or o == MIN or o == AMAX or o == AMIN or \
                    o == MAX_DIM or o == MIN_DIM or o == VAR or o == STD or o == LOGSUMEXP or \
                    o == SOFTMAX or o == LOG_SOFTMAX or o == NORM:
                reduce_tan(o, r, a0, voff, ip, fp, aux, vals, tans, b)
            elif not structure_tan(o, r, a0, a1, voff, size, ip, aux, vals, tans, b, d0, d1,
                                   dep):
                if not elementwise_tan(o, r, a0, a1, voff, size, ip, fp, faux, vals, tans, b,
                                       d0, d1):
                    return r
    return -1


# ---------------------------------------------------------------------------------------------
# Forward over reverse: the tangent of the backward sweep
# ---------------------------------------------------------------------------------------------
@inline
def curvature_rule(o, r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, tans, b,
                   dg, need):
    # g times the tangent of record r's local derivative, added into ``dg`` at its inputs.
    # Only ops that are not linear in their inputs have one: the piecewise linear ones' masks
    # and tie shares are constant where they are differentiable.
    n = size[r]
    g = _seg(grads, goff[r], n)
    if o == MUL:
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
    elif o == DIV:
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
    elif o == MATMUL:
        b_n, m, k, nn = aux[ip[r] + 1], aux[ip[r] + 2], aux[ip[r] + 3], aux[ip[r] + 4]
        for bb in range(b_n):
            gm = grads[goff[r] + bb * m * nn: goff[r] + (bb + 1) * m * nn].reshape((m, nn))
            if need[a0[r]]:
                s1 = b + voff[a1[r]] + bb * k * nn
                gx0 = dg[goff[a0[r]] + bb * m * k: goff[a0[r]] + (bb + 1) * m * k].reshape((m, k))
                gx0 += np.dot(gm, tans[s1:s1 + k * nn].reshape((k, nn)).T)
            if need[a1[r]]:
                s0 = b + voff[a0[r]] + bb * m * k
                gx1 = dg[goff[a1[r]] + bb * k * nn: goff[a1[r]] + (bb + 1) * k * nn].reshape((k, nn))
                gx1 += np.dot(tans[s0:s0 + m * k].reshape((m, k)).T, gm)
    elif o == LOGSUMEXP or o == SOFTMAX or o == LOG_SOFTMAX:
        # written with the output's tangent (tout), which the tangent sweep left in tans
        o_n, r_n, i_n = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
        x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
        out = _seg(vals, voff[r], size[r])
        gx0 = _seg(dg, goff[a0[r]], o_n * r_n * i_n)
        t0 = b + voff[a0[r]]
        tout = b + voff[r]
        for ob in range(o_n):
            for i in range(i_n):
                j = ob * i_n + i
                if o == LOGSUMEXP:
                    # gx = g * s with s = exp(x - out): ds = s * (t - tout)
                    for k in range(r_n):
                        p = (ob * r_n + k) * i_n + i
                        gx0[p] += g[j] * np.exp(x0[p] - out[j]) * (tans[t0 + p] - tans[tout + j])
                    continue
                dot = 0.0
                gsum = 0.0
                for k in range(r_n):
                    p = (ob * r_n + k) * i_n + i
                    dot += g[p] * (out[p] if o == SOFTMAX else tans[tout + p])
                    gsum += g[p] * tans[tout + p] if o == SOFTMAX else g[p]
                for k in range(r_n):
                    p = (ob * r_n + k) * i_n + i
                    if o == SOFTMAX:
                        # gx = y * (g - <g, y>): d = ty * (g - <g, y>) - y * <g, ty>
                        gx0[p] += tans[tout + p] * (g[p] - dot) - out[p] * gsum
                    else:
                        # gx = g - exp(y) * sum(g): d = -exp(y) * ty * sum(g)
                        gx0[p] -= np.exp(out[p]) * tans[tout + p] * gsum
    elif o != ABS:
        # one-input smooth functions: dgx += g * f''(x) * t
        x0 = _seg(vals, voff[a0[r]], n)
        out = _seg(vals, voff[r], n)
        t0 = b + voff[a0[r]]
        gx0 = _seg(dg, goff[a0[r]], n)
        c = fp[r]
        for i in range(n):
            x = x0[i]
            y = out[i]
            if o == EXP or o == EXPM1:
                d2 = y + 1.0 if o == EXPM1 else y
            elif o == LOG:
                d2 = -1.0 / (x * x)
            elif o == LOG1P:
                d2 = -1.0 / ((x + 1.0) * (x + 1.0))
            elif o == SQRT:
                d2 = -0.25 / (y * y * y)
            elif o == SIN:
                d2 = -np.sin(x)
            elif o == COS:
                d2 = -np.cos(x)
            elif o == TAN:
                d2 = 2.0 * y * (1.0 + y * y)
            elif o == TANH:
                d2 = -2.0 * y * (1.0 - y * y)
            elif o == SIGMOID:
                d2 = y * (1.0 - y) * (1.0 - 2.0 * y)
            elif o == RECIPROCAL:
                d2 = 2.0 * y * y * y
            elif o == POW_S:
                # c == 0 and c == 1 have a constant derivative (PyTorch's 0 for c == 0)
                d2 = 0.0 if (c == 0.0 or c == 1.0) else c * (c - 1.0) * x ** (c - 2.0)
            elif o == RPOW_S:
                # base 0: the derivative is a constant mask
                d2 = 0.0 if c == 0.0 else y * np.log(c) * np.log(c)
            else:   # SOFTPLUS
                beta = faux[ip[r]]
                if beta * x > faux[ip[r] + 1]:
                    d2 = 0.0
                else:
                    z = 1.0 / (1.0 + np.exp(-beta * x))
                    d2 = beta * z * (1.0 - z)
            gx0[i] += g[i] * d2 * tans[t0 + i]


@kernel
def curvature(op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, tans, stride, dgrads,
              need, hi, lo):
    """Forward over reverse, first half: the sources of the tangent of a backward sweep.

    The backward rules are linear in g, so the tangent of the gradient arena is ``sweep``
    run on an arena that starts with, for every record, g times the tangent of its local
    derivative (nothing for the linear and piecewise linear ops).  This kernel adds those
    sources into row s of ``dgrads`` for each seed s; ``grads`` is the arena after
    ``sweep``, ``tans`` the value tangents of the seeds (``stride`` apart, from ``tangent``).
    Sweeping each row afterwards leaves H t at the leaves.  Returns -1, or the first record
    whose op has no rule here (the caller takes another route).
    """
    for r in range(hi - 1, lo - 1, -1):
        if not need[r]:
            continue
        o = op[r]
        if o <= EXTERN or o == CMP or o == GUARD:
            continue
        if o == ADD or o == ADD_S or o == SUB or o == SUB_S or o == RSUB_S or o == NEG or \
                o == MUL_S or o == DIV_S or o == ABS or o == RELU or o == CLAMP or \
                o == CLAMP_MIN or o == CLAMP_MAX or o == MAXIMUM or o == MINIMUM or \
                o == WHERE or o == SUM or o == SUM_DIM or o == MEAN or o == MEAN_DIM or \
                o == MAX or o == MIN or o == AMAX or o == AMIN or o == MAX_DIM or \
                o == MIN_DIM or o == GATHER or o == BCAST or o == EXPAND_S or o == SCATTER or \
                o == RESHAPE or o == CAT or o == STACK:
            continue
        if not (o == MUL or o == DIV or o == MATMUL or o == EXP or o == EXPM1 or o == LOG or
                o == LOG1P or o == SQRT or o == SIN or o == COS or o == TAN or o == TANH or
                o == SIGMOID or o == RECIPROCAL or o == POW_S or o == RPOW_S or
                o == SOFTPLUS or o == LOGSUMEXP or o == SOFTMAX or o == LOG_SOFTMAX):
            return r
        if size[r] == 1 and (o == MUL or o == TANH or o == SIN or o == EXP):
            # one-element records index the arenas directly, as in sweep
            g = grads[goff[r]]
            i0 = a0[r]
            for s in range(dgrads.shape[0]):
                t0 = tans[s * stride + voff[i0]]
                if o == MUL:
                    i1 = a1[r]
                    if need[i0]:
                        dgrads[s, goff[i0]] += g * tans[s * stride + voff[i1]]
                    if need[i1]:
                        dgrads[s, goff[i1]] += g * t0
                elif o == TANH:
                    y = vals[voff[r]]
                    dgrads[s, goff[i0]] -= g * 2.0 * y * (1.0 - y * y) * t0
                elif o == SIN:
                    dgrads[s, goff[i0]] -= g * np.sin(vals[voff[i0]]) * t0
                else:
                    dgrads[s, goff[i0]] += g * vals[voff[r]] * t0
            continue
        for s in range(dgrads.shape[0]):
            curvature_rule(o, r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, tans,
                           s * stride, dgrads[s], need)
    return -1
