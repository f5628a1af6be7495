"""The nn layers and functions added for "port by changing the import" (#16): values and
gradients against PyTorch in float64, grad_fn names, module reprs, state_dict keys and
PyTorch's initialisation, and ``tapegrad.compile`` replaying them with new inputs."""
import math
import warnings

import numpy as np
import pytest
import torch

import tapegrad as tg
from tapegrad import nn
from tapegrad.nn import functional as F

RTOL = 1e-12
ATOL = 1e-14


def rng(seed):
    return np.random.default_rng(seed)


def _lib(lib, value, requires_grad):
    if isinstance(value, np.ndarray):
        grad = requires_grad and value.dtype.kind == "f"
        return lib.tensor(value, requires_grad=grad)
    return value


def run_both(fn_ours, fn_theirs, arrays, kwargs=None, rtol=RTOL, atol=ATOL):
    """Call both functions on the same float64 arrays, compare outputs, backpropagate one
    random cotangent and compare the gradients of every float argument; return our output."""
    kwargs = kwargs or {}
    ours = [_lib(tg, a, True) for a in arrays]
    theirs = [_lib(torch, a, True) for a in arrays]
    out = fn_ours(*ours, **{k: _lib(tg, v, False) for k, v in kwargs.items()})
    tout = fn_theirs(*theirs, **{k: _lib(torch, v, False) for k, v in kwargs.items()})
    assert tuple(out.shape) == tuple(tout.shape)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=rtol, atol=atol)
    if not tout.requires_grad:
        return out
    cot = rng(99).standard_normal(tuple(out.shape))
    out.backward(tg.tensor(cot))
    tout.backward(torch.tensor(cot))
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if isinstance(b, torch.Tensor) and b.grad is None:
            assert a.grad is None, f"a gradient for argument {i}, where PyTorch has none"
        elif isinstance(b, torch.Tensor):
            assert a.grad is not None, f"no gradient for argument {i}"
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=atol,
                                       err_msg=f"gradient of argument {i}")
    return out


# inputs with the values where the piecewise functions change formula
EDGES = np.array([-20.0, -6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, 25.0, 800.0])
X = rng(0).standard_normal((3, 4)) * 3
X[0, :2] = 0.0
Y = rng(1).standard_normal((3, 4))
POS = rng(2).uniform(0.1, 2.0, (3, 4))

ACTIVATIONS = [
    ("gelu", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}), ("elu", {}),
    ("elu", {"alpha": 0.5}), ("selu", {}), ("celu", {}), ("celu", {"alpha": 2.0}),
    ("leaky_relu", {}), ("leaky_relu", {"negative_slope": 0.2}), ("softplus", {}),
    ("softplus", {"beta": 2.0, "threshold": 5.0}), ("mish", {}), ("hardtanh", {}),
    ("hardtanh", {"min_val": -0.5, "max_val": 3.0}), ("relu6", {}), ("hardsigmoid", {}),
    ("hardswish", {}), ("softsign", {}), ("logsigmoid", {}), ("tanhshrink", {}),
    ("softshrink", {}), ("softshrink", {"lambd": 1.0}), ("hardshrink", {}),
    ("hardshrink", {"lambd": 1.0}), ("threshold", {"threshold": 0.5, "value": -2.0}),
    ("glu", {}), ("glu", {"dim": 0}), ("softmin", {"dim": 1}), ("softmin", {"dim": 0}),
]


def _act_id(case):
    return case[0] + "".join(f"-{k}={v}" for k, v in case[1].items())


@pytest.mark.parametrize("name, kwargs", ACTIVATIONS, ids=[_act_id(c) for c in ACTIVATIONS])
@pytest.mark.parametrize("array", [X, EDGES.reshape(2, 6), EDGES.reshape(6, 2)],
                         ids=["random", "edges", "edges-t"])
def test_activation_matches_torch(name, kwargs, array):
    # PyTorch's hardsigmoid backward multiplies by 1/6 rounded to float32 (a 3e-8 relative
    # error); ours is exact in float64
    rtol = 5e-8 if name == "hardsigmoid" else RTOL
    if name == "glu" and array.shape[kwargs.get("dim", -1)] % 2:
        array = array[:2]
    run_both(getattr(F, name), getattr(torch.nn.functional, name), [array], kwargs, rtol=rtol)


