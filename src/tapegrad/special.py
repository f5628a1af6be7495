"""``tapegrad.special``: PyTorch's ``torch.special`` names for special functions.

Most are tapegrad's ops under their SciPy-style names (``expit`` is ``sigmoid``, ``gammaln``
is ``lgamma``, ``psi`` is ``digamma``); the rest are built from recorded ops.
"""
import math

import numpy as np

from . import derived as D
from . import functional as F
from ._public import public_dir
from .tensor import Tensor

__all__ = ["erf", "erfc", "erfinv", "erfcx", "expit", "logit", "exp2", "expm1", "log1p",
           "gammaln", "digamma", "psi", "polygamma", "multigammaln", "xlogy", "xlog1py",
           "sinc", "entr", "ndtr", "ndtri", "log_ndtr", "logsumexp", "softmax",
           "log_softmax", "round", "i0", "i0e", "i1", "i1e", "gammainc", "gammaincc"]

erf = F.erf
erfc = F.erfc
erfinv = F.erfinv
expit = F.sigmoid
exp2 = F.exp2
expm1 = F.expm1
log1p = F.log1p
gammaln = F.lgamma
digamma = F.digamma
psi = F.digamma
polygamma = F.polygamma
multigammaln = F.mvlgamma
xlogy = F.xlogy
xlog1py = D.xlog1py
logit = D.logit
sinc = D.sinc
logsumexp = F.logsumexp
round = F.round  # noqa: A001 - PyTorch's name
i0 = F.i0
i0e = F.i0e
i1 = F.i1
i1e = F.i1e


_tensor = F.as_tensor_arg


def softmax(input, dim, *, dtype=None):  # noqa: A002 - PyTorch's argument name
    """``softmax`` along ``dim``.

    Example:
        >>> tg.special.softmax(tg.tensor([0.0, 0.0]), 0)
        tensor([0.5000, 0.5000])
    """
    return F.softmax(_tensor(input), dim, dtype)


def log_softmax(input, dim, *, dtype=None):  # noqa: A002
    """``log_softmax`` along ``dim``.

    Example:
        >>> tg.special.log_softmax(tg.tensor([0.0, 0.0]), 0)
        tensor([-0.6931, -0.6931])
    """
    return F.log_softmax(_tensor(input), dim, dtype)


def entr(input):  # noqa: A002
    """Elementwise entropy term ``-x log x`` (0 at 0, -inf below 0).

    Example:
        >>> tg.special.entr(tg.tensor([0.0, 0.5]))
        tensor([0.0000, 0.3466])
    """
    x = _tensor(input)
    neg = F._compare(np.less, x, 0.0)
    # (+ 0.0: the entropy term of 0 is +0, where -(0 log 0) would be -0)
    return F.named_node(F.where(neg, -math.inf, F.add(F.neg(F.xlogy(x, x)), 0.0)),
                        "SpecialEntrBackward0", x)


def ndtr(input):  # noqa: A002
    """The standard normal distribution function ``(1 + erf(x / sqrt 2)) / 2``.

    Example:
        >>> tg.special.ndtr(tg.tensor([0.0]))
        tensor([0.5000])
    """
    x = _tensor(input)
    return F.mul(F.erfc(F.mul(x, -math.sqrt(0.5))), 0.5)


def ndtri(input):  # noqa: A002
    """The inverse of ``ndtr``: ``sqrt 2 * erfinv(2 p - 1)``.

    Example:
        >>> tg.special.ndtri(tg.tensor([0.5, 0.975]))
        tensor([0.0000, 1.9600])
    """
    p = _tensor(input)
    return F.mul(F.erfinv(F.sub(F.mul(p, 2.0), 1.0)), math.sqrt(2.0))


