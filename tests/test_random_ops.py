"""Random ops beyond the plain draws (feature and alpha dropout, rrelu, multinomial, the
remaining nn.init fills) give PyTorch's float64 values, gradients and grad_fn names after
the same ``manual_seed``, and consume exactly PyTorch's share of the stream (a draw after
each is compared too)."""
import warnings

import numpy as np
import pytest

import same_draws
import tapegrad as tg
from same_draws import assert_same_bits, values

torch = pytest.importorskip("torch")
torch.set_default_dtype(torch.float64)


def both(seed):
    same_draws.both(torch, seed)


def draws_match(make, seed=0):
    same_draws.draws_match(torch, make, seed)


def grad_fn_name(t):
    if t.grad_fn is None:
        return None
    return type(t.grad_fn).__name__ if hasattr(t, "is_leaf") and isinstance(
        t, torch.Tensor) else t.grad_fn.name()


def same_error(fn):
    """``fn(lib)`` raises the same type and text on both libraries."""
    with pytest.raises(Exception) as want:
        fn(torch)
    with pytest.raises(type(want.value)) as got:
        fn(tg)
    assert str(got.value).replace("tapegrad.", "torch.") == str(want.value)


# ---------------------------------------------------------------------------------------------
# dropout1d/2d/3d, alpha_dropout, feature_alpha_dropout and their modules
# ---------------------------------------------------------------------------------------------
FEATURE = {"dropout1d": [(2, 3, 4), (3, 5), (4, 7, 1), (0, 3, 2)],
           "dropout2d": [(2, 3, 2, 2), (2, 3, 5), (5, 20, 1, 1), (3, 4)],
           "dropout3d": [(2, 3, 1, 2, 2), (3, 2, 2, 2), (2, 20, 1, 1, 1), (3, 4, 5)],
           "alpha_dropout": [(40,), (4, 5), (), (0, 3), (3, 1, 2)],
           "feature_alpha_dropout": [(2, 30), (2, 3, 4), (5, 20, 1, 1)]}
CASES = [(name, shape) for name, shapes in FEATURE.items() for shape in shapes]


