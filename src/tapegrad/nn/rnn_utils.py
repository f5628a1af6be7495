"""``tapegrad.nn.utils.rnn``: padding and packing variable-length sequences, as
``torch.nn.utils.rnn`` -- ``pad_sequence``/``unpad_sequence``, the ``PackedSequence`` tuple,
``pack_padded_sequence``/``pad_packed_sequence`` and ``pack_sequence``/``unpack_sequence``.

Everything is built from recorded ops (slices, cat, index_select, slice assignment), so the
gradients flow back to the padded or listed inputs; the packing node is shown under PyTorch's
name ``PackPaddedSequenceBackward0``.  ``batch_sizes`` and the index tensors are int64 CPU
tensors, as in PyTorch.
"""
from collections import namedtuple

import tapegrad as tg
from tapegrad.functional import named_node as _named
from tapegrad.tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]


def invert_permutation(permutation):
    """The inverse of a permutation given as an index tensor (None stays None).

    Example:
        >>> nn.utils.rnn.invert_permutation(tg.tensor([2, 0, 1]))
        tensor([1, 2, 0])
    """
    if permutation is None:
        return None
    output = tg.empty_like(permutation)
    output.scatter_(0, permutation, tg.arange(permutation.numel(), dtype=permutation.dtype))
    return output


_PackedBase = namedtuple("PackedSequence_",
                         ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


class PackedSequence(_PackedBase):
    """The data of a batch of variable-length sequences packed time step by time step:
    ``data`` holds the first step of every sequence (longest first), then the second step of
    every sequence still running, ...; ``batch_sizes[t]`` says how many sequences are at step
    ``t``.  ``sorted_indices`` (None when the batch came sorted) says which original sequence
    is at each position, ``unsorted_indices`` is its inverse.

    Built by ``pack_padded_sequence`` or ``pack_sequence``, accepted and returned by the
    recurrent layers, undone by ``pad_packed_sequence``.

    Example:
        >>> p = nn.utils.rnn.pack_sequence([tg.tensor([1., 2.]), tg.tensor([3.])])
        >>> p.data, p.batch_sizes
        (tensor([1., 3., 2.]), tensor([2, 1]))
    """

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is not None:
            # as PyTorch: batch_sizes is an int64 tensor on the CPU
            if batch_sizes.device.type != "cpu":
                raise ValueError(
                    "batch_sizes should always be on CPU. Instances of PackedSequence should "
                    "never be created manually. They should be instantiated by functions like "
                    "pack_sequence and pack_padded_sequences in nn.utils.rnn. "
                    "https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence")
            return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)
        # PyTorch's legacy form: PackedSequence((data, batch_sizes))
        if isinstance(data, (list, tuple)) and len(data) == 2:
            return super().__new__(cls, data[0], data[1], sorted_indices, unsorted_indices)
        raise TypeError(f"PackedSequence: expected a (data, batch_sizes) pair or a data "
                        f"tensor with batch_sizes, got {type(data).__name__}")

    def _with_data(self, data):
        """The same packing around other data; the index tensors follow it to its device."""
        if data is self.data:
            return self
        move = (lambda t: None if t is None else t.to(data.device))
        return type(self)(data, self.batch_sizes, move(self.sorted_indices),
                          move(self.unsorted_indices))

    def to(self, *args, **kwargs):
        """``data.to(*args, **kwargs)``, the index tensors moved to its device (not its dtype);
        self when nothing changes."""
        return self._with_data(self.data.to(*args, **kwargs))

    def cuda(self, *args, **kwargs):
        return self._with_data(self.data.cuda(*args, **kwargs))

    def cpu(self, *args, **kwargs):
        return self._with_data(self.data.cpu(*args, **kwargs))

    def pin_memory(self):
        return self

    def is_pinned(self):
        return False

    def double(self):
        return self.to(dtype=tg.float64)

    def float(self):
        return self.to(dtype=tg.float32)

    def half(self):
        return self.to(dtype=tg.float16)

    def long(self):
        return self.to(dtype=tg.int64)

    def int(self):
        return self.to(dtype=tg.int32)

    def short(self):
        return self.to(dtype=tg.int16)

    def char(self):
        return self.to(dtype=tg.int8)

    def byte(self):
        return self.to(dtype=tg.uint8)

    @property
    def is_cuda(self):
        return self.data.is_cuda


