"""Generated backward sweeps for eager tapes that come back (hot_tapes.py).

An eager tape swept often enough, record for record the same, is swept by the loops codegen
writes for replayed tapes of vectors.  Those loops are proven against the interpreter in
test_codegen.py; here the same eager program, step after step, must give the interpreter's
gradients bit for bit (up to the sign of a zero) with the program in use, and whatever the
program does not cover -- hooks, retained gradients, ``inputs=``, changed scalars, small
tapes -- must still be swept right.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
from tapegrad import hot_tapes
from tapegrad.tape import state
from test_codegen import (_LAYER_STEPS, _build, _layered, _poison_gradient_arena, _same_bits,
                          _vector_programs)


@pytest.fixture(autouse=True)
def _fresh_programs(monkeypatch):
    # (built on the third sweep whatever the size: the tests' tapes are small)
    monkeypatch.setattr(hot_tapes, "_WORK", 0)
    hot_tapes.forget()
    yield
    hot_tapes.forget()
    hot_tapes.ENABLED = True


_FIRST_TAPE = 1 << 17   # values


def _steps(step, n_steps, enabled):
    """Run ``step`` (returning [loss, leaves...]) n_steps times with generated backwards
    allowed or not; each step's loss and leaf gradients."""
    hot_tapes.forget()
    hot_tapes.ENABLED = enabled
    before = hot_tapes.generated
    # both runs from the same start, on a first tape large enough for every step here:
    # started small, the first steps' graphs span tapes while the tapes grow to fit them
    # (a whole step's values, which the next tape is sized for, count only the tapes a
    # backward swept), and the program, made after three sweeps of one tape, may come
    # only after the last step
    state.tape, state.last_used = None, _FIRST_TAPE
    out = []
    for i in range(n_steps):
        loss, *leaves = step(i)
        _poison_gradient_arena()
        loss.backward()
        out.append([loss.item()] + [None if t.grad is None else t.grad.numpy().copy()
                                    for t in leaves])
    hot_tapes.ENABLED = True
    return out, hot_tapes.generated - before


def _same_steps(got, want):
    assert len(got) == len(want)
    for g_step, w_step in zip(got, want):
        for g, w in zip(g_step, w_step):
            assert (g is None) == (w is None)
            if g is not None:
                _same_bits(g, w)


def _cubic_step(n, seed=0, vary_data=False):
    rng = np.random.default_rng(seed)
    xv = np.linspace(-np.pi, np.pi, n)
    params = [tg.tensor(v, requires_grad=True) for v in rng.standard_normal(4)]

    def step(i):
        x = tg.tensor(xv + (0.01 * i if vary_data else 0.0))
        y = tg.sin(x)
        a, b, c, d = params
        for p in params:
            p.grad = None
        loss = ((a + b * x + c * x ** 2 + d * x ** 3) - y).pow(2).sum()
        return [loss] + params
    return step


@pytest.mark.parametrize("n", [300, 5000])
def test_the_eager_cubic_fit_gets_a_generated_backward_with_the_interpreters_bits(n):
    got, built = _steps(_cubic_step(n), 6, True)
    want, none = _steps(_cubic_step(n), 6, False)
    _same_steps(got, want)
    assert built == 1 and none == 0


def test_new_data_in_the_same_records_is_read_not_baked_in():
    # the data changes every step, the records do not: one program, reading the values
    got, built = _steps(_cubic_step(2000, vary_data=True), 6, True)
    want, _ = _steps(_cubic_step(2000, vary_data=True), 6, False)
    _same_steps(got, want)
    assert built == 1
    assert len({g[1].tobytes() for g in got}) == 6   # every step's gradient its own