def _tail_series(t):
    """sum_k (-1)**k (2k-1)!! / (2 t**2)**k for k < 8: erfc(t) = exp(-t**2) / (t sqrt(pi))
    times this, to float64 precision for t >= 14."""
    u = F.reciprocal(F.mul(F.mul(t, t), 2.0))
    total = F.add(F.mul(u, 0.0), 1.0)
    term = total
    for k in range(1, 8):
        term = F.mul(F.mul(term, u), -(2.0 * k - 1.0))
        total = F.add(total, term)
    return total


def log_ndtr(input):  # noqa: A002
    """``log(ndtr(x))``, accurate far into the lower tail (where ndtr underflows).

    Example:
        >>> tg.special.log_ndtr(tg.tensor([-40.0]))
        tensor([-804.6084])
    """
    x = _tensor(input)
    t = F.mul(x, -math.sqrt(0.5))
    low = F._compare(np.less, x, -20.0)
    # each branch sees inputs of its own range only, so no inf or nan reaches the gradient
    t_direct = F.where(low, 0.0, t)
    t_tail = F.where(low, t, 20.0)
    direct = F.log(F.mul(F.erfc(t_direct), 0.5))
    tail = F.add(F.sub(F.neg(F.mul(t_tail, t_tail)),
                       F.log(F.mul(F.mul(t_tail, 2.0), math.sqrt(math.pi)))),
                 F.log(_tail_series(t_tail)))
    return F.where(low, tail, direct)


def erfcx(input):  # noqa: A002
    """The scaled complementary error function ``exp(x**2) erfc(x)``, finite for large x.

    Example:
        >>> tg.special.erfcx(tg.tensor([0.0, 30.0]))
        tensor([1.0000, 0.0188])
    """
    x = _tensor(input)
    high = F._compare(np.greater, x, 20.0)
    x_direct = F.where(high, 0.0, x)
    x_tail = F.where(high, x, 20.0)
    direct = F.mul(F.exp(F.mul(x_direct, x_direct)), F.erfc(x_direct))
    tail = F.div(_tail_series(x_tail), F.mul(x_tail, math.sqrt(math.pi)))
    return F.where(high, tail, direct)


def _regularised_gamma(upper):
    # P(a, x) (Q(a, x) for upper) by SciPy's Cephes-derived igam/igamc, with PyTorch's
    # gradient for x: the gamma density (its negative for Q).  PyTorch has none for a and
    # raises when a sweep needs it; a custom backward here cannot tell which inputs the
    # sweep needs, so it raises PyTorch's error when x needs no gradient (a's is then what
    # was asked for) and otherwise leaves a without one
    from scipy import special as scipy_special

    from .function import BackwardCFunction, Function
    from .tensor import Tensor

    name = "igammac" if upper else "igamma"
    evaluate = scipy_special.gammaincc if upper else scipy_special.gammainc

    class _Regularised(Function):
        @staticmethod
        def forward(ctx, a, x):
            ctx.save_for_backward(a, x)
            va, vx = a.detach().numpy(), x.detach().numpy()
            with np.errstate(all="ignore"):
                return Tensor._make(np.asarray(evaluate(va, vx), dtype=np.result_type(va, vx)))

        @staticmethod
        def backward(ctx, grad):
            a, x = ctx.saved_tensors
            if ctx.needs_input_grad[0] and not ctx.needs_input_grad[1]:
                raise NotImplementedError(f"the derivative for '{name}: input' is not "
                                          "implemented.")
            density = F.exp(F.sub(F.sub(F.mul(F.sub(a, 1.0), F.log(x)), x), F.lgamma(a)))
            g = F.mul(grad, density)
            return None, (F.neg(g) if upper else g)

    _Regularised._backward_cls = type(
        ("Igammac" if upper else "Igamma") + "Backward0", (BackwardCFunction,),
        {"__slots__": (), "__module__": "tapegrad.autograd.function",
         "__repr__": lambda self: f"<{type(self).__name__} object at {hex(id(self))}>"})
    return _Regularised


_REGULARISED = {}


