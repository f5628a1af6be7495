"""The names PyTorch exposes at top level as well as in nn.functional (``torch.selu``,
``torch.dropout(x, p, train)``, ``torch.conv2d``, ...; src/tapegrad/toplevel.py), each
compared with PyTorch: values, ``grad_fn`` names, gradients, error types and texts, and for
the random ones the same draws after the same seed."""
import warnings

import numpy as np
import pytest

import tapegrad as tg
from tests.same_draws import both, draws_match

torch = pytest.importorskip("torch")

A = [[1.5, -2.0, 3.0, 0.5], [-0.5, 4.0, -1.0, 2.5]]
B = (np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 7.0 - 1.0).tolist()
W1 = (np.arange(12, dtype=np.float64).reshape(3, 2, 2) / 5.0 - 1.0).tolist()
W2 = (np.arange(16, dtype=np.float64).reshape(2, 2, 2, 2) / 9.0 - 0.7).tolist()
BIAS = [0.25, -0.5, 1.0]
V = (np.arange(6, dtype=np.float64).reshape(2, 3) / 3.0 - 0.4).tolist()
WB = (np.arange(60, dtype=np.float64).reshape(5, 4, 3) / 30.0 - 1.0).tolist()


def _c(m, value):
    return m.tensor(value, dtype=m.float64)


def outcome(m, prog, seed=0):
    """(values, grad_fn names, input gradient) of ``prog`` after ``manual_seed(seed)``, or
    ("error", type, text)."""
    m.manual_seed(seed)
    x = m.tensor(prog[1], dtype=m.float64, requires_grad=True)
    try:
        out = prog[0](m, x)
    except (RuntimeError, TypeError, ValueError, IndexError) as e:
        return "error", type(e).__name__, str(e).replace("tapegrad.", "torch.")
    outs = list(out) if isinstance(out, tuple) else [out]
    names = [None if t.grad_fn is None else type(t.grad_fn).__name__
             if m is torch else t.grad_fn.name() for t in outs]
    total = sum((t * (k + 1.5 + t.detach())).sum() for k, t in enumerate(outs)
                if t.requires_grad)
    grad = None
    if not isinstance(total, (int, float)):
        total.backward()
        grad = None if x.grad is None else np.array(x.grad.tolist())
    return [np.array(t.tolist()) for t in outs], names, grad


