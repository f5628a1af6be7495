"""Small PyTorch names that ordinary programs call, composed from the recorded ops: the integer
ops ``gcd`` and ``lcm``, ``nextafter``, ``angle``, ``sum_to_size``, the ``unsafe_`` splits,
``narrow_copy``, ``combinations`` and ``gradient``.

Where PyTorch's node has a name of its own (``AngleBackward0``, ``NarrowCopyBackward0``, ...)
the composition ends in a RESHAPE or GATHER record whose variant carries that name
(structure._GATHER_NAMES), so ``grad_fn`` names are PyTorch's without new opcodes.  Values
decided on the side from the input's values (``nextafter``'s step, ``angle``'s sign) make a
traced call opaque: a compiled replay would otherwise keep the first call's values.
"""
import builtins
import itertools

import numpy as np

from . import _dtype, _promote, legacy
from . import functional as F
from .derived import heaviside
from .inplace import _recomputed_
from .tape import state
from .tensor import OUTPUT_NR, Size, Tensor, _ById, read_value
from .views import Views

__all__ = ["gcd", "lcm", "gcd_", "lcm_", "nextafter", "angle", "hardshrink", "prelu",
           "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes", "narrow_copy",
           "combinations", "gradient"]


def _other_tensor(name, other, position):
    if not isinstance(other, Tensor):
        raise TypeError(f"{name}(): argument 'other' (position {position}) must be Tensor, "
                        f"not {type(other).__name__}")


def _not_for(name, dt):
    return NotImplementedError(f'"{name}_cpu" not implemented for \'{dt.scalar_name}\'')


def _integer_values(name, input, other, position):  # noqa: A002
    """Both operands as arrays of their promoted integer dtype, or PyTorch's errors."""
    _other_tensor(name, other, position)
    F.broadcast_shape(input._value.shape, other._value.shape)   # (PyTorch's error)
    dt = _promote.result_dtype(input, other)
    if dt.is_floating_point or dt is _dtype.bool_:
        raise _not_for(name.rstrip("_"), dt)
    trace = state.trace
    if trace is not None and (input._rg or other._rg):
        # (traced integer data: the result is computed here, on the side)
        trace.opaque(f"{name}() of traced integer values")
    return _promote.values(input, other)


def gcd(input, other):  # noqa: A002 - PyTorch's argument name
    """The greatest common divisor of each pair of elements (integer tensors only; 0 where
    both are 0), broadcast; no gradient.

    Example:
        >>> tg.gcd(tg.tensor([12, -18, 0]), tg.tensor([8, 12, 5]))
        tensor([4, 6, 5])
    """
    return _gcd(input, other, "gcd", 2)


def _gcd(input, other, name, position):  # noqa: A002
    a, b = _integer_values(name, F.as_tensor_arg(input), other, position)
    return Tensor._make(_euclid(a, b))


def _euclid(a, b):
    """PyTorch's gcd: Euclid's algorithm on |a| and |b| in their own dtype.  It differs from
    NumPy's where |a| wraps: the most negative int16 stays negative, and the remainders then
    carry its sign (gcd(-32768, 7) is -1 in int16, 1 in NumPy)."""
    a, b = np.broadcast_arrays(np.abs(a), np.abs(b))
    a, b = a.copy(), b.copy()
    going = a != 0
    while going.any():
        c = a[going]
        # C's remainder (the sign of the dividend), which np.fmod gives for integers
        a[going] = np.fmod(b[going], c)
        b[going] = c
        going = a != 0
    return np.asarray(b)


def lcm(input, other):  # noqa: A002
    """The least common multiple of each pair of elements (integer tensors only; 0 where
    either is 0), broadcast; no gradient.  It wraps around on overflow as PyTorch's does.

    Example:
        >>> tg.lcm(tg.tensor([4, -6, 0]), tg.tensor([6, 4, 5]))
        tensor([12, 12,  0])
    """
    return _lcm(input, other, "lcm", 2)


