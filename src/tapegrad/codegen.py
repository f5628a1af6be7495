"""Generated code for replayed tapes of one-element records: scalar science code, loops.

The replay interpreter (``ops.forward`` / ``ops.sweep``) pays a dispatch on every record,
several nanoseconds, while the arithmetic of a one-element record takes about one.  For a tape
whose records all hold one value (an ODE integrator, a per-op chain), this module writes the
tape out as Python source -- the forward as assignments into the value arena, the backward as
accumulations into the gradient arena -- as calls of the op table's scalar rules (the same
functions the interpreter's loops call, so the same bits), and compiles it with numba.

Loops in the user's code unroll into long runs of records that repeat with a fixed stride.
Those runs are rolled back into loops: record ``r + P`` has the same opcode and flags as
record ``r``, and every arena offset it reads or writes moves by the same amount from one
repetition to the next.  A thousand-step ODE becomes one loop of eleven statements, so the
generated source stays small and numba compiles it in about a second.  The source is written
to a file named by its hash, so ``cache=True`` keeps the machine code across processes.

Tapes of mid-size vectors (``generate_vectors``) are the elementwise case of the same idea:
a record of n values is n one-element records, one per position, that do not depend on each
other.  Their forward is one loop over the positions that runs every record for one
position before the next, in locals, so that a value crosses memory only where something
reads it later; their backward is one loop too.  See that section below.
"""
import dis
import re

import numpy as np

from . import _generated
from . import _threads
from . import ops as K
from .ops import custom as _custom
from .ops import entries as _E
from .ops import table as T

# Rolling needs this many repetitions; straight-line code beyond MAX_STATEMENTS records is
# not generated (numba's compile time grows with the source, the interpreter is fine there).
MIN_REPEATS = 3
MAX_STATEMENTS = 600
_MAX_PERIOD = 256

_GATHERS = (K.GATHER, K.BCAST)
_CMP_OPS = ("<", "<=", ">", ">=", "==", "!=")   # a comparison record's kind (its ip)


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
        i0, i1 = int(a0[r]), int(a1[r])
        kind = int(ip[r]) if o == K.CMP else 0
        if o == K.CUSTOM:
            kind = _custom_op(aux, int(ip[r]), i1, size)
        elif o != K.CMP and o != K.GUARD and _scalar_rules(o) is None:
            raise Unsupported(f"no scalar rule for {K.OPS[o].name}")
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
        keys.append((o, i1 >= 0, int(need[r]), n0, n1, kind))
        rows.append((r, int(voff[r]), s0, s1, s2, int(goff[r]) if need[r] else 0, g0, g1))
    return keys, np.array(rows, dtype=np.int64).reshape(-1, 8)


def _custom_op(aux, at, i1, size):
    """The registry id of the custom op of a record (its key's kind: records of different
    ops never roll into one loop), when the op has scalar rules."""
    k = _custom.REGISTRY.get(int(aux[at + _custom.A_ID]))
    if k is None or k.scalar is None:
        name = _custom.name_of(aux, at)
        raise Unsupported(f"custom op '{name}' has no scalar rules (tapegrad.elementwise_op "
                          "makes an op that has them)")
    if i1 >= 0 and size[i1] != 1:
        raise Unsupported(f"custom op '{k.name}' reads {size[i1]} values")
    return k.ident


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


def _scalar_rules(o):
    """(forward, vjp0, vjp1) of opcode o as it runs on one value, or None: an elementwise op's
    own rules, or the one-element forms an array op declares (a one-element sum is a copy)."""
    info = K.OPS.get(o)
    if info is None:
        return None
    if info.family == T.ELEMENTWISE:
        return info.rules["forward"], info.rules["vjp0"], info.rules.get("vjp1")
    if "scalar_forward" in info.rules:
        return info.rules["scalar_forward"], info.rules["scalar_vjp"], None
    return None


# the modules generated code calls rules from, by the alias it imports them under
_RULE_MODULES = {"tapegrad.ops.elementwise": "EW", "tapegrad.ops.activation": "AC",
                 "tapegrad.ops.reduce": "RD",
                 "tapegrad.ops.structure": "ST"}


def _call(fn, args):
    return f"{_RULE_MODULES[fn.py_func.__module__]}.{fn.__name__}({args})"


def _custom_call(key, rule, rec):
    """The lines that call a custom op's scalar rule (0: value, 1: derivative) into ``out``
    or ``dd``: its parameters are a slice of faux, as its array kernels see them."""
    _, has_x1, _, _, _, ident = key
    at = f"ip[{rec}]"
    lines = [f"P = faux[aux[{at} + {_custom.A_PARAMS}]:aux[{at} + {_custom.A_PARAMS}] + "
             f"aux[{at} + {_custom.A_NPARAMS}]]"]
    xs = "x0, x1" if has_x1 else "x0"
    if rule == 0:
        return lines + [f"out = _cu{ident}_value({xs}, P)"]
    return lines + [f"dd = _cu{ident}_derivative({xs}, out, P)"]


def _custom_preamble(keys):
    """Module lines that bind each custom op's scalar rules, checked by id and digest."""
    idents = sorted({key[5] for key in keys if key[0] == K.CUSTOM})
    if not idents:
        return []
    lines = ["from tapegrad.ops.custom import scalar_rules as _scalar_rules"]
    for ident in idents:
        digest = _custom.REGISTRY[ident].digest
        lines.append(f"_cu{ident}_value, _cu{ident}_derivative = "
                     f"_scalar_rules({ident}, {digest})")
    return lines


def _operands(o, has_x1):
    """The argument names of o's scalar rules after x0: x1, x2, c, p0, p1 (x0 stands in for
    an input the op does not have, 0.0 for parameters it does not read)."""
    info = K.OPS[o]
    params = "p0, p1" if info.params else "0.0, 0.0"
    return f"{'x1' if has_x1 else 'x0'}, {'x2' if info.condition else 'x0'}, c, {params}"


def _load(arr, base, step, *names):
    key = (base, step)
    for known in names:
        if key in known:
            return known[key]
    return _at(arr, base, step)


def _params(o, rec):
    if K.OPS[o].params:
        return [f"p0 = faux[ip[{rec}]]", f"p1 = faux[ip[{rec}] + 1]"]
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
    if o == K.CUSTOM:
        lines += _custom_call(key, 0, rec)
    elif o == K.CMP:
        lines += [f"c = fp[{rec}]"]
        rhs = "x1" if has_x1 else "c"
        lines.append(f"out = 1.0 if x0 {_CMP_OPS[kind]} {rhs} else 0.0")
    else:
        lines += [f"c = fp[{rec}]"] + _params(o, rec)
        lines.append(f"out = {_call(_scalar_rules(o)[0], 'x0, ' + _operands(o, has_x1))}")
    var = f"v{j}"
    lines += [f"{var} = out", f"{_at('vals', so, dso)} = out"]
    local[(so, dso)] = var
    return lines


