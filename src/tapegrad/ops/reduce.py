"""Reductions, softmax and norms: the input viewed as (O, R, I), the output as (O, I).

``aux[ip:ip+3] = O, R, I``; some ops keep more after those (prod's mode, var's flags,
max(dim)'s argmax).  Each block declares the op's whole-record rules, all with the array
family's signatures (``dispatch.py``); a rule given as ``(fn, flag, ...)`` is called with
those constant flags after the record's columns.
"""
import numpy as np

from .._config import inline, rule
from .table import ARRAY, LINEAR, READS_OUT, READS_X0, constants, declare


@inline
def _seg(arr, off, n):
    return arr[off:off + n]


@inline
def _shape(r, ip, aux):
    return aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]


# --- sum, mean (fp = 1 for sum, 1/R for mean) -------------------------------------------------
@rule
def sum_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
            beta1):
    o_n, r_n, i_n = _shape(r, ip, aux)
    scale = fp[r]
    g = _seg(grads, goff[r], o_n * i_n)
    gx0 = _seg(grads, goff[a0[r]], o_n * r_n * i_n)
    # plain loops: an array expression (``gx0[a:b] += gb * scale``) makes numba compile its
    # broadcast-mismatch message, 4 s of the first backward on a fresh machine
    if i_n == 1:
        # a sum over the last dim (a whole-tensor sum): one loop LLVM vectorises, 8x faster
        for o in range(o_n):
            go = g[o] * scale
            part = _seg(gx0, o * r_n, r_n)
            for k in range(r_n):
                part[k] += go
        return
    for o in range(o_n):
        for k in range(r_n):
            base = (o * r_n + k) * i_n
            for i in range(i_n):
                gx0[base + i] += g[o * i_n + i] * scale


@rule
def sum_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext, mean):
    o_n, r_n, i_n = _shape(r, ip, aux)
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
    for ob in range(o_n):
        for i in range(i_n):
            acc = 0.0
            for k in range(r_n):
                acc += x0[(ob * r_n + k) * i_n + i]
            # divided by the count, as NumPy's mean does (fp = 1/count rounds differently)
            out[ob * i_n + i] = acc / r_n if mean else acc


@rule
def sum_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    o_n, r_n, i_n = _shape(r, ip, aux)
    tout = b + voff[r]
    t0 = b + voff[a0[r]]
    scale = fp[r]
    for ob in range(o_n):
        for i in range(i_n):
            acc = 0.0
            for k in range(r_n):
                acc += tans[t0 + (ob * r_n + k) * i_n + i]
            tans[tout + ob * i_n + i] = acc * scale


# of one value (generated code): acc = 0.0; acc += x is 0.0 + x (-0.0 becomes 0.0)
@inline
def sum_one_fwd(x0, x1, x2, c, p0, p1):
    return 0.0 + x0


@inline
def sum_one_vjp(g, x0, x1, x2, out, c, p0, p1):
    return g * c


_SUM_RULES = dict(backward=sum_bwd, tangent=sum_tan, curvature=LINEAR,
                  scalar_forward=sum_one_fwd, scalar_vjp=sum_one_vjp)
SUM = declare(60, "SumBackward0", family=ARRAY, forward=(sum_fwd, False), **_SUM_RULES)
SUM_DIM = declare(61, "SumBackward1", family=ARRAY, forward=(sum_fwd, False), **_SUM_RULES)
MEAN = declare(62, "MeanBackward0", family=ARRAY, forward=(sum_fwd, True), **_SUM_RULES)
MEAN_DIM = declare(63, "MeanBackward1", family=ARRAY, forward=(sum_fwd, True), **_SUM_RULES)


# --- prod: aux[ip+3] = mode: 0 over a dim, 1 over everything, 2 a 0-d input -----------------
@rule
def prod_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
             beta1):
    # PyTorch's rule, zeros and all.  Mode 2: the gradient passes.  Without a zero anywhere in
    # the input: g*out/x.  Otherwise each entry gets the product of the others (prefix *
    # suffix products), except that the full product of an input with several zeros has
    # gradient 0.
    o_n, r_n, i_n = _shape(r, ip, aux)
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


@rule
def prod_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    o_n, r_n, i_n = _shape(r, ip, aux)
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
    for ob in range(o_n):
        for i in range(i_n):
            acc = 1.0
            for k in range(r_n):
                acc *= x0[(ob * r_n + k) * i_n + i]
            out[ob * i_n + i] = acc


