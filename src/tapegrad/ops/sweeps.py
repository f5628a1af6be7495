"""The compiled passes over a tape: ``plan``, ``sweep`` (reverse), ``forward`` (replay),
``tangent`` (forward mode), ``curvature`` (forward over reverse), ``batch_replay``.

They hold the control flow of a pass -- which records run, in what order, where gradients
live -- and no math.  A record of one value runs its op's scalar rules through the inlined
one-element chains (``D``); a larger one calls its op's entry for the pass through
``entries.TABLE`` (passed in as ``table``).  A pass that reaches a record whose entry is
not compiled yet stops there, before doing anything of that record, and returns
``entries.MISSING - r``: the caller (``ops.__init__``) compiles it and goes on from r (a
check of the whole tape before each pass cost every record a few ns on every call).
What a pass needs to know about an opcode is a row of the flag arrays below, read off the
table.
"""
import numpy as np

from .._config import inline, kernel, parallel_kernel, prange
from . import dispatch
from . import entries as E
from . import table as T
from .structure import CAT, EXTERN, GUARD, LEAF, STACK, WRITE, guard_holds

D = dispatch.one_element_module()


def _flags(test):
    out = np.zeros(max(T.OPS) + 1, dtype=np.bool_)
    for code, info in T.OPS.items():
        out[code] = bool(test(info))
    out.flags.writeable = False
    return out


# records the sweep passes over: they have no inputs to send a gradient to
_NO_RULE = _flags(lambda i: i.family == T.DATA)
# a record that depends on a leaf (LEAF and EXTERN start the dependence; CONST, CMP, GUARD
# have none)
_STARTS = _flags(lambda i: i.code in (LEAF, EXTERN))
# inputs listed in aux (concatenation) instead of a0/a1
_MANY = _flags(lambda i: i.code in (CAT, STACK))
# hot elementwise ops: a one-element record runs the scalar rules on the arenas directly
# (other ops' one-element records call their entry, as larger records do)
_ONE = _flags(lambda i: i.hot)
# may write its inputs' first gradient instead of adding to a cleared one
_FIRST_WRITE = _flags(lambda i: i.first_write)
# curvature: 0 nothing to add (linear), 1 a rule to run, -1 no rule (the caller takes
# another route)
_CURVATURE = np.array([
    (-1 if c not in T.OPS else
     0 if T.OPS[c].family == T.DATA else
     1 if "d2" in T.OPS[c].rules else
     -1 if T.OPS[c].rules.get("curvature") is None else
     0 if T.OPS[c].rules["curvature"] == T.LINEAR else 1)
    for c in range(max(T.OPS) + 1)], dtype=np.int8)
_CURVATURE.flags.writeable = False
_SCALAR_CURVATURE = _flags(lambda i: i.hot and "d2" in i.rules)
# what an elementwise record's scalar rules read: a second input, where's condition (the
# record ``ip`` names), two faux parameters
_BINARY = _flags(lambda i: i.family == T.ELEMENTWISE and i.arity == 2)
_COND = _flags(lambda i: i.condition)
_PARAMS = _flags(lambda i: i.params > 0)


@inline
def _known(o):
    return 0 <= o < _NO_RULE.size


# ---------------------------------------------------------------------------------------------
# plan
# ---------------------------------------------------------------------------------------------
@inline
def _touch(s, need, goff, size, top):
    """Lay out record s's gradient just below ``top`` if it is needed and has no place yet."""
    if s >= 0 and need[s] and goff[s] == -2:
        goff[s] = top - size[s]
        return top - size[s]
    return top


@inline
def _shares_gradient(r, op, a0, need):
    """Whether record r's input a0 takes r's gradient memory: an in-place write (WRITE),
    whose base's gradient is r's with the written elements moved out."""
    return op[r] == WRITE and need[r] and need[a0[r]]


