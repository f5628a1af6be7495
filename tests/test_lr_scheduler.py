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


# ---------------------------------------------------------------------------------------------
# The schedulers added later: LinearLR, ConstantLR, PolynomialLR, MultiplicativeLR,
# CosineAnnealingWarmRestarts, CyclicLR, SequentialLR, ChainedScheduler
# ---------------------------------------------------------------------------------------------
factors = st.floats(0.01, 1.0)


@given(start=factors, end=st.floats(0.0, 1.0), total_iters=st.integers(1, 60))
def test_linear_lr(start, end, total_iters):
    """The chained form, past total_iters too (where the rate stays)."""
    assert_same_schedule(lambda S, opt: S.LinearLR(opt, start_factor=start, end_factor=end,
                                                   total_iters=total_iters))


@given(factor=factors, total_iters=st.integers(0, 60))
def test_constant_lr(factor, total_iters):
    assert_same_schedule(lambda S, opt: S.ConstantLR(opt, factor=factor,
                                                     total_iters=total_iters))


@given(total_iters=st.integers(1, 150), power=st.floats(0.1, 4.0))
def test_polynomial_lr(total_iters, power):
    assert_same_schedule(lambda S, opt: S.PolynomialLR(opt, total_iters=total_iters,
                                                       power=power))


@given(rate=st.floats(0.9, 1.0), warmup=st.integers(1, 30), one_for_all=st.booleans())
def test_multiplicative_lr(rate, warmup, one_for_all):
    """Each factor multiplies the current rate (epoch 0's is never applied)."""
    lambdas = _decay(rate) if one_for_all else [_decay(rate), _Warmup(warmup)]
    assert_same_schedule(lambda S, opt: S.MultiplicativeLR(opt, lambdas))


@given(t_0=st.integers(1, 30), t_mult=st.integers(1, 3),
       eta_min=st.one_of(st.just(0.0), st.just(0), st.floats(0.0, 0.02)))
def test_cosine_annealing_warm_restarts(t_0, t_mult, eta_min):
    assert_same_schedule(lambda S, opt: S.CosineAnnealingWarmRestarts(
        opt, T_0=t_0, T_mult=t_mult, eta_min=eta_min))


def test_cosine_annealing_warm_restarts_with_fractional_epochs():
    """step(epoch) with fractions of an epoch (the documented per-batch use), jumps back and
    forth, across restarts, with T_mult 1 and 2: PyTorch's rates, and no warning."""
    epochs = [0.0, 0.25, 0.5, 1.75, 3.0, 7.5, 2.2, 15.0, 31.9, 0, 44.4, 100.0, 5]
    for t_mult in (1, 2):
        results = []
        for lib in (tg, torch):
            params = make_params(lib)
            opt = sgd(lib.optim, params)
            sched = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3,
                                                                       T_mult=t_mult)
            rates = []
            for epoch in epochs:
                for p in params:
                    p.grad = lib.ones_like(p)
                opt.step()
                sched.step(epoch)
                rates.append((sched.get_last_lr(), sched.T_cur, sched.T_i, sched.last_epoch))
            results.append(rates)
        assert results[0] == results[1]


cyclic_settings = st.fixed_dictionaries({
    "base_lr": st.one_of(st.floats(0.001, 0.1), st.tuples(st.floats(0.001, 0.1),
                                                           st.floats(0.001, 0.1))),
    "max_lr": st.one_of(st.floats(0.1, 1.0), st.tuples(st.floats(0.1, 1.0),
                                                        st.floats(0.1, 1.0))),
    "step_size_up": st.integers(1, 20), "step_size_down": st.one_of(st.none(),
                                                                     st.integers(1, 20)),
    "mode": st.sampled_from(["triangular", "triangular2", "exp_range"]),
    "gamma": st.floats(0.9, 1.0), "cycle_momentum": st.booleans(),
    "base_momentum": st.one_of(st.floats(0.5, 0.85), st.tuples(st.floats(0.5, 0.85),
                                                                st.floats(0.5, 0.85))),
    "max_momentum": st.floats(0.86, 0.99)})


def _lists(settings):
    """Hypothesis draws per-group values as tuples; pass them as lists too."""
    return {k: list(v) if isinstance(v, tuple) and k == "max_lr" else v
            for k, v in settings.items()}


@pytest.mark.parametrize("make_opt", [sgd, adam], ids=["SGD-momentum", "Adam-beta1"])
@given(settings=cyclic_settings)
def test_cyclic_lr(make_opt, settings):
    """Several cycles of every mode; momenta (or beta1) cycle the other way."""
    assert_same_schedule(lambda S, opt: S.CyclicLR(opt, **_lists(settings)), make_opt)


class _Sawtooth:
    """A callable scale function with state (saved by CyclicLR's state dict)."""

    def __init__(self, period):
        self.period = period

    def __call__(self, x):
        return 1.0 - (x % self.period) / self.period


