"""dtypes: float64 (differentiable), int64 and bool (data only)."""
import numpy as np


class dtype:
    """A tensor element type, printed as PyTorch prints its own (``tapegrad.float64``).

    tapegrad has float64 (also spelled ``float``, ``double``, and accepted as ``float32``),
    int64 (``long``) and bool.

    Example:
        >>> tg.tensor([1.0]).dtype, tg.tensor([1]).dtype, tg.float64.is_floating_point
        (tapegrad.float64, tapegrad.int64, True)
    """

    __slots__ = ("name", "np", "is_floating_point", "itemsize")

    def __init__(self, name, np_dtype, is_floating_point):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating_point = is_floating_point
        self.itemsize = self.np.itemsize

    def __repr__(self):
        return f"tapegrad.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


float64 = dtype("float64", np.float64, True)
int64 = dtype("int64", np.int64, False)
bool_ = dtype("bool", np.bool_, False)
# Declared so that code naming it gets a clear error rather than an AttributeError.
float32 = dtype("float32", np.float32, True)

_BY_NP = {np.dtype(np.float64): float64, np.dtype(np.int64): int64, np.dtype(np.bool_): bool_}


def _by_name(name):
    return {"float64": float64, "int64": int64, "bool": bool_, "float32": float32}[name]


def from_numpy_dtype(np_dtype):
    """Map a NumPy dtype onto tapegrad's, widening ints and floats; raise for the rest."""
    np_dtype = np.dtype(np_dtype)
    found = _BY_NP.get(np_dtype)
    if found is not None:
        return found
    kind = np_dtype.kind
    if kind == "f":
        return float64
    if kind in "iu":
        return int64
    if kind == "b":
        return bool_
    raise TypeError(
        f"can't convert np.ndarray of type numpy.{np_dtype}. The only supported types are: "
        "float64, float32, float16, int64, int32, int16, int8, uint8, and bool.")


def resolve(dt):
    """Accept a tapegrad dtype, a NumPy dtype or a Python type; return a tapegrad dtype."""
    if dt is None or isinstance(dt, dtype):
        if dt is float32:
            raise TypeError("tapegrad supports float64 as its only floating dtype for now; "
                            "float32 is not supported yet")
        return dt
    if dt is float:
        return float64
    if dt is int:
        return int64
    if dt is bool:
        return bool_
    return from_numpy_dtype(dt)
