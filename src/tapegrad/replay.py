"""Record once, replay compiled: ``tapegrad.compile``.

The first call with a given signature (shapes and dtypes of tensor arguments, values of the
other arguments) runs the function eagerly while a *trace* is active.  The trace records onto
a private tape and turns every place where Python reads a tensor's value (``bool(t)``,
``t.item()``, indexing with a tensor, ...) into a GUARD record holding the value it saw.
Later calls copy the new inputs into the tape's LEAF slots and run the compiled ``forward``
kernel over the records; a guard whose value differs stops the replay, and the call is
recorded afresh (counted in ``stats``), so Python control flow never silently takes the wrong
branch.  The Python state the function reads besides its arguments (closures, globals,
modules' attributes: ``pystate.py``) is kept as it was when the call started and checked
before each replay in the same way.  What a replay cannot reproduce (ops under ``no_grad``,
``detach``, argmax-style integer results, tensors recorded before the call, random numbers,
changes to the state it reads, results other than tensors, numbers and tuples/lists/dicts of
them) makes the signature run eagerly instead.

Tensors -- float, integer and bool -- are traced wherever they sit in the arguments:
positional, keyword, or inside lists, tuples and dicts.  Results come back as eager mode
returns them: a result that
requires no gradient has no grad_fn (and keeps its dtype), an argument or parameter returned
as it is is the caller's own tensor.

Results are ordinary tensors on a tape: ``.backward()`` sweeps it with the same kernel as
eager mode, and gradients reach the arguments and the parameters the function closes over.
"""
import array
import functools
import random
import sys
import threading
from collections import OrderedDict

import numpy as np

from . import _anomaly, _fastcall, _threads, pystate
from ._fastcall import _FLOAT64
from . import ops as K
from .functional import _result
from .inplace import user_site
from . import tape as _tape
from .tape import NO_EXT, Recording, Tape, _tape_ids, aligned_empty, state
from .tensor import Size, Tensor

_TRACE_CAPACITY = 1 << 22   # float64 values; pages are only touched as records fill them


# Records at least this large whose NumPy kernel beats the compiled loop run in NumPy during
# replay: numba's exp/tanh/sin/log are scalar libm calls (tanh of 4096 values: 37 us against
# NumPy's 4 us), and its sum is a sequential loop where NumPy's is pairwise and vectorised.
# Adds, multiplies, relu, matmul and broadcasts are as fast in the kernel (it vectorises them
# and calls the same BLAS), and every extra NumPy call costs a microsecond of Python.
_NUMPY_RECORD = 1024

# Generated code (codegen.py) for tapes of one-element records: a variant gets it once it has
# replayed _GENERATE_AFTER times with at least _GENERATE_MIN records, where the interpreter's
# per-record dispatch is the cost.  Building it costs about a second of numba compile (much
# less once numba's cache holds it), so it is kept for tapes that are replayed again.
_GENERATE_AFTER = 3
_GENERATE_MIN = 64
# A tape of elementwise records over vectors gets generated loops (codegen.generate_vectors)
# once its records hold this many values together: there it is memory traffic the loops save.
_GENERATE_MIN_VALUES = 1024
# Any other tape gets it once it has replayed this often: in a loop that long the Python a
# generated backward saves (``autograd.program_backward``: W8's linear fit at 100 points,
# 90 -> 30 µs a step) pays for its compile (about a second the first time on a machine, 30
# ms from numba's cache after).
_GENERATE_AFTER_SMALL = 32

# An instance's ``partial`` when all its values are there but arguments read in place: what
# reads the arena beyond the generated code copies them in first (_Instance.complete).
_ARGUMENTS_OUTSIDE = ((0, 0),)

_NUMPY_UNARY = {code: info.numpy for code, info in K.OPS.items() if info.numpy is not None}


def forward_plan(cols):
    """How replay runs the forward of a tape: None when the compiled kernel runs all of it,
    else a list of steps in record order, each ``(lo, hi)`` (records lo..hi-1 in the kernel)
    or ``(ufunc, r)`` / ``(None, r)`` (record r through a NumPy ufunc / NumPy's sum)."""
    op, a0, a1, voff, size, ip, fp, aux, faux = cols
    steps, lo = [], 0
    for r in range(len(op)):
        code = int(op[r])
        step = None
        if code in _NUMPY_UNARY and size[r] >= _NUMPY_RECORD:
            step = (_NUMPY_UNARY[code], r)
        elif (code == K.SUM or code == K.MEAN) and size[r] == 1 and aux[ip[r] + 2] == 1 \
                and size[a0[r]] >= _NUMPY_RECORD:
            step = (None, r)
        if step is not None:
            if lo < r:
                steps.append((lo, r))
            steps.append(step)
            lo = r + 1
    if not steps:
        return None
    if lo < len(op):
        steps.append((lo, len(op)))
    return steps


def _forward_steps(cols, vals, ext, steps):
    """``ops.forward`` over the whole tape, run as ``forward_plan`` split it.  Same return
    value as ``ops.forward``."""
    from ._quiet import quiet_begin, quiet_end
    op, a0, a1, voff, size, ip, fp, aux, faux = cols
    tok = quiet_begin()
    try:
        for a, b in steps:
            if type(a) is int:
                bad = K.forward(op, a0, a1, voff, size, ip, fp, aux, faux, vals, ext, a, b)
                if bad != -1:
                    return bad
                continue
            o, n, x = voff[b], size[b], voff[a0[b]]
            if a is not None:
                a(vals[x:x + n], out=vals[o:o + n])
            else:
                total = vals[x:x + size[a0[b]]].sum()
                vals[o] = total * fp[b] if op[b] == K.SUM else total / size[a0[b]]
        return -1
    finally:
        quiet_end(tok)


class _Miss:
    """A replay that could not run: a guard failed (``guard`` is its record) or a parameter
    the function closes over changed shape."""

    __slots__ = ("guard",)

    def __init__(self, guard):
        self.guard = guard


class Trace(Recording):
    """Bookkeeping while a function is being recorded for replay: the recording layers below
    reach it through ``tape.Recording``'s methods only."""

    __slots__ = ("guards", "opaque_reasons", "constants", "untracked", "eager_rg",
                 "float_records", "integer_results")

    def __init__(self, tape):
        self.tape = tape
        self.guards = {}           # GUARD record -> (what was read, where)
        self.opaque_reasons = []
        # tensors read as constants, with their versions: an in-place change of one (a
        # closed-over tensor the function does not differentiate) makes replay record again
        self.constants = []
        # ids of argument proxies whose tensors require no grad: ops that choose their
        # PyTorch node by requires_grad (matmul) must see what eager mode sees
        self.untracked = set()
        self.eager_rg = None   # requires_grad_eagerly's per-record flags, so far
        # records made by converting traced integer or bool arguments to floats (as_float)
        self.float_records = set()
        # (op, where) of ops whose eager result is integers or bools, computed in floats
        self.integer_results = []

    def requires_grad_eagerly(self, t):
        """Whether ``t`` requires grad in eager mode: a traced argument that does not is
        traced as if it did (its proxy requires grad), and so is what is computed from it."""
        if t._tape is None:
            return t._rg and id(t) not in self.untracked
        if t._tape is not self.tape:
            return t._rg
        self.eager_rg = _requires_grad(
            self.tape, lambda leaf: leaf._rg and id(leaf) not in self.untracked, self.eager_rg)
        return bool(self.eager_rg[t._r])

    def is_untracked(self, t):
        return id(t) in self.untracked

    def read_constant(self, x):
        self.constants.append((x, x._version))

    def as_float(self, t, dtype):
        """``t`` (traced integer or bool data) converted to the float ``dtype``.  The tape
        holds such data as floats already; an argument (a leaf) gets a record of its own, so
        that what reads the floats is told from what reads the integers
        (``_integer_misuse``); a recorded value (a comparison's result) keeps its record."""
        from .functional import V_ALIAS, _reshaped
        if t._tape is None:
            t = _reshaped(t, t._value.shape, V_ALIAS)
            self.float_records.add(t._r)
        return _result(t._tape, t._r, t._value.astype(dtype))

    def guard(self, t, kind):
        from .functional import _ref
        tape = self.tape
        r = _ref(tape, t)
        n = t._value.size
        ip = tape.put_faux(np.asarray(t._value, dtype=np.float64).reshape(-1).tolist())
        g = tape.push(K.GUARD, r, -1, tape.voff[r], n, ip)
        self.guards[g] = (kind, user_site())

    def opaque(self, reason):
        self.opaque_reasons.append((reason, user_site()))

    def integer_result(self, what):
        self.integer_results.append((what, user_site()))


# A replay neither keeps the forward stacks anomaly mode shows nor sweeps record by record
_ANOMALY_REASON = ("anomaly detection is on: calls run eagerly, so that each op keeps its "
                   "forward stack and a backward checks each node for nan, as in eager mode",
                   "?")


class Stats:
    """What a compiled function did: calls, replays, (re-)recordings and why."""

    def __init__(self):
        self.calls = 0
        self.replays = 0
        self.records = 0
        self.eager = 0
        self.rerecords = []   # (guard kind, user file:line) of each guard that failed
        self.eager_reasons = []
        self.generated = 0        # tapes turned into generated code (codegen.py)
        self.not_generated = []   # why a hot tape was not

    def as_dict(self):
        return {"calls": self.calls, "replays": self.replays, "records": self.records,
                "eager": self.eager, "rerecords": list(self.rerecords),
                "eager_reasons": list(self.eager_reasons), "generated": self.generated,
                "not_generated": list(self.not_generated)}

    def __repr__(self):
        return (f"Stats(calls={self.calls}, replays={self.replays}, records={self.records}, "
                f"eager={self.eager}, rerecords={len(self.rerecords)}, "
                f"generated={self.generated})")


