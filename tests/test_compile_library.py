"""Library functions under ``compile`` and ``vmap``: recorded on one draw of inputs, replayed on
others, equal to eager mode and to PyTorch.

Every function of ``tapegrad.nn.functional`` and the ``where`` forms, on values drawn over the
whole domain -- signs, zeros of both signs, ties, large magnitudes, probabilities of exactly 0
and 1 -- because a value computed on the side from the first call's input (the signs of
``binary_cross_entropy_with_logits``, a ``where`` mask, a loss's weights) replays the first
call's answer on the others.  A value that depends on an input is recorded or guarded, never a
constant: each replayed result is compared with eager mode on the same inputs (value and
gradients, to 1e-12) and with PyTorch.
"""
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tapegrad as tg

torch = pytest.importorskip("torch", reason="PyTorch is the oracle of these tests")

DRAWS = 3   # recorded on the first, replayed on the others

# values where functions change behaviour: zeros of both signs, ties (repeats), the kinks of
# relu/abs at 0, saturation of exp/sigmoid, both sides of sign()
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 30.0, -30.0, 800.0, -800.0, 1e-300]
REALS = st.one_of(st.sampled_from(EDGES),
                  st.floats(-50.0, 50.0, allow_nan=False, allow_subnormal=False))
PROBS = st.one_of(st.sampled_from([0.0, 1.0, 0.5, 1e-13, 1.0 - 1e-13, 0.25]),
                  st.floats(0.0, 1.0, allow_nan=False, allow_subnormal=False))
WEIGHTS = st.one_of(st.sampled_from([0.0, 1.0, 0.5, 2.0]), st.floats(0.1, 3.0))

# kind: "real", "prob", "weight" (float arrays), "label" (int class indices < C), "ignored"
# (class indices or -1)
Arg = namedtuple("Arg", "shape kind grad")
N, C = 4, 3


class Case(namedtuple("Case", "name fn args replays torch_grads")):
    """``fn(lib, *tensors)`` for lib = tapegrad or torch; ``replays``: whether later draws
    replay (False: a guard may record again, as for a mask read by Python);
    ``torch_grads``: a filter of the argument positions whose gradients PyTorch is asked."""


def F(lib):
    return lib.nn.functional


def _ce(lib, x, t, **kw):
    return F(lib).cross_entropy(x, t, **kw)