@kernel
def plan(op, a0, a1, size, ip, aux, seeds, n_rec, need, goff):
    """Mark the records that lead to a seed and need a gradient; lay out their gradients.

    need[r] = 1 for records on a path from a seed down to a leaf; goff[r] is the offset of
    record r's gradient in the gradient arena.  Returns ``(total, fresh, scalars)``: the
    arena length needed, where the part ``sweep`` clears itself (``[0, fresh)``) ends, and
    how many needed records are one-element records of hot ops (which sweep to pick).

    Two passes: forward, which records depend on a leaf at all (a broadcast copy of a constant
    does not, and its rule must not run: it would write to a gradient that has no place);
    backward, which of those a seed reaches.  Then the layout, from the top of the arena
    down: the seeds (the caller clears and seeds them), then every other gradient in the
    order the sweep first adds to it, so that the sweep can clear each just before it is
    used, when it is about to be in cache anyway, and a matrix product can write its first
    contribution instead of adding it.  A tape of numbers only is laid out in record order
    and cleared by the caller.
    """
    for r in range(n_rec):
        o = op[r]
        dep = 0
        if _STARTS[o]:
            dep = 1
        elif _MANY[o]:
            k_in = aux[ip[r]]
            for j in range(k_in):
                if need[aux[ip[r] + 1 + 3 * j]]:
                    dep = 1
        elif not _NO_RULE[o]:
            if (a0[r] >= 0 and need[a0[r]]) or (a1[r] >= 0 and need[a1[r]]):
                dep = 1
        need[r] = dep
    for s in seeds:
        if need[s]:
            need[s] = 3
    for r in range(n_rec - 1, -1, -1):
        if need[r] != 3:
            continue
        o = op[r]
        if _MANY[o]:
            k_in = aux[ip[r]]
            for j in range(k_in):
                src = aux[ip[r] + 1 + 3 * j]
                if need[src]:
                    need[src] = 3
            continue
        if a0[r] >= 0 and need[a0[r]]:
            need[a0[r]] = 3
        if a1[r] >= 0 and need[a1[r]]:
            need[a1[r]] = 3
    for r in range(n_rec):
        need[r] = 1 if need[r] == 3 else 0
        goff[r] = -1
    # -2: a gradient some rule the sweep runs adds to (every needed record but the seeds)
    for r in range(n_rec):
        if need[r] and not _NO_RULE[op[r]]:
            o = op[r]
            if _MANY[o]:
                for j in range(aux[ip[r]]):
                    src = aux[ip[r] + 1 + 3 * j]
                    if need[src]:
                        goff[src] = -2
            else:
                if a0[r] >= 0 and need[a0[r]]:
                    goff[a0[r]] = -2
                if a1[r] >= 0 and need[a1[r]]:
                    goff[a1[r]] = -2
    total = 0
    one_element = True
    scalars = 0     # needed one-element records of hot ops (see sweep_vectors)
    for r in range(n_rec):
        if need[r]:
            total += size[r]
            one_element = one_element and size[r] == 1
            if size[r] == 1 and _ONE[op[r]]:
                scalars += 1
    if one_element:
        # a tape of numbers: record order, all cleared by the caller (a tiny arena; and
        # generated code rolls a loop of records from the strides of this layout)
        total = 0
        for r in range(n_rec):
            if need[r]:
                goff[r] = total
                total += 1
        return total, 0, scalars
    top = total
    for s in seeds:
        if need[s] and goff[s] < 0:
            top -= size[s]
            goff[s] = top
    for r in range(n_rec):
        if need[r] and goff[r] == -1:
            # not a seed and no rule adds to it (none such, as need is built): cleared by
            # the caller with the seeds
            top -= size[r]
            goff[r] = top
    fresh = top
    for r in range(n_rec - 1, -1, -1):
        if need[r] and not _NO_RULE[op[r]]:
            o = op[r]
            if _MANY[o]:
                for j in range(aux[ip[r]]):
                    top = _touch(aux[ip[r] + 1 + 3 * j], need, goff, size, top)
            else:
                if _shares_gradient(r, op, a0, need) and goff[a0[r]] == -2:
                    # (a0 has no reader after r: nothing added to its gradient before)
                    goff[a0[r]] = goff[r]
                else:
                    top = _touch(a0[r], need, goff, size, top)
                top = _touch(a1[r], need, goff, size, top)
    if top > 0:
        # gradients that share memory left [0, top) unused: move the layout down onto it
        for r in range(n_rec):
            if goff[r] >= 0:
                goff[r] -= top
        total -= top
        fresh -= top
    return total, fresh, scalars


