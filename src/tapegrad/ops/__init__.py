"""The op table: every op tapegrad records, declared once with all of its rules.

A tape record is one row of int64 columns ``op, a0, a1, voff, size, ip`` and one float64
column ``fp``:

* ``a0``/``a1`` -- the records that produced the inputs (-1: none);
* ``voff``/``size`` -- where the output value lives in the tape's value arena;
* ``ip`` -- an offset into the tape's int side array ``aux`` (shapes, indices, extra inputs)
  or into its float side array ``faux``;
* ``fp`` -- a scalar operand (``x + 2.0`` keeps the 2.0 here).

Layout (modules depend downward only):

* ``table``        -- ``declare`` and the registry; no numba.
* ``elementwise``, ``reduce``, ``linalg``, ``structure`` -- one block per op: its opcode,
  PyTorch name and rules side by side, and each family's loops, written once.
* ``activation``   -- the activation functions (gelu, elu, hardtanh, ...), elementwise ops
  with PyTorch's formulas.
* ``dispatch``     -- writes the per-pass dispatchers from the table.
* ``sweeps``       -- the compiled passes: ``plan``, ``sweep``, ``forward``, ``tangent``,
  ``curvature``, ``batch_replay``.

This module is the face the rest of tapegrad uses: ``K.TANH``, ``K.OPS``, ``K.sweep``.
To add an op, declare it in its family's module (see ``elementwise.TANH`` for a unary op):
the dispatchers, the tape-file checks and generated code pick it up from the declaration.
"""
import threading as _threading

import numpy as _np

from .table import ELEMENTWISE, LINEAR, OPS, READS_OUT, READS_X0, READS_X1, OpInfo  # noqa: F401
from .elementwise import (ABS, ACOS, ACOSH, ADD, ADD_S, ASIN, ASINH, ATAN,  # noqa: F401
                          ATANH, CEIL, CLAMP, CLAMP_MAX, CLAMP_MIN, COS, COSH, DIV, DIV_S, ERF,
                          ERFC, EXP, EXP2, EXPM1, FLOOR, FRAC, LOG, LOG10, LOG1P, LOG2,
                          MAXIMUM, MINIMUM, MUL, MUL_S, NEG, POW, POW_S, RECIPROCAL, RELU,
                          ROUND, ROUND_DECIMALS, RPOW_S, RSQRT, RSUB_S, SIGMOID, SIGN, SIN,
                          SINH, SOFTPLUS, SQRT, SUB, SUB_S, TAN, TANH, TRUNC, WHERE,
                          ZERO, FILL, FILL_T, COPY, LOGIT, erf_array, erfc_array)
from .elementwise import (ATAN2, COPYSIGN, FMOD, HYPOT, LOGADDEXP, REMAINDER,  # noqa: F401
                          XLOG1PY, XLOGY, atan2_array, copysign_array, fmod_array,
                          hypot_array, logaddexp_array, remainder_array, xlog1py_array,
                          xlogy_array)
from .elementwise import (DIGAMMA, ERFINV, LGAMMA, POLYGAMMA, digamma_array,  # noqa: F401
                          erfinv_array, lgamma_array, polygamma_array)
from .elementwise import (BINARY_CROSS_ENTROPY,  # noqa: F401
                          binary_cross_entropy_array)
from .elementwise import (I0, I0E, I1, I1E, i0_array, i0e_array, i1_array,  # noqa: F401
                          i1e_array)
from .activation import (CELU, CELU_RESULT, ELU, ELU_RESULT, GELU, GELU_TANH,  # noqa: F401
                         HARDSHRINK, HARDSIGMOID, HARDSWISH, HARDTANH, LEAKY_RELU,
                         LEAKY_RELU_RESULT, LOG_SIGMOID, MISH, SILU, SINC, SOFTSHRINK)
from .reduce import (AMAX, AMIN, LOG_SOFTMAX, LOGSUMEXP, MAX, MAX_DIM, MEAN,  # noqa: F401
                     MEAN_DIM, MIN, MIN_DIM, NORM, PROD, PROD_DIM, REDUCTIONS, SOFTMAX, STD,
                     SUM, SUM_DIM, VAR)
from .linalg import MATMUL, gemm, value_at  # noqa: F401
from .linalg import (FACTORISATIONS, LINALG_CHOLESKY, LINALG_CROSS, LINALG_DET,  # noqa: F401
                     LINALG_EIGH, LINALG_INV, LINALG_QR, LINALG_SLOGDET, LINALG_SOLVE,
                     LINALG_SVD, qr_refusal)
from .linalg import (LINALG_LSTSQ, LINALG_MATRIX_EXP, LINALG_PINV,  # noqa: F401
                     LINALG_SOLVE_TRIANGULAR, expm_plain, float_bits)
from .structure import (BCAST, CAT, CMP, CONST, EXPAND_S, EXTERN, GATHER, GUARD,  # noqa: F401
                        LEAF, MANY_INPUTS, REPLACE, REPLACE_UNSAVED, RESHAPE, SCATTER,
                        STACK,
                        VALUE_SELECTED, WRITE)
from .scan import (CUMPROD, CUMSUM, LOGCUMSUMEXP, MEDIAN, NANMEDIAN,  # noqa: F401
                   SCANS)
from .custom import CUSTOM  # noqa: F401
from .sweeps import plan  # noqa: F401
from . import custom as _custom
from . import entries as _entries
from . import sweeps as _sweeps
from . import table as _table

