"""Generated Python for the per-call work around a replayed tape's kernels.

A compiled function called with positional float64 tensors (``f(a, b, c, d)``) spends as
much time in Python around its kernels as a scalar loop spends inside them: checking each
argument against the recorded signature, copying it into the arena, and after the backward
sweep handing each one its ``.grad``.  A loop over a table of per-argument specs costs a few
hundred nanoseconds per argument; the same work written out for one signature, with its
shapes and offsets as literals, costs about half.  So each variant gets two small
functions: its replay for such calls (``replayer``), generated when it is recorded and again
once it has generated code, which the replay then calls itself; and ``backward()`` after it
(``backward_for``), generated with the variant's generated backward.
"""
import numpy as np

from .tape import state
from .tensor import Tensor

_FLOAT64 = np.dtype(np.float64)
_PAIRWISE_MAX = 6   # up to this many arguments, a repeated one is found by `is` pairs


def _define(source, name, namespace):
    namespace = dict(namespace)
    exec(compile(source, f"<tapegrad fastcall {name}>", "exec"), namespace)
    # taken out of its own globals: left there, function and namespace would be a cycle,
    # freed only by the garbage collector (with what the namespace holds: the variant)
    return namespace.pop(name)


def _passing(first, params, namespace):
    """Arguments for a generated kernel: ``first``, then ``params`` by name (P0, P1, ...),
    put into ``namespace``: cheaper to pass than by unpacking a tuple."""
    names = [f"P{i}" for i in range(len(params))]
    namespace.update(zip(names, params))
    return ", ".join([first] + names)


def replayer(variant, take, run, failed):
    """``replay_args(args)`` for ``variant`` (a replay.Variant with an ``arg_spec``): check
    ``args`` against the recorded signature, copy them into a free instance's arena and
    replay; None (nothing usable copied) on a mismatch.

    ``take()`` gives the free instance and ``run(inst, args, None)`` replays it.  Once the
    variant has generated code and one tensor result, the generated forward is called here
    directly and the result made here (``failed(bad)`` when the forward stopped at record
    ``bad``), which is what ``run`` would do, without its general output handling.
    """
    from .functional import _result
    spec = variant.arg_spec
    n = len(spec)
    names = [f"a{i}" for i in range(n)]
    lines = ["def replay_args(args):",
             f"    if len(args) != {n}:",
             "        return None"]
    tests = []
    if n:
        lines.append(f"    {', '.join(names)}, = args")
        lines.append("    if " + " or ".join(f"type({a}) is not Tensor" for a in names) + ":")
        lines.append("        return None")
        for a in names:
            lines.append(f"    v{a} = {a}._value")
        for a, (shape, rg, _, _, _) in zip(names, spec):
            # (a number's test reads ndim: no shape tuple is made)
            tests.append(f"v{a}.shape != {tuple(int(d) for d in shape)!r}" if shape != ()
                         else f"v{a}.ndim")
            # (one with a history runs eagerly: replay.Compiled.__call__)
            tests.append(f"not {a}._rg or {a}._tape is not None" if rg else f"{a}._rg")
            tests.append(f"v{a}.dtype is not FLOAT64")
    namespace = {"Tensor": Tensor, "FLOAT64": _FLOAT64, "take": take, "run": run,
                 "failed": failed, "result": _result, "RECORDS": variant.arg_spec_records}
    # tensors the function read as constants: an in-place change of one means re-recording
    for i, (t, version) in enumerate(variant.constants):
        namespace[f"C{i}"] = t
        tests.append(f"C{i}._version != {int(version)}")
    # the Python state it read (pystate.py): a change means re-recording
    if variant.state is not None and variant.state.count:
        namespace["STATE"] = variant.state.check
        tests.append("STATE() is not None")
    if tests:
        lines.append("    if (" + "\n            or ".join(tests) + "):")
        lines.append("        return None")
    lines += ["    inst = take()", "    vals = inst.arena"]
    reads_in_place = any(in_place for _, _, _, _, in_place in spec)
    if reads_in_place:
        lines.append("    direct = []")
    for a, r, (_, _, off, end, in_place) in zip(names, variant.arg_spec_records, spec):
        if end < 0:
            lines.append(f"    vals[{off}] = v{a}")
        elif in_place:
            # read where it is by the matrix products (replay.Variant.read_in_place)
            lines += [f"    if v{a}.flags.c_contiguous:",
                      f"        inst.ext[{r}] = v{a}.__array_interface__['data'][0]",
                      f"        direct.append(({r}, v{a}))",
                      "    else:",
                      f"        vals[{off}:{end}] = v{a}.reshape(-1)"]
        elif end:
            lines.append(f"    vals[{off}:{end}] = v{a}.reshape(-1)")
    if reads_in_place:
        lines.append("    inst.ext_refs = direct or None")
    lines += ["    inst.args = args",
              "    inst.arg_versions = (" + "".join(f"{a}._version, " for a in names) + ")",
              "    inst.arg_records = RECORDS"]
    prog = variant.program
    if prog is None or prog.forward is None or variant.single_out is None:
        lines.append("    return run(inst, args, None)")
    else:
        r, where, shape = variant.single_out
        view = (f"vals[{where[0]}, ...]" if shape is None else
                f"vals[{where.start}:{where.stop}].reshape({tuple(shape)!r})")
        namespace.update(forward=prog.forward, COLS=variant.cols, PARTIAL=prog.partial,
                         PROGRAM=prog if prog.plan is not None else None,
                         OUTSIDE=prog.partial or ((0, 0),))
        lines += ["    inst.program = PROGRAM",
                  "    bad = forward("
                  f"{_passing('vals, inst.ext', prog.forward_params, namespace)})"]
        # what reads the arena beyond the generated code copies arguments read in place in
        # first (replay._Instance.complete)
        lines.append("    inst.partial = PARTIAL if inst.ext_refs is None else OUTSIDE"
                     if reads_in_place else "    inst.partial = PARTIAL")
        lines += ["    if bad != -1:",
                  "        return failed(bad)",
                  "    inst.cached_cols = COLS",
                  f"    return result(inst, {int(r)}, {view})"]
    return _define("\n".join(lines) + "\n", "replay_args", namespace)


