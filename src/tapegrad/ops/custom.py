"""Custom ops: the user's ``@njit`` kernels as one opcode of the table, called from inside the
compiled passes with no Python per record.

One opcode, ``CUSTOM``, stands for every custom op.  Its record reads, from ``aux``, the
address of the op's *slots*: an int64 array holding the addresses of C wrappers around the
user's kernels, one per pass (``FORWARD``, ``VJP``, ``JVP``, ``CURVATURE``; 0 where the user
gave none), and the address of ``FAULT``.  The rules below lay the record's arrays out in a
*frame* (address and length of each) and call the wrapper through its address; the wrapper
views the frame again as arrays and calls the user's kernel.  So adding a custom op compiles
only its small wrappers (about half a second each, when a pass first needs one); the sweeps
and this opcode's entries are compiled once, and cached, whatever ops users add.

A kernel cannot raise through a C call.  A wrapper catches the exception and returns 1; the
rule then writes ``FAULT`` (what went wrong, in which record and pass) and the caller
(``ops.__init__``) raises after the pass.  A pass that reaches a record whose op has no
kernel for it writes ``FAULT`` the same way.

Record layout: ``a0``/``a1`` the inputs (flat float64, any sizes), the output of ``size[r]``
values; ``aux[ip:]`` = id (the registry key, also the ``variants`` key that names the
grad_fn), slots address, number of parameters, their offset in ``faux``, the kernels'
digest, the name's length and its code points (a tape file is relinked by name and digest
when it is loaded: addresses do not survive a process).
"""
import threading

import numba
import numpy as np

from .. import _config
from .._config import inline, rule
from . import entries as E
from .entries import view_f64, view_i64
from .table import ARRAY, READS_OUT, READS_X0, READS_X1, constants, declare

# the slots of an op: wrapper addresses by pass (numbered as the entries' passes), then
# FAULT's address
VJP, FORWARD, JVP, CURVATURE = E.BACKWARD, E.FORWARD, E.TANGENT, E.CURVATURE
FAULT_AT = 4
N_SLOTS = 5
KIND_NAMES = ("vjp", "forward", "jvp", "curvature")

# FAULT[0]: 0 none, 1 a kernel raised, 2 a pass needed a kernel the op lacks;
# FAULT[1] the record, FAULT[2] the kind (FORWARD...), FAULT[3] the op's id
FAULT = np.zeros(4, dtype=np.int64)
RAISED, LACKING = 1, 2
# held by every pass while custom ops exist (ops.__init__): FAULT is one cell for the process
LOCK = threading.RLock()

# the frame: (address, length) of each array a kernel may take, in these slots
X0, X1, OUT, G, T0, T1, TOUT, H0, H1, P = range(10)
FRAME = 2 * 10

# aux fields after ip
A_ID, A_SLOTS, A_NPARAMS, A_PARAMS, A_DIGEST, A_NAME = range(6)


@numba.extending.intrinsic
def _call_wrapper(typingctx, address, frame):
    """Call the wrapper at ``address``: ``int64 wrapper(int64 frame)``."""
    from llvmlite import ir
    from numba.core import types
    sig = types.int64(types.int64, types.int64)

    def codegen(context_, builder, signature, args):
        i64 = ir.IntType(64)
        fn = builder.inttoptr(args[0], ir.FunctionType(i64, [i64]).as_pointer())
        return builder.call(fn, [args[1]])
    return sig, codegen


# Scratch on the stack of the rule that asks for it: a record of a few values would otherwise
# spend most of its time allocating its frame and gradient scratch on the heap (and a
# batch replay runs records on several threads at once, so no shared buffer would do).
SCRATCH = 64


def _stack_intrinsic(llvm_type, numba_type, count):
    @numba.extending.intrinsic
    def stack(typingctx):
        from numba.core import cgutils, types

        def codegen(context_, builder, signature, args):
            # alloca_once: in the entry block, once per call of the function it lands in
            return cgutils.alloca_once(builder, llvm_type, size=count)
        return types.CPointer(numba_type)(), codegen
    return stack


def _make_stacks():
    from llvmlite import ir
    from numba.core import types
    return (_stack_intrinsic(ir.IntType(64), types.int64, FRAME),
            _stack_intrinsic(ir.DoubleType(), types.float64, SCRATCH))


