"""Transposed convolutions (``F.conv_transpose1d/2d``, ``nn.ConvTranspose1d/2d``) and the
sliding blocks of a convolution (``F.unfold``/``F.fold``, ``nn.Unfold``/``nn.Fold``) against
PyTorch: values, input and parameter gradients, node names, seeded initial weights, reprs,
``output_size`` and the errors; central differences for one case; compiled replays."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import tapegrad as tg
from tapegrad import nn
from tapegrad.nn import functional as F


def _node(lib, t):
    return type(t.grad_fn).__name__ if lib is torch else t.grad_fn.name()


def _run(lib, n, arrays, kwargs):
    """The transposed convolution of ``arrays`` (input, weight[, bias]), backward with a
    fixed gradient: (value, node name, the inputs' gradients)."""
    tensors = [lib.tensor(a, requires_grad=True) for a in arrays]
    out = getattr(lib.nn.functional, f"conv_transpose{n}d")(*tensors, **kwargs)
    seed = np.cos(np.arange(out.numel(), dtype=np.float64)).reshape(tuple(out.shape))
    out.backward(lib.tensor(seed))
    return (out.detach().numpy().copy(), _node(lib, out),
            [t.grad.numpy().copy() for t in tensors])


def _compare(n, arrays, kwargs):
    (mine, my_node, my_grads), (theirs, their_node, their_grads) = (
        _run(tg, n, arrays, kwargs), _run(torch, n, arrays, kwargs))
    assert my_node == their_node
    assert mine.shape == theirs.shape
    np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-13)
    for a, b in zip(my_grads, their_grads):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


@st.composite
def _geometry(draw, n):
    groups = draw(st.integers(1, 3))
    in_channels = groups * draw(st.integers(1, 2))
    out_per_group = draw(st.integers(1, 2))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(n))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(n))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(n))
    padding = tuple(draw(st.integers(0, 2)) for _ in range(n))
    output_padding = tuple(draw(st.integers(0, max(s, d) - 1)) for s, d in zip(stride, dilation))
    sizes = tuple(draw(st.integers(1, 4)) for _ in range(n))
    batch = draw(st.sampled_from([None, 1, 2]))       # None: unbatched
    bias = draw(st.booleans())
    seed = draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(((batch,) if batch else ()) + (in_channels,) + sizes)
    w = rng.standard_normal((in_channels, out_per_group) + kernel)
    arrays = [x, w] + ([rng.standard_normal(out_per_group * groups)] if bias else [])
    kwargs = dict(stride=stride, padding=padding, output_padding=output_padding,
                  groups=groups, dilation=dilation)
    return arrays, kwargs


@pytest.mark.parametrize("n", [1, 2, 3])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_matches_torch_over_geometries(n, data):
    arrays, kwargs = data.draw(_geometry(n))
    outs = [(kwargs["padding"][d], kwargs["dilation"][d], arrays[1].shape[2 + d])
            for d in range(n)]
    sizes = arrays[0].shape[-n:]
    if any((size - 1) * kwargs["stride"][d] - 2 * p + dil * (k - 1)
           + kwargs["output_padding"][d] + 1 < 1
           for d, (size, (p, dil, k)) in enumerate(zip(sizes, outs))):
        return          # an empty output: the error is tested below
    _compare(n, arrays, kwargs)


def test_plain_call_and_integer_arguments():
    rng = np.random.default_rng(1)
    _compare(2, [rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((3, 2, 3, 3)),
                 rng.standard_normal(2)], dict(stride=2, padding=1, output_padding=1))
    _compare(1, [rng.standard_normal((1, 2, 6)), rng.standard_normal((2, 3, 4))], {})
    # padding past the kernel's reach cuts the spread input
    _compare(1, [rng.standard_normal((1, 2, 6)), rng.standard_normal((2, 1, 2))],
             dict(stride=3, padding=2))


