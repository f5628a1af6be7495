"""``tapegrad.amp``: PyTorch's automatic mixed precision names, ``autocast`` and
``GradScaler``.

tapegrad computes in float64 only.  ``autocast`` keeps PyTorch's state and checks and changes
no value (PyTorch's autocast leaves float64 tensors as they are); ``GradScaler`` scales the
loss and unscales the gradients with PyTorch's numbers (see each one's docstring).
"""
from .autocast_mode import (autocast, custom_bwd, custom_fwd, is_autocast_available)
from .grad_scaler import GradScaler
from . import autocast_mode, grad_scaler  # noqa: F401 - torch.amp.grad_scaler.GradScaler

__all__ = ["autocast", "custom_bwd", "custom_fwd", "is_autocast_available", "GradScaler"]

from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals(), ("autocast_mode", "grad_scaler"))
