"""``torch.nn.parallel`` as PyTorch runs it on a machine without accelerators, which is
tapegrad's one device: ``DataParallel`` has no devices to spread a batch over and calls the
module it wraps, and ``data_parallel`` cannot tell which device type to use."""
from .modules import Module

__all__ = ["DataParallel", "data_parallel"]


class DataParallel(Module):
    """Wraps ``module`` (as the attribute ``module``, so its state_dict keys gain the prefix
    ``module.``) and, with no GPU to replicate it on, calls it: the output is the module's
    own.  ``device_ids`` is then ``[]`` whatever was asked for, and ``output_device`` and
    ``dim`` are not kept, as in PyTorch.

    Example:
        >>> model = nn.DataParallel(nn.Linear(2, 1))
        >>> model
        DataParallel(
          (module): Linear(in_features=2, out_features=1, bias=True)
        )
        >>> list(model.state_dict()), model.device_ids
        (['module.weight', 'module.bias'], [])
        >>> model(tg.ones(3, 2)).shape
        tapegrad.Size([3, 1])
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = []              # no devices found: the forward runs the module

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0,
                  module_kwargs=None):
    """PyTorch's functional ``DataParallel``, which needs an accelerator to choose the
    device type from: without one it raises, as here.

    Example:
        >>> nn.parallel.data_parallel(nn.Linear(2, 1), tg.ones(1, 2))
        Traceback (most recent call last):
          ...
        RuntimeError: device type could not be determined
    """
    raise RuntimeError("device type could not be determined")


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
