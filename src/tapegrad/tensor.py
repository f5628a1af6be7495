"""The Tensor handle: a value, and where on a tape it was recorded.  No math lives here."""
import re
import warnings
import weakref

import numpy as np

from . import _device, _dtype, _frames
from ._hooks import ListedHookHandle
from .tape import state
from .views import _EXPOSED
from .views import ViewOf as _ViewOf
from .views import expose as _expose
from .views import exposed as _exposed
from .views import share as _share
from .views import forget_views as _forget_views
from .views import history_base as _history_base
from .views import note_view as _note_view

# PyTorch's warning, once per process, for float() or complex() of a tensor that requires
# grad (and for such a tensor inside the data of torch.tensor): item() and int() give none
SCALAR_OF_REQUIRES_GRAD = (
    "Converting a tensor with requires_grad=True to a scalar may lead to unexpected "
    "behavior.\nConsider using tensor.detach() first.")


class Size(tuple):
    """A shape, printed as PyTorch prints ``torch.Size``: a tuple of ints (``x.shape``,
    ``x.size()``), with ``numel()`` the product of its entries.

    Example:
        >>> s = tg.zeros(2, 3).shape
        >>> s, s[0], s.numel(), s == (2, 3)
        (tapegrad.Size([2, 3]), 2, 6, True)
    """

    __slots__ = ()

    def __repr__(self):
        return f"tapegrad.Size({list(self)})"

    def numel(self):
        n = 1
        for d in self:
            n *= d
        return n

    # a slice of a shape, and a shape joined with another or repeated, is a shape, as in
    # PyTorch (``x.shape[1:]``, ``x.shape + (1,)``, ``(1,) + x.shape``); an element is an int
    def __getitem__(self, i):
        got = tuple.__getitem__(self, i)
        return Size(got) if type(i) is slice else got

    def __add__(self, other):
        if not isinstance(other, tuple):
            raise TypeError(f"can only concatenate tuple (not {type(other).__name__}) to "
                            f"tapegrad.Size")
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __mul__(self, n):
        return Size(tuple.__mul__(self, n))

    __rmul__ = __mul__


_new_object = object.__new__



class _AutogradSeam:
    """What the tensor handle asks of the autograd driver, which sits above it and fills these
    in when it is imported (autograd.py): the grad_fn node of a record, and the registry of
    tensors whose ``.grad`` is retained."""

    node_for = None
    retained = None


AUTOGRAD = _AutogradSeam()


class _LegacySeam:
    """``Tensor(...)``'s legacy constructor, which needs the creation functions above this
    module: legacy.py fills it in."""

    new = None


LEGACY = _LegacySeam()


