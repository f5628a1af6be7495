"""NumPy by hand: forward and adjoint written with NumPy calls, no autodiff, no compiler.

This is the floor for code that stays in Python: every op is one NumPy call, so on tiny
tensors (W1) it shows the cost of a bare ufunc dispatch, and on big arrays (W4) NumPy's
SIMD transcendentals. W5 uses plain Python floats (NumPy scalars would only be slower).
"""
from __future__ import annotations

import numpy as np

from bench.peers import Peer, StartupCase


# --- W1 -------------------------------------------------------------------------------
def _setup_w1(inputs):
    x, blocks = inputs["x"], inputs["blocks"]

    def call():
        saved = []  # (block input, block output) per block: what the adjoint needs
        y = x
        for _ in range(blocks):
            y_in = y
            y = np.tanh(np.sin(y) * 1.0001 + y * 0.1)
            saved.append((y_in, y))
        loss = y.sum()
        g = np.ones_like(x)
        for y_in, y_out in reversed(saved):
            g = g * (1.0 - y_out * y_out)
            g = g * (np.cos(y_in) * 1.0001 + 0.1)
        return float(loss), (g,)

    return call


# --- W2 / W3 --------------------------------------------------------------------------
def _setup_w2(inputs):
    X, Y, lr = inputs["X"], inputs["Y"], inputs["lr"]
    W1, b1, W2, b2, W3, b3 = params = inputs["params"]

    def call():
        h1 = np.tanh(X @ W1 + b1)
        h2 = np.tanh(h1 @ W2 + b2)
        out = h2 @ W3 + b3
        diff = out - Y
        loss = np.mean(diff * diff)
        g_out = diff * (2.0 / diff.size)
        g_a2 = (g_out @ W3.T) * (1.0 - h2 * h2)
        g_a1 = (g_a2 @ W2.T) * (1.0 - h1 * h1)
        grads = (X.T @ g_a1, g_a1.sum(0), h1.T @ g_a2, g_a2.sum(0), h2.T @ g_out, g_out.sum(0))
        for p, g in zip(params, grads):
            p -= lr * g
        return float(loss), grads

    return call


def _setup_w3(inputs):
    X, labels, lr = inputs["X"], inputs["labels"], inputs["lr"]
    W1, b1, W2, b2, W3, b3 = params = inputs["params"]
    rows = np.arange(X.shape[0])

    def call():
        h1 = np.maximum(X @ W1 + b1, 0.0)
        h2 = np.maximum(h1 @ W2 + b2, 0.0)
        z = h2 @ W3 + b3
        m = z.max(axis=1, keepdims=True)
        e = np.exp(z - m)
        s = e.sum(axis=1, keepdims=True)
        loss = np.mean(m[:, 0] + np.log(s[:, 0]) - z[rows, labels])
        g_z = e / (s * len(rows))  # softmax / batch
        g_z[rows, labels] -= 1.0 / len(rows)
        g_a2 = (g_z @ W3.T) * (h2 > 0)  # relu' read off the saved output
        g_a1 = (g_a2 @ W2.T) * (h1 > 0)
        grads = (X.T @ g_a1, g_a1.sum(0), h1.T @ g_a2, g_a2.sum(0), h2.T @ g_z, g_z.sum(0))
        for p, g in zip(params, grads):
            p -= lr * g
        return float(loss), grads

    return call


# --- W4 -------------------------------------------------------------------------------
def _setup_w4(inputs):
    x = inputs["x"]

    def call():
        t = np.tanh(x)
        e = np.exp(-x * x)
        loss = np.sum(t * x + e)
        grad = (1.0 - t * t) * x + t - 2.0 * x * e
        return float(loss), (grad,)

    return call


# --- W5 -------------------------------------------------------------------------------
def _setup_w5(inputs):
    a, b, c, d = inputs["p"]
    u0, v0, dt, steps = inputs["u0"], inputs["v0"], inputs["dt"], inputs["steps"]
    u_target, v_target = inputs["target"]

    def call():
        states = []
        u, v = u0, v0
        for _ in range(steps):
            states.append((u, v))
            uv = u * v
            du = a * u - b * uv
            dv = d * uv - c * v
            u = u + dt * du
            v = v + dt * dv
        loss = (u - u_target) ** 2 + (v - v_target) ** 2
        gu, gv = 2.0 * (u - u_target), 2.0 * (v - v_target)
        ga = gb = gc = gd = 0.0
        for u, v in reversed(states):
            uv = u * v
            ga += gu * dt * u
            gb -= gu * dt * uv
            gc -= gv * dt * v
            gd += gv * dt * uv
            gu, gv = (gu * (1.0 + dt * (a - b * v)) + gv * dt * d * v,
                      gu * (-dt * b * u) + gv * (1.0 + dt * (d * u - c)))
        return loss, tuple(np.float64(g) for g in (ga, gb, gc, gd))

    return call


_STARTUP = """
import json
import numpy as np
x = np.array([[1.0, 2.0], [3.0, 4.0]])
loss = np.sum(x * x)
print(json.dumps((2.0 * x).tolist()))
"""


def peers():
    return [Peer(
        name="numpy",
        description="NumPy by hand: forward + adjoint as NumPy calls (W5: Python floats)",
        versions={"numpy": np.__version__},
        setups={"W1": _setup_w1, "W2": _setup_w2, "W3": _setup_w3, "W4": _setup_w4,
                "W5": _setup_w5},
        startup=[StartupCase("numpy", _STARTUP, note="hand-written gradient")],
        notes={"W5": "plain Python floats"},
    )]
