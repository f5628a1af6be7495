"""RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam against torch.optim: 100-step
trajectories over hypothesis-drawn hyperparameters, param groups, state dicts (layout,
values, round trip), zero_grad and the hyperparameter errors.

The problem and its NumPy gradients are test_optim.py's (a small least-squares fit), so
these tests exercise the optimizers alone, not the backward pass.
"""
import copy

import numpy as np
import pytest
from hypothesis import given, strategies as st

import tapegrad as tg
from tapegrad import optim
from test_optim import B0, FROZEN0, RTOL, STEPS, W0, grads_for, values

torch = pytest.importorskip("torch")


def assert_same_trajectory(actual, expected, rtol=RTOL):
    """Each parameter equal after every step to ``rtol`` relative to its largest entry.

    Relative to the tensor, not entry by entry: PyTorch's CPU kernels fuse some multiply-adds
    (differences of an ulp or two from step 3 on), and an entry that passes near zero
    (2.5e-6 among entries near 1) turned a 3e-17 difference into 1e-11 "relative"."""
    assert len(actual) == len(expected)
    for step, (a_step, e_step) in enumerate(zip(actual, expected)):
        for a, e in zip(a_step, e_step):
            np.testing.assert_allclose(a, e, rtol=0, atol=rtol * np.max(np.abs(e)),
                                       err_msg=f"step {step + 1}")


def trajectory(lib, make, maximize=False, steps=STEPS, given_grads=None):
    """(optimizer, [[W, b] after each step], [gradients used]) of ``make(lib.optim, params)``
    on the problem; a third parameter never gets a gradient and must not move.

    The gradients are the problem's at the current parameters, or ``given_grads``."""
    params = [lib.tensor(W0, requires_grad=True), lib.tensor(B0, requires_grad=True)]
    frozen = lib.tensor(FROZEN0, requires_grad=True)
    opt = make(lib.optim, params + [frozen])
    out, used = [], []
    for step in range(steps):
        grads = given_grads[step] if given_grads else grads_for(values(params), maximize)
        for p, g in zip(params, grads):
            p.grad = lib.tensor(g)
        used.append(grads)
        opt.step()
        out.append(values(params))
    np.testing.assert_array_equal(frozen.detach().numpy(), FROZEN0)
    return opt, out, used


def assert_matches_torch(name, config, feed_torch_gradients=False):
    """100 steps of ``name(**config)`` in both libraries give the same parameters.

    ``feed_torch_gradients``: tapegrad's optimizer is given the gradients of PyTorch's
    trajectory instead of its own.  Adaptive steps near the optimum can be chaotic (RMSprop
    with alpha 0.75, NAdam and RAdam without momentum: sign-like steps of size lr that
    overshoot back and forth), doubling a one-ulp difference every step through the
    gradient; fed the same gradients, the optimizers are compared with that loop cut, and
    what remains is their own recursion, which only averages."""
    make = lambda lib_optim, ps: getattr(lib_optim, name)(ps, **config)  # noqa: E731
    maximize = config.get("maximize", False)
    _, expected, grads = trajectory(torch, make, maximize)
    _, actual, _ = trajectory(tg, make, maximize,
                              given_grads=grads if feed_torch_gradients else None)
    assert_same_trajectory(actual, expected)


# ---------------------------------------------------------------------------------------------
# Hyperparameters
# ---------------------------------------------------------------------------------------------
lrs = st.floats(1e-4, 0.1)
decays = st.one_of(st.just(0.0), st.floats(0.0, 0.1))
epsilons = st.sampled_from([1e-8, 1e-6, 1e-3])
flags = st.booleans()
betas = st.tuples(st.floats(0.0, 0.99), st.floats(0.9, 0.9999))

