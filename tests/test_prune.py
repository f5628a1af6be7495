"""``tapegrad.nn.utils.prune`` against ``torch.nn.utils.prune``: masks and pruned weights of
every method (seeded random ones included), iterative pruning through a PruningContainer,
state-dict keys and values, gradients reaching ``weight_orig``, ``remove``, ``is_pruned``,
``global_unstructured`` with importance scores, and the errors' types and texts."""
import numpy as np
import pytest
import torch

import tapegrad as tg
import tapegrad.nn.utils.prune as tg_prune
from torch.nn.utils import prune as torch_prune
from oracle import message


def _prune(lib):
    return tg_prune if lib is tg else torch_prune


def _linear(lib, in_features=5, out_features=4):
    """A Linear with the same weights in both libraries, of distinct magnitudes (among equal
    ones topk's choice is not PyTorch's: ``test_ties_prune_as_many_of_the_same_size``)."""
    m = lib.nn.Linear(in_features, out_features)
    w = np.sin(np.arange(in_features * out_features) * 1.7 + 0.3) * 4
    with lib.no_grad():
        m.weight.copy_(lib.tensor(w.reshape(out_features, in_features)))
        m.bias.copy_(lib.tensor(np.linspace(-1, 1, out_features)))
    return m


def _conv(lib):
    m = lib.nn.Conv2d(3, 4, 2)
    w = np.cos(np.arange(4 * 3 * 2 * 2) * 0.9).reshape(4, 3, 2, 2)
    with lib.no_grad():
        m.weight.copy_(lib.tensor(w))
    return m


def _state(m):
    return {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}


