"""Linear algebra: matrix products on BLAS, and the LAPACK-backed ops of ``tapegrad.linalg``.

``aux[ip:ip+5] = variant, B, M, K, N`` for a (B, M, K) @ (B, K, N) product.  The
factorisation ops hold a batch of B square (n, n) matrices, ``aux[ip:ip+2] = B, n`` and a
flag after (see each block); the decompositions (eigh, svd, qr) are one record per output,
``aux`` starting with which output; ``cross`` views its operands as (O, 3, I).
"""
import numba
import numpy as np

from .. import _blas
from .._config import inline, kernel, rule
from .memory import view_f64
from .table import ARRAY, READS_OUT, READS_X0, READS_X1, constants, declare

# BLAS dgemm with numba's own helper's signature (the one np.dot calls), bound by _blas to
# scipy's OpenBLAS or to MKL: C = alpha op(A) op(B) + beta C, column-major.  With beta = 1 a
# matrix product adds straight into the gradient arena; np.dot would make a temporary (1.6 MB
# for W3's first layer) and then a second pass to add it.  The matrices go by address (an
# integer): an operand may be an argument's own array rather than a copy in the arena (see
# ``value_at``).  Declared here rather than taken from numba.np.linalg so that importing
# tapegrad does not import scipy.linalg (170 ms); numba's helper loads scipy's BLAS on its
# first call.
_DGEMM = numba.types.ExternalFunction(_blas.SYMBOL, _blas.XXGEMM_BY_ADDRESS)
_DGEMV = numba.types.ExternalFunction(_blas.GEMV_SYMBOL, _blas.XXGEMV_BY_ADDRESS)
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


@kernel
def gemm(c, a, b, m, k, n, trans_a, trans_b, beta):
    """Row-major ``c (m, n) = op(a) @ op(b) + beta * c``: c a 1-D arena slice, a and b the
    operands' addresses; op transposes where trans_a / trans_b: then a is stored (k, m), b
    is stored (n, k).  Compiled once and called, not inlined into the three matmul rules:
    inlined, its branches for vectors made a fresh machine's first matrix-product backward
    1-2 s slower (4.9 s -> 5.9-6.8 s; called: 4.5-4.9 s)."""
    if m == 0 or n == 0:
        return
    if k == 0:
        if beta == 0.0:
            c[:m * n] = 0.0
        return
    if k == 1:
        # an outer product (the gradient of a matrix times a vector, for the matrix): a loop,
        # 1.5-3x faster than dgemm's general kernel for it in OpenBLAS and MKL alike
        # ((10^5, 16): 0.58 ms against 0.86 ms; (10, 10): 0.05 µs against 0.21 µs).  A
        # written output is not read: it may hold a stale nan.
        av = view_f64(a, m)
        bv = view_f64(b, n)
        for i in range(m):
            ai = av[i]
            row = i * n
            if beta == 0.0:
                for j in range(n):
                    c[row + j] = ai * bv[j]
            else:
                for j in range(n):
                    c[row + j] = beta * c[row + j] + ai * bv[j]
        return
    scalars = np.empty(2)
    scalars[0], scalars[1] = 1.0, beta
    if n == 1 or m == 1:
        # a product with a vector: dgemv (see _blas).  Its output is zeroed here rather than
        # left to beta = 0, which some BLAS builds multiply in (0 * a stale nan is nan).
        if beta == 0.0:
            c[:m * n] = 0.0
            scalars[1] = 1.0
        if n == 1:
            # c (m,) = op(a) @ b: a stored (m, k) row-major is (k, m) column-major
            _DGEMV(_KIND, _N if trans_a else _T, m if trans_a else k, k if trans_a else m,
                   scalars[0:].ctypes, a, m if trans_a else k, b, scalars[1:].ctypes,
                   c.ctypes.data)
        else:
            # c (n,) = op(b).T @ a, likewise
            _DGEMV(_KIND, _T if trans_b else _N, k if trans_b else n, n if trans_b else k,
                   scalars[0:].ctypes, b, k if trans_b else n, a, scalars[1:].ctypes,
                   c.ctypes.data)
        return
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
                 reads_for=(READS_X1, READS_X0), first_write=True, check=_check_matmul,
                 variants={0: "MmBackward0", 1: "DotBackward0", 2: "MvBackward0",
                           3: "SqueezeBackward4", 4: "UnsafeViewBackward0", 5: "CloneBackward0",
                           6: "TransposeBackward0"},
                 backward=matmul_bwd, forward=matmul_fwd, tangent=matmul_tan,
                 curvature=matmul_curv)



# --- shared by the factorisation ops -------------------------------------------------------------
@inline
def _block(arr, off, b, rows, cols):
    """Matrix b of a batch of (rows, cols) matrices stored from arr[off]."""
    return arr[off + b * rows * cols: off + (b + 1) * rows * cols].reshape((rows, cols))


@inline
def _oriented(m, keep):
    """m itself (keep) or its transpose, as a C-ordered copy: the LAPACK calls and the
    row-major stores below want contiguous operands, and right-sided solves and upper
    factors are the left-sided, lower ones transposed."""
    if keep:
        return np.ascontiguousarray(m)
    return np.ascontiguousarray(m.T)


@inline
def _store(arr, off, b, m):
    # (numba's LAPACK wrappers return Fortran-ordered arrays, which do not reshape in place)
    rows, cols = m.shape
    arr[off + b * rows * cols: off + (b + 1) * rows * cols] = \
        np.ascontiguousarray(m).reshape(rows * cols)


@inline
def _add_into(arr, off, b, m):
    rows, cols = m.shape
    arr[off + b * rows * cols: off + (b + 1) * rows * cols] += \
        np.ascontiguousarray(m).reshape(rows * cols)


# A rule must not raise: it runs as a compiled entry, where an exception cannot reach the
# caller and would leave the record's output as it was.  numba's LAPACK calls raise for a
# singular matrix and for infs and nans, so these check first and give nan instead, which
# LAPACK would have propagated; a replay's guard (tapegrad.linalg._record) sees the nan and
# hands the call back to eager mode, which raises PyTorch's error where PyTorch does.
@inline
def _finite(m):
    return np.all(np.isfinite(m))


@inline
def _solve(m, rhs):
    """m^-1 rhs (C-ordered), nan where m is singular or an operand is not finite."""
    if not (_finite(m) and _finite(rhs)):
        return np.full(rhs.shape, np.nan)
    sign, logdet = np.linalg.slogdet(m)
    if sign == 0.0:
        return np.full(rhs.shape, np.nan)
    return np.ascontiguousarray(np.linalg.solve(m, rhs))


@inline
def _inv(m):
    # a solve with the identity, as NumPy's inv (the eager forward) computes it
    return _solve(m, np.eye(m.shape[0]))


def _record_aux(out):
    """The first aux values of out's record: a graph rule reads the record's shape through
    the handle of its output, which names the record."""
    tape, r = out._tape, out._r
    return [int(v) for v in tape.aux[tape.ip[r]: tape.ip[r] + 4]]


def _check_square(count, square_out):
    """A tape-file check: aux holds B, n (and flags), the input B square matrices and the
    output B of them (square_out) or B values."""
    def check(a, r, fail):
        a.aux_span(r, a.ip[r], count)
        b, n = (int(x) for x in a.aux[a.ip[r]: a.ip[r] + 2])
        if min(b, n) < 0 or b * n * n != a.size[a.a0[r]] or \
                a.size[r] != (b * n * n if square_out else b):
            fail(f"record {r}: matrix sizes do not match")
        return b, n
    return check


# --- inverse: out = A^-1; aux = B, n --------------------------------------------------------------
@rule
def inv_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    b_n, n = aux[ip[r]], aux[ip[r] + 1]
    if n == 0:
        return
    for b in range(b_n):
        _store(vals, voff[r], b, _inv(_oriented(_block(vals, voff[a0[r]], b, n, n), True)))


@rule
def inv_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
            beta1):
    # d(A^-1) = -A^-1 dA A^-1, so gA = -A^-T g A^-T: only the saved inverse is read
    b_n, n = aux[ip[r]], aux[ip[r] + 1]
    if n == 0:
        return
    for b in range(b_n):
        it = _oriented(_block(vals, voff[r], b, n, n), False)
        g = _oriented(_block(grads, goff[r], b, n, n), True)
        _add_into(grads, goff[a0[r]], b, -np.dot(np.dot(it, g), it))


@rule
def inv_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    b_n, n = aux[ip[r]], aux[ip[r] + 1]
    if n == 0:
        return
    for k in range(b_n):
        inv = _oriented(_block(vals, voff[r], k, n, n), True)
        ta = _oriented(_block(tans, b + voff[a0[r]], k, n, n), True)
        _store(tans, b + voff[r], k, -np.dot(np.dot(inv, ta), inv))


def inv_graph(F, g, x0, x1, out, c):
    # the same formula in recorded ops: the inverse's handle is itself differentiable
    b, n = _record_aux(out)[:2]
    it = F.transpose(F.reshape(out, b, n, n), 1, 2)
    return F.reshape(F.neg(F.matmul(F.matmul(it, F.reshape(g, b, n, n)), it)), -1), None


LINALG_INV = declare(82, "LinalgInvExBackward0", family=ARRAY, reads=READS_OUT,
                     check=_check_square(2, True), backward=inv_bwd, forward=inv_fwd,
                     tangent=inv_tan, curvature=None, graph=inv_graph)


# --- solve: A X = B (left) or X A = B (right); aux = B, n, k, left -------------------------------
# A is (n, n), B and X are (n, k) for a left solve and (k, n) for a right one.  A right solve
# is the left solve A^T X^T = B^T, so each rule works on the left-sided form: M = A or A^T,
# Y = X or X^T, R = B or B^T (``_oriented`` with keep = left).
@inline
def _solve_dims(r, ip, aux):
    return aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2], aux[ip[r] + 3] != 0


@rule
def solve_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    b_n, n, k, left = _solve_dims(r, ip, aux)
    if n == 0 or k == 0:
        return
    rows, cols = (n, k) if left else (k, n)
    for b in range(b_n):
        m = _oriented(_block(vals, voff[a0[r]], b, n, n), left)
        rhs = _oriented(_block(vals, voff[a1[r]], b, rows, cols), left)
        _store(vals, voff[r], b, _oriented(_solve(m, rhs), left))