def _signature(args, kwargs):
    """A hashable key: tensor shapes and dtypes (and whether they require grad), plain values
    as they are."""
    key = []
    for a in args:
        # the common case first, inline: a call's fixed cost is this loop
        if type(a) is Tensor and a._value.dtype.kind == "f":
            key.append(("T", a._value.shape, a._rg))
        else:
            key.append(_arg_key(a))
    if kwargs:
        key.extend((k, _arg_key(v)) for k, v in sorted(kwargs.items()))
    return tuple(key)


def _arg_key(a):
    if isinstance(a, Tensor):
        v = a._value
        if v.dtype.kind == "f":
            return ("T", v.shape, a._rg)
        # integer and bool tensors are data too: traced, their values are not part of the key
        return ("D", v.shape, v.dtype.str)
    if isinstance(a, np.ndarray):
        return ("A", a.shape, a.dtype.str, a.tobytes())
    if isinstance(a, float):
        # by bit pattern: -0.0 is not 0.0 (1/x differs), and a nan equals itself
        return ("F", type(a), float(a).hex())
    if isinstance(a, (list, tuple)):
        return (type(a),) + tuple(_arg_key(x) for x in a)
    if isinstance(a, dict):
        # in insertion order: keys of different types need not be sortable
        return (type(a),) + tuple((k, _arg_key(v)) for k, v in a.items())
    try:
        hash(a)
        return ("V", type(a), a)
    except TypeError:
        return ("id", id(a))


class _Frozen:
    """A tensor the function returned that is not computed from its inputs: each replay
    returns a fresh copy of its value at recording time."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = np.array(value)

    def fresh(self):
        return Tensor._make(self.value.copy())


class _Arg:
    """An argument the function returned as it was: each call returns the caller's tensor."""

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key


_LEAVES, _LEAF_REC = Tape.leaves, Tape.leaf_rec   # the slots the properties below keep


class _Instance(Tape):
    """A replay's tape.  Its arena is sized for one variant: when it dies it is not offered
    to the pool the eager recorder takes arenas from.

    A replay on the fast path (``Variant.replay_args``) keeps the arguments as they came, with
    the versions it read them at; ``leaves`` and ``leaf_rec`` are built from them only when
    something asks, which the usual ``loss.backward()`` (``autograd.program_backward``) does
    not.

    Its arena is ``arena``; the kernels read the arguments ``ext`` names from the arrays in
    ``ext_refs`` instead (see ``Variant.read_in_place``).  ``vals``, what everything else
    reads (double backward, forward mode, in-place checks), copies those in first.
    """

    __slots__ = ("args", "arg_versions", "arg_records", "arena", "partial")

    def __del__(self):
        pass

    @property
    def vals(self):
        if self.partial:
            self.complete()
        if self.ext_refs is not None:
            self.fill_arena()
        return self.arena

    def complete(self):
        """Fill in the values a generated forward left out of the arena (a tape of vectors:
        ``codegen.Program.partial``, the spans they take), by the replay's interpreted
        forward: the same rules and sums, so the same bits; and copy in the arguments it read
        in place.  Anything that reads the arena but the generated backward calls this
        first.  The forward runs on a copy and only those spans are copied back: a value the
        caller holds (an output) may have been written to since."""
        if self.partial:
            if self.ext_refs is not None:
                self.fill_arena()   # (arguments generated loops read in place)
            if not any(hi > lo for lo, hi in self.partial):
                self.partial = False
                return
            cols = self.cached_cols
            arena = self.arena
            scratch = arena.copy()
            steps = forward_plan(cols)    # (its large sums are NumPy's, as the replay's)
            if steps is None:
                K.forward(*cols, scratch, self.ext, 0, len(cols[0]))
            else:
                _forward_steps(cols, scratch, self.ext, steps)
            for lo, hi in self.partial:
                arena[lo:hi] = scratch[lo:hi]
            self.partial = False

    def _bind_args(self):
        leaves, leaf_rec = {}, {}
        for a, version, r in zip(self.args, self.arg_versions, self.arg_records):
            if r >= 0:
                leaves[r] = a
                leaf_rec[id(a)] = (r, version)
        _LEAVES.__set__(self, leaves)
        _LEAF_REC.__set__(self, leaf_rec)
        self.args = None

    def _on_demand(slot):
        """A property reading or setting one of Tape's slots, built from the arguments
        first if a fast replay left them unbound."""
        def get(self):
            if self.args is not None:
                self._bind_args()
            return slot.__get__(self)

        def put(self, value):
            if self.args is not None:
                self._bind_args()
            slot.__set__(self, value)

        return property(get, put)

    leaves = _on_demand(_LEAVES)
    leaf_rec = _on_demand(_LEAF_REC)
    del _on_demand


class _Probe:
    __slots__ = ("arena",)


def _loop_refs(items):
    # counted as Variant._instance counts them: in a loop over the list, the item in a local;
    # the arena is a view (aligned_empty), views of which refer to its base
    for inst in items:
        return _refcount(inst), _refcount(inst.arena.base)


def _unused_probe():
    probe = _Probe()
    probe.arena = aligned_empty(0)
    return [probe]


_refcount = sys.getrefcount
# What Variant._instance counts for an instance that only the variant's list refers to, whose
# arena only the instance refers to.  Measured: what getrefcount adds differs between
# interpreters.
_FREE_INSTANCE, _FREE_VALS = _loop_refs(_unused_probe())


class _PerThread(threading.local):
    """A variant's replay tapes, one list per thread."""

    def __init__(self):
        self.items = []


def _fetch(args, kwargs, key):
    """The argument at ``key``: a positional index, or a path into lists, tuples and dicts
    whose first step is a positional index or a keyword."""
    if type(key) is int:
        return args[key]
    a = kwargs[key[0]] if isinstance(key[0], str) else args[key[0]]
    for k in key[1:]:
        a = a[k]
    return a



class _Files:
    """Tape files (tapefile.py) sit above this module, which they replay; they install their
    writer here when imported (``tapegrad/__init__`` imports them)."""

    save_variant = None
    variant_bytes = None


FILES = _Files()


