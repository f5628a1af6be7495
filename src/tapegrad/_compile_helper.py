"""A second process that compiles part of tapegrad's kernels on a fresh machine.

The first ``backward()`` on a machine whose numba cache is empty compiles, one after the
other, ``plan``, a sweep and the entry of each op on the tape: 3.4 s for ``(x * x).sum()``
here, 4.4 s for the demo's first section, and the demo's first training step 6.6 s more
for the entries of its other ops -- on one CPU while the other idles.  numba compiles one
function at a time per process, so the other CPU takes a second process:

* ``start`` -- the first thing ``import tapegrad`` does -- launches a Python process
  running ``_compile_worker.main`` when the cache has not been filled for these kernel sources
  (a marker file beside numba's cache says so) and this process may run on two CPUs or
  more (``TAPEGRAD_COMPILE_HELPER``: ``0`` never starts one, ``1`` starts one on one CPU
  too).  The worker imports tapegrad while this process does, then compiles ``plan``,
  which every backward needs first.
* ``share_first_backward`` splits what the first backward needs between the two
  processes -- the sweep here, the tape's op entries by their estimated compile times --
  sends the worker its part, compiles this process's part, and waits for the worker.  The
  backward then goes on as usual and loads the worker's kernels from numba's disk cache.
* Once idle for ``AHEAD_AFTER``, the worker compiles the backward sweeps this process has
  not (``SWEEPS``: told by ``skip <name>`` lines) ahead of need: a program of tensors may
  come to numbers later, and an interactive session's first backward comes long after its
  import.  A first backward that takes a sweep the worker has begun waits for the
  worker's (``before_first_sweep``).
* Later, a pass that stops at a record whose op's entry is not compiled
  (``ops._compiling``) first has ``compile_entries`` compile the missing entries of every op
  on its tape the same way, when there are two or more.
* The worker exits once it has had no job for ``IDLE_LIMIT`` seconds, or when this
  process ends.  The marker is written once ``plan`` and both sweeps are in the cache.

Nothing depends on the worker: if it is slow to start, fails, dies or is never launched,
this process compiles whatever is not in the cache, as it does without a worker.  A
process forked from this one never talks to the parent's worker.
"""
import os
import subprocess
import sys
import threading
import time

from . import _kernel_cache

# Rough compile times on a fresh machine (s, measured on a 2-core EPYC): what a round
# balances the two processes' parts by.
_SECONDS = {"plan": 1.0, "sweep_vectors": 1.2, "sweep": 3.0}
_ENTRY_SECONDS = 0.6
# the backward sweeps (``ops.sweep_vectors``; ``ops.sweep``, with the one-element chains a
# program of numbers takes): the worker compiles them ahead of need, once idle
SWEEPS = ("sweep_vectors", "sweep")
# ... once no job came for this long (a program's next compiles tend to follow its last
# ones closely)
AHEAD_AFTER = 1.0
# the worker's part is waited for at most this long; then this process compiles the rest
_WAIT_LIMIT = 120.0
# the worker exits after this long without a job (the compiles of a program's first
# minute are what it is for; it holds a Python process's memory while it waits)
IDLE_LIMIT = 60.0
_FINISHED = ("done", "failed")

_worker = None          # the worker, once started (kept: its reader thread reaps it)
_lock = threading.Lock()    # one round of shared compiles at a time


def marker_path():
    """The file that says this cache holds kernels of these sources (written by the worker
    once ``plan`` and both sweeps are in the cache): a process that finds it starts no
    worker, and compiles the entries of ops it meets first on its own."""
    return os.path.join(_kernel_cache.cache_dir(),
                        f"tapegrad-compiled-{_kernel_cache.kernel_sources_digest()[:20]}"
                        f"-py{sys.version_info[0]}{sys.version_info[1]}")


