"""tapegrad.func and tapegrad.autograd.functional against torch.func and
torch.autograd.functional: values, result structures (tensors, tuples, lists, dicts) and
shapes, on several functions including tuple and dict inputs and several outputs;
compositions (hessian, grad of grad, vmap of grad, grad of vmap); results that must stay
differentiable (create_graph, closed-over parameters); errors worded as PyTorch's.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import tapegrad as tg
import tapegrad.autograd.functional as AF
import tapegrad.func as TGF

torch = pytest.importorskip("torch")
import torch.autograd.functional as TAF  # noqa: E402
import torch.func as TF  # noqa: E402

RTOL = 1e-12
# PyTorch's forward-mode AD scripts a helper with torch.jit on first use, which warns
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")
FUNC = {tg: TGF, torch: TF}
AUTOGRAD_FUNCTIONAL = {tg: AF, torch: TAF}


def tree(x):
    """Results of either library as nested Python: tensors as ("T", shape, values)."""
    if isinstance(x, (tg.Tensor, torch.Tensor)):
        return ("T", tuple(x.shape), x.detach().numpy().copy())
    if isinstance(x, dict):
        return {k: tree(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(tree(v) for v in x)
    return x


def assert_same(actual, expected, rtol=RTOL):
    """Equal structure (container types and lengths, dict keys, shapes) and values, to
    ``rtol`` relative to the largest entry of each tensor, or absolutely where the entries
    are below 1: inputs are of order 1, and a second derivative near zero (3e-14 at
    x = 8e-15) is a cancellation of terms of order 1, whose rounding is 1e-16 absolute."""
    a, e = tree(actual), tree(expected)

    def walk(a, e, path):
        assert type(a) is type(e), f"{path}: {type(a).__name__} != {type(e).__name__}"
        if isinstance(a, dict):
            assert a.keys() == e.keys(), path
            for k in a:
                walk(a[k], e[k], f"{path}[{k!r}]")
        elif isinstance(a, list) or (isinstance(a, tuple) and a[:1] != ("T",)):
            assert len(a) == len(e), path
            for i, (u, v) in enumerate(zip(a, e)):
                walk(u, v, f"{path}[{i}]")
        elif isinstance(a, tuple):
            assert a[1] == e[1], f"{path}: shape {a[1]} != {e[1]}"
            scale = max(float(np.max(np.abs(e[2]), initial=0.0)), 1.0)
            np.testing.assert_allclose(a[2], e[2], rtol=0, atol=rtol * scale, err_msg=path)
        else:
            assert a == e, path
    walk(a, e, "result")


def both(run, *arrays, **kwargs):
    """``run(lib, *tensors)`` for both libraries, the arrays made tensors of each."""
    return [run(lib, *[lib.tensor(a) for a in arrays], **kwargs) for lib in (tg, torch)]


def same_error(run):
    """``run(lib)`` raises the same error type and text in both libraries (``torch.`` and
    ``tapegrad.`` aside)."""
    errors = []
    for lib in (tg, torch):
        with pytest.raises(Exception) as info:
            run(lib)
        errors.append((type(info.value).__name__,
                       str(info.value).replace("tapegrad.", "torch.")))
    assert errors[0] == errors[1]


# ---------------------------------------------------------------------------------------------
# Functions: scalar-valued of one or two tensors, tensor- and tuple-valued
# ---------------------------------------------------------------------------------------------
def scalar_of_two(x, y):
    return (x.sin() * y).sum() + (x * x).sum() * y.tanh().sum()


def scalar_of_one(x):
    return (x.exp() * x.cos()).sum() + (x ** 3).sum()


def tuple_of_two(x, y):
    return (x.sin() * y, (x * x).sum() * y.exp())


def matrix_fn(w, x):
    return (x @ w).tanh()


vectors = hnp.arrays(np.float64, st.integers(1, 4), elements=st.floats(-2, 2))


def pair_of_shapes():
    return st.integers(1, 4).flatmap(lambda n: st.tuples(
        hnp.arrays(np.float64, (n,), elements=st.floats(-2, 2)),
        hnp.arrays(np.float64, (2, n), elements=st.floats(-2, 2))))


# ---------------------------------------------------------------------------------------------
# torch.func: grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argnums", [0, 1, -1, (0, 1), (1, 0)])
@given(arrays=pair_of_shapes())
def test_grad_matches_torch(argnums, arrays):
    ours, theirs = both(lambda lib, x, y: FUNC[lib].grad(scalar_of_two, argnums)(x, y), *arrays)
    assert_same(ours, theirs)


@given(arrays=pair_of_shapes())
def test_grad_and_value_with_aux_matches_torch(arrays):
    def f(x, y):
        value = scalar_of_two(x, y)
        return value, {"twice": value * 2, "x": x}
    ours, theirs = both(lambda lib, x, y: FUNC[lib].grad_and_value(f, (0, 1), has_aux=True)(
        x, y), *arrays)
    assert_same(ours, theirs)
    assert not ours[1][1]["twice"].requires_grad and not ours[1][0].requires_grad


def test_grad_of_dict_of_parameters_and_keyword_arguments():
    rng = np.random.default_rng(0)
    w, b, x = rng.standard_normal((3, 2)), rng.standard_normal(2), rng.standard_normal((5, 3))

    def loss(params, x, scale=1.0):
        return ((x @ params["w"] + params["b"]).tanh() ** 2).mean() * scale

    def run(lib):
        params = {"w": lib.tensor(w), "b": lib.tensor(b)}
        return FUNC[lib].grad(loss)(params, lib.tensor(x), scale=3.0)
    assert_same(run(tg), run(torch))


@given(x=vectors)
def test_grad_of_zero_d_and_grad_of_grad(x):
    def f(t):
        return (t.sin() * t).sum()
    for k in range(len(x)):
        ours, theirs = both(lambda lib, t: FUNC[lib].grad(FUNC[lib].grad(
            lambda s: s.sin() * s * s))(t[k]), x)
        assert_same(ours, theirs)
    ours, theirs = both(lambda lib, t: FUNC[lib].grad(lambda s: FUNC[lib].grad(f)(s).sum())(t),
                        x)
    assert_same(ours, theirs)


@given(arrays=pair_of_shapes())
def test_vjp_matches_torch(arrays):
    x, y = arrays

    def run(lib, x, y):
        out, fn = FUNC[lib].vjp(tuple_of_two, x, y)
        cot = (lib.ones_like(out[0]) * 0.5,
               lib.tensor(np.arange(y.numel(), dtype=float).reshape(tuple(y.shape))))
        return out, fn(cot), fn(cot)   # a vjp function may be called again
    ours, theirs = both(run, x, y)
    assert_same(ours, theirs)


def test_vjp_with_dict_output_and_aux():
    def f(x):
        return {"a": x.sin(), "b": (x * x).sum()}, x.cos()

    def run(lib, x):
        out, fn, aux = FUNC[lib].vjp(f, x, has_aux=True)
        return out, fn({"a": lib.ones(3), "b": lib.tensor(2.0)}), aux
    ours, theirs = both(run, np.array([0.1, -0.7, 1.3]))
    assert_same(ours, theirs)


@given(arrays=pair_of_shapes())
def test_jvp_matches_torch(arrays):
    x, y = arrays

    def run(lib, x, y):
        return FUNC[lib].jvp(tuple_of_two, (x, y), (x.cos(), y * 0.5 + 1.0))
    ours, theirs = both(run, x, y)
    assert_same(ours, theirs)


def test_jvp_with_aux_and_strict():
    def f(x):
        return x.sin(), x * 3

    def run(lib, x):
        return FUNC[lib].jvp(f, (x,), (lib.ones_like(x),), has_aux=True)
    ours, theirs = both(run, np.array([0.3, 0.9]))
    assert_same(ours, theirs)
    same_error(lambda lib: FUNC[lib].jvp(lambda x: lib.ones(2), (lib.ones(2),),
                                         (lib.ones(2),), strict=True))


@pytest.mark.parametrize("name", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
@given(arrays=pair_of_shapes())
def test_jacobians_match_torch(name, argnums, arrays):
    for fn in (tuple_of_two, scalar_of_two, lambda x, y: {"p": x * y, "q": (x,)}):
        ours, theirs = both(lambda lib, x, y: getattr(FUNC[lib], name)(fn, argnums)(x, y),
                            *arrays)
        assert_same(ours, theirs)


@pytest.mark.parametrize("name", ["jacrev", "jacfwd"])
def test_jacobian_with_aux_and_zero_d_input(name):
    def f(x, w):
        return (x * w).sin(), {"w": w}
    ours, theirs = both(lambda lib, x, w: getattr(FUNC[lib], name)(f, has_aux=True)(x, w),
                        np.array(0.7), np.array([1.0, -2.0]))
    assert_same(ours, theirs)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
@given(arrays=pair_of_shapes())
def test_hessian_matches_torch(argnums, arrays):
    for fn in (scalar_of_two, lambda x, y: (x * y).sin().sum(0)):
        ours, theirs = both(lambda lib, x, y: FUNC[lib].hessian(fn, argnums)(x, y), *arrays)
        assert_same(ours, theirs)


@pytest.mark.parametrize("outer, inner", [("jacrev", "jacrev"), ("jacfwd", "jacfwd"),
                                          ("jacrev", "jacfwd")])
def test_nested_jacobians_match_torch(outer, inner):
    def run(lib, x):
        F_ = FUNC[lib]
        return getattr(F_, outer)(getattr(F_, inner)(lambda t: (t.sin() * t.sum()).exp()))(x)
    ours, theirs = both(run, np.array([0.2, -0.4, 0.9]))
    assert_same(ours, theirs)


# ---------------------------------------------------------------------------------------------
# Results that must stay differentiable: closed-over parameters, outer transforms
# ---------------------------------------------------------------------------------------------
def test_gradient_of_a_closure_stays_differentiable_for_its_parameters():
    """grad(f)(x) where f reads a parameter W: a loss made of that gradient (a gradient
    penalty) gives W a gradient, as in PyTorch."""
    rng = np.random.default_rng(3)
    w0, x0 = rng.standard_normal((3, 3)), rng.standard_normal(3)
    results = []
    for lib in (tg, torch):
        w = lib.tensor(w0, requires_grad=True)
        g = FUNC[lib].grad(lambda x: (x @ w).tanh().sum())(lib.tensor(x0))
        assert g.requires_grad
        (g ** 2).sum().backward()
        results.append((g, w.grad))
    assert_same(*results)


@pytest.mark.parametrize("transform", [
    lambda F_, f, x: F_.jacrev(f)(x), lambda F_, f, x: F_.jacfwd(f)(x),
    lambda F_, f, x: F_.jvp(f, (x,), (x.cos(),))[1], lambda F_, f, x: F_.vjp(f, x)[1](x)[0],
    lambda F_, f, x: F_.hessian(lambda t: f(t).sum())(x)],
    ids=["jacrev", "jacfwd", "jvp", "vjp", "hessian"])
def test_transforms_of_a_closure_stay_differentiable(transform):
    rng = np.random.default_rng(10)
    w0, x0 = rng.standard_normal((3, 3)), rng.standard_normal(3)
    results = []
    for lib in (tg, torch):
        w = lib.tensor(w0, requires_grad=True)
        out = transform(FUNC[lib], lambda x: (x @ w).sin() * x, lib.tensor(x0))
        (out * out).sum().backward()
        results.append((out, w.grad))
    assert_same(*results)


def test_vmap_of_a_closure_stays_differentiable_for_its_parameters():
    rng = np.random.default_rng(4)
    w0, xs = rng.standard_normal((3, 2)), rng.standard_normal((5, 3))
    results = []
    for lib in (tg, torch):
        w = lib.tensor(w0, requires_grad=True)
        out = FUNC[lib].vmap(lambda x: (x @ w).sin())(lib.tensor(xs))
        out.sum().backward()
        results.append((out, w.grad))
    assert_same(*results)


def test_grad_of_vmap_matches_torch():
    def run(lib, x):
        F_ = FUNC[lib]
        return F_.grad(lambda t: F_.vmap(lambda r: (r.sin() * r).sum())(t).sum())(x)
    ours, theirs = both(run, np.arange(6.0).reshape(3, 2) / 5)
    assert_same(ours, theirs)


def test_transform_results_of_plain_inputs_are_constants():
    x = tg.tensor([0.5, 1.5])
    for result in (TGF.grad(scalar_of_one)(x), TGF.jacrev(tuple_of_two)(x, x)[0],
                   TGF.jvp(scalar_of_one, (x,), (x,))[1], TGF.hessian(scalar_of_one)(x)):
        assert not result.requires_grad and result.grad_fn is None


# ---------------------------------------------------------------------------------------------
# vmap
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("in_dims, out_dims", [(0, 0), (1, 0), (-1, 1), ((0, None), 0),
                                               ((1, None), -1), (({"a": 0, "b": None},), 0)])
def test_vmap_dims_match_torch(in_dims, out_dims):
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))

    def run(lib, x, y):
        if isinstance(in_dims, tuple) and isinstance(in_dims[0], dict):
            return FUNC[lib].vmap(lambda d: (d["a"] * d["b"]).sin(), in_dims, out_dims)(
                {"a": x, "b": y[0]})
        if isinstance(in_dims, tuple):
            return FUNC[lib].vmap(lambda a, b: a.sin() * b.sum(), in_dims, out_dims)(x, y)
        return FUNC[lib].vmap(lambda a: (a.exp() * a.sum()), in_dims, out_dims)(x)
    ours, theirs = both(run, x, y)
    assert_same(ours, theirs)


def test_vmap_of_several_outputs_and_out_dims_none():
    def f(a, b):
        return {"s": (a * b).sum(), "p": (a.sin(), b * 2)}, 3.0

    def run(lib, x, y):
        return FUNC[lib].vmap(f, out_dims=({"s": 0, "p": (1, 0)}, None))(x, y)
    ours, theirs = both(run, np.arange(6.0).reshape(3, 2), np.ones((3, 2)))
    assert_same(ours, theirs)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_vmap_of_grad_gives_per_sample_gradients(argnums):
    rng = np.random.default_rng(6)
    xs, ys = rng.standard_normal((7, 3)), rng.standard_normal((7, 3))

    def run(lib, xs, ys):
        return FUNC[lib].vmap(FUNC[lib].grad(scalar_of_two, argnums))(xs, ys)
    ours, theirs = both(run, xs, ys)
    assert_same(ours, theirs)


def test_vmap_of_jacrev_and_of_vmap():
    def run(lib, xs):
        F_ = FUNC[lib]
        return (F_.vmap(F_.jacrev(lambda t: t.sin() * t.sum()))(xs),
                F_.vmap(F_.vmap(lambda t: t.exp() * 2))(xs))
    ours, theirs = both(run, np.arange(12.0).reshape(4, 3) / 7)
    assert_same(ours, theirs)


def test_vmap_replays_one_tape_for_the_batch():
    """A function of float tensors mapped along dim 0 is recorded once and replayed in
    compiled code: the second call replays, with the same numbers as PyTorch."""
    f = TGF.vmap(lambda a, b: (a.sin() * b).sum() + a.exp())
    rng = np.random.default_rng(7)
    for _ in range(2):
        x, y = rng.standard_normal((6, 3)), rng.standard_normal((6, 3))
        ours = f(tg.tensor(x), tg.tensor(y))
        theirs = TF.vmap(lambda a, b: (a.sin() * b).sum() + a.exp())(torch.tensor(x),
                                                                    torch.tensor(y))
        assert_same(ours, theirs)
    assert f.compiled.stats.replays >= 1 and f.compiled.stats.records == 1


def test_top_level_vmap_is_torch_vmap():
    x = np.arange(6.0).reshape(2, 3)
    assert_same(tg.vmap(lambda a: a.sum(0), in_dims=1)(tg.tensor(x)),
                torch.vmap(lambda a: a.sum(0), in_dims=1)(torch.tensor(x)))


@pytest.mark.parametrize("case", [
    lambda lib, F_: F_.vmap(lambda x: x * 2)(3.0),
    lambda lib, F_: F_.vmap(lambda x: x * 2, in_dims=None)(lib.ones(3)),
    lambda lib, F_: F_.vmap(lambda x: x * 2, in_dims=0.5)(lib.ones(3)),
    lambda lib, F_: F_.vmap(lambda x, y: x * y)(lib.ones(3), lib.ones(4)),
    lambda lib, F_: F_.vmap(lambda x: x * 2, in_dims=2)(lib.ones(3)),
    lambda lib, F_: F_.vmap(lambda x, y: x * y, in_dims=(None, None))(lib.ones(2), lib.ones(2)),
    lambda lib, F_: F_.vmap(lambda x: 3.0)(lib.ones(3)),
    lambda lib, F_: F_.vmap(lambda x: (x, lib.ones(2) * x.sum()), out_dims=(0, None))(
        lib.arange(6.0).reshape(3, 2)),
    lambda lib, F_: F_.vmap(lambda x: x, randomness="x")(lib.ones(3)),
], ids=["float-input", "in-dims-none", "in-dims-float", "sizes", "dim-range", "nothing-mapped",
        "float-output", "batched-out-dim-none", "randomness"])
def test_vmap_errors_match_torch(case):
    same_error(lambda lib: case(lib, FUNC[lib]))


# ---------------------------------------------------------------------------------------------
# Errors of the other transforms
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", [
    lambda lib, F_: F_.grad(lambda x: x * 2)(lib.ones(3)),
    lambda lib, F_: F_.grad(lambda x: 3.0)(lib.ones(3)),
    lambda lib, F_: F_.grad(lambda x: x.sum(), has_aux=True)(lib.ones(3)),
    lambda lib, F_: F_.grad(lambda x: x.sum(), argnums=2)(lib.ones(3)),
    lambda lib, F_: F_.grad(lambda x: x.sum(), argnums=(0, 0))(lib.ones(3)),
    lambda lib, F_: F_.grad(lambda x: x.sum(), argnums=())(lib.ones(3)),
    lambda lib, F_: F_.grad(lambda x: x.sum(), argnums=1.0)(lib.ones(3)),
    lambda lib, F_: F_.grad(lambda x: x.sum())(3.0),
    lambda lib, F_: F_.grad(lambda x: x.sum())(lib.arange(3)),
    lambda lib, F_: F_.jacrev(lambda x: 3.0)(lib.ones(3)),
    lambda lib, F_: F_.jacrev(lambda x: x, chunk_size=0)(lib.ones(3)),
    lambda lib, F_: F_.jvp(lambda x: x * 2, lib.ones(3), lib.ones(3)),
    lambda lib, F_: F_.jvp(lambda x: x * 2, (lib.ones(3),), (lib.ones(2),)),
    lambda lib, F_: F_.jvp(lambda x: x * 2, (), ()),
    lambda lib, F_: F_.vjp(lambda x: x * 2, lib.ones(3))[1](lib.ones(2)),
], ids=["non-scalar", "float-output", "no-aux", "argnum-range", "argnums-repeat",
        "argnums-empty", "argnums-float", "float-input", "int-input", "jacrev-float-output",
        "chunk-size", "jvp-not-tuple", "jvp-size", "jvp-empty", "vjp-shape"])
def test_errors_match_torch(case):
    same_error(lambda lib: case(lib, FUNC[lib]))


# ---------------------------------------------------------------------------------------------
# functional_call
# ---------------------------------------------------------------------------------------------
def _model(lib):
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))
    rng = np.random.default_rng(8)
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape))))
    return model


def test_functional_call_and_per_sample_gradients_match_torch():
    rng = np.random.default_rng(9)
    xs, ys = rng.standard_normal((6, 3)), rng.standard_normal((6, 2))
    replacement = {name: rng.standard_normal(tuple(p.shape))
                   for name, p in _model(tg).named_parameters()}
    results = []
    for lib in (tg, torch):
        F_ = FUNC[lib]
        model = _model(lib)
        params = {k: lib.tensor(v) for k, v in replacement.items()}
        out = F_.functional_call(model, params, (lib.tensor(xs),))

        def loss(params, x, y, model=model, F_=F_):
            pred = F_.functional_call(model, params, (x.unsqueeze(0),))
            return ((pred - y.unsqueeze(0)) ** 2).mean()
        per_sample = F_.vmap(F_.grad(loss), in_dims=(None, 0, 0))(params, lib.tensor(xs),
                                                                  lib.tensor(ys))
        untouched = [p.detach().numpy().copy() for p in model.parameters()]
        results.append((out, per_sample, untouched))
    assert_same(results[0][:2], results[1][:2])
    for a, b in zip(results[0][2], results[1][2]):
        np.testing.assert_array_equal(a, b)   # the model's own parameters are back


def test_functional_call_options_match_torch():
    def run(lib, **kwargs):
        return FUNC[lib].functional_call(_model(lib), {"0.weight": lib.zeros(4, 3)},
                                         lib.ones(1, 3), **kwargs)   # args not in a tuple
    assert_same(run(tg), run(torch))
    same_error(lambda lib: run(lib, strict=True))
    same_error(lambda lib: FUNC[lib].functional_call(
        _model(lib), ({"0.bias": lib.zeros(4)}, {"0.bias": lib.ones(4)}), (lib.ones(1, 3),)))
    # a name that is no parameter or buffer is an attribute for the call, then goes away
    model = _model(tg)
    assert_same(TGF.functional_call(model, {"extra": tg.ones(1)}, (tg.ones(1, 3),)),
                _model(tg)(tg.ones(1, 3)))
    assert not hasattr(model, "extra")


def _tied(lib):
    model = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.Linear(2, 2))
    with lib.no_grad():
        model[0].weight.copy_(lib.tensor([[1.0, 2.0], [3.0, 4.0]]))
        model[0].bias.copy_(lib.tensor([0.5, -0.5]))
        model[1].bias.copy_(lib.tensor([1.0, 2.0]))
    model[1].weight = model[0].weight
    return model


@pytest.mark.parametrize("tie_weights", [True, False])
def test_functional_call_with_tied_weights_matches_torch(tie_weights):
    ours, theirs = (FUNC[lib].functional_call(_tied(lib), {"0.weight": lib.eye(2) * 2},
                                              (lib.tensor([[1.0, -1.0]]),),
                                              tie_weights=tie_weights) for lib in (tg, torch))
    assert_same(ours, theirs)
    same_error(lambda lib: FUNC[lib].functional_call(
        _tied(lib), {"0.weight": lib.eye(2), "1.weight": lib.eye(2) * 3}, (lib.ones(1, 2),)))


# ---------------------------------------------------------------------------------------------
# torch.autograd.functional
# ---------------------------------------------------------------------------------------------
def single_in_out(x):
    return x.sin() * x.sum()


def two_in_one_out(x, y):
    return (x * y).sin()


INPUT_CASES = {
    "tensor->tensor": (single_in_out, ("x",)),
    "tensor->tuple": (lambda x: (x.sin(), (x * x).sum()), ("x",)),
    "tuple->tensor": (two_in_one_out, ("x", "y")),
    "tuple->tuple": (tuple_of_two, ("x", "y")),
    "one-tuple->tensor": (single_in_out, ("(x,)",)),
}


def _inputs(lib, names, x, y):
    got = {"x": lib.tensor(x), "y": lib.tensor(y)}
    if names == ("(x,)",):
        return (got["x"],)
    return got[names[0]] if len(names) == 1 else tuple(got[n] for n in names)


@pytest.mark.parametrize("case", sorted(INPUT_CASES))
@pytest.mark.parametrize("options", [{}, {"create_graph": True}, {"strict": True},
                                     {"vectorize": True},
                                     {"vectorize": True, "strategy": "forward-mode"}],
                         ids=["plain", "create_graph", "strict", "vectorize", "forward"])
def test_jacobian_matches_torch(case, options):
    fn, names = INPUT_CASES[case]
    x, y = np.array([0.3, -1.1, 0.8]), np.array([[0.5, 0.2, -0.4], [1.0, -0.3, 0.7]])[0]
    ours, theirs = (AUTOGRAD_FUNCTIONAL[lib].jacobian(fn, _inputs(lib, names, x, y), **options)
                    for lib in (tg, torch))
    assert_same(ours, theirs)


@pytest.mark.parametrize("options", [{}, {"create_graph": True}, {"strict": True},
                                     {"vectorize": True, "outer_jacobian_strategy":
                                      "forward-mode"}],
                         ids=["plain", "create_graph", "strict", "forward"])
@given(arrays=pair_of_shapes())
def test_hessian_matches_torch(options, arrays):
    x, y = arrays
    for fn, inputs in ((scalar_of_one, lambda lib: lib.tensor(x)),
                       (scalar_of_two, lambda lib: (lib.tensor(x), lib.tensor(y))),
                       (lambda t: (t * t).sum().reshape(1), lambda lib: (lib.tensor(x),))):
        ours, theirs = (AUTOGRAD_FUNCTIONAL[lib].hessian(fn, inputs(lib), **options)
                        for lib in (tg, torch))
        assert_same(ours, theirs)


@pytest.mark.parametrize("name", ["vjp", "jvp", "hvp", "vhp"])
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("strict", [False, True])
@given(arrays=pair_of_shapes())
def test_products_match_torch(name, create_graph, strict, arrays):
    x, y = arrays
    fn = {"vjp": tuple_of_two, "jvp": tuple_of_two, "hvp": scalar_of_two,
          "vhp": scalar_of_two}[name]

    def run(lib):
        xt, yt = lib.tensor(x), lib.tensor(y)
        if name == "vjp":
            v = (lib.ones_like(yt) * 0.5, lib.tensor(np.arange(y.size, dtype=float).reshape(
                y.shape)))
        else:
            v = (xt.cos(), yt * 0.3 + 1.0)
        return getattr(AUTOGRAD_FUNCTIONAL[lib], name)(fn, (xt, yt), v,
                                                       create_graph=create_graph, strict=strict)
    ours, theirs = run(tg), run(torch)
    assert_same(ours, theirs)


@pytest.mark.parametrize("name", ["vjp", "jvp", "hvp", "vhp"])
def test_products_with_v_omitted_for_one_element(name):
    fn = {"vjp": lambda t: (t * t).sum(), "jvp": lambda t: t.sin() * 3}.get(
        name, lambda t: (t ** 3).sum())
    ours, theirs = (getattr(AUTOGRAD_FUNCTIONAL[lib], name)(fn, lib.tensor([0.7]))
                    for lib in (tg, torch))
    assert_same(ours, theirs)


def test_create_graph_results_are_differentiable_again():
    """A hessian-vector product with create_graph=True, differentiated once more: the third
    derivative, as PyTorch gives it."""
    results = []
    for lib in (tg, torch):
        x = lib.tensor([0.4, -0.9, 1.3], requires_grad=True)
        out, hv = AUTOGRAD_FUNCTIONAL[lib].hvp(lambda t: (t.sin() * t ** 3).sum(), x,
                                               lib.ones(3), create_graph=True)
        assert hv.requires_grad and out.requires_grad
        (third,) = lib.autograd.grad(hv.sum(), x)
        jac = AUTOGRAD_FUNCTIONAL[lib].jacobian(lambda t: t.exp() * t.sum(), x,
                                                create_graph=True)
        (from_jac,) = lib.autograd.grad(jac.sum(), x)
        results.append((out, hv, third, from_jac))
    assert_same(*results)


@pytest.mark.parametrize("case", [
    lambda lib, A: A.vjp(lambda x: x * 2, [lib.ones(2)], lib.ones(2)),
    lambda lib, A: A.vjp(lambda x: x * 2, (lib.ones(2), 3.0), lib.ones(2)),
    lambda lib, A: A.vjp(lambda x: 3.0, lib.ones(2), lib.ones(2)),
    lambda lib, A: A.vjp(lambda x: x * 2, lib.ones(2)),
    lambda lib, A: A.vjp(lambda x: x * 2, lib.ones(2), lib.ones(3)),
    lambda lib, A: A.vjp(lambda x: (x, x), lib.ones(2), (lib.ones(2),)),
    lambda lib, A: A.vjp(lambda x: (x, x), lib.ones(2), (lib.ones(2), lib.ones(3))),
    lambda lib, A: A.jvp(lambda x: x * 2, lib.ones(2)),
    lambda lib, A: A.jvp(lambda x, y: x * 2, (lib.ones(2), lib.ones(2)), (lib.ones(2),)),
    lambda lib, A: A.hvp(lambda x: x * 2, lib.ones(2), lib.ones(2)),
    lambda lib, A: A.hvp(lambda x: (x.sum(), x.sum()), lib.ones(2), lib.ones(2)),
    lambda lib, A: A.hessian(lambda x: x * 2, lib.ones(2)),
    lambda lib, A: A.vhp(lambda x: x.sum(), lib.ones(2)),
    lambda lib, A: A.jacobian(lambda x: x * 2, lib.ones(2), strategy="sideways"),
    lambda lib, A: A.jacobian(lambda x: x * 2, lib.ones(2), strategy="forward-mode"),
    lambda lib, A: A.jacobian(lambda x: x * 2, lib.ones(2), strategy="forward-mode",
                              vectorize=True, create_graph=True),
    lambda lib, A: A.jacobian(lambda x: x * 2, lib.ones(2), strategy="forward-mode",
                              vectorize=True, strict=True),
    lambda lib, A: A.jacobian(lambda x, y: x * 2, (lib.ones(2), lib.ones(2)), strict=True),
    lambda lib, A: A.jacobian(lambda x: lib.ones(2), lib.ones(2), strict=True),
    lambda lib, A: A.jacobian(lambda x: x * 2, lib.ones(2), strict=True, vectorize=True),
    lambda lib, A: A.hessian(lambda x: (x * 2).sum(), lib.ones(2), strict=True),
    lambda lib, A: A.vjp(lambda x, y: x * 2, (lib.ones(2), lib.ones(2)), lib.ones(2),
                         strict=True),
    lambda lib, A: A.hvp(lambda x: (x * 2).sum(), lib.ones(2), lib.ones(2), strict=True),
    lambda lib, A: A.jvp(lambda x: lib.ones(2), lib.ones(2), lib.ones(2), strict=True),
    lambda lib, A: A.hessian(lambda x: (x ** 3).sum(), lib.ones(2),
                             outer_jacobian_strategy="forward-mode"),
    lambda lib, A: A.jacobian(lambda x: x * 2, lib.arange(3)),
    lambda lib, A: A.jvp(lambda x: x * 2, lib.arange(3), lib.ones(3)),
    lambda lib, A: A.hvp(lambda x: (x * 2).sum(), lib.arange(3), lib.ones(3)),
], ids=["list-inputs", "float-in-tuple", "float-output", "v-needed", "v-size", "v-length",
        "v-entry-size", "jvp-v-needed", "jvp-v-length", "hvp-not-scalar", "hvp-tuple",
        "hessian-not-scalar", "vhp-v-needed", "strategy", "forward-not-vectorized",
        "forward-create-graph", "forward-strict", "strict-unused-input",
        "strict-constant-output", "strict-vectorize", "strict-linear-hessian",
        "strict-vjp-unused", "strict-hvp-linear", "strict-jvp-constant",
        "hessian-forward-not-vectorized", "int-jacobian", "int-jvp", "int-hvp"])
def test_autograd_functional_errors_match_torch(case):
    same_error(lambda lib: case(lib, AUTOGRAD_FUNCTIONAL[lib]))


def test_autograd_functional_import_forms():
    import importlib

    from tapegrad.autograd.functional import hvp, jacobian
    module = importlib.import_module("tapegrad.autograd.functional")
    assert module is tg.autograd.functional is AF
    assert jacobian is AF.jacobian and hvp is AF.hvp
    assert tg.autograd.grad is not None and tg.autograd.backward is not None


def test_repeated_transforms_release_their_tapes():
    """A loop of grad calls (and of autograd.functional.vjp) records on a tape that each
    call's backward releases, as ``backward()`` does: no tape keeps growing."""
    from tapegrad.tape import state
    x = tg.tensor([0.3, 0.5, 0.7])
    g = TGF.grad(lambda t: (t.sin() * t).sum())
    for _ in range(3):
        g(x)
        assert state.tape is None or state.tape.finished
        AF.vjp(lambda t: (t.exp() * t).sum(), x)
        assert state.tape is None or state.tape.finished
