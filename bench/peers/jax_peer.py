"""JAX on CPU, two peers: ``jax_eager`` (op-by-op dispatch) and ``jax_jit`` (one XLA program).

Both differentiate the same Python functions with ``jax.value_and_grad``; ``jax_jit`` wraps
the whole call (forward, backward and, for W2/W3, the SGD update) in ``jax.jit``. W5 under
jit uses ``jax.lax.fori_loop`` with the same 11 ops per step: jit of the unrolled 1000-step
loop takes minutes to compile. A fresh ``jax.jit`` object per setup means the first call
always includes tracing and compilation.

XLA's thread pool is limited by ``XLA_FLAGS`` set in ``bench.run`` before this import.
"""
from __future__ import annotations

import functools

import jax

jax.config.update("jax_enable_x64", True)  # float64, as every other peer

import jax.numpy as jnp  # noqa: E402  (after enabling x64, so defaults are float64)
import numpy as np  # noqa: E402

from bench.peers import Peer, StartupCase, package_version  # noqa: E402


# --- the functions both modes differentiate ------------------------------------------
def _w1_loss(x, blocks):
    y = x
    for _ in range(blocks):
        y = jnp.sin(y) * 1.0001 + y * 0.1
        y = jnp.tanh(y)
    return jnp.sum(y)


def _w2_loss(params, X, Y):
    W1, b1, W2, b2, W3, b3 = params
    h1 = jnp.tanh(X @ W1 + b1)
    h2 = jnp.tanh(h1 @ W2 + b2)
    out = h2 @ W3 + b3
    return jnp.mean((out - Y) ** 2)


def _w3_loss(params, X, labels):
    W1, b1, W2, b2, W3, b3 = params
    h1 = jax.nn.relu(X @ W1 + b1)
    h2 = jax.nn.relu(h1 @ W2 + b2)
    z = h2 @ W3 + b3
    return jnp.mean(jax.nn.logsumexp(z, axis=1) - z[jnp.arange(z.shape[0]), labels])


def _w4_loss(x):
    return jnp.sum(jnp.tanh(x) * x + jnp.exp(-x * x))


def _w5_euler_step(a, b, c, d, dt, u, v):
    uv = u * v
    du = a * u - b * uv
    dv = d * uv - c * v
    return u + dt * du, v + dt * dv


def _w5_loss_python_loop(p, u, v, dt, steps, target):
    a, b, c, d = p
    for _ in range(steps):
        u, v = _w5_euler_step(a, b, c, d, dt, u, v)
    return (u - target[0]) ** 2 + (v - target[1]) ** 2


def _w5_loss_fori_loop(p, u, v, dt, steps, target):
    a, b, c, d = p
    u, v = jax.lax.fori_loop(0, steps, lambda _, s: _w5_euler_step(a, b, c, d, dt, *s), (u, v))
    return (u - target[0]) ** 2 + (v - target[1]) ** 2


# --- setups, parametrised by the mode -------------------------------------------------
def _to_numpy(grads):
    return tuple(np.asarray(g) for g in grads)


def _make_setups(jit: bool):
    wrap = jax.jit if jit else (lambda f: f)

    def setup_w1(inputs):
        x = jnp.asarray(inputs["x"])
        loss_fn = functools.partial(_w1_loss, blocks=inputs["blocks"])
        value_and_grad = wrap(jax.value_and_grad(loss_fn))

        def call():
            loss, g = value_and_grad(x)
            return float(loss), (np.asarray(g),)

        return call

    def mlp_setup(loss_fn, data_key):
        def setup(inputs):
            X, data, lr = jnp.asarray(inputs["X"]), jnp.asarray(inputs[data_key]), inputs["lr"]

            def step(params, X, data):
                loss, grads = jax.value_and_grad(loss_fn)(params, X, data)
                return loss, grads, tuple(p - lr * g for p, g in zip(params, grads))

            step = wrap(step)
            state = [tuple(jnp.asarray(p) for p in inputs["params"])]

            def call():
                loss, grads, state[0] = step(state[0], X, data)
                return float(loss), _to_numpy(grads)

            return call

        return setup

    def setup_w4(inputs):
        x = jnp.asarray(inputs["x"])
        value_and_grad = wrap(jax.value_and_grad(_w4_loss))

        def call():
            loss, g = value_and_grad(x)
            return float(loss), (np.asarray(g),)

        return call

    def setup_w5(inputs):
        p = tuple(jnp.asarray(v) for v in inputs["p"])
        u0, v0 = jnp.asarray(inputs["u0"]), jnp.asarray(inputs["v0"])
        loss_fn = _w5_loss_fori_loop if jit else _w5_loss_python_loop
        value_and_grad = wrap(jax.value_and_grad(functools.partial(
            loss_fn, dt=inputs["dt"], steps=inputs["steps"], target=inputs["target"])))

        def call():
            loss, grads = value_and_grad(p, u0, v0)
            return float(loss), _to_numpy(grads)

        return call

    return {"W1": setup_w1, "W2": mlp_setup(_w2_loss, "Y"), "W3": mlp_setup(_w3_loss, "labels"),
            "W4": setup_w4, "W5": setup_w5}


def _split_w1(inputs):
    """Eager forward (``jax.vjp`` evaluates and records the linearisation) and backward."""
    x = jnp.asarray(inputs["x"])
    f = functools.partial(_w1_loss, blocks=inputs["blocks"])

    def forward():
        return jax.vjp(f, x)

    def backward(handle):
        loss, vjp = handle
        (g,) = vjp(jnp.ones_like(loss))
        return float(loss), (np.asarray(g),)

    return forward, backward


_STARTUP = """
import json
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
x = jnp.array([[1.0, 2.0], [3.0, 4.0]])
g = {wrap}(jax.grad(lambda x: jnp.sum(x * x)))(x)
print(json.dumps(np.asarray(g).tolist()))
"""


def peers():
    versions = {"jax": jax.__version__, "jaxlib": package_version("jaxlib")}
    return [
        Peer(name="jax_jit", description="jax.jit(jax.value_and_grad(...)), CPU",
             versions=versions, setups=_make_setups(jit=True),
             startup=[StartupCase("jax_jit", _STARTUP.format(wrap="jax.jit"))],
             notes={"W5": "lax.fori_loop", "W1": "unrolled chain, compile in first call"},
             quick_skip={"W1": "compiling the unrolled 2000-op chain takes 5-25 s"},
             compile_grows_with_size=("W1",)),
        Peer(name="jax_eager", description="jax.value_and_grad without jit, CPU",
             versions=versions, setups=_make_setups(jit=False), splits={"W1": _split_w1},
             startup=[StartupCase("jax_eager", _STARTUP.format(wrap=""))],
             quick_skip={"W5": "one call takes seconds (11000 eager ops under autodiff)"}),
    ]
