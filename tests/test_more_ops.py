"""Predicates, logical ops, rounding and outer: PyTorch's values, dtypes, grad_fn names,
gradients and errors, on special values and integer tensors; a compiled call never keeps a
mask computed from its inputs as a constant."""
import numpy as np
import pytest

import tapegrad as tg
from oracle import message

torch = pytest.importorskip("torch")

SPECIAL = [float("nan"), -0.0, 0.0, 2.5, -2.5, 1.5, -3.7, float("inf"), -float("inf"), 2.675,
           1234.5678, 0.49999999999999994]


@pytest.mark.parametrize("name", ["isnan", "isinf", "isposinf", "isneginf", "isfinite",
                                  "logical_not"])
def test_predicates(name):
    mine = getattr(tg, name)(tg.tensor(SPECIAL))
    theirs = getattr(torch, name)(torch.tensor(SPECIAL))
    assert mine.dtype == tg.bool and mine.tolist() == theirs.tolist()
    assert getattr(tg.tensor(SPECIAL), name)().tolist() == theirs.tolist()


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor"])
def test_logical_pairs_broadcast(name):
    a, b = [[1.0, 0.0, 2.0]], [[0], [3]]
    mine = getattr(tg, name)(tg.tensor(a), tg.tensor(b))
    theirs = getattr(torch, name)(torch.tensor(a), torch.tensor(b))
    assert mine.tolist() == theirs.tolist() and tuple(mine.shape) == tuple(theirs.shape)


@pytest.mark.parametrize("call", [
    lambda L, x: L.floor(x), lambda L, x: L.ceil(x), lambda L, x: L.trunc(x),
    lambda L, x: L.fix(x), lambda L, x: L.round(x), lambda L, x: L.round(x, decimals=2),
    lambda L, x: L.round(x, decimals=-2), lambda L, x: x.round(decimals=1), lambda L, x: L.sign(x),
    lambda L, x: L.frac(x), lambda L, x: x.floor(), lambda L, x: x.sign(),
])
def test_rounding_is_pytorchs_bit_for_bit(call):
    results = []
    for L in (tg, torch):
        x = L.tensor(SPECIAL, requires_grad=True)
        out = call(L, x)
        (out * 2).sum().backward()
        results.append((out.detach().numpy(), out.grad_fn.name(), x.grad.numpy()))
    (v, name, g), (tv, tname, tgr) = results
    np.testing.assert_array_equal(v, tv)
    np.testing.assert_array_equal(np.signbit(v), np.signbit(tv))    # -0.0 where PyTorch's is
    assert name == tname
    np.testing.assert_array_equal(g, tgr)


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "round", "sign", "frac"])
def test_rounding_integer_tensors(name):
    outs = []
    for L in (tg, torch):
        try:
            out = getattr(L, name)(L.tensor([1, -2, 3], dtype=L.int32))
            outs.append((out.tolist(), str(out.dtype).split(".")[1]))
        except RuntimeError as e:
            outs.append(message(e))
    assert outs[0] == outs[1]


def test_outer():
    results = []
    for L in (tg, torch):
        a = L.tensor([1.0, -2.0], requires_grad=True)
        b = L.tensor([3.0, 4.0, 0.5], requires_grad=True)
        out = L.outer(a, b)
        (out ** 2).sum().backward()
        results.append((out.detach().numpy(), out.grad_fn.name(), a.grad.numpy(),
                        b.grad.numpy(), a.outer(b).detach().numpy()))
    for x, y in zip(*results):
        assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y
    for L in (tg, torch):
        with pytest.raises(RuntimeError, match="outer: Expected 1-D argument self"):
            L.outer(L.zeros(2, 2), L.zeros(2))


def test_a_compiled_mask_follows_its_inputs():
    def f(v):
        return (tg.where(tg.isnan(v) | tg.isinf(v), 0.0, v) * tg.sign(v)).sum()
    compiled = tg.compile(f)
    for z in ([1.0, float("nan")], [float("nan"), -2.0], [3.0, float("inf")], [3.0, -4.0]):
        assert compiled(tg.tensor(z)).item() == f(tg.tensor(z)).item()


@pytest.mark.parametrize("name", ["max", "min", "amax", "amin", "median", "nanmedian"])
@pytest.mark.parametrize("data", [[1.0, 3.0, 3.0, 2.0], [1.0, float("nan"), 2.0, 0.0],
                                  [[1.0, -1.0], [-1.0, float("nan")]]])
@pytest.mark.parametrize("g", [2.0, float("inf"), float("nan")])
def test_extreme_reductions_share_the_gradient_among_ties_as_torch(name, data, g):
    # one backward rule serves them all: max/min/median let a nan result tie with the nan
    # entries; amax/amin's (g / ties) * mask sends an infinite or nan g to the other entries
    # as nan, and a nan result matches nothing
    grads = []
    for lib in (tg, torch):
        x = lib.tensor(data, requires_grad=True)
        getattr(x, name)().backward(lib.tensor(g))
        grads.append(np.asarray(x.grad.tolist()))
    np.testing.assert_array_equal(*grads)
    assert [str(v) for v in grads[0].ravel()] == [str(v) for v in grads[1].ravel()]
