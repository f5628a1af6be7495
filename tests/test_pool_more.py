"""Pools against PyTorch: ``ceil_mode`` (PyTorch's output-size rule and the divisor of a
partial average window), ``return_indices`` (flat positions, first maximum of a window,
nan taken as the maximum), max_pool3d/avg_pool3d, max_unpool1d/2d/3d with ``output_size``,
lp_pool1d/2d/3d and adaptive_max_pool1d/2d with indices, their modules and error texts;
values, gradients and grad_fn names, central differences, and a compiled replay."""
import re

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import tapegrad as tg
from tapegrad import nn
from tapegrad.nn import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _pool_size(size, k, s, p, d, ceil):
    """PyTorch's pooling_output_shape, written out here independently of the library."""
    length = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)) // s + 1
    if ceil and (length - 1) * s >= size + p:
        length -= 1
    return length


def _every_window_reads_the_input(spatial, kernel, stride, padding, dilation, ceil):
    """False when some window's taps all fall in the padding (possible with dilation):
    PyTorch's backward then writes outside the input, so no comparison is made there."""
    for size, k, s, p, d in zip(spatial, kernel, stride, padding, dilation):
        for w in range(max(0, _pool_size(size, k, s, p, d, ceil))):
            if not any(0 <= w * s - p + t * d < size for t in range(k)):
                return False
    return True