@pytest.mark.parametrize("scale_mode", ["cycle", "iterations"])
@pytest.mark.parametrize("scale_fn", [_Sawtooth(7), lambda x: 0.9 ** x],
                         ids=["object", "lambda"])
def test_cyclic_lr_custom_scale_fn(scale_fn, scale_mode):
    """A custom scale_fn keeps the given scale_mode (the built-in modes set their own)."""
    assert_same_schedule(lambda S, opt: S.CyclicLR(opt, 0.01, 0.2, step_size_up=3,
                                                   step_size_down=5, scale_fn=scale_fn,
                                                   scale_mode=scale_mode, mode="bogus"))


def test_cyclic_lr_state_dict_saves_callable_scale_objects_only():
    results = []
    for lib in (tg, torch):
        scheds = [lib.optim.lr_scheduler.CyclicLR(sgd(lib.optim, make_params(lib)), 0.01,
                                                  0.1, scale_fn=fn)
                  for fn in (_Sawtooth(5), lambda x: 1.0, None)]
        results.append([s.state_dict()["_scale_fn_custom"] for s in scheds])
        assert "_scale_fn_ref" not in scheds[2].state_dict()
    assert results[0] == results[1] == [{"period": 5}, None, None]
    opt = sgd(tg.optim, make_params(tg))
    sched = tg.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, scale_fn=_Sawtooth(50))
    saved = tg.optim.lr_scheduler.CyclicLR(sgd(tg.optim, make_params(tg)), 0.01, 0.1,
                                           scale_fn=_Sawtooth(5)).state_dict()
    sched.load_state_dict(saved)
    assert sched._scale_fn_custom.period == 5 and saved["_scale_fn_custom"] == {"period": 5}


def _warmup_then_cosine(S, opt):
    warmup = S.LinearLR(opt, start_factor=0.1, total_iters=10)
    cosine = S.CosineAnnealingLR(opt, T_max=30, eta_min=1e-3)
    return S.SequentialLR(opt, [warmup, cosine], milestones=[10])


def _three_stages(S, opt):
    return S.SequentialLR(opt, [S.ConstantLR(opt, factor=0.3, total_iters=8),
                                S.ExponentialLR(opt, gamma=0.9),
                                S.StepLR(opt, step_size=7, gamma=0.5)], milestones=[5, 40])


def _sequential_of_chained(S, opt):
    """SequentialLR's constructor steps the ChainedScheduler again, whose schedulers are
    then past their first step before the optimizer's: PyTorch warns, and so must we."""
    first = S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=4),
                                S.ExponentialLR(opt, gamma=0.95)])
    with pytest.warns(UserWarning, match="Detected call of `lr_scheduler.step"):
        return S.SequentialLR(opt, [first, S.PolynomialLR(opt, total_iters=50, power=2.0)],
                              milestones=[20])


def _chained(S, opt):
    return S.ChainedScheduler([S.LinearLR(opt, start_factor=0.2, total_iters=15),
                               S.MultiplicativeLR(opt, lambda e: 0.99),
                               S.MultiStepLR(opt, milestones=[30, 60], gamma=0.3)])


def _chained_with_optimizer(S, opt):
    return S.ChainedScheduler([S.StepLR(opt, 10, gamma=0.5), S.ExponentialLR(opt, 0.98)],
                              optimizer=opt)


COMPOSITES = {"warmup-then-cosine": _warmup_then_cosine, "three-stages": _three_stages,
              "sequential-of-chained": _sequential_of_chained, "chained": _chained,
              "chained-with-optimizer": _chained_with_optimizer}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_sequential_and_chained_schedulers(name):
    assert_same_schedule(COMPOSITES[name])


def test_sequential_lr_with_a_milestone_at_zero_and_one_scheduler():
    assert_same_schedule(lambda S, opt: S.SequentialLR(
        opt, [S.ExponentialLR(opt, 0.9), S.StepLR(opt, 3, gamma=0.5)], milestones=[0]))
    assert_same_schedule(lambda S, opt: S.SequentialLR(
        opt, [S.PolynomialLR(opt, total_iters=30)], milestones=[]))


