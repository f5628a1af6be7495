"""Every op and call form against PyTorch: values, gradients, grad_fn names, edge values,
second backward passes and errors.

Each case of ``op_cases.CASES`` runs on random inputs in both libraries: values and
gradients must agree to 1e-10 (relative), ``grad_fn.name()`` exactly.  At edge values where
PyTorch defines a gradient (kinks, ties, zeros, bounds, inf and nan), values and gradients
must be equal, inf and nan included.  Bad calls must raise PyTorch's exception type with
PyTorch's message (``torch.`` spelled ``tapegrad.``).
"""
import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import op_cases as C
import strategies as S  # noqa: F401 - makes the source tree importable
from bad_calls import BAD_CALLS
import tapegrad as tg
import tapegrad.functional as TF

torch = pytest.importorskip("torch")

TG = C.Lib(tg, TF)
PT = C.Lib(torch, torch.nn.functional)

RTOL = 1e-10
ATOL = 1e-12
nan, inf = math.nan, math.inf


def run_both(case, drawn):
    """The case in both libraries: (tapegrad leaves, result), (torch leaves, result)."""
    out = []
    for lib in (TG, PT):
        leaves = [lib.leaf(a, f) for a, f in zip(drawn.arrays, drawn.rg)]
        out.append((leaves, case.run(lib, leaves, drawn)))
    return out


def recording_warnings(fn):
    """fn()'s result and the warnings it gave, as (category, message) pairs."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    # PyTorch's C++ warnings end in where they were raised
    return result, [(w.category, re.sub(r" \(Triggered internally at .*\)$", "",
                                        str(w.message)).replace("torch.", "tapegrad."))
                    for w in caught]


def value(t):
    if isinstance(t, tg.Tensor):
        return np.asarray(t._value)
    return t.detach().numpy()


def assert_close(got, want, what, exact=False):
    """Equal to 1e-10, nan where nan; with ``exact``, zeros, infinities and nan must also
    sit in the same places (finite non-zero entries still only to 1e-10: two correct
    roundings of one formula may differ in the last bit)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if exact:
        special = ~np.isfinite(want) | (want == 0) | ~np.isfinite(got) | (got == 0)
        assert np.array_equal(got[special], want[special], equal_nan=True), \
            f"{what}: {got!r} != {want!r}"
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=0.0 if exact else ATOL,
                               equal_nan=True, err_msg=what)


def grad_fn_name(t):
    # (PyTorch's hand-written nodes name their namespace: torch::autograd::CopySlices)
    return None if t.grad_fn is None else t.grad_fn.name().replace("torch::", "tapegrad::")


def backward_both(tg_out, pt_out, cotangent):
    tg_out.backward(tg.tensor(cotangent))
    pt_out.backward(torch.tensor(cotangent))


def assert_grads_equal(tg_leaves, pt_leaves, exact=False):
    for j, (a, b) in enumerate(zip(tg_leaves, pt_leaves)):
        if b.grad is None:
            assert a.grad is None, f"leaf {j}: tapegrad has a gradient, PyTorch has None"
        else:
            assert a.grad is not None, f"leaf {j}: tapegrad has no gradient"
            assert_close(value(a.grad), b.grad.numpy(), f"gradient of leaf {j}", exact)


# ---------------------------------------------------------------------------------------------
# Random inputs, every case
# ---------------------------------------------------------------------------------------------
# Cases where tapegrad records another node than PyTorch, pinned so that a change shows:
# (tapegrad's node, PyTorch's node).  The README lists them.
NODE_DIVERGENCES = {}


def assert_same_node(case, to, po):
    names = (grad_fn_name(to), grad_fn_name(po))
    if case.id in NODE_DIVERGENCES:
        assert names == NODE_DIVERGENCES[case.id]
    else:
        assert names[0] == names[1]


@pytest.mark.parametrize("case", C.CASES, ids=lambda c: c.id)
@given(data=st.data())
def test_values_gradients_and_names_match_pytorch(case, data):
    drawn = data.draw(case.strategy(), label="inputs")
    (tl, to), (pl, po) = run_both(case, drawn)
    assert_close(value(to), value(po), "value")
    assert to.dtype.is_floating_point and po.dtype.is_floating_point
    assert to.requires_grad == po.requires_grad
    if not case.deep:
        assert_same_node(case, to, po)
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), label="seed"))
    backward_both(to, po, rng.standard_normal(tuple(po.shape)))
    assert_grads_equal(tl, pl)