def test_a_scalar_that_changes_makes_another_tape_not_a_stale_program():
    xv = np.linspace(-1.0, 1.0, 2000)
    w = tg.tensor(0.3, requires_grad=True)

    def step(i):
        w.grad = None
        # the scalar is a literal in generated code: a new one is a new key
        return [(tg.tensor(xv) * w * (1.0 + i)).pow(2).sum(), w]
    got, built = _steps(step, 6, True)
    want, _ = _steps(step, 6, False)
    _same_steps(got, want)
    assert built == 0
    expected = [2.0 * 0.3 * (1.0 + i) ** 2 * float((xv * xv).sum()) for i in range(6)]
    np.testing.assert_allclose([g[1] for g in got], expected, rtol=1e-12)


def test_tanh_and_exp_of_many_values():
    xv = np.random.default_rng(4).standard_normal(20000)

    def step(i):
        x = tg.tensor(xv * (1.0 + 0.1 * i), requires_grad=True)
        return [(tg.tanh(x) * x + tg.exp(-x * x)).sum(), x]
    got, built = _steps(step, 5, True)
    want, _ = _steps(step, 5, False)
    _same_steps(got, want)
    assert built == 1
    x = xv * 1.4
    t = np.tanh(x)
    np.testing.assert_allclose(got[4][1], (1 - t * t) * x + t - 2 * x * np.exp(-x * x),
                               rtol=1e-12, atol=1e-15)


def test_small_tapes_stay_with_the_interpreter():
    got, built = _steps(_cubic_step(20), 6, True)
    want, _ = _steps(_cubic_step(20), 6, False)
    _same_steps(got, want)
    assert built == 0


def test_hooks_retained_gradients_and_inputs_are_swept_by_the_interpreter():
    step = _cubic_step(2000)
    before = hot_tapes.generated
    for _ in range(4):          # hot: the program exists
        loss, *_ = step(0)
        loss.backward()
    assert hot_tapes.generated == before + 1
    want, _ = _steps(_cubic_step(2000), 1, False)
    loss_want, *params_want = want[0]

    # a hook on a parameter sees and may change its gradient
    loss, a, b, c, d = step(0)
    seen = []
    handle = b.register_hook(lambda g: seen.append(g.item()) or g * 2.0)
    loss.backward()
    handle.remove()
    assert seen == [params_want[1].item()]
    assert b.grad.item() == 2.0 * params_want[1].item()

    # a retained non-leaf gradient
    _, a, b, c, d = step(0)
    x = tg.tensor(np.linspace(-np.pi, np.pi, 2000))
    pred = a + b * x + c * x ** 2 + d * x ** 3
    pred.retain_grad()
    loss = (pred - tg.sin(x)).pow(2).sum()
    loss.backward()
    np.testing.assert_allclose(pred.grad.numpy(), 2.0 * (pred.detach().numpy() - np.sin(x.numpy())),
                               rtol=1e-12)
    _same_bits(a.grad.numpy(), params_want[0])

    # inputs=
    loss, a, b, c, d = step(0)
    loss.backward(inputs=[c])
    assert a.grad is None
    _same_bits(c.grad.numpy(), params_want[2])


def test_a_gradient_given_for_a_vector_output():
    xv = np.linspace(-2.0, 2.0, 3000)
    gv = np.cos(xv)

    def step(i):
        x = tg.tensor(xv, requires_grad=True)
        out = x * x * 0.5 + x
        loss = out   # backward(gradient=g)
        loss.backward(tg.tensor(gv))
        return x.grad.numpy().copy()
    hot_tapes.forget()
    got = [step(i) for i in range(5)]
    hot_tapes.ENABLED = False
    want = [step(i) for i in range(5)]
    for g, w in zip(got, want):
        _same_bits(g, w)
    np.testing.assert_allclose(got[-1], (xv + 1.0) * gv, rtol=1e-12)


