"""tapegrad.utils.data against torch.utils.data: batches in order (values, dtypes, shapes,
container types), default_collate on every kind of sample, lengths, errors and warnings.

Shuffled orders cannot be PyTorch's (its generator is not NumPy's), so shuffling is tested
for its properties: each sample once per epoch, a new order each epoch, the same orders from
the same seed, the batch shapes.  DistributedSampler's orders, drawn from a seed given to a
Generator, are compared with PyTorch's index for index.
"""
import collections
import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

import tapegrad as tg
from tapegrad.utils import data

torch = pytest.importorskip("torch")
from torch.utils import data as tdata  # noqa: E402


def plain(x):
    """Tensors of either library as ("tensor", dtype name, shape, values), containers kept
    with their type name, so that structures compare across libraries."""
    if isinstance(x, (tg.Tensor, torch.Tensor)):
        return ("tensor", str(x.dtype).split(".")[-1], tuple(x.shape), x.detach().numpy().tolist())
    if isinstance(x, dict):
        return ("dict", {k: plain(v) for k, v in x.items()})
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return (type(x).__name__, [plain(v) for v in x])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [plain(v) for v in x])
    return x


def batches(loader):
    return [plain(b) for b in loader]


def both(make_dataset, **loader_kwargs):
    """Batches of DataLoader(make_dataset(lib), ...) for tapegrad and PyTorch."""
    ours = batches(data.DataLoader(make_dataset(tg, data), **loader_kwargs))
    theirs = batches(tdata.DataLoader(make_dataset(torch, tdata), **loader_kwargs))
    return ours, theirs


def tensor_dataset(n):
    rng = np.random.default_rng(n)
    features = rng.standard_normal((n, 3))
    labels = rng.integers(0, 5, n)
    return lambda lib, _: _TD[lib](lib.tensor(features), lib.tensor(labels))


_TD = {tg: data.TensorDataset, torch: tdata.TensorDataset}


# ---------------------------------------------------------------------------------------------
# Batches in order
# ---------------------------------------------------------------------------------------------
@given(n=st.integers(1, 40), batch_size=st.integers(1, 12), drop_last=st.booleans())
def test_tensor_dataset_batches_match_torch(n, batch_size, drop_last):
    ours, theirs = both(tensor_dataset(n), batch_size=batch_size, drop_last=drop_last)
    assert ours == theirs
    loader = data.DataLoader(tensor_dataset(n)(tg, data), batch_size=batch_size,
                             drop_last=drop_last)
    assert len(loader) == len(theirs)


def test_batches_through_a_custom_collate_equal_the_fast_path():
    """A TensorDataset with the default collate is gathered by one indexing per tensor; a
    collate_fn of one's own takes the per-sample path: the same batches."""
    dataset = tensor_dataset(23)(tg, data)
    fast = batches(data.DataLoader(dataset, batch_size=5))
    slow = batches(data.DataLoader(dataset, batch_size=5,
                                   collate_fn=lambda b: data.default_collate(b)))
    assert fast == slow


def test_tensors_that_require_grad_are_stacked_with_a_graph():
    x = tg.tensor(np.arange(12.0).reshape(6, 2), requires_grad=True)
    (xb,) = next(iter(data.DataLoader(data.TensorDataset(x), batch_size=4)))
    assert type(xb.grad_fn).__name__ == "StackBackward0"
    xb.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1, 1]] * 4 + [[0, 0]] * 2)


class Records:
    """A map-style dataset of dicts, named tuples, lists, NumPy arrays, numbers, strings."""

    Point = collections.namedtuple("Point", ["x", "y"])

    def __init__(self, lib, base):
        self.lib = lib

    def __len__(self):
        return 7

    def __getitem__(self, i):
        lib = self.lib
        return {"image": lib.tensor(np.full((2, 2), float(i))), "label": i,
                "weight": 0.5 * i, "flag": bool(i % 2), "name": f"s{i}",
                "point": Records.Point(np.float64(i), np.array([i, -i])),
                "pair": [lib.tensor(float(i)), np.int64(i)], "nested": ({"k": 1.0 * i},)}


def _records(lib, base):
    return type("R", (Records, base.Dataset), {})(lib, base)


