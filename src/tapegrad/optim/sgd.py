"""SGD, with PyTorch's update rule, hyperparameter checks and state layout."""
from .._config import kernel
from .optimizer import (_EMPTY, Optimizer, _buffer, _check_flags, _check_fused,
                        _fill_group_defaults, _flat, _flat_grad)

__all__ = ["SGD"]


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
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize,
                    "foreach": foreach, "differentiable": differentiable, "fused": fused}
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        # (the kernel choices: tapegrad's compiled update takes their place; see Adam)
        _check_fused(fused, foreach, differentiable)
        _check_flags("SGD", differentiable)
        super().__init__(params, defaults)
        _fill_group_defaults(self, foreach=None, differentiable=False, fused=None)

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
