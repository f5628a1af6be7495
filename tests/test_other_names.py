"""Names PyTorch programs use that tapegrad lacked: ``hsplit``/``vsplit``/``dsplit``, the
other names of ops (``absolute``, ``negative``, ``positive``, ``multiply_``, ``divide_``,
``subtract_``, ``true_divide_``, ``negative_``, ``absolute_``), and the questions and
no-op views of a real tensor (``is_complex``, ``is_signed``, ``conj``, ``real``, ``imag``,
``itemsize``, ``nbytes``, ``get_device``, ...).  Each is compared with PyTorch: values,
``grad_fn`` names, gradients and error texts."""
import re

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

A = [[1.5, -2.0, 3.0, 0.5], [-0.5, 4.0, -1.0, 2.5]]
B = np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 7.0 - 1.0


def _leaf(m, value):
    return m.tensor(value, dtype=m.float64, requires_grad=True)


def outcome(m, prog):
    """(values, grad_fn names, input gradient) of ``prog`` or ("error", type, text)."""
    x = _leaf(m, prog[1])
    try:
        out = prog[0](m, x)
    except (RuntimeError, TypeError, IndexError) as e:
        return "error", type(e).__name__, str(e).replace("tapegrad.", "torch.")
    outs = list(out) if isinstance(out, tuple) else [out]
    names = [None if t.grad_fn is None else type(t.grad_fn).__name__
             if m is torch else t.grad_fn.name() for t in outs]
    total = sum((t * (k + 1.5)).sum() for k, t in enumerate(outs) if t.requires_grad)
    if isinstance(total, (int, float)):
        grad = None
    else:
        total.backward()
        grad = None if x.grad is None else np.array(x.grad.tolist())
    return [np.array(t.tolist()) for t in outs], names, grad


PROGRAMS = {
    "hsplit_int": (lambda m, x: x.hsplit(2), A),
    "hsplit_list": (lambda m, x: m.hsplit(x, [1, 3]), A),
    "hsplit_negative_index": (lambda m, x: x.hsplit([1, -1]), A),
    "hsplit_vector": (lambda m, x: m.hsplit(x[0], 2), A),
    "hsplit_not_dividing": (lambda m, x: x.hsplit(3), A),
    "hsplit_zero": (lambda m, x: x.hsplit(0), A),
    "hsplit_negative": (lambda m, x: x.hsplit(-1), A),
    "hsplit_0d": (lambda m, x: m.hsplit(x[0, 0], 1), A),
    "vsplit_int": (lambda m, x: x.vsplit(2), A),
    "vsplit_list": (lambda m, x: m.vsplit(x, [1]), A),
    "vsplit_not_dividing": (lambda m, x: x.vsplit(3), A),
    "vsplit_vector": (lambda m, x: x[0].vsplit(2), A),
    "dsplit_int": (lambda m, x: x.dsplit(2), B),
    "dsplit_list": (lambda m, x: m.dsplit(x, [1, 2]), B),
    "dsplit_matrix": (lambda m, x: x[0].dsplit(2), B),
    "absolute": (lambda m, x: m.absolute(x), A),
    "absolute_method": (lambda m, x: x.absolute(), A),
    "negative": (lambda m, x: m.negative(x) * 2.0, A),
    "negative_method": (lambda m, x: x.negative(), A),
    "positive": (lambda m, x: m.positive(x) * 3.0, A),
    "multiply_": (lambda m, x: (x * 1.0).multiply_(x), A),
    "divide_": (lambda m, x: (x * 1.0).divide_(2.0), A),
    "true_divide_": (lambda m, x: (x + 10.0).true_divide_(x + 10.0), A),
    "subtract_": (lambda m, x: (x * 1.0).subtract_(x, alpha=3.0), A),
    "negative_": (lambda m, x: (x * 2.0).negative_(), A),
    "absolute_": (lambda m, x: (x * 2.0).absolute_(), A),
    "leaf_multiply_": (lambda m, x: x.multiply_(2.0), A),
    "conj": (lambda m, x: m.conj(x) * 2.0, A),
    "real": (lambda m, x: m.real(x) * 2.0, A),
    "resolve": (lambda m, x: x.resolve_conj().resolve_neg() * 2.0, A),
    "imag": (lambda m, x: x.imag, A),
    "imag_function": (lambda m, x: m.imag(x), A),
    "transpose_": (lambda m, x: (x * 2.0).transpose_(0, 1), A),
    "swapaxes_": (lambda m, x: (x * 2.0).swapaxes_(1, 0), A),
    "swapdims_": (lambda m, x: (x * 2.0).swapdims_(-1, 0), B),
    "transpose_leaf": (lambda m, x: x.transpose_(0, 1), A),
    "transpose_bad_dim": (lambda m, x: (x * 2.0).transpose_(0, 2), A),
    "transpose_then_more": (lambda m, x: (x * 2.0).transpose_(0, 1).sin() * x.t(), A),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_as_in_pytorch(name):
    got, want = outcome(tg, PROGRAMS[name]), outcome(torch, PROGRAMS[name])
    if want[0] == "error":
        assert got == want
        return
    assert got[0] != "error", got
    assert len(got[0]) == len(want[0])
    for g, e in zip(got[0], want[0]):
        np.testing.assert_array_equal(g, e)
    assert got[1] == want[1]
    if want[2] is None:
        assert got[2] is None
    else:
        np.testing.assert_array_equal(got[2], want[2])


def test_the_same_tensor_comes_back():
    for m in (tg, torch):
        x = _leaf(m, A)
        for same in (m.positive(x), x.positive(), x.conj(), m.conj(x), x.resolve_conj(),
                     x.resolve_neg(), x.real, m.real(x)):
            assert same is x


def test_a_bool_tensor_has_no_unary_plus():
    texts = []
    for m in (tg, torch):
        with pytest.raises(RuntimeError) as e:
            m.positive(m.tensor([True, False]))
        texts.append(str(e.value))
    assert texts[0] == texts[1]


@pytest.mark.parametrize("dtype", ["float64", "int64", "int32", "int16", "int8", "uint8",
                                   "bool"])
def test_questions_about_a_tensor(dtype):
    def answers(m):
        t = m.zeros(2, 3, dtype=getattr(m, dtype))
        return (t.is_complex(), m.is_complex(t), t.is_conj(), m.is_conj(t), t.is_neg(),
                m.is_neg(t), t.is_signed(), m.is_signed(t), t.itemsize, t.nbytes,
                t.get_device(), m.get_device(t), t.is_same_size(m.ones(2, 3)),
                m.is_same_size(t, m.ones(3, 2)))
    assert answers(tg) == answers(torch)


def test_the_questions_want_a_tensor():
    texts = []
    for m in (tg, torch):
        with pytest.raises(TypeError) as e:
            m.is_complex([1.0])
        texts.append(re.sub(r"torch\.|tapegrad\.", "", str(e.value)))
    assert texts[0] == texts[1]


def test_matrix_power_as_a_method():
    got, want = [], []
    for m, out in ((tg, got), (torch, want)):
        x = _leaf(m, [[1.5, -2.0], [0.5, 1.0]])
        y = x.matrix_power(3)
        y.sum().backward()
        out += [np.array(y.tolist()), np.array(x.grad.tolist())]
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-13)


