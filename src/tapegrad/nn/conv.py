"""Convolution and pooling layers as in ``torch.nn``: ``Conv1d``, ``Conv2d``, their transposes,
their 1-d and 2-d (and adaptive) poolings, with PyTorch's parameters, initialisation and reprs."""
import math

import tapegrad as tg

from . import functional as F
from . import init
from .modules import Module, Parameter

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d",
           "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "MaxPool3d",
           "AvgPool3d", "AdaptiveMaxPool1d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
           "LPPool1d", "LPPool2d", "LPPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool3d",
           "FractionalMaxPool2d", "FractionalMaxPool3d"]


def _tuple(value, n):
    return (value,) * n if isinstance(value, int) else tuple(value)


class _ConvNd(Module):
    _dims = 0
    _function = None
    _transposed = False   # (a transposed one's weight is (in, out / groups, *kernel))

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        n = self._dims
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in _tuple(stride, n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode != "zeros":
            raise NotImplementedError("only padding_mode='zeros' is supported")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _tuple(kernel_size, n)
        self.stride = _tuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _tuple(padding, n)
        self.dilation = _tuple(dilation, n)
        self.transposed = self._transposed
        self.output_padding = (0,) * n
        self.groups = groups
        self.padding_mode = padding_mode
        channels = (in_channels, out_channels // groups) if self._transposed else \
            (out_channels, in_channels // groups)
        self.weight = Parameter(tg.empty(*channels, *self.kernel_size, dtype=dtype))
        if bias:
            self.bias = Parameter(tg.empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        # PyTorch's: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for both, fan_in = in/groups * taps
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return type(self)._function(input, self.weight, self.bias, self.stride, self.padding,
                                    self.dilation, self.groups)

    def extra_repr(self):
        n = self._dims
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0,) * n:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            text += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        return text


class Conv1d(_ConvNd):
    """1-d convolution layer: ``F.conv1d`` with a learnt weight
    ``(out_channels, in_channels / groups, kernel_size)`` and bias, started as PyTorch does.

    Shape: ``(N, in_channels, L)`` -> ``(N, out_channels, L_out)``.

    Example:
        >>> conv = nn.Conv1d(2, 3, 3, padding=1)
        >>> conv
        Conv1d(2, 3, kernel_size=(3,), stride=(1,), padding=(1,))
        >>> conv(tg.ones(4, 2, 5)).shape
        tapegrad.Size([4, 3, 5])
    """
    _dims = 1
    _function = F.conv1d


class Conv2d(_ConvNd):
    """2-d convolution layer: ``F.conv2d`` with a learnt weight
    ``(out_channels, in_channels / groups, kH, kW)`` and bias, started as PyTorch does.

    Shape: ``(N, in_channels, H, W)`` -> ``(N, out_channels, H_out, W_out)``.

    Example:
        >>> conv = nn.Conv2d(3, 8, 3, stride=2)
        >>> conv
        Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2))
        >>> conv(tg.ones(1, 3, 7, 7)).shape
        tapegrad.Size([1, 8, 3, 3])
    """
    _dims = 2
    _function = F.conv2d


class Conv3d(_ConvNd):
    """3-d convolution layer: ``F.conv3d`` with a learnt weight
    ``(out_channels, in_channels / groups, kD, kH, kW)`` and bias, started as PyTorch does.

    Shape: ``(N, in_channels, D, H, W)`` -> ``(N, out_channels, D_out, H_out, W_out)``.

    Example:
        >>> conv = nn.Conv3d(2, 4, 3, padding=1)
        >>> conv
        Conv3d(2, 4, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=(1, 1, 1))
        >>> conv(tg.ones(1, 2, 4, 4, 4)).shape
        tapegrad.Size([1, 4, 4, 4, 4])
    """
    _dims = 3
    _function = F.conv3d


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f'{type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype)
        self.output_padding = _tuple(output_padding, self._dims)

    def _output_padding(self, input, output_size):
        """``output_padding``, or the one that gives ``output_size`` (its spatial sizes, or
        all of the output's), which must lie within what the stride leaves open."""
        n = self._dims
        if output_size is None:
            return self.output_padding
        leading = 2 if input.ndim == n + 2 else 1
        output_size = list(output_size)
        if len(output_size) == leading + n:
            output_size = output_size[leading:]
        if len(output_size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.ndim}D input, output_size must "
                             f"have {n} or {leading + n} elements (got {len(output_size)})")
        smallest = [(input.shape[leading + d] - 1) * self.stride[d] - 2 * self.padding[d]
                    + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(n)]
        largest = [low + s - 1 for low, s in zip(smallest, self.stride)]
        for size, low, high in zip(output_size, smallest, largest):
            if size < low or size > high:
                raise ValueError(
                    f"requested an output size of {output_size}, but valid sizes range from "
                    f"{smallest} to {largest} (for an input of {tg.Size(input.shape[2:])})")
        return tuple(size - low for size, low in zip(output_size, smallest))

    def forward(self, input, output_size=None):
        return type(self)._function(input, self.weight, self.bias, self.stride, self.padding,
                                    self._output_padding(input, output_size), self.groups,
                                    self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """1-d transposed convolution layer: ``F.conv_transpose1d`` with a learnt weight
    ``(in_channels, out_channels / groups, kernel_size)`` and bias, started as PyTorch does.

    Shape: ``(N, in_channels, L)`` -> ``(N, out_channels, L_out)``; ``forward(input,
    output_size)`` picks the ``output_padding`` that gives that size.

    Example:
        >>> up = nn.ConvTranspose1d(4, 2, 3, stride=2)
        >>> up
        ConvTranspose1d(4, 2, kernel_size=(3,), stride=(2,))
        >>> up(tg.ones(1, 4, 5)).shape
        tapegrad.Size([1, 2, 11])
    """
    _dims = 1
    _function = F.conv_transpose1d


class ConvTranspose2d(_ConvTransposeNd):
    """2-d transposed convolution layer: ``F.conv_transpose2d`` with a learnt weight
    ``(in_channels, out_channels / groups, kH, kW)`` and bias, started as PyTorch does: the
    upsampling layer of decoders and generators.

    Shape: ``(N, in_channels, H, W)`` -> ``(N, out_channels, H_out, W_out)``.

    Example:
        >>> up = nn.ConvTranspose2d(8, 3, 4, stride=2, padding=1)
        >>> up
        ConvTranspose2d(8, 3, kernel_size=(4, 4), stride=(2, 2), padding=(1, 1))
        >>> up(tg.ones(1, 8, 5, 5)).shape
        tapegrad.Size([1, 3, 10, 10])
        >>> up(tg.ones(1, 8, 5, 5), output_size=[11, 11]).shape
        tapegrad.Size([1, 3, 11, 11])
    """
    _dims = 2
    _function = F.conv_transpose2d


class ConvTranspose3d(_ConvTransposeNd):
    """3-d transposed convolution layer: ``F.conv_transpose3d`` with a learnt weight
    ``(in_channels, out_channels / groups, kD, kH, kW)`` and bias, started as PyTorch does.

    Shape: ``(N, in_channels, D, H, W)`` -> ``(N, out_channels, D_out, H_out, W_out)``.

    Example:
        >>> up = nn.ConvTranspose3d(4, 2, 2, stride=2)
        >>> up
        ConvTranspose3d(4, 2, kernel_size=(2, 2, 2), stride=(2, 2, 2))
        >>> up(tg.ones(1, 4, 3, 3, 3)).shape
        tapegrad.Size([1, 2, 6, 6, 6])
    """
    _dims = 3
    _function = F.conv_transpose3d


class MaxPool1d(Module):
    """The largest value of each window along the last dimension: ``F.max_pool1d``
    (``stride`` defaults to ``kernel_size``).

    Shape: ``(N, C, L)`` or ``(C, L)`` -> ``(..., L_out)``.

    Example:
        >>> pool = nn.MaxPool1d(2)
        >>> pool
        MaxPool1d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
        >>> pool(tg.tensor([[[1.0, 3.0, 2.0, 0.0]]]))
        tensor([[[3., 2.]]])
    """

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool2d(Module):
    """The largest value of each window: ``F.max_pool2d`` (``stride`` defaults to
    ``kernel_size``).

    Shape: ``(N, C, H, W)`` -> ``(N, C, H_out, W_out)``.

    Example:
        >>> pool = nn.MaxPool2d(2)
        >>> pool
        MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
        >>> pool(tg.ones(1, 1, 4, 4)).shape
        tapegrad.Size([1, 1, 2, 2])
    """

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """The mean of each window: ``F.avg_pool2d`` (``stride`` defaults to ``kernel_size``).

    Shape: ``(N, C, H, W)`` -> ``(N, C, H_out, W_out)``.

    Example:
        >>> nn.AvgPool2d(2)(tg.arange(16.0).reshape(1, 1, 4, 4))
        tensor([[[[ 2.5000,  4.5000],
                  [10.5000, 12.5000]]]])
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(Module):
    """The mean of each window along the last dimension: ``F.avg_pool1d`` (``stride``
    defaults to ``kernel_size``).

    Shape: ``(N, C, L)`` or ``(C, L)`` -> ``(..., L_out)``.

    Example:
        >>> pool = nn.AvgPool1d(2)
        >>> pool
        AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,))
        >>> pool(tg.tensor([[[1.0, 3.0, 2.0, 0.0]]]))
        tensor([[[2., 1.]]])
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        # PyTorch keeps these as 1-tuples (its repr shows them so)
        self.kernel_size = _tuple(kernel_size, 1)
        self.stride = _tuple(stride if stride is not None else kernel_size, 1)
        self.padding = _tuple(padding, 1)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool1d(Module):
    """Average pooling to a fixed ``output_size``: ``F.adaptive_avg_pool1d``.

    Shape: ``(N, C, L)`` -> ``(N, C, output_size)``.

    Example:
        >>> nn.AdaptiveAvgPool1d(2)(tg.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0]]]))
        tensor([[[2.0000, 4.0000]]])
    """

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return F.adaptive_avg_pool1d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(AdaptiveAvgPool1d):
    """Average pooling to a fixed ``output_size`` grid: ``F.adaptive_avg_pool2d``
    (``AdaptiveAvgPool2d(1)`` is a global average pool).

    Shape: ``(N, C, H, W)`` -> ``(N, C, *output_size)``.

    Example:
        >>> pool = nn.AdaptiveAvgPool2d((1, 1))
        >>> pool
        AdaptiveAvgPool2d(output_size=(1, 1))
        >>> pool(tg.ones(2, 3, 5, 7)).shape
        tapegrad.Size([2, 3, 1, 1])
    """

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)


