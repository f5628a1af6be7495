"""An eager elementwise op with an operand of one value (a 0-d parameter times a vector)
reads that value where it is, without a recorded expansion of it, and its backward sums the
operand's terms into its gradient.

Checked here: values, gradients and ``grad_fn`` against PyTorch over ops, shapes and sides;
that the tape holds no expansion of one value; the generated backward of a hot tape (which
reads such operands into locals) bit for bit against the interpreter, also where it must
fall back to the interpreter (two sums into one value in one loop); the create_graph
backward (gradients of gradients); in-place changes of the saved operand; and replays,
which keep expansions.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.ops as K
from tapegrad import hot_tapes
from tapegrad.tape import state
from test_hot_tapes import _same_steps, _steps

torch = pytest.importorskip("torch")

_OPS = {
    "add": lambda m, a, b: a + b,
    "sub": lambda m, a, b: a - b,
    "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b,
    "pow": lambda m, a, b: m.abs(a) ** b,
    "atan2": lambda m, a, b: m.atan2(a, b),
    "maximum": lambda m, a, b: m.maximum(a, b),
    "minimum": lambda m, a, b: m.minimum(a, b),
    "hypot": lambda m, a, b: m.hypot(a, b),
    "xlogy": lambda m, a, b: m.xlogy(a, m.abs(b)),
}
_ONE_VALUE_SHAPES = [(), (1,), (1, 1)]
_VECTOR_SHAPES = [(2,), (7,), (3, 4), (2, 1, 3), (5, 1)]


def _expansions_of_one_value(t):
    """The EXPAND_S records on t's tape whose source holds one value."""
    tape = t._tape
    return [r for r in range(len(tape.op))
            if tape.op[r] == K.EXPAND_S and tape.size[tape.a0[r]] == 1]


def _run(m, name, a, b, one_first, g):
    x = m.tensor(a, requires_grad=True)
    y = m.tensor(b, requires_grad=True)
    out = _OPS[name](m, x, y) if one_first else _OPS[name](m, y, x)
    out.backward(m.tensor(g))
    return out, x.grad.numpy().copy(), y.grad.numpy().copy()


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(sorted(_OPS)), one=st.sampled_from(_ONE_VALUE_SHAPES),
       shape=st.sampled_from(_VECTOR_SHAPES), one_first=st.booleans(),
       seed=st.integers(0, 2 ** 32 - 1))
def test_values_gradients_and_nodes_as_pytorch(name, one, shape, one_first, seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.5, 2.0, one) * rng.choice([-1.0, 1.0])
    b = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    out_shape = np.broadcast_shapes(one, shape)
    g = rng.standard_normal(out_shape)
    ours, ga, gb = _run(tg, name, a, b, one_first, g)
    theirs, ta, tb = _run(torch, name, a, b, one_first, g)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-14,
                               atol=1e-15)
    np.testing.assert_allclose(ga, ta, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(gb, tb, rtol=1e-12, atol=1e-13)
    assert type(ours.grad_fn).__name__ == type(theirs.grad_fn).__name__
    assert [type(f).__name__ if f is not None else None for f, _ in ours.grad_fn.next_functions] \
        == [type(f).__name__ if f is not None else None for f, _ in theirs.grad_fn.next_functions]
    if len(out_shape) >= len(one):
        # (an operand of more dims than the other is itself expanded: (1, 1) with (2,))
        assert _expansions_of_one_value(ours) == []


def test_the_cubic_fit_records_no_expansion_and_gets_pytorchs_gradients():
    xv = np.linspace(-np.pi, np.pi, 500)
    grads = []
    for m in (tg, torch):
        x, y = m.tensor(xv), m.tensor(np.sin(xv))
        ps = [m.tensor(v, dtype=m.float64, requires_grad=True) for v in (0.1, 0.2, -0.1, 0.05)]
        a, b, c, d = ps
        loss = (a + b * x + c * x ** 2 + d * x ** 3 - y).pow(2).sum()
        if m is tg:
            assert _expansions_of_one_value(loss) == []
        loss.backward()
        grads.append([p.grad.item() for p in ps])
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)


def test_a_first_gradient_of_negative_zeros_is_positive_zero_as_pytorchs():
    # the terms are summed from 0.0 (a cleared gradient), not from -0.0: PyTorch's sum of
    # the terms starts from 0.0 too
    signs = []
    for m in (tg, torch):
        b = m.tensor(1.0, dtype=m.float64, requires_grad=True)
        (b * m.tensor([-0.0, -0.0, -0.0], dtype=m.float64)).sum().backward()
        signs.append(bool(np.signbit(b.grad.numpy())))
    assert signs == [False, False]


def _step_of(make_loss, n, seed=3):
    rng = np.random.default_rng(seed)
    xv = rng.uniform(-2.0, 2.0, n)
    params = [tg.tensor(v, requires_grad=True) for v in rng.uniform(0.5, 1.5, 4)]

    def step(i):
        for p in params:
            p.grad = None
        x = tg.tensor(xv + 0.01 * i)
        return [make_loss(x, *params)] + params
    return step


