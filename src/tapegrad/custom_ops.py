"""Your own ``@njit`` kernels as differentiable ops that run inside tapegrad's compiled passes.

``autograd.Function`` runs a Python ``backward`` per use.  ``custom_op`` takes numba kernels
instead: the backward sweep, the compiled replay (``compile``), batched replay (``vmap``),
forward mode (``jvp``, ``jacfwd``) and second order (``hessian``, ``hvp``) call them from
compiled code, with no Python per record, as they call tapegrad's own ops::

    @numba.njit
    def cube(x, out, p):               # forward: write out from x (flat float64 arrays)
        for i in range(x.size):
            out[i] = p[0] * x[i] ** 3

    @numba.njit
    def cube_vjp(x, out, g, gx, p):    # backward: write gx = J^T g (gx starts at zero)
        for i in range(x.size):
            gx[i] = g[i] * 3.0 * p[0] * x[i] ** 2

    cube_op = tapegrad.custom_op("Cube", forward=cube, vjp=cube_vjp)
    y = cube_op(x, params=[2.0])       # grad_fn=<CubeBackward>

The kernels' arguments, all flat float64 arrays (``p``: the ``params`` of the call):

========== =========================== ====================================================
kernel     one input                   two inputs
========== =========================== ====================================================
forward    ``(x, out, p)``             ``(x, y, out, p)``
vjp        ``(x, out, g, gx, p)``      ``(x, y, out, g, gx, gy, p)``: write J^T g
jvp        ``(x, tx, out, tout, p)``   ``(x, y, tx, ty, out, tout, p)``: write J t
curvature  ``(x, tx, out, g, gx, p)``  ``(x, y, tx, ty, out, g, gx, gy, p)``
========== =========================== ====================================================

An elementwise op can be given by its rules on one element instead
(``tapegrad.elementwise_op(name, value, derivative, second_derivative)``): its array kernels
are loops over them, made here, and generated code (``compile`` of a scalar loop) calls the
rules themselves, so such an op costs what a built-in op costs there.

``curvature`` writes the directional derivative of the vjp: d/de [J(x + e tx)^T g] at
e = 0 (for an elementwise f: ``gx = g * f''(x) * tx``); the Hessian needs it.  Outputs are
zeroed before each call, so a kernel assigns them.  A kernel's exception (give it
``@njit(boundscheck=True)`` to catch indexing errors) becomes a RuntimeError naming the op and
kernel; a pass that needs a kernel the op lacks says which to pass.  Check your rules with
``tapegrad.testing.gradcheck`` and ``gradgradcheck``.

Each wrapper compiles (about half a second) when a pass first needs it: ``vjp`` on the first
backward, ``forward`` on the first replay.  A tape file holding a custom op loads only in a
process that has defined an op of the same name with the same kernels.
"""
import hashlib
import inspect
import math
import numbers

import numba
import numpy as np

from . import _anomaly
from . import functional as F
from . import ops as K
from ._public import public_dir
from .functional import _emit, _plain, _records, _ref
from .ops import custom as _table
from .tape import recording_tape
from .tensor import Tensor

_anomaly.emits_through(globals())   # (its ops' records go through _emit too)

__all__ = ["custom_op", "elementwise_op", "CustomOp"]
__dir__ = public_dir(globals())

_NO_PARAMS = np.zeros(0)   # (writable: a read-only array would make numba compile again)


def _dispatcher(kernel, what):
    if kernel is None:
        return None
    if isinstance(kernel, numba.core.registry.CPUDispatcher):
        return kernel
    if callable(kernel):
        return numba.njit(kernel)
    raise TypeError(f"custom_op: {what} must be a function (a numba @njit kernel), "
                    f"not {type(kernel).__name__}")


def _parameters(fn):
    return len(inspect.signature(getattr(fn, "py_func", fn)).parameters)


def _digest(name, arity, kernels):
    """A stable key of the kernels' code: a tape file is loaded only with the same ones."""
    h = hashlib.sha256(f"{name}\0{arity}".encode())
    for k in kernels:
        if k is None:
            h.update(b"\0none")
            continue
        _hash_code(h, k.py_func.__code__)
    return int.from_bytes(h.digest()[:8], "little") >> 2


