"""micrograd: one Python object per scalar, one closure per op, a recursive topological sort.

micrograd has no ``sin``/``tanh``; they are added below as closure nodes in micrograd's own
style (like its ``relu``). W3 and W4 are not defined for it: a W3 step would build ~10^8
scalar nodes. ``Value.backward`` sorts the graph recursively, and W1/W5 graphs are
thousands of nodes deep, so the recursion limit is raised (Python 3.11+ keeps pure-Python
recursion off the C stack).
"""
from __future__ import annotations

import math
import sys

import numpy as np
from micrograd.engine import Value

from bench.peers import Peer, StartupCase, package_version

_RECURSION_LIMIT = 1_000_000


def _deep_recursion():
    if sys.getrecursionlimit() < _RECURSION_LIMIT:
        sys.setrecursionlimit(_RECURSION_LIMIT)


def sin(x: Value) -> Value:
    out = Value(math.sin(x.data), (x,), "sin")

    def _backward():
        x.grad += math.cos(x.data) * out.grad
    out._backward = _backward
    return out


def tanh(x: Value) -> Value:
    out = Value(math.tanh(x.data), (x,), "tanh")

    def _backward():
        x.grad += (1.0 - out.data ** 2) * out.grad  # tanh' from the saved output
    out._backward = _backward
    return out


# --- W1 -------------------------------------------------------------------------------
def _split_w1(inputs):
    _deep_recursion()
    xs = [Value(float(v)) for v in inputs["x"]]
    blocks = inputs["blocks"]

    def forward():
        total = None
        for x in xs:
            x.grad = 0.0
            y = x
            for _ in range(blocks):
                y = sin(y) * 1.0001 + y * 0.1
                y = tanh(y)
            total = y if total is None else total + y
        return total

    def backward(loss):
        loss.backward()
        return loss.data, (np.array([x.grad for x in xs]),)

    return forward, backward


def _setup_w1(inputs):
    forward, backward = _split_w1(inputs)
    return lambda: backward(forward())


# --- W2 -------------------------------------------------------------------------------
def _setup_w2(inputs):
    X = inputs["X"].tolist()
    Y = inputs["Y"][:, 0].tolist()
    lr = inputs["lr"]
    shapes = [p.shape for p in inputs["params"]]
    # parameters as nested lists of Values, so the update touches the same objects
    params = [[Value(v) for v in p.ravel().tolist()] for p in inputs["params"]]
    W1, b1, W2, b2, W3, b3 = params

    def layer(h, W, b, fan_out, act):
        # micrograd's Neuron: sum(w_i * x_i) + b, column j of W is neuron j
        fan_in = len(h)
        return [act(sum((W[i * fan_out + j] * h[i] for i in range(fan_in)), b[j]))
                for j in range(fan_out)]

    def call():
        for p in params:
            for v in p:
                v.grad = 0.0
        loss = 0.0
        for x, y in zip(X, Y):
            h1 = layer(x, W1, b1, 64, tanh)
            h2 = layer(h1, W2, b2, 64, tanh)
            (out,) = layer(h2, W3, b3, 1, lambda v: v)
            loss = loss + (out - y) ** 2
        loss = loss * (1.0 / len(X))
        loss.backward()
        grads = tuple(np.array([v.grad for v in p]).reshape(shape)
                      for p, shape in zip(params, shapes))
        for p in params:
            for v in p:
                v.data -= lr * v.grad
        return loss.data, grads

    return call


# --- W5 -------------------------------------------------------------------------------
def _setup_w5(inputs):
    _deep_recursion()
    params = [Value(float(v)) for v in inputs["p"]]
    a, b, c, d = params
    u0, v0, dt, steps = inputs["u0"], inputs["v0"], inputs["dt"], inputs["steps"]
    u_target, v_target = inputs["target"]

    def call():
        for p in params:
            p.grad = 0.0
        u, v = Value(u0), Value(v0)
        for _ in range(steps):
            uv = u * v
            du = a * u - b * uv
            dv = d * uv - c * v
            u = u + dt * du
            v = v + dt * dv
        loss = (u - u_target) ** 2 + (v - v_target) ** 2
        loss.backward()
        return loss.data, tuple(np.float64(p.grad) for p in params)

    return call


_STARTUP = """
import json
from micrograd.engine import Value
x = [[Value(1.0), Value(2.0)], [Value(3.0), Value(4.0)]]
loss = sum((v * v for row in x for v in row), Value(0.0))
loss.backward()
print(json.dumps([[v.grad for v in row] for row in x]))
"""


def peers():
    return [Peer(
        name="micrograd",
        description="micrograd scalar Values (+ sin/tanh nodes in its style)",
        versions={"micrograd": package_version("micrograd")},
        setups={"W1": _setup_w1, "W2": _setup_w2, "W5": _setup_w5},
        splits={"W1": _split_w1},
        startup=[StartupCase("micrograd", _STARTUP)],
        notes={"W3": "not defined (~10^8 scalar nodes per step)", "W4": "not defined"},
        quick_skip={"W2": "one step builds ~10^6 scalar nodes and takes 15-30 s"},
    )]
