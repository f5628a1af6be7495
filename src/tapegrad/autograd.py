"""Driving backward: seed the outputs, run the compiled sweep over each tape, hand out grads.

Also the grad-mode switches and ``grad_fn`` views.  A ``grad_fn`` is made on demand from a
tape row; nothing is kept per op until someone asks for one.
"""
import functools
import threading
import warnings
import weakref

import numpy as np

from . import _anomaly
from . import _compile_helper
from . import hot_tapes
from . import ops as K
from .tape import aligned_empty, finish, finish_graph, state
from . import tensor as _tensor_module
from .tensor import PostAccumulateHook, Tensor

_SAVED_FREED = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward.")

_V_INDEX = next(v for v, name in K.OPS[K.GATHER].variants.items() if name == "IndexBackward0")
# the gathers whose PyTorch node saves its indices: an advanced index, index_select, gather,
# take (a slice, a view, a flip save none)
_GATHERS_SAVING = frozenset({_V_INDEX} | {v for v, name in K.OPS[K.GATHER].variants.items()
                                         if name in ("IndexSelectBackward0", "GatherBackward0",
                                                     "TakeBackward0")})
# What a second backward without retain_graph meets at an op built from other ops is decided
# by PyTorch's one node for it (Tape.composites), not by the records it is made of:
# - nodes that save a tensor (indices, a mask, the input) whatever their records save;
_SAVES_A_TENSOR = frozenset({"IndexPutBackward0", "PutBackward0", "AddcdivBackward0"} | {
    f"{kind}Pad{n}DBackward0" for kind in ("Reflection", "Replication") for n in (1, 2, 3)})
# - nodes that save a tensor only while their input at this position requires grad (the
#   index, read by the source's rule; self's rule is the identity);
_SAVES_FOR_INPUT = {"IndexAddBackward0": 1, "ScatterAddBackward0": 1}
# - nodes that save no tensor at all (a triangle, a number weight or factor, an upsampling's
#   sizes): their records, inside and last, are passed again as PyTorch's node is.
_SAVES_NO_TENSOR = frozenset(
    {"TrilBackward0", "TriuBackward0", "LerpBackward0", "MulBackward1", "DivBackward1",
     "Im2ColBackward0", "Col2ImBackward0"}
    | {f"Upsample{kind}Backward0" for kind in (
        "Linear1D", "Bilinear2D", "Trilinear3D", "Bicubic2D", "Nearest1D", "Nearest2D",
        "Nearest3D", "NearestExact1D", "NearestExact2D", "NearestExact3D")})
_FREES = np.array([K.OPS[c].frees if c in K.OPS else False for c in range(max(K.OPS) + 1)])


# ---------------------------------------------------------------------------------------------
# Grad mode
# ---------------------------------------------------------------------------------------------
class _GradMode:
    """Base of the grad-mode switches: a context manager that is also a decorator."""

    _enable = True

    def __enter__(self):
        self._prev = state.grad_enabled
        state.grad_enabled = self._enable

    def __exit__(self, *exc):
        state.grad_enabled = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapped


class _NoArgGradMode(_GradMode):
    """A switch that takes no arguments also decorates without parentheses: ``@no_grad``."""

    def __new__(cls, fn=None):
        self = super().__new__(cls)
        return self if fn is None else self(fn)


class no_grad(_NoArgGradMode):
    """Record nothing inside: results of ops require no grad.

    A context manager, and a decorator (``@tg.no_grad`` or ``@tg.no_grad()``); for
    evaluation and for updating parameters in place by hand.  The mode is per thread, as in
    PyTorch.

    Example:
        >>> w = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> with tg.no_grad():
        ...     y = w * 2
        >>> y.requires_grad, y.grad_fn
        (False, None)
    """

    _enable = False


class enable_grad(_NoArgGradMode):
    """Record again inside a ``no_grad`` block; a context manager or a decorator.

    Example:
        >>> w = tg.tensor([1.0], requires_grad=True)
        >>> with tg.no_grad():
        ...     with tg.enable_grad():
        ...         y = w * 2
        >>> y.requires_grad
        True
    """

    _enable = True


class set_grad_enabled(_GradMode):
    """Switch recording on or off; usable as a call, a context manager or a decorator.

    As a call it sets the mode at once (and for good); as a context manager it restores the
    previous mode on exit.

    Example:
        >>> w = tg.tensor([1.0], requires_grad=True)
        >>> with tg.set_grad_enabled(False):
        ...     print(tg.is_grad_enabled(), (w * 2).requires_grad)
        False False
        >>> tg.is_grad_enabled()
        True
    """

    def __init__(self, mode):
        self._prev = state.grad_enabled
        self._enable = bool(mode)
        state.grad_enabled = self._enable

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        state.grad_enabled = self._prev
        return False

    def __call__(self, fn):
        state.grad_enabled = self._prev
        mode = self._enable

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapped


def is_grad_enabled():
    """Whether ops record for autograd now (False inside ``no_grad``).

    Example:
        >>> with tg.no_grad():
        ...     print(tg.is_grad_enabled())
        False
    """
    return state.grad_enabled


# ---------------------------------------------------------------------------------------------
# grad_fn views
# ---------------------------------------------------------------------------------------------
_QUALIFIED = frozenset({"CopySlices", "CopyBackwards"})


class Node:
    """A read-only view of one tape record, shaped like PyTorch's autograd Function.

    It is what ``tensor.grad_fn`` gives: ``name()`` and ``next_functions`` (the nodes of
    its inputs; an ``AccumulateGrad`` for a leaf that requires grad) walk the graph.  Hooks on
    nodes and calling a node are not supported.

    Example:
        >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> y = (x * 3).sum()
        >>> y.grad_fn.name()
        'SumBackward0'
        >>> y.grad_fn.next_functions[0][0].name()
        'MulBackward0'
    """

    __slots__ = ("_tape", "_r", "_keep", "_inner", "_metadata", "__weakref__")

    def __init__(self, tape, r):
        self._tape, self._r = tape, r
        # (a node walks on into the older tapes its record reaches: it keeps them alive)
        self._keep = None if tape.first_extern < 0 else tape.keep(r)
        # the next_functions of a node PyTorch shows beneath record r's own (see
        # _inner_node); None for the record's own node
        self._inner = None

    @property
    def metadata(self):
        """A dict of the program's own, kept with the node (PyTorch's ``grad_fn.metadata``;
        a record's node is one object for as long as its tape lives)."""
        try:
            return self._metadata
        except AttributeError:
            self._metadata = {}
            return self._metadata

    def name(self):
        name = self._class_name()
        # PyTorch's hand-written nodes name themselves with their C++ namespace
        return "tapegrad::autograd::" + name if name in _QUALIFIED else name

    def _class_name(self):
        """The node's class name, as PyTorch's repr and tensor repr show it."""
        if self._inner is not None:
            return type(self).__name__
        return _record_class_name(self._tape, self._r)

    @property
    def next_functions(self):
        if self._inner is not None:
            return self._inner
        tape, r = self._tape, self._r
        composite = tape.composites.get(r)
        if composite is not None:
            # an op built from others: its own inputs, past the records it is made of (and
            # past the nodes its last one would show beneath itself: bmm's matmul record)
            return tuple((_composite_input(tape, ref), 0) for ref in composite[1])
        inner = tape.inner_nodes
        if inner is not None and r in inner:
            # an op PyTorch runs as several: the nodes it shows beneath this one
            return _inner_functions(tape, r, inner[r], ())
        code = tape.op[r]
        if code in (K.CAT, K.STACK):
            k = tape.aux[tape.ip[r]]
            inputs = [tape.aux[tape.ip[r] + 1 + 3 * j] for j in range(k)]
        else:
            inputs = [s for s in (tape.a0[r], tape.a1[r]) if s >= 0]
        out = [(_node_of_input(tape, s), 0) for s in inputs]
        if code in (K.ADD_S, K.SUB_S, K.MUL_S, K.DIV_S):
            out.append((None, 0))   # PyTorch lists the wrapped scalar operand
        if code == K.WHERE and len(out) < 2:
            # a side that needs no grad shows as None, in its place
            out = [(_node_of_input(tape, s), 0) if s >= 0 else (None, 0)
                   for s in (tape.a0[r], tape.a1[r])]
        return tuple(out)

    def register_hook(self, fn):
        raise NotImplementedError("hooks on grad_fn nodes are not supported; use "
                                  "Tensor.register_hook")

    def __eq__(self, other):
        return isinstance(other, Node) and other._tape is self._tape and \
            other._r == self._r and other._inner is self._inner

    def __hash__(self):
        return hash((id(self._tape), self._r))

    def __repr__(self):
        return f"<{self._class_name()} object at {hex(id(self))}>"

    def __call__(self, *grads):
        raise RuntimeError("calling a grad_fn node directly is not supported")