@rule
def prod_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    o_n, r_n, i_n = _shape(r, ip, aux)
    n_in = o_n * r_n * i_n
    tout = b + voff[r]
    t0 = b + voff[a0[r]]
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], n_in)
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
                # each entry's weight: the product of the others
                for k in range(r_n):
                    w = 1.0
                    for m in range(r_n):
                        if m != k:
                            w *= x0[(ob * r_n + m) * i_n + i]
                    acc += tans[t0 + (ob * r_n + k) * i_n + i] * w
            tans[tout + j] = acc


def _check_prod(a, r, fail):
    a.aux_span(r, a.ip[r], 4)


# no curvature rule: hessians through prod take the create_graph route
PROD = declare(64, "ProdBackward0", family=ARRAY, reads=READS_X0 | READS_OUT, masks=True,
               check=_check_prod, backward=prod_bwd, forward=prod_fwd, tangent=prod_tan,
               curvature=None)
PROD_DIM = declare(65, "ProdBackward1", family=ARRAY, reads=READS_X0 | READS_OUT, masks=True,
                   check=_check_prod, backward=prod_bwd, forward=prod_fwd, tangent=prod_tan,
                   curvature=None)


# --- max, min, amax, amin, max(dim), min(dim) ------------------------------------------------
@rule
def extreme_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext, is_max, keep_arg):
    """The largest (smallest) entry of each slice, nan if any is; with ``keep_arg`` its index
    goes to aux[ip+3+j] (max(dim)'s indices, which its backward routes through)."""
    o_n, r_n, i_n = _shape(r, ip, aux)
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
    for ob in range(o_n):
        for i in range(i_n):
            j = ob * i_n + i
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
            if keep_arg:
                aux[ip[r] + 3 + j] = arg


@rule
def extreme_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
                beta1, nan_matches):
    # The gradient is split evenly among the entries equal to the result.  ``nan_matches``:
    # max()/min()/median(), where a nan result ties with the nan entries; amax/amin's nan
    # result matches nothing, so its slice gets g/0 * 0 = nan, as in PyTorch.
    o_n, r_n, i_n = _shape(r, ip, aux)
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
                if v == out[j] or (nan_matches and v != v and out[j] != out[j]):
                    ties += 1
            if ties == 0 and nan_matches:
                continue
            share = g[j] / ties if ties else g[j] * np.nan
            for k in range(r_n):
                p = (o * r_n + k) * i_n + i
                v = x0[p]
                if v == out[j] or (nan_matches and v != v and out[j] != out[j]):
                    gx0[p] += share
                elif not nan_matches:
                    # PyTorch's amax backward is (g / ties) * mask: an infinite or nan g
                    # reaches the other entries as nan
                    gx0[p] += share * 0.0


@rule
def extreme_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep,
                nan_matches):
    # the mean of the tied entries' tangents; ``nan_matches``: max()/min(), where a nan
    # result ties with the nan entries (amax/amin's nan slice: its backward hands out g/0 * 0)
    o_n, r_n, i_n = _shape(r, ip, aux)
    tout = b + voff[r]
    t0 = b + voff[a0[r]]
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
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
                tans[tout + j] = 0.0 if nan_matches else np.nan


@rule
def select_dim_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need,
                   beta0, beta1):
    # max(dim)/min(dim): all of the gradient goes to the index the forward returned
    o_n, r_n, i_n = _shape(r, ip, aux)
    g = _seg(grads, goff[r], o_n * i_n)
    gx0 = _seg(grads, goff[a0[r]], o_n * r_n * i_n)
    idx = aux[ip[r] + 3: ip[r] + 3 + o_n * i_n]
    for o in range(o_n):
        for i in range(i_n):
            j = o * i_n + i
            gx0[(o * r_n + idx[j]) * i_n + i] += g[j]


@rule
def select_dim_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    o_n, r_n, i_n = _shape(r, ip, aux)
    tout = b + voff[r]
    t0 = b + voff[a0[r]]
    for ob in range(o_n):
        for i in range(i_n):
            j = ob * i_n + i
            tans[tout + j] = tans[t0 + (ob * r_n + aux[ip[r] + 3 + j]) * i_n + i]


