"""tapegrad.viz.graph: the DOT graph drawn from grad_fn / next_functions.

Everything but the SVG rendering reads the Digraph's DOT source, which needs only the graphviz
Python package; rendering needs Graphviz's ``dot`` program and is skipped without it."""
import re
import shutil
import sys

import pytest

import tapegrad as tg
from tapegrad import nn

graphviz = pytest.importorskip("graphviz")

# graphviz quotes a label only when it must (a one-word label stays bare)
NODE = re.compile(r'^\t(\w+) \[label=(?:"(.*?)"|(\w+)) fillcolor=(\w+)\]$', re.M | re.S)
EDGE = re.compile(r"^\t(\w+) -> (\w+)$", re.M)


def parse(dot):
    """(nodes: id -> (label lines, fill colour), edges: list of (from, to)) of a Digraph."""
    src = dot.source
    nodes = {k: ((quoted or bare).split("\n"), color)
             for k, quoted, bare, color in NODE.findall(src)}
    assert len(nodes) == src.count("fillcolor=")          # no node statement went unparsed
    return nodes, EDGE.findall(src)


def mlp_loss():
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    x, y = tg.randn(5, 3), tg.randn(5, 1)
    return model, nn.MSELoss()(model(x), y)


def test_mlp_loss_graph_nodes_and_colours():
    model, loss = mlp_loss()
    params = dict(model.named_parameters())
    dot = tg.viz.graph(loss, params=params)
    assert isinstance(dot, graphviz.Digraph)
    nodes, edges = parse(dot)

    outputs = [k for k, (_, c) in nodes.items() if c == "darkolivegreen1"]
    assert outputs == ["out0"]
    assert nodes["out0"][0] == ["output", "()"]          # a 0-d loss

    leaves = {lines[1]: lines for lines, c in nodes.values() if c == "lightblue"}
    assert set(leaves) == set(params)
    for name, p in params.items():
        assert leaves[name][0] == "AccumulateGrad"
        assert leaves[name][2] == str(tuple(p.shape))

    ops = [lines[0] for lines, c in nodes.values() if c == "lightgrey"]
    # PyTorch's graph of it: each Linear one AddmmBackward0 (of its bias, input and
    # weight.t()), the loss one MseLossBackward0
    assert ops.count("TanhBackward0") == 1
    assert ops.count("AddmmBackward0") == 2
    assert ops.count("TBackward0") == 2
    assert ops[0] == loss.grad_fn.name()
    for lines, c in nodes.values():
        if c == "lightgrey":
            assert re.fullmatch(r"numel=\d+", lines[1])
    tanh = next(k for k, (lines, _) in nodes.items() if lines[0] == "TanhBackward0")
    assert nodes[tanh][0][1] == "numel=20"               # 5 rows x 4 hidden units

    # edges point from an input to the node that used it; the loss's grad_fn feeds the output
    assert [a for a, b in edges if b == "out0"] == [k for k, (lines, _) in nodes.items()
                                                    if lines[0] == "MseLossBackward0"]
    into = {k: [a for a, b in edges if b == k] for k in nodes}
    for k, (_, c) in nodes.items():
        if c == "lightblue":
            assert into[k] == []                           # leaves are where the walk stops
    assert any(nodes[b][0][0] == "AddmmBackward0" for a, b in edges if a == tanh)


def test_edges_follow_next_functions():
    _, loss = mlp_loss()
    nodes, edges = parse(tg.viz.graph(loss))
    # an independent walk: one edge per non-None entry of next_functions of each node
    seen, stack, count = set(), [loss.grad_fn], 0
    while stack:
        fn = stack.pop()
        if fn in seen:
            continue
        seen.add(fn)
        for nxt, _ in fn.next_functions:
            if nxt is not None:
                count += 1
                stack.append(nxt)
    assert len(nodes) == len(seen) + 1                     # + the output box
    assert len(edges) == count + 1                         # + grad_fn -> output


def test_exact_source_of_a_tiny_graph():
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    b = tg.tensor(3.0, requires_grad=True)
    z = a * a + b
    nodes, edges = parse(tg.viz.graph(z, params={"a": a, "b": b}))
    assert nodes == {
        "out0": (["output", "(2,)"], "darkolivegreen1"),
        "n0": (["AddBackward0", "numel=2"], "lightgrey"),
        "n1": (["MulBackward0", "numel=2"], "lightgrey"),
        "n2": (["AccumulateGrad", "b", "()"], "lightblue"),
        "n3": (["AccumulateGrad", "a", "(2,)"], "lightblue"),
    }
    # a * a uses a twice: two edges, as in next_functions
    assert sorted(edges) == sorted([("n0", "out0"), ("n1", "n0"), ("n2", "n0"),
                                    ("n3", "n1"), ("n3", "n1")])


def test_show_shapes_false_labels_names_only():
    _, loss = mlp_loss()
    nodes, _ = parse(tg.viz.graph(loss, show_shapes=False))
    for lines, _ in nodes.values():
        assert len(lines) == 1
    assert "AccumulateGrad" in {lines[0] for lines, _ in nodes.values()}


def test_inputs_without_grad_are_not_drawn():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    c = tg.tensor([5.0, 6.0])
    nodes, edges = parse(tg.viz.graph((x * c).sum()))
    assert [lines[0] for lines, _ in nodes.values()] == [
        "output", "SumBackward0", "MulBackward0", "AccumulateGrad"]
    assert len(edges) == 3


def test_leaf_output_several_outputs_and_no_grad():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    nodes, edges = parse(tg.viz.graph(x))
    assert nodes["n0"][0][0] == "AccumulateGrad" and edges == [("n0", "out0")]

    nodes, edges = parse(tg.viz.graph(tg.ones(3)))          # nothing recorded behind it
    assert list(nodes) == ["out0"] and edges == []

    y = x.exp()
    nodes, edges = parse(tg.viz.graph([y.sum(), (y * 2).sum()]))
    assert [nodes[k][0][0] for k in ("out0", "out1")] == ["output 0", "output 1"]
    exp_nodes = [k for k, (lines, _) in nodes.items() if lines[0] == "ExpBackward0"]
    assert len(exp_nodes) == 1                             # shared nodes are drawn once
    with pytest.raises(TypeError, match="tapegrad tensors"):
        tg.viz.graph([x, 1.0])


def test_long_chain_needs_no_recursion():
    x = tg.tensor([0.5], requires_grad=True)
    y = x
    for _ in range(3 * sys.getrecursionlimit()):
        y = tg.tanh(y)
    nodes, edges = parse(tg.viz.graph(y))
    assert len(nodes) == 3 * sys.getrecursionlimit() + 2
    assert len(edges) == len(nodes) - 1


def test_missing_graphviz_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)      # makes `import graphviz` fail
    with pytest.raises(ImportError, match="pip install graphviz"):
        tg.viz.graph(tg.ones(1, requires_grad=True))


def test_renders_to_svg_for_jupyter():
    _, loss = mlp_loss()
    dot = tg.viz.graph(loss)
    # what Jupyter calls to display it (the methods exist without the dot program)
    assert callable(getattr(dot, "_repr_mimebundle_", None))
    if shutil.which("dot") is None:
        pytest.skip("optional peer not installed: Graphviz's dot program (not on PATH: "
                    "the SVG rendering is not checked)")
    svg = dot.pipe(format="svg").decode()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert "MseLossBackward0" in svg and "AccumulateGrad" in svg
    bundle = dot._repr_mimebundle_()
    assert "<svg" in bundle["image/svg+xml"]
