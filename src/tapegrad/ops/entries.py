"""Each op's whole-record rules as C entry points, compiled the first time a tape uses them.

numba compiles a function together with every function it calls.  A sweep that called every
op's rule directly took half a minute to compile on a fresh machine, for a program that uses
three ops.  So the sweeps call whole-record rules through a table of addresses instead
(``TABLE[pass, opcode]``), and an op's entry for a pass is compiled -- or loaded from
numba's disk cache -- when a tape first holds a record of it.  A record of one value of a hot op (everyday
arithmetic) takes the scalar rules inlined into the sweeps themselves (``dispatch.py``), no
call at all.

An entry has one C signature for every pass,
``int64 entry(int64 r, int64 context, float64 x, float64 y, int64 b, int64 flags)``:
``context`` is the address of an int64 array holding the address and length of every
record column and arena (the slots below), which the entry views again as arrays; ``x``/
``y`` are the backward's betas, ``b`` the tangent arena offset of a seed, ``flags`` the
tangent's input-dependence bits.
"""
import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.core.ccallback import CFunc
from numba.extending import intrinsic

from .. import _config
from .._config import inline
from . import table as T
from .memory import view_f64, view_i64, view_u8  # noqa: F401  (generated entries use them)

# the passes, rows of TABLE
BACKWARD, FORWARD, TANGENT, CURVATURE = range(4)
PASSES = ("backward", "forward", "tangent", "curvature")

# context slots: (address, length) pairs
(OP, A0, A1, VOFF, GOFF, SIZE, IP, FP, AUX, FAUX, VALS, EXT, GRADS, NEED, TANS, DEP,
 DG) = range(17)
CONTEXT = 2 * 17

# TABLE[pass, code]: an entry's address; 0 not compiled yet; -1 the op has no rule for the
# pass (the sweeps report such a record as unsupported)
# (room for every opcode: modules imported after this one declare ops too)
TABLE = np.zeros((len(PASSES), T.MAX_OPCODES), dtype=np.int64)
# a status the kernels return, minus the record, when a record's entry is not compiled yet
MISSING = -(1 << 40)

_SIGNATURE = types.int64(types.int64, types.int64, types.float64, types.float64, types.int64,
                         types.int64)


# --- calling an address, and viewing memory by address (inside compiled code) ----------------
@intrinsic
def _call_address(typingctx, address, r, context, x, y, b, flags):
    """Call the entry at ``address`` (an int64) with the entry signature."""
    sig = types.int64(types.int64, types.int64, types.int64, types.float64, types.float64,
                      types.int64, types.int64)

    def codegen(context_, builder, signature, args):
        i64, f64 = ir.IntType(64), ir.DoubleType()
        fnty = ir.FunctionType(i64, [i64, i64, f64, f64, i64, i64])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(fn, args[1:])
    return sig, codegen


@inline
def call(entry, r, context, x, y, b, flags):
    """Call ``entry`` (an address from TABLE) for record r with the context array itself:
    passing the array, not its address, keeps it alive until the last call (numba frees an
    array after its last use, and an entry reading a freed context reads garbage)."""
    return _call_address(entry, r, context.ctypes.data, x, y, b, flags)


@inline
def put(c, slot, arr):
    """Record ``arr``'s address and length in context slot ``slot`` (inside a kernel)."""
    c[2 * slot] = arr.ctypes.data
    c[2 * slot + 1] = arr.size


@inline
def with_arenas(template, vals, ext, grads):
    """A copy of the context ``template`` (a program's record columns, ``codegen.Program``)
    with the arenas of this call in its slots.  A copy per call: two threads may run one
    program at once, each with its own arenas."""
    c = template.copy()
    c[2 * VALS] = vals.ctypes.data
    c[2 * VALS + 1] = vals.size
    c[2 * EXT] = ext.ctypes.data
    c[2 * EXT + 1] = ext.size
    c[2 * GRADS] = grads.ctypes.data
    c[2 * GRADS + 1] = grads.size
    return c


# --- compiling entries on first use ----------------------------------------------------------
_compiled = {}   # (pass, code) -> CFunc, kept alive: TABLE holds their addresses


def ensure(pass_, code):
    """Fill TABLE[pass_, code]: compile (or load from the cache) the op's entry."""
    if TABLE[pass_, code] != 0:
        return
    from .dispatch import entries_module   # the generated entries, written from the table
    fn = getattr(entries_module(), f"{PASSES[pass_]}_{code}", None)
    if fn is None:
        TABLE[pass_, code] = -1
        return
    entry = CFunc(fn, (_SIGNATURE.args, _SIGNATURE.return_type), locals={},
                  options=dict(nopython=True, error_model="numpy"))
    entry._cache = _config.cache_for(fn)
    _config.report_compile(lambda: entry.compile(), f"{T.OPS[code].name} ({PASSES[pass_]})")
    _compiled[pass_, code] = entry
    TABLE[pass_, code] = entry.address


# ``compile_many(pass_, codes)``, set while a second process helps compile (see
# tapegrad/_compile_helper.py): compiles the entries of several opcodes at once, sharing
# them out.  Called before they are needed one by one, and must not raise for an op whose
# entry fails to compile (``ensure`` then compiles it here, and raises).
compile_many = None


def ensure_codes(pass_, codes):
    """``ensure`` for every opcode in ``codes`` (an array of opcodes; unknown ones are left
    for the kernels to report)."""
    known = [c for c in np.unique(np.asarray(codes)).tolist()
             if 0 <= c < TABLE.shape[1] and c in T.OPS]
    if compile_many is not None:
        compile_many(pass_, [c for c in known if TABLE[pass_, c] == 0])
    for code in known:
        ensure(pass_, code)
