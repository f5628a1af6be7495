"""Public testing helpers: gradient checks against central finite differences, and
hypothesis strategies for property-testing your own functions.

``gradcheck`` checks a vector-Jacobian product by random projection: for a random output
cotangent ``v`` and a random input direction ``u``, ``<v, J u>`` (J u by central differences)
must equal ``<J^T v, u>`` (J^T v by tapegrad's backward).  One pass checks every input at
once, for any shapes.
"""
import cmath
import collections.abc
import numbers
import warnings

import numpy as np

from .autograd import grad as _grad
from .autograd import no_grad
from .creation import tensor
from .tensor import Tensor

__all__ = ["assert_close", "assert_allclose", "gradcheck", "gradgradcheck", "numerical_vjp", "arrays", "broadcastable_pair", "floats"]


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _evaluate(fn, values, templates):
    args = [tensor(v) if isinstance(t, Tensor) else t for v, t in zip(values, templates)]
    with no_grad():
        outs = _as_tuple(fn(*args))
    return [np.array(o._value, dtype=np.float64) for o in outs]


def numerical_vjp(fn, inputs, cotangents, directions, eps=1e-6):
    """<v, J u> by central differences, summed over outputs.

    Shape: ``directions`` (u) holds one array per input, of its shape (None for an input not
    moved); ``cotangents`` (v) one array per output, of its shape.  Returns a float.

    Example:
        >>> x = tg.tensor([1.0, 2.0])
        >>> u, v = [np.array([1.0, 0.0])], [np.ones(2)]
        >>> round(numerical_vjp(lambda a: a * a, [x], v, u), 6)      # d(x0^2)/dx0 at 1
        2.0
    """
    values = [np.asarray(x._value, dtype=np.float64) if isinstance(x, Tensor) else x
              for x in inputs]
    plus = [v + eps * u if u is not None else v for v, u in zip(values, directions)]
    minus = [v - eps * u if u is not None else v for v, u in zip(values, directions)]
    fp = _evaluate(fn, plus, inputs)
    fm = _evaluate(fn, minus, inputs)
    total = 0.0
    for a, b, v in zip(fp, fm, cotangents):
        total += float(np.sum((a - b) / (2 * eps) * v))
    return total


