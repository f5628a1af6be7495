"""Invertible maps between constrained spaces, as ``torch.distributions.transforms``: each
transform has a ``domain`` and ``codomain`` (constraints), is called on a tensor, has an
``inv``, a ``sign`` where it is monotone, and ``log_abs_det_jacobian(x, y)`` for the change of
density that ``TransformedDistribution`` and ``biject_to`` need.

Example:
    >>> from tapegrad.distributions.transforms import ExpTransform
    >>> t = ExpTransform()
    >>> t.inv(t(tg.tensor([0.0, 1.0])))
    tensor([0., 1.])
"""
import functools
import math
import operator
from numbers import Number

import tapegrad as tg

from . import constraints
from .distribution import _sum_rightmost, broadcast_all, lazy_property

__all__ = ["AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform",
           "CorrCholeskyTransform", "CumulativeDistributionTransform", "ExpTransform",
           "IndependentTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform",
           "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform",
           "SoftplusTransform", "StackTransform", "StickBreakingTransform", "TanhTransform",
           "Transform", "identity_transform"]


def _softplus(x):
    return tg.nn.functional.softplus(x)


class Transform:
    """Base class of the transforms: ``__call__`` maps x to y, ``inv`` maps back, and
    ``cache_size=1`` remembers the last pair so the inverse of a value just computed is the
    value it came from.

    Example:
        >>> from tapegrad.distributions.transforms import Transform
        >>> Transform(cache_size=2)
        Traceback (most recent call last):
        ...
        ValueError: cache_size must be 0 or 1
    """
    bijective = False

    def __init__(self, cache_size=0):
        self._cache_size = cache_size
        self._inv = None
        if cache_size == 1:
            self._cached_x_y = None, None
        elif cache_size != 0:
            raise ValueError("cache_size must be 0 or 1")

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_inv"] = None
        return state

    @property
    def event_dim(self):
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self):
        inv = self._inv
        if inv is None:
            inv = _InverseTransform(self)
            self._inv = inv
        return inv

    @property
    def sign(self):
        raise NotImplementedError

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    def __call__(self, x):
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = x, y
        return y

    def _inv_call(self, y):
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = x, y
        return x

    def _call(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__ + "()"

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape


class _InverseTransform(Transform):
    # the inverse of a transform: its calls are the other's inverse calls (sharing its cache)
    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return self._inv.codomain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return self._inv.domain

    @property
    def bijective(self):
        return self._inv.bijective

    @property
    def sign(self):
        return self._inv.sign

    @property
    def inv(self):
        return self._inv

    def with_cache(self, cache_size=1):
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other):
        if not isinstance(other, _InverseTransform):
            return False
        return self._inv == other._inv

    def __repr__(self):
        return f"{type(self).__name__}({self._inv!r})"

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)


