"""``tapegrad.jit`` and ``tapegrad.amp`` (with ``tapegrad.autocast``, ``cuda.amp``,
``cpu.amp``) against PyTorch: values, warnings (category and text, ``torch.`` read as
``tapegrad.``), errors, and a few GradScaler training steps, one with an infinite gradient."""
import pickle
import re
import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.cpu.amp
import tapegrad.cuda.amp

torch = pytest.importorskip("torch")


def _text(message):
    # a class is named by its module, which differs (tapegrad.nn.modules.Linear)
    message = re.sub(r"<class '[\w.]*?(\w+)'>", r"<class \1>", str(message))
    return (message.replace(" or `torch.export`", "").replace("torch.compile", "tapegrad."
                                                                    "compile")
            .replace("torch.", "tapegrad."))


def outcome(lib, call):
    """(result or error, warnings) of ``call(lib)``: errors and warnings as (type, text)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = ("ok", call(lib))
        except Exception as e:  # noqa: BLE001 - the error is what is compared
            result = (type(e).__name__, _text(e))
    seen = [(w.category.__name__, _text(w.message)) for w in caught
            if "mkldnn" not in str(w.message)]
    return result, seen


def same(call, value=lambda r: r):
    """``call`` gives PyTorch's warnings and errors, and ``value`` of its results agree."""
    (tkind, tres), twarn = outcome(torch, call)
    (gkind, gres), gwarn = outcome(tg, call)
    assert gwarn == twarn
    assert gkind == tkind, (gres, tres)
    if tkind == "ok":
        assert value(gres) == value(tres)
    else:
        assert gres == tres
    return gres


def region(r):
    return (r.device, r._enabled, str(r.fast_dtype).split(".")[-1], r._cache_enabled)


# --- autocast -------------------------------------------------------------------------------

@pytest.mark.parametrize("args,kwargs", [
    (("cpu",), {}), (("cpu",), {"enabled": False}), (("cuda",), {}),
    (("cuda",), {"enabled": False}), (("cpu:0",), {}), (("mps",), {}), (("xla",), {}),
    (("cpu",), {"cache_enabled": False}), (("cuda",), {"dtype": "bfloat16"}),
    (("cpu",), {"dtype": "float32"}), (("cpu",), {"dtype": "float64"}),
    (("cpu",), {"dtype": "float16"}), (("mps",), {"dtype": "float32"}),
    (("gpu",), {}), (("meta",), {}), (("lazy",), {}), (("hip",), {}), (("",), {}),
    (("cuda:x",), {}), ((None,), {}), ((3,), {})])
def test_autocast_regions_are_pytorchs(args, kwargs):
    def make(lib):
        kw = {k: getattr(lib, v) if k == "dtype" else v for k, v in kwargs.items()}
        return lib.autocast(*args, **kw)
    same(make, region)


def test_autocast_device_object_is_refused_as_in_pytorch():
    (gkind, gtext), _ = outcome(tg, lambda lib: lib.autocast(lib.device("cpu")))
    (tkind, ttext), _ = outcome(torch, lambda lib: lib.autocast(lib.device("cpu")))
    # the class is defined in tapegrad._device
    assert (gkind, gtext.replace("tapegrad._device.", "tapegrad.")) == (tkind, ttext)


def test_autocast_leaves_float64_alone_and_keeps_the_state():
    rng = np.random.default_rng(0)      # small integers: every sum is exact in float64
    a, b = rng.integers(-5, 6, (3, 4)) / 4, rng.integers(-5, 6, (4, 2)) / 2

    def run(lib):
        x = lib.tensor(a, dtype=lib.float64, requires_grad=True)
        y = lib.tensor(b, dtype=lib.float64)
        states = [lib.is_autocast_enabled("cpu")]
        with lib.autocast("cpu") as r:
            states += [lib.is_autocast_enabled("cpu"), lib.is_autocast_enabled(),
                       str(lib.get_autocast_dtype("cpu")).split(".")[-1],
                       lib.is_autocast_cache_enabled()]
            out = lib.nn.functional.linear(x @ y, lib.ones(3, 2, dtype=lib.float64))
            with lib.autocast("cpu", enabled=False):
                states.append(lib.is_autocast_enabled("cpu"))
            states.append(lib.is_autocast_enabled("cpu"))
            with lib.autocast("cpu", dtype=lib.float16, cache_enabled=False):
                states += [str(lib.get_autocast_dtype("cpu")).split(".")[-1],
                           lib.is_autocast_cache_enabled()]
            states.append(str(lib.get_autocast_dtype("cpu")).split(".")[-1])
        states += [lib.is_autocast_enabled("cpu"), r._enabled]
        out.sum().backward()
        return str(out.dtype).split(".")[-1], out.detach().numpy(), x.grad.numpy(), states

    gd, gv, gg, gs = run(tg)
    td, tv, tgr, ts = run(torch)
    assert gd == td == "float64" and gs == ts
    np.testing.assert_array_equal(gv, tv)
    np.testing.assert_array_equal(gg, tgr)