def _hash_code(h, code):
    # nested code objects by their contents: their repr holds a memory address, which differs
    # from process to process
    h.update(code.co_code + repr(code.co_names).encode())
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            _hash_code(h, c)
        else:
            h.update(repr(c).encode())


def _derived(arity, value, derivative, second):
    """The array kernels of an elementwise op, as loops over its scalar rules.  The vjp
    computes ``g * derivative`` and nothing else, as generated code does, so both give the
    same bits."""
    f, df, d2f = value, derivative, second
    if arity == 1:
        @numba.njit
        def forward(x, out, p):
            for i in range(x.size):
                out[i] = f(x[i], p)

        @numba.njit
        def vjp(x, out, g, gx, p):
            for i in range(x.size):
                gx[i] = g[i] * df(x[i], out[i], p)

        @numba.njit
        def jvp(x, tx, out, tout, p):
            for i in range(x.size):
                tout[i] = df(x[i], out[i], p) * tx[i]

        @numba.njit
        def curvature(x, tx, out, g, gx, p):
            for i in range(x.size):
                gx[i] = g[i] * d2f(x[i], out[i], p) * tx[i]
    else:
        @numba.njit
        def forward(x, y, out, p):
            for i in range(x.size):
                out[i] = f(x[i], y[i], p)

        @numba.njit
        def vjp(x, y, out, g, gx, gy, p):
            for i in range(x.size):
                dx, dy = df(x[i], y[i], out[i], p)
                gx[i] = g[i] * dx
                gy[i] = g[i] * dy

        @numba.njit
        def jvp(x, y, tx, ty, out, tout, p):
            for i in range(x.size):
                dx, dy = df(x[i], y[i], out[i], p)
                tout[i] = dx * tx[i] + dy * ty[i]

        @numba.njit
        def curvature(x, y, tx, ty, out, g, gx, gy, p):
            for i in range(x.size):
                hxx, hxy, hyy = d2f(x[i], y[i], out[i], p)
                gx[i] = g[i] * (hxx * tx[i] + hxy * ty[i])
                gy[i] = g[i] * (hxy * tx[i] + hyy * ty[i])
    return forward, vjp, jvp, (curvature if d2f is not None else None)


