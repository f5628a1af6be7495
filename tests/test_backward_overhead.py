"""The driver's shortcuts for small eager backward passes (issue #18): a tape equal, column
for column, to one planned before is swept with that plan and over copies of that tape's
columns (``hot_tapes.known_plan``).  Everything must stay as without them: PyTorch's
gradients step after step, its errors for values changed in place and for a second backward,
hooks, retained gradients, ``inputs=``, and graphs that differ only in a scalar or a seed.
"""
import numpy as np
import pytest
import torch

import tapegrad as tg
from tapegrad import hot_tapes


@pytest.fixture(autouse=True)
def _fresh_plans():
    hot_tapes.forget()
    yield
    hot_tapes.forget()


def _cubic(lib, xn, params, scale=1.0):
    x = lib.tensor(xn)
    y = lib.tensor(np.sin(xn))
    a, b, c, d = params
    return (a + b * x + c * x ** 2 + d * x ** 3 * scale - y).pow(2).sum()


def _params(lib, values=(0.1, 0.2, -0.1, 0.05)):
    return [lib.tensor(v, dtype=lib.float64, requires_grad=True) for v in values]


def _plans_kept():
    return sum(1 for entry in hot_tapes._plans.values() if entry[0] is not None)


@pytest.mark.parametrize("n", [1, 7, 100])
def test_sgd_steps_match_pytorch_with_the_plan_remembered(n):
    xn = np.linspace(-np.pi, np.pi, n)
    ours, theirs = _params(tg), _params(torch)
    for step in range(6):
        lo, lt = _cubic(tg, xn, ours), _cubic(torch, xn, theirs)
        assert type(lt.grad_fn).__name__ == lo.grad_fn.name() == "SumBackward0"
        lo.backward()
        lt.backward()
        np.testing.assert_allclose(lo.item(), lt.item(), rtol=1e-12)
        for p, q in zip(ours, theirs):
            # (sums of 100 terms: PyTorch adds them in another order)
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10)
            assert p.grad.shape == q.grad.shape == ()
        with tg.no_grad():
            for p in ours:
                p -= 1e-3 * p.grad
                p.grad = None
        with torch.no_grad():
            for q in theirs:
                q -= 1e-3 * q.grad
                q.grad = None
    # the same tape every step: its plan was remembered from the second one
    assert _plans_kept() == 1


def test_remembered_plan_gives_the_interpreters_bits():
    # a plan and columns from an earlier tape must sweep a later one exactly as its own do
    xn = np.linspace(-1.0, 2.0, 13)
    out = []
    for remember in (False, True):
        ps = _params(tg)
        grads = []
        for step in range(4):
            if not remember:
                hot_tapes.forget()
            _cubic(tg, xn, ps).backward()
            grads.append([p.grad.numpy().copy() for p in ps])
            with tg.no_grad():
                for p in ps:
                    p -= 1e-3 * p.grad
                    p.grad = None
        out.append(grads)
    for got, want in zip(out[1], out[0]):
        for g, w in zip(got, want):
            assert g.tobytes() == w.tobytes()


def test_graphs_that_differ_in_a_scalar_are_not_confused():
    # the scalar is in the tape's fp column: another key, another plan
    xn = np.linspace(-1.0, 1.0, 5)
    for scale in (1.0, 3.0, 1.0, 3.0, -2.0, -2.0):
        ours, theirs = _params(tg), _params(torch)
        _cubic(tg, xn, ours, scale).backward()
        _cubic(torch, xn, theirs, scale).backward()
        for p, q in zip(ours, theirs):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12)


