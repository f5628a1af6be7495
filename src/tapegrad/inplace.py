"""In-place operations and the saved-value checks that make them safe.

An in-place op on a tensor that is being recorded is recorded like its out-of-place twin:
the handle is moved to the new record, and the old record keeps its value, so the records
that saved it still hold what they saw.  Like PyTorch, we still refuse to backward through a
record whose saved value was *logically* modified (the version it saw is older than the
current one), and we add what PyTorch cannot say without a second run in anomaly mode: which
in-place op made the change, and where in the user's code.

Without recording (``no_grad``, or nothing requires grad) the op writes into the tensor's
memory and bumps its version.
"""
import builtins
import re
import signal
import sys
import threading
import weakref

import numpy as np

from . import _dtype, autograd
from . import functional as F
from . import ops as K
from ._quiet import quiet_begin, quiet_end
from .ops.table import DATA
from . import tape as _tape_module
from .tape import in_arena, state
from ._frames import program_site
from .legacy import _C_TYPE
from .tensor import Tensor
from .tensor import _shared as _tensor_shared
from .tensor import multi_output_base_changed, multi_output_view_error, no_grad_view_error
from .views import ViewOf, Views, exposed, family, history_base

_LEAF_IN_PLACE = "a leaf Variable that requires grad is being used in an in-place operation."
# id(leaf) -> (weak ref, op name, "file:line") of its last change.  Not a WeakKeyDictionary:
# that compares keys with ==, which is elementwise for tensors.
_leaf_sites = {}


def user_site():
    """'file:line' of the innermost frame outside tapegrad."""
    return program_site(sys._getframe(1))


def _storage(tape, r):
    return tape.storage_of.get(r, r)


# id(t) -> (weak ref to t, t's value, tape weak ref or None, record or leaf) for a tensor t
# that shares the memory of a recorded value or of a leaf (``detach()``, ``detach_()``):
# writing into it changes that value, which backward must notice, as PyTorch does.
_shared = _tensor_shared


def share_memory(t, src):
    """Note that t's value is src's memory (t = src.detach(), or src itself before detach_())."""
    if src._tape is not None:
        target = (weakref.ref(src._tape), src._r)
    elif src._rg:
        target = (None, src)
    else:
        hit = _shared.get(id(src))
        if hit is None or hit[0]() is not src or hit[1] is not src._value:
            return
        target = hit[2:]
    key = id(t)
    _shared[key] = (weakref.ref(t, lambda _, k=key: _shared.pop(k, None)), t._value) + target
    if src._tape is not None:
        _outliving(src._tape, t)


# Tensors sharing a recorded value's memory (detach()) keep its tape's arena chunk from being
# reused after the tape is gone: 10,000 kept ``loss.detach()`` of a 784-256-1 MLP held 3 MB
# each.  Once the tape is gone nothing can observe the sharing any more, so before the next
# chunk is taken their values move into memory of their own (at a point where no op is
# halfway through writing into them).
_sharing_by_tape = {}   # tape id -> [weak refs to tensors sharing its arena]
_gone = []              # ids of tapes gone since


def _outliving(tape, t):
    refs = _sharing_by_tape.get(tape.id)
    if refs is None:
        refs = _sharing_by_tape[tape.id] = []
        weakref.finalize(tape, _gone.append, tape.id)
    refs.append(weakref.ref(t))


def _move_out_of_gone_tapes():
    while _gone:
        for ref in _sharing_by_tape.pop(_gone.pop(), ()):
            t = ref()
            if t is None:
                continue
            hit = _shared.get(id(t))
            if (hit is None or hit[0]() is not t or hit[1] is not t._value
                    or hit[2] is None or hit[2]() is not None or exposed(t)):
                continue    # (shares other memory by now, or NumPy holds it)
            link = t._alias
            if type(link) is ViewOf and link.root is not None:
                continue    # (its root lives on, elsewhere: it shares the root's value)
            del _shared[id(t)]
            t._value = t._value.copy()


_tape_module.BEFORE_TAKING_A_CHUNK = _move_out_of_gone_tapes


# tensor.py cannot import this module (it is imported from here): hand it the function
sys.modules[Tensor.__module__]._share_memory = share_memory


def assign_data(t, other):
    """``t.data = other`` for a tensor t with a history: t's record takes other's values, and
    its history stays (the straight-through ``y.data = y.data.round()``).  As in PyTorch,
    every op's backward reads the new values from then on, those recorded before too, and
    no version is counted (the handle used to take the new array while the record kept the
    old values: x's gradient was 8 where PyTorch's is 20).
    Unlike PyTorch, t keeps memory of its own: a later write into ``other`` does not show in
    t.  Another shape or dtype raises: the record would not fit."""
    value = other._value
    if value.shape != t._value.shape or value.dtype != t._value.dtype:
        raise RuntimeError(
            "tapegrad: .data of a tensor with a grad_fn can be set only to a tensor of its "
            f"shape and dtype ({list(t._value.shape)}, {t.dtype}); got "
            f"{list(value.shape)}, {other.dtype}")
    if state.trace is not None:
        state.trace.opaque(".data assignment of a traced value")
    tape, r = t._tape, t._r
    flat = value.reshape(-1)
    tape.vals[tape.voff[r]:tape.voff[r] + t._value.size] = flat
    if not np.may_share_memory(t._value, tape.vals):
        np.copyto(t._value, value)    # (traced integer data keeps its dtype on the handle)
    # the tape being recorded may hold a copy of t, taken by an op before (t lives on an
    # older tape): it takes the new values too
    current = state.tape
    hit = None if current is None or current is tape else \
        current.extern_rec.get((tape.id, r))
    if hit is not None:
        off = current.voff[hit[0]]
        current.vals[off:off + flat.size] = flat


sys.modules[Tensor.__module__]._assign_data = assign_data


def _log(t, name):
    """Record that t's storage changes now (a later backward checks who saw the old one).

    Such a change is logged at ``len(tape) - 0.5``: between the last record and the next,
    so the next record saw it (a recorded in-place op logs its own record instead, which saw
    its change only in its own output)."""
    if t._tape is not None:
        tape = t._tape
        tape.inplace.append((_storage(tape, t._r), len(tape) - 0.5, name, user_site(),
                             tuple(t._value.shape)))
    elif t._rg:
        key = id(t)
        hit = _leaf_sites.get(key)
        if hit is not None and hit[0]() is t:
            # (an optimizer's step changes the same leaves every step: the entry stays)
            hit[1], hit[2] = name, user_site()
        else:
            _leaf_sites[key] = [weakref.ref(t, lambda _, k=key: _leaf_sites.pop(k, None)),
                                name, user_site()]
    else:
        link = t._alias
        if type(link) is ViewOf and link.root is not None:
            return      # (a detached view whose root lives: the change is logged there)
        hit = _shared.get(id(t))
        if hit is None or hit[0]() is not t or hit[1] is not t._value:
            return
        tape_ref, src = hit[2:]
        if tape_ref is None:      # a leaf's own value changed
            src._version += 1
            _log(src, name)
            return
        tape = tape_ref()
        if tape is not None:
            tape.inplace.append((_storage(tape, src), len(tape) - 0.5, name, user_site(),
                                 tuple(t._value.shape)))


