"""``histogram`` and ``histogramdd``: counts (or weight sums) of the elements, or of the rows
of points, in bins, with the bins' edges, as PyTorch's ``torch.return_types``.

Bins follow PyTorch's kernel: the edges are ``linspace(leftmost, rightmost, bins + 1)`` for a
number of bins (the data's range when none is given, widened by 0.5 each way when it is one
point, [0, 1] when there is no data), an element falls in the bin whose edges hold it, the
last bin includes its right edge, and what lies outside the edges is left out.  The op has no
derivative in PyTorch: a result of an input that requires grad requires grad, under a node
named ``torch::autograd::NotImplemented`` whose backward raises.
"""
import numpy as np

from . import _dtype
from . import creation as _creation
from . import function as _function
from . import functional as F
from ._argtypes import not_tensor as _not_tensor
from .return_types import return_type
from .tensor import Tensor

__all__ = ["histogram", "histogramdd"]

_HISTOGRAM = return_type("histogram", ["hist", "bin_edges"])
_HISTOGRAMDD = return_type("histogramdd", ["hist", "bin_edges"])


def _cxx(v):
    """A double as C++'s stream prints it (6 significant digits), as PyTorch's messages."""
    return f"{v:g}"


def _edges_of_count(points, dim, bins, lo_hi):
    """Edges of ``bins`` equal bins along column ``dim`` of ``points``: over ``lo_hi`` or the
    data's range, with PyTorch's checks and widening."""
    if lo_hi is not None:
        lo, hi = lo_hi
    elif points.shape[0]:
        column = points[:, dim]
        lo, hi = float(column.min()), float(column.max())
    else:
        lo, hi = 0.0, 1.0
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"torch.histogramdd: dimension {dim}'s range [{_cxx(lo)}, "
                           f"{_cxx(hi)}] is not finite")
    if lo > hi:
        raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min "
                           f"{_cxx(lo)} max {_cxx(hi)} for dimension {dim}")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    # (PyTorch's linspace, whose values can differ from NumPy's in the last bit)
    edges = _creation.linspace(lo, hi, bins + 1, dtype=_dtype.float64)._value
    return edges.astype(points.dtype)


def _counted(points, edges, weight, density):
    """The histogram of ``points`` (rows of D coordinates) over the D edge arrays."""
    shape = tuple(max(e.size - 1, 0) for e in edges)
    hist = np.zeros(shape, dtype=points.dtype)
    keep = np.ones(points.shape[0], dtype=bool)
    flat = np.zeros(points.shape[0], dtype=np.int64)
    for d, e in enumerate(edges):
        column = points[:, d]
        if e.size == 0:
            keep[:] = False
            continue
        keep &= (column >= e[0]) & (column <= e[-1])
        # the bin whose edges hold the element; the last bin includes its right edge
        pos = np.searchsorted(e, column, side="right") - 1
        pos = np.clip(pos, 0, max(e.size - 2, 0))
        flat = flat * shape[d] + pos
    if hist.size:
        w = np.ones(points.shape[0], points.dtype) if weight is None else weight
        np.add.at(hist.reshape(-1), flat[keep], w[keep])
    if density:
        # (no element in any bin: 0 / 0, nan as in PyTorch, without NumPy's warning)
        with np.errstate(invalid="ignore", divide="ignore"):
            hist = hist / hist.sum()
            for d, e in enumerate(edges):
                widths = np.diff(e)
                hist = hist / widths.reshape([-1 if k == d else 1 for k in range(len(edges))])
    return hist


def _check_input(input, name):  # noqa: A002
    if not isinstance(input, Tensor):
        raise _not_tensor(name, "input", 1, input)
    if input._value.dtype.kind != "f":
        raise NotImplementedError(f"\"histogramdd\" not implemented for "
                                  f"'{input.dtype.scalar_name}'")


def _weights(weight, points_shape, input_shape):  # noqa: A002
    """The weights as a flat array, one per point, or None."""
    if weight is None:
        return None
    if tuple(weight.shape) != tuple(points_shape[:-1]) and \
            tuple(weight.shape) != tuple(input_shape[:-1]):
        raise RuntimeError(
            "torch.histogramdd: if weight tensor is provided it should have the same shape as "
            "the input tensor excluding its innermost dimension, but got input with shape "
            f"{list(input_shape)} and weight with shape {list(weight.shape)}")
    return weight._value.reshape(-1).astype(np.float64)


