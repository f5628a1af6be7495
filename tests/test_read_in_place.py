"""A replay reads large arguments that only matrix products use where they are, instead of
copying them into its arena (``replay._read_in_place``); anything else that reads the arena
gets them copied in first.  So does eager mode with large constants of matrix products and
elementwise ops.  The results must be those of copies in every case."""
import contextlib

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
from tapegrad import tape as tape_module
from tapegrad.tape import state


@contextlib.contextmanager
def _in_place_from(n):
    """Read arguments of at least n values in place (the default keeps small ones copied)."""
    before = tape_module.IN_PLACE_MIN
    tape_module.IN_PLACE_MIN = n
    try:
        yield
    finally:
        tape_module.IN_PLACE_MIN = before


def _layer(x, w, b, v):
    return ((x @ w + b).relu() @ v).sum()


def _two_layers(x, w, b, v):
    # w is also read by its transpose
    h = (x @ w).tanh()
    return ((h @ w.T) @ w @ v).mean()


def _batched(x, w, b, v):
    # x is read by the stack; (2, m, k) @ (k, k) is one (2m, k) @ (k, k) product reading w
    return ((tg.stack([x, 2.0 * x]) @ w + b).sin() @ v).sum()


def _shared(x, w, b, v):
    # w is read by a product and by a multiplication: it is copied, x and v are read in place
    return ((x @ w) @ v).sum() + (w * w).sum() * b.sum()


PROGRAMS = [_layer, _two_layers, _batched, _shared]
# how many of x, w, b, v each reads in place: those that only matrix products read
READ_IN_PLACE = {_layer: 3, _two_layers: 2, _batched: 2, _shared: 2}


def _eager(program, values, x_grad):
    leaves = [tg.tensor(v, requires_grad=x_grad or i > 0) for i, v in enumerate(values)]
    loss = program(*leaves)
    loss.backward()
    return loss.item(), [t.grad.numpy() if t.grad is not None else None for t in leaves]