def _apply(t, name, compute, write, region=None, fills=False):
    """Run one in-place op: ``compute()`` gives the out-of-place result (recorded), or
    ``write()`` mutates t's memory when nothing is recorded.  A tensor that shares memory
    with others (a view, or a base with views) then carries the change to all of them:
    the part of t at ``region`` (an index; None for all of t), which the op ``fills`` with
    one value or not."""
    records = state.grad_enabled and (t._rg or compute.other_rg)
    link = t._alias
    if type(link) is Views and not link.live():
        # a root whose views are all gone is a plain tensor again (temporaries x[i] leave
        # this behind): no aliases to carry the change to, nor to hold Ctrl-C back for
        t._alias = link = None
    if link is not None:
        _check_alias_write(t, link, records, region, fills)
    if records:
        if t._tape is None and t._rg:
            raise RuntimeError(_LEAF_IN_PLACE)
        res = compute()
        if link is None:
            return _commit_recorded(t, res, name)
        with _uninterrupted():      # every alias changes, or (before compute) none
            return _commit_recorded(t, res, name, carry=True)
    if link is None:
        return _commit_written(t, write, name)
    with _uninterrupted():
        return _commit_written(t, write, name, region, carry=True)


def _commit_recorded(t, res, name, carry=False):
    if res._tape is None:  # nothing needed recording after all
        np.copyto(t._value, res._value, casting="same_kind")
        t._version += 1
        if carry:
            _carry_values(t, name)
        return t
    _move_handle(t, res, name)
    t._version += 1
    if carry:
        _carry_recorded(t, name)
    return t


def _commit_written(t, write, name, region=None, carry=False):
    write()
    _log(t, name)
    t._version += 1
    if carry:
        _carry_values(t, name, region)
    return t


class _uninterrupted:
    """Hold back Ctrl-C while an in-place change is carried to a tensor's aliases: stopped
    halfway, some aliases would hold the new values and some the old ones.  An interrupt
    that arrives meanwhile is raised when the change is complete.  (Signals reach only the
    main thread, so other threads need nothing.)"""

    __slots__ = ("previous", "caught")

    def __enter__(self):
        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.caught = []
            try:
                self.previous = signal.signal(signal.SIGINT,
                                              lambda signum, frame: self.caught.append(frame))
            except ValueError:      # (not the main interpreter)
                self.previous = None
        return self

    def __exit__(self, *exc):
        if self.previous is None:
            return False
        signal.signal(signal.SIGINT, self.previous)
        if self.caught:
            if callable(self.previous):
                self.previous(signal.SIGINT, self.caught[0])
            elif self.previous != signal.SIG_IGN:
                raise KeyboardInterrupt
        return False


def _move_handle(t, res, name, log=True):
    """t becomes the handle of record ``res`` (its in-place result); the record t held keeps
    its value for the records that saved it, and is logged as changed (unless it was
    already)."""
    old_tape, old_r = t._tape, t._r
    if old_tape is not None:
        s = _storage(old_tape, old_r)
        if log:
            old_tape.inplace.append((s, res._r if res._tape is old_tape else len(old_tape),
                                     name, user_site(), tuple(t._value.shape)))
        if res._tape is old_tape:
            old_tape.storage_of[res._r] = s
    elif res._tape is not None:
        _constant_replaced(t, res._tape, res._r, name, log)
    t._value = res._value
    t._tape, t._r, t._rg, t._keep = res._tape, res._r, True, res._keep


def _constant_replaced(t, tape, r, name, log):
    """Constant t's value is replaced by the recorded in-place op at record r of ``tape``
    (``y.div_(w)``): a storage on the tape begins, at the version this change made, not at
    0, so the change is logged as its first.  The tape's own entries of t (``Tape.consts``)
    name that record from now on instead of t: its logged changes are t's versions since,
    and a tape that held t itself, which now holds the tape, would live until a garbage
    collection."""
    if log and t._alias is None:
        tape.inplace.append((r, r, name, user_site(), tuple(t._value.shape)))
        if t._version:
            if tape.version_base is None:
                tape.version_base = {}
            tape.version_base[r] = t._version
    consts = tape.consts
    for i, (c, x, version, shape) in enumerate(consts):
        if x is t:
            consts[i] = (c, r, version, shape)


def replaced_constant_error(tape, r, expected, shape):
    """PyTorch's error for a constant some record read before the recorded in-place op at
    record r replaced its value (``_constant_replaced``), at version ``expected`` then."""
    changes = [c for c in tape.inplace if c[0] == r]
    base = tape.version_base.get(r, 0) if tape.version_base else 0
    now = builtins.max(base + len(changes), expected + 1)
    return autograd.version_error(shape, _producer_name(tape, _current_record(tape, r)), now,
                                  expected, changes[0][2:4] if changes else None)


# --- aliases: views and their base (views.py keeps the links) ---------------------------------
_OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a "
            "single memory location. Please clone() the tensor before performing the operation.")


def _check_alias_write(t, link, records, region, fills):
    """PyTorch's refusals of an in-place write into a view, before anything changes."""
    if state.trace is not None:
        # the other aliases change in Python, outside the traced records
        state.trace.opaque("an in-place change of a view or of a tensor that has views")
    if type(link) is not ViewOf:
        return
    # autograd's refusals come first, as in PyTorch, then the kernel's
    if link.detached and records:
        _check_detached_history(t, link)
    if not link.detached:
        if link.no_grad_made and records:
            raise no_grad_view_error(t, direct=True)
        if link.multi is not None and records:
            raise multi_output_view_error(t, direct=True)
        root = link.root
        if records and root._tape is None and root._rg:
            raise RuntimeError("a view of " + _LEAF_IN_PLACE)
    if link.overlaps:
        # one value written to every element is well defined, as PyTorch's fill_ and zero_;
        # anything else would write one memory location twice
        if not (fills or _region_is_distinct(t, link, region)):
            raise RuntimeError(_OVERLAP)
        if records:
            raise RuntimeError(
                "tapegrad does not yet record an in-place op on an expanded view (several of "
                "its elements are one memory location): clone() it, or write under no_grad")


_DETACHED_HISTORY = (
    "tapegrad does not yet record an in-place op on {what}: PyTorch gives the views of a "
    "detached tensor a history of their own. clone() the detached tensor first.")


def _check_detached_history(t, link):
    """A recorded in-place change inside a detached tensor's own views (x.detach()[0].mul_(w),
    or x.detach().mul_(w) while x.detach()[0] is alive) is not supported yet: say so."""
    if link.via is not None:
        raise RuntimeError(_DETACHED_HISTORY.format(what="a view of a detached tensor"))
    fam = family(t)
    for w in fam[1] if fam is not None else ():
        if w is not t and w._alias.via is t:
            raise RuntimeError(_DETACHED_HISTORY.format(
                what="a detached tensor that has views"))


def _region_is_distinct(t, link, region):
    if region is None:
        return False
    picked = link.positions(t._value.shape)[region]
    return np.unique(picked).size == np.size(picked)


def _carry_values(t, name, region=None):
    """t's memory holds its new value (at ``region``): write it into its root's region, make
    every other view of the root read its elements again, and count one version for all."""
    fam = family(t)
    if fam is None:
        return
    root, views = fam
    counted = root is t or not t._alias.unversioned     # a write through .data is not
    if root is not t:
        positions = t._alias.positions(t._value.shape)
        if region is None:
            np.put(root._value, positions, t._value)
        else:
            np.put(root._value, positions[region], t._value[region])
        if t._alias.overlaps:    # its other elements at those locations read the change
            _reread(t, root, name, counted=False)
        if counted:
            _log(root, name)
            root._version += 1
        else:
            _renew_copies(root)
    for w in views:
        if counted and w._tape is not None and _renewal_base(w) is not None:
            # a view with a history reads what its base holds now: PyTorch gives it a new
            # history from the base (AsStridedBackward0), even for a change under no_grad
            _renew(w, root, name, log=w is not t)
        elif w is not t:
            _reread(w, root, name, counted)
        elif counted:
            _drop_history(w)
    if counted:
        for w in views:
            if not w._alias.unversioned:
                w._version = root._version


