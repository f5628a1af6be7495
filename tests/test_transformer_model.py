"""nn.Transformer (the encoder-decoder model) against PyTorch after the same seed: initial
weights (xavier_uniform_ over every matrix, in PyTorch's order), outputs, every parameter's
gradient, state_dict keys, its warning, the causal mask and the shape checks."""
import warnings

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")


def _run(L, batch_first, norm_first, masks):
    L.manual_seed(7)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = L.nn.Transformer(8, 2, 2, 1, dim_feedforward=16, dropout=0.0,
                                 batch_first=batch_first, norm_first=norm_first)
    L.manual_seed(8)
    src = L.randn(2, 5, 8) if batch_first else L.randn(5, 2, 8)
    tgt = L.randn(2, 4, 8) if batch_first else L.randn(4, 2, 8)
    kw = {}
    if masks:
        kw = {"tgt_mask": L.nn.Transformer.generate_square_subsequent_mask(4),
              "src_key_padding_mask": L.tensor([[False] * 5, [False] * 3 + [True] * 2])}
    out = model(src, tgt, **kw)
    out.sum().backward()
    return (out.detach().numpy().copy(), [p.grad.numpy().copy() for p in model.parameters()],
            list(model.state_dict()), [str(w.message).replace("torch", "tapegrad")
                                       for w in caught], type(out.grad_fn).__name__)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("masks", [False, True])
def test_transformer_is_pytorchs(batch_first, norm_first, masks):
    want = _run(torch, batch_first, norm_first, masks)
    got = _run(tg, batch_first, norm_first, masks)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-10, atol=1e-12)
    for g, w in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11)
    assert got[2:] == want[2:]


def test_causal_mask_and_shape_checks():
    for size in (1, 3, 6):
        np.testing.assert_array_equal(
            tg.nn.Transformer.generate_square_subsequent_mask(size).numpy(),
            torch.nn.Transformer.generate_square_subsequent_mask(size).numpy())
    for src, tgt in (((5, 2, 8), (4, 3, 8)), ((5, 2, 8), (4, 2, 6))):
        texts = []
        for L in (torch, tg):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = L.nn.Transformer(8, 2, 1, 1, dim_feedforward=16)
            with pytest.raises(RuntimeError) as info:
                model(L.zeros(src), L.zeros(tgt))
            texts.append(str(info.value))
        assert texts[0] == texts[1]