class Variant:
    """One recorded tape for one signature, and everything needed to replay it."""

    def __init__(self, tape, arg_records, outputs, treedef, guards, plain=None):
        self.template = tape
        self.guards = guards                # GUARD record -> (what was read, where)
        self.arg_records = arg_records      # argument (index or path) -> LEAF record
        args = set(arg_records.values())
        # parameters the function closes over, with the shape and flag they were recorded with
        self.closure = {r: (leaf, leaf._value.shape, leaf._rg)
                        for r, leaf in tape.leaves.items() if r not in args}
        self.outputs = outputs              # list of (record or None, shape, constant value)
        # per output: None, or the dtype of a result that requires no gradient (returned
        # without a grad_fn, as eager mode returns it)
        self.plain = plain if plain is not None else [None] * len(outputs)
        self.treedef = treedef
        self.cols = tuple(np.array(c) for c in tape.columns())
        # Every float argument is traced as a LEAF so that replay recomputes what depends on
        # it; one that requires no gradient (the data X of a training step) is a constant to
        # the backward sweep, as in eager mode.  Left a LEAF, backward planned a gradient for
        # it: on W3 one more 256x256x784 matmul per step, which made replay slower than eager.
        # Only the replay columns change: the template (and saved files) keep the LEAF.
        for r in args:
            leaf = tape.leaves.get(r)
            if leaf is not None and not leaf._rg:
                self.cols[0][r] = K.CONST
        self.top = tape.top
        self.instances = _PerThread()     # each thread's replay tapes (_instance)
        self.plan_cache = {}               # shared by the instances: same records, same plans
        self.constants = []                # (tensor, version) read as constants
        self.state = None                  # the pystate.Snapshot of what Python state it read
        self.steps = forward_plan(self.cols)
        self.n = len(tape)
        # values the records that compute hold together (generated loops pay from about
        # _GENERATE_MIN_VALUES)
        self.values = int(self.cols[4][self.cols[0] > K.EXTERN].sum())
        self.codegen = None        # True: generate at once; False: never; None: when hot
        self.program = None        # the generated codegen.Program, once built
        self.not_generated = None  # why this tape has no generated code (a string)
        self.owner = None          # the Stats of the compiled function, told of generation
        # where arguments and results sit in the arena, as Python ints: replay reads them on
        # every call, and NumPy integers make slicing several times slower
        voff, sizes = self.cols[3], self.cols[4]
        self.read_in_place = _read_in_place(tape, args, outputs)
        # (and whether the value is a single number, stored without slicing, and whether it
        # may be read in place)
        self.arg_slots = [(key, r, int(voff[r]), r in tape.leaves and
                           tape.leaves[r]._value.ndim == 0, r in self.read_in_place)
                          for key, r in arg_records.items()]
        self.out_slots = [(r, shape, const, plain) if r is None else
                          (r, shape, (int(voff[r]), int(voff[r]) + int(sizes[r])), plain)
                          for (r, shape, const), plain in zip(outputs, self.plain)]
        self.replayed = 0
        # the usual result, one tensor computed from the inputs: replay skips the general
        # output handling for it
        self.single_out = None
        if treedef is None and len(self.out_slots) == 1:
            r, shape, where, plain = self.out_slots[0]
            if r is not None and plain is None:
                # a number's view is made by indexing, three times cheaper than reshaping
                self.single_out = ((r, (where[0], ...), None) if shape == () else
                                   (r, slice(where[0], where[1]), shape))
        # per positional argument (shape, requires_grad, arena offset, end or -1 for a
        # number) and its LEAF record (-1: not read); set by use_signature, which also sets
        # replay_args: ``replay`` for such arguments, generated (_fastcall.replayer), or None
        # where it does not apply
        self.arg_spec = self.arg_spec_records = None
        self.replay_args = _no_fast_path

    def use_signature(self, sig):
        """Let ``replay_args`` take calls of ``sig`` when it is float tensors only, passed
        positionally, and the function closes over no parameter."""
        if self.closure or not all(type(k) is int for k in self.arg_records):
            return
        if not all(type(e) is tuple and len(e) == 3 and e[0] == "T" for e in sig):
            return
        slots = {key: (r, off, single, direct)
                 for key, r, off, single, direct in self.arg_slots}
        spec, records = [], []
        for i, (_, shape, rg) in enumerate(sig):
            r, off, single, direct = slots.get(i, (-1, 0, False, False))
            end = -1 if single else off + int(np.prod(shape, dtype=np.int64)) if r >= 0 else 0
            spec.append((shape, rg, off, end, direct))
            records.append(r)
        self.arg_spec, self.arg_spec_records = tuple(spec), tuple(records)
        self._make_fast_path()

    def _make_fast_path(self):
        # made again once the variant has generated code, which it then calls directly
        self.replay_args = _fastcall.replayer(self, self._instance, self._run, self._failed)

    def drop(self):
        """Leave the cache: the generated replay refers back to this variant, a cycle that
        would keep its arenas until the garbage collector's next full pass."""
        self.replay_args = _no_fast_path

    def save(self, target):
        """Write this tape to ``target`` (.npz): a path or a binary file object;
        ``tapegrad.load_tape`` replays it."""
        FILES.save_variant(self, target)

    def to_bytes(self):
        """This tape's ``.npz`` file as bytes, for ``tapegrad.load_tape``."""
        return FILES.variant_bytes(self)

    def stats(self):
        """Records before and after optimisation, arena bytes, op histogram."""
        stats = tape_stats(self.template)
        stats["records_recorded"] = getattr(self, "recorded_records", len(self.template))
        return stats

    def _generate(self, vals):
        """Build the generated program (codegen.py), or note why there is none."""
        from . import codegen
        from .autograd import make_plan
        seeds = plan = None
        recs = [(r, plain) for (r, _, _), plain in zip(self.outputs, self.plain)
                if r is not None]
        if len(recs) == 1 and self.cols[4][recs[0][0]] == 1 and recs[0][1] is None:
            # the backward is generated for the usual call: loss.backward() on the one output
            seeds = (int(recs[0][0]),)
            plan = self.plan_cache.get(seeds)
            if plan is None:
                plan = self.plan_cache[seeds] = make_plan(self.cols, seeds)
        outputs = [r for r, _, _ in self.outputs if r is not None]
        # large arguments generated loops may read where they are (see read_in_place)
        direct = frozenset(r for r in self.arg_records.values() if r >= 0
                           and self.cols[4][r] >= _tape.IN_PLACE_MIN and r not in outputs)
        try:
            self.program = codegen.build(self.cols, vals, seeds, plan, outputs,
                                         _NUMPY_RECORD, direct)
        except codegen.Unsupported as e:
            self.not_generated = str(e)
        prog = self.program
        if prog is not None and prog.direct and prog.forward is not None:
            self._read_arguments_in_place(prog.direct)
        if prog is not None and self.arg_spec is not None:
            if prog.seed is not None:
                from .autograd import _RETAINED, gradient_arena
                prog.arg_backward = _fastcall.backward_for(
                    self.arg_spec, self.arg_spec_records, prog, gradient_arena, _RETAINED,
                    _tape.finish)
            self._make_fast_path()
        if self.owner is not None:
            if self.program is not None:
                self.owner.generated += 1
            else:
                self.owner.not_generated.append(self.not_generated)

    def _read_arguments_in_place(self, records):
        """From now on read argument ``records`` in place (``ext``) instead of copying them
        into the arena: the generated loops read them there."""
        self.read_in_place = self.read_in_place | frozenset(records)
        self.arg_slots = [(key, r, off, single, r in self.read_in_place)
                          for key, r, off, single, _ in self.arg_slots]
        if self.arg_spec is not None:
            self.arg_spec = tuple((shape, rg, off, end, r in self.read_in_place and end > 0)
                                  for (shape, rg, off, end, _), r
                                  in zip(self.arg_spec, self.arg_spec_records))

    def _instance(self):
        """A tape sharing the recorded columns, whose arena no live tensor or view uses."""
        # Each thread takes instances from its own list: between the check below and the
        # binding that makes an instance referenced, another thread could take it too.  A
        # lock shared by the threads closed that gap, but an interrupt (KeyboardInterrupt)
        # between its acquire() and the try left it held, after which every compiled call
        # in every thread blocked (tests/test_compile_threads.py); a with statement cost
        # 0.15 us per call more, the thread's own list 0.1 us less.  Always from the first:
        # a big tape whose results die between calls keeps replaying in one arena, which
        # stays in cache.
        items = self.instances.items
        for inst in items:
            if _refcount(inst) <= _FREE_INSTANCE and _refcount(inst.arena.base) <= _FREE_VALS:
                _reset(inst)
                if inst.ext is NO_EXT and self.read_in_place:
                    # (made before its generated loops began to read arguments in place)
                    inst.ext = np.zeros(self.n, dtype=np.int64)
                return inst
        inst = _Instance.__new__(_Instance)
        tpl = self.template
        for name in ("op", "a0", "a1", "voff", "size", "ip", "fp", "aux", "faux", "appenders"):
            setattr(inst, name, getattr(tpl, name))
        inst.arena = aligned_empty(self.top)
        inst.arena[:] = tpl.vals[:self.top]
        inst.partial = False
        inst.ext = np.zeros(self.n, dtype=np.int64) if self.read_in_place else NO_EXT
        inst.ext_refs = None
        # (the template's constants are in its arena, their versions guarded by the call)
        inst.consts = list(tpl.consts)
        inst.unfilled = None
        inst.cap = inst.top = self.top
        inst.externs, inst.older = {}, {}
        inst.first_extern, inst.dep_of, inst.dep_sets = -1, None, None
        inst.extern_rec = {}
        inst.storage_of = {}
        inst.plan_cache = self.plan_cache
        inst.program = None
        inst.nodes, inst.inplace, inst.hooks = {}, [], {}
        inst.version_base = inst.leaf_versions = None
        inst.custom, inst.custom_out = {}, {}   # (a traced Function runs eagerly instead)
        inst.refused = tpl.refused
        inst.views = tpl.views
        inst.composites = tpl.composites
        inst.inner_nodes = tpl.inner_nodes
        inst.arguments_are_leaves = True
        _reset(inst)
        if len(items) < 4:
            items.append(inst)
        return inst

    def replay(self, args, kwargs=None):
        """Run the recorded forward for new arguments; a _Miss when it cannot."""
        if self.state is not None:
            changed = self.state.check()
            if changed is not None:
                return _Miss(self.state.describe(changed))
        if self.closure:
            for r, (leaf, shape, rg) in self.closure.items():
                if leaf._value.shape != shape or leaf._rg != rg:
                    return _Miss(None)
        if self.constants:
            for t, version in self.constants:
                if t._version != version:
                    return _Miss("a tensor used as a constant was changed in place")
        inst = self._instance()
        vals = inst.arena
        leaves = {}
        # the versions the values were read at: backward refuses leaves changed in place
        # since, as in eager mode
        leaf_rec = {}
        refs = []
        for key, r, off, single, direct in self.arg_slots:
            a = args[key] if type(key) is int else _fetch(args, kwargs, key)
            v = a._value
            if single:
                vals[off] = v
            elif direct and v.dtype is _FLOAT64 and v.flags.c_contiguous:
                inst.ext[r] = v.__array_interface__["data"][0]
                refs.append((r, v))
            else:
                vals[off:off + v.size] = v.reshape(-1)
            leaves[r] = a
            leaf_rec[id(a)] = (r, a._version)
        inst.ext_refs = refs or None
        if self.closure:
            voff = self.cols[3]
            for r, (leaf, _, _) in self.closure.items():
                v = leaf._value
                vals[voff[r]:voff[r] + v.size] = v.reshape(-1)
                leaves[r] = leaf
                leaf_rec[id(leaf)] = (r, leaf._version)
        inst.leaves = leaves
        inst.leaf_rec = leaf_rec
        return self._run(inst, args, kwargs)

    def _run(self, inst, args, kwargs):
        vals = inst.arena
        prog = self.program
        if prog is None and self.not_generated is None and self.codegen is not False:
            self.replayed += 1
            if self.codegen or self.replayed >= _GENERATE_AFTER_SMALL or (
                    self.replayed >= _GENERATE_AFTER and (
                        self.n >= _GENERATE_MIN or self.values >= _GENERATE_MIN_VALUES)):
                self._generate(vals)
                prog = self.program
        if prog is not None:
            inst.program = prog if prog.plan is not None else None
        if prog is not None and prog.forward is not None:
            bad = prog.forward(vals, inst.ext, *prog.forward_params)
            inst.partial = prog.partial if inst.ext_refs is None else (
                prog.partial or _ARGUMENTS_OUTSIDE)
        elif self.steps is not None:
            bad = _forward_steps(self.cols, vals, inst.ext, self.steps)
        else:
            op, a0, a1, voff, size, ip, fp, aux, faux = self.cols
            bad = K.forward(op, a0, a1, voff, size, ip, fp, aux, faux, vals, inst.ext, 0,
                            self.n)
        if bad != -1:
            return self._failed(bad)
        inst.cached_cols = self.cols
        if self.single_out is not None:
            r, where, shape = self.single_out
            view = vals[where]
            return _result(inst, r, view if shape is None else view.reshape(shape))
        outs = []
        for r, shape, where, plain in self.out_slots:
            if r is None:
                const = where
                if type(const) is _Frozen:
                    const = const.fresh()
                elif type(const) is _Arg:
                    const = args[const.key] if type(const.key) is int else _fetch(
                        args, kwargs, const.key)
                outs.append(const)
                continue
            view = vals[where[0]:where[1]].reshape(shape)
            if plain is None:
                outs.append(_result(inst, r, view))
            else:
                outs.append(Tensor._make(view.astype(plain)))
        return _unflatten(self.treedef, outs)

    def _failed(self, bad):
        """What a forward that returned ``bad`` (not -1) means: a failed guard's record."""
        if bad >= 0:
            return _Miss(int(bad))
        raise RuntimeError(
            f"internal error: opcode {self.cols[0][-2 - bad]} has no forward rule")


