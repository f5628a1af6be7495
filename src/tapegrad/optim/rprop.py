"""Rprop and ASGD, with PyTorch's constructors, defaults, param-group keys, state layout and
update formulas.

Their steps are a few whole-array NumPy operations on the flat float64 views the compiled
kernels of the other optimizers update: both are rarely the bottleneck of a program, and a
kernel would add to the cold compile of ``_kernels.py``.
"""
import numpy as np

import tapegrad as tg

from .optimizer import (Optimizer, _advance_step, _buffer, _check_flags, _check_lr,
                        _fill_group_defaults, _flat, _flat_grad)

__all__ = ["Rprop", "ASGD"]


def _scalar_state(state, key):
    """``state[key]`` as a 0-d float64 tensor (it may have been loaded as a number, from a
    state dict saved by an older version)."""
    value = state[key]
    if not isinstance(value, tg.Tensor):
        value = state[key] = tg.from_numpy(np.array(float(value)))
    return value


def _sign(x):
    """``torch.sign``: 0 for NaN, where ``np.sign`` gives NaN (a NaN gradient entry then
    leaves the parameter and its step size as they are, as in PyTorch)."""
    s = np.sign(x)
    s[np.isnan(s)] = 0.0
    return s


class Rprop(Optimizer):
    """Resilient backpropagation (Riedmiller & Braun): each entry has its own step size,
    multiplied by ``etaplus`` while its gradient keeps its sign and by ``etaminus`` when the
    sign flips (clamped to ``step_sizes``); the parameter moves by the step size against the
    gradient's sign, and not at all on a flip (whose gradient is then forgotten).

    Three steps on ``sum(w**2)`` give PyTorch's numbers:

    Example:
        >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = tg.optim.Rprop([w], lr=0.1)
        >>> for _ in range(3):
        ...     opt.zero_grad()
        ...     (w * w).sum().backward()
        ...     opt.step()
        >>> w
        tensor([ 0.6360, -1.6360], requires_grad=True)
    """

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        _check_flags("Rprop", differentiable, capturable)
        defaults = {"lr": lr, "etas": etas, "step_sizes": step_sizes, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable,
                    "capturable": capturable}
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        _fill_group_defaults(self, foreach=None, maximize=False, differentiable=False,
                             capturable=False)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        # NaN and infinite gradients propagate silently, as in PyTorch
        with np.errstate(all="ignore"):
            self._step()
        return loss

    def _step(self):
        for group in self.param_groups:
            etaminus, etaplus = (float(e) for e in group["etas"])
            step_min, step_max = (float(s) for s in group["step_sizes"])
            maximize = bool(group["maximize"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = _flat_grad(p)
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _buffer(())
                    state["prev"] = _buffer(p._value.shape)
                    state["step_size"] = tg.from_numpy(
                        np.full(p._value.shape, float(group["lr"])))
                _advance_step(state)
                prev, step_size = _flat(state["prev"]), _flat(state["step_size"])
                if maximize:
                    g = -g
                # the factor of each entry: etaplus where the gradient kept its sign,
                # etaminus where it flipped, 1 where either is 0 (or the product NaN)
                factor = _sign(g * prev)
                factor[factor > 0] = etaplus
                factor[factor < 0] = etaminus
                factor[factor == 0] = 1.0
                np.clip(step_size * factor, step_min, step_max, out=step_size)
                g = g.copy()   # never write into the caller's .grad
                g[factor == etaminus] = 0.0
                v = _flat(p)
                v += -1.0 * (_sign(g) * step_size)
                prev[...] = g
                p._bump_version()
                state["prev"]._bump_version()
                state["step_size"]._bump_version()


class ASGD(Optimizer):
    """Averaged SGD (Polyak & Juditsky; the decaying rate of Bottou's "Stochastic gradient
    descent tricks"): ``p *= 1 - lambd * eta``; ``p -= eta * g``; the average ``ax`` follows
    ``p`` (a plain copy until step ``t0``, then ``ax += mu (p - ax)``); after each step
    ``eta = lr / (1 + lambd lr t)**alpha`` and ``mu = 1 / max(1, t - t0)``.

    Three steps on ``sum(w**2)`` give PyTorch's numbers:

    Example:
        >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = tg.optim.ASGD([w], lr=0.1)
        >>> for _ in range(3):
        ...     opt.zero_grad()
        ...     (w * w).sum().backward()
        ...     opt.step()
        >>> w
        tensor([ 0.5120, -1.0240], requires_grad=True)
        >>> opt.state[w]["ax"]
        tensor([ 0.5120, -1.0240])
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _check_lr(lr)
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        _check_flags("ASGD", differentiable, capturable)
        defaults = {"lr": lr, "lambd": lambd, "alpha": alpha, "t0": t0,
                    "weight_decay": weight_decay, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "capturable": capturable}
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        _fill_group_defaults(self, foreach=None, maximize=False, differentiable=False,
                             capturable=False)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        # NaN and infinite gradients propagate silently, as in PyTorch
        with np.errstate(all="ignore"):
            self._step()
        return loss

    def _step(self):
        for group in self.param_groups:
            lr, lambd = float(group["lr"]), float(group["lambd"])
            alpha, t0 = float(group["alpha"]), float(group["t0"])
            weight_decay, maximize = float(group["weight_decay"]), bool(group["maximize"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = _flat_grad(p)
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _buffer(())
                    state["eta"] = tg.from_numpy(np.array(lr))
                    state["mu"] = tg.from_numpy(np.array(1.0))
                    state["ax"] = _buffer(p._value.shape)
                eta_t, mu_t = _scalar_state(state, "eta"), _scalar_state(state, "mu")
                step = _advance_step(state)
                if maximize:
                    g = -g
                v, ax = _flat(p), _flat(state["ax"])
                if weight_decay != 0:
                    g = g + weight_decay * v
                eta, mu = float(eta_t._value), float(mu_t._value)
                v *= 1 - lambd * eta
                v += -eta * g
                if mu != 1:
                    ax += (v - ax) * mu
                else:
                    ax[...] = v
                # the rates of the next step, from this step's count
                eta_t._value[...] = lr / (1 + lambd * lr * step) ** alpha
                mu_t._value[...] = 1 / max(1, step - t0)
                for t in (p, state["ax"], eta_t, mu_t):
                    t._bump_version()
