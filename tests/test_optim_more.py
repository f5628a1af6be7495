"""Rprop and ASGD against torch.optim: 100-step trajectories over hypothesis-drawn
hyperparameters (test_optim.py's least-squares problem and NumPy gradients), training a small
model through autograd, param groups, state dicts (layout, values, round trip), edge values of
the gradient and the hyperparameter errors."""
import copy

import numpy as np
import pytest
from hypothesis import given, strategies as st

import tapegrad as tg
from tapegrad import optim
from test_optim import RTOL, W0, grads_for, values
from test_optim_algorithms import assert_matches_torch, assert_same_trajectory, trajectory

torch = pytest.importorskip("torch")

flags = st.booleans()
CONFIGS = {
    "Rprop": st.fixed_dictionaries(
        {"lr": st.floats(1e-4, 0.1),
         "etas": st.tuples(st.floats(0.1, 0.9), st.floats(1.05, 2.0)),
         "step_sizes": st.tuples(st.sampled_from([0.0, 1e-6, 1e-3]),
                                 st.sampled_from([0.05, 1.0, 50])),
         "maximize": flags}),
    "ASGD": st.fixed_dictionaries(
        {"lr": st.floats(1e-4, 0.1), "lambd": st.sampled_from([0.0, 1e-4, 0.05]),
         "alpha": st.floats(0.5, 1.0), "t0": st.sampled_from([0, 1, 10.0, 50, 1e6]),
         "weight_decay": st.one_of(st.just(0.0), st.floats(0.0, 0.1)), "maximize": flags}),
}
NAMES = sorted(CONFIGS)


@pytest.mark.parametrize("name", NAMES)
def test_defaults_match_torch(name):
    assert_matches_torch(name, {})


@pytest.mark.parametrize("name", NAMES)
@given(data=st.data())
def test_trajectory_matches_torch(name, data):
    """Rprop is fed PyTorch's gradients: its sign-driven steps near the optimum flip back
    and forth, which would turn a one-ulp difference of the two gradients into a different
    sign (see test_optim_algorithms.assert_matches_torch)."""
    assert_matches_torch(name, data.draw(CONFIGS[name], label="config"),
                         feed_torch_gradients=name == "Rprop")


def test_asgd_averages_after_t0():
    """t0 = 5: a copy for the first steps, then the running average, mu = 1 / (t - t0)."""
    assert_matches_torch("ASGD", {"lr": 0.05, "t0": 5, "lambd": 1e-3})
    make = lambda lib_optim, ps: lib_optim.ASGD(ps, lr=0.05, t0=5)  # noqa: E731
    opt, _, _ = trajectory(tg, make, steps=20)
    topt, _, _ = trajectory(torch, make, steps=20)
    ax, tax = opt.state_dict()["state"][0]["ax"], topt.state_dict()["state"][0]["ax"]
    np.testing.assert_allclose(ax.numpy(), tax.numpy(), rtol=RTOL)
    assert not np.allclose(ax.numpy(), opt.param_groups[0]["params"][0].detach().numpy())
    assert float(opt.state[opt.param_groups[0]["params"][0]]["mu"]) == 1 / 15


def _model(lib):
    """Linear(3, 8) - Tanh - Linear(8, 2) with the same (seeded NumPy) weights in both."""
    rng = np.random.default_rng(5)
    model = lib.nn.Sequential(lib.nn.Linear(3, 8), lib.nn.Tanh(), lib.nn.Linear(8, 2))
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)) * 0.5))
    return model


@pytest.mark.parametrize("name, config", [
    ("Rprop", {}), ("Rprop", {"lr": 0.003, "etas": (0.3, 1.5), "maximize": False}),
    ("ASGD", {}), ("ASGD", {"lr": 0.05, "t0": 10, "weight_decay": 0.01}),
])
def test_training_a_small_model_matches_torch(name, config):
    """30 steps of the usual loop (zero_grad, forward, MSE, backward, step): the gradients
    come from each library's autograd."""
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal((16, 3)), rng.standard_normal((16, 2))
    results = []
    for lib in (tg, torch):
        model = _model(lib)
        opt = getattr(lib.optim, name)(model.parameters(), **config)
        loss_fn = lib.nn.MSELoss()
        losses = []
        for _ in range(30):
            opt.zero_grad()
            loss = loss_fn(model(lib.tensor(x)), lib.tensor(y))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        results.append(([p.detach().numpy().copy() for p in model.parameters()], losses))
    (ours, our_losses), (theirs, their_losses) = results
    np.testing.assert_allclose(our_losses, their_losses, rtol=RTOL)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=RTOL * np.max(np.abs(b)))
    assert our_losses[-1] < our_losses[0]


