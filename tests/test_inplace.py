"""In-place operations: PyTorch's values, gradients and errors, and the version error's
addition naming the op and the user's ``file:line``.

Tests with literal expected text run everywhere; tests comparing with PyTorch take the
``torch`` fixture and skip without it.
"""
import re
import sys

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import tape as tape_module

LEAF_IN_PLACE = "a leaf Variable that requires grad is being used in an in-place operation."
VERSION_PREFIX = ("one of the variables needed for gradient computation has been modified by an "
                  "inplace operation: ")


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def here():
    """The line number of the caller's current line."""
    return sys._getframe(1).f_lineno


def npy(t):
    return None if t is None else np.array(t.detach().numpy())


def split_version_error(text):
    """(PyTorch's first sentence, (op, file, line) of tapegrad's addition or None)."""
    m = re.fullmatch(r"(.*? instead\.) It was modified by (\S+) at (.+):(\d+)\.", text)
    if m is None:
        return text, None
    return m.group(1), (m.group(2), m.group(3), int(m.group(4)))


def torch_first_sentence(text):
    return text.split(" Hint: ")[0].replace("torch.", "tapegrad.").replace(
        "torch::", "tapegrad::")


# ---------------------------------------------------------------------------------------------
# Leaves
# ---------------------------------------------------------------------------------------------
LEAF_OPS = {
    "add_": lambda t: t.add_(1),
    "sub_": lambda t: t.sub_(1),
    "mul_": lambda t: t.mul_(2),
    "div_": lambda t: t.div_(2),
    "pow_": lambda t: t.pow_(2),
    "iadd": lambda t: t.__iadd__(1),
    "zero_": lambda t: t.zero_(),
    "fill_": lambda t: t.fill_(3.0),
    "copy_": lambda t: t.copy_(t.detach() * 2),
    "clamp_": lambda t: t.clamp_(0, 1),
    "setitem_int": lambda t: t.__setitem__(0, 5.0),
    "setitem_slice": lambda t: t.__setitem__(slice(0, 2), 5.0),
    "setitem_step": lambda t: t.__setitem__(slice(None, None, 2), 5.0),
    "setitem_full": lambda t: t.__setitem__(slice(None), 5.0),
    "setitem_ellipsis": lambda t: t.__setitem__(Ellipsis, 5.0),
    "setitem_list": lambda t: t.__setitem__([0, 2], 5.0),
    "setitem_mask": lambda t: t.__setitem__(t.detach() > 1.5, 5.0),
    "setitem_none": lambda t: t.__setitem__(None, 5.0),
}
# x[key] = v for a basic key that picks part of x writes through a view of x
VIEW_OF_LEAF = {"setitem_int", "setitem_slice", "setitem_step", "setitem_none"}


@pytest.mark.parametrize("op", sorted(LEAF_OPS))
def test_leaf_in_place_error(op):
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError) as e:
        LEAF_OPS[op](x)
    assert str(e.value) == ("a view of " if op in VIEW_OF_LEAF else "") + LEAF_IN_PLACE
    assert x.is_leaf and x.requires_grad and x._version == 0
    np.testing.assert_array_equal(x.detach().numpy(), [1.0, 2.0, 3.0])   # untouched
    (x * x).sum().backward()                     # and still usable
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])


@pytest.mark.parametrize("op", sorted(LEAF_OPS))
def test_leaf_in_place_error_matches_torch(torch, op):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError) as e:
        LEAF_OPS[op](x)
    assert str(e.value) == ("a view of " if op in VIEW_OF_LEAF else "") + LEAF_IN_PLACE


def test_leaf_in_place_under_no_grad_is_allowed():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with tg.no_grad():
        x.mul_(3)
        x[0] = 10.0
    assert x.is_leaf and x.requires_grad and x.grad_fn is None
    np.testing.assert_array_equal(x.detach().numpy(), [10.0, 6.0])
    assert x._version == 2
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [20.0, 12.0])