def test_graphs_that_differ_in_which_inputs_need_grad():
    # the same ops with another leaf needing no gradient record differently (and plan
    # differently): each gets its own gradients, as in PyTorch
    xn = np.linspace(-1.0, 1.0, 4)
    for mask in [(1, 1, 1, 1), (1, 0, 1, 1), (1, 1, 1, 1), (0, 0, 0, 1), (1, 0, 1, 1)] * 2:
        ours = [tg.tensor(v, dtype=tg.float64, requires_grad=bool(m))
                for v, m in zip((0.1, 0.2, -0.1, 0.05), mask)]
        theirs = [torch.tensor(v, dtype=torch.float64, requires_grad=bool(m))
                  for v, m in zip((0.1, 0.2, -0.1, 0.05), mask)]
        _cubic(tg, xn, ours).backward()
        _cubic(torch, xn, theirs).backward()
        for p, q in zip(ours, theirs):
            assert (p.grad is None) == (q.grad is None)
            if q.grad is not None:
                np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12)


def _both(fn):
    """fn(lib) in tapegrad and in PyTorch: (result, error text or None) of each."""
    out = []
    for lib in (tg, torch):
        try:
            out.append((fn(lib), None))
        except RuntimeError as e:
            out.append((None, str(e).replace("torch.", "tapegrad.")))
    return out


def test_a_leaf_changed_in_place_is_still_refused_with_the_plan_remembered():
    xn = np.linspace(-1.0, 1.0, 6)

    def run(lib):
        ps = _params(lib)
        for step in range(3):
            _cubic(lib, xn, ps).backward()
        w = lib.tensor(np.ones(6), requires_grad=True)
        # ps[1]'s value is saved for w's gradient
        loss = _cubic(lib, xn, ps) + (w * ps[1]).sum()
        with lib.no_grad():
            ps[1].add_(1.0)
        loss.backward()

    (_, ours), (_, theirs) = _both(run)
    assert theirs is not None and ours is not None
    assert ours.split(" It was modified by")[0] == theirs.split(" Hint:")[0].rstrip()


def test_a_changed_leaf_in_a_remembered_graph_is_refused():
    # the very graph whose plan is remembered: x * x reads x, changed before the backward
    def run(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        for step in range(3):
            (x * x).sum().backward()
        loss = (x * x).sum()
        with lib.no_grad():
            x.mul_(2.0)
        loss.backward()
        return x.grad

    (_, ours), (_, theirs) = _both(run)
    assert theirs is not None and ours is not None
    assert ours.split(" It was modified by")[0] == theirs.split(" Hint:")[0].rstrip()


def test_a_changed_constant_in_a_remembered_graph_is_refused():
    def run(lib):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        c = lib.tensor([3.0, 4.0])
        for step in range(3):
            (w * c).sum().backward()
        loss = (w * c).sum()
        c.add_(1.0)
        loss.backward()

    (_, ours), (_, theirs) = _both(run)
    assert theirs is not None and ours is not None
    assert ours.split(" It was modified by")[0] == theirs.split(" Hint:")[0].rstrip()


def test_a_second_backward_is_refused_and_retain_graph_allows_it():
    def run(lib):
        w = lib.tensor([1.0, -2.0], requires_grad=True)
        for step in range(3):
            (w.exp() * w).sum().backward()
        loss = (w.exp() * w).sum()
        loss.backward(retain_graph=True)
        loss.backward(retain_graph=True)
        g = w.grad.numpy().copy() if lib is tg else w.grad.detach().numpy().copy()
        loss.backward()
        try:
            loss.backward()
        except RuntimeError as e:
            return g, str(e).replace("torch.", "tapegrad.")
        return g, None

    (ours, _), (theirs, _) = _both(run)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-13)
    assert ours[1] is not None and ours[1] == theirs[1]