def _fixed_gradient_run(lib, name, grads, **config):
    p = lib.tensor([0.5, -1.0, 2.0, 0.0], requires_grad=True)
    opt = getattr(lib.optim, name)([p], **config)
    out = []
    for g in grads:
        p.grad = lib.tensor(g)
        opt.step()
        out.append((p.detach().numpy().copy(),
                    {k: v.numpy().copy() for k, v in opt.state[p].items()}))
    return out


EDGE_GRADIENTS = [[1.0, 0.0, -2.0, 0.0], [1.0, 3.0, 2.0, 0.0], [0.0, -3.0, 2.0, 1e-300],
                  [-1.0, -3.0, np.nan, 1.0], [-1.0, np.inf, 1.0, -np.inf],
                  [2.0, 1.0, 1.0, 1.0]]


@pytest.mark.parametrize("name, config", [
    ("Rprop", {"lr": 0.1}), ("Rprop", {"lr": 0.1, "step_sizes": (0.02, 0.15)}),
    ("ASGD", {"lr": 0.1, "t0": 2}), ("ASGD", {"lr": 0.1, "t0": 0, "weight_decay": 0.5}),
])
def test_edge_gradients_match_torch(name, config):
    """Zero gradients (Rprop's factor 1), sign flips, a denormal, NaN and infinities: the
    parameters and every state entry after each step are PyTorch's (NaN where it has NaN)."""
    ours = _fixed_gradient_run(tg, name, EDGE_GRADIENTS, **config)
    theirs = _fixed_gradient_run(torch, name, EDGE_GRADIENTS, **config)
    for (p, state), (tp, tstate) in zip(ours, theirs):
        np.testing.assert_allclose(p, tp, rtol=RTOL)
        assert state.keys() == tstate.keys()
        for key in state:
            np.testing.assert_allclose(state[key], tstate[key], rtol=RTOL, err_msg=key)


def test_rprop_leaves_the_gradient_alone():
    """The step zeroes a copy of the gradient where the sign flipped, not ``.grad``."""
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.Rprop([p])
    for g in ([1.0, 1.0], [-1.0, 1.0]):
        p.grad = tg.tensor(g)
        opt.step()
        np.testing.assert_array_equal(p.grad.numpy(), g)


def test_tensor_lr_matches_torch():
    results = []
    for lib in (tg, torch):
        out = []
        for name in NAMES:
            make = lambda lib_optim, ps, name=name: getattr(lib_optim, name)(  # noqa: E731
                ps, lr=lib.tensor(0.01))
            out.append(trajectory(lib, make, steps=10)[1])
        results.append(out)
    for a, b in zip(*results):
        assert_same_trajectory(a, b)


GROUP_OVERRIDES = {"Rprop": {"lr": 0.02, "etas": (0.4, 1.3), "step_sizes": (1e-4, 0.1)},
                   "ASGD": {"lr": 0.03, "t0": 4, "lambd": 1e-3}}


@pytest.mark.parametrize("name", NAMES)
def test_param_groups_match_torch(name):
    def make(lib_optim, ps):
        w, b, frozen = ps
        return getattr(lib_optim, name)(
            [{"params": [w], **GROUP_OVERRIDES[name]}, {"params": [b, frozen]}])
    opt, actual, _ = trajectory(tg, make)
    topt, expected, grads = trajectory(torch, make)
    if name == "Rprop":   # sign-driven: compared on PyTorch's gradients (see above)
        opt, actual, _ = trajectory(tg, make, given_grads=grads)
    assert_same_trajectory(actual, expected)
    for group, tgroup in zip(opt.param_groups, topt.param_groups):
        assert {k: v for k, v in group.items() if k != "params"} == \
            {k: v for k, v in tgroup.items() if k != "params"}


@pytest.mark.parametrize("name", NAMES)
def test_state_dict_matches_torch(name):
    make = lambda lib_optim, ps: getattr(lib_optim, name)(ps, **GROUP_OVERRIDES[name])  # noqa
    opt, _, _ = trajectory(tg, make, steps=7)
    topt, _, _ = trajectory(torch, make, steps=7)
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sd["state"].keys() == tsd["state"].keys() == {0, 1}   # the frozen one has none
    for i, state in sd["state"].items():
        assert list(state) == list(tsd["state"][i])
        for key, value in state.items():
            np.testing.assert_allclose(value.numpy(), tsd["state"][i][key].numpy(), rtol=RTOL,
                                       err_msg=f"state[{i}][{key!r}]")
    assert sd["param_groups"] == tsd["param_groups"]


