"""Learning-rate schedulers against torch.optim.lr_scheduler: the rates (and OneCycleLR's
momenta) over many steps, for hypothesis-drawn settings and two param groups; chained
schedulers, resuming, state dicts, errors and warnings.

The rates come from the same float expressions in the same order, so they are compared for
equality, not within a tolerance.  pytest turns warnings into errors here, so every test
that steps a scheduler also checks that normal use warns about nothing.
"""
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

import tapegrad as tg

torch = pytest.importorskip("torch")

STEPS = 120


def make_params(lib):
    return [lib.tensor([1.0, 2.0], requires_grad=True), lib.tensor([3.0], requires_grad=True)]


def sgd(lib_optim, params, momentum=0.9):
    """Two param groups with different rates (and momenta)."""
    return lib_optim.SGD([{"params": params[:1], "lr": 0.1},
                          {"params": params[1:], "lr": 0.03, "momentum": 0.5}],
                         lr=0.1, momentum=momentum)


def adam(lib_optim, params):
    return lib_optim.Adam([{"params": params[:1], "lr": 0.01},
                           {"params": params[1:], "lr": 0.002, "betas": (0.8, 0.99)}])


def snapshot(opt, sched):
    groups = [(g["lr"], g.get("momentum"), g.get("betas")) for g in opt.param_groups]
    return list(sched.get_last_lr()), groups


def schedule(lib, make_opt, make_sched, steps=STEPS, metrics=None):
    """[(get_last_lr(), [(lr, momentum, betas) per group])] after construction and after each
    (optimizer step, scheduler step)."""
    params = make_params(lib)
    opt = make_opt(lib.optim, params)
    sched = make_sched(lib.optim.lr_scheduler, opt)
    out = [snapshot(opt, sched)]
    for i in range(steps):
        for p in params:
            p.grad = lib.ones_like(p)
        opt.step()
        if metrics is None:
            sched.step()
        else:
            sched.step(metrics[i])
        out.append(snapshot(opt, sched))
    return out


def assert_same_schedule(make_sched, make_opt=sgd, steps=STEPS, metrics=None):
    actual = schedule(tg, make_opt, make_sched, steps, metrics)
    expected = schedule(torch, make_opt, make_sched, steps, metrics)
    assert actual == expected


# ---------------------------------------------------------------------------------------------
# Rate sequences
# ---------------------------------------------------------------------------------------------
gammas = st.floats(0.05, 1.0)


@given(step_size=st.integers(1, 15), gamma=gammas)
def test_step_lr(step_size, gamma):
    assert_same_schedule(lambda S, opt: S.StepLR(opt, step_size, gamma=gamma))


@given(milestones=st.lists(st.integers(0, STEPS), max_size=6), gamma=gammas)
def test_multistep_lr(milestones, gamma):
    """Milestones may repeat (the rate is then multiplied by gamma**count)."""
    assert_same_schedule(lambda S, opt: S.MultiStepLR(opt, milestones, gamma=gamma))


@given(gamma=st.floats(0.8, 1.0))
def test_exponential_lr(gamma):
    assert_same_schedule(lambda S, opt: S.ExponentialLR(opt, gamma))


@given(t_max=st.integers(1, 40), eta_min=st.one_of(st.just(0.0), st.floats(0.0, 0.02)))
def test_cosine_annealing_lr(t_max, eta_min):
    """120 steps pass T_max several times: the rate goes back up (no restarts)."""
    assert_same_schedule(lambda S, opt: S.CosineAnnealingLR(opt, T_max=t_max, eta_min=eta_min))


def _decay(rate):
    return lambda epoch: rate ** epoch


class _Warmup:
    """A callable object: LambdaLR saves its ``__dict__`` in the state dict."""

    def __init__(self, steps):
        self.steps = steps

    def __call__(self, epoch):
        return min(1.0, (epoch + 1) / self.steps)


@given(rate=st.floats(0.9, 1.0), warmup=st.integers(1, 30), one_for_all=st.booleans())
def test_lambda_lr(rate, warmup, one_for_all):
    lambdas = _decay(rate) if one_for_all else [_decay(rate), _Warmup(warmup)]
    assert_same_schedule(lambda S, opt: S.LambdaLR(opt, lambdas))


