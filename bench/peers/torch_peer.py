"""PyTorch, CPU, eager mode: the API tapegrad mirrors and the main reference column."""
from __future__ import annotations

import numpy as np
import torch

from bench.peers import Peer, StartupCase

# One intra-op and one inter-op thread (the environment variables alone leave the
# inter-op pool at the core count); float64 for anything created without a dtype.
torch.set_num_threads(1)
try:
    torch.set_num_interop_threads(1)
except RuntimeError:  # raises once any inter-op work has started; it is then fixed
    pass
torch.set_default_dtype(torch.float64)


def _leaf(array):
    return torch.tensor(np.asarray(array), dtype=torch.float64, requires_grad=True)


# --- W1 -------------------------------------------------------------------------------
def _w1_forward(x, blocks):
    y = x
    for _ in range(blocks):
        y = torch.sin(y) * 1.0001 + y * 0.1
        y = torch.tanh(y)
    return y.sum()


def _setup_w1(inputs):
    x, blocks = _leaf(inputs["x"]), inputs["blocks"]

    def call():
        x.grad = None
        loss = _w1_forward(x, blocks)
        loss.backward()
        return loss.item(), (x.grad.numpy(),)

    return call


def _split_w1(inputs):
    x, blocks = _leaf(inputs["x"]), inputs["blocks"]

    def forward():
        x.grad = None
        return _w1_forward(x, blocks)

    def backward(loss):
        loss.backward()
        return loss.item(), (x.grad.numpy(),)

    return forward, backward


# --- W2 / W3 --------------------------------------------------------------------------
def _mlp_setup(forward_loss, data_key):
    """A training step the PyTorch way: zero_grad, forward, backward, optimizer step."""

    def setup(inputs):
        X, data = torch.from_numpy(inputs["X"]), torch.from_numpy(inputs[data_key])
        params = [_leaf(p) for p in inputs["params"]]
        optimizer = torch.optim.SGD(params, lr=inputs["lr"])

        def call():
            optimizer.zero_grad()  # set_to_none: each backward makes fresh grad tensors
            loss = forward_loss(params, X, data)
            loss.backward()
            grads = tuple(p.grad.numpy() for p in params)  # views, never written again
            optimizer.step()
            return loss.item(), grads

        return call

    return setup


def _w2_loss(params, X, Y):
    W1, b1, W2, b2, W3, b3 = params
    h1 = torch.tanh(X @ W1 + b1)
    h2 = torch.tanh(h1 @ W2 + b2)
    out = h2 @ W3 + b3
    return ((out - Y) ** 2).mean()


def _w3_loss(params, X, labels):
    W1, b1, W2, b2, W3, b3 = params
    h1 = torch.relu(X @ W1 + b1)
    h2 = torch.relu(h1 @ W2 + b2)
    z = h2 @ W3 + b3
    rows = torch.arange(z.shape[0])
    return (torch.logsumexp(z, dim=1) - z[rows, labels]).mean()


# --- W4 -------------------------------------------------------------------------------
def _setup_w4(inputs):
    x = torch.from_numpy(inputs["x"]).requires_grad_(True)

    def call():
        x.grad = None
        loss = (torch.tanh(x) * x + torch.exp(-x * x)).sum()
        loss.backward()
        return loss.item(), (x.grad.numpy(),)

    return call


# --- W5 -------------------------------------------------------------------------------
def _setup_w5(inputs):
    params = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in inputs["p"]]
    a, b, c, d = params
    u0, v0 = torch.tensor(inputs["u0"]), torch.tensor(inputs["v0"])
    dt, steps = inputs["dt"], inputs["steps"]
    u_target, v_target = inputs["target"]

    def call():
        for p in params:
            p.grad = None
        u, v = u0, v0
        for _ in range(steps):
            uv = u * v
            du = a * u - b * uv
            dv = d * uv - c * v
            u = u + dt * du
            v = v + dt * dv
        loss = (u - u_target) ** 2 + (v - v_target) ** 2
        loss.backward()
        return loss.item(), tuple(p.grad.numpy() for p in params)

    return call


_STARTUP = """
import json
import torch
x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64, requires_grad=True)
(x * x).sum().backward()
print(json.dumps(x.grad.tolist()))
"""


def peers():
    return [Peer(
        name="torch",
        description="PyTorch CPU eager",
        versions={"torch": f"{torch.__version__} ({torch.get_num_threads()} intra-op / "
                           f"{torch.get_num_interop_threads()} inter-op thread)"},
        setups={"W1": _setup_w1, "W2": _mlp_setup(_w2_loss, "Y"),
                "W3": _mlp_setup(_w3_loss, "labels"), "W4": _setup_w4,
                "W5": _setup_w5},
        splits={"W1": _split_w1},
        startup=[StartupCase("torch", _STARTUP)],
    )]

