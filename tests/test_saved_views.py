"""A view shares its base's version counter in PyTorch: an op that saved ``w[0]`` (or
``h.t()``, ``w.view(12)``, an output of ``split`` ...) raises at the backward once ``w`` (or
another view of it) changed in place, whether or not the view's own tensor still lives, and
names the view's shape and the ``AsStrided`` node its history becomes -- or, for an output
of an op returning several views, refuses to make that history at all.  tapegrad copies a
view's values onto the tape, so without looking through view records its backward gave the
gradients of the values the forward saw.  Each case runs in tapegrad and PyTorch, eagerly
and (tapegrad) through ``tapegrad.compile``: the same error text, or the same gradients."""
import re

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

W = [[1.5, 2.5, 0.7, -0.4], [0.3, -0.4, 1.1, 2.0], [0.9, 1.7, -1.2, 0.6]]

# views of a (3, 4) tensor, each read by an op as PyTorch saves it
VIEWS = {
    "select": lambda t: t[0],
    "slice": lambda t: t[:, 1:3],
    "t": lambda t: t.t(),
    "transpose": lambda t: t.transpose(0, 1),
    "permute": lambda t: t.permute(1, 0),
    "T": lambda t: t.T,
    "mT": lambda t: t.mT,
    "unsqueeze": lambda t: t.unsqueeze(0),
    "view": lambda t: t.view(12),
    "reshape": lambda t: t.reshape(2, 6),
    "flatten": lambda t: t.flatten(),
    "unflatten": lambda t: t.unflatten(1, (2, 2)),
    "squeeze": lambda t: t[None].squeeze(0),
    "expand": lambda t: t[0].expand(2, 4),
    "narrow": lambda t: t.narrow(1, 1, 2),
    "diagonal": lambda t: t.diagonal(),
    "unfold": lambda t: t.unfold(1, 2, 1),
    "alias": lambda t: t[...],
    "movedim": lambda t: t.movedim(0, 1),
    "view_of_view": lambda t: t.t()[1],
    "tensor_split": lambda t: t.tensor_split(2)[1],
    "split": lambda t: t.split(2)[1],
    "chunk": lambda t: t.chunk(2, 1)[0],
    "unbind": lambda t: t.unbind()[2],
    # not views in PyTorch: no error
    "index": lambda t: t[[0, 2]],
    "copy_reshape": lambda t: t.t().reshape(12),
}
# how the op reads the view: as an operand of a product whose other side needs a gradient
# (saved), through sin (saved input), through exp (only its output is saved: no error)
READS = {
    "mul": lambda m, v, x: v * x,
    "sin": lambda m, v, x: v.sin() + x,
    "exp": lambda m, v, x: v.exp() + x,
}
# what changes the base: a leaf under no_grad, through itself or another view of it; a
# computed value by a recorded in-place op, or under no_grad
CHANGES = ["leaf", "leaf_other_view", "value", "value_no_grad"]


def run(m, view, read, change, keep_view):
    w = m.tensor(W, dtype=m.float64, requires_grad=True)
    base = w if change.startswith("leaf") else w * 2.0
    v = VIEWS[view](base)
    x = m.ones(v.shape, dtype=m.float64, requires_grad=True)
    y = READS[read](m, v, x)
    if not keep_view:
        del v
    if change == "value":
        base.add_(0.5)
    else:
        with m.no_grad():
            if change == "leaf_other_view":
                base[2].mul_(1.25)
            else:
                base.add_(0.5)
    return _backward(y, (w, x))


def _backward(y, leaves):
    try:
        y.sum().backward()
    except RuntimeError as e:
        text = str(e).split(" Hint: ")[0].replace("torch.", "tapegrad.")
        # (tapegrad adds where the change was made; PyTorch a hint)
        return "error", re.sub(r" It was modified by .*$", "", text)
    return "grads", [None if t.grad is None else np.array(t.grad.tolist()) for t in leaves]


def same(got, want):
    assert got[0] == want[0], (got, want)
    if got[0] == "error":
        assert got[1] == want[1]
    else:
        for g, e in zip(got[1], want[1]):
            assert (g is None) == (e is None)
            if e is not None:
                np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("keep_view", [False, True], ids=["view_gone", "view_kept"])
@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("read", sorted(READS))
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_a_changed_base_reaches_its_saved_views_as_in_pytorch(view, read, change, keep_view):
    same(run(tg, view, read, change, keep_view), run(torch, view, read, change, keep_view))


def test_both_outcomes_occur():
    """The table is not vacuous: the same view errs for a saved read and not for exp."""
    assert run(torch, "select", "mul", "leaf", False)[0] == "error"
    assert run(tg, "select", "mul", "leaf", False)[0] == "error"
    assert run(tg, "select", "exp", "leaf", False)[0] == "grads"
    assert run(tg, "index", "mul", "leaf", False)[0] == "grads"


@pytest.mark.parametrize("view", ["select", "t", "view", "expand", "view_of_view", "split",
                                  "index"])
def test_a_compiled_function_refuses_as_eager_mode_does(view):
    """A replay's tape holds the same view records: a leaf changed between the call and the
    backward is refused, or not, as in eager mode."""
    def f(w, x):
        return (VIEWS[view](w) * x).sum()

    fn = tg.compile(f)
    w = tg.tensor(W, dtype=tg.float64, requires_grad=True)
    x = tg.ones(VIEWS[view](w).shape, dtype=tg.float64, requires_grad=True)
    for _ in range(4):      # (recorded, replayed, and with generated code)
        fn(w, x).backward()
    w.grad = x.grad = None
    y = fn(w, x)
    with tg.no_grad():
        w.add_(0.5)
    got = _backward(y, (w, x))

    tw = torch.tensor(W, dtype=torch.float64, requires_grad=True)
    tx = torch.ones(VIEWS[view](tw).shape, dtype=torch.float64, requires_grad=True)
    ty = f(tw, tx)
    with torch.no_grad():
        tw.add_(0.5)
    same(got, _backward(ty, (tw, tx)))


@pytest.mark.parametrize("view", ["select", "t", "split", "index", "none"])
def test_create_graph_refuses_as_backward_does(view):
    """``autograd.grad(..., create_graph=True)`` records the backward as ops; it refuses a
    saved value changed in place as the plain backward does (the leaf itself, or a view)."""
    def outcome(m):
        w = m.tensor(W, dtype=m.float64, requires_grad=True)
        v = w if view == "none" else VIEWS[view](w)
        x = m.ones(v.shape, dtype=m.float64, requires_grad=True)
        y = (v * x).sum()
        with m.no_grad():
            w.add_(0.5)
        try:
            (g,) = m.autograd.grad(y, x, create_graph=True)
        except RuntimeError as e:
            text = str(e).split(" Hint: ")[0].replace("torch.", "tapegrad.")
            return "error", re.sub(r" It was modified by .*$", "", text)
        return "grads", [np.array(g.tolist())]

    same(outcome(tg), outcome(torch))