def _wanted():
    """``TAPEGRAD_COMPILE_HELPER``: ``0`` never, ``1`` on any fresh cache, unset on a fresh
    cache where this process may use two CPUs or more."""
    choice = os.environ.get("TAPEGRAD_COMPILE_HELPER", "")
    if choice == "0" or os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        return False
    if not sys.executable:
        return False
    if choice != "1":
        try:
            cpus = len(os.sched_getaffinity(0))
        except AttributeError:      # (no affinity on this platform)
            cpus = os.cpu_count() or 1
        if cpus < 2:
            return False
    try:
        return not os.path.exists(marker_path())
    except OSError:
        return False


class _Worker:
    """The worker process, and what it has reported (lines ``done <job>`` / ``failed
    <job>`` on its output, read by a thread of this process into ``reported``)."""

    def __init__(self):
        # this very package, whatever the working directory holds
        package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        code = (f"import sys; sys.path.insert(0, {package_parent!r}); "
                "from tapegrad._compile_worker import main; main()")
        env = dict(os.environ, TAPEGRAD_COMPILE_HELPER="0")    # (no worker of its own)
        self.pid = os.getpid()
        self.shared_first = False   # the first backward has shared its compiles
        self.reported = {}      # job -> "done" or "failed"
        self.started = {}       # job begun ahead of need -> time.monotonic() it began
        self.ended = False
        self.changed = threading.Condition()
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True,
            bufsize=1)
        self.reader = threading.Thread(target=self._read, name="tapegrad compile helper",
                                       daemon=True)
        self.reader.start()

    def _read(self):
        try:
            for line in self.process.stdout:
                outcome, _, job = line.strip().partition(" ")
                with self.changed:
                    self.reported[job] = outcome
                    if outcome == "start":
                        self.started[job] = time.monotonic()
                    self.changed.notify_all()
        except (OSError, ValueError):
            pass
        finally:
            with self.changed:
                self.ended = True
                self.changed.notify_all()
            # its output ends when it exits: reap it here, or a Popen dropped while the
            # process runs warns (an error under warnings-as-errors)
            self.process.stdout.close()
            self.process.wait()

    def has(self, job):
        """Whether ``job`` is done or failed."""
        with self.changed:
            return self.reported.get(job) in _FINISHED

    def outcome(self, job):
        """"start", "done", "failed", or None (not reported)."""
        with self.changed:
            return self.reported.get(job)

    def busy_for(self, waited_for):
        """Roughly how long the worker has yet to work before it takes a new job: the jobs
        it has begun ahead of need and not finished, and those of ``waited_for`` (it is on
        them, or they are queued) not finished."""
        now = time.monotonic()
        with self.changed:
            left = sum(max(0.0, _SECONDS[job] - (now - begun))
                       for job, begun in self.started.items()
                       if self.reported.get(job) not in _FINISHED)
            return left + sum(_SECONDS.get(job, _ENTRY_SECONDS) for job in waited_for
                              if job not in self.reported)

    def send(self, jobs):
        try:
            self.process.stdin.write("".join(job + "\n" for job in jobs))
            self.process.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def wait(self, jobs):
        """Until the worker has reported every one of ``jobs`` (done or failed) or has
        ended; False if ``_WAIT_LIMIT`` seconds passed first."""
        with self.changed:
            return self.changed.wait_for(
                lambda: self.ended or all(self.reported.get(j) in _FINISHED for j in jobs),
                timeout=_WAIT_LIMIT)

    def let_go(self, stop=False):
        """Close the worker's input: it finishes what it is doing and exits.  ``stop``:
        kill it (it did not answer in time)."""
        try:
            self.process.stdin.close()
        except (OSError, ValueError):
            pass
        if stop:
            self.process.kill()


def start():
    """Launch the worker if this is a fresh machine (see the module docstring)."""
    global _worker
    if _worker is not None or not _wanted():
        return
    try:
        _worker = _Worker()
    except (OSError, ValueError, subprocess.SubprocessError):
        _worker = None


def connect():
    """The end of ``import tapegrad``: while the worker runs, a pass that stops at an op's
    missing entry compiles those of every op on its tape with the worker's help."""
    if running():
        from .ops import entries
        entries.compile_many = compile_entries


def running():
    """Whether this process has a worker to share compiles with."""
    return _worker is not None and _worker.pid == os.getpid() and not _worker.ended