def _renew_copies(t):
    """t's values changed through ``.data``, which counts no version.  PyTorch's graph holds
    t's memory, so its backward reads the new values: here the copy of t on the tape being
    recorded (a use of leaf t, of constant t, or of t from an older tape; t's own record, if
    it is a value of that tape) takes them, and so do the records that are its views or its
    hidden broadcasts, which PyTorch's ops read t through.  Later uses read that copy as
    before.  (A copy of t on an older tape keeps the old values.)"""
    tape = state.tape
    if tape is None or tape.finished:
        return
    if t._tape is tape:
        r = t._r    # (a value of this tape: its record is the memory .data wrote into)
    else:
        if t._tape is not None:
            rec = tape.extern_rec
            key = (t._tape.id, t._r)
        else:
            rec = tape.leaf_rec if t._rg else tape.const_rec
            key = id(t)
        hit = rec.get(key)
        if hit is None:
            return
        r = hit[0]
        if hit[1] != t._version or (len(hit) > 2 and hit[2]() is not t._value):
            rec.pop(key)    # (a copy of other values: the next use copies t anew)
            return
    off = tape.voff[r]
    tape.vals[off:off + tape.size[r]] = t._value.reshape(-1)
    _recompute_copies_of(tape, r)


def _recompute_copies_of(tape, r):
    """Recompute, by the forward rules, the records that are views or hidden broadcasts of
    record r (of those, and so on)."""
    cols = tape.columns()   # (a push while a view of them lives unshares them: Tape.push)
    copies = _views_of(tape, cols[0], cols[1], r, broadcasts=True)
    for g in copies:    # (in record order: each after the copy it reads)
        K.forward(*cols, tape.vals, tape.ext, g, g + 1)
    if tape.unfilled and copies:
        # (filled now: a later fill_arena must not write the old value over them)
        filled = {int(cols[3][g]) for g in copies}
        tape.unfilled = [span for span in tape.unfilled if span[0] not in filled] or None


def _reread(w, root, name, counted=True):
    """View w reads its elements from its root's value again (no record: values only)."""
    wl = w._alias
    new = np.asarray(np.take(root._value, wl.positions(w._value.shape)))   # 0-d: an array
    if w._value.flags.writeable and w._value.dtype == new.dtype and not in_arena(w._value):
        np.copyto(w._value, new)
    else:
        # a view's memory in an arena holds a record's values (a detached tensor shares
        # those of the record its root was before a recorded in-place op): they stay
        w._value = new
    if counted and not wl.unversioned:
        _log(w, name)
        _drop_history(w)


def _drop_history(w):
    """A view made under no_grad, or an output of an op that returns several views, whose
    values changed through an alias loses its history (PyTorch refuses to make it a new one):
    a use of it in a recorded op, or its grad_fn, raises from now on."""
    wl = w._alias
    if (wl.no_grad_made or wl.multi is not None) and w._tape is not None:
        wl.lost = _producer_name(w._tape, w._r)
        w._tape, w._r, w._rg, w._keep = None, -1, True, None


def _carry_recorded(t, name):
    """t was just moved to a recorded in-place result: its root's region under t takes the new
    value (PyTorch's CopySlices, through which the root's gradient flows into the in-place op),
    and every view of the root is read from it again (``AsStridedBackward0``)."""
    fam = family(t)
    if fam is None:
        return
    root, views = fam
    link = t._alias
    if root is not t:
        if link.detached:       # shares values, not history
            _carry_values(t, name)
            return
        positions = link.positions(t._value.shape)
        _move_handle(root, _copy_slices(root, positions, t), name)
        root._version += 1
    for w in views:
        wl = w._alias
        if _renewal_base(w) is not None:
            _renew(w, root, name, log=w is not t)
            continue
        if w is not t:
            _reread(w, root, name)
        if (wl.no_grad_made or wl.multi is not None) and history_base(w)._rg:
            w._rg = True    # as its base now does (and asking for its history raises)
    for w in views:
        if not w._alias.unversioned:
            w._version = root._version


def _renewal_base(w):
    """The tensor view w takes a new history from when its values change through an alias
    (its root, or the detach() result it is a view of), or None when it takes none."""
    if w._alias.no_grad_made or w._alias.multi is not None:
        return None
    base = history_base(w)
    return base if base is not w and base._rg else None


def _renew(w, root, name, log):
    """View w becomes a fresh read of its base's current value (``AsStridedBackward0``)."""
    base = _renewal_base(w)
    positions = w._alias.positions(w._value.shape)
    if base is not root:
        # positions are the root's; the base is itself a view of the root
        inverse = np.full(root._value.size, -1, dtype=np.int64)
        inverse[base._alias.positions(base._value.shape).reshape(-1)] = np.arange(
            base._value.size, dtype=np.int64)
        positions = inverse[positions]
    with autograd.enable_grad():
        new = F._gathered(base, positions, F.V_AS_STRIDED)
    _move_handle(w, new, name, log=log)


# records that bring a value onto the tape rather than compute it (a replay refreshes them)
_VALUE_RECORDS = frozenset(c for c, info in K.OPS.items() if info.family == DATA)


def _write_in_place(base, positions, src):
    """base with the elements at flat ``positions`` (distinct) replaced by src's, recorded as
    a WRITE into base's own memory: time and memory in proportion to src, not to base (a
    loop of ``buf[j] = f(j)`` over p rows stays linear in p).  None where that record does
    not fit, and the caller records a copy (``_copy_slices``):

    * while ``compile`` or a transform traces: a replay's optimiser folds and merges records
      by value, which a record that changes another's memory would defeat;
    * a base with views (its aliases take the change through ``_carry_recorded``), one that
      is a value brought onto the tape (a leaf, a constant: a replay refreshes those), an
      autograd.Function's output, one value, or one on another tape.
    """
    tape = state.tape
    # (``_apply`` has already dropped a link whose views are all gone)
    if (state.trace is not None or base._tape is not tape or tape is None or tape.finished
            or base._alias is not None):
        return None
    r0 = base._r
    n = tape.size[r0]
    if n < 2 or tape.op[r0] in _VALUE_RECORDS or r0 in tape.custom_out:
        return None
    m = src._value.size
    if src._tape is not tape and tape.top + m > tape.cap:
        return None     # (src would start a new tape)
    r1 = src._r if src._tape is tape else F._ref(tape, src)
    off0, off1 = tape.voff[r0], tape.voff[r1]
    if off1 < off0 + n and off0 < off1 + m:
        return None     # src is base's own memory
    pos = np.ascontiguousarray(positions, dtype=np.int64).reshape(-1)
    ip = tape.put_aux((m,))
    tape.aux.frombytes(pos.tobytes())
    r = tape.push(K.WRITE, r0, r1, off0, n, ip)
    # written after the record is on the tape: a Ctrl-C before leaves base's values as
    # they were, and only an unused record behind
    vals = tape.vals
    memory = vals[off0:off0 + n]
    memory[pos] = vals[off1:off1 + m]
    return F._result(tape, r, memory.reshape(base._value.shape))


def _copy_slices(base, positions, src, variant=None):
    """base with the elements at flat ``positions`` replaced by src's (``CopySlices``, or
    the node ``variant`` names), as one REPLACE record: of repeated positions the last write
    wins, and every source element gets the gradient at its target, as in PyTorch
    (functional.replaced)."""
    return F.replaced(base, src, positions, V_COPY_SLICES if variant is None else variant)


def after_native_write(t, name):
    """t's own memory was written outside an in-place op (an optimizer's step): its aliases
    read the change too."""
    _carry_values(t, name)


