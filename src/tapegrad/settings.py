"""Process-wide settings that PyTorch programs set at their start: the float32 matrix-product
precision, the default device, the inter-op thread count and "warn always".

tapegrad computes in float64 on the CPU, so none of them changes a value; each is kept and
read back as PyTorch keeps it, with PyTorch's checks, so that a program which sets one runs.
"""
import math

from . import _device

__all__ = ["set_float32_matmul_precision", "get_float32_matmul_precision",
           "set_default_device", "get_default_device", "set_num_interop_threads",
           "get_num_interop_threads", "set_warn_always", "is_warn_always_enabled"]

# PyTorch's float constants under its names (torch.pi, ...), and NumPy's None-axis spelling
pi, e, inf, nan, newaxis = math.pi, math.e, math.inf, math.nan, None

_PRECISIONS = ("highest", "high", "medium")
_settings = {"precision": "highest", "device": None, "interop": None, "warn_always": False}


def set_float32_matmul_precision(precision):
    """Keep ``precision`` ('highest', 'high' or 'medium'), which PyTorch uses for float32
    matrix products; tapegrad's are float64, which the setting does not touch.  Another string
    warns and changes nothing, as in PyTorch.

    Example:
        >>> tg.set_float32_matmul_precision("high"); tg.get_float32_matmul_precision()
        'high'
        >>> tg.set_float32_matmul_precision("highest")
    """
    import warnings
    if not isinstance(precision, str):
        raise RuntimeError("set_float32_matmul_precision expects a str, but got "
                           f"{type(precision).__name__}")
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
                      "setFloat32MatmulPrecision call has no effect.", UserWarning, stacklevel=2)
        return
    _settings["precision"] = precision


def get_float32_matmul_precision():
    """The precision ``set_float32_matmul_precision`` last kept ('highest' at the start).

    Example:
        >>> tg.get_float32_matmul_precision() in ("highest", "high", "medium")
        True
    """
    return _settings["precision"]


def set_default_device(device):
    """The device new tensors are made on when none is given: the CPU (or None, the same),
    the only device tapegrad has; any other raises, as the first tensor made there would.

    Example:
        >>> tg.set_default_device("cpu"); tg.get_default_device()
        device(type='cpu')
        >>> tg.set_default_device(None)
    """
    _settings["device"] = None if device is None else _device.check(device)


def get_default_device():
    """The device new tensors are made on: ``device(type='cpu')``.

    Example:
        >>> tg.get_default_device()
        device(type='cpu')
    """
    return _settings["device"] or _device.CPU


def set_num_interop_threads(num):
    """Keep the number of inter-op threads PyTorch would use (a positive integer), once per
    process as PyTorch allows it; tapegrad runs one op after the other, so the number is only
    read back (``get_num_interop_threads``).

    Example:
        >>> tg.get_num_interop_threads() >= 1
        True
    """
    if isinstance(num, bool) or not isinstance(num, int):
        raise RuntimeError(f"set_num_interop_threads expects an int, but got "
                           f"{type(num).__name__}")
    if num <= 0:
        raise RuntimeError("set_num_interop_threads expects a positive integer")
    if _settings["interop"] is not None:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work "
                           "has started or set_num_interop_threads called")
    _settings["interop"] = num


def get_num_interop_threads():
    """What ``set_num_interop_threads`` kept, else the number of CPUs this process may use.

    Example:
        >>> tg.get_num_interop_threads() >= 1
        True
    """
    if _settings["interop"] is not None:
        return _settings["interop"]
    import os
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # (not on every platform)
        return os.cpu_count() or 1


def set_warn_always(b):
    """Whether warnings PyTorch gives once per process are given every time; kept and read
    back (``is_warn_always_enabled``).

    Example:
        >>> tg.set_warn_always(False); tg.is_warn_always_enabled()
        False
    """
    _settings["warn_always"] = bool(b)


def is_warn_always_enabled():
    """What ``set_warn_always`` kept (False at the start).

    Example:
        >>> tg.is_warn_always_enabled()
        False
    """
    return _settings["warn_always"]
