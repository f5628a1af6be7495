"""tapegrad, eager, through its PyTorch-like API: the code reads like ``torch_peer``.

The checkout's ``src/`` goes first on ``sys.path`` so the benchmark measures this working
tree, not some other installed copy. Importing this module imports tapegrad; if that fails
(missing, or broken by a syntax error) ``bench.peers.load_peers`` skips the peer with the
error as its note. A workload using an op tapegrad lacks fails in its setup or first call
and is reported as an error for that workload only.
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile

import numpy as np

from bench.machine import REPO_DIR  # noqa: E402  (stdlib only)

SRC_DIR = os.path.join(REPO_DIR, "src")
if os.path.isdir(SRC_DIR) and SRC_DIR not in sys.path:
    sys.path.insert(0, SRC_DIR)

import tapegrad as tg  # noqa: E402

if getattr(tg, "__file__", None) is None:  # a bare directory imports as a namespace package
    raise ImportError(f"tapegrad at {list(tg.__path__)} is not a package (no __init__.py)")

import tapegrad.optim as tg_optim  # noqa: E402
from bench.peers import Peer, StartupCase  # noqa: E402


def _leaf(array):
    return tg.tensor(np.array(array, dtype=np.float64), requires_grad=True)


# --- W1 -------------------------------------------------------------------------------
def _w1_forward(x, blocks):
    y = x
    for _ in range(blocks):
        y = tg.sin(y) * 1.0001 + y * 0.1
        y = tg.tanh(y)
    return y.sum()


def _split_w1(inputs):
    x, blocks = _leaf(inputs["x"]), inputs["blocks"]

    def forward():
        x.grad = None
        return _w1_forward(x, blocks)

    def backward(loss):
        loss.backward()
        return loss.item(), (x.grad.numpy(),)

    return forward, backward


def _setup_w1(inputs):
    forward, backward = _split_w1(inputs)
    return lambda: backward(forward())


# --- W2 / W3 --------------------------------------------------------------------------
def _mlp_setup(forward_loss, data_key, data_dtype):
    def setup(inputs):
        X = tg.tensor(inputs["X"])
        data = tg.tensor(inputs[data_key], dtype=data_dtype)
        params = [_leaf(p) for p in inputs["params"]]
        optimizer = tg_optim.SGD(params, lr=inputs["lr"])

        def call():
            optimizer.zero_grad()
            loss = forward_loss(params, X, data)
            loss.backward()
            grads = tuple(p.grad.numpy() for p in params)  # fresh arrays each backward
            optimizer.step()
            return loss.item(), grads

        return call

    return setup


def _w2_loss(params, X, Y):
    W1, b1, W2, b2, W3, b3 = params
    h1 = tg.tanh(X @ W1 + b1)
    h2 = tg.tanh(h1 @ W2 + b2)
    out = h2 @ W3 + b3
    return ((out - Y) ** 2).mean()


def _w3_loss(params, X, labels):
    W1, b1, W2, b2, W3, b3 = params
    h1 = tg.relu(X @ W1 + b1)
    h2 = tg.relu(h1 @ W2 + b2)
    z = h2 @ W3 + b3
    rows = tg.arange(z.shape[0])
    return (tg.logsumexp(z, dim=1) - z[rows, labels]).mean()


# --- W4 -------------------------------------------------------------------------------
def _setup_w4(inputs):
    x = _leaf(inputs["x"])

    def call():
        x.grad = None
        loss = (tg.tanh(x) * x + tg.exp(-x * x)).sum()
        loss.backward()
        return loss.item(), (x.grad.numpy(),)  # a fresh array: the grad was reset

    return call


# --- W5 -------------------------------------------------------------------------------
def _setup_w5(inputs):
    params = [tg.tensor(float(v), requires_grad=True) for v in inputs["p"]]
    a, b, c, d = params
    u0, v0 = tg.tensor(inputs["u0"]), tg.tensor(inputs["v0"])
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


# --- W6 -------------------------------------------------------------------------------
_STARTUP = """
import json
import tapegrad as tg
x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
(x * x).sum().backward()
print(json.dumps(x.grad.tolist()))
"""

# as a user's process runs: on every CPU of the machine (the harness pins its children to one)
_UNPINNED = """
import os
import re
os.sched_setaffinity(0, range(os.cpu_count()))
"""


def _temp_dir(prefix):
    """A temporary directory removed when the benchmark process exits."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _startup_cases():
    pythonpath = os.pathsep.join(p for p in (SRC_DIR, os.environ.get("PYTHONPATH")) if p)
    warm_dir = []  # made on first use, then filled by the untimed run and kept

    def warm():
        if not warm_dir:
            warm_dir.append(_temp_dir("tapegrad-bench-warm-"))
        return {"PYTHONPATH": pythonpath, "NUMBA_CACHE_DIR": warm_dir[0]}

    def cold():
        # a fresh, empty numba cache per run: every kernel compiles from scratch
        return {"PYTHONPATH": pythonpath, "NUMBA_CACHE_DIR": _temp_dir("tapegrad-bench-cold-")}

    return [StartupCase("tapegrad (warm cache)", _STARTUP, env=warm,
                        note="numba cache filled by the untimed run"),
            StartupCase("tapegrad (cold cache)", _STARTUP, env=cold,
                        note="fresh NUMBA_CACHE_DIR per run: full compile, on the one pinned "
                             "CPU (no compile helper: it needs a second CPU)",
                        quick_skip="compiling every kernel takes tens of seconds per run"),
            StartupCase("tapegrad (cold cache, 2 CPUs)", _UNPINNED + _STARTUP, env=cold,
                        note="fresh NUMBA_CACHE_DIR per run, the child unpinned: the compile "
                             "helper's second process compiles part of the kernels",
                        quick_skip="compiling every kernel takes seconds per run"),
            StartupCase("tapegrad demo (cold cache, 2 CPUs)", _UNPINNED + _DEMO, env=cold,
                        check=False, reading=("its first backward", _demo_first_backward),
                        note="the README's `python -m tapegrad`, whole process, fresh "
                             "NUMBA_CACHE_DIR per run, unpinned",
                        quick_skip="the demo takes ten seconds or more per run")]


