"""A seeded program draws PyTorch's numbers: every random function, module init, dropout and
shuffle is compared bit for bit with PyTorch's float64 draws after the same ``manual_seed``
(and with the draws that follow, so that each consumes exactly PyTorch's share of the
stream)."""
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import same_draws
import tapegrad as tg
from same_draws import assert_same_bits
from tapegrad._random_stream import fma

torch = pytest.importorskip("torch")
torch.set_default_dtype(torch.float64)


def both(seed):
    same_draws.both(torch, seed)


def draws_match(make, seed=0):
    same_draws.draws_match(torch, make, seed)


SIZES = [0, 1, 2, 3, 15, 16, 17, 31, 32, 33, 100, 1000, (3, 5), (2, 3, 4), (4, 0)]


def _size(n):
    return n if isinstance(n, tuple) else (n,)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("fn", ["rand", "randn"])
def test_rand_and_randn(fn, n):
    draws_match(lambda lib: getattr(lib, fn)(*_size(n)))


@pytest.mark.parametrize("sizes", [(1, 1, 1), (3, 3), (1, 2, 5, 17), (15, 1, 16)])
def test_normals_kept_across_calls(sizes):
    # fewer than 16 values are drawn in pairs, the second kept for the next call
    def make(lib):
        return lib.cat([lib.randn(n) for n in sizes])
    draws_match(make, seed=3)


@pytest.mark.parametrize("seed", [0, 1, 42, 2 ** 32 - 1, 2 ** 32 + 5, 2 ** 63 - 1, -1, -12345])
def test_seeds(seed):
    draws_match(lambda lib: lib.randn(20), seed=seed)
    assert tg.initial_seed() == torch.initial_seed()


@given(seed=st.integers(0, 2 ** 64 - 1), n=st.integers(0, 70),
       mean=st.floats(-1e3, 1e3), std=st.floats(1e-3, 1e3))
@settings(max_examples=60, deadline=None)
def test_normal_and_uniform_fills(seed, n, mean, std):
    both(seed)
    assert_same_bits(tg.empty(n).normal_(mean, std), torch.empty(n).normal_(mean, std))
    assert_same_bits(tg.empty(n).uniform_(mean, mean + std),
                     torch.empty(n).uniform_(mean, mean + std))
    assert_same_bits(tg.randn(2), torch.randn(2))


@pytest.mark.parametrize("low,high", [(0, 2), (0, 10), (-5, 7), (3, 2 ** 32 + 3),
                                      (-2 ** 40, 2 ** 40), (0, 2 ** 62)])
def test_randint(low, high):
    draws_match(lambda lib: lib.randint(low, high, (40,)))
    draws_match(lambda lib: lib.randint(high - low, (2, 3)))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 10, 1000, 70000])
def test_randperm(n):
    draws_match(lambda lib: lib.randperm(n))


@pytest.mark.parametrize("draw", [
    lambda lib, t: t.uniform_(-2.5, 3.0),
    lambda lib, t: t.normal_(1.5, 3.0),
    lambda lib, t: t.bernoulli_(0.3),
    lambda lib, t: t.bernoulli_(lib.linspace(0, 1, t.numel()).reshape(t.shape)),
    lambda lib, t: t.exponential_(2.5),
    lambda lib, t: t.cauchy_(1.0, 2.0),
    lambda lib, t: t.log_normal_(0.5, 0.3),
    lambda lib, t: t.geometric_(0.3),
    lambda lib, t: t.random_(10),
    lambda lib, t: t.random_(-3, 40),
    lambda lib, t: t.random_(),
], ids=["uniform", "normal", "bernoulli", "bernoulli_tensor", "exponential", "cauchy",
        "log_normal", "geometric", "random_to", "random_from_to", "random"])
@pytest.mark.parametrize("shape", [(5,), (4, 5), (40,)])
def test_in_place_draws(draw, shape):
    draws_match(lambda lib: draw(lib, lib.empty(*shape)))


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8", "bool"])
def test_random_of_integer_dtypes(dtype):
    draws_match(lambda lib: lib.empty(30, dtype=getattr(lib, dtype)).random_())


