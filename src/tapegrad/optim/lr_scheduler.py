"""Learning-rate schedulers with ``torch.optim.lr_scheduler``'s semantics.

A scheduler sets ``group["lr"]`` of its optimizer's param groups on construction (the
schedule at ``last_epoch + 1``) and on every ``step()``.  The chainable schedulers compute the
next rate from the current ``group["lr"]`` (PyTorch's "chained form": ``lr * gamma`` at a
milestone, the recursive cosine update, ...), so other changes to the rate compose with
them; ``step(epoch)`` (deprecated in PyTorch, with its warning) uses the closed form where
there is one.  The numbers come from the same float expressions as PyTorch's, evaluated in
the same order, so the rate sequences are equal.

The warnings are PyTorch's: ``scheduler.step()`` called before ``optimizer.step()``,
``get_lr()`` called outside ``step()``, and an explicit ``epoch``.  Normal use (optimizer
step, then scheduler step) warns about nothing.
"""
import math
import types
import warnings
from bisect import bisect_right
from collections import Counter
from functools import partial, wraps
from weakref import ref

from ..tensor import Tensor
from .optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR",
           "ConstantLR", "LinearLR", "ExponentialLR", "PolynomialLR", "CosineAnnealingLR",
           "CosineAnnealingWarmRestarts", "CyclicLR", "OneCycleLR", "SequentialLR",
           "ChainedScheduler", "ReduceLROnPlateau"]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being "
    "deprecated where possible. Please use `scheduler.step()` to step the "
    "scheduler. During the deprecation, if epoch is different from None, the "
    "closed form is used instead of the new chainable form, where available. "
    "Please open an issue if you are unable to replicate your use case: "
    "https://github.com/pytorch/pytorch/issues/new/choose."
)


def _copy(value):
    """A learning rate as a value of its own: a tensor rate is cloned, so that later
    in-place changes of the group's rate do not reach it."""
    return value.clone() if isinstance(value, Tensor) else value


def _group_values(optimizer, key):
    return [_copy(group[key]) for group in optimizer.param_groups]


def _set_group_value(group, key, value):
    """Set ``group[key]``; a tensor rate is filled in place, as PyTorch does."""
    if isinstance(group[key], Tensor):
        group[key].fill_(float(value))
    else:
        group[key] = value


def _per_group(name, optimizer, value):
    """``value`` for each param group: a list or tuple must have one entry per group."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. "
                f"{name} has {len(value)} values, param_groups has "
                f"{len(optimizer.param_groups)}.")
    else:
        value = [value] * len(optimizer.param_groups)
    return [_copy(v) for v in value]


def _check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


class _Flag:
    """Sets a boolean attribute of the scheduler for the duration of a ``with`` block."""

    def __init__(self, scheduler, name):
        self.scheduler, self.name = scheduler, name

    def __enter__(self):
        setattr(self.scheduler, self.name, True)

    def __exit__(self, *exc):
        setattr(self.scheduler, self.name, False)


def _track_optimizer_steps(optimizer):
    """Wrap ``optimizer.step`` (once) so that the scheduler can tell whether the optimizer
    stepped before the scheduler's first ``step()``."""
    if hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        return
    opt_ref = ref(optimizer)
    func = optimizer.step.__func__

    @wraps(func)
    def wrapper(*args, **kwargs):
        opt = opt_ref()
        opt._opt_called = True
        return func.__get__(opt, opt.__class__)(*args, **kwargs)

    wrapper._wrapped_by_lr_sched = True
    optimizer.step = wrapper


