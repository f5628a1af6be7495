"""The Wengert tape: struct-of-arrays records and the value arena they point into.

No Numba here.  Columns are ``array.array`` (one C append per field per record, about a
quarter of the cost of a NumPy item store) and are viewed as NumPy arrays, without copying,
only while a sweep runs.

Values of recorded results are written straight into the tape's arena, a fixed-size NumPy
chunk.  The arena never grows or moves, so a view a user holds stays valid; when a chunk is
full the engine starts a new tape, and a tensor of the old tape used on the new one is
brought over as an EXTERN record (backward continues into the old tape).  A chunk is reused
only once nothing outside the pool references it (checked with the reference count of the
chunk, which every NumPy view of it holds).
"""
import array
import itertools
import sys
import threading
import weakref

import numpy as np

from . import ops

# A new tape's arena is sized from what the last tape of this thread used (a training loop
# records about the same every step), never below MIN_CAPACITY: a tensor the user keeps pins
# its whole chunk, so chunks are only as large as the work needs.
MIN_CAPACITY = 1 << 12      # float64 values (32 KiB)
_POOL_LIMIT = 4             # free chunks kept for reuse per thread
GROWTH_LIMIT = 1 << 20      # values (8 MiB): tapes that fill up grow to this, then repeat

_tape_ids = itertools.count()


def aligned_empty(n):
    """n float64 values starting on a 64-byte boundary (NumPy's own start 16 bytes in).  BLAS
    runs W3's products 2-4% faster on operands that start on a cache line.  A view: views
    of it refer to the array it is cut from, its ``base``."""
    raw = np.empty(n + 8)
    start = (-raw.__array_interface__["data"][0] % 64) // 8
    return raw[start:start + n]


# The ``ext`` of a tape whose values are all in its arena: the kernels read a value in place
# only where a replay (its arguments) or the eager recorder (large constants of matrix
# products and elementwise ops) says so, and only those ops' backward rules and generated
# loops read through it (ops.value_at, elementwise._operand, codegen's ``direct``).
NO_EXT = np.zeros(0, dtype=np.int64)
# Values of at least this many elements that only such ops read are read where they are,
# not copied into the arena: a replay's arguments (replay.Variant.read_in_place; W3's data
# and first weights are 3.8 MB, a quarter of a millisecond of copying per step) and an eager
# op's constant operand (``Tape.read_in_place``: W8's (10^5, 16) feature matrix, 1.2 ms of a
# 3.8 ms step; the cubic fit's x, x**2, x**3 and y, a fifth of its forward at 10^5 points).
# Below it the copy is cheaper than looking up the address.
IN_PLACE_MIN = 16384
_NONE = frozenset()


class Recording:
    """The one seam between recording and a trace.  While ``compile`` (or a transform) records
    a function, ``state.trace`` holds one of these (``replay.Trace``, which sits above every
    module that records); the modules below it -- the tensor handle, the recorder, in-place
    changes, the differentiable backward -- reach the trace only through what is declared
    here, and ask nothing else of it (``tests/test_op_table.py`` reads their sources to check).

    ``tape`` is the tape the trace records onto."""

    __slots__ = ("tape",)

    def requires_grad_eagerly(self, t):
        """Whether ``t`` requires grad in eager mode (a traced argument that does not is
        traced as if it did)."""
        raise NotImplementedError

    def is_untracked(self, t):
        """Whether ``t`` is a traced argument whose tensor requires no grad in eager mode."""
        raise NotImplementedError

    def as_float(self, t, dtype):
        """Traced integer or bool data ``t`` converted to the float ``dtype``, recorded."""
        raise NotImplementedError

    def guard(self, t, kind):
        """Python reads ``t``'s value (``kind`` says how): a replay must check it is the same."""
        raise NotImplementedError

    def integer_result(self, what):
        """An op ``what`` on traced integer or bool data whose eager result is integers or
        bools, which the tape computes in floats (``mask + mask`` holds 2 where eager mode has
        True): the call runs again eagerly, and so do later calls of its signature."""
        raise NotImplementedError

    def opaque(self, reason):
        """The function did something a replay cannot repeat: it runs eagerly, for ``reason``."""
        raise NotImplementedError

    def read_constant(self, x):
        """A tensor the function reads but does not differentiate, at its current version: an
        in-place change of it before a later call makes replay record again."""
        raise NotImplementedError


