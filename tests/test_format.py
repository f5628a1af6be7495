"""Tensor text must be PyTorch's ``repr(tensor)``, character for character.

The literal cases run everywhere; the rest compare against PyTorch itself (default
dtype float64, ``torch.`` spelled ``tapegrad.``) and are skipped without it.
"""
import contextlib
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

try:
    from tapegrad import _format
except ModuleNotFoundError as exc:  # source checkout that is not installed
    if exc.name != "tapegrad":
        raise
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from tapegrad import _format

from tapegrad._format import format_tensor

nan, inf = math.nan, math.inf


@contextlib.contextmanager
def options(torch=None, **kwargs):
    """Apply print options to tapegrad (and PyTorch, if given), then restore defaults."""
    _format.set_printoptions(**kwargs)
    if torch is not None:
        torch.set_printoptions(**kwargs)
    try:
        yield
    finally:
        _format.set_printoptions(profile="default")
        if torch is not None:
            torch.set_printoptions(profile="default")


# ---------------------------------------------------------------------------
# Literal expectations (text as PyTorch prints it), no PyTorch needed.

LITERALS = [
    pytest.param(np.array(3.5), {}, [], "tensor(3.5000)", id="scalar"),
    pytest.param(np.array(7), {}, [], "tensor(7)", id="int_scalar"),
    pytest.param(np.array([-0.0]), {}, [], "tensor([-0.])", id="neg_zero"),
    pytest.param(np.array([1e10, 1.0]), {}, [], "tensor([1.0000e+10, 1.0000e+00])", id="sci"),
    pytest.param(
        np.array([nan, -inf, 1.5, inf, -0.0]),
        {},
        [],
        "tensor([   nan,   -inf, 1.5000,    inf, -0.0000])",
        id="nonfinite",
    ),
    pytest.param(
        np.array([1e-5, 1.0, -1e300]),
        {},
        [],
        "tensor([  1.0000e-05,   1.0000e+00, -1.0000e+300])",
        id="huge_tiny",
    ),
    pytest.param(np.array([True, False]), {}, [], "tensor([ True, False])", id="bool"),
    pytest.param(
        np.array([[0, -7], [12345, 3]]),
        {},
        [],
        "tensor([[    0,    -7],\n        [12345,     3]])",
        id="int_matrix",
    ),
    pytest.param(np.zeros(0), {}, [], "tensor([])", id="empty"),
    pytest.param(np.zeros((0, 3)), {}, [], "tensor([], size=(0, 3))", id="empty_2d"),
    pytest.param(
        np.zeros(0, np.int64), {}, [], "tensor([], dtype=tapegrad.int64)", id="empty_int"
    ),
    pytest.param(
        np.zeros((2, 0), bool),
        {},
        [],
        "tensor([], size=(2, 0), dtype=tapegrad.bool)",
        id="empty_bool_2d",
    ),
    pytest.param(
        np.arange(2000),
        {},
        [],
        "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])",
        id="summarised_vector",
    ),
    pytest.param(
        np.arange(2000.0).reshape(2, 1000),
        {},
        [],
        "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 9.9700e+02, 9.9800e+02,\n"
        "         9.9900e+02],\n"
        "        [1.0000e+03, 1.0010e+03, 1.0020e+03,  ..., 1.9970e+03, 1.9980e+03,\n"
        "         1.9990e+03]])",
        id="summarised_wrapped",
    ),
    pytest.param(
        np.arange(24.0).reshape(2, 3, 4) / 3,
        {},
        [],
        "tensor([[[0.0000, 0.3333, 0.6667, 1.0000],\n"
        "         [1.3333, 1.6667, 2.0000, 2.3333],\n"
        "         [2.6667, 3.0000, 3.3333, 3.6667]],\n"
        "\n"
        "        [[4.0000, 4.3333, 4.6667, 5.0000],\n"
        "         [5.3333, 5.6667, 6.0000, 6.3333],\n"
        "         [6.6667, 7.0000, 7.3333, 7.6667]]])",
        id="3d",
    ),
    pytest.param(
        np.arange(15.0) / 7 - 1,
        {},
        ["requires_grad=True"],
        "tensor([-1.0000, -0.8571, -0.7143, -0.5714, -0.4286, -0.2857, -0.1429,  0.0000,\n"
        "         0.1429,  0.2857,  0.4286,  0.5714,  0.7143,  0.8571,  1.0000],\n"
        "       requires_grad=True)",
        id="wrapped_suffix_on_new_line",
    ),
    pytest.param(
        np.arange(-4.0, 4.0).reshape(2, 4) * 1e3,
        {},
        ["grad_fn=<AddBackward0>"],
        "tensor([[-4000., -3000., -2000., -1000.],\n"
        "        [    0.,  1000.,  2000.,  3000.]], grad_fn=<AddBackward0>)",
        id="grad_fn",
    ),
    pytest.param(np.array([1.12345]), {"precision": 2}, [], "tensor([1.12])", id="precision"),
    pytest.param(
        np.arange(10), {"threshold": 5}, [], "tensor([0, 1, 2,  ..., 7, 8, 9])", id="threshold"
    ),
    pytest.param(
        np.ones((3, 2)),
        {"edgeitems": 0},
        [],
        "tensor([[1., 1.],\n        [1., 1.],\n        [1., 1.]], size=(3, 2))",
        id="no_edgeitems",
    ),
    pytest.param(
        np.array(2.0), {"edgeitems": 0}, [], "tensor(2., size=())", id="no_edgeitems_scalar"
    ),
    pytest.param(
        np.array([0.5, 2.0]),
        {"sci_mode": True},
        [],
        "tensor([5.0000e-01, 2.0000e+00])",
        id="forced_sci",
    ),
    pytest.param(
        np.zeros(2), {"sci_mode": True}, [], "tensor([0., 0.])", id="forced_sci_zeros"
    ),
    pytest.param(
        np.arange(12.0).reshape(2, 6) / 4,
        {"linewidth": 30},
        [],
        "tensor([[0.0000, 0.2500,\n"
        "         0.5000, 0.7500,\n"
        "         1.0000, 1.2500],\n"
        "        [1.5000, 1.7500,\n"
        "         2.0000, 2.2500,\n"
        "         2.5000, 2.7500]])",
        id="linewidth",
    ),
]


