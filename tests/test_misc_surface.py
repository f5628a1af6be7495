"""Smaller pieces of PyTorch's surface against torch itself: ``func.stack_module_state``
(model ensembling with ``vmap`` and ``functional_call``), ``nn.utils.fuse_*_bn_*`` and
``Sequential * n``: values, gradients, shared modules, error types and texts."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.func as TGF

torch = pytest.importorskip("torch")
import torch.func as TF  # noqa: E402

RTOL = 1e-12
FUNC = {tg: TGF, torch: TF}


def _mlps(lib, n=3):
    """``n`` small MLPs with the same (seeded) weights in either library."""
    rng = np.random.default_rng(7)
    models = []
    for _ in range(n):
        m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))
        with lib.no_grad():
            for p in m.parameters():
                p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)),
                                   dtype=lib.float64))
        models.append(m)
    return models


def _ensemble(lib):
    models = _mlps(lib)
    params, buffers = FUNC[lib].stack_module_state(models)
    base = models[0]
    x = lib.tensor(np.linspace(-1.0, 1.0, 10).reshape(5, 2).repeat(2, axis=1)[:, :3],
                   dtype=lib.float64)

    def one(p, b, x):
        return FUNC[lib].functional_call(base, (p, b), (x,))

    out = FUNC[lib].vmap(one, in_dims=(0, 0, None))(params, buffers, x)
    (out ** 2).sum().backward()
    return params, buffers, out, models


def test_stack_module_state_ensemble_matches_torch():
    p1, b1, out1, models1 = _ensemble(tg)
    p2, b2, out2, _ = _ensemble(torch)
    assert list(p1) == list(p2) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert b1 == b2 == {}
    np.testing.assert_allclose(out1.detach().numpy(), out2.detach().numpy(), rtol=RTOL)
    for name in p2:
        assert p1[name].is_leaf and p1[name].requires_grad
        assert tuple(p1[name].shape) == tuple(p2[name].shape)
        np.testing.assert_allclose(p1[name].grad.numpy(), p2[name].grad.numpy(), rtol=RTOL)
    # the stacked leaves are new: the models' own parameters got no gradient
    assert all(p.grad is None for m in models1 for p in m.parameters())


def test_stack_module_state_buffers_are_stacked_without_grad():
    for lib in (tg, torch):
        models = [lib.nn.BatchNorm1d(3) for _ in range(2)]
        models[1].running_mean.fill_(2.0)
        params, buffers = FUNC[lib].stack_module_state(models)
        assert sorted(buffers) == ["num_batches_tracked", "running_mean", "running_var"]
        assert not buffers["running_mean"].requires_grad
        assert buffers["running_mean"].tolist() == [[0.0] * 3, [2.0] * 3]
        assert params["weight"].requires_grad and params["weight"].is_leaf


def _error(lib, make):
    with pytest.raises(Exception) as info:
        FUNC[lib].stack_module_state(make(lib))
    return type(info.value), str(info.value)


@pytest.mark.parametrize("make", [
    lambda lib: [],
    lambda lib: [lib.nn.Linear(2, 2), lib.nn.Linear(2, 2).eval()],
    lambda lib: [lib.nn.Linear(2, 2), lib.nn.Bilinear(2, 2, 2)],
    lambda lib: [lib.nn.Linear(2, 2, bias=True), lib.nn.Linear(2, 2, bias=False)],
    lambda lib: [lib.nn.Linear(2, 2), lib.nn.Linear(2, 2).requires_grad_(False)],
], ids=["empty", "mode", "class", "structure", "requires_grad"])
def test_stack_module_state_errors_match_torch(make):
    assert _error(tg, make) == _error(torch, make)


# ---------------------------------------------------------------------------------------------
# nn.utils.fuse_*
# ---------------------------------------------------------------------------------------------
def _with_bn_stats(lib, bn):
    rng = np.random.default_rng(3)
    n = bn.num_features
    with lib.no_grad():
        bn.running_mean.copy_(lib.tensor(rng.standard_normal(n)))
        bn.running_var.copy_(lib.tensor(rng.uniform(0.5, 2.0, n)))
        if bn.weight is not None:
            bn.weight.copy_(lib.tensor(rng.standard_normal(n)))
            bn.bias.copy_(lib.tensor(rng.standard_normal(n)))
    return bn.eval()


def _seeded(lib, module):
    rng = np.random.default_rng(5)
    with lib.no_grad():
        for p in module.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape))))
    return module.eval()


@pytest.mark.parametrize("kind", ["conv", "conv_nobias", "convT", "linear", "linear_bn1",
                                  "bn_noaffine"])
def test_fuse_bn_eval_matches_torch(kind):
    results = []
    for lib in (tg, torch):
        nn = lib.nn
        x = lib.tensor(np.random.default_rng(1).standard_normal((2, 3, 5, 5)))
        if kind.startswith("conv"):
            transpose = kind == "convT"
            cls = nn.ConvTranspose2d if transpose else nn.Conv2d
            layer = _seeded(lib, cls(3, 4, 3, bias=kind != "conv_nobias"))
            bn = _with_bn_stats(lib, nn.BatchNorm2d(4))
            fused = nn.utils.fuse_conv_bn_eval(layer, bn, transpose=transpose)
        elif kind == "bn_noaffine":
            x = x.reshape(2, 3, 25)
            layer = _seeded(lib, nn.Conv1d(3, 4, 2))
            bn = _with_bn_stats(lib, nn.BatchNorm1d(4, affine=False))
            fused = nn.utils.fuse_conv_bn_eval(layer, bn)
        else:
            x = x.reshape(10, 15)
            layer = _seeded(lib, nn.Linear(15, 4))
            bn = _with_bn_stats(lib, nn.BatchNorm1d(1 if kind == "linear_bn1" else 4))
            if kind == "linear_bn1":
                x = x.reshape(10, 1, 15)
            fused = nn.utils.fuse_linear_bn_eval(layer, bn)
        assert fused is not layer and isinstance(fused, type(layer))
        assert isinstance(fused.weight, nn.Parameter) and fused.weight.requires_grad
        out = fused(x)
        results.append((out.detach().numpy(), fused.weight.detach().numpy(),
                         fused.bias.detach().numpy(), bn(layer(x)).detach().numpy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def _fuse_error(lib, which):
    nn = lib.nn
    with pytest.raises(Exception) as info:
        if which == "train":
            nn.utils.fuse_conv_bn_eval(nn.Conv2d(2, 2, 1), nn.BatchNorm2d(2))
        elif which == "linear_train":
            nn.utils.fuse_linear_bn_eval(nn.Linear(2, 2).eval(), nn.BatchNorm1d(2))
        elif which == "features":
            nn.utils.fuse_linear_bn_eval(nn.Linear(2, 3).eval(), nn.BatchNorm1d(2).eval())
        else:
            nn.utils.fuse_conv_bn_eval(nn.Conv2d(2, 2, 1).eval(),
                                       nn.BatchNorm2d(2, track_running_stats=False).eval())
    return type(info.value), str(info.value)


@pytest.mark.parametrize("which", ["train", "linear_train", "features", "no_stats"])
def test_fuse_errors_match_torch(which):
    assert _fuse_error(tg, which) == _fuse_error(torch, which)


# ---------------------------------------------------------------------------------------------
# Sequential * n
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["mul", "rmul", "imul"])
def test_sequential_repeats_the_same_modules_as_torch(op):
    shapes = []
    for lib in (tg, torch):
        s = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.ReLU())
        first = s[0]
        if op == "mul":
            r = s * 3
        elif op == "rmul":
            r = 3 * s
        else:
            r = s
            r *= 3
            assert r is s
        assert op == "imul" or (r is not s and len(s) == 2)
        assert len(r) == 6 and r[0] is first and r[2] is first and r[4] is first
        assert list(r._modules) == [str(i) for i in range(6)]
        shapes.append([type(m).__name__ for m in r])
    assert shapes[0] == shapes[1]


def _mul_error(lib, op, factor):
    s = lib.nn.Sequential(lib.nn.Linear(2, 3))
    with pytest.raises(Exception) as info:
        if op == "mul":
            s * factor
        elif op == "rmul":
            factor * s
        else:
            s *= factor
    # the texts name the class, whose module path is each library's own
    return type(info.value), str(info.value).replace(str(type(s)), "<Sequential>")


# (str * Sequential is left out: it is str's own operator that refuses)
@pytest.mark.parametrize("op,factor", [(op, f) for op in ("mul", "rmul", "imul")
                                       for f in (0, -2, 1.5, "2")
                                       if (op, f) != ("rmul", "2")])
def test_sequential_mul_errors_match_torch(op, factor):
    assert _mul_error(tg, op, factor) == _mul_error(torch, op, factor)


# ---------------------------------------------------------------------------------------------
# nn.utils.skip_init
# ---------------------------------------------------------------------------------------------
def test_skip_init_builds_the_module_as_torch():
    built = []
    for lib in (tg, torch):
        m = lib.nn.utils.skip_init(lib.nn.Linear, 3, out_features=2, bias=False)
        assert isinstance(m, lib.nn.Linear) and m.bias is None
        assert isinstance(m.weight, lib.nn.Parameter) and m.weight.requires_grad
        built.append((tuple(m.weight.shape), str(m.weight.dtype).split(".")[1],
                      str(m.weight.device)))
    assert built[0] == built[1]


@pytest.mark.parametrize("cls", ["ReLU", "int"])
def test_skip_init_errors_match_torch(cls):
    errors = []
    for lib in (tg, torch):
        module_cls = int if cls == "int" else getattr(lib.nn, cls)
        with pytest.raises(Exception) as info:
            lib.nn.utils.skip_init(module_cls)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


# ---------------------------------------------------------------------------------------------
# testing.assert_allclose
# ---------------------------------------------------------------------------------------------
def _allclose(lib, actual, expected, **kw):
    with pytest.warns(FutureWarning) as record:
        try:
            lib.testing.assert_allclose(lib.tensor(actual), expected, **kw)
            error = None
        except AssertionError as e:
            error = type(e)
    return error, [str(w.message).replace("torch.", "LIB.").replace("tapegrad.", "LIB.")
                   for w in record]


@pytest.mark.parametrize("actual,expected,kw", [
    ([1.0, 2.0], [1.0, 2.0 + 1e-6], {}),       # within its float64 rtol 1e-5 (not assert_close's)
    ([1.0, 2.0], [1.0, 2.001], {}),
    ([1.0, float("nan")], [1.0, float("nan")], {}),
    ([1.0, float("nan")], [1.0, float("nan")], {"equal_nan": False}),
    ([1.0], [1.1], {"rtol": 0.2, "atol": 0.0}),
])
def test_assert_allclose_matches_torch(actual, expected, kw):
    assert _allclose(tg, actual, expected, **kw) == _allclose(torch, actual, expected, **kw)
