"""``tapegrad.backends.opt_einsum``, as ``torch.backends.opt_einsum``: whether the optional
``opt_einsum`` package is installed, and the switches a program sets (``enabled``,
``strategy``).  PyTorch asks it for a contraction path of every einsum of three or more
operands, so its argument errors (a label whose sizes disagree, a subscript of the wrong
length) are the ones PyTorch raises there; tapegrad's einsum raises the same where it is
installed and enabled (it contracts left to right either way)."""

__all__ = ["enabled", "get_opt_einsum", "is_available", "strategy"]

try:
    import opt_einsum as _opt_einsum
except ImportError:     # an optional package: PyTorch's own checks then
    _opt_einsum = None

enabled = _opt_einsum is not None
strategy = "auto" if _opt_einsum is not None else None


def is_available():
    """Whether the ``opt_einsum`` package could be imported.

    Example:
        >>> tg.backends.opt_einsum.is_available() == (tg.backends.opt_einsum.get_opt_einsum()
        ...                                           is not None)
        True
    """
    return _opt_einsum is not None


def get_opt_einsum():
    """The ``opt_einsum`` package, or None where it is not installed.

    Example:
        >>> tg.backends.opt_einsum.get_opt_einsum() is None or hasattr(
        ...     tg.backends.opt_einsum.get_opt_einsum(), "contract_path")
        True
    """
    return _opt_einsum


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
