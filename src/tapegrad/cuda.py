"""``tapegrad.cuda``: what a program asks before choosing a device, answered for a library
that runs on the CPU only (``device = 'cuda' if tapegrad.cuda.is_available() else 'cpu'``)."""


def is_available():
    return False


def device_count():
    return 0


def manual_seed(seed):
    """Nothing to seed: there is no CUDA generator (PyTorch ignores it without CUDA too)."""


def manual_seed_all(seed):
    """Nothing to seed: there is no CUDA generator (PyTorch ignores it without CUDA too)."""


__all__ = ["is_available", "device_count", "manual_seed", "manual_seed_all"]

from ._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