class AccumulateGrad:
    """The node a leaf's gradient flows into; ``variable`` is the leaf.

    Example:
        >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> acc = (x * 3).grad_fn.next_functions[0][0]
        >>> acc.name(), acc.variable is x
        ('tapegrad::autograd::AccumulateGrad', True)
    """

    __slots__ = ("variable", "__weakref__")

    def __init__(self, leaf):
        self.variable = leaf

    def name(self):
        return "torch::autograd::AccumulateGrad".replace("torch", "tapegrad")

    next_functions = ()

    def __eq__(self, other):
        return isinstance(other, AccumulateGrad) and other.variable is self.variable

    def __hash__(self):
        return hash(id(self.variable))

    def __repr__(self):
        return f"<AccumulateGrad object at {hex(id(self))}>"


_NODE_CLASSES = {}


def _node_class(name):
    """A Node subclass named like PyTorch's (``type(y.grad_fn).__name__ == 'AddBackward0'``)."""
    cls = _NODE_CLASSES.get(name)
    if cls is None:
        cls = _NODE_CLASSES[name] = type(name, (Node,), {"__slots__": ()})
    return cls


def _record_class_name(tape, r):
    """The class name of record r's node, as PyTorch names it."""
    composite = tape.composites.get(r)
    if composite is not None:
        return composite[0]
    info = K.OPS[tape.op[r]]
    if info.variants is not None:
        return info.variants[tape.aux[tape.ip[r]]]
    return info.name


def node_for(tape, r):
    node = tape.nodes.get(r)
    if node is None:
        composite = tape.composites.get(r)
        if composite is not None and len(composite) > 2:
            # a further output of a node with several (functional.named_outputs): the same
            # node object as its first output's, as PyTorch gives
            node = tape.nodes[r] = node_for(tape, composite[2])
            return node
        custom = tape.custom_out.get(r)
        if custom is not None:   # an autograd.Function's output: its own node class
            cls = tape.custom[custom].backward_cls
        else:
            cls = _node_class(_record_class_name(tape, r))
        node = tape.nodes[r] = cls(tape, r)
    return node


_anomaly.node_for = node_for   # (which it cannot import: it sits below this module)


def _inner_functions(tape, r, specs, path):
    """``next_functions`` of the nodes ``specs`` (nested (name, inputs), the operands 0 and 1
    of record r: ``Tape.inner_nodes``), at ``path`` beneath record r's own node."""
    return tuple((_inner_node(tape, r, spec, path + (k,)), 0) for k, spec in enumerate(specs))


def _inner_node(tape, r, spec, path):
    """The node for ``spec`` beneath record r's (an operand's own node for 0 and 1); None
    where nothing beneath it requires grad, as PyTorch makes no node there.  Made once, so
    that walking the graph twice gives the same objects."""
    if type(spec) is int:
        s = tape.a1[r] if spec else tape.a0[r]
        return _node_of_input(tape, s) if s >= 0 else None
    key = ("inner", r, path)
    node = tape.nodes.get(key)
    if node is None:
        name, kids = spec
        inputs = _inner_functions(tape, r, kids, path)
        if all(n is None for n, _ in inputs):
            return None
        node = _node_class(name)(tape, r)
        node._inner = inputs
        tape.nodes[key] = node
    return node


def _composite_input(tape, ref):
    """The node of an input of a composite op (``functional._input_ref``)."""
    if type(ref) is int:
        return _node_of_input(tape, ref) if ref >= 0 else None
    if type(ref) is tuple:     # a value recorded on an older tape
        return _node_of_input(*ref)
    key = ("leaf", id(ref))    # a leaf, read on an older tape only
    node = tape.nodes.get(key)
    if node is None:
        node = tape.nodes[key] = AccumulateGrad(ref)
    return node


def _node_of_input(tape, s):
    """The node PyTorch would list for input record s (hidden records are looked through)."""
    while True:
        code = tape.op[s]
        if code == K.BCAST or code == K.EXPAND_S:
            s = tape.a0[s]
            continue
        if code == K.CONST:
            return None
        if code == K.LEAF:
            cols = tape.cached_cols
            if cols is not None and cols[0][s] == K.CONST:
                return None    # a replayed argument that requires no grad, as in eager mode
            leaf = tape.leaves[s]
            key = ("leaf", id(leaf))
            node = tape.nodes.get(key)
            if node is None:
                node = tape.nodes[key] = AccumulateGrad(leaf)
            return node
        if code == K.EXTERN:
            tape, s = tape.extern(s)
            continue
        return node_for(tape, s)


# ---------------------------------------------------------------------------------------------
# Backward
# ---------------------------------------------------------------------------------------------
_ONE = np.ones(1)


def _seed_value(t, g, j=0, outputs=None, grads=None):
    """The seed gradient for output t (the j-th output), checked against t's shape."""
    if g is None:
        if t._value.size != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        return _ONE.copy()   # (np.ones is Python code: 2 µs of a small backward)
    gv = g._value if isinstance(g, Tensor) else np.asarray(g, dtype=np.float64)
    if gv.shape != t._value.shape:
        # PyTorch finds the positions with list.index, which compares tensors with == (an
        # error of its own when the first one differs in shape): so do we
        gi = j if grads is None else _list_index(grads, g)
        oi = j if outputs is None else _list_index(outputs, t)
        raise RuntimeError(
            f"Mismatch in shape: grad_output[{gi}] has a shape of tapegrad.Size({list(gv.shape)}) "
            f"and output[{oi}] has a shape of tapegrad.Size({list(t._value.shape)}).")
    if gv.dtype.kind not in "fiub":
        raise TypeError(f"gradient must be a real tensor, got dtype {gv.dtype}")
    return np.asarray(gv, dtype=np.float64).reshape(-1)


def _list_index(items, x):
    """``list.index`` as PyTorch's tensors make it behave: ``None == tensor`` is False."""
    for i, item in enumerate(items):
        if item is x or (item is not None and bool(item == x)):
            return i
    raise ValueError(f"{x!r} is not in list")


