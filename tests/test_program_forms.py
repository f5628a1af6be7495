"""Forms ordinary PyTorch programs write that tapegrad refused or answered otherwise:
NumPy's ``axis=``/``keepdims=`` and PyTorch's own argument names as keywords (a view's sizes
``x.view(size=...)`` among them), ``dtype=`` of
softmax, slices and sums of a ``Size``, ``float()`` of several values, ``requires_grad =
True`` on a computed tensor, ``autograd.grad(..., is_grads_batched=True)``, and the node
names of ``bmm``, ``sgn``, ``special.entr`` and ``ldexp``, ``grad_fn.metadata``, and
``nn.Linear``'s error for an integer input.  Each is compared with PyTorch:
values, gradients, grad_fn names and next_functions, error types and texts."""
import warnings

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

X = np.arange(6.0).reshape(2, 3) / 7.0 - 0.3


def _text(e):
    return type(e).__name__, str(e).replace("tapegrad.", "torch.")


def _node(m, t):
    if t.grad_fn is None:
        return None
    return type(t.grad_fn).__name__ if m is torch else t.grad_fn.name()


def _nexts(m, t):
    return [None if f is None else type(f).__name__ for f, _ in t.grad_fn.next_functions]


def _run(m, prog):
    """(value, dtype, node, gradient of x) of ``prog(m, x)``, or ("error", type, text)."""
    x = m.tensor(X, dtype=m.float64, requires_grad=True)
    try:
        y = prog(m, x)
    except (RuntimeError, TypeError, IndexError, ValueError) as e:
        return ("error",) + _text(e)
    if isinstance(y, tuple):
        y = y[0]
    value = np.asarray(y.detach().numpy(), dtype=np.float64)
    node = _node(m, y)
    grad = None
    if y.requires_grad:
        y.sum().backward()
        grad = x.grad.numpy().copy()
    return value, str(y.dtype).split(".")[-1], node, grad


