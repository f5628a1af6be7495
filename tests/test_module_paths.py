"""PyTorch's module paths: ``from torch.nn.modules.loss import _Loss``, ``from
torch.autograd import Variable``, ``from torch.distributions.normal import Normal``, ...
work with ``tapegrad`` for ``torch``, give the objects tapegrad exposes under their public
names, and hold no name PyTorch's module of that path lacks.  Beside them, what those
imports are for: PyTorch's loss bases (``_Loss(size_average, reduce, reduction)``,
``_WeightedLoss``), ``Variable`` and the argument helpers of ``nn.modules.utils``, compared
with PyTorch."""
import collections
import importlib
import re
import sys
import typing
import warnings

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import _module_paths
from oracle import outcome

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("path", sorted(_module_paths.PATHS))
def test_path_imports_and_holds_pytorchs_names(path):
    ours = importlib.import_module(f"tapegrad.{path}")
    theirs = importlib.import_module(f"torch.{path}")
    sources, names = _module_paths.PATHS[path]
    found, missing = _module_paths.resolve(tg, sources, names)
    assert missing == []                       # every listed name is defined in tapegrad
    assert set(found) <= set(vars(ours))
    for name in found:
        assert hasattr(theirs, name), f"torch.{path} has no {name}"
        ours_obj = getattr(ours, name)
        assert ours_obj is found[name]
        # a class or function of PyTorch's is one of tapegrad's of the same name
        assert getattr(ours_obj, "__name__", name) == getattr(getattr(theirs, name),
                                                              "__name__", name)
    # reachable as an attribute chain too where PyTorch's is, as torch.nn.modules.loss is
    # (torch.nn.utils.weight_norm names the function, in both; torch.optim.adamw is no
    # attribute of torch.optim, which drops its submodules' names)
    obj, their_obj = tg, torch
    for part in path.split("."):
        obj, their_obj = getattr(obj, part), getattr(their_obj, part, None)
    if their_obj is None:
        return
    if type(their_obj) is type(theirs):
        assert obj is ours
    else:
        assert type(obj) is type(their_obj) and obj.__name__ == their_obj.__name__


def test_install_finds_every_name():
    assert _module_paths.install(tg) == {}


def test_from_imports_as_programs_write_them():
    from tapegrad.autograd import Variable
    from tapegrad.distributions.categorical import Categorical
    from tapegrad.distributions.normal import Normal
    from tapegrad.nn.modules.batchnorm import _BatchNorm
    from tapegrad.nn.modules.conv import _ConvNd
    from tapegrad.nn.modules.loss import _Loss, _WeightedLoss
    from tapegrad.nn.modules.utils import _pair
    from tapegrad.utils.data.dataloader import DataLoader
    from tapegrad.utils.data.dataset import Dataset
    assert Normal is tg.distributions.Normal and Categorical is tg.distributions.Categorical
    assert issubclass(tg.nn.BatchNorm1d, _BatchNorm) and issubclass(tg.nn.Conv2d, _ConvNd)
    assert issubclass(tg.nn.MSELoss, _Loss) and issubclass(tg.nn.NLLLoss, _WeightedLoss)
    assert DataLoader is tg.utils.data.DataLoader and Dataset is tg.utils.data.Dataset
    assert _pair(3) == (3, 3)
    assert isinstance(tg.zeros(2), Variable)


# --- the loss bases ---------------------------------------------------------------------------
LOSSES = sorted(n for n in dir(torch.nn) if n.endswith("Loss") and hasattr(tg.nn, n)
                and n not in ("NLLLoss2d", "AdaptiveLogSoftmaxWithLoss"))


@pytest.mark.parametrize("name", LOSSES)
def test_loss_classes_have_pytorchs_bases(name):
    def bases(L):
        return [k.__name__ for k in getattr(L.nn, name).__mro__
                if k.__name__ in ("_Loss", "_WeightedLoss", "Module")]
    assert bases(tg) == bases(torch)


LOSS_CASES = [
    "L.nn.NLLLoss(None, None, 1).ignore_index",
    "L.nn.CrossEntropyLoss(None, None, 2, None, 'sum').reduction",
    "L.nn.CrossEntropyLoss(L.tensor([1.0, 2.0]), None, 2, None, 'sum', 0.1).label_smoothing",
    "L.nn.BCELoss(None, False).reduction",
    "L.nn.BCEWithLogitsLoss(None, None, False).reduction",
    "L.nn.MSELoss(False).reduction", "L.nn.L1Loss(None, False).reduction",
    "L.nn.NLLLoss(size_average=False).reduction",
    "L.nn.CrossEntropyLoss(reduce=False).reduction",
    "L.nn.CrossEntropyLoss(L.tensor([1.0, 2.0])).weight",
    "sorted(L.nn.CrossEntropyLoss(L.tensor([1.0, 2.0])).state_dict())",
    "sorted(L.nn.BCEWithLogitsLoss(pos_weight=L.tensor([2.0])).state_dict())",
    "L.nn.modules.loss._Loss(None, None, 'sum').reduction",
    "L.nn.modules.loss._Loss(False, True).reduction",
    "L.nn.modules.loss._WeightedLoss(L.tensor([1.0]), None, None, 'none').weight",
    "L.nn.modules.loss._WeightedLoss().weight",
    "L.nn.HuberLoss('sum', 2.0).reduction", "L.nn.CTCLoss(0, 'sum').reduction",
    "L.nn.MultiMarginLoss(2, 0.5, None, None, None, 'none').reduction",
    "L.nn.NLLLoss()(L.log_softmax(L.tensor([[1.0, 2.0], [0.5, 0.1]]), 1), L.tensor([1, 0]))",
]


