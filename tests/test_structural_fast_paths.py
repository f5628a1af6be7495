"""The short paths of small structural ops (issue "speed": getitem with ints and slices, the
transposes, reshape/view/flatten, cat/stack, sum/mean over one dim) record exactly what the
general paths record: the same values bit for bit, the same tape records and side data, the
same grad_fn and gradients.  Each short path is taken by a plain int dim or key; a NumPy
integer takes the general path, which is what they are compared with here."""
import numpy as np
import pytest
import torch

import tapegrad as tg
from tapegrad.tape import state


def _records(t):
    """The record of t and its side data, as the sweep reads them."""
    tape, r = t._tape, t._r
    ip = tape.ip[r]
    return (tape.op[r], tape.size[r], tape.fp[r], list(tape.aux[ip:ip + 3 * tape.size[r] + 8]))


def _fresh():
    state.tape = None


def _pair(make, shape=(4, 5, 3), n=1):
    rng = np.random.default_rng(7)
    values = [rng.standard_normal(shape) * 1e3 for _ in range(n)]
    out = []
    for plain in (True, False):
        _fresh()
        xs = [tg.tensor(v, requires_grad=True) for v in values]
        y = make(xs, plain)
        g = tg.tensor(np.linspace(-1.0, 2.0, y.numel()).reshape(tuple(y.shape)))
        rec = _records(y)
        name = y.grad_fn.name()
        y.backward(g)
        out.append((y.detach().numpy().tobytes(), rec, name,
                    [x.grad.numpy().tobytes() for x in xs]))
    return out


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_sum_and_mean_over_a_dim_record_as_the_general_path(op, dim, keepdim):
    fast, general = _pair(lambda xs, plain: getattr(xs[0], op)(
        dim if plain else np.int64(dim), keepdim=keepdim))
    assert fast == general


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("op", ["cat", "stack"])
def test_cat_and_stack_record_as_the_general_path(op, dim):
    fast, general = _pair(lambda xs, plain: getattr(tg, op)(
        xs, dim if plain else np.int64(dim)), n=3)
    assert fast == general


@pytest.mark.parametrize("key", [1, -1, (slice(None), 2), slice(1, 3), (0, slice(1, None, 2))])
def test_int_and_slice_keys_record_as_the_general_path(key):
    def make(xs, plain):
        if plain:
            return xs[0][key]
        np_key = tuple(np.int64(k) if type(k) is int else k
                       for k in (key if type(key) is tuple else (key,)))
        return xs[0][np_key + (Ellipsis,)]
    fast, general = _pair(make)
    assert fast == general


def test_views_of_tensors_of_one_shape_stay_apart():
    """The positions of small shapes are kept per shape, read-only: views of different
    tensors of that shape, and writes through them, do not meet."""
    a = tg.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True) * 1.0
    b = tg.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True) * 1.0
    ta, tb = a.t(), b.t()
    ra, rb = a[1], b[1]
    ta[0].mul_(10.0)
    ra.add_(1.0)
    ta_ = torch.arange(12.0).reshape(3, 4)
    ta_.t()[0].mul_(10.0)
    ta_[1].add_(1.0)
    np.testing.assert_array_equal(a.detach().numpy(), ta_.numpy())
    np.testing.assert_array_equal(b.detach().numpy(), np.arange(12.0).reshape(3, 4))
    np.testing.assert_array_equal(tb.detach().numpy(), np.arange(12.0).reshape(3, 4).T)
    np.testing.assert_array_equal(rb.detach().numpy(), [4.0, 5.0, 6.0, 7.0])
    assert a.t().stride() == (1, 4) and a[1].storage_offset() == 4