# (nodes of a differentiable backward are not compared: see the values test)
@pytest.mark.parametrize("case", [c for c in C.CASES if not c.deep], ids=lambda c: c.id)
@settings(max_examples=1, phases=[Phase.generate])
@given(data=st.data())
def test_grad_fn_class_names_match_pytorch(case, data):
    """``type(t.grad_fn).__name__``, what code that inspects graphs looks at, is PyTorch's
    node class for every case (one example of each, drawn on its own: drawing every case in
    one example added up their filters until Hypothesis gave up)."""
    drawn = data.draw(case.strategy(), label=case.id)
    (_, to), (_, po) = run_both(case, drawn)
    expected = NODE_DIVERGENCES.get(case.id)
    got = (type(to.grad_fn).__name__, type(po.grad_fn).__name__)
    if expected is not None:
        assert got == expected, f"{case.id}: {got} is not the known {expected}"
    else:
        assert got[0] == got[1], f"{case.id}: {got[0]} != {got[1]}"


@pytest.mark.parametrize("case", C.CASES, ids=lambda c: c.id)
@settings(max_examples=10)
@given(data=st.data())
def test_second_backward_matches_pytorch(case, data):
    """A second backward without retain_graph fails exactly where PyTorch's saved tensors
    were freed; where it succeeds, gradients accumulate the same."""
    drawn = data.draw(case.strategy(), label="inputs")
    (tl, to), (pl, po) = run_both(case, drawn)
    cot = np.random.default_rng(1).standard_normal(tuple(po.shape))
    backward_both(to, po, cot)
    errors = []
    for out, c, lib in ((to, tg.tensor(cot), "tapegrad"), (po, torch.tensor(cot), "torch")):
        try:
            out.backward(c)
        except RuntimeError as e:
            errors.append(str(e).replace("torch.", "tapegrad."))
        else:
            errors.append(None)
    assert errors[0] == errors[1]
    assert_grads_equal(tl, pl)


# One call per node kind, for the second-backward rule: whether PyTorch's node saves
# tensors depends on the call form (an advanced index saves its indices, a slice does not)
SECOND_PASS = {
    "select": lambda m, x: x[0],
    "slice": lambda m, x: x[1:],
    "int list index": lambda m, x: x[[0, 0]],
    "mask index": lambda m, x: x[x.detach() > 0],
    "expand": lambda m, x: x.expand(2, 3, 3),
    "permute": lambda m, x: x.permute(1, 0),
    "reshape": lambda m, x: x.reshape(-1),
    "squeeze": lambda m, x: x.unsqueeze(0).squeeze(0),
    "clone": lambda m, x: x.clone(),
    "add": lambda m, x: x + x,
    "add scalar": lambda m, x: x + 1.0,
    "mul": lambda m, x: x * x,
    "mul scalar": lambda m, x: x * 2.0,
    "div scalar": lambda m, x: x / 2.0,
    "rsub": lambda m, x: 1.0 - x,
    "pow scalar": lambda m, x: x ** 2,
    "exp": lambda m, x: x.exp(),
    "relu": lambda m, x: x.relu(),
    "clamp": lambda m, x: x.clamp(-0.5, 0.5),
    "where": lambda m, x: m.where(x.detach() > 0, x, 0.0),
    "sum": lambda m, x: x.sum(),
    "sum dim": lambda m, x: x.sum(0),
    "mean": lambda m, x: x.mean(),
    "max": lambda m, x: x.max(),
    "max dim": lambda m, x: x.max(0)[0],
    "amax": lambda m, x: x.amax(0),
    "var": lambda m, x: x.var(),
    "softmax": lambda m, x: x.softmax(0),
    "norm": lambda m, x: x.norm(),
    "matmul": lambda m, x: x @ x,
    "cat": lambda m, x: m.cat([x, x]),
    "stack": lambda m, x: m.stack([x, x]),
}


def _set_rows(m, x):
    y = x + 0.0
    y[[0, 0]] = x[1:] + 1.0
    return y


def _set_slice(m, x):
    y = x + 0.0
    y[1:] = x[:2]
    return y


