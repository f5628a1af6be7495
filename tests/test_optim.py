"""Optimizers: trajectories against torch.optim and against NumPy transcriptions of the
published update rules, hyperparameter errors, param groups, zero_grad and state_dict.

Gradients come from NumPy (a small least-squares problem) and are assigned to ``.grad``, so
these tests exercise the optimizers alone, not the backward pass.
"""
import copy
import itertools
import math

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import optim

try:
    import torch
except ImportError:  # the reference transcriptions below still run
    torch = None

requires_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

STEPS = 100
RTOL = 1e-12

# ---------------------------------------------------------------------------------------------
# The problem: loss(W, b) = mean((X @ W + b - Y)**2), X (20, 3), W (3, 2), b (2,).
# ---------------------------------------------------------------------------------------------
_rng = np.random.default_rng(7)
X = _rng.standard_normal((20, 3))
Y = _rng.standard_normal((20, 2)) + 2.0
W0 = _rng.standard_normal((3, 2))
B0 = _rng.standard_normal(2)
FROZEN0 = _rng.standard_normal(4)     # in the optimizer, never given a gradient


def loss_grads(w, b):
    """(dL/dW (3, 2), dL/db (2,)) for the problem above."""
    r = 2.0 * (X @ w + b - Y) / Y.size
    return X.T @ r, r.sum(axis=0)


def grads_for(values, maximize):
    """Gradients to assign: with ``maximize`` the objective is ``-loss``, so maximizing it
    follows the same path as minimizing ``loss``."""
    gw, gb = loss_grads(*values)
    return (-gw, -gb) if maximize else (gw, gb)


def values(params):
    return [p.detach().numpy().copy() for p in params]


def run_tapegrad(make_opt, maximize=False, steps=STEPS):
    """Trajectory (list of [W, b] per step) of a tapegrad optimizer on the problem."""
    params = [tg.tensor(W0, requires_grad=True), tg.tensor(B0, requires_grad=True)]
    frozen = tg.tensor(FROZEN0, requires_grad=True)
    opt = make_opt(params + [frozen])
    out = []
    for _ in range(steps):
        for p, g in zip(params, grads_for(values(params), maximize)):
            p.grad = tg.tensor(g)
        opt.step()
        out.append(values(params))
    np.testing.assert_array_equal(frozen.detach().numpy(), FROZEN0)
    assert frozen not in opt.state
    return out


def run_torch(make_opt, maximize=False, steps=STEPS):
    params = [torch.tensor(W0, requires_grad=True), torch.tensor(B0, requires_grad=True)]
    frozen = torch.tensor(FROZEN0, requires_grad=True)
    opt = make_opt(params + [frozen])
    out = []
    for _ in range(steps):
        for p, g in zip(params, grads_for([p.detach().numpy() for p in params], maximize)):
            p.grad = torch.tensor(g)
        opt.step()
        out.append([p.detach().numpy().copy() for p in params])
    return out


def assert_same_trajectory(actual, expected, rtol=RTOL):
    assert len(actual) == len(expected)
    for step, (a_step, e_step) in enumerate(zip(actual, expected)):
        for a, e in zip(a_step, e_step):
            np.testing.assert_allclose(a, e, rtol=rtol, atol=0, err_msg=f"step {step + 1}")


# ---------------------------------------------------------------------------------------------
# Reference transcriptions of the update rules as PyTorch documents them (vectorised NumPy).
# ---------------------------------------------------------------------------------------------


def reference_sgd(lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                  maximize=False, steps=STEPS):
    """``lr`` and ``momentum`` may be pairs: per-parameter values for (W, b)."""
    lrs = lr if isinstance(lr, tuple) else (lr, lr)
    momenta = momentum if isinstance(momentum, tuple) else (momentum, momentum)
    theta = [W0.copy(), B0.copy()]
    bufs = [None, None]
    out = []
    for _ in range(steps):
        grads = grads_for(theta, maximize)
        for i, g in enumerate(grads):
            lr, momentum = lrs[i], momenta[i]
            if maximize:
                g = -g
            if weight_decay != 0:
                g = g + weight_decay * theta[i]
            if momentum != 0:
                if bufs[i] is None:
                    bufs[i] = g.copy()
                else:
                    bufs[i] = momentum * bufs[i] + (1 - dampening) * g
                g = g + momentum * bufs[i] if nesterov else bufs[i]
            theta[i] = theta[i] - lr * g
        out.append([t.copy() for t in theta])
    return out


