"""The nn module classes whose functional forms tapegrad already had (1-d pools, adaptive max
pool, instance norms, padding layers, pixel shuffle, Softmax2d, margin losses, nearest
upsampling, transformer encoder/decoder stacks): constructor defaults, reprs, state_dict keys,
seeded initial values, forward values, grad_fn names and gradients against PyTorch in float64,
and PyTorch's errors and warnings."""
import copy
import warnings

import numpy as np
import pytest
import torch

import tapegrad as tg
from tapegrad import nn

RTOL = 1e-12
ATOL = 1e-13


def rng(seed):
    return np.random.default_rng(seed)


def _node(t):
    """The grad_fn's name: PyTorch's class name equals tapegrad's ``name()``."""
    if t.grad_fn is None:
        return None
    return type(t.grad_fn).__name__ if isinstance(t, torch.Tensor) else t.grad_fn.name()


def build_both(name, args, kwargs):
    """Our module and PyTorch's, made after the same seed with float64 default parameters."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)   # (the same draws need the same dtype)
    try:
        tg.manual_seed(7)
        torch.manual_seed(7)
        ours = getattr(nn, name)(*args, **kwargs)
        theirs = getattr(torch.nn, name)(*args, **kwargs)
    finally:
        torch.set_default_dtype(previous)
    return ours, theirs


def check_same_start(ours, theirs):
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for key, value in theirs.state_dict().items():
        mine = ours.state_dict()[key]
        assert tuple(mine.shape) == tuple(value.shape), key
        assert np.array_equal(mine.numpy(), value.numpy()), key     # bit-equal starts
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]


def _convert(lib, value, grad):
    if isinstance(value, np.ndarray):
        return lib.tensor(value, requires_grad=grad and value.dtype.kind == "f")
    return value


def run_both(ours, theirs, arrays, grads=None, kwargs=None, rtol=RTOL, atol=ATOL, node=True):
    """Call both modules on the same float64 arrays: the outputs, their grad_fn names, and,
    after one random cotangent, the gradients of the inputs (those marked in ``grads``) and
    of the parameters agree. Returns our output."""
    grads = grads if grads is not None else [True] * len(arrays)
    kwargs = kwargs or {}
    mine = [_convert(tg, a, g) for a, g in zip(arrays, grads)]
    their = [_convert(torch, a, g) for a, g in zip(arrays, grads)]
    out = ours(*mine, **{k: _convert(tg, v, False) for k, v in kwargs.items()})
    tout = theirs(*their, **{k: _convert(torch, v, False) for k, v in kwargs.items()})
    assert tuple(out.shape) == tuple(tout.shape)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=rtol, atol=atol)
    if node:
        assert _node(out) == _node(tout)
    if not tout.requires_grad:
        assert not out.requires_grad
        return out
    cot = rng(99).standard_normal(tuple(out.shape))
    out.backward(tg.tensor(cot))
    tout.backward(torch.tensor(cot))
    for i, (a, b) in enumerate(zip(mine, their)):
        if isinstance(b, torch.Tensor) and b.grad is None:
            assert a.grad is None, f"a gradient for argument {i}, where PyTorch has none"
        elif isinstance(b, torch.Tensor):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=atol,
                                       err_msg=f"gradient of argument {i}")
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        if q.grad is None:
            assert p.grad is None, name
        else:
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=rtol, atol=atol,
                                       err_msg=name)
    return out


def randn(seed, *shape):
    return rng(seed).standard_normal(shape)


SIGNS = np.where(rng(5).standard_normal((3, 4)) > 0, 1.0, -1.0)
LABELS = (rng(6).uniform(size=(3, 4)) > 0.5).astype(np.float64)

# (class, constructor args, constructor kwargs, forward arrays, which arrays need gradients)
CASES = [
    ("MaxPool1d", (2,), {}, [randn(1, 2, 3, 7)], None),
    ("MaxPool1d", (3,), {"stride": 1, "padding": 1, "dilation": 2}, [randn(2, 3, 9)], None),
    ("MaxPool1d", ((3,),), {"stride": 2}, [randn(3, 2, 3, 8)], None),
    ("AvgPool1d", (2,), {}, [randn(4, 2, 3, 7)], None),
    ("AvgPool1d", (3, 2, 1), {"count_include_pad": False}, [randn(5, 2, 3, 8)], None),
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1}, [randn(6, 3, 8)], None),
    ("AdaptiveMaxPool2d", (2,), {}, [randn(7, 2, 3, 5, 7)], None),
    ("AdaptiveMaxPool2d", ((3, None),), {}, [randn(8, 3, 7, 4)], None),
    ("AdaptiveMaxPool2d", ((1, 2),), {}, [randn(9, 1, 2, 6, 5)], None),
    ("InstanceNorm1d", (3,), {}, [randn(10, 2, 3, 5)], None),
    ("InstanceNorm1d", (3,), {"affine": True, "eps": 1e-3}, [randn(11, 3, 6)], None),
    ("InstanceNorm2d", (3,), {"affine": True}, [randn(12, 2, 3, 4, 5)], None),
    ("InstanceNorm2d", (3,), {"affine": True, "bias": False}, [randn(13, 2, 3, 4, 5)], None),
    ("InstanceNorm2d", (2,), {"track_running_stats": True, "momentum": None},
     [randn(14, 3, 2, 3, 3)], None),
    ("PixelShuffle", (2,), {}, [randn(15, 2, 8, 3, 2)], None),
    ("PixelShuffle", (3,), {}, [randn(16, 9, 2, 2)], None),
    ("Softmax2d", (), {}, [randn(17, 2, 3, 4, 5)], None),
    ("Softmax2d", (), {}, [randn(18, 3, 4, 5)], None),
    ("ZeroPad1d", (2,), {}, [randn(19, 2, 3, 4)], None),
    ("ZeroPad1d", ((1, -2),), {}, [randn(20, 3, 5)], None),
    ("ConstantPad1d", ((0, 3), 2.5), {}, [randn(21, 2, 3, 4)], None),
    ("ConstantPad2d", (1, -1.0), {}, [randn(22, 2, 3, 4)], None),
    ("ConstantPad2d", ((1, 0, 2, 3), 0.5), {}, [randn(23, 2, 2, 3, 4)], None),
    ("ConstantPad3d", (1, 3.0), {}, [randn(24, 1, 2, 2, 3, 2)], None),
    ("ConstantPad3d", ((0, 1, 2, 0, 1, 1), 0.0), {}, [randn(25, 2, 2, 3, 2)], None),
    ("ReflectionPad1d", (2,), {}, [randn(26, 2, 3, 5)], None),
    ("ReflectionPad1d", ((3, 1),), {}, [randn(27, 3, 4)], None),
    ("ReflectionPad2d", (1,), {}, [randn(28, 2, 3, 4, 5)], None),
    ("ReflectionPad2d", ((2, 0, 1, 3),), {}, [randn(29, 2, 4, 5)], None),
    ("ReplicationPad1d", ((2, 3),), {}, [randn(30, 2, 3, 4)], None),
    ("ReplicationPad2d", (2,), {}, [randn(31, 1, 2, 3, 3)], None),
    ("ReplicationPad2d", ((0, 1, 3, 2),), {}, [randn(32, 2, 3, 4)], None),
    ("CircularPad1d", (2,), {}, [randn(33, 2, 3, 4)], None),
    ("CircularPad2d", ((1, 2, 2, 0),), {}, [randn(34, 2, 2, 3, 4)], None),
    ("SoftMarginLoss", (), {}, [randn(35, 3, 4), SIGNS], [True, False]),
    ("SoftMarginLoss", (), {"reduction": "none"}, [randn(36, 3, 4), SIGNS], [True, False]),
    ("SoftMarginLoss", (), {"reduction": "sum"}, [randn(37, 3, 4), SIGNS], [True, False]),
    ("MultiLabelSoftMarginLoss", (), {}, [randn(38, 3, 4), LABELS], None),
    ("MultiLabelSoftMarginLoss", (), {"reduction": "none"}, [randn(39, 3, 4), LABELS],
     [True, False]),
    ("MultiMarginLoss", (), {}, [randn(40, 3, 4), np.array([0, 3, 1])], None),
    ("MultiMarginLoss", (), {"p": 2, "margin": 0.5, "reduction": "none"},
     [randn(41, 3, 4), np.array([2, 2, 0])], None),
    ("MultiMarginLoss", (), {"reduction": "sum"}, [randn(42, 5), np.array(4)], None),
    ("HingeEmbeddingLoss", (), {}, [randn(43, 3, 4), SIGNS], None),
    ("HingeEmbeddingLoss", (), {"margin": 0.3, "reduction": "none"}, [randn(44, 3, 4), SIGNS],
     None),
    ("UpsamplingNearest2d", (), {"scale_factor": 2}, [randn(45, 2, 3, 2, 3)], None),
    ("UpsamplingNearest2d", (), {"size": (3, 5)}, [randn(46, 1, 2, 2, 3)], None),
    ("UpsamplingNearest2d", (4,), {}, [randn(47, 1, 2, 3, 3)], None),
]


def _case_id(case):
    return f"{case[0]}{case[1]}{case[2]}"


@pytest.mark.parametrize("name, args, kwargs, arrays, grads", CASES,
                         ids=[_case_id(c) for c in CASES])
def test_module_matches_torch(name, args, kwargs, arrays, grads):
    ours, theirs = build_both(name, args, kwargs)
    check_same_start(ours, theirs)
    for p, q in zip(ours.parameters(), theirs.parameters()):   # non-trivial affine values
        value = rng(50).standard_normal(tuple(q.shape))
        with torch.no_grad():
            q.copy_(torch.tensor(value))
        with tg.no_grad():
            p.copy_(tg.tensor(value))
    if name.startswith("CircularPad"):
        # PyTorch's circular pad is a composite of slice copies (CopySlices); tapegrad's one
        # gather shows IndexSelectBackward0: the one node name that differs here
        out = run_both(ours, theirs, arrays, grads, node=False)
        assert _node(out) == "IndexSelectBackward0"
        assert _node(theirs(torch.tensor(arrays[0], requires_grad=True))) == "CopySlices"
    else:
        run_both(ours, theirs, arrays, grads)
    for key, value in theirs.state_dict().items():     # running statistics moved alike
        np.testing.assert_allclose(ours.state_dict()[key].numpy(), value.numpy(), rtol=RTOL,
                                   atol=ATOL, err_msg=key)


def test_losses_with_weights_match_torch():
    weight = rng(51).uniform(0.5, 2.0, 4)
    for name, kwargs, target in [
            ("MultiLabelSoftMarginLoss", {}, LABELS),
            ("MultiMarginLoss", {"p": 2}, np.array([3, 0, 1])),
            ("MultiMarginLoss", {"reduction": "none"}, np.array([1, 1, 2]))]:
        ours = getattr(nn, name)(weight=tg.tensor(weight), **kwargs)
        theirs = getattr(torch.nn, name)(weight=torch.tensor(weight), **kwargs)
        check_same_start(ours, theirs)
        assert list(ours.state_dict()) == ["weight"]
        run_both(ours, theirs, [randn(52, 3, 4), target], [True, False])


def test_losses_take_pytorchs_legacy_reduction_arguments():
    for name in ("SoftMarginLoss", "HingeEmbeddingLoss", "MultiLabelSoftMarginLoss"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = getattr(nn, name)(size_average=False)
            theirs = getattr(torch.nn, name)(size_average=False)
        assert ours.reduction == theirs.reduction == "sum"


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("name, shape", [("InstanceNorm1d", (4, 3, 5)),
                                         ("InstanceNorm2d", (2, 3, 4, 3)),
                                         ("InstanceNorm1d", (3, 6))])
def test_instance_norm_running_statistics_then_eval_match_torch(name, shape, momentum):
    ours, theirs = build_both(name, (3,), {"affine": True, "track_running_stats": True,
                                           "momentum": momentum})
    check_same_start(ours, theirs)
    for step in range(3):
        x = rng(60 + step).standard_normal(shape) * (step + 1) + step
        run_both(ours, theirs, [x])
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key].numpy(), value.numpy(), rtol=RTOL,
                                   atol=ATOL, err_msg=key)
    assert ours.num_batches_tracked.item() == 0          # PyTorch's do not count either
    ours.eval()
    theirs.eval()
    run_both(ours, theirs, [rng(64).standard_normal(shape)])
    # without tracking, eval mode still normalises with each instance's own statistics
    ours, theirs = build_both(name, (3,), {})
    ours.eval()
    theirs.eval()
    run_both(ours, theirs, [rng(65).standard_normal(shape)])


def _raise_both(call_ours, call_theirs, kind):
    with pytest.raises(kind) as their_error:
        call_theirs()
    with pytest.raises(kind) as my_error:
        call_ours()
    assert str(my_error.value).replace("tapegrad.", "torch.") == str(their_error.value)


BAD_CALLS = [
    ("MultiMarginLoss", (), {"p": 3}, None, ValueError),
    ("InstanceNorm1d", (3,), {}, (3,), ValueError),
    ("InstanceNorm1d", (3,), {}, (2, 3, 4, 5), ValueError),
    ("InstanceNorm2d", (3,), {}, (3, 4), ValueError),
    ("InstanceNorm2d", (3,), {"affine": True}, (2, 4, 3, 3), ValueError),
    ("InstanceNorm1d", (3,), {}, (2, 3, 1), ValueError),
    ("Softmax2d", (), {}, (3, 4), ValueError),
    ("Softmax2d", (), {}, (1, 2, 3, 4, 5), ValueError),
    ("ReflectionPad1d", (3,), {}, (2, 3, 3), RuntimeError),
    ("CircularPad1d", (4,), {}, (2, 3, 3), RuntimeError),
    ("PixelShuffle", (2,), {}, (1, 6, 2, 2), RuntimeError),
    ("ConstantPad2d", ((1, 2, 3), 0.0), {}, (2, 3, 3), RuntimeError),
    ("ReflectionPad1d", (1,), {}, (2, 2, 3, 4), NotImplementedError),
    ("ReplicationPad2d", (1,), {}, (4, 5), NotImplementedError),
    ("CircularPad2d", (1,), {}, (1, 2, 2, 3, 4), ValueError),
    ("CircularPad1d", (1,), {}, (4,), ValueError),
    ("ReflectionPad2d", (1,), {}, (4,), RuntimeError),
    ("PixelShuffle", (2,), {}, (4, 2), RuntimeError),
]


@pytest.mark.parametrize("name, args, kwargs, shape, kind", BAD_CALLS,
                         ids=[f"{c[0]}{c[1]}{c[2]}{c[3]}" for c in BAD_CALLS])
def test_bad_arguments_raise_pytorchs_errors(name, args, kwargs, shape, kind):
    if shape is None:
        _raise_both(lambda: getattr(nn, name)(*args, **kwargs),
                    lambda: getattr(torch.nn, name)(*args, **kwargs), kind)
        return
    ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    x = rng(70).standard_normal(shape)
    _raise_both(lambda: ours(tg.tensor(x)), lambda: theirs(torch.tensor(x)), kind)


def test_pools_with_ceil_mode_keep_the_partial_window_as_torch():
    # (the full comparison is in test_pool_more.py)
    x = np.arange(10.0).reshape(1, 2, 5)
    for name in ("MaxPool1d", "AvgPool1d"):
        ours = getattr(nn, name)(2, ceil_mode=True)(tg.tensor(x))
        theirs = getattr(torch.nn, name)(2, ceil_mode=True)(torch.tensor(x))
        assert ours.shape[-1] == 3
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_deep_copies_of_parameters_start_without_gradients_as_torch():
    for lib in (tg, torch):
        layer = lib.nn.Linear(2, 2)
        layer(lib.ones(1, 2)).sum().backward()
        twin = copy.deepcopy(layer)
        assert twin.weight.grad is None and layer.weight.grad is not None
        assert np.array_equal(twin.weight.detach().numpy(), layer.weight.detach().numpy())


def test_multi_margin_loss_rejects_a_weight_of_two_dimensions():
    _raise_both(lambda: nn.MultiMarginLoss(weight=tg.ones(2, 2)),
                lambda: torch.nn.MultiMarginLoss(weight=torch.ones(2, 2)), ValueError)


def test_instance_norm_warns_as_torch_when_channels_differ_without_affine():
    x = rng(71).standard_normal((2, 4, 5))
    with pytest.warns(UserWarning) as theirs:
        expected = torch.nn.InstanceNorm1d(3)(torch.tensor(x))
    with pytest.warns(UserWarning) as mine:
        out = nn.InstanceNorm1d(3)(tg.tensor(x))
    assert [str(w.message) for w in mine] == [str(w.message) for w in theirs]
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=RTOL, atol=ATOL)


def test_bad_input_corrupts_no_running_statistics():
    norm = nn.InstanceNorm1d(3, track_running_stats=True)
    with pytest.raises(ValueError):
        norm(tg.ones(2, 3, 1))
    assert np.array_equal(norm.running_mean.numpy(), np.zeros(3))
    assert np.array_equal(norm.running_var.numpy(), np.ones(3))


def test_modules_print_inside_a_model_as_torch():
    def build(lib):
        return lib.nn.Sequential(lib.nn.ReflectionPad2d(1), lib.nn.InstanceNorm2d(3),
                                 lib.nn.MaxPool1d(2), lib.nn.AvgPool1d(3, 1),
                                 lib.nn.ZeroPad1d((1, 2)), lib.nn.ConstantPad3d(1, 0.5),
                                 lib.nn.AdaptiveMaxPool2d(1), lib.nn.Softmax2d(),
                                 lib.nn.PixelShuffle(2), lib.nn.UpsamplingNearest2d(size=4),
                                 lib.nn.MultiMarginLoss(p=2), lib.nn.HingeEmbeddingLoss(2.0),
                                 lib.nn.CircularPad2d((1, 2, 3, 4)))
    assert repr(build(tg)) == repr(build(torch))


def test_padding_of_an_empty_batch_matches_torch():
    for name, args in [("ZeroPad1d", (1,)), ("ConstantPad2d", ((0, 1, 0, 0), 1.0)),
                       ("ReplicationPad1d", (1,))]:
        ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
        run_both(ours, theirs, [np.zeros((0, 2, 3))])
        run_both(ours, theirs, [randn(72, 2, 2, 3)])


def test_compile_replays_padding_pooling_and_margin_losses_with_new_inputs():
    model = nn.Sequential(nn.ReflectionPad1d(2), nn.MaxPool1d(2), nn.InstanceNorm1d(3),
                          nn.AvgPool1d(2), nn.Flatten())
    loss = nn.MultiMarginLoss()
    step = tg.compile(lambda x, y: loss(model(x), y))
    for seed in range(3):
        x = rng(80 + seed).standard_normal((4, 3, 8))
        y = tg.tensor(rng(90 + seed).integers(0, 6, 4))
        np.testing.assert_allclose(step(tg.tensor(x), y).item(),
                                   loss(model(tg.tensor(x)), y).item(), rtol=1e-12)
    assert step.stats.replays == 2, step.stats.eager_reasons


# ----------------------------------------------------------------------------------------------
# Transformer stacks
# ----------------------------------------------------------------------------------------------


def _layer(lib, kind, **options):
    return getattr(lib.nn, kind)(8, 2, dim_feedforward=16, dropout=0.0, **options)


def _padding_mask(lib, batch, steps, seed, additive=False):
    """A key padding mask, True (or, ``additive``, -inf) at the keys not attended."""
    mask = rng(seed).uniform(size=(batch, steps)) > 0.7
    mask[:, 0] = False                # (a row with every key masked is all nan in both)
    if additive:
        mask = np.where(mask, -np.inf, 0.0)
    return mask if lib is np else lib.tensor(mask)


@pytest.mark.parametrize("options, norm", [({}, False), ({"norm_first": True}, True),
                                           ({"batch_first": True, "activation": "gelu"}, True),
                                           ({"bias": False}, False)])
def test_transformer_encoder_matches_torch(options, norm):
    def build(lib):
        layer = _layer(lib, "TransformerEncoderLayer", **options)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            encoder = lib.nn.TransformerEncoder(layer, 3, norm=lib.nn.LayerNorm(8) if norm
                                                else None)
        return encoder, [str(w.message) for w in caught]
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        tg.manual_seed(11)
        torch.manual_seed(11)
        (ours, my_warnings), (theirs, their_warnings) = build(tg), build(torch)
    finally:
        torch.set_default_dtype(previous)
    assert my_warnings == their_warnings
    check_same_start(ours, theirs)
    batch_first = options.get("batch_first", False)
    shape = (2, 5, 8) if batch_first else (5, 2, 8)
    causal = np.triu(np.full((5, 5), -np.inf), 1)
    run_both(ours, theirs, [randn(100, *shape)], rtol=1e-11, atol=1e-12)
    for (_, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        p.grad = None
        q.grad = None
    run_both(ours, theirs, [randn(101, *shape)],
             kwargs={"mask": causal,
                     "src_key_padding_mask": _padding_mask(np, 2, 5, 102, additive=True)},
             rtol=1e-11, atol=1e-12)
    # the layers are copies: changing one leaves the others as they were
    with tg.no_grad():
        ours.layers[0].linear1.weight.add_(1.0)
    assert not np.array_equal(ours.layers[0].linear1.weight.detach().numpy(),
                              ours.layers[1].linear1.weight.detach().numpy())


def test_transformer_encoder_with_bool_masks_and_causal_hint_matches_torch():
    ours, theirs = build_both("TransformerEncoderLayer", (8, 2),
                              {"dim_feedforward": 16, "dropout": 0.0, "batch_first": True})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = nn.TransformerEncoder(ours, 2), torch.nn.TransformerEncoder(theirs, 2)
    causal = np.triu(np.ones((4, 4), dtype=bool), 1)
    run_both(ours, theirs, [randn(110, 3, 4, 8)], kwargs={"mask": causal, "is_causal": True},
             rtol=1e-11, atol=1e-12)
    _raise_both(lambda: ours(tg.ones(3, 4, 8), is_causal=True),
                lambda: theirs(torch.ones(3, 4, 8), is_causal=True), RuntimeError)
    # eval mode: PyTorch's own fast path off (gradients needed), the same numbers
    ours.eval()
    theirs.eval()
    run_both(ours, theirs, [randn(111, 3, 4, 8)],
             kwargs={"src_key_padding_mask": _padding_mask(np, 3, 4, 112)},
             rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("options", [{}, {"norm_first": True, "activation": "gelu"},
                                     {"batch_first": True, "bias": False}])
def test_transformer_decoder_layer_and_stack_match_torch(options):
    ours, theirs = build_both("TransformerDecoderLayer", (8, 2),
                              dict(dim_feedforward=16, dropout=0.0, **options))
    check_same_start(ours, theirs)
    batch_first = options.get("batch_first", False)
    tgt = randn(120, 3, 4, 8) if batch_first else randn(120, 4, 3, 8)
    memory = randn(121, 3, 6, 8) if batch_first else randn(121, 6, 3, 8)
    run_both(ours, theirs, [tgt, memory], rtol=1e-11, atol=1e-12)
    causal = np.triu(np.full((4, 4), -np.inf), 1)
    kwargs = {"tgt_mask": causal,
              "tgt_key_padding_mask": _padding_mask(np, 3, 4, 122, additive=True),
              "memory_key_padding_mask": _padding_mask(np, 3, 6, 123)}
    stack, their_stack = nn.TransformerDecoder(ours, 2, norm=nn.LayerNorm(8)), \
        torch.nn.TransformerDecoder(theirs, 2, norm=torch.nn.LayerNorm(8))
    check_same_start(stack, their_stack)
    run_both(stack, their_stack, [tgt, memory], kwargs=kwargs, rtol=1e-11, atol=1e-12)


def test_transformer_decoder_unbatched_and_with_a_memory_mask_matches_torch():
    ours, theirs = build_both("TransformerDecoderLayer", (8, 4),
                              {"dim_feedforward": 12, "dropout": 0.0})
    memory_mask = rng(130).standard_normal((4, 6))
    run_both(ours, theirs, [randn(131, 4, 8), randn(132, 6, 8)],
             kwargs={"memory_mask": memory_mask}, rtol=1e-11, atol=1e-12)
    stack, their_stack = nn.TransformerDecoder(ours, 3), torch.nn.TransformerDecoder(theirs, 3)
    assert repr(stack) == repr(their_stack)
    run_both(stack, their_stack, [randn(133, 4, 8), randn(134, 6, 8)], rtol=1e-11, atol=1e-12)


def _warnings_of(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in caught]


def test_mixed_mask_types_warn_as_torch():
    causal = np.triu(np.full((5, 5), -np.inf), 1)
    padding = _padding_mask(np, 2, 5, 170)
    x = randn(171, 5, 2, 8)

    def calls(lib):
        tensors = lib.tensor(x), lib.tensor(causal), lib.tensor(padding)
        encoder_layer = _layer(lib, "TransformerEncoderLayer")
        decoder_layer = _layer(lib, "TransformerDecoderLayer")
        encoder = lib.nn.TransformerEncoder(encoder_layer, 2, enable_nested_tensor=False)
        decoder = lib.nn.TransformerDecoder(decoder_layer, 2)
        return [
            lambda: encoder_layer(tensors[0], src_mask=tensors[1],
                                  src_key_padding_mask=tensors[2]),
            lambda: encoder(tensors[0], mask=tensors[1], src_key_padding_mask=tensors[2]),
            lambda: decoder_layer(tensors[0], tensors[0], tgt_mask=tensors[1],
                                  tgt_key_padding_mask=tensors[2]),
            lambda: decoder(tensors[0], tensors[0], tgt_mask=tensors[1],
                            tgt_key_padding_mask=tensors[2])]
    for mine, theirs in zip(calls(tg), calls(torch)):
        expected = _warnings_of(theirs)
        assert expected and _warnings_of(mine) == expected
    layer, their_layer = _layer(tg, "TransformerEncoderLayer"), \
        _layer(torch, "TransformerEncoderLayer")
    _raise_both(lambda: layer(tg.ones(5, 2, 8), src_key_padding_mask=tg.zeros(2, 5).long()),
                lambda: their_layer(torch.ones(5, 2, 8),
                                    src_key_padding_mask=torch.zeros(2, 5).long()),
                AssertionError)


def test_transformer_dropout_follows_train_and_eval():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        encoder = nn.TransformerEncoder(layer, 2)
    x = tg.tensor(randn(140, 5, 2, 8))
    assert not np.allclose(encoder(x).detach().numpy(), encoder(x).detach().numpy())
    encoder.eval()
    np.testing.assert_array_equal(encoder(x).detach().numpy(), encoder(x).detach().numpy())


def test_compile_replays_a_transformer_encoder_with_new_inputs_and_masks():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True,
                                       norm_first=True)
    encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8), enable_nested_tensor=False)
    step = tg.compile(lambda x, m: encoder(x, src_key_padding_mask=m).pow(2).sum())
    for seed in range(3):
        x = tg.tensor(randn(150 + seed, 2, 5, 8))
        mask = _padding_mask(tg, 2, 5, 160 + seed)
        np.testing.assert_allclose(step(x, mask).item(),
                                   encoder(x, src_key_padding_mask=mask).pow(2).sum().item(),
                                   rtol=1e-12)
    assert step.stats.replays == 2, step.stats.eager_reasons


@pytest.mark.parametrize("activation", [None, "relu", "gelu", "gelu-function", "callable"])
def test_encoder_fast_path_flag_and_warning_follow_torch(activation):
    def build(lib):
        chosen = {None: {}, "relu": {"activation": "relu"}, "gelu": {"activation": "gelu"},
                  "gelu-function": {"activation": lib.nn.functional.gelu},
                  "callable": {"activation": lambda v: v * 2}}[activation]
        layer = lib.nn.TransformerEncoderLayer(8, 2, batch_first=True, **chosen)
        caught = _warnings_of(lambda: lib.nn.TransformerEncoder(layer, 2))
        return layer.activation_relu_or_gelu, caught
    assert build(tg) == build(torch)


def test_compile_of_instance_norm_tracking_statistics_keeps_them_right():
    # (moving running statistics is a change of state: the compiled call runs eagerly, as
    # for BatchNorm, and must leave the same statistics as plain calls)
    compiled, plain = nn.InstanceNorm1d(3, track_running_stats=True), \
        nn.InstanceNorm1d(3, track_running_stats=True)
    step = tg.compile(lambda x: compiled(x).pow(3).sum())
    for seed in range(3):
        x = rng(180 + seed).standard_normal((2, 3, 5)) + seed
        np.testing.assert_allclose(step(tg.tensor(x)).item(),
                                   plain(tg.tensor(x)).pow(3).sum().item(), rtol=1e-12)
    np.testing.assert_array_equal(compiled.running_mean.numpy(), plain.running_mean.numpy())
    np.testing.assert_array_equal(compiled.running_var.numpy(), plain.running_var.numpy())


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("left_aligned", [True, False])
def test_encoder_inference_without_gradients_zeroes_padded_positions_as_torch(batch_first,
                                                                               left_aligned):
    ours, theirs = build_both("TransformerEncoderLayer", (8, 2),
                              {"dim_feedforward": 16, "batch_first": batch_first})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # (the reason for no fast path when not batch first)
        ours = nn.TransformerEncoder(ours, 2, norm=nn.LayerNorm(8)).eval()
        theirs = torch.nn.TransformerEncoder(theirs, 2, norm=torch.nn.LayerNorm(8)).eval()
    padding = np.array([[False, False, False, True, True], [False] * 5])
    if not left_aligned:
        padding[1, 2] = True
    x = randn(190, 2, 5, 8) if batch_first else randn(190, 5, 2, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # (PyTorch's nested tensors are a prototype)
        with torch.no_grad():
            expected = theirs(torch.tensor(x), src_key_padding_mask=torch.tensor(padding))
    with tg.no_grad():
        out = ours(tg.tensor(x), src_key_padding_mask=tg.tensor(padding))
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-11, atol=1e-12)
    with tg.no_grad():       # a float mask, the same keys masked
        out = ours(tg.tensor(x), src_key_padding_mask=tg.tensor(np.where(padding, -np.inf, 0.0)))
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-11, atol=1e-12)