_DEMO = """
import runpy
runpy.run_module("tapegrad", run_name="__main__")
"""
_FIRST_BACKWARD = re.compile(r"this first backward of the process took\s+([0-9.]+) ms")


def _demo_first_backward(stdout):
    """The demo's own timing of its first backward, in seconds (None if it printed none)."""
    found = _FIRST_BACKWARD.search(stdout)
    return float(found.group(1)) / 1e3 if found else None


# --- compiled: the same workloads through tapegrad.compile (record once, replay) ----------
def _compiled_w1(inputs):
    x, blocks = _leaf(inputs["x"]), inputs["blocks"]
    run = tg.compile(lambda x: _w1_forward(x, blocks))

    def call():
        x.grad = None
        loss = run(x)
        loss.backward()
        return loss.item(), (x.grad.numpy(),)

    return call


def _compiled_mlp(forward_loss, data_key, data_dtype):
    def setup(inputs):
        X = tg.tensor(inputs["X"])
        data = tg.tensor(inputs[data_key], dtype=data_dtype)
        params = [_leaf(p) for p in inputs["params"]]
        optimizer = tg_optim.SGD(params, lr=inputs["lr"])
        run = tg.compile(lambda X, data, *ps: forward_loss(list(ps), X, data))

        def call():
            optimizer.zero_grad()
            loss = run(X, data, *params)
            loss.backward()
            grads = tuple(p.grad.numpy() for p in params)
            optimizer.step()
            return loss.item(), grads

        return call

    return setup


def _compiled_w4(inputs):
    x = _leaf(inputs["x"])
    run = tg.compile(lambda x: (tg.tanh(x) * x + tg.exp(-x * x)).sum())

    def call():
        x.grad = None
        loss = run(x)
        loss.backward()
        return loss.item(), (x.grad.numpy(),)

    return call


def _compiled_w5(inputs):
    params = [tg.tensor(float(v), requires_grad=True) for v in inputs["p"]]
    u0, v0 = tg.tensor(inputs["u0"]), tg.tensor(inputs["v0"])
    dt, steps = inputs["dt"], inputs["steps"]
    u_target, v_target = inputs["target"]

    def ode(a, b, c, d):
        u, v = u0, v0
        for _ in range(steps):
            uv = u * v
            du = a * u - b * uv
            dv = d * uv - c * v
            u = u + dt * du
            v = v + dt * dv
        return (u - u_target) ** 2 + (v - v_target) ** 2

    run = tg.compile(ode)

    def call():
        for p in params:
            p.grad = None
        loss = run(*params)
        loss.backward()
        return loss.item(), tuple(p.grad.numpy() for p in params)

    return call


def peers():
    version = getattr(tg, "__version__", "?")
    compiled = Peer(
        name="tapegrad_compiled",
        description="tapegrad.compile: recorded once, forward and backward replayed compiled",
        versions={"tapegrad": f"{version} (BLAS: {tg.blas()})"},
        setups={"W1": _compiled_w1, "W2": _compiled_mlp(_w2_loss, "Y", tg.float64),
                "W3": _compiled_mlp(_w3_loss, "labels", tg.int64), "W4": _compiled_w4,
                "W5": _compiled_w5},
        # what "first call" means here: the kernels come from numba's on-disk cache
        notes={w: "first call = recording the tape (eager run under a trace); the first "
                  "replay in a fresh process: RC table" for w in ("W1", "W5")},
    )
    eager = Peer(
        name="tapegrad",
        description="tapegrad eager (flat tape, compiled backward sweep)",
        versions={"tapegrad": f"{version} ({os.path.dirname(tg.__file__)}; BLAS: {tg.blas()})"},
        setups={"W1": _setup_w1, "W2": _mlp_setup(_w2_loss, "Y", tg.float64),
                "W3": _mlp_setup(_w3_loss, "labels", tg.int64), "W4": _setup_w4,
                "W5": _setup_w5},
        splits={"W1": _split_w1},
        startup=_startup_cases(),
    )
    return [eager, compiled]
