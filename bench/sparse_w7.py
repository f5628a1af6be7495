"""W7: sparse derivatives -- the 2-D Bratu residual's Jacobian, the chained Rosenbrock's
Hessian (workload text: shared/bench/WORKLOADS.md, "W7").

Per size, one table row per library:

* **tapegrad sparse** -- ``tapegrad.sparse_jacobian`` / ``sparse_hessian``.  Its first call on a
  fresh function is split into recording, pattern detection and colouring (the plan's own
  timers) and reported as "first call"; the timed calls afterwards replay the compiled tape
  with the plan kept ("per call", the CSR matrix assembled included).
* **tapegrad dense** -- ``tapegrad.jacobian`` / ``hessian`` (only where the dense matrix is
  under ``DENSE_LIMIT`` entries).
* **casadi SX** -- ``casadi.jacobian`` / ``hessian`` of an SX expression (CasADi's own sparsity
  detection and colouring happen while building; "first call" is building the expression and
  the Function), evaluated by its virtual machine; it returns a ``casadi.DM``.
* **casadi SX, then .sparse()** -- the same, with each call's DM converted to the
  ``scipy.sparse`` matrix SciPy's solvers take (what a tapegrad call returns).
* **jax dense** -- ``jax.jit(jax.jacfwd)`` / ``jax.jit(jax.hessian)`` (under ``DENSE_LIMIT``).
* **jax compressed** -- JAX with tapegrad's colouring by hand: ``jit(vmap(jvp))`` over the
  colour seeds (``jvp`` of ``grad`` for the Hessian), then the same CSR assembly.

Every library's matrix is checked against tapegrad sparse (relative 1e-8) before timing.
Timing follows bench/timing.py: interleaved rounds, one pinned CPU, one thread, median and
min per call.  CasADi and JAX are optional: missing ones are reported as not installed.

Run: ``python -m bench.sparse_w7 [--quick] [--json PATH]``.
"""
from __future__ import annotations

import json
import os
import sys
import time

from bench.machine import REPO_DIR, one_thread_everywhere, pin_to_one_cpu  # noqa: E402

one_thread_everywhere()

PINNED = pin_to_one_cpu()
sys.path.insert(0, os.path.join(REPO_DIR, "src"))

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

from bench.timing import (Entry, call_batch, run_rounds, script_arguments,  # noqa: E402
                          summarize)

BRATU_SIZES = (30, 100, 300)
ROSENBROCK_SIZES = (10 ** 3, 10 ** 4, 10 ** 5)
BRATU_LAMBDA = 6.0
DENSE_LIMIT = 2_000_000   # entries of a dense matrix worth computing (16 MB)


def bratu_point(n):
    grid = np.arange(1, n + 1) / (n + 1)
    return (0.1 * np.outer(np.sin(np.pi * grid), np.sin(np.pi * grid))).reshape(-1)


def rosenbrock_point(n):
    x = np.full(n, 1.2)
    x[::2] = -1.2
    return x


def bratu_tapegrad(tg, n):
    h2 = 1.0 / (n + 1) ** 2

    def residual(u):
        grid = u.reshape(n, n)
        rows, cols = tg.zeros(1, n), tg.zeros(n + 2, 1)
        padded = tg.cat([cols, tg.cat([rows, grid, rows], 0), cols], 1)
        neighbours = (padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2]
                      + padded[1:-1, 2:])
        return ((4.0 * grid - neighbours) / h2 - BRATU_LAMBDA * grid.exp()).reshape(-1)
    return residual


def rosenbrock_tapegrad(v):
    return (100.0 * (v[1:] - v[:-1] ** 2) ** 2 + (1.0 - v[:-1]) ** 2).sum()


def _bratu_array(xp, n):
    """The residual written for a NumPy-like module (jax.numpy)."""
    h2 = 1.0 / (n + 1) ** 2

    def residual(u):
        grid = u.reshape(n, n)
        padded = xp.pad(grid, 1)
        neighbours = (padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2]
                      + padded[1:-1, 2:])
        return ((4.0 * grid - neighbours) / h2 - BRATU_LAMBDA * xp.exp(grid)).reshape(-1)
    return residual


def _rosenbrock_array(xp):
    return lambda v: xp.sum(100.0 * (v[1:] - v[:-1] ** 2) ** 2 + (1.0 - v[:-1]) ** 2)


