"""``nn.functional.affine_grid`` and ``grid_sample`` against PyTorch: the sampled values bit for
bit (PyTorch's CPU kernel, fused multiply-adds included), gradients to the input, the grid
and theta, grad_fn names, warnings and error texts, over modes, padding modes, corner
alignments, shapes (empty ones too), pixel-exact and out-of-range locations, and inf/NaN inputs."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tapegrad as tg
from oracle import outcome

torch = pytest.importorskip("torch")

MODES = ["bilinear", "nearest"]
PADDINGS = ["zeros", "border", "reflection"]


def sample(L, xs, gs, **kw):
    x = L.tensor(xs, dtype=L.float64, requires_grad=True)
    g = L.tensor(gs, dtype=L.float64, requires_grad=True)
    out = L.nn.functional.grid_sample(x, g, **kw)
    weights = L.tensor(np.cos(np.arange(out.numel())).reshape(tuple(out.shape)),
                       dtype=L.float64)
    (out * weights).sum().backward()
    return (out.detach().numpy(), x.grad.numpy(), g.grad.numpy(),
            out.grad_fn.name() if out.grad_fn is not None else None)


def assert_same(ours, theirs):
    np.testing.assert_array_equal(ours[0], theirs[0])          # the values: bit for bit
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-12, atol=1e-12)
    assert ours[3] == theirs[3]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding_mode", PADDINGS)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("grid_kind", ["random", "pixel steps"])
def test_values_and_gradients_as_pytorch(mode, padding_mode, align_corners, grid_kind):
    rng = np.random.default_rng(7)
    xs = rng.standard_normal((2, 3, 4, 5))
    gs = rng.uniform(-1.5, 1.5, (2, 3, 4, 2))
    if grid_kind == "pixel steps":      # on pixel centres, corners and borders exactly
        gs = np.round(gs * 4) / 4
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    assert_same(sample(tg, xs, gs, **kw), sample(torch, xs, gs, **kw))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 2), c=st.integers(1, 3), h=st.integers(1, 4), w=st.integers(1, 4),
       ho=st.integers(0, 3), wo=st.integers(1, 3), mode=st.sampled_from(MODES),
       padding_mode=st.sampled_from(PADDINGS), align_corners=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_shapes_as_pytorch(n, c, h, w, ho, wo, mode, padding_mode, align_corners, seed):
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((n, c, h, w))
    gs = rng.uniform(-2, 2, (n, ho, wo, 2))
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    assert_same(sample(tg, xs, gs, **kw), sample(torch, xs, gs, **kw))


@pytest.mark.parametrize("padding_mode", PADDINGS)
@pytest.mark.parametrize("align_corners", [False, True])
def test_inf_and_nan_in_the_input(padding_mode, align_corners):
    # (not in the grid: PyTorch's backward reads out of bounds for a NaN location and may
    # crash the process)
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((2, 3, 4, 5))
    xs[0, 0, 1, 1], xs[1, 2, 0, 0] = np.inf, np.nan
    gs = rng.uniform(-1.5, 1.5, (2, 3, 4, 2))
    kw = dict(padding_mode=padding_mode, align_corners=align_corners)
    ours, theirs = sample(tg, xs, gs, **kw), sample(torch, xs, gs, **kw)
    for a, b in zip(ours[:3], theirs[:3]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 1, 3), (1, 2, 3, 4, 2)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_and_a_spatial_transformer(size, align_corners):
    rng = np.random.default_rng(11)
    k = len(size) - 2
    thetas = rng.standard_normal((size[0], k, k + 1))
    images = rng.standard_normal(size)

    def program(L):
        theta = L.tensor(thetas, dtype=L.float64, requires_grad=True)
        x = L.tensor(images, dtype=L.float64, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")         # unit-size grids warn with align_corners
            grid = L.nn.functional.affine_grid(theta, size, align_corners=align_corners)
        names = [grid.grad_fn.name()]
        if k == 2:
            out = L.nn.functional.grid_sample(x, grid, align_corners=align_corners)
            names.append(out.grad_fn.name())
            (out ** 2).sum().backward()
        else:
            (grid ** 2).sum().backward()
        return grid.detach().numpy(), theta.grad.numpy(), names
    ours, theirs = program(tg), program(torch)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-11, atol=1e-12)
    assert ours[2] == theirs[2]


def test_gradients_against_central_differences():
    rng = np.random.default_rng(5)
    x = tg.tensor(rng.standard_normal((1, 2, 3, 4)), requires_grad=True)
    # away from pixel centres, where the bilinear weights have kinks
    g = tg.tensor(rng.uniform(-0.9, 0.9, (1, 2, 3, 2)) + 0.013, requires_grad=True)
    for padding_mode in PADDINGS:
        assert tg.autograd.gradcheck(
            lambda a, b: tg.nn.functional.grid_sample(a, b, padding_mode=padding_mode,
                                                      align_corners=False), (x, g))


BAD = [
    "F.grid_sample(x, g[:1], align_corners=False)",
    "F.grid_sample(x, L.rand(2, 6, 7, 3, dtype=L.float64), align_corners=False)",
    "F.grid_sample(x[0], g, align_corners=False)",
    "F.grid_sample(x, g[..., 0], align_corners=False)",
    "F.grid_sample(x, g, mode='foo')", "F.grid_sample(x, g, padding_mode='foo')",
    "F.grid_sample(L.zeros(2, 3, 0, 5, dtype=L.float64), g, align_corners=False)",
    "F.grid_sample(x.long(), g, align_corners=False)",
    "F.affine_grid(L.zeros(2, 3, 3, dtype=L.float64), (2, 3, 4, 5), align_corners=False)",
    "F.affine_grid(L.zeros(2, 2, 3, dtype=L.float64), (2, 3, 4), align_corners=False)",
    "F.affine_grid(L.zeros(2, 2, 3, dtype=L.float64), (2, 3, 0, 5), align_corners=False)",
    "F.affine_grid(L.zeros(2, 2, 3, dtype=L.float64), (3, 3, 4, 5), align_corners=False)",
    "F.affine_grid(L.zeros(2, 2, 3, dtype=L.int64), (2, 3, 4, 5), align_corners=False)",
    "F.affine_grid(L.zeros(1, 3, 4, dtype=L.float64), (1, 3, 2, 2), align_corners=False)",
]


@pytest.mark.parametrize("expr", BAD)
def test_refusals_as_pytorch(expr):
    def run(L):
        x = L.zeros(2, 3, 4, 5, dtype=L.float64)
        g = L.zeros(2, 6, 7, 2, dtype=L.float64)
        return eval(expr, {"L": L, "F": L.nn.functional, "x": x, "g": g})
    assert outcome(tg, run) == outcome(torch, run)


def test_align_corners_left_out_warns_as_pytorch():
    text = r"Default grid_sample and affine_grid behavior has changed to align_corners=False"
    for L in (tg, torch):
        with pytest.warns(UserWarning, match=text):
            L.nn.functional.grid_sample(L.zeros(1, 1, 2, 2, dtype=L.float64),
                                        L.zeros(1, 1, 1, 2, dtype=L.float64))
        with pytest.warns(UserWarning, match=text):
            L.nn.functional.affine_grid(L.zeros(1, 2, 3, dtype=L.float64), (1, 1, 2, 2))


def test_what_is_not_there_says_so():
    x, g = tg.zeros(1, 1, 2, 2), tg.zeros(1, 1, 1, 2)
    with pytest.raises(NotImplementedError, match="bicubic"):
        tg.nn.functional.grid_sample(x, g, mode="bicubic", align_corners=False)
    with pytest.raises(NotImplementedError, match="5-D input"):
        tg.nn.functional.grid_sample(tg.zeros(1, 1, 2, 2, 2), tg.zeros(1, 1, 1, 1, 3),
                                     align_corners=False)
