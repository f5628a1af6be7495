"""``tapegrad.backends.mps``, as ``torch.backends.mps``: there is no Apple GPU backend."""

__all__ = ["is_available", "is_built"]


def is_available():
    """Whether the MPS device can be used: always False.

    Example:
        >>> tg.backends.mps.is_available()
        False
    """
    return False


def is_built():
    """Whether tapegrad was built with MPS: always False.

    Example:
        >>> tg.backends.mps.is_built()
        False
    """
    return False


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
