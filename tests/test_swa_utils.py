"""tapegrad.optim.swa_utils against torch.optim.swa_utils: the same seeded training program
(a Linear, BatchNorm1d, ReLU, Linear model, SGD) runs in both libraries, averaging after each
step, and every parameter and buffer of the averaged model, its state-dict keys and its
count come out bit for bit equal, for the equal-weight and the exponential averages in each
of their forms, with and without averaged buffers.  Also SWALR's rates, update_bn's
statistics, the in-place averages' lerp rounding, and the errors.

PyTorch's in-place averages call ``torch._foreach_lerp_``, which on CPU tensors is one
``lerp_`` per tensor, so those are compared for equality as well.
"""
import math
import warnings

import numpy as np
import pytest

import tapegrad as tg
from oracle import outcome

torch = pytest.importorskip("torch")

LIBS = [tg, torch]
STEPS = 5


def make_model(lib):
    return lib.nn.Sequential(lib.nn.Linear(3, 5), lib.nn.BatchNorm1d(5), lib.nn.ReLU(),
                             lib.nn.Linear(5, 2))


def train(lib, steps=STEPS, on_step=None, make_averaged=None):
    """A seeded training program: ``steps`` SGD steps on random batches, ``on_step(model)``
    after each one; returns the model, or (model, averaged model) with ``make_averaged``,
    the average updated after each step."""
    lib.manual_seed(0)
    model = make_model(lib)
    if make_averaged is not None:
        averaged = make_averaged(lib.optim.swa_utils, model)
        on_step = averaged.update_parameters
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(steps):
        x = lib.randn(8, 3, dtype=lib.float64)
        y = lib.randn(8, 2, dtype=lib.float64)
        loss = lib.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if on_step is not None:
            on_step(model)
    return model if make_averaged is None else (model, averaged)


def pytorch_snapshots(steps=STEPS):
    """The model's state dict after each step of PyTorch's run of the program."""
    snapshots = []
    train(torch, steps, lambda model: snapshots.append(state(model)))
    return snapshots


def average_snapshots(lib, make_averaged, snapshots):
    """(model, averaged model): ``model`` takes each snapshot's values in turn (in place, as
    training would change them) and is averaged in after each.

    Both libraries average the same values this way: the training steps themselves (matrix
    products, batch-norm reductions) are not PyTorch's op for op, and differ from them in
    the last bits (see ``test_the_whole_program_runs_in_both``)."""
    lib.manual_seed(0)
    model = make_model(lib)
    averaged = make_averaged(lib.optim.swa_utils, model)
    for snapshot in snapshots:
        model.load_state_dict({key: lib.tensor(value) for key, value in snapshot.items()})
        averaged.update_parameters(model)
    return model, averaged


def train_and_average(lib, make_averaged, steps=STEPS):
    """(model, averaged model) of the program averaging after each of ``steps`` steps, the
    model taking PyTorch's values after each step."""
    return average_snapshots(lib, make_averaged, pytorch_snapshots(steps))


def state(module):
    """{key: array} of a module's state dict, in its order."""
    return {key: value.detach().numpy().copy() for key, value in module.state_dict().items()}


def assert_same_state(mine, theirs):
    mine, theirs = state(mine), state(theirs)
    assert list(mine) == list(theirs)
    for key in mine:
        assert mine[key].dtype == theirs[key].dtype, key
        np.testing.assert_array_equal(mine[key], theirs[key], err_msg=key)


AVERAGES = {
    "swa": lambda swa, model, ub: swa.AveragedModel(model, use_buffers=ub),
    "swa_avg_fn": lambda swa, model, ub: swa.AveragedModel(
        model, avg_fn=swa.get_swa_avg_fn(), use_buffers=ub),
    "ema_avg_fn": lambda swa, model, ub: swa.AveragedModel(
        model, avg_fn=swa.get_ema_avg_fn(0.9), use_buffers=ub),
    "ema_multi": lambda swa, model, ub: swa.AveragedModel(
        model, multi_avg_fn=swa.get_ema_multi_avg_fn(0.9), use_buffers=ub),
    "ema_multi_default_decay": lambda swa, model, ub: swa.AveragedModel(
        model, multi_avg_fn=swa.get_ema_multi_avg_fn(), use_buffers=ub),
    "swa_multi": lambda swa, model, ub: swa.AveragedModel(
        model, multi_avg_fn=swa.get_swa_multi_avg_fn(), use_buffers=ub),
}


