"""Library functions under ``compile`` and ``vmap``: recorded on one draw of inputs, replayed on
others, equal to eager mode and to PyTorch.

Every function of ``tapegrad.nn.functional`` and the ``where`` forms, on values drawn over the
whole domain -- signs, zeros of both signs, ties, large magnitudes, probabilities of exactly 0
and 1 -- because a value computed on the side from the first call's input (the signs of
``binary_cross_entropy_with_logits``, a ``where`` mask, a loss's weights) replays the first
call's answer on the others.  A value that depends on an input is recorded or guarded, never a
constant: each replayed result is compared with eager mode on the same inputs (value and
gradients, to 1e-12) and with PyTorch.
"""
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tapegrad as tg

torch = pytest.importorskip("torch", reason="PyTorch is the oracle of these tests")

DRAWS = 3   # recorded on the first, replayed on the others

# values where functions change behaviour: zeros of both signs, ties (repeats), the kinks of
# relu/abs at 0, saturation of exp/sigmoid, both sides of sign(); the bounds of hardtanh (+-1),
# hardsigmoid/hardswish (+-3), relu6 (6), softshrink/hardshrink (+-0.5), softplus's threshold
# (20, and 2.5 = 5 / beta for the cases with beta=2, threshold=5)
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 30.0, -30.0, 800.0, -800.0, 1e-300,
         3.0, -3.0, 6.0, 20.0, 2.5]
REALS = st.one_of(st.sampled_from(EDGES),
                  st.floats(-50.0, 50.0, allow_nan=False, allow_subnormal=False))
PROBS = st.one_of(st.sampled_from([0.0, 1.0, 0.5, 1e-13, 1.0 - 1e-13, 0.25]),
                  st.floats(0.0, 1.0, allow_nan=False, allow_subnormal=False))
WEIGHTS = st.one_of(st.sampled_from([0.0, 1.0, 0.5, 2.0]), st.floats(0.1, 3.0))
# variances, rates, counts: 0, values below and at the eps (1e-6) of gaussian_nll_loss, large
POSITIVE = st.one_of(st.sampled_from([0.0, 1e-300, 1e-7, 1e-6, 0.5, 1.0, 2.0, 30.0, 800.0]),
                     st.floats(0.0, 50.0, allow_nan=False, allow_subnormal=False))
# the same from eps up (the values a clamp to eps leaves alone)
VARIANCES = st.one_of(st.sampled_from([1e-6, 0.5, 1.0, 2.0, 30.0, 800.0]),
                      st.floats(1e-6, 50.0, allow_nan=False, allow_subnormal=False))
SIGNS = st.sampled_from([-1.0, 1.0])   # the targets of margin and embedding losses

# kind: "real", "prob", "weight", "positive", "variance", "sign" (float arrays), "label" (int
# class indices < C), "ignored" (class indices or -1), "mask" (bool)
Arg = namedtuple("Arg", "shape kind grad")
N, C = 4, 3


class Case(namedtuple("Case", "name fn args replays torch_grads")):
    """``fn(lib, *tensors)`` for lib = tapegrad or torch; ``replays``: whether later draws
    replay (False: a guard may record again, as for a mask read by Python);
    ``torch_grads``: a filter of the argument positions whose gradients PyTorch is asked."""


def F(lib):
    return lib.nn.functional


def _ce(lib, x, t, **kw):
    return F(lib).cross_entropy(x, t, **kw)


