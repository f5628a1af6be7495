"""The compile helper's second process (``main``, which ``_compile_helper`` starts).

It compiles ``plan``, then each job its parent sends on its input (``entry <pass>
<opcode>``), and when none has come for ``AHEAD_AFTER`` seconds the backward sweeps
(``SWEEPS``) but those its parent said it compiles itself (``skip <name>``).  It reports
each on its output: ``start <name>`` for a sweep begun ahead of need, then ``done <job>``
or ``failed <job>``; and writes the marker once ``plan`` and the sweeps are compiled.
Every kernel it compiles goes to numba's disk cache, which is how the parent gets it.  It
exits when its input closes, or after ``IDLE_LIMIT`` seconds without any."""
import os
import select
import sys


def _report(outcome, job):
    print(f"{outcome} {job}", flush=True)


def _small_tape():
    """A small real tape of tensors and its columns: kernels are compiled for the types of
    a real tape's columns."""
    import tapegrad
    x = tapegrad.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    return y, y._tape, y._tape.columns()


def _compile_plan():
    from tapegrad import autograd
    y, _, cols = _small_tape()
    autograd.make_plan(cols, (y._r,))


def _compile_sweep(name):
    from tapegrad import autograd, ops
    _, tape, cols = _small_tape()
    kernel = getattr(ops, name).kernel
    kernel.compile(tuple(kernel.typeof_pyval(a) for a in autograd.sweep_arguments(tape, cols)))


def _compile(job):
    from tapegrad import _compile_helper
    from tapegrad.ops import entries
    if job in _compile_helper.SWEEPS:
        _compile_sweep(job)
        return
    kind, pass_, code = job.split()
    if kind != "entry":
        raise ValueError(f"unknown job {job!r}")
    entries.ensure(int(pass_), int(code))


def main():
    from tapegrad import _compile_helper
    finished = set()    # of plan and the sweeps: compiled, here or by the parent

    def mark():
        # the cache holds what every backward needs first: later processes start no worker
        if finished.issuperset(("plan",) + _compile_helper.SWEEPS):
            try:
                with open(_compile_helper.marker_path(), "w"):
                    pass
            except OSError:
                pass

    if _run("plan"):
        finished.add("plan")
    ahead = list(_compile_helper.SWEEPS)    # begun once no other job came for a while
    # (the input read by hand: select() sees what is in the pipe, not what a buffered
    # readline already took from it)
    fd = sys.stdin.fileno()
    pending = b""
    while True:
        if b"\n" not in pending:
            wait = _compile_helper.AHEAD_AFTER if ahead else _compile_helper.IDLE_LIMIT
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready and ahead:
                job = ahead.pop(0)
                _report("start", job)
                if _run(job):
                    finished.add(job)
                    mark()
                continue
            chunk = os.read(fd, 4096) if ready else b""
            if not chunk:
                return
            pending += chunk
            continue
        line, pending = pending.split(b"\n", 1)
        job = line.decode().strip()
        if job.startswith("skip "):
            # the parent compiles it: not here as well
            name = job.split(" ", 1)[1]
            if name in ahead:
                ahead.remove(name)
            finished.add(name)
            mark()
            continue
        _run(job)


def _run(job):
    """Compile ``job`` and report how it went; whether it was done."""
    try:
        if job == "plan":
            _compile_plan()
        else:
            _compile(job)
    except Exception:
        _report("failed", job)
        return False
    _report("done", job)
    return True