@rule
def solve_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
              beta1):
    # Y = M^-1 R: gR = M^-T gY, gM = -gR Y^T
    b_n, n, k, left = _solve_dims(r, ip, aux)
    if n == 0 or k == 0:
        return
    rows, cols = (n, k) if left else (k, n)
    for b in range(b_n):
        mt = _oriented(_block(vals, voff[a0[r]], b, n, n), not left)
        gy = _oriented(_block(grads, goff[r], b, rows, cols), left)
        gr = _solve(mt, gy)
        if need[a1[r]]:
            _add_into(grads, goff[a1[r]], b, _oriented(gr, left))
        if need[a0[r]]:
            y = _oriented(_block(vals, voff[r], b, rows, cols), left)
            _add_into(grads, goff[a0[r]], b, _oriented(-np.dot(gr, y.T), left))


@rule
def solve_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    # dY = M^-1 (dR - dM Y)
    b_n, n, k, left = _solve_dims(r, ip, aux)
    if n == 0 or k == 0:
        return
    rows, cols = (n, k) if left else (k, n)
    for bb in range(b_n):
        m = _oriented(_block(vals, voff[a0[r]], bb, n, n), left)
        acc = np.zeros((n, k))
        if d1:
            acc += _oriented(_block(tans, b + voff[a1[r]], bb, rows, cols), left)
        if d0:
            y = _oriented(_block(vals, voff[r], bb, rows, cols), left)
            acc -= np.dot(_oriented(_block(tans, b + voff[a0[r]], bb, n, n), left), y)
        _store(tans, b + voff[r], bb, _oriented(_solve(m, acc), left))


def solve_graph(F, g, x0, x1, out, c):
    linalg = F.linalg
    b, n, k, left = _record_aux(out)
    a = F.reshape(x0, b, n, n)
    if left:
        gy, x = F.reshape(g, b, n, k), F.reshape(out, b, n, k)
        gb = linalg.solve(F.transpose(a, 1, 2), gy)
        ga = F.neg(F.matmul(gb, F.transpose(x, 1, 2)))
    else:
        # X A = B: gB = g A^-T, gA = -X^T gB
        gy, x = F.reshape(g, b, k, n), F.reshape(out, b, k, n)
        gb = linalg.solve(F.transpose(a, 1, 2), gy, left=False)
        ga = F.neg(F.matmul(F.transpose(x, 1, 2), gb))
    return F.reshape(ga, -1), F.reshape(gb, -1)


def _check_solve(a, r, fail):
    a.aux_span(r, a.ip[r], 4)
    b, n, k, _ = (int(x) for x in a.aux[a.ip[r]: a.ip[r] + 4])
    if min(b, n, k) < 0 or b * n * n != a.size[a.a0[r]] or b * n * k != a.size[a.a1[r]] \
            or b * n * k != a.size[r]:
        fail(f"record {r}: matrix sizes do not match")


LINALG_SOLVE = declare(83, "LinalgSolveExBackward0", family=ARRAY, arity=2,
                       reads=READS_X0 | READS_OUT, check=_check_solve, backward=solve_bwd,
                       forward=solve_fwd, tangent=solve_tan, curvature=None, graph=solve_graph)


# --- determinant: out (B,); aux = B, n ------------------------------------------------------------
@inline
def _cofactor(a, det, n):
    """The cofactor matrix, d det / dA = det A^-T.  Where A is invertible, solved with the LU
    factors det itself came from (PyTorch's formula): near a singular A, det is a rounding
    error times the cofactors, and only the same factors cancel it exactly (A^-T from
    another factorisation gave a quarter of the cofactors of a rank-2 3x3 matrix).  Where a
    pivot is 0, the continuous extension from the SVD A = U diag(s) V^T,
    det(U) det(V) U diag(prod of the other s) V^T (a rank n-1 matrix has a nonzero one)."""
    if not _finite(a):
        return det * np.ascontiguousarray(_inv(a).T)
    m, swapped, d = _lu_of_transpose(a, n)
    if d != 0.0:
        # m = P A^T = L U: solve A^T X = d I, so X = d A^-T
        x = np.zeros((n, n))
        for j in range(n):
            x[j, j] = d
        for k in range(n):
            p = swapped[k]
            if p != k:
                for c in range(n):
                    x[k, c], x[p, c] = x[p, c], x[k, c]
        for k in range(n):
            for i in range(k + 1, n):
                f = m[i, k]
                for c in range(n):
                    x[i, c] -= f * x[k, c]
        for k in range(n - 1, -1, -1):
            inv = 1.0 / m[k, k]
            for c in range(n):
                x[k, c] *= inv
            for i in range(k):
                f = m[i, k]
                for c in range(n):
                    x[i, c] -= f * x[k, c]
        return x
    u, s, vt = np.linalg.svd(a)
    others = np.ones(n)
    for i in range(n):
        for j in range(n):
            if j != i:
                others[i] *= s[j]
    return np.dot(u * others, vt) * (np.linalg.det(u) * np.linalg.det(vt))


@inline
def _lu_of_transpose(a, n):
    """The LU factors of a's transpose, partial pivoting in LAPACK's getf2 order (see
    lu_det), in place of one matrix (L's unit diagonal implied); the row each step swapped
    in; and det(a) from them."""
    m = np.ascontiguousarray(a.T)
    swapped = np.arange(n)
    det = 1.0
    for j in range(n):
        p = j
        for i in range(j + 1, n):
            if abs(m[i, j]) > abs(m[p, j]):
                p = i
        swapped[j] = p
        if p != j:
            for k in range(n):
                m[j, k], m[p, k] = m[p, k], m[j, k]
            det = -det
        pivot = m[j, j]
        if pivot != 0.0:
            inv = 1.0 / pivot
            for i in range(j + 1, n):
                m[i, j] *= inv
                f = m[i, j]
                for k in range(j + 1, n):
                    m[i, k] -= f * m[j, k]
    for j in range(n):
        det *= m[j, j]
    return m, swapped, det


@inline
def lu_det(a, n):
    """det(a) as PyTorch takes it: the product of the diagonal of a's LU factors (partial
    pivoting, LAPACK's getf2 order: the column below a pivot scaled by its reciprocal, then
    the trailing update), its sign flipped by each row swap.  NumPy's and numba's det go
    through log|det| and exp and miss exact values: det(2 I) was 7.999999999999998, not 8.
    PyTorch hands LAPACK the row-major values, which it reads as column-major: it factors
    a's transpose (det of [[2, 5, 1], [0, -3, 7], [0, 0, 0.5]] is -3.0000000000000004)."""
    if not _finite(a):
        return np.nan
    return _lu_of_transpose(a, n)[2]


@kernel
def det_values(blocks):
    """``lu_det`` of each (n, n) matrix of ``blocks`` (B, n, n): the eager forward's values,
    the same bits as the compiled rule's."""
    out = np.empty(blocks.shape[0])
    n = blocks.shape[1]
    for b in range(blocks.shape[0]):
        out[b] = 1.0 if n == 0 else lu_det(np.ascontiguousarray(blocks[b]), n)
    return out


@rule
def det_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    b_n, n = aux[ip[r]], aux[ip[r] + 1]
    for b in range(b_n):
        a = _oriented(_block(vals, voff[a0[r]], b, n, n), True)
        vals[voff[r] + b] = 1.0 if n == 0 else lu_det(a, n)


@rule
def det_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
            beta1):
    b_n, n = aux[ip[r]], aux[ip[r] + 1]
    if n == 0:
        return
    for b in range(b_n):
        a = _oriented(_block(vals, voff[a0[r]], b, n, n), True)
        _add_into(grads, goff[a0[r]], b, grads[goff[r] + b] * _cofactor(a, vals[voff[r] + b], n))


@rule
def det_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    b_n, n = aux[ip[r]], aux[ip[r] + 1]
    for k in range(b_n):
        if n == 0:
            tans[b + voff[r] + k] = 0.0
            continue
        a = _oriented(_block(vals, voff[a0[r]], k, n, n), True)
        ta = _block(tans, b + voff[a0[r]], k, n, n)
        tans[b + voff[r] + k] = np.sum(_cofactor(a, vals[voff[r] + k], n) * ta)


def det_graph(F, g, x0, x1, out, c):
    linalg = F.linalg
    b, n = _record_aux(out)[:2]
    if np.any(out._value == 0.0):
        raise NotImplementedError(
            "tapegrad: a differentiable (create_graph) backward of linalg.det at a singular "
            "matrix is not supported; its first derivative is")
    a = F.reshape(x0, b, n, n)
    scale = F.reshape(F.mul(g, out), b, 1, 1)
    return F.reshape(F.mul(scale, F.transpose(linalg.inv(a), 1, 2)), -1), None


LINALG_DET = declare(84, "LinalgDetBackward0", family=ARRAY, reads=READS_X0 | READS_OUT,
                     check=_check_square(2, False), backward=det_bwd, forward=det_fwd,
                     tangent=det_tan, curvature=None, graph=det_graph)


# --- slogdet: out (B,) is log|det A| (which 0) or its sign (which 1); aux = B, n, which ----------
@inline
def _inverse_or_nan(a, n):
    """A^-1, or nan where A is singular (log|det| is -inf there and has no gradient)."""
    return _inv(a)


@rule
def slogdet_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    b_n, n, which = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
    for b in range(b_n):
        a = _oriented(_block(vals, voff[a0[r]], b, n, n), True)
        if n == 0:
            sign, logdet = 1.0, 0.0
        elif not _finite(a):
            sign, logdet = np.nan, np.nan
        else:
            sign, logdet = np.linalg.slogdet(a)
        vals[voff[r] + b] = sign if which else logdet


@rule
def slogdet_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
                beta1):
    # d log|det A| = tr(A^-1 dA): gA = g A^-T; the sign is piecewise constant
    b_n, n, which = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
    if which or n == 0:
        return
    for b in range(b_n):
        a = _oriented(_block(vals, voff[a0[r]], b, n, n), True)
        _add_into(grads, goff[a0[r]], b,
                  grads[goff[r] + b] * np.ascontiguousarray(_inverse_or_nan(a, n).T))