class AdaptiveAvgPool3d(AdaptiveAvgPool1d):
    """Average pooling to a fixed ``output_size`` volume of windows: ``F.adaptive_avg_pool3d``.

    Shape: ``(N, C, D, H, W)`` or ``(C, D, H, W)`` -> ``(..., *output_size)``.

    Example:
        >>> nn.AdaptiveAvgPool3d((1, 2, None))(tg.ones(2, 3, 4, 5, 6)).shape
        tapegrad.Size([2, 3, 1, 2, 6])
    """

    def forward(self, input):
        return F.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool2d(Module):
    """Max pooling into a fixed ``output_size`` grid of windows: ``F.adaptive_max_pool2d``
    (an int for a square grid, ``None`` keeps a dimension's size; ``return_indices`` also
    returns the maxima's flat positions).

    Shape: ``(N, C, H, W)`` or ``(C, H, W)`` -> ``(..., *output_size)``.

    Example:
        >>> pool = nn.AdaptiveMaxPool2d((1, None))
        >>> pool
        AdaptiveMaxPool2d(output_size=(1, None))
        >>> pool(tg.tensor([[[1.0, 4.0], [3.0, 2.0]]]))
        tensor([[[3., 4.]]])
    """

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input):
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool3d(AdaptiveMaxPool2d):
    """Max pooling into a fixed ``output_size`` volume of windows: ``F.adaptive_max_pool3d``
    (``return_indices=True`` also returns each maximum's flat position in its volume).

    Shape: ``(N, C, D, H, W)`` or ``(C, D, H, W)`` -> ``(..., *output_size)``.

    Example:
        >>> nn.AdaptiveMaxPool3d((1, 2, None))(tg.ones(2, 3, 4, 5, 6)).shape
        tapegrad.Size([2, 3, 1, 2, 6])
    """

    def forward(self, input):
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class FractionalMaxPool2d(Module):
    """Fractional max pooling into ``output_size`` (or ``output_ratio`` of the input's size)
    windows of ``kernel_size``: ``F.fractional_max_pool2d``, with this module's
    ``_random_samples`` (a buffer) when given, fresh samples each call otherwise.

    Example:
        >>> pool = nn.FractionalMaxPool2d(2, output_size=2, _random_samples=tg.zeros(1, 1, 2))
        >>> pool(tg.arange(16.0).reshape(1, 1, 4, 4))
        tensor([[[[ 5.,  7.],
                  [13., 15.]]]])
    """
    _dims = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        d = self._dims
        self.kernel_size = _tuple(kernel_size, d)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = _tuple(output_size, d) if output_size is not None else None
        # (a ratio is a float, which _tuple does not repeat)
        self.output_ratio = (None if output_ratio is None else tuple(output_ratio)
                             if isinstance(output_ratio, (tuple, list)) else (output_ratio,) * d)
        if output_size is None and output_ratio is None:
            raise ValueError(f"FractionalMaxPool{d}d requires specifying either an output "
                             "size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        pool = F.fractional_max_pool2d if self._dims == 2 else F.fractional_max_pool3d
        return pool(input, self.kernel_size, self.output_size, self.output_ratio,
                    self.return_indices, _random_samples=self._random_samples)


class FractionalMaxPool3d(FractionalMaxPool2d):
    """Fractional max pooling of volumes: ``F.fractional_max_pool3d`` (see
    ``FractionalMaxPool2d``).

    Example:
        >>> pool = nn.FractionalMaxPool3d(1, output_size=1, _random_samples=tg.zeros(1, 1, 3))
        >>> pool(tg.arange(8.0).reshape(1, 1, 2, 2, 2))
        tensor([[[[[7.]]]]])
    """
    _dims = 3


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports


class MaxPool3d(MaxPool2d):
    """The largest value of each window of ``(N, C, D, H, W)`` or ``(C, D, H, W)``:
    ``F.max_pool3d`` (``stride`` defaults to ``kernel_size``).

    Example:
        >>> pool = nn.MaxPool3d(2)
        >>> pool
        MaxPool3d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
        >>> pool(tg.ones(1, 1, 4, 4, 4)).shape
        tapegrad.Size([1, 1, 2, 2, 2])
    """

    def forward(self, input):
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool3d(AvgPool2d):
    """The mean of each window of ``(N, C, D, H, W)`` or ``(C, D, H, W)``: ``F.avg_pool3d``
    (``stride`` defaults to ``kernel_size``).

    Example:
        >>> pool = nn.AvgPool3d(2)
        >>> pool
        AvgPool3d(kernel_size=2, stride=2, padding=0)
        >>> pool(tg.ones(1, 1, 2, 2, 2))
        tensor([[[[[1.]]]]])
    """

    def forward(self, input):
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AdaptiveMaxPool1d(AdaptiveMaxPool2d):
    """Max pooling into ``output_size`` windows: ``F.adaptive_max_pool1d``.

    Example:
        >>> nn.AdaptiveMaxPool1d(2)(tg.tensor([[[1.0, 3.0, 2.0, 0.0, 5.0]]]))
        tensor([[[3., 5.]]])
    """

    def forward(self, input):
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class MaxUnpool2d(Module):
    """The inverse of ``MaxPool2d(..., return_indices=True)``: ``F.max_unpool2d``
    (``output_size`` in the call picks among the sizes that pool to the input's).

    Example:
        >>> pool, unpool = nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)
        >>> unpool
        MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))
        >>> out, idx = pool(tg.arange(16.0).reshape(1, 1, 4, 4))
        >>> unpool(out, idx, output_size=(1, 1, 5, 5)).shape
        tapegrad.Size([1, 1, 5, 5])
    """
    _dims = 2

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        # PyTorch keeps these as tuples (its repr shows them so)
        self.kernel_size = _tuple(kernel_size, self._dims)
        self.stride = _tuple(stride if stride is not None else kernel_size, self._dims)
        self.padding = _tuple(padding, self._dims)

    def forward(self, input, indices, output_size=None):
        unpool = (F.max_unpool1d, F.max_unpool2d, F.max_unpool3d)[self._dims - 1]
        return unpool(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(MaxUnpool2d):
    """The inverse of ``MaxPool1d(..., return_indices=True)``: ``F.max_unpool1d``.

    Example:
        >>> pool, unpool = nn.MaxPool1d(2, return_indices=True), nn.MaxUnpool1d(2)
        >>> unpool(*pool(tg.tensor([[[1.0, 3.0, 2.0, 0.0]]])))
        tensor([[[0., 3., 2., 0.]]])
    """
    _dims = 1


class MaxUnpool3d(MaxUnpool2d):
    """The inverse of ``MaxPool3d(..., return_indices=True)``: ``F.max_unpool3d``.

    Example:
        >>> pool, unpool = nn.MaxPool3d(2, return_indices=True), nn.MaxUnpool3d(2)
        >>> unpool(*pool(tg.arange(8.0).reshape(1, 1, 2, 2, 2))).flatten()
        tensor([0., 0., 0., 0., 0., 0., 0., 7.])
    """
    _dims = 3


class LPPool2d(Module):
    """The ``norm_type``-norm of each window: ``F.lp_pool2d`` (``stride`` defaults to
    ``kernel_size``).

    Example:
        >>> pool = nn.LPPool2d(2, 2)
        >>> pool
        LPPool2d(norm_type=2, kernel_size=2, stride=None, ceil_mode=False)
        >>> pool(tg.tensor([[[[3.0, 4.0], [0.0, 0.0]]]]))
        tensor([[[[5.]]]])
    """
    _dims = 2

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input):
        lp_pool = (F.lp_pool1d, F.lp_pool2d, F.lp_pool3d)[self._dims - 1]
        return lp_pool(input, float(self.norm_type), self.kernel_size, self.stride,
                       self.ceil_mode)

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(LPPool2d):
    """The ``norm_type``-norm of each window along the last dimension: ``F.lp_pool1d``.

    Example:
        >>> nn.LPPool1d(2, 2)(tg.tensor([[[3.0, 4.0, 1.0, 0.0]]]))
        tensor([[[5., 1.]]])
    """
    _dims = 1


class LPPool3d(LPPool2d):
    """The ``norm_type``-norm of each window of ``(N, C, D, H, W)``: ``F.lp_pool3d``.

    Example:
        >>> nn.LPPool3d(2, 2)(tg.ones(1, 1, 2, 2, 2))
        tensor([[[[[2.8284]]]]])
    """
    _dims = 3