def test_gradients_match_central_differences():
    rng = np.random.default_rng(2)
    x0, w0 = rng.standard_normal((1, 2, 3, 3)), rng.standard_normal((2, 2, 2, 3))
    kwargs = dict(stride=(2, 1), padding=(0, 1), dilation=(1, 2), output_padding=(1, 0))

    def loss(x, w):
        out = F.conv_transpose2d(tg.tensor(x), tg.tensor(w), **kwargs)
        return float((out * out).sum().item())
    x, w = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
    (F.conv_transpose2d(x, w, **kwargs) ** 2).sum().backward()
    h = 1e-6
    for array, grad, which in ((x0, x.grad.numpy(), 0), (w0, w.grad.numpy(), 1)):
        for i in range(0, array.size, 5):
            up, down = array.copy(), array.copy()
            up.flat[i] += h
            down.flat[i] -= h
            pair = ((up, w0), (down, w0)) if which == 0 else ((x0, up), (x0, down))
            numeric = (loss(*pair[0]) - loss(*pair[1])) / (2 * h)
            assert abs(numeric - grad.flat[i]) <= 1e-6 * (1 + abs(numeric))


@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.functional.conv_transpose2d(lib.ones(1, 4, 5, 6),
                                                   lib.ones(4, 3, 3, 2), output_padding=1),
    lambda lib: lib.nn.functional.conv_transpose2d(lib.ones(1, 4, 5, 6), lib.ones(4, 3, 3, 2),
                                                   padding=5),
    lambda lib: lib.nn.functional.conv_transpose2d(lib.ones(1, 4, 5, 6), lib.ones(4, 3, 3, 2),
                                                   groups=3),
    lambda lib: lib.nn.functional.conv_transpose2d(lib.ones(5, 6), lib.ones(4, 3, 3, 2)),
    lambda lib: lib.nn.functional.conv_transpose1d(lib.ones(2, 4, 5), lib.ones(4, 3, 3),
                                                   output_padding=1),
    lambda lib: lib.nn.functional.conv_transpose1d(lib.ones(2, 4, 5), lib.ones(4, 3, 3),
                                                   padding=5),
    lambda lib: lib.nn.functional.conv_transpose1d(lib.ones(2, 4, 5), lib.ones(4, 3, 3),
                                                   stride=(1, 2)),
    lambda lib: lib.nn.functional.conv_transpose1d(lib.ones(2, 4, 5), lib.ones(4, 3, 3),
                                                   stride=0),
    lambda lib: lib.nn.functional.conv_transpose1d(lib.ones(2, 4, 5), lib.ones(4, 3, 3),
                                                   padding=-1),
    lambda lib: lib.nn.functional.conv_transpose1d(lib.ones(2, 4, 5), lib.ones(4, 3, 3),
                                                   dilation=0),
    lambda lib: lib.nn.functional.conv_transpose1d(lib.ones(2, 4, 5), lib.ones(4, 3, 3),
                                                   groups=0),
    lambda lib: lib.nn.functional.conv_transpose1d(lib.ones(2, 4, 5), lib.ones(4, 3, 3),
                                                   bias=lib.ones(2)),
    lambda lib: lib.nn.functional.conv_transpose1d(lib.ones(4, 5, 6), lib.ones(4, 3, 3)),
], ids=lambda c: "")
def test_errors_match_torch(call):
    with pytest.raises(RuntimeError) as theirs:
        call(torch)
    with pytest.raises(RuntimeError) as mine:
        call(tg)
    assert str(mine.value) == str(theirs.value)


def test_string_padding_is_refused_as_in_torch():
    with pytest.raises(TypeError) as theirs:
        torch.nn.functional.conv_transpose2d(torch.ones(1, 1, 3, 3), torch.ones(1, 1, 2, 2),
                                             padding="same")
    with pytest.raises(TypeError) as mine:
        F.conv_transpose2d(tg.ones(1, 1, 3, 3), tg.ones(1, 1, 2, 2), padding="same")
    assert str(mine.value) == str(theirs.value)


