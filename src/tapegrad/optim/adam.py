"""The Adam family: Adam, AdamW, Adamax, NAdam and RAdam, with PyTorch's update rules,
hyperparameter checks, param-group keys and state layout."""
import math

import numpy as np

import tapegrad as tg

from .._config import kernel
from . import _kernels
from .optimizer import (_EMPTY, Optimizer, _advance_step, _buffer, _check_flags, _check_fused,
                        _check_lr, _fill_group_defaults, _flat, _flat_grad)

__all__ = ["Adam", "AdamW", "Adamax", "NAdam", "RAdam"]


def _check_betas_eps_decay(eps, betas, weight_decay):
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def _moment_state(optimizer, p, second):
    """The state of ``p`` for a step: ``step``, ``exp_avg`` and ``second`` (``exp_inf`` or
    ``exp_avg_sq``), made on the first step."""
    state = optimizer.state[p]
    if len(state) == 0:
        state["step"] = _buffer(())
        state["exp_avg"] = _buffer(p._value.shape)
        state[second] = _buffer(p._value.shape)
    return state


@kernel
def _adam_kernel(p, g, m, v, vmax, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad,
                 maximize, step_size, bias_correction2_sqrt):
    """One Adam(W) step, in place on p, m, v and vmax (all (n,); vmax empty unless amsgrad).

    ``step_size = lr / (1 - beta1**t)`` and ``bias_correction2_sqrt = (1 - beta2**t) ** 0.5``
    are computed once per step by the caller.
    """
    w1 = 1.0 - beta1
    w2 = 1.0 - beta2
    decay = 1.0 - lr * weight_decay
    for i in range(p.size):
        gi = -g[i] if maximize else g[i]
        pi = p[i]
        if weight_decay != 0.0:
            if decoupled:
                pi = pi * decay
            else:
                gi = gi + weight_decay * pi
        # m.lerp(g, w1): the two-sided form is exact at both ends of the weight range
        if abs(w1) < 0.5:
            mi = m[i] + w1 * (gi - m[i])
        else:
            mi = gi - (gi - m[i]) * (1.0 - w1)
        m[i] = mi
        vi = v[i] * beta2 + w2 * gi * gi
        v[i] = vi
        if amsgrad:
            vm = vmax[i]
            # torch.maximum propagates NaN from either side
            if vi > vm or vi != vi:
                vm = vi
            vmax[i] = vm
            vi = vm
        denom = math.sqrt(vi) / bias_correction2_sqrt + eps
        p[i] = pi + (-step_size) * mi / denom