@pytest.mark.parametrize("p", [0.0, 0.2, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("name,shape", CASES)
def test_dropout_variants(name, shape, p):
    x = np.linspace(-2, 3, int(np.prod(shape))).reshape(shape)
    names = []

    def make(lib):
        inp = lib.tensor(x, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = getattr(lib.nn.functional, name)(inp, p, training=True)
        names.append(grad_fn_name(out))
        out.backward(lib.ones(shape) * 0.7)
        return out, inp.grad
    draws_match(make, seed=int(p * 10) + len(shape))
    assert names[0] == names[1], names


@pytest.mark.parametrize("name,shape", CASES)
def test_dropout_variants_eval_and_inplace(name, shape):
    x = np.linspace(-2, 3, int(np.prod(shape))).reshape(shape)
    fn = name

    def evaluated(lib):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return getattr(lib.nn.functional, fn)(lib.tensor(x), 0.4, training=False)
    draws_match(evaluated)

    def inplace(lib):
        t = lib.tensor(x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = getattr(lib.nn.functional, fn)(t, 0.4, training=True, inplace=True)
        return out, t
    draws_match(inplace, seed=5)


@pytest.mark.parametrize("module,shape", [("Dropout1d", (2, 6, 3)), ("Dropout2d", (2, 6, 3, 1)),
                                          ("Dropout3d", (6, 2, 1, 2)),
                                          ("AlphaDropout", (5, 4)),
                                          ("FeatureAlphaDropout", (3, 7, 2))])
def test_dropout_modules(module, shape):
    x = np.linspace(-1, 1, int(np.prod(shape))).reshape(shape)

    def make(lib):
        m = getattr(lib.nn, module)(0.3)
        assert repr(m) == f"{module}(p=0.3, inplace=False)"
        train = m(lib.tensor(x))
        m.eval()
        return train, m(lib.tensor(x))
    draws_match(make)
    assert not isinstance(tg.nn.AlphaDropout(), tg.nn.Dropout)


def test_dropout_variant_errors_and_warnings():
    for name in FEATURE:
        same_error(lambda lib, n=name: getattr(lib.nn.functional, n)(lib.ones(3), 1.5))
        same_error(lambda lib, n=name: getattr(lib.nn.functional, n)(lib.ones(3), -0.1))
    same_error(lambda lib: lib.nn.functional.dropout1d(lib.ones(3)))
    same_error(lambda lib: lib.nn.functional.dropout1d(lib.ones(1, 2, 3, 4)))
    same_error(lambda lib: lib.nn.functional.feature_alpha_dropout(lib.ones(3), 0.5, True))
    same_error(lambda lib: lib.nn.functional.dropout2d(lib.ones(3)))
    same_error(lambda lib: lib.nn.Dropout2d(2.0))
    same_error(lambda lib: lib.nn.AlphaDropout(-1.0))
    for name, shape in [("dropout2d", (2, 3)), ("dropout2d", (2, 3, 4)),
                        ("dropout3d", (2, 3, 4)), ("dropout2d", (2, 3, 4, 5))]:
        texts = []
        for lib in (torch, tg):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                getattr(lib.nn.functional, name)(lib.ones(shape))
            texts.append([str(w.message) for w in caught])
        assert texts[0] == texts[1]
        assert (texts[0] == []) == (shape == (2, 3, 4, 5))


def test_plain_dropout_keeps_0d():
    draws_match(lambda lib: lib.nn.functional.dropout(lib.tensor(1.5), 0.3))


@pytest.mark.parametrize("name", ["dropout1d", "alpha_dropout", "feature_alpha_dropout"])
def test_compiled_dropout_variants_draw_fresh_noise(name):
    # a replay would give the first call's noise again: the generator's change sends every
    # call to eager mode, which draws what an uncompiled program draws
    fn = getattr(tg.nn.functional, name)
    compiled = tg.compile(lambda x: fn(x, 0.5, training=True) * 2.0)
    tg.manual_seed(3)
    got = [compiled(tg.ones(4, 8) * k) for k in (1.0, 2.0, 3.0)]
    tg.manual_seed(3)
    want = [fn(tg.ones(4, 8) * k, 0.5, training=True) * 2.0 for k in (1.0, 2.0, 3.0)]
    for a, b in zip(got, want, strict=True):
        assert_same_bits(a, b)
    assert compiled.stats.replays == 0


# ---------------------------------------------------------------------------------------------
# rrelu
# ---------------------------------------------------------------------------------------------
SPECIAL = [-1.0, 2.0, -3.0, 0.0, -0.0, 4.0, float("nan"), -float("inf"), float("inf"), -1e-300]


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("bounds", [(1 / 8, 1 / 3), (0.1, 0.1), (-0.5, 2.0), (0.0, 1e-3)])
@pytest.mark.parametrize("data", [SPECIAL, "randn40", "randn3x17", "scalar", "empty"])
def test_rrelu(data, bounds, training):
    if data == "randn40":
        x = np.random.default_rng(1).standard_normal(40)
    elif data == "randn3x17":
        x = np.random.default_rng(2).standard_normal((3, 17))
    elif data == "scalar":
        x = np.array(-2.5)
    elif data == "empty":
        x = np.zeros((0, 3))
    else:
        x = np.array(data)
    names = []

    def make(lib):
        inp = lib.tensor(x, requires_grad=True)
        out = lib.nn.functional.rrelu(inp, *bounds, training=training)
        names.append(grad_fn_name(out))
        out.backward(lib.ones(x.shape) * 1.5)
        return out, inp.grad
    draws_match(make)
    assert names[0] == names[1] == "RreluWithNoiseBackward0"
    assert tg.nn.functional.rrelu(tg.tensor(x), *bounds).grad_fn is None
    # in place on a value with a history: PyTorch's RreluWithNoiseBackward1 after its input's
    # node, the same draws and gradient; on a view, the view's AsStridedBackward0
    for view in (False, True):
        names.clear()

        def make_in_place(lib):
            inp = lib.tensor(x, requires_grad=True)
            y = inp * 1.0
            out = lib.nn.functional.rrelu_(y[..., 1:] if view else y, *bounds,
                                          training=training)
            names.append((grad_fn_name(out),
                          [n.name().split("::")[-1] for n, _ in out.grad_fn.next_functions]))
            y.backward(lib.ones(x.shape) * 1.5)
            return y, inp.grad
        if not view or x.ndim:
            draws_match(make_in_place)
            assert names[0] == names[1]
            assert names[0][0] == ("AsStridedBackward0" if view else "RreluWithNoiseBackward1")


@pytest.mark.parametrize("training", [True, False])
def test_rrelu_in_place_and_module(training):
    x = np.linspace(-3, 2, 23)

    def in_place(lib):
        t = lib.tensor(x)
        out = lib.nn.functional.rrelu_(t, 0.2, 0.4, training)
        assert out is t
        u = lib.tensor(x)
        out2 = lib.nn.functional.rrelu(u, training=training, inplace=True)
        return out, out2, u
    draws_match(in_place)

    def module(lib):
        m = lib.nn.RReLU(0.05, 0.5)
        if not training:
            m.eval()
        return m(lib.tensor(x)), m(lib.tensor(x[::-1].copy()))
    draws_match(module, seed=7)
    assert repr(tg.nn.RReLU()) == repr(torch.nn.RReLU())
    assert repr(tg.nn.RReLU(0.1, 0.3, True)) == repr(torch.nn.RReLU(0.1, 0.3, True))


def test_rrelu_errors():
    for training in (True, False):
        same_error(lambda lib, t=training: lib.nn.functional.rrelu(lib.ones(3), 0.5, 0.1, t))
    # nothing drawn and nothing changed by the refused call
    both(0)
    t = tg.tensor([-1.0, 2.0])
    with pytest.raises(RuntimeError):
        tg.nn.functional.rrelu_(t, 0.5, 0.1, True)
    assert_same_bits(t, torch.tensor([-1.0, 2.0]))
    assert_same_bits(tg.rand(3), torch.rand(3))


def test_rrelu_gradient_against_central_differences():
    x = np.array([-1.3, 0.7, -0.2, 2.0])
    tg.manual_seed(4)
    inp = tg.tensor(x, requires_grad=True)
    tg.nn.functional.rrelu(inp, training=True).sum().backward()
    tg.manual_seed(4)
    slopes = tg.nn.functional.rrelu(tg.ones(4) * -1.0, training=True).neg().numpy()
    # the k-th element <= 0 takes the k-th slope drawn; with those slopes fixed, rrelu is
    # piecewise linear and its central differences are the gradient
    slope = np.ones(4)
    slope[x <= 0] = slopes[:int(np.count_nonzero(x <= 0))]
    h = 1e-6
    numeric = []
    for i in range(4):
        f_up = (x[i] + h) * (1.0 if x[i] + h > 0 else slope[i])
        f_down = (x[i] - h) * (1.0 if x[i] - h > 0 else slope[i])
        numeric.append((f_up - f_down) / (2 * h))
    np.testing.assert_allclose(inp.grad.numpy(), numeric, rtol=1e-6)


def test_compiled_rrelu_draws_fresh_slopes():
    fn = tg.nn.functional.rrelu
    compiled = tg.compile(lambda x: fn(x, training=True) * 2.0)
    inputs = [np.array([1.0, 2.0]), np.array([-1.0, 2.0]), np.array([-1.0, -2.0])] * 2
    tg.manual_seed(3)
    got = [compiled(tg.tensor(v)) for v in inputs]
    tg.manual_seed(3)
    want = [fn(tg.tensor(v), training=True) * 2.0 for v in inputs]
    for a, b in zip(got, want, strict=True):
        assert_same_bits(a, b)
    assert compiled.stats.replays == 0
    # eval mode reads no values: its compiled calls replay and stay right
    compiled = tg.compile(lambda x: fn(x) * 2.0)
    for v in inputs:
        assert_same_bits(compiled(tg.tensor(v)), fn(tg.tensor(v)) * 2.0)


# ---------------------------------------------------------------------------------------------
# multinomial
# ---------------------------------------------------------------------------------------------
def _weights(shape, seed, zero_first):
    w = np.random.default_rng(seed).random(shape) ** 3
    if zero_first:
        w[..., 0] = 0.0
    return w


@pytest.mark.parametrize("replacement", [False, True])
@pytest.mark.parametrize("shape", [(5,), (3, 7), (1, 40), (4, 2), (2, 300), (1,)])
@pytest.mark.parametrize("zero_first", [False, True])
def test_multinomial(shape, replacement, zero_first):
    if zero_first and shape[-1] == 1:
        return
    w = _weights(shape, sum(shape), zero_first)
    positive = shape[-1] - zero_first
    # (without replacement, at most the positive weights: topk's order among the tied zero
    # ratios is its own)
    counts = sorted({1, min(2, positive), positive} | ({positive * 3 + 1} if replacement
                                                       else set()))
    for n in counts:
        for seed in (0, 11):
            draws_match(lambda lib, k=n: lib.multinomial(lib.tensor(w), k, replacement),
                        seed=seed)
            draws_match(lambda lib, k=n: lib.tensor(w).multinomial(k, replacement=replacement),
                        seed=seed + 1)


def test_multinomial_generator_and_uneven_weights():
    w = np.array([1e-300, 1.0, 1e10, 0.5, 3.0, 0.0, 7.0])

    def make(lib):
        g = lib.Generator().manual_seed(5)
        return (lib.multinomial(lib.tensor(w), 6, generator=g),
                lib.multinomial(lib.tensor(w), 50, True, generator=g),
                lib.multinomial(lib.tensor(w[None].repeat(3, 0)), 1, True))
    draws_match(make)


def test_multinomial_errors():
    for rep in (False, True):
        for w in ([1.0, -1.0], [1.0, float("inf")], [1.0, float("nan")], [0.0, 0.0],
                  [[1.0, 2.0], [0.0, 0.0]], [[[1.0, 2.0]]], 1.0):
            same_error(lambda lib, v=w, r=rep: lib.multinomial(lib.tensor(v), 1, r))
        same_error(lambda lib, r=rep: lib.multinomial(lib.tensor([1.0, 2.0]), 0, r))
        same_error(lambda lib, r=rep: lib.multinomial(lib.tensor([1, 2]), 1, r))
        draws_match(lambda lib, r=rep: lib.multinomial(lib.zeros(0, 3), 2, r))
    same_error(lambda lib: lib.multinomial(lib.tensor([1.0, 2.0]), 3))
    same_error(lambda lib: lib.multinomial(lib.zeros(2, 0), 2, True))
    # a refused call draws nothing
    both(0)
    with pytest.raises(RuntimeError):
        tg.multinomial(tg.tensor([1.0, -1.0]), 1)
    assert_same_bits(tg.rand(3), torch.rand(3))


# ---------------------------------------------------------------------------------------------
# nn.init: trunc_normal_, orthogonal_, sparse_, eye_, dirac_
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(6, 5), (40,), (3, 4, 5), (0, 3), (17,)])
@pytest.mark.parametrize("params", [(0.0, 1.0, -2.0, 2.0), (0.5, 2.0, -1.0, 1.0),
                                    (0.0, 1.0, 1.5, 3.0), (0.0, 0.02, -0.04, 0.04),
                                    (3.0, 0.5, -1.0, 0.0), (0.0, 10.0, -0.1, 0.1)])
def test_trunc_normal(shape, params):
    def make(lib):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = lib.empty(*shape)
            out = lib.nn.init.trunc_normal_(t, *params)
        assert out is t
        return t
    draws_match(make)

    def with_generator(lib):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return lib.nn.init.trunc_normal_(lib.empty(*shape), *params,
                                             generator=lib.Generator().manual_seed(3))
    draws_match(with_generator, seed=1)


def test_trunc_normal_warning():
    texts = []
    for lib in (torch, tg):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.nn.init.trunc_normal_(lib.empty(3), 10.0, 1.0, -1.0, 1.0)
        texts.append([str(w.message) for w in caught])
    assert texts[0] == texts[1] and len(texts[0]) == 1


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 4), (2, 3, 4), (6, 2, 1), (1, 7)])
@pytest.mark.parametrize("gain", [1, 0.5])
def test_orthogonal(shape, gain):
    # the normal draws are PyTorch's (a draw after them agrees bit for bit); Q comes from
    # NumPy's LAPACK, so it is compared to PyTorch's to rounding
    both(0)
    a = tg.nn.init.orthogonal_(tg.empty(*shape), gain)
    b = torch.nn.init.orthogonal_(torch.empty(*shape), gain)
    np.testing.assert_allclose(values(a), values(b), rtol=0, atol=1e-13)
    assert_same_bits(tg.rand(3), torch.rand(3))
    draws_match(lambda lib: lib.nn.init.orthogonal_(lib.empty(0, 3)))


