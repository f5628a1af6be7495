"""Records that bring values onto the tape, and ops that move values without arithmetic:
gathers (indexing, permutes, expansions), reshapes, concatenation, scatters.

Every gradient rule here is linear and value-free, so none has a curvature term.
"""
import math

import numpy as np

from .._config import inline, rule
from .elementwise import pass_vjp
from .table import ARRAY, DATA, LINEAR, constants, declare


@inline
def _seg(arr, off, n):
    return arr[off:off + n]


@inline
def _copy(dst, src):
    """dst[:] = src for views of one arena, as an element loop over views indexed from 0: a
    slice assignment copies its source first when both are views of one array (an
    allocation per call), and offsets into the arena keep LLVM from vectorising the loop."""
    for q in range(dst.size):
        dst[q] = src[q]


# --- records that only bring a value onto the tape (not shown as grad_fn nodes) -------------
LEAF = declare(0, "AccumulateGrad", family=DATA)      # a leaf that requires grad
CONST = declare(1, "Constant", family=DATA)           # a value that needs no gradient
EXTERN = declare(2, "Extern", family=DATA)            # a tensor recorded on an older tape


# --- comparisons: ip = 0 lt, 1 le, 2 gt, 3 ge, 4 eq, 5 ne; a1 = -1 compares with fp -------
# Recorded only while ``tapegrad.compile`` traces a function, so that replay recomputes them;
# no gradient.
@inline
def compare(k, u, v):
    if k == 0:
        return u < v
    if k == 1:
        return u <= v
    if k == 2:
        return u > v
    if k == 3:
        return u >= v
    if k == 4:
        return u == v
    return u != v


@rule
def cmp_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    n = size[r]
    out = _seg(vals, voff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    k = ip[r]
    for i in range(n):
        v = vals[voff[a1[r]] + i] if a1[r] >= 0 else fp[r]
        out[i] = 1.0 if compare(k, x0[i], v) else 0.0


def _check_cmp(a, r, fail):
    if a.a1[r] != -1:
        a.record(a.a1[r], r, "second input")
        if a.size[a.a1[r]] != a.size[r]:
            fail(f"record {r}: elementwise operands differ in size")
    if a.size[a.a0[r]] != a.size[r]:
        fail(f"record {r}: input and output differ in size")


CMP = declare(110, "Comparison", family=DATA, check=_check_cmp, forward=cmp_fwd)


# --- guards: a Python read of a value; replay checks that a0's value still equals
# faux[ip:ip+size] -------------------------------------------------------------------------
@inline
def guard_holds(r, a0, voff, size, ip, faux, vals):
    n = size[r]
    got = _seg(vals, voff[a0[r]], n)
    want = faux[ip[r]:ip[r] + n]
    for i in range(n):
        if got[i] != want[i] and not (got[i] != got[i] and want[i] != want[i]):
            return False
    return True


def _check_guard(a, r, fail):
    if a.size[r] != a.size[a.a0[r]] or a.ip[r] < 0 or a.ip[r] + a.size[r] > len(a.faux):
        fail(f"record {r}: guard values out of range")


GUARD = declare(111, "Guard", family=DATA, check=_check_guard)


# the one-element form of every copy below (generated code)
@inline
def copy_fwd(x0, x1, x2, c, p0, p1):
    return x0


_COPY = dict(scalar_forward=copy_fwd, scalar_vjp=pass_vjp)


# --- gather: out[k] = x[aux[ip+2+k]]; aux[ip] = variant, aux[ip+1] = n ----------------------
@rule
def gather_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
               beta1):
    # scatter-add handles repeated indices
    if not need[a0[r]]:
        return  # a hidden expansion of an operand that takes no gradient
    n = size[r]
    g = _seg(grads, goff[r], n)
    base = goff[a0[r]]
    idx = aux[ip[r] + 2: ip[r] + 2 + n]
    for k in range(n):
        grads[base + idx[k]] += g[k]


