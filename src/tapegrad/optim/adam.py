"""Adam and AdamW, with PyTorch's update rules, hyperparameter checks and state layout."""
import math

import numpy as np

import tapegrad as tg

from .._config import kernel
from .optimizer import _EMPTY, Optimizer, _buffer, _flat, _flat_grad

__all__ = ["Adam", "AdamW"]


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
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, maximize=False, decoupled_weight_decay=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not (isinstance(betas[0], float) and isinstance(betas[1], float)):
            raise ValueError("betas must be either both floats or both Tensors")
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize,
                    "decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, defaults)

    def _init_state(self, p, amsgrad):
        state = self.state[p]
        if len(state) == 0:
            shape = p._value.shape
            state["step"] = _buffer(())
            state["exp_avg"] = _buffer(shape)
            state["exp_avg_sq"] = _buffer(shape)
            if amsgrad:
                state["max_exp_avg_sq"] = _buffer(shape)
        elif not isinstance(state["step"], tg.Tensor):
            # state saved with a plain-number step count
            state["step"] = tg.from_numpy(np.array(float(state["step"])))
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
                state = self._init_state(p, amsgrad)
                step_value = state["step"]._value
                step_value += 1.0
                state["step"]._bump_version()
                t = float(step_value)
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
    before the Adam update, instead of adding ``weight_decay * p`` to the gradient."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