def _set_element(m, x):
    y = x + 0.0
    y[0, 1] = x[2, 2]
    return y


def _add_into_a_row(m, x):
    y = x + 0.0
    y[1].add_(x[0])
    return y


def _index_put_(m, x):
    y = x + 0.0
    y.index_put_((m.tensor([2, 2]),), x[0])
    return y


# Writes of sources into a tensor (the sources made by ops that save nothing): PyTorch's
# nodes of index_put, scatter, index_copy, put, masked_scatter (and of their accumulating
# kin) save their indices or mask, CopySlices drops the function it wraps, and
# slice_scatter, select_scatter and diagonal_scatter save no tensor
_ROWS = [1, 1]
SECOND_PASS.update({
    "index_put": lambda m, x: x.index_put((m.tensor(_ROWS),), x[0] + 1.0),
    "index_put of the input only": lambda m, x: x.index_put((m.tensor(_ROWS),),
                                                            x.detach()[0]),
    "index_put of the values only": lambda m, x: x.detach().index_put((m.tensor(_ROWS),),
                                                                      x[0] + 1.0),
    "index_put accumulate": lambda m, x: x.index_put((m.tensor(_ROWS),), x[0] + 1.0,
                                                     accumulate=True),
    "index_put_": _index_put_,
    "setitem int list": _set_rows,
    "setitem slice": _set_slice,
    "setitem element": _set_element,
    "add_ into a row": _add_into_a_row,
    "scatter": lambda m, x: x.scatter(0, m.tensor([[1, 1, 0]]), x[:1] + 1.0),
    "scatter of the source only": lambda m, x: x.detach().scatter(
        1, m.tensor([[2], [2], [0]]), x[:, :1] + 1.0),
    "scatter_add": lambda m, x: x.scatter_add(0, m.tensor([[1, 1, 0]]), x[:1] + 1.0),
    "index_copy": lambda m, x: x.index_copy(0, m.tensor([2, 0]), x[:2] + 1.0),
    "index_add": lambda m, x: x.index_add(0, m.tensor([2, 2]), x[:2] + 1.0),
    "put": lambda m, x: x.put(m.tensor([1, 7, 1]), x[0] + 1.0),
    "put accumulate": lambda m, x: x.put(m.tensor([1, 7, 1]), x[0] + 1.0, accumulate=True),
    "masked_scatter": lambda m, x: x.masked_scatter(x.detach() > 0, x.reshape(-1) + 1.0),
    "slice_scatter": lambda m, x: x.slice_scatter(x[:1] + 1.0, 0, 1, 2),
    "select_scatter": lambda m, x: x.select_scatter(x[0] + 1.0, 1, 2),
    "diagonal_scatter": lambda m, x: x.diagonal_scatter(x[0] + 1.0, 0),
})


@pytest.mark.parametrize("name", sorted(SECOND_PASS))
def test_second_backward_per_node_kind(name):
    v = np.random.default_rng(3).standard_normal((3, 3))
    tx = tg.tensor(v, requires_grad=True)
    px = torch.tensor(v, requires_grad=True)
    to, po = SECOND_PASS[name](TG, tx), SECOND_PASS[name](PT, px)
    cot = np.ones(tuple(po.shape))
    errors = []
    for out, lib in ((to, tg), (po, torch)):
        out.backward(lib.tensor(cot))
        try:
            out.backward(lib.tensor(cot))
        except RuntimeError as e:
            errors.append(str(e).replace("torch.", "tapegrad."))
        else:
            errors.append(None)
    assert errors[0] == errors[1]
    assert_grads_equal([tx], [px])


