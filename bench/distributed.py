"""Parameter sweeps on a local Dask cluster: ``python -m bench.distributed``.

W5's model (Lotka-Volterra, explicit Euler, 1000 steps; ``workloads.py``) with its four
parameters drawn per sample within 20% of W5's, value and gradient per sample, timed as

* ``map_value_and_grad`` on a local cluster of 1 and of 2 single-threaded worker processes
  (the cluster started and warmed by a small sweep before timing, whose time, recording
  included, is reported beside);
* ``per_sample_value_and_grad`` in this process, on one thread and on numba's threads;
* a Python loop over a subset of samples, eager and ``tapegrad.compile``d, extrapolated;

and the per-task overhead: the same sweep cut into chunks of different sizes, and a map of
a one-op function with one sample per task.  The distributed results are checked against
``per_sample_value_and_grad`` bit for bit before anything is reported.  Each row is timed
``--repeat`` times, interleaved with the others, and the fastest run is reported: on a
shared machine the slower runs measure the neighbours.

Not part of ``python -m bench --quick``: a 10^5 sweep takes tens of seconds per row.
"""
import os

# one thread per process everywhere (workers inherit the environment), before NumPy loads;
# numba's threads only where a row asks for them (numba.set_num_threads)
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_name] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from bench.machine import REPO_DIR  # noqa: E402
from bench.workloads import W5_DT, W5_PARAMS, W5_TARGET, W5_U0, W5_V0  # noqa: E402

sys.path.insert(0, os.path.join(REPO_DIR, "src"))
import tapegrad as tg  # noqa: E402
from tapegrad.distributed import map_value_and_grad  # noqa: E402

STEPS = 1000


def lotka_volterra(a, b, c, d):
    u, v = tg.tensor(W5_U0), tg.tensor(W5_V0)
    for _ in range(STEPS):
        uv = u * v
        du = a * u - b * uv
        dv = d * uv - c * v
        u = u + W5_DT * du
        v = v + W5_DT * dv
    return (u - W5_TARGET[0]) ** 2 + (v - W5_TARGET[1]) ** 2