# A leaf changed under no_grad between two reads is imported again; what read the old copy
# read the value of then.  PyTorch's saved tensor is the leaf itself, at its old version.
LEAF_READ_THEN_CHANGED = {
    # name: the reads, each after the leaf x changed in place (under no_grad) once more
    # w * x saved x at version 0: refused
    "saved, then read again": lambda x, w: [(x * w).sum(), lambda: (x * 3.0).sum()],
    # x * 2.0 saves nothing of x: allowed, and x's gradient sums both reads
    "not saved": lambda x, w: [(x * 2.0).sum(), lambda: (x * w).sum()],
    # the newer read saves x at its new version: allowed
    "saved after the change": lambda x, w: [(x + w).sum(), lambda: (x * x).sum()],
    # two changes: sin saved the first copy (refused), exp saves its result (allowed)
    "changed twice, sin": lambda x, w: [(x.sin() * w).sum(), lambda: (x * 2.0).sum(),
                                        lambda: (x - w).sum()],
    "changed twice, exp": lambda x, w: [(x.exp() * w).sum(), lambda: (x * 2.0).sum(),
                                        lambda: (x - w).sum()],
}


def _leaf_read_then_changed(L, name, n):
    x = L.tensor(np.linspace(-1.0, 1.0, n), requires_grad=True)
    w = L.tensor(np.linspace(0.5, 1.5, n), requires_grad=True)
    loss, *later = LEAF_READ_THEN_CHANGED[name](x, w)
    for part in later:
        with L.no_grad():
            x.add_(0.25)
        loss = loss + part()
    try:
        loss.backward()
    except RuntimeError as e:
        return "error", str(e)
    return "grads", x.grad.numpy().copy(), w.grad.numpy().copy()


@pytest.mark.parametrize("n", [3, 3000])
@pytest.mark.parametrize("name", sorted(LEAF_READ_THEN_CHANGED))
def test_a_leafs_older_copy_read_after_a_change_is_checked_as_pytorch_checks_it(torch, name, n):
    # n = 3000 on a first tape of 4096 values: the reads may sit on two tapes
    tape_module.state.tape, tape_module.state.last_used = None, 0
    ours = _leaf_read_then_changed(tg, name, n)
    theirs = _leaf_read_then_changed(torch, name, n)
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "error":
        assert ours[1].split(" It was modified by")[0] == torch_first_sentence(theirs[1])
    else:
        for got, want in zip(ours[1:], theirs[1:]):
            np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)


# ---------------------------------------------------------------------------------------------
# The version error
# ---------------------------------------------------------------------------------------------
def test_version_error_text():
    a = tg.ones(2, 2, requires_grad=True)
    b = a.exp()
    b.add_(1); line = here()  # noqa: E702 - the line of the in-place call
    with pytest.raises(RuntimeError) as e:
        b.sum().backward()
    assert str(e.value) == (
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [tapegrad.DoubleTensor [2, 2]], which is output 0 of Exp, is at version 1; "
        f"expected version 0 instead. It was modified by add_ at {__file__}:{line}.")
    assert a.grad is None


def test_version_error_matches_torch(torch):
    a = torch.ones(2, 2, requires_grad=True)
    b = a.exp()
    b.add_(1)
    with pytest.raises(RuntimeError) as e:
        b.sum().backward()
    assert torch_first_sentence(str(e.value)) == (
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [tapegrad.DoubleTensor [2, 2]], which is output 0 of Exp, is at version 1; "
        "expected version 0 instead.")


# Each program returns (loss, op name tapegrad reports, line of that in-place call).
def _own_output(L, a):
    b = a.exp()
    b.add_(1); line = here()  # noqa: E702
    return b.sum(), "add_", line


def _saved_input_add(L, a):
    b = a.exp()
    c = b * b
    b.add_(1); line = here()  # noqa: E702
    return c.sum(), "add_", line


def _saved_input_mul(L, a):
    b = a.exp()
    c = b * b
    b.mul_(2); line = here()  # noqa: E702
    return c.sum(), "mul_", line


def _changed_under_no_grad(L, a):
    b = a.exp()
    c = b * b
    with L.no_grad():
        b.add_(1); line = here()  # noqa: E702
    return c.sum(), "add_", line


def _two_changes(L, a):
    b = a.exp()
    c = b * b
    b.add_(1); line = here()  # noqa: E702
    b.mul_(2)
    return c.sum(), "add_", line


def _seen_one_change(L, a):
    b = a.exp()
    b.add_(1)
    c = b * b
    b.mul_(2); line = here()  # noqa: E702
    return c.sum(), "mul_", line


def _in_place_output(L, a):
    b = a.sin()
    b.exp_()
    c = b.sum()
    b.add_(1); line = here()  # noqa: E702
    return c, "add_", line