CONFIGS = {
    "RMSprop": st.fixed_dictionaries(
        {"lr": lrs, "alpha": st.floats(0.5, 0.999), "eps": epsilons, "weight_decay": decays,
         "momentum": st.one_of(st.just(0.0), st.floats(0.0, 0.9)), "centered": flags,
         "maximize": flags}),
    "Adagrad": st.fixed_dictionaries(
        {"lr": st.floats(1e-3, 0.5), "lr_decay": decays, "weight_decay": decays,
         "initial_accumulator_value": st.one_of(st.just(0.0), st.floats(0.0, 1.0)),
         "eps": st.sampled_from([1e-10, 1e-6]), "maximize": flags}),
    "Adadelta": st.fixed_dictionaries(
        {"lr": st.floats(0.1, 2.0), "rho": st.floats(0.5, 0.99), "eps": st.sampled_from(
            [1e-6, 1e-4]), "weight_decay": decays, "maximize": flags}),
    "Adamax": st.fixed_dictionaries(
        {"lr": lrs, "betas": betas, "eps": epsilons, "weight_decay": decays,
         "maximize": flags}),
    "NAdam": st.fixed_dictionaries(
        {"lr": lrs, "betas": betas, "eps": epsilons, "weight_decay": decays,
         "momentum_decay": st.floats(0.0, 0.01), "decoupled_weight_decay": flags,
         "maximize": flags}),
    "RAdam": st.fixed_dictionaries(
        {"lr": lrs, "betas": betas, "eps": epsilons, "weight_decay": decays,
         "decoupled_weight_decay": flags, "maximize": flags}),
}
NAMES = sorted(CONFIGS)


@pytest.mark.parametrize("name", NAMES)
def test_defaults_match_torch(name):
    assert_matches_torch(name, {})


@pytest.mark.parametrize("name", NAMES)
@given(data=st.data())
def test_trajectory_matches_torch(name, data):
    assert_matches_torch(name, data.draw(CONFIGS[name], label="config"),
                         feed_torch_gradients=True)


def test_radam_takes_both_branches():
    """With beta2 = 0.99 the moving-average length passes 5 at step 6: the first steps are
    plain momentum, the later ones rectified (rho_inf = 199)."""
    assert_matches_torch("RAdam", {"lr": 0.01, "betas": (0.9, 0.99)})


# ---------------------------------------------------------------------------------------------
# Param groups, group keys, state
# ---------------------------------------------------------------------------------------------
GROUP_OVERRIDES = {
    "RMSprop": {"lr": 0.02, "momentum": 0.5, "centered": True},
    # (PyTorch fills every sum with the constructor's initial_accumulator_value, not the
    # group's: the override here shows that tapegrad does the same)
    "Adagrad": {"lr": 0.3, "lr_decay": 0.01, "initial_accumulator_value": 0.5},
    "Adadelta": {"lr": 0.5, "rho": 0.8},
    "Adamax": {"lr": 0.01, "betas": (0.5, 0.99)},
    "NAdam": {"lr": 0.01, "momentum_decay": 0.008},
    "RAdam": {"lr": 0.02, "weight_decay": 0.05},
}


@pytest.mark.parametrize("name", NAMES)
def test_param_groups_match_torch(name):
    def make(lib_optim, ps):
        w, b, frozen = ps
        return getattr(lib_optim, name)(
            [{"params": [w], **GROUP_OVERRIDES[name]}, {"params": [b, frozen]}])
    opt, actual, _ = trajectory(tg, make)
    topt, expected, _ = trajectory(torch, make)
    assert_same_trajectory(actual, expected)
    for group, tgroup in zip(opt.param_groups, topt.param_groups):
        assert set(group) == set(tgroup)
        assert {k: v for k, v in group.items() if k != "params"} == \
            {k: v for k, v in tgroup.items() if k != "params"}


@pytest.mark.parametrize("name", NAMES)
def test_state_dict_matches_torch(name):
    make = lambda lib_optim, ps: getattr(lib_optim, name)(ps, **GROUP_OVERRIDES[name])  # noqa
    opt, _, _ = trajectory(tg, make, steps=7)
    topt, _, _ = trajectory(torch, make, steps=7)
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sd["state"].keys() == tsd["state"].keys()
    for i, state in sd["state"].items():
        assert state.keys() == tsd["state"][i].keys()
        for key, value in state.items():
            np.testing.assert_allclose(value.numpy(), tsd["state"][i][key].numpy(), rtol=RTOL,
                                       err_msg=f"state[{i}][{key!r}]")
    assert sd["param_groups"] == tsd["param_groups"]


