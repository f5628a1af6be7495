"""Smaller pieces of PyTorch's surface against torch itself: ``func.stack_module_state``
(model ensembling with ``vmap`` and ``functional_call``): values, gradients, error types and
texts."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.func as TGF

torch = pytest.importorskip("torch")
import torch.func as TF  # noqa: E402

RTOL = 1e-12
FUNC = {tg: TGF, torch: TF}


def _mlps(lib, n=3):
    """``n`` small MLPs with the same (seeded) weights in either library."""
    rng = np.random.default_rng(7)
    models = []
    for _ in range(n):
        m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))
        with lib.no_grad():
            for p in m.parameters():
                p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)),
                                   dtype=lib.float64))
        models.append(m)
    return models


def _ensemble(lib):
    models = _mlps(lib)
    params, buffers = FUNC[lib].stack_module_state(models)
    base = models[0]
    x = lib.tensor(np.linspace(-1.0, 1.0, 10).reshape(5, 2).repeat(2, axis=1)[:, :3],
                   dtype=lib.float64)

    def one(p, b, x):
        return FUNC[lib].functional_call(base, (p, b), (x,))

    out = FUNC[lib].vmap(one, in_dims=(0, 0, None))(params, buffers, x)
    (out ** 2).sum().backward()
    return params, buffers, out, models


def test_stack_module_state_ensemble_matches_torch():
    p1, b1, out1, models1 = _ensemble(tg)
    p2, b2, out2, _ = _ensemble(torch)
    assert list(p1) == list(p2) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert b1 == b2 == {}
    np.testing.assert_allclose(out1.detach().numpy(), out2.detach().numpy(), rtol=RTOL)
    for name in p2:
        assert p1[name].is_leaf and p1[name].requires_grad
        assert tuple(p1[name].shape) == tuple(p2[name].shape)
        np.testing.assert_allclose(p1[name].grad.numpy(), p2[name].grad.numpy(), rtol=RTOL)
    # the stacked leaves are new: the models' own parameters got no gradient
    assert all(p.grad is None for m in models1 for p in m.parameters())


def test_stack_module_state_buffers_are_stacked_without_grad():
    for lib in (tg, torch):
        models = [lib.nn.BatchNorm1d(3) for _ in range(2)]
        models[1].running_mean.fill_(2.0)
        params, buffers = FUNC[lib].stack_module_state(models)
        assert sorted(buffers) == ["num_batches_tracked", "running_mean", "running_var"]
        assert not buffers["running_mean"].requires_grad
        assert buffers["running_mean"].tolist() == [[0.0] * 3, [2.0] * 3]
        assert params["weight"].requires_grad and params["weight"].is_leaf


def _error(lib, make):
    with pytest.raises(Exception) as info:
        FUNC[lib].stack_module_state(make(lib))
    return type(info.value), str(info.value)


@pytest.mark.parametrize("make", [
    lambda lib: [],
    lambda lib: [lib.nn.Linear(2, 2), lib.nn.Linear(2, 2).eval()],
    lambda lib: [lib.nn.Linear(2, 2), lib.nn.Bilinear(2, 2, 2)],
    lambda lib: [lib.nn.Linear(2, 2, bias=True), lib.nn.Linear(2, 2, bias=False)],
    lambda lib: [lib.nn.Linear(2, 2), lib.nn.Linear(2, 2).requires_grad_(False)],
], ids=["empty", "mode", "class", "structure", "requires_grad"])
def test_stack_module_state_errors_match_torch(make):
    assert _error(tg, make) == _error(torch, make)