def _lcm(input, other, name, position):  # noqa: A002
    a, b = _integer_values(name, F.as_tensor_arg(input), other, position)
    g = _euclid(a, b)
    # PyTorch computes |a / g * b| in C++, where int8, uint8 and int16 are widened to int
    # first: the product is taken exactly and wraps only when stored.  int32 and int64 wrap
    # in the product itself, as NumPy's do.
    wide = np.int64 if a.dtype.itemsize < 4 else a.dtype
    safe = np.where(g == 0, 1, g).astype(wide)
    with np.errstate(over="ignore"):
        out = np.abs(a.astype(wide) // safe * b.astype(wide))
    return Tensor._make(np.asarray(np.where(g == 0, 0, out).astype(a.dtype)))


def gcd_(input, other):  # noqa: A002
    """``gcd`` written into ``input``.

    Example:
        >>> x = tg.tensor([12, 18]); _ = tg.gcd_(x, tg.tensor([8, 4])); x
        tensor([4, 2])
    """
    return input.gcd_(other)


def lcm_(input, other):  # noqa: A002
    """``lcm`` written into ``input``.

    Example:
        >>> x = tg.tensor([4, 3]); _ = tg.lcm_(x, tg.tensor([6, 5])); x
        tensor([12, 15])
    """
    return input.lcm_(other)


def nextafter(input, other):  # noqa: A002
    """The next float64 after each element of ``input`` towards ``other`` (``other`` where
    they are equal), broadcast.  ``grad_fn``: ``<NextafterBackward0>``; as in PyTorch the
    gradient passes to ``input`` unchanged where the two differ (0 where they are equal) and
    ``other`` gets zeros.

    Example:
        >>> (tg.nextafter(tg.tensor([1.0]), tg.tensor([2.0])) - 1.0).item()
        2.220446049250313e-16
    """
    return _nextafter(input, other, "nextafter", 2)


def _nextafter(input, other, name, position):  # noqa: A002
    x = F.as_tensor_arg(input)
    _other_tensor(name, other, position)
    F.broadcast_shape(x._value.shape, other._value.shape)   # (PyTorch's error)
    dt = _promote.result_dtype(x, other)
    if not dt.is_floating_point:
        raise _not_for("nextafter", dt)
    xv, yv = np.broadcast_arrays(x._value.astype(np.float64), other._value.astype(np.float64))
    value = np.nextafter(xv, yv)
    x_rg, y_rg = state.grad_enabled and x._rg, state.grad_enabled and other._rg
    if not (x_rg or y_rg):
        return Tensor._make(np.array(value))
    F._opaque_if_traced(x if x_rg else other, "nextafter() reads its inputs' values")
    shape = value.shape
    if x_rg:
        # x + (the step to the next float): exact, the two being neighbours.  Where x equals
        # other, PyTorch's gradient is 0 (the value is other's); an infinite x stepping to
        # the largest float cannot be reached by adding: both take the value, with a zero
        # gradient (PyTorch's is 1 for the infinite x, the one difference)
        with np.errstate(invalid="ignore"):
            step = np.where(np.isfinite(xv), value - xv, 0.0)
        fixed = (xv == yv) | (np.isinf(xv) & (value != xv))
        out = F.add(x, Tensor._make(step))
        if fixed.any():
            out = F.where(Tensor._make(fixed), Tensor._make(value), out)
    else:
        out = Tensor._make(np.array(value))
    if y_rg:
        # other takes part with a zero gradient, as PyTorch's node gives it
        out = F.where(Tensor._make(np.zeros(shape, dtype=bool)), other, out)
    return F._reshaped(out, shape, F.V_NEXTAFTER)


def angle(input):  # noqa: A002
    """The argument of each element as a complex number: 0 for a real value >= 0, pi below
    0, NaN for NaN (float64; an integer or bool tensor gives float64 too).
    ``grad_fn``: ``<AngleBackward0>``, whose gradient is zero for real input.

    Example:
        >>> tg.angle(tg.tensor([2.0, -1.0, 0.0]))
        tensor([0.0000, 3.1416, 0.0000])
    """
    x = F.as_tensor_arg(input)
    v = x._value
    value = np.where(v < 0, np.pi, 0.0)
    if v.dtype.kind == "f":
        value = np.where(np.isnan(v), v, value)
    if not (state.grad_enabled and x._rg):
        return Tensor._make(np.asarray(value, dtype=np.float64))
    F._opaque_if_traced(x, "angle() reads the signs of its input")
    # x takes part with a zero gradient (never x * 0: that is NaN for an infinite x)
    out = F.where(Tensor._make(np.zeros(v.shape, dtype=bool)), x, Tensor._make(value))
    return F._reshaped(out, v.shape, F.V_ANGLE)


def hardshrink(input, lambd=0.5):  # noqa: A002
    """``nn.functional.hardshrink``: ``x`` where ``|x| > lambd``, 0 elsewhere.

    Example:
        >>> tg.hardshrink(tg.tensor([-1.0, 0.2, 2.0]))
        tensor([-1.,  0.,  2.])
    """
    from .nn import functional as NF
    return NF.hardshrink(input, lambd)


def prelu(input, weight):  # noqa: A002
    """``nn.functional.prelu``: ``x`` above 0, ``weight * x`` otherwise, one slope or one per
    channel.  ``grad_fn``: ``<PreluKernelBackward0>``.

    Example:
        >>> tg.prelu(tg.tensor([-2.0, 3.0]), tg.tensor([0.25]))
        tensor([-0.5000,  3.0000])
    """
    from .nn import functional as NF
    return NF.prelu(input, weight)


# --- sum_to_size, the unsafe splits, narrow_copy --------------------------------------------
def sum_to_size(self, *size):
    """``x.sum_to_size(*size)``: x summed down to ``size``, which must expand to x's shape
    (the reverse of ``expand``); x itself when the shapes are equal.  ``grad_fn``:
    ``<SumBackward1>``, or ``<ViewBackward0>`` where leading dims go.

    Example:
        >>> tg.ones(2, 3).sum_to_size(1, 3)
        tensor([[2., 2., 2.]])
    """
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    shape = self._value.shape
    lead = len(shape) - len(size)
    if lead < 0 or any(not isinstance(s, (int, np.integer)) or not (s == 1 or s == n)
                       for s, n in zip(size, shape[lead:])):
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size "
                           f"{{{list(shape)}}}.")
    if tuple(size) == shape:
        return self
    if not size:
        return F.sum(self)      # (PyTorch's node here is SumBackward0)
    dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(size)
                                      if s == 1 and shape[lead + i] != 1)
    out = F.sum(self, dims, True) if dims else self
    return F.view(out, *size) if lead else out


