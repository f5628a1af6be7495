"""``tapegrad.save`` / ``tapegrad.load``: round trips of tensors, state dicts, optimizer state
and checkpoints (compared with what ``torch.save``/``torch.load`` give back for the same
object), paths and file objects, and files that must be refused without running anything."""
import io
import json
import math
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import strategies as S  # noqa: F401 - makes the source tree importable
import tapegrad as tg
from oracle import summary
from tapegrad import nn, optim
from tapegrad.serialization import LoadError

torch = pytest.importorskip("torch")

DTYPES = ["float64", "int64", "int32", "int16", "int8", "uint8", "bool"]


def round_trip(lib, obj, **load_kwargs):
    buffer = io.BytesIO()
    lib.save(obj, buffer)
    buffer.seek(0)
    if lib is torch:
        load_kwargs.setdefault("weights_only", True)
    return lib.load(buffer, **load_kwargs)


def described(x):
    """A description of a loaded object that both libraries' loads can be compared by."""
    if isinstance(x, (tg.Tensor, torch.Tensor)):
        kind = "Parameter" if isinstance(x, (nn.Parameter, torch.nn.Parameter)) else "Tensor"
        return (kind, summary(x), x.is_leaf)
    if isinstance(x, (dict, OrderedDict)):
        return (type(x).__name__, [(described(k), described(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [described(v) for v in x])
    if isinstance(x, (tg.Size, torch.Size)):
        return ("Size", list(x))
    if isinstance(x, (tg.dtype, torch.dtype, tg.device, torch.device)):
        return (type(x).__name__, repr(x).replace("torch.", "tapegrad."))
    return summary(x)


def both(build):
    """``build(lib)`` saved and loaded by each library, described."""
    return [described(round_trip(lib, build(lib))) for lib in (tg, torch)]


def assert_same_round_trip(build):
    ours, theirs = both(build)
    assert ours == theirs


# ---------------------------------------------------------------------------------------------
# Round trips against torch.save / torch.load
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3), (2, 0, 4)])
def test_tensors_of_every_dtype_and_shape(dtype, shape):
    values = np.arange(int(np.prod(shape))).reshape(shape) % 3 - 1
    assert_same_round_trip(lambda L: L.tensor(values, dtype=getattr(L, dtype)))


@given(a=hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0),
                    elements=st.floats(allow_nan=True, allow_infinity=True)))
def test_float_values_survive_bit_for_bit(a):
    loaded = round_trip(tg, tg.tensor(a))
    assert loaded.dtype is tg.float64 and loaded.shape == a.shape
    assert loaded.numpy().tobytes() == a.tobytes()


def test_requires_grad_parameters_and_computed_tensors():
    def build(L):
        w = L.tensor([1.0, 2.0], requires_grad=True)
        return {"leaf": w, "computed": w * 2, "plain": L.zeros(2),
                "param": L.nn.Parameter(L.ones(2)),
                "frozen": L.nn.Parameter(L.ones(1), requires_grad=False)}
    assert_same_round_trip(build)


def test_nested_checkpoint_with_numbers_and_strings():
    def build(L):
        model = L.nn.Sequential(L.nn.Linear(3, 2), L.nn.ReLU(), L.nn.Linear(2, 1))
        # the same weights in both libraries (each draws its own at construction)
        model.load_state_dict({k: L.tensor(np.full(tuple(v.shape), 0.5))
                               for k, v in model.state_dict().items()})
        return {"epoch": 7, "loss": 0.125, "best": math.inf, "bad": math.nan, "name": "mlp",
                "done": False, "note": None, "model": model.state_dict(),
                "history": [0.5, 0.25, (1, 2.5, "x")], "labels": L.tensor([1, 0, 2]),
                3: "int key", (1, "a"): "tuple key", 2.5: [L.tensor(1.5), L.tensor(True)],
                "nested": {"deeper": {"deepest": [[L.tensor([[1, 2]], dtype=L.int32)]]}}}
    ours, theirs = both(build)
    assert ours == theirs
    model = next(v for k, v in ours[1] if k == ("python", "str", "model"))
    assert [k for k, _ in model[1]] == [("python", "str", n) for n in
                                        ("0.weight", "0.bias", "2.weight", "2.bias")]


