"""The autograd contract: what a user of ``requires_grad``, ``grad_fn``, ``backward()``, ``.grad``,
``autograd.grad``, grad mode and hooks sees, stated exactly.

Tests with literal expected text run everywhere; tests that run the same program through
PyTorch (default dtype float64, ``torch.`` spelled ``tapegrad.``) take the ``torch`` fixture
and skip without it.
"""
import re
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg

SEED_REPR = "tensor([[3., 3.],\n        [3., 3.]], grad_fn=<AddBackward0>)"
SAVED_FREED = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward.")
NON_LEAF_GRAD = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
    "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
    "instead.")


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def npy(t):
    """A tensor's value as a NumPy array (either library)."""
    return None if t is None else np.array(t.detach().numpy())


def same(a, b, rtol=1e-12):
    if a is None or b is None:
        assert a is None and b is None
        return
    a, b = npy(a) if not isinstance(a, np.ndarray) else a, npy(b) if not isinstance(
        b, np.ndarray) else b
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-14)


def msg(exc_info):
    return str(exc_info.value)


# ---------------------------------------------------------------------------------------------
# The seed example and grad_fn
# ---------------------------------------------------------------------------------------------
def test_seed_example_prints_exactly():
    x = tg.ones(2, 2, requires_grad=True)
    y = x + 2
    assert repr(y) == SEED_REPR
    assert str(y) == SEED_REPR
    assert re.fullmatch(r"<AddBackward0 object at 0x[0-9a-f]+>", repr(y.grad_fn))
    assert y.grad_fn.name() == "AddBackward0"
    assert x.grad_fn is None
    out = (y * y * 3).mean()
    out.backward()
    assert repr(x.grad) == "tensor([[4.5000, 4.5000],\n        [4.5000, 4.5000]])"


def test_seed_example_matches_torch(torch):
    x = torch.ones(2, 2, requires_grad=True)
    y = x + 2
    assert repr(y) == SEED_REPR
    assert re.fullmatch(r"<AddBackward0 object at 0x[0-9a-f]+>", repr(y.grad_fn))


def test_leaf_and_plain_tensors_have_no_grad_fn():
    x = tg.ones(3, requires_grad=True)
    c = tg.ones(3)
    assert x.grad_fn is None and c.grad_fn is None
    assert (c * 2).grad_fn is None
    assert x.detach().grad_fn is None


def test_accumulate_grad_node_holds_the_leaf():
    x = tg.ones(2, requires_grad=True)
    w = tg.ones(2, requires_grad=True)
    y = x * w
    (ax, i), (aw, j) = y.grad_fn.next_functions
    assert (i, j) == (0, 0)
    assert ax.variable is x and aw.variable is w
    assert ax.name() == "tapegrad::autograd::AccumulateGrad"
    assert re.fullmatch(r"<AccumulateGrad object at 0x[0-9a-f]+>", repr(ax))
    assert ax.next_functions == ()


def test_walking_twice_gives_equal_hashable_nodes():
    x = tg.ones(2, requires_grad=True)
    y = ((x * 2).exp() + x).sum()
    first = _all_nodes(y.grad_fn)
    second = _all_nodes(y.grad_fn)
    assert first == second
    assert len({*first}) == len(first)              # hashable, and distinct nodes differ
    assert {*first} == {*second}
    assert y.grad_fn == y.grad_fn and hash(y.grad_fn) == hash(y.grad_fn)
    assert y.grad_fn is y.grad_fn
    leaf_nodes = [n for n in first if hasattr(n, "variable")]
    assert len(leaf_nodes) == 1 and leaf_nodes[0].variable is x


def _all_nodes(root):
    seen, order, stack = set(), [], [root]
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        order.append(n)
        stack.extend(f for f, _ in n.next_functions)
    return order


def _structure(node, leaves):
    """The graph under ``node`` as nested tuples: (name, children); leaves by position."""
    if node is None:
        return None
    name = node.name().replace("torch::", "tapegrad::")
    if hasattr(node, "variable"):
        return (name, [i for i, t in enumerate(leaves) if t is node.variable])
    reprname = re.fullmatch(r"<(\w+) object at 0x[0-9a-f]+>", repr(node)).group(1)
    return (name, reprname, tuple((_structure(f, leaves), k) for f, k in node.next_functions))


