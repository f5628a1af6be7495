"""Module-level PyTorch surface against PyTorch: devices, the default dtype, ``Tensor.to`` and
its relatives, the ``dtype=``/``device=``/``requires_grad=`` keywords of every creation
function, and ``is_tensor``, ``is_floating_point``, ``numel``, ``isclose``, ``allclose``,
``equal``."""
import copy
import math
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import strategies as S  # noqa: F401 - makes the source tree importable
import tapegrad as tg
from oracle import outcome, same

torch = pytest.importorskip("torch")


# ---------------------------------------------------------------------------------------------
# device
# ---------------------------------------------------------------------------------------------

DEVICE_CALLS = [
    lambda L: L.device("cpu"), lambda L: L.device("cpu", 0), lambda L: L.device("cpu:0"),
    lambda L: L.device("cpu:3"), lambda L: L.device(type="cpu"), lambda L: L.device("cuda"),
    lambda L: L.device("cuda:1"), lambda L: L.device("meta"),
    lambda L: L.device(L.device("cpu")),
    lambda L: L.device("foo"), lambda L: L.device("CPU"), lambda L: L.device(""),
    lambda L: L.device("cpu:x"), lambda L: L.device("cpu:00"), lambda L: L.device("cpu: 0"),
    lambda L: L.device("cuda:-1"), lambda L: L.device("cpu", -1), lambda L: L.device(0),
    lambda L: L.device("cpu:0", 1), lambda L: L.device("cpu", 0.5),
    lambda L: L.device("cpu", True),
]


@pytest.mark.parametrize("call", DEVICE_CALLS)
def test_device_construction_matches_pytorch(call):
    ours, theirs = outcome(tg, call), outcome(torch, call)
    if theirs[0] == "error" and theirs[1] == "TypeError":
        assert ours[:2] == theirs[:2]   # PyTorch's argument-parser text lists its overloads
    else:
        assert ours == theirs
    if ours[0] != "error":
        d, t = call(tg), call(torch)
        assert (repr(d), str(d), d.type, d.index) == (repr(t), str(t), t.type, t.index)


def test_device_equality_hash_and_pickling():
    pairs = [("cpu", "cpu"), ("cpu", "cpu:0"), ("cpu:0", "cpu:0"), ("cpu", "cuda")]
    for a, b in pairs:
        assert (tg.device(a) == tg.device(b)) == (torch.device(a) == torch.device(b))
        assert (tg.device(a) != tg.device(b)) == (torch.device(a) != torch.device(b))
    assert (tg.device("cpu") == "cpu") == (torch.device("cpu") == "cpu")
    assert hash(tg.device("cpu")) == hash(tg.device("cpu"))
    assert len({tg.device("cpu"), tg.device("cpu"), tg.device("cpu:0")}) == 2
    for d in (tg.device("cpu"), tg.device("cuda:1")):
        assert pickle.loads(pickle.dumps(d)) == d
        assert copy.deepcopy(d) == d


def test_tensors_live_on_the_cpu():
    x = tg.zeros(2)
    assert x.device == tg.device("cpu") and repr(x.device) == repr(torch.zeros(2).device)
    assert str(x.device) == "cpu" and x.device.type == "cpu"
    assert x.is_cuda is torch.zeros(2).is_cuda and x.is_cpu is torch.zeros(2).is_cpu
    assert x.cpu() is x
    assert tg.cuda.is_available() is False and tg.cuda.device_count() == 0
    tg.cuda.manual_seed(0)
    tg.cuda.manual_seed_all(0)
    device = tg.device("cuda" if tg.cuda.is_available() else "cpu")
    assert tg.ones(2, device=device).device == device


# the CUDA errors of a CPU-only PyTorch: AssertionError, and a message saying CUDA is absent
CUDA_CALLS = [
    lambda L: L.zeros(2, device="cuda"), lambda L: L.zeros(2).to("cuda"),
    lambda L: L.zeros(2).cuda(), lambda L: L.tensor([1.0], device=L.device("cuda:0")),
    lambda L: L.zeros(2).to(L.device("cuda"), L.float64),
    lambda L: L.nn.Linear(2, 2).to("cuda"), lambda L: L.nn.Linear(2, 2).cuda(),
]


