"""Small PyTorch names ordinary programs touch: ``backends`` flags, ``testing.assert_close``,
``utils.checkpoint``, compared against PyTorch."""
import math
import warnings

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")


# --- backends --------------------------------------------------------------------------------

def test_backends_flags_start_at_pytorch_cpu_values():
    import tapegrad.backends.cudnn as cudnn   # importable as a submodule, as torch's
    import torch.backends.cudnn as tcudnn
    for name in ("enabled", "benchmark", "deterministic", "allow_tf32", "benchmark_limit"):
        assert getattr(cudnn, name) == getattr(tcudnn, name), name
    assert cudnn.is_available() == tcudnn.is_available() is False
    assert cudnn.version() == tcudnn.version()
    assert tg.backends.mps.is_available() == torch.backends.mps.is_available()
    assert tg.backends.mps.is_built() == torch.backends.mps.is_built()
    assert tg.backends.cuda.is_built() == torch.backends.cuda.is_built()
    for name in ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                 "allow_bf16_reduced_precision_reduction"):
        assert getattr(tg.backends.cuda.matmul, name) == getattr(torch.backends.cuda.matmul, name)
    assert tg.backends.mkldnn.enabled == torch.backends.mkldnn.enabled


def test_backends_flags_are_settable():
    old = tg.backends.cudnn.deterministic, tg.backends.cudnn.benchmark
    try:
        tg.backends.cudnn.deterministic = True
        tg.backends.cudnn.benchmark = False
        tg.backends.cuda.matmul.allow_tf32 = True
        import tapegrad.backends.cudnn as cudnn
        assert cudnn.deterministic is True and cudnn.benchmark is False
        assert tg.backends.cuda.matmul.allow_tf32 is True
        x = tg.tensor([1.0, 2.0], requires_grad=True)
        (x * x).sum().backward()
        assert x.grad.tolist() == [2.0, 4.0]
    finally:
        tg.backends.cudnn.deterministic, tg.backends.cudnn.benchmark = old
        tg.backends.cuda.matmul.allow_tf32 = False


# --- testing.assert_close --------------------------------------------------------------------

def _outcome(lib, actual, expected, **kwargs):
    def build(x):
        if isinstance(x, np.ndarray):
            return lib.tensor(x)
        if isinstance(x, list):
            return [build(v) for v in x]
        if isinstance(x, tuple):
            return tuple(build(v) for v in x)
        if isinstance(x, dict):
            return {k: build(v) for k, v in x.items()}
        return x
    try:
        lib.testing.assert_close(build(actual), build(expected), **kwargs)
        return "ok"
    except Exception as e:   # noqa: BLE001 - the type and text are what is compared
        return type(e).__name__, str(e).replace("torch.", "LIB.").replace("tapegrad.", "LIB.")