class Adam(Optimizer):
    """Adam (Kingma & Ba), with optional AMSGrad, L2 or decoupled (AdamW) weight decay.

    With ``g`` the gradient (negated if ``maximize``) and ``t`` the step count:
    ``m = beta1 * m + (1 - beta1) * g``; ``v = beta2 * v + (1 - beta2) * g**2``;
    ``p -= lr / (1 - beta1**t) * m / (sqrt(v_hat) / sqrt(1 - beta2**t) + eps)`` where ``v_hat``
    is ``v`` or, with ``amsgrad``, its running maximum. Weight decay either adds
    ``weight_decay * p`` to ``g`` or, if ``decoupled_weight_decay``, scales ``p`` by
    ``1 - lr * weight_decay`` first.

    Example:
        >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = tg.optim.Adam([w], lr=0.1)
        >>> for _ in range(3):
        ...     opt.zero_grad()
        ...     (w * w).sum().backward()
        ...     opt.step()
        >>> w      # each step moves every element by about lr, against its gradient
        tensor([ 0.7016, -1.7006], requires_grad=True)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        _check_lr(lr)
        _check_betas_eps_decay(eps, betas, weight_decay)
        if not (isinstance(betas[0], float) and isinstance(betas[1], float)):
            raise ValueError("betas must be either both floats or both Tensors")
        # (foreach and fused choose PyTorch's kernels; tapegrad's one compiled update takes
        # their place: the flags are kept in the groups and checked as PyTorch checks them)
        _check_fused(fused, foreach, differentiable)
        _check_flags(type(self).__name__, differentiable, capturable)
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
                    "capturable": capturable, "differentiable": differentiable, "fused": fused,
                    "decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, defaults)
        _fill_group_defaults(self, foreach=None, capturable=False, differentiable=False,
                             fused=None)

    def _init_state(self, p, amsgrad):
        state = self.state[p]
        if len(state) == 0:
            shape = p._value.shape
            state["step"] = _buffer(())
            state["exp_avg"] = _buffer(shape)
            state["exp_avg_sq"] = _buffer(shape)
            if amsgrad:
                state["max_exp_avg_sq"] = _buffer(shape)
        return state

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, eps = float(group["lr"]), float(group["eps"])
            weight_decay = float(group["weight_decay"])
            beta1, beta2 = (float(b) for b in group["betas"])
            amsgrad, maximize = bool(group["amsgrad"]), bool(group["maximize"])
            decoupled = bool(group.get("decoupled_weight_decay", False))
            for p in group["params"]:
                if p.grad is None:
                    continue
                t = _advance_step(self._init_state(p, amsgrad))
                state = self.state[p]
                bias_correction1 = 1 - beta1 ** t
                bias_correction2 = 1 - beta2 ** t
                vmax = _flat(state["max_exp_avg_sq"]) if amsgrad else _EMPTY
                _adam_kernel(_flat(p), _flat_grad(p), _flat(state["exp_avg"]),
                             _flat(state["exp_avg_sq"]), vmax, lr, beta1, beta2, eps,
                             weight_decay, decoupled, amsgrad, maximize,
                             lr / bias_correction1, bias_correction2 ** 0.5)
                p._bump_version()
        return loss


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * weight_decay``
    before the Adam update, instead of adding ``weight_decay * p`` to the gradient.

    Example:
        >>> model = nn.Linear(3, 1)
        >>> opt = tg.optim.AdamW(model.parameters(), lr=1e-3)
        >>> opt.param_groups[0]["weight_decay"]
        0.01
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True


class Adamax(Optimizer):
    """Adamax, Adam's infinity-norm variant (Kingma & Ba): ``m = lerp(m, g, 1 - beta1)``;
    ``u = max(beta2 * u, |g| + eps)``; ``p -= lr / (1 - beta1**t) * m / u``.

    Three steps on ``sum(w**2)`` give PyTorch's numbers:

    Example:
        >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = tg.optim.Adamax([w], lr=0.1)
        >>> for _ in range(3):
        ...     opt.zero_grad()
        ...     (w * w).sum().backward()
        ...     opt.step()
        >>> w
        tensor([ 0.7155, -1.7076], requires_grad=True)
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check_lr(lr)
        _check_betas_eps_decay(eps, betas, weight_decay)
        _check_flags("Adamax", differentiable, capturable)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "foreach": foreach, "maximize": maximize, "differentiable": differentiable,
                    "capturable": capturable}
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        _fill_group_defaults(self, foreach=None, maximize=False, differentiable=False,
                             capturable=False)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, eps = float(group["lr"]), float(group["eps"])
            beta1, beta2 = (float(b) for b in group["betas"])
            weight_decay, maximize = float(group["weight_decay"]), bool(group["maximize"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = _moment_state(self, p, "exp_inf")
                t = _advance_step(state)
                clr = lr / (1 - beta1 ** t)
                _kernels.adamax(_flat(p), _flat_grad(p), _flat(state["exp_avg"]),
                                _flat(state["exp_inf"]), clr, beta1, beta2, eps, weight_decay,
                                maximize)
                p._bump_version()
        return loss


class NAdam(Optimizer):
    """NAdam, Adam with Nesterov momentum (Dozat), with the momentum schedule
    ``mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))`` and its running product.

    The product is kept in float64 (``state["mu_product"]``); PyTorch keeps it in its default
    dtype, so its numbers equal these under ``torch.set_default_dtype(torch.float64)``.

    Three steps on ``sum(w**2)`` give PyTorch's numbers:

    Example:
        >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = tg.optim.NAdam([w], lr=0.1)
        >>> for _ in range(3):
        ...     opt.zero_grad()
        ...     (w * w).sum().backward()
        ...     opt.step()
        >>> w
        tensor([ 0.7527, -1.7475], requires_grad=True)
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _check_lr(lr)
        _check_betas_eps_decay(eps, betas, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        _check_flags("NAdam", differentiable, capturable)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "momentum_decay": momentum_decay,
                    "decoupled_weight_decay": decoupled_weight_decay, "maximize": maximize,
                    "foreach": foreach, "capturable": capturable,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        _fill_group_defaults(self, maximize=False, foreach=None, capturable=False,
                             differentiable=False, decoupled_weight_decay=False)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, eps = float(group["lr"]), float(group["eps"])
            beta1, beta2 = (float(b) for b in group["betas"])
            weight_decay, momentum_decay = float(group["weight_decay"]), \
                float(group["momentum_decay"])
            decoupled, maximize = bool(group["decoupled_weight_decay"]), bool(group["maximize"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _buffer(())
                    state["mu_product"] = tg.from_numpy(np.ones(()))
                    state["exp_avg"] = _buffer(p._value.shape)
                    state["exp_avg_sq"] = _buffer(p._value.shape)
                elif not isinstance(state["mu_product"], tg.Tensor):
                    state["mu_product"] = tg.from_numpy(np.array(float(state["mu_product"])))
                t = _advance_step(state)
                mu = beta1 * (1.0 - 0.5 * (0.96 ** (t * momentum_decay)))
                mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((t + 1) * momentum_decay)))
                product = state["mu_product"]
                product._value *= mu
                product._bump_version()
                mu_product = float(product._value)
                mu_product_next = mu_product * mu_next
                _kernels.nadam(_flat(p), _flat_grad(p), _flat(state["exp_avg"]),
                               _flat(state["exp_avg_sq"]), lr, beta1, beta2, eps, weight_decay,
                               decoupled, maximize, 1 - beta2 ** t,
                               -lr * (1.0 - mu) / (1.0 - mu_product),
                               (-lr * mu_next) / (1.0 - mu_product_next))
                p._bump_version()
        return loss


class RAdam(Optimizer):
    """RAdam, Adam with the variance of its adaptive step rectified (Liu et al.): while the
    approximated moving-average length ``rho_t`` is at most 5 the step is plain momentum,
    ``lr * m / (1 - beta1**t)``; after that it is Adam's step times the rectification.

    Three steps on ``sum(w**2)`` give PyTorch's numbers:

    Example:
        >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = tg.optim.RAdam([w], lr=0.1)
        >>> for _ in range(3):
        ...     opt.zero_grad()
        ...     (w * w).sum().backward()
        ...     opt.step()
        >>> w
        tensor([ 0.4623, -0.9246], requires_grad=True)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _check_lr(lr)
        _check_betas_eps_decay(eps, betas, weight_decay)
        _check_flags("RAdam", differentiable, capturable)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "foreach": foreach, "capturable": capturable,
                    "decoupled_weight_decay": decoupled_weight_decay,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        _fill_group_defaults(self, foreach=None, maximize=False, differentiable=False,
                             capturable=False, decoupled_weight_decay=False)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, eps = float(group["lr"]), float(group["eps"])
            beta1, beta2 = (float(b) for b in group["betas"])
            weight_decay, maximize = float(group["weight_decay"]), bool(group["maximize"])
            decoupled = bool(group["decoupled_weight_decay"])
            rho_inf = 2 / (1 - beta2) - 1
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = _moment_state(self, p, "exp_avg_sq")
                t = _advance_step(state)
                bias_correction1 = 1 - beta1 ** t
                bias_correction2 = 1 - beta2 ** t
                rho_t = rho_inf - 2 * t * (beta2 ** t) / bias_correction2
                rectify = rho_t > 5.0
                rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                        / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5 if rectify else 0.0
                _kernels.radam(_flat(p), _flat_grad(p), _flat(state["exp_avg"]),
                               _flat(state["exp_avg_sq"]), lr, beta1, beta2, eps, weight_decay,
                               decoupled, maximize, bias_correction1, bias_correction2 ** 0.5,
                               rectify, rect)
                p._bump_version()
        return loss