# Programs over three leaves a (2, 3), b (3,), c (3, 2) and a constant k (2, 3).
GRAPH_PROGRAMS = {
    "add_scalar": lambda L, a, b, c, k: a + 2,
    "radd_scalar": lambda L, a, b, c, k: 2 + a,
    "sub_scalar": lambda L, a, b, c, k: a - 1,
    "rsub_scalar": lambda L, a, b, c, k: 1 - a,
    "mul_scalar": lambda L, a, b, c, k: a * 3,
    "div_scalar": lambda L, a, b, c, k: a / 3,
    "rdiv_scalar": lambda L, a, b, c, k: 3 / a,
    "mul_const": lambda L, a, b, c, k: a * k,
    "broadcast_add": lambda L, a, b, c, k: a + b,
    "fan_out": lambda L, a, b, c, k: a * a + a,
    "matmul_bias": lambda L, a, b, c, k: a @ c + b[:2],
    "chain": lambda L, a, b, c, k: (a.exp() * b).tanh().sum(),
    "mean_relu": lambda L, a, b, c, k: (a - b).relu().mean(),
    "pow_scalar": lambda L, a, b, c, k: a ** 2,
    "rpow": lambda L, a, b, c, k: 2 ** a,
    "pow_tensor": lambda L, a, b, c, k: a.abs() ** b,
    "neg_sigmoid": lambda L, a, b, c, k: (-a).sigmoid(),
    "sum_dim": lambda L, a, b, c, k: a.sum(1),
    "mean_dim": lambda L, a, b, c, k: a.mean(0, keepdim=True),
    "select": lambda L, a, b, c, k: a[0],
    "slice": lambda L, a, b, c, k: a[:, 1:],
    "index": lambda L, a, b, c, k: a[[0, 1, 1]],
    "transpose": lambda L, a, b, c, k: a.t() * c,
    "reshape": lambda L, a, b, c, k: a.reshape(3, 2) + c,
    "view": lambda L, a, b, c, k: a.view(6).sum(),
    "cat": lambda L, a, b, c, k: L.cat([a, k, a], 0),
    "stack": lambda L, a, b, c, k: L.stack([b, b * 2]),
    "where": lambda L, a, b, c, k: L.where(k > 0.5, a, b),
    "where_const": lambda L, a, b, c, k: L.where(k > 0.5, k, a),
    "softmax": lambda L, a, b, c, k: a.softmax(1),
    "log_softmax": lambda L, a, b, c, k: a.log_softmax(-1),
    "max_all": lambda L, a, b, c, k: a.max(),
    "clamp": lambda L, a, b, c, k: a.clamp(0.2, 0.8),
    "detach_mid": lambda L, a, b, c, k: (a * 2).detach() * b,
    "sqrt_log": lambda L, a, b, c, k: a.abs().sqrt().log(),
    "setitem": lambda L, a, b, c, k: _setitem(a * 1),
}
# x[k] = v is recorded as a CopySlices node over a CatBackward0 of [x, v] rather than PyTorch's
# CopySlices over x and v (README: differences); its name is PyTorch's.
SAME_STRUCTURE = sorted(set(GRAPH_PROGRAMS) - {"setitem"})


def _setitem(t):
    t[0] = 5.0
    return t


