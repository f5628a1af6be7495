"""More names PyTorch programs use: ``nn.functional.pdist``, the deprecated ``upsample``
family and ``torch.range``, channel shuffle (function, module, native), the 3-D padding
modules, and the RNN base classes.  Each compared with PyTorch: values, dtypes, grad_fn
names, gradients, warnings and error texts."""
import warnings

import numpy as np
import pytest

import tapegrad as tg
from oracle import outcome, same, summary

torch = pytest.importorskip("torch")

GEN = np.random.default_rng(7)
M = GEN.standard_normal((5, 3))
M[3] = M[1]                      # one pair at distance zero
IMG = GEN.standard_normal((2, 3, 4, 5))


def with_grad(fn, value):
    """``fn(lib, x)`` for a float64 leaf ``x`` holding ``value``: its result, and ``x``'s
    gradient of the result weighted by 1, 2, 3, ... (so a wrong place shows)."""
    def run(m):
        x = m.tensor(value, dtype=m.float64, requires_grad=True)
        out = fn(m, x)
        weights = m.arange(1.0, out.numel() + 1, dtype=m.float64).reshape(out.shape)
        (out * weights).sum().backward()
        return out, x.grad
    return run


@pytest.mark.parametrize("p", [2, 1, 0, 3, 0.5, float("inf")])
def test_pdist_values_gradients_and_node(p):
    ours = same(with_grad(lambda m, x: m.nn.functional.pdist(x, p), M), torch)
    assert ours[1][0][5] == "PdistBackward0"
    same(with_grad(lambda m, x: m.pdist(x, p=p), M), torch)


def test_pdist_zero_norm_of_infinite_rows_has_zero_gradient():
    rows = [[0.0, 0.0], [3.0, 4.0], [float("inf"), 0.0]]
    same(with_grad(lambda m, x: m.nn.functional.pdist(x, 0), rows), torch)


@pytest.mark.parametrize("case", [
    lambda m: m.nn.functional.pdist(m.ones(3)),
    lambda m: m.nn.functional.pdist(m.ones(3, 2), -1.0),
    lambda m: m.nn.functional.pdist(m.ones(3, 2, dtype=m.int64)),
    lambda m: m.nn.functional.pdist(m.ones(3, dtype=m.int64), -1),
    lambda m: m.nn.functional.pdist(m.ones(1, 2, requires_grad=True)),
    lambda m: m.nn.functional.pdist(m.ones(0, 2)),
])
def test_pdist_edges_and_errors(case):
    same(case, torch)


def warned(fn):
    """``fn`` run with warnings recorded: its outcome and the (category, text) of each."""
    def run(m):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            result = outcome(m, fn)
        return result, [(w.category.__name__, str(w.message)) for w in seen]
    return run


UPSAMPLES = [
    lambda m, x: m.nn.functional.upsample(x, scale_factor=2),
    lambda m, x: m.nn.functional.upsample(x, size=(5, 7), mode="bilinear"),
    lambda m, x: m.nn.functional.upsample(x, scale_factor=(1.5, 2), mode="bicubic",
                                          align_corners=True),
    lambda m, x: m.nn.functional.upsample_nearest(x, size=(6, 9)),
    lambda m, x: m.nn.functional.upsample_nearest(x, scale_factor=3),
    lambda m, x: m.nn.functional.upsample_bilinear(x, size=(7, 6)),
    lambda m, x: m.nn.functional.upsample_bilinear(x, scale_factor=2),
]


@pytest.mark.parametrize("fn", UPSAMPLES)
def test_upsample_aliases_match_and_warn(fn):
    ours = warned(with_grad(fn, IMG))(tg)
    theirs = warned(with_grad(fn, IMG))(torch)
    assert ours == theirs
    assert len(ours[1]) == 1 and ours[1][0][0] == "UserWarning"
    assert "is deprecated. Use `nn.functional.interpolate` instead." in ours[1][0][1]


def test_upsample_warning_points_at_the_caller():
    for m in (tg, torch):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            m.nn.functional.upsample_bilinear(m.ones(1, 1, 2, 2), scale_factor=2)
        assert seen[0].filename == __file__


@pytest.mark.parametrize("case", [
    lambda m: m.nn.functional.upsample(m.ones(1, 1, 2, 2), scale_factor=2, align_corners=True),
    lambda m: m.nn.functional.upsample_bilinear(m.ones(1, 2, 2), scale_factor=2),
    lambda m: m.nn.functional.upsample_nearest(m.ones(1, 1, 2, 2)),
])
def test_upsample_alias_errors(case):
    ours, theirs = warned(case)(tg), warned(case)(torch)
    assert ours == theirs
    assert ours[0][0] == "error"


