"""Differentiable backward passes (``create_graph=True``), and the forward-mode and
second-order transforms: jvp, jacobian, hvp, hessian.

The compiled sweep computes gradients as numbers.  With ``create_graph=True`` the sweep runs
in Python instead, each record's rule written with tapegrad's own ops, so that the gradients
are recorded tensors whose own gradients can be taken.  It works on flat (1-D) views of the
records, the layout the compiled rules use, and is slower than the compiled sweep: use it for
second order, not for training loops.  The transforms at the end run compiled sweeps
(tangent, reverse and curvature) over one recorded tape.
"""
import math

import numpy as np

import types

from . import _anomaly
from . import autograd
from . import functional as F
from . import linalg
from . import ops as K
from .tape import NO_EXT, _tape_ids, state
from .tensor import PostAccumulateHook, Tensor


def _const(value):
    return Tensor._make(np.ascontiguousarray(value, dtype=np.float64))


def _handle(tape, r):
    """A tensor standing for record r's value (flat); ops on it extend r's graph.  A
    constant's (or a hidden broadcast of one) is a plain tensor: a gradient computed from
    constants alone requires no grad, as in PyTorch (``grad((c * x).sum(), c,
    create_graph=True)`` with data x)."""
    off, n = tape.voff[r], tape.size[r]
    s = r
    while tape.op[s] in (K.BCAST, K.EXPAND_S):
        s = tape.a0[s]
    if tape.op[s] == K.CONST:
        return Tensor._make(tape.vals[off:off + n].copy())
    return F._result(tape, r, tape.vals[off:off + n])


def _ori(tape, r):
    ip = tape.ip[r]
    return tape.aux[ip], tape.aux[ip + 1], tape.aux[ip + 2]


def _spread(g, o, red, i):
    """g of shape (O*I,) repeated along the reduced axis, flat (O*R*I,)."""
    return F.reshape(F.expand(F.reshape(g, o, 1, i), o, red, i), -1)


def _gather(x, idx):
    return F._gathered(x, np.asarray(idx, dtype=np.int64), 0)


# out (n_out,) with out[idx[k]] += x[k], differentiable (the backward of a gather)
scatter_add = F.scatter_add_flat


# What an op's differentiable rule (``graph``) is written with: tapegrad's functions, and its
# linalg module for the rules of inv, solve, det, ... (the op table cannot import upward)
GRAPH_OPS = types.SimpleNamespace(**{k: v for k, v in vars(F).items() if not k.startswith("__")},
                                  linalg=linalg)


# Rules that read values into constants (masks, signs, tie shares) or choose their formula
# by value (prod at zeros): a replayed tape would keep the recorded ones for new inputs, so
# a traced function using them runs eagerly.
_VALUE_MASKS = frozenset(code for code, info in K.OPS.items() if info.masks)


