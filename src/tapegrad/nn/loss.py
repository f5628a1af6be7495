"""More loss layers as in ``torch.nn``: each holds its options and calls the matching
``tapegrad.nn.functional`` function."""
from . import functional as F
from .modules import _Loss, _WeightedLoss

__all__ = [
    "HuberLoss", "SmoothL1Loss", "KLDivLoss", "PoissonNLLLoss", "GaussianNLLLoss",
    "MarginRankingLoss", "CosineEmbeddingLoss", "TripletMarginLoss", "SoftMarginLoss",
    "MultiLabelSoftMarginLoss", "MultiMarginLoss", "HingeEmbeddingLoss", "CTCLoss",
    "MultiLabelMarginLoss", "TripletMarginWithDistanceLoss",
]


class CTCLoss(_Loss):
    """The connectionist temporal classification loss: ``F.ctc_loss`` with this module's
    ``blank``, ``reduction`` and ``zero_infinity``.

    Shape: ``log_probs`` (T, N, C) or (T, C), ``targets`` (N, S) or the samples' labels
    concatenated, one input and one target length per sample -> ``()`` ((N,) with
    ``"none"``).

    Example:
        >>> loss = nn.CTCLoss()
        >>> log_probs = tg.full((3, 1, 2), 0.5).log()
        >>> loss(log_probs, tg.tensor([[1]]), tg.tensor([3]), tg.tensor([1]))
        tensor(0.2877)
    """

    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                          self.reduction, self.zero_infinity)