@pytest.mark.parametrize("array, opts, suffixes, expected", LITERALS)
def test_literal(array, opts, suffixes, expected):
    with options(**opts):
        assert format_tensor(array, suffixes=suffixes) == expected


def test_short_profile_summarises_every_dimension():
    expected_start = (
        "tensor([[[0.00e+00, 1.00e+00,  ..., 1.80e+01, 1.90e+01],\n"
        "         [2.00e+01, 2.10e+01,  ..., 3.80e+01, 3.90e+01],\n"
        "         ...,\n"
        "         [1.60e+02, 1.61e+02,  ..., 1.78e+02, 1.79e+02],\n"
        "         [1.80e+02, 1.81e+02,  ..., 1.98e+02, 1.99e+02]],\n"
        "\n"
        "        [[2.00e+02, 2.01e+02,  ..., 2.18e+02, 2.19e+02],\n"
    )
    with options(profile="short"):
        text = format_tensor(np.arange(2000.0).reshape(10, 10, 20))
    assert text.startswith(expected_start)
    assert "\n\n        ...,\n\n        [[1.60e+03," in text


def test_set_printoptions_resets_sci_mode_and_ignores_unknown_profile():
    with options(sci_mode=True, precision=3):
        assert _format.get_printoptions()["sci_mode"] is True
        _format.set_printoptions(profile="no-such-profile")
        expected = {"precision": 3, "threshold": 1000, "edgeitems": 3, "linewidth": 80}
        assert _format.get_printoptions() == {**expected, "sci_mode": None}


def test_printoptions_context_restores():
    before = _format.get_printoptions()
    with _format.printoptions(precision=1, linewidth=20):
        assert format_tensor(np.array([0.25])) == "tensor([0.2])"
    assert _format.get_printoptions() == before


def test_unsupported_dtype():
    with pytest.raises(TypeError):
        format_tensor(np.array([1 + 2j]))


