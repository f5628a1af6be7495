"""Stochastic weight averaging and exponential moving averages of a model, with
``torch.optim.swa_utils``'s semantics.

``AveragedModel`` keeps a deep copy of a model whose parameters (and, with
``use_buffers=True``, buffers) are a running average of the model's: the first
``update_parameters`` copies them, each later one averages.  The averaging functions come in
two kinds, as in PyTorch: ``avg_fn(averaged, current, n_averaged)`` returns one new tensor,
``multi_avg_fn(averaged_list, current_list, n_averaged)`` updates a list in place.  Without
either, the equal-weight average is taken one tensor at a time,
``averaged + (current - averaged) / (n_averaged + 1)``, which is the path PyTorch takes for
CPU tensors, so the numbers are the same.

The in-place averages (``get_swa_multi_avg_fn``, ``get_ema_multi_avg_fn``) interpolate with
``lerp``, computed as PyTorch's CPU kernel computes it: the product and the sum of
``start + weight * (end - start)`` (from ``end`` for weights of 1/2 or more) are rounded
once, as a fused multiply-add.

``SWALR`` anneals each group's rate to its ``swa_lr`` and holds it there; ``update_bn``
recomputes the batch-norm statistics of a model in one pass over a loader.
"""
import itertools
import math
from copy import deepcopy

import numpy as np

import tapegrad as tg

from .._random_stream import fma_elementwise
from ..nn.modules import Module
from ..nn.normalization import _BatchNorm, _InstanceNorm
from ..tensor import Tensor
from .lr_scheduler import LRScheduler, _per_group

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")


def _interpolates(tensor):
    """Whether the in-place averages interpolate ``tensor`` with ``lerp`` (floating and
    complex tensors) or fall back to arithmetic on its integers."""
    return tg.is_floating_point(tensor) or tg.is_complex(tensor)


def _check_same_length(averaged, current):
    """The lists' lengths agree, as PyTorch's list kernels (``_foreach_lerp_``, ...)
    require."""
    if len(averaged) != len(current):
        raise RuntimeError("Tensor lists must have the same number of tensors, got "
                           f"{len(averaged)} and {len(current)}")


def _lerp_into(start, end, weight):
    """``start.lerp_(end, weight)`` for a number ``weight``, rounded as PyTorch's CPU kernel
    rounds it: one rounding of ``start + weight * (end - start)`` (of ``end + (weight - 1) *
    (end - start)`` when ``|weight| >= 0.5``), the fused multiply-add of its vector code."""
    if tg.is_complex(start):
        start.lerp_(end, weight)        # (the complex kernel has no fused form to follow)
        return
    diff = (end - start).detach().numpy()
    if abs(weight) < 0.5:
        value = fma_elementwise(diff, weight, start.detach().numpy())
    else:
        value = fma_elementwise(diff, weight - 1.0, end.detach().numpy())
    start.copy_(tg.from_numpy(np.asarray(value, dtype=np.float64)))