def _tape_id(tape):
    return tape.id


def run_backward(outputs, grad_outputs, retain_graph, inputs=None, accumulate=True):
    """Backpropagate from ``outputs``; returns the gradients of ``inputs`` (or None).

    With ``accumulate`` the gradients of leaves (or of ``inputs`` only, when given) are
    added into ``.grad``; otherwise they are only returned.
    """
    seeds = {}      # tape -> {record: gradient}
    leaf_grads = {}  # id(leaf) -> [leaf, flat gradient]
    for j, (t, g) in enumerate(zip(outputs, grad_outputs)):
        if not t._rg:
            raise RuntimeError(
                f"element {j} of tensors does not require grad and does not have a grad_fn")
        gv = _seed_value(t, g, j, outputs, grad_outputs)
        if t._tape is None:
            _add_leaf_grad(leaf_grads, t, gv)
            continue
        per = seeds.setdefault(t._tape, {})
        # The sweeps only read a seed, so the caller's array serves as it is, unless it may
        # be memory the sweep writes, the shared gradient arena (tapegrad hands out no view
        # of it that outlives its backward, but a seed read while the sweep writes under it
        # would be silently wrong).  Copying every given seed cost a backward from a (128,
        # 16, 16) product's output 12 µs.
        if t._r in per:
            per[t._r] = per[t._r] + gv
        else:
            per[t._r] = gv.copy() if g is not None and np.may_share_memory(gv, state.grads) \
                else gv

    if _anomaly._checking:
        _anomaly.check_roots([None if g is None else _seed_value(t, g, j, outputs, grad_outputs)
                              for j, (t, g) in enumerate(zip(outputs, grad_outputs))])
    wanted = None
    nonleaf_inputs = {}
    if inputs is not None:
        wanted = {id(x) for x in inputs}
        for x in inputs:
            if x._tape is not None:
                nonleaf_inputs.setdefault(x._tape, []).append(x)

    retained = _RETAINED.by_tape()
    swept = []
    results = {}
    # leaf gradients still viewing the gradient arena: copied only if another sweep is
    # about to overwrite it (or a hook could); otherwise .grad makes the one copy
    pending = []
    # Tapes only reference older tapes, so descending id order sees every contribution to a
    # tape before sweeping it.
    swept_leaves = set()    # ids of leaves a swept tape gave a gradient
    while seeds:
        tape = next(iter(seeds)) if len(seeds) == 1 else max(seeds, key=_tape_id)
        tape_seeds = seeds.pop(tape)
        _own(pending)
        carried = _carry_sums(tape, tape_seeds, leaf_grads, swept_leaves, seeds)
        readouts = [x._r for x in retained.get(tape, ())]
        readouts += [x._r for x in nonleaf_inputs.get(tape, ())]
        need, goff, grads, needed = _sweep_tape(tape, tape_seeds, readouts, inputs)
        swept.append((tape, need))
        size = tape.size
        # a record seeded with a sum so far holds it and this tape's terms: it replaces that
        # sum, before any other record of this tape adds to it
        for r, leaf in needed:
            if r in carried and leaf._rg:
                entry = leaf_grads[id(leaf)]
                entry[1] = grads[goff[r]:goff[r] + size[r]]
                pending.append(entry)
        for r in carried:
            if need[r] and r in tape.externs:
                older, older_r = tape.extern(r)
                seeds[older][older_r] = grads[goff[r]:goff[r] + size[r]].copy()
        for r, leaf in needed:
            if leaf._rg:
                if r not in carried:
                    _add_leaf_grad(leaf_grads, leaf, grads[goff[r]:goff[r] + size[r]],
                                   pending)
                swept_leaves.add(id(leaf))
        for r in tape.externs:
            if need[r] and r not in carried:
                older, older_r = tape.extern(r)
                per = seeds.setdefault(older, {})
                g = grads[goff[r]:goff[r] + size[r]]
                per[older_r] = per[older_r] + g if older_r in per else g.copy()
        for x in retained.get(tape, ()):
            if need[x._r]:
                _accumulate(x, grads[goff[x._r]:goff[x._r] + tape.size[x._r]])
        for x in nonleaf_inputs.get(tape, ()):
            if need[x._r]:
                results[id(x)] = grads[goff[x._r]:goff[x._r] + tape.size[x._r]].copy()

    if retain_graph and state.trace is None:
        # The graph stays, but later ops record on a new tape: on this one, every backward
        # would plan and sweep over the records of all the graphs built since (a Jacobian
        # by one retain_graph backward per output grew slower with every row).  Tensors of
        # this tape used later are brought over as after any backward.  (A trace records
        # one tape to the end: an outer compile or transform keeps it.)
        finish_graph([tape for tape, _ in swept])
    if not retain_graph:
        for tape, need in swept:
            n = len(need)
            freed = tape.freed
            if freed is None:
                tape.freed = need.astype(bool)
            else:
                # a new mask, not changed in place: a replayed tape's may be its program's
                grown = np.zeros(max(n, len(freed)), dtype=bool)
                grown[:len(freed)] = freed
                grown[:n] |= need.astype(bool)
                tape.freed = grown
        finish_graph([tape for tape, _ in swept])

    for leaf, _ in leaf_grads.values():
        if leaf._hooks:
            _own(pending)   # a hook may run a backward of its own
            break
    handed = _hand_over(pending)
    for key, (leaf, g) in leaf_grads.items():
        if wanted is not None and key not in wanted:
            continue    # (nor do its hooks run: PyTorch never reaches a leaf not asked for)
        if leaf._hooks:
            for hook in list(leaf._hooks):
                if type(hook) is PostAccumulateHook:
                    continue
                with no_grad():   # hooks run without recording, as in PyTorch
                    res = hook(Tensor._make(g.reshape(leaf._value.shape)))
                if res is not None:
                    g = _hook_result(hook, res, leaf._value.shape)
        results[key] = g
        if accumulate and (wanted is None or key in wanted):
            _accumulate(leaf, g, id(g) in handed)
            if leaf._hooks:
                with no_grad():
                    run_post_accumulate_hooks(leaf)
    return results


def run_post_accumulate_hooks(leaf):
    """The hooks ``register_post_accumulate_grad_hook`` gave ``leaf``, in the order they
    were registered, once its ``.grad`` holds the new sum."""
    for hook in list(leaf._hooks):
        if type(hook) is not PostAccumulateHook:
            continue
        res = hook.fn(leaf)
        # PyTorch checks a result as a gradient hook's first (its type and size), then
        # refuses it; the leaf itself passes, as PyTorch lets it
        if res is not None and res is not leaf:
            _hook_result(hook.fn, res, leaf._value.shape)
            raise RuntimeError("Tensor post accumulate grad hooks should return None.")


def gradient_arena(total):
    """The shared gradient arena, grown to at least ``total`` (its contents are garbage); an
    arena of its own for a backward that a hook (or an ``autograd.Function``'s backward)
    starts in the middle of another one's sweep, which still holds the shared one."""
    if state.sweeping:
        return aligned_empty(max(total, 1))
    grads = state.grads
    if grads.size < total:
        grads = state.grads = aligned_empty(max(total, 2 * grads.size))
    return grads