@pytest.mark.parametrize("call", CUDA_CALLS)
def test_cuda_raises_as_on_a_cpu_only_pytorch(call):
    ours, theirs = outcome(tg, call), outcome(torch, call)
    assert ours[:2] == theirs[:2] == ("error", "AssertionError")
    assert "not compiled with CUDA enabled" in ours[2]


def test_other_devices_raise_clearly():
    with pytest.raises(RuntimeError, match="CPU only: device 'meta'"):
        tg.zeros(2, device="meta")
    with pytest.raises(RuntimeError, match="CPU only: device 'mps'"):
        tg.zeros(2).to("mps")


# ---------------------------------------------------------------------------------------------
# The default dtype
# ---------------------------------------------------------------------------------------------


def test_default_dtype_is_float64():
    assert tg.get_default_dtype() is tg.float64
    assert repr(tg.get_default_dtype()) == \
        repr(torch.get_default_dtype()).replace("torch", "tapegrad")
    tg.set_default_dtype(tg.float64)
    tg.set_default_dtype(tg.double)
    tg.set_default_dtype(tg.float)   # tapegrad's float is float64 (README)
    assert tg.get_default_dtype() is tg.float64
    assert tg.tensor([1.5]).dtype is tg.float64


@pytest.mark.parametrize("name", ["int64", "int32", "bool", "uint8"])
def test_default_dtype_must_be_floating_as_in_pytorch(name):
    call = lambda L: L.set_default_dtype(getattr(L, name))  # noqa: E731
    same(call, torch)


@pytest.mark.parametrize("arg", [float, "float64", None])
def test_default_dtype_rejects_non_dtypes_as_pytorch(arg):
    same(lambda L: L.set_default_dtype(arg), torch)


@pytest.mark.parametrize("name", ["float32", "float16", "half", "bfloat16"])
def test_default_dtype_refuses_missing_floating_types(name):
    missing = getattr(tg, name).name
    with pytest.raises(TypeError,
                       match=f"float64 as its only floating dtype.*{missing} is not supported"):
        tg.set_default_dtype(getattr(tg, name))
    assert tg.get_default_dtype() is tg.float64


def test_dtype_objects_match_pytorch():
    for name in ["float64", "double", "int64", "long", "int32", "int", "int16", "short", "int8",
                 "uint8", "bool", "float32", "float16", "half", "bfloat16"]:
        ours, theirs = getattr(tg, name), getattr(torch, name)
        assert repr(ours) == repr(theirs).replace("torch", "tapegrad"), name
        assert (ours.is_floating_point, ours.is_signed, ours.itemsize, ours.is_complex) == \
            (theirs.is_floating_point, theirs.is_signed, theirs.itemsize, theirs.is_complex), name
        assert pickle.loads(pickle.dumps(ours)) is ours
    # documented difference: PyTorch's float is float32, tapegrad's is its only float, float64
    assert tg.float is tg.float64 and torch.float is torch.float32


# ---------------------------------------------------------------------------------------------
# Tensor.to and the conversions
# ---------------------------------------------------------------------------------------------