def _clamp(L, a):
    b = a.exp()
    c = b * b
    b.clamp_(0, 2); line = here()  # noqa: E702
    return c.sum(), "clamp_", line


def _div(L, a):
    b = a.exp()
    c = b * b
    b.div_(2.0); line = here()  # noqa: E702
    return c.sum(), "div_", line


def _pow(L, a):
    b = a.exp()
    c = b * b
    b.pow_(2.0); line = here()  # noqa: E702
    return c.sum(), "pow_", line


def _pow_tensor(L, a):
    b = a.exp()
    c = b * b
    b.pow_(L.ones(2, 2) * 2); line = here()  # noqa: E702
    return c.sum(), "pow_", line


def _sub(L, a):
    b = a.exp()
    c = b * b
    b.sub_(2.0); line = here()  # noqa: E702
    return c.sum(), "sub_", line


def _iadd_matmul(L, a):
    b = a.exp()
    c = b.t() @ b
    b += 1; line = here()  # noqa: E702
    return c.sum(), "add_", line


def _exp_of_saved(L, a):
    b = a.exp()
    c = b * b
    b.exp_(); line = here()  # noqa: E702
    return c.sum(), "exp_", line


def _add_tensor(L, a):
    b = a.exp()
    c = b * b
    b.add_(a); line = here()  # noqa: E702
    return c.sum(), "add_", line


def _setitem(L, a):
    b = a + 1
    c = b.sin()
    b[0] = 5.0; line = here()  # noqa: E702
    return c.sum(), "__setitem__", line


def _leaf_under_no_grad(L, a):
    c = a * a
    with L.no_grad():
        a.add_(1); line = here()  # noqa: E702
    return c.sum(), "add_", line


def _detached_view(L, a):
    b = a.exp()
    d = b.detach()
    d.add_(1); line = here()  # noqa: E702
    return b.sum(), "add_", line


def _detached_leaf_view(L, a):
    c = a * a
    d = a.detach()
    d.mul_(2); line = here()  # noqa: E702
    return c.sum(), "mul_", line


def _detached_setitem(L, a):
    b = a.tanh()
    d = b.detach()
    d[0, 0] = 7.0; line = here()  # noqa: E702
    return b.sum(), "__setitem__", line


def _relu(L, a):
    b = a.sigmoid()
    c = b * b
    b.relu_(); line = here()  # noqa: E702
    return c.sum(), "relu_", line


def _tanh_of_tanh(L, a):
    b = a.tanh()
    b.tanh_(); line = here()  # noqa: E702
    c = b.sum()
    b.neg_()
    return c, "neg_", line + 2


VERSION_PROGRAMS = [
    _own_output, _saved_input_add, _saved_input_mul, _changed_under_no_grad, _two_changes,
    _seen_one_change, _in_place_output, _clamp, _div, _pow, _pow_tensor, _sub, _iadd_matmul,
    _exp_of_saved, _add_tensor, _setitem, _leaf_under_no_grad, _detached_view,
    _detached_leaf_view, _detached_setitem, _relu, _tanh_of_tanh,
]


