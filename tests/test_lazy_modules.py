"""Lazy modules (``nn.LazyLinear``, the lazy convolutions and normalisations) and the
uninitialized parameters and buffers they hold, against PyTorch: reprs before and after the
first call, the class they become, the values drawn from the same seed, outputs, gradients,
state_dict saving and loading, and the errors an uninitialized tensor raises."""
import copy
import pickle
import re
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

import tapegrad as tg
from oracle import message
from tapegrad import nn

RTOL = 1e-12


def _both(make, shape, seed=0):
    """(ours, theirs) lazy modules made by ``make(lib)`` after the same seed, called once on
    the same input; returns the modules, the outputs and the inputs."""
    x = np.random.default_rng(seed).standard_normal(shape)
    tg.manual_seed(seed)
    torch.manual_seed(seed)
    ours, theirs = make(tg), make(torch)
    assert repr(ours) == repr(theirs)
    assert ours.has_uninitialized_params() == theirs.has_uninitialized_params()
    xo = tg.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = ours(xo)
    with warnings.catch_warnings(record=True) as theirs_seen:
        warnings.simplefilter("always")
        tout = theirs(xt)
    assert [str(w.message) for w in seen] == [str(w.message) for w in theirs_seen]
    return ours, theirs, out, tout, xo, xt


def _same_module(ours, theirs, out, tout, xo, xt, grad_fn=True):
    assert type(ours).__name__ == type(theirs).__name__
    assert repr(ours) == repr(theirs)
    assert not hasattr(ours, "_initialize_hook")
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (name, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
        assert a.shape == tuple(b.shape), name
        if name in dict(ours.named_parameters()):
            # drawn from the same stream by the same formula: the same bits
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
        else:   # running statistics after one step (batch norm's own rounding)
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=RTOL, atol=1e-15,
                                       err_msg=name)
    assert tuple(out.shape) == tuple(tout.shape)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=RTOL,
                               atol=1e-14)
    if grad_fn:
        assert out.grad_fn.name() == tout.grad_fn.name()
    cot = np.random.default_rng(7).standard_normal(tuple(out.shape))
    out.backward(tg.tensor(cot))
    tout.backward(torch.tensor(cot))
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=RTOL, atol=1e-13)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        assert type(p).__name__ == type(q).__name__ == "Parameter"
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=RTOL, atol=1e-13,
                                   err_msg=name)


@given(out_features=st.integers(1, 5), lead=st.lists(st.integers(1, 3), min_size=1, max_size=2),
       in_features=st.integers(1, 6), bias=st.booleans(), seed=st.integers(0, 2**20))
def test_lazy_linear_becomes_pytorchs_linear(out_features, lead, in_features, bias, seed):
    made = _both(lambda lib: lib.nn.LazyLinear(out_features, bias=bias),
                 (*lead, in_features), seed)
    # (F.linear of an input that is not 2-d records AddBackward0 where PyTorch's has
    # ViewBackward0: a difference of F.linear, not of the lazy layer, left out here)
    _same_module(*made, grad_fn=len(lead) == 1)
    assert type(made[0]) is nn.Linear and made[0].in_features == in_features


CONVS = [("Conv1d", 1), ("Conv2d", 2), ("Conv3d", 3), ("ConvTranspose1d", 1),
         ("ConvTranspose2d", 2), ("ConvTranspose3d", 3)]


@pytest.mark.parametrize("name,dims", CONVS)
@given(channels=st.integers(1, 3), groups=st.sampled_from([1, 2]), batched=st.booleans(),
       bias=st.booleans(), stride=st.integers(1, 2), seed=st.integers(0, 2**20))
def test_lazy_convolutions_become_pytorchs(name, dims, channels, groups, batched, bias, stride,
                                           seed):
    in_channels = channels * groups
    shape = ((2,) if batched else ()) + (in_channels,) + (4,) * dims

    def make(lib):
        return getattr(lib.nn, "Lazy" + name)(2 * groups, 2, stride=stride, groups=groups,
                                              bias=bias)
    made = _both(make, shape, seed)
    _same_module(*made)
    assert type(made[0]) is getattr(nn, name)
    assert made[0].in_channels == in_channels