@st.composite
def pool_geometry(draw, n, dilation=True):
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(n))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(n))
    padding = tuple(draw(st.integers(0, k // 2)) for k in kernel)
    dil = tuple(draw(st.integers(1, 2)) for _ in range(n)) if dilation else (1,) * n
    spatial = tuple(draw(st.integers(1, 6)) for _ in range(n))
    ceil = draw(st.booleans())
    return kernel, stride, padding, dil, spatial, ceil


def _values(draw, shape, special=True):
    """Rounded values (ties between window elements), with nan and -inf sometimes."""
    x = np.round(np.random.default_rng(draw(st.integers(0, 2 ** 31))).standard_normal(shape), 0)
    if special and draw(st.booleans()):
        x.reshape(-1)[draw(st.integers(0, x.size - 1))] = np.nan
    if special and draw(st.booleans()):
        x[x < -0.5] = -np.inf
    return x


def _pair(x):
    return tg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)


def _check_backward(ours, theirs, xg, xt):
    w = np.arange(1.0, theirs.numel() + 1).reshape(tuple(theirs.shape))
    theirs.backward(torch.tensor(w))
    ours.backward(tg.tensor(w))
    np.testing.assert_array_equal(xg.grad.numpy(), xt.grad.numpy())


def _same_error(call_ours, call_theirs):
    with pytest.raises(Exception) as theirs:
        call_theirs()
    with pytest.raises(type(theirs.value)) as ours:
        call_ours()
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("n", [1, 2, 3])
@given(data=st.data())
def test_max_pool_values_indices_grads_as_pytorch(n, data):
    kernel, stride, padding, dil, spatial, ceil = data.draw(pool_geometry(n))
    x = _values(data.draw, (2, 2) + spatial)
    name = f"max_pool{n}d"
    try:
        getattr(TF, name)(torch.tensor(x), kernel, stride, padding, dil, ceil, True)
    except RuntimeError:
        _same_error(lambda: getattr(F, name)(tg.tensor(x), kernel, stride, padding, dil, ceil,
                                             True),
                    lambda: getattr(TF, name)(torch.tensor(x), kernel, stride, padding, dil,
                                              ceil, True))
        return
    assume(_every_window_reads_the_input(spatial, kernel, stride, padding, dil, ceil))
    xg, xt = _pair(x)
    og, ig = getattr(F, name)(xg, kernel, stride, padding, dil, ceil, return_indices=True)
    ot, it = getattr(TF, name)(xt, kernel, stride, padding, dil, ceil, return_indices=True)
    assert tuple(og.shape) == tuple(ot.shape)
    assert og.shape[2:] == tuple(_pool_size(*a, ceil) for a in
                                 zip(spatial, kernel, stride, padding, dil))
    np.testing.assert_array_equal(og.detach().numpy(), ot.detach().numpy())
    assert ig.dtype == tg.int64 and not ig.requires_grad
    np.testing.assert_array_equal(ig.numpy(), it.numpy())
    assert type(og.grad_fn).__name__ == type(ot.grad_fn).__name__
    _check_backward(og, ot, xg, xt)
    # without indices: the same values and node
    plain = getattr(F, name)(tg.tensor(x, requires_grad=True), kernel, stride, padding, dil,
                             ceil)
    np.testing.assert_array_equal(plain.detach().numpy(), ot.detach().numpy())
    assert type(plain.grad_fn).__name__ == type(ot.grad_fn).__name__
    # unbatched: one node as well
    og, ig = getattr(F, name)(tg.tensor(x[0], requires_grad=True), kernel, stride, padding,
                              dil, ceil, return_indices=True)
    ot, it = getattr(TF, name)(torch.tensor(x[0], requires_grad=True), kernel, stride,
                               padding, dil, ceil, return_indices=True)
    np.testing.assert_array_equal(ig.numpy(), it.numpy())
    assert type(og.grad_fn).__name__ == type(ot.grad_fn).__name__


@pytest.mark.parametrize("n", [1, 2, 3])
@given(data=st.data())
def test_avg_pool_ceil_mode_divisors_as_pytorch(n, data):
    kernel, stride, padding, _, spatial, ceil = data.draw(pool_geometry(n, dilation=False))
    include = data.draw(st.booleans())
    divisor = None if n == 1 else data.draw(st.sampled_from([None, None, 1, 3]))
    x = np.random.default_rng(data.draw(st.integers(0, 2 ** 31))).standard_normal(
        (2, 3) + spatial)
    name = f"avg_pool{n}d"
    args = (kernel, stride, padding, ceil, include) + ((divisor,) if n > 1 else ())
    try:
        getattr(TF, name)(torch.tensor(x), *args)
    except RuntimeError:
        _same_error(lambda: getattr(F, name)(tg.tensor(x), *args),
                    lambda: getattr(TF, name)(torch.tensor(x), *args))
        return
    xg, xt = _pair(x)
    og, ot = getattr(F, name)(xg, *args), getattr(TF, name)(xt, *args)
    assert tuple(og.shape) == tuple(ot.shape)
    np.testing.assert_allclose(og.detach().numpy(), ot.detach().numpy(), rtol=1e-13,
                               atol=1e-14)
    assert type(og.grad_fn).__name__ == type(ot.grad_fn).__name__
    w = np.arange(1.0, ot.numel() + 1).reshape(tuple(ot.shape))
    ot.backward(torch.tensor(w))
    og.backward(tg.tensor(w))
    np.testing.assert_allclose(xg.grad.numpy(), xt.grad.numpy(), rtol=1e-13, atol=1e-14)
    unbatched = (getattr(F, name)(tg.tensor(x[0], requires_grad=True), *args),
                 getattr(TF, name)(torch.tensor(x[0], requires_grad=True), *args))
    assert type(unbatched[0].grad_fn).__name__ == type(unbatched[1].grad_fn).__name__


def test_avg_pool_partial_window_divisor_by_hand():
    # length 5, kernel 3, stride 2, padding 1, ceil: windows start at -1, 1, 3 (the one at 5
    # would start in the right padding and is dropped); the last covers 3, 4 and the right
    # padding 5, so count_include_pad divides by 3, not counting the ceil overhang
    x = tg.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0]]])
    got = F.avg_pool1d(x, 3, 2, 1, ceil_mode=True)
    np.testing.assert_allclose(got.numpy(), [[[3.0 / 3, 9.0 / 3, 9.0 / 3]]])
    # length 6, kernel 2, stride 2... (no padding): ceil adds a window [6, 8) -> none;
    # length 5, kernel 2, stride 2: the partial window [4, 6) holds one element: divisor 1
    got = F.avg_pool1d(tg.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0]]]), 2, ceil_mode=True)
    np.testing.assert_allclose(got.numpy(), [[[1.5, 3.5, 5.0]]])
    got = F.avg_pool1d(tg.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0]]]), 3, 2, 1, ceil_mode=True,
                       count_include_pad=False)
    np.testing.assert_allclose(got.numpy(), [[[1.5, 3.0, 4.5]]])


