"""The adaptive softmax of ``torch.nn``: ``AdaptiveLogSoftmaxWithLoss``, a log-softmax over
many classes that puts the frequent ones in a head and the rare ones in smaller clusters."""
from collections import namedtuple

from . import functional as F
from .containers import ModuleList
from .modules import Linear, Module, Sequential

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

# what forward returns, under PyTorch's name: each row's target log-probability, and the loss
_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


def _check_cutoffs(cutoffs, n_classes):
    """PyTorch's requirements on ``cutoffs``: some, unique, increasing whole numbers in
    ``[1, n_classes - 1]``."""
    if len(cutoffs) == 0:
        raise ValueError("cutoffs should be a sequence of length larger than 0")
    if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
            or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
        raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in "
                         "an increasing order, where each value is between 1 and n_classes-1")


def _check_target(input, target):
    """PyTorch's checks of the ranks of ``input`` and ``target`` (one example or a batch)."""
    if target.dim() == 1:
        if input.size(0) != target.size(0):
            raise RuntimeError(
                "Input and target should have the same size in the batch dimension.")
        if input.dim() != 2:
            raise RuntimeError("1D target tensor expects 2D input tensors, but found inputs "
                               f"with size {input.size()}")
    elif target.dim() == 0:
        if input.dim() != 1:
            raise RuntimeError("0D target tensor expects 1D input tensors, but found inputs "
                               f"with size {input.size()}")
    else:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax (Grave et al., 2016): classes sorted by frequency are split at
    ``cutoffs``; the ``head`` (a ``Linear``) scores the first ``cutoffs[0]`` classes and one
    entry per cluster, and cluster ``i`` (``tail[i]``, two bias-free ``Linear`` through
    ``in_features // div_value ** (i + 1)`` features) scores its classes.  A class's
    log-probability is its head score, or its cluster's head score plus its score in the
    cluster.  Parameters are laid out as PyTorch's (``head.weight``, ``tail.0.0.weight``,
    ...), so PyTorch's state dicts load.

    ``forward(input, target)`` returns ``_ASMoutput(output, loss)``: each example's target
    log-probability and the mean negative log-likelihood.  ``log_prob(input)`` gives all
    ``n_classes`` log-probabilities, ``predict(input)`` the most likely class.

    Shape: input ``(N, in_features)`` or ``(in_features,)``, target ``(N,)`` or ``()`` ->
    output ``(N,)`` or ``()``, loss ``()``.

    Example:
        >>> asm = nn.AdaptiveLogSoftmaxWithLoss(4, 10, cutoffs=[3, 6], div_value=2.0)
        >>> asm
        AdaptiveLogSoftmaxWithLoss(
          (head): Linear(in_features=4, out_features=5, bias=False)
          (tail): ModuleList(
            (0): Sequential(
              (0): Linear(in_features=4, out_features=2, bias=False)
              (1): Linear(in_features=2, out_features=3, bias=False)
            )
            (1): Sequential(
              (0): Linear(in_features=4, out_features=1, bias=False)
              (1): Linear(in_features=1, out_features=4, bias=False)
            )
          )
        )
        >>> out = asm(tg.ones(2, 4), tg.tensor([0, 9]))
        >>> out.output.shape, out.loss.shape
        (tapegrad.Size([2]), tapegrad.Size([]))
        >>> asm.log_prob(tg.ones(2, 4)).exp().sum(1)
        tensor([1.0000, 1.0000], grad_fn=<SumBackward1>)
        >>> asm(tg.ones(4), tg.tensor(10))
        Traceback (most recent call last):
          ...
        RuntimeError: Target values should be in [0, 9], but values in range [10, 10] were found.
    """

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        _check_cutoffs(cutoffs, n_classes)
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]         # each cluster's end, the last at n_classes
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        # built (and so drawn) in PyTorch's order: head, then each cluster's two layers
        self.head = Linear(in_features, self.head_size, bias=head_bias, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, dtype=dtype),
                                        Linear(hidden, size, bias=False, dtype=dtype)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for to_hidden, to_classes in self.tail:
            to_hidden.reset_parameters()
            to_classes.reset_parameters()

    def forward(self, input_, target_):
        _check_target(input_, target_)
        batched = target_.dim() > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        batch = target.size(0)
        output = input.new_zeros(batch)       # cluster log-probabilities; 0 in the head
        head_entry = target.new_empty(batch)  # which head score each row adds
        bounds = [0] + self.cutoffs
        rows_seen = 0
        for i, (low, high) in enumerate(zip(bounds[:-1], bounds[1:])):
            in_range = (target >= low) & (target < high)
            rows = in_range.nonzero().squeeze()
            if rows.numel() == 0:
                continue
            if i == 0:                        # in the head: its own score is the class's
                head_entry.index_copy_(0, rows, target[in_range])
            else:
                cluster_scores = self.tail[i - 1](input.index_select(0, rows))
                head_entry.index_fill_(0, rows, self.shortlist_size + i - 1)
                within = F.log_softmax(cluster_scores, dim=1).gather(
                    1, (target[in_range] - low).unsqueeze(1))
                output.index_copy_(0, rows, within.squeeze(1))
            rows_seen += rows.numel()
        if rows_seen != batch:
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but "
                               f"values in range [{target.min().item()}, "
                               f"{target.max().item()}] were found. ")
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output += head_logprob.gather(1, head_entry.unsqueeze(1)).squeeze()
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, input, head_scores):
        """All classes' log-probabilities from the input and the head's scores of it."""
        full = input.new_empty((head_scores.size(0), self.n_classes))
        head_logprob = F.log_softmax(head_scores, dim=1)
        full[:, :self.shortlist_size] = head_logprob[:, :self.shortlist_size]
        for i, (start, stop) in enumerate(zip(self.cutoffs[:-1], self.cutoffs[1:])):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            full[:, start:stop] = cluster_logprob + head_logprob[
                :, self.shortlist_size + i].unsqueeze(1)
        return full

    def log_prob(self, input):
        """The log-probabilities of all ``n_classes`` classes, ``(N, n_classes)``."""
        return self._full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most likely class of each row, ``(N,)``: ``log_prob(input).argmax(1)``, with
        the clusters scored only for rows whose best head entry is a cluster."""
        head_scores = self.head(input)
        best = head_scores.argmax(dim=1)
        in_cluster = best >= self.shortlist_size
        if not in_cluster.any():
            return best
        if in_cluster.all():
            return self._full_log_prob(input, head_scores).argmax(dim=1)
        best[in_cluster] = self._full_log_prob(input[in_cluster],
                                               head_scores[in_cluster]).argmax(dim=1)
        return best


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