def _inputs(L, rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    a = L.tensor(rng.uniform(0.1, 1.0, (2, 3)), requires_grad=True)
    b = L.tensor(rng.uniform(0.1, 1.0, 3), requires_grad=True)
    c = L.tensor(rng.uniform(0.1, 1.0, (3, 2)), requires_grad=True)
    k = L.tensor(rng.uniform(0.1, 1.0, (2, 3)))
    return a, b, c, k


@pytest.mark.parametrize("name", SAME_STRUCTURE)
def test_next_functions_match_torch(torch, name):
    prog = GRAPH_PROGRAMS[name]
    got = []
    for L in (tg, torch):
        leaves = _inputs(L)
        out = prog(L, *leaves)
        got.append((_structure(out.grad_fn, leaves[:3]), out.requires_grad, out.is_leaf))
    assert got[0] == got[1]


@pytest.mark.parametrize("name", sorted(GRAPH_PROGRAMS))
def test_program_gradients_match_torch(torch, name):
    prog = GRAPH_PROGRAMS[name]
    grads = []
    for L in (tg, torch):
        leaves = _inputs(L)
        out = prog(L, *leaves)
        (out * L.tensor(np.linspace(0.5, 1.5, out.numel())).reshape(out.shape)).sum().backward()
        grads.append([npy(t.grad) for t in leaves[:3]])
    for g_tg, g_torch in zip(*grads):
        same(g_tg, g_torch)


# ---------------------------------------------------------------------------------------------
# requires_grad, is_leaf, requires_grad_
# ---------------------------------------------------------------------------------------------
def test_copy_slices_names():
    x = tg.ones(3, requires_grad=True)
    y = x * 2
    y[1] = 0.0
    assert y.grad_fn.name() == "tapegrad::autograd::CopySlices"
    assert type(y.grad_fn).__name__ == "CopySlices"
    assert re.fullmatch(r"<CopySlices object at 0x[0-9a-f]+>", repr(y.grad_fn))
    assert repr(y) == "tensor([2., 0., 2.], grad_fn=<CopySlices>)"


def test_copy_slices_names_match_torch(torch):
    x = torch.ones(3, requires_grad=True)
    y = x * 2
    y[1] = 0.0
    assert y.grad_fn.name() == "torch::autograd::CopySlices"
    assert type(y.grad_fn).__name__ == "CopySlices"
    assert re.fullmatch(r"<CopySlices object at 0x[0-9a-f]+>", repr(y.grad_fn))
    assert repr(y) == "tensor([2., 0., 2.], grad_fn=<CopySlices>)"


def test_requires_grad_propagation():
    x = tg.ones(2, requires_grad=True)
    c = tg.ones(2)
    assert x.requires_grad and not c.requires_grad
    assert (x + c).requires_grad and (c * x).requires_grad and (x * 2).requires_grad
    assert not (c + c).requires_grad and not (c * 2).requires_grad
    assert not (x > 0).requires_grad             # comparisons give bool tensors
    assert tg.cat([c, x]).requires_grad and not tg.cat([c, c]).requires_grad
    assert tg.where(c > 0, c, x).requires_grad
    assert not x.detach().requires_grad
    with tg.no_grad():
        assert not (x * 2).requires_grad


def test_is_leaf():
    x = tg.ones(2, requires_grad=True)
    c = tg.ones(2)
    assert x.is_leaf and c.is_leaf
    assert not (x * 2).is_leaf
    assert (c * 2).is_leaf                       # nothing requires grad: a leaf
    assert x.detach().is_leaf
    with tg.no_grad():
        assert (x * 2).is_leaf


def test_requires_grad_():
    c = tg.ones(2)
    assert c.requires_grad_() is c and c.requires_grad and c.is_leaf
    assert c.requires_grad_(False) is c and not c.requires_grad
    c.requires_grad = True
    assert c.requires_grad
    y = c * 2
    assert y.requires_grad_(True) is y
    with pytest.raises(RuntimeError) as e:
        y.requires_grad_(False)
    assert msg(e) == (
        "you can only change requires_grad flags of leaf variables. If you want to use a "
        "computed variable in a subgraph that doesn't require differentiation use "
        "var_no_grad = var.detach().")
    with pytest.raises(RuntimeError) as e:
        tg.tensor([1, 2]).requires_grad_()
    assert msg(e) == "only Tensors of floating point dtype can require gradients"
    with pytest.raises(RuntimeError) as e:
        tg.tensor([1, 2]).requires_grad = True
    assert msg(e) == "only Tensors of floating point and complex dtype can require gradients"
    for make in (lambda: tg.tensor([1, 2], requires_grad=True),
                 lambda: tg.zeros(2, dtype=tg.int64, requires_grad=True),
                 lambda: tg.arange(3, requires_grad=True),
                 lambda: tg.tensor([True], requires_grad=True)):
        with pytest.raises(RuntimeError) as e:
            make()
        assert msg(e) == "Only Tensors of floating point and complex dtype can require gradients"


def test_requires_grad_messages_match_torch(torch):
    for L in (tg, torch):
        with pytest.raises(RuntimeError) as e:
            L.tensor([1, 2]).requires_grad_()
        assert msg(e) == "only Tensors of floating point dtype can require gradients"
        with pytest.raises(RuntimeError) as e:
            L.tensor([1, 2]).requires_grad = True
        assert msg(e) == "only Tensors of floating point and complex dtype can require gradients"
        with pytest.raises(RuntimeError) as e:
            L.tensor([1, 2], requires_grad=True)
        assert msg(e) == "Only Tensors of floating point and complex dtype can require gradients"
        with pytest.raises(RuntimeError) as e:
            (L.ones(2, requires_grad=True) * 2).requires_grad_(False)
        assert msg(e).startswith("you can only change requires_grad flags of leaf variables.")


# ---------------------------------------------------------------------------------------------
# .grad: accumulation, assignment, retain_grad
# ---------------------------------------------------------------------------------------------
def test_grad_accumulates_across_backward_calls():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    assert x.grad is None
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    g = x.grad
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 7.0])
    assert x.grad is g                           # accumulated in place, like PyTorch
    assert not x.grad.requires_grad and x.grad.grad_fn is None


def test_grad_set_to_none_and_assigned():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    x.grad = None
    assert x.grad is None
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    g = tg.tensor([10.0, 20.0])
    x.grad = g
    assert x.grad is g
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [13.0, 23.0])
    assert x.grad is g
    with pytest.raises(RuntimeError) as e:
        x.grad = tg.ones(3)
    assert msg(e) == ("attempting to assign a gradient of size '[3]' to a tensor of size '[2]'. "
                      "Please ensure that the gradient and the tensor are the same size")
    with pytest.raises(TypeError) as e:
        x.grad = [1.0, 2.0]
    assert msg(e) == "assigned grad expected to be a Tensor or None but got grad of type list"
    assert x.grad is g


def test_grad_assignment_matches_torch(torch):
    out = []
    for L in (tg, torch):
        x = L.tensor([1.0, 2.0], requires_grad=True)
        g = L.tensor([10.0, 20.0])
        x.grad = g
        (x * x).sum().backward()
        out.append((npy(g), x.grad is g))
        with pytest.raises(RuntimeError) as e:
            x.grad = L.ones(3)
        out.append(msg(e))
    assert out[0][1] == out[2][1]
    np.testing.assert_array_equal(out[0][0], out[2][0])
    assert out[1] == out[3]


def test_retain_grad_on_non_leaves():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    z = y.exp()
    assert not y.retains_grad
    y.retain_grad()
    assert y.retains_grad and not z.retains_grad
    z.sum().backward(retain_graph=True)
    np.testing.assert_allclose(y.grad.numpy(), np.exp([3.0, 6.0]), rtol=1e-15)
    with pytest.warns(UserWarning) as rec:
        assert z.grad is None
    assert str(rec[0].message) == NON_LEAF_GRAD
    assert rec[0].filename == __file__
    # retained grads accumulate too
    z2 = (y * 2).sum()
    z2.backward()
    np.testing.assert_allclose(y.grad.numpy(), np.exp([3.0, 6.0]) + 2, rtol=1e-15)
    with pytest.raises(RuntimeError) as e:
        tg.ones(2).retain_grad()
    assert msg(e) == "can't retain_grad on Tensor that has requires_grad=False"
    x.retain_grad()                              # a no-op on leaves
    assert not x.retains_grad


