"""Transformer layers as in ``torch.nn``: ``Transformer`` (an encoder and a decoder stack),
``TransformerEncoderLayer`` (self-attention and a
feed-forward block, each with a residual connection and a LayerNorm), ``TransformerDecoderLayer``
(with cross-attention to a memory between them), and ``TransformerEncoder`` /
``TransformerDecoder``, stacks of copies of one layer; built from the layers of this package."""
import copy
import math
import warnings

import tapegrad as tg
from tapegrad.tape import state as _state

from . import functional as F
from .containers import ModuleList
from .layers import MultiheadAttention
from .init import xavier_uniform_
from .modules import Dropout, Linear, Module
from .normalization import LayerNorm

__all__ = ["TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer",
           "TransformerDecoder", "Transformer"]


def _activation(name):
    if name == "relu":
        return F.relu
    if name == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {name}")


def _unwrapped(function):
    return getattr(function, "__wrapped__", function)


def _canonical_mask(mask, name, other, other_name, dtype, check_other=True):
    """PyTorch's mask canonicalisation: a bool mask (True: not attended) becomes an additive
    one of ``dtype`` (``-inf`` where True), after PyTorch's warning when ``mask`` and
    ``other`` differ in type; masks of other types are refused."""
    if mask is None:
        return None
    if mask.dtype != tg.bool and not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {name} are supported")
    if check_other and other is not None and mask.dtype != other.dtype:
        warnings.warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same "
                      f"type for both instead.", stacklevel=3)
    if mask.dtype == tg.bool:
        shape = tuple(mask.shape)
        mask = tg.where(mask, tg.full(shape, -math.inf, dtype=dtype), tg.zeros(shape, dtype=dtype))
    return mask


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
        # (F's functions are wrapped by the argument checks after this module is imported,
        # so the default is compared unwrapped: PyTorch's flag is 1 for the default relu)
        self.activation_relu_or_gelu = 1 if _unwrapped(activation) is _unwrapped(F.relu) else \
            2 if _unwrapped(activation) is _unwrapped(F.gelu) else 0
        self.activation = activation

    def _attention_block(self, x, mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _feed_forward_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                               src_mask, "src_mask", src.dtype)
        src_mask = _canonical_mask(src_mask, "src_mask", None, "", src.dtype, check_other=False)
        x = src
        if self.norm_first:
            x = x + self._attention_block(self.norm1(x), src_mask, src_key_padding_mask,
                                          is_causal)
            return x + self._feed_forward_block(self.norm2(x))
        x = self.norm1(x + self._attention_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._feed_forward_block(x))



def _clones(layer, count):
    # independent deep copies: every copy starts with the layer's values, as in PyTorch
    return ModuleList([copy.deepcopy(layer) for _ in range(count)])


def _why_not_fast_path(layer):
    """PyTorch's reason (worded as its warning) for not using nested tensors with this
    encoder layer, or "": tapegrad has no fast path, but it warns as PyTorch does."""
    name = "encoder_layer"
    if not isinstance(layer, TransformerEncoderLayer):
        return f"{name} was not TransformerEncoderLayer"
    if layer.norm_first:
        return f"{name}.norm_first was True"
    if not layer.self_attn.batch_first:
        return (f"{name}.self_attn.batch_first was not True(use batch_first for better "
                f"inference performance)")
    if layer.self_attn.in_proj_bias is None:
        return f"{name}.self_attn was passed bias=False"
    if not layer.activation_relu_or_gelu:
        return f"{name}.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return f"{name}.norm1.eps was not equal to {name}.norm2.eps"
    if layer.self_attn.num_heads % 2 == 1:
        return f"{name}.self_attn.num_heads is odd"
    return ""


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer`` applied in turn (each with ``mask``,
    ``src_key_padding_mask`` and ``is_causal``), then ``norm`` if given, as PyTorch's.
    ``enable_nested_tensor`` and ``mask_check`` are kept for PyTorch's signature and warning;
    tapegrad always runs the layers themselves (PyTorch's nested-tensor path gives the same
    values).

    Shape: that of the layer's input.

    Example:
        >>> layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
        >>> encoder = nn.TransformerEncoder(layer, 3)
        >>> len(encoder.layers), encoder(tg.ones(2, 5, 8)).shape
        (3, tapegrad.Size([2, 5, 8]))
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why_not = _why_not_fast_path(encoder_layer)
        if enable_nested_tensor and why_not:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False "
                          f"because {why_not}", stacklevel=2)
            self.use_nested_tensor = False

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        # PyTorch turns is_causal=None into a check of the mask's values against a causal
        # one; the layers here use the mask itself either way, so the hint is passed as is
        # (no value is read, so a compiled replay stays right for any mask)
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                               mask, "mask", src.dtype)
        mask = _canonical_mask(mask, "mask", None, "", src.dtype, check_other=False)
        kept = self._nested_positions(src, mask, src_key_padding_mask)
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                           is_causal=bool(is_causal))
        if kept is not None:
            # PyTorch's inference path computes the kept positions only (the same numbers)
            # and pads the others with 0 before the final norm
            output = tg.where(kept.unsqueeze(-1), output, tg.zeros((), dtype=output.dtype))
        if self.norm is not None:
            output = self.norm(output)
        return output


    def _nested_positions(self, src, mask, padding):
        """The positions PyTorch's nested-tensor inference path keeps (True), when it would
        take that path, else None: in eval mode, for a batched input with a key padding mask
        and no attention mask, when no gradient is being recorded, and (with ``mask_check``)
        when every row's kept keys come first."""
        first = self.layers[0]
        if not self.use_nested_tensor or first.training or src.dim() != 3 or padding is None \
                or mask is not None:
            return None
        weights = (first.self_attn.in_proj_weight, first.self_attn.in_proj_bias,
                   first.self_attn.out_proj.weight, first.self_attn.out_proj.bias,
                   first.norm1.weight, first.norm1.bias, first.norm2.weight, first.norm2.bias,
                   first.linear1.weight, first.linear1.bias, first.linear2.weight,
                   first.linear2.bias)
        if tg.is_grad_enabled() and any(t is not None and t.requires_grad
                                        for t in (src, *weights)):
            return None
        kept = padding == 0
        if self.mask_check:
            if _state.trace is not None:
                # whether the path is taken depends on the mask's values
                _state.trace.opaque("TransformerEncoder's inference path reads the padding "
                                    "mask's values")
            # left aligned: no kept key after a padded one
            if bool((kept[:, 1:] & ~kept[:, :-1]).any()):
                return None
        if not first.self_attn.batch_first:
            kept = kept.transpose(0, 1)         # (the output is (S, N, E))
        return kept