class _State(threading.local):
    """Per-thread engine state: grad mode, the tape being recorded, reusable buffers."""

    def __init__(self):
        self.grad_enabled = True
        self.tape = None
        self.trace = None       # the Recording of a function being traced (its seam)
        self.pool = []          # free arena chunks
        self.grads = np.empty(0)  # the gradient arena, reused across sweeps
        self.sweeping = 0       # sweeps paused in user code (hooks): they hold the arena
        self.last_used = 0      # values the previous tape held when it was finished


state = _State()


def _refcount_at(items, i):
    return sys.getrefcount(items[i])


# What _refcount_at reports for an array that only the list refers to.  Measured, because
# the count getrefcount adds for its own argument differs between interpreters.
_UNSHARED = _refcount_at([np.empty(0)], 0)


# Called before a chunk is taken: inplace.py moves values that outlived their tape (a kept
# ``loss.detach()``) out of its chunk, which they would otherwise keep from being reused.
BEFORE_TAKING_A_CHUNK = None


def chunk_size(n):
    """The values a tape asking for room for n gets: a power of two, at least MIN_CAPACITY."""
    return max(MIN_CAPACITY, 1 << max(0, (n - 1).bit_length()))


def _take_chunk(n):
    """A free chunk of at least n values: a released one that no view refers to any more,
    or a new one."""
    if BEFORE_TAKING_A_CHUNK is not None:
        BEFORE_TAKING_A_CHUNK()
    pool = state.pool
    for i in range(len(pool) - 1, -1, -1):
        if pool[i].size >= n and _refcount_at(pool, i) <= _UNSHARED:
            return pool.pop(i)
    chunk = np.empty(chunk_size(n))
    _ARENA_CHUNKS[id(chunk)] = weakref.ref(chunk, lambda _, key=id(chunk):
                                           _ARENA_CHUNKS.pop(key, None))
    return chunk


_ARENA_CHUNKS = {}   # id -> weak reference, of every chunk made to be a value arena