CASES = [
    Case("linear", lambda lib, x, w, b: F(lib).linear(x, w, b),
         [Arg((N, C), "real", True), Arg((2, C), "real", True), Arg((2,), "real", True)],
         True, None),
    Case("relu", lambda lib, x: F(lib).relu(x), [Arg((N, C), "real", True)], True, None),
    Case("tanh", lambda lib, x: F(lib).tanh(x), [Arg((N, C), "real", True)], True, None),
    Case("sigmoid", lambda lib, x: F(lib).sigmoid(x), [Arg((N, C), "real", True)], True, None),
    Case("softmax", lambda lib, x: F(lib).softmax(x, dim=1), [Arg((N, C), "real", True)],
         True, None),
    Case("log_softmax", lambda lib, x: F(lib).log_softmax(x, dim=0),
         [Arg((N, C), "real", True)], True, None),
    Case("dropout-eval", lambda lib, x: F(lib).dropout(x, 0.3, training=False),
         [Arg((N, C), "real", True)], True, None),
    *[Case(f"mse_loss-{r}", lambda lib, x, y, r=r: F(lib).mse_loss(x, y, reduction=r),
           [Arg((N, C), "real", True), Arg((N, C), "real", True)], True, None)
      for r in ("mean", "sum", "none")],
    *[Case(f"l1_loss-{r}", lambda lib, x, y, r=r: F(lib).l1_loss(x, y, reduction=r),
           [Arg((N, C), "real", True), Arg((N, C), "real", False)], True, None)
      for r in ("mean", "sum", "none")],
    *[Case(f"nll_loss-{r}", lambda lib, x, t, w, r=r: F(lib).nll_loss(
        x, t, weight=w, ignore_index=-1, reduction=r),
        [Arg((N, C), "real", True), Arg((N,), "ignored", False), Arg((C,), "weight", False)],
        True, None) for r in ("mean", "sum", "none")],
    *[Case(f"cross_entropy-{r}", lambda lib, x, t, r=r: _ce(lib, x, t, reduction=r),
           [Arg((N, C), "real", True), Arg((N,), "label", False)], True, None)
      for r in ("mean", "sum", "none")],
    Case("cross_entropy-weight", lambda lib, x, t, w: _ce(lib, x, t, weight=w),
         [Arg((N, C), "real", True), Arg((N,), "label", False), Arg((C,), "weight", False)],
         True, None),
    Case("cross_entropy-weight-ignore", lambda lib, x, t, w: _ce(
        lib, x, t, weight=w, ignore_index=1, reduction="none"),
        [Arg((N, C), "real", True), Arg((N,), "label", False), Arg((C,), "weight", False)],
        True, None),
    Case("cross_entropy-2d", lambda lib, x, t: _ce(lib, x, t),
         [Arg((2, C, 2), "real", True), Arg((2, 2), "label", False)], True, None),
    Case("cross_entropy-probabilities", lambda lib, x, p, w: _ce(lib, x, p, weight=w),
         [Arg((N, C), "real", True), Arg((N, C), "prob", True), Arg((C,), "weight", True)],
         True, None),
    *[Case(f"binary_cross_entropy-{r}", lambda lib, x, t, w, r=r: F(lib).binary_cross_entropy(
        x, t, weight=w, reduction=r),
        [Arg((N, C), "prob", True), Arg((N, C), "prob", True), Arg((C,), "weight", False)],
        True, "bce") for r in ("mean", "sum", "none")],
    *[Case(f"bce_with_logits-{r}", lambda lib, x, t, w, r=r:
           F(lib).binary_cross_entropy_with_logits(x, t, weight=w, reduction=r),
           [Arg((N, C), "real", True), Arg((N, C), "prob", True), Arg((C,), "weight", False)],
           True, None) for r in ("mean", "sum", "none")],
    Case("bce_with_logits-pos_weight", lambda lib, x, t, p:
         F(lib).binary_cross_entropy_with_logits(x, t, pos_weight=p),
         [Arg((N, C), "real", True), Arg((N, C), "prob", True), Arg((C,), "weight", False)],
         True, None),
    # activations (one argument unless stated)
    *[Case(name, lambda lib, x, f=f: f(F(lib), x), [Arg((N, C), "real", True)], True, None)
      for name, f in [
          ("celu", lambda f, x: f.celu(x)),
          ("celu-alpha", lambda f, x: f.celu(x, alpha=2.0)),
          ("elu", lambda f, x: f.elu(x, alpha=1.5)),
          ("gelu", lambda f, x: f.gelu(x)),
          ("gelu-tanh", lambda f, x: f.gelu(x, approximate="tanh")),
          ("hardshrink", lambda f, x: f.hardshrink(x)),
          # (PyTorch's hardsigmoid backward multiplies by 1/6 rounded to float32, and so
          # does tapegrad's: the same gradients)
          ("hardsigmoid", lambda f, x: f.hardsigmoid(x)),
          ("hardswish", lambda f, x: f.hardswish(x)),
          ("hardtanh", lambda f, x: f.hardtanh(x)),
          ("hardtanh-bounds", lambda f, x: f.hardtanh(x, -0.5, 2.0)),
          ("leaky_relu", lambda f, x: f.leaky_relu(x, 0.1)),
          ("logsigmoid", lambda f, x: f.logsigmoid(x)),
          ("mish", lambda f, x: f.mish(x)),
          ("relu6", lambda f, x: f.relu6(x)),
          ("selu", lambda f, x: f.selu(x)),
          ("silu", lambda f, x: f.silu(x)),
          ("softplus", lambda f, x: f.softplus(x)),
          ("softplus-beta-threshold", lambda f, x: f.softplus(x, beta=2.0, threshold=5.0)),
          ("softshrink", lambda f, x: f.softshrink(x)),
          ("softshrink-lambd", lambda f, x: f.softshrink(x, 1.0)),
          ("softsign", lambda f, x: f.softsign(x)),
          ("tanhshrink", lambda f, x: f.tanhshrink(x)),
          ("threshold", lambda f, x: f.threshold(x, 0.5, -9.0)),
          ("softmin", lambda f, x: f.softmin(x, dim=1)),
      ]],
    Case("glu", lambda lib, x: F(lib).glu(x), [Arg((N, 4), "real", True)], True, None),
    Case("glu-dim0", lambda lib, x: F(lib).glu(x, 0), [Arg((N, C), "real", True)], True, None),
    Case("prelu", lambda lib, x, w: F(lib).prelu(x, w),
         [Arg((N, C), "real", True), Arg((C,), "real", True)], True, None),
    Case("prelu-one-weight", lambda lib, x, w: F(lib).prelu(x, w),
         [Arg((2, C, 2), "real", True), Arg((1,), "real", True)], True, None),
    # regression and probabilistic losses
    *[Case(f"huber_loss-{r}", lambda lib, x, y, r=r: F(lib).huber_loss(x, y, reduction=r),
           [Arg((N, C), "real", True), Arg((N, C), "real", True)], True, None)
      for r in ("mean", "sum", "none")],
    Case("huber_loss-delta", lambda lib, x, y: F(lib).huber_loss(x, y, "none", delta=0.5),
         [Arg((N, C), "real", True), Arg((N, C), "real", True)], True, None),
    *[Case(f"smooth_l1_loss-{r}", lambda lib, x, y, r=r: F(lib).smooth_l1_loss(
        x, y, reduction=r), [Arg((N, C), "real", True), Arg((N, C), "real", True)], True, None)
      for r in ("mean", "sum", "none")],
    Case("smooth_l1_loss-beta", lambda lib, x, y: F(lib).smooth_l1_loss(
        x, y, reduction="none", beta=0.5),
        [Arg((N, C), "real", True), Arg((N, C), "real", True)], True, None),
    # (log_target=False: the target is not differentiated, PyTorch's gradient at a target of 0
    # is nan -- xlogy's 0 / 0)
    *[Case(f"kl_div-{r}", lambda lib, x, t, r=r: F(lib).kl_div(x, t, reduction=r),
           [Arg((N, C), "real", True), Arg((N, C), "prob", False)], True, None)
      for r in ("batchmean", "sum", "none")],
    *[Case(f"kl_div-log_target-{r}", lambda lib, x, t, r=r: F(lib).kl_div(
        x, t, reduction=r, log_target=True),
        [Arg((N, C), "real", True), Arg((N, C), "real", True)], True, None)
      for r in ("batchmean", "none")],
    *[Case(f"poisson_nll_loss-{r}", lambda lib, x, t, r=r: F(lib).poisson_nll_loss(
        x, t, reduction=r), [Arg((N, C), "real", True), Arg((N, C), "positive", False)],
        True, None) for r in ("mean", "sum", "none")],
    Case("poisson_nll_loss-rate", lambda lib, x, t: F(lib).poisson_nll_loss(
        x, t, log_input=False, reduction="none"),
        [Arg((N, C), "positive", True), Arg((N, C), "positive", False)], True, None),
    Case("poisson_nll_loss-full", lambda lib, x, t: F(lib).poisson_nll_loss(
        x, t, full=True, reduction="sum"),
        [Arg((N, C), "real", True), Arg((N, C), "positive", False)], True, None),
    *[Case(f"gaussian_nll_loss-{r}", lambda lib, x, y, v, r=r: F(lib).gaussian_nll_loss(
        x, y, v, reduction=r),
        [Arg((N, C), "real", True), Arg((N, C), "real", True), Arg((N, C), "variance", True)],
        True, None) for r in ("mean", "sum", "none")],
    Case("gaussian_nll_loss-full-one-variance-a-row",
         lambda lib, x, y, v: F(lib).gaussian_nll_loss(x, y, v, full=True),
         [Arg((N, C), "real", True), Arg((N, C), "real", True), Arg((N,), "variance", True)],
         True, None),
    # variances below eps are raised to it (PyTorch clamps a clone under no_grad): a draw
    # with one records again, and the lift, computed under no_grad, runs eagerly
    Case("gaussian_nll_loss-small-variances", lambda lib, x, y, v: F(lib).gaussian_nll_loss(
        x, y, v, reduction="none"),
        [Arg((N, C), "real", True), Arg((N, C), "real", True), Arg((N, C), "positive", True)],
        False, None),
    # margin and embedding losses (targets of +-1)
    *[Case(f"margin_ranking_loss-{r}", lambda lib, a, b, t, r=r: F(lib).margin_ranking_loss(
        a, b, t, margin=0.5, reduction=r),
        [Arg((N,), "real", True), Arg((N,), "real", True), Arg((N,), "sign", False)],
        True, None) for r in ("mean", "sum", "none")],
    *[Case(f"cosine_embedding_loss-{r}", lambda lib, a, b, t, r=r:
           F(lib).cosine_embedding_loss(a, b, t, margin=0.25, reduction=r),
           [Arg((N, C), "real", True), Arg((N, C), "real", True), Arg((N,), "sign", False)],
           True, None) for r in ("mean", "sum", "none")],
    *[Case(f"hinge_embedding_loss-{r}", lambda lib, x, t, r=r: F(lib).hinge_embedding_loss(
        x, t, reduction=r), [Arg((N, C), "real", True), Arg((N, C), "sign", False)], True, None)
      for r in ("mean", "sum", "none")],
    *[Case(f"soft_margin_loss-{r}", lambda lib, x, t, r=r: F(lib).soft_margin_loss(
        x, t, reduction=r), [Arg((N, C), "real", True), Arg((N, C), "sign", False)], True, None)
      for r in ("mean", "sum", "none")],
    *[Case(f"multilabel_soft_margin_loss-{r}", lambda lib, x, t, w, r=r:
           F(lib).multilabel_soft_margin_loss(x, t, weight=w, reduction=r),
           [Arg((N, C), "real", True), Arg((N, C), "prob", False), Arg((C,), "weight", False)],
           True, None) for r in ("mean", "sum", "none")],
    *[Case(f"multi_margin_loss-{r}", lambda lib, x, t, r=r: F(lib).multi_margin_loss(
        x, t, reduction=r), [Arg((N, C), "real", True), Arg((N,), "label", False)], True, None)
      for r in ("mean", "sum", "none")],
    Case("multi_margin_loss-p2-weight", lambda lib, x, t, w: F(lib).multi_margin_loss(
        x, t, p=2, margin=0.5, weight=w, reduction="none"),
        [Arg((N, C), "real", True), Arg((N,), "label", False), Arg((C,), "weight", False)],
        True, None),
    *[Case(f"triplet_margin_loss-{r}", lambda lib, a, p, n, r=r: F(lib).triplet_margin_loss(
        a, p, n, reduction=r),
        [Arg((N, C), "real", True), Arg((N, C), "real", True), Arg((N, C), "real", True)],
        True, None) for r in ("mean", "sum", "none")],
    Case("triplet_margin_loss-swap-p1", lambda lib, a, p, n: F(lib).triplet_margin_loss(
        a, p, n, margin=0.5, p=1, swap=True, reduction="none"),
        [Arg((N, C), "real", True), Arg((N, C), "real", True), Arg((N, C), "real", True)],
        True, None),
    # distances and normalisation.  (PyTorch's normalisation kernels fold weight and bias
    # into x * a + c, a = weight / sqrt(var + eps), which rounds to ulp(x * a): 3e-10 for a
    # constant channel of 30s (a result of 0) with weight 800.  Their oracle applies weight
    # and bias after PyTorch's kernel.)
    Case("pairwise_distance", lambda lib, a, b: F(lib).pairwise_distance(a, b),
         [Arg((N, C), "real", True), Arg((N, C), "real", True)], True, None),
    Case("pairwise_distance-p1-keepdim", lambda lib, a, b: F(lib).pairwise_distance(
        a, b, p=1.0, keepdim=True), [Arg((N, C), "real", True), Arg((C,), "real", True)],
        True, None),
    # (a norm below eps is raised to it keeping its gradient, under no_grad: eager, as for
    # gaussian_nll_loss's variances)
    Case("cosine_similarity", lambda lib, a, b: F(lib).cosine_similarity(a, b),
         [Arg((N, C), "real", True), Arg((N, C), "real", True)], False, None),
    Case("cosine_similarity-broadcast-dim0", lambda lib, a, b: F(lib).cosine_similarity(
        a, b, dim=0), [Arg((N, C), "real", True), Arg((N, 1), "real", True)], False, None),
    Case("normalize", lambda lib, x: F(lib).normalize(x), [Arg((N, C), "real", True)],
         True, None),
    Case("normalize-p1-dim0", lambda lib, x: F(lib).normalize(x, p=1.0, dim=0),
         [Arg((N, C), "real", True)], True, None),
    Case("layer_norm", lambda lib, x, w, b: F(lib).layer_norm(x, (C,), w, b) if lib is tg
         else F(lib).layer_norm(x, (C,)) * w + b,
         [Arg((N, C), "real", True), Arg((C,), "real", True), Arg((C,), "real", True)],
         True, None),
    Case("layer_norm-2d", lambda lib, x: F(lib).layer_norm(x, (2, C)),
         [Arg((2, 2, C), "real", True)], True, None),
    Case("rms_norm", lambda lib, x, w: F(lib).rms_norm(x, (C,), w),
         [Arg((N, C), "real", True), Arg((C,), "real", True)], True, None),
    Case("rms_norm-eps-2d", lambda lib, x: F(lib).rms_norm(x, (2, C), eps=1e-6),
         [Arg((2, 2, C), "real", True)], True, None),
    Case("group_norm", lambda lib, x, w, b: F(lib).group_norm(x, 2, w, b) if lib is tg
         else F(lib).group_norm(x, 2) * w[:, None] + b[:, None],
         [Arg((2, 4, 2), "real", True), Arg((4,), "real", True), Arg((4,), "real", True)],
         True, None),
    Case("instance_norm", lambda lib, x, w, b: F(lib).instance_norm(x, weight=w, bias=b)
         if lib is tg else F(lib).instance_norm(x) * w[:, None] + b[:, None],
         [Arg((2, C, 3), "real", True), Arg((C,), "real", True), Arg((C,), "real", True)],
         True, None),
    Case("batch_norm-eval", lambda lib, x, m, v, w, b: F(lib).batch_norm(x, m, v, w, b)
         if lib is tg else F(lib).batch_norm(x, m, v) * w + b,
         [Arg((N, C), "real", True), Arg((C,), "real", False), Arg((C,), "positive", False),
          Arg((C,), "real", True), Arg((C,), "real", True)], True, None),
    Case("batch_norm-training", lambda lib, x, w, b: F(lib).batch_norm(
        x, None, None, w, b, training=True) if lib is tg else F(lib).batch_norm(
        x, None, None, training=True) * w[:, None] + b[:, None],
        [Arg((N, C, 2), "real", True), Arg((C,), "real", True), Arg((C,), "real", True)],
        True, None),
    # the running statistics (arguments) are updated in place: the result holds them after
    # the call, to compare them too; in-place changes of arguments run eagerly
    Case("batch_norm-training-running-stats", lambda lib, x, m, v, w, b: lib.cat([
        (F(lib).batch_norm(x, m, v, w, b, training=True, momentum=0.25) if lib is tg else
         F(lib).batch_norm(x, m, v, training=True, momentum=0.25) * w + b).flatten(), m, v]),
        [Arg((N, C), "real", True), Arg((C,), "real", False), Arg((C,), "positive", False),
         Arg((C,), "real", True), Arg((C,), "real", True)], False, None),
    # embeddings, one-hot, padding, attention
    Case("embedding", lambda lib, i, w: F(lib).embedding(i, w),
         [Arg((N,), "label", False), Arg((C, 2), "real", True)], True, None),
    Case("embedding-2d-out-of-range", lambda lib, i, w: F(lib).embedding(i, w),
         [Arg((2, 2), "ignored", False), Arg((C, 2), "real", True)], True, None),
    # (the padding row's gradient is stopped with detach(): eager)
    Case("embedding-padding_idx", lambda lib, i, w: F(lib).embedding(i, w, padding_idx=1),
         [Arg((N,), "label", False), Arg((C, 2), "real", True)], False, None),
    # (the looked-up rows are rescaled in place under no_grad: eager)
    Case("embedding-max_norm", lambda lib, i, w: F(lib).embedding(i, w, max_norm=1.5),
         [Arg((N,), "label", False), Arg((C, 2), "real", True)], False, None),
    Case("one_hot", lambda lib, i: F(lib).one_hot(i, C), [Arg((N,), "label", False)],
         True, None),
    # (the number of classes is read from the largest label: a new one records again)
    Case("one_hot-inferred-classes", lambda lib, i: F(lib).one_hot(i),
         [Arg((2, 2), "label", False)], False, None),
    Case("pad-constant", lambda lib, x: F(lib).pad(x, (1, 2), value=-1.5),
         [Arg((N, C), "real", True)], True, None),
    Case("pad-constant-crop", lambda lib, x: F(lib).pad(x, (-1, 1, 2, 0)),
         [Arg((N, C), "real", True)], True, None),
    Case("pad-reflect", lambda lib, x: F(lib).pad(x, (2, 1), mode="reflect"),
         [Arg((2, C), "real", True)], True, None),
    Case("pad-replicate", lambda lib, x: F(lib).pad(x, (1, 2, 2, 1), mode="replicate"),
         [Arg((1, 2, C), "real", True)], True, None),
    Case("pad-circular", lambda lib, x: F(lib).pad(x, (2, 1), mode="circular"),
         [Arg((2, C), "real", True)], True, None),
    Case("bilinear", lambda lib, a, b, w, c: F(lib).bilinear(a, b, w, c),
         [Arg((N, 2), "real", True), Arg((N, C), "real", True), Arg((2, 2, C), "real", True),
          Arg((2,), "real", True)], True, None),
    Case("scaled_dot_product_attention", lambda lib, q, k, v:
         F(lib).scaled_dot_product_attention(q, k, v),
         [Arg((2, C, 2), "real", True), Arg((2, N, 2), "real", True),
          Arg((2, N, C), "real", True)], True, None),
    Case("scaled_dot_product_attention-causal", lambda lib, q, k, v:
         F(lib).scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.25),
         [Arg((2, C, 2), "real", True), Arg((2, N, 2), "real", True),
          Arg((2, N, C), "real", True)], True, None),
    Case("scaled_dot_product_attention-float-mask", lambda lib, q, k, v, m:
         F(lib).scaled_dot_product_attention(q, k, v, attn_mask=m),
         [Arg((C, 2), "real", True), Arg((N, 2), "real", True), Arg((N, 2), "real", True),
          Arg((C, N), "real", True)], True, None),
    # (a row of False attends nowhere: nan, as in PyTorch)
    Case("scaled_dot_product_attention-bool-mask", lambda lib, q, k, v, m:
         F(lib).scaled_dot_product_attention(q, k, v, attn_mask=m),
         [Arg((2, C, 2), "real", True), Arg((2, N, 2), "real", True),
          Arg((2, N, 2), "real", True), Arg((C, N), "mask", False)], True, None),
    # convolution and pooling
    Case("conv1d", lambda lib, x, w, b: F(lib).conv1d(x, w, b),
         [Arg((2, 2, 5), "real", True), Arg((C, 2, 2), "real", True), Arg((C,), "real", True)],
         True, None),
    Case("conv1d-stride-padding-dilation", lambda lib, x, w: F(lib).conv1d(
        x, w, stride=2, padding=1, dilation=2), [Arg((2, 2, 6), "real", True),
                                                 Arg((C, 2, 2), "real", True)], True, None),
    Case("conv1d-groups-same", lambda lib, x, w: F(lib).conv1d(x, w, padding="same", groups=2),
         [Arg((2, 5), "real", True), Arg((4, 1, 3), "real", True)], True, None),
    Case("conv2d", lambda lib, x, w, b: F(lib).conv2d(x, w, b),
         [Arg((1, 2, C, N), "real", True), Arg((2, 2, 2, 2), "real", True),
          Arg((2,), "real", True)], True, None),
    Case("conv2d-stride-padding-groups", lambda lib, x, w: F(lib).conv2d(
        x, w, stride=(2, 1), padding=1, groups=2),
        [Arg((1, 2, C, C), "real", True), Arg((2, 1, 2, 2), "real", True)], True, None),
    Case("max_pool1d", lambda lib, x: F(lib).max_pool1d(x, 2),
         [Arg((2, 2, 5), "real", True)], True, None),
    Case("max_pool1d-padding-stride", lambda lib, x: F(lib).max_pool1d(x, 3, 1, 1),
         [Arg((2, 5), "real", True)], True, None),
    Case("max_pool2d", lambda lib, x: F(lib).max_pool2d(x, 2),
         [Arg((1, 2, N, N), "real", True)], True, None),
    Case("max_pool2d-padding-dilation", lambda lib, x: F(lib).max_pool2d(
        x, 2, stride=1, padding=1, dilation=(1, 2)), [Arg((2, C, N), "real", True)], True, None),
    Case("avg_pool1d", lambda lib, x: F(lib).avg_pool1d(x, 2), [Arg((2, 2, 5), "real", True)],
         True, None),
    Case("avg_pool1d-padding-exclude", lambda lib, x: F(lib).avg_pool1d(
        x, 3, 2, 1, count_include_pad=False), [Arg((2, 2, 5), "real", True)], True, None),
    Case("avg_pool2d", lambda lib, x: F(lib).avg_pool2d(x, 2, padding=1),
         [Arg((1, 2, C, N), "real", True)], True, None),
    Case("avg_pool2d-exclude-pad", lambda lib, x: F(lib).avg_pool2d(
        x, (2, 3), 1, 1, count_include_pad=False), [Arg((2, C, N), "real", True)], True, None),
    Case("avg_pool2d-divisor", lambda lib, x: F(lib).avg_pool2d(x, 2, 1, divisor_override=3),
         [Arg((2, C, N), "real", True)], True, None),
    Case("adaptive_avg_pool1d", lambda lib, x: F(lib).adaptive_avg_pool1d(x, C),
         [Arg((2, 2, 5), "real", True)], True, None),
    Case("adaptive_avg_pool2d", lambda lib, x: F(lib).adaptive_avg_pool2d(x, (C, None)),
         [Arg((1, 2, 5, N), "real", True)], True, None),
    Case("adaptive_max_pool2d", lambda lib, x: F(lib).adaptive_max_pool2d(x, (C, 2)),
         [Arg((1, 2, 5, N), "real", True)], True, None),
    Case("adaptive_max_pool2d-global", lambda lib, x: F(lib).adaptive_max_pool2d(x, 1),
         [Arg((2, C, 2), "real", True)], True, None),
    Case("pixel_shuffle", lambda lib, x: F(lib).pixel_shuffle(x, 2),
         [Arg((1, 4, 2, C), "real", True)], True, None),
    Case("interpolate-nearest-size", lambda lib, x: F(lib).interpolate(x, size=7),
         [Arg((1, 2, 5), "real", True)], True, None),
    Case("interpolate-nearest-scale", lambda lib, x: F(lib).interpolate(
        x, scale_factor=(2.0, 1.5)), [Arg((1, 1, 2, C), "real", True)], True, None),
    Case("interpolate-nearest-2d-size", lambda lib, x: F(lib).interpolate(x, size=(C, 5)),
         [Arg((1, 1, 2, N), "real", True)], True, None),
    Case("interpolate-linear-scale", lambda lib, x: F(lib).interpolate(
        x, scale_factor=1.7, mode="linear"), [Arg((1, 2, 5), "real", True)], True, None),
    Case("interpolate-bilinear-align-corners", lambda lib, x: F(lib).interpolate(
        x, size=(5, 2), mode="bilinear", align_corners=True), [Arg((1, 1, C, N), "real", True)],
        True, None),
    Case("interpolate-bicubic", lambda lib, x: F(lib).interpolate(
        x, scale_factor=(1.5, 0.7), mode="bicubic"), [Arg((1, 2, C, N), "real", True)], True,
        None),
    Case("interpolate-trilinear", lambda lib, x: F(lib).interpolate(
        x, size=(3, 4, 2), mode="trilinear"), [Arg((1, 1, 2, C, N), "real", True)], True, None),
    Case("interpolate-nearest-exact", lambda lib, x: F(lib).interpolate(
        x, scale_factor=(1.6, 0.75), mode="nearest-exact"), [Arg((1, 1, C, N), "real", True)],
        True, None),
    Case("interpolate-area", lambda lib, x: F(lib).interpolate(x, size=(2, 3), mode="area"),
         [Arg((1, 2, C, 5), "real", True)], True, None),
    # the where forms
    Case("where(x > 0, 1, -1) * x", lambda lib, x: lib.where(x > 0, 1.0, -1.0) * x,
         [Arg((N, C), "real", True)], True, None),
    Case("where(cond, a, b), branches without grad",
         lambda lib, x, y: lib.where(x > y, lib.full((N, C), 2.0), lib.zeros(C)) * x,
         [Arg((N, C), "real", True), Arg((C,), "real", False)], True, None),
    Case("where(cond, a, b), branches that are arguments without grad",
         lambda lib, x, a, b: lib.where(x > a, a, b) * x,
         [Arg((N, C), "real", True), Arg((N, C), "real", False), Arg((C,), "real", False)],
         True, None),
    # (PyTorch compares with tensors only)
    Case("where(x > array, x, 0)", lambda lib, x: lib.where(
        x > (np.array([0.0, 1.0, -1.0]) if lib is tg else lib.tensor([0.0, 1.0, -1.0])),
        x, 0.0), [Arg((N, C), "real", True)], True, None),
    Case("where(cond, x, y)", lambda lib, x, y: lib.where(x < y, x * y, y - x),
         [Arg((N, C), "real", True), Arg((C,), "real", True)], True, None),
    Case("where(cond) indices", lambda lib, x: x[lib.where(x > 0.5)] * 2.0,
         [Arg((N, C), "real", True)], False, None),
    Case("where(~cond, x, 0)", lambda lib, x: lib.where(~(x > 0), x, 0.0),
         [Arg((N, C), "real", True)], True, None),
    # integer and bool results of traced comparisons keep eager mode's dtype (the tape holds
    # floats: a replay returned float64 for these)
    Case("where(x > y, 1, 0)", lambda lib, x, y: lib.where(x > y, 1, 0),
         [Arg((N, C), "real", False), Arg((C,), "real", False)], True, None),
    Case("where(x > 0, True, False)", lambda lib, x: lib.where(x > 0, True, False),
         [Arg((N, C), "real", False)], True, None),
    # ... and arithmetic on them, which the tape would do in floats (True + True is 2 there,
    # a replay returned 2 * x), runs eagerly
    Case("(x > 0) + (y > 0) as a mask", lambda lib, x, y: ((x > 0) + (y > 0)).double() * x,
         [Arg((N, C), "real", True), Arg((N, C), "real", False)], False, None),
    Case("(x > 0) * 2", lambda lib, x: (x > 0) * 2, [Arg((N, C), "real", False)], False, None),
    Case("where(x > 0, 1, -1).abs()", lambda lib, x: lib.where(x > 0, 1, -1).abs(),
         [Arg((N, C), "real", False)], False, None),
    # (NumPy's exp of bools is float16: the recording call gave 2.71875 for e)
    Case("(x > 0).exp() * x", lambda lib, x: (x > 0).exp() * x, [Arg((N, C), "real", True)],
         True, None),
]