_stack_frame, _stack_scratch = _make_stacks()


@inline
def _scratch(n0, n1):
    """Two zeroed arrays of n0 and n1 values: on the stack when they fit."""
    if n0 + n1 <= SCRATCH:
        both = numba.carray(_stack_scratch(), SCRATCH)
    else:
        both = np.empty(n0 + n1)
    both[:n0 + n1] = 0.0
    return both[:n0], both[n0:n0 + n1]


@inline
def _slots(r, ip, aux):
    return view_i64(aux[ip[r] + A_SLOTS], N_SLOTS)


@inline
def _fault(slots, status, r, kind, ident):
    fault = view_i64(slots[FAULT_AT], 4)
    if fault[0] == 0:
        fault[0], fault[1], fault[2], fault[3] = status, r, kind, ident


@inline
def _put(frame, slot, address, n):
    frame[2 * slot] = address
    frame[2 * slot + 1] = n


@inline
def _frame(r, a0, a1, voff, size, ip, aux, faux, vals):
    """A frame with the inputs, the output and the parameters in place."""
    frame = numba.carray(_stack_frame(), FRAME)
    frame[:] = 0
    base = vals.ctypes.data
    _put(frame, X0, base + 8 * voff[a0[r]], size[a0[r]])
    if a1[r] >= 0:
        _put(frame, X1, base + 8 * voff[a1[r]], size[a1[r]])
    _put(frame, OUT, base + 8 * voff[r], size[r])
    k = ip[r]
    _put(frame, P, faux.ctypes.data + 8 * aux[k + A_PARAMS], aux[k + A_NPARAMS])
    return frame


@inline
def _run(slots, kind, r, ip, aux, frame):
    """Call the op's wrapper for ``kind``; False (and FAULT written) where it has none or
    its kernel raised."""
    address = slots[kind]
    if address == 0:
        _fault(slots, LACKING, r, kind, aux[ip[r] + A_ID])
        return False
    if _call_wrapper(address, frame.ctypes.data) != 0:
        _fault(slots, RAISED, r, kind, aux[ip[r] + A_ID])
        return False
    return True


# --- the rules: the record's arrays into a frame, the user's kernel, its results back --------
@rule
def custom_fwd(r, a0, a1, voff, size, ip, fp, aux, faux, vals, ext):
    frame = _frame(r, a0, a1, voff, size, ip, aux, faux, vals)
    _run(_slots(r, ip, aux), FORWARD, r, ip, aux, frame)


@inline
def _add(target, goff, need, s, h):
    if need[s]:
        o = goff[s]
        for i in range(h.size):
            target[o + i] += h[i]


@inline
def _run_into(kind, r, a0, a1, goff, size, ip, aux, need, frame, target):
    """Run ``kind``'s kernel, whose outputs are shaped as the inputs (gx, gy), on zeroed
    scratch, then add them to the inputs' rows of ``target`` (the gradient arena, or a row of
    curvature terms): a kernel that assigns (gx[i] = ...) is right even where an input feeds
    several records."""
    n0 = size[a0[r]]
    n1 = size[a1[r]] if a1[r] >= 0 else 0
    h0, h1 = _scratch(n0, n1)
    _put(frame, H0, h0.ctypes.data, n0)
    _put(frame, H1, h1.ctypes.data, n1)
    if not _run(_slots(r, ip, aux), kind, r, ip, aux, frame):
        return
    _add(target, goff, need, a0[r], h0)
    if a1[r] >= 0:
        _add(target, goff, need, a1[r], h1)


@rule
def custom_bwd(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, beta0,
               beta1):
    frame = _frame(r, a0, a1, voff, size, ip, aux, faux, vals)
    _put(frame, G, grads.ctypes.data + 8 * goff[r], size[r])
    _run_into(VJP, r, a0, a1, goff, size, ip, aux, need, frame, grads)


