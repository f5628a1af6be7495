"""Embedding, distance, bilinear and sliding-block (``Unfold``/``Fold``) layers as in
``torch.nn``."""
import math

import tapegrad as tg

from . import functional as F
from . import init
from .modules import Linear, Module, Parameter

__all__ = ["Embedding", "EmbeddingBag", "CosineSimilarity", "PairwiseDistance", "Bilinear",
           "MultiheadAttention", "Unfold", "Fold"]


class Embedding(Module):
    """A lookup table of ``num_embeddings`` learnt vectors of size ``embedding_dim``, indexed
    by integer tensors: ``F.embedding``. The weight starts as N(0, 1) draws, with the row
    ``padding_idx`` (which gets no gradient) set to 0.

    Shape: ``(*)`` int -> ``(*, embedding_dim)``.

    Example:
        >>> emb = nn.Embedding(10, 3, padding_idx=0)
        >>> emb
        Embedding(10, 3, padding_idx=0)
        >>> emb(tg.tensor([[0, 4]])).shape
        tapegrad.Size([1, 2, 3])
        >>> emb(tg.tensor([0]))
        tensor([[0., 0., 0.]], grad_fn=<EmbeddingBackward0>)
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if padding_idx > 0:
                assert padding_idx < num_embeddings, "Padding_idx must be within num_embeddings"
            elif padding_idx < 0:
                assert padding_idx >= -num_embeddings, \
                    "Padding_idx must be within num_embeddings"
                padding_idx = num_embeddings + padding_idx
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(tg.empty(num_embeddings, embedding_dim, dtype=dtype),
                                    requires_grad=not _freeze)
            self.reset_parameters()
        else:
            assert list(_weight.shape) == [num_embeddings, embedding_dim], \
                "Shape of weight does not match num_embeddings and embedding_dim"
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self):
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        if self.padding_idx is not None:
            with tg.no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq is not False:
            text += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        if self.sparse is not False:
            text += ", sparse=True"
        return text

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An ``Embedding`` whose weight is (a copy of) the 2-d ``embeddings``, frozen unless
        ``freeze=False``; the padding row keeps its given values.

        Example:
            >>> emb = nn.Embedding.from_pretrained(tg.tensor([[1.0, 2.0], [3.0, 4.0]]))
            >>> emb(tg.tensor([1])), emb.weight.requires_grad
            (tensor([[3., 4.]]), False)
        """
        assert embeddings.ndim == 2, "Embeddings parameter is expected to be 2-dimensional"
        rows, cols = embeddings.shape
        return cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings, _freeze=freeze,
                   padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


class EmbeddingBag(Module):
    """Sums, means (the default) or maxima of bags of learnt vectors, without building the
    per-index embeddings: ``F.embedding_bag``.  The weight starts as N(0, 1) draws, with the
    row ``padding_idx`` set to 0 (and left out of every bag).

    Shape: ``(B, N)`` int, or ``(n,)`` int with ``offsets`` -> ``(B, embedding_dim)``.

    Example:
        >>> bag = nn.EmbeddingBag(10, 3, mode="sum")
        >>> bag
        EmbeddingBag(10, 3, mode='sum')
        >>> bag(tg.tensor([1, 2, 4, 5, 4]), tg.tensor([0, 2])).shape
        tapegrad.Size([2, 3])
    """

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        if padding_idx is not None:
            if padding_idx > 0:
                if padding_idx >= num_embeddings:
                    raise AssertionError("padding_idx must be within num_embeddings")
            elif padding_idx < 0:
                if padding_idx < -num_embeddings:
                    raise AssertionError("padding_idx must be within num_embeddings")
                padding_idx = num_embeddings + padding_idx
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(tg.empty(num_embeddings, embedding_dim, dtype=dtype))
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError(
                    "Shape of weight does not match num_embeddings and embedding_dim")
            self.weight = Parameter(_weight)
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset

    def reset_parameters(self):
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        if self.padding_idx is not None:
            with tg.no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input, offsets=None, per_sample_weights=None):  # noqa: A002
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse,
                               per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        text = f"{self.num_embeddings!r}, {self.embedding_dim!r}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq is not False:
            text += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        text += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx!r}"
        return text

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, mode="mean", sparse=False,
                        include_last_offset=False, padding_idx=None):
        """An ``EmbeddingBag`` whose weight is the 2-d ``embeddings``, frozen unless
        ``freeze=False``.

        Example:
            >>> bag = nn.EmbeddingBag.from_pretrained(tg.tensor([[1.0, 2.0], [3.0, 4.0]]))
            >>> bag(tg.tensor([[0, 1]])), bag.weight.requires_grad
            (tensor([[2., 3.]]), False)
        """
        assert embeddings.ndim == 2, "Embeddings parameter is expected to be 2-dimensional"
        rows, cols = embeddings.shape
        bag = cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings,
                  max_norm=max_norm, norm_type=norm_type,
                  scale_grad_by_freq=scale_grad_by_freq, mode=mode, sparse=sparse,
                  include_last_offset=include_last_offset, padding_idx=padding_idx)
        bag.weight.requires_grad = not freeze
        return bag


