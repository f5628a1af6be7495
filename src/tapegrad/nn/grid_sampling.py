"""``affine_grid`` and ``grid_sample``: spatial transformers' sampling, as PyTorch's CPU kernels
compute it (``nn.functional`` exports both).

Both are composed from recorded ops and shown as PyTorch's one node
(``AffineGridGeneratorBackward0``, ``GridSampler2DBackward0``).  ``grid_sample`` follows the
CPU kernel step for step so that its values are PyTorch's bits: the grid is unnormalized as
``(g + 1) * ((size - 1) / 2)`` (``align_corners``) or ``(g + 1) * (size / 2) - 0.5``, padded
(``border`` clips, ``reflection`` folds then clips), and the four neighbours' values are
weighted ``nw = s * e, ne = s * w, sw = n * e, se = n * w`` and added in that order.  Where
the kernel's compiler contracts a product and a sum into one fused multiply-add (the
unnormalization without ``align_corners``, the reflection's remainder, the weighted sum),
the value is computed with one rounding too (``fma_elementwise``), and the recorded ops
beside it give the gradient: ``value + (recorded - recorded.detach())``.

The padded coordinate's value is computed in NumPy exactly as the kernel computes it, and
enters the graph as ``c + (g - g.detach()) * m``: its value is ``c`` to the bit and its
derivative the kernel's multiplier ``m`` (the scaling, a reflection's sign, and zero where a
clip holds it at a border, borders included, as PyTorch's backward has it).
"""
import warnings

import numpy as np

import tapegrad as tg
from tapegrad import functional as _elementwise
from tapegrad._random_stream import fma_elementwise as _fma

__all__ = ["affine_grid", "grid_sample"]

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to "
                  "align_corners=False since 1.3.0. Please specify align_corners=True if the "
                  "old behavior is desired. See the documentation of grid_sample for details.")


# ---------------------------------------------------------------------------------------------
# affine_grid
# ---------------------------------------------------------------------------------------------
def _steps_from_minus_one(n, align_corners):
    """The normalized coordinates of n pixel centres, as PyTorch lays them out."""
    if n <= 1:
        return np.zeros(n)
    steps = tg.linspace(-1.0, 1.0, n).numpy()
    return steps if align_corners else steps * (n - 1) / n


def affine_grid(theta, size, align_corners=None):
    """The sampling grid of a batch of affine maps ``theta`` (``(N, 2, 3)`` for a 4-D
    ``size`` ``(N, C, H, W)``, ``(N, 3, 4)`` for a 5-D one): for each output pixel, where it
    samples the input in normalized coordinates, ``[x, y(, z), 1] @ theta^T``.  Shape
    ``(N, H, W, 2)`` or ``(N, D, H, W, 3)``; ``align_corners`` as for ``grid_sample``.

    Example:
        >>> theta = tg.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
        >>> F.affine_grid(theta, (1, 1, 2, 2), align_corners=True)[0, :, :, 0]
        tensor([[-1.,  1.],
                [-1.,  1.]])
    """
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = tuple(int(s) for s in size)
    shape = tuple(theta.shape)
    if len(size) == 4:
        if theta.dim() != 3 or shape[-2] != 2 or shape[-1] != 3:
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                             f"{size}. Got {theta.shape}.")
        spatial = size[-2:]
    elif len(size) == 5:
        if theta.dim() != 3 or shape[-2] != 3 or shape[-1] != 4:
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size "
                             f"{size}. Got {theta.shape}.")
        spatial = size[-3:]
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {size}.")
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size "
                      "grids when align_corners=True. This is not an intended use case of "
                      "affine_grid. See the documentation of affine_grid for details.",
                      stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    n = size[0]
    if shape[0] != n:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{n}, {shape[2]}] but got: [{shape[0]}, {shape[2]}].")
    # the base grid: x along the last spatial axis, then y (then z), then ones
    axes = [_steps_from_minus_one(s, align_corners) for s in reversed(spatial)]
    base = np.empty((n,) + tuple(spatial) + (len(spatial) + 1,))
    for k, steps in enumerate(axes):
        view_shape = [1] * len(spatial)
        view_shape[len(spatial) - 1 - k] = -1
        base[..., k] = steps.reshape(view_shape)
    base[..., -1] = 1.0
    points = int(np.prod(spatial))
    flat = tg.tensor(base.reshape(n, points, len(spatial) + 1))
    grid = tg.bmm(flat, theta.transpose(1, 2)).view(n, *spatial, len(spatial))
    return _elementwise.named_node(grid, "AffineGridGeneratorBackward0", theta)


