"""Running one expression in tapegrad and in PyTorch and comparing what came out: a tensor's
dtype, shape, values, requires_grad and grad_fn name, a Python value, or an error's type and
message (with ``torch.`` spelled ``tapegrad.``)."""
import re

import numpy as np

import tapegrad as tg


def outcome(lib, fn):
    """``fn(lib)`` summarised so that tapegrad's and PyTorch's summaries compare equal when
    the two libraries agree."""
    try:
        result = fn(lib)
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        return ("error", error_name(e), message(e))
    return summary(result)


def message(e):
    text = re.sub(r"\btorch\b", "tapegrad", str(e))
    # PyTorch's C++ errors may end in a traceback of C++ frames, and its C++ warnings (raised
    # as errors under the suite's filterwarnings) in the source line that issued them
    text = re.sub(r" \(Triggered internally at .*\)$", "", text, flags=re.S)
    return re.split(r"\nException raised from ", text)[0]


def error_name(e):
    """The error's class name; ``torch.linalg.LinAlgError`` is the C++ class
    ``torch._C._LinAlgError`` under a public alias, whose name tapegrad's class has."""
    name = type(e).__name__
    return "LinAlgError" if name == "_LinAlgError" else name


def summary(x):
    """A comparable description of a result (tensors by dtype, shape, values, flags)."""
    if isinstance(x, tg.Tensor) or type(x).__module__.startswith("torch"):
        if hasattr(x, "dtype") and hasattr(x, "shape"):
            value = x._value if isinstance(x, tg.Tensor) else x.detach().numpy()
            if isinstance(x, tg.Tensor):
                # the handle's dtype must say what its value is
                assert value.dtype == x.dtype.np, (value.dtype, x.dtype)
            grad_fn = None if x.grad_fn is None else x.grad_fn.name()
            return ("tensor", str(x.dtype).split(".")[-1], tuple(x.shape),
                    _plain(np.asarray(value)), bool(x.requires_grad), grad_fn)
    if isinstance(x, (tuple, list)):   # namedtuples by their fields (max's values, indices)
        return ("list" if isinstance(x, list) else "tuple", tuple(summary(v) for v in x))
    if isinstance(x, float):
        return ("python", "float", Floats(x))
    if isinstance(x, (bool, int, str)) or x is None:
        return ("python", type(x).__name__, x)
    return ("other", str(x).replace("torch.", "tapegrad."))


class Floats:
    """Float values, equal to others within 1e-12 (relative) with NaN equal to NaN and
    infinities and zeros in the same places: two correct roundings of one formula (PyTorch's
    ``x ** -0.5`` is ``rsqrt``) may differ in the last bit."""

    def __init__(self, a):
        self.a = np.asarray(a, dtype=np.float64).reshape(-1)

    def __eq__(self, other):
        if not isinstance(other, Floats) or self.a.shape != other.a.shape:
            return False
        a, b = self.a, other.a
        special = ~np.isfinite(a) | ~np.isfinite(b) | (a == 0) | (b == 0)
        return bool(np.array_equal(a[special], b[special], equal_nan=True)
                    and np.allclose(a, b, rtol=1e-12, atol=0, equal_nan=True))

    def __repr__(self):
        return repr(tuple(self.a.tolist()))


def _plain(a):
    """The values, comparable: integers and bools exactly, floats as ``Floats``."""
    if a.dtype.kind == "f":
        return Floats(a)
    return tuple(a.reshape(-1).tolist())


def same(fn, torch):
    """Assert that ``fn(tapegrad)`` and ``fn(torch)`` agree; returns tapegrad's outcome."""
    ours, theirs = outcome(tg, fn), outcome(torch, fn)
    assert ours == theirs, f"\ntapegrad: {ours}\nPyTorch:  {theirs}"
    return ours


def same_bits(ours, theirs, what=""):
    """Assert that two tensors (tapegrad's and PyTorch's) have the same dtype, shape and
    bytes: a draw after ``manual_seed`` is compared bit for bit."""
    a, b = ours.detach().numpy(), theirs.detach().numpy()
    assert a.dtype == b.dtype and a.shape == b.shape, (what, a.shape, b.shape)
    assert a.tobytes() == b.tobytes(), (what, a, b)


def same_text(ours, theirs):
    """Whether tapegrad's object prints as PyTorch's, ``tapegrad`` read as ``torch``."""
    return str(ours).replace("tapegrad", "torch") == str(theirs)
