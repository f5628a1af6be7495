"""PyTorch's strided-memory names: ``as_strided`` (a view of the elements at chosen positions
of the memory a tensor lies in), ``empty_strided``, and the ``*_copy`` functions
(``view_copy``, ``transpose_copy``, ...), which give a view op's elements as a new tensor.

A tapegrad view records the flat positions of its elements in its root's value
(views.py), which is the memory PyTorch's storage is for a row-major root: ``as_strided``
turns ``size``, ``stride`` and ``storage_offset`` into those positions and makes the view
with the recorded gather PyTorch names ``AsStridedBackward0``, so writes through it reach
the root as in PyTorch.  A ``*_copy`` is the view op followed by a clone, shown as PyTorch's
one node (``ViewBackward0_copy``, ...): no op is defined here.
"""
import numpy as np

from . import creation as _creation
from . import function as _function
from . import functional as F
from ._argtypes import not_tensor as _not_tensor
from ._argtypes import type_name as _type_name
from ._dtype import dtype as _dtype_class
from .inplace import _LEAF_IN_PLACE, _reshaped_in_place
from .tape import state as _state
from .tensor import Tensor
from .views import ViewOf

__all__ = ["as_strided", "empty_strided", "view_copy",
           "alias_copy", "as_strided_copy", "detach_copy", "diagonal_copy", "expand_copy",
           "permute_copy", "select_copy", "slice_copy", "split_copy", "split_with_sizes_copy",
           "squeeze_copy", "t_copy", "transpose_copy", "unbind_copy", "unfold_copy",
           "unsqueeze_copy"]


def _int_list(fname, name, position, values):
    """``values`` as a list of ints, or PyTorch's parser's TypeError for a tuple of ints."""
    if not isinstance(values, (tuple, list)):
        raise TypeError(f"{fname}(): argument '{name}' (position {position}) must be tuple of "
                        f"ints, not {_type_name(values)}")
    for k, v in enumerate(values):
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(f"{fname}(): argument '{name}' (position {position}) must be tuple "
                            f"of ints, but found element of type {_type_name(v)} at pos {k}")
    return [int(v) for v in values]


def _int(fname, name, position, value):
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{fname}(): argument '{name}' (position {position}) must be int, not "
                        f"{_type_name(value)}")
    return int(value)


def _storage_positions(root_size, itemsize, size, stride, offset):
    """The flat positions in a row-major memory of ``root_size`` elements of the elements of
    a tensor of ``size`` and ``stride`` starting at ``offset``, with PyTorch's checks in its
    order (as_strided_tensorimpl, then setStorage's bounds)."""
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError("as_strided: Negative strides are not supported at the moment, got "
                           f"strides: {stride}")
    if any(n < 0 for n in size):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={size} and "
                           f"strides={stride}")
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    # (PyTorch needs no memory for an empty tensor, wherever it starts)
    needed = 0 if 0 in size else offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))
    if needed > root_size:
        raise RuntimeError(f"setStorage: sizes {size}, strides {stride}, storage offset "
                           f"{offset}, and itemsize {itemsize} requiring a storage size of "
                           f"{needed * itemsize} are out of bounds for storage of size "
                           f"{root_size * itemsize}")
    positions = np.full(size, offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(size, stride)):
        axis = [1] * len(size)
        axis[d] = n
        positions += np.arange(n, dtype=np.int64).reshape(axis) * s
    return positions


def _arguments(name, first, input, size, stride, storage_offset):  # noqa: A002
    """(size, stride, input's view link, its root or None, offset) of a call of ``name``
    whose ``size`` is argument ``first`` (PyTorch's positions in its type errors)."""
    size = _int_list(name, "size", first, size)
    stride = _int_list(name, "stride", first + 1, stride)
    link = input._alias
    root = link.root if type(link) is ViewOf else None
    offset = (input.storage_offset() if storage_offset is None
              else _int(name, "storage_offset", first + 2, storage_offset))
    return size, stride, link, root, offset