class TransformerDecoderLayer(Module):
    """``x + self_attn(x)``, then ``x + multihead_attn(x, memory)``, then
    ``x + linear2(dropout(activation(linear1(x))))``, each followed by a LayerNorm
    (``norm_first=False``, the default) or preceded by one (``norm_first=True``), with dropout
    on each branch, as PyTorch's. ``activation`` is "relu", "gelu" or a callable.

    Shape: target ``(T, N, d_model)`` and memory ``(S, N, d_model)`` (batch first with
    ``batch_first``; or unbatched) -> the target's shape.

    Example:
        >>> layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, batch_first=True)
        >>> layer(tg.ones(3, 4, 8), tg.ones(3, 6, 8)).shape
        tapegrad.Size([3, 4, 8])
        >>> [name for name, _ in layer.named_children()][:3]
        ['self_attn', 'multihead_attn', 'linear1']
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        # (the order of creation is PyTorch's: it fixes the random initial values and the
        # order of state_dict keys)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        if isinstance(activation, str):
            activation = _activation(activation)
        self.activation = activation

    def _self_attention_block(self, x, mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _cross_attention_block(self, x, memory, mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, memory, memory, attn_mask=mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _feed_forward_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._self_attention_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                               tgt_is_causal)
            x = x + self._cross_attention_block(self.norm2(x), memory, memory_mask,
                                                memory_key_padding_mask, memory_is_causal)
            return x + self._feed_forward_block(self.norm3(x))
        x = self.norm1(x + self._self_attention_block(x, tgt_mask, tgt_key_padding_mask,
                                                      tgt_is_causal))
        x = self.norm2(x + self._cross_attention_block(x, memory, memory_mask,
                                                       memory_key_padding_mask,
                                                       memory_is_causal))
        return self.norm3(x + self._feed_forward_block(x))


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer`` applied in turn to the target, each
    attending to ``memory`` (with the masks and causal hints given), then ``norm`` if given,
    as PyTorch's.

    Shape: that of the target.

    Example:
        >>> layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16)
        >>> decoder = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(8))
        >>> decoder(tg.ones(4, 3, 8), tg.ones(6, 3, 8)).shape
        tapegrad.Size([4, 3, 8])
    """

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        # (tgt_is_causal=None: as in TransformerEncoder, the mask itself is used)
        output = tgt
        for layer in self.layers:
            output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                           tgt_key_padding_mask=tgt_key_padding_mask,
                           memory_key_padding_mask=memory_key_padding_mask,
                           tgt_is_causal=bool(tgt_is_causal),
                           memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """PyTorch's encoder-decoder Transformer: ``num_encoder_layers`` encoder layers and
    ``num_decoder_layers`` decoder layers (or ``custom_encoder`` / ``custom_decoder``), each
    stack followed by a LayerNorm; every parameter of more than one dim drawn again with
    ``xavier_uniform_``, in PyTorch's order, so the same seed gives PyTorch's weights.

    Shape: src ``(S, N, E)`` and tgt ``(T, N, E)`` (``(N, S, E)``, ``(N, T, E)`` with
    ``batch_first=True``; unbatched ``(S, E)``, ``(T, E)``) -> the shape of tgt.

    Example:
        >>> model = nn.Transformer(8, 2, 1, 1, dim_feedforward=16, batch_first=True)
        >>> mask = nn.Transformer.generate_square_subsequent_mask(3)
        >>> model(tg.ones(2, 4, 8), tg.ones(2, 3, 8), tgt_mask=mask).shape
        tapegrad.Size([2, 3, 8])
        >>> mask
        tensor([[0., -inf, -inf],
                [0., 0., -inf],
                [0., 0., 0.]])
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation=F.relu, custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias,
                                            dtype=dtype)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias,
                                            dtype=dtype)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        batched = src.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        if batched and src.size(batch_dim) != tgt.size(batch_dim):
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The additive causal mask of size ``sz``: ``-inf`` above the diagonal, 0 elsewhere
        (position i attends to positions up to i)."""
        return tg.triu(tg.full((sz, sz), -math.inf, dtype=dtype), diagonal=1)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                xavier_uniform_(p)


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