@rule
def custom_tan(r, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep):
    frame = _frame(r, a0, a1, voff, size, ip, aux, faux, vals)
    n0 = size[a0[r]]
    n1 = size[a1[r]] if a1[r] >= 0 else 0
    # an input that depends on no seed has a zero tangent (its arena slot may hold another
    # seed's leftovers: it is not read)
    z0, z1 = _scratch(0 if d0 else n0, 0 if d1 or a1[r] < 0 else n1)
    base = tans.ctypes.data
    _put(frame, T0, base + 8 * (b + voff[a0[r]]) if d0 else z0.ctypes.data, n0)
    if a1[r] >= 0:
        _put(frame, T1, base + 8 * (b + voff[a1[r]]) if d1 else z1.ctypes.data, n1)
    tout = b + voff[r]
    for i in range(size[r]):
        tans[tout + i] = 0.0
    _put(frame, TOUT, base + 8 * tout, size[r])
    _run(_slots(r, ip, aux), JVP, r, ip, aux, frame)
    if z0.size < 0 or z1.size < 0:
        return   # (a use after the call: numba keeps heap scratch alive until its last use)


@rule
def custom_curv(r, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, tans, b, dg,
                need):
    # the second-order term: d/de [J(x + e t)^T g] at e = 0, added to the inputs' rows
    frame = _frame(r, a0, a1, voff, size, ip, aux, faux, vals)
    _put(frame, G, grads.ctypes.data + 8 * goff[r], size[r])
    base = tans.ctypes.data
    _put(frame, T0, base + 8 * (b + voff[a0[r]]), size[a0[r]])
    if a1[r] >= 0:
        _put(frame, T1, base + 8 * (b + voff[a1[r]]), size[a1[r]])
    _run_into(CURVATURE, r, a0, a1, goff, size, ip, aux, need, frame, dg)


def custom_graph(F, g, x0, x1, out, c):
    tape, r = out._tape, out._r
    name = name_of(tape.aux, int(tape.ip[r]))
    raise NotImplementedError(
        f"custom op '{name}': create_graph=True needs a differentiable backward, and a "
        "custom op's vjp is a compiled kernel; for second derivatives use tapegrad.hessian "
        "or tapegrad.hvp, which use its curvature kernel")


def _check_custom(a, r, fail):
    if a.a1[r] != -1:
        a.record(a.a1[r], r, "second input")
    ip = a.ip[r]
    a.aux_span(r, ip, A_NAME + 1)
    n_params, p_off = int(a.aux[ip + A_NPARAMS]), int(a.aux[ip + A_PARAMS])
    if n_params < 0 or p_off < 0 or p_off + n_params > len(a.faux):
        fail(f"record {r}: custom op parameters out of range")


def name_of(aux, ip):
    """The op's name, read from its record's ``aux``."""
    n = int(aux[ip + A_NAME])
    return "".join(chr(int(c)) for c in aux[ip + A_NAME + 1: ip + A_NAME + 1 + n])


# the names of the ops registered in this process, by id (the grad_fn name of a record)
NAMES = {}

CUSTOM = declare(122, "CustomBackward", family=ARRAY, variants=NAMES,
                 reads=READS_X0 | READS_X1 | READS_OUT, frees=False, check=_check_custom,
                 backward=custom_bwd, forward=custom_fwd, tangent=custom_tan,
                 curvature=custom_curv, graph=custom_graph)

constants(globals())


# ---------------------------------------------------------------------------------------------
# The registry: each op's kernels, their C wrappers (compiled when a pass first needs them)
# ---------------------------------------------------------------------------------------------
# the frame slots each kernel takes, in order, by (kind, arity)
KERNEL_ARGS = {
    (FORWARD, 1): (X0, OUT, P), (FORWARD, 2): (X0, X1, OUT, P),
    (VJP, 1): (X0, OUT, G, H0, P), (VJP, 2): (X0, X1, OUT, G, H0, H1, P),
    (JVP, 1): (X0, T0, OUT, TOUT, P), (JVP, 2): (X0, X1, T0, T1, OUT, TOUT, P),
    (CURVATURE, 1): (X0, T0, OUT, G, H0, P), (CURVATURE, 2): (X0, X1, T0, T1, OUT, G, H0, H1, P),
}
SLOT_NAMES = ("x", "y", "out", "g", "tx", "ty", "tout", "gx", "gy", "p")