@given(program=st.sampled_from(PROGRAMS), m=st.integers(1, 5), k=st.integers(1, 5),
       x_grad=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_replay_reading_arguments_in_place_equals_eager(program, m, k, x_grad, seed):
    """New values every call, the gradient arena full of nan, x with and without a
    gradient: the replay's loss and gradients are eager mode's, to the last bits."""
    rng = np.random.default_rng(seed)
    shapes = ((m, k), (k, k), (k,), (k, 2))
    with _in_place_from(1):
        compiled = tg.compile(program)
        for call in range(3):
            values = [rng.standard_normal(s) for s in shapes]
            want_loss, want_grads = _eager(program, values, x_grad)
            args = [tg.tensor(v, requires_grad=x_grad or i > 0) for i, v in enumerate(values)]
            loss = compiled(*args)
            state.grads = np.full(max(1 << 12, state.grads.size), np.nan)
            loss.backward()
            np.testing.assert_allclose(loss.item(), want_loss, rtol=1e-12, atol=1e-12)
            for a, g in zip(args, want_grads):
                if g is None:
                    assert a.grad is None
                else:
                    np.testing.assert_allclose(a.grad.numpy(), g, rtol=1e-12, atol=1e-12)
        variant = compiled.variants()[0]
        assert len(variant.read_in_place) == READ_IN_PLACE[program]


def _mlp(x, w1, w2):
    return ((x @ w1).relu() @ w2).logsumexp(dim=1).mean()


def _mlp_values(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((128, 256)), rng.standard_normal((256, 128)) / 16,
            rng.standard_normal((128, 10)) / 11)


def _mlp_args(values):
    x, w1, w2 = values
    return tg.tensor(x), tg.tensor(w1, requires_grad=True), tg.tensor(w2, requires_grad=True)


def test_large_matrix_operands_are_read_in_place_by_default():
    compiled = tg.compile(_mlp)
    values = _mlp_values()
    for _ in range(2):
        args = _mlp_args(values)
        loss = compiled(*args)
        loss.backward()
    variant = compiled.variants()[0]
    # x (32768 values) and w1 (32768); w2 (1280) is below the size worth it and is copied
    assert sorted(variant.cols[4][r] for r in variant.read_in_place) == [32768, 32768]
    eager = _mlp_args(values)
    _mlp(*eager).backward()
    # (eager products are NumPy's, replayed ones the kernels' BLAS: equal to rounding)
    np.testing.assert_allclose(loss.item(), _mlp(*eager).item(), rtol=1e-12)
    for a, e in zip(args[1:], eager[1:]):
        np.testing.assert_allclose(a.grad.numpy(), e.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_a_non_contiguous_argument_is_copied_and_the_next_call_reads_in_place_again():
    """The same signature with a transposed view: copied into the arena.  The instance the
    calls share must not keep the address of an earlier call's array."""
    compiled = tg.compile(_mlp)
    values = _mlp_values(1)
    x = values[0]
    transposed = tg.tensor(np.ascontiguousarray(x.T)).T   # x's values, not contiguous
    for arg in (tg.tensor(x), transposed, tg.tensor(2.0 * x), transposed):
        args = (arg,) + _mlp_args(values)[1:]
        x = arg.numpy()
        loss = compiled(*args)
        loss.backward()
        eager = (tg.tensor(x),) + _mlp_args(values)[1:]
        want = _mlp(*eager)
        want.backward()
        np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-12)
        np.testing.assert_allclose(args[1].grad.numpy(), eager[1].grad.numpy(), rtol=1e-12,
                                   atol=1e-15)
        del loss, args
    assert compiled.stats.records == 1


def test_double_backward_through_a_replay_that_read_in_place():
    """create_graph reads the arena from Python: the arguments are copied in for it (the
    recording's values stay in the arena otherwise, so the replay uses other values)."""
    compiled = tg.compile(_mlp)
    compiled(*_mlp_args(_mlp_values(2)))
    values = _mlp_values(4)
    for run in (_mlp, compiled, compiled):
        args = _mlp_args(values)
        g1, = tg.autograd.grad(run(*args), args[1], create_graph=True)
        (g1 * g1).sum().backward()
        if run is _mlp:
            want = args[2].grad.numpy().copy()
        else:
            np.testing.assert_allclose(args[2].grad.numpy(), want, rtol=1e-12, atol=1e-15)
    assert compiled.stats.replays == 2


def test_an_argument_changed_in_place_before_backward_is_refused_as_in_eager_mode():
    values = _mlp_values(3)
    compiled = tg.compile(_mlp)
    compiled(*_mlp_args(values)).backward()
    messages = []
    for run in (_mlp, compiled):
        args = _mlp_args(values)
        loss = run(*args)
        with tg.no_grad():
            args[2].mul_(2.0)   # (w2: read for the gradient of relu(x @ w1))
        with pytest.raises(RuntimeError) as err:
            loss.backward()
        messages.append(str(err.value).split(" It was modified")[0])
        # w1 is read by no gradient (x needs none), so PyTorch saved it not: no error
        args = _mlp_args(values)
        loss = run(*args)
        with tg.no_grad():
            args[1].mul_(2.0)
        loss.backward()
        assert args[2].grad is not None
    assert messages[0] == messages[1]
    assert "modified by an inplace operation" in messages[0]


def test_an_argument_read_otherwise_is_copied():
    with _in_place_from(1):
        compiled = tg.compile(lambda x, w: ((x @ w).sum() + x.sum(), w))
        x, w = tg.tensor(np.ones((3, 4))), tg.tensor(np.ones((4, 2)), requires_grad=True)
        for _ in range(2):
            loss, same = compiled(x, w)
        variant = compiled.variants()[0]
        # x is read by its sum too; w, returned as the argument itself, only by the product
        assert variant.read_in_place == {variant.arg_records[1]}
        assert same is w
        assert loss.item() == 36.0
        loss.backward()
        np.testing.assert_array_equal(w.grad.numpy(), np.full((4, 2), 3.0))


# --- eager mode: a matrix product's large constant operand (Tape.read_in_place) ------------
def _eager_products(lib, X, w, s):
    """Products of constant X in each position and form, with other readers of X beside."""
    return ((X @ w).sin().sum() + (w @ X.T).sum() + (X.reshape(-1)[:3] * s).sum()
            + ((X @ w.reshape(-1, 1)) ** 2).mean() + (w.reshape(1, -1) @ X.T).sum()
            + (lib.stack([X, X]) @ w).sum() + (s * X).sum())


def _eager_run(lib, X_value, w_value, create_graph=False, program=_eager_products, s=0.5):
    """(loss, w's and s's gradients) of ``program(lib, X, w, s)`` with constant X, and how
    many records read a constant in place."""
    X = lib.tensor(X_value)
    w = lib.tensor(w_value, requires_grad=True)
    s = lib.tensor(s, requires_grad=True)
    loss = program(lib, X, w, s)
    in_place = len(loss._tape.ext_refs or ()) if lib is tg else None
    if create_graph:
        gw, = lib.autograd.grad(loss, w, create_graph=True)
        ((gw * gw).sum() * s).backward()
    else:
        loss.backward()
    return (loss.item(), w.grad.numpy().copy(), s.grad.numpy().copy()), in_place


def _assert_copy_bits_and_pytorch_values(got, want, theirs):
    """The (loss, gradients) of the run that read constants in place, ``got``, are bit for
    bit those of the run that copied them, ``want``, and PyTorch's, ``theirs``, in value."""
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).view(np.int64), np.asarray(w).view(np.int64))
    for g, t in zip(got, theirs):
        np.testing.assert_allclose(g, t, rtol=1e-10, atol=1e-12)


