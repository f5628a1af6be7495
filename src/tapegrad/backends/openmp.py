"""``tapegrad.backends.openmp``, as ``torch.backends.openmp``."""

__all__ = ["is_available"]


def is_available():
    """Whether tapegrad uses OpenMP itself: False (its threads are Numba's and NumPy's;
    PyTorch's CPU build says True).

    Example:
        >>> tg.backends.openmp.is_available()
        False
    """
    return False


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