def _rule(tape, r, g):
    """[(input record, gradient contribution)] of record r for incoming gradient g."""
    o = tape.op[r]
    a0, a1 = tape.a0[r], tape.a1[r]
    c = tape.fp[r]
    if state.trace is not None and (o in _VALUE_MASKS or (o == K.RPOW_S and c == 0.0)):
        state.trace.opaque(f"a differentiable backward through {K.OPS[o].name}, whose "
                           "masks are read from values")
    val = lambda s: tape.vals[tape.voff[s]:tape.voff[s] + tape.size[s]]  # noqa: E731
    x0 = _handle(tape, a0) if a0 >= 0 else None
    x1 = _handle(tape, a1) if a1 >= 0 else None
    graph = K.OPS[o].graph
    if graph is not None:
        # the op's own differentiable rule, declared in its block of the op table
        # (an op with parameters gets its two faux values after the scalar)
        params = (float(tape.faux[tape.ip[r]]), float(tape.faux[tape.ip[r] + 1])) \
            if K.OPS[o].params else ()
        gx0, gx1 = graph(GRAPH_OPS, g, x0, x1, _handle(tape, r), c, *params)
        return [(s, gx) for s, gx in ((a0, gx0), (a1, gx1)) if gx is not None]
    if o in (K.ADD, K.ADD_S):
        return [(a0, g), (a1, g)]
    if o in (K.SUB, K.SUB_S):
        return [(a0, g), (a1, F.neg(g))]
    if o in (K.RSUB_S, K.NEG):
        return [(a0, F.neg(g))]
    if o == K.MUL:
        return [(a0, F.mul(g, x1)), (a1, F.mul(g, x0))]
    if o == K.MUL_S:
        return [(a0, F.mul(g, c))]
    if o == K.DIV:
        return [(a0, F.div(g, x1)), (a1, F.neg(F.div(F.mul(g, x0), F.mul(x1, x1))))]
    if o == K.DIV_S:
        return [(a0, F.div(g, c))]
    out = _handle(tape, r)
    if o == K.POW:
        keep0 = _const(val(a1) != 0.0)
        base_ok = _const(~((val(a0) == 0.0) & (val(a1) >= 0.0)))
        # where takes a bool condition (_const made the mask float64, and where refused it)
        safe_log = F.log(F.where(base_ok._value.astype(bool), x0, 1.0))
        return [(a0, F.mul(F.mul(g, keep0), F.mul(x1, F.pow(x0, F.sub(x1, 1.0))))),
                (a1, F.mul(F.mul(g, base_ok), F.mul(out, safe_log)))]
    if o == K.POW_S:
        if c == 0.0:
            return []
        return [(a0, F.mul(g, F.mul(F.pow(x0, c - 1.0), c)))]
    if o == K.RPOW_S:
        if c == 0.0:
            return [(a0, F.mul(g, _const(np.where(val(a0) < 0.0, np.inf, 0.0))))]
        return [(a0, F.mul(F.mul(g, out), float(np.log(c))))]
    if o == K.RECIPROCAL:
        return [(a0, F.neg(F.mul(g, F.mul(out, out))))]
    if o == K.EXP:
        return [(a0, F.mul(g, out))]
    if o == K.LOG:
        return [(a0, F.div(g, x0))]
    if o == K.LOG1P:
        return [(a0, F.div(g, F.add(x0, 1.0)))]
    if o == K.EXPM1:
        return [(a0, F.mul(g, F.add(out, 1.0)))]
    if o == K.SQRT:
        return [(a0, F.div(g, F.mul(out, 2.0)))]
    if o == K.ABS:
        return [(a0, F.mul(g, _const(np.sign(np.nan_to_num(val(a0))))))]
    if o == K.SIN:
        return [(a0, F.mul(g, F.cos(x0)))]
    if o == K.COS:
        return [(a0, F.neg(F.mul(g, F.sin(x0))))]
    if o == K.TAN:
        return [(a0, F.mul(g, F.add(F.mul(out, out), 1.0)))]
    if o == K.TANH:
        return [(a0, F.mul(g, F.rsub(F.mul(out, out), 1.0)))]
    if o == K.SIGMOID:
        return [(a0, F.mul(g, F.mul(out, F.rsub(out, 1.0))))]
    if o == K.RELU:
        return [(a0, F.mul(g, _const(~(val(r) <= 0.0))))]
    if o == K.SOFTPLUS:
        beta, threshold = tape.faux[tape.ip[r]], tape.faux[tape.ip[r] + 1]
        bx = F.mul(x0, beta)
        above = _const(val(a0) * beta > threshold)
        return [(a0, F.mul(g, F.where(above._value.astype(bool), 1.0, F.sigmoid(bx))))]
    if o in (K.CLAMP, getattr(K, "CLAMP_MIN", -1), getattr(K, "CLAMP_MAX", -1)):
        lo, hi = tape.faux[tape.ip[r]], tape.faux[tape.ip[r] + 1]
        x = val(a0)
        return [(a0, F.mul(g, _const(~((x < lo) | (x > hi)))))]
    if o in (K.MAXIMUM, K.MINIMUM):
        d = (val(a0) - val(a1)) * c
        w0 = np.where(d > 0, 1.0, np.where(d < 0, 0.0, np.where(d == 0, 0.5, 1.0)))
        w1 = np.where(d < 0, 1.0, np.where(d > 0, 0.0, np.where(d == 0, 0.5, 1.0)))
        return [(a0, F.mul(g, _const(w0))), (a1, F.mul(g, _const(w1)))]
    if o == K.WHERE:
        cond = val(tape.ip[r]) != 0.0
        return [(a0, F.mul(g, _const(cond))), (a1, F.mul(g, _const(~cond)))]
    if o in (K.SUM, K.SUM_DIM, K.MEAN, K.MEAN_DIM):
        n, red, i = _ori(tape, r)
        return [(a0, F.mul(_spread(g, n, red, i), c))]
    if o in (K.PROD, K.PROD_DIM):
        n, red, i = _ori(tape, r)
        if tape.aux[tape.ip[r] + 3] == 2 or red == 1:
            return [(a0, g)]   # a 0-d input, or a product of one entry: the gradient passes
        if not np.any(val(a0) == 0.0):
            return [(a0, F.div(F.mul(_spread(g, n, red, i), _spread(out, n, red, i)), x0))]
        # out/x is 0/0 at a zero: each entry's weight is the product of the other entries,
        # gathered as (O, R, R-1, I) and multiplied along the third axis
        k = np.arange(red)
        others = np.array([np.delete(k, j) for j in k])                   # (R, R-1)
        idx = ((np.arange(n)[:, None, None, None] * red + others[None, :, :, None]) * i
               + np.arange(i)[None, None, None, :])
        weights = F.prod(F.reshape(_gather(x0, idx.reshape(-1)), n, red, red - 1, i), 2)
        return [(a0, F.mul(_spread(g, n, red, i), F.reshape(weights, -1)))]
    if o in (K.MAX, K.MIN, K.AMAX, K.AMIN):
        n, red, i = _ori(tape, r)
        x = val(a0).reshape(n, red, i)
        best = val(r).reshape(n, 1, i)
        hit = (x == best) | (np.isnan(x) & np.isnan(best))
        share = hit / np.maximum(hit.sum(axis=1, keepdims=True), 1)
        return [(a0, F.mul(_spread(g, n, red, i), _const(share.reshape(-1))))]
    if o in (K.MAX_DIM, K.MIN_DIM):
        n, red, i = _ori(tape, r)
        ip = tape.ip[r]
        arg = np.array(tape.aux[ip + 3: ip + 3 + n * i], dtype=np.int64).reshape(n, i)
        onehot = np.zeros((n, red, i))
        np.put_along_axis(onehot, arg[:, None, :], 1.0, axis=1)
        return [(a0, F.mul(_spread(g, n, red, i), _const(onehot.reshape(-1))))]
    if o in (K.VAR, K.STD):
        n, red, i = _ori(tape, r)
        xr = F.reshape(x0, n, red, i)
        centred = F.reshape(F.sub(xr, F.mean(xr, 1, True)), -1)
        gg = F.mul(_spread(g, n, red, i), 2.0 * c)
        if o == K.STD:
            gg = F.div(gg, F.mul(_spread(out, n, red, i), 2.0))
        return [(a0, F.mul(gg, centred))]
    if o == K.LOGSUMEXP:
        n, red, i = _ori(tape, r)
        return [(a0, F.mul(_spread(g, n, red, i), F.exp(F.sub(x0, _spread(out, n, red, i)))))]
    if o in (K.SOFTMAX, K.LOG_SOFTMAX):
        n, red, i = _ori(tape, r)
        g3 = F.reshape(g, n, red, i)
        o3 = F.reshape(out, n, red, i)
        if o == K.SOFTMAX:
            res = F.mul(o3, F.sub(g3, F.sum(F.mul(g3, o3), 1, True)))
        else:
            res = F.sub(g3, F.mul(F.exp(o3), F.sum(g3, 1, True)))
        return [(a0, F.reshape(res, -1))]
    if o == K.NORM:
        n, red, i = _ori(tape, r)
        gs, os_ = _spread(g, n, red, i), _spread(out, n, red, i)
        x = val(a0)
        nz = _const(np.repeat(val(r).reshape(n, 1, i) != 0.0, red, axis=1).reshape(-1))
        sign = _const(np.sign(x))
        if c == 2.0:
            safe = F.where(nz._value.astype(bool), os_, 1.0)
            return [(a0, F.mul(F.mul(gs, nz), F.div(x0, safe)))]
        if c == 1.0:
            return [(a0, F.mul(gs, sign))]
        if np.isinf(c):
            best = np.repeat(val(r).reshape(n, 1, i), red, axis=1).reshape(-1)
            hit = (np.abs(x) == best).reshape(n, red, i)
            share = (hit / np.maximum(hit.sum(axis=1, keepdims=True), 1)).reshape(-1)
            return [(a0, F.mul(F.mul(gs, sign), _const(share)))]
        safe = F.where(nz._value.astype(bool), os_, 1.0)
        return [(a0, F.mul(F.mul(F.mul(gs, nz), sign),
                           F.div(F.pow(F.abs(x0), c - 1.0), F.pow(safe, c - 1.0))))]
    if o == K.MATMUL:
        ip = tape.ip[r]
        b, m, kk, n = (tape.aux[ip + j] for j in range(1, 5))
        g3 = F.reshape(g, b, m, n)
        res = []
        if a0 >= 0:
            res.append((a0, F.reshape(F.matmul(g3, F.transpose(F.reshape(x1, b, kk, n), 1, 2)),
                                      -1)))
        res.append((a1, F.reshape(F.matmul(F.transpose(F.reshape(x0, b, m, kk), 1, 2), g3),
                                  -1)))
        return res
    if o in (K.GATHER, K.BCAST):
        ip = tape.ip[r]
        idx = np.array(tape.aux[ip + 2: ip + 2 + tape.size[r]], dtype=np.int64)
        return [(a0, scatter_add(g, idx, tape.size[a0]))]
    if o == K.EXPAND_S:
        ip = tape.ip[r]
        nd = tape.aux[ip]
        shape = tuple(tape.aux[ip + 1: ip + 1 + nd])
        strides = np.array(tape.aux[ip + 1 + nd: ip + 1 + 2 * nd], dtype=np.int64)
        idx = sum(np.arange(s).reshape([-1 if d == j else 1 for j in range(nd)]) * st
                  for d, (s, st) in enumerate(zip(shape, strides))) if nd else np.zeros(1)
        idx = np.broadcast_to(idx, shape).reshape(-1)
        return [(a0, scatter_add(g, idx, tape.size[a0]))]
    if o == K.SCATTER:
        ip = tape.ip[r]
        n_in = tape.aux[ip + 1]
        idx = np.array(tape.aux[ip + 2: ip + 2 + n_in], dtype=np.int64)
        return [(a0, _gather(g, idx))]
    if o == K.RESHAPE:
        return [(a0, g)]
    if o in (K.CAT, K.STACK):
        ip = tape.ip[r]
        k = tape.aux[ip]
        outer, block = tape.aux[ip + 1 + 3 * k], tape.aux[ip + 2 + 3 * k]
        g2 = F.reshape(g, outer, block)
        res = []
        for j in range(k):
            src, start, width = (tape.aux[ip + 1 + 3 * j + t] for t in range(3))
            res.append((src, F.reshape(F.getitem(g2, (slice(None), slice(start, start + width))),
                                       -1)))
        return res
    if o == K.WRITE:
        # the written elements' gradient goes to the source, the others' to the base
        ip = tape.ip[r]
        m = tape.aux[ip]
        idx = np.array(tape.aux[ip + 1: ip + 1 + m], dtype=np.int64)
        kept = np.ones(tape.size[r])
        kept[idx] = 0.0
        return [(a0, F.mul(g, _const(kept))), (a1, _gather(g, idx))]
    if o in (K.CMP, K.GUARD):
        return []
    raise NotImplementedError(f"no differentiable rule for {K.OPS[o].name}")


