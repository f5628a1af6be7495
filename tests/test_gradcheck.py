"""``tapegrad.autograd.gradcheck`` and ``gradgradcheck`` against PyTorch's: the same verdicts
on right and wrong gradients, the same errors and messages (Jacobians included, in slow and
fast mode), the inputs left as they were, and the global generator advanced as PyTorch's is.
"""
import re
import warnings

import numpy as np
import pytest

import tapegrad as tg
from oracle import message

torch = pytest.importorskip("torch")
from torch.autograd.gradcheck import GradcheckError as TorchGradcheckError  # noqa: E402
from tapegrad.autograd.gradcheck import GradcheckError  # noqa: E402


def text(e):
    """An error's text with PyTorch's float32-default dtype suffix dropped (tapegrad's
    tensors are float64 by default and print without it)."""
    return message(e).replace(", dtype=tapegrad.float64", "")


def run(L, fn):
    """``fn(L)``'s result, or (the error's class name, its text)."""
    try:
        with warnings.catch_warnings():
            if L is torch:      # its vmap of forward mode warns that torch.jit.script, used
                warnings.simplefilter("ignore", DeprecationWarning)     # inside, is deprecated
            return fn(L)
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        return type(e).__name__, text(e)


def same(fn):
    ours, theirs = run(tg, fn), run(torch, fn)
    assert ours == theirs
    return ours


def inputs(L, *values, grad=True):
    return tuple(L.tensor(v, dtype=L.float64, requires_grad=grad) for v in values)


# --- functions whose gradients are right --------------------------------------------------
RIGHT = {
    "sum of a product": (lambda L, a: (a.sin() * a).sum(), [[0.5, 1.5, 0.3]]),
    "elementwise": (lambda L, a: a.exp() / (1 + a * a), [[0.5, -1.5, 0.3, 2.0]]),
    "broadcast pair": (lambda L, a, b: a * b + b.tanh(), [[[0.5], [1.5]], [0.2, -0.4, 0.9]]),
    "matmul": (lambda L, a, b: a @ b, [[[1.0, 2.0], [3.0, 4.0]], [[0.5], [-1.0]]]),
    "0-d": (lambda L, a: a.log() * 3, [2.5]),
    "empty": (lambda L, a: a * 2, [np.zeros((0, 3)).tolist()]),
    "two outputs": (lambda L, a: (a.cos(), (a ** 2).sum()), [[0.1, 0.7]]),
    "softmax": (lambda L, a: L.softmax(a, dim=-1), [[[0.1, 0.7, -0.2], [1.0, 2.0, 0.0]]]),
}


@pytest.mark.parametrize("name", sorted(RIGHT))
@pytest.mark.parametrize("fast_mode", [False, True])
def test_right_gradients_pass(name, fast_mode):
    fn, values = RIGHT[name]

    def check(L):
        xs = inputs(L, *values)
        ok = L.autograd.gradcheck(lambda *a: fn(L, *a), xs, fast_mode=fast_mode)
        return ok, [x.detach().numpy().tolist() for x in xs], [x.grad for x in xs]
    assert same(check) == (True, values, [None] * len(values))


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_forward_mode_batched_and_second_order_checks_pass(name):
    fn, values = RIGHT[name]

    def check(L):
        L.manual_seed(0)
        xs = inputs(L, *values)
        f = lambda *a: fn(L, *a)        # noqa: E731
        first = L.autograd.gradcheck(f, xs, check_forward_ad=True, check_batched_grad=True,
                                     check_batched_forward_grad=True)
        second = L.autograd.gradgradcheck(f, xs)
        # both draw from the global generator as PyTorch's do: the next draw is the same
        return first, second, L.rand(2, dtype=L.float64).numpy().tolist()
    assert same(check)[:2] == (True, True)


def test_a_non_tensor_argument_and_an_input_without_grad_pass_through():
    def check(L):
        a, = inputs(L, [0.5, 1.5])
        b, = inputs(L, [2.0, 3.0], grad=False)
        return L.autograd.gradcheck(lambda x, k, y: (x * y) ** k, (a, 3, b))
    assert same(check) is True


