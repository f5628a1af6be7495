"""Generated code for replayed tapes of one-element records: scalar science code, loops.

The replay interpreter (``ops.forward`` / ``ops.sweep``) pays a dispatch on every record,
several nanoseconds, while the arithmetic of a one-element record takes about one.  For a tape
whose records all hold one value (an ODE integrator, a per-op chain), this module writes the
tape out as Python source -- the forward as assignments into the value arena, the backward as
accumulations into the gradient arena -- from the op table's ``SCALAR_RULES``, and compiles it
with numba.

Loops in the user's code unroll into long runs of records that repeat with a fixed stride.
Those runs are rolled back into loops: record ``r + P`` has the same opcode and flags as
record ``r``, and every arena offset it reads or writes moves by the same amount from one
repetition to the next.  A thousand-step ODE becomes one loop of eleven statements, so the
generated source stays small and numba compiles it in about a second.  The source is written
to a file named by its hash, so ``cache=True`` keeps the machine code across processes.
"""
import hashlib
import importlib.util
import os
import sys

import numpy as np

from . import ops as K
from ._config import generated_dir

# Rolling needs this many repetitions; straight-line code beyond MAX_STATEMENTS records is
# not generated (numba's compile time grows with the source, the interpreter is fine there).
MIN_REPEATS = 3
MAX_STATEMENTS = 600
_MAX_PERIOD = 256

_GATHERS = (K.GATHER, K.BCAST)


class Unsupported(Exception):
    """The tape holds a record that generated code does not cover."""


def _records(cols, need, goff):
    """The records that emit code, as (categorical key, integer fields) per record.

    Integer fields: record index, output slot, the value slots of x0, x1, x2, the gradient
    offsets of the output, x0 and x1.  Leaves and constants emit nothing.
    """
    op, a0, a1, voff, size, ip, fp, aux, faux = cols
    rows, keys = [], []
    for r in range(len(op)):
        o = int(op[r])
        if o <= K.EXTERN:
            continue
        if size[r] != 1:
            raise Unsupported(f"record {r} ({K.OPS[o].name}) holds {size[r]} values")
        if o != K.CMP and o != K.GUARD and o not in K.SCALAR_RULES:
            raise Unsupported(f"no scalar rule for {K.OPS[o].name}")
        i0, i1 = int(a0[r]), int(a1[r])
        s0 = s1 = s2 = g0 = g1 = 0
        n0 = n1 = 0
        if i0 >= 0:
            shift = 0
            if o in _GATHERS:
                shift = int(aux[ip[r] + 2])
            elif size[i0] != 1:
                raise Unsupported(f"record {r} ({K.OPS[o].name}) reads {size[i0]} values")
            s0 = int(voff[i0]) + shift
            n0 = int(need[i0])
            g0 = int(goff[i0]) + shift if n0 else 0
        if i1 >= 0:
            s1, n1 = int(voff[i1]), int(need[i1])
            g1 = int(goff[i1]) if n1 else 0
        if o == K.WHERE:
            s2 = int(voff[ip[r]])
        kind = int(ip[r]) if o == K.CMP else 0
        keys.append((o, i1 >= 0, int(need[r]), n0, n1, kind))
        rows.append((r, int(voff[r]), s0, s1, s2, int(goff[r]) if need[r] else 0, g0, g1))
    return keys, np.array(rows, dtype=np.int64).reshape(-1, 8)


def _blocks(keys, rows):
    """Split the records into runs: (start, period, repeats); repeats == 1 is straight code."""
    n = len(keys)
    ids = {}
    code = np.array([ids.setdefault(k, len(ids)) for k in keys], dtype=np.int64)
    # the next record with the same key: the candidate period at each position
    nxt = np.full(n, -1, dtype=np.int64)
    last = {}
    for i in range(n - 1, -1, -1):
        nxt[i] = last.get(code[i], -1)
        last[code[i]] = i
    blocks = []
    written = 0
    i = 0
    while i < n:
        m, p = 0, 0
        # candidate periods: each later record with the same key, nearest first
        j = int(nxt[i])
        while j >= 0 and j - i <= _MAX_PERIOD:
            q = j - i
            if i + 2 * q < n and code[i + 2 * q] == code[i]:
                m, p = _repeats(code, rows, i, q), q
                if m >= MIN_REPEATS:
                    break
            j = int(nxt[j])
        if m >= MIN_REPEATS:
            blocks.append((i, p, m))
            written += p
            i += m * p
        else:
            if blocks and blocks[-1][2] == 1:
                start, _, _ = blocks[-1]
                blocks[-1] = (start, i + 1 - start, 1)
            else:
                blocks.append((i, 1, 1))
            written += 1
            i += 1
        if written > MAX_STATEMENTS:
            raise Unsupported(f"more than {MAX_STATEMENTS} records would be written out")
    return blocks