# Reshapes of results that PyTorch holds as strided views: its node depends on the strides
# (a view, an alias with new strides, or a copy)
LAYOUTS = {
    "reshape of a transpose": lambda m, x: x.t().reshape(-1),
    "flatten of a transpose": lambda m, x: x.t().flatten(),
    "reshape_as of a transpose": lambda m, x: x.t().reshape_as(x),
    "reshape of a column": lambda m, x: x[:, 0].reshape(-1),
    "reshape of a row": lambda m, x: x[0].reshape(-1),
    "reshape of a strided slice": lambda m, x: x[::2].reshape(-1),
    "reshape of an expanded scalar": lambda m, x: x[0, 0].expand(2, 2).reshape(-1),
    "reshape of an expansion": lambda m, x: x.unsqueeze(0).expand(2, 3, 3).reshape(-1),
    "contiguous of a transpose": lambda m, x: x.t().contiguous(),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_reshape_nodes_follow_pytorch_layouts(name):
    v = np.random.default_rng(4).standard_normal((3, 3))
    tx = tg.tensor(v, requires_grad=True)
    px = torch.tensor(v, requires_grad=True)
    to, po = LAYOUTS[name](TG, tx), LAYOUTS[name](PT, px)
    assert_close(value(to), value(po), "value")
    assert grad_fn_name(to) == grad_fn_name(po)


# ---------------------------------------------------------------------------------------------
# Edge values: equal to PyTorch exactly, inf and nan included
# ---------------------------------------------------------------------------------------------
def F(m):
    return m.F


EDGES = {
    # kinks and ties
    "relu at 0 and nan": (lambda m, x: x.relu(), [[0.0, -0.0, 1.0, -1.0, nan, inf, -inf]]),
    "abs at 0 and nan": (lambda m, x: x.abs(), [[0.0, -0.0, 1.0, -1.0, nan, inf]]),
    "max ties split": (lambda m, x: x.max(), [[1.0, 3.0, 3.0, 2.0]]),
    "max of nans": (lambda m, x: x.max(), [[1.0, nan, 3.0, nan]]),
    "min ties split": (lambda m, x: x.min(), [[1.0, 1.0, 3.0]]),
    "max infinite ties": (lambda m, x: x.max(), [[inf, inf, 1.0]]),
    "max signed zeros": (lambda m, x: x.max(), [[0.0, -0.0]]),
    "amax ties split": (lambda m, x: x.amax(0), [[[1.0, 3.0], [3.0, 3.0], [0.0, 2.0]]]),
    "amax with nan": (lambda m, x: x.amax(0), [[[nan, 1.0], [1.0, 2.0]]]),
    "amin ties over dims": (lambda m, x: x.amin((0, 1)), [[[1.0, 1.0], [1.0, 2.0]]]),
    "max(dim) ties go to the first": (lambda m, x: x.max(0)[0],
                                      [[[1.0, 3.0], [3.0, 3.0], [3.0, 2.0]]]),
    "max(dim) with nan": (lambda m, x: x.max(1)[0], [[[1.0, nan, 3.0, nan]]]),
    "min(dim) ties": (lambda m, x: x.min(1)[0], [[[1.0, 1.0, 3.0, 1.0]]]),
    "maximum ties": (lambda m, x, y: m.maximum(x, y),
                     [[1.0, 2.0, nan, 1.0, inf, -inf], [1.0, 3.0, 1.0, nan, inf, -inf]]),
    "minimum ties": (lambda m, x, y: m.minimum(x, y),
                     [[1.0, 2.0, nan, 1.0, inf, -inf], [1.0, 3.0, 1.0, nan, inf, -inf]]),
    "clamp at the bounds": (lambda m, x: x.clamp(-1.0, 1.0),
                            [[-1.0, 1.0, 0.0, 2.0, -2.0, nan, inf, -inf]]),
    "clamp min at the bound": (lambda m, x: x.clamp(min=-1.0), [[-1.0, 1.0, -2.0, nan]]),
    "clamp max at the bound": (lambda m, x: x.clamp(max=1.0), [[-1.0, 1.0, 2.0, nan]]),
    "clamp_min at the bound": (lambda m, x: x.clamp_min(-1.0), [[-1.0, 1.0, -2.0, nan]]),
    "clamp_max at the bound": (lambda m, x: x.clamp_max(1.0), [[-1.0, 1.0, 2.0, nan]]),
    "clamp with min > max": (lambda m, x: x.clamp(1.0, -1.0), [[-1.0, 1.0, -2.0, 0.0, nan]]),
    "clamp infinite bounds": (lambda m, x: x.clamp(-inf, inf), [[inf, -inf, nan, 1.0]]),
    "where picks nan": (lambda m, x, y: m.where(x > 0, x, y), [[1.0, -1.0, nan], [nan, 2.0, 3.0]]),
    # pow with zero bases and exponents
    "pow tensor 0 base and exponent": (lambda m, x, y: x ** y,
                                       [[0.0, 0.0, 0.0, 0.0, 2.0, -2.0, nan, 1.0],
                                        [0.0, 1.0, 2.0, -1.0, 0.0, 0.5, 0.0, nan]]),
    "pow 0 exponent": (lambda m, x: x ** 0.0, [[0.0, 1.0, -1.0, nan]]),
    "pow 0.5 at 0": (lambda m, x: x ** 0.5, [[0.0, 1.0, -1.0]]),
    "pow 1 at 0": (lambda m, x: x ** 1.0, [[0.0, 1.0, -1.0]]),
    "pow 2 at 0": (lambda m, x: x ** 2, [[0.0, 1.0, -1.0, nan]]),
    "pow -1 at 0": (lambda m, x: x ** -1, [[0.0, 1.0, -1.0]]),
    "pow -2.5 at 0": (lambda m, x: x ** -2.5, [[0.0, 1.0, -1.0]]),
    "0 ** x": (lambda m, x: 0.0 ** x, [[0.0, 1.0, -1.0, 2.0]]),
    "1 ** x": (lambda m, x: 1.0 ** x, [[0.0, 1.0, -1.0, inf]]),
    "negative base ** x": (lambda m, x: (-2.0) ** x, [[0.0, 1.0, 2.0, 0.5]]),
    "2 ** x at infinities": (lambda m, x: 2.0 ** x, [[inf, -inf, nan]]),
    # norms of zeros, ties and non-finite entries
    "norm 2 of zeros": (lambda m, x: x.norm(), [[0.0, 0.0]]),
    "norm 1 of zeros": (lambda m, x: x.norm(1), [[0.0, 0.0]]),
    "norm inf of zeros": (lambda m, x: x.norm(inf), [[0.0, 0.0]]),
    "norm 3 of zeros": (lambda m, x: x.norm(3), [[0.0, 0.0]]),
    "norm 3 with a zero": (lambda m, x: x.norm(3), [[0.0, 1.0, -2.0]]),
    "norm 0.5 with a zero": (lambda m, x: x.norm(0.5), [[0.0, 1.0, -2.0]]),
    "norm inf ties": (lambda m, x: x.norm(inf), [[-2.0, 2.0, 1.0]]),
    "norm -inf ties": (lambda m, x: x.norm(-inf), [[-1.0, 2.0, 1.0]]),
    "norm -inf with a zero": (lambda m, x: x.norm(-inf), [[0.0, 1.0]]),
    "norm over dim, one row zero": (lambda m, x: x.norm(dim=1), [[[0.0, 0.0], [3.0, 4.0]]]),
    "norm 1 with nan": (lambda m, x: x.norm(1), [[nan, 1.0]]),
    "norm inf with nan": (lambda m, x: x.norm(inf), [[nan, 1.0]]),
    "norm 2 with inf": (lambda m, x: x.norm(), [[inf, 1.0]]),
    "norm 3 with inf": (lambda m, x: x.norm(3), [[inf, 1.0]]),
    # poles: inf values and gradients
    "sqrt at 0": (lambda m, x: x.sqrt(), [[0.0, 1.0, -1.0]]),
    "log at 0": (lambda m, x: x.log(), [[0.0, 1.0, -1.0]]),
    "log1p at -1": (lambda m, x: x.log1p(), [[-1.0, 0.0, -2.0]]),
    "reciprocal at 0": (lambda m, x: x.reciprocal(), [[0.0, -0.0, 1.0]]),
    "division by 0": (lambda m, x, y: x / y, [[1.0, 0.0, -1.0], [0.0, 0.0, 0.0]]),
    "scalar divided by 0": (lambda m, x: 1.0 / x, [[0.0]]),
    "tan at pi/2": (lambda m, x: x.tan(), [[math.pi / 2]]),
    "exp overflow": (lambda m, x: x.exp(), [[1000.0, -1000.0]]),
    "expm1 at infinities": (lambda m, x: x.expm1(), [[inf, -inf, nan, 1000.0]]),
    "sigmoid saturates": (lambda m, x: x.sigmoid(), [[-1000.0, 1000.0, 0.0, nan]]),
    "tanh saturates": (lambda m, x: x.tanh(), [[-1000.0, 1000.0]]),
    "sin of inf": (lambda m, x: x.sin(), [[inf]]),
    "inf times 0": (lambda m, x, y: x * y, [[inf, 0.0], [0.0, inf]]),
    "matmul with inf": (lambda m, x, y: x @ y, [[[inf, 1.0]], [[0.0], [1.0]]]),
    "mean with inf": (lambda m, x: x.mean(), [[inf, 1.0]]),
    # products with zeros
    "prod with one zero": (lambda m, x: x.prod(), [[0.0, 2.0, 3.0]]),
    "prod with two zeros": (lambda m, x: x.prod(), [[0.0, 2.0, 0.0]]),
    "prod two zeros and nan": (lambda m, x: x.prod(), [[0.0, 0.0, nan]]),
    "prod zero and nan": (lambda m, x: x.prod(), [[nan, 2.0, 0.0]]),
    "prod zero and inf": (lambda m, x: x.prod(), [[inf, 0.0, 2.0]]),
    "prod with inf": (lambda m, x: x.prod(), [[inf, 2.0, 3.0]]),
    "prod of 0-d": (lambda m, x: x.prod(), [0.0]),
    "prod of 0-d inf": (lambda m, x: x.prod(), [inf]),
    "prod(dim) rows with zeros": (lambda m, x: x.prod(1),
                                  [[[0.0, 2.0, 3.0], [0.0, 0.0, 1.0], [1.0, 2.0, 3.0]]]),
    "prod(dim) a zero elsewhere": (lambda m, x: x.prod(1), [[[nan, 2.0, 3.0], [1.0, 0.0, 2.0]]]),
    "prod(dim) inf and a zero": (lambda m, x: x.prod(1), [[[inf, 2.0, 3.0], [1.0, 0.0, 2.0]]]),
    "prod(dim) two zeros and nan": (lambda m, x: x.prod(1), [[[0.0, 0.0, nan]]]),
    "prod(dim) of size 1 with inf": (lambda m, x: x.prod(1), [[[inf], [2.0]]]),
    # variance at and below its degrees of freedom
    "std of a constant": (lambda m, x: x.std(), [[1.0, 1.0, 1.0]]),
    "std(dim) with a constant column": (lambda m, x: x.std(0), [[[1.0, 2.0], [1.0, 3.0]]]),
    "var of one element": (lambda m, x: x.var(), [[1.0]]),
    "std of one element": (lambda m, x: x.std(), [[1.0]]),
    "var of one element, correction 0": (lambda m, x: x.var(correction=0), [[1.0]]),
    "var of 0-d": (lambda m, x: x.var(), [1.0]),
    "std of 0-d, correction 0": (lambda m, x: x.std(correction=0), [1.0]),
    "var, correction = count": (lambda m, x: x.var(correction=2), [[1.0, 2.0]]),
    "var, correction > count": (lambda m, x: x.var(correction=3), [[1.0, 2.0]]),
    "var of a constant, correction = count": (lambda m, x: x.var(correction=2), [[1.0, 1.0]]),
    "var(dim), correction = count": (lambda m, x: x.var(0, correction=2), [[1.0, 2.0]]),
    "var(dim), correction > count": (lambda m, x: x.var(0, correction=3), [[1.0, 2.0]]),
    "std, correction = count": (lambda m, x: x.std(correction=2), [[1.0, 2.0]]),
    "std, correction > count": (lambda m, x: x.std(correction=3), [[1.0, 2.0]]),
    "std(dim), correction = count": (lambda m, x: x.std(0, correction=2), [[1.0, 2.0]]),
    # softmax family with infinities
    "logsumexp of -inf": (lambda m, x: x.logsumexp(0), [[-inf, -inf]]),
    "logsumexp with inf": (lambda m, x: x.logsumexp(0), [[inf, 1.0]]),
    "logsumexp with -inf": (lambda m, x: x.logsumexp(0), [[-inf, 1.0]]),
    "logsumexp with nan": (lambda m, x: x.logsumexp(0), [[nan, 1.0]]),
    "softmax with inf": (lambda m, x: x.softmax(0), [[inf, 1.0]]),
    "softmax with -inf": (lambda m, x: x.softmax(0), [[-inf, 1.0]]),
    "softmax of -inf": (lambda m, x: x.softmax(0), [[-inf, -inf]]),
    "softmax with nan": (lambda m, x: x.softmax(0), [[nan, 1.0]]),
    "softmax of a large spread": (lambda m, x: x.softmax(0), [[1000.0, 1.0]]),
    "log_softmax with inf": (lambda m, x: x.log_softmax(0), [[inf, 1.0]]),
    "log_softmax with -inf": (lambda m, x: x.log_softmax(0), [[-inf, 1.0]]),
    "log_softmax of -inf": (lambda m, x: x.log_softmax(0), [[-inf, -inf]]),
    "log_softmax of a large spread": (lambda m, x: x.log_softmax(0), [[1000.0, 1.0]]),
    "softplus near its threshold": (lambda m, x: F(m).softplus(x),
                                    [[20.0, 20.0000001, -100.0, 0.0]]),
    "softplus with beta and threshold": (lambda m, x: F(m).softplus(x, beta=2.0, threshold=5.0),
                                         [[2.5, 2.6, -1.0]]),
    # activations at their kinks, nan, infinities, tiny and huge inputs (three at a time:
    # PyTorch's vectorised kernels, which run from 8 or 16 elements on, take another branch
    # at nan for elu, hardtanh and hardswish than its scalar code does; ours is the scalar's)
    **{f"{name} at edges {k}": (lambda m, x, name=name, kw=kw: getattr(
        m.nn.functional, name)(x, **kw), [edges])
       for name, kw in [("gelu", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}),
                        ("mish", {}), ("elu", {}), ("elu", {"alpha": 0.3}), ("selu", {}),
                        ("celu", {"alpha": 0.6}), ("leaky_relu", {}), ("hardtanh", {}),
                        ("relu6", {}), ("hardsigmoid", {}), ("hardswish", {}),
                        ("logsigmoid", {}), ("softshrink", {}), ("hardshrink", {})]
       for k, edges in enumerate([[0.0, -0.0, nan], [inf, -inf, 1e-310], [1e300, -1e300, -3.0],
                                  [3.0, 6.0, -1.0], [0.5, -0.5, 1.0], [-800.0, 800.0, 20.0]])},
    **{f"sinc at edges {k}": (lambda m, x: m.sinc(x), [edges])
       for k, edges in enumerate([[0.0, -0.0, nan], [inf, 1e-310, -1e-310], [1e300, -1e300, 2.0],
                                  [1e-160, 1e-150, -5e-155]])},
    "lgamma at poles and far out": (lambda m, x: x.lgamma(), [[-1e300, -2.0, -1e20]]),
    "digamma at poles and far out": (lambda m, x: x.digamma(), [[-1e300, -3.0, -1e17]]),
    # empty tensors
    "logit at 0 and 1 and outside": (lambda m, x: x.logit(), [[-1.0, 0.0, 0.25, 1.0, 2.0, nan]]),
    "logit with eps at its bounds": (lambda m, x: x.logit(0.25), [[0.0, 0.25, 0.5, 0.75, 1.0]]),
    "sum of nothing": (lambda m, x: x.sum(), [np.zeros(0)]),
    "mean of nothing": (lambda m, x: x.mean(), [np.zeros(0)]),
    "prod of nothing": (lambda m, x: x.prod(), [np.zeros(0)]),
    "norm of nothing": (lambda m, x: x.norm(), [np.zeros(0)]),
    "logsumexp of nothing": (lambda m, x: x.logsumexp(0), [np.zeros(0)]),
    "var of nothing": (lambda m, x: x.var(), [np.zeros(0)]),
    "var(dim) of nothing": (lambda m, x: x.var(0), [np.zeros((1, 0))]),
    "sum(dim) of an empty axis": (lambda m, x: x.sum(1), [np.zeros((2, 0))]),
    "matmul over an empty axis": (lambda m, x, y: x @ y, [np.zeros((2, 0)), np.zeros((0, 3))]),
    "cat skips empty 1-D": (lambda m, x, y: m.cat([x, y]), [np.zeros(0), [1.0, 2.0]]),
    "empty slice": (lambda m, x: x[2:1], [[1.0, 2.0, 3.0]]),
}


