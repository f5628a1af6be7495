"""Long generated loops on numba's threads (codegen.PARALLEL_MIN, _threads.py).

A backward loop of 10^5 positions or more in which no position depends on another runs on
numba's threads in ``backward_parallel``.  It must give the one-thread loop's bits and the
interpreter's; it must run safely from several Python threads at once and in a forked
child (numba's workqueue layer and GNU OpenMP's kill the process otherwise), by falling
back to the one-thread loop there.
"""
import json
import os
import subprocess
import sys
import threading
import textwrap

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import _threads, codegen

N = codegen.PARALLEL_MIN + 1234


def _w4(x):
    return (tg.tanh(x) * x + tg.exp(-x * x)).sum()


def _cubic(a, b, x):
    # a broadcast's gradient adds over the positions: that loop keeps to one thread
    return ((a + b * x) * x - 1.0).pow(2).sum()


def _grad(fn, xv):
    x = tg.tensor(xv, requires_grad=True)
    out = fn(x)
    out.backward()
    return out.item(), x.grad.numpy().copy()


@pytest.fixture
def two_threads():
    before = tg.get_num_threads()
    tg.set_num_threads(min(2, _max_threads()))
    yield tg.get_num_threads()
    tg.set_num_threads(before)


def _max_threads():
    import numba
    return numba.config.NUMBA_NUM_THREADS


def test_a_long_loop_without_sums_runs_on_threads_with_the_same_bits(two_threads):
    xv = np.random.default_rng(4).standard_normal(N)
    generated = tg.compile(_w4, codegen=True)
    interpreted = tg.compile(_w4, codegen=False)
    got = [_grad(generated, xv) for _ in range(3)]
    want = _grad(interpreted, xv)
    prog = generated.tape.program
    assert "for k in prange(" in prog.source.split("def backward_parallel")[1]
    assert prog.backward.parallel is not None
    for value, grad in got:
        assert value == want[0]
        np.testing.assert_array_equal(grad, want[1])
    # on one thread: the same loops, the same bits
    tg.set_num_threads(1)
    value, grad = _grad(generated, xv)
    np.testing.assert_array_equal(grad, want[1])
    t = np.tanh(xv)
    np.testing.assert_allclose(grad, (1 - t * t) * xv + t - 2 * xv * np.exp(-xv * xv),
                               rtol=1e-12, atol=1e-15)


def test_a_loop_that_adds_a_broadcast_gradient_keeps_to_one_thread(two_threads):
    xv = np.linspace(-1.0, 1.0, N)

    def args():
        return (tg.tensor(0.3, requires_grad=True), tg.tensor(-0.2, requires_grad=True),
                tg.tensor(xv))
    generated = tg.compile(_cubic, codegen=True)
    interpreted = tg.compile(_cubic, codegen=False)
    for _ in range(2):
        a, b, x = args()
        generated(a, b, x).backward()
        a2, b2, x2 = args()
        interpreted(a2, b2, x2).backward()
        assert (a.grad.item(), b.grad.item()) == (a2.grad.item(), b2.grad.item())
    assert "def backward_parallel" not in generated.tape.program.source


def test_a_matrix_product_between_long_loops_on_threads(two_threads):
    # the product is a call of its entry (codegen._CALLED) in both forms of the backward
    rng = np.random.default_rng(8)
    Xv, yv = rng.standard_normal((N, 4)), np.sin(np.linspace(-3.0, 3.0, N))

    def fit(w, X, y):
        r = X @ w - y
        return (r * r * 0.5 + r).mean()
    results = []
    for codegen_ in (True, False):
        fn = tg.compile(fit, codegen=codegen_)
        for i in range(2):
            w = tg.tensor([0.1, -0.2, 0.3, 0.05 * i], requires_grad=True)
            loss = fn(w, tg.tensor(Xv), tg.tensor(yv))
            loss.backward()
            results.append((codegen_, loss.item(), w.grad.numpy().copy()))
        if codegen_:
            source = fn.tape.program.source
            assert "call(table[" in source.split("def backward_parallel")[1]
    generated, interpreted = results[:2], results[2:]
    for (_, v, g), (_, v2, g2) in zip(generated, interpreted):
        assert v == v2
        np.testing.assert_array_equal(g, g2)


def test_threads_calling_at_once_get_the_one_thread_loop_not_a_crash(two_threads):
    xv = np.random.default_rng(5).standard_normal(N)
    fn = tg.compile(_w4, codegen=True)
    want = _grad(fn, xv)
    results, errors = [], []

    def work():
        try:
            for _ in range(4):
                results.append(_grad(fn, xv))
        except BaseException as e:  # reported below
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 12
    for value, grad in results:
        assert value == want[0]
        np.testing.assert_array_equal(grad, want[1])


def test_run_chooses_the_one_thread_kernel_where_threads_are_not_safe(monkeypatch):
    parallel, serial = (lambda: "threads"), (lambda: "one")
    # (as on a machine where numba has two threads or more)
    monkeypatch.setattr(_threads, "available", lambda: True)
    assert _threads.run(parallel, serial) == "threads"
    # another Python thread is launching one
    with _threads._launching:
        assert _threads.run(parallel, serial) == "one"
    # a forked child of the process that started numba's threads
    owner = list(_threads._owner)
    _threads._owner[:] = [os.getpid() + 1]
    try:
        assert _threads.run(parallel, serial) == "one"
    finally:
        _threads._owner[:] = owner
    # one thread asked for
    monkeypatch.undo()
    before = tg.get_num_threads()
    tg.set_num_threads(1)
    try:
        assert _threads.run(parallel, serial) == "one"
    finally:
        tg.set_num_threads(before)


def test_a_forked_child_runs_the_same_backward(tmp_path):
    # the parent runs the loops on threads first; GNU OpenMP would end a child that did
    script = textwrap.dedent(f"""
        import json, os, sys
        import numpy as np
        import tapegrad as tg
        from tapegrad import _threads
        def f(x):
            return (tg.tanh(x) * x + tg.exp(-x * x)).sum()
        fn = tg.compile(f, codegen=True)
        xv = np.random.default_rng(4).standard_normal({N})
        def grad():
            x = tg.tensor(xv, requires_grad=True)
            fn(x).backward()
            return x.grad.numpy()
        want = [grad() for _ in range(3)][-1]
        threaded = bool(_threads._owner) and not _threads.broken
        pid = os.fork()
        if pid == 0:
            ok = np.array_equal(grad(), want)
            os._exit(0 if ok else 1)
        print(json.dumps([os.waitpid(pid, 0)[1], threaded]))
    """)
    env = dict(os.environ, NUMBA_NUM_THREADS="2", TAPEGRAD_COMPILE_HELPER="0")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    status, threaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert status == 0
    assert threaded   # the parent did run the loops on threads