def reference_adam(lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                   maximize=False, decoupled=False, steps=STEPS):
    beta1, beta2 = betas
    theta = [W0.copy(), B0.copy()]
    m = [np.zeros_like(t) for t in theta]
    v = [np.zeros_like(t) for t in theta]
    vmax = [np.zeros_like(t) for t in theta]
    out = []
    for t in range(1, steps + 1):
        grads = grads_for(theta, maximize)
        for i, g in enumerate(grads):
            if maximize:
                g = -g
            if weight_decay != 0:
                if decoupled:
                    theta[i] = theta[i] - lr * weight_decay * theta[i]
                else:
                    g = g + weight_decay * theta[i]
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            m_hat = m[i] / (1 - beta1**t)
            if amsgrad:
                vmax[i] = np.maximum(vmax[i], v[i])
                v_hat = vmax[i] / (1 - beta2**t)
            else:
                v_hat = v[i] / (1 - beta2**t)
            theta[i] = theta[i] - lr * m_hat / (np.sqrt(v_hat) + eps)
        out.append([t.copy() for t in theta])
    return out


# ---------------------------------------------------------------------------------------------
# Every option combination
# ---------------------------------------------------------------------------------------------


def _sgd_configs():
    for momentum, dampening, nesterov, weight_decay, maximize in itertools.product(
            (0.0, 0.9), (0.0, 0.3), (False, True), (0.0, 0.1), (False, True)):
        if nesterov and (momentum == 0 or dampening != 0):
            continue
        yield dict(lr=0.05, momentum=momentum, dampening=dampening, nesterov=nesterov,
                   weight_decay=weight_decay, maximize=maximize)


SGD_CONFIGS = list(_sgd_configs())


def _adam_configs():
    for name, amsgrad, weight_decay, maximize in itertools.product(
            ("Adam", "AdamW"), (False, True), (0.0, 0.1), (False, True)):
        yield name, dict(lr=0.02, amsgrad=amsgrad, weight_decay=weight_decay, maximize=maximize)
    # beta1 < 0.5 takes the other branch of the first-moment interpolation
    # (beta2 stays 0.999: with beta2 = 0.9, v forgets its history, sqrt(v) of a coordinate
    # whose gradient nears zero gets tiny, the step lr * m / sqrt(v) becomes unstable there,
    # and rounding differences grew 1000x every 5 steps -- no tolerance is meaningful then)
    yield "Adam", dict(lr=0.005, betas=(0.3, 0.999), eps=1e-6, weight_decay=0.01)
    yield "AdamW", dict(lr=0.005, betas=(0.3, 0.999), eps=1e-6, weight_decay=0.01, amsgrad=True)


ADAM_CONFIGS = list(_adam_configs())


def _ids(configs):
    return ["-".join(f"{k}={v}" for k, v in c.items()) for c in configs]


ADAM_IDS = [f"{name}-{i}" for (name, _), i in zip(ADAM_CONFIGS, _ids(c for _, c in ADAM_CONFIGS))]


@pytest.mark.parametrize("config", SGD_CONFIGS, ids=_ids(SGD_CONFIGS))
def test_sgd_matches_reference(config):
    actual = run_tapegrad(lambda ps: optim.SGD(ps, **config), config["maximize"])
    assert_same_trajectory(actual, reference_sgd(**config))


@requires_torch
@pytest.mark.parametrize("config", SGD_CONFIGS, ids=_ids(SGD_CONFIGS))
def test_sgd_matches_torch(config):
    actual = run_tapegrad(lambda ps: optim.SGD(ps, **config), config["maximize"])
    expected = run_torch(lambda ps: torch.optim.SGD(ps, **config), config["maximize"])
    assert_same_trajectory(actual, expected)


@pytest.mark.parametrize("name, config", ADAM_CONFIGS, ids=ADAM_IDS)
def test_adam_matches_reference(name, config):
    actual = run_tapegrad(lambda ps: getattr(optim, name)(ps, **config),
                          config.get("maximize", False))
    expected = reference_adam(decoupled=(name == "AdamW"), **config)
    assert_same_trajectory(actual, expected)


@requires_torch
@pytest.mark.parametrize("name, config", ADAM_CONFIGS, ids=ADAM_IDS)
def test_adam_matches_torch(name, config):
    maximize = config.get("maximize", False)
    actual = run_tapegrad(lambda ps: getattr(optim, name)(ps, **config), maximize)
    expected = run_torch(lambda ps: getattr(torch.optim, name)(ps, **config), maximize)
    assert_same_trajectory(actual, expected)


