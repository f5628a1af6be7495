"""Turn measured results into the markdown report and the JSON file.

Times are shown with units picked per value (ns, µs, ms, s) to 3 significant figures.
Ratios are median / median: ``× torch`` above 1 means slower than PyTorch.
"""
from __future__ import annotations

import json
import math
import os

from bench.workloads import WORKLOADS

STATUS_CELL = {"undefined": "n/a", "not implemented": "—", "error": "error", "skipped": "skipped"}


def fmt_time(seconds) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "—"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def fmt_ratio(value, reference) -> str:
    if value is None or not reference:
        return "—"
    return f"{value / reference:.3g}×"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return lines


# --- header ---------------------------------------------------------------------------
def _header(info: dict, run: dict) -> list[str]:
    blas = ", ".join(_pool(b) for b in info["blas"]) or "unknown (threadpoolctl missing)"
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items())
    env = ", ".join(f"{k}={v}" for k, v in info["env"].items() if v is not None)
    pinned = (f"process pinned to CPU {info['pinned_cpu']}" if info["pinned_cpu"] is not None
              else "process NOT pinned (no sched_setaffinity)")
    lines = [
        "# tapegrad benchmark",
        "",
        f"- **machine**: {info['cpu_model']}, {info['logical_cpus']} logical CPUs, {pinned}; "
        f"{info['platform']}; Python {info['python']}",
        f"- **software**: {versions}",
        f"- **BLAS / thread pools**: {blas}",
        f"- **environment**: {env}",
        f"- **load average** (1/5/15 min) at start {_load(info, 'start')}, at end "
        f"{_load(info, 'end')}: on a 2-core machine anything above ~1 means another busy "
        "process shared the CPUs; read the ratios, not the absolute times",
        f"- **run**: {info['date_utc']}, mode `{run['mode']}`, tapegrad checkout "
        f"{info['git_revision']}",
        "- **protocol**: one thread, float64, all libraries in one process with timed rounds "
        "interleaved round-robin, GC on; first call (includes JIT compile) reported apart from "
        "the steady state; median and min per call over rounds; ratios are median / median. "
        "Gradients cross-checked against the reference (relative error <= 1e-8) before timing.",
    ]
    for name, reason in run["skipped_peers"].items():
        lines.append(f"- **skipped**: `{name}`: {reason}")
    return lines


def _pool(b: dict) -> str:
    """One thread pool: ``openblas 0.3.30 from numpy.libs (SkylakeX, 1 thread(s))``."""
    where = os.path.basename(os.path.dirname(b.get("filepath") or ""))
    name = " ".join(str(x) for x in (b.get("internal_api"), b.get("version")) if x)
    details = ", ".join(str(x) for x in (b.get("architecture"),
                                         f"{b.get('num_threads')} thread(s)") if x)
    return f"{name} from {where} ({details})" if where else f"{name} ({details})"


def _load(info: dict, when: str) -> str:
    load = info.get("load_average", {}).get(when)
    return " / ".join(f"{x:.2f}" for x in load) if load else "unknown"


# --- summary matrix -------------------------------------------------------------------
def _summary(results: dict, startup: dict | None, peer_names: list[str]) -> list[str]:
    rows = []
    for name, res in results.items():
        per_op = name == "W1"
        cells = [f"{name} {'per op' if per_op else WORKLOADS[name].unit}"]
        for peer in peer_names:
            row = res["rows"].get(peer)
            cells.append(_summary_cell(row, res["units"] if per_op else None))
        rows.append(cells)
    if startup:
        cells = ["W6 fresh process"]
        for peer in peer_names:
            cases = [(case, row) for case, row in startup["rows"].items()
                     if case == peer or case.startswith(peer + " ")]
            if not cases:
                cells.append("—")
                continue
            # tapegrad has several cases, "tapegrad (warm cache)", "(cold cache)", "demo (cold
            # cache, 2 CPUs)": label each with what follows the peer's name
            cells.append(" / ".join(
                _summary_cell(row, None) + (f" ({_case_label(case[len(peer):])})"
                                            if case != peer else "")
                for case, row in cases))
        rows.append(cells)
    return ["## Summary: median per call", ""] + _table(["workload"] + peer_names, rows)


def _case_label(rest: str) -> str:
    """"(warm cache)" -> "warm cache"; "demo (cold cache)" stays as it is."""
    rest = rest.strip()
    if rest.startswith("(") and rest.endswith(")") and rest.count("(") == 1:
        return rest[1:-1]
    return rest


def _summary_cell(row: dict | None, units: int | None) -> str:
    if row is None:
        return "—"
    if row["status"] in STATUS_CELL:
        return STATUS_CELL[row["status"]]
    if not row.get("timed", row.get("median_s") is not None):
        return f"({fmt_time(row.get('first_call_s'))} first)"
    value = row["median_s"] / units if units else row["median_s"]
    cell = fmt_time(value)
    if units and "split" in row:
        cell += (f" ({fmt_time(row['split']['fwd']['median_s'] / units)} / "
                 f"{fmt_time(row['split']['bwd']['median_s'] / units)})")
    return cell + (" INVALID" if row["status"] == "invalid" else "")