# ---------------------------------------------------------------------------
# Comparison with PyTorch.


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    saved_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    torch.set_printoptions(profile="default")
    # Suffixes wrap by length, and "tapegrad." is longer than "torch.": have PyTorch
    # lay out its suffixes already renamed, so both decide on the same text.
    lay_out = torch._tensor_str._add_suffixes

    def renamed(text, suffixes, *args, **kwargs):
        suffixes = [s.replace("torch.", "tapegrad.") for s in suffixes]
        return lay_out(text, suffixes, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch._tensor_str, "_add_suffixes", renamed)
        yield torch
    torch.set_default_dtype(saved_dtype)
    torch.set_printoptions(profile="default")


def torch_repr(torch, array, grad=None):
    """PyTorch's text for `array`; grad is None, "requires_grad" or "grad_fn"."""
    tensor = torch.from_numpy(array.copy(order="C"))
    if grad is not None:
        tensor.requires_grad_()
        if grad == "grad_fn":
            # x - 0 keeps every value bit for bit (x + 0 would turn -0. into 0.).
            tensor = tensor - 0
    return repr(tensor).replace("torch.", "tapegrad.")


GRAD_SUFFIXES = {
    None: [],
    "requires_grad": ["requires_grad=True"],
    "grad_fn": ["grad_fn=<SubBackward0>"],
}


def check(torch, array, grad=None):
    expected = torch_repr(torch, array, grad)
    assert format_tensor(array, suffixes=GRAD_SUFFIXES[grad]) == expected


@pytest.mark.parametrize("array, opts, suffixes, expected", LITERALS)
def test_literals_are_what_torch_prints(torch, array, opts, suffixes, expected):
    tensor = torch.from_numpy(array)
    if suffixes == ["requires_grad=True"]:
        tensor.requires_grad_()
    elif suffixes == ["grad_fn=<AddBackward0>"]:
        tensor = tensor.requires_grad_() + 0
    with options(torch, **opts):
        assert repr(tensor).replace("torch.", "tapegrad.") == expected


EDGE_CASES = [
    np.array(nan),
    np.array(-inf),
    np.array(-0.0),
    np.array(1e-320),
    np.array(1.7976931348623157e308),
    np.array(True),
    np.array(-(2**63)),
    np.array([0.0, 0.0]),
    np.array([nan, nan]),
    np.array([nan, 1.0]),
    np.array([-inf, 100.0, 0.0]),
    np.array([0.1, 100.0]),
    np.array([0.1, 100.1]),
    np.array([1e-4, 0.1]),
    np.array([9.99995e-5, 1.0]),
    np.array([1e8, 1.0]),
    np.array([1.0e8 + 1, 2.0]),
    np.array([9.99995, 1.0]),
    np.array([99999.5, -1.0]),
    np.array([123456789.0]),
    np.array([5e-324, 1.7976931348623157e308]),
    np.array([-1e-300, 1e300, nan, -inf]),
    np.array([2.0**53, -(2.0**60)]),
    np.array([0.5]),
    np.array([-(2**63), 2**63 - 1]),
    np.array([[True], [False]]),
    np.zeros((3, 0, 2)),
    np.zeros((0,), bool),
    np.zeros((1, 0), np.int64),
    np.arange(1000.0),
    np.arange(1001.0),
    np.arange(1001.0) / 7,
    np.arange(7.0 * 7 * 7 * 7).reshape(7, 7, 7, 7),
    np.arange(7 * 7 * 7 * 7).reshape(7, 7, 7, 7) - 1200,
    np.arange(2 * 3 * 4 * 5 * 6 * 2.0).reshape(2, 3, 4, 5, 6, 2) / 3,
    np.ones((1, 1, 1, 1)),
    np.ones((2000, 1)),
    np.ones((1, 2000), bool),
    np.arange(100.0) * 1e6,
    np.arange(40) * 10**17,
]


def array_id(array):
    return f"{array.dtype}{array.shape}"


@pytest.mark.parametrize("array", EDGE_CASES, ids=array_id)
def test_edge_cases(torch, array):
    check(torch, array)
    if array.dtype == np.float64:
        check(torch, array, "requires_grad")
        check(torch, array, "grad_fn")


