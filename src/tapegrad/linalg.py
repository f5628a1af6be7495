"""Linear algebra, spelled as ``torch.linalg``: solves, inverses, determinants, Cholesky
factors, norms and products, batched over leading dimensions, float64 only.

``solve``, ``inv``, ``det``, ``slogdet``, ``cholesky``, ``cross``, ``solve_triangular``,
``pinv``, ``lstsq``, ``matrix_exp`` and the decompositions ``eigh``/``eigvalsh``,
``svd``/``svdvals`` and ``qr`` are ops of their own (``ops/linalg.py``), with PyTorch's node
names (``LinalgSolveExBackward0``, ``LinalgEighBackward0`` ...), PyTorch's reverse and
forward rules, compiled replay, and differentiable backward passes for ``create_graph`` and
``hessian``.  The decompositions' values are NumPy's (LAPACK's signs); their vectors'
gradients are those of PyTorch's formulas, inf or nan where eigenvalues or singular values
repeat.  The norms and products are made of other ops.

Example:
    >>> A = tg.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)
    >>> x = tg.linalg.solve(A, tg.tensor([1.0, 2.0]))
    >>> x
    tensor([0.2000, 0.6000], grad_fn=<LinalgSolveExBackward0>)
    >>> tg.linalg.det(A).backward()
    >>> tg.round(A.grad, decimals=12)
    tensor([[ 3., -1.],
            [-1.,  2.]])
"""
import math
import numbers
import warnings
from collections import namedtuple

import numpy as np

from . import functional as F
from . import ops as K
from ._public import public_dir
from .functional import _expanded_ref, _out, _plain, _records, _result, broadcast_shape
from .tape import recording_tape, state

__all__ = ["LinAlgError", "solve", "inv", "inv_ex", "det", "slogdet", "cholesky", "cross",
           "vector_norm", "matrix_norm", "norm", "vecdot", "multi_dot", "matrix_power",
           "eigvalsh", "eigh", "svdvals", "svd", "qr",
           "solve_triangular", "pinv", "lstsq", "matrix_exp", "matrix_rank"]
__dir__ = public_dir(globals())


class LinAlgError(RuntimeError):
    """Raised when a matrix is singular or not positive-definite, as ``torch.linalg.LinAlgError``
    (a ``RuntimeError``), with PyTorch's message.

    Example:
        >>> try:
        ...     tg.linalg.inv(tg.zeros(2, 2))
        ... except tg.linalg.LinAlgError as e:
        ...     print(e)
        linalg.inv: The diagonal element 1 is zero, the inversion could not be completed ...
    """


# PyTorch's names of the result tuples
_SlogdetResult = namedtuple("linalg_slogdet", ["sign", "logabsdet"])
_TorchSlogdet = namedtuple("slogdet", ["sign", "logabsdet"])
_EighResult = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
_SVDResult = namedtuple("linalg_svd", ["U", "S", "Vh"])
_QRResult = namedtuple("linalg_qr", ["Q", "R"])
_InvExResult = namedtuple("linalg_inv_ex", ["inverse", "info"])


# ---------------------------------------------------------------------------------------------
# Checks and recording
# ---------------------------------------------------------------------------------------------
def _matrix_arg(A, name, square=True, floating=True):
    """A as a tensor, checked as PyTorch checks it: at least 2-D, floating, square."""
    A = F.as_tensor_arg(A)
    v = A._value
    if v.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if floating and v.dtype.kind != "f":
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. "
                           f"Got {A.dtype.scalar_name}")
    if square and v.shape[-1] != v.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{v.shape[-2]} by {v.shape[-1]} matrices")
    return A


def _batch_prefix(A, index):
    """PyTorch names the failing matrix of a batch: ``(Batch element k): ``."""
    return f"(Batch element {index}): " if A._value.ndim > 2 else ""


def _record(code, inputs, aux, value):
    """The result tensor of op ``code`` over ``inputs`` (pairs of a tensor and the shape it is
    broadcast to, by hidden expansions) with the value NumPy computed; plain when nothing
    requires grad."""
    tensors = [t for t, _ in inputs]
    value = np.array(value, dtype=np.float64)   # (ascontiguousarray makes a 0-d value 1-d)
    if not _records(*tensors):
        return _plain(value)
    n = value.size
    tape = recording_tape(3 * (n + sum(math.prod(s) for _, s in inputs)))
    refs = [_expanded_ref(tape, t, tuple(s)) for t, s in inputs]
    ip = tape.put_aux(aux)
    off, out = _out(tape, value.shape, n)
    np.copyto(out, value)
    return _result(tape, tape.push(code, refs[0], refs[1] if len(refs) > 1 else -1, off, n,
                                   ip), out)


def _guarded(t, what):
    """t, and while tracing (``tg.compile``) a guard that t has no nan: the replayed op gives
    nan where the matrix is singular or not positive-definite (its compiled rule cannot
    raise), and a failed guard sends the call back to eager mode, which raises PyTorch's
    error."""
    trace = state.trace
    if trace is not None and t._tape is trace.tape:
        trace.guard(F._compare(np.equal, t, t), what)
    return t


def _first_zero_pivot(m):
    """The 1-based index of LU's first zero diagonal entry (LAPACK's ``info``), with partial
    pivoting, for PyTorch's message about a singular matrix."""
    a = np.array(m, dtype=np.float64)
    n = a.shape[0]
    for j in range(n):
        p = j + int(np.argmax(np.abs(a[j:, j])))
        if a[p, j] == 0.0:
            return j + 1
        a[[j, p]] = a[[p, j]]
        a[j + 1:, j] /= a[j, j]
        a[j + 1:, j + 1:] -= np.outer(a[j + 1:, j], a[j, j + 1:])
    return n


def _failing(values, test):
    """The index of the first matrix of a batch (flattened) that ``test`` rejects."""
    flat = values.reshape((-1,) + values.shape[-2:])
    for k, m in enumerate(flat):
        if not test(m):
            return k, m
    return 0, flat[0]


def _invertible(m):
    try:
        np.linalg.inv(m)
        return True
    except np.linalg.LinAlgError:
        return False


def _quiet(fn, *args):
    with np.errstate(all="ignore"):
        return fn(*args)