NORMS = [("BatchNorm1d", (4, 3)), ("BatchNorm1d", (4, 3, 5)), ("BatchNorm2d", (2, 3, 2, 2)),
         ("BatchNorm3d", (2, 3, 2, 1, 2)), ("InstanceNorm1d", (2, 3, 5)),
         ("InstanceNorm2d", (2, 3, 2, 3)), ("InstanceNorm3d", (2, 3, 2, 2, 2))]


@pytest.mark.parametrize("name,shape", NORMS)
@pytest.mark.parametrize("affine,track", [(True, True), (False, True), (True, False),
                                          (False, False)])
def test_lazy_normalisations_become_pytorchs(name, shape, affine, track):
    def make(lib):
        return getattr(lib.nn, "Lazy" + name)(affine=affine, track_running_stats=track,
                                              momentum=0.3)
    ours, theirs, out, tout, xo, xt = _both(make, shape, 3)
    assert type(ours) is getattr(nn, name)
    # the running statistics moved in the first call: the buffers after it are compared
    _same_module(ours, theirs, out, tout, xo, xt)
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]


def test_lazy_defaults_and_reprs_before_the_first_call():
    for make in [lambda lib: lib.nn.LazyInstanceNorm1d(),
                 lambda lib: lib.nn.LazyBatchNorm2d(eps=1e-3, bias=False),
                 lambda lib: lib.nn.LazyConvTranspose2d(3, 2, padding=1, output_padding=1,
                                                        stride=2, dilation=2),
                 lambda lib: lib.nn.LazyConv1d(4, 3, padding="same", bias=False),
                 lambda lib: lib.nn.LazyLinear(2, bias=False)]:
        ours, theirs = make(tg), make(torch)
        assert repr(ours) == repr(theirs)
        assert ours.has_uninitialized_params() == theirs.has_uninitialized_params()
        assert [(k, repr(v)) for k, v in ours.state_dict().items()] == \
            [(k, repr(v)) for k, v in theirs.state_dict().items()]
        assert [n for n, _ in ours.named_parameters()] == \
            [n for n, _ in theirs.named_parameters()]


def test_the_hook_initializes_once_and_the_module_then_is_the_eager_one():
    tg.manual_seed(1)
    layer = nn.LazyLinear(3)
    weight = layer.weight
    optimizer = tg.optim.SGD(layer.parameters(), lr=0.5)   # made before shapes are known
    layer(tg.ones(2, 4)).sum().backward()
    assert layer.weight is weight and type(weight) is nn.Parameter
    assert not layer._forward_pre_hooks
    before = weight.detach().clone()
    optimizer.step()
    assert not tg.equal(before, weight.detach())
    assert isinstance(layer, nn.Linear) and not isinstance(layer, nn.LazyLinear)


def _load_both(make, source_shape, x_shape):
    """A state dict from an eager module loaded into an uninitialized lazy one."""
    x = np.random.default_rng(2).standard_normal(x_shape)
    outs = []
    for lib in (tg, torch):
        lib.manual_seed(5)
        lazy = make(lib)
        lazy(lib.tensor(np.random.default_rng(4).standard_normal(source_shape)))
        fresh = make(lib)
        result = fresh.load_state_dict(lazy.state_dict())
        outs.append((fresh, type(fresh).__name__, repr(fresh), tuple(result.missing_keys),
                     fresh(lib.tensor(x)).detach().numpy(), type(fresh).__name__,
                     repr(fresh)))
    return outs


@pytest.mark.parametrize("make,shape", [
    (lambda lib: lib.nn.LazyLinear(3), (2, 5)),
    (lambda lib: lib.nn.LazyConv2d(2, 3), (1, 4, 5, 5)),
    (lambda lib: lib.nn.LazyBatchNorm1d(), (6, 3)),
])
def test_loading_a_state_dict_materializes_the_uninitialized_members(make, shape):
    ours, theirs = _load_both(make, shape, shape)
    assert ours[1:4] == theirs[1:4]      # still lazy after loading, as in PyTorch
    np.testing.assert_allclose(ours[4], theirs[4], rtol=RTOL, atol=1e-14)
    assert ours[5:] == theirs[5:]


