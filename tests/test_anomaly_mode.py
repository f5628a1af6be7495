"""Anomaly detection (autograd.detect_anomaly, set_detect_anomaly): the flags, the warnings,
and the nan check of a backward -- which node, which output, what text -- against PyTorch."""
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg

torch = pytest.importorskip("torch")

NAN = float("nan")


@pytest.fixture(autouse=True)
def _mode_off_after():
    # a failing test must not leave the process-wide mode on for the tests after it
    yield
    tg.set_anomaly_enabled(False)
    torch.set_anomaly_enabled(False)


def _outcome(lib, program):
    """(result or error text, [first line of each warning]) of program(lib) in anomaly mode."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with lib.autograd.set_detect_anomaly(True):
                res = program(lib)
            res = ("ok", [np.asarray(r.detach().numpy() if hasattr(r, "detach") else r)
                          for r in res])
        except Exception as e:   # noqa: BLE001 - the error is what is compared
            res = ("error", type(e).__name__, str(e))
    lines = [str(w.message).split("\n")[0] for w in caught
             if issubclass(w.category, UserWarning) and str(w.message).strip()]
    # (PyTorch's C++ warnings end with where in its sources they were raised)
    lines = [ln.split(" (Triggered internally")[0] for ln in lines]
    return res, lines


def _same(program, *, names=lambda s: s):
    got, got_w = _outcome(tg, program)
    want, want_w = _outcome(torch, program)
    assert got[0] == want[0], (got, want)
    if got[0] == "error":
        assert got[1:] == (want[1], names(want[2]))
        # PyTorch may add a warning for the node that made the failing one (create_graph):
        # the first, the failing node's, is the one compared
        assert got_w[:1] == [names(w) for w in want_w[:1]]
    else:
        for g, w in zip(got[1], want[1]):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
        assert got_w == want_w == []
    return got


# ---------------------------------------------------------------------------------------------
# Programs, each written once for both libraries
# ---------------------------------------------------------------------------------------------
def _div_self(lib):
    x = lib.tensor([0.0, 1.0, 2.0], requires_grad=True)
    (x / x).sum().backward()
    return [x.grad]


def _div_constant_by_zero(lib):
    x = lib.tensor([0.0, 1.0], requires_grad=True)
    (lib.zeros(2) / x).sum().backward()
    return [x.grad]


def _sqrt_at_zero(lib):
    x = lib.tensor([0.0, 1.0], requires_grad=True)
    (x.sqrt() * 0).sum().backward()
    return [x.grad]


def _sqrt_twice(lib):
    x = lib.tensor([0.0, 1.0], requires_grad=True)
    y = x.sqrt()
    return lib.autograd.grad((y * y * 0).sum(), x)


def _log_of_negative(lib):
    # the forward's nan is not the backward's: log's gradient 1/x has none
    x = lib.tensor([-1.0, 1.0], requires_grad=True)
    (x.log() * 2).sum().backward()
    return [x.grad]


def _nan_seed(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    (x * 2).exp().backward(lib.tensor([NAN, 1.0]))
    return [x.grad]


def _nan_seed_of_a_leaf(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    x.backward(lib.tensor([NAN, 1.0]))
    return [x.grad]


def _two_roots_nan_seed(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    lib.autograd.backward([y.exp(), y], [lib.ones(2), lib.tensor([NAN, 0.0])])
    return [x.grad]


def _functions(lib):
    class Nan(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g * NAN, g

    class Boom(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")
    return Nan, Boom


def _function_nan(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = lib.tensor([1.0, 2.0], requires_grad=True)
    (_functions(lib)[0].apply(x, y) * 2).sum().backward()
    return [x.grad]


def _function_nan_for_input_without_grad(lib):
    x = lib.tensor([1.0, 2.0])
    y = lib.tensor([1.0, 2.0], requires_grad=True)
    (_functions(lib)[0].apply(x, y) * 2).sum().backward()
    return [y.grad]


def _function_raises(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    _functions(lib)[1].apply(x).sum().backward()
    return [x.grad]


def _create_graph_first(lib):
    x = lib.tensor([0.0, 1.0], requires_grad=True)
    g, = lib.autograd.grad((x / x).sum(), x, create_graph=True)
    return [g]


def _create_graph_second(lib):
    x = lib.tensor([0.0, 1.0], requires_grad=True)
    g, = lib.autograd.grad(x.sqrt().sum(), x, create_graph=True)
    (g * 0).sum().backward()
    return [x.grad]


def _create_graph_fine(lib):
    x = lib.tensor([0.0, 1.0], requires_grad=True)
    g, = lib.autograd.grad((x ** 1.5).sum(), x, create_graph=True)
    g.sum().backward()
    return [x.grad]


def _grad_skips_what_inputs_do_not_need(lib):
    # sqrt's node leads to x only, which is not asked for: PyTorch never runs it
    x = lib.tensor([0.0, 1.0], requires_grad=True)
    y = lib.tensor([1.0, 1.0], requires_grad=True)
    return lib.autograd.grad((x.sqrt() * 0 * y).sum(), y)


def _where(lib):
    x = lib.tensor([-1.0, 4.0], requires_grad=True)
    return lib.autograd.grad(lib.where(x > 0, x.sqrt(), x).sum(), x)


def _cat(lib):
    x = lib.tensor([0.0, 1.0], requires_grad=True)
    z = lib.tensor([1.0], requires_grad=True)
    return lib.autograd.grad((lib.cat([z, x.sqrt()]) * 0).sum(), x)


def _mul_self_of_inf(lib):
    x = lib.tensor([float("inf"), 4.0], requires_grad=True)
    return lib.autograd.grad((x * x * 0).sum(), x)


def _broadcast_inf_without_nan(lib):
    x = lib.tensor([0.0, 1.0], requires_grad=True)
    return lib.autograd.grad((x / lib.zeros(3, 1)).sum(), x)


def _forward_before_the_mode(lib):
    x = lib.tensor([0.0, 1.0], requires_grad=True)
    with lib.autograd.set_detect_anomaly(False):
        y = (x / x).sum()
    y.backward()
    return [x.grad]


def _mode_without_check_nan(lib):
    x = lib.tensor([0.0, 1.0], requires_grad=True)
    with lib.autograd.set_detect_anomaly(True, check_nan=False):
        (x / x).sum().backward()
    return [x.grad]


PROGRAMS = [_div_self, _div_constant_by_zero, _sqrt_at_zero, _sqrt_twice, _log_of_negative,
            _nan_seed, _nan_seed_of_a_leaf, _function_nan,
            _function_nan_for_input_without_grad, _function_raises, _create_graph_first,
            _create_graph_second, _create_graph_fine, _grad_skips_what_inputs_do_not_need,
            _where, _cat, _mul_self_of_inf, _broadcast_inf_without_nan,
            _forward_before_the_mode, _mode_without_check_nan]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_the_failing_node_and_its_output_are_pytorchs(program):
    _same(program)


def test_a_nan_seed_of_several_roots_is_the_graph_roots():
    # PyTorch names its C++ node torch::autograd::GraphRoot; tapegrad's namespace is its own,
    # as for AccumulateGrad
    got = _same(_two_roots_nan_seed, names=lambda s: s.replace("torch::", "tapegrad::"))
    assert got[2] == ("Function 'tapegrad::autograd::GraphRoot' returned nan values in its "
                      "1th output.")


def test_expected_errors_are_raised():
    # the comparison above must not pass by both libraries raising nothing
    for program, text in [
            (_div_self, "Function 'DivBackward0' returned nan values in its 1th output."),
            (_sqrt_at_zero, "Function 'SqrtBackward0' returned nan values in its 0th output."),
            (_nan_seed, "Function 'ExpBackward0' returned nan values in its 0th output."),
            (_function_nan, "Function 'NanBackward' returned nan values in its 0th output."),
            (_create_graph_second,
             "Function 'DivBackward0' returned nan values in its 1th output.")]:
        res, lines = _outcome(tg, program)
        assert res == ("error", "RuntimeError", text)
        assert lines[0] == (f"Error detected in {text.split(chr(39))[1]}. Traceback of forward "
                            "call that caused the error:")


def test_the_warning_shows_the_forward_line():
    x = tg.tensor([0.0, 1.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tg.autograd.set_detect_anomaly(True):
            line = sys._getframe().f_lineno + 1
            y = x.sqrt()
            z = (y * 0).sum()
            with pytest.raises(RuntimeError, match="SqrtBackward0"):
                z.backward()
    text = str(caught[-1].message)
    assert caught[-1].category is UserWarning
    assert text.startswith("Error detected in SqrtBackward0. Traceback of forward call that "
                           "caused the error:\n")
    # the last frame is this test's line that made sqrt, not a line inside tapegrad
    assert text.rstrip().split("\n")[-2].endswith(f"line {line}, in "
                                                   "test_the_warning_shows_the_forward_line")
    assert "y = x.sqrt()" in text.rstrip().split("\n")[-1]


# ---------------------------------------------------------------------------------------------
# Flags and switches
# ---------------------------------------------------------------------------------------------
def _flags(lib):
    seen = [(lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled())]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = lib.autograd.detect_anomaly(check_nan=False)
    seen.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))
    with d:
        seen.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))
        with lib.autograd.set_detect_anomaly(False):
            seen.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))
            with lib.autograd.set_detect_anomaly(True):
                seen.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))
            seen.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))
        seen.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))
    seen.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))
    lib.autograd.set_detect_anomaly(True, check_nan=False)     # as a call: for good
    seen.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))
    lib.set_anomaly_enabled(True)
    seen.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))
    lib.set_anomaly_enabled(False)
    seen.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))
    try:
        with lib.autograd.set_detect_anomaly(True):
            raise KeyError("inside")
    except KeyError:
        pass
    seen.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))
    return seen


def test_flags_inside_and_outside_nested_switches_are_pytorchs():
    assert _flags(tg) == _flags(torch)
    assert (True, False) in _flags(tg)


def test_detect_anomaly_warns_on_creation_and_is_no_decorator():
    texts = []
    for lib in (tg, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            d = lib.autograd.detect_anomaly()
        assert [w.category for w in caught] == [UserWarning]
        assert caught[0].filename == __file__     # (stacklevel: the caller's line)
        with pytest.raises(TypeError) as e:
            d(lambda: None)
        texts.append((str(caught[0].message), str(e.value)))
    assert texts[0] == texts[1]
    assert texts[0][0].startswith("Anomaly Detection has been enabled.")


def test_anomaly_mode_module():
    from tapegrad.autograd import anomaly_mode
    assert anomaly_mode.__all__ == torch.autograd.anomaly_mode.__all__
    assert anomaly_mode.detect_anomaly is tg.autograd.detect_anomaly
    assert anomaly_mode.set_detect_anomaly is tg.autograd.set_detect_anomaly
    assert "detect_anomaly" in dir(tg.autograd) and "is_anomaly_enabled" in dir(tg)


# ---------------------------------------------------------------------------------------------
# Without nan the mode changes nothing
# ---------------------------------------------------------------------------------------------
def _network(lib, w0, b0, x0):
    w = lib.tensor(w0, requires_grad=True)
    b = lib.tensor(b0, requires_grad=True)
    x = lib.tensor(x0)
    h = lib.tanh(x @ w + b)
    loss = (h.pow(2).mean() + lib.nn.functional.log_softmax(h, 1).sum()
            + (x[:, :1] * w[0]).exp().sum() + (w * w).sqrt().sum() + lib.cat([b, b]).sum())
    loss.backward()
    return w.grad.numpy().copy(), b.grad.numpy().copy(), loss.item()


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 5), st.integers(0, 2 ** 31))
def test_gradients_without_nan_are_the_same_with_the_mode_on(n_in, n_out, batch, seed):
    rng = np.random.default_rng(seed)
    w0 = rng.uniform(0.5, 1.5, (n_in, n_out)) * rng.choice([-1, 1], (n_in, n_out))
    b0, x0 = rng.normal(size=n_out), rng.normal(size=(batch, n_in))
    off = _network(tg, w0, b0, x0)
    with tg.autograd.set_detect_anomaly(True):
        on = _network(tg, w0, b0, x0)
    for a, b in zip(off, on):
        np.testing.assert_array_equal(a, b)      # bit for bit: the same rules, record by record
    with torch.autograd.set_detect_anomaly(True):
        ref = _network(torch, w0, b0, x0)
    for a, b in zip(on, ref):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    # and against central differences of the loss, for w
    eps = 1e-6
    for i in range(n_in):
        for j in range(n_out):
            up, down = w0.copy(), w0.copy()
            up[i, j] += eps
            down[i, j] -= eps
            num = (_network(tg, up, b0, x0)[2] - _network(tg, down, b0, x0)[2]) / (2 * eps)
            assert abs(num - on[0][i, j]) <= 1e-5 * max(1.0, abs(num))


_UNARY = {"sqrt": lambda t: t.sqrt(), "log": lambda t: t.log(), "exp": lambda t: t.exp(),
          "self_div": lambda t: t / t, "zero_mul": lambda t: t * 0, "tanh": lambda t: t.tanh(),
          "pow": lambda t: t ** 0.5, "self_mul": lambda t: t * t}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(sorted(_UNARY)), min_size=1, max_size=4),
       st.lists(st.sampled_from([0.0, -1.0, 1.0, 2.0, float("inf")]), min_size=1, max_size=4),
       st.booleans())
def test_chains_fail_at_pytorchs_node(chain, values, nan_seed):
    def program(lib):
        x = lib.tensor(values, requires_grad=True)
        y = x
        for name in chain:
            y = _UNARY[name](y)
        seed = lib.ones(len(values))
        if nan_seed:
            seed[0] = NAN
        y.backward(seed)
        return [x.grad]
    _same(program)


# ---------------------------------------------------------------------------------------------
# Compiled functions
# ---------------------------------------------------------------------------------------------
def test_a_compiled_function_runs_eagerly_in_anomaly_mode_and_says_why():
    f = tg.compile(lambda x: (x.sqrt() * 0).sum())
    x = tg.tensor([0.0, 1.0], requires_grad=True)
    f(x).backward()                 # recorded, then replayed: no check without the mode
    f(x).backward()
    assert f.stats.replays == 1 and np.isnan(x.grad.numpy()[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tg.autograd.set_detect_anomaly(True):
            with pytest.raises(RuntimeError, match="^Function 'SqrtBackward0' returned nan "
                                                   "values in its 0th output.$"):
                f(x).backward()
    assert f.stats.eager == 1
    assert [why for why, _ in f.stats.eager_reasons if "anomaly detection is on" in why]
    assert str(caught[-1].message).startswith("Error detected in SqrtBackward0. Traceback")
    f(x)
    assert f.stats.replays == 2     # replayed again once the mode is off


def test_a_hot_training_loop_is_checked_once_the_mode_is_on():
    # a tape swept alike step after step gets generated code of its own (hot_tapes); in
    # anomaly mode the record-by-record sweep takes its place
    w = tg.tensor([1.0, 4.0], requires_grad=True)
    for _ in range(30):
        (w.sqrt() * 2).sum().backward()
    grad = w.grad.numpy().copy()
    w.grad = None
    with tg.autograd.set_detect_anomaly(True):
        (w.sqrt() * 2).sum().backward()
        np.testing.assert_array_equal(w.grad.numpy(), grad / 30)
        w.data[0] = 0.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(RuntimeError, match="'SqrtBackward0' returned nan values in "
                                                   "its 0th output"):
                (w.sqrt() * 0).sum().backward()


def _mse_of_inf(lib):
    x = lib.tensor([float("inf"), 1.0], requires_grad=True)
    lib.nn.functional.mse_loss(x, lib.tensor([float("inf"), 0.0])).backward()
    return [x.grad]


def _smooth_l1_of_inf(lib):
    x = lib.tensor([float("inf"), 1.0], requires_grad=True)
    lib.nn.functional.smooth_l1_loss(x * 1, lib.tensor([float("inf"), 0.0])).backward()
    return [x.grad]


def _layer_norm_of_inf(lib):
    x = lib.tensor([[float("inf"), 1.0, 2.0]], requires_grad=True)
    lib.nn.functional.layer_norm(x, (3,)).sum().backward()
    return [x.grad]


def _cross_entropy_of_inf(lib):
    x = lib.tensor([[float("inf"), 1.0]], requires_grad=True)
    lib.nn.functional.cross_entropy(x, lib.tensor([1])).backward()
    return [x.grad]


def _mse_second_input(lib):
    y = lib.tensor([float("inf"), 1.0], requires_grad=True)
    lib.nn.functional.mse_loss(lib.tensor([float("inf"), 0.0]), y * 1).backward()
    return [y.grad]


@pytest.mark.parametrize("program", [_mse_of_inf, _smooth_l1_of_inf, _layer_norm_of_inf,
                                     _cross_entropy_of_inf, _mse_second_input],
                         ids=lambda p: p.__name__)
def test_an_op_built_from_others_is_named_as_pytorchs_one_node(program):
    # tapegrad records mse_loss as sub, pow, mean, ...: the nan appears in one of those,
    # and the error names the op's node as PyTorch does
    got = _same(program)
    assert got[0] == "error"
