"""Embedding, distance and bilinear layers as in ``torch.nn``."""
import math

import tapegrad as tg

from . import functional as F
from . import init
from .modules import Module, Parameter

__all__ = ["Embedding", "CosineSimilarity", "PairwiseDistance", "Bilinear"]


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
        tensor([[0., 0., 0.]], grad_fn=<IndexBackward0>)
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


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