PROGRAMS = {
    # dropout family: three required positional arguments, PyTorch's masks for a seed
    "dropout_train": (lambda m, x: m.dropout(x, 0.4, True), A),
    "dropout_eval": (lambda m, x: m.dropout(x, 0.4, False), A),
    "dropout_p0": (lambda m, x: m.dropout(x, 0.0, True), A),
    "dropout_p1": (lambda m, x: m.dropout(x, 1.0, True), A),
    "dropout_keywords": (lambda m, x: m.dropout(input=x, p=0.3, train=True), A),
    "dropout_int_p": (lambda m, x: m.dropout(x, 0, True), A),
    "dropout_tensor_p": (lambda m, x: m.dropout(x, m.tensor(0.5), True), A),
    "dropout_empty": (lambda m, x: m.dropout(x[:0], 0.5, True), A),
    "dropout_0d": (lambda m, x: m.dropout(x[0, 0], 0.5, True), A),
    "dropout_3d": (lambda m, x: m.dropout(x, 0.5, True), B),
    "dropout_p_above_1": (lambda m, x: m.dropout(x, 1.5, True), A),
    "dropout_p_negative_eval": (lambda m, x: m.dropout(x, -0.1, False), A),
    "dropout_train_int": (lambda m, x: m.dropout(x, 0.5, 1), A),
    "dropout_train_float": (lambda m, x: m.dropout(x, True, 0.5), A),
    "dropout_p_str": (lambda m, x: m.dropout(x, "a", True), A),
    "dropout_list": (lambda m, x: m.dropout([1.0], 0.5, True), A),
    "dropout_list_keyword": (lambda m, x: m.dropout(input=[1.0], p=0.5, train=True), A),
    "alpha_dropout_train": (lambda m, x: m.alpha_dropout(x, 0.3, True), A),
    "alpha_dropout_eval": (lambda m, x: m.alpha_dropout(x, 0.3, False), A),
    "alpha_dropout_p1": (lambda m, x: m.alpha_dropout(x, 1.0, True), A),
    "alpha_dropout_range": (lambda m, x: m.alpha_dropout(x, 2.0, False), A),
    "feature_dropout_train": (lambda m, x: m.feature_dropout(x, 0.5, True), B),
    "feature_dropout_matrix": (lambda m, x: m.feature_dropout(x, 0.5, True), A),
    "feature_dropout_vector": (lambda m, x: m.feature_dropout(x[0], 0.5, True), A),
    "feature_dropout_vector_eval": (lambda m, x: m.feature_dropout(x[0], 0.5, False), A),
    "feature_dropout_vector_p0": (lambda m, x: m.feature_dropout(x[0], 0.0, True), A),
    "feature_dropout_empty": (lambda m, x: m.feature_dropout(x[0, :0], 0.5, True), A),
    "feature_alpha_dropout_train": (lambda m, x: m.feature_alpha_dropout(x, 0.5, True), B),
    "feature_alpha_dropout_eval": (lambda m, x: m.feature_alpha_dropout(x, 0.5, False), B),
    "feature_alpha_dropout_vector": (lambda m, x: m.feature_alpha_dropout(x[0], 0.5, True),
                                     A),
    # activations
    "selu": (lambda m, x: m.selu(x), A),
    "selu_0d": (lambda m, x: m.selu(x[1, 0]), A),
    "selu_empty": (lambda m, x: m.selu(x[:, :0]), A),
    "selu_keyword": (lambda m, x: m.selu(input=x), A),
    "selu_": (lambda m, x: m.selu_(x.clone()), A),
    "selu_leaf": (lambda m, x: m.selu_(x), A),
    "selu_list": (lambda m, x: m.selu([1.0]), A),
    "selu_list_keyword": (lambda m, x: m.selu(input=[1.0]), A),
    "celu": (lambda m, x: m.celu(x), A),
    "celu_alpha": (lambda m, x: m.celu(x, 2.5), A),
    "celu_alpha_keyword": (lambda m, x: m.celu(x, alpha=0.5), B),
    "celu_alpha_0": (lambda m, x: m.celu(x, 0.0), A),
    "celu_": (lambda m, x: m.celu_(x.clone(), 1.5), A),
    "celu_list": (lambda m, x: m.celu([1.0]), A),
    "rrelu_eval": (lambda m, x: m.rrelu(x), A),
    "rrelu_eval_bounds": (lambda m, x: m.rrelu(x, 0.1, 0.3), B),
    "rrelu_train": (lambda m, x: m.rrelu(x, training=True), B),
    "rrelu_train_positional": (lambda m, x: m.rrelu(x, 0.2, 0.4, True), A),
    "rrelu_generator": (lambda m, x: m.rrelu(x, 0.2, 0.4, True, m.Generator().manual_seed(7)),
                        B),
    "rrelu_bounds_reversed": (lambda m, x: m.rrelu(x, 0.5, 0.1), A),
    "rrelu_generator_int": (lambda m, x: m.rrelu(x, generator=3), A),
    "rrelu_": (lambda m, x: m.rrelu_(x.clone()), A),
    "rrelu__train": (lambda m, x: m.rrelu_(x.clone(), training=True), A),
    "rrelu_list": (lambda m, x: m.rrelu([1.0]), A),
    "threshold": (lambda m, x: m.threshold(x, 0.5, -3.0), A),
    "threshold_int": (lambda m, x: m.threshold(x, 1, 7), B),
    "threshold_": (lambda m, x: m.threshold_(x.clone(), 0.0, 2.0), A),
    "threshold_0d": (lambda m, x: m.threshold(x[0, 1], 0.0, 2.0), A),
    "threshold_list": (lambda m, x: m.threshold([1.0], 0.0, 2.0), A),
    "relu_": (lambda m, x: m.relu_(x.clone()), A),
    "relu_leaf": (lambda m, x: m.relu_(x), A),
    "relu__list": (lambda m, x: m.relu_([1.0]), A),
    # convolutions and pools
    "conv1d": (lambda m, x: m.conv1d(x.reshape(1, 2, 4), _c(m, W1)), A),
    "conv1d_bias_stride_padding": (
        lambda m, x: m.conv1d(x.reshape(1, 2, 4), _c(m, W1), _c(m, BIAS), 2, 1), A),
    "conv1d_keywords": (lambda m, x: m.conv1d(x.reshape(2, 4), weight=_c(m, W1),
                                              padding="same", dilation=2), A),
    "conv1d_weight_grad": (lambda m, x: m.conv1d(_c(m, A).reshape(1, 2, 4), x.reshape(3, 2, 2)),
                           W1),
    "conv1d_groups": (lambda m, x: m.conv1d(x.reshape(1, 2, 4), _c(m, W1)[:2, :1], groups=2),
                      A),
    "conv2d": (lambda m, x: m.conv2d(x.reshape(1, 2, 3, 4), _c(m, W2)), B),
    "conv2d_bias_padding": (lambda m, x: m.conv2d(x.reshape(1, 2, 3, 4), _c(m, W2),
                                                  _c(m, BIAS[:2]), (1, 2), 1), B),
    "conv2d_unbatched": (lambda m, x: m.conv2d(x.reshape(2, 3, 4), _c(m, W2)), B),
    "avg_pool1d": (lambda m, x: m.avg_pool1d(x.reshape(1, 2, 4), 2), A),
    "avg_pool1d_stride_padding": (lambda m, x: m.avg_pool1d(x.reshape(1, 2, 4), 3, 1, 1), A),
    "avg_pool1d_exclude_pad": (lambda m, x: m.avg_pool1d(x.reshape(2, 4), 2, 1, 1, False,
                                                         False), A),
    "avg_pool1d_list": (lambda m, x: m.avg_pool1d([1.0], 2), A),
    "max_pool1d": (lambda m, x: m.max_pool1d(x.reshape(1, 2, 4), 2), A),
    "max_pool1d_stride_padding": (lambda m, x: m.max_pool1d(x.reshape(2, 4), 3, 1, 1), A),
    "max_pool1d_dilation": (lambda m, x: m.max_pool1d(x, 2, 1, 0, 2), A),
    "max_pool1d_list": (lambda m, x: m.max_pool1d([1.0], 2), A),
    "max_pool2d": (lambda m, x: m.max_pool2d(x.reshape(1, 2, 3, 4), 2), B),
    "max_pool2d_stride_padding": (lambda m, x: m.max_pool2d(x.reshape(2, 3, 4), 2, 1, 1), B),
    "max_pool2d_keywords": (lambda m, x: m.max_pool2d(x, kernel_size=(2, 3), stride=(1, 1)),
                            B),
    "adaptive_avg_pool1d": (lambda m, x: m.adaptive_avg_pool1d(x.reshape(1, 2, 4), 3), A),
    "adaptive_avg_pool1d_2d": (lambda m, x: m.adaptive_avg_pool1d(x, 2), A),
    "pixel_shuffle": (lambda m, x: m.pixel_shuffle(x.reshape(1, 4, 1, 2), 2), A),
    "pixel_shuffle_bad": (lambda m, x: m.pixel_shuffle(x.reshape(1, 2, 2, 2), 2), A),
    "pairwise_distance": (lambda m, x: m.pairwise_distance(x, x.flip(0)), A),
    "pairwise_distance_p1_keepdim": (lambda m, x: m.pairwise_distance(x[0], x[1], 1.0,
                                                                      0.0, True), A),
    "pairwise_distance_broadcast": (lambda m, x: m.pairwise_distance(x, _c(m, A[0])), A),
    "pairwise_distance_list": (lambda m, x: m.pairwise_distance([1.0], x), A),
    "bilinear": (lambda m, x: m.bilinear(x, _c(m, V), _c(m, WB)), A),
    "bilinear_bias": (lambda m, x: m.bilinear(x, _c(m, V), _c(m, WB), _c(m, [1.0] * 5)), A),
    "bilinear_weight_list": (lambda m, x: m.bilinear(x, _c(m, V), [1.0]), A),
    "rms_norm": (lambda m, x: m.rms_norm(x, [4]), A),
    "rms_norm_weight_eps": (lambda m, x: m.rms_norm(x, (3, 4), _c(m, B[0]), 0.1), B),
    "rms_norm_list": (lambda m, x: m.rms_norm([1.0], [1]), A),
    # the ATen signatures of the normalisations, the embedding and the losses
    "layer_norm": (lambda m, x: m.layer_norm(x, [4]), B),
    "layer_norm_all": (lambda m, x: m.layer_norm(x, (3, 4), _c(m, B[0]), _c(m, B[1]), 0.1,
                                                 False), B),
    "layer_norm_bad_shape": (lambda m, x: m.layer_norm(x, [3]), B),
    "group_norm": (lambda m, x: m.group_norm(x, 3), B),
    "group_norm_affine": (lambda m, x: m.group_norm(x, 1, _c(m, V[0]), _c(m, V[1]), 1e-3,
                                                    True), B),
    "group_norm_bad_groups": (lambda m, x: m.group_norm(x, 2), B),
    "batch_norm_train": (lambda m, x: m.batch_norm(x, None, None, None, None, True, 0.1,
                                                   1e-5, False), B),
    "batch_norm_affine": (lambda m, x: m.batch_norm(x, _c(m, V[0]), _c(m, V[1]), None, None,
                                                    True, 0.1, 1e-5, True), B),
    "batch_norm_eval": (lambda m, x: m.batch_norm(x, _c(m, V[0]), None, _c(m, V[1]),
                                                  _c(m, [1.0, 2.0, 0.5]), False, 0.1, 1e-5,
                                                  False), B),
    "instance_norm": (lambda m, x: m.instance_norm(x, None, None, None, None, True, 0.1,
                                                   1e-5, False), B),
    "instance_norm_affine": (lambda m, x: m.instance_norm(x, _c(m, V[0]), _c(m, V[1]), None,
                                                          None, True, 0.1, 1e-5, False), B),
    "embedding": (lambda m, x: m.embedding(x, m.tensor([1, 0, 1, 1])), A),
    "embedding_padding": (lambda m, x: m.embedding(x, m.tensor([[1, 0], [1, 1]]), 1), A),
    "embedding_padding_negative": (lambda m, x: m.embedding(x, m.tensor([1, 0]), -2), A),
    "embedding_keywords": (lambda m, x: m.embedding(weight=x, indices=m.tensor([0, 1]),
                                                    padding_idx=0), A),
    "embedding_list": (lambda m, x: m.embedding([[1.0]], m.tensor([0])), A),
    "kl_div": (lambda m, x: m.kl_div(x, _c(m, V).abs().reshape(6)[:4]), A),
    "kl_div_none": (lambda m, x: m.kl_div(x, x.detach().exp(), 0), A),
    "kl_div_sum_log_target": (lambda m, x: m.kl_div(x, x.detach() * 0.5, 2, log_target=True),
                              A),
    "kl_div_code_5": (lambda m, x: m.kl_div(x, x.detach().exp(), 5), A),
    "kl_div_keyword": (lambda m, x: m.kl_div(x, x.detach().exp(), reduction=2), A),
    "kl_div_string": (lambda m, x: m.kl_div(x, x.detach().exp(), "mean"), A),
    "kl_div_string_keyword": (lambda m, x: m.kl_div(x, x.detach(), reduction="sum"), A),
    "kl_div_float": (lambda m, x: m.kl_div(x, x.detach(), 1.0), A),
    "bce_with_logits": (lambda m, x: m.binary_cross_entropy_with_logits(
        x, x.detach().sigmoid()), A),
    "bce_with_logits_all": (lambda m, x: m.binary_cross_entropy_with_logits(
        x, x.detach().sigmoid(), _c(m, A[0]).abs(), _c(m, A[1]).abs(), 0), A),
    "bce_with_logits_sum": (lambda m, x: m.binary_cross_entropy_with_logits(
        x, x.detach().sigmoid(), reduction=2), A),
    "cosine_embedding_loss": (lambda m, x: m.cosine_embedding_loss(
        x[0], x[1], _c(m, [1.0, -1.0, 1.0])), B),
    "cosine_embedding_loss_none": (lambda m, x: m.cosine_embedding_loss(
        x[0], x[1], _c(m, [1.0, -1.0, -1.0]), 0.1, 0), B),
    "hinge_embedding_loss": (lambda m, x: m.hinge_embedding_loss(x, _c(m, [1.0, -1.0] * 2)),
                             A),
    "hinge_embedding_loss_sum": (lambda m, x: m.hinge_embedding_loss(
        x, _c(m, [-1.0] * 4), 2.0, 2), A),
    "margin_ranking_loss": (lambda m, x: m.margin_ranking_loss(x[0], x[1], _c(m, [1.0] * 4)),
                            A),
    "margin_ranking_loss_none": (lambda m, x: m.margin_ranking_loss(
        x[0], x[1], _c(m, [1.0, -1.0] * 2), 0.5, 0), A),
    "poisson_nll_loss": (lambda m, x: m.poisson_nll_loss(x, x.detach().abs(), True, False,
                                                         1e-8, 1), A),
    "poisson_nll_loss_full": (lambda m, x: m.poisson_nll_loss(x.abs(), _c(m, A).abs() * 3,
                                                              False, True, 1e-3, 0), A),
    "triplet_margin_loss": (lambda m, x: m.triplet_margin_loss(x[0], x[1], x[0] * 2), B),
    "triplet_margin_loss_all": (lambda m, x: m.triplet_margin_loss(
        x[0], x[1], x[0] * 2, 0.5, 1.0, 1e-3, True, 2), B),
    # small non-nn names
    "rsub_number": (lambda m, x: m.rsub(x, 2.5), A),
    "rsub_number_alpha": (lambda m, x: m.rsub(x, 2, 3), A),
    "rsub_tensor": (lambda m, x: m.rsub(x, _c(m, A) * 2), A),
    "rsub_tensor_alpha": (lambda m, x: m.rsub(x, _c(m, A[0]), alpha=0.5), A),
    "rsub_tensor_broadcast": (lambda m, x: m.rsub(x[0], _c(m, B)), A),
    "rsub_list": (lambda m, x: m.rsub([1.0], x), A),
    "rsub_other_list": (lambda m, x: m.rsub(x, [1.0]), A),
    "split_with_sizes": (lambda m, x: m.split_with_sizes(x, [1, 3], 1), A),
    "split_with_sizes_default_dim": (lambda m, x: m.split_with_sizes(x, (1, 1)), A),
    "split_with_sizes_negative_dim": (lambda m, x: m.split_with_sizes(x, [2, 0, 1], dim=-2),
                                      B),
    "split_with_sizes_bad_sum": (lambda m, x: m.split_with_sizes(x, [1, 2], 1), A),
    "split_with_sizes_int": (lambda m, x: m.split_with_sizes(x, 1, 1), A),
    "split_with_sizes_list": (lambda m, x: m.split_with_sizes([1.0], [1]), A),
    "detach": (lambda m, x: m.detach(x * 2), A),
    "detach_list": (lambda m, x: m.detach([1.0]), A),
    "is_inference_list": (lambda m, x: m.is_inference([1.0]), A),
    "scalar_tensor_number": (lambda m, x: x * m.scalar_tensor(3, dtype=m.float64), A),
    "scalar_tensor_tensor": (lambda m, x: m.scalar_tensor(x), A),
    "scalar_tensor_str": (lambda m, x: m.scalar_tensor("a"), A),
    "pixel_unshuffle": (lambda m, x: m.pixel_unshuffle(x.reshape(2, 1, 2, 6), 2), B),
    "pixel_unshuffle_batched": (lambda m, x: m.pixel_unshuffle(x.reshape(2, 1, 1, 4, 3), 1),
                                B),
    "pixel_unshuffle_3d": (lambda m, x: m.pixel_unshuffle(x.reshape(1, 4, 6), 2), B),
    "pixel_unshuffle_height": (lambda m, x: m.pixel_unshuffle(x.reshape(1, 2, 3, 4), 2), B),
    "pixel_unshuffle_width": (lambda m, x: m.pixel_unshuffle(x.reshape(1, 2, 4, 3), 2), B),
    "pixel_unshuffle_zero": (lambda m, x: m.pixel_unshuffle(x, 0), B),
    "pixel_unshuffle_2d": (lambda m, x: m.pixel_unshuffle(x[0], 1), B),
    "pixel_unshuffle_list": (lambda m, x: m.pixel_unshuffle([1.0], 1), B),
    "channel_shuffle": (lambda m, x: m.channel_shuffle(x.reshape(1, 6, 4), 3), B),
    "channel_shuffle_4d": (lambda m, x: m.channel_shuffle(x.reshape(2, 4, 3, 1), 2), B),
    "channel_shuffle_one_group": (lambda m, x: m.channel_shuffle(x, 1), B),
    "channel_shuffle_not_dividing": (lambda m, x: m.channel_shuffle(x, 2), B),
    "channel_shuffle_zero": (lambda m, x: m.channel_shuffle(x, 0), B),
    "channel_shuffle_2d": (lambda m, x: m.channel_shuffle(x[0], 1), B),
    "conv3d": (lambda m, x: m.conv3d(x.reshape(1, 2, 3, 2, 2),
                                     _c(m, W2).reshape(2, 2, 2, 2, 1)), B),
    "conv3d_bias_stride_padding": (lambda m, x: m.conv3d(
        x.reshape(2, 3, 2, 2), _c(m, W2).reshape(2, 2, 2, 1, 2), _c(m, BIAS[:2]), (1, 2, 1),
        1, 1), B),
    "conv3d_groups_dilation": (lambda m, x: m.conv3d(
        x.reshape(1, 2, 3, 2, 2), _c(m, W2).reshape(4, 1, 2, 2, 1), None, 1, 0, (2, 1, 1),
        2), B),
    "conv3d_weight_grad": (lambda m, x: m.conv3d(_c(m, B).reshape(1, 2, 3, 2, 2),
                                                 x.reshape(2, 2, 2, 2, 1)), W2),
    "conv3d_bad_rank": (lambda m, x: m.conv3d(x, _c(m, W2).reshape(2, 2, 2, 2, 1)), B),
    "max_pool3d": (lambda m, x: m.max_pool3d(x.reshape(1, 2, 3, 2, 2), 2, 1), B),
    "max_pool3d_unbatched": (lambda m, x: m.max_pool3d(x.reshape(2, 3, 2, 2), (2, 1, 2)), B),
    "max_pool3d_padding": (lambda m, x: m.max_pool3d(x.reshape(1, 2, 3, 2, 2), 2, 2, 1), B),
    "max_pool3d_dilation": (lambda m, x: m.max_pool3d(x.reshape(1, 1, 6, 2, 2), (2, 1, 1),
                                                      1, 0, (3, 1, 1)), B),
    "max_pool3d_list": (lambda m, x: m.max_pool3d([1.0], 2), B),
}


