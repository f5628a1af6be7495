"""Names PyTorch programs use that tapegrad lacked: ``as_strided`` (function and method) and
``empty_strided``, the top-level in-place forms (``torch.exp_(x)``), the ``*_copy``
functions, ``histogram``/``histogramdd``, and the losses and pools of ``nn.functional``
added with them.  Each compared with PyTorch: values, gradients, grad_fn names and error
texts."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
from oracle import same

torch = pytest.importorskip("torch")

GEN = np.random.default_rng(11)
CUBE = GEN.standard_normal((2, 3, 4))


def with_grad(fn, value):
    """``fn(lib, x)`` for a float64 leaf ``x`` holding ``value``: the result(s), and x's
    gradient of the results weighted by 1, 2, 3, ... (so a wrong place shows)."""
    def run(m):
        x = m.tensor(value, dtype=m.float64, requires_grad=True)
        out = fn(m, x)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        total, start = 0, 1.0
        for o in outs:
            weights = m.arange(start, start + o.numel(), dtype=m.float64).reshape(o.shape)
            total = total + (o * weights).sum()
            start += o.numel()
        total.backward()
        return out, x.grad
    return run


# --- as_strided, empty_strided ----------------------------------------------------------------
@st.composite
def strided_requests(draw):
    """A size, strides and an offset, and a memory long enough for them (or not: the
    out-of-bounds error is compared too)."""
    nd = draw(st.integers(0, 3))
    size = draw(st.lists(st.integers(0, 3), min_size=nd, max_size=nd))
    stride = draw(st.lists(st.integers(0, 4), min_size=nd, max_size=nd))
    offset = draw(st.integers(0, 3))
    needed = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride) if n)
    length = max(needed + draw(st.integers(-1, 2)), 1)
    return length, size, stride, offset


@given(strided_requests())
def test_as_strided_values_gradients_and_node(request):
    length, size, stride, offset = request
    values = GEN.standard_normal(length)
    ours = same(with_grad(lambda m, x: m.as_strided(x, size, stride, offset), values), torch)
    if ours[0] == "tuple":
        assert ours[1][0][5] == "AsStridedBackward0"
    same(with_grad(lambda m, x: x.as_strided(size, stride, offset).mul(2), values), torch)


def test_as_strided_of_a_view_starts_at_its_offset_and_writes_reach_the_base():
    def run(m):
        base = m.arange(12.0, dtype=m.float64)
        view = base[2:].as_strided((2, 3), (1, 2))
        view.mul_(10)
        return view, view.storage_offset(), view.stride(), base, view._base is base
    same(run, torch)


def test_as_strided_of_a_transposed_view_reads_the_base_layout():
    def run(m):
        x = m.tensor(CUBE[0], dtype=m.float64, requires_grad=True)
        y = x.t().as_strided((2, 2), (4, 1), 1)
        (y * m.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=m.float64)).sum().backward()
        return y, x.grad
    same(run, torch)


def test_as_strided_through_a_leaf_view_keeps_the_history():
    def run(m):
        x = m.tensor(CUBE, dtype=m.float64, requires_grad=True)
        y = x * 1.0
        v = y.as_strided((3,), (5,))
        v.mul_(3)
        y.sum().backward()
        # (y's node is CopySlices, which each library names in its own namespace)
        return y.detach(), y.grad_fn.name().endswith("::autograd::CopySlices"), v, x.grad
    same(run, torch)


def test_as_strided_with_repeated_elements_refuses_writes():
    same(lambda m: m.as_strided(m.zeros(6), (2, 2), (0, 1)).add_(1), torch)


@pytest.mark.parametrize("case", [
    lambda m: m.as_strided(m.arange(6.0), [3, 3], [1, 1], 4),
    lambda m: m.as_strided(m.arange(6.0), [3], [1, 1]),
    lambda m: m.as_strided(m.arange(6.0), [3], [-1]),
    lambda m: m.as_strided(m.arange(6.0), [-3], [1]),
    lambda m: m.as_strided(m.arange(6.0), [3], [1], -1),
    lambda m: m.as_strided([1.0, 2.0], [1], [1]),
    lambda m: m.as_strided(m.arange(6.0), [0, 3], [9, 9], 6),
])
def test_as_strided_errors_and_edges(case):
    same(case, torch)


@pytest.mark.parametrize("case", [
    lambda m: (m.empty_strided((2, 3), (1, 2)).shape, m.empty_strided((2, 3), (3, 1)).dtype),
    lambda m: m.empty_strided((2, 3), (3, 1), dtype=m.float64, requires_grad=True).requires_grad,
    lambda m: m.empty_strided((2, -3), (1, 2)),
    lambda m: m.empty_strided((2, 3), (1,)),
])
def test_empty_strided(case):
    same(case, torch)


# --- top-level in-place forms -------------------------------------------------------------------
POSITIVE = [0.25, 0.5, 0.75]
UNARY_IN_PLACE = ["abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_",
                  "arctan_", "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "cos_",
                  "cosh_", "deg2rad_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fix_",
                  "floor_", "frac_", "i0_", "log10_", "log1p_", "log2_", "log_", "neg_",
                  "negative_", "rad2deg_", "reciprocal_", "rsqrt_", "sigmoid_", "sin_",
                  "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_", "zero_"]

@pytest.mark.parametrize("name", UNARY_IN_PLACE)
def test_unary_in_place_forms_write_into_their_input(name):
    value = [1.5, 2.5, 3.5] if name in ("acosh_", "arccosh_") else POSITIVE

    def run(m):
        x = m.tensor(value, dtype=m.float64, requires_grad=True)
        y = x * 1.0
        out = getattr(m, name)(y)
        (y * m.tensor([1.0, 2.0, 3.0], dtype=m.float64)).sum().backward()
        return out is y, y, x.grad
    same(run, torch)     # (PyTorch's in-place inverse hyperbolics refuse the backward)
    same(lambda m: getattr(m, name)(m.tensor(value, dtype=m.float64)), torch)
    same(lambda m: getattr(m, name)(m.tensor(value, dtype=m.float64, requires_grad=True) * 1.0)
         .grad_fn.name(), torch)


@pytest.mark.parametrize("case", [
    lambda m: m.exp_(m.tensor([1, 2])),
    lambda m: m.exp_(3.0),
    lambda m: m.exp_(input=[1.0]),
    lambda m: m.exp_(m.ones(2), 2, 3),
    lambda m: m.exp_(m.ones(2), foo=2),
    lambda m: m.exp_(),
    lambda m: m.sqrt_(m.ones(2, requires_grad=True)),
    lambda m: m.abs_(m.tensor([True])),
    lambda m: m.tanh_(m.tensor([True])),
    lambda m: m.sigmoid_(m.tensor([1, 2])),
    lambda m: m.acos_(m.tensor([1, 2])),
    lambda m: m.frac_(m.tensor([1, 2])),
])
def test_in_place_form_errors(case):
    same(case, torch)


@pytest.mark.parametrize("case", [
    lambda m: m.clamp_(m.tensor([-1.0, 0.5, 2.0], dtype=m.float64), min=0, max=1),
    lambda m: m.clamp_min_(m.tensor([-1.0, 0.5], dtype=m.float64), 0),
    lambda m: m.clamp_max_(m.tensor([-1.0, 0.5], dtype=m.float64), 0),
    lambda m: m.clip_(m.tensor([-1.0, 0.5], dtype=m.float64), -0.5, 0.25),
    lambda m: m.fill_(m.zeros(2, dtype=m.float64), 3),
    lambda m: m.ldexp_(m.tensor([0.5, 2.0], dtype=m.float64), m.tensor([1, 2])),
    lambda m: m.logit_(m.tensor([0.05, 0.5], dtype=m.float64), 0.1),
    lambda m: m.nan_to_num_(m.tensor([float("nan"), float("inf")], dtype=m.float64), 1.0),
    lambda m: m.xlogy_(m.tensor([0.5, 2.0], dtype=m.float64), 2),
    lambda m: m.round_(m.tensor([0.123, 2.55], dtype=m.float64), decimals=1),
    lambda m: m.addmv_(m.zeros(2, dtype=m.float64), m.ones(2, 3, dtype=m.float64),
                       m.ones(3, dtype=m.float64)),
    lambda m: m.resize_as_(m.zeros(2, dtype=m.float64), m.ones(2, 3)).shape,
    lambda m: m.detach_(m.ones(2, dtype=m.float64) * 2),
])
def test_in_place_forms_with_arguments(case):
    same(case, torch)


# --- the *_copy functions -------------------------------------------------------------------
COPIES = [
    ("view_copy", lambda m, x: m.view_copy(x, [6, 4])),
    ("transpose_copy", lambda m, x: m.transpose_copy(x, 0, 2)),
    ("permute_copy", lambda m, x: m.permute_copy(x, [2, 0, 1])),
    ("expand_copy", lambda m, x: m.expand_copy(x[:, :1], [2, 5, 4])),
    ("squeeze_copy", lambda m, x: m.squeeze_copy(x[:, :1])),
    ("squeeze_copy", lambda m, x: m.squeeze_copy(x[:, :1], 1)),
    ("squeeze_copy", lambda m, x: m.squeeze_copy(x[:, :1], (0, 1))),
    ("unsqueeze_copy", lambda m, x: m.unsqueeze_copy(x, 1)),
    ("diagonal_copy", lambda m, x: m.diagonal_copy(x, 1, 1, 2)),
    ("select_copy", lambda m, x: m.select_copy(x, 1, -1)),
    ("slice_copy", lambda m, x: m.slice_copy(x, 2, 1, 10, 2)),
    ("t_copy", lambda m, x: m.t_copy(x[0])),
    ("alias_copy", lambda m, x: m.alias_copy(x)),
    ("as_strided_copy", lambda m, x: m.as_strided_copy(x, [2, 3], [1, 4], 2)),
    ("unfold_copy", lambda m, x: m.unfold_copy(x, 2, 2, 1)),
    ("unbind_copy", lambda m, x: m.unbind_copy(x, 1)),
    ("split_copy", lambda m, x: m.split_copy(x, 3, 2)),
    ("split_with_sizes_copy", lambda m, x: m.split_with_sizes_copy(x, [1, 2], 1)),
    ("narrow_copy", lambda m, x: m.narrow_copy(x, 1, 1, 2)),
]


@pytest.mark.parametrize("name, fn", COPIES)
def test_copies_match_values_gradients_and_nodes(name, fn):
    ours = same(with_grad(fn, CUBE), torch)
    result = ours[1][0]
    first = result[1][0] if result[0] == "tuple" else result
    assert first[5].endswith("_copy") or first[5] == "NarrowCopyBackward0", first

    def fresh(m):
        x = m.tensor(CUBE, dtype=m.float64)
        out = fn(m, x)
        out = out[0] if isinstance(out, tuple) else out
        out.add_(100.0)                 # a copy of its own: x is unchanged
        return out._base is None, x
    same(fresh, torch)


def test_detach_copy_requires_grad_but_has_no_derivative():
    def run(m):
        x = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        y = m.detach_copy(x)
        return y, y._base is None, m.detach_copy(x.detach()), y.sum().backward()
    same(run, torch)


@pytest.mark.parametrize("case", [
    lambda m: m.view_copy(m.ones(2, 3), [4]),
    lambda m: m.transpose_copy(m.ones(2, 3), 0, 2),
    lambda m: m.permute_copy(m.ones(2, 3), [0]),
    lambda m: m.expand_copy(m.ones(2, 3), [3, 3]),
    lambda m: m.select_copy(m.ones(2, 3), 0, 5),
    lambda m: m.diagonal_copy(m.ones(2, 3), 0, 1, 1),
    lambda m: m.slice_copy(m.ones(2, 3), 0, 0, 2, 0),
    lambda m: m.t_copy(m.ones(2, 3, 4)),
    lambda m: m.unbind_copy(m.ones(2, 3), 2),
    lambda m: m.t_copy([1.0]),
])
def test_copy_errors(case):
    same(case, torch)


# --- histogram, histogramdd ---------------------------------------------------------------------
DATA = [0.1, 0.5, 0.5, 0.9, 1.0, -0.2, 0.3]


@pytest.mark.parametrize("case", [
    lambda m, x: m.histogram(x, 4),
    lambda m, x: m.histogram(x, 4, range=(0.0, 1.0), density=True),
    lambda m, x: m.histogram(x, m.tensor([0.0, 0.3, 1.0], dtype=m.float64),
                             weight=m.arange(7.0, dtype=m.float64)),
    lambda m, x: x.histogram(3, density=True),
    lambda m, x: m.histogram(x.reshape(7, 1) * 0 + 2, 3),
    lambda m, x: m.histogramdd(x[:6].reshape(3, 2), [2, 3]),
    lambda m, x: m.histogramdd(x[:6].reshape(3, 2), 2, range=[0.0, 1.0, 0.0, 1.0],
                               density=True),
    lambda m, x: m.histogramdd(x[:6].reshape(3, 2), [m.tensor([-1.0, 0.0, 1.0]),
                                                     m.tensor([-2.0, 0.6, 2.0])],
                               weight=m.tensor([1.0, 2.0, 3.0])),
])
def test_histograms_match_and_have_no_derivative(case):
    def run(m):
        x = m.tensor(DATA, dtype=m.float64, requires_grad=True)
        result = case(m, x)
        hist = result.hist
        try:
            hist.sum().backward()
        except RuntimeError as e:
            refused = str(e)
        return type(result).__name__, result, hist.grad_fn.name(), refused
    same(run, torch)


@given(st.lists(st.floats(-3, 3), max_size=12), st.integers(1, 5),
       st.booleans())
def test_histogram_bins_agree(values, bins, density):
    same(lambda m: m.histogram(m.tensor(values, dtype=m.float64), bins, density=density),
         torch)


@pytest.mark.parametrize("case", [
    lambda m: m.histogram(m.tensor([1, 2]), 3),
    lambda m: m.histogram(m.ones(3), 0),
    lambda m: m.histogram(m.ones(3), 3, range=(1.0, 0.0)),
    lambda m: m.histogram(m.ones(3), 3, weight=m.ones(2)),
    lambda m: m.histogram(m.tensor([]), 3),
    lambda m: m.histogramdd(m.ones(5, 2), [2]),
    lambda m: m.histogramdd(m.ones(5), 2),
    lambda m: m.histogramdd(m.ones(5, 2), 2, range=[0.0, 1.0]),
    lambda m: m.histogram(m.tensor([1.0, float("inf")]), 2),
])
def test_histogram_errors_and_edges(case):
    same(case, torch)


# --- multilabel_margin_loss, triplet_margin_with_distance_loss -------------------------------
SCORES = GEN.standard_normal((3, 4))
LABELS = [[3, 0, -1, 1], [1, 2, 3, -1], [2, 2, 0, -1]]     # (a class listed twice counts twice)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss_matches(reduction):
    ours = same(with_grad(lambda m, x: m.nn.functional.multilabel_margin_loss(
        x, m.tensor(LABELS), reduction=reduction), SCORES), torch)
    assert ours[1][0][5] == "MultilabelMarginLossBackward0"
    same(with_grad(lambda m, x: m.nn.MultiLabelMarginLoss(reduction=reduction)(
        x[1], m.tensor(LABELS[1])), SCORES), torch)


@given(st.lists(st.integers(-1, 3), min_size=4, max_size=4),
       st.lists(st.floats(-2, 2), min_size=4, max_size=4))
def test_multilabel_margin_loss_any_targets(labels, scores):
    same(with_grad(lambda m, x: m.nn.functional.multilabel_margin_loss(
        x, m.tensor(labels), reduction="none"), scores), torch)


@pytest.mark.parametrize("case", [
    lambda m: m.nn.functional.multilabel_margin_loss(m.ones(2, 4), m.tensor([[3, 0, -1, 1]])),
    lambda m: m.nn.functional.multilabel_margin_loss(m.ones(2, 4), m.tensor([[4, 0, -1, 1]] * 2)),
    lambda m: m.nn.functional.multilabel_margin_loss(m.ones(1, 4), m.tensor([[-2, 0, 1, 1]])),
    lambda m: m.nn.functional.multilabel_margin_loss(m.ones(2, 3, 4),
                                                     m.zeros(2, 3, 4, dtype=m.int64)),
    lambda m: m.nn.functional.multilabel_margin_loss(m.ones(2, 4), m.zeros(2, 4)),
    lambda m: m.nn.functional.multilabel_margin_loss(m.ones(2, 4), m.zeros(2, 4, dtype=m.int64),
                                                     reduction="bad"),
])
def test_multilabel_margin_loss_errors(case):
    same(case, torch)


TRIPLETS = GEN.standard_normal((3, 4, 5))


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("distance", [None, "cosine"])
def test_triplet_margin_with_distance_loss_matches(swap, reduction, distance):
    def fn(m, x):
        d = None if distance is None else (
            lambda a, b: 1.0 - m.nn.functional.cosine_similarity(a, b))
        loss = m.nn.functional.triplet_margin_with_distance_loss(
            x[0], x[1], x[2], distance_function=d, margin=0.7, swap=swap, reduction=reduction)
        module = m.nn.TripletMarginWithDistanceLoss(distance_function=d, margin=0.7, swap=swap,
                                                    reduction=reduction)
        return loss, module(x[0], x[1], x[2])
    same(with_grad(fn, TRIPLETS), torch)


@pytest.mark.parametrize("case", [
    lambda m: m.nn.functional.triplet_margin_with_distance_loss(m.ones(2), m.ones(2),
                                                                m.ones(1, 2)),
    lambda m: m.nn.functional.triplet_margin_with_distance_loss(m.ones(2), m.ones(2),
                                                                m.ones(2), margin=0),
    lambda m: m.nn.functional.triplet_margin_with_distance_loss(m.ones(2), m.ones(2),
                                                                m.ones(2), reduction="x"),
    lambda m: m.nn.TripletMarginWithDistanceLoss(margin=-1.0),
])
def test_triplet_margin_with_distance_loss_errors(case):
    same(case, torch)


# --- adaptive pools' *_with_indices, fractional max pooling -----------------------------------
IMAGE = GEN.standard_normal((2, 3, 7, 6))
IMAGE[0, 0, 1, 1] = np.nan                 # a window with a nan picks it
VOLUME = GEN.standard_normal((2, 3, 5, 6, 7))
SAMPLES_2D = GEN.random((2, 3, 2))
SAMPLES_3D = GEN.random((2, 3, 3))


@pytest.mark.parametrize("fn", [
    lambda m, x: m.nn.functional.adaptive_max_pool1d_with_indices(x[0], 4),
    lambda m, x: m.nn.functional.adaptive_max_pool2d_with_indices(x, (3, 4)),
    lambda m, x: m.nn.functional.adaptive_max_pool3d_with_indices(x.unsqueeze(2), (1, 2, 2)),
])
def test_adaptive_max_pools_with_indices(fn):
    same(with_grad(lambda m, x: fn(m, x)[0], IMAGE[:, :, 2:]), torch)
    same(lambda m: fn(m, m.tensor(IMAGE[:, :, 2:], dtype=m.float64))[1], torch)


def pooled_with_grad(fn, value, samples):
    def run(m):
        x = m.tensor(value, dtype=m.float64, requires_grad=True)
        out, idx = fn(m, x, m.tensor(samples, dtype=m.float64))
        weights = m.arange(1.0, out.numel() + 1, dtype=m.float64).reshape(out.shape)
        (out.nan_to_num(0.0) * weights).sum().backward()
        return out, idx, x.grad
    return run


@pytest.mark.parametrize("fn", [
    lambda m, x, s: m.nn.functional.fractional_max_pool2d(x, 2, output_size=(3, 4),
                                                          return_indices=True,
                                                          _random_samples=s),
    lambda m, x, s: m.nn.functional.fractional_max_pool2d_with_indices(
        x, (3, 2), output_ratio=(0.5, 0.7), _random_samples=s),
    lambda m, x, s: m.nn.functional.fractional_max_pool2d_with_indices(
        x[1], 2, output_size=(6, 5), _random_samples=s),
    lambda m, x, s: m.nn.FractionalMaxPool2d(3, output_size=2, return_indices=True,
                                             _random_samples=s)(x),
])
def test_fractional_max_pool2d_with_given_samples(fn):
    ours = same(pooled_with_grad(fn, IMAGE, SAMPLES_2D), torch)
    assert ours[1][0][5] == "FractionalMaxPool2DBackward0"


@pytest.mark.parametrize("fn", [
    lambda m, x, s: m.nn.functional.fractional_max_pool3d(x, (2, 3, 2), output_size=(3, 2, 4),
                                                          return_indices=True,
                                                          _random_samples=s),
    lambda m, x, s: m.nn.functional.fractional_max_pool3d_with_indices(
        x[0], 2, output_ratio=0.5, _random_samples=s),
    lambda m, x, s: m.nn.FractionalMaxPool3d(2, output_ratio=(0.5, 0.5, 0.6),
                                             return_indices=True, _random_samples=s)(x),
])
def test_fractional_max_pool3d_with_given_samples(fn):
    ours = same(pooled_with_grad(fn, VOLUME, SAMPLES_3D), torch)
    assert ours[1][0][5] == "FractionalMaxPool3DBackward0"


@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 4),
       st.floats(0, 0.999), st.floats(0, 0.999))
def test_fractional_max_pool2d_any_windows(kernel, out_h, out_w, u, v):
    samples = np.array([[[u, v]] * 3] * 2)
    size = (min(out_h, 7 - kernel + 1), min(out_w, 6 - kernel + 1))
    same(pooled_with_grad(lambda m, x, s: m.nn.functional.fractional_max_pool2d(
        x, kernel, output_size=size, return_indices=True, _random_samples=s),
        IMAGE, samples), torch)


def test_fractional_max_pool_draws_samples_from_the_generator():
    def run(m):
        m.manual_seed(5)
        x = m.tensor(IMAGE[:, :, 1:], dtype=m.float64)
        return (m.nn.functional.fractional_max_pool2d(x, 2, output_size=3),
                m.nn.FractionalMaxPool3d(2, output_size=2)(m.tensor(VOLUME)))
    same(run, torch)


@pytest.mark.parametrize("case", [
    lambda m: m.nn.functional.fractional_max_pool2d(m.ones(2, 3, 7, 6), 2),
    lambda m: m.nn.functional.fractional_max_pool2d(m.ones(2, 3, 7, 6), 5, output_size=(4, 4),
                                                    _random_samples=m.rand(2, 3, 2)),
    lambda m: m.nn.functional.fractional_max_pool2d(m.ones(2, 3, 7, 6), (2, 2, 2),
                                                    output_size=(3, 3)),
    lambda m: m.nn.functional.fractional_max_pool2d(m.ones(2, 3, 7, 6), 2, output_size=(3, 3),
                                                    _random_samples=m.rand(1, 3, 2)),
    lambda m: m.nn.functional.fractional_max_pool2d(m.ones(2, 3, 7, 6), 2, output_size=(3, 3),
                                                    _random_samples=m.rand(2, 3)),
    lambda m: m.nn.functional.fractional_max_pool2d(m.ones(2, 3, 7, 6), 2, output_size=(3, 3),
                                                    _random_samples=m.rand(2, 3, 3)),
    lambda m: m.nn.functional.fractional_max_pool2d(m.ones(2, 3, 7, 6), 2, output_size=(3, 3),
                                                    _random_samples=m.rand(2, 2, 2)),
    lambda m: m.nn.functional.fractional_max_pool2d(m.ones(2, 3, 7, 6), 2, output_ratio=0.5,
                                                    _random_samples=m.rand(2, 3, 2)),
    lambda m: m.nn.functional.fractional_max_pool3d(m.ones(2, 3, 5, 6, 7), 4,
                                                    output_size=(2, 3, 3),
                                                    _random_samples=m.rand(2, 3, 3)),
    lambda m: m.nn.functional.fractional_max_pool3d(m.ones(2, 3, 5, 6, 7), 2,
                                                    output_size=(3, 3, 6),
                                                    _random_samples=m.rand(2, 3, 3)),
    lambda m: m.nn.FractionalMaxPool2d(2),
    lambda m: m.nn.FractionalMaxPool2d(2, output_size=2, output_ratio=0.5),
    lambda m: m.nn.FractionalMaxPool3d(2, output_ratio=1.5),
])
def test_fractional_max_pool_errors(case):
    same(case, torch)


# --- the in-place forms without a Tensor method ----------------------------------------------
@pytest.mark.parametrize("name", ["dropout_", "alpha_dropout_", "feature_dropout_",
                                  "feature_alpha_dropout_"])
def test_dropout_in_place_forms_draw_as_pytorch(name):
    def run(m):
        m.manual_seed(3)
        x = m.tensor(CUBE, dtype=m.float64, requires_grad=True)
        y = x * 1.0
        out = getattr(m, name)(y, 0.4, True)
        (y * m.arange(24.0, dtype=m.float64).reshape(2, 3, 4)).sum().backward()
        return out is y, y, x.grad, getattr(m, name)(m.ones(2, 2), 0.5, False)
    same(run, torch)


@pytest.mark.parametrize("case", [
    lambda m: m.dropout_(m.ones(3), 2.0, True),
    lambda m: m.dropout_(m.ones(3), 0.5, 1),
    lambda m: m.dropout_([1.0], 0.5, True),
    lambda m: m.feature_dropout_(m.ones(3), 0.5, True),
    lambda m: m.embedding_renorm_(m.tensor(CUBE[0], dtype=m.float64),
                                  m.tensor([0, 2, 2]), 1.0, 2.0),
    lambda m: m.embedding_renorm_(m.tensor(CUBE[0], dtype=m.float64, requires_grad=True),
                                  m.tensor([0]), 1.0, 2.0),
    lambda m: m.embedding_renorm_(m.ones(2, 2), m.tensor([0.0]), 1.0, 2.0),
    lambda m: m.embedding_renorm_(m.ones(2, 2), [0], 1.0, 2.0),
    lambda m: m.conj_physical_(m.tensor([1.0, -2.0])),
    lambda m: m.conj_physical_(3.0),
])
def test_other_in_place_forms(case):
    same(case, torch)


@pytest.mark.parametrize("case", [
    lambda m: m.as_strided(m.arange(6.0)[::2], (3,), (1,), 0),
    lambda m: m.as_strided(m.arange(6.0), (2, 2), (1.5, 1)),
    lambda m: m.as_strided(m.arange(6.0), 2, 1),
    lambda m: m.as_strided(m.arange(6.0), [2], [1], 1.5),
    lambda m: m.as_strided(m.arange(6.0), m.Size([2, 2]), (1, 2), 1),
    lambda m: m.empty_strided(2, (1,)),
    lambda m: m.view_copy(m.arange(4.0), m.int64),
    lambda m: m.view_copy(m.arange(4.0), m.tensor([2, 2])),
    lambda m: m.view_copy(m.arange(4.0), 2, 2),
    lambda m: m.split_copy(m.arange(5.0), [2, 3]),
    lambda m: m.slice_copy(m.arange(5.0), 0, -10, 100),
    lambda m: m.slice_copy(m.arange(5.0), 0, 4, 2),
])
def test_strided_argument_errors_and_reads_outside_a_view(case):
    same(case, torch)


def test_as_strided_outside_a_view_with_gradients_is_refused():
    x = tg.arange(6.0, requires_grad=True) * 1.0
    with pytest.raises(RuntimeError, match="reads a view's own elements only"):
        tg.as_strided(x[::2], (3,), (1,), 0)
    with tg.no_grad():
        assert tg.as_strided(x[::2], (3,), (1,), 0).tolist() == [0.0, 1.0, 2.0]


def test_as_strided_view_is_read_again_after_its_base_changes():
    def run(m):
        x = m.arange(6.0, dtype=m.float64, requires_grad=True)
        y = x * 2
        v = y.as_strided((2, 2), (1, 2))
        y.add_(1)                       # v shows the change, and its node is AsStrided again
        w = v * 3
        w.sum().backward()
        return v, w, x.grad
    same(run, torch)


def test_as_strided_of_expanded_and_stacked_views():
    def expanded(m):
        x = m.arange(3.0, dtype=m.float64, requires_grad=True)
        v = x.expand(2, 3).as_strided((3,), (1,))
        (v * m.tensor([1.0, 2.0, 3.0], dtype=m.float64)).sum().backward()
        return v, x.grad

    def stacked(m):
        x = m.arange(12.0, dtype=m.float64, requires_grad=True)
        v = x.reshape(3, 4).t().as_strided((2, 3), (4, 1), 1)
        u = v.as_strided((2,), (5,), 1)
        (u * m.tensor([1.0, 2.0], dtype=m.float64)).sum().backward()
        return v, u, x.grad
    same(expanded, torch)
    same(stacked, torch)


# --- histc: PyTorch's bins by linear interpolation alone ------------------------------------
SPREAD = GEN.standard_normal(500)


@pytest.mark.parametrize("case", [
    lambda m: m.histc(m.tensor(SPREAD), bins=7),
    lambda m: m.histc(m.tensor(SPREAD), bins=13, min=-1, max=1.5),
    lambda m: m.histc(m.tensor([0.1, 0.3, 0.7, 1.0]), bins=10, min=0, max=1),
    lambda m: m.histc(m.tensor([[1.0, 5.0], [2.5, -1.0]]), bins=4, min=0, max=2.5),
    lambda m: m.histc(m.tensor([2.0, 2.0]), bins=3),
    lambda m: m.histc(m.tensor([]), bins=3),
    lambda m: m.histc(m.tensor([1, 2]), bins=3),
    lambda m: m.histc(m.tensor([1.0, 2.0]), bins=0),
    lambda m: m.histc(m.tensor([1.0, 2.0]), bins=3, min=2, max=1),
    lambda m: m.histc(m.tensor([1.0, float("nan")]), bins=3),
    lambda m: m.histc(m.tensor([1.0, float("inf")]), bins=3),
])
def test_histc_matches(case):
    same(case, torch)


@given(st.lists(st.integers(-30, 30), min_size=1, max_size=20), st.integers(1, 9),
       st.integers(1, 9), st.booleans())
def test_histograms_on_tenths_agree(tenths, bins, other_bins, density):
    """Values on a grid of tenths lie on bin edges often: the edges must be PyTorch's to the
    last bit (its linspace), and so must the bin each element falls in."""
    values = [t / 10 for t in tenths]
    points = [[v, -v / 3] for v in values]
    same(lambda m: m.histogram(m.tensor(values, dtype=m.float64), bins, density=density),
         torch)
    same(lambda m: m.histc(m.tensor(values, dtype=m.float64), bins), torch)
    same(lambda m: m.histogramdd(m.tensor(points, dtype=m.float64), [bins, other_bins],
                                 density=density), torch)
    same(lambda m: m.histogram(m.tensor([], dtype=m.float64), bins, density=True), torch)


@given(st.floats(-100, 100), st.floats(-100, 100), st.integers(0, 300))
def test_linspace_is_pytorchs_to_the_last_bit(start, end, steps):
    ours = tg.linspace(start, end, steps).numpy()
    assert np.array_equal(ours, torch.linspace(start, end, steps, dtype=torch.float64).numpy())
