"""Many gradients on a Dask cluster from one recorded tape: ``tapegrad.distributed``.

``map_value_and_grad(fn, batch)`` is ``per_sample_value_and_grad`` spread over the workers
of a ``distributed.Client``.  The driver records ``fn`` once (on the first sample), ships the
tape to every worker once, as the bytes of its ``.npz`` file, and each task replays a chunk of
the batch in one compiled call on the loaded tape (``LoadedTape.replay_batch``).  Workers need
only ``tapegrad`` importable: they never see ``fn`` itself.

Samples whose control flow differs from the recorded tape's (a guard fails) come back marked
in a status array and are never computed on the wrong tape.  They are handled as ``vmap``
handles them: the driver records the function for the first of them and ships that tape, the
chunks that hold such samples replay them over it, up to ``replay._BATCH_VARIANTS`` tapes in
all; whatever is left runs eagerly on the driver, one sample at a time.  The results are
those of ``per_sample_value_and_grad`` bit for bit.

Faults: inputs are part of each task (NumPy chunks) or computed by the cluster (Dask
arrays), and the tape is a task of its own (not scattered data), so anything a dead worker
held is computed again elsewhere by the scheduler, and the result is complete and the same,
also for Dask-array results lost after the map returned (the scheduler keeps the tasks they
were computed from; scattered data it would have forgotten).
"""
import hashlib
import math
import operator
import os
import threading
import uuid
import warnings
from collections import OrderedDict

import numpy as np

from .replay import _BATCH_VARIANTS, Compiled, _last_variant, _one
from .tapefile import load_tape
from .tensor import Tensor

try:
    import distributed as _distributed
except ImportError:   # an optional extra: the error says how to get it when it is used
    _distributed = None

# Default chunks keep a task's inputs under this many bytes: NumPy chunks travel inside the
# task (so that a retry after a lost worker has them), and Dask warns about graphs over 10 MB.
_CHUNK_BYTES = 4 << 20
_TASKS_PER_WORKER = 4   # default chunks per worker: retries and stragglers stay small


def _require_distributed():
    if _distributed is None:
        raise ImportError("tapegrad.distributed needs Dask's distributed scheduler: "
                          "pip install 'tapegrad[distributed]'")
    return _distributed


def map_value_and_grad(fn, batch, argnums=0, client=None, chunk=None):
    """Per-sample values and gradients of a scalar ``fn`` over ``batch``, on a Dask cluster.

    ``batch`` is one array or a tuple of arrays (``fn``'s positional arguments), NumPy arrays,
    tensors or Dask arrays, sharing a leading batch axis.  ``argnums`` as for
    ``per_sample_value_and_grad``.  Returns ``(values, grads)``: NumPy arrays, or Dask arrays
    (chunked along the batch axis as the tasks were) when any argument is a Dask array; then
    what comes back to the driver is two numbers per chunk and round, and the inputs of the
    samples it records a tape for or runs eagerly.  An empty batch records nothing: its
    values have shape (0,).

    ``client``: a ``distributed.Client``; None takes the current default client, or starts a
    local cluster (one single-threaded worker process per core) kept for later calls (its
    workers are new processes: a script calling this needs the usual
    ``if __name__ == "__main__":`` guard).
    ``chunk``: samples per task; by default about four tasks per worker, each with at most
    4 MB of inputs (a Dask array keeps its own chunks unless ``chunk`` is given).

    Shapes: ``values`` ``(B,)``; ``grads`` shaped as the differentiated argument(s).  The
    example uses a small in-process cluster; pass your own ``Client`` the same way.

    Example:
        >>> from dask.distributed import Client
        >>> from tapegrad.distributed import map_value_and_grad
        >>> batch = np.array([[1.0, 2.0], [3.0, 4.0]])       # two samples
        >>> with Client(processes=False, n_workers=1, dashboard_address=None) as client:
        ...     values, grads = map_value_and_grad(lambda x: (x * x).sum(), batch, client=client)
        >>> values, grads
        (array([ 5., 25.]), array([[2., 4.],
               [6., 8.]]))
    """
    dist = _require_distributed()
    args, lazy = _arguments(batch)
    bsz = args[0].shape[0]
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not -len(args) <= i < len(args):
            raise ValueError(f"argnums {argnums} out of range for {len(args)} arguments")
    nums = tuple(i % len(args) for i in nums)
    compiled = fn if isinstance(fn, Compiled) else Compiled(fn)
    if bsz == 0:
        # nothing is recorded, so each sample's value is taken to be a number
        values = np.empty((0,))
        grads = [np.zeros(args[i].shape) for i in nums]
        return _shaped(values, grads, argnums, lazy)
    client = _client(dist, client)
    _warm_workers(client)
    run = _Map(client, compiled, args, nums, lazy, chunk)
    values, grads = run.results()
    return _shaped(values, grads, argnums, lazy)