def test_dtypes_devices_and_sizes():
    assert_same_round_trip(lambda L: [L.float64, L.int32, L.bool, L.device("cpu"),
                                      L.device("cpu", 0), L.Size([2, 3]), L.Size([])])


def test_a_tensor_held_twice_loads_as_one_tensor():
    for lib in (tg, torch):
        w = lib.nn.Parameter(lib.zeros(2))
        t = lib.ones(3)
        loaded = round_trip(lib, {"a": w, "b": [w, t], "c": (t,)})
        assert loaded["a"] is loaded["b"][0]
        assert loaded["b"][1] is loaded["c"][0]


def test_state_dict_round_trip_restores_the_model():
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    model.register_buffer("running", tg.tensor([1, 2, 3], dtype=tg.int32))
    buffer = io.BytesIO()
    tg.save(model.state_dict(), buffer)
    buffer.seek(0)
    fresh = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    fresh.register_buffer("running", tg.zeros(3, dtype=tg.int32))
    result = fresh.load_state_dict(tg.load(buffer))
    assert repr(result) == "<All keys matched successfully>"
    x = tg.randn(5, 4)
    np.testing.assert_array_equal(fresh(x).detach().numpy(), model(x).detach().numpy())
    assert fresh.running.tolist() == [1, 2, 3] and fresh.running.dtype is tg.int32
    assert type(tg.load(io.BytesIO(buffer.getvalue()))) is OrderedDict