def _without_inner(state):
    return {k: v for k, v in state.items() if k != "_schedulers"}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite_state_dicts_match_torch_and_resume(name):
    """Keys and values (the wrapped schedulers' under ``_schedulers``); loading into fresh
    schedulers continues the schedule."""
    runs = []
    for lib in (tg, torch):
        params = make_params(lib)
        opt = sgd(lib.optim, params)
        sched = COMPOSITES[name](lib.optim.lr_scheduler, opt)

        def steps(opt, sched, n, params=params):
            rates = []
            for _ in range(n):
                for p in params:
                    p.grad = lib.ones_like(p)
                opt.step()
                sched.step()
                rates.append(sched.get_last_lr())
            return rates
        steps(opt, sched, 17)
        opt_state, sched_state = opt.state_dict(), sched.state_dict()
        straight = steps(opt, sched, 40)
        params = make_params(lib)
        opt2 = sgd(lib.optim, params)
        sched2 = COMPOSITES[name](lib.optim.lr_scheduler, opt2)
        opt2.load_state_dict(opt_state)
        sched2.load_state_dict(sched_state)
        assert "_schedulers" in sched_state
        resumed = steps(opt2, sched2, 40, params)
        assert resumed == straight
        runs.append((sched_state, resumed))
    (ours, our_rates), (theirs, their_rates) = runs
    assert our_rates == their_rates
    assert _without_inner(ours) == _without_inner(theirs)
    assert len(ours["_schedulers"]) == len(theirs["_schedulers"])
    for a, b in zip(ours["_schedulers"], theirs["_schedulers"]):
        a, b = _without_inner(a), _without_inner(b)
        assert a.keys() == b.keys() and a == b


NEW_SCHEDULERS = {
    "LinearLR": lambda S, opt, **kw: S.LinearLR(opt, 0.2, 0.9, total_iters=45, **kw),
    "ConstantLR": lambda S, opt, **kw: S.ConstantLR(opt, 0.4, total_iters=35, **kw),
    "PolynomialLR": lambda S, opt, **kw: S.PolynomialLR(opt, total_iters=60, power=1.5,
                                                        **kw),
    "MultiplicativeLR": lambda S, opt, **kw: S.MultiplicativeLR(
        opt, [_decay(0.999), _Warmup(9)], **kw),
    "CosineAnnealingWarmRestarts": lambda S, opt, **kw: S.CosineAnnealingWarmRestarts(
        opt, 6, T_mult=2, eta_min=1e-3, **kw),
    "CyclicLR": lambda S, opt, **kw: S.CyclicLR(opt, [0.01, 0.02], 0.3, step_size_up=9,
                                                step_size_down=4, mode="exp_range",
                                                gamma=0.99, **kw),
    "CyclicLR-callable": lambda S, opt, **kw: S.CyclicLR(opt, 0.01, 0.3, step_size_up=5,
                                                         scale_fn=_Sawtooth(4), **kw),
}
SCHEDULERS.update(NEW_SCHEDULERS)


@pytest.mark.parametrize("name", sorted(NEW_SCHEDULERS))
def test_new_state_dicts_match_torch(name):
    test_state_dict_matches_torch(name)


@pytest.mark.parametrize("name", sorted(NEW_SCHEDULERS))
def test_new_schedulers_resume_from_state_dicts(name):
    test_resuming_from_state_dicts_continues_the_schedule(name)


@pytest.mark.parametrize("name", ["LinearLR", "ConstantLR", "PolynomialLR",
                                  "MultiplicativeLR"])
def test_new_schedulers_with_epoch(name):
    """The closed form where PyTorch has one (MultiplicativeLR has none: get_lr)."""
    test_step_with_epoch_uses_the_closed_form(name)


class _NotAScheduler:
    """Has no ``optimizer``: SequentialLR and ChainedScheduler reject it."""