def program_backward(t, retain_graph):
    """``t.backward()`` for the one output of a replayed tape with generated code, when
    nothing but the sweep and the leaves' ``.grad`` is involved; False, with nothing
    changed, where ``run_backward`` must do it (hooks, retained or in-place-modified
    tensors, a swept tape, a tensor passed twice).  Same sweep, same ``.grad``."""
    tape = t._tape
    prog = tape.program
    fast = prog.arg_backward
    if fast is not None:
        # a program replayed for positional arguments (replay.Variant.replay_args) has all
        # of this function generated for its signature (_fastcall.backward_for), checks
        # first; None where a replay of it needs the way below
        done = fast(t, tape, retain_graph)
        if done is not None:
            return done
    elif (prog.seed != t._r or tape.hooks or tape.custom or tape.inplace
          or tape.freed is not None or _RETAINED.maybe_any() or constants_changed(tape)):
        return False
    leaves, leaf_rec = tape.leaves, tape.leaf_rec
    if len(leaf_rec) != len(leaves):
        return False
    if arguments_changed(tape):
        return False     # (the general path checks which of them the backward reads)
    for r, _, _ in prog.leaf_slots:
        leaf = leaves[r]
        if leaf._hooks or leaf_rec[id(leaf)][1] != leaf._version:
            return False
    grads = gradient_arena(prog.total)
    grads[prog.seed_offset] = 1.0
    prog.backward(tape.arena, tape.ext, grads, *prog.backward_params)
    for r, off, size in prog.leaf_slots:
        leaf = leaves[r]
        if not leaf._rg:
            continue
        if leaf._grad is not None:
            _accumulate(leaf, grads[off:off + size])
        elif size == 1 and not leaf._value.shape:
            # a number read out of the arena: asarray makes a new 0-d array of it
            leaf._grad = Tensor._make(np.asarray(grads[off]))
        else:
            leaf._grad = Tensor._make(grads[off:off + size].reshape(leaf._value.shape).copy())
    if not retain_graph:
        tape.freed = prog.freed
        finish(tape)
    return True


class _RetainRegistry:
    """Non-leaf tensors with retain_grad(), weakly held, grouped by tape."""

    def __init__(self):
        self._refs = weakref.WeakSet()
        self._lock = threading.Lock()   # shared by all threads: no add while one iterates

    def add(self, t):
        with self._lock:
            self._refs.add(t)

    def maybe_any(self):
        """False when no tensor is retained; True may also mean one that just died.  The
        WeakSet's own length is a Python-level method, too slow for a fast path's check."""
        return bool(self._refs.data)

    def by_tape(self):
        out = {}
        if not self._refs.data:   # the usual case: nothing retained, no lock taken
            return out
        with self._lock:
            alive = list(self._refs)
        for t in alive:
            if t._tape is not None:
                out.setdefault(t._tape, []).append(t)
        return out


_RETAINED = _RetainRegistry()


_NO_CARRY = frozenset()


def _carry_sums(tape, tape_seeds, leaf_grads, swept_leaves, seeds):
    """Before ``tape`` is swept: seed its records of values that newer tapes of this graph
    already gave a gradient -- a leaf's record, or an EXTERN record of an older tape's value
    -- with that gradient, so that the sweep adds this tape's terms to it; the records so
    seeded, one per value.

    A graph that outgrew its tape spans two (the first step of a loop, before the tapes
    have grown to fit it).  A gradient summed on each tape apart and then added came out in
    other last bits than the same graph's on one tape, whose sweep adds every term into one
    sum, newest record first (a broadcast's reduction adds value after value): the first
    call of a function gave other gradients than the second.  Carried in, the terms are
    added in the one-tape order.  Only an eager tape is seeded: a replay's generated
    backward is made for its own seeds, and keeps them."""
    if not (swept_leaves or seeds) or tape.program is not None or \
            tape.cached_cols is not None:
        return _NO_CARRY
    carried = set()
    if swept_leaves:
        leaf_rec, leaves = tape.leaf_rec, tape.leaves
        for key in swept_leaves:
            hit = leaf_rec.get(key)
            if hit is None:
                continue
            r = hit[0]
            leaf, g = leaf_grads[key]
            if leaves.get(r) is leaf:
                tape_seeds[r] = tape_seeds[r] + g if r in tape_seeds else g
                carried.add(r)
    if seeds and tape.externs:
        waiting = {older.id: per for older, per in seeds.items()}
        taken = set()
        for r, value in tape.externs.items():
            per = waiting.get(value[0])
            if per is None or value[1] not in per or value in taken:
                continue
            taken.add(value)
            g = per[value[1]]
            tape_seeds[r] = tape_seeds[r] + g if r in tape_seeds else g
            carried.add(r)
    return carried


def _add_leaf_grad(leaf_grads, leaf, g, pending=None):
    entry = leaf_grads.get(id(leaf))
    if entry is None:
        entry = leaf_grads[id(leaf)] = [leaf, g]
        if pending is not None:
            pending.append(entry)
    else:
        entry[1] = entry[1] + g


def _own(pending):
    """Give each leaf gradient still viewing the gradient arena its own copy."""
    for entry in pending:
        entry[1] = entry[1].copy()
    pending.clear()


# Leaf gradients of at least this many values, making up at least this share of the arena,
# are handed over with it rather than copied out of it (see _hand_over).
_HAND_OVER_MIN = 4096
_HAND_OVER_SHARE = 4


def _hand_over(pending):
    """Ids of the leaf gradients in ``pending`` (views of the gradient arena) that may
    become ``.grad`` as they are: when they are large, the arena goes with them and the next
    backward takes a new one, instead of copying them out (W3's 2.1 MB of weight gradients:
    0.15 ms a step).  They then keep the whole arena alive, so only when they are a fair
    share of it.  (PyTorch's AccumulateGrad likewise keeps the incoming gradient.)"""
    if not pending:
        return ()
    handed = 0
    for entry in pending:
        handed += entry[1].size
    if handed < _HAND_OVER_MIN or handed * _HAND_OVER_SHARE < state.grads.size:
        return ()
    state.grads = np.empty(0)
    ids = {id(entry[1]) for entry in pending}
    pending.clear()
    return ids


_F64 = np.dtype(np.float64)


def _accumulate(t, g, own=False):
    """Add ``g`` to ``t.grad``; ``own``: g is t's to keep (no copy for a new ``.grad``)."""
    shape = t._value.shape
    if t._grad is None:
        if own:
            t._grad = Tensor._make(g.reshape(shape))
        elif g.dtype is _F64:
            # (the same copy as below's: np.array with a dtype costs 1 µs more a leaf)
            t._grad = Tensor._make(g.reshape(shape).copy())
        else:
            t._grad = Tensor._make(np.array(g, dtype=np.float64).reshape(shape))
    else:
        gv = t._grad._value
        if gv.flags.writeable:
            gv += g.reshape(shape)
        else:
            t._grad = Tensor._make(gv + g.reshape(shape))


def _sweep_tape(tape, tape_seeds, readouts=(), inputs=None):
    """Plan, check and sweep one tape; returns (need, goff, grads, its ``needed_leaves``).
    ``readouts``: records whose gradient is read once the sweep is done."""
    try:
        return _sweep(tape, tape_seeds, readouts, inputs)
    except BaseException:
        # The traceback may outlive this call, and with it the column views that lock the
        # tape's arrays against growth: later ops record on a new tape.
        finish(tape)
        raise


