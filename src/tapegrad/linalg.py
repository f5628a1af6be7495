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

import numpy as np

from . import functional as F
from . import ops as K
from .ops.linalg import det_values as _lu_det_values
from ._public import public_dir
from .functional import _expanded_ref, _out, _plain, _records, _result, broadcast_shape
from .return_types import return_type
from .tape import recording_tape, state

__all__ = ["LinAlgError", "solve", "solve_ex", "inv", "inv_ex", "det", "slogdet", "cholesky",
           "cholesky_ex", "cross", "cond", "matmul", "diagonal", "vander", "tensorinv",
           "tensorsolve",
           "vector_norm", "matrix_norm", "norm", "vecdot", "multi_dot", "matrix_power",
           "eigvalsh", "eigh", "svdvals", "svd", "qr",
           "solve_triangular", "pinv", "lstsq", "matrix_exp", "matrix_rank",
           "lu_factor", "lu_factor_ex", "lu", "lu_solve"]
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
_SlogdetResult = return_type("linalg_slogdet", ["sign", "logabsdet"])
_TorchSlogdet = return_type("slogdet", ["sign", "logabsdet"])
_EighResult = return_type("linalg_eigh", ["eigenvalues", "eigenvectors"])
_SVDResult = return_type("linalg_svd", ["U", "S", "Vh"])
_QRResult = return_type("linalg_qr", ["Q", "R"])
_InvExResult = return_type("linalg_inv_ex", ["inverse", "info"])


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
    return _inv(_matrix_arg(A, "linalg.inv"), "linalg.inv", check_errors=True)[0]


def _inv(A, name, check_errors, batched=True):
    """(inverse, info) of the checked square matrices A: info is LAPACK's, the 1-based index
    of the first zero pivot of each matrix (0 where invertible).  A singular matrix raises
    PyTorch's error, whose text starts with ``name`` (``batched``: with the batch element
    named), when ``check_errors``; otherwise its inverse holds what LAPACK's LU solve leaves
    there (infs and nans, ``_singular_solve``) and the gradient there is nan."""
    v = A._value
    n = v.shape[-1]
    batch = v.shape[:-2]
    info = np.zeros(batch, dtype=np.int32)
    try:
        value = _quiet(np.linalg.inv, v) if n else np.zeros(v.shape)
    except np.linalg.LinAlgError:
        flat = v.reshape((-1, n, n))
        failing = [k for k, m in enumerate(flat) if not _invertible(m)]
        if check_errors:
            k = failing[0]
            prefix = _batch_prefix(A, k) if batched else ""
            raise LinAlgError(
                f"{name}: {prefix}The diagonal element {_first_zero_pivot(flat[k])} is "
                "zero, the inversion could not be completed because the input matrix is "
                "singular.") from None
        value = np.empty(flat.shape)
        singular = set(failing)
        for k, m in enumerate(flat):
            if k in singular:
                value[k] = _singular_solve(m, np.eye(n))
                info.reshape(-1)[k] = _first_zero_pivot(m)
            else:
                value[k] = _quiet(np.linalg.inv, m)
        value = value.reshape(v.shape)
        F.read_value(A, f"{name}()")      # info is read off the values: a replay checks them
    b = math.prod(batch)
    return _guarded(_record(K.LINALG_INV, [(A, v.shape)], (b, n), value),
                    f"{name} of an invertible matrix"), info


def _singular_solve(m, rhs, transposed=False):
    """m^-1 rhs (m^-T rhs when ``transposed``) as LAPACK's getrf and getrs leave it for a
    singular m: the LU factorisation of m with partial pivoting runs past a zero pivot (the
    column below it is zero then, and nothing is scaled), and the triangular solves divide
    by it, giving infs and nans where PyTorch gives them.  (PyTorch documents these values
    as unspecified; their pattern is LAPACK's for small matrices, the finite ones agree to
    rounding.)"""
    a = np.array(m, dtype=np.float64)
    y = np.array(rhs, dtype=np.float64)
    n = a.shape[0]
    perm = np.arange(n)
    with np.errstate(all="ignore"):
        for j in range(n):      # P m = L U, L unit lower triangular below U
            p = j + int(np.argmax(np.abs(a[j:, j])))
            if p != j:
                a[[j, p]] = a[[p, j]]
                perm[[j, p]] = perm[[p, j]]
            if a[j, j] != 0.0:
                a[j + 1:, j] /= a[j, j]
            a[j + 1:, j + 1:] -= np.outer(a[j + 1:, j], a[j, j + 1:])
        if not transposed:
            y = y[perm]
            for i in range(n):                      # L z = P rhs
                y[i] -= a[i, :i] @ y[:i]
            for i in range(n - 1, -1, -1):          # U x = z
                y[i] = (y[i] - a[i, i + 1:] @ y[i + 1:]) / a[i, i]
            return y
        # m^T = U^T L^T P: U^T z = rhs, L^T w = z, x = P^T w
        for i in range(n):
            y[i] = (y[i] - a[:i, i] @ y[:i]) / a[i, i]
        for i in range(n - 1, -1, -1):
            y[i] -= a[i + 1:, i] @ y[i + 1:]
        x = np.empty_like(y)
        x[perm] = y
        return x