class LRScheduler:
    """Base class: subclasses compute the next rates in ``get_lr``.

    ``last_epoch=-1`` starts the schedule (and records each group's ``initial_lr``); another
    value resumes it, which needs ``initial_lr`` in every group (from the optimizer's state
    dict).

    Example:
        >>> class Halve(tg.optim.lr_scheduler.LRScheduler):
        ...     def get_lr(self):   # called by step(); last_epoch 0 is the constructor's call
        ...         if self.last_epoch == 0:
        ...             return [g["lr"] for g in self.optimizer.param_groups]
        ...         return [g["lr"] * 0.5 for g in self.optimizer.param_groups]
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = Halve(opt)
        >>> for _ in range(3):
        ...     opt.step()
        ...     sched.step()
        >>> sched.get_last_lr(), sched.last_epoch
        ([0.125], 3)
    """

    _get_lr_called_within_step = False
    _is_initial = False

    def __init__(self, optimizer, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", _copy(group["lr"]))
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming scheduler with last_epoch >= 0.\n"
                        "This typically happens when:\n"
                        "1. You're trying to resume training from a checkpoint but haven't "
                        "properly loaded the optimizer state\n"
                        "2. You're using last_epoch >= 0 for a fresh training run (not "
                        "recommended)")
        self.base_lrs = _group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        _track_optimizer_steps(optimizer)
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        with _Flag(self, "_is_initial"):
            self.step()

    def state_dict(self):
        """Everything in the scheduler's ``__dict__`` but the optimizer."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)

    def get_last_lr(self):
        """The rates the last ``step()`` set, one per param group."""
        return self._last_lr

    def get_lr(self):
        """The next rates; called by ``step()`` (use ``get_last_lr()`` to read them)."""
        raise NotImplementedError

    def _warn_unless_in_step(self):
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, "
                          "please use `get_last_lr()`.", UserWarning, stacklevel=3)

    def step(self, epoch=None):
        """Advance the schedule by one (or to ``epoch``, deprecated) and set the rates."""
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn(
                    "Seems like `optimizer.step()` has been overridden after learning rate "
                    "scheduler initialization. Please, make sure to call `optimizer.step()` "
                    "before `lr_scheduler.step()`. See more details at "
                    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                    UserWarning, stacklevel=2)
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn(
                    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. "
                    "In PyTorch 1.1.0 and later, you should call them in the opposite order: "
                    "`optimizer.step()` before `lr_scheduler.step()`.  Failure to do this "
                    "will result in PyTorch skipping the first value of the learning rate "
                    "schedule. See more details at "
                    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                    UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        with _Flag(self, "_get_lr_called_within_step"):
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed_form = getattr(self, "_get_closed_form_lr", None)
                values = closed_form() if closed_form is not None else self.get_lr()
        if len(values) != len(self.optimizer.param_groups):
            raise ValueError("the scheduler computed a rate for each of "
                             f"{len(values)} param groups, but the optimizer has "
                             f"{len(self.optimizer.param_groups)}")
        for group, lr in zip(self.optimizer.param_groups, values):
            _set_group_value(group, "lr", lr)
        self._last_lr = _group_values(self.optimizer, "lr")


class _LRScheduler(LRScheduler):
    """The old name of ``LRScheduler``, kept as PyTorch keeps it."""


def _lambdas_state_dict(scheduler):
    """The state dict of a scheduler driven by functions: functions and lambdas are not
    saved (None), callable objects by their ``__dict__``."""
    state = {key: value for key, value in scheduler.__dict__.items()
             if key not in ("optimizer", "lr_lambdas")}
    state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                           for fn in scheduler.lr_lambdas]
    return state


def _load_lambdas_state_dict(scheduler, state_dict):
    lr_lambdas = state_dict.pop("lr_lambdas")
    scheduler.__dict__.update(state_dict)
    state_dict["lr_lambdas"] = lr_lambdas   # leave the caller's dict as it was
    for fn, saved in zip(scheduler.lr_lambdas, lr_lambdas):
        if saved is not None:
            fn.__dict__.update(saved)


def _per_group_lambdas(optimizer, lr_lambda):
    """One function per parameter group: ``lr_lambda`` for each, or the list given, which
    must have one per group (LambdaLR's and MultiplicativeLR's rule)."""
    if not isinstance(lr_lambda, (list, tuple)):
        return [lr_lambda] * len(optimizer.param_groups)
    if len(lr_lambda) != len(optimizer.param_groups):
        raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got "
                         f"{len(lr_lambda)}")
    return list(lr_lambda)


class LambdaLR(LRScheduler):
    """``lr = initial_lr * lr_lambda(epoch)``, one function for all groups or one each.

    Example:
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = tg.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 1 / (epoch + 1))
        >>> lrs = []
        >>> for epoch in range(4):
        ...     opt.step()          # after the epoch's backward passes
        ...     sched.step()
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        >>> lrs
        [0.5, 0.3333, 0.25, 0.2]
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self.lr_lambdas = _per_group_lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def state_dict(self):
        return _lambdas_state_dict(self)

    def load_state_dict(self, state_dict):
        _load_lambdas_state_dict(self, state_dict)

    def get_lr(self):
        self._warn_unless_in_step()
        return [base_lr * lmbda(self.last_epoch)
                for lmbda, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class StepLR(LRScheduler):
    """Multiply the rate by ``gamma`` every ``step_size`` epochs.

    Example:
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = tg.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        >>> lrs = []
        >>> for epoch in range(6):
        ...     opt.step()          # after the epoch's backward passes
        ...     sched.step()
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        >>> lrs
        [1.0, 0.5, 0.5, 0.25, 0.25, 0.125]
    """

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_unless_in_step()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size)
                for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the rate by ``gamma`` at each milestone (by ``gamma**n`` at a milestone
    listed ``n`` times).

    Example:
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = tg.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 5], gamma=0.1)
        >>> lrs = []
        >>> for epoch in range(6):
        ...     opt.step()          # after the epoch's backward passes
        ...     sched.step()
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        >>> lrs
        [1.0, 0.1, 0.1, 0.1, 0.01, 0.01]
    """

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_unless_in_step()
        if self.last_epoch not in self.milestones:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch]
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch)
                for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the rate by ``gamma`` every epoch.

    Example:
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = tg.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
        >>> lrs = []
        >>> for epoch in range(4):
        ...     opt.step()          # after the epoch's backward passes
        ...     sched.step()
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        >>> lrs
        [0.5, 0.25, 0.125, 0.0625]
    """

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_unless_in_step()
        # a resumed scheduler's construction must not move the rate one step further
        if self._is_initial:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from ``initial_lr`` to ``eta_min`` over ``T_max`` epochs (then back up,
    and so on: no restarts), in PyTorch's recursive form
    ``lr_{t+1} = eta_min + (lr_t - eta_min) * (1 + cos(pi (t+1) / T)) / (1 + cos(pi t / T))``.

    Example:
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = tg.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
        >>> lrs = []
        >>> for epoch in range(5):
        ...     opt.step()          # after the epoch's backward passes
        ...     sched.step()
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        >>> lrs
        [0.8536, 0.5, 0.1464, 0.0, 0.1464]
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):  # noqa: N803 - PyTorch's
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_unless_in_step()
        if self._is_initial:
            return _group_values(self.optimizer, "lr")
        if self._step_count == 1 and self.last_epoch > 0:
            return [self.eta_min + (base_lr - self.eta_min)
                    * (1 + math.cos(self.last_epoch * math.pi / self.T_max)) / 2
                    for base_lr in self.base_lrs]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [group["lr"] + (base_lr - self.eta_min)
                    * (1 - math.cos(math.pi / self.T_max)) / 2
                    for base_lr, group in zip(self.base_lrs, self.optimizer.param_groups)]
        return [(1 + math.cos(math.pi * self.last_epoch / self.T_max))
                / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max))
                * (group["lr"] - self.eta_min) + self.eta_min
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base_lr - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith): the rate rises from ``max_lr / div_factor`` to ``max_lr``
    over ``pct_start`` of ``total_steps``, then anneals to ``initial_lr / final_div_factor``
    (``three_phase``: back to the initial rate first, then down); the momentum (or Adam's
    beta1) moves the other way between ``max_momentum`` and ``base_momentum``.  Not
    chainable: the rates come from the phase boundaries, not from the current rate.

    Example:
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = tg.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=6)
        >>> lrs = []
        >>> for epoch in range(5):
        ...     opt.step()          # after the epoch's backward passes
        ...     sched.step()
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        >>> lrs
        [0.9944, 0.8117, 0.4626, 0.1335, 0.0]
    """

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(
                    f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError(
                "You must define either total_steps OR (epochs AND steps_per_epoch)")

        def phase(end_step, start_lr, end_lr, start_momentum, end_momentum):
            return {"end_step": end_step, "start_lr": start_lr, "end_lr": end_lr,
                    "start_momentum": start_momentum, "end_momentum": end_momentum}

        rise_end = float(pct_start * self.total_steps) - 1
        if three_phase:
            self._schedule_phases = [
                phase(rise_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                phase(float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr",
                      "base_momentum", "max_momentum"),
                phase(self.total_steps - 1, "initial_lr", "min_lr", "max_momentum",
                      "max_momentum")]
        else:
            self._schedule_phases = [
                phase(rise_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                phase(self.total_steps - 1, "max_lr", "min_lr", "base_momentum",
                      "max_momentum")]

        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._anneal_func_type = anneal_strategy

        max_lrs = _per_group("max_lr", self.optimizer, max_lr)
        if last_epoch == -1:
            for max_lr_i, group in zip(max_lrs, self.optimizer.param_groups):
                group["initial_lr"] = max_lr_i / div_factor
                group["max_lr"] = max_lr_i
                group["min_lr"] = group["initial_lr"] / final_div_factor

        self.cycle_momentum = cycle_momentum
        if self.cycle_momentum:
            if "momentum" not in self.optimizer.defaults and \
                    "betas" not in self.optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in self.optimizer.defaults
            max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for m_momentum, b_momentum, group in zip(max_momentums, base_momentums,
                                                         optimizer.param_groups):
                    if self.use_beta1:
                        group["betas"] = (m_momentum, *group["betas"][1:])
                    else:
                        group["momentum"] = m_momentum
                    group["max_momentum"] = m_momentum
                    group["base_momentum"] = b_momentum
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        self._warn_unless_in_step()
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(f"Tried to step {step_num} times. The specified number of total "
                             f"steps is {self.total_steps}")
        lrs = []
        last = len(self._schedule_phases) - 1
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == last:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        momentum = self._anneal(group[phase["start_momentum"]],
                                                group[phase["end_momentum"]], pct)
                    break
                start_step = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                if self.use_beta1:
                    group["betas"] = (momentum, *group["betas"][1:])
                else:
                    group["momentum"] = momentum
        return lrs


class ReduceLROnPlateau(LRScheduler):
    """Multiply the rate by ``factor`` once a metric (``step(metric)``) has not improved for
    ``patience`` epochs, then wait ``cooldown`` epochs; never below ``min_lr``, and not at
    all when the change would be at most ``eps``.

    Example:
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = tg.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
        >>> lrs = []
        >>> for val_loss in [1.0, 0.5, 0.5, 0.5, 0.5, 0.5]:
        ...     sched.step(val_loss)
        ...     lrs.append(opt.param_groups[0]["lr"])
        >>> lrs
        [1.0, 1.0, 1.0, 0.5, 0.5, 0.25]
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got "
                                 f"{len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = _group_values(self.optimizer, "lr")
        self._init_is_better(mode=mode, threshold=threshold, threshold_mode=threshold_mode)
        self._reset()

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch=None):
        current = float(metrics)   # a 0-d tensor is accepted
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0   # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr(epoch)
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _group_values(self.optimizer, "lr")

    def _reduce_lr(self, epoch):
        if len(self.optimizer.param_groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    "The number of param groups in the `optimizer` "
                    f"({len(self.optimizer.param_groups)}) differs "
                    f"from when `ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), "
                    "usually due to a new param group being added to the optimizer. Please "
                    "modify the `min_lrs` field to match the length of the `optimizer` param "
                    "groups.")
            self.min_lrs = [self.default_min_lr] * len(self.optimizer.param_groups)
        for i, group in enumerate(self.optimizer.param_groups):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, self.min_lrs[i])
            if old_lr - new_lr > self.eps:
                _set_group_value(group, "lr", new_lr)

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def _is_better(self, a, best):
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min" and self.threshold_mode == "abs":
            return a < best - self.threshold
        if self.mode == "max" and self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in {"min", "max"}:
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in {"rel", "abs"}:
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._init_is_better(mode=self.mode, threshold=self.threshold,
                             threshold_mode=self.threshold_mode)