@pytest.mark.parametrize("name", NAMES)
def test_state_dict_round_trip_continues_the_trajectory(name):
    """Also with the 0-d entries saved as plain numbers (an older checkpoint's layout)."""
    make = lambda lib_optim, ps: getattr(lib_optim, name)(ps, **GROUP_OVERRIDES[name])  # noqa
    opt, _, _ = trajectory(tg, make, steps=30)
    params = opt.param_groups[0]["params"]
    # (checkpoints: copies, each loaded once -- see test_optim)
    saved = copy.deepcopy(opt.state_dict())
    kept = copy.deepcopy(opt.state_dict())
    as_numbers = {"state": {i: {k: (float(v) if v.ndim == 0 else v) for k, v in s.items()}
                            for i, s in kept["state"].items()},
                  "param_groups": kept["param_groups"]}
    copies = []
    for state in (saved, as_numbers):
        fresh = [tg.tensor(p.detach().numpy(), requires_grad=True) for p in params]
        resumed = make(optim, fresh)
        resumed.load_state_dict(state)
        copies.append((resumed, fresh))
    for o in [opt] + [c[0] for c in copies]:
        ps = o.param_groups[0]["params"][:2]
        for _ in range(20):
            for p, g in zip(ps, grads_for(values(ps), False)):
                p.grad = tg.tensor(g)
            o.step()
    for _, fresh in copies:
        for a, b in zip(params, fresh):
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


BAD = [
    ("Rprop", dict(lr=-1.0)), ("Rprop", dict(etas=(1.0, 1.2))), ("Rprop", dict(etas=(0.5, 1.0))),
    ("Rprop", dict(etas=(0.0, 1.2))), ("ASGD", dict(lr=-0.1)), ("ASGD", dict(weight_decay=-1.0)),
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
def test_tensor_lr_of_many_elements_is_refused_as_torch(name):
    errors = []
    for lib in (tg, torch):
        with pytest.raises(ValueError) as info:
            getattr(lib.optim, name)([lib.tensor([1.0], requires_grad=True)],
                                     lr=lib.tensor([0.1, 0.2]))
        errors.append(str(info.value))
    assert errors == ["Tensor lr must be 1-element"] * 2


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("flag", ["differentiable", "capturable"])
def test_unsupported_flags_are_refused(name, flag):
    with pytest.raises(NotImplementedError, match=f"{flag}=True"):
        getattr(optim, name)([tg.tensor([1.0], requires_grad=True)], **{flag: True})


@pytest.mark.parametrize("name", NAMES)
def test_with_a_scheduler_and_a_closure(name):
    """A scheduler changes group["lr"] between steps (Rprop reads it only for its first
    step sizes, ASGD for every new eta), and step(closure) returns the closure's loss."""
    results = []
    for lib in (tg, torch):
        p = lib.tensor(W0, requires_grad=True)
        opt = getattr(lib.optim, name)([p], lr=0.05)
        sched = lib.optim.lr_scheduler.StepLR(opt, 3, gamma=0.5)
        losses = []

        def closure():
            opt.zero_grad()
            loss = ((p - 1.0) ** 2).sum()
            loss.backward()
            return loss
        for _ in range(12):
            losses.append(opt.step(closure).item())
            sched.step()
        results.append((p.detach().numpy().copy(), losses))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=RTOL)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=RTOL)


@pytest.mark.parametrize("name, config", [("Rprop", {"lr": 0.1}),
                                          ("ASGD", {"lr": 0.1, "t0": 1, "weight_decay": 0.1})])
def test_zero_dim_and_empty_parameters_match_torch(name, config):
    """A 0-d parameter, an empty one and a (2, 0, 3) one step like any other (the empty ones
    get empty state); the 0-d one's trajectory and state are PyTorch's."""
    results = []
    for lib in (tg, torch):
        scalar = lib.tensor(1.5, requires_grad=True)
        empties = [lib.zeros(0, requires_grad=True), lib.zeros(2, 0, 3, requires_grad=True)]
        opt = getattr(lib.optim, name)([scalar] + empties, **config)
        path = []
        for g in (2.0, -1.0, -0.5, 0.0, 3.0):
            scalar.grad = lib.tensor(g)
            for e in empties:
                e.grad = lib.zeros_like(e)
            opt.step()
            path.append(float(scalar.detach()))
        state = [{k: (tuple(v.shape), v.numpy().tolist()) for k, v in opt.state[p].items()}
                 for p in [scalar] + empties]
        results.append((path, state, [tuple(e.shape) for e in empties]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=RTOL)
    assert results[0][1:] == results[1][1:]