class Tensor:
    """An n-dimensional array of float64 (or integer or bool) values that can take part in
    autograd: ``requires_grad``, ``grad``, ``grad_fn``, ``backward()``, ``detach()``, and
    PyTorch's methods and operators (``x @ w``, ``x.sum(dim=1)``, ``x[:, 0]``, ...).

    Make tensors with ``tg.tensor``, ``tg.zeros``, ``tg.randn``, ...; ``tg.Tensor(2, 3)`` and
    ``tg.Tensor([1.0, 2.0])`` are PyTorch's legacy constructor (``legacy.py``), in the
    default dtype.  ``isinstance(x, tg.Tensor)`` works as in PyTorch.

    Inside, it is a thin handle: ``_value`` (a NumPy array) and, for recorded results,
    ``(_tape, _r)``.  Leaves own their value; recorded results hold a view into their tape's
    arena, which is never overwritten while the view is alive.

    Example:
        >>> x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        >>> y = (x @ x.T).sum()
        >>> y.backward()
        >>> x.grad
        tensor([[ 8., 12.],
                [ 8., 12.]])
        >>> isinstance(x, tg.Tensor), x.shape, x.dtype
        (True, tapegrad.Size([2, 2]), tapegrad.float64)
    """

    __slots__ = ("_value", "_tape", "_r", "_rg", "_grad", "_version", "_retains", "_hooks",
                 "_alias", "_keep", "_numpy", "__weakref__")
    # NumPy defers to our reflected operators (ndarray + Tensor -> Tensor.__radd__).
    __array_ufunc__ = None

    def __new__(cls, *args, **kwargs):
        # Tensor(2, 3), Tensor([1, 2]): the legacy constructor, bound by legacy.py (above
        # this module); the ops make their results with _make, which does not come here
        return LEGACY.new(cls, *args, **kwargs)

    def __init__(self, *args, **kwargs):
        pass        # everything happens in __new__

    # --- construction (internal) ---------------------------------------------------------
    @staticmethod
    def _make(value, requires_grad=False, cls=None):
        # a staticmethod, not a classmethod: binding the class costs as much as the body,
        # and every op's result and every gradient is made here
        t = _new_object(cls or Tensor)
        t._value = value
        t._tape = None
        t._r = -1
        t._rg = requires_grad
        t._grad = None
        t._version = 0
        t._retains = False
        t._hooks = None
        t._alias = None     # views.py: a view's link to its root, or a root's live views
        t._keep = None      # older tapes its graph reaches (tape.Tape.keep)
        t._numpy = None     # the value NumPy was handed, if it was (views.expose)
        return t

    # --- properties ------------------------------------------------------------------------
    @property
    def shape(self):
        return Size(self._value.shape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._value.shape)
        return self._value.shape[_wrap_dim(dim, self._value.ndim)]

    @property
    def ndim(self):
        return self._value.ndim

    def dim(self):
        return self._value.ndim

    def numel(self):
        return self._value.size

    nelement = numel

    @property
    def dtype(self):
        return _dtype.from_numpy_dtype(self._value.dtype)

    @property
    def device(self):
        return _device.CPU

    def is_floating_point(self):
        return self._value.dtype.kind == "f"

    # tapegrad's dtypes are real, and its tensors are never lazily conjugated or negated:
    # PyTorch's answers for a real tensor (conj, resolve_* and real return the tensor itself)
    def is_complex(self):
        return False

    def is_conj(self):
        return False

    def is_neg(self):
        return False

    def is_signed(self):
        return self._value.dtype.kind in "fi"

    def conj(self):
        return self

    resolve_conj = resolve_neg = conj

    @property
    def real(self):
        return self

    @property
    def imag(self):
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")

    def get_device(self):
        return -1   # (PyTorch's for a tensor on the CPU)

    def is_same_size(self, other):
        return self._value.shape == other._value.shape

    @property
    def itemsize(self):
        return self._value.dtype.itemsize

    @property
    def nbytes(self):
        return self._value.nbytes

    @property
    def requires_grad(self):
        if self._rg and state.trace is not None:
            # compile traces an argument that requires no grad as if it did
            return state.trace.requires_grad_eagerly(self)
        return self._rg

    @requires_grad.setter
    def requires_grad(self, flag):
        if flag and self._value.dtype.kind != "f":   # PyTorch words the setter's error so
            raise RuntimeError(
                "only Tensors of floating point and complex dtype can require gradients")
        if flag and self._tape is not None:
            # PyTorch's setter refuses a result of recorded ops either way (requires_grad_(),
            # the method, lets True through), with the first sentence of the message only
            raise RuntimeError("you can only change requires_grad flags of leaf variables.")
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad=True):
        if self._tape is not None and not requires_grad:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use "
                "a computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach().")
        if requires_grad and self._value.dtype.kind != "f":
            raise RuntimeError(
                "only Tensors of floating point dtype can require gradients")
        self._rg = bool(requires_grad)
        return self

    @property
    def is_leaf(self):
        return self._tape is None

    @property
    def grad(self):
        if self._tape is not None and not self._retains:
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
                "Its .grad attribute won't be populated during autograd.backward(). If you "
                "indeed want the .grad field to be populated for a non-leaf Tensor, use "
                ".retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by "
                "mistake, make sure you access the leaf Tensor instead.", UserWarning,
                stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got grad of type "
                    f"{type(value).__name__}")
            if value._value.dtype != self._value.dtype:
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype "
                    f"'{_dtype.C_TYPE_NAMES[value.dtype.name]}' to a tensor with grad_dtype "
                    f"'{self.dtype.scalar_name}'. The gradient must match the tensor's "
                    "grad_dtype (defaults to the tensor's dtype). You can set the tensor's "
                    "grad_dtype attribute with a specific dtype, or None to allow any dtype. "
                    "Set grad_dtype with caution. Diverging the dtypes of a tensor and its "
                    "gradient may break downstream systems that assume they match.")
            if value.shape != self.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor "
                    f"of size '{list(self.shape)}'. Please ensure that the gradient and the "
                    "tensor are the same size")
        self._grad = value

    @property
    def grad_fn(self):
        if self._alias is not None:
            check_history(self)
        if self._tape is None:
            return None
        return AUTOGRAD.node_for(self._tape, self._r)

    @property
    def _base_version(self):
        return self._version

    def _bump_version(self):
        """Mark the value as changed in place (optimizers call this after an update)."""
        self._version += 1
        if self._alias is not None:
            # the write went into this tensor's own memory: its views and base read it too
            _after_native_write(self, "_bump_version")

    @property
    def _base(self):
        """The tensor this one is a view of (PyTorch's ``_base``), or None."""
        link = self._alias
        if type(link) is not _ViewOf or link.detached:
            return None
        return link.root

    def _is_view(self):
        return self._base is not None

    def retain_grad(self):
        if not self._rg:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._tape is not None and not self._retains:
            self._retains = True
            AUTOGRAD.retained.add(self)

    @property
    def retains_grad(self):
        return self._retains

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; it may return a
        replacement gradient.  Returns a handle with ``remove()``."""
        if not self._rg:
            raise RuntimeError(
                "cannot register a hook on a tensor that doesn't require gradient")
        if self._tape is None:
            if self._hooks is None:
                self._hooks = []
            hooks = self._hooks
        else:
            hooks = self._tape.hooks.setdefault(self._r, (self._value.shape, []))[1]
        hooks.append(hook)
        return ListedHookHandle(hooks, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(tensor)`` on this leaf after ``backward()`` has added to its
        ``.grad`` (which the hook may read or change in place); it must return None.  Not
        called by ``autograd.grad``, which accumulates nothing.  Returns a handle with
        ``remove()``.

        Example:
            >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
            >>> _ = x.register_post_accumulate_grad_hook(lambda t: print(t.grad))
            >>> (x * 3).sum().backward()
            tensor([3., 3.])
        """
        if not self._rg:
            raise RuntimeError(
                "cannot register a hook on a tensor that doesn't require gradient")
        if self._tape is not None:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors")
        # kept in the leaf's hook list, so that every fast path that leaves a hooked leaf to
        # the general backward leaves this one too; the gradient hooks pass it by
        if self._hooks is None:
            self._hooks = []
        entry = PostAccumulateHook(hook)
        self._hooks.append(entry)
        return ListedHookHandle(self._hooks, entry)

    # --- what PyTorch programs ask of a CPU tensor ---------------------------------------------
    @property
    def output_nr(self):
        """Which output of its ``grad_fn`` this tensor is (the part of a split), else 0."""
        link = self._alias
        multi = getattr(link, "multi", None)
        if multi is not None and self._tape is not None:
            return multi[1]
        entry = OUTPUT_NR.get(self)
        if entry is not None and entry[0] is self._tape and entry[1] == self._r:
            return entry[2]
        if self._tape is not None:
            # a further output of a composite node with several (functional.named_outputs)
            composite = self._tape.composites.get(self._r)
            if composite is not None and len(composite) > 2:
                return composite[3]
        return 0

    def is_inference(self):
        return False    # (tapegrad's inference_mode is no_grad: it makes ordinary tensors)

    @property
    def layout(self):
        return _device.strided

    # dense CPU tensors: never sparse, quantized, meta, nested or MKL-DNN ones
    is_sparse = is_sparse_csr = is_quantized = is_meta = is_nested = is_mkldnn = property(
        lambda self: False)

    @property
    def name(self):
        return None     # (PyTorch's named tensors: a name tapegrad never sets)

    def is_pinned(self, device=None):
        return False

    def pin_memory(self, device=None):
        # what a CPU-only PyTorch says: pinned memory belongs to an accelerator
        raise RuntimeError("Cannot access accelerator device when none is available.")

    def is_shared(self):
        base = self._base
        return bool(SHARED.get(self) or (base is not None and SHARED.get(base)))

    def share_memory_(self):
        """Marks the tensor as shared (``is_shared()`` is then True) and returns it.  tapegrad
        has no process pool that would read it: the values stay in this process's memory."""
        SHARED.set(self, True)
        return self

    # --- conversion --------------------------------------------------------------------------
    def numpy(self, *, force=False):
        if state.trace is not None:
            read_value(self, "numpy()")
        if self._rg and not force and (state.trace is None
                                       or state.trace.requires_grad_eagerly(self)):
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead.")
        return _for_numpy(self)

    def __array__(self, dtype=None, copy=None):
        read_value(self, "np.asarray()")
        if self._rg and (state.trace is None or state.trace.requires_grad_eagerly(self)):
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead.")
        v = self._value
        if dtype is not None and v.dtype != dtype:
            return v.astype(dtype)
        if copy:
            return v.copy()
        return _for_numpy(self)

    def is_contiguous(self, memory_format=None):
        """Whether the elements lie in memory in row-major order without gaps, as PyTorch
        says of its strided views (a view here is laid out where its root's elements are)."""
        link = self._alias
        if type(link) is not _ViewOf or link.index is None or self._value.size <= 1:
            return True
        positions = link.index.reshape(-1)
        return bool((np.diff(positions) == 1).all())

    def storage_offset(self):
        """Where the first element lies in its root's elements (0 for a tensor of its own)."""
        link = self._alias
        if type(link) is not _ViewOf or link.index is None or self._value.size == 0:
            return 0
        return int(link.index.reshape(-1)[0])

    def stride(self, dim=None):
        """Element strides, as PyTorch gives them for views of a contiguous tensor.

        A tensor of its own is laid out in row-major order (PyTorch keeps a transposed
        layout through clones and elementwise ops; here their results are row-major).  A
        view's strides are where its elements lie in its root's; a dim of size one, where
        positions say nothing, reports the stride row-major order gives it.
        """
        shape = self._value.shape
        nd = len(shape)
        if dim is not None:
            if nd == 0:
                raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
            if not -nd <= dim < nd:
                raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                                 f"{nd - 1}], but got {dim})")
        link = self._alias
        positions = (link.index if type(link) is _ViewOf and link.index is not None
                     and self._value.size > 1 else None)
        strides = [1] * nd
        for d in range(nd - 2, -1, -1):
            strides[d] = strides[d + 1] * max(shape[d + 1], 1)
        if positions is not None:
            first = int(positions.reshape(-1)[0])
            for d in range(nd - 1, -1, -1):
                if shape[d] > 1:
                    step = [0] * nd
                    step[d] = 1
                    strides[d] = int(positions[tuple(step)]) - first
                elif d + 1 < nd:
                    strides[d] = strides[d + 1] * max(shape[d + 1], 1)
        return tuple(strides) if dim is None else strides[dim]

    def data_ptr(self):
        """An address for identity checks, as PyTorch's: a view's is its root's plus its
        storage offset; 0 for a tensor without elements."""
        if self._value.size == 0:
            return 0
        link = self._alias
        root = link.root if type(link) is _ViewOf else None
        value = (root if root is not None else self)._value
        return value.__array_interface__["data"][0] + value.itemsize * self.storage_offset()

    def item(self):
        if state.trace is not None:
            read_value(self, "item()")
        v = self._value
        if v.size != 1:
            raise RuntimeError(
                f"a Tensor with {v.size} elements cannot be converted to Scalar")
        return v.item()

    def tolist(self):
        read_value(self, "tolist()")
        return self._value.tolist()

    def __float__(self):
        if self._rg:
            _frames.warn_program(SCALAR_OF_REQUIRES_GRAD, once=SCALAR_OF_REQUIRES_GRAD)
        return float(self._python_number())

    def __int__(self):
        return int(self._python_number())

    def __complex__(self):
        if self._rg:
            _frames.warn_program(SCALAR_OF_REQUIRES_GRAD, once=SCALAR_OF_REQUIRES_GRAD)
        return complex(self._python_number())

    def _python_number(self):
        # float(x), int(x) and complex(x) of several values: Python's ValueError, as
        # PyTorch's (x.item() raises its RuntimeError)
        if self._value.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self.item()

    def __index__(self):
        if self._value.dtype.kind not in "iub" or self._value.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self):
        read_value(self, "bool()")
        v = self._value
        if v.size != 1:
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous" if not v.size
                               else "Boolean value of Tensor with more than one value is "
                               "ambiguous")
        return bool(v.reshape(-1)[0])

    def __len__(self):
        if self._value.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._value.shape[0]

    def __iter__(self):
        if self._value.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._value.shape[0]))

    __hash__ = object.__hash__

    def __repr__(self, *, tensor_contents=None):
        from ._format import format_tensor
        suffixes = []
        if self._tape is not None:
            suffixes.append(f"grad_fn=<{self.grad_fn._class_name()}>")
        elif self._rg:
            suffixes.append("requires_grad=True")
        return format_tensor(self._value, suffixes=suffixes)

    __str__ = __repr__

    def __format__(self, spec):
        if self._value.ndim == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    # --- stopping the record ---------------------------------------------------------------
    def detach(self):
        """A tensor sharing this value that no gradient flows through."""
        if self._rg and state.trace is not None:
            state.trace.opaque("detach() of a traced value")
        t = Tensor._make(self._value)
        # t shares this value: an in-place change of either is seen by the other, by this
        # tensor's views, and by backward's check of who saw the value before
        _note_view(t, self, None, detached=True)
        if self._tape is not None:
            # ... also once this handle is gone, while its tape (and records that saved the
            # value) live on: a change through t is then logged on the record itself
            _share_memory(t, self)
        return t

    def detach_(self):
        """Detach in place: this handle becomes a leaf that requires no gradient."""
        if self._tape is not None:
            _share_memory(self, self)
        self._tape = None
        self._r = -1
        self._rg = False
        self._keep = None
        return self

    @property
    def data(self):
        if self._rg and state.trace is not None:
            state.trace.opaque(".data of a traced value")   # its values would be baked in
        return _note_view(Tensor._make(self._value), self, None, detached=True,
                          unversioned=True)

    @data.setter
    def data(self, other):
        if self._rg and other._value.dtype.kind not in "fc":
            # (module.type(int64) ends here for a parameter that requires grad)
            raise RuntimeError(
                "data set to a tensor that requires gradients must be floating point or "
                "complex dtype")
        _forget_views(self)
        if self._tape is not None:
            # (its record takes the new values: inplace.assign_data)
            _assign_data(self, other)
            return
        self._value = other._value
        if self._rg and other._tape is None and not other._rg:
            # a leaf now in a plain tensor's memory: a write into that tensor changes the
            # leaf, which a tape's copy of the leaf must notice (inplace.share_memory)
            hit = _shared.get(id(other))
            if hit is None or hit[0]() is not other:
                _share_memory(other, self)
            if _exposed(other):     # (NumPy holds that memory: its writes go unseen)
                _expose(self)

    def __deepcopy__(self, memo):
        if self._tape is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol at the moment.  If you were attempting to deepcopy a "
                "module, this may be because of a tapegrad.nn.utils.weight_norm usage, see "
                "https://github.com/pytorch/pytorch/pull/103001")
        t = Tensor._make(self._value.copy(), self._rg)
        if self._grad is not None:
            t._grad = Tensor._make(self._grad._value.copy())
        memo[id(self)] = t
        return t

    def __reduce__(self):
        if self._tape is not None:
            raise RuntimeError("only leaf tensors can be pickled")
        return (_rebuild, (self._value, self._rg))


