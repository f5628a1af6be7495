"""``quantile`` and ``nanquantile`` against PyTorch: values, the result's ``grad_fn`` name,
the input's gradient and the errors, over every interpolation, ``dim`` (none, each,
negative), ``keepdim``, ``q`` as a number, a 0-d and a 1-D tensor, and values with ties,
NaN and infinities.  Values read without arithmetic (lower, higher, nearest) are PyTorch's
bit for bit; interpolated ones within an ulp, as PyTorch's lerp kernel rounds once (a fused
multiply-add) where tapegrad's lerp rounds twice."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

MODES = ["linear", "lower", "higher", "midpoint", "nearest"]
rng = np.random.default_rng(7)
PLAIN = rng.normal(size=(3, 5))
TIES = np.array([[1.0, 2.0, 2.0, 0.5, 2.0], [3.0, 3.0, 3.0, 3.0, -1.0],
                 [0.0, -0.0, 1.0, 1.0, 4.0]])
NANS = PLAIN.copy()
NANS[1, 2] = np.nan
NANS[2, :] = np.nan
INFS = PLAIN.copy()
INFS[0, 1] = np.inf
INFS[2, 3] = -np.inf
DATA = {"plain": PLAIN, "ties": TIES, "nans": NANS, "infs": INFS}
QS = {"number": 0.3, "zero": 0.0, "one": 1.0, "half": 0.5, "0d": ("t", 0.625),
      "1d": ("t", [0.0, 0.125, 0.5, 0.875, 1.0])}


def run(m, fn, data, q, dim, keepdim, mode):
    x = m.tensor(data, dtype=m.float64, requires_grad=True)
    if isinstance(q, tuple):
        q = m.tensor(q[1], dtype=m.float64)
    y = getattr(m, fn)(x, q, dim=dim, keepdim=keepdim, interpolation=mode)
    name = y.grad_fn.name() if m is tg else type(y.grad_fn).__name__
    w = m.tensor(np.linspace(0.5, 1.5, y.numel()).reshape(tuple(y.shape)), dtype=m.float64)
    (y * w).sum().backward()
    return np.array(y.tolist()), tuple(y.shape), name, np.array(x.grad.tolist())


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("q", sorted(QS))
@pytest.mark.parametrize("data", sorted(DATA))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
def test_as_in_pytorch(fn, mode, data, q, dim, keepdim):
    got = run(tg, fn, DATA[data], QS[q], dim, keepdim, mode)
    want = run(torch, fn, DATA[data], QS[q], dim, keepdim, mode)
    if mode in ("linear", "midpoint"):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-15, atol=1e-15)  # (data of order 1)
    else:
        np.testing.assert_array_equal(got[0], want[0])
    assert got[1:3] == want[1:3]
    np.testing.assert_allclose(got[3], want[3], rtol=1e-15, atol=0)


@pytest.mark.parametrize("shape, dim", [((), None), ((), 0), ((1,), 0), ((4,), None),
                                        ((2, 1, 3), 1), ((2, 3, 4), 2), ((2, 3, 4), None)])
def test_shapes(shape, dim):
    data = rng.normal(size=shape)
    for keepdim in (False, True):
        for q in (0.4, ("t", [0.1, 0.9])):
            got = run(tg, "quantile", data, q, dim, keepdim, "linear")
            want = run(torch, "quantile", data, q, dim, keepdim, "linear")
            np.testing.assert_allclose(got[0], want[0], rtol=1e-15, atol=1e-15)  # (data of order 1)
            assert got[1:3] == want[1:3]
            np.testing.assert_allclose(got[3], want[3], rtol=1e-15)


BAD = {
    "q_above_one": lambda m: m.quantile(m.ones(3, dtype=m.float64), 1.5),
    "q_below_zero": lambda m: m.nanquantile(m.ones(3, dtype=m.float64), -0.1),
    "q_values": lambda m: m.quantile(m.ones(3, dtype=m.float64),
                                     m.tensor([0.5, 2.0], dtype=m.float64)),
    "q_2d": lambda m: m.quantile(m.ones(3, dtype=m.float64), m.ones(2, 2, dtype=m.float64)),
    "q_dtype": lambda m: m.quantile(m.ones(3, dtype=m.float64), m.tensor([1], dtype=m.int64)),
    "empty": lambda m: m.quantile(m.ones(0, dtype=m.float64), 0.5),
    "integer_input": lambda m: m.quantile(m.ones(3, dtype=m.int64), 0.5),
    "mode": lambda m: m.quantile(m.ones(3, dtype=m.float64), 0.5, interpolation="cubic"),
    "dim": lambda m: m.quantile(m.ones(3, dtype=m.float64), 0.5, dim=2),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_errors_as_in_pytorch(name):
    texts = []
    for m in (tg, torch):
        with pytest.raises((RuntimeError, IndexError)) as e:
            BAD[name](m)
        texts.append((type(e.value).__name__, str(e.value)))
    assert texts[0] == texts[1]


def test_a_compiled_function_runs_quantile_eagerly_and_says_why():
    """The ranks read depend on q's values and on where the NaNs are: a replay would keep the
    traced call's, so the compiled function runs eagerly (and equals eager mode)."""
    def f(x, q):
        return (tg.nanquantile(x, q, dim=1) * 2.0).sum()

    fn = tg.compile(f)
    for k in range(4):
        data = rng.normal(size=(3, 5))
        data[k % 3, k] = np.nan
        q = tg.tensor([0.25 * (k % 3), 0.9])
        xs = [tg.tensor(data, requires_grad=True) for _ in range(2)]
        got, want = fn(xs[0], q), f(xs[1], q)
        got.backward()
        want.backward()
        assert got.item() == want.item()
        np.testing.assert_array_equal(xs[0].grad.numpy(), xs[1].grad.numpy())
    assert fn.stats.replays == 0
    assert any("quantile" in why for why, _ in fn.stats.eager_reasons)