@pytest.mark.parametrize("case", [
    lambda m: m.range(1, 4),
    lambda m: m.range(0, 1, 0.1),
    lambda m: m.range(0, 1, 0.3),
    lambda m: m.range(4, 1, -1),
    lambda m: m.range(1, 4, 2),
    lambda m: m.range(-2.5, 3.5, 0.7),
    lambda m: m.range(2, 2),
    lambda m: m.range(1, 3, dtype=m.int64),
    lambda m: m.range(m.tensor(1), m.tensor(3)),
    lambda m: m.range(0, 1, 0.25, requires_grad=True),
    lambda m: m.range(1, 4, 0),
    lambda m: m.range(1, 4, -1),
    lambda m: m.range(4, 1),
    lambda m: m.range(1, float("inf")),
    lambda m: m.range(0.5, float("nan")),
    lambda m: m.range(1, 3, dtype=m.int64, requires_grad=True),
    lambda m: m.range(5),
])
def test_range_inclusive_end_warning_and_errors(case):
    ours, theirs = warned(case)(tg), warned(case)(torch)
    assert ours == theirs
    if ours[0][0] != "error" or ours[0][1] == "RuntimeError":
        assert ours[1] == [("UserWarning", "torch.range is deprecated and will be removed in "
                            "a future release because its behavior is inconsistent with "
                            "Python's range builtin. Instead, use torch.arange, which produces "
                            "values in [start, end).")]


def test_range_warning_points_at_the_caller():
    for m in (tg, torch):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            m.range(0, 3)
        assert seen[0].filename == __file__


SHUFFLES = [
    lambda m, x: m.channel_shuffle(x, 3),
    lambda m, x: m.nn.functional.channel_shuffle(x.reshape(2, 6, 10), 2),
    lambda m, x: m.nn.functional.channel_shuffle(x.reshape(1, 12, 5, 2), 4),
    lambda m, x: m.nn.ChannelShuffle(6)(x.reshape(2, 6, 10)),
    lambda m, x: m.nn.ChannelShuffle(1)(x),
]


@pytest.mark.parametrize("fn", SHUFFLES)
def test_channel_shuffle_values_gradients_and_node(fn):
    ours = same(with_grad(fn, IMG.reshape(2, 6, 2, 5)), torch)
    assert ours[1][0][5] == "ChannelShuffleBackward0"


def test_native_channel_shuffle_values_node_and_refused_backward():
    x = IMG.reshape(2, 6, 10)
    for fn in (lambda m: m.native_channel_shuffle(m.tensor(x, requires_grad=True), 3),
               lambda m: m.nn.functional.native_channel_shuffle(m.tensor(x), 2),
               lambda m: m.native_channel_shuffle(m.tensor(x, requires_grad=True), 3)
               .sum().backward()):
        same(fn, torch)
    assert outcome(tg, lambda m: m.native_channel_shuffle(
        m.tensor(x, requires_grad=True), 3))[5] == "torch::autograd::NotImplemented"
    assert tg.equal(tg.native_channel_shuffle(tg.tensor(x), 3),
                    tg.channel_shuffle(tg.tensor(x), 3))


@pytest.mark.parametrize("case", [
    lambda m: m.nn.functional.channel_shuffle(m.ones(2, 4), 2),
    lambda m: m.nn.functional.channel_shuffle(m.ones(2, 4, 3), 3),
    lambda m: m.nn.functional.channel_shuffle(m.ones(2, 4, 3), 0),
    lambda m: m.native_channel_shuffle(m.ones(2, 4), 1),
    lambda m: m.native_channel_shuffle(m.ones(2, 4, 3), 3),
    lambda m: m.native_channel_shuffle(m.ones(2, 4, 3), -2),
    lambda m: m.nn.ChannelShuffle(3)(m.ones(2, 4, 3)),
    lambda m: repr(m.nn.ChannelShuffle(3)),
    lambda m: m.nn.ChannelShuffle(2).groups,
])
def test_channel_shuffle_errors_and_module(case):
    same(case, torch)


VOLUME = GEN.standard_normal((2, 2, 3, 4, 5))
PADS_3D = [
    lambda m, x: m.nn.ReflectionPad3d((1, 2, 0, 3, 2, 1))(x),
    lambda m, x: m.nn.ReflectionPad3d(2)(x[0]),
    lambda m, x: m.nn.ReplicationPad3d((2, 0, 1, 3, 0, 4))(x),
    lambda m, x: m.nn.ReplicationPad3d(1)(x[1]),
    lambda m, x: m.nn.ZeroPad3d((1, 2, 0, 1, 2, 0))(x),
    lambda m, x: m.nn.ZeroPad3d(1)(x[0]),
    lambda m, x: m.nn.ZeroPad3d((-1, 1, 0, -1, 1, 0))(x),
]
CIRCULAR_3D = [
    lambda m, x: m.nn.CircularPad3d((1, 2, 0, 3, 2, 1))(x),
    lambda m, x: m.nn.CircularPad3d(1)(x[0]),
    lambda m, x: m.nn.CircularPad3d((0, 5, 4, 0, 0, 3))(x),
]


@pytest.mark.parametrize("fn", PADS_3D)
def test_3d_padding_modules(fn):
    same(with_grad(fn, VOLUME), torch)


