"""The transforms and constraints PyTorch's ``torch.distributions`` re-exports (CatTransform,
StackTransform, LowerCholeskyTransform, PositiveDefiniteTransform, CorrCholeskyTransform,
CumulativeDistributionTransform; cat, stack, lower_triangular, square, symmetric,
positive_semidefinite, corr_cholesky, multinomial) and the further distributions, against
PyTorch: values, log-determinants and their gradients, inverses, constraint checks, reprs,
seeded draws, log_prob and its gradients, moments, entropy and validation errors."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.distributions as TD
from oracle import same_text

torch = pytest.importorskip("torch")
PD = torch.distributions

TRANSFORM_NAMES = [
    "AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform",
    "CorrCholeskyTransform", "CumulativeDistributionTransform", "ExpTransform",
    "IndependentTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform",
    "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftplusTransform",
    "TanhTransform", "SoftmaxTransform", "StackTransform", "StickBreakingTransform",
    "Transform", "identity_transform"]


@pytest.fixture(autouse=True)
def _float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def close(ours, theirs, what="", rtol=1e-12, atol=1e-13):
    a = np.asarray(ours.detach().numpy() if hasattr(ours, "detach") else ours)
    b = np.asarray(theirs.detach().numpy() if hasattr(theirs, "detach") else theirs)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=what)


def both(array, grad=False):
    """The same float64 values as a tapegrad and a torch tensor."""
    return (tg.tensor(array, requires_grad=grad), torch.tensor(array, requires_grad=grad))


@pytest.mark.parametrize("name", TRANSFORM_NAMES)
def test_transform_names_are_re_exported_as_pytorch_does(name):
    assert hasattr(PD, name)
    assert getattr(TD, name) is getattr(TD.transforms, name)
    assert name in TD.__all__


RNG = np.random.RandomState(0)
X = RNG.randn(2, 6)


def _transform_cases(D):
    return {
        "corr_cholesky": (D.CorrCholeskyTransform(), X),
        "cat_batch": (D.CatTransform([D.ExpTransform(), D.AffineTransform(1.0, 2.0)], dim=-1,
                                     lengths=[2, 4]), X),
        "cat_event": (D.CatTransform([D.IndependentTransform(D.ExpTransform(), 1),
                                      D.IndependentTransform(D.TanhTransform(), 1)], dim=-1,
                                     lengths=[3, 3]), X),
        "stack": (D.StackTransform([D.ExpTransform(), D.SigmoidTransform()], dim=0), X),
        "lower_cholesky": (D.LowerCholeskyTransform(), X[:, :4].reshape(2, 2, 2)),
        "positive_definite": (D.PositiveDefiniteTransform(), X[:, :4].reshape(2, 2, 2)),
        "cdf": (D.CumulativeDistributionTransform(D.Normal(0.5, 2.0)), X),
    }


@pytest.mark.parametrize("case", list(_transform_cases(TD)))
def test_new_transforms_match_pytorch_with_gradients(case):
    ours_t, x = _transform_cases(TD)[case]
    theirs_t, _ = _transform_cases(PD)[case]
    xa, xb = both(x, grad=True)
    ya, yb = ours_t(xa), theirs_t(xb)
    close(ya, yb, "y")
    close(ours_t.inv(ya.detach()), theirs_t.inv(yb.detach()), "inverse")
    bijective = theirs_t.bijective
    assert ours_t.bijective == bijective
    if case not in ("lower_cholesky", "positive_definite"):
        la, lb = ours_t.log_abs_det_jacobian(xa, ya), theirs_t.log_abs_det_jacobian(xb, yb)
        close(la, lb, "log_abs_det_jacobian")
        (ya.sum() + la.sum()).backward()
        (yb.sum() + lb.sum()).backward()
    else:
        ya.sum().backward()
        yb.sum().backward()
    close(xa.grad, xb.grad, "grad")
    assert repr(ours_t.domain) == repr(theirs_t.domain)
    assert repr(ours_t.codomain) == repr(theirs_t.codomain)
    assert ours_t.codomain.event_dim == theirs_t.codomain.event_dim


def test_corr_cholesky_shapes_and_errors():
    t, p = TD.CorrCholeskyTransform(), PD.CorrCholeskyTransform()
    assert tuple(t.forward_shape((5, 6))) == tuple(p.forward_shape((5, 6))) == (5, 4, 4)
    assert tuple(t.inverse_shape((5, 4, 4))) == tuple(p.inverse_shape((5, 4, 4)))
    for lib, tr in ((torch, p), (tg, t)):
        with pytest.raises(ValueError, match="Input is not a flattened lower-diagonal number"):
            tr.forward_shape((5,))
        with pytest.raises(ValueError, match="Input is not square"):
            tr.inverse_shape((2, 3))


def test_cat_and_stack_transform_size_errors_are_pytorch_texts():
    texts = []
    for D, lib in ((PD, torch), (TD, tg)):
        t = D.CatTransform([D.ExpTransform()], lengths=[2])
        s = D.StackTransform([D.ExpTransform()])
        with pytest.raises(AssertionError) as cat_error:
            t(lib.zeros(3))
        with pytest.raises(AssertionError) as stack_error:
            s(lib.zeros(2))
        with pytest.raises(AssertionError) as length_error:
            D.CatTransform([D.ExpTransform()], lengths=[1, 2])
        texts.append((str(cat_error.value), str(stack_error.value), str(length_error.value)))
    assert texts[0] == texts[1]


def _constraint_cases(D, lib):
    C = D.constraints
    m = lib.tensor([[[1.0, 0.0], [0.5, 2.0]], [[1.0, 3.0], [3.0, 1.0]], [[2.0, 1.0], [1.0, 2.0]]])
    v = lib.tensor([[1.0, 2.0, 0.0], [2.0, 2.0, 1.0], [-1.0, 1.0, 0.0]])
    corr = D.CorrCholeskyTransform()(lib.tensor([[0.3], [-2.0]]))
    return [
        (C.lower_triangular, m), (C.lower_cholesky, m), (C.square, m), (C.square, v[:2]),
        (C.symmetric, m), (C.positive_semidefinite, m), (C.positive_definite, m),
        (C.corr_cholesky, corr), (C.corr_cholesky, 2 * corr), (C.multinomial(3), v),
        (C.cat([C.positive, C.real], dim=-1, lengths=[1, 2]), v),
        (C.stack([C.positive, C.real, C.nonnegative], dim=-1), v),
        (C.stack([C.positive, C.real, C.nonnegative], dim=0), v),
    ]


def test_new_constraints_check_and_repr_as_pytorch():
    ours, theirs = _constraint_cases(TD, tg), _constraint_cases(PD, torch)
    for (c, value), (d, other) in zip(ours, theirs):
        got, want = c.check(value), d.check(other)
        assert got.dtype == tg.bool, repr(c)
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=repr(d))
        assert repr(c) == repr(d)
        assert (c.event_dim, c.is_discrete) == (d.event_dim, d.is_discrete), repr(d)
    for name in ("cat", "stack", "lower_triangular", "square", "symmetric",
                 "positive_semidefinite", "corr_cholesky", "multinomial"):
        assert name in TD.constraints.__all__


def _params(seed=1):
    r = np.random.RandomState(seed)
    a = np.exp(r.randn(3)) + 0.3
    b = np.exp(r.randn(3)) + 0.3
    p = 1 / (1 + np.exp(-r.randn(3)))
    return a, b, p


def _lib(D):
    return torch if D is PD else tg


# name -> constructor from (a, b, p) tensors; the first two positive, p in (0, 1)
DISTRIBUTIONS = {
    "Kumaraswamy": lambda D, a, b, p: D.Kumaraswamy(a, b),
    "FisherSnedecor": lambda D, a, b, p: D.FisherSnedecor(a * 4, b * 6),
    "RelaxedBernoulli": lambda D, a, b, p: D.RelaxedBernoulli(a, probs=p),
    "RelaxedBernoulli_logits": lambda D, a, b, p: D.RelaxedBernoulli(a, logits=b - 1),
    "RelaxedOneHotCategorical": lambda D, a, b, p: D.RelaxedOneHotCategorical(a[0], probs=p),
    "RelaxedOneHotCategorical_logits":
        lambda D, a, b, p: D.RelaxedOneHotCategorical(a[0], logits=b),
    "OneHotCategoricalStraightThrough":
        lambda D, a, b, p: D.OneHotCategoricalStraightThrough(probs=p),
    "NegativeBinomial": lambda D, a, b, p: D.NegativeBinomial(a * 3, probs=p),
    "NegativeBinomial_logits": lambda D, a, b, p: D.NegativeBinomial(a * 3, logits=b - 1),
    "Multinomial": lambda D, a, b, p: D.Multinomial(5, probs=p),
    "Multinomial_logits": lambda D, a, b, p: D.Multinomial(4, logits=(a * b).reshape(1, 3)),
    "MixtureSameFamily": lambda D, a, b, p: D.MixtureSameFamily(D.Categorical(probs=p),
                                                                D.Normal(a - 1, b)),
    "MixtureSameFamily_event": lambda D, a, b, p: D.MixtureSameFamily(
        D.Categorical(logits=b), D.Independent(D.Gamma(a.expand(2, 3).T, b.expand(2, 3).T), 1)),
    "LogisticNormal": lambda D, a, b, p: D.LogisticNormal(a - 1, b),
    "ContinuousBernoulli": lambda D, a, b, p: D.ContinuousBernoulli(probs=p),
    # probabilities inside (0.499, 0.501), where the Taylor expansions stand in
    "ContinuousBernoulli_near_half":
        lambda D, a, b, p: D.ContinuousBernoulli(probs=0.4995 + p / 1000),
    "ContinuousBernoulli_logits": lambda D, a, b, p: D.ContinuousBernoulli(logits=b - 1),
    "GeneralizedPareto": lambda D, a, b, p: D.GeneralizedPareto(a - 1, b, p - 0.5),
    "GeneralizedPareto_heavy": lambda D, a, b, p: D.GeneralizedPareto(a, b, p + 0.3),
    "LowRankMultivariateNormal": lambda D, a, b, p: D.LowRankMultivariateNormal(
        (a - 1).expand(2, 3), _lib(D).stack([b, p], -1), a),
    "LowRankMultivariateNormal_batched_factor": lambda D, a, b, p: D.LowRankMultivariateNormal(
        a - 1, _lib(D).stack([b, p], -1).expand(2, 3, 2) * 0.5, b.expand(2, 3)),
    "LKJCholesky": lambda D, a, b, p: D.LKJCholesky(3, a),
    "LKJCholesky_dim5": lambda D, a, b, p: D.LKJCholesky(5, b[1]),
    "VonMises": lambda D, a, b, p: D.VonMises(a * 3, b),
    # concentrations on both sides of the Bessel approximations' switch at 3.75
    "VonMises_concentrated": lambda D, a, b, p: D.VonMises(a - 1, b * 4),
}


def _make(name, lib, D, seed=1):
    tensors = [lib.tensor(v, requires_grad=True) for v in _params(seed)]
    return DISTRIBUTIONS[name](D, *tensors), tensors


def _grads(tensors):
    return [None if t.grad is None else t.grad.numpy().copy() for t in tensors]


def _same_grads(ours, theirs, what):
    for g, h in zip(ours, theirs):
        assert (g is None) == (h is None), what
        if g is not None:
            close(g, h, what)


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_seeded_samples_match_pytorch(name):
    ours, _ = _make(name, tg, TD)
    theirs, _ = _make(name, torch, PD)
    for seed, shape in ((0, ()), (5, (4,)), (11, (2, 3))):
        tg.manual_seed(seed)
        torch.manual_seed(seed)
        a, b = ours.sample(shape), theirs.sample(shape)
        assert tuple(a.shape) == tuple(b.shape)
        close(a, b, f"sample {seed}")
        assert not a.requires_grad
    assert ours.has_rsample == theirs.has_rsample


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_rsample_matches_pytorch_with_parameter_gradients(name):
    ours, ours_params = _make(name, tg, TD)
    theirs, their_params = _make(name, torch, PD)
    if not theirs.has_rsample:
        with pytest.raises(NotImplementedError):
            ours.rsample()
        return
    tg.manual_seed(7)
    torch.manual_seed(7)
    a, b = ours.rsample((3,)), theirs.rsample((3,))
    close(a, b, "rsample")
    (a * a).sum().backward()
    (b * b).sum().backward()
    _same_grads(_grads(ours_params), _grads(their_params), "rsample grad")


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_log_prob_and_its_gradients_match_pytorch(name):
    theirs, _ = _make(name, torch, PD)
    torch.manual_seed(3)
    value = theirs.sample((4,))
    ours, ours_params = _make(name, tg, TD)
    theirs, their_params = _make(name, torch, PD)
    a = ours.log_prob(tg.tensor(value.numpy()))
    b = theirs.log_prob(value)
    close(a, b, "log_prob")
    a.sum().backward()
    b.sum().backward()
    _same_grads(_grads(ours_params), _grads(their_params), "log_prob grad")


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
@pytest.mark.parametrize("what", ["mean", "variance", "mode", "entropy", "stddev"])
def test_moments_and_entropy_match_pytorch(name, what):
    ours, _ = _make(name, tg, TD)
    theirs, _ = _make(name, torch, PD)
    try:
        want = getattr(theirs, what)
        want = want() if what == "entropy" else want
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            got = getattr(ours, what)
            got() if what == "entropy" else got
        return
    got = getattr(ours, what)
    got = got() if what == "entropy" else got
    close(got, want, what)


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_expand_matches_pytorch(name):
    ours, _ = _make(name, tg, TD)
    theirs, _ = _make(name, torch, PD)
    shape = (2,) + tuple(theirs.batch_shape)
    a, b = ours.expand(shape), theirs.expand(shape)
    assert type(a).__name__ == type(b).__name__
    assert tuple(a.batch_shape) == tuple(b.batch_shape)
    assert tuple(a.event_shape) == tuple(b.event_shape)
    tg.manual_seed(2)
    torch.manual_seed(2)
    close(a.sample(), b.sample(), "sample of the expanded")
    assert repr(a.support) == repr(b.support)


def _message(make):
    with pytest.raises(ValueError) as error:
        make()
    return str(error.value)


@pytest.mark.parametrize("name,args", [
    ("Kumaraswamy", ([1.0, -1.0], [1.0, 1.0])),
    ("FisherSnedecor", ([1.0, 2.0], [0.0, 1.0])),
    ("NegativeBinomial", ([-1.0, 2.0], [0.5, 0.5])),
    ("NegativeBinomial", ([1.0, 2.0], [0.5, 1.0])),
])
def test_parameter_validation_errors_are_pytorch_texts(name, args):
    theirs, ours = [_message(lambda: getattr(D, name)(*[lib.tensor(a) for a in args],
                                                      validate_args=True))
                    for D, lib in ((PD, torch), (TD, tg))]
    assert same_text(ours, theirs)


VALIDATION_ERRORS = [
    lambda D, lib: D.RelaxedBernoulli(lib.tensor(0.5), probs=lib.tensor([1.5]),
                                      validate_args=True),
    lambda D, lib: D.RelaxedOneHotCategorical(lib.tensor(0.5), probs=lib.tensor([-0.5, 0.6]),
                                              validate_args=True),
    lambda D, lib: D.RelaxedBernoulli(lib.tensor(0.5)),
    lambda D, lib: D.NegativeBinomial(lib.tensor(2.0)),
    lambda D, lib: D.Kumaraswamy(lib.tensor([1.0]), lib.tensor([2.0]),
                                 validate_args=True).log_prob(lib.tensor([1.5])),
    lambda D, lib: D.NegativeBinomial(lib.tensor([2.0]), probs=lib.tensor([0.5]),
                                      validate_args=True).log_prob(lib.tensor([0.5])),
    lambda D, lib: D.FisherSnedecor(lib.tensor([2.0]), lib.tensor([3.0]),
                                    validate_args=True).log_prob(lib.tensor([-1.0])),
    lambda D, lib: D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(lib.zeros(2), 1.0)),
    lambda D, lib: D.MixtureSameFamily(D.Categorical(probs=lib.ones(2)), 3.0),
    lambda D, lib: D.MixtureSameFamily(D.Categorical(probs=lib.ones(2)),
                                       D.Normal(lib.zeros(3), 1.0)),
    lambda D, lib: D.MixtureSameFamily(D.Categorical(probs=lib.ones(4, 2)),
                                       D.Normal(lib.zeros(3, 2), 1.0)),
    lambda D, lib: D.Multinomial(3, probs=lib.ones(2), validate_args=True).log_prob(
        lib.tensor([2.0, 2.0])),
    lambda D, lib: D.LogisticNormal(lib.zeros(2), -lib.ones(2), validate_args=True),
    lambda D, lib: D.ContinuousBernoulli(lib.tensor([1.5]), validate_args=False),
    lambda D, lib: D.ContinuousBernoulli(logits=lib.tensor([1.5]),
                                         validate_args=True).log_prob(lib.tensor([1.5])),
    lambda D, lib: D.GeneralizedPareto(0.0, -1.0, 0.5, validate_args=True),
    lambda D, lib: D.VonMises(lib.zeros(2), lib.tensor([1.0, 0.0]), validate_args=True),
    lambda D, lib: D.LKJCholesky(1, 1.0),
    lambda D, lib: D.LKJCholesky(2, lib.tensor([1.0, -1.0]), validate_args=True),
    lambda D, lib: D.LKJCholesky(2, 1.0, validate_args=True).log_prob(2 * lib.eye(2)),
    lambda D, lib: D.GeneralizedPareto(lib.zeros(1), lib.ones(1), -lib.ones(1),
                                       validate_args=True).log_prob(lib.tensor([2.0])),
    lambda D, lib: D.MixtureSameFamily(D.Categorical(probs=lib.ones(2)),
                                       D.Gamma(lib.ones(2), 1.0),
                                       validate_args=True).log_prob(lib.tensor([-1.0])),
]


def test_multinomial_refuses_a_tensor_total_count_as_pytorch():
    for D, lib in ((PD, torch), (TD, tg)):
        with pytest.raises(NotImplementedError, match="inhomogeneous total_count"):
            D.Multinomial(lib.tensor(3), probs=lib.ones(2))


@pytest.mark.parametrize("case", range(len(VALIDATION_ERRORS)))
def test_validation_and_support_errors_are_pytorch_texts(case):
    theirs, ours = [_message(lambda: VALIDATION_ERRORS[case](D, lib))
                    for D, lib in ((PD, torch), (TD, tg))]
    assert same_text(ours, theirs)


@pytest.mark.parametrize("name", ["ContinuousBernoulli", "ContinuousBernoulli_near_half",
                                  "ContinuousBernoulli_logits", "GeneralizedPareto",
                                  "GeneralizedPareto_heavy"])
def test_cdf_and_icdf_match_pytorch_with_gradients(name):
    u = np.linspace(0.02, 0.98, 7).reshape(7, 1)
    ours, ours_params = _make(name, tg, TD)
    theirs, their_params = _make(name, torch, PD)
    x = theirs.icdf(torch.tensor(u)).detach()
    close(ours.icdf(tg.tensor(u)), theirs.icdf(torch.tensor(u)), "icdf")
    a, b = ours.cdf(tg.tensor(x.numpy())), theirs.cdf(x)
    close(a, b, "cdf")
    a.sum().backward()
    b.sum().backward()
    _same_grads(_grads(ours_params), _grads(their_params), "cdf grad")


def test_generalized_pareto_support_and_survival_match_pytorch():
    ours, _ = _make("GeneralizedPareto", tg, TD)
    theirs, _ = _make("GeneralizedPareto", torch, PD)
    close(ours.support.upper_bound, theirs.support.upper_bound, "upper bound")
    value = theirs.mean.detach()
    close(ours.log_survival_function(tg.tensor(value.numpy())),
          theirs.log_survival_function(value), "log survival")


def _kl_pairs(D, lib):
    r = np.random.RandomState(4)
    a, b = lib.tensor(np.exp(r.randn(3)) + 0.2), lib.tensor(np.exp(r.randn(3)) + 0.2)
    p = lib.tensor(1 / (1 + np.exp(-r.randn(3))), requires_grad=True)
    q = lib.tensor(1 / (1 + np.exp(-r.randn(3))))
    cb = D.ContinuousBernoulli(probs=p)
    return [
        (cb, D.ContinuousBernoulli(probs=q)),
        (cb, D.ContinuousBernoulli(logits=a - 1)),
        (D.ContinuousBernoulli(probs=0.4999 + q / 1000), cb),
        (D.Beta(a, b), cb), (cb, D.Pareto(a, b)), (cb, D.Exponential(a)),
        (cb, D.Normal(a, b)), (cb, D.Uniform(a - 2, b + 1)), (cb, D.Uniform(-a, b)),
        (D.Exponential(a), cb), (D.Gamma(a, b), cb), (D.Gumbel(a, b), cb),
        (D.Laplace(a, b), cb), (D.Normal(a, b), cb), (D.Pareto(a, b), cb),
        (D.Uniform(q * 0.5, q * 0.5 + 0.4), cb), (D.Uniform(-q, q + 0.1), cb),
    ], p


@pytest.mark.parametrize("case", range(17))
def test_kl_divergences_of_continuous_bernoulli_match_pytorch(case):
    ours_pairs, ours_p = _kl_pairs(TD, tg)
    their_pairs, their_p = _kl_pairs(PD, torch)
    a = TD.kl_divergence(*ours_pairs[case])
    b = PD.kl_divergence(*their_pairs[case])
    close(a, b, "kl")
    if b.requires_grad:
        b.sum().backward()
        a.sum().backward()
        close(ours_p.grad, their_p.grad, "kl grad")


@pytest.mark.parametrize("name", ["LowRankMultivariateNormal",
                                  "LowRankMultivariateNormal_batched_factor"])
@pytest.mark.parametrize("what", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_low_rank_normal_matrices_match_pytorch_with_gradients(name, what):
    ours, ours_params = _make(name, tg, TD)
    theirs, their_params = _make(name, torch, PD)
    a, b = getattr(ours, what), getattr(theirs, what)
    close(a, b, what)
    (a * a).sum().backward()
    (b * b).sum().backward()
    _same_grads(_grads(ours_params), _grads(their_params), what + " grad")


def _low_rank_kl_pairs(D, lib):
    r = np.random.RandomState(6)
    loc = lib.tensor(r.randn(2, 3), requires_grad=True)
    factor = lib.tensor(r.randn(3, 2))
    diag = lib.tensor(np.exp(r.randn(3)))
    tril = lib.tensor(np.tril(r.randn(3, 3)) + 3 * np.eye(3))
    low = D.LowRankMultivariateNormal(loc, factor, diag)
    other = D.LowRankMultivariateNormal(lib.zeros(3), factor * 0.5 + 0.1, diag + 1)
    full = D.MultivariateNormal(lib.ones(3), scale_tril=tril)
    return [(low, other), (other, low), (full, low), (low, full)], loc


@pytest.mark.parametrize("case", range(4))
def test_kl_divergences_of_low_rank_normal_match_pytorch(case):
    ours_pairs, ours_loc = _low_rank_kl_pairs(TD, tg)
    their_pairs, their_loc = _low_rank_kl_pairs(PD, torch)
    a = TD.kl_divergence(*ours_pairs[case])
    b = PD.kl_divergence(*their_pairs[case])
    close(a, b, "kl")
    a.sum().backward()
    b.sum().backward()
    close(ours_loc.grad, their_loc.grad, "kl grad")


LOW_RANK_ERRORS = [
    lambda D, lib: D.LowRankMultivariateNormal(lib.tensor(0.0), lib.ones(1, 1), lib.ones(1)),
    lambda D, lib: D.LowRankMultivariateNormal(lib.zeros(2), lib.ones(2), lib.ones(2)),
    lambda D, lib: D.LowRankMultivariateNormal(lib.zeros(2), lib.ones(3, 1), lib.ones(2)),
    lambda D, lib: D.LowRankMultivariateNormal(lib.zeros(2), lib.ones(2, 1), lib.ones(3)),
    lambda D, lib: D.LowRankMultivariateNormal(lib.zeros(4, 2), lib.ones(3, 2, 1),
                                               lib.ones(2)),
    lambda D, lib: D.LowRankMultivariateNormal(lib.tensor([0.0, float("nan")]),
                                               lib.ones(2, 1), lib.ones(2),
                                               validate_args=True),
    lambda D, lib: D.kl_divergence(
        D.LowRankMultivariateNormal(lib.zeros(2), lib.ones(2, 1), lib.ones(2)),
        D.LowRankMultivariateNormal(lib.zeros(3), lib.ones(3, 1), lib.ones(3))),
]


@pytest.mark.parametrize("case", range(len(LOW_RANK_ERRORS)))
def test_low_rank_normal_errors_are_pytorch_texts(case):
    theirs, ours = [_message(lambda: LOW_RANK_ERRORS[case](D, lib))
                    for D, lib in ((PD, torch), (TD, tg))]
    assert same_text(ours, theirs)


def _registry_cases(D):
    C = D.constraints
    return [
        ("transform_to", C.lower_cholesky, np.random.RandomState(1).randn(2, 3, 3)),
        ("transform_to", C.positive_definite, np.random.RandomState(2).randn(3, 3)),
        ("transform_to", C.positive_semidefinite, np.random.RandomState(3).randn(3, 3)),
        ("biject_to", C.corr_cholesky, np.random.RandomState(4).randn(2, 3)),
        ("transform_to", C.corr_cholesky, np.random.RandomState(5).randn(6)),
        ("biject_to", C.cat([C.positive, C.interval(-1.0, 2.0)], dim=-1, lengths=[2, 1]),
         np.random.RandomState(6).randn(4, 3)),
        ("transform_to", C.cat([C.positive, C.less_than(2.0)], dim=0, lengths=[1, 3]),
         np.random.RandomState(7).randn(4, 4)),
        ("biject_to", C.stack([C.positive, C.unit_interval], dim=0),
         np.random.RandomState(8).randn(2, 3)),
        ("transform_to", C.stack([C.positive, C.greater_than(1.0)], dim=-1),
         np.random.RandomState(9).randn(3, 2)),
    ]


@pytest.mark.parametrize("case", range(9))
def test_biject_to_and_transform_to_of_the_new_constraints_match_pytorch(case):
    kind, ours_c, x = _registry_cases(TD)[case]
    _, their_c, _ = _registry_cases(PD)[case]
    ours_t, their_t = getattr(TD, kind)(ours_c), getattr(PD, kind)(their_c)
    assert type(ours_t).__name__ == type(their_t).__name__
    xa, xb = both(x, grad=True)
    ya, yb = ours_t(xa), their_t(xb)
    close(ya, yb, "y")
    assert bool(ours_c.check(ya).all())
    ya.sum().backward()
    yb.sum().backward()
    close(xa.grad, xb.grad, "grad")


def test_biject_to_lower_cholesky_is_refused_as_pytorch_does():
    for D in (PD, TD):
        with pytest.raises(NotImplementedError):
            D.biject_to(D.constraints.lower_cholesky)


def test_matrix_constraints_are_related_as_pytorch_s_classes_are():
    pairs = [("positive_definite", "symmetric"), ("positive_semidefinite", "symmetric"),
             ("symmetric", "square"), ("lower_cholesky", "lower_triangular"),
             ("corr_cholesky", "lower_cholesky")]
    for a, b in pairs:
        theirs = isinstance(getattr(PD.constraints, a), type(getattr(PD.constraints, b)))
        ours = isinstance(getattr(TD.constraints, a), type(getattr(TD.constraints, b)))
        assert ours == theirs, (a, b)


def _more_draws(D, lib):
    lib.manual_seed(0)
    counts = D.Multinomial(100, logits=lib.randn(2, 4)).sample((2,))
    lib.manual_seed(1)
    # a concentration below the proposal's Taylor switch and a very peaked one
    angles = D.VonMises(lib.tensor([0.5, -3.0]), lib.tensor([1e-6, 50.0])).sample((4,))
    lib.manual_seed(2)
    mixture = D.MixtureSameFamily(D.Categorical(logits=lib.randn(3, 2)),
                                  D.MultivariateNormal(lib.randn(3, 2, 4),
                                                       scale_tril=lib.eye(4))).sample((5,))
    return counts, angles, mixture


def test_more_seeded_draws_are_pytorch_s_bit_for_bit():
    for ours, theirs in zip(_more_draws(TD, tg), _more_draws(PD, torch)):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_multinomial_with_an_impossible_category_as_pytorch():
    values = []
    for D, lib in ((TD, tg), (PD, torch)):
        m = D.Multinomial(5, probs=lib.tensor([0.0, 0.5, 0.5]))
        values.append((m.log_prob(lib.tensor([0.0, 2.0, 3.0])), m.entropy()))
    close(values[0][0], values[1][0], "log_prob")
    close(values[0][1], values[1][1], "entropy")