# ---------------------------------------------------------------------------------------------
# Ops
# ---------------------------------------------------------------------------------------------
def inv(A, *, out=None):
    """The inverse of each square matrix in ``A`` (shape ``(*, n, n)``).

    Raises ``LinAlgError`` for a singular matrix.  ``grad_fn``: ``<LinalgInvExBackward0>``;
    also ``tg.inverse`` and ``Tensor.inverse``.

    Example:
        >>> tg.linalg.inv(tg.tensor([[2.0, 0.0], [0.0, 4.0]]))
        tensor([[0.5000, 0.0000],
                [0.0000, 0.2500]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    A = _matrix_arg(A, "linalg.inv")
    v = A._value
    n = v.shape[-1]
    try:
        value = _quiet(np.linalg.inv, v) if n else np.zeros(v.shape)
    except np.linalg.LinAlgError:
        k, m = _failing(v, _invertible)
        raise LinAlgError(
            f"linalg.inv: {_batch_prefix(A, k)}The diagonal element {_first_zero_pivot(m)} is "
            "zero, the inversion could not be completed because the input matrix is "
            "singular.") from None
    b = math.prod(v.shape[:-2])
    return _guarded(_record(K.LINALG_INV, [(A, v.shape)], (b, n), value),
                    "linalg.inv of an invertible matrix")


def inv_ex(A, *, check_errors=False):
    """``(inverse, info)``: ``inv`` that reports a singular matrix in ``info`` (the 1-based
    index of the zero pivot, 0 when invertible) instead of raising, unless ``check_errors``.

    Example:
        >>> tg.linalg.inv_ex(tg.tensor([[2.0]])).inverse
        tensor([[0.5000]])
    """
    from .creation import tensor
    A = _matrix_arg(A, "linalg.inv_ex")
    v = A._value
    flat = v.reshape((-1,) + v.shape[-2:])
    info = np.array([0 if _invertible(m) else _first_zero_pivot(m) for m in flat],
                    dtype=np.int32).reshape(v.shape[:-2])
    if np.any(info != 0):
        if check_errors:
            inv(A)
        # PyTorch leaves unspecified values where the matrix is singular: nan says so
        return _InvExResult(_plain(np.full(v.shape, np.nan)), tensor(info))
    return _InvExResult(inv(A), tensor(info))


def solve(A, B, *, left=True, out=None):
    """The solution X of ``A X = B`` (``X A = B`` with ``left=False``), batched: A is
    ``(*, n, n)``, B is ``(*, n, k)`` or a vector ``(*, n)``, leading dims broadcast.

    Raises ``LinAlgError`` for a singular A.  ``grad_fn``: ``<LinalgSolveExBackward0>``.

    Example:
        >>> A = tg.tensor([[3.0, 1.0], [1.0, 2.0]])
        >>> tg.linalg.solve(A, tg.tensor([9.0, 8.0]))
        tensor([2., 3.])
        >>> tg.linalg.solve(A, tg.tensor([[9.0, 8.0]]), left=False)
        tensor([[2., 3.]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    A = _matrix_arg(A, "linalg.solve", square=False)
    B = F.as_tensor_arg(B)
    va, vb = A._value, B._value
    if vb.dtype.kind != "f":
        raise RuntimeError("linalg.solve: Expected a floating point or complex tensor as "
                           f"input. Got {B.dtype.scalar_name}")
    if va.shape[-1] != va.shape[-2]:
        raise RuntimeError(f"linalg.solve: A must be batches of square matrices, but they are "
                           f"{va.shape[-2]} by {va.shape[-1]} matrices")
    n = va.shape[-1]
    # PyTorch reads B as a batch of vectors when it is 1-D or A's shape without a column
    vector = vb.ndim == 1 or (vb.ndim == va.ndim - 1 and vb.shape == va.shape[:-1])
    b2 = vb.shape + (1,) if vector else vb.shape
    if (b2[-2] if left else b2[-1]) != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"{eq} ({va.shape[-2]}x{n} and {b2[-2]}x{b2[-1]})")
    if vector and not left:
        raise RuntimeError("linalg.solve: Vector broadcasting of the left hand side is not "
                           "supported for left=False. In this case linalg.solve is equivalent "
                           "to B / A.squeeze(-1)")
    batch = broadcast_shape(va.shape[:-2], b2[:-2])
    rows, cols = b2[-2:]
    k = cols if left else rows
    ea = np.broadcast_to(va, batch + (n, n))
    eb = np.broadcast_to(vb.reshape(b2), batch + (rows, cols))
    try:
        if n == 0 or k == 0:
            value = np.zeros(batch + (rows, cols))
        elif left:
            value = _quiet(np.linalg.solve, ea, eb)
        else:
            value = np.swapaxes(_quiet(np.linalg.solve, np.swapaxes(ea, -1, -2),
                                       np.swapaxes(eb, -1, -2)), -1, -2)
    except np.linalg.LinAlgError:
        kk, _ = _failing(ea, _invertible)
        raise LinAlgError(f"torch.linalg.solve: {_batch_prefix(_plain(ea), kk)}The solver "
                          "failed because the input matrix is singular.") from None
    out_shape = batch + ((n,) if vector else (rows, cols))
    value = value.reshape(out_shape)
    bsz = math.prod(batch)
    # B is read in its matrix layout; a vector and its column share the flat values
    b_mat = B if not vector else F.unsqueeze(B, -1)
    return _guarded(_record(K.LINALG_SOLVE, [(A, batch + (n, n)),
                                             (b_mat, batch + (rows, cols))],
                            (bsz, n, k, int(bool(left))), value),
                    "linalg.solve with an invertible matrix")


def det(A, *, out=None):
    """The determinant of each square matrix in ``A`` (shape ``(*, n, n)``); shape ``(*)``.

    ``grad_fn``: ``<LinalgDetBackward0>``; its gradient is the cofactor matrix, also at
    singular matrices.  Also ``tg.det`` and ``Tensor.det``.

    Example:
        >>> tg.linalg.det(tg.tensor([[1.0, 2.0], [3.0, 4.0]]))
        tensor(-2.0000)
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    A = _matrix_arg(A, "linalg.det")
    v = A._value
    value = _quiet(np.linalg.det, v) if v.shape[-1] else np.ones(v.shape[:-2])
    return _record(K.LINALG_DET, [(A, v.shape)], (math.prod(v.shape[:-2]), v.shape[-1]),
                   np.asarray(value))


def slogdet(A, *, out=None):
    """``(sign, logabsdet)`` of the determinant of each square matrix in ``A``: sign is -1, 0
    or 1 and logabsdet is log|det A| (-inf for a singular matrix).

    Both results have ``grad_fn`` ``<LinalgSlogdetBackward0>``; the sign's gradient is zero.
    Also ``tg.slogdet`` and ``Tensor.slogdet``.

    Example:
        >>> s = tg.linalg.slogdet(tg.tensor([[0.0, 2.0], [3.0, 0.0]]))
        >>> s.sign, s.logabsdet
        (tensor(-1.), tensor(1.7918))
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    return _SlogdetResult(*_slogdet(A, "linalg.slogdet"))


def _slogdet(A, name):
    A = _matrix_arg(A, name)
    v = A._value
    if v.shape[-1]:
        sign, logabs = _quiet(np.linalg.slogdet, v)
    else:
        sign, logabs = np.ones(v.shape[:-2]), np.zeros(v.shape[:-2])
    aux = (math.prod(v.shape[:-2]), v.shape[-1])
    return (_record(K.LINALG_SLOGDET, [(A, v.shape)], aux + (1,), np.asarray(sign)),
            _record(K.LINALG_SLOGDET, [(A, v.shape)], aux + (0,), np.asarray(logabs)))


def cholesky(A, *, upper=False, out=None):
    """The Cholesky factor L (lower triangular, ``A = L L^T``) of each symmetric
    positive-definite matrix in ``A``; its transpose with ``upper=True``.  Only the lower
    triangle of A is read, as in PyTorch.

    Raises ``LinAlgError`` naming the first leading minor that is not positive-definite.
    ``grad_fn``: ``<LinalgCholeskyExBackward0>``; its gradient is symmetric.

    Example:
        >>> tg.linalg.cholesky(tg.tensor([[4.0, 2.0], [2.0, 5.0]]))
        tensor([[2., 0.],
                [1., 2.]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    return _cholesky(A, upper, "linalg.cholesky", 0)


def _minor_order(m):
    """The order of the first leading minor of m that is not positive-definite (lower
    triangle read, as LAPACK's potrf reads it); 0 when m is positive-definite."""
    n = m.shape[0]
    low = np.zeros((n, n))
    for j in range(n):
        d = m[j, j] - low[j, :j] @ low[j, :j]
        if not d > 0.0:
            return j + 1
        low[j, j] = math.sqrt(d)
        low[j + 1:, j] = (m[j + 1:, j] - low[j + 1:, :j] @ low[j, :j]) / low[j, j]
    return 0


def _cholesky(A, upper, name, variant):
    A = _matrix_arg(A, name)
    v = A._value
    n = v.shape[-1]
    try:
        low = _quiet(np.linalg.cholesky, v) if n else np.zeros(v.shape)
        if n and not np.all(np.isfinite(np.diagonal(low, axis1=-2, axis2=-1))):
            raise np.linalg.LinAlgError("nan")
    except np.linalg.LinAlgError:
        k, m = _failing(v, lambda m: _minor_order(m) == 0)
        raise LinAlgError(
            f"{name}: {_batch_prefix(A, k)}The factorization could not be completed because "
            f"the input is not positive-definite (the leading minor of order {_minor_order(m)} "
            "is not positive-definite).") from None
    value = np.swapaxes(low, -1, -2) if upper else low
    return _guarded(_record(K.LINALG_CHOLESKY, [(A, v.shape)],
                            (variant, math.prod(v.shape[:-2]), n, int(bool(upper))), value),
                    "linalg.cholesky of a positive-definite matrix")


def cross(input, other, *, dim=-1, out=None):
    """The cross product of 3-vectors along ``dim`` (size 3 in both), other dims broadcast.

    ``grad_fn``: ``<LinalgCrossBackward0>``; also ``tg.cross`` and ``Tensor.cross``.

    Example:
        >>> tg.linalg.cross(tg.tensor([1.0, 0.0, 0.0]), tg.tensor([0.0, 1.0, 0.0]))
        tensor([0., 0., 1.])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    return _cross(input, other, dim, "linalg.cross")


def _cross(a, b, dim, name):
    a, b = F.as_tensor_arg(a), F.as_tensor_arg(b)
    va, vb = a._value, b._value
    if va.ndim != vb.ndim:
        raise RuntimeError(f"{name}: inputs must have the same number of dimensions.")
    if va.dtype != vb.dtype:
        raise RuntimeError(f"expected scalar type {a.dtype.scalar_name} but found "
                           f"{b.dtype.scalar_name}")
    if va.dtype.kind != "f":
        raise RuntimeError(f"{name}: tapegrad computes cross products of floating tensors only")
    for v in (va, vb):
        if not -v.ndim <= dim < v.ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-v.ndim}, {v.ndim - 1}], but got {dim})")
    # PyTorch checks the lengths along dim before it broadcasts
    if va.shape[dim] != 3 or vb.shape[dim] != 3:
        raise RuntimeError(f"{name}: inputs dimension {dim} must have length 3. Got "
                           f"{va.shape[dim]} and {vb.shape[dim]}")
    shape = broadcast_shape(va.shape, vb.shape)
    d = dim % len(shape)
    value = np.cross(np.broadcast_to(va, shape), np.broadcast_to(vb, shape), axis=d)
    return _record(K.LINALG_CROSS, [(a, shape), (b, shape)],
                   (math.prod(shape[:d]), math.prod(shape[d + 1:])), value)


# ---- triangular solves, pseudo-inverses, least squares, the matrix exponential -------------
def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """The solution X of ``A X = B`` (``X A = B`` with ``left=False``) for triangular A: only
    its upper (``upper=True``) or lower triangle is read, and not its diagonal (taken as ones)
    with ``unitriangular=True``.  A is ``(*, n, n)``, B ``(*, n, k)`` (``(*, k, n)`` for a
    right solve), leading dims broadcast.  A zero on the diagonal gives infs and nans, as in
    PyTorch (no error).

    ``grad_fn``: ``<LinalgSolveTriangularBackward0>``; A's gradient lies in the triangle read.

    Example:
        >>> A = tg.tensor([[2.0, 0.0], [1.0, 4.0]])
        >>> tg.linalg.solve_triangular(A, tg.tensor([[2.0], [9.0]]), upper=False)
        tensor([[1.],
                [2.]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    name = "linalg.solve_triangular"
    A, B = F.as_tensor_arg(A), F.as_tensor_arg(B)
    va, vb = A._value, B._value
    for t, which in ((va, "A"), (vb, "B")):
        if t.ndim < 2:
            raise RuntimeError(f"{name}: The input tensor {which} must have at least 2 "
                               "dimensions.")
    for t in (A, B):
        if t._value.dtype.kind != "f":
            raise NotImplementedError(f"\"triangular_solve_cpu\" not implemented for "
                                      f"'{t.dtype.scalar_name}'")
    if va.shape[-1] != va.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{va.shape[-2]} by {va.shape[-1]} matrices")
    n = va.shape[-1]
    rows, cols = vb.shape[-2:]
    if (rows if left else cols) != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation {eq} "
                           f"({n}x{n} and {rows}x{cols})")
    batch = broadcast_shape(vb.shape[:-2], va.shape[:-2])    # PyTorch's order, for its message
    ea = np.broadcast_to(va.astype(np.float64), batch + (n, n))
    eb = np.broadcast_to(vb.astype(np.float64), batch + (rows, cols))
    # the left-sided form M Y = R: M = A^T, Y = X^T, R = B^T for a right solve
    m = ea if left else np.swapaxes(ea, -1, -2)
    r = eb if left else np.swapaxes(eb, -1, -2)
    lower = (not upper) if left else bool(upper)
    y = np.zeros(r.shape)
    order = range(n) if lower else range(n - 1, -1, -1)
    with np.errstate(all="ignore"):
        for i in order:
            done = slice(0, i) if lower else slice(i + 1, n)
            acc = r[..., i, :] - np.einsum("...j,...jk->...k", m[..., i, done], y[..., done, :])
            y[..., i, :] = acc if unitriangular else acc / m[..., i, i][..., None]
    value = y if left else np.swapaxes(y, -1, -2)
    k = cols if left else rows
    return _record(K.LINALG_SOLVE_TRIANGULAR, [(A, batch + (n, n)), (B, batch + (rows, cols))],
                   (math.prod(batch), n, k, int(bool(left)), int(bool(upper)),
                    int(bool(unitriangular))), value)


_EPS = float(np.finfo(np.float64).eps)


def _tolerance_arg(x):
    if x is None:
        return None
    if hasattr(x, "_value"):
        if np.ndim(x._value) != 0:
            raise NotImplementedError("tapegrad: linalg.pinv takes a number (or 0-d tensor) "
                                      "as atol / rtol")
        x = x._value
    return float(x)


def pinv(A, rcond=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """The pseudo-inverse (Moore-Penrose inverse) of each matrix in ``A`` (``(*, m, n)``;
    result ``(*, n, m)``), from its singular value decomposition (the eigendecomposition of
    the lower triangle with ``hermitian=True``).  Singular values at most
    ``max(atol, rtol * largest)`` count as zero; without either, ``rtol`` is
    ``eps * max(m, n)``, and 0 when only ``atol`` (> 0) is given.  ``rcond`` is ``rtol``.

    ``grad_fn``: ``<LinalgPinvBackward0>``, PyTorch's formula in A and A^+ (no SVD is
    differentiated: it holds at repeated and zero singular values).  Also ``tg.pinverse``
    and ``Tensor.pinverse``.

    Example:
        >>> tg.linalg.pinv(tg.tensor([[1.0, 0.0], [0.0, 0.0]]))
        tensor([[1., 0.],
                [0., 0.]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    if rcond is not None:
        if rtol is not None or atol is not None:
            raise TypeError("linalg_pinv(): give rcond or atol / rtol, not both")
        atol, rtol = 0.0, rcond
    A = F.as_tensor_arg(A)
    v = A._value
    if v.ndim < 2 or v.dtype.kind != "f":
        raise RuntimeError(f"linalg.pinv({A.dtype.scalar_name}{{{list(v.shape)}}}): expected a "
                           "tensor with 2 or more dimensions of float, double, cfloat or "
                           "cdouble types")
    atol, rtol = _tolerance_arg(atol), _tolerance_arg(rtol)
    m, n = v.shape[-2:]
    if rtol is None:
        rtol = 0.0 if (atol is not None and atol > 0) else _EPS * max(m, n)
    atol = 0.0 if atol is None else atol
    b = math.prod(v.shape[:-2])
    value = np.zeros(v.shape[:-2] + (n, m))
    if m and n and b:
        with np.errstate(all="ignore"):
            if hermitian:
                sym = np.tril(v) + np.swapaxes(np.tril(v, -1), -1, -2)
                w, vec = np.linalg.eigh(sym) if np.all(np.isfinite(v)) else (
                    np.full(v.shape[:-1], np.nan), np.full(v.shape, np.nan))
                tol = np.maximum(atol, rtol * np.max(np.abs(w), -1, keepdims=True))
                winv = np.where(np.abs(w) > tol, 1.0 / np.where(w == 0, 1.0, w), 0.0)
                value = (vec * winv[..., None, :]) @ np.swapaxes(vec, -1, -2)
            else:
                u, s, vh = _svd_or_nan(v)
                tol = np.maximum(atol, rtol * s[..., :1])
                sinv = np.where(s > tol, 1.0 / np.where(s == 0, 1.0, s), 0.0)
                value = (np.swapaxes(vh, -1, -2) * sinv[..., None, :]) @ np.swapaxes(u, -1, -2)
    return _record(K.LINALG_PINV, [(A, v.shape)],
                   (b, m, n, int(bool(hermitian)), K.float_bits(atol), K.float_bits(rtol)),
                   value)


def _svd_or_nan(v):
    """The thin SVD; nan factors for a matrix with an inf or nan (LAPACK would give nan)."""
    if np.all(np.isfinite(v)):
        return np.linalg.svd(v, full_matrices=False)
    m, n = v.shape[-2:]
    r = min(m, n)
    u, s, vh = (np.zeros(v.shape[:-2] + t) for t in ((m, r), (r,), (r, n)))
    flat = v.reshape((-1, m, n))
    for i, mat in enumerate(flat):
        idx = np.unravel_index(i, v.shape[:-2]) if v.ndim > 2 else ()
        if np.all(np.isfinite(mat)):
            u[idx], s[idx], vh[idx] = np.linalg.svd(mat, full_matrices=False)
        else:
            u[idx], s[idx], vh[idx] = np.nan, np.nan, np.nan
    return u, s, vh


def _ranks_and_singular_values(flat, rcond):
    ranks = np.zeros(len(flat), dtype=np.int64)
    sv = np.zeros((len(flat), min(flat.shape[-2:])))
    with np.errstate(all="ignore"):
        for i, a in enumerate(flat):
            if sv.shape[1] and np.all(np.isfinite(a)):
                sv[i] = np.linalg.svd(a, compute_uv=False)
                ranks[i] = int(np.sum(sv[i] > rcond * sv[i][0]))
            elif sv.shape[1]:
                sv[i] = np.nan
    return ranks, sv


def matrix_exp(A):
    """The matrix exponential of each square matrix in ``A`` (``(*, n, n)``): Pade
    approximation with scaling and squaring.

    ``grad_fn``: ``<LinalgMatrixExpBackward0>``; the gradient is the upper-right block of
    the exponential of ``[[A^T, G], [0, A^T]]``, as PyTorch computes it.  Also
    ``tg.matrix_exp`` and ``Tensor.matrix_exp``.

    Example:
        >>> tg.linalg.matrix_exp(tg.tensor([[0.0, 1.0], [0.0, 0.0]]))
        tensor([[1.0000, 1.0000],
                [0.0000, 1.0000]])
    """
    A = _matrix_arg(A, "linalg.matrix_exp")
    v = A._value
    n = v.shape[-1]
    b = math.prod(v.shape[:-2])
    value = np.zeros(v.shape)
    if n:
        flat = v.reshape((b, n, n))
        value = np.array([K.expm_plain(np.ascontiguousarray(a)) for a in flat]).reshape(
            v.shape)
    return _record(K.LINALG_MATRIX_EXP, [(A, v.shape)], (b, n), value)


_LstsqResult = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A, B, rcond=None, *, driver=None):
    """``(solution, residuals, rank, singular_values)``: the least-squares solution X of
    ``A X = B`` (the one of least norm where A is rank-deficient), A ``(*, m, n)`` and B
    ``(*, m, k)`` or ``(*, m)``, leading dims broadcast.  Singular values below ``rcond``
    (default ``eps * max(m, n)``) times the largest count as zero.

    What is filled follows PyTorch's CPU drivers (default ``'gelsy'``): ``residuals`` (the
    squared residual norm of each column) only for m > n, a driver other than ``'gelsy'``
    and, except for ``'gels'``, A of full rank; ``rank`` except for ``'gels'``;
    ``singular_values`` for ``'gelsd'`` and ``'gelss'``; the others are empty.  Every driver
    gives the minimum-norm solution here (PyTorch's ``'gels'`` assumes full rank, and gives
    zero residuals for an A of no columns).

    ``grad_fn`` of the solution and residuals: ``<LinalgLstsqBackward0>``; the solution's
    gradient is taken through A^+, as PyTorch's.

    Example:
        >>> A = tg.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
        >>> tg.linalg.lstsq(A, tg.tensor([[1.0], [2.0], [3.0]])).solution
        tensor([[1.],
                [2.]])
    """
    from .creation import tensor
    name = "torch.linalg.lstsq"
    A, B = F.as_tensor_arg(A), F.as_tensor_arg(B)
    va, vb = A._value, B._value
    if va.ndim < 2:
        raise RuntimeError(f"{name}: input must have at least 2 dimensions.")
    if vb.ndim < 1:
        raise RuntimeError(f"{name}: other must have at least 1 dimension.")
    if va.dtype != vb.dtype:
        raise RuntimeError(f"{name}: Expected input and other to have the same dtype, but got "
                           f"input's dtype {A.dtype.scalar_name} and other's dtype "
                           f"{B.dtype.scalar_name}")
    vector = va.ndim - vb.ndim
    if not 0 <= vector <= 1:
        raise RuntimeError(f"{name}: input.dim() must be greater or equal to other.dim() and "
                           "(input.dim() - other.dim()) <= 1")
    b2 = vb.shape + (1,) if vector else vb.shape
    if va.shape[-2] != b2[-2]:
        raise RuntimeError(f"{name}: input.size(-2) should match other.size("
                           f"{-1 if vector else -2})")
    if driver is None:
        driver = "gelsy"
    if driver not in _DRIVERS:
        raise RuntimeError(f"{name}: parameter `driver` should be one of (gels, gelsy, gelsd, "
                           "gelss)")
    if va.dtype.kind != "f":
        raise RuntimeError("This function doesn't handle types other than float and double")
    m, n = va.shape[-2:]
    k = b2[-1]
    batch = broadcast_shape(va.shape[:-2], b2[:-2])
    if rcond is None:
        rcond = _EPS * max(m, n)
    rcond = float(rcond)
    bsz = math.prod(batch)
    ea = np.broadcast_to(va, batch + (m, n)).reshape((bsz, m, n))
    eb = np.broadcast_to(vb.reshape(b2), batch + (m, k)).reshape((bsz, m, k))
    r = min(m, n)
    x = np.zeros((bsz, n, k))
    ranks = np.zeros(bsz, dtype=np.int64)
    sv = np.zeros((bsz, r))
    with np.errstate(all="ignore"):
        for i in range(bsz):
            if m and n and k and np.all(np.isfinite(ea[i])) and np.all(np.isfinite(eb[i])):
                x[i], _, ranks[i], sv[i] = np.linalg.lstsq(ea[i], eb[i], rcond=rcond)
            elif m and n:
                if not (np.all(np.isfinite(ea[i])) and np.all(np.isfinite(eb[i]))):
                    x[i], sv[i] = np.nan, np.nan
                else:
                    sv[i] = np.linalg.svd(ea[i], compute_uv=False)
                    ranks[i] = int(np.sum(sv[i] > rcond * sv[i][0])) if r else 0
        res = np.sum((ea @ x - eb) ** 2, axis=-2)
    # rank and singular values are A's own, of its batch (not the broadcast one)
    own = math.prod(va.shape[:-2])
    if own != bsz:
        ranks, sv = _ranks_and_singular_values(va.reshape((own, m, n)), rcond)
    with_res = m > n and driver != "gelsy" and (driver == "gels" or bool(np.all(ranks == n)))
    aux = (bsz, m, n, k)
    bits = K.float_bits(rcond)
    inputs = [(A, batch + (m, n)), (B if not vector else F.unsqueeze(B, -1), batch + (m, k))]
    sol_shape = batch + ((n,) if vector else (n, k))
    solution = _record(K.LINALG_LSTSQ, inputs, aux + (0, bits), x.reshape(sol_shape))
    if with_res:
        residuals = _record(K.LINALG_LSTSQ, inputs, aux + (1, bits),
                            res.reshape(batch + (k,)))
    else:
        residuals = _record(K.LINALG_LSTSQ, inputs, aux + (2, bits), np.zeros(0))
    rank = tensor(ranks.reshape(va.shape[:-2])) if driver != "gels" else tensor(
        np.zeros(0, dtype=np.int64))
    if driver in ("gelsd", "gelss"):
        singular = _plain(sv.reshape(va.shape[:-2] + (r,)))
    else:
        singular = _plain(np.zeros(0))
    return _LstsqResult(solution, residuals, rank, singular)


# ---------------------------------------------------------------------------------------------
# Composites
# ---------------------------------------------------------------------------------------------
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The ``ord``-norm of the elements of ``x`` (all of them, or those along ``dim``, an int
    or a tuple), as a vector: ``inf`` and ``-inf`` give the largest and smallest absolute
    value.  ``ord=0`` is not supported.  ``grad_fn``: ``<LinalgVectorNormBackward0>``.

    Example:
        >>> tg.linalg.vector_norm(tg.tensor([[3.0, 4.0], [0.0, 0.0]]))
        tensor(5.)
    """
    if isinstance(ord, str) or not isinstance(ord, numbers.Real):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' must be Number, not "
                        f"{type(ord).__name__}")
    x = F._reduce_as(F.as_tensor_arg(x), dtype)
    if isinstance(dim, list):
        dim = tuple(dim)
    return F.norm(x, float(ord), dim, keepdim)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The ``ord``-norm of each matrix in the plane of ``dim``: ``'fro'``, 1, -1 (largest and
    smallest column sum of absolute values), ``inf``, ``-inf`` (row sums), 2, -2 (largest
    and smallest singular value) and ``'nuc'`` (their sum).

    Example:
        >>> A = tg.tensor([[1.0, -2.0], [3.0, 4.0]])
        >>> tg.linalg.matrix_norm(A, 1), tg.linalg.matrix_norm(A, float("inf"))
        (tensor(6.), tensor(7.))
    """
    A = F._reduce_as(F.as_tensor_arg(A), dtype)
    v = A._value
    if v.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                           "dimensions.")
    dim = tuple(dim)
    if len(dim) != 2:
        raise RuntimeError("linalg.matrix_norm: dim must be a 2-tuple. Got "
                           + " ".join(str(d) for d in dim))
    d0, d1 = (d % v.ndim for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, "
                           f"{dim[1]})")
    if ord == "fro":
        return F.norm(A, 2.0, (d0, d1), keepdim)
    if ord == "nuc" or ord in (2, -2):
        # PyTorch's composition: the singular values of the matrices moved last, then their
        # sum, max or min; with keepdim the result is permuted back
        perm = [d for d in range(v.ndim) if d not in (d0, d1)] + [d0, d1]
        s = svdvals(F.permute(A, *perm))
        value = (F.sum if ord == "nuc" else F.amax if ord == 2 else F.amin)(s, -1, keepdim)
        if keepdim:
            back = [perm.index(d) for d in range(v.ndim)]
            value = F.permute(F.unsqueeze(value, -1), *back)
        return value
    if ord not in (1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    # PyTorch's composition: a 1-norm along one dim, then max or min along the other
    if abs(ord) == math.inf:
        d0, d1 = d1, d0
    if not keepdim and d0 < d1:
        d1 -= 1
    sums = F.norm(A, 1.0, d0, keepdim)
    return F.amax(sums, d1, keepdim) if ord > 0 else F.amin(sums, d1, keepdim)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """A vector or matrix norm, as ``torch.linalg.norm``: with ``ord=None`` the 2-norm of the
    flattened input (or along ``dim``); a 2-tuple ``dim``, a 2-D input with ``ord`` given, or
    a string ``ord`` is a matrix norm.

    Example:
        >>> tg.linalg.norm(tg.tensor([[1.0, 2.0], [2.0, 4.0]]))
        tensor(5.)
    """
    A = F.as_tensor_arg(A)
    nd = A._value.ndim
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None:
        dim = tuple(dim)
        if len(dim) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if nd not in (1, 2):
        raise RuntimeError("linalg.norm: If dim is not specified but ord is, the input must be "
                           f"1D or 2D. Got {nd}D.")
    if nd == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    return vector_norm(A, ord, None, keepdim, dtype=dtype)


def vecdot(x, y, *, dim=-1):
    """The dot product of x and y along ``dim``, other dims broadcast: ``(x * y).sum(dim)``.

    Example:
        >>> tg.linalg.vecdot(tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0]))
        tensor(11.)
    """
    return F.sum(F.mul(x, y), dim)


def multi_dot(tensors, *, out=None):
    """The product of a list of matrices, the first and last of which may be vectors.

    Example:
        >>> tg.linalg.multi_dot([tg.ones(2), tg.ones(2, 3), tg.ones(3)])
        tensor(6.)
    """
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for j, t in enumerate(tensors):
        nd = F.as_tensor_arg(t)._value.ndim
        if (nd not in (1, 2)) or (nd == 1 and 0 < j < len(tensors) - 1):
            raise RuntimeError(f"multi_dot(): tensor {j} must be 2D but got {nd}D")
    first, last = (F.as_tensor_arg(t)._value for t in (tensors[0], tensors[-1]))
    mats = [F.unsqueeze(tensors[0], 0) if first.ndim == 1 else tensors[0]]
    mats += list(tensors[1:-1])
    mats.append(F.unsqueeze(tensors[-1], -1) if last.ndim == 1 else tensors[-1])
    result = mats[0]
    for t in mats[1:]:
        result = F.matmul(result, t)
    shape = result._value.shape
    # PyTorch's result is a view of the (rows, cols) product, without the vectors' sides
    shape = ((shape[0],) if first.ndim == 2 else ()) + ((shape[1],) if last.ndim == 2 else ())
    return F.reshape(result, shape)


def matrix_power(A, n):
    """A multiplied by itself ``n`` times (an int; a negative power inverts first; 0 gives
    identity matrices), batched.

    Example:
        >>> tg.linalg.matrix_power(tg.tensor([[1.0, 1.0], [0.0, 1.0]]), 3)
        tensor([[1., 3.],
                [0., 1.]])
    """
    A = _matrix_arg(A, "linalg.matrix_power", floating=False)
    if not isinstance(n, numbers.Integral):
        raise TypeError(f"matrix_power(): argument 'n' must be int, not {type(n).__name__}")
    if n == 0:
        eye = _plain(np.ascontiguousarray(np.broadcast_to(
            np.eye(A._value.shape[-1], dtype=A._value.dtype), A._value.shape)))
        # PyTorch's identity is a copy into A's shape, in A's graph with a zero gradient (a
        # where, not A * 0, which would be nan at an infinite entry)
        return F.where(_plain(np.ones(A._value.shape, dtype=bool)), eye, A) if A._rg else eye
    if n < 0:
        A = inv(A)
        n = -n
    # binary powers, as PyTorch multiplies them
    result, base = None, A
    while n:
        if n & 1:
            result = base if result is None else F.matmul(result, base)
        n >>= 1
        if n:
            base = F.matmul(base, base)
    return result


# ---- decompositions --------------------------------------------------------------------------
# Each output is a record of its own (``ops/linalg.py``): node names are PyTorch's, and the
# outputs' gradient parts sum to PyTorch's backward.
def eigvalsh(A, UPLO="L", *, out=None):
    """The eigenvalues of each symmetric matrix in A, ascending (the ``UPLO`` triangle read).

    ``grad_fn``: ``<LinalgEighBackward0>``, as PyTorch's; the gradient ``V diag(g) V^T`` is
    symmetric, whichever triangle was read, and is finite at repeated eigenvalues.

    Example:
        >>> tg.linalg.eigvalsh(tg.tensor([[2.0, 1.0], [1.0, 2.0]]))
        tensor([1., 3.])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    A = _matrix_arg(A, "linalg.eigh")   # PyTorch names eigh in its errors
    return _eigh(A, UPLO, vectors=False)[0]


