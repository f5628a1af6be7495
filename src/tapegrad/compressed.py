"""Sparse Jacobians and Hessians by compressed sweeps over one compiled tape.

``sparse_jacobian(fn)(x)`` replays the compiled ``fn`` at x, reads the Jacobian's pattern
off the tape (``sparsity.py``), colours it (``colouring.py``) and computes J S -- one
tangent seed per colour of columns, in one vector-mode sweep on a small tape -- or Sᵀ J,
one reverse sweep per colour of rows, whichever needs fewer colours.  Every entry of the
pattern is then read from the compressed product directly.

The pattern and colouring are kept per recorded tape, keyed on a digest of the tape's
structure (opcodes, inputs, sizes, index data; not the values).  A call whose replay went
down another path -- a guard failed and ``compile`` recorded again -- has a different
digest, so it gets a pattern of its own: a pattern made for one path is never applied to
another.
"""
import hashlib
import time
from collections import OrderedDict

import numpy as np
import scipy.sparse as sp

from . import colouring
from . import higher
from . import ops as K
from . import sparsity
from .replay import Compiled
from .replay import compile as compile_
from .tape import NO_EXT

_ONE_SWEEP_VALUES = 1 << 19   # tangent values up to which all seeds share one sweep
_PLANS_KEPT = 8   # patterns kept per function (one per path its calls take; few in practice)


class Plan:
    """The pattern, colouring and seeds of one recorded tape.

    ``mode``: "forward" (columns coloured), "reverse" (rows coloured) or "hessian";
    ``n_colours``: sweeps (seeds) per evaluation; ``pattern_seconds``/``colouring_seconds``:
    what building it cost."""

    __slots__ = ("mode", "shape", "indptr", "indices", "colours", "n_colours", "seeds",
                 "gather_row", "gather_col", "pattern_seconds", "colouring_seconds", "_flat",
                 "_csr_indices", "_csr_indptr", "_arenas")

    def __init__(self, mode, shape, indptr, indices, colours, pattern_seconds,
                 colouring_seconds, gather=None):
        self.mode, self.shape = mode, shape
        self.indptr, self.indices = indptr, indices
        self.colours = colours
        self.n_colours = int(colours.max()) + 1 if colours.size else 0
        self.pattern_seconds, self.colouring_seconds = pattern_seconds, colouring_seconds
        rows = np.repeat(np.arange(shape[0], dtype=np.int64), np.diff(indptr))
        # where entry (i, j) sits in the compressed product: forward and Hessian products
        # are (colours, rows), reverse ones (colours, columns)
        if gather is not None:
            self.gather_row, self.gather_col = gather
            n_seeded = shape[1]
        elif mode == "reverse":
            self.gather_row, self.gather_col = colours[rows], indices
            n_seeded = shape[0]
        else:
            self.gather_row, self.gather_col = colours[indices], rows
            n_seeded = shape[1]
        self.seeds = np.zeros((self.n_colours, n_seeded))
        self.seeds[colours, np.arange(n_seeded)] = 1.0
        # each entry's flat position in the compressed product, whose rows are as long as
        # y (forward) or x (reverse, Hessian): one take per call instead of a 2-D fancy
        # index (0.25 ms against 1.3 ms for W7's 450,000 entries)
        width = shape[0] if mode == "forward" else shape[1]
        self._flat = self.gather_row * width + self.gather_col
        # the index arrays in the dtype scipy.sparse would convert them to (int32 where they
        # fit), so that a call copies them instead of converting them
        small = max(shape + (indices.size,)) < 2 ** 31 - 1
        self._csr_indices = indices.astype(np.int32 if small else np.int64)
        self._csr_indptr = indptr.astype(np.int32 if small else np.int64)
        self._arenas = []

    def borrow_arena(self, n):
        """A tangent arena of n values for one evaluation on this plan's tape: zeros, or the
        one an earlier evaluation gave back (``give_back``).  Not zeroed again: an
        evaluation seeds the same records of a tape of the same structure, so its sweeps
        write the same positions as the earlier one's (see ``tangent_products``) -- fresh
        zeros cost W7's 10^5-variable Hessian 2 ms a call in page faults.  Two threads
        evaluating at once each get their own (a list's pop and append are atomic)."""
        try:
            arena = self._arenas.pop()
        except IndexError:
            return np.zeros(n)
        return arena if arena.size == n else np.zeros(n)

    def give_back(self, arena):
        """Keep ``arena`` for the next evaluation (after one that finished: an evaluation
        stopped by an error keeps its own)."""
        self._arenas.append(arena)

    def pattern(self):
        """The pattern as a boolean CSR matrix."""
        return sp.csr_matrix((np.ones(self.indices.size, dtype=bool), self.indices,
                              self.indptr), shape=self.shape)

    def assemble(self, compressed):
        """The CSR matrix whose entries are read off the compressed product."""
        data = np.take(compressed.reshape(-1), self._flat)
        # copies: a caller may change the matrix's index arrays in place (sort_indices...),
        # and the next call reads these
        return sp.csr_matrix((data, self._csr_indices.copy(), self._csr_indptr.copy()),
                             shape=self.shape)