def _forward_block(keys, rows, steps, m):
    """The forward of one run of records (a loop of m trips when m > 1)."""
    p = len(keys)
    carried, before, after = {}, [], []
    if m > 1:
        # a value the previous trip made stays in a local instead of a store and a load (named
        # pv: p0/p1 are the parameters a record reads, and would overwrite it)
        made = {(rows[j][1] - steps[j][1], steps[j][1]): j for j in range(p)
                if keys[j][0] != K.GUARD and steps[j][1] != 0}
        for j in range(p):
            for f in (2, 3, 4):
                jj = made.get((rows[j][f], steps[j][f]))
                if jj is not None and (rows[j][f], steps[j][f]) not in carried:
                    carried[(rows[j][f], steps[j][f])] = f"pv{jj}"
                    before.append(f"pv{jj} = vals[{rows[jj][1] - steps[jj][1]}]")
                    after.append(f"pv{jj} = v{jj}")
        # values made before the loop (parameters) are read once: the loop's stores never
        # reach them, but numba cannot know that the arena does not alias itself
        for j in range(p):
            for f in (2, 3, 4):
                key = (int(rows[j][f]), int(steps[j][f]))
                if key[1] == 0 and key not in carried and _reads(keys[j], f):
                    carried[key] = f"f{key[0]}"
                    before.append(f"f{key[0]} = vals[{key[0]}]")
    body, local = [], {}
    for j in range(p):
        body += _forward_lines(keys[j], rows[j], steps[j], local, carried, j)
    if m == 1:
        return body
    return before + [f"for k in range({m}):"] + ["    " + ln for ln in body + after]


def _reads(key, field):
    """Whether a record with this key reads the value at row field 2 (x0), 3 (x1) or 4 (x2)."""
    return field == 2 or (field == 3 and key[1]) or (field == 4 and key[0] == K.WHERE)


def _backward_lines(key, row, step, g, targets, fixed):
    """Source for one record's backward: its gradient is ``g``; ``targets`` are the lvalues
    its input gradients accumulate into; ``fixed`` names the values read before the loop."""
    o, has_x1, _, need0, need1, _ = key
    r, so, s0, s1, s2 = row[:5]
    dr, dso, ds0, ds1, ds2 = step[:5]
    rec = str(r) if dr == 0 else f"({r} + k * {dr})"
    lines = [f"g = {g}", f"x0 = {_load('vals', s0, ds0, fixed)}",
             f"out = {_at('vals', so, dso)}"]
    if has_x1:
        lines.append(f"x1 = {_load('vals', s1, ds1, fixed)}")
    if o == K.CUSTOM:
        # the derived vjp kernel's bits: g times the derivative, then added
        lines += _custom_call(key, 1, rec)
        parts = ("dd[0]", "dd[1]") if has_x1 else ("dd",)
        if need0:
            lines.append(f"{targets[0]} += g * {parts[0]}")
        if has_x1 and need1:
            lines.append(f"{targets[1]} += g * {parts[1]}")
        return lines
    rules = _scalar_rules(o)
    lines.append(f"c = fp[{rec}]")
    if o == K.WHERE:
        lines.append(f"x2 = {_load('vals', s2, ds2, fixed)}")
    lines += _params(o, rec)
    args = "g, x0, " + _operands(o, has_x1).replace(", c,", ", out, c,")
    if need0 and rules[1]:
        lines.append(f"{targets[0]} += {_call(rules[1], args)}")
    if has_x1 and need1 and rules[2]:
        lines.append(f"{targets[1]} += {_call(rules[2], args)}")
    return lines


def _swept(key):
    return key[2] and key[0] not in (K.CMP, K.GUARD)


def _input_targets(key, row, step):
    """(field, (base, step)) of the input gradients record's backward accumulates into."""
    out = []
    has_vjp = ((True, True) if key[0] == K.CUSTOM else _scalar_rules(key[0])[1:])
    for i, f in ((0, 6), (1, 7)):
        if key[3 + i] and has_vjp[i] and (i == 0 or key[1]):
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


class _Memory:
    """The gradient-arena addresses a generated backward uses, as (base, step, trips).

    The backward zeroes what it uses itself (``zeroing``), so the caller need not clear the
    whole arena.  A loop reads a record's gradient from memory only where some other code
    may have written it (``written``, from a first pass over all blocks): the rest start
    at zero in a local, and are never stored, since no code reads them back."""

    def __init__(self, total, written=None):
        self.total = total
        self.written = written     # per address: how many places write it (first pass: None)
        self.used = []             # every address the source reads or writes
        self.writes = []           # accumulations, and stores after a loop: (range, block)
        self.block = 0

    def at(self, base, step, m, write=False, flush=False):
        self.used.append((base, step, m))
        if write:
            self.writes.append((base, step, m, self.block, flush))
        return _at("grads", base, step)

    def starts_zero(self, base, step, m):
        """Whether nothing written before or inside this block's loop reaches these."""
        if self.written is None:
            return False
        return not self.written[self.block][base + step * np.arange(m)].any()

    def mask(self, spans):
        out = np.zeros(self.total, dtype=bool)
        for base, step, m in spans:
            out[base + step * np.arange(m)] = True
        return out

    def written_before(self, blocks):
        """Per block, the addresses written before its loads run: by the blocks after it in
        the tape (the backward runs them first) and inside its own loop, not by its stores
        after the loop."""
        out = []
        for blk in range(blocks):
            out.append(self.mask([(base, step, m) for base, step, m, b, flush in self.writes
                                  if b > blk or (b == blk and not flush)]))
        return out

    def zeroing(self, keep):
        """Source that zeroes every used address except those in ``keep`` (the seeds)."""
        used = self.mask(self.used)
        used[list(keep)] = False
        idx = np.flatnonzero(used)
        if not len(idx):
            return []
        # runs of used addresses, joined across gaps of a few unused (and unkept) ones
        breaks = np.flatnonzero(np.diff(idx) > 4)
        starts = np.concatenate(([idx[0]], idx[breaks + 1]))
        ends = np.concatenate((idx[breaks], [idx[-1]])) + 1
        lines = []
        for lo, hi in zip(starts.tolist(), ends.tolist()):
            cuts = [a for a in sorted(keep) if lo <= a < hi]
            for a in cuts + [hi]:
                if a > lo:
                    lines.append(f"grads[{lo}:{a}] = 0.0" if a - lo > 1 else f"grads[{lo}] = 0.0")
                lo = a + 1
        if len(lines) > MAX_STATEMENTS // 4:
            # scattered: clear the whole arena but the seeds
            lines, lo = [], 0
            for a in sorted(keep) + [self.total]:
                if a > lo:
                    lines.append(f"grads[{lo}:{a}] = 0.0")
                lo = a + 1
        return lines