@rule
def gather_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    n = size[r]
    out = _seg(vals, voff[r], n)
    src = _seg(vals, voff[a0[r]], size[a0[r]])   # a view: see gather_tan
    idx = aux[ip[r] + 2: ip[r] + 2 + n]
    for k in range(n):
        out[k] = src[idx[k]]


@rule
def gather_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    # views indexed from 0 (see elementwise.tangent): no wraparound test per element
    n = size[r]
    tout = _seg(tans, b + voff[r], n)
    t0 = _seg(tans, b + voff[a0[r]], size[a0[r]])
    idx = aux[ip[r] + 2: ip[r] + 2 + n]
    for q in range(n):
        tout[q] = t0[idx[q]]


def _check_gather(a, r, fail):
    a.aux_span(r, a.ip[r], 2)
    if a.aux[a.ip[r] + 1] != a.size[r]:
        fail(f"record {r}: index length does not match")
    a.aux_span(r, a.ip[r] + 2, a.size[r])
    idx = a.aux[a.ip[r] + 2: a.ip[r] + 2 + a.size[r]]
    if idx.size and (idx.min() < 0 or idx.max() >= a.size[a.a0[r]]):
        fail(f"record {r}: index out of range")


_GATHER_NAMES = {
    0: "Expand", 1: "ExpandBackward0", 2: "SelectBackward0", 3: "SliceBackward0",
    4: "IndexBackward0", 5: "PermuteBackward0", 6: "TransposeBackward0", 7: "TBackward0",
    8: "AliasBackward0", 9: "UnsqueezeBackward0", 10: "SqueezeBackward0",
    11: "SqueezeBackward1", 12: "ViewBackward0", 13: "CloneBackward0", 14: "CopySlices",
    15: "SqueezeBackward2", 16: "UnsafeViewBackward0", 17: "ReshapeAliasBackward0",
    18: "AsStridedBackward0", 19: "DiagonalBackward0", 20: "SplitBackward0",
    21: "SplitWithSizesBackward0", 22: "UnbindBackward0", 23: "IndexSelectBackward0",
    24: "FlipBackward0", 25: "RollBackward0", 26: "RepeatBackward0", 27: "GatherBackward0",
    28: "TakeBackward0",
    # selections whose indices come from the input's values (functional.py guards them
    # while tracing, so a replay never reuses indices of other values)
    29: "SortBackward0", 30: "SortBackward1", 31: "TopkBackward0", 32: "KthvalueBackward0",
    33: "MedianBackward1", 34: "NanmedianBackward1", 35: "ModeBackward0",
    36: "CummaxBackward0", 37: "CumminBackward0",
    # PyTorch's nodes of the in-place view ops (inplace.py), and of the ops that replace some
    # elements with those of a source (derived.py: a gather from [input, source])
    38: "SqueezeBackward3", 39: "SqueezeBackward4", 40: "SqueezeBackward5",
    41: "UnsqueezeBackward1", 42: "TBackward1", 43: "MaskedScatterBackward0",
    44: "PutBackward0", 45: "IndexPutBackward0", 46: "UnfoldBackward0",
    47: "TransposeBackward1",
    # ops that write a source into a slice, a selection or a diagonal, or reduce sources
    # into the input (derived.py: a gather from [input, source] or from reduced rows)
    48: "SliceScatterBackward0", 49: "SelectScatterBackward0", 50: "DiagonalScatterBackward0",
    51: "ScatterReduceBackward0", 52: "IndexReduceBackward0",
    # copies that name a composite (renorm's product, lu_unpack's triangles, ...) as
    # PyTorch's one node
    54: "RenormBackward0", 55: "LuUnpackBackward0", 56: "LinalgLuBackward0",
    57: "LinalgLuSolveBackward0", 58: "CholeskyInverseBackward0",
    59: "TriangularSolveBackward0",
    # PyTorch's nodes of ops composed from others whose last record only renames the result
    # (derived.py: a RESHAPE of the same shape or a GATHER that copies); numbered from 60 so
    # that variants added meanwhile on other branches keep 48 onwards
    60: "AngleBackward0", 61: "NextafterBackward0", 62: "UnsafeSplitBackward0",
    63: "UnsafeSplitWithSizesBackward0", 64: "NarrowCopyBackward0",
    # the in-place as_strided_ (strided_views.py), named apart from the view op's 18
    65: "AsStridedBackward1",
}
# the variants above whose indices were chosen by value: PyTorch saves them (a second backward
# without retain_graph fails), and they hold only for the values they were chosen from
VALUE_SELECTED = frozenset(range(29, 38))
GATHER = declare(100, "IndexBackward0", family=ARRAY, variants=_GATHER_NAMES,
                 check=_check_gather, backward=gather_bwd, forward=gather_fwd,
                 tangent=gather_tan, curvature=LINEAR, **_COPY)