def eigh(A, UPLO="L", *, out=None):
    """``(eigenvalues, eigenvectors)`` of each symmetric matrix in A (columns of the second
    are the vectors; their signs are LAPACK's, as NumPy gives them).

    Both have ``grad_fn`` ``<LinalgEighBackward0>``; the backward is PyTorch's
    (``linalg_eig_backward``, Hermitian case), a symmetric gradient whichever triangle
    ``UPLO`` read.  Only gauge-invariant functions of the eigenvectors (``V @ diag(L) @ V.T``,
    ``V * V``) have a well-defined gradient; at repeated eigenvalues the eigenvectors'
    gradient is inf or nan, as in PyTorch (the eigenvalues' stays finite).

    Example:
        >>> tg.linalg.eigh(tg.tensor([[2.0, 0.0], [0.0, 1.0]])).eigenvalues
        tensor([1., 2.])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    A = _matrix_arg(A, "linalg.eigh")
    return _EighResult(*_eigh(A, UPLO, vectors=True))


def _eigh(A, UPLO, vectors):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    v = A._value
    n = v.shape[-1]
    if vectors:
        w, vecs = np.linalg.eigh(v, UPLO=UPLO)
    else:
        w, vecs = np.linalg.eigvalsh(v, UPLO=UPLO), None
    aux = (math.prod(v.shape[:-2]), n, int(UPLO == "U"))
    values = _record(K.LINALG_EIGH, [(A, v.shape)], (0,) + aux, w)
    if not vectors:
        return values, None
    return values, _record(K.LINALG_EIGH, [(A, v.shape)], (1,) + aux, vecs)


def svdvals(A, *, driver=None, out=None):
    """The singular values of each matrix in A, descending.

    ``grad_fn``: ``<LinalgSvdBackward0>``, as PyTorch's; the gradient is ``U diag(g) Vh``.

    Example:
        >>> tg.linalg.svdvals(tg.tensor([[3.0, 0.0], [0.0, -4.0]]))
        tensor([4., 3.])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    A = _matrix_arg(A, "linalg.svdvals", square=False)
    v = A._value
    return _record(K.LINALG_SVD, [(A, v.shape)], _svd_aux(v, 1, False),
                   np.linalg.svd(v, compute_uv=False))