MODULE_CASES = [
    ("ConvTranspose2d", (2, 4, 5, 5), dict(stride=2)),
    ("ConvTranspose2d", (2, 4, 5, 5), dict(stride=2, padding=1, output_padding=1, groups=2,
                                           bias=False, dilation=2)),
    ("ConvTranspose2d", (4, 5, 6), {}),
    ("ConvTranspose1d", (2, 4, 7), dict(stride=3, padding=1)),
    ("ConvTranspose1d", (2, 4, 7), dict(groups=4, dilation=2, output_padding=1)),
    ("ConvTranspose3d", (2, 4, 3, 2, 3), dict(stride=(2, 1, 2), padding=1, groups=2)),
    ("Conv3d", (2, 4, 5, 6, 4), dict(stride=2, padding=(1, 0, 1), groups=2,
                                     dilation=(1, 2, 1))),
    ("Conv3d", (4, 3, 4, 5), dict(padding="same", bias=False)),
]


@pytest.mark.parametrize("name, shape, kwargs", MODULE_CASES)
def test_modules_start_compute_and_print_as_torch(name, shape, kwargs):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)    # (the same draws need the same dtype)
    try:
        tg.manual_seed(3)
        torch.manual_seed(3)
        mine, theirs = getattr(nn, name)(4, 8, 3, **kwargs), \
            getattr(torch.nn, name)(4, 8, 3, **kwargs)
    finally:
        torch.set_default_dtype(previous)
    assert repr(mine) == repr(theirs)
    for (a_name, a), (b_name, b) in zip(mine.named_parameters(), theirs.named_parameters()):
        assert a_name == b_name
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())
    x = np.random.default_rng(4).standard_normal(shape)
    out_mine, out_theirs = mine(tg.tensor(x)), theirs(torch.tensor(x))
    assert _node(tg, out_mine) == _node(torch, out_theirs)
    np.testing.assert_allclose(out_mine.detach().numpy(), out_theirs.detach().numpy(),
                               rtol=1e-12, atol=1e-13)
    (out_mine ** 2).sum().backward()
    (out_theirs ** 2).sum().backward()
    for a, b in zip(mine.parameters(), theirs.parameters()):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_output_size_picks_the_output_padding():
    mine, theirs = nn.ConvTranspose2d(4, 6, 3, stride=2), torch.nn.ConvTranspose2d(4, 6, 3,
                                                                                    stride=2)
    for size in ([11, 13], [12, 14], [1, 6, 12, 13]):
        assert tuple(mine(tg.ones(1, 4, 5, 6), output_size=size).shape) == tuple(
            theirs(torch.ones(1, 4, 5, 6), output_size=size).shape)
    for size in ([15, 13], [1, 2, 3]):
        with pytest.raises(ValueError) as their_error:
            theirs(torch.ones(1, 4, 5, 6), output_size=size)
        with pytest.raises(ValueError) as my_error:
            mine(tg.ones(1, 4, 5, 6), output_size=size)
        assert str(my_error.value).replace("tapegrad.", "torch.") == str(their_error.value)


def test_module_errors_match_torch():
    for make in (lambda lib: lib.nn.ConvTranspose2d(4, 6, 3, padding_mode="reflect"),
                 lambda lib: lib.nn.ConvTranspose1d(3, 4, 3, groups=2)):
        with pytest.raises(ValueError) as theirs:
            make(torch)
        with pytest.raises(ValueError) as mine:
            make(tg)
        assert str(mine.value) == str(theirs.value)


def test_compile_replays_a_decoder_with_new_inputs():
    model = nn.Sequential(nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
                          nn.ReLU(), nn.ConvTranspose2d(4, 2, 2, stride=1))
    step = tg.compile(lambda x: model(x).pow(2).sum())
    for seed in range(3):
        value = np.random.default_rng(10 + seed).standard_normal((2, 3, 4, 5))
        model.zero_grad()
        loss = step(tg.tensor(value))
        loss.backward()
        grads = [p.grad.numpy().copy() for p in model.parameters()]
        model.zero_grad()
        eager = model(tg.tensor(value)).pow(2).sum()
        eager.backward()
        np.testing.assert_allclose(loss.item(), eager.item(), rtol=1e-13)
        for g, p in zip(grads, model.parameters()):
            np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-12, atol=1e-15)
    assert step.stats.replays == 2, step.stats.eager_reasons


