"""Sparsity patterns of Jacobians and Hessians, read off a recorded tape.

One forward pass over the records carries, for every entry of every record's value, the set
of input entries it depends on (its row of the Jacobian pattern).  The sets of a record are
held together as one CSR structure (``Rows``: a row pointer and sorted column indices), so
each record is handled by a few vectorised NumPy steps, not a Python loop over its entries.

The sets are structural: they say which inputs an entry *may* depend on along the recorded
path, whatever the values (a product with a zero still counts).  Ops are modelled exactly
where their data flow is known from the record alone (elementwise ops, gathers, broadcasts,
reshapes, concatenations, scatters, writes, reductions and softmax over an axis, matrix products:
output (i, j) reads row i of the left factor and column j of the right, whatever values a
constant factor holds); every other op -- any opcode this module does not model -- makes
every output entry depend on every input entry of the record, which can only add entries,
never miss one.

The Hessian pattern of a scalar output follows the usual "nonlinear interaction" rule: a
record whose local second derivative is not identically zero couples the index sets of the
entries it combines (``x * y`` couples x's set with y's, ``exp(x)`` couples x's set with
itself, a linear op couples nothing).  The pairs are collected over every record the output
depends on, so the result contains every structural nonzero of the Hessian (it may hold a
few more where a curvature cancels further down).  Which ops are linear is read from the op
table's own curvature declarations, so a new op is nonlinear here until declared otherwise.
"""
import numpy as np
import scipy.sparse as sp

from . import ops as K
from ._config import kernel
from .ops import table as T

_EMPTY = np.zeros(0, dtype=np.int64)


class Rows:
    """The dependency sets of one record's entries: entry k depends on the input entries
    ``indices[indptr[k]:indptr[k + 1]]`` (sorted, without repeats)."""

    __slots__ = ("indptr", "indices")

    def __init__(self, indptr, indices):
        self.indptr = indptr
        self.indices = indices

    @property
    def n(self):
        return self.indptr.size - 1

    @staticmethod
    def empty(n):
        return Rows(np.zeros(n + 1, dtype=np.int64), _EMPTY)

    @staticmethod
    def identity(n):
        return Rows(np.arange(n + 1, dtype=np.int64), np.arange(n, dtype=np.int64))

    def lengths(self):
        return np.diff(self.indptr)

    def take(self, idx):
        """The rows ``idx`` (repeats allowed), in that order: out[k] = self[idx[k]]."""
        idx = np.asarray(idx, dtype=np.int64)
        lens = self.indptr[idx + 1] - self.indptr[idx]
        indptr = np.zeros(idx.size + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        if indptr[-1] == 0:
            return Rows(indptr, _EMPTY)
        # position of every output value in self.indices: its row's start plus its rank in
        # the row (a running index minus the output row's own start)
        starts = np.repeat(self.indptr[idx] - indptr[:-1], lens)
        return Rows(indptr, self.indices[starts + np.arange(indptr[-1])])


def _sorted_unique(keys):
    """The distinct values of an int array, sorted.  A sort and a comparison of neighbours:
    np.unique's hashing took 1.2 s of the 1.3 s pattern of W7's Bratu at n = 300."""
    keys = np.sort(keys)
    if keys.size < 2:
        return keys
    keep = np.empty(keys.size, dtype=bool)
    keep[0] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]


def _union_into(n_out, n_cols, parts):
    """Rows of n_out entries, entry t the union of the rows every part sends to t.

    ``parts``: (rows, target) pairs, ``target[k]`` the output entry that input row k goes to
    (many rows may go to one entry).  One sort of (entry, column) keys does the unions."""
    keys = []
    for rows, target in parts:
        if rows.indices.size:
            owner = np.repeat(np.asarray(target, dtype=np.int64), rows.lengths())
            keys.append(owner * n_cols + rows.indices)
    if not keys:
        return Rows.empty(n_out)
    keys = _sorted_unique(np.concatenate(keys))
    owner = keys // n_cols
    indptr = np.zeros(n_out + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=n_out), out=indptr[1:])
    return Rows(indptr, keys - owner * n_cols)


def _everything(n_out, n_cols, inputs):
    """Every output entry depends on every input entry (the conservative rule)."""
    cols = _sorted_unique(np.concatenate([r.indices for r in inputs] + [_EMPTY]))
    indptr = np.arange(n_out + 1, dtype=np.int64) * cols.size
    return Rows(indptr, np.tile(cols, n_out))


