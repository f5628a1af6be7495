"""Datasets, samplers and ``DataLoader``, as in ``torch.utils.data``.

A ``DataLoader`` draws indices from a sampler, groups them into batches and collates each
batch (``default_collate`` stacks tensors, NumPy arrays and numbers, and recurses into
tuples, lists and dicts).  Shuffling draws a fresh permutation for every epoch from the
loader's ``generator`` (a ``tapegrad.Generator``) or, without one, from a seed taken from the
global generator that ``tapegrad.manual_seed`` seeds, drawn as PyTorch draws them: the same
seed gives PyTorch's orders (and leaves the global generator where PyTorch's is).

Batches are loaded in the calling process: ``num_workers > 0`` is accepted and gives the same
batches, without worker processes.
"""
import bisect
import collections
import copy
import itertools
import math
import re
import warnings

import numpy as np

from .. import creation, functional
from ..derived import multinomial as _multinomial
from .._dtype import float64
from .._generator import Generator
from ..tensor import Tensor

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ChainDataset",
           "Subset", "ConcatDataset",
           "random_split", "Sampler", "SequentialSampler", "RandomSampler",
           "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler", "DistributedSampler",
           "DataLoader",
           "default_collate", "default_convert", "get_worker_info"]


# ---------------------------------------------------------------------------------------------
# Datasets
# ---------------------------------------------------------------------------------------------
class Dataset:
    """A map-style dataset: ``dataset[i]`` is a sample; subclasses also define ``__len__``
    for the samplers.

    Example:
        >>> from tapegrad.utils.data import Dataset
        >>> class Squares(Dataset):
        ...     def __len__(self):
        ...         return 4
        ...     def __getitem__(self, i):
        ...         return i * i
        >>> [Squares()[i] for i in range(4)]
        [0, 1, 4, 9]
    """

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: ``iter(dataset)`` yields the samples.

    A ``DataLoader`` batches what it yields, in order; it takes no sampler and no ``shuffle``.

    Example:
        >>> from tapegrad.utils.data import DataLoader, IterableDataset
        >>> class Count(IterableDataset):
        ...     def __iter__(self):
        ...         return iter(range(3))
        >>> list(DataLoader(Count(), batch_size=2))
        [tensor([0, 1]), tensor([2])]
    """

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples ``(t[i] for t in tensors)`` of tensors that share their first dimension.

    Example:
        >>> from tapegrad.utils.data import TensorDataset
        >>> ds = TensorDataset(tg.arange(6.0).reshape(3, 2), tg.tensor([0, 1, 0]))
        >>> len(ds), ds[1]
        (3, (tensor([2., 3.]), tensor(1)))
    """

    def __init__(self, *tensors):
        if any(tensors[0].size(0) != t.size(0) for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class StackDataset(Dataset):
    """Datasets of one length side by side: sample ``i`` is the tuple of their samples
    ``i`` (``StackDataset(images, labels)``), or a dict of them by keyword
    (``StackDataset(image=images, label=labels)``).

    Example:
        >>> from tapegrad.utils.data import StackDataset
        >>> StackDataset([1, 2], ["a", "b"])[1], StackDataset(x=[1, 2], y=["a", "b"])[0]
        ((2, 'b'), {'x': 1, 'y': 'a'})
    """

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            # (PyTorch's text, the missing space included)
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via "
                             "``kwargs``) like input/output, but both types are given.")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        parts = args or list(kwargs.values())
        self._length = len(parts[0])
        if any(len(dataset) != self._length for dataset in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args or kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {key: dataset[index] for key, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def __getitems__(self, indices):
        """The samples at ``indices`` (a batch), each part fetched at once from a dataset
        that has its own ``__getitems__``."""
        named = isinstance(self.datasets, dict)
        keys = list(self.datasets) if named else range(len(self.datasets))
        columns = []
        for key in keys:
            dataset = self.datasets[key]
            if callable(getattr(dataset, "__getitems__", None)):
                column = dataset.__getitems__(indices)
                if len(column) != len(indices):
                    raise ValueError("Nested dataset's output size mismatch. Expected "
                                     f"{len(indices)}, got {len(column)}")
            else:
                column = [dataset[i] for i in indices]
            columns.append(column)
        if named:
            return [dict(zip(keys, row)) for row in zip(*columns)] if columns else []
        return [tuple(row) for row in zip(*columns)]

    def __len__(self):
        return self._length


class ChainDataset(IterableDataset):
    """Iterable datasets one after the other, as one stream (``a + b`` of two iterable
    datasets); its length is the sum of theirs.

    Example:
        >>> from tapegrad.utils.data import ChainDataset, IterableDataset
        >>> class Count(IterableDataset):
        ...     def __init__(self, n):
        ...         self.n = n
        ...     def __iter__(self):
        ...         return iter(range(self.n))
        ...     def __len__(self):
        ...         return self.n
        >>> chain = ChainDataset([Count(2), Count(3)])
        >>> list(chain), len(chain)
        ([0, 1, 0, 1, 2], 5)
    """

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for dataset in self.datasets:
            if not isinstance(dataset, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from dataset

    def __len__(self):
        total = 0
        for dataset in self.datasets:
            if not isinstance(dataset, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(dataset)
        return total


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order.

    Example:
        >>> from tapegrad.utils.data import Subset
        >>> list(Subset([10, 11, 12, 13], [3, 1]))
        [13, 11]
    """

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """Datasets one after the other.

    Its length is the sum of theirs; index ``i`` runs through the first, then the next, ...

    Example:
        >>> from tapegrad.utils.data import ConcatDataset
        >>> both = ConcatDataset([[0, 1, 2], [10, 11]])
        >>> len(both), both[3]
        (5, 10)
    """

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][idx - start]


def random_split(dataset, lengths, generator=None):
    """Non-overlapping ``Subset``s of the given lengths (or fractions summing to 1: each gets
    ``floor(frac * len)``, the remainder dealt out one by one from the first) of a random
    permutation of ``dataset``.

    Pass a seeded ``tg.Generator`` as ``generator`` for a split that is the same every run
    (PyTorch's split for the same seed).

    Example:
        >>> from tapegrad.utils.data import random_split
        >>> g = tg.Generator().manual_seed(0)
        >>> train, val = random_split(range(10), [0.7, 0.3], generator=g)
        >>> len(train), len(val), sorted(list(train) + list(val)) == list(range(10))
        (7, 3, True)
    """
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        subset_lengths = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            subset_lengths.append(math.floor(len(dataset) * frac))
        for i in range(len(dataset) - sum(subset_lengths)):
            subset_lengths[i % len(subset_lengths)] += 1
        lengths = subset_lengths
        for i, length in enumerate(lengths):
            if length == 0:
                warnings.warn(f"Length of split at index {i} is 0. "
                              "This might result in an empty dataset.", stacklevel=2)
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = creation.stream_for(generator).permutation(sum(lengths)).tolist()
    return [Subset(dataset, indices[offset - length:offset])
            for offset, length in zip(itertools.accumulate(lengths), lengths)]


# ---------------------------------------------------------------------------------------------
# Samplers
# ---------------------------------------------------------------------------------------------
class Sampler:
    """Yields dataset indices (or, for a batch sampler, lists of them).

    A subclass defines ``__iter__`` (and ``__len__``); pass it to ``DataLoader(sampler=...)``.

    Example:
        >>> from tapegrad.utils.data import DataLoader, Sampler
        >>> class Backwards(Sampler):
        ...     def __init__(self, n):
        ...         self.n = n
        ...     def __iter__(self):
        ...         return iter(range(self.n - 1, -1, -1))
        ...     def __len__(self):
        ...         return self.n
        >>> list(DataLoader([0, 1, 4, 9], sampler=Backwards(4), batch_size=2))
        [tensor([9, 4]), tensor([1, 0])]
    """

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """Indices ``0, 1, ..., len(data_source) - 1`` in order: what ``DataLoader`` uses
    without ``shuffle``.

    Example:
        >>> from tapegrad.utils.data import SequentialSampler
        >>> list(SequentialSampler(["a", "b", "c"]))
        [0, 1, 2]
    """

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


def _epoch_rng(generator):
    """The generator of one pass: ``generator``'s own, or a fresh one seeded from the global
    generator (so that each epoch is shuffled anew, and reproducibly after manual_seed), as
    PyTorch's RandomSampler seeds it: ``random_()`` of an int64."""
    if generator is not None:
        return creation.stream_for(generator)
    seed = int(creation.generator().full_range((), np.int64))
    return Generator().manual_seed(seed)._rng


class RandomSampler(Sampler):
    """Indices in a random order (a permutation per pass over the data), or drawn with
    ``replacement``; ``num_samples`` of them (default: the dataset's length).

    Example:
        >>> from tapegrad.utils.data import RandomSampler
        >>> sorted(RandomSampler(range(4)))
        [0, 1, 2, 3]
        >>> len(list(RandomSampler(range(4), replacement=True, num_samples=7)))
        7
    """

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError("replacement should be a boolean value, but got replacement="
                            f"{self.replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        rng = _epoch_rng(self.generator)
        if self.replacement:
            yield from rng.integers(0, n, size=self.num_samples).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from rng.permutation(n).tolist()
        yield from rng.permutation(n).tolist()[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a random order each pass.

    Example:
        >>> from tapegrad.utils.data import SubsetRandomSampler
        >>> sorted(SubsetRandomSampler([5, 7, 9]))
        [5, 7, 9]
    """

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        # (PyTorch draws from the global generator itself here, not from one seeded by it)
        for i in creation.stream_for(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices into ``weights``, each drawn with probability proportional to
    its weight (``multinomial``, from the same generator and so the same draws as PyTorch's);
    without ``replacement`` an index is drawn at most once.

    Example:
        >>> from tapegrad.utils.data import WeightedRandomSampler
        >>> list(WeightedRandomSampler([0.0, 1.0, 0.0], 3))
        [1, 1, 1]
        >>> sorted(WeightedRandomSampler([1.0, 2.0, 3.0], 3, replacement=False))
        [0, 1, 2]
    """

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or \
                num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError("replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        weights = creation.as_tensor(weights, dtype=float64)
        if len(weights.shape) != 1:
            raise ValueError("weights should be a 1d sequence but given weights have shape "
                             f"{tuple(weights.shape)}")
        self.weights = weights
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        drawn = _multinomial(self.weights, self.num_samples, self.replacement,
                             generator=self.generator)
        yield from drawn.tolist()

    def __len__(self):
        return self.num_samples


class DistributedSampler(Sampler):
    """The share of a dataset's indices that one of ``num_replicas`` processes reads: every
    ``num_replicas``-th index from ``rank`` on, of one order that all replicas agree on
    (shuffled from ``seed + epoch``, so ``set_epoch`` gives each epoch its own).  The order
    is padded by repeating its start, so that every replica gets ``len(self)`` indices, or
    cut to a multiple of ``num_replicas`` with ``drop_last``.  The orders are PyTorch's.

    tapegrad has no process groups (``tapegrad.distributed.is_available()`` is False), so
    ``num_replicas`` and ``rank`` must be given, as a program does that launches its own
    workers.

    Example:
        >>> from tapegrad.utils.data import DistributedSampler
        >>> list(DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=False))
        [1, 3, 0]
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        from .. import distributed
        if (num_replicas is None or rank is None) and not distributed.is_available():
            raise RuntimeError("Requires distributed package to be available")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            # the tail that would not go round every replica is left out
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            # every replica draws the same order from the shared seed
            order = Generator().manual_seed(self.seed + self.epoch)._rng.permutation(n)
            indices = order.tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            missing = self.total_size - len(indices)
            indices += (indices * math.ceil(missing / len(indices)))[:missing] if missing \
                else []
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch the next pass shuffles for (the same on every replica)."""
        self.epoch = epoch


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler``; the last one shorter unless
    ``drop_last``.

    Example:
        >>> from tapegrad.utils.data import BatchSampler, SequentialSampler
        >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
        [[0, 1], [2, 3], [4]]
        >>> list(BatchSampler(range(5), batch_size=2, drop_last=True))
        [[0, 1], [2, 3]]
    """

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        it = iter(self.sampler)
        while True:
            batch = list(itertools.islice(it, self.batch_size))
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size


# ---------------------------------------------------------------------------------------------
# Collation
# ---------------------------------------------------------------------------------------------
_STRING_ARRAY = re.compile(r"[SaUO]")   # NumPy dtypes of strings and objects
default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
    "found {}")


def _is_named_tuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def default_convert(data):
    """NumPy arrays (and numbers) in ``data`` become tensors; containers are rebuilt around
    them.  What ``DataLoader`` applies to samples when it does not batch them.

    Example:
        >>> from tapegrad.utils.data import default_convert
        >>> default_convert({"a": np.array([1, 2]), "b": 3.0})
        {'a': tensor([1, 2]), 'b': 3.0}
    """
    if isinstance(data, Tensor):
        return data
    if type(data).__module__ == "numpy" and not isinstance(data, (np.str_, np.bytes_)):
        if isinstance(data, np.ndarray) and _STRING_ARRAY.search(data.dtype.str):
            return data
        return creation.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {key: default_convert(data[key]) for key in data})
    if _is_named_tuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def _rebuild_mapping(like, items):
    """A mapping of ``like``'s type holding ``items`` (a plain dict if that type cannot be
    made from one)."""
    try:
        if isinstance(like, collections.abc.MutableMapping):
            clone = copy.copy(like)
            clone.update(items)
            return clone
        return type(like)(items)
    except TypeError:
        return items


def _rebuild_sequence(like, items):
    try:
        if isinstance(like, collections.abc.MutableSequence):
            clone = copy.copy(like)
            for i, item in enumerate(items):
                clone[i] = item
            return clone
        return type(like)(items)
    except TypeError:
        return items


def default_collate(batch):
    """Put a list of samples together with a new leading batch dimension: tensors are
    stacked, NumPy arrays and numbers become tensors (Python floats float64, ints int64),
    strings stay a list, and dicts, named tuples, tuples and lists are collated field by
    field (a tuple of fields comes back as a list, as in PyTorch).

    Example:
        >>> from tapegrad.utils.data import default_collate
        >>> default_collate([(np.array([1.0, 2.0]), 0), (np.array([3.0, 4.0]), 1)])
        [tensor([[1., 2.],
                [3., 4.]]), tensor([0, 1])]
        >>> default_collate([{"x": 1.0, "name": "a"}, {"x": 2.0, "name": "b"}])
        {'x': tensor([1., 2.]), 'name': ['a', 'b']}
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return functional.stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        if _STRING_ARRAY.search(elem.dtype.str):
            raise TypeError(default_collate_err_msg_format.format(elem.dtype))
        return default_collate([creation.as_tensor(b) for b in batch])
    if isinstance(elem, (np.bool_, np.number, np.object_)):
        return creation.as_tensor(np.array(batch))
    if isinstance(elem, float):
        return creation.tensor(batch, dtype=float64)
    if isinstance(elem, int):   # bool is an int: a batch of bools is a bool tensor
        return creation.tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild_mapping(elem, {key: default_collate([d[key] for d in batch])
                                       for key in elem})
    if _is_named_tuple(elem):
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [default_collate(samples) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        return _rebuild_sequence(elem, columns)
    raise TypeError(default_collate_err_msg_format.format(type(elem)))


def get_worker_info():
    """None: batches are always loaded in the calling process.

    ``num_workers`` is accepted by ``DataLoader``, but tapegrad has no worker processes, so
    code that asks this inside a dataset always sees the main process.

    Example:
        >>> from tapegrad.utils.data import get_worker_info
        >>> get_worker_info() is None
        True
    """
    return None


# ---------------------------------------------------------------------------------------------
# DataLoader
# ---------------------------------------------------------------------------------------------
class DataLoader:
    """Iterate over ``dataset`` in batches of ``batch_size`` (None: samples one by one,
    unbatched), in order or, with ``shuffle=True``, in a fresh random order each epoch.

    The arguments are PyTorch's, with its checks; ``pin_memory`` changes nothing on the CPU,
    and ``num_workers``, ``prefetch_factor``, ``persistent_workers`` and ``timeout`` are
    accepted but batches are loaded in this process.

    Example:
        >>> from tapegrad.utils.data import DataLoader, TensorDataset
        >>> ds = TensorDataset(tg.arange(6.0).reshape(3, 2), tg.tensor([0, 1, 0]))
        >>> loader = DataLoader(ds, batch_size=2)
        >>> len(loader)
        2
        >>> for xb, yb in loader:
        ...     print(xb.shape, yb)
        tapegrad.Size([2, 2]) tensor([0, 1])
        tapegrad.Size([1, 2]) tensor([0])
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 "
                             "to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if worker_init_fn is not None and num_workers > 0:
            raise NotImplementedError(
                "DataLoader(worker_init_fn=...): tapegrad loads batches in the calling "
                "process, with no workers to initialise")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.in_order = in_order

        if isinstance(dataset, IterableDataset):
            if shuffle not in (None, False):
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")

        if sampler is None and not isinstance(dataset, IterableDataset):
            sampler = RandomSampler(dataset, generator=generator) if shuffle else \
                SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and sampler is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None or (
            isinstance(self.dataset, IterableDataset) and self.batch_size is not None)

    def __len__(self):
        if isinstance(self.dataset, IterableDataset):
            length = len(self.dataset)
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else \
                    math.ceil(length / self.batch_size)
            return length
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)

    def __iter__(self):
        # PyTorch's iterator draws its workers' base seed (an int64 random_()) when it is
        # made, before the sampler draws: the draw is made here too, so that the numbers
        # drawn after it are PyTorch's
        creation.stream_for(self.generator).full_range((), np.int64)
        if isinstance(self.dataset, IterableDataset):
            return self._iterate_stream()
        return self._iterate_map()

    def _iterate_map(self):
        if self.batch_sampler is None:
            for i in self.sampler:
                yield self.collate_fn(self.dataset[i])
            return
        gather = self._tensor_gather()
        # a dataset that fetches a whole batch at once (StackDataset) is asked so, as
        # PyTorch's loader asks it
        fetch_batch = getattr(self.dataset, "__getitems__", None)
        for indices in self.batch_sampler:
            if gather is not None:
                yield gather(indices)
            elif fetch_batch:
                yield self.collate_fn(fetch_batch(indices))
            else:
                yield self.collate_fn([self.dataset[i] for i in indices])

    def _tensor_gather(self):
        """For a TensorDataset collated by default_collate, each batch as one indexing of
        each tensor: the stacked rows, without a tensor per sample.  Only for tensors that
        require no grad (stacking records a StackBackward0 for those, indexing would not)."""
        dataset = self.dataset
        if self.collate_fn is not default_collate or type(dataset) is not TensorDataset or \
                any(t.requires_grad for t in dataset.tensors):
            return None

        def gather(indices):
            rows = np.asarray(indices, dtype=np.int64)
            return [creation.from_numpy(t._value[rows]) for t in dataset.tensors]
        return gather

    def _iterate_stream(self):
        it = iter(self.dataset)
        if self.batch_size is None:
            for sample in it:
                yield self.collate_fn(sample)
            return
        while True:
            batch = list(itertools.islice(it, self.batch_size))
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield self.collate_fn(batch)


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
