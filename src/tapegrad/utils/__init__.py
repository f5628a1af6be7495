"""Utilities, as in ``torch.utils``: ``data`` (datasets, samplers, DataLoader) and
``checkpoint`` (activation checkpointing's API)."""
from . import checkpoint, data

__all__ = ["checkpoint", "data"]


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