def test_adamw_default_weight_decay_is_decoupled():
    p = tg.tensor(W0, requires_grad=True)
    opt = optim.AdamW([p])
    group = opt.param_groups[0]
    assert group["weight_decay"] == 1e-2 and group["decoupled_weight_decay"] is True
    assert optim.Adam([p]).param_groups[0]["decoupled_weight_decay"] is False


def test_adam_decoupled_flag_equals_adamw():
    config = dict(lr=0.02, weight_decay=0.1)
    a = run_tapegrad(lambda ps: optim.Adam(ps, decoupled_weight_decay=True, **config))
    b = run_tapegrad(lambda ps: optim.AdamW(ps, **config))
    assert_same_trajectory(a, b, rtol=0)


# ---------------------------------------------------------------------------------------------
# Param groups
# ---------------------------------------------------------------------------------------------


def _two_group_run(lib, opt_cls, steps=40):
    """W in a group with its own lr and momentum, b in a group using the defaults."""
    make = lib.tensor
    w, b = make(W0, requires_grad=True), make(B0, requires_grad=True)
    opt = opt_cls([{"params": [w], "lr": 0.1, "momentum": 0.5}, {"params": b}],
                  lr=0.01, momentum=0.9)
    out = []
    for _ in range(steps):
        for p, g in zip((w, b), loss_grads(w.detach().numpy(), b.detach().numpy())):
            p.grad = make(g)
        opt.step()
        out.append([w.detach().numpy().copy(), b.detach().numpy().copy()])
    return opt, out


def test_param_groups_use_their_own_hyperparameters():
    opt, out = _two_group_run(tg, optim.SGD)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.01]
    assert [g["momentum"] for g in opt.param_groups] == [0.5, 0.9]
    assert set(opt.param_groups[1]) == {"params", "lr", "momentum", "dampening", "weight_decay",
                                        "nesterov", "maximize", "foreach", "differentiable",
                                        "fused"}
    assert_same_trajectory(out, reference_sgd(lr=(0.1, 0.01), momentum=(0.5, 0.9), steps=40))


@requires_torch
def test_param_groups_match_torch():
    _, actual = _two_group_run(tg, optim.SGD)
    _, expected = _two_group_run(torch, torch.optim.SGD)
    assert_same_trajectory(actual, expected)


def test_changing_lr_between_steps_takes_effect():
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    p.grad = tg.tensor([1.0, 1.0])
    opt.step()
    opt.param_groups[0]["lr"] = 0.5
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), [1.0 - 0.1 - 0.5, 2.0 - 0.1 - 0.5], rtol=1e-15)


def test_add_param_group():
    w, b = tg.tensor(W0, requires_grad=True), tg.tensor(B0, requires_grad=True)
    opt = optim.Adam([w], lr=0.1)
    opt.add_param_group({"params": [b], "betas": (0.5, 0.9)})
    assert len(opt.param_groups) == 2
    assert opt.param_groups[1]["lr"] == 0.1 and opt.param_groups[1]["betas"] == (0.5, 0.9)
    with pytest.raises(ValueError,
                       match="^some parameters appear in more than one parameter group$"):
        opt.add_param_group({"params": [w]})
    with pytest.raises(TypeError, match="^optimizer parameters need to be organized in ordered"):
        opt.add_param_group({"params": {tg.tensor([1.0], requires_grad=True)}})


def test_duplicate_parameter_in_a_group_warns():
    p = tg.tensor([1.0], requires_grad=True)
    with pytest.warns(UserWarning, match="duplicate parameters"):
        optim.SGD([p, p], lr=0.1)


# ---------------------------------------------------------------------------------------------
# zero_grad, closure, skipped parameters
# ---------------------------------------------------------------------------------------------


def test_zero_grad_sets_to_none_by_default():
    w, b = tg.tensor(W0, requires_grad=True), tg.tensor(B0, requires_grad=True)
    opt = optim.SGD([w, b], lr=0.1)
    w.grad = tg.tensor(np.ones_like(W0))
    opt.zero_grad()
    assert w.grad is None and b.grad is None


def test_zero_grad_in_place_keeps_the_gradient_tensor():
    w = tg.tensor(W0, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    g = tg.tensor(np.ones_like(W0))
    w.grad = g
    opt.zero_grad(set_to_none=False)
    assert w.grad is g
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros_like(W0))
    # a zero gradient is still a gradient: the step runs (and moves nothing here)
    opt.step()
    np.testing.assert_array_equal(w.detach().numpy(), W0)


