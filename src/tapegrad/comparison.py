"""Questions about tensors, asked as PyTorch asks them: ``is_tensor``, ``is_floating_point``,
``numel``, ``isclose``, ``allclose``, ``equal``.  None of them records anything: their
results carry no gradient."""
import numpy as np

from ._quiet import quiet_begin, quiet_end
from .functional import _opaque_if_traced, broadcast_shape
from .tensor import Tensor, read_value

__all__ = ["is_tensor", "is_floating_point", "is_complex", "is_conj", "is_neg", "is_signed",
           "is_same_size", "get_device", "numel", "isclose", "allclose", "equal"]


def _require_tensor(fn, name, position, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position {position}) must be Tensor, not "
                        f"{type(x).__name__}")


def is_tensor(obj):
    """Whether ``obj`` is a tapegrad tensor (a Parameter is one).

    Example:
        >>> tg.is_tensor(tg.tensor(1.0)), tg.is_tensor(np.ones(2))
        (True, False)
    """
    return isinstance(obj, Tensor)


def is_floating_point(input):  # noqa: A002 - PyTorch's argument name
    """Whether ``input``'s dtype is a floating one (float64 is tapegrad's only one).

    Example:
        >>> tg.is_floating_point(tg.tensor([1.0])), tg.is_floating_point(tg.tensor([1]))
        (True, False)
    """
    _require_tensor("is_floating_point", "input", 1, input)
    return input.is_floating_point()


def is_complex(input):  # noqa: A002
    """Whether ``input``'s dtype is complex: never, tapegrad's dtypes are real.

    Example:
        >>> tg.is_complex(tg.tensor([1.0]))
        False
    """
    _require_tensor("is_complex", "input", 1, input)
    return input.is_complex()


def is_conj(input):  # noqa: A002
    """Whether ``input`` is a lazily conjugated view (PyTorch's for complex tensors): never.

    Example:
        >>> tg.is_conj(tg.tensor([1.0]))
        False
    """
    _require_tensor("is_conj", "input", 1, input)
    return input.is_conj()


def is_neg(input):  # noqa: A002
    """Whether ``input`` is a lazily negated view (PyTorch's for complex tensors): never.

    Example:
        >>> tg.is_neg(tg.tensor([1.0]))
        False
    """
    _require_tensor("is_neg", "input", 1, input)
    return input.is_neg()


def is_signed(input):  # noqa: A002
    """Whether ``input``'s dtype holds negative numbers: float64 and the signed integers.

    Example:
        >>> tg.is_signed(tg.tensor([1.0])), tg.is_signed(tg.tensor([1], dtype=tg.uint8))
        (True, False)
    """
    _require_tensor("is_signed", "input", 1, input)
    return input.is_signed()


def is_same_size(input, other):  # noqa: A002
    """Whether ``input`` and ``other`` have the same shape.

    Example:
        >>> tg.is_same_size(tg.zeros(2, 3), tg.ones(2, 3))
        True
    """
    _require_tensor("is_same_size", "input", 1, input)
    _require_tensor("is_same_size", "other", 2, other)
    return input.is_same_size(other)


def get_device(input):  # noqa: A002
    """The index of ``input``'s device: -1, PyTorch's for the CPU.

    Example:
        >>> tg.get_device(tg.zeros(2))
        -1
    """
    _require_tensor("get_device", "input", 1, input)
    return input.get_device()


def numel(input):  # noqa: A002
    """The number of elements of ``input`` (a Python int): the product of its shape.

    Example:
        >>> tg.numel(tg.zeros(2, 3))
        6
    """
    _require_tensor("numel", "input", 1, input)
    return input.numel()


def _close_value(fn, input, other, rtol, atol, equal_nan):
    """The bool array of ``isclose``, computed as PyTorch computes it: equal elements are
    close; otherwise |input - other| <= atol + |rtol * other|, with integers and bools
    converted to float64 first (so int8 differences do not wrap)."""
    _require_tensor(fn, "input", 1, input)
    _require_tensor(fn, "other", 2, other)
    a, b = input._value, other._value
    if a.dtype != b.dtype:
        raise RuntimeError(f"{input.dtype.scalar_name} did not match {other.dtype.scalar_name}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    broadcast_shape(a.shape, b.shape)
    tok = quiet_begin()
    try:
        close = a == b
        if equal_nan and a.dtype.kind == "f":
            close |= np.isnan(a) & np.isnan(b)
        if rtol == 0 and atol == 0:
            return close
        if a.dtype.kind != "f":
            a, b = a.astype(np.float64), b.astype(np.float64)
        allowed = atol + np.abs(rtol * b)
        actual = np.abs(a - b)
        return close | (np.isfinite(actual) & (actual <= allowed))
    finally:
        quiet_end(tok)


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    """A bool tensor: where ``input`` and ``other`` (same dtype, broadcast) are close.

    Close means ``|input - other| <= atol + rtol * |other|``, or equal (infinities included);
    NaNs are close to each other only with ``equal_nan=True``.  Shape: the broadcast shape.

    Example:
        >>> tg.isclose(tg.tensor([1.0, 2.0, np.nan]), tg.tensor([1.0 + 1e-9, 2.1, np.nan]))
        tensor([ True, False, False])
    """
    for t in (input, other):
        if isinstance(t, Tensor):
            _opaque_if_traced(t, "isclose() of traced values")
    return Tensor._make(np.asarray(_close_value("isclose", input, other, rtol, atol, equal_nan)))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    """Whether every element of ``input`` is close to ``other``'s (a Python bool).

    ``isclose(input, other, rtol, atol, equal_nan).all()``, as a bool; the dtypes must
    match.

    Example:
        >>> tg.allclose(tg.tensor([1.0, 2.0]), tg.tensor([1.0, 2.0 + 1e-7]))
        True
    """
    for t in (input, other):
        if isinstance(t, Tensor):
            read_value(t, "allclose()")
    return bool(np.all(_close_value("allclose", input, other, rtol, atol, equal_nan)))


def equal(input, other):  # noqa: A002
    """Whether ``input`` and ``other`` have the same shape and the same elements (NaN is
    equal to nothing; the dtypes may differ).

    Example:
        >>> tg.equal(tg.tensor([1, 2]), tg.tensor([1.0, 2.0]))
        True
        >>> tg.equal(tg.tensor([1, 2]), tg.tensor([[1, 2]]))
        False
    """
    _require_tensor("equal", "input", 1, input)
    _require_tensor("equal", "other", 2, other)
    read_value(input, "equal()")
    read_value(other, "equal()")
    return input._value.shape == other._value.shape and \
        bool(np.array_equal(input._value, other._value))