def _lengths_tensor(lengths):
    """PyTorch's conversion: a list becomes an int64 CPU tensor, a tensor is cast to int64."""
    if not isinstance(lengths, Tensor):
        return tg.as_tensor(lengths, dtype=tg.int64)
    return lengths.to(dtype=tg.int64)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack tensors of different lengths (first dimension) into one, padding each with
    ``padding_value`` on ``padding_side`` up to the longest; ``(L_max, B, *)``, or
    ``(B, L_max, *)`` with ``batch_first``.  A tensor is taken as the list of its slices.

    Example:
        >>> nn.utils.rnn.pad_sequence([tg.tensor([1., 2.]), tg.tensor([3.])], batch_first=True)
        tensor([[1., 2.],
                [3., 0.]])
    """
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    elif not isinstance(sequences, (list, tuple)):
        try:
            sequences = list(sequences)
        except TypeError:
            raise RuntimeError("pad_sequence: Expected iterable for input sequences, but got "
                               f"arg of type: {type(sequences)}") from None
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    if len(sequences) == 0:
        raise RuntimeError("received an empty list of sequences")
    first = sequences[0]
    if first.ndim == 0:
        raise RuntimeError("ArrayRef: invalid slice, N = 1; size = 0")
    longest = max(s.shape[0] for s in sequences)
    trailing = tuple(first.shape[1:])
    shape = (len(sequences), longest) + trailing if batch_first \
        else (longest, len(sequences)) + trailing
    # filled by slice assignment, PyTorch's way: the graph shows its chain of CopySlices
    out = tg.full(shape, padding_value, dtype=first.dtype)
    for i, seq in enumerate(sequences):
        n = seq.shape[0]
        _check_fits((n,) + trailing, tuple(seq.shape))
        span = slice(0, n) if padding_side == "right" else slice(longest - n, longest)
        if batch_first:
            out[i, span] = seq
        else:
            out[span, i] = seq
    return out


def _check_fits(target, shape):
    """PyTorch copies each sequence into its slot, broadcasting: a size that is neither the
    slot's nor 1 fails with the broadcast text, naming the rightmost clash."""
    ndim = max(len(target), len(shape))
    a = (1,) * (ndim - len(target)) + target
    b = (1,) * (ndim - len(shape)) + shape
    for dim in range(ndim - 1, -1, -1):
        if a[dim] != b[dim] and a[dim] != 1 and b[dim] != 1:
            raise RuntimeError(f"The size of tensor a ({a[dim]}) must match the size of "
                               f"tensor b ({b[dim]}) at non-singleton dimension {dim}")


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences in a padded batch, each cut to its length: the inverse of
    ``pad_sequence`` (right padding).  As PyTorch's, without ``batch_first`` it transposes
    ``padded_sequences`` in place.

    Example:
        >>> padded = tg.tensor([[1., 3.], [2., 0.]])
        >>> nn.utils.rnn.unpad_sequence(padded, tg.tensor([2, 1]))
        [tensor([1., 2.]), tensor([3.])]
    """
    if not batch_first:
        padded_sequences.transpose_(0, 1)
    idx = tg.arange(padded_sequences.shape[1])
    return [seq[idx < length] for seq, length in zip(padded_sequences, lengths)]


def _pack(input, lengths, batch_first):
    """The packing itself with PyTorch's checks (its ``_pack_padded_sequence``); returns
    ``(data, batch_sizes)`` for lengths sorted longest first."""
    if lengths.ndim != 1 or lengths.device.type != "cpu":
        raise RuntimeError(
            f"'lengths' argument should be a 1D CPU int64 tensor, but got {lengths.ndim}D "
            f"{lengths.device.type} {lengths.dtype.scalar_name} tensor")
    if batch_first:
        input = input.transpose(0, 1)
    if input.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    batch = input.shape[1]
    if lengths.shape[0] != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{lengths.shape[0]} (batch_size={batch})")
    values = [int(v) for v in lengths.tolist()]
    if values[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    for longer, shorter in zip(values, values[1:]):
        if shorter > longer:
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                "pack_sequence to sidestep this requirement if you do not need ONNX "
                "exportability.")
    sizes = [sum(1 for n in values if n > t) for t in range(values[0])]
    data = tg.cat([input[t, :size] for t, size in enumerate(sizes)])
    return data, tg.tensor(sizes, dtype=tg.int64)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``) of sequences
    of the given ``lengths`` into a ``PackedSequence``.  With ``enforce_sorted`` the lengths
    must be decreasing; otherwise the batch is sorted here and the order kept in
    ``sorted_indices``.

    Example:
        >>> x = tg.tensor([[1., 3.], [2., 0.]])
        >>> nn.utils.rnn.pack_padded_sequence(x, [2, 1]).data
        tensor([1., 3., 2.])
    """
    lengths = _lengths_tensor(lengths)
    if enforce_sorted:
        sorted_indices = None
    else:
        lengths, sorted_indices = tg.sort(lengths, descending=True)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    data, batch_sizes = _pack(input, lengths, batch_first)
    _named(data, "PackPaddedSequenceBackward0", input)
    return PackedSequence(data, batch_sizes, sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Undo ``pack_padded_sequence``: the padded batch ``(T, B, *)`` (``(B, T, *)`` with
    ``batch_first``) in the original order, and the lengths (int64).  ``total_length`` pads
    to that many steps instead of the longest sequence's.

    Example:
        >>> p = nn.utils.rnn.pack_sequence([tg.tensor([1., 2.]), tg.tensor([3.])])
        >>> nn.utils.rnn.pad_packed_sequence(p, batch_first=True)
        (tensor([[1., 2.],
                [3., 0.]]), tensor([2, 1]))
    """
    sizes = [int(v) for v in sequence.batch_sizes.tolist()]
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError("Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and "
                             f"max sequence length being {steps}")
        steps = total_length
    data = sequence.data
    batch = sizes[0]
    trailing = tuple(data.shape[1:])
    # time-major, then transposed for batch_first: PyTorch's order (TransposeBackward0 on top)
    out = tg.full((steps, batch) + trailing, padding_value, dtype=data.dtype)
    offset = 0
    for t, size in enumerate(sizes):
        out[t, :size] = data[offset:offset + size]
        offset += size
    if batch_first:
        out = out.transpose(0, 1)
    lengths = tg.tensor([sum(1 for s in sizes if s > b) for b in range(batch)],
                        dtype=tg.int64)
    if sequence.unsorted_indices is not None:
        unsorted = sequence.unsorted_indices
        return out.index_select(0 if batch_first else 1, unsorted), lengths[unsorted]
    return out, lengths


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of sequences (tensors ``(L_i, *)``) into a ``PackedSequence``: with
    ``enforce_sorted`` they must come longest first.

    Example:
        >>> nn.utils.rnn.pack_sequence([tg.tensor([1.]), tg.tensor([2., 3.])],
        ...                            enforce_sorted=False).sorted_indices
        tensor([1, 0])
    """
    lengths = tg.as_tensor([s.shape[0] for s in sequences], dtype=tg.int64)
    return pack_padded_sequence(pad_sequence(sequences), lengths,
                                enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences in a ``PackedSequence``, in their original order.

    Example:
        >>> p = nn.utils.rnn.pack_sequence([tg.tensor([1., 2.]), tg.tensor([3.])])
        >>> nn.utils.rnn.unpack_sequence(p)
        [tensor([1., 2.]), tensor([3.])]
    """
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