def test_autocast_as_a_decorator_and_its_refusal():
    def run(lib):
        @lib.autocast("cpu")
        def f(x):
            return lib.is_autocast_enabled("cpu"), x * 2
        on, y = f(lib.tensor([1.5], dtype=lib.float64))
        return on, y.tolist(), f.__name__
    same(run)
    same(lambda lib: lib.autocast("cpu")(3))


@pytest.mark.parametrize("device", ["cpu", "cuda", "cuda:0", "mps", "xpu", "meta", "lazy",
                                    "hip", "hpu", "privateuseone", "gpu", "", 1, None])
def test_is_autocast_available(device):
    same(lambda lib: lib.amp.is_autocast_available(device))


@pytest.mark.parametrize("device", ["cpu", "cuda", "mps", "hip", "meta", "cuda:0", "gpu"])
def test_autocast_queries(device):
    same(lambda lib: str(lib.get_autocast_dtype(device)).split(".")[-1])
    same(lambda lib: lib.is_autocast_enabled(device))


def test_deprecated_cuda_and_cpu_spellings_warn_as_pytorchs():
    same(lambda lib: lib.cuda.amp.autocast(), region)
    same(lambda lib: lib.cuda.amp.autocast(enabled=False), region)
    same(lambda lib: lib.cpu.amp.autocast(), region)
    same(lambda lib: lib.cpu.amp.autocast(dtype=lib.float32), region)
    same(lambda lib: lib.cuda.amp.GradScaler().is_enabled())
    same(lambda lib: lib.cuda.amp.GradScaler(enabled=False).get_scale())
    same(lambda lib: lib.cpu.amp.GradScaler(init_scale=3.0).state_dict())
    same(lambda lib: lib.cuda.amp.amp_definitely_not_available())
    same(lambda lib: lib.cuda.amp.custom_fwd(lambda ctx, x: x).__name__)
    same(lambda lib: lib.cuda.amp.custom_bwd(lambda ctx, g: g).__name__)
    assert tg.cpu.is_available() == torch.cpu.is_available()
    assert tg.cpu.device_count() == torch.cpu.device_count()


def test_custom_fwd_and_bwd_in_a_function():
    def run(lib):
        class Square(lib.autograd.Function):
            @staticmethod
            @lib.amp.custom_fwd(device_type="cpu", cast_inputs=lib.float32)
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x, lib.is_autocast_enabled("cpu")

            @staticmethod
            @lib.amp.custom_bwd(device_type="cpu")
            def backward(ctx, g, _):
                (x,) = ctx.saved_tensors
                return 2 * x * g

        x = lib.tensor([1.0, -3.0], dtype=lib.float64, requires_grad=True)
        with lib.autocast("cpu"):
            y, on = Square.apply(x)
        y.sum().backward()
        return str(y.dtype).split(".")[-1], y.tolist(), on, x.grad.tolist()
    same(run)
    same(lambda lib: lib.amp.custom_fwd(device_type=1))
    same(lambda lib: lib.amp.custom_bwd(device_type=None))


# --- GradScaler -----------------------------------------------------------------------------

@pytest.mark.parametrize("args,kwargs", [
    ((), {}), (("cuda",), {"enabled": False}), (("cpu",), {}), (("cpu",), {"enabled": False}),
    (("cpu",), {"growth_factor": 1.0}), (("cpu",), {"backoff_factor": 1.0}),
    (("cpu",), {"init_scale": 3.1}), (("cuda",), {"growth_factor": 0.5})])