# grad_fn names that differ from PyTorch's, (tapegrad's, PyTorch's), asserted as they are
# so that a change shows: nn.functional's in-place rrelu_ and threshold(inplace=True) record
# their forward's node (or the copy back), not PyTorch's fused in-place node, and its
# bilinear ends in a squeeze where PyTorch's ends in a view.  Values and gradients agree.
KNOWN_NAMES = {
}


def _same(mine, theirs, name=None):
    if theirs[0] == "error" or mine[0] == "error":
        assert mine == theirs
        return
    assert len(mine[0]) == len(theirs[0])
    for a, b in zip(mine[0], theirs[0]):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
    if name in KNOWN_NAMES:
        assert (mine[1], theirs[1]) == KNOWN_NAMES[name]
    else:
        assert mine[1] == theirs[1]
    if theirs[2] is None:
        assert mine[2] is None
    else:
        # (atol: a normalisation's gradient is a difference of terms of order 1 that
        # nearly cancel; the two libraries sum them in different orders)
        np.testing.assert_allclose(mine[2], theirs[2], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_top_level_name_matches_pytorch(name):
    prog = PROGRAMS[name]
    _same(outcome(tg, prog), outcome(torch, prog), name)


@pytest.mark.parametrize("make", [
    lambda m: m.dropout(m.ones(5, 7, dtype=m.float64), 0.3, True),
    lambda m: m.alpha_dropout(m.ones(40, dtype=m.float64), 0.6, True),
    lambda m: m.feature_dropout(m.ones(3, 4, 2, dtype=m.float64), 0.5, True),
    lambda m: m.feature_alpha_dropout(m.ones(3, 4, 2, dtype=m.float64), 0.5, True),
    lambda m: m.rrelu(_c(m, np.linspace(-3, 1, 30).tolist()), training=True),
    lambda m: m.rrelu_(_c(m, np.linspace(-3, 1, 30).tolist()), 0.0, 1.0, True),
], ids=["dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout", "rrelu",
        "rrelu_"])
@pytest.mark.parametrize("seed", [0, 3, 12345])
def test_draws_are_pytorchs_bit_for_bit(make, seed):
    draws_match(torch, make, seed)


@pytest.mark.parametrize("seed", [0, 9])
def test_rrelu_draws_from_the_generator_it_is_given(seed):
    """The slopes come from ``generator``'s stream (PyTorch's numbers for its seed), and the
    global stream is left untouched: the next global draw is the one after the seed."""
    def make(m):
        g = m.Generator().manual_seed(seed + 1)
        x = _c(m, np.linspace(-2, 1, 25).tolist())
        return m.rrelu(x, 0.1, 0.9, True, g), m.rrelu(x, 0.1, 0.9, True, generator=g)
    draws_match(torch, make, seed)
    both(torch, seed)
    tg.rrelu(tg.tensor(np.linspace(-2, 1, 25).tolist()), training=True,
             generator=tg.Generator().manual_seed(1))
    np.testing.assert_array_equal(tg.rand(4).numpy(), torch.rand(4, dtype=torch.float64))


@pytest.mark.parametrize("call", [
    lambda m: m.dropout(m.ones(3), 0.5),
    lambda m: m.threshold(m.ones(3), 0.5),
    lambda m: m.selu(m.ones(3), True),
    lambda m: m.dropout(m.ones(3), 0.5, True, False),
    lambda m: m.max_pool2d(m.ones(1, 2, 2), 2, return_indices=True),
    lambda m: m.batch_norm(m.ones(2, 3), None, None, None, None, True, 0.1, 1e-5),
    lambda m: m.poisson_nll_loss(m.ones(3), m.ones(3), True, False, 1e-8),
    lambda m: m.layer_norm(m.ones(3), [3], eps=1e-5, cudnn_enabled=True),
    lambda m: m.kl_div(m.ones(3), m.ones(3), 1, False),
])
def test_a_wrong_call_is_a_type_error(call):
    """Missing or extra arguments: a TypeError in both (PyTorch's parser words it its own
    way; the type is what programs catch)."""
    with pytest.raises(TypeError):
        call(torch)
    with pytest.raises(TypeError):
        call(tg)


def test_in_place_names_overwrite_their_input():
    for name, args in (("selu_", ()), ("celu_", (2.0,)), ("rrelu_", ()), ("relu_", ()),
                       ("threshold_", (0.0, 9.0))):
        mine, theirs = tg.tensor(A), torch.tensor(A, dtype=torch.float64)
        assert getattr(tg, name)(mine, *args) is mine
        assert getattr(torch, name)(theirs, *args) is theirs
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


def test_gradients_against_central_differences():
    # (shifted off 0, where selu, celu and rrelu have a kink)
    x = tg.tensor((np.array(B) + 0.01).tolist(), requires_grad=True)
    for fn in (lambda t: tg.selu(t), lambda t: tg.celu(t, 0.7), lambda t: tg.rrelu(t),
               lambda t: tg.max_pool2d(t.reshape(1, 2, 3, 4), 2, 1),
               lambda t: tg.rms_norm(t, [4]), lambda t: tg.pairwise_distance(t[0], t[1])):
        assert tg.testing.gradcheck(fn, x)


def test_rrelu_in_training_under_compile_draws_anew_each_call():
    """The slopes depend on the signs and on the stream: a compiled function must not replay
    the first call's slopes, so a traced rrelu in training runs eagerly."""
    def f(x):
        return tg.rrelu(x, 0.1, 0.9, True, g).sum()

    g = tg.Generator().manual_seed(2)
    fn = tg.compile(f)
    results = []
    for value in ([-1.0, 2.0, -3.0], [1.0, -2.0, 3.0], [-1.0, 2.0, -3.0]):
        results.append(fn(tg.tensor(value)).item())
    g.manual_seed(2)
    expected = [f(tg.tensor(v)).item() for v in ([-1.0, 2.0, -3.0], [1.0, -2.0, 3.0],
                                                  [-1.0, 2.0, -3.0])]
    assert results == expected
    assert results[0] != results[2]


def test_toplevel_names_are_public():
    from tapegrad import toplevel
    for name in toplevel.__all__:
        assert getattr(tg, name) is getattr(toplevel, name)
        assert name in dir(tg) and name in tg.__all__
        assert hasattr(torch, name), name
        assert "Example:" in getattr(tg, name).__doc__


def test_is_inference_and_scalar_tensor():
    for m in (tg, torch):
        x = m.ones(2, dtype=m.float64, requires_grad=True)
        assert m.is_inference(x) is False
        s = m.scalar_tensor(2, dtype=m.float64, requires_grad=True)
        assert s.shape == () and s.requires_grad and s.item() == 2.0 and s.is_leaf
    assert tg.scalar_tensor(True, dtype=tg.float64).item() == 1.0


WINDOWS = ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
           "kaiser_window"]