class HuberLoss(_Loss):
    """Quadratic within ``delta`` of the target, linear beyond: ``F.huber_loss``.

    Shape: input and target of one shape -> ``()`` (that shape with ``"none"``).

    Example:
        >>> nn.HuberLoss()(tg.tensor([0.5, 3.0]), tg.zeros(2))
        tensor(1.3125)
    """

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class SmoothL1Loss(_Loss):
    """Quadratic within ``beta`` of the target, linear beyond: ``F.smooth_l1_loss``.

    Shape: as for ``HuberLoss``.

    Example:
        >>> nn.SmoothL1Loss(beta=0.5)(tg.tensor([0.25, 3.0]), tg.zeros(2))
        tensor(1.4062)
    """

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence of the target from log-probabilities: ``F.kl_div``
    (``reduction="batchmean"`` gives the true divergence per sample).

    Shape: input and target of one shape -> ``()`` (that shape with ``"none"``).

    Example:
        >>> logq = tg.log(tg.tensor([[0.5, 0.5]]))
        >>> nn.KLDivLoss(reduction="batchmean")(logq, tg.tensor([[0.9, 0.1]]))
        tensor(0.3681)
    """

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class PoissonNLLLoss(_Loss):
    """Poisson negative log-likelihood of counts: ``F.poisson_nll_loss``.

    Shape: input and target of one shape -> ``()`` (that shape with ``"none"``).

    Example:
        >>> nn.PoissonNLLLoss()(tg.tensor([0.0, 1.0]), tg.tensor([1.0, 2.0]))
        tensor(0.8591)
    """

    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                 reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input, target):
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                  eps=self.eps, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """Gaussian negative log-likelihood of the target given means and variances:
    ``F.gaussian_nll_loss``.

    Shape: input and target ``(N, *)``, var of that shape (or one dimension fewer, or with a
    dimension of size 1) -> ``()`` (``(N, *)`` with ``"none"``).

    Example:
        >>> nn.GaussianNLLLoss()(tg.tensor([0.0, 1.0]), tg.tensor([1.0, 1.0]), tg.ones(2))
        tensor(0.2500)
    """

    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(reduction=reduction)
        self.full = full
        self.eps = eps

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                   reduction=self.reduction)


class MarginRankingLoss(_Loss):
    """``max(0, -target * (input1 - input2) + margin)``: ``F.margin_ranking_loss``.

    Shape: three tensors of one shape -> ``()`` (that shape with ``"none"``).

    Example:
        >>> nn.MarginRankingLoss(0.5)(tg.tensor([1.0]), tg.tensor([0.0]), tg.tensor([-1.0]))
        tensor(1.5000)
    """

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin,
                                     reduction=self.reduction)


class CosineEmbeddingLoss(MarginRankingLoss):
    """``1 - cos`` for pairs labelled 1, ``max(0, cos - margin)`` for pairs labelled -1:
    ``F.cosine_embedding_loss``.

    Shape: inputs ``(N, D)``, target ``(N,)`` -> ``()`` (``(N,)`` with ``"none"``).

    Example:
        >>> a, b = tg.tensor([[1.0, 0.0]]), tg.tensor([[0.0, 1.0]])
        >>> nn.CosineEmbeddingLoss()(a, b, tg.tensor([1.0]))
        tensor(1.)
    """

    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                       reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """``max(d(anchor, positive) - d(anchor, negative) + margin, 0)``:
    ``F.triplet_margin_loss``.

    Shape: three ``(N, D)`` -> ``()`` (``(N,)`` with ``"none"``).

    Example:
        >>> a, pos, neg = tg.tensor([[0.0, 0.0]]), tg.tensor([[1.0, 0.0]]), tg.tensor([[0.0, 1.5]])
        >>> nn.TripletMarginLoss(eps=0.0)(a, pos, neg)
        tensor(0.5000)
    """

    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(
                f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead")
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                     eps=self.eps, swap=self.swap, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """Two-class logistic loss ``log(1 + exp(-y x))`` for targets of +1 and -1:
    ``F.soft_margin_loss``.

    Shape: input and target of one shape -> ``()`` (that shape with ``"none"``).

    Example:
        >>> nn.SoftMarginLoss()(tg.tensor([0.0, 2.0]), tg.tensor([1.0, -1.0]))
        tensor(1.4100)
    """

    def forward(self, input, target):
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """Binary cross-entropy of each of ``C`` labels from logits, averaged over the labels
    (each scaled by ``weight``): ``F.multilabel_soft_margin_loss``.

    Shape: input and target ``(N, C)`` -> ``()`` (``(N,)`` with ``"none"``).

    Example:
        >>> nn.MultiLabelSoftMarginLoss()(tg.tensor([[0.0, 0.0]]), tg.tensor([[1.0, 0.0]]))
        tensor(0.6931)
    """

    def forward(self, input, target):
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight,
                                             reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """Multi-class hinge loss of scores and class indices (``p`` 1 or 2, a ``margin``, an
    optional per-class ``weight``): ``F.multi_margin_loss``.

    Shape: input ``(N, C)`` or ``(C,)``, target ``(N,)`` or ``()`` -> ``()`` (the target's
    shape with ``"none"``).

    Example:
        >>> nn.MultiMarginLoss()(tg.tensor([[0.1, 0.2, 0.4, 0.8]]), tg.tensor([3]))
        tensor(0.3250)
    """

    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.dim() != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got "
                             f"{weight.dim()}D instead")
        self.p = p
        self.margin = margin

    def forward(self, input, target):
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin,
                                   weight=self.weight, reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """``x`` where the target is 1, ``max(0, margin - x)`` where it is -1:
    ``F.hinge_embedding_loss``.

    Shape: input and target of one shape -> ``()`` (that shape with ``"none"``).

    Example:
        >>> nn.HingeEmbeddingLoss()(tg.tensor([0.3, 2.0]), tg.tensor([1.0, -1.0]))
        tensor(0.1500)
    """

    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input, target):
        return F.hinge_embedding_loss(input, target, margin=self.margin,
                                      reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """Multi-label hinge loss of scores and the target classes of each sample (class
    indices up to the first -1): ``F.multilabel_margin_loss``.

    Shape: input and target ``(N, C)`` or ``(C,)`` -> ``()`` (``(N,)`` with ``"none"``).

    Example:
        >>> nn.MultiLabelMarginLoss()(tg.tensor([[0.1, 0.2, 0.4, 0.8]]),
        ...                           tg.tensor([[3, 0, -1, 1]]))
        tensor(0.8500)
    """

    def forward(self, input, target):
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """The triplet loss under any distance function of two tensors
    (``nn.PairwiseDistance()`` if None): ``F.triplet_margin_with_distance_loss``.

    Example:
        >>> a, p, n = tg.tensor([[0.0, 0.0]]), tg.tensor([[3.0, 4.0]]), tg.tensor([[1.0, 0.0]])
        >>> nn.TripletMarginWithDistanceLoss(margin=0.5)(a, p, n)
        tensor(4.5000)
    """

    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(reduction=reduction)
        if margin <= 0:
            raise ValueError("TripletMarginWithDistanceLoss: expected margin to be greater "
                             f"than 0, got {margin} instead")
        from .layers import PairwiseDistance
        self.distance_function = (distance_function if distance_function is not None
                                  else PairwiseDistance())
        self.margin = margin
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
