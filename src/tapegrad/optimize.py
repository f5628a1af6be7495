"""SciPy's optimisers and stiff integrators fed with derivatives of one compiled function.

From one tapegrad function of a 1-D float64 vector this module makes the callables SciPy
asks for, with SciPy's signatures (extra ``args`` passed on and not differentiated), NumPy
arrays in and NumPy arrays (or ``scipy.sparse`` matrices) out:

* ``Objective(f)`` for ``scipy.optimize.minimize``: ``fun``, ``jac``, ``fun_and_jac`` (for
  ``jac=True``), ``hess`` (a sparse Hessian, or dense), ``hessp``.
* ``Residual(F)`` for ``least_squares`` and ``root``: ``fun``, ``jac`` (sparse or dense),
  ``jac_sparsity``.
* ``ODE(f)`` for ``solve_ivp``'s implicit methods: ``fun(t, y)`` and ``jac(t, y)``.

Every callable replays one compiled tape (``tapegrad.compile``) and differentiates it with
compiled sweeps.  SciPy usually asks for the value and the gradient at the same point one
after the other, so ``Objective`` computes both in one replay and keeps them for the next
call at the same x and args.

Example:
    >>> from scipy.optimize import minimize
    >>> f = tg.optimize.Objective(lambda v: ((v - 3.0) ** 2).sum())
    >>> res = minimize(f.fun, np.zeros(2), jac=f.jac, method="BFGS")
    >>> np.round(res.x, 6)
    array([3., 3.])
"""
import numpy as np

from . import compressed
from .compressed import SparseHessian, SparseJacobian, adjoint_products
from .higher import _as_input, _run
from .replay import Compiled
from .replay import compile as _compile
from .sparsity import _scalar_output, _tensor_output

__all__ = ["Objective", "Residual", "ODE"]


def _point(x, name):
    """x as a fresh 1-D float64 leaf tensor, and the array it was copied from."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name}: x must be a 1-D vector, got shape {arr.shape}")
    return _as_input(arr), arr


def _same_args(a, b):
    """Whether two ``args`` tuples are the same values (SciPy passes the same objects)."""
    if len(a) != len(b):
        return False
    for u, v in zip(a, b):
        if u is v:
            continue
        if isinstance(u, np.ndarray) or isinstance(v, np.ndarray):
            if not (isinstance(u, np.ndarray) and isinstance(v, np.ndarray)
                    and u.shape == v.shape and u.dtype == v.dtype and np.array_equal(u, v)):
                return False
        elif not (type(u) is type(v) and u == v):
            return False
    return True


class _Wrapped:
    def __init__(self, fn):
        self.fn = fn if isinstance(fn, Compiled) else _compile(fn)

    def _tape(self, x, args, name):
        xt, arr = _point(x, name)
        tape, y = _run(self.fn, [xt], consts=tuple(args))
        return xt, arr, tape, y


class Objective(_Wrapped):
    """The callables ``scipy.optimize.minimize`` takes, for a scalar ``f(x, *args)``.

    ``fun(x, *args) -> float``; ``jac(x, *args) -> ndarray``; ``fun_and_jac`` returns both
    (pass it as ``fun`` with ``jac=True``); ``hess(x, *args)`` the Hessian, a
    ``scipy.sparse.csr_matrix`` (``sparse=False``: an ndarray; ``Newton-CG`` and
    ``trust-constr`` take either, ``trust-krylov``, ``trust-exact`` and ``dogleg`` want it
    dense);
    ``hessp(x, p, *args) -> ndarray`` the Hessian times p, without forming the Hessian.

    Example:
        >>> from scipy.optimize import minimize, rosen
        >>> f = tg.optimize.Objective(lambda v: (100 * (v[1:] - v[:-1] ** 2) ** 2
        ...                                      + (1 - v[:-1]) ** 2).sum())
        >>> res = minimize(f.fun, np.array([1.3, 0.7, 0.8, 1.9, 1.2]), jac=f.jac,
        ...                hessp=f.hessp, method="Newton-CG", options={"xtol": 1e-8})
        >>> np.round(res.x, 4)
        array([1., 1., 1., 1., 1.])
    """

    def __init__(self, f, sparse=True):
        super().__init__(f)
        self.sparse = sparse
        self._hessian = SparseHessian(self.fn)
        self._last = None   # (x, args, value, gradient) of the last evaluation

    def fun_and_jac(self, x, *args):
        """(f(x), gradient of f at x), from one replay and one reverse sweep."""
        last = self._last
        arr = np.asarray(x, dtype=np.float64)
        if (last is not None and last[0].shape == arr.shape and np.array_equal(last[0], arr)
                and _same_args(last[1], args)):
            return last[2], last[3].copy()
        xt, arr, tape, y = self._tape(x, args, "Objective")
        y = _scalar_output(y, "Objective")
        value = float(y._value.reshape(()))
        if y._tape is tape and y._rg:
            grad = adjoint_products(tape, xt, y, np.ones((1, 1)))[0]
        else:
            grad = np.zeros(arr.size)
        self._last = (arr.copy(), tuple(args), value, grad)
        return value, grad.copy()

    def fun(self, x, *args):
        """f(x) as a float (the gradient is computed with it and kept for ``jac``)."""
        return self.fun_and_jac(x, *args)[0]

    def jac(self, x, *args):
        """The gradient of f at x, an ndarray of x's shape."""
        return self.fun_and_jac(x, *args)[1]

    def hess(self, x, *args):
        """The Hessian of f at x: a ``scipy.sparse.csr_matrix`` by compressed sweeps, or an
        ndarray with ``sparse=False``."""
        h = self._hessian(np.asarray(x, dtype=np.float64), *args)
        return h if self.sparse else h.toarray()

    def hessp(self, x, p, *args):
        """The Hessian of f at x times the vector p, by one forward-over-reverse sweep."""
        xt, arr, tape, y = self._tape(x, args, "Objective.hessp")
        y = _scalar_output(y, "Objective.hessp")
        p = np.asarray(p, dtype=np.float64)
        if p.shape != arr.shape:
            raise ValueError(f"Objective.hessp: p has shape {p.shape} but x has shape "
                             f"{arr.shape}")
        if y._tape is not tape or not y._rg:
            return np.zeros(arr.size)
        return compressed.hessian_products(self.fn, tape, xt, y, p.reshape(1, -1), args)[0]