def _structure_digest(tape, x, y):
    """A digest of everything the pattern depends on: the records up to y's (opcodes,
    inputs, sizes, side indices), which records are x, and which is y."""
    op, a0, a1, voff, size, ip, fp, aux, faux = tape.columns()
    end = y._r + 1
    h = hashlib.blake2b(digest_size=20)
    for col in (op, a0, a1, size, ip):
        h.update(np.ascontiguousarray(col[:end]).tobytes())
    h.update(np.ascontiguousarray(aux).tobytes())
    h.update(np.array(sorted(higher._leaf_records(tape, x)) + [-1, y._r, x._value.size],
                      dtype=np.int64).tobytes())
    return h.digest()


class _Compressed:
    """What sparse_jacobian and sparse_hessian share: the compiled function and its plans."""

    def __init__(self, fn):
        self.fn = fn if isinstance(fn, Compiled) else compile_(fn)
        self._plans = OrderedDict()
        self._same = None     # the last tape's columns and what else keys its plan
        self.last_plan = None

    def _record(self, x, args, name):
        x = sparsity._vector_input(x, name)
        tape, y = higher._run(self.fn, [x], consts=args)
        return x, tape, y

    def _plan(self, tape, x, y, build):
        # A replay's tape shares its variant's record columns, which never change once
        # recorded: the same column objects at the same lengths, read up to the same output
        # from the same leaf records, are the same structure, without hashing the columns
        # again (8 ms a call for W7's 10^5-variable Rosenbrock).  The key holds the columns,
        # so their ids cannot be reused by other objects while it lives.
        leaves = tuple(sorted(higher._leaf_records(tape, x)))
        same = self._same
        if (same is not None and same[0] is tape.op and same[1] is tape.aux
                and same[2:-1] == (len(tape.op), len(tape.aux), y._r, leaves, x._value.size)):
            self.last_plan = same[-1]
            return same[-1]
        key = _structure_digest(tape, x, y)
        plan = self._plans.get(key)
        if plan is None:
            plan = build()
            self._plans[key] = plan
            if len(self._plans) > _PLANS_KEPT:
                self._plans.popitem(last=False)
        else:
            self._plans.move_to_end(key)
        self._same = (tape.op, tape.aux, len(tape.op), len(tape.aux), y._r, leaves,
                      x._value.size, plan)
        self.last_plan = plan
        return plan


class SparseJacobian(_Compressed):
    """``x -> scipy.sparse.csr_matrix`` of d fn(x) / dx (see ``sparse_jacobian``)."""

    def __call__(self, x, *args):
        x, tape, y = self._record(x, args, "sparse_jacobian")
        y = sparsity._tensor_output(y, "sparse_jacobian")
        m, n = y._value.size, x._value.size
        if y._tape is not tape:
            # x handed back, or a constant: no sweep to run
            return sp.identity(n, format="csr") if y is x else sp.csr_matrix((m, n))
        plan = self._plan(tape, x, y, lambda: self._build(tape, x, y))
        if plan.mode == "forward":
            compressed = tangent_products(tape, x, y, plan.seeds, plan)
        else:
            compressed = adjoint_products(tape, x, y, plan.seeds)
        return plan.assemble(compressed)

    def sparsity(self, x, *args):
        """The pattern the next evaluation at x uses, as a boolean CSR matrix."""
        x, tape, y = self._record(x, args, "sparse_jacobian")
        y = sparsity._tensor_output(y, "sparse_jacobian")
        if y._tape is not tape:
            m, n = y._value.size, x._value.size
            return (sp.identity(n, dtype=bool, format="csr") if y is x
                    else sp.csr_matrix((m, n), dtype=bool))
        return self._plan(tape, x, y, lambda: self._build(tape, x, y)).pattern()

    @staticmethod
    def _build(tape, x, y):
        t0 = time.perf_counter()
        rows, _ = sparsity.tape_rows(tape, x, y)
        shape = (y._value.size, x._value.size)
        pattern = sp.csr_matrix((np.ones(rows.indices.size, dtype=bool), rows.indices,
                                 rows.indptr), shape=shape)
        t1 = time.perf_counter()
        by_column = colouring.colour_columns(pattern)
        by_row = colouring.colour_rows(pattern)
        t2 = time.perf_counter()
        k_col = by_column.max() + 1 if by_column.size else 0
        k_row = by_row.max() + 1 if by_row.size else 0
        # a tangent sweep per colour costs about what a reverse sweep per colour does, and
        # small tapes run all tangent seeds in one sweep: reverse only when strictly fewer
        if k_row < k_col:
            return Plan("reverse", shape, rows.indptr, rows.indices, by_row, t1 - t0, t2 - t1)
        return Plan("forward", shape, rows.indptr, rows.indices, by_column, t1 - t0, t2 - t1)