def test_conv3d_matches_torch():
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal((2, 4, 5, 4, 6)), rng.standard_normal((6, 2, 3, 2, 2)),
              rng.standard_normal(6)]
    for kwargs in ({"groups": 2}, {"stride": 2, "padding": 1, "dilation": (1, 2, 1),
                                   "groups": 2}):
        runs = []
        for lib in (tg, torch):
            tensors = [lib.tensor(a, requires_grad=True) for a in arrays]
            out = lib.nn.functional.conv3d(*tensors, **kwargs)
            (out * out).sum().backward()
            runs.append((out.detach().numpy().copy(), _node(lib, out),
                         [t.grad.numpy().copy() for t in tensors]))
        (mine, my_node, my_grads), (theirs, their_node, their_grads) = runs
        assert my_node == their_node
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-13)
        for a, b in zip(my_grads, their_grads):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("position", [0, 1, 2])
def test_a_list_for_a_tensor_raises_torchs_type_error(n, position):
    def call(lib):
        args = [lib.ones((1, 1) + (2,) * n), lib.ones((1, 1) + (1,) * n), lib.ones(1)]
        args[position] = [1.0]
        return getattr(lib.nn.functional, f"conv_transpose{n}d")(*args)
    with pytest.raises(TypeError) as theirs:
        call(torch)
    with pytest.raises(TypeError) as mine:
        call(tg)
    assert str(mine.value) == str(theirs.value)


# =============================================================================================
# unfold (im2col) and fold (col2im): the sliding blocks of a convolution
# =============================================================================================
@st.composite
def _blocks(draw):
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(2))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(2))
    padding = tuple(draw(st.integers(0, 2)) for _ in range(2))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(2))
    size = tuple(draw(st.integers(1, 6)) for _ in range(2))
    batch = draw(st.sampled_from([None, 0, 1, 2]))
    channels = draw(st.integers(1, 2))
    seed = draw(st.integers(0, 2 ** 16))
    return dict(kernel_size=kernel, dilation=dilation, padding=padding, stride=stride), \
        size, batch, channels, np.random.default_rng(seed)


def _blocks_run(lib, name, array, args, kwargs):
    x = lib.tensor(array, requires_grad=True)
    out = getattr(lib.nn.functional, name)(x, *args, **kwargs)
    seed = np.cos(np.arange(out.numel(), dtype=np.float64)).reshape(tuple(out.shape))
    out.backward(lib.tensor(seed))
    return out.detach().numpy().copy(), x.grad.numpy().copy(), _node(lib, out)


def _same_or_same_error(name, array, args, kwargs):
    results = []
    for lib in (tg, torch):
        try:
            results.append(_blocks_run(lib, name, array, args, kwargs))
        except (RuntimeError, IndexError) as e:
            results.append((type(e).__name__, str(e)))
    mine, theirs = results
    if isinstance(theirs[0], str) or isinstance(mine[0], str):
        assert mine == theirs
        return
    assert mine[2] == theirs[2]
    for a, b in zip(mine[:2], theirs[:2]):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


@settings(max_examples=60, deadline=None)
@given(case=_blocks())
def test_unfold_matches_torch(case):
    kwargs, size, batch, channels, rng = case
    shape = ((batch,) if batch is not None else ()) + (channels,) + size
    _same_or_same_error("unfold", rng.standard_normal(shape), (), kwargs)