def inv_ex(A, *, check_errors=False, out=None):
    """``(inverse, info)``: ``inv`` that reports a singular matrix in ``info`` (int32, A's
    batch shape: the 1-based index of the zero pivot, 0 when invertible) instead of raising,
    unless ``check_errors``.  Where a matrix is singular its inverse holds the infs and nans
    LAPACK's LU solve leaves (PyTorch calls these values unspecified).

    Example:
        >>> tg.linalg.inv_ex(tg.tensor([[2.0]])).inverse
        tensor([[0.5000]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    from .creation import tensor
    # (PyTorch's checks of the input name linalg.inv; a singular matrix, linalg.inv_ex)
    A = _matrix_arg(A, "linalg.inv")
    inverse, info = _inv(A, "linalg.inv_ex", check_errors)
    return _InvExResult(inverse, tensor(info))


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
    return _solve(A, B, left, "torch.linalg.solve", check_errors=True)[0]


def _solve(A, B, left, name, check_errors):
    """(X, info) of ``solve``: info (int32, A's own batch shape) is the 1-based index of the
    first zero pivot of each A (0 where invertible).  A singular A raises PyTorch's error,
    whose text starts with ``name``, when ``check_errors``; otherwise X holds there what
    LAPACK's LU solve leaves (``_singular_solve``) and its gradient is nan."""
    A = _matrix_arg(A, "linalg.solve", square=False)
    B = F.as_tensor_arg(B)
    va, vb = A._value, B._value
    if vb.dtype != va.dtype:
        raise RuntimeError("linalg.solve: Expected A and B to have the same dtype, but found A "
                           f"of type {A.dtype.scalar_name} and B of type {B.dtype.scalar_name} "
                           "instead")
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
    # the left-sided form M Y = R: M = A^T, Y = X^T, R = B^T for a right solve
    em = ea if left else np.swapaxes(ea, -1, -2)
    er = eb if left else np.swapaxes(eb, -1, -2)
    info = np.zeros(va.shape[:-2], dtype=np.int32)
    try:
        y = np.zeros(er.shape) if n == 0 or k == 0 else _quiet(np.linalg.solve, em, er)
    except np.linalg.LinAlgError:
        own = va.reshape((-1, n, n))
        failing = [j for j, m in enumerate(own) if not _invertible(m)]
        if check_errors:
            # (solve names the element of the broadcast batch, solve_ex that of A's own)
            if name == "torch.linalg.solve":
                where, kk = _plain(ea), _failing(ea, _invertible)[0]
            else:
                where, kk = A, failing[0]
            raise LinAlgError(f"{name}: {_batch_prefix(where, kk)}The solver failed because "
                              "the input matrix is singular.") from None
        for j in failing:
            info.reshape(-1)[j] = _first_zero_pivot(own[j])
        # PyTorch factors A itself, for a right solve too (then solving with A^T)
        flat_a = np.ascontiguousarray(ea).reshape((-1, n, n))
        flat_r = np.ascontiguousarray(er).reshape((-1,) + er.shape[-2:])
        y = np.empty(flat_r.shape)
        for j, (a, r) in enumerate(zip(flat_a, flat_r)):
            if _invertible(a):
                y[j] = _quiet(np.linalg.solve, a if left else a.T, r)
            else:
                y[j] = _singular_solve(a, r, transposed=not left)
        y = y.reshape(er.shape)
        F.read_value(A, "linalg.solve_ex()")   # info is read off A: a replay checks it
    value = y if left else np.swapaxes(y, -1, -2)
    out_shape = batch + ((n,) if vector else (rows, cols))
    value = value.reshape(out_shape)
    bsz = math.prod(batch)
    # B is read in its matrix layout; a vector and its column share the flat values
    b_mat = B if not vector else F.unsqueeze(B, -1)
    return _guarded(_record(K.LINALG_SOLVE, [(A, batch + (n, n)),
                                             (b_mat, batch + (rows, cols))],
                            (bsz, n, k, int(bool(left))), value),
                    "linalg.solve with an invertible matrix"), info


def det(A, *, out=None):
    """The determinant of each square matrix in ``A`` (shape ``(*, n, n)``); shape ``(*)``.

    ``grad_fn``: ``<LinalgDetBackward0>``; its gradient is the cofactor matrix, also at
    singular matrices.  Also ``tg.det`` and ``Tensor.det``.

    Example:
        >>> tg.linalg.det(tg.tensor([[1.0, 2.0], [3.0, 4.0]]))
        tensor(-2.)
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    A = _matrix_arg(A, "linalg.det")
    v = A._value
    n = v.shape[-1]
    # (the compiled rule's LU product, whose bits PyTorch's follow: ops/linalg.lu_det)
    value = _lu_det_values(np.asarray(v, dtype=np.float64).reshape(
        (math.prod(v.shape[:-2]), n, n))).reshape(v.shape[:-2])
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
    triangle of A is read (the upper one with ``upper=True``), as in PyTorch.

    Raises ``LinAlgError`` naming the first leading minor that is not positive-definite.
    ``grad_fn``: ``<LinalgCholeskyExBackward0>``; its gradient is symmetric.

    Example:
        >>> tg.linalg.cholesky(tg.tensor([[4.0, 2.0], [2.0, 5.0]]))
        tensor([[2., 0.],
                [1., 2.]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    return _cholesky(A, upper, "linalg.cholesky", 0)[0]


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


def _partial_cholesky(m):
    """(what LAPACK's potrf leaves in the lower triangle of m, info): the columns before the
    first leading minor that is not positive-definite factored, that minor's pivot (the
    non-positive value whose square root was due) on the diagonal, the rest of the lower
    triangle as it was; info is the minor's order.  This is the unblocked, left-looking
    factorisation PyTorch's LAPACK runs on small matrices (PyTorch calls the values
    unspecified)."""
    n = m.shape[0]
    low = np.tril(np.array(m, dtype=np.float64))
    with np.errstate(all="ignore"):
        for j in range(n):
            d = m[j, j] - low[j, :j] @ low[j, :j]
            if not d > 0.0:
                low[j, j] = d
                return low, j + 1
            low[j, j] = math.sqrt(d)
            low[j + 1:, j] = (m[j + 1:, j] - low[j + 1:, :j] @ low[j, :j]) / low[j, j]
    return low, 0


def _cholesky(A, upper, name, variant, check_errors=True, error_name=None):
    """(L, info) of the checked A: info (int32, A's batch shape) is the order of each
    matrix's first leading minor that is not positive-definite (0 where it is).  Such a
    matrix raises PyTorch's error (its text starts with ``error_name``, by default ``name``)
    when ``check_errors``; otherwise its factor is what LAPACK leaves (``_partial_cholesky``)
    and its gradient is not meaningful."""
    A = _matrix_arg(A, name)
    # with upper=True PyTorch reads A's upper triangle: the lower one of A^T, whose lower
    # factor is U^T
    v = np.swapaxes(A._value, -1, -2) if upper else A._value
    n = v.shape[-1]
    info = np.zeros(v.shape[:-2], dtype=np.int32)
    try:
        low = _quiet(np.linalg.cholesky, v) if n else np.zeros(v.shape)
        if n and not np.all(np.isfinite(np.diagonal(low, axis1=-2, axis2=-1))):
            raise np.linalg.LinAlgError("nan")
    except np.linalg.LinAlgError:
        if check_errors:
            k, m = _failing(v, lambda m: _minor_order(m) == 0)
            raise LinAlgError(
                f"{error_name or name}: {_batch_prefix(A, k)}The factorization could not be "
                "completed because the input is not positive-definite (the leading minor of "
                f"order {_minor_order(m)} is not positive-definite).") from None
        flat = v.reshape((-1, n, n))
        low = np.empty(flat.shape)
        for k, m in enumerate(flat):
            part, info.reshape(-1)[k] = _partial_cholesky(m)
            low[k] = part if info.reshape(-1)[k] else _quiet(np.linalg.cholesky, m)
        low = low.reshape(v.shape)
        F.read_value(A, f"{error_name or name}()")   # info is read off A: a replay checks it
    value = np.swapaxes(low, -1, -2) if upper else low
    return _guarded(_record(K.LINALG_CHOLESKY, [(A, v.shape)],
                            (variant, math.prod(v.shape[:-2]), n, int(bool(upper))), value),
                    "linalg.cholesky of a positive-definite matrix"), info


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
    n, rows, cols = _solve_shapes(name, name, va.shape, vb.shape, left)
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


_LstsqResult = return_type("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
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
    if n == 1:
        return F.clone(A)        # a new tensor, not A itself (PyTorch's CloneBackward0)
    if n < 0:
        A = inv(A)
        n = -n
    if n == 3:
        return F.matmul(F.matmul(A, A), A)    # PyTorch's order for this power
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
# PyTorch's other linalg names: matmul, diagonal, vander, cond, the _ex variants, tensorinv,
# tensorsolve (made of the ops above, so their gradients are those ops')
# ---------------------------------------------------------------------------------------------
_SolveExResult = return_type("linalg_solve_ex", ["result", "info"])
_CholeskyExResult = return_type("linalg_cholesky_ex", ["L", "info"])


def matmul(input, other, *, out=None):  # noqa: A002 - PyTorch's argument name
    """The matrix product, as ``tg.matmul`` (the same nodes: ``MmBackward0``,
    ``MvBackward0``, ``DotBackward0`` ...).

    Example:
        >>> tg.linalg.matmul(tg.tensor([[1.0, 2.0]]), tg.tensor([3.0, 4.0]))
        tensor([11.])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    return F.matmul(F.as_tensor_arg(input), F.as_tensor_arg(other))


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonals of the matrices in the last two dims (by default) of ``A``, as
    ``tg.diagonal`` with other defaults: a view, ``grad_fn`` ``<DiagonalBackward0>``.

    Example:
        >>> tg.linalg.diagonal(tg.tensor([[1.0, 2.0], [3.0, 4.0]]), offset=1)
        tensor([2.])
    """
    return F.diagonal(F.as_tensor_arg(A), offset, dim1, dim2)


def vander(x, *, N=None):
    """The Vandermonde matrix of the vectors in ``x``'s last dim: column j holds ``x ** j``,
    j = 0 .. N - 1 (``N`` defaults to the vector's length), PyTorch's order of increasing
    powers.  Made as PyTorch makes it, a column of ones beside the cumulative product of x
    repeated: ``grad_fn`` ``<CatBackward0>``.  Integer inputs give int64 powers.

    Example:
        >>> tg.linalg.vander(tg.tensor([2.0, 3.0]), N=3)
        tensor([[1., 2., 4.],
                [1., 3., 9.]])
    """
    x = F.as_tensor_arg(x)
    if x._value.dtype.kind not in "fiu":
        raise RuntimeError("linalg.vander supports floating point, complex, and integer "
                           f"tensors, but got {x.dtype.scalar_name}")
    if N is not None and (isinstance(N, bool) or not isinstance(N, numbers.Integral)):
        raise TypeError(f"linalg_vander(): argument 'N' must be int, not {type(N).__name__}")
    if x._value.ndim == 0:
        x = F.unsqueeze(x, -1)
    shape = x._value.shape
    n = shape[-1] if N is None else int(N)
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    powers = F.cumprod(F.expand(F.unsqueeze(x, -1), *shape, n - 1), -1)
    ones = _plain(np.ones(shape + (1,), dtype=powers._value.dtype))
    return F.cat([ones, powers], -1)


_COND_ORDERS = (2, -2, 1, -1, math.inf, -math.inf)


def cond(A, p=None, *, out=None):
    """The condition number of each matrix in ``A`` in the norm ``p``: with None, 2 or -2
    the ratio of its largest and smallest singular values (its inverse for -2; any shape of
    matrix), with 'fro', 'nuc', 1, -1, inf or -inf ``norm(A) * norm(inv(A))`` of a square
    matrix, inf where A is singular.  Empty matrices give 0.

    ``grad_fn`` as PyTorch's: ``<SqueezeBackward1>`` (2, -2), ``<MulBackward0>`` ('nuc'),
    ``<NanToNumBackward0>`` (the others).

    Example:
        >>> tg.linalg.cond(tg.tensor([[2.0, 0.0], [0.0, 0.5]]))
        tensor(4.)
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    A = F.as_tensor_arg(A)
    v = A._value
    if isinstance(p, str):
        # PyTorch checks the shape before the order for a norm by name
        what = f"linalg.cond(ord={p})"
        A = _matrix_arg(A, what, floating=False)
        if p not in ("fro", "nuc"):
            raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
        if v.size == 0:
            return _plain(np.zeros(v.shape[:-2]))
        if p == "nuc":
            # the nuclear norms of A and of its inverse from the one set of singular values
            s = svdvals(_float_arg(A, "linalg.svd"))
            return F.mul(F.sum(s, -1), F.sum(F.reciprocal(s), -1))
        return _cond_by_inverse(A, p)
    if v.ndim < 2:
        raise RuntimeError("linalg.cond: The input tensor must have at least 2 dimensions.")
    order = 2 if p is None else p
    if not isinstance(order, numbers.Real) or order not in _COND_ORDERS:
        raise RuntimeError(f"linalg.cond got an invalid norm type: {order:g}")
    if v.size == 0:
        return _plain(np.zeros(v.shape[:-2]))
    if abs(order) == 2:
        s = svdvals(_float_arg(A, "linalg.svd"))
        k = s._value.shape[-1]
        largest, smallest = F.narrow(s, -1, 0, 1), F.narrow(s, -1, k - 1, 1)
        ratio = F.div(largest, smallest) if order == 2 else F.div(smallest, largest)
        return F.squeeze(ratio, -1)
    # (PyTorch writes a float order as C's %f does, an integer one as it is)
    shown = f"{order:f}" if isinstance(order, float) else str(int(order))
    A = _matrix_arg(A, f"linalg.cond(ord={shown})", floating=False)
    return _cond_by_inverse(A, order)


def _float_arg(A, name):
    if A._value.dtype.kind != "f":
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. "
                           f"Got {A.dtype.scalar_name}")
    return A


def _cond_by_inverse(A, order):
    """norm(A) * norm(A^-1) of square matrices, PyTorch's way: inv_ex's inverse, filled in
    place with inf where A is singular, and the product's nan (0 * inf) made inf.  The
    in-place fill changes the inverse that inv's node saved, as in PyTorch, whose backward
    therefore refuses (``modified by an inplace operation``): so does tapegrad's."""
    from .derived import nan_to_num
    A = _float_arg(A, "linalg.inv")
    inverse, info = _inv(A, "linalg.inv_ex", check_errors=False)
    inverse.masked_fill_(_plain(np.asarray(info > 0)[..., None, None]), math.inf)
    product = F.mul(matrix_norm(A, order), matrix_norm(inverse, order))
    return nan_to_num(product, math.inf, math.inf, -math.inf)


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """``(result, info)``: ``solve`` that reports a singular A in ``info`` (int32, A's own
    batch shape: the 1-based index of the first zero pivot of its LU factorisation, 0 when
    invertible) instead of raising, unless ``check_errors``.  Where A is singular the
    result holds the infs and nans LAPACK's LU solve leaves (PyTorch calls these values
    unspecified).  ``grad_fn``: ``<LinalgSolveExBackward0>``.

    Example:
        >>> r = tg.linalg.solve_ex(tg.tensor([[2.0, 0.0], [0.0, 0.0]]), tg.tensor([2.0, 1.0]))
        >>> r.info
        tensor(2, dtype=tapegrad.int32)
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    from .creation import tensor
    result, info = _solve(A, B, left, "torch.linalg.solve_ex", check_errors)
    return _SolveExResult(result, tensor(info))


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """``(L, info)``: ``cholesky`` that reports a matrix that is not positive-definite in
    ``info`` (int32, A's batch shape: the order of its first leading minor that is not
    positive-definite, 0 when it is) instead of raising, unless ``check_errors``.  Where a
    matrix fails, L holds what LAPACK's factorisation leaves: the columns before that
    minor factored, its non-positive pivot on the diagonal, the rest of the lower triangle
    as it was (as PyTorch's for small matrices; PyTorch calls these values unspecified).
    ``grad_fn``: ``<LinalgCholeskyExBackward0>``.

    Example:
        >>> tg.linalg.cholesky_ex(tg.tensor([[4.0, 2.0], [2.0, -3.0]]))
        tapegrad.return_types.linalg_cholesky_ex(
        L=tensor([[ 2.,  0.],
                [ 1., -4.]]),
        info=tensor(2, dtype=tapegrad.int32))
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    from .creation import tensor
    L, info = _cholesky(A, upper, "linalg.cholesky", 0, check_errors,
                        error_name="linalg.cholesky_ex")
    return _CholeskyExResult(L, tensor(info))


def tensorinv(A, ind=2, *, out=None):
    """The inverse of ``A`` read as a linear map from its last dims (``A.shape[ind:]``) to
    its first ``ind``: shape ``A.shape[ind:] + A.shape[:ind]``, so that
    ``tensordot(tensorinv(A, ind), A, ind)`` is the identity.  ``grad_fn``:
    ``<ReshapeAliasBackward0>`` over ``<LinalgInvExBackward0>``, as PyTorch's.

    Example:
        >>> tg.linalg.tensorinv(tg.eye(4).reshape(4, 2, 2), ind=1).shape
        tapegrad.Size([2, 2, 4])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    A = F.as_tensor_arg(A)
    if isinstance(ind, bool) or not isinstance(ind, numbers.Integral):
        raise TypeError(f"linalg_tensorinv(): argument 'ind' (position 2) must be int, not "
                        f"{type(ind).__name__}")
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    shape = A._value.shape
    rows, cols = math.prod(shape[:ind]), math.prod(shape[ind:])
    if rows != cols:
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {cols} != {rows}")
    square = _float_arg(F.reshape(A, (rows, cols)), "linalg.inv")
    inverse = _inv(square, "inv", check_errors=True, batched=False)[0]
    result = F.reshape(inverse, shape[ind:] + shape[:ind])
    # PyTorch's inverse is column-major: its reshape is a view of a non-contiguous matrix
    # but for a 1x1 one
    return F.named_node(result, "ReshapeAliasBackward0" if rows > 1 else "ViewBackward0",
                        inverse)


def tensorsolve(A, B, dims=None, *, out=None):
    """The X with ``tensordot(A, X, X.ndim) == B``: A's first ``B.ndim`` dims are B's, its
    others X's.  ``dims`` names dims of A moved to its end first.  Made as PyTorch makes it,
    ``solve`` of A reshaped to a square matrix and B flattened: ``grad_fn``
    ``<ViewBackward0>`` over ``<LinalgSolveExBackward0>``.

    Example:
        >>> tg.linalg.tensorsolve(2.0 * tg.eye(4).reshape(2, 2, 4), tg.ones(2, 2))
        tensor([0.5000, 0.5000, 0.5000, 0.5000])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    A, B = F.as_tensor_arg(A), F.as_tensor_arg(B)
    if dims is not None:
        if not isinstance(dims, (tuple, list)):
            raise TypeError("linalg_tensorsolve(): argument 'dims' must be tuple of ints, not "
                            f"{type(dims).__name__}")
        nd = A._value.ndim
        A = F.movedim(A, tuple(dims), tuple(range(nd - len(dims), nd)))
    shape, k = A._value.shape, B._value.ndim
    # (PyTorch's text names A's leading dims, its test reads B's size)
    rows, cols = B._value.size, math.prod(shape[k:])
    if rows != cols:
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[other.ndim:])"
                           f" == prod(self.shape[:other.ndim]), but got {cols} != {rows}")
    x = solve(F.reshape(A, (cols, cols)), F.reshape(B, (-1,)))
    return F.reshape(x, shape[k:])


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
    return _cholesky(A, upper, "linalg.cholesky", 1)[0]


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