def first_backward_to_come():
    """Whether the worker runs and the first backward has not shared its compiles yet."""
    return running() and not _worker.shared_first


def share_first_backward(entry_codes, pass_, sweep, sweep_args):
    """Compile what the first backward needs, the worker taking part of it: the entries of
    ``entry_codes`` for pass ``pass_``, and the ``sweep`` kernel (a numba dispatcher) for
    arguments like ``sweep_args`` (None: compiled already) -- here, where its argument
    types are, unless the worker has begun it ahead of need.  The worker has ``plan`` on
    its hands until it says it is done."""
    with _lock:
        if not first_backward_to_come():
            return
        worker = _worker
        worker.shared_first = True
        name = sweep.__name__
        if sweep_args is not None and worker.outcome(name) is not None:
            # begun (or done) by the worker ahead of need: its, not another one here
            _round(pass_, entry_codes, 0.0, ["plan", name], None)
            return
        worker.send([f"skip {name}"])
        _round(pass_, entry_codes, _SECONDS[name] if sweep_args is not None else 0.0,
               ["plan"], lambda: _compile_sweep(sweep, sweep_args))


def before_first_sweep(name):
    """Before the first call of the sweep ``name`` here: wait for the worker's if it has
    begun it, else tell it not to (this process compiles it now)."""
    with _lock:
        worker = _worker
        if not running():
            return
        if worker.outcome(name) is None:
            worker.send([f"skip {name}"])
            return
    from . import _config
    if not _config.report_compile(lambda: worker.wait([name]), "the compile helper's sweep"):
        worker.let_go(stop=True)


def compile_entries(pass_, codes):
    """Compile the entries of ``codes`` for pass ``pass_`` (those not compiled yet), the
    worker taking about half of them (``entries.compile_many``)."""
    from .ops import entries
    with _lock:
        codes = [c for c in codes if entries.TABLE[pass_, c] == 0]
        if running() and len(codes) > 1:
            _round(pass_, codes, 0.0, [], None)


def _compile_sweep(sweep, sweep_args):
    from . import _config
    if sweep_args is not None:
        signature = tuple(sweep.typeof_pyval(a) for a in sweep_args)
        _config.report_compile(lambda: sweep.compile(signature), sweep.__name__)


def _round(pass_, codes, first_seconds, also_wait_for, first):
    """One round: the entries of ``codes`` split between the two processes, longest first
    to the one with less to do -- this one starts with ``first`` (a function, or None) of
    ``first_seconds``, the worker with what it reports as ``also_wait_for`` -- then this
    process compiles its part and waits for the worker's.  A worker that does not answer in
    ``_WAIT_LIMIT`` seconds is stopped; whatever it did not deliver is compiled here, by
    the caller or the pass that needs it."""
    # (imported here: this module is imported first of all, before numba)
    from . import _config
    from .ops import entries
    worker = _worker
    mine_seconds = first_seconds
    theirs_seconds = worker.busy_for(also_wait_for)
    mine, theirs = [], []
    for code in codes:
        if mine_seconds <= theirs_seconds:
            mine.append(code)
            mine_seconds += _ENTRY_SECONDS
        else:
            theirs.append(code)
            theirs_seconds += _ENTRY_SECONDS
    if theirs and not worker.send([entry_job(pass_, code) for code in theirs]):
        mine, theirs = list(codes), []
    if first is not None:
        first()
    for code in mine:
        try:
            entries.ensure(pass_, code)
        except Exception:
            # (an op the pass may not even reach: the pass compiles it again if it does,
            # and raises there)
            pass
    jobs = [entry_job(pass_, code) for code in theirs] + also_wait_for
    if not _config.report_compile(lambda: worker.wait(jobs), "the compile helper's part"):
        worker.let_go(stop=True)
    # the worker's entries into this process's table now, from the cache: a pass that
    # stopped at one of them would otherwise ask for a round of its own
    for code in theirs:
        if worker.outcome(entry_job(pass_, code)) == "done":
            entries.ensure(pass_, code)


def entry_job(pass_, code):
    return f"entry {pass_} {code}"