def run_backward_graph(outputs, grad_outputs, inputs=None):
    """Backward with recorded gradients; returns {id(leaf or input): flat gradient tensor}."""
    from .autograd import _seed_value
    seeds = {}
    results = {}
    for j, (t, g) in enumerate(zip(outputs, grad_outputs)):
        if not t._rg:
            raise RuntimeError(
                f"element {j} of tensors does not require grad and does not have a grad_fn")
        if g is None:
            _seed_value(t, None)
            gt = _const(np.ones(t._value.size))
        else:
            _seed_value(t, g)
            gt = _flat(g if isinstance(g, Tensor) else _const(g))
        if t._tape is None:
            _add(results, id(t), gt)
            continue
        per = seeds.setdefault(t._tape, {})
        _add(per, t._r, gt)
    if _anomaly._checking:
        _anomaly.check_roots([None if g is None else np.asarray(getattr(g, "_value", g))
                              for g in grad_outputs])
    wanted = None if inputs is None else {(x._tape, x._r) if x._tape is not None else id(x): x
                                          for x in inputs}
    leaves = {}
    checked = _anomaly._checking
    while seeds:
        tape = max(seeds, key=lambda tp: tp.id)
        acc = seeds.pop(tape)
        if tape.ext_refs is not None or tape.unfilled is not None:
            tape.fill_arena()   # (the rules below read values from the arena)
        # what the first-order backward refuses (a saved value changed in place since),
        # this one refuses too
        cols = tape.cached_cols or tape.columns()
        need = autograd.make_plan(cols, tuple(acc))[0]
        autograd._check_versions(tape, need, cols[0], cols[1], cols[2])
        custom_grads = {}   # an autograd.Function's output record -> its gradient
        reach = _anomaly.reaching(tape, inputs) if checked else None
        for r in range(len(tape) - 1, -1, -1):
            g = acc.pop(r, None)
            if r in tape.custom:
                _custom_rule(tape, r, custom_grads, acc)
                continue
            if g is None:
                continue
            if r in tape.hooks:
                # its gradient is complete here: the tensor's hooks see it and may replace it
                shape, hooks = tape.hooks[r]
                g = _run_hooks(hooks, g, shape)
            if wanted is not None and (tape, r) in wanted:
                _add(results, id(wanted[(tape, r)]), g)
            if r in tape.custom_out:
                # kept for the Function's own backward, which the loop reaches below
                custom_grads[r] = g
                continue
            o = tape.op[r]
            if o == K.LEAF:
                leaf = tape.leaves[r]
                leaves[id(leaf)] = leaf
                _add(results, id(leaf), g)
                continue
            if o == K.CONST:
                continue
            if o == K.EXTERN:
                older, older_r = tape.extern(r)
                _add(seeds.setdefault(older, {}), older_r, g)
                continue
            linked = o in _LINKED_TO_INPUT
            pairs = _rule(tape, r, g)
            if checked and o not in _anomaly._HIDDEN and (reach is None or reach[r]):
                _anomaly.check_contributions(tape, r, pairs)
            for s, contribution in pairs:
                if s is not None and s >= 0 and tape.op[s] != K.CONST:
                    if linked:
                        contribution = _linked(contribution, _handle(tape, s))
                    _add(acc, s, contribution)
    return results, leaves


