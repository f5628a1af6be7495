"""tapegrad.nn: Module and Parameter behaviour, layers, init, and every functional's values and
gradients -- against NumPy formulas and finite differences always, and against torch.nn where
torch is installed (tests taking the ``torch`` fixture skip without it)."""
import copy
import math
from collections import OrderedDict

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn, optim
from tapegrad.nn import functional as F
from tapegrad.nn import init
from tapegrad.testing import gradcheck

RTOL = 1e-12


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def rng(seed=0):
    return np.random.default_rng(seed)


def val(t):
    return t.detach().numpy()


def leaf(a):
    return tg.tensor(a, requires_grad=True)


# =============================================================================================
# Parameter
# =============================================================================================


def test_parameter_is_a_leaf_tensor_requiring_grad():
    data = tg.zeros(3)
    p = nn.Parameter(data)
    assert isinstance(p, tg.Tensor) and isinstance(p, nn.Parameter)
    assert p.is_leaf and p.requires_grad and p.grad is None
    assert np.shares_memory(val(p), data.numpy())
    assert not nn.Parameter(tg.ones(2), requires_grad=False).requires_grad
    assert nn.Parameter().shape == (0,)


def test_parameter_ops_give_plain_tensors_and_gradients():
    p = nn.Parameter(tg.tensor([1.0, 2.0]))
    y = p * 3.0
    assert type(y) is tg.Tensor and not y.is_leaf
    y.sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), [3.0, 3.0])


def test_parameter_of_a_computed_tensor_owns_its_value():
    x = leaf([1.0, 2.0])
    p = nn.Parameter(x * 2.0)
    assert p.is_leaf and p.grad_fn is None
    np.testing.assert_array_equal(val(p), [2.0, 4.0])


def test_parameter_repr_and_deepcopy():
    p = nn.Parameter(tg.tensor([1.0, 2.5]))
    assert repr(p) == "Parameter containing:\ntensor([1.0000, 2.5000], requires_grad=True)"
    assert str(p) == repr(p)
    q = copy.deepcopy(p)
    assert type(q) is nn.Parameter and q.requires_grad
    assert not np.shares_memory(val(q), val(p))
    np.testing.assert_array_equal(val(q), val(p))


def test_parameter_rejects_non_tensors_and_integer_data():
    with pytest.raises(TypeError):
        nn.Parameter([1.0, 2.0])
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(tg.tensor([1, 2]))


# =============================================================================================
# Module
# =============================================================================================