@pytest.mark.parametrize("name", WINDOWS)
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 7, 10, 33])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows_are_pytorchs(name, n, periodic):
    mine = getattr(tg, name)(n, periodic, dtype=tg.float64)
    theirs = getattr(torch, name)(n, periodic, dtype=torch.float64)
    assert mine.dtype == tg.float64 and mine.shape == tuple(theirs.shape)
    # (an ulp apart at most: NumPy's cos and I0 against PyTorch's vectorised kernels)
    np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("args", [(6, True, 0.6, 0.4), (5, False, 0.5, 0.5)])
def test_hamming_window_coefficients(args):
    mine = tg.hamming_window(*args, dtype=tg.float64)
    theirs = torch.hamming_window(*args, dtype=torch.float64)
    np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("beta", [0.0, 2.5, 12.0, 30.0])
def test_kaiser_window_beta(beta):
    mine = tg.kaiser_window(9, False, beta, dtype=tg.float64)
    theirs = torch.kaiser_window(9, False, beta, dtype=torch.float64)
    np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("name", WINDOWS)
def test_window_defaults_and_errors(name):
    mine, theirs = getattr(tg, name), getattr(torch, name)
    assert mine(5).dtype == tg.get_default_dtype()
    w = mine(3, requires_grad=True, dtype=tg.float64)
    assert w.requires_grad and w.is_leaf
    for bad, error in ((-1, RuntimeError), (2.5, TypeError)):
        with pytest.raises(error) as got:
            mine(bad)
        with pytest.raises(error) as expected:
            theirs(bad)
        assert str(got.value).replace("tapegrad.", "torch.") == str(expected.value)
    for lib, err in ((tg, None), (torch, None)):
        with pytest.raises(RuntimeError, match=f"^{name} expects floating point dtypes"):
            getattr(lib, name)(3, dtype=lib.int64)


