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
