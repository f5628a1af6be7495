"""The engine of ``tapegrad.func`` and ``tapegrad.autograd.functional``: a function of many
tensors differentiated as a function of one flat vector, in one of two ways.

* Constant results (the usual case): the function is recorded once on a private tape as a
  function of one flat leaf holding all the differentiated inputs, its outputs joined into
  one flat vector, and ``higher``'s compiled sweeps run over that tape: reverse sweeps for
  Jacobian rows, tangent sweeps for Jacobian columns and JVPs, forward over reverse for
  Hessian products.  Gradients of a single output come from the compiled backward of
  ``autograd.grad``.
* Recorded results, differentiable again: when an input is itself tracked by an outer
  computation (it requires grad: nested transforms, ``create_graph=True``) or the function
  reads a tensor that requires grad besides its inputs (a model parameter it closes over),
  the results must carry a graph, as PyTorch's do.  Then each input is replaced by a
  recorded copy (so that this transform differentiates with respect to the copy alone while
  outer ones still reach the input) and the gradients come from ``autograd.grad`` with
  ``create_graph=True``; forward-mode products use the double-backward trick.
"""
import numpy as np

from . import autograd, higher
from . import functional as F
from .tape import state
from .tensor import Tensor


def check_inputs(leaves):
    """The differentiated inputs must be floating-point tensors (PyTorch's errors)."""
    for x in leaves:
        if not isinstance(x, Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
        if x._value.dtype.kind != "f":
            raise RuntimeError("only Tensors of floating point dtype can require gradients")


def stand_in(x):
    """What a transform differentiates with respect to in place of input ``x``: a recorded
    copy of an input that requires grad (results stay differentiable with respect to ``x``
    for an outer transform or backward), else a fresh leaf holding ``x``'s value."""
    if x._rg:
        return F.clone(x)
    return Tensor._make(x._value, True)


def constant(t):
    """``t``'s value as a tensor that requires no grad (not ``detach()``, which a compile
    trace would take for a Python read of the value)."""
    return Tensor._make(t._value)


def zeros_like(x):
    return Tensor._make(np.zeros(x._value.shape))


def depends_on_others(outputs, inputs):
    """Whether ``outputs`` are computed from a tensor that requires grad other than
    ``inputs``: a parameter the function closes over, or the result of an outer
    computation.  Found by planning a backward (no sweep, no hooks) tape by tape."""
    ours = {id(x) for x in inputs}
    pending = {}
    for o in outputs:
        if not (isinstance(o, Tensor) and o._rg):
            continue
        if o._tape is None:
            if id(o) not in ours:
                return True
            continue
        pending.setdefault(o._tape, set()).add(o._r)
    while pending:
        tape = max(pending, key=lambda tp: tp.id)
        seeds = sorted(pending.pop(tape))
        cols = tape.cached_cols or tape.columns()
        need = autograd.make_plan(cols, seeds)[0]
        del cols   # column views lock the tape's arrays against growth
        for r, leaf in tape.leaves.items():
            if need[r] and leaf._rg and id(leaf) not in ours:
                return True
        for r in tape.externs:
            if need[r]:
                older, older_r = tape.extern(r)
                pending.setdefault(older, set()).add(older_r)
    return False


def reverse(outputs, cotangents, inputs, graph, retain=True):
    """The gradient of ``sum(<output_i, cotangent_i>)`` with respect to each of ``inputs``
    (None for an input no output reaches); recorded (differentiable) with ``graph``.

    ``retain=False`` lets the backward release the tape (later records start a new one, as
    after ``backward()``): for a single use of constant results.  The graph is kept anyway
    while a trace records (an outer transform or ``compile`` is still recording on that
    tape)."""
    pairs = [(o, c) for o, c in zip(outputs, cotangents) if o is not None and o._rg]
    if not pairs:
        return [None] * len(inputs)
    outs, cots = zip(*pairs)
    retain = retain or graph or state.trace is not None
    with autograd.enable_grad():
        return list(autograd.grad(outs, inputs, cots, retain_graph=retain, create_graph=graph,
                                  allow_unused=True))


# ---------------------------------------------------------------------------------------------
# Constant results: one flat vector in, one flat vector out, compiled sweeps
# ---------------------------------------------------------------------------------------------
def _pack(leaves):
    """A fresh leaf holding the values of ``leaves`` one after the other."""
    return Tensor._make(np.concatenate([np.asarray(x._value, dtype=np.float64).reshape(-1)
                                        for x in leaves]), True)


def _unpack(flat, like):
    """Recorded pieces of the flat vector ``flat`` with the shapes of ``like``."""
    pieces, offset = [], 0
    for x in like:
        n = x._value.size
        pieces.append(F.reshape(F.getitem(flat, slice(offset, offset + n)), x._value.shape))
        offset += n
    return pieces


def _split(array, like):
    """A flat array (or the last axis of one) cut into arrays of the shapes of ``like``."""
    out, offset = [], 0
    for x in like:
        n = x._value.size
        out.append(array[..., offset:offset + n])
        offset += n
    return out


class Recorded:
    """``fn(*pieces) -> list of tensors`` recorded once on a private tape as a function of
    one flat leaf holding ``leaves``; ``outputs`` are the function's outputs (their values
    copied out of the private arena).  ``forward_only``: only tangent sweeps will run over the
    tape (jvp, jacfwd), so autograd.Functions with a jvp may be on it."""

    def __init__(self, fn, leaves, forward_only=False):
        self.leaves = leaves
        held = {}

        def flat(x):
            outs = fn(*_unpack(x, leaves))
            held["outs"] = outs
            return F.cat([F.reshape(o, -1) for o in outs])

        self.x = _pack(leaves)
        # functions: autograd.Functions on the tape, which only the tangent sweeps can run
        # (through their jvp)
        self.tape, self.y = higher._run(flat, [self.x], functions=forward_only)
        self.raw_outputs = held["outs"]
        self.outputs = [Tensor._make(np.array(o._value)) for o in self.raw_outputs]

    def needs_graph(self):
        """Whether the function read a tensor that requires grad besides its inputs."""
        return depends_on_others([self.y], [self.x])

    def jacobian(self, forward):
        """[[d out_i / d leaf_j as a tensor of shape out_i.shape + leaf_j.shape]]: tangent
        sweeps (``forward``) or reverse sweeps over the tape."""
        full = (higher._unit_columns if forward else higher._unit_rows)(self.tape, self.x,
                                                                         self.y)
        return blocks(full, self.outputs, self.leaves)

    def jvp(self, tangents):
        """J t for the tangents (one array per leaf), one tensor per output."""
        seed = np.concatenate([np.asarray(t, dtype=np.float64).reshape(-1) for t in tangents])
        (out,) = higher._tangents(self.tape, [(self.x, seed.reshape(1, -1))], [self.y], 1)
        return [Tensor._make(np.array(part).reshape(o._value.shape))
                for part, o in zip(_split(out[0], self.outputs), self.outputs)]


def blocks(full, row_like, col_like):
    """The (m, n) array ``full`` cut into tensors of shapes ``row_i.shape + col_j.shape``
    (m and n the total sizes of ``row_like`` and ``col_like``), as nested lists."""
    out = []
    for rows, r in zip(_split(full.T, row_like), row_like):
        out.append([Tensor._make(np.array(part).reshape(r._value.shape + c._value.shape))
                    for part, c in zip(_split(rows.T, col_like), col_like)])
    return out


def hessian_products(fn, leaves, seeds):
    """(fn's value, H t for each row t of ``seeds`` (k, total size)) of a function of one
    element, by ``higher``'s compiled forward over reverse on the flat vector of ``leaves``."""
    x = _pack(leaves)
    value, products = higher._value_and_hessian_times(lambda flat: fn(*_unpack(flat, leaves)),
                                                      x, seeds)
    return value, products


def split_flat(array, like):
    """Tensors of the shapes of ``like`` cut from a flat array."""
    return [Tensor._make(np.array(part).reshape(x._value.shape))
            for part, x in zip(_split(array, like), like)]


# ---------------------------------------------------------------------------------------------
# Recorded results: autograd.grad with create_graph
# ---------------------------------------------------------------------------------------------
def jacobian_by_rows(outputs, inputs, graph):
    """(blocks, reached): blocks[i][j] is d out_i / d in_j (shape out_i.shape + in_j.shape),
    one backward per element of each output; reached[i][j] whether out_i depends on in_j."""
    blocks, reached = [], []
    for o in outputs:
        m = o._value.size
        rows = [[] for _ in inputs]
        hit = [False] * len(inputs)
        for k in range(m):
            seed = np.zeros(m)
            seed[k] = 1.0
            grads = reverse([o], [Tensor._make(seed.reshape(o._value.shape))], inputs, graph)
            for j, (g, x) in enumerate(zip(grads, inputs)):
                hit[j] = hit[j] or g is not None
                rows[j].append(zeros_like(x) if g is None else g)
        per_input = []
        for rows_j, x in zip(rows, inputs):
            shape = o._value.shape + x._value.shape
            per_input.append(F.reshape(F.stack(rows_j, 0), shape) if rows_j else
                             Tensor._make(np.zeros(shape)))
        blocks.append(per_input)
        reached.append(hit)
    return blocks, reached


def jvp_by_double_backward(outputs, inputs, tangents, graph):
    """J t for each output, from reverse mode alone: ``g(u) = J^T u`` is linear in ``u``,
    and its gradient with respect to ``u`` along ``t`` is ``J t``.  Returns (products, None
    where an output does not depend on the inputs)."""
    dummies = [Tensor._make(np.zeros(o._value.shape), True) for o in outputs]
    with autograd.enable_grad():
        back = reverse(outputs, dummies, inputs, graph=True)
        pairs = [(b, t) for b, t in zip(back, tangents) if b is not None and b._rg]
        if not pairs:
            return [None] * len(outputs)
        bs, ts = zip(*pairs)
        return list(autograd.grad(bs, dummies, ts, retain_graph=True, create_graph=graph,
                                  allow_unused=True))