def _no_fast_path(args):
    return None


class _EagerWhile:
    """In a signature's list of variants: calls made while the Python state is as ``state``
    (a pystate.Snapshot) holds it run eagerly -- a recording in that state found a reason to
    (dropout in training mode) -- while in another state the other variants are tried."""

    __slots__ = ("state",)

    def __init__(self, state):
        self.state = state

    def drop(self):
        pass


def _reset(inst):
    # a fresh id keeps "a tape only references older tapes", which backward relies on
    inst.id = next(_tape_ids)
    inst.finished = True
    inst.freed = None
    inst.args = None
    # an empty container is kept: nothing refers to it but this instance
    if inst.nodes:
        inst.nodes = {}
    if inst.inplace:
        inst.inplace = []
    if inst.hooks:
        inst.hooks = {}
    inst.cached_cols = None
    inst.partial = False
    if inst.ext_refs is not None:
        inst.ext[:] = 0
        inst.ext_refs = None


# Values a function may return that replay hands back unchanged: they cannot hold tensors,
# and guards pin anything read from tensor values into them (``t.item()``, ``t.tolist()``).
_SCALARS = (type(None), bool, int, float, complex, str, bytes, np.generic)


def _is_sequence(out):
    """Lists, tuples and named tuples (and ``Size``), which outputs and arguments are
    looked into."""
    t = type(out)
    return t is tuple or t is list or (isinstance(out, tuple) and (
        hasattr(t, "_fields") or t is Size))


def _flatten(out):
    """The leaves of nested tuples, lists and dicts, and how to put them back together."""
    if _is_sequence(out):
        leaves, defs = [], []
        for o in out:
            lv, d = _flatten(o)
            leaves.extend(lv)
            defs.append((d, len(lv)))
        return leaves, (type(out), defs)
    if type(out) is dict:
        leaves, defs = [], []
        for o in out.values():
            lv, d = _flatten(o)
            leaves.extend(lv)
            defs.append((d, len(lv)))
        return leaves, (dict, defs, tuple(out))
    return [out], None


def _unflatten(treedef, leaves):
    if treedef is None:
        return leaves[0]
    kind, defs = treedef[0], treedef[1]
    out, i = [], 0
    for d, n in defs:
        out.append(_unflatten(d, leaves[i:i + n]))
        i += n
    if kind is dict:
        return dict(zip(treedef[2], out))
    if hasattr(kind, "_fields"):
        return kind(*out)
    return kind(out)


_HISTORY_REASON = ("an argument has a history (it was computed from tensors that require "
                   "grad): those calls run eagerly, so that its gradient reaches them")


def _has_history(a):
    """Whether a recorded tensor is among ``a`` (also inside lists, tuples and dicts)."""
    if isinstance(a, Tensor):
        return a._tape is not None
    if _is_sequence(a):
        return any([_has_history(x) for x in a])
    if type(a) is dict:
        return any([_has_history(x) for x in a.values()])
    return False


def _traced_inputs(a, path, found):
    """``a`` with each float tensor in it (also inside lists, tuples and dicts) replaced by a
    proxy that records as a LEAF; ``found`` collects (path, proxy, tensor)."""
    if isinstance(a, Tensor):
        # every tensor argument is traced, even one that needs no gradient (data, integer
        # labels, bool masks): what is computed from it must be recomputed on replay, and
        # what Python reads of it is guarded
        p = Tensor._make(a._value, True)
        found.append((path, p, a))
        if not a._rg and state.trace is not None:
            state.trace.untracked.add(id(p))
        return p
    if _is_sequence(a) or type(a) is dict:
        n = len(found)
        if type(a) is dict:
            items = {k: _traced_inputs(v, path + (k,), found) for k, v in a.items()}
        else:
            items = [_traced_inputs(v, path + (j,), found) for j, v in enumerate(a)]
        if len(found) == n:
            return a   # no tensor inside: the caller's own object
        if type(a) is dict:
            return items
        return type(a)(*items) if hasattr(type(a), "_fields") else type(a)(items)
    if isinstance(a, (list, tuple, dict)) and _holds_tensor(a):
        found.append((path, None, a))   # a container not looked into: it cannot be replayed
    return a


def _holds_tensor(a):
    if isinstance(a, Tensor):
        return True
    if isinstance(a, (list, tuple)):
        return any(_holds_tensor(v) for v in a)
    if isinstance(a, dict):
        return any(_holds_tensor(v) for v in a.values())
    return False


def _input_key(path):
    # a positional argument is its index (the form saved files use); anything else a path
    return path[0] if len(path) == 1 and type(path[0]) is int else path


def _requires_grad(tape, leaf_requires_grad=None, req=None):
    """Per record: whether eager mode's result would require grad (it reaches a leaf that
    requires grad through ops other than comparisons).  ``leaf_requires_grad(leaf)`` tells
    it of a leaf (default: its flag); ``req``, an earlier result for the tape's first
    records, is extended to the rest."""
    op, a0, a1, ip, aux = tape.op, tape.a0, tape.a1, tape.ip, tape.aux
    n = len(op)
    if req is None:
        req = bytearray()
    for r in range(len(req), n):
        code = op[r]
        flag = False
        if code == K.LEAF:
            leaf = tape.leaves[r]
            flag = leaf._rg if leaf_requires_grad is None else leaf_requires_grad(leaf)
        elif code in (K.CONST, K.EXTERN, K.CMP, K.GUARD):
            pass
        elif code in (K.CAT, K.STACK):
            k = aux[ip[r]]
            flag = any(req[aux[ip[r] + 1 + 3 * j]] for j in range(k))
        else:
            # a WHERE's condition (ip) carries no gradient
            flag = (a0[r] >= 0 and req[a0[r]]) or (a1[r] >= 0 and req[a1[r]])
        req.append(bool(flag))
    return req


# How records read traced integer or bool arguments (labels, masks).  The tape holds them as
# floats, and so are the handles of most ops' results while tracing, where eager mode keeps an
# integer dtype: such results would not be eager mode's.  These keep integer data, with eager
# mode's dtype on the handle (functional.py: _reshaped, _gathered, _reduce)...
_INTEGER_DATA = frozenset({K.RESHAPE, K.GATHER, K.BCAST, K.EXPAND_S, K.SUM, K.SUM_DIM, K.MAX,
                           K.MIN, K.AMAX, K.AMIN})
# ... these read it as eager mode does: comparisons (bool results), guards, functions whose
# eager result is a float anyway (true division among them) ...
_INTEGER_READERS = frozenset({K.CMP, K.GUARD, K.EXP, K.LOG, K.LOG1P, K.EXPM1, K.SQRT, K.SIN,
                              K.COS, K.TAN, K.TANH, K.SIGMOID, K.RECIPROCAL, K.DIV_S, K.DIV,
                              K.SOFTMAX, K.LOG_SOFTMAX, K.LOGSUMEXP, K.VAR, K.STD, K.NORM})
# ... and these give a float when their other operand is one.
_WITH_A_FLOAT = frozenset({K.ADD, K.SUB, K.MUL, K.POW, K.MAXIMUM, K.MINIMUM, K.MATMUL, K.WHERE})


def _integer_leaves(tape, proxies):
    """The LEAF records of the integer and bool tensor arguments."""
    found = set()
    for _, p, a in proxies:
        if p is not None and a._value.dtype.kind != "f":
            hit = tape.leaf_rec.get(id(p))
            if hit is not None:
                found.add(hit[0])
    return found