# Ops whose gradient PyTorch computes with a function (threshold_backward, leaky_relu_backward,
# hardtanh_backward, the shrinks', abs's sgn) whose own derivative for the input is zeros,
# not nothing: the gradient stays connected to the input.  So a parameter reached only
# through such an op's mask -- the first layer's bias in a gradient penalty of a ReLU
# network, ``grad(g.norm(), bias)`` -- gets a zero gradient there, not None, and optimizers
# with momentum or weight decay still step it.
_LINKED_TO_INPUT = frozenset([K.RELU, K.LEAKY_RELU, K.LEAKY_RELU_RESULT, K.HARDTANH,
                              K.SOFTSHRINK, K.HARDSHRINK, K.ABS])


def _linked(contribution, x):
    """``contribution`` bit for bit, recorded as also reading x (of its shape), whose
    gradient through it is exactly 0: a ``where`` whose condition is all true, which depends
    on shapes only (a replay takes it as it is)."""
    if x is None or not x.requires_grad or tuple(contribution.shape) != tuple(x.shape):
        return contribution
    return F.where(_all_true(x._value.shape), contribution, x)


def _all_true(shape):
    return Tensor._make(np.ones(shape, dtype=bool))


def _custom_rule(tape, r, custom_grads, acc):
    """An autograd.Function's record under create_graph: its backward, called with grad mode
    on, gives each input's gradient (recorded, so it is differentiated again)."""
    call = tape.custom[r]
    grads_out = [None if rec is None or rec not in custom_grads
                 else F.reshape(custom_grads.pop(rec), *shape)
                 for rec, shape in zip(call.outputs, call.out_shapes)]
    if all(g is None for g in grads_out):
        return
    if _anomaly._enabled:
        from .function import _anomaly_checked_grads
        res = _anomaly_checked_grads(tape, r, call, grads_out, True)
    else:
        res = call.input_grads(grads_out, create_graph=True)
    # the record is the cat (or clone) of the inputs' flat views: give each its part
    code = tape.op[r]
    if code == K.CAT:
        sources = [tape.aux[tape.ip[r] + 1 + 3 * j] for j in range(tape.aux[tape.ip[r]])]
    else:
        sources = [tape.a0[r]]
    for s, gi in zip(sources, res):
        if gi is not None and tape.op[s] != K.CONST:
            _add(acc, s, _flat(gi))


def _contributions_of(tape, r, g):
    """[(input record, contribution array)] of record r for gradient array g, by its
    differentiable rule, unrecorded: anomaly mode's check tells apart two inputs that share
    one gradient slot (``x / x``) by it."""
    with autograd.no_grad():
        return [(s, np.asarray(c._value)) for s, c in _rule(tape, r, Tensor._make(g.copy()))]


_anomaly.contributions = _contributions_of


def _add(store, key, g):
    prev = store.get(key)
    store[key] = g if prev is None else F.add(prev, g)


def _run_hooks(hooks, g, shape):
    """A flat recorded gradient after a tensor's hooks (run recording, as PyTorch runs them
    under create_graph)."""
    from .autograd import _hook_result
    for hook in list(hooks):
        if type(hook) is PostAccumulateHook:
            continue    # (run once .grad holds the sum: backward_create_graph)
        res = hook(F.reshape(g, *shape) if len(shape) else F.reshape(g, ()))
        if res is not None:
            _hook_result(hook, res, tuple(shape))      # (its checks)
            g = _flat(res)
    return g


def _shaped(g, shape):
    """Flat recorded gradient g in the shape of its leaf or input."""
    return _shown_as(F.reshape(g, *shape) if len(shape) else F.reshape(g, ()), g)


def _flat(t):
    """A recorded gradient (a hook's or a Function's result, a seed) as a flat view."""
    return _shown_as(F.reshape(t, -1), t)


def _shown_as(view, t):
    """``view`` of t, shown as t's node.  The differentiable backward works on flat views of
    the gradients; PyTorch's have no views between them (``x.grad.grad_fn`` of ``(x **
    3).sum()`` is its ``MulBackward0``, not a ``ViewBackward0``)."""
    tape = view._tape
    if tape is not None and t._tape is tape and view._r != t._r and \
            t._r not in tape.custom_out:
        # (the form of a further output of a node: view's grad_fn is t's node itself)
        tape.composites[view._r] = (autograd._record_class_name(tape, t._r), (), t._r, 0)
    return view