def test_non_leaf_grad_warning_matches_torch(torch):
    import warnings
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        (torch.ones(2, requires_grad=True) * 2).grad
    assert str(rec[0].message).startswith(NON_LEAF_GRAD + " ")


# ---------------------------------------------------------------------------------------------
# backward(): scalar outputs, gradients, errors
# ---------------------------------------------------------------------------------------------
def test_backward_on_a_scalar_without_argument():
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])
    x.grad = None
    (x[1] * 5).backward()                        # a 0-d result
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 5.0, 0.0])
    x.grad = None
    (x[1:2] * 5).backward()                      # a one-element 1-d result
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 5.0, 0.0])


def test_non_scalar_backward_needs_a_gradient():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError) as e:
        y.backward()
    assert msg(e) == "grad can be implicitly created only for scalar outputs"
    y.backward(tg.tensor([1.0, 10.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 20.0])


def test_gradient_of_the_wrong_shape():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError) as e:
        y.backward(tg.ones(3))
    assert msg(e) == ("Mismatch in shape: grad_output[0] has a shape of tapegrad.Size([3]) "
                      "and output[0] has a shape of tapegrad.Size([2]).")
    # past the first output, PyTorch looks the position up with list.index, whose == between
    # tensors may itself fail; that error is what the user sees
    a, b = x * 2, x * 3
    g0, g1 = tg.ones(2), tg.ones(2, 1)
    with pytest.raises(RuntimeError) as e:
        tg.autograd.backward([a, b], [g0, g1])
    assert msg(e) == "Boolean value of Tensor with more than one value is ambiguous"
    with pytest.raises(RuntimeError) as e:
        tg.autograd.backward([a, b], [g0, tg.ones(3)])
    assert msg(e) == ("The size of tensor a (2) must match the size of tensor b (3) at "
                      "non-singleton dimension 0")
    with pytest.raises(RuntimeError) as e:
        tg.autograd.backward([a.sum(), b], [None, tg.ones(3)])
    assert msg(e) == "Boolean value of Tensor with more than one value is ambiguous"
    with pytest.raises(RuntimeError) as e:
        tg.autograd.backward([a.sum(), b.sum()], [None, tg.ones(3)])
    assert msg(e) == ("Mismatch in shape: grad_output[1] has a shape of tapegrad.Size([3]) "
                      "and output[1] has a shape of tapegrad.Size([]).")
    tg.autograd.backward([a, b], [g0, tg.ones(2)])                 # still usable
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0])


def test_backward_error_messages_match_torch(torch):
    def programs(L):
        x = L.tensor([1.0, 2.0], requires_grad=True)

        def implicit():
            (x * 2).backward()

        def shape():
            (x * 2).backward(L.ones(3))

        def shape_second():
            L.autograd.backward([x * 2, x * 3], [L.ones(2), L.ones(2, 1)])

        def shape_second_broadcast_error():
            L.autograd.backward([x * 2, x * 3], [L.ones(2), L.ones(3)])

        def shape_second_after_none():
            L.autograd.backward([(x * 2).sum(), x * 3], [None, L.ones(3)])

        def shape_second_scalars():
            L.autograd.backward([(x * 2).sum(), (x * 3).sum()], [None, L.ones(3)])

        def grad_shape_second():
            L.autograd.grad([x * 2, (x * 3).sum()], [x], [L.ones(2), L.ones(3)])

        def no_grad_output():
            L.ones(2).sum().backward()

        def unused():
            L.autograd.grad((x * 2).sum(), [x, L.ones(2, requires_grad=True)])

        def not_requiring():
            L.autograd.grad((x * 2).sum(), [L.ones(2)])

        def twice():
            y = (x * x).sum()
            y.backward()
            y.backward()

        def twice_grad():
            y = (x.exp()).sum()
            L.autograd.grad(y, [x])
            L.autograd.grad(y, [x])
        return [implicit, shape, shape_second, shape_second_broadcast_error,
                shape_second_after_none, shape_second_scalars, grad_shape_second,
                no_grad_output, unused, not_requiring, twice, twice_grad]
    for f_tg, f_torch in zip(programs(tg), programs(torch)):
        texts = []
        for f in (f_tg, f_torch):
            with pytest.raises(RuntimeError) as e:
                f()
            texts.append(msg(e).replace("torch.", "tapegrad."))
        assert texts[0] == texts[1], f_tg.__name__


def test_second_backward_without_retain_graph():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError) as e:
        y.backward()
    assert msg(e) == SAVED_FREED
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])   # the failed call added nothing
    # nothing saved: a second backward is fine (and accumulates), as in PyTorch
    x.grad = None
    z = (x + 1).sum()
    z.backward()
    z.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