def test_hooks_retained_grads_and_inputs_with_the_plan_remembered():
    def run(lib):
        seen = []
        out = []
        for step in range(4):
            w = lib.tensor([0.5, -1.5, 2.0], requires_grad=True)
            b = lib.tensor(0.25, requires_grad=True)
            h = w * b
            if step >= 2:
                h.retain_grad()
                h.register_hook(lambda g: seen.append(np.array(g.tolist())) or g * 2)
            loss = (h.tanh() * w).sum()
            if step == 3:
                loss.backward(inputs=[w])
                out.append((w.grad.tolist(), b.grad, h.grad.tolist()))
            else:
                loss.backward()
                out.append((w.grad.tolist(), b.grad.tolist(),
                            h.grad.tolist() if step >= 2 else None))
        return out, [s.tolist() for s in seen]

    (ours, _), (theirs, _) = _both(run)
    np.testing.assert_allclose(np.array(ours[1]), np.array(theirs[1]), rtol=1e-13)
    for (gw, gb, gh), (tw, tb, th) in zip(ours[0], theirs[0]):
        np.testing.assert_allclose(gw, tw, rtol=1e-13)
        assert (gb is None) == (tb is None)
        if tb is not None:
            np.testing.assert_allclose(gb, tb, rtol=1e-13)
        assert (gh is None) == (th is None)
        if th is not None:
            np.testing.assert_allclose(gh, th, rtol=1e-13)


def test_seeds_given_and_several_outputs_with_the_plan_remembered():
    def run(lib):
        out = []
        for step in range(4):
            w = lib.tensor([0.5, -1.5, 2.0], requires_grad=True)
            y = w.sin() * w
            z = (w * w).sum()
            lib.autograd.backward([y, z], [lib.tensor([1.0, 2.0, -1.0]), None])
            out.append(w.grad.tolist())
        w = lib.tensor([0.5, -1.5, 2.0], requires_grad=True)
        for step in range(3):
            out.append(list(lib.autograd.grad((w.cos() * w).sum(), w)[0].tolist()))
        try:
            (w * 2).backward()
        except RuntimeError as e:
            out.append(str(e))
        return out

    (ours, _), (theirs, _) = _both(run)
    assert ours[-1] == theirs[-1]
    np.testing.assert_allclose(np.array(ours[:-1]), np.array(theirs[:-1]), rtol=1e-13)
    assert hot_tapes.ENABLED


def test_the_seed_of_an_implicit_backward_is_not_shared():
    # the one implicit seed is a new array for each backward: a later backward from another
    # graph, seeded the same way, must start from 1 again
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    for step in range(4):
        (w * 3.0).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [12.0, 12.0])


def test_a_backward_through_compile_with_changing_inputs():
    # a compiled function's replays keep their own plans; the eager steps around them theirs
    def f(a, b, x):
        return ((a + b * x) ** 2).sum()

    cf = tg.compile(f)
    rng = np.random.default_rng(3)
    for step in range(6):
        xn = rng.standard_normal(5)
        av, bv = rng.standard_normal(2)
        ours = [tg.tensor(av, requires_grad=True), tg.tensor(bv, requires_grad=True)]
        theirs = [torch.tensor(av, requires_grad=True), torch.tensor(bv, requires_grad=True)]
        cf(*ours, tg.tensor(xn)).backward()
        f(*theirs, torch.tensor(xn)).backward()
        for p, q in zip(ours, theirs):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12)
        eager = tg.tensor(av, requires_grad=True)
        (eager * eager).sum().backward()
        np.testing.assert_allclose(eager.grad.numpy(), 2 * av, rtol=1e-15)


def test_gradients_against_central_differences():
    xn = np.linspace(-1.0, 1.0, 9)
    vals = np.array([0.3, -0.2, 0.1, 0.05])
    for step in range(3):
        ps = _params(tg, vals)
        _cubic(tg, xn, ps).backward()
        for i in range(4):
            up, down = vals.copy(), vals.copy()
            up[i] += 1e-6
            down[i] -= 1e-6
            with tg.no_grad():
                num = (_cubic(tg, xn, [tg.tensor(v) for v in up]).item()
                       - _cubic(tg, xn, [tg.tensor(v) for v in down]).item()) / 2e-6
            np.testing.assert_allclose(ps[i].grad.item(), num, rtol=1e-6)


def test_plans_are_bounded():
    for k in range(hot_tapes._KEPT + 20):
        w = tg.tensor(np.ones(k + 1), requires_grad=True)
        for step in range(2):
            (w * w).sum().backward()
    assert len(hot_tapes._plans) <= hot_tapes._KEPT
