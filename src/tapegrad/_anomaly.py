"""Anomaly detection (``torch.autograd.detect_anomaly``): the switches, the forward stacks
and the per-node nan check of a backward.

The mode is one flag for the whole process, as PyTorch's (``AnomalyMode`` is a static bool,
not per thread).  While it is on:

- every record pushed on a tape keeps the user's stack at the op that made it, so that a
  backward that fails can say which forward line made the failing node.  ``Tape.push`` and
  ``functional._emit`` are swapped for versions that take the stack only while the mode is
  on: the ordinary forward pays nothing for it;
- with ``check_nan`` a backward sweeps one record at a time and looks at what each record
  added to its inputs' gradients (``CheckedSweep``); the first record in backward order
  whose contribution holds a nan raises PyTorch's error.  Without the mode the sweep is the
  one compiled call it always is.
"""
import sys
import traceback
import warnings
import weakref

import numpy as np

from . import ops as K
from ._frames import is_own_code
from . import tape as _tape_module

__all__ = ["detect_anomaly", "set_detect_anomaly"]

_enabled = False
_check_nan = True
_checking = False   # both: read by every backward, so one load (the fast path's cost)

# tape -> {record: the user's stack (a traceback.StackSummary) when the record was pushed}
_stacks = weakref.WeakKeyDictionary()


def is_anomaly_enabled():
    """Whether anomaly detection is on (``detect_anomaly``, ``set_detect_anomaly``).

    Example:
        >>> tg.is_anomaly_enabled()
        False
        >>> with tg.autograd.set_detect_anomaly(True):
        ...     print(tg.is_anomaly_enabled())
        True
    """
    return _enabled


def is_anomaly_check_nan_enabled():
    """Whether anomaly detection, when on, raises on a nan a backward node computes.

    Example:
        >>> tg.is_anomaly_check_nan_enabled()
        True
        >>> with tg.autograd.set_detect_anomaly(True, check_nan=False):
        ...     print(tg.is_anomaly_check_nan_enabled())
        False
    """
    return _check_nan


def set_anomaly_enabled(enabled, check_nan=True):
    """Switch anomaly detection on or off for good (what ``set_detect_anomaly`` calls).

    Example:
        >>> tg.set_anomaly_enabled(True)
        >>> tg.is_anomaly_enabled()
        True
        >>> tg.set_anomaly_enabled(False)
        >>> tg.is_anomaly_enabled()
        False
    """
    global _enabled, _check_nan, _checking
    _enabled, _check_nan = bool(enabled), bool(check_nan)
    _checking = _enabled and _check_nan
    _swap_recorders(_enabled)


def checking():
    """Whether a backward checks each node for nan now."""
    return _enabled and _check_nan


class detect_anomaly:
    """Context manager that turns anomaly detection on inside (and restores the previous
    mode on exit), warning once on creation that the mode is for debugging.

    The forward ops run inside keep their stack; with ``check_nan`` (the default) a backward
    raises ``RuntimeError: Function 'DivBackward0' returned nan values in its 1th output.``
    at the first node (in backward order) whose computed gradient holds a nan, after a
    warning naming the node and the forward call that made it.  As in PyTorch it is not a
    decorator.

    Example:
        >>> import warnings
        >>> x = tg.tensor([0.0, 1.0], requires_grad=True)
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     with tg.autograd.detect_anomaly():
        ...         try:
        ...             (x / x).sum().backward()
        ...         except RuntimeError as e:
        ...             print(e)
        Function 'DivBackward0' returned nan values in its 1th output.
    """

    def __init__(self, check_nan=True):
        self.prev = _enabled
        self.check_nan = check_nan
        self.prev_check_nan = _check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)

    def __enter__(self):
        set_anomaly_enabled(True, self.check_nan)

    def __exit__(self, *args):
        set_anomaly_enabled(self.prev, self.prev_check_nan)


class set_detect_anomaly:
    """Turn anomaly detection on or off: as a call for good, or as a context manager that
    restores the previous mode on exit.  See ``detect_anomaly`` for what the mode does.

    Example:
        >>> with tg.autograd.set_detect_anomaly(True):
        ...     print(tg.is_anomaly_enabled())
        True
        >>> tg.is_anomaly_enabled()
        False
    """

    def __init__(self, mode, check_nan=True):
        self.prev = _enabled
        self.prev_check_nan = _check_nan
        set_anomaly_enabled(mode, check_nan)

    def __enter__(self):
        pass

    def __exit__(self, *args):
        set_anomaly_enabled(self.prev, self.prev_check_nan)


# ---------------------------------------------------------------------------------------------
# Forward stacks
# ---------------------------------------------------------------------------------------------
_originals = {}


def _user_stack():
    """The stack of the caller, without tapegrad's own frames (PyTorch's shows the Python
    frames of the program, its ops being C++)."""
    frames = []
    f = sys._getframe(2)
    while f is not None:
        if not is_own_code(f.f_code.co_filename):
            frames.append((f, f.f_lineno))
        f = f.f_back
    frames.reverse()
    return traceback.StackSummary.extract(frames)