# Tensors that share the memory of a recorded value or of a leaf (see inplace.share_memory,
# which fills this in and installs itself as _share_memory: inplace imports this module).
_shared = {}
_share_memory = None
# inplace.py installs this: carry a write made in a tensor's own memory to its aliases
_after_native_write = None
# inplace.py installs this: ``t.data = other`` for a tensor with a history
_assign_data = None


def _for_numpy(t):
    """t's memory, handed to NumPy as PyTorch's ``numpy()`` hands its storage: a write
    through the array is a write into t, and into every alias of t.  A view reads its root's
    memory from then on, where its elements are a strided pattern there; a view that cannot
    gives its own copy read-only instead, so that a write into it raises rather than being
    lost."""
    link = t._alias
    if link is None:
        root = t            # (every fresh ``.grad``: no view and none of its own)
    else:
        root = link.root if type(link) is _ViewOf else t
        if root is None:    # detached from a tensor that is gone: its own now
            t._alias = None
            root = t
    if not root._value.flags.c_contiguous and id(root) not in _shared:
        # (a result NumPy laid out in column order, x.t() * 2): its views know their
        # elements by row-major position, so its memory becomes row-major before NumPy
        # holds it
        root._value = np.ascontiguousarray(root._value)
    if root._numpy is not root._value:     # (held already: nothing to do, and no call)
        _expose(root)       # its views read the memory NumPy holds from now on
    if _shared:
        hit = _shared.get(id(root))
        if hit is not None and hit[0]() is root and hit[2] is None and \
                hit[3]._value is root._value:
            _expose(hit[3]) # (a leaf given root's memory, leaf.data = root: NumPy holds its)
    if root is t or _share(t):
        return t._value
    v = t._value.view()
    v.flags.writeable = False
    return v