# ---------------------------------------------------------------------------------------------
# sweep
# ---------------------------------------------------------------------------------------------
@inline
def _touched_start(r, op, a0, a1, goff, ip, aux, need, fresh):
    """The start of the lowest gradient record r's rule adds to (``fresh`` if none)."""
    start = fresh
    if _MANY[op[r]]:
        for j in range(aux[ip[r]]):
            s = aux[ip[r] + 1 + 3 * j]
            if need[s]:
                start = min(start, goff[s])
    else:
        s = a0[r]
        if s >= 0 and need[s]:
            start = min(start, goff[s])
        s = a1[r]
        if s >= 0 and need[s]:
            start = min(start, goff[s])
    return start


@inline
def _first_write(r, a0, a1, goff, size, need, start, fresh):
    """The betas of record r's rule for its two inputs: 0.0 for an input whose gradient it
    writes instead of adding to, when grads[start:fresh], the part of the arena it adds to
    first, is exactly those gradients (one, or both one below the other, as ``plan`` lays
    them out); (1.0, 1.0), and the part is to be cleared, otherwise."""
    s0, s1 = a0[r], a1[r]
    f0 = s0 >= 0 and need[s0] and goff[s0] < fresh
    f1 = s1 >= 0 and need[s1] and goff[s1] < fresh and s1 != s0
    if f0 and f1:
        if (goff[s0] + size[s0] == fresh and goff[s1] + size[s1] == goff[s0]
                and start == goff[s1]):
            return 0.0, 0.0
    elif f0:
        if goff[s0] + size[s0] == fresh and start == goff[s0]:
            return 0.0, 1.0
    elif f1:
        if goff[s1] + size[s1] == fresh and start == goff[s1]:
            return 1.0, 0.0
    return 1.0, 1.0


@inline
def _context(op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need):
    """The entries' context: every column's address and length (entries.py).  Written out
    rather than through ``E.put``: numba inlines a helper by copying and retyping its code
    at every call, and fourteen of them were 0.2 s of a first backward's compile."""
    c = np.zeros(E.CONTEXT, dtype=np.int64)
    c[2 * E.OP] = op.ctypes.data
    c[2 * E.OP + 1] = op.size
    c[2 * E.A0] = a0.ctypes.data
    c[2 * E.A0 + 1] = a0.size
    c[2 * E.A1] = a1.ctypes.data
    c[2 * E.A1 + 1] = a1.size
    c[2 * E.VOFF] = voff.ctypes.data
    c[2 * E.VOFF + 1] = voff.size
    c[2 * E.GOFF] = goff.ctypes.data
    c[2 * E.GOFF + 1] = goff.size
    c[2 * E.SIZE] = size.ctypes.data
    c[2 * E.SIZE + 1] = size.size
    c[2 * E.IP] = ip.ctypes.data
    c[2 * E.IP + 1] = ip.size
    c[2 * E.FP] = fp.ctypes.data
    c[2 * E.FP + 1] = fp.size
    c[2 * E.AUX] = aux.ctypes.data
    c[2 * E.AUX + 1] = aux.size
    c[2 * E.FAUX] = faux.ctypes.data
    c[2 * E.FAUX + 1] = faux.size
    c[2 * E.VALS] = vals.ctypes.data
    c[2 * E.VALS + 1] = vals.size
    c[2 * E.EXT] = ext.ctypes.data
    c[2 * E.EXT + 1] = ext.size
    c[2 * E.GRADS] = grads.ctypes.data
    c[2 * E.GRADS + 1] = grads.size
    c[2 * E.NEED] = need.ctypes.data
    c[2 * E.NEED + 1] = need.size
    return c