FLOATS = np.array([1.5, -2.7, 0.0, 3.0])
TO_CALLS = {
    "dtype": lambda L, x: x.to(L.int32),
    "dtype-kw": lambda L, x: x.to(dtype=L.int16),
    "device": lambda L, x: x.to("cpu"),
    "device-object": lambda L, x: x.to(L.device("cpu")),
    "device-index": lambda L, x: x.to("cpu:0"),
    "device-dtype": lambda L, x: x.to("cpu", L.int8),
    "device-dtype-kw": lambda L, x: x.to(device="cpu", dtype=L.uint8),
    "all-positional": lambda L, x: x.to(L.device("cpu"), L.int16, False, True),
    "dtype-positional-flags": lambda L, x: x.to(L.int64, False, True),
    "non-blocking": lambda L, x: x.to(L.int16, non_blocking=True),
    "other": lambda L, x: x.to(L.tensor([1], dtype=L.int8)),
    "other-float": lambda L, x: x.to(L.tensor([1.0])),
    "python-float": lambda L, x: x.to(float),
    "python-int": lambda L, x: x.to(int),
    "python-bool": lambda L, x: x.to(bool),
    "none": lambda L, x: x.to(None),
    "nothing": lambda L, x: x.to(),
    "same-dtype": lambda L, x: x.to(L.float64),
    "copy": lambda L, x: x.to(L.float64, copy=True),
    "device-copy": lambda L, x: x.to("cpu", copy=True),
    "copy-int": lambda L, x: x.to(L.int32, copy=True),
    "two-dtypes": lambda L, x: x.to(L.int16, L.int32),
    "dtype-then-device": lambda L, x: x.to(L.int16, "cpu"),
    "bad-device-string": lambda L, x: x.to("int32"),
    "numpy-type": lambda L, x: x.to(np.int32),
    "int-device": lambda L, x: x.to(5),
}
# where PyTorch records ToCopyBackward0 tapegrad records a clone (README)
TO_NODE = {"copy": "CloneBackward0", "device-copy": "CloneBackward0",
           "device-index": "CloneBackward0"}


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("name", sorted(TO_CALLS))
def test_to_matches_pytorch(name, requires_grad):
    call = TO_CALLS[name]
    ours = outcome(tg, lambda L: call(L, L.tensor(FLOATS, requires_grad=requires_grad)))
    theirs = outcome(torch, lambda L: call(L, L.tensor(FLOATS, requires_grad=requires_grad)))
    if theirs[0] == "error" and "invalid combination of arguments" in theirs[2]:
        # PyTorch's argument parser lists its overloads in its own words
        assert ours[:2] == theirs[:2] and "to() received an invalid combination" in ours[2]
        return
    if requires_grad and name in TO_NODE:
        assert theirs[-1] == "ToCopyBackward0" and ours[-1] == TO_NODE[name]
        ours, theirs = ours[:-1], theirs[:-1]
    assert ours == theirs


def test_to_returns_the_tensor_itself_when_nothing_changes():
    for L in (tg, torch):
        x = L.tensor(FLOATS)
        for same_x in (x.to(L.float64), x.to("cpu"), x.to(x), x.to(), x.double(), x.cpu()):
            assert same_x is x
        assert x.to(L.float64, copy=True) is not x
        assert x.to("cpu:0") is not x   # not the tensor's device ("cpu"): a copy
    i = tg.tensor([1, 2], dtype=tg.int32)
    assert i.int() is i and i.to(tg.int32) is i


def test_copied_tensor_owns_its_value_and_passes_gradients():
    x = tg.tensor(FLOATS, requires_grad=True)
    y = x.to(tg.float64, copy=True)
    (y * y).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 2 * FLOATS)
    z = tg.tensor(FLOATS).to("cpu", copy=True)
    assert not np.shares_memory(z.numpy(), FLOATS)


CONVERSIONS = ["long", "int", "short", "char", "byte", "bool", "double"]
CONVERTED = np.array([0.0, 1.0, -1.0, 2.5, -2.5, 0.7, -0.7, 100.9, 127.0, -128.0, 255.0, 3e4])


@pytest.mark.parametrize("method", CONVERSIONS)
@pytest.mark.parametrize("source", ["float64", "int64", "int32", "int16", "int8", "uint8", "bool"])
def test_conversion_methods_match_pytorch(method, source):
    values = CONVERTED
    if source != "float64":
        # the values a source type holds; conversions out of range wrap in both libraries
        values = np.array([0, 1, 2, 5, 100, 127, 3]) if source != "bool" else np.array([0, 1, 1])
    same(lambda L: getattr(L.tensor(values).to(getattr(L, source)), method)(), torch)


@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=2),
                  elements=st.floats(-3e4, 3e4, allow_nan=False)),
       st.sampled_from(CONVERSIONS))
def test_conversions_of_floats_truncate_and_wrap_as_pytorch(values, method):
    """Floats in range of int16 and beyond: truncation toward zero, then wrap-around for the
    narrow types (out of int32's range PyTorch leaves the result undefined: not drawn)."""
    same(lambda L: getattr(L.tensor(values), method)(), torch)