def gradcheck(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0, raise_exception=True,
              trials=2):
    """Check tapegrad's gradients of ``fn`` against central finite differences.

    ``inputs`` are tensors (those with ``requires_grad=True`` are checked) or other values
    passed through.  ``fn`` returns a tensor or a tuple of tensors.  Returns True, or raises
    AssertionError (returns False with ``raise_exception=False``) naming the mismatch.

    Each trial compares ``<v, J u>`` for random directions ``u`` and cotangents ``v``: from
    tapegrad's backward (``u . J^T v``) and from central differences, so any input and output
    shapes are checked at the cost of two backward passes and four function calls.

    Example:
        >>> a = tg.randn(3, requires_grad=True)
        >>> b = tg.randn(3, requires_grad=True)
        >>> gradcheck(lambda a, b: (a * b).sin().sum(), a, b)
        True
    """
    rng = np.random.default_rng(seed)
    checked = [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input requires grad")
    outs = _as_tuple(fn(*inputs))
    diff_outs = [o for o in outs if isinstance(o, Tensor) and o.requires_grad]
    for _ in range(trials):
        cot = [rng.standard_normal(o.shape) for o in outs]
        dirs = [rng.standard_normal(x.shape) if isinstance(x, Tensor) and x.requires_grad
                else None for x in inputs]
        numeric = numerical_vjp(fn, inputs, cot, dirs, eps)
        if diff_outs:
            pairs = [(o, c) for o, c in zip(outs, cot) if isinstance(o, Tensor) and o.requires_grad]
            grads = _grad([o for o, _ in pairs], checked,
                          grad_outputs=[tensor(c) for _, c in pairs], retain_graph=True,
                          allow_unused=True)
        else:
            grads = [None] * len(checked)
        analytic = 0.0
        gi = iter(grads)
        for x, u in zip(inputs, dirs):
            if u is None:
                continue
            g = next(gi)
            if g is not None:
                analytic += float(np.sum(g._value * u))
        if not np.isclose(analytic, numeric, rtol=rtol, atol=atol):
            msg = (f"gradcheck failed: <J^T v, u> = {analytic!r} from backward, but "
                   f"<v, J u> = {numeric!r} from central differences (eps={eps})")
            if raise_exception:
                raise AssertionError(msg)
            return False
    return True


def gradgradcheck(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0,
                  raise_exception=True, trials=2):
    """Check tapegrad's second derivatives of ``fn`` against central differences of its
    gradients.

    Arguments as ``gradcheck``.  For a random output cotangent ``v``, ``h = <v, fn(inputs)>``
    is a scalar function of the inputs that require grad (flattened into one vector ``z``);
    each trial compares ``<w, H u>`` for random ``u``, ``w`` -- H u from tapegrad's forward over
    reverse (``hvp``, which runs custom ops' curvature kernels), or where that has no rule from
    a differentiable backward (``create_graph``) -- with ``<w, (grad h(z + eps u) - grad
    h(z - eps u)) / (2 eps)>`` from tapegrad's backward.  Run ``gradcheck`` first: this
    trusts the gradient.

    Example:
        >>> a = tg.randn(3, requires_grad=True)
        >>> gradgradcheck(lambda a: (a * a.sin()).sum(), a)
        True
    """
    from .higher import hvp
    rng = np.random.default_rng(seed)
    slots = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not slots:
        raise ValueError("gradgradcheck: no input requires grad")
    shapes = [tuple(inputs[i].shape) for i in slots]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    z0 = np.concatenate([np.asarray(inputs[i]._value, dtype=np.float64).reshape(-1)
                         for i in slots])
    with no_grad():
        outs = _as_tuple(fn(*inputs))
    for _ in range(trials):
        cot = [tensor(rng.standard_normal(o.shape)) if isinstance(o, Tensor) else None
               for o in outs]

        def h(z):
            args, off = list(inputs), 0
            for i, shape, n in zip(slots, shapes, sizes):
                args[i] = z[off:off + n].reshape(shape)
                off += n
            total = None
            for o, c in zip(_as_tuple(fn(*args)), cot):
                if c is not None:
                    term = (o * c).sum()
                    total = term if total is None else total + term
            return total

        def grad_at(values):
            z = tensor(values, requires_grad=True)
            return _grad([h(z)], [z], allow_unused=True)[0]

        u, w = rng.standard_normal(z0.size), rng.standard_normal(z0.size)
        try:
            hu = np.asarray(hvp(h, tensor(z0), tensor(u))._value)
        except Exception as first:
            try:   # (a Python backward: no forward-over-reverse rule)
                z = tensor(z0, requires_grad=True)
                g = _grad([h(z)], [z], create_graph=True)[0]
                hu = np.asarray(_grad([(g * tensor(u)).sum()], [z])[0]._value)
            except Exception:
                raise first from None
        gp, gm = grad_at(z0 + eps * u), grad_at(z0 - eps * u)
        numeric = 0.0
        if gp is not None and gm is not None:
            numeric = float(np.sum((np.asarray(gp._value) - np.asarray(gm._value))
                                   / (2 * eps) * w))
        analytic = float(np.sum(hu * w))
        if not np.isclose(analytic, numeric, rtol=rtol, atol=atol):
            msg = (f"gradgradcheck failed: <w, H u> = {analytic!r} from forward over "
                   f"reverse, but {numeric!r} from central differences of the gradient "
                   f"(eps={eps})")
            if raise_exception:
                raise AssertionError(msg)
            return False
    return True


# --- hypothesis strategies (hypothesis is imported only when these are used) ----------------
def floats(low=-10.0, high=10.0):
    """Finite float64 values in [low, high], away from subnormals.

    A hypothesis strategy (hypothesis must be installed); ``arrays`` draws its elements here.

    Example:
        >>> from hypothesis import given, settings
        >>> @settings(max_examples=20, deadline=None, database=None)
        ... @given(floats(-1.0, 1.0))
        ... def test_abs(x):
        ...     assert tg.abs(tg.tensor(x)).item() == abs(x)
        >>> test_abs()
    """
    from hypothesis import strategies as st
    return st.floats(low, high, allow_nan=False, allow_infinity=False, allow_subnormal=False,
                     width=64)


def arrays(shape=None, low=-10.0, high=10.0, min_dims=0, max_dims=3, max_side=4):
    """float64 arrays of a given or random shape (0-d, size-1 and empty sides included).

    A hypothesis strategy of NumPy arrays: pass ``shape`` for a fixed shape, else the shape
    has ``min_dims`` to ``max_dims`` dims of sides 1 to ``max_side``.

    Example:
        >>> from hypothesis import given, settings
        >>> @settings(max_examples=20, deadline=None, database=None)
        ... @given(arrays(shape=(2, 3)))
        ... def test_sum(a):
        ...     x = tg.tensor(a, requires_grad=True)
        ...     x.sum().backward()
        ...     assert x.grad.shape == (2, 3) and bool((x.grad == 1).all())
        >>> test_sum()
    """
    from hypothesis.extra import numpy as hnp
    if shape is None:
        shape = hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1,
                                 max_side=max_side)
    return hnp.arrays(np.float64, shape, elements=floats(low, high))