class SparseHessian(_Compressed):
    """``x -> scipy.sparse.csr_matrix`` of the Hessian of a scalar fn (see
    ``sparse_hessian``)."""

    def __call__(self, x, *args):
        x, tape, y = self._record(x, args, "sparse_hessian")
        y = sparsity._scalar_output(y, "sparse_hessian")
        n = x._value.size
        if y._tape is not tape or not y._rg:
            return sp.csr_matrix((n, n))
        plan = self._plan(tape, x, y, lambda: self._build(tape, x, y))
        return plan.assemble(hessian_products(self.fn, tape, x, y, plan.seeds, args, plan))

    def sparsity(self, x, *args):
        """The pattern the next evaluation at x uses, as a boolean CSR matrix."""
        x, tape, y = self._record(x, args, "sparse_hessian")
        y = sparsity._scalar_output(y, "sparse_hessian")
        n = x._value.size
        if y._tape is not tape or not y._rg:
            return sp.csr_matrix((n, n), dtype=bool)
        return self._plan(tape, x, y, lambda: self._build(tape, x, y)).pattern()

    @staticmethod
    def _build(tape, x, y):
        n = x._value.size
        t0 = time.perf_counter()
        _, keys = sparsity.tape_rows(tape, x, y, hessian=True)
        pattern = sparsity.pair_matrix(keys, n)
        t1 = time.perf_counter()
        colours = colouring.colour_symmetric(pattern)
        # each entry's place in H S: (i, colour of j), or (j, colour of i) where a star
        # colouring needs the symmetry
        gather = colouring.star_sources(pattern, colours)
        t2 = time.perf_counter()
        if gather is None:
            raise RuntimeError("internal error: the Hessian's colouring does not recover "
                               "every entry")
        return Plan("hessian", (n, n), pattern.indptr.astype(np.int64),
                    pattern.indices.astype(np.int64), colours, t1 - t0, t2 - t1, gather)


def sparse_jacobian(fn):
    """``fn(x) -> y`` becomes ``x -> J``, J a ``scipy.sparse.csr_matrix`` of shape
    (y.size, x.size) (y's entries in C order; ``x`` a 1-D array or tensor).  Further
    arguments, ``J(x, *args)``, are passed on to ``fn(x, *args)`` and not differentiated
    (as SciPy passes ``args``).

    ``fn`` is compiled (``tapegrad.compile``) unless it already is.  Each call replays it,
    reads the Jacobian's sparsity pattern off the recorded tape (``jacobian_sparsity``),
    colours it and runs as many sweeps as there are colours: forward, all seeds in one
    vector-mode tangent sweep (a sweep per colour on large tapes, where that measured
    faster), or reverse, one sweep per colour of rows, whichever needs fewer colours.  The
    pattern and colouring are computed once per recorded path and reused; a call that
    takes another path (a guard fails and ``compile`` records again) gets its own.

    The matrix holds every entry of the pattern, including structural entries that are
    zero at this x, so that its structure is the same at every x on one path.  The last
    call's plan (``.last_plan``: mode, colours, pattern and colouring times) is kept for
    inspection, and ``.sparsity(x)`` returns the pattern.

    Example:
        >>> J = tg.sparse_jacobian(lambda v: v[1:] * v[:-1])(np.array([1.0, 2.0, 3.0]))
        >>> J.toarray()
        array([[2., 1., 0.],
               [0., 3., 2.]])
    """
    return SparseJacobian(fn)


def sparse_hessian(fn):
    """``fn(x) -> scalar`` becomes ``x -> H``, a symmetric ``scipy.sparse.csr_matrix`` of
    shape (x.size, x.size) (``x`` a 1-D array or tensor).

    As ``sparse_jacobian``: ``fn`` is compiled, the pattern (``hessian_sparsity``) and a
    colouring of its columns are made once per recorded path, and each call computes H S
    by forward over reverse with one seed per colour, all in one sweep.  The colouring is a
    star colouring (or a distance-2 one where that needs fewer colours), each entry read
    directly from H S, using the symmetry.

    Example:
        >>> H = tg.sparse_hessian(lambda v: (v[1:] * v[:-1] ** 2).sum())
        >>> H(np.array([1.0, 2.0, 3.0])).toarray()
        array([[4., 2., 0.],
               [2., 6., 4.],
               [0., 4., 0.]])
    """
    return SparseHessian(fn)