# (not swa_multi with use_buffers: an integer buffer refuses the in-place equal average, in
# PyTorch too -- the error test covers it)
@pytest.mark.parametrize("kind, use_buffers", [
    (kind, use_buffers) for kind in AVERAGES for use_buffers in (False, True)
    if not (kind == "swa_multi" and use_buffers)])
def test_averaged_model_matches_pytorch_bit_for_bit(kind, use_buffers):
    make = AVERAGES[kind]
    snapshots = pytorch_snapshots()
    runs = [average_snapshots(lib, lambda swa, model: make(swa, model, use_buffers), snapshots)
            for lib in LIBS]
    (model, averaged), (t_model, t_averaged) = runs
    assert_same_state(averaged, t_averaged)
    assert_same_state(model, t_model)
    assert averaged.n_averaged.item() == t_averaged.n_averaged.item() == STEPS
    assert averaged.n_averaged.dtype == tg.int64
    assert [name for name, _ in averaged.named_parameters()] == \
        [name for name, _ in t_averaged.named_parameters()]
    # the average is not the model: the test can tell them apart
    assert not np.array_equal(averaged.module[0].weight.detach().numpy(),
                              model[0].weight.detach().numpy())
    # buffers: the model's when not averaged; averaged, the batch count is an integer
    # average that truncates back to its first value
    count = averaged.module[1].num_batches_tracked.item()
    assert count == (1 if use_buffers else STEPS)
    # forward runs the averaged copy (a matrix product: equal to rounding, not bit for bit)
    x = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
    averaged.eval()
    t_averaged.eval()
    np.testing.assert_allclose(averaged(tg.tensor(x)).detach().numpy(),
                               t_averaged(torch.tensor(x)).detach().numpy(), rtol=1e-13,
                               atol=1e-16)
    np.testing.assert_array_equal(averaged(tg.tensor(x)).detach().numpy(),
                                  averaged.module(tg.tensor(x)).detach().numpy())


@pytest.mark.parametrize("kind", ["swa", "ema_multi", "ema_avg_fn"])
def test_the_whole_program_runs_in_both(kind):
    """The program as a user runs it, training included: the training's matrix products
    and batch-norm reductions round differently in the last bits, so the averages agree
    to a few units in the last place, not bit for bit."""
    make = AVERAGES[kind]
    (model, averaged), (t_model, t_averaged) = (
        train(lib, make_averaged=lambda swa, model: make(swa, model, True)) for lib in LIBS)
    mine, theirs = state(averaged), state(t_averaged)
    assert list(mine) == list(theirs)
    for key in mine:
        np.testing.assert_allclose(mine[key], theirs[key], rtol=1e-13, atol=1e-15, err_msg=key)


def test_first_update_copies_and_the_copy_is_deep():
    for lib in LIBS:
        lib.manual_seed(0)
        model = make_model(lib)
        averaged = lib.optim.swa_utils.AveragedModel(model)
        assert averaged.n_averaged.item() == 0
        with lib.no_grad():
            model[0].weight.add_(1.0)
        assert not np.array_equal(averaged.module[0].weight.detach().numpy(),
                                  model[0].weight.detach().numpy())
        averaged.update_parameters(model)
        np.testing.assert_array_equal(averaged.module[0].weight.detach().numpy(),
                                      model[0].weight.detach().numpy())
        assert averaged.module[0].weight is not model[0].weight
        assert averaged.module[0].weight.requires_grad
    assert repr(tg.optim.swa_utils.AveragedModel(tg.nn.Linear(1, 1))) == \
        repr(torch.optim.swa_utils.AveragedModel(torch.nn.Linear(1, 1)))


