"""PyTorch's legacy constructors and tensor types: ``Tensor(2, 3)``, ``DoubleTensor([1, 2])``,
``LongTensor(3)``, ``x.new(...)``, ``isinstance(x, LongTensor)``, ``x.type(DoubleTensor)`` and
``set_default_tensor_type``, compared with PyTorch: values, shapes, dtypes, aliasing, grad_fn
names and error texts."""
import warnings

import numpy as np
import pytest

import tapegrad as tg
from oracle import outcome

torch = pytest.importorskip("torch")

CASES = [
    "L.DoubleTensor()", "L.DoubleTensor(2, 3).shape", "L.DoubleTensor([1, 2])",
    "L.DoubleTensor((2, 3))", "L.DoubleTensor(L.Size([2, 3])).shape",
    "L.DoubleTensor(np.array([1, 2]))", "L.DoubleTensor([[1, 2], [3, 4]])",
    "L.DoubleTensor(2, device='cpu').shape", "L.DoubleTensor(0, 3).shape",
    "L.LongTensor([1.7, 2])", "L.LongTensor(3).shape", "L.BoolTensor([1, 0])",
    "L.ByteTensor([1, 2])", "L.ShortTensor([1])", "L.IntTensor([1])", "L.CharTensor([-1])",
    "L.Tensor(2, 3).shape", "L.Tensor([1, 2])", "L.Tensor().shape", "L.Tensor(L.Size([2])).shape",
    "L.DoubleTensor(2, True).shape",
    # refused, with PyTorch's texts
    "L.DoubleTensor(L.tensor([1, 2]))", "L.LongTensor(L.tensor([1.0, 2.0]))",
    "L.DoubleTensor(2.5)", "L.DoubleTensor(-1)", "L.DoubleTensor(2, -3)", "L.DoubleTensor('a')",
    "L.DoubleTensor(None)", "L.DoubleTensor(True)", "L.DoubleTensor(2, 3.0)",
    "L.DoubleTensor(2, 'a')", "L.DoubleTensor(3.0, 2)", "L.DoubleTensor([1, 2], [3])",
    "L.DoubleTensor([1, 2], dtype=L.float64)", "L.DoubleTensor(L.tensor([1.0]), 3)",
    "L.tensor([1.0]).new(2, 'a')", "L.tensor([1.0]).new('a')", "L.tensor([1.0]).new(2.5)",
    # the types
    "isinstance(L.zeros(2), L.DoubleTensor)", "isinstance(L.tensor([1]), L.DoubleTensor)",
    "isinstance(L.tensor([1]), L.LongTensor)", "isinstance(L.tensor([True]), L.BoolTensor)",
    "isinstance(L.zeros(2, dtype=L.uint8), L.ByteTensor)", "isinstance(3, L.LongTensor)",
    "issubclass(L.DoubleTensor, L.Tensor)", "L.DoubleTensor.__name__",
    "L.DoubleTensor.__module__", "repr(L.DoubleTensor)", "str(L.LongTensor)",
    "L.DoubleTensor.is_cuda", "L.LongTensor.is_sparse", "L.DoubleTensor.dtype",
    "L.LongTensor.dtype",
    "L.DoubleTensor.abs(L.tensor([-1.0]))",
    "L.tensor([1, 2]).type(L.DoubleTensor)", "L.tensor([1.5]).type(L.LongTensor)",
    "L.tensor([1.5]).type('torch.LongTensor')", "L.tensor([1.5]).type()",
    "L.typename(L.tensor([1, 2]))", "L.typename(L.zeros(2, dtype=L.bool))", "L.typename(3)",
    "L.typename(np.zeros(2))", "L.typename(None)", "L.is_storage(L.zeros(2))",
    # set_default_tensor_type
    "L.set_default_tensor_type(L.DoubleTensor)", "L.set_default_tensor_type('torch.DoubleTensor')",
    "L.set_default_tensor_type(L.LongTensor)", "L.set_default_tensor_type(L.float64)",
    "L.set_default_tensor_type('foo')",
]