def _solve_shapes(square_name, name, a_shape, b_shape, left):
    """(n, rows, cols) of a solve with square A (``a_shape``) and B (``b_shape``) on the left
    (AX = B) or the right (XA = B), or PyTorch's error for a non-square A (``square_name``:
    what its message starts with) or an incompatible B."""
    if a_shape[-1] != a_shape[-2]:
        raise RuntimeError(f"{square_name}: A must be batches of square matrices, but they "
                           f"are {a_shape[-2]} by {a_shape[-1]} matrices")
    n = a_shape[-1]
    rows, cols = b_shape[-2:]
    if (rows if left else cols) != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation {eq} "
                           f"({n}x{n} and {rows}x{cols})")
    return n, rows, cols


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
    solves would give only its triangle).  Its ``grad_fn`` is PyTorch's
    ``<CholeskySolveBackward0>``, and its values agree with PyTorch's to rounding.

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
    return F.named_node(solve(A, B), "CholeskySolveBackward0", B, L)


_TorchSVD = return_type("svd", ["U", "S", "V"])
_TorchQR = return_type("qr", ["Q", "R"])


def _torch_svd(input, some=True, compute_uv=True, *, out=None):  # noqa: A002 - PyTorch's
    """``(U, S, V)`` with ``input = U diag(S) V^T``: the old ``torch.svd``, V not transposed.

    Made as PyTorch makes it, from ``linalg.svd(input, full_matrices=not some)``: U and S
    have ``grad_fn`` ``<LinalgSvdBackward0>`` and V, the transpose of Vh,
    ``<TransposeBackward0>``.  With ``compute_uv=False`` only S is computed (its gradient
    is ``U diag(g) Vh``) and U and V are zeros of shapes ``(*, m, m)`` and ``(*, n, n)``,
    outside the graph, as in PyTorch.

    Example:
        >>> U, S, V = tg.svd(tg.tensor([[0.0, 2.0], [3.0, 0.0]]))
        >>> S
        tensor([3., 2.])
        >>> tg.round(U @ tg.diag(S) @ V.mT, decimals=12)
        tensor([[0., 2.],
                [3., 0.]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    A = F.as_tensor_arg(input)
    v = A._value
    if v.ndim < 2:
        raise RuntimeError(f"linalg.svd: input should have at least 2 dimensions, but has "
                           f"{v.ndim} dimensions instead")
    if not compute_uv:
        batch, (m, n) = v.shape[:-2], v.shape[-2:]
        S = svdvals(A)
        return _TorchSVD(_plain(np.zeros(batch + (m, m))), S,
                         _plain(np.zeros(batch + (n, n))))
    U, S, Vh = svd(A, full_matrices=not some)
    return _TorchSVD(U, S, Vh.mT)


def _torch_qr(input, some=True, *, out=None):  # noqa: A002 - PyTorch's argument name
    """``(Q, R)`` with ``input = Q R``, the old ``torch.qr``: ``linalg.qr`` in mode
    'reduced' (``some=True``) or 'complete', with PyTorch's deprecation warning.  Both
    have ``grad_fn`` ``<LinalgQrBackward0>``.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     Q, R = tg.qr(tg.tensor([[3.0, 1.0], [4.0, 2.0]]))
        >>> R.abs()
        tensor([[5.0000, 2.2000],
                [0.0000, 0.4000]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    warnings.warn("torch.qr is deprecated in favor of torch.linalg.qr and will be removed in "
                  "a future PyTorch release.\nThe boolean parameter 'some' has been replaced "
                  "with a string parameter 'mode'.\nQ, R = torch.qr(A, some)\nshould be "
                  "replaced with\nQ, R = torch.linalg.qr(A, 'reduced' if some else "
                  "'complete')", UserWarning, stacklevel=2)
    return _TorchQR(*qr(input, "reduced" if some else "complete"))


def _matrix_transpose(x, what, zero_d):
    """The transpose of the last two dims (the conjugate one: tapegrad's values are real),
    a view with ``grad_fn`` ``<TransposeBackward0>``; a 0-d tensor is returned as it is,
    with PyTorch's deprecation warning."""
    x = F.as_tensor_arg(x)
    nd = x._value.ndim
    if nd == 0:
        warnings.warn(zero_d, UserWarning, stacklevel=3)
        return x
    if nd < 2:
        raise RuntimeError(f"tensor.{what} is only supported on matrices or batches of "
                           f"matrices. Got {nd}-D tensor.")
    return F.transpose(x, -2, -1)


def adjoint(input):  # noqa: A002 - PyTorch's argument name
    """The conjugate transpose of each matrix: for real values ``input.mT``, a view.

    ``grad_fn``: ``<TransposeBackward0>``; also ``Tensor.adjoint()`` and ``Tensor.mH``.

    Example:
        >>> tg.adjoint(tg.tensor([[1.0, 2.0], [3.0, 4.0]]))
        tensor([[1., 3.],
                [2., 4.]])
    """
    return _matrix_transpose(input, "adjoint()", "adjoint() is deprecated on 0-D tensors. "
                             "Consider using x.conj().")


def _mH(self):
    """The conjugate transpose of each matrix (``Tensor.mH``): the transpose of the last two
    dims, tapegrad's values being real."""
    return _matrix_transpose(self, "mH", "Tensor.mH is deprecated on 0-D tensors. Consider "
                             "using x.conj().")


def renorm(input, p, dim, maxnorm, *, out=None):  # noqa: A002 - PyTorch's argument name
    """``input`` with each slice along ``dim`` (the values with one index in ``dim``) whose
    ``p``-norm exceeds ``maxnorm`` scaled to norm ``maxnorm``: multiplied by
    ``maxnorm / (norm + 1e-7)``, as PyTorch scales it; the other slices are kept.

    ``grad_fn``: ``<RenormBackward0>``.  The gradient is PyTorch's (``renorm_backward``): a
    scaled slice's includes the change of its norm, a kept slice's is the incoming one.

    Example:
        >>> x = tg.tensor([[3.0, 4.0], [0.3, 0.4]])
        >>> tg.renorm(x, 2, 0, 1.0)
        tensor([[0.6000, 0.8000],
                [0.3000, 0.4000]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    x = F.as_tensor_arg(input)
    nd = x._value.ndim
    # PyTorch checks p, then maxnorm, then the rank, then dim (the order of its messages)
    if not p > 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if not maxnorm >= 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm:g}")
    if nd <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {nd} dimensions")
    d = F._wrap_dim(dim, nd)
    norm = vector_norm(x, p, tuple(k for k in range(nd) if k != d), keepdim=True)
    # PyTorch's scale factor, maxnorm / (norm + 1e-7) where the norm exceeds maxnorm and 1
    # elsewhere, multiplies the input: the same roundings give its bits, and the product's
    # gradient through the norm is renorm_backward's
    scaled = F._compare(np.greater, norm, maxnorm)
    factor = F.where(scaled, F.div(float(maxnorm), F.add(norm, 1e-7)), 1.0)
    y = F.mul(x, factor)
    return F.named_node(y, "RenormBackward0", x)


# ---------------------------------------------------------------------------------------------
# LU: lu_factor(_ex), lu, lu_unpack, lu_solve and the old torch.lu / torch.lu_solve
# ---------------------------------------------------------------------------------------------
_LuFactorResult = return_type("linalg_lu_factor", ["LU", "pivots"])
_LuFactorExResult = return_type("linalg_lu_factor_ex", ["LU", "pivots", "info"])
_LuWithInfo = return_type("_lu_with_info", ["LU", "pivots", "info"])
_LuResult = return_type("linalg_lu", ["P", "L", "U"])
_LuUnpackResult = return_type("lu_unpack", ["P", "L", "U"])


def _getrf(v):
    """LAPACK's LU with partial pivoting of each matrix of v: (LU, 1-based int32 pivots,
    int32 info: the 1-based index of U's first zero diagonal entry, 0 if none)."""
    from scipy.linalg import lapack
    m, n = v.shape[-2:]
    batch = v.shape[:-2]
    lu = np.zeros(v.shape)
    piv = np.zeros(batch + (min(m, n),), dtype=np.int32)
    info = np.zeros(batch, dtype=np.int32)
    if m * n:
        for i in np.ndindex(batch):
            f, p, k = lapack.dgetrf(v[i])
            lu[i], piv[i], info[i] = f, p + 1, k
    return lu, piv, info


def _permutation(pivots, m):
    """perm with ``P^T A = A[perm]`` (``A = P L U``) for each row of LAPACK's pivots: the row
    swaps applied in order to 0 .. m-1."""
    piv = np.asarray(pivots, dtype=np.int64)
    perm = np.broadcast_to(np.arange(m), piv.shape[:-1] + (m,)).copy()
    for i in np.ndindex(piv.shape[:-1]):
        row = perm[i]
        for j, p in enumerate(piv[i]):
            row[j], row[p - 1] = row[p - 1], row[j]
    return perm


def _permutation_matrix(perm):
    """P (float64) with ``P[perm[j], j] = 1``."""
    m = perm.shape[-1]
    P = np.zeros(perm.shape + (m,))
    np.put_along_axis(P, perm[..., :, None], 1.0, axis=-1)
    return np.swapaxes(P, -1, -2)


def _lu_backward(LU, pivots, g):
    """The gradient of A from that of its packed factors (PyTorch's ``linalg_lu_backward``
    on L = tril(LU, -1) + I and U = triu(LU)), made of tapegrad ops so that a backward with
    ``create_graph`` differentiates it.  With k = min(m, n) and A = P L U:
    square: ``P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T``; wide (U = [U1 U2]):
    ``P L^-T [phi U1^-T, gU2]`` with ``phi = tril(L^T gL - gU2 U2^T, -1) + triu(gU1 U1^T)``;
    tall (L = [L1; L2]): ``P [L1^-T phi; gL2] U^-T`` with
    ``phi = tril(L1^T gL1, -1) + triu(gU U^T - L2^T gL2)``."""
    from .derived import tril, triu
    m, n = LU.shape[-2:]
    k = min(m, n)
    if k == 0:
        return F.mul(LU, 0.0)
    L = F.add(tril(LU[..., :, :k], -1), _plain(np.eye(m, k)))
    U = triu(LU[..., :k, :])
    gL, gU = tril(g[..., :, :k], -1), triu(g[..., :k, :])
    P = _plain(_permutation_matrix(_permutation(pivots._value, m)))
    if m == n:
        phi = F.add(tril(L.mT @ gL, -1), triu(gU @ U.mT))
        Y = solve_triangular(U.mT, phi, upper=False, left=False)
        return P @ solve_triangular(L.mT, Y, upper=True, unitriangular=True)
    if m < n:
        U1, U2, gU1, gU2 = U[..., :k], U[..., k:], gU[..., :k], gU[..., k:]
        phi = F.add(tril(F.sub(L.mT @ gL, gU2 @ U2.mT), -1), triu(gU1 @ U1.mT))
        right = F.cat([solve_triangular(U1.mT, phi, upper=False, left=False), gU2], -1)
        return P @ solve_triangular(L.mT, right, upper=True, unitriangular=True)
    L1, L2, gL1, gL2 = L[..., :k, :], L[..., k:, :], gL[..., :k, :], gL[..., k:, :]
    phi = F.add(tril(L1.mT @ gL1, -1), triu(F.sub(gU @ U.mT, L2.mT @ gL2)))
    left = F.cat([solve_triangular(L1.mT, phi, upper=True, unitriangular=True), gL2], -2)
    return P @ solve_triangular(U.mT, left, upper=False, left=False)


def _lu_factor_function():
    """The autograd.Function behind lu_factor, made on first use (function.py imports
    autograd's machinery that this module need not load at import)."""
    global _LU_FUNCTION
    if _LU_FUNCTION is not None:
        return _LU_FUNCTION
    from .function import BackwardCFunction, Function

    class LinalgLuFactorEx(Function):
        # a Function: its backward is the Python above, and a compiled replay cannot run it
        # (Function.apply marks a traced call opaque, so the pivots are never baked in)
        @staticmethod
        def forward(ctx, A):
            lu, piv, info = _getrf(A._value)
            LU, pivots, infos = _plain(lu), _plain(piv), _plain(info)
            ctx.mark_non_differentiable(pivots, infos)
            ctx.save_for_backward(LU, pivots)
            return LU, pivots, infos

        @staticmethod
        def backward(ctx, g, _pivots, _info):
            LU, pivots = ctx.saved_tensors
            return _lu_backward(LU, pivots, g)

    # PyTorch's node (a Function's would be "LinalgLuFactorExBackward")
    LinalgLuFactorEx._backward_cls = type(
        "LinalgLuFactorExBackward0", (BackwardCFunction,),
        {"__slots__": (), "__module__": "tapegrad.autograd.function"})
    _LU_FUNCTION = LinalgLuFactorEx
    return _LU_FUNCTION


_LU_FUNCTION = None


def _lu_factor(A, pivot, name):
    """(LU, pivots, info) of A, checked as PyTorch checks it."""
    A = F.as_tensor_arg(A)
    v = A._value
    if v.ndim < 2:
        raise RuntimeError(f"torch.lu_factor: Expected tensor with 2 or more dimensions. Got "
                           f"size: {list(v.shape)} instead")
    if v.dtype.kind != "f":
        raise NotImplementedError(f"\"lu_cpu\" not implemented for '{A.dtype.scalar_name}'")
    if not pivot:
        raise RuntimeError(f"{name}: LU without pivoting is not implemented on the CPU")
    if not _records(A):
        lu, piv, info = _getrf(v)
        return _plain(lu), _plain(piv), _plain(info)
    return _lu_factor_function().apply(A)


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """``(LU, pivots, info)``: the LU factorization with partial pivoting of each matrix of
    A (``(*, m, n)``), packed as LAPACK packs it: ``A = P L U`` with L (unit diagonal, not
    stored) below the diagonal of LU and U on and above it; ``pivots`` (int32, 1-based,
    ``(*, min(m, n))``) the row swapped with row i at step i; ``info`` (int32) the 1-based
    index of U's first zero diagonal entry, 0 when there is none.

    ``grad_fn``: ``<LinalgLuFactorExBackward0>``; the gradient is PyTorch's
    (``linalg_lu_backward``), inf or nan where U is singular.  A compiled call runs
    eagerly (the pivots depend on the values).

    Example:
        >>> tg.linalg.lu_factor_ex(tg.tensor([[1.0, 2.0], [2.0, 4.0]])).info
        tensor(2, dtype=tapegrad.int32)
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    LU, pivots, info = _lu_factor(A, pivot, "linalg.lu_factor_ex")
    if check_errors:
        _check_lu_info(info, "linalg.lu_factor_ex")
    return _LuFactorExResult(LU, pivots, info)


def _check_lu_info(info, name):
    bad = np.flatnonzero(info._value.reshape(-1))
    if bad.size:
        k = int(bad[0])
        prefix = f"(Batch element {k}): " if info._value.ndim else ""
        j = int(info._value.reshape(-1)[k])
        # PyTorch raises a plain RuntimeError here, not its LinAlgError
        raise RuntimeError(f"torch.{name}: {prefix}U[{j},{j}] is zero and using it on lu_solve "
                          "would result in a division by zero. If you still want to perform "
                          "the factorization, consider calling linalg.lu(A, pivot) or "
                          "linalg.lu_factor_ex(A, pivot)")


def lu_factor(A, *, pivot=True, out=None):
    """``(LU, pivots)``: ``lu_factor_ex`` that raises ``LinAlgError`` for a matrix whose U
    has a zero on its diagonal (the factorization would not solve).

    ``grad_fn``: ``<LinalgLuFactorExBackward0>``.

    Example:
        >>> LU, pivots = tg.linalg.lu_factor(tg.tensor([[1.0, 2.0], [4.0, 4.0]]))
        >>> LU
        tensor([[4.0000, 4.0000],
                [0.2500, 1.0000]])
        >>> pivots
        tensor([2, 2], dtype=tapegrad.int32)
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    LU, pivots, info = _lu_factor(A, pivot, "linalg.lu_factor")
    _check_lu_info(info, "linalg.lu_factor")
    return _LuFactorResult(LU, pivots)


def _unpack(LU, pivots, unpack_data, unpack_pivots, name, node, source=None):
    """P, L, U from a packed LU; L and U shown as outputs 0 and 1 of PyTorch's ``node``, whose
    input is ``source`` (linalg.lu's A) or else LU."""
    LU, pivots = F.as_tensor_arg(LU), F.as_tensor_arg(pivots)
    v = LU._value
    if v.ndim < 2:
        raise RuntimeError(f"{name}: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(v.shape)} instead")
    m, n = v.shape[-2:]
    k = min(m, n)
    if unpack_pivots:
        pv = pivots._value
        if pv.dtype != np.int32:
            raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous "
                               "tensor of torch.int32 dtype.\nNote: this function is intended "
                               "to be used with the output produced by torch.linalg.lu_factor")
        if pv.shape[-1:] != (k,) or pv.shape[:-1] != v.shape[:-2]:
            raise RuntimeError(f"torch.lu_unpack: Expected LU_pivots.size(-1) == "
                               f"min(LU.size(-1), LU.size(-2)) and the batch dimensions to "
                               f"match, but got LU of shape {list(v.shape)} and pivots of "
                               f"shape {list(pv.shape)}")
        if pv.size and (pv.min() < 1 or pv.max() > m):
            raise RuntimeError("torch.lu_unpack: the pivots must be between 1 and LU.size(-2)")
        # the permutation is read from the pivots' values: a compiled replay would keep it
        if state.trace is not None:
            state.trace.opaque(f"{name} reads the pivots")
        P = _plain(_permutation_matrix(_permutation(pv, m)))
    else:
        P = _plain(np.zeros(0))
    if unpack_data:
        from .derived import tril, triu
        L = F.add(tril(LU[..., :, :k], -1), _plain(np.eye(m, k)))
        U = triu(LU[..., :k, :])
    else:
        # empty, yet in the graph as PyTorch's are (their gradient to LU is zero)
        L = F.reshape(LU, -1)[:0]
        U = F.reshape(LU, -1)[:0]
    L, U = F.named_outputs((L, U), node, LU if source is None else source)
    return P, L, U


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """``(P, L, U)`` from ``lu_factor``'s packed result: ``A = P L U`` with P a permutation
    matrix (``(*, m, m)``, no gradient), L unit lower triangular (``(*, m, k)``) and U upper
    triangular (``(*, k, n)``), k = min(m, n).  ``unpack_data=False`` leaves L and U empty,
    ``unpack_pivots=False`` P.

    L and U have ``grad_fn`` ``<LuUnpackBackward0>``: L's gradient goes to the part of
    ``LU_data`` below the diagonal, U's to the rest.

    Example:
        >>> A = tg.tensor([[1.0, 2.0], [4.0, 4.0]])
        >>> P, L, U = tg.lu_unpack(*tg.linalg.lu_factor(A))
        >>> P @ L @ U
        tensor([[1., 2.],
                [4., 4.]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    return _LuUnpackResult(*_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots,
                                    "torch.lu_unpack", "LuUnpackBackward0"))


def lu(A, *, pivot=True, out=None):
    """``(P, L, U)`` with ``A = P L U``: the LU factorization with partial pivoting, unpacked
    (``lu_unpack(*lu_factor_ex(A))``, a singular matrix included).

    L and U have ``grad_fn`` ``<LinalgLuBackward0>``; the gradient is PyTorch's.

    Example:
        >>> P, L, U = tg.linalg.lu(tg.tensor([[1.0, 2.0], [4.0, 4.0]]))
        >>> L
        tensor([[1.0000, 0.0000],
                [0.2500, 1.0000]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    A = F.as_tensor_arg(A)
    LU, pivots, _ = _lu_factor(A, pivot, "linalg.lu")
    return _LuResult(*_unpack(LU, pivots, True, True, "linalg.lu", "LinalgLuBackward0", A))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """The solution X of ``A X = B`` (``X A = B`` with ``left=False``; A^T in place of A
    with ``adjoint=True``) from A's ``lu_factor``, batch dims broadcast.

    Two triangular solves on LU and the pivots' row permutation; ``grad_fn``:
    ``<LinalgLuSolveBackward0>``, with gradients for LU and B as PyTorch's.  A compiled call
    runs eagerly (the permutation is read from the pivots).

    Example:
        >>> A = tg.tensor([[1.0, 2.0], [4.0, 4.0]])
        >>> LU, pivots = tg.linalg.lu_factor(A)
        >>> tg.linalg.lu_solve(LU, pivots, tg.tensor([[3.0], [8.0]]))
        tensor([[1.],
                [1.]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    name = "linalg.lu_solve"
    LU, pivots, B = F.as_tensor_arg(LU), F.as_tensor_arg(pivots), F.as_tensor_arg(B)
    lv, bv = LU._value, B._value
    if lv.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor LU must have at least 2 dimensions.")
    if bv.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor B must have at least 2 dimensions.")
    n, rows, cols = _solve_shapes(f"tapegrad.{name}", name, lv.shape, bv.shape, left)
    if bv.dtype != lv.dtype:
        raise RuntimeError(f"{name}: Expected LU and B to have the same dtype, but found LU "
                           f"of type {LU.dtype.scalar_name} and B of type "
                           f"{B.dtype.scalar_name} instead")
    pv = pivots._value
    if pv.dtype != np.int32:
        raise RuntimeError(f"{name}: pivots should be a Tensor of scalar type tapegrad.int32")
    if pv.shape[-1:] != (n,) or pv.shape[:-1] != lv.shape[:-2]:
        raise RuntimeError(f"{name}: Expected LU.shape[:-1] == pivots.shape, but got LU of "
                           f"shape {list(lv.shape)} and pivots of shape {list(pv.shape)}")
    if not left:
        # X A = B is A^T X^T = B^T
        return F.named_node(lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT,
                            "LinalgLuSolveBackward0", LU, B)
    if state.trace is not None:
        # the permutation is read from the pivots' values: a compiled replay would keep it
        state.trace.opaque(f"{name} reads the pivots")
    batch = broadcast_shape(bv.shape[:-2], lv.shape[:-2])
    perm = _permutation(pv, n)
    LU0, B0 = LU, B     # the op's inputs, as its node lists them
    LU = F.broadcast_to(LU, batch + (n, n)) if lv.shape[:-2] != batch else LU
    B = F.broadcast_to(B, batch + (n, cols)) if bv.shape[:-2] != batch else B
    perm = np.broadcast_to(perm, batch + (n,))
    if not adjoint:
        # A = P L U: X = U^-1 L^-1 P^T B, P^T B being B's rows in the order perm
        idx = np.broadcast_to(perm[..., None], batch + (n, cols)).copy()
        Y = F.gather(B, -2, _plain(idx.astype(np.int64)))
        Y = solve_triangular(LU, Y, upper=False, unitriangular=True)
        return F.named_node(solve_triangular(LU, Y, upper=True), "LinalgLuSolveBackward0",
                            LU0, B0)
    # A^T = U^T L^T P^T: X = P L^-T U^-T B, P Z being Z's rows in the inverse order
    Y = solve_triangular(LU.mT, B, upper=False)
    Y = solve_triangular(LU.mT, Y, upper=True, unitriangular=True)
    inverse = np.argsort(perm, axis=-1)
    idx = np.broadcast_to(inverse[..., None], batch + (n, cols)).copy()
    return F.named_node(F.gather(Y, -2, _plain(idx.astype(np.int64))),
                        "LinalgLuSolveBackward0", LU0, B0)


_LU_DEPRECATED = (
    "torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex and "
    "will be removed in a future PyTorch release.\nLU, pivots = torch.lu(A, compute_pivots)\n"
    "should be replaced with\nLU, pivots = torch.linalg.lu_factor(A, compute_pivots)\nand\n"
    "LU, pivots, info = torch.lu(A, compute_pivots, get_infos=True)\nshould be replaced with"
    "\nLU, pivots, info = torch.linalg.lu_factor_ex(A, compute_pivots)")


def _torch_lu(A, pivot=True, get_infos=False, out=None):
    """The old ``torch.lu``: ``(LU, pivots)`` of ``linalg.lu_factor_ex`` (a singular matrix
    does not raise), with ``get_infos=True`` also ``info``; PyTorch's deprecation warning.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     LU, pivots = tg.lu(tg.tensor([[1.0, 2.0], [4.0, 4.0]]))
        >>> pivots
        tensor([2, 2], dtype=tapegrad.int32)
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    warnings.warn(_LU_DEPRECATED, UserWarning, stacklevel=2)
    LU, pivots, info = _lu_factor(A, pivot, "linalg.lu_factor")
    return _LuWithInfo(LU, pivots, info) if get_infos else (LU, pivots)


def _lu_method(self, pivot=True, get_infos=False):
    """``Tensor.lu``: ``tg.lu``, returning plain tuples (as PyTorch's method does)."""
    warnings.warn(_LU_DEPRECATED, UserWarning, stacklevel=2)
    LU, pivots, info = _lu_factor(self, pivot, "linalg.lu_factor")
    return (LU, pivots, info) if get_infos else (LU, pivots)


def _torch_lu_solve(b, LU_data, LU_pivots, *, out=None):
    """The old ``torch.lu_solve(b, LU, pivots)``: ``linalg.lu_solve(LU, pivots, b)``, with
    PyTorch's deprecation warning.

    Example:
        >>> import warnings
        >>> A = tg.tensor([[1.0, 2.0], [4.0, 4.0]])
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     x = tg.lu_solve(tg.tensor([[3.0], [8.0]]), *tg.linalg.lu_factor(A))
        >>> x
        tensor([[1.],
                [1.]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    warnings.warn("torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be "
                  "removed in a future PyTorch release.\nNote that torch.linalg.lu_solve has "
                  "its arguments reversed.\nX = torch.lu_solve(B, LU, pivots)\nshould be "
                  "replaced with\nX = torch.linalg.lu_solve(LU, pivots, B)", UserWarning,
                  stacklevel=2)
    return lu_solve(LU_data, LU_pivots, b)


_TriangularSolveResult = return_type("triangular_solve", ["solution", "cloned_coefficient"])


def cholesky_inverse(L, upper=False, *, out=None):
    """The inverse of ``A = L L^T`` (``U^T U`` with ``upper=True``) from its Cholesky factor,
    batched.

    Recorded as ``linalg.inv(L L^T)``, under PyTorch's node ``<CholeskyInverseBackward0>``:
    that composite's gradient is PyTorch's ``-(G + G^T)`` products with the inverse, a full
    matrix (every entry of L, not only its triangle); the values agree with PyTorch's (LAPACK's
    potri) to rounding.

    Example:
        >>> tg.cholesky_inverse(tg.tensor([[2.0, 0.0], [0.0, 1.0]]))
        tensor([[0.2500, 0.0000],
                [0.0000, 1.0000]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    L = given = F.as_tensor_arg(L)
    v = L._value
    if v.ndim < 2:
        raise RuntimeError("cholesky_inverse: The input tensor A must have at least 2 "
                           "dimensions.")
    if v.dtype.kind != "f":
        raise NotImplementedError(f"\"cholesky_inverse_out_cpu\" not implemented for "
                                  f"'{L.dtype.scalar_name}'")
    if v.shape[-1] != v.shape[-2]:
        raise RuntimeError(f"cholesky_inverse: A must be batches of square matrices, but they "
                           f"are {v.shape[-2]} by {v.shape[-1]} matrices")
    # only L's triangle is read; subtracting the other (a constant) keeps the gradient of
    # every entry, as PyTorch's formula gives it (-(G + G^T) products with L itself)
    from .derived import tril, triu
    other = tril(L.detach(), -1) if upper else triu(L.detach(), 1)
    if np.any(other._value):
        L = F.sub(L, other)
    A = L.mT @ L if upper else L @ L.mT
    return F.named_node(inv(A), "CholeskyInverseBackward0", given)


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """``(solution, cloned_coefficient)``: the old ``torch.triangular_solve``, X with
    ``A X = b`` (``A^T X = b`` with ``transpose=True``) for triangular A (only its ``upper``
    or lower triangle read; a unit diagonal assumed with ``unitriangular``), and a copy of A
    broadcast to the batch shape.  With PyTorch's deprecation warning.

    Both have ``grad_fn`` ``<TriangularSolveBackward0>``; as in PyTorch, the solution's
    gradient reaches A's triangle and the copy's all of A.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     X, _ = tg.triangular_solve(tg.tensor([[2.0], [4.0]]),
        ...                                tg.tensor([[1.0, 1.0], [0.0, 2.0]]))
        >>> X
        tensor([[0.],
                [2.]])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    b, A = F.as_tensor_arg(b), F.as_tensor_arg(A)
    for t, name in ((b, "b"), (A, "A")):
        if t._value.ndim < 2:
            raise RuntimeError(f"torch.triangular_solve: Expected {name} to have at least 2 "
                               f"dimensions, but it has {t._value.ndim} dimensions instead")
    n, (rows, cols) = A._value.shape[-1], b._value.shape[-2:]
    if A._value.shape[-2] != n or rows != n:
        raise RuntimeError(f"Incompatible matrix sizes for triangular_solve: each A matrix is "
                           f"{A._value.shape[-2]} by {n} but each b matrix is {rows} by {cols}")
    warnings.warn("torch.triangular_solve is deprecated in favor of "
                  "torch.linalg.solve_triangularand will be removed in a future PyTorch "
                  "release.\ntorch.linalg.solve_triangular has its arguments reversed and does "
                  "not return a copy of one of the inputs.\nX = torch.triangular_solve(B, "
                  "A).solution\nshould be replaced with\nX = torch.linalg.solve_triangular(A, "
                  "B).", UserWarning, stacklevel=2)
    batch = broadcast_shape(b._value.shape[:-2], A._value.shape[:-2])
    # A^T's upper triangle is A's lower one
    X = solve_triangular(A.mT if transpose else A, b, upper=bool(upper) != bool(transpose),
                         unitriangular=unitriangular)
    M = F.broadcast_to(A, batch + (n, n)) if A._value.shape[:-2] != batch else A
    M = F.clone(M)
    if F._records(b) and not F._records(A):
        # PyTorch's copy comes from the node that b's gradient passes: it is in the graph
        # whenever the solution is (b's part of it takes no gradient)
        M = F.where(_plain(np.ones(M._value.shape, dtype=bool)), M, F.sum(b))
    return _TriangularSolveResult(*F.named_outputs((X, M), "TriangularSolveBackward0", b, A))


# tapegrad.det, tapegrad.inverse ... and the Tensor methods of the same names
_TOP_LEVEL = {"det": det, "inverse": inv, "logdet": _logdet, "slogdet": _top_slogdet,
             "cholesky": _torch_cholesky, "cross": _torch_cross, "trace": _trace,
             "pinverse": _pinverse, "matrix_exp": matrix_exp,
             "cholesky_solve": cholesky_solve, "svd": _torch_svd, "qr": _torch_qr,
             "adjoint": adjoint, "renorm": renorm, "lu": _torch_lu,
             "lu_solve": _torch_lu_solve, "cholesky_inverse": cholesky_inverse,
             "triangular_solve": triangular_solve}
_METHODS = dict(_TOP_LEVEL, matrix_power=matrix_power, lu=_lu_method)