sys.modules[Tensor.__module__]._after_native_write = after_native_write


class _Compute:
    __slots__ = ("fn", "other_rg")

    def __init__(self, fn, other):
        self.fn = fn
        self.other_rg = isinstance(other, Tensor) and other._rg

    def __call__(self):
        return self.fn()


def _check_cast(t, other_value):
    if t._value.dtype.kind in "iub":
        kind = np.asarray(other_value).dtype.kind
        if kind == "f" or (t._value.dtype.kind == "b" and kind in "iu"):
            names = {"f": "Float", "i": "Long", "u": "Long", "b": "Bool"}
            raise RuntimeError(
                f"result type {names[kind] if kind != 'f' else 'Double'} can't be cast to the "
                f"desired output type {names[t._value.dtype.kind]}")


def _value_of(other):
    return other._value if isinstance(other, Tensor) else other


_FLOAT64 = np.dtype(np.float64)


def _arith_(name, out_of_place, ufunc):
    # (the number case of add_, sub_ and mul_: Python's float arithmetic, F._NUMBER_OPS)
    float_op = F._NUMBER_OPS.get(ufunc)

    def method(self, other, **kw):
        v = self._value
        if (float_op is not None and not kw and v.ndim == 0 and v.dtype is _FLOAT64
                and self._alias is None):
            # a number changed by a number (an SGD step's p -= lr * p.grad, under no_grad):
            # the general path below, written out for this case
            if type(other) is float:
                ov, other_rg = other, False
            elif (type(other) is Tensor and other._value.ndim == 0
                  and other._value.dtype is _FLOAT64):
                ov, other_rg = other._value, other._rg
            else:
                ov = None
            if ov is not None and not (state.grad_enabled and (self._rg or other_rg)):
                v[()] = float_op(float(v), float(ov))
                _log(self, name)
                self._version += 1
                return self
        if kw.get("rounding_mode") is not None and name == "div_":
            return _recomputed_(name, F.div)(self, other, **kw)
        kw.pop("rounding_mode", None)
        if kw:
            alpha = kw.pop("alpha", 1)
            if kw:
                raise TypeError(f"{name}() got an unexpected keyword argument "
                                f"'{next(iter(kw))}'")
            if alpha != 1:
                other = F.mul(F.as_tensor_arg(other), alpha) if isinstance(other, Tensor) \
                    else other * alpha
        ov = _value_of(other)
        if isinstance(ov, np.ndarray) and ov.shape != self._value.shape:
            shape = F.broadcast_shape(self._value.shape, ov.shape)
            if shape != self._value.shape:
                raise RuntimeError(
                    f"output with shape {list(self._value.shape)} doesn't match the broadcast "
                    f"shape {list(shape)}")
        _check_cast(self, ov)

        def write():
            tok = quiet_begin()   # inf * 0 is nan without a NumPy warning, as in PyTorch
            try:
                ufunc(self._value, ov, out=self._value, casting="same_kind")
            finally:
                quiet_end(tok)
        return _apply(self, name, _Compute(lambda: out_of_place(self, other), other), write)
    method.__name__ = name
    return method


add_ = _arith_("add_", F.add, np.add)
sub_ = _arith_("sub_", F.sub, np.subtract)
mul_ = _arith_("mul_", F.mul, np.multiply)
div_ = _arith_("div_", F.div, np.true_divide)
pow_ = _arith_("pow_", F.pow, np.power)


def _unary_(name, out_of_place, write_fn, fills=False, floating=False):
    """``floating``: the op gives floating values, which an integer or bool tensor cannot
    hold (PyTorch refuses before writing, as _same_shape does for the recomputed forms)."""
    def method(self, *args, **kwargs):
        if floating and self._value.dtype.kind in "iub":
            raise RuntimeError(f"result type {_dtype.get_default_dtype().scalar_name} can't be "
                               f"cast to the desired output type {self.dtype.scalar_name}")

        def write():
            write_fn(self._value, *args, **kwargs)
        return _apply(self, name, _Compute(lambda: out_of_place(self, *args, **kwargs), None),
                      write, fills=fills)
    method.__name__ = name
    return method


def _clamp_write(v, min=None, max=None):
    np.clip(v, -np.inf if min is None else min, np.inf if max is None else max, out=v)


clamp_ = _unary_("clamp_", F.clamp, _clamp_write)
relu_ = _unary_("relu_", F.relu, lambda v: np.maximum(v, 0, out=v))
exp_ = _unary_("exp_", F.exp, lambda v: np.exp(v, out=v), floating=True)
tanh_ = _unary_("tanh_", F.tanh, lambda v: np.tanh(v, out=v), floating=True)
sigmoid_ = _unary_("sigmoid_", F.sigmoid, lambda v: F._sigmoid(v, v), floating=True)
neg_ = _unary_("neg_", F.neg, lambda v: np.negative(v, out=v))
zero_ = _unary_("zero_", F.recorded_zero, lambda v: v.fill(0), fills=True)


def activation_(self, name, code, c=0.0, params=None):
    """Activation op ``code`` of ``ops.activation`` (see ``functional.activation``) written
    into ``self``: recorded as the op itself, as PyTorch records ``hardtanh_`` or
    ``hardswish_`` (``HardtanhBackward0``), or computed into self's memory."""
    from .ops.activation import forward_array
    p0, p1 = (0.0, 0.0) if params is None else params

    def write():
        np.copyto(self._value, forward_array(code, self._value, None, c, p0, p1),
                  casting="same_kind")
    return _apply(self, name, _Compute(lambda: F.activation(code, self, c, params), None),
                  write)


def fill_(self, value):
    v = _value_of(value)
    return _apply(self, "fill_", _Compute(lambda: F.recorded_fill(self, value), value),
                  lambda: self._value.fill(v), fills=True)


def copy_(self, src):
    src = F.as_tensor_arg(src)
    shape = F.broadcast_shape(self._value.shape, src._value.shape)
    if shape != self._value.shape:      # src must fit self, recorded or not
        raise RuntimeError(f"output with shape {list(self._value.shape)} doesn't match the "
                           f"broadcast shape {list(shape)}")

    def compute():
        return F.recorded_copy(self, src)
    return _apply(self, "copy_", _Compute(compute, src),
                  lambda: np.copyto(self._value, np.broadcast_to(src._value, self._value.shape),
                                    casting="unsafe"))