class Kernels:
    """One custom op's kernels (numba dispatchers, None where not given), its slots (the
    wrappers' addresses its records read) and its wrappers, kept alive here."""

    def __init__(self, ident, name, arity, kernels, digest, scalar):
        self.ident, self.name, self.arity, self.digest = ident, name, arity, digest
        self.kernels = kernels            # by kind: a dispatcher or None
        # an elementwise op's (value, derivative) on one element, which generated code calls
        # (codegen.py), or None
        self.scalar = scalar
        self.slots = np.zeros(N_SLOTS, dtype=np.int64)
        self.slots[FAULT_AT] = FAULT.ctypes.data
        self.wrappers = {}
        self.broken = {}                  # by kind: why its wrapper did not compile

    def compile(self, kind):
        """Compile the C wrapper of ``kind``'s kernel and put its address in the slots."""
        if self.slots[kind] or self.kernels[kind] is None:
            return
        entry = _wrapper(self.kernels[kind], KERNEL_ARGS[kind, self.arity])
        try:
            _config.report_compile(entry.compile,
                                   f"custom op {self.name} ({KIND_NAMES[kind]})")
        except numba.core.errors.NumbaError as exc:
            raise RuntimeError(f"custom op '{self.name}': numba could not compile its "
                               f"{KIND_NAMES[kind]} kernel for flat float64 arrays:\n{exc}"
                               ) from exc
        self.wrappers[kind] = entry
        self.slots[kind] = entry.address


REGISTRY = {}     # id -> Kernels (kept for as long as the process runs: tapes hold slots)
BY_NAME = {}      # name -> id of the op registered last under that name
# per pass: the ids whose kernel for it is given but not compiled yet
PENDING = ([], [], [], [])


def register(name, arity, kernels, digest, scalar=None):
    """A new op's Kernels (a name registered again points to the new kernels from now on;
    tapes recorded before keep the old ones)."""
    ident = len(REGISTRY) + 1
    k = Kernels(ident, name, arity, kernels, digest, scalar)
    REGISTRY[ident] = k
    BY_NAME[name] = ident
    NAMES[ident] = f"{name}Backward"
    for kind in range(4):
        if kernels[kind] is not None:
            PENDING[kind].append(ident)
    return k


def scalar_rules(ident, digest):
    """Op ``ident``'s (value, derivative) on one element, for a generated module (which names
    the op by id and digest: a module written by another process is checked against this
    process's op of that id)."""
    k = REGISTRY.get(ident)
    if k is None or k.digest != digest or k.scalar is None:
        raise RuntimeError(f"generated code calls custom op {ident} with digest {digest}, "
                           "which this process has not defined")
    return k.scalar


def compile_pending(kind):
    """Compile every registered op's wrapper for pass ``kind`` (called before a pass runs:
    a compiled pass has no way back out to compile one)."""
    pending = PENDING[kind]
    while pending:
        k = REGISTRY[pending.pop()]
        try:
            k.compile(kind)
        except RuntimeError as exc:
            # said where a record of the op needs it (raise_fault), not in passes that
            # never meet the op
            k.broken[kind] = str(exc)


def _wrapper(kernel, slots):
    """A C entry ``int64 wrapper(int64 frame)`` that views the frame's arrays and calls
    ``kernel`` on them; 1 where it raised."""
    from numba.core import types
    from numba.core.ccallback import CFunc
    names = [SLOT_NAMES[s] for s in slots]
    lines = ["def wrapper(frame):", f"    f = _i64(frame, {FRAME})"]
    lines += [f"    {n} = _f64(f[{2 * s}], f[{2 * s + 1}])"
              for n, s in zip(names, slots)]
    lines += ["    try:", f"        _kernel({', '.join(names)})", "    except Exception:",
              "        return 1", "    return 0"]
    namespace = {"_i64": view_i64, "_f64": view_f64, "_kernel": kernel}
    exec("\n".join(lines), namespace)   # noqa: S102 -- source built above from slot names
    return CFunc(namespace["wrapper"], ((types.int64,), types.int64), locals={},
                 options=dict(nopython=True, error_model="numpy"))


