"""``tapegrad.cpu``: what PyTorch's ``torch.cpu`` answers about the CPU, and its deprecated
``amp`` spellings (``tapegrad.cpu.amp.autocast``, ``GradScaler``)."""


def is_available():
    """Whether the CPU can be used: always True.

    Example:
        >>> tg.cpu.is_available()
        True
    """
    return True


def device_count():
    """The number of CPU devices: 1, as in PyTorch.

    Example:
        >>> tg.cpu.device_count()
        1
    """
    return 1


__all__ = ["is_available", "device_count"]

from . import amp  # noqa: E402,F401
from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals(), ("amp",))