def as_strided(input, size, stride, storage_offset=None):  # noqa: A002 - PyTorch's name
    """A view of the elements of the memory ``input`` lies in at
    ``storage_offset + sum(i_k * stride[k])`` for each index ``i`` of a tensor of ``size``
    (``storage_offset`` defaults to input's own).  Elements may repeat (a stride of 0): an
    in-place op through such a view is refused, as in PyTorch.  ``grad_fn``:
    ``<AsStridedBackward0>``; the gradient of a repeated element is the sum of its uses.

    The memory is the root's value of a view, in row-major order.  tapegrad's results of
    elementwise ops are row-major where PyTorch may keep an operand's transposed layout (see
    ``Tensor.stride``), and a view can only reach its own elements here: positions outside
    them raise a RuntimeError where PyTorch reads its base's memory.

    Example:
        >>> tg.as_strided(tg.arange(6.0), (2, 2), (1, 2))
        tensor([[0., 2.],
                [1., 3.]])
    """
    if not isinstance(input, Tensor):
        raise _not_tensor("as_strided", "input", 1, input)
    size, stride, link, root, offset = _arguments("as_strided", 2, input, size, stride,
                                                  storage_offset)
    memory = root._value.size if root is not None else input._value.size
    positions = _storage_positions(memory, input._value.dtype.itemsize, size, stride, offset)
    overlaps = np.unique(positions).size < positions.size
    if root is None:
        return F._gathered(input, positions, F.V_AS_STRIDED, overlaps)
    # positions in the root, read as positions among input's own elements
    own = link.positions(input._value.shape).reshape(-1)
    among = np.full(memory, -1, dtype=np.int64)
    among[own] = np.arange(own.size, dtype=np.int64)
    index = among[positions]
    if not (index < 0).any():
        return F._gathered(input, index, F.V_AS_STRIDED, overlaps)
    if _state.grad_enabled and input.requires_grad:
        # PyTorch's gradient would reach the view's own elements only, through the view's
        # node; a gather from the root cannot say that
        raise RuntimeError("as_strided: tapegrad reads a view's own elements only where "
                           "gradients flow; position "
                           f"{int(positions[index < 0][0])} of its base is not one of them")
    # no gradient to carry: the elements of the base's memory, as a view of the base (one
    # that takes no history from it, as input has none)
    base = root.detach() if root.requires_grad else root
    return F._gathered(base, positions, F.V_AS_STRIDED, overlaps)


def _plan_as_strided(input, size, stride, storage_offset=None):  # noqa: A002
    """as_strided_'s node and input's own elements laid out as its result (indices among
    them), for ``inplace._reshaped_in_place``.  The positions are read in the memory input
    lies in, as ``as_strided`` reads them, with PyTorch's checks and texts; what tapegrad's
    tensors cannot hold after the change is refused rather than given other values: elements
    that are not input's own (outside a view), repeated ones (PyTorch then refuses writes to
    the tensor, tapegrad's copies would take them), and, for a tensor of its own, anything
    but all of its elements once each (its memory would shrink to the kept elements, where
    PyTorch keeps them all for later strided reads)."""
    size, stride, link, root, offset = _arguments("as_strided_", 1, input, size, stride,
                                                  storage_offset)
    if _state.grad_enabled and input._rg:
        # PyTorch refuses an in-place change of a leaf (or of a view of one) before it
        # reads the layout
        if input._tape is None:
            raise RuntimeError(_LEAF_IN_PLACE)
        if (type(link) is ViewOf and not link.detached and root is not None
                and root._tape is None and root._rg):
            raise RuntimeError("a view of " + _LEAF_IN_PLACE)
    memory = root._value.size if root is not None else input._value.size
    positions = _storage_positions(memory, input._value.dtype.itemsize, size, stride, offset)
    index = positions
    if root is not None:                 # positions in the root, read among input's own
        own = link.positions(input._value.shape).reshape(-1)
        among = np.full(memory, -1, dtype=np.int64)
        among[own] = np.arange(own.size, dtype=np.int64)
        index = among[positions]
        if (index < 0).any():
            raise RuntimeError("as_strided_: tapegrad's view holds its own elements only; "
                               f"position {int(positions[index < 0][0])} of its base is not "
                               "one of them")
    flat = index.reshape(-1)
    if np.unique(flat).size < flat.size:
        raise RuntimeError("as_strided_: tapegrad does not support a layout that repeats "
                           "elements (a stride of 0); use as_strided()")
    if root is None and flat.size != input._value.size:
        raise RuntimeError("as_strided_: tapegrad does not support dropping elements of a "
                           "tensor that is not a view (later strided reads would not find "
                           "them); use as_strided(), or call as_strided_ on a view")
    return F.V_AS_STRIDED_, index