# ---------------------------------------------------------------------------------------------
# the libraries: each returns (first-call seconds, extra facts, a no-argument call that
# returns the matrix as something scipy.sparse or NumPy can compare)
# ---------------------------------------------------------------------------------------------
def tapegrad_sparse(problem, n, x):
    import tapegrad as tg
    fn = bratu_tapegrad(tg, n) if problem == "bratu" else rosenbrock_tapegrad
    transform = tg.sparse_jacobian if problem == "bratu" else tg.sparse_hessian
    derivative = transform(fn)
    t0 = time.perf_counter()
    derivative(x)
    first = time.perf_counter() - t0
    plan = derivative.last_plan
    facts = {"pattern_s": plan.pattern_seconds, "colouring_s": plan.colouring_seconds,
             "colours": plan.n_colours, "mode": plan.mode, "nnz": int(plan.indices.size)}
    return first, facts, lambda: derivative(x), plan


def tapegrad_dense(problem, n, x):
    import tapegrad as tg
    fn = bratu_tapegrad(tg, n) if problem == "bratu" else rosenbrock_tapegrad
    transform = tg.jacobian(fn) if problem == "bratu" else tg.hessian(fn)
    xt = tg.tensor(x)
    t0 = time.perf_counter()
    transform(xt)
    return time.perf_counter() - t0, {}, lambda: transform(xt).numpy(), None


def casadi_sx(problem, n, x, to_scipy=False):
    """CasADi's Function built from SX; with ``to_scipy`` each timed call also converts the
    result (a casadi.DM) to the scipy.sparse matrix SciPy's solvers take, as tapegrad's
    calls return."""
    import casadi as ca
    t0 = time.perf_counter()
    if problem == "bratu":
        u = ca.SX.sym("u", n * n)
        # casadi reshapes column-major: this grid is the transpose of the row-major one,
        # and the stencil is symmetric under transposition, so flattening back matches
        grid = ca.reshape(u, n, n)
        zr, zc = ca.SX.zeros(1, n), ca.SX.zeros(n + 2, 1)
        padded = ca.horzcat(zc, ca.vertcat(zr, grid, zr), zc)
        neighbours = (padded[0:n, 1:n + 1] + padded[2:n + 2, 1:n + 1] + padded[1:n + 1, 0:n]
                      + padded[1:n + 1, 2:n + 2])
        h2 = 1.0 / (n + 1) ** 2
        res = ca.reshape((4.0 * grid - neighbours) / h2 - BRATU_LAMBDA * ca.exp(grid),
                         n * n, 1)
        fn = ca.Function("J", [u], [ca.jacobian(res, u)])
    else:
        v = ca.SX.sym("x", n)
        f = ca.sum1(100.0 * (v[1:] - v[:-1] ** 2) ** 2 + (1.0 - v[:-1]) ** 2)
        fn = ca.Function("H", [v], [ca.hessian(f, v)[0]])
    fn(x)
    first = time.perf_counter() - t0

    def to_scipy_matrix():
        m = fn(x)
        return m.sparse() if hasattr(m, "sparse") else m

    return (first, {"nnz": int(fn.sparsity_out(0).nnz())},
            (lambda: fn(x).sparse()) if to_scipy else (lambda: fn(x)), to_scipy_matrix)


def jax_dense(problem, n, x):
    import jax
    import jax.numpy as jnp
    fn = _bratu_array(jnp, n) if problem == "bratu" else _rosenbrock_array(jnp)
    d = jax.jit(jax.jacfwd(fn) if problem == "bratu" else jax.hessian(fn))
    xj = jnp.asarray(x)
    t0 = time.perf_counter()
    d(xj).block_until_ready()
    return time.perf_counter() - t0, {}, lambda: np.asarray(d(xj).block_until_ready()), None


def jax_compressed(problem, n, x, plan):
    import jax
    import jax.numpy as jnp
    fn = _bratu_array(jnp, n) if problem == "bratu" else _rosenbrock_array(jnp)
    seeds = jnp.asarray(plan.seeds)
    if problem == "bratu":
        if plan.mode != "forward":
            raise RuntimeError("the hand-written JAX peer colours columns only")
        one = lambda u, s: jax.jvp(fn, (u,), (s,))[1]   # noqa: E731
    else:
        grad = jax.grad(fn)
        one = lambda u, s: jax.jvp(grad, (u,), (s,))[1]   # noqa: E731
    products = jax.jit(jax.vmap(one, in_axes=(None, 0)))
    xj = jnp.asarray(x)

    def call():
        return plan.assemble(np.asarray(products(xj, seeds).block_until_ready()))
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0, {"colours": plan.n_colours}, call, None


