"""``tapegrad.cuda.amp``: PyTorch's deprecated CUDA spellings of ``tapegrad.amp``'s names.

Each warns as PyTorch's does (a ``FutureWarning`` naming the ``tapegrad.amp`` form) and then
is that form for the ``'cuda'`` device, which tapegrad does not have: a region or a scaler
made enabled warns that CUDA is not available and is disabled, as on a CPU-only PyTorch.
"""
import functools
import warnings

from .._dtype import float16
from ..amp import autocast_mode as _autocast_mode
from ..amp import grad_scaler as _grad_scaler
from ..amp.grad_scaler import OptState  # noqa: F401 - PyTorch's module has it too

__all__ = ["amp_definitely_not_available", "autocast", "custom_bwd", "custom_fwd",
           "GradScaler"]


def amp_definitely_not_available():
    """Whether CUDA mixed precision is certainly unavailable: always True in tapegrad.

    Example:
        >>> tg.cuda.amp.amp_definitely_not_available()
        True
    """
    return _autocast_mode._cuda_definitely_not_available()


class autocast(_autocast_mode.autocast):
    """Deprecated: ``tapegrad.amp.autocast('cuda', ...)`` after a ``FutureWarning``, as in
    PyTorch.  ``enabled=True`` (the default) then warns that CUDA is not available and the
    region is disabled; ``enabled=False`` only disables.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     with tg.cuda.amp.autocast(enabled=False) as region:
        ...         pass
        >>> region.device, region._enabled
        ('cuda', False)
    """

    def __init__(self, enabled=True, dtype=float16, cache_enabled=True):
        warnings.warn("`tapegrad.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`tapegrad.amp.autocast('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """Deprecated: ``tapegrad.amp.custom_fwd(..., device_type='cuda')`` after a
    ``FutureWarning``.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     f = tg.cuda.amp.custom_fwd(lambda ctx, x: x)
        >>> f.__name__
        '<lambda>'
    """
    warnings.warn("`tapegrad.cuda.amp.custom_fwd(args...)` is deprecated. Please use "
                  "`tapegrad.amp.custom_fwd(args..., device_type='cuda')` instead.",
                  FutureWarning, stacklevel=2)
    return functools.partial(_autocast_mode.custom_fwd, device_type="cuda")(
        fwd=fwd, cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """Deprecated: ``tapegrad.amp.custom_bwd(..., device_type='cuda')`` after a
    ``FutureWarning``.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     f = tg.cuda.amp.custom_bwd(lambda ctx, g: g)
        >>> f.__name__
        '<lambda>'
    """
    warnings.warn("`tapegrad.cuda.amp.custom_bwd(args...)` is deprecated. Please use "
                  "`tapegrad.amp.custom_bwd(args..., device_type='cuda')` instead.",
                  FutureWarning, stacklevel=2)
    return functools.partial(_autocast_mode.custom_bwd, device_type="cuda")(bwd)


class GradScaler(_grad_scaler._DeprecatedDeviceGradScaler):
    """Deprecated: ``tapegrad.amp.GradScaler('cuda', ...)`` after a ``FutureWarning``, as in
    PyTorch; enabled, it then warns that CUDA is not available and does nothing.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     scaler = tg.cuda.amp.GradScaler()
        >>> scaler.is_enabled(), scaler.get_scale()
        (False, 1.0)
    """

    _deprecated_device = "cuda"


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
