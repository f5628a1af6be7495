"""Every tensor factory (zeros, ones, empty, full, rand, randn, randint, randperm, arange,
linspace, logspace, eye, the *_like ones, tensor, as_tensor and the Tensor.new_* methods)
called in each of PyTorch's call forms -- sizes as numbers, one sequence or ``size=``; the
keywords dtype, device, requires_grad, out, layout, pin_memory, memory_format, generator --
and in wrong ones, each run through tapegrad and PyTorch and compared: the result's dtype,
shape, values and requires_grad, or the error's type and text (oracle.py)."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
from oracle import outcome

torch = pytest.importorskip("torch")


def same(program):
    a, b = outcome(tg, program), outcome(torch, program)
    assert a == b, (a, b)


def evaluated(call):
    """``call`` (an expression in ``L``, the library) as a program, evaluated after the same
    seed with the same names at hand: ``x`` a float tensor, ``xi`` an int64 one, ``o`` an
    empty tensor for ``out=``, ``g`` a seeded generator."""
    def program(L):
        L.manual_seed(0)
        g = L.Generator()
        g.manual_seed(1)
        names = {"L": L, "x": L.ones(2, 3), "xi": L.ones(2, dtype=L.int64), "o": L.empty(0),
                 "g": g}
        return eval(call, names)  # noqa: S307 - the table's own expressions
    return program


CALLS = [
    # zeros
    'L.zeros()',
    'L.zeros(2,3)',
    'L.zeros((2,3))',
    'L.zeros([2,3])',
    'L.zeros(size=(2,3))',
    'L.zeros(size=[2,3])',
    'L.zeros(L.Size([2,3]))',
    'L.zeros(2, size=(2,))',
    'L.zeros((2,3), 4)',
    'L.zeros(2.0)',
    'L.zeros(2, 3.0)',
    'L.zeros(2.0, 3)',
    'L.zeros((2.0,), 3)',
    'L.zeros(None, 2)',
    "L.zeros([2, 'a'], 3)",
    'L.zeros(0, True)',
    'L.zeros((2, True))',
    'L.zeros((True, 2))',
    'L.zeros(True, 2)',
    'L.zeros((2.0,))',
    'L.zeros(-1)',
    'L.zeros(2,-3)',
    'L.ones(-1)',
    'L.ones((2,-3))',
    'L.empty(-1)',
    'L.zeros(True)',
    'L.zeros("a")',
    'L.zeros(None)',
    'L.zeros(2, foo=1)',
    'L.zeros(2, dtype="float")',
    'L.zeros(2, dtype=L.int64)',
    'L.zeros(2, device="cpu")',
    'L.zeros(2, device=L.device("cpu"))',
    'L.zeros(2, device=None)',
    'L.zeros(2, device="foo")',
    'L.zeros(2, device=0)',
    'L.zeros(2, layout=L.strided)',
    'L.zeros(2, layout=None)',
    'L.zeros(2, layout="strided")',
    'L.zeros(2, pin_memory=False)',
    'L.zeros(2, pin_memory=None)',
    'L.zeros(2, requires_grad=True)',
    'L.zeros(2, requires_grad=None)',
    'L.zeros(2, requires_grad=1)',
    'L.zeros(2, dtype=L.int64, requires_grad=True)',
    'L.zeros(2, out=o)',
    'L.zeros(2, 3, out=o) is o',
    'L.zeros(2, out=o, requires_grad=True)',
    'L.zeros(2, out=xi)',
    'L.zeros(2, out=5)',
    'L.zeros(2, names=None)',
    'L.zeros((2,), (3,))',
    'L.zeros([])',
    'L.zeros(())',
    'L.zeros(0)',
    'L.ones(2, 3, dtype=L.bool)',
    'L.empty(2, 3).shape',
    'L.empty(2, memory_format=L.contiguous_format).shape',
    'L.empty(2, 3, 4, 5, memory_format=L.channels_last).shape',
    'L.empty(2, memory_format=L.channels_last).shape',
    'L.empty()',
    'L.ones()',
    "L.zeros(2, dtype=L.float64, device=L.device('cpu:0'), requires_grad=True)",
    'L.zeros((2, L.tensor(3)))',
    'L.zeros(2, L.tensor(3))',
    'L.zeros(L.tensor(3))',
    'L.zeros(x)',
    'L.ones(2, 3, dtype=float)',
    'L.zeros(2, out=L.ones(3)[:2])',
    # rand
    'L.rand()',
    'L.randn()',
    'L.rand(2,3, generator=g)',
    'L.rand((2,3), generator=g)',
    'L.randn(size=(2,), generator=g)',
    'L.rand(2, generator=5)',
    'L.rand(2.0, 3)',
    "L.rand(foo=1, dtype='a')",
    "L.rand(2, 3, foo=1)",
    "L.rand(dtype='a')",
    'L.rand(2, dtype=L.int64)',
    'L.randn(2, dtype=L.int64)',
    'L.rand(-1)',
    'L.randn(2.5)',
    'L.rand(2, out=o)',
    'L.randn(2, out=o, generator=g)',
    'L.rand(2, out=L.empty(0, dtype=L.int64))',
    'L.rand(2, out=L.ones(1, requires_grad=True))',
    'L.randn(2, dtype=L.int64, out=o)',
    # full
    'L.full()',
    'L.full((2,), 1.0, foo=1)',
    'L.full(2, 1.0)',
    "L.full((2,), 'a')",
    'L.full((2,),1.0,3)',
    'L.full((2,3), 1.5)',
    'L.full([2,3], 2)',
    'L.full((2,), True)',
    'L.full(size=(2,), fill_value=3.0)',
    'L.full((2,), 1.0, dtype=L.int64)',
    'L.full((2,), 1.5, dtype=L.int64)',
    "L.full((2,), 1.0, dtype='a')",
    'L.full((2,), 1.0, out=o) is o',
    'L.full((2,), 1.5, out=xi)',
    'L.full((2,), 1.0, dtype=L.int64, out=o)',
    'L.full((2,), L.tensor(2.5))',
    'L.full((-1,), 1.0)',
    # randint
    'L.randint()',
    'L.randint(3)',
    'L.randint(3.5, (2,))',
    'L.randint(0, 3, (2,), dtype=L.bool)',
    'L.randint(0, 3, (2,), dtype=L.float64, generator=g)',
    'L.randint(0, 3, size=(2,), generator=g)',
    'L.randint(3, size=(2,), generator=g)',
    'L.randint(0,3,2)',
    'L.randint(0, 3.5, (2,))',
    'L.randint(5, (2.0,))',
    "L.randint(5, (2,), dtype='a')",
    'L.randint(3, 3, (2,))',
    'L.randint(5, (2,), out=o, generator=g)',
    'L.randint(5, 2, 3, generator=g)',
    'L.randint(5, (-1,))',
    # arange
    'L.arange()',
    "L.arange('a')",
    'L.arange(5, foo=1)',
    "L.arange(0, 'a')",
    'L.arange(0, 5, None)',
    "L.arange(L.tensor(1.0), 'a')",
    'L.arange(5)',
    'L.arange(1, 5)',
    'L.arange(1, 5, 2)',
    'L.arange(0.0, 1.0, 0.25)',
    'L.arange(end=5)',
    'L.arange(start=1, end=5)',
    'L.arange(1, 5, step=2)',
    'L.arange(5, out=o) is o',
    'L.arange(4, out=L.empty(4))',
    'L.arange(3, dtype=L.int64, out=o)',
    'L.arange(3, out=L.ones(1, requires_grad=True))',
    'L.arange(L.tensor(3))',
    'L.arange(5, dtype=L.float64, requires_grad=True)',
    'L.arange(0, 1, 0)',
    'L.arange(5, 0)',
    'L.arange(4, dtype=L.bool)',
    # linspace
    'L.linspace()',
    'L.linspace(0, 1, 5)',
    'L.linspace(0, 1, steps=5)',
    'L.linspace(0, 1, 2.5)',
    'L.linspace(0, 1, -1)',
    'L.linspace(L.tensor(0.), 1, 3)',
    'L.linspace(0, 1, 3, out=o) is o',
    'L.linspace(0, 1, 3, dtype=L.int64)',
    "L.linspace(0, 'a', 3)",
    # logspace
    'L.logspace(0, 1, 3)',
    'L.logspace(0, 2, 3, 2)',
    'L.logspace(0, 2, 3, base=2.0)',
    'L.logspace()',
    'L.logspace(0, 1, 3, out=o) is o',
    'L.logspace(0, 1, -1)',
    # eye
    'L.eye()',
    'L.eye(2.5)',
    'L.eye(-1)',
    'L.eye(2, -1)',
    'L.eye(3)',
    'L.eye(2, 3)',
    'L.eye(2, m=3)',
    'L.eye(n=2)',
    'L.eye(2, 3.0)',
    'L.eye(2, out=o) is o',
    'L.eye(2, 3, 4)',
    'L.eye(2, dtype=L.int64)',
    'L.eye(2, dtype=L.bool)',
    # zeros_like
    'L.zeros_like(x, foo=1)',
    'L.zeros_like()',
    'L.zeros_like(x, 2)',
    'L.zeros_like([1.0])',
    'L.zeros_like(input=x)',
    'L.zeros_like(input=[1.0])',
    'L.zeros_like(x, dtype=L.int64)',
    'L.zeros_like(x, memory_format=L.preserve_format)',
    'L.zeros_like(x, memory_format=L.channels_last)',
    "L.zeros_like(x, memory_format='a')",
    "L.zeros_like(x, layout=L.strided, pin_memory=False, device='cpu')",
    'L.zeros_like(x, out=o)',
    'L.ones_like(x, requires_grad=True)',
    'L.ones_like(xi, requires_grad=True)',
    'L.empty_like(x, dtype=L.bool).shape',
    # full_like
    'L.full_like(x, 2.5)',
    'L.full_like(x, 2)',
    'L.full_like(xi, 2.5)',
    'L.full_like(x)',
    "L.full_like(x, 'a')",
    'L.full_like(x, fill_value=3.0)',
    'L.full_like(x, L.tensor(4.0))',
    # rand_like
    'L.rand_like(x, generator=g)',
    'L.randn_like(x, generator=g)',
    'L.rand_like(xi)',
    'L.randn_like(x, dtype=L.int64)',
    'L.rand_like(x, generator=5)',
    # randint_like
    'L.randint_like(x, 5, generator=g)',
    'L.randint_like(x, 2, 5, generator=g)',
    'L.randint_like(x)',
    'L.randint_like(x, 5.5)',
    'L.randint_like(x, L.tensor(5), generator=g)',
    'L.randint_like(x, high=5, generator=g)',
    'L.randint_like(xi, 5, dtype=L.float64, generator=g)',
    # tensor
    'L.tensor()',
    'L.tensor([1.], foo=1)',
    'L.tensor([1.], device=1.5)',
    "L.tensor([1.], dtype='a')",
    'L.tensor([1.], requires_grad=1)',
    'L.tensor([1], 2)',
    'L.tensor([1.], pin_memory=False)',
    "L.tensor([1.], device='cpu', dtype=L.int64)",
    'L.tensor(data=[1., 2.])',
    'L.tensor([1., 2.], dtype=float)',
    'L.tensor([1, 2], dtype=int)',
    'L.tensor([1., 2.], dtype=bool)',
    # as_tensor
    'L.as_tensor([1.], requires_grad=True)',
    'L.as_tensor()',
    'L.as_tensor([1, 2], dtype=L.float64)',
    'L.as_tensor([1, 2], L.float64)',
    "L.as_tensor(data=[1, 2], device='cpu')",
    "L.as_tensor([1.], dtype='a')",
    # new_zeros
    'x.new_zeros(2, 3)',
    'x.new_zeros((2, 3))',
    'x.new_zeros(size=(2,))',
    'x.new_zeros()',
    'x.new_zeros(2.0)',
    'x.new_zeros(2, 3.0)',
    'xi.new_zeros(2)',
    'xi.new_ones(2, dtype=L.float64)',
    'x.new_ones(2, requires_grad=True)',
    'x.new_empty(2, foo=1).shape',
    'x.new_empty((2, -1))',
    'x.new_zeros(2, out=o)',
    'x.new_zeros(2, layout=L.strided, pin_memory=False)',
    # new_full
    'x.new_full((2,), 3)',
    'x.new_full((2,), 3.5, dtype=L.int64)',
    'xi.new_full((2,), 3.5)',
    'x.new_full((2,))',
    'x.new_full(2, 3)',
    'x.new_full(size=(2,), fill_value=1)',
    # new_tensor
    'x.new_tensor([1, 2])',
    'xi.new_tensor([1.5, 2])',
    'x.new_tensor([1, 2], dtype=L.int64)',
    'x.new_tensor()',
    'x.new_tensor([1], foo=1)',
    'x.new_tensor([1], requires_grad=True)',
    # randperm
    'L.randperm(4, generator=g)',
    'L.randperm(4.5)',
    'L.randperm()',
    'L.randperm(4, out=xi, generator=g)',
]


@pytest.mark.parametrize("call", CALLS)
def test_a_call_gives_what_pytorch_gives(call):
    same(evaluated(call))


@pytest.mark.parametrize("call", [
    "(L.zeros(2, 3, out=o), o)[1]", "(L.full((2,), 7, out=xi), xi)[1]",
    "(L.arange(3, out=o), o)[1]", "(L.rand(2, 2, out=o, generator=g), o)[1]",
    "(L.eye(2, out=o, requires_grad=True), o)[1]",
])
def test_out_is_resized_and_written(call):
    same(evaluated(call))


# a size element: mostly ints (some negative), at times something PyTorch refuses
_ELEMENTS = st.one_of(st.integers(-2, 4), st.integers(0, 3), st.integers(0, 3),
                      st.sampled_from([2.0, True, None, "2", (2,)]))


def _size_call(fname, sizes, form):
    """A call of ``fname`` with ``sizes`` given in ``form``."""
    text = ", ".join(map(repr, sizes))
    given_as = {"varargs": f"{text}", "tuple": f"({text}{',' if len(sizes) == 1 else ''})",
                "list": f"[{text}]", "keyword": f"size=({text}{',' if len(sizes) == 1 else ''})"}
    return f"L.{fname}({given_as[form]})"


@given(fname=st.sampled_from(["zeros", "ones", "rand", "randn"]),
       sizes=st.lists(_ELEMENTS, max_size=4),
       form=st.sampled_from(["varargs", "tuple", "list", "keyword"]))
def test_sizes_in_every_form(fname, sizes, form):
    same(evaluated(_size_call(fname, sizes, form)))


@given(sizes=st.lists(_ELEMENTS, max_size=4),
       form=st.sampled_from(["varargs", "tuple", "list", "keyword"]))
def test_empty_sizes_in_every_form(sizes, form):
    # (PyTorch's empty values are whatever its memory held: the shape is what compares)
    same(evaluated(_size_call("empty", sizes, form) + ".shape"))


@given(sizes=st.lists(st.integers(0, 3), max_size=3),
       keywords=st.fixed_dictionaries({}, optional={
           "dtype": st.sampled_from(["L.float64", "L.int64", "L.bool", "float", "int"]),
           "device": st.sampled_from(["'cpu'", "L.device('cpu')", "None"]),
           "requires_grad": st.booleans(),
           "layout": st.sampled_from(["L.strided", "None"]),
           "pin_memory": st.just(False)}))
def test_keywords_in_any_combination(sizes, keywords):
    named = "".join(f", {k}={v}" for k, v in keywords.items())
    same(evaluated(f"L.full({tuple(sizes)!r}, 2{named})"))
    same(evaluated(f"L.zeros({tuple(sizes)!r}{named})"))


@pytest.mark.parametrize("make", [
    lambda L: L.zeros(2, device=torch.device("cpu")),
    lambda L: L.ones_like(L.ones(2, 3), device=torch.device("cpu", 0)),
    lambda L: L.tensor([1.0, 2.0], device=torch.device("cpu"), requires_grad=True),
    lambda L: L.arange(3, device=torch.device("cpu")),
])
def test_a_torch_device_is_taken(make):
    # a program that uses both libraries may hand tapegrad PyTorch's device object
    same(make)


# each factory's common call, and keywords of the wrong type for it
_COMMON_CALLS = {
    "zeros": "L.zeros(2, 3", "ones": "L.ones((2,)", "empty": "L.empty([2]",
    "full": "L.full((2,), 1.5", "rand": "L.rand(2", "randn": "L.randn(2, 2",
    "randint": "L.randint(0, 5, (3,)", "randperm": "L.randperm(4", "arange": "L.arange(4",
    "linspace": "L.linspace(0, 1, 3", "logspace": "L.logspace(0, 1, 3", "eye": "L.eye(2",
    "zeros_like": "L.zeros_like(x", "full_like": "L.full_like(x, 2.0",
    "rand_like": "L.rand_like(x", "randint_like": "L.randint_like(x, 4",
    "tensor": "L.tensor([1.0, 2.0]", "as_tensor": "L.as_tensor([1, 2]",
    "new_zeros": "x.new_zeros(2", "new_full": "x.new_full((2,), 3", "new_tensor": "x.new_tensor([1]",
}
_WRONG_KEYWORDS = ["dtype='a'", "dtype=1", "device=1.5", "device=[0]", "requires_grad=1",
                   "requires_grad='yes'", "requires_grad=None", "pin_memory=None",
                   "layout='strided'", "layout=L.strided", "pin_memory=1", "out=5",
                   "generator=5", "memory_format='a'", "memory_format=None", "names=1"]


def _closed(fname, call):
    # (PyTorch's empty holds what its memory held: the shape is what compares)
    return call + (").shape" if fname == "empty" else ")")


@given(fname=st.sampled_from(sorted(_COMMON_CALLS)), keyword=st.sampled_from(_WRONG_KEYWORDS))
def test_a_wrong_keyword_is_refused_as_pytorch_refuses_it(fname, keyword):
    same(evaluated(_closed(fname, f"{_COMMON_CALLS[fname]}, {keyword}")))


@pytest.mark.parametrize("fname", sorted(_COMMON_CALLS))
def test_the_common_call(fname):
    # (the random ones after the same seed: the same numbers)
    same(evaluated(_closed(fname, _COMMON_CALLS[fname])))
