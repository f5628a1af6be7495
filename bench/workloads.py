"""Workload definitions and their inputs (the table in ``bench/README.md``).

Every library converts the *same* NumPy arrays, drawn here from ``default_rng(seed)`` in a
fixed order (written next to each draw), so gradients can be cross-checked before anything
is timed.

``make_inputs(name, size=None)`` returns a fresh dict of inputs. ``size`` overrides the
workload's scaling parameter (W1: number of ops, W4: number of elements, W5: number of
steps); the default is the documented size.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Workload:
    """What a workload is called and how its figures are normalised."""

    name: str
    title: str
    unit: str  # what one call is: "call", "step"
    # scaling parameter: its name, its documented value, and how many "units" of work a
    # call does (W1 reports µs per op, W4 ns per element, W5 µs per step)
    size_name: str | None = None
    default_size: int | None = None
    per_unit: str | None = None
    in_process: bool = True  # W6 runs in fresh subprocesses instead


WORKLOADS: dict[str, Workload] = {
    "W1": Workload("W1", "per-op overhead on tiny tensors (2000 elementwise ops)", "call",
                   size_name="ops", default_size=2000, per_unit="op"),
    "W2": Workload("W2", "small MLP training step (64x32 -> 64 -> 64 -> 1, tanh)", "step"),
    "W3": Workload("W3", "medium MLP training step (256x784 -> 256 -> 256 -> 10, relu, "
                         "softmax cross-entropy)", "step"),
    "W4": Workload("W4", "big elementwise: sum(tanh(x)*x + exp(-x*x)), x of 10^7", "call",
                   size_name="elements", default_size=10**7, per_unit="element"),
    "W5": Workload("W5", "scalar-heavy loop: Lotka-Volterra, explicit Euler, 1000 steps",
                   "call", size_name="steps", default_size=1000, per_unit="step"),
    "W6": Workload("W6", "startup: fresh interpreter, import, grad of sum(x*x)", "process",
                   in_process=False),
}

# W1: the 5-op block `y = sin(y)*1.0001 + y*0.1; y = tanh(y)` is repeated.
W1_OPS_PER_BLOCK = 5
# W2/W3: learning rate of the SGD update that ends every step.
LEARNING_RATE = 0.01
# W5 constants.
W5_PARAMS = (1.5, 1.0, 3.0, 1.0)  # (a, b, c, d)
W5_U0 = W5_V0 = 1.0
W5_DT = 0.01
W5_TARGET = (1.5, 0.5)  # loss = (u_T - 1.5)**2 + (v_T - 0.5)**2


def make_inputs(name: str, size: int | None = None) -> dict:
    """Fresh inputs for workload ``name``; ``size`` overrides its scaling parameter."""
    return _MAKERS[name](size)


def _w1(size):
    ops = 2000 if size is None else int(size)
    if ops % W1_OPS_PER_BLOCK:
        raise ValueError(f"W1 chain length must be a multiple of {W1_OPS_PER_BLOCK}, got {ops}")
    return {"x": np.array([0.5]), "blocks": ops // W1_OPS_PER_BLOCK, "ops": ops}


def _w2(size):
    rng = np.random.default_rng(2)
    # draw order: X, Y, W1, b1, W2, b2, W3, b3
    X = rng.standard_normal((64, 32))
    Y = rng.standard_normal((64, 1))
    params = []
    for fan_in, fan_out in ((32, 64), (64, 64), (64, 1)):
        W = rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)
        b = 0.1 * rng.standard_normal(fan_out)
        params += [W, b]
    return {"X": X, "Y": Y, "params": params, "lr": LEARNING_RATE}


def _w3(size):
    rng = np.random.default_rng(3)
    # draw order: X, labels, W1, b1, W2, b2, W3, b3
    X = rng.standard_normal((256, 784))
    labels = rng.integers(0, 10, size=256)
    params = []
    for fan_in, fan_out in ((784, 256), (256, 256), (256, 10)):
        W = rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)
        b = 0.01 * rng.standard_normal(fan_out)
        params += [W, b]
    return {"X": X, "labels": labels, "params": params, "lr": LEARNING_RATE}


def _w4(size):
    n = 10**7 if size is None else int(size)
    rng = np.random.default_rng(4)
    return {"x": rng.standard_normal(n)}


def _w5(size):
    steps = 1000 if size is None else int(size)
    return {"p": W5_PARAMS, "u0": W5_U0, "v0": W5_V0, "dt": W5_DT, "steps": steps,
            "target": W5_TARGET}


def _w6(size):
    return {"x": [[1.0, 2.0], [3.0, 4.0]]}


_MAKERS = {"W1": _w1, "W2": _w2, "W3": _w3, "W4": _w4, "W5": _w5, "W6": _w6}


def work_units(name: str, inputs: dict) -> int | None:
    """How many units (ops, elements, steps) one call of ``name`` does, for per-unit figures."""
    if name == "W1":
        return inputs["ops"]
    if name == "W4":
        return inputs["x"].size
    if name == "W5":
        return inputs["steps"]
    return None