def _regularised(upper, input, other):  # noqa: A002
    if upper not in _REGULARISED:
        _REGULARISED[upper] = _regularised_gamma(upper)
    a, x = _tensor(input), _tensor(other)
    shape = D.broadcast_shapes(tuple(a.shape), tuple(x.shape))
    a, x = (t if tuple(t.shape) == shape else t.expand(shape) for t in (a, x))
    return _REGULARISED[upper].apply(a, x)


def gammainc(input, other):  # noqa: A002
    """The regularised lower incomplete gamma function P(a, x) (``torch.special.gammainc``,
    ``torch.igamma``); differentiable in x only, as in PyTorch.  Within about 1e-14 of
    PyTorch's for a < 20, about 2e-9 above (where the two use different expansions).

    Example:
        >>> tg.special.gammainc(tg.tensor([1.0]), tg.tensor([1.0]))
        tensor([0.6321])
    """
    return _regularised(False, input, other)


def gammaincc(input, other):  # noqa: A002
    """The regularised upper incomplete gamma function Q(a, x) = 1 - P(a, x)
    (``torch.special.gammaincc``, ``torch.igammac``); differentiable in x only.

    Example:
        >>> tg.special.gammaincc(tg.tensor([1.0]), tg.tensor([1.0]))
        tensor([0.3679])
    """
    return _regularised(True, input, other)




# ---------------------------------------------------------------------------------------------
# Bessel, Airy and Hurwitz zeta functions and the classical orthogonal polynomials.  PyTorch
# records no gradient for these (their results never require one), but for zeta's in q.
# ---------------------------------------------------------------------------------------------

def _float_values(name, *args):
    """The float64 values of tensors and Python numbers ``args``, broadcast together; a
    complex tensor is refused as PyTorch's CPU kernel refuses it."""
    values = []
    for a in args:
        if isinstance(a, Tensor):
            if a._value.dtype.kind == "c":
                raise NotImplementedError(
                    f"\"{name}_cpu\" not implemented for '{a.dtype.scalar_name}'")
            values.append(a._value.astype(np.float64))
        else:
            values.append(np.float64(a))
    return np.broadcast_arrays(*values) if len(values) > 1 else values


def _written(result, out):
    """``result``, or, given ``out``, ``out`` resized and filled with it (PyTorch's ``out=``):
    a float result fits only a floating ``out``."""
    if out is None:
        return result
    if out._value.dtype.kind not in "fc":
        raise RuntimeError("result type Double can't be cast to the desired output type "
                           f"{out.dtype.scalar_name}")
    from .autograd import no_grad
    with no_grad():
        if tuple(out.shape) != tuple(result.shape):
            out.resize_(result.shape)
        out.copy_(result)
    return out


def _untracked(name, evaluate, input, out):  # noqa: A002
    values = _float_values(name, input)[0]
    with np.errstate(all="ignore"):
        result = Tensor._make(np.asarray(evaluate(values), dtype=np.float64))
    return _written(result, out)


def _unary_special(name, evaluate, summary, example, shown, argument="input"):
    # (PyTorch calls the argument ``input`` or ``x``, which a keyword call must spell)
    if argument == "x":
        def function(x, *, out=None):
            return _untracked(name, evaluate, _tensor(x), out)
    else:
        def function(input, *, out=None):  # noqa: A002 - PyTorch's argument name
            return _untracked(name, evaluate, _tensor(input), out)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = (f"{summary}  PyTorch gives it no gradient.\n\n    Example:\n"
                        f"        >>> tg.special.{name}({example})\n        {shown}\n    ")
    return function


def _scipy(fname):
    # scipy.special's Cephes-derived functions, those PyTorch's kernels are written from
    from scipy import special as scipy_special
    return lambda v: getattr(scipy_special, fname)(v)


def _airy_ai(v):
    from scipy import special as scipy_special
    return scipy_special.airy(v)[0]