def test_float_method_gives_float64():
    """PyTorch's .float() makes float32; tapegrad's only float is float64 (README)."""
    x = tg.tensor([1, 2], dtype=tg.int32)
    assert x.float().dtype is tg.float64
    np.testing.assert_array_equal(x.float().numpy(), [1.0, 2.0])
    with pytest.raises(TypeError, match="float32 is not supported yet"):
        x.to(tg.float32)
    with pytest.raises(TypeError, match="float16 is not supported yet"):
        x.half()


def test_conversion_of_a_tensor_requiring_grad():
    for L in (tg, torch):
        x = L.tensor([1.5, -2.0], requires_grad=True)
        i = x.long()
        assert not i.requires_grad and i.grad_fn is None
        assert x.double() is x


# ---------------------------------------------------------------------------------------------
# Creation functions: dtype=, device=, requires_grad=
# ---------------------------------------------------------------------------------------------

DTYPES = ["float64", "int64", "int32", "int16", "int8", "uint8", "bool"]

CREATION = {
    "tensor": lambda L, kw: L.tensor([[1, 2], [3, 0]], **kw),
    "tensor-float-data": lambda L, kw: L.tensor([1.7, -0.2, 3.9], **kw),
    "tensor-scalar": lambda L, kw: L.tensor(3, **kw),
    "as_tensor": lambda L, kw: L.as_tensor([1, 0, 2], **kw),
    "zeros": lambda L, kw: L.zeros(2, 3, **kw),
    "zeros-tuple": lambda L, kw: L.zeros((2, 1), **kw),
    "ones": lambda L, kw: L.ones(3, **kw),
    "empty-shape": lambda L, kw: L.empty(2, 0, **kw).shape,
    "full": lambda L, kw: L.full((2, 2), 7, **kw),
    "full-float": lambda L, kw: L.full((2,), 2.5, **kw),
    "zeros_like": lambda L, kw: L.zeros_like(L.tensor([1.0, 2.0]), **kw),
    "ones_like": lambda L, kw: L.ones_like(L.tensor([[1, 2]]), **kw),
    "full_like": lambda L, kw: L.full_like(L.tensor([1.0, 2.0]), 3, **kw),
    "empty_like-shape": lambda L, kw: L.empty_like(L.tensor([1, 2]), **kw).shape,
    "arange": lambda L, kw: L.arange(5, **kw),
    "arange-steps": lambda L, kw: L.arange(1, 9, 3, **kw),
    "linspace": lambda L, kw: L.linspace(0, 10, 5, **kw),
    "eye": lambda L, kw: L.eye(3, **kw),
    "eye-rect": lambda L, kw: L.eye(2, 3, **kw),
    "randint-meta": lambda L, kw: _meta(L.randint(0, 5, (3, 2), **kw)),
    "randint-high-size": lambda L, kw: _meta(L.randint(5, (4,), **kw)),
    "randperm-meta": lambda L, kw: _meta(L.randperm(4, **kw)),
    "rand-meta": lambda L, kw: _meta(L.rand(2, 3, **kw)),
    "randn-meta": lambda L, kw: _meta(L.randn(3, **kw)),
    "rand_like-meta": lambda L, kw: _meta(L.rand_like(L.zeros(2), **kw)),
    "randn_like-meta": lambda L, kw: _meta(L.randn_like(L.zeros(2), **kw)),
}


def _meta(t):
    """What a random tensor shares across libraries: dtype, shape, flags."""
    return (str(t.dtype).split(".")[-1], tuple(t.shape), t.requires_grad, t.is_leaf)


@pytest.mark.parametrize("name", sorted(CREATION))
@pytest.mark.parametrize("dtype", [None] + DTYPES)
@pytest.mark.parametrize("requires_grad", [False, True])
def test_creation_keywords_match_pytorch(name, dtype, requires_grad):
    call = CREATION[name]

    def kwargs(L):
        kw = {"device": "cpu", "requires_grad": requires_grad}
        if dtype is not None:
            kw["dtype"] = getattr(L, dtype)
        return kw
    if name.startswith("as_tensor"):   # as_tensor has no requires_grad= in PyTorch
        def run(L):
            kw = kwargs(L)
            del kw["requires_grad"]
            return call(L, kw)
    else:
        def run(L):
            return call(L, kwargs(L))
    same(run, torch)