def test_state_dict_round_trip():
    _, averaged = train_and_average(tg, lambda swa, model: swa.AveragedModel(model), steps=3)
    fresh = tg.optim.swa_utils.AveragedModel(make_model(tg))
    fresh.load_state_dict(averaged.state_dict())
    assert fresh.n_averaged.item() == 3
    assert_same_state(fresh, averaged)


def test_multi_avg_fn_groups_by_dtype_as_pytorch():
    """A custom ``multi_avg_fn`` is called once per dtype, in PyTorch's order of groups."""
    calls = {}
    snapshots = pytorch_snapshots(3)
    for lib in LIBS:
        seen = calls[lib.__name__] = []

        def record(averaged, current, n_averaged, seen=seen):
            seen.append(([str(t.dtype).split(".")[-1] for t in averaged],
                         [tuple(t.shape) for t in current], n_averaged.item(),
                         str(n_averaged.dtype).split(".")[-1]))

        average_snapshots(lib, lambda swa, model: swa.AveragedModel(
            model, multi_avg_fn=record, use_buffers=True), snapshots)
    assert calls["tapegrad"] == calls["torch"]
    assert len(calls["torch"]) == 4     # two averaging calls, two dtypes each


LERP_WEIGHTS = [0.001, 1 / 3, 0.1, 0.25, 0.5, 0.75, 0.9, 0.999, 1 - 0.999, -0.3, 1.25]


@pytest.mark.parametrize("weight", LERP_WEIGHTS)
def test_in_place_average_rounds_as_pytorchs_lerp(weight):
    """The in-place EMA is ``lerp_(current, 1 - decay)``; PyTorch's CPU lerp rounds
    ``start + weight * (end - start)`` once (a fused multiply-add), and so does tapegrad's."""
    rng = np.random.default_rng(3)
    start, end = rng.standard_normal(1003), rng.standard_normal(1003) * 10.0
    decay = 1 - weight
    mine, theirs = [tg.tensor(start)], [torch.tensor(start)]
    if 0.0 <= decay <= 1.0:     # (other weights are not a decay: lerp alone below)
        tg.optim.swa_utils.get_ema_multi_avg_fn(decay)(mine, [tg.tensor(end)], 0)
        torch.optim.swa_utils.get_ema_multi_avg_fn(decay)(theirs, [torch.tensor(end)], 0)
        np.testing.assert_array_equal(mine[0].numpy(), theirs[0].numpy())
    expected = torch.tensor(start).lerp_(torch.tensor(end), weight).numpy()
    got = [tg.tensor(start)]
    tg.optim.swa_utils._lerp_into(got[0], tg.tensor(end), weight)
    np.testing.assert_array_equal(got[0].numpy(), expected)


def test_lerp_data_tells_fused_from_unfused_rounding():
    """The data above can fail the comparison: the two-roundings formula differs from
    PyTorch's lerp on it."""
    rng = np.random.default_rng(3)
    start, end = rng.standard_normal(1003), rng.standard_normal(1003) * 10.0
    w = 1 / 3
    unfused = start + w * (end - start)
    assert (unfused != torch.lerp(torch.tensor(start), torch.tensor(end), w).numpy()).any()


def test_in_place_equal_average_with_a_count():
    for n in [tg.tensor(2), 2]:
        mine = [tg.tensor([1.0, 4.0]), tg.tensor([[0.1, 0.2]])]
        theirs = [torch.tensor([1.0, 4.0]), torch.tensor([[0.1, 0.2]])]
        tg.optim.swa_utils.get_swa_multi_avg_fn()(
            mine, [tg.tensor([4.0, 1.0]), tg.tensor([[0.7, -0.3]])], n)
        torch.optim.swa_utils.get_swa_multi_avg_fn()(
            theirs, [torch.tensor([4.0, 1.0]), torch.tensor([[0.7, -0.3]])],
            torch.tensor(2) if isinstance(n, tg.Tensor) else n)
        for a, b in zip(mine, theirs):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_in_place_ema_of_integer_tensors_truncates():
    results = []
    for lib in LIBS:
        ema = [lib.tensor([1, 5, -7])]
        lib.optim.swa_utils.get_ema_multi_avg_fn(0.7)(ema, [lib.tensor([4, 2, 3])], 1)
        results.append((ema[0].tolist(), str(ema[0].dtype).split(".")[-1]))
    assert results[0] == results[1]