def _spherical_j0(v):
    # sin(x) / x, 0 at the infinities; below 1/2 the Taylor polynomial to x**12 (where the
    # quotient loses digits), summed as PyTorch's kernel sums it
    small = np.abs(v) < 0.5
    x2 = v * v
    series = 1.0 + x2 * (-1.0 / 6.0 + x2 * (1.0 / 120.0 + x2 * (-1.0 / 5040.0 + x2 * (
        1.0 / 362880.0 + x2 * (-1.0 / 39916800.0 + x2 * (1.0 / 6227020800.0))))))
    quotient = np.where(np.isinf(v), 0.0, np.sin(v) / np.where(small, 1.0, v))
    return np.where(small, series, quotient)


def _recurrence(first, second, step, x, n):
    """p_n(x) for the integer degrees ``n`` by a three-term recurrence: p_0 = ``first``,
    p_1 = ``second`` and p_{k+1} = ``step(k, p_k, p_{k-1})`` (for k from 1), each element
    stopping at its own degree."""
    p = np.broadcast_to(np.asarray(first, dtype=np.float64), x.shape).copy()
    q = np.broadcast_to(np.asarray(second, dtype=np.float64), x.shape).copy()
    result = np.where(n == 0, p, q)
    top = int(n.max()) if n.size else 0
    for k in range(1, top):
        p, q = q, step(k, q, p)
        result = np.where(n == k + 1, q, result)
    return result


def _degrees(n):
    # the degree as PyTorch's kernel reads it: truncated to an integer (a C cast, which
    # gives the most negative integer for NaN and out-of-range values)
    with np.errstate(invalid="ignore"):
        fits = np.isfinite(n) & (np.abs(n) < 2.0 ** 63)
        return np.where(fits, np.trunc(np.where(fits, n, 0.0)), -1.0).astype(np.int64)


def _chebyshev(kind, shifted, x, n):
    """Chebyshev polynomials of the first to fourth kinds (T, U, V, W) as PyTorch evaluates
    them: by the recurrence, by the trigonometric form for large degrees inside (-1, 1), and
    exactly at the ends of the interval."""
    y = x + x - 1.0 if shifted else x
    odd = n % 2 == 1
    sign = np.where(odd, -1.0, 1.0)
    n1 = (n + 1).astype(np.float64)
    n21 = (n + n + 1).astype(np.float64)
    # the values at the right and left end of the interval
    right, left = {"t": (1.0, sign), "u": (n1, sign * n1), "v": (1.0, sign * n21),
                   "w": (n21, sign)}[kind]
    if shifted:
        at_right, at_left = x == 1.0, x == 0.0
    else:
        at_right, at_left = (np.abs(x) == 1.0) & (x > 0), (np.abs(x) == 1.0) & (x < 0)
    two_y = y + y
    start = {"t": y, "u": two_y, "v": two_y - 1.0, "w": two_y + 1.0}[kind]
    use_trig = (n > _TRIG_FROM[kind, shifted]) & (np.abs(y) < 1.0)
    small_n = np.where(use_trig, 0, n)
    with np.errstate(all="ignore"):
        value = _recurrence(1.0, start, lambda k, q, p: two_y * q - p, y, small_n)
    if use_trig.any():
        # inside (-1, 1) with large degrees, element by element with the C library's acos,
        # cos and sin (which NumPy's vectorised ones differ from in the last bit, and
        # n * acos(x) carries such a bit a long way)
        fallback = {"t": None, "u": None, "v": left, "w": sign if shifted else right}[kind]
        fallback = np.broadcast_to(fallback if fallback is not None else 0.0, x.shape)
        trig = [_trigonometric(kind, float(t), int(k), float(f)) for t, k, f in zip(
            y[use_trig], n[use_trig], fallback[use_trig])]
        value = np.array(value, dtype=np.float64)
        value[use_trig] = trig
    value = np.where(at_left, left, np.where(at_right, right, value))
    return np.where(n < 0, 0.0, value)