class Residual(_Wrapped):
    """The callables ``least_squares`` and ``root`` take, for a vector ``F(x, *args)``.

    ``fun(x, *args) -> ndarray`` (F's entries in C order); ``jac(x, *args)`` the Jacobian, a
    ``scipy.sparse.csr_matrix`` by compressed sweeps (``sparse=False``: an ndarray, as
    ``root``'s methods and ``least_squares(method="lm")`` want); ``jac_sparsity(x, *args)``
    the pattern, for ``least_squares(jac_sparsity=...)`` with finite differences.

    Example:
        >>> from scipy.optimize import least_squares
        >>> r = tg.optimize.Residual(lambda v: v[1:] - 2 * v[:-1] ** 2 + 0.5)
        >>> res = least_squares(r.fun, np.full(4, 0.5), jac=r.jac)
        >>> bool(res.cost < 1e-20)
        True
    """

    def __init__(self, F, sparse=True):
        super().__init__(F)
        self.sparse = sparse
        self._jacobian = SparseJacobian(self.fn)

    def fun(self, x, *args):
        """F(x) as a 1-D ndarray."""
        _, _, _, y = self._tape(x, args, "Residual")
        y = _tensor_output(y, "Residual")
        return np.array(y._value, dtype=np.float64).reshape(-1)

    def jac(self, x, *args):
        """The Jacobian of F at x (sparse, or dense with ``sparse=False``)."""
        j = self._jacobian(np.asarray(x, dtype=np.float64), *args)
        return j if self.sparse else j.toarray()

    def jac_sparsity(self, x, *args):
        """The Jacobian's pattern at x, a boolean ``scipy.sparse.csr_matrix``."""
        return self._jacobian.sparsity(np.asarray(x, dtype=np.float64), *args)


class ODE:
    """``fun(t, y, *args)`` and ``jac(t, y, *args)`` for ``scipy.integrate.solve_ivp``, from a
    tapegrad right-hand side ``f(t, y, *args)``; the Jacobian is d f / d y, sparse (for
    ``Radau`` and ``BDF``, which take it as is) or dense with ``sparse=False`` (``LSODA``).

    ``t`` reaches ``f`` as a 0-d tensor that takes no gradient, so that one compiled tape
    serves every t (a Python float would be part of the compiled signature and record a new
    tape per step).

    Example:
        >>> from scipy.integrate import solve_ivp
        >>> ode = tg.optimize.ODE(lambda t, y: -50.0 * (y - t.cos()))
        >>> sol = solve_ivp(ode.fun, (0.0, 1.0), [0.0], method="Radau", jac=ode.jac)
        >>> bool(sol.success)
        True
    """

    def __init__(self, f, sparse=True):
        self.f = f
        self.sparse = sparse
        # y first, as the Jacobian's drivers differentiate their first argument
        self._residual = Residual(lambda y, t, *args: f(t, y, *args), sparse=sparse)

    @staticmethod
    def _time(t):
        from .creation import tensor
        return tensor(float(t))

    def fun(self, t, y, *args):
        """f(t, y) as a 1-D ndarray."""
        return self._residual.fun(y, self._time(t), *args)

    def jac(self, t, y, *args):
        """d f / d y at (t, y)."""
        return self._residual.jac(y, self._time(t), *args)


from ._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
