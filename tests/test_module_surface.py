"""``nn.Module``'s less common API against ``torch.nn``: members by qualified name
(``get_submodule``, ``set_submodule``, ``get_parameter``, ``get_buffer``), extra state and
the state-dict hooks, ``type``/``to_empty``/``share_memory``, ``Sequential``'s edits
(``insert``, ``pop``, ``extend``, ...), and ``utils.data``'s ``StackDataset`` and
``ChainDataset``.  Each case runs one program with both libraries and compares what it
returns, or the error's type and text."""
from collections import OrderedDict

import pytest

import strategies as S  # noqa: F401 - makes the source tree importable
import tapegrad as tg
from oracle import same

torch = pytest.importorskip("torch")


def tree(L):
    """Sequential(Linear, Sequential(Tanh)) with a buffer, a None child and a plain
    attribute on the root."""
    model = L.nn.Sequential(L.nn.Linear(2, 3), L.nn.Sequential(L.nn.Tanh()))
    with L.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(L.arange(float(p.numel())).reshape(p.shape) / (i + 2))
    model.register_buffer("steps", L.zeros(2))
    model.register_buffer("empty", None)
    model.register_module("absent", None)
    model.note = 3
    return model


def described(member):
    """What a lookup found, comparable across the libraries."""
    if member is None:
        return None
    return type(member).__name__, repr(member).replace("torch", "tapegrad")