def backward_create_graph(tensors, grad_tensors, inputs):
    """``backward(create_graph=True)``: .grad of leaves become recorded tensors."""
    results, leaves = run_backward_graph(tensors, grad_tensors, inputs)
    wanted = None if inputs is None else {id(x) for x in inputs}
    for key, leaf in leaves.items():
        if wanted is not None and key not in wanted:
            continue
        if not leaf._rg:
            continue
        g = results[key]
        if leaf._hooks:
            g = _run_hooks(leaf._hooks, g, leaf._value.shape)
        g = _shaped(g, leaf._value.shape)
        # a first gradient is copied into a new buffer, as PyTorch's AccumulateGrad does
        # under create_graph (``CopyBackwards``, its inputs None and g's node)
        leaf._grad = F.recorded_copy(Tensor._make(np.zeros(leaf._value.shape)), g) \
            if leaf._grad is None else F.add(leaf._grad, g)
        if leaf._hooks:
            autograd.run_post_accumulate_hooks(leaf)   # (recording, as PyTorch runs them)


def grad_create_graph(outputs, inputs, grad_outputs, allow_unused, materialize_grads):
    results, _ = run_backward_graph(outputs, grad_outputs, inputs)
    out = []
    for x in inputs:
        g = results.get(id(x))
        if g is None:
            if not (allow_unused or materialize_grads):
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the "
                    "graph. Set allow_unused=True if this is the desired behavior.")
            out.append(Tensor._make(np.zeros(x._value.shape)) if materialize_grads else None)
        else:
            if x._tape is None and x._hooks:    # a leaf's hooks (a recorded one's ran above)
                g = _run_hooks(x._hooks, g, x._value.shape)
            out.append(_shaped(g, x._value.shape))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Transforms: forward mode and second order, compiled over a recorded tape
# ---------------------------------------------------------------------------------------------
# jvp and jacobian record ``fn`` once on a private tape and push tangents through it with the
# compiled ``tangent`` sweep (many seeds per sweep).  hvp and hessian are forward over
# reverse on the same tape: a reverse sweep, a tangent sweep, then the ``curvature`` sources
# swept back once per seed give H t.  Where the tape holds an op without a curvature rule,
# they record ``x -> grad f(x)`` with create_graph=True instead (its backward is made of
# ordinary ops) and the tangent of that gradient seeded with t is H t.  A
# ``tapegrad.compile``d function replays its tape (or the tape of its gradient) instead of
# recording again; any other function is recorded afresh on every call.

_TANGENT_BUDGET = 1 << 22   # tangent values one sweep may hold (32 MiB): bounds seeds per sweep
_MAX_CAPACITY = 1 << 28


def _plain(value):
    # np.array, not _const's ascontiguousarray: that turns a 0-d result into shape (1,)
    return Tensor._make(np.array(value, dtype=np.float64))


def _as_input(x):
    from .creation import tensor
    v = x._value if isinstance(x, Tensor) else tensor(x)._value
    return Tensor._make(np.array(v, dtype=np.float64), True)


def _as_array(v, like, what):
    """v as a float64 array of ``like``'s shape; a mismatch names both shapes."""
    from .creation import tensor
    a = v._value if isinstance(v, Tensor) else tensor(v)._value
    if a.shape != like._value.shape:
        raise ValueError(f"{what} has shape {tuple(a.shape)} but its input has shape "
                         f"{tuple(like._value.shape)}: they must match")
    return np.asarray(a, dtype=np.float64)


def _record(fn, xs, consts=(), functions=False):
    """Run fn(*xs, *consts) recording on a private tape large enough to hold all of it
    (``consts``: further arguments, which are not differentiated).

    Returns (tape, result).  The tape is finished: nothing else records on it.  It records
    under a trace, as ``compile`` does, so that compiled functions called inside run eagerly
    onto this tape instead of replaying on tapes of their own."""
    from .autograd import enable_grad
    from .replay import Trace
    from .tape import Tape, _tape_ids
    trace = state.trace
    if trace is not None:
        # the values computed here are plain numbers to a trace, which could not replay them
        trace.opaque("forward-mode or second-order transforms inside the traced call")
    capacity = 1 << 22   # pages of the arena are only touched as records fill them
    while True:
        mark = next(_tape_ids)
        tape = Tape(capacity)
        prev_tape, prev_trace = state.tape, state.trace
        state.tape, state.trace = tape, Trace(tape)
        try:
            with enable_grad():
                out = fn(*xs, *consts)
            ended_on = state.tape
        finally:
            state.tape, state.trace = prev_tape, prev_trace
        if ended_on is tape and not tape.finished:
            break
        if tape.finished or capacity >= _MAX_CAPACITY:
            # a backward() inside fn, or a tape beyond the arena limit: later ops went to
            # other tapes, which the tangent sweep cannot follow
            raise RuntimeError("the function could not be recorded on one tape (it calls "
                               "backward(), or records more than 2**28 values)")
        capacity *= 4   # the recording outgrew its arena: record again with more room
    tape.finished = True
    if tape.custom and not functions:
        name = next(iter(tape.custom.values())).cls.__name__
        raise RuntimeError(
            "reverse-mode and second-order transforms (jacobian, jacrev, hessian, hvp) of a "
            f"function that uses an autograd.Function ({name}) are not supported yet: its "
            "backward is Python, which the compiled sweeps cannot run (forward mode -- jvp, "
            "jacfwd -- runs its jvp)")
    if _escaped(tape, out, mark):
        raise RuntimeError("the function computes its result partly on another tape (a "
                           "tensor recorded during the call outside it), which the tangent "
                           "sweep cannot follow")
    return tape, out


def _escaped(tape, out, mark):
    """Whether a tape started during the call (id > mark) feeds ``tape`` or holds a result:
    the inputs may reach the result through it, and one sweep over ``tape`` would miss that.
    Tapes older than the call cannot hold the fresh inputs."""
    if any(older_id > mark for older_id, _ in tape.externs.values()):
        return True
    flat = list(out) if isinstance(out, (tuple, list)) else [out]
    return any(isinstance(o, Tensor) and o._tape is not None and o._tape is not tape and
               o._tape.id > mark for o in flat)