def histogram(input, bins, *, range=None, weight=None, density=False):  # noqa: A002
    """The histogram of input's elements: ``bins`` equal bins over ``range`` (the data's
    range if None), or the bins between the edges of the 1-D tensor ``bins``; each element
    counts 1 or its ``weight``, and ``density`` scales the counts to a density.  Returns
    ``(hist, bin_edges)``.

    Example:
        >>> tg.histogram(tg.tensor([1.0, 2.0, 1.0]), 4, range=(0.0, 3.0)).hist
        tensor([0., 2., 1., 0.])
    """
    _check_input(input, "histogram")
    points = input._value.reshape(-1, 1)
    w = _weights(weight, input._value.shape + (1,), points.shape)
    edges_tensor = bins if isinstance(bins, Tensor) else None
    if edges_tensor is None:
        count = F._int_arg(bins)
        if count <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {count} for "
                               "dimension 0")
        lo_hi = None if range is None else (float(range[0]), float(range[1]))

    def compute():
        if edges_tensor is not None:
            edges = edges_tensor._value.astype(points.dtype).reshape(-1)
        else:
            edges = _edges_of_count(points, 0, count, lo_hi)
        hist = _counted(points, [edges], w, density)
        return Tensor._make(hist), Tensor._make(np.array(edges))
    hist, edges = _function._without_derivative("histogram", compute, input, weight,
                                                edges_tensor)
    return _HISTOGRAM(hist, edges)


def histogramdd(input, bins, *, range=None, weight=None, density=False):  # noqa: A002
    """The D-dimensional histogram of the rows of ``input`` (points whose coordinates are the
    innermost dimension): ``bins`` is a number of bins for every coordinate, one number per
    coordinate, or one tensor of edges per coordinate; ``range`` is ``[lo0, hi0, lo1, hi1,
    ...]``.  Returns ``(hist, bin_edges)``, ``bin_edges`` a tuple of D tensors.

    Example:
        >>> tg.histogramdd(tg.tensor([[0.0, 0.0], [1.0, 1.0]]), [2, 1]).hist
        tensor([[1.],
                [1.]])
    """
    _check_input(input, "histogramdd")
    shape = input._value.shape
    if len(shape) < 2:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 2 dimensions")
    dims = shape[-1]
    points = input._value.reshape(-1, dims)
    w = _weights(weight, shape, shape)
    edge_tensors = ()
    if isinstance(bins, (int, np.integer)):
        bins = [int(bins)] * dims
    bins = list(bins)
    if len(bins) != dims:
        raise RuntimeError("histogramdd: The size of bins must be equal to the innermost "
                           "dimension of the input.")
    if bins and all(isinstance(b, Tensor) for b in bins):
        edge_tensors, aten_name = tuple(bins), "_histogramdd_from_bin_tensors"
    else:
        counts = [F._int_arg(b) for b in bins]
        for d, count in enumerate(counts):
            if count <= 0:
                raise RuntimeError(f"torch.histogramdd(): bins must be > 0, but got {count} "
                                   f"for dimension {d}")
        if range is not None and len(range) != 2 * dims:
            raise RuntimeError(f"torch.histogramdd: for a {dims}-dimensional histogram range "
                               f"should have {2 * dims} elements, but got {len(range)}")
        aten_name = "_histogramdd_from_bin_cts"

    if edge_tensors:
        # (the given edges are handed back as they are, outside the node)
        edges = [e._value.astype(points.dtype).reshape(-1) for e in edge_tensors]
        hist, = _function._without_derivative(
            aten_name, lambda: (Tensor._make(_counted(points, edges, w, density)),),
            input, weight, *edge_tensors)
        return _HISTOGRAMDD(hist, edge_tensors)

    def compute():
        edges = [_edges_of_count(points, d, c,
                                 None if range is None else (float(range[2 * d]),
                                                             float(range[2 * d + 1])))
                 for d, c in enumerate(counts)]
        hist = _counted(points, edges, w, density)
        return (Tensor._make(hist),) + tuple(Tensor._make(np.array(e)) for e in edges)
    hist, *edges = _function._without_derivative(aten_name, compute, input, weight)
    return _HISTOGRAMDD(hist, tuple(edges))