def raise_fault(arguments):
    """Raise the error ``FAULT`` holds (and clear it).  ``arguments``: the pass's arguments
    by name, from which the failing record's arrays are rebuilt to call the kernel again from
    Python, where its exception has a type and a message to show."""
    status, r, kind, ident = (int(v) for v in FAULT)
    FAULT[:] = 0
    k = REGISTRY[ident]
    what = f"custom op '{k.name}'"
    if status == LACKING and kind in k.broken:
        raise RuntimeError(k.broken[kind])
    if status == LACKING:
        hint = {JVP: "forward mode (jvp, jacfwd, hessian)",
                CURVATURE: "second derivatives (hessian, hvp)",
                FORWARD: "replay (compile, vmap)", VJP: "backward"}[kind]
        if k.scalar is not None:   # made by elementwise_op: only its second rule is optional
            raise RuntimeError(f"{what} has no second derivative, which {hint} needs: pass "
                               "second_derivative= to tapegrad.elementwise_op")
        raise RuntimeError(f"{what} has no {KIND_NAMES[kind]} kernel, which {hint} needs: "
                           f"pass {KIND_NAMES[kind]}= to tapegrad.custom_op")
    detail = ""
    try:
        _call_again(k, kind, r, arguments)
    except Exception as exc:   # the kernel's own error, now with its message
        raise RuntimeError(f"{what}: its {KIND_NAMES[kind]} kernel raised "
                           f"{type(exc).__name__}: {exc}") from exc
    else:
        detail = " (called again from Python with zero gradients or tangents, it did not)"
    raise RuntimeError(f"{what}: its {KIND_NAMES[kind]} kernel raised an exception inside "
                       f"the compiled pass{detail}")


def _call_again(k, kind, r, a):
    """Call op ``k``'s kernel for ``kind`` on copies of record r's values (zeros where a
    gradient or tangent would go)."""
    # (a batch replay's arenas are its own: its template holds the recorded values)
    vals = a["vals"] if "vals" in a else a["template"]
    voff, size, ip = a["voff"], a["size"], a["ip"]
    aux, faux = a["aux"], a["faux"]
    s0, s1 = int(a["a0"][r]), int(a["a1"][r])
    value = lambda s: np.array(vals[voff[s]:voff[s] + size[s]])  # noqa: E731
    n0, n1, n = int(size[s0]), int(size[s1]) if s1 >= 0 else 0, int(size[r])
    at = int(ip[r])
    p_off, n_p = int(aux[at + A_PARAMS]), int(aux[at + A_NPARAMS])
    arrays = {X0: value(s0), X1: value(s1) if s1 >= 0 else np.zeros(0), OUT: value(r),
              G: np.zeros(n), T0: np.zeros(n0), T1: np.zeros(n1), TOUT: np.zeros(n),
              H0: np.zeros(n0), H1: np.zeros(n1), P: np.array(faux[p_off:p_off + n_p])}
    if kind == FORWARD:
        arrays[OUT] = np.zeros(n)
    k.kernels[kind](*(arrays[s] for s in KERNEL_ARGS[kind, k.arity]))


def relink(a, r, fail):
    """Point custom record r of a tape file (``a``: its records, ``aux`` writable) at the op
    registered now under its name, when its kernels are the ones the tape was saved with."""
    ip = a.ip[r]
    a.aux_span(r, ip, A_NAME + 1)
    n = int(a.aux[ip + A_NAME])
    if n < 0:
        fail(f"record {r}: custom op name out of range")
    a.aux_span(r, ip, A_NAME + 1 + n)
    name = name_of(a.aux, ip)
    ident = BY_NAME.get(name)
    if ident is None:
        fail(f"record {r} is custom op '{name}', which is not defined in this process: "
             "define it with tapegrad.custom_op (the same kernels) before loading")
    k = REGISTRY[ident]
    if int(a.aux[ip + A_DIGEST]) != k.digest:
        fail(f"record {r} is custom op '{name}', saved with other kernels than the ones "
             "defined now under that name")
    if (a.a1[r] != -1) != (k.arity == 2):
        fail(f"record {r}: custom op '{name}' takes {k.arity} inputs")
    a.aux[ip + A_ID] = ident
    a.aux[ip + A_SLOTS] = k.slots.ctypes.data
