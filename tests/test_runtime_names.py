"""Names ordinary PyTorch programs use at their start or in library code, compared with
PyTorch: constants, memory formats, process settings, ``torch.version``, ``torch.random``,
``nn.Buffer``/``nn.parameter`` and nn.functional's in-place activations."""
import math
import warnings

import pytest
import torch

import tapegrad as tg
from tapegrad import settings
from tapegrad.nn import functional as F


def _error(fn):
    try:
        fn()
    except Exception as e:   # noqa: BLE001 - the type and text are what is compared
        return type(e).__name__, str(e).replace("torch.", "tapegrad.")
    return None


def test_constants_are_pytorchs():
    for name in ("pi", "e", "inf"):
        assert getattr(tg, name) == getattr(torch, name)
    assert math.isnan(tg.nan) and tg.newaxis is torch.newaxis is None
    assert tg.ones(3)[:, tg.newaxis].shape == (3, 1)


FORMAT_CASES = [
    (lambda m, x: x(2, 3).contiguous(memory_format=m.channels_last)),
    (lambda m, x: x(2, 3, 4).contiguous(memory_format=m.channels_last_3d)),
    (lambda m, x: x(2, 3, 4).contiguous(memory_format="a")),
    (lambda m, x: x(2, 3, 4).contiguous(memory_format=m.preserve_format).shape),
    (lambda m, x: x(2, 3, 4, 5).contiguous(memory_format=m.channels_last).sum()),
    (lambda m, x: x(2, 3, 4, 5, 6).contiguous(memory_format=m.channels_last_3d).shape),
    (lambda m, x: m.zeros_like(x(2, 3), memory_format=m.channels_last)),
    (lambda m, x: m.zeros_like(x(2, 3), memory_format=m.preserve_format).sum()),
    (lambda m, x: m.ones_like(x(2, 3, 4, 5), memory_format=m.channels_last).sum()),
    (lambda m, x: m.empty_like(x(2), memory_format="a")),
    (lambda m, x: m.full_like(x(2, 2), 3.0, memory_format=m.contiguous_format).sum()),
    (lambda m, x: m.rand_like(x(2, 2), memory_format=m.channels_last)),
    (lambda m, x: m.randn_like(x(2, 2), memory_format=m.preserve_format).shape),
    (lambda m, x: x(2, 3).clone(memory_format=1)),
    (lambda m, x: m.clone(x(2, 3), memory_format=m.channels_last_3d)),
    (lambda m, x: x(2, 3).clone(memory_format=m.preserve_format).sum()),
    (lambda m, x: x(2, 3).to(memory_format=m.channels_last)),
    (lambda m, x: x(1, 2, 3, 4).to(memory_format=m.channels_last).sum()),
]


@pytest.mark.parametrize("case", range(len(FORMAT_CASES)))
def test_memory_formats_check_as_pytorch_and_change_no_value(case):
    def make(module):
        return lambda *shape: module.arange(math.prod(shape), dtype=module.float64).reshape(shape)
    fn = FORMAT_CASES[case]
    got = _error(lambda: fn(tg, make(tg)))
    want = _error(lambda: fn(torch, make(torch)))
    assert got == want
    if want is None:
        a, b = fn(tg, make(tg)), fn(torch, make(torch))
        assert (tuple(a) == tuple(b)) if isinstance(b, torch.Size) else float(a) == float(b)
    assert repr(tg.channels_last) == repr(torch.channels_last).replace("torch", "tapegrad")
    assert isinstance(tg.preserve_format, tg.memory_format)


def test_float32_matmul_precision_is_kept_and_checked():
    assert tg.get_float32_matmul_precision() == torch.get_float32_matmul_precision()
    try:
        for p in ("high", "medium", "highest"):
            tg.set_float32_matmul_precision(p)
            torch.set_float32_matmul_precision(p)
            assert tg.get_float32_matmul_precision() == torch.get_float32_matmul_precision()
        assert _error(lambda: tg.set_float32_matmul_precision(3)) == \
            _error(lambda: torch.set_float32_matmul_precision(3))
        with pytest.warns(UserWarning, match="is not one of 'highest', 'high', or 'medium'"):
            tg.set_float32_matmul_precision("low")
        assert tg.get_float32_matmul_precision() == "highest"
    finally:
        tg.set_float32_matmul_precision("highest")
        torch.set_float32_matmul_precision("highest")


def test_default_device_is_the_cpu():
    assert str(tg.get_default_device()) == str(torch.get_default_device()) == "cpu"
    tg.set_default_device("cpu")
    assert tg.get_default_device() == tg.device("cpu")
    tg.set_default_device(None)
    with pytest.raises(AssertionError, match="CUDA"):
        tg.set_default_device("cuda")
    assert tg.get_default_device() == tg.device("cpu")


def test_interop_threads_once_as_in_pytorch(monkeypatch):
    monkeypatch.setitem(settings._settings, "interop", None)
    assert tg.get_num_interop_threads() >= 1
    assert _error(lambda: tg.set_num_interop_threads(0)) == \
        ("RuntimeError", "set_num_interop_threads expects a positive integer")
    assert _error(lambda: tg.set_num_interop_threads(1.5)) == \
        ("RuntimeError", "set_num_interop_threads expects an int, but got float")
    tg.set_num_interop_threads(3)
    assert tg.get_num_interop_threads() == 3
    assert "cannot set number of interop threads" in _error(
        lambda: tg.set_num_interop_threads(2))[1]


