"""Weight initialisation, in place, with PyTorch's formulas.

Each function overwrites the tensor's value in place (no gradient is recorded), bumps its
version so that graphs which saved the old value notice, and returns the tensor. Random
draws come from tapegrad's generator, seeded by ``tapegrad.manual_seed``.
"""
import math
import warnings

import numpy as np

import tapegrad as tg
from tapegrad.creation import stream_for as _stream_for

__all__ = [
    "calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_",
    "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
    "trunc_normal_", "eye_", "dirac_", "orthogonal_", "sparse_",
    "uniform", "normal", "constant", "eye", "dirac", "xavier_uniform", "xavier_normal",
    "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse",
]


def _fill(tensor, values):
    """Write ``values`` (an array or a scalar) into ``tensor`` in place."""
    with tg.no_grad():
        if isinstance(values, np.ndarray):
            tensor.copy_(tg.from_numpy(values))
        else:
            tensor.fill_(values)
    return tensor


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity: 1 for linear/sigmoid, 5/3 for tanh,
    sqrt(2) for relu, sqrt(2 / (1 + slope**2)) for leaky_relu, 3/4 for selu.

    Example:
        >>> nn.init.calculate_gain("tanh")
        1.6666666666666667
    """
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight shaped (out, in, *kernel)."""
    if tensor.ndim < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive_field = 1
    for s in tensor.shape[2:]:
        receptive_field *= s
    return tensor.shape[1] * receptive_field, tensor.shape[0] * receptive_field


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _shape(tensor):
    return tuple(tensor.shape)


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with draws from U(a, b).

    In place, without recording a gradient; returns ``tensor``.  Draws from tapegrad's
    generator (``tg.manual_seed``): PyTorch's numbers for the same seed.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> w = tg.empty(3, 5)
        >>> nn.init.uniform_(w, -0.1, 0.1) is w, bool((w.abs() <= 0.1).all())
        (True, True)
    """
    return _fill(tensor, _stream_for(generator).uniform(a, b, _shape(tensor)))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with draws from N(mean, std**2).

    In place, without recording a gradient; returns ``tensor``.  Draws from tapegrad's
    generator (``tg.manual_seed``).

    Example:
        >>> _ = tg.manual_seed(0)
        >>> w = nn.init.normal_(tg.empty(10000), mean=2.0, std=0.5)
        >>> round(float(w.mean()), 1), round(float(w.std()), 1)
        (2.0, 0.5)
    """
    return _fill(tensor, _stream_for(generator).normal(mean, std, _shape(tensor)))


def constant_(tensor, val):
    """Fill ``tensor`` with ``val``, in place (no gradient is recorded); returns it.

    Example:
        >>> nn.init.constant_(tg.empty(2, 3), 0.5)
        tensor([[0.5000, 0.5000, 0.5000],
                [0.5000, 0.5000, 0.5000]])
    """
    return _fill(tensor, val)


def zeros_(tensor):
    """Fill ``tensor`` with zeros, in place; returns it.

    Example:
        >>> nn.init.zeros_(tg.empty(2))
        tensor([0., 0.])
    """
    return _fill(tensor, 0.0)