def _check_select_dim(a, r, fail):
    o, red, i = (int(x) for x in a.aux[a.ip[r]: a.ip[r] + 3])
    a.aux_span(r, a.ip[r] + 3, o * i)
    idx = a.aux[a.ip[r] + 3: a.ip[r] + 3 + o * i]
    if idx.size and (idx.min() < 0 or idx.max() >= red):
        fail(f"record {r}: argmax index out of range")


MAX = declare(66, "MaxBackward1", family=ARRAY, reads=READS_X0 | READS_OUT, masks=True,
              backward=(extreme_bwd, True), forward=(extreme_fwd, True, False),
              tangent=(extreme_tan, True), curvature=LINEAR)
MIN = declare(67, "MinBackward1", family=ARRAY, reads=READS_X0 | READS_OUT, masks=True,
              backward=(extreme_bwd, True), forward=(extreme_fwd, False, False),
              tangent=(extreme_tan, True), curvature=LINEAR)
AMAX = declare(68, "AmaxBackward0", family=ARRAY, reads=READS_X0 | READS_OUT, masks=True,
               backward=(extreme_bwd, False), forward=(extreme_fwd, True, False),
               tangent=(extreme_tan, False), curvature=LINEAR)
AMIN = declare(69, "AminBackward0", family=ARRAY, reads=READS_X0 | READS_OUT, masks=True,
               backward=(extreme_bwd, False), forward=(extreme_fwd, False, False),
               tangent=(extreme_tan, False), curvature=LINEAR)
# routes to the argmax kept in aux
MAX_DIM = declare(70, "MaxBackward0", family=ARRAY, frees=True, masks=True,
                  check=_check_select_dim, backward=select_dim_bwd,
                  forward=(extreme_fwd, True, True), tangent=select_dim_tan, curvature=LINEAR)
MIN_DIM = declare(71, "MinBackward0", family=ARRAY, frees=True, masks=True,
                  check=_check_select_dim, backward=select_dim_bwd,
                  forward=(extreme_fwd, False, True), tangent=select_dim_tan,
                  curvature=LINEAR)


# --- var, std: fp = 1 / (R - correction) (inf when R == correction); aux[ip+3] = is_std,
# aux[ip+4] = whether the reduction is over everything (dim=None or a 0-d input) ----------
@rule
def var_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
            beta1):
    # STD first divides by 2*std, with 0 where std is 0.  As in PyTorch, a full reduction
    # with R <= correction has gradient inf (nan where x equals the mean), not 2/(R-c).
    o_n, r_n, i_n = _shape(r, ip, aux)
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


@rule
def var_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext, is_std):
    o_n, r_n, i_n = _shape(r, ip, aux)
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
    for ob in range(o_n):
        for i in range(i_n):
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
            out[ob * i_n + i] = np.sqrt(v) if is_std else v


@rule
def var_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    o_n, r_n, i_n = _shape(r, ip, aux)
    tout = b + voff[r]
    t0 = b + voff[a0[r]]
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
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


def _check_var(a, r, fail):
    a.aux_span(r, a.ip[r], 5)


# no curvature rules: hessians through var and std take the create_graph route
VAR = declare(72, "VarBackward0", family=ARRAY, reads=READS_X0, check=_check_var,
              backward=var_bwd, forward=(var_fwd, False), tangent=var_tan, curvature=None)
STD = declare(73, "StdBackward0", family=ARRAY, reads=READS_X0 | READS_OUT, check=_check_var,
              backward=var_bwd, forward=(var_fwd, True), tangent=var_tan, curvature=None)


# --- logsumexp ---------------------------------------------------------------------------------
@rule
def logsumexp_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need,
                  beta0, beta1):
    o_n, r_n, i_n = _shape(r, ip, aux)
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


@rule
def logsumexp_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    o_n, r_n, i_n = _shape(r, ip, aux)
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
    for ob in range(o_n):
        for i in range(i_n):
            m = -np.inf
            for k in range(r_n):
                m = max(m, x0[(ob * r_n + k) * i_n + i])
            if not np.isfinite(m):
                m = 0.0
            acc = 0.0
            for k in range(r_n):
                acc += np.exp(x0[(ob * r_n + k) * i_n + i] - m)
            out[ob * i_n + i] = np.log(acc) + m