TARGETS = ["", "0", "1", "1.0", "2", "0.weight", "0.bias", "0.zz.yy", "steps", "empty",
           "absent", "note", "forward", "training", "1.0.x", ".", "0.", "1..0"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("method", ["get_submodule", "get_parameter", "get_buffer"])
def test_a_member_by_its_qualified_name(method, target):
    same(lambda L: described(getattr(tree(L), method)(target)), torch)


SET_TARGETS = ["", "0", "1.0", "new", "0.new", "1.0.new", "q.new", "0.weight", "steps",
               "note", "absent", "forward"]


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("target", SET_TARGETS)
def test_set_submodule_replaces_or_adds_a_module(target, strict):
    def run(L):
        model = tree(L)
        result = model.set_submodule(target, L.nn.ReLU(), strict=strict)
        return result, [name for name, _ in model.named_modules()], repr(model)
    same(run, torch)


@pytest.mark.parametrize("module", [3, None, "Tanh"])
def test_set_submodule_refuses_what_is_not_a_module(module):
    same(lambda L: tree(L).set_submodule("0", module), torch)
    same(lambda L: tree(L).set_submodule("", module), torch)


# ---------------------------------------------------------------------------------------------
# Extra state: get_extra_state / set_extra_state in state_dict and load_state_dict
# ---------------------------------------------------------------------------------------------


def with_extra(L, get=True, put=True):
    """A module class with a parameter that overrides get_extra_state and/or
    set_extra_state (the state is a dict ``cfg``; what set_extra_state got is kept)."""
    body = {}
    if get:
        body["get_extra_state"] = lambda self: dict(self.cfg)
    if put:
        body["set_extra_state"] = lambda self, state: setattr(self, "cfg", state)

    def __init__(self):
        L.nn.Module.__init__(self)
        self.w = L.nn.Parameter(L.ones(2))
        self.cfg = {"a": 1}
    return type("Extra", (L.nn.Module,), {"__init__": __init__, **body})


def keys_loaded(L, model, state, **kwargs):
    return str(model.load_state_dict(state, **kwargs)), [m.cfg for m in model.modules()
                                                         if hasattr(m, "cfg")]


EXTRA_STATE = {
    "saved": lambda L: list(L.nn.Sequential(with_extra(L)(), L.nn.Tanh()).state_dict().items()),
    "nested": lambda L: list(L.nn.Sequential(L.nn.Sequential(with_extra(L)())).state_dict()),
    "default get raises": lambda L: L.nn.Module().get_extra_state(),
    "default set raises": lambda L: L.nn.Module().set_extra_state({"a": 2}),
    "loaded": lambda L: keys_loaded(
        L, L.nn.Sequential(with_extra(L)()),
        {"0.w": L.zeros(2), "0._extra_state": {"b": 2}}),
    "missing under strict": lambda L: keys_loaded(
        L, L.nn.Sequential(with_extra(L)()), {"0.w": L.zeros(2)}),
    "missing, not strict": lambda L: keys_loaded(
        L, L.nn.Sequential(with_extra(L)()), {"0.w": L.zeros(2)}, strict=False),
    "unexpected under strict": lambda L: keys_loaded(
        L, L.nn.Sequential(L.nn.Tanh()), {"0._extra_state": 3}),
    "unexpected, not strict": lambda L: keys_loaded(
        L, L.nn.Sequential(L.nn.Tanh()), {"0._extra_state": 3}, strict=False),
    "get only: saved": lambda L: list(with_extra(L, put=False)().state_dict().items()),
    "get only: loading it": lambda L: keys_loaded(
        L, with_extra(L, put=False)(), {"w": L.ones(2), "_extra_state": {"c": 3}}),
    "set only: not saved": lambda L: list(with_extra(L, get=False)().state_dict()),
    "set only: loaded": lambda L: keys_loaded(
        L, with_extra(L, get=False)(), {"w": L.ones(2), "_extra_state": {"c": 3}}),
    "set only: missing": lambda L: keys_loaded(L, with_extra(L, get=False)(), {"w": L.ones(2)}),
    "round trip": lambda L: (lambda a, b: (b.load_state_dict(a.state_dict()), b.cfg)[1])(
        (lambda m: (setattr(m, "cfg", {"z": [1, 2]}), m)[1])(with_extra(L)()), with_extra(L)()),
}


@pytest.mark.parametrize("name", EXTRA_STATE)
def test_extra_state_in_state_dicts(name):
    same(EXTRA_STATE[name], torch)


# ---------------------------------------------------------------------------------------------
# state_dict and load_state_dict hooks
# ---------------------------------------------------------------------------------------------


def hooked(L, log):
    """Sequential(BatchNorm1d, Sequential(Tanh)) with every state-dict hook on every
    module, each logging its arguments."""
    model = L.nn.Sequential(L.nn.BatchNorm1d(2), L.nn.Sequential(L.nn.Tanh()))
    for name, mod in model.named_modules():
        mod.register_state_dict_pre_hook(
            lambda m, prefix, keep, name=name: log.append(("pre", name, prefix, keep)))
        mod.register_state_dict_post_hook(
            lambda m, sd, prefix, meta, name=name:
            log.append(("post", name, prefix, list(sd), dict(meta))))
        mod.register_load_state_dict_pre_hook(
            lambda m, sd, prefix, meta, strict, missing, unexpected, errors, name=name:
            log.append(("load pre", name, type(m).__name__, sorted(sd), prefix, dict(meta),
                        strict, list(missing), list(unexpected), list(errors))))
        mod.register_load_state_dict_post_hook(
            lambda m, keys, name=name: log.append(
                ("load post", name, type(keys).__name__, list(keys.missing_keys),
                 list(keys.unexpected_keys))))
    return model


@pytest.mark.parametrize("prefix, keep_vars", [("", False), ("p.", True)])
def test_state_dict_hooks_run_in_order_with_their_arguments(prefix, keep_vars):
    def run(L):
        log = []
        state = hooked(L, log).state_dict(prefix=prefix, keep_vars=keep_vars)
        return log, list(state), list(state._metadata.items())
    same(run, torch)


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("assign", [False, True])
@pytest.mark.parametrize("metadata", [True, False])
def test_load_state_dict_hooks_run_in_order_with_their_arguments(strict, assign, metadata):
    def run(L):
        log = []
        model = hooked(L, log)
        state = model.state_dict()
        if not metadata:
            state = dict(state)
        state.pop("0.weight")
        state["zz"] = L.ones(1)
        del log[:]
        result = model.load_state_dict(state, strict=strict, assign=assign)
        return str(result), log
    same(run, torch)


def test_a_plain_dict_without_num_batches_tracked_loads_into_batch_norm():
    # a state dict without metadata is read as one saved before the count existed
    def run(L):
        bn = L.nn.BatchNorm1d(2)
        state = {k: v for k, v in bn.state_dict().items() if k != "num_batches_tracked"}
        with_meta = bn.state_dict()
        del with_meta["num_batches_tracked"]
        out = [str(bn.load_state_dict(state))]
        try:
            bn.load_state_dict(with_meta)
        except RuntimeError as e:
            out.append(str(e))
        return out
    same(run, torch)


HOOK_PROGRAMS = {
    "public post hook returning a value": lambda L: (lambda m: (
        m.register_state_dict_post_hook(lambda *a: {}), m.state_dict())[1])(L.nn.Tanh()),
    "private hook replaces the root's dict": lambda L: (lambda m: (
        m._register_state_dict_hook(lambda mod, sd, prefix, meta: {"replaced": 1}),
        m.state_dict())[1])(L.nn.Tanh()),
    "a child's replacement is lost": lambda L: (lambda m: (
        m[0]._register_state_dict_hook(lambda mod, sd, prefix, meta: {"replaced": 1}),
        list(m.state_dict()))[1])(L.nn.Sequential(L.nn.BatchNorm1d(1))),
    "load post hook returning a value": lambda L: (lambda m: (
        m.register_load_state_dict_post_hook(lambda mod, keys: keys),
        m.load_state_dict({}))[1])(L.nn.Tanh()),
    "load post hook clears the missing keys": lambda L: (lambda m: (
        m.register_load_state_dict_post_hook(lambda mod, keys: keys.missing_keys.clear()),
        str(m.load_state_dict({"bias": L.zeros(2)})))[1])(L.nn.BatchNorm1d(2)),
    "load post hook adds an unexpected key": lambda L: (lambda m: (
        m.register_load_state_dict_post_hook(
            lambda mod, keys: keys.unexpected_keys.append("made.up")),
        str(m.load_state_dict(m.state_dict())))[1])(L.nn.BatchNorm1d(2)),
    "load post hook, not strict": lambda L: (lambda m: (
        m.register_load_state_dict_post_hook(
            lambda mod, keys: keys.unexpected_keys.append("made.up")),
        str(m.load_state_dict(m.state_dict(), strict=False)))[1])(L.nn.BatchNorm1d(2)),
    "load pre hook renames keys": lambda L: (lambda m: (
        m.register_load_state_dict_pre_hook(
            lambda mod, sd, prefix, *rest: sd.update(
                {prefix + "weight": sd.pop(prefix + "old_weight")})),
        str(m.load_state_dict({"old_weight": L.full((2,), 3.0), "bias": L.zeros(2)})),
        m.weight.detach())[1:])(L.nn.LayerNorm(2)),
    "private load pre hook without the module": lambda L: (lambda m, log: (
        m._register_load_state_dict_pre_hook(lambda *args: log.append(len(args))),
        m.load_state_dict({}), log)[2])(L.nn.Tanh(), []),
    "removed hooks do not run": lambda L: (lambda m, log: (
        m.register_state_dict_pre_hook(lambda *a: log.append("pre")).remove(),
        m.register_state_dict_post_hook(lambda *a: log.append("post")).remove(),
        m.register_load_state_dict_pre_hook(lambda *a: log.append("load pre")).remove(),
        m.register_load_state_dict_post_hook(lambda *a: log.append("load post")).remove(),
        m.load_state_dict(m.state_dict()), log)[-1])(L.nn.Tanh(), []),
    "the caller's dict is not edited": lambda L: (lambda m, state: (
        m.register_load_state_dict_pre_hook(lambda mod, sd, *rest: sd.clear()),
        str(m.load_state_dict(state, strict=False)), sorted(state))[1:])(
            L.nn.LayerNorm(2), {"weight": L.ones(2), "bias": L.ones(2)}),
}


@pytest.mark.parametrize("name", HOOK_PROGRAMS)
def test_state_dict_hook_programs(name):
    same(HOOK_PROGRAMS[name], torch)


def test_a_public_post_hook_cannot_also_be_a_private_one():
    def run(L):
        def hook(module, state, prefix, meta):
            return None
        m = L.nn.Tanh()
        m.register_state_dict_post_hook(hook)
        return m._register_state_dict_hook(hook)
    same(run, torch)


def test_a_copied_module_s_load_pre_hook_is_given_the_copy():
    import copy

    def run(L):
        seen = []
        m = L.nn.LayerNorm(2)
        m.register_load_state_dict_pre_hook(lambda mod, *rest: seen.append(mod))
        twin = copy.deepcopy(m)
        twin.load_state_dict(twin.state_dict())
        return [s is twin for s in seen]
    same(run, torch)


# ---------------------------------------------------------------------------------------------
# Conversions of every member: type, to_empty, share_memory
# ---------------------------------------------------------------------------------------------


def members(module):
    """Each state_dict entry's name, dtype, shape, class and requires_grad."""
    return [(k, str(v.dtype).split(".")[-1], tuple(v.shape), type(v).__name__, v.requires_grad)
            for k, v in module.state_dict(keep_vars=True).items()]


def linear_and_norm(L):
    return L.nn.Sequential(L.nn.Linear(2, 2), L.nn.BatchNorm1d(2))


@pytest.mark.parametrize("dst_type", ["float64", "int64", "bool", "torch.DoubleTensor",
                                      "torch.LongTensor", "torch.Foo"])
def test_type_converts_every_parameter_and_buffer(dst_type):
    def run(L):
        model = linear_and_norm(L)
        weight = model[0].weight
        result = model.type(dst_type if "." in dst_type else getattr(L, dst_type))
        return result is model, model[0].weight is weight, members(model)
    same(run, torch)


def test_type_to_an_integer_dtype_without_grad():
    def run(L):
        model = linear_and_norm(L).requires_grad_(False)
        with L.no_grad():
            model[0].weight.copy_(L.tensor([[1.5, -2.5], [0.25, 3.0]]))
        model.type(L.int64)
        return members(model), model[0].weight
    same(run, torch)


def test_type_keeps_the_gradient_the_parameter_has():
    def run(L):
        model = linear_and_norm(L)
        model[0].weight.grad = L.full((2, 2), 2.0)
        grad = model[0].weight.grad
        model.type(L.float64)
        return model[0].weight.grad is grad, model[0].weight.grad
    same(run, torch)


def test_setting_data_of_a_tensor_that_requires_grad_to_integers_is_refused():
    def run(L):
        x = L.ones(2, requires_grad=True)
        x.data = L.ones(2, dtype=L.int64)
    same(run, torch)


@pytest.mark.parametrize("recurse", [True, False])
@pytest.mark.parametrize("device", ["cpu", None])
def test_to_empty_gives_new_memory_of_each_shape(device, recurse):
    def run(L):
        model = linear_and_norm(L)
        weight, mean = model[0].weight, model[1].running_mean
        result = model.to_empty(device=device, recurse=recurse)
        return (result is model, model[0].weight is weight, model[1].running_mean is mean,
                members(model))
    same(run, torch)


@pytest.mark.parametrize("call", ["to_empty()", "to_empty('cpu')"])
def test_to_empty_takes_only_the_device_keyword(call):
    same(lambda L: eval("model." + call, {"model": linear_and_norm(L)}), torch)


def test_share_memory_marks_every_parameter_and_buffer():
    def run(L):
        model = linear_and_norm(L)
        weight = model[0].weight
        before = [t.is_shared() for t in model.parameters()]
        result = model.share_memory()
        return (result is model, model[0].weight is weight, before,
                [t.is_shared() for t in [*model.parameters(), *model.buffers()]])
    same(run, torch)


def test_share_memory_of_an_uninitialized_lazy_module_raises():
    same(lambda L: L.nn.LazyLinear(2).share_memory(), torch)


# ---------------------------------------------------------------------------------------------
# Sequential: insert, pop, extend, item assignment and deletion, +
# ---------------------------------------------------------------------------------------------


def three(L, named=False):
    layers = [L.nn.Tanh(), L.nn.ReLU(), L.nn.Sigmoid()]
    if named:
        return L.nn.Sequential(OrderedDict(zip(["a", "b", "c"], layers)))
    return L.nn.Sequential(*layers)


def layout(seq):
    return list(seq._modules), repr(seq)


SEQUENTIAL = {
    **{f"insert({i})": lambda L, i=i: layout(three(L).insert(i, L.nn.ELU()))
       for i in [0, 1, 3, -1, -3, 4, -4]},
    "insert(0) into a named one": lambda L: layout(three(L, named=True).insert(0, L.nn.ELU())),
    "insert(3) into a named one": lambda L: layout(three(L, named=True).insert(3, L.nn.ELU())),
    "insert a non-module": lambda L: three(L).insert(0, 3),
    "insert returns self": lambda L: (lambda s: s.insert(1, L.nn.ELU()) is s)(three(L)),
    **{f"pop({k})": lambda L, k=k: (lambda s: (repr(s.pop(k)), layout(s)))(three(L))
       for k in [0, 1, -1, -3, 3, -4]},
    "pop(slice(1, None))": lambda L: (lambda s: (repr(s.pop(slice(1, None))), layout(s)))(
        three(L)),
    "pop from a named one": lambda L: (lambda s: (repr(s.pop(1)), layout(s)))(
        three(L, named=True)),
    "pop('a')": lambda L: three(L).pop("a"),
    "extend": lambda L: layout(three(L).extend(three(L, named=True))),
    "extend by a list": lambda L: layout(three(L).extend([L.nn.ELU(), L.nn.SiLU()])),
    "extend by a non-module": lambda L: three(L).extend([L.nn.ELU(), 3]),
    "extend returns self": lambda L: (lambda s: s.extend([]) is s)(three(L)),
    "del [1]": lambda L: (lambda s: (s.__delitem__(1), layout(s))[1])(three(L)),
    "del [::2] of a named one": lambda L: (lambda s: (s.__delitem__(slice(None, None, 2)),
                                                      layout(s))[1])(three(L, named=True)),
    "[-1] = ELU": lambda L: (lambda s: (s.__setitem__(-1, L.nn.ELU()), layout(s))[1])(
        three(L, named=True)),
    "[5] = ELU": lambda L: three(L).__setitem__(5, L.nn.ELU()),
    "[1.0]": lambda L: three(L)[1.0],
    "+": lambda L: layout(three(L) + three(L, named=True)),
    "+ a list": lambda L: three(L) + [L.nn.ELU()],
    "+=": lambda L: (lambda s: (s.__iadd__(three(L)), layout(s))[1])(three(L, named=True)),
}


@pytest.mark.parametrize("name", SEQUENTIAL)
def test_sequential_edits(name):
    same(SEQUENTIAL[name], torch)


def test_an_edited_sequential_computes_in_its_new_order():
    def run(L):
        seq = L.nn.Sequential(L.nn.Tanh(), L.nn.Sigmoid())
        seq.insert(1, L.nn.Softplus()).extend([L.nn.ELU()])
        seq.pop(0)
        x = L.tensor([-1.0, 0.5, 2.0], requires_grad=True)
        out = seq(x)
        out.sum().backward()
        return out, x.grad
    same(run, torch)


# ---------------------------------------------------------------------------------------------
# utils.data: StackDataset, ChainDataset
# ---------------------------------------------------------------------------------------------


def data_of(L):
    return L.utils.data


def squares(L, n=4):
    return data_of(L).TensorDataset(L.arange(float(n)) ** 2)


class Batched:
    """A map-style dataset with its own ``__getitems__``, which records that it was used
    (and may return a wrong number of samples)."""

    def __init__(self, n, short=False):
        self.n, self.short, self.calls = n, short, []

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return 10 * i

    def __getitems__(self, indices):
        self.calls.append(list(indices))
        return [100 * i for i in indices][:len(indices) - self.short]


STACK = {
    "tuple sample": lambda L: data_of(L).StackDataset(squares(L), [5, 6, 7, 8])[2],
    "dict sample": lambda L: data_of(L).StackDataset(x=squares(L), y="abcd")[-1],
    "len": lambda L: len(data_of(L).StackDataset(a=[1, 2, 3], b=(4, 5, 6))),
    "datasets": lambda L: data_of(L).StackDataset(a=[1, 2], b=(3, 4)).datasets,
    "size mismatch": lambda L: data_of(L).StackDataset([1, 2], [3]),
    "size mismatch by keyword": lambda L: data_of(L).StackDataset(a=[1, 2], b=[3]),
    "both kinds": lambda L: data_of(L).StackDataset([1], b=[2]),
    "none": lambda L: data_of(L).StackDataset(),
    "__getitems__ tuples": lambda L: data_of(L).StackDataset(
        Batched(4), [5, 6, 7, 8]).__getitems__([3, 0]),
    "__getitems__ dicts": lambda L: data_of(L).StackDataset(
        a=Batched(4), b="wxyz").__getitems__([1, 2, 1]),
    "__getitems__ of nothing": lambda L: data_of(L).StackDataset(a=Batched(2)).__getitems__(
        []),
    "__getitems__ short": lambda L: data_of(L).StackDataset(
        Batched(4, short=True), [5, 6, 7, 8]).__getitems__([3, 0]),
    "loaded in batches": lambda L: [
        (list(b[0].tolist()), b[1].tolist()) for b in data_of(L).DataLoader(
            data_of(L).StackDataset(L.arange(5.0), Batched(5)), batch_size=2)],
    "the loader asks for whole batches": lambda L: (lambda part: (
        list(data_of(L).DataLoader(data_of(L).StackDataset(part), batch_size=3)),
        part.calls)[1])(Batched(5)),
    "loaded as dicts": lambda L: [
        {k: v.tolist() for k, v in b.items()} for b in data_of(L).DataLoader(
            data_of(L).StackDataset(x=L.arange(3.0), y=[1, 2, 3]), batch_size=2)],
}


@pytest.mark.parametrize("name", STACK)
def test_stack_dataset(name):
    same(STACK[name], torch)


def counting(L, n, sized=True):
    """An iterable dataset yielding 0..n-1 (with a length when ``sized``)."""
    body = {"__init__": lambda self: None, "__iter__": lambda self: iter(range(n))}
    if sized:
        body["__len__"] = lambda self: n
    return type("Count", (data_of(L).IterableDataset,), body)()


CHAIN = {
    "items": lambda L: list(data_of(L).ChainDataset([counting(L, 2), counting(L, 3)])),
    "len": lambda L: len(data_of(L).ChainDataset([counting(L, 2), counting(L, 3)])),
    # list() asks len() first, which uses a generator up (in PyTorch too)
    "from a generator": lambda L: list(data_of(L).ChainDataset(
        counting(L, k) for k in (1, 2))),
    "empty": lambda L: (list(data_of(L).ChainDataset([])), len(data_of(L).ChainDataset([]))),
    "a map-style dataset in it": lambda L: list(data_of(L).ChainDataset([counting(L, 1),
                                                                         squares(L)])),
    "its len with a map-style one": lambda L: len(data_of(L).ChainDataset([squares(L)])),
    "a list in it": lambda L: list(data_of(L).ChainDataset([[1, 2]])),
    "one without a length": lambda L: len(data_of(L).ChainDataset([counting(L, 2, False)])),
    "+": lambda L: (lambda both: (type(both).__name__, list(both)))(
        counting(L, 2) + counting(L, 1)),
    "+ a map-style one": lambda L: (lambda both: (type(both).__name__, list(both)))(
        counting(L, 2) + squares(L)),
    "loaded": lambda L: [b.tolist() for b in data_of(L).DataLoader(
        data_of(L).ChainDataset([counting(L, 3), counting(L, 2)]), batch_size=2)],
    "is an IterableDataset": lambda L: isinstance(data_of(L).ChainDataset([]),
                                                  data_of(L).IterableDataset),
}


@pytest.mark.parametrize("name", CHAIN)
def test_chain_dataset(name):
    same(CHAIN[name], torch)


def test_the_datasets_import_from_pytorch_s_module_path():
    from tapegrad.utils.data.dataset import ChainDataset, StackDataset
    assert StackDataset is data_of(tg).StackDataset and ChainDataset is data_of(tg).ChainDataset


def test_a_module_pickled_before_the_state_dict_hooks_still_saves_and_loads():
    import pickle

    model = tg.nn.Sequential(tg.nn.BatchNorm1d(2))
    for module in model.modules():
        for name in ("_state_dict_hooks", "_state_dict_pre_hooks",
                     "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks"):
            del module.__dict__[name]
    revived = pickle.loads(pickle.dumps(model))
    state = revived.state_dict()
    assert list(state) == ["0.weight", "0.bias", "0.running_mean", "0.running_var",
                           "0.num_batches_tracked"]
    assert str(revived.load_state_dict(state)) == "<All keys matched successfully>"


@pytest.mark.parametrize("args", [(None,), (None, "p."), (None, "p.", True), ({}, "q.")])
def test_state_dict_s_deprecated_positional_arguments(args):
    import warnings

    def run(L):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            state = L.nn.Linear(1, 1).state_dict(*args)
        return ([(w.category.__name__, str(w.message)) for w in caught],
                [(k, v.requires_grad) for k, v in state.items()], type(state).__name__)
    same(run, torch)


def test_state_dict_s_positional_form_warns_as_an_error_under_the_suite_s_filter():
    same(lambda L: L.nn.Linear(1, 1).state_dict(None, "p."), torch)


def _assigned(L, source_kind):
    """What load_state_dict(assign=True) puts in place: the state dict's own tensors."""
    L.manual_seed(0)
    model = L.nn.Sequential(L.nn.Linear(2, 2, dtype=L.float64),
                            L.nn.BatchNorm1d(2, dtype=L.float64))
    model[0].bias.requires_grad_(False)
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    if source_kind == "parameter":
        sd["0.weight"] = L.nn.Parameter(sd["0.weight"], requires_grad=False)
    model.load_state_dict(sd, assign=True)
    with L.no_grad():
        sd["0.weight"].add_(1.0)
        sd["1.running_mean"].add_(2.0)
    w, b, mean = model[0].weight, model[0].bias, model[1].running_mean
    return (w is sd["0.weight"], mean is sd["1.running_mean"], type(w).__name__,
            w.requires_grad, b.requires_grad, type(b).__name__,
            w.detach().numpy().tolist(), mean.numpy().tolist())


@pytest.mark.parametrize("source_kind", ["tensor", "parameter"])
def test_load_state_dict_with_assign_puts_the_dicts_tensors_in_place(source_kind):
    got, want = _assigned(tg, source_kind), _assigned(torch, source_kind)
    assert got == want
    assert got[1]       # (the buffer is the dict's tensor: its write is the module's)