def broadcastable_pair(low=-10.0, high=10.0, max_dims=3, max_side=4):
    """Two float64 arrays whose shapes broadcast together.

    A hypothesis strategy of ``(a, b)`` NumPy arrays, for testing a binary op's broadcasting and
    the gradients that undo it.

    Example:
        >>> from hypothesis import given, settings
        >>> @settings(max_examples=20, deadline=None, database=None)
        ... @given(broadcastable_pair())
        ... def test_add_grad_shapes(pair):
        ...     a, b = (tg.tensor(v, requires_grad=True) for v in pair)
        ...     (a + b).sum().backward()
        ...     assert a.grad.shape == a.shape and b.grad.shape == b.shape
        >>> test_add_grad_shapes()
    """
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    @st.composite
    def pair(draw):
        shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0,
                                                        max_dims=max_dims, min_side=1,
                                                        max_side=max_side))
        a = draw(arrays(shapes.input_shapes[0], low, high))
        b = draw(arrays(shapes.input_shapes[1], low, high))
        return a, b
    return pair()



# torch.testing's default (rtol, atol) per dtype; tapegrad's only floating dtype is float64,
# and integers and bools compare exactly
_DEFAULT_TOLERANCES = {"float64": (1e-7, 1e-7), "float32": (1.3e-6, 1e-5),
                       "float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5)}


class _Failure(Exception):
    """A mismatch found somewhere inside nested inputs: its error type, message and the
    path of keys/indices that led there (for "The failure occurred for item ...")."""

    def __init__(self, kind, message, path=()):
        super().__init__(message)
        self.kind, self.message, self.path = kind, message, path


def _mismatch_message(what, *, extra, abs_diff, abs_idx, atol, rel_diff, rel_idx, rtol):
    equality = rtol == 0 and atol == 0
    lines = [f"{what} are not {'equal' if equality else 'close'}!", ""]
    if extra:
        lines.append(extra)
    for kind, diff, idx, tol in (("absolute", abs_diff, abs_idx, atol),
                                 ("relative", rel_diff, rel_idx, rtol)):
        line = (f"{kind.title()} difference: {diff}" if idx is None
                else f"Greatest {kind} difference: {diff} at index {idx}")
        lines.append(line if equality else line + f" (up to {tol} allowed)")
    return "\n".join(lines)


def _number_tolerance(x):
    return _DEFAULT_TOLERANCES["float64"] if isinstance(x, (float, complex)) else (0, 0)


def _compare_numbers(actual, expected, rtol, atol, equal_nan, check_dtype):
    if isinstance(actual, bool) and isinstance(expected, bool):
        if actual is not expected:    # PyTorch compares two bools apart from numbers
            raise _Failure(AssertionError, f"Booleans mismatch: {actual} is not {expected}")
        return
    if check_dtype and type(actual) is not type(expected):
        raise _Failure(AssertionError,
                       f"The (d)types do not match: {type(actual)} != {type(expected)}.")
    if rtol is None:
        rtol, atol = (max(a, b) for a, b in zip(_number_tolerance(actual),
                                                 _number_tolerance(expected)))
    if equal_nan and cmath.isnan(actual) and cmath.isnan(expected):
        return
    abs_diff = abs(actual - expected)
    if cmath.isfinite(abs_diff) and abs_diff <= atol + rtol * abs(expected):
        return
    rel_diff = float("inf") if expected == 0 else abs_diff / abs(expected)
    raise _Failure(AssertionError, _mismatch_message(
        "Scalars", extra=f"Expected {expected} but got {actual}.", abs_diff=abs_diff,
        abs_idx=None, atol=atol, rel_diff=rel_diff, rel_idx=None, rtol=rtol))


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype,
                     check_layout, check_stride):
    checks = [("shape", True), ("device", check_device), ("dtype", check_dtype),
              ("layout", check_layout)]
    for name, wanted in checks:
        a, b = getattr(actual, name), getattr(expected, name)
        if wanted and a != b:
            raise _Failure(AssertionError, f"The values for attribute '{name}' do not match: "
                                           f"{a!r} != {b!r}.")
    if check_stride and actual.stride() != expected.stride():
        raise _Failure(AssertionError, "The values for attribute 'stride()' do not match: "
                                       f"{actual.stride()!r} != {expected.stride()!r}.")
    if rtol is None:
        rtol, atol = (max(a, b) for a, b in zip(
            _DEFAULT_TOLERANCES.get(actual.dtype.name, (0, 0)),
            _DEFAULT_TOLERANCES.get(expected.dtype.name, (0, 0))))
    a, b = np.asarray(actual._value), np.asarray(expected._value)
    floating = actual.dtype.is_floating_point or expected.dtype.is_floating_point
    # compared in the promoted type: integers as int64 (bools too), exact when both are
    a, b = (a.astype(np.float64), b.astype(np.float64)) if floating else \
        (a.astype(np.int64), b.astype(np.int64))
    if rtol == 0 and atol == 0:
        matches = a == b
        if floating and equal_nan:
            matches |= np.isnan(a) & np.isnan(b)
    else:
        matches = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if matches.all():
        return
    if a.ndim == 0:
        # a 0-d tensor reads as a scalar, given as its own dtype's Python value (True, 3, 1.5)
        got, want = np.asarray(actual._value).item(), np.asarray(expected._value).item()
        diff = abs(a.item() - b.item())
        raise _Failure(AssertionError, _mismatch_message(
            "Scalars", extra=f"Expected {want} but got {got}.", abs_diff=diff, abs_idx=None,
            atol=atol, rel_diff=float("inf") if b.item() == 0 else diff / abs(b.item()),
            rel_idx=None, rtol=rtol))
    total, bad = matches.size, int(matches.size - matches.sum())
    flat_ok = matches.ravel()
    abs_diff = np.abs(a.ravel() - b.ravel())
    abs_diff[flat_ok] = 0
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_diff = abs_diff / np.abs(b.ravel()).astype(np.float64)
    rel_diff[flat_ok] = 0
    # the first greatest, as torch.max reports it; a nan difference counts as the greatest
    i_abs = int(np.argmax(abs_diff)) if not floating or not np.isnan(abs_diff).any() \
        else int(np.flatnonzero(np.isnan(abs_diff))[0])
    i_rel = int(np.argmax(rel_diff)) if not np.isnan(rel_diff).any() \
        else int(np.flatnonzero(np.isnan(rel_diff))[0])
    raise _Failure(AssertionError, _mismatch_message(
        "Tensor-likes", extra=f"Mismatched elements: {bad} / {total} ({bad / total:.1%})",
        abs_diff=abs_diff[i_abs].item(), abs_idx=tuple(int(k) for k in
                                                       np.unravel_index(i_abs, a.shape)),
        atol=atol, rel_diff=rel_diff[i_rel].item(),
        rel_idx=tuple(int(k) for k in np.unravel_index(i_rel, a.shape)), rtol=rtol))


