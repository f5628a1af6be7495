"""A gradient computed with ``create_graph=True`` through relu, leaky_relu, hardtanh, the
shrinks or abs stays connected to the op's input, whose derivative through it is 0, as in
PyTorch (its threshold_backward, leaky_relu_backward, ... differentiate to zeros for the
input): a parameter reached only through such an op's mask gets a zero gradient, not None,
and ``grad`` of it does not raise.  A gradient penalty of a ReLU critic is the usual case."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

ACTIVATIONS = {
    "relu": lambda L, x: L.relu(x),
    "relu module": lambda L, x: L.nn.ReLU()(x),
    "leaky_relu": lambda L, x: L.nn.functional.leaky_relu(x, 0.1),
    "leaky_relu_": lambda L, x: L.nn.functional.leaky_relu(x * 1.0, 0.1, inplace=True),
    "hardtanh": lambda L, x: L.nn.functional.hardtanh(x, -0.7, 0.4),
    "relu6": lambda L, x: L.nn.functional.relu6(x * 4.0),
    "softshrink": lambda L, x: L.nn.functional.softshrink(x, 0.5),
    "hardshrink": lambda L, x: L.nn.functional.hardshrink(x, 0.5),
    "abs": lambda L, x: x.abs(),
    "clamp": lambda L, x: x.clamp(-0.5, 0.5),      # (not connected in PyTorch either)
}


def _second_order(L, act, xv, wv):
    x = L.tensor(xv, requires_grad=True)
    b = L.tensor(0.3, requires_grad=True)
    y = (act(L, x * 2.0 + b) * L.tensor(wv)).sum()
    g, = L.autograd.grad(y, x, create_graph=True)
    first = g.detach().numpy().copy()
    try:
        second = L.autograd.grad((g ** 2).sum(), [x, b], allow_unused=True)
    except RuntimeError as e:   # (g does not depend on x or b at all: clamp's)
        return first, str(e).replace("torch", "tapegrad")
    return first, [None if t is None else _values(t) for t in second]


def _values(t):
    # (PyTorch's abs gives its zeros as a ZeroTensor, whose values cannot be read)
    if getattr(t, "_is_zerotensor", lambda: False)():
        return np.zeros(tuple(t.shape))
    return t.detach().numpy().copy()


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_gradient_of_a_masked_gradient_is_zero_not_none(name):
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal(6), rng.standard_normal(6)
    want_first, want = _second_order(torch, ACTIVATIONS[name], xv, wv)
    got_first, got = _second_order(tg, ACTIVATIONS[name], xv, wv)
    np.testing.assert_array_equal(got_first, want_first)
    if isinstance(want, str):
        assert got == want
        return
    assert [t is None for t in got] == [t is None for t in want]
    for a, b in zip(got, want):
        if b is not None:
            np.testing.assert_array_equal(a, b)


def test_gradient_penalty_steps_every_parameter_as_pytorch():
    """A WGAN-GP critic step on the penalty alone: the first layer's bias gets a zero
    gradient (not None), so RMSprop with momentum moves it as PyTorch's does."""
    results = []
    for L in (torch, tg):
        L.manual_seed(3)
        critic = L.nn.Sequential(L.nn.Linear(2, 8), L.nn.LeakyReLU(0.2), L.nn.Linear(8, 1))
        critic.double()
        opt = L.optim.RMSprop(critic.parameters(), lr=1e-2, momentum=0.5)
        points = L.tensor(np.linspace(-1, 1, 12).reshape(6, 2), requires_grad=True)
        for _ in range(3):
            out = critic(points)
            grads, = L.autograd.grad(out, points, grad_outputs=L.ones_like(out),
                                     create_graph=True)
            penalty = ((grads.norm(2, dim=1) - 1) ** 2).mean()
            opt.zero_grad()
            penalty.backward()
            opt.step()
        results.append([(p.grad is None, p.detach().numpy().copy())
                        for p in critic.parameters()])
    for (none_t, want), (none_g, got) in zip(*results):
        assert none_g == none_t
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