CASES = [
    Case("linear", lambda lib, x, w, b: F(lib).linear(x, w, b),
         [Arg((N, C), "real", True), Arg((2, C), "real", True), Arg((2,), "real", True)],
         True, None),
    Case("relu", lambda lib, x: F(lib).relu(x), [Arg((N, C), "real", True)], True, None),
    Case("tanh", lambda lib, x: F(lib).tanh(x), [Arg((N, C), "real", True)], True, None),
    Case("sigmoid", lambda lib, x: F(lib).sigmoid(x), [Arg((N, C), "real", True)], True, None),
    Case("softmax", lambda lib, x: F(lib).softmax(x, dim=1), [Arg((N, C), "real", True)],
         True, None),
    Case("log_softmax", lambda lib, x: F(lib).log_softmax(x, dim=0),
         [Arg((N, C), "real", True)], True, None),
    Case("dropout-eval", lambda lib, x: F(lib).dropout(x, 0.3, training=False),
         [Arg((N, C), "real", True)], True, None),
    *[Case(f"mse_loss-{r}", lambda lib, x, y, r=r: F(lib).mse_loss(x, y, reduction=r),
           [Arg((N, C), "real", True), Arg((N, C), "real", True)], True, None)
      for r in ("mean", "sum", "none")],
    *[Case(f"l1_loss-{r}", lambda lib, x, y, r=r: F(lib).l1_loss(x, y, reduction=r),
           [Arg((N, C), "real", True), Arg((N, C), "real", False)], True, None)
      for r in ("mean", "sum", "none")],
    *[Case(f"nll_loss-{r}", lambda lib, x, t, w, r=r: F(lib).nll_loss(
        x, t, weight=w, ignore_index=-1, reduction=r),
        [Arg((N, C), "real", True), Arg((N,), "ignored", False), Arg((C,), "weight", False)],
        True, None) for r in ("mean", "sum", "none")],
    *[Case(f"cross_entropy-{r}", lambda lib, x, t, r=r: _ce(lib, x, t, reduction=r),
           [Arg((N, C), "real", True), Arg((N,), "label", False)], True, None)
      for r in ("mean", "sum", "none")],
    Case("cross_entropy-weight", lambda lib, x, t, w: _ce(lib, x, t, weight=w),
         [Arg((N, C), "real", True), Arg((N,), "label", False), Arg((C,), "weight", False)],
         True, None),
    Case("cross_entropy-weight-ignore", lambda lib, x, t, w: _ce(
        lib, x, t, weight=w, ignore_index=1, reduction="none"),
        [Arg((N, C), "real", True), Arg((N,), "label", False), Arg((C,), "weight", False)],
        True, None),
    Case("cross_entropy-2d", lambda lib, x, t: _ce(lib, x, t),
         [Arg((2, C, 2), "real", True), Arg((2, 2), "label", False)], True, None),
    Case("cross_entropy-probabilities", lambda lib, x, p, w: _ce(lib, x, p, weight=w),
         [Arg((N, C), "real", True), Arg((N, C), "prob", True), Arg((C,), "weight", True)],
         True, None),
    *[Case(f"binary_cross_entropy-{r}", lambda lib, x, t, w, r=r: F(lib).binary_cross_entropy(
        x, t, weight=w, reduction=r),
        [Arg((N, C), "prob", True), Arg((N, C), "prob", True), Arg((C,), "weight", False)],
        True, "bce") for r in ("mean", "sum", "none")],
    *[Case(f"bce_with_logits-{r}", lambda lib, x, t, w, r=r:
           F(lib).binary_cross_entropy_with_logits(x, t, weight=w, reduction=r),
           [Arg((N, C), "real", True), Arg((N, C), "prob", True), Arg((C,), "weight", False)],
           True, None) for r in ("mean", "sum", "none")],
    Case("bce_with_logits-pos_weight", lambda lib, x, t, p:
         F(lib).binary_cross_entropy_with_logits(x, t, pos_weight=p),
         [Arg((N, C), "real", True), Arg((N, C), "prob", True), Arg((C,), "weight", False)],
         True, None),
    # the where forms
    Case("where(x > 0, 1, -1) * x", lambda lib, x: lib.where(x > 0, 1.0, -1.0) * x,
         [Arg((N, C), "real", True)], True, None),
    Case("where(cond, a, b), branches without grad",
         lambda lib, x, y: lib.where(x > y, lib.full((N, C), 2.0), lib.zeros(C)) * x,
         [Arg((N, C), "real", True), Arg((C,), "real", False)], True, None),
    Case("where(cond, a, b), branches that are arguments without grad",
         lambda lib, x, a, b: lib.where(x > a, a, b) * x,
         [Arg((N, C), "real", True), Arg((N, C), "real", False), Arg((C,), "real", False)],
         True, None),
    # (PyTorch compares with tensors only)
    Case("where(x > array, x, 0)", lambda lib, x: lib.where(
        x > (np.array([0.0, 1.0, -1.0]) if lib is tg else lib.tensor([0.0, 1.0, -1.0])),
        x, 0.0), [Arg((N, C), "real", True)], True, None),
    Case("where(cond, x, y)", lambda lib, x, y: lib.where(x < y, x * y, y - x),
         [Arg((N, C), "real", True), Arg((C,), "real", True)], True, None),
    Case("where(cond) indices", lambda lib, x: x[lib.where(x > 0.5)] * 2.0,
         [Arg((N, C), "real", True)], False, None),
    Case("where(~cond, x, 0)", lambda lib, x: lib.where(~(x > 0), x, 0.0),
         [Arg((N, C), "real", True)], True, None),
]


def _elements(kind):
    return {"real": REALS, "prob": PROBS, "weight": WEIGHTS}[kind]


