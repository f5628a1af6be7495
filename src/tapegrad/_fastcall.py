"""Generated Python for the per-call work around a replayed tape's kernels.

A compiled function called with positional float64 tensors (``f(a, b, c, d)``) spends as
much time in Python around its kernels as a scalar loop spends inside them: checking each
argument against the recorded signature, copying it into the arena, and after the backward
sweep handing each one its ``.grad``.  A loop over a table of per-argument specs costs a few
hundred nanoseconds per argument; the same work written out for one signature, with its
shapes and offsets as literals, costs about half.  So each variant gets these two small
functions, generated once when it is recorded (``binder``) or when its backward is generated
(``backward_for``).
"""
import numpy as np

from .tensor import Tensor

_FLOAT64 = np.dtype(np.float64)
_PAIRWISE_MAX = 6   # up to this many arguments, a repeated one is found by `is` pairs


def _define(source, name, namespace):
    namespace = dict(namespace)
    exec(compile(source, f"<tapegrad fastcall {name}>", "exec"), namespace)
    return namespace[name]


def binder(spec):
    """``bind(args, vals)``: check ``args`` against ``spec`` and copy them into ``vals``;
    returns the versions they were read at, or None (nothing usable copied) on a mismatch.

    ``spec``: per positional argument ``(shape, requires_grad, offset, end)``; ``end`` is -1
    for a number (stored without slicing) and 0 for an argument the tape does not read.
    """
    n = len(spec)
    names = [f"a{i}" for i in range(n)]
    lines = ["def bind(args, vals):",
             f"    if len(args) != {n}:",
             "        return None"]
    if n:
        lines.append(f"    {', '.join(names)}, = args")
        lines.append("    if " + " or ".join(f"type({a}) is not Tensor" for a in names) + ":")
        lines.append("        return None")
        for a in names:
            lines.append(f"    v{a} = {a}._value")
        tests = []
        for a, (shape, rg, _, _) in zip(names, spec):
            tests.append(f"v{a}.shape != {tuple(int(d) for d in shape)!r}")
            tests.append(f"not {a}._rg" if rg else f"{a}._rg")
            tests.append(f"v{a}.dtype is not FLOAT64")
        lines.append("    if (" + "\n            or ".join(tests) + "):")
        lines.append("        return None")
        for a, (_, _, off, end) in zip(names, spec):
            if end < 0:
                lines.append(f"    vals[{off}] = v{a}")
            elif end:
                lines.append(f"    vals[{off}:{end}] = v{a}.reshape(-1)")
    lines.append("    return (" + "".join(f"{a}._version, " for a in names) + ")")
    return _define("\n".join(lines) + "\n", "bind", {"Tensor": Tensor, "FLOAT64": _FLOAT64})


def backward_for(spec, records, program, arena):
    """``backward(args, versions, vals)``: ``loss.backward()`` for a replay of ``program``
    (a codegen.Program) whose leaves are positional arguments, or False, with nothing
    changed, where the usual case does not hold.

    The usual case: no argument changed in place since the replay read it (``versions``),
    none passed twice, and those that get a gradient require grad and have no hooks and no
    ``.grad`` yet.  Then it seeds the gradient arena (``arena(total)``), runs the generated
    sweep over ``vals`` and gives each argument its ``.grad``.  ``records``: each argument's
    LEAF record (-1: not read).
    """
    n = len(spec)
    names = [f"a{i}" for i in range(n)]
    where = {r: (off, size) for r, off, size in program.leaf_slots}
    tests = [f"{a}._version != versions[{i}]"
             for i, (a, r) in enumerate(zip(names, records)) if r >= 0]
    numbers, assign = [], []
    for a, r, (shape, _, _, _) in zip(names, records, spec):
        if r not in where:
            continue
        tests += [f"not {a}._rg", f"{a}._hooks", f"{a}._grad is not None"]
        off, size = where[r]
        if shape == ():
            # numbers' gradients are copied out of the arena together, into one array; a
            # 0-d view of it each is cheaper than a new 0-d array each
            assign.append(f"    {a}._grad = make(block[{len(numbers)}, ...])")
            numbers.append(off)
        else:
            shape = tuple(int(d) for d in shape)
            assign.append(f"    {a}._grad = make(grads[{off}:{off + size}]"
                          f".reshape({shape!r}).copy())")
    if n <= _PAIRWISE_MAX:
        tests += [f"{names[i]} is {names[j]}" for i in range(n) for j in range(i + 1, n)]
    else:
        tests.append(f"len(set(map(id, args))) != {n}")
    lines = ["def backward(args, versions, vals):"]
    if n:
        lines.append(f"    {', '.join(names)}, = args")
    if tests:
        lines += ["    if (" + "\n            or ".join(tests) + "):", "        return False"]
    lines += [f"    grads = arena({int(program.total)})",
              f"    grads[{int(program.seed_offset)}] = 1.0",
              "    sweep(vals, grads, *PARAMS)"]
    if numbers:
        lines.append("    block = grads[NUMBERS]")
    lines += assign + ["    return True"]
    namespace = {"make": Tensor._make, "arena": arena, "sweep": program.backward,
                 "PARAMS": program.params, "NUMBERS": np.array(numbers, dtype=np.intp)}
    return _define("\n".join(lines) + "\n", "backward", namespace)