def _parts(x, positions, variant, name):
    """Copies of x at each array of flat ``positions``, recorded with PyTorch's node of
    ``name`` and numbered as its outputs (``output_nr``)."""
    parts = []
    for k, idx in enumerate(positions):
        t = F._gathered(x, idx, variant)
        if t._tape is not None:
            OUTPUT_NR.set(t, (t._tape, t._r, k))
        parts.append(t)
    return tuple(parts)


def _index_tensor(x):
    return Tensor._make(F._flat_index(x))


def unsafe_split(input, split_size, dim=0):  # noqa: A002
    """``split``, giving copies rather than views (PyTorch's ``UnsafeSplitBackward0``).

    Example:
        >>> [p.tolist() for p in tg.unsafe_split(tg.arange(5), 2)]
        [[0, 1], [2, 3], [4]]
    """
    x = F.as_tensor_arg(input)
    if isinstance(split_size, (list, tuple)):
        raise TypeError("unsafe_split(): argument 'split_size' must be int, not "
                        f"{type(split_size).__name__}")
    pieces = F.split(_index_tensor(x), split_size, dim)
    return _parts(x, [p._value for p in pieces], F.V_UNSAFE_SPLIT, "UnsafeSplit")


def unsafe_split_with_sizes(input, split_sizes, dim=0):  # noqa: A002
    """``split_with_sizes`` (``split`` with a list of sizes), giving copies rather than views
    (PyTorch's ``UnsafeSplitWithSizesBackward0``).

    Example:
        >>> [p.tolist() for p in tg.unsafe_split_with_sizes(tg.arange(5), [1, 4])]
        [[0], [1, 2, 3, 4]]
    """
    x = F.as_tensor_arg(input)
    pieces = F.split(_index_tensor(x), list(split_sizes), dim)
    return _parts(x, [p._value for p in pieces], F.V_UNSAFE_SPLIT_WITH_SIZES,
                  "UnsafeSplitWithSizes")


