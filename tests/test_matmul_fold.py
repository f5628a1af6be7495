"""A stacked operand times a matrix or a vector is one product of its rows, as PyTorch folds
it, and a recorded product is computed straight into its slot of the arena: the values are
the (rows, k) product's, bit for bit, with and without grad, and the gradients PyTorch's."""
import numpy as np
import pytest

import tapegrad as tg

SHAPES = [((128, 16, 16), (16, 16)), ((2, 300, 64), (64, 50)), ((7, 3, 33, 17), (17, 9)),
          ((4, 5, 6), (6,)), ((3, 0, 4), (4, 2)), ((2, 1, 3), (3, 5)), ((5, 2), (2, 3)),
          ((4,), (4, 3)), ((6, 4), (4,))]


@pytest.mark.parametrize("sa, sb", SHAPES)
@pytest.mark.parametrize("requires_grad", [False, True])
def test_folded_product_is_the_product_of_the_rows(sa, sb, requires_grad):
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal(sa), rng.standard_normal(sb)
    a = tg.tensor(A, requires_grad=requires_grad)
    b = tg.tensor(B, requires_grad=requires_grad)
    got = (a @ b).detach().numpy()
    rows = A.reshape(-1, sa[-1]) if len(sa) > 2 else A
    want = np.matmul(rows, B).reshape(got.shape)
    assert got.shape == np.matmul(A, B).shape
    assert np.array_equal(got, want)


@pytest.mark.parametrize("sa, sb", SHAPES)
def test_folded_product_gradients_match_pytorch(sa, sb):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    A, B = rng.standard_normal(sa), rng.standard_normal(sb)
    G = rng.standard_normal(np.matmul(A, B).shape)
    ours = [tg.tensor(A, requires_grad=True), tg.tensor(B, requires_grad=True)]
    theirs = [torch.tensor(A, requires_grad=True), torch.tensor(B, requires_grad=True)]
    y, yt = ours[0] @ ours[1], theirs[0] @ theirs[1]
    assert y.grad_fn.name() == yt.grad_fn.name()
    y.backward(tg.tensor(G))
    yt.backward(torch.tensor(G))
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    for t, tt in zip(ours, theirs):
        np.testing.assert_allclose(t.grad.numpy(), tt.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_integer_stack_times_matrix_folds_too():
    a = tg.arange(24).reshape(2, 3, 4)
    b = tg.arange(8).reshape(4, 2)
    got = a @ b
    assert got.dtype == tg.int64
    assert np.array_equal(got.numpy(), np.arange(24).reshape(2, 3, 4) @ np.arange(8).reshape(4, 2))
