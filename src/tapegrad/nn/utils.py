"""``tapegrad.nn.utils``: gradient clipping, flattening parameters into one vector, and the
hook-based weight and spectral normalisations (``weight_norm``, ``spectral_norm``), as in
``torch.nn.utils``.

Clipping follows PyTorch's arithmetic step for step -- each gradient's norm, the norm of
those norms, ``max_norm / (total + 1e-6)`` clamped to 1, one multiply per gradient -- so the
clipped gradients are PyTorch's to the last bit wherever the norms are.
"""
import copy
import inspect
import math
import types
import warnings

import numpy as np

import tapegrad as tg
from tapegrad.tensor import Tensor, _typename

from .modules import Module, Parameter
from .weight_norm_math import _norm_except_dim, _weight_norm  # noqa: F401 - tg._weight_norm

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm", "parameters_to_vector", "vector_to_parameters", "weight_norm", "remove_weight_norm",
           "spectral_norm", "remove_spectral_norm", "fuse_conv_bn_eval", "fuse_conv_bn_weights",
           "fuse_linear_bn_eval", "fuse_linear_bn_weights", "skip_init", "parametrize",
           "parametrizations", "rnn", "prune"]


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


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                   foreach=None):
    """``clip_grad_norm_``, under the name PyTorch deprecates (with its FutureWarning)."""
    warnings.warn("`tapegrad.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`tapegrad.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


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


# --- weight normalisation (the hook-based API of torch.nn.utils.weight_norm) ---------------
class _WeightNorm:
    """The forward pre-hook ``weight_norm`` registers: before each forward it sets the
    module's ``name`` to the weight recomputed from ``name_g`` and ``name_v``."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim   # -1: one norm over the whole tensor

    def compute_weight(self, module):
        return _weight_norm(getattr(module, self.name + "_v"),
                            getattr(module, self.name + "_g"), self.dim)

    def remove(self, module):
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Reparametrise ``module``'s parameter ``name`` as magnitude times direction: the
    parameters ``name_g`` (the norms of the slices along ``dim``; ``dim=None`` one norm of
    the whole tensor) and ``name_v`` replace it, and a forward pre-hook recomputes ``name``
    from them before every call.  Returns ``module``.

    Deprecated in PyTorch (a ``FutureWarning``) in favour of
    ``nn.utils.parametrizations.weight_norm``, which tapegrad has too.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore", FutureWarning)
        ...     lin = nn.utils.weight_norm(nn.Linear(3, 2))
        >>> [name for name, _ in lin.named_parameters()]
        ['bias', 'weight_g', 'weight_v']
        >>> lin.weight_g.shape
        tapegrad.Size([2, 1])
    """
    warnings.warn("`tapegrad.nn.utils.weight_norm` is deprecated in favor of "
                  "`tapegrad.nn.utils.parametrizations.weight_norm`.", FutureWarning,
                  stacklevel=2)
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, _WeightNorm) and hook.name == name:
            raise RuntimeError(
                f"Cannot register two weight_norm hooks on the same parameter {name}")
    fn = _WeightNorm(name, dim)
    weight = getattr(module, name)
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight, fn.dim).data))
    module.register_parameter(name + "_v", Parameter(weight.data))
    setattr(module, name, fn.compute_weight(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module, name="weight"):
    """Undo ``weight_norm``: ``name`` becomes a parameter again, holding the current
    recomputed weight, and ``name_g``, ``name_v`` and the hook go.  Returns ``module``.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore", FutureWarning)
        ...     lin = nn.utils.weight_norm(nn.Linear(3, 2))
        >>> [name for name, _ in nn.utils.remove_weight_norm(lin).named_parameters()]
        ['bias', 'weight']
    """
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, _WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")


# --- spectral normalisation (the hook-based API of torch.nn.utils.spectral_norm) -----------
class _SpectralNorm:
    """The forward pre-hook ``spectral_norm`` registers: before each forward it sets the
    module's ``name`` to ``name_orig`` divided by its largest singular value, estimated by
    power iteration on the buffers ``name_u`` and ``name_v`` (iterated in training mode)."""

    def __init__(self, name, n_power_iterations, dim, eps):
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but "
                             f"got n_power_iterations={n_power_iterations}")
        self.name, self.n_power_iterations, self.dim, self.eps = \
            name, n_power_iterations, dim, eps

    def reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            rest = [d for d in range(weight.ndim) if d != self.dim]
            weight = weight.permute(self.dim, *rest)
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration):
        from . import functional as F
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with tg.no_grad():
                u_buf, v_buf = u, v
                for _ in range(self.n_power_iterations):
                    # the buffers are updated in place, as PyTorch's out= does
                    v_buf.copy_(F.normalize(tg.mv(weight_mat.t(), u_buf), dim=0, eps=self.eps))
                    u_buf.copy_(F.normalize(tg.mv(weight_mat, v_buf), dim=0, eps=self.eps))
                # copies: the graph of sigma must not see the next forward's update
                u, v = u_buf.clone(), v_buf.clone()
        sigma = tg.dot(u, tg.mv(weight_mat, v))
        return weight / sigma

    def remove(self, module):
        with tg.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divide ``module``'s parameter ``name`` by its spectral norm before every forward.

    The parameter moves to ``name_orig``; the buffers ``name_u`` and ``name_v`` (unit
    vectors drawn from the normal distribution, the same numbers as PyTorch's after the
    same seed) carry the power iteration, ``n_power_iterations`` steps per forward in
    training mode.  ``dim`` (default 0, 1 for the transposed convolutions) is the output
    axis; a weight of more than two axes is flattened to a matrix around it.  Returns
    ``module``.

    Example:
        >>> lin = nn.utils.spectral_norm(nn.Linear(20, 40))
        >>> lin.weight_u.shape
        tapegrad.Size([40])
        >>> list(lin.state_dict())
        ['bias', 'weight_orig', 'weight_u', 'weight_v']
    """
    from .conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
    from . import functional as F
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, _SpectralNorm) and hook.name == name:
            raise RuntimeError(
                f"Cannot register two spectral_norm hooks on the same parameter {name}")
    fn = _SpectralNorm(name, n_power_iterations, dim, eps)
    weight = module._parameters[name]
    if weight is None:
        raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
    with tg.no_grad():
        h, w = fn.reshape_weight_to_matrix(weight).shape
        # u first, then v: the order PyTorch draws them in
        u = F.normalize(tg.empty(h).normal_(0, 1), dim=0, eps=fn.eps)
        v = F.normalize(tg.empty(w).normal_(0, 1), dim=0, eps=fn.eps)
    delattr(module, fn.name)
    module.register_parameter(fn.name + "_orig", weight)
    setattr(module, fn.name, weight.data)
    module.register_buffer(fn.name + "_u", u)
    module.register_buffer(fn.name + "_v", v)
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module, name="weight"):
    """Undo ``spectral_norm``: ``name`` becomes a parameter again, holding the current
    normalised weight (no further power iteration); ``name_orig``, the buffers and the hook
    go.  Returns ``module``.

    Example:
        >>> lin = nn.utils.remove_spectral_norm(nn.utils.spectral_norm(nn.Linear(4, 3)))
        >>> list(lin.state_dict())
        ['bias', 'weight']
    """
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, _SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")


# ---------------------------------------------------------------------------------------------
# Folding an eval-mode batch norm into the layer before it
# ---------------------------------------------------------------------------------------------
def _check_fusable(layer, bn):
    if layer.training or bn.training:
        raise AssertionError("Fusion only for eval!")


def _check_running_stats(bn):
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of ``conv`` whose weight and bias also apply ``bn``'s normalisation with its
    running statistics (both modules in eval mode); ``transpose`` for transposed
    convolutions, whose output channels are the weight's second dimension."""
    _check_fusable(conv, bn)
    fused = copy.deepcopy(conv)
    _check_running_stats(bn)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias,
        transpose)
    return fused


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """(weight, bias) Parameters of a convolution followed by batch norm with the given
    running statistics and affine parameters (``None`` ones as the identity), in the
    convolution's dtypes."""
    weight_dtype = conv_w.dtype
    bias_dtype = conv_b.dtype if conv_b is not None else weight_dtype
    if conv_b is None:
        conv_b = tg.zeros_like(bn_rm)
    if bn_w is None:
        bn_w = tg.ones_like(bn_rm)
    if bn_b is None:
        bn_b = tg.zeros_like(bn_rm)
    inv_std = tg.rsqrt(bn_rv + bn_eps)
    # one scale per output channel, broadcast over the rest of the weight
    spatial = [1] * (len(conv_w.shape) - 2)
    shape = [1, -1] + spatial if transpose else [-1, 1] + spatial
    fused_w = (conv_w * (bn_w * inv_std).reshape(shape)).to(dtype=weight_dtype)
    fused_b = ((conv_b - bn_rm) * inv_std * bn_w + bn_b).to(dtype=bias_dtype)
    return Parameter(fused_w, conv_w.requires_grad), Parameter(fused_b, conv_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` whose weight and bias also apply ``bn``'s normalisation with its
    running statistics (both in eval mode; ``bn`` over ``linear``'s outputs or one
    feature)."""
    _check_fusable(linear, bn)
    fused = copy.deepcopy(linear)
    # the weight and bias keep their shapes only when bn's features broadcast over the outputs
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError(
            "To fuse, linear.out_features == bn.num_features or bn.num_features == 1, "
            f"got linear.out_features={linear.out_features} and "
            f"bn.num_features={bn.num_features}")
    _check_running_stats(bn)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """(weight, bias) Parameters of a linear layer followed by batch norm with the given
    running statistics and affine parameters, in the linear layer's dtypes."""
    weight_dtype = linear_w.dtype
    bias_dtype = linear_b.dtype if linear_b is not None else weight_dtype
    if linear_b is None:
        linear_b = tg.zeros_like(bn_rm)
    scale = bn_w * tg.rsqrt(bn_rv + bn_eps)
    fused_w = linear_w * scale.unsqueeze(-1).to(dtype=weight_dtype)
    fused_b = ((linear_b - bn_rm) * scale + bn_b).to(dtype=bias_dtype)
    return Parameter(fused_w, linear_w.requires_grad), Parameter(fused_b, linear_b.requires_grad)


def skip_init(module_cls, *args, **kwargs):
    """``module_cls(*args, **kwargs)`` with its parameters and buffers left uninitialised (as
    ``empty`` would leave them), for values that are set afterwards.  The class must take a
    ``device`` argument, as PyTorch requires.  (tapegrad has no device without storage to
    build on, so the module is built and initialised, then given fresh memory.)"""
    if not issubclass(module_cls, Module):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    device = kwargs.pop("device", "cpu")
    return module_cls(*args, device=device, **kwargs).to_empty(device=device)


# torch.nn.utils.parametrize, .parametrizations and .prune are submodules of a package:
# registered under those names, ``import tapegrad.nn.utils.parametrize`` works with utils a module
import sys as _sys  # noqa: E402
from . import parametrize, parametrizations, prune  # noqa: E402
from . import rnn_utils as rnn  # noqa: E402  (tapegrad.nn.rnn is the layers' module)

_sys.modules[__name__ + ".parametrize"] = parametrize
_sys.modules[__name__ + ".parametrizations"] = parametrizations
_sys.modules[__name__ + ".rnn"] = rnn
_sys.modules[__name__ + ".prune"] = prune

from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
