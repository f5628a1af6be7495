"""A second backward through a graph without ``retain_graph`` raises where PyTorch's does and
runs where PyTorch's runs: where a node saved a tensor that the first backward freed.  For an op
tapegrad builds from other ops, PyTorch's one node for it decides (a triangle, a number weight,
an upsampling save nothing; index_select, gather, take and the reflection and replication pads
save their indices or input; index_add and scatter_add their index only for a source that
requires grad), not the records it is made of.  Each op is run on a leaf, backward twice, and
the outcome compared with PyTorch's."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

# (rank 2: ops whose gradient needs distinct, nonzero singular values -- svdvals -- add an
# identity, since at a zero singular value each LAPACK picks its own null vector)
A = np.arange(1., 13.).reshape(3, 4) / 7 + 0.1

OPS = {
 "tril": lambda m, x: x.tril(), "triu": lambda m, x: m.triu(x, 1),
 "lerp_s": lambda m, x: m.lerp(x, x.detach() * 2, 0.3), "lerp_t": lambda m, x: m.lerp(x, x.detach()*2, m.full_like(x.detach(), 0.3)),
 "trapezoid": lambda m, x: m.trapezoid(x), "interp_lin": lambda m, x: m.nn.functional.interpolate(x[None], scale_factor=2, mode="linear"),
 "index_select": lambda m, x: m.index_select(x, 1, m.tensor([0, 2])), "gather": lambda m, x: m.gather(x, 1, m.tensor([[0], [1], [2]])),
 "take": lambda m, x: m.take(x, m.tensor([0, 5])), "take_along_dim": lambda m, x: m.take_along_dim(x, m.tensor([[0], [1], [2]]), 1),
 "pad_reflect": lambda m, x: m.nn.functional.pad(x[None], (1, 1), mode="reflect"), "pad_replicate": lambda m, x: m.nn.functional.pad(x[None], (1, 1), mode="replicate"),
 "pad_circular": lambda m, x: m.nn.functional.pad(x[None], (1, 1), mode="circular"), "pad_const": lambda m, x: m.nn.functional.pad(x, (1, 1)),
 "slice": lambda m, x: x[:, 1:3], "adv_index": lambda m, x: x[[0, 0]], "mask": lambda m, x: x[x > 0.5],
 "add": lambda m, x: x + 1, "mul_c": lambda m, x: x * 2.0, "mul": lambda m, x: x * x, "exp": lambda m, x: x.exp(), "sum": lambda m, x: x.sum(1),
 "masked_fill": lambda m, x: x.masked_fill(m.tensor([True, False, True, False]), 2.0), "where": lambda m, x: m.where(x > 0.5, x, 0.0),
 "cat": lambda m, x: m.cat([x, x]), "stack": lambda m, x: m.stack([x, x]), "flip": lambda m, x: x.flip(0), "roll": lambda m, x: x.roll(1, 0),
 "repeat": lambda m, x: x.repeat(2, 1), "expand": lambda m, x: x[None].expand(2, 3, 4), "diag": lambda m, x: m.diagonal(x), "cumsum": lambda m, x: x.cumsum(0),
 "clamp": lambda m, x: x.clamp(0.3, 1.0), "relu": lambda m, x: m.relu(x - 0.8), "abs": lambda m, x: (x - 0.8).abs(), "mse": lambda m, x: m.nn.functional.mse_loss(x, x.detach() * 0.5),
 "l1": lambda m, x: m.nn.functional.l1_loss(x, x.detach() * 0.5), "softmax": lambda m, x: x.softmax(1), "logsumexp": lambda m, x: x.logsumexp(1),
 "max_dim": lambda m, x: x.max(1).values, "sort": lambda m, x: x.sort(1).values, "topk": lambda m, x: x.topk(2).values, "cummax": lambda m, x: x.cummax(1).values,
 "norm": lambda m, x: x.norm(), "std": lambda m, x: x.std(1), "var": lambda m, x: x.var(), "mean": lambda m, x: x.mean(0), "prod": lambda m, x: x.prod(1),
 "addmm": lambda m, x: m.addmm(x[:, :3], x, x.detach()[:, :3].t().contiguous() if False else m.ones(4, 3, dtype=m.float64)),
 "linear": lambda m, x: m.nn.functional.linear(x, m.ones(2, 4, dtype=m.float64)), "layer_norm": lambda m, x: m.nn.functional.layer_norm(x, (4,)),
 "index_add": lambda m, x: x.index_add(0, m.tensor([0, 2]), x.detach()[:2]), "scatter": lambda m, x: x.scatter(0, m.tensor([[0, 1, 2, 0]]), 1.5),
 "scatter_add": lambda m, x: x.scatter_add(0, m.tensor([[0, 1, 2, 0]]), x.detach()[:1]), "index_fill": lambda m, x: x.index_fill(1, m.tensor([0]), 1.0),
 "unfold": lambda m, x: x.unfold(1, 2, 1), "narrow": lambda m, x: x.narrow(1, 1, 2), "split": lambda m, x: x.split(2, 1)[1], "unbind": lambda m, x: x.unbind(0)[1],
 "diag_embed": lambda m, x: m.diag_embed(x), "trace": lambda m, x: m.trace(x), "kron": lambda m, x: m.kron(x, x.detach()), "outer": lambda m, x: m.outer(x[0], x[1].detach()),
 "repeat_interleave": lambda m, x: x.repeat_interleave(2, 0), "tile": lambda m, x: x.tile(2), "nan_to_num": lambda m, x: m.nan_to_num(x), "clone": lambda m, x: x.clone(),
 "sigmoid": lambda m, x: x.sigmoid(), "tanh": lambda m, x: x.tanh(), "pow2": lambda m, x: x ** 2, "sqrt": lambda m, x: x.sqrt(), "hardtanh": lambda m, x: m.nn.functional.hardtanh(x),
 "dropout_eval": lambda m, x: m.nn.functional.dropout(x, training=False), "flatten": lambda m, x: x.flatten(), "permute": lambda m, x: x.permute(1, 0),
 "embedding": lambda m, x: m.nn.functional.embedding(m.tensor([0, 2]), x), "one_hot_mm": lambda m, x: m.nn.functional.one_hot(m.tensor([0, 2]), 3).double() @ x,
 "max_pool1d": lambda m, x: m.nn.functional.max_pool1d(x[None], 2), "avg_pool1d": lambda m, x: m.nn.functional.avg_pool1d(x[None], 2),
 "conv1d": lambda m, x: m.nn.functional.conv1d(x[None], m.ones(2, 3, 2, dtype=m.float64)), "cross_entropy": lambda m, x: m.nn.functional.cross_entropy(x, m.tensor([0, 1, 3])),
 "nll": lambda m, x: m.nn.functional.nll_loss(x, m.tensor([0, 1, 3])), "bce": lambda m, x: m.nn.functional.binary_cross_entropy(x.sigmoid(), x.detach() * 0 + 0.5),
 "huber": lambda m, x: m.nn.functional.huber_loss(x, x.detach() * 0.5), "smooth_l1": lambda m, x: m.nn.functional.smooth_l1_loss(x, x.detach() * 0.5),
 "movedim": lambda m, x: x.movedim(0, 1), "squeeze": lambda m, x: x[None].squeeze(0), "masked_select": lambda m, x: x.masked_select(x > 0.5),
 "index_put": lambda m, x: x.index_put((m.tensor([0, 1]),), m.tensor(1.0, dtype=m.float64)), "put": lambda m, x: x.put(m.tensor([0, 3]), m.tensor([1.0, 2.0], dtype=m.float64)),
 "chunk": lambda m, x: x.chunk(2, 1)[0], "diff": lambda m, x: x.diff(), "cross": lambda m, x: m.linalg.cross(x[:, :3], x.detach()[:, :3]),
 "amax": lambda m, x: x.amax(1), "median": lambda m, x: x.median(), "quantile": lambda m, x: x.quantile(0.3), "logcumsumexp": lambda m, x: x.logcumsumexp(1),
 "glu": lambda m, x: m.nn.functional.glu(x), "gelu": lambda m, x: m.nn.functional.gelu(x), "silu": lambda m, x: m.nn.functional.silu(x), "elu": lambda m, x: m.nn.functional.elu(x),
 "softplus": lambda m, x: m.nn.functional.softplus(x), "log_softmax": lambda m, x: x.log_softmax(1), "normalize": lambda m, x: m.nn.functional.normalize(x),
 "cosine_sim": lambda m, x: m.nn.functional.cosine_similarity(x, x.detach() + 1), "pdist": lambda m, x: m.nn.functional.pdist(x), "cdist": lambda m, x: m.cdist(x, x.detach()),
 "atan2": lambda m, x: m.atan2(x, x.detach() + 1), "maximum": lambda m, x: m.maximum(x, x.detach() * 0 + 0.7), "fmod": lambda m, x: m.fmod(x, 0.3), "remainder": lambda m, x: m.remainder(x, 0.3),
 "sinc": lambda m, x: m.sinc(x), "erf": lambda m, x: m.erf(x), "lgamma": lambda m, x: m.lgamma(x), "digamma": lambda m, x: m.digamma(x), "xlogy": lambda m, x: m.xlogy(x, x.detach()),
 "interp_nearest": lambda m, x: m.nn.functional.interpolate(x[None], scale_factor=2, mode="nearest"), "interp_bilinear": lambda m, x: m.nn.functional.interpolate(x[None, None], scale_factor=2, mode="bilinear"),
 "adaptive_avg": lambda m, x: m.nn.functional.adaptive_avg_pool1d(x[None], 2), "unfold_F": lambda m, x: m.nn.functional.unfold(x[None, None], (2, 2)),
 "rot90": lambda m, x: x.rot90(), "triu_indices_idx": lambda m, x: x[m.triu_indices(3, 4).unbind(0)], "bmm": lambda m, x: m.bmm(x[None], m.ones(1, 4, 2, dtype=m.float64)),
 "einsum": lambda m, x: m.einsum("ij,ij->i", x, x.detach()), "tensordot": lambda m, x: m.tensordot(x, m.ones(4, 2, dtype=m.float64), 1), "dot": lambda m, x: m.dot(x[0], x.detach()[1]),
 "mv": lambda m, x: m.mv(x, m.ones(4, dtype=m.float64)), "matmul": lambda m, x: x @ m.ones(4, 2, dtype=m.float64), "det": lambda m, x: m.linalg.det(x[:, :3]),
 "inv": lambda m, x: m.linalg.inv(x[:, :3] + 3 * m.eye(3, dtype=m.float64)), "addcmul": lambda m, x: m.addcmul(x, x.detach(), x.detach()), "addcdiv": lambda m, x: m.addcdiv(x, x.detach(), x.detach() + 1),
 "baddbmm": lambda m, x: m.baddbmm(x[None, :, :2], x.detach()[None], m.ones(1, 4, 2, dtype=m.float64)), "logaddexp": lambda m, x: m.logaddexp(x, x.detach()),
 "hypot": lambda m, x: m.hypot(x, x.detach()), "copysign": lambda m, x: m.copysign(x, x.detach() - 0.8), "heaviside_mul": lambda m, x: x * m.heaviside(x.detach() - 0.8, m.tensor(0.5, dtype=m.float64)),
 "renorm": lambda m, x: x.renorm(2, 0, 1.0), "dist": lambda m, x: m.dist(x, x.detach() * 0.5), "cumprod": lambda m, x: x.cumprod(1), "masked_scatter": lambda m, x: x.masked_scatter(x.detach() > 0.5, m.zeros(12, dtype=m.float64)),
 "select_scatter": lambda m, x: m.select_scatter(x, m.zeros(4, dtype=m.float64), 0, 1), "slice_scatter": lambda m, x: m.slice_scatter(x, m.zeros(3, 2, dtype=m.float64), 1, 0, 2),
 "diagonal_scatter": lambda m, x: m.diagonal_scatter(x, m.zeros(3, dtype=m.float64)), "index_copy": lambda m, x: x.index_copy(0, m.tensor([1]), m.zeros(1, 4, dtype=m.float64)),
 "kl_div": lambda m, x: m.nn.functional.kl_div(x.log_softmax(1), x.detach().softmax(1), reduction="batchmean"), "poisson_nll": lambda m, x: m.nn.functional.poisson_nll_loss(x, x.detach()),
 "margin": lambda m, x: m.nn.functional.margin_ranking_loss(x[0], x[1], m.ones(4, dtype=m.float64)), "hinge": lambda m, x: m.nn.functional.hinge_embedding_loss(x, m.ones(3, 4, dtype=m.float64)),
 "batch_norm": lambda m, x: m.nn.functional.batch_norm(x, None, None, training=True), "group_norm": lambda m, x: m.nn.functional.group_norm(x[None], 1),
 "instance_norm": lambda m, x: m.nn.functional.instance_norm(x[None]), "prelu": lambda m, x: m.nn.functional.prelu(x - 0.8, m.tensor([0.25], dtype=m.float64)),
 "leaky": lambda m, x: m.nn.functional.leaky_relu(x - 0.8), "logsigmoid": lambda m, x: m.nn.functional.logsigmoid(x), "softsign": lambda m, x: m.nn.functional.softsign(x),
 "tanhshrink": lambda m, x: m.nn.functional.tanhshrink(x), "hardswish": lambda m, x: m.nn.functional.hardswish(x), "mish": lambda m, x: m.nn.functional.mish(x),
 "std_mean": lambda m, x: m.std_mean(x, 1)[0], "aminmax": lambda m, x: m.aminmax(x).min, "min": lambda m, x: x.min(), "nanmean": lambda m, x: x.nanmean(), "nansum": lambda m, x: x.nansum(),
 "count_mul": lambda m, x: x * m.count_nonzero(x.detach()), "clip_grad_like": lambda m, x: x / x.detach().norm(), "frac": lambda m, x: x.frac(), "round_mul": lambda m, x: x + x.detach().round(),
 "trunc": lambda m, x: x.trunc() + x, "sign": lambda m, x: x.sign() * x, "reciprocal": lambda m, x: x.reciprocal(), "rsqrt": lambda m, x: x.rsqrt(), "log1p": lambda m, x: x.log1p(), "expm1": lambda m, x: x.expm1(),
 "polar_abs": lambda m, x: m.sgn(x) * x, "square": lambda m, x: x.square(), "neg": lambda m, x: -x, "sub": lambda m, x: x - x.detach(), "div_c": lambda m, x: x / 3.0, "div": lambda m, x: x / (x.detach() + 1), "rdiv": lambda m, x: 1.0 / x,
 "pow_t": lambda m, x: x ** x.detach(), "rpow": lambda m, x: 2.0 ** x, "pow_tt": lambda m, x: m.pow(x.detach(), x), "sin": lambda m, x: x.sin(), "cos": lambda m, x: x.cos(), "log": lambda m, x: x.log(),
 "cummin": lambda m, x: x.cummin(1).values, "kthvalue": lambda m, x: x.kthvalue(2, 1).values, "mode": lambda m, x: x.mode(1).values, "nanmedian": lambda m, x: x.nanmedian(1).values, "msort": lambda m, x: x.msort(),
 "logdet": lambda m, x: m.logdet(x[:, :3] + 3 * m.eye(3, dtype=m.float64)), "cholesky": lambda m, x: m.linalg.cholesky(x[:, :3] @ x[:, :3].t() + m.eye(3, dtype=m.float64)),
 "solve": lambda m, x: m.linalg.solve(x[:, :3] + 3 * m.eye(3, dtype=m.float64), m.ones(3, dtype=m.float64)), "qr": lambda m, x: m.linalg.qr(x[:, :3] + 3 * m.eye(3, dtype=m.float64))[1], "svdvals": lambda m, x: m.linalg.svdvals(x + m.eye(3, 4, dtype=m.float64)),
 "eigh": lambda m, x: m.linalg.eigvalsh(x[:, :3] + x[:, :3].t()), "pinv": lambda m, x: m.linalg.pinv(x), "matrix_exp": lambda m, x: m.linalg.matrix_exp(x[:, :3] / 5), "vander": lambda m, x: m.vander(x[0], 3),
 "block_diag": lambda m, x: m.block_diag(x, x.detach()), "cartesian": lambda m, x: m.cartesian_prod(x[0], x.detach()[1])[:, 0], "histc_mul": lambda m, x: x.sum() * 1.0, "bucketize": lambda m, x: x * 1.0,
 "sum_to_size": lambda m, x: x.sum_to_size(1, 4), "view_as": lambda m, x: x.view_as(x.detach()), "expand_as": lambda m, x: x[0].expand_as(x), "broadcast_to": lambda m, x: x[0].broadcast_to((2, 4)),
 "atleast_3d": lambda m, x: m.atleast_3d(x), "swapaxes": lambda m, x: x.swapaxes(0, 1), "hstack": lambda m, x: m.hstack([x, x]), "dstack": lambda m, x: m.dstack([x, x]), "column_stack": lambda m, x: m.column_stack([x[0], x[1]]),
 "fliplr": lambda m, x: x.fliplr(), "tril_indices_gather": lambda m, x: x.flatten()[m.tensor([0, 4, 5])], "logit": lambda m, x: (x / 3).logit(), "i0": lambda m, x: m.i0(x), "polygamma": lambda m, x: m.polygamma(1, x),
 "erfinv": lambda m, x: (x / 3).erfinv(), "sinh": lambda m, x: x.sinh(), "asinh": lambda m, x: x.asinh(), "atan": lambda m, x: x.atan(), "clamp_t": lambda m, x: x.clamp(min=x.detach() * 0 + 0.5),
 "fmax": lambda m, x: m.fmax(x, x.detach() * 0 + 0.7), "minimum": lambda m, x: m.minimum(x, x.detach() * 0 + 0.7), "soft_margin": lambda m, x: m.nn.functional.soft_margin_loss(x, m.ones(3, 4, dtype=m.float64)),
 "triplet": lambda m, x: m.nn.functional.triplet_margin_loss(x, x.detach(), x.detach() + 1), "cosine_emb": lambda m, x: m.nn.functional.cosine_embedding_loss(x, x.detach() + 1, m.ones(3, dtype=m.float64)),
 "multi_margin": lambda m, x: m.nn.functional.multi_margin_loss(x, m.tensor([0, 1, 2])), "gaussian_nll": lambda m, x: m.nn.functional.gaussian_nll_loss(x, x.detach(), m.ones(3, 4, dtype=m.float64)),
 "bce_logits": lambda m, x: m.nn.functional.binary_cross_entropy_with_logits(x, x.detach() * 0 + 0.5), "multilabel_soft": lambda m, x: m.nn.functional.multilabel_soft_margin_loss(x, m.ones(3, 4, dtype=m.float64)),
 "pixel_shuffle": lambda m, x: m.nn.functional.pixel_shuffle(x.reshape(1, 4, 3, 1), 2), "local_response": lambda m, x: m.nn.functional.local_response_norm(x[None], 2),
 "embedding_bag": lambda m, x: m.nn.functional.embedding_bag(m.tensor([0, 2, 1]), x, m.tensor([0, 1])), "grid_sample": lambda m, x: m.nn.functional.grid_sample(x[None, None], m.zeros(1, 2, 2, 2, dtype=m.float64), align_corners=False),
 "fold": lambda m, x: m.nn.functional.fold(x[None], (2, 3), (2, 2)) if False else x * 1.0, "max_pool2d": lambda m, x: m.nn.functional.max_pool2d(x[None, None], 2), "avg_pool2d": lambda m, x: m.nn.functional.avg_pool2d(x[None, None], 2),
 "lp_pool": lambda m, x: m.nn.functional.lp_pool1d(x[None], 2, 2), "adaptive_max": lambda m, x: m.nn.functional.adaptive_max_pool1d(x[None], 2), "conv2d": lambda m, x: m.nn.functional.conv2d(x[None, None], m.ones(1, 1, 2, 2, dtype=m.float64)),
 "conv_t": lambda m, x: m.nn.functional.conv_transpose1d(x[None], m.ones(3, 1, 2, dtype=m.float64)), "rnn_cell": lambda m, x: m.tanh(x[:, :2] @ m.ones(2, 2, dtype=m.float64)),
}


def _outcome(m, op):
    x = m.tensor(A, requires_grad=True)
    y = OPS[op](m, x)
    g = m.tensor(np.linspace(0.5, 1.5, y.numel()).reshape(tuple(y.shape)))
    y.backward(g)
    first = x.grad.numpy().copy()
    try:
        y.backward(g)
    except RuntimeError as e:
        assert "Trying to backward through the graph a second time" in str(e)
        return "raises", first, None
    return "runs", first, x.grad.numpy().copy()


# vander: PyTorch's own first backward fails on a row of a leaf (an in-place op inside)
@pytest.mark.parametrize("op", sorted(set(OPS) - {"vander"}))
def test_second_backward_as_pytorch(op):
    got, want = _outcome(tg, op), _outcome(torch, op)
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-10, atol=1e-12)
    if want[2] is not None:      # it ran: the gradient accumulated twice
        np.testing.assert_allclose(got[2], want[2], rtol=1e-10, atol=1e-12)


def test_a_composite_passes_only_its_own_records():
    """A node that saves nothing (tril) passes its records again, not those of the ops
    before it: exp's saved result was freed, and the second backward still reaches it."""
    for m in (tg, torch):
        x = m.tensor(A, requires_grad=True)
        y = m.tril(x.exp())
        y.backward(m.ones_like(y))
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.backward(m.ones_like(y))
        z = m.tril(x * 2.0 + 1.0)     # neither saves a tensor in PyTorch
        z.backward(m.ones_like(z))
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            z.backward(m.ones_like(z))


def test_index_add_saves_its_index_for_a_source_that_requires_grad():
    for m in (tg, torch):
        x = m.tensor(A, requires_grad=True)
        s = m.tensor(A[:2], requires_grad=True)
        y = x.index_add(0, m.tensor([0, 2]), s)
        y.backward(m.ones_like(y))
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.backward(m.ones_like(y))