# --- update_bn ---------------------------------------------------------------------------

def batches(lib, as_pairs):
    lib.manual_seed(1)
    out = []
    for _ in range(4):
        x = lib.randn(6, 3, dtype=lib.float64) * 2.0 + 1.0
        out.append((x, lib.zeros(6)) if as_pairs == "tuple" else [x, 0] if as_pairs == "list"
                   else x)
    return out


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("as_pairs", ["tensor", "tuple", "list"])
def test_update_bn_matches_pytorch(as_pairs, training):
    """The averaged model's statistics recomputed: the batch norm's input comes from a
    matrix product and its batch mean from a reduction, neither summed in PyTorch's order,
    so the statistics agree to rounding (the exact case is the next test)."""
    results = []
    for lib in LIBS:
        model, averaged = train_and_average(lib, lambda swa, model: swa.AveragedModel(model))
        bn = averaged.module[1]
        bn.momentum = 0.3
        averaged.train(training)
        before = bn.running_mean.detach().numpy().copy()
        assert lib.optim.swa_utils.update_bn(batches(lib, as_pairs), averaged) is None
        assert averaged.training == training and averaged.module[1].training == training
        assert bn.momentum == 0.3
        assert bn.num_batches_tracked.item() == 4
        assert not np.array_equal(before, bn.running_mean.detach().numpy())
        results.append(state(averaged))
    assert list(results[0]) == list(results[1])
    for key in results[0]:
        np.testing.assert_allclose(results[0][key], results[1][key], rtol=1e-13, atol=1e-15,
                                   err_msg=key)


def test_update_bn_bit_for_bit_on_exact_batches():
    """Batches of small integers, four rows each, have exact batch means and variances, so
    the running statistics (cumulative averages with weights 1/2, 1/3, ...) are compared
    bit for bit."""
    rng = np.random.default_rng(5)
    data = [rng.integers(-8, 9, size=(4, 3)).astype(np.float64) for _ in range(5)]
    results = []
    for lib in LIBS:
        model = lib.nn.Sequential(lib.nn.BatchNorm1d(3), lib.nn.ReLU())
        model[0](lib.tensor(data[0]) * 3.0)       # statistics to be reset
        model.eval()
        lib.optim.swa_utils.update_bn([(lib.tensor(d), "target") for d in data], model)
        assert not model.training and model[0].momentum == 0.1
        results.append(state(model))
    for key in results[0]:
        np.testing.assert_array_equal(results[0][key], results[1][key], err_msg=key)
    assert results[0]["0.num_batches_tracked"] == 5
    np.testing.assert_allclose(results[0]["0.running_mean"],
                               np.concatenate(data).mean(axis=0), rtol=1e-15)


def test_update_bn_is_a_cumulative_average_and_leaves_models_without_batch_norms():
    """With momentum None the running mean is the mean over the whole pass."""
    model = tg.nn.Sequential(tg.nn.BatchNorm1d(3))
    data = batches(tg, "tensor")
    tg.optim.swa_utils.update_bn(data, model)
    means = np.stack([x.numpy().mean(axis=0) for x in data]).mean(axis=0)
    np.testing.assert_allclose(model[0].running_mean.numpy(), means, rtol=1e-14)
    linear = tg.nn.Linear(3, 1)
    calls = []
    linear.register_forward_hook(lambda *args: calls.append(1))
    assert tg.optim.swa_utils.update_bn(data, linear) is None
    assert calls == []      # no batch norm: the loader is not even read