def test_warn_always_is_kept():
    try:
        tg.set_warn_always(True)
        assert tg.is_warn_always_enabled() is True
    finally:
        tg.set_warn_always(False)
    assert tg.is_warn_always_enabled() is torch.is_warn_always_enabled() is False


def test_version_module():
    assert tg.version.cuda is None and tg.version.hip is None
    assert tg.version.__version__ == tg.__version__
    assert "version" in dir(tg) and "random" in dir(tg)


def test_fork_rng_restores_the_draws_and_the_seed():
    draws = {}
    for m in (tg, torch):
        m.manual_seed(1)
        with m.random.fork_rng():
            m.manual_seed(5)
            inside = m.rand(2, dtype=m.float64)
        with m.random.fork_rng(enabled=False):
            pass
        draws[m.__name__] = (m.initial_seed(), m.rand(3, dtype=m.float64).tolist(),
                             inside.tolist(), m.random.initial_seed())
    assert draws["tapegrad"] == draws["torch"]
    with pytest.raises(RuntimeError, match="CPU only"):
        with tg.random.fork_rng(devices=[0]):
            pass


def test_rng_state_carries_the_seed():
    for m in (tg, torch):
        m.manual_seed(1)
        s = m.get_rng_state()
        m.manual_seed(5)
        m.set_rng_state(s)
        assert m.initial_seed() == 1
    assert tg.random.get_rng_state is tg.get_rng_state


class _Stats:
    @staticmethod
    def build(m):
        class Stats(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("old", m.ones(1))
                self.mean = m.nn.Buffer(m.arange(3.0, dtype=m.float64))
                self.scratch = m.nn.Buffer(m.zeros(2, dtype=m.float64), persistent=False)
                self.w = m.nn.Parameter(m.ones(2, dtype=m.float64))
        return Stats()


def test_buffers_register_as_pytorchs():
    a, b = _Stats.build(tg), _Stats.build(torch)
    assert list(a.state_dict()) == list(b.state_dict()) == ["w", "old", "mean"]
    assert [n for n, _ in a.named_buffers()] == [n for n, _ in b.named_buffers()]
    assert type(a.mean) is tg.Tensor and type(b.mean) is torch.Tensor
    assert a._non_persistent_buffers_set == b._non_persistent_buffers_set == {"scratch"}
    a.mean = tg.nn.Buffer(tg.ones(3))        # replacing keeps its place
    b.mean = torch.nn.Buffer(torch.ones(3, dtype=torch.float64))
    assert list(a.state_dict()) == list(b.state_dict())
    assert a.mean.tolist() == b.mean.tolist()


def test_a_buffer_is_a_detached_tensor():
    x = tg.ones(2, requires_grad=True)
    buf = tg.nn.Buffer(x)
    assert buf.requires_grad and buf.is_leaf and isinstance(buf, tg.nn.Buffer)
    assert not isinstance(tg.ones(1), tg.nn.Buffer)
    assert tg.nn.Buffer(tg.ones(1), persistent=False).persistent is False
    assert _error(lambda: tg.nn.Buffer([1.0])) == _error(lambda: torch.nn.Buffer([1.0]))
    from tapegrad.nn.parameter import Buffer, Parameter
    assert Buffer is tg.nn.Buffer and Parameter is tg.nn.Parameter


IN_PLACE = [("relu_", ()), ("elu_", ()), ("elu_", (0.5,)), ("leaky_relu_", ()),
            ("leaky_relu_", (0.2,)), ("hardtanh_", ()), ("hardtanh_", (-0.5, 0.3)),
            ("selu_", ()), ("celu_", ()), ("celu_", (2.0,))]


@pytest.mark.parametrize("name,args", IN_PLACE)
def test_in_place_activations_are_pytorchs(name, args):
    data = [-1.5, -0.2, 0.0, 0.4, 2.0]
    out = {}
    for m, f in ((tg, F), (torch, torch.nn.functional)):
        x = m.tensor(data, dtype=m.float64, requires_grad=True)
        y = x * 1.0
        r = getattr(f, name)(y, *args)
        assert r is y
        r.sum().backward()
        out[m.__name__] = (y.tolist(), x.grad.tolist(), type(y.grad_fn).__name__)
    assert out["tapegrad"] == out["torch"]


def test_threshold_in_place_values_and_gradient():
    data = [-1.5, 0.1, 0.4, 2.0]
    out = {}
    for m, f in ((tg, F), (torch, torch.nn.functional)):
        x = m.tensor(data, dtype=m.float64, requires_grad=True)
        y = x * 2.0
        assert f.threshold_(y, 0.5, -3.0) is y
        node = (y.grad_fn.name(), [n.name() for n, _ in y.grad_fn.next_functions])
        (y * y).sum().backward()
        out[m.__name__] = (y.tolist(), x.grad.tolist(), node)
    assert out["tapegrad"] == out["torch"]
    assert out["torch"][2] == ("ThresholdBackward1", ["MulBackward0"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.relu_(tg.ones(2))