def _repeats(code, rows, i, p):
    """How many times the block rows[i:i+p] repeats with every field moving by a fixed step."""
    n = len(code)
    if p <= 0 or p > _MAX_PERIOD or i + MIN_REPEATS * p > n:
        return 0
    m = 1
    span = MIN_REPEATS * p
    while True:
        hi = min(n, i + span)
        reps = (hi - i) // p
        if reps < 2:
            return m
        seg = slice(i, i + reps * p)
        same = code[i:i + (reps - 1) * p] == code[i + p:i + reps * p]
        first_bad = np.argmin(same) if not same.all() else len(same)
        ok = 1 + first_bad // p
        if reps >= 3:
            block = rows[seg].reshape(reps, p, -1)
            lin = np.all(block[2:] - 2 * block[1:-1] + block[:-2] == 0, axis=(1, 2))
            bad = np.argmin(lin) if not lin.all() else len(lin)
            ok = min(ok, 2 + bad)
        else:
            ok = min(ok, reps)
        m = max(m, ok)
        if ok < reps or hi == n:
            return m
        span *= 2


def _at(arr, base, step):
    """Source for ``arr[base + k * step]`` (k the loop counter)."""
    if step == 0:
        return f"{arr}[{base}]"
    return f"{arr}[{base} + k * {step}]" if step != 1 else f"{arr}[{base} + k]"


def _rule_lines(template, names):
    out = []
    for line in template.split("\n"):
        for name, value in names.items():
            line = line.replace(name, value)
        out.append(line)
    return out


def _load(arr, base, step, *names):
    key = (base, step)
    for known in names:
        if key in known:
            return known[key]
    return _at(arr, base, step)


def _params(o, rec):
    if o in (K.CLAMP, K.CLAMP_MIN, K.CLAMP_MAX, K.SOFTPLUS):
        return [f"lo = faux[ip[{rec}]]", f"hi = faux[ip[{rec}] + 1]"]
    return []


def _forward_lines(key, row, step, local, carried, j):
    """Source for one record's forward, at fields row (+ k * step in a loop).  Values made
    earlier in this trip come from ``local``, values of the trip before from ``carried``."""
    o, has_x1, _, _, _, kind = key
    r, so, s0, s1, s2 = row[:5]
    dr, dso, ds0, ds1, ds2 = step[:5]
    rec = str(r) if dr == 0 else f"({r} + k * {dr})"
    lines = [f"x0 = {_load('vals', s0, ds0, local, carried)}"]
    if has_x1:
        lines.append(f"x1 = {_load('vals', s1, ds1, local, carried)}")
    if o == K.GUARD:
        lines += [f"w = faux[ip[{rec}]]",
                  "if x0 != w and not (x0 != x0 and w != w):",
                  f"    return {rec}"]
        return lines
    if o == K.WHERE:
        lines.append(f"x2 = {_load('vals', s2, ds2, local, carried)}")
    lines += [f"c = fp[{rec}]"] + _params(o, rec)
    if o == K.CMP:
        rhs = "x1" if has_x1 else "c"
        cmp = ("<", "<=", ">", ">=", "==", "!=")[kind]
        lines.append(f"out = 1.0 if x0 {cmp} {rhs} else 0.0")
    else:
        lines += _rule_lines(K.SCALAR_RULES[o][0], {})
    var = f"v{j}"
    lines += [f"{var} = out", f"{_at('vals', so, dso)} = out"]
    local[(so, dso)] = var
    return lines


def _forward_block(keys, rows, steps, m):
    """The forward of one run of records (a loop of m trips when m > 1)."""
    p = len(keys)
    carried, before, after = {}, [], []
    if m > 1:
        # a value the previous trip made stays in a local instead of a store and a load
        made = {(rows[j][1] - steps[j][1], steps[j][1]): j for j in range(p)
                if keys[j][0] != K.GUARD and steps[j][1] != 0}
        for j in range(p):
            for f in (2, 3, 4):
                jj = made.get((rows[j][f], steps[j][f]))
                if jj is not None and (rows[j][f], steps[j][f]) not in carried:
                    carried[(rows[j][f], steps[j][f])] = f"p{jj}"
                    before.append(f"p{jj} = vals[{rows[jj][1] - steps[jj][1]}]")
                    after.append(f"p{jj} = v{jj}")
    body, local = [], {}
    for j in range(p):
        body += _forward_lines(keys[j], rows[j], steps[j], local, carried, j)
    if m == 1:
        return body
    return before + [f"for k in range({m}):"] + ["    " + ln for ln in body + after]