@pytest.mark.parametrize("batch_size", [1, 3, 7])
def test_default_collate_of_structured_samples_matches_torch(batch_size):
    ours, theirs = both(_records, batch_size=batch_size)
    assert ours == theirs


def test_unbatched_loading_converts_like_torch():
    ours, theirs = both(_records, batch_size=None)
    assert ours == theirs


@pytest.mark.parametrize("batch", [
    [1, 2, 3], [1.5, 2.0], [True, False], ["a", "b"], [b"a", b"b"],
    [np.float64(1.5), np.float64(2.5)], [np.int64(1), np.int64(4)],
    [np.array([1.0, 2.0]), np.array([3.0, 4.0])], [(1, 2.0), (3, 4.0)], [[1, 2], [3, 4]],
    [{"a": 1, "b": [1.0, 2.0]}, {"a": 2, "b": [3.0, 4.0]}],
], ids=["ints", "floats", "bools", "str", "bytes", "np-float", "np-int", "arrays", "tuples",
        "lists", "dicts"])
def test_default_collate_matches_torch(batch):
    assert plain(data.default_collate(batch)) == plain(tdata.default_collate(batch))


@pytest.mark.parametrize("batch", [[[1, 2], [3]], [object(), object()],
                                   [np.array(["a"]), np.array(["b"])]],
                         ids=["ragged", "object", "string-array"])
def test_default_collate_errors_match_torch(batch):
    errors = []
    for collate in (data.default_collate, tdata.default_collate):
        with pytest.raises(Exception) as info:
            collate(batch)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


class Stream:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


@pytest.mark.parametrize("batch_size, drop_last", [(None, False), (1, False), (4, False),
                                                   (4, True)])
def test_iterable_dataset_matches_torch(batch_size, drop_last):
    def make(lib, base):
        return type("S", (Stream, base.IterableDataset), {})(10)
    ours, theirs = both(make, batch_size=batch_size, drop_last=drop_last)
    assert ours == theirs
    assert len(data.DataLoader(make(tg, data), batch_size=batch_size, drop_last=drop_last)) == \
        len(tdata.DataLoader(make(torch, tdata), batch_size=batch_size, drop_last=drop_last))


def test_subset_and_concat_match_torch():
    def make(lib, base):
        a, b = tensor_dataset(5)(lib, base), tensor_dataset(8)(lib, base)
        return base.Subset(a + b, [12, 0, 7, 3, 3])
    ours, theirs = both(make, batch_size=2)
    assert ours == theirs
    concat = data.ConcatDataset([tensor_dataset(5)(tg, data), tensor_dataset(8)(tg, data)])
    tconcat = tdata.ConcatDataset([tensor_dataset(5)(torch, tdata),
                                   tensor_dataset(8)(torch, tdata)])
    for i in (-13, -1, 0, 4, 5, 12):
        assert plain(concat[i]) == plain(tconcat[i])


# ---------------------------------------------------------------------------------------------
# Shuffling
# ---------------------------------------------------------------------------------------------
def epoch_labels(loader):
    return [label for _, labels in loader for label in labels.numpy().tolist()]


def labelled(n):
    return data.TensorDataset(tg.tensor(np.arange(2.0 * n).reshape(n, 2)), tg.arange(n))


@given(n=st.integers(1, 60), batch_size=st.integers(1, 16), drop_last=st.booleans(),
       seed=st.integers(0, 2**32))
def test_shuffle_visits_every_sample_once_per_epoch(n, batch_size, drop_last, seed):
    loader = data.DataLoader(labelled(n), batch_size=batch_size, shuffle=True,
                             drop_last=drop_last, generator=tg.Generator().manual_seed(seed))
    full, last = divmod(n, batch_size)
    expected_shapes = [batch_size] * full + ([last] if last and not drop_last else [])
    for _ in range(3):
        shapes, labels = [], []
        for xb, yb in loader:
            shapes.append(xb.shape[0])
            assert tuple(xb.shape[1:]) == (2,) and yb.dtype == tg.int64
            np.testing.assert_array_equal(xb.numpy(), 2.0 * yb.numpy()[:, None] + [0, 1])
            labels += yb.numpy().tolist()
        assert shapes == expected_shapes == [len(b) for b in
                                             tdata.BatchSampler(range(n), batch_size, drop_last)]
        assert len(set(labels)) == len(labels)
        if not drop_last:
            assert sorted(labels) == list(range(n))
    assert len(loader) == len(expected_shapes)