def _trigonometric(kind, y, n, fallback):
    theta = math.acos(y)
    if kind == "t":
        return math.cos(n * theta)
    if kind == "u":
        if math.sin(theta) != 0.0:
            return math.sin((n + 1) * theta) / math.sin(theta)
        return (n + 1) * math.cos((n + 1) * theta) / y
    if kind == "v":
        if math.sin(theta / 2.0) != 1.0:
            return math.cos((n + 0.5) * theta) / math.cos(theta / 2.0)
        return fallback
    if math.cos(theta / 2.0) != 1.0:
        return math.sin((n + 0.5) * theta) / math.sin(theta / 2.0)
    return fallback


# the degrees above which PyTorch's kernels switch to the trigonometric form
_TRIG_FROM = {("t", False): 6, ("u", False): 8, ("v", False): 8, ("w", False): 8,
              ("t", True): 6, ("u", True): 6, ("v", True): 6, ("w", True): 4}


def _hermite_h(x, n):
    return np.where(n < 0, 0.0, _recurrence(
        1.0, x + x, lambda k, q, p: (x + x) * q - (2.0 * k) * p, x, np.maximum(n, 0)))


def _hermite_he(x, n):
    return np.where(n < 0, 0.0, _recurrence(
        1.0, x, lambda k, q, p: x * q - k * p, x, np.maximum(n, 0)))


def _laguerre_l(x, n):
    value = _recurrence(1.0, 1.0 - x, lambda k, q, p: ((k + k + (1.0 - x)) * q - k * p)
                        / (k + 1), x, np.maximum(n, 0))
    return np.where(n < 0, 0.0, np.where(x == 0, 1.0, value))


def _legendre_p(x, n):
    value = _recurrence(1.0, x, lambda k, q, p: ((k + k + 1) * x * q - k * p) / (k + 1),
                        x, np.maximum(n, 0))
    at_end = np.abs(x) == 1.0
    end = np.where((x > 0) | (n % 2 == 0), 1.0, -1.0)
    return np.where(n < 0, 0.0, np.where(at_end, end, value))


def _check_pair(name, names, first, second):
    # PyTorch's overloads take two tensors or a tensor and a number, in either order; it
    # names all three when neither matches
    numbers = (int, float, bool, np.number)
    if not ((isinstance(first, Tensor) or isinstance(first, numbers))
            and (isinstance(second, Tensor) or isinstance(second, numbers))
            and (isinstance(first, Tensor) or isinstance(second, Tensor))):
        raise TypeError(_combination_error(name, names, first, second))


def _polynomial(name, evaluate, x, n, out):
    _check_pair(name, ("x", "n"), x, n)
    vx, vn = _float_values(name, x, n)
    with np.errstate(all="ignore"):
        result = Tensor._make(np.asarray(evaluate(vx, _degrees(vn)), dtype=np.float64))
    return _written(result, out)


def _combination_error(name, names, *args):
    first, second = names
    got = ", ".join(type(a).__name__ if not isinstance(a, Tensor) else "Tensor" for a in args)
    self_name = "self" if first == "input" else first
    return (f"special_{name}() received an invalid combination of arguments - got ({got}), "
            "but expected one of:\n"
            f" * (Tensor {first}, Tensor {second}, *, Tensor out = None)\n"
            f" * (Number {self_name}, Tensor {second}, *, Tensor out = None)\n"
            f" * (Tensor {first}, Number {second}, *, Tensor out = None)\n")


def _polynomial_function(name, evaluate, summary, example, shown):
    def function(x, n, *, out=None):
        return _polynomial(name, evaluate, x, n, out)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = (f"{summary}  ``n`` is truncated to an integer; negative degrees "
                        "give 0.  PyTorch gives it no gradient.\n\n    Example:\n"
                        f"        >>> tg.special.{name}({example})\n        {shown}\n    ")
    return function


def _zeta_values(x, q):
    # SciPy's Cephes-derived zeta, PyTorch's own algorithm, but at q = +inf, where SciPy's
    # gives the limit 0 and PyTorch's NaN (its x = 1 pole aside)
    from scipy import special as scipy_special
    vx, vq = _float_values("zeta", x, q)
    with np.errstate(all="ignore"):
        value = np.asarray(scipy_special.zeta(vx, vq), dtype=np.float64)
    return np.where(np.isposinf(vq) & (vx != 1.0), np.nan, value)


