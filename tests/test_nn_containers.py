"""``nn`` containers and utilities against ``torch.nn``: ``Flatten``, ``Unflatten``,
``Identity``, ``ModuleList``, ``ModuleDict``, ``ParameterList``, ``ParameterDict``; the
``Module`` traversal and state API (``apply``, ``named_modules``, ``children``,
``register_buffer``, ``load_state_dict``); ``nn.utils`` gradient clipping and parameter
vectors.  Each case builds the same thing in both libraries and compares reprs, names,
values, gradients and errors."""
import math
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import strategies as S  # noqa: F401 - makes the source tree importable
import tapegrad as tg
from oracle import outcome, same

torch = pytest.importorskip("torch")


def with_weights(L, module, seed=0):
    """``module`` with deterministic weights, the same in both libraries."""
    rng = np.random.default_rng(seed)
    with L.no_grad():
        for p in module.parameters():
            p.copy_(L.tensor(rng.standard_normal(tuple(p.shape))))
    return module


def same_repr(build):
    ours, theirs = repr(build(tg)), repr(build(torch))
    assert ours == theirs.replace("torch.", "tapegrad.")
    return ours


def names(module):
    return ([n for n, _ in module.named_parameters()], list(module.state_dict()),
            [n for n, _ in module.named_modules()], [n for n, _ in module.named_children()],
            [n for n, _ in module.named_buffers()])


def same_names(build):
    assert names(build(tg)) == names(build(torch))


# ---------------------------------------------------------------------------------------------
# Flatten, Unflatten, Identity
# ---------------------------------------------------------------------------------------------


@given(data=st.data())
def test_flatten_matches_pytorch(data):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=4, max_side=3))
    x = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(-3, 3)))
    nd = max(len(shape), 1)
    start = data.draw(st.integers(-nd, nd - 1))
    end = data.draw(st.integers(-nd, nd - 1))
    for args in [(), (start,), (start, end)]:
        def run(L):
            leaf = L.tensor(x, requires_grad=True)
            out = L.nn.Flatten(*args)(leaf)
            out.backward(L.ones(tuple(out.shape)))
            return out, leaf.grad
        same(run, torch)


