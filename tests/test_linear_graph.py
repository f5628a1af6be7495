"""``F.linear`` (and so ``nn.Linear``) builds PyTorch's graph: ``weight.t()`` (TBackward0);
a 2-D input with a bias is one addmm; a contiguous input of another rank with a bias of one
row is flattened to rows, multiplied by that addmm and viewed back (ViewBackward0); anything
else is a matmul and then the bias added in place (AddBackward0), which cannot grow the
output.  Each case is compared with PyTorch: the result's node and the nodes it lists, the
values, the three gradients, or the error's type and text; eagerly and through compile."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

INPUTS = [(4,), (3, 4), (2, 3, 4), (2, 2, 3, 4), (0, 3, 4), (1, 2, 1, 3, 4)]
BIASES = [None, (5,), (), (1,), (1, 5), (3, 5), (2, 1, 5), (1, 1, 5), (3,), (4, 5), (2, 3, 5)]
CASES = [(x, b, transposed) for x in INPUTS for b in BIASES for transposed in (False, True)
         if not (transposed and len(x) < 2)]


def _node_names(node):
    """The node's name and those of the nodes it lists (None for an input that needs none)."""
    return (node.name(),) + tuple(None if f is None else f.name().split("::")[-1]
                                  for f, _ in node.next_functions)


def _arrays(case):
    shape, bias_shape, transposed = case
    rng = np.random.default_rng(abs(hash(case)) % 2 ** 32)
    x = rng.standard_normal(shape[:-2] + (shape[-1], shape[-2]) if transposed else shape)
    w = rng.standard_normal((5, 4))
    b = None if bias_shape is None else rng.standard_normal(bias_shape)
    return x, w, b


def _outcome(m, case, linear=None):
    """(node names, value, gradients) of linear on the case's inputs, or the error."""
    x0, w0, b0 = _arrays(case)
    x = m.tensor(x0, requires_grad=True)
    w = m.tensor(w0, requires_grad=True)
    b = None if b0 is None else m.tensor(b0, requires_grad=True)
    try:
        if linear is None:
            y = m.nn.functional.linear(x.transpose(-1, -2) if case[2] else x, w, b)
        else:       # (a compiled function transposes inside: its arguments are leaves)
            y = linear(x, w, b)
    except Exception as e:   # noqa: BLE001 - the error itself is compared
        return type(e).__name__, str(e).replace("tapegrad.", "torch.").replace(
            "DoubleTensor", "FloatTensor"), None
    weights = np.arange(1.0, y.numel() + 1.0).reshape(tuple(y.shape)) / 7.0
    (y * m.tensor(weights, dtype=m.float64)).sum().backward()
    grads = [np.array(t.grad.tolist()) for t in (x, w) + (() if b is None else (b,))]
    return _node_names(y.grad_fn), np.array(y.tolist()), grads


def _same(got, want):
    if want[2] is not None and want[0][0] in ("UnsafeViewBackward0", "SqueezeBackward4"):
        # matmul's fold of a batch into rows: PyTorch's node lists an MmBackward0 of views;
        # tapegrad's fold is one record, whose node lists the operands (a known difference)
        assert got[0][0] == want[0][0]
    else:
        assert got[0] == want[0]
    if want[2] is None:       # an error: its text
        assert got[1] == want[1]
        return
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-12)
    for g, w in zip(got[2], want[2]):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def _torch_outcome(case):
    # PyTorch's error texts name FloatTensor for its float64 tensors' expand as well
    got = _outcome(torch, case)
    if got[2] is None:
        return got[0], got[1].replace("DoubleTensor", "FloatTensor"), None
    return got


@pytest.mark.parametrize("case", CASES, ids=str)
def test_linear_as_pytorch(case):
    _same(_outcome(tg, case), _torch_outcome(case))


@pytest.mark.parametrize("case", [c for c in CASES if c[1] in (None, (5,), ())
                                  and c[0] in ((4,), (3, 4), (2, 3, 4))], ids=str)
def test_linear_through_compile(case):
    want = _torch_outcome(case)
    f = tg.compile(lambda x, w, b=None: tg.nn.functional.linear(
        x.transpose(-1, -2) if case[2] else x, w, b))
    for _ in range(3):     # recorded, then replayed
        _same(_outcome(tg, case, f), want)
    assert f.stats.replays == 2, f.stats


def test_module_on_a_batch_of_sequences_as_pytorch():
    """nn.Linear on (batch, time, features), as in a transformer: PyTorch's ViewBackward0."""
    results = []
    for m in (torch, tg):
        m.manual_seed(0)
        layer = m.nn.Linear(4, 3).double()
        y = layer(m.ones(2, 5, 4, dtype=m.float64))
        results.append((y.grad_fn.name(), _node_names(y.grad_fn.next_functions[0][0])))
    assert results[0] == results[1] == ("ViewBackward0", ("AddmmBackward0", "AccumulateGrad",
                                                          None, "TBackward0"))