@pytest.mark.parametrize("name", sorted(CREATION))
def test_creation_takes_a_device_object(name):
    same(lambda L: CREATION[name](L, {"device": L.device("cpu")}), torch)


OVERFLOW_CALLS = [
    lambda L: L.tensor([300], dtype=L.uint8), lambda L: L.tensor([-1], dtype=L.uint8),
    lambda L: L.tensor([-256], dtype=L.uint8), lambda L: L.tensor([128], dtype=L.int8),
    lambda L: L.tensor([2 ** 40], dtype=L.int32), lambda L: L.tensor([300.5], dtype=L.int8),
    lambda L: L.tensor([float("nan")], dtype=L.int16), lambda L: L.tensor([1.7], dtype=L.int32),
    lambda L: L.full((2,), 300, dtype=L.uint8), lambda L: L.full((2,), -1, dtype=L.uint8),
    lambda L: L.full((1,), 2 ** 40, dtype=L.int32), lambda L: L.full((1,), 2.5, dtype=L.int8),
    lambda L: L.full((1,), 2 ** 40, dtype=L.bool), lambda L: L.full((1,), True, dtype=L.int8),
    lambda L: L.full_like(L.zeros(2, dtype=L.int8), 1000),
]


@pytest.mark.parametrize("call", OVERFLOW_CALLS)
def test_integer_overflow_in_creation_matches_pytorch(call):
    same(call, torch)


def test_randint_and_randperm_take_integer_dtypes_and_draw_in_range():
    for dt in (tg.int8, tg.uint8, tg.int16, tg.int32, tg.int64):
        x = tg.randint(-3 if dt.is_signed else 0, 7, (50,), dtype=dt)
        assert x.dtype is dt and x.numpy().min() >= (-3 if dt.is_signed else 0)
        assert x.numpy().max() < 7
        p = tg.randperm(6, dtype=dt)
        assert p.dtype is dt and sorted(p.tolist()) == list(range(6))
    with pytest.raises(TypeError, match="size"):
        tg.randint(5)


# ---------------------------------------------------------------------------------------------
# is_tensor, is_floating_point, numel, isclose, allclose, equal
# ---------------------------------------------------------------------------------------------

PREDICATES = [
    lambda L: L.is_tensor(L.zeros(2)), lambda L: L.is_tensor([1.0]),
    lambda L: L.is_tensor(L.nn.Parameter(L.zeros(1))), lambda L: L.is_tensor(np.zeros(2)),
    lambda L: L.is_floating_point(L.zeros(2)),
    lambda L: L.is_floating_point(L.zeros(2, dtype=L.int32)),
    lambda L: L.is_floating_point([1.0]),
    lambda L: L.numel(L.zeros(2, 3)), lambda L: L.numel(L.zeros(())),
    lambda L: L.numel(L.zeros(0, 4)), lambda L: L.numel([1]),
    lambda L: L.allclose(L.tensor([1, 2]), L.tensor([1.0, 2.0])),
    lambda L: L.allclose(L.tensor([1.0, 2.0]), L.tensor([1, 2])),
    lambda L: L.allclose(L.tensor([1.0, 2.0]), L.tensor([1.0, 2.0, 3.0])),
    lambda L: L.allclose(L.tensor([1.0, 2.0]), L.tensor([[1.0, 2.0]])),
    lambda L: L.allclose(L.tensor([1.0, 2.0]), 1.0),
    lambda L: L.isclose(L.tensor([1.0, 2.0]), 1.0),
    lambda L: L.isclose(L.tensor([1.0]), L.tensor([1.0]), rtol=-1),
    lambda L: L.isclose(L.tensor([1.0]), L.tensor([1.0]), atol=-1),
    lambda L: L.isclose(L.tensor([True, False]), L.tensor([True, True])),
    lambda L: L.isclose(L.tensor([True, False]), L.tensor([True, True]), atol=1.0),
    lambda L: L.isclose(L.tensor([1, 2], dtype=L.int8), L.tensor([1, 5], dtype=L.int8),
                        atol=2),
    lambda L: L.isclose(L.tensor([-128, 127], dtype=L.int8),
                        L.tensor([127, -128], dtype=L.int8), atol=1),
    lambda L: L.isclose(L.tensor([1, 2]), L.tensor([1, 2], dtype=L.int32)),
    lambda L: L.isclose(L.tensor([1.0, 2.0], requires_grad=True), L.tensor([1.0, 2.5])),
    lambda L: L.allclose(L.tensor([1.0, 2.0], requires_grad=True), L.tensor([1.0, 2.0])),
    lambda L: L.equal(L.tensor([1, 2]), L.tensor([1.0, 2.0])),
    lambda L: L.equal(L.tensor([1.0, 2.0]), L.tensor([[1.0, 2.0]])),
    lambda L: L.equal(L.tensor([math.nan]), L.tensor([math.nan])),
    lambda L: L.equal(L.tensor([1.0, 2.0]), [1.0, 2.0]),
    lambda L: L.equal(L.tensor([True]), L.tensor([1], dtype=L.uint8)),
    lambda L: L.equal(L.tensor([1.0, 2.0]), L.tensor([1.0, 2.0], requires_grad=True)),
    lambda L: L.equal(L.zeros(0), L.zeros(0, dtype=L.int32)),
]


