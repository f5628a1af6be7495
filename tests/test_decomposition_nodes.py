"""Ops that PyTorch composes from others in C++ show its graph here too: the result's node and
the nodes it lists, the values, the gradient, or the error's type and text.  trapezoid and
cumulative_trapezoid follow ATen's formulas (their rounding included); repeat_interleave by a
number is an expand, a copy and a flatten, by a tensor of counts an index_select."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg

torch = pytest.importorskip("torch")

Y = np.random.default_rng(5).standard_normal((6, 7))
X_STEPS = np.sort(np.random.default_rng(6).standard_normal(7))
X_GRID = np.sort(np.random.default_rng(7).standard_normal((6, 7)), 1)

PROGRAMS = {
    "trapezoid": lambda m, y: m.trapezoid(y),
    "trapezoid_dx": lambda m, y: m.trapezoid(y, dx=0.37),
    "trapezoid_dim0": lambda m, y: m.trapezoid(y, dim=0),
    "trapezoid_x": lambda m, y: m.trapezoid(y, m.tensor(X_STEPS)),
    "trapezoid_x_grid": lambda m, y: m.trapezoid(y, m.tensor(X_GRID)),
    "trapezoid_one_sample": lambda m, y: m.trapezoid(y[:, :1]),
    "trapezoid_row": lambda m, y: m.trapz(y[0]),
    "cumulative_trapezoid": lambda m, y: m.cumulative_trapezoid(y),
    "cumulative_trapezoid_dx": lambda m, y: m.cumulative_trapezoid(y, dx=0.37, dim=0),
    "cumulative_trapezoid_x": lambda m, y: m.cumulative_trapezoid(y, m.tensor(X_STEPS)),
    "repeat_interleave": lambda m, y: y.repeat_interleave(2),
    "repeat_interleave_dim": lambda m, y: y.repeat_interleave(3, 1),
    "repeat_interleave_zero": lambda m, y: y.repeat_interleave(0, 0),
    "repeat_interleave_scalar": lambda m, y: y[0, 0].repeat_interleave(3),
    "repeat_interleave_output_size": lambda m, y: m.repeat_interleave(y, 2, 0, output_size=12),
    "repeat_interleave_counts": lambda m, y: y.repeat_interleave(m.tensor([1, 0, 2, 1, 1, 3]),
                                                                 0),
    "repeat_interleave_one_count": lambda m, y: y.repeat_interleave(m.tensor([2])),
    "repeat_interleave_negative": lambda m, y: y.repeat_interleave(-1),
    "repeat_interleave_bad_output_size": lambda m, y: y.repeat_interleave(2, 0, output_size=5),
    "repeat_interleave_counts_bad_output_size": lambda m, y: y.repeat_interleave(
        m.tensor([1, 1, 1, 1, 1, 1]), 0, output_size=2),
    "repeat_interleave_bad_dim": lambda m, y: y.repeat_interleave(2, 5),
}


def _outcome(m, program, data=Y):
    y = m.tensor(data, requires_grad=True)
    try:
        out = PROGRAMS[program](m, y)
    except Exception as e:   # noqa: BLE001 - the error is compared
        return type(e).__name__, str(e)
    weights = m.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)))
    (out * weights).sum().backward()
    node = out.grad_fn
    names = (node.name(), tuple(n.name().split("::")[-1] for n, _ in node.next_functions))
    return names, out.detach().numpy().copy(), y.grad.numpy().copy()


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_as_pytorch(program):
    got, want = _outcome(tg, program), _outcome(torch, program)
    assert got[0] == want[0]
    if len(want) == 2:
        assert got[1] == want[1]
        return
    # (sums may add in another order than PyTorch's vectorised ones: a rounding apart)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-13, atol=1e-14)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 4), cols=st.integers(1, 9), seed=st.integers(0, 2 ** 32 - 1),
       dx=st.floats(0.01, 10.0))
def test_running_trapezoid_is_pytorchs_bits(rows, cols, seed, dx):
    # a cumulative sum adds in order in both: the same bits
    data = np.random.default_rng(seed).standard_normal((rows, cols))
    got = [tg.cumulative_trapezoid(tg.tensor(data), dx=dx).numpy(),
           tg.cumulative_trapezoid(tg.tensor(data), tg.tensor(np.arange(cols) * dx)).numpy()]
    want = [torch.cumulative_trapezoid(torch.tensor(data), dx=dx).numpy(),
            torch.cumulative_trapezoid(torch.tensor(data),
                                       torch.tensor(np.arange(cols) * dx)).numpy()]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
