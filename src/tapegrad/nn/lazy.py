"""Lazy modules as in ``torch.nn``: layers whose input size (``in_features``, ``in_channels``,
``num_features``) is read from their first input.  ``LazyModuleMixin`` is PyTorch's
``torch.nn.modules.lazy.LazyModuleMixin`` (also reachable as ``nn.modules.lazy``).

Until the first call a lazy module's weights are ``UninitializedParameter``s (its running
statistics ``UninitializedBuffer``s).  A forward pre-hook then calls ``initialize_parameters``
with the call's arguments, which gives them their shapes and draws their values as the
eager layer's ``reset_parameters`` does (the same draws from the same generator), and the
module becomes the eager class: ``type(nn.LazyLinear(3)(x)) ...`` is ``nn.Linear``.
"""
import itertools
import sys

from tapegrad import no_grad, tensor
from tapegrad import int64 as _int64

from . import modules as _modules
from .conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)
from .modules import Linear
from .normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d,
                            InstanceNorm2d, InstanceNorm3d, _BatchNorm, _InstanceNorm)
from .parameter import UninitializedBuffer, UninitializedParameter, is_lazy

__all__ = ["LazyModuleMixin", "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d",
           "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
           "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


class LazyModuleMixin:
    """The part of a lazy module that waits for its first input: mixed in before the eager
    class (``class LazyLinear(LazyModuleMixin, Linear)``), it registers a forward pre-hook
    that calls ``initialize_parameters(*args, **kwargs)``, checks that nothing is left
    uninitialized, removes the hook and turns the module into ``cls_to_become``.

    ``load_state_dict`` into a module still uninitialized gives its members the checkpoint's
    shapes first; ``state_dict`` keeps uninitialized members as they are.

    Example:
        >>> layer = nn.LazyLinear(2)
        >>> layer.has_uninitialized_params(), layer.weight
        (True, <UninitializedParameter>)
        >>> layer(tg.ones(5, 3)).shape
        tapegrad.Size([5, 2])
        >>> type(layer).__name__, layer.weight.shape
        ('Linear', tapegrad.Size([2, 3]))
    """

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters,
                                                               with_kwargs=True)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = \
                    param if is_lazy(param) or keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if is_lazy(buf) or keep_vars else buf.detach()

    def _load_from_state_dict(self, state_dict, prefix, *args):
        # PyTorch's load pre-hook: an uninitialized member takes the shape it is given
        for name, member in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if key in state_dict and member is not None and is_lazy(member) \
                    and not is_lazy(state_dict[key]):
                with no_grad():
                    member.materialize(state_dict[key].shape)
        super()._load_from_state_dict(state_dict, prefix, *args)

    def initialize_parameters(self, *args, **kwargs):
        """Give the uninitialized members their shapes from the first call's arguments and
        draw their values (each lazy class defines it)."""
        raise NotImplementedError(
            f"initialize_parameters is not implemented for {self.__class__.__name__}")

    def has_uninitialized_params(self):
        """Whether a parameter or buffer of this module (not its children) is still
        uninitialized."""
        return any(is_lazy(member) for member in
                   itertools.chain(self._parameters.values(), self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None):
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        del module._initialize_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _replicate_for_data_parallel(self):
        raise RuntimeError(
            "Modules with uninitialized parameters can't be used with `DataParallel`. Run a "
            "dummy forward pass to correctly initialize the modules")


class LazyLinear(LazyModuleMixin, Linear):
    """``nn.Linear`` whose ``in_features`` is the first input's last size.

    Example:
        >>> layer = nn.LazyLinear(4)
        >>> layer
        LazyLinear(in_features=0, out_features=4, bias=True)
        >>> layer(tg.ones(2, 3)).shape, layer
        (tapegrad.Size([2, 4]), Linear(in_features=3, out_features=4, bias=True))
    """

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        # no bias yet: a placeholder would only be replaced
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        """Linear's initialisation, once the weights have their shapes."""
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        """``in_features`` from ``input.shape[-1]``; the weights drawn as Linear's are."""
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()
        if self.in_features == 0:
            # loaded from a state dict before the first call
            if input.shape[-1] != self.weight.shape[-1]:
                raise AssertionError(
                    f"The in_features inferred from input: {input.shape[-1]} is not equal to "
                    f"in_features from self.weight: {self.weight.shape[-1]}")
            self.in_features = input.shape[-1]


class _LazyConvXdMixin(LazyModuleMixin):
    """The lazy convolutions' part: ``in_channels`` from the input's channel dimension."""

    def __init__(self, out_channels, bias, device, dtype, *eager_args):
        # the eager layer made with no channels and no bias (a placeholder would only be
        # replaced)
        super().__init__(0, 0, *eager_args)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        """The convolution's initialisation, once the weights have their shapes."""
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        """``in_channels`` from the input; the weights drawn as the eager layer's are."""
        if self.has_uninitialized_params():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError("in_channels must be divisible by groups")
            if self.transposed:
                shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
            else:
                shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
            self.weight.materialize(shape)
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()

    def _get_in_channels(self, input):
        unbatched = self._dims + 1
        if input.dim() not in (unbatched, unbatched + 1):
            raise RuntimeError(
                f"Expected {unbatched}D (unbatched) or {unbatched + 1}D (batched) input to "
                f"{self.__class__.__name__}, but got input of size: {input.shape}")
        return input.shape[1] if input.dim() == unbatched + 1 else input.shape[0]


def _lazy_conv(eager, transposed):
    """The lazy class of the convolution ``eager``: its arguments without ``in_channels``."""
    if transposed:
        def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                     groups=1, bias=True, dilation=1, padding_mode="zeros", device=None,
                     dtype=None):
            _LazyConvXdMixin.__init__(self, out_channels, bias, device, dtype, kernel_size,
                                      stride, padding, output_padding, groups, False,
                                      dilation, padding_mode)
    else:
        def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                     groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
            _LazyConvXdMixin.__init__(self, out_channels, bias, device, dtype, kernel_size,
                                      stride, padding, dilation, groups, False, padding_mode)
    name = "Lazy" + eager.__name__
    doc = (f"``nn.{eager.__name__}`` whose ``in_channels`` is read from the first input "
           f"(dimension 1 of a batched input, 0 of an unbatched one).")
    return type(name, (_LazyConvXdMixin, eager),
                {"__init__": __init__, "__doc__": doc, "cls_to_become": eager,
                 "__module__": __name__, "__qualname__": name})


