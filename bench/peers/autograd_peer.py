"""HIPS autograd: traces NumPy calls through boxed values, then sweeps its graph of VJPs."""
from __future__ import annotations

import functools

import autograd
import autograd.numpy as anp
import numpy as np
from autograd.scipy.special import logsumexp

from bench.peers import Peer, StartupCase, package_version


def _w1_loss(x, blocks):
    y = x
    for _ in range(blocks):
        y = anp.sin(y) * 1.0001 + y * 0.1
        y = anp.tanh(y)
    return anp.sum(y)


def _setup_w1(inputs):
    x = inputs["x"]
    value_and_grad = autograd.value_and_grad(functools.partial(_w1_loss, blocks=inputs["blocks"]))

    def call():
        loss, g = value_and_grad(x)
        return float(loss), (g,)

    return call


def _split_w1(inputs):
    x = inputs["x"]
    make_vjp = autograd.make_vjp(functools.partial(_w1_loss, blocks=inputs["blocks"]))

    def forward():
        return make_vjp(x)  # (vjp, loss): evaluates and records

    def backward(handle):
        vjp, loss = handle
        return float(loss), (vjp(1.0),)

    return forward, backward


def _w2_loss(params, X, Y):
    W1, b1, W2, b2, W3, b3 = params
    h1 = anp.tanh(anp.dot(X, W1) + b1)
    h2 = anp.tanh(anp.dot(h1, W2) + b2)
    out = anp.dot(h2, W3) + b3
    return anp.mean((out - Y) ** 2)


def _w3_loss(params, X, labels):
    W1, b1, W2, b2, W3, b3 = params
    h1 = anp.maximum(anp.dot(X, W1) + b1, 0.0)
    h2 = anp.maximum(anp.dot(h1, W2) + b2, 0.0)
    z = anp.dot(h2, W3) + b3
    return anp.mean(logsumexp(z, axis=1) - z[np.arange(z.shape[0]), labels])


def _mlp_setup(loss_fn, data_key):
    def setup(inputs):
        X, data, lr, params = inputs["X"], inputs[data_key], inputs["lr"], inputs["params"]
        value_and_grad = autograd.value_and_grad(loss_fn)

        def call():
            loss, grads = value_and_grad(params, X, data)
            for p, g in zip(params, grads):
                p -= lr * g
            return float(loss), tuple(grads)

        return call

    return setup


def _setup_w4(inputs):
    x = inputs["x"]
    value_and_grad = autograd.value_and_grad(lambda x: anp.sum(anp.tanh(x) * x + anp.exp(-x * x)))

    def call():
        loss, g = value_and_grad(x)
        return float(loss), (g,)

    return call


def _setup_w5(inputs):
    p = tuple(float(v) for v in inputs["p"])
    u0, v0, dt, steps = inputs["u0"], inputs["v0"], inputs["dt"], inputs["steps"]
    u_target, v_target = inputs["target"]

    def loss_fn(p):
        a, b, c, d = p
        u, v = u0, v0
        for _ in range(steps):
            uv = u * v
            du = a * u - b * uv
            dv = d * uv - c * v
            u = u + dt * du
            v = v + dt * dv
        return (u - u_target) ** 2 + (v - v_target) ** 2

    value_and_grad = autograd.value_and_grad(loss_fn)

    def call():
        loss, grads = value_and_grad(p)
        return float(loss), tuple(np.float64(g) for g in grads)

    return call


_STARTUP = """
import json
import autograd
import autograd.numpy as anp
x = anp.array([[1.0, 2.0], [3.0, 4.0]])
g = autograd.grad(lambda x: anp.sum(x * x))(x)
print(json.dumps(g.tolist()))
"""


def peers():
    return [Peer(
        name="autograd",
        description="HIPS autograd",
        versions={"autograd": package_version("autograd")},
        setups={"W1": _setup_w1, "W2": _mlp_setup(_w2_loss, "Y"),
                "W3": _mlp_setup(_w3_loss, "labels"), "W4": _setup_w4, "W5": _setup_w5},
        splits={"W1": _split_w1},
        startup=[StartupCase("autograd", _STARTUP)],
    )]
