"""PyTorch functions that tapegrad builds from its recorded ops rather than declaring ops of
their own: masks and triangles, scatters, einsum, products with a scaled sum, distances,
stacking helpers, and the small tools around them (``finfo``, ``inference_mode``, ...).

Everything here that takes a gradient records only ops of the table, so backward, compile,
vmap, jvp and hessian work through it unchanged.  The price is the ``grad_fn`` name: the
result's node is the last op of the composition (``WhereBackward0`` for ``tril``, not
PyTorch's ``TrilBackward0``); README "what differs" says so.  Anything computed from values
on the side (an index set, a count) is read through ``read_value``, so a compiled call guards
it instead of keeping it as a constant.
"""
import builtins
import operator
import math

import numpy as np

from . import _dtype, _frames
from . import _factory_args
from . import functional as F
from .autograd import set_grad_enabled
from .creation import stream_for
from .return_types import return_type
from . import ops as K
from .ops.activation import SINC
from .ops.elementwise import LOGIT, logit_array
from .tape import state
from .tensor import Tensor, read_value

__all__ = [
    "tril", "triu", "diag", "diag_embed", "diagflat", "masked_fill", "masked_select",
    "index_fill", "index_add", "index_copy", "scatter", "scatter_add", "einsum", "kron",
    "addmm", "addmv", "addr", "baddbmm", "addbmm", "addcmul", "addcdiv", "lerp", "cdist",
    "dist", "meshgrid", "broadcast_tensors", "atleast_1d", "atleast_2d", "atleast_3d",
    "hstack", "vstack", "dstack", "column_stack", "row_stack", "cartesian_product",
    "block_diag", "tril_indices", "triu_indices", "vander", "any", "all",
    "nonzero", "argwhere", "count_nonzero", "sgn", "deg2rad", "rad2deg", "sinc",
    "nan_to_num", "std_mean", "var_mean", "trapezoid", "trapz", "unflatten", "finfo",
    "iinfo", "inference_mode", "is_inference_mode_enabled", "normal", "bernoulli",
    "multinomial", "bincount", "searchsorted", "bucketize", "unique", "histc",
    "tensordot", "take_along_dim", "rot90", "logit", "xlog1py", "float_power", "fmax",
    "fmin", "nansum", "nanmean", "cov", "corrcoef", "isin", "isreal", "heaviside", "frexp",
    "ldexp", "result_type", "promote_types", "can_cast", "set_num_threads",
    "get_num_threads", "use_deterministic_algorithms",
    "are_deterministic_algorithms_enabled", "seed", "initial_seed", "get_rng_state",
    "set_rng_state", "is_nonzero", "chain_matmul", "pdist", "repeat_interleave",
    "cosine_similarity", "cumulative_trapezoid",
    "eq", "ne", "gt", "ge", "lt", "le", "greater", "greater_equal", "less", "less_equal",
    "not_equal", "ravel", "inner", "vdot", "cartesian_prod", "broadcast_shapes", "aminmax",
    "signbit", "tensor_split", "mm", "bmm", "mv", "dot", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift", "logaddexp2",
    "unique_consecutive",
    "masked_scatter", "put", "index_put",
    "index_put_", "poisson",
    "hsplit", "vsplit", "dsplit", "absolute", "negative", "positive", "conj", "resolve_conj",
    "resolve_neg", "real", "imag", "quantile", "nanquantile",
    "slice_scatter", "select_scatter", "diagonal_scatter", "scatter_reduce", "index_reduce",
]


_tensor = F.as_tensor_arg     # a tensor as it is, anything else made one


def _const_mask(mask):
    """A bool mask that depends only on shapes: a plain tensor (shapes are guarded)."""
    return Tensor._make(np.asarray(mask, order="C"))   # (0-d stays 0-d)


# ---------------------------------------------------------------------------------------------
# Triangles and diagonals
# ---------------------------------------------------------------------------------------------
def _triangle(x, diagonal, lower, name):
    x = _tensor(x)
    if x._value.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    rows, cols = x._value.shape[-2:]
    keep = (np.tril if lower else np.triu)(np.ones((rows, cols), dtype=bool), diagonal)
    # where, not a product with the mask: an inf outside the triangle gives 0, not nan
    return F.where(_const_mask(keep), x, x._value.dtype.type(0))


def tril(input, diagonal=0):  # noqa: A002 - PyTorch's argument names
    """The lower triangle of the last two dimensions (elements with ``col - row <=
    diagonal``), the rest 0.

    Example:
        >>> tg.tril(tg.ones(3, 3))
        tensor([[1., 0., 0.],
                [1., 1., 0.],
                [1., 1., 1.]])
    """
    return F.named_node(_triangle(input, diagonal, True, "tril"), "TrilBackward0", input)


def triu(input, diagonal=0):  # noqa: A002
    """The upper triangle of the last two dimensions (elements with ``col - row >=
    diagonal``), the rest 0.

    Example:
        >>> tg.triu(tg.ones(2, 3), 1)
        tensor([[0., 1., 1.],
                [0., 0., 1.]])
    """
    return F.named_node(_triangle(input, diagonal, False, "triu"), "TriuBackward0", input)


def _embedded(x, n, positions, shape):
    """A tensor of ``shape``, 0 except x's flat elements at ``positions``."""
    total = int(np.prod(shape, dtype=np.int64))
    if x._value.dtype.kind != "f":
        out = np.zeros(total, x._value.dtype)
        out[positions.reshape(-1)] = x._value.reshape(-1)
        return Tensor._make(out.reshape(shape))
    return F.reshape(F.scatter_add_flat(F.reshape(x, -1), positions, total), *shape)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002
    """Matrices (in dims ``dim1``, ``dim2`` of the result) whose ``offset`` diagonal holds
    the last dimension of ``input``; the rest 0.

    Example:
        >>> tg.diag_embed(tg.tensor([[1.0, 2.0]]))
        tensor([[[1., 0.],
                 [0., 2.]]])
    """
    x = _tensor(input)
    lead = x._value.shape[:-1] if x._value.ndim else ()
    n = x._value.shape[-1] if x._value.ndim else 1
    m = n + builtins.abs(offset)
    nd = len(lead) + 2
    d1, d2 = F._wrap_dim(dim1, nd), F._wrap_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    rest = [d for d in range(nd) if d not in (d1, d2)]
    shape = [0] * nd
    for d, size in zip(rest, lead):
        shape[d] = size
    shape[d1] = shape[d2] = m
    k = np.arange(n)
    row, col = (k, k + offset) if offset >= 0 else (k - offset, k)
    coords = [None] * nd
    grids = np.indices(lead + (n,), dtype=np.int64) if lead else [k]
    for d, g in zip(rest, list(grids)[:-1]):
        coords[d] = g
    coords[d1] = np.broadcast_to(row, lead + (n,))
    coords[d2] = np.broadcast_to(col, lead + (n,))
    positions = np.ravel_multi_index(tuple(coords), tuple(shape)) if x._value.size else \
        np.zeros(0, np.int64)
    return F.named_node(_embedded(x, n, np.asarray(positions, np.int64), tuple(shape)),
                        "DiagEmbedBackward0", x)


def diag(input, diagonal=0):  # noqa: A002
    """For a vector, the square matrix with it on diagonal ``diagonal``; for a matrix, its
    ``diagonal`` as a vector (a copy).

    Example:
        >>> tg.diag(tg.tensor([1.0, 2.0]))
        tensor([[1., 0.],
                [0., 2.]])
        >>> tg.diag(tg.tensor([[1.0, 2.0], [3.0, 4.0]]), 1)
        tensor([2.])
    """
    x = _tensor(input)
    if x._value.ndim == 1:
        return diag_embed(x, diagonal)
    if x._value.ndim == 2:
        # (PyTorch's diag of a matrix copies its diagonal view: a node of its own name)
        return F.named_node(F.clone(F.diagonal(x, diagonal)), "DiagonalBackward0_copy", x)
    raise RuntimeError("diag(): Supports 1D or 2D tensors. Got "
                       f"{x._value.ndim}D")


def diagflat(input, offset=0):  # noqa: A002
    """The flattened ``input`` on diagonal ``offset`` of a square matrix.

    Example:
        >>> tg.diagflat(tg.tensor([[1.0], [2.0]]))
        tensor([[1., 0.],
                [0., 2.]])
    """
    return diag_embed(F.reshape(_tensor(input), -1), offset)


# ---------------------------------------------------------------------------------------------
# Masks, fills and scatters
# ---------------------------------------------------------------------------------------------


def _bool_mask(mask, name):
    mask = _tensor(mask)
    if mask._value.dtype.kind != "b":
        raise RuntimeError(f"{name} only supports boolean masks, but got mask with dtype "
                           f"{_dtype.C_TYPE_NAMES[mask.dtype.name]}")
    return mask


def masked_fill(input, mask, value):  # noqa: A002
    """``input`` with ``value`` (a number or a 0-d tensor) where the bool ``mask``
    (broadcast to input's shape) holds.

    Example:
        >>> x = tg.tensor([1.0, -2.0, 3.0])
        >>> tg.masked_fill(x, x < 0, 0.0)
        tensor([1., 0., 3.])
    """
    x = _tensor(input)
    mask = _tensor(mask)
    shape = x._value.shape
    # PyTorch broadcasts the mask against the input (tensor a is the mask), then checks its
    # dtype
    broadcast = F.broadcast_shape(mask._value.shape, shape)
    mask = _bool_mask(mask, "masked_fill_")
    if broadcast != shape:
        raise RuntimeError(f"The size of tensor a ({shape[-1] if shape else 1}) must match the "
                           f"size of tensor b ({mask._value.shape[-1]}) at non-singleton "
                           "dimension 0")
    if isinstance(value, Tensor):
        if value._value.ndim:
            raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value._value.ndim} dimension(s).")
    elif x._value.dtype.kind != "f":
        value = x._value.dtype.type(value)
    out = F.where(mask, value, x)
    if out._value.dtype != x._value.dtype:
        out = out.to(x.dtype)
    if isinstance(value, Tensor):
        return F.named_node(out, "MaskedFillBackward1", x, value)
    return F.named_node(out, "MaskedFillBackward0", x)


def masked_select(input, mask):  # noqa: A002
    """The elements of ``input`` where the bool ``mask`` holds (both broadcast), as a
    1-D tensor.

    Example:
        >>> x = tg.tensor([[1.0, -2.0], [-3.0, 4.0]])
        >>> tg.masked_select(x, x > 0)
        tensor([1., 4.])
    """
    x = _tensor(input)
    mask = _bool_mask(mask, "masked_select:")
    shape = F.broadcast_shape(x._value.shape, mask._value.shape)
    read_value(mask, "masked_select()")
    given = x
    if x._value.shape != shape:
        x = F.expand(x, *shape)
    return F.named_node(F.getitem(x, np.broadcast_to(mask._value, shape).copy()),
                        "MaskedSelectBackward0", given)


def _index_positions(x, dim, index, name):
    """For an index along ``dim`` (1-D): x's flat positions, shaped like x with ``len(index)``
    at dim."""
    idx = F._index_values(index, f"{name}(): Expected dtype int64 for index")
    if idx.ndim > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector")
    idx = idx.reshape(-1)
    nd = x._value.ndim
    d = F._wrap_dim(dim, builtins.max(nd, 1))
    size = x._value.shape[d] if nd else 1
    bad = idx[(idx < -size) | (idx >= size)]
    if bad.size:
        raise IndexError("index out of range in self")
    idx = np.where(idx < 0, idx + size, idx)
    flat = F._flat_index(x)
    return (np.take(flat, idx, axis=d) if nd else flat.reshape(-1)[idx]), d


def index_fill(input, dim, index, value):  # noqa: A002
    """``input`` with the slices at ``index`` along ``dim`` set to ``value``.

    Example:
        >>> tg.index_fill(tg.zeros(2, 3), 1, tg.tensor([0, 2]), 1.0)
        tensor([[1., 0., 1.],
                [1., 0., 1.]])
    """
    x = _tensor(input)
    positions, _ = _index_positions(x, dim, index, "index_fill")
    hit = np.zeros(x._value.size, bool)
    hit[positions.reshape(-1)] = True
    out = F.where(_const_mask(hit.reshape(x._value.shape)), value, x)
    if isinstance(value, Tensor):
        return F.named_node(out, "IndexFillBackward1", x, value)
    return F.named_node(out, "IndexFillBackward0", x)


def _scattered(x, positions, src):
    """x with src's elements written at flat ``positions`` (the last write wins; every
    source element gets the gradient at its target, as in PyTorch)."""
    src = _tensor(src)
    if src._value.dtype != x._value.dtype and x._value.dtype.kind == "f":
        src = src.to(x.dtype)
    return F.replaced(x, src, positions, V_INDEX_PUT)


def index_copy(input, dim, index, source):  # noqa: A002
    """``input`` with its slices at ``index`` along ``dim`` replaced by ``source``'s (of a
    repeated index the last slice wins; every slice of ``source`` gets the gradient at its
    target, as in PyTorch).  ``grad_fn``: ``<IndexCopyBackward0>``.

    Example:
        >>> tg.index_copy(tg.zeros(3), 0, tg.tensor([2, 0]), tg.tensor([5.0, 6.0]))
        tensor([6., 0., 5.])
    """
    x = _tensor(input)
    positions, _ = _index_positions(x, dim, index, "index_copy")
    return F.named_node(_scattered(x, positions, source), "IndexCopyBackward0", x, source)


def index_add(input, dim, index, source, *, alpha=1):  # noqa: A002
    """``input`` plus ``alpha * source`` added into the slices at ``index`` along ``dim``
    (repeated indices add up).

    Example:
        >>> tg.index_add(tg.zeros(3), 0, tg.tensor([0, 0, 2]), tg.tensor([1.0, 2.0, 3.0]))
        tensor([3., 0., 3.])
    """
    x = _tensor(input)
    src = _tensor(source)
    positions, _ = _index_positions(x, dim, index, "index_add")
    if positions.shape != src._value.shape and positions.size != src._value.size:
        raise RuntimeError(f"index_add_(): Source/destination tensor must have same slice "
                           f"shapes. Destination slice shape: {list(positions.shape)} at "
                           f"dimension {dim} and source slice shape: {list(src._value.shape)}")
    if alpha != 1:
        src = F.mul(src, alpha)
    added = F.reshape(F.scatter_add_flat(F.reshape(src, -1), positions, x._value.size),
                      *x._value.shape)
    return F.named_node(F.add(x, added), "IndexAddBackward0", x, source)


def _scatter_positions(x, dim, index, src_shape, name):
    # (PyTorch's message names scatter() for each of the family)
    idx = F._index_values(index, "scatter(): Expected dtype int32/int64 for index")
    nd = x._value.ndim
    d = F._wrap_dim(dim, builtins.max(nd, 1))
    shape = x._value.shape if nd else (1,)
    idx = idx.reshape(idx.shape if idx.ndim else (1,))
    if idx.ndim != len(shape):
        raise RuntimeError("Index tensor must have the same number of dimensions as self "
                           "tensor")
    for k in range(len(shape)):
        if (k != d and idx.shape[k] > shape[k]) or (
                src_shape is not None and idx.shape[k] > src_shape[k]):
            raise RuntimeError(f"Expected index {list(idx.shape)} to be no larger than self "
                               f"{list(shape)} apart from dimension {d} and to be no larger "
                               f"size than src {list(src_shape or shape)}")
    bad = idx[(idx < 0) | (idx >= shape[d])]
    if bad.size:
        raise RuntimeError(f"index {bad[0]} is out of bounds for dimension {d} with size "
                           f"{shape[d]}")
    coords = list(np.indices(idx.shape, dtype=np.int64))
    src_coords = tuple(coords)
    coords[d] = idx
    targets = np.ravel_multi_index(tuple(coords), shape) if idx.size else np.zeros(0, np.int64)
    sources = np.ravel_multi_index(src_coords, src_shape) if (
        idx.size and src_shape is not None) else np.zeros(0, np.int64)
    return np.asarray(targets, np.int64), np.asarray(sources, np.int64)