SECOND_BACKWARD_PROGRAMS = {
    "mul": lambda x: (x * x).sum(),
    "mul_scalar": lambda x: (x * 2).sum(),
    "add_scalar": lambda x: (x + 1).sum(),
    "add": lambda x: (x + x).sum(),
    "sub_neg": lambda x: (-x - 1).sum(),
    "exp": lambda x: x.exp().sum(),
    "sum_mean": lambda x: x.sum() + x.mean(),
    "select": lambda x: x[0] + x[1],
    "reshape": lambda x: x.reshape(2, 1).sum(),
    "div_scalar": lambda x: (x / 2).sum(),
    "tanh": lambda x: x.tanh().sum(),
    "cat": lambda x: tg_or_torch(x).cat([x, x]).sum(),
}


def tg_or_torch(x):
    return tg if isinstance(x, tg.Tensor) else sys.modules["torch"]


@pytest.mark.parametrize("name", sorted(SECOND_BACKWARD_PROGRAMS))
def test_second_backward_fails_exactly_where_torch_fails(torch, name):
    prog = SECOND_BACKWARD_PROGRAMS[name]
    outcome = []
    for L in (tg, torch):
        x = L.tensor([1.0, 2.0], requires_grad=True)
        y = prog(x)
        y.backward()
        try:
            y.backward()
            outcome.append(("ok", npy(x.grad).tolist()))
        except RuntimeError as e:
            outcome.append(("error", str(e)))
    assert outcome[0] == outcome[1]


def test_retain_graph_repeated_backward_accumulates():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    for k in range(1, 4):
        y.backward(retain_graph=True)
        np.testing.assert_array_equal(x.grad.numpy(), [2.0 * k, 4.0 * k])
    y.backward()                                 # the last one may free
    np.testing.assert_array_equal(x.grad.numpy(), [8.0, 16.0])
    with pytest.raises(RuntimeError) as e:
        y.backward()
    assert msg(e) == SAVED_FREED


def test_backward_inputs_limits_accumulation():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    w = tg.tensor([3.0, 4.0], requires_grad=True)
    z = (x * w).sum()
    z.backward(inputs=[x], retain_graph=True)
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])
    assert w.grad is None
    z.backward(inputs=[w])
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 2.0])
    with pytest.raises(RuntimeError) as e:
        (x * 2).sum().backward(inputs=[])
    assert msg(e) == "'inputs' argument to backward() cannot be empty."


def test_backward_inputs_matches_torch(torch):
    out = []
    for L in (tg, torch):
        x = L.tensor([1.0, 2.0], requires_grad=True)
        w = L.tensor([3.0, 4.0], requires_grad=True)
        y = x * w
        z = (y * y).sum()
        z.backward(inputs=[y, w])                # a non-leaf input gets a .grad too
        out.append((npy(x.grad), npy(w.grad), npy(y.grad), y.retains_grad))
    for a, b in zip(*out):
        same(a, b) if not isinstance(a, bool) else None
    assert out[0][3] == out[1][3]


def test_autograd_backward_of_several_tensors():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    a = (x * x).sum()
    b = x * 3
    tg.autograd.backward([a, b], [None, tg.tensor([1.0, -1.0])])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0 + 3.0, 4.0 - 3.0])
    x.grad = None
    tg.autograd.backward((x * x).sum() * 2)
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 8.0])


# ---------------------------------------------------------------------------------------------
# autograd.grad
# ---------------------------------------------------------------------------------------------
def test_autograd_grad_leaves_grad_untouched():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    w = tg.tensor([3.0, 4.0], requires_grad=True)
    y = (x * w).sum()
    gx, gw = tg.autograd.grad(y, [x, w], retain_graph=True)
    np.testing.assert_array_equal(gx.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(gw.numpy(), [1.0, 2.0])
    assert x.grad is None and w.grad is None
    assert not gx.requires_grad and gx.is_leaf
    (gx2,) = tg.autograd.grad(y, x)
    np.testing.assert_array_equal(gx2.numpy(), [3.0, 4.0])
    assert x.grad is None
    with pytest.raises(RuntimeError) as e:
        tg.autograd.grad(y, x)
    assert msg(e) == SAVED_FREED


def test_autograd_grad_outputs_and_non_leaf_inputs():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    z = y * 3
    (gy,) = tg.autograd.grad(z, y, grad_outputs=tg.tensor([1.0, 2.0]), retain_graph=True)
    np.testing.assert_array_equal(gy.numpy(), [3.0, 6.0])
    gx, gy = tg.autograd.grad([z], [x, y], grad_outputs=[tg.tensor([1.0, 1.0])])
    np.testing.assert_array_equal(gx.numpy(), [6.0, 12.0])
    np.testing.assert_array_equal(gy.numpy(), [3.0, 3.0])
    assert x.grad is None


def test_autograd_grad_unused_inputs():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    u = tg.tensor([5.0], requires_grad=True)
    y = (x * 2).sum()
    with pytest.raises(RuntimeError) as e:
        tg.autograd.grad(y, [x, u], retain_graph=True)
    assert msg(e) == ("The differentiated Tensor at index 1 appears to not have been used in "
                      "the graph. Set allow_unused=True if this is the desired behavior.")
    gx, gu = tg.autograd.grad(y, [x, u], allow_unused=True, retain_graph=True)
    np.testing.assert_array_equal(gx.numpy(), [2.0, 2.0])
    assert gu is None
    gx, gu = tg.autograd.grad(y, [x, u], materialize_grads=True)
    np.testing.assert_array_equal(gu.numpy(), [0.0])
    assert x.grad is None and u.grad is None


def test_autograd_grad_matches_torch(torch):
    res = []
    for L in (tg, torch):
        x = L.tensor([1.0, 2.0, 3.0], requires_grad=True)
        w = L.tensor([[0.5, -1.0, 2.0]], requires_grad=True)
        u = L.ones(1, requires_grad=True)
        y = (x * w).tanh()
        g = L.tensor([[1.0, 2.0, 3.0]])
        r = L.autograd.grad(y, [w, u, x], grad_outputs=g, allow_unused=True)
        res.append([npy(t) for t in r] + [x.grad, w.grad])
    for a, b in zip(*res):
        same(a, b)


# ---------------------------------------------------------------------------------------------
# detach and grad mode
# ---------------------------------------------------------------------------------------------
def test_detach_shares_the_value_and_stops_the_gradient():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    d = y.detach()
    assert d.is_leaf and not d.requires_grad and d.grad_fn is None
    np.testing.assert_array_equal(d.numpy(), [3.0, 6.0])
    z = (d * x).sum()
    z.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 6.0])  # d counts as a constant


