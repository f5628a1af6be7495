"""Scans along one dim (cumsum, cumprod, logcumsumexp) and the order statistics whose value
does not come from one index (the median of all elements).

A scan keeps its input's size: the input and the output are both viewed as (O, R, I) with
``aux[ip:ip+3] = O, R, I`` (the layout of ``reduce.py``), and entry k of a slice depends on
entries 0..k of the same slice.  Sorts, top-k, k-th values, medians along a dim and
cummax/cummin select entries by index: they are GATHER records (variants named in
``structure._GATHER_NAMES``), not ops of their own.

Each block declares all of the op's rules; ``graph`` is the create_graph (differentiable)
backward, written with tapegrad's own functions.  It receives flat handles; the (O, R, I)
layout is read from the tape through the output handle's record.
"""
import numpy as np

from .._config import inline, rule
# scans lay a record out as reductions do (O, R, I in aux): reduce's readers serve both
from .reduce import _seg, _shape, extreme_bwd, extreme_tan
from .table import ARRAY, LINEAR, READS_OUT, READS_X0, constants, declare


def _ori_of(out):
    """(O, R, I) of the record behind ``out`` (a handle the create_graph sweep passes)."""
    tape, r = out._tape, out._r
    ip = int(tape.ip[r])
    return int(tape.aux[ip]), int(tape.aux[ip + 1]), int(tape.aux[ip + 2])


def _const(F, value, dtype=np.float64):
    """A constant tensor for a create_graph rule (made by tapegrad's functions ``F``)."""
    return F._plain(np.ascontiguousarray(value, dtype=dtype))


def _reverse_cumsum(F, t, o_n, r_n, i_n):
    """sum over m >= k along R, flat, written with recorded ops (flip, cumsum, flip)."""
    t3 = F.reshape(t, o_n, r_n, i_n)
    return F.reshape(F.flip(F.cumsum(F.flip(t3, 1), 1), 1), -1)


def _check_scan(a, r, fail):
    a.aux_span(r, a.ip[r], 3)
    o, red, i = (int(v) for v in a.aux[a.ip[r]: a.ip[r] + 3])
    if min(o, red, i) < 0 or o * red * i != a.size[r] or a.size[a.a0[r]] != a.size[r]:
        fail(f"record {r}: scan shape does not match")


