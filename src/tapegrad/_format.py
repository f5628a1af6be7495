"""Text form of tensors, laid out character for character as PyTorch prints them.

Everything here works on plain NumPy arrays. The layout rules are:

* one formatter is chosen for the whole tensor (a common width, and for floats
  whether to print integers with a trailing point, fixed or scientific notation);
* when the tensor has more than ``threshold`` elements, only ``edgeitems`` entries
  at each end of every dimension are shown, the rest replaced by ``...``, and the
  formatter only looks at the entries shown;
* rows are wrapped at ``linewidth`` and nested dimensions are indented one column
  per level, with one blank line fewer between slices at each inner level;
* ``key=value`` suffixes follow the closing bracket, each moved to its own line
  when it would run past ``linewidth``.

float64 is the default dtype. float64, int64 and bool tensors print no dtype,
except empty int64 and bool ones (no element is there to tell ``1.`` from ``1``);
every other dtype is always named, as ``dtype=tapegrad.float32``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Any, Iterable, Iterator

import numpy as np

__all__ = ["format_tensor", "set_printoptions", "get_printoptions", "printoptions"]


@dataclasses.dataclass
class _PrintOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


_OPTIONS = _PrintOptions()

_PROFILES = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}


def set_printoptions(
    precision=None,
    threshold=None,
    edgeitems=None,
    linewidth=None,
    profile=None,
    sci_mode=None,
):
    """Set how tensors print; same arguments and meaning as ``torch.set_printoptions``.

    precision: digits after the point (default 4). threshold: element count above
    which tensors are summarised (default 1000). edgeitems: entries kept at each
    end of a summarised dimension (default 3). linewidth: characters per line
    (default 80). profile: ``"default"``, ``"short"`` or ``"full"``, applied before
    the other arguments. sci_mode: force scientific notation on (True) or off
    (False); None chooses it from the values.

    Example:
        >>> tg.set_printoptions(precision=2)
        >>> tg.tensor([1.23456, 2.0])
        tensor([1.23, 2.00])
        >>> tg.set_printoptions(profile="default")
    """
    # Unknown profile names are ignored rather than rejected, as PyTorch does.
    if profile is not None and profile in _PROFILES:
        for name, setting in _PROFILES[profile].items():
            setattr(_OPTIONS, name, setting)
    if precision is not None:
        _OPTIONS.precision = precision
    if threshold is not None:
        _OPTIONS.threshold = threshold
    if edgeitems is not None:
        _OPTIONS.edgeitems = edgeitems
    if linewidth is not None:
        _OPTIONS.linewidth = linewidth
    # Not guarded by `is not None`: any call that leaves sci_mode out puts it back
    # to automatic, which is what PyTorch does too.
    _OPTIONS.sci_mode = sci_mode


def get_printoptions() -> dict[str, Any]:
    """Current print options, as keyword arguments for `set_printoptions`."""
    return dataclasses.asdict(_OPTIONS)


@contextlib.contextmanager
def printoptions(**kwargs) -> Iterator[None]:
    """Apply `set_printoptions(**kwargs)` for the duration of a ``with`` block."""
    saved = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**saved)


# The dtypes a non-empty tensor prints without a dtype= suffix.
_IMPLICIT_DTYPES = frozenset(np.dtype(t) for t in (np.float64, np.int64, np.bool_))

_SUPPORTED_DTYPES = frozenset(
    np.dtype(t)
    for t in (
        np.bool_,
        np.int8, np.int16, np.int32, np.int64,
        np.uint8, np.uint16, np.uint32, np.uint64,
        np.float16, np.float32, np.float64,
    )
)


def format_tensor(value: np.ndarray, *, suffixes: Iterable[str] = ()) -> str:
    """Render `value` as PyTorch's ``repr(tensor)`` would, e.g. ``tensor([1., 2.])``.

    `suffixes` are extra ``key=value`` strings (``"requires_grad=True"``,
    ``"grad_fn=<AddBackward0>"``) placed after the ones the tensor itself needs
    (``size=``, ``dtype=``).
    """
    array = np.asarray(value)
    if array.dtype not in _SUPPORTED_DTYPES:
        raise TypeError(f"cannot format a tensor of dtype {array.dtype}")

    prefix = "tensor("
    indent = len(prefix)
    shape = "size=" + str(tuple(int(n) for n in array.shape))
    dtype = "dtype=tapegrad." + array.dtype.name
    own = []
    if array.size == 0:
        # NumPy-style: an empty vector is just [], any other empty shape is spelled out.
        if array.ndim != 1:
            own.append(shape)
        if array.dtype != np.float64:
            own.append(dtype)
        body = "[]"
    else:
        # With edgeitems=0 a summarised tensor shows only "...", so PyTorch then always
        # states the shape, summarised or not.
        if not _OPTIONS.edgeitems:
            own.append(shape)
        if array.dtype not in _IMPLICIT_DTYPES:
            own.append(dtype)
        summarize = array.size > _OPTIONS.threshold
        shown = _shown_elements(array) if summarize else array
        formatter = _Formatter(shown)
        body = _nested(array, indent, summarize, formatter)
    return _with_suffixes(prefix + body, [*own, *suffixes], indent)


class _Formatter:
    """One layout shared by every element of a tensor, so that columns line up."""

    def __init__(self, shown: np.ndarray):
        self.is_float = shown.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        flat = shown.ravel()

        if not self.is_float:
            self.width = max([1, *(len(str(x)) for x in flat.tolist())])
            return

        # Zeros, nan and inf print the same in every mode, so only the other
        # values decide the mode and the width.
        flat = flat[np.isfinite(flat) & (flat != 0)]
        if flat.size == 0:
            return
        magnitude = np.abs(flat)
        smallest, largest = float(magnitude.min()), float(magnitude.max())
        self.int_mode = bool(np.all(flat == np.ceil(flat)))
        if _OPTIONS.sci_mode is None:
            self.sci_mode = largest / smallest > 1000.0 or largest > 1.0e8 or smallest < 1.0e-4
        else:
            self.sci_mode = _OPTIONS.sci_mode

        precision = _OPTIONS.precision
        values = flat.tolist()
        if self.sci_mode:
            self.width = max(len(f"{x:.{precision}e}") for x in values)
        elif self.int_mode:
            # +1 for the trailing "." that marks the tensor as floating point.
            self.width = max(len(f"{x:.0f}") for x in values) + 1
        else:
            self.width = max(len(f"{x:.{precision}f}") for x in values)

    def __call__(self, x) -> str:
        """Text of the Python scalar `x`, right-aligned to the common width."""
        if not self.is_float:
            text = str(x)
        elif self.sci_mode:
            text = f"{x:{self.width}.{_OPTIONS.precision}e}"
        elif self.int_mode:
            text = f"{x:.0f}"
            if math.isfinite(x):
                text += "."
        else:
            text = f"{x:.{_OPTIONS.precision}f}"
        return text.rjust(self.width)


def _shown_elements(array: np.ndarray) -> np.ndarray:
    """The entries a summarised printout shows; the formatter is sized on these alone."""
    edge = _OPTIONS.edgeitems
    if array.ndim == 0:
        return array
    if edge == 0:
        # PyTorch takes the ends of a vector as v[:0] and v[-0:]; the second is the
        # whole vector, so with edgeitems=0 a vector's formatter sees every entry,
        # while a matrix or higher shows (and measures) nothing.
        return array if array.ndim == 1 else array[(slice(0, 0),) * array.ndim]
    keep = [
        np.r_[0:edge, n - edge:n] if n > 2 * edge else np.arange(n)
        for n in array.shape
    ]
    return array[np.ix_(*keep)]


def _nested(array: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    """Bracketed text of `array`, whose opening bracket sits at column `indent`."""
    if array.ndim == 0:
        return fmt(array.item())
    if array.ndim == 1:
        return _vector(array, indent, summarize, fmt)

    edge = _OPTIONS.edgeitems
    n = array.shape[0]
    if summarize and n > 2 * edge:
        head = [_nested(array[i], indent + 1, summarize, fmt) for i in range(edge)]
        tail = [_nested(array[i], indent + 1, summarize, fmt) for i in range(n - edge, n)]
        parts = head + ["..."] + tail
    else:
        parts = [_nested(array[i], indent + 1, summarize, fmt) for i in range(n)]
    # Slices of a 3-d tensor are separated by one blank line, of a 4-d by two, ...
    separator = "," + "\n" * (array.ndim - 1) + " " * (indent + 1)
    return "[" + separator.join(parts) + "]"


def _vector(array: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    """Bracketed text of a 1-d `array`, wrapped to the line width."""
    edge = _OPTIONS.edgeitems
    n = array.shape[0]
    if summarize and not edge:
        items = ["..."]
    elif summarize and n > 2 * edge:
        # The ellipsis is not padded to the column width; it keeps its own leading space.
        items = [fmt(x) for x in array[:edge].tolist()]
        items.append(" ...")
        items += [fmt(x) for x in array[n - edge:].tolist()]
    else:
        items = [fmt(x) for x in array.tolist()]

    # Each entry takes its width plus ", ".
    per_line = max(1, math.floor((_OPTIONS.linewidth - indent) / (fmt.width + 2)))
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _with_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    """Append ``, key=value`` suffixes and the closing parenthesis."""
    parts = [text]
    # PyTorch counts the current line two characters longer than it is (room for
    # the ", " to come); kept so that suffixes wrap at the same places.
    line_length = len(text.rpartition("\n")[2]) + 2
    for suffix in suffixes:
        if line_length + len(suffix) + 2 > _OPTIONS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            line_length = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            line_length += len(suffix) + 2
    parts.append(")")
    return "".join(parts)