def setitem(self, key, value):
    """``self[key] = value``: recorded as a write into self's memory (``_write_in_place``)
    or, where that does not fit, as a gather from [self, value] that picks value at
    ``key``."""
    value_t = value if isinstance(value, Tensor) else None
    vv = _value_of(value)
    picked = F.select_positions(key, self._value.shape)
    if picked is not None:      # ints: found without an index array of all of self
        np_key, variant = key if type(key) is tuple else (key,), F.V_SELECT
        makes_view = True
    else:
        np_key, variant = F._index_key(key, self._value.shape)
        target = np.arange(self._value.size, dtype=np.int64).reshape(self._value.shape)
        try:
            picked = target[np_key]
        except IndexError as e:
            raise IndexError(str(e).replace("axis", "dimension")) from None
        makes_view = _makes_view(key, self._value.shape)
    link = self._alias
    if (makes_view and state.grad_enabled and type(link) is ViewOf and link.no_grad_made
            and not link.detached and (self._rg or (value_t is not None and value_t._rg))):
        # PyTorch writes through a view of this view made under no_grad: that view refuses
        raise no_grad_view_error(F.getitem(self, key), direct=True)
    if (makes_view and state.grad_enabled and type(link) is ViewOf and link.multi is not None
            and not link.detached and (self._rg or (value_t is not None and value_t._rg))):
        # ... and so does a view of an output of an op that returns several views
        raise multi_output_view_error(F.getitem(self, key), direct=True)
    if state.grad_enabled and self._tape is None and self._rg and makes_view:
        raise RuntimeError("a view of " + _LEAF_IN_PLACE)
    vshape = np.shape(picked)
    # PyTorch drops the value's leading 1s, then expands it to the indexed part
    vshape_in = np.shape(vv)
    lead = next((i for i, d in enumerate(vshape_in) if d != 1), len(vshape_in))
    if vshape_in != vshape and variant != F.V_INDEX:
        # a basic index writes through a view: PyTorch's expand errors
        F.expand(Tensor._make(np.zeros(vshape_in[lead:])), *vshape)
    elif vshape_in != vshape:
        try:
            np.broadcast_shapes(np.shape(vv), vshape)
        except ValueError:
            raise RuntimeError(
                f"shape mismatch: value tensor of shape {list(np.shape(vv))} cannot be broadcast "
                f"to indexing result of shape {list(vshape)}") from None

    def compute():
        src = value_t if value_t is not None else F.as_tensor_arg(
            np.asarray(vv, dtype=np.float64))
        if src._value.ndim > len(vshape) and lead:
            src = F.reshape(src, *src._value.shape[lead:])
        # a key that picks all of self (x[:], x[...]): PyTorch writes into self itself, fill_
        # with a 0-d value (a number is one) of another shape, else copy_ of the value
        # expanded to self's shape
        into_self = not makes_view and variant != F.V_INDEX
        if into_self and src._value.ndim == 0 and vshape != ():
            return F.recorded_fill(self, src)
        src = F.expand(src, *vshape) if src._value.shape != vshape else src
        if into_self:
            return F.recorded_copy(self, src)
        if makes_view and variant != F.V_INDEX:   # a basic index: every position once
            res = _write_in_place(self, picked, src)
            if res is not None:
                return res
        # (an advanced index writes with index_put_ into self, PyTorch's IndexPutBackward0;
        # a basic one copies into a view of self, CopySlices)
        return _copy_slices(self, np.asarray(picked), src,
                            V_INDEX_PUT if variant == F.V_INDEX else V_COPY_SLICES)

    def write():
        self._value[np_key] = vv
    _apply(self, "__setitem__", _Compute(compute, value), write, region=np_key)


V_COPY_SLICES, V_INDEX_PUT = 14, 45    # structure._GATHER_NAMES


def _makes_view(key, shape):
    """Whether PyTorch writes ``x[key] = v`` through a view of x (a basic index that picks
    less than all of x) rather than into x itself; the leaf error then says so."""
    key = key if isinstance(key, tuple) else (key,)

    def dims(k):
        if k is None or k is Ellipsis or isinstance(k, bool):
            return 0
        v = k._value if isinstance(k, Tensor) else k
        if isinstance(v, (np.ndarray, list)) and np.asarray(v).dtype.kind == "b":
            return np.ndim(v)
        return 1
    d = 0
    for i, k in enumerate(key):
        if k is Ellipsis:
            d = len(shape) - builtins.sum(dims(j) for j in key[i + 1:])
            continue
        if k is None or (isinstance(k, (int, np.integer)) and not isinstance(k, bool)):
            return True
        if isinstance(k, Tensor) and k._value.ndim == 0 and k._value.dtype.kind in "iu":
            return True
        if isinstance(k, slice):
            n = shape[d] if d < len(shape) else 0
            if k.indices(n) != (0, n, 1):
                return True
        d += dims(k)
    return False


def check_saved_versions(tape, need, op, a0, a1):
    """Raise PyTorch's error when a record about to be swept saw an older version of a value."""
    entries = tape.inplace
    by_storage = {}
    for s, at, name, where, shape in entries:
        by_storage.setdefault(s, []).append((at, name, where, shape))
    needed = np.nonzero(need)[0]
    # newest first: the order the sweep reaches them, so the error is PyTorch's first one
    for r in needed[::-1]:
        code = int(op[r])
        reads = K.OPS[code].reads_when(a0[r] >= 0 and need[a0[r]], a1[r] >= 0 and need[a1[r]])
        if not reads:
            continue
        read = []
        # an in-place op reads the value it replaces as its self: PyTorch saves a copy of that
        # (and tapegrad keeps it untouched), so only its other reads are checked
        if reads & K.READS_X0 and a0[r] >= 0 and (
                tape.storage_of.get(int(r), -1) != _storage(tape, int(a0[r]))):
            read.append(int(a0[r]))
        if reads & K.READS_X1 and a1[r] >= 0:
            read.append(int(a1[r]))
        if reads & K.READS_OUT:
            read.append(int(r))
        for j, s in enumerate(read):
            while int(op[s]) in (K.BCAST, K.EXPAND_S):  # a broadcast copy stands for its source
                s = int(a0[s])
            read[j] = s
            _check_storage(tape, by_storage, r, s)
        # a view shares its base's versions (PyTorch's views share one counter): a change of
        # the base since r read the view is one too, whether or not the view's own tensor
        # lived to see it (checked after r's own reads: where both changed, PyTorch's matrix
        # product names the operand that is no view)
        for view in read:
            s = view
            while _is_view_record(tape, op, s):
                s = int(a0[s])
                _check_storage(tape, by_storage, r, s, view)


def _check_storage(tape, by_storage, r, s, view=None):
    """Raise PyTorch's error if record s's storage changed since record r read s's value
    (or, with ``view``, that view record's value of s's)."""
    storage = _storage(tape, s)
    changes = by_storage.get(storage)
    if not changes:
        return
    # r saw the changes made before it was recorded; its own output (s == r) also includes
    # the change that produced it
    seen = sum(1 for at, *_ in changes if at < r or (s == r and at == r))
    if seen == len(changes):
        return
    at, name, where, shape = changes[seen]
    base = tape.version_base.get(storage, 0) if tape.version_base else 0
    if view is None and tape.views.get(s, (None, None))[1] is not None:
        view = s    # an output of split, chunk or unbind: changed through any alias, its error
    if view is not None:
        raise view_changed_error(tape, view, base + len(changes), base + seen, (name, where))
    # PyTorch names the node that made r's own output, or else the tensor's grad_fn now: the
    # last recorded in-place op on it
    producer = _producer_name(tape, s if s == r else _current_record(tape, s))
    raise autograd.version_error(shape, producer, base + len(changes), base + seen,
                                 (name, where))


def _is_view_record(tape, op, r):
    """Whether record r is a view of its input in PyTorch: a gather or reshape of a kind
    PyTorch makes as a view."""
    code = op[r]
    if code == K.GATHER:
        return tape.aux[tape.ip[r]] in F._VIEW_VARIANTS
    if code == K.RESHAPE:
        return tape.aux[tape.ip[r]] in F._RESHAPE_VIEWS
    return False


def _views_of(tape, op, a0, r, broadcasts=False):
    """The records that are views of record r's value, and views of those, and so on (with
    ``broadcasts``, the hidden broadcasts of any of them too), in record order."""
    found, todo = [], [r]
    while todo:
        src = todo.pop()
        for v in np.nonzero(a0 == src)[0].tolist():
            if (broadcasts and op[v] in (K.BCAST, K.EXPAND_S)) or _is_view_record(tape, op, v):
                found.append(v)
                todo.append(v)
    return sorted(found)


