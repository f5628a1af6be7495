"""The compile helper (``_compile_helper``): on a fresh machine a second process compiles part
of the first backward's kernels.  Each test runs a fresh interpreter on an empty numba cache
(the helper only starts there), the helper asked for with ``TAPEGRAD_COMPILE_HELPER=1`` (on
its own it starts only where two CPUs are free to use).

What is checked is what the helper must never change -- the gradients, and that whatever
the worker does not deliver is compiled here -- and that its work is really used: kernels
it compiled are loaded from the cache, not compiled again.  No test times anything."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tapegrad as tg

SRC_PARENT = str(Path(tg.__file__).resolve().parent.parent)

PRELUDE = """
import os, sys, json
import tapegrad as tg
from tapegrad import _compile_helper as H, ops as K
from tapegrad.ops import entries as E
assert tg.__file__.startswith(%r), tg.__file__
worker = H._worker
""" % SRC_PARENT


def run(program, cache, cpus=None, helper="1"):
    """Run ``program`` (after PRELUDE) in a fresh interpreter on numba cache ``cache``, with
    ``TAPEGRAD_COMPILE_HELPER=helper`` (None: unset, the helper's own choice) on the CPUs
    ``cpus`` (None: this process's); returns its stdout lines as JSON values."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), TAPEGRAD_QUIET="1",
               PYTHONPATH=SRC_PARENT)
    env.pop("TAPEGRAD_COMPILE_HELPER", None)
    if helper is not None:
        env["TAPEGRAD_COMPILE_HELPER"] = helper
    preexec = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    done = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(program)],
                          env=env, capture_output=True, text=True, timeout=900,
                          preexec_fn=preexec)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


VECTOR_BACKWARD = """
x = tg.tensor([0.5, 1.0, 2.0], requires_grad=True)
w = tg.tensor([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0]], requires_grad=True)
loss = ((w @ x).sin() * x[:2] / (1 + x[1:])).sum()
loss.backward()
print(json.dumps([loss.item(), x.grad.tolist(), w.grad.tolist()]))
"""


def expected_vector_backward():
    import torch
    x = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0]], dtype=torch.float64,
                     requires_grad=True)
    loss = ((w @ x).sin() * x[:2] / (1 + x[1:])).sum()
    loss.backward()
    return [loss.item(), x.grad.tolist(), w.grad.tolist()]


def assert_same(got, want):
    import numpy as np
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-14, atol=0)


def test_the_first_backward_uses_what_the_worker_compiled(tmp_path):
    pytest.importorskip("torch")
    got = run(VECTOR_BACKWARD + """
print(json.dumps(worker is not None))
print(json.dumps(worker.reported))
# every kernel compiled once in all: what the worker compiled was loaded from the cache
print(json.dumps(sum(K.plan.stats.cache_hits.values())))
print(json.dumps(sum(K.plan.stats.cache_misses.values())))
print(json.dumps(len(K.sweep_vectors.kernel.signatures)))
print(json.dumps({f"entry {p} {c}": f._cache_hits for (p, c), f in E._compiled.items()}))
print(json.dumps(H.running()))
worker.let_go()
print(json.dumps(worker.process.wait(timeout=60)))
worker.reader.join(timeout=60)      # (all it said, read to its end)
print(json.dumps(worker.reported.get("sweep")))
print(json.dumps(os.path.exists(H.marker_path())))
""", tmp_path / "cache")
    (result, launched, reported, plan_hits, plan_misses, sweeps, entry_hits, waiting, code,
     other_sweep, marked) = got
    assert_same(result, expected_vector_backward())
    assert launched
    theirs = [job for job in reported if job.startswith("entry ")]
    assert all(reported[job] == "done" for job in theirs + ["plan"])
    assert plan_hits == 1 and plan_misses == 0
    # the sweep compiled here for the arguments the backward passed: one signature
    assert sweeps == 1
    assert theirs, "the worker was given none of the entries"
    assert all(entry_hits[job] == 1 for job in theirs)
    assert any(hits == 0 for hits in entry_hits.values()), "this process compiled none"
    assert waiting              # for later compiles, until idle or let go
    assert code == 0            # let go, it exits
    # the marker says plan and both sweeps are in the cache: so only if, idle for a second
    # before it was let go (a slow machine), it began the other sweep -- which it finishes
    assert other_sweep in (None, "done")
    assert marked == (other_sweep == "done")


def test_no_worker_once_the_cache_is_filled_or_where_it_is_not_wanted(tmp_path):
    cache = tmp_path / "cache"
    first = run("print(json.dumps(worker is not None))\n" + VECTOR_BACKWARD + """
# idle, the worker compiles the other sweep, then marks the cache as filled
import time
begin = time.monotonic()
while not os.path.exists(H.marker_path()) and time.monotonic() - begin < 120:
    time.sleep(0.05)
print(json.dumps(sorted(job for job, outcome in worker.reported.items() if outcome == "done")))
""", cache)
    assert first[0] is True
    assert set(first[2]) >= {"plan", "sweep"}
    again = run("print(json.dumps(worker is not None))\n" + VECTOR_BACKWARD, cache)
    assert again[0] is False and again[1] == first[1]
    off = run("print(json.dumps(worker is not None))\n" + VECTOR_BACKWARD, tmp_path / "c2",
              helper="0")
    assert off[0] is False and off[1] == first[1]
    # left to itself: none on one CPU (a second process would only take turns with this one)
    cpu = sorted(os.sched_getaffinity(0))[:1]
    one_cpu = run("print(json.dumps(worker is not None))\n", tmp_path / "c3", cpus=cpu,
                  helper=None)
    assert one_cpu[0] is False


