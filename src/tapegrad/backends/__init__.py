"""``tapegrad.backends``, as ``torch.backends``: the switches a PyTorch program sets before
training (``tapegrad.backends.cudnn.deterministic = True``, ``.benchmark = False``, ...).

They are readable and settable, start at a CPU-only PyTorch build's values, and change nothing
in tapegrad: there is no cuDNN, CUDA, MPS or oneDNN backend to configure, and tapegrad's float64
kernels are deterministic either way."""
from . import cuda, cudnn, mkl, mkldnn, mps, openmp, opt_einsum

__all__ = ["cuda", "cudnn", "mkl", "mkldnn", "mps", "openmp", "opt_einsum"]


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