@pytest.mark.parametrize("prog", VERSION_PROGRAMS, ids=lambda f: f.__name__.strip("_"))
def test_version_error_names_the_op_and_the_line(prog):
    a = tg.tensor([[0.5, 1.0], [1.5, 2.0]], requires_grad=True)
    loss, op, line = prog(tg, a)
    with pytest.raises(RuntimeError) as e:
        loss.backward()
    first, added = split_version_error(str(e.value))
    assert first.startswith(VERSION_PREFIX)
    assert added == (op, __file__, line)
    # the failed backward changed nothing, and a fresh graph works
    assert a.grad is None
    b = tg.tensor([[0.5, 1.0], [1.5, 2.0]], requires_grad=True)
    (b * b).sum().backward()
    np.testing.assert_array_equal(b.grad.numpy(), [[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("prog", VERSION_PROGRAMS, ids=lambda f: f.__name__.strip("_"))
def test_version_error_first_sentence_matches_torch(torch, prog):
    texts = []
    for L in (tg, torch):
        a = L.tensor([[0.5, 1.0], [1.5, 2.0]], requires_grad=True)
        loss = prog(L, a)[0]
        with pytest.raises(RuntimeError) as e:
            loss.backward()
        texts.append(str(e.value))
    assert split_version_error(texts[0])[0] == torch_first_sentence(texts[1])


def test_version_error_after_detach_in_place():
    # PyTorch refuses any saved tensor that was detached in place; tapegrad refuses it once it
    # is changed (before that, the recorded value is intact and the gradient is right)
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    z = y.sin()
    y.detach_()
    assert y.is_leaf and not y.requires_grad and y.grad_fn is None
    y.mul_(2); line = here()  # noqa: E702
    with pytest.raises(RuntimeError) as e:
        z.sum().backward()
    assert split_version_error(str(e.value)) == (
        VERSION_PREFIX + "[tapegrad.DoubleTensor [2]], which is output 0 of Exp, is at version "
        "1; expected version 0 instead.", ("mul_", __file__, line))


def test_data_writes_are_not_checked(torch):
    # .data shares the value without the version: as in PyTorch, nothing is detected and the
    # backward reads the changed value
    grads = []
    for L in (tg, torch):
        x = L.tensor([1.0, 2.0], requires_grad=True)
        y = x.exp()
        y.data.mul_(2)
        y.sum().backward()
        grads.append(npy(x.grad))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-15)


def test_a_leaf_given_new_data_is_read_anew_by_later_ops(torch):
    # ``w.data = new`` changes no version: the tape's copy of w, made by an op before, must
    # not stand in for w's new values in ops after (it did: w's gradient was 2, not 6)
    results = []
    for L in (tg, torch):
        w = L.tensor([1.0, 2.0, 3.0], requires_grad=True)
        first = (w * 2).sum()
        w.data = L.tensor([3.0, -1.0, 0.5])
        second = (w * w * w).sum()
        (first + second).backward()
        results.append((second.item(), npy(w.grad)))
    assert results[0][0] == results[1][0]
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-15)


def test_a_write_into_a_leafs_new_data_is_read_by_later_ops(torch):
    # after w.data = new, a write into new changes w (one memory): a later op must not use
    # the tape's copy of w made before the write (its gradient read the old values: 4
    # where PyTorch's is 12)
    results = []
    for L in (tg, torch):
        w = L.ones(3, requires_grad=True)
        new = L.full((3,), 2.0)
        w.data = new
        (w * w).sum()
        new.mul_(3)
        b = (w * w * w).sum()
        b.backward()
        results.append((b.item(), npy(w), npy(w.grad)))
    assert results[0][0] == results[1][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])
    np.testing.assert_allclose(results[0][2], results[1][2], rtol=1e-15)


@pytest.mark.parametrize("order", ["numpy() after", "numpy() before", "from_numpy"])
def test_a_numpy_write_into_a_leafs_new_data_is_read_by_later_ops(torch, order):
    # NumPy writes into new's memory count no version: once NumPy holds it, a later use of w
    # compares the tape's copy of w with w's values (it read the old ones: 44 where
    # PyTorch's gradient is 108)
    results = []
    for L in (tg, torch):
        w = L.ones(3, requires_grad=True)
        if order == "from_numpy":
            arr = np.full(3, 2.0)
            new = L.from_numpy(arr)
        else:
            new = L.full((3,), 2.0)
        if order == "numpy() before":
            arr = new.numpy()
        w.data = new
        if order == "numpy() after":
            arr = new.numpy()
        (w * w).sum()
        arr *= 3
        b = (w * w * w).sum()
        b.backward()
        results.append((b.item(), npy(w.grad)))
    assert results[0][0] == results[1][0]
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-15)


def test_a_graph_that_read_a_leaf_before_a_write_into_its_new_data_raises():
    # PyTorch's backward would read the new values (w shares new's memory, not its version
    # counter); tapegrad's graph holds a copy of the old ones, so it refuses, naming the write
    w = tg.ones(3, requires_grad=True)
    new = tg.full((3,), 2.0)
    w.data = new
    a = (w * w).sum()
    new.mul_(3); line = here()  # noqa: E702
    with pytest.raises(RuntimeError) as e:
        a.backward()
    assert split_version_error(str(e.value)) == (
        VERSION_PREFIX + "[tapegrad.DoubleTensor [3]] is at version 1; expected version 0 "
        "instead.", ("mul_", __file__, line))