@rule
def logsumexp_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    o_n, r_n, i_n = _shape(r, ip, aux)
    tout = b + voff[r]
    t0 = b + voff[a0[r]]
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
    for ob in range(o_n):
        for i in range(i_n):
            j = ob * i_n + i
            acc = 0.0
            for k in range(r_n):
                p = (ob * r_n + k) * i_n + i
                acc += tans[t0 + p] * np.exp(x0[p] - out[j])
            tans[tout + j] = acc


@rule
def logsumexp_curv(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, tans, b, dg,
                   need):
    # gx = g * s with s = exp(x - out): ds = s * (t - tout), with the output's tangent tout
    # that the tangent sweep left in tans
    o_n, r_n, i_n = _shape(r, ip, aux)
    g = _seg(grads, goff[r], size[r])
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
    out = _seg(vals, voff[r], size[r])
    gx0 = _seg(dg, goff[a0[r]], o_n * r_n * i_n)
    t0 = b + voff[a0[r]]
    tout = b + voff[r]
    for ob in range(o_n):
        for i in range(i_n):
            j = ob * i_n + i
            for k in range(r_n):
                p = (ob * r_n + k) * i_n + i
                gx0[p] += g[j] * np.exp(x0[p] - out[j]) * (tans[t0 + p] - tans[tout + j])


LOGSUMEXP = declare(74, "LogsumexpBackward0", family=ARRAY, reads=READS_X0 | READS_OUT,
                    backward=logsumexp_bwd, forward=logsumexp_fwd, tangent=logsumexp_tan,
                    curvature=logsumexp_curv)


# --- softmax, log_softmax along the reduced axis ------------------------------------------------
@rule
def softmax_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
                beta1):
    # gx = out * (g - sum(g * out)) along the reduced axis
    o_n, r_n, i_n = _shape(r, ip, aux)
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


@rule
def log_softmax_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need,
                    beta0, beta1):
    # gx = g - exp(out) * sum(g) along the reduced axis
    o_n, r_n, i_n = _shape(r, ip, aux)
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


@rule
def softmax_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext, log):
    o_n, r_n, i_n = _shape(r, ip, aux)
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
                if log:
                    out[p] = x0[p] - m - np.log(total)
                else:
                    out[p] = np.exp(x0[p] - m) / total


@rule
def softmax_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep, log):
    # softmax: J = diag(s) - s s^T;  log_softmax: J = I - 1 s^T (s = exp(out))
    o_n, r_n, i_n = _shape(r, ip, aux)
    n_in = o_n * r_n * i_n
    tout = b + voff[r]
    t0 = b + voff[a0[r]]
    outs = _seg(vals, voff[r], n_in)
    for ob in range(o_n):
        for i in range(i_n):
            dot = 0.0
            for k in range(r_n):
                p = (ob * r_n + k) * i_n + i
                s = np.exp(outs[p]) if log else outs[p]
                dot += s * tans[t0 + p]
            for k in range(r_n):
                p = (ob * r_n + k) * i_n + i
                if log:
                    tans[tout + p] = tans[t0 + p] - dot
                else:
                    tans[tout + p] = outs[p] * (tans[t0 + p] - dot)


@rule
def softmax_curv(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, tans, b, dg,
                 need, log):
    # softmax: gx = y * (g - <g, y>), so d = ty * (g - <g, y>) - y * <g, ty>;
    # log_softmax: gx = g - exp(y) * sum(g), so d = -exp(y) * ty * sum(g)
    o_n, r_n, i_n = _shape(r, ip, aux)
    g = _seg(grads, goff[r], size[r])
    out = _seg(vals, voff[r], size[r])
    gx0 = _seg(dg, goff[a0[r]], o_n * r_n * i_n)
    tout = b + voff[r]
    for ob in range(o_n):
        for i in range(i_n):
            dot = 0.0
            gsum = 0.0
            for k in range(r_n):
                p = (ob * r_n + k) * i_n + i
                dot += g[p] * (tans[tout + p] if log else out[p])
                gsum += g[p] if log else g[p] * tans[tout + p]
            for k in range(r_n):
                p = (ob * r_n + k) * i_n + i
                if log:
                    gx0[p] -= np.exp(out[p]) * tans[tout + p] * gsum
                else:
                    gx0[p] += tans[tout + p] * (g[p] - dot) - out[p] * gsum


def _check_same_size(a, r, fail):
    if a.size[a.a0[r]] != a.size[r]:
        fail(f"record {r}: softmax changes the size")


