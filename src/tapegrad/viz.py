"""Draw the recorded graph behind a tensor: ``tapegrad.viz.graph(loss)``.

The picture is built from the public autograd views only (``grad_fn``,
``next_functions``, ``AccumulateGrad.variable``), so it shows what PyTorch's ``torchviz``
would show for the same code: one box per backward node named like PyTorch's
(``MulBackward0``, ``AccumulateGrad``, ...), edges from each input to the node that used it,
the output tensor in green and the leaves (where gradients accumulate) in light blue.

The result is a ``graphviz.Digraph``: Jupyter renders it inline as SVG, ``.source`` is the
DOT text, ``.render()`` / ``.pipe()`` write files.  Building it needs only the ``graphviz``
Python package; rendering needs Graphviz's ``dot`` program as well.
"""
from .tensor import Tensor

OUTPUT_COLOR = "darkolivegreen1"
LEAF_COLOR = "lightblue"
OP_COLOR = "lightgrey"


def _graphviz():
    try:
        import graphviz
    except ImportError as exc:
        raise ImportError(
            "tapegrad.viz needs the graphviz Python package: pip install graphviz "
            "(rendering also needs Graphviz's `dot` program, e.g. apt-get install graphviz "
            "or brew install graphviz)") from exc
    return graphviz


def _shape_text(shape):
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _short_name(fn):
    # PyTorch qualifies its hand-written nodes ("torch::autograd::AccumulateGrad"); torchviz,
    # like PyTorch's reprs, shows the bare class name
    return fn.name().rsplit("::", 1)[-1]


def _numel(fn):
    """Element count of a backward node's result.  The tape keeps element counts, not
    shapes, of intermediate results, so that is all a drawing can say about them."""
    tape, r = getattr(fn, "_tape", None), getattr(fn, "_r", None)
    if tape is None or r is None:
        return None
    return int(tape.size[r])


def _param_names(params):
    if params is None:
        return {}
    items = params.items() if hasattr(params, "items") else params
    return {id(t): name for name, t in items}


def graph(tensor, show_shapes=True, params=None):
    """A ``graphviz.Digraph`` of the recorded computation from ``tensor`` back to its leaves.

    ``tensor`` may also be a list or tuple of tensors (one output box each).  With
    ``show_shapes``, outputs and leaves carry their shapes and other nodes the number of
    elements they produce.  ``params`` (a dict or ``(name, tensor)`` pairs, e.g.
    ``dict(model.named_parameters())``) names the leaves.

    Example:
        >>> w = tg.ones(2, requires_grad=True)
        >>> dot = tg.viz.graph((w * 3).sum(), params={"w": w})
        >>> dot.source.count("fillcolor="), "MulBackward0" in dot.source
        (4, True)
    """
    graphviz = _graphviz()
    outputs = list(tensor) if isinstance(tensor, (list, tuple)) else [tensor]
    for t in outputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"graph() expects tapegrad tensors, got {type(t).__name__}")
    names = _param_names(params)

    dot = graphviz.Digraph(
        name="tapegrad",
        node_attr={"style": "filled", "shape": "box", "align": "left", "fontsize": "10",
                   "height": "0.2", "fontname": "monospace"},
        graph_attr={"size": "12,12", "ranksep": "0.2"})
    ids = {}       # backward node -> DOT id, in the order they are first met (stable output)
    pending = []   # nodes drawn whose inputs are not drawn yet

    def node_id(fn):
        key = ids.get(fn)
        if key is None:
            key = ids[fn] = f"n{len(ids)}"
            if hasattr(fn, "variable"):   # AccumulateGrad: where a leaf's gradient lands
                leaf = fn.variable
                lines = [_short_name(fn)]
                if id(leaf) in names:
                    lines.append(names[id(leaf)])
                if show_shapes:
                    lines.append(_shape_text(leaf.shape))
                dot.node(key, "\n".join(lines), fillcolor=LEAF_COLOR)
            else:
                lines = [_short_name(fn)]
                n = _numel(fn) if show_shapes else None
                if n is not None:
                    lines.append(f"numel={n}")
                dot.node(key, "\n".join(lines), fillcolor=OP_COLOR)
            pending.append(fn)
        return key

    for j, t in enumerate(outputs):
        lines = ["output" if len(outputs) == 1 else f"output {j}"]
        if id(t) in names:
            lines.append(names[id(t)])
        if show_shapes:
            lines.append(_shape_text(t.shape))
        out_key = f"out{j}"
        dot.node(out_key, "\n".join(lines), fillcolor=OUTPUT_COLOR)
        fn = t.grad_fn
        if fn is None and t.requires_grad:   # a leaf: its gradient lands in AccumulateGrad
            from .autograd import AccumulateGrad
            fn = AccumulateGrad(t)
        if fn is not None:
            dot.edge(node_id(fn), out_key)

    # An explicit work list rather than recursion: a long loop records thousands of nodes
    # in a chain, deeper than Python's recursion limit.
    done = set()
    while pending:
        fn = pending.pop()
        if fn in done:
            continue
        done.add(fn)
        key = ids[fn]
        for nxt, _ in fn.next_functions:
            if nxt is not None:   # inputs that need no gradient are listed as None
                dot.edge(node_id(nxt), key)
    return dot


__all__ = ["graph"]

from ._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
