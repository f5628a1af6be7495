"""``tapegrad.backends.mkldnn``, as ``torch.backends.mkldnn``: ``enabled`` can be set and
changes nothing in tapegrad; ``is_available()`` says False, as tapegrad has no oneDNN kernels."""

__all__ = ["enabled", "is_available"]

enabled = True


def is_available():
    """Whether oneDNN (MKL-DNN) kernels are used: False in tapegrad (PyTorch's CPU build
    says True: it has them).

    Example:
        >>> tg.backends.mkldnn.is_available()
        False
    """
    return False


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