def test_activation_inplace_returns_the_overwritten_input():
    for name in ("silu", "elu", "selu", "celu", "leaky_relu", "mish", "hardtanh", "relu6",
                 "hardsigmoid", "hardswish"):
        x = tg.tensor(X.copy())
        out = getattr(F, name)(x, inplace=True)
        assert out is x, name
        expected = getattr(torch.nn.functional, name)(torch.tensor(X.copy()))
        np.testing.assert_allclose(x.numpy(), expected.numpy(), rtol=RTOL, atol=ATOL)


LOSSES = [
    *[("huber_loss", [X, Y], {"reduction": r}) for r in ("mean", "sum", "none")],
    ("huber_loss", [X, Y], {"delta": 0.3}),
    *[("smooth_l1_loss", [X, Y], {"reduction": r}) for r in ("mean", "sum", "none")],
    ("smooth_l1_loss", [X, Y], {"beta": 0.4}),
    ("smooth_l1_loss", [X, Y], {"beta": 0.0}),
    *[("kl_div", [np.log(POS / POS.sum(1, keepdims=True)), POS / 4], {"reduction": r})
      for r in ("batchmean", "sum", "none")],
    # (zero targets: PyTorch's gradient for the target is nan there, ours 0 - input)
    ("kl_div", [Y], {"target": np.where(POS > 1, POS, 0.0), "reduction": "sum"}),
    ("kl_div", [Y, np.log(POS)], {"reduction": "batchmean", "log_target": True}),
    *[("poisson_nll_loss", [Y, np.round(POS * 3)], {"reduction": r})
      for r in ("mean", "sum", "none")],
    ("poisson_nll_loss", [POS, np.round(POS * 3)], {"log_input": False}),
    ("poisson_nll_loss", [Y, POS * 3], {"full": True}),
    *[("gaussian_nll_loss", [X, Y, POS], {"reduction": r}) for r in ("mean", "sum", "none")],
    ("gaussian_nll_loss", [X, Y, POS[:, 0]], {"full": True}),
    ("gaussian_nll_loss", [X, Y, POS[:, :1]], {}),
    ("gaussian_nll_loss", [X, Y, np.where(POS > 1, POS, 1e-9)], {}),
    *[("margin_ranking_loss", [X[0], Y[0], np.array([1.0, -1.0, 1.0, -1.0])],
       {"margin": m, "reduction": r}) for m in (0.0, 0.5) for r in ("mean", "none")],
    *[("cosine_embedding_loss", [X, Y, np.array([1.0, -1.0, -1.0])],
       {"margin": m, "reduction": r}) for m in (0.0, -0.3) for r in ("mean", "sum", "none")],
    ("cosine_embedding_loss", [X[0], Y[0], np.array(-1.0)], {}),
    *[("triplet_margin_loss", [X, Y, POS], {"reduction": r}) for r in ("mean", "none")],
    ("triplet_margin_loss", [X, Y, POS], {"p": 1, "swap": True, "margin": 2.0}),
    ("pairwise_distance", [X, Y], {}),
    ("pairwise_distance", [X, Y[0]], {"p": 3.0, "keepdim": True}),
    ("pairwise_distance", [X[0], Y[0]], {"p": 1.0}),
]


def _loss_id(case):
    name, arrays, kwargs = case
    return name + "".join(f"-{k}={v}" for k, v in kwargs.items()) + \
        "-" + "x".join(str(a.ndim) for a in arrays)