def scatter(input, dim, index, src=None, value=None, *, reduce=None):  # noqa: A002
    """``input`` with ``src[i][j]`` written to ``out[i][index[i][j]]`` (``dim=1``; and so on
    for other dims), or the number ``value`` written there.  Of repeated targets, the last
    write wins; every element of ``src`` gets the gradient at its target, as in PyTorch
    (``grad.gather(dim, index)``), overwritten or not.

    Example:
        >>> tg.scatter(tg.zeros(2, 3), 1, tg.tensor([[2], [0]]), tg.tensor([[1.0], [2.0]]))
        tensor([[0., 0., 1.],
                [2., 0., 0.]])
    """
    if reduce is not None:
        raise NotImplementedError("scatter(reduce=...) is not supported by tapegrad; use "
                                  "scatter_add")
    x = _tensor(input)
    if src is None and value is None:
        raise TypeError("scatter() missing 1 required positional argument: 'src' or 'value'")
    if src is not None and not isinstance(src, Tensor):
        value, src = src, None
    if src is None:
        targets, _ = _scatter_positions(x, dim, index, None, "scatter")
        hit = np.zeros(x._value.size, bool)
        hit[targets.reshape(-1)] = True
        return F.named_node(F.where(_const_mask(hit.reshape(x._value.shape)), value, x),
                            "ScatterBackward1", x)
    s_shape = src._value.shape if src._value.ndim else (1,)
    targets, sources = _scatter_positions(x, dim, index, s_shape, "scatter")
    picked = F.take(F.reshape(src, -1), Tensor._make(sources.reshape(-1)))
    return F.named_node(_scattered(x, targets, picked), "ScatterBackward0", x, src)


def scatter_add(input, dim, index, src):  # noqa: A002
    """``input`` with ``src[i][j]`` added to ``out[i][index[i][j]]`` (``dim=1``; and so on
    for other dims); repeated targets add up.

    Example:
        >>> tg.scatter_add(tg.zeros(3), 0, tg.tensor([0, 0, 2]), tg.tensor([1.0, 2.0, 3.0]))
        tensor([3., 0., 3.])
    """
    x = _tensor(input)
    src = _tensor(src)
    s_shape = src._value.shape if src._value.ndim else (1,)
    targets, sources = _scatter_positions(x, dim, index, s_shape, "scatter_add")
    picked = F.take(F.reshape(src, -1), Tensor._make(sources.reshape(-1)))
    if x._value.dtype.kind != "f":
        out = x._value.copy().reshape(-1)
        np.add.at(out, targets.reshape(-1), picked._value.reshape(-1).astype(out.dtype))
        return Tensor._make(out.reshape(x._value.shape))
    added = F.scatter_add_flat(picked, targets, x._value.size)
    return F.named_node(F.add(x, F.reshape(added, *x._value.shape)), "ScatterAddBackward0",
                        x, src)


# ---------------------------------------------------------------------------------------------
# einsum and products
# ---------------------------------------------------------------------------------------------
def _einsum_parse(equation, operands):
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise RuntimeError(f"einsum(): more operands were provided than specified in the "
                           f"equation" if len(operands) > len(terms) else
                           "einsum(): fewer operands were provided than specified in the "
                           "equation")
    letters = set(c for c in lhs if c.isalpha())
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
            if c not in letters and c not in rhs]
    # an ellipsis stands for the same new letters in every term, right-aligned
    ell = builtins.max([x._value.ndim - len(t.replace("...", "")) for t, x in
                        zip(terms, operands) if "..." in t], default=0)
    ell_letters = "".join(free[:ell])
    expanded = []
    for t, x in zip(terms, operands):
        if "..." in t:
            k = x._value.ndim - len(t.replace("...", ""))
            t = t.replace("...", ell_letters[ell - k:])
        if len(t) != x._value.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                               f"({len(t)}) does not match the number of dimensions "
                               f"({x._value.ndim}) for operand {len(expanded)}"
                               + ("" if "..." in lhs else " and no ellipsis was given"))
        expanded.append(t)
    if arrow:
        out = rhs.replace("...", ell_letters)
    else:
        counts = {}
        for t in expanded:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell_letters + "".join(sorted(c for c in counts if counts[c] == 1
                                           and c not in ell_letters))
    return expanded, out


def _check_einsum_sizes(operands, terms):
    """PyTorch's checks of the subscripts' sizes, operand by operand, with its messages."""
    seen = {}
    for k, (x, t) in enumerate(zip(operands, terms)):
        here = {}
        for c, n in zip(t, x._value.shape):
            if c in here and here[c] != n:
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {k} but "
                                   f"the sizes don't match, {n} != {here[c]}")
            here[c] = n
        for c, n in here.items():
            if c in seen and n != seen[c] and n != 1 and seen[c] != 1:
                raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {k} "
                                   f"which does not broadcast with previously seen size "
                                   f"{seen[c]}")
            if seen.get(c, 1) == 1:
                seen[c] = n


def _take_diagonals(x, term):
    """x with repeated letters of ``term`` reduced to their diagonal (one letter each)."""
    while True:
        seen = {}
        for i, c in enumerate(term):
            if c in seen:
                j = seen[c]
                x = F.diagonal(x, 0, j, i)      # the diagonal goes last
                term = term[:j] + term[j + 1:i] + term[i + 1:] + c
                break
            seen[c] = i
        else:
            return x, term


def _sum_letters(x, term, letters):
    dims = [i for i, c in enumerate(term) if c in letters]
    if dims:
        x = F.sum(x, dims)
        term = "".join(c for c in term if c not in letters)
    return x, term


def _contract(a, ta, b, tb, keep):
    """a and b contracted over the letters they share that ``keep`` does not need; the
    result's letters: batch (shared, kept), a's own, b's own."""
    shared = [c for c in ta if c in tb]
    batch = [c for c in shared if c in keep]
    summed = [c for c in shared if c not in keep]
    a_own = [c for c in ta if c not in tb]
    b_own = [c for c in tb if c not in ta]
    size = {c: a._value.shape[i] for i, c in enumerate(ta)}
    size.update({c: b._value.shape[i] for i, c in enumerate(tb)})
    for c in shared:
        sa, sb = a._value.shape[ta.index(c)], b._value.shape[tb.index(c)]
        if sa != sb and sa != 1 and sb != 1:
            raise RuntimeError(f"einsum(): operands do not broadcast with remapped shapes "
                               f"(original->remapped): {list(a._value.shape)} and "
                               f"{list(b._value.shape)}")
        size[c] = builtins.max(sa, sb)
    order_a = batch + a_own + summed
    order_b = batch + summed + b_own
    a = F.permute(a, *[ta.index(c) for c in order_a]) if order_a else a
    b = F.permute(b, *[tb.index(c) for c in order_b]) if order_b else b
    shape_a = [size[c] for c in order_a]
    shape_b = [size[c] for c in order_b]
    if list(a._value.shape) != shape_a:
        a = F.expand(a, *shape_a)
    if list(b._value.shape) != shape_b:
        b = F.expand(b, *shape_b)
    nb = math.prod(size[c] for c in batch)
    m = math.prod(size[c] for c in a_own)
    k = math.prod(size[c] for c in summed)
    n = math.prod(size[c] for c in b_own)
    prod = F.matmul(F.reshape(a, nb, m, k), F.reshape(b, nb, k, n))
    letters = batch + a_own + b_own
    return F.reshape(prod, *[size[c] for c in letters]), "".join(letters)


def _path_finding_error(equation, operands):
    """Raise what opt_einsum's contraction-path search raises for these operands, where
    PyTorch would have asked it (three or more operands, the package installed and enabled):
    its ValueError comes before PyTorch's own checks."""
    from .backends import opt_einsum
    package = opt_einsum.get_opt_einsum()
    if len(operands) <= 2 or not opt_einsum.enabled or package is None:
        return
    package.contract_path(equation, *[x._value.shape for x in operands], shapes=True,
                          optimize=opt_einsum.strategy)


def einsum(equation, *operands):
    """Sums of products of the operands' elements, as named by ``equation`` in Einstein's
    notation (``"ij,jk->ik"``; ``...`` for leading dims; without ``->`` the output has the
    letters that appear once, in alphabetical order).  Operands are contracted left to right
    by matrix products.

    Example:
        >>> a = tg.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> tg.einsum("ij,jk->ik", a, a)
        tensor([[ 7., 10.],
                [15., 22.]])
        >>> tg.einsum("ii", a)
        tensor(5.)
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    operands = [_tensor(x) for x in operands]
    try:
        terms, out = _einsum_parse(equation, operands)
        for c in out:
            if out.count(c) > 1:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once "
                                   "in the output")
            if not builtins.any(c in t for t in terms):
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the "
                                   "equation for any input operand")
        _check_einsum_sizes(operands, terms)
    except RuntimeError:
        _path_finding_error(equation, operands)
        raise
    xs = []
    for x, t in zip(operands, terms):
        x, t = _take_diagonals(x, t)
        xs.append((x, t))

    def needed_later(i):
        later = set(out)
        for _, t in xs[i + 1:]:
            later |= set(t)
        return later

    x, t = xs[0]
    x, t = _sum_letters(x, t, set(t) - needed_later(0))
    for i in range(1, len(xs)):
        y, u = xs[i]
        keep = needed_later(i)
        y, u = _sum_letters(y, u, set(u) - keep - set(t))
        x, t = _sum_letters(x, t, set(t) - keep - set(u))
        x, t = _contract(x, t, y, u, keep)
    x, t = _sum_letters(x, t, set(t) - set(out))
    if t != out:
        x = F.permute(x, *[t.index(c) for c in out])
    return x


def kron(input, other):  # noqa: A002
    """The Kronecker product: blocks ``input[i, j] * other``, for any number of dims.

    Example:
        >>> tg.kron(tg.eye(2), tg.tensor([[1.0, 2.0]]))
        tensor([[1., 2., 0., 0.],
                [0., 0., 1., 2.]])
    """
    a, b = _tensor(input), _tensor(other)
    nd = builtins.max(a._value.ndim, b._value.ndim)
    sa = (1,) * (nd - a._value.ndim) + a._value.shape
    sb = (1,) * (nd - b._value.ndim) + b._value.shape
    ai = F.reshape(a, *[v for s in sa for v in (s, 1)])
    bi = F.reshape(b, *[v for s in sb for v in (1, s)])
    # PyTorch's last node is an _unsafe_view of the product
    return F._reshaped(F.mul(ai, bi), tuple([p * q for p, q in zip(sa, sb)]), F.V_UNSAFE_VIEW)


def _scaled_sum(input, product, beta, alpha):
    """``beta * input + alpha * product`` (input broadcast); with beta 0, input's values are
    ignored (its nan too), as in PyTorch."""
    x = _tensor(input)
    if F.broadcast_shape(x._value.shape, product._value.shape) != product._value.shape:
        raise RuntimeError(f"The expanded size of the tensor ({product._value.shape[-1]}) "
                           f"must match the existing size ({x._value.shape[-1]}) at "
                           "non-singleton dimension 1.")
    if alpha != 1:
        product = F.mul(product, alpha)
    if beta == 0:
        if x._rg:
            # input's gradient is 0 (as PyTorch's beta * grad), its values never read: a
            # where, not a product with 0, so that a nan in input stays out
            ignored = F.where(_const_mask(np.ones(x._value.shape, bool)), 0.0, x)
            return F.add(product, ignored)
        return product
    return F.add(F.mul(x, beta) if beta != 1 else x, product)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * (mat1 @ mat2)`` for matrices (input broadcast).

    Example:
        >>> tg.addmm(tg.ones(2, 2), tg.eye(2), tg.eye(2))
        tensor([[2., 1.],
                [1., 2.]])
    """
    m1, m2 = _tensor(mat1), _tensor(mat2)
    if m1._value.ndim != 2:
        raise RuntimeError(f"mat1 must be a matrix, got {m1._value.ndim}-D tensor")
    if m2._value.ndim != 2:
        raise RuntimeError(f"mat2 must be a matrix, got {m2._value.ndim}-D tensor")
    F.check_addmm_dtypes(input, m1, m2)
    return F.named_node(_scaled_sum(input, F.matmul(m1, m2), beta, alpha), "AddmmBackward0",
                        input, m1, m2)


def addmv(input, mat, vec, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * (mat @ vec)``.

    Example:
        >>> tg.addmv(tg.ones(2), tg.eye(2), tg.tensor([1.0, 2.0]))
        tensor([2., 3.])
    """
    mat, vec = _tensor(mat), _tensor(vec)
    return F.named_node(_scaled_sum(input, F.matmul(mat, vec), beta, alpha), "AddmvBackward0",
                        input, mat, vec)


def addr(input, vec1, vec2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * outer(vec1, vec2)``.

    Example:
        >>> tg.addr(tg.zeros(2, 2), tg.tensor([1.0, 2.0]), tg.tensor([1.0, 1.0]))
        tensor([[1., 1.],
                [2., 2.]])
    """
    vec1, vec2 = _tensor(vec1), _tensor(vec2)
    return F.named_node(_scaled_sum(input, F.outer(vec1, vec2), beta, alpha), "AddrBackward0",
                        input, vec1, vec2)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * (batch1 @ batch2)`` for batches of matrices (3-D).

    Example:
        >>> tg.baddbmm(tg.zeros(1, 2, 2), tg.ones(1, 2, 3), tg.ones(1, 3, 2))
        tensor([[[3., 3.],
                 [3., 3.]]])
    """
    b1, b2 = _tensor(batch1), _tensor(batch2)
    if b1._value.ndim != 3 or b2._value.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if b1._value.ndim != 3 else
                           "batch2 must be a 3D tensor")
    return F.named_node(_scaled_sum(input, F.matmul(b1, b2), beta, alpha),
                        "BaddbmmBackward0", input, b1, b2)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``.

    Example:
        >>> tg.addbmm(tg.zeros(2, 2), tg.ones(3, 2, 1), tg.ones(3, 1, 2))
        tensor([[3., 3.],
                [3., 3.]])
    """
    b1, b2 = _tensor(batch1), _tensor(batch2)
    if b1._value.ndim != 3 or b2._value.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if b1._value.ndim != 3 else
                           "batch2 must be a 3D tensor")
    return F.named_node(_scaled_sum(input, F.sum(F.matmul(b1, b2), 0), beta, alpha),
                        "AddbmmBackward0", input, b1, b2)