LazyConv1d = _lazy_conv(Conv1d, False)
LazyConv2d = _lazy_conv(Conv2d, False)
LazyConv3d = _lazy_conv(Conv3d, False)
LazyConvTranspose1d = _lazy_conv(ConvTranspose1d, True)
LazyConvTranspose2d = _lazy_conv(ConvTranspose2d, True)
LazyConvTranspose3d = _lazy_conv(ConvTranspose3d, True)


class _LazyNormBase(LazyModuleMixin):
    """The lazy normalisations' part: ``num_features`` from ``input.shape[1]`` (PyTorch's
    choice, for an unbatched instance-norm input too).  Their defaults are PyTorch's
    (``affine`` and ``track_running_stats`` True, for the instance norms as well)."""

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__(0, eps, momentum, False, False, device, dtype, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if self.affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if self.track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = tensor(0, dtype=_int64)

    def reset_parameters(self):
        """The eager layer's initialisation, once the members have their shapes."""
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        """``num_features`` from ``input.shape[1]``; weights 1, biases 0, running mean 0 and
        variance 1, as the eager layer's."""
        if self.has_uninitialized_params():
            self.num_features = input.shape[1]
            if self.affine:
                self.weight.materialize((self.num_features,))
                if self.bias is not None:
                    self.bias.materialize((self.num_features,))
            if self.track_running_stats:
                self.running_mean.materialize((self.num_features,))
                self.running_var.materialize((self.num_features,))
            self.reset_parameters()


def _lazy_norm(eager, base):
    name = "Lazy" + eager.__name__
    doc = (f"``nn.{eager.__name__}`` whose ``num_features`` is read from the first input's "
           "dimension 1.")
    attrs = {"__doc__": doc, "cls_to_become": eager, "_dims": eager._dims,
             "__module__": __name__, "__qualname__": name}
    if base is _InstanceNorm:
        attrs["_unbatched"] = eager._unbatched
    return type(name, (_LazyNormBase, base), attrs)


LazyBatchNorm1d = _lazy_norm(BatchNorm1d, _BatchNorm)
LazyBatchNorm2d = _lazy_norm(BatchNorm2d, _BatchNorm)
LazyBatchNorm3d = _lazy_norm(BatchNorm3d, _BatchNorm)
LazyInstanceNorm1d = _lazy_norm(InstanceNorm1d, _InstanceNorm)
LazyInstanceNorm2d = _lazy_norm(InstanceNorm2d, _InstanceNorm)
LazyInstanceNorm3d = _lazy_norm(InstanceNorm3d, _InstanceNorm)


# PyTorch's home of LazyModuleMixin is torch.nn.modules.lazy: here this file, under that name
_modules.lazy = sys.modules[__name__]
sys.modules[_modules.__name__ + ".lazy"] = sys.modules[__name__]


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
