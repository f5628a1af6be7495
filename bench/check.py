"""Gradient cross-check: a library whose answer differs is not timed as if it were right.

Each library's first call returns ``(loss, grads)``; it is compared with the reference
library's (the hand-written floor when it ran). The error of one array is normwise
relative, ``max|a - b| / max|b|``, so a gradient whose entries span magnitudes is judged as
a whole; the figure of a call is the worst over the loss and all gradients.
"""
from __future__ import annotations

import math

import numpy as np

TOLERANCE = 1e-8
REFERENCE_ORDER = ("floor", "numpy", "torch", "jax_jit", "autograd")


def relative_error(result, reference) -> tuple[float, str]:
    """Worst normwise relative error of ``result`` against ``reference``, and where it is."""
    loss, grads = result
    ref_loss, ref_grads = reference
    if len(grads) != len(ref_grads):
        return math.inf, f"{len(grads)} gradients, expected {len(ref_grads)}"
    worst, where = 0.0, ""
    pairs = [("loss", loss, ref_loss)] + [(f"grad[{i}]", g, r)
                                          for i, (g, r) in enumerate(zip(grads, ref_grads))]
    for label, value, ref in pairs:
        value = np.asarray(value, dtype=np.float64)
        ref = np.asarray(ref, dtype=np.float64)
        if value.shape != ref.shape:
            return math.inf, f"{label} has shape {value.shape}, expected {ref.shape}"
        if not np.all(np.isfinite(value)):
            return math.inf, f"{label} is not finite"
        scale = float(np.max(np.abs(ref))) if ref.size else 0.0
        diff = float(np.max(np.abs(value - ref))) if ref.size else 0.0
        err = diff / scale if scale > 0.0 else diff
        if err > worst:
            worst, where = err, label
    return worst, where


def pick_reference(results: dict) -> str | None:
    """The peer whose first-call result the others are compared with."""
    for name in REFERENCE_ORDER:
        if name in results:
            return name
    return next(iter(results), None)
