"""narrow, select, split, chunk, unbind, diagonal and Tensor.unfold: views of their input with PyTorch's
values, grad_fn names, gradients and errors; the outputs of split/chunk/unbind refuse a
recorded in-place change as PyTorch's do."""
import numpy as np
import pytest

import tapegrad as tg
from oracle import message

torch = pytest.importorskip("torch")

CALLS = [
    lambda x: [x.narrow(1, 1, 2)], lambda x: [x.narrow(0, -2, 2)], lambda x: [x.narrow(1, 3, 0)],
    lambda x: [x.select(1, 2)], lambda x: [x.select(0, -1)], lambda x: [x.select(2, 0)],
    lambda x: list(x.split(2)), lambda x: list(x.split(2, 1)), lambda x: list(x.split(5, -1)),
    lambda x: list(x.split([1, 0, 2], 1)), lambda x: list(x.split((4,), 0)),
    lambda x: list(x.chunk(2)), lambda x: list(x.chunk(3, 1)), lambda x: list(x.chunk(9, 2)),
    lambda x: list(x.unbind()), lambda x: list(x.unbind(-1)),
    lambda x: [x.diagonal()], lambda x: [x.diagonal(1, 1, 2)], lambda x: [x.diagonal(-2, 0, 2)],
    lambda x: [x.diagonal(7)], lambda x: [x.diagonal(0, -1, 0)],
    lambda x: list(x.split_with_sizes([3, 1])),
    lambda L_x: [L_x.narrow(2, 1, 1).select(1, 0).unbind(0)[1]],
    lambda x: [x.unfold(0, 2, 1)], lambda x: [x.unfold(1, 2, 2)], lambda x: [x.unfold(-1, 1, 3)],
    lambda x: [x.unfold(0, 4, 1)], lambda x: [x.unfold(1, 0, 1)], lambda x: [x.unfold(0, 3, 2)],
    lambda x: [x.select(1, 0).unfold(0, 2, 1).unfold(1, 1, 1)],
]
FUNCTIONS = [
    lambda L, x: [L.narrow(x, 0, 1, 2)], lambda L, x: [L.select(x, 2, 1)],
    lambda L, x: list(L.split(x, 2, 2)), lambda L, x: list(L.chunk(x, 2, 0)),
    lambda L, x: list(L.unbind(x, 1)), lambda L, x: [L.diagonal(x, 0, 0, 1)],
]


def _run(L, call):
    base = L.tensor(np.arange(24.0).reshape(4, 3, 2) / 7 - 1, requires_grad=True)
    x = base * 1.5
    outs = call(L, x) if call.__code__.co_argcount == 2 else call(x)
    loss = sum(((o * (k + 2)) ** 2).sum() for k, o in enumerate(outs))
    loss.backward()
    return outs, base.grad


@pytest.mark.parametrize("call", CALLS + FUNCTIONS)
def test_values_names_and_gradients_are_pytorchs(call):
    (mine, mine_grad), (theirs, their_grad) = _run(tg, call), _run(torch, call)
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
        assert a.grad_fn.name() == b.grad_fn.name()
        assert a._is_view() and a._base is not None
    np.testing.assert_allclose(mine_grad.numpy(), their_grad.numpy(), rtol=1e-14)


def test_writes_through_them_reach_the_base():
    def program(L):
        x = L.zeros(4, 6)
        p, q = x.chunk(2, 1)
        q.fill_(3)
        x.diagonal().fill_(7)
        x.narrow(0, 3, 1).mul_(-1)
        x.unbind(0)[1].add_(1)
        x.select(1, 0).sub_(2)
        x.split([5, 1], 1)[1][0] = 9
        x.unfold(1, 2, 3)[:, 1].fill_(5)          # windows that do not overlap
        return x
    np.testing.assert_array_equal(program(tg).numpy(), program(torch).numpy())


WRITES = [
    lambda x: x.split(3, 1)[1].add_(1),
    lambda x: x.split([2, 4], 1)[1].mul_(2),
    lambda x: x.chunk(2, 1)[1].zero_(),
    lambda x: x.unbind(1)[2].mul_(2),
    lambda x: x.split(3, 1)[0][0].add_(1),         # a view of an output: named after itself
    lambda x: x.unbind(0)[1][2:].fill_(1),
]