@pytest.mark.parametrize("name", sorted(EDGES))
def test_edge_values_match_pytorch_exactly(name):
    fn, inputs = EDGES[name]
    tl = [tg.tensor(np.asarray(v, dtype=np.float64), requires_grad=True) for v in inputs]
    pl = [torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=True) for v in inputs]

    def run(lib, leaves):
        out = fn(lib, *leaves)
        out.backward(lib.ones(tuple(out.shape)))
        return out
    to, tw = recording_warnings(lambda: run(TG, tl))
    po, pw = recording_warnings(lambda: run(PT, pl))
    assert tw == pw, "warnings differ"
    assert_close(value(to), value(po), "value", exact=True)
    assert grad_fn_name(to) == grad_fn_name(po)
    assert_grads_equal(tl, pl, exact=True)


# ---------------------------------------------------------------------------------------------
# Errors: PyTorch's type and message
# ---------------------------------------------------------------------------------------------
def pytorch_error(fn):
    try:
        fn(PT)
    except Exception as e:  # noqa: BLE001 - any exception PyTorch raises is the reference
        return e
    raise AssertionError("PyTorch raised nothing")


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_errors_match_pytorch(name):
    want = pytorch_error(BAD_CALLS[name])
    with pytest.raises(Exception) as got:
        BAD_CALLS[name](TG)
    assert type(got.value) is type(want)
    assert str(got.value) == str(want).replace("torch.", "tapegrad.")


