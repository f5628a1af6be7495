"""Optimizers with PyTorch's update rules, hyperparameter checks and ``state_dict`` layout.

A step touches each parameter once: one call of the algorithm's compiled kernel on flat
float64 views of the parameter, its gradient and its state buffers, updating them in place.
The kernels follow PyTorch's operation order (``p + (-lr) * d``, ``m + w * (g - m)``, ...);
rounding differs from ``torch.optim`` only where PyTorch's CPU kernels fuse a multiply-add, and
100-step trajectories agree with it to about 1e-13 relative.

Parameters whose ``.grad`` is None are skipped and get no state, as in PyTorch.
"""
import math
import warnings
from collections import defaultdict
from copy import deepcopy
from itertools import chain

import numpy as np

import tapegrad as tg

from ._config import kernel
from .tensor import _typename

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]


class _RequiredParameter:
    """Marks a hyperparameter that every param group must set."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _flat(t):
    """The (n,) float64 view of a tensor's value that the kernels update in place."""
    v = t._value
    if not v.flags.c_contiguous or v.dtype != np.float64:
        raise RuntimeError("optimizers update float64 C-contiguous tensors in place")
    return v.reshape(-1)


def _flat_grad(p):
    """The gradient of ``p`` as (n,) float64, checked against the parameter's size."""
    g = np.ascontiguousarray(p.grad._value, dtype=np.float64).reshape(-1)
    if g.size != p._value.size:
        raise RuntimeError(
            f"gradient has {g.size} elements but the parameter has {p._value.size}")
    return g


def _buffer(shape):
    """A fresh zero-filled state tensor (exp_avg, momentum_buffer, step, ...)."""
    return tg.from_numpy(np.zeros(shape, dtype=np.float64))


def _copy_state_value(value):
    """Deep copy of a loaded state entry: tensors get fresh float64 storage of their own, so
    the kernels' in-place updates never reach the dict they were loaded from."""
    if isinstance(value, tg.Tensor):
        return tg.from_numpy(np.array(value._value, dtype=np.float64, order="C"))
    if isinstance(value, np.ndarray):
        return tg.from_numpy(np.array(value, dtype=np.float64, order="C"))
    if isinstance(value, dict):
        return {k: _copy_state_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copy_state_value(v) for v in value)
    return deepcopy(value)


class Optimizer:
    """Base class: holds ``param_groups`` (dicts with every default filled in) and ``state``
    (a dict per parameter, created lazily by ``step``).

    ``params`` is an iterable of tensors, or of dicts each holding ``"params"`` and per-group
    overrides of ``defaults``.

    Example:
        >>> w, b = tg.zeros(3, requires_grad=True), tg.zeros(1, requires_grad=True)
        >>> opt = tg.optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.5}], lr=0.1)
        >>> [group["lr"] for group in opt.param_groups]
        [0.1, 0.5]
    """

    def __init__(self, params, defaults):
        self.defaults = defaults
        if isinstance(params, tg.Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                "dicts, but got " + _typename(params))
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        text = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"

    def add_param_group(self, param_group):
        """Append a group; hyperparameters it leaves out take the optimizer's defaults."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, tg.Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)

        for p in param_group["params"]:
            if not isinstance(p, tg.Tensor):
                raise TypeError(
                    "optimizer can only optimize Tensors, but one of the params is " + _typename(p))
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    "parameter group didn't specify a value of required optimization "
                    f"parameter {name}")
            param_group.setdefault(name, default)

        params = param_group["params"]
        if len(params) != len({id(p) for p in params}):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, "
                "this will cause an error", stacklevel=3)
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        """Drop every parameter's gradient (``set_to_none``), or zero it in place."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                    continue
                if p.grad.grad_fn is not None:
                    p.grad.detach_()
                else:
                    p.grad.requires_grad_(False)
                p.grad.zero_()

    def step(self, closure=None):
        """Update every parameter that has a gradient; returns ``closure()``'s loss if given."""
        raise NotImplementedError

    def _closure_loss(self, closure):
        if closure is None:
            return None
        with tg.enable_grad():
            return closure()

    def state_dict(self):
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}``.

        Parameters are numbered in order of appearance across groups; the state tensors are
        the optimizer's own (not copies), as in PyTorch.
        """
        index = {}
        packed_groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            packed_groups.append(packed)
        packed_state = {
            (index[id(k)] if isinstance(k, tg.Tensor) else k): v for k, v in self.state.items()}
        return {"state": packed_state, "param_groups": packed_groups}

    def load_state_dict(self, state_dict):
        """Restore hyperparameters and state saved by ``state_dict``; group and parameter
        counts must match. Loaded tensors are copied."""
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the size of "
                "optimizer's group")
        id_map = dict(zip(chain.from_iterable(s["params"] for s in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                state[id_map[k]] = _copy_state_value(v)
            else:
                state[k] = v
        for group, saved in zip(groups, saved_groups):
            saved["params"] = group["params"]
        self.__setstate__({"state": state, "param_groups": saved_groups})


# ---------------------------------------------------------------------------------------------
# SGD
# ---------------------------------------------------------------------------------------------


@kernel
def _sgd_kernel(p, g, buf, lr, momentum, dampening, weight_decay, nesterov, maximize, first):
    """One SGD step, in place on p (n,) and buf (n,) (buf may be empty when momentum == 0).

    ``first``: the momentum buffer starts as a copy of the step direction, not as zeros.
    """
    for i in range(p.size):
        d = -g[i] if maximize else g[i]
        if weight_decay != 0.0:
            d = d + weight_decay * p[i]
        if momentum != 0.0:
            if first:
                b = d
            else:
                b = buf[i] * momentum + (1.0 - dampening) * d
            buf[i] = b
            if nesterov:
                d = d + momentum * b
            else:
                d = b
        p[i] = p[i] + (-lr) * d


_EMPTY = np.empty(0)


class SGD(Optimizer):
    """Stochastic gradient descent, optionally with (Nesterov) momentum and weight decay.

    With ``g`` the gradient (negated if ``maximize``), each step does
    ``g += weight_decay * p``; ``b = momentum * b + (1 - dampening) * g`` (``b = g`` on the first
    step); ``g = g + momentum * b`` if ``nesterov`` else ``b``; ``p -= lr * g``.

    Example:
        >>> w = tg.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = tg.optim.SGD([w], lr=0.1)
        >>> (w * w).sum().backward()        # gradient 2 w
        >>> opt.step(); w
        tensor([ 0.8000, -1.6000], requires_grad=True)
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize}
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, momentum = float(group["lr"]), float(group["momentum"])
            dampening, weight_decay = float(group["dampening"]), float(group["weight_decay"])
            nesterov, maximize = bool(group["nesterov"]), bool(group["maximize"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                buf, first = _EMPTY, False
                if momentum != 0.0:
                    state = self.state[p]
                    if state.get("momentum_buffer") is None:
                        state["momentum_buffer"] = _buffer(p._value.shape)
                        first = True
                    buf = _flat(state["momentum_buffer"])
                _sgd_kernel(_flat(p), _flat_grad(p), buf, lr, momentum, dampening,
                            weight_decay, nesterov, maximize, first)
                p._bump_version()
        return loss


# ---------------------------------------------------------------------------------------------
# Adam / AdamW
# ---------------------------------------------------------------------------------------------


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
    before the Adam update, instead of adding ``weight_decay * p`` to the gradient.

    Example:
        >>> model = nn.Linear(3, 1)
        >>> opt = tg.optim.AdamW(model.parameters(), lr=1e-3)
        >>> opt.param_groups[0]["weight_decay"]
        0.01
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