@pytest.mark.parametrize("expr", LOSS_CASES)
def test_loss_constructors_as_pytorch(expr):
    def run(L):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")      # size_average/reduce's deprecation
            return eval(expr, {"L": L})
    assert outcome(tg, run) == outcome(torch, run)


def test_legacy_arguments_warn_as_pytorch_does():
    for L in (tg, torch):
        with pytest.warns(UserWarning, match=r"size_average and reduce args will be "
                                             r"deprecated, please use reduction='sum'"):
            L.nn.NLLLoss(size_average=False)


def _focal(L):
    """A custom loss as programs write one: a _WeightedLoss subclass, built positionally."""
    class Focal(L.nn.modules.loss._WeightedLoss):
        def __init__(self, weight=None, gamma=2.0, reduction="mean"):
            super().__init__(weight, None, None, reduction)
            self.gamma = gamma

        def forward(self, logits, target):
            logp = L.log_softmax(logits, 1)
            p = logp.exp()
            loss = L.nn.functional.nll_loss((1 - p) ** self.gamma * logp, target,
                                            weight=self.weight, reduction=self.reduction)
            return loss
    x = L.tensor(np.linspace(-1.0, 1.5, 12).reshape(4, 3), requires_grad=True)
    loss = Focal(L.tensor([1.0, 2.0, 0.5]))(x, L.tensor([0, 2, 1, 1]))
    loss.backward()
    return loss, x.grad, sorted(Focal().state_dict())


def test_custom_weighted_loss_as_pytorch():
    ours, theirs = _focal(tg), _focal(torch)
    np.testing.assert_allclose(ours[0].item(), theirs[0].item(), rtol=1e-13)
    np.testing.assert_allclose(ours[1].numpy(), theirs[1].numpy(), rtol=1e-12, atol=1e-15)
    assert ours[2] == theirs[2]


# --- Variable ---------------------------------------------------------------------------------
VARIABLE_CASES = [
    "V(L.ones(3))", "V(L.ones(3)).requires_grad", "V(L.ones(3), requires_grad=True)",
    "V(L.ones(3), True).is_leaf", "V(L.ones(3), True).grad_fn",
    "V((L.ones(3, requires_grad=True) * 2)).requires_grad",
    "V((L.ones(3, requires_grad=True) * 2)).is_leaf",
    "V(L.ones(3, requires_grad=True), requires_grad=True).is_leaf",
    "V().shape", "V(None).shape", "V([1.0, 2.0])", "V(3)", "V(np.ones(2))",
    "V(L.tensor([1, 2]), requires_grad=True)", "V(L.ones(2), foo=1)",
    "isinstance(L.zeros(2), V)", "isinstance(3, V)", "isinstance(np.zeros(2), V)",
    "issubclass(L.Tensor, V)", "V.__name__", "V.__module__", "type(V(L.ones(2))).__name__",
    "L.autograd.Variable is sys.modules[L.__name__ + '.autograd.variable'].Variable",
    "L.autograd.variable(L.ones(2))",
]


@pytest.mark.parametrize("expr", VARIABLE_CASES)
def test_variable_as_pytorch(expr):
    def run(L):
        result = eval(expr, {"L": L, "V": L.autograd.Variable, "np": np, "sys": sys})
        return result.replace("torch", "tapegrad") if isinstance(result, str) else result
    assert outcome(tg, run) == outcome(torch, run)


def test_variable_shares_memory_and_version_with_its_data():
    for L in (tg, torch):
        x = L.ones(3, dtype=L.float64)
        v = L.autograd.Variable(x, requires_grad=True)
        with L.no_grad():
            v[0] = 5.0
        assert x[0].item() == 5.0
        x[1] = 7.0
        assert v[1].item() == 7.0
        (v * v).sum().backward()
        assert v.grad.tolist() == [10.0, 14.0, 2.0]
        assert x.grad is None