def addcmul(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """``input + value * tensor1 * tensor2``, broadcast.

    Example:
        >>> tg.addcmul(tg.ones(2), tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0]), value=0.5)
        tensor([2.5000, 5.0000])
    """
    t1, t2 = _tensor(tensor1), _tensor(tensor2)
    prod = F.mul(t1, t2)
    x = _tensor(input)
    return F.named_node(F.add(x, F.mul(prod, value) if value != 1 else prod),
                        "AddcmulBackward0", x, t1, t2)


def addcdiv(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """``input + value * tensor1 / tensor2``, broadcast.

    Example:
        >>> tg.addcdiv(tg.ones(2), tg.tensor([1.0, 2.0]), tg.tensor([4.0, 4.0]))
        tensor([1.2500, 1.5000])
    """
    t1, t2 = _tensor(tensor1), _tensor(tensor2)
    if t1._value.dtype.kind in "iub" and t2._value.dtype.kind in "iub":
        raise RuntimeError("Integer division with addcdiv is no longer supported, and in a "
                           "future  release addcdiv will perform a true division of tensor1 "
                           "and tensor2. The historic addcdiv behavior can be implemented as "
                           "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) "
                           "for integer inputs and as (input + value * tensor1 / tensor2) for "
                           "float inputs. The future addcdiv behavior is just the latter "
                           "implementation: (input + value * tensor1 / tensor2), for all "
                           "dtypes.")
    quot = F.div(t1, t2)
    x = _tensor(input)
    return F.named_node(F.add(x, F.mul(quot, value) if value != 1 else quot),
                        "AddcdivBackward0", x, t1, t2)


def lerp(input, end, weight):  # noqa: A002
    """``input + weight * (end - input)``, computed from the nearer end as PyTorch does
    (``end - (end - input) * (1 - weight)`` where ``weight >= 0.5``).

    Example:
        >>> tg.lerp(tg.tensor([0.0, 10.0]), tg.tensor([10.0, 20.0]), 0.25)
        tensor([ 2.5000, 12.5000])
    """
    start, end = _tensor(input), _tensor(end)
    diff = F.sub(end, start)
    if not isinstance(weight, Tensor):
        w = float(weight)
        if builtins.abs(w) < 0.5:
            out = F.add(start, F.mul(diff, w))
        else:
            out = F.sub(end, F.mul(diff, 1.0 - w))
        return F.named_node(out, "LerpBackward0", start, end)
    low = F._compare(np.less, F.abs(weight), 0.5)
    out = F.where(low, F.add(start, F.mul(weight, diff)),
                  F.sub(end, F.mul(diff, F.rsub(weight, 1.0))))
    return F.named_node(out, "LerpBackward1", start, end, weight)


def dist(input, other, p=2):  # noqa: A002
    """The ``p``-norm of ``input - other`` (broadcast), 0-d.

    Example:
        >>> tg.dist(tg.tensor([0.0, 0.0]), tg.tensor([3.0, 4.0]))
        tensor(5.)
    """
    x, y = _tensor(input), _tensor(other)
    return F.named_node(F.norm(F.sub(x, y), p), "DistBackward0", x, y)


def cdist(x1, x2, p=2.0, compute_mode=None):
    """The ``p``-norm distance between each row of ``x1`` (``..., P, M``) and each row of
    ``x2`` (``..., R, M``): shape ``(..., P, R)``.

    Example:
        >>> tg.cdist(tg.tensor([[0.0, 0.0]]), tg.tensor([[3.0, 4.0], [0.0, 1.0]]))
        tensor([[5., 1.]])
    """
    a, b = _tensor(x1), _tensor(x2)
    if a._value.ndim < 2 or b._value.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: "
                           f"{a._value.ndim}D" if a._value.ndim < 2 else
                           f"cdist only supports at least 2D tensors, X2 got: "
                           f"{b._value.ndim}D")
    if a._value.shape[-1] != b._value.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{a._value.shape[-1]} X2: {b._value.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    diff = F.sub(F.unsqueeze(a, -2), F.unsqueeze(b, -3))
    out = F.norm(diff, float(p), dim=-1)
    # PyTorch computes euclidean distances between more than 25 rows through a matrix
    # product (its node is then a view); otherwise with a node of its own
    through_mm = p == 2 and (compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode in (None, "use_mm_for_euclid_dist_if_necessary")
        and (a._value.shape[-2] > 25 or b._value.shape[-2] > 25)))
    return out if through_mm else F.named_node(out, "CdistBackward0", a, b)


# ---------------------------------------------------------------------------------------------
# Shapes: grids, broadcasting and stacking
# ---------------------------------------------------------------------------------------------
def _tensors(args):
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = args[0]
    return [_tensor(x) for x in args]


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 1-D tensors: with ``indexing="ij"`` (the default, which warns
    once, as PyTorch's, when not given) the k-th result varies along dim k; ``"xy"`` swaps the
    first two dims.

    Example:
        >>> gx, gy = tg.meshgrid(tg.tensor([1, 2]), tg.tensor([3, 4, 5]), indexing="ij")
        >>> gx
        tensor([[1, 1, 1],
                [2, 2, 2]])
    """
    if indexing is None:
        # (PyTorch's default, with its warning, once per process)
        _frames.warn_program("torch.meshgrid: in an upcoming release, it will be required to "
                             "pass the indexing argument.", once="meshgrid")
        indexing = "ij"
    ts = _tensors(tensors)
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                           f"received: {indexing}")
    for t in ts:
        if t._value.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list "
                               f"but got: {t}")
    ts = [F.reshape(t, -1) for t in ts]
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = [t._value.shape[0] for t in ts]
    out = []
    for k, t in enumerate(ts):
        view = [1] * len(ts)
        view[k] = shape[k]
        out.append(F.expand(F.reshape(t, *view), *shape))
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape (views).

    Example:
        >>> a, b = tg.broadcast_tensors(tg.tensor([1.0, 2.0]), tg.tensor([[0.0], [1.0]]))
        >>> a.shape
        tapegrad.Size([2, 2])
    """
    ts = _tensors(tensors)
    shape = ()
    for t in ts:
        shape = F.broadcast_shape(shape, t._value.shape)
    return tuple(t if t._value.shape == shape else F.expand(t, *shape) for t in ts)


def _atleast(args, nd):
    ts = _tensors(args)
    out = []
    for t in ts:
        s = t._value.shape
        if len(s) < nd:
            if nd == 3 and len(s) == 2:
                s = s + (1,)
            elif nd == 3 and len(s) == 1:
                s = (1,) + s + (1,)
            else:
                s = (1,) * (nd - len(s)) + s
            t = F.reshape(t, *s)
        out.append(t)
    single = len(args) == 1 and not isinstance(args[0], (list, tuple))
    return out[0] if single else tuple(out)


def atleast_1d(*tensors):
    """Each tensor with at least 1 dimension (a 0-d one becomes shape ``(1,)``).

    Example:
        >>> tg.atleast_1d(tg.tensor(1.0))
        tensor([1.])
    """
    return _atleast(tensors, 1)


def atleast_2d(*tensors):
    """Each tensor with at least 2 dimensions (leading ones added).

    Example:
        >>> tg.atleast_2d(tg.tensor([1.0, 2.0])).shape
        tapegrad.Size([1, 2])
    """
    return _atleast(tensors, 2)


def atleast_3d(*tensors):
    """Each tensor with at least 3 dimensions (as NumPy: a vector becomes ``(1, n, 1)``).

    Example:
        >>> tg.atleast_3d(tg.tensor([1.0, 2.0])).shape
        tapegrad.Size([1, 2, 1])
    """
    return _atleast(tensors, 3)


def _as_list(tensors, nd):
    out = _atleast((list(tensors),), nd)
    return list(out)


def hstack(tensors):
    """The tensors joined along dim 1 (dim 0 for vectors).

    Example:
        >>> tg.hstack([tg.tensor([1.0]), tg.tensor([2.0, 3.0])])
        tensor([1., 2., 3.])
    """
    ts = _as_list(tensors, 1)
    return F.cat(ts, 0 if ts and ts[0]._value.ndim == 1 else 1)


def vstack(tensors):
    """The tensors (vectors as rows) joined along dim 0; also ``row_stack``.

    Example:
        >>> tg.vstack([tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0])])
        tensor([[1., 2.],
                [3., 4.]])
    """
    return F.cat(_as_list(tensors, 2), 0)


row_stack = vstack


def dstack(tensors):
    """The tensors joined along dim 2 (made at least 3-D first).

    Example:
        >>> tg.dstack([tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0])]).shape
        tapegrad.Size([1, 2, 2])
    """
    return F.cat(_as_list(tensors, 3), 2)


def column_stack(tensors):
    """Vectors as columns (and matrices as they are) joined along dim 1.

    Example:
        >>> tg.column_stack([tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0])])
        tensor([[1., 3.],
                [2., 4.]])
    """
    ts = []
    for t in _tensors((tensors,)):
        if t._value.ndim <= 1:
            t = F.reshape(t, -1, 1)
        ts.append(t)
    return F.cat(ts, 1)


def cartesian_product(*tensors):
    """All combinations of the elements of the 1-D tensors, one per row (for one tensor,
    itself).

    Example:
        >>> tg.cartesian_product(tg.tensor([1, 2]), tg.tensor([3, 4]))
        tensor([[1, 3],
                [1, 4],
                [2, 3],
                [2, 4]])
    """
    ts = _tensors(tensors)
    if len(ts) == 1:
        return ts[0]
    grids = meshgrid(*ts, indexing="ij")
    return F.stack([F.reshape(g, -1) for g in grids], 1)


def block_diag(*tensors):
    """The matrices (0-d and 1-D ones as one row) on the diagonal of a larger one, 0
    elsewhere.

    Example:
        >>> tg.block_diag(tg.tensor([[1.0]]), tg.tensor([[2.0, 3.0]]))
        tensor([[1., 0., 0.],
                [0., 2., 3.]])
    """
    ts = []
    given = _tensors(tensors)
    for t in given:
        if t._value.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {len(ts)} has {t._value.ndim} dimensions")
        ts.append(F.reshape(t, 1, -1) if t._value.ndim < 2 else t)
    if not ts:
        return Tensor._make(np.zeros((1, 0)))
    width = builtins.sum(t._value.shape[1] for t in ts)
    dt = _promote_all(ts)
    rows = []
    left = 0
    for t in ts:
        r, c = t._value.shape
        parts = []
        if left:
            parts.append(Tensor._make(np.zeros((r, left), dt)))
        parts.append(t if t._value.dtype == dt else t.to(_dtype.from_numpy_dtype(dt)))
        if width - left - c:
            parts.append(Tensor._make(np.zeros((r, width - left - c), dt)))
        rows.append(F.cat(parts, 1) if len(parts) > 1 else parts[0])
        left += c
    return F.named_node(F.cat(rows, 0), "BlockDiagBackward0", *given)


def _promote_all(ts):
    return np.result_type(*[t._value.dtype for t in ts])


def _indices_of(mask_fn, row, col, offset):
    r, c = np.nonzero(mask_fn(np.ones((row, col), dtype=bool), offset))
    return Tensor._make(np.stack([r, c]).astype(np.int64))


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (row, column) indices of the lower triangle of a ``row x col`` matrix, as a
    ``2 x N`` int64 tensor, row by row.

    Example:
        >>> tg.tril_indices(2, 2)
        tensor([[0, 1, 1],
                [0, 0, 1]])
    """
    return _indices_of(np.tril, row, col, offset)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (row, column) indices of the upper triangle of a ``row x col`` matrix, as a
    ``2 x N`` int64 tensor, row by row.

    Example:
        >>> tg.triu_indices(2, 2)
        tensor([[0, 0, 1],
                [0, 1, 1]])
    """
    return _indices_of(np.triu, row, col, offset)


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of a vector: columns ``x ** (N-1), ..., x, 1`` (the other way
    round with ``increasing``).

    Example:
        >>> tg.vander(tg.tensor([1.0, 2.0, 3.0]), 3)
        tensor([[1., 1., 1.],
                [4., 2., 1.],
                [9., 3., 1.]])
    """
    x = _tensor(x)
    if x._value.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x._value.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    cols = [F.pow(x, k) if k else F.add(F.mul(x, 0), 1) for k in range(n)]
    if not increasing:
        cols = cols[::-1]
    if not cols:
        return Tensor._make(np.zeros((x._value.shape[0], 0), x._value.dtype))
    return F.stack(cols, 1)


# ---------------------------------------------------------------------------------------------
# Reading values: counts, indices, predicates
# ---------------------------------------------------------------------------------------------
def _values(x, what):
    x = _tensor(x)
    read_value(x, what)
    return x._value


def all(input, dim=None, keepdim=False):  # noqa: A001,A002 - PyTorch's name
    """Whether every element is nonzero (along ``dim``): a bool tensor.

    Example:
        >>> tg.all(tg.tensor([True, False]))
        tensor(False)
    """
    return _tensor(input).all(dim, keepdim) if dim is not None else _tensor(input).all()


def any(input, dim=None, keepdim=False):  # noqa: A001,A002
    """Whether some element is nonzero (along ``dim``): a bool tensor.

    Example:
        >>> tg.any(tg.tensor([True, False]))
        tensor(True)
    """
    return _tensor(input).any(dim, keepdim) if dim is not None else _tensor(input).any()


def nonzero(input, *, as_tuple=False):  # noqa: A002
    """The indices of the nonzero elements: an ``N x ndim`` int64 tensor, or with
    ``as_tuple`` one 1-D tensor per dim.

    Example:
        >>> tg.nonzero(tg.tensor([0.0, 1.0, 2.0]))
        tensor([[1],
                [2]])
    """
    v = _values(input, "nonzero()")
    if as_tuple:
        if v.ndim == 0:
            return (Tensor._make(np.zeros(int(v != 0), np.int64)),)
        return tuple(Tensor._make(i.astype(np.int64)) for i in np.nonzero(v))
    return Tensor._make(np.argwhere(v).astype(np.int64))


def argwhere(input):  # noqa: A002
    """``nonzero(input)``: the indices of the nonzero elements, one row each.

    Example:
        >>> tg.argwhere(tg.tensor([[0.0, 1.0]]))
        tensor([[0, 1]])
    """
    return nonzero(input)


def count_nonzero(input, dim=None):  # noqa: A002
    """The number of nonzero elements (along ``dim``): int64.

    Example:
        >>> tg.count_nonzero(tg.tensor([0.0, 1.0, 2.0]))
        tensor(2)
    """
    v = _values(input, "count_nonzero()")
    axis = None if dim is None else tuple(np.atleast_1d(F._dims(_tensor(input), dim)))
    return Tensor._make(np.asarray(np.count_nonzero(v, axis=axis), dtype=np.int64))


def bincount(input, weights=None, minlength=0):  # noqa: A002
    """How often each value from 0 to the largest occurs in a 1-D non-negative integer tensor
    (summing ``weights`` instead of ones when given).

    Example:
        >>> tg.bincount(tg.tensor([0, 2, 2]))
        tensor([1, 0, 2])
    """
    v = _values(input, "bincount()")
    if v.ndim != 1 or v.dtype.kind not in "iu":
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if v.size and v.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    w = None if weights is None else _values(weights, "bincount()")
    out = np.bincount(v, weights=w, minlength=minlength)
    return Tensor._make(out if w is not None else out.astype(np.int64))


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,  # noqa: A002
                 sorter=None):
    """Where each value of ``input`` would be inserted into the sorted last dimension of
    ``sorted_sequence`` to keep it sorted (int64 indices).

    Example:
        >>> tg.searchsorted(tg.tensor([1.0, 3.0, 5.0]), tg.tensor([3.0, 4.0]))
        tensor([1, 2])
    """
    seq = _values(sorted_sequence, "searchsorted()")
    scalar = not isinstance(input, Tensor)
    vals = np.asarray(input) if scalar else _values(input, "searchsorted()")
    side = side or ("right" if right else "left")
    if seq.ndim <= 1:
        out = np.searchsorted(seq, vals, side=side)
    else:
        flat_seq = seq.reshape(-1, seq.shape[-1])
        flat_vals = vals.reshape(flat_seq.shape[0], -1)
        out = np.stack([np.searchsorted(s, v, side=side)
                        for s, v in zip(flat_seq, flat_vals)]).reshape(vals.shape)
    return Tensor._make(np.asarray(out, np.int32 if out_int32 else np.int64))


def bucketize(input, boundaries, *, out_int32=False, right=False):  # noqa: A002
    """The index of the bucket of each element, for sorted 1-D ``boundaries``.

    Example:
        >>> tg.bucketize(tg.tensor([0.5, 2.0, 9.0]), tg.tensor([1.0, 2.0, 3.0]))
        tensor([0, 1, 3])
    """
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct elements, sorted (and optionally where each element went, and counts).

    Example:
        >>> tg.unique(tg.tensor([3, 1, 3]))
        tensor([1, 3])
    """
    v = _values(input, "unique()")
    res = np.unique(v, return_inverse=return_inverse, return_counts=return_counts, axis=dim)
    if not (return_inverse or return_counts):
        return Tensor._make(res)
    out = [Tensor._make(res[0])]
    if return_inverse:
        out.append(Tensor._make(res[1].reshape(v.shape if dim is None else -1)
                                .astype(np.int64)))
    if return_counts:
        out.append(Tensor._make(res[-1].astype(np.int64)))
    return tuple(out)


def histc(input, bins=100, min=0, max=0):  # noqa: A001,A002
    """A histogram of the elements in ``bins`` equal bins over ``[min, max]`` (the data's
    range when both are 0).

    Example:
        >>> tg.histc(tg.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3)
        tensor([0., 2., 1., 0.])
    """
    v = _values(input, "histc()")
    if v.dtype.kind != "f":
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for "
                                  f"'{_tensor(input).dtype.scalar_name}'")
    bins = int(bins)
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for "
                           "dimension 0")
    lo, hi = float(min), float(max)
    if lo == hi and v.size:
        lo, hi = float(np.min(v)), float(np.max(v))
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (np.isfinite(lo) and np.isfinite(hi)):
        # (a nan from the data prints as C++ prints the one PyTorch's aminmax gives)
        def shown(e):
            return "-nan" if e != e else f"{e:g}"
        raise RuntimeError(f"torch.histc: range of [{shown(lo)}, {shown(hi)}] is not finite")
    if not lo < hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    # PyTorch's histc kernel: the bin by linear interpolation alone (no comparison with the
    # edges, unlike histogram's), elements outside [lo, hi] left out, hi in the last bin
    flat = v.reshape(-1)
    inside = flat[(flat >= lo) & (flat <= hi)]
    pos = ((inside - lo) * bins / (hi - lo)).astype(np.int64)
    pos[pos == bins] = bins - 1
    return Tensor._make(np.bincount(pos, minlength=bins).astype(v.dtype))