# reshape's node depends on whether PyTorch holds its input as a strided view, also when that
# view went through reshapes, squeezes and unsqueezes of its own (they keep its strides)
RESHAPE_CHAINS = {
    "expand, flatten, reshape": lambda a: a[:1, :1].expand(3, 3).reshape(-1).reshape(3, 3),
    "transpose, reshape": lambda a: a.t().reshape(4),
    "transpose, unsqueeze, reshape": lambda a: a.t().unsqueeze(0).reshape(4),
    "reshape, reshape": lambda a: a.reshape(4).reshape(2, 2),
    "column, reshape": lambda a: a[:, :1].reshape(2),
    "column, reshape, reshape": lambda a: a[:, :1].reshape(2).reshape(1, 2),
    "unsqueeze, squeeze, transpose, reshape":
        lambda a: a.unsqueeze(0).squeeze(0).t().reshape(4),
    "transpose, squeeze, reshape": lambda a: a.t().squeeze().reshape(2, 2),
}


@pytest.mark.parametrize("chain", sorted(RESHAPE_CHAINS))
def test_reshape_of_a_reshaped_view_names_its_node_as_pytorch(chain):
    fn = RESHAPE_CHAINS[chain]
    value = [[1.0, 2.0], [3.0, 4.0]]
    ours = fn(tg.tensor(value, requires_grad=True))
    theirs = fn(torch.tensor(value, dtype=torch.float64, requires_grad=True))
    assert ours.grad_fn.name() == theirs.grad_fn.name()
    np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())


