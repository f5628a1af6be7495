"""Activation layers as in ``torch.nn``: each holds its options and calls the matching
``tapegrad.nn.functional`` function, so gradients and compiled replays come from there."""
import tapegrad as tg

from . import functional as F
from . import init
from .modules import Module, Parameter

__all__ = [
    "GELU", "SiLU", "ELU", "SELU", "CELU", "LeakyReLU", "Softplus", "Mish", "Hardtanh", "ReLU6",
    "Hardsigmoid", "Hardswish", "Softsign", "LogSigmoid", "Tanhshrink", "Softshrink",
    "Hardshrink", "Threshold", "GLU", "Softmin", "PReLU", "RReLU",
    "Softmax2d",
]


def _inplace_repr(inplace):
    return "inplace=True" if inplace else ""


class GELU(Module):
    """Gaussian error linear unit, exact or ``approximate="tanh"``: ``F.gelu``.

    Shape: that of the input.

    Example:
        >>> nn.GELU()(tg.tensor([-1.0, 1.0]))
        tensor([-0.1587,  0.8413])
    """

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class _InplaceActivation(Module):
    """An activation whose only option is ``inplace``, shown in the repr when set."""

    _function = None

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self)._function(input, inplace=self.inplace)

    def extra_repr(self):
        return _inplace_repr(self.inplace)


class SiLU(_InplaceActivation):
    """``x * sigmoid(x)``: ``F.silu``.

    Shape: that of the input.

    Example:
        >>> nn.SiLU()(tg.tensor([0.0, 2.0]))
        tensor([0.0000, 1.7616])
    """
    _function = F.silu


class SELU(_InplaceActivation):
    """Scaled ELU with PyTorch's constants: ``F.selu``.

    Shape: that of the input.

    Example:
        >>> nn.SELU()(tg.tensor([-1.0, 2.0]))
        tensor([-1.1113,  2.1014])
    """
    _function = F.selu


class Mish(_InplaceActivation):
    """``x * tanh(softplus(x))``: ``F.mish``.

    Shape: that of the input.

    Example:
        >>> nn.Mish()(tg.tensor([-1.0, 1.0]))
        tensor([-0.3034,  0.8651])
    """
    _function = F.mish


class ReLU6(_InplaceActivation):
    """``min(max(x, 0), 6)``: ``F.relu6``.

    Shape: that of the input.

    Example:
        >>> nn.ReLU6()(tg.tensor([-1.0, 7.0]))
        tensor([0., 6.])
    """
    _function = F.relu6


class Hardsigmoid(_InplaceActivation):
    """``relu6(x + 3) / 6``: ``F.hardsigmoid`` (PyTorch shows no options in its repr).

    Shape: that of the input.

    Example:
        >>> nn.Hardsigmoid()(tg.tensor([-4.0, 0.0]))
        tensor([0.0000, 0.5000])
    """
    _function = F.hardsigmoid

    def extra_repr(self):
        return ""


class Hardswish(_InplaceActivation):
    """``x * relu6(x + 3) / 6``: ``F.hardswish`` (no options in the repr, as in PyTorch).

    Shape: that of the input.

    Example:
        >>> nn.Hardswish()(tg.tensor([-4.0, 4.0]))
        tensor([-0.,  4.])
    """
    _function = F.hardswish

    def extra_repr(self):
        return ""


class ELU(Module):
    """``x`` above 0, ``alpha * (exp(x) - 1)`` below: ``F.elu``.

    Shape: that of the input.

    Example:
        >>> nn.ELU(alpha=0.5)(tg.tensor([-1.0, 2.0]))
        tensor([-0.3161,  2.0000])
    """

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``: ``F.celu``.

    Shape: that of the input.

    Example:
        >>> nn.CELU(alpha=2.0)(tg.tensor([-1.0, 2.0]))
        tensor([-0.7869,  2.0000])
    """

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)


class LeakyReLU(Module):
    """``x`` above 0, ``negative_slope * x`` below: ``F.leaky_relu``.

    Shape: that of the input.

    Example:
        >>> nn.LeakyReLU(0.1)(tg.tensor([-2.0, 3.0]))
        tensor([-0.2000,  3.0000])
    """

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class RReLU(Module):
    """Randomized leaky ReLU: slopes drawn from uniform(lower, upper) for the elements at or
    below 0 while training, ``(lower + upper) / 2`` after ``eval()``: ``F.rrelu``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> nn.RReLU()(tg.tensor([-1.0, 2.0]))
        tensor([-0.3271,  2.0000])
    """

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace
                                                            else "")


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta`` (linear beyond ``threshold``): ``F.softplus``.

    Shape: that of the input.

    Example:
        >>> nn.Softplus()(tg.tensor([0.0]))
        tensor([0.6931])
    """

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    """The input clipped to ``[min_val, max_val]``: ``F.hardtanh``.

    Shape: that of the input.

    Example:
        >>> nn.Hardtanh(-2.0, 2.0)(tg.tensor([-3.0, 1.0, 3.0]))
        tensor([-2.,  1.,  2.])
    """

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if max_val <= min_val:
            raise AssertionError
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + (
            ", inplace=True" if self.inplace else "")