@given(m=st.integers(1, 6), k=st.integers(1, 5), seed=st.integers(0, 2**31 - 1),
       create_graph=st.booleans())
def test_eager_products_reading_constants_in_place_equal_copying_ones(m, k, seed, create_graph):
    """Every product's constant operand read where it is (from one value up) gives the bits
    of the copies the recorder makes otherwise, and PyTorch's values; a differentiable
    backward (which reads the arena from Python) too."""
    rng = np.random.default_rng(seed)
    X_value, w_value = rng.standard_normal((m, k)), rng.standard_normal(k)
    with _in_place_from(10**12):
        want, copied = _eager_run(tg, X_value, w_value, create_graph)
    with _in_place_from(1):
        got, in_place = _eager_run(tg, X_value, w_value, create_graph)
    # X in the first product, and stack([X, X]); once X has views (X.T), it is copied
    assert (copied, in_place) == (0, 2)
    theirs, _ = _eager_run(torch, X_value, w_value, create_graph)
    _assert_copy_bits_and_pytorch_values(got, want, theirs)


def test_a_large_eager_constant_is_read_in_place_by_default():
    """A (10^4, 16) data matrix (W8's linear fit): no copy on the tape, the same loss and
    gradient as a copy gives, step after step (a hot tape's generated backward included)."""
    rng = np.random.default_rng(5)
    X_value, y_value = rng.standard_normal((10_000, 16)), rng.standard_normal(10_000)

    def fit():
        X, y = tg.tensor(X_value), tg.tensor(y_value)
        w = tg.tensor(np.zeros(16), requires_grad=True)
        out = []
        for _ in range(8):
            loss = ((X @ w - y) ** 2).mean()
            in_place = loss._tape.ext_refs
            loss.backward()
            out.append((loss.item(), w.grad.numpy().copy(), in_place))
            with tg.no_grad():
                w -= 0.1 * w.grad
                w.grad = None
        return out

    got = fit()
    with _in_place_from(10**12):
        want = fit()
    for (gl, gg, gin), (wl, wg, win) in zip(got, want):
        assert [v.shape for _, v in gin] == [(10_000, 16)] and win is None
        assert gl == wl
        np.testing.assert_array_equal(gg.view(np.int64), wg.view(np.int64))


@pytest.mark.parametrize("change", ["mul_", "setitem", "view"])
def test_an_eager_constant_changed_in_place_before_backward_is_refused_as_pytorch_does(
        change):
    def run(lib):
        X = lib.tensor(np.arange(20_000.0).reshape(5_000, 4) / 1e4)
        w = lib.tensor(np.ones(4), requires_grad=True)
        loss = (X @ w).sum()
        if change == "mul_":
            X.mul_(2.0)
        elif change == "setitem":
            X[0, 0] = 3.0
        else:
            X[1].add_(1.0)
        loss.backward()
        return w.grad

    errors = []
    for lib in (tg, torch):
        with pytest.raises(RuntimeError) as err:
            run(lib)
        errors.append(str(err.value).replace("torch.", "tapegrad."))
    # (PyTorch's ends with a hint about anomaly detection, tapegrad's with where it was
    # changed when it knows)
    assert errors[0].split(" instead.")[0] == errors[1].split(" instead.")[0]