def _remember(tape, r):
    per = _stacks.get(tape)
    if per is None:
        per = _stacks[tape] = {}
    per[r] = _user_stack()


# The module namespaces whose ``_emit`` every op they record goes through (functional,
# custom_ops): they hand themselves in as they load (``emits_through``), so that this module,
# which they import, imports none of them.
_EMITTERS = []
# autograd.node_for, handed in by autograd as it loads (the same reason)
node_for = None
# (tape, r, g) -> [(input record, contribution array)] by record r's differentiable rule,
# handed in by higher.py
contributions = None


def emits_through(namespace):
    """Register a module's globals, whose ``_emit`` anomaly mode swaps for one that keeps the
    forward stack of each record."""
    _EMITTERS.append(namespace)


def _swap_recorders(on):
    """Record stacks (on) or not: swap the two functions every record goes through."""
    Tape = _tape_module.Tape
    if on and not _originals:
        push, emit = Tape.push, _EMITTERS[0]["_emit"]
        _originals["push"], _originals["emit"] = push, emit

        def push_keeping_stack(self, *args, **kwargs):
            r = push(self, *args, **kwargs)
            _remember(self, r)
            return r

        def emit_keeping_stack(tape, *args):
            r = len(tape.op)
            out = emit(tape, *args)
            _remember(tape, r)
            return out

        Tape.push = push_keeping_stack
        for namespace in _EMITTERS:
            namespace["_emit"] = emit_keeping_stack
    elif not on and _originals:
        Tape.push = _originals.pop("push")
        emit = _originals.pop("emit")
        for namespace in _EMITTERS:
            namespace["_emit"] = emit


def warn_error_in(tape, r, name):
    """PyTorch's warning when a node raised under anomaly mode: the node's name and the
    forward stack that made it (or that there is none: it was made with the mode off)."""
    stack = _stacks.get(tape, {}).get(r) if tape is not None else None
    if stack is None:
        warnings.warn(f"Error detected in {name}. No forward pass information available. "
                      "Enable detect anomaly during forward pass for more information.",
                      stacklevel=2)
        return
    warnings.warn(f"Error detected in {name}. Traceback of forward call that caused the "
                  f"error:\n{''.join(stack.format())}", stacklevel=2)


def nan_error(tape, r, name, index):
    warn_error_in(tape, r, name)
    return RuntimeError(f"Function '{name}' returned nan values in its {index}th output.")


# ---------------------------------------------------------------------------------------------
# The check
# ---------------------------------------------------------------------------------------------
_HIDDEN = frozenset([K.BCAST, K.EXPAND_S, K.LEAF, K.CONST, K.EXTERN])


def node_name(tape, r):
    """The name PyTorch's error gives record r's node."""
    custom = tape.custom.get(r)
    if custom is not None:
        return custom.backward_cls.__name__
    return node_for(tape, r).name()


def input_positions(tape, r):
    """[(record, index of the node's output it gets)] for the inputs of record r, indexed as
    PyTorch numbers a node's outputs (its ``next_functions``)."""
    code = tape.op[r]
    if code in (K.CAT, K.STACK):
        k = tape.aux[tape.ip[r]]
        return [(tape.aux[tape.ip[r] + 1 + 3 * j], j) for j in range(k)]
    a0, a1 = tape.a0[r], tape.a1[r]
    if code == K.WHERE:
        return [(s, i) for i, s in enumerate((a0, a1)) if s >= 0]
    return [(s, i) for i, s in enumerate(s for s in (a0, a1) if s >= 0)]


class CheckedSweep:
    """A sweep kernel's stand-in with its signature: sweeps one record at a time and raises
    at the first whose contribution to an input's gradient brings a nan there."""

    def __init__(self, sweep, tape, reach=None):
        self.sweep, self.tape, self.reach = sweep, tape, reach
        self.kernel = sweep.kernel

    def __call__(self, op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads,
                 need, hi, lo, fresh):
        tape, sweep = self.tape, self.sweep
        for r in range(hi - 1, lo - 1, -1):
            if not need[r]:
                continue
            slots = []
            if op[r] not in _HIDDEN and (self.reach is None or self.reach[r]):
                for s, i in input_positions(tape, r):
                    if s < 0 or not need[s]:
                        continue
                    g = grads[goff[s]:goff[s] + size[s]]
                    # a slot with a nan already (a seed of its own) only counts new ones
                    had = np.isnan(g) if np.isnan(g).any() else None
                    slots.append((s, i, g, had))
            bad = sweep(op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads,
                        need, r + 1, r, 0)
            if bad >= 0:
                return bad
            for s, i, g, had in slots:
                now = np.isnan(g)
                if not (now.any() if had is None else (now & ~had).any()):
                    continue
                composite = self._composite_of(r)
                if composite is None:
                    raise nan_error(tape, r, node_name(tape, r),
                                    self._which(r, s, i, grads, goff, size))
                # a record inside an op built from others (mse_loss): PyTorch's one node
                # for the op has the nan once it reaches one of the op's inputs; inside, it
                # may yet be masked away
                c, refs = composite
                s = _looked_through(tape, s)
                if s in refs:
                    raise nan_error(tape, c, node_name(tape, c), refs.index(s))
                if self._composite_of(s) is not composite:
                    # out of the op through an input on an older tape (refs holds None
                    # for those): the first such is the best guess at its index
                    raise nan_error(tape, c, node_name(tape, c),
                                    refs.index(None) if None in refs else 0)
        return -1

    def _composite_of(self, r):
        """(record, its input refs) of the op built from others that record r is part of,
        or None."""
        inner = self.__dict__.get("_inner")
        if inner is None:
            inner = self._inner = _inner_records(self.tape)
        return inner.get(r)

    def _which(self, r, s, i, grads, goff, size):
        """The output index of the nan: i, unless input s is also another of r's inputs
        (``x / x``), where the one slot holds both: then the first of those whose own
        contribution, by the differentiable rule, has the nan."""
        tape = self.tape
        same = [j for t, j in input_positions(tape, r) if t == s]
        if len(same) < 2:
            return i
        try:
            parts = [c for t, c in contributions(tape, r, grads[goff[r]:goff[r] + size[r]])
                     if t == s]
            for j, c in zip(same, parts):
                if np.isnan(c).any():
                    return j
        except Exception:   # noqa: BLE001 - the index is a detail of the message
            pass
        return i


