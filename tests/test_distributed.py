"""``tapegrad.distributed.map_value_and_grad`` on a local Dask cluster of two worker processes.

Results equal ``per_sample_value_and_grad`` (one process, one compiled call) bit for bit, and
the eager loop over samples bit for bit where the ops are correctly rounded (the
Lotka-Volterra model of workload W5); also when part of the batch takes another branch, when
a worker is killed while it replays, for Dask arrays in and out, for an empty batch and a
batch of one.  The cluster runs on localhost, started and stopped here.
"""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import grad

distributed = pytest.importorskip(
    "distributed", reason="Dask's distributed scheduler is not installed "
                          "(pip install 'tapegrad[distributed]')")
da = pytest.importorskip("dask.array", reason="dask.array is not installed")
from tapegrad import distributed as TD  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                       host="127.0.0.1", dashboard_address=None)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


STEPS = 100


def lotka_volterra(a, b, c, d):
    """W5's model: explicit Euler on Lotka-Volterra, loss at the final state."""
    u, v = tg.tensor(1.0), tg.tensor(1.0)
    for _ in range(STEPS):
        uv = u * v
        du = a * u - b * uv
        dv = d * uv - c * v
        u = u + 0.01 * du
        v = v + 0.01 * dv
    return (u - 1.5) ** 2 + (v - 0.5) ** 2


def parameter_sets(n, seed=0):
    rng = np.random.default_rng(seed)
    base = np.array([1.5, 1.0, 3.0, 1.0])
    return tuple(base[k] * rng.uniform(0.8, 1.2, n) for k in range(4))


def branchy(x, w):
    """Which branch runs depends on the sample (a guard on replay)."""
    y = tg.tanh(x * w + 0.5) * x
    if y.sum() > 0:
        return (y * y).sum() + tg.sin(x).sum()
    return (y - 1.0).sum() * tg.exp(w).sum()


def scaled_by_first(x):
    """A guard on x[0]'s exact value: every sample a branch of its own."""
    return (x * x).sum() * float(x[0].item())


def local(fn, batch, argnums=0):
    v, g = tg.per_sample_value_and_grad(fn, argnums=argnums)(*[tg.tensor(a) for a in batch])
    gs = [g] if isinstance(argnums, int) else list(g)
    return v.numpy(), [x.numpy() for x in gs]


def eager_loop(fn, batch, argnums):
    values, grads = [], [[] for _ in argnums]
    for row in zip(*batch):
        leaves = [tg.tensor(r, requires_grad=i in argnums) for i, r in enumerate(row)]
        out = fn(*leaves)
        values.append(out._value.copy())
        for j, g in enumerate(grad(out, [leaves[i] for i in argnums])):
            grads[j].append(g._value.copy())
    return np.array(values), [np.array(g) for g in grads]


def assert_same(got, want):
    v, g = got
    gs = list(g) if isinstance(g, tuple) else [g]
    np.testing.assert_array_equal(np.asarray(v), want[0])
    assert len(gs) == len(want[1])
    for a, b in zip(gs, want[1]):
        np.testing.assert_array_equal(np.asarray(a), b)


def test_equals_vmap_and_the_eager_loop_bit_for_bit(client):
    batch = parameter_sets(37)
    nums = (0, 1, 2, 3)
    got = TD.map_value_and_grad(lotka_volterra, batch, argnums=nums, client=client, chunk=8)
    assert isinstance(got[0], np.ndarray) and got[0].shape == (37,)
    assert_same(got, local(lotka_volterra, batch, nums))
    assert_same(got, eager_loop(lotka_volterra, batch, nums))
    # some arguments only, and the default chunks
    assert_same(TD.map_value_and_grad(lotka_volterra, batch, argnums=(1, 3), client=client),
                local(lotka_volterra, batch, (1, 3)))


