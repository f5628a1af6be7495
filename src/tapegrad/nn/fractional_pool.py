"""Fractional max pooling (Graham, 2014), as PyTorch's CPU kernels compute it, and the
``adaptive_max_pool*d_with_indices`` names (``nn.functional`` exports them all).

Each plane of the input is pooled with windows of ``kernel_size`` whose starts are spread
pseudo-randomly over the input: along a dimension of input size ``n``, pool size ``k`` and
output size ``m``, with the plane's sample ``u`` in [0, 1) and ``alpha = (n - k) / (m - 1)``,
window ``i < m - 1`` starts at ``int((i + u) * alpha) - int(u * alpha)`` and the last at
``n - k``.  The samples are ``_random_samples`` when given (one row per batch entry, one
sample per plane and dimension: for 2-D pooling W's first, then H's; for 3-D T, H, W),
drawn with ``rand`` otherwise.  A window's maximum is its first largest element, or its last
nan; the result gathers those elements, so the gradient goes to them (PyTorch's node,
``FractionalMaxPool2DBackward0``, scatters it the same way).
"""
import numpy as np

import tapegrad as tg
from tapegrad.functional import named_node as _named
from tapegrad.tape import state as _state

# (nn.functional imports this module at its end, when its adaptive pools are defined)

__all__ = ["fractional_max_pool2d", "fractional_max_pool3d",
           "fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "adaptive_max_pool3d_with_indices"]


def _window_starts(sample, size, out, pool, dtype):
    """PyTorch's generate_intervals, in the input's floating type."""
    starts = np.zeros(out, dtype=np.int64)
    if out > 1:
        alpha = dtype.type(size - pool) / dtype.type(out - 1)
        u = dtype.type(sample)
        for i in range(out - 1):
            starts[i] = int(dtype.type(i + u) * alpha) - int(u * alpha)
    if out > 0:
        starts[out - 1] = size - pool
    return starts


def _plane_maxima(plane, starts, pool):
    """Flat positions in ``plane`` (an array of D dims) of each window's maximum: the first
    largest element, or the last nan (PyTorch's ``val > max || isnan(val)`` scan)."""
    spatial = plane.shape
    d = len(spatial)
    # every window's elements' positions, (out_1, ..., out_D, k_1 * ... * k_D), in scan order
    grids = np.meshgrid(*[np.arange(k) for k in pool], indexing="ij")
    offsets = np.zeros(grids[0].shape, dtype=np.int64) if d else np.zeros((), np.int64)
    corner = np.zeros([len(s) for s in starts], dtype=np.int64)
    step = 1
    for k in range(d - 1, -1, -1):
        offsets = offsets + grids[k] * step
        shape = [1] * d
        shape[k] = len(starts[k])
        corner = corner + starts[k].reshape(shape) * step
        step *= spatial[k]
    positions = corner[..., None] + offsets.reshape(-1)
    values = plane.reshape(-1)[positions]
    nan = np.isnan(values)
    if values.shape[-1] == 0:       # an empty window: PyTorch keeps its first position
        return corner
    last_nan = values.shape[-1] - 1 - np.argmax(nan[..., ::-1], axis=-1)
    first_max = np.argmax(np.where(nan, -np.inf, values), axis=-1)
    # (a window of -inf only: the scan never replaces its start, the first element)
    pick = np.where(nan.any(axis=-1), last_nan, first_max)
    return np.take_along_axis(positions, pick[..., None], axis=-1)[..., 0]


def _fractional_pool(input, dims, kernel_size, output_size, samples, fname):  # noqa: A002
    """The pooled values and indices of ``input`` (``dims`` spatial dims), PyTorch's checks
    first (``fname`` names the op in its messages)."""
    pool = _sizes(kernel_size, dims)
    out = _sizes(output_size, dims)
    if len(pool) != dims:
        raise RuntimeError(f"fractional_max_pool{dims}d: kernel_size must either be a single "
                           "Int or tuple of Ints")
    if len(out) != dims:
        raise RuntimeError(f"fractional_max_pool{dims}d: output_size must either be a single "
                           "Int or tuple of Ints")
    nd = input.ndim
    if nd not in (dims + 1, dims + 2):
        raise RuntimeError(f"{fname}(): Expected {dims + 1}D or {dims + 2}D tensor, but got: "
                           f"{list(input.shape)}")
    for k in range(1, nd):
        if input.shape[k] <= 0:
            raise RuntimeError(f"{fname}(): Expected input to have non-zero size for "
                               f"non-batch dimensions, but got{list(input.shape)} with "
                               f"dimension {k} being empty.")
    spatial = tuple(input.shape[-dims:])
    names = ["height", "width"] if dims == 2 else ["time", "height", "width"]
    for name, k, o, n in zip(names, pool, out, spatial):
        # (PyTorch's 3-D kernel wants a window less, ``o + k - 1 < n``, its 2-D one ``<=``)
        if o + k - 1 > n or (dims == 3 and o + k - 1 == n):
            raise RuntimeError(f"{fname}(): pool {name} {k} too large relative to input "
                               f"{name} {n}")
    for o in out:
        if o < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {o}: "
                               f"{list(input.shape[:-dims]) + out}")
    batched = nd == dims + 2
    batch = input.shape[0] if batched else 1
    channels = input.shape[-dims - 1]
    if samples.ndim != 3:
        raise RuntimeError(f"Expect _random_samples to have 3 dimensions, got {samples.ndim}")
    if samples.shape[0] < batch:
        raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
    if samples.shape[1] != channels:
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    if samples.shape[2] != dims:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {dims}; got "
                           f"{samples.shape[2]}.")
    trace = _state.trace
    if trace is not None:
        # the windows' maxima are chosen from the values, on the side
        trace.opaque(f"fractional_max_pool{dims}d's choice of maxima")
    value = input._value.reshape((batch, channels) + spatial)
    drawn = samples._value
    # the samples of a plane name its dims W, H for 2-D pooling, T, H, W for 3-D
    order = [1, 0] if dims == 2 else [0, 1, 2]
    index = np.zeros((batch, channels) + tuple(out), dtype=np.int64)
    for b in range(batch):
        for c in range(channels):
            starts = [_window_starts(drawn[b, c, order[k]], spatial[k], out[k], pool[k],
                                     value.dtype) for k in range(dims)]
            index[b, c] = _plane_maxima(value[b, c], starts, pool)
    flat = input.reshape(batch, channels, -1)
    pooled = flat.gather(2, tg.tensor(index.reshape(batch, channels, -1)))
    shape = tuple(input.shape[:-dims]) + tuple(out)
    result = _named(pooled.reshape(shape), f"FractionalMaxPool{dims}DBackward0", input)
    return result, tg.tensor(index.reshape(shape))