def _hurwitz_zeta(overload):
    # zeta(x, q) with PyTorch's gradient: -x zeta(x + 1, q) for q; for x it has none and
    # raises when a sweep needs it (as gammainc's, raised here when q needs no gradient:
    # what was asked for is then x's)
    from .function import BackwardCFunction, Function

    class _Zeta(Function):
        @staticmethod
        def forward(ctx, x, q):
            ctx.save_for_backward(x, q)
            return Tensor._make(_zeta_values(x.detach(), q.detach()))

        @staticmethod
        def backward(ctx, grad):
            x, q = ctx.saved_tensors
            if ctx.needs_input_grad[0] and not ctx.needs_input_grad[1]:
                raise NotImplementedError("the derivative for 'zeta' is not implemented.")
            return None, F.mul(grad, F.mul(F.neg(x), zeta(F.add(x, 1.0), q)))

    _Zeta._backward_cls = type(
        f"SpecialZetaBackward{overload}", (BackwardCFunction,),
        {"__slots__": (), "__module__": "tapegrad.autograd.function",
         "__repr__": lambda self: f"<{type(self).__name__} object at {hex(id(self))}>"})
    return _Zeta


# one Function per PyTorch overload, whose node names differ: two tensors (0), a number
# and a tensor (1), a tensor and a number (2)
_ZETA = {}


def zeta(input, other, *, out=None):  # noqa: A002 - PyTorch's argument name
    """The Hurwitz zeta function sum_k (k + q)**-x (``other`` is q); differentiable in q
    only, as in PyTorch.

    Example:
        >>> tg.special.zeta(tg.tensor([2.0]), 1.0)
        tensor([1.6449])
    """
    _check_pair("zeta", ("input", "other"), input, other)
    overload = 1 if not isinstance(input, Tensor) else 2 if not isinstance(other, Tensor) else 0
    if overload not in _ZETA:
        _ZETA[overload] = _hurwitz_zeta(overload)
    x, q = _tensor(input), _tensor(other)
    shape = D.broadcast_shapes(tuple(x.shape), tuple(q.shape))
    x, q = (t if tuple(t.shape) == shape else t.expand(shape) for t in (x, q))
    if not (x.requires_grad or q.requires_grad):
        # (no node: the same values as the recorded path, without a Function's bookkeeping)
        return _written(Tensor._make(_zeta_values(x, q)), out)
    return _written(_ZETA[overload].apply(x, q), out)


airy_ai = _unary_special("airy_ai", _airy_ai, "The Airy function Ai(x).",
                         "tg.tensor([0.0, 1.0])", "tensor([0.3550, 0.1353])", "x")
bessel_j0 = _unary_special("bessel_j0", _scipy("j0"),
                           "The Bessel function of the first kind of order 0.",
                           "tg.tensor([0.0, 1.0])", "tensor([1.0000, 0.7652])")
bessel_j1 = _unary_special("bessel_j1", _scipy("j1"),
                           "The Bessel function of the first kind of order 1.",
                           "tg.tensor([0.0, 1.0])", "tensor([0.0000, 0.4401])")
bessel_y0 = _unary_special("bessel_y0", _scipy("y0"),
                           "The Bessel function of the second kind of order 0.",
                           "tg.tensor([1.0, 2.0])", "tensor([0.0883, 0.5104])")
bessel_y1 = _unary_special("bessel_y1", _scipy("y1"),
                           "The Bessel function of the second kind of order 1.",
                           "tg.tensor([1.0, 2.0])", "tensor([-0.7812, -0.1070])")
modified_bessel_i0 = _unary_special(
    "modified_bessel_i0", _scipy("i0"), "The modified Bessel function of the first kind of "
    "order 0.", "tg.tensor([0.0, 1.0])", "tensor([1.0000, 1.2661])")