@rule
def slogdet_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    b_n, n, which = aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2]
    for k in range(b_n):
        if which or n == 0:
            tans[b + voff[r] + k] = 0.0
            continue
        a = _oriented(_block(vals, voff[a0[r]], k, n, n), True)
        ta = _block(tans, b + voff[a0[r]], k, n, n)
        tans[b + voff[r] + k] = np.sum(np.ascontiguousarray(_inverse_or_nan(a, n).T) * ta)


def slogdet_graph(F, g, x0, x1, out, c):
    linalg = F.linalg
    b, n, which = _record_aux(out)[:3]
    if which:
        return None, None      # the sign is piecewise constant
    a = F.reshape(x0, b, n, n)
    return F.reshape(F.mul(F.reshape(g, b, 1, 1), F.transpose(linalg.inv(a), 1, 2)), -1), None


def _check_slogdet(a, r, fail):
    _check_square(3, False)(a, r, fail)
    if int(a.aux[a.ip[r] + 2]) not in (0, 1):
        fail(f"record {r}: matrix sizes do not match")


LINALG_SLOGDET = declare(85, "LinalgSlogdetBackward0", family=ARRAY, reads=READS_X0,
                         check=_check_slogdet, backward=slogdet_bwd, forward=slogdet_fwd,
                         tangent=slogdet_tan, curvature=None, graph=slogdet_graph)


# --- Cholesky factor: out = L (lower) or L^T (upper); aux = variant, B, n, upper -----------------
# variant 1 is the deprecated ``torch.cholesky`` (``Tensor.cholesky``), a node of its own name
@inline
def _positive_definite(a, n):
    """Whether an unpivoted Cholesky factorisation of a (lower triangle) runs through."""
    low = np.zeros((n, n))
    for j in range(n):
        d = a[j, j]
        for k in range(j):
            d -= low[j, k] * low[j, k]
        if not d > 0.0:
            return False
        low[j, j] = np.sqrt(d)
        for i in range(j + 1, n):
            acc = a[i, j]
            for k in range(j):
                acc -= low[i, k] * low[j, k]
            low[i, j] = acc / low[j, j]
    return True


@rule
def cholesky_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    b_n, n, upper = aux[ip[r] + 1], aux[ip[r] + 2], aux[ip[r] + 3] != 0
    if n == 0:
        return
    for b in range(b_n):
        # (with upper, PyTorch reads the upper triangle: the lower one of A^T)
        a = _oriented(_block(vals, voff[a0[r]], b, n, n), not upper)
        # the lower triangle mirrored: only it is read, whichever triangle numba's potrf reads
        sym = np.tril(a) + np.tril(a, -1).T
        if _positive_definite(sym, n):
            low = np.ascontiguousarray(np.linalg.cholesky(sym))
        else:
            low = np.full((n, n), np.nan)
        _store(vals, voff[r], b, _oriented(low, not upper))


@rule
def cholesky_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
                 beta1):
    # PyTorch's rule: T = tril(L^T gL), P = (T + tril(T, -1)^T) / 2, gA = L^-T P L^-1
    b_n, n, upper = aux[ip[r] + 1], aux[ip[r] + 2], aux[ip[r] + 3] != 0
    if n == 0:
        return
    for b in range(b_n):
        low = _oriented(_block(vals, voff[r], b, n, n), not upper)
        gl = _oriented(_block(grads, goff[r], b, n, n), not upper)
        t = np.tril(np.dot(low.T, gl))
        p = 0.5 * (t + np.tril(t, -1).T)
        lt = np.ascontiguousarray(low.T)
        half = _solve(lt, p)                                             # L^-T P
        _add_into(grads, goff[a0[r]], b, _oriented(_solve(lt, _oriented(half, False)), False))


@rule
def cholesky_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    # dL = L phi(L^-1 dA L^-T), phi: the lower triangle with the diagonal halved (PyTorch's
    # forward rule; it reads all of dA, so perturbations are taken symmetric)
    b_n, n, upper = aux[ip[r] + 1], aux[ip[r] + 2], aux[ip[r] + 3] != 0
    if n == 0:
        return
    for k in range(b_n):
        low = _oriented(_block(vals, voff[r], k, n, n), not upper)
        ta = _oriented(_block(tans, b + voff[a0[r]], k, n, n), True)
        x = _solve(low, ta)                                                # L^-1 dA
        x = _oriented(_solve(low, _oriented(x, False)), False)
        x = np.tril(x)
        for i in range(n):
            x[i, i] *= 0.5
        _store(tans, b + voff[r], k, _oriented(np.dot(low, x), not upper))


def cholesky_graph(F, g, x0, x1, out, c):
    linalg = F.linalg
    b, n, upper = _record_aux(out)[1:4]
    low, gl = F.reshape(out, b, n, n), F.reshape(g, b, n, n)
    if upper:
        low, gl = F.transpose(low, 1, 2), F.transpose(gl, 1, 2)
    tril = F._plain(np.tril(np.ones((n, n))))
    strict = F._plain(np.tril(np.ones((n, n)), -1))
    t = F.mul(F.matmul(F.transpose(low, 1, 2), gl), tril)
    p = F.mul(F.add(t, F.transpose(F.mul(t, strict), 1, 2)), 0.5)
    li = linalg.inv(low)
    return F.reshape(F.matmul(F.matmul(F.transpose(li, 1, 2), p), li), -1), None


def _check_cholesky(a, r, fail):
    a.aux_span(r, a.ip[r], 4)
    b, n = (int(x) for x in a.aux[a.ip[r] + 1: a.ip[r] + 3])
    if min(b, n) < 0 or b * n * n != a.size[r] or b * n * n != a.size[a.a0[r]]:
        fail(f"record {r}: matrix sizes do not match")


LINALG_CHOLESKY = declare(86, "LinalgCholeskyExBackward0", family=ARRAY, reads=READS_OUT,
                          check=_check_cholesky,
                          variants={0: "LinalgCholeskyExBackward0", 1: "CholeskyBackward0"},
                          backward=cholesky_bwd, forward=cholesky_fwd,
                          tangent=cholesky_tan, curvature=None, graph=cholesky_graph)


# --- cross product along the middle axis of (O, 3, I); aux = O, I -----------------------------
@inline
def _cross_at(x, y, xo, yo, i_n, j):
    """Component j of x cross y at one (o, i): x and y read from offsets xo and yo, the
    three components i_n apart."""
    j1 = (j + 1) % 3
    j2 = (j + 2) % 3
    return x[xo + j1 * i_n] * y[yo + j2 * i_n] - x[xo + j2 * i_n] * y[yo + j1 * i_n]


@rule
def cross_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    o_n, i_n = aux[ip[r]], aux[ip[r] + 1]
    for o in range(o_n):
        for i in range(i_n):
            base = o * 3 * i_n + i
            for j in range(3):
                vals[voff[r] + base + j * i_n] = _cross_at(vals, vals, voff[a0[r]] + base,
                                                           voff[a1[r]] + base, i_n, j)


@rule
def cross_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
              beta1):
    # <g, a x b> = <b x g, a> = <g x a, b>
    o_n, i_n = aux[ip[r]], aux[ip[r] + 1]
    for o in range(o_n):
        for i in range(i_n):
            base = o * 3 * i_n + i
            for j in range(3):
                if need[a0[r]]:
                    grads[goff[a0[r]] + base + j * i_n] += _cross_at(
                        vals, grads, voff[a1[r]] + base, goff[r] + base, i_n, j)
                if need[a1[r]]:
                    grads[goff[a1[r]] + base + j * i_n] += _cross_at(
                        grads, vals, goff[r] + base, voff[a0[r]] + base, i_n, j)


@rule
def cross_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    o_n, i_n = aux[ip[r]], aux[ip[r] + 1]
    for o in range(o_n):
        for i in range(i_n):
            base = o * 3 * i_n + i
            for j in range(3):
                acc = 0.0
                if d0:
                    acc += _cross_at(tans, vals, b + voff[a0[r]] + base, voff[a1[r]] + base,
                                     i_n, j)
                if d1:
                    acc += _cross_at(vals, tans, voff[a0[r]] + base, b + voff[a1[r]] + base,
                                     i_n, j)
                tans[b + voff[r] + base + j * i_n] = acc


@rule
def cross_curv(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, tans, b, dg,
               need):
    # bilinear, as matmul: gA = b x g moves with b's tangent, gB = g x a with a's
    o_n, i_n = aux[ip[r]], aux[ip[r] + 1]
    for o in range(o_n):
        for i in range(i_n):
            base = o * 3 * i_n + i
            for j in range(3):
                if need[a0[r]]:
                    dg[goff[a0[r]] + base + j * i_n] += _cross_at(
                        tans, grads, b + voff[a1[r]] + base, goff[r] + base, i_n, j)
                if need[a1[r]]:
                    dg[goff[a1[r]] + base + j * i_n] += _cross_at(
                        grads, tans, goff[r] + base, b + voff[a0[r]] + base, i_n, j)


def cross_graph(F, g, x0, x1, out, c):
    linalg = F.linalg
    o_n, i_n = _record_aux(out)[:2]
    shape = (o_n, 3, i_n)
    a, bb, gg = (F.reshape(t, *shape) for t in (x0, x1, g))
    return (F.reshape(linalg.cross(bb, gg, dim=1), -1),
            F.reshape(linalg.cross(gg, a, dim=1), -1))


def _check_cross(a, r, fail):
    a.aux_span(r, a.ip[r], 2)
    o, i = (int(x) for x in a.aux[a.ip[r]: a.ip[r] + 2])
    if min(o, i) < 0 or not (3 * o * i == a.size[r] == a.size[a.a0[r]] == a.size[a.a1[r]]):
        fail(f"record {r}: cross product sizes do not match")


LINALG_CROSS = declare(87, "LinalgCrossBackward0", family=ARRAY, arity=2,
                       reads=READS_X0 | READS_X1, reads_for=(READS_X1, READS_X0),
                       check=_check_cross, backward=cross_bwd,
                       forward=cross_fwd, tangent=cross_tan, curvature=cross_curv,
                       graph=cross_graph)

