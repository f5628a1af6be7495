"""Constraints on a distribution's parameters and support, as ``torch.distributions.constraints``:
``check(value)`` gives a boolean tensor, and ``repr`` is PyTorch's (it appears in the
ValueError texts of argument validation).

Example:
    >>> from tapegrad.distributions import constraints
    >>> constraints.positive.check(tg.tensor([1.0, -1.0]))
    tensor([ True, False])
"""
__all__ = ["Constraint", "boolean", "dependent", "dependent_property", "greater_than",
           "greater_than_eq", "integer_interval", "interval", "less_than", "nonnegative",
           "positive", "real", "simplex", "unit_interval", "is_dependent"]


class Constraint:
    """A region of values; ``check`` tells elementwise whether a value lies in it.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.unit_interval
        Interval(lower_bound=0.0, upper_bound=1.0)
    """
    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__[1:] + "()"


class _Dependent(Constraint):
    # a parameter whose valid values depend on others: validation skips it
    def __init__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        self._is_discrete = is_discrete
        self._event_dim = event_dim

    def check(self, value):
        raise ValueError("Cannot determine validity of dependent constraint")


class _DependentProperty(property, _Dependent):
    """A property of a distribution that is also a dependent constraint: the support or a
    parameter's constraint, computed from the instance's parameters.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> class D:
        ...     @constraints.dependent_property(is_discrete=True, event_dim=0)
        ...     def support(self):
        ...         return constraints.integer_interval(0, 2)
        >>> D().support
        IntegerInterval(lower_bound=0, upper_bound=2)
    """
    def __init__(self, fn=None, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        property.__init__(self, fn)
        _Dependent.__init__(self, is_discrete=is_discrete, event_dim=event_dim)

    def __call__(self, fn):
        # the form with keywords: @dependent_property(is_discrete=True, event_dim=0)
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


def is_dependent(constraint):
    """Whether ``constraint`` cannot be checked (its region depends on other parameters).

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.is_dependent(constraints.dependent)
        True
    """
    return isinstance(constraint, _Dependent)


class _Real(Constraint):
    def check(self, value):
        return value == value          # False for NaN only


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _GreaterThan(Constraint):
    """The half line ``(lower_bound, inf]``.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.greater_than(1.0).check(tg.tensor([1.0, 2.0]))
        tensor([False,  True])
    """
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return self.lower_bound < value

    def __repr__(self):
        return f"{type(self).__name__[1:]}(lower_bound={self.lower_bound})"


class _GreaterThanEq(_GreaterThan):
    """The half line ``[lower_bound, inf]``.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.greater_than_eq(1.0).check(tg.tensor([1.0, 0.0]))
        tensor([ True, False])
    """
    def check(self, value):
        return self.lower_bound <= value


class _LessThan(Constraint):
    """The half line ``[-inf, upper_bound)``.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.less_than(1.0).check(tg.tensor([1.0, 0.0]))
        tensor([False,  True])
    """
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound

    def __repr__(self):
        return f"{type(self).__name__[1:]}(upper_bound={self.upper_bound})"


class _Interval(Constraint):
    """The closed interval ``[lower_bound, upper_bound]``.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.interval(0.0, 1.0).check(tg.tensor([1.0, 2.0]))
        tensor([ True, False])
    """
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value):
        return (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self):
        return (f"{type(self).__name__[1:]}(lower_bound={self.lower_bound}, "
                f"upper_bound={self.upper_bound})")


class _IntegerInterval(_Interval):
    """The integers of ``[lower_bound, upper_bound]``.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.integer_interval(0, 2).check(tg.tensor([1.0, 1.5]))
        tensor([ True, False])
    """
    is_discrete = True

    def check(self, value):
        return (value % 1 == 0) & (self.lower_bound <= value) & (value <= self.upper_bound)


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        import tapegrad as tg
        return tg.all(value >= 0, dim=-1) & ((value.sum(-1) - 1).abs() < 1e-6)


dependent = _Dependent()
dependent_property = _DependentProperty
boolean = _Boolean()
real = _Real()
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
interval = _Interval
integer_interval = _IntegerInterval
unit_interval = _Interval(0.0, 1.0)
simplex = _Simplex()

from .._public import public_dir as _public_dir  # noqa: E402
__dir__ = _public_dir(globals())