@kernel
def _square_pairs(indptr, indices, n_cols):
    """Keys i * n_cols + j of every pair (i, j) within one row, over all rows."""
    total = 0
    for k in range(indptr.size - 1):
        m = indptr[k + 1] - indptr[k]
        total += m * m
    out = np.empty(total, dtype=np.int64)
    p = 0
    for k in range(indptr.size - 1):
        for a in range(indptr[k], indptr[k + 1]):
            for b in range(indptr[k], indptr[k + 1]):
                out[p] = indices[a] * n_cols + indices[b]
                p += 1
    return out


@kernel
def _cross_pairs(indptr0, indices0, indptr1, indices1, n_cols):
    """Keys of every pair (i, j) with i in row k of the first set and j in row k of the
    second, over all rows k, both ways round (a Hessian pattern is symmetric)."""
    total = 0
    for k in range(indptr0.size - 1):
        total += 2 * (indptr0[k + 1] - indptr0[k]) * (indptr1[k + 1] - indptr1[k])
    out = np.empty(total, dtype=np.int64)
    p = 0
    for k in range(indptr0.size - 1):
        for a in range(indptr0[k], indptr0[k + 1]):
            for b in range(indptr1[k], indptr1[k + 1]):
                out[p] = indices0[a] * n_cols + indices1[b]
                out[p + 1] = indices1[b] * n_cols + indices0[a]
                p += 2
    return out


def _expand_source(aux, ip, size):
    """The source entry of each output entry of an EXPAND_S record (shape and strides)."""
    nd = int(aux[ip])
    shape = aux[ip + 1: ip + 1 + nd]
    strides = aux[ip + 1 + nd: ip + 1 + 2 * nd]
    src = np.zeros(tuple(int(s) for s in shape), dtype=np.int64)
    for d in range(nd):
        view = [1] * nd
        view[d] = int(shape[d])
        src = src + (np.arange(shape[d], dtype=np.int64) * strides[d]).reshape(view)
    return src.reshape(-1)[:size] if nd else np.zeros(size, dtype=np.int64)


# reductions over the middle axis of an (O, R, I) view (reduce.py): output (O, I); softmax
# and log_softmax keep the input's shape
_ALONG_AXIS = frozenset({K.SOFTMAX, K.LOG_SOFTMAX})
_REDUCTIONS = frozenset({K.SUM, K.SUM_DIM, K.MEAN, K.MEAN_DIM, K.PROD, K.PROD_DIM, K.MAX,
                         K.MIN, K.AMAX, K.AMIN, K.MAX_DIM, K.MIN_DIM, K.VAR, K.STD,
                         K.LOGSUMEXP, K.NORM})
_GATHERS = frozenset({K.GATHER, K.BCAST})
_NO_INPUTS = frozenset(c for c in T.OPS if T.OPS[c].family == T.DATA)


def _inputs(op, a0, a1, ip, aux, r):
    """The records record r reads values from that carry a derivative (as ``plan`` sees
    them): a0, a1, or the inputs a concatenation lists in aux."""
    o = int(op[r])
    if o in _NO_INPUTS:
        return []
    if o in K.MANY_INPUTS:
        k = int(aux[ip[r]])
        return [int(aux[ip[r] + 1 + 3 * j]) for j in range(k)]
    return [int(s) for s in (a0[r], a1[r]) if s >= 0]


def _curvature_kind(o):
    """How record op o couples index sets at second order: None (linear: nothing), "unary"
    (an input's set with itself), "mul" (x's set with y's), "div" (x's with y's and y's with
    itself), or "all" (the union of everything the output entry depends on, with itself)."""
    info = T.OPS.get(o)
    if info is None:
        return "all"
    if info.family == T.DATA:
        return None
    if info.family == T.ELEMENTWISE and "d2" in info.rules:
        return "unary"
    if info.rules.get("curvature") is T.LINEAR:
        return None
    if o == K.MUL:
        return "mul"
    if o == K.DIV:
        return "div"
    return "all"