@pytest.mark.parametrize("shape", [(4, 3), (10, 7), (1, 5), (5, 1)])
@pytest.mark.parametrize("sparsity", [0.0, 0.1, 0.5, 1.0])
def test_sparse(shape, sparsity):
    draws_match(lambda lib: lib.nn.init.sparse_(lib.empty(*shape), sparsity, std=0.5))
    # a generator is used for the normals only: randperm draws from the global one
    draws_match(lambda lib: lib.nn.init.sparse_(lib.empty(*shape), sparsity,
                                                generator=lib.Generator().manual_seed(9)))


@pytest.mark.parametrize("shape", [(2, 3), (3, 2), (4, 4), (0, 2)])
def test_eye(shape):
    draws_match(lambda lib: lib.nn.init.eye_(lib.empty(*shape)))


@pytest.mark.parametrize("shape,groups", [((2, 2, 3), 1), ((4, 3, 5), 2), ((6, 2, 3, 4), 3),
                                          ((2, 4, 3, 3, 2), 1), ((3, 1, 2, 2), 1)])
def test_dirac(shape, groups):
    draws_match(lambda lib: lib.nn.init.dirac_(lib.empty(*shape), groups))


def test_init_errors():
    same_error(lambda lib: lib.nn.init.eye_(lib.empty(3)))
    same_error(lambda lib: lib.nn.init.dirac_(lib.empty(3, 3)))
    same_error(lambda lib: lib.nn.init.dirac_(lib.empty(3, 3, 3), groups=2))
    same_error(lambda lib: lib.nn.init.orthogonal_(lib.empty(3)))
    same_error(lambda lib: lib.nn.init.sparse_(lib.empty(3, 3, 3), 0.5))