class CustomOp:
    """A differentiable op made of numba kernels (see ``custom_op`` and ``elementwise_op``).
    Call it on tensors: ``op(x)`` or ``op(x, y)``, with ``params=`` a sequence of floats the
    kernels read as ``p``."""

    def __init__(self, name, forward, vjp, jvp, curvature, shape, scalar=None):
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"custom_op: the name must be an identifier, got {name!r}")
        fwd = _dispatcher(forward, "forward")
        if fwd is None:
            raise TypeError("custom_op: a forward kernel is required")
        arity = _parameters(fwd) - 2
        if arity not in (1, 2):
            raise TypeError(f"custom_op '{name}': the forward kernel takes (x, out, p) or "
                            f"(x, y, out, p), not {_parameters(fwd)} arguments")
        kernels = [None] * 4
        kernels[_table.FORWARD] = fwd
        for kind, given in ((_table.VJP, vjp), (_table.JVP, jvp),
                            (_table.CURVATURE, curvature)):
            k = _dispatcher(given, _table.KIND_NAMES[kind])
            want = len(_table.KERNEL_ARGS[kind, arity])
            if k is not None and _parameters(k) != want:
                names = ", ".join(_table.SLOT_NAMES[s]
                                  for s in _table.KERNEL_ARGS[kind, arity])
                raise TypeError(f"custom_op '{name}': the {_table.KIND_NAMES[kind]} kernel "
                                f"of a {arity}-input op takes ({names}), not "
                                f"{_parameters(k)} arguments")
            kernels[kind] = k
        if shape is not None and not callable(shape):
            raise TypeError("custom_op: shape must be a function of the input shapes")
        self.name, self.arity, self._shape = name, arity, shape
        # an elementwise op: its inputs broadcast, and its digest is its scalar rules' (the
        # derived kernels' code is the same for every such op)
        self.elementwise = scalar is not None
        digest = _digest(name, arity, scalar if self.elementwise else kernels)
        self._kernels = _table.register(name, arity, kernels, digest,
                                        scalar[:2] if self.elementwise else None)
        # what a record of this op holds after its ip (ops/custom.py: the record layout)
        self._aux_head = [self._kernels.ident, self._kernels.slots.ctypes.data]
        self._aux_tail = [self._kernels.digest, len(name)] + [ord(c) for c in name]
        self._aux_no_params = self._aux_head + [0, 0] + self._aux_tail

    def __repr__(self):
        kinds = [n for n, k in zip(_table.KIND_NAMES, self._kernels.kernels) if k is not None]
        return f"<custom op {self.name}: {', '.join(kinds)}>"

    def output_shape(self, *shapes):
        """The output's shape for inputs of ``shapes`` (the first input's, unless ``shape``
        was given)."""
        if self._shape is None:
            return tuple(shapes[0])
        out = self._shape(*shapes)
        if isinstance(out, numbers.Integral):
            out = (out,)
        try:
            out = tuple(int(d) for d in out)
        except (TypeError, ValueError):
            raise TypeError(f"custom op '{self.name}': shape returned {out!r}, not a tuple "
                            "of ints") from None
        if any(d < 0 for d in out):
            raise ValueError(f"custom op '{self.name}': shape returned {out}, which has a "
                             "negative size")
        return out

    def _params(self, params):
        """``params`` as a flat float64 array (numbers only: a tensor would be frozen)."""
        listed = isinstance(params, (tuple, list))
        if listed and not params:
            return _NO_PARAMS
        if isinstance(params, Tensor) or (listed and any(isinstance(v, Tensor)
                                                         for v in params)):
            raise TypeError(f"custom op '{self.name}': params are numbers (constants of the "
                            "op); pass tensors as inputs")
        return np.ascontiguousarray(params, dtype=np.float64).reshape(-1)

    def __call__(self, *inputs, params=()):
        if len(inputs) != self.arity:
            raise TypeError(f"custom op '{self.name}' takes {self.arity} tensor "
                            f"input{'s' if self.arity > 1 else ''}, got {len(inputs)}")
        xs = []
        for x in inputs:
            x = F.as_tensor_arg(x)
            if x._value.dtype != np.float64:
                x = x.double()
            xs.append(x)
        if self.elementwise and len(xs) == 2 and xs[0]._value.shape != xs[1]._value.shape:
            common = F.broadcast_shape(xs[0]._value.shape, xs[1]._value.shape)
            xs = [x if x._value.shape == common else F.expand(x, *common) for x in xs]
        p = self._params(params)
        shape = (xs[0]._value.shape if self._shape is None else
                 self.output_shape(*(x._value.shape for x in xs)))
        n = math.prod(shape)
        flat = [x._value.reshape(-1) for x in xs]   # (a copy only where x is not contiguous)
        if not _records(*xs):
            value = np.zeros(n)
            self._forward(flat, value, p)
            return _plain(value.reshape(shape))
        tape = recording_tape(2 * n + sum(v.size for v in flat) + 2)
        refs = [_ref(tape, x) for x in xs]
        # the kernel writes the output's slot in the arena (zeroed first, as the kernels are
        # promised); one that raises leaves the slot free again and records nothing
        off = tape.alloc(n)
        out = tape.vals[off:off + n]
        out[:] = 0.0
        try:
            self._forward(flat, out, p)
        except BaseException:
            tape.top = off
            raise
        if p.size:
            aux = self._aux_head + [p.size, tape.put_faux(p.tolist())] + self._aux_tail
        else:
            aux = self._aux_no_params
        return _emit(tape, K.CUSTOM, refs[0], refs[1] if len(refs) > 1 else -1, off, n,
                     tape.put_aux(aux), 0.0, out if len(shape) == 1 else out.reshape(shape))

    def _forward(self, flat, out, p):
        try:
            self._kernels.kernels[_table.FORWARD](*flat, out, p)
        except Exception as exc:
            raise RuntimeError(f"custom op '{self.name}': its forward kernel raised "
                               f"{type(exc).__name__}: {exc}") from exc