def _sizes(v, dims):
    if isinstance(v, (tuple, list)):
        return [int(s) for s in v]
    return [int(v)] * dims


def _output_size(input, dims, output_size, output_ratio, fname):  # noqa: A002
    """PyTorch's Python wrapper's choice of the output size."""
    if output_size is None and output_ratio is None:
        raise ValueError(f"{fname} requires specifying either an output_size or an "
                         "output_ratio")
    if output_size is None:
        if dims == 2 and len(output_ratio) > 2:
            raise ValueError("fractional_max_pool2d requires output_ratio to either be a "
                             "single Int or tuple of Ints.")
        ratio = output_ratio if isinstance(output_ratio, (tuple, list)) else \
            (output_ratio,) * dims
        output_size = [int(input.size(-dims + k) * ratio[k]) for k in range(dims)]
    return output_size


def _samples(input, dims, samples):  # noqa: A002
    if samples is None:
        batch = 1 if input.dim() == dims + 1 else input.size(0)
        samples = tg.rand(batch, input.size(-dims - 1), dims, dtype=input.dtype)
    return samples


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None,  # noqa: A002
                                       output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """Fractional max pooling of ``(N, C, H, W)`` or ``(C, H, W)`` into ``output_size`` (or
    ``output_ratio`` of the input's size) windows of ``kernel_size``; returns the values and
    each maximum's flat position in its ``(H, W)`` plane.

    Example:
        >>> x = tg.arange(16.0).reshape(1, 1, 4, 4)
        >>> F.fractional_max_pool2d_with_indices(x, 2, output_size=2,
        ...                                      _random_samples=tg.zeros(1, 1, 2))[1]
        tensor([[[[ 5,  7],
                  [13, 15]]]])
    """
    output_size = _output_size(input, 2, output_size, output_ratio, "fractional_max_pool2d")
    samples = _samples(input, 2, _random_samples)
    return _fractional_pool(input, 2, kernel_size, output_size, samples,
                            "fractional_max_pool2d")


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,  # noqa: A002
                          return_indices=False, _random_samples=None):
    """``fractional_max_pool2d_with_indices``'s values (and indices if ``return_indices``).

    Example:
        >>> x = tg.arange(16.0).reshape(1, 1, 4, 4)
        >>> F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=tg.zeros(1, 1, 2))
        tensor([[[[ 5.,  7.],
                  [13., 15.]]]])
    """
    result = fractional_max_pool2d_with_indices(input, kernel_size, output_size, output_ratio,
                                                return_indices, _random_samples)
    return result if return_indices else result[0]


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None,  # noqa: A002
                                       output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """Fractional max pooling of ``(N, C, T, H, W)`` or ``(C, T, H, W)``; returns the values
    and each maximum's flat position in its ``(T, H, W)`` volume.

    Example:
        >>> x = tg.arange(8.0).reshape(1, 1, 2, 2, 2)
        >>> F.fractional_max_pool3d_with_indices(x, 1, output_size=1,
        ...                                      _random_samples=tg.zeros(1, 1, 3))[1]
        tensor([[[[[7]]]]])
    """
    output_size = _output_size(input, 3, output_size, output_ratio, "fractional_max_pool3d")
    samples = _samples(input, 3, _random_samples)
    return _fractional_pool(input, 3, kernel_size, output_size, samples,
                            "fractional_max_pool3d_out")


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,  # noqa: A002
                          return_indices=False, _random_samples=None):
    """``fractional_max_pool3d_with_indices``'s values (and indices if ``return_indices``).

    Example:
        >>> x = tg.arange(8.0).reshape(1, 1, 2, 2, 2)
        >>> F.fractional_max_pool3d(x, 1, output_size=1, _random_samples=tg.zeros(1, 1, 3))
        tensor([[[[[7.]]]]])
    """
    result = fractional_max_pool3d_with_indices(input, kernel_size, output_size, output_ratio,
                                                return_indices, _random_samples)
    return result if return_indices else result[0]