@given(steps=_vector_programs())
def test_random_eager_programs_over_vectors(steps):
    program = _build(steps)
    rng = np.random.default_rng(len(steps))
    xv, wv = rng.uniform(-1.5, 1.5, 1500), rng.uniform(-1.5, 1.5, 1500)

    def step(i):
        xs = [tg.tensor(xv, requires_grad=True), tg.tensor(wv),
              tg.tensor(0.7, requires_grad=True), tg.tensor(-0.4, requires_grad=True)]
        return [program(*xs), xs[0], xs[2], xs[3]]
    got, built = _steps(step, 4, True)
    want, _ = _steps(step, 4, False)
    _same_steps(got, want)
    assert built == 1, hot_tapes.why_not()


def test_two_losses_backward_together():
    xv = np.linspace(-2.0, 2.0, 3000)
    w = tg.tensor(0.5, requires_grad=True)

    def step(i):
        w.grad = None
        x = tg.tensor(xv, requires_grad=True)
        u = x * w
        l1, l2 = (u * u).sum(), tg.tanh(u).mean()
        tg.autograd.backward([l1, l2])
        return [x.grad.numpy().copy(), w.grad.numpy().copy()]
    hot_tapes.forget()
    before = hot_tapes.generated
    got = [step(i) for i in range(5)]
    assert hot_tapes.generated == before + 1
    hot_tapes.ENABLED = False
    want = [step(i) for i in range(5)]
    for g, w_ in zip(got, want):
        _same_bits(g[0], w_[0])
        _same_bits(g[1], w_[1])
    u = xv * 0.5
    np.testing.assert_allclose(got[-1][0], 2 * u * 0.5 + (1 - np.tanh(u) ** 2) * 0.5 / 3000,
                               rtol=1e-12)


# --- a constant read by several ops is copied onto the tape once (functional._ref) -----------
def _const_records(t):
    from tapegrad import ops as K
    return [r for r in range(len(t._tape)) if t._tape.op[r] == K.CONST]


def test_a_constant_read_twice_is_copied_once_and_again_after_a_change():
    w = tg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    x = tg.tensor([1.0, 2.0, 3.0])
    out = (w * x).sum() + (w * w * x).sum()
    assert len(_const_records(out)) == 1
    out.backward()
    np.testing.assert_array_equal(w.grad.numpy(), x.numpy() + 2 * w.detach().numpy() * x.numpy())

    # changed in place between two reads: the second reads the new values (the gradient
    # of the second alone; PyTorch refuses the first's backward after that change)
    u = (w * x).sum()
    with tg.no_grad():
        x.mul_(10.0)
    v = (w * x).sum()
    assert len(_const_records(v)) == 2 and u._tape is v._tape
    (g,) = tg.autograd.grad(v, w)
    np.testing.assert_array_equal(g.numpy(), [10.0, 20.0, 30.0])

    # changed through the memory NumPy was handed: the same
    x = tg.tensor([1.0, 2.0, 3.0])
    u = (w * x).sum()
    x.numpy()[:] = [4.0, 5.0, 6.0]
    v = (w * x).sum()
    assert len(_const_records(v)) == 2 and u._tape is v._tape
    (g,) = tg.autograd.grad(v, w)
    np.testing.assert_array_equal(g.numpy(), [4.0, 5.0, 6.0])


# The in-place elementwise ops codegen's own tests (FORMS) do not write: an eager loop meets
# them (``zero_``, ``fill_``, ``copy_``, ``inplace=True`` activations) and generates them.
_F = tg.nn.functional
IN_PLACE_PROGRAMS = {
    "zero_": lambda x, y: (x * 2).zero_() + x * y,
    "fill_": lambda x, y: (x * 2).fill_(0.5) * x + y * x,
    "fill_ tensor": lambda x, y: (x * 2).fill_(tg.tensor(0.25)) * x + y * x,
    "copy_": lambda x, y: (x * 2).copy_(y * x) * x,
    "elu inplace": lambda x, y: _F.elu(x * 3.0, inplace=True) * y,
    "celu inplace": lambda x, y: _F.celu(x * 3.0, alpha=0.7, inplace=True) * y,
    "leaky_relu inplace": lambda x, y: _F.leaky_relu(x * 3.0, 0.1, inplace=True) * y,
}


