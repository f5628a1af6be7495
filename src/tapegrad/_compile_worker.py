"""The compile helper's second process (``main``, which ``_compile_helper`` starts): it
compiles ``plan``, then each job its parent sends on its input
(``entry <pass> <opcode>``), and reports each on its output (``done <job>`` or ``failed
<job>``).  Every kernel it compiles goes to numba's disk cache, which is how the parent
gets it.  It exits when its input closes, or after ``IDLE_LIMIT`` seconds without any."""
import os
import select
import sys


def _report(outcome, job):
    print(f"{outcome} {job}", flush=True)


def _compile_plan():
    import tapegrad
    from tapegrad import autograd
    # a small real tape: plan is compiled for the types of a real tape's columns
    x = tapegrad.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    autograd.make_plan(y._tape.columns(), (y._r,))


def _compile(job):
    from tapegrad.ops import entries
    kind, pass_, code = job.split()
    if kind != "entry":
        raise ValueError(f"unknown job {job!r}")
    entries.ensure(int(pass_), int(code))


def main():
    from tapegrad import _compile_helper
    try:
        _compile_plan()
    except Exception:
        _report("failed", "plan")
    else:
        _report("done", "plan")
        try:
            with open(_compile_helper.marker_path(), "w"):
                pass
        except OSError:
            pass
    # (the input read by hand: select() sees what is in the pipe, not what a buffered
    # readline already took from it)
    fd = sys.stdin.fileno()
    pending = b""
    while True:
        if b"\n" not in pending:
            ready, _, _ = select.select([fd], [], [], _compile_helper.IDLE_LIMIT)
            chunk = os.read(fd, 4096) if ready else b""
            if not chunk:
                return
            pending += chunk
            continue
        line, pending = pending.split(b"\n", 1)
        job = line.decode().strip()
        try:
            _compile(job)
            _report("done", job)
        except Exception:
            _report("failed", job)