# ---------------------------------------------------------------------------------------------
# Elementwise helpers built from recorded ops
# ---------------------------------------------------------------------------------------------
def sgn(input):  # noqa: A002
    """The sign of each element (-1, 0 or 1); for real tensors the same as ``sign``.

    Example:
        >>> tg.sgn(tg.tensor([-2.0, 0.0, 3.0]))
        tensor([-1.,  0.,  1.])
    """
    x = _tensor(input)
    return F.named_node(F.sign(x), "SgnBackward0", x)


def deg2rad(input):  # noqa: A002
    """Degrees to radians.

    Example:
        >>> tg.deg2rad(tg.tensor([180.0]))
        tensor([3.1416])
    """
    x = _tensor(input)
    return F.named_node(F.mul(x, math.pi / 180.0), "Deg2RadBackward0", x)


def rad2deg(input):  # noqa: A002
    """Radians to degrees.

    Example:
        >>> tg.rad2deg(tg.tensor([math.pi]))
        tensor([180.])
    """
    x = _tensor(input)
    return F.named_node(F.mul(x, 180.0 / math.pi), "Rad2DegBackward0", x)


def sinc(input):  # noqa: A002
    """The normalised sinc ``sin(pi x) / (pi x)``, 1 at 0 (with gradient 0 there).

    Example:
        >>> tg.sinc(tg.tensor([0.0, 0.5]))
        tensor([1.0000, 0.6366])
    """
    # one op of the table (SincBackward0), with PyTorch's gradient: 0 where pi x^2 is 0
    return F.activation(SINC, _tensor(input))


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):  # noqa: A002
    """``input`` with nan, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf``
    (by default 0 and the largest and smallest finite float64).

    Example:
        >>> tg.nan_to_num(tg.tensor([float("nan"), float("inf"), 1.0]))
        tensor([ 0.0000e+00, 1.7977e+308,  1.0000e+00])
    """
    x = _tensor(input)
    if x._value.dtype.kind != "f":
        return F.clone(x)
    big = np.finfo(np.float64).max
    posinf = big if posinf is None else posinf
    neginf = -big if neginf is None else neginf
    out = F.where(F._compare(np.not_equal, x, x), float(nan), x)
    out = F.where(F._compare(np.equal, x, np.inf), float(posinf), out)
    out = F.where(F._compare(np.equal, x, -np.inf), float(neginf), out)
    return F.named_node(out, "NanToNumBackward0", x)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
    """``(std, mean)`` of ``input`` (along ``dim``), as ``std`` and ``mean`` give them.

    Example:
        >>> tg.std_mean(tg.tensor([1.0, 3.0]))
        (tensor(1.4142), tensor(2.))
    """
    x = _tensor(input)
    return F.named_outputs((F.std(x, dim, unbiased, keepdim, correction=correction),
                            F.mean(x, dim, keepdim) if dim is not None else F.mean(x)),
                           "StdMeanBackward0", x)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
    """``(var, mean)`` of ``input`` (along ``dim``), as ``var`` and ``mean`` give them.

    Example:
        >>> tg.var_mean(tg.tensor([1.0, 3.0]))
        (tensor(2.), tensor(2.))
    """
    x = _tensor(input)
    return F.named_outputs((F.var(x, dim, unbiased, keepdim, correction=correction),
                            F.mean(x, dim, keepdim) if dim is not None else F.mean(x)),
                           "VarMeanBackward0", x)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoid rule's integral of ``y`` along ``dim``, at spacing ``dx`` (1 by
    default) or at sample points ``x``; also ``trapz``.

    Example:
        >>> tg.trapezoid(tg.tensor([1.0, 2.0, 3.0]))
        tensor(4.)
    """
    y = _tensor(y)
    d = F._wrap_dim(dim, builtins.max(y._value.ndim, 1))
    if y._value.shape[d] == 0:
        return F.sum(y, d)
    return _trapezoid_rule(y, x, dx, dim, d, F.sum)


def _trapezoid_rule(y, x, dx, dim, d, accumulate):
    """The trapezoid rule along d, ``accumulate`` being sum (the integral) or cumsum (the
    running integral), written as ATen writes it, for its rounding and the nodes its graph
    shows: at a spacing dx (a number) ``(sum(y) - (y[0] + y[-1]) * 0.5) * dx`` and
    ``cumsum(dx / 2 * (y[1:] + y[:-1]))``; at sample points x, whose steps dx are a tensor,
    ``accumulate(dx * (y[1:] + y[:-1])) / 2``."""
    n = y._value.shape[d]
    pair = F.add(F.narrow(y, d, 1, n - 1), F.narrow(y, d, 0, n - 1))
    if x is not None and isinstance(x, Tensor):
        xd = F._wrap_dim(dim, builtins.max(x._value.ndim, 1)) if x._value.ndim > 1 else 0
        m = x._value.shape[xd]
        step = F.sub(F.narrow(x, xd, 1, m - 1), F.narrow(x, xd, 0, m - 1))
        if x._value.ndim == 1 and y._value.ndim > 1:
            shape = [1] * y._value.ndim
            shape[d] = m - 1
            step = F.reshape(step, *shape)
        total = accumulate(F.mul(step, pair), d)
        return F.named_node(F.div(total, 2.0), "DivBackward1", total)
    step = 1.0 if dx is None and x is None else float(dx if dx is not None else x)
    if accumulate is F.cumsum:
        return F.cumsum(F.named_node(F.mul(pair, step / 2.0), "MulBackward1", pair), d)
    ends = F.add(F.select(y, d, 0), F.select(y, d, -1))
    inner = F.sub(F.sum(y, d), F.named_node(F.mul(ends, 0.5), "MulBackward1", ends))
    return F.named_node(F.mul(inner, step), "MulBackward1", inner)


trapz = trapezoid


def unflatten(input, dim, sizes):  # noqa: A002
    """``input`` with dimension ``dim`` split into ``sizes`` (one may be -1): a view.

    Example:
        >>> tg.unflatten(tg.arange(6), 0, (2, 3)).shape
        tapegrad.Size([2, 3])
    """
    x = _tensor(input)
    s = x._value.shape
    d = F._wrap_dim(dim, builtins.max(len(s), 1))
    sizes = tuple(int(k) for k in sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    if -1 in sizes:
        known = math.prod(k for k in sizes if k != -1)
        sizes = tuple(s[d] // known if k == -1 and known else k for k in sizes)
    if math.prod(sizes) != s[d]:
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the "
                           f"size of dim {dim} ({s[d]}) in the input tensor")
    return F.reshape(x, *(s[:d] + sizes + s[d + 1:]))


# ---------------------------------------------------------------------------------------------
# Random draws
# ---------------------------------------------------------------------------------------------
def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False):
    """Draws from N(mean, std**2): ``mean`` and ``std`` numbers or tensors (broadcast), or
    numbers with ``size``.  Gradients flow to tensor ``mean`` and ``std`` (the draw is
    ``mean + std * eps``).

    Example:
        >>> _ = tg.manual_seed(0)
        >>> tg.normal(0.0, 1.0, size=(2,)).shape
        tapegrad.Size([2])
    """
    rng = stream_for(generator)
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments: give "
                            "size= with a number mean and std")
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
        from .creation import tensor as make
        return make(rng.normal(float(mean), float(std), tuple(size)),
                    requires_grad=requires_grad)   # (PyTorch's empty(size).normal_(mean, std))
    m, s = _tensor(mean), _tensor(std)
    shape = F.broadcast_shape(m._value.shape, s._value.shape)
    if np.any(s._value < 0):
        raise RuntimeError("normal expects all elements of std >= 0.0")
    eps = Tensor._make(rng.standard_normal(shape))
    with set_grad_enabled(state.grad_enabled):
        return F.add(m, F.mul(s, eps))


def bernoulli(input, p=None, *, generator=None):  # noqa: A002
    """Draws of 0 or 1 with probability ``input`` (or ``p``) of 1, elementwise; float64, no
    gradient.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> tg.bernoulli(tg.tensor([0.0, 1.0]))
        tensor([0., 1.])
    """
    x = _tensor(input)
    prob = x._value if p is None else np.broadcast_to(np.asarray(p, np.float64),
                                                      x._value.shape)
    if np.any((prob < 0) | (prob > 1)):
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    draws = stream_for(generator).random(x._value.shape) < prob   # (u < p, as PyTorch draws)
    return Tensor._make(draws.astype(x._value.dtype if x._value.dtype.kind == "f"
                                     else np.float64))


def multinomial(input, num_samples, replacement=False, *, generator=None):  # noqa: A002
    """``num_samples`` category indices drawn with the (unnormalised) weights of each row
    of ``input``: int64, without replacement unless ``replacement``.  PyTorch's draws:
    without replacement (or for one sample) the ``num_samples`` largest ``w / q`` (q ~ Exp(1),
    one per weight); otherwise one uniform per sample looked up in the row's normalised
    cumulative sums.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> tg.multinomial(tg.tensor([0.0, 1.0]), 1)
        tensor([1])
        >>> tg.multinomial(tg.tensor([1.0, 2.0, 3.0]), 4, replacement=True)
        tensor([1, 2, 2, 2])
    """
    x = _tensor(input)
    if x.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if x._value.dtype.kind != "f":
        raise RuntimeError("multinomial only supports floating-point dtypes for input, got: "
                           + _SCALAR_NAMES.get(x._value.dtype.name, x._value.dtype.name))
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > x.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    w = _values(x, "multinomial()")
    rows = w.reshape(w.shape[0] if w.ndim == 2 else 1, w.shape[-1]).astype(np.float64)
    out = np.empty((rows.shape[0], num_samples), np.int64)
    if rows.shape[0] == 0:
        return Tensor._make(out.reshape(w.shape[:-1] + (num_samples,)))
    if not (np.all(rows >= 0) and np.all(rows < np.inf)):      # (NaN fails both)
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if rows.shape[1] == 0 or np.any(rows.sum(1) == 0):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    stream = stream_for(generator)
    if not replacement or num_samples == 1:
        # ATen's Gumbel trick (its fast path for one sample too, with or without replacement):
        # argmax/topk of w / q with q ~ Exp(1) drawn for the whole input
        # (topk's order among tied ratios, the zero weights, is its own: argsort's differs)
        with np.errstate(divide="ignore"):
            ratio = rows / stream.exponential(1.0, rows.shape)
        if num_samples == 1:
            out[:, 0] = ratio.argmax(1)
        else:
            out[:] = np.argsort(-ratio, axis=1, kind="stable")[:, :num_samples]
    else:
        # ATen's CPU kernel, a row at a time: cumulative sums (added in order) over their
        # total, the last set to 1, and the first slot whose sum is >= each uniform
        for i, row in enumerate(rows):
            cum = np.cumsum(row)
            cum = cum / cum[-1]
            cum[-1] = 1.0
            out[i] = np.searchsorted(cum, stream.random(num_samples), side="left")
    return Tensor._make(out.reshape(w.shape[:-1] + (num_samples,)))


# ---------------------------------------------------------------------------------------------
# Number formats and grad modes
# ---------------------------------------------------------------------------------------------
def _numpy_dtype(dt):
    return dt.np if isinstance(dt, _dtype.dtype) else np.dtype(dt)


class finfo:
    """Facts about a floating dtype (float64 by default): ``bits``, ``eps``, ``max``, ``min``,
    ``tiny`` (= ``smallest_normal``), ``resolution``, ``dtype``.

    Example:
        >>> tg.finfo(tg.float64).eps
        2.220446049250313e-16
    """

    def __init__(self, type=None):  # noqa: A002 - PyTorch's argument name
        np_dt = _numpy_dtype(_dtype.float64 if type is None else type)
        if np_dt.kind != "f":
            raise TypeError(f"torch.finfo() requires a floating point input type. Use "
                            f"torch.iinfo to handle '{type}'")
        info = np.finfo(np_dt)
        self.bits = info.bits
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.tiny)
        self.resolution = float(info.resolution)
        self.dtype = str(np_dt)

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Facts about an integer dtype: ``bits``, ``max``, ``min``, ``dtype``.

    Example:
        >>> tg.iinfo(tg.int64).max
        9223372036854775807
    """

    def __init__(self, type):  # noqa: A002
        np_dt = _numpy_dtype(type)
        if np_dt.kind not in "iub":
            raise TypeError(f"torch.iinfo() requires an integer input type. Use torch.finfo "
                            f"to handle '{type}'")
        info = np.iinfo(np_dt) if np_dt.kind != "b" else None
        self.bits = np_dt.itemsize * 8 if info is None else info.bits
        self.max = 1 if info is None else int(info.max)
        self.min = 0 if info is None else int(info.min)
        self.dtype = str(np_dt)

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


class inference_mode:
    """``no_grad`` for code that never needs gradients (PyTorch's faster variant; in
    tapegrad the same switch): a context manager and a decorator, ``mode=False`` to keep
    recording.

    Example:
        >>> x = tg.ones(2, requires_grad=True)
        >>> with tg.inference_mode():
        ...     y = x * 2
        >>> y.requires_grad
        False
    """

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        self.mode = bool(mode) if isinstance(mode, bool) else True

    def __enter__(self):
        self._prev = state.grad_enabled
        self._prev_inference = _INFERENCE[0]
        if self.mode:
            state.grad_enabled = False
            _INFERENCE[0] = True

    def __exit__(self, *exc):
        state.grad_enabled = self._prev
        _INFERENCE[0] = self._prev_inference
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with inference_mode(self.mode):
                return fn(*args, **kwargs)
        return wrapped


_INFERENCE = [False]


def is_inference_mode_enabled():
    """Whether code runs inside ``inference_mode()``.

    Example:
        >>> tg.is_inference_mode_enabled()
        False
    """
    return _INFERENCE[0]


# ---------------------------------------------------------------------------------------------
# More compositions
# ---------------------------------------------------------------------------------------------
def tensordot(a, b, dims=2, out=None):
    """Sums of products over ``dims`` (a number: a's last and b's first so many dims; or two
    lists of dims to contract), by a matrix product.

    Example:
        >>> tg.tensordot(tg.ones(2, 3), tg.ones(3, 4), dims=1).shape
        tapegrad.Size([2, 4])
    """
    # PyTorch's tensordot is Python that asks a.dim() first: anything but a tensor gets its
    # AttributeError ('list' object has no attribute 'dim'), not a conversion
    na, nb = a.dim(), b.dim()
    if isinstance(dims, (int, np.integer)):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(na - dims, na)), list(range(dims))
    else:
        da, db = ([int(d) for d in np.atleast_1d(x)] for x in dims)
    da = [F._wrap_dim(d, builtins.max(na, 1)) for d in da]
    db = [F._wrap_dim(d, builtins.max(nb, 1)) for d in db]
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    for i, j in zip(da, db):
        if a._value.shape[i] != b._value.shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{a._value.shape[i]} in dim {i} and second has size "
                               f"{b._value.shape[j]} in dim {j}")
    free_a = [d for d in range(na) if d not in da]
    free_b = [d for d in range(nb) if d not in db]
    k = math.prod(a._value.shape[d] for d in da)
    pa = F.reshape(F.permute(a, *(free_a + da)) if na else a, -1, k)
    pb = F.reshape(F.permute(b, *(db + free_b)) if nb else b, k, -1)
    shape = [a._value.shape[d] for d in free_a] + [b._value.shape[d] for d in free_b]
    return F.reshape(F.matmul(pa, pb), *shape)


