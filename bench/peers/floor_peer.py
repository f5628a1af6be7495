"""The hand-written floor: forward and adjoint of each workload written out in ``@njit``.

No graph, no tape, no dispatch: what any autodiff library would converge to if its
overhead were zero. Kernels are compiled without ``cache=True`` so that the first-call
column honestly includes the compile. Transcendentals (``math.tanh``, ``math.exp``) are
scalar libm calls in numba; NumPy 2.x uses SIMD kernels for the same functions, which is
why "numpy by hand" can beat this floor on W4.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from numba import njit

from bench.peers import Peer, StartupCase, package_version

# error_model='numpy' keeps division on the fast path (no ZeroDivisionError checks).
_jit = njit(error_model="numpy")


# --- W1: the 2000-op chain ------------------------------------------------------------
@_jit
def _w1_kernel(x, blocks):
    n = x.shape[0]
    y_in = np.empty((blocks, n))  # block inputs: sin' needs them
    y_out = np.empty((blocks, n))  # block outputs: tanh' = 1 - out**2 reuses them
    loss = 0.0
    for i in range(n):
        y = x[i]
        for k in range(blocks):
            y_in[k, i] = y
            y = math.tanh(math.sin(y) * 1.0001 + y * 0.1)
            y_out[k, i] = y
        loss += y
    grad = np.empty(n)
    for i in range(n):
        g = 1.0  # d sum / d y
        for k in range(blocks - 1, -1, -1):
            t = y_out[k, i]
            g *= 1.0 - t * t
            g *= math.cos(y_in[k, i]) * 1.0001 + 0.1
        grad[i] = g
    return loss, grad


def _setup_w1(inputs):
    x, blocks = inputs["x"], inputs["blocks"]

    def call():
        loss, grad = _w1_kernel(x, blocks)
        return loss, (grad,)

    return call


# --- W2/W3: MLP training steps --------------------------------------------------------
@_jit
def _add_bias(a, b):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            a[i, j] += b[j]
    return a


@_jit
def _col_sum(a):
    out = np.zeros(a.shape[1])
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            out[j] += a[i, j]
    return out


@_jit
def _tanh_inplace(a):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            a[i, j] = math.tanh(a[i, j])
    return a


@_jit
def _w2_step(X, Y, W1, b1, W2, b2, W3, b3, lr):
    h1 = _tanh_inplace(_add_bias(X @ W1, b1))
    h2 = _tanh_inplace(_add_bias(h1 @ W2, b2))
    out = _add_bias(h2 @ W3, b3)
    diff = out - Y
    loss = np.sum(diff * diff) / diff.size
    g_out = diff * (2.0 / diff.size)
    gW3 = h2.T @ g_out
    gb3 = _col_sum(g_out)
    g_a2 = (g_out @ W3.T) * (1.0 - h2 * h2)  # tanh' from the saved output
    gW2 = h1.T @ g_a2
    gb2 = _col_sum(g_a2)
    g_a1 = (g_a2 @ W2.T) * (1.0 - h1 * h1)
    gW1 = X.T @ g_a1
    gb1 = _col_sum(g_a1)
    W1 -= lr * gW1
    b1 -= lr * gb1
    W2 -= lr * gW2
    b2 -= lr * gb2
    W3 -= lr * gW3
    b3 -= lr * gb3
    return loss, gW1, gb1, gW2, gb2, gW3, gb3


@_jit
def _relu_inplace(a):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            if a[i, j] < 0.0:
                a[i, j] = 0.0
    return a


@_jit
def _relu_backward(g, h):
    # relu' is read off the saved output: h > 0 exactly where the input was > 0
    for i in range(g.shape[0]):
        for j in range(g.shape[1]):
            if h[i, j] <= 0.0:
                g[i, j] = 0.0
    return g


@_jit
def _cross_entropy(z, labels):
    """Mean softmax cross-entropy and its gradient with respect to the logits."""
    batch, classes = z.shape
    g = np.empty_like(z)
    loss = 0.0
    for i in range(batch):
        m = z[i, 0]
        for j in range(1, classes):
            m = max(m, z[i, j])
        s = 0.0
        for j in range(classes):
            g[i, j] = math.exp(z[i, j] - m)
            s += g[i, j]
        loss += m + math.log(s) - z[i, labels[i]]
        for j in range(classes):
            g[i, j] /= s * batch  # softmax / batch
        g[i, labels[i]] -= 1.0 / batch
    return loss / batch, g


@_jit
def _w3_step(X, labels, W1, b1, W2, b2, W3, b3, lr):
    h1 = _relu_inplace(_add_bias(X @ W1, b1))
    h2 = _relu_inplace(_add_bias(h1 @ W2, b2))
    z = _add_bias(h2 @ W3, b3)
    loss, g_z = _cross_entropy(z, labels)
    gW3 = h2.T @ g_z
    gb3 = _col_sum(g_z)
    g_a2 = _relu_backward(g_z @ W3.T, h2)
    gW2 = h1.T @ g_a2
    gb2 = _col_sum(g_a2)
    g_a1 = _relu_backward(g_a2 @ W2.T, h1)
    gW1 = X.T @ g_a1
    gb1 = _col_sum(g_a1)
    W1 -= lr * gW1
    b1 -= lr * gb1
    W2 -= lr * gW2
    b2 -= lr * gb2
    W3 -= lr * gW3
    b3 -= lr * gb3
    return loss, gW1, gb1, gW2, gb2, gW3, gb3


def _mlp_setup(kernel, data_key):
    def setup(inputs):
        X, data, lr = inputs["X"], inputs[data_key], inputs["lr"]
        params = inputs["params"]  # our own copy: updated in place

        def call():
            loss, *grads = kernel(X, data, *params, lr)
            return loss, tuple(grads)

        return call

    return setup


# --- W4: big elementwise --------------------------------------------------------------
@_jit
def _w4_kernel(x):
    grad = np.empty_like(x)  # a fresh array per call, as the workload asks
    loss = 0.0
    for i in range(x.shape[0]):
        xi = x[i]
        t = math.tanh(xi)
        e = math.exp(-xi * xi)
        loss += t * xi + e
        grad[i] = (1.0 - t * t) * xi + t - 2.0 * xi * e
    return loss, grad


def _setup_w4(inputs):
    x = inputs["x"]

    def call():
        loss, grad = _w4_kernel(x)
        return loss, (grad,)

    return call


# --- W5: Lotka-Volterra ---------------------------------------------------------------
@_jit
def _w5_kernel(a, b, c, d, u0, v0, dt, steps, u_target, v_target):
    us = np.empty(steps + 1)
    vs = np.empty(steps + 1)
    u, v = u0, v0
    for k in range(steps):
        us[k] = u
        vs[k] = v
        uv = u * v
        du = a * u - b * uv
        dv = d * uv - c * v
        u = u + dt * du
        v = v + dt * dv
    loss = (u - u_target) ** 2 + (v - v_target) ** 2
    gu = 2.0 * (u - u_target)
    gv = 2.0 * (v - v_target)
    ga = gb = gc = gd = 0.0
    for k in range(steps - 1, -1, -1):
        u = us[k]
        v = vs[k]
        uv = u * v
        # parameters: u' = u + dt*(a*u - b*uv), v' = v + dt*(d*uv - c*v)
        ga += gu * dt * u
        gb -= gu * dt * uv
        gc -= gv * dt * v
        gd += gv * dt * uv
        # state: chain rule through one Euler step
        gu, gv = (gu * (1.0 + dt * (a - b * v)) + gv * dt * d * v,
                  gu * (-dt * b * u) + gv * (1.0 + dt * (d * u - c)))
    return loss, ga, gb, gc, gd


def _setup_w5(inputs):
    a, b, c, d = inputs["p"]
    args = (inputs["u0"], inputs["v0"], inputs["dt"], inputs["steps"], *inputs["target"])

    def call():
        loss, *grads = _w5_kernel(a, b, c, d, *args)
        return loss, tuple(np.float64(g) for g in grads)

    return call


# --- W6: startup ----------------------------------------------------------------------
_STARTUP = """
import json
import numpy as np
from numba import njit

@njit
def loss_and_grad(x):
    loss = 0.0
    g = np.empty_like(x)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            loss += x[i, j] * x[i, j]
            g[i, j] = 2.0 * x[i, j]
    return loss, g

loss, g = loss_and_grad(np.array([[1.0, 2.0], [3.0, 4.0]]))
print(json.dumps(g.tolist()))
"""


def peers():
    return [Peer(
        name="floor",
        description="hand-written forward + adjoint in @njit (no autodiff)",
        versions={"numba": numba.__version__, "scipy": package_version("scipy")},
        setups={"W1": _setup_w1, "W2": _mlp_setup(_w2_step, "Y"),
                "W3": _mlp_setup(_w3_step, "labels"), "W4": _setup_w4, "W5": _setup_w5},
        startup=[StartupCase("floor", _STARTUP, note="numba, uncached compile")],
        notes={"W4": "scalar libm tanh/exp"},
    )]
