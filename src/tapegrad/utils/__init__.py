"""Utilities, as in ``torch.utils``: ``data`` (datasets, samplers, DataLoader)."""
from . import data

__all__ = ["data"]


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