def test_detach_in_place():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    assert y.detach_() is y
    assert y.is_leaf and not y.requires_grad and y.grad_fn is None
    z = (y * x).sum()
    z.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 6.0])


def test_no_grad_records_nothing():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    assert tg.is_grad_enabled()
    with tg.no_grad():
        assert not tg.is_grad_enabled()
        y = (x * 2).exp() + x
        s = tg.cat([x, y]).sum()
    assert tg.is_grad_enabled()
    for t in (y, s):
        assert t.grad_fn is None and not t.requires_grad and t.is_leaf
    np.testing.assert_allclose(y.numpy(), np.exp([2.0, 4.0]) + [1.0, 2.0], rtol=1e-15)


def test_grad_mode_context_managers_nest_and_restore():
    with tg.no_grad():
        with tg.enable_grad():
            assert tg.is_grad_enabled()
            x = tg.ones(2, requires_grad=True)
            assert (x * 2).requires_grad
        assert not tg.is_grad_enabled()
        with tg.set_grad_enabled(True):
            assert tg.is_grad_enabled()
        with tg.set_grad_enabled(False):
            assert not tg.is_grad_enabled()
        assert not tg.is_grad_enabled()
    assert tg.is_grad_enabled()
    with pytest.raises(ValueError):
        with tg.no_grad():
            raise ValueError("inside")
    assert tg.is_grad_enabled()


def test_set_grad_enabled_as_a_call():
    try:
        tg.set_grad_enabled(False)
        assert not tg.is_grad_enabled()
        assert not (tg.ones(2, requires_grad=True) * 2).requires_grad
        tg.set_grad_enabled(True)
        assert tg.is_grad_enabled()
    finally:
        tg.set_grad_enabled(True)


def test_grad_mode_decorators():
    @tg.no_grad()
    def off(x):
        return tg.is_grad_enabled(), x * 2

    @tg.no_grad
    def off_bare(x):
        return tg.is_grad_enabled(), x * 2

    @tg.enable_grad()
    def on(x):
        return tg.is_grad_enabled(), x * 2

    @tg.enable_grad
    def on_bare(x):
        return tg.is_grad_enabled(), x * 2

    @tg.set_grad_enabled(False)
    def switched_off(x):
        return tg.is_grad_enabled(), x * 2

    assert tg.is_grad_enabled()                  # decorating does not switch the mode
    x = tg.ones(2, requires_grad=True)
    for f in (off, off_bare, switched_off):
        mode, y = f(x)
        assert mode is False and not y.requires_grad
        assert tg.is_grad_enabled()
    with tg.no_grad():
        for f in (on, on_bare):
            mode, y = f(x)
            assert mode is True and y.requires_grad
            assert not tg.is_grad_enabled()
    assert off.__name__ == "off" and off_bare.__name__ == "off_bare"


def test_grad_mode_decorators_match_torch(torch):
    for L in (tg, torch):
        @L.no_grad
        def f():
            return L.is_grad_enabled()

        @L.enable_grad
        def g():
            return L.is_grad_enabled()
        assert f() is False
        with L.no_grad():
            assert g() is True
        assert L.is_grad_enabled()


