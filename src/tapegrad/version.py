"""What ``torch.version`` tells a program about its build: tapegrad's version, and no CUDA,
ROCm or XPU (tapegrad runs on the CPU only).

Example:
    >>> tg.version.cuda is None, tg.version.__version__ == tg.__version__
    (True, True)
"""
__version__ = "0.1.0"   # (tapegrad.__version__ is this one)
cuda = None
hip = None
rocm = None
xpu = None
debug = False
git_version = "Unknown"