@given(data=st.data())
def test_unflatten_matches_pytorch(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=6))
    x = np.arange(float(np.prod(shape))).reshape(shape)
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[dim]
    factors = [(n,), (1, n), (n, 1)] + [(d, n // d) for d in range(2, n) if n % d == 0]
    sizes = list(data.draw(st.sampled_from(factors)))
    if data.draw(st.booleans()):
        sizes[data.draw(st.integers(0, len(sizes) - 1))] = -1
    if data.draw(st.booleans()):
        sizes[0] += 1   # sizes that do not multiply up
    as_list = data.draw(st.booleans())

    def run(L):
        leaf = L.tensor(x, requires_grad=True)
        out = L.nn.Unflatten(dim, list(sizes) if as_list else tuple(sizes))(leaf)
        out.backward(L.ones(tuple(out.shape)))
        return out, leaf.grad
    same(run, torch)


BAD_MODULE_CALLS = [
    lambda L: L.nn.Unflatten(1, ())(L.zeros(2, 6)),
    lambda L: L.nn.Unflatten(1, [2.0, 3]), lambda L: L.nn.Unflatten(1, 6),
    lambda L: L.nn.Unflatten(3, (2, 3))(L.zeros(2, 6)),
    lambda L: L.nn.Unflatten(1, (2, 3))(L.zeros(())),
    lambda L: L.nn.Flatten()(L.zeros(3)), lambda L: L.nn.Flatten(2, 1)(L.zeros(2, 3, 4)),
    lambda L: L.nn.Flatten(0)(L.zeros(())),
]


@pytest.mark.parametrize("call", BAD_MODULE_CALLS)
def test_flatten_and_unflatten_edge_cases_match_pytorch(call):
    same(call, torch)


def test_reprs_of_simple_modules():
    for build in (lambda L: L.nn.Flatten(), lambda L: L.nn.Flatten(0, 2),
                  lambda L: L.nn.Unflatten(1, (2, 3)), lambda L: L.nn.Unflatten(-1, [4, -1]),
                  lambda L: L.nn.Unflatten(0, L.Size([2, 2])),
                  lambda L: L.nn.Identity(), lambda L: L.nn.Identity(3, k=4),
                  lambda L: L.nn.Sequential(L.nn.Flatten(), L.nn.Linear(4, 2),
                                            L.nn.Unflatten(1, (1, 2)), L.nn.Identity())):
        same_repr(build)
    x = tg.ones(2)
    assert tg.nn.Identity(5)(x) is x


# ---------------------------------------------------------------------------------------------
# ModuleList, ModuleDict
# ---------------------------------------------------------------------------------------------


def module_list(L):
    return L.nn.ModuleList([L.nn.Linear(2, 2), L.nn.Linear(2, 2), L.nn.ReLU(),
                            L.nn.Linear(2, 3), L.nn.Linear(2, 3), L.nn.Linear(2, 3)])


def test_module_list_repr_names_and_indexing():
    same_repr(module_list)
    same_repr(lambda L: L.nn.ModuleList())
    same_repr(lambda L: L.nn.ModuleList([L.nn.Tanh()]))
    same_repr(lambda L: module_list(L)[1:4])
    same_repr(lambda L: module_list(L)[-1])
    same_repr(lambda L: module_list(L)[::2])
    same_names(module_list)
    for L in (tg, torch):
        ml = module_list(L)
        assert len(ml) == 6 and ml[2] is list(ml)[2] and ml[-6] is ml[0]
        assert type(ml[1:]) is L.nn.ModuleList


EDITS = {
    "append": lambda L, ml: ml.append(L.nn.Tanh()),
    "extend": lambda L, ml: ml.extend([L.nn.Tanh(), L.nn.Sigmoid()]),
    "iadd": lambda L, ml: ml.__iadd__([L.nn.Tanh()]),
    "add": lambda L, ml: ml + L.nn.ModuleList([L.nn.Tanh()]),
    "insert": lambda L, ml: (ml.insert(1, L.nn.Tanh()), ml)[1],
    "insert-end": lambda L, ml: (ml.insert(6, L.nn.Tanh()), ml)[1],
    "pop": lambda L, ml: (ml.pop(2), ml)[1],
    "pop-negative": lambda L, ml: (ml.pop(-1), ml)[1],
    "del": lambda L, ml: (ml.__delitem__(0), ml)[1],
    "del-slice": lambda L, ml: (ml.__delitem__(slice(1, 4)), ml)[1],
    "setitem": lambda L, ml: (ml.__setitem__(-2, L.nn.Tanh()), ml)[1],
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_module_list_edits_match_pytorch(edit):
    same_repr(lambda L: EDITS[edit](L, module_list(L)))
    same_names(lambda L: EDITS[edit](L, module_list(L)))


MODULE_LIST_ERRORS = [
    lambda L: module_list(L)[6], lambda L: module_list(L)[-7],
    lambda L: module_list(L)["0"], lambda L: module_list(L).extend(L.nn.Tanh()),
    lambda L: module_list(L).extend(5), lambda L: module_list(L)(L.zeros(2)),
    lambda L: L.nn.ModuleList([L.zeros(1)]), lambda L: module_list(L).append(3),
    lambda L: module_list(L).__setitem__(9, L.nn.Tanh()),
]


@pytest.mark.parametrize("call", MODULE_LIST_ERRORS)
def test_module_list_errors_match_pytorch(call):
    same(call, torch)


def module_dict(L, kind=dict):
    return L.nn.ModuleDict(kind([("conv", L.nn.Linear(2, 3)), ("act", L.nn.ReLU()),
                                 ("head", L.nn.Sequential(L.nn.Linear(3, 1)))]))


@pytest.mark.parametrize("kind", [dict, OrderedDict, list])
def test_module_dict_matches_pytorch(kind):
    same_repr(lambda L: module_dict(L, kind))
    same_names(lambda L: module_dict(L, kind))
    for L in (tg, torch):
        md = module_dict(L, kind)
        assert list(md) == list(md.keys()) == ["conv", "act", "head"]
        assert "act" in md and "x" not in md and len(md) == 3
        assert [type(m).__name__ for m in md.values()] == ["Linear", "ReLU", "Sequential"]
        assert md.pop("act").__class__ is L.nn.ReLU and list(md) == ["conv", "head"]
        del md["conv"]
        md["new"] = L.nn.Tanh()
        md.update({"z": L.nn.Sigmoid(), "a": L.nn.Sigmoid()})
        md.update([("q", L.nn.ReLU())])
        assert list(md) == ["head", "new", "z", "a", "q"]
        md.clear()
        assert len(md) == 0


MODULE_DICT_ERRORS = [
    lambda L: module_dict(L)["nope"], lambda L: module_dict(L).update(5),
    lambda L: module_dict(L).update([("a", L.nn.Tanh(), 1)]),
    lambda L: module_dict(L).update([5]), lambda L: module_dict(L).__setitem__("a.b", L.nn.Tanh()),
    lambda L: module_dict(L).__setitem__("a", 5), lambda L: module_dict(L)(1),
]


@pytest.mark.parametrize("call", MODULE_DICT_ERRORS)
def test_module_dict_errors_match_pytorch(call):
    same(call, torch)


# ---------------------------------------------------------------------------------------------
# ParameterList, ParameterDict
# ---------------------------------------------------------------------------------------------


def parameter_list(L):
    return L.nn.ParameterList([L.nn.Parameter(L.zeros(2, 3)), L.zeros(3), "x",
                               L.nn.Parameter(L.zeros(2, dtype=L.int64), requires_grad=False),
                               L.tensor(1.5)])


def test_parameter_list_matches_pytorch():
    same_repr(parameter_list)
    same_repr(lambda L: L.nn.ParameterList())
    same_names(parameter_list)
    same_repr(lambda L: parameter_list(L)[1:])
    same_repr(lambda L: parameter_list(L).append(L.ones(1)).extend([L.ones(2), 7]))
    for L in (tg, torch):
        pl = parameter_list(L)
        assert len(pl) == 5 and pl[2] == "x" and pl[-1] is pl[4]
        assert type(pl[1]) is L.nn.Parameter and pl[1].requires_grad   # tensors become Parameters
        assert [type(v).__name__ for v in pl] == ["Parameter", "Parameter", "str", "Parameter",
                                                  "Parameter"]
        pl[2] = L.ones(1)
        assert type(pl[2]) is L.nn.Parameter and len(list(pl.parameters())) == 5


PARAMETER_LIST_ERRORS = [
    lambda L: parameter_list(L)[5], lambda L: parameter_list(L)(1),
    lambda L: parameter_list(L).extend(L.zeros(2)), lambda L: parameter_list(L).extend(3),
    lambda L: L.nn.ParameterList([L.zeros(2, dtype=L.int64)]),
    lambda L: parameter_list(L).__setitem__(0, "text"),
]


@pytest.mark.parametrize("call", PARAMETER_LIST_ERRORS)
def test_parameter_list_errors_match_pytorch(call):
    same(call, torch)


def parameter_dict(L, kind=dict):
    return L.nn.ParameterDict(kind([("w", L.nn.Parameter(L.zeros(2, 3))), ("b", L.zeros(())),
                                    ("n", 3), ("a", L.ones(4))]))


@pytest.mark.parametrize("kind", [dict, OrderedDict, list])
def test_parameter_dict_matches_pytorch(kind):
    same_repr(lambda L: parameter_dict(L, kind))
    same_names(lambda L: parameter_dict(L, kind))
    for L in (tg, torch):
        pd = parameter_dict(L, kind)
        keys = list(pd)
        assert keys == list(pd.keys()) == [k for k, _ in pd.items()]
        assert type(pd["b"]) is L.nn.Parameter and pd["n"] == 3 and "w" in pd
        assert pd.get("zz", 5) == 5 and pd.setdefault("new", L.ones(1)).shape == (1,)
        assert pd.pop("n") == 3 and pd.popitem()[0] == "new"
        copy = pd.copy()
        assert list(copy) == list(pd) and copy["w"] is pd["w"]
        merged = pd | L.nn.ParameterDict({"m": L.ones(2)})
        assert list(merged) == list(pd) + ["m"]
        assert list(reversed(pd)) == list(pd)[::-1]
        assert list(pd.fromkeys(["p", "q"], L.ones(1))) == ["p", "q"]
        pd.clear()
        assert len(pd) == 0 and not list(pd.parameters())


PARAMETER_DICT_ERRORS = [
    lambda L: parameter_dict(L)["zz"], lambda L: parameter_dict(L)(1),
    lambda L: parameter_dict(L).__setitem__(1, L.ones(1)), lambda L: parameter_dict(L).update(3),
    lambda L: parameter_dict(L).update([("a",)]),
]


@pytest.mark.parametrize("call", PARAMETER_DICT_ERRORS)
def test_parameter_dict_errors_match_pytorch(call):
    same(call, torch)


# ---------------------------------------------------------------------------------------------
# A model built from the containers: traversal, buffers, state_dict
# ---------------------------------------------------------------------------------------------


def model(L):
    class Net(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = L.nn.ModuleList([L.nn.Sequential(L.nn.Linear(3, 3), L.nn.Tanh())
                                           for _ in range(2)])
            self.heads = L.nn.ModuleDict({"mean": L.nn.Linear(3, 1),
                                          "scale": L.nn.Linear(3, 1)})
            self.extra = L.nn.ParameterList([L.zeros(3), L.ones(1)])
            self.table = L.nn.ParameterDict({"t": L.ones(2)})
            self.shared = self.blocks[0]                      # listed once
            self.register_buffer("steps", L.tensor(0))
            self.register_buffer("scratch", L.zeros(2), persistent=False)
            self.register_buffer("absent", None)
            self.flat = L.nn.Flatten()

        def forward(self, x):
            for block in self.blocks:
                x = block(x) + self.extra[0]
            return self.heads["mean"](x) * self.heads["scale"](x) + self.table["t"][0]

    return with_weights(L, Net())


def test_model_names_repr_and_forward_match_pytorch():
    same_names(model)
    same_repr(model)
    x = np.linspace(-1, 1, 6).reshape(2, 3)

    def run(L):
        net = model(L)
        out = net(L.tensor(x))
        out.sum().backward()
        return [out] + [p.grad for p in net.parameters()]
    same(run, torch)


def test_named_modules_options_match_pytorch():
    for kwargs in ({}, {"prefix": "net"}, {"remove_duplicate": False}):
        ours = [n for n, _ in model(tg).named_modules(**kwargs)]
        theirs = [n for n, _ in model(torch).named_modules(**kwargs)]
        assert ours == theirs
    for L in (tg, torch):
        net = model(L)
        assert [type(m).__name__ for m in net.modules()][:3] == ["Net", "ModuleList",
                                                                 "Sequential"]
    assert [type(m).__name__ for m in model(tg).children()] == \
        [type(m).__name__ for m in model(torch).children()]


def test_apply_visits_children_first():
    visited = []
    for L in (tg, torch):
        order = []
        net = model(L)
        assert net.apply(lambda m: order.append(type(m).__name__)) is net
        visited.append(order)
    assert visited[0] == visited[1]


def test_apply_initialises_weights():
    def init(L):
        def fill(m):
            if isinstance(m, L.nn.Linear):
                L.nn.init.constant_(m.weight, 0.25)
                L.nn.init.zeros_(m.bias)
        net = model(L)
        net.apply(fill)
        return list(net.state_dict().values())
    same(init, torch)


BUFFER_CALLS = [
    lambda L: model(L).register_buffer("steps.x", L.zeros(1)),
    lambda L: model(L).register_buffer("", L.zeros(1)),
    lambda L: model(L).register_buffer(3, L.zeros(1)),
    lambda L: model(L).register_buffer("blocks", L.zeros(1)),
    lambda L: model(L).register_buffer("b", [1.0]),
    lambda L: (lambda n: (n.register_buffer("steps", L.ones(1), persistent=False),
                          list(n.state_dict()))[1])(model(L)),
    lambda L: (lambda n: (setattr(n, "steps", L.ones(2)), n.state_dict()["steps"])[1])(model(L)),
    lambda L: (lambda n: setattr(n, "steps", 5))(model(L)),
    lambda L: (lambda n: (delattr(n, "steps"), list(n.state_dict()))[1])(model(L)),
    lambda L: list(model(L).buffers()),
]


@pytest.mark.parametrize("call", BUFFER_CALLS)
def test_buffers_match_pytorch(call):
    ours, theirs = outcome(tg, call), outcome(torch, call)
    if theirs[0] == "error":   # PyTorch names its nn.Buffer, which tapegrad does not have
        theirs = theirs[:2] + (theirs[2].replace("tapegrad.nn.Buffer, ", ""),)
    assert ours == theirs


# --- load_state_dict ------------------------------------------------------------------------


def state_of(L):
    return {k: v.clone() for k, v in model(L).state_dict().items()}


LOADS = {
    "exact": lambda L, sd: sd,
    "missing": lambda L, sd: {k: v for k, v in sd.items() if "heads" not in k},
    "unexpected": lambda L, sd: {**sd, "nothing": L.zeros(1), "blocks.9.weight": L.zeros(1)},
    "dotted-param": lambda L, sd: {**sd, "steps.x": L.zeros(1)},
    "module-as-param": lambda L, sd: {**sd, "blocks": L.zeros(1), "heads.mean": L.zeros(1)},
    "non-persistent": lambda L, sd: {**sd, "scratch": L.zeros(2)},
    "both": lambda L, sd: {**{k: v for k, v in sd.items() if k != "steps"}, "x.y": L.zeros(1)},
    "shape": lambda L, sd: {**sd, "heads.mean.weight": L.zeros(2, 3)},
    "shape-and-missing": lambda L, sd: {k: (L.zeros(1) if k == "extra.1" else v)
                                        for k, v in sd.items() if k != "table.t"},
    "not-a-tensor": lambda L, sd: {**sd, "extra.0": [0.0, 0.0, 0.0]},
    "scalar-as-1": lambda L, sd: {**sd, "steps": L.tensor([7])},
    "int-into-float": lambda L, sd: {**sd, "extra.0": L.tensor([1, 2, 3])},
    "float-into-int": lambda L, sd: {**sd, "steps": L.tensor(2.7)},
}


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("name", sorted(LOADS))
def test_load_state_dict_matches_pytorch(name, strict):
    def run(L):
        net = model(L)
        result = net.load_state_dict(LOADS[name](L, state_of(L)), strict=strict)
        return (repr(result), type(result).__name__, list(result.missing_keys),
                list(result.unexpected_keys), list(net.state_dict().values()))
    same(run, torch)


def test_load_state_dict_copies_into_the_existing_parameters():
    net, other = model(tg), model(tg)
    with tg.no_grad():
        for p in other.parameters():
            p.mul_(2.0)
    before = [id(p) for p in net.parameters()]
    net.load_state_dict(other.state_dict())
    assert [id(p) for p in net.parameters()] == before
    for a, b in zip(net.parameters(), other.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


# ---------------------------------------------------------------------------------------------
# Module.to and friends
# ---------------------------------------------------------------------------------------------

MODULE_TO = [
    lambda L: model(L).to("cpu") is not None, lambda L: model(L).to(L.float64) is not None,
    lambda L: model(L).to(L.device("cpu"), L.float64) is not None,
    lambda L: model(L).to(L.zeros(1)) is not None, lambda L: model(L).to(L.int64),
    lambda L: model(L).double() is not None, lambda L: model(L).cpu() is not None,
    lambda L: model(L).to("cpu", non_blocking=True) is not None,
]


@pytest.mark.parametrize("call", MODULE_TO)
def test_module_to_matches_pytorch(call):
    same(call, torch)


def test_module_to_returns_itself_and_refuses_what_tapegrad_lacks():
    net = model(tg)
    assert net.to("cpu") is net and net.to(tg.float64) is net and net.float() is net
    with pytest.raises(TypeError, match="float32 is not supported yet"):
        net.to(tg.float32)
    with pytest.raises(TypeError, match="float16 is not supported yet"):
        net.half()


# ---------------------------------------------------------------------------------------------
# nn.utils
# ---------------------------------------------------------------------------------------------

SHAPES = st.lists(hnp.array_shapes(min_dims=0, max_dims=2, max_side=4), min_size=1, max_size=4)


@given(data=st.data(), shapes=SHAPES,
       max_norm=st.sampled_from([1e-3, 0.5, 1.0, 3.0, 1e3]),
       norm_type=st.sampled_from([2.0, 1.0, 3.5, math.inf, -math.inf, 0.5, "inf"]))
def test_clip_grad_norm_matches_pytorch(data, shapes, max_norm, norm_type):
    """The returned total norm and the clipped gradients, on drawn gradients (some
    parameters without a gradient), against torch.nn.utils.clip_grad_norm_."""
    grads = [data.draw(hnp.arrays(np.float64, s, elements=st.floats(-5, 5)))
             for s in shapes]
    has_grad = [data.draw(st.booleans()) for _ in shapes]
    has_grad[0] = True

    def run(L):
        params = [L.nn.Parameter(L.zeros(s)) for s in shapes]
        for p, g, h in zip(params, grads, has_grad):
            if h:
                p.grad = L.tensor(g)
        total = L.nn.utils.clip_grad_norm_(iter(params) if data.draw(st.booleans(), "gen")
                                           else params, max_norm, norm_type=norm_type)
        return [total] + [p.grad for p in params]

    ours, theirs = outcome(tg, run), outcome(torch, run)
    assert ours == theirs


@given(g=hnp.arrays(np.float64, hnp.array_shapes(max_dims=2),
                    elements=st.one_of(st.floats(-5, 5), st.sampled_from([math.inf, math.nan]))),
       error=st.booleans())
def test_clip_grad_norm_of_non_finite_gradients_matches_pytorch(g, error):
    def run(L):
        p = L.nn.Parameter(L.zeros(g.shape))
        p.grad = L.tensor(g)
        total = L.nn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=error)
        return total, p.grad
    same(run, torch)


def test_clip_grad_norm_edge_cases_match_pytorch():
    same(lambda L: L.nn.utils.clip_grad_norm_([], 1.0), torch)
    same(lambda L: L.nn.utils.clip_grad_norm_([L.nn.Parameter(L.zeros(2))], 1.0), torch)
    for L in (tg, torch):
        with pytest.warns(UserWarning, match="empty generator"):
            L.nn.utils.clip_grad_norm_((p for p in []), 1.0)


@given(data=st.data(), shapes=SHAPES, clip=st.sampled_from([0.0, 0.1, 1.0, 2.5]))
def test_clip_grad_value_matches_pytorch(data, shapes, clip):
    grads = [data.draw(hnp.arrays(np.float64, s, elements=st.floats(-5, 5))) for s in shapes]

    def run(L):
        params = [L.nn.Parameter(L.zeros(s)) for s in shapes]
        for p, g in zip(params, grads):
            p.grad = L.tensor(g)
        result = L.nn.utils.clip_grad_value_(params if len(params) > 1 else params[0], clip)
        return [result] + [p.grad for p in params]
    same(run, torch)


@given(shapes=SHAPES)
def test_parameters_to_vector_and_back_match_pytorch(shapes):
    def run(L):
        params = [L.nn.Parameter(L.tensor(np.arange(float(np.prod(s))).reshape(s) + i))
                  for i, s in enumerate(shapes)]
        vec = L.nn.utils.parameters_to_vector(params)
        (vec * vec).sum().backward()
        grads = [p.grad for p in params]
        L.nn.utils.vector_to_parameters(vec.detach() * -2, params)
        return [vec] + grads + list(params)
    same(run, torch)


VECTOR_ERRORS = [
    lambda L: L.nn.utils.vector_to_parameters([1.0, 2.0], [L.nn.Parameter(L.zeros(2))]),
    lambda L: L.nn.utils.vector_to_parameters(L.zeros(3), [L.nn.Parameter(L.zeros(2, 2))]),
    lambda L: L.nn.utils.parameters_to_vector([]),
]


@pytest.mark.parametrize("call", VECTOR_ERRORS)
def test_parameter_vector_errors_match_pytorch(call):
    same(call, torch)


# ---------------------------------------------------------------------------------------------
# A program written as PyTorch's tutorials write it, run unchanged with both libraries
# ---------------------------------------------------------------------------------------------

PROGRAM = '''
torch.set_default_dtype(torch.float64)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.layers = nn.ModuleList([nn.Linear(16, 16) for _ in range(2)])
        self.head = nn.Sequential(nn.Linear(16, 3), nn.Identity())
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))

    def forward(self, x):
        self.calls += 1
        x = self.flatten(x)
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return self.head(x)


model = Net().to(device)
with torch.no_grad():
    for p, w in zip(model.parameters(), initial_weights):
        p.copy_(torch.from_numpy(w))
X = torch.tensor(images).to(device)
y = torch.from_numpy(labels).long().to(device)
opt = optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()
for epoch in range(25):
    opt.zero_grad()
    loss = loss_fn(model(X), y)
    loss.backward()
    norms.append(nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0).item())
    opt.step()
    losses.append(loss.item())
torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": opt.state_dict()}, path)
checkpoint = torch.load(path, map_location=device)
restored = Net()
restored.load_state_dict(checkpoint["model"])
correct = (restored(X).argmax(dim=1) == y).sum().item()
same_weights = all(torch.equal(a, b) for a, b in zip(restored.parameters(), model.parameters()))
calls = int(restored.calls)
'''


def test_a_pytorch_program_runs_unchanged(tmp_path):
    rng = np.random.default_rng(5)
    images = rng.standard_normal((60, 4, 4))
    labels = (images[:, 0, :2].sum(1) > 0).astype(np.int32) + (images[:, 3, 3] > 1)
    sizes = [(16, 16), (16,), (16, 16), (16,), (3, 16), (3,)]
    initial = [rng.uniform(-0.25, 0.25, s) for s in sizes]
    results = []
    for lib in (tg, torch):
        scope = {"torch": lib, "nn": lib.nn, "optim": lib.optim, "images": images,
                 "labels": labels, "initial_weights": initial, "losses": [], "norms": [],
                 "path": str(tmp_path / f"{lib.__name__}.pt")}
        exec(PROGRAM, scope)   # noqa: S102 - the program under test
        results.append(scope)
    ours, theirs = results
    np.testing.assert_allclose(ours["losses"], theirs["losses"], rtol=1e-10)
    np.testing.assert_allclose(ours["norms"], theirs["norms"], rtol=1e-10)
    assert ours["losses"][-1] < 0.5 * ours["losses"][0]     # it trained
    assert ours["correct"] == theirs["correct"]
    assert ours["same_weights"] and theirs["same_weights"]
    assert ours["calls"] == theirs["calls"] == 26   # 25 saved with the buffer, then one more