def unsafe_chunk(input, chunks, dim=0):  # noqa: A002
    """``chunk``, giving copies rather than views.

    Example:
        >>> [p.tolist() for p in tg.unsafe_chunk(tg.arange(6), 4)]
        [[0, 1], [2, 3], [4, 5]]
    """
    x = F.as_tensor_arg(input)
    pieces = F.chunk(_index_tensor(x), chunks, dim)
    # (an empty dim gives `chunks` empty parts, which PyTorch makes with split_with_sizes)
    d = F._wrap_dim(dim, x._value.ndim)
    variant = F.V_UNSAFE_SPLIT_WITH_SIZES if x._value.shape[d] == 0 else F.V_UNSAFE_SPLIT
    return _parts(x, [p._value for p in pieces], variant, "UnsafeSplit")


def narrow_copy(input, dim, start, length):  # noqa: A002
    """``narrow``'s elements as a new tensor, not a view (``NarrowCopyBackward0``).

    Example:
        >>> tg.arange(6).reshape(2, 3).narrow_copy(1, 1, 2)
        tensor([[1, 2],
                [4, 5]])
    """
    x = F.as_tensor_arg(input)
    nd = x._value.ndim
    if isinstance(dim, (int, np.integer)) and not builtins.max(nd, 1) > dim:
        # PyTorch's check of a dim past the end, before it wraps negative ones
        raise RuntimeError("Expected dim < static_cast<int64_t>(self_sizes.size()) to be true, "
                           "but got false.  (Could this error message be improved?  If so, "
                           "please report an enhancement request to PyTorch.)")
    idx = F.narrow(_index_tensor(x), dim, start, length)._value
    return F._gathered(x, np.array(idx), F.V_NARROW_COPY)