def saved_view_of(tape, s, need, op, a0, a1):
    """The view of record s's value (views of views included) whose value a record about to
    be swept reads for a gradient, as PyTorch saves it, sharing s's versions, if such a read
    is newer than any of s itself (the backward meets it first); or None.  (Read before a
    change of s, it makes the backward raise: autograd looks only where s's version
    changed.)"""
    newest, view = autograd.newest_read(tape, s, need, op, a0, a1), None
    for v in _views_of(tape, op, a0, s):
        r = autograd.newest_read(tape, v, need, op, a0, a1)
        if r > newest:
            newest, view = r, v
    return view


def view_changed_error(tape, r, now, expected, site):
    """PyTorch's error for view record r, read by a backward after its base changed in place
    (at version ``now``, the view saved at ``expected``): the view's history is made again
    from its base, an AsStrided node, which an output of an op returning several views
    cannot have."""
    shape, multi = tape.views.get(r, ((int(tape.size[r]),), None))
    if multi is not None:
        return multi_output_base_changed(*multi)
    return autograd.version_error(shape, "AsStrided", now, expected, site)


def _current_record(tape, s):
    """The record that last wrote the storage record s's value lives in."""
    root = _storage(tape, s)
    return builtins.max([root] + [x for x, st in tape.storage_of.items() if st == root])


def _producer_name(tape, rec):
    """The grad_fn name PyTorch's version error shows for record rec ('' for leaves):
    ``ExpBackward0`` -> ``Exp``, ``ClampBackward1`` -> ``Clamp1``."""
    Node, _node_of_input = autograd.Node, autograd._node_of_input
    node = _node_of_input(tape, rec)
    if not isinstance(node, Node):
        return ""
    name = node.name()
    m = re.fullmatch(r"(.+)Backward(\d*)", name)     # (an autograd.Function's has no digit)
    if m is None:
        return name
    return m.group(1) + ("" if m.group(2) in ("", "0") else m.group(2))


def leaf_site(leaf):
    """(op name, 'file:line') of the last in-place change of a leaf, or None."""
    hit = _leaf_sites.get(id(leaf))
    if hit is None or hit[0]() is not leaf:
        return None
    return hit[1], hit[2]


def _same_shape(t, res, name):
    if res._value.shape != t._value.shape:
        raise RuntimeError(f"output with shape {list(t._value.shape)} doesn't match the "
                           f"broadcast shape {list(res._value.shape)}")
    if t._value.dtype.kind in "iub" and res._value.dtype.kind == "f":
        # (the floating result has the default dtype, which PyTorch's message names)
        raise RuntimeError(f"result type {res.dtype.scalar_name} can't be cast to the desired "
                           f"output type {t.dtype.scalar_name}")
    if t._value.dtype.kind == "b" and res._value.dtype.kind != "b":
        raise RuntimeError(f"result type {res.dtype.scalar_name} can't be cast to the desired "
                           "output type Bool")
    return res


def _recomputed_(name, out_of_place):
    """The in-place form of an out-of-place function: recorded as the function's result,
    or, when nothing records, its value written into the tensor's memory."""
    def method(self, *args, **kwargs):
        def compute():
            return _same_shape(self, out_of_place(self, *args, **kwargs), name)

        def write():
            with autograd.no_grad():
                res = _same_shape(self, out_of_place(self, *args, **kwargs), name)
            np.copyto(self._value, res._value, casting="unsafe")
        c = _Compute(compute, None)
        c.other_rg = builtins.any(isinstance(a, Tensor) and a._rg
                                  for a in (*args, *kwargs.values()))
        return _apply(self, name, c, write)
    method.__name__ = name
    return method


def _filled_(name, draw):
    """An in-place fill with values that do not depend on the tensor's (``draw(shape)``)."""
    def method(self, *args, **kwargs):
        value = draw(self, *args, **kwargs)

        def compute():
            return F.add(F.mul(self, 0.0), Tensor._make(value))

        def write():
            np.copyto(self._value, value, casting="unsafe")
        return _apply(self, name, _Compute(compute, None), write, fills=True)
    method.__name__ = name
    return method


_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less",
                "less_equal", "not_equal")


def _compared_(name, compare):
    """``x.gt_(y)`` and the other comparisons in place: 1 where it holds, 0 where not, in
    x's dtype.  Recorded, the result's gradient is zero, as PyTorch's (whose node is the
    comparison's, ``GtBackward0``; here the zero is an ``x * 0`` added to the values)."""
    def method(self, other):
        with autograd.no_grad():
            value = compare(self, other)._value
        if F.broadcast_shape(self._value.shape, value.shape) != self._value.shape:
            raise RuntimeError(
                f"output with shape {list(self._value.shape)} doesn't match the broadcast "
                f"shape {list(value.shape)}")
        value = np.broadcast_to(value, self._value.shape).astype(self._value.dtype)

        def compute():
            return F.add(F.mul(self, 0.0), Tensor._make(value))

        def write():
            np.copyto(self._value, value)
        return _apply(self, name, _Compute(compute, None), write)
    method.__name__ = name
    return method


def _draw_uniform(t, from_=0.0, to=1.0, *, generator=None):
    from .creation import stream_for
    return stream_for(generator).uniform(from_, to, t._value.shape)


def _draw_normal(t, mean=0.0, std=1.0, *, generator=None):
    from .creation import stream_for
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    return stream_for(generator).normal(mean, std, t._value.shape)


def _draw_bernoulli(t, p=0.5, *, generator=None):
    from .creation import stream_for
    prob = p._value if isinstance(p, Tensor) else p
    return stream_for(generator).bernoulli(prob, t._value.shape)


def _draw_exponential(t, lambd=1.0, *, generator=None):
    from .creation import stream_for
    return stream_for(generator).exponential(lambd, t._value.shape)


_RANDOM_SIGNATURES = (
    "random_() received an invalid combination of arguments - got ({}), but expected one "
    "of:\n * (*, torch.Generator generator = None)\n"
    " * (int from, int to, *, torch.Generator generator = None)\n"
    " * (int to, *, torch.Generator generator = None)\n")


def _draw_random(t, *args, generator=None, **bounds):
    """``random_()``, ``random_(to)``, ``random_(from, to)``: integers drawn uniformly from
    ``[from, to - 1]``; without ``to``, up to the largest integer of t's dtype (2**53 for
    float64, whose integers are exact up to there)."""
    from .creation import stream_for
    given = list(args) + [bounds.pop(k) for k in ("from", "to") if k in bounds]
    if bounds or len(given) > 2 or any(
            isinstance(a, bool) or not isinstance(a, (int, np.integer)) for a in given):
        raise TypeError(_RANDOM_SIGNATURES.format(", ".join(type(a).__name__ for a in given)))
    dt = t._value.dtype
    top = 2 ** 53 if dt.kind == "f" else 1 if dt.kind == "b" else int(np.iinfo(dt).max)
    if len(args) == 1 and not given[1:]:
        low, high = 0, int(given[0])             # random_(to)
    elif len(given) == 2:
        low, high = int(given[0]), int(given[1])
    else:
        low, high = (int(given[0]) if given else 0), top + 1
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    if dt.kind in "iub":
        info = (0, 1) if dt.kind == "b" else (int(np.iinfo(dt).min), top)
        if not info[0] <= low <= info[1]:
            raise RuntimeError(f"from is out of bounds for {_C_TYPE[dt.name]}")
        if not info[0] <= high - 1 <= info[1]:
            raise RuntimeError(f"to - 1 is out of bounds for {_C_TYPE[dt.name]}")
    if not given:
        # without bounds PyTorch reduces a word modulo the dtype's range, not [from, to)
        return stream_for(generator).full_range(t._value.shape, dt)
    wide = np.uint64 if high > 2 ** 63 - 1 else np.int64
    return stream_for(generator).integers(low, high, t._value.shape, dtype=wide)