def test_functions_with_distributions():
    draws_match(lambda lib: lib.normal(1.5, 2.0, size=(20,)))
    draws_match(lambda lib: lib.normal(lib.zeros(3, 2), lib.ones(3, 2) * 2))
    draws_match(lambda lib: lib.normal(lib.arange(5.0), 0.5))
    draws_match(lambda lib: lib.normal(0.25, lib.arange(1.0, 6.0)))
    draws_match(lambda lib: lib.bernoulli(lib.full((10,), 0.3)))
    draws_match(lambda lib: lib.bernoulli(lib.zeros(7), 0.6))
    draws_match(lambda lib: lib.rand_like(lib.zeros(3, 4)))
    draws_match(lambda lib: lib.randn_like(lib.zeros(20)))
    draws_match(lambda lib: lib.randint_like(lib.zeros(2, 3), 10))
    draws_match(lambda lib: lib.randint_like(lib.zeros(5, dtype=lib.int64), -3, 40))
    both(8)
    parts = tg.utils.data.random_split(range(6), [3, 3], generator=tg.default_generator)
    theirs = torch.utils.data.random_split(range(6), [3, 3], generator=torch.default_generator)
    assert [list(p) for p in parts] == [list(p) for p in theirs]
    assert tg.manual_seed(1) is tg.default_generator


def test_generators():
    for seed in (0, 5, 2 ** 40):
        g, h = tg.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        assert_same_bits(tg.randn(20, generator=g), torch.randn(20, generator=h))
        assert_same_bits(tg.rand(3, generator=g), torch.rand(3, generator=h))
        assert_same_bits(tg.randperm(9, generator=g), torch.randperm(9, generator=h))
    # a new generator starts from PyTorch's default seed
    assert_same_bits(tg.randn(3, generator=tg.Generator()),
                     torch.randn(3, generator=torch.Generator()))
    assert tg.Generator().initial_seed() == torch.Generator().initial_seed()
    # drawing from one leaves the global stream alone
    both(7)
    tg.randn(5, generator=tg.Generator())
    assert_same_bits(tg.randn(4), torch.randn(4))


def test_states_round_trip():
    both(11)
    tg.randn(1)                          # (a normal is kept: the state holds it too)
    state = tg.get_rng_state()
    a = tg.randn(5)
    tg.set_rng_state(state)
    assert_same_bits(tg.randn(5), a)
    g = tg.Generator().manual_seed(3)
    s = g.get_state()
    b = tg.rand(4, generator=g)
    assert_same_bits(tg.rand(4, generator=g.set_state(s)), b)
    before = tg.get_rng_state()
    with pytest.raises(TypeError):
        tg.set_rng_state([1, 2, 3])
    with pytest.raises(RuntimeError, match="Invalid mt19937 state"):
        tg.set_rng_state(tg.zeros(10, dtype=tg.uint8))
    assert_same_bits(tg.get_rng_state(), before)     # (a refused state changes nothing)


MODULES = [
    lambda nn: nn.Linear(5, 3),
    lambda nn: nn.Linear(300, 200),
    lambda nn: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)),
    lambda nn: nn.Conv1d(3, 4, 3),
    lambda nn: nn.Conv2d(3, 8, 3),
    lambda nn: nn.Embedding(10, 4),
    lambda nn: nn.RNN(3, 4),
    lambda nn: nn.LSTM(3, 4, num_layers=2),
    lambda nn: nn.GRU(3, 4, bidirectional=True),
    lambda nn: nn.LSTMCell(3, 4),
    lambda nn: nn.MultiheadAttention(8, 2),
    lambda nn: nn.TransformerEncoderLayer(8, 2, 16),
    lambda nn: nn.Bilinear(3, 4, 2),
]


@pytest.mark.parametrize("make", MODULES)
def test_module_initialisation(make):
    both(4)
    mine, theirs = dict(make(tg.nn).named_parameters()), dict(make(torch.nn).named_parameters())
    assert list(mine) == list(theirs)
    for name in mine:
        assert_same_bits(mine[name], theirs[name])
    assert_same_bits(tg.rand(2), torch.rand(2))


@pytest.mark.parametrize("init", ["uniform_", "normal_", "xavier_uniform_", "xavier_normal_",
                                  "kaiming_uniform_", "kaiming_normal_"])
@pytest.mark.parametrize("shape", [(6, 5), (20, 30), (3, 4, 5)])
def test_init_functions(init, shape):
    draws_match(lambda lib: getattr(lib.nn.init, init)(lib.empty(*shape)))


@pytest.mark.parametrize("p", [0.0, 0.3, 0.5, 1.0])
def test_dropout(p):
    x = np.linspace(-1, 1, 24).reshape(4, 6)

    def make(lib):
        inp = lib.tensor(x, requires_grad=True)
        out = lib.nn.functional.dropout(inp, p)
        out.backward(lib.ones(4, 6))
        return lib.cat([out.detach().reshape(-1), inp.grad.reshape(-1)])
    draws_match(make)
    draws_match(lambda lib: lib.nn.Dropout(p)(lib.ones(40)))