def _backward_lines(key, row, step, g, targets):
    """Source for one record's backward: its gradient is ``g``; ``targets`` are the lvalues
    its input gradients accumulate into."""
    o, has_x1, _, need0, need1, _ = key
    rules = K.SCALAR_RULES[o]
    r, so, s0, s1, s2 = row[:5]
    dr, dso, ds0, ds1, ds2 = step[:5]
    rec = str(r) if dr == 0 else f"({r} + k * {dr})"
    lines = [f"g = {g}", f"x0 = {_at('vals', s0, ds0)}", f"out = {_at('vals', so, dso)}",
             f"c = fp[{rec}]"]
    if has_x1:
        lines.append(f"x1 = {_at('vals', s1, ds1)}")
    if o == K.WHERE:
        lines.append(f"x2 = {_at('vals', s2, ds2)}")
    lines += _params(o, rec)
    if need0 and rules[1]:
        lines += _rule_lines(rules[1], {"gx0": targets[0]})
    if has_x1 and need1 and rules[2]:
        lines += _rule_lines(rules[2], {"gx1": targets[1]})
    return lines


def _swept(key):
    return key[2] and key[0] not in (K.CMP, K.GUARD)


def _input_targets(key, row, step):
    """(field, (base, step)) of the input gradients record's backward accumulates into."""
    out = []
    for i, f in ((0, 6), (1, 7)):
        if key[3 + i] and K.SCALAR_RULES[key[0]][1 + i] and (i == 0 or key[1]):
            out.append((i, (int(row[f]), int(step[f]))))
    return out


