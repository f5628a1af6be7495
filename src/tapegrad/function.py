"""``tapegrad.autograd.Function``: differentiable ops written by the user, with a Python backward.

On the tape, a call ``MyFn.apply(x, y)`` is two kinds of records: a ``cat`` of the flattened
inputs that require grad (the *custom record*, whose gradient is the inputs' gradients side by
side; a flat clone for one input), and one record per differentiable output that reads one
element of it.  The
outputs' values in the arena are the ones ``forward`` returned; the records between them and
the custom record only give backward the right shape of dependencies.  Their gradient rules
never decide anything: when the sweep reaches the custom record, it stops (as it stops for a
tensor hook), hands the outputs' gradients to ``backward``, and writes what ``backward``
returns as the custom record's gradient, which ``cat``'s rule then sends to each input.  So a
custom op costs one Python call of ``backward`` per use, plus one split of the compiled sweep.

``create_graph=True`` calls ``backward`` with grad mode on, so a backward written with
tapegrad ops is differentiated again.  ``compile`` runs a function that uses one eagerly (the
reason is in ``fn.stats``).  Forward mode runs ``jvp`` (higher._tangents stops the tangent sweep
at the outputs' records and writes what ``jvp`` returns); the reverse and second-order
transforms refuse it (not yet).
"""
import sys

import numpy as np

from . import _anomaly
from . import autograd
from . import functional as F
from .autograd import Node, enable_grad, no_grad
from .tape import recording_tape, state
from .tensor import Tensor

_LEAF_IN_PLACE = "a leaf Variable that requires grad has been used in an in-place operation."


class FunctionCtx:
    """The ``ctx`` a Function's ``forward``/``setup_context`` and ``backward`` share."""

    def __init__(self):
        self.needs_input_grad = ()
        self.materialize_grads = True
        self._saved = None
        self._non_differentiable = set()
        self._dirty = set()
        self._fn_name = ""

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward can only save variables, but argument "
                                f"{tensors.index(t)} is of type {type(t).__name__}")
        self._saved = [(t, None if t is None else t._version) for t in tensors]

    def save_for_forward(self, *tensors):
        self.save_for_backward(*tensors)

    @property
    def saved_tensors(self):
        if self._saved is None:
            return ()
        out = []
        for t, version in self._saved:
            if t is not None and t._version != version:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: [tapegrad.{t.dtype.scalar_name}Tensor "
                    f"{list(t.shape)}], which is output 0 of {self._fn_name}, is at version "
                    f"{t._version}; expected version {version} instead.")
            out.append(t)
        return tuple(out)

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        self._dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class BackwardCFunction(Node):
    """The ``grad_fn`` of a Function's outputs: ``<MyFnBackward>``, listing the tensor
    arguments' nodes (None for one that needs no grad)."""

    __slots__ = ()
    _inputs = ()

    def _class_name(self):
        return type(self).__name__

    def name(self):
        return type(self).__name__

    def __repr__(self):
        # a Python class, which PyTorch's repr names with its module (its own nodes are not)
        cls = type(self)
        return f"<{cls.__module__}.{cls.__name__} object at {hex(id(self))}>"

    @property
    def next_functions(self):
        call = self._tape.custom[self._tape.custom_out[self._r]]
        return tuple((None if x is None or not x._rg else _node_of(x), 0)
                     for x in call.tensor_args)


def _node_of(x):
    if x._tape is None:
        return autograd.AccumulateGrad(x)
    return autograd.node_for(x._tape, x._r)


class _Call:
    """One use of a Function on a tape: what backward needs when the sweep reaches it."""

    __slots__ = ("cls", "ctx", "args", "tensor_args", "inputs", "outputs", "out_shapes",
                 "backward_cls")

    def __init__(self, cls, ctx, args, inputs, outputs, out_shapes, backward_cls):
        self.cls, self.ctx, self.args = cls, ctx, args
        self.tensor_args = [a for a in args if isinstance(a, Tensor)]
        self.inputs = inputs            # [(argument position, tensor)] that require grad
        self.outputs = outputs          # records of the outputs (None: not differentiable)
        self.out_shapes = out_shapes
        self.backward_cls = backward_cls

    def input_grads(self, grads_out, create_graph, anomaly_at=None):
        """The gradients of the inputs that require grad (flat arrays, or tensors under
        ``create_graph``), from the outputs' (None where an output got none)."""
        ctx = self.ctx
        if ctx.materialize_grads:
            grads_out = [np.zeros(s) if g is None and s is not None else g
                         for g, s in zip(grads_out, self.out_shapes)]
        as_tensor = [None if g is None else (g if isinstance(g, Tensor) else Tensor._make(g))
                     for g in grads_out]
        backward = self.cls.backward
        if create_graph and not getattr(backward, "_once_differentiable", False):
            with enable_grad():
                res = backward(ctx, *as_tensor)
        else:
            with no_grad():
                res = backward(ctx, *as_tensor)
        if not isinstance(res, tuple):
            res = (res,)
        name = self.backward_cls.__name__
        n_args = len(self.args)
        if len(res) != n_args:
            if len(res) < n_args or any(g is not None for g in res[n_args:]):
                raise RuntimeError(
                    f"function {name} returned an incorrect number of gradients (expected "
                    f"{n_args}, got {len(res)})")
        if anomaly_at is not None:
            # (tape, record) under anomaly mode with check_nan: a nan in any gradient
            # returned is the error, numbered by position, needed or not, as PyTorch's
            _anomaly.check_custom(*anomaly_at, res)
        out = []
        for pos, x in self.inputs:
            g = res[pos]
            if g is None:
                out.append(None)
                continue
            if not isinstance(g, Tensor):
                raise TypeError(f"function {name} returned a gradient different than None at "
                                f"position {pos + 1}, but the corresponding forward input was "
                                "not a Variable" if not isinstance(self.args[pos], Tensor)
                                else f"function {name} returned a non-tensor gradient at "
                                     f"position {pos + 1}")
            if g.shape != x.shape:
                try:
                    target = np.broadcast_shapes(tuple(x.shape), tuple(g.shape))
                except ValueError:
                    target = None
                if target != tuple(g.shape):
                    raise RuntimeError(
                        f"Function {name} returned an invalid gradient at index {pos} - got "
                        f"{list(g.shape)} but expected shape compatible with {list(x.shape)}")
                g = _sum_to(g, tuple(x.shape))
            out.append(g)
        return out