# A hidden expansion for implicit broadcasting: same rules as GATHER, no grad_fn of its own.
BCAST = declare(104, "Broadcast", family=ARRAY, check=_check_gather, backward=gather_bwd,
                forward=gather_fwd, tangent=gather_tan, curvature=LINEAR, **_COPY)


# --- reshape: keeps the flat order, out = x; aux[ip] = variant (names as for GATHER) ----------
@rule
def reshape_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
                beta1):
    n = size[r]
    g = _seg(grads, goff[r], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    for i in range(n):
        gx0[i] += g[i]


@rule
def reshape_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    n = size[r]
    _copy(_seg(vals, voff[r], n), _seg(vals, voff[a0[r]], n))


@rule
def reshape_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    if voff[a0[r]] != voff[r]:
        n = size[r]
        _copy(_seg(tans, b + voff[r], n), _seg(tans, b + voff[a0[r]], n))


def _check_reshape(a, r, fail):
    if a.size[a.a0[r]] != a.size[r]:
        fail(f"record {r}: reshape changes the size")


RESHAPE = declare(101, "ViewBackward0", family=ARRAY, variants=_GATHER_NAMES,
                  check=_check_reshape, backward=reshape_bwd, forward=reshape_fwd,
                  tangent=reshape_tan, curvature=LINEAR, **_COPY)


# --- cat, stack: aux[ip] = k inputs, then k (record, offset-in-output-block, block-size)
# rows, then O (outer count) and the output's block length; a0 = the first input ----------
@rule
def cat_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
            beta1):
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
        # element loops (see cat_fwd): ``+=`` on slices builds a temporary per block
        for o in range(o_n):
            part = _seg(gx, o * width, width)
            piece = _seg(g, o * block + start, width)
            for q in range(width):
                part[q] += piece[q]


@rule
def cat_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    out = _seg(vals, voff[r], size[r])
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
            _copy(_seg(out, ob * block + start, width), _seg(x, ob * width, width))


@rule
def cat_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    tout = b + voff[r]
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
            part = _seg(tans, tout + ob * block + start, width)
            if live:
                _copy(part, _seg(tans, ts + ob * width, width))
            else:
                part[:] = 0.0


def _check_cat(a, r, fail):
    ip, aux = a.ip[r], a.aux
    a.aux_span(r, ip, 1)
    k = int(aux[ip])
    a.aux_span(r, ip + 1, 3 * k + 2)
    outer, block = int(aux[ip + 1 + 3 * k]), int(aux[ip + 2 + 3 * k])
    if outer < 0 or block < 0 or outer * block != a.size[r]:
        fail(f"record {r}: concatenation sizes do not add up")
    if k < 1 or a.a0[r] != int(aux[ip + 1]) or a.a1[r] != -1:
        fail(f"record {r}: concatenation inputs do not match")
    for j in range(k):
        src, start, width = aux[ip + 1 + 3 * j: ip + 4 + 3 * j].tolist()
        a.record(src, r, "concatenation input")
        if start < 0 or width < 0 or start + width > block or outer * width != a.size[src]:
            fail(f"record {r}: concatenation input {j} does not fit")