def _registers(keys, rows, steps, m):
    """How a rolled backward keeps gradients in locals: {(base, step): (class, name)}, or
    None where some accumulation could reach an address a local holds (then all go to
    memory).  Classes: 'G' the gradient of a record of this trip, 'H' of the trip before,
    'A' a fixed address (a parameter read in every trip)."""
    p = len(keys)
    swept = [j for j in range(p) if _swept(keys[j])]
    this_trip = {(int(rows[j][5]), int(steps[j][5])): j for j in swept}
    trip_before = {(int(rows[j][5] - steps[j][5]), int(steps[j][5])): j for j in swept}
    where = {}
    in_memory = []
    for j in swept:
        for _, t in _input_targets(keys[j], rows[j], steps[j]):
            if t in this_trip:
                where[t] = ("G", this_trip[t])
            elif t in trip_before:
                where[t] = ("H", trip_before[t])
            elif t[1] == 0:
                where[t] = ("A", t[0])
            else:
                in_memory.append(t)
    fixed = {t[0] for t, (cls, _) in where.items() if cls == "A"}
    # the trip before the first trip is outside the loop: those gradients are stored after it
    flushed = {t[0] for t, (cls, _) in where.items() if cls == "H"}
    if fixed & flushed:
        return None
    for base, step in in_memory:
        # only the gradients of records two or more trips back may stay in memory: no local
        # holds them, and none of them is a fixed address
        if not any(int(steps[j][5]) == step and (int(rows[j][5]) - base) % step == 0
                   and (int(rows[j][5]) - base) // step >= 2 for j in swept):
            return None
        for a in fixed | flushed:
            if (a - base) % step == 0 and 0 <= (a - base) // step < m:
                return None
    return where


def _backward_block(keys, rows, steps, m):
    """The backward of one run of records, last record first (a loop when m > 1)."""
    p = len(keys)
    swept = [j for j in range(p) if _swept(keys[j])]
    regs = _registers(keys, rows, steps, m) if m > 1 else None
    if regs is None:
        body = []
        for j in reversed(swept):
            targets = {i: _at("grads", *t) for i, t in _input_targets(keys[j], rows[j], steps[j])}
            body += _backward_lines(keys[j], rows[j], steps[j],
                                    _at("grads", rows[j][5], steps[j][5]), targets)
        if m == 1 or not body:
            return body
        return [f"for k in range({m - 1}, -1, -1):"] + ["    " + ln for ln in body]
    # Each record's gradient lives in a local gr{j} during its trip; what the trip after
    # (run first) adds to it waits in hr{j}; fixed addresses sum in ar{a}.  Every gradient
    # still receives its terms in the interpreter's order, so the sums have the same bits.
    held = sorted({n for cls, n in regs.values() if cls == "H"})
    fixed = sorted({n for cls, n in regs.values() if cls == "A"})
    name = {t: {"G": "gr", "H": "hr", "A": "ar"}[cls] + str(n) for t, (cls, n) in regs.items()}
    before = [f"hr{j} = grads[{int(rows[j][5] + (m - 1) * steps[j][5])}]" for j in held]
    before += [f"ar{a} = grads[{a}]" for a in fixed]
    body = []
    for j in swept:
        go, dgo = int(rows[j][5]), int(steps[j][5])
        body.append(f"gr{j} = hr{j}" if j in held else f"gr{j} = {_at('grads', go, dgo)}")
    for j in held:
        body.append(f"hr{j} = {_at('grads', int(rows[j][5] - steps[j][5]), int(steps[j][5]))}")
    for j in reversed(swept):
        targets = {i: name.get(t) or _at("grads", *t)
                   for i, t in _input_targets(keys[j], rows[j], steps[j])}
        body.append(f"{_at('grads', rows[j][5], steps[j][5])} = gr{j}")
        body += _backward_lines(keys[j], rows[j], steps[j], f"gr{j}", targets)
    after = [f"grads[{int(rows[j][5] - steps[j][5])}] = hr{j}" for j in held]
    after += [f"grads[{a}] = ar{a}" for a in fixed]
    return before + [f"for k in range({m - 1}, -1, -1):"] + ["    " + ln for ln in body] + after


def generate(cols, need, goff):
    """Python source of ``forward(vals, fp, ip, faux) -> int`` and
    ``backward(vals, grads, fp, ip, faux)`` for a tape of one-element records.

    ``need``/``goff`` are the plan of the backward (None: no backward is generated).
    Raises Unsupported for tapes it does not cover.
    """
    n = len(cols[0])
    with_grad = need is not None
    if not with_grad:
        need = np.zeros(n, dtype=np.uint8)
        goff = np.zeros(n, dtype=np.int64)
    keys, rows = _records(cols, need, goff)
    fwd, bwd = [], []
    for start, p, m in _blocks(keys, rows):
        # how far each field of each record moves from one repetition to the next
        steps = (rows[start + p:start + 2 * p] - rows[start:start + p] if m > 1
                 else np.zeros((p, 8), dtype=np.int64))
        block = (keys[start:start + p], rows[start:start + p], steps, m)
        fwd += _forward_block(*block)
        if with_grad:
            bwd.append(_backward_block(*block))
    src = ["import numpy as np", "from tapegrad._config import kernel", "", "",
           "@kernel", "def forward(vals, fp, ip, faux):"]
    src += ["    " + line for line in fwd] + ["    return -1", "", ""]
    src += ["@kernel", "def backward(vals, grads, fp, ip, faux):"]
    # the backward runs the blocks last to first
    src += ["    " + line for body in reversed(bwd) for line in body] + ["    return 0", ""]
    return "\n".join(src)


class Program:
    """The generated forward and backward of one replayed tape."""

    __slots__ = ("forward", "backward", "seeds", "plan", "source", "path")

    def __init__(self, module, seeds, plan, source, path):
        self.forward = module.forward
        self.backward = module.backward
        self.seeds = seeds        # the backward's seed records (a plan_cache key)
        self.plan = plan          # (need, goff, total) the backward was generated for
        self.source = source
        self.path = path


def _import(source):
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    name = f"tapegrad_gen_{digest}"
    mod = sys.modules.get(name)
    if mod is not None:
        return mod, mod.__file__
    folder = generated_dir()
    path = os.path.join(folder, name + ".py")
    if not os.path.exists(path):
        # written whole, then renamed: another process may be importing the same file
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod, path


def build(cols, vals, seeds, plan):
    """A compiled Program for the tape ``cols`` with value arena ``vals`` (not changed);
    ``seeds``/``plan`` as in ``Program``.

    Raises Unsupported when the tape is not one of one-element records."""
    need, goff = (plan[0], plan[1]) if plan is not None else (None, None)
    source = generate(cols, need, goff)
    module, path = _import(source)
    prog = Program(module, seeds, plan, source, path)
    # compile now (or load from numba's cache), on scratch arenas, not inside a user's call
    fp, ip, faux = cols[6], cols[5], cols[8]
    scratch = vals.copy()
    prog.forward(scratch, fp, ip, faux)
    if plan is not None:
        prog.backward(scratch, np.zeros(max(int(plan[2]), 1)), fp, ip, faux)
    return prog