# --- cumsum: out[k] = x[0] + ... + x[k] ------------------------------------------------------
@rule
def cumsum_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
               beta1):
    # the transpose of a running sum: a running sum from the end
    o_n, r_n, i_n = _shape(r, ip, aux)
    n = o_n * r_n * i_n
    g = _seg(grads, goff[r], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    for o in range(o_n):
        for i in range(i_n):
            acc = 0.0
            for k in range(r_n - 1, -1, -1):
                p = (o * r_n + k) * i_n + i
                acc += g[p]
                gx0[p] += acc


@rule
def cumsum_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    o_n, r_n, i_n = _shape(r, ip, aux)
    n = o_n * r_n * i_n
    out = _seg(vals, voff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    for o in range(o_n):
        for i in range(i_n):
            acc = 0.0
            for k in range(r_n):
                p = (o * r_n + k) * i_n + i
                acc += x0[p]
                out[p] = acc


@rule
def cumsum_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    o_n, r_n, i_n = _shape(r, ip, aux)
    tout = b + voff[r]
    t0 = b + voff[a0[r]]
    for o in range(o_n):
        for i in range(i_n):
            acc = 0.0
            for k in range(r_n):
                p = (o * r_n + k) * i_n + i
                acc += tans[t0 + p]
                tans[tout + p] = acc


def cumsum_graph(F, g, x0, x1, out, c):
    return _reverse_cumsum(F, g, *_ori_of(out)), None


CUMSUM = declare(91, "CumsumBackward0", family=ARRAY, check=_check_scan, backward=cumsum_bwd,
                 forward=cumsum_fwd, tangent=cumsum_tan, curvature=LINEAR, graph=cumsum_graph)


# --- cumprod: out[k] = x[0] * ... * x[k] -------------------------------------------------------
# The tangent obeys out'[k] = out'[k-1] * x[k] + out[k-1] * x'[k]; the backward is that
# recurrence transposed: a[k] = g[k] + x[k+1] * a[k+1], gx[k] = out[k-1] * a[k].  No division,
# so zeros in the input need no special case (PyTorch divides by x where it has no zero and
# takes a separate path where it has; the numbers agree to rounding).
@rule
def cumprod_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
                beta1):
    o_n, r_n, i_n = _shape(r, ip, aux)
    n = o_n * r_n * i_n
    g = _seg(grads, goff[r], n)
    out = _seg(vals, voff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    for o in range(o_n):
        for i in range(i_n):
            # PyTorch's division formula spreads a nan of the slice to all of its gradient;
            # the recurrence would give finite values before the nan, so follow PyTorch
            has_nan = False
            for k in range(r_n):
                v = x0[(o * r_n + k) * i_n + i]
                if v != v:
                    has_nan = True
            if has_nan:
                for k in range(r_n):
                    gx0[(o * r_n + k) * i_n + i] += np.nan
                continue
            acc = 0.0
            for k in range(r_n - 1, -1, -1):
                p = (o * r_n + k) * i_n + i
                if k < r_n - 1:
                    acc = g[p] + x0[p + i_n] * acc
                else:
                    acc = g[p]
                gx0[p] += (out[p - i_n] if k > 0 else 1.0) * acc


@rule
def cumprod_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    o_n, r_n, i_n = _shape(r, ip, aux)
    n = o_n * r_n * i_n
    out = _seg(vals, voff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    for o in range(o_n):
        for i in range(i_n):
            acc = 1.0
            for k in range(r_n):
                p = (o * r_n + k) * i_n + i
                acc *= x0[p]
                out[p] = acc


@rule
def cumprod_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    o_n, r_n, i_n = _shape(r, ip, aux)
    n = o_n * r_n * i_n
    tout = b + voff[r]
    t0 = b + voff[a0[r]]
    out = _seg(vals, voff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    for o in range(o_n):
        for i in range(i_n):
            acc = 0.0
            prev = 1.0
            for k in range(r_n):
                p = (o * r_n + k) * i_n + i
                acc = acc * x0[p] + prev * tans[t0 + p]
                prev = out[p]
                tans[tout + p] = acc


def cumprod_graph(F, g, x0, x1, out, c):
    # Not PyTorch's reverse_cumsum(g * out) / x where x has no zero: its derivative divides
    # by x twice, which overflows for tiny x (hessians of 1e290 for 1e-308).  The recurrence
    # of the compiled rule written out without division instead, for every input:
    o_n, r_n, i_n = _ori_of(out)
    # gx[k] = out[k-1] * sum_{m >= k} g[m] * P[k, m], P[k, m] = x[k+1] * ... * x[m], built as
    # an (O, R(k), R(m), I) cumprod of x with ones at m <= k, kept where m >= k
    after = np.arange(r_n)[None, :] > np.arange(r_n)[:, None]           # (k, m): m > k
    keep = np.arange(r_n)[None, :] >= np.arange(r_n)[:, None]           # (k, m): m >= k
    shape4 = (o_n, r_n, r_n, i_n)
    xs = F.expand(F.reshape(x0, o_n, 1, r_n, i_n), *shape4)
    after4 = _const(F, np.broadcast_to(after[None, :, :, None], shape4), bool)
    factors = F.where(after4, xs, 1.0)
    spans = F.mul(F.cumprod(factors, 2),
                  _const(F, np.broadcast_to(keep[None, :, :, None], shape4)))
    acc = F.sum(F.mul(spans, F.reshape(g, o_n, 1, r_n, i_n)), 2)         # (O, R, I)
    out3 = F.reshape(out, o_n, r_n, i_n)
    before = F.cat([_const(F, np.ones((o_n, 1, i_n))), F.narrow(out3, 1, 0, r_n - 1)], 1)
    return F.reshape(F.mul(before, acc), -1), None


# no curvature rule: hessians through cumprod take the create_graph route
CUMPROD = declare(92, "CumprodBackward0", family=ARRAY, reads=READS_X0 | READS_OUT, masks=True,
                  check=_check_scan, backward=cumprod_bwd, forward=cumprod_fwd,
                  tangent=cumprod_tan, curvature=None, graph=cumprod_graph)


# --- logcumsumexp: out[k] = log(exp(x[0]) + ... + exp(x[k])) -----------------------------------
# gx[k] = sum_{m >= k} g[m] exp(x[k] - out[m]), accumulated from the end as
# acc[k] = g[k] + exp(out[k] - out[k+1]) acc[k+1], gx[k] = exp(x[k] - out[k]) acc[k]: out is
# nondecreasing along the slice, so every exponent is <= 0 and nothing overflows.
@inline
def _ratio(lo, hi):
    """exp(lo - hi) for lo <= hi, 1 where both are the same infinity (a prefix of -inf)."""
    if lo == hi:
        return 1.0
    return np.exp(lo - hi)


@rule
def logcumsumexp_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need,
                     beta0, beta1):
    o_n, r_n, i_n = _shape(r, ip, aux)
    n = o_n * r_n * i_n
    g = _seg(grads, goff[r], n)
    out = _seg(vals, voff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    gx0 = _seg(grads, goff[a0[r]], n)
    for o in range(o_n):
        for i in range(i_n):
            acc = 0.0
            for k in range(r_n - 1, -1, -1):
                p = (o * r_n + k) * i_n + i
                if k < r_n - 1:
                    acc = g[p] + _ratio(out[p], out[p + i_n]) * acc
                else:
                    acc = g[p]
                # an entry of -inf contributes nothing to any sum: its gradient is 0
                if x0[p] != -np.inf:
                    gx0[p] += _ratio(x0[p], out[p]) * acc


@inline
def _logaddexp(a, b):
    if a == b:   # also the infinities, where a - b would be nan
        return a + np.log(2.0) if a != -np.inf else a
    m = a if a > b else b
    if m != m or b != b:
        return np.nan
    return m + np.log1p(np.exp(-abs(a - b)))


@rule
def logcumsumexp_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    o_n, r_n, i_n = _shape(r, ip, aux)
    n = o_n * r_n * i_n
    out = _seg(vals, voff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    for o in range(o_n):
        for i in range(i_n):
            acc = -np.inf
            for k in range(r_n):
                p = (o * r_n + k) * i_n + i
                acc = _logaddexp(acc, x0[p])
                out[p] = acc


@rule
def logcumsumexp_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    # tout[k] = sum_{m <= k} t[m] exp(x[m] - out[k]), carried forward by exp(out[k-1] - out[k])
    o_n, r_n, i_n = _shape(r, ip, aux)
    n = o_n * r_n * i_n
    tout = b + voff[r]
    t0 = b + voff[a0[r]]
    out = _seg(vals, voff[r], n)
    x0 = _seg(vals, voff[a0[r]], n)
    for o in range(o_n):
        for i in range(i_n):
            acc = 0.0
            for k in range(r_n):
                p = (o * r_n + k) * i_n + i
                if k > 0:
                    acc *= _ratio(out[p - i_n], out[p])
                if x0[p] != -np.inf:
                    acc += tans[t0 + p] * _ratio(x0[p], out[p])
                tans[tout + p] = acc


def logcumsumexp_graph(F, g, x0, x1, out, c):
    # gx[k] = sum_{m >= k} g[m] exp(x[k] - out[m]) as an (O, R, R, I) product (k, m), with
    # -inf for m < k so that no exp overflows before a mask would zero it
    o_n, r_n, i_n = _ori_of(out)
    upper = np.arange(r_n)[:, None] <= np.arange(r_n)[None, :]
    mask = np.broadcast_to(upper[None, :, :, None], (o_n, r_n, r_n, i_n))
    diff = F.sub(F.reshape(x0, o_n, r_n, 1, i_n), F.reshape(out, o_n, 1, r_n, i_n))
    diff = F.where(_const(F, mask, bool), diff, -np.inf)
    terms = F.mul(F.exp(diff), F.reshape(g, o_n, 1, r_n, i_n))
    return F.reshape(F.sum(terms, 2), -1), None


# no curvature rule: hessians through logcumsumexp take the create_graph route
LOGCUMSUMEXP = declare(93, "LogcumsumexpBackward0", family=ARRAY, reads=READS_X0 | READS_OUT,
                       check=_check_scan, backward=logcumsumexp_bwd, forward=logcumsumexp_fwd,
                       tangent=logcumsumexp_tan, curvature=None, graph=logcumsumexp_graph)


# --- median(), nanmedian() of all elements: aux[ip:ip+3] = 1, n, 1 ------------------------------
# The value is the lower median; PyTorch's gradient is spread evenly over the entries equal to
# it (the nan entries when it is nan), max()'s rule: the backward and tangent are max()'s.
@rule
def median_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext, skip_nan):
    o_n, r_n, i_n = _shape(r, ip, aux)
    x0 = _seg(vals, voff[a0[r]], r_n)
    s = np.sort(x0.copy())      # nan sorts last
    count = r_n
    if skip_nan:
        while count > 0 and s[count - 1] != s[count - 1]:
            count -= 1
    elif r_n > 0 and s[r_n - 1] != s[r_n - 1]:
        vals[voff[r]] = np.nan
        return
    vals[voff[r]] = s[(count - 1) // 2] if count > 0 else np.nan


def median_graph(F, g, x0, x1, out, c):
    x = x0._value
    best = out._value
    hit = (x == best) | (np.isnan(x) & np.isnan(best))
    share = hit / max(int(hit.sum()), 1)
    return F.mul(g, _const(F, share)), None


def _check_median(a, r, fail):
    a.aux_span(r, a.ip[r], 3)
    if a.size[r] != 1 or int(a.aux[a.ip[r] + 1]) != a.size[a.a0[r]]:
        fail(f"record {r}: median shape does not match")


MEDIAN = declare(94, "MedianBackward0", family=ARRAY, reads=READS_X0 | READS_OUT, masks=True,
                 check=_check_median, backward=(extreme_bwd, True), forward=(median_fwd, False),
                 tangent=(extreme_tan, True), curvature=LINEAR, graph=median_graph)
NANMEDIAN = declare(95, "NanmedianBackward0", family=ARRAY, reads=READS_X0 | READS_OUT,
                    masks=True, check=_check_median, backward=(extreme_bwd, True),
                    forward=(median_fwd, True), tangent=(extreme_tan, True), curvature=LINEAR,
                    graph=median_graph)

SCANS = frozenset({CUMSUM, CUMPROD, LOGCUMSUMEXP})

constants(globals())