@pytest.mark.parametrize("write", WRITES)
def test_recorded_writes_to_multiple_outputs_raise_pytorchs_error(write):
    def program(L):
        x = L.zeros(4, 6, requires_grad=True).clone()
        try:
            write(x)
        except RuntimeError as e:
            return message(e)
        return "no error"
    mine = program(tg)
    assert mine == program(torch) and mine.startswith(("Output", "A view"))


def test_their_writes_under_no_grad_or_without_history_are_fine():
    def program(L):
        x = L.zeros(4, 6, requires_grad=True).clone()
        a, b = x.split(3, 1)
        with L.no_grad():
            b.add_(1)
        y = L.zeros(2, 2)
        y.unbind(0)[1].fill_(4)           # no history: nothing to refuse
        w = L.ones(2, requires_grad=True)
        try:
            y.unbind(0)[0].add_(w)        # ... unless the value written has one
        except RuntimeError as e:
            err = message(e)
        (x * x).sum().backward()
        return x.detach().numpy().copy(), y.numpy().copy(), err
    mine, theirs = program(tg), program(torch)
    np.testing.assert_array_equal(mine[0], theirs[0])
    np.testing.assert_array_equal(mine[1], theirs[1])
    assert mine[2] == theirs[2]


BAD = [
    lambda L: L.zeros(4, 6).narrow(1, 7, 0), lambda L: L.zeros(4, 6).narrow(1, -7, 1),
    lambda L: L.zeros(4, 6).narrow(1, 2, -1), lambda L: L.tensor(1.0).narrow(0, 0, 1),
    lambda L: L.zeros(4, 6).narrow(1, 5, 2),
    lambda L: L.tensor(1.0).select(0, 0), lambda L: L.zeros(4, 6).select(1, -7),
    lambda L: L.zeros(4, 6).select(1, 6), lambda L: L.zeros(4, 6).select(2, 0),
    lambda L: L.tensor(1.0).unbind(), lambda L: L.zeros(4, 6).unbind(2),
    lambda L: L.zeros(4, 6).diagonal(0, 1, 1), lambda L: L.zeros(4, 6).diagonal(0, 0, 2),
    lambda L: L.tensor(1.0).diagonal(),
    lambda L: L.zeros(4, 6).split(-1), lambda L: L.zeros(4, 6).split(0, 1),
    lambda L: L.zeros(4, 6).split([7, -1], 1), lambda L: L.zeros(4, 6).split([2, 3], 1),
    lambda L: L.tensor(1.0).split(1),
    lambda L: L.zeros(4, 6).chunk(0), lambda L: L.zeros(4, 6).chunk(-1),
    lambda L: L.tensor(1.0).chunk(1),
    lambda L: L.zeros(4, 6).unfold(1, 7, 1), lambda L: L.zeros(4, 6).unfold(1, -1, 0),
    lambda L: L.zeros(4, 6).unfold(0, 2, 0), lambda L: L.zeros(4, 6).unfold(2, 1, 1),
    lambda L: L.zeros(4, 6).unfold(-3, 1, 1), lambda L: L.tensor(1.0).unfold(0, 2, 1),
    lambda L: L.tensor(1.0).unfold(1, 1, 1),
]


@pytest.mark.parametrize("bad", BAD)
def test_bad_arguments_give_pytorchs_errors(bad):
    errors = []
    for L in (tg, torch):
        with pytest.raises((RuntimeError, IndexError)) as info:
            bad(L)
        errors.append((info.type, message(info.value)))
    assert errors[0] == errors[1]


def test_unfold_of_a_0d_tensor_and_of_empty_windows():
    for L in (tg, torch):
        x = L.tensor(2.5, requires_grad=True)
        y = x.unfold(0, 1, 1)
        assert tuple(y.shape) == (1,) and y.grad_fn.name() == "UnfoldBackward0"
        (y * 3.0).sum().backward()
        assert x.grad.item() == 3.0
        assert tuple(L.zeros(3, 4).unfold(1, 0, 2).shape) == (3, 3, 0)
        assert tuple(L.tensor(1.0).unfold(0, 0, 3).shape) == (0,)


