"""Which tensors are views of which: the bookkeeping behind PyTorch's aliasing.

A view (``x[0]``, ``x.t()``, ``x.view(...)``, ``x.detach()``, ...) holds a value of its own,
as every tapegrad tensor does (recorded values live in the tape's arena), and remembers what
it aliases: its *root* (the tensor that is not a view) and the flat C-order positions in the
root's value that its elements are, an integer array shaped like the view.  The root keeps
weak references to its live views.  An in-place change of any member of such a family is
then carried to every other member (inplace.py does it, and records it where gradients flow),
so what PyTorch makes visible through shared memory is visible here too.  Nothing in this
module does math on values: it only keeps the links.
"""
import math
import weakref

import numpy as np

from .tape import state


class ViewOf:
    """The alias link of a view: ``root``, ``index`` (flat positions in the root's value, an
    int64 array of the view's shape; None for the root's elements in order), ``detached``
    (``detach()``/``.data``: values are shared, gradients are not), ``overlaps`` (an expanded
    view: several elements are one memory location), ``no_grad_made`` (made under ``no_grad``,
    or a view of such a view: PyTorch's ``CreationMeta.NO_GRAD_MODE``, which forbids giving it
    a history later), ``unversioned`` (``.data``: a change through it is not counted as a
    change of the root, so backward does not notice it, as in PyTorch) and ``made_at`` (the
    version its history was made at); ``via``: the ``detach()``/``.data`` result a view of
    a detached tensor comes from (None for that result itself: no reference to itself, which
    would keep it alive until a garbage collection).

    A detached tensor holds its root weakly: a tensor's history (its tape and arena) must not
    outlive it because its values were kept with ``detach()``.  Once the root is gone, what
    was detached from it is a tensor of its own (``root`` is None)."""

    __slots__ = ("_root", "index", "detached", "overlaps", "no_grad_made", "unversioned",
                 "made_at", "via", "lost", "multi")

    def __init__(self, root, index, overlaps, no_grad_made, unversioned, made_at, via,
                 detached):
        self._root = weakref.ref(root) if detached else root
        self.index, self.overlaps = index, overlaps
        self.no_grad_made, self.unversioned, self.made_at = no_grad_made, unversioned, made_at
        self.via, self.detached = via, detached
        self.lost = None    # the name of the history a no_grad view lost (inplace.py)
        # (op name, output number) for an output of an op returning several views (split,
        # unbind), ("", 0) for a view of one: PyTorch's CreationMeta.MULTI_OUTPUT_NODE
        self.multi = None

    @classmethod
    def of_live_root(cls, root, index, overlaps, version):
        """``ViewOf(root, index, overlaps, False, False, version, None, False)``, the common
        case (a view made with grad mode on of a tensor that is no view), without ``__init__``'s
        call: every x[i], x.t(), x.view(...) of a tensor with views comes here.  The fields
        are ``__init__``'s: a field added there is added here."""
        v = _new_link(cls)
        v._root, v.index, v.overlaps = root, index, overlaps
        v.no_grad_made = v.unversioned = v.detached = False
        v.made_at, v.via, v.lost, v.multi = version, None, None, None
        return v

    @property
    def root(self):
        return self._root() if self.detached else self._root

    def positions(self, shape):
        """The flat positions in the root's value, as an int64 array of ``shape``."""
        if self.index is None:
            # all the root's elements in order: as many as the view has, so the root itself
            # is not needed (a detached tensor may outlive it: (x * 2).detach().view(-1))
            return np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
        return self.index


_new_link = object.__new__


class Views:
    """A root's weak references to its live views (dead ones are pruned as the list grows)."""

    __slots__ = ("refs", "prune_at")

    def __init__(self):
        self.refs = []
        self.prune_at = 16

    def add(self, view):
        refs = self.refs
        refs.append(weakref.ref(view))
        if len(refs) >= self.prune_at:
            self.prune()

    def prune(self):
        # temporaries (x[i] in a loop) die at once: keep the list as long as the live ones
        refs = self.refs
        refs[:] = [r for r in refs if r() is not None]
        self.prune_at = 2 * len(refs) + 16

    def live(self):
        out = []
        alive = []
        for r in self.refs:
            v = r()
            if v is not None:
                out.append(v)
                alive.append(r)
        if len(alive) != len(self.refs):
            self.refs = alive
            self.prune_at = 2 * len(alive) + 16
        return out


