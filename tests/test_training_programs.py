"""Whole programs written as PyTorch's tutorials write them, run unchanged with both
libraries (``lib`` stands for ``torch`` or ``tapegrad``): a DataLoader training loop with an
optimizer and a scheduler, an L-BFGS fit with a closure, and per-sample gradients with
``func``.  The data loaders do not shuffle: shuffled orders are the one thing that cannot
match (see test_data.py)."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

_rng = np.random.default_rng(21)
FEATURES = _rng.standard_normal((96, 4))
TARGETS = np.sin(FEATURES @ _rng.standard_normal((4, 1))) + 0.1 * _rng.standard_normal((96, 1))
INITIAL = [_rng.standard_normal(s) * 0.5 for s in [(16, 4), (16,), (1, 16), (1,)]]


def make_model(lib):
    model = lib.nn.Sequential(lib.nn.Linear(4, 16), lib.nn.Tanh(), lib.nn.Linear(16, 1))
    with lib.no_grad():
        for p, value in zip(model.parameters(), INITIAL):
            p.copy_(lib.tensor(value))
    return model


@pytest.mark.parametrize("make_optimizer, make_scheduler", [
    (lambda lib, ps: lib.optim.Adam(ps, lr=0.01),
     lambda lib, opt, steps: lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05,
                                                               total_steps=steps)),
    (lambda lib, ps: lib.optim.RMSprop(ps, lr=0.005, momentum=0.5),
     lambda lib, opt, steps: lib.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)),
    (lambda lib, ps: lib.optim.NAdam(ps, lr=0.01),
     lambda lib, opt, steps: lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)),
], ids=["Adam-OneCycleLR", "RMSprop-StepLR", "NAdam-CosineAnnealingLR"])
def test_dataloader_training_loop_matches_torch(make_optimizer, make_scheduler):
    results = []
    for lib in (tg, torch):
        dataset = lib.utils.data.TensorDataset(lib.tensor(FEATURES), lib.tensor(TARGETS))
        loader = lib.utils.data.DataLoader(dataset, batch_size=16)
        model = make_model(lib)
        loss_fn = lib.nn.MSELoss()
        optimizer = make_optimizer(lib, model.parameters())
        scheduler = make_scheduler(lib, optimizer, 4 * len(loader))
        losses, rates = [], []
        for epoch in range(4):
            for xb, yb in loader:
                optimizer.zero_grad()
                loss = loss_fn(model(xb), yb)
                loss.backward()
                optimizer.step()
                scheduler.step()
                losses.append(loss.item())
                rates.append(scheduler.get_last_lr()[0])
        results.append((losses, rates, [p.detach().numpy() for p in model.parameters()]))
    (losses, rates, params), (tlosses, trates, tparams) = results
    assert rates == trates
    np.testing.assert_allclose(losses, tlosses, rtol=1e-10)
    assert losses[-1] < losses[0]
    for p, tp in zip(params, tparams):
        np.testing.assert_allclose(p, tp, rtol=1e-10, atol=1e-12)


def test_lbfgs_fit_with_closure_matches_torch():
    results = []
    for lib in (tg, torch):
        model = make_model(lib)
        x, y = lib.tensor(FEATURES), lib.tensor(TARGETS)
        optimizer = lib.optim.LBFGS(model.parameters(), lr=1, max_iter=10,
                                    line_search_fn="strong_wolfe")

        def closure():
            optimizer.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            return loss

        losses = [optimizer.step(closure).item() for _ in range(3)]
        results.append((losses, [p.detach().numpy() for p in model.parameters()]))
    (losses, params), (tlosses, tparams) = results
    # (the two libraries' matrix products and dot products round differently: about 1e-13
    # after three steps of ten iterations)
    np.testing.assert_allclose(losses, tlosses, rtol=1e-11)
    assert losses[-1] < losses[0]
    for p, tp in zip(params, tparams):
        np.testing.assert_allclose(p, tp, rtol=1e-10, atol=1e-12)


def test_per_sample_gradients_with_functional_call_match_torch():
    results = []
    for lib in (tg, torch):
        model = make_model(lib)
        params = {k: v.detach() for k, v in model.named_parameters()}

        def loss(params, x, y, model=model, lib=lib):
            pred = lib.func.functional_call(model, params, (x.unsqueeze(0),))
            return ((pred - y.unsqueeze(0)) ** 2).mean()

        grads = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))(
            params, lib.tensor(FEATURES[:12]), lib.tensor(TARGETS[:12]))
        results.append({k: v.numpy() for k, v in grads.items()})
    assert results[0].keys() == results[1].keys()
    for k in results[0]:
        np.testing.assert_allclose(results[0][k], results[1][k], rtol=1e-12, atol=1e-14)