# ---------------------------------------------------------------------------------------------
# Threads: grad mode and the tape are per thread
# ---------------------------------------------------------------------------------------------
def _train(seed, steps, barrier=None, shift=0):
    """Train a tiny model; with ``barrier``, meet the other thread mid-forward, after backward
    and inside the no_grad update (``shift`` offsets the meetings by one, so that one thread is
    recording while the other is in no_grad)."""
    def meet():
        if barrier is not None:
            barrier.wait()
    rng = np.random.default_rng(seed)
    X = tg.tensor(rng.standard_normal((8, 3)))
    Y = tg.tensor(rng.standard_normal((8, 1)))
    W = tg.tensor(rng.standard_normal((3, 1)), requires_grad=True)
    b = tg.zeros(1, requires_grad=True)
    losses = []
    if shift:
        with tg.no_grad():
            meet()
    for _ in range(steps):
        h = X @ W
        meet()
        assert tg.is_grad_enabled() and h.requires_grad
        loss = ((h + b).tanh() - Y).pow(2).mean()
        loss.backward()
        losses.append(loss.item())
        meet()
        with tg.no_grad():
            meet()
            assert not tg.is_grad_enabled()
            for p in (W, b):
                p -= 0.1 * p.grad
                p.grad = None
            assert not (W * 2).requires_grad
    if not shift:
        meet()
    return losses, W.detach().numpy().copy(), b.detach().numpy().copy()


def test_two_threads_train_independently():
    steps = 60
    expected = [_train(seed, steps) for seed in (1, 2)]
    barrier = threading.Barrier(2, timeout=60)
    results, errors = [None, None], []

    def run(k):
        try:
            results[k] = _train(k + 1, steps, barrier, shift=k)
        except BaseException as exc:  # reported below
            errors.append(exc)
            barrier.abort()
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors
    for got, want in zip(results, expected):
        assert got[0] == want[0]
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[2], want[2])
    assert tg.is_grad_enabled()


def test_threads_retaining_grads_at_the_same_time():
    errors = []

    def run(k):
        try:
            x = tg.tensor([1.0, 2.0 + k], requires_grad=True)
            for _ in range(1500):
                y = x * 2
                y.retain_grad()
                (y * y).sum().backward()
                assert y.grad.tolist() == [4.0, 4.0 * (2.0 + k)]
        except BaseException as exc:  # reported below
            errors.append(exc)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors


def test_grad_mode_is_per_thread():
    seen = []
    with tg.no_grad():
        t = threading.Thread(target=lambda: seen.append(tg.is_grad_enabled()))
        t.start()
        t.join()
        assert not tg.is_grad_enabled()
    assert seen == [True]


# ---------------------------------------------------------------------------------------------
# Hooks
# ---------------------------------------------------------------------------------------------
def _hook_program(L, replace_leaf, replace_mid, remove):
    calls = []
    x = L.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    z = y.sin()

    def on_leaf(g):
        calls.append(("x", npy(g).tolist()))
        return g * 10 if replace_leaf else None

    def on_mid(g):
        calls.append(("y", npy(g).tolist()))
        return g + 1 if replace_mid else None
    hx = x.register_hook(on_leaf)
    hy = y.register_hook(on_mid)
    if remove:
        hy.remove()
    z.sum().backward()
    first = npy(x.grad)
    hx.remove()
    x.grad = None
    (x * 2).sum().backward()
    return calls, first, npy(x.grad)


@pytest.mark.parametrize("replace_leaf", [False, True])
@pytest.mark.parametrize("replace_mid", [False, True])
@pytest.mark.parametrize("remove", [False, True])
def test_hooks_match_torch(torch, replace_leaf, replace_mid, remove):
    a = _hook_program(tg, replace_leaf, replace_mid, remove)
    b = _hook_program(torch, replace_leaf, replace_mid, remove)
    assert [c[0] for c in a[0]] == [c[0] for c in b[0]]
    for (_, ga), (_, gb) in zip(a[0], b[0]):
        np.testing.assert_allclose(ga, gb, rtol=1e-14)
    same(a[1], b[1], rtol=1e-14)
    same(a[2], b[2])


def test_hooks_literal():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    seen = []
    hy = y.register_hook(lambda g: seen.append(("y", g.tolist())) or g * 2)
    x.register_hook(lambda g: seen.append(("x", g.tolist())))
    (y * y).sum().backward(retain_graph=True)
    assert seen == [("y", [6.0, 12.0]), ("x", [36.0, 72.0])]
    np.testing.assert_array_equal(x.grad.numpy(), [36.0, 72.0])
    hy.remove()
    hy.remove()                                  # removing twice is harmless
    seen.clear()
    x.grad = None
    (y * y).sum().backward()
    assert seen == [("x", [18.0, 36.0])]
    with pytest.raises(RuntimeError) as e:
        tg.ones(2).register_hook(lambda g: g)
    assert msg(e) == "cannot register a hook on a tensor that doesn't require gradient"


def _hook_using_a_parameter(L):
    x = L.tensor([1.0, 2.0], requires_grad=True)
    w = L.tensor([3.0, 4.0], requires_grad=True)
    y = x * 2
    seen = []

    def hook(g):
        r = g * w                                # an op on a tensor that requires grad
        seen.append((L.is_grad_enabled(), r.requires_grad))
        return r
    y.register_hook(hook)
    x.register_hook(hook)
    (y * y).sum().backward()
    return seen, npy(x.grad), w.grad


def test_hooks_run_without_recording():
    seen, gx, gw = _hook_using_a_parameter(tg)
    assert seen == [(False, False), (False, False)]
    np.testing.assert_array_equal(gx, [72.0, 256.0])
    assert gw is None
    assert tg.is_grad_enabled()