def no_grad_view_error(t, direct):
    """PyTorch's refusal to give a history to a view made under no_grad (``t``, or a view it
    was made from): when it is changed in place with a recorded op (``direct``), or when a
    change through another alias would give it a new one."""
    lost = t._alias.lost if type(t._alias) is _ViewOf else None
    if t._tape is not None or lost:
        name = lost or re.sub(r"Backward(\d*)$", lambda m: "" if m.group(1) in ("", "0")
                              else m.group(1), AUTOGRAD.node_for(t._tape, t._r).name())
        what = f"Output 0 of {name} is a view of a view which was created in"
    else:
        what = "A view was created in"
    how = "is being" if direct else "its base or another view of its base has been"
    return RuntimeError(
        f"{what} no_grad mode and {how} modified inplace with grad mode enabled. Given that "
        "this use case is ambiguous and error-prone, it is forbidden. You can clarify your code "
        "by moving both the view and the inplace either both inside the no_grad block (if you "
        "don't want the inplace to be tracked) or both outside (if you want the inplace to be "
        "tracked).")


def multi_output_view_error(t, direct):
    """PyTorch's refusal to change in place (``direct``), or to give a new history after a
    change through another alias, an output of an op that returns several views (split,
    chunk, unbind) or a view of one."""
    link = t._alias
    name, output_nr = link.multi
    if t._tape is not None or link.lost:
        if link.lost:
            name = link.lost
        elif not name:
            name = re.sub(r"Backward\d*$", "", AUTOGRAD.node_for(t._tape, t._r).name())
        how = "is being modified inplace." if direct else \
            "its base or another view of its base has been modified inplace."
        start = f"Output {output_nr} of {name} is a view and {how}"
    else:
        # a view without a history is taken for one made under no_grad
        how = "is being" if direct else "its base or another view of its base has been"
        start = (f"A view was created in no_grad mode and {how} modified inplace with grad "
                 "mode enabled.")
    return RuntimeError(start + _MULTI_OUTPUT_TAIL)


