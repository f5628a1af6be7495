"""Entry point of the benchmark suite: ``python -m bench`` or ``python bench/run.py``.

Only the standard library is imported at module level: thread counts must be fixed in
the environment, and the process pinned to one CPU, before NumPy, numba, torch or XLA load
and size their thread pools (they read these variables once, at load time).
"""
import os

# --- one thread everywhere, set before anything can import NumPy -----------------------
ONE_THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                  "NUMBA_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
for _name in ONE_THREAD_ENV:
    os.environ[_name] = "1"
# XLA: no multi-threaded Eigen, one intra-op thread; keep any flags the user already set.
os.environ["XLA_FLAGS"] = " ".join(filter(None, (
    os.environ.get("XLA_FLAGS"),
    "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")))
os.environ.setdefault("JAX_PLATFORMS", "cpu")
REPORTED_ENV = ONE_THREAD_ENV + ("XLA_FLAGS", "JAX_PLATFORMS", "OPENBLAS_CORETYPE",
                                 "OPENBLAS_L2_SIZE", "NUMBA_CACHE_DIR")

import argparse  # noqa: E402
import gc  # noqa: E402
import sys  # noqa: E402

if __package__ in (None, ""):
    # Run as a script (python bench/run.py): Python put bench/ itself first on sys.path,
    # where our check.py, timing.py, ... could shadow top-level modules of other packages.
    # Put the repository root there instead, so everything is imported as bench.*.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.path.insert(0, os.path.dirname(_here))

from bench.machine import REPO_DIR, load_average, pin_to_one_cpu  # noqa: E402  (stdlib only)