def test_hooks_run_without_recording_match_torch(torch):
    a, b = _hook_using_a_parameter(tg), _hook_using_a_parameter(torch)
    assert a[0] == b[0]
    same(a[1], b[1])
    assert a[2] is None and b[2] is None


def _backward_inside_a_hook(L, where, retain):
    """A hook (on a non-leaf, on a leaf, or an autograd.Function's backward) that starts a
    backward of its own, or records under enable_grad, in the middle of another backward."""
    x = L.tensor([1.0, 2.0], requires_grad=True)
    w = L.tensor([3.0, 4.0], requires_grad=True)
    z = (w * w * x.detach()).sum()          # recorded before the outer backward
    kept = []

    def hook(g):
        if where == "record":
            with L.enable_grad():
                kept.append((g * w).sum())  # recorded while the outer sweep runs
        else:
            z.backward(retain_graph=retain)
        return g * 3.0

    class Twice(L.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2.0

        @staticmethod
        def backward(ctx, g):
            hook(g)
            return g * 2.0

    y = Twice.apply(x * 1.0) if where == "function" else x * 2.0
    if where != "function":
        (x if where == "leaf" else y).register_hook(hook)
    (y * y).sum().backward()
    if kept:
        kept[0].backward()                  # the graph the hook recorded works afterwards
    return [x.grad, w.grad]


@pytest.mark.parametrize("where", ["nonleaf", "leaf", "function", "record"])
@pytest.mark.parametrize("retain", [False, True])
def test_a_backward_started_inside_a_hook_matches_torch(torch, where, retain):
    # the inner backward sweeps into an arena of its own: it shared the outer one's, and
    # x.grad came out [14, 24] where PyTorch gives [8, 16]; what a hook records under
    # enable_grad goes on a new tape (it raised IndexError)
    a, b = _backward_inside_a_hook(tg, where, retain), _backward_inside_a_hook(torch, where,
                                                                               retain)
    for u, v in zip(a, b):
        same(u, v)


def test_hook_sees_the_summed_gradient_of_a_fan_out():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    seen = []
    y.register_hook(lambda g: seen.append(g.tolist()))
    (y * 2 + y * 3 + y.exp()).sum().backward()
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], 5.0 + np.exp([1.0, 2.0]), rtol=1e-15)


def test_retain_grad_sees_the_hooked_gradient(torch):
    res = []
    for L in (tg, torch):
        x = L.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        y.retain_grad()
        y.register_hook(lambda g: g * 2)
        (y * y).sum().backward()
        res.append((npy(y.grad), npy(x.grad)))
    same(res[0][0], res[1][0])
    same(res[0][1], res[1][1])


# ---------------------------------------------------------------------------------------------
# detach / no_grad in the middle == the same program with those parts replaced by constants
# ---------------------------------------------------------------------------------------------
STEPS = [
    lambda v, x, w: v * x,
    lambda v, x, w: v + w,
    lambda v, x, w: v.sin(),
    lambda v, x, w: (v * w).tanh(),
    lambda v, x, w: v.exp() * 0.5,
    lambda v, x, w: v - x.sum(),
    lambda v, x, w: (v * v + 1).sqrt(),
    lambda v, x, w: v[[2, 0, 1]] * w,
    lambda v, x, w: tg.stack([v, x]).mean(0),
    lambda v, x, w: v.sigmoid() / (w.abs() + 1),
]


def _const(t):
    return tg.tensor(t.detach().numpy().copy())


def _run_program(x, w, ops, cut, kind, length, reference):
    v = x * 1.0
    for i, op in enumerate(ops):
        inside = cut <= i < cut + length
        if inside and kind == "no_grad":
            if reference:
                v = op(_const(v), _const(x), _const(w))
            else:
                with tg.no_grad():
                    v = op(v, x, w)
            continue
        v = op(v, x, w)
        if i == cut and kind in ("detach", "detach_"):
            if reference:
                v = _const(v)
            elif kind == "detach":
                v = v.detach()
            else:
                v.detach_()
    return (v * w).sum() + (x * w).sum()


@settings(max_examples=40)
@given(ops=st.lists(st.integers(0, len(STEPS) - 1), min_size=1, max_size=8),
       cut=st.integers(0, 7), kind=st.sampled_from(["detach", "detach_", "no_grad"]),
       length=st.integers(1, 3),
       xs=st.lists(st.floats(-2, 2), min_size=6, max_size=6))
def test_detach_and_no_grad_equal_constants(ops, cut, kind, length, xs):
    grads = []
    for reference in (False, True):
        x = tg.tensor(xs[:3], requires_grad=True)
        w = tg.tensor(xs[3:], requires_grad=True)
        loss = _run_program(x, w, [STEPS[k] for k in ops], cut, kind, length, reference)
        loss.backward()
        grads.append((loss.item(), x.grad.numpy().copy(), w.grad.numpy().copy()))
    assert grads[0][0] == grads[1][0]
    np.testing.assert_array_equal(grads[0][1], grads[1][1])
    np.testing.assert_array_equal(grads[0][2], grads[1][2])
