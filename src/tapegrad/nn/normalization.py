"""Normalisation layers as in ``torch.nn``: ``LayerNorm``, ``GroupNorm``, ``BatchNorm1d``,
``BatchNorm2d``, ``BatchNorm3d``, ``SyncBatchNorm``, ``InstanceNorm1d``, ``InstanceNorm2d`` and
``InstanceNorm3d``, with PyTorch's parameters, buffers, initialisation and reprs."""
import warnings

import tapegrad as tg

from . import functional as F
from . import init
from .modules import Module, Parameter

__all__ = ["LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
           "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm",
           "SyncBatchNorm"]


class LayerNorm(Module):
    """Normalises the last dimensions (``normalized_shape``) of each sample to mean 0 and
    variance 1, then applies a learnt elementwise scale ``weight`` (starting at 1) and shift
    ``bias`` (starting at 0): ``F.layer_norm``.

    Shape: ``(*, *normalized_shape)``, unchanged.

    Example:
        >>> norm = nn.LayerNorm(3)
        >>> norm
        LayerNorm((3,), eps=1e-05, elementwise_affine=True, bias=True)
        >>> norm(tg.tensor([[1.0, 2.0, 3.0]]))
        tensor([[-1.2247,  0.0000,  1.2247]], grad_fn=<NativeLayerNormBackward0>)
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(tg.empty(*self.normalized_shape, dtype=dtype))
            if bias:
                self.bias = Parameter(tg.empty(*self.normalized_shape, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class RMSNorm(Module):
    """Scales the last dimensions (``normalized_shape``) of each sample by the reciprocal of
    their root mean square, then by a learnt elementwise ``weight`` (starting at 1):
    ``F.rms_norm``.

    Shape: ``(*, *normalized_shape)``, unchanged.

    Example:
        >>> norm = nn.RMSNorm(2)
        >>> norm
        RMSNorm((2,), eps=None, elementwise_affine=True)
        >>> norm(tg.tensor([[3.0, -4.0]]))
        tensor([[ 0.8485, -1.1314]], grad_fn=<MulBackward0>)
    """

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(tg.empty(*self.normalized_shape, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNorm(Module):
    """Normalises each group of ``num_channels // num_groups`` channels of each sample, then
    applies a learnt per-channel scale and shift (``affine``): ``F.group_norm``.

    Shape: ``(N, num_channels, *)``, unchanged.

    Example:
        >>> norm = nn.GroupNorm(2, 4)
        >>> norm
        GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)
        >>> norm(tg.tensor([[[1.0], [3.0], [5.0], [5.0]]])).flatten()
        tensor([-1.0000,  1.0000,  0.0000,  0.0000], grad_fn=<ViewBackward0>)
    """

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = Parameter(tg.empty(num_channels, dtype=dtype))
            if bias:
                self.bias = Parameter(tg.empty(num_channels, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


class _BatchNorm(Module):
    """Batch normalisation over every dimension but the channels (dimension 1).

    In training mode the batch's statistics normalise, and the running statistics (buffers
    ``running_mean``, ``running_var``, ``num_batches_tracked``) move towards them by
    ``momentum`` (``None``: a cumulative average over the batches seen); in eval mode the
    running statistics normalise. Without ``track_running_stats`` the batch's statistics
    are used in both modes. As in PyTorch.
    """

    _dims = ()
    # version 2 saved num_batches_tracked; a state dict of version 1 (or without metadata, a
    # plain dict) is read as PyTorch reads it, the count kept when the key is absent
    _version = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(tg.empty(num_features, dtype=dtype))
            if bias:
                self.bias = Parameter(tg.empty(num_features, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", tg.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", tg.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", tg.tensor(0, dtype=tg.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            with tg.no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, *args):
        version = local_metadata.get("version")
        key = prefix + "num_batches_tracked"
        if (version is None or version < 2) and self.track_running_stats \
                and key not in state_dict:
            # saved before the count existed: it is not missing, it stays as it is
            state_dict[key] = self.num_batches_tracked if self.num_batches_tracked is not None \
                else tg.tensor(0, dtype=tg.int64)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, *args)

    def _check_input_dim(self, input):
        if input.ndim not in self._dims:
            wanted = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"expected {wanted} input (got {input.ndim}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked.item())
        # batch statistics while training, and in eval mode when nothing is tracked
        batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        use_running = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_running else None,
                            self.running_var if use_running else None, self.weight, self.bias,
                            batch_stats, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of ``(N, C)`` or ``(N, C, L)`` inputs over the batch (and
    length) per channel; see ``F.batch_norm`` for the running statistics.

    Shape: ``(N, C)`` or ``(N, C, L)``, unchanged.

    Example:
        >>> bn = nn.BatchNorm1d(2)
        >>> bn(tg.tensor([[1.0, 2.0], [3.0, 6.0]]))
        tensor([[-1.0000, -1.0000],
                [ 1.0000,  1.0000]], grad_fn=<NativeBatchNormBackward0>)
        >>> bn.running_mean, bn.num_batches_tracked
        (tensor([0.2000, 0.4000]), tensor(1))
    """
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of ``(N, C, H, W)`` inputs over the batch and positions per
    channel.

    Shape: ``(N, C, H, W)``, unchanged.

    Example:
        >>> nn.BatchNorm2d(3)
        BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
    """
    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of ``(N, C, D, H, W)`` inputs (volumes, videos) over the batch
    and positions per channel.

    Shape: ``(N, C, D, H, W)``, unchanged.

    Example:
        >>> bn = nn.BatchNorm3d(2)
        >>> bn(tg.ones(2, 2, 1, 1, 2)).shape
        tapegrad.Size([2, 2, 1, 1, 2])
    """
    _dims = (5,)



