"""``nn.utils.rnn`` (padding and packing variable-length sequences) and the recurrent layers
on a ``PackedSequence``, against PyTorch: values, gradients, ``grad_fn`` names, the packed
tuple's fields, error texts, final states taken at each sequence's own end (both directions,
stacked layers), and a short training loop; plus central differences of the packing ops."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tapegrad as tg
import tapegrad.nn.utils.rnn  # noqa: F401  (the submodule import PyTorch programs write)
from tapegrad.nn.utils.rnn import (PackedSequence, pack_padded_sequence, pack_sequence,
                                   pad_packed_sequence, pad_sequence, unpack_sequence,
                                   unpad_sequence)
from tapegrad.testing import gradcheck

torch = pytest.importorskip("torch")
trnn = torch.nn.utils.rnn

ATOL = 1e-12


def close(ours, theirs, atol=ATOL, what=""):
    a = ours.detach().numpy()
    b = theirs.detach().numpy()
    assert a.shape == b.shape, what
    np.testing.assert_allclose(a, b, rtol=1e-11, atol=atol, err_msg=what)


def same_ints(ours, theirs):
    assert ours.dtype == tg.int64 and theirs.dtype == torch.int64
    assert ours.tolist() == theirs.tolist()


def raises_same(fn_ours, fn_theirs):
    with pytest.raises(Exception) as theirs:
        fn_theirs()
    with pytest.raises(type(theirs.value)) as ours:
        fn_ours()
    assert str(ours.value) == re.sub(r"\btorch\.", "tapegrad.", str(theirs.value))


def pair(array):
    """The same values as a tapegrad and a torch leaf that require grad."""
    return tg.tensor(array, requires_grad=True), torch.tensor(array, requires_grad=True)


def test_importable_as_submodule():
    import tapegrad.nn.utils.rnn as mod
    assert mod is tg.nn.utils.rnn
    assert sorted(mod.__all__) == sorted(trnn.__all__)


@settings(max_examples=15, deadline=None)
@given(lengths=st.lists(st.integers(1, 5), min_size=1, max_size=4),
       batch_first=st.booleans(), side=st.sampled_from(["left", "right"]),
       value=st.sampled_from([0.0, -1.5]))
def test_pad_sequence_values_grads(lengths, batch_first, side, value):
    rng = np.random.default_rng(len(lengths))
    arrays = [rng.standard_normal((n, 2)) for n in lengths]
    ours, theirs = zip(*[pair(a) for a in arrays])
    p = pad_sequence(list(ours), batch_first, value, side)
    q = trnn.pad_sequence(list(theirs), batch_first, value, side)
    close(p, q)
    assert type(p.grad_fn).__name__ == type(q.grad_fn).__name__ == "CopySlices"
    w = rng.standard_normal(tuple(q.shape))
    (p * tg.tensor(w)).sum().backward()
    (q * torch.tensor(w)).sum().backward()
    for a, b in zip(ours, theirs):
        close(a.grad, b.grad)
    # unpad_sequence gives the sequences back (right padding)
    if side == "right":
        got = unpad_sequence(p.detach().clone(), tg.tensor(lengths), batch_first)
        for g, a in zip(got, arrays):
            np.testing.assert_array_equal(g.numpy(), a)


def test_pad_sequence_of_tensor_and_errors():
    x = np.arange(6.0).reshape(2, 3)
    close(pad_sequence(tg.tensor(x)), trnn.pad_sequence(torch.tensor(x)))
    raises_same(lambda: pad_sequence([tg.ones(2)], padding_side="up"),
                lambda: trnn.pad_sequence([torch.ones(2)], padding_side="up"))
    raises_same(lambda: pad_sequence([]), lambda: trnn.pad_sequence([]))
    for second in [(3, 2), (3, 2, 2)]:
        raises_same(lambda: pad_sequence([tg.ones(2, 3), tg.ones(*second)]),
                    lambda: trnn.pad_sequence([torch.ones(2, 3), torch.ones(*second)]))
    # a size-1 trailing dimension broadcasts into the slot, as PyTorch's copy
    close(pad_sequence([tg.ones(2, 3), tg.tensor([[1.0], [2.0], [3.0]])]),
          trnn.pad_sequence([torch.ones(2, 3), torch.tensor([[1.0], [2.0], [3.0]])]))
    raises_same(lambda: pad_sequence(5), lambda: trnn.pad_sequence(5))


def test_unpad_sequence_grad_fn():
    p, q = pair(np.random.default_rng(0).standard_normal((4, 3, 2)))
    ours = unpad_sequence(p * 1, tg.tensor([4, 2, 1]))
    theirs = trnn.unpad_sequence(q * 1, torch.tensor([4, 2, 1]))
    for a, b in zip(ours, theirs):
        close(a, b)
        assert type(a.grad_fn).__name__ == type(b.grad_fn).__name__
    sum(t.sum() for t in ours).backward()
    sum(t.sum() for t in theirs).backward()
    close(p.grad, q.grad)


@settings(max_examples=20, deadline=None)
@given(lengths=st.lists(st.integers(1, 5), min_size=1, max_size=5),
       batch_first=st.booleans(), enforce_sorted=st.booleans(),
       total_extra=st.sampled_from([None, 0, 2]), as_tensor=st.booleans())
def test_pack_pad_roundtrip(lengths, batch_first, enforce_sorted, total_extra, as_tensor):
    if enforce_sorted:
        lengths = sorted(lengths, reverse=True)
    rng = np.random.default_rng(sum(lengths))
    longest = max(lengths)
    shape = (len(lengths), longest, 2) if batch_first else (longest, len(lengths), 2)
    x, y = pair(rng.standard_normal(shape))
    lens_ours = tg.tensor(lengths) if as_tensor else lengths
    lens_theirs = torch.tensor(lengths) if as_tensor else lengths
    p = pack_padded_sequence(x, lens_ours, batch_first, enforce_sorted)
    q = trnn.pack_padded_sequence(y, lens_theirs, batch_first, enforce_sorted)
    assert isinstance(p, PackedSequence) and isinstance(p, tuple)
    close(p.data, q.data)
    same_ints(p.batch_sizes, q.batch_sizes)
    for a, b in [(p.sorted_indices, q.sorted_indices), (p.unsorted_indices, q.unsorted_indices)]:
        assert (a is None) == (b is None)
        if a is not None:
            same_ints(a, b)
    assert type(p.data.grad_fn).__name__ == type(q.data.grad_fn).__name__
    total = None if total_extra is None else longest + total_extra
    u, lu = pad_packed_sequence(p, batch_first, -2.0, total)
    v, lv = trnn.pad_packed_sequence(q, batch_first, -2.0, total)
    close(u, v)
    same_ints(lu, lv)
    assert type(u.grad_fn).__name__ == type(v.grad_fn).__name__
    w = rng.standard_normal(tuple(v.shape))
    (u * tg.tensor(w)).sum().backward()
    (v * torch.tensor(w)).sum().backward()
    close(x.grad, y.grad)


@settings(max_examples=10, deadline=None)
@given(lengths=st.lists(st.integers(1, 4), min_size=1, max_size=4),
       enforce_sorted=st.booleans())
def test_pack_sequence_unpack(lengths, enforce_sorted):
    if enforce_sorted:
        lengths = sorted(lengths, reverse=True)
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((n, 3)) for n in lengths]
    ours, theirs = zip(*[pair(a) for a in arrays])
    p = pack_sequence(list(ours), enforce_sorted)
    q = trnn.pack_sequence(list(theirs), enforce_sorted)
    close(p.data, q.data)
    same_ints(p.batch_sizes, q.batch_sizes)
    got, want = unpack_sequence(p), trnn.unpack_sequence(q)
    for a, b in zip(got, want):
        close(a, b)
    sum((t ** 2).sum() for t in got).backward()
    sum((t ** 2).sum() for t in want).backward()
    for a, b in zip(ours, theirs):
        close(a.grad, b.grad)


def test_packed_sequence_fields_and_methods():
    p = pack_sequence([tg.tensor([1.0, 2.0]), tg.tensor([3.0])])
    q = trnn.pack_sequence([torch.tensor([1.0, 2.0]), torch.tensor([3.0])])
    assert repr(p) == re.sub(r"\btorch\.", "tapegrad.", repr(q))
    data, sizes, s, u = p
    assert s is None and u is None and data is p.data
    assert p.to(tg.float64) is p
    assert p.is_cuda is False
    f = p.long()   # tapegrad has float64 as its only floating dtype
    assert f.data.dtype == tg.int64 and f.data.tolist() == q.long().data.tolist()
    assert f.batch_sizes.dtype == tg.int64 and f is not p
    p2 = pack_sequence([tg.tensor([3.0]), tg.tensor([1.0, 2.0])], enforce_sorted=False)
    assert p2.double().unsorted_indices.tolist() == [1, 0]


def test_pack_errors():
    x = np.random.default_rng(0).standard_normal((4, 3, 2))
    cases = [([2, 4, 1], {}), ([4, 2, 0], {}), ([4, 2], {}), ([0, 2, 4], {"enforce_sorted":
                                                                           False})]
    for lengths, kwargs in cases:
        raises_same(lambda: pack_padded_sequence(tg.tensor(x), lengths, **kwargs),
                    lambda: trnn.pack_padded_sequence(torch.tensor(x), lengths, **kwargs))
    raises_same(lambda: pack_padded_sequence(tg.tensor(x), tg.tensor([[4, 2, 1]])),
                lambda: trnn.pack_padded_sequence(torch.tensor(x), torch.tensor([[4, 2, 1]])))
    raises_same(lambda: pack_padded_sequence(tg.zeros(0, 3, 2), [0, 0, 0]),
                lambda: trnn.pack_padded_sequence(torch.zeros(0, 3, 2), [0, 0, 0]))
    raises_same(
        lambda: pad_packed_sequence(pack_padded_sequence(tg.tensor(x), [4, 2, 1]),
                                    total_length=3),
        lambda: trnn.pad_packed_sequence(trnn.pack_padded_sequence(torch.tensor(x), [4, 2, 1]),
                                         total_length=3))
    raises_same(lambda: pack_sequence([]), lambda: trnn.pack_sequence([]))


def test_pack_gradcheck():
    x = tg.tensor(np.random.default_rng(1).standard_normal((4, 3, 2)), requires_grad=True)

    def fn(x):
        packed = pack_padded_sequence(x.sin(), [2, 4, 1], enforce_sorted=False)
        return pad_packed_sequence(packed, batch_first=True, total_length=5)[0]
    assert gradcheck(fn, x)


def _layers(mode, lib, nl, bi, batch_first):
    lib.manual_seed(5)
    return getattr(lib.nn, mode)(3, 4, num_layers=nl, bidirectional=bi, batch_first=batch_first)


@settings(max_examples=12, deadline=None)
@given(mode=st.sampled_from(["RNN", "GRU", "LSTM"]),
       lengths=st.lists(st.integers(1, 4), min_size=1, max_size=4),
       layers=st.sampled_from([(1, False), (1, True), (2, True), (2, False)]),
       batch_first=st.booleans(), with_hx=st.booleans())
def test_rnn_on_packed(mode, lengths, layers, batch_first, with_hx):
    nl, bi = layers
    ours, theirs = _layers(mode, tg, nl, bi, batch_first), _layers(mode, torch, nl, bi,
                                                                   batch_first)
    rng = np.random.default_rng(len(lengths) + max(lengths))
    shape = (len(lengths), max(lengths), 3) if batch_first else (max(lengths), len(lengths), 3)
    x, y = pair(rng.standard_normal(shape))
    hx = hy = None
    if with_hx:
        h, k = pair(rng.standard_normal((nl * (2 if bi else 1), len(lengths), 4)))
        hx, hy = ((h, h.cos()), (k, k.cos())) if mode == "LSTM" else (h, k)
    po, pf = ours(pack_padded_sequence(x, lengths, batch_first, False), hx)
    qo, qf = theirs(trnn.pack_padded_sequence(y, lengths, batch_first, False), hy)
    assert isinstance(po, PackedSequence)
    close(po.data, qo.data)
    same_ints(po.batch_sizes, qo.batch_sizes)
    pf, qf = (pf, qf) if mode == "LSTM" else ((pf,), (qf,))
    for a, b in zip(pf, qf):
        close(a, b, what="final state")
        assert a.grad_fn.name() == b.grad_fn.name()
    assert po.data.grad_fn.name() == qo.data.grad_fn.name()
    u, _ = pad_packed_sequence(po, batch_first)
    v, _ = trnn.pad_packed_sequence(qo, batch_first)
    (u.tanh().sum() + sum((f * f).sum() for f in pf)).backward()
    (v.tanh().sum() + sum((f * f).sum() for f in qf)).backward()
    close(x.grad, y.grad)
    if with_hx:
        close(h.grad, k.grad)
    for (n, p), (m, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert n == m
        close(p.grad, q.grad, what=n)


def test_rnn_packed_errors():
    ours, theirs = _layers("GRU", tg, 1, False, False), _layers("GRU", torch, 1, False, False)
    x = np.random.default_rng(0).standard_normal((3, 2, 3))
    raises_same(lambda: ours(pack_padded_sequence(tg.tensor(x), [3, 1]), tg.zeros(1, 3, 4)),
                lambda: theirs(trnn.pack_padded_sequence(torch.tensor(x), [3, 1]),
                               torch.zeros(1, 3, 4)))


def test_training_loop_pack_lstm_pad():
    lengths = [5, 2, 4, 1, 3]
    rng = np.random.default_rng(11)
    xs = rng.standard_normal((5, 5, 3))
    ys = rng.standard_normal((5, 5, 2))

    def run(lib, rnn):
        lib.manual_seed(2)
        lstm = lib.nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True)
        head = lib.nn.Linear(8, 2)
        opt = lib.optim.Adam(list(lstm.parameters()) + list(head.parameters()), lr=0.05)
        x, y = lib.tensor(xs), lib.tensor(ys)
        mask = (lib.arange(5)[None, :] < lib.tensor(lengths)[:, None]).to(x.dtype)
        losses = []
        for _ in range(6):
            opt.zero_grad()
            packed = rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                              enforce_sorted=False)
            out, (h, c) = lstm(packed)
            padded, _ = rnn.pad_packed_sequence(out, batch_first=True, total_length=5)
            loss = (((head(padded) - y) ** 2).sum(-1) * mask).sum() / mask.sum() \
                + h.pow(2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, lstm

    ours, our_lstm = run(tg, tg.nn.utils.rnn)
    theirs, their_lstm = run(torch, trnn)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10)
    assert ours[-1] < ours[0]
    for p, q in zip(our_lstm.parameters(), their_lstm.parameters()):
        close(p, q, atol=1e-10)