class ComposeTransform(Transform):
    """The transforms of ``parts`` applied in order.

    Example:
        >>> from tapegrad.distributions.transforms import (AffineTransform,
        ...     ComposeTransform, ExpTransform)
        >>> ComposeTransform([ExpTransform(), AffineTransform(1.0, 2.0)])(tg.tensor([0.0]))
        tensor([3.])
    """
    def __init__(self, parts, cache_size=0):
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = parts

    def __eq__(self, other):
        if not isinstance(other, ComposeTransform):
            return False
        return self.parts == other.parts

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim += part.domain.event_dim - part.codomain.event_dim
            event_dim = max(event_dim, part.domain.event_dim)
        if event_dim > domain.event_dim:
            domain = constraints.independent(domain, event_dim - domain.event_dim)
        return domain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim += part.codomain.event_dim - part.domain.event_dim
            event_dim = max(event_dim, part.codomain.event_dim)
        if event_dim > codomain.event_dim:
            codomain = constraints.independent(codomain, event_dim - codomain.event_dim)
        return codomain

    @lazy_property
    def bijective(self):
        return all(p.bijective for p in self.parts)

    @lazy_property
    def sign(self):
        sign = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    @property
    def inv(self):
        inv = self._inv
        if inv is None:
            inv = ComposeTransform([p.inv for p in reversed(self.parts)])
            self._inv = inv
            inv._inv = self
        return inv

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return ComposeTransform(self.parts, cache_size=cache_size)

    def __call__(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return tg.zeros_like(x)
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        terms = []
        event_dim = self.domain.event_dim
        for part, a, b in zip(self.parts, xs[:-1], xs[1:]):
            terms.append(_sum_rightmost(part.log_abs_det_jacobian(a, b),
                                        event_dim - part.domain.event_dim))
            event_dim += part.codomain.event_dim - part.domain.event_dim
        return functools.reduce(operator.add, terms)

    def forward_shape(self, shape):
        for part in self.parts:
            shape = part.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return shape

    def __repr__(self):
        return (type(self).__name__ + "(\n    "
                + ",\n    ".join(repr(p) for p in self.parts) + "\n)")


identity_transform = ComposeTransform([])


class IndependentTransform(Transform):
    """``base_transform`` with its rightmost ``reinterpreted_batch_ndims`` dimensions taken
    as one event: the log-determinants are summed over them.

    Example:
        >>> from tapegrad.distributions.transforms import ExpTransform, IndependentTransform
        >>> t = IndependentTransform(ExpTransform(), 1)
        >>> t.log_abs_det_jacobian(tg.ones(2, 3), t(tg.ones(2, 3)))
        tensor([3., 3.])
    """
    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims,
                                    cache_size=cache_size)

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return constraints.independent(self.base_transform.domain,
                                       self.reinterpreted_batch_ndims)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return constraints.independent(self.base_transform.codomain,
                                       self.reinterpreted_batch_ndims)

    @property
    def bijective(self):
        return self.base_transform.bijective

    @property
    def sign(self):
        return self.base_transform.sign

    def _call(self, x):
        if x.dim() < self.domain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y):
        if y.dim() < self.codomain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        result = self.base_transform.log_abs_det_jacobian(x, y)
        return _sum_rightmost(result, self.reinterpreted_batch_ndims)

    def __repr__(self):
        return (f"{type(self).__name__}({self.base_transform!r}, "
                f"{self.reinterpreted_batch_ndims})")

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)


class ReshapeTransform(Transform):
    """Reshapes the rightmost ``in_shape`` dimensions to ``out_shape``.

    Example:
        >>> from tapegrad.distributions.transforms import ReshapeTransform
        >>> ReshapeTransform((4,), (2, 2))(tg.zeros(3, 4)).shape
        tapegrad.Size([3, 2, 2])
    """
    bijective = True

    def __init__(self, in_shape, out_shape, cache_size=0):
        self.in_shape = tg.Size(in_shape)
        self.out_shape = tg.Size(out_shape)
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @constraints.dependent_property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @constraints.dependent_property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x):
        batch_shape = x.shape[:x.dim() - len(self.in_shape)]
        return x.reshape(tuple(batch_shape) + tuple(self.out_shape))

    def _inverse(self, y):
        batch_shape = y.shape[:y.dim() - len(self.out_shape)]
        return y.reshape(tuple(batch_shape) + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        batch_shape = x.shape[:x.dim() - len(self.in_shape)]
        return x.new_zeros(batch_shape)

    def forward_shape(self, shape):
        if len(shape) < len(self.in_shape):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(self.in_shape)
        if tg.Size(shape[cut:]) != self.in_shape:
            raise ValueError(f"Shape mismatch: expected {shape[cut:]} but got {self.in_shape}")
        return tg.Size(tuple(shape[:cut]) + tuple(self.out_shape))

    def inverse_shape(self, shape):
        if len(shape) < len(self.out_shape):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(self.out_shape)
        if tg.Size(shape[cut:]) != self.out_shape:
            raise ValueError(
                f"Shape mismatch: expected {shape[cut:]} but got {self.out_shape}")
        return tg.Size(tuple(shape[:cut]) + tuple(self.in_shape))


class ExpTransform(Transform):
    """y = exp(x).

    Example:
        >>> from tapegrad.distributions.transforms import ExpTransform
        >>> ExpTransform().codomain
        GreaterThan(lower_bound=0.0)
    """
    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, ExpTransform)

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class PowerTransform(Transform):
    """y = x ** exponent on the positive numbers.

    Example:
        >>> from tapegrad.distributions.transforms import PowerTransform
        >>> PowerTransform(2.0).inv.codomain
        GreaterThan(lower_bound=0.0)
    """
    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size=cache_size)
        (self.exponent,) = broadcast_all(exponent)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

    @lazy_property
    def sign(self):
        return self.exponent.sign()

    def __eq__(self, other):
        if not isinstance(other, PowerTransform):
            return False
        return self.exponent.eq(other.exponent).all().item()

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return tg.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))

    def inverse_shape(self, shape):
        return tg.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))


