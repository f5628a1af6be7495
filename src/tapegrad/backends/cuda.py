"""``tapegrad.backends.cuda``, as ``torch.backends.cuda`` on a CPU-only build: ``matmul``'s
precision flags (``allow_tf32``, ...) start at PyTorch's values, can be set, and change nothing
in tapegrad (its matmuls are float64 on the CPU)."""

__all__ = ["is_built", "matmul"]


class _MatmulFlags:
    """``tapegrad.backends.cuda.matmul``: the cuBLAS precision switches, settable attributes
    that change nothing in tapegrad.

    Example:
        >>> tg.backends.cuda.matmul.allow_tf32
        False
    """

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    def __repr__(self):
        return "<tapegrad.backends.cuda.matmul flags (no effect: no CUDA)>"


matmul = _MatmulFlags()


def is_built():
    """Whether tapegrad was built with CUDA: always False, as a CPU-only PyTorch build.

    Example:
        >>> tg.backends.cuda.is_built()
        False
    """
    return False


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
