"""Kernels that run on numba's threads, launched so that no caller can bring the process down.

numba's threading layers differ in what they survive (numba's "threading layer" docs):
``workqueue``, the one every machine has, terminates the process when two Python threads
launch parallel kernels at once, and GNU OpenMP's, in a child forked from a process that
has used it.  tapegrad's compiled functions are called from threads and its users fork.
So a parallel kernel runs only in the process that first launched one and only while no
other thread is launching one; otherwise the caller gets the one-thread kernel, which
gives the same bits (parallel kernels here are written to be order-independent).
"""
import os
import threading

_launching = threading.Lock()
_owner = []     # the pid of the process whose launches started numba's threads
broken = []     # why numba's threads could not start (then none is tried again)


def available():
    """Whether a parallel kernel may be worth launching: numba gives more than one thread
    (``tapegrad.set_num_threads``) and its threading layer has not failed."""
    if broken:
        return False
    import numba
    return numba.get_num_threads() > 1


def run(parallel, serial, *args):
    """``parallel(*args)`` where that is safe now (see above), else ``serial(*args)``."""
    pid = os.getpid()
    if (_owner and _owner[0] != pid) or not available():
        return serial(*args)
    if not _launching.acquire(blocking=False):
        return serial(*args)   # another thread is in a parallel kernel
    try:
        if not _owner:
            _owner.append(pid)
        try:
            return parallel(*args)
        except Exception as exc:   # e.g. "No threading layer could be loaded"
            broken.append(f"{type(exc).__name__}: {exc}")
    finally:
        _launching.release()
    return serial(*args)


def either(parallel, serial):
    """A function running ``parallel`` or ``serial`` on its arguments, as ``run`` chooses."""
    def call(*args):
        return run(parallel, serial, *args)
    call.serial, call.parallel = serial, parallel
    return call