def _clipped_sigmoid(x):
    finfo = tg.finfo(x.dtype)
    return tg.clamp(tg.sigmoid(x), min=finfo.tiny, max=1.0 - finfo.eps)


class SigmoidTransform(Transform):
    """y = sigmoid(x), kept inside (0, 1).

    Example:
        >>> from tapegrad.distributions.transforms import SigmoidTransform
        >>> SigmoidTransform()(tg.tensor([0.0]))
        tensor([0.5000])
    """
    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, SigmoidTransform)

    def _call(self, x):
        return _clipped_sigmoid(x)

    def _inverse(self, y):
        finfo = tg.finfo(y.dtype)
        y = y.clamp(min=finfo.tiny, max=1.0 - finfo.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -_softplus(-x) - _softplus(x)


class SoftplusTransform(Transform):
    """y = log(1 + exp(x)).

    Example:
        >>> from tapegrad.distributions.transforms import SoftplusTransform
        >>> SoftplusTransform().inv(SoftplusTransform()(tg.tensor([1.0])))
        tensor([1.])
    """
    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, SoftplusTransform)

    def _call(self, x):
        return _softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        return -_softplus(-x)


class TanhTransform(Transform):
    """y = tanh(x).

    Example:
        >>> from tapegrad.distributions.transforms import TanhTransform
        >>> TanhTransform().codomain
        Interval(lower_bound=-1.0, upper_bound=1.0)
    """
    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, TanhTransform)

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return tg.atanh(y)

    def log_abs_det_jacobian(self, x, y):
        return 2.0 * (math.log(2.0) - x - _softplus(-2.0 * x))


class AbsTransform(Transform):
    """y = ``abs(x)`` (not injective: its inverse is the identity).

    Example:
        >>> from tapegrad.distributions.transforms import AbsTransform
        >>> AbsTransform()(tg.tensor([-2.0]))
        tensor([2.])
    """
    domain = constraints.real
    codomain = constraints.positive

    def __eq__(self, other):
        return isinstance(other, AbsTransform)

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class AffineTransform(Transform):
    """y = loc + scale * x, over ``event_dim`` dimensions taken together.

    Example:
        >>> from tapegrad.distributions.transforms import AffineTransform
        >>> AffineTransform(1.0, 2.0)(tg.tensor([3.0]))
        tensor([7.])
    """
    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size=cache_size)

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False
        for a, b in ((self.loc, other.loc), (self.scale, other.scale)):
            if isinstance(a, Number) and isinstance(b, Number):
                if a != b:
                    return False
            elif not (a == b).all().item():
                return False
        return True

    @property
    def sign(self):
        if isinstance(self.scale, Number):
            s = float(self.scale)
            return 1 if s > 0 else -1 if s < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = x.shape
        scale = self.scale
        if isinstance(scale, Number):
            result = tg.full_like(x, math.log(abs(scale)))
        else:
            result = tg.abs(scale).log()
        if self.event_dim:
            result = result.view(tuple(result.size()[:-self.event_dim]) + (-1,)).sum(-1)
            shape = shape[:-self.event_dim]
        return result.expand(shape)

    def _broadcast_with_params(self, shape):
        # loc and scale (numbers or tensors) broadcast with x and y alike
        return tg.broadcast_shapes(shape, getattr(self.loc, "shape", ()),
                                   getattr(self.scale, "shape", ()))

    def forward_shape(self, shape):
        return self._broadcast_with_params(shape)

    def inverse_shape(self, shape):
        return self._broadcast_with_params(shape)