@settings(max_examples=60, deadline=None)
@given(case=_blocks(), off=st.sampled_from([0, 0, 0, 1]))
def test_fold_matches_torch(case, off):
    kwargs, size, batch, channels, rng = case
    (kh, kw), (dh, dw) = kwargs["kernel_size"], kwargs["dilation"]
    (ph, pw), (sh, sw) = kwargs["padding"], kwargs["stride"]
    blocks = ((size[0] + 2 * ph - dh * (kh - 1) - 1) // sh + 1) * \
        ((size[1] + 2 * pw - dw * (kw - 1) - 1) // sw + 1)
    shape = ((batch,) if batch is not None else ()) + (channels * kh * kw, max(1, blocks + off))
    _same_or_same_error("fold", rng.standard_normal(shape), (size,), kwargs)


@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.functional.unfold(lib.ones(2, 3), 2),
    lambda lib: lib.nn.functional.unfold(lib.ones(1, 2, 3, 4, 5), 2),
    lambda lib: lib.nn.functional.unfold(lib.ones(1, 1, 4, 4), (2, 2, 2)),
    lambda lib: lib.nn.functional.unfold(lib.ones(1, 1, 4, 4), 2, dilation=0, padding=-1),
    lambda lib: lib.nn.functional.unfold(lib.ones(1, 1, 4, 4), 2, padding=-1, stride=0),
    lambda lib: lib.nn.functional.unfold(lib.ones(1, 1, 4, 4), 0),
    lambda lib: lib.nn.functional.fold(lib.ones(1, 4, 4), (3, 3), 2, dilation=0, stride=0),
    lambda lib: lib.nn.functional.fold(lib.ones(1, 4, 4), (3, 3, 3), 2),
    lambda lib: lib.nn.functional.fold(lib.ones(1, 7, 4), (3, 3), 2),
    lambda lib: lib.nn.functional.fold(lib.ones(4), (3, 3), 2),
    lambda lib: lib.nn.functional.fold(lib.ones(2, 4, 0), (3, 3), 2),
], ids=lambda c: "")
def test_block_errors_match_torch(call):
    with pytest.raises((RuntimeError, IndexError)) as theirs:
        call(torch)
    with pytest.raises(theirs.type) as mine:
        call(tg)
    assert str(mine.value) == str(theirs.value)


def test_fold_of_unfold_counts_the_blocks_over_each_pixel():
    x = tg.ones(1, 2, 5, 5, requires_grad=True)
    kwargs = dict(kernel_size=3, padding=1, stride=2)
    counts = F.fold(F.unfold(x, **kwargs), (5, 5), **kwargs)
    expected = torch.nn.functional.fold(torch.nn.functional.unfold(
        torch.ones(1, 2, 5, 5), **kwargs), (5, 5), **kwargs)
    np.testing.assert_array_equal(counts.detach().numpy(), expected.numpy())
    counts.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), expected.numpy())


def test_block_modules_print_and_compute_as_torch():
    for make, shape in ((lambda lib: lib.nn.Unfold((2, 3), stride=2), (2, 3, 5, 6)),
                        (lambda lib: lib.nn.Fold((4, 5), 2, padding=1), (2, 8, 30))):
        mine, theirs = make(tg), make(torch)
        assert repr(mine) == repr(theirs)
        x = np.random.default_rng(5).standard_normal(shape)
        np.testing.assert_allclose(mine(tg.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(),
                                   rtol=1e-12, atol=1e-13)


def test_compile_replays_patches_with_new_inputs():
    weight = tg.tensor(np.random.default_rng(6).standard_normal((4, 12)), requires_grad=True)

    def patch_model(x):     # ViT-style: patches as columns, a linear map on each
        return (weight @ F.unfold(x, 2, stride=2)).tanh().sum()
    step = tg.compile(patch_model)
    for seed in range(3):
        value = np.random.default_rng(20 + seed).standard_normal((2, 3, 4, 6))
        weight.grad = None
        loss = step(tg.tensor(value))
        loss.backward()
        compiled = weight.grad.numpy().copy()
        weight.grad = None
        eager = patch_model(tg.tensor(value))
        eager.backward()
        np.testing.assert_allclose(loss.item(), eager.item(), rtol=1e-13)
        np.testing.assert_allclose(compiled, weight.grad.numpy(), rtol=1e-12, atol=1e-15)
    assert step.stats.replays == 2, step.stats.eager_reasons
