"""Bad calls, each spelled for a library ``m`` (tapegrad or PyTorch).

``test_vs_torch`` checks that tapegrad raises PyTorch's exception type and message for each;
``test_bad_input`` that each leaves the tape consistent.
"""


def ones(m, *shape, rg=True):
    return m.ones(shape, requires_grad=rg)


def boolean(m, values):
    return m.tensor(values, dtype=m.bool)


BAD_CALLS = {
    # broadcasting
    "broadcast add": lambda m: ones(m, 2, 3) + ones(m, 4),
    "broadcast mul": lambda m: ones(m, 2, 3) * ones(m, 2),
    "broadcast sub 3-D": lambda m: ones(m, 5, 2, 3) - ones(m, 4, 1, 3),
    "broadcast div": lambda m: ones(m, 3) / ones(m, 2),
    "broadcast pow": lambda m: ones(m, 3) ** ones(m, 2),
    "broadcast maximum": lambda m: m.maximum(ones(m, 2, 3), ones(m, 4)),
    "broadcast where": lambda m: m.where(ones(m, 2, 3, rg=False) > 0, ones(m, 3), ones(m, 2)),
    "broadcast where 3 ways": lambda m: m.where(ones(m, 2, 3, rg=False) > 0, ones(m, 4, 1, 1),
                                                ones(m, 5, 1, 1)),
    "broadcast clamp tensor bound": lambda m: ones(m, 2, 3).clamp(min=ones(m, 4)),
    "broadcast matmul batch": lambda m: ones(m, 6, 2, 3) @ ones(m, 5, 3, 5),
    # matmul
    "matmul 2-D": lambda m: ones(m, 2, 3) @ ones(m, 4, 5),
    "mm": lambda m: m.mm(ones(m, 2, 3), ones(m, 4, 5)),
    "matmul 1-D": lambda m: ones(m, 3) @ ones(m, 4),
    "matmul 2-D @ 1-D": lambda m: ones(m, 2, 3) @ ones(m, 4),
    "matmul 1-D @ 2-D": lambda m: ones(m, 3) @ ones(m, 4, 5),
    "matmul batched": lambda m: ones(m, 6, 2, 3) @ ones(m, 6, 4, 5),
    "matmul batch of one": lambda m: ones(m, 6, 2, 3) @ ones(m, 1, 4, 5),
    "matmul squeezable batch, left": lambda m: ones(m, 1, 2, 3) @ ones(m, 6, 4, 5, rg=False),
    "matmul squeezable batch, right": lambda m: ones(m, 6, 2, 3, rg=False) @ ones(m, 1, 4, 5),
    "matmul 4-D @ 3-D": lambda m: ones(m, 2, 6, 2, 3) @ ones(m, 1, 4, 5, rg=False),
    "matmul N-D @ 2-D": lambda m: ones(m, 6, 2, 3) @ ones(m, 4, 5),
    "matmul 2-D @ N-D": lambda m: ones(m, 2, 3) @ ones(m, 6, 4, 5),
    "matmul 2-D @ N-D, left constant": lambda m: ones(m, 2, 3, rg=False) @ ones(m, 6, 4, 5),
    "matmul N-D @ 1-D": lambda m: ones(m, 6, 2, 3) @ ones(m, 4),
    "matmul N-D @ 1-D, right constant": lambda m: ones(m, 6, 2, 3) @ ones(m, 4, rg=False),
    "matmul 1-D @ N-D": lambda m: ones(m, 3) @ ones(m, 6, 4, 5),
    "matmul 1-D @ N-D, left constant": lambda m: ones(m, 3, rg=False) @ ones(m, 6, 4, 5),
    "matmul 0-d": lambda m: ones(m) @ ones(m, 3),
    "matmul 0-d right": lambda m: ones(m, 3) @ ones(m),
    "matmul of int and float": lambda m: m.ones(2, 2, dtype=m.int64) @ ones(m, 2, 2),
    # dims out of range
    "sum dim": lambda m: ones(m, 2, 3).sum(2),
    "sum negative dim": lambda m: ones(m, 2, 3).sum(-3),
    "sum dim tuple": lambda m: ones(m, 2, 3).sum((0, 2)),
    "sum repeated dim": lambda m: ones(m, 2, 3).sum((0, 0)),
    "sum repeated dim, negative": lambda m: ones(m, 2, 3).sum((1, -1)),
    "sum dim of 0-d": lambda m: ones(m).sum(1),
    "sum dim -2 of 0-d": lambda m: ones(m).sum(-2),
    "mean dim": lambda m: ones(m, 2, 3).mean(5),
    "mean repeated dim": lambda m: ones(m, 2, 3).mean((1, -1)),
    "prod dim": lambda m: ones(m, 2).prod(1),
    "amax dim": lambda m: ones(m, 2).amax(1),
    "amax repeated dim": lambda m: ones(m, 2, 3).amax((1, -1)),
    "var dim": lambda m: ones(m, 2).var(1),
    "var dim tuple": lambda m: ones(m, 2, 3).var((0, 2)),
    "var repeated dim": lambda m: ones(m, 2, 3).var((1, -1)),
    "std dim": lambda m: ones(m, 2, 3).std(3),
    "norm dim": lambda m: ones(m, 2).norm(dim=1),
    "norm dim tuple": lambda m: ones(m, 2, 3).norm(dim=(0, 3)),
    "norm repeated dim": lambda m: ones(m, 2, 3).norm(dim=(1, -1)),
    "logsumexp dim": lambda m: ones(m, 2).logsumexp(1),
    "logsumexp repeated dim": lambda m: ones(m, 2, 3).logsumexp((0, 0)),
    "softmax dim": lambda m: ones(m, 2, 3).softmax(2),
    "softmax dim of 0-d": lambda m: ones(m).softmax(1),
    "max dim": lambda m: ones(m, 2, 3).max(-3),
    "max dim of 0-d": lambda m: ones(m).max(1),
    "unsqueeze dim": lambda m: ones(m, 2, 3).unsqueeze(4),
    "unsqueeze dim of 0-d": lambda m: ones(m).unsqueeze(2),
    "squeeze dim": lambda m: ones(m, 2).squeeze(1),
    "transpose dim": lambda m: ones(m, 2, 3).transpose(0, 2),
    "transpose dim of 0-d": lambda m: ones(m).transpose(0, 1),
    "permute dims": lambda m: ones(m, 2, 3).permute(0, 2),
    "permute repeated dim": lambda m: ones(m, 2, 3).permute(0, 0),
    "flatten dims": lambda m: ones(m, 2).flatten(0, 1),
    "flatten dims reversed": lambda m: ones(m, 2, 3).flatten(1, 0),
    "cat dim": lambda m: m.cat([ones(m, 2, 3), ones(m, 2, 3)], 2),
    "cat negative dim": lambda m: m.cat([ones(m, 2), ones(m, 2)], -2),
    "stack dim": lambda m: m.stack([ones(m, 2, 3), ones(m, 2, 3)], 3),
    "stack negative dim": lambda m: m.stack([ones(m, 2), ones(m, 2)], -3),
    "stack dim of 0-d": lambda m: m.stack([ones(m), ones(m)], 2),
    # ragged lists and dtypes
    "ragged list": lambda m: m.tensor([[1.0, 2.0], [3.0]]),
    "ragged list, number after list": lambda m: m.tensor([[1.0, 2.0], 3.0]),
    "ragged list, list after number": lambda m: m.tensor([1.0, [2.0, 3.0]]),
    "ragged list, deeper": lambda m: m.tensor([[[1.0]], [[2.0, 3.0]]]),
    "requires_grad on an int tensor": lambda m: m.tensor([1, 2], requires_grad=True),
    "requires_grad on a bool tensor": lambda m: m.tensor([True], requires_grad=True),
    "requires_grad_ on an int tensor": lambda m: m.tensor([1, 2]).requires_grad_(),
    "requires_grad = True on an int tensor": lambda m: setattr(m.tensor([1, 2]),
                                                               "requires_grad", True),
    "arange with requires_grad": lambda m: m.arange(3, requires_grad=True),
    "int zeros with requires_grad": lambda m: m.zeros(3, dtype=m.int64, requires_grad=True),
    "mean of ints": lambda m: m.tensor([1, 2]).mean(),
    "int to a negative power": lambda m: m.tensor([2, 3]) ** -1,
    "negation of bool": lambda m: -boolean(m, [True]),
    "where with a float condition": lambda m: m.where(ones(m, 2), ones(m, 2), ones(m, 2)),
    # indexing
    "index out of range": lambda m: ones(m, 3)[5],
    "negative index out of range": lambda m: ones(m, 3, 2)[:, -3],
    "index list out of range": lambda m: ones(m, 3)[[0, 5]],
    "index tensor out of range": lambda m: ones(m, 2)[m.tensor([3])],
    "0-d index tensor out of range": lambda m: ones(m, 2)[m.tensor(3)],
    "too many indices": lambda m: ones(m, 3)[0, 0],
    "too many indices with ellipsis": lambda m: ones(m, 2, 3)[..., 0, 0, 0],
    "too many indices with a mask": lambda m: ones(m, 2, 3)[m.ones(2, 3, dtype=m.bool), 0],
    "int index of 0-d": lambda m: ones(m)[0],
    "slice of 0-d": lambda m: ones(m)[1:],
    "int list index of 0-d": lambda m: ones(m)[[0]],
    "None then int on 0-d": lambda m: ones(m)[None, 0],
    "mask of the wrong shape": lambda m: ones(m, 3)[boolean(m, [True, False])],
    "mask list of the wrong shape": lambda m: ones(m, 2)[[True, False, True]],
    "mask on dim 1 of the wrong shape": lambda m: ones(m, 2, 3)[:, boolean(m, [True, False])],
    "2-D mask of the wrong shape": lambda m: ones(m, 2, 3)[m.ones(2, 2, dtype=m.bool)],
    "mask after ellipsis": lambda m: ones(m, 2, 3)[..., boolean(m, [True, False])],
    "index lists that do not broadcast": lambda m: ones(m, 3, 3)[[0, 1], [0, 1, 2]],
    "mask and list that do not broadcast": lambda m: ones(m, 2, 3)[boolean(m, [True, True]),
                                                                   [0, 1, 2]],
    "2-D index lists that do not broadcast": lambda m: ones(m, 2, 3)[[[0, 1]], [[0, 1, 2]]],
    "float index tensor": lambda m: ones(m, 3)[m.tensor([0.0])],
    "float index": lambda m: ones(m, 3)[1.0],
    "negative slice step": lambda m: ones(m, 3)[::-1],
    "zero slice step": lambda m: ones(m, 3)[::0],
    # structure
    "cat sizes": lambda m: m.cat([ones(m, 2, 3), ones(m, 3, 2)]),
    "cat ndims": lambda m: m.cat([ones(m, 2, 3), ones(m, 3)]),
    "cat 0-d": lambda m: m.cat([ones(m), ones(m)]),
    "cat 0-d second": lambda m: m.cat([ones(m, 2), ones(m)]),
    "cat of nothing": lambda m: m.cat([]),
    "stack sizes": lambda m: m.stack([ones(m, 2, 3), ones(m, 3, 2)]),
    "stack of nothing": lambda m: m.stack([]),
    "reshape size": lambda m: ones(m, 2, 3).reshape(4, 2),
    "reshape two -1": lambda m: ones(m, 2, 3).reshape(-1, -1),
    "reshape negative size": lambda m: ones(m, 2, 3).reshape(-2, 3),
    "view size": lambda m: ones(m, 2, 3).view(5),
    "view -1 that does not divide": lambda m: ones(m, 2, 3).view(-1, 4),
    "expand size": lambda m: ones(m, 2, 3).expand(2, 4),
    "expand fewer sizes": lambda m: ones(m, 2, 3).expand(3),
    "expand -1 in a new dim": lambda m: ones(m, 2).expand(-1, 2),
    "expand 0-d": lambda m: ones(m).expand(3, 2) + ones(m, 2, 3),
    "t of 3-D": lambda m: ones(m, 2, 3, 4).t(),
    "mT of 1-D": lambda m: ones(m, 2).mT,
    "squeeze repeated dim": lambda m: ones(m, 2, 1).squeeze((1, 1)),
    "clamp without bounds": lambda m: ones(m, 2).clamp(),
    "max of nothing": lambda m: ones(m, 0).max(),
    "max(dim) of an empty dim": lambda m: ones(m, 0, 3).max(0),
    "amax of an empty dim": lambda m: ones(m, 0, 3).amax(0),
    # backward
    "backward of a non-scalar": lambda m: (ones(m, 2, 3) * 2).backward(),
    "backward with a gradient of the wrong shape": lambda m: (ones(m, 2, 3) * 2).backward(
        m.ones(3, 2)),
    "backward of a tensor that needs no grad": lambda m: ones(m, 2, rg=False).sum().backward(),
    "second backward through freed values": lambda m: _twice(m),
    "backward of two outputs, one gradient of the wrong shape": lambda m: m.autograd.backward(
        [ones(m, 2) * 2, ones(m, 2) * 3], [m.ones(2), m.ones(3)]),
    "grad of two outputs, one gradient of the wrong shape": lambda m: m.autograd.grad(
        [ones(m, 2) * 2, (ones(m, 2) * 3).sum()], [ones(m, 2)], [m.ones(2), m.ones(3)]),
}


def _twice(m):
    y = (ones(m, 2) * ones(m, 2)).sum()
    y.backward()
    y.backward()




# scans and sorts (#16)
BAD_CALLS.update({
    "cumsum dim out of range": lambda m: ones(m, 2, 3).cumsum(2),
    "cumprod of a 0-d tensor along dim 1": lambda m: m.cumprod(m.tensor(1.0), 1),
    "logcumsumexp of integers": lambda m: m.logcumsumexp(m.tensor([1, 2]), 0),
    "cummax dim out of range": lambda m: m.cummax(ones(m, 2), -2),
    "sort dim out of range": lambda m: ones(m, 2, 3).sort(2),
    "topk k too large": lambda m: ones(m, 2, 3).topk(4),
    "topk k negative": lambda m: m.topk(ones(m, 3), -1),
    "kthvalue k too large": lambda m: ones(m, 2, 3).kthvalue(4),
    "kthvalue k zero": lambda m: m.kthvalue(ones(m, 2, 3), 0, 0),
    "median along an empty dim": lambda m: m.median(ones(m, 0, 2), 0),
    "diff of a 0-d tensor": lambda m: m.diff(m.tensor(1.0)),
    "diff of negative order": lambda m: ones(m, 3).diff(-1),
})