_as_strided_in_place = _reshaped_in_place("as_strided_", _plan_as_strided)


def as_strided_(self, size, stride, storage_offset=None):
    """``x.as_strided_(size, stride, storage_offset=None)``: x itself becomes
    ``as_strided(x, size, stride, storage_offset)`` -- its shape and the elements it shows
    change in place (version counted, ``grad_fn`` ``<AsStridedBackward1>``), as PyTorch
    changes a tensor's sizes and strides.  tapegrad refuses the layouts it cannot hold (see
    ``_plan_as_strided``): repeated elements, elements outside a view, and a tensor of its own
    keeping only some of its elements.

    Example:
        >>> x = tg.arange(6.0)
        >>> x.as_strided_((2, 3), (1, 2))
        tensor([[0., 2., 4.],
                [1., 3., 5.]])
        >>> x.shape, x._version
        (tapegrad.Size([2, 3]), 1)
        >>> y = tg.arange(6.0)[1:]
        >>> y.as_strided_((2,), (2,))
        tensor([1., 3.])
    """
    return _as_strided_in_place(self, size, stride, storage_offset)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """A new leaf tensor of ``size`` whose values are to be overwritten, as
    ``empty(size)``.  ``stride`` is checked as PyTorch checks it; the tensor is laid out in
    row-major order whatever it says (tapegrad's tensors of their own are row-major).

    Example:
        >>> tg.empty_strided((2, 3), (1, 2)).shape
        tapegrad.Size([2, 3])
    """
    size = _int_list("empty_strided", "size", 1, size)
    stride = _int_list("empty_strided", "stride", 2, stride)
    if len(size) != len(stride):
        raise RuntimeError(f"dimensionality of sizes ({len(size)}) must match dimensionality "
                           f"of strides ({len(stride)})")
    for n in size:
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {size}")
    return _creation.empty(*size, dtype=dtype, device=device, requires_grad=requires_grad)


# --- the *_copy functions: a view op's elements as a new tensor -----------------------------
def _copied(view, node, input):  # noqa: A002
    """The clone of ``view`` (a view of ``input``), shown as PyTorch's node ``node``."""
    return F.named_node(F.clone(view), node, input)


def _copies(views, node, input):  # noqa: A002
    """The clones of ``views`` (views of ``input`` made by one op), the outputs of one node."""
    return F.named_outputs(tuple(F.clone(v) for v in views), node, input)


def _tensor_input(name, input):  # noqa: A002
    if not isinstance(input, Tensor):
        raise _not_tensor(name, "input", 1, input)


def view_copy(input, *size_or_dtype):  # noqa: A002
    """``input.view(size)`` as a new tensor (``ViewBackward0_copy``); given a dtype, input's
    bytes read as that dtype, a new tensor without history, as PyTorch's.

    Example:
        >>> tg.view_copy(tg.arange(4.0), [2, 2])
        tensor([[0., 1.],
                [2., 3.]])
    """
    _tensor_input("view_copy", input)
    arg = size_or_dtype[0] if len(size_or_dtype) == 1 else None
    if isinstance(arg, _dtype_class):
        return Tensor._make(np.ascontiguousarray(input._value).view(arg.np).copy())
    if not isinstance(arg, (tuple, list)) or not all(
            hasattr(n, "__index__") and not isinstance(n, bool) for n in arg):
        got = ", ".join(_type_name(a) for a in (input, *size_or_dtype))
        raise TypeError(f"view_copy() received an invalid combination of arguments - got "
                        f"({got}), but expected one of:\n"
                        " * (Tensor input, tapegrad.dtype dtype, *, Tensor out = None)\n"
                        " * (Tensor input, tuple of ints size, *, Tensor out = None)\n")
    return _copied(input.view(arg), "ViewBackward0_copy", input)