def make_plan(cols, seeds):
    """(need, goff, total, fresh, scalars) of a backward from the records ``seeds`` over the
    tape columns ``cols``: see ``ops.plan``."""
    op, a0, a1, voff, size, ip, fp, aux, faux = cols
    n = len(op)
    need = np.empty(n, dtype=np.uint8)
    goff = np.empty(n, dtype=np.int64)
    total, fresh, scalars = K.plan(op, a0, a1, size, ip, aux, np.array(seeds, dtype=np.int64),
                                   n, need, goff)
    return need, goff, total, fresh, scalars


# A tape of numbers only, or one with this many one-element records of hot ops, is swept
# with the one-element chains inlined (``ops.sweep``), compiled for it if need be; other
# tapes by ``ops.sweep_vectors`` until ``ops.sweep`` is compiled anyway.  Compiling the
# chains costs a fresh machine more than a second, which a program of tensors would pay
# for nothing; a few hundred numbers among tensors call their ops' entries instead, which
# the tensors' records mostly need too, and lose under a microsecond a backward.
_CHAINS_FROM = 1000


def _compiled(kernel):
    """Whether numba has compiled ``kernel`` for some signature: its ``overloads``, not its
    ``signatures``, which lists them at 6 µs a call (two per backward)."""
    return bool(kernel.overloads)


def _sweep_kernel(fresh, scalars):
    # (fresh is 0 with scalars on a tape of numbers only: ops.plan lays those out itself)
    if scalars >= _CHAINS_FROM or (fresh == 0 and scalars) or _compiled(K.sweep.kernel):
        return K.sweep
    return K.sweep_vectors


def sweep_arguments(tape, cols):
    """Arguments of the types a backward sweep of ``tape`` (columns ``cols``) is called
    with, for compiling one ahead of its call (``ops._compiling`` adds the entry table and
    the resume cell; the gradient arena, ``need`` and ``goff`` are stand-ins)."""
    op, a0, a1, voff, size, ip, fp, aux, faux = cols
    n = len(op)
    return (op, a0, a1, voff, np.empty(n, np.int64), size, ip, fp, aux, faux, tape.arena,
            tape.ext, gradient_arena(1), np.empty(n, np.uint8), n, 0, 0, K.entry_table(),
            np.zeros(1, np.int64))


def _share_first_compiles(tape, cols):
    """The first backward on a fresh machine: compile the sweep this tape will likely take
    and the entries of its ops, the compile helper's second process taking part of them
    (``_compile_helper``).  Its guess of the sweep is made before ``plan`` (which the helper
    compiles meanwhile) from all records, needed or not: a wrong guess only leaves the
    other sweep to compile in the sweep's first call, as without a helper."""
    op, size = cols[0], cols[4]
    one = K.sweeps_one_element(op, size)
    chains = bool(one >= _CHAINS_FROM or (one and size.max() <= 1) or _compiled(K.sweep.kernel))
    kernel = (K.sweep if chains else K.sweep_vectors).kernel
    args = None if _compiled(kernel) else sweep_arguments(tape, cols)
    _compile_helper.share_first_backward(
        K.missing_entries(K.BACKWARD_PASS, op, size, chains), K.BACKWARD_PASS, kernel, args)


def _own_gradient_memory(readouts, op, a0, need, goff, size, total):
    """(goff, total) where each record of ``readouts`` keeps its gradient to the end of the
    sweep.  An in-place write (WRITE) hands its gradient memory on to its base (``plan``),
    whose gradient it becomes; for one whose gradient is read afterwards (retain_grad,
    ``inputs=``), the base and the writes below it get memory of their own above ``total``
    instead."""
    for r in readouts:
        if op[r] == K.WRITE and need[r] and need[a0[r]] and goff[a0[r]] == goff[r]:
            goff = goff.copy()      # (a replayed tape's plan is cached)
            below = goff[:r]
            below[(below == goff[r]) & (need[:r] != 0)] = total
            total += size[r]
    return goff, total


def _sweep(tape, tape_seeds, readouts=(), inputs=None):
    # (inputs: autograd.grad's, which anomaly mode's check keeps to, as PyTorch runs only
    # the nodes that lead to them)
    n = len(tape)
    plans = tape.plan_cache   # replayed tapes never change shape: their plans are reusable
    key = tuple(tape_seeds)
    hot_key = hit = None
    if tape.cached_cols is not None:
        cols = tape.cached_cols
        hit = plans.get(key) if plans is not None else None
    else:
        # an eager tape equal, column for column, to one planned before (a training loop's
        # step after step) has that plan, and may be swept over that tape's columns
        hot_key = hot_tapes.key_for(tape, key)
        known = (hot_tapes.known_plan(hot_key)
                 if hot_key is not None and plans is None else None)
        if known is not None:
            cols, hit = known
        else:
            cols = tape.columns()
            hit = plans.get(key) if plans is not None else None
    op, a0, a1, voff, size, ip, fp, aux, faux = cols
    if hit is None:
        if _compile_helper.first_backward_to_come():
            _share_first_compiles(tape, cols)
        hit = make_plan(cols, key)
        if plans is not None:
            plans[key] = hit
        elif hot_key is not None:
            hot_tapes.remember_plan(hot_key, cols, hit)
    need, goff, total, fresh, scalars = hit
    sweep = _sweep_kernel(fresh, scalars)
    if not _compiled(sweep.kernel) and _compile_helper.running():
        # the worker may be compiling it ahead of need: its, rather than another here
        _compile_helper.before_first_sweep(sweep.kernel.__name__)
    if readouts:
        goff, total = _own_gradient_memory(readouts, op, a0, need, goff, size, total)
    _check_freed(tape, need, op)
    _check_refused(tape, need, op)
    needed = needed_leaves(tape, need)   # (the version checks and the caller read them)
    _check_versions(tape, need, op, a0, a1, needed)
    grads = gradient_arena(total)
    hooked = sorted([r for r, (_, hs) in tape.hooks.items() if hs and need[r]]
                    + [r for r in tape.custom if need[r]], reverse=True) \
        if tape.hooks or tape.custom else ()
    prog = tape.program
    checked = _anomaly._checking
    if checked:
        # anomaly mode: one record at a time, each one's contribution checked for nan
        # (the generated code of a hot tape, a sweep of its own, is passed over)
        sweep, prog = _anomaly.CheckedSweep(sweep, tape, _anomaly.reaching(tape, inputs)), None
    elif (prog is None and not hooked and not readouts and tape.cached_cols is None
            and state.trace is None):
        # an eager tape swept as often before, record for record: generated code too
        prog = hot_tapes.program_for(tape, hot_key, cols, key, hit)
    if prog is not None and not hooked and prog.seeds == key:
        # a tape with generated code, swept from the seed it was generated for: it clears
        # the part of the arena it uses itself
        for r, g in tape_seeds.items():
            if need[r]:
                grads[goff[r]:goff[r] + size[r]] = g
        prog.backward(tape.arena, tape.ext, grads, *prog.backward_params)
        del cols, op, a0, a1, voff, size, ip, fp, aux, faux
        return need, goff, grads, needed
    if hooked or checked:
        fresh = 0   # swept in pieces: cleared beforehand
    if tape.partial:
        tape.complete()   # (a generated forward left values out: see replay._Instance)
    vals = tape.arena   # (a replay's may read arguments in place: see replay._Instance)
    lo = -1
    if len(tape_seeds) == 1:
        ((r, g),) = tape_seeds.items()
        if need[r]:
            lo = goff[r]
    if lo >= fresh:
        # one seed, in the part of the arena that is cleared: written there, the rest
        # cleared around it (one pass over the seed's slot instead of two: a (128, 16, 16)
        # product's output is 256 KB)
        hi = lo + size[r]
        grads[fresh:lo] = 0.0
        grads[lo:hi] = g
        grads[hi:total] = 0.0
    else:
        grads[fresh:total] = 0.0
        for r, g in tape_seeds.items():
            # a seed that reaches no leaf has no place in the arena: a newer tape's gradient
            # of a constant it imported (double backward through x @ W with W constant)
            if need[r]:
                grads[goff[r]:goff[r] + size[r]] += g
    hi = n
    if hooked:
        if state.trace is None:
            # what a hook records goes on a new tape, as after the backward (this one's
            # columns are held by the sweep, and its plan knows only the records so far)
            finish(tape)
        state.sweeping += 1     # user code runs between the pieces: see gradient_arena
        try:
            hi = _sweep_hooked(tape, hooked, op, a0, a1, voff, goff, size, ip, fp, aux, faux,
                               vals, grads, need, sweep)
        finally:
            state.sweeping -= 1
    bad = sweep(op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, tape.ext, grads,
                need, hi, 0, fresh)
    if bad >= 0:
        raise RuntimeError(f"internal error: opcode {op[bad]} has no backward rule")
    # the column views lock the arrays against growth: drop them before returning
    del cols, op, a0, a1, voff, size, ip, fp, aux, faux
    return need, goff, grads, needed


