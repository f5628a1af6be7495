"""``tapegrad.cuda``: what a program asks before choosing a device, answered for a library
that runs on the CPU only (``device = 'cuda' if tapegrad.cuda.is_available() else 'cpu'``)."""


def is_available():
    """Whether CUDA can be used: always False, as on a CPU-only PyTorch build.

    Example:
        >>> tg.cuda.is_available()
        False
    """
    return False


def device_count():
    """The number of CUDA devices: always 0.

    Example:
        >>> tg.cuda.device_count()
        0
    """
    return 0


def manual_seed(seed):
    """Nothing to seed: there is no CUDA generator (PyTorch ignores it without CUDA too).

    Example:
        >>> tg.cuda.manual_seed(0)     # returns None and changes nothing
    """


def manual_seed_all(seed):
    """Nothing to seed: there is no CUDA generator (PyTorch ignores it without CUDA too).

    Example:
        >>> tg.cuda.manual_seed_all(0)
    """


__all__ = ["is_available", "device_count", "manual_seed", "manual_seed_all"]

from . import amp  # noqa: E402,F401 - tapegrad.cuda.amp.autocast, GradScaler (deprecated)
from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals(), ("amp",))   # tab completion offers __all__, not the imports