# --- the decompositions: eigh, svd, qr -----------------------------------------------------------
# A decomposition has several outputs and a record has one, so each output is a record of its
# own, with ``which`` first in aux; its rules give that output's part of PyTorch's backward and
# forward formulas, which are linear in the outputs' gradients (tangents of the input), so the
# parts sum to PyTorch's gradient.  A rule that needs another output recomputes the
# decomposition from the input (LAPACK through numba) and, where signs are arbitrary (singular
# vectors, QR factors), flips the recomputed factors to agree with its own output.
@inline
def _copy(arr, off, b, rows, cols):
    return np.ascontiguousarray(_block(arr, off, b, rows, cols))


@inline
def _gaps(w):
    """e[i, j] = w[j] - w[i], with ones on the diagonal (PyTorch's E)."""
    n = w.size
    e = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            e[i, j] = 1.0 if i == j else w[j] - w[i]
    return e


@inline
def _zero_diagonal(x):
    for i in range(min(x.shape[0], x.shape[1])):
        x[i, i] = 0.0
    return x


@inline
def _column_side(x, y, j):
    """+1 or -1: whether column j of x and of y point the same way."""
    acc = 0.0
    for i in range(x.shape[0]):
        acc += x[i, j] * y[i, j]
    return 1.0 if acc >= 0.0 else -1.0


@inline
def _row_side(x, y, i):
    acc = 0.0
    for j in range(x.shape[1]):
        acc += x[i, j] * y[i, j]
    return 1.0 if acc >= 0.0 else -1.0


# --- eigh: which 0 the eigenvalues (B, n), which 1 the eigenvectors (B, n, n);
#     aux = which, B, n, upper ---------------------------------------------------------------
@inline
def _eigh_dims(r, ip, aux):
    return aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2], aux[ip[r] + 3] != 0


@inline
def _symmetric(vals, off, b, n, upper):
    """The symmetric matrix LAPACK sees: the lower (upper) triangle of matrix b mirrored."""
    a = _block(vals, off, b, n, n)
    if upper:
        return np.ascontiguousarray(np.triu(a) + np.triu(a, 1).T)
    return np.ascontiguousarray(np.tril(a) + np.tril(a, -1).T)


@inline
def _eigh(vals, off, b, n, upper):
    sym = _symmetric(vals, off, b, n, upper)
    if not _finite(sym):
        return np.full(n, np.nan), np.full((n, n), np.nan)
    w, v = np.linalg.eigh(sym)
    return np.ascontiguousarray(w), np.ascontiguousarray(v)


@rule
def eigh_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    which, b_n, n, upper = _eigh_dims(r, ip, aux)
    if n == 0:
        return
    for b in range(b_n):
        w, v = _eigh(vals, voff[a0[r]], b, n, upper)
        if which == 0:
            vals[voff[r] + b * n: voff[r] + (b + 1) * n] = w
        else:
            _store(vals, voff[r], b, v)


@rule
def eigh_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
             beta1):
    # PyTorch's linalg_eig_backward, Hermitian case: gA = V (diag(gL) + skew(V^T gV) / E) V^T,
    # skew(X) = (X - X^T) / 2; symmetric, whichever triangle was read
    which, b_n, n, upper = _eigh_dims(r, ip, aux)
    if n == 0:
        return
    for b in range(b_n):
        w, v = _eigh(vals, voff[a0[r]], b, n, upper)
        if which == 0:
            gl = grads[goff[r] + b * n: goff[r] + (b + 1) * n]
            inner = np.zeros((n, n))
            for i in range(n):
                inner[i, i] = gl[i]
        else:
            v = _copy(vals, voff[r], b, n, n)
            x = np.dot(v.T, _copy(grads, goff[r], b, n, n))
            inner = _zero_diagonal(0.5 * (x - x.T) / _gaps(w))
        _add_into(grads, goff[a0[r]], b, np.dot(np.dot(v, inner), v.T))


@rule
def eigh_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    # PyTorch's linalg_eig_jvp: dP = V^T dA V, dL = diag(dP), dV = V (dP / E, zero diagonal)
    which, b_n, n, upper = _eigh_dims(r, ip, aux)
    if n == 0:
        return
    for k in range(b_n):
        w, v = _eigh(vals, voff[a0[r]], k, n, upper)
        if which == 1:
            v = _copy(vals, voff[r], k, n, n)
        p = np.dot(np.dot(v.T, _copy(tans, b + voff[a0[r]], k, n, n)), v)
        if which == 0:
            for i in range(n):
                tans[b + voff[r] + k * n + i] = p[i, i]
        else:
            _store(tans, b + voff[r], k, np.dot(v, _zero_diagonal(p / _gaps(w))))


def eigh_graph(F, g, x0, x1, out, c):
    linalg = F.linalg
    which, b, n, upper = _record_aux(out)
    a = F.reshape(x0, b, n, n)
    uplo = "U" if upper else "L"
    if which == 0:
        v = linalg.eigh(a, UPLO=uplo).eigenvectors
        inner = F.mul(F.unsqueeze(F.reshape(g, b, n), -2), F._plain(np.eye(n)))
    else:
        w = linalg.eigvalsh(a, UPLO=uplo)
        v = F.reshape(out, b, n, n)
        x = F.matmul(F.transpose(v, 1, 2), F.reshape(g, b, n, n))
        gaps = F.add(F.sub(F.unsqueeze(w, -2), F.unsqueeze(w, -1)), F._plain(np.eye(n)))
        inner = F.div(F.mul(F.sub(x, F.transpose(x, 1, 2)), 0.5), gaps)
    return F.reshape(F.matmul(F.matmul(v, inner), F.transpose(v, 1, 2)), -1), None


def _check_eigh(a, r, fail):
    a.aux_span(r, a.ip[r], 4)
    which, b, n = (int(x) for x in a.aux[a.ip[r]: a.ip[r] + 3])
    if which not in (0, 1) or min(b, n) < 0 or b * n * n != a.size[a.a0[r]] or \
            a.size[r] != (b * n if which == 0 else b * n * n):
        fail(f"record {r}: matrix sizes do not match")


LINALG_EIGH = declare(88, "LinalgEighBackward0", family=ARRAY, reads=READS_X0 | READS_OUT,
                      check=_check_eigh, backward=eigh_bwd, forward=eigh_fwd, tangent=eigh_tan,
                      curvature=None, graph=eigh_graph)


# --- svd: which 0 U (B, m, m or k), 1 S (B, k), 2 Vh (B, k or n, n), k = min(m, n);
#     aux = which, B, m, n, full_matrices ------------------------------------------------------
@inline
def _svd_dims(r, ip, aux):
    return (aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2], aux[ip[r] + 3],
            aux[ip[r] + 4] != 0)


@inline
def _svd(a, m, n, full):
    """(U, S, Vh) of a (m, n), C-ordered; nan where a is not finite."""
    k = min(m, n)
    um, vn = (m, n) if full else (k, k)
    if not _finite(a):
        return np.full((m, um), np.nan), np.full(k, np.nan), np.full((vn, n), np.nan)
    if k == 0:
        return np.eye(m)[:, :um].copy(), np.zeros(0), np.eye(n)[:vn, :].copy()
    u, s, vh = np.linalg.svd(a, full)
    return np.ascontiguousarray(u), np.ascontiguousarray(s), np.ascontiguousarray(vh)


@inline
def _svd_factors(vals, voff, a0, r, b, m, n, full, which):
    """U (m, k), S, Vh (k, n) of matrix b, the singular vectors' signs those of record r's
    own output (which 0: U, 2: Vh)."""
    k = min(m, n)
    u, s, vh = _svd(_copy(vals, voff[a0[r]], b, m, n), m, n, False)
    if which == 0:
        own = _copy(vals, voff[r], b, m, m if full else k)[:, :k].copy()
        for j in range(k):
            vh[j, :] *= _column_side(own, u, j)
        u = own
    elif which == 2:
        own = _copy(vals, voff[r], b, n if full else k, n)[:k, :].copy()
        for j in range(k):
            u[:, j] *= _row_side(own, vh, j)
        vh = own
    return u, s, vh


@inline
def _square_gaps(s):
    """e[i, j] = s_j^2 - s_i^2, with ones on the diagonal."""
    return _gaps(s * s)


@rule
def svd_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    which, b_n, m, n, full = _svd_dims(r, ip, aux)
    k = min(m, n)
    for b in range(b_n):
        u, s, vh = _svd(_copy(vals, voff[a0[r]], b, m, n), m, n, full)
        if which == 0:
            _store(vals, voff[r], b, u)
        elif which == 1:
            vals[voff[r] + b * k: voff[r] + (b + 1) * k] = s
        else:
            _store(vals, voff[r], b, vh)


@rule
def svd_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
            beta1):
    # PyTorch's svd_backward, one output's part: with J = U^T gU - (U^T gU)^T,
    # K = Vh gVh^T - (Vh gVh^T)^T and E[i, j] = s_j^2 - s_i^2,
    #   gS:  U diag(gS) Vh
    #   gU:  U (J / E) S Vh, plus (I - U U^T) gU S^-1 Vh when m > n
    #   gVh: U S (K / E) Vh, plus U S^-1 gVh (I - Vh^T Vh) when m < n
    # with full_matrices the vectors past the k-th get no gradient (they are arbitrary)
    which, b_n, m, n, full = _svd_dims(r, ip, aux)
    k = min(m, n)
    if k == 0:
        return
    for b in range(b_n):
        u, s, vh = _svd_factors(vals, voff, a0, r, b, m, n, full, which)
        if which == 1:
            gs = grads[goff[r] + b * k: goff[r] + (b + 1) * k]
            ga = np.dot(u * gs, vh)
        elif which == 0:
            gu = _copy(grads, goff[r], b, m, m if full else k)[:, :k].copy()
            x = np.dot(u.T, gu)
            left = np.dot(u, (x - x.T) / _square_gaps(s) * s)
            if m > n:
                gus = gu / s
                left += gus - np.dot(u, np.dot(u.T, gus))
            ga = np.dot(left, vh)
        else:
            gvh = _copy(grads, goff[r], b, n if full else k, n)[:k, :].copy()
            x = np.dot(vh, gvh.T)
            right = np.dot(s.reshape((k, 1)) * ((x - x.T) / _square_gaps(s)), vh)
            if m < n:
                sg = gvh / s.reshape((k, 1))
                right += sg - np.dot(np.dot(sg, vh.T), vh)
            ga = np.dot(u, right)
        _add_into(grads, goff[a0[r]], b, ga)