def note_view(result, parent, index, overlaps=False, detached=False, unversioned=False):
    """Make ``result`` a view of ``parent``: ``index`` gives the flat positions in
    ``parent``'s value of ``result``'s elements (an int array of result's shape), or None
    when they are parent's elements in order.  ``detached``: result is ``detach()`` or
    ``.data`` of parent (``unversioned`` for ``.data``)."""
    link = parent._alias
    if type(link) is Views and not detached and state.grad_enabled:
        # the common case, a view of a tensor that is no view, made with grad mode on:
        # Views.add written out (every x[i], x.t(), x.view(...) of a tensor that has views
        # already comes here)
        result._version = version = parent._version
        result._alias = ViewOf.of_live_root(parent, index, overlaps, version)
        refs = link.refs
        refs.append(weakref.ref(result))
        if len(refs) >= link.prune_at:
            link.prune()
        if _EXPOSED and result._tape is None and exposed(parent):
            share(result)
        return result
    via = None
    if type(link) is ViewOf and link.root is None:
        link = parent._alias = None     # detached from a tensor that is gone: its own now
    if type(link) is ViewOf:
        root = link.root
        if index is None:
            index = None if link.index is None else link.index.reshape(result._value.shape)
        elif link.index is not None:
            index = link.index.reshape(-1)[index]
        if link.overlaps and not overlaps:
            # a part of an expanded view may pick each element once (a row of it)
            overlaps = index is not None and np.unique(index).size < index.size
        inherited_no_grad = link.no_grad_made
        multi = link.multi
        if link.detached:
            via = parent if link.via is None else link.via
        unversioned = unversioned or link.unversioned
    else:
        root = parent
        if link is None:
            link = parent._alias = Views()
        inherited_no_grad = False
        multi = None
    grad_enabled = state.grad_enabled
    if detached:                # detach() itself: a tensor of its own for autograd
        no_grad_made = False
    else:
        # a view made under no_grad (or of such a view): PyTorch's CreationMeta.NO_GRAD_MODE
        no_grad_made = inherited_no_grad or not grad_enabled
        if not grad_enabled and (root if via is None else via)._rg:
            # ... of a tensor that requires grad is a leaf that requires grad itself
            result._rg = True
    if not unversioned:
        # the base and its views count versions together
        result._version = root._version
    result._alias = ViewOf(root, index, overlaps, no_grad_made, unversioned, result._version,
                           via, detached or via is not None)
    if multi is not None and not detached:
        result._alias.multi = ("", 0)     # named after its own node, as PyTorch does
    root._alias.add(result)
    if _EXPOSED and result._tape is None and exposed(root):
        share(result)
    return result


# --- NumPy's view of the memory -------------------------------------------------------------
# An array handed to NumPy (``.numpy()``, ``np.asarray``, ``from_numpy``) is the tensor's
# memory: NumPy writes into it are PyTorch's writes into the storage.  Values changed that
# way cannot be carried to the views (nothing tells tapegrad), so a root whose memory NumPy
# holds has its unrecorded views read that memory itself, as strided NumPy views of it.
# Each root keeps the array NumPy was handed in its ``_numpy`` slot (a registry by id, with a
# weak reference and its callback per tensor, cost every ``p.grad.numpy()`` of a training
# loop about 0.7 us).  ``_EXPOSED`` is empty until NumPy is first handed any tensor's memory:
# until then nothing need look.
_EXPOSED = []


def exposed(root):
    """Whether NumPy holds ``root``'s current memory."""
    held = root._numpy
    return held is not None and held is root._value


def numpy_holds(t):
    """Whether NumPy may write into t's memory unseen: t's, or its root's, was handed to it
    (a copy of t's values kept by version, as a tape keeps a leaf's, cannot be trusted)."""
    if exposed(t):
        return True
    link = t._alias
    return type(link) is ViewOf and link.root is not None and exposed(link.root)


def expose(root):
    """NumPy is handed ``root``'s memory: its unrecorded views read that memory from now on
    (those alive now and those made later)."""
    if exposed(root):
        return
    root._numpy = root._value
    if not _EXPOSED:
        _EXPOSED.append(True)
    link = root._alias
    if type(link) is Views:
        for v in link.live():
            share(v)


def share(t):
    """Make view t's value the NumPy view of its root's memory where its elements lie, if t
    is not recorded (a recorded value lives in its tape's arena) and its elements form a
    strided pattern over a row-major root; True if t's value is that memory now."""
    link = t._alias
    root = link.root
    if root is None or t._tape is not None:
        return False
    memory = strided_view(root._value, link.index, t._value.shape)
    if memory is None or memory.dtype != t._value.dtype:
        return False
    mine = t._value
    if (memory.__array_interface__["data"][0] != mine.__array_interface__["data"][0]
            or memory.strides != mine.strides):
        # (already that memory: keep the array, which other bookkeeping knows by identity)
        t._value = memory
    return True


def strided_view(base, index, shape):
    """The elements of row-major ``base`` at flat positions ``index`` (an int array of
    ``shape``; None: base's elements in order) as a NumPy view of base's memory, or None
    where those positions are no strided pattern (or base is not row-major)."""
    if not base.flags.c_contiguous:
        return None
    flat = base.reshape(-1)
    if index is None:
        return flat.reshape(shape)
    if index.size == 0:
        return flat[:0].reshape(shape)
    first = int(index.reshape(-1)[0])
    steps = []
    expected = np.full(shape, first, dtype=np.int64)
    for d, n in enumerate(shape):
        step = 0
        if n > 1:
            at = [0] * len(shape)
            at[d] = 1
            step = int(index[tuple(at)]) - first
            axis = [1] * len(shape)
            axis[d] = n
            expected += np.arange(n, dtype=np.int64).reshape(axis) * step
        steps.append(step * base.itemsize)
    if not np.array_equal(expected, index):
        return None
    return np.lib.stride_tricks.as_strided(flat[first:], shape, steps)


def history_base(t):
    """The tensor view t is a view of for autograd: its root, or the detach() result it is a
    view of (t itself for that result)."""
    link = t._alias
    if not link.detached:
        return link.root
    return t if link.via is None else link.via


def forget_views(root):
    """The root's value was replaced (``x.data = y``): its old views keep the old values as
    tensors of their own, as PyTorch's keep the old storage."""
    link = root._alias
    if type(link) is Views:
        for v in link.live():
            v._alias = None
        root._alias = None


def family(t):
    """(root, its live views) of the alias family t belongs to, or None if t has no alias."""
    link = t._alias
    if link is None:
        return None
    root = link.root if type(link) is ViewOf else t
    if root is None:                    # detached from a tensor that is gone
        t._alias = None
        return None
    views = root._alias
    return root, (views.live() if type(views) is Views else [])
