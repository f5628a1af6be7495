"""``tapegrad.backends.mkl``, as ``torch.backends.mkl``."""

__all__ = ["is_available"]


def is_available():
    """Whether tapegrad calls Intel MKL itself: False (NumPy's BLAS does the matmuls;
    PyTorch's CPU build says True).

    Example:
        >>> tg.backends.mkl.is_available()
        False
    """
    return False


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