@pytest.mark.parametrize("name", sorted(IN_PLACE_PROGRAMS))
def test_in_place_elementwise_ops_in_a_hot_eager_tape(name):
    program = IN_PLACE_PROGRAMS[name]
    xv = np.linspace(-1.5, 1.5, 3000)
    yv = np.cos(xv)

    def step(i):
        x, y = tg.tensor(xv, requires_grad=True), tg.tensor(yv, requires_grad=True)
        return [program(x, y).sum(), x, y]
    got, built = _steps(step, 5, True)
    want, _ = _steps(step, 5, False)
    _same_steps(got, want)
    assert built == 1, hot_tapes.why_not()


# --- matrix products and the other records generated code calls (codegen._CALLED) ---------
def _mlp_training(seed):
    """An nn.Module training loop: Linear layers (matrix products, bias broadcasts over
    rows), tanh, MSE, SGD with momentum: the parameters move every step, so a wrong
    gradient at one step shows in all later ones."""
    tg.manual_seed(seed)
    model = tg.nn.Sequential(tg.nn.Linear(8, 32), tg.nn.Tanh(), tg.nn.Linear(32, 32),
                             tg.nn.Tanh(), tg.nn.Linear(32, 1))
    opt = tg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(seed)
    X, Y = tg.tensor(rng.standard_normal((64, 8))), tg.tensor(rng.standard_normal((64, 1)))
    params = list(model.parameters())

    def step(i):
        opt.step() if i else None    # (the previous step's gradients, then cleared)
        opt.zero_grad()
        return [tg.nn.functional.mse_loss(model(X), Y)] + params
    return step


def test_an_eager_training_loop_with_matrix_products_gets_a_generated_backward():
    got, built = _steps(_mlp_training(0), 8, True)
    want, none = _steps(_mlp_training(0), 8, False)
    _same_steps(got, want)
    assert built == 1 and none == 0, hot_tapes.why_not()


@settings(max_examples=10)   # (each example compiles a program: one to three seconds)
@given(steps=st.lists(st.sampled_from(_LAYER_STEPS), min_size=1, max_size=6))
def test_random_eager_layered_programs(steps):
    program = _layered(steps)
    rng = np.random.default_rng(len(steps))
    xv = rng.uniform(-1.0, 1.0, (200, 6))
    wv, bv = rng.uniform(-0.5, 0.5, (6, 6)), rng.uniform(-0.5, 0.5, 6)

    def step(i):
        xs = [tg.tensor(xv, requires_grad=True), tg.tensor(wv, requires_grad=True),
              tg.tensor(bv, requires_grad=True), tg.tensor(0.8, requires_grad=True)]
        return [program(*xs)] + xs
    got, built = _steps(step, 4, True)
    want, _ = _steps(step, 4, False)
    _same_steps(got, want)
    assert built == 1, hot_tapes.why_not()


def test_a_smaller_tape_is_built_after_more_sweeps(monkeypatch):
    # the sweeps before the build: _WORK values swept in all, and at least _AFTER
    n = 3000
    step = _cubic_step(n)
    state.tape, state.last_used = None, _FIRST_TAPE   # (a step's graph on one tape)
    loss, *_ = step(0)
    values = loss._tape.top
    assert loss._tape is step(0)[0]._tape        # (both on the first tape)
    monkeypatch.setattr(hot_tapes, "_WORK", 10 * values)
    before = hot_tapes.generated
    built_at = None
    for i in range(14):
        loss, *_ = step(0)
        loss.backward()
        if built_at is None and hot_tapes.generated > before:
            built_at = i
    # (the first step's tape above was not swept; the counts come from this loop's tapes,
    # which may still grow during the first steps)
    assert built_at is not None and built_at >= 10
    monkeypatch.setattr(hot_tapes, "_WORK", 10 ** 12)
    hot_tapes.forget()
    for i in range(6):
        loss, *_ = step(0)
        loss.backward()
    assert hot_tapes.generated == before + 1