# Broadcasts whose source is one contiguous run repeated over rows (a bias) take their own
# path in expand's forward and backward; the others, and size-0 outputs, the general one.
BIAS_BROADCASTS = [((5,), (7, 5)), ((1, 5), (7, 5)), ((3,), (2, 4, 3)), ((1, 1, 3), (2, 4, 3)),
                   ((4,), (0, 4)), ((1,), (6, 1)), ((6, 1), (6, 4)), ((2, 1, 3), (2, 5, 3))]


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("source, target", BIAS_BROADCASTS)
def test_broadcast_values_and_gradients_match_pytorch(source, target, compiled):
    rng = np.random.default_rng(len(source) * 10 + len(target))
    b_val = rng.standard_normal(source)
    x_val = rng.standard_normal(target)
    w_val = rng.standard_normal(target)

    def loss(x, b, w):
        # the bias used twice: its gradient adds both sums into the same place
        return ((x + b) * w + b).sum()

    b = tg.tensor(b_val, requires_grad=True)
    run = tg.compile(loss) if compiled else loss
    for _ in range(3 if compiled else 1):    # recorded, then replayed
        b.grad = None
        ours = run(tg.tensor(x_val), b, tg.tensor(w_val))
        ours.backward()
    bt = torch.tensor(b_val, requires_grad=True)
    theirs = loss(torch.tensor(x_val), bt, torch.tensor(w_val))
    theirs.backward()
    np.testing.assert_allclose(ours.item(), theirs.item(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), bt.grad.numpy(), rtol=1e-12, atol=1e-12)
    # the forward broadcast itself, as a value
    np.testing.assert_array_equal(tg.tensor(b_val).expand(*target).numpy(),
                                  np.broadcast_to(b_val, target))