def _compare(actual, expected, path, options):
    if isinstance(actual, Tensor) and isinstance(expected, Tensor):
        return _compare_tensors(actual, expected, **options)
    rtol, atol, equal_nan = options["rtol"], options["atol"], options["equal_nan"]
    if isinstance(actual, numbers.Number) and isinstance(expected, numbers.Number) and \
            not isinstance(actual, Tensor) and not isinstance(expected, Tensor):
        return _compare_numbers(actual, expected, rtol, atol, equal_nan, options["check_dtype"])
    if all(isinstance(x, collections.abc.Sequence) and not isinstance(x, (str, bytes))
           for x in (actual, expected)):
        if len(actual) != len(expected):
            raise _Failure(AssertionError, "The length of the sequences mismatch: "
                                           f"{len(actual)} != {len(expected)}", path)
        for i, (a, b) in enumerate(zip(actual, expected)):
            _nested(a, b, path + (i,), options)
        return None
    if all(isinstance(x, collections.abc.Mapping) for x in (actual, expected)):
        if set(actual) != set(expected):
            missing = sorted(set(expected) - set(actual), key=repr)
            extra = sorted(set(actual) - set(expected), key=repr)
            raise _Failure(AssertionError, "The keys of the mappings do not match:\n"
                                           f"Missing keys in the actual mapping: {missing}\n"
                                           f"Additional keys in the actual mapping: {extra}",
                           path)
        for key in sorted(actual, key=repr) if not isinstance(actual, dict) else actual:
            _nested(actual[key], expected[key], path + (key,), options)
        return None
    raise _Failure(TypeError, "No comparison pair was able to handle inputs of type "
                              f"{type(actual)} and {type(expected)}.", path)