def _svd_aux(v, which, full):
    return (which, math.prod(v.shape[:-2]), v.shape[-2], v.shape[-1], int(bool(full)))


def svd(A, full_matrices=True, *, driver=None, out=None):
    """``(U, S, Vh)`` with ``A = U diag(S) Vh`` (signs of the vectors are LAPACK's, as NumPy
    gives them).

    The three have ``grad_fn`` ``<LinalgSvdBackward0>``; the backward is PyTorch's
    (``svd_backward``): only gauge-invariant functions of U and Vh (``U @ diag(S) @ Vh``,
    ``U * U``) have a well-defined gradient; where singular values repeat (or, for a
    non-square A, one is zero) the vectors' gradient is inf or nan, as in PyTorch.  With
    ``full_matrices=True`` the vectors past the ``min(m, n)``-th get no gradient (they are
    an arbitrary basis), as in PyTorch.

    Example:
        >>> tg.linalg.svd(tg.tensor([[3.0, 0.0], [0.0, 4.0]])).S
        tensor([4., 3.])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    A = _matrix_arg(A, "linalg.svd", square=False)
    v = A._value
    u, s, vh = np.linalg.svd(v, full_matrices=full_matrices)
    return _SVDResult(*(_record(K.LINALG_SVD, [(A, v.shape)],
                                _svd_aux(v, which, full_matrices), value)
                        for which, value in enumerate((u, s, vh))))


_QR_MODES = {"reduced": 0, "complete": 1, "r": 2}


def qr(A, mode="reduced", *, out=None):
    """``(Q, R)`` with ``A = Q R``: ``mode`` 'reduced' (Q is (m, k), R (k, n), k = min(m, n)),
    'complete' (Q is (m, m)) or 'r' (Q is empty); signs are LAPACK's, as NumPy gives them.

    Both have ``grad_fn`` ``<LinalgQrBackward0>``; the backward is PyTorch's
    (``linalg_qr_backward``), inf or nan where R is singular.  As in PyTorch, a backward
    through the factors of mode 'r', or of mode 'complete' for a matrix with more rows than
    columns, raises.

    Example:
        >>> tg.linalg.qr(tg.tensor([[2.0, 0.0], [0.0, 3.0]])).R.abs()
        tensor([[2., 0.],
                [0., 3.]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    A = _matrix_arg(A, "linalg.qr", square=False)
    if mode not in _QR_MODES:
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    v = A._value
    if mode == "r":
        q, r = np.zeros(0), np.linalg.qr(v, mode="r")
    else:
        q, r = np.linalg.qr(v, mode=mode)
    aux = (math.prod(v.shape[:-2]), v.shape[-2], v.shape[-1], _QR_MODES[mode])
    result = _QRResult(_record(K.LINALG_QR, [(A, v.shape)], (0,) + aux, q),
                       _record(K.LINALG_QR, [(A, v.shape)], (1,) + aux, r))
    if result.R._tape is not None and (mode == "r" or (mode == "complete" and
                                                       v.shape[-2] > v.shape[-1])):
        result.R._tape.refused = True   # a backward through it raises (autograd._check_refused)
    return result


# ---------------------------------------------------------------------------------------------
# The top-level spellings (``tg.det``, ``tg.inverse`` ...) and methods
# ---------------------------------------------------------------------------------------------
def _top_slogdet(A):
    """``(sign, logabsdet)`` of the determinant of each square matrix, as
    ``tg.linalg.slogdet`` (a tuple named ``slogdet``, as PyTorch's).

    Example:
        >>> tg.slogdet(tg.tensor([[2.0, 0.0], [0.0, -1.0]])).sign
        tensor(-1.)
    """
    return _TorchSlogdet(*_slogdet(A, "linalg.slogdet"))


def _logdet(A):
    """log det A of each square matrix: nan where the determinant is negative, -inf where it
    is zero.  ``grad_fn``: ``<WhereBackward0>``, as PyTorch's.

    Example:
        >>> tg.logdet(tg.tensor([[2.0, 0.0], [0.0, 3.0]]))
        tensor(1.7918)
    """
    sign, logabs = _slogdet(A, "linalg.slogdet")
    return F.where(_plain(sign._value < 0.0), math.nan, logabs)


def _torch_cholesky(A, upper=False):
    """The deprecated ``torch.cholesky``: ``tg.linalg.cholesky`` with a warning, and its own
    node name, ``<CholeskyBackward0>``.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     tg.cholesky(tg.tensor([[4.0]]))
        tensor([[2.]])
    """
    warnings.warn("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be "
                  "removed in a future PyTorch release.", UserWarning, stacklevel=2)
    return _cholesky(A, upper, "linalg.cholesky", 1)


def _torch_cross(input, other, dim=None):
    """``tg.linalg.cross`` along ``dim``; without ``dim`` (deprecated, with PyTorch's warning)
    along the first dimension of size 3.

    Example:
        >>> tg.cross(tg.tensor([0.0, 1.0, 0.0]), tg.tensor([0.0, 0.0, 1.0]), dim=0)
        tensor([1., 0., 0.])
    """
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\n"
                      "Please either pass the dim explicitly or simply use torch.linalg.cross."
                      "\nThe default value of dim will change to agree with that of "
                      "linalg.cross in a future release.", UserWarning, stacklevel=2)
        shape = broadcast_shape(F.as_tensor_arg(input)._value.shape,
                                F.as_tensor_arg(other)._value.shape)
        dim = next((d for d, s in enumerate(shape) if s == 3), -1)
    return _cross(input, other, dim, "linalg.cross")


def _trace(A):
    """The sum of the diagonal of a matrix (``grad_fn``: ``TraceBackward0``).

    Example:
        >>> tg.trace(tg.tensor([[1.0, 2.0], [3.0, 4.0]]))
        tensor(5.)
    """
    A = F.as_tensor_arg(A)
    if A._value.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim "
                           f"{A._value.ndim}")
    return F.named_node(F.sum(F.diagonal(A, 0, 0, 1)), "TraceBackward0", A)


