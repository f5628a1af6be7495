"""Random programs: sequences of ops applied to a pool of intermediate tensors.

Each step takes one or two tensors from the pool (leaves and earlier results; the same
tensor may be taken twice, or by many steps), so gradients fan out and accumulate along many
paths.  Several results are outputs at once.  Every program is checked against finite
differences and, where PyTorch is installed, against the same program run in PyTorch
(values, grad_fn names, and the gradients ``backward`` accumulates into the leaves).

Pool tensors all broadcast to (n, n): their shapes are (), (n,), (1, n), (n, 1) or (n, n).
Steps are written so that values stay moderate (exp and pow only of squashed values, products
with a squashed factor), whatever the program.  Leaf values come from a seeded generator:
hypothesis explores program structure, not adversarial values.
"""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import op_cases as C
import strategies as S  # noqa: F401 - makes the source tree importable
import tapegrad as tg
import tapegrad.functional as TF
from tapegrad.testing import gradcheck

try:
    import torch
except ImportError:  # the finite-difference checks still run
    torch = None

TG = C.Lib(tg, TF)
RTOL = 1e-9
ATOL = 1e-11


def full(a, n):
    return a.expand(n, n)


def _dim(draw, n):
    return {"dim": draw(st.sampled_from([0, 1, -1, -2]))}


def _none(draw, n):
    return {}


def _cut(draw, n):
    return {"k": draw(st.integers(1, n - 1)), "dim": draw(st.sampled_from([0, 1, -1]))}


def _index(draw, n):
    return {"idx": draw(st.lists(st.integers(-n, n - 1), min_size=n, max_size=n))}


def _select(draw, n):
    return {"i": draw(st.integers(-n, n - 1))}


def _norm(draw, n):
    return {"dim": draw(st.sampled_from([0, 1, -1])), "p": draw(st.sampled_from([1, 2, 3, math.inf]))}


def _transpose(draw, n):
    return {"how": draw(st.sampled_from(["t", "T", "mT", "transpose", "permute"]))}


def _transposed(a, n, how):
    a = full(a, n)
    if how == "t":
        return a.t()
    if how == "T":
        return a.T
    if how == "mT":
        return a.mT
    if how == "transpose":
        return a.transpose(0, 1)
    return a.permute(1, 0)


def _cat(m, a, b, n, k, dim):
    fa, fb = full(a, n), full(b, n)
    if dim == 0:
        return m.cat([fa[:k], fb[k:]], 0)
    return m.cat((fa[:, :k], fb[:, k:]), dim=dim)


