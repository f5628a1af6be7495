"""The nodes PyTorch's matmul shows beneath its last one: a batched product is several ops
in PyTorch (its fold into one mm/mv, ``UnsafeViewBackward0 -> MmBackward0 ->
ViewBackward0``; its broadcast bmm, ``BmmBackward0`` over expanded and reshaped operands),
and walking ``next_functions`` must meet the same node names, in the same places, with the
same Nones, as in PyTorch -- over shapes of 1 to 4 dims, operands that do or do not require
grad, results of other ops and transposed views as operands.

A transposed view with a dim of size 1 is left out: NumPy's view of it has no stride of its
own for that dim, PyTorch's keeps the one it was made with, and tapegrad assumes the one a
row-major layout gives it (``functional._layout``); where those differ (a leading dim of 1
moved by the transpose), PyTorch may run a bmm where tapegrad shows a fold."""
import itertools

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")


def walk(fn):
    """The graph beneath a node, spelled out: names, nesting and the Nones."""
    if fn is None:
        return "None"
    name = fn.name().replace("torch::autograd::", "").replace("tapegrad::autograd::", "")
    kids = getattr(fn, "next_functions", ())
    return name + ("(" + ", ".join(walk(f) for f, _ in kids) + ")" if kids else "")


def _shape_pairs():
    """Operand shapes of every rank pair from 1 to 4, with sizes 1 and more, inner sizes
    matching and batches broadcasting."""
    batches = [(), (2,), (1,), (3, 2), (1, 2), (2, 1)]
    for da, db in itertools.product((1, 2, 3, 4), repeat=2):
        for k, m, n in ((3, 2, 4), (1, 2, 3), (2, 1, 1)):
            for ba, bb in itertools.product(batches, repeat=2):
                if len(ba) != max(da - 2, 0) or len(bb) != max(db - 2, 0):
                    continue
                if any(x != y and 1 not in (x, y) for x, y in zip(ba[::-1], bb[::-1])):
                    continue
                sa = (k,) if da == 1 else ba + (m, k)
                sb = (k,) if db == 1 else bb + (k, n)
                yield sa, sb


PAIRS = sorted(set(_shape_pairs()))


def _graph(L, sa, sb, a_rg, b_rg, make):
    a = make(L, sa, a_rg)
    b = make(L, sb, b_rg)
    y = a @ b
    return walk(y.grad_fn), tuple(y.shape)


def _leaf(L, shape, rg):
    return L.ones(*shape, dtype=L.float64, requires_grad=rg)


def _computed(L, shape, rg):
    """A result of another op (its node is MulBackward0), or a constant."""
    x = L.ones(*shape, dtype=L.float64, requires_grad=rg)
    return x * 2.0 if rg else x


def _transposed(L, shape, rg):
    """A transposed view of a contiguous leaf: its strides are not row-major (PyTorch's
    reshape of it copies, or aliases)."""
    if len(shape) < 2 or 1 in shape:
        return _leaf(L, shape, rg)      # (see the module's note on dims of size 1)
    x = L.ones(*shape[:-2], shape[-1], shape[-2], dtype=L.float64, requires_grad=rg)
    return x.transpose(-1, -2)


@pytest.mark.parametrize("make", [_leaf, _computed, _transposed],
                         ids=["leaves", "results", "transposed views"])
@pytest.mark.parametrize("sa,sb", PAIRS, ids=[f"{a}@{b}" for a, b in PAIRS])
def test_matmul_nodes_as_pytorch(sa, sb, make):
    for a_rg, b_rg in ((True, True), (True, False), (False, True)):
        assert _graph(tg, sa, sb, a_rg, b_rg, make) == \
            _graph(torch, sa, sb, a_rg, b_rg, make), (a_rg, b_rg)


def test_inner_nodes_are_the_same_objects_on_every_walk():
    a = tg.ones(2, 3, 4, requires_grad=True)
    w = tg.ones(4, 5, requires_grad=True)
    y = a @ w
    mm = y.grad_fn.next_functions[0][0]
    assert mm is y.grad_fn.next_functions[0][0]
    assert mm.name() == "MmBackward0" and type(mm).__name__ == "MmBackward0"
    view = mm.next_functions[0][0]
    assert view.name() == "ViewBackward0"
    assert view.next_functions[0][0].variable is a
    assert mm.next_functions[1][0].variable is w
    # distinct nodes compare unequal, though one record holds them all
    assert mm != y.grad_fn and view != mm and hash(mm) is not None
    assert repr(mm).startswith("<MmBackward0 object at 0x")
    with pytest.raises(NotImplementedError):
        mm.register_hook(lambda *args: None)


def test_gradients_are_unchanged_by_the_view_of_the_graph():
    for L in (tg, torch):
        a = L.arange(24.0, dtype=L.float64).reshape(2, 3, 4).requires_grad_()
        w = L.linspace(-1.0, 1.0, 20, dtype=L.float64).reshape(4, 5).requires_grad_()
        y = a @ w
        _ = walk(y.grad_fn)             # walking first must change nothing
        (y * y).sum().backward()
        if L is tg:
            ours = (a.grad.numpy().copy(), w.grad.numpy().copy())
        else:
            theirs = (a.grad.numpy(), w.grad.numpy())
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o, t, rtol=1e-13)


def test_compiled_product_shows_the_same_nodes():
    a = tg.ones(2, 3, 4, requires_grad=True)
    w = tg.ones(4, 5, requires_grad=True)
    f = tg.compile(lambda a, w: (a @ w).tanh())
    for _ in range(3):
        y = f(a, w)
        assert walk(y.grad_fn) == ("TanhBackward0(UnsafeViewBackward0(MmBackward0("
                                   "ViewBackward0(AccumulateGrad), AccumulateGrad)))")
