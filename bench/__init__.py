"""tapegrad benchmark suite: workloads W1-W6 timed against peer libraries.

Run it with ``python -m bench`` (or ``python bench/run.py``) from the repository root;
see ``bench/README.md``. Nothing here imports NumPy at package import time, so the entry
point can pin thread counts before any BLAS library loads.
"""