def _propagate(tape, x_records, y_record, n_cols, hessian):
    """Dependency rows of y_record over the n_cols entries of the input, and (with
    ``hessian``) the keys i * n_cols + j of the coupled input pairs."""
    op, a0, a1, voff, size, ip, fp, aux, faux = tape.columns()
    n_rec = y_record + 1
    live = np.zeros(n_rec, dtype=bool)
    live[y_record] = True
    if hessian:
        # only records the output reads from can bend it
        for r in range(y_record, -1, -1):
            if live[r]:
                for s in _inputs(op, a0, a1, ip, aux, r):
                    live[s] = True
    rows = [None] * n_rec
    pairs = _Pairs(n_cols)
    empty_rows = {}
    for r in range(n_rec):
        o = int(op[r])
        n = int(size[r])
        srcs = _inputs(op, a0, a1, ip, aux, r)
        if r in x_records:
            rows[r] = Rows.identity(n)
            continue
        if not srcs or all(rows[s].indices.size == 0 for s in srcs):
            # depends on no input entry: a shared empty set per size
            rows[r] = empty_rows.get(n) or empty_rows.setdefault(n, Rows.empty(n))
            continue
        ins = [rows[s] for s in srcs]
        family = T.OPS[o].family if o in T.OPS else None
        out = sides = None
        if family == T.ELEMENTWISE and all(i.n == n for i in ins):
            out = ins[0] if len(ins) == 1 else _union_into(
                n, n_cols, [(i, np.arange(n)) for i in ins])
        elif o == K.GATHER and int(aux[ip[r]]) in K.VALUE_SELECTED:
            # sort, topk, ...: the recorded indices hold for the recorded values only; any
            # entry of the input may be selected at other values (slice-wise would be tighter)
            out = _everything(n, n_cols, ins)
        elif o in _GATHERS and len(ins) == 1:
            out = ins[0].take(aux[ip[r] + 2: ip[r] + 2 + n])
        elif o == K.RESHAPE and len(ins) == 1 and ins[0].n == n:
            out = ins[0]
        elif o == K.EXPAND_S and len(ins) == 1:
            out = ins[0].take(_expand_source(aux, ip[r], n))
        elif o in K.MANY_INPUTS:
            out = _concatenated(aux, int(ip[r]), n, n_cols, ins)
        elif o == K.REPLACE and len(ins) == 2:
            out = _replaced(aux, int(ip[r]), n, n_cols, ins[0], ins[1])
        elif o == K.SCATTER and len(ins) == 1:
            n_in = int(aux[ip[r] + 1])
            out = _union_into(n, n_cols, [(ins[0], aux[ip[r] + 2: ip[r] + 2 + n_in])])
        elif (o in _REDUCTIONS or o in _ALONG_AXIS) and len(ins) == 1:
            out = _reduced(o, aux, int(ip[r]), n, n_cols, ins[0])
        elif o == K.MATMUL and len(ins) == 2:
            sides = _product_sides(aux, int(ip[r]), n, n_cols, ins)
            if sides is not None:
                out = _union_into(n, n_cols, [(sides[0], np.arange(n)),
                                              (sides[1], np.arange(n))])
        if out is None:
            out = _everything(n, n_cols, ins)
        rows[r] = out
        if hessian and live[r]:
            kind = _curvature_kind(o)
            if kind == "unary" and len(ins) == 1:
                pairs.square(ins[0])
            elif o == K.MATMUL and sides is not None:
                # bilinear: entries of the left factor's rows couple with the right's
                pairs.cross(sides[0], sides[1])
            elif kind in ("mul", "div") and len(ins) == 2 and all(i.n == n for i in ins):
                pairs.cross(ins[0], ins[1])
                if kind == "div":   # x / y is nonlinear in y alone too
                    pairs.square(ins[1])
            elif kind is not None:
                # every entry the output entry depends on may couple with every other
                pairs.square(out)
    return rows[y_record], (pairs.keys() if hessian else None)


# pair keys held at once while a Hessian pattern is collected (8 bytes each): past this the
# Hessian is too dense for a sparse result to help, and collecting it would exhaust memory
MAX_PAIRS = 1 << 27


class _Pairs:
    """The coupled pair keys collected so far, merged whenever they have doubled (records
    repeat pairs: every record of a chained Rosenbrock adds the same neighbours again)."""

    def __init__(self, n_cols):
        self.n_cols = n_cols
        self.parts = []
        self.held = 0
        self.merge_at = 1 << 22

    def _add(self, count, make):
        if self.held + count > MAX_PAIRS:
            self._merge()
            if self.held + count > MAX_PAIRS:
                raise ValueError(
                    f"the Hessian's pattern would hold more than {MAX_PAIRS} entries (a "
                    "nearly dense Hessian of many variables): use tapegrad.hessian or hvp")
        if count:
            self.parts.append(make())
            self.held += count
        if self.held > self.merge_at:
            self._merge()
            self.merge_at = max(self.merge_at, 2 * self.held)

    def _merge(self):
        if len(self.parts) > 1:
            self.parts = [_sorted_unique(np.concatenate(self.parts))]
            self.held = self.parts[0].size

    def square(self, rows):
        count = int(np.sum(rows.lengths() ** 2))
        self._add(count, lambda: _square_pairs(rows.indptr, rows.indices, self.n_cols))

    def cross(self, left, right):
        count = 2 * int(np.sum(left.lengths() * right.lengths()))
        self._add(count, lambda: _cross_pairs(left.indptr, left.indices, right.indptr,
                                              right.indices, self.n_cols))

    def keys(self):
        if not self.parts:
            return _EMPTY
        return _sorted_unique(np.concatenate(self.parts))