class CosineSimilarity(Module):
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim``: ``F.cosine_similarity``.

    Shape: the broadcast shape of the inputs without ``dim``.

    Example:
        >>> nn.CosineSimilarity()(tg.tensor([[1.0, 0.0]]), tg.tensor([[1.0, 1.0]]))
        tensor([0.7071])
    """

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class Unfold(Module):
    """Every sliding block of the input images as a column: ``F.unfold`` (im2col).

    Shape: ``(N, C, H, W)`` -> ``(N, C * kH * kW, L)``.

    Example:
        >>> nn.Unfold((2, 3), stride=2)
        Unfold(kernel_size=(2, 3), dilation=1, padding=0, stride=2)
        >>> nn.Unfold(2)(tg.ones(1, 3, 4, 4)).shape
        tapegrad.Size([1, 12, 9])
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """Columns of sliding blocks summed back into images: ``F.fold`` (col2im).

    Shape: ``(N, C * kH * kW, L)`` -> ``(N, C, *output_size)``.

    Example:
        >>> nn.Fold((4, 5), 2)
        Fold(output_size=(4, 5), kernel_size=2, dilation=1, padding=0, stride=1)
        >>> nn.Fold((3, 3), 2)(tg.ones(1, 8, 4)).shape
        tapegrad.Size([1, 2, 3, 3])
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")


class PairwiseDistance(Module):
    """The ``p``-norm distance between rows of ``x1`` and ``x2``: ``F.pairwise_distance``.

    Shape: ``(N, D)`` and ``(N, D)`` -> ``(N,)`` (``(N, 1)`` with ``keepdim``).

    Example:
        >>> nn.PairwiseDistance(eps=0.0)(tg.tensor([[3.0, 0.0]]), tg.tensor([[0.0, 4.0]]))
        tensor([5.])
    """

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class Bilinear(Module):
    """``y = x1 @ weight[k] @ x2 + bias[k]`` for each output ``k``: ``F.bilinear``. Weight
    and bias start as U(-1/sqrt(in1_features), 1/sqrt(in1_features)), as in PyTorch.

    Shape: ``(*, in1_features)`` and ``(*, in2_features)`` -> ``(*, out_features)``.

    Example:
        >>> layer = nn.Bilinear(2, 3, 4)
        >>> layer
        Bilinear(in1_features=2, in2_features=3, out_features=4, bias=True)
        >>> layer(tg.ones(5, 2), tg.ones(5, 3)).shape
        tapegrad.Size([5, 4])
    """

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(tg.empty(out_features, in1_features, in2_features, dtype=dtype))
        if bias:
            self.bias = Parameter(tg.empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class NonDynamicallyQuantizableLinear(Linear):
    """``Linear`` under the name PyTorch gives ``MultiheadAttention.out_proj`` (which its
    repr shows).

    Example:
        >>> NonDynamicallyQuantizableLinear(2, 3)
        NonDynamicallyQuantizableLinear(in_features=2, out_features=3, bias=True)
    """


class MultiheadAttention(Module):
    """Multi-head attention as PyTorch's: project query, key and value with the packed
    ``in_proj_weight`` ``(3 E, E)`` (or, when ``kdim``/``vdim`` differ from ``embed_dim``,
    ``q_proj_weight``, ``k_proj_weight``, ``v_proj_weight``) and ``in_proj_bias``, attend in
    ``num_heads`` heads of size ``E / num_heads`` with scores scaled by ``1 / sqrt(head
    size)``, and project back with ``out_proj``: ``F.multi_head_attention_forward`` with the
    module's weights.  ``add_bias_kv`` learns one more key and value (``bias_k``,
    ``bias_v``), ``add_zero_attn`` appends a zero one.  Returns the output and, with
    ``need_weights``, the attention weights (averaged over the heads unless
    ``average_attn_weights=False``).

    Masks follow PyTorch: a bool ``attn_mask`` ``(L, S)`` or ``(N * num_heads, L, S)`` and a
    bool ``key_padding_mask`` ``(N, S)`` are True where attention is *not* allowed; float
    masks are added to the scores.

    Shape: query ``(L, N, E)`` (``(N, L, E)`` with ``batch_first``, or ``(L, E)``), key
    ``(S, N, kdim)`` and value ``(S, N, vdim)`` -> output like the query, weights
    ``(N, L, S)``.

    Example:
        >>> attention = nn.MultiheadAttention(8, 2)
        >>> attention
        MultiheadAttention(
          (out_proj): NonDynamicallyQuantizableLinear(in_features=8, out_features=8, bias=True)
        )
        >>> out, weights = attention(tg.ones(5, 3, 8), tg.ones(4, 3, 6), tg.ones(4, 3, 8))
        Traceback (most recent call last):
          ...
        AssertionError: key shape tapegrad.Size([4, 3, 6]) does not match value shape tapegrad.Size([4, 3, 8])
        >>> out, weights = attention(tg.ones(5, 3, 8), tg.ones(4, 3, 8), tg.ones(4, 3, 8))
        >>> out.shape, weights.shape
        (tapegrad.Size([5, 3, 8]), tapegrad.Size([3, 5, 4]))
        >>> nn.MultiheadAttention(8, 2, kdim=6, add_bias_kv=True).k_proj_weight.shape
        tapegrad.Size([8, 6])
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        # one packed projection weight when key and value have the query's size
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        # registered in PyTorch's order, so that state_dict keys and draws follow it
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(tg.empty(3 * embed_dim, embed_dim, dtype=dtype))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(tg.empty(embed_dim, embed_dim, dtype=dtype))
            self.k_proj_weight = Parameter(tg.empty(embed_dim, self.kdim, dtype=dtype))
            self.v_proj_weight = Parameter(tg.empty(embed_dim, self.vdim, dtype=dtype))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(tg.empty(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(tg.empty(1, 1, embed_dim, dtype=dtype))
            self.bias_v = Parameter(tg.empty(1, 1, embed_dim, dtype=dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for weight in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        # masks made additive here as PyTorch's module does, so that a mismatch of their
        # dtypes warns once, from here
        key_padding_mask = F._additive_mask(
            key_padding_mask, "key_padding_mask",
            None if attn_mask is None else attn_mask.dtype, "attn_mask", query.dtype)
        attn_mask = F._additive_mask(attn_mask, "attn_mask", None, "", query.dtype)
        batched = query.dim() == 3
        if self.batch_first and batched:
            # to (L, N, E), keeping which of query, key and value are one tensor: the
            # projection differs for self-attention
            if key is value:
                if query is key:
                    query = key = value = query.transpose(1, 0)
                else:
                    query, key = (t.transpose(1, 0) for t in (query, key))
                    value = key
            else:
                query, key, value = (t.transpose(1, 0) for t in (query, key, value))
        separate = {} if self._qkv_same_embed_dim else {
            "use_separate_proj_weight": True, "q_proj_weight": self.q_proj_weight,
            "k_proj_weight": self.k_proj_weight, "v_proj_weight": self.v_proj_weight}
        out, weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, average_attn_weights=average_attn_weights,
            is_causal=is_causal, **separate)
        if self.batch_first and batched:
            return out.transpose(1, 0), weights
        return out, weights


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