KEYWORDS = {
    "x.sum(axis=1)": lambda m, x: x.sum(axis=1),
    "x.sum(1, keepdims=True)": lambda m, x: x.sum(1, keepdims=True),
    "x.mean(axis=0, keepdims=True)": lambda m, x: x.mean(axis=0, keepdims=True),
    "sum(input=x)": lambda m, x: m.sum(input=x),
    "sum(x, axis=1)": lambda m, x: m.sum(x, axis=1),
    "mean(input=x, dim=1)": lambda m, x: m.mean(input=x, dim=1),
    "x.max(axis=1)": lambda m, x: x.max(axis=1),
    "min(x, axis=0)": lambda m, x: m.min(x, axis=0),
    "x.argmax(axis=1)": lambda m, x: x.argmax(axis=1),
    "x.prod(axis=1)": lambda m, x: x.prod(axis=1),
    "x.cumsum(axis=1)": lambda m, x: x.cumsum(axis=1),
    "x.amax(axis=1, keepdims=True)": lambda m, x: x.amax(axis=1, keepdims=True),
    "(x > 0).all(axis=1)": lambda m, x: (x > 0).all(axis=1),
    "(x > 0).any(axis=0)": lambda m, x: (x > 0).any(axis=0),
    "x.softmax(axis=1)": lambda m, x: x.softmax(axis=1),
    "x.logsumexp(axis=1)": lambda m, x: x.logsumexp(axis=1),
    "x[None].squeeze(axis=0)": lambda m, x: x[None].squeeze(axis=0),
    "x.unsqueeze(axis=0)": lambda m, x: x.unsqueeze(axis=0),
    "x.sort(axis=1)": lambda m, x: x.sort(axis=1),
    "x.median(axis=1)": lambda m, x: x.median(axis=1),
    "x.nansum(axis=1)": lambda m, x: x.nansum(axis=1),
    "x.count_nonzero(axis=1)": lambda m, x: x.count_nonzero(axis=1),
    "cat([x, x], axis=0)": lambda m, x: m.cat([x, x], axis=0),
    "stack([x, x], axis=1)": lambda m, x: m.stack([x, x], axis=1),
    "concatenate([x, x], axis=1)": lambda m, x: m.concatenate([x, x], axis=1),
    "add(input=x, other=x)": lambda m, x: m.add(input=x, other=x),
    "matmul(input=x, other=x.T)": lambda m, x: m.matmul(input=x, other=x.T),
    "softmax(input=x, dim=0)": lambda m, x: m.softmax(input=x, dim=0),
    # the sizes of a view given by keyword, and other arguments under PyTorch's names
    "x.flip(dims=(0,))": lambda m, x: x.flip(dims=(0,)),
    "flip(x, dims=[1])": lambda m, x: m.flip(x, dims=[1]),
    "x.permute(dims=(1, 0))": lambda m, x: x.permute(dims=(1, 0)),
    "permute(x, dims=(1, 0))": lambda m, x: m.permute(x, dims=(1, 0)),
    "x.reshape(shape=(3, 2))": lambda m, x: x.reshape(shape=(3, 2)),
    "reshape(x, shape=(-1,))": lambda m, x: m.reshape(x, shape=(-1,)),
    "x.view(size=(3, 2))": lambda m, x: x.view(size=(3, 2)),
    "x[:1].expand(size=(4, 3))": lambda m, x: x[:1].expand(size=(4, 3)),
    "x.repeat(repeats=(2, 1))": lambda m, x: x.repeat(repeats=(2, 1)),
    "x.split(split_size=1)": lambda m, x: x.split(split_size=1),
    "x.split(split_size=2, dim=1)": lambda m, x: x.split(split_size=2, dim=1),
    "pow(x, exponent=2)": lambda m, x: m.pow(x, exponent=2),
    "pow(input=x, exponent=x)": lambda m, x: m.pow(input=x, exponent=x),
    "x.pow(exponent=3)": lambda m, x: x.pow(exponent=3),
    "max(x, other=2x)": lambda m, x: m.max(x, other=x * 2 - 0.1),
    "x.min(other=-x)": lambda m, x: x.min(other=-x),
    "gather(input=x, dim=1, index=)":
        lambda m, x: m.gather(input=x, dim=1, index=m.tensor([[0], [2]])),
    "x.std(axis=1)": lambda m, x: x.std(axis=1),
    "var(x, axis=0, keepdims=True)": lambda m, x: m.var(x, axis=0, keepdims=True),
    "std(x, 1, keepdims=True)": lambda m, x: m.std(x, 1, keepdims=True),
    # both names of one argument: PyTorch's TypeError names the alias
    "x.sum(dim=1, axis=1)": lambda m, x: x.sum(dim=1, axis=1),
    "sum(x, dim=1, axis=1)": lambda m, x: m.sum(x, dim=1, axis=1),
    "cat([x], dim=0, axis=0)": lambda m, x: m.cat([x], dim=0, axis=0),
    "x.sum(1, keepdim=True, keepdims=True)":
        lambda m, x: x.sum(1, keepdim=True, keepdims=True),
    # softmax's dtype: the input converted first (an integer one included)
    "softmax(x, 1, dtype=float64)": lambda m, x: m.softmax(x, 1, dtype=m.float64),
    "F.softmax(x, dim=1, dtype=float64)":
        lambda m, x: m.nn.functional.softmax(x, dim=1, dtype=m.float64),
    "x.log_softmax(1, float64)": lambda m, x: x.log_softmax(1, m.float64),
    "F.log_softmax(x, 0, dtype=)":
        lambda m, x: m.nn.functional.log_softmax(x, 0, dtype=m.float64),
    "softmax(int, 0, dtype=float64)":
        lambda m, x: m.softmax(m.tensor([1, 2, 4]), 0, dtype=m.float64),
    "special.log_softmax(int, 0, dtype=)":
        lambda m, x: m.special.log_softmax(m.tensor([1, 2]), 0, dtype=m.float64),
    "softmax(int, 0) refused": lambda m, x: m.softmax(m.tensor([1, 2]), 0),
}


