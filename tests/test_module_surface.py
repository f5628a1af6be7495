"""``nn.Module``'s less common API against ``torch.nn``: members by qualified name
(``get_submodule``, ``set_submodule``, ``get_parameter``, ``get_buffer``).  Each case runs one
program with both libraries and compares what it returns, or the error's type and text."""
import pytest

import strategies as S  # noqa: F401 - makes the source tree importable
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
