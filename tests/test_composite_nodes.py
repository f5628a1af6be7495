"""Ops tapegrad builds from other recorded ops (``lerp``, ``addmm``, ``tril``, ``mse_loss``,
...) show PyTorch's one node for them: the result's ``grad_fn`` has PyTorch's name, and its
``next_functions`` are those of the op's inputs, not of the records it is made of.  Each case
is compared with PyTorch: the node's name, the names of the nodes it lists, the values and
the gradients; in eager mode and through ``compile``."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

A = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.5], [7.0, 8.0, 9.5]]
B = [[0.5, -1.0, 2.0], [1.5, 0.25, -2.0], [3.0, 1.0, -0.5]]
V = [1.0, -2.0, 3.0]
IDX = [[0, 1, 2], [2, 0, 1]]


def _inputs(m):
    f = m.float64
    a = m.tensor(A, dtype=f, requires_grad=True)
    b = m.tensor(B, dtype=f, requires_grad=True)
    v = m.tensor(V, dtype=f, requires_grad=True)
    return a, b, v


def _nn(m):
    return m.nn.functional


PROGRAMS = {
    "tril": lambda m, a, b, v: a.tril(),
    "triu": lambda m, a, b, v: m.triu(a, 1),
    "tril_batched": lambda m, a, b, v: m.tril(a[None] * 2.0, -1),
    "masked_fill_number": lambda m, a, b, v: a.masked_fill(m.tensor([True, False, True]), 2.0),
    "masked_fill_tensor": lambda m, a, b, v: a.masked_fill(m.tensor([True, False, True]), v[0]),
    "index_fill_number": lambda m, a, b, v: a.index_fill(1, m.tensor([0, 2]), -1.0),
    "index_fill_tensor": lambda m, a, b, v: a.index_fill(1, m.tensor([0, 2]), v[1]),
    "scatter_tensor": lambda m, a, b, v: a.scatter(0, m.tensor(IDX), b[:2]),
    "scatter_number": lambda m, a, b, v: a.scatter(0, m.tensor(IDX), 1.5),
    "scatter_add": lambda m, a, b, v: a.scatter_add(0, m.tensor(IDX), b[:2] * 2.0),
    "index_add": lambda m, a, b, v: a.index_add(0, m.tensor([0, 2]), b[:2]),
    "index_add_alpha": lambda m, a, b, v: m.index_add(a, 1, m.tensor([1]), b[:, :1], alpha=2),
    "nan_to_num": lambda m, a, b, v: m.nan_to_num(a / (b - 0.5)),
    "diag_vector": lambda m, a, b, v: m.diag(v, 1),
    "diag_matrix": lambda m, a, b, v: m.diag(a),
    "diag_embed": lambda m, a, b, v: m.diag_embed(a),
    "trace": lambda m, a, b, v: m.trace(a),
    "addmm": lambda m, a, b, v: m.addmm(v, a, b),
    "addmm_constant_input": lambda m, a, b, v: m.addmm(v.detach(), a, b, beta=0.5, alpha=2),
    "addmm_constant_mat": lambda m, a, b, v: m.addmm(a, b.detach(), a),
    "addmv": lambda m, a, b, v: m.addmv(v, a, v),
    "addr": lambda m, a, b, v: m.addr(a, v, v * 2.0),
    "baddbmm": lambda m, a, b, v: m.baddbmm(a, a[None], b[None]),
    "addbmm": lambda m, a, b, v: m.addbmm(a, a[None], b[None]),
    "addcmul": lambda m, a, b, v: m.addcmul(a, b, v, value=2.0),
    "addcdiv": lambda m, a, b, v: m.addcdiv(a, b, a, value=0.5),
    "lerp_number": lambda m, a, b, v: m.lerp(a, b, 0.3),
    "lerp_number_high": lambda m, a, b, v: a.lerp(b, 0.8),
    "lerp_tensor": lambda m, a, b, v: m.lerp(a, b, v / 4.0),
    "cdist": lambda m, a, b, v: m.cdist(a, b),
    "cdist_p1": lambda m, a, b, v: m.cdist(a, b, p=1),
    "dist": lambda m, a, b, v: m.dist(a, b),
    "dist_broadcast": lambda m, a, b, v: m.dist(a, v, p=3),
    "fmax": lambda m, a, b, v: m.fmax(a, b),
    "fmin": lambda m, a, b, v: m.fmin(a, v),
    "nansum": lambda m, a, b, v: m.nansum(a),
    "nansum_dim": lambda m, a, b, v: a.nansum(0),
    "rot90": lambda m, a, b, v: m.rot90(a),
    "rot90_twice": lambda m, a, b, v: a.rot90(2, [1, 0]),
    "rot90_none": lambda m, a, b, v: a.rot90(4),
    "block_diag": lambda m, a, b, v: m.block_diag(a, v),
    "logaddexp2": lambda m, a, b, v: m.logaddexp2(a, b),
    "clamp_min_tensor": lambda m, a, b, v: m.clamp(a, min=b.detach()),
    "clamp_max_tensor": lambda m, a, b, v: m.clamp(a, max=b),
    "clamp_both_tensors": lambda m, a, b, v: a.clamp(b - 1.0, b + 1.0),
    "clamp_min_method": lambda m, a, b, v: a.clamp_min(b),
    "clamp_max_method": lambda m, a, b, v: a.clamp_max(b.detach()),
    "linear": lambda m, a, b, v: _nn(m).linear(a, b, v),
    "linear_bias_constant": lambda m, a, b, v: _nn(m).linear(a, b, v.detach()),
    "mse_loss": lambda m, a, b, v: _nn(m).mse_loss(a, b.detach()),
    "mse_loss_sum": lambda m, a, b, v: _nn(m).mse_loss(a, b, reduction="sum"),
    "mse_loss_none": lambda m, a, b, v: _nn(m).mse_loss(a, b, reduction="none"),
    "huber_loss": lambda m, a, b, v: _nn(m).huber_loss(a, b.detach(), delta=2.0),
    "smooth_l1_loss": lambda m, a, b, v: _nn(m).smooth_l1_loss(a, b, reduction="sum"),
    "nll_loss": lambda m, a, b, v: _nn(m).nll_loss(a.log_softmax(1), m.tensor([0, 2, 1])),
    "nll_loss_weight": lambda m, a, b, v: _nn(m).nll_loss(
        a, m.tensor([0, 2, 1]), weight=m.tensor([1.0, 2.0, 0.5], dtype=m.float64)),
    "nll_loss_ignore": lambda m, a, b, v: _nn(m).nll_loss(a, m.tensor([0, 1, 1]),
                                                          ignore_index=1, reduction="none"),
    "cross_entropy": lambda m, a, b, v: _nn(m).cross_entropy(a, m.tensor([2, 0, 1])),
    "cross_entropy_1d": lambda m, a, b, v: _nn(m).cross_entropy(v, m.tensor(1)),
    "binary_cross_entropy": lambda m, a, b, v: _nn(m).binary_cross_entropy(
        (a / 10.0).sigmoid(), (b / 10.0).sigmoid().detach()),
    "binary_cross_entropy_weight": lambda m, a, b, v: _nn(m).binary_cross_entropy(
        (a / 10.0).sigmoid(), (b / 10.0).sigmoid().detach(), weight=v.detach().abs(),
        reduction="none"),
    "bce_with_logits": lambda m, a, b, v: _nn(m).binary_cross_entropy_with_logits(
        a / 5.0, (b / 10.0).sigmoid().detach()),
    "layer_norm": lambda m, a, b, v: _nn(m).layer_norm(a, (3,)),
    "layer_norm_affine": lambda m, a, b, v: _nn(m).layer_norm(a, (3,), v, v * 0.5),
    "layer_norm_bias": lambda m, a, b, v: _nn(m).layer_norm(a, (3, 3), None, b),
    # gathers of [input, src] named by their variant, shown with the op's two inputs
    "slice_scatter": lambda m, a, b, v: m.slice_scatter(a, b[:, :2] * 2.0, 1, 0, 2),
    "select_scatter": lambda m, a, b, v: m.select_scatter(a, v, 0, 1),
    "diagonal_scatter": lambda m, a, b, v: a.diagonal_scatter(v * 3.0),
    "scatter_reduce": lambda m, a, b, v: a.scatter_reduce(0, m.tensor(IDX), b[:2], "amax"),
    # layers
    "conv2d": lambda m, a, b, v: _nn(m).conv2d(_image(m, a), _kernel(m, b), v[:2]),
    "conv2d_no_bias": lambda m, a, b, v: _nn(m).conv2d(_image(m, a), _kernel(m, b), padding=1),
    "conv2d_unbatched": lambda m, a, b, v: _nn(m).conv2d(_image(m, a)[0], _kernel(m, b)),
    "conv1d": lambda m, a, b, v: _nn(m).conv1d(a[None], b[:2, :, None].expand(2, 3, 2), v[:2]),
    "embedding": lambda m, a, b, v: _nn(m).embedding(m.tensor([[0, 2], [1, 1]]), a),
    "batch_norm_training": lambda m, a, b, v: _nn(m).batch_norm(
        _image(m, a), None, None, v, v * 0.5, training=True),
    "batch_norm_eval": lambda m, a, b, v: _nn(m).batch_norm(
        _image(m, a), m.zeros(3, dtype=m.float64), m.ones(3, dtype=m.float64) * 2.0, v),
    "group_norm": lambda m, a, b, v: _nn(m).group_norm(_image(m, a), 3, v, v),
    "max_pool2d": lambda m, a, b, v: _nn(m).max_pool2d(_image(m, a), 2, 1),
    "max_pool1d": lambda m, a, b, v: _nn(m).max_pool1d(a[None], 2),
    "avg_pool2d": lambda m, a, b, v: _nn(m).avg_pool2d(_image(m, a), 2, 1),
    "threshold": lambda m, a, b, v: _nn(m).threshold(a, 4.0, -1.0),
    "prelu": lambda m, a, b, v: _nn(m).prelu(_image(m, a), v / 4.0),
    "pad": lambda m, a, b, v: _nn(m).pad(a, (1, 2)),
    "pad_value": lambda m, a, b, v: _nn(m).pad(a, (1, 0, 0, 1), value=2.5),
    "soft_margin_loss": lambda m, a, b, v: _nn(m).soft_margin_loss(
        a / 5.0, m.tensor([[1.0, -1.0, 1.0]] * 3, dtype=m.float64)),
    "multi_margin_loss": lambda m, a, b, v: _nn(m).multi_margin_loss(a / 5.0,
                                                                    m.tensor([0, 2, 1])),
    "pixel_shuffle": lambda m, a, b, v: _nn(m).pixel_shuffle(
        m.cat([a, b, a * b, a - b]).reshape(1, 4, 3, 3), 2),
    "interpolate": lambda m, a, b, v: _nn(m).interpolate(_image(m, a), scale_factor=2),
    "interpolate_1d": lambda m, a, b, v: _nn(m).interpolate(a[None], size=5),
    # pads that index the input (PyTorch's circular pad is itself a composite: not here)
    "pad_reflect_1d": lambda m, a, b, v: _nn(m).pad(a, (2, 1), mode="reflect"),
    "pad_reflect_2d": lambda m, a, b, v: _nn(m).pad(_image(m, a), (1, 2, 2, 0), mode="reflect"),
    "pad_reflect_3d": lambda m, a, b, v: _nn(m).pad(_image(m, a), (1, 1, 0, 2, 1, 0),
                                                    mode="reflect"),
    "pad_replicate_1d": lambda m, a, b, v: _nn(m).pad(a[None], (0, 3), mode="replicate"),
    "pad_replicate_2d": lambda m, a, b, v: _nn(m).pad(a[None], (2, 1, 1, 3), mode="replicate"),
    "pad_replicate_3d": lambda m, a, b, v: _nn(m).pad(_image(m, a), (1, 0, 2, 1, 1, 1),
                                                      mode="replicate"),
    "pad_replicate_crop": lambda m, a, b, v: _nn(m).pad(a[None], (-1, 2), mode="replicate"),
    "adaptive_avg_pool1d": lambda m, a, b, v: _nn(m).adaptive_avg_pool1d(a[None], 2),
    "adaptive_avg_pool1d_unbatched": lambda m, a, b, v: _nn(m).adaptive_avg_pool1d(a, (5,)),
    "adaptive_avg_pool1d_global": lambda m, a, b, v: _nn(m).adaptive_avg_pool1d(a[None], 1),
    "adaptive_avg_pool2d": lambda m, a, b, v: _nn(m).adaptive_avg_pool2d(_image(m, a), 2),
    "adaptive_avg_pool2d_keep": lambda m, a, b, v: _nn(m).adaptive_avg_pool2d(
        _image(m, a)[0], (None, 2)),
    "adaptive_avg_pool2d_global": lambda m, a, b, v: _nn(m).adaptive_avg_pool2d(
        _image(m, a), 1),
    "adaptive_max_pool2d": lambda m, a, b, v: _nn(m).adaptive_max_pool2d(_image(m, a), 2),
    "adaptive_max_pool2d_unbatched": lambda m, a, b, v: _nn(m).adaptive_max_pool2d(
        a[None] * b, (1, 2)),
    "glu": lambda m, a, b, v: _nn(m).glu(m.cat([a, b], 1)),
    "glu_dim0": lambda m, a, b, v: _nn(m).glu(m.cat([a, b]), 0),
    # linalg ops made of other ops
    "renorm": lambda m, a, b, v: m.renorm(a, 2, 0, 9.0),
    "renorm_p1": lambda m, a, b, v: a.renorm(1, 1, 14.0),
    "cholesky_inverse": lambda m, a, b, v: m.cholesky_inverse(_factor(m, a)),
    "cholesky_inverse_upper": lambda m, a, b, v: m.cholesky_inverse(_factor(m, a).mT, True),
    "cholesky_solve": lambda m, a, b, v: m.cholesky_solve(b, _factor(m, a)),
    "cholesky_solve_upper": lambda m, a, b, v: m.cholesky_solve(b, _factor(m, a).mT, True),
    "cholesky_solve_constant_b": lambda m, a, b, v: m.cholesky_solve(b.detach(), _factor(m, a)),
    "lu_solve": lambda m, a, b, v: m.linalg.lu_solve(*m.linalg.lu_factor(a), b),
    "lu_solve_adjoint": lambda m, a, b, v: m.linalg.lu_solve(*m.linalg.lu_factor(a), b,
                                                             adjoint=True),
    "lu_solve_right": lambda m, a, b, v: m.linalg.lu_solve(*m.linalg.lu_factor(a), b,
                                                           left=False),
    # normalisation and layers
    "instance_norm": lambda m, a, b, v: _nn(m).instance_norm(_image(m, a)[:, :, 0]),
    "instance_norm_affine": lambda m, a, b, v: _nn(m).instance_norm(_image(m, a), weight=v,
                                                                    bias=v * 0.5, eps=0.1),
    "instance_norm_bias": lambda m, a, b, v: _nn(m).instance_norm(a[None], bias=v),
    "gru_cell": lambda m, a, b, v: _gru_cell(m, a, b),
    # indexing ops listing their own inputs
    "masked_select": lambda m, a, b, v: m.masked_select(a, a > 4.5),
    "masked_select_broadcast": lambda m, a, b, v: v.masked_select(a > 4.5),
    "masked_scatter": lambda m, a, b, v: a.masked_scatter(a > 4.5, b),
    "masked_scatter_broadcast": lambda m, a, b, v: v.masked_scatter(a > 4.5, b * 2.0),
    "index_put": lambda m, a, b, v: a.index_put((m.tensor([0, 2]),), v),
    "index_put_accumulate": lambda m, a, b, v: m.index_put(a, (m.tensor([1, 1]),), v * 2.0,
                                                           accumulate=True),
    "index_put_constant_input": lambda m, a, b, v: a.detach().index_put(
        (m.tensor([0, 2]), m.tensor([1, 1])), v[:2], accumulate=True),
    "put": lambda m, a, b, v: m.put(a, m.tensor([0, -1]), v[1:]),
    "put_accumulate": lambda m, a, b, v: a.put(m.tensor([4, 4, 0]), v, accumulate=True),
    "kron": lambda m, a, b, v: m.kron(a, v),
    "vdot": lambda m, a, b, v: m.vdot(v, a[1]),
    "pairwise_distance": lambda m, a, b, v: _nn(m).pairwise_distance(a, b),
    "pairwise_distance_p1": lambda m, a, b, v: _nn(m).pairwise_distance(a, v, 1.0, 0.5, True),
    "matrix_power_1": lambda m, a, b, v: m.linalg.matrix_power(a, 1),
    "matrix_power_3": lambda m, a, b, v: m.linalg.matrix_power(a / 5.0, 3),
    "matrix_power_5": lambda m, a, b, v: a.matrix_power(5) / 1000.0,
    "matrix_power_minus_3": lambda m, a, b, v: m.linalg.matrix_power(a, -3),
}


def _gru_cell(m, a, b):
    m.manual_seed(0)
    cell = m.nn.GRUCell(3, 2).double()
    with m.no_grad():
        for k, p in enumerate(cell.parameters()):
            p.copy_(m.linspace(-0.5, 0.5 + k / 10.0, p.numel(), dtype=m.float64)
                    .reshape(p.shape))
    return cell(a / 5.0, b[:, :2])


def _factor(m, a):
    """The Cholesky factor of a a^T + 3 I (positive definite)."""
    return m.linalg.cholesky(a @ a.mT + 3.0 * m.eye(3, dtype=m.float64))


def _image(m, a):
    """(2, 3, 3, 3): a and its square, as a batch of two 3-channel images."""
    return m.stack([m.stack([a, a * 0.5, -a]), m.stack([a * a / 10.0, a, a - 1.0])])


def _kernel(m, b):
    """(2, 3, 2, 2) filters."""
    return m.stack([b[:2, :2], b[1:, 1:], b[:2, 1:] * 2.0]).expand(2, 3, 2, 2)


def _name(m, node):
    if node is None:
        return None
    name = type(node).__name__ if m is torch else node.name()
    return name.replace("torch::autograd::", "").replace("tapegrad::autograd::", "")


def _graph(m, out):
    node = out.grad_fn
    return _name(m, node), tuple(_name(m, n) for n, _ in node.next_functions)


def _outcome(m, program, call=None):
    a, b, v = _inputs(m)
    out = (call or PROGRAMS[program])(m, a, b, v)
    graph = _graph(m, out)
    weights = np.arange(1.0, out.numel() + 1.0).reshape(tuple(out.shape)) / 7.0
    (out * m.tensor(weights, dtype=m.float64)).sum().backward()
    grads = [None if t.grad is None else np.array(t.grad.tolist()) for t in (a, b, v)]
    return graph, np.array(out.tolist()), grads


def _same(got, want):
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-13, atol=1e-13)
    for g, w in zip(got[2], want[2]):
        if w is None:
            assert g is None
        else:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_node_as_pytorch(program):
    _same(_outcome(tg, program), _outcome(torch, program))


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_node_through_compile(program):
    want = _outcome(torch, program)
    f = tg.compile(lambda a, b, v: PROGRAMS[program](tg, a, b, v))
    for _ in range(3):     # recorded, then replayed (or run eagerly: detach())
        _same(_outcome(tg, program, lambda m, a, b, v: f(a, b, v)), want)
    assert f.stats.replays + f.stats.eager == 2, f.stats


def test_a_result_handed_back_keeps_its_own_node():
    """A composite whose result is one of its inputs names nothing: ``x.lerp(x, w)`` is
    x's own history, not a LerpBackward0 (PyTorch's would be; tapegrad's returns x's sum)."""
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2.0
    assert tg.functional.named_node(y, "LerpBackward0", y).grad_fn.name() == "MulBackward0"


def test_the_version_error_names_the_node():
    """PyTorch's message names the node that made the changed value: the composite's."""
    messages = []
    for m in (torch, tg):
        a, b, v = _inputs(m)
        y = m.lerp(a, b, 0.3)
        z = y.sin()           # saves y
        with m.no_grad():     # (y keeps its node: the message names it)
            y.add_(1.0)
        with pytest.raises(RuntimeError) as info:
            z.sum().backward()
        messages.append(str(info.value).split(" Hint:")[0].split(" It was")[0]
                        .replace("torch.", "tapegrad."))
    assert messages[0] == messages[1]
    assert "which is output 0 of Lerp," in messages[1]


@pytest.mark.parametrize("form", ["both", "min", "max", "clamp_min", "clamp_max"])
def test_clamp_by_tensors_at_ties_and_nan(form):
    """Values on a bound, bounds crossed (min > max), equal bounds and NaN: the gradient goes
    where PyTorch's goes -- but for the two cases the README names (an input below equal
    bounds; a NaN input with min > max), left out here."""
    grid = np.array([-1.0, 0.0, 1.0, 2.0, np.nan])
    x, lo, hi = (a.reshape(-1) for a in np.meshgrid(grid, grid[:4], grid[:4], indexing="ij"))
    keep = ~(((lo == hi) & (x < lo)) | (np.isnan(x) & (hi < lo)))
    x, lo, hi = x[keep], lo[keep], hi[keep]
    outcomes = []
    for m in (torch, tg):
        t = [m.tensor(a, dtype=m.float64, requires_grad=True) for a in (x, lo, hi)]
        y = {"both": lambda: m.clamp(t[0], t[1], t[2]), "min": lambda: m.clamp(t[0], min=t[1]),
             "max": lambda: m.clamp(t[0], max=t[2]), "clamp_min": lambda: t[0].clamp_min(t[1]),
             "clamp_max": lambda: t[0].clamp_max(t[2])}[form]()
        y.backward(m.ones(len(x), dtype=m.float64))
        outcomes.append([np.array(y.tolist())] + [
            None if a.grad is None else np.array(a.grad.tolist()) for a in t])
    for got, want in zip(outcomes[1], outcomes[0]):
        if want is None:
            assert got is None
        else:
            np.testing.assert_array_equal(got, want)


# ops with several differentiable outputs, PyTorch's one node for all of them
MULTI = {
    "std_mean": lambda m, a, b, v: m.std_mean(a, 1),
    "std_mean_all": lambda m, a, b, v: m.std_mean(a * b, correction=0),
    "std_mean_keepdim": lambda m, a, b, v: m.std_mean(a, (0, 1), True),
    "var_mean": lambda m, a, b, v: m.var_mean(a),
    "var_mean_dim": lambda m, a, b, v: m.var_mean(a + b, -1, keepdim=True),
    "aminmax": lambda m, a, b, v: m.aminmax(a),
    "aminmax_dim": lambda m, a, b, v: m.aminmax(a * b, dim=0),
    "aminmax_keepdim": lambda m, a, b, v: a.aminmax(dim=-1, keepdim=True),
    "lu_unpack": lambda m, a, b, v: m.lu_unpack(*m.linalg.lu_factor(a))[1:],
    "linalg_lu": lambda m, a, b, v: m.linalg.lu(a)[1:],
    "triangular_solve": lambda m, a, b, v: _quiet(m.triangular_solve, b, a),
    "triangular_solve_lower": lambda m, a, b, v: _quiet(m.triangular_solve, b, a[None], False,
                                                        True),
    "triangular_solve_constant_a": lambda m, a, b, v: _quiet(m.triangular_solve, b,
                                                             a.detach()),
}


def _quiet(f, *args):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tuple(f(*args))


def _multi_outcome(m, program, call=None):
    a, b, v = _inputs(m)
    outs = tuple((call or MULTI[program])(m, a, b, v))
    nodes = [t.grad_fn for t in outs]
    graph = (_graph(m, outs[0]), [_name(m, n) for n in nodes], [t.output_nr for t in outs],
             all(n is nodes[0] for n in nodes))
    total = 0.0
    for k, out in enumerate(outs):
        weights = np.arange(1.0, out.numel() + 1.0).reshape(tuple(out.shape)) / (7.0 + k)
        total = total + (out * m.tensor(weights, dtype=m.float64)).sum()
    total.backward()
    grads = [None if t.grad is None else np.array(t.grad.tolist()) for t in (a, b, v)]
    return graph, [np.array(t.tolist()) for t in outs], grads


def _same_multi(got, want):
    assert got[0] == want[0]
    assert len(got[1]) == len(want[1])
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)
    for g, w in zip(got[2], want[2]):
        if w is None:
            assert g is None
        else:
            np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("program", sorted(MULTI))
def test_outputs_share_the_node_as_pytorch(program):
    """Every output's grad_fn is the one node (the same object), named as PyTorch's, its
    ``output_nr`` the output's place, and gradients through all outputs are PyTorch's."""
    _same_multi(_multi_outcome(tg, program), _multi_outcome(torch, program))


@pytest.mark.parametrize("program", sorted(MULTI))
def test_outputs_share_the_node_through_compile(program):
    want = _multi_outcome(torch, program)
    f = tg.compile(lambda a, b, v: tuple(MULTI[program](tg, a, b, v)))
    for _ in range(3):     # recorded, then replayed (or run eagerly)
        _same_multi(_multi_outcome(tg, program, lambda m, a, b, v: f(a, b, v)), want)
    assert f.stats.replays + f.stats.eager == 2, f.stats


def test_a_replay_with_new_values_keeps_the_shared_node():
    """A replayed std_mean with other inputs: new values and gradients, still one node."""
    f = tg.compile(lambda x: tg.std_mean(x * 2.0, 0))
    for k in range(3):
        data = np.array([[1.0, 2.0 + k], [3.0 * k, -1.0]])
        got = [tg.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)]
        outs = [f(got[0]), torch.std_mean(got[1] * 2.0, 0)]
        for (s, mu), t in zip(outs, got):
            (s * 3.0 + mu).sum().backward()
        s, mu = outs[0]
        assert s.grad_fn is mu.grad_fn and s.grad_fn.name() == "StdMeanBackward0"
        assert (s.output_nr, mu.output_nr) == (0, 1)
        np.testing.assert_allclose(s.tolist(), outs[1][0].tolist(), rtol=1e-14)
        np.testing.assert_allclose(got[0].grad.tolist(), got[1].grad.tolist(), rtol=1e-13)
    assert f.stats.replays == 2, f.stats


def test_empty_unpacked_factors_share_the_node():
    """lu_unpack(unpack_data=False): empty L and U, yet outputs 0 and 1 of one node, as in
    PyTorch (whose backward through them fails inside its triu: not compared)."""
    graphs = []
    for m in (torch, tg):
        a, b, v = _inputs(m)
        _, L, U = m.lu_unpack(*m.linalg.lu_factor(a), unpack_data=False)
        graphs.append((_graph(m, L), _graph(m, U), L.grad_fn is U.grad_fn,
                       (L.output_nr, U.output_nr), tuple(L.shape), tuple(U.shape)))
    assert graphs[1] == graphs[0]


BAD_CALLS = {
    "instance_norm_one_position": lambda m: _nn(m).instance_norm(m.ones(2, 3, 1)),
    "instance_norm_2d": lambda m: _nn(m).instance_norm(m.ones(3, 4)),
    "instance_norm_1d": lambda m: _nn(m).instance_norm(m.ones(4)),
    "instance_norm_weight": lambda m: _nn(m).instance_norm(m.ones(2, 3, 4), weight=m.ones(2)),
    "instance_norm_bias": lambda m: _nn(m).instance_norm(m.ones(2, 3, 4), bias=m.ones(4)),
    "adaptive_avg_pool1d_4d": lambda m: _nn(m).adaptive_avg_pool1d(m.ones(2, 2, 2, 2), 2),
    "adaptive_avg_pool1d_1d": lambda m: _nn(m).adaptive_avg_pool1d(m.ones(4), 2),
    "adaptive_avg_pool1d_two_sizes": lambda m: _nn(m).adaptive_avg_pool1d(m.ones(2, 4), (2, 3)),
}


@pytest.mark.parametrize("call", sorted(BAD_CALLS))
def test_bad_input_raises_as_pytorch(call):
    """The rewritten composites keep PyTorch's checks: error type and text."""
    raised = []
    for m in (torch, tg):
        with pytest.raises(Exception) as info:
            BAD_CALLS[call](m)
        raised.append((type(info.value).__name__, str(info.value).replace("torch.", "tapegrad.")))
    assert raised[1] == raised[0]


@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 0, 4), (1, 2, 2, 3)])
def test_instance_norm_shapes_as_pytorch(shape):
    """Empty batches and channels, and 2-D positions: PyTorch's values and gradients (an
    empty input without weights: PyTorch's own code fails on repeating them)."""
    data = np.arange(float(np.prod(shape))).reshape(shape) % 5.0
    outcomes = []
    for m in (torch, tg):
        x = m.tensor(data, dtype=m.float64, requires_grad=True)
        w = m.tensor(np.arange(1.0, shape[1] + 1.0), dtype=m.float64, requires_grad=True)
        if data.size:
            y = _nn(m).instance_norm(x, weight=w, bias=w * 0.5)
        else:
            y = _nn(m).instance_norm(x)
        (y * m.tensor(data + 1.0, dtype=m.float64)).sum().backward()
        outcomes.append([None if t is None else np.array(t.tolist())
                         for t in (y, x.grad, w.grad)])
    for got, want in zip(*outcomes[::-1]):
        if want is None:
            assert got is None
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
