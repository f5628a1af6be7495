"""Linear algebra: matrix products on BLAS.

``aux[ip:ip+5] = variant, B, M, K, N`` for a (B, M, K) @ (B, K, N) product.
"""
import numba
import numpy as np

from .. import _blas
from .._config import inline, rule
from .table import ARRAY, READS_X0, READS_X1, constants, declare

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
def _dims(r, ip, aux):
    return aux[ip[r] + 1], aux[ip[r] + 2], aux[ip[r] + 3], aux[ip[r] + 4]


# --- matmul --------------------------------------------------------------------------------------
@rule
def matmul_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
               beta1):
    # beta 0: the operand's gradient is written, not added to (its first contribution)
    b_n, m, k, n = _dims(r, ip, aux)
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


@rule
def matmul_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    b_n, m, k, nn = _dims(r, ip, aux)
    out = vals[voff[r]:voff[r] + size[r]]
    for b in range(b_n):
        # straight into the arena: no temporary and no copy of the product
        gemm(out[b * m * nn:(b + 1) * m * nn], value_at(vals, voff, ext, a0[r], b * m * k),
             value_at(vals, voff, ext, a1[r], b * k * nn), m, k, nn, False, False, 0.0)


@rule
def matmul_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    b_n, m, k, nn = _dims(r, ip, aux)
    tout = b + voff[r]
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


@rule
def matmul_curv(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, tans, b, dg,
                need):
    # gx0 = g @ x1.T moves with x1's tangent, gx1 = x0.T @ g with x0's
    b_n, m, k, nn = _dims(r, ip, aux)
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


def _check_matmul(a, r, fail):
    a.aux_span(r, a.ip[r], 5)
    b, m, kk, nn = (int(x) for x in a.aux[a.ip[r] + 1: a.ip[r] + 5])
    if min(b, m, kk, nn) < 0 or b * m * kk != a.size[a.a0[r]] or \
            b * kk * nn != a.size[a.a1[r]] or b * m * nn != a.size[r]:
        fail(f"record {r}: matrix sizes do not match")


MATMUL = declare(90, "MmBackward0", family=ARRAY, arity=2, reads=READS_X0 | READS_X1,
                 first_write=True, check=_check_matmul,
                 variants={0: "MmBackward0", 1: "DotBackward0", 2: "MvBackward0",
                           3: "SqueezeBackward4", 4: "UnsafeViewBackward0", 5: "CloneBackward0",
                           6: "TransposeBackward0"},
                 backward=matmul_bwd, forward=matmul_fwd, tangent=matmul_tan,
                 curvature=matmul_curv)

constants(globals())