def test_update_bn_leaves_instance_norms_alone():
    results = []
    for lib in LIBS:
        model = lib.nn.Sequential(lib.nn.InstanceNorm1d(3, track_running_stats=True),
                                  lib.nn.BatchNorm1d(3))
        with lib.no_grad():
            model[0].running_mean.fill_(5.0)
        lib.optim.swa_utils.update_bn([lib.ones(2, 3, 4, dtype=lib.float64)], model)
        results.append(state(model))
    for key in results[0]:
        np.testing.assert_array_equal(results[0][key], results[1][key], err_msg=key)
    assert results[0]["0.running_mean"][0] != 0.0


# --- SWALR -------------------------------------------------------------------------------

def swalr_rates(lib, steps=25, **kwargs):
    params = [lib.tensor([1.0, 2.0], requires_grad=True), lib.tensor([3.0], requires_grad=True)]
    opt = lib.optim.SGD([{"params": params[:1], "lr": 0.1},
                         {"params": params[1:], "lr": 0.03}], lr=0.1, momentum=0.9)
    sched = lib.optim.swa_utils.SWALR(opt, **kwargs)
    out = [(sched.get_last_lr(), [g["lr"] for g in opt.param_groups])]
    for _ in range(steps):
        for p in params:
            p.grad = lib.ones_like(p)
        opt.step()
        sched.step()
        out.append((sched.get_last_lr(), [g["lr"] for g in opt.param_groups]))
    return out, sched, opt


@pytest.mark.parametrize("anneal_epochs", [0, 1, 3, 10, 30])
@pytest.mark.parametrize("swa_lr", [0.05, [0.02, 0.4], (0.7, 1e-3)])
@pytest.mark.parametrize("anneal_strategy", ["cos", "linear"])
def test_swalr_rates_match_pytorch_exactly(anneal_strategy, swa_lr, anneal_epochs):
    kwargs = dict(swa_lr=swa_lr, anneal_epochs=anneal_epochs, anneal_strategy=anneal_strategy)
    (mine, sched, opt), (theirs, t_sched, t_opt) = (swalr_rates(lib, **kwargs) for lib in LIBS)
    assert mine == theirs       # floats compared for equality
    assert mine[0] != mine[-1] or anneal_epochs == 0
    assert [g["swa_lr"] for g in opt.param_groups] == [g["swa_lr"] for g in t_opt.param_groups]
    mine_state, their_state = sched.state_dict(), t_sched.state_dict()
    assert "anneal_func" not in mine_state and "optimizer" not in mine_state
    for key in ("anneal_epochs", "_anneal_strategy", "last_epoch", "_step_count", "base_lrs",
                "_last_lr"):
        assert mine_state[key] == their_state[key], key


def test_swalr_with_tensor_rates():
    """Tensor rates stay tensors (filled in place) and follow the same numbers."""
    runs = []
    for lib in LIBS:
        p = lib.zeros(1, requires_grad=True)
        opt = lib.optim.SGD([p], lr=lib.tensor(0.1))
        lr = opt.param_groups[0]["lr"]
        sched = lib.optim.swa_utils.SWALR(opt, swa_lr=lib.tensor(0.03), anneal_epochs=4)
        rates = []
        for _ in range(8):
            p.grad = lib.ones(1)
            opt.step()
            sched.step()
            assert opt.param_groups[0]["lr"] is lr
            rates.append(lr.item())
        runs.append(rates)
    assert runs[0] == runs[1]
    assert runs[0][-1] == 0.03 and runs[0][0] != 0.1


def test_swalr_state_dict_restores_the_anneal_function():
    _, sched, opt = swalr_rates(tg, steps=3, swa_lr=0.05, anneal_strategy="linear")
    other = tg.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_strategy="cos")
    other.load_state_dict(sched.state_dict())
    assert other.anneal_func(0.25) == 0.25 and other._anneal_strategy == "linear"