def _continuous(t, what):
    """The error PyTorch raises for a continuous distribution drawn into integers."""
    if t._value.dtype.kind != "f":
        raise RuntimeError(f"{what} distribution is a continuous probability distribution. "
                           f"dtype must be a floating point but you specified "
                           f"{_C_TYPE[t._value.dtype.name]}")


def _draw_cauchy(t, median=0.0, sigma=1.0, *, generator=None):
    from .creation import stream_for
    _continuous(t, "Cauchy")
    if not sigma > 0.0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma:g}")
    return stream_for(generator).cauchy(median, sigma, t._value.shape)


def _draw_log_normal(t, mean=1.0, std=2.0, *, generator=None):
    from .creation import stream_for
    if t._value.dtype.kind != "f":
        raise NotImplementedError(f'"log_normal_cpu" not implemented for '
                                  f"'{t.dtype.scalar_name}'")
    if not std > 0.0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")
    return stream_for(generator).lognormal(mean, std, t._value.shape)   # exp(normal_)


def _draw_geometric(t, p, *, generator=None):
    """The number of Bernoulli(p) trials up to the first success: 1, 2, ..."""
    from .creation import stream_for
    if not 0.0 < p < 1.0:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    return stream_for(generator).geometric(p, t._value.shape)


def _fill_diagonal(t, fill_value, wrap=False):
    v = t._value
    if v.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if v.ndim > 2 and len(set(v.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    mask = np.zeros(v.shape, dtype=bool)
    np.fill_diagonal(mask, True, wrap=wrap)
    return F.where(Tensor._make(mask), fill_value, t)


_UNARY_IN_PLACE = ("sqrt", "abs", "absolute", "log", "log1p", "expm1", "sin", "cos", "tan", "sinh",
                   "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "floor", "ceil",
                   "round", "trunc", "frac", "sign", "reciprocal", "rsqrt", "square", "erf",
                   "erfc", "exp2", "log2", "log10", "sgn", "deg2rad", "rad2deg",
                   "nan_to_num", "clamp_min", "clamp_max", "tril", "triu", "masked_fill",
                   "index_fill", "index_add", "index_copy", "scatter", "scatter_add",
                   "scatter_reduce", "index_reduce",
                   "addcmul", "addcdiv", "lerp", "atan2", "hypot", "xlogy", "fmod",
                   "remainder", "copysign", "arctan2", "arcsin", "arccos", "arctan",
                   "arcsinh", "arccosh", "arctanh", "fix", "sinc", "addmm", "addmv", "addr",
                   "baddbmm", "addbmm", "logit", "floor_divide", "xlog1py", "fmax", "fmin",
                   "ldexp", "float_power", "lgamma", "digamma", "erfinv", "mvlgamma",
                   "polygamma", "i0", "put", "index_put", "bitwise_and", "bitwise_or",
                   "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift",
                   "logical_and", "logical_or", "logical_xor", "logical_not")


# the in-place forms PyTorch has no derivative for: their node (``AsinhBackward1``, named
# after the op they alias) refuses the backward
_NO_IN_PLACE_DERIVATIVE = {"asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh",
                           "arcsinh": "Asinh", "arccosh": "Acosh", "arctanh": "Atanh"}


def _without_derivative(out_of_place, op):
    """``out_of_place`` whose result, where it would have a history, has PyTorch's node
    ``<op>Backward1`` instead, whose backward raises PyTorch's NotImplementedError."""
    from .function import Function

    class InPlaceWithoutDerivative(Function):
        @staticmethod
        def forward(ctx, x):
            return out_of_place(x)

        @staticmethod
        def backward(ctx, grad):
            raise NotImplementedError(f"the derivative for 'inplace version of {op.lower()}' "
                                      "is not implemented.")
    InPlaceWithoutDerivative._backward_cls = type(
        f"{op}Backward1", (InPlaceWithoutDerivative._backward_cls,),
        {"__slots__": (), "__module__": "tapegrad.autograd.function",
         "name": lambda self: f"{op}Backward1"})

    def fn(self):
        if state.grad_enabled and self.requires_grad:
            return InPlaceWithoutDerivative.apply(self)
        return out_of_place(self)
    return fn


def _in_place_methods(functions):
    """``name_`` for each out-of-place function ``name`` (a Tensor method) above."""
    out = {f"{n}_": _recomputed_(f"{n}_", functions[n]) for n in _UNARY_IN_PLACE
           if n in functions}
    for n, op in _NO_IN_PLACE_DERIVATIVE.items():
        out[f"{n}_"] = _recomputed_(f"{n}_", _without_derivative(functions[n], op))
    out["__imod__"] = out["remainder_"]
    out["__ifloordiv__"] = out["floor_divide_"]
    out["uniform_"] = _filled_("uniform_", _draw_uniform)
    out["normal_"] = _filled_("normal_", _draw_normal)
    out["bernoulli_"] = _filled_("bernoulli_", _draw_bernoulli)
    out["exponential_"] = _filled_("exponential_", _draw_exponential)
    out["random_"] = _filled_("random_", _draw_random)
    out["cauchy_"] = _filled_("cauchy_", _draw_cauchy)
    out["log_normal_"] = _filled_("log_normal_", _draw_log_normal)
    out["geometric_"] = _filled_("geometric_", _draw_geometric)
    out["fill_diagonal_"] = _recomputed_("fill_diagonal_", _fill_diagonal)
    for n in _COMPARISONS:
        out[f"{n}_"] = _compared_(f"{n}_", functions[n])
    out["masked_scatter_"] = _recomputed_("masked_scatter_",
                                          _mask_within(functions["masked_scatter"]))
    return out


def _mask_within(masked_scatter):
    """masked_scatter_'s mask broadcasts to the tensor's shape, never beyond it."""
    def fn(self, mask, source):
        shape = self._value.shape
        if isinstance(mask, Tensor) and F.broadcast_shape(shape, mask._value.shape) != shape:
            m = mask._value.shape
            if len(m) > len(shape):
                raise RuntimeError(
                    f"expand(CPUBoolType{{{list(m)}}}, size={list(shape)}): the number of sizes "
                    f"provided ({len(shape)}) must be greater or equal to the number of "
                    f"dimensions in the tensor ({len(m)})")
            F.expand(Tensor._make(np.zeros(m, bool)), *shape)   # PyTorch's expand error
        return masked_scatter(self, mask, source)
    return fn


# --- in-place view ops: squeeze_, unsqueeze_, t_, transpose_ change the tensor's shape -----
# (their GATHER/RESHAPE variants, F.V_SQUEEZE_ALL_ ...: PyTorch's nodes of the in-place forms)


def _plan_squeeze(t, dim=None):
    variant = (F.V_SQUEEZE_ALL_ if dim is None else
               F.V_SQUEEZE_DIMS_ if isinstance(dim, (tuple, list)) else F.V_SQUEEZE_DIM_)
    return variant, F.squeeze(Tensor._make(F._flat_index(t)), dim)._value


def _plan_unsqueeze(t, dim):
    return F.V_UNSQUEEZE_, F.unsqueeze(Tensor._make(F._flat_index(t)), dim)._value


def _plan_t(t):
    try:
        idx = F.t(Tensor._make(F._flat_index(t)))._value
    except RuntimeError as e:
        raise RuntimeError(str(e).replace("t()", "t_()")) from None
    return F.V_T_, idx


def _plan_transpose(t, dim0, dim1):
    return F.V_TRANSPOSE_, F.transpose(Tensor._make(F._flat_index(t)), dim0, dim1)._value


def _reshaped_in_place(name, plan):
    """An in-place view op: t takes the shape (and, for t_, the element order) of the
    out-of-place op's result, as PyTorch changes a tensor's sizes and strides in place.

    ``plan(t, *args)`` gives the node's variant and t's flat positions laid out as the
    result.  Recorded, t moves to a record of the op (its grad_fn is PyTorch's in-place
    node); otherwise its value is laid out anew.  Its views and its root keep pointing at the
    same elements: the positions of the links are laid out with it."""
    def method(self, *args, **kwargs):
        variant, idx = plan(self, *args, **kwargs)
        flat = idx.reshape(-1)
        # every element, in order: squeeze, unsqueeze, t_ of a vector (as_strided_ of a view
        # may keep only some of its elements)
        in_order = flat.size == self._value.size and bool(np.all(flat[1:] > flat[:-1]))
        records = state.grad_enabled and self._rg
        link = self._alias
        if records:
            if self._tape is None:
                raise RuntimeError(_LEAF_IN_PLACE)
            if (type(link) is ViewOf and not link.detached and link.root is not None
                    and link.root._tape is None and link.root._rg):
                raise RuntimeError("a view of " + _LEAF_IN_PLACE)
        elif not in_order and self._tape is not None:
            # the record keeps the old order: PyTorch's next backward through it fails
            raise RuntimeError(
                f"tapegrad does not support {name}() without recording on a tensor that has "
                "a history (its elements would change order under the recorded values); "
                f"call {name}() with grad enabled, or on a detach()ed tensor")
        if link is not None and state.trace is not None:
            state.trace.opaque(f"{name}() on a view or on a tensor that has views")
        fam = family(self) if link is not None else None
        if fam is not None:
            # lay the links out anew before self changes (positions read its old shape)
            root, views = fam
            if type(link) is ViewOf:
                if not (in_order and link.index is None):
                    link.index = link.positions(self._value.shape).reshape(-1)[flat].reshape(
                        idx.shape)
            elif not in_order:
                # self is the root: its element order changes, so every view's positions do
                new_at = np.empty(flat.size, dtype=np.int64)
                new_at[flat] = np.arange(flat.size, dtype=np.int64)
                for w in views:
                    w._alias.index = new_at[w._alias.positions(w._value.shape)]
        if records:
            if in_order:
                res = F._reshaped(self, idx.shape, variant)
            else:
                res = F._gathered(self, idx, variant)
            _move_handle(self, res, name)
        else:
            v = self._value
            self._value = (v.reshape(idx.shape) if in_order
                           else np.ascontiguousarray(v.reshape(-1)[flat].reshape(idx.shape)))
            _log(self, name)
        self._version += 1
        if fam is not None:
            root, views = fam
            if root is not self:
                root._version += 1
            for w in views:
                if not w._alias.unversioned:
                    w._version = root._version
        return self
    method.__name__ = name
    return method


def _python_scalar(kind):
    """How an element of a tensor of dtype ``kind`` reaches a Python callable, and how its
    answer is written back (an int tensor truncates a float answer, as PyTorch does)."""
    return {"b": bool, "i": int, "u": int}.get(kind, float)


def _element_value(result, convert):
    # PyTorch takes any real number (a 0-d tensor too), and refuses a string or None
    if isinstance(result, (str, bytes)) or not hasattr(type(result), "__float__"):
        raise TypeError(f"must be real number, not {type(result).__name__}")
    if convert is bool:
        return bool(result)
    if convert is int and isinstance(result, int):
        return result       # (an int past 2 ** 53 is not rounded through a float)
    return convert(float(result))


def _elementwise_(self, name, fn, operands):
    """``self`` with each element replaced by ``fn`` of it (and of the elements of
    ``operands`` at the same place), called on Python scalars in row-major order, as
    PyTorch's ``apply_``/``map_`` do.  A callable that raises stops there: the elements
    done so far are written (PyTorch writes each as it goes), then the error propagates.
    The write goes through ``_apply``, so the tensor's version is counted and its views
    and the records that saved its memory see the change."""
    convert = _python_scalar(self._value.dtype.kind)
    values = self._value.copy()
    operand_values = [np.broadcast_to(o._value, values.shape) for o in operands]
    readers = [_python_scalar(o._value.dtype.kind) for o in operands]
    failure = None
    try:
        for index in np.ndindex(values.shape):
            args = [convert(values[index])] + [read(o[index]) for read, o in
                                               zip(readers, operand_values)]
            values[index] = _element_value(fn(*args), convert)
    except BaseException as e:      # (also KeyboardInterrupt: keep what was computed)
        failure = e

    def write():
        np.copyto(self._value, values)

    def compute():      # (never recorded: a tensor that requires grad was refused)
        raise AssertionError(f"{name} is not recorded")
    _apply(self, name, _Compute(compute, None), write)
    if failure is not None:
        raise failure
    return self


def _refuse_grad(t, name):
    if t.requires_grad:
        raise RuntimeError(f"Can't call {name}() on Variable that requires grad. Use "
                           f"var.detach().{name}() instead.")


def apply_(self, callable):  # noqa: A002 - PyTorch's argument name
    """Replace each element of ``self`` by ``callable(element)``, the element a Python
    float (int, bool for such tensors), in place; refused for a tensor that requires grad,
    as in PyTorch (the callable is opaque to autograd)."""
    _refuse_grad(self, "apply_")
    return _elementwise_(self, "apply_", callable, ())


def map_(self, tensor, callable):  # noqa: A002 - PyTorch's argument name
    """Replace each element of ``self`` by ``callable(element, other)``, ``other`` the
    element of ``tensor`` (broadcast to self's shape, of self's dtype) at the same place,
    in place; refused where either requires grad, as in PyTorch."""
    _refuse_grad(self, "map_")
    _refuse_grad(tensor, "map_")
    if tensor._value.dtype != self._value.dtype:
        raise TypeError(f"map_: expected {self.type()} for 'other' (got {tensor.type()})")
    F.expand(tensor, *self._value.shape)      # (PyTorch's errors for a shape that cannot)
    return _elementwise_(self, "map_", callable, (tensor,))


METHODS = {
    "add_": add_, "sub_": sub_, "mul_": mul_, "div_": div_, "pow_": pow_,
    "__iadd__": add_, "__isub__": sub_, "__imul__": mul_, "__itruediv__": div_,
    "__ipow__": pow_, "clamp_": clamp_, "clip_": clamp_, "relu_": relu_, "exp_": exp_,
    "tanh_": tanh_, "sigmoid_": sigmoid_, "neg_": neg_, "zero_": zero_, "fill_": fill_,
    # (PyTorch's other names of the same ops)
    "multiply_": mul_, "divide_": div_, "true_divide_": div_, "subtract_": sub_,
    "negative_": neg_,
    "copy_": copy_, "__setitem__": setitem, "apply_": apply_, "map_": map_,
    "squeeze_": _reshaped_in_place("squeeze_", _plan_squeeze),
    "unsqueeze_": _reshaped_in_place("unsqueeze_", _plan_unsqueeze),
    "t_": _reshaped_in_place("t_", _plan_t),
    "transpose_": _reshaped_in_place("transpose_", _plan_transpose),
    "swapaxes_": _reshaped_in_place("swapaxes_", _plan_transpose),
    "swapdims_": _reshaped_in_place("swapdims_", _plan_transpose),
}


# the driver calls these through its seam (autograd.ABOVE): it sits below this module
autograd.ABOVE.check_saved_versions = check_saved_versions
autograd.ABOVE.leaf_site = leaf_site
autograd.ABOVE.producer_name = _producer_name
autograd.ABOVE.replaced_constant_error = replaced_constant_error
autograd.ABOVE.saved_view_of = saved_view_of
autograd.ABOVE.view_changed_error = view_changed_error
