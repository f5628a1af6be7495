"""RC: what ``tapegrad.compile`` costs besides the replay itself.

Three tables, timed with the same interleaved rounds as the workloads (``bench.timing``):

* **guards** -- a compiled function with a data-dependent Python ``if``, called with inputs
  whose branch never flips, or flips every call (then the guard fails and another recorded
  variant replays, or -- with ``max_variants=1`` -- the call is recorded afresh), beside the
  same calls in eager mode;
* **tiny tapes** -- one op (``sin``) and two ops (``sin``, ``sum``, then ``backward()``) on a
  shape-(1,) tensor: the fixed cost of calling into compiled code, beside the same calls in
  eager tapegrad and PyTorch, and a bare ``@njit`` call with one array argument;
* **first calls** -- W1 and W5 through ``tapegrad.compile`` in a fresh process: call 1
  records the tape (an eager run under a trace), call 2 is the first replay (numba loads the
  replay kernels from its on-disk cache), and a later call builds the tape's generated code;
  beside them eager tapegrad's first call in a fresh
  process (which loads the backward kernels as well) and jax.jit's first call (trace + XLA
  compile) from the W1/W5 tables of the same run.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from bench.machine import REPO_DIR
from bench.peers import describe_error
from bench.progress import Progress
from bench.timing import Entry, call_batch, run_rounds, summarize

GUARD_WIDTH = 16   # elements of the guard function's input
GUARD_LAYERS = 4   # tanh layers before the branch: a failed guard has done this work


def _guard_fn(tg):
    def f(x, w):
        h = x
        for _ in range(GUARD_LAYERS):
            h = tg.tanh(h * w + 0.1)
        if x.sum() > 0:   # read after the layers: the guard sits at the end of the tape
            return (h * h).sum()
        return (h * 3.0).sum()
    return f


def _guard_entries(tg):
    rng = np.random.default_rng(7)
    base = np.abs(rng.normal(size=GUARD_WIDTH)) + 0.1
    xs = [tg.tensor(base, requires_grad=True), tg.tensor(-base, requires_grad=True)]
    w = tg.tensor(rng.normal(size=GUARD_WIDTH), requires_grad=True)
    fn = _guard_fn(tg)

    def caller(run, flips):
        state = [0]

        def call():
            x = xs[state[0]]
            if flips:
                state[0] ^= 1
            x.grad = None
            run(x, w).backward()
        return call

    return [
        ("compiled, branch never flips", caller(tg.compile(fn), False)),
        ("compiled, flips every call (guard fails, the other recorded variant replays)",
         caller(tg.compile(fn), True)),
        ("compiled with max_variants=1, flips every call (recorded afresh each call)",
         caller(tg.compile(fn, max_variants=1), True)),
        ("eager, flips every call", caller(fn, True)),
    ]


def _tiny_entries(tg, torch):
    entries = []
    x = tg.tensor([0.5], requires_grad=True)
    one = tg.compile(lambda x: tg.sin(x))
    two = tg.compile(lambda x: tg.sin(x).sum())

    def fwd_bwd(run):
        def call():
            x.grad = None
            run(x).backward()
        return call

    entries.append(("tapegrad_compiled", "run(x)", lambda: one(x)))
    entries.append(("tapegrad_compiled", "run(x).backward()", fwd_bwd(two)))
    entries.append(("tapegrad", "run(x)", lambda: tg.sin(x)))
    entries.append(("tapegrad", "run(x).backward()", fwd_bwd(lambda x: tg.sin(x).sum())))
    if torch is not None:
        tx = torch.tensor([0.5], dtype=torch.float64, requires_grad=True)

        def torch_fb():
            tx.grad = None
            torch.sin(tx).sum().backward()
        entries.append(("torch", "run(x)", lambda: torch.sin(tx)))
        entries.append(("torch", "run(x).backward()", torch_fb))
    import numba

    @numba.njit(nogil=True)
    def bare(v, out):
        out[0] = np.sin(v[0])
    v, out = np.array([0.5]), np.empty(1)
    bare(v, out)
    entries.append(("bare @njit call", "run(x)", lambda: bare(v, out)))
    return entries


_CHILD = """
import json, sys, time
from bench.peers import tapegrad_peer as P
from bench.workloads import make_inputs
setup = {("W1", "compiled"): P._compiled_w1, ("W5", "compiled"): P._compiled_w5,
         ("W1", "eager"): P._setup_w1, ("W5", "eager"): P._setup_w5}[sys.argv[1], sys.argv[2]]
