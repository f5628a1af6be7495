"""Shared test settings: hypothesis profiles, float64 PyTorch when it is installed, and the
one-line summary of skips for optional peers that are not installed (skip_summary.py)."""
import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

from skip_summary import pytest_terminal_summary  # noqa: F401 - a pytest hook

try:
    import tapegrad  # noqa: F401
except ModuleNotFoundError as exc:  # a source checkout that is not installed
    if exc.name != "tapegrad":
        raise
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

settings.register_profile(
    "dev", max_examples=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

try:
    import torch
except ImportError:  # PyTorch comparisons skip where it is absent
    torch = None
else:
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