def test_transpose_in_place_under_no_grad():
    got, want = [], []
    for m, out in ((tg, got), (torch, want)):
        x = _leaf(m, B)
        with m.no_grad():
            x.transpose_(0, 2)
        out += [np.array(x.tolist()), tuple(x.shape), x.requires_grad, x.grad_fn is None]
        (x * x).sum().backward()
        out.append(np.array(x.grad.tolist()))
    for g, e in zip(got, want):
        np.testing.assert_array_equal(g, e)


COMPARED = ["eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less",
            "less_equal", "not_equal"]


@pytest.mark.parametrize("other", ["number", "tensor", "broadcast"])
@pytest.mark.parametrize("name", COMPARED)
def test_comparisons_in_place(name, other):
    """Values in the tensor's dtype, written into it (data) or recorded with a zero
    gradient (a value that requires grad); PyTorch's node is the comparison's (GtBackward0),
    tapegrad's an AddBackward0 -- the one difference."""
    def run(m, recorded):
        x = _leaf(m, A)
        y = (x * 1.0) if recorded else m.tensor(A, dtype=m.float64)
        o = {"number": 0.5, "tensor": m.tensor(A, dtype=m.float64).flip(0),
             "broadcast": m.tensor([0.0, 4.0, -1.0, 0.5], dtype=m.float64)}[other]
        z = getattr(y, f"{name}_")(o)
        out = [z is y, np.array(z.tolist()), z.dtype == m.float64, z.requires_grad]
        if recorded:
            (z * 3.0).sum().backward()
            out.append(np.array(x.grad.tolist()))
        return out
    for recorded in (False, True):
        got, want = run(tg, recorded), run(torch, recorded)
        for g, e in zip(got, want):
            np.testing.assert_array_equal(g, e)


def test_a_comparison_in_place_must_fit_the_tensor():
    texts = []
    for m in (tg, torch):
        with pytest.raises(RuntimeError) as e:
            m.zeros(3, dtype=m.float64).gt_(m.zeros(2, 3, dtype=m.float64))
        texts.append(str(e.value))
    assert texts[0] == texts[1]


@pytest.mark.parametrize("name, arg", [
    ("bitwise_and_", 6), ("bitwise_or_", 9), ("bitwise_xor_", -3), ("bitwise_not_", None),
    ("bitwise_left_shift_", 2), ("bitwise_right_shift_", 1), ("logical_and_", "mask"),
    ("logical_or_", "mask"), ("logical_xor_", "mask"), ("logical_not_", None)])
@pytest.mark.parametrize("dtype", ["int64", "int16", "uint8", "bool", "float64"])
def test_bitwise_and_logical_in_place(name, arg, dtype):
    def run(m):
        t = m.tensor([3, 0, 5, 1], dtype=getattr(m, dtype))
        a = () if arg is None else (m.tensor([True, False, True, False]) if arg == "mask"
                                    else arg,)
        try:
            r = getattr(t, name)(*a)
        except (RuntimeError, TypeError, NotImplementedError) as e:
            return "error", type(e).__name__, str(e)
        return r is t, t.tolist(), str(t.dtype).split(".")[-1]
    assert run(tg) == run(torch)