@rule
def svd_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    # PyTorch's linalg_svd_jvp: dP = U^T dA V, dS = diag(dP), X = dP off the diagonal,
    #   dU = U ((X S + S X^T) / E) + (I - U U^T) dA V S^-1 (m > n; zero columns after k)
    #   dVh = -((S X + X^T S) / E) Vh + S^-1 U^T dA (I - V Vh) (m < n; zero rows after k)
    which, b_n, m, n, full = _svd_dims(r, ip, aux)
    k = min(m, n)
    for kk in range(b_n):
        out = b + voff[r]
        if k == 0:
            continue
        u, s, vh = _svd_factors(vals, voff, a0, r, kk, m, n, full, which)
        da = _copy(tans, b + voff[a0[r]], kk, m, n)
        p = np.dot(np.dot(u.T, da), vh.T)
        if which == 1:
            for i in range(k):
                tans[out + kk * k + i] = p[i, i]
            continue
        x = _zero_diagonal(p.copy())
        e = _square_gaps(s)
        if which == 0:
            du = np.dot(u, (x * s + s.reshape((k, 1)) * x.T) / e)
            if m > n:
                davs = np.dot(da, vh.T) / s
                du += davs - np.dot(u, np.dot(u.T, davs))
            cols = m if full else k
            res = np.zeros((m, cols))
            res[:, :k] = du
            _store(tans, out, kk, res)
        else:
            dvh = -np.dot((s.reshape((k, 1)) * x + x.T * s) / e, vh)
            if m < n:
                suda = np.dot(u.T, da) / s.reshape((k, 1))
                dvh += suda - np.dot(np.dot(suda, vh.T), vh)
            rows = n if full else k
            res = np.zeros((rows, n))
            res[:k, :] = dvh
            _store(tans, out, kk, res)


def _aligned_svd(F, a, out, which, full, k):
    """svd(a) (reduced, recorded), its vectors' signs flipped to agree with out's."""
    u, s, vh = F.linalg.svd(a, full_matrices=False)
    if which == 0:
        own = F.narrow(out, -1, 0, k)
        d = np.where(np.sum(own._value * u._value, -2) >= 0.0, 1.0, -1.0)
        return own, s, F.mul(vh, F._plain(d[..., :, None]))
    if which == 2:
        own = F.narrow(out, -2, 0, k)
        d = np.where(np.sum(own._value * vh._value, -1) >= 0.0, 1.0, -1.0)
        return F.mul(u, F._plain(d[..., None, :])), s, own
    return u, s, vh


def svd_graph(F, g, x0, x1, out, c):
    which, b, m, n, full = _record_aux5(out)
    k = min(m, n)
    if k == 0:
        return F.mul(x0, 0.0), None
    a = F.reshape(x0, b, m, n)
    shapes = {0: (b, m, m if full else k), 1: (b, k), 2: (b, n if full else k, n)}
    o = F.reshape(out, *shapes[which])
    gg = F.reshape(g, *shapes[which])
    u, s, vh = _aligned_svd(F, a, o, which, full, k)
    if which == 1:
        return F.reshape(F.matmul(F.mul(u, F.unsqueeze(gg, -2)), vh), -1), None
    s2 = F.mul(s, s)
    e = F.add(F.sub(F.unsqueeze(s2, -2), F.unsqueeze(s2, -1)), F._plain(np.eye(k)))
    if which == 0:
        gu = F.narrow(gg, -1, 0, k)
        x = F.matmul(F.transpose(u, 1, 2), gu)
        left = F.matmul(u, F.mul(F.div(F.sub(x, F.transpose(x, 1, 2)), e), F.unsqueeze(s, -2)))
        if m > n:
            gus = F.div(gu, F.unsqueeze(s, -2))
            left = F.add(left, F.sub(gus, F.matmul(u, F.matmul(F.transpose(u, 1, 2), gus))))
        return F.reshape(F.matmul(left, vh), -1), None
    gvh = F.narrow(gg, -2, 0, k)
    x = F.matmul(vh, F.transpose(gvh, 1, 2))
    right = F.matmul(F.mul(F.unsqueeze(s, -1), F.div(F.sub(x, F.transpose(x, 1, 2)), e)), vh)
    if m < n:
        sg = F.div(gvh, F.unsqueeze(s, -1))
        right = F.add(right, F.sub(sg, F.matmul(F.matmul(sg, F.transpose(vh, 1, 2)), vh)))
    return F.reshape(F.matmul(u, right), -1), None


def _record_aux5(out):
    tape, r = out._tape, out._r
    return [int(v) for v in tape.aux[tape.ip[r]: tape.ip[r] + 5]]


def _check_svd(a, r, fail):
    a.aux_span(r, a.ip[r], 5)
    which, b, m, n, full = (int(x) for x in a.aux[a.ip[r]: a.ip[r] + 5])
    k = min(m, n)
    sizes = {0: b * m * (m if full else k), 1: b * k, 2: b * n * (n if full else k)}
    if which not in sizes or min(b, m, n) < 0 or b * m * n != a.size[a.a0[r]] or \
            a.size[r] != sizes[which]:
        fail(f"record {r}: matrix sizes do not match")


LINALG_SVD = declare(89, "LinalgSvdBackward0", family=ARRAY, reads=READS_X0 | READS_OUT,
                     check=_check_svd, masks=True, backward=svd_bwd, forward=svd_fwd,
                     tangent=svd_tan, curvature=None, graph=svd_graph)


# --- qr: which 0 Q, 1 R; aux = which, B, m, n, mode (0 reduced, 1 complete, 2 'r': Q empty) ----
# Q is (m, k) (complete: (m, m)), R (k, n) (complete: (m, n)).  PyTorch's backward refuses
# mode 'r' and complete factors of a tall matrix (the engine raises its errors before the
# sweep: see tapegrad.linalg); these rules give nan there.
@inline
def _qr_dims(r, ip, aux):
    return aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2], aux[ip[r] + 3], aux[ip[r] + 4]


@inline
def _qr(a, m, n, complete):
    """(Q, R) of a (m, n), C-ordered, as NumPy's qr in that mode; nan where a is not
    finite.  Complete factors of a tall matrix are those of [a | 0] (the reflectors of zero
    columns are identities), whose R's first n columns are a's."""
    k = min(m, n)
    qc = m if complete else k
    rr = m if complete else k
    if not _finite(a):
        return np.full((m, qc), np.nan), np.full((rr, n), np.nan)
    if k == 0:
        return np.eye(m)[:, :qc].copy(), np.zeros((rr, n))
    if complete and m > n:
        wide = np.zeros((m, m))
        wide[:, :n] = a
        q, rw = np.linalg.qr(wide)
        return np.ascontiguousarray(q), np.ascontiguousarray(rw[:, :n])
    q, rf = np.linalg.qr(a)
    return np.ascontiguousarray(q), np.ascontiguousarray(rf)


@inline
def _qr_factors(vals, voff, a0, r, b, m, n, which):
    """Q (m, k), R (k, n) of matrix b (m <= n, or mode reduced), with the signs of record r's
    own output."""
    k = min(m, n)
    q, rf = _qr(_copy(vals, voff[a0[r]], b, m, n), m, n, False)
    if which == 0:
        own = _copy(vals, voff[r], b, m, k)
        for j in range(k):
            rf[j, :] *= _column_side(own, q, j)
        q = own
    else:
        own = _copy(vals, voff[r], b, k, n)
        for j in range(k):
            q[:, j] *= _row_side(own, rf, j)
        rf = own
    return q, rf


@inline
def _right_inv_t(x, rsq):
    """x R^-T for an upper triangular (k, k) R: the solve R Y^T = X^T."""
    return np.ascontiguousarray(_solve(rsq, np.ascontiguousarray(x.T)).T)


@inline
def _upper_mirror(x):
    """triu(x) + triu(x, 1)^T."""
    k = x.shape[0]
    y = np.empty((k, k))
    for i in range(k):
        for j in range(k):
            y[i, j] = x[i, j] if i <= j else x[j, i]
    return y


@rule
def qr_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    which, b_n, m, n, mode = _qr_dims(r, ip, aux)
    if which == 0 and mode == 2:
        return
    for b in range(b_n):
        q, rf = _qr(_copy(vals, voff[a0[r]], b, m, n), m, n, mode == 1)
        _store(vals, voff[r], b, q if which == 0 else rf)


@rule
def qr_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
           beta1):
    # PyTorch's linalg_qr_backward, one output's part.  m >= n:
    #   gA = (gQ + Q sym(triu(gR R^T - Q^T gQ))) R^-T, sym(T) = T + triu(T, 1)^T;
    # m < n, A = [X | Y], R = [U | V], gR = [gU | gV]: the square rule for X with
    # gQ + Y gV^T for gQ and gU for gR, and gY = Q gV
    which, b_n, m, n, mode = _qr_dims(r, ip, aux)
    k = min(m, n)
    if k == 0:
        return
    for b in range(b_n):
        if mode == 2 or (mode == 1 and m > n):
            _add_into(grads, goff[a0[r]], b, np.full((m, n), np.nan))
            continue
        q, rf = _qr_factors(vals, voff, a0, r, b, m, n, which)
        usq = np.ascontiguousarray(rf[:, :k])
        ga = np.zeros((m, n))
        if which == 0:
            gq = _copy(grads, goff[r], b, m, k)
            t = -np.dot(q.T, gq)
            ga[:, :k] = _right_inv_t(gq + np.dot(q, _upper_mirror(t)), usq)
        else:
            gr = _copy(grads, goff[r], b, k, n)
            gu = np.ascontiguousarray(gr[:, :k])
            t = np.dot(gu, usq.T)
            gq = np.zeros((m, k))
            if m < n:
                gv = np.ascontiguousarray(gr[:, k:])
                y = np.ascontiguousarray(_copy(vals, voff[a0[r]], b, m, n)[:, k:])
                gq = np.dot(y, gv.T)
                t -= np.dot(q.T, gq)
                ga[:, k:] = np.dot(q, gv)
            ga[:, :k] = _right_inv_t(gq + np.dot(q, _upper_mirror(t)), usq)
        _add_into(grads, goff[a0[r]], b, ga)