# --- per-workload tables --------------------------------------------------------------
def _workload_section(res: dict, peer_names: list[str]) -> list[str]:
    name, rows = res["workload"], res["rows"]
    units, per_unit = res["units"], res["per_unit"]
    torch_median = rows.get("torch", {}).get("median_s")
    floor_median = rows.get("floor", {}).get("median_s")
    header = ["library", "first call", "median", "min"]
    if per_unit:
        header.append(f"median per {per_unit}")
    has_split = any("split" in r for r in rows.values())
    if has_split:
        header.append(f"fwd / bwd per {per_unit}")
    header += ["× torch", "× floor", "samples × calls", "grad rel err", "note"]
    table = []
    for peer in peer_names:
        row = rows.get(peer)
        if row is None:
            continue
        median = row.get("median_s")
        cells = [f"**{peer}**" if peer == "tapegrad" else peer,
                 fmt_time(row.get("first_call_s")), fmt_time(median), fmt_time(row.get("min_s"))]
        if per_unit:
            cells.append(fmt_time(median / units) if median is not None else "—")
        if has_split:
            split = row.get("split")
            cells.append(f"{fmt_time(split['fwd']['median_s'] / units)} / "
                         f"{fmt_time(split['bwd']['median_s'] / units)}" if split else "—")
        cells += [fmt_ratio(median, torch_median), fmt_ratio(median, floor_median),
                  f"{row['n']} × {row['batch']}" if "n" in row else "—",
                  f"{row['rel_err']:.1e}" if row.get("rel_err") is not None else "—",
                  _note(row)]
        table.append(cells)
    title = f"## {name}: {res['title']}"
    lines = [title, ""]
    if res.get("reference"):
        lines += [f"Gradients checked against `{res['reference']}`.", ""]
    return lines + _table(header, table)


def _note(row: dict) -> str:
    note = row.get("note", "")
    if row["status"] == "invalid":
        note = "**INVALID** " + note
    elif row["status"] in ("error", "undefined", "not implemented", "skipped"):
        note = f"{row['status']}: {note}" if note else row["status"]
    return note.replace("|", "\\|")


def _reading(row: dict) -> str:
    """A figure the child printed about itself (the demo's first backward), for the note."""
    if row.get("reading_median_s") is None:
        return ""
    return f"; its first backward, by its own timer: {fmt_time(row['reading_median_s'])} median"


def _startup_section(startup: dict) -> list[str]:
    rows = startup["rows"]
    torch_median = rows.get("torch", {}).get("median_s")
    floor_median = rows.get("floor", {}).get("median_s")
    table = [[case, fmt_time(row.get("median_s")), fmt_time(row.get("min_s")),
              fmt_ratio(row.get("median_s"), torch_median),
              fmt_ratio(row.get("median_s"), floor_median), str(row.get("n", 0)),
              _note(row) + _reading(row)]
             for case, row in rows.items()]
    return ([f"## W6: {WORKLOADS['W6'].title}", "",
             f"Wall time of `python -c SNIPPET`, median of {startup['runs']} interleaved runs "
             "after one untimed warm-up run per case.", ""]
            + _table(["case", "median", "min", "× torch", "× floor", "runs", "note"], table))


def _scaling_section(scaling: dict, peer_names: list[str]) -> list[str]:
    lines = ["## Scaling: median per unit as the size grows", ""]
    for name, points in scaling.items():
        per_unit = WORKLOADS[name].per_unit
        present = [p for p in peer_names if any(p in pt["rows"] for pt in points)]
        table = []
        for pt in points:
            cells = [f"{pt['size']:,}"]
            for peer in present:
                row = pt["rows"].get(peer)
                cells.append(_summary_cell(row, pt["units"]) if row else "—")
            table.append(cells)
        lines += [f"### {name}: per {per_unit} vs {WORKLOADS[name].size_name}", ""]
        lines += _table([WORKLOADS[name].size_name] + present, table) + [""]
    return lines