def test_overlapping_windows_refuse_an_in_place_write():
    # PyTorch adds once per window there; tapegrad refuses rather than write otherwise
    x = tg.arange(6.0)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        x.unfold(0, 3, 1).add_(1.0)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_empty_sizes():
    for L in (tg, torch):
        assert [tuple(p.shape) for p in L.zeros(0).chunk(2)] == [(0,), (0,)]
        assert [tuple(p.shape) for p in L.zeros(0, 3).split(2)] == [(0, 3)]
        assert [tuple(p.shape) for p in L.zeros(5).split(2)] == [(2,), (2,), (1,)]
        assert [tuple(p.shape) for p in L.zeros(6).chunk(4)] == [(2,), (2,), (2,)]


# ---------------------------------------------------------------------------------------------
# Copies that pick elements by position: index_select, flip, roll, repeat, tile, gather, take;
# and movedim/swapaxes, views as permute/transpose are
# ---------------------------------------------------------------------------------------------
PICKS = [
    lambda L, y: y.index_select(1, L.tensor([2, 0, 2])),
    lambda L, y: L.index_select(y, 0, L.tensor([3, 3])),
    lambda L, y: y.index_select(2, L.tensor([], dtype=L.int64)),
    lambda L, y: L.flip(y, [0, 2]), lambda L, y: y.flip(1), lambda L, y: y.flip(()),
    lambda L, y: y.fliplr(), lambda L, y: y.flipud(),
    lambda L, y: y.roll(1, 1), lambda L, y: y.roll(5), lambda L, y: L.roll(y, (1, -1), (0, 2)),
    lambda L, y: y.repeat(2, 1, 1), lambda L, y: y.repeat(1, 2, 1, 3), lambda L, y: y.repeat(1, 0, 1),
    lambda L, y: y.tile((2,)), lambda L, y: L.tile(y, (2, 1, 1, 1)),
    lambda L, y: L.gather(y, 1, L.tensor([[[0, 1]], [[2, 2]], [[1, 0]], [[0, 0]]])),
    lambda L, y: y.gather(2, L.tensor([[[1], [0], [1]]] * 4)),
    lambda L, y: y.take(L.tensor([0, 5, -1, 5])), lambda L, y: L.take(y, L.tensor([[1, 2], [3, 4]])),
    lambda L, y: y.movedim(0, -1), lambda L, y: L.movedim(y, (0, 1), (2, 0)),
    lambda L, y: y.moveaxis(2, 0), lambda L, y: y.swapaxes(0, 2), lambda L, y: L.swapdims(y, 1, 0),
]