one_cycle_settings = st.fixed_dictionaries({
    "max_lr": st.one_of(st.floats(0.01, 1.0), st.tuples(st.floats(0.01, 1.0),
                                                          st.floats(0.01, 1.0))),
    "total_steps": st.integers(5, STEPS), "pct_start": st.floats(0.05, 0.95),
    "anneal_strategy": st.sampled_from(["cos", "linear"]), "cycle_momentum": st.booleans(),
    "base_momentum": st.floats(0.5, 0.85), "max_momentum": st.floats(0.86, 0.99),
    "div_factor": st.floats(2.0, 100.0), "final_div_factor": st.floats(10.0, 1e5),
    "three_phase": st.booleans()})


@pytest.mark.parametrize("make_opt", [sgd, adam], ids=["SGD-momentum", "Adam-beta1"])
@given(settings=one_cycle_settings)
def test_one_cycle_lr(make_opt, settings):
    """Every step of the cycle (total_steps - 1 steps after construction), momenta or beta1
    included."""
    settings = dict(settings, max_lr=list(settings["max_lr"]) if isinstance(
        settings["max_lr"], tuple) else settings["max_lr"])
    assert_same_schedule(lambda S, opt: S.OneCycleLR(opt, **settings), make_opt,
                         steps=settings["total_steps"] - 1)


def test_one_cycle_lr_from_epochs_and_steps_per_epoch():
    assert_same_schedule(lambda S, opt: S.OneCycleLR(opt, max_lr=0.5, epochs=4,
                                                     steps_per_epoch=10), steps=39)


plateau_settings = st.fixed_dictionaries({
    "mode": st.sampled_from(["min", "max"]), "factor": st.floats(0.05, 0.9),
    "patience": st.integers(0, 5), "threshold": st.floats(0.0, 0.1),
    "threshold_mode": st.sampled_from(["rel", "abs"]), "cooldown": st.integers(0, 4),
    "min_lr": st.one_of(st.floats(0.0, 0.01), st.tuples(st.floats(0.0, 0.01),
                                                         st.floats(0.0, 0.01))),
    "eps": st.sampled_from([1e-8, 1e-3])})


@given(settings=plateau_settings,
       metrics=st.lists(st.floats(-10.0, 10.0), min_size=STEPS, max_size=STEPS))
def test_reduce_lr_on_plateau(settings, metrics):
    settings = dict(settings, min_lr=list(settings["min_lr"]) if isinstance(
        settings["min_lr"], tuple) else settings["min_lr"])
    assert_same_schedule(lambda S, opt: S.ReduceLROnPlateau(opt, **settings),
                         metrics=metrics)


def test_reduce_lr_on_plateau_takes_a_tensor_metric():
    metrics = [tg.tensor(float(v)) for v in [3.0, 2.0, 2.5, 2.5, 2.6, 2.7, 1.0, 1.5, 1.6]]
    actual = schedule(tg, sgd, lambda S, opt: S.ReduceLROnPlateau(opt, patience=1),
                      steps=len(metrics), metrics=metrics)
    expected = schedule(torch, sgd, lambda S, opt: S.ReduceLROnPlateau(opt, patience=1),
                        steps=len(metrics), metrics=[torch.tensor(float(m)) for m in metrics])
    assert actual == expected


def test_chained_schedulers_compose():
    """Two chainable schedulers on one optimizer multiply their effects."""
    def two(S, opt):
        first = S.ExponentialLR(opt, gamma=0.95)
        second = S.MultiStepLR(opt, milestones=[10, 30, 30], gamma=0.5)

        class Both:
            def step(self):
                first.step()
                second.step()

            def get_last_lr(self):
                return second.get_last_lr()
        return Both()
    assert_same_schedule(two, steps=50)


def test_cosine_after_an_outside_change_of_the_rate():
    """The chained form starts from the current rate, so a change made between steps
    carries on (the closed form would undo it)."""
    results = []
    for lib in (tg, torch):
        params = make_params(lib)
        opt = sgd(lib.optim, params)
        sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
        rates = []
        for i in range(25):
            for p in params:
                p.grad = lib.ones_like(p)
            opt.step()
            if i == 4:
                opt.param_groups[0]["lr"] *= 3.0
            sched.step()
            rates.append(sched.get_last_lr())
        results.append(rates)
    assert results[0] == results[1]