def transpose_copy(input, dim0, dim1):  # noqa: A002
    """``input.transpose(dim0, dim1)`` as a new tensor (``TransposeBackward0_copy``).

    Example:
        >>> tg.transpose_copy(tg.arange(4.0).reshape(2, 2), 0, 1)
        tensor([[0., 2.],
                [1., 3.]])
    """
    _tensor_input("transpose_copy", input)
    return _copied(input.transpose(dim0, dim1), "TransposeBackward0_copy", input)


def permute_copy(input, dims):  # noqa: A002
    """``input.permute(dims)`` as a new tensor (``PermuteBackward0_copy``).

    Example:
        >>> tg.permute_copy(tg.arange(4.0).reshape(2, 2), [1, 0])
        tensor([[0., 2.],
                [1., 3.]])
    """
    _tensor_input("permute_copy", input)
    return _copied(input.permute(dims), "PermuteBackward0_copy", input)


def expand_copy(input, size, *, implicit=False):  # noqa: A002
    """``input.expand(size)`` as a new tensor (``ExpandBackward0_copy``); its elements are
    its own, so an in-place op on it is allowed.

    Example:
        >>> tg.expand_copy(tg.tensor([1.0, 2.0]), [2, 2])
        tensor([[1., 2.],
                [1., 2.]])
    """
    _tensor_input("expand_copy", input)
    return _copied(input.expand(size), "ExpandBackward0_copy", input)


def squeeze_copy(input, dim=None):  # noqa: A002
    """``input.squeeze(dim)`` as a new tensor (``SqueezeBackward0_copy``, ``1`` for one dim,
    ``2`` for several, as squeeze's nodes are numbered).

    Example:
        >>> tg.squeeze_copy(tg.zeros(1, 2, 1)).shape
        tapegrad.Size([2])
    """
    _tensor_input("squeeze_copy", input)
    if dim is None:
        return _copied(input.squeeze(), "SqueezeBackward0_copy", input)
    several = isinstance(dim, (tuple, list))
    node = "SqueezeBackward2_copy" if several else "SqueezeBackward1_copy"
    return _copied(input.squeeze(dim), node, input)


def unsqueeze_copy(input, dim):  # noqa: A002
    """``input.unsqueeze(dim)`` as a new tensor (``UnsqueezeBackward0_copy``).

    Example:
        >>> tg.unsqueeze_copy(tg.zeros(2), 0).shape
        tapegrad.Size([1, 2])
    """
    _tensor_input("unsqueeze_copy", input)
    return _copied(input.unsqueeze(dim), "UnsqueezeBackward0_copy", input)


def diagonal_copy(input, offset=0, dim1=0, dim2=1):  # noqa: A002
    """``input.diagonal(offset, dim1, dim2)`` as a new tensor (``DiagonalBackward0_copy``).

    Example:
        >>> tg.diagonal_copy(tg.arange(4.0).reshape(2, 2))
        tensor([0., 3.])
    """
    _tensor_input("diagonal_copy", input)
    return _copied(input.diagonal(offset, dim1, dim2), "DiagonalBackward0_copy", input)


def select_copy(input, dim, index):  # noqa: A002
    """``input.select(dim, index)`` as a new tensor (``SelectBackward0_copy``).

    Example:
        >>> tg.select_copy(tg.arange(4.0).reshape(2, 2), 1, 0)
        tensor([0., 2.])
    """
    _tensor_input("select_copy", input)
    return _copied(input.select(dim, index), "SelectBackward0_copy", input)


def slice_copy(input, dim=0, start=None, end=None, step=1):  # noqa: A002
    """``input[start:end:step]`` along ``dim`` as a new tensor (``SliceBackward0_copy``);
    ``start`` and ``end`` are clamped to the dimension as slicing clamps them.

    Example:
        >>> tg.slice_copy(tg.arange(5.0), 0, 1, 4, 2)
        tensor([1., 3.])
    """
    _tensor_input("slice_copy", input)
    step = F._int_arg(step)
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    d = F._wrap_dim(dim, max(input.ndim, 1))
    part = (slice(None),) * d + (slice(start, end, step),)
    return _copied(input[part], "SliceBackward0_copy", input)