# ``inputs="aux"``: the inputs are listed in aux, not in a0/a1 (plan and sweep walk them)
CAT = declare(102, "CatBackward0", family=ARRAY, check=_check_cat, backward=cat_bwd,
              forward=cat_fwd, tangent=cat_tan, curvature=LINEAR)
STACK = declare(103, "StackBackward0", family=ARRAY, check=_check_cat, backward=cat_bwd,
                forward=cat_fwd, tangent=cat_tan, curvature=LINEAR)
MANY_INPUTS = frozenset({CAT, STACK})


# --- scatter: the transpose of GATHER, out[aux[ip+2+k]] += x[k] for k < size of x;
# aux[ip+1] = size of x.  Differentiable backward passes (create_graph) undo a gather. -----
@rule
def scatter_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need,
                beta0, beta1):
    # gx[k] = g[idx[k]]: the gather that this scatter undoes
    n_in = aux[ip[r] + 1]
    base = goff[r]
    gx0 = _seg(grads, goff[a0[r]], n_in)
    idx = aux[ip[r] + 2: ip[r] + 2 + n_in]
    for k in range(n_in):
        gx0[k] += grads[base + idx[k]]


@rule
def scatter_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    out = _seg(vals, voff[r], size[r])
    n_in = aux[ip[r] + 1]
    x0 = _seg(vals, voff[a0[r]], n_in)
    idx = aux[ip[r] + 2: ip[r] + 2 + n_in]
    out[:] = 0.0
    for k in range(n_in):
        out[idx[k]] += x0[k]


@rule
def scatter_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    tout = b + voff[r]
    n_in = aux[ip[r] + 1]
    t0 = b + voff[a0[r]]
    for q in range(size[r]):
        tans[tout + q] = 0.0
    for q in range(n_in):
        tans[tout + aux[ip[r] + 2 + q]] += tans[t0 + q]


def _check_scatter(a, r, fail):
    s0 = a.size[a.a0[r]]
    a.aux_span(r, a.ip[r], 2)
    if a.aux[a.ip[r] + 1] != s0:
        fail(f"record {r}: index length does not match")
    a.aux_span(r, a.ip[r] + 2, s0)
    idx = a.aux[a.ip[r] + 2: a.ip[r] + 2 + s0]
    if idx.size and (idx.min() < 0 or idx.max() >= a.size[r]):
        fail(f"record {r}: index out of range")


SCATTER = declare(105, "IndexAddBackward0", family=ARRAY, check=_check_scatter,
                  backward=scatter_bwd, forward=scatter_fwd, tangent=scatter_tan,
                  curvature=LINEAR)


# --- write in place (``buf[j] = v``, PyTorch's CopySlices): out = a0 with the elements at
# aux[ip+1 .. ip+1+m] replaced by a1's m values, m = aux[ip].  The record's value *is* a0's
# memory (voff[r] == voff[a0]), so a write costs the slice, not the base; a0's handle has
# moved to this record, so nothing reads a0 after it (the version log refuses a backward
# that would need a0's old values).  ``plan`` gives a0 this record's gradient memory too:
# the backward then moves the written elements' gradient to a1 and zeroes them there,
# again in time proportional to the slice. -------------------------------------------------
@rule
def write_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
              beta1):
    m = aux[ip[r]]
    idx = aux[ip[r] + 1: ip[r] + 1 + m]
    g = goff[r]
    s1 = a1[r]
    if need[s1]:
        g1 = goff[s1]
        for k in range(m):
            grads[g1 + k] += grads[g + idx[k]]
    s0 = a0[r]
    if not need[s0]:
        return
    if goff[s0] == g:
        # a0's gradient is this record's minus the written elements
        for k in range(m):
            grads[g + idx[k]] = 0.0
        return
    # a0 has gradient memory of its own (autograd reads this record's gradient afterwards)
    keep = np.ones(size[r], dtype=np.bool_)
    for k in range(m):
        keep[idx[k]] = False
    g0 = goff[s0]
    for i in range(size[r]):
        if keep[i]:
            grads[g0 + i] += grads[g + i]