def test_max_pool_ties_and_nan_pick_as_pytorch():
    x = np.array([[[[1.0, 1.0, 0.0], [1.0, np.nan, 2.0], [np.nan, 3.0, 3.0]]]])
    for ceil in (False, True):
        xg, xt = _pair(x)
        og, ig = F.max_pool2d(xg, 2, 1, ceil_mode=ceil, return_indices=True)
        ot, it = TF.max_pool2d(xt, 2, 1, ceil_mode=ceil, return_indices=True)
        np.testing.assert_array_equal(ig.numpy(), it.numpy())
        np.testing.assert_array_equal(og.detach().numpy(), ot.detach().numpy())
        _check_backward(og, ot, xg, xt)
    # a -inf first real element right of the padding keeps its index (PyTorch starts there)
    x = np.array([[[-np.inf, -np.inf, 1.0]]])
    og, ig = F.max_pool1d(tg.tensor(x), 3, 2, 1, return_indices=True)
    ot, it = TF.max_pool1d(torch.tensor(x), 3, 2, 1, return_indices=True)
    np.testing.assert_array_equal(ig.numpy(), it.numpy())


def test_max_pool_gradient_central_difference():
    rng = np.random.default_rng(3)
    x = rng.permutation(50).reshape(1, 2, 5, 5) * 0.1    # distinct: no kinks nearby
    for n, shape, call in ((2, x.shape, lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True)),
                           (2, x.shape, lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=True,
                                                              count_include_pad=False)),
                           (1, (2, 25), lambda t: F.lp_pool1d(t, 2.0, 4, 3, ceil_mode=True))):
        values = x.reshape(shape) + (1.0 if n == 1 else 0.0)   # lp: positive values
        xg = tg.tensor(values, requires_grad=True)
        out = call(xg)
        w = np.random.default_rng(4).standard_normal(tuple(out.shape))
        (out * tg.tensor(w)).sum().backward()
        numeric = np.zeros_like(values)
        h = 1e-6
        for i in np.ndindex(values.shape):
            up, down = values.copy(), values.copy()
            up[i] += h
            down[i] -= h
            numeric[i] = ((call(tg.tensor(up)).numpy() * w).sum()
                          - (call(tg.tensor(down)).numpy() * w).sum()) / (2 * h)
        np.testing.assert_allclose(xg.grad.numpy(), numeric, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("n", [1, 2, 3])
@given(data=st.data())
def test_max_unpool_as_pytorch(n, data):
    kernel = data.draw(st.integers(1, 3))
    stride = data.draw(st.integers(1, 3))
    padding = data.draw(st.integers(0, kernel // 2))
    spatial = tuple(data.draw(st.integers(2, 6)) for _ in range(n))
    x = _values(data.draw, (2, 2) + spatial, special=False)
    try:
        pooled, idx = getattr(TF, f"max_pool{n}d")(torch.tensor(x), kernel, stride, padding,
                                                  return_indices=True)
    except RuntimeError:
        return
    default = [(s - 1) * stride - 2 * padding + kernel for s in pooled.shape[2:]]
    size = None
    if data.draw(st.booleans()):
        size = [d + data.draw(st.integers(-stride, stride)) for d in default]
    name = f"max_unpool{n}d"
    ours = (tg.tensor(pooled.numpy(), requires_grad=True), tg.tensor(idx.numpy()))
    theirs = (pooled.clone().requires_grad_(), idx)
    try:
        ot = getattr(TF, name)(*theirs, kernel, stride, padding, size)
    except (RuntimeError, ValueError) as exc:
        if not str(exc).startswith("Found an invalid max index"):
            _same_error(lambda: getattr(F, name)(*ours, kernel, stride, padding, size),
                        lambda: getattr(TF, name)(*theirs, kernel, stride, padding, size))
            return
        # which of several wrong indices PyTorch names depends on how its threads split
        # the planes (one wrong index: test_max_unpool_errors_as_pytorch): the text else
        with pytest.raises(RuntimeError) as got:
            getattr(F, name)(*ours, kernel, stride, padding, size)
        named = int(re.search(r"index: (-?\d+)", str(got.value)).group(1))
        plane = int(np.prod(re.search(r"size ([\dx]+)\)", str(got.value)).group(1)
                            .split("x"), dtype=np.int64))
        assert named in idx.numpy() and not 0 <= named < plane
        assert re.sub(r"index: -?\d+", "", str(got.value)) == \
            re.sub(r"index: -?\d+", "", str(exc))
        return
    assume(ot.numel() > 0)   # (PyTorch's backward of an empty unpool fails)
    og = getattr(F, name)(*ours, kernel, stride, padding, size)
    np.testing.assert_array_equal(og.detach().numpy(), ot.detach().numpy())
    assert type(og.grad_fn).__name__ == type(ot.grad_fn).__name__
    _check_backward(og, ot, ours[0], theirs[0])


def test_max_unpool_repeated_indices_give_every_value_the_gradient():
    # overlapping windows share a maximum: PyTorch's gradient gathers at every index
    x = np.array([[[0.0, 5.0, 1.0, 0.0, 2.0]]])
    pooled, idx = TF.max_pool1d(torch.tensor(x), 2, 1, return_indices=True)
    assert len(set(idx.reshape(-1).tolist())) < idx.numel()
    pt = pooled.clone().requires_grad_()
    pg = tg.tensor(pooled.numpy(), requires_grad=True)
    ot = TF.max_unpool1d(pt, idx, 2, 1)
    og = F.max_unpool1d(pg, tg.tensor(idx.numpy()), 2, 1)
    np.testing.assert_array_equal(og.detach().numpy(), ot.detach().numpy())
    _check_backward(og, ot, pg, pt)
    assert (pg.grad.numpy() != 0).all()


def test_max_unpool_errors_as_pytorch():
    xt, it = TF.max_pool2d(torch.arange(16.0).reshape(1, 1, 4, 4), 2, return_indices=True)
    xg, ig = tg.tensor(xt.numpy()), tg.tensor(it.numpy())
    bad = it.clone()
    bad[0, 0, 1, 0] = 40
    cases = [
        ((xg, ig, 2), (xt, it, 2), {"output_size": (7, 7)}),
        ((xg, ig, 2), (xt, it, 2), {"output_size": [1, 1, 3]}),
        ((xg, ig, 2), (xt, it, 2), {"output_size": [1, 9, 3, 3, 3]}),
        ((xg, tg.tensor(bad.numpy()), 2), (xt, bad, 2), {}),
        ((xg, ig.double(), 2), (xt, it.double(), 2), {}),
        ((xg, ig[..., :1], 2), (xt, it[..., :1], 2), {}),
        ((xg[0, 0], ig[0, 0], 2), (xt[0, 0], it[0, 0], 2), {}),
    ]
    for ours, theirs, kw in cases:
        _same_error(lambda: F.max_unpool2d(*ours, **kw), lambda: TF.max_unpool2d(*theirs, **kw))
    _same_error(lambda: F.max_unpool1d(tg.zeros(1, 1, 1), tg.zeros(1, 1, 1, dtype=tg.int64),
                                       2, 2, 1, [-1]),
                lambda: TF.max_unpool1d(torch.zeros(1, 1, 1),
                                        torch.zeros(1, 1, 1, dtype=torch.long), 2, 2, 1, [-1]))
    # every index out of range: which one PyTorch names depends on how its threads split
    # the planes (its text names 107 or 115 here, from one run to the next), so the text is
    # compared without the number, which must be one of the wrong indices
    wrong = ig[None] + 100
    with pytest.raises(RuntimeError) as theirs:
        TF.max_unpool3d(xt[None], it[None] + 100, 2)
    with pytest.raises(RuntimeError) as ours:
        F.max_unpool3d(xg[None], wrong, 2)
    named = int(re.search(r"index: (-?\d+)", str(ours.value)).group(1))
    assert named in wrong.numpy()
    assert re.sub(r"index: -?\d+", "", str(ours.value)) == \
        re.sub(r"index: -?\d+", "", str(theirs.value))


def test_pool_errors_as_pytorch():
    x = np.zeros((1, 2, 4, 4))
    calls = [("max_pool2d", (x, 7)), ("max_pool2d", (x, 2, 1, 2)),
             ("max_pool3d", (x[None], 7)), ("avg_pool2d", (x, 7)),
             ("avg_pool3d", (x[None], 7)), ("avg_pool1d", (x[0], 7)),
             ("max_pool1d", (x[0], 7)), ("max_pool2d", (x, 5, 1, 0, 1, True))]
    for name, (array, *rest) in calls:
        _same_error(lambda: getattr(F, name)(tg.tensor(array), *rest),
                    lambda: getattr(TF, name)(torch.tensor(array), *rest))
    _same_error(lambda: F.max_pool1d(tg.tensor(x[0]), 7, return_indices=True),
                lambda: TF.max_pool1d(torch.tensor(x[0]), 7, return_indices=True))
    _same_error(lambda: F.adaptive_max_pool1d(tg.tensor(x[0]), (1, 2)),
                lambda: TF.adaptive_max_pool1d(torch.tensor(x[0]), (1, 2)))
    _same_error(lambda: F.avg_pool2d(tg.tensor(x), 2, divisor_override=0),
                lambda: TF.avg_pool2d(torch.tensor(x), 2, divisor_override=0))


@pytest.mark.parametrize("n", [1, 2, 3])
@given(data=st.data())
def test_lp_pool_as_pytorch(n, data):
    kernel, stride, _, _, spatial, ceil = data.draw(pool_geometry(n, dilation=False))
    norm = data.draw(st.sampled_from([1.0, 2.0, 3.0, 1.5, float("inf"), -float("inf")]))
    stride = data.draw(st.sampled_from([stride, None]))
    x = np.abs(np.random.default_rng(data.draw(st.integers(0, 2 ** 31))).standard_normal(
        (2, 2) + spatial)) + 0.1
    name = f"lp_pool{n}d"
    if n == 1:      # (PyTorch's lp_pool1d multiplies by kernel_size: an int only)
        kernel = kernel[0]
    try:
        getattr(TF, name)(torch.tensor(x), norm, kernel, stride, ceil)
    except RuntimeError:
        _same_error(lambda: getattr(F, name)(tg.tensor(x), norm, kernel, stride, ceil),
                    lambda: getattr(TF, name)(torch.tensor(x), norm, kernel, stride, ceil))
        return
    xg, xt = _pair(x)
    og = getattr(F, name)(xg, norm, kernel, stride, ceil)
    ot = getattr(TF, name)(xt, norm, kernel, stride, ceil)
    np.testing.assert_allclose(og.detach().numpy(), ot.detach().numpy(), rtol=1e-12)
    assert type(og.grad_fn).__name__ == type(ot.grad_fn).__name__
    w = np.arange(1.0, ot.numel() + 1).reshape(tuple(ot.shape))
    ot.backward(torch.tensor(w))
    og.backward(tg.tensor(w))
    np.testing.assert_allclose(xg.grad.numpy(), xt.grad.numpy(), rtol=1e-11, atol=1e-13)


@given(data=st.data())
def test_adaptive_max_pool_indices_as_pytorch(data):
    n = data.draw(st.sampled_from([1, 2]))
    spatial = tuple(data.draw(st.integers(1, 6)) for _ in range(n))
    out = tuple(data.draw(st.integers(1, 4)) for _ in range(n))
    x = _values(data.draw, (2, 3) + spatial)
    xg, xt = _pair(x)
    name = f"adaptive_max_pool{n}d"
    og, ig = getattr(F, name)(xg, out if n == 2 else out[0], True)
    ot, it = getattr(TF, name)(xt, out if n == 2 else out[0], True)
    np.testing.assert_array_equal(og.detach().numpy(), ot.detach().numpy())
    np.testing.assert_array_equal(ig.numpy(), it.numpy())
    assert ig.dtype == tg.int64
    assert type(og.grad_fn).__name__ == type(ot.grad_fn).__name__
    _check_backward(og, ot, xg, xt)


def test_modules_as_pytorch():
    rng = np.random.default_rng(5)
    x3, x4, x5 = (rng.standard_normal(s) for s in ((2, 3, 7), (2, 3, 7, 6), (1, 2, 5, 4, 5)))
    pairs = [
        ("MaxPool1d", (3, 2, 1), {"ceil_mode": True, "return_indices": True}, x3),
        ("MaxPool2d", (3, 2, 1), {"ceil_mode": True, "return_indices": True}, x4),
        ("MaxPool3d", (2,), {"ceil_mode": True, "return_indices": True}, x5),
        ("AvgPool1d", (3, 2, 1), {"ceil_mode": True, "count_include_pad": False}, x3),
        ("AvgPool2d", (3, 2, 1), {"ceil_mode": True, "divisor_override": 2}, x4),
        ("AvgPool3d", (2,), {"ceil_mode": True}, x5),
        ("LPPool1d", (2, 3), {"ceil_mode": True}, np.abs(x3)),
        ("LPPool2d", (3, 2, 1), {}, np.abs(x4)),
        ("LPPool3d", (1, 2), {}, x5),
        ("AdaptiveMaxPool1d", (3,), {"return_indices": True}, x3),
        ("AdaptiveMaxPool2d", ((2, 3),), {"return_indices": True}, x4),
    ]
    for name, args, kw, x in pairs:
        ours, theirs = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
        assert repr(ours) == repr(theirs)
        og, ot = ours(tg.tensor(x)), theirs(torch.tensor(x))
        og, ot = (og if isinstance(og, tuple) else (og,)), (ot if isinstance(ot, tuple)
                                                            else (ot,))
        for a, b in zip(og, ot):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-13)
    for n, shape in ((1, (2, 3, 7)), (2, (2, 3, 7, 6)), (3, (1, 2, 5, 4, 5))):
        x = rng.standard_normal(shape)
        pool = getattr(torch.nn, f"MaxPool{n}d")(2, return_indices=True)
        out, idx = pool(torch.tensor(x))
        ours = getattr(nn, f"MaxUnpool{n}d")(2)
        theirs = getattr(torch.nn, f"MaxUnpool{n}d")(2)
        assert repr(ours) == repr(theirs)
        got = ours(tg.tensor(out.numpy()), tg.tensor(idx.numpy()), output_size=list(shape))
        np.testing.assert_array_equal(got.numpy(),
                                      theirs(out, idx, output_size=list(shape)).numpy())


def test_with_indices_functions():
    x = np.random.default_rng(6).standard_normal((2, 2, 5, 5, 5))
    for n in (1, 2, 3):
        a = x[(0,) * (3 - n)]
        og, ig = getattr(F, f"max_pool{n}d_with_indices")(tg.tensor(a), 2, ceil_mode=True)
        ot, it = getattr(TF, f"max_pool{n}d_with_indices")(torch.tensor(a), 2, ceil_mode=True)
        np.testing.assert_array_equal(og.numpy(), ot.numpy())
        np.testing.assert_array_equal(ig.numpy(), it.numpy())


def test_compiled_pool_and_unpool_replay_equal_eager():
    def fn(x):
        # SegNet's pool and unpool (no overlap, a partial last window), GoogLeNet's pools
        out, idx = F.max_pool2d(x, 2, ceil_mode=True, return_indices=True)
        back = F.max_unpool2d(out * 2.0, idx, 2, output_size=x.shape[-2:])
        overlapping = F.max_pool2d(x, 3, 2, 1, ceil_mode=True).exp().sum()
        return back.pow(3).sum() + overlapping + F.avg_pool2d(
            x, 3, 2, 1, ceil_mode=True, count_include_pad=False).pow(2).sum(), idx
    compiled = tg.compile(fn)
    rng = np.random.default_rng(7)
    for k in range(4):
        x = np.round(rng.standard_normal((2, 3, 6, 5)), 1)
        if k == 2:
            x[0, 0, 1, 1] = np.nan
        xe, xc = tg.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True)
        (want, want_idx), (got, got_idx) = fn(xe), compiled(xc)
        np.testing.assert_array_equal(got_idx.numpy(), want_idx.numpy())
        # (a replay's sums may add in another order)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-13)
        want.backward()
        got.backward()
        np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), rtol=1e-13, atol=1e-14)
        # and PyTorch's
        xt = torch.tensor(x, requires_grad=True)
        out, idx = TF.max_pool2d(xt, 2, ceil_mode=True, return_indices=True)
        np.testing.assert_array_equal(got_idx.numpy(), idx.numpy())
    assert compiled.stats.replays == 3, compiled.stats.eager_reasons
    # repeated indices (overlapping windows sharing a maximum) leave the replay: eager,
    # with PyTorch's gradient
    def overlapping(x):
        out, idx = F.max_pool2d(x, 3, 1, ceil_mode=True, return_indices=True)
        return F.max_unpool2d(out, idx, 3, 1).pow(2).sum()
    compiled = tg.compile(overlapping)
    for x in (rng.standard_normal((1, 2, 5, 5)), np.zeros((1, 2, 5, 5))):
        xe, xc, xt = tg.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True), \
            torch.tensor(x, requires_grad=True)
        overlapping(xe).backward()
        compiled(xc).backward()
        out, idx = TF.max_pool2d(xt, 3, 1, ceil_mode=True, return_indices=True)
        TF.max_unpool2d(out, idx, 3, 1).pow(2).sum().backward()
        np.testing.assert_array_equal(xc.grad.numpy(), xe.grad.numpy())
        np.testing.assert_array_equal(xc.grad.numpy(), xt.grad.numpy())
