"""How a loss reduces its per-element values (``reduction``), and PyTorch's deprecated
``size_average``/``reduce`` pair: shared by ``nn.functional`` and the loss modules beside it,
which sit above this module."""
import warnings

REDUCTIONS = ("none", "mean", "sum")


def reduce(loss, reduction):
    """``loss`` itself, its mean or its sum, as ``reduction`` says."""
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    return loss.sum()


def check_reduction(reduction):
    """PyTorch's ValueError for a ``reduction`` that is none of REDUCTIONS."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def legacy_reduction(size_average, reduce, reduction):
    """``reduction`` from PyTorch's deprecated ``size_average``/``reduce`` pair (with its
    warning) when either is given; ``reduction`` itself otherwise."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    result = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn("size_average and reduce args will be deprecated, please use "
                  f"reduction='{result}' instead.", stacklevel=3)
    return result