@pytest.mark.parametrize("write", [
    lambda d: d.mul_(3),
    lambda d: d.__setitem__(slice(None), 2.5),
    lambda d: d[1:].add_(1),
    lambda d: d.copy_(d * -2),
    lambda d: d.zero_(),
])
@pytest.mark.parametrize("where", ["leaf", "older tape"])
def test_a_write_through_data_is_read_by_later_ops(torch, write, where):
    # a write through .data counts no version: the tape's copy of the tensor, made by a use
    # before the write, must not stand in for it in uses after (their gradients read the old
    # values: 2 where PyTorch's is 6)
    results = []
    for L in (tg, torch):
        x = L.tensor([1.0, 2.0, 3.0], requires_grad=True)
        if where == "leaf":
            t = x
        else:
            t = x * 2
            (x * 5).sum().backward()   # (t's tape is done: later uses copy t from it)
            x.grad = None
        first = (t * t).sum()
        write(t.data)
        second = (t * t * x).sum()
        second.backward()
        results.append((first.item(), second.item(), npy(x.grad)))
    assert results[0][:2] == results[1][:2]
    np.testing.assert_allclose(results[0][2], results[1][2], rtol=1e-15)


@pytest.mark.parametrize("where", ["this tape", "older tape"])
def test_new_data_of_a_tensor_with_a_history_flows_on_into_it(torch, where):
    # the straight-through estimator: y.data = y.data.round(); later ops read the new values,
    # their gradients flow on into y's grad_fn, and an op that read y before keeps the old
    # values (they read the old ones: x's gradient was 8 where PyTorch's is 20)
    results = []
    for L in (tg, torch):
        x = L.tensor([0.3, 1.6, -2.2], requires_grad=True)
        y = x * 2.5
        before = (y * y).sum()
        if where == "older tape":
            (x * 5).sum().backward()   # (y's tape is done: later uses copy y from it)
            x.grad = None
        node = y.grad_fn.name()
        y.data = y.data.round()
        after = (y * y * x).sum()
        (before + after).backward()
        results.append((before.item(), after.item(), npy(y), node, y.grad_fn.name(),
                        npy(x.grad)))
    assert results[0][:2] == results[1][:2]
    np.testing.assert_array_equal(results[0][2], results[1][2])
    assert results[0][3:5] == results[1][3:5] == ("MulBackward0", "MulBackward0")
    np.testing.assert_allclose(results[0][5], results[1][5], rtol=1e-15)


def test_new_data_of_another_shape_for_a_tensor_with_a_history_raises():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="only to a tensor of its shape and dtype"):
        y.data = tg.ones(3)
    assert y.tolist() == [2.0, 4.0] and y.grad_fn.name() == "MulBackward0"
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


# ---------------------------------------------------------------------------------------------
# In-place ops on values no record needs: PyTorch's values and gradients
# ---------------------------------------------------------------------------------------------
def test_in_place_on_values_nothing_saved():
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y += 1
    y[0] = 5
    assert repr(y) == "tensor([5., 5., 7.], grad_fn=<CopySlices>)"
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 2.0, 2.0])


def test_in_place_on_values_nothing_saved_matches_torch(torch):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y += 1
    y[0] = 5
    assert repr(y) == "tensor([5., 5., 7.], grad_fn=<CopySlices>)"
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 2.0, 2.0])


def _set(t, key, value):
    t[key] = value
    return t


def _iop(name):
    def run(t, v):
        return getattr(t, name)(v)
    return run