@st.composite
def draws(draw, case):
    """DRAWS sets of arrays for ``case``'s arguments (same shapes, new values)."""
    sets = []
    for _ in range(DRAWS):
        arrays = []
        for a in case.args:
            if a.kind in ("label", "ignored"):
                low = -1 if a.kind == "ignored" else 0
                arrays.append(draw(hnp.arrays(np.int64, a.shape, elements=st.integers(low, C - 1))))
            else:
                arrays.append(draw(hnp.arrays(np.float64, a.shape, elements=_elements(a.kind))))
        sets.append(arrays)
    return sets


def _ours(case, arrays):
    return [tg.tensor(v, requires_grad=a.grad) for v, a in zip(arrays, case.args)]


def _theirs(case, arrays):
    return [torch.tensor(v, requires_grad=a.grad) for v, a in zip(arrays, case.args)]


def _backward(out, inputs, cot):
    for t in inputs:
        t.grad = None
    out.backward(tg.tensor(cot) if isinstance(out, tg.Tensor) else torch.tensor(cot))
    return [None if t.grad is None else
            (t.grad._value if isinstance(t, tg.Tensor) else t.grad.numpy()).copy()
            for t in inputs]


def _close(got, want, what, rtol=1e-12):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    scale = max(1.0, float(np.max(np.abs(want[np.isfinite(want)]), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, equal_nan=True,
                               err_msg=what)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@given(data=st.data())
def test_compiled_library_function_equals_eager_and_pytorch(case, data):
    sets = data.draw(draws(case), label="inputs")
    seed = data.draw(st.integers(0, 2 ** 32 - 1), label="cotangent seed")
    fn = lambda *ts: case.fn(tg, *ts)   # noqa: E731
    compiled = tg.compile(fn)
    for k, arrays in enumerate(sets):
        try:
            want = fn(*_ours(case, arrays))
        except Exception as exc:  # noqa: BLE001 - refused alike
            with pytest.raises(type(exc)):
                compiled(*_ours(case, arrays))
            continue
        ins = _ours(case, arrays)
        got = compiled(*ins)
        _close(got._value, want._value, f"draw {k}: value")
        assert got.requires_grad == want.requires_grad
        theirs_in = _theirs(case, arrays)
        theirs = case.fn(torch, *theirs_in)
        _close(got._value, theirs.detach().numpy(), f"draw {k}: value against PyTorch",
               rtol=1e-10)
        if not want.requires_grad:
            continue
        cot = np.random.default_rng(seed + k).standard_normal(want._value.shape)
        eager_in = _ours(case, arrays)
        want = fn(*eager_in)
        got_grads = _backward(got, ins, cot)
        want_grads = _backward(want, eager_in, cot)
        for i, (g, w) in enumerate(zip(got_grads, want_grads)):
            if w is None:
                assert g is None, f"draw {k}: gradient {i} where eager mode has none"
            else:
                _close(g, w, f"draw {k}: gradient {i}")
        # (binary_cross_entropy near 0 and 1 too: its gradient is PyTorch's kernel's)
        torch_grads = _backward(theirs, theirs_in, cot)
        for i, (g, w) in enumerate(zip(got_grads, torch_grads)):
            if w is not None:
                _close(g, w, f"draw {k}: gradient {i} against PyTorch", rtol=1e-9)
    if case.replays:
        st_ = compiled.stats
        assert st_.records + st_.replays + st_.eager == st_.calls
        # integer labels are arguments like the others (issue 16): new ones replay too
        assert st_.replays >= 1 or st_.calls <= 1, st_.as_dict()


# ---------------------------------------------------------------------------------------------
# vmap: one tape over a batch of samples
# ---------------------------------------------------------------------------------------------
# (a where(cond) of another sample has another shape: not a batch)
FLOAT_CASES = [c for c in CASES if c.replays
               and all(a.kind not in ("label", "ignored") for a in c.args)]


@pytest.mark.parametrize("case", FLOAT_CASES, ids=lambda c: c.name)
@given(data=st.data())
@settings(max_examples=15)
def test_vmapped_library_function_equals_eager_per_sample(case, data):
    sets = data.draw(draws(case), label="samples")
    batched = [tg.tensor(np.stack([s[i] for s in sets])) for i in range(len(case.args))]

    def fn(*ts):
        out = case.fn(tg, *ts)
        return out.sum() if out.ndim else out

    try:
        wants = [fn(*[tg.tensor(v) for v in s]) for s in sets]
    except Exception as exc:  # noqa: BLE001
        with pytest.raises(type(exc)):
            tg.vmap(fn)(*batched)
        return
    got = tg.vmap(fn)(*batched)
    for k, want in enumerate(wants):
        _close(got._value[k], want._value, f"sample {k}")
    values, grads = tg.per_sample_value_and_grad(fn, argnums=0)(*batched)
    for k, arrays in enumerate(sets):
        x = tg.tensor(arrays[0], requires_grad=True)
        want = fn(x, *[tg.tensor(v) for v in arrays[1:]])
        want.backward()
        _close(values._value[k], want._value, f"sample {k}: value")
        _close(grads._value[k], x.grad._value, f"sample {k}: gradient")


def test_dropout_in_training_mode_runs_eagerly():
    compiled = tg.compile(lambda x: F(tg).dropout(x, 0.5, training=True).sum())
    for _ in range(2):
        compiled(tg.ones(10, requires_grad=True))
    assert compiled.stats.replays == 0
    assert any("random" in why for why, _ in compiled.stats.eager_reasons)


WEIGHTED = {
    "nll_loss": lambda lib, x, w: F(lib).nll_loss(x, lib.tensor([0, 1, 2, 0]), weight=w),
    "cross_entropy": lambda lib, x, w: F(lib).cross_entropy(x, lib.tensor([0, 1, 2, 9]),
                                                            weight=w),
    "binary_cross_entropy": lambda lib, x, w: F(lib).binary_cross_entropy(
        x.sigmoid(), lib.full((N, C), 0.25), weight=w),
    "bce_with_logits": lambda lib, x, w: F(lib).binary_cross_entropy_with_logits(
        x, lib.full((N, C), 0.5), weight=w),
    "bce_with_logits-pos_weight": lambda lib, x, w: F(lib).binary_cross_entropy_with_logits(
        x, lib.full((N, C), 0.5), pos_weight=w),
}


@pytest.mark.parametrize("name", list(WEIGHTED))
@pytest.mark.parametrize("grad_mode", [True, False])
def test_a_weight_that_requires_grad_is_refused_as_in_pytorch(name, grad_mode):
    x = np.linspace(-1.0, 1.0, N * C).reshape(N, C)
    outcomes = []
    for lib in (tg, torch):
        with lib.set_grad_enabled(grad_mode):
            try:
                WEIGHTED[name](lib, lib.tensor(x, requires_grad=True),
                               lib.tensor([0.5, 1.0, 2.0], requires_grad=True))
                outcomes.append(None)
            except Exception as exc:  # noqa: BLE001 - compared with PyTorch's
                outcomes.append((type(exc), str(exc)))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("x, t", [([0.5, 1.5], [1.0, 0.0]), ([0.5, np.nan], [1.0, 0.0]),
                                  ([-0.25, 0.5], [1.0, 0.0]), ([0.5, 0.5], [1.0, 2.0]),
                                  ([0.5, 0.5], [np.nan, 0.0])])
def test_binary_cross_entropy_refuses_values_outside_0_1_compiled_too(x, t):
    with pytest.raises(RuntimeError) as theirs:
        F(torch).binary_cross_entropy(torch.tensor(x), torch.tensor(t))
    compiled = tg.compile(lambda x, t: F(tg).binary_cross_entropy(x, t))
    compiled(tg.tensor([0.5, 0.25], requires_grad=True), tg.tensor([1.0, 0.0]))
    for fn in (lambda x, t: F(tg).binary_cross_entropy(x, t), compiled):
        with pytest.raises(RuntimeError) as ours:
            fn(tg.tensor(x, requires_grad=True), tg.tensor(t))
        assert str(ours.value) == str(theirs.value)
