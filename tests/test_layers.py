"""The package's layers depend downward only: no module imports another that imports it back
(at module level or inside a function), and the modules below the tracer (``replay.py``)
reach a trace only through the seam ``tape.Recording`` declares."""
import ast
from pathlib import Path

import tapegrad as tg
from tapegrad.tape import Recording

SRC = Path(tg.__file__).resolve().parent


def _modules():
    mods = {}
    for f in SRC.rglob("*.py"):
        if "__pycache__" in f.parts:
            continue
        parts = f.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = f
    return mods


def _imports(mods):
    """module -> the package's modules it imports anywhere in its source."""
    edges = {}
    for name, f in mods.items():
        package = name if f.name == "__init__.py" else name.rpartition(".")[0]
        out = set()
        for node in ast.walk(ast.parse(f.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom):
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                head = (f"{base}.{node.module}" if node.module else base) if node.level \
                    else (node.module or "")
                # ``from .nn import functional`` depends on the submodule, not on the package
                targets = [f"{head}.{a.name}" if f"{head}.{a.name}" in mods else head
                           for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                # a package's __init__ that re-exports is no dependency of its own children
                if t and t != name and not name.startswith(t + "."):
                    out.add(t)
        edges[name] = out
    return edges


def _below(edges, top):
    seen, todo = set(), [top]
    while todo:
        for m in edges[todo.pop()]:
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


def test_no_module_imports_one_that_imports_it_back():
    edges = _imports(_modules())
    for name, deps in edges.items():
        for d in deps:
            assert name not in _below(edges, d), f"{name} -> {d} -> ... -> {name}"


def _trace_uses(tree):
    """(line, attribute) of every attribute read on a trace: on ``state.trace`` itself or on
    a local it was bound to (``trace``, ``prev_trace``)."""
    def is_trace(node):
        return (isinstance(node, ast.Attribute) and node.attr == "trace"
                and isinstance(node.value, ast.Name) and node.value.id in ("state", "_state")) \
            or (isinstance(node, ast.Name) and node.id in ("trace", "prev_trace"))
    return [(node.lineno, node.attr) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and is_trace(node.value)]


def test_modules_below_the_tracer_use_only_the_declared_seam():
    mods = _modules()
    below = _below(_imports(mods), "tapegrad.replay")
    assert {"tapegrad.tensor", "tapegrad.functional", "tapegrad.inplace"} <= below
    declared = {n for n in dir(Recording) if not n.startswith("_")} | set(Recording.__slots__)
    uses = {}
    for name in sorted(below):
        for line, attr in _trace_uses(ast.parse(mods[name].read_text())):
            uses.setdefault(attr, []).append(f"{name}:{line}")
            assert attr in declared, f"{name}:{line} reads trace.{attr}, which tape.Recording " \
                "does not declare"
    # the scan does see the uses (a renamed seam would otherwise pass with nothing found)
    assert {"opaque", "guard", "requires_grad_eagerly", "read_constant"} <= set(uses)


def test_the_trace_implements_every_method_of_the_seam():
    from tapegrad.replay import Trace
    assert issubclass(Trace, Recording)
    for n in dir(Recording):
        if not n.startswith("_") and callable(getattr(Recording, n)):
            assert getattr(Trace, n) is not getattr(Recording, n), n