@pytest.mark.parametrize("name", NAMES)
def test_state_dict_round_trip_continues_the_trajectory(name):
    make = lambda lib_optim, ps: getattr(lib_optim, name)(ps, **GROUP_OVERRIDES[name])  # noqa
    opt, _, _ = trajectory(tg, make, steps=30)
    params = opt.param_groups[0]["params"]
    fresh = [tg.tensor(p.detach().numpy(), requires_grad=True) for p in params]
    resumed = make(optim, fresh)
    resumed.load_state_dict(copy.deepcopy(opt.state_dict()))   # (a checkpoint: see test_optim)
    for o in (opt, resumed):
        ps = o.param_groups[0]["params"][:2]
        for _ in range(20):
            for p, g in zip(ps, grads_for(values(ps), False)):
                p.grad = tg.tensor(g)
            o.step()
    for a, b in zip(params, fresh):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_adagrad_makes_state_for_every_parameter_up_front():
    ps = [tg.tensor(W0, requires_grad=True), tg.tensor(B0, requires_grad=True)]
    tps = [torch.tensor(W0, requires_grad=True), torch.tensor(B0, requires_grad=True)]
    opt = optim.Adagrad(ps, initial_accumulator_value=0.25)
    topt = torch.optim.Adagrad(tps, initial_accumulator_value=0.25)
    sd, tsd = opt.state_dict()["state"], topt.state_dict()["state"]
    assert sd.keys() == tsd.keys() == {0, 1}
    for i in sd:
        np.testing.assert_array_equal(sd[i]["sum"].numpy(), tsd[i]["sum"].numpy())
        assert float(sd[i]["step"]) == float(tsd[i]["step"]) == 0.0


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_matches_torch(name, set_to_none):
    results = []
    for lib in (tg, torch):
        p = lib.tensor(W0, requires_grad=True)
        opt = getattr(lib.optim, name)([p])
        p.grad = lib.tensor(np.ones_like(W0))
        opt.zero_grad(set_to_none=set_to_none)
        results.append(None if p.grad is None else p.grad.numpy().copy())
    if set_to_none:
        assert results == [None, None]
    else:
        np.testing.assert_array_equal(results[0], results[1])


def test_step_with_closure_returns_its_loss():
    p = tg.tensor(W0, requires_grad=True)
    opt = optim.RMSprop([p])

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert float(loss) == pytest.approx(float((W0 * W0).sum()), rel=1e-15)


# ---------------------------------------------------------------------------------------------
# Errors, worded as in PyTorch
# ---------------------------------------------------------------------------------------------
BAD = [
    ("RMSprop", dict(lr=-1.0)), ("RMSprop", dict(eps=-1.0)), ("RMSprop", dict(momentum=-0.1)),
    ("RMSprop", dict(weight_decay=-1.0)), ("RMSprop", dict(alpha=-0.5)),
    ("Adagrad", dict(lr=-0.1)), ("Adagrad", dict(lr_decay=-1.0)),
    ("Adagrad", dict(weight_decay=-1.0)), ("Adagrad", dict(initial_accumulator_value=-1.0)),
    ("Adagrad", dict(eps=-1.0)), ("Adagrad", dict(fused=True, foreach=True)),
    ("Adadelta", dict(lr=-1.0)), ("Adadelta", dict(rho=1.5)), ("Adadelta", dict(eps=-1.0)),
    ("Adadelta", dict(weight_decay=-1.0)),
    ("Adamax", dict(lr=-1.0)), ("Adamax", dict(eps=-1.0)), ("Adamax", dict(betas=(1.0, 0.9))),
    ("Adamax", dict(betas=(0.9, -0.1))), ("Adamax", dict(weight_decay=-1.0)),
    ("NAdam", dict(lr=-1.0)), ("NAdam", dict(momentum_decay=-1.0)),
    ("NAdam", dict(betas=(0.9, 1.0))),
    ("RAdam", dict(lr=-1.0)), ("RAdam", dict(eps=-1e-8)), ("RAdam", dict(weight_decay=-2)),
]


@pytest.mark.parametrize("name, kwargs", BAD)
def test_bad_hyperparameters_worded_as_torch(name, kwargs):
    errors = []
    for lib in (tg, torch):
        with pytest.raises(Exception) as info:
            getattr(lib.optim, name)([lib.tensor([1.0], requires_grad=True)], **kwargs)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("name", NAMES)