call = setup(make_inputs(sys.argv[1]))
run = next((c.cell_contents for c in call.__closure__ or ()
            if type(c.cell_contents).__name__ == "Compiled"), None)
times, generated_on = [], None
for i in range(6):
    before = run.stats.generated if run is not None else 0
    t = time.perf_counter(); call(); times.append(time.perf_counter() - t)
    if run is not None and run.stats.generated > before:
        generated_on = i
print(json.dumps({"times": times, "generated_on": generated_on}))
"""


def _first_calls_fresh(name: str, mode: str) -> dict:
    """The first six calls of ``name`` (``mode``: compiled or eager) in a fresh interpreter:
    call 1 records (compiled) or runs eagerly, call 2 replays or runs again, and for a hot
    scalar tape a later compiled call builds its generated code."""
    src = os.path.join(REPO_DIR, "src")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (REPO_DIR, src, os.environ.get("PYTHONPATH")) if p))
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, name, mode], capture_output=True,
                              text=True, env=env, cwd=REPO_DIR, timeout=600)
        if done.returncode != 0:
            return {"error": done.stderr.strip().splitlines()[-1][:300]}
        got = json.loads(done.stdout.strip().splitlines()[-1])
        times, on = got["times"], got["generated_on"]
        # the call that built the generated code: numba compiles it, or loads it from its
        # cache when this tape was generated before (as in the W1/W5 tables of this run)
        return {"first_s": times[0], "second_s": times[1],
                "generating_call": None if on is None else on + 1,
                "generate_s": None if on is None else times[on]}
    except Exception as exc:
        return {"error": describe_error(exc)}


def measure_replay_costs(peers, config, results: dict, progress: bool = True) -> dict:
    """The three RC tables; ``results`` are the workload results of this run (for the
    steady W1/W5 times and jax.jit's first calls)."""
    names = {p.name for p in peers}
    out = {"guards": {}, "tiny": {}, "first_calls": {}}
    if "tapegrad_compiled" not in names:
        out["note"] = "tapegrad_compiled not selected"
        return out
    from bench.peers import tapegrad_peer
    tg = tapegrad_peer.tg
    torch = None
    if "torch" in names:
        import torch
    with Progress("RC", total=2, enabled=progress) as bar:
        guard = _guard_entries(tg)
        tiny = _tiny_entries(tg, torch)
        entries = []
        for label, call in guard:
            call()
            call()   # both branches recorded before timing
            entries.append(Entry(f"guard/{label}", call_batch(call)))
        for lib, what, call in tiny:
            call()
            call()
            entries.append(Entry(f"tiny/{lib}/{what}", call_batch(call)))
        bar.update()
        bar.status("timed rounds")
        run_rounds(entries, config, bar)
    for entry in entries:
        kind, _, rest = entry.key.partition("/")
        out["guards" if kind == "guard" else "tiny"][rest] = summarize(entry.samples["call"])
    for name in ("W1", "W5"):
        # eager's first call in a fresh process loads the backward kernels from numba's cache
        # too: it tells that one-off cost apart from the recording
        row = {"tapegrad_compiled": _first_calls_fresh(name, "compiled"),
               "tapegrad": _first_calls_fresh(name, "eager")}
        res = results.get(name)
        if res is not None:
            comp = res["rows"].get("tapegrad_compiled", {})
            row["tapegrad_compiled"]["steady_s"] = comp.get("median_s")
            jax = res["rows"].get("jax_jit")
            if jax is not None:
                row["jax_jit"] = {"first_call_s": jax.get("first_call_s"),
                                  "steady_s": jax.get("median_s"),
                                  "status": jax["status"], "note": jax.get("note", "")}
        out["first_calls"][name] = row
    return out
