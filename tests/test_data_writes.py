"""A change made through ``.data`` counts no version, and PyTorch's graph holds the tensor's
memory: the backward of a graph recorded before the change reads the new values (the
textbook reason ``.data`` is unsafe), and so does every op after it.  tapegrad's tape holds
copies, so the copy on the tape being recorded takes the new values, and so do the records
that are views or hidden broadcasts of it.  Each program runs in tapegrad and in PyTorch;
the values and gradients must agree.  (Before, the copies kept the old values: a constant's
copy was even read again by later ops, whose gradients then mixed old and new values.)"""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

W = [[1.5, 2.5, 0.7, -0.4], [0.3, -0.4, 1.1, 2.0], [0.9, 1.7, -1.2, 0.6]]
X = [1.0, -1.0, 2.0, -2.0]


def _leaf_pow(m):
    w = m.tensor(W, dtype=m.float64, requires_grad=True)
    y = (w ** 2).sum()
    w.data.mul_(3.0)
    y.backward()
    return [y, w.grad]


def _leaf_setitem(m):
    w = m.tensor(W, dtype=m.float64, requires_grad=True)
    y = w.sin().sum()
    w.data[1, 2] = 5.0
    y.backward()
    return [y, w.grad]


def _leaf_copy(m):
    w = m.tensor(X, dtype=m.float64, requires_grad=True)
    x = m.tensor(X, dtype=m.float64, requires_grad=True)
    y = (w * x).sum()
    w.data.copy_(m.tensor([4.0, 3.0, 2.0, 1.0], dtype=m.float64))
    y.backward()
    return [y, w.grad, x.grad]


def _leaf_view(m):
    w = m.tensor(W, dtype=m.float64, requires_grad=True)
    x = m.tensor(X, dtype=m.float64, requires_grad=True)
    y = (w[0] * x).sum() + (w.t()[1] * x[:3]).sum()
    w.data.add_(1.0)
    y.backward()
    return [y, w.grad, x.grad]


def _leaf_broadcast(m):
    w = m.tensor(X, dtype=m.float64, requires_grad=True)
    x = m.tensor(W, dtype=m.float64, requires_grad=True)
    y = (w * x).sum()
    w.data.mul_(-2.0)
    y.backward()
    return [y, w.grad, x.grad]


def _leaf_then_new_op(m):
    w = m.tensor(X, dtype=m.float64, requires_grad=True)
    x = m.tensor(X, dtype=m.float64, requires_grad=True)
    y1 = (w * x).sum()
    w.data.add_(10.0)
    y2 = (w * x).sum()
    y2.backward()
    first = x.grad.clone()
    y1.backward()
    return [y1, y2, first, x.grad, w.grad]


def _view_of_leaf_data(m):
    w = m.tensor(W, dtype=m.float64, requires_grad=True)
    x = m.tensor(X, dtype=m.float64, requires_grad=True)
    y = (w * w).sum() + (w[0] * x).sum()
    w[0].data.mul_(2.0)
    y.backward()
    return [y, w.grad, x.grad]


def _constant(m):
    c = m.tensor(X, dtype=m.float64)
    x = m.tensor(X, dtype=m.float64, requires_grad=True)
    y1 = (c * x).sum()
    c.data.add_(10.0)
    y2 = (c * x).sum()
    y2.backward()
    first = x.grad.clone()
    y1.backward()
    return [y1, y2, first, x.grad]


def _constant_one_value(m):
    c = m.tensor([2.0], dtype=m.float64)
    x = m.tensor(W, dtype=m.float64, requires_grad=True)
    y = (c * x).sum()
    c.data.fill_(-3.0)
    y.backward()
    return [y, x.grad]


def _value(m):
    w = m.tensor(W, dtype=m.float64, requires_grad=True)
    x = m.tensor(X, dtype=m.float64, requires_grad=True)
    h = w * 1.0
    y = (h * x).sum() + (h[0] * x).sum()
    h.data.add_(1.0)
    y.backward()
    return [y, w.grad, x.grad]


def _value_from_an_older_graph(m):
    w = m.tensor(X, dtype=m.float64, requires_grad=True)
    x = m.tensor(X, dtype=m.float64, requires_grad=True)
    h = w * 2.0
    (w * 1.0).sum().backward()    # (a backward between: tapegrad records on a new tape)
    y = (h * x).sum()
    h.data.mul_(0.5)
    y.backward()
    return [y, w.grad, x.grad]


PROGRAMS = [_leaf_pow, _leaf_setitem, _leaf_copy, _leaf_view, _leaf_broadcast,
            _leaf_then_new_op, _view_of_leaf_data, _constant, _constant_one_value, _value,
            _value_from_an_older_graph]


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda f: f.__name__.strip("_"))
def test_a_change_through_data_reaches_the_backward_as_in_pytorch(prog):
    got, want = prog(tg), prog(torch)
    assert len(got) == len(want)
    for g, e in zip(got, want):
        np.testing.assert_allclose(np.array(g.tolist()), np.array(e.detach().tolist()),
                                   rtol=1e-13, atol=1e-15)
