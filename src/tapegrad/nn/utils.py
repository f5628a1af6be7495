"""``tapegrad.nn.utils``: gradient clipping and flattening parameters into one vector, as in
``torch.nn.utils``.

Clipping follows PyTorch's arithmetic step for step -- each gradient's norm, the norm of
those norms, ``max_norm / (total + 1e-6)`` clamped to 1, one multiply per gradient -- so the
clipped gradients are PyTorch's to the last bit wherever the norms are.
"""
import math
import types
import warnings

import numpy as np

import tapegrad as tg
from tapegrad.tensor import Tensor, _typename

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters"]


def _tensor_list(tensors):
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type``-norm of all ``tensors`` taken as one vector (a 0-d tensor).

    ``tensors`` is a tensor or an iterable of them (typically gradients); an empty one gives 0.

    Example:
        >>> nn.utils.get_total_norm([tg.tensor([3.0]), tg.tensor([4.0])])
        tensor(5.)
    """
    tensors = _tensor_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tg.tensor(0.0)
    with tg.no_grad():
        norms = [tg.norm(t, norm_type) for t in tensors]
        total = tg.norm(tg.stack(norms), norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the "
            "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale every gradient by ``min(max_norm / (total_norm + 1e-6), 1)``, in place.

    ``total_norm`` is what ``get_total_norm`` gave for these gradients; returns None.

    Example:
        >>> p = nn.Parameter(tg.zeros(2))
        >>> p.grad = tg.tensor([3.0, 4.0])
        >>> nn.utils.clip_grads_with_norm_([p], 1.0, tg.tensor(5.0))
        >>> p.grad
        tensor([0.6000, 0.8000])
    """
    grads = [p.grad for p in _tensor_list(parameters) if p.grad is not None]
    if not grads:
        return
    # Python floats are IEEE doubles: the same two roundings as PyTorch's 0-d tensor ops
    coef = float(max_norm) / (float(total_norm) + 1e-6)
    coef = 1.0 if coef > 1.0 else coef   # a NaN coefficient stays NaN, as clamp keeps it
    with tg.no_grad():
        for g in grads:
            g.mul_(coef)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Scale the gradients of ``parameters`` so that their total ``norm_type``-norm is at most
    ``max_norm``; returns the total norm they had (a 0-d tensor).

    Parameters without a gradient are skipped.  Call it between ``backward()`` and the
    optimizer's ``step()``.

    Example:
        >>> lin = nn.Linear(2, 2)
        >>> lin.weight.grad = tg.tensor([[3.0, 0.0], [0.0, 4.0]])
        >>> lin.bias.grad = tg.zeros(2)
        >>> nn.utils.clip_grad_norm_(lin.parameters(), max_norm=1.0)
        tensor(5.)
        >>> lin.weight.grad
        tensor([[0.6000, 0.0000],
                [0.0000, 0.8000]])
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        is_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)
        if is_generator and not parameters:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.",
                          stacklevel=2)
    grads = [p.grad for p in parameters if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient of ``parameters`` into [-clip_value, clip_value], in place.

    Example:
        >>> p = nn.Parameter(tg.zeros(3))
        >>> p.grad = tg.tensor([-5.0, 0.5, 2.0])
        >>> nn.utils.clip_grad_value_([p], 1.0)
        >>> p.grad
        tensor([-1.0000,  0.5000,  1.0000])
    """
    clip_value = float(clip_value)
    with tg.no_grad():
        for p in _tensor_list(parameters):
            if p.grad is not None:
                p.grad.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters):
    """All parameters flattened and joined into one vector (differentiable, as in PyTorch).

    Shape: ``(total number of elements,)``.

    Example:
        >>> a, b = nn.Parameter(tg.ones(2, 2)), nn.Parameter(tg.zeros(3))
        >>> nn.utils.parameters_to_vector([a, b])
        tensor([1., 1., 1., 1., 0., 0., 0.], grad_fn=<CatBackward0>)
    """
    return tg.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Give ``parameters``, in order, the values of consecutive pieces of ``vec``.

    Each parameter gets a copy of its piece (PyTorch makes it a view of ``vec``, so a later
    in-place change of ``vec`` would show in the parameters: here it does not).

    Example:
        >>> a, b = nn.Parameter(tg.ones(2, 2)), nn.Parameter(tg.zeros(3))
        >>> nn.utils.vector_to_parameters(tg.arange(7.0), [a, b])
        >>> a.detach(), b.detach()
        (tensor([[0., 1.],
                [2., 3.]]), tensor([4., 5., 6.]))
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected tapegrad.Tensor, but got: {_typename(vec)}")
    flat = vec._value.reshape(-1)
    pointer = 0
    for param in parameters:
        n = param.numel()
        piece = tg.from_numpy(np.array(flat[pointer:pointer + n], dtype=param._value.dtype))
        param.data = piece.view(param.shape)
        pointer += n


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