def test_an_eager_constant_changed_after_backward_or_given_new_data_is_not_refused():
    X = tg.tensor(np.ones((5_000, 4)))
    w = tg.tensor(np.ones(4), requires_grad=True)
    loss = (X @ w).sum()
    loss.backward(retain_graph=True)
    np.testing.assert_array_equal(w.grad.numpy(), np.full(4, 5_000.0))
    X.data = tg.tensor(np.full((5_000, 4), 2.0))   # (no version: the old values stay read)
    w.grad = None
    loss.backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full(4, 5_000.0))
    X.mul_(2.0)   # (after the last backward: nothing reads it any more)


def test_eager_constants_numpy_may_write_into_are_copied():
    """Memory NumPy holds (``from_numpy``, ``.numpy()``) changes without a version: such a
    constant is copied, as before, and the backward reads the values the forward saw."""
    array = np.ones((5_000, 4))
    for X in (tg.from_numpy(array), tg.tensor(np.ones((5_000, 4)))):
        held = X.numpy()
        w = tg.tensor(np.ones(4), requires_grad=True)
        loss = (X @ w).sum()
        assert loss._tape.ext_refs is None
        held[:] = 7.0
        loss.backward()
        np.testing.assert_array_equal(w.grad.numpy(), np.full(4, 5_000.0))


# --- eager mode: an elementwise op's large constant operand (functional._elementwise_ref) ---
def _elementwise_program(lib, c, w, s):
    """Constant c read by two-input elementwise ops in either position, beside a broadcast
    parameter s; c's derived constants (c ** 2, c.abs()) are fresh arrays, read too."""
    return ((w * c).sum() + (c / w).sum() + (w / c).sum() + (s * c).sum() + (c - w).sum()
            + lib.atan2(w, c).sum() + lib.maximum(w, c).sum() + (w ** c.abs()).sum()
            + (c ** 2 * s).sum() + lib.hypot(c, w).sum())


# the records that read constants in place: c (read by eight ops, one record for all),
# c ** 2 and c.abs()
ELEMENTWISE_IN_PLACE = 3


def _elementwise_run(lib, c_value, w_value, create_graph=False):
    return _eager_run(lib, c_value, w_value, create_graph, _elementwise_program, 0.75)


@given(n=st.integers(2, 40), seed=st.integers(0, 2**31 - 1), create_graph=st.booleans())
def test_elementwise_ops_reading_constants_in_place_equal_copying_ones(n, seed, create_graph):
    """Every elementwise op's constant operand read where it is gives the bits of the copy
    the recorder makes otherwise, and PyTorch's values; a differentiable backward (which
    fills the arena first) too."""
    rng = np.random.default_rng(seed)
    c_value = rng.uniform(0.5, 2.0, n) * rng.choice([-1.0, 1.0], n)
    w_value = rng.uniform(0.5, 2.0, n)
    with _in_place_from(10**12):
        want, copied = _elementwise_run(tg, c_value, w_value, create_graph)
    with _in_place_from(2):
        got, in_place = _elementwise_run(tg, c_value, w_value, create_graph)
    assert (copied, in_place) == (0, ELEMENTWISE_IN_PLACE)
    theirs, _ = _elementwise_run(torch, c_value, w_value, create_graph)
    _assert_copy_bits_and_pytorch_values(got, want, theirs)


def test_a_one_value_constant_is_copied():
    """The sweep's chains for one-element records read the arena only: a one-value
    constant is copied whatever the threshold."""
    with _in_place_from(1):
        w = tg.tensor([2.0], requires_grad=True)
        loss = (w * tg.tensor([3.0])).sum()
        assert loss._tape.ext_refs is None
        loss.backward()
    assert w.grad.tolist() == [3.0]


def _cubic_fit(lib, steps=8, n=100_000):
    """The tutorial's cubic fit (W8) at the default threshold: x, x ** 2, x ** 3 and y are
    read in place, step after step."""
    x = lib.tensor(np.linspace(-np.pi, np.pi, n))
    y = lib.tensor(np.sin(np.linspace(-np.pi, np.pi, n)))
    params = [lib.tensor(v, requires_grad=True) for v in (0.1, 0.2, -0.1, 0.05)]
    a, b, c, d = params
    out = []
    for _ in range(steps):
        loss = (a + b * x + c * x ** 2 + d * x ** 3 - y).pow(2).sum()
        in_place = len(loss._tape.ext_refs or ()) if lib is tg else None
        loss.backward()
        out.append((loss.item(), [p.grad.item() for p in params], in_place))
        with lib.no_grad():
            for p in params:
                p -= 1e-8 * p.grad
                p.grad = None
    return out