def test_shuffle_gives_a_new_order_each_epoch_and_the_same_orders_from_the_same_seed():
    def orders(generator=None):
        loader = data.DataLoader(labelled(50), batch_size=8, shuffle=True, generator=generator)
        return [epoch_labels(loader) for _ in range(3)]
    a = orders(tg.Generator().manual_seed(7))
    assert a == orders(tg.Generator().manual_seed(7))
    assert a != orders(tg.Generator().manual_seed(8))
    assert a[0] != a[1] != a[2] and sorted(a[0]) == list(range(50))
    tg.manual_seed(3)
    b = orders()
    tg.manual_seed(3)
    assert b == orders()
    assert b[0] != b[1]


def test_a_generator_leaves_the_global_generator_alone():
    tg.manual_seed(5)
    expected = tg.rand(3).numpy()
    tg.manual_seed(5)
    epoch_labels(data.DataLoader(labelled(20), batch_size=4, shuffle=True,
                                 generator=tg.Generator().manual_seed(1)))
    np.testing.assert_array_equal(tg.rand(3).numpy(), expected)


def test_random_sampler_with_replacement():
    sampler = data.RandomSampler(range(10), replacement=True, num_samples=200,
                                 generator=tg.Generator().manual_seed(0))
    drawn = list(sampler)
    assert len(drawn) == len(sampler) == 200 and set(drawn) <= set(range(10))
    assert len(set(drawn)) == 10   # 200 draws from 10: every value appears (p ~ 1e-9 not)
    more = list(data.RandomSampler(range(10), num_samples=25,
                                   generator=tg.Generator().manual_seed(0)))
    assert len(more) == 25 and sorted(more[:20]) == sorted(list(range(10)) * 2)


def test_generator_state_round_trip():
    g = tg.Generator().manual_seed(11)
    assert g.initial_seed() == 11
    state = g.get_state()
    first = list(data.RandomSampler(range(30), generator=g))
    g.set_state(state)
    assert list(data.RandomSampler(range(30), generator=g)) == first


# ---------------------------------------------------------------------------------------------
# random_split
# ---------------------------------------------------------------------------------------------
@given(n=st.integers(0, 50), fractions=st.sampled_from([[0.5, 0.5], [0.3, 0.3, 0.4],
                                                        [0.7, 0.2, 0.1], [1.0]]))
def test_random_split_lengths_match_torch(n, fractions):
    rec = []
    for base in (data, tdata):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            parts = base.random_split(range(n), fractions)
        rec.append(([len(p) for p in parts], [str(w.message) for w in caught]))
    assert rec[0] == rec[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # (the zero-length warnings compared above)
        parts = data.random_split(range(n), fractions, generator=tg.Generator().manual_seed(n))
        again = data.random_split(range(n), fractions, generator=tg.Generator().manual_seed(n))
    assert sorted(i for p in parts for i in p) == list(range(n))
    assert [list(p) for p in parts] == [list(p) for p in again]


def test_random_split_errors_match_torch():
    for lengths in ([3, 3], [0.5, 0.6], [-0.5, 1.5]):
        errors = []
        for base in (data, tdata):
            with pytest.raises(ValueError) as info:
                base.random_split(range(10), lengths)
            errors.append(str(info.value))
        assert errors[0] == errors[1]


# ---------------------------------------------------------------------------------------------
# Arguments and errors
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    dict(num_workers=-1), dict(timeout=-1), dict(prefetch_factor=2),
    dict(persistent_workers=True), dict(sampler=[0, 1], shuffle=True),
    dict(batch_sampler=[[0, 1]], batch_size=2), dict(batch_sampler=[[0]], drop_last=True),
    dict(batch_size=None, drop_last=True), dict(batch_size=0), dict(batch_size=2.5),
], ids=["workers", "timeout", "prefetch", "persistent", "sampler-shuffle",
        "batch-sampler-size", "batch-sampler-drop", "none-drop", "zero-batch", "float-batch"])