A = np.array
CASES = [
    (A([1.0, 2.0, 3.0]), A([1.0, 2.5, 3.0]), {}),
    (A([[1.0, 2.0], [3.0, 4.0]]), A([[1.0, 2.1], [3.5, 4.0]]), {}),
    (A([1.0, 2.0]), A([1.0, 2.0 + 1e-9]), {}),
    (A([1.0, 2.0]), A([1.0, 2.0 + 1e-6]), {}),
    (A([1.0, 1.0]), A([1.0, 0.0]), {}),
    (A([1, 2]), A([1, 3]), {}),
    (A([True, False]), A([True, True]), {}),
    (A([1.0, 2.0]), A([1, 2]), {}),
    (A([1.0, 2.0]), A([1, 2]), {"check_dtype": False}),
    (A([1.0, 2.0]), A([1, 3]), {"check_dtype": False}),
    (A([1.0, 2.0]), A([1.0, 2.0, 3.0]), {}),
    (A([[1.0, 2.0]]), A([1.0, 2.0]), {}),
    (A(1.0), A(1.1), {}),
    (A(True), A(False), {}),
    (A([1.0, 2.0]), A([1.0, 2.000001]), {"rtol": 0, "atol": 0}),
    (A([1.0, 2.0]), A([1.0, 2.1]), {"rtol": 0.1, "atol": 0.0}),
    (A([1.0, 2.0]), A([1.0, 2.1]), {"rtol": 1e-3}),
    (A([1.0, 2.0]), A([1.0, 2.1]), {"atol": 1e-3}),
    (A([1.0, 2.0]), A([1.0, 2.1]), {"msg": "custom"}),
    (A([math.nan, 1.0]), A([math.nan, 1.0]), {}),
    (A([math.nan, 1.0]), A([math.nan, 1.0]), {"equal_nan": True}),
    (A([math.inf, 1.0]), A([math.inf, 1.0]), {}),
    (A(math.nan), A(math.nan), {}),
    (1.0, 1.5, {}), (1, 2, {}), (1, 1.0, {}), (1, 1.0, {"check_dtype": False}),
    (1.0, 1.0 + 1e-9, {}), (True, False, {}), (math.nan, math.nan, {"equal_nan": True}),
    ([A(1.0)], [A(2.0)], {}),
    ((A([1.0, 2.0]), 3), (A([1.0, 2.0]), 4), {}),
    ({"a": A([1.0]), "b": [A(1.0), 2.0]}, {"a": A([1.0]), "b": [A(1.0), 2.5]}, {}),
    ({"a": 1}, {"b": 1}, {}),
    ([1, 2], [1, 2, 3], {}),
    ([1.0, 2.0], [1.0, 2.0], {}),
    ("a", "a", {}),
    ([A([1.0, 2.0])], [A([1.0, 3.0])], {"msg": lambda m: "X" + m}),
]


@pytest.mark.parametrize("actual,expected,kwargs", CASES)
def test_assert_close_matches_pytorch(actual, expected, kwargs):
    assert _outcome(tg, actual, expected, **kwargs) == _outcome(torch, actual, expected, **kwargs)


def test_assert_close_tensor_against_list_is_a_type_error():
    with pytest.raises(TypeError, match="No comparison pair was able to handle inputs of type"):
        tg.testing.assert_close(tg.tensor([1.0]), [1.0])


@pytest.mark.parametrize("seed", range(6))
def test_assert_close_random_mismatch_texts(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(rng.integers(1, 4, size=rng.integers(1, 4)))
    a = rng.normal(size=shape)
    b = a + rng.normal(size=shape) * (rng.random(shape) < 0.4) * 10.0 ** rng.integers(-9, 0)
    assert _outcome(tg, a, b) == _outcome(torch, a, b)


# --- utils.checkpoint -----------------------------------------------------------------------

def _warnings_of(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call()
    return out, [(w.category, str(w.message)) for w in caught]


@pytest.mark.parametrize("reentrant", [None, True, False])
def test_checkpoint_values_gradients_and_warnings(reentrant):
    from tapegrad.utils.checkpoint import checkpoint
    from torch.utils.checkpoint import checkpoint as tcheckpoint
    data = np.random.default_rng(0).normal(size=(2, 3))
    w_data = np.random.default_rng(1).normal(size=(3, 3))
    results = []
    for lib, ckpt in ((tg, checkpoint), (torch, tcheckpoint)):
        x = lib.tensor(data, requires_grad=True)
        w = lib.tensor(w_data, requires_grad=True)
        y, caught = _warnings_of(lambda: ckpt(lambda a, b: lib.tanh(a @ b).sin(), x, w,
                                              use_reentrant=reentrant)
                                 if reentrant is not None else
                                 ckpt(lambda a, b: lib.tanh(a @ b).sin(), x, w))
        y.pow(2).sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy(), w.grad.numpy(), caught))
    (y1, gx1, gw1, c1), (y2, gx2, gw2, c2) = results
    np.testing.assert_allclose(y1, y2, rtol=1e-12)
    np.testing.assert_allclose(gx1, gx2, rtol=1e-12)
    np.testing.assert_allclose(gw1, gw2, rtol=1e-12)
    assert [(c.__name__, m) for c, m in c1] == [(c.__name__, m) for c, m in c2]
    assert len(c1) == (reentrant is None)