def custom_op(name, forward, *, vjp=None, jvp=None, curvature=None, shape=None):
    """Make numba kernels a differentiable op of tapegrad's table: a ``CustomOp``.

    ``forward``/``vjp``/``jvp``/``curvature``: ``@njit`` kernels on flat float64 arrays
    (plain functions are compiled with ``numba.njit``); their arguments are listed in the
    module docstring, and the number of ``forward``'s says whether the op takes one input
    or two.  ``shape(*input_shapes)``: the output's shape (default: the first input's).
    ``name`` makes the grad_fn ``<{name}Backward>``.  Only ``forward`` is required;
    backward needs ``vjp``, forward mode ``jvp``, second order ``curvature`` too.

    Example:
        >>> import numba
        >>> @numba.njit
        ... def square(x, out, p):
        ...     for i in range(x.size):
        ...         out[i] = x[i] * x[i]
        >>> @numba.njit
        ... def square_vjp(x, out, g, gx, p):
        ...     for i in range(x.size):
        ...         gx[i] = 2.0 * x[i] * g[i]
        >>> sq = tg.custom_op("Square", square, vjp=square_vjp)
        >>> x = tg.tensor([1.0, 3.0], requires_grad=True)
        >>> y = sq(x)
        >>> y
        tensor([1., 9.], grad_fn=<SquareBackward>)
        >>> y.sum().backward()
        >>> x.grad
        tensor([2., 6.])
    """
    return CustomOp(name, forward, vjp, jvp, curvature, shape)


def elementwise_op(name, value, derivative, second_derivative=None):
    """An elementwise op from its rules on one element: a ``CustomOp`` whose array kernels
    loop over them, and which generated code (``compile`` of one-element tapes, as in
    scalar loops) calls directly.

    One input: ``value(x, p) -> y``, ``derivative(x, y, p) -> dy/dx``,
    ``second_derivative(x, y, p) -> d2y/dx2``.  Two inputs (broadcast like ``x + y``):
    ``value(x, y, p) -> z``, ``derivative(x, y, z, p) -> (dz/dx, dz/dy)``,
    ``second_derivative(x, y, z, p) -> (d2z/dx2, d2z/dxdy, d2z/dy2)``.  ``x``, ``y``, the
    values and the derivatives are floats; ``p`` the call's ``params`` (a float64 array).
    Give them as ``@njit`` functions (plain functions are compiled with ``numba.njit``).
    ``second_derivative`` is what ``hessian``/``hvp`` need; without it they say so.

    Example:
        >>> import numba
        >>> @numba.njit
        ... def softsign(x, p):
        ...     return x / (1.0 + abs(x))
        >>> @numba.njit
        ... def softsign_d(x, y, p):
        ...     return 1.0 / (1.0 + abs(x)) ** 2
        >>> op = tg.elementwise_op("Softsign", softsign, softsign_d)
        >>> x = tg.tensor([-1.0, 3.0], requires_grad=True)
        >>> y = op(x)
        >>> y
        tensor([-0.5000,  0.7500], grad_fn=<SoftsignBackward>)
        >>> y.sum().backward()
        >>> x.grad
        tensor([0.2500, 0.0625])
    """
    f = _dispatcher(value, "value")
    if f is None:
        raise TypeError("elementwise_op: a value function is required")
    arity = _parameters(f) - 1
    if arity not in (1, 2):
        raise TypeError(f"elementwise_op '{name}': value takes (x, p) or (x, y, p), not "
                        f"{_parameters(f)} arguments")
    rules = [f]
    for what, given, required in (("derivative", derivative, True),
                                  ("second_derivative", second_derivative, False)):
        rule = _dispatcher(given, what)
        if rule is None and required:
            raise TypeError(f"elementwise_op '{name}': a derivative function is required")
        if rule is not None and _parameters(rule) != arity + 2:
            args = "x, y, p" if arity == 1 else "x, y, z, p"
            raise TypeError(f"elementwise_op '{name}': {what} of a {arity}-input op takes "
                            f"({args}), not {_parameters(rule)} arguments")
        rules.append(rule)
    forward, vjp, jvp, curvature = _derived(arity, *rules)
    return CustomOp(name, forward, vjp, jvp, curvature, None, scalar=tuple(rules))