def _sweep_hooked(tape, hooked, op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads,
                  need, sweep):
    """Sweep from the top of the tape down to the last of the ``hooked`` records, running
    each one's tensor hooks (or its ``autograd.Function``'s backward) once its gradient is
    complete; returns where the rest of the sweep starts."""
    hi = len(op)
    for r in hooked:
        # everything above r is swept, so r's gradient is complete: the hook may replace it
        sweep(op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, tape.ext, grads, need,
              hi, r + 1, 0)
        if r in tape.custom:
            # an autograd.Function: its Python backward gives this record's gradient
            ABOVE.run_custom(tape, r, grads, goff, need, size)
            hi = r + 1
            continue
        g = grads[goff[r]:goff[r] + size[r]]
        shape, hooks = tape.hooks[r]
        for hook in list(hooks):
            with no_grad():   # hooks run without recording, as in PyTorch
                res = hook(Tensor._make(g.copy().reshape(shape)))
            if res is not None:
                g[:] = _hook_result(hook, res, shape)
        hi = r + 1
    return hi


def _hook_result(hook, res, shape):
    """The gradient a tensor hook returned, flat, checked as PyTorch checks it (a result of
    another shape is an error, not a broadcast)."""
    if not isinstance(res, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(res).__name__}'")
    if res._value.shape != tuple(shape):
        name = getattr(hook, "__name__", type(hook).__name__)
        raise RuntimeError(f"hook '{name}' has changed the size of value")
    return np.asarray(res._value, dtype=np.float64).reshape(-1)


def _check_freed(tape, need, op):
    freed = tape.freed
    if freed is None:
        return
    m = len(freed)
    hit = freed & need[:m].astype(bool)
    if not hit.any():
        return
    frees = _FREES[op[:m]]
    # an advanced index (x[[0, 0]], x[mask]) saves its indices in PyTorch; a slice does not
    for r in np.nonzero(hit & (op[:m] == K.GATHER))[0]:
        variant = tape.aux[tape.ip[r]]
        # (sort, topk, ... save their indices too)
        frees[r] = variant in _GATHERS_SAVING or variant in K.VALUE_SELECTED
        if r in tape.custom_out:
            # an autograd.Function's output: freed if its forward saved tensors
            frees[r] = bool(tape.custom[tape.custom_out[r]].ctx._saved)
    # index_put, scatter, put, masked_scatter, x[idx] = v save their indices or mask, and
    # CopySlices drops its function; slice_scatter and its kin save no tensor
    for r in np.nonzero(hit & (op[:m] == K.REPLACE))[0]:
        frees[r] = tape.aux[tape.ip[r]] not in K.REPLACE_UNSAVED
    for r in np.nonzero(hit & frees)[0]:
        per_input = K.OPS[int(op[r])].frees_for
        if per_input is not None:
            frees[r] = any(keep and s >= 0 and need[s]
                           for keep, s in zip(per_input, (tape.a0[r], tape.a1[r])))
    # ops built from others: as their PyTorch node (see _SAVES_A_TENSOR)
    if tape.composites:
        for r in np.nonzero(hit & ~frees)[0]:
            entry = tape.composites.get(int(r))
            if entry is not None and _node_saves(entry) is True:
                frees[r] = True
        culprits = np.nonzero(hit & frees)[0]
        if culprits.size and not _composed_saving_nothing(tape, culprits.tolist()):
            raise RuntimeError(_SAVED_FREED)
        return
    if (hit & frees).any():
        raise RuntimeError(_SAVED_FREED)


def _node_saves(entry):
    """Whether the PyTorch node of a composite (its ``Tape.composites`` entry) saves a
    tensor: True, False, or None where its records decide."""
    name, refs = entry[0], entry[1]
    if len(entry) == 4 and not refs:
        return None     # a view shown as another record's node (higher._shown_as): its own
    if name in _SAVES_A_TENSOR:
        return True
    if name in _SAVES_NO_TENSOR:
        return False
    position = _SAVES_FOR_INPUT.get(name)
    if position is not None:
        return len(refs) <= position or refs[position] != -1
    return None


def _composed_saving_nothing(tape, culprits):
    """Whether each of ``culprits`` (records whose saved values a backward released) is one
    of the records of an op built from others whose PyTorch node saves no tensor: the op's
    last record, or one that record reaches without passing the op's inputs (those after
    its latest input's record).  Only a second backward that would raise walks this."""
    left = set(culprits)
    for c in sorted(tape.composites, reverse=True):
        if c < min(left):
            break
        entry = tape.composites[c]
        if _node_saves(entry) is not False:
            continue
        floor = max([ref for ref in entry[1] if type(ref) is int] + [-1])
        stack, seen = [c], {c}
        while stack:
            r = stack.pop()
            left.discard(r)
            for s, _ in _anomaly.input_positions(tape, r):
                if s > floor and s not in seen:
                    seen.add(s)
                    stack.append(s)
        if not left:
            return True
    return not left


def _check_refused(tape, need, op):
    """PyTorch's backward error for records with no derivative: qr's factors in mode 'r', and
    in mode 'complete' of a matrix with more rows than columns (their rules give nan).  Only
    tapes that hold such a record are scanned."""
    if not tape.refused:
        return
    for r in np.nonzero((np.asarray(op) == K.LINALG_QR) & need.astype(bool))[0]:
        ip = tape.ip[r]
        m, n, mode = tape.aux[ip + 2], tape.aux[ip + 3], tape.aux[ip + 4]
        if mode == 2 or (mode == 1 and m > n):
            raise RuntimeError(K.qr_refusal(mode))


def needed_leaves(tape, need):
    """[(record, leaf)] of the leaves on ``tape`` that the backward planned as ``need``
    reaches, in record order.  A tape that many backward passes with ``retain_graph`` share
    holds thousands of leaves, of which each pass reaches a few: walking all of them on
    every pass made such a loop quadratic."""
    leaves = tape.leaves
    if len(leaves) > 32:
        hit = np.flatnonzero(need)
        if hit.size < len(leaves):
            return [(r, leaves[r]) for r in hit.tolist() if r in leaves]
    return [(r, leaf) for r, leaf in leaves.items() if need[r]]