@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpoint_without_grad_inputs_follows_pytorch(reentrant):
    from tapegrad.utils.checkpoint import checkpoint
    from torch.utils.checkpoint import checkpoint as tcheckpoint
    outs = []
    for lib, ckpt, nn in ((tg, checkpoint, tg.nn), (torch, tcheckpoint, torch.nn)):
        lib.manual_seed(0)
        layer = nn.Linear(3, 2)
        y, caught = _warnings_of(lambda: ckpt(layer, lib.ones(3), use_reentrant=reentrant))
        outs.append((y.requires_grad, [str(w[1]) for w in caught]))
    assert outs[0] == outs[1]


def test_checkpoint_reentrant_rejects_keyword_arguments():
    from tapegrad.utils.checkpoint import checkpoint
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ValueError, match="^Unexpected keyword arguments: b$"):
        checkpoint(lambda a, b=1: a * b, x, b=2, use_reentrant=True)
    assert checkpoint(lambda a, b=1: a * b, x, b=2, use_reentrant=False).tolist() == [2.0, 4.0]


@pytest.mark.parametrize("segments,reentrant", [(1, False), (2, None), (3, True), (4, False)])
def test_checkpoint_sequential_matches_pytorch(segments, reentrant):
    from tapegrad.utils.checkpoint import checkpoint_sequential
    from torch.utils.checkpoint import checkpoint_sequential as tcs
    data = np.random.default_rng(2).normal(size=(2, 3))
    results = []
    for lib, cs in ((tg, checkpoint_sequential), (torch, tcs)):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 4),
                                  lib.nn.Sigmoid(), lib.nn.Linear(4, 2))
        x = lib.tensor(data, requires_grad=True)
        extra = {} if reentrant is None else {"use_reentrant": reentrant}
        y, caught = _warnings_of(lambda: cs(model, segments, x, **extra))
        y.sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy(), model[0].weight.grad.numpy(),
                        type(y.grad_fn).__name__, [str(w[1]) for w in caught]))
    for a, b in zip(*results):
        if isinstance(a, np.ndarray):
            np.testing.assert_allclose(a, b, rtol=1e-12)
        else:
            assert a == b


# --- 3-D normalisation layers ---------------------------------------------------------------

@pytest.mark.parametrize("name,kwargs,shape", [
    ("BatchNorm3d", {}, (2, 3, 2, 3, 2)),
    ("BatchNorm3d", {"affine": False, "momentum": None}, (3, 2, 1, 2, 3)),
    ("InstanceNorm3d", {}, (2, 3, 2, 2, 3)),
    ("InstanceNorm3d", {"affine": True, "track_running_stats": True}, (2, 3, 2, 3, 2)),
    ("InstanceNorm3d", {"affine": True}, (3, 2, 3, 2)),
])
def test_3d_norms_match_pytorch(name, kwargs, shape):
    data = np.random.default_rng(3).normal(size=shape)
    cot = np.random.default_rng(4).normal(size=shape)
    results = []
    for lib in (tg, torch):
        layer = getattr(lib.nn, name)(shape[-4] if len(shape) == 4 else shape[1], **kwargs)
        if getattr(layer, "weight", None) is not None:
            with lib.no_grad():
                layer.weight.copy_(lib.tensor(np.linspace(0.5, 1.5, layer.num_features)))
                layer.bias.copy_(lib.tensor(np.linspace(-1, 1, layer.num_features)))
        x = lib.tensor(data, requires_grad=True)
        y = layer(x)
        (y * lib.tensor(cot)).sum().backward()
        layer.eval()
        z = layer(lib.tensor(data))
        grads = [p.grad.numpy() for p in layer.parameters()]
        buffers = [b.numpy() for b in layer.buffers()]
        results.append((y.detach().numpy(), x.grad.numpy(), z.detach().numpy(), grads, buffers,
                        type(y.grad_fn).__name__, repr(layer)))
    for a, b in zip(*results):
        if isinstance(a, list):
            assert len(a) == len(b)
            for u, v in zip(a, b):
                np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-12)
        elif isinstance(a, np.ndarray):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
        else:
            assert a == b


