"""``Module.register_forward_hook`` and ``register_full_backward_hook`` /
``register_full_backward_pre_hook``: against PyTorch after the same ``manual_seed`` -- what
each hook is called with (shapes, values, None entries), what a replacement it returns does
to the output or to the gradients, the order hooks run in (``prepend``), ``with_kwargs``,
``always_call``, removal through the handle, hooks of modules called inside a
``Sequential``, the ``grad_fn`` names of a hooked module's outputs, warnings and error texts
-- plus central differences through a module carrying backward hooks."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tapegrad as tg
from tapegrad.testing import gradcheck

torch = pytest.importorskip("torch")


def plain(v):
    """What a hook saw, as nested tuples of numpy arrays / names, comparable across libs."""
    if isinstance(v, (tg.Tensor, torch.Tensor)):
        return ("T", v.detach().numpy().copy(), v.requires_grad,
                None if v.grad_fn is None else type(v.grad_fn).__name__)
    if isinstance(v, (tuple, list)):
        return tuple(plain(e) for e in v)
    if isinstance(v, dict):
        return tuple((k, plain(e)) for k, e in sorted(v.items()))
    if isinstance(v, (tg.nn.Module, torch.nn.Module)):
        return ("M", type(v).__name__)
    return v


def same(a, b, path="log"):
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), path
        assert a.shape == b.shape, path
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13, err_msg=path)
        return
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b), (path, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
        return
    assert a == b, (path, a, b)


def both(scenario, *args):
    """Run ``scenario(lib, *args)`` with tapegrad and with torch; compare what it returns."""
    ours, theirs = scenario(tg, *args), scenario(torch, *args)
    same(plain(ours), plain(theirs))
    return ours


# --- forward hooks ---------------------------------------------------------------------------
def forward_basic(lib, n, d_in, d_out, prepend):
    lib.manual_seed(3)
    lin = lib.nn.Linear(d_in, d_out)
    log = []
    h1 = lin.register_forward_hook(lambda m, args, out: log.append(("first", m, args, out)))
    h2 = lin.register_forward_hook(lambda m, args, out: log.append(("second", args, out)) or
                                   out * 2.0, prepend=prepend)
    x = lib.randn(n, d_in)
    y = lin(x)
    log.append(("y", y))
    h2.remove()
    log.append(("after remove", lin(x)))
    h1.remove()
    log.append(("none left", lin(x), len(lin._forward_hooks)))
    return log


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.booleans())
def test_forward_hook_sees_and_replaces_output(n, d_in, d_out, prepend):
    log = both(forward_basic, n, d_in, d_out, prepend)
    assert [e[0] for e in log[:2]] == (["second", "first"] if prepend else ["first", "second"])


def forward_kwargs_and_pre(lib):
    class Scale(lib.nn.Module):
        def forward(self, x, *, factor=1.0):
            return x * factor

    m = Scale()
    log = []
    m.register_forward_pre_hook(lambda mod, args: log.append(("pre", args)))
    m.register_forward_hook(lambda mod, args, kwargs, out: log.append(("kw", args, kwargs, out)),
                            with_kwargs=True)
    m.register_forward_hook(lambda mod, args, out: log.append(("plain", args, out)))
    m.register_forward_hook(lambda mod, args, kwargs, out: out + 1.0, with_kwargs=True,
                            prepend=True)
    log.append(("out", m(lib.arange(3.0), factor=2.0)))
    return log


def test_forward_hook_with_kwargs_runs_after_pre_hooks():
    both(forward_kwargs_and_pre)


def forward_in_sequential(lib):
    lib.manual_seed(0)
    net = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))
    acts = {}
    handles = [mod.register_forward_hook(
        lambda m, args, out, name=name: acts.__setitem__(name, (args, out)))
        for name, mod in net.named_children()]
    # a replacement in the middle feeds the next layer
    net[1].register_forward_hook(lambda m, args, out: out * 0.5)
    x = lib.randn(5, 3, requires_grad=True)
    y = net(x)
    y.sum().backward()
    for h in handles:
        h.remove()
    acts2 = {}
    net[0].register_forward_hook(lambda m, a, o: acts2.__setitem__("0", o))
    with net[0].register_forward_hook(lambda m, a, o: acts2.__setitem__("ctx", o)):
        net(x)
    net(x)
    return acts, y, x.grad, sorted(acts2), len(net[0]._forward_hooks)


def test_forward_hooks_inside_sequential_capture_activations():
    both(forward_in_sequential)


def forward_always_call(lib):
    class Boom(lib.nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    m = Boom()
    log = []
    m.register_forward_hook(lambda mod, args, out: log.append(("always", args, out)),
                            always_call=True)
    m.register_forward_hook(lambda mod, args, out: log.append(("not", args, out)))
    with pytest.raises(ValueError, match="boom"):
        m(lib.ones(2))
    return log


def test_forward_hook_always_call_runs_when_forward_raises():
    log = both(forward_always_call)
    assert [e[0] for e in log] == ["always"]


# --- full backward hooks ---------------------------------------------------------------------
def backward_linear(lib, n, d_in, d_out, prepend, replace):
    lib.manual_seed(1)
    lin = lib.nn.Linear(d_in, d_out)
    log = []
    lin.register_full_backward_pre_hook(lambda m, gout: log.append(("pre", m, gout)))
    lin.register_full_backward_hook(lambda m, gin, gout: log.append(("a", gin, gout)))
    lin.register_full_backward_hook(
        lambda m, gin, gout: log.append(("b", gin, gout)) or
        ((gin[0] * 3.0,) if replace else None), prepend=prepend)
    x = lib.randn(n, d_in, requires_grad=True)
    y = lin(x)
    log.append(("grad_fn", type(y.grad_fn).__name__, y.grad_fn.name()))
    (y ** 2).sum().backward()
    log.append(("grads", x.grad, lin.weight.grad, lin.bias.grad))
    return log


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.booleans(), st.booleans())
def test_full_backward_hook_on_linear(n, d_in, d_out, prepend, replace):
    log = both(backward_linear, n, d_in, d_out, prepend, replace)
    assert log[1][0] == "pre"
    assert [e[0] for e in log[2:4]] == (["b", "a"] if prepend else ["a", "b"])


def backward_pre_replaces(lib):
    lib.manual_seed(2)
    net = lib.nn.Sequential(lib.nn.Linear(3, 3), lib.nn.Sigmoid(), lib.nn.Linear(3, 1))
    log = []
    h = net[1].register_full_backward_pre_hook(lambda m, gout: (gout[0] * -1.0,))
    net[0].register_full_backward_hook(lambda m, gin, gout: log.append(("lin0", gin, gout)))
    x = lib.randn(4, 3, requires_grad=True)
    net(x).sum().backward()
    log.append(("x", x.grad, net[0].weight.grad))
    h.remove()
    x.grad = None
    net(x).sum().backward()
    log.append(("x after remove", x.grad))
    return log


def test_full_backward_pre_hook_replaces_grad_output_and_removes():
    both(backward_pre_replaces)


def backward_mixed_inputs(lib):
    class Three(lib.nn.Module):
        def forward(self, a, k, b):
            return a * 2.0, b * k, (a * b).sum()

    m = Three()
    log = []
    m.register_full_backward_hook(lambda mod, gin, gout: log.append(("full", gin, gout)))
    a = lib.tensor([1.0, -2.0], requires_grad=True)
    b = lib.tensor([3.0, 0.5])
    inside = []
    m.register_forward_pre_hook(lambda mod, args: inside.append(args))
    m.register_forward_hook(lambda mod, args, out: inside.append(("fwd", args, out)))
    out = m(a, 3.0, b)
    log.append(("outs", out, inside))
    (out[0].sum() + out[2]).backward()
    log.append(("a", a.grad))
    return log


def test_full_backward_hook_non_tensor_and_no_grad_inputs():
    both(backward_mixed_inputs)


def backward_no_input_grad(lib):
    lib.manual_seed(4)
    lin = lib.nn.Linear(2, 2)
    log = []
    lin.register_full_backward_hook(lambda m, gin, gout: log.append(("full", gin, gout)))
    lin.register_full_backward_pre_hook(lambda m, gout: log.append(("pre", gout)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = lin(lib.ones(3, 2))
        log.append(("grad_fn", type(y.grad_fn).__name__))
        y.sum().backward()
    log.append(("warnings", tuple(str(w.message) for w in caught)))
    log.append(("w", lin.weight.grad))
    return log


def test_full_backward_hook_when_no_input_requires_grad():
    log = both(backward_no_input_grad)
    assert log[2] == ("full", (None,), log[2][2])


def backward_errors(lib, which):
    lin = lib.nn.Linear(2, 2)
    x = lib.ones(1, 2, requires_grad=True)
    if which == "full":
        lin.register_full_backward_hook(lambda m, gin, gout: (gin[0], gin[0]))
    elif which == "pre":
        lin.register_full_backward_pre_hook(lambda m, gout: ())
    else:
        x = lib.ones(1, 2)
        lin.register_full_backward_hook(lambda m, gin, gout: (lib.ones(1, 2),))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            lin(x).sum().backward()
        except RuntimeError as e:
            return type(e).__name__, str(e)
    return "no error"


@pytest.mark.parametrize("which", ["full", "pre", "no input grad"])
def test_backward_hook_error_texts(which):
    ours, theirs = backward_errors(tg, which), backward_errors(torch, which)
    assert ours == theirs
    assert ours != "no error"


def test_no_hooks_left_after_remove_and_grad_fn_plain_again():
    lin = tg.nn.Linear(2, 2)
    handles = [lin.register_full_backward_hook(lambda m, gi, go: None),
               lin.register_full_backward_pre_hook(lambda m, go: None),
               lin.register_forward_hook(lambda m, a, o: None)]
    x = tg.ones(1, 2, requires_grad=True)
    assert type(lin(x).grad_fn).__name__ == "BackwardHookFunctionBackward"
    for h in handles:
        h.remove()
    assert type(lin(x).grad_fn).__name__ == "AddmmBackward0"
    assert not (lin._forward_hooks or lin._backward_hooks or lin._backward_pre_hooks)


def test_gradients_through_hooked_module_central_differences():
    tg.manual_seed(5)
    lin = tg.nn.Linear(3, 2)
    seen = []
    lin.register_full_backward_hook(lambda m, gi, go: seen.append(gi))
    lin.register_full_backward_pre_hook(lambda m, go: None)
    lin.register_forward_hook(lambda m, a, o: tg.tanh(o))
    x = tg.randn(4, 3, requires_grad=True)
    assert gradcheck(lambda x: lin(x).sin(), x)
    assert seen


# --- global module hooks ---------------------------------------------------------------------
def global_hooks(lib):
    lib.manual_seed(6)
    net = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.ReLU())
    log = []
    hooks = lib.nn.modules.module
    h1 = hooks.register_module_forward_pre_hook(lambda m, args: log.append(("gpre", m, args)))
    h2 = hooks.register_module_forward_hook(lambda m, args, out: log.append(("gfwd", m, out)))
    h3 = hooks.register_module_forward_hook(
        lambda m, args, kwargs, out: out + 1.0 if isinstance(m, lib.nn.ReLU) else None,
        with_kwargs=True)
    net[0].register_forward_hook(lambda m, args, out: log.append(("own", out)))
    try:
        log.append(("y", net(lib.randn(4, 2))))
    finally:
        h1.remove()
        h2.remove()
        h3.remove()
    log.append(("after", net(lib.ones(1, 2))))
    return log


def test_global_module_forward_hooks_run_before_the_modules_own():
    log = both(global_hooks)
    assert [e[0] for e in log[:5]] == ["gpre", "gpre", "gfwd", "own", "gpre"]


def double_backward(lib):
    lib.manual_seed(0)
    lin = lib.nn.Linear(3, 2)
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 2.0,))
    x = lib.randn(2, 3, requires_grad=True)
    g, = lib.autograd.grad(lib.tanh(lin(x)).sum(), x, create_graph=True)
    (g ** 2).sum().backward()
    # g's node is the hook's product (a flat view of it had shown as ViewBackward0)
    return g.detach(), x.grad, lin.weight.grad, type(g.grad_fn).__name__


def test_backward_hook_replacement_under_create_graph():
    both(double_backward)