@pytest.mark.parametrize("name, arrays, kwargs", LOSSES, ids=[_loss_id(c) for c in LOSSES])
def test_loss_matches_torch(name, arrays, kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_both(getattr(F, name), getattr(torch.nn.functional, name), arrays, kwargs)


def test_kl_div_mean_warns_as_torch():
    with pytest.warns(UserWarning) as ours:
        F.kl_div(tg.tensor(Y), tg.tensor(POS))
    with pytest.warns(UserWarning) as theirs:
        torch.nn.functional.kl_div(torch.tensor(Y), torch.tensor(POS))
    assert str(ours[0].message) == str(theirs[0].message)


NORMS = [
    ("normalize", [X], {}), ("normalize", [X], {"p": 1.0, "dim": 0}),
    ("normalize", [np.zeros((2, 3))], {}),
    ("cosine_similarity", [X, Y], {}), ("cosine_similarity", [X, Y[:1]], {"dim": 1}),
    ("cosine_similarity", [X, Y], {"dim": 0, "eps": 0.5}),
    ("layer_norm", [X, (4,)], {}), ("layer_norm", [X, (3, 4)], {"eps": 0.1}),
    ("layer_norm", [X, [4], Y[0], POS[0]], {}),
    ("group_norm", [rng(3).standard_normal((2, 6, 5)), 3], {}),
    ("group_norm", [rng(3).standard_normal((2, 6, 2, 3)), 2, POS.reshape(-1)[:6],
                    Y.reshape(-1)[:6]], {"eps": 0.01}),
    ("batch_norm", [X, None, None], {"training": True}),
    ("batch_norm", [rng(4).standard_normal((4, 3, 5)), None, None, POS[0, :3], Y[0, :3]],
     {"training": True}),
    ("batch_norm", [X], {"running_mean": Y[0], "running_var": POS[0]}),
    ("batch_norm", [X, None, None, POS[0], Y[0]], {"training": True, "eps": 0.5}),
]


@pytest.mark.parametrize("name, arrays, kwargs", NORMS, ids=[_loss_id(
    (c[0], [a for a in c[1] if isinstance(a, np.ndarray)], c[2])) for c in NORMS])
def test_normalisation_matches_torch(name, arrays, kwargs):
    run_both(getattr(F, name), getattr(torch.nn.functional, name), arrays, kwargs)


def test_batch_norm_updates_running_statistics_as_torch():
    x = rng(5).standard_normal((6, 3, 2))
    ours = [tg.tensor(Y[0, :3].copy()), tg.tensor(POS[0, :3].copy())]
    theirs = [torch.tensor(Y[0, :3].copy()), torch.tensor(POS[0, :3].copy())]
    F.batch_norm(tg.tensor(x), *ours, training=True, momentum=0.3)
    torch.nn.functional.batch_norm(torch.tensor(x), *theirs, training=True, momentum=0.3)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=RTOL)


def test_sdpa_matches_torch():
    q, k, v = (rng(i).standard_normal((2, 3, 4, 5)) for i in (6, 7, 8))
    sdpa_ours, sdpa_theirs = F.scaled_dot_product_attention, \
        torch.nn.functional.scaled_dot_product_attention
    run_both(sdpa_ours, sdpa_theirs, [q, k, v])
    run_both(sdpa_ours, sdpa_theirs, [q, k, v], {"is_causal": True})
    run_both(sdpa_ours, sdpa_theirs, [q, k[..., :3, :], v[..., :3, :]], {"scale": 0.3})
    mask = rng(9).random((4, 4)) > 0.3
    np.fill_diagonal(mask, True)
    run_both(sdpa_ours, sdpa_theirs, [q, k, v], {"attn_mask": mask})
    run_both(sdpa_ours, sdpa_theirs, [q, k, v, rng(10).standard_normal((4, 4))])


def test_embedding_matches_torch_with_repeats_and_padding():
    table = rng(11).standard_normal((6, 3))
    index = np.array([[0, 2, 2], [5, -1, 0]]) % 6
    run_both(lambda w: F.embedding(tg.tensor(index), w),
             lambda w: torch.nn.functional.embedding(torch.tensor(index), w), [table])
    out = run_both(lambda w: F.embedding(tg.tensor(index), w, padding_idx=2),
                   lambda w: torch.nn.functional.embedding(torch.tensor(index), w,
                                                           padding_idx=2), [table])
    assert out.shape == (2, 3, 3)


def test_embedding_rejects_bad_indices_as_torch():
    with pytest.raises(IndexError, match="index out of range in self"):
        F.embedding(tg.tensor([6]), tg.zeros(6, 2))
    with pytest.raises(RuntimeError, match="Expected tensor for argument #1 'indices'"):
        F.embedding(tg.tensor([1.0]), tg.zeros(6, 2))