def _integer_misuse(tape, int_leaves, float_records):
    """The first record computed from integer or bool arguments whose eager result would be
    integers too (``labels + 1``, ``-mask``, ``cat([labels, labels])``), or None.  While
    tracing, its handle was a float view of the arena.  Conservative: where a dtype is not
    known (a constant), the record counts."""
    if not int_leaves:
        return None
    op, a0, a1 = tape.op, tape.a0, tape.a1
    data = set(int_leaves)                  # records holding integer data
    floats = bytearray(len(op))             # records eager mode holds as floats
    for r in range(len(op)):
        code = op[r]
        if code == K.LEAF:
            floats[r] = r not in data and tape.leaves[r]._value.dtype.kind == "f"
            continue
        if code == K.EXTERN or r in float_records:
            floats[r] = True
            continue
        if code in (K.CONST, K.CMP, K.GUARD):
            continue
        ins = _inputs_of(tape, r)
        # a where's condition is read as a mask, as eager mode reads it
        values = [s for s in (a0[r], a1[r]) if s >= 0] if code == K.WHERE else ins
        reads = [s for s in values if s in data]
        if not reads:
            floats[r] = any(floats[s] for s in values)
        elif code in _INTEGER_DATA:
            data.add(r)
        elif code in _INTEGER_READERS:
            floats[r] = code != K.CMP and code != K.GUARD
        elif code in _WITH_A_FLOAT and len(reads) < len(values) and all(
                floats[s] for s in values if s not in data):
            floats[r] = True
        else:
            return r
    return None


def _object_arguments(args, kwargs):
    """(value, name) of the arguments the signature keys by identity, not by value: objects
    other than tensors, arrays and plain data (inside lists, tuples and dicts too)."""
    found = []

    def visit(a, name):
        if isinstance(a, (Tensor, np.ndarray)) or pystate.is_plain(a):
            return
        if isinstance(a, (list, tuple)):
            for j, x in enumerate(a):
                visit(x, f"{name}[{j}]")
        elif type(a) is dict:
            for k, x in a.items():
                visit(x, f"{name}[{k!r}]")
        else:
            found.append((a, name))

    for i, a in enumerate(args):
        visit(a, f"argument {i}")
    for k, a in kwargs.items():
        visit(a, f"argument {k}")
    return found


def _random_state():
    """tapegrad's generator and NumPy's global one, to tell whether a call drew numbers
    (Python's ``random`` module is watched by ``_RandomWatch``)."""
    from . import creation
    rng = creation._rng
    legacy = np.random.get_state()
    return rng, rng.fingerprint(), legacy[1].copy(), legacy[2:]


def _same_random_state(before, watch):
    """Whether the recording drew no random numbers."""
    from . import creation
    rng, gen_state, key, rest = before
    if creation._rng is not rng or rng.fingerprint() != gen_state:
        return False
    legacy = np.random.get_state()
    if legacy[2:] != rest or not np.array_equal(legacy[1], key):
        return False
    return watch.drew_nothing()