def _concatenated(aux, ip, n, n_cols, ins):
    """Rows of a CAT/STACK record: input j fills a run of ``width`` entries at ``start``
    inside each of the output's O blocks (layout in structure.py)."""
    k = int(aux[ip])
    outer, block = int(aux[ip + 1 + 3 * k]), int(aux[ip + 2 + 3 * k])
    if outer * block != n:
        return None
    parts = []
    for j in range(k):
        start, width = int(aux[ip + 2 + 3 * j]), int(aux[ip + 3 + 3 * j])
        target = (np.arange(outer, dtype=np.int64)[:, None] * block + start
                  + np.arange(width, dtype=np.int64)[None, :]).reshape(-1)
        if target.size != ins[j].n:
            return None
        parts.append((ins[j], target))
    return _union_into(n, n_cols, parts)


def _replaced(aux, ip, n, n_cols, base, src):
    """Rows of a REPLACE record (layout in structure.py): an entry a source element was
    written to depends on every source element written there, and an entry nothing was
    written to on the base's entry.  Of a repeated target only the last write's value is
    kept, but PyTorch's gradient (which the reverse sweeps give) also reaches the earlier
    ones: a pattern of the last write alone would miss those entries of a reverse-mode
    Jacobian, and a reverse ``sparse_jacobian`` would add them into another row's entries
    of the same colour."""
    m = int(aux[ip + 1])
    if base.n != n or src.n != m:
        return None
    pos = np.asarray(aux[ip + 2: ip + 2 + m], dtype=np.int64)
    hit = np.zeros(n, dtype=bool)
    hit[pos] = True
    kept = np.flatnonzero(~hit)
    return _union_into(n, n_cols, [(base.take(kept), kept), (src, pos)])


def _product_sides(aux, ip, n, n_cols, ins):
    """For a matrix product (B, M, K) @ (B, K, N) (layout in linalg.py): per output entry
    (b, i, j), the union of the left factor's row (b, i, :) and the union of the right
    factor's column (b, :, j), each as Rows of the output's size.  Structural: a zero that a
    constant factor holds is a value, which a later call may change.  None where the sizes
    do not fit that layout (the caller then connects everything)."""
    b_n, m, k, nn = (int(v) for v in aux[ip + 1: ip + 5])
    left, right = ins
    if b_n * m * k != left.n or b_n * k * nn != right.n or b_n * m * nn != n:
        return None
    # flat left entry (b, i, k) belongs to row (b, i); flat right entry (b, k, j) to (b, j)
    left_row = np.repeat(np.arange(b_n * m, dtype=np.int64), k)
    right_col = (np.arange(b_n, dtype=np.int64)[:, None, None] * nn
                 + np.zeros((1, k, 1), dtype=np.int64)
                 + np.arange(nn, dtype=np.int64)[None, None, :]).reshape(-1)
    rows = _union_into(b_n * m, n_cols, [(left, left_row)])
    cols = _union_into(b_n * nn, n_cols, [(right, right_col)])
    # output (b, i, j) reads rows[(b, i)] and cols[(b, j)]
    b_idx = np.arange(b_n, dtype=np.int64)[:, None, None]
    i_idx = np.arange(m, dtype=np.int64)[None, :, None]
    j_idx = np.arange(nn, dtype=np.int64)[None, None, :]
    shape = (b_n, m, nn)
    from_rows = np.broadcast_to(b_idx * m + i_idx, shape).reshape(-1)
    from_cols = np.broadcast_to(b_idx * nn + j_idx, shape).reshape(-1)
    return rows.take(from_rows), cols.take(from_cols)


def _reduced(o, aux, ip, n, n_cols, rows):
    """Rows of a reduction over the middle axis of an (O, R, I) view: output (o, i) depends
    on input (o, k, i) for every k; softmax's output (o, k, i) on the same whole group."""
    o_n, r_n, i_n = (int(v) for v in aux[ip:ip + 3])
    if o_n * r_n * i_n != rows.n:
        return None
    # the flat input entry (o, k, i) belongs to the group o * I + i
    group = np.broadcast_to(np.arange(o_n, dtype=np.int64)[:, None, None] * i_n
                            + np.arange(i_n, dtype=np.int64)[None, None, :],
                            (o_n, r_n, i_n)).reshape(-1)
    reduced = _union_into(o_n * i_n, n_cols, [(rows, group)])
    if o in _REDUCTIONS and n == o_n * i_n:
        return reduced
    if o in _ALONG_AXIS and n == rows.n:
        return reduced.take(group)
    return None