def test_grad_scaler_construction(args, kwargs):
    same(lambda lib: lib.amp.GradScaler(*args, **kwargs).state_dict())
    same(lambda lib: (lib.amp.GradScaler(*args, **kwargs).get_scale(),
                      lib.amp.GradScaler(*args, **kwargs).is_enabled()))
    same(lambda lib: lib.amp.GradScaler(*args, **kwargs).get_growth_factor())
    assert tg.GradScaler is tg.amp.GradScaler and tg.autocast is tg.amp.autocast


def test_disabled_scaler_passes_through():
    def run(lib):
        w = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.5)
        scaler = lib.amp.GradScaler(enabled=False)
        loss = (w * w).sum()
        scaled = scaler.scale(loss)
        scaled.backward()
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        return scaled is loss, w.tolist(), scaler.get_scale(), scaler.state_dict()
    same(run)


def _train(lib, scaler_kwargs, use_unscale, steps, init):
    rng = np.random.default_rng(3)
    xs = rng.integers(-4, 5, (steps, 4, 3)) / 4     # exact sums: the scaler's numbers show
    model = lib.nn.Linear(3, 2).double()
    with lib.no_grad():
        model.weight.copy_(lib.tensor(init[0], dtype=lib.float64))
        model.bias.copy_(lib.tensor(init[1], dtype=lib.float64))
    opt = lib.optim.Adam(model.parameters(), lr=0.01)
    scaler = lib.amp.GradScaler("cpu", **scaler_kwargs)
    trail = []
    for i in range(steps):
        opt.zero_grad()
        with lib.autocast("cpu"):
            out = model(lib.tensor(xs[i], dtype=lib.float64))
            loss = (out ** 2).mean()
            if i in (2, 5):
                loss = loss * float("inf")          # an overflow: the step is skipped
            if i == 6:
                loss = loss * float("nan")
        scaled = scaler.scale(loss)
        scaled.backward()
        if use_unscale:
            scaler.unscale_(opt)
            lib.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        ret = scaler.step(opt)
        scaler.update()
        trail.append((scaled.item(), ret, scaler.get_scale(), scaler._get_growth_tracker(),
                      model.weight.detach().numpy().copy(), model.bias.detach().numpy().copy(),
                      scaler.state_dict()))
    return trail


@pytest.mark.parametrize("kwargs", [
    {}, {"init_scale": 1024.0, "growth_interval": 2},
    {"init_scale": 3.1, "growth_factor": 1.7, "backoff_factor": 0.3, "growth_interval": 1},
    {"init_scale": 2.0 ** 127, "growth_interval": 1}])