def test_differentiable_step_is_refused(name):
    p = tg.tensor([1.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match="differentiable=True"):
        getattr(optim, name)([p], differentiable=True)


# ---------------------------------------------------------------------------------------------
# LBFGS: a closure gives the loss and the gradients (from NumPy, the same numbers for both
# libraries); its dot products are BLAS's on both sides, whose summation orders differ, so
# iterates agree to rounding on a well-conditioned problem
# ---------------------------------------------------------------------------------------------
_lr_rng = np.random.default_rng(11)
FEATURES = _lr_rng.standard_normal((40, 4))
LABELS = (_lr_rng.random(40) < 0.5).astype(np.float64)
THETA0 = _lr_rng.standard_normal(3)
BIAS0 = np.array(0.3)


def logistic_loss(theta, bias):
    """L2-regularised logistic regression on the first three features: (loss, dtheta, dbias)."""
    z = FEATURES[:, :3] @ theta + bias
    p = 1.0 / (1.0 + np.exp(-z))
    loss = np.mean(np.logaddexp(0.0, z) - LABELS * z) + 0.05 * theta @ theta
    r = (p - LABELS) / LABELS.size
    return loss, FEATURES[:, :3].T @ r + 0.1 * theta, r.sum()


def lbfgs_run(lib, config, steps=STEPS):
    """Parameters after each ``step(closure)`` and the losses of every closure call."""
    theta, bias = lib.tensor(THETA0, requires_grad=True), lib.tensor(BIAS0, requires_grad=True)
    opt = lib.optim.LBFGS([theta, bias], **config)
    losses = []

    def closure():
        opt.zero_grad()
        loss, g_theta, g_bias = logistic_loss(theta.detach().numpy(), float(bias.detach()))
        theta.grad, bias.grad = lib.tensor(g_theta), lib.tensor(g_bias)
        losses.append(loss)
        return lib.tensor(loss)

    out, returned = [], []
    for _ in range(steps):
        returned.append(float(opt.step(closure)))
        out.append(values([theta, bias]))
    return opt, out, losses, returned


LBFGS_CONFIGS = st.fixed_dictionaries({
    "lr": st.floats(0.1, 1.0), "max_iter": st.integers(1, 20),
    "history_size": st.integers(1, 10), "line_search_fn": st.sampled_from([None, "strong_wolfe"]),
    "tolerance_grad": st.sampled_from([1e-7, 1e-5]), "tolerance_change": st.sampled_from(
        [1e-9, 1e-6])})


def assert_lbfgs_matches_torch(config):
    opt, actual, losses, returned = lbfgs_run(tg, config)
    topt, expected, tlosses, treturned = lbfgs_run(torch, config)
    assert len(losses) == len(tlosses)   # the same number of closure calls
    np.testing.assert_allclose(losses, tlosses, rtol=RTOL)
    np.testing.assert_allclose(returned, treturned, rtol=RTOL)
    assert_same_trajectory(actual, expected)
    state, tstate = opt.state_dict()["state"][0], topt.state_dict()["state"][0]
    assert state.keys() == tstate.keys()
    assert (state["n_iter"], state["func_evals"]) == (tstate["n_iter"], tstate["func_evals"])
    assert len(state["old_dirs"]) == len(tstate["old_dirs"])


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_defaults_match_torch(line_search_fn):
    assert_lbfgs_matches_torch({"line_search_fn": line_search_fn})


@given(config=LBFGS_CONFIGS)
def test_lbfgs_matches_torch(config):
    assert_lbfgs_matches_torch(config)


def test_lbfgs_with_autograd_closure_minimises_rosenbrock_as_torch_does():
    """The usual program: a closure that calls ``backward()``.  Rosenbrock's valley is
    ill-conditioned, which multiplies the rounding differences of the two libraries' own
    gradients and dot products: the iterates agree to 1e-9 and both reach the minimum."""
    results = []
    for lib in (tg, torch):
        x = lib.tensor([-1.2, 1.0, -0.5, 0.8], requires_grad=True)
        opt = lib.optim.LBFGS([x], lr=1, max_iter=50, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()
            loss.backward()
            return loss

        path = []
        for _ in range(5):
            opt.step(closure)
            path.append(x.detach().numpy().copy())
        results.append(np.array(path))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(results[0][-1], np.ones(4), atol=1e-6)


def test_lbfgs_errors_match_torch():
    for lib in (tg, torch):
        a, b = lib.tensor([1.0], requires_grad=True), lib.tensor([2.0], requires_grad=True)
        with pytest.raises(ValueError, match=r"^LBFGS doesn't support per-parameter options "
                                             r"\(parameter groups\)$"):
            lib.optim.LBFGS([{"params": [a]}, {"params": [b]}])
        opt = lib.optim.LBFGS([a], line_search_fn="backtracking")

        def closure():
            opt.zero_grad()
            loss = (a * a).sum()
            loss.backward()
            return loss

        with pytest.raises(RuntimeError, match="^only 'strong_wolfe' is supported$"):
            opt.step(closure)
