"""Ctrl-C at any line of an eager forward or backward leaves tapegrad working: the next
forward and backward give the right values and gradients, and nothing crashes.

A child process runs the phase once per line that tapegrad's own code executes in it, with
``sys.settrace`` raising ``KeyboardInterrupt`` at that line (the i-th line event), then runs a
fresh forward and backward and compares them with the uninterrupted ones.  A child, because
what this guards against includes crashes; one child per run of points, restarted after a
point that breaks (the state it leaves would break the points after it too).
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent('''
    import json, os, sys
    import numpy as np
    import tapegrad as tg

    from tapegrad.autograd import _GradMode

    SRC = os.path.dirname(tg.__file__)
    # Leaving a no_grad block restores the grad mode in one line of Python, as PyTorch's
    # no_grad does: an interrupt just before it leaves grad mode off in both libraries.
    # Those lines are not interrupt points here.
    RESTORE = _GradMode.__exit__.__code__
    rng = np.random.default_rng(0)
    W1v, b1v = rng.normal(size=(4, 3)), rng.normal(size=3)
    W2v, Xv = rng.normal(size=(3, 2)), rng.normal(size=(5, 4))
    lin = tg.nn.Linear(2, 1).double()

    def forward(W1, b1, W2, X):
        with tg.no_grad():
            W1[0, 0].add_(0.0)          # an in-place write through a view, unrecorded
        h = tg.tanh(X @ W1 + b1)
        z = lin(h @ W2).squeeze(1)
        y = tg.cat([z, z[:2] * 2.0]).sum() + (h[1:, 0] ** 2).mean() + h.exp().max()
        y = y + tg.softmax(h, dim=1)[:, 0].sum() + tg.where(z > 0, z, 0.1 * z).sum()
        buf = tg.zeros(3, 2)
        buf[1] = h[0, :2]
        y = y + (buf * 3.0).sum() + tg.nn.functional.mse_loss(z, X[:, 0])
        return y + h.view(-1)[3] * tg.stack([b1, b1]).sum()

    def params():
        return [tg.tensor(v, requires_grad=True) for v in (W1v, b1v, W2v)]

    def fresh():
        ps = params()
        lin.zero_grad()
        y = forward(*ps, tg.tensor(Xv))
        y.backward()
        grads = [p.grad.numpy().copy() for p in ps] + [lin.weight.grad.numpy().copy()]
        return y.item(), grads

    ref_y, ref_g = fresh()

    PHASE = sys.argv[2]

    def traced(tracer):
        """The phase under test with ``tracer`` on: the forward, or the backward of a
        forward run untraced."""
        ps = params()
        if PHASE == "forward":
            sys.settrace(tracer)
            try:
                forward(*ps, tg.tensor(Xv))
            finally:
                sys.settrace(None)
            return
        lin.zero_grad()
        y = forward(*ps, tg.tensor(Xv))
        sys.settrace(tracer)
        try:
            y.backward()
        finally:
            sys.settrace(None)

    def lines():
        n = [0]

        def count(frame, event, arg):
            if (event == "line" and frame.f_code.co_filename.startswith(SRC)
                    and frame.f_code is not RESTORE):
                n[0] += 1
            return count
        traced(count)
        return n[0]

    total = lines()
    print(json.dumps({"total": total}), flush=True)
    for k in range(int(sys.argv[1]), total):
        n, where = [0], [""]

        def interrupt(frame, event, arg):
            if (event == "line" and frame.f_code.co_filename.startswith(SRC)
                    and frame.f_code is not RESTORE):
                if n[0] == k:
                    where[0] = (os.path.relpath(frame.f_code.co_filename, SRC)
                                + f":{frame.f_lineno}")
                    n[0] += 1
                    raise KeyboardInterrupt
                n[0] += 1
            return interrupt
        try:
            traced(interrupt)
        except KeyboardInterrupt:
            pass
        problem = None
        try:
            for _ in range(2):
                y, g = fresh()
                if not (np.isclose(y, ref_y, rtol=1e-12, atol=0) and all(
                        np.allclose(a, b, rtol=1e-12, atol=1e-14) for a, b in zip(g, ref_g))):
                    problem = "wrong values or gradients"
        except Exception as exc:
            problem = f"{type(exc).__name__}: {exc}"
        print(json.dumps({"k": k, "at": where[0], "problem": problem}), flush=True)
        if problem:
            sys.exit(3)
''')


@pytest.mark.parametrize("phase", ["forward", "backward"])
def test_an_interrupt_at_any_line_leaves_the_next_forward_and_backward_right(phase, tmp_path):
    script = tmp_path / "interrupts.py"
    script.write_text(CHILD)
    env = dict(os.environ, TAPEGRAD_QUIET="1")
    start, total, tried, problems = 0, None, 0, []
    while total is None or start < total:
        run = subprocess.run([sys.executable, str(script), str(start), phase],
                             capture_output=True,
                             text=True, env=env, timeout=1800)
        reports = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
        assert reports, run.stderr[-2000:]
        total = reports[0]["total"]
        points = reports[1:]
        tried += len(points)
        last = points[-1]["k"] if points else start - 1
        if run.returncode == 0:
            assert last == total - 1
            break
        if run.returncode == 3:
            problems.append(points[-1])
        else:   # a crash: the point after the last one reported
            problems.append({"k": last + 1, "problem": f"crashed ({run.returncode})",
                             "stderr": run.stderr[-500:]})
            tried += 1
        start = problems[-1]["k"] + 1
    assert total > 100          # the phase runs through a good part of the library
    assert tried == total
    assert not problems, problems