def get_ema_multi_avg_fn(decay=0.999):
    """An in-place exponential moving average for ``AveragedModel(multi_avg_fn=...)``:
    ``ema = decay * ema + (1 - decay) * current``, as ``ema.lerp_(current, 1 - decay)`` for
    floating tensors.  ``decay`` must lie in [0, 1].

    Example:
        >>> ema = [tg.tensor([0.0, 10.0])]
        >>> get_ema_multi_avg_fn(0.75)(ema, [tg.tensor([4.0, 2.0])], 1)
        >>> ema[0]
        tensor([1., 8.])
    """
    _check_decay(decay)

    @tg.no_grad()
    def ema_update(ema_param_list, current_param_list, _):
        if _interpolates(ema_param_list[0]):
            _check_same_length(ema_param_list, current_param_list)
            for p_ema, p_model in zip(ema_param_list, current_param_list):
                _lerp_into(p_ema, p_model, 1 - decay)
        else:
            # integer buffers (a batch count): the float average, truncated by the copy
            for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """An in-place equal-weight average for ``AveragedModel(multi_avg_fn=...)``:
    ``averaged.lerp_(current, 1 / (n_averaged + 1))`` for floating tensors.

    Example:
        >>> averaged = [tg.tensor([1.0, 4.0])]
        >>> get_swa_multi_avg_fn()(averaged, [tg.tensor([4.0, 1.0])], tg.tensor(2))
        >>> averaged[0]
        tensor([2., 3.])
    """

    @tg.no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        _check_same_length(averaged_param_list, current_param_list)
        if _interpolates(averaged_param_list[0]):
            # a tensor count gives a 0-d tensor weight, which lerp reads as its number
            weight = 1 / (num_averaged + 1)
            weight = weight.item() if isinstance(weight, Tensor) else weight
            for p_averaged, p_model in zip(averaged_param_list, current_param_list):
                _lerp_into(p_averaged, p_model, weight)
            return
        diffs = [p_model - p_averaged
                 for p_averaged, p_model in zip(averaged_param_list, current_param_list)]
        if isinstance(num_averaged, Tensor):
            # (integer tensors refuse addcdiv's division, with PyTorch's error)
            for p_averaged, diff in zip(averaged_param_list, diffs):
                p_averaged.addcdiv_(diff, num_averaged + 1)
        else:
            for p_averaged, diff in zip(averaged_param_list, diffs):
                p_averaged.add_(diff, alpha=1.0 / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """An exponential moving average for ``AveragedModel(avg_fn=...)``: returns
    ``decay * ema + (1 - decay) * current``.  ``decay`` must lie in [0, 1].

    Example:
        >>> get_ema_avg_fn(0.75)(tg.tensor([0.0, 10.0]), tg.tensor([4.0, 2.0]), 1)
        tensor([1., 8.])
    """
    _check_decay(decay)

    @tg.no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """An equal-weight average for ``AveragedModel(avg_fn=...)``: returns
    ``averaged + (current - averaged) / (n_averaged + 1)``.

    Example:
        >>> get_swa_avg_fn()(tg.tensor([1.0, 4.0]), tg.tensor([4.0, 1.0]), tg.tensor(2))
        tensor([2., 3.])
    """

    @tg.no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


def _grouped_by_device_and_dtype(averaged, current):
    """``[(device, averaged_list, current_list)]``, one entry per device and dtype of the
    averaged tensors, the tensors in their order.  The groups come last-seen kind first: the
    order in which PyTorch's grouping (a hash map) hands them to a ``multi_avg_fn``."""
    groups = {}
    for p_averaged, p_model in zip(averaged, current):
        key = (str(p_averaged.device), p_averaged.dtype)
        entry = groups.setdefault(key, (p_averaged.device, [], []))
        entry[1].append(p_averaged)
        entry[2].append(p_model)
    return list(reversed(groups.values()))


class AveragedModel(Module):
    """A running average of ``model``'s parameters (and buffers, with ``use_buffers``), in a
    deep copy of it under ``.module``; ``forward`` calls the copy.

    ``update_parameters(model)`` copies ``model``'s values on its first call and averages
    them in on each later one, with ``avg_fn(averaged, current, n_averaged)`` (returning the
    new value), or ``multi_avg_fn(averaged_list, current_list, n_averaged)`` (updating the
    list in place, called once per device and dtype), or, without either, the equal-weight
    average.  ``n_averaged`` (an int64 buffer, saved in the state dict) counts the calls.
    Without ``use_buffers`` the buffers are copied from ``model`` on every call; with it,
    they are averaged as the parameters are (batch-norm statistics included).  The
    functions are not part of the state dict.

    Example:
        >>> model = nn.Linear(1, 1)
        >>> swa = AveragedModel(model)
        >>> for value in (1.0, 2.0, 6.0):
        ...     with tg.no_grad():
        ...         _ = model.weight.fill_(value)
        ...     swa.update_parameters(model)
        >>> swa.module.weight, swa.n_averaged
        (Parameter containing:
        tensor([[3.]], requires_grad=True), tensor(3))
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tg.tensor(0, dtype=tg.long, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _averaged_tensors(self, model):
        """The (averaged, model) tensor pairs an update reads: parameters, then buffers
        with ``use_buffers``; pairs as far as the shorter of the two lists goes."""
        if self.use_buffers:
            mine = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs = itertools.chain(model.parameters(), model.buffers())
        else:
            mine, theirs = self.parameters(), model.parameters()
        return zip(mine, theirs)

    def update_parameters(self, model):
        """Average ``model``'s current values in (copy them, on the first call)."""
        averaged, current = [], []
        first = bool(self.n_averaged == 0)
        for p_averaged, p_model in self._averaged_tensors(model):
            p_model = p_model.detach().to(p_averaged.device)
            averaged.append(p_averaged.detach())
            current.append(p_model)
            if first:
                p_averaged.detach().copy_(p_model)

        if self.n_averaged > 0:
            if self.multi_avg_fn is not None or self.avg_fn is None:
                for device, averaged_group, current_group in \
                        _grouped_by_device_and_dtype(averaged, current):
                    n_averaged = self.n_averaged.to(device)
                    if self.multi_avg_fn:
                        self.multi_avg_fn(averaged_group, current_group, n_averaged)
                    else:
                        # PyTorch's per-tensor path for CPU tensors (its fused in-place
                        # one is for accelerators)
                        swa = get_swa_avg_fn()
                        for p_averaged, p_model in zip(averaged_group, current_group):
                            p_averaged.copy_(swa(p_averaged, p_model, n_averaged))
            else:
                for p_averaged, p_model in zip(averaged, current):
                    n_averaged = self.n_averaged.to(p_averaged.device)
                    p_averaged.detach().copy_(
                        self.avg_fn(p_averaged.detach(), p_model, n_averaged))

        if not self.use_buffers:
            # buffers not averaged follow the model's
            for b_averaged, b_model in zip(self.module.buffers(), model.buffers(),
                                           strict=True):
                b_averaged.detach().copy_(b_model.detach().to(b_averaged.device))
        self.n_averaged += 1


def _batch_norms(model):
    """The batch norms in ``model`` (not the instance norms, which PyTorch's ``update_bn``
    leaves alone)."""
    return [module for module in model.modules()
            if isinstance(module, _BatchNorm) and not isinstance(module, _InstanceNorm)]


@tg.no_grad()
def update_bn(loader, model, device=None):
    """Recompute the running statistics of ``model``'s batch norms in one pass over
    ``loader``: they are reset, then each batch (a tensor, or a list or tuple whose first
    element is the input; moved to ``device`` if given) goes through ``model`` in training
    mode, the batch norms' ``momentum`` set to None so that the statistics are the
    cumulative average over the pass.  The momenta and ``model``'s mode are restored.

    Example:
        >>> model = nn.Sequential(nn.Linear(1, 1), nn.BatchNorm1d(1))
        >>> with tg.no_grad():
        ...     _ = model[0].weight.fill_(1.0), model[0].bias.fill_(0.0)
        >>> update_bn([tg.tensor([[1.0], [3.0]]), (tg.tensor([[5.0], [7.0]]), "label")],
        ...           model)
        >>> model[1].running_mean, model[1].momentum, model.training
        (tensor([4.]), 0.1, True)
    """
    momenta = {}
    for module in _batch_norms(model):
        module.reset_running_stats()
        momenta[module] = module.momentum
    if not momenta:
        return

    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None

    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)

    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's rate to its ``swa_lr`` (one number for all groups, or a list
    with one per group) over ``anneal_epochs`` steps, along a cosine (``"cos"``) or a line
    (``"linear"``), then hold it there.  Each step undoes the previous step's mix to recover
    the rate it started from and mixes the next one, in PyTorch's expressions, so that the
    rates are PyTorch's.

    Example:
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = SWALR(opt, swa_lr=0.5, anneal_epochs=4, anneal_strategy="linear")
        >>> lrs = []
        >>> for epoch in range(5):
        ...     opt.step()
        ...     sched.step()
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        >>> lrs
        [0.875, 0.75, 0.625, 0.5, 0.5]
    """

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        swa_lrs = _per_group("swa_lr", optimizer, swa_lr)
        for value, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = value
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(
                f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        """The rate before a step that mixed it with ``swa_lr`` by ``alpha``."""
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = (self._cosine_anneal if anneal_strategy == "cos"
                            else self._linear_anneal)

    def get_lr(self):
        self._warn_unless_in_step()
        step = self._step_count - 1     # 0 for the constructor's step
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        prev_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
                    for group in self.optimizer.param_groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [group["swa_lr"] * alpha + lr * (1 - alpha)
                for group, lr in zip(self.optimizer.param_groups, prev_lrs)]

    def state_dict(self):
        """Everything in the scheduler's ``__dict__`` but the optimizer and the anneal
        function (restored from the strategy's name)."""
        return {key: value for key, value in self.__dict__.items()
                if key not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