@pytest.mark.parametrize("indices, shape", [
    ([5, 7, -1, 0], (2, 4)), ([[3, 11], [23, -24]], (2, 3, 4)), (5, 6), ([8, -9], (2, 4)),
    ([1, 2], ()), ([], (2, 0)), ([4], [5]), ([0, 59], (3, 4, 5)), ([7], (1, 1, 8)),
])
def test_unravel_index_matches_pytorch(indices, shape):
    mine = tg.unravel_index(tg.tensor(indices, dtype=tg.int64), shape)
    theirs = torch.unravel_index(torch.tensor(indices, dtype=torch.int64), shape)
    assert isinstance(mine, tuple) and len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        assert a.dtype == tg.int64 and a.shape == tuple(b.shape)
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("call", [
    lambda m: m.unravel_index(m.tensor([1.0]), (2, 4)),
    lambda m: m.unravel_index(m.tensor([True]), (2, 4)),
    lambda m: m.unravel_index(m.tensor([1]), (2, -4)),
    lambda m: m.unravel_index(m.tensor([1]), -3),
    lambda m: m.unravel_index(m.tensor([1]), (2, 0)),
    lambda m: m.unravel_index(m.tensor([1]), (2.0, 3)),
    lambda m: m.unravel_index(m.tensor([1]), 2.0),
    lambda m: m.unravel_index([1], (2,)),
])
def test_unravel_index_errors(call):
    errors = (TypeError, ValueError, RuntimeError, AttributeError)
    with pytest.raises(errors) as expected:
        call(torch)
    with pytest.raises(errors) as got:
        call(tg)
    assert type(got.value) is type(expected.value)
    assert str(got.value).replace("tapegrad.", "torch.") == str(expected.value)