@rule
def write_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    out = voff[r]       # a0's memory (the tape-file check refuses a record that is not)
    src = voff[a1[r]]
    m = aux[ip[r]]
    for k in range(m):
        vals[out + aux[ip[r] + 1 + k]] = vals[src + k]


@rule
def write_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    # in record order, as the values: a0's readers took its tangent before this overwrites
    # it (a0's tangent is this record's memory)
    tout = b + voff[r]
    t1 = b + voff[a1[r]]
    m = aux[ip[r]]
    for k in range(m):
        tans[tout + aux[ip[r] + 1 + k]] = tans[t1 + k]


def _check_write(a, r, fail):
    ip, aux = a.ip[r], a.aux
    a.aux_span(r, ip, 1)
    m = int(aux[ip])
    a.aux_span(r, ip + 1, m)
    s0, s1 = a.a0[r], a.a1[r]
    if a.size[s0] != a.size[r] or a.size[s1] != m:
        fail(f"record {r}: write sizes do not match")
    idx = aux[ip + 1: ip + 1 + m]
    if idx.size and (idx.min() < 0 or idx.max() >= a.size[r]):
        fail(f"record {r}: index out of range")
    if a.voff[r] != a.voff[s0]:
        fail(f"record {r}: an in-place write has memory of its own")
    if a.voff[s1] < a.voff[r] + a.size[r] and a.voff[r] < a.voff[s1] + a.size[s1]:
        fail(f"record {r}: an in-place write reads the memory it writes")


# No curvature rule: records before it may read a0's tangent, which it overwrites, in the
# reverse order of a curvature sweep; second order takes its other route (a recorded
# gradient, where setitem records a copy instead: see inplace.setitem).
# (freed by a backward, as PyTorch's CopySlices, which drops the function it wraps: a second
# backward without retain_graph fails)
WRITE = declare(97, "CopySlices", family=ARRAY, arity=2, frees=True, check=_check_write,
                backward=write_bwd, forward=write_fwd, tangent=write_tan, curvature=None)


# --- replace: out = a0 with a1's m values written, in order, at the flat positions
# aux[ip+2 .. ip+2+m] (repeats allowed: the last write wins); aux[ip] = variant (names as for
# GATHER), aux[ip+1] = m.  The scatter family (scatter, index_put, index_copy, put,
# masked_scatter, ``x[idx] = v`` while tracing) records this instead of a gather from
# [a0, a1]: PyTorch's formulas give every source element the gradient at its target, also
# an element a later write overwrote (``grad.gather(dim, index)``, ``grad[indices]``), which
# is no derivative of the values and so no composition of other records; a0 gets the
# gradient of the elements nothing was written to. -------------------------------------------
@rule
def replace_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
                beta1):
    n = size[r]
    m = aux[ip[r] + 1]
    g = _seg(grads, goff[r], n)
    pos = aux[ip[r] + 2: ip[r] + 2 + m]
    if need[a1[r]]:
        g1 = _seg(grads, goff[a1[r]], m)
        for k in range(m):
            g1[k] += g[pos[k]]
    if need[a0[r]]:
        keep = np.ones(n, dtype=np.bool_)
        for k in range(m):
            keep[pos[k]] = False
        g0 = _seg(grads, goff[a0[r]], n)
        for i in range(n):
            if keep[i]:
                g0[i] += g[i]


@rule
def replace_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    n = size[r]
    m = aux[ip[r] + 1]
    out = _seg(vals, voff[r], n)
    _copy(out, _seg(vals, voff[a0[r]], n))
    src = _seg(vals, voff[a1[r]], m)
    pos = aux[ip[r] + 2: ip[r] + 2 + m]
    for k in range(m):
        out[pos[k]] = src[k]