class MultiplicativeLR(LRScheduler):
    """Multiply the rate by ``lr_lambda(epoch)`` every epoch (one function for all groups or
    one each); chainable, as it starts from the current rate.

    Example:
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = tg.optim.lr_scheduler.MultiplicativeLR(opt, lambda epoch: 0.5)
        >>> lrs = []
        >>> for epoch in range(3):
        ...     opt.step()          # after the epoch's backward passes
        ...     sched.step()
        ...     lrs.append(sched.get_last_lr()[0])
        >>> lrs
        [0.5, 0.25, 0.125]
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self.lr_lambdas = _per_group_lambdas(optimizer, lr_lambda)
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(
                    f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def state_dict(self):
        return _lambdas_state_dict(self)

    def load_state_dict(self, state_dict):
        _load_lambdas_state_dict(self, state_dict)

    def get_lr(self):
        self._warn_unless_in_step()
        # the constructor's step keeps the rate: the first factor applies at epoch 1
        if self._is_initial:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * fn(self.last_epoch)
                for fn, group in zip(self.lr_lambdas, self.optimizer.param_groups)]


class ConstantLR(LRScheduler):
    """Multiply the rate by ``factor`` for the first ``total_iters`` epochs, then restore it
    (by dividing, as PyTorch's chained form does).

    Example:
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = tg.optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=2)
        >>> lrs = [sched.get_last_lr()[0]]
        >>> for epoch in range(3):
        ...     opt.step()          # after the epoch's backward passes
        ...     sched.step()
        ...     lrs.append(sched.get_last_lr()[0])
        >>> lrs
        [0.5, 0.5, 1.0, 1.0]
    """

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_unless_in_step()
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * (1.0 / self.factor) for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (self.factor + (self.last_epoch >= self.total_iters)
                           * (1 - self.factor))
                for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the rate by a factor going linearly from ``start_factor`` (epoch 0) to
    ``end_factor`` (epoch ``total_iters`` and after), in PyTorch's chained form: each step
    multiplies the current rate by the ratio of consecutive factors.

    Example:
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = tg.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3)
        >>> lrs = [sched.get_last_lr()[0]]
        >>> for epoch in range(4):
        ...     opt.step()          # after the epoch's backward passes
        ...     sched.step()
        ...     lrs.append(sched.get_last_lr()[0])
        >>> lrs
        [0.25, 0.5, 0.75, 1.0, 1.0]
    """

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 "
                             "and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_unless_in_step()
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _group_values(self.optimizer, "lr")
        # factor(t) / factor(t - 1), written as PyTorch writes it so the bits agree
        span = self.end_factor - self.start_factor
        ratio = 1.0 + span / (self.total_iters * self.start_factor
                              + (self.last_epoch - 1) * span)
        return [group["lr"] * ratio for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (self.start_factor + (self.end_factor - self.start_factor)
                           * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base_lr in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Decay the rate as ``(1 - t / total_iters) ** power`` of its initial value, reaching 0
    at ``total_iters`` and staying there; chained form (each step multiplies the current rate
    by the ratio of consecutive factors).

    Example:
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = tg.optim.lr_scheduler.PolynomialLR(opt, total_iters=4, power=2.0)
        >>> lrs = []
        >>> for epoch in range(5):
        ...     opt.step()          # after the epoch's backward passes
        ...     sched.step()
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        >>> lrs
        [0.5625, 0.25, 0.0625, 0.0, 0.0]
    """

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_unless_in_step()
        if self._is_initial or self.last_epoch > self.total_iters:
            return _group_values(self.optimizer, "lr")
        decay_factor = ((1.0 - self.last_epoch / self.total_iters)
                        / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [group["lr"] * decay_factor for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
                ** self.power for base_lr in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR (Loshchilov & Hutter): cosine annealing from ``initial_lr`` to ``eta_min`` over
    ``T_i`` epochs, then a restart at ``initial_lr`` with ``T_i *= T_mult``.  The rate comes
    from the position in the current period (not chainable); ``step(epoch)`` may be given a
    fractional epoch, to anneal within an epoch, and then does not warn.

    Example:
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = tg.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2)
        >>> lrs = []
        >>> for epoch in range(6):
        ...     opt.step()          # after the epoch's backward passes
        ...     sched.step()
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        >>> lrs
        [0.5, 1.0, 0.8536, 0.5, 0.1464, 1.0]
    """

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):  # noqa: N803
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type "
                             f"{type(eta_min)}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_unless_in_step()
        return [self.eta_min + (base_lr - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base_lr in self.base_lrs]

    def step(self, epoch=None):
        """Advance one epoch, or jump to ``epoch`` (a float is fine: the position within
        the period is fractional)."""
        # PyTorch's step here warns about neither the call order nor an explicit epoch
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        elif epoch < 0:
            raise ValueError(f"Expected non-negative epoch, but got {epoch}")
        elif epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                # the period n that epoch falls in: T_0 (T_mult**n - 1) / (T_mult - 1) <= epoch
                n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult ** n
        else:
            self.T_i = self.T_0
            self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        with _Flag(self, "_get_lr_called_within_step"):
            values = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            _set_group_value(group, "lr", lr)
        self._last_lr = _group_values(self.optimizer, "lr")


class CyclicLR(LRScheduler):
    """Cyclical learning rates (Smith): the rate goes from ``base_lr`` up to ``max_lr`` in
    ``step_size_up`` steps and back in ``step_size_down``, the amplitude scaled per cycle
    (``triangular``: 1, ``triangular2``: halved each cycle) or per step (``exp_range``:
    ``gamma**step``), or by ``scale_fn`` of the cycle or step (``scale_mode``).  With
    ``cycle_momentum`` the momentum (or Adam's beta1) moves the other way between
    ``max_momentum`` and ``base_momentum``.  Meant to be stepped after every batch.

    Example:
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
        >>> sched = tg.optim.lr_scheduler.CyclicLR(opt, base_lr=0.1, max_lr=0.5,
        ...                                        step_size_up=2, mode="triangular2")
        >>> lrs = [sched.get_last_lr()[0]]
        >>> for batch in range(8):
        ...     opt.step()
        ...     sched.step()
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        >>> lrs
        [0.1, 0.3, 0.5, 0.3, 0.1, 0.2, 0.3, 0.2, 0.1]
    """

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                _set_group_value(group, "lr", lr)
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ["triangular", "triangular2", "exp_range"] and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()

        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in self.optimizer.defaults
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for m_momentum, b_momentum, group in zip(self.max_momentums,
                                                         self.base_momentums,
                                                         optimizer.param_groups):
                    if self.use_beta1:
                        group["betas"] = (m_momentum, *group["betas"][1:])
                    else:
                        group["momentum"] = m_momentum
                    group["max_momentum"] = m_momentum
                    group["base_momentum"] = b_momentum
        super().__init__(optimizer, last_epoch)
        # the cycle's floor is base_lr, whatever initial_lr an earlier scheduler recorded
        self.base_lrs = base_lrs

    def _init_scale_fn(self):
        """The built-in modes' scale functions (a custom ``scale_fn`` keeps its own
        ``scale_mode``); not saved in the state dict, rebuilt on loading."""
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref = self._triangular_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref = self._triangular2_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self._scale_fn_ref = partial(self._exp_range_scale_fn, self.gamma)
            self.scale_mode = "iterations"

    def scale_fn(self, x):
        """The amplitude's scale at cycle (or step) ``x``."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return self._scale_fn_ref(x)

    @staticmethod
    def _triangular_scale_fn(x):
        return 1.0

    @staticmethod
    def _triangular2_scale_fn(x):
        return 1 / (2.0 ** (x - 1))

    @staticmethod
    def _exp_range_scale_fn(gamma, x):
        return gamma ** x

    def get_lr(self):
        self._warn_unless_in_step()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle   # position within the cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        # scale_fn is called once per group and use, as in PyTorch, in case it has state
        lrs = []
        for base_lr, max_lr in zip(self.base_lrs, self.max_lrs):
            base_height = (max_lr - base_lr) * scale_factor
            lrs.append(base_lr + base_height * self._scale_at(cycle))
        if self.cycle_momentum:
            for group, base_m, max_m in zip(self.optimizer.param_groups, self.base_momentums,
                                            self.max_momentums):
                base_height = (max_m - base_m) * scale_factor
                momentum = max_m - base_height * self._scale_at(cycle)
                if self.use_beta1:
                    group["betas"] = (momentum, *group["betas"][1:])
                else:
                    group["momentum"] = momentum
        return lrs

    def _scale_at(self, cycle):
        return self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)

    def state_dict(self):
        """Without the scale function; a custom ``scale_fn`` that is a callable object (not
        a function or lambda) is saved by its ``__dict__``."""
        state = super().state_dict()
        state.pop("_scale_fn_ref", None)
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None
        if fn is not None and not isinstance(fn, types.FunctionType):
            state["_scale_fn_custom"] = fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict):
        fn = state_dict.pop("_scale_fn_custom")
        super().load_state_dict(state_dict)
        state_dict["_scale_fn_custom"] = fn   # leave the caller's dict as it was
        if fn is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()


def _check_schedulers(owner, optimizer, schedulers):
    """PyTorch's checks of the schedulers a SequentialLR or ChainedScheduler drives."""
    name = type(owner).__name__
    for i, scheduler in enumerate(schedulers):
        if not hasattr(scheduler, "optimizer"):
            raise TypeError(f"{name} at index {i} should have `optimizer` as its attribute.")
        if isinstance(scheduler, ReduceLROnPlateau):
            raise ValueError(
                f"{name} does not support `ReduceLROnPlateau` scheduler as it requires "
                "additional kwargs to be specified when calling `step`, but got one at index "
                f"{i} in the given schedulers sequence.")
        if optimizer != scheduler.optimizer:
            raise ValueError(
                f"{name} expects all schedulers to belong to the same optimizer, but got "
                f"scheduler {type(scheduler).__name__} at index {i} has "
                f"{scheduler.optimizer}, which is different from "
                f"{type(optimizer).__name__}.")


def _nested_state_dict(scheduler):
    state = {key: value for key, value in scheduler.__dict__.items()
             if key not in ("optimizer", "_schedulers")}
    state["_schedulers"] = [s.state_dict() for s in scheduler._schedulers]
    return state


def _load_nested_state_dict(scheduler, state_dict):
    saved = state_dict.pop("_schedulers")
    scheduler.__dict__.update(state_dict)
    state_dict["_schedulers"] = saved   # leave the caller's dict as it was
    for inner, inner_state in zip(scheduler._schedulers, saved):
        inner.load_state_dict(inner_state)


class SequentialLR(LRScheduler):
    """Run ``schedulers[0]`` until ``milestones[0]``, then ``schedulers[1]`` (restarted at its
    epoch 0) until ``milestones[1]``, and so on: warmup then decay, for instance.

    Example:
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=1.0)
        >>> S = tg.optim.lr_scheduler
        >>> warmup = S.LinearLR(opt, start_factor=0.5, total_iters=2)
        >>> decay = S.ExponentialLR(opt, gamma=0.5)
        >>> sched = S.SequentialLR(opt, [warmup, decay], milestones=[2])
        >>> lrs = [sched.get_last_lr()[0]]
        >>> for epoch in range(4):
        ...     opt.step()          # after the epoch's backward passes
        ...     sched.step()
        ...     lrs.append(sched.get_last_lr()[0])
        >>> lrs
        [0.5, 0.75, 1.0, 0.5, 0.25]
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler, but got "
                             "no scheduler.")
        _check_schedulers(self, optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more "
                "than the number of milestone points, but got number of schedulers "
                f"{len(schedulers)} and the number of milestones to be equal to "
                f"{len(milestones)}")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # the schedulers' constructors each moved the rate: start again from initial_lr
        for group in self.optimizer.param_groups:
            _set_group_value(group, "lr", group["initial_lr"])
        self.recursive_undo()
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = schedulers[idx].get_last_lr()

    def recursive_undo(self, sched=None):
        """Take back the constructor's step of every scheduler (nested ones included)."""
        scheds = self if sched is None else sched
        if hasattr(scheds, "_schedulers"):
            for s in scheds._schedulers:
                self.recursive_undo(s)
        elif hasattr(scheds, "last_epoch"):
            scheds.last_epoch -= 1

    def step(self):
        """Step the scheduler whose stretch this epoch is in; at a milestone the next one
        starts at its epoch 0 (its closed form, where it has one)."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self):
        """Own state plus each scheduler's state dict under ``_schedulers``."""
        return _nested_state_dict(self)

    def load_state_dict(self, state_dict):
        _load_nested_state_dict(self, state_dict)


class ChainedScheduler(LRScheduler):
    """Step several schedulers together, each after the other, so that their (chainable)
    changes of the rate compose.

    Example:
        >>> opt = tg.optim.SGD([tg.zeros(1, requires_grad=True)], lr=1.0)
        >>> S = tg.optim.lr_scheduler
        >>> sched = S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=2),
        ...                             S.ExponentialLR(opt, gamma=0.5)])
        >>> lrs = [sched.get_last_lr()[0]]
        >>> for epoch in range(3):
        ...     opt.step()          # after the epoch's backward passes
        ...     sched.step()
        ...     lrs.append(sched.get_last_lr()[0])
        >>> lrs
        [0.5, 0.25, 0.25, 0.125]
    """

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler to be "
                             "chained, but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        _check_schedulers(self, optimizer, schedulers)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = _group_values(self._schedulers[-1].optimizer, "lr")

    def step(self):
        """Step every scheduler, in order."""
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = _group_values(self._schedulers[-1].optimizer, "lr")

    def state_dict(self):
        """Own state plus each scheduler's state dict under ``_schedulers``."""
        return _nested_state_dict(self)

    def load_state_dict(self, state_dict):
        _load_nested_state_dict(self, state_dict)


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