def _check_versions(tape, need, op, a0, a1, needed=None):
    """Raise PyTorch's error when a value the backward planned as ``need`` reads was changed
    in place since it was recorded; ``needed``: ``needed_leaves(tape, need)``, if known."""
    if tape.inplace:
        ABOVE.check_saved_versions(tape, need, op, a0, a1)
    # (reader, error) of each tensor changed since a record the backward will sweep read it;
    # the newest reader's is raised, as PyTorch's backward meets that saved value first
    found = []
    # leaves changed in place after they were brought onto this tape (a leaf no swept record
    # reaches is read by none of them either)
    leaf_rec, superseded = tape.leaf_rec, tape.leaf_versions
    for r, leaf in needed_leaves(tape, need) if needed is None else needed:
        rec_version = leaf_rec.get(id(leaf))
        # (the usual case, a leaf unchanged, decided here: a call per leaf cost a small
        # backward a microsecond each)
        if rec_version is not None and rec_version[0] == r:
            if rec_version[1] != leaf._version:
                _check_leaf_version(tape, r, leaf, need, op, a0, a1, found)
        elif superseded is not None and superseded.get(r, leaf._version) != leaf._version:
            # an older copy of a leaf imported again after a change: what reads it read
            # the value of then (``w * x; x.add_(1); x * 3``), as PyTorch's saved tensor
            _check_leaf_version(tape, r, leaf, need, op, a0, a1, found, superseded[r])
    # constants: copied onto the tape, or read where they are (Tape.read_in_place), checked
    # as PyTorch checks the operand it saved
    for r, x, version, shape in tape.consts:
        if type(x) is int:
            # replaced by the recorded in-place op at record x (y.div_(w)), which kept its
            # own copy of the value it replaced: read by any other, a change
            reader = newest_read(tape, r, need, op, a0, a1, (x,))
            if reader >= 0:
                found.append((reader, lambda x=x, version=version, shape=shape:
                              ABOVE.replaced_constant_error(tape, x, version, shape)))
        elif x._version != version:
            # read itself, or through a view (``c[0] * x``: PyTorch's saved view shares c's
            # version; with no history, the message names only the view's shape)
            reader, view = _newest_read_or_view(tape, r, need, op, a0, a1)
            if view is not None:
                found.append((reader, lambda view=view, x=x, version=version:
                              _constant_view_changed(tape, view, x._version, version, x)))
            elif reader >= 0:
                found.append((reader, lambda x=x, version=version, shape=shape:
                              _modified(x, version, shape)))
    # a replay's arguments that need no gradient (its constants, as eager mode's above): read
    # by the backward, a change in place since the call is refused as PyTorch refuses it
    if tape.arguments_are_leaves:
        for r, leaf in tape.leaves.items():
            if not need[r]:
                _check_leaf_version(tape, r, leaf, need, op, a0, a1, found)
    if found:
        raise max(found, key=lambda f: f[0])[1]()


def _newest_read_or_view(tape, r, need, op, a0, a1):
    """(the newest record that reads record r's value or a view of it for a gradient, -1 for
    none; that view, or None where r itself is read)."""
    view = ABOVE.saved_view_of(tape, r, need, op, a0, a1)
    if view is not None:
        return newest_read(tape, view, need, op, a0, a1), view
    return newest_read(tape, r, need, op, a0, a1), None


def _check_leaf_version(tape, r, leaf, need, op, a0, a1, found, expected=None):
    """Note PyTorch's error in ``found`` where a record that needs leaf record r's value
    reads it after the leaf changed in place; ``expected``: r's version at import, where
    not the one ``leaf_rec`` holds (a record a later import superseded)."""
    if expected is None:
        rec_version = tape.leaf_rec.get(id(leaf), (None, None))
        if rec_version[0] != r:
            return
        expected = rec_version[1]
    if expected == leaf._version:
        return
    # a view of the leaf read after any read of it (``w[0] * x``): PyTorch's saved view
    # shares the leaf's version, and names its own shape and the node a changed view's
    # history becomes
    reader, view = _newest_read_or_view(tape, r, need, op, a0, a1)
    if view is None:
        if reader >= 0:
            found.append((reader, lambda: _modified(leaf, expected)))
    elif not leaf._rg:    # (a replay's argument that needs no gradient)
        found.append((reader, lambda: _constant_view_changed(tape, view, leaf._version,
                                                             expected, leaf)))
    else:
        found.append((reader, lambda: ABOVE.view_changed_error(
            tape, view, leaf._version, expected, ABOVE.leaf_site(leaf))))


def _constant_view_changed(tape, view, now, expected, base):
    """PyTorch's error for view record ``view`` of a tensor that requires no grad (``base``),
    read by a backward after the tensor changed in place: with no history, it names only the
    view's shape."""
    shape = tape.views.get(view, ((int(tape.size[view]),),))[0]
    return version_error(shape, "", now, expected, ABOVE.leaf_site(base))


def _modified(t, expected, shape=None):
    """PyTorch's error for a tensor a backward reads that was changed in place since (of
    ``shape``, a view of t's, or t's own)."""
    # (a constant a recorded in-place op on another tape changed has that op's node now)
    producer = ABOVE.producer_name(t._tape, t._r) if t._tape is not None else ""
    return version_error(t._value.shape if shape is None else shape, producer, t._version,
                         expected, ABOVE.leaf_site(t))


def version_error(shape, producer, now, expected, site):
    """PyTorch's error for a value of ``shape`` that the node ``producer`` ('' for none)
    made, saved at version ``expected`` and at version ``now`` when the backward reads it;
    tapegrad adds where the change was made: ``site``, (op name, 'file:line') or None."""
    producer = f", which is output 0 of {producer}," if producer else ""
    where = f" It was modified by {site[0]} at {site[1]}." if site else ""
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: [tapegrad.DoubleTensor {list(shape)}]{producer} is at version "
        f"{now}; expected version {expected} instead.{where}")


def arguments_changed(tape):
    """Whether an argument of a replay was changed in place since the call."""
    leaf_rec = tape.leaf_rec
    for t in tape.leaves.values():
        if leaf_rec.get(id(t), (None, t._version))[1] != t._version:
            return True
    return False


def constants_changed(tape):
    """Whether a tensor the replay read as a constant (a closure's, not an argument) was
    changed in place since the call (whose guard checked its version)."""
    for _, x, version, _ in tape.consts:
        if type(x) is not int and x._version != version:
            return True
    return False


def _value_read(tape, s, need, op, a0, a1, replaced=()):
    """Whether some record that will be swept reads the value of record s (directly or
    through the hidden broadcast copies made of it) for the gradient of an input that needs
    one: what PyTorch saved.  ``replaced``: records of in-place ops that replaced s's value,
    whose read of it (their x0) is of a copy PyTorch kept for them."""
    return newest_read(tape, s, need, op, a0, a1, replaced) >= 0


