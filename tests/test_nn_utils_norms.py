"""``nn.utils.weight_norm`` / ``spectral_norm`` (PyTorch's hook-based API), their ``remove_*``,
``tg._weight_norm`` and ``Module.register_forward_pre_hook`` they stand on: against PyTorch
after the same ``manual_seed`` -- parameters, buffers, values, gradients after a backward,
``grad_fn`` names, ``state_dict`` keys, reprs, warnings and error texts, and short training
loops -- plus central differences of ``_weight_norm``'s gradient."""
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tapegrad as tg
from tapegrad.testing import gradcheck

torch = pytest.importorskip("torch")

RTOL = 1e-11
ATOL = 1e-13


def close(ours, theirs, rtol=RTOL, atol=ATOL, what=""):
    a = ours.detach().numpy() if isinstance(ours, tg.Tensor) else np.asarray(ours)
    b = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else np.asarray(theirs)
    assert a.shape == b.shape, what
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=what)


def build(lib, make, seed=0):
    lib.manual_seed(seed)
    return make(lib)


def weight_normed(lib, make, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return lib.nn.utils.weight_norm(make(lib), **kwargs)


def raises_same(fn_ours, fn_theirs):
    with pytest.raises(Exception) as theirs:
        fn_theirs()
    with pytest.raises(type(theirs.value)) as ours:
        fn_ours()
    # PyTorch's names (torch.Size, torch.nn...) read tapegrad's; links stay
    assert str(ours.value) == re.sub(r"\btorch\.", "tapegrad.", str(theirs.value))


LAYERS = {
    "linear": (lambda lib: lib.nn.Linear(4, 3), (5, 4)),
    "conv1d": (lambda lib: lib.nn.Conv1d(2, 3, 3), (2, 2, 7)),
    "conv2d": (lambda lib: lib.nn.Conv2d(2, 3, (2, 3)), (2, 2, 5, 5)),
    "convT2d": (lambda lib: lib.nn.ConvTranspose2d(3, 2, 2), (1, 3, 3, 4)),
    "bilinear": (lambda lib: lib.nn.Bilinear(3, 2, 4), None),
}


def layer_input(lib, key):
    shape = LAYERS[key][1]
    return lib.tensor(np.random.default_rng(7).standard_normal(shape))


# --- weight_norm --------------------------------------------------------------------------
@pytest.mark.parametrize("key,dim", [(key, dim) for key in ("linear", "conv1d", "conv2d",
                                                                "convT2d")
                                       for dim in (0, 1, -1, None, 2, -2)
                                       if not (key == "linear" and dim == 2)])
def test_weight_norm_values_gradients_and_nodes(key, dim):
    make = LAYERS[key][0]
    tm = build(torch, lambda lib: weight_normed(lib, make, dim=dim))
    gm = build(tg, lambda lib: weight_normed(lib, make, dim=dim))
    assert list(gm.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in gm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert repr(gm) == repr(tm)
    close(gm.weight_g, tm.weight_g, what="weight_g")
    close(gm.weight_v, tm.weight_v, what="weight_v")
    close(gm.weight, tm.weight, what="weight before the first forward")
    assert gm.weight.grad_fn.name() == tm.weight.grad_fn.name()
    out, tout = gm(layer_input(tg, key)), tm(layer_input(torch, key))
    close(out, tout, what="output")
    assert gm.weight.grad_fn.name() == tm.weight.grad_fn.name()
    (out ** 2).sum().backward()
    (tout ** 2).sum().backward()
    for (name, p), (_, tp) in zip(gm.named_parameters(), tm.named_parameters()):
        close(p.grad, tp.grad, what=f"gradient of {name}")


@pytest.mark.parametrize("dim", [2, -3])
def test_weight_norm_dim_out_of_range_is_pytorchs_error(dim):
    raises_same(lambda: build(tg, lambda lib: weight_normed(lib, LAYERS["linear"][0], dim=dim)),
                lambda: build(torch, lambda lib: weight_normed(lib, LAYERS["linear"][0],
                                                               dim=dim)))


def test_weight_norm_warns_as_pytorch_does():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tg.nn.utils.weight_norm(tg.nn.Linear(2, 2))
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        torch.nn.utils.weight_norm(torch.nn.Linear(2, 2))
    assert [w.category for w in caught] == [w.category for w in theirs] == [FutureWarning]
    assert str(caught[0].message) == str(theirs[0].message).replace("torch", "tapegrad")
    assert caught[0].filename == __file__      # points at the caller
    # remove_weight_norm does not warn
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lin = weight_normed(tg, lambda lib: lib.nn.Linear(2, 2))
        tg.nn.utils.remove_weight_norm(lin)


def test_weight_norm_on_another_name_and_two_hooks():
    make = LAYERS["bilinear"][0]
    for name in ("weight", "bias"):
        tm = build(torch, lambda lib: weight_normed(lib, make, name=name))
        gm = build(tg, lambda lib: weight_normed(lib, make, name=name))
        assert list(gm.state_dict()) == list(tm.state_dict())
        close(getattr(gm, name), getattr(tm, name))
    tm = build(torch, lambda lib: weight_normed(lib, make))
    gm = build(tg, lambda lib: weight_normed(lib, make))
    tm, gm = weight_normed(torch, lambda lib: tm, name="bias"), \
        weight_normed(tg, lambda lib: gm, name="bias")
    assert list(gm.state_dict()) == list(tm.state_dict())
    x1 = np.random.default_rng(1).standard_normal((3, 3))
    x2 = np.random.default_rng(2).standard_normal((3, 2))
    out, tout = gm(tg.tensor(x1), tg.tensor(x2)), tm(torch.tensor(x1), torch.tensor(x2))
    close(out, tout)
    out.sum().backward()
    tout.sum().backward()
    for (name, p), (tname, tp) in zip(gm.named_parameters(), tm.named_parameters()):
        assert name == tname
        close(p.grad, tp.grad, what=name)
    torch.nn.utils.remove_weight_norm(tm, "bias")
    tg.nn.utils.remove_weight_norm(gm, "bias")
    assert list(gm.state_dict()) == list(tm.state_dict())
    close(gm.bias, tm.bias)


def test_weight_norm_errors_are_pytorchs():
    def twice(lib):
        lin = weight_normed(lib, lambda lib: lib.nn.Linear(3, 2))
        return weight_normed(lib, lambda lib: lin)
    raises_same(lambda: twice(tg), lambda: twice(torch))

    def remove_twice(lib):
        lin = weight_normed(lib, lambda lib: lib.nn.Linear(3, 2))
        lib.nn.utils.remove_weight_norm(lin)
        lib.nn.utils.remove_weight_norm(lin)
    raises_same(lambda: remove_twice(tg), lambda: remove_twice(torch))
    raises_same(lambda: tg.nn.utils.remove_weight_norm(tg.nn.Linear(3, 2), "bias"),
                lambda: torch.nn.utils.remove_weight_norm(torch.nn.Linear(3, 2), "bias"))
    raises_same(lambda: weight_normed(tg, lambda lib: lib.nn.Linear(3, 2), name="foo"),
                lambda: weight_normed(torch, lambda lib: lib.nn.Linear(3, 2), name="foo"))


def test_remove_weight_norm_keeps_the_recomputed_weight():
    make = LAYERS["conv1d"][0]
    tm = build(torch, lambda lib: weight_normed(lib, make))
    gm = build(tg, lambda lib: weight_normed(lib, make))
    with torch.no_grad():
        tm.weight_g.mul_(2.0)
    with tg.no_grad():
        gm.weight_g.mul_(2.0)
    torch.nn.utils.remove_weight_norm(tm)
    assert tg.nn.utils.remove_weight_norm(gm) is gm
    assert list(gm.state_dict()) == list(tm.state_dict()) == ["bias", "weight"]
    assert type(gm.weight) is tg.nn.Parameter and gm.weight.grad_fn is None
    close(gm.weight, tm.weight)
    assert not gm._forward_pre_hooks
    close(gm(layer_input(tg, "conv1d")), tm(layer_input(torch, "conv1d")))


@settings(max_examples=25)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data())
def test__weight_norm_matches_pytorch(shape, data):
    ndim = len(shape)
    dim = data.draw(st.integers(-1, ndim - 1), label="dim")
    rng = np.random.default_rng(len(shape) + 10 * (dim + 1))
    v = rng.standard_normal(shape) + 0.1
    if dim == -1:
        g = np.array(rng.standard_normal())
    else:
        g = rng.standard_normal([s if i == dim else 1 for i, s in enumerate(shape)])
    tv, tgg = torch.tensor(v, requires_grad=True), torch.tensor(g, requires_grad=True)
    ov, og = tg.tensor(v, requires_grad=True), tg.tensor(g, requires_grad=True)
    tout, out = torch._weight_norm(tv, tgg, dim), tg._weight_norm(ov, og, dim)
    close(out, tout)
    assert out.grad_fn.name() == tout.grad_fn.name()
    cot = rng.standard_normal(shape)
    tout.backward(torch.tensor(cot))
    out.backward(tg.tensor(cot))
    close(ov.grad, tv.grad, what="v")
    close(og.grad, tgg.grad, what="g")


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test__weight_norm_gradient_is_central_differences(dim):
    rng = np.random.default_rng(3)
    v = tg.tensor(rng.standard_normal((3, 2, 4)) + 0.2, requires_grad=True)
    gshape = () if dim == -1 else [s if i == dim else 1 for i, s in enumerate((3, 2, 4))]
    g = tg.tensor(rng.standard_normal(gshape), requires_grad=True)
    assert gradcheck(lambda v, g: tg._weight_norm(v, g, dim), v, g)


def test_weight_norm_training_loop_agrees_with_pytorch():
    def make(lib):
        return lib.nn.Sequential(weight_normed(lib, lambda lib: lib.nn.Linear(4, 8)),
                                 lib.nn.Tanh(),
                                 weight_normed(lib, lambda lib: lib.nn.Linear(8, 1), dim=None))
    tm, gm = build(torch, make), build(tg, make)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    gopt = tg.optim.SGD(gm.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((16, 4)), rng.standard_normal((16, 1))
    for _ in range(8):
        losses = []
        for lib, m, opt in ((torch, tm, topt), (tg, gm, gopt)):
            opt.zero_grad()
            loss = ((m(lib.tensor(x)) - lib.tensor(y)) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[1] == pytest.approx(losses[0], rel=1e-10)
    for (name, p), (_, tp) in zip(gm.named_parameters(), tm.named_parameters()):
        close(p, tp, rtol=1e-10, atol=1e-12, what=name)
    close(gm(tg.tensor(x)), tm(torch.tensor(x)), rtol=1e-10, atol=1e-12)


# --- spectral_norm ------------------------------------------------------------------------
SPECTRAL = [("linear", {}), ("conv2d", {}), ("convT2d", {}), ("conv1d", {"dim": 1}),
            ("linear", {"n_power_iterations": 3}), ("conv2d", {"eps": 1e-3, "dim": 2})]


@pytest.mark.parametrize("key,kwargs", SPECTRAL)
def test_spectral_norm_buffers_values_gradients(key, kwargs):
    make = LAYERS[key][0]
    tm = build(torch, lambda lib: lib.nn.utils.spectral_norm(make(lib), **kwargs))
    gm = build(tg, lambda lib: lib.nn.utils.spectral_norm(make(lib), **kwargs))
    assert list(gm.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in gm.named_buffers()] == [n for n, _ in tm.named_buffers()]
    assert [n for n, _ in gm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert repr(gm) == repr(tm)
    close(gm.weight_u, tm.weight_u, what="u drawn after the same seed")
    close(gm.weight_v, tm.weight_v, what="v drawn after the same seed")
    close(gm.weight, tm.weight)
    assert gm.weight.grad_fn is None and tm.weight.grad_fn is None
    for step in range(3):
        out, tout = gm(layer_input(tg, key)), tm(layer_input(torch, key))
        close(out, tout, what=f"output {step}")
        assert gm.weight.grad_fn.name() == tm.weight.grad_fn.name()
        (out ** 2).sum().backward()
        (tout ** 2).sum().backward()
        close(gm.weight_u, tm.weight_u, what=f"u after {step}")
        close(gm.weight_v, tm.weight_v, what=f"v after {step}")
        for (name, p), (_, tp) in zip(gm.named_parameters(), tm.named_parameters()):
            close(p.grad, tp.grad, what=f"gradient of {name} at {step}")


def test_spectral_norm_iterates_in_training_mode_only():
    make = LAYERS["linear"][0]
    tm = build(torch, lambda lib: lib.nn.utils.spectral_norm(make(lib)))
    gm = build(tg, lambda lib: lib.nn.utils.spectral_norm(make(lib)))
    tm.eval()
    gm.eval()
    u0 = gm.weight_u.detach().numpy().copy()
    out, tout = gm(layer_input(tg, "linear")), tm(layer_input(torch, "linear"))
    close(out, tout)
    np.testing.assert_array_equal(gm.weight_u.detach().numpy(), u0)
    out.sum().backward()
    tout.sum().backward()
    close(gm.weight_orig.grad, tm.weight_orig.grad)
    gm.train()
    gm(layer_input(tg, "linear"))
    assert not np.array_equal(gm.weight_u.detach().numpy(), u0)


def test_spectral_norm_training_loop_and_state_dict_round_trip():
    def make(lib):
        return lib.nn.Sequential(lib.nn.utils.spectral_norm(lib.nn.Linear(3, 6)), lib.nn.ReLU(),
                                 lib.nn.utils.spectral_norm(lib.nn.Linear(6, 2),
                                                            n_power_iterations=2))
    tm, gm = build(torch, make), build(tg, make)
    topt = torch.optim.Adam(tm.parameters(), lr=0.05)
    gopt = tg.optim.Adam(gm.parameters(), lr=0.05)
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal((10, 3)), rng.standard_normal((10, 2))
    for _ in range(10):
        losses = []
        for lib, m, opt in ((torch, tm, topt), (tg, gm, gopt)):
            opt.zero_grad()
            loss = ((m(lib.tensor(x)) - lib.tensor(y)) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[1] == pytest.approx(losses[0], rel=1e-10)
    theirs = tm.state_dict()
    for key, value in gm.state_dict().items():
        close(value, theirs[key], rtol=1e-9, atol=1e-11, what=key)
    # a fresh module loads PyTorch's state and then computes what PyTorch computes
    fresh = build(tg, make, seed=1)
    fresh.load_state_dict({k: tg.tensor(v.numpy()) for k, v in theirs.items()})
    fresh.eval()
    tm.eval()
    close(fresh(tg.tensor(x)), tm(torch.tensor(x)))


def test_remove_spectral_norm():
    make = LAYERS["conv2d"][0]
    tm = build(torch, lambda lib: lib.nn.utils.spectral_norm(make(lib)))
    gm = build(tg, lambda lib: lib.nn.utils.spectral_norm(make(lib)))
    tm(layer_input(torch, "conv2d"))
    gm(layer_input(tg, "conv2d"))
    torch.nn.utils.remove_spectral_norm(tm)
    assert tg.nn.utils.remove_spectral_norm(gm) is gm
    assert list(gm.state_dict()) == list(tm.state_dict()) == ["bias", "weight"]
    assert type(gm.weight) is tg.nn.Parameter and gm.weight.requires_grad
    close(gm.weight, tm.weight)
    assert not gm._forward_pre_hooks


def test_spectral_norm_errors_are_pytorchs():
    def twice(lib):
        lin = lib.nn.utils.spectral_norm(lib.nn.Linear(3, 2))
        lib.nn.utils.spectral_norm(lin)
    raises_same(lambda: twice(tg), lambda: twice(torch))
    raises_same(lambda: tg.nn.utils.spectral_norm(tg.nn.Linear(3, 2), n_power_iterations=0),
                lambda: torch.nn.utils.spectral_norm(torch.nn.Linear(3, 2),
                                                     n_power_iterations=0))
    raises_same(lambda: tg.nn.utils.spectral_norm(tg.nn.Linear(3, 2, bias=False), "bias"),
                lambda: torch.nn.utils.spectral_norm(torch.nn.Linear(3, 2, bias=False),
                                                     "bias"))
    raises_same(lambda: tg.nn.utils.remove_spectral_norm(tg.nn.Linear(3, 2)),
                lambda: torch.nn.utils.remove_spectral_norm(torch.nn.Linear(3, 2)))

    def weight_norm_is_not_spectral(lib):
        lib.nn.utils.remove_spectral_norm(weight_normed(lib, lambda lib: lib.nn.Linear(3, 2)))
    raises_same(lambda: weight_norm_is_not_spectral(tg),
                lambda: weight_norm_is_not_spectral(torch))


# --- Module.register_forward_pre_hook -----------------------------------------------------
def test_forward_pre_hooks_as_pytorch_runs_them():
    def program(lib):
        lin = build(lib, lambda lib: lib.nn.Linear(2, 2))
        calls = []
        first = lin.register_forward_pre_hook(
            lambda m, args: calls.append("first") or (args[0] * 2.0))
        lin.register_forward_pre_hook(lambda m, args: calls.append("second") or args[0] + 1.0)
        lin.register_forward_pre_hook(lambda m, args: calls.append("front"), prepend=True)
        x = lib.tensor([[1.0, -2.0]])
        outs = [lin(x).detach().numpy().copy()]
        first.remove()
        first.remove()   # a second remove is a no-op
        outs.append(lin(x).detach().numpy().copy())
        kw = lin.register_forward_pre_hook(
            lambda m, args, kwargs: calls.append("kw") or ((args[0] - 1.0,), kwargs),
            with_kwargs=True)
        outs.append(lin(x).detach().numpy().copy())
        kw.remove()
        outs.append(lin(x).detach().numpy().copy())
        return calls, outs
    calls, outs = program(tg)
    tcalls, touts = program(torch)
    assert calls == tcalls
    for a, b in zip(outs, touts):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def test_forward_pre_hook_with_kwargs_bad_result_is_pytorchs_error():
    def program(lib):
        lin = lib.nn.Linear(2, 2)
        lin.register_forward_pre_hook(lambda m, args, kwargs: 3, with_kwargs=True)
        lin(lib.ones(1, 2))
    raises_same(lambda: program(tg), lambda: program(torch))


# --- EmbeddingBag / F.embedding_bag -------------------------------------------------------
@st.composite
def bags(draw):
    rows = draw(st.integers(1, 6))
    n = draw(st.integers(0, 9))
    indices = draw(st.lists(st.integers(0, rows - 1), min_size=n, max_size=n))
    cuts = sorted(draw(st.lists(st.integers(0, n), min_size=0, max_size=4)))
    offsets = [0] + cuts
    return rows, indices, offsets


@settings(max_examples=40)
@given(case=bags(), mode=st.sampled_from(["sum", "mean", "max"]),
       last=st.booleans(), pad=st.sampled_from([None, 0, -1]), weighted=st.booleans())
def test_embedding_bag_matches_pytorch(case, mode, last, pad, weighted):
    rows, indices, offsets = case
    if last and len(offsets) < 2:
        offsets = offsets + [len(indices)]   # PyTorch crashes on a lone offset here
    rng = np.random.default_rng(len(indices) + 10 * rows)
    w = rng.standard_normal((rows, 3))
    psw = rng.standard_normal(len(indices)) if weighted and mode == "sum" else None

    def run(lib):
        weight = lib.tensor(w, requires_grad=True)
        sample = None if psw is None else lib.tensor(psw, requires_grad=True)
        out = lib.nn.functional.embedding_bag(
            lib.tensor(indices, dtype=lib.int64), weight, lib.tensor(offsets, dtype=lib.int64),
            mode=mode, include_last_offset=last, padding_idx=pad, per_sample_weights=sample)
        cot = np.random.default_rng(1).standard_normal(tuple(out.shape))
        (out * lib.tensor(cot)).sum().backward()
        return out, weight, sample
    out, weight, sample = run(tg)
    tout, tweight, tsample = run(torch)
    close(out, tout)
    assert out.grad_fn.name() == tout.grad_fn.name()
    close(weight.grad, tweight.grad, what="weight gradient")
    if sample is not None:
        close(sample.grad, tsample.grad, what="per_sample_weights gradient")


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_input_and_gradient_is_central_differences(mode):
    rng = np.random.default_rng(4)
    w = rng.standard_normal((7, 4))
    idx = np.array([[0, 3, 3, 6], [2, 1, 5, 5]])
    weight = tg.tensor(w, requires_grad=True)
    tweight = torch.tensor(w, requires_grad=True)
    out = tg.nn.functional.embedding_bag(tg.tensor(idx), weight, mode=mode, padding_idx=5)
    tout = torch.nn.functional.embedding_bag(torch.tensor(idx), tweight, mode=mode,
                                             padding_idx=5)
    close(out, tout)
    out.sum().backward()
    tout.sum().backward()
    close(weight.grad, tweight.grad)
    psw = tg.tensor(rng.standard_normal((2, 4)), requires_grad=True)
    if mode == "sum":
        assert gradcheck(lambda w, p: tg.nn.functional.embedding_bag(
            tg.tensor(idx), w, mode="sum", per_sample_weights=p), weight, psw)
    else:
        assert gradcheck(lambda w: tg.nn.functional.embedding_bag(tg.tensor(idx), w, mode=mode),
                         weight)


def test_embedding_bag_module_init_repr_and_training_loop():
    def make(lib):
        return lib.nn.Sequential(lib.nn.EmbeddingBag(9, 4, mode="max", padding_idx=-2),
                                 lib.nn.Linear(4, 1))
    tm, gm = build(torch, make), build(tg, make)
    assert repr(gm) == repr(tm)
    close(gm[0].weight, tm[0].weight, what="N(0, 1) draws and the zeroed padding row")
    for kwargs in ({}, {"max_norm": 1.0, "norm_type": 1.0, "mode": "sum"},
                   {"scale_grad_by_freq": True, "padding_idx": 3}):
        assert repr(tg.nn.EmbeddingBag(5, 2, **kwargs)) == repr(torch.nn.EmbeddingBag(5, 2,
                                                                                      **kwargs))
    topt = torch.optim.SGD(tm.parameters(), lr=0.2)
    gopt = tg.optim.SGD(gm.parameters(), lr=0.2)
    rng = np.random.default_rng(9)
    idx = rng.integers(0, 9, size=(6, 3))
    y = rng.standard_normal((6, 1))
    for _ in range(6):
        losses = []
        for lib, m, opt in ((torch, tm, topt), (tg, gm, gopt)):
            opt.zero_grad()
            loss = ((m(lib.tensor(idx)) - lib.tensor(y)) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[1] == pytest.approx(losses[0], rel=1e-12)
    close(gm[0].weight, tm[0].weight)
    pre = np.array([[1.0, 2.0], [3.0, 5.0]])
    for lib in (tg, torch):
        bag = lib.nn.EmbeddingBag.from_pretrained(lib.tensor(pre), mode="sum")
        assert not bag.weight.requires_grad
    close(tg.nn.EmbeddingBag.from_pretrained(tg.tensor(pre), freeze=False)(
        tg.tensor([0, 1, 1]), tg.tensor([0, 1])),
        torch.nn.EmbeddingBag.from_pretrained(torch.tensor(pre), freeze=False)(
            torch.tensor([0, 1, 1]), torch.tensor([0, 1])))


def test_embedding_bag_max_norm_renormalises_as_pytorch():
    def run(lib):
        lib.manual_seed(3)
        bag = lib.nn.EmbeddingBag(6, 3, max_norm=0.7, mode="mean")
        out = bag(lib.tensor([[0, 2], [2, 5]]))
        return out, bag.weight
    (out, w), (tout, tw) = run(tg), run(torch)
    close(out, tout)
    close(w, tw)


EB_ERRORS = [
    lambda lib: ([1, 2, 4, 4, 3], [1, 3], {}),
    lambda lib: ([1, 2, 4, 4, 3], [0, 3, 9], {}),
    lambda lib: ([1, 7], [0], {}),
    lambda lib: ([1, -1], [0], {}),
    lambda lib: ([1, 2], [0], {"mode": "foo"}),
    lambda lib: ([1, 2], [0], {"padding_idx": 9}),
    lambda lib: ([1, 2], [0], {"padding_idx": -6}),
    lambda lib: ([1, 2], None, {}),
    lambda lib: ([1, 2], [[0]], {}),
    lambda lib: ([[[1, 2]]], None, {}),
    lambda lib: ([[1, 2]], [0], {}),
    lambda lib: ([1, 2], [0], {"per_sample_weights": lib.ones(3)}),
    lambda lib: ([1, 2], [0], {"per_sample_weights": lib.ones(2), "mode": "mean"}),
    lambda lib: ([1, 2], [0], {"per_sample_weights": lib.ones(2), "mode": "max"}),
    lambda lib: ([1, 2], [0], {"mode": "max", "scale_grad_by_freq": True}),
    lambda lib: ([1, 2], [0], {"mode": "max", "sparse": True}),
    lambda lib: ([1.0, 2.0], [0], {}),
    lambda lib: ([1, 2], [0.0], {}),
]


@pytest.mark.parametrize("case", range(len(EB_ERRORS)))
def test_embedding_bag_errors_are_pytorchs(case):
    def call(lib):
        indices, offsets, kwargs = EB_ERRORS[case](lib)
        weight = lib.ones(5, 3, requires_grad=True)
        lib.nn.functional.embedding_bag(
            lib.tensor(indices), weight, None if offsets is None else lib.tensor(offsets),
            **kwargs)

    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)) as ours:
        call(tg)
    assert str(ours.value) == str(theirs.value).replace("torch", "tapegrad")
    raises_same(lambda: tg.nn.functional.embedding_bag(tg.tensor([1]), tg.ones(5),
                                                       tg.tensor([0])),
                lambda: torch.nn.functional.embedding_bag(torch.tensor([1]), torch.ones(5),
                                                          torch.tensor([0])))


def test_embedding_bag_module_padding_errors():
    for kwargs in ({"padding_idx": 5}, {"padding_idx": -6}, {"_weight": tg.ones(2, 2)}):
        theirs = {k: torch.ones(2, 2) if k == "_weight" else v for k, v in kwargs.items()}
        raises_same(lambda: tg.nn.EmbeddingBag(5, 2, **kwargs),
                    lambda: torch.nn.EmbeddingBag(5, 2, **theirs))


def test_embedding_bag_max_gives_a_tie_to_the_first_row():
    def run(lib):
        weight = lib.tensor([[1.0, 2.0], [1.0, 3.0], [0.5, 3.0]], requires_grad=True)
        out = lib.nn.functional.embedding_bag(lib.tensor([2, 0, 1, 2]), weight,
                                              lib.tensor([0, 1]), mode="max")
        out.sum().backward()
        return out, weight.grad
    (out, grad), (tout, tgrad) = run(tg), run(torch)
    close(out, tout)
    close(grad, tgrad)


# --- parametrize / parametrizations.weight_norm -------------------------------------------
def test_parametrizations_weight_norm_matches_pytorch():
    import tapegrad.nn.utils.parametrizations as gps
    from torch.nn.utils import parametrizations as tps
    from tapegrad.nn.utils import parametrize as gp
    from torch.nn.utils import parametrize as tp
    for key in ("linear", "conv2d"):
        for dim in (0, 1, None):
            make = LAYERS[key][0]
            tm = build(torch, lambda lib: tps.weight_norm(make(lib), dim=dim))
            gm = build(tg, lambda lib: gps.weight_norm(make(lib), dim=dim))
            assert repr(gm) == repr(tm)
            assert type(gm).__name__ == type(tm).__name__
            assert list(gm.state_dict()) == list(tm.state_dict())
            assert gp.is_parametrized(gm, "weight") and not gp.is_parametrized(gm, "bias")
            assert gp.type_before_parametrizations(gm).__name__ == \
                tp.type_before_parametrizations(tm).__name__
            for name, value in gm.state_dict().items():
                close(value, tm.state_dict()[name], what=name)
            assert gm.weight.grad_fn.name() == tm.weight.grad_fn.name()
            out, tout = gm(layer_input(tg, key)), tm(layer_input(torch, key))
            close(out, tout)
            (out ** 2).sum().backward()
            (tout ** 2).sum().backward()
            for (name, p), (tname, tpar) in zip(gm.named_parameters(), tm.named_parameters()):
                assert name == tname
                close(p.grad, tpar.grad, what=name)
            # assigning the weight stores its right_inverse
            w = np.random.default_rng(2).standard_normal(tuple(gm.weight.shape))
            gm.weight = tg.tensor(w)
            tm.weight = torch.tensor(w)
            for name, value in gm.state_dict().items():
                close(value, tm.state_dict()[name], what=f"{name} after assignment")
            gp.remove_parametrizations(gm, "weight")
            tp.remove_parametrizations(tm, "weight")
            assert type(gm).__name__ == type(tm).__name__
            assert list(gm.state_dict()) == list(tm.state_dict())
            assert type(gm.weight) is tg.nn.Parameter
            close(gm.weight, tm.weight)


def test_register_parametrization_chains_caches_and_removes_as_pytorch():
    def run(lib, p):
        class Symmetric(lib.nn.Module):
            def forward(self, x):
                return x.triu() + x.triu(1).transpose(0, 1)

        class Scale(lib.nn.Module):
            def forward(self, x):
                return 2.0 * x

            def right_inverse(self, x):
                return x / 2.0
        lin = build(lib, lambda lib: lib.nn.Linear(3, 3))
        p.register_parametrization(lin, "weight", Symmetric())
        p.register_parametrization(lin, "weight", Scale())
        shown = [repr(lin), list(lin.state_dict())]
        x = lib.tensor(np.random.default_rng(3).standard_normal((2, 3)))
        out = lin(x)
        out.sum().backward()
        with p.cached():
            same = lin.weight is lin.weight
        grad = lin.parametrizations.weight.original.grad
        with pytest.raises(RuntimeError) as err:
            lin.weight = lib.ones(3, 3)
        shown.append(str(err.value))
        kept = lin.weight.detach().numpy().copy()
        p.remove_parametrizations(lin, "weight", leave_parametrized=False)
        shown.append(type(lin).__name__)
        return shown, out, grad, same, kept, lin.weight
    from tapegrad.nn.utils import parametrize as gp
    from torch.nn.utils import parametrize as tp
    (shown, out, grad, same, kept, w), (tshown, tout, tgrad, tsame, tkept, tw) = \
        run(tg, gp), run(torch, tp)
    assert shown == tshown
    assert same and tsame
    close(out, tout)
    close(grad, tgrad)
    close(kept, tkept)
    close(w, tw)


def test_parametrize_errors_are_pytorchs():
    from tapegrad.nn.utils import parametrize as gp
    from torch.nn.utils import parametrize as tp

    class Twice(torch.nn.Module):
        def forward(self, x):
            return torch.cat([x, x])

    class GTwice(tg.nn.Module):
        def forward(self, x):
            return tg.cat([x, x])
    raises_same(lambda: gp.register_parametrization(tg.nn.Linear(2, 2), "weight", GTwice()),
                lambda: tp.register_parametrization(torch.nn.Linear(2, 2), "weight", Twice()))
    raises_same(lambda: gp.register_parametrization(tg.nn.Linear(2, 2), "foo", GTwice()),
                lambda: tp.register_parametrization(torch.nn.Linear(2, 2), "foo", Twice()))
    raises_same(lambda: gp.remove_parametrizations(tg.nn.Linear(2, 2), "weight"),
                lambda: tp.remove_parametrizations(torch.nn.Linear(2, 2), "weight"))
    import tapegrad.nn.utils.parametrizations as gps
    from torch.nn.utils import parametrizations as tps
    raises_same(lambda: gp.remove_parametrizations(gps.weight_norm(tg.nn.Linear(2, 2)),
                                                   "weight", leave_parametrized=False),
                lambda: tp.remove_parametrizations(tps.weight_norm(torch.nn.Linear(2, 2)),
                                                   "weight", leave_parametrized=False))


def test_a_parametrized_module_deep_copies_and_refuses_pickle_as_pytorch():
    import copy
    import pickle
    import tapegrad.nn.utils.parametrizations as gps
    from torch.nn.utils import parametrizations as tps
    gm = build(tg, lambda lib: gps.weight_norm(lib.nn.Linear(3, 2)))
    tm = build(torch, lambda lib: tps.weight_norm(lib.nn.Linear(3, 2)))
    gc, tc = copy.deepcopy(gm), copy.deepcopy(tm)
    assert type(gc) is type(gm) and repr(gc) == repr(tc)
    with tg.no_grad():
        gc.parametrizations.weight.original0.mul_(3.0)
    close(gm.weight, tm.weight)          # the copy owns its tensors
    with pytest.raises(RuntimeError) as theirs:
        pickle.dumps(tm)
    with pytest.raises(RuntimeError) as ours:
        pickle.dumps(gm)
    assert str(ours.value) == str(theirs.value)      # the same text, pytorch.org link included


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_in_a_compiled_function_follows_new_weights_and_indices(mode):
    F = tg.nn.functional
    step = tg.compile(lambda w, i, o: F.embedding_bag(i, w, o, mode=mode) * 1.0)
    rng = np.random.default_rng(6)
    # new indices under the same offsets, new offsets under the same indices, a new length
    cases = [([0, 1, 1, 2], [0, 2]), ([0, 1, 1, 2], [0, 2]), ([2, 2, 0, 1], [0, 2]),
             ([2, 2, 0, 1], [0, 1]), ([3, 0], [0, 1])]
    for indices, offsets in cases:
        for _ in range(2):   # new weights each call: a max picks other rows
            w = tg.tensor(rng.standard_normal((4, 3)))
            i, o = tg.tensor(indices), tg.tensor(offsets)
            close(step(w, i, o), F.embedding_bag(i, w, o, mode=mode), rtol=0, atol=0)


@pytest.mark.parametrize("key,kwargs", SPECTRAL)
def test_parametrizations_spectral_norm_matches_pytorch(key, kwargs):
    import tapegrad.nn.utils.parametrizations as gps
    from torch.nn.utils import parametrizations as tps
    from tapegrad.nn.utils import parametrize as gp
    from torch.nn.utils import parametrize as tp
    make = LAYERS[key][0]
    tm = build(torch, lambda lib: tps.spectral_norm(make(lib), **kwargs))
    gm = build(tg, lambda lib: gps.spectral_norm(make(lib), **kwargs))
    assert repr(gm) == repr(tm)
    assert list(gm.state_dict()) == list(tm.state_dict())
    for name, value in gm.state_dict().items():
        close(value, tm.state_dict()[name], what=f"{name}: the same draws and 15 iterations")
    for step in range(3):
        if step == 2:
            gm.eval()
            tm.eval()
        out, tout = gm(layer_input(tg, key)), tm(layer_input(torch, key))
        close(out, tout, what=f"output {step}")
        assert gm.weight.grad_fn.name() == tm.weight.grad_fn.name()
        (out ** 2).sum().backward()
        (tout ** 2).sum().backward()
        for name, value in gm.state_dict().items():
            close(value, tm.state_dict()[name], what=f"{name} after {step}")
        for (name, p), (_, tpar) in zip(gm.named_parameters(), tm.named_parameters()):
            close(p.grad, tpar.grad, what=f"gradient of {name} at {step}")
    gp.remove_parametrizations(gm, "weight")
    tp.remove_parametrizations(tm, "weight")
    assert list(gm.state_dict()) == list(tm.state_dict())
    close(gm.weight, tm.weight)


def test_parametrizations_spectral_norm_errors_and_1d_weight():
    import tapegrad.nn.utils.parametrizations as gps
    from torch.nn.utils import parametrizations as tps
    for kwargs in ({"dim": 3}, {"dim": -3}, {"n_power_iterations": 0}, {"name": "foo"}):
        raises_same(lambda: gps.spectral_norm(tg.nn.Linear(3, 2), **kwargs),
                    lambda: tps.spectral_norm(torch.nn.Linear(3, 2), **kwargs))
    gm = build(tg, lambda lib: gps.spectral_norm(lib.nn.Linear(3, 2), name="bias"))
    tm = build(torch, lambda lib: tps.spectral_norm(lib.nn.Linear(3, 2), name="bias"))
    assert list(gm.state_dict()) == list(tm.state_dict())
    close(gm.bias, tm.bias)


def test_deepcopy_of_a_weight_normed_module_is_refused_as_in_pytorch():
    import copy
    gm = weight_normed(tg, lambda lib: lib.nn.Linear(2, 2))
    tm = weight_normed(torch, lambda lib: lib.nn.Linear(2, 2))
    raises_same(lambda: copy.deepcopy(gm), lambda: copy.deepcopy(tm))