def test_data_loading_order():
    def epochs(lib, **kw):
        data = lib.utils.data
        loader = data.DataLoader(data.TensorDataset(lib.arange(10.0)), batch_size=3, **kw)
        return lib.cat([batch[0] for _ in range(2) for batch in loader])
    draws_match(lambda lib: epochs(lib, shuffle=True), seed=2)
    draws_match(lambda lib: epochs(lib, shuffle=False), seed=2)
    draws_match(lambda lib: epochs(lib, shuffle=True,
                                   generator=lib.Generator().manual_seed(9)), seed=2)

    def sampled(lib):
        data = lib.utils.data
        picks = list(data.RandomSampler(range(7), replacement=True, num_samples=40))
        return picks + list(data.SubsetRandomSampler([3, 5, 7, 9])) + list(
            data.RandomSampler(range(6), num_samples=8))
    draws_match(sampled, seed=5)

    def split(lib):
        parts = lib.utils.data.random_split(range(10), [0.6, 0.4])
        return [i for part in parts for i in part]
    draws_match(split, seed=6)


@pytest.mark.parametrize("replacement", [True, False])
def test_weighted_random_sampler(replacement):
    weights = [0.1, 0.9, 0.4, 0.7, 3.0, 0.6, 0.0, 2.5]

    def sampled(lib):
        data = lib.utils.data
        sampler = data.WeightedRandomSampler(weights, 6, replacement=replacement)
        seeded = data.WeightedRandomSampler(lib.tensor(weights), 5, replacement,
                                            generator=lib.Generator().manual_seed(4))
        loader = data.DataLoader(data.TensorDataset(lib.arange(8.0)), batch_size=3,
                                 sampler=data.WeightedRandomSampler(weights, 7))
        assert len(sampler) == 6 and len(loader) == 3
        return list(sampler) + list(sampler) + list(seeded) + [
            int(i) for _ in range(2) for batch in loader for i in batch[0]]
    draws_match(sampled, seed=7)


@pytest.mark.parametrize("args", [
    ([1.0, 2.0], 0), ([1.0, 2.0], -1), ([1.0, 2.0], True), ([1.0, 2.0], 2.0),
    ([1.0, 2.0], 2, 1), ([[1.0, 2.0]], 2), (5.0, 2)])
def test_weighted_random_sampler_refuses_what_pytorch_refuses(args):
    with pytest.raises(ValueError) as theirs:
        torch.utils.data.WeightedRandomSampler(*args)
    with pytest.raises(ValueError) as mine:
        tg.utils.data.WeightedRandomSampler(*args)
    assert str(mine.value) == str(theirs.value)


def test_compiled_function_that_draws_runs_eagerly():
    # a call that draws random numbers is not replayed (it would repeat the first draw)
    f = tg.compile(lambda x: x + tg.randn(3))
    both(12)
    x = tg.zeros(3, requires_grad=True)
    first, second = f(x), f(x)
    assert_same_bits(first, torch.randn(3))
    assert_same_bits(second, torch.randn(3))


def _exact_fma(x, a, b):
    return float(Fraction(x) * Fraction(a) + Fraction(b))


finite = st.floats(-1e30, 1e30, allow_nan=False, allow_infinity=False)


@given(xs=st.lists(finite, min_size=1, max_size=80), a=finite, b=finite)
@settings(max_examples=300, deadline=None)
def test_fma_rounds_once(xs, a, b):
    # below 32 values one at a time, above as arrays: both against exact arithmetic
    got = fma(np.array(xs), a, b)
    assert [float(v) for v in got] == [_exact_fma(x, a, b) for x in xs]


def test_fma_halfway_cases():
    # s + v lands halfway between two doubles and the bits beyond decide (both directions)
    x = np.array([1 + 2 ** -52, 1 + 2 ** -51, 3.0] * 20)
    for a, b in ((1 - 2 ** -53, 2.0 ** 53), (1 - 2 ** -53, -2.0 ** 53), (1 - 2 ** -53, 2.0 ** 54),
                 (1 + 2 ** -52, 2.0 ** 53)):
        for part in (x[:3], x):
            assert [float(v) for v in fma(part, a, b)] == [_exact_fma(v, a, b) for v in part]
    assert [float(v) for v in fma(np.array([math.inf, -math.inf, math.nan, -0.0] * 10), 2.0,
                                   0.0)][:4][:2] == [math.inf, -math.inf]