# ---------------------------------------------------------------------------------------------
# State dicts, resuming
# ---------------------------------------------------------------------------------------------
SCHEDULERS = {
    "StepLR": lambda S, opt, **kw: S.StepLR(opt, 7, gamma=0.5, **kw),
    "MultiStepLR": lambda S, opt, **kw: S.MultiStepLR(opt, [5, 12, 12, 40], gamma=0.3, **kw),
    "ExponentialLR": lambda S, opt, **kw: S.ExponentialLR(opt, 0.97, **kw),
    "CosineAnnealingLR": lambda S, opt, **kw: S.CosineAnnealingLR(opt, 17, eta_min=1e-3, **kw),
    "LambdaLR": lambda S, opt, **kw: S.LambdaLR(opt, [_decay(0.96), _Warmup(9)], **kw),
    "OneCycleLR": lambda S, opt, **kw: S.OneCycleLR(opt, [0.4, 0.2], total_steps=80, **kw),
}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_state_dict_matches_torch(name):
    dicts = []
    for lib in (tg, torch):
        params = make_params(lib)
        opt = sgd(lib.optim, params)
        sched = SCHEDULERS[name](lib.optim.lr_scheduler, opt)
        for _ in range(23):
            for p in params:
                p.grad = lib.ones_like(p)
            opt.step()
            sched.step()
        dicts.append(sched.state_dict())
    ours, theirs = dicts
    assert ours.keys() == theirs.keys()
    for key in ours:
        if key != "_schedule_phases":
            assert ours[key] == theirs[key], key
    assert list(ours.get("_schedule_phases", [])) == list(theirs.get("_schedule_phases", []))


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_resuming_from_state_dicts_continues_the_schedule(name):
    """Save optimizer and scheduler after 30 steps, build new ones, load, step 40 more: the
    rates are those of one uninterrupted run (and of PyTorch's resumed run)."""
    runs = []
    for lib in (tg, torch):
        params = make_params(lib)
        opt = sgd(lib.optim, params)
        sched = SCHEDULERS[name](lib.optim.lr_scheduler, opt)

        def steps(opt, sched, n, params=params):
            rates = []
            for _ in range(n):
                for p in params:
                    p.grad = lib.ones_like(p)
                opt.step()
                sched.step()
                rates.append(sched.get_last_lr())
            return rates
        steps(opt, sched, 30)
        opt_state, sched_state = opt.state_dict(), sched.state_dict()
        straight = steps(opt, sched, 40)
        params = make_params(lib)
        opt2 = sgd(lib.optim, params)
        opt2.load_state_dict(opt_state)
        sched2 = SCHEDULERS[name](lib.optim.lr_scheduler, opt2, last_epoch=29)
        sched2.load_state_dict(sched_state)
        resumed = steps(opt2, sched2, 40, params)
        assert resumed == straight
        runs.append(resumed)
    assert runs[0] == runs[1]


def test_lambda_lr_state_dict_saves_callable_objects_only():
    params = make_params(tg)
    opt = sgd(tg.optim, params)
    sched = tg.optim.lr_scheduler.LambdaLR(opt, [_decay(0.9), _Warmup(5)])
    assert sched.state_dict()["lr_lambdas"] == [None, {"steps": 5}]
    other = tg.optim.lr_scheduler.LambdaLR(sgd(tg.optim, make_params(tg)),
                                           [_decay(0.9), _Warmup(50)])
    saved = sched.state_dict()
    other.load_state_dict(saved)
    assert other.lr_lambdas[1].steps == 5 and "lr_lambdas" in saved


# ---------------------------------------------------------------------------------------------
# Errors and warnings, as PyTorch's
# ---------------------------------------------------------------------------------------------
def _raised(make):
    errors = []
    for lib in (tg, torch):
        opt = sgd(lib.optim, make_params(lib))
        with pytest.raises(Exception) as info:
            make(lib.optim.lr_scheduler, opt)
        errors.append((type(info.value), str(info.value)))
    return errors


