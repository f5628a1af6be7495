"""``tapegrad.backends.cudnn``, as ``torch.backends.cudnn`` on a CPU-only build: the flags
(``enabled``, ``benchmark``, ``deterministic``, ``allow_tf32``, ``benchmark_limit``) start at
PyTorch's values, can be set, and change nothing in tapegrad (there is no cuDNN)."""

__all__ = ["allow_tf32", "benchmark", "benchmark_limit", "deterministic", "enabled",
           "is_available", "version"]

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True
benchmark_limit = None   # PyTorch reads None without cuDNN


def is_available():
    """Whether cuDNN can be used: always False, as on a CPU-only PyTorch build.

    Example:
        >>> tg.backends.cudnn.is_available()
        False
    """
    return False


def version():
    """cuDNN's version: None, as PyTorch answers without cuDNN.

    Example:
        >>> tg.backends.cudnn.version() is None
        True
    """
    return None


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