def _pinverse(input, rcond=1e-15):  # noqa: A002 - PyTorch's argument name
    """The pseudo-inverse, as ``tg.linalg.pinv(input, rtol=rcond)`` (``atol`` 0).

    Example:
        >>> tg.pinverse(tg.tensor([[2.0, 0.0], [0.0, 0.0]]))
        tensor([[0.5000, 0.0000],
                [0.0000, 0.0000]])
    """
    return pinv(input, atol=0.0, rtol=rcond)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """The number of singular values of each matrix in A above ``max(atol, rtol * s_max)``
    (int64, no gradient).  With neither tolerance given, ``rtol`` is ``eps * max(m, n)``; with
    only ``atol`` (nonzero), ``rtol`` is 0.  ``hermitian=True``: eigenvalues of the lower
    triangle, in absolute value.  In a compiled call the values are read (a guard).

    Example:
        >>> tg.linalg.matrix_rank(tg.tensor([[1.0, 2.0], [2.0, 4.0]]))
        tensor(1)
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    A = F.as_tensor_arg(A)
    if A._value.ndim < 2:
        raise RuntimeError("torch.linalg.matrix_rank: The input tensor input must have at "
                           "least 2 dimensions.")
    F.read_value(A, "linalg.matrix_rank()")
    v = np.asarray(A._value, dtype=np.float64)
    m, n = v.shape[-2:]
    if hermitian:
        s = np.abs(np.linalg.eigvalsh(v)) if m * n else np.zeros(v.shape[:-1])
    else:
        s = np.linalg.svd(v, compute_uv=False) if m * n else np.zeros(v.shape[:-2] + (0,))
    if rtol is None:
        rtol = np.finfo(np.float64).eps * max(m, n) if not atol else 0.0
    s_max = s.max(axis=-1, initial=0.0)
    tol = np.maximum(0.0 if atol is None else atol, rtol * s_max)
    return _plain(np.asarray((s > tol[..., None]).sum(axis=-1), dtype=np.int64))


def cholesky_solve(B, L, upper=False, *, out=None):
    """The solution X of ``A X = B`` given A's Cholesky factor L (``A = L L^T``, or
    ``A = U^T U`` with ``upper=True``), batched and broadcast.

    Recorded as ``linalg.solve(L L^T, B)``: that composite's gradient for the factor is
    PyTorch's, ``-(G X^T + X G^T) L`` with ``G = A^-T dX``, a full matrix (two triangular
    solves would give only its triangle).  Its ``grad_fn`` is ``<LinalgSolveExBackward0>``
    (PyTorch's ``CholeskySolveBackward0``), and its values agree with PyTorch's to rounding.

    Example:
        >>> L = tg.tensor([[2.0, 0.0], [1.0, 1.0]])
        >>> tg.cholesky_solve(tg.tensor([[4.0], [3.0]]), L)   # A = [[4, 2], [2, 2]]
        tensor([[0.5000],
                [1.0000]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    B, L = F.as_tensor_arg(B), F.as_tensor_arg(L)
    for name, t in (("b", B), ("u", L)):
        if t._value.ndim < 2:
            raise RuntimeError(f"{name} should have at least 2 dimensions, but has "
                               f"{t._value.ndim} dimensions instead")
    n, k = L._value.shape[-1], B._value.shape[-2:]
    if L._value.shape[-2] != n or k[0] != n:
        raise RuntimeError(f"Incompatible matrix sizes for cholesky_solve: each A matrix is "
                           f"{L._value.shape[-2]} by {n} but each b matrix is {k[0]} by {k[1]}")
    A = L.mT @ L if upper else L @ L.mT
    return solve(A, B)


# tapegrad.det, tapegrad.inverse ... and the Tensor methods of the same names
_TOP_LEVEL = {"det": det, "inverse": inv, "logdet": _logdet, "slogdet": _top_slogdet,
             "cholesky": _torch_cholesky, "cross": _torch_cross, "trace": _trace,
             "pinverse": _pinverse, "matrix_exp": matrix_exp,
             "cholesky_solve": cholesky_solve}
_METHODS = dict(_TOP_LEVEL, matrix_power=matrix_power)
