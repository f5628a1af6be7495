"""MultivariateNormal, parametrised as PyTorch's by a covariance, precision or lower Cholesky
factor; everything is computed from the Cholesky factor with tapegrad's differentiable
cholesky, solve_triangular and matmul, and draws ``loc + L @ eps`` from PyTorch's stream.
LowRankMultivariateNormal, whose covariance is W W^T + diag(D), works through the small
"capacitance" matrix I + W^T D^-1 W instead, as PyTorch's does."""
import math

import tapegrad as tg

from . import constraints
from ._univariate import _standard_normal
from .distribution import Distribution, lazy_property

__all__ = ["LowRankMultivariateNormal", "MultivariateNormal"]


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


def _plus_identity(K):
    # PyTorch adds 1 to the diagonal in place; adding the identity gives the same numbers
    # and gradients
    return K + tg.eye(K.size(-1), dtype=K.dtype)


def _batch_capacitance_tril(W, D):
    # the Cholesky factor of I + W^T D^-1 W
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    return tg.linalg.cholesky(_plus_identity(tg.matmul(Wt_Dinv, W)))


def _batch_lowrank_logdet(W, D, capacitance_tril):
    # matrix determinant lemma: log|W W^T + D| = log|C| + log|D|
    return (2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
            + D.log().sum(-1))


def _batch_lowrank_mahalanobis(W, D, x, capacitance_tril):
    # Woodbury: x^T (W W^T + D)^-1 x = x^T D^-1 x - |C^-1/2 W^T D^-1 x|^2
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    Wt_Dinv_x = _batch_mv(Wt_Dinv, x)
    return (x.pow(2) / D).sum(-1) - _batch_mahalanobis(capacitance_tril, Wt_Dinv_x)


def _batch_trace_XXT(bmat):
    # tr(X X^T) of each matrix of the batch: the sum of its squared entries
    m, n = bmat.size(-2), bmat.size(-1)
    return bmat.reshape(-1, m * n).pow(2).sum(-1).reshape(tuple(bmat.shape[:-2]))


class LowRankMultivariateNormal(Distribution):
    """The multivariate normal distribution with mean ``loc`` and covariance
    ``cov_factor @ cov_factor.T + diag(cov_diag)``.

    Example:
        >>> from tapegrad.distributions import LowRankMultivariateNormal
        >>> d = LowRankMultivariateNormal(tg.zeros(2), tg.tensor([[1.0], [0.0]]), tg.ones(2))
        >>> d.covariance_matrix
        tensor([[2., 0.],
                [0., 1.]])
    """
    arg_constraints = {"loc": constraints.real_vector,
                       "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, "
                             "with optional leading batch dimensions")
        if cov_factor.shape[-2:-1] != event_shape:
            raise ValueError("cov_factor must be a batch of matrices with shape "
                             f"{event_shape[0]} x m")
        if cov_diag.shape[-1:] != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        try:
            loc_, self.cov_factor, cov_diag_ = tg.broadcast_tensors(
                loc.unsqueeze(-1), cov_factor, cov_diag.unsqueeze(-1))
        except RuntimeError as e:
            raise ValueError(f"Incompatible batch shapes: loc {loc.shape}, cov_factor "
                             f"{cov_factor.shape}, cov_diag {cov_diag.shape}") from e
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)
        super().__init__(self.loc.shape[:-1], event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = tg.Size(batch_shape)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1)
                + self._unbroadcasted_cov_diag).expand(tuple(self._batch_shape)
                                                       + tuple(self._event_shape))

    @lazy_property
    def scale_tril(self):
        # D^1/2 chol(I + D^-1/2 W W^T D^-1/2)
        diag_sqrt = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        Dinvsqrt_W = self._unbroadcasted_cov_factor / diag_sqrt
        K = _plus_identity(tg.matmul(Dinvsqrt_W, Dinvsqrt_W.mT))
        return (diag_sqrt * tg.linalg.cholesky(K)).expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        W = self._unbroadcasted_cov_factor
        return (tg.matmul(W, W.mT)
                + tg.diag_embed(self._unbroadcasted_cov_diag)).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        Wt_Dinv = self._unbroadcasted_cov_factor.mT / self._unbroadcasted_cov_diag.unsqueeze(-2)
        A = tg.linalg.solve_triangular(self._capacitance_tril, Wt_Dinv, upper=False)
        precision = tg.diag_embed(self._unbroadcasted_cov_diag.reciprocal()) - A.mT @ A
        return precision.expand(self._matrix_shape())

    def rsample(self, sample_shape=tg.Size()):
        shape = self._extended_shape(sample_shape)
        # the factor's noise is drawn before the diagonal's
        eps_W = _standard_normal(tuple(shape[:-1]) + tuple(self.cov_factor.shape[-1:]),
                                 self.loc.dtype)
        eps_D = _standard_normal(shape, self.loc.dtype)
        return (self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_W)
                + self._unbroadcasted_cov_diag.sqrt() * eps_D)

    def _log_det(self):
        return _batch_lowrank_logdet(self._unbroadcasted_cov_factor,
                                     self._unbroadcasted_cov_diag, self._capacitance_tril)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        M = _batch_lowrank_mahalanobis(self._unbroadcasted_cov_factor,
                                       self._unbroadcasted_cov_diag, value - self.loc,
                                       self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._log_det() + M)

    def entropy(self):
        H = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        if len(self._batch_shape) == 0:
            return H
        return H.expand(self._batch_shape)
