"""dtypes: float64 (differentiable); int64, int32, int16, int8, uint8 and bool (data only).

float32, float16 and bfloat16 are declared so that code naming them gets a clear error
rather than an AttributeError.  Type promotion follows PyTorch's rules (``result_type``).
"""
import numpy as np


class dtype:
    """A tensor element type, printed as PyTorch prints its own (``tapegrad.float64``).

    tapegrad has float64 (also spelled ``float`` and ``double``), the only floating dtype and
    the only one that can require grad, and int64 (``long``), int32, int16, int8, uint8 and
    bool for data.  Naming ``float32``, ``float16`` or ``bfloat16`` raises a ``TypeError``.

    Example:
        >>> tg.tensor([1.0]).dtype, tg.tensor([1]).dtype, tg.float64.is_floating_point
        (tapegrad.float64, tapegrad.int64, True)
    """

    __slots__ = ("name", "np", "is_floating_point", "itemsize", "scalar_name", "supported")

    def __init__(self, name, np_dtype, is_floating_point, scalar_name, supported=True):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating_point = is_floating_point
        self.itemsize = self.np.itemsize
        # PyTorch's C++ name of the type, which its error messages use ("Long", "Double")
        self.scalar_name = scalar_name
        self.supported = supported

    @property
    def is_signed(self):
        return self.np.kind != "u" and self.np.kind != "b"

    @property
    def is_complex(self):
        return False

    def __repr__(self):
        return f"tapegrad.{self.name}"

    def __reduce__(self):
        return (by_name, (self.name,))


float64 = dtype("float64", np.float64, True, "Double")
int64 = dtype("int64", np.int64, False, "Long")
int32 = dtype("int32", np.int32, False, "Int")
int16 = dtype("int16", np.int16, False, "Short")
int8 = dtype("int8", np.int8, False, "Char")
uint8 = dtype("uint8", np.uint8, False, "Byte")
bool_ = dtype("bool", np.bool_, False, "Bool")
float32 = dtype("float32", np.float32, True, "Float", supported=False)
float16 = dtype("float16", np.float16, True, "Half", supported=False)
# NumPy has no bfloat16: float16 stands in for its size; no value is ever made of either
bfloat16 = dtype("bfloat16", np.float16, True, "BFloat16", supported=False)

# the C++ names of the types, which some of PyTorch's messages give ("long int", "double")
C_TYPE_NAMES = {"float64": "double", "float32": "float", "float16": "c10::Half",
                "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int",
                "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
                "bool": "bool"}

SUPPORTED = (float64, int64, int32, int16, int8, uint8, bool_)
_BY_NAME = {d.name: d for d in SUPPORTED + (float32, float16, bfloat16)}
_BY_NP = {d.np: d for d in SUPPORTED}


def by_name(name):
    return _BY_NAME[name]


def from_numpy_dtype(np_dtype):
    """Map a NumPy dtype onto tapegrad's: the same type where tapegrad has it, else the wider
    type of its kind (float16/float32 -> float64; uint16/uint32 -> int64); raise for the rest."""
    np_dtype = np.dtype(np_dtype)
    found = _BY_NP.get(np_dtype)
    if found is not None:
        return found
    kind = np_dtype.kind
    if kind == "f" and np_dtype.itemsize <= 8:
        return float64
    # every uint16/uint32 value fits in int64; uint64 ones may not, so uint64 is refused
    if kind == "u" and np_dtype.itemsize < 8:
        return int64
    raise TypeError(
        f"can't convert np.ndarray of type numpy.{np_dtype}. The only supported types are: "
        "float64, float32, float16, int64, int32, int16, int8, uint8, and bool.")


def _unsupported(dt):
    return TypeError(f"tapegrad supports float64 as its only floating dtype for now; "
                     f"{dt.name} is not supported yet")


def resolve(dt):
    """Accept a tapegrad dtype, a NumPy dtype or a Python type; return a tapegrad dtype."""
    if dt is None or isinstance(dt, dtype):
        if dt is not None and not dt.supported:
            raise _unsupported(dt)
        return dt
    if dt is float:
        return float64
    if dt is int:
        return int64
    if dt is bool:
        return bool_
    return from_numpy_dtype(dt)


# ---------------------------------------------------------------------------------------------
# The default dtype
# ---------------------------------------------------------------------------------------------


def get_default_dtype():
    """The dtype of floating tensors made from Python floats: float64, tapegrad's only one
    (PyTorch's default is float32).

    Example:
        >>> tg.get_default_dtype()
        tapegrad.float64
    """
    return float64


def set_default_dtype(d):
    """Accept float64 (already the default); any other dtype raises: float32 and float16
    do not exist in tapegrad yet, and PyTorch refuses non-floating defaults.

    Example:
        >>> tg.set_default_dtype(tg.float64)
        >>> tg.set_default_dtype(tg.float32)
        Traceback (most recent call last):
        TypeError: tapegrad supports float64 as its only floating dtype for now; ...
    """
    if not isinstance(d, dtype):
        raise TypeError(
            "invalid dtype object: only floating-point types are supported as the default type")
    if not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    if not d.supported:
        raise _unsupported(d)


# ---------------------------------------------------------------------------------------------
# Type promotion, as PyTorch does it
# ---------------------------------------------------------------------------------------------


def promote_types(a, b):
    """The smallest dtype both convert to.  On tapegrad's dtypes NumPy's table is PyTorch's
    (uint8 with int8 -> int16, any int with float64 -> float64); they differ only for float32
    and float16, which tapegrad does not have."""
    return _BY_NP[np.promote_types(a.np, b.np)]


def _combine(higher, lower):
    """PyTorch's combine_categories: a lower-priority group of operands changes the result
    only when it is of a higher category (an int tensor plus a float scalar is float, a bool
    tensor plus an int scalar is int64)."""
    if higher is None:
        return lower
    if lower is None or higher.is_floating_point:
        return higher
    if higher is bool_ or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


def of_number(x):
    """The dtype PyTorch gives a Python (or NumPy) number: bool, int64, or the default float."""
    if isinstance(x, (bool, np.bool_)):
        return bool_
    if isinstance(x, (int, np.integer)):
        return int64
    return float64


def result_type(*operands):
    """PyTorch's result dtype of an elementwise op: tensors with dimensions decide first,
    then 0-d tensors, then Python numbers; a later group counts only if it is of a higher
    category (bool < integer < floating), e.g. int32 tensor + 0-d int64 tensor is int32,
    uint8 tensor + 1000 is uint8, int32 tensor + 0-d float64 tensor is float64.

    Operands are ``(dtype, ndim)`` pairs, with ndim None for a Python number."""
    groups = [None, None, None]    # tensors with dims, 0-d tensors, Python numbers
    for dt, ndim in operands:
        slot = 2 if ndim is None else (0 if ndim else 1)
        groups[slot] = dt if groups[slot] is None else promote_types(groups[slot], dt)
    return _combine(groups[0], _combine(groups[1], groups[2]))