@pytest.mark.parametrize("make", [
    lambda S, opt: S.LinearLR(opt, start_factor=0.0),
    lambda S, opt: S.LinearLR(opt, start_factor=1.5),
    lambda S, opt: S.LinearLR(opt, end_factor=-0.1),
    lambda S, opt: S.ConstantLR(opt, factor=1.5),
    lambda S, opt: S.ConstantLR(object()),
    lambda S, opt: S.MultiplicativeLR(opt, [lambda e: 1.0]),
    lambda S, opt: S.MultiplicativeLR(opt, 0.5),
    lambda S, opt: S.CosineAnnealingWarmRestarts(opt, T_0=0),
    lambda S, opt: S.CosineAnnealingWarmRestarts(opt, T_0=2.0),
    lambda S, opt: S.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=0),
    lambda S, opt: S.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=1.5),
    lambda S, opt: S.CosineAnnealingWarmRestarts(opt, T_0=2, eta_min="0"),
    lambda S, opt: S.CosineAnnealingWarmRestarts(opt, T_0=2).step(-1),
    lambda S, opt: S.CyclicLR(object(), 0.1, 1.0),
    lambda S, opt: S.CyclicLR(opt, 0.1, 1.0, mode="sine"),
    lambda S, opt: S.CyclicLR(opt, [0.1, 0.2, 0.3], 1.0),
    lambda S, opt: S.CyclicLR(opt, 0.1, [1.0]),
    lambda S, opt: S.CyclicLR(opt, 0.1, 1.0, base_momentum=[0.8]),
    lambda S, opt: S.CyclicLR(type(opt).__module__.startswith("torch") and
                              __import__("torch").optim.Adagrad(opt.param_groups[0]["params"])
                              or tg.optim.Adagrad(opt.param_groups[0]["params"]), 0.1, 1.0),
    lambda S, opt: S.SequentialLR(opt, [], milestones=[]),
    lambda S, opt: S.SequentialLR(opt, [S.StepLR(opt, 2)], milestones=[3]),
    lambda S, opt: S.SequentialLR(opt, [S.StepLR(opt, 2), _NotAScheduler()], milestones=[3]),
    lambda S, opt: S.SequentialLR(opt, [S.StepLR(opt, 2), S.ReduceLROnPlateau(opt)],
                                  milestones=[3]),
    lambda S, opt: S.ChainedScheduler([]),
    lambda S, opt: S.ChainedScheduler([S.StepLR(opt, 2), _NotAScheduler()]),
    lambda S, opt: S.ChainedScheduler([S.ReduceLROnPlateau(opt)]),
], ids=["linear-start-0", "linear-start-big", "linear-end", "constant-factor",
        "not-an-optimizer", "multiplicative-count", "multiplicative-not-callable", "t0-zero",
        "t0-float", "tmult-zero", "tmult-float", "eta-min-str", "negative-epoch",
        "cyclic-not-an-optimizer", "cyclic-mode", "cyclic-base-lr-count",
        "cyclic-max-lr-count", "cyclic-momentum-count", "cyclic-no-momentum",
        "sequential-empty", "sequential-milestones", "sequential-not-a-scheduler",
        "sequential-plateau", "chained-empty", "chained-not-a-scheduler", "chained-plateau"])
def test_new_errors_match_torch(make):
    ours, theirs = _raised(make)
    assert ours == theirs


def test_sequential_lr_rejects_another_optimizers_scheduler():
    """PyTorch's text names the other optimizer by its repr, whose keys differ between the
    libraries (PyTorch's SGD has foreach, fused, ...): compare the type and the text's
    start."""
    errors = []
    for lib in (tg, torch):
        opt, other = sgd(lib.optim, make_params(lib)), sgd(lib.optim, make_params(lib))
        S = lib.optim.lr_scheduler
        for make in (lambda: S.SequentialLR(opt, [S.StepLR(opt, 2), S.StepLR(other, 2)],
                                            milestones=[3]),
                     lambda: S.ChainedScheduler([S.StepLR(opt, 2), S.StepLR(other, 2)])):
            with pytest.raises(ValueError) as info:
                make()
            text = str(info.value)
            assert text.endswith("which is different from SGD.")
            errors.append(text.split(" has ")[0])
    assert errors[:2] == errors[2:]


def _warnings_with(lib, make, action):
    params = make_params(lib)
    opt = sgd(lib.optim, params)
    sched = make(lib.optim.lr_scheduler, opt)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        action(lib, opt, sched, params)
    return [(w.category, str(w.message)) for w in caught]


def _step_with_fraction(lib, opt, sched, params):
    for p in params:
        p.grad = lib.ones_like(p)
    opt.step()
    sched.step(2.5)


@pytest.mark.parametrize("name", sorted(NEW_SCHEDULERS) + sorted(COMPOSITES))
@pytest.mark.parametrize("action", [_step_scheduler_first, _get_lr_outside_step,
                                    _step_with_epoch, _step_with_fraction])
def test_new_warnings_match_torch(name, action):
    """Including the cases where PyTorch does not warn (CosineAnnealingWarmRestarts' own
    step, SequentialLR's) and where it fails (a composite's step takes no epoch)."""
    make = NEW_SCHEDULERS.get(name) or COMPOSITES[name]
    outcomes = []
    for lib in (tg, torch):
        try:
            outcomes.append(_warnings_with(lib, make, action))
        except Exception as error:   # noqa: BLE001 - the same failure is expected of both
            outcomes.append((type(error), str(error).replace("torch.", "tapegrad.")))
    assert outcomes[0] == outcomes[1]


def test_cyclic_lr_resumed_keeps_its_base_lrs_and_momenta():
    """With last_epoch >= 0 nothing in the groups is reset; base_lrs are the given ones."""
    results = []
    for lib in (tg, torch):
        params = make_params(lib)
        opt = sgd(lib.optim, params)
        first = lib.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.2, step_size_up=4)
        for _ in range(6):
            for p in params:
                p.grad = lib.ones_like(p)
            opt.step()
            first.step()
        again = lib.optim.lr_scheduler.CyclicLR(opt, 0.05, 0.2, step_size_up=4,
                                                last_epoch=6)
        results.append((again.base_lrs, again.get_last_lr(),
                        [(g["lr"], g["momentum"]) for g in opt.param_groups]))
    assert results[0] == results[1]