def test_guard_failures_in_part_of_the_batch(client):
    rng = np.random.default_rng(1)
    batch = (rng.normal(size=(61, 5)), rng.normal(size=(61, 5)))
    branches = (np.tanh(batch[0] * batch[1] + 0.5) * batch[0]).sum(1) > 0
    assert branches.any() and not branches.all()
    fn = tg.compile(branchy)
    got = TD.map_value_and_grad(fn, batch, argnums=(0, 1), client=client, chunk=10)
    assert_same(got, local(branchy, batch, (0, 1)))
    # one tape per branch, recorded on the driver; every sample replayed, none eagerly
    assert fn.stats.records == 2
    assert fn.stats.replays >= 61
    # every sample a branch of its own: eight tapes, then the rest eagerly, as vmap does
    xs = (rng.normal(size=(30, 3)),)
    assert_same(TD.map_value_and_grad(scaled_by_first, xs, client=client, chunk=4),
                local(scaled_by_first, xs))


def test_dask_arrays_in_and_out(client):
    a, b, c, d = parameter_sets(50, seed=2)
    lazy = (da.from_array(a, chunks=12), b, da.from_array(c, chunks=25), d)
    values, grads = TD.map_value_and_grad(lotka_volterra, lazy, argnums=(0, 2), client=client)
    assert isinstance(values, da.Array) and all(isinstance(g, da.Array) for g in grads)
    assert values.chunks == ((12, 12, 12, 12, 2),)   # the first argument's chunks
    assert_same((values.compute(), tuple(g.compute() for g in grads)),
                local(lotka_volterra, (a, b, c, d), (0, 2)))
    # chunk= rechunks; a guard failure inside a Dask chunk
    rng = np.random.default_rng(3)
    xs, ws = rng.normal(size=(40, 5)), rng.normal(size=(40, 5))
    v, g = TD.map_value_and_grad(branchy, (da.from_array(xs, chunks=(7, 5)), ws),
                                 client=client, chunk=15)
    assert v.chunks == ((15, 15, 10),) and g.chunks == ((15, 15, 10), (5,))
    assert_same((v.compute(), g.compute()), local(branchy, (xs, ws)))


def test_empty_batch_and_batch_of_one(client):
    batch = parameter_sets(1, seed=4)
    assert_same(TD.map_value_and_grad(lotka_volterra, batch, argnums=(0, 1, 2, 3),
                                      client=client),
                local(lotka_volterra, batch, (0, 1, 2, 3)))
    v, g = TD.map_value_and_grad(branchy, (np.zeros((0, 5)), np.zeros((0, 5))), client=client)
    assert v.shape == (0,) and g.shape == (0, 5)
    v, g = TD.map_value_and_grad(branchy, (da.zeros((0, 5)), np.zeros((0, 5))), client=client)
    assert isinstance(v, da.Array) and v.compute().shape == (0,)
    assert g.compute().shape == (0, 5)


def test_bad_inputs_give_the_errors_vmap_gives(client):
    x, w = np.ones((4, 5)), np.ones((3, 5))
    for bad, kind in [((x, w), ValueError), ((x.astype(np.int64), x), TypeError)]:
        with pytest.raises(kind) as here:
            tg.per_sample_value_and_grad(branchy)(*[tg.tensor(a) for a in bad])
        with pytest.raises(kind) as there:
            TD.map_value_and_grad(branchy, bad, client=client)
        assert str(there.value) == str(here.value)
    with pytest.raises(RuntimeError, match="one-element output"):
        TD.map_value_and_grad(lambda x: x * 2, np.ones((4, 3)), client=client)
    with pytest.raises(ValueError, match="compile can replay.*random"):
        TD.map_value_and_grad(lambda x: (x * tg.rand(3)).sum(), np.ones((4, 3)),
                              client=client)
    with pytest.raises(ValueError, match="chunk"):
        TD.map_value_and_grad(branchy, (x, x), client=client, chunk=0)


