"""cross_entropy with ``label_smoothing`` (class indices and class probabilities), and
nll_loss over scores of any rank, against PyTorch: values, input gradients, the nodes the
result's graph shows, and the error texts; the smoothed loss's gradient against central
differences; a compiled replay against eager calls."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-11, 1e-13


def _node_name(fn):
    return type(fn).__name__


def _run(lib, loss, scores, target, weight, kw):
    x = lib.tensor(scores, requires_grad=True)
    w = None if weight is None else lib.tensor(weight)
    try:
        out = loss(lib)(x, lib.tensor(target), weight=w, **kw)
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        return ("error", type(e).__name__, str(e))
    out.backward(lib.ones_like(out))
    return out.detach().numpy().copy(), x.grad.numpy().copy(), _chain_names(out.grad_fn)


def _chain_names(fn, depth=4):
    """The names along the first input of each node, from ``fn`` down: the graph shown."""
    names = []
    while fn is not None and len(names) < depth:
        names.append(_node_name(fn))
        nxt = [f for f, _ in fn.next_functions if f is not None]
        fn = nxt[0] if nxt else None
    return names


def _agree(a, b):
    if isinstance(a[0], str) or isinstance(b[0], str):
        assert a == b
        return
    assert a[0].shape == b[0].shape
    np.testing.assert_allclose(b[0], a[0], rtol=RTOL, atol=ATOL, equal_nan=True)
    np.testing.assert_allclose(b[1], a[1], rtol=RTOL, atol=ATOL, equal_nan=True)
    assert b[2] == a[2]


def _cross_entropy(lib):
    return lib.nn.functional.cross_entropy


def _nll(lib):
    return lib.nn.functional.nll_loss


@st.composite
def _problems(draw, probabilities):
    ndim = draw(st.integers(1, 4))
    c = draw(st.integers(1, 4))
    n = draw(st.integers(0, 3))
    spatial = tuple(draw(st.lists(st.integers(1, 3), min_size=max(0, ndim - 2),
                                  max_size=max(0, ndim - 2))))
    shape = (c,) if ndim == 1 else (n, c) + spatial
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal(shape) * 2
    if probabilities:
        target = rng.random(shape)
    else:
        t_shape = () if ndim == 1 else (n,) + spatial
        target = rng.integers(0, c, t_shape)
        if target.size and draw(st.booleans()):
            target.reshape(-1)[0] = -100    # an ignored position
    weight = rng.random(c) + 0.1 if draw(st.booleans()) else None
    kw = {"reduction": draw(st.sampled_from(["mean", "sum", "none"])),
          "label_smoothing": draw(st.sampled_from([0.0, 0.05, 0.3, 1.0, -0.1, 1.5]))}
    return scores, target, weight, kw


@given(_problems(probabilities=False))
def test_label_smoothing_with_class_indices_is_pytorchs(problem):
    scores, target, weight, kw = problem
    _agree(_run(torch, _cross_entropy, scores, target, weight, kw),
           _run(tg, _cross_entropy, scores, target, weight, kw))


@given(_problems(probabilities=True))
def test_label_smoothing_with_class_probabilities_is_pytorchs(problem):
    scores, target, weight, kw = problem
    _agree(_run(torch, _cross_entropy, scores, target, weight, kw),
           _run(tg, _cross_entropy, scores, target, weight, kw))


def test_smoothed_loss_shows_pytorchs_graph():
    rng = np.random.default_rng(0)
    scores, target = rng.standard_normal((4, 5)), np.array([0, 2, -100, 4])
    for lib in (torch, tg):
        x = lib.tensor(scores, requires_grad=True)
        loss = lib.nn.CrossEntropyLoss(label_smoothing=0.1)(x, lib.tensor(target))
        names = [_node_name(f) for f, _ in loss.grad_fn.next_functions]
        assert (_node_name(loss.grad_fn), names) == ("AddBackward0",
                                                      ["MulBackward1", "MulBackward1"])


def test_smoothed_gradient_against_central_differences():
    rng = np.random.default_rng(1)
    scores = rng.standard_normal((3, 4, 2))
    target = np.array([[0, 3], [-100, 1], [2, 2]])
    weight = rng.random(4) + 0.5

    def loss(v):
        return tg.nn.functional.cross_entropy(
            tg.tensor(v), tg.tensor(target), weight=tg.tensor(weight),
            label_smoothing=0.2).item()

    x = tg.tensor(scores, requires_grad=True)
    tg.nn.functional.cross_entropy(x, tg.tensor(target), weight=tg.tensor(weight),
                                   label_smoothing=0.2).backward()
    h = 1e-6
    numeric = np.zeros_like(scores)
    for i in np.ndindex(scores.shape):
        up, down = scores.copy(), scores.copy()
        up[i] += h
        down[i] -= h
        numeric[i] = (loss(up) - loss(down)) / (2 * h)
    np.testing.assert_allclose(x.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)
    assert np.all(x.grad.numpy()[1, :, 0] == 0)   # the ignored position gets nothing


def test_smoothed_loss_replays_compiled():
    rng = np.random.default_rng(2)
    target = tg.tensor(rng.integers(0, 5, 6))

    def loss(x):
        return tg.nn.functional.cross_entropy(x, target, label_smoothing=0.25)

    fn = tg.compile(loss)
    for k in range(4):
        scores = rng.standard_normal((6, 5))
        x, y = tg.tensor(scores, requires_grad=True), tg.tensor(scores, requires_grad=True)
        got, want = fn(x), loss(y)
        got.backward()
        want.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-13)
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-12, atol=1e-15)
    assert fn.stats.replays > 0


@pytest.mark.parametrize("shape", [(3, 5, 2), (2, 5, 2, 3), (2, 3, 2, 1, 2), (2, 5, 0)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("strided", [False, True])
def test_nll_loss_over_spatial_scores_is_pytorchs(shape, reduction, strided):
    rng = np.random.default_rng(3)
    scores = rng.standard_normal(shape)
    target = rng.integers(0, shape[1], (shape[0],) + shape[2:])
    if target.size:
        target.reshape(-1)[0] = -100
    results = []
    for lib in (torch, tg):
        x = lib.tensor(scores, requires_grad=True)
        # a strided (non-contiguous) view of the same values: PyTorch copies it first
        xx = x.transpose(0, -1).contiguous().transpose(0, -1) if strided else x
        out = lib.nn.functional.nll_loss(xx, lib.tensor(target), reduction=reduction)
        if strided and len(shape) == 4:   # (PyTorch's backward refuses this one)
            results.append((out.detach().numpy(), None, _chain_names(out.grad_fn)))
            continue
        out.backward(lib.ones_like(out))
        results.append((out.detach().numpy(), x.grad.numpy(), _chain_names(out.grad_fn)))
    (v0, g0, n0), (v1, g1, n1) = results
    assert v1.shape == v0.shape and n1 == n0
    np.testing.assert_allclose(v1, v0, rtol=RTOL, atol=ATOL, equal_nan=True)
    if g0 is not None:
        np.testing.assert_allclose(g1, g0, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("shapes", [
    ((5,), (2,)), ((5,), (1, 1)), ((4, 5), ()), ((4, 5), (3,)), ((4, 5), (4, 2)),
    ((3, 5, 2), ()), ((3, 5, 2), (3, 3)), ((3, 5, 2), (3, 2, 1)), ((3, 5, 2), (2, 2)),
    ((2, 5, 2, 3), (2, 2)), ((2, 5, 2, 3), (2, 2, 2)), ((2, 5, 2, 3), (3, 2, 3)),
])
def test_nll_loss_errors_are_pytorchs(shapes):
    x_shape, t_shape = shapes
    errors = []
    for lib in (torch, tg):
        with pytest.raises(Exception) as info:
            lib.nn.functional.nll_loss(lib.zeros(x_shape), lib.zeros(t_shape, dtype=lib.long))
        errors.append((type(info.value).__name__, str(info.value)))
    assert errors[1] == errors[0]


def test_one_element_target_of_a_vector_of_scores():
    # PyTorch takes a target of shape (1,) for (C,) scores as a 0-d one (its backward then
    # refuses the shapes; tapegrad's gives the gradient)
    scores = np.array([0.5, -1.0, 2.0])
    want = torch.nn.functional.nll_loss(torch.tensor(scores), torch.tensor([2]))
    x = tg.tensor(scores, requires_grad=True)
    got = tg.nn.functional.nll_loss(x, tg.tensor([2]))
    assert got.shape == want.shape == ()
    assert got.item() == want.item()
    got.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, -1.0])