def _sum_to(g, shape):
    lead = g.dim() - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and g.shape[lead + i] != 1)
    if dims:
        g = F.sum(g, dim=dims, keepdim=True)
        g = F.reshape(g, *shape) if lead else g
    return F.reshape(g, *shape) if tuple(g.shape) != shape else g


class _FunctionMeta(type):
    def __init__(cls, name, bases, namespace):
        super().__init__(name, bases, namespace)
        # the grad_fn class PyTorch names after the Function: MyFnBackward
        cls._backward_cls = type(name + "Backward", (BackwardCFunction,),
                                 {"__slots__": (), "__module__": "tapegrad.autograd.function"})


class Function(metaclass=_FunctionMeta):
    """Base class of a differentiable op with a hand-written backward, as
    ``torch.autograd.Function``: ``forward(ctx, *args)`` (or ``forward(*args)`` with
    ``setup_context(ctx, inputs, output)``) and ``backward(ctx, *grad_outputs)``; call it with
    ``MyFn.apply(*args)``.

    Example:
        >>> class Cube(tg.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x ** 3
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (x,) = ctx.saved_tensors
        ...         return 3 * x ** 2 * g
        >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> y = Cube.apply(x)
        >>> y
        tensor([1., 8.], grad_fn=<CubeBackward>)
        >>> y.sum().backward(); x.grad
        tensor([ 3., 12.])
    """

    generate_vmap_rule = False

    def __init__(self, *args, **kwargs):
        pass

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward "
                                  "mode AD.")

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        return _apply(cls, args, kwargs)


def _uses_setup_context(cls):
    return getattr(cls.setup_context, "__func__", cls.setup_context) is not \
        Function.__dict__["setup_context"].__func__


def _apply(cls, args, kwargs):
    trace = state.trace
    if trace is not None:
        # its backward is Python, which a replay cannot run
        trace.opaque(f"autograd.Function {cls.__name__}")
    ctx = FunctionCtx()
    ctx._fn_name = cls.__name__     # PyTorch's messages name the node without "Backward"
    grad_on = state.grad_enabled
    ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._rg and grad_on for a in args)
    with no_grad():
        if _uses_setup_context(cls):
            result = cls.forward(*args, **kwargs)
            cls.setup_context(ctx, args if not kwargs else args + tuple(kwargs.values()),
                              result)
        else:
            result = cls.forward(ctx, *args, **kwargs)
    single = not isinstance(result, tuple)
    outs = (result,) if single else result
    inputs = [(i, a) for i, a in enumerate(args) if isinstance(a, Tensor) and a._rg]
    if not grad_on or not inputs:
        return result
    for i, a in inputs:
        if id(a) in ctx._dirty and a._tape is None:
            raise RuntimeError(_LEAF_IN_PLACE)
    wrapped = _record(cls, ctx, args, inputs, outs)
    return wrapped[0] if single else tuple(wrapped)