def _nested(actual, expected, path, options):
    try:
        _compare(actual, expected, path, options)
    except _Failure as failure:
        if not failure.path:
            failure.path = path
        raise


def assert_close(actual, expected, *, rtol=None, atol=None, equal_nan=False, check_device=True,
                 check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """Raise ``AssertionError`` unless ``actual`` and ``expected`` are close, as
    ``torch.testing.assert_close``: ``|actual - expected| <= atol + rtol * |expected|`` elementwise,
    after checking shape, device, dtype and layout (and strides if asked).

    Inputs may be tensors, Python numbers, and sequences or mappings of them (compared item
    by item).  Without ``rtol``/``atol`` the tolerances are PyTorch's defaults for the dtype:
    float64 ``rtol=1e-7, atol=1e-7``; integers and bools must be equal.  ``msg`` replaces the
    message, or (a callable) is given it and returns the one to raise.  The message has
    PyTorch's wording ("Tensor-likes are not close!", mismatched elements, greatest absolute and
    relative differences and their index).

    Example:
        >>> tg.testing.assert_close(tg.tensor([1.0, 2.0]), tg.tensor([1.0, 2.0 + 1e-9]))
        >>> tg.testing.assert_close(tg.tensor([1.0, 2.0]), tg.tensor([1.0, 2.5]))
        Traceback (most recent call last):
        ...
        AssertionError: Tensor-likes are not close!
        <BLANKLINE>
        Mismatched elements: 1 / 2 (50.0%)
        Greatest absolute difference: 0.5 at index (1,) (up to 1e-07 allowed)
        Greatest relative difference: 0.2 at index (1,) (up to 1e-07 allowed)
    """
    if (rtol is None) != (atol is None):
        raise ValueError("Both 'rtol' and 'atol' must be either specified or omitted, but got "
                         f"no {'atol' if rtol is not None else 'rtol'}.")
    options = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device,
                   check_dtype=check_dtype, check_layout=check_layout, check_stride=check_stride)
    try:
        _nested(actual, expected, (), options)
    except _Failure as failure:
        text = failure.message
        if failure.path and failure.kind is AssertionError:
            text += "\n\nThe failure occurred for item " + "".join(str([k]) for k in failure.path)
        if failure.kind is AssertionError and msg is not None:
            text = msg(text) if callable(msg) else msg
        raise failure.kind(text) from None


# assert_allclose's own tolerances by dtype (looser than assert_close's for float64)
_ALLCLOSE_TOLERANCES = {"float16": (1e-3, 1e-3), "float32": (1e-4, 1e-5),
                        "float64": (1e-5, 1e-8)}


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """Deprecated form of ``assert_close`` kept for old test code, with PyTorch's
    FutureWarning: NaNs compare equal, dtypes may differ, numbers and lists are made
    tensors, and the default tolerances are its own per dtype."""
    warnings.warn(
        "`tapegrad.testing.assert_allclose()` is deprecated since 1.12 and will be removed in a "
        "future release. Please use `tapegrad.testing.assert_close()` instead. You can find "
        "detailed upgrade instructions in https://github.com/pytorch/pytorch/issues/61844.",
        FutureWarning, stacklevel=2)
    if not isinstance(actual, Tensor):
        actual = tensor(actual)
    if not isinstance(expected, Tensor):
        expected = tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        pairs = [_ALLCLOSE_TOLERANCES.get(str(t.dtype).split(".")[-1], (0.0, 0.0))
                 for t in (actual, expected)]
        rtol, atol = max(p[0] for p in pairs), max(p[1] for p in pairs)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan,
                 check_device=True, check_dtype=False, check_stride=False, msg=msg or None)


from ._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
