"""``tapegrad.utils.checkpoint``, as ``torch.utils.checkpoint``: activation checkpointing's
API, so programs that use it run unchanged.

tapegrad keeps every activation on its tape anyway, so nothing is recomputed and no memory is
saved: the values and gradients are those of calling the function directly."""
import warnings

from ..autograd import no_grad
from ..tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, early_stop=True, **kwargs):
    """``function(*args, **kwargs)``, as ``torch.utils.checkpoint.checkpoint`` gives it.

    tapegrad keeps the activations (no recomputation, no memory saved); values and gradients
    are those of the direct call.  As in PyTorch: not passing ``use_reentrant`` warns (and means
    True); with ``use_reentrant=True`` keyword arguments other than ``preserve_rng_state`` raise
    ``ValueError``, and when no tensor argument requires grad the result does not either (with
    PyTorch's warning).  ``grad_fn`` is the function's own, where PyTorch's reentrant variant
    shows ``CheckpointFunctionBackward``.

    Example:
        >>> x = tg.tensor([0.0, 1.0], requires_grad=True)
        >>> y = checkpoint(tg.sin, x, use_reentrant=False)
        >>> y.sum().backward(); x.grad
        tensor([1.0000, 0.5403])
    """
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
            "Starting in PyTorch 2.9, calling checkpoint without use_reentrant will raise an "
            "exception. use_reentrant=False is recommended, but if you need to preserve the "
            "current default behavior, you can pass use_reentrant=True. Refer to docs for more "
            "details on the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    kwargs.pop("preserve_rng_state", True)   # nothing is re-run, so there is no state to keep
    if not use_reentrant:
        return function(*args, **kwargs)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        # the reentrant variant runs the function without recording: parameters it uses get
        # no gradient through it either
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                      stacklevel=2)
        with no_grad():
            return function(*args)
    return function(*args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run ``functions`` (an ``nn.Sequential`` or a list of modules/functions) one after the
    other on ``input``, split into ``segments`` checkpointed pieces, as
    ``torch.utils.checkpoint.checkpoint_sequential``: the last piece runs directly.

    Same values and gradients as ``functions(input)``: tapegrad keeps the activations.
    Not passing ``use_reentrant`` warns, as in PyTorch.

    Example:
        >>> model = nn.Sequential(nn.Tanh(), nn.Tanh())
        >>> checkpoint_sequential(model, 2, tg.tensor([0.0, 1.0]), use_reentrant=False)
        tensor([0.0000, 0.6420])
    """
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should "
            "be passed explicitly. In version 2.9 we will raise an exception if use_reentrant "
            "is not passed. use_reentrant=False is recommended, but if you need to preserve "
            "the current default behavior, you can pass use_reentrant=True. Refer to docs for "
            "more details on the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    from ..nn import Sequential
    if isinstance(functions, Sequential):
        functions = list(functions.children())

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