def test_unravel_index_under_compile_reads_the_indices_each_call():
    """The coordinates come from the indices' values: a compiled function gives the
    coordinates of each call's indices, not the first's."""
    def f(x, idx):
        rows, cols = tg.unravel_index(idx, (2, 4))
        return (x[rows, cols] * tg.tensor([1.0, 2.0])).sum()

    fn = tg.compile(f)
    x = tg.tensor(A, requires_grad=True)
    for idx in ([5, 2], [0, 7], [3, 3]):
        got, expected = fn(x, tg.tensor(idx)), f(x, tg.tensor(idx))
        assert got.item() == expected.item()


def _kind(t):
    return np.dtype(str(t.dtype).split(".")[-1]).kind


def test_asarray_of_a_tensor():
    for m in (tg, torch):
        with warnings.catch_warnings():
            # (PyTorch 2.13 warns that an unspecified requires_grad now follows obj's, on a
            # copy of a tensor that requires grad; tapegrad does what it does, silently)
            warnings.simplefilter("ignore", UserWarning)
            _asarray_of_a_tensor(m)


def _asarray_of_a_tensor(m):
    x = m.tensor([1.0, -2.0], dtype=m.float64, requires_grad=True)
    assert m.asarray(x) is x
    assert m.asarray(x, dtype=m.float64, copy=False) is x
    c = m.asarray(x, copy=True)
    name = type(c.grad_fn).__name__ if m is torch else c.grad_fn.name()
    assert name == "CloneBackward0" and c is not x
    (c * 3).sum().backward()
    np.testing.assert_array_equal(np.array(x.grad.tolist()), [3.0, 3.0])
    with pytest.raises(RuntimeError, match="^Only Tensors of floating point and complex "):
        m.asarray(x, dtype=m.int64)
    i = m.asarray(x, dtype=m.int64, requires_grad=False)
    assert i.tolist() == [1, -2] and _kind(i) == "i" and not i.requires_grad
    assert x.requires_grad
    y = m.tensor([1.0], dtype=m.float64)
    assert m.asarray(y, requires_grad=True) is y and y.requires_grad and y.is_leaf