# --- functions whose gradients are wrong --------------------------------------------------
def half_gradient(L):
    class Square(L.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors
            return g * a            # the right one is 2 * g * a
    return Square.apply


@pytest.mark.parametrize("fast_mode", [False, True])
def test_a_wrong_gradient_raises_with_both_jacobians(fast_mode):
    def check(L):
        return L.autograd.gradcheck(half_gradient(L), inputs(L, [0.5, 1.5, 0.25]),
                                    fast_mode=fast_mode)
    name, ours = run(tg, check)
    # fast mode's random vectors come from rand() in the default dtype: PyTorch's is float32
    # in a program (this suite sets float64), and tapegrad draws them as float32 ones
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        _, theirs = run(torch, check)
    finally:
        torch.set_default_dtype(previous)
    assert name == "GradcheckError"
    if fast_mode:
        # the numbers v^T J u agree (the vectors are PyTorch's draws); the slow-mode report
        # after them is tapegrad's own
        cut = "\nThe above quantities"
        assert ours.split(cut)[0] == theirs.split(cut)[0]
        line = r"The max per-element difference \(slow mode\) is: .*"
        assert re.search(line, ours).group() == re.search(line, theirs).group()
    else:
        assert ours == theirs
        assert ours.startswith("Jacobian mismatch for output 0 with respect to input 0,\n")


def test_raise_exception_false_returns_false():
    def check(L):
        return L.autograd.gradcheck(half_gradient(L), inputs(L, [0.5, 1.5]),
                                    raise_exception=False)
    assert same(check) is False


def test_the_error_is_a_runtime_error():
    assert issubclass(GradcheckError, RuntimeError)
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        tg.autograd.gradcheck(half_gradient(tg), inputs(tg, [0.5]))


def test_a_wrong_second_derivative_fails_gradgradcheck_only():
    def check(L):
        class Cube(L.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a)
                return a ** 3

            @staticmethod
            def backward(ctx, g):
                a, = ctx.saved_tensors
                return g * 3 * a.detach() ** 2      # right, but not differentiable in a
        L.manual_seed(3)
        xs = inputs(L, [0.5, 1.5])
        return (L.autograd.gradcheck(Cube.apply, xs),
                L.autograd.gradgradcheck(Cube.apply, xs, raise_exception=False))
    assert same(check) == (True, False)


def test_a_backward_that_ignores_a_zero_cotangent():
    def check(L):
        class Double(L.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2 if bool((g != 0).any()) else L.ones_like(g)
        return L.autograd.gradcheck(Double.apply, inputs(L, [0.5, 1.5]))
    assert same(check) == ("GradcheckError", "backward not multiplied by grad_output")


def test_a_backward_that_is_not_reentrant():
    def check(L):
        calls = []

        class Noisy(L.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                calls.append(1)
                return g * 2 + len(calls) * 1e-9
        return L.autograd.gradcheck(Noisy.apply, inputs(L, [0.5, 1.5]))
    name, ours = run(tg, check)
    assert (name, ours.split("\n")[0]) == (
        "GradcheckError",
        "Backward is not reentrant, i.e., running backward with same input and grad_output "
        "multiple times gives different values, although analytical gradient matches "
        "numerical gradient.The tolerance for nondeterminism was 0.0.")
    assert run(torch, check)[1].split("\n")[0] == ours.split("\n")[0]


def test_no_input_requiring_grad_and_an_expanded_input_are_refused():
    same(lambda L: L.autograd.gradcheck(lambda a: a * 2, inputs(L, [1.0], grad=False)))
    assert same(lambda L: L.autograd.gradcheck(
        lambda a: a * 2, L.ones(1, 3, dtype=L.float64).expand(2, 3).requires_grad_()))[0] \
        == "RuntimeError"


def test_argument_combinations_refused_as_pytorch_refuses_them():
    def check(L, **kw):
        return lambda L: L.autograd.gradcheck(lambda a: a * 2, inputs(L, [1.0]), **kw)
    same(check(tg, check_forward_ad=False, check_backward_ad=False))
    same(check(tg, check_batched_grad=True, check_backward_ad=False, check_forward_ad=True))
    same(check(tg, check_batched_forward_grad=True))
    same(lambda L: L.autograd.gradgradcheck(lambda a: a * 2, inputs(L, [1.0]),
                                            check_rev_over_rev=False))


def test_no_differentiable_output():
    def check(L):
        return L.autograd.gradcheck(lambda a: a.detach() * 2, inputs(L, [0.5, 1.5]))
    assert same(check) == ("GradcheckError",
                           "Numerical gradient for function expected to be zero")


def test_the_module_and_the_function_names():
    import sys
    import tapegrad.autograd.gradcheck as as_imported
    assert tg.autograd.gradcheck is sys.modules["tapegrad.autograd.gradcheck"].gradcheck
    assert as_imported is tg.autograd.gradcheck     # as in PyTorch: the function
    assert tg.autograd.gradgradcheck.__name__ == "gradgradcheck"
    assert issubclass(TorchGradcheckError, RuntimeError)