def test_one_hot_matches_torch():
    labels = np.array([[0, 3], [1, 1]])
    for classes in (-1, 5):
        ours = F.one_hot(tg.tensor(labels), classes)
        theirs = torch.nn.functional.one_hot(torch.tensor(labels), classes)
        assert ours.dtype == tg.int64 and tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    for bad, classes in (([-1], -1), ([3], 3)):
        with pytest.raises(RuntimeError) as ours:
            F.one_hot(tg.tensor(bad), classes)
        with pytest.raises(RuntimeError) as theirs:
            torch.nn.functional.one_hot(torch.tensor(bad), classes)
        assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("amounts", [(1, 2), (2, 0, 1, 1), (0, 1, 2, 1)])
def test_pad_matches_torch(mode, amounts):
    x = rng(12).standard_normal((2, 3, 4))
    kwargs = {"mode": mode}
    if mode == "constant":
        kwargs["value"] = 1.5
    run_both(lambda t: F.pad(t, amounts, **kwargs),
             lambda t: torch.nn.functional.pad(t, amounts, **kwargs), [x])


def test_pad_crops_with_negative_amounts():
    x = rng(13).standard_normal((3, 5))
    run_both(lambda t: F.pad(t, (-1, 2, 1, -2)),
             lambda t: torch.nn.functional.pad(t, (-1, 2, 1, -2)), [x])


ERRORS = [
    ("gelu", (np.ones(2),), {"approximate": "cubic"}),
    ("glu", (np.ones((2, 3)),), {}),
    ("hardtanh", (np.ones(2),), {"min_val": 2.0, "max_val": 1.0}),
    ("softshrink", (np.ones(2),), {"lambd": -1.0}),
    ("smooth_l1_loss", (np.ones(2), np.ones(2)), {"beta": -1.0}),
    ("huber_loss", (np.ones(2), np.ones(2)), {"reduction": "avg"}),
    ("kl_div", (np.ones(2), np.ones(2)), {"reduction": "avg"}),
    ("gaussian_nll_loss", (np.ones((2, 3)), np.ones((2, 3)), np.ones(3)), {}),
    ("gaussian_nll_loss", (np.ones(2), np.ones(2), -np.ones(2)), {}),
    ("triplet_margin_loss", (np.ones(2), np.ones(2), np.ones(2)), {"margin": 0.0}),
    ("layer_norm", (np.ones((2, 3)), (4,)), {}),
    ("group_norm", (np.ones((2, 3, 4)), 2), {}),
    ("group_norm", (np.ones((1, 2, 1)), 2), {}),
    ("batch_norm", (np.ones((1, 3)), None, None), {"training": True}),
    ("pad", (np.ones((2, 3)), (1,)), {}),
    ("pad", (np.ones((1, 2, 3)), (3, 3)), {"mode": "reflect"}),
]


@pytest.mark.parametrize("name, args, kwargs", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, args, kwargs):
    def call(lib, module):
        converted = [lib.tensor(a) if isinstance(a, np.ndarray) else a for a in args]
        with pytest.raises(Exception) as caught:
            getattr(module, name)(*converted, **kwargs)
        return caught
    ours, theirs = call(tg, F), call(torch, torch.nn.functional)
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value).replace("tapegrad.", "torch.") == str(theirs.value)


def test_composite_grad_fns():
    x = tg.tensor(X, requires_grad=True)
    names = {name: getattr(F, name)(x).grad_fn.name() for name in
             ("gelu", "silu", "elu", "leaky_relu", "softplus", "softsign", "tanhshrink",
              "logsigmoid", "hardtanh")}
    assert names["softplus"] == "SoftplusBackward0"           # one recorded op, as in PyTorch
    assert names["softsign"] == "DivBackward0"                 # composites in PyTorch too
    assert names["tanhshrink"] == "SubBackward0"
    assert names["gelu"] == "MulBackward0" and names["elu"] == "WhereBackward0"
    assert F.layer_norm(x, (4,)).grad_fn.name() == "DivBackward0"