def test_asarray_of_numpy_arrays_shares_memory():
    for m in (tg, torch):
        a = np.array([1.0, 2.0])
        shared, copied = m.asarray(a), m.asarray(a, copy=True)
        ints = m.asarray(np.array([3, 4], dtype=np.int32))
        a[0] = 9.0
        assert shared.tolist() == [9.0, 2.0] and copied.tolist() == [1.0, 2.0]
        assert str(ints.dtype).endswith("int32") and ints.tolist() == [3, 4]
        converted = m.asarray(a, dtype=m.int64)
        assert converted.tolist() == [9, 2] and _kind(converted) == "i"
        r = m.asarray(np.array([0.5]), requires_grad=True)
        assert r.requires_grad and r.is_leaf


@pytest.mark.parametrize("obj, kwargs", [
    ([1, 2], {}), ([[1.5, 2], [3, 4]], {"dtype": "float64"}), (3, {}), (True, {}),
    ([True, False], {}), (np.float64(2.5), {}), ([2.0], {"dtype": "float64",
                                                        "requires_grad": True}),
    ([[1, 2]], {"dtype": "int32"}), (np.arange(3), {}),
])
def test_asarray_of_data_matches_pytorch(obj, kwargs):
    def run(m):
        kw = {k: getattr(m, v) if k == "dtype" else v for k, v in kwargs.items()}
        return m.asarray(obj, **kw)
    mine, theirs = run(tg), run(torch)
    assert str(mine.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    assert mine.shape == tuple(theirs.shape) and mine.tolist() == theirs.tolist()
    assert mine.requires_grad == theirs.requires_grad


@pytest.mark.parametrize("call", [
    lambda m: m.asarray([1, 2], copy=False),
    lambda m: m.asarray(m.tensor([1.0], dtype=m.float64), dtype=m.int64, copy=False),
    lambda m: m.asarray(np.array([1.0]), dtype=m.int64, copy=False),
    lambda m: m.asarray([1, 2], requires_grad=True),
    lambda m: m.asarray("a"),
])
def test_asarray_errors(call):
    errors = (TypeError, ValueError, RuntimeError)
    with pytest.raises(errors) as expected:
        call(torch)
    with pytest.raises(errors) as got:
        call(tg)
    assert type(got.value) is type(expected.value)
    assert str(got.value) == str(expected.value)


NAN = float("nan")
POOLED = [[[1.0, 3.0, 3.0, -1.0, NAN, 2.0, NAN, 0.0], [-2.0, -2.0, 5.0, 4.0, 5.0, -1.0, 0.5,
                                                     0.5]]]


@pytest.mark.parametrize("call", [
    lambda m, x: m.max_pool1d_with_indices(x, 2),
    lambda m, x: m.max_pool1d_with_indices(x, 3, 2, 1, 1),
    lambda m, x: m.max_pool1d_with_indices(x[0], 3, 1, 1, 2),
    lambda m, x: m.max_pool1d_with_indices(x, kernel_size=2, stride=3),
    lambda m, x: m.max_pool1d_with_indices(x[..., 2:4], 2, 1, 1),
    lambda m, x: m.max_pool1d_with_indices(-x.abs(), 4, 2, 2),
    lambda m, x: m.adaptive_max_pool1d(x, 3),
    lambda m, x: m.adaptive_max_pool1d(x[0], 5),
    lambda m, x: m.adaptive_max_pool1d(x, (2,)),
    lambda m, x: m.adaptive_max_pool1d(x, 8),
    lambda m, x: m.adaptive_max_pool1d(x, 11),
    lambda m, x: m.adaptive_max_pool1d(x[..., :3], 1),
])
def test_pools_with_indices_match_pytorch(call):
    results = []
    for m in (tg, torch):
        x = m.tensor(POOLED, dtype=m.float64, requires_grad=True)
        values, indices = call(m, x)
        name = type(values.grad_fn).__name__ if m is torch else values.grad_fn.name()
        assert indices.grad_fn is None and _kind(indices) == "i"
        values.nan_to_num(0.0).mul(m.arange(values.shape[-1], dtype=m.float64) + 1).sum() \
            .backward()
        results.append((np.array(values.tolist()), name, indices.tolist(),
                        np.array(x.grad.tolist())))
    (v1, n1, i1, g1), (v2, n2, i2, g2) = results
    np.testing.assert_array_equal(v1, v2)
    assert n1 == n2 and i1 == i2
    np.testing.assert_array_equal(g1, g2)


@pytest.mark.parametrize("call", [
    lambda m: m.max_pool1d_with_indices(m.ones(4), 2),
    lambda m: m.adaptive_max_pool1d(m.ones(4), 2),
    lambda m: m.max_pool1d_with_indices([1.0], 2),
    lambda m: m.adaptive_max_pool1d([1.0], 2),
])
def test_pools_with_indices_errors(call):
    with pytest.raises((RuntimeError, TypeError)) as expected:
        call(torch)
    with pytest.raises((RuntimeError, TypeError)) as got:
        call(tg)
    assert type(got.value) is type(expected.value)
    assert str(got.value) == str(expected.value)


def test_pool_indices_under_compile_follow_the_values():
    def f(x):
        values, indices = tg.max_pool1d_with_indices(x, 2)
        return values.sum() + indices.double().sum()

    fn = tg.compile(f)
    got = []
    for row in ([[1.0, 2.0, 4.0, 3.0]], [[2.0, 1.0, 4.0, 3.0]], [[1.0, 2.0, 3.0, 4.0]]):
        x = tg.tensor(row)
        got.append(fn(x).item())
        assert got[-1] == f(x).item()
    assert got == [9.0, 8.0, 10.0]     # (the same maxima, other indices each time)