def newest_read(tape, s, need, op, a0, a1, replaced=()):
    """The newest record of those ``_value_read`` looks for, or -1: the first the backward
    sweeps, where PyTorch unpacks that saved value first."""
    sources = {s} | {int(b) for b in np.nonzero(((op == K.BCAST) | (op == K.EXPAND_S)) &
                                                (a0 == s))[0]}
    newest = -1
    for src in sources:
        readers = np.nonzero(need.astype(bool) & ((a0 == src) | (a1 == src)))[0]
        for r in readers[::-1]:
            if r <= newest:
                break
            reads = K.OPS[int(op[r])].reads_when(a0[r] >= 0 and need[a0[r]],
                                                 a1[r] >= 0 and need[a1[r]])
            if ((a0[r] == src and reads & K.READS_X0 and int(r) not in replaced)
                    or (a1[r] == src and reads & K.READS_X1)):
                newest = int(r)
                break
    return newest


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate into ``.grad`` the gradients of ``tensors`` (summed) w.r.t. the leaves.

    With ``create_graph=True`` the gradients are themselves recorded (differentiable).
    ``grad_tensors`` holds one gradient per non-scalar output (its shape); ``inputs``
    limits which tensors receive ``.grad``.  ``retain_graph=True`` keeps the graph for another
    backward.  ``t.backward(...)`` is ``backward(t, ...)``.

    Example:
        >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> tg.autograd.backward([(x ** 2).sum(), x.sum()])
        >>> x.grad
        tensor([3., 5.])
    """
    if isinstance(tensors, Tensor):
        tensors = (tensors,)
    tensors = tuple(tensors)
    if grad_tensors is None:
        grad_tensors = (None,) * len(tensors)
    elif isinstance(grad_tensors, Tensor):
        grad_tensors = (grad_tensors,)
    if inputs is not None:
        if isinstance(inputs, Tensor):
            inputs = (inputs,)
        inputs = tuple(inputs)
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    if create_graph:
        ABOVE.backward_create_graph(tensors, tuple(grad_tensors), inputs)
        return
    if inputs is not None:
        for x in inputs:
            if x._tape is not None:   # a non-leaf input gets its .grad, as if retained
                x.retain_grad()
    run_backward(tensors, tuple(grad_tensors), bool(retain_graph), inputs)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False,
         materialize_grads=False):
    """Gradients of ``outputs`` w.r.t. ``inputs``, returned as a tuple; ``.grad`` untouched.

    Each gradient has its input's shape.  ``grad_outputs`` seeds non-scalar outputs; an input
    that ``outputs`` do not depend on raises unless ``allow_unused=True`` (then None) or
    ``materialize_grads=True`` (then zeros).  ``create_graph=True`` records the gradients so
    that they can be differentiated again.  ``is_grads_batched=True``: each ``grad_outputs``
    has a leading batch dimension, and each gradient gets one too (one backward per row,
    stacked).  ``only_inputs`` is PyTorch's deprecated argument, ignored as there.

    Example:
        >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> (g,) = tg.autograd.grad((x ** 3).sum(), x, create_graph=True)
        >>> g
        tensor([ 3., 12.], grad_fn=<...>)
        >>> tg.autograd.grad(g.sum(), x)
        (tensor([ 6., 12.]),)
    """
    if not only_inputs:
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to "
                      "True). To accumulate gradient for other parts of the graph, please use "
                      "tapegrad.autograd.backward.", FutureWarning, stacklevel=2)
    single = isinstance(inputs, Tensor)
    outputs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
    inputs = (inputs,) if single else tuple(inputs)
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = (grad_outputs,)
    if is_grads_batched:
        return _batched_grad(outputs, inputs, tuple(grad_outputs), retain_graph, create_graph,
                             allow_unused, materialize_grads)
    for j, x in enumerate(inputs):
        if not x._rg:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    if create_graph:
        return ABOVE.grad_create_graph(outputs, inputs, tuple(grad_outputs), allow_unused,
                                       materialize_grads)
    results = run_backward(outputs, tuple(grad_outputs), bool(retain_graph), inputs,
                           accumulate=False)
    out = []
    for j, x in enumerate(inputs):
        g = results.get(id(x))
        if g is None:
            if not (allow_unused or materialize_grads):
                raise RuntimeError(
                    f"The differentiated Tensor at index {j} appears to not have been used in "
                    "the graph. Set allow_unused=True if this is the desired behavior.")
            out.append(Tensor._make(np.zeros(x._value.shape)) if materialize_grads else None)
        else:
            out.append(Tensor._make(np.array(g).reshape(x._value.shape)))
    return tuple(out)


def _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                  materialize_grads):
    """``grad(..., is_grads_batched=True)``: a backward per row of the seeds, the graph kept
    until the last, and each input's gradients stacked (PyTorch maps one backward over the
    rows; the rows' gradients are the same)."""
    for g in grad_outputs:
        if isinstance(g, Tensor) and not g._value.ndim:
            g[0]    # (indexing's IndexError for a 0-d tensor: PyTorch's, which takes row 0)
    rows = {g._value.shape[0] if isinstance(g, Tensor) else None for g in grad_outputs}
    if None in rows or len(rows) != 1:
        raise RuntimeError("If `is_grads_batched=True`, we interpret the first dimension of "
                           "each grad_output as the batch dimension. The sizes of the "
                           "remaining dimensions are expected to match the shape of "
                           "corresponding output")
    (n,) = rows
    keep = create_graph if retain_graph is None else retain_graph
    per_row = []
    for i in range(n):
        per_row.append(grad(outputs, inputs, tuple(g[i] for g in grad_outputs),
                            retain_graph=True if i < n - 1 else keep,
                            create_graph=create_graph, allow_unused=allow_unused,
                            materialize_grads=materialize_grads))
    out = []
    for j, x in enumerate(inputs):
        column = [row[j] for row in per_row]
        if n == 0:
            out.append(Tensor._make(np.zeros((0,) + x._value.shape)))
        elif column[0] is None:
            out.append(None)
        else:
            out.append(ABOVE.stack(column))
    return tuple(out)


class _Above:
    """What the driver calls in the modules above it, which install themselves here when they
    are imported (``tapegrad/__init__`` imports them all): the checks of values changed in
    place (inplace.py), the differentiable backward of ``create_graph`` (higher.py) and the
    Python backward of an ``autograd.Function`` (function.py)."""

    check_saved_versions = None
    leaf_site = None
    producer_name = None    # (tape, record) -> the node name PyTorch's version error shows
    replaced_constant_error = None
    backward_create_graph = None
    grad_create_graph = None
    run_custom = None       # an autograd.Function's backward in the sweep (function.py)
    stack = None            # functional.stack, for grad(is_grads_batched=True)'s rows


ABOVE = _Above()
# the tensor handle's seam (tensor.py)
_tensor_module.AUTOGRAD.node_for = node_for
_tensor_module.AUTOGRAD.retained = _RETAINED


# torch.autograd.detect_anomaly, set_detect_anomaly, and their module
# (torch.autograd.anomaly_mode), which _anomaly.py stands for
from ._anomaly import detect_anomaly, set_detect_anomaly  # noqa: E402
anomaly_mode = _anomaly
__all__ = ["backward", "grad", "Function", "Node", "AccumulateGrad", "detect_anomaly",
           "set_detect_anomaly"]

from ._public import public_dir as _public_dir  # noqa: E402

# tab completion offers these, not the imports (the grad-mode switches are documented at the
# top level; inference_mode, defined in derived.py, is set here by the package's __init__)
__dir__ = _public_dir(globals(), ("function", "functional", "anomaly_mode", "no_grad",
                                  "enable_grad", "set_grad_enabled", "inference_mode"))