@pytest.mark.parametrize("name,shape", [("BatchNorm3d", (2, 3, 2, 2)),
                                        ("InstanceNorm3d", (3, 2, 2))])
def test_3d_norms_reject_wrong_dims_as_pytorch(name, shape):
    texts = []
    for lib in (tg, torch):
        with pytest.raises(ValueError) as info:
            getattr(lib.nn, name)(3)(lib.ones(*shape))
        texts.append(str(info.value))
    assert texts[0] == texts[1]


# --- adaptive average pooling in 3-D --------------------------------------------------------

@pytest.mark.parametrize("shape,output_size", [
    ((2, 3, 4, 5, 6), (2, 3, None)), ((2, 3, 4, 5, 6), 1), ((3, 5, 4, 7), 2),
    ((1, 2, 3, 3, 3), (3, 1, 2)), ((1, 1, 5, 2, 7), (4, 2, 3)), ((2, 4, 5, 6), [1, 1, 1]),
])
def test_adaptive_avg_pool3d_matches_pytorch(shape, output_size):
    data = np.random.default_rng(5).normal(size=shape)
    results = []
    for lib in (tg, torch):
        x = lib.tensor(data, requires_grad=True)
        y = lib.nn.functional.adaptive_avg_pool3d(x, output_size)
        cot = np.random.default_rng(6).normal(size=tuple(y.shape))
        (y * lib.tensor(cot)).sum().backward()
        z = lib.nn.AdaptiveAvgPool3d(output_size)
        results.append((y.detach().numpy(), x.grad.numpy(), type(y.grad_fn).__name__, repr(z),
                        z(lib.tensor(data)).numpy()))
    for a, b in zip(*results):
        if isinstance(a, np.ndarray):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
        else:
            assert a == b


def test_adaptive_avg_pool3d_gradient_by_central_differences():
    x = tg.tensor(np.random.default_rng(7).normal(size=(1, 2, 3, 4, 5)), requires_grad=True)
    assert tg.testing.gradcheck(lambda t: tg.nn.functional.adaptive_avg_pool3d(t, (2, 3, 2)), x)


# --- local response normalisation -----------------------------------------------------------

@pytest.mark.parametrize("shape,size,kwargs", [
    ((2, 6, 5), 3, {}), ((2, 6, 4, 5), 2, {"alpha": 0.5, "beta": 0.6, "k": 2.0}),
    ((1, 3, 2, 2, 3), 5, {"alpha": 1.0}), ((2, 4, 3), 1, {"beta": 1.5}),
    ((1, 2, 3), 4, {"alpha": 2.0, "k": 0.5}),
])
def test_local_response_norm_matches_pytorch(shape, size, kwargs):
    data = np.random.default_rng(8).normal(size=shape)
    cot = np.random.default_rng(9).normal(size=shape)
    results = []
    for lib in (tg, torch):
        x = lib.tensor(data, requires_grad=True)
        y = lib.nn.functional.local_response_norm(x, size, **kwargs)
        (y * lib.tensor(cot)).sum().backward()
        layer = lib.nn.LocalResponseNorm(size, **kwargs)
        results.append((y.detach().numpy(), x.grad.numpy(), layer(lib.tensor(data)).numpy(),
                        type(y.grad_fn).__name__, repr(layer)))
    for a, b in zip(*results):
        if isinstance(a, np.ndarray):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
        else:
            assert a == b


