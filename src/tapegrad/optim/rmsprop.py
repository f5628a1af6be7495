"""RMSprop, Adagrad and Adadelta: steps scaled by running averages (or sums) of squared
gradients, with PyTorch's constructors, defaults, param-group keys and state layout."""
import numpy as np

import tapegrad as tg

from . import _kernels
from .optimizer import (_EMPTY, Optimizer, _advance_step, _buffer, _check_flags, _check_fused,
                        _check_lr, _fill_group_defaults, _flat, _flat_grad)

__all__ = ["RMSprop", "Adagrad", "Adadelta"]


class RMSprop(Optimizer):
    """RMSprop (Hinton), optionally centered and with momentum.

    With ``g`` the gradient (negated if ``maximize``, plus ``weight_decay * p``):
    ``v = alpha * v + (1 - alpha) * g**2``; centered: ``a = lerp(a, g, 1 - alpha)`` and the
    denominator is ``sqrt(v - a**2) + eps``, else ``sqrt(v) + eps``; with momentum
    ``b = momentum * b + g / denom`` and ``p -= lr * b``, else ``p -= lr * g / denom``.

    Three steps on ``sum(w**2)`` give PyTorch's numbers:

    Example:
        >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = tg.optim.RMSprop([w], lr=0.01)
        >>> for _ in range(3):
        ...     opt.zero_grad()
        ...     (w * w).sum().backward()
        ...     opt.step()
        >>> w
        tensor([ 0.7800, -1.7753], requires_grad=True)
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        _check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        _check_flags("RMSprop", differentiable, capturable)
        defaults = {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps,
                    "centered": centered, "weight_decay": weight_decay,
                    "capturable": capturable, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        _fill_group_defaults(self, momentum=0, centered=False, foreach=None, maximize=False,
                             differentiable=False, capturable=False)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, alpha, eps = float(group["lr"]), float(group["alpha"]), float(group["eps"])
            weight_decay, momentum = float(group["weight_decay"]), float(group["momentum"])
            centered, maximize = bool(group["centered"]), bool(group["maximize"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _buffer(())
                    state["square_avg"] = _buffer(p._value.shape)
                    if momentum > 0:
                        state["momentum_buffer"] = _buffer(p._value.shape)
                    if centered:
                        state["grad_avg"] = _buffer(p._value.shape)
                _advance_step(state)
                _kernels.rmsprop(
                    _flat(p), _flat_grad(p), _flat(state["square_avg"]),
                    _flat(state["grad_avg"]) if centered else _EMPTY,
                    _flat(state["momentum_buffer"]) if momentum > 0 else _EMPTY,
                    lr, alpha, eps, weight_decay, momentum, centered, maximize)
                p._bump_version()
        return loss


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.): ``s += g**2``; ``p -= clr * g / (sqrt(s) + eps)`` with
    ``clr = lr / (1 + (t - 1) * lr_decay)`` at step ``t``.

    As in PyTorch, every parameter's state (``step`` and ``sum``, filled with
    ``initial_accumulator_value``) is made by the constructor, gradient or not.

    Three steps on ``sum(w**2)`` give PyTorch's numbers:

    Example:
        >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = tg.optim.Adagrad([w], lr=0.1)
        >>> for _ in range(3):
        ...     opt.zero_grad()
        ...     (w * w).sum().backward()
        ...     opt.step()
        >>> w
        tensor([ 0.7805, -1.7758], requires_grad=True)
    """

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        _check_lr(lr)
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(
                f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable, "fused": fused}
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)
        _check_flags("Adagrad", differentiable)
        # every sum starts at the constructor's value, a group's own setting notwithstanding,
        # as in PyTorch
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, initial_accumulator_value)

    def _init_state(self, p, initial_value):
        state = self.state[p]
        state["step"] = _buffer(())
        state["sum"] = tg.from_numpy(np.full(p._value.shape, float(initial_value)))
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        _fill_group_defaults(self, foreach=None, maximize=False, differentiable=False,
                             fused=None)

    def share_memory(self):
        """A no-op: the state lives in this process only (there is no tensor sharing
        between processes in tapegrad)."""

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, lr_decay = float(group["lr"]), float(group["lr_decay"])
            eps, weight_decay = float(group["eps"]), float(group["weight_decay"])
            maximize = bool(group["maximize"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:   # a group added after the constructor ran
                    state = self._init_state(p, group["initial_accumulator_value"])
                step = _advance_step(state)
                clr = lr / (1 + (step - 1) * lr_decay)
                _kernels.adagrad(_flat(p), _flat_grad(p), _flat(state["sum"]), clr, eps,
                                 weight_decay, maximize)
                p._bump_version()
        return loss


class Adadelta(Optimizer):
    """Adadelta (Zeiler): ``v = rho * v + (1 - rho) * g**2``;
    ``delta = sqrt(u + eps) / sqrt(v + eps) * g``; ``u = rho * u + (1 - rho) * delta**2``;
    ``p -= lr * delta``.

    Three steps on ``sum(w**2)`` give PyTorch's numbers:

    Example:
        >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = tg.optim.Adadelta([w], lr=1.0)
        >>> for _ in range(3):
        ...     opt.zero_grad()
        ...     (w * w).sum().backward()
        ...     opt.step()
        >>> w
        tensor([ 0.9903, -1.9903], requires_grad=True)
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        _check_flags("Adadelta", differentiable, capturable)
        defaults = {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "capturable": capturable, "foreach": foreach,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        _fill_group_defaults(self, foreach=None, maximize=False, differentiable=False,
                             capturable=False)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, rho, eps = float(group["lr"]), float(group["rho"]), float(group["eps"])
            weight_decay, maximize = float(group["weight_decay"]), bool(group["maximize"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _buffer(())
                    state["square_avg"] = _buffer(p._value.shape)
                    state["acc_delta"] = _buffer(p._value.shape)
                _advance_step(state)
                _kernels.adadelta(_flat(p), _flat_grad(p), _flat(state["square_avg"]),
                                  _flat(state["acc_delta"]), lr, rho, eps, weight_decay,
                                  maximize)
                p._bump_version()
        return loss
