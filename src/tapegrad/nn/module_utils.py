"""The small argument helpers of PyTorch's ``nn.modules.utils``, which custom layers import
(``_pair(kernel_size)``, ``_single(stride)``) and state-dict code calls
(``consume_prefix_in_state_dict_if_present``: the ``"module."`` a wrapped model's keys
carry)."""
import collections.abc
import itertools

__all__ = ["consume_prefix_in_state_dict_if_present"]


def _ntuple(n, name="parse"):
    """A function making an n-tuple of its argument: an iterable becomes a tuple as it is
    (of whatever length), anything else is repeated n times."""
    def parse(x):
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(itertools.repeat(x, n))
    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n):
    """t's elements from last to first, each n times: the per-dim padding of ``F.pad``
    (whose pairs go from the last dim) from a tuple given first dim first."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults):
    """An adaptive pool's output size with each None taken from ``defaults`` (the input's
    trailing dims); an int is returned as it is."""
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d
            for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict, prefix):
    """Strip ``prefix`` from the keys of ``state_dict`` that begin with it, in place (and
    from the keys of its ``_metadata``, if it has one): a state dict saved from a wrapped
    model (``"module.fc.weight"``) loaded into the bare one."""
    for key in list(state_dict.keys()):   # (popped and put back in order: order kept)
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in list(metadata.keys()):
            # "" is the wrapper's own entry, kept; the wrapped model's is the prefix without
            # its dot ("module"), and its children's begin with the prefix
            if len(key) == 0:
                continue
            if key == prefix.replace(".", "") or key.startswith(prefix):
                metadata[key[len(prefix):]] = metadata.pop(key)