# name -> f(L, y, w, b): y (2, 3) non-leaf, w (2, 3) and b (3,) leaves requiring grad
IN_PLACE_OPS = {
    "add_scalar": lambda L, y, w, b: y.add_(2),
    "add_tensor": lambda L, y, w, b: y.add_(w),
    "add_alpha": lambda L, y, w, b: y.add_(w, alpha=2),
    "add_broadcast": lambda L, y, w, b: y.add_(b),
    "add_const": lambda L, y, w, b: y.add_(L.ones(2, 3) * 0.5),
    "sub_scalar": lambda L, y, w, b: y.sub_(1),
    "sub_tensor": lambda L, y, w, b: y.sub_(w),
    "mul_scalar": lambda L, y, w, b: y.mul_(3),
    "mul_tensor": lambda L, y, w, b: y.mul_(w),
    "mul_broadcast": lambda L, y, w, b: y.mul_(b),
    "div_scalar": lambda L, y, w, b: y.div_(4),
    "div_tensor": lambda L, y, w, b: y.div_(w),
    "pow_scalar": lambda L, y, w, b: y.pow_(2),
    "pow_fraction": lambda L, y, w, b: y.pow_(0.5),
    "pow_tensor": lambda L, y, w, b: y.pow_(w),
    "zero_": lambda L, y, w, b: y.zero_(),
    "fill_": lambda L, y, w, b: y.fill_(2.5),
    "clamp_": lambda L, y, w, b: y.clamp_(0.6, 1.2),
    "clamp_min": lambda L, y, w, b: y.clamp_(min=0.8),
    "clamp_max": lambda L, y, w, b: y.clamp_(max=0.8),
    "copy_": lambda L, y, w, b: y.copy_(w),
    "copy_broadcast": lambda L, y, w, b: y.copy_(b),
    "copy_const": lambda L, y, w, b: y.copy_(L.ones(2, 3)),
    "iadd": lambda L, y, w, b: _iop("__iadd__")(y, w),
    "iadd_scalar": lambda L, y, w, b: _iop("__iadd__")(y, 1.5),
    "isub": lambda L, y, w, b: _iop("__isub__")(y, b),
    "imul": lambda L, y, w, b: _iop("__imul__")(y, w),
    "imul_scalar": lambda L, y, w, b: _iop("__imul__")(y, -2),
    "itruediv": lambda L, y, w, b: _iop("__itruediv__")(y, w),
    "itruediv_scalar": lambda L, y, w, b: _iop("__itruediv__")(y, 8),
    "set_int": lambda L, y, w, b: _set(y, 0, 5.0),
    "set_element": lambda L, y, w, b: _set(y, (1, 2), w[0, 0] * 3),
    "set_slice_tensor": lambda L, y, w, b: _set(y, (slice(None), slice(1, None)), w[:, :2] * 2),
    "set_row_broadcast": lambda L, y, w, b: _set(y, 1, b),
    "set_mask": lambda L, y, w, b: _set(y, y > 1.0, 0.0),
    "set_list": lambda L, y, w, b: _set(y, [1, 0], w),
    "set_negative": lambda L, y, w, b: _set(y, (-1, -1), -3.0),
    "set_leading_ones": lambda L, y, w, b: _set(y, 0, b.reshape(1, 1, 3)),
    "chained": lambda L, y, w, b: y.mul_(2).add_(w).clamp_(max=2.0),
    "relu_": lambda L, y, w, b: y.sub_(1).relu_(),
    "exp_": lambda L, y, w, b: y.exp_(),
    "tanh_": lambda L, y, w, b: y.tanh_(),
    "sigmoid_": lambda L, y, w, b: y.sigmoid_(),
    "neg_": lambda L, y, w, b: y.neg_(),
}


def _in_place_program(L, op, on):
    rng = np.random.default_rng(3)
    x = L.tensor(rng.uniform(0.1, 1.0, (2, 3)), requires_grad=True)
    w = L.tensor(rng.uniform(0.5, 1.5, (2, 3)), requires_grad=True)
    b = L.tensor(rng.uniform(0.5, 1.5, 3), requires_grad=True)
    wt = L.tensor(rng.uniform(-1.0, 1.0, (2, 3)))
    if on == "non_leaf":
        y = x * 1.5 + 0.25
    else:                                        # a plain tensor, not requiring grad
        y = L.tensor(rng.uniform(0.1, 1.0, (2, 3)))
    before = y * 2.0                             # read before the change: sees the old value
    out = IN_PLACE_OPS[op](L, y, w, b)
    loss = (y * wt).sum() + (before * wt).sum() * 0.5
    info = (out is y, y.requires_grad, y.is_leaf, npy(y), npy(before))
    if loss.requires_grad:
        loss.backward()
    return info, [npy(t.grad) for t in (x, w, b)]


@pytest.mark.parametrize("on", ["non_leaf", "plain"])
@pytest.mark.parametrize("op", sorted(IN_PLACE_OPS))
def test_in_place_values_and_gradients_match_torch(torch, op, on):
    got = _in_place_program(tg, op, on)
    want = _in_place_program(torch, op, on)
    (is_same, rg, leaf, value, before), grads = got
    (w_same, w_rg, w_leaf, w_value, w_before), w_grads = want
    assert is_same == w_same
    assert (rg, leaf) == (w_rg, w_leaf)
    np.testing.assert_allclose(value, w_value, rtol=1e-15, atol=0)
    np.testing.assert_array_equal(before, w_before)
    for g, wg in zip(grads, w_grads):
        if wg is None:
            assert g is None
        else:
            np.testing.assert_allclose(g, wg, rtol=1e-13, atol=1e-15)