@pytest.mark.parametrize("name", list(KEYWORDS))
def test_a_keyword_form_pytorch_takes_gives_pytorchs_result(name):
    got, want = _run(tg, KEYWORDS[name]), _run(torch, KEYWORDS[name])
    if isinstance(want[0], str):
        assert got == want
        return
    assert not isinstance(got[0], str), got
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-15)
    assert got[1:3] == want[1:3]
    if want[3] is None:
        assert got[3] is None
    else:
        np.testing.assert_allclose(got[3], want[3], rtol=1e-12, atol=1e-15)


def test_a_keyword_neither_name_of_an_argument_is_still_refused():
    x = tg.tensor(X, requires_grad=True)
    assert tg.sum(x, 1).grad_fn.name() == "SumBackward1"
    with pytest.raises(TypeError, match="unexpected keyword argument 'axes'"):
        x.sum(axes=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'axes'"):
        x.std(axes=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'sizes'"):
        x.view(sizes=(3, 2))
    with pytest.raises(TypeError, match="unexpected keyword argument 'dim'"):
        x.permute(dim=(1, 0))


SIZES = {
    "s[1:]": lambda s: s[1:], "s[::2]": lambda s: s[::2], "s[-1]": lambda s: s[-1],
    "s[0]": lambda s: s[0], "s + (1,)": lambda s: s + (1,), "(1,) + s": lambda s: (1,) + s,
    "s + s": lambda s: s + s, "s * 2": lambda s: s * 2, "2 * s": lambda s: 2 * s,
    "s[:0]": lambda s: s[:0], "s + []": lambda s: s + [1],
}


@pytest.mark.parametrize("name", list(SIZES))
def test_a_size_sliced_or_joined_is_a_size_as_in_pytorch(name):
    def run(m):
        try:
            out = SIZES[name](m.ones(2, 3, 4).shape)
        except TypeError as e:
            return _text(e)
        return type(out).__name__, repr(out).replace("tapegrad.", "torch.")
    assert run(tg) == run(torch)


@pytest.mark.parametrize("call", ["float", "int", "complex"])
@pytest.mark.parametrize("n", [0, 1, 3])
def test_a_python_number_of_a_tensor_raises_pytorchs_error(call, n):
    convert = {"float": float, "int": int, "complex": complex}[call]

    def run(m):
        try:
            return repr(convert(m.full((n,), 2.5, dtype=m.float64)))
        except (ValueError, RuntimeError) as e:
            return _text(e)
    assert run(tg) == run(torch)


def test_setting_requires_grad_on_a_computed_tensor_is_refused_as_pytorch_refuses_it():
    def run(m):
        x = m.ones(2, dtype=m.float64, requires_grad=True)
        z = x * 2
        out = []
        for flag in (True, False):
            try:
                z.requires_grad = flag
                out.append("set")
            except RuntimeError as e:
                out.append(_text(e))
        out.append(z.requires_grad_(True).requires_grad)   # the method lets True through
        w = m.ones(2, dtype=m.float64) * 2      # computed without grad: a leaf
        w.requires_grad = True
        out.append((w.is_leaf, w.requires_grad))
        return out
    assert run(tg) == run(torch)


def _batched(m, create_graph):
    x = m.tensor([1.0, 2.0, 3.0], dtype=m.float64, requires_grad=True)
    w = m.tensor(np.arange(6.0).reshape(2, 3) / 4, dtype=m.float64, requires_grad=True)
    unused = m.ones(3, dtype=m.float64, requires_grad=True)
    y = m.tanh(w @ x)
    rows = m.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, -2.0]], dtype=m.float64)
    gx, gw, gu = m.autograd.grad(y, (x, w, unused), rows, retain_graph=True,
                                 create_graph=create_graph, allow_unused=True,
                                 is_grads_batched=True)
    out = [gx.detach().numpy().copy(), gw.detach().numpy().copy(), gu,
           gx.requires_grad]
    if create_graph:
        (h,) = m.autograd.grad(gx.sum(), x)
        out.append(h.numpy().copy())
    return out