# name -> (fn(m, a, b, n, **params), params(draw, n)); unary steps ignore b
STEPS = {
    # elementwise, one operand
    "neg": (lambda m, a, b, n: -a, _none),
    "tanh": (lambda m, a, b, n: a.tanh(), _none),
    "sin": (lambda m, a, b, n: a.sin(), _none),
    "cos": (lambda m, a, b, n: m.cos(a), _none),
    "sigmoid": (lambda m, a, b, n: a.sigmoid(), _none),
    "exp of tanh": (lambda m, a, b, n: a.tanh().exp(), _none),
    "expm1 of tanh": (lambda m, a, b, n: a.tanh().expm1(), _none),
    "tan of tanh": (lambda m, a, b, n: a.tanh().tan(), _none),
    "log1p of square": (lambda m, a, b, n: (a * a).log1p(), _none),
    "log of 1 + square": (lambda m, a, b, n: (a * a + 1.0).log(), _none),
    "sqrt of 1 + square": (lambda m, a, b, n: (1.0 + a * a).sqrt(), _none),
    "reciprocal": (lambda m, a, b, n: (1.0 + a * a).reciprocal(), _none),
    "scalar over": (lambda m, a, b, n: 2.0 / (1.0 + a * a), _none),
    "softplus": (lambda m, a, b, n: m.F.softplus(a), _none),
    "relu": (lambda m, a, b, n: a.relu(), _none),
    "abs": (lambda m, a, b, n: abs(a), _none),
    "clamp": (lambda m, a, b, n: a.clamp(-1.0, 1.0), _none),
    "clamp_min": (lambda m, a, b, n: a.clamp_min(-0.5), _none),
    "clamp_max": (lambda m, a, b, n: a.clamp_max(0.5), _none),
    "times own tanh": (lambda m, a, b, n: a * a.tanh(), _none),
    "cube of tanh": (lambda m, a, b, n: a.tanh() ** 3, _none),
    "2 ** tanh": (lambda m, a, b, n: 2.0 ** a.tanh(), _none),
    "affine": (lambda m, a, b, n: 0.5 * a - 1.5 + a / 4.0, _none),
    "rsub": (lambda m, a, b, n: 1.0 - a, _none),
    # elementwise, two operands (broadcast)
    "add": (lambda m, a, b, n: a + b, _none),
    "sub": (lambda m, a, b, n: a - b, _none),
    "mul by tanh": (lambda m, a, b, n: a * b.tanh(), _none),
    "div": (lambda m, a, b, n: a / (1.0 + b * b), _none),
    "pow": (lambda m, a, b, n: (1.0 + a.tanh() ** 2) ** b.tanh(), _none),
    "maximum": (lambda m, a, b, n: m.maximum(a, b), _none),
    "minimum": (lambda m, a, b, n: m.minimum(a, b), _none),
    "where": (lambda m, a, b, n: m.where(a > b, a, b - 1.0), _none),
    # reductions
    "sum": (lambda m, a, b, n, dim: full(a, n).sum(dim, keepdim=True), _dim),
    "sum all": (lambda m, a, b, n: a.sum(), _none),
    "mean": (lambda m, a, b, n, dim: full(a, n).mean(dim, keepdim=True), _dim),
    "mean all": (lambda m, a, b, n: a.mean(), _none),
    "prod of tanh": (lambda m, a, b, n, dim: full(a, n).tanh().prod(dim, keepdim=True), _dim),
    "amax": (lambda m, a, b, n, dim: full(a, n).amax(dim, keepdim=True), _dim),
    "amin": (lambda m, a, b, n, dim: full(a, n).amin(dim, keepdim=True), _dim),
    "max(dim)": (lambda m, a, b, n, dim: full(a, n).max(dim, keepdim=True).values, _dim),
    "min(dim)": (lambda m, a, b, n, dim: full(a, n).min(dim, keepdim=True)[0], _dim),
    "max all": (lambda m, a, b, n: a.max(), _none),
    "std": (lambda m, a, b, n, dim: (full(a, n).std(dim, keepdim=True) + 1.0), _dim),
    "sqrt of var": (lambda m, a, b, n, dim: (full(a, n).var(dim, keepdim=True) + 1.0).sqrt(),
                    _dim),
    "logsumexp": (lambda m, a, b, n, dim: full(a, n).logsumexp(dim, keepdim=True), _dim),
    "softmax": (lambda m, a, b, n, dim: full(a, n).softmax(dim), _dim),
    "log_softmax": (lambda m, a, b, n, dim: full(a, n).log_softmax(dim), _dim),
    "norm": (lambda m, a, b, n, dim, p: (full(a, n) + 0.1).norm(p, dim, keepdim=True), _norm),
    # linear algebra and structure
    "matmul": (lambda m, a, b, n: full(a, n).tanh() @ full(b, n), _none),
    "matrix-vector": (lambda m, a, b, n: full(a, n).tanh() @ full(b, n)[0], _none),
    "transpose": (lambda m, a, b, n, how: _transposed(a, n, how), _transpose),
    "rows": (lambda m, a, b, n, idx: full(a, n)[idx], _index),
    "columns": (lambda m, a, b, n, idx: full(a, n)[:, m.tensor(idx)], _index),
    "select": (lambda m, a, b, n, i: full(a, n)[i], _select),
    "reshape": (lambda m, a, b, n: full(a, n).reshape(-1).reshape(n, n), _none),
    "flatten and view": (lambda m, a, b, n: full(a, n).flatten().view(n, n), _none),
    "unsqueeze and squeeze": (lambda m, a, b, n: a.unsqueeze(0).squeeze(0), _none),
    "clone": (lambda m, a, b, n: a.clone(), _none),
    "expand": (lambda m, a, b, n: full(a, n), _none),
    "cat": (_cat, _cut),
    "stack and mean": (lambda m, a, b, n, dim: m.stack([full(a, n), full(b, n)], dim).mean(dim),
                       _dim),
}


class Program:
    """Leaves (shapes, which require grad, a value seed), steps, and which pool entries are
    the outputs."""

    def __init__(self, n, shapes, rg, seed, steps, outputs):
        self.n, self.shapes, self.rg, self.seed = n, shapes, rg, seed
        self.steps, self.outputs = steps, outputs

    def leaf_values(self):
        rng = np.random.default_rng(self.seed)
        return [rng.standard_normal(s) for s in self.shapes]

    def run(self, m, leaves):
        pool = list(leaves)
        for name, i, j, params in self.steps:
            pool.append(STEPS[name][0](m, pool[i], pool[j], self.n, **params))
        return tuple(pool[k] for k in self.outputs)

    def __repr__(self):
        lines = [f"Program(n={self.n}, seed={self.seed})"]
        for k, (s, f) in enumerate(zip(self.shapes, self.rg)):
            lines.append(f"  t{k} = leaf{s}{'' if f else ' (no grad)'}")
        for k, (name, i, j, params) in enumerate(self.steps, start=len(self.shapes)):
            lines.append(f"  t{k} = {name}(t{i}, t{j}, {params})")
        lines.append(f"  outputs: {['t%d' % k for k in self.outputs]}")
        return "\n".join(lines)