def in_arena(a):
    """Whether array ``a`` is (a view of) a value arena's memory: the values of records,
    which a backward may read.  Changing them in place must go through the version count
    that guards them, never around it."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    ref = _ARENA_CHUNKS.get(id(a))
    return ref is not None and ref() is a


class Tape:
    """One segment of recording: records, their side arrays, and a value arena."""

    __slots__ = (
        "op", "a0", "a1", "voff", "size", "ip", "fp", "aux", "faux",
        "appenders", "vals", "cap", "top", "id", "finished", "freed", "leaves", "leaf_rec",
        "const_rec", "externs",
        "extern_rec", "nodes", "inplace", "version_base", "refused", "storage_of", "hooks",
        "cached_cols", "plan_cache",
        "program", "custom", "custom_out", "older", "first_extern", "dep_of", "dep_sets",
        "ext", "ext_refs", "consts", "unfilled", "views", "arguments_are_leaves", "composites",
        "inner_nodes", "leaf_versions",
        "__weakref__",
    )

    def __init__(self, capacity_needed=0):
        q = "q"
        self.op, self.a0, self.a1 = array.array(q), array.array(q), array.array(q)
        self.voff, self.size, self.ip = array.array(q), array.array(q), array.array(q)
        self.fp = array.array("d")
        self.aux = array.array(q)
        # bound appends, looked up once: push is on every op's path
        self.appenders = (self.op.append, self.a0.append, self.a1.append, self.voff.append,
                          self.size.append, self.ip.append, self.fp.append)
        self.faux = array.array("d")
        self.vals = _take_chunk(capacity_needed)
        # The room is what was asked for, not the size of the chunk the pool happened to
        # hold: where a graph spills onto the next tape decides the order a gradient from
        # both is added in, and that must not depend on what earlier work freed (the same
        # step gave other last bits after a larger chunk had been released).
        self.cap = chunk_size(capacity_needed)
        self.top = 0
        self.id = next(_tape_ids)
        self.finished = False
        self.freed = None        # bool mask of records whose saved values a backward released
        self.leaves = {}         # record -> leaf Tensor
        self.leaf_rec = {}       # id(leaf) -> (record, leaf version at import)
        # record -> the leaf's version at import, of the leaf records that a later import of
        # the same leaf (changed in place meanwhile) replaced in leaf_rec; None while none
        self.leaf_versions = None
        # id(constant) -> the same, for tensors without grad (eager); (id, "in place") for
        # the records that read one where it is (functional._constant_in_place)
        self.const_rec = {}
        self.externs = {}        # record -> (older tape's id, its record)
        self.extern_rec = {}     # (older tape id, its record) -> (record, version copied)
        # Older tapes are reached by id and weak reference only.  A tape that held them
        # strongly kept every tape before it alive: a graph that spans tapes A -> B leaves
        # B holding A, the next graph starts on B and spans into C, and so on, one dead
        # tape per call, for as long as the loop runs.  What keeps an older tape alive is
        # each tensor (and grad_fn node) whose graph reaches it: see ``keep``.
        self.older = {}          # older tape id -> weak reference, of every tape reached
        self.first_extern = -1   # the first EXTERN record: no record before it reaches one
        self.dep_of = None       # record - first_extern -> index in dep_sets (-1 not known)
        self.dep_sets = None     # frozensets of older tape ids, each listed once
        self.nodes = {}          # grad_fn views made so far, so that they stay identical
        self.inplace = []        # (storage, record that changed it or .5 between, op, where, shape)
        # storage -> the version its tensor had before the change that began it, where not 0
        # (a constant's value an in-place op replaced: inplace._constant_replaced)
        self.version_base = None
        self.refused = False     # holds a record whose backward PyTorch refuses (qr's modes)
        self.storage_of = {}     # in-place result record -> the storage it overwrote
        self.hooks = {}          # record -> (shape, list of gradient hooks)
        self.cached_cols = None  # NumPy columns of a replayed tape (which never grows)
        self.plan_cache = None   # seeds -> make_plan's tuple, for replayed tapes
        self.program = None      # generated backward of a replayed tape (codegen.Program)
        self.custom = {}         # record -> a use of an autograd.Function (function.py)
        self.custom_out = {}     # that use's output records -> its record
        # records whose values the kernels read where they are (ops.value_at): address by
        # record, and [(record, array)] keeping those arrays alive
        self.ext = NO_EXT
        self.ext_refs = None
        # [(record, the constant, its version then, its shape)] of the tensors that require
        # no grad the tape copied (functional._ref) or reads in place (read_in_place): a
        # backward that reads one changed in place since raises, as PyTorch's, which saved
        # the tensor itself (autograd._check_versions).  (Once a recorded in-place op on
        # this tape replaces its value, the op's record instead: inplace._constant_replaced.
        # A replay's: its template's, a closure's constants and views folded from them,
        # replay.optimize.)
        self.consts = []
        self.unfilled = None     # [(offset, count, value)]: arena spans no rule reads, eager
        # record -> (shape, (op name, output number) or None) of the records that are views
        # in PyTorch (gathers and reshapes of the kinds functional._VIEW_VARIANTS and
        # _RESHAPE_VIEWS name; the pair for an output of split, chunk or unbind): a backward
        # that reads a view whose base changed since raises PyTorch's error, which names
        # them (inplace.saved_view_of)
        self.views = {}
        # record -> (PyTorch's node name, input records or -1) of the last record of an op
        # built from other ops (lerp, addmm, tril, ...): its grad_fn shows that one node,
        # whose next_functions are the op's inputs' (functional.named_node)
        self.composites = {}
        # record -> the nodes PyTorch shows beneath its last one, for an op it runs as several
        # (a batched matmul: functional.matmul_inner_nodes); None until one is recorded
        self.inner_nodes = None
        # the leaves are a compiled function's arguments, those that need no gradient
        # included (its recording's tape and its replays'): the backward checks their versions
        self.arguments_are_leaves = False

    partial = False   # (a replay's may lack values: replay._Instance.complete)

    @property
    def arena(self):
        """The value arena as the kernels read it, with ``ext``: for a replay's tape it may
        lack the arguments read in place, which ``vals`` copies in first."""
        return self.vals

    def __len__(self):
        return len(self.op)

    def read_in_place(self, r, x, constant=True):
        """Record r, a constant just pushed with its arena slot left unfilled, is tensor x's
        value, which the op reading it (a matrix product, an elementwise op) reads where it
        is (``ext``): as PyTorch keeps a saved operand, by reference and version -- a backward that reads it after an in-place
        change raises (``autograd._check_versions``).  Anything else that reads the arena as
        it is calls ``fill_arena`` first."""
        v = x._value
        ext = self.ext
        if ext.size <= r:
            grown = np.zeros(max(r + 1, 2 * ext.size), dtype=np.int64)
            grown[:ext.size] = ext
            self.ext = ext = grown
        ext[r] = v.__array_interface__["data"][0]
        if self.ext_refs is None:
            self.ext_refs = []
        self.ext_refs.append((r, v))
        if constant:    # (a leaf's version is checked through leaf_rec, as when copied)
            self.consts.append((r, x, x._version, v.shape))

    def read_from_arena(self, r, x):
        """Record r, whose value its readers so far read where tensor x is
        (``read_in_place``), is read from the arena from now on: its slot gets x's values
        and the address is dropped, so that every reader reads the same values."""
        v = x._value
        self.vals[self.voff[r]:self.voff[r] + v.size] = v.reshape(-1)
        if r < self.ext.size:
            self.ext[r] = 0
        if self.ext_refs is not None:
            self.ext_refs = [(s, a) for s, a in self.ext_refs if s != r] or None

    def supersede_leaf(self, hit):
        """A leaf is imported again (it changed since its record ``hit`` of ``leaf_rec``
        was made): keep the version that record holds, which the backward checks as it
        checks the newest one's, for the ops that read the old record."""
        if self.leaf_versions is None:
            self.leaf_versions = {}
        self.leaf_versions[hit[0]] = hit[1]

    def leave_unfilled(self, off, n, value):
        """The n values at ``off``, each ``value``, are not written into the arena now: no
        rule of the backward reads them (a parameter broadcast to be added to a vector:
        ``functional._expansion_read``).  ``fill_arena`` writes them for readers that take
        the arena as it is."""
        if self.unfilled is None:
            self.unfilled = []
        self.unfilled.append((off, n, value))

    def fill_arena(self):
        """Bring the values read in place, and those left unfilled, into the arena, for a
        reader that takes the arena as it is (a differentiable backward's rules, forward
        mode): from then on every reader finds them there."""
        arena = self.arena
        if self.ext_refs is not None:
            voff, ext = self.voff, self.ext
            for r, v in self.ext_refs:
                arena[voff[r]:voff[r] + v.size] = v.reshape(-1)
                ext[r] = 0
            self.ext_refs = None
        if self.unfilled is not None:
            for off, n, value in self.unfilled:
                arena[off:off + n] = value
            self.unfilled = None

    def room(self, n):
        return not self.finished and self.top + n <= self.cap

    def alloc(self, n):
        """Reserve n values in the arena; returns their offset."""
        off = self.top
        self.top = off + n
        return off

    def push(self, code, a0, a1, voff, size, ip=0, fp=0.0):
        """Append one record; returns its index."""
        r = len(self.op)
        try:
            ap_op, ap_a0, ap_a1, ap_voff, ap_size, ap_ip, ap_fp = self.appenders
            try:
                ap_op(code)
            except BufferError:
                ap_op, ap_a0, ap_a1, ap_voff, ap_size, ap_ip, ap_fp = self.unshare_columns()
                ap_op(code)
            ap_a0(a0)
            ap_a1(a1)
            ap_voff(voff)
            ap_size(size)
            ap_ip(ip)
            ap_fp(fp)
        except BaseException:
            self.drop_partial(r)
            raise
        return r

    # --- older tapes a record's gradient reaches ------------------------------------------
    def add_extern(self, r, x):
        """Record r (just pushed, an EXTERN) holds tensor x of an older tape: remember x's
        tape, and every tape x's graph reaches, as what r's gradient reaches."""
        older = x._tape
        self.externs[r] = (older.id, x._r)
        self.older[older.id] = weakref.ref(older)
        reached = older.reaches(x._r)
        for i in reached:
            self.older[i] = older.older[i]
        if self.first_extern < 0:
            self.first_extern = r
            self.dep_of = array.array("q")
            self.dep_sets = [_NONE]
            # nodes from now on hold older tapes (Node._keep): the tape must not hold them
            self.nodes = weakref.WeakValueDictionary(self.nodes)
        self._set_reach(r, reached | {older.id})

    def extern(self, r):
        """(older tape, its record) of EXTERN record r.  A record whose gradient reaches r
        belongs to a live tensor or node, and that one holds the older tape (``keep``)."""
        older_id, older_r = self.externs[r]
        older = self.older[older_id]()
        if older is None:
            raise RuntimeError("tapegrad internal error: the graph reaches a tape that was "
                               "freed; please report it")
        return older, older_r

    def keep(self, r):
        """The older tapes record r's gradient reaches, as a tuple for its tensor or node to
        hold (None when it reaches none).  Called when the tensor is made, while the
        tensors of r's inputs, which hold those tapes, are alive."""
        if self.first_extern < 0 or r < self.first_extern:
            return None
        ids = self.reaches(r)
        if not ids:
            return None
        older = self.older
        return tuple([older[i]() for i in ids])

    def reaches(self, r):
        """The ids of the older tapes record r's gradient reaches (through EXTERN records),
        worked out once per record, from its inputs as ``plan`` follows them."""
        first = self.first_extern
        if first < 0 or r < first:
            return _NONE
        known = self._reach_index(r)
        if known >= 0:
            return self.dep_sets[known]
        # the usual case, a new record of an op of one or two inputs whose reach is known
        # (this runs for every op recorded on a tape that reaches older ones)
        code = self.op[r]
        if code not in ops.structure.MANY_INPUTS and \
                ops.table.OPS[code].family != ops.table.DATA:
            k0 = self._reach_index(self.a0[r]) if self.a0[r] >= first else 0
            k1 = self._reach_index(self.a1[r]) if self.a1[r] >= first else 0
            if k0 >= 0 and k1 >= 0:
                sets = self.dep_sets
                ids = sets[k0] if k1 == 0 or k1 == k0 else (
                    sets[k1] if k0 == 0 else sets[k0] | sets[k1])
                self._set_reach(r, ids)
                return ids
        todo = [r]
        while todo:
            s = todo[-1]
            if self._reach_index(s) >= 0:
                todo.pop()
                continue
            inputs = self._inputs(s)
            unknown = [i for i in inputs
                       if i >= self.first_extern and self._reach_index(i) < 0]
            if unknown:
                todo.extend(unknown)
                continue
            todo.pop()
            ids = _NONE
            for i in inputs:
                if i >= self.first_extern:
                    ids = ids | self.dep_sets[self._reach_index(i)]
            self._set_reach(s, ids)
        return self.dep_sets[self._reach_index(r)]

    def _inputs(self, s):
        code = self.op[s]
        if code in ops.structure.MANY_INPUTS:
            at = self.ip[s]
            return [self.aux[at + 1 + 3 * j] for j in range(self.aux[at])]
        if ops.table.OPS[code].family == ops.table.DATA:
            return ()
        return [i for i in (self.a0[s], self.a1[s]) if i >= 0]

    def _reach_index(self, s):
        i = s - self.first_extern
        return self.dep_of[i] if i < len(self.dep_of) else -1

    def _set_reach(self, s, ids):
        sets = self.dep_sets
        try:   # (few distinct sets: a linear search keeps one object per set)
            k = sets.index(ids)
        except ValueError:
            k = len(sets)
            sets.append(frozenset(ids))
        i = s - self.first_extern
        dep_of = self.dep_of
        if i == len(dep_of):
            dep_of.append(k)
            return
        if i > len(dep_of):
            dep_of.extend([-1] * (i + 1 - len(dep_of)))
        dep_of[i] = k

    def drop_partial(self, r):
        """Cut the columns back to r records.  An append interrupted between two columns
        (Ctrl-C) would leave them of different lengths: every later record read another's
        fields, and backward gave wrong gradients or crashed."""
        for name in ("op", "a0", "a1", "voff", "size", "ip", "fp"):
            if len(getattr(self, name)) > r:
                try:
                    del getattr(self, name)[r:]
                except BufferError:   # views of the columns are alive (see unshare_columns)
                    self.unshare_columns()
                    del getattr(self, name)[r:]

    def unshare_columns(self):
        """Give the columns new arrays, and return their appenders.  An array with live NumPy
        views (``columns()`` of a sweep, kept by the traceback of an exception it raised)
        cannot grow: the views keep the old arrays, whose records do not change, and the tape
        records on into the copies.  Records are only ever appended, so they agree."""
        for name in ("op", "a0", "a1", "voff", "size", "ip", "fp", "aux", "faux"):
            setattr(self, name, getattr(self, name)[:])
        self.appenders = (self.op.append, self.a0.append, self.a1.append, self.voff.append,
                          self.size.append, self.ip.append, self.fp.append)
        return self.appenders

    def put_aux(self, values):
        off = len(self.aux)
        try:
            self.aux.extend(values)
        except BufferError:
            self.unshare_columns()
            self.aux.extend(values)
        return off

    def put_faux(self, values):
        off = len(self.faux)
        try:
            self.faux.extend(values)
        except BufferError:
            self.unshare_columns()
            self.faux.extend(values)
        return off

    def value(self, r, shape):
        """A view of record r's value with the given shape."""
        off = self.voff[r]
        n = self.size[r]
        v = self.vals[off:off + n]
        return v if len(shape) == 1 else v.reshape(shape)

    def columns(self):
        """NumPy views of the columns, for a sweep.  Drop them before appending again."""
        f = np.frombuffer
        i8 = np.int64
        return (f(self.op, i8), f(self.a0, i8), f(self.a1, i8), f(self.voff, i8),
                f(self.size, i8), f(self.ip, i8), f(self.fp, np.float64),
                f(self.aux, i8) if len(self.aux) else np.zeros(1, i8),
                f(self.faux, np.float64) if len(self.faux) else np.zeros(1))

    def __del__(self):
        # Release the chunk to the pool.  Views of it may still be alive (a dying tensor
        # drops its tape before its value), so _take_chunk reuses it only once none is left.
        try:
            pool = state.pool
            if len(pool) >= _POOL_LIMIT:
                del pool[0]
            pool.append(self.vals)
        except Exception:  # interpreter shutdown: nothing worth doing
            pass