@pytest.mark.parametrize("expr", CASES)
def test_as_pytorch(expr):
    def run(L):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # set_default_tensor_type's deprecation
            result = eval(expr, {"L": L, "np": np})
        # names spell the library: torch.DoubleTensor is tapegrad.DoubleTensor
        return result.replace("torch", "tapegrad") if isinstance(result, str) else result
    assert outcome(tg, run) == outcome(torch, run)


def test_set_default_tensor_type_warns_as_pytorch_does():
    # once a process; every time with warn_always
    for L in (tg, torch):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            L.set_default_tensor_type(L.DoubleTensor)     # warns unless an earlier call did
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            L.set_default_tensor_type(L.DoubleTensor)     # no second warning
    for L in (tg, torch):
        L.set_warn_always(True)
        try:
            with pytest.warns(UserWarning, match=r"\.set_default_tensor_type\(\) is deprecated "
                                                 r"as of PyTorch 2\.1, please use"):
                L.set_default_tensor_type(L.DoubleTensor)
        finally:
            L.set_warn_always(False)
        assert L.get_default_dtype() == L.float64


@pytest.mark.parametrize("make", ["DoubleTensor", "Tensor", "new"])
def test_a_tensor_argument_gives_an_alias(make):
    def program(L):
        x = L.tensor([1.0, 2.0], dtype=L.float64, requires_grad=True)
        base = x * 2
        y = base.new(base) if make == "new" else getattr(L, make)(base)
        y.sum().backward()
        plain = L.tensor([1.0, 2.0], dtype=L.float64)
        alias = plain.new(plain) if make == "new" else getattr(L, make)(plain)
        alias[0] = 5.0                  # the same memory: the write reaches plain
        return (y.grad_fn.name(), y.requires_grad, y is base, y._base is base,
                x.grad.tolist(), plain.tolist(), alias._base is plain)
    assert program(tg) == program(torch)


def test_a_legacy_module_initialises_its_parameters():
    # layers written before torch.empty: Parameter(Tensor(out, in)), then reset_parameters
    def program(L):
        class Linear(L.nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = L.nn.Parameter(L.Tensor(3, 2))
                self.bias = L.nn.Parameter(L.Tensor(3))
                L.nn.init.constant_(self.weight, 0.5)
                L.nn.init.zeros_(self.bias)

            def forward(self, x):
                return x @ self.weight.t() + self.bias
        m = Linear()
        m(L.ones(4, 2, dtype=L.float64)).sum().backward()
        return m.weight.grad.tolist(), m.bias.grad.tolist(), m.weight.dtype == L.float64
    assert program(tg) == program(torch)


def test_a_subclass_of_tensor_is_made_by_the_legacy_constructor():
    class Tagged(tg.Tensor):
        pass
    t = Tagged([1.0, 2.0])
    assert type(t) is Tagged and t.tolist() == [1.0, 2.0]
    assert type(Tagged(2, 3)) is Tagged and Tagged(2, 3).shape == (2, 3)


def test_float_tensor_is_the_floating_type_and_half_is_refused():
    # FloatTensor means "the floating type", as tapegrad.float and .float() do: float64
    assert tg.FloatTensor([1, 2]).dtype == tg.float64
    assert isinstance(tg.zeros(2), tg.FloatTensor)
    assert tg.tensor([1, 2]).type(tg.FloatTensor).dtype == tg.float64
    assert tg.FloatTensor(2, 3).shape == (2, 3)
    for make in (lambda: tg.HalfTensor(2), lambda: tg.HalfTensor([1.0]),
                 lambda: tg.BFloat16Tensor(), lambda: tg.zeros(2).type(tg.HalfTensor)):
        with pytest.raises(TypeError, match="float64 as its only floating dtype"):
            make()