def _record(cls, ctx, args, inputs, outs):
    """Put one use on the tape (see the module's docstring); returns the outputs to hand
    back: recorded tensors for the differentiable ones."""
    differentiable = [isinstance(o, Tensor) and o._value.dtype.kind == "f"
                      and id(o) not in ctx._non_differentiable for o in outs]
    n_in = sum(x._value.size for _, x in inputs)
    room = 4 * n_in + sum(3 * o._value.size for o, d in zip(outs, differentiable) if d) + 64
    tape = recording_tape(room)
    if len(inputs) == 1:
        x = inputs[0][1]
        custom = F._reshaped(x, (x._value.size,), F.V_CLONE)
    else:
        custom = F.cat([F.reshape(x, -1) for _, x in inputs])
    # what the outputs read: one element of the custom record (any will do: the values and
    # the gradients that flow through are never used), or its sum when it has none
    total = custom if custom._value.size else F.sum(custom)
    wrapped, out_records, out_shapes = [], [], []
    for o, d in zip(outs, differentiable):
        if not d:
            wrapped.append(o)
            out_records.append(None)
            out_shapes.append(None)
            continue
        idx = np.zeros(o._value.shape, dtype=np.int64)
        y = F._gathered(total, idx, F.V_INDEX)
        np.copyto(y._value, o._value)   # the output's value is what forward returned
        if id(o) in ctx._dirty:
            # forward changed an input in place and returned it: that tensor is the output
            o._value, o._tape, o._r, o._rg, o._keep = y._value, y._tape, y._r, True, y._keep
            o._version += 1
            y = o
        wrapped.append(y)
        out_records.append(y._r)
        out_shapes.append(o._value.shape)
    if custom._tape is not tape or any(w._tape is not tape for w, r in zip(wrapped, out_records)
                                       if r is not None):
        raise RuntimeError("internal error: an autograd.Function's records span two tapes")
    if ctx._saved:
        # an output saved in forward is saved as the output handed back, with its history
        # (a backward that reads it is then differentiated through it under create_graph)
        handed = {id(o): w for o, w in zip(outs, wrapped) if w is not o}
        ctx._saved = [(handed[id(t)], handed[id(t)]._version) if id(t) in handed else (t, v)
                      for t, v in ctx._saved]
    call = _Call(cls, ctx, args, inputs, out_records, out_shapes, cls._backward_cls)
    tape.custom[custom._r] = call
    for r in out_records:
        if r is not None:
            tape.custom_out[r] = custom._r
            tape.nodes[r] = cls._backward_cls(tape, r)
    return wrapped


def run_custom(tape, r, grads, goff, need, size):
    """The sweep reached custom record r: its gradient becomes what backward returns."""
    call = tape.custom[r]
    grads_out = []
    for rec, shape in zip(call.outputs, call.out_shapes):
        if rec is None or not need[rec]:
            grads_out.append(None)
        else:
            grads_out.append(grads[goff[rec]:goff[rec] + size[rec]].reshape(shape).copy())
    if _anomaly._enabled:
        res = _anomaly_checked_grads(tape, r, call, grads_out, False)
    else:
        res = call.input_grads(grads_out, create_graph=False)
    g = grads[goff[r]:goff[r] + size[r]]
    at = 0
    for (_, x), gi in zip(call.inputs, res):
        n = x._value.size
        if gi is None:
            g[at:at + n] = 0.0
        else:
            g[at:at + n] = np.asarray(gi._value, dtype=np.float64).reshape(-1)
        at += n


def _anomaly_checked_grads(tape, r, call, grads_out, create_graph):
    """The Function's backward under anomaly mode: an error it raises comes after PyTorch's
    warning naming the node and its forward call, and (with check_nan) a nan it returns is
    the error."""
    try:
        return call.input_grads(grads_out, create_graph,
                                (tape, r) if _anomaly._check_nan else None)
    except Exception:
        _anomaly.warn_error_in(tape, r, call.backward_cls.__name__)
        raise


def once_differentiable(fn):
    """Mark a backward as not differentiable itself: ``create_graph`` runs it under no_grad,
    so its results carry no history (PyTorch raises when they are differentiated)."""
    def wrapper(ctx, *args):
        with no_grad():
            return fn(ctx, *args)
    wrapper._once_differentiable = True
    wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
    return wrapper


class _WithoutDerivative(Function):
    """The node of an op PyTorch has no derivative for (``detach_copy``, ``histogram``):
    the outputs of ``compute()`` require grad when an input does, and a backward through
    them raises ``derivative for aten::<op> is not implemented``."""

    @staticmethod
    def forward(ctx, aten_name, compute, *tensors):
        ctx.aten_name = aten_name
        return compute()

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(f"derivative for aten::{ctx.aten_name} is not implemented")


# PyTorch's node for an op without a derivative: class NotImplemented, named with its C++
# namespace
_WithoutDerivative._backward_cls = type(
    "NotImplemented", (_WithoutDerivative._backward_cls,),
    {"__slots__": (), "__module__": "tapegrad.autograd.function",
     "name": lambda self: "torch::autograd::NotImplemented"})


def _without_derivative(aten_name, compute, *tensors):
    """``compute()`` (a tuple of tensors) under PyTorch's NotImplemented node for the ATen op
    ``aten_name`` when grad mode is on and one of ``tensors`` (None allowed) requires grad."""
    if state.grad_enabled and any(isinstance(t, Tensor) and t._rg for t in tensors):
        return _WithoutDerivative.apply(aten_name, compute, *tensors)
    return compute()


# autograd.py is a module below this one: hand it the names PyTorch programs look for there
# (``tapegrad.autograd.Function``, ``from tapegrad.autograd.function import ...``)
autograd.Function = Function
autograd.function = sys.modules[__name__]
sys.modules["tapegrad.autograd.function"] = sys.modules[__name__]
autograd.ABOVE.run_custom = run_custom