def _run(fn, xs, derive=None, consts=(), functions=False):
    """(tape, result) of ``fn(*xs, *consts)``, or of ``derive(fn.fn)(*xs)`` with ``derive``
    (then without ``consts``).

    A compiled ``fn`` (``tapegrad.compile``) replays: the derived function is compiled once
    and kept on ``fn``, and guards re-record where Python branches on values.  Anything
    else is recorded afresh on a private tape."""
    from .replay import Compiled
    if derive is not None and consts:
        raise ValueError("internal error: a derived function takes no further arguments")
    if isinstance(fn, Compiled):
        if derive is None:
            target = fn
        else:
            store = fn.__dict__.setdefault("_derived", {})
            target = store.get(derive)
            if target is None:
                from .replay import compile as compile_
                target = store[derive] = compile_(derive(fn.fn),
                                                  max_signatures=fn.max_signatures,
                                                  max_variants=fn.max_variants)
        got = _replayed(target, xs, consts)
        if got is not None:
            return got
        fn = fn.fn
    return _record(fn if derive is None else derive(fn), xs, consts, functions)


def _replayed(compiled, xs, consts=()):
    """Call a compiled function; (tape, result) when every recorded output and every input
    is on one tape (else None: the caller records privately)."""
    trace = state.trace
    if trace is not None:
        trace.opaque("forward-mode or second-order transforms inside the traced call")
    mark = next(_tape_ids)
    state.trace = None
    try:
        with autograd.enable_grad():
            out = compiled(*xs, *consts)
    finally:
        state.trace = trace
    flat = list(out) if isinstance(out, (tuple, list)) else [out]
    tapes = {id(o._tape): o._tape for o in flat if isinstance(o, Tensor) and o._tape is not None}
    if len(tapes) != 1:
        return None
    (tape,) = tapes.values()
    if any(not _leaf_records(tape, x) for x in xs) or _escaped(tape, out, mark):
        return None
    return tape, out


def _flat_outputs(out, name):
    if isinstance(out, Tensor):
        return [out], False
    if isinstance(out, (tuple, list)) and all(isinstance(o, Tensor) for o in out):
        return list(out), True
    raise TypeError(f"{name}: the function must return a tensor or a tuple of tensors, got "
                    f"{type(out).__name__}")


def _leaf_records(tape, x):
    return [r for r, leaf in tape.leaves.items() if leaf is x]


def _filled(tape):
    """``tape``'s value arena with every value in it: the passes here read the arena as it
    is, while an eager tape may read large constants where they are or leave broadcasts
    unfilled (``Tape.fill_arena``) -- a compiled function that ran eagerly hands one here."""
    if tape.ext_refs is not None or tape.unfilled is not None:
        tape.fill_arena()
    return tape.vals


def _function_tangents(call, c, rows, dep, voff, size):
    """Write the tangents of an autograd.Function's outputs (``call``, custom record c, whose
    value is its inputs' values side by side) from ``jvp(ctx, *input tangents)``, per seed."""
    if not dep[c]:
        return   # no input depends on a seed: the outputs' tangents stay zero
    ctx = call.ctx
    places, at = {}, 0
    for i, x in call.inputs:
        places[i] = (at, x._value.shape)
        at += x._value.size
    for s in range(rows.shape[0]):
        tangents = []
        for i, a in enumerate(call.args):
            if i in places:
                at, shape = places[i]
                n = math.prod(shape)
                tangents.append(Tensor._make(rows[s, voff[c] + at:voff[c] + at + n]
                                             .reshape(shape).copy()))
            elif isinstance(a, Tensor) and ctx.materialize_grads:
                tangents.append(Tensor._make(np.zeros(a._value.shape)))
            else:
                tangents.append(None)
        with autograd.no_grad():
            res = call.cls.jvp(ctx, *tangents)
        res = res if isinstance(res, tuple) else (res,)
        if len(res) != len(call.outputs):
            raise RuntimeError(f"function {call.cls.__name__}.jvp returned an incorrect "
                               f"number of forward gradients (expected {len(call.outputs)}, "
                               f"got {len(res)})")
        for rec, shape, t in zip(call.outputs, call.out_shapes, res):
            if rec is None:
                continue
            part = rows[s, voff[rec]:voff[rec] + size[rec]]
            if t is None:
                part[:] = 0.0
                continue
            value = np.asarray(t._value if isinstance(t, Tensor) else t, dtype=np.float64)
            if value.shape != tuple(shape):
                raise RuntimeError(f"function {call.cls.__name__}.jvp returned a tangent of "
                                   f"shape {list(value.shape)} for an output of shape "
                                   f"{list(shape)}")
            part[:] = value.reshape(-1)
    for rec in call.outputs:
        if rec is not None:
            dep[rec] = 1


def _tangents(tape, seeds, outs, n_seeds, tans=None):
    """Tangents of ``outs`` (tensors) for ``n_seeds`` seeds, one compiled sweep.

    ``seeds`` is a list of (input tensor, array (n_seeds, input size)).  Returns one array
    (n_seeds, output size) per output.  ``tans``: an arena of n_seeds * tape.top values to
    sweep in, zeros or what an earlier call on this tape with the same inputs seeded left
    there (see ``compressed.tangent_products``); a new zeroed one by default."""
    cols = tape.columns()
    op, a0, a1, voff, size, ip, fp, aux, faux = cols
    stride = tape.top
    dep = np.zeros(len(op), dtype=np.uint8)
    if tans is None:
        tans = np.zeros(n_seeds * stride)
    rows = tans.reshape(n_seeds, stride)
    for x, s in seeds:
        for r in _leaf_records(tape, x):
            dep[r] = 1
            rows[:, voff[r]:voff[r] + size[r]] = s
    lo = 0
    # an autograd.Function's outputs get their tangents from its jvp, in Python: the sweep
    # stops before them and goes on after (it passes over records already marked in dep)
    for c, call in sorted(tape.custom.items()):
        outputs = [r for r in call.outputs if r is not None]
        if not outputs:
            continue
        bad = K.tangent(op, a0, a1, voff, size, ip, fp, aux, faux, _filled(tape), tans, n_seeds,
                        stride, dep, lo, min(outputs))
        if bad >= 0:
            raise RuntimeError(f"internal error: opcode {op[bad]} has no tangent rule")
        _function_tangents(call, c, rows, dep, voff, size)
        lo = min(outputs)
    bad = K.tangent(op, a0, a1, voff, size, ip, fp, aux, faux, _filled(tape), tans, n_seeds,
                    stride, dep, lo, len(op))
    if bad >= 0:
        raise RuntimeError(f"internal error: opcode {op[bad]} has no tangent rule")
    result = []
    for o in outs:
        n = o._value.size
        if o._tape is tape:
            off = voff[o._r]
            result.append(rows[:, off:off + n].copy())
            continue
        # not recorded here: one of the inputs handed back, or a constant
        t = np.zeros((n_seeds, n))
        for x, s in seeds:
            if o is x:
                t += s
        result.append(t)
    del cols, op, a0, a1, voff, size, ip, fp, aux, faux
    return result