@pytest.mark.parametrize(
    "opts",
    [
        {"precision": 0},
        {"precision": 8},
        {"threshold": 0},
        {"threshold": inf},
        {"profile": "full"},
        {"profile": "short", "sci_mode": False},
        {"edgeitems": 0},
        {"edgeitems": 0, "threshold": 5},
        {"edgeitems": 1, "threshold": 1},
        {"linewidth": 1},
        {"linewidth": 200},
        {"sci_mode": True},
        {"sci_mode": False},
    ],
)
@pytest.mark.parametrize("array", EDGE_CASES[:12] + EDGE_CASES[-12:], ids=array_id)
def test_edge_cases_with_options(torch, opts, array):
    with options(torch, **opts):
        check(torch, array)
        if array.dtype == np.float64:
            check(torch, array, "requires_grad")


# Hypothesis-generated tensors.

SPECIAL_FLOATS = [
    0.0, -0.0, nan, -nan, inf, -inf, 5e-324, -1e-310, 1e-300, 1e-5, 9.99995e-5, 1e-4,
    0.5, 1.0, 9.99995, 99999.5, 1e8, 1e8 + 1, 1e16, 1e300, -1.7976931348623157e308,
]

FLOAT_FAMILIES = [
    st.floats(),  # anything, nan and inf included
    st.floats(-1e3, 1e3),  # plain fixed-point
    st.floats(-1e-3, 1e-3),
    st.integers(-(10**6), 10**6).map(float),  # integer mode
    st.integers(-(2**70), 2**70).map(float),
    st.sampled_from(SPECIAL_FLOATS),
]

INT_FAMILIES = [
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-10, 10),
    st.integers(0, 999),
]


def element_strategy(dtype):
    if dtype == np.bool_:
        return st.booleans()
    families = FLOAT_FAMILIES if dtype == np.float64 else INT_FAMILIES
    # Either all values from one family (so e.g. integer mode is reached) or a mix.
    return st.sampled_from(families + [st.one_of(families)]).flatmap(lambda s: s)


small_shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=6)
wide_shapes = hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=40)
# Around and above the summarisation threshold of 1000 elements.
big_shapes = st.sampled_from([(1, 900, 2500), (2, 25, 60), (3, 8, 16), (4, 5, 9)]).flatmap(
    lambda spec: st.tuples(*[st.integers(spec[1], spec[2])] * spec[0])
)


@st.composite
def tensors(draw):
    dtype = draw(st.sampled_from([np.float64, np.float64, np.int64, np.bool_]))
    elements = element_strategy(dtype)
    if draw(st.integers(0, 3)) == 0:
        # Big arrays: values drawn from a small pool, so generation stays fast.
        shape = draw(big_shapes)
        pool = np.array(draw(st.lists(elements, min_size=1, max_size=30)), dtype=dtype)
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        return np.asarray(rng.choice(pool, size=shape), dtype=dtype)
    shape = draw(st.one_of(small_shapes, wide_shapes))
    return draw(hnp.arrays(dtype, shape, elements=elements))


print_options = st.fixed_dictionaries(
    {},
    optional={
        "precision": st.integers(0, 10),
        "threshold": st.sampled_from([0, 1, 6, 50, 1000, inf]),
        "edgeitems": st.integers(0, 4),
        "linewidth": st.integers(1, 160),
        "sci_mode": st.sampled_from([None, True, False]),
        "profile": st.sampled_from(["default", "short", "full"]),
    },
)


@settings(max_examples=300, deadline=None)
@given(array=tensors(), grad=st.sampled_from([None, "requires_grad", "grad_fn"]))
def test_matches_torch(torch, array, grad):
    if array.dtype != np.float64:
        grad = None
    check(torch, array, grad)


@settings(max_examples=300, deadline=None)
@given(array=tensors(), opts=print_options, grad=st.sampled_from([None, "requires_grad"]))
def test_matches_torch_with_options(torch, array, opts, grad):
    if array.dtype != np.float64:
        grad = None
    with options(torch, **opts):
        check(torch, array, grad)


OTHER_DTYPES = [
    np.float16, np.float32, np.int8, np.int16, np.int32,
    np.uint8, np.uint16, np.uint32, np.uint64,
]


@pytest.mark.parametrize("dtype", OTHER_DTYPES, ids=lambda d: np.dtype(d).name)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_other_dtypes_name_their_dtype(torch, dtype, data):
    shape = data.draw(st.one_of(small_shapes, wide_shapes))
    array = data.draw(hnp.arrays(dtype, shape))
    check(torch, array)