def test_step_skips_parameters_without_gradient():
    w, b = tg.tensor(W0, requires_grad=True), tg.tensor(B0, requires_grad=True)
    opt = optim.Adam([w, b], lr=0.1)
    w.grad = tg.tensor(np.ones_like(W0))
    opt.step()
    np.testing.assert_array_equal(b.detach().numpy(), B0)
    assert w in opt.state and b not in opt.state
    assert float(opt.state[w]["step"]) == 1.0


def test_step_with_closure_returns_its_loss():
    w = tg.tensor(W0, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    calls = []

    def closure():
        calls.append(1)
        w.grad = tg.tensor(np.ones_like(W0))
        return 3.5

    assert opt.step(closure) == 3.5
    assert calls == [1]
    np.testing.assert_allclose(w.detach().numpy(), W0 - 0.1, rtol=1e-15)
    assert opt.step() is None


def test_step_bumps_the_parameter_version():
    w = tg.tensor(W0, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    w.grad = tg.tensor(np.ones_like(W0))
    before = w._version
    opt.step()
    assert w._version > before


def test_zero_d_parameters():
    p = tg.tensor(1.5, requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    p.grad = tg.tensor(2.0)
    opt.step()
    assert p.detach().numpy().shape == ()
    assert float(p.detach().numpy()) == pytest.approx(1.5 - 0.1 * 2.0 / (2.0 + 1e-8), rel=1e-15)


# ---------------------------------------------------------------------------------------------
# state_dict
# ---------------------------------------------------------------------------------------------


def _steps(opt, params, n):
    for _ in range(n):
        for p, g in zip(params, loss_grads(*values(params))):
            p.grad = tg.tensor(g)
        opt.step()


@pytest.mark.parametrize("make", [
    lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
    lambda ps: optim.Adam(ps, lr=0.02, amsgrad=True),
    lambda ps: optim.AdamW(ps, lr=0.02, weight_decay=0.1),
], ids=["SGD", "Adam", "AdamW"])
def test_state_dict_round_trip_continues_the_same_trajectory(make):
    a_params = [tg.tensor(W0, requires_grad=True), tg.tensor(B0, requires_grad=True)]
    a = make(a_params)
    _steps(a, a_params, 30)

    b_params = [tg.tensor(p.detach().numpy(), requires_grad=True) for p in a_params]
    b = make(b_params)
    b.param_groups[0]["lr"] = 123.0      # overwritten by the load
    # (a checkpoint's copy: the state dict's own tensors are a's, which b would keep and
    # both would then step, as PyTorch's optimizers would)
    b.load_state_dict(copy.deepcopy(a.state_dict()))
    assert b.param_groups[0]["lr"] == a.param_groups[0]["lr"]
    assert b.param_groups[0]["params"] == b_params

    _steps(a, a_params, 20)
    _steps(b, b_params, 20)
    for pa, pb in zip(a_params, b_params):
        np.testing.assert_array_equal(pa.detach().numpy(), pb.detach().numpy())


def test_state_dict_layout():
    w, b = tg.tensor(W0, requires_grad=True), tg.tensor(B0, requires_grad=True)
    frozen = tg.tensor(FROZEN0, requires_grad=True)
    opt = optim.Adam([{"params": [w, frozen]}, {"params": [b], "lr": 0.5}], amsgrad=True)
    _steps(opt, [w, b], 3)
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert sd["param_groups"][1]["lr"] == 0.5
    assert sorted(sd["state"]) == [0, 2]           # the frozen parameter has no state
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
    assert float(sd["state"][2]["step"]) == 3.0
    assert sd["state"][0]["exp_avg"].shape == (3, 2)
    # the packed groups are copies: editing them leaves the optimizer alone
    sd["param_groups"][0]["lr"] = 9.0
    assert opt.param_groups[0]["lr"] == 1e-3


def test_sgd_without_momentum_keeps_no_state():
    w = tg.tensor(W0, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    _steps(opt, [w, tg.tensor(B0, requires_grad=True)], 2)
    assert opt.state_dict()["state"] == {}


def _shared_after_load(lib):
    """What loading an optimizer's state dict into another shares, in library ``lib``."""
    w = lib.tensor(W0, dtype=lib.float64, requires_grad=True)
    a = lib.optim.Adam([w], lr=0.1)
    w.grad = lib.tensor(np.ones_like(W0), dtype=lib.float64)
    a.step()
    sd = a.state_dict()
    before = sd["state"][0]["exp_avg"].clone()
    v = lib.tensor(W0, dtype=lib.float64, requires_grad=True)
    b = lib.optim.Adam([v], lr=0.1)
    b.load_state_dict(sd)
    kept = b.state[v]
    v.grad = lib.tensor(np.ones_like(W0), dtype=lib.float64)
    b.step()
    return (kept["exp_avg"] is sd["state"][0]["exp_avg"], kept["step"] is sd["state"][0]["step"],
            a.state[w]["exp_avg"] is kept["exp_avg"], float(a.state[w]["step"]),
            not bool((sd["state"][0]["exp_avg"] == before).all()),
            b.param_groups[0] is sd["param_groups"][0])


def test_load_state_dict_keeps_the_state_tensors_as_pytorch_does():
    # (b's step then changes a's state too, as in PyTorch: a checkpoint is a copy)
    torch = pytest.importorskip("torch")
    assert _shared_after_load(tg) == _shared_after_load(torch)
    assert _shared_after_load(tg)[:3] == (True, True, True)


def test_load_state_dict_copies_what_the_kernels_cannot_update_in_place():
    w = tg.tensor(W0, requires_grad=True)
    a = optim.SGD([w], lr=0.1, momentum=0.9)
    w.grad = tg.tensor(np.ones_like(W0))
    a.step()
    sd = copy.deepcopy(a.state_dict())
    buf = sd["state"][0]["momentum_buffer"]
    # an integer tensor (converted, as PyTorch's .to(float64) converts it) and a view
    for entry in (tg.ones(W0.shape, dtype=tg.int64), tg.ones(W0.shape[::-1]).t()):
        sd["state"][0]["momentum_buffer"] = entry
        b = optim.SGD([tg.tensor(W0, requires_grad=True)], lr=0.1, momentum=0.9)
        b.load_state_dict(sd)
        b_buf = b.state[b.param_groups[0]["params"][0]]["momentum_buffer"]
        assert b_buf is not entry and b_buf.dtype == tg.float64
        np.testing.assert_array_equal(b_buf.numpy(), np.ones_like(W0))
    np.testing.assert_array_equal(buf.numpy(), np.ones_like(W0))


def test_load_state_dict_checks_group_shapes():
    w, b = tg.tensor(W0, requires_grad=True), tg.tensor(B0, requires_grad=True)
    one_group = optim.SGD([w, b], lr=0.1)
    two_groups = optim.SGD([{"params": [w]}, {"params": [b]}], lr=0.1)
    with pytest.raises(ValueError,
                       match="^loaded state dict has a different number of parameter groups$"):
        one_group.load_state_dict(two_groups.state_dict())
    other = optim.SGD([w], lr=0.1)
    with pytest.raises(ValueError,
                       match="^loaded state dict contains a parameter group that doesn't match"):
        one_group.load_state_dict(other.state_dict())


@requires_torch
def test_adam_state_matches_torch_state():
    config = dict(lr=0.02, amsgrad=True, weight_decay=0.05)
    ours = [tg.tensor(W0, requires_grad=True), tg.tensor(B0, requires_grad=True)]
    theirs = [torch.tensor(W0, requires_grad=True), torch.tensor(B0, requires_grad=True)]
    opt, topt = optim.Adam(ours, **config), torch.optim.Adam(theirs, **config)
    for _ in range(25):
        for p, g in zip(ours, loss_grads(*values(ours))):
            p.grad = tg.tensor(g)
        for p, g in zip(theirs, loss_grads(*[t.detach().numpy() for t in theirs])):
            p.grad = torch.tensor(g)
        opt.step()
        topt.step()
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sd["state"].keys() == tsd["state"].keys()
    for i in sd["state"]:
        assert sd["state"][i].keys() == tsd["state"][i].keys()
        for key, value in sd["state"][i].items():
            np.testing.assert_allclose(value.numpy(), tsd["state"][i][key].numpy(), rtol=RTOL)
    for group, tgroup in zip(sd["param_groups"], tsd["param_groups"]):
        assert {k: tgroup[k] for k in group} == group


# ---------------------------------------------------------------------------------------------
# Hyperparameter and argument errors, worded as in PyTorch
# ---------------------------------------------------------------------------------------------

BAD_HYPERPARAMETERS = [
    ("SGD", dict(lr=-1), "Invalid learning rate: -1"),
    ("SGD", dict(lr=0.1, momentum=-0.5), "Invalid momentum value: -0.5"),
    ("SGD", dict(lr=0.1, weight_decay=-1e-4), "Invalid weight_decay value: -0.0001"),
    ("SGD", dict(lr=0.1, nesterov=True),
     "Nesterov momentum requires a momentum and zero dampening"),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True),
     "Nesterov momentum requires a momentum and zero dampening"),
    ("Adam", dict(lr=-0.001), "Invalid learning rate: -0.001"),
    ("Adam", dict(eps=-1e-8), "Invalid epsilon value: -1e-08"),
    ("Adam", dict(betas=(1.0, 0.999)), "Invalid beta parameter at index 0: 1.0"),
    ("Adam", dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    ("Adam", dict(weight_decay=-1), "Invalid weight_decay value: -1"),
    ("AdamW", dict(betas=(0.9, 1.5)), "Invalid beta parameter at index 1: 1.5"),
    ("AdamW", dict(lr=-2.0), "Invalid learning rate: -2.0"),
]


@pytest.mark.parametrize("name, kwargs, message", BAD_HYPERPARAMETERS)
def test_bad_hyperparameters(name, kwargs, message):
    p = tg.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError) as info:
        getattr(optim, name)([p], **kwargs)
    assert str(info.value) == message


@requires_torch
@pytest.mark.parametrize("name, kwargs, message", BAD_HYPERPARAMETERS)
def test_bad_hyperparameters_worded_as_torch(name, kwargs, message):
    p = torch.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError) as info:
        getattr(torch.optim, name)([p], **kwargs)
    assert str(info.value) == message


def test_bad_params_arguments():
    p = tg.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="^optimizer got an empty parameter list$"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="^params argument given to the optimizer should be an "
                                        "iterable of Tensors or dicts, but got"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(TypeError, match="^optimizer can only optimize Tensors, but one of the "
                                        "params is float$"):
        optim.SGD([1.0], lr=0.1)
    with pytest.raises(ValueError, match="^can't optimize a non-leaf Tensor$"):
        optim.SGD([p * 2], lr=0.1)


def test_repr_lists_group_hyperparameters_sorted():
    p = tg.tensor([1.0], requires_grad=True)
    assert repr(optim.SGD([p], lr=0.1, momentum=0.9)) == (
        "SGD (\n"
        "Parameter Group 0\n"
        "    dampening: 0\n"
        "    differentiable: False\n"
        "    foreach: None\n"
        "    fused: None\n"
        "    lr: 0.1\n"
        "    maximize: False\n"
        "    momentum: 0.9\n"
        "    nesterov: False\n"
        "    weight_decay: 0\n"
        ")")


@requires_torch
@pytest.mark.parametrize("name, kwargs", [
    ("SGD", {"lr": 0.1}), ("SGD", {"lr": 0.1, "foreach": False, "fused": True}),
    ("Adam", {}), ("Adam", {"fused": True}), ("AdamW", {"foreach": True}),
    ("AdamW", {"fused": None, "amsgrad": True}),
    ("SGD", {"lr": 0.1, "fused": True, "foreach": True}), ("Adam", {"fused": True,
                                                                   "differentiable": True})])
def test_kernel_choices_are_accepted_and_kept_as_pytorch(name, kwargs):
    # programs pass foreach= and fused= (nanoGPT's AdamW(fused=...)): they stopped on an
    # unexpected keyword; the groups keep them, and the refused combinations raise as PyTorch
    def groups(lib, p):
        try:
            opt = getattr(lib.optim, name)([p], **kwargs)
        except RuntimeError as e:
            return str(e)
        return repr(opt)
    ours = groups(tg, tg.tensor([1.0], requires_grad=True))
    theirs = groups(torch, torch.tensor([1.0], dtype=torch.float64, requires_grad=True))
    assert ours == theirs


def test_reference_transcriptions_agree_with_closed_forms():
    """Guards the references themselves: plain gradient descent is W - lr * grad, and one Adam
    step from zero state moves each coordinate by lr * sign(grad) (up to eps)."""
    first = reference_sgd(lr=0.05, steps=1)[0]
    gw, gb = loss_grads(W0, B0)
    np.testing.assert_allclose(first[0], W0 - 0.05 * gw, rtol=1e-15)
    adam_first = reference_adam(lr=0.01, eps=0.0, steps=1)[0]
    np.testing.assert_allclose(adam_first[1], B0 - 0.01 * np.sign(gb), rtol=1e-14)
    assert math.isfinite(float(np.sum(reference_adam(lr=0.01, amsgrad=True)[-1][0])))