def _as_dense(m):
    if sp.issparse(m):
        return m.toarray()
    if hasattr(m, "full"):
        return np.asarray(m.full())
    return np.asarray(m)


def _agrees(got, want):
    g = got.tocsr() if sp.issparse(got) else None
    if g is not None and sp.issparse(want):
        diff = abs(g - want).max()
        return diff <= 1e-8 * max(abs(want).max(), 1.0)
    got, want = _as_dense(got), _as_dense(want)
    return np.allclose(got, want, rtol=1e-8, atol=1e-8 * max(np.abs(want).max(), 1.0))


def run_size(problem, n, config):
    x = bratu_point(n) if problem == "bratu" else rosenbrock_point(n)
    size = n * n if problem == "bratu" else n
    rows, entries = [], []
    first, facts, call, plan = tapegrad_sparse(problem, n, x)
    reference = call()
    rows.append(("tapegrad sparse", first, facts))
    entries.append(Entry("tapegrad sparse", call_batch(call)))
    peers = []
    if size * size <= DENSE_LIMIT:
        peers.append(("tapegrad dense", lambda: tapegrad_dense(problem, n, x)))
        peers.append(("jax dense", lambda: jax_dense(problem, n, x)))
    else:
        rows.append(("tapegrad dense", None, {"note": f"dense {size}x{size} not computed"}))
        rows.append(("jax dense", None, {"note": f"dense {size}x{size} not computed"}))
    peers.append(("casadi SX", lambda: casadi_sx(problem, n, x)))
    peers.append(("casadi SX, then .sparse()", lambda: casadi_sx(problem, n, x, True)))
    peers.append(("jax compressed", lambda: jax_compressed(problem, n, x, plan)))
    for name, make in peers:
        try:
            first, facts, call, check = make()
            got = (check or call)()
            if not _agrees(got, reference):
                rows.append((name, None, {"note": "INVALID: disagrees with tapegrad sparse"}))
                continue
        except ImportError as exc:
            rows.append((name, None, {"note": f"not installed ({exc.name})"}))
            continue
        except Exception as exc:   # a peer's failure is a row of the report, not a crash
            rows.append((name, None, {"note": f"error: {type(exc).__name__}: {exc}"[:120]}))
            continue
        rows.append((name, first, facts))
        entries.append(Entry(name, call_batch(call)))
    run_rounds(entries, config)
    timed = {e.key: summarize(e.samples["call"]) for e in entries}
    return [{"library": name, "first_s": first, **facts, **timed.get(name, {})}
            for name, first, facts in rows]


def _ms(s):
    return "" if s is None else f"{s * 1e3:.3g}"


def render(results):
    lines = ["| problem | size | library | per call ms (median / min) | first call ms | "
             "pattern ms | colouring ms | colours | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for (problem, n), rows in results:
        size = f"n={n} ({n * n} vars)" if problem == "bratu" else f"N={n}"
        for r in rows:
            call = (f"{_ms(r['median_s'])} / {_ms(r['min_s'])}" if "median_s" in r else "")
            lines.append(f"| {problem} | {size} | {r['library']} | {call} | {_ms(r['first_s'])} | "
                         f"{_ms(r.get('pattern_s'))} | {_ms(r.get('colouring_s'))} | "
                         f"{r.get('colours', '')} | {r.get('note', r.get('mode', ''))} |")
    return "\n".join(lines)


def main(argv=None):
    args = script_arguments(__doc__, "w7.json", argv)
    config = args.config
    # warm tapegrad's kernels on a small case first, so that "first call" at each size is
    # recording + pattern + colouring + evaluation, not numba compiling
    tapegrad_sparse("bratu", 4, bratu_point(4))
    tapegrad_sparse("rosenbrock", 10, rosenbrock_point(10))
    results = []
    for problem, sizes in (("bratu", BRATU_SIZES), ("rosenbrock", ROSENBROCK_SIZES)):
        for n in sizes:
            results.append(((problem, n), run_size(problem, n, config)))
            print(f"W7 {problem} {n}: done", file=sys.stderr)
    text = render(results)
    print(f"W7 on CPU {PINNED}, one thread\n")
    print(text)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump([{"problem": p, "n": n, "rows": rows} for (p, n), rows in results], f,
                  indent=1)


if __name__ == "__main__":
    main()
