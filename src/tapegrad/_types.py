"""The type aliases of PyTorch's ``torch.types``, which typed programs import for their
annotations (``from torch.types import Number, _size, Device``), in tapegrad's classes.
Registered as ``tapegrad.types`` (``_module_paths``); named privately here so that no
module of the package shadows the standard library's ``types``."""
import os
from collections.abc import Sequence
from typing import IO, Optional, Union

from ._device import device as _device_class
from ._device import layout as _layout_class
from ._dtype import dtype as _dtype_class
from .tensor import Size, Tensor

__all__ = ["Number", "Device", "FileLike"]

_int = int
_float = float
_bool = bool
_complex = complex
_str = str
_bytes = bytes
_dtype = _dtype_class
_device = _device_class
_layout = _layout_class
_size = Size | list[int] | tuple[int, ...]
_symsize = Size | Sequence[int]     # (no symbolic sizes here: a size is of ints)

Number = int | float | bool
_Number = (int, float, bool)       # (for isinstance, as PyTorch's)
# a device as the functions that take one accept it: a device, its name, an index, or None
Device = _device_class | str | int | None
FileLike = Union[str, os.PathLike[str], IO[bytes]]

_TensorOrTensors = Tensor | Sequence[Tensor]
_TensorOrOptionalTensors = Tensor | Sequence[Optional[Tensor]]