class _IndependentConstraint(Constraint):
    """A constraint on the rightmost ``reinterpreted_batch_ndims`` dims together.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.independent(constraints.real, 1).check(tg.tensor([[0.0, math.nan]]))
        tensor([False])
    """
    # a constraint on the rightmost dims taken together: every element must satisfy it
    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        self.is_discrete = base_constraint.is_discrete
        self.event_dim = base_constraint.event_dim + reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        n = self.reinterpreted_batch_ndims
        if n:
            result = result.reshape(result.shape[:result.dim() - n] + (-1,)).all(-1)
        return result

    def __repr__(self):
        return (f"{type(self).__name__[1:]}({self.base_constraint!r}, "
                f"{self.reinterpreted_batch_ndims})")


independent = _IndependentConstraint
real_vector = independent(real, 1)
__all__ += ["independent", "real_vector"]


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        is_boolean = (value == 0) | (value == 1)
        return is_boolean.all(-1) & value.sum(-1).eq(1)


one_hot = _OneHot()
__all__ += ["one_hot"]


class _LowerTriangular(Constraint):
    """Lower-triangular square matrices.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.lower_triangular.check(tg.ones(2, 2))
        tensor(False)
    """
    event_dim = 2

    def check(self, value):
        return (value.tril() == value).reshape(tuple(value.shape[:-2]) + (-1,)).min(-1)[0]


class _LowerCholesky(Constraint):
    """Lower-triangular square matrices with a positive diagonal.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.lower_cholesky.check(tg.eye(2))
        tensor(True)
    """
    event_dim = 2

    def check(self, value):
        positive = (value.diagonal(dim1=-2, dim2=-1) > 0).min(-1)[0]
        return _LowerTriangular().check(value) & positive


class _CorrCholesky(Constraint):
    """Cholesky factors of correlation matrices: lower Cholesky factors whose rows have
    unit length (within ``10 * n * eps``, PyTorch's tolerance).

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.corr_cholesky.check(2 * tg.eye(2))
        tensor(False)
    """
    event_dim = 2

    def check(self, value):
        import tapegrad as tg
        tol = tg.finfo(value.dtype).eps * value.size(-1) * 10
        row_norm = tg.linalg.norm(value.detach(), dim=-1)
        unit_rows = (row_norm - 1.0).abs().le(tol).all(dim=-1)
        return _LowerCholesky().check(value) & unit_rows


class _Square(Constraint):
    """Square matrices: one answer for the whole batch, from the shape alone.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.square.check(tg.zeros(3, 2, 2))
        tensor([True, True, True])
    """
    event_dim = 2

    def check(self, value):
        import tapegrad as tg
        return tg.full(tuple(value.shape[:-2]), value.shape[-2] == value.shape[-1],
                       dtype=tg.bool)


class _Symmetric(_Square):
    """Symmetric square matrices (entries equal within ``atol=1e-6``).

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.symmetric.check(tg.tensor([[1.0, 2.0], [0.0, 1.0]]))
        tensor(False)
    """
    def check(self, value):
        import tapegrad as tg
        square = super().check(value)
        if not bool(square.all()):
            return square
        return tg.isclose(value, value.mT, atol=1e-6).all(-2).all(-1)


class _PositiveSemidefinite(_Symmetric):
    """Symmetric matrices whose eigenvalues are all nonnegative.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.positive_semidefinite.check(tg.zeros(2, 2))
        tensor(True)
    """
    def check(self, value):
        import tapegrad as tg
        symmetric = super().check(value)
        if not bool(symmetric.all()):
            return symmetric
        return tg.linalg.eigvalsh(value).ge(0).all(-1)


class _PositiveDefinite(_Symmetric):
    """Symmetric positive-definite matrices.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.positive_definite.check(-tg.eye(2))
        tensor(False)
    """
    def check(self, value):
        import numpy as np
        import tapegrad as tg
        symmetric = super().check(value)
        if not bool(symmetric.all()):
            return symmetric
        # PyTorch asks whether a Cholesky factorisation succeeds (cholesky_ex's info == 0)
        a = value.detach().numpy()
        flat = a.reshape((-1,) + a.shape[-2:])
        ok = []
        for m in flat:
            try:
                np.linalg.cholesky(m)
                ok.append(True)
            except np.linalg.LinAlgError:
                ok.append(False)
        return tg.tensor(np.array(ok, dtype=bool).reshape(a.shape[:-2]))


lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()
lower_triangular = _LowerTriangular()
corr_cholesky = _CorrCholesky()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
__all__ += ["corr_cholesky", "lower_cholesky", "lower_triangular", "positive_definite",
            "positive_semidefinite", "square", "symmetric"]


class _IntegerGreaterThan(Constraint):
    """The integers from ``lower_bound`` on.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.nonnegative_integer.check(tg.tensor([0.0, 1.5, -1.0]))
        tensor([ True, False, False])
    """
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound)

    def __repr__(self):
        return f"{type(self).__name__[1:]}(lower_bound={self.lower_bound})"