# --- combinations ---------------------------------------------------------------------------
def combinations(input, r=2, with_replacement=False):  # noqa: A002
    """The ``r``-element combinations of the elements of the vector ``input``, one per row,
    in itertools' order (with repeated elements if ``with_replacement``); an empty vector for
    ``r=0``.  ``grad_fn``: ``<StackBackward0>``.

    Example:
        >>> tg.combinations(tg.tensor([1, 2, 3]))
        tensor([[1, 2],
                [1, 3],
                [2, 3]])
    """
    x = F.as_tensor_arg(input)
    if x._value.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(x._value.shape)}")
    r = F._int_arg(r)
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return Tensor._make(np.zeros(0, dtype=x._value.dtype))
    pick = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    # the rows depend only on the length, never on the values: nothing to guard
    rows = np.array(list(pick(range(x._value.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    return F.stack([F._gathered(x, np.ascontiguousarray(rows[:, k]), F.V_INDEX)
                    for k in range(r)], 1)


# --- gradient -------------------------------------------------------------------------------
def _number(s):
    return isinstance(s, (int, float, np.integer, np.floating)) and not isinstance(s, bool) \
        or isinstance(s, Tensor) and s._value.ndim == 0


def _as_float(s):
    """A distance: a number, or the number in a 0-d tensor (read: it is part of the
    function's structure, like an int argument)."""
    if isinstance(s, Tensor):
        read_value(s, "gradient()'s spacing")
        return float(s._value)
    return float(s)


# PyTorch's argument parser lists the signatures when spacing is one tensor of coordinates
_GRADIENT_SIGNATURES = (
    "gradient() received an invalid combination of arguments - got (Tensor, spacing=Tensor), "
    "but expected one of:\n"
    " * (Tensor input, *, tuple of ints dim, int edge_order = 1)\n"
    " * (Tensor input, *, Number spacing, tuple of ints dim, int edge_order = 1)\n"
    " * (Tensor input, *, Number spacing = None, int dim = None, int edge_order = 1)\n"
    " * (Tensor input, *, tuple of Scalars spacing, int dim = None, int edge_order = 1)\n"
    " * (Tensor input, *, tuple of Scalars spacing, tuple of ints dim, int edge_order = 1)\n"
    " * (Tensor input, *, tuple of Tensors spacing, int dim = None, int edge_order = 1)\n"
    " * (Tensor input, *, tuple of Tensors spacing, tuple of ints dim, int edge_order = 1)\n")


def gradient(input, *, spacing=1, dim=None, edge_order=1):  # noqa: A002
    """Estimates of the derivative of ``input`` along each dim (or those of ``dim``) by
    central differences inside and one-sided differences of order ``edge_order`` (1 or 2) at
    the ends: a tuple of tensors of ``input``'s shape.  ``spacing``: the sample distance (a
    number, or one per dim), or per dim a 1-D tensor of the sample coordinates.
    ``grad_fn``: ``<CatBackward0>``.

    Example:
        >>> tg.gradient(tg.tensor([1.0, 4.0, 9.0, 16.0]))
        (tensor([3., 4., 6., 7.]),)
    """
    x = F.as_tensor_arg(input)
    nd = x._value.ndim
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    if dim is None:
        dims = list(range(nd))
    else:
        given = [dim] if isinstance(dim, (int, np.integer)) else list(dim)
        dims = [F._wrap_dim(d, nd) for d in given]
        seen = set()
        for d in dims:
            if d in seen:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
            seen.add(d)
    if isinstance(spacing, Tensor) and spacing._value.ndim:
        raise TypeError(_GRADIENT_SIGNATURES)
    if _number(spacing):
        spacing = [_as_float(spacing)] * len(dims)
    else:
        spacing = list(spacing)
        if len(spacing) != len(dims):
            if dim is None:
                raise RuntimeError(
                    "torch.gradient expected spacing to be unspecified, a scalar, or a list of "
                    f"length equal to 'self.dim() = {nd}', since dim argument was not given, "
                    f"but got a list of length {len(spacing)}")
            raise RuntimeError(
                "torch.gradient expected spacing to be unspecified, a scalar or it's spacing "
                "and dim arguments to have the same length, but got a spacing argument of "
                f"length {len(spacing)} and a dim argument of length {len(dims)}.")
        coords = [isinstance(s, Tensor) for s in spacing]
        if builtins.any(coords) and not builtins.all(coords):
            first = coords.index(False)     # (PyTorch names the first that is no tensor)
            raise TypeError(f"expected Tensor as element {first} in argument 1, but got "
                            f"{type(spacing[first]).__name__}")
        for s in spacing:
            if isinstance(s, Tensor) and s._value.ndim != 1:
                raise RuntimeError("torch.gradient expected each element of spacing to have "
                                   f"one dimension, but got an element with {s._value.ndim} "
                                   "dimensions!")
    for d in dims:
        if x._value.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least "
                               "edge_order+1")
    if x._value.dtype.kind != "f":
        x = F.mul(x, 1.0)     # (PyTorch's result is floating, as are its differences)
    return tuple(_gradient_along(x, d, s, edge_order) for d, s in zip(dims, spacing))


def _part(x, d, lo, hi):
    n = x._value.shape[d]
    lo, hi = lo % n if lo < 0 else lo, n if hi is None else (hi % n if hi < 0 else hi)
    return F.narrow(x, d, lo, hi - lo)


def _gradient_along(x, d, s, edge_order):
    """The derivative estimate along dim d, with spacing s: a number or coordinates."""
    n = x._value.shape[d]
    first, second = _part(x, d, 0, 1), _part(x, d, 1, 2)
    last, before = _part(x, d, -1, None), _part(x, d, -2, -1)
    if not isinstance(s, Tensor):
        h = _as_float(s)
        # a distance h: (x[i+1] - x[i-1]) / 2h inside; at the ends the first or second
        # order one-sided differences
        inner = F.div(F.div(F.sub(_part(x, d, 2, None), _part(x, d, 0, -2)), h), 2)
        if edge_order == 1:
            lo = F.div(F.sub(second, first), h)
            hi = F.div(F.sub(last, before), h)
        else:
            lo = F.div(F.sub(F.add(F.mul(first, -1.5), F.mul(second, 2.0)),
                             F.mul(_part(x, d, 2, 3), 0.5)), h)
            hi = F.div(F.add(F.sub(F.mul(_part(x, d, -3, -2), 0.5), F.mul(before, 2.0)),
                             F.mul(last, 1.5)), h)
        return F.cat([lo, inner, hi], d)
    # coordinates: the weights of the three-point formula for uneven steps dx1, dx2
    shape = [1] * x._value.ndim
    shape[d] = n - 2
    dx = F.sub(s[1:], s[:-1])
    if n > 2:
        dx1, dx2 = dx[:-1], dx[1:]
        a = F.reshape(F.div(F.neg(dx2), F.mul(dx1, F.add(dx1, dx2))), *shape)
        b = F.reshape(F.div(F.sub(dx2, dx1), F.mul(dx1, dx2)), *shape)
        c = F.reshape(F.div(dx1, F.mul(dx2, F.add(dx1, dx2))), *shape)
        inner = F.add(F.add(F.mul(a, _part(x, d, 0, -2)), F.mul(b, _part(x, d, 1, -1))),
                      F.mul(c, _part(x, d, 2, None)))
    else:
        inner = _part(x, d, 0, 0)
    if edge_order == 1:
        lo = F.div(F.sub(second, first), dx[0])
        hi = F.div(F.sub(last, before), dx[-1])
        return F.cat([lo, inner, hi], d)
    d0, d1 = dx[0], dx[1]
    a = F.div(F.neg(F.add(F.mul(d0, 2.0), d1)), F.mul(d0, F.add(d0, d1)))
    b = F.div(F.add(d0, d1), F.mul(d0, d1))
    c = F.div(F.neg(d0), F.mul(d1, F.add(d0, d1)))
    lo = F.add(F.add(F.mul(a, first), F.mul(b, second)), F.mul(c, _part(x, d, 2, 3)))
    d1, d0 = dx[-1], dx[-2]
    a = F.div(d1, F.mul(d0, F.add(d1, d0)))
    b = F.div(F.neg(F.add(d1, d0)), F.mul(d1, d0))
    c = F.div(F.add(F.mul(d1, 2.0), d0), F.mul(d1, F.add(d1, d0)))
    hi = F.add(F.add(F.mul(a, _part(x, d, -3, -2)), F.mul(b, before)), F.mul(c, last))
    return F.cat([lo, inner, hi], d)


# --- new, resize_, resize_as_ ----------------------------------------------------------------
def new(self, *args, device=None):
    """``x.new(...)``, PyTorch's legacy constructor in x's dtype: ``new()`` an empty vector,
    ``new(2, 3)`` or ``new(Size)`` a tensor of that shape (uninitialized, as PyTorch's),
    ``new(list_or_tuple)`` one of that data; never requiring grad (``legacy.construct``).

    Example:
        >>> x = tg.tensor([1.5]); x.new([1, 2]), x.new(2, 3).shape
        (tensor([1., 2.]), tapegrad.Size([2, 3]))
    """
    return legacy.construct(self.dtype, args, {"device": device})


def resize_(self, *size):
    """``x.resize_(*size)``: x takes the shape ``size``, keeping its elements in order (the
    first ones where it shrinks; a later ``resize_`` to a larger size gets the others back, as
    PyTorch keeps its storage); new elements are uninitialized.  Refused for a tensor that
    requires grad, as in PyTorch, and for a view or a tensor with views (tapegrad).

    Example:
        >>> x = tg.arange(6.0); x.resize_(2, 2)
        tensor([[0., 1.],
                [2., 3.]])
    """
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    bad = [n for n in size if isinstance(n, (bool, np.bool_))
           or not isinstance(n, (int, np.integer))]
    if bad:
        raise TypeError("resize_(): argument 'size' (position 1) must be tuple of ints, not "
                        f"{type(bad[0]).__name__}")
    if self._rg:
        raise RuntimeError("cannot resize variables that require grad")
    if any(n < 0 for n in size):
        raise RuntimeError("numel: integer multiplication overflow")
    return _resized(self, tuple(int(n) for n in size), "resize_")


def resize_as_(self, the_template):
    """``x.resize_(*the_template.shape)``.

    Example:
        >>> tg.arange(6.0).resize_as_(tg.zeros(3, 2)).shape
        tapegrad.Size([3, 2])
    """
    if not isinstance(the_template, Tensor):
        raise TypeError("resize_as_(): argument 'the_template' (position 1) must be Tensor, "
                        f"not {type(the_template).__name__}")
    if self._rg:
        raise RuntimeError("cannot resize variables that require grad")
    return _resized(self, the_template._value.shape, "resize_as_")


def _resized(t, shape, name):
    link = t._alias
    if type(link) is Views and not link.live():
        t._alias = link = None
    if link is not None:
        raise RuntimeError(f"tapegrad does not support {name}() on a view or on a tensor that "
                           "has views (their elements would no longer follow it); resize a "
                           "clone()")
    if state.trace is not None:
        state.trace.opaque(f"{name}()")
    n = int(np.prod(shape, dtype=np.int64))
    store = _STORAGE.get(t)
    if store is None or not np.shares_memory(t._value, store):
        store = t._value.reshape(-1)    # (the tensor's own memory, or a copy in order)
    if store.size < n:
        grown = np.empty(n, dtype=store.dtype)
        grown[:store.size] = store
        store = grown
    _STORAGE.set(t, store)
    t._value = store[:n].reshape(shape)
    t._version += 1
    return t


# the memory behind a resized tensor, longer than its value after it shrank
_STORAGE = _ById()


# --- methods --------------------------------------------------------------------------------
def _method(fn, name):
    """``x.name(other)``: ``other`` is the method's first argument in PyTorch's errors."""
    def method(self, other):
        return fn(self, other, name, 1)
    method.__name__ = name
    return method


def _in_place(fn, name):
    """``x.name_(other)``: the result written into x, refused first, as PyTorch does, where
    the promoted type cannot be cast to x's (a float result into an integer tensor)."""
    write = _recomputed_(name, lambda self, other: fn(self, other, name, 1))

    def method(self, other):
        _other_tensor(name, other, 1)
        dt = _promote.result_dtype(self, other)
        if dt.is_floating_point and not self._value.dtype.kind == "f":
            raise RuntimeError(f"result type {dt.scalar_name} can't be cast to the desired "
                               f"output type {self.dtype.scalar_name}")
        return write(self, other)
    method.__name__ = name
    return method


METHODS = {
    "gcd": _method(_gcd, "gcd"), "lcm": _method(_lcm, "lcm"),
    "nextafter": _method(_nextafter, "nextafter"),
    "gcd_": _in_place(_gcd, "gcd_"), "lcm_": _in_place(_lcm, "lcm_"),
    "nextafter_": _in_place(_nextafter, "nextafter_"),
    "heaviside_": _recomputed_("heaviside_", heaviside),
    "angle": angle, "hardshrink": hardshrink, "prelu": prelu, "sum_to_size": sum_to_size,
    "unsafe_chunk": unsafe_chunk, "unsafe_split": unsafe_split,
    "unsafe_split_with_sizes": unsafe_split_with_sizes, "narrow_copy": narrow_copy,
    "new": new, "resize_": resize_, "resize_as_": resize_as_,
}