def take_along_dim(input, indices, dim=None):  # noqa: A002
    """The elements of ``input`` at ``indices`` along ``dim`` (both broadcast apart from
    dim); without dim, of the flattened input.

    Example:
        >>> x = tg.tensor([[10.0, 30.0, 20.0]])
        >>> tg.take_along_dim(x, tg.tensor([[1, 2]]), 1)
        tensor([[30., 20.]])
    """
    x = _tensor(input)
    idx = _tensor(indices)
    read_value(idx, "an index tensor")     # its values become the gather's positions
    if dim is None:
        return F.take(F.reshape(x, -1), F.reshape(idx, -1))
    nd = x._value.ndim
    d = F._wrap_dim(dim, builtins.max(nd, 1))
    if idx._value.ndim != nd:
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same "
                           "number of dimensions, but got " f"{nd} dimensions for input, and "
                           f"{idx._value.ndim} dimensions for indices")
    xs, js = list(x._value.shape), list(idx._value.shape)
    xs[d] = js[d] = 1
    common = F.broadcast_shape(tuple(xs), tuple(js))
    shape_x = list(common)
    shape_x[d] = x._value.shape[d]
    shape_i = list(common)
    shape_i[d] = idx._value.shape[d]
    if tuple(shape_x) != x._value.shape:
        x = F.expand(x, *shape_x)
    iv = np.broadcast_to(idx._value, shape_i)
    return F.gather(x, d, Tensor._make(np.ascontiguousarray(iv)))


def rot90(input, k=1, dims=(0, 1)):  # noqa: A002
    """``input`` rotated by 90 degrees ``k`` times, from the first of ``dims`` toward the
    second.

    Example:
        >>> tg.rot90(tg.tensor([[1, 2], [3, 4]]))
        tensor([[2, 4],
                [1, 3]])
    """
    x = _tensor(input)
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    nd = x._value.ndim
    if nd < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {nd}")
    d0, d1 = (F._wrap_dim(d, nd) for d in dims)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and "
                           f"dim1 = {d1}")
    k = k % 4
    if k == 1:
        out = F.transpose(F.flip(x, d1), d0, d1)
    elif k == 2:
        out = F.flip(x, d0, d1)
    elif k == 3:
        out = F.flip(F.transpose(x, d0, d1), d1)
    else:
        out = F.clone(x)
    return F.named_node(out, "Rot90Backward0", x)


def logit(input, eps=None):  # noqa: A002
    """``log(p / (1 - p))``, with p clamped to ``[eps, 1 - eps]`` when eps is given.

    Example:
        >>> tg.logit(tg.tensor([0.5, 0.75]))
        tensor([0.0000, 1.0986])
    """
    p = _tensor(input)
    if p._value.dtype.kind != "f":
        p = p.to(_dtype.float64)
    if eps is not None:
        p = F.clamp(p, eps, 1.0 - eps)
    # one op of the table (LogitBackward0), with PyTorch's gradient: nan outside [0, 1]
    return F._unary(LOGIT, p, logit_array)


xlog1py = F.xlog1py    # an op of the table, declared beside xlogy


def float_power(input, exponent):  # noqa: A002
    """``input ** exponent`` in float64 (tapegrad's floating type anyway).

    Example:
        >>> tg.float_power(tg.tensor([2, 3]), 2)
        tensor([4., 9.])
    """
    x = _tensor(input)
    if x._value.dtype.kind != "f":
        x = x.to(_dtype.float64)
    if isinstance(exponent, Tensor) and exponent._value.dtype.kind != "f":
        exponent = exponent.to(_dtype.float64)
    return F.pow(x, float(exponent) if not isinstance(exponent, Tensor) else exponent)


def _nan_ignoring(a, b, larger):
    a, b = _tensor(a), _tensor(b)
    pick_a = F._compare(np.greater_equal if larger else np.less_equal, a, b)
    # a nan in b gives a; a nan in a (and none in b) gives b; ties give a (its gradient too)
    return F.where(F._compare(np.not_equal, b, b), a, F.where(pick_a, a, b))


def fmax(input, other):  # noqa: A002
    """Elementwise maximum that ignores nan (nan only where both are nan).

    Example:
        >>> tg.fmax(tg.tensor([1.0, float("nan")]), tg.tensor([float("nan"), 2.0]))
        tensor([1., 2.])
    """
    return F.named_node(_nan_ignoring(input, other, True), "FmaxBackward0", input, other)


def fmin(input, other):  # noqa: A002
    """Elementwise minimum that ignores nan (nan only where both are nan).

    Example:
        >>> tg.fmin(tg.tensor([1.0, float("nan")]), tg.tensor([float("nan"), 2.0]))
        tensor([1., 2.])
    """
    return F.named_node(_nan_ignoring(input, other, False), "FminBackward0", input, other)


def nansum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """The sum with nan counted as 0.

    Example:
        >>> tg.nansum(tg.tensor([1.0, float("nan"), 2.0]))
        tensor(3.)
    """
    x = given = _tensor(input)
    if x._value.dtype.kind == "f":
        x = F.where(F._compare(np.not_equal, x, x), 0.0, x)
    return F.named_node(F.sum(x, dim, keepdim) if dim is not None else F.sum(x),
                        "NansumBackward0", given)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """The mean of the elements that are not nan.

    Example:
        >>> tg.nanmean(tg.tensor([1.0, float("nan"), 2.0]))
        tensor(1.5000)
    """
    x = _tensor(input)
    if x._value.dtype.kind != "f":
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex "
                           f"dtype but got {x.dtype.scalar_name}")
    is_num = F._compare(np.equal, x, x)
    count = F.sum(F.where(is_num, 1.0, 0.0), dim, keepdim) if dim is not None else \
        F.sum(F.where(is_num, 1.0, 0.0))
    return F.div(nansum(x, dim, keepdim), count)


def cov(input, *, correction=1, fweights=None, aweights=None):  # noqa: A002
    """The covariance matrix of the variables in the rows of ``input`` (observations in
    columns); a 0-d variance for a vector.

    Example:
        >>> tg.cov(tg.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
        tensor([[ 1., -1.],
                [-1.,  1.]])
    """
    if fweights is not None or aweights is not None:
        raise NotImplementedError("cov(fweights=, aweights=) is not supported by tapegrad")
    x = _tensor(input)
    if x._value.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {x._value.ndim} dimensions")
    x2 = F.reshape(x, 1, -1) if x._value.ndim < 2 else x
    n = x2._value.shape[1]
    centred = F.sub(x2, F.mean(x2, 1, True))
    c = F.div(F.matmul(centred, F.t(centred)), builtins.max(n - correction, 0))
    return F.reshape(c, ()) if x._value.ndim < 2 else c


def corrcoef(input):  # noqa: A002
    """Pearson's correlation coefficients of the variables in the rows of ``input``,
    clipped to ``[-1, 1]``.

    Example:
        >>> tg.corrcoef(tg.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
        tensor([[ 1., -1.],
                [-1.,  1.]])
    """
    c = cov(input)
    if c._value.ndim == 0:
        return F.div(c, c)
    d = F.diagonal(c)
    sd = F.sqrt(d)
    c = F.div(F.div(c, F.reshape(sd, -1, 1)), F.reshape(sd, 1, -1))
    return F.clamp(c, -1.0, 1.0)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of ``elements`` is among ``test_elements``: a bool tensor.

    Example:
        >>> tg.isin(tg.tensor([1, 2, 3]), tg.tensor([2, 5]))
        tensor([False,  True, False])
    """
    e = _values(elements, "isin()") if isinstance(elements, Tensor) else np.asarray(elements)
    t = _values(test_elements, "isin()") if isinstance(test_elements, Tensor) else \
        np.asarray(test_elements)
    return Tensor._make(np.asarray(np.isin(e, t, invert=invert)))


def isreal(input):  # noqa: A002
    """Whether each element is real: all True (tapegrad has no complex dtype).

    Example:
        >>> tg.isreal(tg.tensor([1.0, 2.0]))
        tensor([True, True])
    """
    return Tensor._make(np.ones(_tensor(input)._value.shape, dtype=bool))


def heaviside(input, values):  # noqa: A002
    """The step function: 0 below 0, 1 above, ``values`` at 0 (no gradient, as in
    PyTorch).

    Example:
        >>> tg.heaviside(tg.tensor([-1.0, 0.0, 2.0]), tg.tensor(0.5))
        tensor([0.0000, 0.5000, 1.0000])
    """
    x = _tensor(input)
    v = _tensor(values)
    if x._value.dtype != v._value.dtype:
        raise RuntimeError(f"heaviside is not yet implemented for tensors with different "
                           "dtypes.")
    with set_grad_enabled(False):
        step = F.where(F._compare(np.greater, x, 0), F.add(F.mul(v, 0), 1),
                       F.mul(v, 0)) if x._value.dtype.kind == "f" else None
    if step is None:
        return Tensor._make(np.heaviside(x._value, v._value).astype(x._value.dtype))
    return F.where(F._compare(np.equal, x, 0), v.detach(), step)


def frexp(input):  # noqa: A002
    """``(mantissa, exponent)`` with ``input = mantissa * 2 ** exponent``, mantissa in
    ``[0.5, 1)`` in magnitude (int32 exponents); no gradient.

    Example:
        >>> m, e = tg.frexp(tg.tensor([8.0]))
        >>> m, e
        (tensor([0.5000]), tensor([4], dtype=tapegrad.int32))
    """
    v = _values(input, "frexp()")
    if v.dtype.kind != "f":
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    m, e = np.frexp(v)
    return _FrexpResult(Tensor._make(m), Tensor._make(e.astype(np.int32)))


class _FrexpResult(tuple):
    def __new__(cls, mantissa, exponent):
        self = super().__new__(cls, (mantissa, exponent))
        return self

    mantissa = property(lambda self: self[0])
    exponent = property(lambda self: self[1])

    def __repr__(self):
        return f"frexp(mantissa={self[0]!r}, exponent={self[1]!r})"


def ldexp(input, other):  # noqa: A002
    """``input * 2 ** other``.

    Example:
        >>> tg.ldexp(tg.tensor([1.0]), tg.tensor([3]))
        tensor([8.])
    """
    x, e = _tensor(input), _tensor(other)
    return F.named_node(F.mul(x, F.rpow(e, 2.0)), "LdexpBackward0", x, e)


def result_type(tensor1, tensor2):
    """The dtype PyTorch's promotion gives an op of the two (tensors or numbers).

    Example:
        >>> tg.result_type(tg.tensor([1, 2]), 1.0)
        tapegrad.float64
    """
    from . import _promote
    return _promote.result_dtype(tensor1, tensor2)


def promote_types(type1, type2):
    """The smallest dtype both dtypes convert to.

    Example:
        >>> tg.promote_types(tg.int32, tg.float64)
        tapegrad.float64
    """
    return _dtype.promote_types(type1, type2)


def can_cast(from_, to):
    """Whether PyTorch's casting rules allow ``from_`` to ``to`` (not float to integer, not
    to bool from another kind).

    Example:
        >>> tg.can_cast(tg.float64, tg.int64)
        False
    """
    return bool(np.can_cast(_numpy_dtype(from_), _numpy_dtype(to), "same_kind"))


def set_num_threads(n):
    """The number of threads tapegrad's batched kernels use.

    Example:
        >>> tg.set_num_threads(tg.get_num_threads())
    """
    import numba
    numba.set_num_threads(int(n))


def get_num_threads():
    """The number of threads tapegrad's batched kernels use.

    Example:
        >>> tg.get_num_threads() >= 1
        True
    """
    import numba
    return numba.get_num_threads()


_DETERMINISTIC = [False]


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Accepted for PyTorch programs: tapegrad's kernels are deterministic either way.

    Example:
        >>> tg.use_deterministic_algorithms(True); tg.are_deterministic_algorithms_enabled()
        True
        >>> tg.use_deterministic_algorithms(False)
    """
    _DETERMINISTIC[0] = bool(mode)


def are_deterministic_algorithms_enabled():
    """What ``use_deterministic_algorithms`` was last given.

    Example:
        >>> tg.are_deterministic_algorithms_enabled() in (True, False)
        True
    """
    return _DETERMINISTIC[0]


def seed():
    """Seed tapegrad's generator from the operating system's entropy; returns the seed.

    Example:
        >>> s = tg.seed(); s == tg.initial_seed()
        True
    """
    from . import creation
    return creation.default_generator.seed()


def initial_seed():
    """The seed tapegrad's generator was last seeded with.

    Example:
        >>> _ = tg.manual_seed(3); tg.initial_seed()
        3
    """
    from . import creation
    return creation.default_generator.initial_seed()


def get_rng_state():
    """The state of tapegrad's generator as a uint8 tensor, for ``set_rng_state``.

    Example:
        >>> state = tg.get_rng_state(); a = tg.rand(2)
        >>> tg.set_rng_state(state); bool((tg.rand(2) == a).all())
        True
    """
    from . import creation
    return creation.default_generator.get_state()


def set_rng_state(new_state):
    """Restore tapegrad's generator from ``get_rng_state()``.

    Example:
        >>> tg.set_rng_state(tg.get_rng_state())
    """
    from . import creation
    creation.default_generator.set_state(new_state)


def is_nonzero(input):  # noqa: A002
    """Whether a one-element tensor is nonzero.

    Example:
        >>> tg.is_nonzero(tg.tensor([2.0]))
        True
    """
    x = _tensor(input)
    if x._value.size == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if x._value.size > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(x)


_chain_matmul_warned = False


def chain_matmul(*matrices):
    """The product of the matrices, left to right.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     tg.chain_matmul(tg.eye(2), tg.ones(2, 3)).shape
        tapegrad.Size([2, 3])
    """
    import warnings
    global _chain_matmul_warned
    if not _chain_matmul_warned:   # once per process, as PyTorch's TORCH_WARN_ONCE
        _chain_matmul_warned = True
        warnings.warn("torch.chain_matmul is deprecated and will be removed in a future "
                      "PyTorch release. Use torch.linalg.multi_dot instead, which accepts a "
                      "list of two or more tensors rather than multiple parameters.",
                      UserWarning, stacklevel=2)
    ms = _tensors(matrices)
    out = ms[0]
    for m in ms[1:]:
        out = F.matmul(out, m)
    return out


def pdist(input, p=2):  # noqa: A002
    """The ``p``-norm distance between each pair of rows ``i < j`` of a matrix, in row order
    (``p >= 0``; ``p = 0`` counts the differing coordinates).  One node, ``PdistBackward0``.

    Example:
        >>> tg.pdist(tg.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
        tensor([5.0000, 1.0000, 4.2426])
    """
    x = _tensor(input)
    if x._value.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {x._value.ndim}D")
    if x._value.dtype.kind != "f":
        raise RuntimeError("pdist only supports floating-point dtypes")
    p = float(p)
    if not p >= 0:
        raise RuntimeError("pdist only supports non-negative p values")
    i, j = np.triu_indices(x._value.shape[0], 1)
    diff = F.sub(F.index_select(x, 0, Tensor._make(i.astype(np.int64))),
                 F.index_select(x, 0, Tensor._make(j.astype(np.int64))))
    if p == 0.0:
        # the count of differing coordinates: flat, so its gradient is zero; the empty column
        # slice keeps the result on the tape without touching the (maybe infinite) differences
        count = np.count_nonzero(diff._value, axis=1).astype(x._value.dtype)
        out = F.add(F.sum(F.getitem(diff, (slice(None), slice(0, 0))), 1),
                    Tensor._make(count))
    else:
        out = F.norm(diff, p, dim=1)
    return F.named_node(out, "PdistBackward0", x)


