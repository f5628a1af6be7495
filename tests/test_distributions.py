"""``tapegrad.distributions`` against ``torch.distributions``: shapes, moments, entropy,
``log_prob``/``cdf``/``icdf`` and their gradients, the draws of ``sample``/``rsample`` after
``manual_seed`` (bit for bit), ``expand``, ``repr``, PyTorch's ValueError texts of argument
and support validation, ``kl_divergence`` of the registered pairs (and the
NotImplementedError of the others), central differences, and a short VAE and REINFORCE
training loop whose Adam-updated parameters must match PyTorch's."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tapegrad as tg
import tapegrad.distributions as TD
from oracle import same_bits, same_text
from tapegrad.distributions import Normal, kl_divergence  # noqa: F401  (the import forms)
from tapegrad.testing import gradcheck

torch = pytest.importorskip("torch")
PD = torch.distributions


def close(ours, theirs, atol=1e-12, what=""):
    a = np.asarray(ours.detach().numpy() if hasattr(ours, "detach") else ours)
    b = np.asarray(theirs.detach().numpy() if hasattr(theirs, "detach") else theirs)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=1e-11, atol=atol, err_msg=what)


def _values(rng, kind, shape):
    x = rng.standard_normal(shape)
    if kind == "pos":
        return np.exp(0.5 * x) + 0.1
    if kind == "unit":
        return 0.05 + 0.9 / (1 + np.exp(-x))
    return x


# name -> (parameter kinds, constructor, [value kind for log_prob], has cdf/icdf, event dims)
# The constructor gets the module of distributions and the parameter tensors.
CASES = {
    "Normal": (("real", "pos"), lambda D, a, b: D.Normal(a, b), True),
    "Laplace": (("real", "pos"), lambda D, a, b: D.Laplace(a, b), True),
    "Exponential": (("pos",), lambda D, r: D.Exponential(r), True),
    "Uniform": (("real", "pos"), lambda D, lo, w: D.Uniform(lo, lo + w), True),
    "Bernoulli_probs": (("unit",), lambda D, p: D.Bernoulli(probs=p), False),
    "Bernoulli_logits": (("real",), lambda D, l: D.Bernoulli(logits=l), False),
    "Categorical_probs": (("pos",), lambda D, p: D.Categorical(probs=p), False),
    "Categorical_logits": (("real",), lambda D, l: D.Categorical(logits=l), False),
    "Independent": (("real", "pos"), lambda D, a, b: D.Independent(D.Normal(a, b), 1), False),
    "OneHotCategorical": (("real",), lambda D, l: D.OneHotCategorical(logits=l), False),
}


def _build(m, D, name, arrays):
    params = [m.tensor(a, requires_grad=True) for a in arrays]
    return params, CASES[name][1](D, *params)


def _grads(params):
    return [p.grad for p in params]


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=6, deadline=None)
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3), seed=st.integers(0, 2 ** 16),
       sample_shape=st.sampled_from([(), (2,), (3, 1)]))
def test_a_distribution_matches_pytorch(name, shape, seed, sample_shape):
    rng = np.random.default_rng(seed)
    arrays = [_values(rng, kind, shape) for kind in CASES[name][0]]
    levels = 0.05 + 0.9 * rng.random(shape)           # where icdf is taken
    results = []
    for m, D in ((tg, TD), (torch, PD)):
        params, d = _build(m, D, name, arrays)
        r = {"batch": tuple(d.batch_shape), "event": tuple(d.event_shape), "repr": repr(d),
             "has_rsample": d.has_rsample}
        for prop in ("mean", "mode", "variance", "stddev"):
            r[prop] = getattr(d, prop)
        r["entropy"] = d.entropy()
        m.manual_seed(seed)
        r["sample"] = d.sample(sample_shape)
        r["sample_requires_grad"] = r["sample"].requires_grad
        x = r["sample"]
        if d.has_rsample:
            m.manual_seed(seed + 1)
            x = d.rsample(sample_shape)
            r["rsample"] = x
        lp = d.log_prob(x)
        r["log_prob"], r["log_prob_fn"] = lp, type(lp.grad_fn).__name__
        loss = lp.sum() + r["entropy"].sum() + (x.sum() if d.has_rsample else 0)
        if CASES[name][2]:
            u = m.tensor(levels)
            y = d.cdf(x)
            z = d.icdf(u)
            r["cdf"], r["icdf"] = y, z
            loss = loss + y.sum() + z.sum()
        loss.backward()
        r["grads"] = _grads(params)
        e = d.expand((2,) + tuple(d.batch_shape))
        r["expand"] = (tuple(e.batch_shape), e.log_prob(x).shape, repr(e))
        results.append(r)
    ours, theirs = results
    for key in ours:
        a, b = ours[key], theirs[key]
        if key in ("sample", "rsample"):
            same_bits(a, b, key)
        elif key == "grads":
            for g, h in zip(a, b):
                close(g, h, what=key)
        elif isinstance(b, torch.Tensor):
            close(a, b, what=key)
        else:
            assert same_text(a, b), (key, a, b)


def test_normal_repr_and_scalar_parameters():
    assert repr(TD.Normal(tg.zeros(3), tg.ones(3))) == \
        "Normal(loc: tapegrad.Size([3]), scale: tapegrad.Size([3]))"
    assert same_text(repr(TD.Normal(0.0, 1.0)), repr(PD.Normal(0.0, 1.0)))
    assert TD.Normal(0.0, 1.0).batch_shape == tg.Size()
    assert TD.Normal(0.0, 1.0).loc.dtype == tg.float64


def _raising(make):
    with pytest.raises(Exception) as info:
        make()
    return type(info.value), str(info.value)


BAD = [
    lambda m, D: D.Normal(m.zeros(2), m.tensor([1.0, -1.0])),
    lambda m, D: D.Normal(m.tensor([0.0, math.nan]), m.ones(2)),
    lambda m, D: D.Normal(0.0, 1.0).log_prob(m.tensor(math.nan)),
    lambda m, D: D.Normal(m.zeros(3), m.ones(3)).log_prob(m.zeros(2)),
    lambda m, D: D.Normal(0.0, 1.0).log_prob(0.5),
    lambda m, D: D.Independent(D.Normal(m.zeros(3), m.ones(3)), 1).log_prob(m.zeros(1, 2)),
    lambda m, D: D.Independent(D.Normal(m.zeros(3), m.ones(3)), 2),
    lambda m, D: D.Bernoulli(probs=m.tensor([1.5])),
    lambda m, D: D.Bernoulli(),
    lambda m, D: D.Bernoulli(probs=m.tensor(0.5), logits=m.tensor(0.0)),
    lambda m, D: D.Bernoulli(probs=m.tensor([0.5])).log_prob(m.tensor([0.5])),
    lambda m, D: D.Categorical(probs=m.tensor([0.5, -0.5])),
    lambda m, D: D.Categorical(probs=m.tensor([0.5, 0.5])).log_prob(m.tensor(2)),
    lambda m, D: D.Categorical(logits=m.tensor(1.0)),
    lambda m, D: D.Categorical(probs=m.tensor(1.0)),
    lambda m, D: D.OneHotCategorical(probs=m.tensor([0.5, 0.5])).log_prob(m.tensor([1.0, 1.0])),
    lambda m, D: D.OneHotCategorical(logits=m.zeros(2)).log_prob(m.tensor([1.0])),
    lambda m, D: D.Uniform(m.tensor([0.0]), m.tensor([-1.0])),
    lambda m, D: D.Uniform(0.0, 1.0).log_prob(m.tensor(3.0)),
    lambda m, D: D.Exponential(m.tensor([-1.0])),
    lambda m, D: D.Exponential(1.0).log_prob(m.tensor(-1.0)),
    lambda m, D: D.Laplace(0.0, m.tensor([0.0])),
    lambda m, D: D.kl_divergence(D.Normal(0.0, 1.0), D.Categorical(logits=m.zeros(2))),
    lambda m, D: D.kl_divergence(D.Normal(0.0, 1.0), D.Bernoulli(0.5)),
    lambda m, D: D.kl_divergence(D.Independent(D.Normal(m.zeros(2, 2), m.ones(2, 2)), 1),
                                 D.Independent(D.Normal(m.zeros(2, 2), m.ones(2, 2)), 2)),
    lambda m, D: D.Distribution.set_default_validate_args(2),
]


@pytest.mark.parametrize("index", range(len(BAD)))
def test_bad_arguments_raise_pytorchs_error(index):
    theirs = _raising(lambda: BAD[index](torch, PD))
    ours = _raising(lambda: BAD[index](tg, TD))
    assert ours[0] is theirs[0]
    assert same_text(ours[1], theirs[1]), (ours[1], theirs[1])


def test_validation_can_be_turned_off():
    for m, D in ((tg, TD), (torch, PD)):
        d = D.Normal(m.zeros(1), m.tensor([-1.0]), validate_args=False)
        assert d.log_prob(m.tensor([0.0])).isnan().all()
        D.Distribution.set_default_validate_args(False)
        try:
            D.Exponential(m.tensor([-1.0]))
        finally:
            D.Distribution.set_default_validate_args(True)
        with pytest.raises(ValueError):
            D.Exponential(m.tensor([-1.0]))


def _pair(D, m, name, arrays):
    a = [m.tensor(x, requires_grad=True) for x in arrays]
    ctor = {
        "Normal": lambda i: D.Normal(a[i], a[i + 1]),
        "Laplace": lambda i: D.Laplace(a[i], a[i + 1]),
        "Exponential": lambda i: D.Exponential(a[i + 1]),
        "Uniform": lambda i: D.Uniform(a[i], a[i] + a[i + 1]),
        "Bernoulli": lambda i: D.Bernoulli(logits=a[i]),
        "Categorical": lambda i: D.Categorical(logits=a[i]),
        "OneHotCategorical": lambda i: D.OneHotCategorical(logits=a[i]),
        "Independent": lambda i: D.Independent(D.Normal(a[i], a[i + 1]), 1),
    }
    return a, ctor


KL_PAIRS = [("Normal", "Normal"), ("Bernoulli", "Bernoulli"), ("Categorical", "Categorical"),
            ("Uniform", "Uniform"), ("Laplace", "Laplace"), ("Exponential", "Exponential"),
            ("Independent", "Independent"), ("OneHotCategorical", "OneHotCategorical"),
            ("Exponential", "Normal"),
            ("Laplace", "Normal"), ("Normal", "Laplace"), ("Uniform", "Normal"),
            ("Uniform", "Exponential"), ("Normal", "Uniform"), ("Normal", "Exponential"),
            ("Laplace", "Uniform"), ("Laplace", "Exponential"), ("Exponential", "Uniform")]


@pytest.mark.parametrize("pair", KL_PAIRS, ids="-".join)
@settings(max_examples=5, deadline=None)
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=2), seed=st.integers(0, 2 ** 16))
def test_kl_divergence_matches_pytorch(pair, shape, seed):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape), np.exp(0.5 * rng.standard_normal(shape)) + 0.1,
              rng.standard_normal(shape), np.exp(0.5 * rng.standard_normal(shape)) + 0.1]
    if pair == ("Uniform", "Uniform") and seed % 2:
        arrays[2] = arrays[0] - 0.5                   # q's interval covers p's: finite
        arrays[3] = arrays[1] + 1.0
    if pair == ("Uniform", "Exponential") and seed % 2:
        arrays[0] = np.abs(arrays[0])                 # inside the exponential's support
    out = []
    for m, D in ((tg, TD), (torch, PD)):
        a, ctor = _pair(D, m, None, arrays)
        k = D.kl_divergence(ctor[pair[0]](0), ctor[pair[1]](2))
        finite = k.isfinite()
        (k * finite).sum().backward() if k.requires_grad else None
        out.append((k, type(k.grad_fn).__name__, [x.grad for x in a]))
    (k1, n1, g1), (k2, n2, g2) = out
    close(k1, k2, what="kl")
    assert n1 == n2
    for g, h in zip(g1, g2):
        assert (g is None) == (h is None)
        if g is not None:
            close(g, h, what="kl grad")


def test_kl_zero_probabilities_follow_pytorch():
    for probs_p, probs_q in (([0.0, 1.0, 0.3], [0.5, 0.0, 1.0]), ([[0.0, 1.0], [0.5, 0.5]],
                                                                  [[1.0, 0.0], [0.0, 1.0]])):
        for cls in ("Bernoulli", "Categorical"):
            ours = kl_divergence(getattr(TD, cls)(probs=tg.tensor(probs_p)),
                                 getattr(TD, cls)(probs=tg.tensor(probs_q)))
            theirs = PD.kl_divergence(getattr(PD, cls)(probs=torch.tensor(probs_p)),
                                      getattr(PD, cls)(probs=torch.tensor(probs_q)))
            close(ours, theirs, what=cls)


def test_register_kl_most_specific_and_memo():
    class MyNormal(TD.Normal):
        pass

    p, q = MyNormal(tg.zeros(2), tg.ones(2)), TD.Normal(tg.ones(2), tg.ones(2))
    close(kl_divergence(p, q), PD.kl_divergence(PD.Normal(torch.zeros(2), torch.ones(2)),
                                                PD.Normal(torch.ones(2), torch.ones(2))))

    @TD.register_kl(MyNormal, TD.Normal)
    def _mine(p, q):
        return tg.full(tuple(p.batch_shape), 7.0)

    assert kl_divergence(p, q).tolist() == [7.0, 7.0]
    assert kl_divergence(q, p).tolist() != [7.0, 7.0]


@pytest.mark.parametrize("name", ["Normal", "Laplace", "Exponential", "Bernoulli_logits",
                                  "Categorical_logits"])
def test_log_prob_gradients_central_differences(name):
    rng = np.random.default_rng(1)
    arrays = [_values(rng, kind, (2, 3)) for kind in CASES[name][0]]
    params = [tg.tensor(a, requires_grad=True) for a in arrays]
    tg.manual_seed(0)
    x = CASES[name][1](TD, *params).sample()

    def f(*ps):
        d = CASES[name][1](TD, *ps)
        return d.log_prob(x).sum() + d.entropy().sum()
    assert gradcheck(f, *params)


def test_kl_gradients_central_differences():
    mu = tg.tensor([0.3, -0.2], requires_grad=True)
    s = tg.tensor([0.7, 1.3], requires_grad=True)
    assert gradcheck(lambda a, b: (kl_divergence(TD.Normal(a, b), TD.Laplace(0.5, 2.0))
                                   + kl_divergence(TD.Laplace(a, b), TD.Normal(0.0, 1.0))).sum(),
                     mu, s)


def _vae_run(m, D):
    m.manual_seed(0)
    x = m.randn(8, 4)
    enc = m.nn.Linear(4, 4)
    dec = m.nn.Linear(2, 4)
    params = list(enc.parameters()) + list(dec.parameters())
    opt = m.optim.Adam(params, lr=0.01)
    for _ in range(3):
        opt.zero_grad()
        h = enc(x)
        mu, std = h[:, :2], m.nn.functional.softplus(h[:, 2:]) + 1e-3
        q = D.Normal(mu, std)
        z = q.rsample()
        kl = D.kl_divergence(q, D.Normal(0.0, 1.0)).sum()
        rec = -D.Independent(D.Normal(dec(z), 1.0), 1).log_prob(x).sum()
        loss = rec + kl
        loss.backward()
        opt.step()
    return params, type(loss.grad_fn).__name__, type(kl.grad_fn).__name__


def _reinforce_run(m, D):
    m.manual_seed(1)
    obs = m.randn(6, 3)
    policy = m.nn.Linear(3, 4)
    opt = m.optim.Adam(policy.parameters(), lr=0.05)
    for _ in range(3):
        opt.zero_grad()
        dist = D.Categorical(logits=policy(obs))
        a = dist.sample()
        adv = (a.to(m.float64) - 1.5)
        loss = -(dist.log_prob(a) * adv).sum() - 0.01 * dist.entropy().sum()
        loss.backward()
        opt.step()
    return list(policy.parameters()), type(loss.grad_fn).__name__, a


@pytest.mark.parametrize("run", [_vae_run, _reinforce_run])
def test_training_loops_match_pytorch(run):
    ours, theirs = run(tg, TD), run(torch, PD)
    for p, q in zip(ours[0], theirs[0]):
        close(p, q, atol=1e-10, what=run.__name__)
    assert ours[1:2] == theirs[1:2]
    if run is _reinforce_run:
        assert ours[2].tolist() == theirs[2].tolist()
    else:
        assert ours[2] == theirs[2]


def test_import_forms_and_public_names():
    import importlib
    mod = importlib.import_module("tapegrad.distributions")
    assert mod is tg.distributions is TD
    assert "distributions" in dir(tg)
    for name in ("Normal", "Bernoulli", "Categorical", "Uniform", "Independent", "Laplace",
                 "Exponential", "Distribution", "kl_divergence", "register_kl"):
        assert name in TD.__all__ and hasattr(PD, name)
    assert TD.constraints.positive.check(tg.tensor([1.0, -1.0])).tolist() == [True, False]
    assert repr(TD.constraints.unit_interval) == repr(PD.constraints.unit_interval)


def test_every_public_name_has_an_example():
    for module in (TD, TD.constraints):
        for name in module.__all__:
            obj = getattr(module, name)
            if callable(obj) and not isinstance(obj, TD.constraints.Constraint):
                assert "Example:" in (obj.__doc__ or ""), name


@pytest.mark.parametrize("kind", ["covariance_matrix", "precision_matrix", "scale_tril"])
@settings(max_examples=4, deadline=None)
@given(batch=st.lists(st.integers(1, 3), max_size=2), n=st.integers(1, 3),
       seed=st.integers(0, 2 ** 16), sample_shape=st.sampled_from([(), (2,)]))
def test_multivariate_normal_matches_pytorch(kind, batch, n, seed, sample_shape):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal(tuple(batch[1:]) + (n, n))
    C = A @ np.swapaxes(A, -1, -2) + np.eye(n)
    matrix = np.linalg.cholesky(C) if kind == "scale_tril" else C
    loc = rng.standard_normal(tuple(batch) + (n,))
    Lq = np.tril(rng.standard_normal((n, n)), -1) + np.diag(1 + rng.random(n))
    results = []
    for m, D in ((tg, TD), (torch, PD)):
        l, c = m.tensor(loc, requires_grad=True), m.tensor(matrix, requires_grad=True)
        d = D.MultivariateNormal(l, **{kind: c})
        m.manual_seed(seed)
        x = d.rsample(sample_shape)
        s = d.sample(sample_shape)
        k = D.kl_divergence(d, D.MultivariateNormal(m.zeros(n), scale_tril=m.tensor(Lq)))
        lp = d.log_prob(x)
        loss = lp.sum() + d.entropy().sum() + k.sum() + x.sum()
        loss.backward()
        results.append(dict(repr=repr(d), shapes=(tuple(d.batch_shape), tuple(d.event_shape)),
                            x=x, s=s, lp=lp, k=k, entropy=d.entropy(), mean=d.mean,
                            variance=d.variance, cov=d.covariance_matrix,
                            prec=d.precision_matrix, tril=d.scale_tril, gl=l.grad, gc=c.grad,
                            names=(type(lp.grad_fn).__name__, type(k.grad_fn).__name__)))
    ours, theirs = results
    for key, a in ours.items():
        b = theirs[key]
        if isinstance(b, torch.Tensor):
            # the draws' eps are PyTorch's bit for bit; L @ eps may round differently
            close(a, b, atol=1e-10, what=key)
        else:
            assert same_text(a, b), (key, a, b)


MVN_BAD = [
    lambda m, D: D.MultivariateNormal(m.zeros(2), covariance_matrix=-m.eye(2)),
    lambda m, D: D.MultivariateNormal(m.zeros(2), covariance_matrix=m.tensor([[1.0, 2.0],
                                                                              [0.0, 1.0]])),
    lambda m, D: D.MultivariateNormal(m.zeros(2), scale_tril=m.tensor([[1.0, 1.0],
                                                                       [0.0, 1.0]])),
    lambda m, D: D.MultivariateNormal(m.zeros(2), scale_tril=m.tensor([[1.0, 0.0],
                                                                       [0.5, -1.0]])),
    lambda m, D: D.MultivariateNormal(m.zeros(2), precision_matrix=m.zeros(2, 2)),
    lambda m, D: D.MultivariateNormal(m.zeros(2)),
    lambda m, D: D.MultivariateNormal(m.zeros(2), m.eye(2), scale_tril=m.eye(2)),
    lambda m, D: D.MultivariateNormal(m.tensor(0.0), m.eye(2)),
    lambda m, D: D.MultivariateNormal(m.zeros(2), m.ones(2)),
    lambda m, D: D.MultivariateNormal(m.zeros(2), m.eye(2)).log_prob(m.zeros(3)),
    lambda m, D: D.kl_divergence(D.MultivariateNormal(m.zeros(2), m.eye(2)),
                                 D.MultivariateNormal(m.zeros(3), m.eye(3))),
    lambda m, D: D.kl_divergence(D.MultivariateNormal(m.zeros(2), m.eye(2)),
                                 D.Normal(0.0, 1.0)),
]


@pytest.mark.parametrize("index", range(len(MVN_BAD)))
def test_multivariate_normal_bad_arguments(index):
    theirs = _raising(lambda: MVN_BAD[index](torch, PD))
    ours = _raising(lambda: MVN_BAD[index](tg, TD))
    assert ours[0] is theirs[0]
    assert same_text(ours[1], theirs[1]), (ours[1], theirs[1])


def test_multivariate_normal_central_differences():
    rng = np.random.default_rng(2)
    loc = tg.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    L = tg.tensor(np.tril(rng.standard_normal((3, 3)), -1) + 2 * np.eye(3), requires_grad=True)
    x = tg.tensor(rng.standard_normal((4, 2, 3)))
    assert gradcheck(lambda l, s: TD.MultivariateNormal(l, scale_tril=s.tril()).log_prob(x).sum()
                     + TD.kl_divergence(TD.MultivariateNormal(l, scale_tril=s.tril()),
                                        TD.MultivariateNormal(tg.zeros(3), tg.eye(3))).sum(),
                     loc, L)
