"""Running a program that draws random numbers in tapegrad and in PyTorch after the same
seed, and comparing the results bit for bit (tests/test_random_numbers.py and
tests/test_random_ops.py)."""
import numpy as np

import tapegrad as tg


def values(t):
    if isinstance(t, (list, tuple)):
        return np.asarray(t)
    if hasattr(t, "detach"):
        t = t.detach()
    return np.asarray(t.numpy())


def assert_same_bits(a, b):
    a, b = values(a), values(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype.kind == b.dtype.kind or {a.dtype.kind, b.dtype.kind} <= {"i", "u"}
    np.testing.assert_array_equal(a, b)


def both(torch, seed):
    tg.manual_seed(seed)
    torch.manual_seed(seed)


def draws_match(torch, make, seed=0):
    """``make(lib)`` run after the same seed on both libraries (a tuple: outputs compared
    one by one), then a draw after it: the stream is left where PyTorch leaves it."""
    both(torch, seed)
    mine, theirs = make(tg), make(torch)
    if isinstance(mine, tuple):
        assert len(mine) == len(theirs)
        for a, b in zip(mine, theirs):
            assert_same_bits(a, b)
    else:
        assert_same_bits(mine, theirs)
    assert_same_bits(tg.rand(3), torch.rand(3))
