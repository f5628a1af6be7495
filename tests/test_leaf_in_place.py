"""A large leaf that a matrix product reads is read where it is, as a large constant is
(``functional._leaf_in_place``), instead of being copied onto the tape: every value and
gradient is the copy's, bit for bit, and a change in place between the forward and the
backward is refused with PyTorch's error, as for a copied leaf."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad import tape as tape_module

N = 128   # a (128, 128) leaf: 16,384 values, the size from which operands are read in place


@pytest.fixture
def copied(monkeypatch):
    """Run a function with every operand copied onto the tape, as before."""
    def run(fn):
        with monkeypatch.context() as m:
            m.setattr(tape_module, "IN_PLACE_MIN", 1 << 60)
            return fn()
    return run


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((16, N)), rng.standard_normal((N, N)) / N, rng.standard_normal(N)


def _read_in_place(t):
    tape = t._tape
    return any(tape.ext[r] != 0 for r, leaf in tape.leaves.items() if r < tape.ext.size)


def _mlp_steps(X, W0, b0, steps):
    x = tg.tensor(X)
    W = tg.tensor(W0.copy(), requires_grad=True)
    b = tg.tensor(b0.copy(), requires_grad=True)
    opt = tg.optim.SGD([W, b], lr=0.1)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = tg.relu(x @ W + b).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, W.detach().numpy().copy(), b.detach().numpy().copy()


def test_the_leaf_is_read_where_it_is():
    X, W0, _ = _data()
    W = tg.tensor(W0, requires_grad=True)
    y = tg.tensor(X) @ W
    assert _read_in_place(y)


def test_training_steps_give_the_copys_bits(copied):
    X, W0, b0 = _data(1)
    # 40 steps: the backward becomes generated code for the tape after some steps
    got = _mlp_steps(X, W0, b0, 40)
    want = copied(lambda: _mlp_steps(X, W0, b0, 40))
    assert got[0] == want[0]
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])


def _mixed(X, W0, first_product):
    x = tg.tensor(X)
    W = tg.tensor(W0.copy(), requires_grad=True)
    if first_product:
        loss = (x @ W).pow(2).sum() + (W * W).sum() + (x @ W).sum()
    else:
        loss = (W * W).sum() + (x @ W).pow(2).sum() + (x @ W).sum()
    loss.backward()
    return loss.item(), W.grad.numpy().copy()


@pytest.mark.parametrize("first_product", [True, False])
def test_another_reader_of_the_leaf_reads_the_same_values(copied, first_product):
    X, W0, _ = _data(2)
    got = _mixed(X, W0, first_product)
    want = copied(lambda: _mixed(X, W0, first_product))
    assert got[0] == want[0]
    np.testing.assert_array_equal(got[1], want[1])


def test_a_change_in_place_before_backward_is_refused_as_pytorch_refuses_it():
    torch = pytest.importorskip("torch")
    X, W0, _ = _data(3)
    errors = []
    for lib in (tg, torch):
        W = lib.tensor(W0.copy(), requires_grad=True)
        # (x requires grad: its gradient reads W, which PyTorch then saves)
        loss = (lib.tensor(X, requires_grad=True) @ W).pow(2).sum()
        with lib.no_grad():
            W.mul_(2.0)
        with pytest.raises(RuntimeError) as e:
            loss.backward()
        # (the first sentence: tapegrad's hint after it names the op and line that did it)
        errors.append(str(e.value).replace("torch.", "tapegrad.").split(" instead.")[0])
    assert errors[0] == errors[1]
    assert "is at version 1; expected version 0" in errors[0]


def test_second_order_through_the_product(copied):
    X, W0, _ = _data(4)

    def run():
        W = tg.tensor(W0.copy(), requires_grad=True)
        (g,) = tg.autograd.grad((tg.tensor(X) @ W).pow(3).sum(), W, create_graph=True)
        (h,) = tg.autograd.grad((g * g).sum(), W)
        return g.detach().numpy().copy(), h.numpy().copy()

    got, want = run(), copied(run)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_values_match_pytorch_and_the_node_is_the_leafs():
    torch = pytest.importorskip("torch")
    X, W0, _ = _data(5)
    W = tg.tensor(W0, requires_grad=True)
    Wt = torch.tensor(W0, requires_grad=True)
    y, yt = tg.tensor(X) @ W, torch.tensor(X) @ Wt
    assert [type(n).__name__ == "NoneType" or n.name() for n, _ in y.grad_fn.next_functions] \
        == [type(n).__name__ == "NoneType" or n.name().replace("torch::", "tapegrad::")
            for n, _ in yt.grad_fn.next_functions]
    y.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(W.grad.numpy(), Wt.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_a_leaf_numpy_holds_is_copied():
    X, W0, _ = _data(6)
    W = tg.tensor(W0.copy(), requires_grad=True)
    W.detach().numpy()
    y = tg.tensor(X) @ W
    assert not _read_in_place(y)


def test_data_replaced_between_forward_and_backward_is_as_with_a_copy(copied):
    X, W0, _ = _data(7)

    def run():
        W = tg.tensor(W0.copy(), requires_grad=True)
        loss = (tg.tensor(X) @ W).pow(2).sum()
        W.data = tg.tensor(np.ones((N, N)))
        loss.backward()
        return W.grad.numpy().copy()

    np.testing.assert_array_equal(run(), copied(run))