@rule
def qr_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    # PyTorch's linalg_qr_jvp.  m >= n: C = Q^T dA R^-1, Q^T dQ = tril(C, -1) - tril(C, -1)^T,
    # dR = (C - Q^T dQ) R, dQ = (dA - Q dR) R^-1; m < n: that for X, and dV = Q^T (dY - dQ V)
    which, b_n, m, n, mode = _qr_dims(r, ip, aux)
    k = min(m, n)
    if which == 0 and mode == 2:
        return
    for kk in range(b_n):
        if k == 0:
            continue
        if mode == 1 and m > n:
            _store(tans, b + voff[r], kk, np.full((m, m) if which == 0 else (m, n), np.nan))
            continue
        q, rf = _qr_factors(vals, voff, a0, r, kk, m, n, which)
        usq = np.ascontiguousarray(rf[:, :k])
        da = _copy(tans, b + voff[a0[r]], kk, m, n)
        dx = np.ascontiguousarray(da[:, :k])
        c = _right_inv_t(np.dot(q.T, dx), np.ascontiguousarray(usq.T))   # Q^T dX U^-1
        low = np.tril(c, -1)
        om = low - low.T
        du = np.dot(c - om, usq)
        dq = _right_inv_t(dx - np.dot(q, du), np.ascontiguousarray(usq.T))
        if which == 0:
            _store(tans, b + voff[r], kk, dq)
        else:
            dr = np.zeros((k, n))
            dr[:, :k] = du
            if m < n:
                dy = np.ascontiguousarray(da[:, k:])
                dr[:, k:] = np.dot(q.T, dy - np.dot(dq, np.ascontiguousarray(rf[:, k:])))
            _store(tans, b + voff[r], kk, dr)


def qr_graph(F, g, x0, x1, out, c):
    linalg = F.linalg
    which, b, m, n, mode = _record_aux5(out)
    k = min(m, n)
    if mode == 2 or (mode == 1 and m > n):
        raise RuntimeError(qr_refusal(mode))
    if k == 0:
        return F.mul(x0, 0.0), None
    a = F.reshape(x0, b, m, n)
    q, rf = linalg.qr(a)
    if which == 0:
        own = F.reshape(out, b, m, k)
        d = np.where(np.sum(own._value * q._value, -2) >= 0.0, 1.0, -1.0)
        q, rf = own, F.mul(rf, F._plain(d[..., :, None]))
    else:
        own = F.reshape(out, b, k, n)
        d = np.where(np.sum(own._value * rf._value, -1) >= 0.0, 1.0, -1.0)
        q, rf = F.mul(q, F._plain(d[..., None, :])), own
    usq = F.narrow(rf, -1, 0, k)
    upper = F._plain(np.triu(np.ones((k, k))))
    strict = F._plain(np.triu(np.ones((k, k)), 1))
    qt = F.transpose(q, 1, 2)
    if which == 0:
        gq = F.reshape(g, b, m, k)
        t = F.neg(F.matmul(qt, gq))
        gy = None
    else:
        gr = F.reshape(g, b, k, n)
        t = F.matmul(F.narrow(gr, -1, 0, k), F.transpose(usq, 1, 2))
        gq = None
        gy = None
        if m < n:
            gv = F.narrow(gr, -1, k, n - k)
            gq = F.matmul(F.narrow(a, -1, k, n - k), F.transpose(gv, 1, 2))
            t = F.sub(t, F.matmul(qt, gq))
            gy = F.matmul(q, gv)
    sym = F.add(F.mul(t, upper), F.transpose(F.mul(t, strict), 1, 2))
    x = F.matmul(q, sym)
    if gq is not None:
        x = F.add(gq, x)
    gx = linalg.solve(F.transpose(usq, 1, 2), x, left=False)
    if m < n and gy is None:
        gy = F._plain(np.zeros((b, m, n - k)))      # Q does not depend on A's last columns
    ga = gx if gy is None else F.cat([gx, gy], -1)
    return F.reshape(ga, -1), None


def qr_refusal(mode):
    """PyTorch's error for a backward through qr factors that have no derivative."""
    if mode == 2:
        return ("The derivative of linalg.qr depends on Q, which is not computed when "
                "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to "
                "differentiate through linalg.qr.")
    return "The QR decomposition is not differentiable when mode='complete' and nrows > ncols."


def _check_qr(a, r, fail):
    a.aux_span(r, a.ip[r], 5)
    which, b, m, n, mode = (int(x) for x in a.aux[a.ip[r]: a.ip[r] + 5])
    k = min(m, n)
    if mode == 2:
        sizes = {0: 0, 1: b * k * n}
    else:
        sizes = {0: b * m * (m if mode else k), 1: b * n * (m if mode else k)}
    if which not in sizes or mode not in (0, 1, 2) or min(b, m, n) < 0 or \
            b * m * n != a.size[a.a0[r]] or a.size[r] != sizes[which]:
        fail(f"record {r}: matrix sizes do not match")


LINALG_QR = declare(96, "LinalgQrBackward0", family=ARRAY, reads=READS_X0 | READS_OUT,
                    check=_check_qr, masks=True, backward=qr_bwd, forward=qr_fwd,
                    tangent=qr_tan, curvature=None, graph=qr_graph)


# =================================================================================================
# Triangular solves, pseudo-inverses, least squares and the matrix exponential (opcodes 98, 99,
# 107, 108).  A tolerance (a float) is kept in aux as its 64 bits: ``float_bits`` writes it,
# ``_float_at`` reads it back.
# =================================================================================================
def float_bits(x):
    """The int64 with the bits of float x (how a tolerance is stored in aux)."""
    return int(np.array([x], dtype=np.float64).view(np.int64)[0])


@inline
def _float_at(aux, i):
    return aux[i:i + 1].view(np.float64)[0]


def _aux_of(out, count):
    """The first ``count`` aux values of out's record (see ``_record_aux``)."""
    tape, r = out._tape, out._r
    return [int(v) for v in tape.aux[tape.ip[r]: tape.ip[r] + count]]


def _mask(rows, cols, lower, unit):
    """A constant (rows, cols) 0/1 mask of the lower (or upper) triangle, strict if unit."""
    if lower:
        return np.tril(np.ones((rows, cols)), -1 if unit else 0)
    return np.triu(np.ones((rows, cols)), 1 if unit else 0)


# --- solve_triangular: A X = B (left) or X A = B; aux = B, n, k, left, upper, unitriangular -----
# As for solve, each rule works on the left-sided form M Y = R (M = A or A^T, ...); M is lower
# triangular when A is lower and left, or A is upper and right.  Only M's triangle is read
# (and not its diagonal when unitriangular): its gradient is projected onto that triangle.
@inline
def _tri_solve(m, rhs, lower, unit):
    """m^-1 rhs by substitution, m triangular (only its triangle read); a zero pivot gives
    inf or nan, as LAPACK's trsm."""
    n, k = rhs.shape
    x = np.empty((n, k))
    for c in range(k):
        for t in range(n):
            i = t if lower else n - 1 - t
            acc = rhs[i, c]
            if lower:
                for j in range(i):
                    acc -= m[i, j] * x[j, c]
            else:
                for j in range(i + 1, n):
                    acc -= m[i, j] * x[j, c]
            x[i, c] = acc if unit else acc / m[i, i]
    return x


@inline
def _project(g, lower, unit):
    n = g.shape[0]
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if (j < i if lower else j > i) or (j == i and not unit):
                out[i, j] = g[i, j]
    return out


@inline
def _tri_dims(r, ip, aux):
    left, upper = aux[ip[r] + 3] != 0, aux[ip[r] + 4] != 0
    return (aux[ip[r]], aux[ip[r] + 1], aux[ip[r] + 2], left, upper == (not left),
            aux[ip[r] + 5] != 0)


@rule
def tri_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    b_n, n, k, left, lower, unit = _tri_dims(r, ip, aux)
    if n == 0 or k == 0:
        return
    rows, cols = (n, k) if left else (k, n)
    for b in range(b_n):
        m = _oriented(_block(vals, voff[a0[r]], b, n, n), left)
        rhs = _oriented(_block(vals, voff[a1[r]], b, rows, cols), left)
        _store(vals, voff[r], b, _oriented(_tri_solve(m, rhs, lower, unit), left))


@rule
def tri_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
            beta1):
    # Y = M^-1 R: gR = M^-T gY (M^T triangular the other way), gM = -gR Y^T on M's triangle
    b_n, n, k, left, lower, unit = _tri_dims(r, ip, aux)
    if n == 0 or k == 0:
        return
    rows, cols = (n, k) if left else (k, n)
    for b in range(b_n):
        mt = _oriented(_block(vals, voff[a0[r]], b, n, n), not left)
        gy = _oriented(_block(grads, goff[r], b, rows, cols), left)
        gr = _tri_solve(mt, gy, not lower, unit)
        if need[a1[r]]:
            _add_into(grads, goff[a1[r]], b, _oriented(gr, left))
        if need[a0[r]]:
            y = _oriented(_block(vals, voff[r], b, rows, cols), left)
            gm = _project(-np.dot(gr, np.ascontiguousarray(y.T)), lower, unit)
            _add_into(grads, goff[a0[r]], b, _oriented(gm, left))


