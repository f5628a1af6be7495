"""Generated backward sweeps for eager tapes that come back: the same records, step after step.

A training loop in eager mode records the same tape at every step -- the same ops, in the same
order, on values of the same sizes at the same places in the arena -- and sweeps it with the
interpreter, record by record, each a pass over its values in memory.  For a tape of vectors
that is the cost (W4's backward over 10^7 values: 82 ms record by record, 27 ms as the loops
``codegen.generate_vectors`` writes).  So a tape whose records, bit for bit, were swept
often enough before from the same seeds (``_AFTER``, ``_WORK``: the larger the tape, the
sooner) gets that generated backward, as a replayed tape does (replay.py); the interpreter's
sweep stays for everything else.

The key is the tape's columns themselves: the generated code holds their offsets, sizes and
scalars as literals, so it is used only for a tape equal in every one of them.  The bits are
the interpreter's (codegen's contract, up to the sign of a zero gradient).
"""
from collections import OrderedDict

import numpy as np

from . import ops as K
from .tape import IN_PLACE_MIN

# A tape gets generated loops from this many values (replay._GENERATE_MIN_VALUES): below it
# the interpreter's passes are cheap, and the key costs a few microseconds a backward.
_MIN_VALUES = 1024
# Tapes of more records (or side arrays) are not keyed: building the key reads them all,
# and codegen does not write out tapes this long anyway.
_MAX_RECORDS = 2048
_MAX_SIDE = 4096
_AFTER = 2   # sweeps by the interpreter before the third builds the program, at the soonest
# ... and a tape of v values not before _WORK / v sweeps: loading a program from numba's cache
# takes 30-80 ms (compiling it, the first time on a machine, about a second), and what it saves
# a sweep grows with the values (W4's 10^7: 63 ms a sweep; the demo's small network of 2,500,
# 0-40 µs, where building it on the third of 500 steps made the loop slower).  So a tape of
# 10^6 values or more builds on its third sweep, one of 10^4 on its 250th, one of 2,500 on its
# 1,000th.
_WORK = 2_500_000
_KEPT = 64   # keys remembered, the most recently swept

ENABLED = True   # (tests compare against the interpreter with this off)

_seen = OrderedDict()   # key -> sweeps so far (int), the Program, or why none (str)
generated = 0           # programs built in this process (tests read it)


# Tapes of at most this many records (and side values) have their plans remembered even
# below _MIN_VALUES: a plan for a tape equal in every column to one planned before is that
# plan (``ops.plan`` reads the columns and the seeds, nothing else), and looking it up costs
# a W8-sized tape (21 records) 1 µs against 12 µs for the columns' views and ``plan``.  The
# key's cost grows with the records (hashing 72 bytes a record): past this size it would cost
# as much as it saves.
_PLAN_RECORDS = 128
_PLAN_SIDE = 512
# key -> [None] after a tape's first sighting, [(columns, plan)] from its second
_plans = OrderedDict()


def _key(tape, seeds):
    n = len(tape.op)
    if n > _MAX_RECORDS or len(tape.aux) + len(tape.faux) > _MAX_SIDE:
        return None
    return (seeds, n, tape.op.tobytes(), tape.a0.tobytes(), tape.a1.tobytes(),
            tape.voff.tobytes(), tape.size.tobytes(), tape.ip.tobytes(), tape.fp.tobytes(),
            tape.aux.tobytes(), tape.faux.tobytes())


def key_for(tape, seeds):
    """The key of eager ``tape`` swept from ``seeds`` (a tuple of records) for
    ``known_plan`` and ``program_for``, or None where neither would use it: the key is only
    worth building for a tape that may get a program, or is small."""
    if ((ENABLED and tape.top >= _MIN_VALUES)
            or (len(tape.op) <= _PLAN_RECORDS and len(tape.aux) + len(tape.faux) <= _PLAN_SIDE)):
        return _key(tape, seeds)
    return None


