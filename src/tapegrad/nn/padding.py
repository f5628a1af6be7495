"""Padding layers as in ``torch.nn``: constant (and zero), reflection, replication and
circular padding of the last 1, 2 or 3 dimensions, each a thin holder of ``F.pad``'s
arguments with PyTorch's reprs."""
from . import functional as F
from .modules import Module

__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ReflectionPad1d",
           "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d", "CircularPad1d",
           "CircularPad2d", "ZeroPad3d", "ReflectionPad3d", "ReplicationPad3d", "CircularPad3d"]


def _amounts(padding, dims):
    """PyTorch's ``_ntuple(2 * dims)``: one int for every side, else the sequence as given
    (its length is F.pad's to check, as in PyTorch)."""
    if isinstance(padding, int):
        return (padding,) * (2 * dims)
    return tuple(padding)


class _ConstantPadNd(Module):
    _dims = 0

    def __init__(self, padding, value):
        super().__init__()
        self.padding = _amounts(padding, self._dims)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last dimension with ``value``: ``padding`` is one int for both sides or
    ``(left, right)``; negative amounts crop.

    Shape: ``(C, W)`` or ``(N, C, W)`` -> ``(..., W + left + right)``.

    Example:
        >>> nn.ConstantPad1d((1, 2), 9.0)(tg.tensor([[1.0, 2.0]]))
        tensor([[9., 1., 2., 9., 9.]])
    """
    _dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pads the last two dimensions with ``value``: ``padding`` is one int or
    ``(left, right, top, bottom)``.

    Shape: ``(C, H, W)`` or ``(N, C, H, W)`` -> ``(..., H + top + bottom, W + left + right)``.

    Example:
        >>> nn.ConstantPad2d(1, 0.5)(tg.ones(1, 1, 1))
        tensor([[[0.5000, 0.5000, 0.5000],
                 [0.5000, 1.0000, 0.5000],
                 [0.5000, 0.5000, 0.5000]]])
    """
    _dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pads the last three dimensions with ``value``: ``padding`` is one int or
    ``(left, right, top, bottom, front, back)``.

    Shape: ``(C, D, H, W)`` or ``(N, C, D, H, W)``, each padded dimension grown.

    Example:
        >>> nn.ConstantPad3d((1, 0, 0, 0, 0, 2), 0.0)(tg.ones(1, 1, 1, 1)).shape
        tapegrad.Size([1, 3, 1, 2])
    """
    _dims = 3


class ZeroPad1d(ConstantPad1d):
    """Pads the last dimension with zeros: ``padding`` is one int or ``(left, right)``.

    Example:
        >>> nn.ZeroPad1d((2, 0))(tg.tensor([[1.0, 2.0]]))
        tensor([[0., 0., 1., 2.]])
    """

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pads the last three dimensions with zeros: ``padding`` is one int or
    ``(left, right, top, bottom, front, back)``.

    Example:
        >>> nn.ZeroPad3d((1, 0, 0, 0, 0, 2))(tg.ones(1, 1, 1, 1)).shape
        tapegrad.Size([1, 3, 1, 2])
    """

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class _ModePadNd(Module):
    _dims = 0
    _mode = ""

    def __init__(self, padding):
        super().__init__()
        self.padding = _amounts(padding, self._dims)

    def forward(self, input):
        if self._mode == "circular" and input.dim() not in (self._dims + 1, self._dims + 2):
            # (PyTorch's circular pad layers check this themselves, with their own text)
            raise ValueError(f"expected {self._dims + 1}D or {self._dims + 2}D input (got "
                             f"{input.dim()}D input)")
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class ReflectionPad1d(_ModePadNd):
    """Pads the last dimension with its mirror image, the edge not repeated: ``padding``
    is one int or ``(left, right)``, each less than the dimension's size.

    Example:
        >>> nn.ReflectionPad1d(2)(tg.tensor([[1.0, 2.0, 3.0]]))
        tensor([[3., 2., 1., 2., 3., 2., 1.]])
    """
    _dims, _mode = 1, "reflect"