SOFTMAX = declare(75, "SoftmaxBackward0", family=ARRAY, reads=READS_OUT,
                  check=_check_same_size, backward=softmax_bwd, forward=(softmax_fwd, False),
                  tangent=(softmax_tan, False), curvature=(softmax_curv, False))
LOG_SOFTMAX = declare(76, "LogSoftmaxBackward0", family=ARRAY, reads=READS_OUT,
                      check=_check_same_size, backward=log_softmax_bwd,
                      forward=(softmax_fwd, True), tangent=(softmax_tan, True),
                      curvature=(softmax_curv, True))


# --- p-norm over the reduced axis: fp = p ---------------------------------------------------------
@rule
def norm_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
             beta1):
    # d||x||/dx = sgn(x) |x|^(p-1) / ||x||^(p-1), in PyTorch's spelling per range of p (so
    # that zeros, infinities and nan come out as PyTorch's): a zero norm gets gradient 0 for
    # p >= 1, a zero entry gets 0 for p < 1; sgn is 0 at 0 and at nan.
    o_n, r_n, i_n = _shape(r, ip, aux)
    g = _seg(grads, goff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
    gx0 = _seg(grads, goff[a0[r]], o_n * r_n * i_n)
    out = _seg(vals, voff[r], o_n * i_n)
    for o in range(o_n):
        for k in range(r_n):
            for i in range(i_n):
                q = (o * r_n + k) * i_n + i
                j = o * i_n + i
                gx0[q] += _norm_term(x0, out, o, r_n, i_n, i, j, q, fp[r], g[j])


@inline
def _norm_term(x0, out, o, r_n, i_n, i, j, q, p_ord, g):
    """Entry q's share of the norm's derivative, times g (the backward's and the tangent's
    term alike: the tangent passes the entry's tangent as g)."""
    x = x0[q]
    sgn = 1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0)
    if p_ord == 2.0:
        return g * (x / out[j]) if out[j] != 0.0 else 0.0
    if p_ord == 1.0:
        return sgn * g
    if p_ord == np.inf or p_ord == -np.inf:
        # like amax/amin of |x|: split among the ties
        ties = 0
        for m in range(r_n):
            if abs(x0[(o * r_n + m) * i_n + i]) == out[j]:
                ties += 1
        return sgn * (g / ties) if abs(x) == out[j] else 0.0
    if p_ord < 1.0:
        scaled = 0.0 if x == 0.0 else sgn * abs(x) ** (p_ord - 1.0)
        return scaled * g * out[j] ** (1.0 - p_ord)
    scale = 0.0 if out[j] == 0.0 else g / out[j] ** (p_ord - 1.0)
    if p_ord < 2.0:
        return sgn * abs(x) ** (p_ord - 1.0) * scale
    return x * abs(x) ** (p_ord - 2.0) * scale


@rule
def norm_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    o_n, r_n, i_n = _shape(r, ip, aux)
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
    p_ord = fp[r]
    for ob in range(o_n):
        for i in range(i_n):
            j = ob * i_n + i
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


@rule
def norm_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    o_n, r_n, i_n = _shape(r, ip, aux)
    tout = b + voff[r]
    t0 = b + voff[a0[r]]
    out = _seg(vals, voff[r], o_n * i_n)
    x0 = _seg(vals, voff[a0[r]], o_n * r_n * i_n)
    for ob in range(o_n):
        for i in range(i_n):
            j = ob * i_n + i
            acc = 0.0
            for k in range(r_n):
                q = (ob * r_n + k) * i_n + i
                acc += _norm_term(x0, out, ob, r_n, i_n, i, j, q, fp[r], tans[t0 + q])
            tans[tout + j] = acc


# no curvature rule: hessians through norms take the create_graph route
NORM = declare(77, "LinalgVectorNormBackward0", family=ARRAY, reads=READS_X0 | READS_OUT,
               masks=True, backward=norm_bwd, forward=norm_fwd, tangent=norm_tan,
               curvature=None)

# the reductions proper: the output has O * I values (softmax keeps its input's size)
REDUCTIONS = frozenset({SUM, SUM_DIM, MEAN, MEAN_DIM, PROD, PROD_DIM, MAX, MIN, AMAX, AMIN,
                        MAX_DIM, MIN_DIM, VAR, STD, LOGSUMEXP, SOFTMAX, LOG_SOFTMAX, NORM})

constants(globals())