class Net(nn.Module):
    """Own parameters registered around a child, to pin down PyTorch's traversal order."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(tg.ones(1))
        self.body = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
        self.shift = nn.Parameter(tg.zeros(2))
        self.note = "a plain attribute"

    def forward(self, x):
        return self.body(x) * self.scale + self.shift


NET_NAMES = ["scale", "shift", "body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias"]
NET_REPR = """Net(
  (body): Sequential(
    (0): Linear(in_features=3, out_features=4, bias=True)
    (1): Tanh()
    (2): Linear(in_features=4, out_features=2, bias=True)
  )
)"""
SEQ_REPR = """Sequential(
  (0): Linear(in_features=2, out_features=3, bias=True)
  (1): ReLU()
  (2): Linear(in_features=3, out_features=1, bias=True)
)"""


def test_parameters_in_registration_order_own_first():
    net = Net()
    assert [name for name, _ in net.named_parameters()] == NET_NAMES
    assert [id(p) for p in net.parameters()] == [id(p) for _, p in net.named_parameters()]
    assert [name for name, _ in net.named_parameters(recurse=False)] == ["scale", "shift"]
    assert net.note == "a plain attribute" and "note" not in dict(net.named_parameters())


def test_children_and_modules():
    net = Net()
    assert list(net.children()) == [net.body]
    assert [name for name, _ in net.named_modules()] == ["", "body", "body.0", "body.1", "body.2"]
    assert [type(m).__name__ for m in net.modules()] == ["Net", "Sequential", "Linear", "Tanh",
                                                         "Linear"]


def test_shared_modules_are_listed_once():
    layer = nn.Linear(2, 2)
    seq = nn.Sequential(layer, nn.ReLU(), layer)
    assert len(list(seq.parameters())) == 2
    assert [name for name, _ in seq.named_parameters()] == ["0.weight", "0.bias"]
    assert len(list(seq.modules())) == 3
    # state_dict names every path, as PyTorch does
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_repr_matches_pytorch_layout():
    assert repr(nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))) == SEQ_REPR
    assert repr(Net()) == NET_REPR
    assert repr(nn.Linear(3, 2, bias=False)) == "Linear(in_features=3, out_features=2, bias=False)"
    assert repr(nn.Dropout(0.25)) == "Dropout(p=0.25, inplace=False)"
    assert repr(nn.Softmax(dim=-1)) == "Softmax(dim=-1)"
    assert repr(nn.LogSoftmax(1)) == "LogSoftmax(dim=1)"
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"
    assert repr(nn.CrossEntropyLoss()) == "CrossEntropyLoss()"


def test_train_and_eval_propagate():
    net = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5), nn.Sequential(nn.Dropout(0.1)))
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError, match="^training mode is expected to be boolean$"):
        net.train("yes")


def test_zero_grad():
    net = Net()
    net(tg.randn(5, 3)).sum().backward()
    grads = [p.grad for p in net.parameters()]
    assert all(g is not None for g in grads)
    net.zero_grad(set_to_none=False)
    for p, g in zip(net.parameters(), grads):
        assert p.grad is g
        assert not np.any(g.numpy())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_setattr_registration_rules():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="cannot assign .* as parameter 'weight'"):
        m.weight = tg.zeros(2, 2)
    m.weight = nn.Parameter(tg.zeros(2, 2))         # a Parameter replaces it
    np.testing.assert_array_equal(val(m.weight), np.zeros((2, 2)))
    m.bias = None
    assert [name for name, _ in m.named_parameters()] == ["weight"]
    assert repr(m) == "Linear(in_features=2, out_features=2, bias=False)"
    m.extra = nn.Tanh()
    assert list(dict(m.named_children())) == ["extra"]
    del m.extra
    assert list(m.children()) == []
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nope'"):
        m.nope
    with pytest.raises(KeyError, match="parameter name can.*contain"):
        m.register_parameter("a.b", None)

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(tg.zeros(1))
    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


def test_forward_is_required():
    with pytest.raises(NotImplementedError, match='missing the required "forward" function'):
        nn.Module()(tg.zeros(1))


def test_sequential_container():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b, c)
    assert len(seq) == 3 and seq[0] is a and seq[-1] is c and list(seq) == [a, b, c]
    head = seq[:2]
    assert type(head) is nn.Sequential and list(head) == [a, b]
    named = nn.Sequential(OrderedDict([("fc", a), ("act", b)]))
    assert list(named.state_dict()) == ["fc.weight", "fc.bias"]
    x = tg.randn(4, 2)
    np.testing.assert_array_equal(val(seq(x)), val(c(b(a(x)))))
    with pytest.raises(IndexError):
        seq[3]


def test_state_dict_values_share_storage_and_are_detached():
    m = nn.Linear(3, 2)
    sd = m.state_dict()
    assert list(sd) == ["weight", "bias"]
    assert not sd["weight"].requires_grad
    assert np.shares_memory(sd["weight"].numpy(), val(m.weight))
    assert m.state_dict(keep_vars=True)["weight"] is m.weight


def test_load_state_dict_copies_in_place():
    src, dst = Net(), Net()
    weight = dst.body[0].weight
    version = weight._version
    result = dst.load_state_dict(src.state_dict())
    assert repr(result) == "<All keys matched successfully>"
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert dst.body[0].weight is weight and weight._version > version
    for (_, p), (_, q) in zip(src.named_parameters(), dst.named_parameters()):
        np.testing.assert_array_equal(val(p), val(q))
        assert not np.shares_memory(val(p), val(q))
    x = tg.randn(2, 3)
    np.testing.assert_array_equal(val(src(x)), val(dst(x)))


def test_load_state_dict_accepts_numpy_arrays():
    m = nn.Linear(2, 1)
    m.load_state_dict({"weight": np.array([[1.0, 2.0]]), "bias": np.array([0.5])})
    np.testing.assert_array_equal(val(m(tg.tensor([[1.0, 1.0]]))), [[3.5]])


def test_load_state_dict_key_errors():
    m = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    sd = m.state_dict()
    del sd["2.bias"]
    sd["2.extra"] = tg.zeros(1)
    with pytest.raises(RuntimeError) as info:
        m.load_state_dict(sd)
    assert str(info.value) == (
        'Error(s) in loading state_dict for Sequential:\n\t'
        'Missing key(s) in state_dict: "2.bias". \n\t'
        'Unexpected key(s) in state_dict: "2.extra". ')
    result = m.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["2.bias"] and result.unexpected_keys == ["2.extra"]


def test_load_state_dict_size_mismatch_raises_even_when_not_strict():
    m = nn.Linear(2, 3)
    sd = {"weight": tg.zeros(3, 3), "bias": tg.zeros(3)}
    with pytest.raises(RuntimeError) as info:
        m.load_state_dict(sd, strict=False)
    assert str(info.value) == (
        "Error(s) in loading state_dict for Linear:\n\tsize mismatch for weight: copying a "
        "param with shape tapegrad.Size([3, 3]) from checkpoint, the shape in current model "
        "is tapegrad.Size([3, 2]).")


def test_deepcopy_of_a_module_is_independent():
    net = Net()
    twin = copy.deepcopy(net)
    assert all(type(p) is nn.Parameter for p in twin.parameters())
    with tg.no_grad():
        init.zeros_(twin.body[0].weight)
    assert np.any(val(net.body[0].weight))


def test_buffers_are_state_but_not_parameters():
    m = nn.Module()
    m.register_buffer("running", tg.ones(2))
    m.register_buffer("scratch", tg.zeros(1), persistent=False)
    assert list(m.parameters()) == []
    assert [name for name, _ in m.named_buffers()] == ["running", "scratch"]
    assert list(m.state_dict()) == ["running"]


def test_loss_modules_keep_weights_as_buffers():
    loss = nn.CrossEntropyLoss(weight=tg.tensor([1.0, 2.0]))
    assert list(loss.state_dict()) == ["weight"]
    assert list(nn.CrossEntropyLoss().state_dict()) == []


# =============================================================================================
# Linear and init
# =============================================================================================


def test_linear_default_init_draws_uniform_weight_then_bias():
    import torch
    tg.manual_seed(123)
    torch.manual_seed(123)
    layer = nn.Linear(5, 3)
    # PyTorch's numbers: kaiming_uniform_ of the weight, then uniform_ of the bias, both
    # within 1 / sqrt(fan_in), drawn in float64 (a float32 layer's draws are other numbers)
    with torch.no_grad():
        w = torch.empty(3, 5, dtype=torch.float64)
        torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5))
        b = torch.empty(3, dtype=torch.float64).uniform_(-1 / math.sqrt(5), 1 / math.sqrt(5))
    np.testing.assert_array_equal(val(layer.weight), w.numpy())
    np.testing.assert_array_equal(val(layer.bias), b.numpy())
    assert np.all(np.abs(val(layer.weight)) <= 1 / math.sqrt(5))
    assert layer.weight.shape == (3, 5) and layer.bias.shape == (3,)


def test_linear_init_is_reproducible_and_seed_dependent():
    tg.manual_seed(1)
    a = nn.Linear(4, 4)
    tg.manual_seed(1)
    b = nn.Linear(4, 4)
    c = nn.Linear(4, 4)
    np.testing.assert_array_equal(val(a.weight), val(b.weight))
    assert not np.array_equal(val(b.weight), val(c.weight))


def test_linear_forward_and_gradients_match_numpy():
    layer = nn.Linear(3, 2)
    x = rng(1).standard_normal((5, 3))
    cot = rng(2).standard_normal((5, 2))
    y = layer(tg.tensor(x))
    w, b = val(layer.weight), val(layer.bias)
    np.testing.assert_allclose(val(y), x @ w.T + b, rtol=RTOL)
    y.backward(tg.tensor(cot))
    np.testing.assert_allclose(layer.weight.grad.numpy(), cot.T @ x, rtol=RTOL)
    np.testing.assert_allclose(layer.bias.grad.numpy(), cot.sum(0), rtol=RTOL)
    # a single sample without a batch dimension
    np.testing.assert_allclose(val(layer(tg.tensor(x[0]))), x[0] @ w.T + b, rtol=RTOL)


def test_linear_without_bias():
    layer = nn.Linear(3, 2, bias=False)
    assert layer.bias is None and [n for n, _ in layer.named_parameters()] == ["weight"]
    x = rng(3).standard_normal((2, 3))
    np.testing.assert_allclose(val(layer(tg.tensor(x))), x @ val(layer.weight).T, rtol=RTOL)


def test_linear_dtype_argument():
    assert nn.Linear(2, 3, dtype=tg.float64).weight.dtype == tg.float64
    with pytest.raises(TypeError, match="float64"):
        nn.Linear(2, 3, dtype=tg.float32)


def test_calculate_gain():
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("tanh") == 5.0 / 3
    assert init.calculate_gain("relu") == math.sqrt(2.0)
    assert init.calculate_gain("leaky_relu") == math.sqrt(2.0 / (1 + 0.01**2))
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == math.sqrt(2.0 / 6)
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="^Unsupported nonlinearity gelu$"):
        init.calculate_gain("gelu")


@pytest.mark.parametrize("fill, bound", [
    (lambda t: init.uniform_(t, -0.3, 0.7), (-0.3, 0.7)),
    (lambda t: init.xavier_uniform_(t), (-math.sqrt(6 / 300), math.sqrt(6 / 300))),
    (lambda t: init.xavier_uniform_(t, gain=2.0),
     (-2 * math.sqrt(6 / 300), 2 * math.sqrt(6 / 300))),
    (lambda t: init.kaiming_uniform_(t), (-math.sqrt(6 / 100), math.sqrt(6 / 100))),
    (lambda t: init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu"),
     (-math.sqrt(6 / 200), math.sqrt(6 / 200))),
])
def test_uniform_inits_fill_their_range(fill, bound):
    t = tg.empty(200, 100)
    before = t._version
    assert fill(t) is t
    assert t._version > before
    lo, hi = bound
    v = t.numpy()
    assert v.min() >= lo - 1e-12 and v.max() <= hi + 1e-12
    # 20000 draws: the extremes come within 1% of the bounds
    assert v.min() < lo + 0.01 * (hi - lo) and v.max() > hi - 0.01 * (hi - lo)


@pytest.mark.parametrize("fill, std", [
    (lambda t: init.normal_(t, 0.0, 0.3), 0.3),
    (lambda t: init.xavier_normal_(t), math.sqrt(2 / 300)),
    (lambda t: init.kaiming_normal_(t, nonlinearity="relu"), math.sqrt(2 / 100)),
    (lambda t: init.kaiming_normal_(t, mode="fan_out", nonlinearity="tanh"),
     (5 / 3) / math.sqrt(200)),
])
def test_normal_inits_have_their_std(fill, std):
    t = fill(tg.empty(200, 100))
    v = t.numpy()
    assert abs(v.mean()) < 4 * std / math.sqrt(v.size)
    assert abs(v.std() / std - 1) < 0.03


def test_init_draws_come_from_the_seeded_generator():
    import torch
    tg.manual_seed(5)
    torch.manual_seed(5)
    t = init.normal_(tg.empty(3, 4), 1.0, 2.0)
    theirs = torch.nn.init.normal_(torch.empty(3, 4, dtype=torch.float64), 1.0, 2.0)
    np.testing.assert_array_equal(t.numpy(), theirs.numpy())    # PyTorch's numbers


def test_constant_inits_and_parameters():
    p = nn.Parameter(tg.empty(2, 3))
    assert init.constant_(p, 0.25) is p
    np.testing.assert_array_equal(val(p), np.full((2, 3), 0.25))
    init.ones_(p)
    np.testing.assert_array_equal(val(p), np.ones((2, 3)))
    init.zeros_(p)
    np.testing.assert_array_equal(val(p), np.zeros((2, 3)))
    assert p.is_leaf and p.requires_grad and p.grad_fn is None


def test_init_errors():
    with pytest.raises(ValueError, match="^Fan in and fan out can not be computed for tensor "
                                         "with fewer than 2 dimensions$"):
        init.xavier_uniform_(tg.empty(3))
    with pytest.raises(ValueError, match="^Mode fan_avg not supported"):
        init.kaiming_normal_(tg.empty(2, 2), mode="fan_avg")
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        init.kaiming_uniform_(tg.empty(0, 3))


def test_fan_counts_receptive_field():
    t = tg.empty(8, 4, 3, 3)
    assert init._calculate_fan_in_and_fan_out(t) == (36, 72)


# =============================================================================================
# Functional: values against NumPy formulas, gradients against finite differences
# =============================================================================================

X = rng(10).standard_normal((6, 4))
TARGET = np.array([0, 3, 1, 1, 2, 0])


def np_log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def test_activations_match_numpy():
    x = np.array([-2.0, -0.5, 0.0, 0.5, 3.0])
    np.testing.assert_array_equal(val(F.relu(tg.tensor(x))), np.maximum(x, 0))
    np.testing.assert_allclose(val(F.tanh(tg.tensor(x))), np.tanh(x), rtol=RTOL)
    np.testing.assert_allclose(val(F.sigmoid(tg.tensor(x))), 1 / (1 + np.exp(-x)), rtol=RTOL)
    for module, fn in ((nn.ReLU(), F.relu), (nn.Tanh(), F.tanh), (nn.Sigmoid(), F.sigmoid)):
        np.testing.assert_array_equal(val(module(tg.tensor(x))), val(fn(tg.tensor(x))))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_and_log_softmax_match_numpy(dim):
    x = rng(11).standard_normal((3, 4, 5)) * 5
    lsm = np_log_softmax(x, dim)
    np.testing.assert_allclose(val(F.log_softmax(tg.tensor(x), dim)), lsm, rtol=RTOL, atol=1e-14)
    np.testing.assert_allclose(val(F.softmax(tg.tensor(x), dim)), np.exp(lsm), rtol=1e-12)
    np.testing.assert_allclose(val(nn.LogSoftmax(dim)(tg.tensor(x))), lsm, rtol=RTOL, atol=1e-14)
    np.testing.assert_allclose(val(nn.Softmax(dim)(tg.tensor(x))), np.exp(lsm), rtol=1e-12)


def test_softmax_without_dim_warns_and_picks_pytorchs_dim():
    x = tg.tensor(X)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        y = F.softmax(x)
    np.testing.assert_array_equal(val(y), val(F.softmax(x, 1)))
    with pytest.warns(UserWarning, match="Implicit dimension choice for log_softmax"):
        y = F.log_softmax(tg.tensor(X[0]))
    np.testing.assert_array_equal(val(y), val(F.log_softmax(tg.tensor(X[0]), 0)))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses_match_numpy(reduction):
    y = rng(12).standard_normal(X.shape)
    reduce = {"mean": np.mean, "sum": np.sum, "none": lambda a: a}[reduction]
    np.testing.assert_allclose(val(F.mse_loss(tg.tensor(X), tg.tensor(y), reduction=reduction)),
                               reduce((X - y) ** 2), rtol=RTOL)
    np.testing.assert_allclose(val(F.l1_loss(tg.tensor(X), tg.tensor(y), reduction=reduction)),
                               reduce(np.abs(X - y)), rtol=RTOL)
    np.testing.assert_allclose(val(nn.MSELoss(reduction=reduction)(tg.tensor(X), tg.tensor(y))),
                               reduce((X - y) ** 2), rtol=RTOL)
    np.testing.assert_allclose(val(nn.L1Loss(reduction=reduction)(tg.tensor(X), tg.tensor(y))),
                               reduce(np.abs(X - y)), rtol=RTOL)


def test_mse_loss_warns_on_broadcasting_target():
    with pytest.warns(UserWarning, match="Using a target size .* different to the input size"):
        F.mse_loss(tg.tensor(X), tg.tensor(X[0]))


def test_bad_reduction():
    with pytest.raises(ValueError, match="^elementwise is not a valid value for reduction$"):
        F.mse_loss(tg.tensor(X), tg.tensor(X), reduction="elementwise")


def test_cross_entropy_matches_numpy():
    nll = -np_log_softmax(X, 1)[np.arange(6), TARGET]
    t = tg.tensor(TARGET)
    np.testing.assert_allclose(val(F.cross_entropy(tg.tensor(X), t)), nll.mean(), rtol=RTOL)
    np.testing.assert_allclose(val(F.cross_entropy(tg.tensor(X), t, reduction="sum")), nll.sum(),
                               rtol=RTOL)
    np.testing.assert_allclose(val(F.cross_entropy(tg.tensor(X), t, reduction="none")), nll,
                               rtol=RTOL)
    np.testing.assert_allclose(val(nn.CrossEntropyLoss()(tg.tensor(X), t)), nll.mean(), rtol=RTOL)
    np.testing.assert_allclose(val(F.nll_loss(F.log_softmax(tg.tensor(X), 1), t)), nll.mean(),
                               rtol=RTOL)
    np.testing.assert_allclose(val(nn.NLLLoss()(F.log_softmax(tg.tensor(X), 1), t)), nll.mean(),
                               rtol=RTOL)


def test_cross_entropy_weight_and_ignore_index():
    w = np.array([1.0, 2.0, 0.5, 3.0])
    target = TARGET.copy()
    target[[1, 4]] = -1
    nll = -np_log_softmax(X, 1)[np.arange(6), np.where(target < 0, 0, target)]
    kept = target >= 0
    wt = np.where(kept, w[np.where(kept, target, 0)], 0.0)
    out = F.cross_entropy(tg.tensor(X), tg.tensor(target), weight=tg.tensor(w), ignore_index=-1)
    np.testing.assert_allclose(val(out), (wt * nll).sum() / wt.sum(), rtol=RTOL)
    none = F.cross_entropy(tg.tensor(X), tg.tensor(target), weight=tg.tensor(w), ignore_index=-1,
                           reduction="none")
    np.testing.assert_allclose(val(none), wt * nll, rtol=RTOL)
    plain = F.cross_entropy(tg.tensor(X), tg.tensor(target), ignore_index=-1)
    np.testing.assert_allclose(val(plain), nll[kept].mean(), rtol=RTOL)


def test_cross_entropy_shapes():
    # one sample without batch dimension
    out = F.cross_entropy(tg.tensor(X[0]), tg.tensor(2))
    np.testing.assert_allclose(val(out), -np_log_softmax(X[0], 0)[2], rtol=RTOL)
    # (N, C, d) scores with (N, d) targets
    x = rng(13).standard_normal((2, 3, 4))
    t = rng(14).integers(0, 3, (2, 4))
    lsm = np_log_softmax(x, 1)
    expected = -np.take_along_axis(lsm, t[:, None, :], axis=1)[:, 0, :]
    none = F.cross_entropy(tg.tensor(x), tg.tensor(t), reduction="none")
    assert none.shape == (2, 4)
    np.testing.assert_allclose(val(none), expected, rtol=RTOL)
    np.testing.assert_allclose(val(F.cross_entropy(tg.tensor(x), tg.tensor(t))), expected.mean(),
                               rtol=RTOL)


def test_cross_entropy_with_probability_targets():
    p = rng(15).random(X.shape)
    p /= p.sum(1, keepdims=True)
    expected = -(p * np_log_softmax(X, 1)).sum(1)
    np.testing.assert_allclose(val(F.cross_entropy(tg.tensor(X), tg.tensor(p))), expected.mean(),
                               rtol=RTOL)


def test_nll_loss_errors():
    logp = F.log_softmax(tg.tensor(X), 1)
    with pytest.raises(IndexError, match="^Target 4 is out of bounds.$"):
        F.nll_loss(logp, tg.tensor([0, 1, 4, 0, 0, 0]))
    with pytest.raises(ValueError, match=r"^Expected input batch_size \(6\) to match target "
                                         r"batch_size \(2\).$"):
        F.nll_loss(logp, tg.tensor([0, 1]))


def test_binary_cross_entropy_matches_numpy():
    x = rng(16).uniform(0.01, 0.99, (5, 3))
    t = rng(17).random((5, 3))
    expected = -(t * np.log(x) + (1 - t) * np.log1p(-x))
    np.testing.assert_allclose(val(F.binary_cross_entropy(tg.tensor(x), tg.tensor(t))),
                               expected.mean(), rtol=RTOL)
    w = rng(18).random(3)
    np.testing.assert_allclose(
        val(nn.BCELoss(weight=tg.tensor(w), reduction="none")(tg.tensor(x), tg.tensor(t))),
        expected * w, rtol=RTOL)


def test_binary_cross_entropy_at_zero_and_one_is_floored_and_finite():
    x = leaf([0.0, 1.0, 0.0, 1.0])
    t = tg.tensor([1.0, 0.0, 0.0, 1.0])
    loss = F.binary_cross_entropy(x, t, reduction="none")
    np.testing.assert_array_equal(val(loss), [100.0, 100.0, 0.0, 0.0])
    loss.sum().backward()
    assert np.all(np.isfinite(x.grad.numpy()))


_BCE_INPUTS = [0.0, 1.0, 0.5, 1e-300, 1e-13, 1 - 1e-16, 0.999999, 0.25, 0.0, 1.0, 0.7, 1e-200]
_BCE_TARGETS = [0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.3, 0.25, 1.0, 0.0, 0.7, 0.5]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy_matches_pytorch_at_the_edges(torch, reduction, weighted):
    """Values and both gradients as PyTorch's kernel gives them at probabilities of exactly
    0 and 1, next to them, and where the input equals its target (gradient 0, not nan)."""
    w = np.linspace(0.5, 2.0, len(_BCE_INPUTS))
    results = []
    for lib in (tg, torch):
        x = lib.tensor(_BCE_INPUTS, dtype=lib.float64, requires_grad=True)
        t = lib.tensor(_BCE_TARGETS, dtype=lib.float64, requires_grad=True)
        weight = lib.tensor(w, dtype=lib.float64) if weighted else None
        loss = lib.nn.functional.binary_cross_entropy(x, t, weight=weight, reduction=reduction)
        name = loss.grad_fn.name()
        loss.backward(lib.ones_like(loss))
        results.append((loss.detach().numpy(), x.grad.numpy(), t.grad.numpy(), name))
    (value, gx, gt, name), (tvalue, tgx, tgt, tname) = results
    np.testing.assert_allclose(value, tvalue, rtol=1e-14, atol=0)
    np.testing.assert_allclose(gx, tgx, rtol=1e-14, atol=0)
    np.testing.assert_allclose(gt, tgt, rtol=1e-14, atol=0)
    if reduction == "none" and not weighted:
        assert name == tname == "BinaryCrossEntropyBackward0"


def test_binary_cross_entropy_replays_and_differentiates_twice_as_pytorch(torch):
    fn = lambda lib, x, t: lib.nn.functional.binary_cross_entropy(x, t)  # noqa: E731
    compiled = tg.compile(lambda x, t: fn(tg, x, t))
    rng_ = rng(23)
    for k in range(4):
        x = rng_.uniform(0.02, 0.98, 6)
        x[k] = [0.0, 1.0, 1e-300, 0.5][k]
        t = rng_.random(6)
        ours = []
        for f in (lambda a, b: fn(tg, a, b), compiled):
            xt, tt = tg.tensor(x, requires_grad=True), tg.tensor(t, requires_grad=True)
            loss = f(xt, tt)
            loss.backward()
            ours.append((loss.item(), xt.grad.numpy(), tt.grad.numpy()))
        xt, tt = torch.tensor(x, requires_grad=True), torch.tensor(t, requires_grad=True)
        loss = fn(torch, xt, tt)
        loss.backward()
        for value, gx, gt in ours:
            np.testing.assert_allclose(value, loss.item(), rtol=1e-14)
            np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-13)
            np.testing.assert_allclose(gt, tt.grad.numpy(), rtol=1e-13)
    assert compiled.stats.replays >= 3
    # second order through create_graph: the exact second derivative of the mean loss,
    # (x^2 - 2xt + t) / (x^2 (1 - x)^2) / n on the diagonal.  PyTorch's double backward adds
    # 1e-12 to x and to 1 - x in that denominator, 4e-11 relative off here: it agrees to 1e-9.
    x = rng_.uniform(0.05, 0.95, 5)
    t = rng_.random(5)
    hs = [lib.autograd.functional.hessian(lambda a, lib=lib: fn(lib, a, lib.tensor(t)),
                                          lib.tensor(x)).numpy() for lib in (tg, torch)]
    exact = np.diag((x * x - 2 * x * t + t) / (x * x * (1 - x) ** 2) / x.size)
    np.testing.assert_allclose(hs[0], exact, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(hs[0], hs[1], rtol=1e-9)


def test_binary_cross_entropy_rejects_values_outside_0_1():
    with pytest.raises(RuntimeError, match="^all elements of input should be between 0 and 1$"):
        F.binary_cross_entropy(tg.tensor([0.5, 1.5]), tg.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="different to the input size"):
        F.binary_cross_entropy(tg.tensor([0.5, 0.5]), tg.tensor([1.0]))


def test_bce_with_logits_matches_numpy_and_is_stable():
    x = np.array([-800.0, -30.0, -1.0, 0.0, 2.0, 40.0, 800.0])
    t = np.array([1.0, 0.0, 0.3, 1.0, 0.0, 1.0, 0.0])
    # log(1 + exp(-|x|)) + max(x, 0) - x t, evaluated without overflow
    expected = np.maximum(x, 0) - x * t + np.log1p(np.exp(-np.abs(x)))
    xt = leaf(x)
    loss = F.binary_cross_entropy_with_logits(xt, tg.tensor(t), reduction="none")
    np.testing.assert_allclose(val(loss), expected, rtol=RTOL)
    loss.sum().backward()
    # d loss / dx = sigmoid(x) - t, which is -sigmoid(-x) for t == 1: accurate to the last
    # digits even where it is tiny (x = -30, t = 0 and x = 40, t = 1)
    e = np.exp(-np.abs(x))

    def sigmoid(z):
        return np.where(z >= 0, 1 / (1 + e), e / (1 + e))
    expected_grad = np.where(t == 1.0, -sigmoid(-x), sigmoid(x) - t)
    np.testing.assert_allclose(xt.grad.numpy(), expected_grad, rtol=1e-12, atol=1e-300)


def test_bce_with_logits_pos_weight():
    x = rng(19).standard_normal((4, 3))
    t = (rng(20).random((4, 3)) > 0.5).astype(float)
    pw = np.array([1.0, 2.0, 0.5])
    logsig = -np.log1p(np.exp(-x))
    expected = -(pw * t * logsig + (1 - t) * (logsig - x))
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=tg.tensor(pw), reduction="none")
    out = loss_fn(tg.tensor(x), tg.tensor(t))
    np.testing.assert_allclose(val(out), expected, rtol=RTOL)


def test_dropout():
    x = tg.ones(200, 100, requires_grad=True)
    tg.manual_seed(0)
    y = F.dropout(x, 0.3)
    kept = val(y) != 0
    np.testing.assert_allclose(val(y)[kept], 1 / 0.7, rtol=1e-15)
    assert abs(kept.mean() - 0.7) < 0.01
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), val(y))
    assert F.dropout(x, 0.3, training=False) is x
    assert F.dropout(x, 0.0) is x
    assert not np.any(val(F.dropout(x, 1.0)))
    with pytest.raises(ValueError,
                       match="^dropout probability has to be between 0 and 1, but got 1.5$"):
        F.dropout(x, 1.5)


def test_inplace_relu_and_dropout_overwrite_their_input():
    x = tg.tensor([-1.0, 2.0])
    assert F.relu(x, inplace=True) is x
    np.testing.assert_array_equal(x.numpy(), [0.0, 2.0])
    y = tg.ones(100)
    tg.manual_seed(0)
    assert nn.Dropout(0.5, inplace=True)(y) is y
    assert set(np.unique(y.numpy())) <= {0.0, 2.0}
    # through a recorded tensor the in-place op is differentiable
    w = leaf([-1.0, 3.0])
    nn.ReLU(inplace=True)(w * 1.0).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [0.0, 1.0])


def test_dropout_module_follows_training_flag():
    layer = nn.Dropout(0.5)
    x = tg.ones(1000)
    assert np.any(val(layer(x)) == 0)
    layer.eval()
    assert layer(x) is x


def test_dropout_mask_comes_from_the_seeded_generator():
    tg.manual_seed(42)
    a = val(F.dropout(tg.ones(50), 0.5))
    tg.manual_seed(42)
    b = val(F.dropout(tg.ones(50), 0.5))
    np.testing.assert_array_equal(a, b)


GRADCHECKS = {
    "relu": lambda x: F.relu(x),
    "tanh": lambda x: F.tanh(x),
    "sigmoid": lambda x: F.sigmoid(x),
    "softmax": lambda x: F.softmax(x, 1),
    "log_softmax": lambda x: F.log_softmax(x, 0),
    "mse_loss": lambda x: F.mse_loss(x, tg.tensor(X.T[::-1].T.copy())),
    "l1_loss": lambda x: F.l1_loss(x, tg.zeros(6, 4), reduction="sum"),
    "cross_entropy": lambda x: F.cross_entropy(x, tg.tensor(TARGET)),
    "cross_entropy_weighted": lambda x: F.cross_entropy(
        x, tg.tensor(TARGET), weight=tg.tensor([1.0, 2.0, 3.0, 4.0]), reduction="none"),
    "nll_loss": lambda x: F.nll_loss(x, tg.tensor(TARGET), ignore_index=1),
    "binary_cross_entropy": lambda x: F.binary_cross_entropy(F.sigmoid(x), tg.full((6, 4), 0.3)),
    "bce_with_logits": lambda x: F.binary_cross_entropy_with_logits(x, tg.full((6, 4), 0.7)),
    "bce_with_logits_pos_weight": lambda x: F.binary_cross_entropy_with_logits(
        x, tg.full((6, 4), 0.7), pos_weight=tg.tensor([1.0, 2.0, 3.0, 0.5])),
    "linear": lambda x: F.linear(x, tg.tensor(X[:3]), tg.tensor([0.1, 0.2, 0.3])),
}


@pytest.mark.parametrize("name", list(GRADCHECKS))
def test_gradients_match_finite_differences(name):
    assert gradcheck(GRADCHECKS[name], leaf(X), atol=1e-7, rtol=1e-6)


# =============================================================================================
# Training without torch: a step of nn + optim against hand-written NumPy
# =============================================================================================


def test_training_step_matches_numpy():
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 1))
    opt = optim.SGD(model.parameters(), lr=0.1)
    x, y = rng(21).standard_normal((8, 4)), rng(22).standard_normal((8, 1))
    w1, b1, w2, b2 = (val(p).copy() for p in model.parameters())

    loss = F.mse_loss(model(tg.tensor(x)), tg.tensor(y))
    opt.zero_grad()
    loss.backward()
    opt.step()

    h = np.tanh(x @ w1.T + b1)
    out = h @ w2.T + b2
    np.testing.assert_allclose(loss.item(), np.mean((out - y) ** 2), rtol=RTOL)
    g_out = 2 * (out - y) / y.size
    g_h = g_out @ w2 * (1 - h**2)
    expected = [w1 - 0.1 * g_h.T @ x, b1 - 0.1 * g_h.sum(0),
                w2 - 0.1 * g_out.T @ h, b2 - 0.1 * g_out.sum(0)]
    for p, e in zip(model.parameters(), expected):
        np.testing.assert_allclose(val(p), e, rtol=1e-12)


def test_mlp_learns_a_classification_task():
    tg.manual_seed(3)
    x = rng(23).standard_normal((64, 2))
    labels = (x[:, 0] * x[:, 1] > 0).astype(np.int64)        # XOR of the signs
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = optim.Adam(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    for _ in range(150):
        opt.zero_grad()
        loss = loss_fn(model(tg.tensor(x)), tg.tensor(labels))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0]
    predicted = val(model(tg.tensor(x))).argmax(1)
    assert (predicted == labels).mean() > 0.9


# =============================================================================================
# Against torch.nn (skipped without torch)
# =============================================================================================


def _to_lib(lib, value, requires_grad=False):
    if isinstance(value, np.ndarray):
        return lib.tensor(value, requires_grad=requires_grad and value.dtype.kind == "f")
    return value


def compare_with_torch(torch, name, arrays, grad=(0,), kwargs=None, rtol=RTOL, atol=0.0):
    """Call ``name`` from tapegrad.nn.functional and torch.nn.functional on the same arrays,
    compare outputs, backpropagate one random cotangent, compare the gradients of
    ``arrays[i]`` for ``i`` in ``grad``."""
    kwargs = kwargs or {}
    ours = [_to_lib(tg, a, i in grad) for i, a in enumerate(arrays)]
    theirs = [_to_lib(torch, a, i in grad) for i, a in enumerate(arrays)]
    out = getattr(F, name)(*ours, **{k: _to_lib(tg, v) for k, v in kwargs.items()})
    tout = getattr(torch.nn.functional, name)(*theirs,
                                              **{k: _to_lib(torch, v) for k, v in kwargs.items()})
    assert tuple(out.shape) == tuple(tout.shape)
    np.testing.assert_allclose(val(out), tout.detach().numpy(), rtol=rtol, atol=atol)
    cot = rng(99).standard_normal(tuple(out.shape))
    out.backward(tg.tensor(cot))
    tout.backward(torch.tensor(cot))
    for i in grad:
        np.testing.assert_allclose(ours[i].grad.numpy(), theirs[i].grad.numpy(), rtol=rtol,
                                   atol=atol, err_msg=f"gradient of argument {i}")


A = rng(30).standard_normal((5, 4)) * 3
A[0, :2] = 0.0                                          # ties for relu/abs
B = rng(31).standard_normal((5, 4))
B[0, 2] = A[0, 2]                                       # input == target for l1
T5 = np.array([3, 0, 2, 2, 1])
PROBS = rng(32).uniform(0.02, 0.98, (5, 4))
W4 = np.array([0.5, 1.0, 2.0, 1.5])

TORCH_CASES = [
    ("relu", [A], {}),
    ("tanh", [A], {}),
    ("sigmoid", [A], {}),
    ("softmax", [A], {"dim": 1}),
    ("softmax", [rng(33).standard_normal((2, 3, 4))], {"dim": 0}),
    ("log_softmax", [A], {"dim": 1}),
    ("log_softmax", [rng(34).standard_normal((2, 3, 4)) * 10], {"dim": -1}),
    ("linear", [A, B[:3], np.array([0.1, -0.2, 0.3])], {}),
    ("dropout", [A], {"p": 0.4, "training": False}),
    *[("mse_loss", [A, B], {"reduction": r}) for r in ("mean", "sum", "none")],
    *[("l1_loss", [A, B], {"reduction": r}) for r in ("mean", "sum", "none")],
    *[("cross_entropy", [A, T5], {"reduction": r}) for r in ("mean", "sum", "none")],
    ("cross_entropy", [A, T5], {"weight": W4}),
    ("cross_entropy", [A, T5], {"weight": W4, "ignore_index": 2}),
    ("cross_entropy", [A, T5], {"weight": W4, "ignore_index": 2, "reduction": "none"}),
    ("cross_entropy", [A, T5], {"ignore_index": 0, "reduction": "sum"}),
    ("cross_entropy", [A[0], np.array(1)], {}),
    ("cross_entropy", [rng(35).standard_normal((2, 4, 3)), rng(36).integers(0, 4, (2, 3))], {}),
    ("cross_entropy", [rng(35).standard_normal((2, 4, 3)), rng(36).integers(0, 4, (2, 3))],
     {"reduction": "none"}),
    ("cross_entropy", [A, PROBS / PROBS.sum(1, keepdims=True)], {}),
    ("cross_entropy", [A, PROBS], {"weight": W4, "reduction": "sum"}),
    *[("nll_loss", [A, T5], {"reduction": r}) for r in ("mean", "sum", "none")],
    ("nll_loss", [A, T5], {"weight": W4, "ignore_index": 3}),
    *[("binary_cross_entropy", [PROBS, B > 0], {"reduction": r}) for r in ("mean", "sum", "none")],
    ("binary_cross_entropy", [PROBS, rng(37).random((5, 4))], {"weight": W4}),
    *[("binary_cross_entropy_with_logits", [A, rng(38).random((5, 4))], {"reduction": r})
      for r in ("mean", "sum", "none")],
    ("binary_cross_entropy_with_logits", [A * 20, (B > 0).astype(float)], {"weight": W4}),
    ("binary_cross_entropy_with_logits", [A, rng(38).random((5, 4))], {"pos_weight": W4}),
]


def _case_id(case):
    name, _, kwargs = case
    return name + "".join(f"-{k}={v if not isinstance(v, np.ndarray) else 'array'}"
                          for k, v in kwargs.items())


@pytest.mark.parametrize("name, arrays, kwargs", TORCH_CASES,
                         ids=[_case_id(c) for c in TORCH_CASES])
def test_functional_matches_torch(torch, name, arrays, kwargs):
    arrays = [a.astype(float) if a.dtype == bool else a for a in arrays]
    grad = tuple(i for i, a in enumerate(arrays) if a.dtype.kind == "f")
    compare_with_torch(torch, name, arrays, grad=grad, kwargs=kwargs, atol=1e-15)


def test_repr_equals_torch(torch):
    ours = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    assert repr(ours) == repr(theirs) == SEQ_REPR
    for a, b in [(nn.Dropout(0.2), torch.nn.Dropout(0.2)), (nn.Softmax(1), torch.nn.Softmax(1)),
                 (nn.LogSoftmax(dim=0), torch.nn.LogSoftmax(dim=0)), (nn.Tanh(), torch.nn.Tanh()),
                 (nn.BCEWithLogitsLoss(), torch.nn.BCEWithLogitsLoss()),
                 (nn.Linear(4, 2, bias=False), torch.nn.Linear(4, 2, bias=False))]:
        assert repr(a) == repr(b)


def test_module_names_match_torch(torch):
    class TorchNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(1))
            self.body = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                                            torch.nn.Linear(4, 2))
            self.shift = torch.nn.Parameter(torch.zeros(2))

    theirs, ours = TorchNet(), Net()
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert repr(ours) == repr(theirs).replace("TorchNet", "Net")


def test_load_state_dict_errors_match_torch(torch):
    def message(lib, model, sd, strict=True):
        with pytest.raises(RuntimeError) as info:
            model.load_state_dict(sd, strict=strict)
        return str(info.value).replace(f"{lib}.Size", "Size")

    ours = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    sd = {"0.weight": np.zeros((3, 3)), "0.bias": np.zeros(3), "2.weight": np.zeros((1, 3)),
          "9.bias": np.zeros(1)}
    assert message("tapegrad", ours, {k: tg.tensor(v) for k, v in sd.items()}) == \
        message("torch", theirs, {k: torch.tensor(v) for k, v in sd.items()})
    assert message("tapegrad", ours, {k: tg.tensor(v) for k, v in sd.items()}, False) == \
        message("torch", theirs, {k: torch.tensor(v) for k, v in sd.items()}, False)


def test_linear_init_formula_matches_torch(torch):
    """Same formula as torch: weight and bias bounds are 1/sqrt(in_features) (the draws
    differ: each library has its own generator)."""
    for fan_in in (1, 7, 300):
        theirs = torch.nn.Linear(fan_in, 50)
        ours = nn.Linear(fan_in, 50)
        bound = 1 / math.sqrt(fan_in)
        for p, q in ((ours.weight, theirs.weight), (ours.bias, theirs.bias)):
            assert np.abs(val(p)).max() <= bound and q.detach().abs().max().item() <= bound
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == \
        torch.nn.init.calculate_gain("leaky_relu", math.sqrt(5))


# --- a PyTorch training script and its line-for-line port ------------------------------------

STEPS = 50


def make_data():
    r = rng(40)
    x = r.standard_normal((64, 6))
    y_class = (x[:, 0] + x[:, 1] ** 2 - x[:, 2] > 0.5).astype(np.int64) + (x[:, 3] > 1.0)
    y_value = np.sin(x[:, :2].sum(1, keepdims=True))
    return x, y_class, y_value


def torch_script(torch, task):
    """A plain PyTorch training loop: returns the initial state_dict (numpy), the per-step
    losses and the final state_dict."""
    nn_, optim_ = torch.nn, torch.optim
    x, y_class, y_value = make_data()
    torch.manual_seed(0)
    if task == "classify":
        model = nn_.Sequential(nn_.Linear(6, 32), nn_.Tanh(), nn_.Linear(32, 32), nn_.ReLU(),
                               nn_.Linear(32, 3)).double()
        loss_fn = nn_.CrossEntropyLoss()
        opt = optim_.Adam(model.parameters(), lr=1e-2)
        inputs, targets = torch.tensor(x), torch.tensor(y_class)
    else:
        model = nn_.Sequential(nn_.Linear(6, 16), nn_.Sigmoid(), nn_.Linear(16, 1)).double()
        loss_fn = nn_.MSELoss()
        opt = optim_.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
        inputs, targets = torch.tensor(x), torch.tensor(y_value)
    start = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    end = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    return start, losses, end


def tapegrad_script(task, start):
    """``torch_script`` ported: ``torch`` -> ``tapegrad``, plus loading the same weights."""
    nn_, optim_ = tg.nn, tg.optim
    x, y_class, y_value = make_data()
    tg.manual_seed(0)
    if task == "classify":
        model = nn_.Sequential(nn_.Linear(6, 32), nn_.Tanh(), nn_.Linear(32, 32), nn_.ReLU(),
                               nn_.Linear(32, 3)).double()
        loss_fn = nn_.CrossEntropyLoss()
        opt = optim_.Adam(model.parameters(), lr=1e-2)
        inputs, targets = tg.tensor(x), tg.tensor(y_class)
    else:
        model = nn_.Sequential(nn_.Linear(6, 16), nn_.Sigmoid(), nn_.Linear(16, 1)).double()
        loss_fn = nn_.MSELoss()
        opt = optim_.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
        inputs, targets = tg.tensor(x), tg.tensor(y_value)
    model.load_state_dict({k: tg.tensor(v) for k, v in start.items()})
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    end = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    return losses, end


@pytest.mark.parametrize("task", ["classify", "regress"])
def test_ported_training_script_reproduces_torch_loss_curve(torch, task):
    start, torch_losses, torch_end = torch_script(torch, task)
    losses, end = tapegrad_script(task, start)
    np.testing.assert_allclose(losses, torch_losses, rtol=1e-10, atol=0)
    assert losses[-1] < 0.7 * losses[0]           # it trained
    assert list(end) == list(torch_end)
    for k in end:
        np.testing.assert_allclose(end[k], torch_end[k], rtol=1e-9, atol=1e-12, err_msg=k)