class ReflectionPad2d(_ModePadNd):
    """Pads the last two dimensions with their mirror images: ``padding`` is one int or
    ``(left, right, top, bottom)``.

    Example:
        >>> nn.ReflectionPad2d((1, 0, 0, 1))(tg.tensor([[[1.0, 2.0], [3.0, 4.0]]]))
        tensor([[[2., 1., 2.],
                 [4., 3., 4.],
                 [2., 1., 2.]]])
    """
    _dims, _mode = 2, "reflect"


class ReflectionPad3d(_ModePadNd):
    """Pads the last three dimensions with their mirror images: ``padding`` is one int or
    ``(left, right, top, bottom, front, back)``, each less than its dimension's size.

    Example:
        >>> nn.ReflectionPad3d((1, 0, 0, 0, 0, 1))(tg.arange(4.0).reshape(1, 2, 1, 2))
        tensor([[[[1., 0., 1.]],
        <BLANKLINE>
                 [[3., 2., 3.]],
        <BLANKLINE>
                 [[1., 0., 1.]]]])
    """
    _dims, _mode = 3, "reflect"


class ReplicationPad1d(_ModePadNd):
    """Pads the last dimension by repeating its edge values: ``padding`` is one int or
    ``(left, right)``.

    Example:
        >>> nn.ReplicationPad1d((1, 2))(tg.tensor([[1.0, 2.0]]))
        tensor([[1., 1., 2., 2., 2.]])
    """
    _dims, _mode = 1, "replicate"


class ReplicationPad2d(_ModePadNd):
    """Pads the last two dimensions by repeating their edge values: ``padding`` is one int
    or ``(left, right, top, bottom)``.

    Example:
        >>> nn.ReplicationPad2d(1)(tg.tensor([[[1.0, 2.0]]]))
        tensor([[[1., 1., 2., 2.],
                 [1., 1., 2., 2.],
                 [1., 1., 2., 2.]]])
    """
    _dims, _mode = 2, "replicate"


class ReplicationPad3d(_ModePadNd):
    """Pads the last three dimensions by repeating their edge values: ``padding`` is one
    int or ``(left, right, top, bottom, front, back)``.

    Example:
        >>> nn.ReplicationPad3d((0, 1, 0, 0, 1, 0))(tg.arange(4.0).reshape(1, 2, 1, 2))
        tensor([[[[0., 1., 1.]],
        <BLANKLINE>
                 [[0., 1., 1.]],
        <BLANKLINE>
                 [[2., 3., 3.]]]])
    """
    _dims, _mode = 3, "replicate"


class CircularPad1d(_ModePadNd):
    """Pads the last dimension by wrapping around: ``padding`` is one int or
    ``(left, right)``, neither more than the dimension's size.

    Example:
        >>> nn.CircularPad1d((1, 2))(tg.tensor([[1.0, 2.0, 3.0]]))
        tensor([[3., 1., 2., 3., 1., 2.]])
    """
    _dims, _mode = 1, "circular"


class CircularPad2d(_ModePadNd):
    """Pads the last two dimensions by wrapping around: ``padding`` is one int or
    ``(left, right, top, bottom)``.

    Example:
        >>> nn.CircularPad2d((0, 1, 1, 0))(tg.tensor([[[1.0, 2.0], [3.0, 4.0]]]))
        tensor([[[3., 4., 3.],
                 [1., 2., 1.],
                 [3., 4., 3.]]])
    """
    _dims, _mode = 2, "circular"


class CircularPad3d(_ModePadNd):
    """Pads the last three dimensions by wrapping around: ``padding`` is one int or
    ``(left, right, top, bottom, front, back)``, none more than its dimension's size;
    input ``(C, D, H, W)`` or ``(N, C, D, H, W)``.

    Example:
        >>> nn.CircularPad3d((1, 0, 0, 0, 0, 1))(tg.arange(4.0).reshape(1, 2, 1, 2))
        tensor([[[[1., 0., 1.]],
        <BLANKLINE>
                 [[3., 2., 3.]],
        <BLANKLINE>
                 [[1., 0., 1.]]]])
    """
    _dims, _mode = 3, "circular"


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