def _needs_a_dim(shape):
    if len(shape) < 1:
        raise ValueError("Too few dimensions on input")


class SoftmaxTransform(Transform):
    """From unconstrained vectors to the simplex by softmax (not injective).

    Example:
        >>> from tapegrad.distributions.transforms import SoftmaxTransform
        >>> SoftmaxTransform()(tg.zeros(2))
        tensor([0.5000, 0.5000])
    """
    domain = constraints.real_vector
    codomain = constraints.simplex

    def __eq__(self, other):
        return isinstance(other, SoftmaxTransform)

    def _call(self, x):
        probs = (x - x.max(-1, True)[0]).exp()
        return probs / probs.sum(-1, True)

    def _inverse(self, y):
        return y.log()

    def forward_shape(self, shape):
        _needs_a_dim(shape)
        return shape

    def inverse_shape(self, shape):
        _needs_a_dim(shape)
        return shape


class StickBreakingTransform(Transform):
    """From vectors of K - 1 unconstrained values to the K-simplex by stick breaking.

    Example:
        >>> from tapegrad.distributions.transforms import StickBreakingTransform
        >>> StickBreakingTransform()(tg.zeros(2))
        tensor([0.3333, 0.3333, 0.3333])
    """
    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def __eq__(self, other):
        return isinstance(other, StickBreakingTransform)

    def _call(self, x):
        offset = x.shape[-1] + 1 - x.new_ones(x.shape[-1]).cumsum(-1)
        z = _clipped_sigmoid(x - offset.log())
        z_cumprod = (1 - z).cumprod(-1)
        pad = tg.nn.functional.pad
        return pad(z, [0, 1], value=1) * pad(z_cumprod, [1, 0], value=1)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        offset = y.shape[-1] - y.new_ones(y_crop.shape[-1]).cumsum(-1)
        sf = 1 - y_crop.cumsum(-1)
        sf = tg.clamp(sf, min=tg.finfo(y.dtype).tiny)
        return y_crop.log() - sf.log() + offset.log()

    def log_abs_det_jacobian(self, x, y):
        offset = x.shape[-1] + 1 - x.new_ones(x.shape[-1]).cumsum(-1)
        x = x - offset.log()
        return (-x + tg.nn.functional.logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        _needs_a_dim(shape)
        return tg.Size(tuple(shape[:-1]) + (shape[-1] + 1,))

    def inverse_shape(self, shape):
        _needs_a_dim(shape)
        return tg.Size(tuple(shape[:-1]) + (shape[-1] - 1,))


def _tril_mask(n, diag):
    arange = tg.arange(n)
    return arange < arange.view(-1, 1) + (diag + 1)


def _tril_matrix_to_vec(mat, diag=0):
    # the entries on and below diagonal ``diag`` of the last two dims, in row order
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    return mat[..., _tril_mask(n, diag)]


def _vec_to_tril_matrix(vec, diag=0):
    # back from _tril_matrix_to_vec: D solves D**2 + (1 + 2 diag) D - |diag| (diag + 1) = 2 N
    b = 1 + 2 * diag
    n = (-b + (b ** 2 + 8 * vec.shape[-1] + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if round(n) - n > tg.finfo(vec.dtype).eps:
        raise ValueError(
            f"The size of last dimension is {vec.shape[-1]} which cannot be expressed as "
            "the lower triangular part of a square D x D matrix.")
    n = round(n)
    mat = vec.new_zeros(tuple(vec.shape[:-1]) + (n, n))
    mat[..., _tril_mask(n, diag)] = vec
    return mat


class CorrCholeskyTransform(Transform):
    """From vectors of D (D - 1) / 2 unconstrained values to Cholesky factors of D x D
    correlation matrices: tanh into (-1, 1), then stick breaking on the squares row by row
    so each row has unit length. ``log_abs_det_jacobian`` is that of the map to the
    flattened strict lower triangle.

    Example:
        >>> from tapegrad.distributions.transforms import CorrCholeskyTransform
        >>> CorrCholeskyTransform()(tg.zeros(1))
        tensor([[1., 0.],
                [0., 1.]])
    """
    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def __eq__(self, other):
        return isinstance(other, CorrCholeskyTransform)

    def _call(self, x):
        eps = tg.finfo(x.dtype).eps
        r = _vec_to_tril_matrix(tg.tanh(x).clamp(min=-1 + eps, max=1 - eps), diag=-1)
        # row i's entries are r times the square root of what the earlier ones left
        left_sqrt = (1 - r ** 2).sqrt().cumprod(-1)
        r = r + tg.eye(r.shape[-1], dtype=r.dtype)
        return r * tg.nn.functional.pad(left_sqrt[..., :-1], [1, 0], value=1)

    def _inverse(self, y):
        left = 1 - tg.cumsum(y * y, dim=-1)
        left_before = tg.nn.functional.pad(left[..., :-1], [1, 0], value=1)
        t = _tril_matrix_to_vec(y, diag=-1) / _tril_matrix_to_vec(left_before, diag=-1).sqrt()
        return (t.log1p() - t.neg().log1p()) / 2       # atanh

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        # diagonal -2 picks what each entry's earlier ones left, without a shift
        left = _tril_matrix_to_vec(1 - (y * y).cumsum(dim=-1), diag=-2)
        stick_breaking = 0.5 * left.log().sum(-1)
        tanh = -2 * (x + _softplus(-2 * x) - math.log(2.0)).sum(dim=-1)
        return stick_breaking + tanh

    def forward_shape(self, shape):
        _needs_a_dim(shape)
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return tg.Size(tuple(shape[:-1]) + (d, d))

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return tg.Size(tuple(shape[:-2]) + (d * (d - 1) // 2,))


class LowerCholeskyTransform(Transform):
    """From square matrices to lower-triangular ones with a positive diagonal: the strict
    lower triangle kept, the diagonal exponentiated, the rest zeroed (not injective).

    Example:
        >>> from tapegrad.distributions.transforms import LowerCholeskyTransform
        >>> LowerCholeskyTransform()(tg.zeros(2, 2))
        tensor([[1., 0.],
                [0., 1.]])
    """
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other):
        return isinstance(other, LowerCholeskyTransform)

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(Transform):
    """From square matrices to positive-definite ones: L L^T of their
    ``LowerCholeskyTransform`` L.

    Example:
        >>> from tapegrad.distributions.transforms import PositiveDefiniteTransform
        >>> PositiveDefiniteTransform()(tg.zeros(2, 2))
        tensor([[1., 0.],
                [0., 1.]])
    """
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def __eq__(self, other):
        return isinstance(other, PositiveDefiniteTransform)

    def _call(self, x):
        lower = LowerCholeskyTransform()(x)
        return lower @ lower.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(tg.linalg.cholesky(y))


def _transforms_checked(tseq, cache_size):
    if not all(isinstance(t, Transform) for t in tseq):
        raise AssertionError("All elements of tseq must be Transform instances")
    return [t.with_cache(cache_size) for t in tseq] if cache_size else list(tseq)


def _check_dim_of(dim, t, what):
    if not -t.dim() <= dim < t.dim():
        raise AssertionError(f"dim {dim} out of range for {what} with {t.dim()} dimensions")


def _check_size_of(name, dim, t, expected, expected_name):
    if t.size(dim) != expected:
        raise AssertionError(
            f"{name}.size({dim}) = {t.size(dim)} must equal {expected_name} {expected}")


class CatTransform(Transform):
    """The transforms of ``tseq`` on consecutive slices of ``dim`` (of ``lengths``, one each
    by default), their results joined as ``tapegrad.cat`` joins.

    Example:
        >>> from tapegrad.distributions.transforms import (CatTransform, ExpTransform,
        ...     identity_transform)
        >>> CatTransform([ExpTransform(), identity_transform], lengths=[1, 1])(tg.zeros(2))
        tensor([1., 0.])
    """
    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        tseq = _transforms_checked(tseq, cache_size)
        super().__init__(cache_size=cache_size)
        self.transforms = tseq
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise AssertionError(f"lengths ({len(self.lengths)}) must match transforms "
                                 f"({len(self.transforms)})")
        self.dim = dim

    @lazy_property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @lazy_property
    def length(self):
        return sum(self.lengths)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _slices(self, name, t, what="tensor"):
        _check_dim_of(self.dim, t, what)
        _check_size_of(name, self.dim, t, self.length, "length")
        start = 0
        for length in self.lengths:
            yield t.narrow(self.dim, start, length)
            start = start + length

    def _call(self, x):
        return tg.cat([part(piece) for part, piece in zip(self.transforms, self._slices("x", x))],
                      dim=self.dim)

    def _inverse(self, y):
        return tg.cat([part.inv(piece)
                       for part, piece in zip(self.transforms, self._slices("y", y))],
                      dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        terms = []
        for part, xs, ys in zip(self.transforms, self._slices("x", x, "x"),
                                self._slices("y", y, "y")):
            term = part.log_abs_det_jacobian(xs, ys)
            if part.event_dim < self.event_dim:
                term = _sum_rightmost(term, self.event_dim - part.event_dim)
            terms.append(term)
        # a dim inside the event is summed over, one of the batch keeps the pieces apart
        dim = self.dim - x.dim() if self.dim >= 0 else self.dim
        dim = dim + self.event_dim
        if dim < 0:
            return tg.cat(terms, dim=dim)
        return sum(terms)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @constraints.dependent_property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """The transforms of ``tseq`` on the successive slices of ``dim``, their results joined
    as ``tapegrad.stack`` joins.

    Example:
        >>> from tapegrad.distributions.transforms import (StackTransform, ExpTransform,
        ...     identity_transform)
        >>> StackTransform([ExpTransform(), identity_transform])(tg.zeros(2))
        tensor([1., 0.])
    """
    def __init__(self, tseq, dim=0, cache_size=0):
        tseq = _transforms_checked(tseq, cache_size)
        super().__init__(cache_size=cache_size)
        self.transforms = tseq
        self.dim = dim

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slices(self, name, t, what="tensor"):
        _check_dim_of(self.dim, t, what)
        _check_size_of(name, self.dim, t, len(self.transforms), "len(transforms)")
        return [t.select(self.dim, i) for i in range(t.size(self.dim))]

    def _call(self, x):
        return tg.stack([part(piece) for part, piece in zip(self.transforms, self._slices("x", x))],
                        dim=self.dim)

    def _inverse(self, y):
        return tg.stack([part.inv(piece)
                         for part, piece in zip(self.transforms, self._slices("y", y))],
                        dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        xs, ys = self._slices("x", x, "x"), self._slices("y", y, "y")
        return tg.stack([part.log_abs_det_jacobian(a, b)
                         for a, b, part in zip(xs, ys, self.transforms)], dim=self.dim)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @constraints.dependent_property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


class CumulativeDistributionTransform(Transform):
    """From a distribution's support to [0, 1] by its ``cdf`` (inverse: its ``icdf``); the
    log-determinant is its ``log_prob``.

    Example:
        >>> from tapegrad.distributions import Normal
        >>> from tapegrad.distributions.transforms import CumulativeDistributionTransform
        >>> CumulativeDistributionTransform(Normal(0.0, 1.0))(tg.tensor([0.0]))
        tensor([0.5000])
    """
    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)


from .._public import public_dir as _public_dir  # noqa: E402
__dir__ = _public_dir(globals())
