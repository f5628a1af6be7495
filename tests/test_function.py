"""``tapegrad.autograd.Function``: user ops with a Python backward, against PyTorch's
``torch.autograd.Function`` (values, gradients, grad_fn names and inputs, errors), through
``create_graph``, hooks, ``compile`` (eager, with the reason) and ``vmap``."""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import tapegrad as tg
from oracle import message

torch = pytest.importorskip("torch")


def npy(t):
    return None if t is None else np.array(t.detach().numpy())


def functions(L):
    """The same Functions written against library L."""
    import importlib
    once_differentiable = importlib.import_module(
        L.__name__ + ".autograd.function").once_differentiable

    class Exp(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            r = x.exp()
            ctx.save_for_backward(r)
            return r

        @staticmethod
        def backward(ctx, g):
            (r,) = ctx.saved_tensors
            return g * r

    class ScaleAdd(L.autograd.Function):       # two outputs, a non-tensor argument
        @staticmethod
        def forward(ctx, x, k, y):
            ctx.k = k
            ctx.save_for_backward(x, y)
            return x * k + y, (x > 0).long()

        @staticmethod
        def backward(ctx, g, g_int):
            x, y = ctx.saved_tensors
            assert g_int is None or not g_int.any()
            gx = g * ctx.k if ctx.needs_input_grad[0] else None
            gy = g if ctx.needs_input_grad[2] else None
            return gx, None, gy

    class MatMul(L.autograd.Function):         # setup_context style
        @staticmethod
        def forward(x, w):
            return x @ w

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g @ w.t(), x.t() @ g

    class Split(L.autograd.Function):          # outputs without a gradient get None
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            out = None
            if g1 is not None:
                out = g1 * 2
            if g2 is not None:
                out = g2 * 3 if out is None else out + g2 * 3
            return out

    class Sign(L.autograd.Function):           # a non-differentiable output
        @staticmethod
        def forward(ctx, x):
            s = x.clamp(min=0)
            ctx.mark_non_differentiable(s)
            return s, x * 1

        @staticmethod
        def backward(ctx, g_sign, g):
            return g

    class Once(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    class Broadcast(L.autograd.Function):      # a gradient of the broadcast shape is summed
        @staticmethod
        def forward(ctx, x, b):
            return x + b

        @staticmethod
        def backward(ctx, g):
            return g, g

    class Double(L.autograd.Function):         # changes its input in place (mark_dirty)
        @staticmethod
        def forward(ctx, a):
            a.mul_(2)
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def backward(ctx, g):
            return 2 * g

    return dict(Exp=Exp, ScaleAdd=ScaleAdd, MatMul=MatMul, Split=Split, Sign=Sign,
                Once=Once, Broadcast=Broadcast, Double=Double)


FNS = {L: functions(L) for L in (tg, torch)}


def run(program):
    """program(L, fns) in both libraries; returns both results."""
    return [program(L, FNS[L]) for L in (tg, torch)]


def same(a, b):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
        return
    if a is None or b is None:
        assert a is None and b is None
        return
    if isinstance(a, str):
        assert a == b
        return
    np.testing.assert_allclose(npy(a), npy(b), rtol=1e-14, atol=1e-15)


def test_values_gradients_and_grad_fn():
    def program(L, fns):
        x = L.tensor([0.5, -1.0, 2.0], requires_grad=True)
        e = fns["Exp"].apply(x)
        (e * e).sum().backward()
        return [e, x.grad, e.grad_fn.name(), type(e.grad_fn).__name__,
                str(len(e.grad_fn.next_functions)),
                type(e.grad_fn.next_functions[0][0]).__name__]
    a, b = run(program)
    same(a, b)
    assert repr(a[0]) == repr(b[0])    # tensor([...], grad_fn=<ExpBackward>)


def test_node_repr_names_its_module():
    # <torch.autograd.function.ExpBackward object at 0x...>, a Python class's repr
    def program(L, fns):
        x = L.tensor([0.5], requires_grad=True)
        text = repr(fns["Exp"].apply(x).grad_fn)
        return [text[:text.index(" at 0x")].replace("torch", "tapegrad")]
    a, b = run(program)
    assert a == b == ["<tapegrad.autograd.function.ExpBackward object"]


def test_two_outputs_a_number_argument_and_needs_input_grad():
    def program(L, fns):
        x = L.tensor([0.5, -1.0, 2.0], requires_grad=True)
        y = L.tensor([1.0, 2.0, 3.0])
        out, signs = fns["ScaleAdd"].apply(x, 3.0, y)
        (out * out).sum().backward()
        nexts = [None if n is None else type(n).__name__ for n, _ in out.grad_fn.next_functions]
        return [out, signs, x.grad, str(signs.requires_grad), str(signs.dtype).split(".")[1],
                str(nexts)]
    same(*run(program))


def test_setup_context_style():
    def program(L, fns):
        X = L.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        W = L.tensor([[0.5], [-1.0]], requires_grad=True)
        fns["MatMul"].apply(X, W).pow(2).sum().backward()
        return [X.grad, W.grad]
    same(*run(program))


@pytest.mark.parametrize("use", [0, 1, 2])
def test_unmaterialized_gradients_are_none(use):
    def program(L, fns):
        x = L.tensor([1.0, 2.0], requires_grad=True)
        p, q = fns["Split"].apply(x)
        loss = [p.sum(), q.sum(), (p * q).sum()][use]
        loss.backward()
        return [x.grad]
    same(*run(program))


def test_non_differentiable_output():
    def program(L, fns):
        x = L.tensor([-2.0, 3.0], requires_grad=True)
        s, y = fns["Sign"].apply(x)
        (y * 5).sum().backward()
        return [s, str(s.requires_grad), str(s.grad_fn), x.grad]
    same(*run(program))


def test_gradient_of_a_broadcast_shape_is_summed_to_the_input():
    def program(L, fns):
        x = L.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        b = L.tensor([10.0, 20.0], requires_grad=True)
        (fns["Broadcast"].apply(x, b) ** 2).sum().backward()
        return [x.grad, b.grad]
    same(*run(program))


def test_create_graph_differentiates_the_backward_again():
    def program(L, fns):
        x = L.tensor([0.5, -1.0, 2.0], requires_grad=True)
        e = fns["Exp"].apply(x * x)
        (gx,) = L.autograd.grad(e.sum(), x, create_graph=True)
        (ggx,) = L.autograd.grad((gx * gx).sum(), x)
        return [gx, ggx, str(gx.requires_grad)]
    same(*run(program))


def test_once_differentiable_backward_gives_first_order():
    def program(L, fns):
        x = L.tensor([0.5, 2.0], requires_grad=True)
        fns["Once"].apply(x).sum().backward()
        return [x.grad]
    same(*run(program))


def test_hooks_on_outputs_and_a_retained_graph():
    def program(L, fns):
        x = L.tensor([0.5, 2.0], requires_grad=True)
        e = fns["Exp"].apply(x)
        e.register_hook(lambda g: g * 10)
        loss = (e * 3).sum()
        loss.backward(retain_graph=True)
        first = x.grad.clone()
        loss.backward()
        return [first, x.grad]
    same(*run(program))


@pytest.mark.parametrize("case", ["count", "version", "shape", "leaf_dirty"])
def test_errors_as_in_pytorch(case):
    def program(L, fns):
        x = L.tensor([1.0, 2.0], requires_grad=True)
        if case == "count":
            class Bad(L.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    return a + b

                @staticmethod
                def backward(ctx, g):
                    return g
            Bad.apply(x, x).sum().backward()
        elif case == "version":
            e = fns["Exp"].apply(x * 1)
            with L.no_grad():
                e.mul_(2)
            e.sum().backward()
        elif case == "shape":
            class Wrong(L.autograd.Function):
                @staticmethod
                def forward(ctx, a):
                    return a * 1

                @staticmethod
                def backward(ctx, g):
                    return L.ones(3)
            Wrong.apply(x).sum().backward()
        else:
            fns["Double"].apply(x)
    errors = []
    for L in (tg, torch):
        with pytest.raises(RuntimeError) as e:
            program(L, FNS[L])
        errors.append(message(e.value).split(" Hint:")[0])
    assert errors[0] == errors[1]


def test_mark_dirty_on_an_intermediate():
    def program(L, fns):
        x = L.tensor([1.0, 2.0], requires_grad=True)
        y = x * 1
        z = fns["Double"].apply(y)
        (z * z).sum().backward()
        return [z, y, str(z is y), str(y._version), x.grad]
    same(*run(program))


def test_no_grad_and_inputs_without_grad_record_nothing():
    for L in (tg, torch):
        x = L.tensor([1.0, 2.0])
        assert FNS[L]["Exp"].apply(x).grad_fn is None
        w = L.tensor([1.0, 2.0], requires_grad=True)
        with L.no_grad():
            assert not FNS[L]["Exp"].apply(w).requires_grad


def test_compile_runs_it_eagerly_and_says_why():
    Exp = FNS[tg]["Exp"]

    def f(x):
        return (Exp.apply(x) * x).sum()
    compiled = tg.compile(f)
    for k in range(3):
        results = []
        for fn in (f, compiled):
            x = tg.tensor([0.5, 1.0 + k], requires_grad=True)
            v = fn(x)
            v.backward()
            results.append((v.item(), npy(x.grad)))
        assert results[0][0] == results[1][0]
        np.testing.assert_array_equal(results[0][1], results[1][1])
    assert compiled.stats.replays == 0
    assert any("autograd.Function Exp" in why for why, _ in compiled.stats.eager_reasons)


def test_vmap_of_a_gradient_through_it():
    Exp = FNS[tg]["Exp"]

    def f(x):
        return (Exp.apply(x) * x).sum()
    xs = tg.tensor([[0.5, 1.0], [1.0, 2.0]])
    got = tg.vmap(tg.func.grad(f))(xs)
    want = np.exp(npy(xs)) * (1 + npy(xs))
    np.testing.assert_allclose(npy(got), want, rtol=1e-14)


@pytest.mark.parametrize("transform", [
    lambda f, x: tg.hessian(f)(x),
    lambda f, x: tg.autograd.functional.jacobian(f, x),
    lambda f, x: tg.func.jacrev(f)(x),
])
def test_reverse_and_second_order_transforms_refuse_it_by_name(transform):
    Exp = FNS[tg]["Exp"]
    with pytest.raises(RuntimeError, match=r"autograd\.Function \(Exp\) are not supported yet"):
        transform(lambda x: Exp.apply(x).sum(), tg.tensor([0.5, 1.0]))


def _with_jvp(L):
    class SinScale(L.autograd.Function):
        generate_vmap_rule = True   # (PyTorch's jacfwd vmaps over the seeds)

        @staticmethod
        def forward(x, k):
            return x.sin() * k, x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, k = inputs
            ctx.save_for_forward(x)
            ctx.k = k

        @staticmethod
        def backward(ctx, g, h):
            (x,) = ctx.saved_tensors
            return x.cos() * ctx.k * g + 2 * x * h, None

        @staticmethod
        def jvp(ctx, tx, tk):
            (x,) = ctx.saved_tensors
            return x.cos() * ctx.k * tx, 2 * x * tx
    return SinScale


# (torch.func's first use warns that torch.jit.script is deprecated)
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("transform", ["func.jvp", "jacfwd", "tapegrad.jvp"])
def test_forward_mode_runs_its_jvp_as_pytorch_does(transform):
    x0, t0 = np.array([0.3, -1.2, 2.0]), np.array([1.0, 0.5, -2.0])
    results = {}
    for L in (tg, torch):
        SinScale = _with_jvp(L)

        def f(x):
            a, b = SinScale.apply(x.exp() * 0.5, 3.0)
            return (a * x, b + a)

        x, t = L.tensor(x0, dtype=L.float64), L.tensor(t0, dtype=L.float64)
        if transform == "func.jvp":
            results[L] = [npy(v) for part in L.func.jvp(f, (x,), (t,)) for v in part]
        elif transform == "jacfwd":
            results[L] = [npy(L.func.jacfwd(lambda v: f(v)[1])(x))]
        elif L is tg:
            results[L] = [npy(v) for v in tg.jvp(lambda v: f(v)[0], x, t)]
        else:
            results[L] = [npy(v) for v in torch.func.jvp(lambda v: f(v)[0], (x,), (t,))]
    for ours, theirs in zip(results[tg], results[torch]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-14, atol=1e-15)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_forward_mode_without_a_jvp_raises_pytorchs_error():
    for L in (tg, torch):
        class Exp(L.autograd.Function):   # (torch.func wants the setup_context style)
            @staticmethod
            def forward(x):
                return x.exp()

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.save_for_backward(output)

            @staticmethod
            def backward(ctx, g):
                return g * ctx.saved_tensors[0]

        with pytest.raises(NotImplementedError, match="You must implement the jvp function "
                                                      "for custom autograd.Function to use "
                                                      "it with forward mode AD."):
            L.func.jvp(lambda x: Exp.apply(x), (L.ones(2),), (L.ones(2),))


# ---------------------------------------------------------------------------------------------
# A Function inside random compositions: against PyTorch and central differences
# ---------------------------------------------------------------------------------------------
def sin_function(L):
    class Sin(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos()
    return Sin


SIN = {L: sin_function(L) for L in (tg, torch)}
shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


@given(shape=shapes, data=st.data(), where=st.sampled_from(["first", "middle", "last"]))
def test_a_function_in_a_composition_matches_pytorch_and_differences(shape, data, where):
    x0 = data.draw(hnp.arrays(np.float64, shape,
                              elements=st.floats(-3, 3, allow_nan=False, width=64)))
    b0 = data.draw(hnp.arrays(np.float64, shape[-1:] if shape else (),
                              elements=st.floats(-2, 2, allow_nan=False, width=64)))

    def f(L, x, b):
        Sin = SIN[L]
        h = Sin.apply(x) if where == "first" else x.tanh()
        h = h * b + (Sin.apply(h) if where == "middle" else h.exp())
        return (Sin.apply(h) if where == "last" else h * h).sum()

    grads = []
    for L in (tg, torch):
        x = L.tensor(x0, requires_grad=True)
        b = L.tensor(b0, requires_grad=True)
        y = f(L, x, b)
        y.backward()
        grads.append((y.item(), npy(x.grad), npy(b.grad)))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-13, atol=1e-13)
    for g, h in zip(grads[0][1:], grads[1][1:]):
        np.testing.assert_allclose(g, h, rtol=1e-12, atol=1e-12)
    # central differences on x
    eps = 1e-6
    flat = x0.reshape(-1)
    for i in range(min(flat.size, 3)):
        up, down = flat.copy(), flat.copy()
        up[i] += eps
        down[i] -= eps
        fd = (f(tg, tg.tensor(up.reshape(shape)), tg.tensor(b0)).item()
              - f(tg, tg.tensor(down.reshape(shape)), tg.tensor(b0)).item()) / (2 * eps)
        assert abs(fd - grads[0][1].reshape(-1)[i]) <= 1e-5 * (1 + abs(fd))


@pytest.mark.parametrize("saves", [True, False])
def test_a_second_backward_without_retain_graph(saves):
    outcomes = []
    for L in (tg, torch):
        class Twice(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                if saves:
                    ctx.save_for_backward(x)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                if saves:
                    ctx.saved_tensors
                return g * 2
        x = L.tensor([1.0, 2.0], requires_grad=True)
        y = Twice.apply(x)
        y.sum().backward()
        try:
            y.sum().backward()
            outcomes.append(npy(x.grad).tolist())
        except RuntimeError as e:
            outcomes.append(message(e))
    assert outcomes[0] == outcomes[1]