def test_a_state_dict_of_another_input_size_is_refused_at_the_first_call():
    outcomes = []
    for lib in (tg, torch):
        source = lib.nn.Linear(4, 2)
        lazy = lib.nn.LazyLinear(2)
        lazy.load_state_dict(source.state_dict())
        with pytest.raises(AssertionError) as info:
            lazy(lib.ones(3, 5))
        outcomes.append(str(info.value))
    assert outcomes[0] == outcomes[1]


def test_an_uninitialized_state_dict_into_an_eager_module():
    errors = []
    for lib in (tg, torch):
        with pytest.raises(RuntimeError) as info:
            lib.nn.Linear(2, 3).load_state_dict(lib.nn.LazyLinear(3).state_dict())
        errors.append(message(info.value))
    assert errors[0] == errors[1]
    # and into a lazy module, which stays lazy
    for lib in (tg, torch):
        lazy = lib.nn.LazyLinear(3)
        lazy.load_state_dict(lib.nn.LazyLinear(3).state_dict())
        assert lazy.has_uninitialized_params()


def _outcome(fn):
    try:
        result = fn()
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        # (PyTorch names some functions with their address, which cannot be matched)
        return type(e).__name__, re.sub(r" at 0x[0-9a-f]+>", ">", message(e))
    if isinstance(result, (tg.Tensor, torch.Tensor)):
        return type(result).__name__, repr(result) if "Uninit" in type(result).__name__ \
            else tuple(result.shape)
    return "value", repr(result).replace("torch", "tapegrad")


USES = ["p.shape", "p + 1", "1 + p", "p - 1", "p * 2", "2 * p", "p / 2", "p @ p", "-p",
        "abs(p)", "p % 2", "p == p", "p != 1", "p < 1", "p > 1", "p <= 1", "p >= 1", "p[0]",
        "list(p)", "bool(p)", "float(p)", "int(p)", "p.sum()", "p.detach()", "p.numel()",
        "p.dim()", "p.exp()", "p.view(-1)", "p.requires_grad_(False)", "p.clone()",
        "p.share_memory_()", "p.size()", "p.size(0)", "p.dtype", "p.requires_grad",
        "p.is_leaf", "p.grad", "p.ndim", "p.is_floating_point()", "p.is_complex()",
        "p.double()", "p.to(lib.float64)", "p.cpu()", "p.get_device()", "p.data",
        "p.grad_fn", "repr(p)", "str(p)", "lib.nn.parameter.is_lazy(p)",
        "p.cls_to_become.__name__", "copy.deepcopy(p)", "pickle.loads(pickle.dumps(p))",
        "p.__iadd__(1)"]


@pytest.mark.parametrize("kind", ["UninitializedParameter", "UninitializedBuffer"])
@pytest.mark.parametrize("use", USES)
def test_what_an_uninitialized_tensor_allows_and_refuses(kind, use):
    results = []
    for lib in (tg, torch):
        p = getattr(lib.nn, kind)()
        results.append(_outcome(lambda: eval(use, {"p": p, "lib": lib, "copy": copy,
                                                   "pickle": pickle})))
    assert results[0] == results[1]


def test_materialize_and_the_parameter_classes():
    for lib in (tg, torch):
        p = lib.nn.parameter.UninitializedParameter(requires_grad=False)
        b = lib.nn.parameter.UninitializedBuffer(persistent=False)
        assert isinstance(p, lib.nn.Parameter) and not p.requires_grad
        assert not b.persistent and not isinstance(b, lib.nn.Parameter)
        p.materialize((2, 3))
        b.materialize(4)
        assert type(p) is lib.nn.Parameter and tuple(p.shape) == (2, 3)
        assert type(b) is lib.Tensor and tuple(b.shape) == (4,)
        assert not p.requires_grad
    assert tg.nn.UninitializedParameter is tg.nn.parameter.UninitializedParameter
    from tapegrad.nn.modules.lazy import LazyModuleMixin
    assert LazyModuleMixin is nn.modules.lazy.LazyModuleMixin
    assert issubclass(nn.LazyLinear, LazyModuleMixin)


