"""Compiled update rules of RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam.

Each kernel updates one parameter and its state buffers in place, as flat float64 arrays,
in the operation order of PyTorch's single-tensor implementation (``torch.optim``'s path
for CPU tensors): ``s.mul_(a).addcmul_(g, g, value=v)`` is ``s * a + v * g * g``,
``p.addcdiv_(x, y, value=v)`` is ``p + v * x / y``, ``m.lerp_(g, w)`` is ``_lerp(m, g, w)``.
Step-dependent scalars (bias corrections, NAdam's momentum products) are computed by the
caller in Python, with PyTorch's expressions.

The entry points and the one rule they inline live in this file: numba's cache of an entry
point does not notice a change in a function it inlines from another file.
"""
import math

from .._config import inline, kernel


@inline
def _lerp(start, end, weight):
    """``torch.lerp``: the two-sided form is exact at both ends of the weight range."""
    if abs(weight) < 0.5:
        return start + weight * (end - start)
    return end - (end - start) * (1.0 - weight)


@inline
def _direction(g, p, weight_decay, maximize):
    """The gradient as the update reads it: negated for ``maximize``, then L2 decay added
    (``grad.add(param, alpha=weight_decay)``)."""
    d = -g if maximize else g
    if weight_decay != 0.0:
        d = d + weight_decay * p
    return d


@inline
def _maximum(a, b):
    """``torch.maximum``: a NaN on either side is the result."""
    if a != a:
        return a
    if b != b:
        return b
    return a if a >= b else b


@kernel
def rmsprop(p, g, square_avg, grad_avg, buf, lr, alpha, eps, weight_decay, momentum, centered,
            maximize):
    """One RMSprop step; ``grad_avg`` is read only when ``centered``, ``buf`` only when
    ``momentum > 0`` (either may be empty otherwise)."""
    for i in range(p.size):
        d = _direction(g[i], p[i], weight_decay, maximize)
        sq = square_avg[i] * alpha + (1.0 - alpha) * d * d
        square_avg[i] = sq
        if centered:
            ga = _lerp(grad_avg[i], d, 1.0 - alpha)
            grad_avg[i] = ga
            avg = math.sqrt(sq + (-1.0) * ga * ga)
        else:
            avg = math.sqrt(sq)
        avg = avg + eps
        if momentum > 0.0:
            b = buf[i] * momentum + d / avg
            buf[i] = b
            p[i] = p[i] + (-lr) * b
        else:
            p[i] = p[i] + (-lr) * d / avg


@kernel
def adagrad(p, g, state_sum, clr, eps, weight_decay, maximize):
    """One Adagrad step at the decayed learning rate ``clr``."""
    for i in range(p.size):
        d = _direction(g[i], p[i], weight_decay, maximize)
        s = state_sum[i] + d * d
        state_sum[i] = s
        p[i] = p[i] + (-clr) * d / (math.sqrt(s) + eps)


@kernel
def adadelta(p, g, square_avg, acc_delta, lr, rho, eps, weight_decay, maximize):
    """One Adadelta step."""
    for i in range(p.size):
        d = _direction(g[i], p[i], weight_decay, maximize)
        sq = square_avg[i] * rho + (1.0 - rho) * d * d
        square_avg[i] = sq
        std = math.sqrt(sq + eps)
        delta = math.sqrt(acc_delta[i] + eps) / std * d
        acc_delta[i] = acc_delta[i] * rho + (1.0 - rho) * delta * delta
        p[i] = p[i] + (-lr) * delta


@kernel
def adamax(p, g, exp_avg, exp_inf, clr, beta1, beta2, eps, weight_decay, maximize):
    """One Adamax step; ``clr = lr / (1 - beta1**t)``."""
    for i in range(p.size):
        d = _direction(g[i], p[i], weight_decay, maximize)
        m = _lerp(exp_avg[i], d, 1.0 - beta1)
        exp_avg[i] = m
        e = _maximum(exp_inf[i] * beta2, abs(d) + eps)
        exp_inf[i] = e
        p[i] = p[i] + (-clr) * m / e


@kernel
def nadam(p, g, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, maximize,
          bias_correction2, grad_coef, avg_coef):
    """One NAdam step: ``p += grad_coef * g / denom + avg_coef * m / denom`` with the
    coefficients from the momentum schedule (computed by the caller)."""
    decay = 1.0 - lr * weight_decay
    for i in range(p.size):
        d = -g[i] if maximize else g[i]
        pi = p[i]
        if weight_decay != 0.0:
            if decoupled:
                pi = pi * decay
            else:
                d = d + weight_decay * pi
        m = _lerp(exp_avg[i], d, 1.0 - beta1)
        exp_avg[i] = m
        v = exp_avg_sq[i] * beta2 + (1.0 - beta2) * d * d
        exp_avg_sq[i] = v
        denom = math.sqrt(v / bias_correction2) + eps
        pi = pi + grad_coef * d / denom
        p[i] = pi + avg_coef * m / denom


@kernel
def radam(p, g, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, maximize,
          bias_correction1, bias_correction2_sqrt, rectify, rect):
    """One RAdam step.  ``rect`` is the variance rectification, used when ``rectify``; while
    the approximated moving-average length is too short (rho_t <= 5) the step is plain
    momentum, ``lr * m / bias_correction1``."""
    decay = 1.0 - lr * weight_decay
    for i in range(p.size):
        d = -g[i] if maximize else g[i]
        pi = p[i]
        if weight_decay != 0.0:
            if decoupled:
                pi = pi * decay
            else:
                d = d + weight_decay * pi
        m = _lerp(exp_avg[i], d, 1.0 - beta1)
        exp_avg[i] = m
        v = exp_avg_sq[i] * beta2 + (1.0 - beta2) * d * d
        exp_avg_sq[i] = v
        corrected = m / bias_correction1
        if rectify:
            # PyTorch writes ``bias_correction2**0.5 / (sqrt(v) + eps)`` with a number on the
            # left, which torch evaluates as ``reciprocal(sqrt(v) + eps) * number``
            adaptive = (1.0 / (math.sqrt(v) + eps)) * bias_correction2_sqrt
            step = corrected * lr * adaptive * rect
        else:
            step = corrected * lr
        p[i] = pi + (-1.0) * step