# These take no lock, nor does program_for: each changes its table by single dict and list
# operations, which the GIL makes atomic, so threads and an interrupt at any line leave it
# whole.  (With ``with _lock:`` here, tests/test_interrupts.py's KeyboardInterrupt at some
# line left the lock held and the next backward hung in known_plan; Python 3.11 gives the
# ``with`` line a line event on leaving the block, before the lock's __exit__ runs.)
def known_plan(key):
    """(columns, plan) remembered for a tape of ``key``, or None.  The columns are copies,
    equal in every value to the tape's: a sweep may read them instead of views of the tape's
    own (which cost 6 µs to make and lock its arrays against growth while they live)."""
    entry = _plans.get(key)
    if entry is None or entry[0] is None:
        return None
    try:
        _plans.move_to_end(key)
    except KeyError:   # (dropped by another thread meanwhile: it is still right)
        pass
    return entry[0]


def remember_plan(key, cols, plan):
    """Note a tape of ``key`` was planned as ``plan`` from columns ``cols``; from its second
    sighting keep copies of both (a tape seen once, likely never again, costs one entry)."""
    entry = _plans.get(key)
    if entry is None:
        _plans[key] = [None]
        while len(_plans) > _KEPT:
            try:
                _plans.popitem(last=False)
            except KeyError:   # (emptied by another thread)
                break
    elif entry[0] is None:
        # (the plan's arrays are never written once made: replayed tapes share theirs too)
        entry[0] = (tuple([c.copy() for c in cols]), plan)


def program_for(tape, key, cols, seeds, plan):
    """The generated backward (a ``codegen.Program``) for sweeping eager ``tape`` (columns
    ``cols``, plan ``plan``, key ``key`` from ``key_for``) from ``seeds`` (a tuple of
    records), or None: the interpreter sweeps it."""
    if not ENABLED or tape.top < _MIN_VALUES:
        return None   # (first: every eager backward of a small tape asks)
    size = cols[4]
    if any(size[r] != 1 for r in seeds):
        # (generated code takes a seed's gradient from the arena only for one value: a
        # loss, as for replays)
        return None
    if key is None:
        return None
    # (no lock, as known_plan: backward runs in several threads, and two of them counting
    # the same sweep at once at worst count it once, or both build the same program, which
    # _generated loads once)
    entry = _seen.get(key)
    if entry is None:
        _seen[key] = 1
        while len(_seen) > _KEPT:
            try:
                _seen.popitem(last=False)
            except KeyError:   # (emptied by another thread)
                break
        return None
    try:
        _seen.move_to_end(key)
    except KeyError:   # (dropped by another thread meanwhile)
        pass
    if isinstance(entry, int) and entry < max(_AFTER, _WORK // tape.top):
        _seen[key] = entry + 1
        return None
    if isinstance(entry, int):
        entry = _build(cols, seeds, plan)
        _seen[key] = entry
    return entry if not isinstance(entry, str) else None


def _build(cols, seeds, plan):
    """The program for a tape, or why there is none."""
    global generated
    from . import codegen
    size = cols[4]
    if not (size[cols[0] > K.EXTERN] > 1).any():
        return "a tape of numbers: the interpreter's chains sweep it"
    try:
        # (a large constant an elementwise op reads may be read where it is, in this sweep
        # or a later one of the same columns: the loops look at ext, functional._binary)
        op = cols[0]
        direct = frozenset(np.flatnonzero((op == K.CONST) & (size >= IN_PLACE_MIN)).tolist())
        prog = codegen.build(cols, None, seeds, plan, direct=direct, backward_only=True)
    except codegen.Unsupported as e:
        return str(e)
    # its own copies of the side columns: the tape's are views of arrays that tape owns,
    # which the program would keep from growing (the context and the entry table are not
    # the tape's: see codegen.Program)
    own = (prog.context, K.entry_table())
    prog.backward_params = tuple(c if any(c is o for o in own) else c.copy()
                                 for c in prog.backward_params)
    generated += 1
    return prog


def why_not():
    """Why the tapes seen got no program, as codegen said (tests, diagnostics)."""
    return [entry for entry in _seen.values() if isinstance(entry, str)]


def forget():
    """Drop every program, count and remembered plan (tests)."""
    _seen.clear()
    _plans.clear()