def repeat_interleave(*args, **kwargs):
    """``repeat_interleave(input, repeats, dim=None, *, output_size=None)``: each element (or
    slice along ``dim``) repeated ``repeats`` times (an int, or a 1-D tensor of counts, one
    per slice); without ``dim``, of the flattened input.  With a tensor alone,
    ``repeat_interleave(counts)`` gives each index ``counts[i]`` times.  The call is bound
    as PyTorch's parser binds it, so a wrong one (a float or bool count) raises its
    TypeError listing the overloads.

    Example:
        >>> tg.repeat_interleave(tg.tensor([1.0, 2.0]), 2)
        tensor([1., 1., 2., 2.])
        >>> tg.repeat_interleave(tg.tensor([[1, 2], [3, 4]]), tg.tensor([1, 2]), dim=0)
        tensor([[1, 2],
                [3, 4],
                [3, 4]])
        >>> tg.repeat_interleave(tg.tensor([1.0, 2.0]), 2.0)
        Traceback (most recent call last):
          ...
        TypeError: repeat_interleave() received an invalid combination of arguments - got (Tensor, float), but expected one of:
         * (Tensor input, Tensor repeats, int dim = None, *, int output_size = None)
         * (Tensor repeats, *, int output_size = None)
         * (Tensor input, int repeats, int dim = None, *, int output_size = None)
    """
    call = _factory_args.parse("repeat_interleave", args, kwargs, kwargs_as_given=True)
    return _repeat_interleave(call.get("input"), call["repeats"], call.get("dim"),
                              call["output_size"])


def repeat_interleave_method(self, *args, **kwargs):
    """``x.repeat_interleave(repeats, dim=None, *, output_size=None)``: the function with x
    as its input, its wrong calls refused with the method's overloads.

    Example:
        >>> tg.tensor([1.0, 2.0]).repeat_interleave(tg.tensor([0, 2]))
        tensor([2., 2.])
    """
    call = _factory_args.parse("repeat_interleave", args, kwargs, "Tensor.repeat_interleave",
                               kwargs_as_given=True)
    return _repeat_interleave(self, call["repeats"], call["dim"], call["output_size"])


def _repeat_interleave(input, repeats, dim, output_size):  # noqa: A002
    """repeat_interleave of a bound call: ``input`` None for the counts-only form."""
    if input is None:
        counts = _values(repeats, "repeat_interleave()")
        _check_count_dtype(repeats)
        if counts.ndim != 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        if np.any(counts < 0):
            raise RuntimeError("repeats can not be negative")
        return Tensor._make(np.repeat(np.arange(counts.size, dtype=np.int64), counts))
    x = _tensor(input)
    if not isinstance(repeats, Tensor):
        return _repeat_each(x, repeats, dim, output_size)
    if dim is None:
        x = F.reshape(x, -1)
        d = 0
    else:
        d = F._wrap_dim(dim, builtins.max(x._value.ndim, 1))
    n = x._value.shape[d] if x._value.ndim else 1
    counts = _values(repeats, "repeat_interleave()")
    if counts.ndim > 1:
        raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
    counts = counts.reshape(-1)
    if counts.size == 1:
        counts = np.full(n, counts[0])
    elif counts.size != n:
        raise RuntimeError("repeats must have the same size as input along dim, but got "
                           f"repeats.size(0) = {counts.size} and input.size({d}) = {n}")
    _check_count_dtype(repeats)
    counts = counts.astype(np.int64)
    if np.any(counts < 0):
        raise RuntimeError("repeats can not be negative")
    idx = np.repeat(np.arange(n, dtype=np.int64), counts)
    if output_size is not None and output_size != idx.size:
        raise RuntimeError("allocated size does not match required size")
    return F.index_select(x, d, Tensor._make(idx))


def _check_count_dtype(counts):
    """PyTorch counts repeats in int32 or int64 tensors only (its kernel is not built for
    other types)."""
    if counts.dtype.np not in (np.int32, np.int64):
        raise NotImplementedError(
            f"\"repeat_interleave_cpu\" not implemented for '{counts.dtype.scalar_name}'")


def _repeat_each(x, repeats, dim, output_size):
    """repeat_interleave by a number, as ATen writes it (the nodes its graph shows, and no
    saved index): each slice along dim made a new axis, expanded ``repeats`` times, copied,
    and the two axes flattened into one."""
    repeats = operator.index(repeats)
    d = F._wrap_dim(0 if dim is None else dim, x._value.ndim)
    if dim is None:
        x = x.flatten()
    if repeats < 0:
        raise RuntimeError("Repeats must be non-negative")
    spread = x.unsqueeze(d + 1)
    shape = list(spread.shape)
    shape[d + 1] = repeats
    out = spread.expand(*shape).clone().flatten(d, d + 1)
    if output_size is not None and output_size != out._value.shape[d]:
        raise RuntimeError(f"repeat_interleave: Invalid output_size, expected "
                           f"{out._value.shape[d]} but got {output_size}")
    return out


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``torch.nn.functional.cosine_similarity`` at the top level, as PyTorch has it.

    Example:
        >>> tg.cosine_similarity(tg.tensor([[1.0, 0.0]]), tg.tensor([[1.0, 1.0]]))
        tensor([0.7071])
    """
    from .nn import functional as nn_functional
    return nn_functional.cosine_similarity(x1, x2, dim, eps)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoid-rule integral of ``y`` along ``dim`` (one element shorter), at
    spacing ``dx`` (1 by default) or at sample points ``x``.

    Example:
        >>> tg.cumulative_trapezoid(tg.tensor([1.0, 2.0, 3.0]))
        tensor([1.5000, 4.0000])
    """
    y = _tensor(y)
    d = F._wrap_dim(dim, builtins.max(y._value.ndim, 1))
    if y._value.shape[d] == 0:
        return y
    return _trapezoid_rule(y, x, dx, dim, d, F.cumsum)


# ---------------------------------------------------------------------------------------------
# PyTorch's module-level names for Tensor methods, and small shape and value helpers
# ---------------------------------------------------------------------------------------------
def _comparison(method, name):
    def compare(input, other):  # noqa: A002 - PyTorch's argument name
        return getattr(_tensor(input), method)(other)
    compare.__name__ = compare.__qualname__ = name
    compare.__doc__ = (f"``input.{method}(other)`` elementwise, a bool tensor (PyTorch's "
                       f"``torch.{name}``).")
    return compare


eq, ne, gt, ge, lt, le = (_comparison(m, m) for m in ("eq", "ne", "gt", "ge", "lt", "le"))
bitwise_and, bitwise_or, bitwise_xor, bitwise_left_shift, bitwise_right_shift = (
    _comparison(m, m) for m in ("bitwise_and", "bitwise_or", "bitwise_xor",
                                "bitwise_left_shift", "bitwise_right_shift"))
for _f in (bitwise_and, bitwise_or, bitwise_xor, bitwise_left_shift, bitwise_right_shift):
    _f.__doc__ = (f"``torch.{_f.__name__}``: elementwise on integer and bool tensors, with "
                  f"PyTorch's type promotion.")


def bitwise_not(input):  # noqa: A002
    """``~input``: the bitwise complement of an integer tensor, the negation of a bool one.

    Example:
        >>> tg.bitwise_not(tg.tensor([-1, 0, 3]))
        tensor([ 0, -1, -4])
    """
    return _tensor(input).bitwise_not()


greater, greater_equal, less, less_equal, not_equal = (
    _comparison(m, n) for m, n in (("gt", "greater"), ("ge", "greater_equal"), ("lt", "less"),
                                   ("le", "less_equal"), ("ne", "not_equal")))


def ravel(input):  # noqa: A002
    """The elements as a 1-D tensor, ``input.reshape(-1)``.

    Example:
        >>> tg.ravel(tg.tensor([[1, 2], [3, 4]]))
        tensor([1, 2, 3, 4])
    """
    return F.reshape(_tensor(input), -1)


def inner(input, other):  # noqa: A002
    """The sum of products over the last dimension of both (a product when either is 0-d).

    Example:
        >>> tg.inner(tg.tensor([1.0, 2.0]), tg.tensor([[1.0, 1.0], [0.0, 2.0]]))
        tensor([3., 4.])
    """
    a, b = _tensor(input), _tensor(other)
    if a._value.ndim == 0 or b._value.ndim == 0:
        return F.mul(a, b)
    if a._value.shape[-1] != b._value.shape[-1]:
        raise RuntimeError(
            f"inner() the last dimension must match on both input tensors but got shapes "
            f"{list(a._value.shape)} and {list(b._value.shape)}")
    return tensordot(a, b, dims=([a._value.ndim - 1], [b._value.ndim - 1]))


def vdot(input, other):  # noqa: A002
    """The dot product of two 1-D tensors (``dot``: tapegrad's tensors are real).

    Example:
        >>> tg.vdot(tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0]))
        tensor(11.)
    """
    # (PyTorch's vdot raises dot's errors too)
    return F.named_node(dot(input, other), "VdotBackward0", input, other)


def cartesian_prod(*tensors):
    """``torch.cartesian_prod``: all combinations of the elements of 1-D tensors, one per row.

    Example:
        >>> tg.cartesian_prod(tg.tensor([1, 2]), tg.tensor([3, 4])).tolist()
        [[1, 3], [1, 4], [2, 3], [2, 4]]
    """
    return cartesian_product(*tensors)


def broadcast_shapes(*shapes):
    """The shape tensors of these shapes broadcast to, without making them.

    Example:
        >>> tg.broadcast_shapes((2,), (3, 1), (1, 1, 1))
        tapegrad.Size([1, 3, 2])
    """
    from .tensor import Size
    result = ()
    for k, shape in enumerate(shapes):
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        n = builtins.max(len(result), len(shape))
        a, b = (1,) * (n - len(result)) + result, (1,) * (n - len(shape)) + shape
        for i in range(n):
            if b[i] != a[i] and b[i] != 1 and a[i] != 1:
                raise RuntimeError(
                    f"Attempting to broadcast a dimension of length {b[i]} at {i - n}! "
                    f"Mismatching argument at index {k} had {shape}; but expected shape "
                    f"should be broadcastable to {list(result)}")
        result = tuple(y if x == 1 else x for x, y in zip(a, b))
    return Size(result)


def aminmax(input, *, dim=None, keepdim=False):  # noqa: A002
    """The minimum and the maximum, over all elements or along ``dim``: ``(min, max)``.

    Example:
        >>> tg.aminmax(tg.tensor([1, -3, 5]))
        tapegrad.return_types.aminmax(
        min=tensor(-3),
        max=tensor(5))
    """
    x = _tensor(input)
    dims = () if dim is None else dim
    return _AminmaxResult(*F.named_outputs((F.amin(x, dims, keepdim), F.amax(x, dims, keepdim)),
                                           "AminmaxBackward0", x))


_AminmaxResult = return_type("aminmax", ["min", "max"])


def signbit(input):  # noqa: A002
    """Whether each element's sign bit is set (True for -0.0 and negative numbers).

    Example:
        >>> tg.signbit(tg.tensor([0.7, -1.2, 0.0, -0.0]))
        tensor([False,  True, False,  True])
    """
    x = _tensor(input)
    read_value(x, "signbit")
    return Tensor._make(np.asarray(np.signbit(x._value), order="C"))   # (0-d stays 0-d)


def tensor_split(input, indices_or_sections, dim=0):  # noqa: A002
    """Views of ``input`` split along ``dim``: into ``n`` nearly equal parts (the first
    ``size % n`` one longer) for a number, or at the given indices for a list.

    Example:
        >>> [t.tolist() for t in tg.tensor_split(tg.arange(7), 3)]
        [[0, 1, 2], [3, 4], [5, 6]]
    """
    x = _tensor(input)
    d = F._wrap_dim(dim, x._value.ndim)
    size = x._value.shape[d]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, (int, np.integer)):
        n = int(indices_or_sections)
        if n <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {n}")
        q, r = divmod(size, n)
        bounds = [0]
        for k in range(n):
            bounds.append(bounds[-1] + q + (1 if k < r else 0))
    else:
        bounds = [0] + [builtins.min(builtins.max(int(i) if i >= 0 else int(i) + size, 0), size)
                        for i in indices_or_sections] + [size]
    return tuple(F.narrow(x, d, a, builtins.max(b - a, 0)) for a, b in zip(bounds, bounds[1:]))


def _split_evenly(name, input, indices_or_sections, dim, least):  # noqa: A002
    """``tensor_split`` along ``dim`` of a tensor of at least ``least`` dims, where a number
    of sections must divide the dim exactly (hsplit, vsplit, dsplit)."""
    x = _tensor(input)
    nd = x._value.ndim
    if nd < least:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {least} dimension, "
                           f"but got a tensor with {nd} dimensions!")
    if isinstance(indices_or_sections, (int, np.integer)):
        size = x._value.shape[dim]
        if indices_or_sections == 0 or size % indices_or_sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the "
                               f"size of the dimension {size} is not divisible by the "
                               f"split_size {indices_or_sections}!")
    return tensor_split(x, indices_or_sections, dim)


def hsplit(input, indices_or_sections):  # noqa: A002
    """Views of ``input`` split along its columns (dim 1; dim 0 of a vector): into equal
    parts for a number, which must divide the dim, or at the given indices for a list.

    Example:
        >>> [t.tolist() for t in tg.hsplit(tg.arange(6).reshape(2, 3), [1])]
        [[[0], [3]], [[1, 2], [4, 5]]]
    """
    nd = _tensor(input)._value.ndim
    return _split_evenly("hsplit", input, indices_or_sections, 1 if nd > 1 else 0, 1)


