"""Function transforms in the style of JAX and HIPS autograd: grad, value_and_grad.

They work on any function of tensors, compiled (``tapegrad.compile``) or not; with a compiled
function every call after the first replays its tape.
"""
import numpy as np

from . import autograd
from .creation import tensor
from .tensor import Tensor


def _argnums(argnums):
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


def value_and_grad(fn, argnums=0):
    """``fn(*args) -> scalar`` becomes ``(*args) -> (value, gradient)``.

    The gradient is taken w.r.t. ``args[argnums]`` (a tuple of gradients for a tuple of
    argnums); arguments may be tensors, NumPy arrays or Python floats.  Unused arguments get
    zero gradients.  ``.grad`` of the arguments is not touched.

    Shape: the value is ``()``; each gradient has its argument's shape.

    Example:
        >>> f = tg.value_and_grad(lambda w, x: ((x @ w) ** 2).sum(), argnums=(0, 1))
        >>> value, (dw, dx) = f(tg.tensor([1.0, 2.0]), tg.tensor([[1.0, 0.0], [0.0, 1.0]]))
        >>> value, dw, dx.shape
        (tensor(5.), tensor([2., 4.]), tapegrad.Size([2, 2]))
    """
    nums = _argnums(argnums)

    def wrapped(*args, **kwargs):
        call = list(args)
        targets = []
        for i in nums:
            if i >= len(args):
                raise TypeError(f"argnums={argnums} but the function got {len(args)} arguments")
            a = args[i]
            v = a._value if isinstance(a, Tensor) else tensor(a)._value
            if v.dtype.kind != "f":
                raise TypeError(f"grad requires real floating-point arguments; argument {i} "
                                f"has dtype {v.dtype}")
            t = Tensor._make(v, True)
            call[i] = t
            targets.append(t)
        out = fn(*call, **kwargs)
        if not isinstance(out, Tensor):
            raise TypeError(f"the function must return a tensor, got {type(out).__name__}")
        if out._value.size != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs; the "
                               f"function returned shape {list(out.shape)}")
        if not out._rg:
            grads = [Tensor._make(np.zeros(t._value.shape)) for t in targets]
        else:
            grads = _generated_grads(out, targets)
            if grads is None:
                grads = autograd.grad(out, targets, materialize_grads=True)
        value = Tensor._make(out._value)
        return value, (grads[0] if isinstance(argnums, int) else tuple(grads))

    wrapped.__name__ = f"value_and_grad({getattr(fn, '__name__', 'fn')})"
    wrapped.__doc__ = value_and_grad.__doc__
    return wrapped


def _generated_grads(out, targets):
    """The gradients of ``targets`` straight from a replayed tape's generated backward, or
    None where that does not apply.

    The value handed back is detached, so nothing else can reach this tape: no hooks, no
    retained tensors, no second backward.  What ``run_backward`` keeps track of for those
    is skipped; the sweep itself is the same code ``backward()`` runs."""
    tape = out._tape
    prog = tape.program if tape is not None else None
    if prog is None or prog.seed != out._r or tape.hooks or tape.custom:
        return None
    grads = autograd.gradient_arena(prog.total)
    grads[prog.seed_offset] = 1.0
    # (the arena as the generated forward left it: the generated backward reads no more)
    prog.backward(tape.arena, tape.ext, grads, *prog.backward_params)
    offsets = {r: off for r, off, _ in prog.leaf_slots}
    result = []
    for t in targets:
        hit = tape.leaf_rec.get(id(t))
        g = np.zeros(t._value.shape)
        if hit is not None and hit[0] in offsets:
            off = offsets[hit[0]]
            g.reshape(-1)[:] = grads[off:off + g.size]
        result.append(Tensor._make(g))
    return result


def grad(fn, argnums=0):
    """``fn(*args) -> scalar`` becomes ``(*args) -> gradient`` (see value_and_grad).

    Shape: the gradient has the shape of ``args[argnums]`` (a tuple of them for a tuple of
    argnums).

    Example:
        >>> tg.grad(lambda v: (v ** 3).sum())(tg.tensor([1.0, 2.0]))
        tensor([ 3., 12.])
    """
    vg = value_and_grad(fn, argnums)

    def wrapped(*args, **kwargs):
        return vg(*args, **kwargs)[1]

    wrapped.__name__ = f"grad({getattr(fn, '__name__', 'fn')})"
    return wrapped