# ---------------------------------------------------------------------------------------------
# grid_sample
# ---------------------------------------------------------------------------------------------
def _location(g, size, padding_mode, align_corners):
    """(the kernel's padded source coordinate, its derivative with respect to g), in NumPy."""
    if align_corners:
        scale = (size - 1) / 2
        x = (g + 1) * scale
    else:
        scale = size / 2
        x = _fma(g + 1, scale, -0.5)
    mult = np.full(x.shape, scale)
    if padding_mode == "reflection":
        low, period = (0.0, (size - 1) * 2.0) if align_corners else (-0.5, size * 2.0)
        if align_corners and size <= 1:
            x, mult = np.zeros_like(x), np.zeros_like(x)
        else:
            shifted = x - low
            folded = np.abs(shifted)
            extra = _fma(-np.trunc(folded / period), period, folded)
            other = period - extra
            flip = extra > other
            x = np.where(flip, other, extra) + low
            mult = mult * np.where(flip ^ (shifted < 0), -1.0, 1.0)
    if padding_mode in ("border", "reflection"):
        bounded = np.fmax(x, 0.0)           # (NaN clamps to 0, as the kernel's clamp does)
        inside = bounded != 0.0
        x = np.fmin(bounded, size - 1.0)
        inside &= x != size - 1.0          # a border holds the coordinate: no gradient there
        mult = np.where(inside, mult, 0.0)
    return x, mult


def _with_gradient_of(value, recorded, moved):
    """``value``'s bits, and the gradient of ``moved`` (which is ``value`` plus a recorded
    zero): where ``recorded`` is not finite its zero is not one, and ``value`` stands alone
    there (the kernel's value, with no gradient through that term)."""
    finite = np.isfinite(recorded.detach().numpy())
    if finite.all():
        return moved
    return tg.where(tg.tensor(finite), moved, tg.tensor(value))