_HOT_LOSSES = {
    # each parameter read once per loop: the generated backward sums it in the loop
    "cubic": lambda x, a, b, c, d: ((a + b * x + c * x ** 2 + d * x ** 3) - tg.sin(x)).pow(2).sum(),
    "quotients": lambda x, a, b, c, d: (x / a - b / (x * x + 1.0) + tg.atan2(c, x) * x
                                        + tg.maximum(x, d)).sum(),
    # b read twice in one loop: the second sum is kept apart and added after the first
    "twice": lambda x, a, b, c, d: (b * x + tg.sin(x) * b + a - c * d * x).sum(),
    "thrice": lambda x, a, b, c, d: (x * a + a - tg.cos(x) / a).sum() * b,
    # a read directly and through a broadcast of it (where's expansion) in one loop
    "with a broadcast": lambda x, a, b, c, d: (tg.where(x > 0, a, x) + a * x + b * x).sum(),
    # a number computed from the parameters, read by a loop
    "scalar chain": lambda x, a, b, c, d: ((a * b + c) * x - tg.exp(d) / (1.0 + x * x)).sum(),
}


@pytest.mark.parametrize("loss", sorted(_HOT_LOSSES))
@pytest.mark.parametrize("n", [2000, 6000])
def test_generated_backward_has_the_interpreters_bits(loss, n, monkeypatch):
    monkeypatch.setattr(hot_tapes, "_WORK", 0)
    got, built = _steps(_step_of(_HOT_LOSSES[loss], n), 6, True)
    why_not = hot_tapes.why_not()
    want, _ = _steps(_step_of(_HOT_LOSSES[loss], n), 6, False)
    _same_steps(got, want)
    assert built >= 1, why_not


@pytest.mark.parametrize("n", [2000, 6000])
def test_generated_backward_agrees_with_pytorch(n, monkeypatch):
    monkeypatch.setattr(hot_tapes, "_WORK", 0)
    got, built = _steps(_step_of(_HOT_LOSSES["quotients"], n), 5, True)
    assert built >= 1
    rng = np.random.default_rng(3)
    xv = rng.uniform(-2.0, 2.0, n)
    ps = [torch.tensor(v, requires_grad=True) for v in rng.uniform(0.5, 1.5, 4)]
    a, b, c, d = ps
    x = torch.tensor(xv + 0.04)
    (x / a - b / (x * x + 1.0) + torch.atan2(c, x) * x + torch.maximum(x, d)).sum().backward()
    np.testing.assert_allclose(got[-1][1:], [p.grad.numpy() for p in ps], rtol=1e-11)


def _second_derivatives(m):
    b = m.tensor(0.7, requires_grad=True)
    x = m.tensor(np.linspace(-1.0, 2.0, 9), requires_grad=True)
    y = (b * x * x + m.sin(b * x) + x / (b + 2.0)).sum()
    gb, gx = m.autograd.grad(y, (b, x), create_graph=True)
    hb, = m.autograd.grad(gb, b, retain_graph=True)
    hx, = m.autograd.grad(gx.sum(), b)
    return [t.detach().numpy().copy() for t in (gb, gx, hb, hx)]


def test_create_graph_backward_sums_the_one_value_terms():
    for ours, theirs in zip(_second_derivatives(tg), _second_derivatives(torch)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)


def _changed_after_use(m):
    w = m.tensor(2.0)
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * w).sum()
    with m.no_grad():
        w.add_(1.0)   # w is saved by the product for x's gradient
    try:
        y.backward()
    except RuntimeError as e:
        return "raised", str(e).split(";")[0]
    return "ran", x.grad.numpy().tolist()


def test_a_saved_one_value_operand_changed_in_place_is_refused_as_pytorch():
    ours, theirs = _changed_after_use(tg), _changed_after_use(torch)
    assert ours[0] == theirs[0] == "raised"
    # (tapegrad names its own tensor type where PyTorch names torch.DoubleTensor)
    assert ours[1] == theirs[1].replace("torch.", "tapegrad.")


def test_replays_keep_the_expansion_and_agree_with_eager():
    xv = np.linspace(-1.0, 1.0, 300)
    ps = [tg.tensor(v, requires_grad=True) for v in (0.3, -0.2, 0.5)]

    def f(a, b, c, x):
        return (a + b * x + c * x ** 2).pow(2).sum()
    run = tg.compile(f)
    x = tg.tensor(xv)
    for _ in range(3):
        for p in ps:
            p.grad = None
        run(*ps, x).backward()
    assert run.stats.replays >= 1
    compiled = [p.grad.item() for p in ps]
    for p in ps:
        p.grad = None
    f(*ps, x).backward()
    np.testing.assert_allclose(compiled, [p.grad.item() for p in ps], rtol=1e-13)


def test_a_graph_over_several_tapes_still_sums_every_term():
    # a tiny tape fills up: the operand and its reader land on different tapes
    b = tg.tensor(1.5, requires_grad=True)
    x = tg.tensor(np.arange(1.0, 41.0))
    state.tape, state.last_used = None, 0
    total = b * 0.0
    for k in range(30):
        total = total + (b * x * (k + 1)).sum()
    total.backward()
    np.testing.assert_allclose(b.grad.item(), x.numpy().sum() * sum(range(1, 31)), rtol=1e-14)