@pytest.mark.parametrize("create_graph", [False, True])
def test_grad_with_batched_seeds_gives_pytorchs_rows(create_graph):
    got, want = _batched(tg, create_graph), _batched(torch, create_graph)
    assert got[0].shape == want[0].shape == (3, 3) and got[1].shape == (3, 2, 3)
    for g, w in zip(got, want):
        if isinstance(w, np.ndarray):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)
        else:
            assert g == w


def test_grad_with_batched_seeds_of_a_number_raises_as_pytorch_does():
    def run(m):
        x = m.ones(3, dtype=m.float64, requires_grad=True)
        try:
            m.autograd.grad((x * 2).sum(), x, m.ones((), dtype=m.float64),
                            is_grads_batched=True)
        except IndexError as e:
            return _text(e)
    assert run(tg) == run(torch) is not None


def test_only_inputs_is_taken_and_ignored_with_pytorchs_warning():
    def run(m):
        x = m.ones(2, dtype=m.float64, requires_grad=True)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            (g,) = m.autograd.grad((x * 3).sum(), x, None, None, False, False)
        return g.numpy().tolist(), [(w.category.__name__,
                                     str(w.message).replace("tapegrad.", "torch."))
                                    for w in seen]
    assert run(tg) == run(torch)


NODES = {
    "bmm": lambda m, a, b: m.bmm(a, b),
    "a.bmm(b)": lambda m, a, b: a.bmm(b),
    "bmm of slices": lambda m, a, b: m.bmm(a[:1], b[:1]),
    "sgn": lambda m, a, b: m.sgn(a * 2),
    "special.entr": lambda m, a, b: m.special.entr(a.abs() + 0.5),
    "ldexp, integer exponent": lambda m, a, b: m.ldexp(a, m.tensor([1, 2, 3, 0])),
    "ldexp, both require grad": lambda m, a, b: m.ldexp(a, b[:, :3, :1].reshape(-1)[:4]),
}


@pytest.mark.parametrize("name", list(NODES))
def test_the_node_of_an_op_built_from_others_is_pytorchs(name):
    def run(m):
        a = m.tensor(np.arange(24.0).reshape(2, 3, 4) / 10 - 1, dtype=m.float64,
                     requires_grad=True)
        b = m.tensor(np.arange(40.0).reshape(2, 4, 5) / 10, dtype=m.float64,
                     requires_grad=True)
        y = NODES[name](m, a, b)
        out = [_node(m, y), _nexts(m, y), y.detach().numpy().copy()]
        y.sum().backward()
        out += [None if t.grad is None else t.grad.numpy(**({"force": True} if m is torch
                                                            else {})).copy() for t in (a, b)]
        return out
    got, want = run(tg), run(torch)
    assert got[:2] == want[:2]
    for g, w in zip(got[2:], want[2:]):
        if w is None:
            assert g is None
        else:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)


def test_a_nodes_metadata_is_a_dict_kept_with_the_node():
    def run(m):
        x = m.ones(2, dtype=m.float64, requires_grad=True)
        y = x * 2
        y.grad_fn.metadata["step"] = 3
        z = (y * 3).sum()
        return (y.grad_fn.metadata, z.grad_fn.next_functions[0][0].next_functions[0][0]
                .metadata, (x + 1).grad_fn.metadata)
    assert run(tg) == run(torch) == ({"step": 3}, {"step": 3}, {})