def recording_tape(n):
    """The tape to record on, with room for n more values (starting a new one if needed)."""
    t = state.tape
    if t is None or not t.room(n):
        # after a backward: as much as last time and half again; after filling up: twice
        # as much.  (A quarter again was too little: an op asks for room for more than it
        # uses -- a sum for three times its input -- and W4's graph at 10^5 values then
        # spilled onto a second tape every other step.)
        if t is None or t.finished:
            want = max(n, state.last_used + state.last_used // 2)
        else:
            # twice as much, up to GROWTH_LIMIT: graphs that are built and never
            # differentiated (a loss printed, a validation pass outside no_grad) fill tapes
            # one after the other, and unbounded doubling made each new chunk too large for
            # the pool's freed ones: memory grew without end.  A larger graph spans tapes.
            want = max(n, min(2 * t.cap, GROWTH_LIMIT))
        t = Tape(want)
        state.tape = t
    return t


def finish(tape):
    """A backward swept this tape: record later ops on a new one (with retain_graph the tape
    stays whole for further backward passes, but takes no more records)."""
    tape.finished = True
    if state.tape is tape:
        state.tape = None
        state.last_used = tape.top


def finish_graph(tapes):
    """``finish`` every tape a backward swept.  When the tape being recorded on is among
    them, the next tape is sized for all of them: the next step likely builds as large a
    graph, and one that spans tapes pays for it on every step -- each tensor used on a later
    tape is copied there, and each tape is planned and swept on its own (W4's 10^7-element
    ops, each larger than the last tape, took a tape per op: a third of its backward went to
    those copies and to adding x's gradient from four tapes)."""
    current = state.tape
    for tape in tapes:
        finish(tape)
    if current is not None and state.tape is None:
        state.last_used = sum(tape.top for tape in tapes)
