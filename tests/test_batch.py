"""``vmap`` and ``per_sample_value_and_grad``: one tape replayed over a batch.

The parallel replay (samples on numba's threads) returns what the sequential one returns,
bit for bit, and both return what eager mode computes sample by sample, also for samples
whose guards fail (Python control flow that takes the other branch).
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import grad

W = np.linspace(-1.0, 1.0, 5)


def branchy(x, w):
    """Scalar; which branch runs depends on the sample's values (a GUARD on replay)."""
    y = tg.tanh(x * w + 0.5) * x
    if y.sum() > 0:
        return (y * y).sum() + tg.sin(x).sum()
    return (y - 1.0).sum() * tg.exp(w).sum()


def eager_per_sample(fn, xs, ws, rg):
    values, grads = [], [[], []]
    for x, w in zip(xs, ws):
        leaves = [tg.tensor(x, requires_grad=rg[0]), tg.tensor(w, requires_grad=rg[1])]
        out = fn(*leaves)
        values.append(out.detach().numpy().copy())
        picked = [t for t, f in zip(leaves, rg) if f]
        gs = grad(out, picked) if picked else []
        it = iter(gs)
        for j, f in enumerate(rg):
            if f:
                grads[j].append(next(it).numpy().copy())
    return np.array(values), [np.array(g) if g else None for g in grads]


def batch(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 5)), rng.normal(size=(n, 5))


def taken_branches(xs, ws):
    return {bool((np.tanh(x * w + 0.5) * x).sum() > 0) for x, w in zip(xs, ws)}


@pytest.mark.parametrize("n", [1, 7, 257])
def test_per_sample_parallel_equals_sequential_equals_eager(n):
    xs, ws = batch(n)
    if n > 1:
        assert taken_branches(xs, ws) == {True, False}   # some samples fail the guard
    results = {}
    for parallel in (False, True, None):
        run = tg.per_sample_value_and_grad(branchy, argnums=(0, 1), parallel=parallel)
        v, (gx, gw) = run(tg.tensor(xs), tg.tensor(ws))
        results[parallel] = (v.numpy(), gx.numpy(), gw.numpy())
    for parallel in (True, None):
        for got, want in zip(results[parallel], results[False]):
            np.testing.assert_array_equal(got, want)
    ev, (egx, egw) = eager_per_sample(branchy, xs, ws, (True, True))
    v, gx, gw = results[False]
    np.testing.assert_allclose(v, ev, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gx, egx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gw, egw, rtol=1e-12, atol=1e-12)


def test_vmap_parallel_equals_sequential_equals_eager():
    xs, ws = batch(300, seed=1)
    got = {p: tg.vmap(branchy, parallel=p)(tg.tensor(xs), tg.tensor(ws)).numpy()
           for p in (False, True)}
    np.testing.assert_array_equal(got[True], got[False])
    ev, _ = eager_per_sample(branchy, xs, ws, (False, False))
    np.testing.assert_allclose(got[False], ev, rtol=1e-12, atol=1e-12)


def test_samples_on_the_other_branch_replay_a_second_tape():
    # the samples whose guard fails on the first tape are replayed over a tape recorded for
    # the first of them: two recordings, every sample replayed, none run eagerly
    xs, ws = batch(101, seed=2)
    for parallel in (False, True):
        fn = tg.compile(branchy)
        tg.per_sample_value_and_grad(fn, parallel=parallel)(tg.tensor(xs), tg.tensor(ws))
        assert fn.stats.records == 2
        assert fn.stats.replays == len(xs)


def scaled_by_first(x):
    """A guard on x[0]'s exact value: every sample takes a branch of its own."""
    return (x * x).sum() * float(x[0].item())


def test_more_branches_than_tapes_run_eagerly():
    xs = np.random.default_rng(4).normal(size=(40, 3))
    want_v = np.array([(x * x).sum() * x[0] for x in xs])
    want_g = np.array([2 * x * x[0] for x in xs])
    for parallel in (False, True):
        fn = tg.compile(scaled_by_first)
        v, g = tg.per_sample_value_and_grad(fn, parallel=parallel)(tg.tensor(xs))
        np.testing.assert_allclose(v.numpy(), want_v, rtol=1e-12)
        np.testing.assert_allclose(g.numpy(), want_g, rtol=1e-12)
        assert fn.stats.records == 8   # as many tapes as a batch records, then eager


@pytest.mark.parametrize("argnums", [0, (0,), (0, 1), None])
def test_a_function_that_cannot_replay_returns_what_a_replayed_one_does(argnums):
    # max(0).values of a sample is an argmax-style result: the calls run eagerly, one per
    # sample; the gradients were a tuple where a replayed function gives one tensor
    xs, ws = batch(6, seed=5)
    f = lambda x, w: x.max(0).values * w.sum()      # noqa: E731
    v, g = tg.per_sample_value_and_grad(f, argnums=argnums)(tg.tensor(xs), tg.tensor(ws))
    h = lambda x, w: (x * w).sum()      # noqa: E731 - replays
    v2, g2 = tg.per_sample_value_and_grad(h, argnums=argnums)(tg.tensor(xs), tg.tensor(ws))
    assert type(g) is type(g2)
    if isinstance(g, tuple):
        assert len(g) == len(g2)
    for b in range(len(xs)):
        x, w = tg.tensor(xs[b], requires_grad=True), tg.tensor(ws[b], requires_grad=True)
        f(x, w).backward()
        got = g if not isinstance(g, tuple) else g[0]
        np.testing.assert_array_equal(got.numpy()[b], x.grad.numpy())


def test_gradient_only_for_chosen_argument():
    xs, ws = batch(64, seed=3)
    for parallel in (False, True):
        v, gx = tg.per_sample_value_and_grad(branchy, argnums=0, parallel=parallel)(
            tg.tensor(xs), tg.tensor(ws))
        ev, (egx, _) = eager_per_sample(branchy, xs, ws, (True, False))
        np.testing.assert_allclose(v.numpy(), ev, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gx.numpy(), egx, rtol=1e-12, atol=1e-12)


_CHILD = textwrap.dedent("""
    import numpy as np
    import tapegrad as tg
    from tapegrad import ops
    x = np.random.default_rng(5).normal(size=(40, 3))
    f = lambda x: (tg.tanh(x) * x).sum()
    v, g = tg.per_sample_value_and_grad(f, parallel=True)(tg.tensor(x))
    ok = np.allclose(v.numpy(), (np.tanh(x) * x).sum(1), rtol=1e-12)
    ok &= np.allclose(g.numpy(), np.tanh(x) + x * (1 - np.tanh(x) ** 2), rtol=1e-12)
    print(ok, sum(ops.batch_replay_parallel.kernel.stats.cache_hits.values()))
""")


def test_parallel_kernel_is_cached_across_processes():
    # parallel=True together with cache=True: the second process loads the kernel the first
    # one compiled (or found), and it computes the same results
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    outs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                              env=env, timeout=600)
        assert done.returncode == 0, done.stderr
        outs.append(done.stdout.split())
    assert outs[0][0] == "True" and outs[1][0] == "True"
    assert int(outs[1][1]) >= 1   # loaded from the on-disk cache, not compiled again