@pytest.mark.parametrize("call", PREDICATES)
def test_predicates_match_pytorch(call):
    same(call, torch)


SPECIAL = st.sampled_from([0.0, -0.0, 1.0, 1.0 + 1e-9, 1.0 + 1e-4, math.inf, -math.inf, math.nan,
                           1e-9, -1e-9, 1e300])
ELEMENTS = st.one_of(st.floats(-10, 10), SPECIAL)


@given(data=st.data(), rtol=st.sampled_from([0.0, 1e-5, 1e-2, 1.0]),
       atol=st.sampled_from([0.0, 1e-8, 1e-3, 0.5, math.inf]), equal_nan=st.booleans())
def test_isclose_and_allclose_match_pytorch(data, rtol, atol, equal_nan):
    sa, sb = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3)).input_shapes
    a = data.draw(hnp.arrays(np.float64, sa, elements=ELEMENTS))
    if data.draw(st.booleans()):   # b near a: where the tolerances decide
        b = a + data.draw(hnp.arrays(np.float64, sa, elements=st.floats(-1e-3, 1e-3)))
    else:
        b = data.draw(hnp.arrays(np.float64, sb, elements=ELEMENTS))
    for fn in ("isclose", "allclose"):
        same(lambda L: getattr(L, fn)(L.tensor(a), L.tensor(b), rtol=rtol, atol=atol,
                                      equal_nan=equal_nan), torch)


@given(data=st.data(), dtype=st.sampled_from(["int8", "uint8", "int16", "int32", "int64"]),
       rtol=st.sampled_from([0.0, 0.1, 1.0]), atol=st.sampled_from([0.0, 1.0, 3.0]))
def test_isclose_of_integers_matches_pytorch(data, dtype, rtol, atol):
    """Integers are compared as float64 (an int8 difference of 255 does not wrap)."""
    info = np.iinfo(dtype)
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=2))
    a, b = (data.draw(hnp.arrays(np.int64, shape, elements=st.integers(
        int(max(info.min, -300)), int(min(info.max, 300))))) for _ in range(2))
    same(lambda L: L.isclose(L.tensor(a, dtype=getattr(L, dtype)),
                             L.tensor(b, dtype=getattr(L, dtype)), rtol=rtol, atol=atol), torch)


@given(data=st.data())
def test_equal_matches_pytorch(data):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0))
    a = data.draw(hnp.arrays(np.float64, shape,
                             elements=st.sampled_from([0.0, 1.0, 2.0, -0.0, math.nan])))
    b = a.copy() if data.draw(st.booleans()) else data.draw(
        hnp.arrays(np.float64, data.draw(st.sampled_from([shape, shape + (1,), (2,)])),
                   elements=st.sampled_from([0.0, 1.0, 2.0])))
    same(lambda L: L.equal(L.tensor(a), L.tensor(b)), torch)
