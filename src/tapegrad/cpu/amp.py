"""``tapegrad.cpu.amp``: PyTorch's deprecated CPU spellings of ``tapegrad.amp``'s names.

Each warns as PyTorch's does (a ``FutureWarning`` naming the ``tapegrad.amp`` form) and then
is that form for the ``'cpu'`` device.
"""
import warnings

from .._dtype import bfloat16
from ..amp import autocast_mode as _autocast_mode
from ..amp import grad_scaler as _grad_scaler

__all__ = ["autocast", "GradScaler"]


class autocast(_autocast_mode.autocast):
    """Deprecated: ``tapegrad.amp.autocast('cpu', ...)`` after a ``FutureWarning``, as in
    PyTorch.  Values are unchanged inside it (see ``tapegrad.autocast``).

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     with tg.cpu.amp.autocast():
        ...         on = tg.is_autocast_enabled("cpu")
        >>> on
        True
    """

    def __init__(self, enabled=True, dtype=bfloat16, cache_enabled=True):
        warnings.warn("`tapegrad.cpu.amp.autocast(args...)` is deprecated. Please use "
                      "`tapegrad.amp.autocast('cpu', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(_grad_scaler._DeprecatedDeviceGradScaler):
    """Deprecated: ``tapegrad.amp.GradScaler('cpu', ...)`` after a ``FutureWarning``, as in
    PyTorch; it scales as that one does.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     scaler = tg.cpu.amp.GradScaler(init_scale=4.0)
        >>> scaler.scale(tg.tensor(1.5))
        tensor(6.)
    """

    _deprecated_device = "cpu"


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