@inline
def _entry(r, o, context, op, a0, a1, goff, size, ip, aux, grads, need, fresh, table, resume):
    """Run record r's backward entry (op o; r is needed and o has a rule), accumulating into
    ``grads``: returns (-1, the new ``fresh``) once done, or (the status the sweep returns,
    fresh): E.MISSING - r with ``fresh`` in ``resume[0]`` when the entry is not compiled
    yet, r when the op has no backward rule -- both before anything of r is done.

    ``grads[:fresh]`` is not cleared: ``plan`` laid it out, from the top down, in the order
    the rules first add to it, and each part is cleared here just before.  An op declared
    ``first_write`` (matrix products, sums, differences, relus) writes its first
    contribution instead (beta = 0): no clearing pass at all for the largest gradients."""
    entry = table[E.BACKWARD, o]
    if entry == 0:
        resume[0] = fresh
        return E.MISSING - r, fresh
    if entry < 0:
        return r, fresh
    beta0 = beta1 = 1.0
    start = _touched_start(r, op, a0, a1, goff, ip, aux, need, fresh) if fresh else 0
    if start < fresh:
        if _FIRST_WRITE[o]:
            beta0, beta1 = _first_write(r, a0, a1, goff, size, need, start, fresh)
        if beta0 == 1.0 and beta1 == 1.0:
            grads[start:fresh] = 0.0
        fresh = start
    E.call(entry, r, context, beta0, beta1, 0, 0)
    return -1, fresh


@kernel
def sweep_vectors(op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, hi,
                  lo, fresh, table, resume):
    """Run the backward rules of records hi-1 down to lo, each through its op's entry
    (``_entry``), accumulating into ``grads``; ``grads[:fresh]`` is not cleared yet (pass 0
    for an arena cleared beforehand, and for a sweep in pieces).  ``ext``: arguments read in
    place (see ``linalg.value_at``; empty: none).

    Returns -1, the first record whose opcode has no backward rule, or E.MISSING - r with
    the records above r done and ``fresh`` in ``resume[0]``: the caller compiles r's entry
    and goes on from r (``hi = r + 1``).

    For tapes of few one-element records: on a fresh machine it compiles in a fraction of
    the time of ``sweep`` (the chains of two dozen ops are most of that), and a program of
    tensors never needs the chains.  The loop is written out here and in ``sweep`` rather
    than inlined into both from one helper: numba inlines by copying the callee's IR block
    by block, each copy with the whole scope, and that copy of the loop was 0.8 s of a fresh
    machine's first backward."""
    context = _context(op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads,
                       need)
    for r in range(hi - 1, lo - 1, -1):
        if not need[r]:
            continue
        o = op[r]
        if not _known(o):
            return r
        if _NO_RULE[o]:
            continue
        status, fresh = _entry(r, o, context, op, a0, a1, goff, size, ip, aux, grads, need,
                               fresh, table, resume)
        if status != -1:
            return status
    return -1


@kernel
def sweep(op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, hi, lo,
          fresh, table, resume):
    """``sweep_vectors`` with the hot ops' one-element chains inlined: a one-element record
    of a hot op runs its scalar rules on the arenas' numbers, here, a few nanoseconds a
    record on tapes of numbers.  Arguments and statuses as ``sweep_vectors``'."""
    context = _context(op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads,
                       need)
    for r in range(hi - 1, lo - 1, -1):
        if not need[r]:
            continue
        o = op[r]
        if not _known(o):
            return r
        if _NO_RULE[o]:
            continue
        if not (size[r] == 1 and _ONE[o]):
            status, fresh = _entry(r, o, context, op, a0, a1, goff, size, ip, aux, grads, need,
                                   fresh, table, resume)
            if status != -1:
                return status
            continue
        # (fresh stays 0 on a tape of numbers: nothing of this on the per-op path; these
        # records always add, as theirs are cleared)
        start = _touched_start(r, op, a0, a1, goff, ip, aux, need, fresh) if fresh else 0
        if start < fresh:
            grads[start:fresh] = 0.0
            fresh = start
        # (written out here: a helper taking the arrays costs their reference counting on
        # every record)
        s0 = a0[r]
        x0 = vals[voff[s0]]
        x1 = vals[voff[a1[r]]] if _BINARY[o] else x0
        x2 = vals[voff[ip[r]]] if _COND[o] else x0
        p0 = faux[ip[r]] if _PARAMS[o] else 0.0
        p1 = faux[ip[r] + 1] if _PARAMS[o] else 0.0
        gx0, gx1 = D.vjp_one(o, grads[goff[r]], x0, x1, x2, vals[voff[r]], fp[r], p0, p1)
        if need[s0]:
            grads[goff[s0]] += gx0
        if _BINARY[o]:
            s1 = a1[r]
            if need[s1]:
                grads[goff[s1]] += gx1
    return -1