# ---------------------------------------------------------------------------------------------
# recording and the public functions
# ---------------------------------------------------------------------------------------------
def _vector_input(x, name):
    """x as a fresh float64 leaf tensor, refused unless 1-D."""
    from .higher import _as_input
    t = _as_input(x)
    if t._value.ndim != 1:
        raise ValueError(f"{name}: x must be a 1-D vector, got shape {tuple(t._value.shape)} "
                         "(flatten it, and reshape inside the function)")
    return t


def tape_rows(tape, x, y, hessian=False):
    """(rows of y's entries over x's entries, coupled pair keys or None) for y recorded on
    ``tape`` from the leaf x."""
    from .higher import _leaf_records
    from .tensor import Tensor
    n = x._value.size
    m = y._value.size
    if not isinstance(y, Tensor) or y._tape is not tape:
        # not recorded from x: x itself handed back, or a constant
        rows = Rows.identity(n) if y is x else Rows.empty(m)
        return rows, (_EMPTY if hessian else None)
    x_records = set(_leaf_records(tape, x))
    rows, keys = _propagate(tape, x_records, y._r, n, hessian)
    return rows, (keys if hessian else None)


def _csr(indptr, indices, shape):
    data = np.ones(indices.size, dtype=bool)
    return sp.csr_matrix((data, indices, indptr), shape=shape)


def pair_matrix(keys, n):
    """The symmetric n x n boolean CSR pattern of the pair keys i * n + j."""
    i = keys // n
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(i, minlength=n), out=indptr[1:])
    return _csr(indptr, keys - i * n, (n, n))


def jacobian_sparsity(fn, x):
    """The sparsity pattern of the Jacobian of ``fn`` at ``x``, as a boolean
    ``scipy.sparse.csr_matrix`` of shape (fn(x).size, x.size).

    ``x`` is a 1-D array or tensor; the output may have any shape, its entries are the rows
    in C order.  The pattern is that of the path ``fn`` takes at this ``x`` (Python branches
    on values decide which ops are recorded), structural (a product with a zero still
    counts), exact for elementwise ops, indexing, broadcasting, reshapes, concatenation and
    reductions, and conservative (all to all) for ops that mix every entry, such as a matrix
    product: it never misses a nonzero.

    Example:
        >>> P = tg.jacobian_sparsity(lambda v: v[1:] * v[:-1], np.ones(4))
        >>> P.toarray().astype(int)
        array([[1, 1, 0, 0],
               [0, 1, 1, 0],
               [0, 0, 1, 1]])
    """
    from .higher import _run
    x = _vector_input(x, "jacobian_sparsity")
    tape, y = _run(fn, [x])
    y = _tensor_output(y, "jacobian_sparsity")
    rows, _ = tape_rows(tape, x, y)
    return _csr(rows.indptr, rows.indices, (y._value.size, x._value.size))


def hessian_sparsity(fn, x):
    """The sparsity pattern of the Hessian of the scalar ``fn`` at ``x``, as a symmetric
    boolean ``scipy.sparse.csr_matrix`` of shape (x.size, x.size).

    ``x`` is a 1-D array or tensor.  Entry (i, j) is set when some op on the recorded path
    couples x[i] and x[j] nonlinearly (a product of terms depending on them, a nonlinear
    function of a term depending on both); linear and piecewise linear ops (sums, indexing,
    relu, max) couple nothing.  Conservative as ``jacobian_sparsity``: never a missed nonzero.

    Example:
        >>> f = lambda v: ((v[1:] - v[:-1] ** 2) ** 2).sum()
        >>> tg.hessian_sparsity(f, np.ones(4)).toarray().astype(int)
        array([[1, 1, 0, 0],
               [1, 1, 1, 0],
               [0, 1, 1, 1],
               [0, 0, 1, 1]])
    """
    from .higher import _run
    x = _vector_input(x, "hessian_sparsity")
    tape, y = _run(fn, [x])
    y = _scalar_output(y, "hessian_sparsity")
    _, keys = tape_rows(tape, x, y, hessian=True)
    return pair_matrix(keys, x._value.size)


def _tensor_output(y, name):
    from .tensor import Tensor
    if not isinstance(y, Tensor):
        raise TypeError(f"{name}: the function must return a tensor, got {type(y).__name__}")
    return y


def _scalar_output(y, name):
    y = _tensor_output(y, name)
    if y._value.size != 1:
        raise ValueError(f"{name}: the function must return a tensor with a single element, "
                         f"got shape {tuple(y._value.shape)}")
    return y