class _Stateless(Module):
    """An activation without options."""

    _function = None

    def forward(self, input):
        return type(self)._function(input)


class Softsign(_Stateless):
    """``x / (1 + |x|)``: ``F.softsign``.

    Shape: that of the input.

    Example:
        >>> nn.Softsign()(tg.tensor([-1.0, 3.0]))
        tensor([-0.5000,  0.7500])
    """
    _function = F.softsign


class LogSigmoid(_Stateless):
    """``log(sigmoid(x))``, stable for large ``|x|``: ``F.logsigmoid``.

    Shape: that of the input.

    Example:
        >>> nn.LogSigmoid()(tg.tensor([0.0]))
        tensor([-0.6931])
    """
    _function = F.logsigmoid


class Tanhshrink(_Stateless):
    """``x - tanh(x)``: ``F.tanhshrink``.

    Shape: that of the input.

    Example:
        >>> nn.Tanhshrink()(tg.tensor([1.0]))
        tensor([0.2384])
    """
    _function = F.tanhshrink


class Softshrink(Module):
    """Shrinks towards 0 by ``lambd``, 0 within ``[-lambd, lambd]``: ``F.softshrink``.

    Shape: that of the input.

    Example:
        >>> nn.Softshrink(1.0)(tg.tensor([-3.0, 0.5, 2.0]))
        tensor([-2.,  0.,  1.])
    """

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.softshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Hardshrink(Softshrink):
    """0 within ``[-lambd, lambd]``, the input elsewhere: ``F.hardshrink``.

    Shape: that of the input.

    Example:
        >>> nn.Hardshrink(1.0)(tg.tensor([-3.0, 0.5, 2.0]))
        tensor([-3.,  0.,  2.])
    """

    def forward(self, input):
        return F.hardshrink(input, self.lambd)


class Threshold(Module):
    """The input where it is above ``threshold``, ``value`` elsewhere: ``F.threshold``.

    Shape: that of the input.

    Example:
        >>> nn.Threshold(0.5, -1.0)(tg.tensor([0.0, 2.0]))
        tensor([-1.,  2.])
    """

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}" + (
            ", inplace=True" if self.inplace else "")


class GLU(Module):
    """Gated linear unit along ``dim``: ``F.glu``.

    Shape: the input's with ``dim`` halved.

    Example:
        >>> nn.GLU()(tg.tensor([[1.0, 2.0, 0.0, 100.0]]))
        tensor([[0.5000, 2.0000]])
    """

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmin(Module):
    """``softmax(-x)`` along ``dim``: ``F.softmin``.

    Shape: that of the input.

    Example:
        >>> nn.Softmin(dim=1)(tg.tensor([[1.0, 2.0, 3.0]]))
        tensor([[0.6652, 0.2447, 0.0900]])
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class PReLU(Module):
    """Leaky ReLU with a learnt negative slope: one shared by all channels
    (``num_parameters=1``) or one per channel (dimension 1 of the input), each starting at
    ``init``.

    Shape: that of the input; weight ``(num_parameters,)``.

    Example:
        >>> layer = nn.PReLU()
        >>> layer(tg.tensor([-2.0, 3.0]))
        tensor([-0.5000,  3.0000], grad_fn=<PreluKernelBackward0>)
        >>> layer
        PReLU(num_parameters=1)
    """

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        self.num_parameters = num_parameters
        super().__init__()
        self.init = init
        self.weight = Parameter(tg.empty(num_parameters, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"



class Softmax2d(Module):
    """Softmax over the channels at each position of ``(N, C, H, W)`` or ``(C, H, W)``
    (dimension -3).

    Example:
        >>> nn.Softmax2d()(tg.zeros(2, 1, 1))
        tensor([[[0.5000]],
        <BLANKLINE>
                [[0.5000]]])
    """

    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D "
                             f"instead")
        return F.softmax(input, -3)


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