def test_argument_errors_match_torch(kwargs):
    errors = []
    for lib, base in ((tg, data), (torch, tdata)):
        with pytest.raises(ValueError) as info:
            base.DataLoader(tensor_dataset(4)(lib, base), **kwargs)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def test_samplers_and_batch_samplers_given_explicitly_match_torch():
    def make(lib, base):
        return tensor_dataset(9)(lib, base)
    ours, theirs = both(make, sampler=[8, 1, 4], batch_size=2)
    assert ours == theirs
    ours, theirs = both(make, batch_sampler=[[3, 1], [0], [8, 8, 2]])
    assert ours == theirs


def test_num_workers_loads_the_same_batches_in_process():
    dataset = tensor_dataset(10)(tg, data)
    assert batches(data.DataLoader(dataset, batch_size=3, num_workers=2)) == \
        batches(data.DataLoader(dataset, batch_size=3))
    with pytest.raises(NotImplementedError, match="worker_init_fn"):
        data.DataLoader(dataset, num_workers=2, worker_init_fn=lambda i: None)


def test_tensor_dataset_size_mismatch_matches_torch():
    with pytest.raises(AssertionError, match="^Size mismatch between tensors$"):
        data.TensorDataset(tg.zeros(3, 2), tg.zeros(4))
    with pytest.raises(AssertionError, match="^Size mismatch between tensors$"):
        tdata.TensorDataset(torch.zeros(3, 2), torch.zeros(4))


def test_dataset_without_getitem():
    with pytest.raises(NotImplementedError,
                       match="^Subclasses of Dataset should implement __getitem__.$"):
        data.Dataset()[0]


@given(n=st.integers(0, 23), replicas=st.integers(1, 5), shuffle=st.booleans(),
       drop_last=st.booleans(), seed=st.integers(0, 2**31), epoch=st.integers(0, 3))
def test_distributed_sampler_gives_each_replica_torchs_indices(n, replicas, shuffle,
                                                               drop_last, seed, epoch):
    for rank in range(replicas):
        ours = data.DistributedSampler(range(n), num_replicas=replicas, rank=rank,
                                       shuffle=shuffle, seed=seed, drop_last=drop_last)
        theirs = tdata.DistributedSampler(range(n), num_replicas=replicas, rank=rank,
                                          shuffle=shuffle, seed=seed, drop_last=drop_last)
        ours.set_epoch(epoch)
        theirs.set_epoch(epoch)
        assert list(ours) == list(theirs)
        assert len(ours) == len(theirs)
        assert (ours.num_samples, ours.total_size) == (theirs.num_samples, theirs.total_size)


def test_distributed_sampler_drives_a_loader_as_torchs_does():
    x = np.arange(22.0).reshape(11, 2)
    ours = data.DataLoader(data.TensorDataset(tg.tensor(x)), batch_size=3,
                           sampler=data.DistributedSampler(range(11), num_replicas=3, rank=2))
    theirs = tdata.DataLoader(tdata.TensorDataset(torch.tensor(x)), batch_size=3,
                              sampler=tdata.DistributedSampler(range(11), num_replicas=3,
                                                               rank=2))
    assert [plain(b) for b in ours] == [plain(b) for b in theirs]
    from tapegrad.utils.data.distributed import DistributedSampler
    assert DistributedSampler is data.DistributedSampler


@pytest.mark.parametrize("kwargs", [dict(num_replicas=2, rank=2), dict(num_replicas=2, rank=-1),
                                    dict(num_replicas=3, rank=5)])
def test_distributed_sampler_rank_errors_match_torch(kwargs):
    with pytest.raises(ValueError) as ours:
        data.DistributedSampler(range(4), **kwargs)
    with pytest.raises(ValueError) as theirs:
        tdata.DistributedSampler(range(4), **kwargs)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("kwargs", [dict(), dict(num_replicas=2), dict(rank=0)])
def test_distributed_sampler_without_process_groups_says_so(kwargs):
    # tapegrad has no process groups: replicas and rank must be given
    with pytest.raises(RuntimeError, match="^Requires distributed package to be available$"):
        data.DistributedSampler(range(4), **kwargs)
