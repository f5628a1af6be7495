"""MultivariateNormal, parametrised as PyTorch's by a covariance, precision or lower Cholesky
factor; everything is computed from the Cholesky factor with tapegrad's differentiable
cholesky, solve_triangular and matmul, and draws ``loc + L @ eps`` from PyTorch's stream."""
import math

import tapegrad as tg

from . import constraints
from .distribution import Distribution, lazy_property

__all__ = ["MultivariateNormal"]


def _batch_mv(bmat, bvec):
    return tg.matmul(bmat, bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(bL, bx):
    # x^T (L L^T)^{-1} x for x batched over more dims than L: the x's sharing one L are put
    # side by side as columns of one triangular solve, as PyTorch's helper does (so its
    # rounding is PyTorch's)
    n = bx.size(-1)
    bx_batch_shape = tuple(bx.shape[:-1])
    bx_batch_dims = len(bx_batch_shape)
    bL_batch_dims = bL.dim() - 2
    outer = bx_batch_dims - bL_batch_dims
    old_batch_dims = outer + bL_batch_dims
    new_batch_dims = outer + 2 * bL_batch_dims
    new_shape = tuple(bx.shape[:outer])
    for sL, sx in zip(bL.shape[:-2], bx.shape[outer:-1]):
        new_shape += (sx // sL, sL)
    new_shape += (n,)
    bx = bx.reshape(new_shape)
    perm = (list(range(outer)) + list(range(outer, new_batch_dims, 2))
            + list(range(outer + 1, new_batch_dims, 2)) + [new_batch_dims])
    bx = bx.permute(perm)
    flat_L = bL.reshape(-1, n, n)
    flat_x = bx.reshape(-1, flat_L.size(0), n)
    flat_x_swap = flat_x.permute(1, 2, 0)
    M_swap = tg.linalg.solve_triangular(flat_L, flat_x_swap, upper=False).pow(2).sum(-2)
    M = M_swap.t()
    permuted_M = M.reshape(tuple(bx.shape[:-1]))
    inv = list(range(outer))
    for i in range(bL_batch_dims):
        inv += [outer + i, old_batch_dims + i]
    return permuted_M.permute(inv).reshape(bx_batch_shape)


def _precision_to_scale_tril(P):
    # the Cholesky factor of P's reversal gives P^{-1}'s factor without inverting P
    Lf = tg.linalg.cholesky(tg.flip(P, (-2, -1)))
    L_inv = tg.transpose(tg.flip(Lf, (-2, -1)), -2, -1)
    Id = tg.eye(P.shape[-1], dtype=P.dtype)
    return tg.linalg.solve_triangular(L_inv, Id, upper=False)


class MultivariateNormal(Distribution):
    """The multivariate normal distribution with mean ``loc`` and exactly one of
    ``covariance_matrix``, ``precision_matrix`` or ``scale_tril``.

    Example:
        >>> from tapegrad.distributions import MultivariateNormal
        >>> MultivariateNormal(tg.zeros(2), scale_tril=tg.eye(2)).log_prob(tg.zeros(2))
        tensor(-1.8379)
    """
    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if ((covariance_matrix is not None) + (scale_tril is not None)
                + (precision_matrix is not None)) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        given = {"scale_tril": scale_tril, "covariance_matrix": covariance_matrix,
                 "precision_matrix": precision_matrix}
        for name, matrix in given.items():
            if matrix is not None:
                if matrix.dim() < 2:
                    what = "scale_tril matrix" if name == "scale_tril" else name
                    raise ValueError(f"{what} must be at least two-dimensional, "
                                     "with optional leading batch dimensions")
                batch_shape = tg.broadcast_shapes(tuple(matrix.shape[:-2]),
                                                  tuple(loc.shape[:-1]))
                setattr(self, name, matrix.expand(tuple(batch_shape) + (-1, -1)))
        self.loc = loc.expand(tuple(batch_shape) + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = tg.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = tuple(tg.Size(batch_shape))
        ev = tuple(self.event_shape)
        new.loc = self.loc.expand(batch_shape + ev)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(batch_shape + ev + ev))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return tg.matmul(L, L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        return tg.cholesky_inverse(self._unbroadcasted_scale_tril).expand(self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(
            tuple(self._batch_shape) + tuple(self._event_shape))

    def rsample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        eps = tg.empty(shape, dtype=self.loc.dtype).normal_()
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M) - self._half_log_det()

    def entropy(self):
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        if len(self._batch_shape) == 0:
            return H
        return H.expand(self._batch_shape)