@st.composite
def programs(draw, max_steps=8):
    n = draw(st.integers(2, 3))
    kinds = [(), (n,), (1, n), (n, 1), (n, n)]
    shapes = [(n, n)] + draw(st.lists(st.sampled_from(kinds), max_size=2))
    rg = [True] + [draw(st.booleans()) for _ in shapes[1:]]
    steps = []
    for s in range(draw(st.integers(1, max_steps))):
        size = len(shapes) + s
        name = draw(st.sampled_from(sorted(STEPS)))
        # lean towards recent results, but any earlier tensor may be reused
        i = draw(st.one_of(st.just(size - 1), st.integers(0, size - 1)))
        j = draw(st.integers(0, size - 1))
        steps.append((name, i, j, STEPS[name][1](draw, n)))
    total = len(shapes) + len(steps)
    extra = draw(st.lists(st.integers(len(shapes), total - 1), max_size=2))
    outputs = sorted({total - 1, *extra})
    return Program(n, shapes, rg, draw(st.integers(0, 2 ** 32 - 1)), steps, outputs)


def tg_leaves(program):
    return [tg.tensor(v, requires_grad=f) for v, f in zip(program.leaf_values(), program.rg)]


def differentiable(outs, cots):
    """The outputs that require grad (a step may use only leaves that do not), with their
    cotangents."""
    pairs = [(o, c) for o, c in zip(outs, cots) if o.requires_grad]
    return [o for o, _ in pairs], [c for _, c in pairs]


@given(program=programs())
def test_program_gradients_match_finite_differences(program):
    leaves = tg_leaves(program)
    gradcheck(lambda *ls: program.run(TG, list(ls)), *leaves)


@given(program=programs(max_steps=4), repeats=st.integers(2, 3))
def test_program_gradients_accumulate_over_backward_calls(program, repeats):
    """Running a program and its backward several times adds up exactly, each time on
    fresh records (the tape of the previous pass was consumed)."""
    leaves = tg_leaves(program)
    cots = None
    first = None
    for k in range(repeats):
        outs = program.run(TG, leaves)
        if cots is None:
            rng = np.random.default_rng(program.seed + 1)
            cots = [tg.tensor(rng.standard_normal(tuple(o.shape))) for o in outs]
        tg.autograd.backward(*differentiable(outs, cots))
        if k == 0:
            first = [None if x.grad is None else x.grad._value.copy() for x in leaves]
    for x, g in zip(leaves, first):
        if g is None:
            assert x.grad is None
        else:
            np.testing.assert_allclose(x.grad._value, repeats * g, rtol=1e-12, atol=1e-12)


def run_both(program):
    values = program.leaf_values()
    tl = [tg.tensor(v, requires_grad=f) for v, f in zip(values, program.rg)]
    pl = [torch.tensor(v, requires_grad=f) for v, f in zip(values, program.rg)]
    return (tl, program.run(TG, tl)), (pl, program.run(C.Lib(torch, torch.nn.functional), pl))


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
@given(program=programs())
def test_program_matches_pytorch(program):
    (tl, touts), (pl, pouts) = run_both(program)
    for k, (a, b) in enumerate(zip(touts, pouts)):
        np.testing.assert_allclose(a._value, b.detach().numpy(), rtol=RTOL, atol=ATOL,
                                   err_msg=f"output {k}")
        assert a.requires_grad == b.requires_grad
    rng = np.random.default_rng(program.seed + 1)
    cots = [rng.standard_normal(tuple(b.shape)) for b in pouts]
    if any(b.requires_grad for b in pouts):
        tg.autograd.backward(*differentiable(touts, [tg.tensor(c) for c in cots]))
        torch.autograd.backward(*differentiable(pouts, [torch.tensor(c) for c in cots]))
    for k, (a, b) in enumerate(zip(tl, pl)):
        if b.grad is None:
            assert a.grad is None, f"leaf {k}"
        else:
            np.testing.assert_allclose(a.grad._value, b.grad.numpy(), rtol=RTOL, atol=ATOL,
                                       err_msg=f"gradient of leaf {k}")


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
@given(program=programs())
def test_program_grad_fn_names_match_pytorch(program):
    """The last node of every output is PyTorch's, whatever ops came before (PyTorch's
    reshape/view name depends on whether its input is contiguous in memory)."""
    (_, touts), (_, pouts) = run_both(program)
    for k, (a, b) in enumerate(zip(touts, pouts)):
        assert (a.grad_fn and a.grad_fn.name()) == (b.grad_fn and b.grad_fn.name()), \
            f"output {k}"