def test_optimizer_state_round_trip_continues_the_same_trajectory():
    """A checkpoint taken mid-training (model, optimizer state with integer keys and tuples,
    epoch) resumes to the same parameters as training straight through."""
    def train(model, opt, steps):
        x = tg.tensor(np.linspace(-1, 1, 12).reshape(6, 2))
        y = tg.tensor(np.sin(np.linspace(0, 3, 6)).reshape(6, 1))
        for _ in range(steps):
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()

    def fresh():
        tg.manual_seed(1)
        model = nn.Sequential(nn.Linear(2, 5), nn.Tanh(), nn.Linear(5, 1))
        return model, optim.Adam(model.parameters(), lr=0.05, betas=(0.8, 0.99))

    straight, opt = fresh()
    train(straight, opt, 10)

    model, opt = fresh()
    train(model, opt, 4)
    buffer = io.BytesIO()
    tg.save({"epoch": 4, "model": model.state_dict(), "optimizer": opt.state_dict()}, buffer)
    buffer.seek(0)
    checkpoint = tg.load(buffer)
    assert checkpoint["epoch"] == 4
    assert checkpoint["optimizer"]["param_groups"][0]["betas"] == (0.8, 0.99)
    assert sorted(checkpoint["optimizer"]["state"]) == [0, 1, 2, 3]
    resumed, resumed_opt = fresh()
    resumed.load_state_dict(checkpoint["model"])
    resumed_opt.load_state_dict(checkpoint["optimizer"])
    train(resumed, resumed_opt, 6)
    for a, b in zip(resumed.parameters(), straight.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_optimizer_state_dict_has_pytorchs_structure_after_loading():
    def build(L):
        p = L.nn.Parameter(L.tensor([1.0, -2.0]))
        opt = L.optim.SGD([p], lr=0.1, momentum=0.9)
        p.grad = L.tensor([0.5, 0.25])
        opt.step()
        return opt.state_dict()
    ours, theirs = both(build)
    # PyTorch's SGD keeps options tapegrad's does not have (foreach, fused, ...): compare the
    # keys both have, and the state
    def keys(d):
        return dict(d[1])
    state = ("python", "str", "state")
    assert keys(ours)[state] == keys(theirs)[state]
    groups = ("python", "str", "param_groups")
    ours_group = dict(keys(ours)[groups][1][0][1])
    theirs_group = dict(keys(theirs)[groups][1][0][1])
    for k in ours_group:
        assert ours_group[k] == theirs_group[k], k


# ---------------------------------------------------------------------------------------------
# Paths, file objects, keywords
# ---------------------------------------------------------------------------------------------


def test_paths_and_file_objects(tmp_path):
    obj = {"w": tg.tensor([[1.0, 2.0]]), "n": tg.tensor([3], dtype=tg.uint8)}
    targets = [str(tmp_path / "a.pt"), tmp_path / "b.pt"]
    for target in targets:
        tg.save(obj, target)
        loaded = tg.load(target)
        assert loaded["w"].tolist() == [[1.0, 2.0]] and loaded["n"].dtype is tg.uint8
    with open(tmp_path / "c.pt", "wb") as fh:
        tg.save(obj, fh)
    with open(tmp_path / "c.pt", "rb") as fh:
        assert tg.load(fh)["n"].tolist() == [3]


class _Unseekable(io.RawIOBase):
    """A pipe-like stream: read and write, no seek."""

    def __init__(self, data=b""):
        self.data, self.pos = bytearray(data), 0

    def readable(self):
        return True

    def writable(self):
        return True

    def seekable(self):
        return False

    def write(self, b):
        self.data += b
        return len(b)

    def readinto(self, b):
        n = min(len(b), len(self.data) - self.pos)
        b[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        return n


def test_streams_that_cannot_seek():
    out = _Unseekable()
    tg.save([tg.tensor([1, 2], dtype=tg.int8)], out)
    loaded = tg.load(_Unseekable(bytes(out.data)))
    assert loaded[0].tolist() == [1, 2] and loaded[0].dtype is tg.int8


@pytest.mark.parametrize("kwargs", [{"map_location": "cpu"}, {"map_location": None},
                                    {"map_location": tg.device("cpu")},
                                    {"map_location": {"cuda:0": "cpu"}},
                                    {"weights_only": True}, {"weights_only": False},
                                    {"mmap": False}])
def test_load_keywords(kwargs):
    assert round_trip(tg, [tg.ones(1)], **kwargs)[0].tolist() == [1.0]


def test_map_location_elsewhere_raises():
    with pytest.raises(AssertionError, match="CUDA"):
        round_trip(tg, tg.ones(1), map_location="cuda")
    with pytest.raises(TypeError, match="map_location"):
        round_trip(tg, tg.ones(1), map_location=lambda storage, location: storage)
    with pytest.raises(TypeError, match="reads no pickle"):
        round_trip(tg, tg.ones(1), pickle_module=pickle)


def test_missing_file_is_an_os_error(tmp_path):
    for lib in (tg, torch):
        with pytest.raises(FileNotFoundError):
            lib.load(str(tmp_path / "nothing.pt"))


@pytest.mark.parametrize("obj, what", [
    (object(), "object"), ({1, 2}, "set"), (b"bytes", "bytes"), (lambda: 0, "function"),
    ({"k": [1, np.zeros(2, dtype=np.complex128)]}, "complex128"),
    (np.zeros(2, dtype=object), "dtype object"),
])
def test_objects_the_format_cannot_hold_are_refused_when_saving(obj, what):
    with pytest.raises(TypeError, match=what):
        tg.save(obj, io.BytesIO())


def test_numpy_arrays_round_trip():
    loaded = round_trip(tg, {"a": np.arange(6, dtype=np.int16).reshape(2, 3)})
    assert isinstance(loaded["a"], np.ndarray) and loaded["a"].dtype == np.int16
    assert loaded["a"].tolist() == [[0, 1, 2], [3, 4, 5]]


# ---------------------------------------------------------------------------------------------
# Files that must be refused, without running anything
# ---------------------------------------------------------------------------------------------


def saved_bytes(obj):
    buffer = io.BytesIO()
    tg.save(obj, buffer)
    return buffer.getvalue()


def rewritten(data, change):
    """The archive ``data`` with its entries passed through ``change(name, bytes)`` (None
    drops an entry) and extra entries from ``change(None, None)`` (a dict)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            new = change(name, src.read(name))
            if new is not None:
                dst.writestr(name, new)
        for name, content in (change(None, None) or {}).items():
            dst.writestr(name, content)
    return out.getvalue()


def with_structure(data, edit):
    """The archive with its structure passed through ``edit`` (a function of the decoded
    JSON, returning JSON text or an object to encode)."""
    def change(name, content):
        if name is not None and name.endswith("structure.json"):
            new = edit(json.loads(content))
            return new if isinstance(new, str) else json.dumps(new)
        return content
    return rewritten(data, change)


def with_array(data, index, array):
    """The archive with array ``index`` replaced by the .npy of ``array``."""
    return rewritten(data, lambda n, c: _npy(array) if n == f"tapegrad_save/arrays/{index}.npy"
                     else c)


class Exploit:
    """Pickling this runs ``exec`` on loading: the thing a safe format must never do."""

    def __reduce__(self):
        return (exec, ("import builtins; builtins.TAPEGRAD_EXPLOITED = True",))


SAMPLE = {"w": tg.tensor([1.0, 2.0]), "n": 3}


def garbled():
    data = saved_bytes(SAMPLE)
    yield "not a zip", b"garbage" * 10, "not a zip archive"
    yield "empty", b"", "not a zip archive"
    yield "truncated", data[: len(data) // 2], "not a tapegrad.save file"
    yield "pickle", pickle.dumps(Exploit()), "not a zip archive"
    yield ("no structure", rewritten(data, lambda n, c: None if n and "structure" in n else c),
           "no tapegrad_save/structure.json")
    yield "extra pickle entry", rewritten(data, lambda n, c: {"tapegrad_save/evil.pkl":
                                                              pickle.dumps(Exploit())}
                                          if n is None else c), "unexpected entries"
    yield "bad json", rewritten(data, lambda n, c: b"{not json" if n and "structure" in n
                                else c), "structure cannot be read"
    yield "wrong format", with_structure(data, lambda s: {**s, "format": "other"}), \
        "not a tapegrad.save structure"
    yield "new version", with_structure(data, lambda s: {**s, "version": 99}), \
        "format version 99"
    yield "unknown node", with_structure(data, lambda s: {**s, "root": {"pickle": "x"}}), \
        "unknown node kind 'pickle'"
    yield "missing array", with_structure(data, lambda s: {**s, "root": {
        "tensor": 7, "requires_grad": False}}), "refers to array 7"
    yield "bad array number", with_structure(data, lambda s: {**s, "root": {
        "tensor": "0", "requires_grad": False}}), "without an array number"
    yield "bad dict entry", with_structure(data, lambda s: {**s, "root": {"dict": [[1]]}}), \
        "not a [key, value] pair"
    yield "unhashable key", with_structure(data, lambda s: {**s, "root": {
        "dict": [[{"list": []}, 1]]}}), "unhashable dict key"
    yield "bad float", with_structure(data, lambda s: {**s, "root": {"float": "1e5"}}), \
        "float node"
    yield "bare NaN", rewritten(data, lambda n, c: c.replace(b'"n", 3', b'"n", NaN')
                                if n and "structure" in n else c), "bare NaN"
    yield "object array", with_array(data, 0, np.array([Exploit()], dtype=object)), \
        "cannot be read"
    yield "complex array", with_array(data, 0, np.zeros(2, np.complex128)), "dtype complex128"
    yield "integer tensor requiring grad", with_structure(
        with_array(data, 0, np.array([1, 2])),
        lambda s: {**s, "root": {"tensor": 0, "requires_grad": True}}), "requiring grad"
    yield "one array as two kinds", with_structure(data, lambda s: {**s, "root": {"list": [
        {"tensor": 0, "requires_grad": False}, {"ndarray": 0}]}}), "used as both"
    yield "deep nesting", with_structure(
        data, lambda s: '{"format": "tapegrad.save", "version": 1, "root": '
        + '{"list": [' * 100000 + "1" + "]}" * 100000 + "}"), "cannot be read"


def _npy(a):
    buffer = io.BytesIO()
    np.save(buffer, a, allow_pickle=True)
    return buffer.getvalue()


GARBLED = list(garbled())


@pytest.mark.parametrize("name, data, why", GARBLED, ids=[g[0] for g in GARBLED])
def test_garbled_and_malicious_files_are_refused(name, data, why):
    import builtins
    with pytest.raises(LoadError, match="not a tapegrad.save file") as info:
        tg.load(io.BytesIO(data))
    assert why in str(info.value)
    assert not hasattr(builtins, "TAPEGRAD_EXPLOITED")
    # callers catching PyTorch's error type, or ValueError, catch it too
    assert isinstance(info.value, pickle.UnpicklingError) and isinstance(info.value, ValueError)


def test_a_file_written_by_torch_save_is_refused_with_directions():
    buffer = io.BytesIO()
    torch.save({"w": torch.zeros(2)}, buffer)
    with pytest.raises(LoadError, match="written by torch.save"):
        tg.load(io.BytesIO(buffer.getvalue()))