def _tracked(g, value, mult):
    """A tensor of ``value``'s bits whose derivative with respect to ``g`` is ``mult``."""
    if not g.requires_grad:
        return tg.tensor(value)
    return _with_gradient_of(value, g, tg.tensor(value) + (g - g.detach()) * tg.tensor(mult))


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros",  # noqa: A002
                align_corners=None):
    """Samples ``input`` ``(N, C, H, W)`` at the normalized locations ``grid``
    ``(N, H_out, W_out, 2)`` (x, then y, in [-1, 1]; ``align_corners=True`` puts -1 and 1 at
    the corner pixels' centres, False at their outer edges), with ``mode`` ``"bilinear"`` or
    ``"nearest"`` and ``padding_mode`` ``"zeros"``, ``"border"`` or ``"reflection"`` for
    locations outside.  Gradients flow to ``input`` and (bilinear) to ``grid``.  ``bicubic``
    and 5-D input are not supported yet.

    Example:
        >>> image = tg.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
        >>> grid = tg.tensor([[[[0.0, 0.0]]]])       # the centre
        >>> F.grid_sample(image, grid, align_corners=False)
        tensor([[[[2.5000]]]])
    """
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    in_shape, g_shape = list(input.shape), list(grid.shape)
    if in_shape[:1] != g_shape[:1]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, "
                           f"but got input with sizes {in_shape} and grid with sizes {g_shape}")
    if not g_shape or g_shape[-1] != input.dim() - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.dim() - 2} in "
                           f"last dimension, but got grid with sizes {g_shape}")
    for d in range(2, input.dim()):
        if in_shape[d] <= 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial "
                               f"dimensions, but input has sizes {in_shape} with dimension {d} "
                               f"being empty")
    if input.dim() != 4 or grid.dim() != 4:
        if input.dim() == 5 and grid.dim() == 5:
            raise NotImplementedError("grid_sample of 5-D input (volumetric sampling) is not "
                                      "supported by tapegrad yet")
        raise RuntimeError(f"grid_sampler(): expected 4D input and grid with same number of "
                           f"dimensions, but got input with sizes {in_shape} and grid with "
                           f"sizes {g_shape}")
    if not input.is_floating_point():
        raise NotImplementedError(f"\"grid_sampler_2d_cpu_kernel_impl\" not implemented for "
                                  f"'{input.dtype.scalar_name}'")
    if mode == "bicubic":
        raise NotImplementedError("grid_sample(mode='bicubic') is not supported by tapegrad "
                                  "yet")
    n, c, h, w = in_shape
    ho, wo = g_shape[1], g_shape[2]
    gx, gy = grid[..., 0].reshape(n, 1, ho * wo), grid[..., 1].reshape(n, 1, ho * wo)
    x, mx = _location(gx.detach().numpy(), w, padding_mode, align_corners)
    y, my = _location(gy.detach().numpy(), h, padding_mode, align_corners)
    flat = input.reshape(n, c, h * w)
    bounded = padding_mode != "zeros"

    def read(iy, ix, inside):
        """input at integer (iy, ix) (N, 1, L), 0 where ``inside`` is False."""
        position = np.where(inside, iy * w + ix, 0).astype(np.int64)
        index = tg.tensor(np.broadcast_to(position, (n, c, position.shape[-1])).copy())
        values = tg.gather(flat, 2, index)
        return tg.where(tg.tensor(inside), values, 0.0)

    if mode == "nearest":
        ix, iy = np.rint(x), np.rint(y)
        inside = (ix > -1) & (ix < w) & (iy > -1) & (iy < h)
        out = read(iy, ix, inside)
        if grid.requires_grad:
            # PyTorch's grid gradient is zeros here: the grid takes part, with weight zero
            out = out + tg.where(tg.tensor(np.zeros((1, 1, 1), dtype=bool)), gx, 0.0)
    else:
        xt, yt = _tracked(gx, x, mx), _tracked(gy, y, my)
        x_w, y_n = np.floor(x), np.floor(y)
        we = xt - tg.tensor(x_w)           # distances to the west and north neighbours
        no = yt - tg.tensor(y_n)
        ea, so = 1 - we, 1 - no
        nw, ne, sw, se = so * ea, so * we, no * ea, no * we
        x_e, y_s = x_w + 1, y_n + 1
        w_in = True if bounded else (x_w > -1) & (x_w < w)
        n_in = True if bounded else (y_n > -1) & (y_n < h)
        e_in = (x_e < w) if bounded else (x_e > -1) & (x_e < w)
        s_in = (y_s < h) if bounded else (y_s > -1) & (y_s < h)
        everywhere = np.ones(x.shape, dtype=bool)
        corners = [(read(y_n, x_w, everywhere & w_in & n_in), nw),
                   (read(y_n, x_e, everywhere & e_in & n_in), ne),
                   (read(y_s, x_w, everywhere & w_in & s_in), sw),
                   (read(y_s, x_e, everywhere & e_in & s_in), se)]
        # the kernel's sum, as its compiler contracts it: fma(se_val, se, fma(sw_val, sw,
        # fma(ne_val, ne, nw_val * nw)))
        value = np.multiply(*(t.detach().numpy() for t in corners[0]))
        for v, wt in corners[1:]:
            value = _fma(v.detach().numpy(), wt.detach().numpy(), value)
        out = tg.tensor(value)
        if input.requires_grad or grid.requires_grad:
            recorded = sum((v * wt for v, wt in corners[1:]), corners[0][0] * corners[0][1])
            finite = np.isfinite(value)
            out = out + (recorded - recorded.detach())     # value's bits, recorded's gradient
            if not finite.all():
                # (an inf or NaN read: the recorded sum is non-finite there too, and carries
                # the gradient to the other corners as PyTorch's backward does)
                out = tg.where(tg.tensor(finite), out, recorded)
    out = out.reshape(n, c, ho, wo)
    return _elementwise.named_node(out, "GridSampler2DBackward0", input, grid)
