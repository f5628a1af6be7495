"""``TransformerEncoderLayer`` as in ``torch.nn``: self-attention and a feed-forward block,
each with a residual connection and a LayerNorm, built from the layers of this package."""
from . import functional as F
from .layers import MultiheadAttention
from .modules import Dropout, Linear, Module
from .normalization import LayerNorm

__all__ = ["TransformerEncoderLayer"]


def _activation(name):
    if name == "relu":
        return F.relu
    if name == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {name}")


class TransformerEncoderLayer(Module):
    """``x + self_attn(x)`` then ``x + linear2(dropout(activation(linear1(x))))``, each
    followed by a LayerNorm (``norm_first=False``, the default) or preceded by one
    (``norm_first=True``), with dropout on both branches, as PyTorch's. ``activation`` is
    "relu", "gelu" or a callable (a Module is registered as a child, as in PyTorch).

    Shape: ``(S, N, d_model)`` (``(N, S, d_model)`` with ``batch_first``, or
    ``(S, d_model)``), unchanged.

    Example:
        >>> layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
        >>> layer(tg.ones(3, 5, 8)).shape
        tapegrad.Size([3, 5, 8])
        >>> [name for name, _ in layer.named_children()][:3]
        ['self_attn', 'linear1', 'dropout']
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            activation = _activation(activation)
        self.activation_relu_or_gelu = 1 if activation is F.relu else \
            2 if activation is F.gelu else 0
        self.activation = activation

    def _attention_block(self, x, mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _feed_forward_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._attention_block(self.norm1(x), src_mask, src_key_padding_mask,
                                          is_causal)
            return x + self._feed_forward_block(self.norm2(x))
        x = self.norm1(x + self._attention_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._feed_forward_block(x))


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
