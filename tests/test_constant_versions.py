"""A tensor that requires no grad (data, a constant), read by an op whose backward needs its
value, then changed in place before ``backward()``: PyTorch refuses it, as the tensor it saved
is at a newer version.  tapegrad's tape holds a copy, whose version it checks the same way,
in eager mode and in a compiled function -- an argument or a tensor the function closes over;
on the call that records, on a replay and with generated code.  Each case is compared with
PyTorch in eager mode: the same error text, or the same gradients."""
import re

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

X = [0.3, -1.2, 0.8]
C = [[1.5, -0.5, 2.0], [0.25, 3.0, -1.0]]

# how the loss reads c (2 x 3): directly, through views, or (add, a copy) not at all
READS = {
    "mul": lambda m, x, c: (c * x.sin()).sum(),
    "row": lambda m, x, c: (c[1] * x).sum(),
    "element": lambda m, x, c: (c[0, 2] * x).sum(),
    "slice": lambda m, x, c: (c[:, 1:] * x[1:]).sum(),
    "transpose": lambda m, x, c: (c.t() @ x[:2]).sum(),
    "reshape": lambda m, x, c: (c.reshape(6)[:3] * x).sum(),
    "matmul": lambda m, x, c: (c @ x).sum(),
    "add": lambda m, x, c: (c + x).sum(),
    "copy": lambda m, x, c: (c.clone() * x).sum(),
    "twice": lambda m, x, c: (c * x + c[1] * x * x).sum(),
}


def _change_all(m, c):
    with m.no_grad():
        c.add_(1.0)


def _change_one(m, c):
    c[1, 0] = 7.0


def _change_through_view(m, c):
    c[0].mul_(2.0)


CHANGES = {"add_": _change_all, "setitem": _change_one, "view": _change_through_view}


def _outcome(loss, x, m):
    try:
        loss.backward()
    except RuntimeError as e:
        text = str(e).split(" Hint: ")[0].replace("torch.", "tapegrad.")
        return "error", re.sub(r" It was modified by .*$", "", text)
    return "grads", x.grad.tolist()


def _tensors(m):
    x = m.tensor(X, dtype=m.float64, requires_grad=True)
    c = m.tensor(C, dtype=m.float64)
    return x, c


def expected(read, change):
    x, c = _tensors(torch)
    loss = READS[read](torch, x, c)
    CHANGES[change](torch, c)
    return _outcome(loss, x, torch)


def test_both_outcomes_occur():
    assert expected("mul", "add_")[0] == "error"
    assert expected("row", "setitem")[0] == "error"
    assert expected("add", "add_")[0] == "grads"
    assert expected("copy", "view")[0] == "grads"


@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize("read", sorted(READS))
def test_eager(read, change):
    x, c = _tensors(tg)
    loss = READS[read](tg, x, c)
    CHANGES[change](tg, c)
    assert _outcome(loss, x, tg) == expected(read, change)


def _compiled_calls(read, source, calls, codegen):
    """The outcome of the last of ``calls`` calls of a compiled function reading c (an
    argument, or a tensor it closes over), c changed between that call and its backward;
    the calls before it run their backward with c unchanged."""
    c = tg.tensor(C, dtype=tg.float64)
    if source == "argument":
        f = tg.compile(lambda x, c: READS[read](tg, x, c), codegen=codegen)
        call = lambda x: f(x, c)       # noqa: E731
    else:
        f = tg.compile(lambda x: READS[read](tg, x, c), codegen=codegen)
        call = f
    for _ in range(calls - 1):
        x = tg.tensor(X, dtype=tg.float64, requires_grad=True)
        call(x).backward()
    x = tg.tensor(X, dtype=tg.float64, requires_grad=True)
    return f, c, x, call(x)


@pytest.mark.parametrize("calls, codegen", [(1, None), (3, False), (3, True)],
                         ids=["recording", "replay", "generated"])
@pytest.mark.parametrize("source", ["argument", "closure"])
@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize("read", sorted(READS))
def test_compiled(read, change, source, calls, codegen):
    f, c, x, loss = _compiled_calls(read, source, calls, codegen)
    if calls > 1:
        assert f.stats.replays == calls - 1, f.stats
    CHANGES[change](tg, c)
    assert _outcome(loss, x, tg) == expected(read, change)


@pytest.mark.parametrize("source", ["argument", "closure"])
def test_an_unchanged_constant_after_a_refused_backward_replays(source):
    """After the refusal, the function records again for the changed constant and its
    results' backward works."""
    f, c, x, loss = _compiled_calls("row", source, 3, None)
    _change_all(tg, c)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    for _ in range(3):
        x = tg.tensor(X, dtype=tg.float64, requires_grad=True)
        call = f(x, c) if source == "argument" else f(x)
        call.backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.array(C)[1] + 1.0)
