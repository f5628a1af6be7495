"""More names PyTorch programs use: ``nn.functional.pdist``, the deprecated ``upsample``
family and ``torch.range``, channel shuffle (function, module, native), the 3-D padding
modules, and the RNN base classes.  Each compared with PyTorch: values, dtypes, grad_fn
names, gradients, warnings and error texts."""
import warnings

import numpy as np
import pytest

import tapegrad as tg
from oracle import outcome, same, summary

torch = pytest.importorskip("torch")

GEN = np.random.default_rng(7)
M = GEN.standard_normal((5, 3))
M[3] = M[1]                      # one pair at distance zero
IMG = GEN.standard_normal((2, 3, 4, 5))


def with_grad(fn, value):
    """``fn(lib, x)`` for a float64 leaf ``x`` holding ``value``: its result, and ``x``'s
    gradient of the result weighted by 1, 2, 3, ... (so a wrong place shows)."""
    def run(m):
        x = m.tensor(value, dtype=m.float64, requires_grad=True)
        out = fn(m, x)
        weights = m.arange(1.0, out.numel() + 1, dtype=m.float64).reshape(out.shape)
        (out * weights).sum().backward()
        return out, x.grad
    return run


@pytest.mark.parametrize("p", [2, 1, 0, 3, 0.5, float("inf")])
def test_pdist_values_gradients_and_node(p):
    ours = same(with_grad(lambda m, x: m.nn.functional.pdist(x, p), M), torch)
    assert ours[1][0][5] == "PdistBackward0"
    same(with_grad(lambda m, x: m.pdist(x, p=p), M), torch)


def test_pdist_zero_norm_of_infinite_rows_has_zero_gradient():
    rows = [[0.0, 0.0], [3.0, 4.0], [float("inf"), 0.0]]
    same(with_grad(lambda m, x: m.nn.functional.pdist(x, 0), rows), torch)


@pytest.mark.parametrize("case", [
    lambda m: m.nn.functional.pdist(m.ones(3)),
    lambda m: m.nn.functional.pdist(m.ones(3, 2), -1.0),
    lambda m: m.nn.functional.pdist(m.ones(3, 2, dtype=m.int64)),
    lambda m: m.nn.functional.pdist(m.ones(3, dtype=m.int64), -1),
    lambda m: m.nn.functional.pdist(m.ones(1, 2, requires_grad=True)),
    lambda m: m.nn.functional.pdist(m.ones(0, 2)),
])
def test_pdist_edges_and_errors(case):
    same(case, torch)