def test_a_tape_that_fails_to_load_on_a_worker_says_so(client):
    fn = tg.compile(branchy)
    fn(tg.ones(5), tg.ones(5))
    raw = fn.tape.to_bytes()
    task = client.submit(TD._replay_chunk, raw[:len(raw) // 2], (0,), None, np.ones((2, 5)),
                         np.ones((2, 5)), pure=False)
    with pytest.raises(RuntimeError, match=r"tape shipped to worker tcp://127\.0\.0\.1:\d+ "
                                           r"failed to load: not a valid tapegrad tape"):
        task.result()


def test_workers_warm_once_and_load_each_tape_once(client):
    batch = parameter_sets(40, seed=5)
    fn = tg.compile(lotka_volterra)
    before = client.run(lambda: dict(TD.worker_counts))
    for _ in range(2):
        TD.map_value_and_grad(fn, batch, client=client, chunk=3)   # 14 tasks
    after = client.run(lambda: dict(TD.worker_counts))
    assert set(after) == set(before)
    for address, counts in after.items():
        assert counts["warmed"] == 1
        # one tape for both maps: loaded at most once in each worker
        assert counts["tapes_loaded"] - before[address]["tapes_loaded"] <= 1


def test_the_default_client_is_used(client):
    assert distributed.default_client() is client
    batch = parameter_sets(9, seed=6)
    assert_same(TD.map_value_and_grad(lotka_volterra, batch, argnums=(0, 1, 2, 3)),
                local(lotka_volterra, batch, (0, 1, 2, 3)))
    assert TD._LOCAL == []


_WITHOUT_CLIENT = textwrap.dedent("""
    import numpy as np
    import tapegrad as tg
    from tapegrad.distributed import map_value_and_grad
    if __name__ == "__main__":
        x = np.random.default_rng(0).normal(size=(20, 3))
        v, g = map_value_and_grad(lambda x: (tg.tanh(x) * x).sum(), x)
        w, h = tg.per_sample_value_and_grad(lambda x: (tg.tanh(x) * x).sum())(tg.tensor(x))
        import tapegrad.distributed as TD
        print(np.array_equal(v, w.numpy()) and np.array_equal(g, h.numpy()),
              len(TD._LOCAL[1].scheduler_info()["workers"]))
""")


def test_without_a_client_a_local_cluster_is_started(tmp_path):
    script = tmp_path / "no_client.py"
    script.write_text(_WITHOUT_CLIENT)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    equal, workers = done.stdout.split()
    assert equal == "True" and int(workers) == (os.cpu_count() or 1)


def test_dask_results_survive_a_worker_lost_after_the_map(client):
    # the result chunks stay on the workers; one whose worker dies is computed again, which
    # needs the tape and the inputs it came from long after the map returned
    a, b, c, d = parameter_sets(40, seed=8)
    lazy = tuple(da.from_array(x, chunks=10) for x in (a, b, c, d))
    values, grads = TD.map_value_and_grad(lotka_volterra, lazy, argnums=(0, 1, 2, 3),
                                          client=client)
    time.sleep(1.0)   # the scheduler forgets whatever no client holds any more
    holdings = client.has_what()
    victim = max(holdings, key=lambda w: len(holdings[w]))
    os.kill(client.run(os.getpid, workers=[victim])[victim], signal.SIGKILL)
    client.wait_for_workers(2)
    assert_same((values.compute(), tuple(g.compute() for g in grads)),
                local(lotka_volterra, (a, b, c, d), (0, 1, 2, 3)))


class KillWhileReplaying(distributed.WorkerPlugin):
    """Kills its worker process (SIGKILL) the first time any worker starts a replay task; a
    file marks that it happened, so the worker that replaces it is left alone."""

    def __init__(self, marker):
        self.marker = marker

    def transition(self, key, start, finish, **kwargs):
        if finish == "executing" and "tapegrad-replay" in str(key):
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_killed_during_the_map_loses_no_result(client, tmp_path):
    marker = tmp_path / "killed"
    pids = set(client.run(os.getpid).values())
    batch = parameter_sets(45, seed=7)
    client.register_plugin(KillWhileReplaying(str(marker)), name="kill-while-replaying")
    try:
        got = TD.map_value_and_grad(lotka_volterra, batch, argnums=(0, 1, 2, 3),
                                    client=client, chunk=5)
    finally:
        client.unregister_worker_plugin("kill-while-replaying")
    assert marker.exists()   # a worker was killed while replaying
    client.wait_for_workers(2)
    assert set(client.run(os.getpid).values()) != pids
    assert_same(got, local(lotka_volterra, batch, (0, 1, 2, 3)))