# ---------------------------------------------------------------------------------------------
# forward (replay)
# ---------------------------------------------------------------------------------------------
@kernel
def forward(op, a0, a1, voff, size, ip, fp, aux, faux, vals, ext, lo, hi, table):
    """Recompute records lo..hi-1 from their inputs (LEAF values were refreshed by the caller,
    in the arena or, for the records ``ext`` names, in place: see ``linalg.value_at``).

    Returns -1, the index of the first GUARD whose value differs from the recorded one,
    -2 - r for the first record r whose opcode has no forward rule, or E.MISSING - r with
    the records before r done (the caller compiles r's entry and goes on from r).
    """
    context = _context(op, a0, a1, voff, voff, size, ip, fp, aux, faux, vals, ext, vals, op)
    for r in range(lo, hi):
        o = op[r]
        if o <= EXTERN:
            continue
        if not _known(o):
            return -2 - r
        if o == GUARD:
            if not guard_holds(r, a0, voff, size, ip, faux, vals):
                return r
            continue
        if size[r] == 1 and _ONE[o]:
            x0 = vals[voff[a0[r]]]
            x1 = vals[voff[a1[r]]] if _BINARY[o] else x0
            x2 = vals[voff[ip[r]]] if _COND[o] else x0
            p0 = faux[ip[r]] if _PARAMS[o] else 0.0
            p1 = faux[ip[r] + 1] if _PARAMS[o] else 0.0
            vals[voff[r]] = D.forward_one(o, x0, x1, x2, fp[r], p0, p1)
        else:
            entry = table[E.FORWARD, o]
            if entry == 0:
                return E.MISSING - r
            if entry < 0:
                return -2 - r
            E.call(entry, r, context, 0.0, 0.0, 0, 0)
    return -1


@kernel
def replay_rows(op, a0, a1, voff, goff, size, ip, fp, aux, faux, template, arg_recs, arg_offs,
                inputs, out_rec, need, total, want_grad, values, grads_out, status, lo, hi,
                table):
    """Rows lo..hi-1 of ``batch_replay``, with value and gradient arenas of their own."""
    vals = template.copy()
    no_ext = np.zeros(0, np.int64)
    resume = np.zeros(1, np.int64)   # (the caller compiled every entry: never used)
    grads = np.zeros(max(total, 1))
    n = op.size
    n_out = size[out_rec]
    for b in range(lo, hi):
        for j in range(arg_recs.size):
            r = arg_recs[j]
            m = size[r]
            vals[voff[r]:voff[r] + m] = inputs[b, arg_offs[j]:arg_offs[j] + m]
        bad = forward(op, a0, a1, voff, size, ip, fp, aux, faux, vals, no_ext, 0, n, table)
        status[b] = bad
        if bad != -1:
            continue
        values[b, :] = vals[voff[out_rec]:voff[out_rec] + n_out]
        if want_grad:
            grads[:] = 0.0
            grads[goff[out_rec]] = 1.0
            sweep(op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, no_ext, grads, need,
                  n, 0, 0, table, resume)
            for j in range(arg_recs.size):
                r = arg_recs[j]
                m = size[r]
                if need[r]:
                    grads_out[b, arg_offs[j]:arg_offs[j] + m] = grads[goff[r]:goff[r] + m]
                else:
                    grads_out[b, arg_offs[j]:arg_offs[j] + m] = 0.0