# In-place ops on a non-leaf y (from x) with a leaf w: PyTorch's gradients, or its error
IN_PLACE_CHAINS = {
    "mul_self": lambda y, w: y.mul_(y),
    "mul_then_add": lambda y, w: y.mul_(w).add_(1),
    "div_then_mul": lambda y, w: y.div_(w).mul_(2),
    "clamp_then_mul": lambda y, w: y.clamp_(0, 1.5).mul_(2),
    "pow_tensor_then_add": lambda y, w: y.pow_(w).add_(1),
    "pow_then_add": lambda y, w: y.pow_(2).add_(1),
    "exp_twice": lambda y, w: y.exp_().exp_(),
    "sigmoid_then_mul": lambda y, w: y.sigmoid_().mul_(w),
    "tanh_then_set": lambda y, w: _set(y.tanh_(), 0, 0.0),
    "mul_by_w_times": lambda y, w: y.mul_(w).mul_(w).mul_(w),
    "div_self": lambda y, w: y.div_(y * 1),
}


def _chain(L, name):
    x = L.tensor([0.5, 2.0], requires_grad=True)
    w = L.tensor([3.0, 0.25], requires_grad=True)
    y = x * 1.0
    IN_PLACE_CHAINS[name](y, w)
    try:
        (y * L.tensor([1.0, -2.0])).sum().backward()
    except RuntimeError as e:
        return ("error", str(e))
    return ("ok", npy(y), npy(x.grad), npy(w.grad))


@pytest.mark.parametrize("name", sorted(IN_PLACE_CHAINS))
def test_in_place_chains_match_torch(torch, name):
    got, want = _chain(tg, name), _chain(torch, name)
    assert got[0] == want[0], (got, want)
    if got[0] == "error":
        assert split_version_error(got[1])[0] == torch_first_sentence(want[1])
        return
    for a, b in zip(got[1:], want[1:]):
        if b is None:
            assert a is None
        else:
            np.testing.assert_allclose(a, b, rtol=1e-14)


def test_in_place_op_reading_the_value_it_replaces():
    x = tg.tensor([0.5, 2.0], requires_grad=True)
    w = tg.tensor([3.0, 0.25], requires_grad=True)
    y = x * 1.0
    y.mul_(w)
    y.add_(1)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 0.25])
    np.testing.assert_array_equal(w.grad.numpy(), [0.5, 2.0])
    y = x * 1.0
    y.mul_(y); line = here()  # noqa: E702 - y is also the saved other operand
    with pytest.raises(RuntimeError) as e:
        y.sum().backward()
    assert split_version_error(str(e.value)) == (
        VERSION_PREFIX + "[tapegrad.DoubleTensor [2]], which is output 0 of Mul, is at version 1; "
        "expected version 0 instead.", ("mul_", __file__, line))


def test_in_place_returns_self_and_bumps_the_version():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    assert y._version == 0
    assert y.add_(1) is y and y._version == 1
    assert y.mul_(2) is y and y._version == 2
    y[0] = 3.0
    assert y._version == 3
    assert y.zero_() is y and y._version == 4
    c = tg.zeros(2)
    assert c.add_(1) is c and c._version == 1 and not c.requires_grad


def test_in_place_on_a_plain_tensor_with_a_grad_operand():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    c = tg.zeros(2)
    c.add_(w)
    assert c.requires_grad and not c.is_leaf and c.grad_fn.name() == "AddBackward0"
    (c * c).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0])


def test_in_place_errors():
    y = tg.ones(3) * tg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError) as e:
        y += tg.ones(2, 3)
    assert str(e.value) == "output with shape [3] doesn't match the broadcast shape [2, 3]"
    with pytest.raises(RuntimeError) as e:
        y.add_(tg.ones(2))
    assert str(e.value) == ("The size of tensor a (3) must match the size of tensor b (2) at "
                            "non-singleton dimension 0")
    n = tg.tensor([1, 2, 3])
    with pytest.raises(RuntimeError) as e:
        n.add_(0.5)
    assert str(e.value) == "result type Double can't be cast to the desired output type Long"
    np.testing.assert_array_equal(n.numpy(), [1, 2, 3])
    y.sum().backward()                           # y survived its failed in-place ops