class _CountingRandom(random.Random):
    """The class of ``random``'s shared generator while a call records.  Every method of
    the generator draws through its two primitives, looked up on the instance, so these
    count the 32-bit words each thread draws, also through a method imported before the
    recording (``from random import randint``)."""

    def random(self):
        with _RandomWatch._lock:
            value = super().random()
            _RandomWatch._drew(2)        # 53 bits from two words
            return value

    def getrandbits(self, k):
        with _RandomWatch._lock:
            value = super().getrandbits(k)
            _RandomWatch._drew(-(-k // 32))
            return value


class _RandomWatch:
    """While a call records: the state of Python's shared ``random`` generator before and
    after, and the words drawn from it by this thread (``here``) and by the others
    (``elsewhere``).  Other threads draw from it all the time (a Dask client's event loop
    jitters its heartbeats, compresses messages at random offsets): a change of state is
    this call's draw unless it is exactly those other draws.  What cannot be counted (a
    draw through ``random.random`` imported before, in any thread) shows as an unexplained
    change: the call then counts as drawing, which is safe (it runs eagerly)."""

    _lock = threading.RLock()
    _active = []            # the watches of the calls recording now, in every thread
    _restore = None         # what the first watch replaced, put back by the last

    def __enter__(self):
        self.here, self.elsewhere = 0, 0
        self.thread = threading.get_ident()
        with _RandomWatch._lock:
            if not _RandomWatch._active:
                _RandomWatch._restore = _RandomWatch._count_draws()
            _RandomWatch._active.append(self)
            self.before = random.getstate()
        return self

    def __exit__(self, *exc):
        with _RandomWatch._lock:
            self.after = random.getstate()
            _RandomWatch._active.remove(self)
            if not _RandomWatch._active:
                _RandomWatch._restore()
        return False

    @staticmethod
    def _count_draws():
        """Make the shared generator count its draws; returns the function that undoes it.
        A generator or module function someone else replaced is left alone (its draws are
        then seen by the state alone)."""
        inst = random._inst
        if type(inst) is not random.Random:
            return lambda: None
        inst.__class__ = _CountingRandom
        # the module's `random` and `getrandbits` are the C primitives bound at import: they
        # would not look the method up on the instance
        replaced = {}
        for name in ("random", "getrandbits"):
            original = getattr(random, name, None)
            if getattr(original, "__self__", None) is inst:
                replaced[name] = original
                setattr(random, name, getattr(inst, name))

        def restore():
            inst.__class__ = random.Random
            for name, original in replaced.items():
                setattr(random, name, original)
        return restore

    @staticmethod
    def _drew(words):
        me = threading.get_ident()
        for watch in _RandomWatch._active:
            if watch.thread == me:
                watch.here += words
            else:
                watch.elsewhere += words

    def drew_nothing(self):
        """Whether this thread drew nothing from the shared generator while watched: it
        drew no counted word, and the state moved exactly by the other threads' words."""
        if self.here:
            return False
        if self.after == self.before:
            return True
        if not self.elsewhere:
            return False
        replayed = random.Random()
        replayed.setstate(self.before)
        replayed.getrandbits(32 * self.elsewhere)    # one word per 32 bits
        return replayed.getstate() == self.after


class Compiled:
    """A function whose recorded tape is replayed in compiled code for new inputs."""

    def __init__(self, fn, max_signatures=32, max_variants=4, codegen=None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.codegen = codegen
        self.max_signatures = max_signatures
        self.max_variants = max_variants
        self._cache = OrderedDict()   # signature -> list of Variants (or the string "eager")
        self._last = None             # the variant the last call replayed, if replay_args can
        self.stats = Stats()

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __del__(self):
        # each variant and its generated replay refer to each other: without this, a dropped
        # compiled function's arenas would wait for the garbage collector
        for variants in getattr(self, "_cache", {}).values():
            if isinstance(variants, list):
                self._drop(variants)

    def __call__(self, *args, **kwargs):
        st = self.stats
        st.calls += 1
        if not state.grad_enabled or state.trace is not None or _anomaly._enabled:
            if _anomaly._enabled and _ANOMALY_REASON not in st.eager_reasons:
                st.eager_reasons.append(_ANOMALY_REASON)
            st.eager += 1
            return self.fn(*args, **kwargs)
        last, missed = self._last, None
        if last is not None and not kwargs:
            # the variant the previous call replayed, most often the one this call needs:
            # its replay_args checks the arguments against its signature while copying them
            res = last.replay_args(args)
            if res is not None:
                if type(res) is not _Miss:
                    st.replays += 1
                    return res
                missed = res    # a guard failed: the loop below takes the other variants
        if _has_history(args) or (kwargs and _has_history(kwargs)):
            # a recording's arguments are its leaves, where its gradients stop: an argument
            # computed from tensors that require grad would keep its gradient from them
            if _HISTORY_REASON not in st.eager_reasons:
                st.eager_reasons.append(_HISTORY_REASON)
            st.eager += 1
            return self.fn(*args, **kwargs)
        sig = _signature(args, kwargs)
        cache = self._cache
        variants = cache.get(sig)
        if type(variants) is str:   # "eager"
            st.eager += 1
            return self.fn(*args, **kwargs)
        if variants:
            if len(cache) > 1:
                cache.move_to_end(sig)
            for v in variants:
                if type(v) is _EagerWhile:
                    if v.state.check() is None:
                        st.eager += 1
                        return self.fn(*args, **kwargs)
                    continue
                if missed is not None and v is last:
                    res = missed
                else:
                    res = None if kwargs else v.replay_args(args)
                    if res is None:
                        res = v.replay(args, kwargs)
                if type(res) is _Miss:
                    if res.guard is None:
                        st.rerecords.append(("a parameter changed shape or requires_grad",
                                             "?"))
                    elif type(res.guard) is str:
                        st.rerecords.append((res.guard, "?"))
                    else:
                        st.rerecords.append(v.guards[res.guard])
                    continue
                st.replays += 1
                if len(variants) > 1 and variants[0] is not v:
                    variants.remove(v)
                    variants.insert(0, v)
                self._last = v if v.arg_spec is not None else None
                return res
        self._last = None
        return self._record(sig, args, kwargs)

    def _record(self, sig, args, kwargs):
        st = self.stats
        st.records += 1
        reasons = []
        try:
            # the Python state the function reads, as the call starts: a replay is valid
            # while it is the same
            snapshot = pystate.capture(self.fn, _object_arguments(args, kwargs))
        except pystate.Unguarded as exc:
            snapshot = None
            reasons.append((f"reads {exc}", "?"))
        capacity = _TRACE_CAPACITY
        while True:
            tape = Tape(capacity)
            trace = Trace(tape)
            prev_tape, prev_trace = state.tape, state.trace
            proxies = []
            random_before = _random_state()
            failure = None
            watch = _RandomWatch()
            try:
                # set inside the try: an interrupt just before it must not leave the trace on
                state.tape, state.trace = tape, trace
                with watch:
                    call_args = [_traced_inputs(a, (i,), proxies) for i, a in enumerate(args)]
                    call_kwargs = {k: _traced_inputs(v, (k,), proxies)
                                   for k, v in kwargs.items()}
                    out = self.fn(*call_args, **call_kwargs)
                ended_on = state.tape
            except Exception as exc:
                failure = exc
            finally:
                state.tape, state.trace = prev_tape, prev_trace
            if failure is not None:
                if not trace.integer_results and _integer_misuse(
                        tape, _integer_leaves(tape, proxies), trace.float_records) is None:
                    raise failure
                # integer arguments became floats in integer arithmetic (see
                # _integer_misuse), which may be what failed: eager mode decides
                return self._eager_after_tracing(sig, args, kwargs, trace)
            if ended_on is tape or tape.finished or capacity >= (1 << 28):
                break
            capacity *= 4   # the trace outgrew its arena: record again with more room
        finished_inside = tape.finished
        tape.finished = True
        # the recorded results are real: gradients go to the caller's tensors
        arg_records = {}
        arg_shapes = {}
        reasons += trace.opaque_reasons
        for path, p, a in proxies:
            if p is None:
                reasons.append(((f"a tensor inside a {type(a).__name__} argument (only "
                                 "lists, tuples, named tuples and dicts are looked into)"), "?"))
                continue
            hit = tape.leaf_rec.get(id(p))
            if hit is not None:
                arg_records[_input_key(path)] = hit[0]
                arg_shapes[_input_key(path)] = a._value.shape
                tape.leaves[hit[0]] = a
                # (its version as the call read it: the backward of this call's results
                # refuses a change in place since, as a replay's does)
                tape.leaf_rec[id(a)] = (hit[0], a._version) + tuple(hit[2:])
        tape.arguments_are_leaves = True
        if not _same_random_state(random_before, watch):
            # a replay would return the same numbers again
            reasons.append(("draws random numbers (rand, randn, dropout, random.random(), "
                            "np.random, ...)", "?"))
        changed_state = False
        if snapshot is not None:
            drew = snapshot.drew_random()
            if drew is not None:
                reasons.append((f"draws random numbers from a {drew} it can see", "?"))
            changed = snapshot.changed()
            advanced = snapshot.advanced_iterator()
            if advanced is not None:
                changed = f"a {advanced} it iterates over"
            changed_state = changed is not None
            if changed is not None:
                # a counter, a cache, a list it appends to: a replay would not change it
                reasons.append((f"changes Python state it reads ({changed} during the call)",
                                "?"))
        if finished_inside or ended_on is not tape:
            reasons.append(("backward() or a tape larger than the trace arena inside the call",
                            "?"))
        if tape.externs:
            reasons.append(("uses a tensor recorded before the call", "?"))
        if tape.inplace:
            reasons.append(("in-place operations", tape.inplace[0][3]))
        int_leaves = _integer_leaves(tape, proxies)
        if trace.integer_results or (
                int_leaves and _integer_misuse(tape, int_leaves, trace.float_records) is not None):
            # the call computed with floats where eager mode has integers: its result may
            # differ from eager mode's (a dtype, an index, mask + mask), so eager mode gives it
            return self._eager_after_tracing(sig, args, kwargs, trace)
        flat, treedef = _flatten(out)
        outputs = []
        plain = []
        req = None
        detached = False
        originals = {id(p): (path, a) for path, p, a in proxies if p is not None}
        for j, o in enumerate(flat):
            if id(o) in originals:
                # an argument handed back: the caller's tensor, not the proxy it was traced as
                path, flat[j] = originals[id(o)]
                detached = True
                outputs.append((None, None, _Arg(_input_key(path))))
                plain.append(None)
            elif isinstance(o, Tensor) and o._tape is tape:
                outputs.append((o._r, o._value.shape, None))
                if req is None:
                    req = _requires_grad(tape)
                if req[o._r]:
                    plain.append(None)
                else:
                    # computed from arguments that require no gradient (or from comparisons):
                    # eager mode returns it without a grad_fn
                    plain.append(o._value.dtype)
                    flat[j] = Tensor._make(np.array(o._value))
                    detached = True
            elif isinstance(o, Tensor) and o._tape is not None:
                reasons.append(("returns a tensor recorded before the call", "?"))
            elif isinstance(o, Tensor) and o._rg:
                # a parameter, returned as it is: the same tensor each call, as in eager mode
                outputs.append((None, None, o))
                plain.append(None)
            elif isinstance(o, Tensor):
                outputs.append((None, None, _Frozen(o._value)))
                plain.append(None)
            elif isinstance(o, _SCALARS):
                outputs.append((None, None, o))
                plain.append(None)
            else:
                reasons.append(((f"returns a {type(o).__name__} (replay returns tensors, "
                                 "numbers, and tuples, lists and dicts of them)"), "?"))
        if detached:
            out = _unflatten(treedef, flat)
        if reasons:
            st.eager_reasons.extend(reasons)
            if snapshot is not None and snapshot.count and not changed_state:
                # eager while the Python state is as now: a module in training mode draws
                # dropout masks, the same module in eval mode replays
                self._add_variant(sig, _EagerWhile(snapshot))
            else:
                self._cache[sig] = "eager"
        else:
            small, args_, outs_, guards_ = optimize(tape, arg_records, outputs, trace.guards)
            variant = Variant(small, args_, outs_, treedef, guards_, plain)
            variant.codegen = self.codegen
            variant.owner = st
            variant.constants = trace.constants
            variant.state = snapshot
            variant.arg_shapes = {k: arg_shapes[k] for k in args_}
            variant.recorded_records = len(tape)
            variant.use_signature(sig)
            self._add_variant(sig, variant)
        self._cache.move_to_end(sig)
        while len(self._cache) > self.max_signatures:
            _, dropped = self._cache.popitem(last=False)
            if isinstance(dropped, list):
                self._drop(dropped)
        return out

    def _add_variant(self, sig, variant):
        variants = self._cache.get(sig)
        if not isinstance(variants, list):
            variants = self._cache[sig] = []
        variants.insert(0, variant)
        self._drop(variants[self.max_variants:])
        del variants[self.max_variants:]

    def _eager_after_tracing(self, sig, args, kwargs, trace):
        """Run a call eagerly whose recording did integer arithmetic on an integer tensor
        argument (``labels + 1``) or on traced bools (``mask + mask``): its Python runs twice
        this once, and this signature runs eagerly from now on."""
        if trace.integer_results:
            what, site = trace.integer_results[0]
            self.stats.eager_reasons.append(
                (f"integer arithmetic ({what}) on traced integer or bool values (the recording "
                 "computed floats; the call ran again eagerly)", site))
        else:
            self.stats.eager_reasons.append(
                ("integer arithmetic on an integer or bool tensor argument (the recording saw "
                 "floats; the call ran again eagerly)", "?"))
        self._cache[sig] = "eager"
        self._cache.move_to_end(sig)
        while len(self._cache) > self.max_signatures:
            _, dropped = self._cache.popitem(last=False)
            if isinstance(dropped, list):
                self._drop(dropped)
        return self.fn(*args, **kwargs)

    def _drop(self, variants):
        for v in variants:
            v.drop()
            if self._last is v:
                self._last = None

    def variants(self):
        """The recorded variants, most recently used first."""
        return [v for vs in reversed(self._cache.values()) if isinstance(vs, list) for v in vs
                if type(v) is Variant]

    @property
    def tape(self):
        """The most recently used recorded tape (with ``save(path)`` and ``stats()``)."""
        found = self.variants()
        if not found:
            raise RuntimeError("nothing recorded yet: call the function first")
        return found[0]


def compile(fn=None, *, max_signatures=32, max_variants=4, codegen=None):
    """Record ``fn`` once per input signature and replay it in compiled code afterwards.

    Usable as ``tapegrad.compile(fn)`` or as a decorator.  ``fn.stats`` counts calls,
    replays, recordings, the guards that forced a new recording (with file:line, or the
    Python state that changed) and why calls ran eagerly.  What ``fn`` may read without
    passing it as an argument: README, "What differs".

    ``codegen``: a tape whose records all hold one value (scalar code, loops) can be turned
    into generated, compiled code instead of being interpreted record by record.  ``None``
    (default) does so once a tape has been replayed a few times, ``True`` on its first
    replay, ``False`` never.  ``fn.stats.generated`` counts the tapes that were.

    Results are what ``fn`` gives eagerly: same shapes, values and ``grad_fn`` names, and
    ``backward()`` works on them.

    Example:
        >>> @tg.compile
        ... def f(x):
        ...     return (x * x).sum()
        >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> for _ in range(3):
        ...     y = f(x)
        >>> y.backward()
        >>> y, x.grad
        (tensor(5., grad_fn=<SumBackward0>), tensor([2., 4.]))
        >>> f.stats.calls, f.stats.replays
        (3, 2)
    """
    if fn is None:
        return lambda f: Compiled(f, max_signatures, max_variants, codegen)
    return Compiled(fn, max_signatures, max_variants, codegen)



# ---------------------------------------------------------------------------------------------
# Tape optimisation: dead records, constant records, repeated records
# ---------------------------------------------------------------------------------------------
_AUX_KEY_LIMIT = 64  # records whose side data is longer than this are not compared for CSE


def _read_in_place(tape, args, outputs):
    """The argument records a replay may read where they are, not copy into the arena: large
    ones that only matrix products read (through ops.value_at, from the address in the
    instance's ``ext``), none of them a result.  Every other reader of the arena asks the
    instance for ``vals``, which copies them in."""
    readers = {}
    for r in range(len(tape)):
        for s in _inputs_of(tape, r):
            if s in args:
                readers.setdefault(s, set()).add(tape.op[r])
    results = {r for r, _, _ in outputs}
    return frozenset(r for r in args if tape.size[r] >= _tape.IN_PLACE_MIN and r not in results
                     and readers.get(r) == {K.MATMUL})


def _inputs_of(tape, r):
    code = tape.op[r]
    if code in (K.CAT, K.STACK):
        k = tape.aux[tape.ip[r]]
        return [tape.aux[tape.ip[r] + 1 + 3 * j] for j in range(k)]
    ins = [s for s in (tape.a0[r], tape.a1[r]) if s >= 0]
    if code == K.WHERE:
        ins.append(tape.ip[r])
    return ins


def _aux_len(tape, r):
    code = tape.op[r]
    if code in (K.GATHER, K.BCAST):
        return 2 + tape.size[r]
    if code == K.REPLACE:
        return 2 + tape.aux[tape.ip[r] + 1]   # variant, m, the m positions
    if code == K.EXPAND_S:
        return 1 + 2 * tape.aux[tape.ip[r]]
    if code == K.MATMUL:
        return 5
    if code == K.RESHAPE:
        return 1
    if code in (K.VAR, K.STD):
        return 5   # O, R, I, is_std, whether over everything
    if code in (K.PROD, K.PROD_DIM):
        return 4   # O, R, I, mode
    if code in (K.CAT, K.STACK):
        return None   # holds record ids: never merged
    if code in (K.MAX_DIM, K.MIN_DIM):
        return None   # its aux is rewritten by the forward
    if code in (K.SUM, K.SUM_DIM, K.MEAN, K.MEAN_DIM, K.MAX, K.MIN,
                K.AMAX, K.AMIN, K.LOGSUMEXP, K.SOFTMAX, K.LOG_SOFTMAX, K.NORM):
        return 3
    if code in (K.SOFTPLUS, K.CLAMP, K.GUARD):
        return None   # ip points into faux
    if code in (K.LINALG_INV, K.LINALG_DET, K.LINALG_CROSS):
        return 2      # B, n (cross: O, I)
    if code == K.LINALG_SLOGDET:
        return 3      # B, n, which output: the two outputs of one slogdet must not merge
    if code in (K.LINALG_SOLVE, K.LINALG_CHOLESKY):
        return 4      # B, n, k, left; variant, B, n, upper
    if code == K.LINALG_EIGH:
        return 4      # which output, B, n, upper: eigenvalues and vectors must not merge
    if code in (K.LINALG_SVD, K.LINALG_QR):
        return 5      # which output, B, m, n, full_matrices / mode
    if code == K.LINALG_MATRIX_EXP:
        return 2      # B, n
    if code in (K.LINALG_SOLVE_TRIANGULAR, K.LINALG_PINV, K.LINALG_LSTSQ):
        return 6      # B, n, k, left, upper, unit; B, m, n, hermitian, atol, rtol;
                      # B, m, n, k, which output, rcond
    return 0


def optimize(tape, arg_records, outputs, guards):
    """A smaller copy of a recorded tape with the same outputs, and the maps to it.

    Dead-code elimination drops records that reach no output and no guard; constant folding
    turns records that depend on no LEAF into constants (a guard on a constant always holds
    and is dropped); common-subexpression elimination merges records with the same op,
    inputs and parameters.  Values keep their arena offsets.
    """
    n = len(tape)
    op = tape.op
    canon = list(range(n))
    const = [False] * n
    seen = {}
    # record -> (tensor, version, shape): a constant the function read (not an argument), or
    # a view or hidden broadcast of one folded into a constant; a replay's backward checks
    # their versions (Tape.consts), as the versions of views share their base's
    const_of = {r: (x, version, shape) for r, x, version, shape in tape.consts
                if type(x) is not int}
    views = tape.views
    for r in range(n):
        code = op[r]
        if code == K.CONST:
            const[r] = True
            continue
        if code in (K.LEAF, K.EXTERN):
            continue
        ins = [canon[s] for s in _inputs_of(tape, r)]
        if ins and all(const[s] for s in ins) and code not in (K.MAX_DIM, K.MIN_DIM):
            const[r] = True   # its value in the arena is already the folded value
            base = const_of.get(ins[0])
            if base is not None and r in views:
                const_of[r] = (base[0], base[1], views[r][0])
            elif base is not None and code in (K.BCAST, K.EXPAND_S):
                const_of[r] = base    # (a hidden broadcast: what PyTorch saved is the base)
            continue
        length = _aux_len(tape, r)
        if code == K.GUARD or length is None or length > _AUX_KEY_LIMIT:
            continue
        ip = tape.ip[r]
        side = tuple(tape.aux[ip:ip + length]) if length else ip
        key = (code, tuple(ins), tape.size[r], tape.fp[r], side)
        first = seen.get(key)
        if first is None:
            seen[key] = r
        else:
            canon[r] = first
    live = [False] * n
    roots = [canon[r] for r, _, _ in outputs if r is not None]
    roots += [g for g in guards if not const[canon[tape.a0[g]]]]
    stack = list(roots)
    while stack:
        r = stack.pop()
        if live[r]:
            continue
        live[r] = True
        if not const[r]:
            stack.extend(canon[s] for s in _inputs_of(tape, r))
    new_index = {}
    out = Tape(0)
    out.refused = tape.refused
    out.vals = tape.vals
    out.cap = tape.cap
    out.top = tape.top
    out.aux = array.array("q", tape.aux)
    out.faux = tape.faux
    out.appenders = (out.op.append, out.a0.append, out.a1.append, out.voff.append,
                     out.size.append, out.ip.append, out.fp.append)
    for r in range(n):
        if not live[r] or canon[r] != r:
            continue
        code = op[r]
        if const[r] and code != K.CONST:
            code = K.CONST
        m = lambda s: new_index[canon[s]] if s >= 0 else -1  # noqa: E731
        if code in (K.LEAF, K.CONST, K.EXTERN):
            nr = out.push(code, -1, -1, tape.voff[r], tape.size[r])
        else:
            ip = tape.ip[r]
            if code == K.WHERE:
                ip = m(ip)
            elif code in (K.CAT, K.STACK):
                k = tape.aux[ip]
                for j in range(k):
                    pos = ip + 1 + 3 * j
                    out.aux[pos] = m(tape.aux[pos])
            nr = out.push(code, m(tape.a0[r]), m(tape.a1[r]), tape.voff[r], tape.size[r], ip,
                          tape.fp[r])
        new_index[r] = nr
        if op[r] == K.LEAF:
            out.leaves[nr] = tape.leaves[r]
    out.finished = True
    out.views = {new_index[r]: view for r, view in tape.views.items() if r in new_index}
    out.composites = {}
    for r, entry in tape.composites.items():
        if r not in new_index or canon[r] != r:
            continue
        inputs = tuple(new_index.get(canon[s], -1) if type(s) is int and s >= 0 else -1
                       for s in entry[1])
        if len(entry) == 2:
            out.composites[new_index[r]] = (entry[0], inputs)
        elif canon[entry[2]] in new_index:
            # a further output of a node with several: it points at the first output's record
            out.composites[new_index[r]] = (entry[0], inputs, new_index[canon[entry[2]]],
                                            entry[3])
    if tape.inner_nodes is not None:
        out.inner_nodes = {new_index[r]: nodes for r, nodes in tape.inner_nodes.items()
                           if r in new_index and canon[r] == r}
    out.consts = [(new_index[r], x, version, shape) for r, (x, version, shape)
                  in const_of.items() if r in new_index and canon[r] == r]
    new_args = {i: new_index[canon[r]] for i, r in arg_records.items() if canon[r] in new_index}
    new_outputs = [(new_index[canon[r]] if r is not None else None, s, c)
                   for r, s, c in outputs]
    new_guards = {new_index[g]: guards[g] for g in guards if g in new_index}
    return out, new_args, new_outputs, new_guards


def tape_stats(tape, before=None):
    """Records, arena bytes and an op histogram of a tape (and of its unoptimised original)."""
    from collections import Counter
    hist = Counter(K.OPS[c].name for c in tape.op)
    stats = {"records": len(tape), "arena_bytes": int(tape.top) * 8,
             "aux_bytes": 8 * (len(tape.aux) + len(tape.faux)), "ops": dict(hist.most_common())}
    if before is not None:
        stats["records_before_optimisation"] = len(before)
    return stats


# ---------------------------------------------------------------------------------------------
# Batching: one recorded tape replayed over a leading batch axis in one compiled call
# ---------------------------------------------------------------------------------------------
# Samples x records below which a batch replays on one thread: starting numba's threads and
# giving each its own arenas costs tens of microseconds, about this many record evaluations.
_PARALLEL_MIN_WORK = 20000


def _use_parallel(parallel, bsz, n_records):
    if parallel is not None:
        return bool(parallel)
    return _threads.available() and bsz * n_records >= _PARALLEL_MIN_WORK


def _replay_batch(parallel, args):
    """Run ``ops.batch_replay`` (or its parallel form) on ``args``.  Chosen by itself, the
    parallel form runs where ``_threads.run`` finds it safe and falls back to the sequential
    one when numba's threading layer cannot start; asked for (``parallel=True``), it runs
    and raises what it raises."""
    bsz = args[13].shape[0]
    if _use_parallel(parallel, bsz, args[0].size):
        import numba
        chunks = max(1, min(bsz, 4 * numba.get_num_threads()))   # 4 per thread: balance
        if parallel:
            K.batch_replay_parallel(*args, chunks)
        else:
            _threads.run(lambda: K.batch_replay_parallel(*args, chunks),
                         lambda: K.batch_replay(*args))
        return
    K.batch_replay(*args)


_BATCH_VARIANTS = 8   # tapes recorded per batch for samples whose guards fail, at most


def _batched(fn, argnums, want_grad, parallel=None):
    loaded = getattr(fn, "_batched_run", None)
    if loaded is not None:
        return loaded(argnums, want_grad, parallel)   # a tape from a file (tapefile.py)
    compiled = fn if isinstance(fn, Compiled) else Compiled(fn)
    nums = None if argnums is None else ((argnums,) if isinstance(argnums, int)
                                         else tuple(argnums))

    def run(*batched):
        from .creation import tensor as make
        args = [a if isinstance(a, Tensor) else make(a) for a in batched]
        sizes = {a._value.shape[0] for a in args if a._value.ndim}
        if len(sizes) != 1 or any(a._value.ndim == 0 for a in args):
            raise ValueError("every argument needs the same leading batch size; got shapes "
                             f"{[list(a.shape) for a in args]}")
        bsz = sizes.pop()
        for a in args:
            if a._value.dtype.kind != "f":
                raise TypeError("batched arguments must be float tensors")

        def sample(b):
            return [Tensor._make(a._value[b], want_grad and (nums is None or i in nums))
                    for i, a in enumerate(args)]

        first = sample(0)
        out0 = compiled(*first)   # records (or replays) the tape for one sample
        if not isinstance(out0, Tensor):
            raise TypeError("the function must return one tensor")
        variant = _last_variant(compiled, first)
        if variant is None or variant.outputs[0][0] is None:
            # not replayable: one eager call per sample
            return _loop(compiled, args, nums, want_grad, isinstance(argnums, int))
        if want_grad and out0._value.size != 1:
            raise RuntimeError("per-sample gradients need a one-element output")
        out_shape = out0._value.shape
        values = np.empty((bsz,) + out_shape)
        per_arg = {i: np.zeros(a._value.shape) for i, a in enumerate(args)}
        pending = np.arange(bsz)
        for round_ in range(_BATCH_VARIANTS):
            if round_:
                # the samples left took another branch: record (or pick) the tape of the
                # first of them, and replay the rest over it
                again = sample(pending[0])
                compiled(*again)
                variant = _last_variant(compiled, again)
                if variant is None or variant.outputs[0][0] is None or \
                        variant.cols[4][variant.outputs[0][0]] != values[0].size:
                    break
            status = _replay_variant(variant, args, pending, want_grad, parallel, values,
                                     per_arg)
            compiled.stats.replays += int(np.sum(status == -1))
            if status[0] != -1:
                break   # the tape picked for pending[0] does not replay it: no progress
            pending = pending[status != -1]
            if not pending.size:
                break
        for b in pending:
            # still no tape for this sample's branch: run it eagerly
            v, g = _one(compiled, args, nums, want_grad, b)
            values[b] = v
            for i, gi in g.items():
                per_arg[i][b] = gi
        val_t = Tensor._make(values)
        if not want_grad:
            return val_t
        pick = nums if nums is not None else tuple(range(len(args)))
        gs = [Tensor._make(per_arg[i]) for i in pick]
        return val_t, (gs[0] if isinstance(argnums, int) else tuple(gs))
    return run


def _last_variant(compiled, args):
    """The variant the last call of ``compiled`` with ``args`` ran (None if it ran eagerly):
    a replayed or newly recorded variant goes to the front of its signature's list."""
    found = compiled._cache.get(_signature(args, {}))
    return found[0] if isinstance(found, list) and found and type(found[0]) is Variant else None


def _replay_variant(variant, args, rows, want_grad, parallel, values, per_arg):
    """Replay ``variant`` for the samples ``rows`` of ``args`` in one compiled call, writing
    the value and the argument gradients of each sample whose guards hold into ``values`` and
    ``per_arg``; returns the status of each row (-1: done, else the GUARD that failed)."""
    op, a0, a1, voff, size, ip, fp, aux, faux = variant.cols
    template = np.array(variant.template.vals[:variant.top])
    for r, (leaf, _, _) in variant.closure.items():
        template[voff[r]:voff[r] + size[r]] = leaf._value.reshape(-1)
    recs = [(i, r) for i, r in sorted(variant.arg_records.items())]
    offs, width = [], 0
    for _, r in recs:
        offs.append(width)
        width += int(size[r])
    n = len(rows)
    inputs = np.empty((n, width))
    for (i, r), o in zip(recs, offs):
        inputs[:, o:o + size[r]] = args[i]._value[rows].reshape(n, -1)
    out_rec = variant.outputs[0][0]
    need = np.zeros(len(op), dtype=np.uint8)
    goff = np.full(len(op), -1, dtype=np.int64)
    total = 0
    if want_grad:
        total, _, _ = K.plan(op, a0, a1, size, ip, aux, np.array([out_rec]), len(op), need,
                          goff)
    vals = np.empty((n, int(size[out_rec])))
    grads = np.zeros((n, width))
    status = np.empty(n, dtype=np.int64)
    _replay_batch(parallel, (op, a0, a1, voff, goff, size, ip, fp, aux, faux, template,
                             np.array([r for _, r in recs], dtype=np.int64),
                             np.array(offs, dtype=np.int64), inputs, out_rec, need, total,
                             want_grad, vals, grads, status))
    ok = status == -1
    done = rows[ok]
    values[done] = vals[ok].reshape((len(done),) + values.shape[1:])
    for (i, r), o in zip(recs, offs):
        per_arg[i][done] = grads[ok, o:o + size[r]].reshape(
            (len(done),) + per_arg[i].shape[1:])
    return status


def _one(compiled, args, nums, want_grad, b):
    from .autograd import grad
    sample = [Tensor._make(a._value[b].copy(), want_grad and (nums is None or i in nums))
              for i, a in enumerate(args)]
    out = compiled.fn(*sample)
    grads = {}
    if want_grad:
        pick = [i for i in range(len(sample)) if nums is None or i in nums]
        gs = grad(out, [sample[i] for i in pick], allow_unused=True, materialize_grads=True)
        grads = {i: g._value for i, g in zip(pick, gs)}
    return out._value, grads


def _loop(compiled, args, nums, want_grad, single):
    bsz = args[0]._value.shape[0]
    vals, grads = [], []
    for b in range(bsz):
        v, g = _one(compiled, args, nums, want_grad, b)
        vals.append(v)
        grads.append(g)
    val_t = Tensor._make(np.array(vals))
    if not want_grad:
        return val_t
    pick = nums if nums is not None else tuple(range(len(args)))
    gs = [Tensor._make(np.array([g[i] for g in grads])) for i in pick]
    # (as the replayed path gives them: one tensor for an int argnums, else a tuple)
    return val_t, (gs[0] if single else tuple(gs))


def vmap(fn, parallel=None):
    """``fn`` mapped over the leading axis of every argument, replayed in one compiled call.

    ``parallel``: True runs the samples on numba's threads (``NUMBA_NUM_THREADS``,
    ``numba.set_num_threads``), False on the calling thread, None (default) on the threads
    when there is more than one and the batch is large enough to pay for starting them.
    Results are the same either way.

    Shape: every argument ``(batch, *sample)`` -> ``(batch, *result)``.

    Example:
        >>> tg.vmap(lambda v: (v * v).sum())(tg.tensor([[1.0, 2.0], [3.0, 4.0]]))
        tensor([ 5., 25.])
    """
    return _batched(fn, None, False, parallel)


def per_sample_value_and_grad(fn, argnums=0, parallel=None):
    """Values and gradients of a scalar ``fn`` for each sample of a batch (leading axis),
    from one recorded tape replayed in one compiled call (no Python per sample).

    ``parallel`` as for ``vmap``.  Samples whose guards fail (Python control flow that takes
    another branch) replay a tape recorded for the first of them, up to ``_BATCH_VARIANTS``
    tapes per batch; any left after that run eagerly, one by one.

    Shape: the argument ``(batch, *sample)`` -> values ``(batch,)`` and gradients
    ``(batch, *sample)``.

    Example:
        >>> f = tg.per_sample_value_and_grad(lambda v: (v * v).sum())
        >>> values, grads = f(tg.tensor([[1.0, 2.0], [3.0, 4.0]]))
        >>> values, grads
        (tensor([ 5., 25.]), tensor([[2., 4.],
                [6., 8.]]))
    """
    return _batched(fn, argnums, True, parallel)