modified_bessel_i1 = _unary_special(
    "modified_bessel_i1", _scipy("i1"), "The modified Bessel function of the first kind of "
    "order 1.", "tg.tensor([0.0, 1.0])", "tensor([0.0000, 0.5652])")
modified_bessel_k0 = _unary_special(
    "modified_bessel_k0", _scipy("k0"), "The modified Bessel function of the second kind of "
    "order 0.", "tg.tensor([1.0, 2.0])", "tensor([0.4210, 0.1139])")
modified_bessel_k1 = _unary_special(
    "modified_bessel_k1", _scipy("k1"), "The modified Bessel function of the second kind of "
    "order 1.", "tg.tensor([1.0, 2.0])", "tensor([0.6019, 0.1399])")
scaled_modified_bessel_k0 = _unary_special(
    "scaled_modified_bessel_k0", _scipy("k0e"), "``exp(x) modified_bessel_k0(x)``, finite "
    "for large x.", "tg.tensor([1.0, 2.0])", "tensor([1.1445, 0.8416])", "x")
scaled_modified_bessel_k1 = _unary_special(
    "scaled_modified_bessel_k1", _scipy("k1e"), "``exp(x) modified_bessel_k1(x)``, finite "
    "for large x.", "tg.tensor([1.0, 2.0])", "tensor([1.6362, 1.0335])", "x")
spherical_bessel_j0 = _unary_special(
    "spherical_bessel_j0", _spherical_j0, "The spherical Bessel function of the first kind "
    "of order 0, ``sin(x) / x``.", "tg.tensor([0.0, 1.0])", "tensor([1.0000, 0.8415])", "x")


def _chebyshev_of(kind, shifted):
    return lambda x, n: _chebyshev(kind, shifted, x, n)


_KIND_NAMES = {"t": "first", "u": "second", "v": "third", "w": "fourth"}
for _kind in "tuvw":
    for _shifted in (False, True):
        _name = ("shifted_" if _shifted else "") + "chebyshev_polynomial_" + _kind
        globals()[_name] = _polynomial_function(
            _name, _chebyshev_of(_kind, _shifted),
            ("The shifted " if _shifted else "The ") + f"Chebyshev polynomial of the "
            f"{_KIND_NAMES[_kind]} kind" + (" on [0, 1]." if _shifted else "."),
            "tg.tensor([0.5]), 3", {("t", False): "tensor([-1.])",
                                    ("u", False): "tensor([-1.])",
                                    ("v", False): "tensor([-1.])",
                                    ("w", False): "tensor([-1.])",
                                    ("t", True): "tensor([-0.])",
                                    ("u", True): "tensor([-0.])",
                                    ("v", True): "tensor([1.])",
                                    ("w", True): "tensor([-1.])"}[_kind, _shifted])
del _kind, _shifted, _name

hermite_polynomial_h = _polynomial_function(
    "hermite_polynomial_h", _hermite_h, "The physicists' Hermite polynomial H_n.",
    "tg.tensor([0.5]), 3", "tensor([-5.])")
hermite_polynomial_he = _polynomial_function(
    "hermite_polynomial_he", _hermite_he, "The probabilists' Hermite polynomial He_n.",
    "tg.tensor([0.5]), 3", "tensor([-1.3750])")
laguerre_polynomial_l = _polynomial_function(
    "laguerre_polynomial_l", _laguerre_l, "The Laguerre polynomial L_n.",
    "tg.tensor([0.5]), 3", "tensor([-0.1458])")
legendre_polynomial_p = _polynomial_function(
    "legendre_polynomial_p", _legendre_p, "The Legendre polynomial P_n.",
    "tg.tensor([0.5]), 3", "tensor([-0.4375])")

__all__ += ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1",
            "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
            "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
            "spherical_bessel_j0", "zeta",
            "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
            "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
            "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
            "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
            "laguerre_polynomial_l", "legendre_polynomial_p"]


__dir__ = public_dir(globals())   # tab completion offers __all__, not the imports