def test_a_hot_tape_reading_constants_in_place_equals_copying_ones():
    """The generated backward of a hot tape (hot_tapes.py) reads the constants where ext
    says, in place or copied: programs built from either kind of run, used by both."""
    from tapegrad import hot_tapes
    hot_tapes.forget()
    built = hot_tapes.generated
    in_place = _cubic_fit(tg)
    assert hot_tapes.generated > built          # the loop ran generated code
    with _in_place_from(10**12):
        copied_with_that_program = _cubic_fit(tg)
        hot_tapes.forget()
        copied = _cubic_fit(tg)
    # (the first step's graph spans two tapes: the first one was sized for one op)
    assert [step[2] for step in in_place][1:] == [4] * 7
    assert [step[2] for step in copied] == [0] * 8
    for run in (copied_with_that_program, copied):
        for (gl, gg, _), (wl, wg, _) in zip(in_place, run):
            assert np.float64(gl).view(np.int64) == np.float64(wl).view(np.int64)
            assert np.array(gg).view(np.int64).tolist() == np.array(wg).view(np.int64).tolist()
    theirs = _cubic_fit(torch)
    for (gl, gg, _), (tl, tgr, _) in zip(in_place, theirs):
        np.testing.assert_allclose(gl, tl, rtol=1e-10)
        np.testing.assert_allclose(gg, tgr, rtol=1e-9)


@pytest.mark.parametrize("op, refused", [("mul", True), ("div", True), ("sub", False),
                                         ("add", False)])
def test_an_elementwise_constant_changed_before_backward_as_pytorch(op, refused):
    """Changed in place before the backward, a constant the backward reads is refused as
    PyTorch refuses its saved operand; one no rule reads (``w - c``) is not."""
    def run(lib):
        c = lib.tensor(np.linspace(1.0, 2.0, 20_000))
        w = lib.tensor(np.full(20_000, 0.5), requires_grad=True)
        loss = getattr(w, op)(c).sum()
        c.mul_(2.0)
        loss.backward()
        return w.grad.numpy().copy()

    outcomes = []
    for lib in (tg, torch):
        try:
            outcomes.append(run(lib))
        except RuntimeError as e:
            outcomes.append(str(e).replace("torch.", "tapegrad.").split(" instead.")[0])
    assert isinstance(outcomes[0], str) == refused
    if refused:
        assert outcomes[0] == outcomes[1]
    else:
        np.testing.assert_array_equal(outcomes[0], outcomes[1])


# (torch.func's first use warns that torch.jit.script is deprecated)
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_forward_mode_and_hessians_of_an_eager_call_fill_the_arena():
    """A compiled function that runs eagerly (an in-place op) hands the transforms an eager
    tape whose constants may be read in place: the tangent and curvature sweeps read the
    arena as it is, so it is filled first (they gave zeros before)."""
    c_value = np.linspace(0.5, 2.0, 5)

    def program(lib, c):
        def g(w):
            h = w * 1.0
            if lib is tg:
                h.add_(0.0)   # (PyTorch's func transforms take it too; the value is the same)
            return (h * c).sin().sum()
        return g

    w_value = np.linspace(-1.0, 1.0, 5)
    with _in_place_from(2):
        f = tg.compile(program(tg, tg.tensor(c_value)))
        w = tg.tensor(w_value)
        hess = tg.hessian(f)(w)
        _, jv = tg.jvp(f, w, tg.ones(5))
        assert f.stats.eager > 0
    tc = torch.tensor(c_value)
    tw = torch.tensor(w_value)
    np.testing.assert_allclose(hess.numpy(), torch.func.hessian(program(torch, tc))(tw).numpy(),
                               rtol=1e-12, atol=1e-15)
    _, tjv = torch.func.jvp(program(torch, tc), (tw,), (torch.ones(5),))
    np.testing.assert_allclose(jv.item(), tjv.item(), rtol=1e-12)