@kernel
def batch_replay(op, a0, a1, voff, goff, size, ip, fp, aux, faux, template, arg_recs, arg_offs,
                 inputs, out_rec, need, total, want_grad, values, grads_out, status, table):
    """Replay one tape for each row of ``inputs`` (one sample per row) in a single call.

    Each row holds the flat values of the argument records ``arg_recs`` at ``arg_offs``; the
    output record's value goes to ``values[b]`` and, with ``want_grad`` (a one-element
    output), the gradients of the argument records to ``grads_out[b]``.  ``status[b]`` is -1,
    or the GUARD record that failed for that sample (its results are then not written).
    The caller compiles every entry the tape needs first (``table``).
    """
    replay_rows(op, a0, a1, voff, goff, size, ip, fp, aux, faux, template, arg_recs, arg_offs,
                inputs, out_rec, need, total, want_grad, values, grads_out, status, 0,
                inputs.shape[0], table)


@parallel_kernel
def batch_replay_parallel(op, a0, a1, voff, goff, size, ip, fp, aux, faux, template, arg_recs,
                          arg_offs, inputs, out_rec, need, total, want_grad, values, grads_out,
                          status, chunks, table):
    """``batch_replay`` with the rows split into ``chunks`` contiguous blocks run on numba's
    threads.  Each block has its own arenas and its own copy of ``aux`` (max(dim)'s forward
    writes its argmax there); rows are independent, so the results are the sequential ones."""
    bsz = inputs.shape[0]
    for c in prange(chunks):
        replay_rows(op, a0, a1, voff, goff, size, ip, fp, aux.copy(), faux, template, arg_recs,
                    arg_offs, inputs, out_rec, need, total, want_grad, values, grads_out,
                    status, c * bsz // chunks, (c + 1) * bsz // chunks, table)


# ---------------------------------------------------------------------------------------------
# tangent (forward mode)
# ---------------------------------------------------------------------------------------------
# The tangent arena ``tans`` is flat: seed k's tangent of record r sits at ``b + voff[r]``
# with ``b = k * stride``, the layout of ``vals`` once per seed.  The rules index it with
# offsets instead of slicing (a view per record costs refcounting).  ``d0``/``d1``: whether
# an input depends on a seed at all.  At kinks and ties each rule takes the derivative its
# backward rule takes, so that <J t, u> == <t, J^T u> holds exactly there too.
@kernel
def tangent(op, a0, a1, voff, size, ip, fp, aux, faux, vals, tans, n_seeds, stride, dep, lo,
            hi, table):
    """Forward-mode sweep: tangents of records lo..hi-1, for ``n_seeds`` seeds at once.

    ``tans`` holds n_seeds arenas of ``stride`` values laid out as ``vals``; the caller
    writes the seeds into the tangents of the seeded records and sets ``dep`` to 1 there.
    The sweep marks the other records that depend on a seed (``dep``) and computes their
    tangents; the rest keep the zeros the caller filled in.  Returns -1, the first record
    whose opcode has no tangent rule, or E.MISSING - r with the records before r done (the
    caller compiles r's entry and goes on from r).
    """
    context = _context(op, a0, a1, voff, voff, size, ip, fp, aux, faux, vals, op, vals, dep)
    E.put(context, E.TANS, tans)
    E.put(context, E.DEP, dep)
    for r in range(lo, hi):
        if dep[r]:
            continue
        o = op[r]
        if not _known(o):
            return r
        if _NO_RULE[o]:
            continue
        if not (size[r] == 1 and _ONE[o]) and table[E.TANGENT, o] == 0:
            # (before r is marked: the caller comes back to r; an op without a tangent rule
            # is reported below, where r depends on a seed)
            return E.MISSING - r
        if _MANY[o]:
            for j in range(aux[ip[r]]):
                if dep[aux[ip[r] + 1 + 3 * j]]:
                    dep[r] = 1
        elif (a0[r] >= 0 and dep[a0[r]]) or (a1[r] >= 0 and dep[a1[r]]):
            dep[r] = 1
        if not dep[r]:
            continue
        d0 = a0[r] >= 0 and dep[a0[r]] != 0
        d1 = a1[r] >= 0 and dep[a1[r]] != 0
        if size[r] == 1 and _ONE[o]:
            s0 = a0[r]
            x0 = vals[voff[s0]]
            x1 = vals[voff[a1[r]]] if _BINARY[o] else x0
            x2 = vals[voff[ip[r]]] if _COND[o] else x0
            p0 = faux[ip[r]] if _PARAMS[o] else 0.0
            p1 = faux[ip[r] + 1] if _PARAMS[o] else 0.0
            out = vals[voff[r]]
            c = fp[r]
            for s in range(n_seeds):
                b = s * stride
                if _BINARY[o]:
                    # an input that depends on no seed adds no term (inf * 0 stays out)
                    acc = 0.0
                    if d0:
                        acc += D.vjp_one(o, tans[b + voff[s0]], x0, x1, x2, out, c, p0, p1)[0]
                    if d1:
                        acc += D.vjp_one(o, tans[b + voff[a1[r]]], x0, x1, x2, out, c, p0,
                                         p1)[1]
                    tans[b + voff[r]] = acc
                else:
                    tans[b + voff[r]] = D.vjp_one(o, tans[b + voff[s0]], x0, x1, x2, out, c,
                                                  p0, p1)[0]
            continue
        if table[E.TANGENT, o] < 0:
            return r
        bits = (1 if d0 else 0) | (2 if d1 else 0)
        for s in range(n_seeds):
            E.call(table[E.TANGENT, o], r, context, 0.0, 0.0, s * stride, bits)
    return -1


# ---------------------------------------------------------------------------------------------
# curvature (forward over reverse)
# ---------------------------------------------------------------------------------------------
@kernel
def curvature(op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, tans, stride, dgrads,
              need, hi, lo, table):
    """Forward over reverse, first half: the sources of the tangent of a backward sweep.

    The backward rules are linear in g, so the tangent of the gradient arena is ``sweep``
    run on an arena that starts with, for every record, g times the tangent of its local
    derivative (nothing for the linear and piecewise linear ops).  This kernel adds those
    sources into row s of ``dgrads`` for each seed s; ``grads`` is the arena after
    ``sweep``, ``tans`` the value tangents of the seeds (``stride`` apart, from ``tangent``).
    Sweeping each row afterwards leaves H t at the leaves.  Returns -1, the first record
    whose op has no rule here (the caller takes another route), or E.MISSING - r with the
    records above r done (the caller compiles r's entry and goes on from r).
    """
    context = _context(op, a0, a1, voff, goff, size, ip, fp, aux, faux, vals, op, grads, need)
    E.put(context, E.TANS, tans)
    for r in range(hi - 1, lo - 1, -1):
        if not need[r]:
            continue
        o = op[r]
        if not _known(o):
            return r
        kind = _CURVATURE[o]
        if kind == 0:
            continue
        if kind < 0:
            return r
        scalar = size[r] == 1 and _SCALAR_CURVATURE[o]
        if not scalar:
            entry = table[E.CURVATURE, o]
            if entry == 0:
                return E.MISSING - r
            if entry < 0:
                return r
        if scalar:
            s0 = a0[r]
            p0 = faux[ip[r]] if _PARAMS[o] else 0.0
            p1 = faux[ip[r] + 1] if _PARAMS[o] else 0.0
            d = D.d2_one(o, vals[voff[s0]], vals[voff[r]], fp[r], p0, p1)
            g = grads[goff[r]]
            for s in range(dgrads.shape[0]):
                dgrads[s, goff[s0]] += g * d * tans[s * stride + voff[s0]]
            continue
        for s in range(dgrads.shape[0]):
            E.put(context, E.DG, dgrads[s])
            E.call(table[E.CURVATURE, o], r, context, 0.0, 0.0, s * stride, 0)
    return -1