_MULTI_OUTPUT_TAIL = (
    " This view is the output of a function that returns multiple views. Such functions do "
    "not allow the output views to be modified inplace. You should replace the inplace "
    "operation by an out-of-place one.")


def multi_output_base_changed(name, output_nr):
    """PyTorch's error for a backward that reads output ``output_nr`` of ``name`` (split,
    chunk, unbind), whose base changed in place since: the view's history cannot be made
    again."""
    return RuntimeError(f"Output {output_nr} of {name} is a view and its base or another "
                        "view of its base has been modified inplace." + _MULTI_OUTPUT_TAIL)


def check_history(t):
    """Asking for the history of a view made under no_grad, or of an output of an op that
    returns several views, whose values changed in place since (its grad_fn, or a use in a
    recorded op) raises, as in PyTorch."""
    link = t._alias
    if (type(link) is _ViewOf and (link.no_grad_made or link.multi is not None)
            and t._version != link.made_at
            and (t._tape is not None or _history_base(t)._rg)):
        if link.multi is not None and not link.no_grad_made:
            raise multi_output_view_error(t, direct=False)
        raise no_grad_view_error(t, direct=False)


def _rebuild(value, requires_grad):
    return Tensor._make(value, requires_grad)


class PostAccumulateHook:
    """A hook of ``register_post_accumulate_grad_hook`` in a leaf's hook list."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn


class _ById:
    """Side data of tensors, by identity, dropped when a tensor dies.  (Weak dictionaries
    compare keys with ==, which for tensors is elementwise.)"""

    def __init__(self):
        self._data = {}

    def set(self, t, value):
        key = id(t)
        self._data[key] = (weakref.ref(t, lambda _, key=key: self._data.pop(key, None)), value)

    def get(self, t):
        entry = self._data.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else None


# output_nr of the copies the unsafe splits make (more_ops.py): (tape, record, number), read
# only while the tensor still is that record (an in-place op moves it to a new one)
OUTPUT_NR = _ById()
# tensors share_memory_() was called on
SHARED = _ById()


def _typename(obj):
    """An object's type as PyTorch names it in error messages (module-qualified; a tensor by
    its dtype, as ``tapegrad.DoubleTensor``)."""
    if isinstance(obj, Tensor):
        return f"tapegrad.{obj.dtype.scalar_name}Tensor"
    cls = type(obj)
    if cls.__module__ in ("builtins", None):
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _wrap_dim(dim, ndim):
    """Normalise a possibly negative dim, with PyTorch's IndexError on a bad one."""
    if dim.__class__ is int and -ndim <= dim < ndim:
        # (the common case, a plain int in range, before the general checks: every
        # structural op and reduction over a dim asks)
        return dim + ndim if dim < 0 else dim
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    lo, hi = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    if dim < lo or dim > hi:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})")
    return int(dim) % max(ndim, 1) if ndim else 0


def is_grad_enabled():
    return state.grad_enabled


def read_value(t, kind):
    """Python is about to read t's value (bool(t), t.item(), ...): while tracing, guard it."""
    trace = state.trace
    if trace is None or not t._rg:
        return
    if t._tape is None or t._tape is trace.tape:
        trace.guard(t, kind)
    else:
        trace.opaque(f"{kind} of a tensor recorded outside the traced call")