def _seeds_per_sweep(tape, n):
    return max(1, min(n, _TANGENT_BUDGET // max(tape.top, 1)))


def _unit_columns(tape, x, out):
    """d out / d x as an array (out.size, x.size), by vector-mode tangent sweeps."""
    n = x._value.size
    m = out._value.size
    jac = np.zeros((m, n))
    chunk = _seeds_per_sweep(tape, n)
    for lo in range(0, n, chunk):
        k = min(chunk, n - lo)
        seed = np.zeros((k, n))
        seed[np.arange(k), lo + np.arange(k)] = 1.0
        (t,) = _tangents(tape, [(x, seed)], [out], k)
        jac[:, lo:lo + k] = t.T
    return jac


def _unit_rows(tape, x, out):
    """d out / d x as an array (out.size, x.size), one compiled reverse sweep per row."""
    n = x._value.size
    m = out._value.size
    jac = np.zeros((m, n))
    if out._tape is not tape:
        if out is x:
            jac[:] = np.eye(n)
        return jac
    cols = tape.columns()
    op, a0, a1, voff, size, ip, fp, aux, faux = cols
    n_rec = len(op)
    need = np.empty(n_rec, dtype=np.uint8)
    goff = np.empty(n_rec, dtype=np.int64)
    r_out = out._r
    total, _, _ = K.plan(op, a0, a1, size, ip, aux, np.array([r_out], dtype=np.int64), n_rec,
                      need, goff)
    grads = np.zeros(max(total, 1))
    leaves = [r for r in _leaf_records(tape, x) if need[r]]
    for i in range(m):
        grads[:total] = 0.0
        grads[goff[r_out] + i] = 1.0
        bad = K.sweep(op, a0, a1, voff, goff, size, ip, fp, aux, faux, _filled(tape), NO_EXT,
                      grads, need, r_out + 1, 0, 0)
        if bad >= 0:
            raise RuntimeError(f"internal error: opcode {op[bad]} has no backward rule")
        for r in leaves:
            jac[i] += grads[goff[r]:goff[r] + n]
    del cols, op, a0, a1, voff, size, ip, fp, aux, faux
    return jac


def jvp(fn, primals, tangents):
    """``(fn(*primals), J tangents)``, in forward mode: one compiled tangent sweep.

    ``primals`` and ``tangents`` are tensors (or tuples of them) of equal shapes; the
    outputs are a tensor or a tuple of tensors as ``fn`` returns, as in
    ``torch.autograd.functional.jvp``.

    Shape: each tangent has its primal's shape; the jvp has the output's shape.

    Example:
        >>> tg.jvp(lambda v: v ** 2, tg.tensor([1.0, 2.0]), tg.tensor([1.0, 1.0]))
        (tensor([1., 4.]), tensor([2., 4.]))
    """
    many = isinstance(primals, (tuple, list))
    primals = tuple(primals) if many else (primals,)
    tangents = tuple(tangents) if isinstance(tangents, (tuple, list)) else (tangents,)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    xs = [_as_input(p) for p in primals]
    seeds = [(x, _as_array(t, x, f"jvp: tangent {j}").reshape(1, -1))
             for j, (x, t) in enumerate(zip(xs, tangents))]
    tape, out = _run(fn, xs, functions=True)
    outs, is_tuple = _flat_outputs(out, "jvp")
    tans = _tangents(tape, seeds, outs, 1)
    values = [Tensor._make(np.array(o._value)) for o in outs]
    jv = [_plain(t.reshape(o._value.shape)) for t, o in zip(tans, outs)]
    if is_tuple:
        return tuple(values), tuple(jv)
    return values[0], jv[0]


def jacobian(fn):
    """``fn(x) -> y`` becomes ``x -> J`` of shape y.shape + x.shape.

    Over one recorded tape: vector-mode tangent sweeps (one column per seed, many seeds per
    sweep) when x has fewer elements than y, else one compiled reverse sweep per element of
    y; both cost about min(x.size, y.size) passes over the tape.

    Example:
        >>> J = tg.jacobian(lambda v: v.sin() * 2)(tg.tensor([0.0, 1.0, 2.0]))
        >>> J.shape
        tapegrad.Size([3, 3])
        >>> J[0]
        tensor([2., 0., 0.])
    """
    def run(x):
        x = _as_input(x)
        tape, y = _run(fn, [x])
        if not isinstance(y, Tensor):
            raise TypeError(f"jacobian: the function must return a tensor, got "
                            f"{type(y).__name__}")
        if x._value.size < y._value.size:
            jac = _unit_columns(tape, x, y)
        else:
            jac = _unit_rows(tape, x, y)
        return _plain(jac.reshape(y._value.shape + x._value.shape))
    return run


def _gradient_of(fn):
    """x -> grad fn(x), recorded (create_graph): None where fn does not depend on x."""
    from .autograd import grad

    def gradient(x):
        y = fn(x)
        _single_element(y)
        if not y._rg:
            return None
        (g,) = grad(y, x, create_graph=True, allow_unused=True, materialize_grads=True)
        return g
    return gradient


def _record_gradient(fn, x):
    """(tape, gradient or None) of fn at x, recorded once or replayed (see _run)."""
    return _run(fn, [x], _gradient_of)


def _single_element(y):
    if not isinstance(y, Tensor) or y._value.size != 1:
        shape = tuple(y.shape) if isinstance(y, Tensor) else type(y).__name__
        raise RuntimeError(f"the function must return a tensor with a single element for hvp "
                           f"and hessian, got {shape}")


def _curvature(tape, x, y, seeds, tans=None):
    """H t for each row t of ``seeds`` (k, x.size), as an array (k, x.size): a compiled
    reverse sweep of the tape of y = fn(x), a tangent sweep, the curvature sources, and a
    reverse sweep of those per seed.  None when the tape holds an op without a curvature
    rule.  ``tans``: the tangent arena, as ``_tangents`` takes it."""
    cols = tape.columns()
    op, a0, a1, voff, size, ip, fp, aux, faux = cols
    n_rec = len(op)
    n = x._value.size
    k = seeds.shape[0]
    r_out = y._r
    need = np.empty(n_rec, dtype=np.uint8)
    goff = np.empty(n_rec, dtype=np.int64)
    total, _, _ = K.plan(op, a0, a1, size, ip, aux, np.array([r_out], dtype=np.int64), n_rec,
                      need, goff)
    leaves = [r for r in _leaf_records(tape, x) if need[r]]
    if not leaves:
        return np.zeros((k, n))
    grads = np.zeros(total)
    grads[goff[r_out]] = 1.0
    bad = K.sweep(op, a0, a1, voff, goff, size, ip, fp, aux, faux, _filled(tape), NO_EXT, grads,
                  need, r_out + 1, 0, 0)
    if bad >= 0:
        raise RuntimeError(f"internal error: opcode {op[bad]} has no backward rule")
    stride = tape.top
    dep = np.zeros(n_rec, dtype=np.uint8)
    if tans is None:
        tans = np.zeros(k * stride)
    rows = tans.reshape(k, stride)
    for r in leaves:
        dep[r] = 1
        rows[:, voff[r]:voff[r] + n] = seeds
    bad = K.tangent(op, a0, a1, voff, size, ip, fp, aux, faux, _filled(tape), tans, k, stride,
                    dep, 0, r_out + 1)
    if bad >= 0:
        raise RuntimeError(f"internal error: opcode {op[bad]} has no tangent rule")
    dgrads = np.zeros((k, total))
    bad = K.curvature(op, a0, a1, voff, goff, size, ip, fp, aux, faux, _filled(tape), grads, tans,
                      stride, dgrads, need, r_out + 1, 0)
    if bad < 0:
        for s in range(k):
            K.sweep(op, a0, a1, voff, goff, size, ip, fp, aux, faux, _filled(tape), NO_EXT,
                    dgrads[s], need, r_out + 1, 0, 0)
    del cols, op, a0, a1, voff, size, ip, fp, aux, faux
    if bad >= 0:
        return None
    if len(leaves) == 1:
        return dgrads[:, goff[leaves[0]]:goff[leaves[0]] + n]   # (no copy: callers copy)
    return sum(dgrads[:, goff[r]:goff[r] + n] for r in leaves)


def _hessian_times(fn, x, seeds):
    """H t for each row t of ``seeds`` (k, x.size) (see _value_and_hessian_times)."""
    return _value_and_hessian_times(fn, x, seeds)[1]


def _value_and_hessian_times(fn, x, seeds):
    """(fn(x) as an array, H t for each row t of ``seeds`` (k, x.size)).

    Forward over reverse on the tape of fn alone (the compiled ``curvature`` sweep) where it
    has a rule for every op; otherwise a tangent sweep over the recorded create_graph
    gradient."""
    k, n = seeds.shape
    tape, y = _run(fn, [x])
    _single_element(y)
    value = np.array(y._value)
    if not y._rg or y._tape is not tape:
        return value, np.zeros((k, n))
    out = np.zeros((k, n))
    chunk = max(1, min(k, _TANGENT_BUDGET // max(tape.top + len(tape), 1)))
    for lo in range(0, k, chunk):
        hv = _curvature(tape, x, y, seeds[lo:lo + chunk])
        if hv is None:
            break
        out[lo:lo + chunk] = hv
    else:
        return value, out
    del tape, y
    tape, g = _record_gradient(fn, x)
    if g is None:
        return value, np.zeros((k, n))
    chunk = _seeds_per_sweep(tape, k)
    for lo in range(0, k, chunk):
        (out[lo:lo + chunk],) = _tangents(tape, [(x, seeds[lo:lo + chunk])], [g],
                                          min(chunk, k - lo))
    return value, out


def hvp(fn, x, v):
    """H(x) v for a scalar ``fn``, of shape x.shape, by forward over reverse (see
    _hessian_times).  Only the product is returned (PyTorch's ``hvp`` returns the output too).

    Shape: ``x`` and ``v`` of one shape -> that shape.

    Example:
        >>> tg.hvp(lambda v: (v ** 3).sum(), tg.tensor([1.0, 2.0]), tg.tensor([1.0, 0.0]))
        tensor([6., 0.])
    """
    x = _as_input(x)
    v = _as_array(v, x, "hvp: v")
    hv = _hessian_times(fn, x, v.reshape(1, -1))
    return _plain(hv.reshape(x._value.shape))


def hessian(fn):
    """``fn(x) -> scalar`` becomes ``x -> H`` of shape x.shape + x.shape, by forward over
    reverse with all unit seeds, many per sweep (see _hessian_times).

    Example:
        >>> tg.hessian(lambda v: (v ** 3).sum())(tg.tensor([1.0, 2.0]))
        tensor([[ 6.,  0.],
                [ 0., 12.]])
    """
    def run(x):
        x = _as_input(x)
        n = x._value.size
        hess = _hessian_times(fn, x, np.eye(n)).T
        return _plain(hess.reshape(x._value.shape + x._value.shape))
    return run


# the driver runs create_graph through its seam (autograd.ABOVE): it sits below this module
autograd.ABOVE.backward_create_graph = backward_create_graph
autograd.ABOVE.grad_create_graph = grad_create_graph
autograd.ABOVE.stack = F.stack
