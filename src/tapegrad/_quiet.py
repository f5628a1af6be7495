"""Silence NumPy floating-point warnings for the engine's own ufunc calls.

PyTorch never warns on ``log(0)`` or ``exp(1000)``; NumPy does, and ``np.errstate`` costs
~2.7 µs per use, more than the op itself on small tensors.  NumPy 2 keeps its error state in
a context variable, which we set and reset directly (~0.2 µs).  Where that private variable
is missing we fall back to ``np.errstate``.
"""
import numpy as np

try:
    from numpy._core._ufunc_config import _extobj_contextvar as _errvar

    with np.errstate(all="ignore"):
        _IGNORE = _errvar.get()

    def quiet_begin():
        return _errvar.set(_IGNORE)

    def quiet_end(token):
        _errvar.reset(token)

    # the same two calls for the recorders every op passes: ``tok = QUIET_SET(QUIET)`` and
    # ``QUIET_RESET(tok)`` spare quiet_begin's and quiet_end's frames, half their cost
    QUIET, QUIET_SET, QUIET_RESET = _IGNORE, _errvar.set, _errvar.reset

except (ImportError, AttributeError):  # pragma: no cover - older NumPy
    def quiet_begin():
        es = np.errstate(all="ignore")
        es.__enter__()
        return es

    def quiet_end(token):
        token.__exit__(None, None, None)

    QUIET, QUIET_RESET = None, quiet_end

    def QUIET_SET(_):
        return quiet_begin()