def _shaped(values, grads, argnums, lazy):
    if lazy and not hasattr(values, "dask"):
        import dask.array as da
        values, grads = da.from_array(values), [da.from_array(g) for g in grads]
    return values, (grads[0] if isinstance(argnums, int) else tuple(grads))


def _arguments(batch):
    """The positional arguments as float64 NumPy or Dask arrays, checked as ``vmap`` checks
    them; and whether any is a Dask array."""
    items = list(batch) if isinstance(batch, (tuple, list)) else [batch]
    if not items:
        raise ValueError("map_value_and_grad needs at least one batched argument")
    lazy = any(_is_dask(a) for a in items)
    args = []
    for a in items:
        if isinstance(a, Tensor):
            a = a._value
        elif not _is_dask(a):
            a = np.asarray(a)
        args.append(a)
    shapes = [list(a.shape) for a in args]
    if lazy and any(math.isnan(d) for s in shapes for d in s):
        raise ValueError("a Dask array with unknown chunk sizes: call its "
                         "compute_chunk_sizes() first")
    if any(len(s) == 0 for s in shapes) or len({s[0] for s in shapes}) != 1:
        raise ValueError(f"every argument needs the same leading batch size; got shapes "
                         f"{shapes}")
    if any(np.dtype(a.dtype).kind != "f" for a in args):
        raise TypeError("batched arguments must be float tensors")
    if lazy:
        import dask.array as da
        args = [da.asarray(a) for a in args]
    return [a.astype(np.float64) if a.dtype != np.float64 else a for a in args], lazy


def _is_dask(a):
    return hasattr(a, "dask") and hasattr(a, "chunks") and hasattr(a, "map_blocks")


_LOCAL = []   # the local cluster and client started for client=None, kept for later calls