def t_copy(input):  # noqa: A002
    """``input.t()`` as a new tensor (``TBackward0_copy``).

    Example:
        >>> tg.t_copy(tg.arange(4.0).reshape(2, 2))
        tensor([[0., 2.],
                [1., 3.]])
    """
    _tensor_input("t_copy", input)
    return _copied(input.t(), "TBackward0_copy", input)


def alias_copy(input):  # noqa: A002
    """A copy of ``input`` named as PyTorch's ``alias`` copy (``AliasBackward0_copy``).

    Example:
        >>> tg.alias_copy(tg.tensor([1.0, 2.0]))
        tensor([1., 2.])
    """
    _tensor_input("alias_copy", input)
    return _copied(input.view(input.shape), "AliasBackward0_copy", input)


def as_strided_copy(input, size, stride, storage_offset=None):  # noqa: A002
    """``as_strided(input, size, stride, storage_offset)`` as a new tensor
    (``AsStridedBackward0_copy``).

    Example:
        >>> tg.as_strided_copy(tg.arange(4.0), (2,), (2,))
        tensor([0., 2.])
    """
    _tensor_input("as_strided_copy", input)
    return _copied(as_strided(input, size, stride, storage_offset), "AsStridedBackward0_copy",
                   input)


def unfold_copy(input, dimension, size, step):  # noqa: A002
    """``input.unfold(dimension, size, step)`` as a new tensor (``UnfoldBackward0_copy``).

    Example:
        >>> tg.unfold_copy(tg.arange(4.0), 0, 2, 2)
        tensor([[0., 1.],
                [2., 3.]])
    """
    _tensor_input("unfold_copy", input)
    return _copied(input.unfold(dimension, size, step), "UnfoldBackward0_copy", input)


def unbind_copy(input, dim=0):  # noqa: A002
    """``input.unbind(dim)`` as new tensors, the outputs of one ``UnbindBackward0_copy``.

    Example:
        >>> tg.unbind_copy(tg.arange(4.0).reshape(2, 2), 1)
        (tensor([0., 2.]), tensor([1., 3.]))
    """
    _tensor_input("unbind_copy", input)
    return _copies(input.unbind(dim), "UnbindBackward0_copy", input)


def split_copy(input, split_size, dim=0):  # noqa: A002
    """``input.split(split_size, dim)`` (an int size) as new tensors, the outputs of one
    ``SplitBackward0_copy``.

    Example:
        >>> tg.split_copy(tg.arange(3.0), 2)
        (tensor([0., 1.]), tensor([2.]))
    """
    _tensor_input("split_copy", input)
    _int("split_copy", "split_size", 2, split_size)
    return _copies(input.split(split_size, dim), "SplitBackward0_copy", input)


def split_with_sizes_copy(input, split_sizes, dim=0):  # noqa: A002
    """``input.split(split_sizes, dim)`` (a list of sizes) as new tensors, the outputs of one
    ``SplitWithSizesBackward0_copy``.

    Example:
        >>> tg.split_with_sizes_copy(tg.arange(3.0), [1, 2])
        (tensor([0.]), tensor([1., 2.]))
    """
    _tensor_input("split_with_sizes_copy", input)
    return _copies(input.split(list(split_sizes), dim), "SplitWithSizesBackward0_copy", input)


def detach_copy(input):  # noqa: A002
    """``input``'s values as a new tensor.  As in PyTorch, where the op has no derivative,
    the result of a tensor that requires grad requires grad too, under a node named
    ``torch::autograd::NotImplemented`` whose backward raises.

    Example:
        >>> tg.detach_copy(tg.tensor([1.0, 2.0]))
        tensor([1., 2.])
    """
    _tensor_input("detach_copy", input)
    copy, = _function._without_derivative("detach_copy",
                                          lambda: (F.clone(input.detach()),), input)
    return copy