IN_PROCESS = ("W1", "W2", "W3", "W4", "W5")
# W8 (bench/w8.py) and ST (bench/structural.py) have scripts of their own and fixed rows of
# their own (their peers are not --peers'); the full run runs them too, so that one report
# holds every workload the README quotes
OWN_ROWS = ("W8", "ST")
ALL_WORKLOADS = IN_PROCESS + OWN_ROWS + ("W6", "RC")
SCALING_WORKLOADS = ("W1", "W4", "W5")
RESULTS_DIR = os.path.join(REPO_DIR, "bench", "results")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Time tapegrad against peer autodiff libraries on workloads W1-W6.")
    parser.add_argument("--quick", action="store_true",
                        help="few rounds and short budgets, 3 startup runs, and the few "
                             "multi-second cases left out: a minute or two")
    parser.add_argument("--workloads", default=",".join(ALL_WORKLOADS),
                        help="comma-separated subset of W1..W6, W8, ST (structural ops) and "
                             "RC, the costs of tapegrad.compile besides replay (default: all)")
    parser.add_argument("--peers", default=None,
                        help="comma-separated subset of libraries, e.g. tapegrad,torch,floor "
                             "(default: all that import)")
    parser.add_argument("--scaling", action="store_true",
                        help="also sweep sizes: W1 chain length, W4 elements, W5 steps "
                             "(those of them selected by --workloads)")
    parser.add_argument("--json", default=os.path.join(RESULTS_DIR, "latest.json"),
                        help="where to write the JSON results (default: %(default)s)")
    parser.add_argument("--markdown", default=os.path.join(RESULTS_DIR, "latest.md"),
                        help="where to write the markdown report (default: %(default)s)")
    parser.add_argument("--cpu", type=int, default=None,
                        help="CPU to pin to (default: the last one available)")
    parser.add_argument("--startup-runs", type=int, default=None,
                        help="timed runs per W6 case (default: 5, or 3 with --quick)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    args.workloads = [w.strip().upper() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in args.workloads if w not in ALL_WORKLOADS]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; choose from {list(ALL_WORKLOADS)}")
    args.peers = {p.strip() for p in args.peers.split(",")} if args.peers else None
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    pinned = pin_to_one_cpu(args.cpu)  # before any library starts a thread
    load_at_start = load_average()

    # Heavy imports only now, after the environment and the pinning are in place.
    from bench import check, report
    from bench.machine import machine_info
    from bench.measure import measure_workload
    from bench.peers import load_peers
    from bench.progress import log
    from bench.scaling import run_scaling
    from bench.startup import measure_startup
    from bench.timing import TimingConfig

    try:  # belt and braces: cap any BLAS/OpenMP pool that ignored the variables
        from threadpoolctl import threadpool_limits
        threadpool_limits(1)
    except ImportError:
        pass

    peers, skipped = load_peers(args.peers)
    if args.peers:
        known = {p.name for p in peers} | set(skipped)
        for name in sorted(args.peers - known - {n.split("_")[0] for n in known}):
            log(f"note: no peer called {name!r}")
    for name, reason in skipped.items():
        log(f"note: peer {name!r} skipped: {reason}")
    if not peers:
        log("no peer library could be imported; nothing to measure")
        return 2
    progress = not args.no_progress
    config = TimingConfig.quick() if args.quick else TimingConfig.full()

    results = {}
    for name in (w for w in IN_PROCESS if w in args.workloads):
        results[name] = measure_workload(name, peers, config, quick=args.quick, progress=progress)
        gc.collect()  # let the last workload's graphs and buffers go before the next
    sections, own_rows = [], {}
    if "W8" in args.workloads:
        from bench import w8
        # (its budgets per size are a sweep's: eight sizes and variants of five rows each)
        own_rows["W8"] = w8.measure(config if args.quick else TimingConfig.sweep())
        sections += ["## W8: mid-size vectorised eager code (`python -m bench.w8`)", ""]
        for variant in w8.VARIANTS:
            sections += [w8.render(variant, own_rows["W8"][variant]), ""]
        gc.collect()
    if "ST" in args.workloads:
        from bench import structural
        own_rows["ST"] = structural.run(config if args.quick else TimingConfig.sweep())
        sections += ["## ST: structural ops (`python -m bench.structural`)", "",
                     structural.render(own_rows["ST"]), ""]
        gc.collect()
    startup = None
    if "W6" in args.workloads:
        runs = args.startup_runs or (3 if args.quick else 5)
        startup = measure_startup(peers, runs, quick=args.quick, progress=progress)
    replay_costs = None
    if "RC" in args.workloads:
        from bench.replay_costs import measure_replay_costs
        replay_costs = measure_replay_costs(peers, config, results, progress=progress)
    scaling = None
    if args.scaling:
        swept = tuple(w for w in SCALING_WORKLOADS if w in args.workloads)
        sweep_config = config if args.quick else TimingConfig.sweep()
        scaling = run_scaling(peers, sweep_config, quick=args.quick, progress=progress,
                              workloads=swept, cap_s=5.0 if args.quick else 15.0)

    versions = {}
    for peer in peers:
        versions.update(peer.versions)
    import numpy
    versions = {"numpy": numpy.__version__, **versions}
    info = machine_info(pinned, REPORTED_ENV, versions, load_at_start)
    run = {"mode": "quick" if args.quick else "full", "skipped_peers": skipped,
           "peer_names": [p.name for p in peers], "tolerance": check.TOLERANCE,
           "timing": vars(config), "argv": sys.argv[1:]}
    text = report.render_markdown(info, run, results, startup, scaling, replay_costs,
                                  sections)
    print(text)
    report.write_text(args.markdown, text)
    report.write_json(args.json, {
        "machine": info, "run": run,
        "peers": {p.name: {"description": p.description, "versions": p.versions} for p in peers},
        "workloads": results, "startup": startup, "scaling": scaling,
        "replay_costs": replay_costs,
        "W8": {v: {str(n): rows for n, rows in table.items()}
               for v, table in own_rows.get("W8", {}).items()},
        "ST": own_rows.get("ST", {})})
    log(f"wrote {args.markdown} and {args.json}")

    invalid = _invalid_rows(results, startup, scaling)
    if invalid:
        log("!!! GRADIENT MISMATCH / INVALID: " + ", ".join(invalid))
        return 1
    return 0


def _invalid_rows(results, startup, scaling) -> list[str]:
    """``W2/autograd``-style labels of every row whose result disagreed."""
    found = [f"{name}/{peer}" for name, res in results.items()
             for peer, row in res["rows"].items() if row["status"] == "invalid"]
    if startup:
        found += [f"W6/{case}" for case, row in startup["rows"].items()
                  if row["status"] == "invalid"]
    for name, points in (scaling or {}).items():
        found += [f"{name}@{pt['size']}/{peer}" for pt in points
                  for peer, row in pt["rows"].items() if row["status"] == "invalid"]
    return found


if __name__ == "__main__":
    raise SystemExit(main())