def _looked_through(tape, s):
    """Record s, or what the hidden broadcast s stands for."""
    while s >= 0 and tape.op[s] in (K.BCAST, K.EXPAND_S):
        s = tape.a0[s]
    return s


def _inner_records(tape):
    """{record: (composite record, its input refs)} for the records each op built from
    others (``functional.named_node``) is made of: those after its last input on this tape
    that its result is computed from."""
    inner = {}
    for c, entry in sorted(tape.composites.items()):
        if len(entry) != 2:
            continue    # a further output of a node with several: its first output's node
        refs = [ref if type(ref) is int else None for ref in entry[1]]
        lo = max([ref for ref in refs if ref is not None] + [-1])
        this = (c, refs)    # (one object per op: CheckedSweep compares them with `is`)
        todo, seen = [c], {c}
        while todo:
            q = todo.pop()
            inner.setdefault(q, this)
            for s, _ in input_positions(tape, q):
                if lo < s < q and s not in seen and s not in refs:
                    seen.add(s)
                    todo.append(s)
    return inner


def check_contributions(tape, r, pairs):
    """The create_graph backward's check: ``pairs`` are record r's (input record,
    contribution tensor), in its rule's order."""
    positions = input_positions(tape, r)
    seen = {}
    for s, c in pairs:
        if c is None:
            continue
        k = seen.get(s, 0)
        seen[s] = k + 1
        if np.isnan(np.asarray(c._value)).any():
            idx = [j for t, j in positions if t == s]
            raise nan_error(tape, r, node_name(tape, r), idx[k] if k < len(idx) else k)


def check_custom(tape, r, results):
    """An autograd.Function's backward returned ``results``: the first with a nan is the
    error, numbered as the inputs of ``forward`` (PyTorch checks them all, needed or not)."""
    for i, gi in enumerate(results):
        value = getattr(gi, "_value", None)
        if value is not None and value.dtype.kind == "f" and np.isnan(value).any():
            # (the warning comes from the Function's error handler: see function.py)
            raise RuntimeError(f"Function '{tape.custom[r].backward_cls.__name__}' returned "
                               f"nan values in its {i}th output.")


def check_roots(seeds):
    """A backward from several outputs starts at PyTorch's GraphRoot node, whose outputs are
    the seeds: a nan in one is the error there, before any other node runs.  (From one output
    PyTorch starts at its node directly: the seed's nan is found in what that node makes.)"""
    if len(seeds) < 2:
        return
    for j, g in enumerate(seeds):
        if g is not None and np.isnan(np.asarray(g, dtype=np.float64)).any():
            name = "tapegrad::autograd::GraphRoot"
            warnings.warn(f"Error detected in {name}. Traceback of forward call that caused "
                          f"the error:\n{''.join(_user_stack().format())}", stacklevel=2)
            raise RuntimeError(f"Function '{name}' returned nan values in its {j}th output.")


def reaching(tape, inputs):
    """Which records of ``tape`` lead to one of ``inputs`` (``autograd.grad``'s, or
    ``backward(inputs=...)``), or None for all: PyTorch runs only those nodes, so only those
    are checked.  A record reading an older tape counts as leading there."""
    if inputs is None:
        return None
    n = len(tape)
    reach = np.zeros(n, dtype=bool)
    ids = {id(x) for x in inputs}
    for x in inputs:
        if x._tape is tape and x._r < n:
            reach[x._r] = True
    for r, leaf in tape.leaves.items() if isinstance(tape.leaves, dict) else ():
        if id(leaf) in ids and r < n:
            reach[r] = True
    for r in range(n):
        if reach[r]:
            continue
        if tape.op[r] == K.EXTERN:
            reach[r] = True
            continue
        for s, _ in input_positions(tape, r):
            if 0 <= s < r and reach[s]:
                reach[r] = True
                break
    return reach