@pytest.mark.parametrize("make", [
    lambda S, opt: S.StepLR(object(), 3),
    lambda S, opt: S.StepLR(opt, 3, last_epoch=5),
    lambda S, opt: S.LambdaLR(opt, [lambda e: 1.0]),
    lambda S, opt: S.OneCycleLR(opt, 0.1),
    lambda S, opt: S.OneCycleLR(opt, 0.1, total_steps=0),
    lambda S, opt: S.OneCycleLR(opt, 0.1, epochs=2, steps_per_epoch=0),
    lambda S, opt: S.OneCycleLR(opt, 0.1, total_steps=10, pct_start=1.5),
    lambda S, opt: S.OneCycleLR(opt, 0.1, total_steps=10, anneal_strategy="exp"),
    lambda S, opt: S.OneCycleLR(opt, [0.1, 0.2, 0.3], total_steps=10),
    lambda S, opt: S.ReduceLROnPlateau(opt, factor=1.0),
    lambda S, opt: S.ReduceLROnPlateau(opt, mode="middle"),
    lambda S, opt: S.ReduceLROnPlateau(opt, threshold_mode="both"),
    lambda S, opt: S.ReduceLROnPlateau(opt, min_lr=[0.1]),
], ids=["not-an-optimizer", "resume-without-initial-lr", "lambdas-count", "no-total-steps",
        "zero-total-steps", "zero-steps-per-epoch", "pct-start", "anneal-strategy",
        "max-lr-count", "factor", "mode", "threshold-mode", "min-lr-count"])
def test_errors_match_torch(make):
    ours, theirs = _raised(make)
    assert ours == theirs


def test_one_cycle_lr_stepped_past_its_end_raises_as_torch():
    errors = []
    for lib in (tg, torch):
        params = make_params(lib)
        opt = sgd(lib.optim, params)
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=5)
        for p in params:
            p.grad = lib.ones_like(p)
        opt.step()
        with pytest.raises(ValueError) as info:
            for _ in range(6):
                sched.step()
        errors.append(str(info.value))
    assert errors[0] == errors[1] == "Tried to step 6 times. The specified number of total " \
                                     "steps is 5"


def _warnings_of(lib, action):
    params = make_params(lib)
    opt = sgd(lib.optim, params)
    sched = lib.optim.lr_scheduler.StepLR(opt, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        action(lib, opt, sched, params)
    return [str(w.message) for w in caught]


def _step_scheduler_first(lib, opt, sched, params):
    sched.step()


def _get_lr_outside_step(lib, opt, sched, params):
    sched.get_lr()


def _step_with_epoch(lib, opt, sched, params):
    for p in params:
        p.grad = lib.ones_like(p)
    opt.step()
    sched.step(7)


@pytest.mark.parametrize("action", [_step_scheduler_first, _get_lr_outside_step,
                                    _step_with_epoch])
def test_warnings_match_torch(action):
    ours, theirs = _warnings_of(tg, action), _warnings_of(torch, action)
    assert len(ours) == 1
    assert ours == theirs


@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "ExponentialLR",
                                  "CosineAnnealingLR"])
def test_step_with_epoch_uses_the_closed_form(name):
    rates = []
    for lib in (tg, torch):
        params = make_params(lib)
        opt = sgd(lib.optim, params)
        sched = SCHEDULERS[name](lib.optim.lr_scheduler, opt)
        out = []
        for epoch in (3, 10, 4, 25):
            for p in params:
                p.grad = lib.ones_like(p)
            opt.step()
            with pytest.warns(UserWarning, match="The epoch parameter"):
                sched.step(epoch)
            out.append(sched.get_last_lr())
        rates.append(out)
    assert rates[0] == rates[1]
    assert not math.isnan(np.sum(rates[0]))


def test_scheduler_sets_tensor_rates_in_place():
    params = make_params(tg)
    lr = tg.tensor(0.1)
    opt = tg.optim.SGD(params, lr=lr)
    sched = tg.optim.lr_scheduler.ExponentialLR(opt, 0.5)
    for p in params:
        p.grad = tg.ones_like(p)
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] is lr and float(lr) == 0.05
    assert float(sched.get_last_lr()[0]) == 0.05 and sched.get_last_lr()[0] is not lr