def _linear_calls(m):
    previous = m.get_default_dtype()
    m.set_default_dtype(m.float64)
    try:
        ints, int_rows = m.ones(3, dtype=m.int64), m.ones(2, 3, dtype=m.int64)
        w, b = m.ones(2, 3), m.ones(2)
        F = m.nn.functional
        calls = [lambda: F.linear(ints, w), lambda: F.linear(ints, w, b),
                 lambda: F.linear(int_rows, w), lambda: F.linear(int_rows, w, b),
                 lambda: m.nn.Linear(3, 2)(ints), lambda: m.addmm(b, int_rows, w.T),
                 lambda: F.linear(m.ones(2, 3), m.ones(2, 3, dtype=m.int64), b),
                 lambda: F.linear(m.ones(2, 3, dtype=m.bool), w, b),
                 lambda: F.linear(m.ones(4, 2, 3, dtype=m.int32), w, b),
                 lambda: m.addmm(m.ones(2, dtype=m.int64), m.ones(2, 3), w.T)]
        out = []
        for call in calls:
            try:
                out.append(call().sum().item())
            except RuntimeError as e:
                out.append(_text(e))
        return out
    finally:
        m.set_default_dtype(previous)


def test_a_linear_layer_of_an_integer_input_raises_pytorchs_error():
    assert _linear_calls(tg) == _linear_calls(torch)


# PyTorch's warnings for forms it deprecates: (code, its one warning's category and text)
WARNINGS = {
    "tensor(t)": lambda m: m.tensor(m.ones(2, dtype=m.float64)),
    "tensor(t, requires_grad=True)":
        lambda m: m.tensor(m.ones(2, dtype=m.float64), requires_grad=True),
    "nn.utils.clip_grad_norm": lambda m: m.nn.utils.clip_grad_norm(
        [m.ones(2, dtype=m.float64, requires_grad=True)], 1.0),
}


def _warnings_of(m, call):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call(m)
    return [(w.category, str(w.message).replace("tapegrad.", "torch."), w.filename)
            for w in seen]


@pytest.mark.parametrize("name", list(WARNINGS))
def test_a_deprecated_form_warns_as_pytorch_warns(name):
    got, want = _warnings_of(tg, WARNINGS[name]), _warnings_of(torch, WARNINGS[name])
    assert [w[:2] for w in got] == [w[:2] for w in want]
    assert got[0][2] == __file__    # (the program's line, as PyTorch's)


def test_tapegrads_own_use_of_a_deprecated_form_warns_of_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # (a 1-D weight, which linear transposes with .T; orthogonal_'s own copies)
        assert tg.nn.functional.linear(tg.ones(2, 3), tg.ones(3)).shape == (2,)
        assert tg.nn.init.orthogonal_(tg.empty(3, 4)).shape == (3, 4)