def test_a_worker_that_dies_or_hangs_only_leaves_more_to_compile_here(tmp_path):
    pytest.importorskip("torch")
    want = expected_vector_backward()
    died = run("""
worker.process.kill()
worker.process.wait()
""" + VECTOR_BACKWARD + """
print(json.dumps(sum(K.plan.stats.cache_misses.values())))
""", tmp_path / "c1")
    assert_same(died[0], want)
    assert died[1] == 1         # plan compiled here
    hung = run("""
import signal
H._WAIT_LIMIT = 1.0
os.kill(worker.process.pid, signal.SIGSTOP)
""" + VECTOR_BACKWARD + """
print(json.dumps(worker.process.wait(timeout=60)))
""", tmp_path / "c2")
    assert_same(hung[0], want)
    assert hung[1] == -9        # killed once it did not answer


def test_later_passes_share_the_entries_of_every_op_on_their_tape(tmp_path):
    torch = pytest.importorskip("torch")
    got = run(VECTOR_BACKWARD + """
before = dict(worker.reported)
a = tg.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
loss = ((a.tanh() @ a.exp()).sin() - a.abs().sqrt() * a.sigmoid()).pow(2).mean()
loss.backward()
print(json.dumps([loss.item(), a.grad.tolist()]))
print(json.dumps(sorted(set(worker.reported) - set(before))))
print(json.dumps({f"entry {p} {c}": f._cache_hits for (p, c), f in E._compiled.items()}))
""", tmp_path / "cache")
    a = torch.tensor([[0.5, -1.0], [2.0, 0.25]], dtype=torch.float64, requires_grad=True)
    loss = ((a.tanh() @ a.exp()).sin() - a.abs().sqrt() * a.sigmoid()).pow(2).mean()
    loss.backward()
    import numpy as np
    assert np.isfinite(got[1][0])
    np.testing.assert_allclose(got[1][0], loss.item(), rtol=1e-14)
    np.testing.assert_allclose(np.array(got[1][1], dtype=float), a.grad.numpy(), rtol=1e-13)
    second_round = [job for job in got[2] if job.startswith("entry ")]
    assert len(second_round) >= 2, second_round
    assert all(got[3][job] == 1 for job in second_round)   # loaded, not compiled again


NUMBERS_BACKWARD = """
s = tg.tensor(0.75, requires_grad=True)
y = (s * s + s.sin()) / (1 + s * s)
y.backward()
print(json.dumps([y.item(), s.grad.item()]))
print(json.dumps(worker.reported.get("sweep")))
print(json.dumps([sum(K.sweep.kernel.stats.cache_hits.values()),
                  sum(K.sweep.kernel.stats.cache_misses.values())]))
"""


def test_a_program_of_numbers_after_tensors_takes_the_workers_sweep(tmp_path):
    torch = pytest.importorskip("torch")
    s = torch.tensor(0.75, dtype=torch.float64, requires_grad=True)
    y = (s * s + s.sin()) / (1 + s * s)
    y.backward()
    want = [y.item(), s.grad.item()]
    # the worker begins the sweep with the chains once idle for a second after the first
    # backward (of tensors, which took the other sweep): wait for it to begin
    got = run(VECTOR_BACKWARD + """
print(json.dumps(len(K.sweep.kernel.signatures)))
import time
begin = time.monotonic()
while worker.outcome("sweep") is None and time.monotonic() - begin < 120:
    time.sleep(0.02)
""" + NUMBERS_BACKWARD, tmp_path / "c1")
    assert_same(got[0], expected_vector_backward())
    assert got[1] == 0          # the first backward swept without the chains
    assert_same(got[2], want)
    assert got[3] == "done"
    assert got[4] == [1, 0]     # loaded from the cache, not compiled here
    # numbers right after, most likely before the worker begins (then compiled here, as
    # without a worker; or loaded, if the worker had begun): the same numbers either way
    now = run(VECTOR_BACKWARD + NUMBERS_BACKWARD, tmp_path / "c2")
    assert_same(now[1], want)
    assert sum(now[3]) == 1


def test_an_interrupt_while_waiting_for_the_worker_corrupts_nothing(tmp_path):
    pytest.importorskip("torch")
    got = run("""
real_wait = H._Worker.wait
def interrupted(self, jobs):
    H._Worker.wait = real_wait
    raise KeyboardInterrupt
H._Worker.wait = interrupted
x = tg.tensor([0.5, 1.0, 2.0], requires_grad=True)
try:
    (x * x).sum().backward()
except KeyboardInterrupt:
    print(json.dumps("interrupted"))
print(json.dumps(x.grad is None))
print(json.dumps(H.running()))
""" + VECTOR_BACKWARD, tmp_path / "cache")
    assert got[:3] == ["interrupted", True, True]
    assert_same(got[3], expected_vector_backward())


def test_a_forked_child_leaves_the_parents_worker_alone(tmp_path):
    pytest.importorskip("torch")
    got = run("""
pid = os.fork()
if pid == 0:
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)    # the child's output is not read
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    os._exit(0 if (x.grad.tolist() == [2.0, 4.0] and not H.running()) else 1)
print(json.dumps(os.waitpid(pid, 0)[1]))
print(json.dumps(H.running()))
""" + VECTOR_BACKWARD + """
print(json.dumps(sorted(worker.reported)))
""", tmp_path / "cache")
    assert got[0] == 0
    assert got[1] is True       # still the parent's to use
    assert_same(got[2], expected_vector_backward())
    assert "plan" in got[3]