class _HalfOpenInterval(Constraint):
    """The half-open interval ``[lower_bound, upper_bound)``.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.half_open_interval(0.0, 1.0).check(tg.tensor([0.0, 1.0]))
        tensor([ True, False])
    """
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value):
        return (self.lower_bound <= value) & (value < self.upper_bound)

    def __repr__(self):
        return (f"{type(self).__name__[1:]}(lower_bound={self.lower_bound}, "
                f"upper_bound={self.upper_bound})")


nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
half_open_interval = _HalfOpenInterval
__all__ += ["half_open_interval", "nonnegative_integer", "positive_integer"]


class _Multinomial(Constraint):
    """Vectors of nonnegative counts summing to at most ``upper_bound`` (PyTorch checks the
    sum no more strictly than that).

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.multinomial(3).check(tg.tensor([1.0, 3.0]))
        tensor(False)
    """
    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return (value >= 0).all(dim=-1) & (value.sum(dim=-1) <= self.upper_bound)


def _check_constraints(cseq):
    if not all(isinstance(c, Constraint) for c in cseq):
        raise AssertionError("All elements of cseq must be Constraint instances")
    return list(cseq)


def _check_dim(dim, value):
    if not -value.dim() <= dim < value.dim():
        raise AssertionError(f"dim {dim} out of range for value with {value.dim()} dimensions")


class _Cat(Constraint):
    """The constraints of ``cseq`` on consecutive slices of ``dim`` (of ``lengths``, one
    each by default), as ``tapegrad.cat`` would join them.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> c = constraints.cat([constraints.positive, constraints.real], lengths=[1, 2])
        >>> c.check(tg.tensor([-1.0, -1.0, -1.0]))
        tensor([False,  True,  True])
    """
    def __init__(self, cseq, dim=0, lengths=None):
        self.cseq = _check_constraints(cseq)
        self.lengths = [1] * len(self.cseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise AssertionError(
                f"lengths ({len(self.lengths)}) must match cseq ({len(self.cseq)})")
        self.dim = dim

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        import tapegrad as tg
        _check_dim(self.dim, value)
        checks, start = [], 0
        for constraint, length in zip(self.cseq, self.lengths):
            checks.append(constraint.check(value.narrow(self.dim, start, length)))
            start = start + length
        return tg.cat(checks, self.dim)


class _Stack(Constraint):
    """The constraints of ``cseq`` on the successive slices of ``dim``, as
    ``tapegrad.stack`` would join them.

    Example:
        >>> from tapegrad.distributions import constraints
        >>> c = constraints.stack([constraints.positive, constraints.real])
        >>> c.check(tg.tensor([-1.0, -1.0]))
        tensor([False,  True])
    """
    def __init__(self, cseq, dim=0):
        self.cseq = _check_constraints(cseq)
        self.dim = dim

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        dim = max(c.event_dim for c in self.cseq)
        # a negative dim counted from the right lies inside the event when it reaches past it
        if self.dim + dim < 0:
            dim += 1
        return dim

    def check(self, value):
        import tapegrad as tg
        _check_dim(self.dim, value)
        slices = [value.select(self.dim, i) for i in range(value.size(self.dim))]
        return tg.stack([c.check(v) for v, c in zip(slices, self.cseq)], self.dim)


multinomial = _Multinomial
cat = _Cat
stack = _Stack
__all__ += ["cat", "multinomial", "stack"]


class MixtureSameFamilyConstraint(Constraint):
    """The support of a mixture: a value is in it when it is in the components' support
    (checked against every component, by a dimension added before the event's).

    Example:
        >>> from tapegrad.distributions import constraints
        >>> constraints.MixtureSameFamilyConstraint(constraints.positive)
        MixtureSameFamilyConstraint(GreaterThan(lower_bound=0.0))
    """
    def __init__(self, base_constraint):
        if not isinstance(base_constraint, Constraint):
            raise AssertionError("base_constraint must be a Constraint, got "
                                 f"{type(base_constraint).__name__}")
        self.base_constraint = base_constraint

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim

    def check(self, value):
        result = self.base_constraint.check(value.unsqueeze(-1 - self.event_dim))
        if value.dim() < self.event_dim:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.dim()}")
        kept = value.dim() - self.event_dim
        return result.reshape(tuple(result.shape[:kept]) + (-1,)).all(-1)

    def __repr__(self):
        return f"{type(self).__name__}({self.base_constraint!r})"


__all__ += ["MixtureSameFamilyConstraint"]
