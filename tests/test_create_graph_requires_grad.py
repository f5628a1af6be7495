"""A gradient recorded with ``create_graph=True`` requires grad exactly when it depends on
something that does, as in PyTorch: the gradient of ``(c * x).sum()`` with respect to ``c``,
for data ``x``, is x summed -- constants only -- so it requires no grad, and differentiating
it again raises PyTorch's error.  (tapegrad's differentiable backward had read every value of
the tape through a recorded handle, constants included, so such gradients required grad.)
Each program runs in tapegrad and PyTorch: the same values, the same ``requires_grad``, and
the same outcome of a second ``grad``."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

PROGRAMS = {
    "scalar_times": lambda m, c, x: (3.0 * c).sum(),
    "times_data": lambda m, c, x: (c * x[0]).sum(),
    "times_broadcast_data": lambda m, c, x: (c * x).sum(),
    "one_value_times_data": lambda m, c, x: (c[:1] * x).sum(),
    "data_over": lambda m, c, x: (x[1] / c).sum(),
    "square": lambda m, c, x: (c * c).sum(),
    "square_times_data": lambda m, c, x: (c * x * c).sum(),
    "matmul_data": lambda m, c, x: (x @ c).sum(),
    "plus_data": lambda m, c, x: (c + x).sum(),
}


def run(m, name):
    c = m.tensor([2.0, -1.5, 0.5], dtype=m.float64, requires_grad=True)
    x = m.tensor([[1.0, 2.0, 3.0], [-0.5, 4.0, 1.5]], dtype=m.float64)
    (g,) = m.autograd.grad(PROGRAMS[name](m, c, x), c, create_graph=True)
    try:
        (h,) = m.autograd.grad(g.sum(), c)
        second = ("grads", np.array(h.tolist()))
    except RuntimeError as e:
        second = ("error", str(e))
    return np.array(g.tolist()), g.requires_grad, second


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_gradient_of_constants_requires_no_grad(name):
    got, want = run(tg, name), run(torch, name)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
    assert got[1] == want[1]
    assert got[2][0] == want[2][0]
    if want[2][0] == "grads":
        np.testing.assert_allclose(got[2][1], want[2][1], rtol=1e-13)
    else:
        assert got[2][1] == want[2][1]


def test_both_kinds_occur():
    assert run(torch, "times_data")[1] is False and run(torch, "square")[1] is True


NAMED = {
    "cube": lambda w: (w ** 3).sum(),
    "sin_times": lambda w: (w.sin() * w).sum(),
    "exp": lambda w: w.exp().sum(),
    "outer": lambda w: (w.reshape(-1, 1) @ w.reshape(1, -1)).sum(),
}


def _node_names(m, name, shape):
    """The node of a recorded gradient: autograd.grad's is the node that computed it;
    backward's ``.grad`` is a copy of it (``CopyBackwards``, as PyTorch's AccumulateGrad
    makes), then a sum with the next one."""
    def leaf():
        return m.full(shape, 1.5, dtype=m.float64, requires_grad=True)
    w = leaf()
    (g,) = m.autograd.grad(NAMED[name](w), w, create_graph=True)
    names = [type(g.grad_fn).__name__, g.shape == w.shape]
    w = leaf()
    NAMED[name](w).backward(create_graph=True)
    first = w.grad.grad_fn
    names += [type(first).__name__,
              [type(n).__name__ for n, _ in first.next_functions][:1]]
    NAMED[name](w).backward(create_graph=True)
    names.append(type(w.grad.grad_fn).__name__)
    names.append(w.grad.grad_fn.next_functions[0][0] is first)
    return names


@pytest.mark.filterwarnings("ignore:Using backward")
@pytest.mark.parametrize("shape", [(), (4,), (2, 3)])
@pytest.mark.parametrize("name", sorted(NAMED))
def test_recorded_gradient_nodes_as_pytorch(name, shape):
    # the differentiable backward works on flat views; its reshape to the leaf's shape
    # showed as a ViewBackward0 on top of every recorded gradient
    assert _node_names(tg, name, shape) == _node_names(torch, name, shape)