@rule
def tri_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    # dY = M^-1 (dR - dM Y), dM on M's triangle
    b_n, n, k, left, lower, unit = _tri_dims(r, ip, aux)
    if n == 0 or k == 0:
        return
    rows, cols = (n, k) if left else (k, n)
    for bb in range(b_n):
        m = _oriented(_block(vals, voff[a0[r]], bb, n, n), left)
        acc = np.zeros((n, k))
        if d1:
            acc += _oriented(_block(tans, b + voff[a1[r]], bb, rows, cols), left)
        if d0:
            y = _oriented(_block(vals, voff[r], bb, rows, cols), left)
            dm = _project(_oriented(_block(tans, b + voff[a0[r]], bb, n, n), left), lower, unit)
            acc -= np.dot(dm, y)
        _store(tans, b + voff[r], bb, _oriented(_tri_solve(m, acc, lower, unit), left))


def tri_graph(F, g, x0, x1, out, c):
    linalg = F.linalg
    b, n, k, left, upper, unit = _aux_of(out, 6)
    a = F.reshape(x0, b, n, n)
    at = F.transpose(a, 1, 2)
    mask = F._plain(_mask(n, n, not upper, unit))
    if left:
        gy, x = F.reshape(g, b, n, k), F.reshape(out, b, n, k)
        gb = linalg.solve_triangular(at, gy, upper=not upper, unitriangular=bool(unit))
        ga = F.neg(F.matmul(gb, F.transpose(x, 1, 2)))
    else:
        gy, x = F.reshape(g, b, k, n), F.reshape(out, b, k, n)
        gb = linalg.solve_triangular(at, gy, upper=not upper, left=False,
                                     unitriangular=bool(unit))
        ga = F.neg(F.matmul(F.transpose(x, 1, 2), gb))
    return F.reshape(F.mul(ga, mask), -1), F.reshape(gb, -1)


def _check_tri(a, r, fail):
    a.aux_span(r, a.ip[r], 6)
    b, n, k = (int(x) for x in a.aux[a.ip[r]: a.ip[r] + 3])
    if min(b, n, k) < 0 or b * n * n != a.size[a.a0[r]] or b * n * k != a.size[a.a1[r]] \
            or b * n * k != a.size[r]:
        fail(f"record {r}: matrix sizes do not match")


LINALG_SOLVE_TRIANGULAR = declare(98, "LinalgSolveTriangularBackward0", family=ARRAY,
                                  arity=2, reads=READS_X0 | READS_OUT, check=_check_tri,
                                  backward=tri_bwd, forward=tri_fwd, tangent=tri_tan,
                                  curvature=None, graph=tri_graph)


# --- pseudo-inverse: out (B, n, m) = A^+ of A (B, m, n); aux = B, m, n, hermitian, atol, rtol ----
@inline
def _pinv(a, atol, rtol, herm):
    """A^+ from the SVD (the eigendecomposition of the lower triangle mirrored, if herm),
    singular values (|eigenvalues|) at most max(atol, rtol * the largest) taken as 0."""
    m, n = a.shape
    out = np.zeros((n, m))
    if m == 0 or n == 0:
        return out
    if not _finite(a):
        return np.full((n, m), np.nan)
    if herm:
        w, v = np.linalg.eigh(np.tril(a) + np.tril(a, -1).T)
        tol = max(atol, rtol * np.max(np.abs(w)))
        for i in range(n):
            if abs(w[i]) > tol:
                col = np.ascontiguousarray(v[:, i])
                out += np.outer(col / w[i], col)
        return out
    u, s, vt = np.linalg.svd(np.ascontiguousarray(a), full_matrices=False)
    tol = max(atol, rtol * s[0])
    for i in range(min(m, n)):
        if s[i] > tol:
            out += np.outer(np.ascontiguousarray(vt[i, :]) / s[i], np.ascontiguousarray(u[:, i]))
    return out


_EPS = float(np.finfo(np.float64).eps)


@inline
def _default_pinv(a):
    m, n = a.shape
    return _pinv(a, 0.0, _EPS * max(m, n), False)


@inline
def _pinv_vjp(g, p, a):
    """PyTorch's pinv_backward: the gradient of A for gradient g (n, m) of P = A^+, in the
    products of the smaller of m and n (right also where A is rank-deficient)."""
    m, n = a.shape
    if m == 0 or n == 0:
        return np.zeros((m, n))
    gt = np.ascontiguousarray(g.T)
    pt = np.ascontiguousarray(p.T)
    if m <= n:
        kk = np.dot(gt, p)
        kpt = np.dot(kk, pt)
        return (-np.ascontiguousarray(np.dot(p, kk).T) + kpt - np.dot(np.dot(a, p), kpt)
                + np.dot(np.dot(pt, p), gt - np.dot(kk, a)))
    kk = np.dot(p, gt)
    ptk = np.dot(pt, kk)
    return (-np.ascontiguousarray(np.dot(kk, p).T) + np.dot(np.dot(gt - np.dot(a, kk), p), pt)
            + ptk - np.dot(np.dot(ptk, p), a))


@inline
def _pinv_jvp(da, p, a):
    """dP = -P dA P + (I - P A) dA^T P^T P + P P^T dA^T (I - A P)."""
    m, n = a.shape
    if m == 0 or n == 0:
        return np.zeros((n, m))
    dat = np.ascontiguousarray(da.T)
    pt = np.ascontiguousarray(p.T)
    return (-np.dot(np.dot(p, da), p)
            + np.dot(np.dot(np.eye(n) - np.dot(p, a), dat), np.dot(pt, p))
            + np.dot(np.dot(np.dot(p, pt), dat), np.eye(m) - np.dot(a, p)))


@inline
def _pinv_dims(r, ip, aux):
    i = ip[r]
    return (aux[i], aux[i + 1], aux[i + 2], aux[i + 3] != 0, _float_at(aux, i + 4),
            _float_at(aux, i + 5))


@rule
def pinv_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    b_n, m, n, herm, atol, rtol = _pinv_dims(r, ip, aux)
    for b in range(b_n):
        a = _oriented(_block(vals, voff[a0[r]], b, m, n), True)
        _store(vals, voff[r], b, _pinv(a, atol, rtol, herm))


@rule
def pinv_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
             beta1):
    b_n, m, n, herm, atol, rtol = _pinv_dims(r, ip, aux)
    if m == 0 or n == 0:
        return
    for b in range(b_n):
        a = _oriented(_block(vals, voff[a0[r]], b, m, n), True)
        p = _oriented(_block(vals, voff[r], b, n, m), True)
        g = _oriented(_block(grads, goff[r], b, n, m), True)
        _add_into(grads, goff[a0[r]], b, _pinv_vjp(g, p, a))


@rule
def pinv_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    b_n, m, n, herm, atol, rtol = _pinv_dims(r, ip, aux)
    if m == 0 or n == 0:
        return
    for k in range(b_n):
        a = _oriented(_block(vals, voff[a0[r]], k, m, n), True)
        p = _oriented(_block(vals, voff[r], k, n, m), True)
        da = _oriented(_block(tans, b + voff[a0[r]], k, m, n), True)
        _store(tans, b + voff[r], k, _pinv_jvp(da, p, a))


def _pinv_vjp_graph(F, g, p, a):
    """``_pinv_vjp`` in recorded ops, on (B, ...) handles."""
    m, n = a._value.shape[-2:]
    mm, t = F.matmul, (lambda x: F.transpose(x, 1, 2))
    gt, pt = t(g), t(p)
    if m <= n:
        kk = mm(gt, p)
        kpt = mm(kk, pt)
        return F.add(F.sub(F.sub(kpt, t(mm(p, kk))), mm(mm(a, p), kpt)),
                     mm(mm(pt, p), F.sub(gt, mm(kk, a))))
    kk = mm(p, gt)
    ptk = mm(pt, kk)
    return F.sub(F.add(F.sub(mm(mm(F.sub(gt, mm(a, kk)), p), pt), t(mm(kk, p))), ptk),
                 mm(mm(ptk, p), a))


def pinv_graph(F, g, x0, x1, out, c):
    b, m, n = _aux_of(out, 3)
    if m == 0 or n == 0:
        return F.mul(x0, 0.0), None
    a, p = F.reshape(x0, b, m, n), F.reshape(out, b, n, m)
    return F.reshape(_pinv_vjp_graph(F, F.reshape(g, b, n, m), p, a), -1), None


def _check_pinv(a, r, fail):
    a.aux_span(r, a.ip[r], 6)
    b, m, n = (int(x) for x in a.aux[a.ip[r]: a.ip[r] + 3])
    if min(b, m, n) < 0 or b * m * n != a.size[a.a0[r]] or b * m * n != a.size[r]:
        fail(f"record {r}: matrix sizes do not match")


LINALG_PINV = declare(99, "LinalgPinvBackward0", family=ARRAY, reads=READS_X0 | READS_OUT,
                      check=_check_pinv, backward=pinv_bwd, forward=pinv_fwd, tangent=pinv_tan,
                      curvature=None, graph=pinv_graph)


# --- matrix exponential: out = exp(A); aux = B, n -------------------------------------------------
# Pade approximant of degree 13 with scaling and squaring (Higham 2005).  Its derivatives are
# the upper-right block of the exponential of [[X, D], [0, X]] (Mathias 1996): PyTorch's
# backward, with X = A^T and D the incoming gradient; the forward rule with X = A, D = dA.
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
           1187353796428800.0, 129060195264000.0, 10559470521600.0, 670442572800.0,
           33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def expm_plain(a):
    """exp(a) of one square C-ordered matrix; plain NumPy (the eager value), compiled as the
    replay's ``_expm``."""
    n = a.shape[0]
    if n == 0:
        return np.zeros((0, 0))
    if not np.all(np.isfinite(a)):
        return np.full((n, n), np.nan)
    c = _PADE13
    norm = np.max(np.sum(np.abs(a), axis=0))
    s = 0
    if norm > _THETA13:
        s = int(np.ceil(np.log2(norm / _THETA13)))
    x = a / 2.0 ** s
    eye = np.eye(n)
    x2 = np.dot(x, x)
    x4 = np.dot(x2, x2)
    x6 = np.dot(x4, x2)
    u = np.dot(x, np.dot(x6, c[13] * x6 + c[11] * x4 + c[9] * x2)
               + c[7] * x6 + c[5] * x4 + c[3] * x2 + c[1] * eye)
    v = np.dot(x6, c[12] * x6 + c[10] * x4 + c[8] * x2) + c[6] * x6 + c[4] * x4 \
        + c[2] * x2 + c[0] * eye
    e = np.ascontiguousarray(np.linalg.solve(v - u, v + u))
    for _ in range(s):
        e = np.dot(e, e)
    return e


