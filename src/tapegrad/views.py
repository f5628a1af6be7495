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

    @property
    def root(self):
        return self._root() if self.detached else self._root

    def positions(self, shape):
        """The flat positions in the root's value, as an int64 array of ``shape``."""
        if self.index is None:
            return np.arange(self.root._value.size, dtype=np.int64).reshape(shape)
        return self.index


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
            # temporaries (x[i] in a loop) die at once: keep the list as long as the live ones
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
        # the common case, a view of a tensor that is no view, made with grad mode on
        result._version = parent._version
        result._alias = ViewOf(parent, index, overlaps, False, False, parent._version, None,
                               False)
        link.add(result)
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
    return result


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