def _client(dist, client):
    if client is not None:
        return client
    try:
        return dist.default_client()
    except ValueError:   # no client yet
        pass
    if not _LOCAL:
        cluster = dist.LocalCluster(processes=True, n_workers=os.cpu_count() or 1,
                                    threads_per_worker=1, dashboard_address=None)
        _LOCAL.extend([cluster, dist.Client(cluster)])
    return _LOCAL[1]


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------
class _Map:
    """One ``map_value_and_grad`` call: rounds of tasks, one tape per round."""

    def __init__(self, client, compiled, args, nums, lazy, chunk):
        self.client = client
        self.compiled = compiled
        self.nums = nums
        self.lazy = lazy
        self.token = uuid.uuid4().hex[:12]
        self.bsz = args[0].shape[0]
        self.sample_shapes = [tuple(a.shape[1:]) for a in args]
        if lazy:
            self.bounds, self.inputs = self._dask_chunks(args, chunk)
        else:
            self.bounds = _bounds(self.bsz, chunk if chunk is not None else
                                  self._default_chunk(args))
            self.inputs = [[a[lo:hi] for a in args] for lo, hi in self.bounds]
        self.out_shape = None
        self.n_args = len(args)
        self.local = {}   # chunk -> its latest result, gathered (NumPy inputs only)

    def _default_chunk(self, args):
        workers = max(1, len(self.client.scheduler_info()["workers"]))
        per_sample = max(1, sum(8 * math.prod(a.shape[1:]) for a in args))
        by_balance = math.ceil(self.bsz / (_TASKS_PER_WORKER * workers))
        return max(1, min(by_balance, _CHUNK_BYTES // per_sample))

    def _dask_chunks(self, args, chunk):
        """Every argument rechunked to the same blocks along the batch axis (one block
        across the others), computed and kept on the cluster: one future per block."""
        rows = chunk if chunk is not None else args[0].chunks[0]
        args = [a.rechunk({0: rows, **{k: -1 for k in range(1, a.ndim)}}) for a in args]
        sizes = args[0].chunks[0]
        starts = np.concatenate([[0], np.cumsum(sizes)]).tolist()
        bounds = list(zip(starts[:-1], starts[1:]))
        blocks = [a.to_delayed().reshape(-1).tolist() for a in args]
        futures = self.client.compute([b for per_arg in blocks for b in per_arg])
        k = len(bounds)
        inputs = [[futures[j * k + c] for j in range(len(args))] for c in range(k)]
        return bounds, inputs

    def _sample(self, b):
        """Sample b's arguments as tensors, requiring grad where a gradient is asked for."""
        c = next(c for c, (lo, hi) in enumerate(self.bounds) if lo <= b < hi)
        local = b - self.bounds[c][0]
        if self.lazy:
            rows = self.client.gather([self.client.submit(operator.getitem, f, local)
                                       for f in self.inputs[c]])
        else:
            rows = [a[local] for a in self.inputs[c]]
        return [Tensor._make(np.array(r), i in self.nums) for i, r in enumerate(rows)]

    def _tape(self, sample):
        """The tape ``compiled`` replays (or records) for ``sample``: a future of its file's
        bytes on the cluster; None where it has no replayable tape for it, or one whose
        output is not a single value."""
        out = self.compiled(*sample)
        if not isinstance(out, Tensor):
            raise TypeError("the function must return one tensor")
        if self.out_shape is None:
            self.out_shape = out._value.shape
        variant = _last_variant(self.compiled, sample)
        if variant is None or variant.outputs[0][0] is None or \
                variant.cols[4][variant.outputs[0][0]] != 1:
            return None
        raw = variant.to_bytes()
        # a task holding the bytes, not scattered data: if every worker holding it dies (Dask
        # also drops replicas it thinks redundant) the scheduler recomputes it from the
        # graph, where scattered data would be lost for good.  Each worker fetches it once,
        # from whichever has it; the same tape in a later map has the same key.
        with warnings.catch_warnings():
            # that is what the large-graph warning advises against for data sent once per
            # chunk; this is sent once per map (W3's tape is 8 MB)
            warnings.filterwarnings("ignore", message="Sending large graph",
                                    category=UserWarning)
            return self.client.submit(
                _tape_bytes, raw, key=f"tapegrad-tape-{hashlib.sha256(raw).hexdigest()[:32]}")

    def _submit(self, round_, chunks, tape, previous):
        """The replay tasks of ``chunks`` in this round, sent as few graphs as the
        large-graph limit allows (one message to the scheduler per task costs milliseconds);
        ``previous``: each chunk's result of the round before, or None."""
        futures, group, carried = [], [], 0
        for c in chunks:
            group.append(c)
            if not self.lazy:
                carried += sum(x.nbytes for x in self.inputs[c])
            if carried >= 2 * _CHUNK_BYTES or c == chunks[-1]:
                futures += self.client.map(
                    _replay_chunk, [tape] * len(group), [self.nums] * len(group),
                    [previous[c] if previous else None for c in group],
                    *[[self.inputs[c][j] for c in group] for j in range(self.n_args)],
                    key=[f"tapegrad-replay-{self.token}-{round_}-{c}" for c in group],
                    pure=False)
                group, carried = [], 0
        return futures

    def _summaries(self, chunks, futures):
        """(samples still pending, the first of them) per chunk.  NumPy results come back
        to the driver anyway and are kept; Dask ones stay on the cluster."""
        if self.lazy:
            return self.client.gather(self.client.map(_pending, futures, pure=False))
        results = self.client.gather(futures)
        self.local.update(zip(chunks, results))
        return [_pending(r) for r in results]

    def results(self):
        tape = self._tape(self._sample(0))
        if tape is None and self.out_shape and math.prod(self.out_shape) != 1:
            raise RuntimeError("per-sample gradients need a one-element output")
        if tape is None:
            reasons = "; ".join(r for r, _ in self.compiled.stats.eager_reasons) or \
                "its result is not computed from its arguments"
            raise ValueError("map_value_and_grad needs a function tapegrad.compile can replay; "
                             f"this one runs eagerly ({reasons})")
        chunks = list(range(len(self.bounds)))
        current = self._submit(0, chunks, tape, None)
        summary = self._summaries(chunks, current)
        replayed = self.bsz - sum(n for n, _ in summary)
        for round_ in range(1, _BATCH_VARIANTS):
            waiting = [c for c in chunks if summary[c][0]]
            if not waiting:
                break
            # the samples left took another branch: the tape of the first of them, as vmap
            first_chunk = waiting[0]
            b = self.bounds[first_chunk][0] + summary[first_chunk][1]
            tape = self._tape(self._sample(b))
            if tape is None:
                break
            trial = dict(zip(waiting, self._submit(round_, waiting, tape, current)))
            kept = {c: self.local.get(c) for c in waiting}
            new = dict(zip(waiting, self._summaries(waiting, [trial[c] for c in waiting])))
            if new[first_chunk][1] == summary[first_chunk][1]:
                # the tape picked for that sample does not replay it: no progress, and (as
                # vmap does) this round's results are dropped and the rest runs eagerly
                self.local.update(kept)
                break
            for c in waiting:
                replayed += summary[c][0] - new[c][0]
                current[c], summary[c] = trial[c], new[c]
        self.compiled.stats.replays += replayed
        current = self._eager_rest(current, summary)
        return self._collect(current)

    def _eager_rest(self, current, summary):
        """Samples no tape replayed: run eagerly on the driver, as vmap runs them."""
        for c, (n, _) in enumerate(summary):
            if not n:
                continue
            local = _pending_rows(self.local[c]) if not self.lazy else \
                self.client.submit(_pending_rows, current[c], pure=False).result()
            if self.lazy:
                rows = self.client.gather([self.client.submit(operator.getitem, f, local)
                                           for f in self.inputs[c]])
            else:
                rows = [a[local] for a in self.inputs[c]]
            tensors = [Tensor._make(r) for r in rows]
            values, grads = [], {i: [] for i in self.nums}
            for k in range(len(local)):
                v, g = _one(self.compiled, tensors, self.nums, True, k)
                values.append(v)
                for i in self.nums:
                    grads[i].append(g[i])
            patch = (local, np.array(values), tuple(np.array(grads[i]) for i in self.nums))
            if self.lazy:
                current[c] = self.client.submit(_patched, current[c], patch, pure=False)
            else:
                self.local[c] = _patched(self.local[c], patch)
        return current

    def _collect(self, current):
        if not self.lazy:
            parts = [self.local[c] for c in range(len(self.bounds))]
            values = np.concatenate([p[0] for p in parts])
            grads = [np.concatenate([p[1][j] for p in parts]) for j in range(len(self.nums))]
            return values, grads
        import dask.array as da
        out_shape = self.out_shape
        k = len(self.bounds)
        parts = [self.client.map(operator.getitem, current, [0] * k, pure=False)]
        parts += [self.client.map(_grad_of, current, [j] * k, pure=False)
                  for j in range(len(self.nums))]
        shapes = [out_shape] + [self.sample_shapes[i] for i in self.nums]
        arrays = []
        for futures, shape in zip(parts, shapes):
            blocks = []
            for (lo, hi), part in zip(self.bounds, futures):
                blocks.append(da.from_delayed(part, (hi - lo,) + shape, dtype=np.float64))
            arrays.append(da.concatenate(blocks))
        return arrays[0], arrays[1:]


def _bounds(n, chunk):
    if not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a positive number of samples, got {chunk!r}")
    return [(lo, min(n, lo + chunk)) for lo in range(0, n, chunk)]


# ---------------------------------------------------------------------------------------------
# Workers
# ---------------------------------------------------------------------------------------------
_TAPES = OrderedDict()   # SHA-256 of a tape's bytes -> LoadedTape, in this worker process
_TAPES_KEPT = 16
_TAPES_LOCK = threading.Lock()


# what this process did, for tests and curious users: how often it warmed numba's kernels
# and loaded a tape
worker_counts = {"warmed": 0, "tapes_loaded": 0}


def _worker_tape(raw):
    """The tape ``raw`` holds, loaded (and checked) once per worker process."""
    key = hashlib.sha256(raw).digest()
    with _TAPES_LOCK:
        tape = _TAPES.get(key)
        if tape is not None:
            _TAPES.move_to_end(key)
            return tape
    worker_counts["tapes_loaded"] += 1
    try:
        tape = load_tape(raw)
    except Exception as e:
        raise RuntimeError(f"tapegrad.distributed: the tape shipped to worker {_where()} "
                           f"failed to load: {e}") from e
    with _TAPES_LOCK:
        _TAPES[key] = tape
        while len(_TAPES) > _TAPES_KEPT:
            _TAPES.popitem(last=False)
    return tape


def _where():
    try:
        return _distributed.get_worker().address
    except (AttributeError, ValueError):
        return "(not a Dask worker)"


def _replay_chunk(raw, grad_args, previous, *inputs):
    """Replay a chunk over the tape ``raw``: every sample in the first round, else those
    ``previous`` (this chunk's result of the round before) left pending.  Returns
    ``(values, grads, status)``, status -1 for each sample some tape replayed."""
    tape = _worker_tape(raw)
    if previous is None:
        return tape.replay_batch(*inputs, grad_args=grad_args, parallel=False)
    values, grads, status = (np.array(previous[0]), [np.array(g) for g in previous[1]],
                             np.array(previous[2]))
    rows = np.flatnonzero(status != -1)
    v, g, s = tape.replay_batch(*[x[rows] for x in inputs], grad_args=grad_args,
                                parallel=False)
    done = s == -1
    values[rows[done]] = v[done]
    for full, part in zip(grads, g):
        full[rows[done]] = part[done]
    status[rows] = s
    return values, tuple(grads), status


def _tape_bytes(raw):
    return raw


def _pending(result):
    pending = np.flatnonzero(result[2] != -1)
    return int(pending.size), int(pending[0]) if pending.size else -1


def _pending_rows(result):
    return np.flatnonzero(result[2] != -1)


def _patched(result, patch):
    local, values, grads = patch
    out_values = np.array(result[0])
    out_values[local] = values.reshape((len(local),) + out_values.shape[1:])
    out_grads = []
    for full, part in zip(result[1], grads):
        full = np.array(full)
        full[local] = part
        out_grads.append(full)
    status = np.array(result[2])
    status[local] = -1
    return out_values, tuple(out_grads), status


def _grad_of(result, j):
    return result[1][j]


def _warm():
    """Load (or compile) the batch replay kernel into this process once."""
    from .replay import per_sample_value_and_grad
    from .tensor import Tensor as T
    per_sample_value_and_grad(lambda x: (x * x).sum())(T._make(np.ones((2, 2))))
    worker_counts["warmed"] += 1


_WARMED = set()   # addresses of the schedulers whose workers have the warming plugin


def _warm_workers(client):
    """Each worker, present or joining later, loads numba's kernels once when it starts,
    not in its first task (a worker plugin runs in every worker process)."""
    address = client.scheduler.address
    if address in _WARMED:
        return
    client.register_plugin(_WarmPlugin(), name="tapegrad-warm")
    _WARMED.add(address)


if _distributed is not None:
    class _WarmPlugin(_distributed.WorkerPlugin):
        async def setup(self, worker):
            # off the worker's event loop: a cold numba cache compiles for many seconds
            import asyncio
            await asyncio.get_running_loop().run_in_executor(None, _warm)


def is_available():
    """Whether PyTorch-style process groups (``init_process_group``, ``all_reduce``) are
    available: they are not -- this module spreads gradients over a Dask cluster instead.
    Programs that ask before using ``torch.distributed`` take their single-process path.

    Example:
        >>> tg.distributed.is_available()
        False
    """
    return False


def is_initialized():
    """Whether a default process group is initialised: never (see ``is_available``).

    Example:
        >>> tg.distributed.is_initialized()
        False
    """
    return False


__all__ = ["map_value_and_grad", "is_available", "is_initialized"]

from ._public import public_dir as _public_dir  # noqa: E402

# tab completion offers these, not the imports (worker_counts is a plain dict, described
# where it is defined)
__dir__ = _public_dir(globals(), ("worker_counts",))