def test_local_response_norm_gradient_and_error():
    x = tg.tensor(np.random.default_rng(10).normal(size=(2, 5, 3)), requires_grad=True)
    assert tg.testing.gradcheck(
        lambda t: tg.nn.functional.local_response_norm(t, 3, alpha=0.7, k=1.5), x)
    texts = []
    for lib in (tg, torch):
        with pytest.raises(ValueError) as info:
            lib.nn.functional.local_response_norm(lib.ones(2, 3), 2)
        texts.append(str(info.value))
    assert texts[0] == texts[1]


# --- adaptive max pooling in 3-D ------------------------------------------------------------

@pytest.mark.parametrize("shape,output_size", [
    ((2, 3, 4, 5, 6), (2, 3, None)), ((2, 3, 4, 5, 6), 1), ((3, 5, 4, 7), 2),
    ((1, 1, 5, 2, 7), (4, 2, 3)),
])
def test_adaptive_max_pool3d_matches_pytorch(shape, output_size):
    data = np.random.default_rng(11).normal(size=shape)
    data[..., 0, 0, :2] = 3.0     # ties: the gradient goes to the first maximum
    results = []
    for lib in (tg, torch):
        x = lib.tensor(data, requires_grad=True)
        y = lib.nn.functional.adaptive_max_pool3d(x, output_size)
        cot = np.random.default_rng(12).normal(size=tuple(y.shape))
        (y * lib.tensor(cot)).sum().backward()
        z = lib.nn.AdaptiveMaxPool3d(output_size)
        results.append((y.detach().numpy(), x.grad.numpy(), type(y.grad_fn).__name__, repr(z),
                        z(lib.tensor(data)).numpy()))
    for a, b in zip(*results):
        if isinstance(a, np.ndarray):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
        else:
            assert a == b


def test_adaptive_max_pool3d_rank_error_as_pytorch():
    texts = []
    for lib in (tg, torch):
        with pytest.raises(RuntimeError) as info:
            lib.nn.functional.adaptive_max_pool3d(lib.ones(2, 3, 4), 1)
        texts.append(str(info.value))
    assert texts[0] == texts[1]


@pytest.mark.parametrize("shape,output_size", [
    ((2, 3, 4, 5, 6), (2, 3, None)), ((3, 5, 4, 7), 2), ((1, 1, 5, 2, 7), (4, 2, 3)),
    ((1, 2, 3, 3, 3), 1),
])
def test_adaptive_max_pool3d_return_indices_matches_pytorch(shape, output_size):
    data = np.random.default_rng(13).normal(size=shape)
    data[..., 0, 0, :2] = 3.0     # ties: the first maximum's index and gradient
    data[..., -1, -1, -1] = np.nan
    results = []
    for lib in (tg, torch):
        x = lib.tensor(data, requires_grad=True)
        y, i = lib.nn.functional.adaptive_max_pool3d(x, output_size, return_indices=True)
        cot = np.random.default_rng(14).normal(size=tuple(y.shape))
        (y * lib.tensor(cot)).sum().backward()
        z, j = lib.nn.AdaptiveMaxPool3d(output_size, return_indices=True)(lib.tensor(data))
        results.append((y.detach().numpy(), i.numpy(), str(i.dtype).split(".")[1], x.grad.numpy(),
                        type(y.grad_fn).__name__, z.numpy(), j.numpy()))
    for a, b in zip(*results):
        if isinstance(a, np.ndarray):
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
        else:
            assert a == b


def test_adaptive_max_pool3d_return_indices_compiled():
    pool = tg.compile(lambda t: tg.nn.functional.adaptive_max_pool3d(t, (2, 1, 2), True))
    rng = np.random.default_rng(15)
    for _ in range(3):
        data = rng.normal(size=(2, 4, 3, 5))
        got, index = pool(tg.tensor(data))
        want, windex = torch.nn.functional.adaptive_max_pool3d(torch.tensor(data), (2, 1, 2),
                                                               True)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(index.numpy(), windex.numpy())
    assert pool.stats.replays > 0