# Records that are not grad_fn nodes of their own: values brought onto the tape, hidden
# broadcasts, comparisons and guards.
HIDDEN = frozenset(c for c, i in OPS.items() if i.family == _table.DATA) | {BCAST, EXPAND_S}
# Records that carry no gradient at all.
NO_GRADIENT = frozenset(c for c, i in OPS.items() if i.family == _table.DATA) - {LEAF, EXTERN}


# ---------------------------------------------------------------------------------------------
# The passes, as the rest of tapegrad calls them: the kernels of ``sweeps``, given the entry
# table, and called again once an entry a record needs is compiled (``entries.ensure``).
# ---------------------------------------------------------------------------------------------
def _arguments(kernel, args):
    code = kernel.py_func.__code__
    return dict(zip(code.co_varnames[:code.co_argcount], args))


_per_thread = _threading.local()


def _compiling(kernel, pass_, bound, downward, carries_fresh=False):
    """The pass ``kernel`` as the rest of tapegrad calls it.  When the kernel stops at a
    record r whose entry is not compiled yet, the entry is compiled and the pass goes on
    from r: argument ``bound`` (``hi`` of a pass that runs ``downward``, else ``lo``) moves
    to r, and the backward sweep's ``fresh`` (what of the gradient arena it has cleared so
    far) to what the kernel left in ``resume``."""
    table = _entries.TABLE
    missing = _entries.MISSING
    pending = _custom.PENDING[pass_]
    fresh_at = bound + 2   # sweep(..., hi, lo, fresh)

    def passes(args, custom):
        if carries_fresh:
            # (the kernel writes it only when it stops; one per thread, as sweeps run
            # without the GIL)
            resume = getattr(_per_thread, "resume", None)
            if resume is None:
                resume = _per_thread.resume = _np.zeros(1, _np.int64)
        while True:
            bad = kernel(*args, table, resume) if carries_fresh else kernel(*args, table)
            if custom and _custom.FAULT[0]:
                _custom.raise_fault(_arguments(kernel, args))
            if bad > missing:
                return bad
            r = missing - bad
            if _entries.compile_many is not None:
                # (a second process helps: every op on the tape at once)
                named = _arguments(kernel, args)
                _entries.compile_many(pass_, missing_entries(
                    pass_, named["op"], named["size"], kernel is not _sweeps.sweep_vectors))
            _entries.ensure(pass_, int(args[0][r]))
            args = list(args)
            args[bound] = r + 1 if downward else r
            if carries_fresh:
                args[fresh_at] = int(resume[0])

    def run(*args):
        if not _custom.NAMES:
            return passes(args, False)
        # custom ops report a failing kernel in one cell (custom.FAULT): one pass at a time
        # while any exist, so that each pass reads its own report
        with _custom.LOCK:
            if pending:
                _custom.compile_pending(pass_)
            return passes(args, True)
    run.__name__ = kernel.__name__
    run.__doc__ = kernel.__doc__
    run.kernel = kernel
    return run


# (the argument each pass resumes at: sweep's hi, forward's lo, tangent's lo, curvature's hi)
sweep = _compiling(_sweeps.sweep, _entries.BACKWARD, 14, True, carries_fresh=True)
sweep_vectors = _compiling(_sweeps.sweep_vectors, _entries.BACKWARD, 14, True,
                           carries_fresh=True)
forward = _compiling(_sweeps.forward, _entries.FORWARD, 11, False)
tangent = _compiling(_sweeps.tangent, _entries.TANGENT, 14, False)
curvature = _compiling(_sweeps.curvature, _entries.CURVATURE, 16, True)


BACKWARD_PASS = _entries.BACKWARD


def entry_table():
    """The table of entry addresses the passes take (``entries.TABLE``)."""
    return _entries.TABLE


def sweeps_one_element(op, size):
    """How many records of the columns ``op``, ``size`` hold one value of a hot op: those
    ``sweep`` runs through its inlined chains."""
    return int(_np.count_nonzero(_sweeps._ONE[_np.clip(op, 0, _sweeps._ONE.size - 1)]
                                 & (size == 1)))


def missing_entries(pass_, op, size, chains):
    """The opcodes whose entries for pass ``pass_`` a pass over a tape with columns ``op``
    and ``size`` may call and that are not compiled yet: every op on it but data records,
    and but a hot op all of whose records hold one value where the pass runs the
    one-element ``chains`` (all but ``sweep_vectors``).  (Records a backward will not need
    are counted too: this may be asked before ``plan`` has run.)"""
    table = _entries.TABLE[pass_]
    codes = []
    for code in _np.unique(op).tolist():
        if code not in OPS or _sweeps._NO_RULE[code] or table[code]:
            continue
        if chains and _sweeps._ONE[code] and bool((size[op == code] == 1).all()):
            continue
        codes.append(code)
    return codes


def _batched(kernel):
    def run(op, *args):
        # every entry the tape may need, first: a batch has no way back out to compile one
        _entries.ensure_codes(_entries.FORWARD, op)
        _entries.ensure_codes(_entries.BACKWARD, op)
        if not _custom.NAMES:
            return kernel(op, *args, _entries.TABLE)
        with _custom.LOCK:   # (see _compiling)
            _custom.compile_pending(_entries.FORWARD)
            _custom.compile_pending(_entries.BACKWARD)
            result = kernel(op, *args, _entries.TABLE)
            if _custom.FAULT[0]:
                _custom.raise_fault(_arguments(kernel, (op,) + args))
            return result
    run.__name__ = kernel.__name__
    run.__doc__ = kernel.__doc__
    run.kernel = kernel
    return run


batch_replay = _batched(_sweeps.batch_replay)
batch_replay_parallel = _batched(_sweeps.batch_replay_parallel)