def _assert_same_module(mine, theirs):
    a, b = _state(mine), _state(theirs)
    assert list(a) == list(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert sorted(n for n, _ in mine.named_parameters()) == \
        sorted(n for n, _ in theirs.named_parameters())
    assert sorted(n for n, _ in mine.named_buffers()) == \
        sorted(n for n, _ in theirs.named_buffers())
    np.testing.assert_array_equal(mine.weight.detach().numpy(), theirs.weight.detach().numpy())


STEPS = {
    "identity": lambda P, m: P.identity(m, "weight"),
    "l1_int": lambda P, m: P.l1_unstructured(m, "weight", amount=7),
    "l1_frac": lambda P, m: P.l1_unstructured(m, "weight", amount=0.35),
    "l1_zero": lambda P, m: P.l1_unstructured(m, "weight", amount=0),
    "l1_all": lambda P, m: P.l1_unstructured(m, "weight", amount=1.0),
    "random_unstructured": lambda P, m: P.random_unstructured(m, "weight", amount=0.4),
    "random_structured_0": lambda P, m: P.random_structured(m, "weight", amount=2, dim=0),
    "random_structured_neg": lambda P, m: P.random_structured(m, "weight", amount=0.4, dim=-1),
    "ln_1": lambda P, m: P.ln_structured(m, "weight", amount=1, n=1, dim=0),
    "ln_2": lambda P, m: P.ln_structured(m, "weight", amount=0.5, n=2, dim=1),
    "ln_inf": lambda P, m: P.ln_structured(m, "weight", amount=2, n=float("inf"), dim=-1),
    "ln_zero": lambda P, m: P.ln_structured(m, "weight", amount=0, n=2, dim=0),
    "bias_l1": lambda P, m: P.l1_unstructured(m, "bias", amount=2),
}


def _run_steps(lib, names, seed=3):
    lib.manual_seed(seed)
    m = _linear(lib)
    for name in names:
        STEPS[name](_prune(lib), m)
    return m


@pytest.mark.parametrize("name", sorted(STEPS))
def test_one_pruning_matches(name):
    _assert_same_module(_run_steps(tg, [name]), _run_steps(torch, [name]))


ITERATIVE = [
    ["l1_frac", "random_structured_0"],
    ["random_unstructured", "l1_int"],
    ["ln_2", "l1_frac", "ln_1"],
    ["random_structured_0", "random_structured_neg", "random_unstructured"],
    ["identity", "ln_inf", "l1_zero", "bias_l1"],
]


@pytest.mark.parametrize("names", ITERATIVE, ids="+".join)
def test_iterative_pruning_matches(names):
    mine, theirs = _run_steps(tg, names), _run_steps(torch, names)
    _assert_same_module(mine, theirs)
    hook_types = [[type(h).__name__ for h in m._forward_pre_hooks.values()]
                  for m in (mine, theirs)]
    assert hook_types[0] == hook_types[1]
    weight_hooks = [h for h in mine._forward_pre_hooks.values() if h._tensor_name == "weight"]
    if len([n for n in names if n != "bias_l1"]) > 1:
        assert isinstance(weight_hooks[0], tg_prune.PruningContainer)
        assert len(weight_hooks[0]) == len([n for n in names if n != "bias_l1"])


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_seeded_random_masks_match(seed):
    for names in (["random_unstructured"], ["random_structured_0"],
                  ["random_structured_neg", "random_unstructured"]):
        mine, theirs = _run_steps(tg, names, seed), _run_steps(torch, names, seed)
        np.testing.assert_array_equal(mine.weight_mask.numpy(), theirs.weight_mask.numpy())
    # the draws after pruning continue the same stream
    assert tg.rand(3).tolist() == torch.rand(3).tolist()


def _forward_backward(lib, names):
    m = _run_steps(lib, names)
    x = lib.tensor(np.cos(np.arange(10.0)).reshape(2, 5))
    (m(x) ** 2).sum().backward()
    return m


@pytest.mark.parametrize("names", [["l1_frac"], ["ln_2", "random_unstructured"],
                                   ["bias_l1", "ln_1"]], ids="+".join)
def test_gradients_reach_orig(names):
    mine, theirs = _forward_backward(tg, names), _forward_backward(torch, names)
    grads = [{n: p.grad.numpy() for n, p in m.named_parameters()} for m in (mine, theirs)]
    assert sorted(grads[0]) == sorted(grads[1])
    for n in grads[0]:
        np.testing.assert_allclose(grads[0][n], grads[1][n], rtol=1e-13, atol=1e-15, err_msg=n)
    # zero where pruned
    assert (grads[0]["weight_orig"][mine.weight_mask.numpy() == 0] == 0).all()
    assert isinstance(mine.weight_orig, tg.nn.Parameter)
    assert not isinstance(mine.weight, tg.nn.Parameter)


def test_ties_prune_as_many_of_the_same_size():
    # |w| with ties: which of the equal entries go is topk's choice among ties, documented
    # as differing from PyTorch's; the magnitudes pruned are the same
    w = np.round(np.sin(np.arange(20) * 1.7) * 4).reshape(4, 5) / 4
    pruned = []
    for lib in (tg, torch):
        m = _linear(lib)
        with lib.no_grad():
            m.weight.copy_(lib.tensor(w))
        _prune(lib).l1_unstructured(m, "weight", amount=7)
        mask = m.weight_mask.numpy()
        assert mask.sum() == 13
        pruned.append(sorted(np.abs(w[mask == 0])))
    assert pruned[0] == pruned[1]


def test_forward_recomputes_weight_from_orig():
    for lib in (tg, torch):
        P = _prune(lib)
        m = _linear(lib)
        P.l1_unstructured(m, "weight", amount=5)
        with lib.no_grad():
            m.weight_orig.mul_(2)
        m(lib.ones(1, 5))
        expected = (m.weight_orig * m.weight_mask).detach().numpy()
        np.testing.assert_array_equal(m.weight.detach().numpy(), expected)


def test_remove_and_is_pruned():
    results = []
    for lib in (tg, torch):
        P = _prune(lib)
        m = lib.nn.Sequential(_linear(lib), lib.nn.ReLU())
        before = P.is_pruned(m)
        orig = m[0].weight
        P.l1_unstructured(m[0], "weight", amount=0.5)
        assert m[0].weight_orig is orig
        during = P.is_pruned(m)
        P.remove(m[0], "weight")
        assert m[0].weight is orig and isinstance(orig, lib.nn.Parameter)
        results.append((before, during, P.is_pruned(m), list(m.state_dict()),
                        m[0].weight.detach().numpy().copy(), len(m[0]._forward_pre_hooks)))
    mine, theirs = results
    # (the parameter set back comes after the bias)
    assert mine[:4] == theirs[:4] == (False, True, False, ["0.bias", "0.weight"])
    np.testing.assert_array_equal(mine[4], theirs[4])
    assert mine[5] == theirs[5] == 0


def test_custom_from_mask_and_prune_method():
    mask = np.array([[1, 0, 1, 0, 1]] * 4, dtype=np.float64)
    out = []
    for lib in (tg, torch):
        P = _prune(lib)
        m = P.custom_from_mask(_linear(lib), "weight", mask=lib.tensor(mask))
        P.l1_unstructured(m, "weight", amount=3)
        # a custom mask after other pruning keeps what that pruned pruned
        P.custom_from_mask(m, "weight", mask=lib.tensor(mask[:, ::-1].copy()))
        t = lib.tensor(np.arange(6.0).reshape(2, 3) - 2)
        pruned = P.L1Unstructured(amount=2).prune(t)
        scored = P.RandomStructured(amount=0, dim=0).prune(t, importance_scores=-t)
        out.append((_state(m), pruned.numpy(), scored.numpy()))
    for a, b in zip(out[0][0].values(), out[1][0].values()):
        np.testing.assert_array_equal(a, b)
    assert out[0][0]["weight_mask"].sum() < 12
    np.testing.assert_array_equal(out[0][1], out[1][1])
    np.testing.assert_array_equal(out[0][2], out[1][2])


def test_importance_scores_and_global_unstructured():
    out = []
    for lib in (tg, torch):
        P = _prune(lib)
        a, b, c = _linear(lib), _linear(lib, 3, 2), _conv(lib)
        P.l1_unstructured(a, "weight", amount=0.2)   # a pruned tensor enters with its mask
        scores = {(b, "weight"): lib.tensor(np.arange(6.0)[::-1].copy().reshape(2, 3))}
        P.global_unstructured([(a, "weight"), (b, "weight"), (c, "weight"), (c, "bias")],
                              pruning_method=P.L1Unstructured, importance_scores=scores,
                              amount=15)
        P.ln_structured(c, "weight", amount=1, n=1, dim=1,
                        importance_scores=lib.tensor(
                            np.ones((4, 3, 2, 2)) * np.array([1.0, 3.0, 2.0])[:, None, None]))
        P.l1_unstructured(b, "bias", amount=1, importance_scores=lib.tensor([5.0, -6.0]))
        out.append([_state(m) for m in (a, b, c)])
    for mine, theirs in zip(*out):
        assert list(mine) == list(theirs)
        for k in mine:
            np.testing.assert_array_equal(mine[k], theirs[k], err_msg=k)


def test_container_api():
    out = []
    for lib in (tg, torch):
        P = _prune(lib)
        m = _linear(lib)
        P.l1_unstructured(m, "weight", amount=2)
        P.identity(m, "weight")
        (container,) = m._forward_pre_hooks.values()
        out.append((type(container).__name__, len(container),
                    [type(x).__name__ for x in container], type(container[1]).__name__,
                    container._tensor_name, P.Identity.PRUNING_TYPE,
                    P.RandomStructured.PRUNING_TYPE, P.CustomFromMask.PRUNING_TYPE,
                    issubclass(P.PruningContainer, P.BasePruningMethod)))
    assert out[0] == out[1]


def _error(fn):
    outcomes = []
    for lib in (tg, torch):
        try:
            fn(_prune(lib), lib)
        except Exception as e:  # noqa: BLE001 - the error is what is compared
            outcomes.append((type(e).__name__, message(e)))
        else:
            outcomes.append(None)
    return outcomes


ERRORS = {
    "amount_type": lambda P, lib: P.l1_unstructured(_linear(lib), "weight", amount="x"),
    "amount_negative": lambda P, lib: P.random_unstructured(_linear(lib), "weight", amount=-1),
    "amount_fraction": lambda P, lib: P.RandomUnstructured(1.5),
    "amount_too_big": lambda P, lib: P.l1_unstructured(_linear(lib), "weight", amount=21),
    "structured_1d": lambda P, lib: P.ln_structured(_linear(lib), "bias", 1, 2, 0),
    "bad_dim": lambda P, lib: P.random_structured(_linear(lib), "weight", 1, dim=2),
    "channels_too_many": lambda P, lib: P.ln_structured(_linear(lib), "weight", 6, 1, dim=1),
    "scores_shape": lambda P, lib: P.l1_unstructured(_linear(lib), "weight", 1,
                                                     importance_scores=lib.ones(3)),
    "remove_unpruned": lambda P, lib: P.remove(_linear(lib), "weight"),
    "global_not_iterable": lambda P, lib: P.global_unstructured(3, P.L1Unstructured, amount=1),
    "global_scores_type": lambda P, lib: P.global_unstructured(
        [(_linear(lib), "weight")], P.L1Unstructured, importance_scores=[1], amount=1),
    "global_structured": lambda P, lib: P.global_unstructured(
        [(_linear(lib), "weight")], P.RandomStructured, amount=1),
    "container_type": lambda P, lib: P.PruningContainer(P.Identity(), 3),
    "custom_shape": lambda P, lib: P.custom_from_mask(_linear(lib), "weight", lib.ones(2)),
    "abstract": lambda P, lib: P.BasePruningMethod(),
    # the scores are flattened by view, as parameters_to_vector flattens them
    "global_scores_not_contiguous": lambda P, lib: (lambda m: P.global_unstructured(
        [(m, "weight")], P.L1Unstructured, importance_scores={(m, "weight"): lib.ones(5, 4).t()},
        amount=1))(_linear(lib)),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_match(name):
    mine, theirs = _error(ERRORS[name])
    assert theirs is not None
    assert mine == theirs


def test_refused_pruning_leaves_module_unpruned():
    keys = []
    for lib in (tg, torch):
        P = _prune(lib)
        m = _linear(lib)
        with pytest.raises(ValueError):
            P.l1_unstructured(m, "weight", amount=100)
        assert isinstance(m.weight, lib.nn.Parameter)
        assert not P.is_pruned(m)
        keys.append(list(m.state_dict()))
    assert keys[0] == keys[1] == ["bias", "weight"]


def test_importable_paths():
    import tapegrad.nn.utils.prune as by_import
    from tapegrad.nn.utils import prune as by_from
    assert by_import is by_from is tg.nn.utils.prune
    assert sorted(n for n in dir(torch_prune) if not n.startswith("_") and
                  n not in ("ABC", "Iterable", "abstractmethod", "numbers", "torch")) == \
        sorted(tg_prune.__all__)


def test_seeded_training_step_matches():
    # the usual program: seeded init, prune, an optimizer over parameters(), a step,
    # a state dict loaded into another pruned module
    out = []
    for lib in (tg, torch):
        P = _prune(lib)
        lib.manual_seed(5)
        m = lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.Tanh(), lib.nn.Linear(3, 2))
        P.random_unstructured(m[0], "weight", 0.5)
        P.ln_structured(m[2], "weight", amount=1, n=2, dim=0)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        x = lib.tensor(np.cos(np.arange(8.0)).reshape(2, 4))
        m(x).pow(2).sum().backward()
        opt.step()
        other = lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.Tanh(), lib.nn.Linear(3, 2))
        P.identity(other[0], "weight")
        P.identity(other[2], "weight")
        other.load_state_dict(m.state_dict())
        out.append((_state(m), m(x).detach().numpy(), other(x).detach().numpy()))
    assert list(out[0][0]) == list(out[1][0])
    for k in out[0][0]:
        np.testing.assert_allclose(out[0][0][k], out[1][0][k], rtol=1e-14, atol=1e-16, err_msg=k)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-13)
    np.testing.assert_array_equal(out[0][1], out[0][2])