def vsplit(input, indices_or_sections):  # noqa: A002
    """Views of ``input`` split along its rows (dim 0), as ``hsplit`` splits columns.

    Example:
        >>> [t.tolist() for t in tg.vsplit(tg.arange(4).reshape(2, 2), 2)]
        [[[0, 1]], [[2, 3]]]
    """
    return _split_evenly("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):  # noqa: A002
    """Views of ``input`` split along its depth (dim 2), as ``hsplit`` splits columns.

    Example:
        >>> [t.shape for t in tg.dsplit(tg.zeros(2, 3, 4), 2)]
        [tapegrad.Size([2, 3, 2]), tapegrad.Size([2, 3, 2])]
    """
    return _split_evenly("dsplit", input, indices_or_sections, 2, 3)


def absolute(input):  # noqa: A002
    """``abs``, by its other name (``AbsBackward0``).

    Example:
        >>> tg.absolute(tg.tensor([-1.5, 2.0]))
        tensor([1.5000, 2.0000])
    """
    return F.abs(_tensor(input))


def negative(input):  # noqa: A002
    """``neg``, by its other name (``NegBackward0``).

    Example:
        >>> tg.negative(tg.tensor([-1.5, 2.0]))
        tensor([ 1.5000, -2.0000])
    """
    return F.neg(_tensor(input))


def positive(input):  # noqa: A002
    """``input`` itself (unary plus); a bool tensor raises, as in PyTorch.

    Example:
        >>> x = tg.tensor([-1.5, 2.0]); tg.positive(x) is x
        True
    """
    if input.dtype is _dtype.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def conj(input):  # noqa: A002
    """The complex conjugate: ``input`` itself, as tapegrad's tensors are real (PyTorch
    returns a real tensor itself too); ``resolve_conj`` and ``resolve_neg`` likewise.

    Example:
        >>> x = tg.tensor([1.0]); tg.conj(x) is x
        True
    """
    return input.conj()


def resolve_conj(input):  # noqa: A002
    """``input`` itself: a real tensor has no lazy conjugation to resolve.

    Example:
        >>> x = tg.tensor([1.0]); tg.resolve_conj(x) is x
        True
    """
    return input.resolve_conj()


def resolve_neg(input):  # noqa: A002
    """``input`` itself: a real tensor has no lazy negation to resolve.

    Example:
        >>> x = tg.tensor([1.0]); tg.resolve_neg(x) is x
        True
    """
    return input.resolve_neg()


def real(input):  # noqa: A002
    """The real part: ``input`` itself, as tapegrad's tensors are real.

    Example:
        >>> x = tg.tensor([1.0]); tg.real(x) is x
        True
    """
    return input.real


def imag(input):  # noqa: A002
    """The imaginary part, which a real tensor does not have: raises, as in PyTorch.

    Example:
        >>> tg.imag(tg.tensor([1.0]))
        Traceback (most recent call last):
        ...
        RuntimeError: imag is not implemented for tensors with non-complex dtypes.
    """
    return input.imag


_QUANTILE_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):  # noqa: A002
    """The ``q``-quantiles of ``input`` (of all of it, or along ``dim``), as PyTorch computes
    them: the values sorted, then read at rank ``q * (n - 1)``, between two neighbours by
    ``interpolation`` (linear, lower, higher, midpoint or nearest).  A slice holding a NaN
    gives NaN.  For a 1-D ``q`` the quantiles make the first dim of the result.  The
    gradient flows to the values read.

    Example:
        >>> tg.quantile(tg.tensor([[1.0, 4.0, 2.0], [3.0, 6.0, 5.0]]), 0.25, dim=1)
        tensor([1.5000, 4.0000])
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):  # noqa: A002
    """``quantile`` of the values that are not NaN (NaN where a slice has none).

    Example:
        >>> tg.nanquantile(tg.tensor([1.0, float("nan"), 3.0]), 0.5)
        tensor(2.)
    """
    if out is not None:
        raise TypeError("tapegrad: out= is not supported")
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=True)


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan):  # noqa: A002
    x = _tensor(input)
    one_q = not isinstance(q, Tensor)
    if one_q:
        qs = np.array([float(q)])
    else:
        if q._value.ndim > 1:
            raise RuntimeError("quantile() q must be a scalar or 1D tensor")
        one_q = q._value.ndim == 0
        qs = q._value.reshape(-1)
    if x._value.dtype.kind != "f":
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if isinstance(q, Tensor) and q._value.dtype != x._value.dtype:
        raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
    if x._value.size == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    if not isinstance(q, Tensor) and not 0.0 <= qs[0] <= 1.0:
        raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {q}")
    if isinstance(q, Tensor) and not np.all((qs >= 0.0) & (qs <= 1.0)):
        raise RuntimeError("quantile() q values must be in the range [0, 1]")
    if interpolation not in _QUANTILE_MODES:
        raise RuntimeError("quantile() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest, but got {interpolation}")
    if state.trace is not None:
        # the ranks read depend on q's values and on where the input's NaNs are: a replay
        # would keep those of the traced call
        state.trace.opaque("quantile reads q's values and where its input's NaNs are")
    shape = x._value.shape
    if dim is None:
        rows = F.reshape(x, 1, -1)
        kept = (1,) * len(shape) if keepdim else ()
    else:
        d = F._wrap_dim(dim, len(shape))
        n = shape[d] if shape else 1
        rows = F.reshape(F.movedim(x, d, -1) if shape else x, -1, n)
        kept = tuple(1 if i == d else s for i, s in enumerate(shape)) if keepdim else \
            tuple(s for i, s in enumerate(shape) if i != d)
    ordered = F.sort(rows, dim=-1)[0]     # (NaN sorts last)
    # the ranks read, one row of len(qs) per slice: data that depends on the values only
    # through where the NaNs are, which the sort placed last
    values = ordered._value
    n = values.shape[1]
    nan = np.isnan(values)
    if ignore_nan:
        # (a slice of NaNs only reads its first: NaN)
        ranks = qs[None, :] * ((~nan).sum(axis=1, keepdims=True) - 1)
        ranks = np.where(ranks < 0, 0.0, ranks)
    else:
        ranks = np.where(nan.any(axis=1, keepdims=True), n - 1, qs[None, :] * (n - 1))
    ranks = np.ascontiguousarray(ranks, dtype=np.float64)
    if interpolation == "lower":
        ranks = np.floor(ranks)
    elif interpolation == "higher":
        ranks = np.ceil(ranks)
    elif interpolation == "nearest":
        ranks = np.round(ranks)      # (half to even, as PyTorch's round)
    below = ranks.astype(np.int64)
    result = F.gather(ordered, 1, Tensor._make(below))
    if interpolation in ("linear", "midpoint"):
        above = F.gather(ordered, 1, Tensor._make(np.ceil(ranks).astype(np.int64)))
        weights = ranks - below if interpolation == "linear" else np.full(ranks.shape, 0.5)
        result = lerp(result, above, Tensor._make(weights))
    # (slices, quantiles) -> (quantiles, the kept dims), the one quantile's dim squeezed
    result = F.reshape(F.t(result), len(qs), *kept)
    # (PyTorch's quantile ends with an in-place squeeze: SqueezeBackward4)
    if one_q:
        return F._reshaped(result, kept, F.V_SQUEEZE_DIM_)
    return F._reshaped(result, result.shape, F.V_SQUEEZE_DIM_)


# ---------------------------------------------------------------------------------------------
# mm, bmm, mv, dot: matmul for the shapes each takes, refusing the others as PyTorch does
# ---------------------------------------------------------------------------------------------
_SCALAR_NAMES = {"float64": "Double", "int64": "Long", "int32": "Int", "int16": "Short",
                 "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def mm(input, mat2):  # noqa: A002
    """The product of two matrices (``matmul`` of 2-D tensors; others raise, as in PyTorch).

    Example:
        >>> tg.mm(tg.ones(2, 3), tg.ones(3, 1))
        tensor([[3.],
                [3.]])
    """
    a, b = _tensor(input), _tensor(mat2)
    if a._value.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if b._value.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    return F.matmul(a, b)


def bmm(input, mat2):  # noqa: A002
    """Batched matrix products of two 3-D tensors with the same batch size.

    Example:
        >>> tg.bmm(tg.ones(4, 2, 3), tg.ones(4, 3, 5)).shape
        tapegrad.Size([4, 2, 5])
    """
    a, b = _tensor(input), _tensor(mat2)
    if a._value.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b._value.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    (n, _, k), (nb, kb, _) = a._value.shape, b._value.shape
    if (nb, kb) != (n, k):
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{n}, {k}] but got: [{nb}, {kb}].")
    # one BmmBackward0 node, as PyTorch's bmm (its matmul of 3-D tensors shows a view over it)
    return F.named_node(F.matmul(a, b), "BmmBackward0", a, b)


def mv(input, vec):  # noqa: A002
    """The product of a matrix and a vector.

    Example:
        >>> tg.mv(tg.ones(2, 3), tg.tensor([1.0, 2.0, 3.0]))
        tensor([6., 6.])
    """
    a, b = _tensor(input), _tensor(vec)
    if a._value.ndim != 2 or b._value.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {a._value.ndim}, "
                           f"{b._value.ndim}")
    if a._value.shape[1] != b._value.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({a._value.shape[0]}), mat "
                           f"({a._value.shape[0]}x{a._value.shape[1]}), vec ({b._value.shape[0]})")
    return F.matmul(a, b)


def dot(input, tensor):  # noqa: A002
    """The dot product of two 1-D tensors of one dtype and length.

    Example:
        >>> tg.dot(tg.tensor([2, 3]), tg.tensor([2, 1]))
        tensor(7)
    """
    a, b = _tensor(input), _tensor(tensor)
    if a._value.ndim != 1 or b._value.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a._value.ndim}D and "
                           f"{b._value.ndim}D tensors")
    if a._value.dtype != b._value.dtype:
        raise RuntimeError(
            f"dot : expected both vectors to have same dtype, but found "
            f"{_SCALAR_NAMES[a.dtype.name]} and {_SCALAR_NAMES[b.dtype.name]}")
    if a._value.shape != b._value.shape:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{a._value.size}] and src "
            f"[{b._value.size}] to have the same number of elements, but got {a._value.size} "
            f"and {b._value.size} elements respectively")
    return F.matmul(a, b)


def logaddexp2(input, other):  # noqa: A002
    """``log2(2**input + 2**other)`` without overflow: ``logaddexp`` in base 2.

    Example:
        >>> tg.logaddexp2(tg.tensor([1.0]), tg.tensor([1.0]))
        tensor([2.])
    """
    ln2 = math.log(2.0)
    x, y = _tensor(input), _tensor(other)
    return F.named_node(F.div(F.logaddexp(F.mul(x, ln2), F.mul(y, ln2)), ln2),
                        "Logaddexp2Backward0", x, y)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The elements with each run of equal consecutive ones kept once (of the flattened
    input), with the position of each element's run and each run's length if asked.

    Example:
        >>> tg.unique_consecutive(tg.tensor([1, 1, 2, 2, 3, 1, 1, 2]))
        tensor([1, 2, 3, 1, 2])
    """
    if dim is not None:
        raise NotImplementedError("unique_consecutive: dim is not supported yet")
    x = _tensor(input)
    read_value(x, "unique_consecutive")
    v = x._value.reshape(-1)
    starts = np.ones(v.shape, dtype=bool)
    starts[1:] = v[1:] != v[:-1]
    result = [Tensor._make(np.ascontiguousarray(v[starts]))]
    if return_inverse:
        result.append(Tensor._make((np.cumsum(starts) - 1).reshape(x._value.shape)))
    if return_counts:
        result.append(Tensor._make(np.diff(np.append(np.flatnonzero(starts), v.size))))
    return result[0] if len(result) == 1 else tuple(result)


# ---------------------------------------------------------------------------------------------
# masked_scatter, put, index_put: x with some elements replaced (or added to), recorded as one
# gather from [x, source] whose variant carries PyTorch's node name
# ---------------------------------------------------------------------------------------------
V_MASKED_SCATTER, V_PUT, V_INDEX_PUT = 43, 44, 45   # structure._GATHER_NAMES


def _replaced(x, positions, src, variant):
    """x with src's elements (flat, in order) at flat ``positions`` of x (the last write
    wins), as one REPLACE record: each source element takes the gradient at its target,
    also one a later write overwrote, as in PyTorch (functional.replaced)."""
    return F.replaced(x, src, positions, variant)


def _added(x, positions, src, variant):
    """x plus src's elements added at flat ``positions`` (repeats add up); the caller names
    the sum as ``variant``'s node (``_as_node``)."""
    n = x._value.size
    pos = positions.reshape(-1)
    added = F.reshape(F.scatter_add_flat(F.reshape(src, -1), pos, n), *x._value.shape)
    return F.add(x, added)


def _dtype_name(t):
    return t.dtype.scalar_name


def masked_scatter(input, mask, source):  # noqa: A002
    """``input`` with the elements of ``source`` (read in order) written where the bool
    ``mask`` holds; ``input`` and ``mask`` broadcast together.  ``grad_fn``:
    ``<MaskedScatterBackward0>`` (source's first ``mask.sum()`` elements get the gradient).

    Example:
        >>> tg.masked_scatter(tg.zeros(4), tg.tensor([True, False, True, False]),
        ...                   tg.tensor([1.0, 2.0, 3.0]))
        tensor([1., 0., 2., 0.])
    """
    x = _tensor(input)
    if not isinstance(source, Tensor):
        raise TypeError(f"masked_scatter(): argument 'source' (position 2) must be Tensor, "
                        f"not {type(source).__name__}")
    mask = _tensor(mask)
    if mask._value.dtype.kind != "b":
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with "
                           f"dtype {mask.dtype.scalar_name}")
    if source._value.dtype != x._value.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but "
                           f"got{_dtype_name(x)} and {_dtype_name(source)}")
    shape = F.broadcast_shape(mask._value.shape, x._value.shape)
    given = x
    if x._value.shape != shape:
        x = F.expand(x, *shape)
    read_value(mask, "masked_scatter's mask")
    hit = np.broadcast_to(mask._value, shape)
    count = int(np.count_nonzero(hit))
    if count > source._value.size:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    positions = F._flat_index(x)[hit]
    src = F.reshape(source, -1)
    if count < source._value.size:
        src = F.getitem(src, slice(0, count))
    # (the node lists the op's input and source, not the reshaped and cut source)
    return _as_node(_replaced(x, positions, src, V_MASKED_SCATTER), V_MASKED_SCATTER, given,
                    source)


def put(input, index, source, accumulate=False):  # noqa: A002
    """``input`` with the elements of ``source`` written at the flat positions ``index``
    (negative counts from the end), or added there with ``accumulate``.  ``grad_fn``:
    ``<PutBackward0>``.

    Example:
        >>> tg.put(tg.zeros(2, 2), tg.tensor([0, -1]), tg.tensor([1.0, 2.0]))
        tensor([[1., 0.],
                [0., 2.]])
    """
    x = _tensor(input)
    if not isinstance(index, Tensor) or not isinstance(source, Tensor):
        bad, pos = ("index", 1) if not isinstance(index, Tensor) else ("source", 2)
        value = index if bad == "index" else source
        raise TypeError(f"put(): argument '{bad}' (position {pos}) must be Tensor, not "
                        f"{type(value).__name__}")
    if index._value.dtype != np.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got "
                           f"{_dtype_name(index)}")
    if source._value.dtype != x._value.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {_dtype_name(x)} and source.dtype = "
                           f"{_dtype_name(source)}")
    if source._value.size != index._value.size:
        raise IndexError(f"put_(): Expected source and index to have the same number of "
                         f"elements, but got source.numel() = {source._value.size}, "
                         f"index.numel() = {index._value.size}")
    idx = F._index_values(index, "").reshape(-1)
    n = x._value.size
    bad = idx[(idx < -n) | (idx >= n)]
    if bad.size:
        raise IndexError(f"out of range: tried to access index {bad[0]} on a tensor of {n} "
                         "elements.")
    positions = np.where(idx < 0, idx + n, idx)
    out = (_added if accumulate else _replaced)(x, positions, source, V_PUT)
    return _as_node(out, V_PUT, x, source)


def index_put(input, indices, values, accumulate=False):  # noqa: A002
    """``input`` with ``values`` (broadcast) written at ``input[indices]`` (a tuple of
    integer or bool index tensors), or added there with ``accumulate`` (repeats add up;
    without it the last write of a repeated index wins, and every value gets the gradient
    at its target, as PyTorch's ``grad[indices]``).  ``grad_fn``: ``<IndexPutBackward0>``.

    Example:
        >>> tg.index_put(tg.zeros(2, 2), (tg.tensor([0, 1]), tg.tensor([1, 1])),
        ...              tg.tensor(5.0))
        tensor([[0., 5.],
                [0., 5.]])
    """
    x = _tensor(input)
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put(): argument 'indices' (position 1) must be tuple of "
                        f"Tensors, not {type(indices).__name__}")
    if not isinstance(values, Tensor):
        raise TypeError(f"index_put(): argument 'values' (position 2) must be Tensor, not "
                        f"{type(values).__name__}")
    for k, i in enumerate(indices):
        if not isinstance(i, Tensor):
            raise TypeError(f"expected Tensor as element {k} in argument 0, but got "
                            f"{type(i).__name__}")
    if len(indices) > x._value.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x._value.ndim} (got "
                         f"{len(indices)})")
    key = []
    for i in indices:
        if i._value.dtype.kind not in "iub":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        read_value(i, "an index tensor")
        key.append(i._value.astype(np.int64) if i._value.dtype.kind in "iu" else i._value)
    if values._value.dtype != x._value.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{_dtype_name(x)} for the destination and {_dtype_name(values)} "
                           f"for the source.")
    target = F._flat_index(x)
    try:
        positions = np.asarray(target[tuple(key)])
    except IndexError as e:
        raise IndexError(str(e).replace("axis", "dimension")) from None
    vshape = values._value.shape
    src = values
    try:
        # (the value expands to the indexed part: unlike x[key] = v, its leading 1s count)
        if np.broadcast_shapes(vshape, positions.shape) != positions.shape:
            raise ValueError
    except ValueError:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(vshape)} cannot be "
                           f"broadcast to indexing result of shape {list(positions.shape)}"
                           ) from None
    if src._value.shape != positions.shape:
        src = F.expand(src, *positions.shape)
    out = (_added if accumulate else _replaced)(x, positions, src, V_INDEX_PUT)
    return _as_node(out, V_INDEX_PUT, x, values)


def index_put_(input, indices, values, accumulate=False):  # noqa: A002
    """In-place ``index_put``: ``input.index_put_(indices, values, accumulate)``.

    Example:
        >>> x = tg.zeros(3)
        >>> _ = tg.index_put_(x, (tg.tensor([2]),), tg.tensor(1.0))
        >>> x
        tensor([0., 0., 1.])
    """
    return input.index_put_(indices, values, accumulate)