@pytest.mark.parametrize("pick", PICKS)
def test_picking_ops_are_pytorchs(pick):
    def program(L):
        x = L.tensor(np.arange(24.0).reshape(4, 3, 2) / 7 - 1, requires_grad=True)
        out = pick(L, x * 1.5)
        ((out * 3) ** 2).sum().backward()
        return out, x.grad
    (mine, mine_grad), (theirs, their_grad) = program(tg), program(torch)
    assert tuple(mine.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(mine.detach().numpy(), theirs.detach().numpy())
    assert mine.grad_fn.name() == theirs.grad_fn.name()
    np.testing.assert_allclose(mine_grad.numpy(), their_grad.numpy(), rtol=1e-14)


def test_picking_ops_under_compile_and_vmap():
    def f(x):
        return (x.flip(0) * x.roll(1) + x.index_select(0, tg.tensor([2, 2, 0]))).sum() \
            + x.repeat(2).take(tg.tensor([1, 4])).sum()
    compiled = tg.compile(f)
    for k in range(3):
        a = tg.tensor([1.0, 2.0, 3.5 + k], requires_grad=True)
        b = tg.tensor([1.0, 2.0, 3.5 + k], requires_grad=True)
        compiled(a).backward()
        f(b).backward()
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
    assert compiled.stats.replays == 2
    batch = tg.tensor(np.arange(12.0).reshape(4, 3))
    got = tg.vmap(f)(batch)
    np.testing.assert_array_equal(got.numpy(), [f(row).item() for row in batch])


def test_new_tensors_take_the_dtype():
    for L in (tg, torch):
        x = L.tensor([1, 2], dtype=L.int32)
        assert x.new_zeros(2, 3).dtype == L.int32 and x.new_ones((2,)).dtype == L.int32
        assert x.new_full((2,), 3.0).tolist() == [3, 3]
        assert tuple(x.new_empty(4).shape) == (4,)
        assert x.new_zeros(2, dtype=L.float64, requires_grad=True).requires_grad


PICK_ERRORS = [
    lambda L: L.zeros(3, 4).index_select(1, L.tensor([4])),
    lambda L: L.zeros(3, 4).index_select(1, L.tensor([[1]])),
    lambda L: L.zeros(3, 4).index_select(1, L.tensor([1.0])),
    lambda L: L.zeros(3, 4).flip(0, 0), lambda L: L.zeros(3, 4).roll(1, (0, 1)),
    lambda L: L.zeros(3, 4).repeat(2), lambda L: L.zeros(3, 4).repeat(-1, 1),
    lambda L: L.gather(L.zeros(3, 4), 1, L.tensor([[5]])),
    lambda L: L.gather(L.zeros(3, 4), 1, L.tensor([1])),
    lambda L: L.zeros(3, 4).take(L.tensor([12])), lambda L: L.zeros(3).fliplr(),
]


@pytest.mark.parametrize("bad", PICK_ERRORS)
def test_picking_ops_give_pytorchs_errors(bad):
    errors = []
    for L in (tg, torch):
        with pytest.raises((RuntimeError, IndexError)) as info:
            bad(L)
        errors.append((info.type, message(info.value)))
    assert errors[0] == errors[1]


USES_AFTER_A_CHANGE = [
    # (make the outputs, change something, use an output)
    lambda L, x: (x.split(2, 1), "nograd_base", lambda o: (o[1] * 2).grad_fn),
    lambda L, x: (x.split(2, 1), "nograd_self", lambda o: (o[1] * 2).grad_fn),
    lambda L, x: (x.split(2, 1), "base", lambda o: o[1].grad_fn),
    lambda L, x: (x.split(2, 1), "row", lambda o: (o[0] * 2).grad_fn),
    lambda L, x: (x.split(2, 1), "base", lambda o: o[1].detach().sum().item()),
    lambda L, x: (x.split(2, 1), "base", lambda o: (o[1].requires_grad, o[1]._version)),
    lambda L, x: (x.unbind(0), "base", lambda o: (o[0] * 2).grad_fn),
    lambda L, x: ((x.split(2, 1)[1][0],), "base", lambda o: (o[0] * 2).grad_fn),
    lambda L, x: (x.chunk(2, 1), "base", lambda o: (o[0] * 1).sum().item()),
]


@pytest.mark.parametrize("case", USES_AFTER_A_CHANGE)
def test_outputs_of_multi_view_ops_refuse_a_new_history(case):
    # PyTorch gives no new history to an output of split/chunk/unbind (or a view of one)
    # whose values changed in place through an alias: asking for it raises
    def program(L):
        x = L.zeros(2, 4, requires_grad=True).clone()
        outs, change, use = case(L, x)
        if change == "nograd_base":
            with L.no_grad():
                x.add_(1)
        elif change == "nograd_self":
            with L.no_grad():
                outs[1].add_(1)
        elif change == "base":
            x.add_(1)
        else:
            x[0].add_(1)
        try:
            got = use(outs)
            return got.name() if hasattr(got, "name") else got
        except RuntimeError as e:
            return message(e)
    assert program(tg) == program(torch)


def test_a_multi_view_without_history_whose_base_gets_one():
    def program(L):
        x = L.zeros(2, 4)
        a, b = x.split(2, 1)
        x.add_(L.ones(2, 4, requires_grad=True))
        try:
            return (a * 2).grad_fn
        except RuntimeError as e:
            return message(e)
    assert program(tg) == program(torch)


def test_setitem_into_a_multi_view_names_the_indexed_view():
    def program(L):
        x = L.zeros(2, 3, requires_grad=True) * 1
        b = x.split(2)[-1]
        try:
            b[0] = -1.5
        except RuntimeError as e:
            return message(e)
    assert program(tg) == program(torch) and program(tg).startswith("Output 0 of Select")


def test_a_detached_alias_does_not_change_the_values_a_recorded_in_place_op_saved():
    # found by the view programs: with x.detach() alive, x.mul_(w) copied the new values into
    # the memory the detached tensor shares with x's old record, which mul_'s backward reads,
    # so the gradient of w came out 1.5 times too large, without a word
    def program(L, keep_detached, keep_row):
        leaf = L.tensor(np.arange(6.0).reshape(2, 3) / 4 + 0.25, requires_grad=True)
        w = L.tensor(1.5, requires_grad=True)
        x = leaf * 1.5
        row = x[1] if keep_row else None
        d = x.detach() if keep_detached else None
        x.mul_(w)
        loss = x.sum() + (2 * row.sum() if keep_row else 0)
        grads = L.autograd.grad(loss, [leaf, w])
        return [g.numpy().tolist() for g in grads], None if d is None else d.numpy().tolist()
    for keep_detached in (False, True):
        for keep_row in (False, True):
            assert program(tg, keep_detached, keep_row) == program(torch, keep_detached, keep_row)


# --- stride() and data_ptr() ------------------------------------------------------------------
# views of a contiguous tensor whose dims all have more than one element, or whose size-one
# dims take the stride row-major order gives them (a size-one dim's stride says nothing of
# where elements lie; PyTorch's depends on the op that made it, and so do an empty view's)
STRIDED = [
    lambda x: x, lambda x: x.t(), lambda x: x[1], lambda x: x[:, 1:], lambda x: x[1:, ::2],
    lambda x: x.diagonal(), lambda x: x.diagonal(1), lambda x: x.unfold(1, 2, 1),
    lambda x: x.expand(2, 3, 4), lambda x: x.unsqueeze(0), lambda x: x.unsqueeze(1),
    lambda x: x.unsqueeze(2), lambda x: x.view(2, 6), lambda x: x.view(-1)[::3],
    lambda x: x.permute(1, 0).unsqueeze(1), lambda x: x[0:1], lambda x: x[:, 2:3],
    lambda x: x.t().narrow(0, 1, 2), lambda x: x.reshape(12)[2:10].view(2, 4).t(),
    lambda x: x[None], lambda x: x[2, 3],
]


@pytest.mark.parametrize("k", range(len(STRIDED)))
def test_strides_storage_offsets_and_data_pointers_of_views_are_pytorch_s(k):
    got, want = (STRIDED[k](L.arange(12.0).reshape(3, 4)) for L in (tg, torch))
    assert got.shape == want.shape
    assert got.stride() == want.stride()
    assert [got.stride(d) for d in range(-got.dim(), got.dim())] == \
        [want.stride(d) for d in range(-want.dim(), want.dim())]
    assert got.storage_offset() == want.storage_offset()
    assert got.is_contiguous() == want.is_contiguous()


def test_data_pointers_tell_views_of_one_tensor_apart_as_pytorch_s():
    for L in (tg, torch):
        x = L.arange(12.0).reshape(3, 4)
        size = x.element_size()
        assert x.view(-1).data_ptr() == x.data_ptr()
        assert x[1].data_ptr() == x.data_ptr() + 4 * size
        assert x.t()[2].data_ptr() == x.data_ptr() + 2 * size
        assert x.clone().data_ptr() != x.data_ptr()
        assert L.zeros(0).data_ptr() == 0


@pytest.mark.parametrize("shape, dim", [((3, 4), 2), ((3, 4), -3), ((), 0), ((), -1)])
def test_a_stride_of_a_dim_out_of_range_raises_pytorch_s_error(shape, dim):
    errors = []
    for L in (tg, torch):
        with pytest.raises(IndexError) as e:
            L.zeros(shape).stride(dim)
        errors.append(str(e.value))
    assert errors[0] == errors[1]