def _once_warnings(code):
    """The warnings a fresh process's two runs of ``code`` give (PyTorch warns of these once
    per process)."""
    import subprocess
    import sys
    prog = ("import warnings, {m} as m\n"
            "with warnings.catch_warnings(record=True) as seen:\n"
            "    warnings.simplefilter('always')\n"
            "    for _ in range(2):\n"
            "        " + code + "\n"
            "print([str(w.message).replace('tapegrad', 'torch').split(' (Triggered')[0] "
            "for w in seen])")
    out = {}
    for m in ("tapegrad", "torch"):
        run = subprocess.run([sys.executable, "-c", prog.format(m=m)], capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        out[m] = run.stdout
    return out


@pytest.mark.parametrize("code", [
    "m.ones(2, 3, 4, dtype=m.float64).T; m.ones(3, dtype=m.float64).T",
    "m.meshgrid(m.arange(2), m.arange(3))",
    # float() of a tensor that requires grad: once, for float, complex and tensor([...]) alike
    "a = m.ones((), dtype=m.float64, requires_grad=True); float(a); float(a * 2); int(a)",
    "a = m.ones((), dtype=m.float64, requires_grad=True); a.item(); float(a)",
    "a = m.ones((), dtype=m.float64, requires_grad=True); import math; math.exp(a)",
    "a = m.ones((), dtype=m.float64, requires_grad=True); m.tensor([a, 2.0]); complex(a)",
    # nested data holding NumPy arrays
    "import numpy as np; m.tensor([np.ones(2), np.zeros(2)])",
    "import numpy as np; m.as_tensor([[np.ones(1)]], dtype=m.float64)",
    "import numpy as np; m.tensor([[1.0], np.ones(1)])",
])
def test_a_warning_pytorch_gives_once_per_process_is_given_once(code):
    out = _once_warnings(code)
    assert out["tapegrad"] == out["torch"]
    assert out["torch"].count("'") == 2     # (one warning)


def test_set_warn_always_makes_a_once_per_process_warning_warn_every_time():
    out = _once_warnings("m.set_warn_always(True); "
                         "float(m.ones((), dtype=m.float64, requires_grad=True))")
    assert out["tapegrad"] == out["torch"]
    assert out["torch"].count("'") == 4     # (two warnings)


# Errors PyTorch gives where tapegrad answered or worded otherwise
ERRORS = {
    "huber_loss(delta=0)": lambda m: m.nn.functional.huber_loss(
        m.ones(2, dtype=m.float64), m.zeros(2, dtype=m.float64), delta=0.0),
    "HuberLoss(delta=-1)": lambda m: m.nn.HuberLoss(delta=-1.0)(
        m.ones(2, dtype=m.float64), m.zeros(2, dtype=m.float64)),
    "huber_loss sizes before delta": lambda m: m.nn.functional.huber_loss(
        m.ones(2, dtype=m.float64), m.zeros(3, dtype=m.float64), delta=0.0),
    "BCEWithLogitsLoss sizes": lambda m: m.nn.BCEWithLogitsLoss()(
        m.zeros(4, 1, dtype=m.float64), m.ones(4, dtype=m.float64)),
    "bool(empty)": lambda m: bool(m.tensor([], dtype=m.float64)),
    "bool(two values)": lambda m: bool(m.ones(2, dtype=m.float64)),
    # tensors inside the data of tensor(): each one number
    "tensor([t, u]) of vectors": lambda m: m.tensor([m.ones(2), m.zeros(2)]),
    "tensor([[t], [u]]) of vectors": lambda m: m.tensor([[m.ones(2)], [m.zeros(2)]]),
    "tensor([t]) of an empty one": lambda m: m.tensor([m.ones(0)]),
    # a gradient of another dtype
    "x.grad = long": lambda m: setattr(m.zeros(3, dtype=m.float64, requires_grad=True),
                                       "grad", m.zeros(3, dtype=m.int64)),
    "x.grad = bool": lambda m: setattr(m.zeros(3, dtype=m.float64), "grad",
                                       m.zeros(3, dtype=m.bool)),
    "x.grad = double on long": lambda m: setattr(m.zeros(3, dtype=m.int64), "grad",
                                                 m.zeros(3, dtype=m.float64)),
    "x.grad = long of another size": lambda m: setattr(
        m.zeros(3, dtype=m.float64), "grad", m.zeros(4, dtype=m.int64)),
    # loss targets of another dtype
    "cross_entropy Int target": lambda m: m.nn.functional.cross_entropy(
        m.ones(2, 3, dtype=m.float64), m.tensor([0, 1], dtype=m.int32)),
    "nll_loss Char target": lambda m: m.nn.functional.nll_loss(
        m.ones(2, 3, dtype=m.float64), m.tensor([0, 1], dtype=m.int8)),
    "nll_loss Bool target": lambda m: m.nn.functional.nll_loss(
        m.ones(2, 3, dtype=m.float64), m.tensor([False, True])),
    "nll_loss 4-D Int target": lambda m: m.nn.functional.nll_loss(
        m.ones(2, 3, 2, 2, dtype=m.float64), m.zeros(2, 2, 2, dtype=m.int32)),
    "cross_entropy Long probabilities": lambda m: m.nn.functional.cross_entropy(
        m.ones(2, 3, dtype=m.float64), m.zeros(2, 3, dtype=m.int64)),
    "cross_entropy 1-D Long of input's shape": lambda m: m.nn.functional.cross_entropy(
        m.ones(1, dtype=m.float64), m.tensor([0])),
    "binary_cross_entropy Long target": lambda m: m.nn.functional.binary_cross_entropy(
        m.full((3,), 0.5, dtype=m.float64), m.tensor([0, 1, 1])),
    "BCELoss Bool target": lambda m: m.nn.BCELoss()(
        m.full((3,), 0.5, dtype=m.float64), m.tensor([False, True, True])),
    "bce_with_logits Long target": lambda m: m.nn.functional.binary_cross_entropy_with_logits(
        m.zeros(3, dtype=m.float64), m.tensor([0, 1, 1])),
    "bce_with_logits Byte target": lambda m: m.nn.functional.binary_cross_entropy_with_logits(
        m.zeros(3, dtype=m.float64), m.tensor([0, 1, 1], dtype=m.uint8)),
    "kl_div Long target": lambda m: m.nn.functional.kl_div(
        m.zeros(3, dtype=m.float64), m.tensor([0, 1, 1]), reduction="sum"),
    "kl_div Long input": lambda m: m.nn.functional.kl_div(
        m.tensor([0, 1, 1]), m.zeros(3, dtype=m.float64), reduction="batchmean"),
    # class weights of another size
    "nll_loss weight of 4 for 3 classes": lambda m: m.nn.functional.nll_loss(
        m.ones(2, 3, dtype=m.float64), m.tensor([0, 1]), weight=m.ones(4, dtype=m.float64)),
    "nll_loss weight (1, 3)": lambda m: m.nn.functional.nll_loss(
        m.ones(2, 3, dtype=m.float64), m.tensor([0, 1]), weight=m.ones(1, 3, dtype=m.float64)),
    "nll_loss 1-D input weight": lambda m: m.nn.functional.nll_loss(
        m.ones(3, dtype=m.float64), m.tensor(1), weight=m.ones(2, dtype=m.float64)),
    "nll_loss 4-D weight": lambda m: m.nn.functional.nll_loss(
        m.ones(2, 3, 2, 2, dtype=m.float64), m.zeros(2, 2, 2, dtype=m.int64),
        weight=m.ones(4, dtype=m.float64)),
    "nll_loss 3-D weight": lambda m: m.nn.functional.nll_loss(
        m.ones(2, 3, 4, dtype=m.float64), m.zeros(2, 4, dtype=m.int64),
        weight=m.ones(4, dtype=m.float64)),
    "cross_entropy weight": lambda m: m.nn.CrossEntropyLoss(weight=m.ones(2, dtype=m.float64))(
        m.ones(2, 3, dtype=m.float64), m.tensor([0, 1])),
    "cross_entropy probabilities weight": lambda m: m.nn.functional.cross_entropy(
        m.ones(2, 3, dtype=m.float64), m.full((2, 3), 1 / 3, dtype=m.float64),
        weight=m.ones(4, dtype=m.float64)),
    # sizes that are not integers, as PyTorch's parser refuses them
    "x.view(n / 2, 2)": lambda m: m.ones(4, dtype=m.float64).view(4 / 2, 2),
    "x.view(2.0)": lambda m: m.ones(2, dtype=m.float64).view(2.0),
    "x.view((2.0, 2))": lambda m: m.ones(4, dtype=m.float64).view((2.0, 2)),
    "x.view(2, 2.0)": lambda m: m.ones(4, dtype=m.float64).view(2, 2.0),
    "x.view(True, 4)": lambda m: m.ones(4, dtype=m.float64).view(True, 4),
    "x.view(float tensor, 2)": lambda m: m.ones(4, dtype=m.float64).view(
        m.tensor(2.0, dtype=m.float64), 2),
    "x.reshape(2.0, 2)": lambda m: m.ones(4, dtype=m.float64).reshape(2.0, 2),
    "x.reshape(4.0)": lambda m: m.ones(4, dtype=m.float64).reshape(4.0),
    "x.reshape((2.0, 2))": lambda m: m.ones(4, dtype=m.float64).reshape((2.0, 2)),
    "x.reshape([2, 2.0])": lambda m: m.ones(4, dtype=m.float64).reshape([2, 2.0]),
    "x.reshape(2, 'a')": lambda m: m.ones(4, dtype=m.float64).reshape(2, "a"),
    "x.reshape(None, 2)": lambda m: m.ones(4, dtype=m.float64).reshape(None, 2),
    "x.expand(2.0, 4)": lambda m: m.ones(1, 4, dtype=m.float64).expand(2.0, 4),
    "x.expand((2.0, 4))": lambda m: m.ones(1, 4, dtype=m.float64).expand((2.0, 4)),
    "x.expand(4.0)": lambda m: m.ones(1, dtype=m.float64).expand(4.0),
    "x.repeat(2.0, 2)": lambda m: m.ones(2, dtype=m.float64).repeat(2.0, 2),
    "x.repeat((2.0,))": lambda m: m.ones(2, dtype=m.float64).repeat((2.0,)),
    # a number in the text as C++ prints it
    "normal(std=-1.0)": lambda m: m.normal(0.0, -1.0, size=(2,)),
    "normal(std=-1e-7)": lambda m: m.normal(0.0, -1e-7, size=(2,)),
    "normal_(std=-123456789.5)": lambda m: m.empty(2, dtype=m.float64).normal_(0.0, -123456789.5),
}


# Answers PyTorch gives where tapegrad raised or answered otherwise
ANSWERS = {
    "tensor([t, u]) of one-element tensors": lambda m: m.tensor(
        [m.ones(1, 1), m.tensor(2.0, dtype=m.float64), m.tensor([3])]),
    "tensor of nested one-element tensors": lambda m: m.tensor(
        [[m.tensor(1), 2], [3.0, m.tensor([4], dtype=m.uint8)]]),
    "tensor of integer tensors": lambda m: m.tensor(
        [m.tensor(1, dtype=m.uint8), m.tensor(2, dtype=m.int8)]),
    "x.view(tensor(2), 2)": lambda m: m.arange(4).view(m.tensor(2), 2),
    "x.reshape(tensor([2]), -1)": lambda m: m.arange(4).reshape(m.tensor([2]), -1),
    "x.reshape((np.int32(2), 2))": lambda m: m.arange(4).reshape((np.int32(2), 2)),
    "x.expand(tensor(3), 2)": lambda m: m.arange(2).expand(m.tensor(3), 2),
    "x.repeat(np.int64(2))": lambda m: m.arange(2).repeat(np.int64(2)),
    "where(0-d true)": lambda m: m.where(m.tensor(True)),
    "where(0-d false)": lambda m: m.where(m.tensor(0.0, dtype=m.float64)),
    "nll_loss Byte target": lambda m: m.nn.functional.nll_loss(
        m.tensor([[-1.0, -2.0, -3.0], [-0.5, -1.5, -2.5]], dtype=m.float64),
        m.tensor([2, 1], dtype=m.uint8)),
    "cross_entropy 1-D input, target (1,)": lambda m: m.nn.functional.cross_entropy(
        m.tensor([0.5, 1.5, -1.0], dtype=m.float64), m.tensor([1])),
}


def _answer(m, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = ANSWERS[name](m)
    out = out if isinstance(out, tuple) else (out,)
    return [(np.asarray(t.numpy()).tolist(), tuple(t.shape), str(t.dtype).split(".")[-1])
            for t in out]


@pytest.mark.parametrize("name", list(ANSWERS))
def test_an_answer_pytorch_gives_is_given(name):
    assert _answer(tg, name) == _answer(torch, name)


@pytest.mark.parametrize("name", list(ERRORS))
def test_an_error_pytorch_gives_is_given_with_its_text(name):
    def error(m):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # (the loss's size warning, where it gives one)
            try:
                ERRORS[name](m)
            except (RuntimeError, ValueError, TypeError) as e:
                return _text(e)
        return None
    want = error(torch)
    assert want is not None
    assert error(tg) == want