# ---------------------------------------------------------------------------------------------
# slice_scatter, select_scatter, diagonal_scatter: input with the part a view would show
# replaced by src; scatter_reduce: sources reduced into input.  Each is recorded as one gather
# (from [input, src], or from input and the reduced rows) whose variant names PyTorch's node.
# ---------------------------------------------------------------------------------------------
V_SLICE_SCATTER, V_SELECT_SCATTER, V_DIAGONAL_SCATTER = 48, 49, 50   # structure._GATHER_NAMES
V_SCATTER_REDUCE, V_INDEX_REDUCE = 51, 52


def _src_arg(src, name, position=1):
    if not isinstance(src, Tensor):
        raise TypeError(f"{name}(): argument 'src' (position {position + 1}) must be Tensor, "
                        f"not {type(src).__name__}")
    return src


def _written(x, part, src, variant):
    """x with its flat positions ``part`` (laid out as the view PyTorch would take) replaced
    by src, which must have the view's shape; src takes x's dtype, as PyTorch's copy does."""
    if tuple(src._value.shape) != part.shape:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size "
                           f"= {list(src._value.shape)}, slice size = {list(part.shape)}")
    given = src
    if src._value.dtype != x._value.dtype:
        src = src.to(x.dtype)
    return _as_node(_replaced(x, part, src, variant), variant, x, given)


def _as_node(out, variant, *inputs):
    """``out`` (a gather of ``variant``, PyTorch's node name) with ``inputs`` as the node's
    next_functions, past the records that made its operands (functional.named_node)."""
    return F.named_node(out, K.OPS[K.GATHER].variants[variant], *inputs)


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):  # noqa: A002
    """``input`` with ``src`` written where ``input`` sliced along ``dim`` (``start:end:step``)
    would be: a new tensor.  ``grad_fn``: ``<SliceScatterBackward0>``.

    Example:
        >>> tg.slice_scatter(tg.zeros(2, 4), tg.ones(2, 2), 1, start=1, end=3)
        tensor([[0., 1., 1., 0.],
                [0., 1., 1., 0.]])
    """
    x, src = _tensor(input), _src_arg(src, "slice_scatter")
    nd = x._value.ndim
    if nd == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    d = F._wrap_dim(dim, nd)
    step = F._int_arg(step)
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    # Python's clamping of start and end is PyTorch's for a positive step
    lo, hi, _ = slice(None if start is None else F._int_arg(start),
                      None if end is None else F._int_arg(end)).indices(x._value.shape[d])
    part = F._flat_index(x)[(slice(None),) * d + (slice(lo, builtins.max(lo, hi), step),)]
    return _written(x, part, src, V_SLICE_SCATTER)


def select_scatter(input, src, dim, index):  # noqa: A002
    """``input`` with ``src`` written where ``input.select(dim, index)`` would be: a new
    tensor.  ``grad_fn``: ``<SelectScatterBackward0>``.

    Example:
        >>> tg.select_scatter(tg.zeros(2, 3), tg.tensor([1.0, 2.0]), 1, -1)
        tensor([[0., 0., 1.],
                [0., 0., 2.]])
    """
    x, src = _tensor(input), _src_arg(src, "select_scatter")
    nd = x._value.ndim
    if nd == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = F._wrap_dim(dim, nd)
    if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer, Tensor)):
        raise TypeError(f"select_scatter(): argument 'index' (position 4) must be int, not "
                        f"{type(index).__name__}")
    size, index = x._value.shape[d], F._int_arg(index)
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(x._value.shape)} at dimension {d}")
    part = np.take(F._flat_index(x), index % size, axis=d)
    return _written(x, np.asarray(part), src, V_SELECT_SCATTER)


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):  # noqa: A002
    """``input`` with ``src`` written where ``input.diagonal(offset, dim1, dim2)`` would be (the
    diagonal's dim last in ``src``, as in ``diagonal``): a new tensor.  ``grad_fn``:
    ``<DiagonalScatterBackward0>``.

    Example:
        >>> tg.diagonal_scatter(tg.zeros(2, 3), tg.tensor([1.0, 2.0]), 1)
        tensor([[0., 1., 0.],
                [0., 0., 2.]])
    """
    x, src = _tensor(input), _src_arg(src, "diagonal_scatter")
    nd = x._value.ndim
    d1, d2 = F._wrap_dim(dim1, nd), F._wrap_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    part = np.diagonal(F._flat_index(x), F._int_arg(offset), d1, d2)
    return _written(x, np.ascontiguousarray(part), src, V_DIAGONAL_SCATTER)


_REDUCES = ("sum", "prod", "mean", "amax", "amin")
_REDUCE_UFUNCS = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum,
                  "amin": np.minimum}


def _reduced_ints(x, targets, values, reduce, include_self):
    """The integer (or bool) result: no gradient, so NumPy's unbuffered ufuncs do it."""
    out = x._value.reshape(-1).copy()
    kind = out.dtype.kind
    if reduce == "mean" and kind == "b":
        # (a bool mean gets here only with an empty index: nothing to divide)
        return Tensor._make(out.reshape(x._value.shape))
    if not include_self and targets.size:
        # the reduction's identity where sources land, so only they count
        if reduce in ("sum", "mean"):
            first = 0
        elif reduce == "prod":
            first = 1
        elif kind == "b":
            first = reduce == "amin"
        else:
            info = np.iinfo(out.dtype)
            first = info.min if reduce == "amax" else info.max
        out[targets] = first
    _REDUCE_UFUNCS[reduce].at(out, targets, values.astype(out.dtype))
    if reduce == "mean":
        count = np.bincount(targets, minlength=out.size) + int(bool(include_self))
        out = np.floor_divide(out, np.maximum(count, 1)).astype(out.dtype)
    return Tensor._make(out.reshape(x._value.shape))


def _reduced_into(x, targets, src, sources, reduce, include_self, variant):
    """``x`` with the elements of the flat tensor ``src`` at ``sources`` reduced into x's flat
    positions ``targets`` (both in index order).

    Every position that receives sources becomes one row, [its x value when included,
    then its sources in index order], reduced with PyTorch's own reduction: the rows'
    gradients (ties of amax/amin share evenly, prod's product of the others) are then those
    PyTorch's scatter_reduce defines.  Rows are batched by length, so the work is linear in
    the number of sources however they repeat."""
    n = x._value.size
    targets, sources = targets.reshape(-1), sources.reshape(-1)
    if x._value.dtype.kind != "f":
        return _reduced_ints(x, targets, src._value.reshape(-1)[sources], reduce, include_self)
    flat = F.reshape(x, -1)
    order = np.argsort(targets, kind="stable")
    hit, starts, counts = np.unique(targets[order], return_index=True, return_counts=True)
    members = n + sources[order]        # positions in [x, src]
    parts = [flat, src]
    phantoms = np.zeros(hit.size, bool)
    if not include_self and reduce in ("amax", "amin"):
        if state.trace is not None:
            state.trace.opaque(f"scatter_reduce {reduce} without self reads which values tie")
        # PyTorch shares the gradient among every value equal to the result, x's own value
        # included even when it is left out of the reduction: a constant copy of it joins
        # the row where it ties (it cannot change the result, and its share goes nowhere)
        pick = (np.maximum if reduce == "amax" else np.minimum).reduceat
        best = pick(src._value.reshape(-1)[sources[order]], starts) if hit.size else hit
        phantoms = x._value.reshape(-1)[hit] == best
        parts.append(Tensor._make(x._value.reshape(-1)[hit].copy()))
    combined = F.cat(parts)
    lengths = counts + int(bool(include_self)) + phantoms
    # the output reads [x, src, ...] and the reduced rows: src is in the graph even when no
    # index reaches it (its gradient is then zero, as PyTorch's, not None)
    reduced = [combined]
    where = np.arange(n, dtype=np.int64)   # where each output element is read in the pool
    filled = combined._value.size
    # rows alike in their number of sources and in having the copy of x go in one batch
    kinds = 2 * counts + phantoms
    for kind in np.unique(kinds):
        rows = np.flatnonzero(kinds == kind)
        k, length = int(kind) // 2, int(lengths[rows[0]])
        cols = np.zeros((rows.size, length), np.int64)
        first = int(bool(include_self))
        if include_self:
            cols[:, 0] = hit[rows]
        cols[:, first:first + k] = members[starts[rows][:, None] + np.arange(k)]
        if kind % 2:
            cols[:, -1] = n + src._value.size + rows     # the tie-sharing copy of x
        block = F._gathered(combined, cols, F.V_INDEX)
        if reduce == "sum":
            block = F.sum(block, 1)
        elif reduce == "mean":
            block = F.div(F.sum(block, 1), float(length))
        else:
            block = getattr(F, reduce)(block, 1)
        reduced.append(block)
        where[hit[rows]] = filled + np.arange(rows.size)
        filled += rows.size
    pool = F.cat(reduced) if len(reduced) > 1 else combined
    return F._gathered(pool, where.reshape(x._value.shape), variant)


def _reduce_arg(reduce):
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002
    """``input`` with ``src[i][j]`` reduced into ``out[i][index[i][j]]`` (``dim=1``; and so
    on for other dims) by ``reduce``: ``"sum"``, ``"prod"``, ``"mean"``, ``"amax"`` or
    ``"amin"``; with ``include_self=False`` input's values where sources land are left out.
    ``grad_fn``: ``<ScatterReduceBackward0>`` (tied amax/amin values share the gradient).

    Example:
        >>> tg.scatter_reduce(tg.tensor([1.0, 5.0]), 0, tg.tensor([0, 0, 1]),
        ...                   tg.tensor([3.0, 2.0, 4.0]), "amax")
        tensor([3., 5.])
    """
    x = _tensor(input)
    if not isinstance(index, Tensor):
        raise TypeError(f"scatter_reduce(): argument 'index' (position 3) must be Tensor, not "
                        f"{type(index).__name__}")
    _src_arg(src, "scatter_reduce", 3)
    s_shape = src._value.shape if src._value.ndim else (1,)
    targets, sources = _scatter_positions(x, dim, index, s_shape, "scatter")
    _reduce_arg(reduce)
    if src._value.dtype != x._value.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if reduce == "mean" and x._value.dtype.kind == "b":
        raise NotImplementedError('"scatter_gather_tensor_cpu_reduce_mean" not implemented '
                                  "for 'Bool'")
    return _as_node(_reduced_into(x, targets, F.reshape(src, -1), sources, reduce,
                                  include_self, V_SCATTER_REDUCE), V_SCATTER_REDUCE, x, src)


def index_reduce(input, dim, index, source, reduce, *, include_self=True):  # noqa: A002
    """``input`` with the slices of ``source`` along ``dim`` reduced into the slices at
    ``index`` (a vector, repeats allowed) by ``reduce``: ``"prod"``, ``"mean"``, ``"amax"``
    or ``"amin"``; with ``include_self=False`` input's values where slices land are left out.
    ``grad_fn``: ``<IndexReduceBackward0>`` (tied amax/amin values share the gradient).

    Example:
        >>> tg.index_reduce(tg.ones(2, 2), 0, tg.tensor([1, 1]),
        ...                 tg.tensor([[2.0, 3.0], [4.0, 5.0]]), "prod")
        tensor([[ 1.,  1.],
                [ 8., 15.]])
    """
    x = _tensor(input)
    for arg, what, position in ((index, "index", 3), (source, "source", 4)):
        if not isinstance(arg, Tensor):
            raise TypeError(f"index_reduce(): argument '{what}' (position {position}) must be "
                            f"Tensor, not {type(arg).__name__}")
    if reduce not in _REDUCES[1:]:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    if index._value.ndim > 1:
        raise IndexError(f"index_reduce_(): Index is supposed to be a vector, but got dim: "
                         f"{index._value.ndim} with type: {_dtype_name(index)} and size: "
                         f"{list(index._value.shape)}")
    idx = F._index_values(index, "index_reduce_(): Expected dtype int32/int64 for index but "
                                 f"got: {_dtype_name(index)}").reshape(-1)
    if source._value.dtype != x._value.dtype:
        raise RuntimeError(f"index_reduce_(): self ({_dtype_name(x)}) and source "
                           f"({_dtype_name(source)}) must have the same scalar type")
    nd, snd = x._value.ndim, source._value.ndim
    d = F._wrap_dim(dim, nd)
    if snd == 0 and nd:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    count = source._value.shape[d] if snd else 1
    if idx.size != count:
        raise RuntimeError(f"index_reduce_(): Number of indices ({idx.size}) should be equal to "
                           f"source.size(dim): ({count}), for dim: {dim}")
    rest = [s for k, s in enumerate(x._value.shape) if k != d]
    if nd != snd or rest != [s for k, s in enumerate(source._value.shape) if k != d]:
        raise RuntimeError("source tensor shape must match self tensor shape, excluding the "
                           f"specified dimension. Got self.shape = {list(x._value.shape)} "
                           f"source.shape = {list(source._value.shape)}")
    size = x._value.shape[d] if nd else 1
    if np.any((idx < 0) | (idx >= size)):      # (negative indices count as out of range)
        raise IndexError("index out of range in self")
    if x._value.dtype.kind == "b":
        # PyTorch's bool kernels: none to start from the identity (include_self=False), none
        # on its path for 0-d and 1-D inputs, and the mean's floor division none either
        if not include_self:
            raise NotImplementedError("\"index_reduce_func_exclude_input_init\" not "
                                      "implemented for 'Bool'")
        if nd <= 1:
            raise NotImplementedError("\"index_func_\" not implemented for 'Bool'")
        if reduce == "mean" and idx.size:
            raise NotImplementedError("\"div_floor_cpu\" not implemented for 'Bool'")
    flat = F._flat_index(x)
    targets = np.take(flat, idx, axis=d) if nd else flat.reshape(-1)[idx]
    return _as_node(_reduced_into(x, targets, F.reshape(source, -1),
                                  np.arange(targets.size, dtype=np.int64), reduce,
                                  include_self, V_INDEX_REDUCE), V_INDEX_REDUCE, x, source)


def poisson(input, generator=None):  # noqa: A002
    """Draws from Poisson distributions with the rates ``input`` (elementwise, each >= 0);
    float64, no gradient.  PyTorch's sampler and draws, so its numbers after the same seed.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> tg.poisson(tg.tensor([0.0, 0.0]))
        tensor([0., 0.])
    """
    x = _tensor(input)
    rate = x._value
    if rate.dtype.kind != "f":
        raise NotImplementedError(f'"poisson_cpu" not implemented for '
                                  f"'{_dtype_name(x)}'")
    stream = stream_for(generator)
    # ATen's sampler, an element at a time in order (a bad rate is refused when reached,
    # after the draws of the elements before it, as in PyTorch)
    draws = [_poisson_sample(r, stream) for r in rate.reshape(-1).tolist()]
    return Tensor._make(np.array(draws, dtype=rate.dtype).reshape(rate.shape))


def _poisson_sample(lam, stream):
    """One draw of ATen's ``sample_poisson``: Hoermann's transformed rejection (1993) for
    rates of 10 or more, a product of uniforms below; scalar C arithmetic, no fma."""
    if not lam >= 0:                        # (NaN too)
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    if lam >= 10:
        slam, loglam = math.sqrt(lam), math.log(lam)
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        invalpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2)
        while True:
            u, v = stream.random(2).tolist()
            u -= 0.5
            us = 0.5 - abs(u)
            k = math.floor((2 * a / us + b) * u + lam + 0.43)
            if us >= 0.07 and v <= vr:
                return k
            if k < 0 or (us < 0.013 and v > us):
                continue
            if (math.log(v) + math.log(invalpha) - math.log(a / (us * us) + b)
                    <= -lam + k * loglam - math.lgamma(k + 1.0)):
                return k
    if lam == 0:
        return 0
    enlam = math.exp(-lam)
    count, prod = 0, 1.0
    while True:
        prod *= float(stream.random(1)[0])
        if prod <= enlam:
            return count
        count += 1