def _backward_block(keys, rows, steps, m, mem, keep):
    """The backward of one run of records, last record first (a loop when m > 1).
    ``keep``: the seeds' gradient addresses (a loop stores the gradients there)."""
    p = len(keys)
    swept = [j for j in range(p) if _swept(keys[j])]
    regs = _registers(keys, rows, steps, m) if m > 1 else None
    fixed, before = {}, []
    if m > 1:
        # values made before the loop: nothing is stored into the value arena in a backward
        for j in swept:
            for f in (2, 3, 4):
                key = (int(rows[j][f]), int(steps[j][f]))
                if key[1] == 0 and key not in fixed and _reads(keys[j], f):
                    fixed[key] = f"f{key[0]}"
                    before.append(f"f{key[0]} = vals[{key[0]}]")
    if regs is None:
        body = []
        for j in reversed(swept):
            targets = {i: mem.at(*t, m, write=True)
                       for i, t in _input_targets(keys[j], rows[j], steps[j])}
            body += _backward_lines(keys[j], rows[j], steps[j],
                                    mem.at(int(rows[j][5]), int(steps[j][5]), m), targets,
                                    fixed)
        if m == 1 or not body:
            return body
        return before + [f"for k in range({m - 1}, -1, -1):"] + ["    " + ln for ln in body]
    # Each record's gradient lives in a local gr{j} during its trip; what the trip after
    # (run first) adds to it waits in hr{j}; fixed addresses sum in ar{a}.  Every gradient
    # still receives its terms in the interpreter's order, so the sums have the same bits
    # (but for the sign of a zero: see _assign_first_terms).
    held = sorted({n for cls, n in regs.values() if cls == "H"})
    fixed_sums = sorted({n for cls, n in regs.values() if cls == "A"})
    name = {t: {"G": "gr", "H": "hr", "A": "ar"}[cls] + str(n) for t, (cls, n) in regs.items()}
    before += [f"hr{j} = {mem.at(int(rows[j][5] + (m - 1) * steps[j][5]), 0, 1)}"
               for j in held]
    before += [f"ar{a} = {mem.at(a, 0, 1)}" for a in fixed_sums]
    body = []
    for j in swept:
        go, dgo = int(rows[j][5]), int(steps[j][5])
        if j in held:
            body.append(f"gr{j} = hr{j}")
        elif mem.starts_zero(go, dgo, m):
            body.append(f"gr{j} = 0.0")
        else:
            body.append(f"gr{j} = {mem.at(go, dgo, m)}")
    for j in held:
        go, dgo = int(rows[j][5] - steps[j][5]), int(steps[j][5])
        # the first trip's is outside the loop, read after it only through the flush
        body.append(f"hr{j} = 0.0" if mem.starts_zero(go, dgo, m)
                    else f"hr{j} = {mem.at(go, dgo, m)}")
    for j in reversed(swept):
        go, dgo = int(rows[j][5]), int(steps[j][5])
        targets = {i: name.get(t) or mem.at(*t, m, write=True)
                   for i, t in _input_targets(keys[j], rows[j], steps[j])}
        if any((a - go) % dgo == 0 and 0 <= (a - go) // dgo < m for a in keep):
            body.append(f"{mem.at(go, dgo, m)} = gr{j}")
        body += _backward_lines(keys[j], rows[j], steps[j], f"gr{j}", targets, fixed)
    body = _assign_first_terms(body)
    after = [f"{mem.at(int(rows[j][5] - steps[j][5]), 0, 1, write=True, flush=True)} = hr{j}"
             for j in held]
    after += [f"{mem.at(a, 0, 1, write=True, flush=True)} = ar{a}" for a in fixed_sums]
    return before + [f"for k in range({m - 1}, -1, -1):"] + ["    " + ln for ln in body] + after


_LOCAL = re.compile(r"\b[gh]r\d+\b")
_FIRST_TERM = re.compile(r"^([gh]r\d+) ([+-])= (.*)$")


def _assign_first_terms(body):
    """Turn the first, unconditional term into a gradient local that starts at zero into an
    assignment: ``gr = 0.0; gr += t`` becomes ``gr = t``.

    The addition to zero sits on the loop's critical path (about a fifth of the ODE's
    backward).  The sum differs from the interpreter's only for a term of -0.0, which stays
    -0.0 here, as in PyTorch, where a gradient's first term is likewise not added to zero.
    """
    zero, out = set(), []
    for ln in body:
        m = _FIRST_TERM.match(ln)
        if m and m.group(1) in zero:
            name, sign, term = m.groups()
            out.append(f"{name} = {term}" if sign == "+" else f"{name} = -({term})")
            zero.discard(name)
            continue
        if ln.endswith(" = 0.0") and _LOCAL.fullmatch(ln[:-6]):
            zero.add(ln[:-6])
        else:
            # any other mention (a read, a conditional term) ends the zero state
            zero.difference_update(_LOCAL.findall(ln))
        out.append(ln)
    return out


def generate(cols, need, goff, seeds=()):
    """Python source of ``forward(vals, ext, ...) -> int`` and ``backward(vals, ext, grads,
    ...)`` for a tape of one-element records; each takes, after those, the parameter columns
    it reads (``fp``, ``ip``, ``aux``, ``faux``, in that order).  ``ext``: the replay
    instance's addresses of arguments read in place (``replay.Variant.read_in_place``),
    which only loops over vectors read (``generate_vectors``).

    ``need``/``goff`` are the plan of the backward from the records ``seeds`` (None: no
    backward is generated).  The backward expects the seeds' gradients in ``grads`` and
    clears the rest of what it uses itself; afterwards the gradients of records that emit
    no code (leaves) and of the seeds are in place, the others are not stored.
    Raises Unsupported for tapes it does not cover.
    """
    n = len(cols[0])
    with_grad = need is not None
    if not with_grad:
        need = np.zeros(n, dtype=np.uint8)
        goff = np.zeros(n, dtype=np.int64)
    keys, rows = _records(cols, need, goff)
    fwd, blocks = [], []
    for start, p, m in _blocks(keys, rows):
        # how far each field of each record moves from one repetition to the next
        steps = (rows[start + p:start + 2 * p] - rows[start:start + p] if m > 1
                 else np.zeros((p, 8), dtype=np.int64))
        block = (keys[start:start + p], rows[start:start + p], steps, m)
        fwd += _forward_block(*block)
        blocks.append(block)
    bwd = []
    if with_grad:
        live = np.flatnonzero(need)
        size = cols[4]
        total = max(int((goff[live] + size[live]).max()), 1) if len(live) else 1
        keep = {int(goff[s]) for s in seeds if need[s]}
        # first pass: where each block writes; second: the code, knowing that
        first = _Memory(total)
        for b, block in enumerate(blocks):
            first.block = b
            _backward_block(*block, first, keep)
        written = first.written_before(len(blocks))
        for b in range(len(blocks)):
            written[b][list(keep)] = True
        mem = _Memory(total, written)
        bodies = []
        for b, block in enumerate(blocks):
            mem.block = b
            bodies.append(_backward_block(*block, mem, keep))
        # leaves (and other records that emit no code) read their gradients from the arena
        mem.used += [(int(goff[r]), 1, int(size[r])) for r in live if cols[0][r] <= K.EXTERN]
        bwd = mem.zeroing(keep)
        # the backward runs the blocks last to first
        bwd += [line for body in reversed(bodies) for line in body]
    custom = _custom_preamble(keys)
    # a custom op's rules live in the user's process: such a module is compiled in each
    # process (numba's cache would keep the op's code of the process that wrote it)
    src = ["import numpy as np",
           "from tapegrad._config import " + ("rule as kernel" if custom else "kernel")]
    src += [f"import {mod} as {alias}" for mod, alias in _RULE_MODULES.items()]
    src += custom
    src += ["", "",
           "@kernel", f"def forward({_signature('vals, ext', fwd)}):"]
    src += ["    " + line for line in fwd] + ["    return -1", "", ""]
    src += ["@kernel", f"def backward({_signature('vals, ext, grads', bwd)}):"]
    src += ["    " + line for line in bwd] + ["    return 0", ""]
    return "\n".join(src)


# the tape's parameter columns a generated function may read, in the order it takes them;
# then what calls of entries read: the context of the program's columns (``Program``) and
# the table of entry addresses
_PARAM_COLUMNS = {"fp": 6, "ip": 5, "aux": 7, "faux": 8, "ctx": None, "table": None}
_PARAM_USE = re.compile(r"\b(?:(fp|ip|aux|faux|table)\[|(ctx)\b)")


def _signature(first, lines):
    """The parameter list of a generated function: ``first``, then the parameter columns
    its body reads (each one passed costs numba's dispatcher a type check per call)."""
    used = {a or b for a, b in _PARAM_USE.findall("\n".join(lines))}
    return ", ".join([first] + [name for name in _PARAM_COLUMNS if name in used])


def _param_names(fn, skip):
    code = getattr(fn, "py_func", fn).__code__
    return code.co_varnames[skip:code.co_argcount]


def _context_template(cols, plan):
    """The entries' context (``ops.entries``) for the calls of a generated program: the
    addresses of its own copies of the record columns and of the plan's ``goff`` and
    ``need``, which the program keeps alive; the arenas' slots are filled per call
    (``entries.with_arenas``)."""
    op, a0, a1, voff, size, ip, fp, aux, faux = cols
    need, goff = (plan[0], plan[1]) if plan is not None else (
        np.zeros(len(op), np.uint8), np.zeros(len(op), np.int64))
    kept = {_E.OP: op, _E.A0: a0, _E.A1: a1, _E.VOFF: voff, _E.GOFF: goff, _E.SIZE: size,
            _E.IP: ip, _E.FP: fp, _E.AUX: aux, _E.FAUX: faux, _E.NEED: need}
    kept = {slot: np.array(arr, copy=True) for slot, arr in kept.items()}
    ctx = np.zeros(_E.CONTEXT, dtype=np.int64)
    for slot, arr in kept.items():
        ctx[2 * slot] = arr.ctypes.data
        ctx[2 * slot + 1] = arr.size
    return ctx, tuple(kept.values())


class Program:
    """The generated forward and backward of one replayed tape."""

    __slots__ = ("forward", "backward", "seeds", "plan", "source", "path", "forward_params",
                 "backward_params", "seed", "seed_offset", "total", "leaf_slots", "freed",
                 "arg_backward", "partial", "direct", "context", "context_arrays")

    def __init__(self, module, seeds, plan, source, path, cols, partial=(),
                 interpreted_forward=False, direct=frozenset()):
        # None: the replay runs the interpreter's forward (a tape of vectors whose functions
        # NumPy computes faster: see generate_vectors)
        self.forward = None if interpreted_forward else module.forward
        self.backward = module.backward
        threaded = getattr(module, "backward_parallel", None)
        if threaded is not None:
            # long loops on numba's threads where that is safe (_threads.run), else the
            # same loops on one: the same bits either way
            self.backward = _threads.either(threaded, module.backward)
        self.seeds = seeds        # the backward's seed records (a plan_cache key)
        self.plan = plan          # make_plan's (need, goff, total, ...) it was generated for
        self.source = source
        self.path = path
        # the arena spans (start, end) of the values the forward leaves out (a tape of
        # vectors; empty: none): whatever else reads the arena has them filled in first
        self.partial = partial
        # the argument records it reads where the caller's arrays are, when the replay
        # gives their addresses in ``ext`` (else from the arena)
        self.direct = direct
        op, size = cols[0], cols[4]
        # what each takes after its arenas: the parameter columns its body reads
        names = _param_names(module.forward, 2) + _param_names(module.backward, 3)
        self.context = self.context_arrays = None
        if "ctx" in names:
            self.context, self.context_arrays = _context_template(cols, plan)
        params = {name: cols[i] for name, i in _PARAM_COLUMNS.items() if i is not None}
        params.update(ctx=self.context, table=_E.TABLE)
        self.forward_params = tuple(params[n] for n in _param_names(module.forward, 2))
        self.backward_params = tuple(params[n] for n in _param_names(module.backward, 3))
        self.seed = self.seed_offset = self.freed = None
        self.total = 0
        self.leaf_slots = ()
        # backward() for a replay of positional arguments (_fastcall.backward_for); set by
        # the variant
        self.arg_backward = None
        if plan is not None and len(seeds) == 1:
            # what autograd.program_backward needs, ready as Python ints
            need, goff, total = plan[:3]
            self.seed = int(seeds[0])
            self.seed_offset = int(goff[self.seed])
            self.total = max(int(total), 1)
            self.leaf_slots = tuple((int(r), int(goff[r]), int(size[r]))
                                    for r in np.flatnonzero(need) if op[r] == K.LEAF)
            self.freed = need.astype(bool)
            self.freed.flags.writeable = False


def build(cols, vals, seeds, plan, outputs=(), numpy_from=1024, direct=frozenset(),
          backward_only=False):
    """A compiled Program for the tape ``cols`` with value arena ``vals`` (not changed);
    ``seeds``/``plan`` as in ``Program``; ``outputs``: the records whose values the caller
    reads after the forward; ``numpy_from``, ``direct``: see ``generate_vectors``.

    ``backward_only``: for a tape whose forward has run already (an eager one: hot_tapes.py)
    -- no forward (``Program.forward`` is None), and the backward compiles at its first call
    instead of on a copy of the arenas here.

    Raises Unsupported when the tape is neither one of one-element records nor one of
    elementwise records over vectors."""
    need, goff = (plan[0], plan[1]) if plan is not None else (None, None)
    op, size = cols[0], cols[4]
    skipped, numpy_forward = (), False
    if np.all(size[op > K.EXTERN] == 1):
        source = generate(cols, need, goff, seeds or ())
        direct = frozenset()
    else:
        source, skipped, numpy_forward, direct = generate_vectors(
            cols, need, goff, seeds or (), outputs, numpy_from, direct,
            forward=not backward_only)
    module = _generated.load_module("tapegrad_gen", source)
    path = module.__file__
    voff = cols[3]
    spans = tuple((int(voff[r]), int(voff[r] + size[r])) for r in sorted(skipped))
    prog = Program(module, seeds, plan, source, path, cols, partial=spans,
                   interpreted_forward=numpy_forward or backward_only,
                   direct=frozenset(direct))
    if backward_only:
        return prog
    # compile now (or load from numba's cache), on scratch arenas, not inside a user's call
    scratch, no_ext = vals.copy(), np.zeros(len(op), dtype=np.int64)
    module.forward(scratch, no_ext, *prog.forward_params)
    if plan is not None:
        prog.backward(scratch, no_ext, np.zeros(max(int(plan[2]), 1)), *prog.backward_params)
    return prog



# ---------------------------------------------------------------------------------------------
# Tapes of mid-size vectors: fused loops
#
# The interpreter runs a tape record by record, each a loop over its values that reads its
# inputs from the arena and writes its result there: the cubic fit of ``sin(x)`` at 10^5
# points moves about 14 vectors through memory forward and 30 backward, where the arithmetic
# per value is a few nanoseconds.  Here the records that work value by value -- elementwise
# ops, a broadcast of one value, a sum of all values -- run as one loop over the positions,
# and a value is stored only where something reads it after the loop: a later loop, the
# generated backward (what its rules read, found in their code), or the caller (the tape's
# outputs).  The arena is left incomplete (``Program.partial``); anything else that reads it
# has the interpreter's forward fill it in first (``replay._Instance.vals``).
#
# The sums keep the interpreter's order: a sum of all values adds them first to last from
# 0.0, as ``ops.reduce.sum_fwd`` does, and the gradient of a broadcast value is added to its
# source first to last, as ``ops.structure.expand_s_bwd`` does.  Each position's gradient
# takes its terms in the interpreter's record order.  So the bits are the interpreter's (up to
# the sign of a zero gradient), as for one-element tapes.
# ---------------------------------------------------------------------------------------------
_WHOLE_SUMS = (K.SUM, K.MEAN, K.SUM_DIM, K.MEAN_DIM)
_MEANS = (K.MEAN, K.MEAN_DIM)
_RULE_ARGS = ("g", "x0", "x1", "x2", "out")


def _scalar_of(cols, r):
    """Record r's scalar (its ``fp``) as a literal in the source: a variant's records never
    change, and a constant exponent lets LLVM drop the tests ``power`` makes per value (the
    cubic fit's forward took half the time).  A value without a literal is read."""
    c = float(cols[6][r])
    return repr(c) if np.isfinite(c) else f"fp[{r}]"


def _rule_reads(fn):
    """The names among g, x0, x1, x2 and out that scalar rule ``fn`` reads, from its code
    (not from the op's ``reads`` flags: a value this leaves out is not stored, so it must
    be exact for the code that runs)."""
    code = getattr(fn, "py_func", fn).__code__
    names = set()
    for ins in dis.get_instructions(code):
        arg = ins.argval
        for a in (arg if isinstance(arg, tuple) else (arg,)):
            if isinstance(a, str) and a in _RULE_ARGS:
                names.add(a)
    return names


# Records of these ops sit between the loops as calls of the op's own whole-record rules,
# through their entries (``ops.entries``: compiled once per op, not again in each program),
# the interpreter's code and so its bits: matrix products, the broadcast of a bias over
# rows, indexing, sums over some dims.  Their inputs are read from a0 and a1 only (not
# cat's list in aux) and every rule honours the betas, which generated code passes as 1
# into gradients it cleared itself.  What they read is stored in the arena, and their own
# values are always there.
_CALLED = frozenset((K.MATMUL, K.BCAST, K.GATHER, K.RESHAPE, K.EXPAND_S, K.SUM, K.MEAN,
                     K.SUM_DIM, K.MEAN_DIM))


def _call_entry(pass_, o, r):
    """The statement that runs record r's (op o) entry for ``pass_`` on this call's arenas
    (the context ``cx``: ``_with_context``)."""
    beta = "1.0" if pass_ == _E.BACKWARD else "0.0"
    return f"call(table[{pass_}, {o}], {r}, cx, {beta}, {beta}, 0, 0)"


def _with_context(lines, grads):
    """``lines`` of a generated function, after the line that makes the context ``cx`` of
    this call's arenas where they call entries (once per function: each call site of an
    inlined helper is compiled anew)."""
    if not any(ln.lstrip().startswith("call(table[") for ln in lines):
        return lines
    return [f"cx = with_arenas(ctx, vals, ext, {grads})"] + lines


class _VectorTape:
    """The records of a tape sorted into what generated loops do with them.

    ``kind[r]``: 'v' an elementwise record of n values whose inputs hold n values each,
    'b' a broadcast of one value to n, 'r' a sum (or mean) of all n values of its input,
    's' a one-element record of one-element inputs, 'a' a record of an op in ``_CALLED``
    (a call of its own rule), None a leaf, constant or extern.
    ``segments``: in tape order, ('s', records) straight code, ('a', [record]) a call, or
    ('l', n, records) a loop.
    """

    def __init__(self, cols):
        op = cols[0]
        self.cols = cols
        self.direct = frozenset()   # arguments the loops read where ext says (see above)
        n_rec = len(op)
        self.kind = [None] * n_rec
        self.loop_of = np.full(n_rec, -1, dtype=np.int64)
        self.segments = []
        loop = None   # [n, records, reductions] of the loop being filled
        for r in range(n_rec):
            o = int(op[r])
            if o <= K.EXTERN:
                continue
            kind, length = self._classify(r, o)
            self.kind[r] = kind
            if kind == "a":
                loop = None
                self.segments.append(("a", [r]))
                continue
            if kind == "s":
                loop = None
                if self.segments and self.segments[-1][0] == "s":
                    self.segments[-1][1].append(r)
                else:
                    self.segments.append(("s", [r]))
                continue
            ins = self.inputs(r)
            if (loop is None or loop[0] != length or any(s in loop[2] for s in ins)):
                # a new loop: another length, or a record that needs a whole sum made in
                # the loop so far
                loop = [length, [], set()]
                self.segments.append(("l", length, loop[1]))
            loop[1].append(r)
            self.loop_of[r] = len(self.segments) - 1
            if kind == "r":
                loop[2].add(r)

    def inputs(self, r):
        a0, a1, ip = self.cols[1], self.cols[2], self.cols[5]
        o = int(self.cols[0][r])
        if o <= K.EXTERN:
            return ()
        ins = [int(s) for s in (a0[r], a1[r]) if s >= 0]
        if o != K.CMP and K.OPS[o].condition:
            ins.append(int(ip[r]))
        return ins

    def _classify(self, r, o):
        """(kind, loop length) of record r (opcode o), or Unsupported."""
        size, ip, aux = self.cols[4], self.cols[5], self.cols[7]
        info = K.OPS.get(o)
        name = info.name if info is not None else str(o)
        n = int(size[r])
        sizes = [int(size[s]) for s in self.inputs(r)]
        if o == K.EXPAND_S and n > 1 and sizes == [1]:
            return "b", n
        if (o in _WHOLE_SUMS and n == 1 and int(aux[ip[r]]) == 1 and int(aux[ip[r] + 2]) == 1
                and sizes[0] > 1):
            return "r", sizes[0]
        scalar = o in (K.CMP, K.GUARD) or (o not in (K.CUSTOM, K.GATHER, K.BCAST)
                                           and _scalar_rules(o) is not None)
        if scalar and n == 1 and all(m == 1 for m in sizes):
            return "s", 1
        elementwise = o == K.CMP or (info is not None and info.family == T.ELEMENTWISE)
        if elementwise and n > 1 and all(m == n for m in sizes):
            return "v", n
        if o in _CALLED and not (o == K.GATHER and int(aux[ip[r]]) in K.VALUE_SELECTED):
            # (indices chosen by value, sort's and topk's, are left to the interpreter)
            return "a", n
        raise Unsupported(f"record {r} ({name}) is not elementwise over its inputs' "
                          f"{sizes} values, a broadcast of one value, a sum of all or a "
                          "record whose own rules generated code calls")


def _value_reads(vt, need):
    """The records whose values a generated backward reads: per record it sweeps, the
    operands its rules read for the inputs that need a gradient."""
    op, a0, a1 = vt.cols[0], vt.cols[1], vt.cols[2]
    ip = vt.cols[5]
    read = set()
    for r, kind in enumerate(vt.kind):
        if kind not in ("v", "s") or not need[r] or int(op[r]) == K.CMP:
            continue
        rules = _scalar_rules(int(op[r]))
        names = set()
        for i, s in enumerate((int(a0[r]), int(a1[r]))):
            if s >= 0 and need[s] and rules[1 + i] is not None:
                names |= _rule_reads(rules[1 + i])
        # (an operand a one-input op does not have stands in as x0, as in the family loops)
        x0 = int(a0[r])
        where = {"x0": x0, "x1": int(a1[r]) if a1[r] >= 0 else x0, "out": r,
                 "x2": int(ip[r]) if K.OPS[int(op[r])].condition else x0}
        read |= {where[nm] for nm in names if nm in where}
    return read


def _numpy_sum(vt, r, numpy_from):
    """Whether the replay sums record r's input with NumPy (``replay.forward_plan``: a whole
    SUM or MEAN of ``numpy_from`` values or more, pairwise, as eager mode sums), so that the
    generated forward does too, between two of its kernels."""
    op, a0, size = vt.cols[0], vt.cols[1], vt.cols[4]
    return (vt.kind[r] == "r" and int(op[r]) in (K.SUM, K.MEAN)
            and int(size[a0[r]]) >= numpy_from)


def _stored(vt, need, outputs, numpy_from):
    """The vector records whose values the generated forward stores."""
    keep = set(outputs)
    keep |= {int(vt.cols[1][r]) for r in range(len(vt.kind)) if _numpy_sum(vt, r, numpy_from)}
    called = _called_inputs(vt)
    keep |= called
    if need is not None:
        keep |= _value_reads(vt, need)
    for r, kind in enumerate(vt.kind):
        for s in vt.inputs(r):
            if vt.kind[s] == "v" and vt.loop_of[s] != vt.loop_of[r]:
                keep.add(s)
    # (a broadcast's own values are stored only for the caller and the calls: the loops
    # read its source)
    return {r for r in keep
            if vt.kind[r] == "v" or (vt.kind[r] == "b" and (r in outputs or r in called))}


def _called_inputs(vt, read_in_place=frozenset()):
    """The records the calls ('a') read: their rules read them from the arena.  Calls of the
    ops in ``read_in_place`` are left out: those read an argument where it is (the matrix
    product, through ``value_at``)."""
    op = vt.cols[0]
    return {s for r, kind in enumerate(vt.kind)
            if kind == "a" and int(op[r]) not in read_in_place for s in vt.inputs(r)}


def _vector_forward(vt, stored, numpy_from):
    """The forward as stages: (lines of a kernel, the NumPy sums after it as (output slot,
    input slot, count, scale or None for a mean)).  A loop whose whole sums NumPy makes
    ends a stage."""
    op, a0, a1, voff, ip = vt.cols[0], vt.cols[1], vt.cols[2], vt.cols[3], vt.cols[5]
    stages = []
    lines = []
    for seg in vt.segments:
        if seg[0] == "a":
            r = seg[1][0]
            lines.append(_call_entry(_E.FORWARD, int(op[r]), r))
            continue
        if seg[0] == "s":
            local = {}
            zero = np.zeros(8, dtype=np.int64)
            for r in seg[1]:
                o = int(op[r])
                key = (o, int(a1[r]) >= 0, 0, 0, 0, int(ip[r]) if o == K.CMP else 0)
                s2 = int(voff[ip[r]]) if o == K.WHERE else 0
                row = (r, int(voff[r]), int(voff[a0[r]]),
                       int(voff[a1[r]]) if a1[r] >= 0 else 0, s2)
                lines += _forward_lines(key, row, zero, local, {}, r)
            continue
        _, n, recs = seg
        before, body, after = [], [], []
        names = {}
        sums = []

        def operand(s):
            if s not in names and vt.kind[s] == "b":
                # a broadcast made in an earlier loop (a replay merges equal ones): its
                # source again, not stored values
                before.append(f"b{s} = vals[{int(voff[a0[s]])}]")
                names[s] = f"b{s}"
            if s in vt.direct:
                return f"d{s}[k]"
            return names.get(s) or f"vals[{int(voff[s])} + k]"

        for r in recs:
            o, kind = int(op[r]), vt.kind[r]
            if kind == "b":
                before.append(f"b{r} = vals[{int(voff[a0[r]])}]")
                names[r] = f"b{r}"
                if r in stored:
                    body.append(f"vals[{int(voff[r])} + k] = b{r}")
            elif kind == "r" and _numpy_sum(vt, r, numpy_from):
                sums.append((int(voff[r]), int(voff[a0[r]]), n,
                             None if o == K.MEAN else _scalar_of(vt.cols, r)))
            elif kind == "r":
                before.append(f"s{r} = 0.0")
                body.append(f"s{r} += {operand(int(a0[r]))}")
                # (divided by the count, as ops.reduce.sum_fwd does)
                after.append(f"vals[{int(voff[r])}] = s{r}" + (f" / {n}" if o in _MEANS else ""))
            else:
                x0 = operand(int(a0[r]))
                x1 = operand(int(a1[r])) if a1[r] >= 0 else None
                if o == K.CMP:
                    rhs = x1 if x1 is not None else f"c{r}"
                    if x1 is None:
                        before.append(f"c{r} = {_scalar_of(vt.cols, r)}")
                    body.append(f"v{r} = 1.0 if {x0} {_CMP_OPS[int(ip[r])]} {rhs} else 0.0")
                else:
                    info = K.OPS[o]
                    x2 = operand(int(ip[r])) if info.condition else x0
                    before.append(f"c{r} = {_scalar_of(vt.cols, r)}")
                    params = "0.0, 0.0"
                    if info.params:
                        before += [f"p0_{r} = faux[ip[{r}]]", f"p1_{r} = faux[ip[{r}] + 1]"]
                        params = f"p0_{r}, p1_{r}"
                    args = f"{x0}, {x1 if x1 is not None else x0}, {x2}, c{r}, {params}"
                    body.append(f"v{r} = {_call(_scalar_rules(o)[0], args)}")
                if r in stored:
                    body.append(f"vals[{int(voff[r])} + k] = v{r}")
                names[r] = f"v{r}"
        reads = {s for r in recs for s in vt.inputs(r)}
        lines += _direct_views(vt, reads) + before + _loop(n, body) + after
        if sums:
            stages.append((lines, sums))
            lines = []
    if lines or not stages:
        stages.append((lines, []))
    return stages


def _forward_source(stages):
    """The forward's source: the kernel itself for one stage without sums, else a Python
    function that calls each stage's kernel and sums with NumPy after it (as the replay's
    ``_forward_steps`` does, its warnings quiet)."""
    if len(stages) == 1 and not stages[0][1]:
        lines = stages[0][0]
        lines = _with_context(lines, "vals")
        return (["@kernel", f"def forward({_signature('vals, ext', lines)}):"]
                + ["    " + ln for ln in lines] + ["    return -1", ""])
    src, calls = [], []
    stages = [(_with_context(lines, "vals"), sums) for lines, sums in stages]
    for i, (lines, sums) in enumerate(stages):
        sig = _signature("vals, ext", lines)
        src += ["@kernel", f"def forward_{i}({sig}):"]
        src += ["    " + ln for ln in lines] + ["    return -1", "", ""]
        calls += [f"bad = forward_{i}({sig})", "if bad != -1:", "    return bad"]
        if sums:
            calls += ["tok = quiet_begin()", "try:"]
            for o, x, n, scale in sums:
                total = f"vals[{x}:{x + n}].sum()"
                calls.append(f"    vals[{o}] = {total} / {n}" if scale is None
                             else f"    vals[{o}] = {total} * {scale}")
            calls += ["finally:", "    quiet_end(tok)"]
    every = _signature("vals, ext", [ln for lines, _ in stages for ln in lines])
    return src + [f"def forward({every}):"] + ["    " + ln for ln in calls] + [
        "    return -1", ""]


def _direct_views(vt, reads):
    """Lines that name each argument the loop reads in place (``vt.direct``) ``d{r}``: the
    caller's array where ``ext`` holds its address, else the arena's copy."""
    voff, size = vt.cols[3], vt.cols[4]
    lines = []
    for r in sorted(set(reads) & vt.direct):
        lo, n = int(voff[r]), int(size[r])
        lines += [f"if {r} < ext.size and ext[{r}] != 0:",
                  f"    d{r} = view_f64(ext[{r}], {n})",
                  "else:",
                  f"    d{r} = vals[{lo}:{lo + n}]"]
    return lines


_AT_K = re.compile(r"\b(vals|grads)\[(\d+) \+ k\]")


def _loop(n, body, parallel=False):
    """A loop over the n positions (none where nothing is done per position), on numba's
    threads if ``parallel``."""
    if not body:
        return []
    if not parallel:
        return [f"for k in range({n}):"] + ["    " + ln for ln in body]
    # On threads the arenas are read through slices made before the loop: numba's parallel
    # loop did not prove ``vals[c + k]`` in bounds the way the one-thread loop does, and
    # ran its body four times slower for it (W4's backward, measured)
    spans = sorted({(arena, int(off)) for ln in body for arena, off in _AT_K.findall(ln)})
    head = [f"{arena[0]}s{off} = {arena}[{off}:{off + n}]" for arena, off in spans]
    body = [_AT_K.sub(lambda m: f"{m.group(1)[0]}s{m.group(2)}[k]", ln) for ln in body]
    return head + [f"for k in prange({n}):"] + ["    " + ln for ln in body]


# A backward loop of at least this many positions may run on numba's threads (in
# ``backward_parallel``), when nothing in it carries from one position to the next: a loop
# that adds a broadcast's gradient into its source does, and keeps to one thread, as the
# interpreter adds those in order.  Everything else a position does is its own, so its
# bits do not depend on how positions are shared out.  Starting the threads costs about
# ten microseconds: below this a loop is done sooner on one.
PARALLEL_MIN = 100_000


def _vector_backward(vt, need, goff, seeds, parallel_from=None):
    """The backward's lines, and whether a loop runs on threads (``parallel_from``: the
    loop length from which one may, None: none)."""
    op, a0, a1, voff, size, ip = vt.cols[:6]
    kind = vt.kind
    n_rec = len(op)
    # where each record's gradient goes: 'mem' the arena (cleared first unless a seed),
    # 'trip' a local of one loop's trip, stored at its end (a leaf all of whose terms come
    # from one loop), 'local' a local never stored
    readers = {}
    for r in range(n_rec):
        for s in vt.inputs(r):
            if need[r] and need[s]:
                readers.setdefault(s, set()).add(
                    int(vt.loop_of[r]) if kind[r] not in ("s", "a") else -2)
    home = {}
    for r in range(n_rec):
        if not need[r]:
            continue
        loops = readers.get(r, set())
        if size[r] == 1 or kind[r] in ("r", "a"):
            home[r] = "mem"
        elif kind[r] in ("v", "b"):
            home[r] = "local" if loops <= {int(vt.loop_of[r])} else "mem"
        else:   # a leaf or extern of n values
            home[r] = "trip" if len(loops) == 1 and -2 not in loops else "mem"
    seed_set = set(int(s) for s in seeds)
    lines = []
    threaded = False
    for r in range(n_rec):
        if home.get(r) == "mem" and r not in seed_set:
            lo, m = int(goff[r]), int(size[r])
            lines.append(f"grads[{lo}] = 0.0" if m == 1 else f"grads[{lo}:{lo + m}] = 0.0")

    for seg in reversed(vt.segments):
        if seg[0] == "a":
            r = seg[1][0]
            if need[r]:
                # (its inputs' gradients are in memory, cleared above: betas of 1)
                lines.append(_call_entry(_E.BACKWARD, int(op[r]), r))
            continue
        if seg[0] == "s":
            for r in reversed(seg[1]):
                o = int(op[r])
                if not need[r] or o in (K.CMP, K.GUARD):
                    continue
                rules = _scalar_rules(o)
                info = K.OPS[o]
                x = {"g": f"grads[{int(goff[r])}]", "x0": f"vals[{int(voff[a0[r]])}]",
                     "out": f"vals[{int(voff[r])}]"}
                x["x1"] = f"vals[{int(voff[a1[r]])}]" if a1[r] >= 0 else x["x0"]
                x["x2"] = f"vals[{int(voff[ip[r]])}]" if info.condition else x["x0"]
                c = f"fp[{r}]"
                p = (f"faux[ip[{r}]], faux[ip[{r}] + 1]" if info.params else "0.0, 0.0")
                for i, s in enumerate((int(a0[r]), int(a1[r]))):
                    if s >= 0 and need[s] and rules[1 + i] is not None:
                        args = f"{x['g']}, {x['x0']}, {x['x1']}, {x['x2']}, {x['out']}, {c}, {p}"
                        lines.append(f"grads[{int(goff[s])}] += {_call(rules[1 + i], args)}")
            continue
        _, n, recs = seg
        here = set(recs)
        before, start, body, end, after = [], [], [], [], []
        trip_leaves = sorted({s for r in recs for s in vt.inputs(r)
                              if need[r] and home.get(s) == "trip"})
        summed = set()   # the values whose gradient a broadcast adds to in the loop

        def target(s):
            if s in here or home.get(s) == "trip":
                return f"gr{s}"
            return f"grads[{int(goff[s])} + k]"

        def value(s):
            if kind[s] == "b":
                return f"b{s}"
            if s in vt.direct:
                return f"d{s}[k]"
            return f"vals[{int(voff[s])} + k]"

        # the broadcasts this loop makes or reads: their sources, read once
        for b in sorted({s for r in recs for s in [r] + list(vt.inputs(r)) if kind[s] == "b"}):
            before.append(f"b{b} = vals[{int(voff[a0[b]])}]")
        for r in recs:
            if not need[r] or kind[r] == "r" or int(op[r]) == K.CMP:
                continue
            start.append(f"gr{r} = grads[{int(goff[r])} + k]" if home[r] == "mem"
                         else f"gr{r} = 0.0")
        for s in trip_leaves:
            start.append(f"gr{s} = 0.0")
            end.append(f"grads[{int(goff[s])} + k] = gr{s}")
        for r in reversed(recs):
            o = int(op[r])
            if not need[r] or o == K.CMP:
                continue
            if kind[r] == "b":
                src = int(a0[r])
                if not need[src]:
                    continue
                gs = int(goff[src])
                if src not in summed:
                    # the last broadcast of a value adds its gradient to it in the loop
                    summed.add(src)
                    before.append(f"ab{r} = grads[{gs}]")
                    body.append(f"ab{r} += gr{r}")
                    after.append(f"grads[{gs}] = ab{r}")
                else:
                    # an earlier one keeps its gradient and adds it after the loop: the
                    # interpreter adds one broadcast's whole sum after the other's, and
                    # interleaved in one loop the additions would round otherwise
                    g0 = int(goff[r])
                    body.append(f"grads[{g0} + k] = gr{r}")
                    after += [f"ab{r} = grads[{gs}]", f"for k in range({n}):",
                              f"    ab{r} += grads[{g0} + k]", f"grads[{gs}] = ab{r}"]
                continue
            if kind[r] == "r":
                src = int(a0[r])
                if need[src]:
                    # (the gradient times the scale once, then added: ops.reduce.sum_bwd)
                    before.append(f"go{r} = grads[{int(goff[r])}] * {_scalar_of(vt.cols, r)}")
                    body.append(f"{target(src)} += go{r}")
                continue
            rules = _scalar_rules(o)
            info = K.OPS[o]
            x = {"g": f"gr{r}", "x0": value(int(a0[r])), "out": f"vals[{int(voff[r])} + k]"}
            x["x1"] = value(int(a1[r])) if a1[r] >= 0 else x["x0"]
            x["x2"] = value(int(ip[r])) if info.condition else x["x0"]
            p = "0.0, 0.0"
            if info.params:
                before += [f"q0_{r} = faux[ip[{r}]]", f"q1_{r} = faux[ip[{r}] + 1]"]
                p = f"q0_{r}, q1_{r}"
            terms = []
            for i, s in enumerate((int(a0[r]), int(a1[r]))):
                if s >= 0 and need[s] and rules[1 + i] is not None:
                    reads = _rule_reads(rules[1 + i])
                    # an operand the rule does not read is not stored: pass a zero
                    a = {nm: (x[nm] if nm in reads or nm == "g" else "0.0") for nm in x}
                    args = f"{a['g']}, {a['x0']}, {a['x1']}, {a['x2']}, {a['out']}, c{r}, {p}"
                    terms.append(f"{target(s)} += {_call(rules[1 + i], args)}")
            if terms:
                before.append(f"c{r} = {_scalar_of(vt.cols, r)}")
                body += terms
        if body or end:
            body = _assign_first_terms(start + body + end)
        reads = {s for r in recs for s in vt.inputs(r)}
        parallel = parallel_from is not None and n >= parallel_from and not summed
        threaded = threaded or (parallel and bool(body))
        lines += _direct_views(vt, reads) + before + _loop(n, body, parallel) + after
    return lines, threaded


def _compile_entries(vt, need, forward):
    """Compile (or load) the entries the calls ('a') run, before the program is: generated
    code reads their addresses from the table at each call."""
    op = vt.cols[0]
    for r, kind in enumerate(vt.kind):
        if kind != "a":
            continue
        o = int(op[r])
        for pass_, wanted in ((_E.FORWARD, forward), (_E.BACKWARD, need is not None
                                                       and need[r])):
            if wanted:
                _E.ensure(pass_, o)
                if _E.TABLE[pass_, o] < 0:
                    raise Unsupported(f"{K.OPS[o].name} has no {_E.PASSES[pass_]} rule")


def generate_vectors(cols, need, goff, seeds=(), outputs=(), numpy_from=1024,
                     direct=frozenset(), forward=True):
    """(source, skipped, numpy_forward, direct) for a tape of elementwise records over
    vectors (see this section's comment): the Python source of ``forward`` and ``backward``
    (as ``generate``), the records whose values the forward leaves out of the arena, whether
    the replay should run the interpreter's forward instead of this one (then nothing is
    left out), and the argument records the loops may read in place.

    ``outputs``: the records whose values the caller reads; ``numpy_from``: the size from
    which the replay sums with NumPy (``_numpy_sum``); ``direct``: argument records the
    replay may give in ``ext`` (the address of the caller's array, 0 where it copied it into
    the arena as usual), which the loops then read where they are.  Raises Unsupported for
    tapes it does not cover.

    A tape with a function NumPy computes for a whole vector (its ``numpy`` twin: exp,
    tanh, sin ...) keeps the interpreter's forward, which calls NumPy for large records:
    NumPy's SIMD loops ran W4's forward (tanh and exp of 10^7 values) about twice as fast
    as the one loop of scalar calls, which the backward does not make (its rules read the
    values made).  Its backward is generated all the same.

    ``forward=False``: the backward alone, for values all in the arena (as with NumPy's
    functions: the forward is left empty, and nothing out)."""
    vt = _VectorTape(cols)
    if not any(seg[0] == "l" for seg in vt.segments):
        raise Unsupported("no record holds more than one value")
    op = cols[0]
    numpy_forward = not forward or any(k == "v" and K.OPS[int(op[r])].numpy is not None
                                       for r, k in enumerate(vt.kind))
    stored = set(r for r, k in enumerate(vt.kind) if k in ("v", "b")) if numpy_forward \
        else _stored(vt, need, outputs, numpy_from)
    # (an interpreted forward leaves an empty one to compile)
    # (an input NumPy sums is read from the arena: the sum runs outside the kernels)
    summed = {int(cols[1][r]) for r in range(len(op)) if _numpy_sum(vt, r, numpy_from)}
    # (a call reads an argument where it is only through value_at: the matrix product's)
    called = _called_inputs(vt, read_in_place=(K.MATMUL,))
    # (an interpreted forward reads the arena, so a replay copies its arguments in; the
    # backward alone of an eager tape reads where ext says: hot_tapes' large constants)
    vt.direct = frozenset() if numpy_forward and forward else \
        frozenset(direct) - summed - called
    _compile_entries(vt, need, forward=not numpy_forward)
    stages = [([], [])] if numpy_forward else _vector_forward(vt, stored, numpy_from)
    bwd, par = [], None
    if need is not None:
        bwd, _ = _vector_backward(vt, need, goff, seeds)
        bwd = _with_context(bwd, "grads")
        if any(seg[0] == "l" and seg[1] >= PARALLEL_MIN for seg in vt.segments):
            par, threaded = _vector_backward(vt, need, goff, seeds, PARALLEL_MIN)
            par = _with_context(par, "grads") if threaded else None
    if sum(len(lines) for lines, _ in stages) + len(bwd) > 4 * MAX_STATEMENTS:
        raise Unsupported(f"more than {4 * MAX_STATEMENTS} lines would be written out")
    skipped = {r for r, k in enumerate(vt.kind) if k in ("v", "b") and r not in stored}
    assert not (numpy_forward and skipped)
    src = ["import numpy as np", "from tapegrad._config import kernel, parallel_kernel, prange",
           "from tapegrad._quiet import quiet_begin, quiet_end",
           "from tapegrad.ops.entries import call, view_f64, with_arenas"]
    src += [f"import {mod} as {alias}" for mod, alias in _RULE_MODULES.items()]
    src += ["", ""] + _forward_source(stages) + [""]
    src += ["@kernel", f"def backward({_signature('vals, ext, grads', bwd)}):"]
    src += ["    " + line for line in bwd] + ["    return 0", ""]
    if par:
        # the same, its long loops on numba's threads (PARALLEL_MIN); the same parameters
        src += ["@parallel_kernel",
                f"def backward_parallel({_signature('vals, ext, grads', bwd)}):"]
        src += ["    " + line for line in par] + ["    return 0", ""]
    return "\n".join(src), skipped, numpy_forward, vt.direct
