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


def _residual_network(lib):
    """A custom Module as PyTorch's tutorials write one: a ModuleList of blocks, a norm, a
    skip connection, a buffer and a forward with a Python loop."""

    class Block(lib.nn.Module):
        def __init__(self, width):
            super().__init__()
            self.norm = lib.nn.LayerNorm(width)
            self.linear = lib.nn.Linear(width, width)

        def forward(self, x):
            return x + lib.nn.functional.gelu(self.linear(self.norm(x)))

    class ResidualNet(lib.nn.Module):
        def __init__(self, width=8, depth=3):
            super().__init__()
            self.embed = lib.nn.Linear(4, width)
            self.blocks = lib.nn.ModuleList([Block(width) for _ in range(depth)])
            self.head = lib.nn.Linear(width, 1)
            self.register_buffer("scale", lib.tensor(0.5))

        def forward(self, x):
            h = lib.tanh(self.embed(x))
            for block in self.blocks:
                h = block(h)
            return self.scale * self.head(h)

    return ResidualNet()


def test_custom_module_with_module_list_trains_as_in_torch():
    rng = np.random.default_rng(5)
    results = []
    for lib in (tg, torch):
        model = _residual_network(lib)
        with lib.no_grad():   # the same initial weights in both libraries
            for p in model.parameters():
                p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)) * 0.3))
        rng = np.random.default_rng(5)
        optimizer = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3)
        scheduler = lib.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[10, 20], gamma=0.3)
        x, y = lib.tensor(FEATURES), lib.tensor(TARGETS)
        losses = []
        for step in range(30):
            optimizer.zero_grad()
            loss = lib.nn.functional.smooth_l1_loss(model(x), y)
            loss.backward()
            lib.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        names = [n for n, _ in model.named_parameters()]
        state = {k: v.numpy() for k, v in model.state_dict().items()}
        results.append((losses, names, state))
    (losses, names, state), (tlosses, tnames, tstate) = results
    assert names == tnames and state.keys() == tstate.keys()
    np.testing.assert_allclose(losses, tlosses, rtol=1e-10)
    assert losses[-1] < losses[0]
    for k in state:
        np.testing.assert_allclose(state[k], tstate[k], rtol=1e-9, atol=1e-12)


def _truss_compliance(lib, stiffness, loads):
    """A chain of springs fixed at one end: assemble the stiffness matrix from the spring
    constants, solve K u = f for the displacements and return the compliance f.u, plus the
    log-determinant of K (from a Cholesky factor) as a regulariser."""
    n = stiffness.shape[0]
    k_left = stiffness
    k_right = lib.cat([stiffness[1:], lib.zeros(1, dtype=stiffness.dtype)])
    K = lib.diag(k_left + k_right) - lib.diag(stiffness[1:], 1) - lib.diag(stiffness[1:], -1)
    u = lib.linalg.solve(K, loads)
    L = lib.linalg.cholesky(K)
    logdet = 2 * lib.log(lib.diagonal(L)).sum()
    assert K.shape == (n, n)
    return loads @ u, logdet, u


def test_physics_design_with_linalg_matches_torch():
    """Optimal design as engineers write it in PyTorch: choose spring constants (positive
    through softplus) that minimise the compliance of a loaded chain under a budget penalty,
    with Adam, and check the optimality conditions by autograd.functional.hessian."""
    rng = np.random.default_rng(8)
    loads0 = rng.uniform(0.5, 1.5, 6)
    theta0 = rng.standard_normal(6) * 0.1
    results = []
    for lib in (tg, torch):
        theta = lib.tensor(theta0, requires_grad=True)
        loads = lib.tensor(loads0)
        optimizer = lib.optim.Adam([theta], lr=0.05)
        history = []
        for _ in range(40):
            optimizer.zero_grad()
            k = lib.nn.functional.softplus(theta) + 0.1
            compliance, logdet, _ = _truss_compliance(lib, k, loads)
            loss = compliance + 0.2 * (k.sum() - 6.0) ** 2 - 1e-3 * logdet
            loss.backward()
            optimizer.step()
            history.append(loss.item())

        def objective(t, lib=lib, loads=loads):
            k = lib.nn.functional.softplus(t) + 0.1
            compliance, logdet, _ = _truss_compliance(lib, k, loads)
            return compliance + 0.2 * (k.sum() - 6.0) ** 2 - 1e-3 * logdet

        H = lib.autograd.functional.hessian(objective, theta.detach())
        eigenvalues = lib.linalg.eigvalsh(H)
        with lib.no_grad():
            _, _, u = _truss_compliance(lib, lib.nn.functional.softplus(theta) + 0.1, loads)
        results.append((history, theta.detach().numpy(), H.numpy(), eigenvalues.numpy(),
                        u.numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)
    history = results[0][0]
    assert history[-1] < history[0]