def test_lazy_module_errors():
    def classes(lib):
        class Waits(lib.nn.modules.lazy.LazyModuleMixin, lib.nn.Module):
            pass

        class Forgets(lib.nn.LazyLinear):
            def initialize_parameters(self, input):
                pass
        return Waits, Forgets

    OursWaits, OursForgets = classes(tg)
    Waits, Forgets = classes(torch)
    cases = [
        (lambda: OursWaits()(tg.ones(2)), lambda: Waits()(torch.ones(2))),
        (lambda: OursForgets(2)(tg.ones(2)), lambda: Forgets(2)(torch.ones(2))),
        (lambda: nn.LazyConv2d(4, 3, groups=2)(tg.ones(1, 3, 5, 5)),
         lambda: torch.nn.LazyConv2d(4, 3, groups=2)(torch.ones(1, 3, 5, 5))),
        (lambda: nn.LazyConv2d(4, 3)(tg.ones(3, 5)),
         lambda: torch.nn.LazyConv2d(4, 3)(torch.ones(3, 5))),
        (lambda: nn.LazyConvTranspose3d(4, 3)(tg.ones(3, 5)),
         lambda: torch.nn.LazyConvTranspose3d(4, 3)(torch.ones(3, 5))),
        (lambda: nn.LazyBatchNorm2d()(tg.ones(3, 5)),
         lambda: torch.nn.LazyBatchNorm2d()(torch.ones(3, 5))),
        (lambda: nn.LazyLinear(2).initialize_parameters(),
         lambda: torch.nn.LazyLinear(2).initialize_parameters()),
        (lambda: nn.LazyLinear(2)._replicate_for_data_parallel(),
         lambda: torch.nn.LazyLinear(2)._replicate_for_data_parallel()),
    ]
    for ours, theirs in cases:
        assert _outcome(ours) == _outcome(theirs)


def test_an_unbatched_instance_norm_reads_its_features_from_dimension_1_as_pytorch():
    outcomes = []
    for lib in (tg, torch):
        norm = lib.nn.LazyInstanceNorm1d()
        outcomes.append(_outcome(lambda: norm(lib.ones(3, 5))))
        outcomes.append(norm.num_features)
    assert outcomes[0] == outcomes[2] and outcomes[1] == outcomes[3]


def test_an_uninitialized_state_dict_saves_and_loads_as_pytorchs_pickle_does(tmp_path):
    results = []
    for lib in (tg, torch):
        path = tmp_path / f"{lib.__name__}.pt"
        lib.save(lib.nn.LazyBatchNorm2d().state_dict(), path)
        # (PyTorch's default weights_only=True refuses the class; tapegrad's file is data
        # either way and loads it with or without)
        loaded = lib.load(path, weights_only=False)
        fresh = lib.nn.LazyBatchNorm2d()
        fresh.load_state_dict(loaded)
        results.append(([(k, repr(v)) for k, v in loaded.items()],
                        [v.requires_grad for v in loaded.values()],
                        fresh.has_uninitialized_params()))
    assert results[0] == results[1]


@pytest.mark.parametrize("optimizer,options", [("SGD", dict(lr=0.1, momentum=0.9)),
                                               ("Adam", dict(lr=0.1)),
                                               ("RMSprop", dict(lr=0.01))])
def test_an_optimizer_made_before_the_first_call_trains_as_pytorchs(optimizer, options):
    x = np.random.default_rng(0).standard_normal((4, 3))
    trained = []
    for lib in (tg, torch):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.LazyLinear(4), lib.nn.Tanh(), lib.nn.LazyLinear(1))
        opt = getattr(lib.optim, optimizer)(model.parameters(), **options)
        for _ in range(3):
            opt.zero_grad()
            model(lib.tensor(x)).pow(2).sum().backward()
            opt.step()
        trained.append([p.detach().numpy().copy() for p in model.parameters()])
    for a, b in zip(*trained):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_the_modules_offer_pytorchs_names():
    assert sorted(tg.nn.parameter.__all__) == sorted(torch.nn.parameter.__all__)
    assert tg.nn.modules.lazy.__all__[0] == "LazyModuleMixin"
    lazy_names = [n for n in dir(torch.nn) if n.startswith("Lazy")]
    assert [n for n in lazy_names if not hasattr(tg.nn, n)] == []