@rule
def replace_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    # the values' rule on the tangents (PyTorch's: the tangent of the written source wins)
    n = size[r]
    m = aux[ip[r] + 1]
    tout = _seg(tans, b + voff[r], n)
    if d0:
        _copy(tout, _seg(tans, b + voff[a0[r]], n))
    else:
        tout[:] = 0.0
    pos = aux[ip[r] + 2: ip[r] + 2 + m]
    if d1:
        t1 = _seg(tans, b + voff[a1[r]], m)
        for k in range(m):
            tout[pos[k]] = t1[k]
    else:
        for k in range(m):
            tout[pos[k]] = 0.0


def replace_graph(F, g, x0, x1, out, c):
    # the same rule in recorded ops (create_graph): a gather for the source, a mask for a0
    tape, r = out._tape, out._r
    ip = tape.ip[r]
    m = int(tape.aux[ip + 1])
    pos = np.array(tape.aux[ip + 2: ip + 2 + m], dtype=np.int64)
    keep = np.ones(tape.size[r])
    keep[pos] = 0.0
    gx0 = F.mul(g, F._plain(keep)) if x0 is not None else None
    gx1 = F._gathered(g, pos, 0) if x1 is not None else None
    return gx0, gx1


def _check_replace(a, r, fail):
    a.aux_span(r, a.ip[r], 2)
    m = int(a.aux[a.ip[r] + 1])
    a.aux_span(r, a.ip[r] + 2, m)
    if a.size[a.a0[r]] != a.size[r] or a.a1[r] < 0 or a.size[a.a1[r]] != m:
        fail(f"record {r}: replace sizes do not match")
    pos = a.aux[a.ip[r] + 2: a.ip[r] + 2 + m]
    if pos.size and (pos.min() < 0 or pos.max() >= a.size[r]):
        fail(f"record {r}: index out of range")


# (175: away from the codes other branches add after 144)
# (freed by a backward: PyTorch's nodes save their indices or mask, and CopySlices drops the
# function it wraps, so a second backward without retain_graph fails; autograd spares the
# variants of REPLACE_UNSAVED)
REPLACE = declare(175, "IndexPutBackward0", family=ARRAY, arity=2, variants=_GATHER_NAMES,
                  frees=True, check=_check_replace, backward=replace_bwd, forward=replace_fwd,
                  tangent=replace_tan, curvature=LINEAR, graph=replace_graph)
# the variants of REPLACE whose PyTorch node saves no tensor (slice_scatter, select_scatter and
# diagonal_scatter keep sizes and numbers): a second backward goes through them
REPLACE_UNSAVED = frozenset({48, 49, 50})


# --- expand by strides: implicit broadcasting of a binary op's operand.  aux[ip] = ndim, then
# the output shape, then the source stride of each output dim (0 where the operand is
# broadcast).  Same meaning as BCAST, without O(n) side data. ------------------------------
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
def _odometer_step(count, src, shp, strides, d):
    """Advance the output position over dims d, d-1, ... 0; return the new source offset."""
    while d >= 0:
        count[d] += 1
        src += strides[d]
        if count[d] < shp[d]:
            break
        src -= strides[d] * shp[d]
        count[d] = 0
        d -= 1
    return src