@pytest.mark.parametrize("use_unscale", [False, True])
def test_grad_scaler_steps_are_pytorchs(kwargs, use_unscale):
    rng = np.random.default_rng(1)
    init = rng.integers(-8, 9, (2, 3)) / 8, rng.integers(-8, 9, 2) / 8
    ours = _train(tg, kwargs, use_unscale, 9, init)
    theirs = _train(torch, kwargs, use_unscale, 9, init)
    # the scale, its tracker and which steps are skipped exactly; the losses and parameters
    # to a few ulps (the layer's sums can round differently once the parameters moved), which
    # a gradient unscaled by anything but the float32 reciprocal would miss by far
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a[0], b[0], rtol=1e-14)
        assert a[1:4] == b[1:4]
        np.testing.assert_allclose(a[4], b[4], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(a[5], b[5], rtol=1e-13, atol=1e-15)
        assert a[6] == b[6]


def test_grad_scaler_misuse_is_pytorchs():
    def setup(lib):
        w = lib.tensor([1.0], dtype=lib.float64, requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1)
        scaler = lib.amp.GradScaler("cpu")
        return w, opt, scaler

    def unscale_twice(lib):
        w, opt, scaler = setup(lib)
        scaler.scale(w.sum()).backward()
        scaler.unscale_(opt)
        scaler.unscale_(opt)

    def step_twice(lib):
        w, opt, scaler = setup(lib)
        scaler.scale(w.sum()).backward()
        scaler.step(opt)
        scaler.step(opt)

    def unscale_after_step(lib):
        w, opt, scaler = setup(lib)
        scaler.scale(w.sum()).backward()
        scaler.step(opt)
        scaler.unscale_(opt)

    def closure(lib):
        w, opt, scaler = setup(lib)
        scaler.scale(w.sum()).backward()
        scaler.step(opt, closure=lambda: 0)

    def no_grads(lib):
        w, opt, scaler = setup(lib)
        scaler.scale(w.sum())
        scaler.step(opt)

    def new_scales(lib):
        w, opt, scaler = setup(lib)
        scaler.scale(w.sum()).backward()
        scaler.step(opt)
        scaler.update(12.3)
        first = scaler.get_scale()
        scaler.update(lib.tensor([0.7], dtype=lib.float64))
        return first, scaler.get_scale(), scaler.state_dict()

    def bad_new_scale(lib):
        w, opt, scaler = setup(lib)
        scaler.scale(w.sum())
        scaler.update(lib.tensor([1.0, 2.0], dtype=lib.float64))

    def scale_nested(lib):
        scaler = lib.amp.GradScaler("cpu", init_scale=4.0)
        t = lib.tensor([1.5], dtype=lib.float64)
        a, (b, c) = scaler.scale([t, (t * 2, t * 3)])
        g = scaler.scale(x for x in [t])
        return a.tolist(), b.tolist(), c.tolist(), [x.tolist() for x in g]

    for call in (unscale_twice, step_twice, unscale_after_step, closure, no_grads, new_scales,
                 bad_new_scale, scale_nested,
                 lambda lib: lib.amp.GradScaler("cpu").update(),
                 lambda lib: lib.amp.GradScaler("cpu").step(None),
                 lambda lib: lib.amp.GradScaler("cpu").scale([1.0]),
                 lambda lib: lib.amp.GradScaler("cpu").load_state_dict({}),
                 lambda lib: lib.amp.GradScaler(enabled=False).get_growth_factor()):
        same(call)


def test_grad_scaler_state_round_trips():
    def run(lib):
        w = lib.tensor([1.0], dtype=lib.float64, requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1)
        scaler = lib.amp.GradScaler("cpu", init_scale=256.0, growth_interval=3)
        scaler.scale(w.sum()).backward()
        scaler.step(opt)
        scaler.update()
        state = scaler.state_dict()
        copy = pickle.loads(pickle.dumps(scaler))
        other = lib.amp.GradScaler("cpu")
        other.load_state_dict(state)
        other.set_growth_factor(3.0)
        other.set_backoff_factor(0.25)
        other.set_growth_interval(7)
        return (state, copy.state_dict(), other.state_dict(), other.get_backoff_factor(),
                other.get_growth_interval())
    same(run)


# --- jit -----------------------------------------------------------------------------------

def _fn(x):
    return x * 2 + 1


@pytest.mark.parametrize("make", [
    lambda lib: 3, lambda lib: "abc", lambda lib: None, lambda lib: (lambda x: x),
    lambda lib: lib.nn.Linear, lambda lib: lib.autocast("cpu")(_fn)])
def test_script_refuses_what_pytorch_refuses(make):
    same(lambda lib: lib.jit.script(make(lib)), lambda r: None)


def test_script_and_trace_run_eagerly_with_pytorchs_numbers():
    x = np.array([[1.0, -2.0, 0.5]])

    def run(lib):
        lib.manual_seed(0)
        lin = lib.nn.Linear(3, 2).double()
        scripted = lib.jit.script(lin)
        traced = lib.jit.trace(lin, lib.tensor(x, dtype=lib.float64), check_trace=False)
        f = lib.jit.script(_fn)
        g = lib.jit.trace(_fn, (lib.tensor(x, dtype=lib.float64),), check_trace=False)
        t = lib.tensor(x, dtype=lib.float64)
        return (scripted(t).tolist(), traced(t).tolist(), f(t).tolist(), g(t * 3).tolist(),
                dict(lib.jit.script({"a": 1}).items()), list(lib.jit.script([1, 2])))

    def rounded(results):
        # the layer's product rounds as the BLAS kernel for this CPU adds: a last bit apart
        return [np.round(np.asarray(r), 14).tolist() for r in results[:4]] + list(results[4:])
    same(run, rounded)
    same(lambda lib: lib.jit.script(_fn, optimize=True)(lib.ones(1)).tolist())


def test_trace_runs_the_function_once_without_check():
    def run(lib):
        calls = []

        def f(x):
            calls.append(1)
            return x + 1
        lib.jit.trace(f, lib.ones(2, dtype=lib.float64), check_trace=False)
        lib.manual_seed(0)
        drop = lib.nn.Dropout(0.5)
        lib.jit.trace(drop, lib.ones(4, dtype=lib.float64), check_trace=False)
        return len(calls), lib.rand(2, dtype=lib.float64).tolist()
    (gres, _), (tres, _) = outcome(tg, run), outcome(torch, run)
    assert gres == tres


def test_trace_errors_are_pytorchs():
    same(lambda lib: lib.jit.trace(_fn), lambda r: None)
    same(lambda lib: lib.jit.trace(_fn, 3), lambda r: None)
    same(lambda lib: lib.jit.trace(3, lib.ones(2)), lambda r: None)
    same(lambda lib: lib.jit.trace(lib.nn.Linear(2, 1)), lambda r: None)
    same(lambda lib: lib.jit.trace_module(3, {}), lambda r: None)


def test_decorators_mark_and_return_the_function():
    def f(x):
        return x

    for name in ("ignore", "unused", "export"):
        same(lambda lib: (getattr(lib.jit, name)(f) is f, f._torchscript_modifier))
    same(lambda lib: lib.jit.ignore()(f)._torchscript_modifier)
    same(lambda lib: lib.jit.ignore(True)(f)._torchscript_modifier)
    same(lambda lib: lib.jit.ignore(drop_on_export=True)(f)._torchscript_modifier)
    same(lambda lib: lib.jit.ignore(3))
    same(lambda lib: lib.jit.ignore("x"))

    def prop(lib):
        p = lib.jit.unused(property(lambda self: 1))
        return p.fget._torchscript_modifier
    same(prop)


def test_plain_jit_names():
    same(lambda lib: (lib.jit.is_scripting(), lib.jit.is_tracing(),
                      lib.jit.annotate(list, [1]), lib.jit.Final, lib.jit.Final[int]))
    same(lambda lib: lib.jit.wait(lib.jit.fork(_fn, 3)))
    same(lambda lib: lib.jit.fork(_fn, 3).wait())
    same(lambda lib: lib.jit.onednn_fusion_enabled())
    same(lambda lib: lib.jit.script_if_tracing(_fn)(1))
    with tg.jit.optimized_execution(True), torch.jit.optimized_execution(True):
        pass


def test_freeze_and_optimize_for_inference_check_as_pytorch():
    same(lambda lib: lib.jit.freeze(lib.nn.Linear(2, 3)), lambda r: None)
    same(lambda lib: lib.jit.freeze(lib.jit.script(lib.nn.Linear(2, 3))), lambda r: None)
    # what comes back runs as the module did (PyTorch's is a new, frozen module)
    x = np.array([[0.5, -1.0]])
    for name in ("freeze", "optimize_for_inference"):
        def run(lib):
            lib.manual_seed(0)
            lin = lib.nn.Linear(2, 3).double()
            if name == "freeze":
                lin.eval()
            return getattr(lib.jit, name)(lib.jit.script(lin))(
                lib.tensor(x, dtype=lib.float64)).tolist()
        same(run)
    same(lambda lib: lib.jit.optimize_for_inference(lib.nn.Linear(2, 3)), lambda r: None)


def test_save_and_load_say_what_to_use(tmp_path):
    with pytest.warns(DeprecationWarning):
        scripted = tg.jit.script(tg.nn.Linear(2, 1))
    with pytest.raises(NotImplementedError, match="tapegrad.save"):
        tg.jit.save(scripted, str(tmp_path / "m.pt"))
    with pytest.raises(ValueError, match="does not exist"):
        tg.jit.load(str(tmp_path / "missing.pt"))
    with pytest.raises(ValueError, match="is a directory"):
        tg.jit.load(str(tmp_path))
    (tmp_path / "m.pt").write_bytes(b"x")
    with pytest.raises(NotImplementedError, match="tapegrad.load"):
        tg.jit.load(str(tmp_path / "m.pt"))