_expm = inline(expm_plain)


@inline
def _expm_block(x, d):
    """The upper-right block of exp([[x, d], [0, x]])."""
    n = x.shape[0]
    big = np.zeros((2 * n, 2 * n))
    big[:n, :n] = x
    big[n:, n:] = x
    big[:n, n:] = d
    return np.ascontiguousarray(_expm(big)[:n, n:])


@rule
def expm_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    b_n, n = aux[ip[r]], aux[ip[r] + 1]
    if n == 0:
        return
    for b in range(b_n):
        _store(vals, voff[r], b, _expm(_oriented(_block(vals, voff[a0[r]], b, n, n), True)))


@rule
def expm_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
             beta1):
    b_n, n = aux[ip[r]], aux[ip[r] + 1]
    if n == 0:
        return
    for b in range(b_n):
        at = _oriented(_block(vals, voff[a0[r]], b, n, n), False)
        g = _oriented(_block(grads, goff[r], b, n, n), True)
        _add_into(grads, goff[a0[r]], b, _expm_block(at, g))


@rule
def expm_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    b_n, n = aux[ip[r]], aux[ip[r] + 1]
    if n == 0:
        return
    for k in range(b_n):
        a = _oriented(_block(vals, voff[a0[r]], k, n, n), True)
        da = _oriented(_block(tans, b + voff[a0[r]], k, n, n), True)
        _store(tans, b + voff[r], k, _expm_block(a, da))


def expm_graph(F, g, x0, x1, out, c):
    b, n = _aux_of(out, 2)
    if n == 0:
        return F.mul(x0, 0.0), None
    at = F.transpose(F.reshape(x0, b, n, n), 1, 2)
    zero = F._plain(np.zeros((b, n, n)))
    big = F.cat([F.cat([at, F.reshape(g, b, n, n)], 2), F.cat([zero, at], 2)], 1)
    e = F.linalg.matrix_exp(big)
    return F.reshape(F.narrow(F.narrow(e, 1, 0, n), 2, n, n), -1), None


LINALG_MATRIX_EXP = declare(107, "LinalgMatrixExpBackward0", family=ARRAY, reads=READS_X0,
                            check=_check_square(2, True), backward=expm_bwd, forward=expm_fwd,
                            tangent=expm_tan, curvature=None, graph=expm_graph)


# --- least squares: A (B, m, n), B (B, m, k); aux = B, m, n, k, which, rcond ----------------------
# which 0: the solution X (B, n, k), the minimum-norm least-squares solution; which 1: the
# residuals (B, k), |A X - B|^2 by column (where A is tall and of full rank); which 2: the
# empty residuals PyTorch gives otherwise (a node with no values: every rule does nothing).
# PyTorch's gradients: X's through A^+ (the default tolerance), X = A^+ B; the residuals'
# 2 (A X - B) X^T and -2 (A X - B) by column (A^T (A X - B) = 0: X's own change adds nothing).
@inline
def _lstsq(a, rhs, rcond):
    m, n = a.shape
    k = rhs.shape[1]
    if m == 0 or n == 0 or k == 0:
        return np.zeros((n, k))
    if not (_finite(a) and _finite(rhs)):
        return np.full((n, k), np.nan)
    x, res, rank, sv = np.linalg.lstsq(a, rhs, rcond)
    return np.ascontiguousarray(x)


@inline
def _lstsq_dims(r, ip, aux):
    i = ip[r]
    return aux[i], aux[i + 1], aux[i + 2], aux[i + 3], aux[i + 4], _float_at(aux, i + 5)


@inline
def _lstsq_operands(vals, voff, a0, a1, r, b, m, n, k):
    a = _oriented(_block(vals, voff[a0[r]], b, m, n), True)
    rhs = _oriented(_block(vals, voff[a1[r]], b, m, k), True)
    return a, rhs


@rule
def lstsq_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    b_n, m, n, k, which, rcond = _lstsq_dims(r, ip, aux)
    if which == 2:
        return
    for b in range(b_n):
        a, rhs = _lstsq_operands(vals, voff, a0, a1, r, b, m, n, k)
        x = _lstsq(a, rhs, rcond)
        if which == 0:
            _store(vals, voff[r], b, x)
        else:
            res = np.dot(a, x) - rhs
            for j in range(k):
                vals[voff[r] + b * k + j] = np.sum(res[:, j] * res[:, j])


@rule
def lstsq_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
              beta1):
    b_n, m, n, k, which, rcond = _lstsq_dims(r, ip, aux)
    if which == 2:
        return
    if m == 0 or n == 0 or k == 0:
        if which == 1 and need[a1[r]]:
            for b in range(b_n):    # no unknowns: the residuals are |B|^2
                rhs = _oriented(_block(vals, voff[a1[r]], b, m, k), True)
                g = grads[goff[r] + b * k: goff[r] + (b + 1) * k]
                _add_into(grads, goff[a1[r]], b, 2.0 * rhs * g.reshape((1, k)))
        return
    for b in range(b_n):
        a, rhs = _lstsq_operands(vals, voff, a0, a1, r, b, m, n, k)
        if which == 0:
            p = _default_pinv(a)
            gx = _oriented(_block(grads, goff[r], b, n, k), True)
            if need[a0[r]]:
                _add_into(grads, goff[a0[r]], b,
                          _pinv_vjp(np.dot(gx, np.ascontiguousarray(rhs.T)), p, a))
            if need[a1[r]]:
                _add_into(grads, goff[a1[r]], b, np.dot(np.ascontiguousarray(p.T), gx))
        else:
            x = _lstsq(a, rhs, rcond)
            g = grads[goff[r] + b * k: goff[r] + (b + 1) * k].reshape((1, k))
            res = 2.0 * (np.dot(a, x) - rhs) * g
            if need[a0[r]]:
                _add_into(grads, goff[a0[r]], b, np.dot(res, np.ascontiguousarray(x.T)))
            if need[a1[r]]:
                _add_into(grads, goff[a1[r]], b, -res)


@rule
def lstsq_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    b_n, m, n, k, which, rcond = _lstsq_dims(r, ip, aux)
    if which == 2:
        return
    width = k if which else n * k
    for bb in range(b_n):
        a, rhs = _lstsq_operands(vals, voff, a0, a1, r, bb, m, n, k)
        da = np.zeros((m, n))
        drhs = np.zeros((m, k))
        if d0:
            da = _oriented(_block(tans, b + voff[a0[r]], bb, m, n), True)
        if d1:
            drhs = _oriented(_block(tans, b + voff[a1[r]], bb, m, k), True)
        t0 = b + voff[r] + bb * width
        if m == 0 or n == 0 or k == 0:
            if which == 1:
                for j in range(k):    # no unknowns: the residuals are |B|^2
                    tans[t0 + j] = 2.0 * np.sum(rhs[:, j] * drhs[:, j])
            else:
                tans[t0: t0 + width] = 0.0
            continue
        if which == 0:
            p = _default_pinv(a)
            dx = np.dot(_pinv_jvp(da, p, a), rhs) + np.dot(p, drhs)
            tans[t0: t0 + width] = dx.reshape(width)
        else:
            x = _lstsq(a, rhs, rcond)
            res = np.dot(a, x) - rhs
            move = np.dot(da, x) - drhs
            for j in range(k):
                tans[t0 + j] = 2.0 * np.sum(res[:, j] * move[:, j])


def lstsq_graph(F, g, x0, x1, out, c):
    linalg = F.linalg
    b, m, n, k, which = _aux_of(out, 5)
    if which == 2:
        return None, None
    a, rhs = F.reshape(x0, b, m, n), F.reshape(x1, b, m, k)
    if m == 0 or n == 0 or k == 0:
        if which == 0:
            return F.mul(x0, 0.0), F.mul(x1, 0.0)
        return F.mul(x0, 0.0), F.reshape(F.mul(F.mul(rhs, F.reshape(g, b, 1, k)), 2.0), -1)
    p = linalg.pinv(a)
    if which == 0:
        gx = F.reshape(g, b, n, k)
        ga = _pinv_vjp_graph(F, F.matmul(gx, F.transpose(rhs, 1, 2)), p, a)
        gb = F.matmul(F.transpose(p, 1, 2), gx)
        return F.reshape(ga, -1), F.reshape(gb, -1)
    x = F.matmul(p, rhs)
    res = F.mul(F.sub(F.matmul(a, x), rhs), F.mul(F.reshape(g, b, 1, k), 2.0))
    return F.reshape(F.matmul(res, F.transpose(x, 1, 2)), -1), F.reshape(F.neg(res), -1)


def _check_lstsq(a, r, fail):
    a.aux_span(r, a.ip[r], 6)
    b, m, n, k, which = (int(x) for x in a.aux[a.ip[r]: a.ip[r] + 5])
    expected = {0: b * n * k, 1: b * k, 2: 0}.get(which)
    if min(b, m, n, k) < 0 or expected is None or b * m * n != a.size[a.a0[r]] or \
            b * m * k != a.size[a.a1[r]] or a.size[r] != expected:
        fail(f"record {r}: matrix sizes do not match")


LINALG_LSTSQ = declare(108, "LinalgLstsqBackward0", family=ARRAY, arity=2,
                       reads=READS_X0 | READS_X1, check=_check_lstsq, backward=lstsq_bwd,
                       forward=lstsq_fwd, tangent=lstsq_tan, curvature=None, graph=lstsq_graph)

# the LAPACK-backed ops: factorisations and decompositions of batches of matrices, aux their
# shapes and flags
FACTORISATIONS = frozenset({LINALG_INV, LINALG_SOLVE, LINALG_DET, LINALG_SLOGDET,
                            LINALG_CHOLESKY, LINALG_EIGH, LINALG_SVD, LINALG_QR,
                            LINALG_SOLVE_TRIANGULAR, LINALG_PINV, LINALG_MATRIX_EXP,
                            LINALG_LSTSQ})

constants(globals())