def test_variable_volatile_warns_and_has_no_effect():
    for L in (tg, torch):
        with pytest.warns(UserWarning, match=r"volatile was removed and now has no effect\. "
                                             r"Use `with torch\.no_grad\(\):` instead\."):
            v = L.autograd.Variable(L.ones(2), volatile=True)
        assert not v.requires_grad


# --- nn.modules.utils -------------------------------------------------------------------------
UTILS_CASES = [
    "U._pair(3)", "U._pair((1, 2))", "U._pair([1, 2, 3])", "U._single(4)", "U._triple(2)",
    "U._quadruple(0)", "U._ntuple(5)(1)", "U._ntuple(2, 'x')('ab')", "U._pair(None)",
    "U._ntuple(2, 'named').__name__", "U._pair.__name__",
    "U._reverse_repeat_tuple((1, 2, 3), 2)", "U._reverse_repeat_tuple((), 2)",
    "U._list_with_default([None, 3], [1, 2, 5, 6])", "U._list_with_default(4, [1, 2])",
    "U._list_with_default([None, 3], [5, 6])",
]


@pytest.mark.parametrize("expr", UTILS_CASES)
def test_module_utils_as_pytorch(expr):
    def run(L):
        return eval(expr, {"U": importlib.import_module(f"{L.__name__}.nn.modules.utils")})
    assert outcome(tg, run) == outcome(torch, run)


def test_consume_prefix_as_pytorch():
    def run(L):
        U = importlib.import_module(f"{L.__name__}.nn.modules.utils")
        sd = collections.OrderedDict([("module.fc.weight", 1), ("other", 2),
                                      ("module.fc.bias", 3)])
        sd._metadata = collections.OrderedDict([("", {"v": 1}), ("module", {"v": 2}),
                                                ("module.fc", {"v": 3})])
        U.consume_prefix_in_state_dict_if_present(sd, "module.")
        return list(sd.items()), list(sd._metadata.items())
    assert run(tg) == run(torch)


def test_a_real_model_loads_a_wrapped_state_dict():
    model = tg.nn.Sequential(tg.nn.Linear(2, 2))
    sd = collections.OrderedDict((f"module.{k}", v.clone()) for k, v in
                                 model.state_dict().items())
    tg.nn.modules.utils.consume_prefix_in_state_dict_if_present(sd, "module.")
    model.load_state_dict(sd)


# --- types ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["Number", "Device", "_size", "_Number", "_dtype", "_device",
                                  "_TensorOrTensors", "FileLike"])
def test_types_name_what_pytorchs_do(name):
    def spelled(L):
        obj = getattr(importlib.import_module(f"{L.__name__}.types"), name)
        args = typing.get_args(obj) or (obj if isinstance(obj, tuple) else (obj,))
        # (classes by their names: tapegrad's device is tapegrad._device.device)
        return [re.sub(r"[\w.]*\.(\w+)", r"\1", str(a)) for a in args]
    assert spelled(tg) == spelled(torch)


# --- hook handles -----------------------------------------------------------------------------
HANDLES = [
    "x.register_hook(lambda g: g)", "x.register_post_accumulate_grad_hook(lambda t: None)",
    "m.register_forward_hook(lambda *a: None)", "m.register_forward_pre_hook(lambda *a: None)",
    "m.register_full_backward_hook(lambda *a: None)",
    "m.register_full_backward_pre_hook(lambda *a: None)",
    "L.nn.modules.module.register_module_forward_hook(lambda *a: None)",
    "L.nn.modules.module.register_module_forward_pre_hook(lambda *a: None)",
]


@pytest.mark.parametrize("expr", HANDLES)
def test_every_hook_handle_is_a_removable_handle(expr):
    for L in (tg, torch):
        from_path = importlib.import_module(f"{L.__name__}.utils.hooks").RemovableHandle
        x = L.ones(2, dtype=L.float64, requires_grad=True)
        m = L.nn.Linear(2, 2)
        handle = eval(expr, {"L": L, "x": x, "m": m})
        try:
            assert isinstance(handle, from_path)
            assert isinstance(handle.id, int)
        finally:
            handle.remove()


def test_handle_ids_are_unique_across_modules_and_tensors():
    x = tg.ones(2, requires_grad=True)
    m1, m2 = tg.nn.Linear(2, 2), tg.nn.Linear(2, 2)
    handles = [m1.register_forward_hook(lambda *a: None), x.register_hook(lambda g: g),
               m2.register_forward_hook(lambda *a: None), x.register_hook(lambda g: g)]
    assert len({h.id for h in handles}) == 4
    with handles[0]:
        assert len(m1._forward_hooks) == 1
    assert len(m1._forward_hooks) == 0          # (removed on leaving the block)
    handles[1].remove()
    handles[1].remove()                          # (twice: nothing more happens)
    seen = []
    handles[3].remove()
    x.register_hook(lambda g: seen.append(g.tolist()))
    (x * 2).sum().backward()
    assert seen == [[2.0, 2.0]]