def _elements(kind):
    return {"real": REALS, "prob": PROBS, "weight": WEIGHTS, "positive": POSITIVE,
            "variance": VARIANCES, "sign": SIGNS}[kind]


@st.composite
def draws(draw, case):
    """DRAWS sets of arrays for ``case``'s arguments (same shapes, new values)."""
    sets = []
    for _ in range(DRAWS):
        arrays = []
        for a in case.args:
            if a.kind == "mask":
                arrays.append(draw(hnp.arrays(np.bool_, a.shape)))
            elif a.kind in ("label", "ignored"):
                low = -1 if a.kind == "ignored" else 0
                arrays.append(draw(hnp.arrays(np.int64, a.shape, elements=st.integers(low, C - 1))))
            else:
                arrays.append(draw(hnp.arrays(np.float64, a.shape, elements=_elements(a.kind))))
        sets.append(arrays)
    return sets


def _ours(case, arrays):
    return [tg.tensor(v, requires_grad=a.grad) for v, a in zip(arrays, case.args)]


def _theirs(case, arrays):
    return [torch.tensor(v, requires_grad=a.grad) for v, a in zip(arrays, case.args)]


def _backward(out, inputs, cot):
    for t in inputs:
        t.grad = None
    out.backward(tg.tensor(cot) if isinstance(out, tg.Tensor) else torch.tensor(cot))
    return [None if t.grad is None else
            (t.grad._value if isinstance(t, tg.Tensor) else t.grad.numpy()).copy()
            for t in inputs]