def test_swalr_get_lr_outside_step_warns():
    for lib in LIBS:
        _, sched, _ = swalr_rates(lib, steps=1, swa_lr=0.05)
        with pytest.warns(UserWarning, match="please use `get_last_lr"):
            sched.get_lr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        swalr_rates(tg, steps=2, swa_lr=0.05)


# --- errors ------------------------------------------------------------------------------

def sgd(lib):
    return lib.optim.SGD([lib.zeros(1, requires_grad=True)], lr=0.1)


ERRORS = {
    "strategy": lambda lib: lib.optim.swa_utils.SWALR(sgd(lib), 0.1, anneal_strategy="exp"),
    "epochs_negative": lambda lib: lib.optim.swa_utils.SWALR(sgd(lib), 0.1, anneal_epochs=-1),
    "epochs_float": lambda lib: lib.optim.swa_utils.SWALR(sgd(lib), 0.1, anneal_epochs=2.0),
    "swa_lr_length": lambda lib: lib.optim.swa_utils.SWALR(sgd(lib), [0.1, 0.2]),
    "both_fns": lambda lib: lib.optim.swa_utils.AveragedModel(
        lib.nn.Linear(1, 1), avg_fn=lib.optim.swa_utils.get_swa_avg_fn(),
        multi_avg_fn=lib.optim.swa_utils.get_swa_multi_avg_fn()),
    "ema_decay_low": lambda lib: lib.optim.swa_utils.get_ema_avg_fn(-0.1),
    "ema_decay_high": lambda lib: lib.optim.swa_utils.get_ema_avg_fn(1.5),
    "ema_multi_decay_low": lambda lib: lib.optim.swa_utils.get_ema_multi_avg_fn(-1e-9),
    "ema_multi_decay_high": lambda lib: lib.optim.swa_utils.get_ema_multi_avg_fn(2),
    "swa_multi_lengths": lambda lib: lib.optim.swa_utils.get_swa_multi_avg_fn()(
        [lib.ones(2), lib.ones(1)], [lib.ones(2)], 1),
    "ema_multi_lengths": lambda lib: lib.optim.swa_utils.get_ema_multi_avg_fn()(
        [lib.ones(2)], [lib.ones(2), lib.ones(1)], 1),
    "ema_multi_integer_lengths": lambda lib: lib.optim.swa_utils.get_ema_multi_avg_fn()(
        [lib.ones(2, dtype=lib.long)], [lib.ones(2, dtype=lib.long)] * 2, 1),
    "swalr_not_an_optimizer": lambda lib: lib.optim.swa_utils.SWALR(object(), 0.05),
    "swa_multi_integer_buffers": lambda lib: train_and_average(
        lib, lambda swa, model: swa.AveragedModel(
            model, multi_avg_fn=swa.get_swa_multi_avg_fn(), use_buffers=True), steps=2),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_as_pytorch(case):
    mine, theirs = outcome(tg, ERRORS[case]), outcome(torch, ERRORS[case])
    assert theirs[0] == "error"
    assert mine == theirs


def test_device_argument():
    for lib in LIBS:
        for device in ("cpu", lib.device("cpu")):
            averaged = lib.optim.swa_utils.AveragedModel(lib.nn.Linear(2, 1), device=device)
            assert str(averaged.n_averaged.device) == "cpu"
            assert str(averaged.module.weight.device) == "cpu"
            assert averaged.n_averaged.dtype == lib.int64


def test_decay_at_the_ends_is_taken():
    for decay in (0.0, 1.0):
        for lib in LIBS:
            lib.optim.swa_utils.get_ema_avg_fn(decay)
            lib.optim.swa_utils.get_ema_multi_avg_fn(decay)


def test_public_names():
    assert tg.optim.swa_utils.__all__ == torch.optim.swa_utils.__all__
    assert "swa_utils" in tg.optim.__all__
    import tapegrad.optim.swa_utils as module
    assert module is tg.optim.swa_utils
    assert math.isclose(tg.optim.swa_utils.SWALR._cosine_anneal(0.5), 0.5)