@rule
def expand_s_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need,
                 beta0, beta1):
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
        # local accumulator, same additions in the same order.  Adding each row into gx0
        # as an arena slice took 51 us for W3's (256, 256) bias gradient inside the sweep,
        # this 9 us (an explicit loop into gx0, which may overlap g: 34 us).  Loops, not
        # a 2-D view, a copy and a slice assignment: with those this entry's first compile
        # took 2.8-3.0 s, with loops 1.1 s.
        acc = np.empty(inner)
        for i in range(inner):
            acc[i] = gx0[i]
        for k in range(n // inner):
            row = g[k * inner:(k + 1) * inner]    # (i alone indexes it: vectorised)
            for i in range(inner):
                acc[i] += row[i]
        for i in range(inner):
            gx0[i] = acc[i]
        return
    count = np.zeros(nd, dtype=np.int64)
    src = 0
    k = 0
    while k < n:
        if step == 1:
            dest, run = gx0[src:src + inner], g[k:k + inner]    # (i alone indexes them)
            for i in range(inner):
                dest[i] += run[i]
        elif step == 0:
            acc = gx0[src]
            for i in range(inner):
                acc += g[k + i]
            gx0[src] = acc
        else:
            for i in range(inner):
                gx0[src + i * step] += g[k + i]
        k += inner
        src = _odometer_step(count, src, shp, strides, nd - 2)


@rule
def expand_s_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    n = size[r]
    out = _seg(vals, voff[r], n)
    nd = aux[ip[r]]
    shp = aux[ip[r] + 1: ip[r] + 1 + nd]
    strides = aux[ip[r] + 1 + nd: ip[r] + 1 + 2 * nd]
    x0 = vals[voff[a0[r]]:]
    if nd == 0:
        if n == 1:
            out[0] = x0[0]
        return
    # the last axis as one run per step of the walk (see expand_s_bwd)
    inner = shp[nd - 1]
    step = strides[nd - 1]
    if _row_broadcast(strides, nd, inner):
        # a bias broadcast over rows: the same run in every row, written from a local
        # copy (W3's (256, 256): 9 us; a slice copy per row: 20 us), in loops (see
        # expand_s_bwd: with a copy, a 2-D view and slice assignments this entry's first
        # compile took 2.9 s, with loops 0.9 s)
        row = np.empty(inner)
        for i in range(inner):
            row[i] = x0[i]
        for k in range(n // inner):
            dest = out[k * inner:(k + 1) * inner]  # (i alone indexes it: vectorised)
            for i in range(inner):
                dest[i] = row[i]
        return
    count = np.zeros(nd, dtype=np.int64)
    src = 0
    k = 0
    while k < n:
        if step == 1:
            dest, run = out[k:k + inner], x0[src:src + inner]   # (i alone indexes them)
            for i in range(inner):
                dest[i] = run[i]
        else:
            for i in range(inner):
                out[k + i] = x0[src + i * step]
        k += inner
        src = _odometer_step(count, src, shp, strides, nd - 2)


@rule
def expand_s_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    n = size[r]
    tout = b + voff[r]
    nd = aux[ip[r]]
    shp = aux[ip[r] + 1: ip[r] + 1 + nd]
    strides = aux[ip[r] + 1 + nd: ip[r] + 1 + 2 * nd]
    t0 = b + voff[a0[r]]
    count = np.zeros(nd, dtype=np.int64)
    src = 0
    for q in range(n):
        tans[tout + q] = tans[t0 + src]
        src = _odometer_step(count, src, shp, strides, nd - 1)


def _check_expand(a, r, fail):
    ip, aux = a.ip[r], a.aux
    a.aux_span(r, ip, 1)
    nd = int(aux[ip])
    a.aux_span(r, ip + 1, 2 * nd)
    shp = aux[ip + 1: ip + 1 + nd].tolist()
    strides = aux[ip + 1 + nd: ip + 1 + 2 * nd].tolist()
    if nd < 0 or min(shp + strides + [0]) < 0 or math.prod(shp) != a.size[r]:
        fail(f"record {r}: expansion shape does not match")
    if a.size[r] and sum((d - 1) * st for d, st in zip(shp, strides)) >= a.size[a.a0[r]]:
        fail(f"record {r}: expansion reads outside its input")


EXPAND_S = declare(106, "Broadcast", family=ARRAY, check=_check_expand,
                   backward=expand_s_bwd, forward=expand_s_fwd, tangent=expand_s_tan,
                   curvature=LINEAR, **_COPY)

constants(globals())