def _close(got, want, what, rtol=1e-12, inputs=()):
    """got == want to rtol, and to rtol times the largest magnitude of want or of ``inputs``
    near zero: a value or gradient that cancels to zero (a softmax of large scores, the
    normalisation of a constant input) keeps rounding noise of the size of its inputs, which
    eager mode, compiled code and PyTorch round apart."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    scale = max([1.0, float(np.max(np.abs(want[np.isfinite(want)]), initial=0.0))]
                + [float(np.max(np.abs(a[np.isfinite(a)]), initial=0.0))
                   for a in map(np.asarray, inputs) if a.dtype.kind == "f"])
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, equal_nan=True,
                               err_msg=what)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@given(data=st.data())
def test_compiled_library_function_equals_eager_and_pytorch(case, data):
    sets = data.draw(draws(case), label="inputs")
    seed = data.draw(st.integers(0, 2 ** 32 - 1), label="cotangent seed")
    fn = lambda *ts: case.fn(tg, *ts)   # noqa: E731
    compiled = tg.compile(fn)
    answered = 0   # calls that did not raise: those that can replay
    for k, arrays in enumerate(sets):
        try:
            want = fn(*_ours(case, arrays))
        except Exception as exc:  # noqa: BLE001 - refused alike
            with pytest.raises(type(exc)):
                compiled(*_ours(case, arrays))
            continue
        answered += 1
        ins = _ours(case, arrays)
        got = compiled(*ins)
        _close(got._value, want._value, f"draw {k}: value", inputs=arrays)
        assert got.dtype == want.dtype, f"draw {k}: dtype {got.dtype} != {want.dtype}"
        assert got.requires_grad == want.requires_grad
        theirs_in = _theirs(case, arrays)
        theirs = case.fn(torch, *theirs_in)
        _close(got._value, theirs.detach().numpy(), f"draw {k}: value against PyTorch",
               rtol=1e-10, inputs=arrays)
        if not want.requires_grad:
            continue
        cot = np.random.default_rng(seed + k).standard_normal(want._value.shape)
        eager_in = _ours(case, arrays)
        want = fn(*eager_in)
        got_grads = _backward(got, ins, cot)
        want_grads = _backward(want, eager_in, cot)
        for i, (g, w) in enumerate(zip(got_grads, want_grads)):
            if w is None:
                assert g is None, f"draw {k}: gradient {i} where eager mode has none"
            else:
                _close(g, w, f"draw {k}: gradient {i}", inputs=arrays)
        # (binary_cross_entropy near 0 and 1 too: its gradient is PyTorch's kernel's)
        torch_grads = _backward(theirs, theirs_in, cot)
        for i, (g, w) in enumerate(zip(got_grads, torch_grads)):
            if w is not None:
                _close(g, w, f"draw {k}: gradient {i} against PyTorch", rtol=1e-9,
                       inputs=arrays)
    if case.replays:
        st_ = compiled.stats
        assert st_.records + st_.replays + st_.eager == st_.calls
        # integer labels are arguments like the others (issue 16): new ones replay too
        assert st_.replays >= 1 or answered <= 1, st_.as_dict()


# ---------------------------------------------------------------------------------------------
# vmap: one tape over a batch of samples
# ---------------------------------------------------------------------------------------------
# (a where(cond) of another sample has another shape: not a batch; per-sample gradients are of
# a float result)
FLOAT_CASES = [c for c in CASES if c.replays and any(a.grad for a in c.args)
               and all(a.kind not in ("label", "ignored", "mask") for a in c.args)]


@pytest.mark.parametrize("case", FLOAT_CASES, ids=lambda c: c.name)
@given(data=st.data())
@settings(max_examples=15)
def test_vmapped_library_function_equals_eager_per_sample(case, data):
    sets = data.draw(draws(case), label="samples")
    batched = [tg.tensor(np.stack([s[i] for s in sets])) for i in range(len(case.args))]

    def fn(*ts):
        out = case.fn(tg, *ts)
        return out.sum() if out.ndim else out

    try:
        wants = [fn(*[tg.tensor(v) for v in s]) for s in sets]
    except Exception as exc:  # noqa: BLE001
        with pytest.raises(type(exc)):
            tg.vmap(fn)(*batched)
        return
    got = tg.vmap(fn)(*batched)
    for k, want in enumerate(wants):
        _close(got._value[k], want._value, f"sample {k}")
    values, grads = tg.per_sample_value_and_grad(fn, argnums=0)(*batched)
    for k, arrays in enumerate(sets):
        x = tg.tensor(arrays[0], requires_grad=True)
        want = fn(x, *[tg.tensor(v) for v in arrays[1:]])
        want.backward()
        _close(values._value[k], want._value, f"sample {k}: value")
        _close(grads._value[k], x.grad._value, f"sample {k}: gradient")


def test_dropout_in_training_mode_runs_eagerly():
    compiled = tg.compile(lambda x: F(tg).dropout(x, 0.5, training=True).sum())
    for _ in range(2):
        compiled(tg.ones(10, requires_grad=True))
    assert compiled.stats.replays == 0
    assert any("random" in why for why, _ in compiled.stats.eager_reasons)


@pytest.mark.parametrize("hard", [False, True])
def test_gumbel_softmax_runs_eagerly_and_draws_what_eager_mode_draws(hard):
    """gumbel_softmax's noise comes from tapegrad's generator: a compiled call runs it eagerly
    (a replay would return the first call's noise again), so that under one manual_seed its
    result, its gradient and the generator's state after it are eager mode's."""
    def fn(x):
        return F(tg).gumbel_softmax(x, tau=0.5, hard=hard)
    compiled = tg.compile(fn)
    rng = np.random.default_rng(0)
    samples = []
    for k in range(3):
        logits, cot = rng.standard_normal((N, C)), rng.standard_normal((N, C))
        results = []
        for f in (compiled, fn, lambda x: F(tg).gumbel_softmax(x, tau=0.5)):
            tg.manual_seed(k)
            x = tg.tensor(logits, requires_grad=True)
            y = f(x)
            y.backward(tg.tensor(cot))
            results.append((y._value, x.grad._value, tg.rand(2)._value))
        (got, got_grad, got_next), (want, want_grad, want_next), (soft, soft_grad, _) = results
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got_grad, want_grad)
        np.testing.assert_array_equal(got_next, want_next)
        if hard:
            # the one-hot vector of the soft sample's largest entry, with the soft gradient
            np.testing.assert_array_equal(got, np.eye(C)[soft.argmax(-1)])
            np.testing.assert_allclose(got_grad, soft_grad, rtol=1e-12, atol=1e-15)
        else:
            np.testing.assert_array_equal(got, soft)
        samples.append(got)
    assert not np.array_equal(samples[1], samples[2]) or hard   # new noise for a new seed
    assert compiled.stats.replays == 0
    assert any("random" in why for why, _ in compiled.stats.eager_reasons)


@pytest.mark.parametrize("name, fn", [
    ("gaussian_nll_loss", lambda x, v: F(tg).gaussian_nll_loss(x, tg.zeros(C), v)),
    ("cosine_similarity", lambda x, v: F(tg).cosine_similarity(x, v, dim=0)),
])
def test_a_value_raised_to_eps_runs_eagerly(name, fn):
    """A variance or a norm below eps is raised to it keeping its gradient (PyTorch clamps a
    clone under no_grad): calls without one replay; the count of such values is guarded, and
    a call with one records again, then runs eagerly (as its signature does from then on),
    saying why, with eager mode's result."""
    compiled = tg.compile(fn)
    x = tg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    for v in ([1.0, 2.0, 0.5], [3.0, 2.0, 1.0], [0.0, 1e-300, 0.0]):
        got = compiled(x, tg.tensor(v, requires_grad=True))
        want = fn(x, tg.tensor(v, requires_grad=True))
        _close(got._value, want._value, f"{name} at {v}")
    st_ = compiled.stats
    assert st_.replays == 1 and [why for why, _ in st_.rerecords] == ["item()"], st_.as_dict()
    assert any("no_grad" in why for why, _ in st_.eager_reasons), st_.as_dict()


WEIGHTED = {
    "nll_loss": lambda lib, x, w: F(lib).nll_loss(x, lib.tensor([0, 1, 2, 0]), weight=w),
    "cross_entropy": lambda lib, x, w: F(lib).cross_entropy(x, lib.tensor([0, 1, 2, 9]),
                                                            weight=w),
    "binary_cross_entropy": lambda lib, x, w: F(lib).binary_cross_entropy(
        x.sigmoid(), lib.full((N, C), 0.25), weight=w),
    "bce_with_logits": lambda lib, x, w: F(lib).binary_cross_entropy_with_logits(
        x, lib.full((N, C), 0.5), weight=w),
    "bce_with_logits-pos_weight": lambda lib, x, w: F(lib).binary_cross_entropy_with_logits(
        x, lib.full((N, C), 0.5), pos_weight=w),
}


@pytest.mark.parametrize("name", list(WEIGHTED))
@pytest.mark.parametrize("grad_mode", [True, False])
def test_a_weight_that_requires_grad_is_refused_as_in_pytorch(name, grad_mode):
    x = np.linspace(-1.0, 1.0, N * C).reshape(N, C)
    outcomes = []
    for lib in (tg, torch):
        with lib.set_grad_enabled(grad_mode):
            try:
                WEIGHTED[name](lib, lib.tensor(x, requires_grad=True),
                               lib.tensor([0.5, 1.0, 2.0], requires_grad=True))
                outcomes.append(None)
            except Exception as exc:  # noqa: BLE001 - compared with PyTorch's
                outcomes.append((type(exc), str(exc)))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("x, t", [([0.5, 1.5], [1.0, 0.0]), ([0.5, np.nan], [1.0, 0.0]),
                                  ([-0.25, 0.5], [1.0, 0.0]), ([0.5, 0.5], [1.0, 2.0]),
                                  ([0.5, 0.5], [np.nan, 0.0])])
def test_binary_cross_entropy_refuses_values_outside_0_1_compiled_too(x, t):
    with pytest.raises(RuntimeError) as theirs:
        F(torch).binary_cross_entropy(torch.tensor(x), torch.tensor(t))
    compiled = tg.compile(lambda x, t: F(tg).binary_cross_entropy(x, t))
    compiled(tg.tensor([0.5, 0.25], requires_grad=True), tg.tensor([1.0, 0.0]))
    for fn in (lambda x, t: F(tg).binary_cross_entropy(x, t), compiled):
        with pytest.raises(RuntimeError) as ours:
            fn(tg.tensor(x, requires_grad=True), tg.tensor(t))
        assert str(ours.value) == str(theirs.value)