@pytest.mark.parametrize("name,args", [("uniform", ()), ("normal", ()), ("constant", (0.3,)),
                                       ("eye", ()), ("xavier_uniform", ()),
                                       ("xavier_normal", ()), ("kaiming_uniform", ()),
                                       ("kaiming_normal", ()), ("orthogonal", ()),
                                       ("sparse", (0.5,))])
def test_deprecated_init_names(name, args):
    texts = []

    def make(lib):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = getattr(lib.nn.init, name)(lib.empty(4, 3), *args)
        texts.append([(w.category, str(w.message)) for w in caught])
        return out
    if name == "orthogonal":
        both(0)
        np.testing.assert_allclose(values(make(tg)), values(make(torch)), atol=1e-13)
    else:
        draws_match(make)
    assert texts[0] == texts[1] and texts[0][0][0] is FutureWarning
    assert getattr(tg.nn.init, name).__name__ == name
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        draws_match(lambda lib: lib.nn.init.dirac(lib.empty(2, 2, 3)))


# ---------------------------------------------------------------------------------------------
# poisson
# ---------------------------------------------------------------------------------------------
RATES = [0.0, 1e-3, 0.3, 2.5, 9.99, 10.0, 37.0, 1e4, 1e7]


@pytest.mark.parametrize("seed", range(12))
def test_poisson(seed):
    rates = np.random.default_rng(seed).choice(RATES, (4, 6))
    draws_match(lambda lib: lib.poisson(lib.tensor(rates)), seed=seed)
    draws_match(lambda lib: lib.poisson(lib.tensor(rates[0, 0])), seed=seed)
    draws_match(lambda lib: lib.poisson(lib.tensor(rates),
                                        generator=lib.Generator().manual_seed(seed)))


def test_poisson_edges_and_errors():
    draws_match(lambda lib: lib.poisson(lib.zeros(0, 2)))
    for bad in ([-1.0, 1.0], [1.0, 2.0, float("nan")], [3.0, -0.5]):
        both(0)
        same_error(lambda lib, b=bad: lib.poisson(lib.tensor(b)))
        # the elements before the bad rate drew, as in PyTorch
        assert_same_bits(tg.rand(3), torch.rand(3))
    same_error(lambda lib: lib.poisson(lib.tensor([1, 2])))