def _replay_costs_section(rc: dict) -> list[str]:
    lines = ["## RC: costs of tapegrad.compile besides the replay", ""]
    if rc.get("note"):
        return lines + [rc["note"]]
    guards = rc["guards"]
    never = guards.get("compiled, branch never flips", {}).get("median_s")
    table = [[label, fmt_time(row.get("median_s")), fmt_time(row.get("min_s")),
              fmt_ratio(row.get("median_s"), never), str(row.get("n", 0))]
             for label, row in guards.items()]
    lines += ["### Guards: a Python `if` on a tensor's value, forward + backward per call", "",
              "`f(x, w)`: 4 layers `h = tanh(h*w + 0.1)` on 16 elements, then "
              "`if x.sum() > 0` picks one of two losses; the flipping calls alternate `x` and "
              "`-x`.", ""]
    lines += _table(["case", "median", "min", "× never flips", "samples"], table) + [""]
    tiny = rc["tiny"]
    libs = list(dict.fromkeys(key.partition("/")[0] for key in tiny))
    torch_fb = tiny.get("torch/run(x).backward()", {}).get("median_s")
    torch_f = tiny.get("torch/run(x)", {}).get("median_s")
    table = []
    for lib in libs:
        f = tiny.get(f"{lib}/run(x)", {}).get("median_s")
        fb = tiny.get(f"{lib}/run(x).backward()", {}).get("median_s")
        table.append([lib, fmt_time(f), fmt_ratio(f, torch_f), fmt_time(fb),
                      fmt_ratio(fb, torch_fb)])
    lines += ["### Tiny tapes: the fixed cost of a call, shape-(1,) input", "",
              "`run(x)` is `sin(x)` (one op); `run(x).backward()` is `sin(x).sum()` and its "
              "backward (two ops). `tapegrad_compiled` replays a recorded tape; the bare "
              "`@njit` call (one array in, one out) is the floor of calling compiled code.", ""]
    lines += _table(["library", "run(x)", "× torch", "run(x).backward()", "× torch"],
                    table) + [""]
    table = []
    for name, row in rc["first_calls"].items():
        comp = row["tapegrad_compiled"]
        jax = row.get("jax_jit")
        if jax is None:
            jax_cell = "not selected"
        elif jax["status"] != "ok":
            jax_cell = f"{jax['status']}: {jax['note']}"
        else:
            jax_cell = f"{fmt_time(jax['first_call_s'])} (steady {fmt_time(jax['steady_s'])})"
        eager = row.get("tapegrad", {})
        if "error" in comp:
            cells = [name, f"error: {comp['error']}", "—", "—", "—"]
        else:
            gen = ("not generated" if comp.get("generating_call") is None else
                   f"call {comp['generating_call']}: {fmt_time(comp['generate_s'])}")
            cells = [name, fmt_time(comp["first_s"]), fmt_time(comp["second_s"]), gen,
                     fmt_time(comp.get("steady_s"))]
        cells.append(f"error: {eager['error']}" if "error" in eager else
                     f"{fmt_time(eager.get('first_s'))} (then {fmt_time(eager.get('second_s'))})")
        table.append(cells + [jax_cell.replace("|", "\\|")])
    lines += ["### First calls: record and first replay in a fresh process", "",
              "`tapegrad_compiled` in a fresh interpreter: call 1 records the tape (an eager run "
              "under a trace), call 2 is the first replay (the replay kernels load from "
              "numba's on-disk cache), and a later call of a hot scalar tape builds its "
              "generated code (numba compiles it, or loads it from its cache when the same "
              "tape was generated before, as in the run just made). Eager tapegrad's "
              "first call in a fresh process loads the backward kernels too: what the two "
              "share is that one-off load, not recording. jax.jit's first call traces and "
              "compiles with XLA (from the W1/W5 tables above).", ""]
    lines += _table(["workload", "compiled call 1 (record)", "call 2 (first replay)",
                     "generated code built", "compiled steady", "eager call 1 (then call 2)",
                     "jax_jit first call"],
                    table)
    return lines


def render_markdown(info: dict, run: dict, results: dict, startup: dict | None,
                    scaling: dict | None, replay_costs: dict | None = None,
                    sections: list[str] = ()) -> str:
    """The report; ``sections``: lines of the workloads that render themselves (W8, ST),
    placed after the in-process workloads'."""
    peer_names = run["peer_names"]
    lines = _header(info, run) + [""]
    lines += _summary(results, startup, peer_names) + [""]
    lines += ["In the summary, W1 is per op with (forward / backward) per op where a library "
              "exposes the two; `(… first)` is a first call that was the only one timed; "
              "`n/a` is a workload not defined for that library.", ""]
    for res in results.values():
        lines += _workload_section(res, peer_names) + [""]
    lines += list(sections)
    if startup:
        lines += _startup_section(startup) + [""]
    if replay_costs:
        lines += _replay_costs_section(replay_costs) + [""]
    if scaling:
        lines += _scaling_section(scaling, peer_names)
    return "\n".join(lines).rstrip() + "\n"


def write_json(path: str, payload: dict) -> None:
    _ensure_dir(path)
    with open(path, "w") as f:
        json.dump(_json_safe(payload), f, indent=1)
        f.write("\n")


def write_text(path: str, text: str) -> None:
    _ensure_dir(path)
    with open(path, "w") as f:
        f.write(text)


def _ensure_dir(path: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)


def _json_safe(value):
    """inf/nan are not JSON: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value