def test_in_place_errors_match_torch(torch):
    def programs(L):
        def bad_broadcast():
            y = L.ones(3) * L.ones(3, requires_grad=True)
            y += L.ones(2, 3)

        def bad_size():
            (L.ones(3) * L.ones(3, requires_grad=True)).add_(L.ones(2))

        def int_cast():
            L.tensor([1, 2, 3]).add_(0.5)

        def bad_setitem():
            y = L.ones(3) * L.ones(3, requires_grad=True)
            y[0:2] = L.ones(3)

        def bad_setitem_2d():
            y = L.ones(3, 4) * L.ones(3, 4, requires_grad=True)
            y[0:2] = L.ones(2, 5)

        def bad_setitem_rank():
            y = L.ones(3, 4) * L.ones(3, 4, requires_grad=True)
            y[0] = L.ones(2, 4)

        def bad_setitem_column():
            y = L.ones(3, 4) * L.ones(3, 4, requires_grad=True)
            y[:, 0] = L.ones(4)

        def bad_setitem_advanced():
            y = L.ones(3, 4) * L.ones(3, 4, requires_grad=True)
            y[[0, 1]] = L.ones(3)

        def bad_setitem_mixed():
            y = L.ones(3, 4) * L.ones(3, 4, requires_grad=True)
            y[0, [0, 1]] = L.ones(3)
        return [bad_broadcast, bad_size, int_cast, bad_setitem, bad_setitem_2d, bad_setitem_rank,
                bad_setitem_column, bad_setitem_advanced, bad_setitem_mixed]
    for f, g in zip(programs(tg), programs(torch)):
        texts = []
        for fn in (f, g):
            with pytest.raises(RuntimeError) as e:
                fn()
            texts.append(str(e.value).replace("torch.", "tapegrad."))
        assert texts[0] == texts[1], f.__name__


# ---------------------------------------------------------------------------------------------
# Optimizer-style updates
# ---------------------------------------------------------------------------------------------
def _sgd(L, steps=5, lr=0.1):
    rng = np.random.default_rng(5)
    X = L.tensor(rng.standard_normal((6, 3)))
    Y = L.tensor(rng.standard_normal((6, 1)))
    W = L.tensor(rng.standard_normal((3, 1)), requires_grad=True)
    b = L.zeros(1, requires_grad=True)
    losses, versions = [], []
    for _ in range(steps):
        loss = ((X @ W + b - Y) ** 2).mean()
        loss.backward()
        with L.no_grad():
            W -= lr * W.grad
            b -= lr * b.grad
        W.grad.zero_()
        b.grad = None
        losses.append(loss.item())
        versions.append((W._version, b._version))
        assert W.is_leaf and W.requires_grad and W.grad_fn is None
    return losses, versions, npy(W), npy(b), npy(W.grad)


def test_optimizer_style_update():
    losses, versions, W, b, g = _sgd(tg)
    assert all(l2 < l1 for l1, l2 in zip(losses, losses[1:]))
    assert versions == [(k, k) for k in range(1, 6)]
    np.testing.assert_array_equal(g, np.zeros((3, 1)))


def test_optimizer_style_update_matches_torch(torch):
    got, want = _sgd(tg), _sgd(torch)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
    assert got[1] == want[1]
    for a, b in zip(got[2:], want[2:]):
        np.testing.assert_allclose(a, b, rtol=1e-13)


@pytest.mark.parametrize("dst, src", [((), (2,)), ((), (1, 1)), ((1,), (2,)), ((1,), (1, 1)),
                                      ((2, 1), (3, 2, 1)), ((2, 1), (2, 3))])
@pytest.mark.parametrize("recorded", [False, True])
def test_copy_of_a_source_that_does_not_fit_raises_pytorchs_error(dst, src, recorded):
    # (a plain copy_ raised NumPy's ValueError, a recorded one expand's text)
    from oracle import outcome
    torch = pytest.importorskip("torch")

    def run(L):
        target = L.zeros(dst, dtype=L.float64, requires_grad=recorded).clone()
        return target.copy_(L.ones(src, dtype=L.float64))
    assert outcome(tg, run) == outcome(torch, run)