def ones_(tensor):
    """Fill ``tensor`` with ones, in place; returns it.

    Example:
        >>> nn.init.ones_(tg.empty(2))
        tensor([1., 1.])
    """
    return _fill(tensor, 1.0)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio), in place.

    Shape: a weight ``(fan_out, fan_in, *kernel)`` of at least 2 dimensions.

    Example:
        >>> w = nn.init.xavier_uniform_(tg.empty(4, 3))
        >>> bool((w.abs() <= (6 / 7) ** 0.5).all())
        True
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot & Bengio).

    ``fan_in`` and ``fan_out`` are ``tensor.shape[1]`` and ``tensor.shape[0]`` (times the
    receptive field size for more than 2 dims).  In place; returns ``tensor``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> w = nn.init.xavier_normal_(tg.empty(200, 300))
        >>> abs(float(w.std()) - (2 / 500) ** 0.5) < 0.005
        True
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def _empty_is_noop(tensor):
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He et al.); ``a`` is the negative
    slope of the leaky_relu that follows. ``a = sqrt(5)`` gives nn.Linear's default.

    Shape: a weight ``(fan_out, fan_in, *kernel)`` of at least 2 dimensions; ``fan`` is
    ``fan_in`` or, with ``mode="fan_out"``, ``fan_out``.

    Example:
        >>> w = nn.init.kaiming_uniform_(tg.empty(4, 3), nonlinearity="relu")
        >>> bool((w.abs() <= (2 ** 0.5) * (3 / 3) ** 0.5).all())
        True
    """
    if _empty_is_noop(tensor):
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std**2) with std = gain / sqrt(fan) (He et al.).

    ``fan`` is ``fan_in`` (default) or ``fan_out`` by ``mode``; ``gain`` comes from
    ``nonlinearity`` (``sqrt(2)`` for ``"relu"``, ``sqrt(2 / (1 + a**2))`` for
    ``"leaky_relu"``).  In place; returns ``tensor``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> w = nn.init.kaiming_normal_(tg.empty(200, 300), nonlinearity="relu")
        >>> abs(float(w.std()) - (2 / 300) ** 0.5) < 0.005
        True
    """
    if _empty_is_noop(tensor):
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with draws from N(mean, std**2) truncated to [a, b], PyTorch 2.13's way (so its
    numbers after the same seed): with more than 0.3 of the mass inside, normal draws
    redrawn where they fall outside; otherwise uniform proposals on [a, b] accepted against
    the normal's density, each round drawn for the whole tensor.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> w = nn.init.trunc_normal_(tg.empty(1000), std=2.0, a=-1.0, b=1.0)
        >>> bool((w.abs() <= 1.0).all())
        True
    """
    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if (mean < a - 2 * std) or (mean > b + 2 * std):
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    with tg.no_grad():
        p = norm_cdf((b - mean) / std) - norm_cdf((a - mean) / std)
        if p > 0.3:
            lo, hi = float(a), float(b)
            result = tensor.normal_(mean, std, generator=generator)
            while True:
                mask = (result < lo) | (result > hi)
                if not mask.any():
                    break
                # (a whole tensor of fresh normals a round, as PyTorch draws them)
                result = tg.where(mask, tg.empty_like(result).normal_(mean, std,
                                                                      generator=generator),
                                  result)
            if tensor is not result:
                tensor.copy_(result)
            return tensor
        mode = max(a, min(mean, b))
        log_peak = -0.5 * ((mode - mean) / std) ** 2
        candidates = tg.empty_like(tensor)
        accept_buf = tg.empty_like(tensor)
        tensor.uniform_(a, b, generator=generator)
        candidates.copy_(tensor)
        candidates.sub_(mean).div_(std).pow_(2).mul_(-0.5).sub_(log_peak)
        pending = accept_buf.uniform_(generator=generator).log_().gt(candidates)
        if pending.any():
            result = tensor
            while True:
                candidates.uniform_(a, b, generator=generator)
                result = tg.where(pending, candidates, result)
                candidates.sub_(mean).div_(std).pow_(2).mul_(-0.5).sub_(log_peak)
                pending = tg.where(
                    pending, accept_buf.uniform_(generator=generator).log_().gt(candidates),
                    pending)
                if not pending.any():
                    break
            tensor.copy_(result)
    return tensor


def eye_(tensor):
    """Fill a 2-D tensor with the identity matrix (ones on the diagonal).

    Example:
        >>> nn.init.eye_(tg.empty(2, 3))
        tensor([[1., 0., 0.],
                [0., 1., 0.]])
    """
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*tensor.shape))


def dirac_(tensor, groups=1):
    """Fill a 3-, 4- or 5-D convolution weight with the Dirac delta: each output channel of
    a group passes one input channel through unchanged (a 1 at the kernel's centre).

    Example:
        >>> nn.init.dirac_(tg.empty(2, 2, 3))
        tensor([[[0., 1., 0.],
                 [0., 0., 0.]],
        <BLANKLINE>
                [[0., 0., 0.],
                 [0., 1., 0.]]])
    """
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = sizes[0] // groups
    values = np.zeros(sizes)
    centre = tuple(n // 2 for n in sizes[2:])
    for g in range(groups):
        for d in range(min(per_group, sizes[1])):
            values[(g * per_group + d, d) + centre] = 1.0
    return _fill(tensor, values)


def orthogonal_(tensor, gain=1, generator=None):
    """Fill with a (semi-)orthogonal matrix: the Q of the QR factorisation of normal draws
    (rows by the rest flattened, transposed when wider than tall), its columns' signs set
    by R's diagonal, times ``gain``.  The draws are PyTorch's; Q is LAPACK's, whose last
    bits may differ from PyTorch's build.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> w = nn.init.orthogonal_(tg.empty(3, 5))
        >>> bool(tg.allclose(w @ w.T, tg.eye(3)))
        True
    """
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _stream_for(generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, np.ascontiguousarray(q).reshape(_shape(tensor)) * gain)


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Fill a 2-D tensor with N(0, std**2) draws, then zero ``ceil(sparsity * rows)``
    entries of each column, picked by a ``randperm`` of the rows (from the global
    generator even when ``generator`` is given, as in PyTorch).

    Example:
        >>> _ = tg.manual_seed(0)
        >>> w = nn.init.sparse_(tg.empty(4, 3), sparsity=0.5)
        >>> (w == 0).sum(0)
        tensor([2, 2, 2])
    """
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tuple(tensor.shape)
    num_zeros = math.ceil(sparsity * rows)
    values = _stream_for(generator).normal(0.0, std, (rows, cols))
    for col in range(cols):
        values[_stream_for(None).permutation(rows)[:num_zeros], col] = 0.0
    return _fill(tensor, values)


def _deprecated(fill):
    # PyTorch keeps the names without the trailing underscore, warning (FutureWarning)
    new_name = fill.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of "
                      f"`nn.init.{new_name}`.", FutureWarning, stacklevel=2)
        return fill(*args, **kwargs)

    deprecated_init.__name__ = deprecated_init.__qualname__ = old_name
    deprecated_init.__doc__ = f"""Deprecated: ``{new_name}`` after a FutureWarning.

    Example:
        >>> nn.init.{old_name}.__name__
        '{old_name}'
    """
    return deprecated_init


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