# ---------------------------------------------------------------------------------------------
# the compressed products
# ---------------------------------------------------------------------------------------------
def tangent_products(tape, x, y, seeds, plan=None):
    """J sᵀ for each row s of ``seeds`` (k, x.size), as an array (k, y.size): one vector-mode
    tangent sweep for all seeds on a small tape, one sweep per seed on a large one."""
    k = seeds.shape[0]
    out = np.zeros((k, y._value.size))
    # Measured on W7's Bratu (5 colours): all seeds in one vector-mode sweep took 0.21 ms at
    # n = 30 against 0.32 ms for a sweep per seed (the fixed cost of a sweep dominates), but
    # 27 ms against 24.5 ms at n = 300 (k tangent arenas of 2 million values no longer stay
    # in cache).  So one sweep while the tangents are small, one per seed beyond.
    chunk = k if k * tape.top <= _ONE_SWEEP_VALUES else 1
    # One arena for every chunk, not a fresh zeroed one each (a fresh 13 MB arena cost W7's
    # n = 300 Bratu 1 ms a sweep in page faults).  Reusing it unzeroed is exact: every chunk
    # seeds the same records, so the sweep marks the same records as depending on a seed,
    # writes each of their tangents whole before any rule reads it, and reads no tangent of
    # a record that depends on no seed (a rule leaves such an input's term out; cat writes
    # zeros for it).  test_sparse sweeps random programs in a reused arena.
    tans = np.zeros(chunk * tape.top) if plan is None else plan.borrow_arena(chunk * tape.top)
    for lo in range(0, k, chunk):
        hi = min(k, lo + chunk)
        (out[lo:hi],) = higher._tangents(tape, [(x, seeds[lo:hi])], [y], hi - lo,
                                         tans[:(hi - lo) * tape.top])
    if plan is not None:
        plan.give_back(tans)
    return out


def adjoint_products(tape, x, y, seeds):
    """s J for each row s of ``seeds`` (k, y.size), as an array (k, x.size): one compiled
    reverse sweep per seed (as ``jacobian`` runs one per row)."""
    k, n = seeds.shape[0], x._value.size
    out = np.zeros((k, n))
    cols = tape.columns()
    op, a0, a1, voff, size, ip, fp, aux, faux = cols
    n_rec = len(op)
    need = np.empty(n_rec, dtype=np.uint8)
    goff = np.empty(n_rec, dtype=np.int64)
    r_out = y._r
    m = y._value.size
    total, _, _ = K.plan(op, a0, a1, size, ip, aux, np.array([r_out], dtype=np.int64), n_rec,
                      need, goff)
    grads = np.zeros(max(total, 1))
    leaves = [r for r in higher._leaf_records(tape, x) if need[r]]
    for c in range(k):
        grads[:total] = 0.0
        grads[goff[r_out]:goff[r_out] + m] = seeds[c]
        bad = K.sweep(op, a0, a1, voff, goff, size, ip, fp, aux, faux, tape.vals, NO_EXT,
                      grads, need, r_out + 1, 0, 0)
        if bad >= 0:
            raise RuntimeError(f"internal error: opcode {op[bad]} has no backward rule")
        for r in leaves:
            out[c] += grads[goff[r]:goff[r] + n]
    del cols, op, a0, a1, voff, size, ip, fp, aux, faux
    return out


def hessian_products(fn, tape, x, y, seeds, args=(), plan=None):
    """H sᵀ for each row s of ``seeds`` (k, x.size), as an array (k, x.size): forward over
    reverse on the tape of fn (``higher._curvature``), or, where an op has no curvature
    rule, the tangents of the recorded gradient (``higher._value_and_hessian_times``)."""
    k, n = seeds.shape
    out = np.zeros((k, n))
    chunk = max(1, min(k, higher._TANGENT_BUDGET // max(tape.top + len(tape), 1)))
    n_tans = chunk * tape.top
    tans = np.zeros(n_tans) if plan is None else plan.borrow_arena(n_tans)
    for lo in range(0, k, chunk):
        hi = min(k, lo + chunk)
        hv = higher._curvature(tape, x, y, seeds[lo:hi], tans[:(hi - lo) * tape.top])
        if hv is None:
            # recorded afresh with the extra arguments bound (the derived gradient that
            # replaying would use takes x alone)
            inner = fn.fn if hasattr(fn, "fn") else fn
            return higher._value_and_hessian_times(lambda v: inner(v, *args), x, seeds)[1]
        out[lo:hi] = hv
    if plan is not None:
        plan.give_back(tans)
    return out