class _InstanceNorm(_BatchNorm):
    """Normalisation of each channel of each sample over its positions: ``F.instance_norm``.

    The parameters and buffers are the batch norm's, with PyTorch's other defaults
    (``affine=False``, ``track_running_stats=False``). With ``track_running_stats`` the
    running statistics move by ``momentum`` towards the mean over the samples of each one's
    statistics while training, and normalise in eval mode; ``num_batches_tracked`` stays 0,
    as in PyTorch.
    """

    _unbatched = 0     # the number of dimensions of an unbatched input

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def _normalise(self, input):
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight,
                               self.bias, self.training or not self.track_running_stats,
                               0.0 if self.momentum is None else self.momentum, self.eps)

    def forward(self, input):
        self._check_input_dim(input)
        feature_dim = input.dim() - self._unbatched
        if input.shape[feature_dim] != self.num_features:
            # the channel count matters only to the affine parameters' shapes
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. "
                          "You can silence this warning by not passing in num_features, "
                          "which is not used because affine=False", stacklevel=2)
        if input.dim() == self._unbatched:
            return self._normalise(input.unsqueeze(0)).squeeze(0)
        return self._normalise(input)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of ``(N, C, L)`` or ``(C, L)``: each channel of each sample
    normalised over its length; see ``_InstanceNorm`` for the options.

    Example:
        >>> norm = nn.InstanceNorm1d(2)
        >>> norm.affine, norm.track_running_stats
        (False, False)
        >>> norm(tg.tensor([[1.0, 3.0], [2.0, 6.0]]))
        tensor([[-1.0000,  1.0000],
                [-1.0000,  1.0000]])
    """
    _dims = (2, 3)
    _unbatched = 2


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of ``(N, C, H, W)`` or ``(C, H, W)``: each channel of each
    sample normalised over its positions, the style-transfer normalisation.

    Example:
        >>> norm = nn.InstanceNorm2d(3, affine=True)
        >>> [name for name, _ in norm.named_parameters()]
        ['weight', 'bias']
        >>> norm(tg.ones(1, 3, 2, 2)).shape
        tapegrad.Size([1, 3, 2, 2])
    """
    _dims = (3, 4)
    _unbatched = 3


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of ``(N, C, D, H, W)`` or ``(C, D, H, W)``: each channel of
    each sample normalised over its volume; see ``_InstanceNorm`` for the options.

    Example:
        >>> nn.InstanceNorm3d(3)(tg.ones(1, 3, 2, 2, 2)).shape
        tapegrad.Size([1, 3, 2, 2, 2])
    """
    _dims = (4, 5)
    _unbatched = 4


class SyncBatchNorm(_BatchNorm):
    """Batch normalisation whose statistics PyTorch gathers over every process of a
    ``torch.distributed`` group.  tapegrad has no process groups (``tapegrad.distributed``
    is never initialised), so it is what PyTorch runs without one: ``F.batch_norm`` over the
    local batch, in training and eval mode alike, for inputs of any rank from 2 up.
    ``convert_sync_batchnorm`` turns a model's ``BatchNorm*d`` layers into these, sharing
    their parameters and running statistics.

    Shape: ``(N, C, *)``, unchanged.

    Example:
        >>> model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
        >>> nn.SyncBatchNorm.convert_sync_batchnorm(model)
        Sequential(
          (0): Linear(in_features=2, out_features=3, bias=True)
          (1): SyncBatchNorm(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
        )
        >>> nn.SyncBatchNorm(2)(tg.tensor([[1.0, 2.0], [3.0, 6.0]]))
        tensor([[-1.0000, -1.0000],
                [ 1.0000,  1.0000]], grad_fn=<NativeBatchNormBackward0>)
        >>> nn.SyncBatchNorm(2)(tg.ones(2))
        Traceback (most recent call last):
          ...
        ValueError: expected at least 2D input (got 1D input)
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None, *,
                 bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)
        self.process_group = process_group    # kept for the program; there is no group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        if input.size(1) == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            if self.num_batches_tracked is None:
                raise AssertionError("num_batches_tracked must not be None")
            self.num_batches_tracked.add_(1)
            if self.momentum is None:         # a cumulative average over the batches seen
                factor = 1.0 / self.num_batches_tracked.item()
        batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        use_running = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_running else None,
                            self.running_var if use_running else None, self.weight, self.bias,
                            batch_stats, factor, self.eps)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """``module`` with each ``BatchNorm*d`` in it (not the instance norms) replaced by a
        ``SyncBatchNorm`` holding the same parameter and buffer tensors and mode; a batch
        norm itself comes back as a new ``SyncBatchNorm``."""
        converted = module
        if isinstance(module, _BatchNorm) and not isinstance(module, _InstanceNorm):
            converted = cls(module.num_features, module.eps, module.momentum, module.affine,
                            module.track_running_stats, process_group,
                            bias=module.bias is not None)
            if module.affine:
                with tg.no_grad():
                    converted.weight = module.weight
                    converted.bias = module.bias
            converted.running_mean = module.running_mean
            converted.running_var = module.running_var
            converted.num_batches_tracked = module.num_batches_tracked
            converted.training = module.training
            if hasattr(module, "qconfig"):
                converted.qconfig = module.qconfig
        for name, child in module.named_children():
            converted.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return converted


class LocalResponseNorm(Module):
    """Local response normalisation across channels: ``F.local_response_norm``.

    Shape: ``(N, C, *)``, unchanged.

    Example:
        >>> nn.LocalResponseNorm(3)
        LocalResponseNorm(3, alpha=0.0001, beta=0.75, k=1.0)
    """

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