def _fresh_slots():
    """Tensor._make's own values for every slot but the value, read off a tensor it made."""
    made = Tensor._make(None)
    return [(slot, getattr(made, slot)) for slot in Tensor.__slots__
            if slot not in ("_value", "__weakref__")]


_FRESH = _fresh_slots()


def _fresh_tensor(arg, value):
    """Source giving ``arg`` the gradient ``value`` (an expression) as a new tensor: what
    ``Tensor._make(value)`` does, written out (the call alone was a fifth of the cost)."""
    return (["    t = new(Tensor)", f"    t._value = {value}"]
            + [f"    t.{slot} = {default!r}" for slot, default in _FRESH]
            + [f"    {arg}._grad = t"])


def backward_for(spec, records, program, arena, retained, finish):
    """``backward(t, tape, retain_graph)``: ``t.backward()`` for ``t``, the one output of
    ``tape``, a replay of ``program`` (a codegen.Program): all of
    ``autograd.program_backward`` for a replay whose leaves are positional arguments, written
    out for one signature.  False, with nothing changed, where ``run_backward`` must do it
    (the checks at the top of ``program_backward``); None, with nothing changed, where
    ``program_backward``'s own way must (``tape`` replayed the general way, or not the usual
    case); True when done.

    The usual case: no argument changed in place since the replay read it
    (``tape.arg_versions``), none passed twice, and those that get a gradient require grad
    and have no hooks and no ``.grad`` yet.  Then it seeds the gradient arena
    (``arena(total)``), runs the generated sweep over the tape's values and gives each
    argument its ``.grad``.  ``records``: each argument's LEAF record (-1: not read);
    ``retained``: autograd's registry of tensors that retain their grad; ``finish``:
    tape.finish.
    """
    n = len(spec)
    names = [f"a{i}" for i in range(n)]
    where = {r: (off, size) for r, off, size in program.leaf_slots}
    tests = [f"{a}._version != versions[{i}]"
             for i, (a, r) in enumerate(zip(names, records)) if r >= 0]
    numbers, assign = [], []
    for a, r, (shape, _, _, _, _) in zip(names, records, spec):
        if r not in where:
            continue
        tests += [f"not {a}._rg", f"{a}._hooks", f"{a}._grad is not None"]
        off, size = where[r]
        if shape == ():
            # numbers' gradients are copied out of the arena together, into one array; a
            # 0-d view of it each is cheaper than a new 0-d array each
            assign += _fresh_tensor(a, f"block[{len(numbers)}, ...]")
            numbers.append(off)
        else:
            shape = tuple(int(d) for d in shape)
            assign += _fresh_tensor(a, f"grads[{off}:{off + size}].reshape({shape!r}).copy()")
    if n <= _PAIRWISE_MAX:
        tests += [f"{names[i]} is {names[j]}" for i in range(n) for j in range(i + 1, n)]
    else:
        tests.append(f"len(set(map(id, args))) != {n}")
    namespace = {"new": object.__new__, "Tensor": Tensor, "arena": arena,
                 "sweep": program.backward, "NUMBERS": np.array(numbers, dtype=np.intp),
                 "RETAINED": retained, "PROGRAM": program, "STATE": state,
                 "finish": finish}
    lines = ["def backward(t, tape, retain_graph):",
             # autograd.program_backward's checks, and autograd.constants_changed's loop
             f"    if (t._r != {int(program.seed)} or tape.hooks or tape.custom or tape.inplace",
             "            or tape.freed is not None or RETAINED.maybe_any()):",
             "        return False",
             "    for _, x, version, _ in tape.consts:",
             "        if type(x) is not int and x._version != version:",
             "            return False",
             "    args = tape.args",
             "    if args is None:",
             "        return None",
             "    versions = tape.arg_versions"]
    if n:
        lines.append(f"    {', '.join(names)}, = args")
    if tests:
        lines += ["    if (" + "\n            or ".join(tests) + "):", "        return None"]
    lines += [f"    grads = arena({int(program.total)})",
              f"    grads[{int(program.seed_offset)}] = 1.0",
              f"    sweep({_passing('tape.arena, tape.ext, grads', program.backward_params, namespace)})"]
    if numbers:
        lines.append("    block = grads[NUMBERS]")
    lines += assign
    # tape.finish, its call made only where it does more than mark the tape finished
    lines += ["    if not retain_graph:",
              "        tape.freed = PROGRAM.freed",
              "        tape.finished = True",
              "        if STATE.tape is tape:",
              "            finish(tape)",
              "    return True"]
    return _define("\n".join(lines) + "\n", "backward", namespace)