def parameter_sets(n, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(p * rng.uniform(0.8, 1.2, n) for p in W5_PARAMS)


ARGNUMS = (0, 1, 2, 3)


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def local_sweep(compiled, batch, threads):
    import numba
    numba.set_num_threads(threads)
    run = tg.per_sample_value_and_grad(compiled, argnums=ARGNUMS, parallel=threads > 1)
    seconds, (v, g) = timed(lambda: run(*[tg.tensor(p) for p in batch]))
    return seconds, (v.numpy(), [x.numpy() for x in g])


def loop_per_sample(fn, batch, k):
    """Seconds per sample of value and gradient in a Python loop over k samples."""
    def run(calls=k):
        for j in range(calls):
            leaves = [tg.tensor(float(p[j % k]), requires_grad=True) for p in batch]
            fn(*leaves).backward()
    if isinstance(fn, tg.replay.Compiled):
        run(8)   # records, and builds generated code on the fourth call
    seconds, _ = timed(run)
    return seconds / k


def same_bits(got, want):
    v, g = got
    return np.array_equal(v, want[0]) and all(np.array_equal(a, b) for a, b in zip(g, want[1]))


class Cluster:
    """A local cluster of ``workers`` single-threaded processes, warmed: numba's kernels
    loaded and W5 recorded by one small map, whose time is kept (``first_map_seconds``)."""

    def __init__(self, workers):
        from distributed import Client, LocalCluster
        self.workers = workers
        self.cluster = LocalCluster(processes=True, n_workers=workers, threads_per_worker=1,
                                    host="127.0.0.1", dashboard_address=None)
        self.client = Client(self.cluster, set_as_default=False)
        self.compiled = tg.compile(lotka_volterra)
        warm = parameter_sets(4 * workers, seed=99)
        self.first_map_seconds, _ = timed(lambda: self.sweep(warm))

    def sweep(self, batch, chunk=None):
        return map_value_and_grad(self.compiled, batch, argnums=ARGNUMS, client=self.client,
                                  chunk=chunk)

    def close(self):
        self.client.close()
        self.cluster.close()


def overhead_row(cluster, batch, chunk, compiled=None, model="W5"):
    """A sweep cut into chunks of ``chunk`` samples: its wall time, the time the workers'
    tasks computed (Dask's task stream), and what is left per task."""
    from distributed import get_task_stream
    client, workers = cluster.client, cluster.workers
    compiled = compiled or cluster.compiled
    n = len(batch[0])
    with get_task_stream(client) as stream:
        seconds, _ = timed(lambda: map_value_and_grad(
            compiled, batch, argnums=tuple(range(len(batch))), client=client, chunk=chunk))
    computed = sum(s["stop"] - s["start"] for task in stream.data
                   for s in task["startstops"] if s["action"] == "compute")
    tasks = len(stream.data)
    row = {"model": model, "n": n, "workers": workers, "chunk": chunk, "tasks": tasks,
           "seconds": seconds, "computed_seconds": computed,
           # workers left idle (fewer tasks than workers) are not overhead
           "overhead_per_task": (seconds * min(workers, tasks) - computed) / tasks}
    print(f"  {workers} worker(s), {model}, n={n}, chunk={chunk}: {seconds:.2f} s, tasks "
          f"computed {computed:.2f} s, {row['overhead_per_task'] * 1e3:.2f} ms per task "
          "besides", flush=True)
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.distributed", description=__doc__)
    parser.add_argument("--sizes", default="10000,100000",
                        help="batch sizes, comma-separated (default: %(default)s)")
    parser.add_argument("--workers", default="1,2", help="local cluster sizes")
    parser.add_argument("--repeat", type=int, default=3,
                        help="timed runs of each row, interleaved; the fastest is reported "
                             "(default: %(default)s)")
    parser.add_argument("--loop-samples", type=int, default=20,
                        help="samples timed in the Python loops (default: %(default)s)")
    parser.add_argument("--overhead-samples", type=int, default=10000,
                        help="samples of the chunk-size sweep (default: %(default)s)")
    parser.add_argument("--json", default=os.path.join(REPO_DIR, "bench", "results",
                                                       "distributed.json"))
    args = parser.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    workers = [int(w) for w in args.workers.split(",")]
    threads = sorted({1, os.cpu_count() or 1})
    compiled = tg.compile(lotka_volterra)
    local_sweep(compiled, parameter_sets(8), 1)   # record, load the kernels
    clusters = [Cluster(w) for w in workers]
    report = {"steps": STEPS, "cpus": os.cpu_count(), "repeat": args.repeat,
              "load_before": os.getloadavg(), "local": [], "cluster": [], "overhead": [],
              "first_map_seconds": {c.workers: c.first_map_seconds for c in clusters}}
    try:
        for n in sizes:
            batch = parameter_sets(n)
            times = {("vmap", t): [] for t in threads}
            times.update({("map", c.workers): [] for c in clusters})
            reference = None
            for _ in range(args.repeat):
                for t in threads:
                    seconds, out = local_sweep(compiled, batch, t)
                    reference = reference or out
                    if not same_bits(out, reference):
                        raise SystemExit("numba's threads changed the results")
                    times["vmap", t].append(seconds)
                for c in clusters:
                    seconds, out = timed(lambda: c.sweep(batch))
                    if not same_bits(out, reference):
                        raise SystemExit(f"distributed results differ from vmap's at n={n}")
                    times["map", c.workers].append(seconds)
            for (kind, k), runs in times.items():
                row = {"n": n, "seconds": min(runs), "runs": runs}
                if kind == "vmap":
                    report["local"].append(dict(row, threads=k))
                else:
                    report["cluster"].append(dict(row, workers=k))
                print(f"n={n}, {kind} {k}: fastest {min(runs):.2f} s of "
                      f"{', '.join(f'{r:.2f}' for r in runs)}", flush=True)
        small = parameter_sets(args.loop_samples, seed=3)
        report["eager_loop_per_sample"] = loop_per_sample(lotka_volterra, small,
                                                          args.loop_samples)
        report["compiled_loop_per_sample"] = loop_per_sample(tg.compile(lotka_volterra),
                                                             small, args.loop_samples)
        print(f"eager loop: {report['eager_loop_per_sample'] * 1e3:.2f} ms per sample; "
              f"compiled loop: {report['compiled_loop_per_sample'] * 1e6:.1f} us per sample",
              flush=True)
        biggest = clusters[-1]
        for c in clusters[:-1]:
            c.close()   # idle clusters' heartbeats would count as overhead below
        clusters = [biggest]
        batch = parameter_sets(args.overhead_samples, seed=1)
        for chunk in (10, 100, 1000):
            report["overhead"].append(overhead_row(biggest, batch, chunk))
        tiny = tg.compile(lambda x: (x * x).sum())
        xs = np.random.default_rng(2).normal(size=(400, 2))
        map_value_and_grad(tiny, xs, client=biggest.client, chunk=1)
        report["overhead"].append(overhead_row(biggest, (xs,), 1, tiny, "(x * x).sum()"))
    finally:
        for c in clusters:
            c.close()
    report["load_after"] = os.getloadavg()
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as fh:
        json.dump(report, fh, indent=1)
    print(markdown(report))


def markdown(report):
    lines = ["| samples | vmap, 1 thread | vmap, numba threads | "
             + " | ".join(f"{w} worker(s)" for w in sorted({r['workers'] for r in
                                                           report['cluster']}))
             + " | eager loop (extrapolated) | compiled loop (extrapolated) |",
             "|---" * (5 + len({r['workers'] for r in report['cluster']})) + "|"]
    for n in sorted({r["n"] for r in report["local"]}):
        local = {r["threads"]: r["seconds"] for r in report["local"] if r["n"] == n}
        cells = [f"{n:,}", f"{local[1]:.2f} s", f"{local[max(local)]:.2f} s"]
        for r in sorted((r for r in report["cluster"] if r["n"] == n),
                        key=lambda r: r["workers"]):
            cells.append(f"{r['seconds']:.2f} s")
        cells.append(f"{report['eager_loop_per_sample'] * n:.0f} s")
        cells.append(f"{report['compiled_loop_per_sample'] * n:.2f} s")
        lines.append("| " + " | ".join(cells) + " |")
    for r in report["overhead"]:
        lines.append(f"- {r['workers']} worker(s), {r['model']}, {r['n']} samples in "
                     f"{r['tasks']} tasks (chunk {r['chunk']}): {r['seconds']:.2f} s, of "
                     f"which the tasks computed {r['computed_seconds']:.2f} s; "
                     f"{r['overhead_per_task'] * 1e3:.2f} ms per task besides")
    lines.append(f"- first map on a fresh cluster (recording, tape to the workers): "
                 + ", ".join(f"{w} worker(s) {t:.2f} s"
                             for w, t in report["first_map_seconds"].items()))
    lines.append(f"- load average before / after: {report['load_before'][0]:.1f} / "
                 f"{report['load_after'][0]:.1f} on {report['cpus']} CPUs")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