@pytest.mark.parametrize("fn", CIRCULAR_3D)
def test_3d_circular_padding_values_and_gradients(fn):
    # F.pad's circular mode is built from index_select here: its node is not PyTorch's
    # CopySlices, so the grad_fn name is left out of the comparison
    def unnamed(m):
        out, grad = with_grad(fn, VOLUME)(m)
        return out.detach(), grad
    same(unnamed, torch)


@pytest.mark.parametrize("case", [
    lambda m: repr(m.nn.ReflectionPad3d((1, 2, 3, 4, 5, 6))),
    lambda m: repr(m.nn.ReplicationPad3d(2)),
    lambda m: repr(m.nn.ZeroPad3d(1)),
    lambda m: repr(m.nn.CircularPad3d(3)),
    lambda m: m.nn.ZeroPad3d(2).value,
    lambda m: isinstance(m.nn.ZeroPad3d(2), m.nn.ConstantPad3d),
    lambda m: m.nn.CircularPad3d(1)(m.ones(2, 3, 4)),
    lambda m: m.nn.CircularPad3d(1)(m.ones(1, 1, 1, 2, 3, 4)),
    lambda m: m.nn.CircularPad3d(5)(m.ones(1, 3, 3, 3)),
    lambda m: m.nn.ReflectionPad3d(3)(m.ones(1, 1, 3, 3, 3)),
    lambda m: m.nn.ReflectionPad3d(1)(m.ones(3, 3)),
    lambda m: m.nn.ReplicationPad3d((1, 2))(m.ones(1, 1, 3, 3, 3)),
])
def test_3d_padding_reprs_and_errors(case):
    same(case, torch)


@pytest.mark.parametrize("case", [
    lambda m: [isinstance(c(3, 4), m.nn.RNNCellBase) for c in
               (m.nn.RNNCell, m.nn.GRUCell, m.nn.LSTMCell)],
    lambda m: [isinstance(c(3, 4), m.nn.RNNBase) for c in (m.nn.RNN, m.nn.GRU, m.nn.LSTM)],
    lambda m: [issubclass(c, m.nn.RNNBase) for c in
               (m.nn.RNNCell, m.nn.GRUCell, m.nn.LSTMCell)],
    lambda m: [(n, tuple(p.shape)) for n, p in m.nn.RNNCellBase(3, 4, True, 2)
               .named_parameters()],
    lambda m: [(n, tuple(p.shape)) for n, p in m.nn.RNNCellBase(5, 2, False, 3)
               .named_parameters()],
    lambda m: repr(m.nn.RNNCellBase(3, 4, False, 1)),
    lambda m: [(n, tuple(p.shape)) for n, p in m.nn.RNNBase("LSTM", 3, 4, 2, True, False,
                                                              0.0, True).named_parameters()],
    lambda m: [(n, tuple(p.shape)) for n, p in m.nn.RNNBase("RNN_RELU", 3, 5, bias=False)
               .named_parameters()],
    lambda m: repr(m.nn.RNNBase("GRU", 3, 4, num_layers=2, batch_first=True)),
    lambda m: m.nn.RNNBase("GRU", 3, 4).mode,
    lambda m: m.nn.RNNBase("FOO", 3, 4),
    lambda m: [tuple(p.shape) for p in m.nn.GRUCell(3, 4, False).parameters()],
    lambda m: m.nn.RNNCell(3, 4, nonlinearity="relu").nonlinearity,
])
def test_rnn_base_classes(case):
    same(case, torch)


@pytest.mark.parametrize("kind", ["cell", "layer"])
def test_rnn_subclass_of_the_bases_runs_like_pytorchs(kind):
    """A subclass written against the base classes, as user code does: same parameters in
    both libraries (copied from PyTorch's), then a forward and backward compared."""
    x = GEN.standard_normal((4, 2, 3))

    def build(m):
        if kind == "cell":
            class Cell(m.nn.RNNCellBase):
                def __init__(self):
                    super().__init__(3, 5, True, 1)

                def forward(self, inp):
                    return m.tanh(inp @ self.weight_ih.T + self.bias_ih + self.bias_hh)
            return Cell()

        class Stack(m.nn.LSTM):
            pass
        return Stack(3, 5)

    theirs = build(torch)
    ours = build(tg)
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        p.data.copy_(tg.tensor(q.detach().numpy()))

    def run(m, module):
        inp = m.tensor(x, requires_grad=True)
        out = module(inp[0] if kind == "cell" else inp)
        out = out if kind == "cell" else out[0]
        (out * m.arange(1.0, out.numel() + 1).reshape(out.shape)).sum().backward()
        return out.detach(), inp.grad, [p.grad for p in module.parameters()]
    assert summary(run(tg, ours)) == summary(run(torch, theirs))
    assert isinstance(ours, tg.nn.RNNCellBase if kind == "cell" else tg.nn.RNNBase)
