"""Eager forwards: compute an op's value with NumPy and append its record to the tape.

Every op checks its arguments first and records last, so a bad call raises before the
tape is touched.  When no input requires grad (or grad mode is off) nothing is recorded:
the result is a plain tensor owning its NumPy value.

This module is kept apart from ``ops`` on purpose: editing a forward must not invalidate
the compiled sweep's on-disk cache.
"""
import builtins
import functools
import math
import numbers
import re
import warnings
import weakref

import numpy as np

from . import _anomaly, _device, _dtype, _frames, _promote
from . import ops as K
from .ops import activation as _activation
from .ops import elementwise as _elementwise
from ._argtypes import not_tensor as _not_tensor
from ._quiet import QUIET, QUIET_RESET, QUIET_SET, quiet_begin, quiet_end
from . import tape as _tape_module
from .tape import recording_tape, state
from .return_types import return_type
from .tensor import Tensor, _wrap_dim, check_history, read_value
from .views import _EXPOSED, ViewOf, note_view, numpy_holds, strided_view

_F64 = np.dtype(np.float64)

# ---------------------------------------------------------------------------------------------
# Recording helpers
# ---------------------------------------------------------------------------------------------


def _plain(value):
    return Tensor._make(value)


def _records(*ts):
    """Whether an op on these tensors is recorded."""
    for t in ts:
        if t is not None and t._rg:
            if state.grad_enabled:
                return True
            if state.trace is not None:
                state.trace.opaque("an op under no_grad on traced values")
            return False
    return False



def _changed_since_copied(tape, r, v):
    """Whether record r's copy of a leaf differs from the leaf's value ``v`` now, bit for
    bit."""
    off = tape.voff[r]
    kept = tape.vals[off:off + v.size]
    now = np.ascontiguousarray(v, dtype=np.float64).reshape(-1)
    return not np.array_equal(kept.view(np.int64), now.view(np.int64))


def _value_ref(v):
    """A reference to the array a leaf's copy on a tape was made from: weak, as the tape must
    not keep it alive; a NumPy scalar (a leaf made from one element of an array), which
    takes no weak reference and cannot change in place, is held itself."""
    try:
        return weakref.ref(v)
    except TypeError:
        return lambda: v


def _copy_holds(tape, hit, x, v):
    """Whether ``hit`` (record, version, reference to the array copied) is a copy on ``tape``
    that still holds tensor x's values ``v``: the same version, the same array (``w.data =
    new`` changes no version), and, for memory NumPy was handed, whose writes change no
    version, the same values."""
    return hit is not None and hit[1] == x._version and hit[2]() is v and not (
        _EXPOSED and numpy_holds(x) and _changed_since_copied(tape, hit[0], v))


def _ref(tape, x):
    """The record on ``tape`` that holds x's value, importing x if it lives elsewhere."""
    if x._tape is tape:
        return x._r
    v = x._value
    n = v.size
    if x._tape is None:
        if x._rg:
            if x._alias is not None:
                check_history(x)
            key = id(x)
            hit = tape.leaf_rec.get(key)
            if hit is not None and hit[1] == x._version and hit[2]() is v:
                if len(hit) > 3:
                    # read where it is so far, by matrix products (_leaf_in_place): this
                    # reader takes the arena, which gets its values now
                    tape.read_from_arena(hit[0], x)
                    tape.leaf_rec[key] = hit[:3]
                    return hit[0]
                if not _EXPOSED or _copy_holds(tape, hit, x, v):
                    return hit[0]     # a leaf read again is read from its copy
            if hit is not None:
                tape.supersede_leaf(hit)
            off = tape.top
            tape.top = off + n
            if v.ndim:
                tape.vals[off:off + n] = v.reshape(-1)
            else:
                # a number (a scalar parameter): one store; the slice and the reshape were
                # a fifth of its import, which each step of a scalar-parameter model pays
                tape.vals[off] = v
            r = tape.push(K.LEAF, -1, -1, off, n)
            tape.leaves[r] = x
            tape.leaf_rec[key] = (r, x._version, _value_ref(v))
            return r
        eager = state.trace is None
        if eager:
            # so is a constant, in eager mode: data read by several ops (a feature matrix
            # two layers read, the x of x * a + x * b) was copied into the arena at each
            hit = tape.const_rec.get(id(x))
            if hit is not None and hit[1] == x._version and hit[2]() is v and (
                    not _EXPOSED or _copy_holds(tape, hit, x, v)):
                return hit[0]
        else:
            state.trace.read_constant(x)   # (a replay merges equal records itself)
        off = tape.top
        tape.top = off + n
        if v.ndim:
            tape.vals[off:off + n] = v.reshape(-1)
        else:
            tape.vals[off] = v      # (a number: one store, as a leaf's above)
        r = tape.push(K.CONST, -1, -1, off, n)
        if eager:
            tape.const_rec[id(x)] = (r, x._version, _value_ref(v))
        # checked by the backward as PyTorch checks the operand it saved: a change in place
        # since (by version) is refused where the backward reads this copy
        tape.consts.append((r, x, x._version, v.shape) if x._alias is None
                           else _constant_entry(r, x, v.shape))
        return r
    key = (x._tape.id, x._r)
    hit = tape.extern_rec.get(key)
    if hit is not None and hit[1] == x._version:
        return hit[0]
    # (a copy made before an in-place change under no_grad holds the old values)
    off = tape.alloc(n)
    tape.vals[off:off + n] = v.reshape(-1)
    r = tape.push(K.EXTERN, -1, -1, off, n)
    tape.add_extern(r, x)
    tape.extern_rec[key] = (r, x._version)
    return r


def check_addmm_dtypes(input, mat1, mat2):  # noqa: A002 - PyTorch's argument name
    """PyTorch's addmm error for operands of other dtypes than mat2's, in its order (the
    added tensor, then mat1): ``nn.Linear`` of an integer input raises it, where a product
    without the bias raises matmul's."""
    for name, t in (("self", input), ("mat1", mat1)):
        if isinstance(t, Tensor) and t.dtype != mat2.dtype:
            raise RuntimeError(f"{name} and mat2 must have the same dtype, but got "
                               f"{t.dtype.scalar_name} and {mat2.dtype.scalar_name}")


def _constant_entry(r, x, shape):
    """``Tape.consts``' entry for record r, a copy of tensor x (of ``shape``): the tensor
    whose version the backward compares -- x, or the base x is a view of, which every
    change of x or of another view of that base counts (PyTorch's views share their base's
    version counter).  The base, not the view: a tape keeping a view alive would make each
    write into the base update it.  It is held as PyTorch's graph holds what it saved (a
    change made before it is dropped must still be seen)."""
    link = x._alias
    root = link.root if link is not None and type(link) is ViewOf else None
    holder = x if root is None else root
    return (r, holder, holder._version, shape)


def named_node(result, name, *inputs):
    """``result`` of an op built from other recorded ops, shown as PyTorch's one node for it:
    its ``grad_fn`` is called ``name``, and its ``next_functions`` are those of ``inputs``
    (the op's tensor operands in PyTorch's order; a number or None, for an operand PyTorch
    lists as None).  The records it is made of are swept as before; only what the graph
    shows changes.  A result that is one of its inputs (handed back unchanged) is left as
    it is."""
    tape = result._tape
    if tape is None:
        return result
    r = result._r
    refs = tuple([_input_ref(tape, t) for t in inputs])
    for ref in refs:
        if type(ref) is int and ref >= r:
            return result
    tape.composites[r] = (name, refs)
    return result


def named_outputs(results, name, *inputs):
    """``results`` (a tuple of tensors: the outputs of one op built from other recorded
    ops) shown as PyTorch's one node with several outputs (``std_mean``, ``aminmax``): every
    output's ``grad_fn`` is the same node, called ``name``, listing the ``inputs``' nodes, and
    its ``output_nr`` says which output it is.  The first output's record carries the node;
    the others point at it.  An output on another tape than the first, or handed back as it
    came in, keeps its own node."""
    first = results[0]
    named_node(first, name, *inputs)
    tape = first._tape
    entry = None if tape is None else tape.composites.get(first._r)
    if entry is None or entry[0] != name:
        return results
    refs = entry[1]
    for k in range(1, len(results)):
        t = results[k]
        if t._tape is not tape or t._r == first._r:
            continue
        r = t._r
        if any(type(ref) is int and ref >= r for ref in refs):
            continue
        tape.composites[r] = (name, refs, first._r, k)
    return results


def _input_ref(tape, t):
    """Where the node of input t is found from ``tape``: the record that holds t's value
    there; -1 for None (t is no tensor, or requires no grad); or, where the op's records
    began on an older tape (the recording tape filled up), t itself for a leaf, (t's tape,
    t's record) for a value (autograd.Node.next_functions reads them)."""
    if not isinstance(t, Tensor) or not t._rg:
        return -1
    if t._tape is tape:
        return t._r
    if t._tape is None:
        hit = tape.leaf_rec.get(id(t))
        return hit[0] if hit is not None and hit[1] == t._version else t
    hit = tape.extern_rec.get((t._tape.id, t._r))
    return hit[0] if hit is not None else (t._tape, t._r)


def _readable_in_place(x):
    """Whether tensor x may be read where it is by the records of an eager tape rather than
    copied onto it: large, float64, row-major, no view, not traced, not itself recorded, and
    of memory that only tapegrad writes (a write NumPy makes is seen by no version count)."""
    v = x._value
    return (x._tape is None and v.size >= _tape_module.IN_PLACE_MIN and state.trace is None
            and x._alias is None and v.dtype is _FLOAT64 and v.flags.c_contiguous
            and not (_EXPOSED and numpy_holds(x)))


def _constant_in_place(tape, x):
    """A record on ``tape`` for constant x, an operand of a matrix product or of an
    elementwise op (``_elementwise_ref``), that the op's rules read where x is
    (``Tape.read_in_place``), or -1: x is then copied as ``_ref`` copies it.  For a data
    matrix (copying W8's (10^5, 16) took 1.2 ms of a 3.8 ms step), which PyTorch would keep
    by reference.  The record is offered to later readers of the same kinds only (under its
    own key in ``const_rec``): others read the arena."""
    if x._rg or not _readable_in_place(x):
        return -1
    v = x._value
    key = (id(x), "in place")
    hit = tape.const_rec.get(key)
    if hit is not None and hit[1] == x._version and hit[2]() is v:
        return hit[0]   # (a loop of ops reading the same data: one record, not one each)
    off = tape.alloc(v.size)   # (its slot: Tape.fill_arena fills it for readers of the arena)
    r = tape.push(K.CONST, -1, -1, off, v.size)
    tape.read_in_place(r, x)
    tape.const_rec[key] = (r, x._version, _value_ref(v))
    return r


def _leaf_in_place(tape, x):
    """A record on ``tape`` for leaf x, an operand of a matrix product, that the product's
    rules read where x is (``Tape.read_in_place``), or -1: x is then copied as ``_ref``
    copies it.  For a layer's weights (copying W3's 784x256 took 0.18 ms of a 7.9 ms step),
    which PyTorch keeps by reference.  Its version is checked as a copied leaf's
    (``leaf_rec``); the entry there says it is read in place, and the first reader of
    another kind (``_ref``) fills its slot, from which every reader then reads."""
    if not x._rg or not _readable_in_place(x):
        return -1
    v = x._value
    key = id(x)
    hit = tape.leaf_rec.get(key)
    if hit is not None and hit[1] == x._version and hit[2]() is v:
        return hit[0]   # (on this tape already, read in place or copied)
    if hit is not None:
        tape.supersede_leaf(hit)
    off = tape.alloc(v.size)   # (its slot: filled for readers of the arena, as above)
    r = tape.push(K.LEAF, -1, -1, off, v.size)
    tape.leaves[r] = x
    tape.read_in_place(r, x, constant=False)
    tape.leaf_rec[key] = (r, x._version, _value_ref(v), "in place")
    return r


def _operand_in_place(tape, x):
    """A matrix product's operand read where it is: a constant's record, or a leaf's."""
    return _leaf_in_place(tape, x) if x._rg else _constant_in_place(tape, x)


def _elementwise_ref(tape, x, code):
    """The record for operand x (of the output's shape) of a recorded op ``code``: a large
    eager constant of an elementwise op is read where it is (``_constant_in_place``), as the
    family's backward reads such a record (``elementwise._operand``) -- copying the data
    of the tutorial's cubic fit (x, x**2, x**3, y at 10^5 points) onto the tape took a
    fifth of its forward; anything else as ``_ref``.  Never one value: the sweep's chains
    for one-element records read the arena only."""
    n = x._value.size
    if x._tape is None and not x._rg and n >= _tape_module.IN_PLACE_MIN and n > 1 \
            and K.OPS[code].family == K.ELEMENTWISE:
        r = _constant_in_place(tape, x)
        if r >= 0:
            return r
    return _ref(tape, x)


def _out(tape, shape, n):
    off = tape.alloc(n)
    v = tape.vals[off:off + n]
    if len(shape) != 1:
        v = v.reshape(shape)
    return off, v


def _gather_record(tape, r0, idx, shape, variant, code=K.GATHER):
    """Record out = x.flat[idx] (idx shaped like the output)."""
    n = idx.size
    ip = tape.put_aux((variant, n))
    tape.aux.frombytes(np.ascontiguousarray(idx, dtype=np.int64).tobytes())
    off, out = _out(tape, shape, n)
    src = tape.vals[tape.voff[r0]:tape.voff[r0] + tape.size[r0]]
    src.take(idx.reshape(-1), out=out.reshape(-1))
    return tape.push(code, r0, -1, off, n, ip), out


def replaced(x, src, positions, variant):
    """x with src's values (flat, in order) written at x's flat ``positions``; of repeated
    positions the last write wins, as PyTorch's serial CPU kernels.  One REPLACE record
    (named as GATHER's ``variant``): every source element takes the gradient at its target,
    overwritten or not, and x the gradient where nothing was written (PyTorch's formulas
    for scatter, index_put, index_copy, put, masked_scatter)."""
    pos = np.ascontiguousarray(positions, dtype=np.int64).reshape(-1)
    value = np.array(x._value, copy=True)
    if pos.size:
        # (NumPy's assignment keeps the last of repeated positions)
        value.reshape(-1)[pos] = np.asarray(src._value).reshape(-1).astype(value.dtype)
    if not _records(x, src):
        return _plain(value)
    n = value.size
    tape = recording_tape(2 * n + pos.size + x._value.size + src._value.size)
    r0 = _ref(tape, x)
    r1 = _ref(tape, src)
    ip = tape.put_aux((variant, pos.size))
    tape.aux.frombytes(pos.tobytes())
    off, out = _out(tape, value.shape, n)
    np.copyto(out, value)
    # traced integer data keeps its eager dtype on the handle (the arena holds floats)
    return _result(tape, tape.push(K.REPLACE, r0, r1, off, n, ip),
                   out if value.dtype.kind == "f" else value)


def scatter_add_flat(x, idx, n_out):
    """out (n_out,) with out[idx[k]] += x[k]; differentiable (its gradient is a gather)."""
    idx = np.ascontiguousarray(idx, dtype=np.int64).reshape(-1)
    value = np.zeros(n_out)
    np.add.at(value, idx, x._value.reshape(-1))
    if not _records(x):
        return _plain(value)
    tape = recording_tape(2 * n_out + x._value.size)
    r0 = _ref(tape, x)
    ip = tape.put_aux([0, idx.size])
    tape.aux.frombytes(idx.tobytes())
    off, out = _out(tape, (n_out,), n_out)
    np.copyto(out, value)
    return _result(tape, tape.push(K.SCATTER, r0, -1, off, n_out, ip), out)


# A one-value expansion of this many values or more that no rule reads is left unfilled.
_UNFILLED_FROM = 1024


def _expansion_read(code, a, b, n, operand):
    """Whether a rule of op ``code`` (on tensors a and b, out of n values) may read the
    values of a one-value expansion of ``operand`` (0: a, 1: b) in the backward.  If not, an
    eager recorder leaves them out of the arena (``Tape.leave_unfilled``): a parameter added
    to a vector, or one times data that needs no gradient (W8's a + b*x at 10^5 points wrote
    four arrays of 10^5 copies of a number, 180 us of a 1.7 ms step, for a backward that
    reads none of them).  A replay's tape is always complete."""
    if n < _UNFILLED_FROM or state.trace is not None:
        return True
    flag = K.READS_X1 if operand else K.READS_X0
    return bool(K.OPS[code].reads_when(a._rg, b._rg) & flag)


def _expanded_ref(tape, x, shape, read=True):
    """x's record, broadcast to ``shape`` by a hidden strided expansion when its shape
    differs; a one-value expansion that ``read`` says no rule reads is left unfilled."""
    r = _ref(tape, x)
    v = x._value
    if v.shape == shape:
        return r
    return _expansion(tape, r, v, shape, math.prod(shape), read)


_NUMBER_EXPANSION_AUX = {}  # shape -> aux of a one-value expansion to it (see _expansion)
_NUMBER_EXPANSION_KEPT = 256


def _number_expansion_aux(shape):
    """(ndim, *shape, 0, ...): a one-value expansion's aux entry (all strides 0), kept per
    shape -- a parameter times data broadcasts to the same few shapes every step."""
    nd = len(shape)
    aux = (nd, *shape) + (0,) * nd
    if len(_NUMBER_EXPANSION_AUX) >= _NUMBER_EXPANSION_KEPT:
        _NUMBER_EXPANSION_AUX.clear()
    _NUMBER_EXPANSION_AUX[shape] = aux
    return aux


def _expansion(tape, r, v, shape, n, read):
    """Record ``r`` (of value v) broadcast to ``shape`` (n values): see _expanded_ref."""
    off = tape.top
    tape.top = off + n
    out = tape.vals[off:off + n]
    if v.size == 1:
        # one value everywhere: every stride is 0, and a fill of the flat span is the copy
        # (a parameter broadcast against data, four times a step of a cubic fit: written
        # out, without _out's call and reshape)
        aux = _NUMBER_EXPANSION_AUX.get(shape)
        if aux is None:
            aux = _number_expansion_aux(shape)
        ip = tape.put_aux(aux)
        if read:
            out.fill(v.item())
        else:
            tape.leave_unfilled(off, n, v.item())
        return tape.push(K.EXPAND_S, r, -1, off, n, ip)
    nd = len(shape)
    if nd != 1:
        out = out.reshape(shape)
    lead = nd - v.ndim
    # element strides of x seen from each output dim; 0 where x is broadcast
    strides = [0] * nd
    step = 1
    for d in range(v.ndim - 1, -1, -1):
        if v.shape[d] != 1:
            strides[lead + d] = step
        step *= v.shape[d]
    ip = tape.put_aux([nd, *shape, *strides])
    np.copyto(out, v)   # (copyto broadcasts; np.broadcast_to costs 2 µs of Python more)
    return tape.push(K.EXPAND_S, r, -1, off, n, ip)


def as_tensor_arg(x):
    """Turn an operand that is not a Tensor (ndarray, list, scalar) into a plain tensor."""
    if isinstance(x, Tensor):
        return x
    from .creation import tensor
    return tensor(x)


def broadcast_shape(sa, sb):
    """NumPy broadcasting, with PyTorch's error text."""
    na, nb = len(sa), len(sb)
    n = builtins.max(na, nb)
    out = [0] * n
    # from the last dim, as PyTorch checks: the first mismatch from the right is reported
    for i in range(n - 1, -1, -1):
        da = sa[na - n + i] if na - n + i >= 0 else 1
        db = sb[nb - n + i] if nb - n + i >= 0 else 1
        if da != db and da != 1 and db != 1:
            raise RuntimeError(
                f"The size of tensor a ({da}) must match the size of tensor b ({db}) at "
                f"non-singleton dimension {i}")
        out[i] = da if db == 1 else db
    return tuple(out)


def _is_scalar(x):
    t = type(x)
    if t is float or t is int or t is bool:
        return True
    if t is Tensor:
        return False
    return isinstance(x, numbers.Number) and not isinstance(x, complex) or (
        isinstance(x, np.generic) and x.dtype.kind in "biuf")


def _check_real(x, opname):
    if isinstance(x, complex) or (isinstance(x, np.generic) and x.dtype.kind == "c"):
        raise TypeError(f"{opname}: complex numbers are not supported by tapegrad")


# ---------------------------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------------------------


# Scalar twins of the NumPy kernels, for one-element tensors: a Python float op is ~10x
# cheaper than a ufunc call plus the error-state switch.  Where Python raises (math domain
# errors, overflow, division by zero) the NumPy path runs instead and gives inf/nan.
_SCALAR_ERRORS = (ValueError, OverflowError, ZeroDivisionError)
_SCALAR = {code: info.python for code, info in K.OPS.items() if info.python is not None}
# Python's arithmetic on floats for a number and a number (an SGD step's lr * p.grad, under
# no_grad): the same IEEE double operation as NumPy's ufunc (inf * 0 is nan, overflow inf,
# without a warning to silence), without the ufunc's microsecond on 0-d arrays.  Division is
# left out: Python's raises on a zero divisor.  (inplace's add_, sub_ and mul_ use it too.)
_NUMBER_OPS = {np.add: float.__add__, np.subtract: float.__sub__, np.multiply: float.__mul__}
_FLOAT64 = np.dtype(np.float64)


def _quiet_call(fn, *args):
    tok = quiet_begin()
    try:
        return fn(*args)
    finally:
        quiet_end(tok)


def _new_result(tape, r, out):
    t = _new_tensor(Tensor)
    t._value = out
    t._tape = tape
    t._r = r
    t._rg = True
    t._grad = None
    t._version = 0
    t._retains = False
    t._hooks = None
    t._alias = None
    # (the older tapes its graph reaches, which it keeps alive: Tape.keep)
    t._keep = None if tape.first_extern < 0 else tape.keep(r)
    t._numpy = None
    return t


_new_tensor = object.__new__
_result = _new_result


def _emit(tape, code, a0, a1, voff, size, ip, fp, out):
    """Append a record and return its result tensor: ``tape.push`` and ``_new_result`` in
    one call, because every elementwise op on a one-element tensor pays for this path."""
    r = len(tape.op)
    try:
        ap_op, ap_a0, ap_a1, ap_voff, ap_size, ap_ip, ap_fp = tape.appenders
        try:
            ap_op(code)
        except BufferError:     # see Tape.unshare_columns
            ap_op, ap_a0, ap_a1, ap_voff, ap_size, ap_ip, ap_fp = tape.unshare_columns()
            ap_op(code)
        ap_a0(a0)
        ap_a1(a1)
        ap_voff(voff)
        ap_size(size)
        ap_ip(ip)
        ap_fp(fp)
    except BaseException:   # (Ctrl-C between two columns: see Tape.drop_partial)
        tape.drop_partial(r)
        raise
    t = _new_tensor(Tensor)
    t._value = out
    t._tape = tape
    t._r = r
    t._rg = True
    t._grad = None
    t._version = 0
    t._retains = False
    t._hooks = None
    t._alias = None
    # (the older tapes its graph reaches, which it keeps alive: Tape.keep)
    t._keep = None if tape.first_extern < 0 else tape.keep(r)
    t._numpy = None
    return t


_anomaly.emits_through(globals())   # (anomaly mode swaps _emit: _anomaly._swap_recorders)


def _unary(code, x, fn, ip=0, fp=0.0):
    """Record out = fn(x); ``fn(value, out)`` is a NumPy kernel (out may be None)."""
    try:
        v = x._value
    except AttributeError:
        # a list, a number, ... where PyTorch wants a tensor: its TypeError (_argtypes.py)
        raise _not_tensor(K.OPS[code].const.lower(), "input", 1, x) from None
    if not (x._rg and state.grad_enabled):
        if x._rg and state.trace is not None:
            state.trace.opaque("an op under no_grad on traced values")
        value = np.asarray(_quiet_call(fn, v, None))
        if value.itemsize < 8 and value.dtype.kind == "f":  # NumPy's exp(int8) is float16
            value = np.asarray(_quiet_call(fn, v.astype(np.float64), None))
        return _plain(value)
    if state.trace is not None and v.dtype.kind != "f" and \
            np.asarray(_quiet_call(fn, np.zeros(1, v.dtype), None)).dtype.kind != "f":
        # integers or bools eagerly (abs, neg of traced integers), floats on the tape
        state.trace.integer_result(K.OPS[code].name)
    n = v.size
    tape = state.tape
    if tape is None or tape.finished or tape.top + 2 * n > tape.cap:
        tape = recording_tape(2 * n)
    r0 = x._r if x._tape is tape else _ref(tape, x)
    off = tape.top
    tape.top = off + n
    vals = tape.vals
    out = vals[off:off + n]
    if v.ndim != 1:
        out = out.reshape(v.shape)
    sfn = _SCALAR.get(code) if n == 1 else None
    if sfn is not None:
        try:
            vals[off] = sfn(v.item())
        except _SCALAR_ERRORS:
            sfn = None
    if sfn is None:
        tok = QUIET_SET(QUIET)
        # (traced integers or bools in float64: NumPy's exp of bools is float16, 2.71875)
        fn(v if v.dtype.kind == "f" else v.astype(np.float64), out)
        QUIET_RESET(tok)
    return _emit(tape, code, r0, -1, off, n, ip, fp, out)


def _binary(code, a, b, fn):
    """Record out = fn(a, b) with broadcasting; both operands are Tensors."""
    va, vb = a._value, b._value
    same = va.shape == vb.shape
    # (a 0-d operand, a parameter times data, broadcasts to the other's shape)
    shape = va.shape if same or not vb.shape else vb.shape if not va.shape else \
        broadcast_shape(va.shape, vb.shape)
    if not ((a._rg or b._rg) and state.grad_enabled):
        if (a._rg or b._rg) and state.trace is not None:
            state.trace.opaque("an op under no_grad on traced values")
        if va.dtype.kind != "f" and vb.dtype.kind != "f" and fn is not np.true_divide:
            # (true division is of the values as floats, without a common integer type)
            va, vb = _promote.values(a, b)
        return _plain(np.asarray(_quiet_call(fn, va, vb, None)))
    if state.trace is not None and va.dtype.kind != "f" and vb.dtype.kind != "f" \
            and fn is not np.true_divide:
        # integers or bools eagerly, floats on the tape (True + True is 2 there)
        state.trace.integer_result(K.OPS[code].name)
    n = va.size if same else math.prod(shape)
    tape = state.tape
    if tape is None or tape.finished or tape.top + 3 * n + va.size + vb.size > tape.cap:
        tape = recording_tape(3 * n + va.size + vb.size)
    if same:
        r0 = a._r if a._tape is tape else _elementwise_ref(tape, a, code)
        r1 = b._r if b._tape is tape else _elementwise_ref(tape, b, code)
    else:
        # (_expanded_ref written out: a parameter times data is the common broadcast)
        r0 = a._r if a._tape is tape else \
            _elementwise_ref(tape, a, code) if va.shape == shape else _ref(tape, a)
        if va.shape != shape:
            r0 = _expansion(tape, r0, va, shape, n,
                            n < _UNFILLED_FROM or _expansion_read(code, a, b, n, 0))
        r1 = b._r if b._tape is tape else \
            _elementwise_ref(tape, b, code) if vb.shape == shape else _ref(tape, b)
        if vb.shape != shape:
            r1 = _expansion(tape, r1, vb, shape, n,
                            n < _UNFILLED_FROM or _expansion_read(code, a, b, n, 1))
    off = tape.top
    tape.top = off + n
    vals = tape.vals
    out = vals[off:off + n]
    if len(shape) != 1:
        out = out.reshape(shape)
    sfn = _SCALAR.get(code) if n == 1 and same else None
    if sfn is not None:
        try:
            vals[off] = sfn(va.item(), vb.item())
        except _SCALAR_ERRORS:
            sfn = None
    if sfn is None:
        tok = QUIET_SET(QUIET)
        fn(va, vb, out)
        QUIET_RESET(tok)
    return _emit(tape, code, r0, r1, off, n, 0, 0.0, out)


def _with_scalar(code, x, c, fn):
    """Record out = fn(x, c) for a Python scalar c, kept in the record's fp column."""
    v = x._value
    if not (x._rg and state.grad_enabled):
        if x._rg and state.trace is not None:
            state.trace.opaque("an op under no_grad on traced values")
        if v.dtype.kind != "f":
            c = _promote.scalar_for(v, c)
        elif v.ndim == 0 and type(c) is float and v.dtype is _FLOAT64 and fn in _NUMBER_OPS:
            # a number times a number, not recorded: see _NUMBER_OPS
            return _plain(np.array(_NUMBER_OPS[fn](float(v), c)))
        return _plain(np.asarray(_quiet_call(fn, v, c, None)))
    if state.trace is not None and v.dtype.kind != "f" and fn is not np.true_divide \
            and isinstance(c, (bool, int, np.integer, np.bool_)):
        # integers or bools eagerly (mask * 2), floats on the tape
        state.trace.integer_result(K.OPS[code].name)
    n = v.size
    tape = state.tape
    if tape is None or tape.finished or tape.top + 2 * n > tape.cap:
        tape = recording_tape(2 * n)
    r0 = x._r if x._tape is tape else _ref(tape, x)
    off = tape.top
    tape.top = off + n
    vals = tape.vals
    out = vals[off:off + n]
    if v.ndim != 1:
        out = out.reshape(v.shape)
    c = float(c)
    sfn = _SCALAR.get(code) if n == 1 else None
    if sfn is not None:
        try:
            vals[off] = sfn(v.item(), c)
        except _SCALAR_ERRORS:
            sfn = None
    if sfn is None:
        tok = QUIET_SET(QUIET)
        fn(v, c, out)
        QUIET_RESET(tok)
    return _emit(tape, code, r0, -1, off, n, 0, c, out)


def _arith(code, code_s, fn, a, b):
    if type(b) is Tensor:
        return _binary(code, a, b, fn)
    if _is_scalar(b):
        if not a._rg and a._value.dtype.kind == "b" and isinstance(b, bool):
            return _plain(np.asarray(_quiet_call(fn, a._value, b, None)))
        return _with_scalar(code_s, a, b, fn)
    _check_real(b, K.OPS[code].name)
    return _binary(code, a, as_tensor_arg(b), fn)


def _operands(a, b, alpha, name):
    """(a, b) for add and sub: a number first is a 0-d tensor, as PyTorch wraps it
    (``torch.add(2, x)``); ``alpha`` scales b."""
    if not isinstance(a, Tensor):
        a = as_tensor_arg(a)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}(): argument 'alpha' must be Number, not "
                        f"{type(alpha).__name__}")
    if alpha != 1:
        b = mul(b, alpha) if isinstance(b, Tensor) else mul(as_tensor_arg(b), alpha) \
            if not _is_scalar(b) else b * alpha
    return a, b


def add(a, b, *, alpha=1):
    """Elementwise ``a + b``, broadcast as NumPy and PyTorch broadcast.

    ``a`` and ``b`` are tensors, Python numbers or anything ``tg.tensor`` accepts;
    ``alpha`` scales ``b`` (``a + alpha * b``).  Shape: the broadcast shape of ``a`` and
    ``b``; dtype by PyTorch's promotion rules.  ``grad_fn``: ``<AddBackward0>``.

    Example:
        >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> tg.add(x, tg.tensor([[10.0], [20.0]]))
        tensor([[11., 12.],
                [21., 22.]], grad_fn=<AddBackward0>)
    """
    a, b = _operands(a, b, alpha, "add")
    return _arith(K.ADD, K.ADD_S, np.add, a, b)


def _check_bool_sub(a, b):
    a_bool = a._value.dtype.kind == "b" if isinstance(a, Tensor) else isinstance(a, bool)
    b_bool = b._value.dtype.kind == "b" if isinstance(b, Tensor) else isinstance(b, bool)
    if a_bool and b_bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
            "`^` or `logical_xor()` operator instead.")
    if a_bool or b_bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
            "trying to invert a mask, use the `~` or `logical_not()` operator instead.")


def sub(a, b, *, alpha=1):
    """Elementwise ``a - b``, broadcast; also spelled ``tg.subtract``.

    ``a`` and ``b`` are tensors or numbers; ``alpha`` scales ``b`` (``a - alpha * b``).
    Shape: the broadcast shape; dtype by PyTorch's promotion rules.  Bool operands raise, as
    in PyTorch.

    Example:
        >>> tg.sub(tg.tensor([5.0, 7.0]), 2)
        tensor([3., 5.])
        >>> tg.subtract is tg.sub
        True
    """
    _check_bool_sub(a, b)
    a, b = _operands(a, b, alpha, "sub")
    return _arith(K.SUB, K.SUB_S, np.subtract, a, b)


def mul(a, b):
    """Elementwise ``a * b``, broadcast; also spelled ``tg.multiply``.

    ``a`` is a tensor, ``b`` a tensor or a number.  Shape: the broadcast shape; dtype by
    PyTorch's promotion rules.  ``grad_fn``: ``<MulBackward0>``.

    Example:
        >>> x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
        >>> tg.mul(x, 2)
        tensor([2., 4., 6.], grad_fn=<MulBackward0>)
    """
    if not isinstance(a, Tensor):
        a = as_tensor_arg(a)       # torch.mul(2, x): the number is a 0-d tensor operand
    return _arith(K.MUL, K.MUL_S, np.multiply, a, b)


def div(a, b, *, rounding_mode=None):
    """Elementwise true division ``a / b``, broadcast; also ``tg.divide`` and ``tg.true_divide``.

    ``a`` is a tensor, ``b`` a tensor or a number.  Integer operands give a float64 result, as
    in PyTorch.  Shape: the broadcast shape.  ``rounding_mode="trunc"`` rounds the quotient
    toward zero, ``"floor"`` down (``a // b``, ``floor_divide``); integers then stay
    integers, and the gradient is 0.

    Example:
        >>> tg.div(tg.tensor([1, 2, 3]), 2)
        tensor([0.5000, 1.0000, 1.5000])
        >>> tg.div(tg.tensor([-7.0, 7.0]), 2, rounding_mode="floor")
        tensor([-4.,  3.])
    """
    if rounding_mode is not None:
        return _rounded_div(a, b, rounding_mode)
    if not isinstance(a, Tensor):
        a = as_tensor_arg(a)       # torch.div(2, x): the number is a 0-d tensor operand
    if isinstance(b, (int, np.integer)) and not isinstance(b, bool):
        b = float(b)  # true division, as PyTorch does for integer tensors too
    if a._value.dtype.kind in "iub" and not _is_scalar(b) and not isinstance(b, Tensor):
        b = as_tensor_arg(b)
    return _arith(K.DIV, K.DIV_S, np.true_divide, a, b)


def _rounded_div(a, b, mode):
    if mode not in ("trunc", "floor"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                         f"but found '{mode}'")
    a = a if isinstance(a, Tensor) else as_tensor_arg(a)
    b = b if isinstance(b, Tensor) else as_tensor_arg(b)
    if a._value.dtype.kind in "iub" and b._value.dtype.kind in "iub":
        u, v = _promote.values(a, b)
        if np.any(v == 0):
            raise RuntimeError("ZeroDivisionError")
        if mode == "floor":
            return _plain(np.asarray(np.floor_divide(u, v)))
        q = np.abs(u) // np.abs(v)
        return _plain(np.asarray(np.where((u < 0) != (v < 0), -q, q)).astype(q.dtype))
    if mode == "trunc":
        return trunc(div(a, b))
    return _floor_div_float(a, b)


def _floor_div_float(a, b):
    """PyTorch's floor division of floats, from recorded ops (so a compiled call recomputes
    it): the quotient of ``a - fmod(a, b)``, corrected by one where the rest and ``b`` differ
    in sign, rounded to the nearest whole number; a signed 0 for a zero quotient, ``a / b``
    for ``b == 0``.  Its gradient is 0, as PyTorch's."""
    def cmp(fn, x, y):
        return _compare(fn, x, y)
    rest = fmod(a, b)
    q = div(sub(a, rest), b)
    b_neg = cmp(np.less, b, 0.0)
    differ = where(cmp(np.less, rest, 0.0), where(b_neg, 0.0, 1.0),
                   where(cmp(np.greater, rest, 0.0), where(b_neg, 1.0, 0.0), 0.0))
    q = sub(q, differ)
    low = floor(q)
    rounded = add(low, where(cmp(np.greater, sub(q, low), 0.5), 1.0, 0.0))
    exact = div(a, b)
    out = where(cmp(np.equal, q, 0.0), copysign(mul(q, 0.0), exact), rounded)
    return where(cmp(np.equal, b, 0.0), exact, out)


def floor_divide(input, other):  # noqa: A002 - PyTorch's argument name
    """``div(input, other, rounding_mode="floor")``: the quotient rounded down (``a // b``).

    Example:
        >>> tg.floor_divide(tg.tensor([-7, 7]), 2)
        tensor([-4,  3])
    """
    return div(input, other, rounding_mode="floor")


def rsub(a, c):
    """c - a for a scalar c."""
    if not _is_scalar(c):
        return sub(as_tensor_arg(c), a)
    _check_bool_sub(c, a)
    return _with_scalar(K.RSUB_S, a, c, lambda v, c, out: np.subtract(c, v, out=out))


def rdiv(a, c):
    """c / a: recorded as reciprocal then multiply, as PyTorch records it."""
    if not _is_scalar(c):
        return div(as_tensor_arg(c), a)
    return mul(reciprocal(a), c)


def neg(x):
    """Elementwise ``-x``; same shape and dtype.  A bool tensor raises, as in PyTorch.

    Example:
        >>> tg.neg(tg.tensor([1.0, -2.0]))
        tensor([-1.,  2.])
    """
    if x._value.dtype.kind == "b":
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
            "to invert a mask, use the `~` or `logical_not()` operator instead.")
    return _unary(K.NEG, x, np.negative)


def pow(a, b):
    """Elementwise ``a ** b``, broadcast: ``a`` a tensor and ``b`` a number or a tensor, or
    ``a`` a number and ``b`` a tensor.

    Shape: the broadcast shape; dtype by PyTorch's promotion rules (an integer tensor to a
    negative integer power raises, as in PyTorch).  ``grad_fn``: ``<PowBackward0>`` for a
    number exponent, ``<PowBackward1>`` for a tensor one.

    Example:
        >>> x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
        >>> tg.pow(x, 2)
        tensor([1., 4., 9.], grad_fn=<PowBackward0>)
        >>> tg.pow(2, tg.tensor([0, 1, 3]))
        tensor([1, 2, 8])
    """
    if isinstance(b, Tensor) and _is_scalar(a):
        return rpow(b, a)
    if _is_scalar(b):
        if a._value.dtype.kind == "b" and isinstance(b, (bool, np.bool_)):
            return _plain(a._value | (not b))   # x ** True is x, x ** False is True
        if a._value.dtype.kind != "f" and isinstance(b, (int, np.integer)) and b < 0:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        return _with_scalar(K.POW_S, a, b, _float_pow if a._value.dtype.kind == "f" else _int_pow)
    b = as_tensor_arg(b)
    if not isinstance(a, Tensor):
        a = as_tensor_arg(a)
    if a._value.dtype.kind == "b" and b._value.dtype.kind == "b":
        raise NotImplementedError('"pow" not implemented for \'Bool\'')
    return _binary(K.POW, a, b, _pow)


def _pow(va, vb, out):
    # floats through the rule's own pow (ops.elementwise.pow_array: NumPy's differs from it in
    # the last bit on CPUs with AVX-512); integers as NumPy raises them
    if va.dtype.kind == "f" or vb.dtype.kind == "f":
        return _elementwise.pow_array(va, vb, out)
    return np.power(va, vb, out=out)


# --- zero_, fill_ and copy_ as recorded (inplace.py): what they write, and a gradient for the
# value written only -------------------------------------------------------------------------
def _filled_values(shape, value, out):
    if out is None:
        return np.full(shape, value, dtype=np.float64)
    out[...] = value
    return out


def _copied_values(va, vb, out):
    if out is None:
        shape = np.broadcast_shapes(va.shape, vb.shape)
        return np.array(np.broadcast_to(vb, shape), dtype=np.float64)
    np.copyto(out, np.broadcast_to(vb, out.shape), casting="unsafe")
    return out


def recorded_zero(x):
    """``x.zero_()`` as recorded: zeros of x's shape (``ZeroBackward0``); x's old values get
    no gradient."""
    return _unary(K.ZERO, x, lambda v, out: _filled_values(v.shape, 0.0, out))


def recorded_fill(x, value):
    """``x.fill_(value)`` as recorded: ``FillBackward2`` for a number, ``FillBackward3`` for
    a 0-d tensor (which gets the sum of the incoming gradient)."""
    if isinstance(value, Tensor):
        return _binary(K.FILL_T, x, value, _copied_values)
    return _with_scalar(K.FILL, x, value, lambda v, c, out: _filled_values(v.shape, c, out))


def recorded_copy(x, src):
    """``x.copy_(src)`` as recorded (``CopyBackwards``): src broadcast to x's shape."""
    return _binary(K.COPY, x, src, _copied_values)


def _float_pow(v, c, out):
    # PyTorch multiplies for 3 and -2 (the same bits as its results; pow's differ in the
    # last place) and NumPy squares, takes the square root and the reciprocal for 2, 0.5 and
    # -1, several times faster than a general power.  The compiled rule computes each the
    # same way (ops.elementwise.power)
    if c == 3.0 or c == -2.0:
        # the square into out (or a new array), then the rest there: a second temporary of
        # 10^5 values cost more than the multiplications (x ** 3 not recorded: 61 -> 46 us)
        square = np.multiply(v, v, out=out)
        if type(square) is not np.ndarray:   # (of a 0-d v a NumPy scalar: no out=)
            return np.multiply(square, v) if c == 3.0 else np.divide(1.0, square)
        if c == 3.0:
            return np.multiply(square, v, out=square)
        return np.divide(1.0, square, out=square)
    if c == 2.0:
        return np.multiply(v, v, out=out)
    if c == 0.5:
        return np.sqrt(v, out=out)
    if c == -1.0:
        return np.divide(1.0, v, out=out)
    return _elementwise.power_array(v, c, out)


def _int_pow(v, c, out):
    if isinstance(c, float) or (isinstance(c, np.generic) and c.dtype.kind == "f"):
        return np.power(v.astype(np.float64), c, out=out)
    return np.power(v, c, out=out)   # pow() refused negative integer exponents


def rpow(a, c):
    """c ** a for a scalar c."""
    if not _is_scalar(c):
        return pow(as_tensor_arg(c), a)
    if a._value.dtype.kind == "b" and isinstance(c, (bool, np.bool_)):
        raise NotImplementedError('"pow" not implemented for \'Bool\'')
    return _with_scalar(K.RPOW_S, a, c, _rpow)


def _rpow(v, c, out):
    if v.dtype.kind == "f" or isinstance(c, float):
        return _elementwise.rpow_array(c, v, out)
    return np.power(c, v, out=out)


def reciprocal(x):
    """Elementwise ``1 / x``; same shape, float64 (integer inputs too).

    Example:
        >>> tg.reciprocal(tg.tensor([1, 2, 4]))
        tensor([1.0000, 0.5000, 0.2500])
    """
    return _unary(K.RECIPROCAL, x, _float_fn(np.reciprocal))


def _float_fn(f):
    """A ufunc wrapper that computes in float64 (integer inputs give float results)."""
    def run(v, out):
        if v.dtype.kind != "f":
            v = v.astype(np.float64)
        return f(v, out=out)
    return run


exp = lambda x: _unary(K.EXP, x, np.exp)  # noqa: E731 - a table of one-liners
log = lambda x: _unary(K.LOG, x, np.log)  # noqa: E731
log1p = lambda x: _unary(K.LOG1P, x, np.log1p)  # noqa: E731
expm1 = lambda x: _unary(K.EXPM1, x, np.expm1)  # noqa: E731
sqrt = lambda x: _unary(K.SQRT, x, np.sqrt)  # noqa: E731
sin = lambda x: _unary(K.SIN, x, np.sin)  # noqa: E731
cos = lambda x: _unary(K.COS, x, np.cos)  # noqa: E731
tan = lambda x: _unary(K.TAN, x, np.tan)  # noqa: E731
tanh = lambda x: _unary(K.TANH, x, np.tanh)  # noqa: E731
sinh = lambda x: _unary(K.SINH, x, np.sinh)  # noqa: E731

# Their docstrings (a lambda cannot carry one in its body).
exp.__doc__ = """Elementwise ``e ** x``; same shape, float64.  The gradient reuses the output.

Example:
    >>> tg.exp(tg.tensor([0.0, 1.0]))
    tensor([1.0000, 2.7183])
"""
log.__doc__ = """Elementwise natural logarithm; same shape, float64 (``-inf`` at 0, nan below).

Example:
    >>> tg.log(tg.tensor([1.0, np.e, 0.0]))
    tensor([0., 1., -inf])
"""
log1p.__doc__ = """Elementwise ``log(1 + x)``, accurate for small ``x``; same shape, float64.

Example:
    >>> tg.log1p(tg.tensor([1e-10]))
    tensor([1.0000e-10])
"""
expm1.__doc__ = """Elementwise ``exp(x) - 1``, accurate for small ``x``; same shape, float64.

Example:
    >>> tg.expm1(tg.tensor([1e-10]))
    tensor([1.0000e-10])
"""
sqrt.__doc__ = """Elementwise square root; same shape, float64 (nan for negative elements).

Example:
    >>> tg.sqrt(tg.tensor([4.0, 2.0]))
    tensor([2.0000, 1.4142])
"""
sin.__doc__ = """Elementwise sine (radians); same shape, float64.

Example:
    >>> tg.sin(tg.tensor([0.0, np.pi / 2]))
    tensor([0., 1.])
"""
cos.__doc__ = """Elementwise cosine (radians); same shape, float64.

Example:
    >>> tg.cos(tg.tensor([0.0, np.pi]))
    tensor([ 1., -1.])
"""
tan.__doc__ = """Elementwise tangent (radians); same shape, float64.

Example:
    >>> tg.tan(tg.tensor([0.0, np.pi / 4]))
    tensor([0.0000, 1.0000])
"""
tanh.__doc__ = """Elementwise hyperbolic tangent; same shape, float64.

``grad_fn``: ``<TanhBackward0>``; the gradient ``1 - tanh(x) ** 2`` reuses the output.

Example:
    >>> tg.tanh(tg.tensor([0.0, 1.0], requires_grad=True))
    tensor([0.0000, 0.7616], grad_fn=<TanhBackward0>)
"""
sinh.__doc__ = """Elementwise hyperbolic sine; same shape, float64.

Example:
    >>> tg.sinh(tg.tensor([0.0, 1.0]))
    tensor([0.0000, 1.1752])
"""


def cosh(x):
    """Elementwise hyperbolic cosine; same shape, float64.  ``grad_fn``: ``<CoshBackward0>``.

    Example:
        >>> tg.cosh(tg.tensor([0.0, 1.0]))
        tensor([1.0000, 1.5431])
    """
    return _unary(K.COSH, x, np.cosh)


def asin(x):
    """Elementwise arcsine (nan outside [-1, 1]); same shape, float64; also ``arcsin``.
    ``grad_fn``: ``<AsinBackward0>``.

    Example:
        >>> tg.asin(tg.tensor([0.0, 1.0]))
        tensor([0.0000, 1.5708])
    """
    return _unary(K.ASIN, x, np.arcsin)


def acos(x):
    """Elementwise arccosine (nan outside [-1, 1]); same shape, float64; also ``arccos``.
    ``grad_fn``: ``<AcosBackward0>``.

    Example:
        >>> tg.acos(tg.tensor([1.0, 0.0]))
        tensor([0.0000, 1.5708])
    """
    return _unary(K.ACOS, x, np.arccos)


def atan(x):
    """Elementwise arctangent; same shape, float64; also ``arctan``.
    ``grad_fn``: ``<AtanBackward0>``.

    Example:
        >>> tg.atan(tg.tensor([0.0, 1.0]))
        tensor([0.0000, 0.7854])
    """
    return _unary(K.ATAN, x, np.arctan)


def asinh(x):
    """Elementwise inverse hyperbolic sine; same shape, float64; also ``arcsinh``.
    ``grad_fn``: ``<AsinhBackward0>``.

    Example:
        >>> tg.asinh(tg.tensor([0.0, 1.0]))
        tensor([0.0000, 0.8814])
    """
    return _unary(K.ASINH, x, np.arcsinh)


def acosh(x):
    """Elementwise inverse hyperbolic cosine (nan below 1); same shape, float64; also
    ``arccosh``.  ``grad_fn``: ``<AcoshBackward0>``.

    Example:
        >>> tg.acosh(tg.tensor([1.0, 2.0]))
        tensor([0.0000, 1.3170])
    """
    return _unary(K.ACOSH, x, np.arccosh)


def atanh(x):
    """Elementwise inverse hyperbolic tangent (+-inf at +-1, nan beyond); same shape,
    float64; also ``arctanh``.  ``grad_fn``: ``<AtanhBackward0>``.

    Example:
        >>> tg.atanh(tg.tensor([0.0, 0.5]))
        tensor([0.0000, 0.5493])
    """
    return _unary(K.ATANH, x, np.arctanh)


def log2(x):
    """Elementwise base-2 logarithm; same shape, float64.  ``grad_fn``: ``<Log2Backward0>``.

    Example:
        >>> tg.log2(tg.tensor([1.0, 8.0]))
        tensor([0., 3.])
    """
    return _unary(K.LOG2, x, np.log2)


def log10(x):
    """Elementwise base-10 logarithm; same shape, float64.  ``grad_fn``: ``<Log10Backward0>``.

    Example:
        >>> tg.log10(tg.tensor([1.0, 100.0]))
        tensor([0., 2.])
    """
    return _unary(K.LOG10, x, np.log10)


def exp2(x):
    """Elementwise ``2 ** x``; same shape, float64.  ``grad_fn``: ``<Exp2Backward0>``.

    Example:
        >>> tg.exp2(tg.tensor([0.0, 3.0]))
        tensor([1., 8.])
    """
    return _unary(K.EXP2, x, np.exp2)


def _rsqrt(v, out):
    root = np.sqrt(v)
    return np.divide(1.0, root, out=out)


def rsqrt(x):
    """Elementwise ``1 / sqrt(x)``; same shape, float64.  ``grad_fn``: ``<RsqrtBackward0>``.

    Example:
        >>> tg.rsqrt(tg.tensor([4.0, 0.25]))
        tensor([0.5000, 2.0000])
    """
    return _unary(K.RSQRT, x, _rsqrt)


def erf(x):
    """Elementwise error function ``2/sqrt(pi) * integral of exp(-t**2) from 0 to x``; same
    shape, float64.  ``grad_fn``: ``<ErfBackward0>``.

    Example:
        >>> tg.erf(tg.tensor([0.0, 1.0]))
        tensor([0.0000, 0.8427])
    """
    return _unary(K.ERF, x, K.erf_array)


def erfc(x):
    """Elementwise complementary error function ``1 - erf(x)``, accurate where erf is near
    1; same shape, float64.  ``grad_fn``: ``<ErfcBackward0>``.

    Example:
        >>> tg.erfc(tg.tensor([0.0, 1.0]))
        tensor([1.0000, 0.1573])
    """
    return _unary(K.ERFC, x, K.erfc_array)



def lgamma(x):
    """Elementwise ``log |gamma(x)|`` (inf at 0 and the negative integers); float64.
    ``grad_fn``: ``<LgammaBackward0>`` (the gradient is ``digamma``).

    Example:
        >>> tg.lgamma(tg.tensor([1.0, 5.0]))
        tensor([0.0000, 3.1781])
    """
    return _unary(K.LGAMMA, x, K.lgamma_array)


def digamma(x):
    """Elementwise ``d/dx lgamma(x)``; also ``psi``.  ``grad_fn``: ``<DigammaBackward0>``.

    Example:
        >>> tg.digamma(tg.tensor([1.0, 10.0]))
        tensor([-0.5772,  2.2518])
    """
    return _unary(K.DIGAMMA, x, K.digamma_array)


def polygamma(n, x):
    """Elementwise n-th derivative of ``digamma`` (n >= 0 a whole number).
    ``grad_fn``: ``<PolygammaBackward0>`` (``DigammaBackward0`` for n = 0).

    Example:
        >>> tg.polygamma(1, tg.tensor([1.0]))
        tensor([1.6449])
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"polygamma(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    x = as_tensor_arg(x) if not isinstance(x, Tensor) else x
    if n == 0:
        return digamma(x)
    n = float(n)
    return _unary(K.POLYGAMMA, x, lambda v, out: K.polygamma_array(v, out, n), fp=n)


def erfinv(x):
    """Elementwise inverse of ``erf`` on ``[-1, 1]`` (+-inf at +-1, nan outside).
    ``grad_fn``: ``<ErfinvBackward0>``.

    Example:
        >>> tg.erfinv(tg.tensor([0.0, 0.5]))
        tensor([0.0000, 0.4769])
    """
    return _unary(K.ERFINV, x, K.erfinv_array)


def i0(x):
    """Elementwise modified Bessel function of the first kind of order 0,
    ``sum_k (x**2 / 4)**k / (k!)**2``; float64.  ``grad_fn``: ``<I0Backward0>`` (the
    gradient is ``i1``).

    Example:
        >>> tg.i0(tg.tensor([0.0, 1.0, 2.0]))
        tensor([1.0000, 1.2661, 2.2796])
    """
    return _unary(K.I0, x, K.i0_array)


def i0e(x):
    """Elementwise exponentially scaled ``i0``: ``exp(-|x|) i0(x)``, finite for large x.
    ``grad_fn``: ``<SpecialI0EBackward0>``.

    Example:
        >>> tg.special.i0e(tg.tensor([0.0, 1.0, 1000.0]))
        tensor([1.0000, 0.4658, 0.0126])
    """
    return _unary(K.I0E, x, K.i0e_array)


def i1(x):
    """Elementwise modified Bessel function of the first kind of order 1,
    ``(x / 2) sum_k (x**2 / 4)**k / (k! (k+1)!)``; float64.  ``grad_fn``:
    ``<SpecialI1Backward0>`` (the gradient ``i0(x) - i1(x) / x``, 1/2 at 0).

    Example:
        >>> tg.special.i1(tg.tensor([0.0, 1.0, -2.0]))
        tensor([ 0.0000,  0.5652, -1.5906])
    """
    return _unary(K.I1, x, K.i1_array)


def i1e(x):
    """Elementwise exponentially scaled ``i1``: ``exp(-|x|) i1(x)``.
    ``grad_fn``: ``<SpecialI1EBackward0>``.

    Example:
        >>> tg.special.i1e(tg.tensor([0.0, 1.0, -2.0]))
        tensor([ 0.0000,  0.2079, -0.2153])
    """
    return _unary(K.I1E, x, K.i1e_array)


def mvlgamma(x, p):
    """The log of the multivariate gamma function of dimension ``p``:
    ``p (p - 1) / 4 log(pi) + sum_j lgamma(x - j / 2)`` for j = 0 .. p-1; every element of
    x must exceed ``(p - 1) / 2``.

    Example:
        >>> tg.mvlgamma(tg.tensor([2.5]), 2)
        tensor([0.8570])
    """
    x = as_tensor_arg(x) if not isinstance(x, Tensor) else x
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    read_value(x, "mvlgamma()")
    if np.any(x._value <= (p - 1) / 2):
        raise RuntimeError("All elements must be greater than (p-1)/2")
    # PyTorch's order: the shifts from -(p-1)/2 up to 0, and its rounding of the constant
    steps = np.arange(-p * 0.5 + 0.5, 0.5, 0.5)
    shifted = add(unsqueeze(x, -1), _plain(steps))
    return add(sum(lgamma(shifted), -1), float(p * (p - 1)) * math.log(math.pi) * 0.25)


def square(x):
    """Elementwise ``x * x``: ``x ** 2``, as in PyTorch (``grad_fn``: ``<PowBackward0>``).

    Example:
        >>> tg.square(tg.tensor([-3.0, 0.5]))
        tensor([9.0000, 0.2500])
    """
    return pow(x, 2)


def _integral(x, name):
    """The result of rounding an integer (or bool) tensor: itself, copied, as in PyTorch."""
    if x._value.dtype.kind == "b":
        raise RuntimeError(f"\"{name}\" not implemented for 'Bool'")
    return _plain(x._value.copy())


def floor(x):
    """Elementwise largest integer not above x (an integer tensor is copied unchanged).
    ``grad_fn``: ``<FloorBackward0>``, whose gradient is 0.

    Example:
        >>> tg.floor(tg.tensor([-1.5, 0.5, 2.0]))
        tensor([-2.,  0.,  2.])
    """
    if x._value.dtype.kind != "f":
        return _integral(x, "floor_cpu")
    return _unary(K.FLOOR, x, np.floor)


def ceil(x):
    """Elementwise smallest integer not below x (an integer tensor is copied unchanged).
    ``grad_fn``: ``<CeilBackward0>``, whose gradient is 0.

    Example:
        >>> tg.ceil(tg.tensor([-1.5, 0.5, 2.0]))
        tensor([-1.,  1.,  2.])
    """
    if x._value.dtype.kind != "f":
        return _integral(x, "ceil_cpu")
    return _unary(K.CEIL, x, np.ceil)


def trunc(x):
    """Elementwise x rounded towards zero (an integer tensor is copied unchanged); also
    ``fix``.  ``grad_fn``: ``<TruncBackward0>``, whose gradient is 0.

    Example:
        >>> tg.trunc(tg.tensor([-1.5, 0.5, 2.7]))
        tensor([-1.,  0.,  2.])
    """
    if x._value.dtype.kind != "f":
        return _integral(x, "trunc_cpu")
    return _unary(K.TRUNC, x, np.trunc)


def _round_decimals(v, decimals, out):
    # PyTorch's order of operations: scale, round half to even, scale back
    if decimals >= 0:
        scale = 10.0 ** decimals
        return np.divide(np.rint(v * scale), scale, out=out)
    scale = 10.0 ** -decimals
    return np.multiply(np.rint(v / scale), scale, out=out)


def round(x, decimals=0):
    """Elementwise x rounded to the nearest integer, halves to even (or to ``decimals``
    decimal places: negative ones round to tens, hundreds, ...).  An integer tensor is
    copied unchanged.  ``grad_fn``: ``<RoundBackward0>`` (``<RoundBackward1>`` with
    ``decimals``), whose gradient is 0.

    Example:
        >>> tg.round(tg.tensor([0.5, 1.5, 2.675]))
        tensor([0., 2., 3.])
        >>> tg.round(tg.tensor([2.675, 1234.5]), decimals=2)
        tensor([   2.6800, 1234.5000])
    """
    if x._value.dtype.kind != "f":
        return _integral(x, "round_cpu")
    if decimals:
        d = _int_arg(decimals)
        return _unary(K.ROUND_DECIMALS, x, lambda v, out: _round_decimals(v, d, out),
                      fp=float(d))
    return _unary(K.ROUND, x, np.rint)


def _sign(v, out):
    result = np.subtract(v > 0, v < 0, dtype=np.float64, out=out)
    return result


def sign(x):
    """Elementwise -1, 0 or 1 by the sign of x (0 for nan and both zeros, as in PyTorch);
    an integer tensor gives integers.  ``grad_fn``: ``<SignBackward0>``, whose gradient is 0.

    Example:
        >>> tg.sign(tg.tensor([-2.0, 0.0, 3.0]))
        tensor([-1.,  0.,  1.])
    """
    if x._value.dtype.kind == "b":
        return _plain(x._value.copy())
    if x._value.dtype.kind != "f":
        return _plain(np.sign(x._value))
    return _unary(K.SIGN, x, _sign)


def _frac(v, out):
    return np.subtract(v, np.trunc(v), out=out)


def frac(x):
    """Elementwise fractional part ``x - trunc(x)`` (with x's sign).
    ``grad_fn``: ``<FracBackward0>``, whose gradient passes through.

    Example:
        >>> tg.frac(tg.tensor([-1.25, 2.5]))
        tensor([-0.2500,  0.5000])
    """
    if x._value.dtype.kind != "f":
        raise NotImplementedError(f"\"frac_cpu\" not implemented for '{x.dtype.scalar_name}'")
    return _unary(K.FRAC, x, _frac)


fix = trunc


def _predicate(x, fn, name):
    """A bool tensor of ``fn`` of x's values: no gradient; a compiled call guards the values
    it reads (the mask is not a constant of the tape)."""
    x = as_tensor_arg(x)
    read_value(x, f"{name}()")
    return _plain(np.asarray(fn(x._value)))


def isnan(x):
    """Elementwise whether x is nan: a bool tensor of x's shape.

    Example:
        >>> tg.isnan(tg.tensor([1.0, float("nan")]))
        tensor([False,  True])
    """
    x = as_tensor_arg(x)
    if state.trace is not None and x._rg:
        # recorded as x != x, which a replay recomputes: guarding x's values would record
        # the call again whenever any of them changed (``if isnan(x).any(): ...``)
        return _compare(np.not_equal, x, x)
    return _predicate(x, np.isnan, "isnan")


def isinf(x):
    """Elementwise whether x is +inf or -inf: a bool tensor of x's shape.

    Example:
        >>> tg.isinf(tg.tensor([1.0, -float("inf")]))
        tensor([False,  True])
    """
    return _predicate(x, np.isinf, "isinf")


def isposinf(x):
    """Elementwise whether x is +inf: a bool tensor of x's shape.

    Example:
        >>> tg.isposinf(tg.tensor([float("inf"), -float("inf")]))
        tensor([ True, False])
    """
    return _predicate(x, np.isposinf, "isposinf")


def isneginf(x):
    """Elementwise whether x is -inf: a bool tensor of x's shape.

    Example:
        >>> tg.isneginf(tg.tensor([float("inf"), -float("inf")]))
        tensor([False,  True])
    """
    return _predicate(x, np.isneginf, "isneginf")


def isfinite(x):
    """Elementwise whether x is neither inf nor nan: a bool tensor of x's shape.

    Example:
        >>> tg.isfinite(tg.tensor([1.0, float("inf"), float("nan")]))
        tensor([ True, False, False])
    """
    return _predicate(x, np.isfinite, "isfinite")


def logical_not(x):
    """Elementwise ``not x`` (nonzero is true): a bool tensor.

    Example:
        >>> tg.logical_not(tg.tensor([0.0, 2.0]))
        tensor([ True, False])
    """
    return _predicate(x, np.logical_not, "logical_not")


def _logical_pair(fn, a, b, name):
    a, b = as_tensor_arg(a), as_tensor_arg(b)
    read_value(a, f"{name}()")
    read_value(b, f"{name}()")
    return _plain(np.asarray(fn(a._value, b._value)))


def logical_and(a, b):
    """Elementwise ``a and b`` (nonzero is true), broadcast: a bool tensor.

    Example:
        >>> tg.logical_and(tg.tensor([True, True, False]), tg.tensor([1, 0, 1]))
        tensor([ True, False, False])
    """
    return _logical_pair(np.logical_and, a, b, "logical_and")


def logical_or(a, b):
    """Elementwise ``a or b`` (nonzero is true), broadcast: a bool tensor.

    Example:
        >>> tg.logical_or(tg.tensor([True, False, False]), tg.tensor([1, 2, 0]))
        tensor([ True,  True, False])
    """
    return _logical_pair(np.logical_or, a, b, "logical_or")


def logical_xor(a, b):
    """Elementwise ``a != b`` of their truth (nonzero is true), broadcast: a bool tensor.

    Example:
        >>> tg.logical_xor(tg.tensor([True, False, False]), tg.tensor([1, 2, 0]))
        tensor([False,  True, False])
    """
    return _logical_pair(np.logical_xor, a, b, "logical_xor")


def outer(a, b):
    """The outer product of vectors a and b: ``out[i, j] = a[i] * b[j]``, shape
    ``(len(a), len(b))``; also ``ger``.  ``grad_fn``: ``<MulBackward0>``, as PyTorch's.

    Example:
        >>> tg.outer(tg.tensor([1.0, 2.0]), tg.tensor([1.0, 10.0, 100.0]))
        tensor([[  1.,  10., 100.],
                [  2.,  20., 200.]])
    """
    a, b = as_tensor_arg(a), as_tensor_arg(b)
    if a._value.ndim != 1 or b._value.ndim != 1:
        raise RuntimeError(f"outer: Expected 1-D argument self, but got {a._value.ndim}-D"
                           if a._value.ndim != 1 else
                           f"outer: Expected 1-D argument vec2, but got {b._value.ndim}-D")
    return mul(reshape(a, -1, 1), b)


ger = outer
arcsin, arccos, arctan = asin, acos, atan
arcsinh, arccosh, arctanh = asinh, acosh, atanh


def abs(x):
    """Elementwise absolute value; same shape and dtype.  ``grad_fn``: ``<AbsBackward0>``; the
    gradient at 0 is 0, as in PyTorch.

    Example:
        >>> x = tg.tensor([-1.5, 0.0, 2.0], requires_grad=True)
        >>> tg.abs(x)
        tensor([1.5000, 0.0000, 2.0000], grad_fn=<AbsBackward0>)
    """
    if x._value.dtype.kind == "b":
        raise NotImplementedError('"abs_cpu" not implemented for \'Bool\'')
    return _unary(K.ABS, x, lambda v, out: np.abs(v, out=out))


def _sigmoid(v, out):
    if v.dtype.kind != "f":
        v = v.astype(np.float64)
    # 1/(1+exp(-x)) is exact to rounding for x >= 0 and saturates to 0 for very negative x
    t = np.exp(-v)
    t += 1.0
    return np.divide(1.0, t, out=out)


def sigmoid(x):
    """Elementwise logistic function ``1 / (1 + exp(-x))``; same shape, float64.

    Example:
        >>> tg.sigmoid(tg.tensor([0.0, 100.0, -100.0]))
        tensor([5.0000e-01, 1.0000e+00, 3.7201e-44])
    """
    return _unary(K.SIGMOID, x, _sigmoid)


def relu(x):
    """Elementwise ``max(x, 0)``; same shape and dtype.  The gradient at 0 is 0, as in PyTorch.

    Example:
        >>> tg.relu(tg.tensor([-1.0, 0.0, 2.0]))
        tensor([0., 0., 2.])
    """
    if x._value.dtype.kind == "b":
        raise RuntimeError("Boolean inputs not supported for relu")
    zero = x._value.dtype.type(0)
    return _unary(K.RELU, x, lambda v, out: np.maximum(v, zero, out=out))


def softplus(x, beta=1.0, threshold=20.0):
    def run(v, out):
        if v.dtype.kind != "f":
            v = v.astype(np.float64)
        bx = v * beta
        soft = np.log1p(np.exp(bx)) / beta
        return np.copyto(out, np.where(bx > threshold, v, soft)) if out is not None else \
            np.where(bx > threshold, v, soft)
    ip = 0
    if _records(x):
        ip = recording_tape(2 * x._value.size).put_faux((float(beta), float(threshold)))
    return _unary(K.SOFTPLUS, x, run, ip=ip)


def activation(code, x, c=0.0, params=None):
    """One record of an activation op of ``ops.activation`` (gelu, elu, hardtanh, ...) on
    tensor ``x``: ``c`` the record's scalar, ``params`` its two ``faux`` values (or None)."""
    if x._value.dtype.kind != "f":
        x = Tensor._make(x._value.astype(np.float64))
    p0, p1 = (0.0, 0.0) if params is None else (float(params[0]), float(params[1]))

    def run(v, out):
        return _activation.forward_array(code, v, out, c, p0, p1)
    ip = 0
    if params is not None and _records(x):
        ip = recording_tape(2 * x._value.size).put_faux((p0, p1))
    return _unary(code, x, run, ip=ip, fp=float(c))


def clamp(x, min=None, max=None):
    """Each element limited to ``[min, max]``; also spelled ``tg.clip``.

    Either bound may be None (not both), a number or a tensor (broadcast).  When ``min > max``
    every element becomes ``max``, as in PyTorch.  Shape and dtype: those of ``x``.  The
    gradient is 1 inside the interval (bounds included), 0 outside.

    Example:
        >>> tg.clamp(tg.tensor([-2.0, 0.5, 3.0]), min=0.0, max=1.0)
        tensor([0.0000, 0.5000, 1.0000])
        >>> tg.clip is tg.clamp
        True
    """
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None"
                           .replace("torch.", "tapegrad."))
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return named_node(_clamp_by_tensors(x, min, max), "ClampBackward0", x, min, max)
    return _clamp(K.CLAMP, x, min, max)


def _clamp_by_tensors(x, lo, hi):
    """``clamp`` with a tensor bound (or two), each value picked by comparisons so that its
    gradient goes where PyTorch's does: to x where ``lo <= x <= hi``, to lo where ``x < lo``
    (and ``lo < hi``), to hi where ``x > hi`` or ``hi < lo`` (every value is then hi); none
    where x is NaN (the result is NaN).  Two cases differ from PyTorch: where ``lo == hi``
    and ``x < lo`` PyTorch's gradient goes nowhere, tapegrad's to lo (a value with no
    gradient would need a record of its own); where x is NaN and ``hi < lo`` the value is hi
    (PyTorch's NaN).  Nested wheres, not a mask combined with logical_and, which a compiled
    call would have to guard."""
    lo = None if lo is None else as_tensor_arg(lo)
    hi = None if hi is None else as_tensor_arg(hi)
    out = x
    if hi is not None:
        out = where(_compare(np.less_equal, x, hi), x, math.nan)
    if lo is not None:
        out = where(_compare(np.greater_equal, x, lo), out, math.nan)
        out = where(_compare(np.less, x, lo), lo, out)
    if hi is not None:
        out = where(_compare(np.greater, x, hi), hi, out)
        if lo is not None:
            out = where(_compare(np.less, hi, lo), hi, out)
    return out


def _clamp(code, x, min, max):
    lo = -math.inf if min is None else min
    hi = math.inf if max is None else max

    def run(v, out):
        # a missing bound is None, not an infinity, which would make integers float
        res = np.clip(v, min, max, out=out)
        if lo > hi:  # PyTorch sets everything but nan to max when min > max
            res[v == v] = hi
        return res
    ip = 0
    if _records(x):
        ip = recording_tape(2 * x._value.size).put_faux((float(lo), float(hi)))
    return _unary(code, x, run, ip=ip)


def clamp_min(x, min):
    """Each element raised to at least ``min`` (a number or a tensor): ``clamp(x, min=min)``.

    Example:
        >>> tg.clamp_min(tg.tensor([-2.0, 0.5]), 0.0)
        tensor([0.0000, 0.5000])
    """
    if isinstance(min, Tensor):
        return named_node(_clamp_by_tensors(x, min, None), "ClampMinBackward1", x, min)
    return _clamp(K.CLAMP_MIN, x, min, None)


def clamp_max(x, max):
    """Each element lowered to at most ``max`` (a number or a tensor): ``clamp(x, max=max)``.

    Example:
        >>> tg.clamp_max(tg.tensor([-2.0, 0.5]), 0.0)
        tensor([-2.,  0.])
    """
    if isinstance(max, Tensor):
        return named_node(_clamp_by_tensors(x, None, max), "ClampMaxBackward1", x, max)
    return _clamp(K.CLAMP_MAX, x, None, max)


def _extreme_pair(code, sign, npfn, a, b):
    a = as_tensor_arg(a)
    b = as_tensor_arg(b)
    out = _binary(code, a, b, npfn)
    if out._tape is not None:
        out._tape.fp[out._r] = sign
    return out


def _np_maximum(u, v, out):
    # ``out`` by keyword: NumPy 2 deprecates a positional out for maximum/minimum
    return np.maximum(u, v, out=out)


def _np_minimum(u, v, out):
    return np.minimum(u, v, out=out)


def maximum(a, b):
    """Elementwise larger of ``a`` and ``b``, broadcast.

    Shape: the broadcast shape.  Where the two are equal the gradient is split evenly between
    them, as in PyTorch.  A NaN in either gives NaN.

    Example:
        >>> tg.maximum(tg.tensor([1.0, 5.0]), tg.tensor([3.0, 2.0]))
        tensor([3., 5.])
    """
    return _extreme_pair(K.MAXIMUM, 1.0, _np_maximum, a, b)


def minimum(a, b):
    """Elementwise smaller of ``a`` and ``b``, broadcast.

    Shape: the broadcast shape.  Where the two are equal the gradient is split evenly between
    them, as in PyTorch.  A NaN in either gives NaN.

    Example:
        >>> tg.minimum(tg.tensor([1.0, 5.0]), tg.tensor([3.0, 2.0]))
        tensor([1., 2.])
    """
    return _extreme_pair(K.MINIMUM, -1.0, _np_minimum, a, b)



def _pair(code, array_fn, a, b, name, integers=None):
    """A two-tensor function with broadcasting (either may be a number); integer operands
    give ``integers(u, v)`` where the function keeps integers (fmod), else a float result."""
    a = as_tensor_arg(a) if not isinstance(a, Tensor) else a
    b = as_tensor_arg(b) if not isinstance(b, Tensor) else b
    if a._value.dtype.kind in "iub" and b._value.dtype.kind in "iub":
        if integers is None:
            if name in ("hypot", "logaddexp"):
                raise NotImplementedError(
                    f"\"{name}_cpu\" not implemented for "
                    f"'{_promote.result_dtype(a, b).scalar_name}'")
            return _binary(code, a, b, array_fn)
        u, v = _promote.values(a, b)
        if np.any(v == 0):
            raise RuntimeError("ZeroDivisionError")
        return _plain(np.asarray(integers(u, v)))
    return _binary(code, a, b, array_fn)


def binary_cross_entropy(input, target):
    """The unreduced binary cross entropy of probabilities ``input`` against ``target``
    (tensors of one shape): the op ``nn.functional.binary_cross_entropy`` records, after its
    checks.  ``grad_fn``: ``<BinaryCrossEntropyBackward0>``."""
    return _binary(K.BINARY_CROSS_ENTROPY, input, target, K.binary_cross_entropy_array)


def atan2(input, other):
    """Elementwise angle of the point ``(other, input)`` in radians, in ``[-pi, pi]``:
    the arc tangent of ``input / other`` in the right quadrant; broadcast, float64.  Also
    ``arctan2``.  ``grad_fn``: ``<Atan2Backward0>``.

    Example:
        >>> tg.atan2(tg.tensor([1.0, 1.0]), tg.tensor([1.0, -1.0]))
        tensor([0.7854, 2.3562])
    """
    return _pair(K.ATAN2, K.atan2_array, input, other, "atan2")


arctan2 = atan2


def hypot(input, other):
    """Elementwise ``sqrt(input**2 + other**2)``, without overflow for large elements;
    broadcast.  ``grad_fn``: ``<HypotBackward0>``.

    Example:
        >>> tg.hypot(tg.tensor([3.0]), tg.tensor([4.0]))
        tensor([5.])
    """
    return _pair(K.HYPOT, K.hypot_array, input, other, "hypot")


def xlogy(input, other):
    """Elementwise ``input * log(other)``, 0 where ``input`` is 0 (nan where ``other`` is
    nan); broadcast, float64.  ``grad_fn``: ``<XlogyBackward0>``.

    Example:
        >>> tg.xlogy(tg.tensor([0.0, 2.0]), tg.tensor([0.0, np.e]))
        tensor([0., 2.])
    """
    return _pair(K.XLOGY, K.xlogy_array, input, other, "xlogy")


def xlog1py(input, other):  # noqa: A002 - PyTorch's argument names
    """Elementwise ``input * log1p(other)``, 0 where ``input`` is 0 (nan where ``other`` is
    nan); broadcast, float64.  ``grad_fn``: ``<SpecialXlog1PyBackward0>``.

    Example:
        >>> tg.xlog1py(tg.tensor([0.0, 2.0]), tg.tensor([-1.0, np.e - 1]))
        tensor([0., 2.])
    """
    return _pair(K.XLOG1PY, K.xlog1py_array, input, other, "xlog1py")

def fmod(input, other):
    """Elementwise remainder of ``input / other`` truncated toward zero: it has the sign of
    ``input`` (C's ``fmod``); integers stay integers.  ``grad_fn``: ``<FmodBackward1>``.

    Example:
        >>> tg.fmod(tg.tensor([-3.0, 3.0]), 2)
        tensor([-1.,  1.])
    """
    return _pair(K.FMOD, K.fmod_array, input, other, "fmod", integers=np.fmod)


def remainder(input, other):
    """Elementwise remainder of ``input / other`` floored: it has the sign of ``other``
    (Python's ``%``); integers stay integers.  ``grad_fn``: ``<RemainderBackward1>``.

    Example:
        >>> tg.remainder(tg.tensor([-3.0, 3.0]), 2)
        tensor([1., 1.])
    """
    if _is_scalar(input) and isinstance(other, Tensor):
        input = as_tensor_arg(np.asarray(input, dtype=other._value.dtype)
                              if other._value.dtype.kind == "f" else input)
    return _pair(K.REMAINDER, K.remainder_array, input, other, "remainder",
                 integers=np.remainder)


def copysign(input, other):
    """Elementwise ``|input|`` with the sign of ``other`` (of -0.0 too); broadcast, float64.
    ``grad_fn``: ``<CopysignBackward0>``.

    Example:
        >>> tg.copysign(tg.tensor([1.0, 2.0]), tg.tensor([-1.0, 0.0]))
        tensor([-1.,  2.])
    """
    return _pair(K.COPYSIGN, K.copysign_array, input, other, "copysign")


def logaddexp(input, other):
    """Elementwise ``log(exp(input) + exp(other))``, without overflow; broadcast.
    ``grad_fn``: ``<LogaddexpBackward0>``.

    Example:
        >>> tg.logaddexp(tg.tensor([0.0, 100.0]), tg.tensor([0.0, 100.0]))
        tensor([  0.6931, 100.6931])
    """
    return _pair(K.LOGADDEXP, K.logaddexp_array, input, other, "logaddexp")


def where(condition, input=None, other=None):
    """Elements of ``input`` where ``condition`` holds, else of ``other`` (broadcast).

    ``condition`` is a bool tensor; ``input`` and ``other`` tensors or numbers.  Shape: the
    broadcast shape of the three; dtype by PyTorch's promotion of ``input`` and ``other``.
    The gradient flows to ``input`` where the condition holds and to ``other`` elsewhere.
    ``where(condition)`` alone is ``condition.nonzero(as_tuple=True)``: a tuple of int64
    index tensors, one per dim.

    Example:
        >>> x = tg.tensor([-1.0, 2.0, -3.0])
        >>> tg.where(x > 0, x, 0.0)
        tensor([0., 2., 0.])
        >>> tg.where(x > 0)
        (tensor([1]),)
    """
    condition = as_tensor_arg(condition)
    if input is None and other is None:
        # the indices (and their number) depend on the values: a compiled call guards them
        read_value(condition, "where(condition)")
        v = condition._value
        # (a 0-d condition is one index along one dim, as nonzero(as_tuple=True) gives it)
        return tuple(_plain(i.astype(np.int64, copy=False))
                     for i in np.nonzero(v if v.ndim else v.reshape(1)))
    if condition._value.dtype.kind != "b":
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{condition.dtype.scalar_name}")
    a, b = (x if isinstance(x, Tensor) or _is_scalar(x) else as_tensor_arg(x)
            for x in (input, other))
    dt = _promote.result_dtype(a, b)
    a, b = (_plain(_promote.checked_cast(np.asarray(x), dt)) if _is_scalar(x) else x
            for x in (a, b))
    if not dt.is_floating_point and not (a._rg or b._rg):
        # (an integer branch that requires grad is a compiled function's traced data: kept
        # traced, not made a constant of the tape, so that the call runs eagerly)
        a, b = (_plain(v) for v in _promote.values(a, b))
    shape = broadcast_shape(broadcast_shape(condition._value.shape, a._value.shape),
                            b._value.shape)
    # recorded when the condition is traced too (a comparison of a compiled function's
    # input), even if neither branch requires grad: the mask must be recomputed on replay
    if not _records(a, b, condition):
        return _plain(np.where(condition._value, a._value, b._value))
    n = math.prod(shape)
    tape = recording_tape(5 * n + a._value.size + b._value.size + condition._value.size)
    rc = _expanded_ref(tape, condition, shape)
    r0 = _expanded_ref(tape, a, shape)
    r1 = _expanded_ref(tape, b, shape)
    off, out = _out(tape, shape, n)
    np.copyto(out, np.where(condition._value, a._value, b._value))
    # integer or bool branches (a traced condition): the handle keeps eager mode's dtype, the
    # arena holds floats
    return _result(tape, tape.push(K.WHERE, r0, r1, off, n, rc),
                   out if dt.is_floating_point else out.astype(dt.np))


_CMP_VARIANT = {np.less: 0, np.less_equal: 1, np.greater: 2, np.greater_equal: 3,
                np.equal: 4, np.not_equal: 5}


# Comparisons return bool tensors and carry no gradient.  Eagerly they are not recorded; while
# ``compile`` traces a function they are (CMP records), so that replay recomputes them.
def _compare(fn, a, b):
    vb = b._value if isinstance(b, Tensor) else b
    if not _is_scalar(vb) and not isinstance(b, Tensor):
        # a list or an array: a tensor, which a compiled call records as a constant (a
        # traced comparison once took an array for one number)
        b = as_tensor_arg(vb)
        vb = b._value
    if isinstance(vb, np.ndarray):
        broadcast_shape(a._value.shape, vb.shape)
    va = a._value
    if va.dtype.kind != "f":
        if isinstance(b, Tensor) and vb.dtype.kind != "f":
            va, vb = _promote.values(a, b)
        elif _is_scalar(vb):
            vb = _promote.scalar_for(va, vb)
    value = np.asarray(fn(va, vb))
    trace = state.trace
    if trace is None or fn not in _CMP_VARIANT or not (
            a._rg or (isinstance(b, Tensor) and b._rg)):
        if trace is not None and fn not in _CMP_VARIANT and (
                a._rg or (isinstance(b, Tensor) and b._rg)):
            trace.opaque(f"{fn.__name__} on traced values")
        return _plain(value)
    shape = value.shape
    n = value.size
    tape = recording_tape(4 * n + a._value.size + np.size(vb))
    r0 = _expanded_ref(tape, a, shape)
    if isinstance(b, Tensor):
        r1, c = _expanded_ref(tape, b, shape), 0.0
    else:
        r1, c = -1, float(vb)
    off, out = _out(tape, shape, n)
    np.copyto(out, value)
    t = _result(tape, tape.push(K.CMP, r0, r1, off, n, _CMP_VARIANT[fn], c), value)
    return t


# ---------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------


def _dims(x, dim):
    """Normalised, sorted, de-duplicated reduction dims (all dims for None)."""
    nd = x._value.ndim
    if dim is None:
        return tuple(range(nd))
    if isinstance(dim, (list, tuple)):
        ds = [_wrap_dim(d, nd) for d in dim]
        if len(set(ds)) != len(ds):
            raise RuntimeError(f"dim {ds[0]} appears multiple times in the list of dims")
        if not ds or not nd:
            return tuple(range(nd))  # a 0-d tensor's dim 0 / -1 is no axis at all
        return tuple(sorted(ds))
    d = _wrap_dim(dim, nd)
    return (d,) if nd else ()


def _ori(tape, x, dims):
    """Bring x onto the tape as an (outer, reduced, inner) block; permute if dims are split."""
    shape = x._value.shape
    r0 = _ref(tape, x)
    if not shape:
        return r0, 1, 1, 1
    if dims and dims != tuple(range(dims[0], dims[-1] + 1)):
        kept = [d for d in range(len(shape)) if d not in dims]
        perm = kept + list(dims)
        idx = np.arange(x._value.size).reshape(shape).transpose(perm)
        r0 = _gather_record(tape, r0, idx, idx.shape, 0, K.BCAST)[0]
        outer = math.prod([shape[d] for d in kept])
        red = math.prod([shape[d] for d in dims])
        return r0, outer, red, 1
    if not dims:
        return r0, x._value.size, 1, 1
    o = math.prod(shape[:dims[0]])
    red = math.prod(shape[dims[0]:dims[-1] + 1])
    i = math.prod(shape[dims[-1] + 1:])
    return r0, o, red, i


def _reduce(code, x, dims, keepdim, value, fp=0.0, extra=()):
    """Record a reduction whose value NumPy already computed (with keepdims=True)."""
    shape = value.shape if keepdim else tuple(
        s for d, s in enumerate(value.shape) if d not in dims)
    value = value.reshape(shape)
    if not (x._rg and state.grad_enabled):   # (_records for one tensor, written out)
        if x._rg and state.trace is not None:
            state.trace.opaque("an op under no_grad on traced values")
        return _plain(value)
    n = value.size
    tape = recording_tape(3 * x._value.size + n)
    r0, o, red, i = _ori(tape, x, dims)
    ip = tape.put_aux((o, red, i) + tuple(extra))
    off, out = _out(tape, shape, n)
    np.copyto(out, value)
    # a reduction of traced bool data (a comparison) keeps its eager dtype on the handle
    return _result(tape, tape.push(code, r0, -1, off, n, ip, fp),
                   out if value.dtype.kind == "f" else value)


def _along_dim(code, x, d, keepdim):
    """Record the sum (code SUM_DIM) or mean (MEAN_DIM, over a non-empty dim) of float
    tensor x over its dim d: ``_reduce``'s records, the value reduced straight into the
    arena, without the general path's bookkeeping of dims and shapes."""
    v = x._value
    shape = v.shape
    red = shape[d]
    head, tail = shape[:d], shape[d + 1:]
    o = math.prod(head)
    i = math.prod(tail)
    n = o * i
    tape = recording_tape(3 * v.size + n)
    r0 = _ref(tape, x)
    ip = tape.put_aux((o, red, i))
    off = tape.alloc(n)
    out = tape.vals[off:off + n]
    out_shape = head + (1,) + tail if keepdim else head + tail
    if len(out_shape) != 1:
        out = out.reshape(out_shape)
    tok = quiet_begin()
    try:
        np.add.reduce(v, axis=d, out=out, keepdims=keepdim)
        if code == K.MEAN_DIM:
            out /= red    # (the division the general path makes: the same bits)
    finally:
        quiet_end(tok)
    return _emit(tape, code, r0, -1, off, n, ip, 1.0 if code == K.SUM_DIM else 1.0 / red, out)


def _whole(code, x, value, fp):
    """Record the sum or mean (``code``) of all of float tensor x, whose value NumPy gave:
    ``_reduce``'s records for the commonest reduction (a loss), without its shape
    bookkeeping, which was half of a recorded sum of 100 values."""
    n = x._value.size
    tape = state.tape
    if tape is None or tape.finished or tape.top + n + 1 > tape.cap:
        tape = recording_tape(n + 1)
    r0 = x._r if x._tape is tape else _ref(tape, x)
    ip = tape.put_aux((1, n, 1))
    off = tape.top
    tape.top = off + 1
    vals = tape.vals
    vals[off] = value
    return _emit(tape, code, r0, -1, off, 1, ip, fp, vals[off:off + 1].reshape(()))


def _quietly(fn, *args, **kw):
    tok = quiet_begin()
    try:
        return fn(*args, **kw)
    finally:
        quiet_end(tok)


def _float_value(x):
    v = x._value
    return v if v.dtype.kind == "f" else v.astype(np.float64)


def _reduce_as(x, dtype):
    """x converted first, for a reduction's ``dtype=`` (PyTorch converts, then reduces)."""
    if dtype is None:
        return x
    dt = _dtype.resolve(dtype)
    if dt is None or dt.np == x._value.dtype:
        return x
    if x._rg:
        raise RuntimeError(f"Autograd not support dtype: {dt.scalar_name}")
    return _plain(_promote.cast(x._value, dt))


def sum(x, dim=None, keepdim=False, dtype=None):
    """Sum of all elements, or over ``dim`` (an int or a tuple of ints).

    Shape: ``()`` without ``dim``; else ``x``'s shape without the summed dims (kept as size 1
    with ``keepdim=True``).  Bool and integer tensors sum as int64 unless ``dtype`` is given.
    ``grad_fn``: ``<SumBackward0>`` (``<SumBackward1>`` with ``dim``).

    Example:
        >>> x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        >>> tg.sum(x)
        tensor(10., grad_fn=<SumBackward0>)
        >>> tg.sum(x, dim=0, keepdim=True)
        tensor([[4., 6.]], grad_fn=<SumBackward1>)
    """
    v = x._value
    if dim is None and dtype is None and x._rg and state.grad_enabled and v.dtype.kind == "f":
        # (axis=None is NumPy's reduction over every axis, the same loop as naming them all)
        return _whole(K.SUM, x, _quietly(np.add.reduce, v, axis=None), 1.0)
    if dim.__class__ is int and dtype is None and x._rg and state.grad_enabled and \
            v.dtype is _F64 and (keepdim is False or keepdim is True) and \
            -v.ndim <= dim < v.ndim:
        return _along_dim(K.SUM_DIM, x, dim + v.ndim if dim < 0 else dim, keepdim)
    x = _reduce_as(x, dtype)
    dims = _dims(x, dim)
    v = x._value
    if v.dtype.kind in "bu":   # NumPy would sum unsigned ints as uint64; PyTorch as int64
        v = v.astype(np.int64)
    value = np.asarray(_quietly(np.add.reduce, v, axis=dims, keepdims=True))
    if dtype is not None:   # the sum wraps in a narrow type as PyTorch's does
        value = _promote.cast(value, _dtype.resolve(dtype))
    code = K.SUM if dim is None else K.SUM_DIM
    return _reduce(code, x, dims, keepdim if dim is not None else False, value, 1.0)


def mean(x, dim=None, keepdim=False, dtype=None):
    """Arithmetic mean of all elements, or over ``dim`` (an int or a tuple of ints).

    Shape: as for ``sum``.  The input must be floating (or ``dtype`` given); an integer tensor
    raises, as in PyTorch.  The mean of no elements is nan.

    Example:
        >>> x = tg.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> tg.mean(x), tg.mean(x, dim=1)
        (tensor(2.5000), tensor([1.5000, 3.5000]))
    """
    x = _reduce_as(x, dtype)
    if x._value.dtype.kind != "f":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {x.dtype.scalar_name}")
    v = x._value
    if dim is None and x._rg and state.grad_enabled and v.size and v.dtype == np.float64:
        # np.mean's own steps, without its Python around them (8 µs on a small vector): the
        # same sum, divided by the count
        total = _quietly(np.add.reduce, v, axis=None)
        return _whole(K.MEAN, x, total / v.size, 1.0 / v.size)
    if dim.__class__ is int and x._rg and state.grad_enabled and v.dtype is _F64 and \
            (keepdim is False or keepdim is True) and -v.ndim <= dim < v.ndim and \
            v.shape[dim]:
        return _along_dim(K.MEAN_DIM, x, dim + v.ndim if dim < 0 else dim, keepdim)
    dims = _dims(x, dim)
    count = math.prod([x._value.shape[d] for d in dims])
    if count and v.dtype == np.float64:
        # (np.mean's steps for float64, as above: 10 µs of its Python on a small matrix)
        value = _quietly(np.add.reduce, v, axis=dims, keepdims=True) / count
    elif count:
        value = np.asarray(_quietly(np.mean, x._value, axis=dims, keepdims=True))
    else:  # NumPy would warn "Mean of empty slice"; PyTorch gives nan silently
        value = np.full([1 if d in dims else s for d, s in enumerate(x._value.shape)], math.nan)
    code = K.MEAN if dim is None else K.MEAN_DIM
    return _reduce(code, x, dims, keepdim if dim is not None else False, value,
                   1.0 / count if count else math.nan)


def prod(x, dim=None, keepdim=False, dtype=None):
    """Product of all elements, or along one ``dim`` (an int: a tuple raises, as in PyTorch).

    Shape: ``()`` without ``dim``; else ``x``'s shape without ``dim`` (size 1 with
    ``keepdim=True``).  The gradient is exact where elements are zero.

    Example:
        >>> x = tg.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> tg.prod(x), tg.prod(x, 1)
        (tensor(24.), tensor([ 2., 12.]))
    """
    if dim is not None and isinstance(dim, (list, tuple)):
        raise TypeError("prod(): argument 'dim' must be int, not tuple")
    x = _reduce_as(x, dtype)
    dims = _dims(x, dim)
    v = x._value
    value = np.asarray(_quietly(np.prod, v.astype(np.int64) if v.dtype.kind in "bu" else v,
                                axis=dims, keepdims=True))
    if dtype is not None:
        value = _promote.cast(value, _dtype.resolve(dtype))
    code = K.PROD if dim is None else K.PROD_DIM
    mode = 2 if x._value.ndim == 0 else (1 if dim is None else 0)
    return _reduce(code, x, dims, keepdim if dim is not None else False, value, extra=(mode,))




def _check_nonempty(x, name, dims):
    for d in dims:
        if x._value.shape[d] == 0:
            raise IndexError(
                f"{name}(): Expected reduction dim {d} to have non-zero size.")
    if x._value.size == 0 and not dims:
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
            "Specify the reduction dim with the 'dim' argument.")


def _extreme_of_two(x, dim, other, is_max):
    """``max(x, other=y)``: PyTorch's overload that is ``maximum(x, y)``."""
    name = "max" if is_max else "min"
    if dim is not None:
        raise TypeError(f"{name}() received an invalid combination of arguments - got both dim "
                        "and other")
    return maximum(x, other) if is_max else minimum(x, other)


def _extreme(x, dim, keepdim, is_max):
    name = "max" if is_max else "min"
    if dim is None:
        if x._value.size == 0:
            raise RuntimeError(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument.")
        value = np.asarray((np.max if is_max else np.min)(x._value, keepdims=True))
        return _reduce(K.MAX if is_max else K.MIN, x, _dims(x, None), False, value)
    if isinstance(dim, Tensor):
        return maximum(x, dim) if is_max else minimum(x, dim)
    _opaque_if_traced(x, f"{name}(dim) indices of traced values")
    d = _wrap_dim(dim, x._value.ndim)
    _check_nonempty(x, name, (d,) if x._value.ndim else ())
    v = x._value
    if v.ndim == 0:
        idx = np.zeros((), dtype=np.int64)
        value = v.copy()
        values = _reduce(K.MAX_DIM if is_max else K.MIN_DIM, x, (), True, value.reshape(()),
                         extra=(0,))
        return _return_type(name)(values, _plain(idx))
    arg = (np.argmax if is_max else np.argmin)(v, axis=d, keepdims=True)
    if v.dtype.kind == "f":
        # NaN wins, as in PyTorch: point at the first NaN of each row
        nan_rows = np.isnan(v).any(axis=d, keepdims=True)
        if nan_rows.any():
            first_nan = np.argmax(np.isnan(v), axis=d, keepdims=True)
            arg = np.where(nan_rows, first_nan, arg)
    value = np.take_along_axis(v, arg, axis=d)
    values = _reduce(K.MAX_DIM if is_max else K.MIN_DIM, x, (d,), keepdim, value,
                     extra=tuple(arg.reshape(-1).tolist()))
    idx = arg if keepdim else arg.reshape(value.shape[:d] + value.shape[d + 1:])
    return _return_type(name)(values, _plain(idx.astype(np.int64)))


def max(x, dim=None, keepdim=False, *, other=None):
    """Largest element; with ``dim``, the largest along ``dim`` and where it is.

    Without ``dim``: a 0-d tensor.  With ``dim``: a named tuple ``(values, indices)``, both of
    ``x``'s shape without ``dim`` (size 1 with ``keepdim=True``); ``indices`` are int64 and
    carry no gradient.  The tuple is a ``tapegrad.return_types.max``, printed as PyTorch
    prints its ``torch.return_types.max``.

    Example:
        >>> x = tg.tensor([[1.0, 5.0], [7.0, 2.0]])
        >>> tg.max(x)
        tensor(7.)
        >>> values, indices = tg.max(x, dim=1)
        >>> values, indices
        (tensor([5., 7.]), tensor([1, 0]))
    """
    if other is not None:
        return _extreme_of_two(x, dim, other, True)
    return _extreme(x, dim, keepdim, True)


def min(x, dim=None, keepdim=False, *, other=None):
    """Smallest element; with ``dim``, the smallest along ``dim`` and where it is.

    As ``max``: a 0-d tensor without ``dim``, else a named tuple ``(values, indices)``.

    Example:
        >>> x = tg.tensor([[1.0, 5.0], [7.0, 2.0]])
        >>> tg.min(x)
        tensor(1.)
        >>> tg.min(x, dim=0).indices
        tensor([0, 1])
    """
    if other is not None:
        return _extreme_of_two(x, dim, other, False)
    return _extreme(x, dim, keepdim, False)


def amax(x, dim=(), keepdim=False):
    """Largest value over ``dim`` (an int or a tuple; all dims when not given), without indices.

    Shape: ``x``'s shape without the reduced dims (size 1 with ``keepdim=True``).  Ties share
    the gradient evenly, as in PyTorch.

    Example:
        >>> tg.amax(tg.tensor([[1.0, 5.0], [7.0, 2.0]]), dim=1)
        tensor([5., 7.])
    """
    dims = _dims(x, dim if dim != () else None)
    _check_nonempty(x, "amax", dims)
    value = np.asarray(np.max(x._value, axis=dims, keepdims=True))
    return _reduce(K.AMAX, x, dims, keepdim, value)


def amin(x, dim=(), keepdim=False):
    """Smallest value over ``dim`` (an int or a tuple; all dims when not given), without indices.

    Shape: ``x``'s shape without the reduced dims (size 1 with ``keepdim=True``).  Ties share
    the gradient evenly, as in PyTorch.

    Example:
        >>> tg.amin(tg.tensor([[1.0, 5.0], [7.0, 2.0]]), dim=0)
        tensor([1., 2.])
    """
    dims = _dims(x, dim if dim != () else None)
    _check_nonempty(x, "amin", dims)
    value = np.asarray(np.min(x._value, axis=dims, keepdims=True))
    return _reduce(K.AMIN, x, dims, keepdim, value)


def _opaque_if_traced(x, what):
    if x._rg and state.trace is not None:
        state.trace.opaque(what)


def _no_bool(x, name):
    if x._value.dtype.kind == "b":
        raise RuntimeError(f"{name}(): does not support bool input")


def argmax(x, dim=None, keepdim=False):
    """Index of the largest element: into the flattened tensor without ``dim``, else along ``dim``.

    Shape: ``()`` without ``dim``, else ``x``'s shape without ``dim`` (size 1 with
    ``keepdim=True``); int64, no gradient.  The first index wins a tie.

    Example:
        >>> x = tg.tensor([[1, 5], [7, 2]])
        >>> tg.argmax(x), tg.argmax(x, dim=1)
        (tensor(2), tensor([1, 0]))
    """
    _no_bool(x, "argmax")
    _opaque_if_traced(x, "argmax of traced values")
    v = x._value
    if dim is None:
        return _plain(np.asarray(np.argmax(v), dtype=np.int64))
    d = _wrap_dim(dim, v.ndim)
    return _plain(np.argmax(v, axis=d, keepdims=keepdim).astype(np.int64))


def argmin(x, dim=None, keepdim=False):
    """Index of the smallest element: into the flattened tensor without ``dim``, else along ``dim``.

    Shape: ``()`` without ``dim``, else ``x``'s shape without ``dim`` (size 1 with
    ``keepdim=True``); int64, no gradient.

    Example:
        >>> tg.argmin(tg.tensor([[1, 5], [7, 2]]), dim=0)
        tensor([0, 1])
    """
    _no_bool(x, "argmin")
    _opaque_if_traced(x, "argmin of traced values")
    v = x._value
    if dim is None:
        return _plain(np.asarray(np.argmin(v), dtype=np.int64))
    d = _wrap_dim(dim, v.ndim)
    return _plain(np.argmin(v, axis=d, keepdims=keepdim).astype(np.int64))


def _correction(unbiased, correction):
    if correction is not None:
        return float(correction)
    if unbiased is None:
        return 1.0
    return 1.0 if unbiased else 0.0


def _var_std(x, dim, unbiased, keepdim, correction, is_std):
    if isinstance(dim, bool):  # var(True): the legacy positional ``unbiased``
        unbiased, dim = dim, None
    try:
        kind = x._value.dtype.kind
    except AttributeError:
        # PyTorch's TypeError, here rather than in a guard: a guard's frame would take the
        # stacklevel of this function's warning (see _argtypes._warns)
        raise _not_tensor("std" if is_std else "var", "input", 1, x) from None
    if kind != "f":
        raise RuntimeError("std and var only support floating point and complex dtypes")
    corr = _correction(unbiased, correction)
    dims = _dims(x, dim)
    v = _float_value(x)
    count = math.prod([v.shape[d] for d in dims])
    if count - corr <= 0:
        warnings.warn(
            f"{'std' if is_std else 'var'}(): degrees of freedom is <= 0. Correction should be "
            "strictly less than the reduction factor (input numel divided by output numel).",
            UserWarning, stacklevel=3)
    if count:
        # shifted by each slice's first value: the variance of a constant slice is exactly 0
        # (as PyTorch's Welford sums give it), not a rounding residue that std would divide by
        first = v[tuple(slice(0, 1) if d in dims else slice(None) for d in range(v.ndim))]
        value = np.asarray(_quietly(np.var, v - first, axis=dims, ddof=0, keepdims=True))
    else:  # NumPy would warn; the variance of nothing is nan
        value = np.full([1 if d in dims else s for d, s in enumerate(v.shape)], math.nan)
    value = _quietly(np.multiply, value, count / (count - corr) if count - corr > 0 else
                     (math.inf if count else math.nan))
    if count - corr <= 0:
        value = np.where(np.isnan(value), value, np.full_like(value, math.nan)) if count == 0 \
            else value
    if is_std:
        value = _quietly(np.sqrt, value)
    fp = 1.0 / (count - corr) if count - corr != 0 else math.inf
    full = dim is None or x._value.ndim == 0
    return _reduce(K.STD if is_std else K.VAR, x, dims, keepdim, np.asarray(value), fp,
                   extra=(1 if is_std else 0, 1 if full else 0))


def _numpy_names(named, dim, keepdim, fname):
    """``dim`` and ``keepdim`` given as NumPy's ``axis`` and ``keepdims``, which PyTorch's
    parser takes for them (``x.std(axis=1)``): for the functions that warn, which keep their
    own argument checks (``_argtypes.warns``), and so miss the guards' renaming."""
    for key, value in named.items():
        if key == "axis" and dim is None:
            dim = value
        elif key == "keepdims" and keepdim is False:
            keepdim = value
        else:
            raise TypeError(f"{fname}() got an unexpected keyword argument '{key}'")
    return dim, keepdim


def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None,
        **numpy_names):
    """Variance over all elements or over ``dim``, dividing by ``N - correction``.

    ``correction`` defaults to 1 (Bessel's correction); ``unbiased=False`` means
    ``correction=0``.  Shape: ``()`` without ``dim``, else ``x``'s shape without ``dim``
    (size 1 with ``keepdim=True``).  Floating input only.

    Example:
        >>> x = tg.tensor([1.0, 2.0, 3.0, 4.0])
        >>> tg.var(x), tg.var(x, correction=0)
        (tensor(1.6667), tensor(1.2500))
    """
    if numpy_names:
        dim, keepdim = _numpy_names(numpy_names, dim, keepdim, "var")
    return _var_std(x, dim, unbiased, keepdim, correction, False)


def std(x, dim=None, unbiased=None, keepdim=False, *, correction=None,
        **numpy_names):
    """Standard deviation over all elements or over ``dim``: ``sqrt(var(...))``.

    Arguments and shape as for ``var`` (``correction`` defaults to 1).

    Example:
        >>> tg.std(tg.tensor([[1.0, 3.0], [2.0, 2.0]]), dim=1)
        tensor([1.4142, 0.0000])
    """
    if numpy_names:
        dim, keepdim = _numpy_names(numpy_names, dim, keepdim, "std")
    return _var_std(x, dim, unbiased, keepdim, correction, True)


def logsumexp(x, dim, keepdim=False):
    """``log(sum(exp(x)))`` over ``dim``, computed without overflow.

    Shape: ``x``'s shape without ``dim`` (size 1 with ``keepdim=True``).  The gradient is
    ``softmax(x, dim)``.

    Example:
        >>> tg.logsumexp(tg.tensor([1000.0, 1000.0]), dim=0)
        tensor(1000.6931)
    """
    dims = _dims(x, dim)
    v = _float_value(x)
    if v.size == 0:
        value = np.full([1 if d in dims else s for d, s in enumerate(v.shape)], -math.inf)
    else:
        m = np.max(v, axis=dims, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        value = _quietly(lambda: np.log(np.sum(np.exp(v - m), axis=dims, keepdims=True)) + m)
    return _reduce(K.LOGSUMEXP, x, dims, keepdim, np.asarray(value))


def _softmax_value(v, d, log):
    m = np.max(v, axis=d, keepdims=True)
    z = v - m
    e = np.exp(z)
    s = np.sum(e, axis=d, keepdims=True)
    return z - np.log(s) if log else e / s


def _softmax(code, x, dim, log):
    if dim is None:
        raise TypeError("softmax() missing required argument 'dim'")
    v = _float_value(x)
    d = _wrap_dim(dim, v.ndim)
    if x._value.dtype.kind != "f":
        kernel = ("log_softmax" if log else "softmax") + (
            "_lastdim" if d == builtins.max(v.ndim - 1, 0) else "")
        raise NotImplementedError(
            f'"{kernel}_kernel_impl" not implemented for \'{x.dtype.scalar_name}\'')
    value = _quietly(_softmax_value, v, d if v.ndim else None, log) if v.size else v.copy()
    if not _records(x):
        return _plain(np.asarray(value))
    n = v.size
    tape = recording_tape(3 * n)
    r0, o, red, i = _ori(tape, x, (d,) if v.ndim else ())
    ip = tape.put_aux((o, red, i))
    off, out = _out(tape, v.shape, n)
    np.copyto(out, value)
    return _result(tape, tape.push(code, r0, -1, off, n, ip), out)


def softmax(x, dim=None, dtype=None):
    """``exp(x)`` normalised to sum to 1 along ``dim`` (required, as in PyTorch); ``dtype``:
    x is converted to it first (an integer tensor, which softmax refuses otherwise).

    Shape: that of ``x``; float64.  ``grad_fn``: ``<SoftmaxBackward0>``.

    Example:
        >>> tg.softmax(tg.tensor([[1.0, 1.0], [0.0, 1.0]]), dim=1)
        tensor([[0.5000, 0.5000],
                [0.2689, 0.7311]])
    """
    return _softmax(K.SOFTMAX, _reduce_as(x, dtype), dim, False)


def log_softmax(x, dim=None, dtype=None):
    """``log(softmax(x, dim))``, computed stably; ``dim`` is required; ``dtype`` as softmax's.

    Shape: that of ``x``; float64.  ``grad_fn``: ``<LogSoftmaxBackward0>``.

    Example:
        >>> tg.log_softmax(tg.tensor([1.0, 2.0]), dim=0)
        tensor([-1.3133, -0.3133])
    """
    return _softmax(K.LOG_SOFTMAX, _reduce_as(x, dtype), dim, True)


def norm(x, p="fro", dim=None, keepdim=False):
    """The ``p``-norm of all elements, or of each slice along ``dim``.

    ``p`` is ``"fro"`` (the default, 2-norm of the elements), a number (``inf`` for the
    largest absolute value); ``p=0`` and ``"nuc"`` are not supported.  Shape: ``()`` without
    ``dim``, else ``x``'s shape without ``dim`` (size 1 with ``keepdim=True``).  Floating input
    only.

    Example:
        >>> x = tg.tensor([[3.0, 4.0], [1.0, -1.0]])
        >>> tg.norm(x[0]), tg.norm(x, p=1, dim=1)
        (tensor(5.), tensor([7., 2.]))
    """
    if p == "fro" and isinstance(dim, (list, tuple)) and len(dim) > 2:
        raise RuntimeError("linalg.matrix_norm: dim must be a 2-tuple. Got "
                           + " ".join(str(d) for d in dim))
    if p == "fro" or p is None:
        p = 2.0
    if isinstance(p, str):
        raise RuntimeError(f"norm: p = {p!r} is not supported")
    p = float(p)
    if x._value.dtype.kind != "f":
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as "
                           f"input. Got {x.dtype.scalar_name}")
    if p == 0.0:
        raise RuntimeError("norm: p = 0 is not supported by tapegrad")
    dims = _dims(x, dim)
    v = _float_value(x)
    a = np.abs(v)
    if builtins.all(v.shape[d] == 1 for d in dims):
        # the norm of one element is |x| for every p, as PyTorch gives it (x**p could underflow)
        value = a.copy()
    elif p == math.inf:
        value = np.max(a, axis=dims, keepdims=True) if a.size else np.zeros(
            [1 if d in dims else s for d, s in enumerate(v.shape)])
    elif p == -math.inf:
        value = np.min(a, axis=dims, keepdims=True)
    elif p == 2.0:
        value = _quietly(lambda: np.sqrt(np.sum(a * a, axis=dims, keepdims=True)))
    elif p == 1.0:
        value = np.sum(a, axis=dims, keepdims=True)
    else:
        value = _quietly(lambda: np.sum(a ** p, axis=dims, keepdims=True) ** (1.0 / p))
    return _reduce(K.NORM, x, dims, keepdim, np.asarray(value), p)


# ---------------------------------------------------------------------------------------------
# Linear algebra
# ---------------------------------------------------------------------------------------------


def _mm_error(sa, sb):
    return RuntimeError(
        f"mat1 and mat2 shapes cannot be multiplied ({sa[0]}x{sa[1]} and {sb[0]}x{sb[1]})")


def _prod(shape):
    return math.prod(shape)


def _matmul_form(sa, sb, a_rg, b_rg, ta=None, tb=None):
    """The grad_fn variant PyTorch's matmul ends in for operands of shapes sa, sb (element
    strides ta, tb as PyTorch lays them out; None: row-major), raising its errors.

    PyTorch folds an N-D @ 1-D/2-D product (or 1-D/2-D @ N-D, transposed) into one mm/mv
    when the smaller operand requires grad or the larger one folds without a copy
    (``_matmul_folds``); otherwise it runs a broadcast bmm.  The path decides the last node
    (UnsafeView; Clone or Transpose for a transposed fold) and the text of a size mismatch.
    """
    da, db = len(sa), len(sb)
    if da <= 2 and db <= 2:
        return {(1, 1): 1, (2, 1): 2, (1, 2): 3, (2, 2): 0}[da, db]
    if da == 3 and db == 3 and sa[0] != sb[0]:
        # a batch of one that requires grad is squeezed away first
        if sa[0] == 1 and a_rg:
            return _matmul_form(sa[1:], sb, a_rg, b_rg, ta and ta[1:], tb)
        if sb[0] == 1 and b_rg:
            return _matmul_form(sa, sb[1:], a_rg, b_rg, ta, tb and tb[1:])
    if _matmul_folds(sa, sb, a_rg, b_rg, ta, tb):
        transpose = db > da
        t1 = sb[:-2] + (sb[-1], sb[-2]) if transpose else sa
        t2 = (sa[1], sa[0]) if transpose and da == 2 else (sa if transpose else sb)
        rows = _prod(t1[:-1])
        if len(t2) == 2:
            if t1[-1] != t2[0]:
                raise _mm_error((rows, t1[-1]), t2)
            if not transpose:
                return 4
            # the product is transposed back: a copy (Clone), unless the transpose is
            # already contiguous, i.e. one of its two sides is 1
            return 6 if t1[-2] == 1 or t2[1] == 1 else 5
        if t1[-1] != t2[0]:
            raise RuntimeError(f"size mismatch, got input ({rows}), mat ({rows}x{t1[-1]}), "
                               f"vec ({t2[0]})")
        return 4
    k1 = sa[-1]
    k2 = sb[-2] if db > 1 else sb[0]
    batch = broadcast_shape(sa[:builtins.max(da - 2, 0)], sb[:builtins.max(db - 2, 0)])
    if k1 != k2:
        bsz = _prod(batch)
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{bsz}, {k1}] but got: [{bsz}, {k2}].")
    return 4


def _row_major(shape):
    """The element strides of a row-major array of ``shape``."""
    strides, step = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = step
        step *= shape[i]
    return tuple(strides)


def _mT(shape, strides):
    """Shape and strides with the last two dims swapped (``x.mT``)."""
    return (shape[:-2] + (shape[-1], shape[-2]),
            strides[:-2] + (strides[-1], strides[-2]))


def _merge_strictly(shape, strides):
    """Whether the dims before the last merge into one without a copy, each stride the
    next one's times its size (PyTorch's test before folding)."""
    return all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(len(shape) - 2))


def _views_as_rows(shape, strides):
    """Whether ``reshape(-1, shape[-1])`` is a view: the dims before the last, passing those
    of size 1, each of the next one's stride times its size (or nothing to view)."""
    if _prod(shape) == 0:
        return True
    dims = [(n, s) for n, s in zip(shape[:-1], strides[:-1]) if n != 1]
    return all(dims[i][1] == dims[i + 1][1] * dims[i + 1][0] for i in range(len(dims) - 1))


def _matmul_folds(sa, sb, a_rg, b_rg, ta=None, tb=None):
    """Whether PyTorch folds this product (of shapes past its squeeze) into one mm/mv: an
    N-D operand times a 1-D or 2-D one, when the smaller requires grad, or when the larger
    (transposed, if on the right) folds into rows without a copy and no 2-D left operand
    would make the result a transposed copy."""
    da, db = len(sa), len(sb)
    larger_left = da >= db
    if not (builtins.max(da, db) >= 3 and (db if larger_left else da) <= 2):
        return False
    if b_rg if larger_left else a_rg:
        return True
    if da == 2:
        return False
    if larger_left:
        t1, s1 = sa, ta or _row_major(sa)
    else:
        t1, s1 = _mT(sb, tb or _row_major(sb))
    return _prod(t1) == 0 or _merge_strictly(t1, s1)


# What PyTorch's matmul shows beneath its last node, as nested (node name, inputs) with the
# operands as 0 and 1: its fold into one mm/mv and its broadcast bmm are several ops, each a
# node (UnsafeViewBackward0 -> MmBackward0 -> ViewBackward0 -> a).  tapegrad computes the
# product as one record; autograd.Node shows these nodes above the record's inputs.
_UNSQUEEZED = (("MmBackward0", (("UnsqueezeBackward0", (0,)), 1)),)


@functools.lru_cache(maxsize=1024)
def matmul_inner_nodes(sa, sb, a_rg, b_rg, ta=None, tb=None):
    """The next_functions of a product's last node for operand shapes sa, sb (strides ta,
    tb; None: row-major; which of them require grad: a_rg, b_rg), as nested (name, inputs);
    None where they are the operands themselves (dot, mv, mm).  The decisions are
    ``_matmul_form``'s."""
    da, db = len(sa), len(sb)
    if da <= 2 and db <= 2:
        return _UNSQUEEZED if (da, db) == (1, 2) else None
    ta, tb = ta or _row_major(sa), tb or _row_major(sb)
    a_node, b_node = 0, 1
    if da == 3 and db == 3 and sa[0] != sb[0]:
        # a batch of one that requires grad is squeezed away first (SqueezeBackward1)
        if sa[0] == 1 and a_rg:
            a_node, sa, ta, da = ("SqueezeBackward1", (0,)), sa[1:], ta[1:], 2
        elif sb[0] == 1 and b_rg:
            b_node, sb, tb, db = ("SqueezeBackward1", (1,)), sb[1:], tb[1:], 2
    if _matmul_folds(sa, sb, a_rg, b_rg, ta, tb):
        if da >= db:
            # a's rows (a view, or a copy where they are no strided pattern) times b
            rows = _as_rows(a_node, sa, ta)
            return (("MmBackward0" if db == 2 else "MvBackward0", (rows, b_node)),)
        # transposed: b.mT's rows times a.t() (or a), the product viewed and transposed
        # back (and copied, unless that transpose is contiguous)
        rows = _as_rows(("TransposeBackward0", (b_node,)), *_mT(sb, tb))
        t2 = ("TBackward0", (a_node,)) if da == 2 else a_node
        product = ("MmBackward0" if da == 2 else "MvBackward0", (rows, t2))
        if da == 1:
            return (product,)
        viewed = ("UnsafeViewBackward0", (product,))
        return ((viewed,) if sb[-1] == 1 or sa[0] == 1 else
                (("TransposeBackward0", (viewed,)),))
    # the broadcast bmm: each operand expanded to the batch and viewed (or copied) as a
    # stack of matrices
    a2, ta2 = (sa, ta) if da > 1 else ((1,) + sa, (sa[0],) + ta)
    b2, tb2 = (sb, tb) if db > 1 else (sb + (1,), tb + (1,))
    batch = broadcast_shape(a2[:-2], b2[:-2])
    # (a vector on the right is unsqueezed first, and the product's last dim squeezed
    # away; one on the left is expanded as it is)
    b_node = b_node if db > 1 else ("UnsqueezeBackward0", (b_node,))
    product = ("BmmBackward0", (_expanded_stack(a_node, a2, ta2, batch),
                                _expanded_stack(b_node, b2, tb2, batch)))
    return (product if db > 1 else ("SqueezeBackward1", (product,)),)


def _contiguous(shape, strides):
    """PyTorch's ``is_contiguous()``: row-major strides, those of dims of size 1 aside."""
    step = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 0:
            return True
        if n != 1 and s != step:
            return False
        step *= n
    return True


def _reshaped_node(node, shape, strides, viewable):
    """The node of PyTorch's ``reshape`` of an operand: ``view`` of a contiguous one,
    ``_reshape_alias`` of another ``viewable`` one, otherwise a copy (Clone, then
    UnsafeView)."""
    if _contiguous(shape, strides):
        return ("ViewBackward0", (node,))
    if viewable:
        return ("ReshapeAliasBackward0", (node,))
    return ("UnsafeViewBackward0", (("CloneBackward0", (node,)),))


def _as_rows(node, shape, strides):
    """``x.reshape(-1, k)`` of an operand (its node): see ``_reshaped_node``."""
    return _reshaped_node(node, shape, strides, _views_as_rows(shape, strides))


def _expanded_stack(node, shape, strides, batch):
    """An operand of ``shape`` and ``strides`` expanded to ``batch`` + its matrix dims, then
    reshaped to one batch dim: a view where the expanded batch dims merge (each stride the
    next one's times its size, passing dims of size 1), a copy otherwise."""
    lead = len(batch) - (len(shape) - 2)
    expanded = [0 if i < lead or shape[i - lead] == 1 else strides[i - lead]
                for i in range(len(batch))]
    dims = [(size, stride) for size, stride in zip(batch, expanded) if size != 1]
    merges = _prod(batch) == 0 or \
        all(dims[i][1] == dims[i + 1][1] * dims[i + 1][0] for i in range(len(dims) - 1))
    return _reshaped_node(("ExpandBackward0", (node,)), tuple(batch) + shape[-2:],
                          tuple(expanded) + strides[-2:], merges)


def _layout(t):
    """Tensor t's element strides as PyTorch lays it out, where they are not row-major: a
    view's, where its elements are a strided pattern of its root's memory; else None."""
    link = t._alias
    if type(link) is not ViewOf or link.index is None:
        return None
    root = link.root
    if root is None:
        return None
    memory = strided_view(root._value, link.index, t._value.shape)
    if memory is None:
        return None
    shape = t._value.shape
    strides = [s // memory.itemsize for s in memory.strides]
    # a dim of size 1 has no stride of its own in NumPy's view (it gives 0); PyTorch's is
    # the one it was made with, which for a dim made in a row-major layout (and so most
    # often) is the next dim's stride times its size
    for i in range(len(shape) - 1, -1, -1):
        if shape[i] == 1:
            strides[i] = strides[i + 1] * shape[i + 1] if i + 1 < len(shape) else 1
    strides = tuple(strides)
    return None if strides == _row_major(shape) else strides


def matmul(a, b):
    """Matrix product with NumPy/PyTorch semantics: 1-D, 2-D and broadcast batched operands.

    Shapes: ``(n,) @ (n,)`` gives ``()``; ``(m, n) @ (n,)`` gives ``(m,)``; ``(n,) @ (n, p)``
    gives ``(p,)``; ``(..., m, n) @ (..., n, p)`` gives ``(broadcast(...), m, p)``.  Both
    operands must have the same dtype.  ``tg.mm``, ``tg.bmm``, ``tg.dot`` and ``tg.mv`` are
    this function for the shapes each takes, and raise for others as PyTorch's do.

    Example:
        >>> a = tg.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> tg.matmul(a, tg.tensor([1.0, 1.0]))
        tensor([3., 7.])
        >>> tg.matmul(tg.ones(5, 2, 3), tg.ones(3, 4)).shape
        tapegrad.Size([5, 2, 4])
    """
    a = as_tensor_arg(a)
    b = as_tensor_arg(b)
    sa, sb = a._value.shape, b._value.shape
    if not sa or not sb:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {len(sa)}D and "
            f"{len(sb)}D")
    if a._value.dtype != b._value.dtype:
        names = _dtype.C_TYPE_NAMES
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: {names[a.dtype.name]} != "
            f"{names[b.dtype.name]}")
    if a._value.dtype.kind == "b":
        # PyTorch names the kernel the operands fold into: (.., k) @ (k, n) is one addmm
        kernel = ("dot" if len(sa) == 1 else "addmv_impl_cpu") if len(sb) == 1 else \
            ("addmm_impl_cpu_" if len(sb) == 2 else "bmm")
        raise NotImplementedError(f'"{kernel}" not implemented for \'Bool\'')
    trace = state.trace
    a_rg, b_rg = (a._rg, b._rg) if trace is None else \
        (a._rg and not trace.is_untracked(a), b._rg and not trace.is_untracked(b))
    # (how PyTorch would lay the operands out decides its fold, where one has 3 dims or more)
    ta, tb = (_layout(a), _layout(b)) if len(sa) > 2 or len(sb) > 2 else (None, None)
    form = _matmul_form(sa, sb, a_rg, b_rg, ta, tb)
    # the (variant, B, M, K, N) view of the product and how operands are laid out
    if len(sa) == 1 and len(sb) == 1:
        if sa[0] != sb[0]:
            raise RuntimeError(
                f"inconsistent tensor size, expected tensor [{sa[0]}] and src [{sb[0]}] to have "
                f"the same number of elements, but got {sa[0]} and {sb[0]} elements respectively")
        variant, bsz, m, k, n, shape = 1, 1, 1, sa[0], 1, ()
        ea, eb = sa, sb
    elif len(sa) == 2 and len(sb) == 1:
        if sa[1] != sb[0]:
            raise RuntimeError(f"size mismatch, got input ({sa[0]}), mat ({sa[0]}x{sa[1]}), "
                               f"vec ({sb[0]})")
        variant, bsz, m, k, n, shape = 2, 1, sa[0], sa[1], 1, (sa[0],)
        ea, eb = sa, sb
    elif len(sa) == 1 and len(sb) == 2:
        if sa[0] != sb[0]:
            raise _mm_error((1, sa[0]), sb)
        variant, bsz, m, k, n, shape = 3, 1, 1, sa[0], sb[1], (sb[1],)
        ea, eb = sa, sb
    elif len(sa) == 2 and len(sb) == 2:
        if sa[1] != sb[0]:
            raise _mm_error(sa, sb)
        variant, bsz, m, k, n, shape = 0, 1, sa[0], sa[1], sb[1], (sa[0], sb[1])
        ea, eb = sa, sb
    elif len(sb) <= 2 and len(sa) > 2:
        # fold the batch into the rows: (..., m, k) @ (k, n) is one (B*m, k) @ (k, n)
        kb = sb[0]
        if sa[-1] != kb:
            raise _mm_error((math.prod(sa[:-1]), sa[-1]), sb if len(sb) == 2 else (kb, 1))
        rows = math.prod(sa[:-1])
        nn = sb[1] if len(sb) == 2 else 1
        variant, bsz, m, k, n = 4, 1, rows, sa[-1], nn
        shape = sa[:-1] + ((sb[1],) if len(sb) == 2 else ())
        ea, eb = sa, sb
    else:
        a2 = sa if len(sa) > 1 else (1,) + sa
        b2 = sb if len(sb) > 1 else sb + (1,)
        if a2[-1] != b2[-2]:
            raise RuntimeError(
                f"Expected size for first two dimensions of batch2 tensor to be: "
                f"[{math.prod(a2[:-2])}, {a2[-1]}] but got: "
                f"[{math.prod(b2[:-2])}, {b2[-2]}].")
        batch = broadcast_shape(a2[:-2], b2[:-2])
        m, k, n = a2[-2], a2[-1], b2[-1]
        bsz = math.prod(batch)
        shape = batch + ((m,) if len(sa) > 1 else ()) + ((n,) if len(sb) > 1 else ())
        ea, eb = batch + (m, k), batch + (k, n)
    va, vb = a._value, b._value
    folded = len(sa) > 2 and len(sb) <= 2
    if folded:
        # (..., m, k) @ (k, n) as one (rows, k) @ (k, n) product, as PyTorch folds it: one
        # BLAS call instead of one per matrix (128 16x16 products: 22 -> 18 µs), and
        # PyTorch's rounding where a stack of products rounds otherwise
        va = va.reshape(m, k)
    recorded = _records(a, b)
    if not (recorded and va.dtype is _F64 and vb.dtype is _F64 and shape):
        value = _quietly(np.matmul, va, vb)
        if folded:
            value = value.reshape(shape)
        if not recorded:
            return _plain(np.asarray(value))
    else:
        value = None    # (computed below straight into the record's slot of the arena)
    size = bsz * m * n
    tape = recording_tape(3 * (size + a._value.size + b._value.size) + bsz * (m * k + k * n))
    r0 = _operand_in_place(tape, a) if ea == sa else -1
    if r0 < 0:
        r0 = _ref(tape, a)
    if ea != sa:
        a_view = Tensor._make(a._value.reshape(ea[-2:] if len(sa) == 1 else sa))
        idx = np.broadcast_to(np.arange(a._value.size).reshape(a_view._value.shape), ea)
        r0 = _gather_record(tape, r0, idx, ea, 0, K.BCAST)[0]
    r1 = _operand_in_place(tape, b) if eb == sb else -1
    if r1 < 0:
        r1 = _ref(tape, b)
    if eb != sb:
        b_shape = sb if len(sb) > 1 else sb + (1,)
        idx = np.broadcast_to(np.arange(b._value.size).reshape(b_shape), eb)
        r1 = _gather_record(tape, r1, idx, eb, 0, K.BCAST)[0]
    ip = tape.put_aux((form, bsz, m, k, n))
    inner = matmul_inner_nodes(sa, sb, a_rg, b_rg, ta, tb)
    off, out = _out(tape, shape, size)
    if value is None:
        _quietly(np.matmul, va, vb,
                 out=out.reshape((m, n) if len(sb) == 2 else (m,)) if folded else out)
    else:
        np.copyto(out, value)
    r = tape.push(K.MATMUL, r0, r1, off, size, ip)
    if inner is not None:
        if tape.inner_nodes is None:
            tape.inner_nodes = {}
        tape.inner_nodes[r] = inner
    return _result(tape, r, out)


# ---------------------------------------------------------------------------------------------
# Structure
# ---------------------------------------------------------------------------------------------
V_EXPAND, V_SELECT, V_SLICE, V_INDEX, V_PERMUTE, V_TRANSPOSE, V_T = 1, 2, 3, 4, 5, 6, 7
V_ALIAS, V_UNSQUEEZE, V_SQUEEZE, V_SQUEEZE_DIM, V_VIEW, V_CLONE = 8, 9, 10, 11, 12, 13
V_SQUEEZE_DIMS = 15


def _reshaped(x, shape, variant):
    """Same values in the same flat order, new shape."""
    v = x._value
    if x._rg and state.grad_enabled and v.dtype is _F64:
        # the everyday case, a float tensor that requires grad: the records below in one
        # pass, the value copied straight into the arena
        n = v.size
        tape = recording_tape(2 * n)
        r0 = _ref(tape, x)
        ip = tape.put_aux((variant,))
        off = tape.alloc(n)
        out = tape.vals[off:off + n]
        out[...] = v.reshape(-1)
        if len(shape) != 1:
            out = out.reshape(shape)
        t = _emit(tape, K.RESHAPE, r0, -1, off, n, ip, 0.0, out)
        if variant not in _RESHAPE_VIEWS:
            return t
        tape.views[t._r] = (shape, None)    # (Tape.views)
        return note_view(t, x, None)
    value = v.reshape(shape)
    if not _records(x):
        t = _plain(value)
        return note_view(t, x, None) if variant in _RESHAPE_VIEWS else t
    n = value.size
    tape = recording_tape(2 * n)
    r0 = _ref(tape, x)
    ip = tape.put_aux((variant,))
    off, out = _out(tape, shape, n)
    np.copyto(out, value)
    r = tape.push(K.RESHAPE, r0, -1, off, n, ip)
    # traced integer or bool data keeps its eager dtype on the handle (the arena holds floats)
    t = _result(tape, r, out if value.dtype.kind == "f" else value)
    if variant not in _RESHAPE_VIEWS:
        return t
    tape.views[r] = (shape, None)    # (Tape.views)
    return note_view(t, x, None)


def _infer_shape(shape, numel):
    known = 1
    for s in shape:
        if s.__class__ is not int or s < 0:
            break
        known *= s
    else:
        if known == numel:    # (sizes all given, as plain ints: nothing to infer)
            return shape if shape.__class__ is tuple else tuple(shape)
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    for i, s in enumerate(shape):
        if not isinstance(s, (int, np.integer)) or (s < 0 and s != -1):
            raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape {shape}")
    known = math.prod([s for s in shape if s != -1])
    if neg:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(int(s) for s in shape)


def _shape_args(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def _int_sizes(args, fname, argname):
    """The sizes of ``x.fname(*args)`` (separate ints, or one tuple or list of them) as a
    tuple of ints; integers of other kinds (NumPy's, a one-element integer tensor) taken as
    PyTorch's parser takes them, anything else refused with its TypeError."""
    sizes = _shape_args(args)
    for s in sizes:
        if s.__class__ is not int:
            return _checked_sizes(args, sizes, fname, argname)
    return sizes


def _int_like(s):
    """s as an int where PyTorch's parser takes it for one, else None (a bool is not)."""
    if isinstance(s, bool) or isinstance(s, (float, np.floating)):
        return None
    if isinstance(s, (int, np.integer)):
        return int(s)
    if isinstance(s, Tensor) and s._value.dtype.kind in "iu" and s._value.size == 1:
        read_value(s, "a size given as a tensor")    # (a compiled call guards it)
        return int(s._value.reshape(()))
    return None


def _parser_type_name(s):
    t = type(s)
    if t is Tensor:
        return "Tensor"
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def _checked_sizes(args, sizes, fname, argname):
    """_int_sizes past its fast path: the errors PyTorch's parser gives.  It decides on the
    first entry: if that is an integer the rest must be ("failed to unpack", counting from
    1); if not, no form matches -- view has two forms (a dtype, sizes), the others one."""
    ints = [_int_like(s) for s in sizes]
    one_sequence = len(args) == 1 and isinstance(args[0], (tuple, list))
    if ints and ints[0] is not None:
        for i, k in enumerate(ints):
            if k is None:
                raise TypeError(
                    f"{fname}(): argument '{argname}' failed to unpack the object at pos "
                    f"{i + 1} with error \"type must be tuple of ints,but got "
                    f"{_parser_type_name(sizes[i])}\"")
        return tuple(ints)
    first = _parser_type_name(sizes[0]) if sizes else None
    if fname == "view":
        if len(args) > 1:
            got, why = ", ".join(_parser_type_name(a) for a in args), ""
        else:
            got = _parser_type_name(args[0])
            shown = got if not one_sequence else \
                f"{got} of ({', '.join(_parser_type_name(s) for s in sizes)})"
            why = f"\n      didn't match because some of the arguments have invalid types: " \
                  f"(!{shown}!)"
        raise TypeError(f"view() received an invalid combination of arguments - got ({got}), "
                        f"but expected one of:\n * (tapegrad.dtype dtype){why}\n"
                        f" * (tuple of ints size){why}\n")
    if len(args) > 1:
        raise TypeError(f"{fname}() takes 1 positional argument but {len(args)} were given")
    if not one_sequence:
        raise TypeError(f"{fname}(): argument '{argname}' (position 1) must be tuple of ints, "
                        f"not {_parser_type_name(args[0])}")
    raise TypeError(f"{fname}(): argument '{argname}' (position 1) must be tuple of ints, but "
                    f"found element of type {first} at pos 0")


def _keyword_sizes(sizes, named, keyword, fname):
    """The sizes of ``fn(x, *sizes)``, given positionally or as the keyword ``keyword``, which
    PyTorch's parser also takes (``x.view(size=(3, 2))``, ``torch.permute(x, dims=(1, 0))``)."""
    for key in named:
        if key != keyword or sizes:
            raise TypeError(f"{fname}() got an unexpected keyword argument '{key}'")
    return (named[keyword],)


V_UNSAFE_VIEW = 16
V_RESHAPE_ALIAS = 17
V_AS_STRIDED = 18    # a view read again from its base after an in-place change through an alias
V_DIAGONAL, V_SPLIT, V_SPLIT_WITH_SIZES, V_UNBIND = 19, 20, 21, 22
V_INDEX_SELECT, V_FLIP, V_ROLL, V_REPEAT, V_GATHER, V_TAKE = 23, 24, 25, 26, 27, 28
V_UNFOLD = 46
# PyTorch's nodes of the in-place view ops (inplace.py): squeeze_ (all, a dim, dims),
# unsqueeze_, t_, transpose_
V_SQUEEZE_ALL_, V_SQUEEZE_DIM_, V_SQUEEZE_DIMS_, V_UNSQUEEZE_, V_T_ = 38, 39, 40, 41, 42
V_TRANSPOSE_ = 47
# identity copies that name a composite as PyTorch's one node (linalg.py)
V_RENORM, V_LU_UNPACK, V_LINALG_LU, V_LU_SOLVE = 54, 55, 56, 57
V_CHOLESKY_INVERSE, V_TRIANGULAR_SOLVE = 58, 59
# renamed results of composed ops, and the copies that split or narrow (not views)
V_ANGLE, V_NEXTAFTER, V_UNSAFE_SPLIT, V_UNSAFE_SPLIT_WITH_SIZES = 60, 61, 62, 63
V_NARROW_COPY = 64
V_AS_STRIDED_ = 65   # as_strided_'s node (strided_views.py), the in-place view op's own
# gathers that PyTorch makes as views (strided), not as new tensors
_VIEW_VARIANTS = frozenset({V_EXPAND, V_SELECT, V_SLICE, V_PERMUTE, V_TRANSPOSE, V_T, V_ALIAS,
                            V_UNSQUEEZE, V_AS_STRIDED, V_DIAGONAL, V_SPLIT,
                            V_SPLIT_WITH_SIZES, V_UNBIND, V_UNFOLD})


# reshapes that PyTorch makes as views: the same elements in the same order, new shape
_RESHAPE_VIEWS = frozenset({V_VIEW, V_RESHAPE_ALIAS, V_SQUEEZE, V_SQUEEZE_DIM, V_SQUEEZE_DIMS,
                            V_UNSQUEEZE})


def _view_offsets(x):
    """Offsets into its root of the elements of x when x is a view (views.py), flat; None
    when x is a tensor of its own."""
    link = x._alias
    if type(link) is not ViewOf:
        return None
    return link.positions(x._value.shape).reshape(-1)


def _strides_of(offsets, shape):
    """Element strides making offsets[i] = offsets[0] + sum(i_k * stride_k), or None."""
    grid = offsets.reshape(shape)
    strides = []
    for k, s in enumerate(shape):
        if s > 1:
            unit = [0] * len(shape)
            unit[k] = 1
            strides.append(int(grid[tuple(unit)] - grid[(0,) * len(shape)]))
        else:
            strides.append(0)
    expect = grid.flat[0] + builtins.sum(np.arange(s).reshape([-1 if j == k else 1
                                                      for j in range(len(shape))]) * st
                                for k, (s, st) in enumerate(zip(shape, strides)))
    return strides if np.array_equal(np.broadcast_to(expect, shape), grid) else None


def _viewable(old, strides, new):
    """Whether a tensor of shape old and these strides can be seen with shape new without a
    copy (the rule PyTorch's reshape applies before it falls back to a copy)."""
    if not old:
        return True
    view_d = len(new) - 1
    chunk = strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(old) - 1, -1, -1):
        tensor_numel *= old[d]
        if d == 0 or (old[d - 1] != 1 and strides[d - 1] != tensor_numel * chunk):
            while view_d >= 0 and (view_numel < tensor_numel or new[view_d] == 1):
                view_numel *= new[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return False
            if d > 0:
                chunk = strides[d - 1]
                tensor_numel = view_numel = 1
    return view_d == -1


def _view_or_copy(x, shape):
    """reshape's node, as PyTorch picks it: a view of a contiguous tensor, an alias with new
    strides of a viewable one, else a clone and an unsafe view of the copy."""
    if type(x._alias) is not ViewOf:     # (a tensor of its own: _view_offsets' None)
        return _reshaped(x, shape, V_VIEW)
    offsets = _view_offsets(x) if x._value.size > 1 else None
    if offsets is None or bool((np.diff(offsets) == 1).all()):
        return _reshaped(x, shape, V_VIEW)
    strides = _strides_of(offsets, x._value.shape)
    if strides is not None and _viewable(x._value.shape, strides, shape):
        return _reshaped(x, shape, V_RESHAPE_ALIAS)
    return _reshaped(clone(x), shape, V_UNSAFE_VIEW)


def _strided(x):
    offsets = _view_offsets(x) if x._value.size > 1 else None
    return offsets is not None and not bool((np.diff(offsets) == 1).all())


def contiguous(x, memory_format=None):
    _device.check_memory_format(memory_format, x._value.ndim, "contiguous")
    return clone(x) if _strided(x) else x


def reshape(x, *shape, **named):
    """The elements of ``x`` in a new shape (one entry may be -1: inferred).

    The shape may be given as a tuple or as separate ints.  The result aliases ``x`` where
    PyTorch's is a view (an in-place change through either is seen by both), else it is a copy.
    Shape: the one asked for; the number of elements must not change.

    Example:
        >>> tg.reshape(tg.arange(6), (2, -1))
        tensor([[0, 1, 2],
                [3, 4, 5]])
    """
    if named:
        shape = _keyword_sizes(shape, named, "shape", "reshape")
    return _view_or_copy(x, _infer_shape(_int_sizes(shape, "reshape", "shape"), x._value.size))


def view(x, *shape, **named):
    """``x.view(shape)``: as reshape, but a tensor whose elements cannot be seen with the new
    shape without a copy (a transposed one, mostly) raises PyTorch's error."""
    if named:
        shape = _keyword_sizes(shape, named, "size", "view")
    if len(shape) == 1 and isinstance(shape[0], _dtype.dtype):
        raise NotImplementedError("tapegrad does not support x.view(dtype), a view of the bits "
                                  "as another type; x.to(dtype) converts the values")
    shape = _infer_shape(_int_sizes(shape, "view", "size"), x._value.size)
    offsets = _view_offsets(x) if x._value.size > 1 and type(x._alias) is ViewOf else None
    if offsets is not None and not bool((np.diff(offsets) == 1).all()):
        strides = _strides_of(offsets, x._value.shape)
        if strides is None or not _viewable(x._value.shape, strides, shape):
            raise RuntimeError(
                "view size is not compatible with input tensor's size and stride (at least one "
                "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
    return _reshaped(x, shape, V_VIEW)


def flatten(x, start_dim=0, end_dim=-1):
    """Dims ``start_dim`` to ``end_dim`` (inclusive) merged into one.

    Shape: ``x.shape[:start_dim] + (product of the merged sizes,) + x.shape[end_dim + 1:]``; a
    0-d tensor becomes ``(1,)``.

    Example:
        >>> tg.flatten(tg.zeros(2, 3, 4), start_dim=1).shape
        tapegrad.Size([2, 12])
    """
    s = x._value.shape
    if not s:
        _wrap_dim(start_dim, 0)   # PyTorch's range check, as for any dim
        _wrap_dim(end_dim, 0)
        return _reshaped(x, (1,), V_VIEW)
    a = _wrap_dim(start_dim, len(s))
    b = _wrap_dim(end_dim, len(s))
    if a > b:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if a == b:
        return x
    new = s[:a] + (math.prod(s[a:b + 1]),) + s[b + 1:]
    return _view_or_copy(x, new)


def squeeze(x, dim=None):
    """``x`` without its size-1 dims: all of them, or those among ``dim`` (an int or a tuple).

    A dim named in ``dim`` whose size is not 1 is left alone, as in PyTorch.  The result is a
    view of ``x``.

    Example:
        >>> x = tg.zeros(1, 2, 1)
        >>> tg.squeeze(x).shape, tg.squeeze(x, 0).shape
        (tapegrad.Size([2]), tapegrad.Size([2, 1]))
    """
    s = x._value.shape
    if dim is None:
        return _reshaped(x, tuple(d for d in s if d != 1), V_SQUEEZE)
    dims = _dims(x, dim) if s else ()
    new = tuple(d for i, d in enumerate(s) if not (i in dims and d == 1))
    # squeeze(dims) with a tuple is its own PyTorch node
    return _reshaped(x, new, V_SQUEEZE_DIMS if isinstance(dim, (tuple, list)) else V_SQUEEZE_DIM)


def unsqueeze(x, dim):
    """``x`` with a size-1 dim inserted at ``dim`` (``-1`` appends one at the end).

    Shape: ``x.shape[:dim] + (1,) + x.shape[dim:]``.  The result is a view of ``x``.

    Example:
        >>> tg.unsqueeze(tg.tensor([1.0, 2.0]), 1)
        tensor([[1.],
                [2.]])
    """
    s = x._value.shape
    d = _wrap_dim(dim, len(s) + 1)
    return _reshaped(x, s[:d] + (1,) + s[d:], V_UNSQUEEZE)


def _gathered(x, idx, variant, overlaps=False, in_range=False):
    """out = x.flat[idx]: permutations, expansions and indexing.  ``overlaps``: a view whose
    elements share positions of x (an expansion's are found here).  ``in_range``: the caller
    cut idx from x's own positions, so the take need not check them (NumPy's checking take
    into an ``out`` goes through a buffer: twice the time of a small one)."""
    v = x._value
    if x._rg and state.grad_enabled and v.dtype is _F64 and idx.dtype is _I64:
        # the everyday case (x[i], x.t(), x[:, 1:3] of a float tensor that requires grad):
        # _gather_record's records and the view's link, without its reshapes and copies
        # (they were half of a small x[i])
        n = idx.size
        tape = recording_tape(3 * n + v.size)
        r0 = _ref(tape, x)
        ip = tape.put_aux((variant, n))
        tape.aux.frombytes(idx.tobytes())   # (C order, whatever idx's layout)
        off = tape.alloc(n)
        vals = tape.vals
        shape = idx.shape
        out = vals[off:off + n]
        if len(shape) != 1:
            out = out.reshape(shape)
        start = tape.voff[r0]
        vals[start:start + tape.size[r0]].take(idx, out=out,
                                                mode="clip" if in_range else "raise")
        t = _emit(tape, K.GATHER, r0, -1, off, n, ip, 0.0, out)
        if variant in _VIEW_VARIANTS:
            tape.views[t._r] = (shape, None)    # (Tape.views)
            note_view(t, x, idx, overlaps=overlaps or (variant == V_EXPAND and n > v.size))
        return t
    if not _records(x):
        t = _plain(_gathered_value(x, idx))
    else:
        tape = recording_tape(3 * idx.size + x._value.size)
        r0 = _ref(tape, x)
        r, out = _gather_record(tape, r0, idx, idx.shape, variant)
        if variant in _VIEW_VARIANTS:
            tape.views[r] = (idx.shape, None)    # (Tape.views)
        # traced integer or bool data keeps its eager dtype on the handle (the arena holds
        # floats)
        t = _result(tape, r, out if x._value.dtype.kind == "f" else _gathered_value(x, idx))
    if variant in _VIEW_VARIANTS:
        # an expansion that repeats an element makes a view whose elements overlap (an
        # in-place op through such a view is refused, as PyTorch refuses it through an
        # expansion)
        overlaps = overlaps or (variant == V_EXPAND and idx.size > x._value.size)
        note_view(t, x, idx, overlaps=overlaps)
    return t


def _gathered_value(x, idx):
    """x.flat[idx] as an array of its own, in x's dtype."""
    if not x._value.size:
        return np.zeros(idx.shape, x._value.dtype)
    value = x._value.reshape(-1)[idx]
    if not idx.ndim:    # a NumPy scalar, which an in-place op could not write into
        value = np.array(value)
    return value


def _flat_index(x):
    return np.arange(x._value.size, dtype=np.int64).reshape(x._value.shape)


_I64 = np.dtype(np.int64)
_POSITIONS = {}            # shape -> its flat positions, read-only (see _positions)
_POSITIONS_UP_TO = 4096    # elements: larger shapes are built each time
_POSITIONS_KEPT = 128      # shapes (4 MB at most), before the cache starts again


def _positions(shape, n):
    """``np.arange(n).reshape(shape)`` (n the number of elements of shape), kept per shape for
    small ones, read-only: the index of a view (``ViewOf.index``) and of a gather record is
    cut from it, and nothing writes into those (a write would raise, not corrupt others)."""
    flat = _POSITIONS.get(shape)
    if flat is None:
        flat = np.arange(n, dtype=np.int64).reshape(shape)
        if n <= _POSITIONS_UP_TO:
            flat.flags.writeable = False
            if len(_POSITIONS) >= _POSITIONS_KEPT:
                _POSITIONS.clear()
            _POSITIONS[shape] = flat
    return flat


def _along(x, d, part):
    """x's flat positions with ``part`` (a slice or an int) taken along dimension d."""
    return _flat_index(x)[(slice(None),) * d + (part,)]


def narrow(x, dim, start, length):
    """The elements ``start`` to ``start + length`` of x along ``dim``: a view of x.

    Shape: x's, with ``length`` at ``dim``.  ``grad_fn``: ``<SliceBackward0>``.

    Example:
        >>> tg.arange(6).reshape(2, 3).narrow(1, 1, 2)
        tensor([[1, 2],
                [4, 5]])
    """
    nd = x._value.ndim
    if nd == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, nd)
    size = x._value.shape[d]
    start, length = _int_arg(start), _int_arg(length)
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], "
                         f"but got {start})")
    if start < 0:
        start += size
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size "
                           f"({size}).")
    return _gathered(x, _along(x, d, slice(start, start + length)), V_SLICE)


def unfold(x, dimension, size, step):
    """``Tensor.unfold``: the windows of ``size`` elements along ``dimension``, ``step``
    apart, as a new last dimension: a view of x (windows that overlap share elements).

    Shape: x's, with the number of windows ``(n - size) // step + 1`` at ``dimension``, and
    ``size`` appended.  ``grad_fn``: ``<UnfoldBackward0>``.

    Example:
        >>> tg.arange(5.0).unfold(0, 2, 2)
        tensor([[0., 1.],
                [2., 3.]])
    """
    shape = x._value.shape
    d = _wrap_dim(dimension, len(shape) or 1)
    size, step = _int_arg(size), _int_arg(step)
    length = shape[d] if shape else 1
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is "
                           f"{size}")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    flat = _flat_index(x).reshape(shape if shape else (1,))
    windows = np.lib.stride_tricks.sliding_window_view(flat, size, axis=d)
    windows = windows[(slice(None),) * d + (slice(None, None, step),)]
    # windows that share elements: an in-place op through them is refused (PyTorch adds
    # once per window)
    overlaps = size > step and windows.shape[d] > 1
    # (a 0-d tensor gives one window, without the dimension that counts them)
    return _gathered(x, (windows[0] if not shape else windows).copy(), V_UNFOLD, overlaps)


def select(x, dim, index):
    """x's elements at ``index`` along ``dim``, that dimension removed: a view of x
    (``x[:, i]`` is ``x.select(1, i)``).  ``grad_fn``: ``<SelectBackward0>``.

    Example:
        >>> tg.arange(6).reshape(2, 3).select(1, -1)
        tensor([2, 5])
    """
    nd = x._value.ndim
    if nd == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, nd)
    size, index = x._value.shape[d], _int_arg(index)
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(x._value.shape)} at dimension {d}")
    return _gathered(x, _along(x, d, index), V_SELECT)


def split(x, split_size_or_sections, dim=0):
    """x cut along ``dim`` into parts of ``split_size_or_sections`` elements (the last one
    smaller where they do not divide the size), or of the sizes in a list: a tuple of views
    of x.  ``grad_fn``: ``<SplitBackward0>`` (``<SplitWithSizesBackward0>`` for a list).

    Unlike PyTorch, each part has a node of its own rather than sharing one: ``grad_fn``
    names and gradients are PyTorch's, ``a.grad_fn is b.grad_fn`` is False.

    Example:
        >>> [p.tolist() for p in tg.arange(5).split(2)]
        [[0, 1], [2, 3], [4]]
    """
    if x._value.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = _wrap_dim(dim, x._value.ndim)
    size = x._value.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [_int_arg(n) for n in split_size_or_sections]
        if builtins.any(n < 0 for n in sizes):
            raise RuntimeError("split_with_sizes expects split_sizes have only non-negative "
                               f"entries, but got split_sizes={sizes}")
        if builtins.sum(sizes) != size:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} "
                               f"(input tensor's size at dimension {d}), but got "
                               f"split_sizes={sizes}")
        return _split_views(x, d, sizes, V_SPLIT_WITH_SIZES, "SplitWithSizes")
    step = _int_arg(split_size_or_sections)
    if step < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got split_size={step}")
    if step == 0 and size != 0:
        raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension "
                           f"size of {size}")
    # (min and sum are the tensor functions of this module)
    sizes = [step if size - lo > step else size - lo for lo in range(0, size, step)] \
        if size else [0]
    return _split_views(x, d, sizes, V_SPLIT, "Split")


def chunk(x, chunks, dim=0):
    """x cut along ``dim`` into at most ``chunks`` parts of ``ceil(size / chunks)``
    elements (fewer parts where the size runs out): ``split`` with that size.

    Example:
        >>> [p.tolist() for p in tg.arange(6).chunk(4)]
        [[0, 1], [2, 3], [4, 5]]
    """
    if x._value.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    chunks = _int_arg(chunks)
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = _wrap_dim(dim, x._value.ndim)
    size = x._value.shape[d]
    if size == 0:
        # PyTorch gives `chunks` empty parts here, made by split_with_sizes
        return _split_views(x, d, [0] * chunks, V_SPLIT_WITH_SIZES, "SplitWithSizes")
    return split(x, -(-size // chunks), d)


def unbind(x, dim=0):
    """x's slices along ``dim``, that dimension removed: a tuple of views of x.
    ``grad_fn``: ``<UnbindBackward0>``.

    Example:
        >>> [r.tolist() for r in tg.arange(6).reshape(2, 3).unbind(1)]
        [[0, 3], [1, 4], [2, 5]]
    """
    nd = x._value.ndim
    if nd == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = _wrap_dim(dim, nd)
    flat = _flat_index(x)
    return tuple(_multi_output(_gathered(x, flat[(slice(None),) * d + (i,)], V_UNBIND),
                               "Unbind", i) for i in range(x._value.shape[d]))


def _split_views(x, d, sizes, variant, name):
    flat, parts, lo = _flat_index(x), [], 0
    for i, n in enumerate(sizes):
        part = _gathered(x, flat[(slice(None),) * d + (slice(lo, lo + n),)], variant)
        parts.append(_multi_output(part, name, i))
        lo += n
    return tuple(parts)


def _multi_output(view, name, output_nr):
    """Mark ``view`` as output ``output_nr`` of an op that returns several views: PyTorch
    refuses a recorded in-place change of such a view (inplace._check_alias_write).  As in
    PyTorch, one made under no_grad is a no_grad view only, and one made with grad mode on
    is a multi-output view only, also when it is a view of a no_grad view."""
    link = view._alias
    if type(link) is ViewOf and state.grad_enabled:
        link.multi = (name, output_nr)
        link.no_grad_made = False
        if view._tape is not None:
            view._tape.views[view._r] = (view._value.shape, link.multi)
    return view


def diagonal(x, offset=0, dim1=0, dim2=1):
    """The diagonal of x in the plane of ``dim1`` and ``dim2`` (above it for ``offset`` > 0,
    below for < 0), as the last dimension: a view of x.  ``grad_fn``: ``<DiagonalBackward0>``.

    Example:
        >>> tg.arange(6).reshape(2, 3).diagonal(1)
        tensor([1, 5])
    """
    nd = x._value.ndim
    d1, d2 = _wrap_dim(dim1, nd), _wrap_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    offset = _int_arg(offset)
    flat = _flat_index(x)
    rows, cols = x._value.shape[d1], x._value.shape[d2]
    if offset >= cols or -offset >= rows:
        # NumPy refuses a diagonal beyond the matrix: PyTorch gives an empty one
        rest = tuple(n for k, n in enumerate(x._value.shape) if k not in (d1, d2))
        return _gathered(x, np.zeros(rest + (0,), np.int64), V_DIAGONAL)
    return _gathered(x, np.array(np.diagonal(flat, offset, d1, d2)), V_DIAGONAL)


def _index_values(index, what):
    """The int64 values of an index tensor (or array, or list).  They become positions of
    the recorded gather, so a compiled call guards them: new indices record afresh."""
    if isinstance(index, Tensor):
        read_value(index, "an index tensor")
    v = index._value if isinstance(index, Tensor) else np.asarray(index)
    if v.dtype.kind not in "iu" and not (v.size == 0 and v.dtype.kind == "f"):
        raise RuntimeError(what)
    return v.astype(np.int64)


def index_select(x, dim, index):
    """The slices of x at ``index`` (a 1-D integer tensor, repeats allowed) along ``dim``:
    a new tensor.  Shape: x's, with ``len(index)`` at ``dim``.
    ``grad_fn``: ``<IndexSelectBackward0>`` (repeated indices add their gradients).

    Example:
        >>> tg.arange(6).reshape(2, 3).index_select(1, tg.tensor([2, 0, 2]))
        tensor([[2, 0, 2],
                [5, 3, 5]])
    """
    idx = _index_values(index, "index_select(): Expected dtype int32 or int64 for index")
    if idx.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    idx = idx.reshape(-1)
    nd = x._value.ndim
    d = _wrap_dim(dim, builtins.max(nd, 1))
    size = x._value.shape[d] if nd else 1
    bad = idx[(idx < 0) | (idx >= size)]
    if bad.size:
        if nd < 2 or d != 1:   # PyTorch's CPU kernel for dim 1 gives the message below
            raise IndexError("index out of range in self")
        raise RuntimeError(f"INDICES element is out of DATA bounds, id={bad[0]} "
                           f"axis_dim={size}")
    flat = _flat_index(x)
    return _gathered(x, np.take(flat, idx, axis=d) if nd else flat.reshape(-1)[idx],
                     V_INDEX_SELECT)


def flip(x, *dims, **named):
    """x with the order of its elements reversed along each of ``dims``: a new tensor.
    ``grad_fn``: ``<FlipBackward0>``.

    Example:
        >>> tg.arange(6).reshape(2, 3).flip(1)
        tensor([[2, 1, 0],
                [5, 4, 3]])
    """
    if named:
        dims = _keyword_sizes(dims, named, "dims", "flip")
    dims = _shape_args(dims)
    nd = x._value.ndim
    ds = [_wrap_dim(d, builtins.max(nd, 1)) for d in dims]
    for d in ds:
        if ds.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    flat = _flat_index(x)
    return _gathered(x, np.flip(flat, tuple(ds)) if nd else flat, V_FLIP)


def fliplr(x):
    """``x.flip(1)``, for at least 2 dimensions.

    Example:
        >>> tg.tensor([[1, 2], [3, 4]]).fliplr()
        tensor([[2, 1],
                [4, 3]])
    """
    if x._value.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(x, 1)


def flipud(x):
    """``x.flip(0)``, for at least 1 dimension.

    Example:
        >>> tg.tensor([[1, 2], [3, 4]]).flipud()
        tensor([[3, 4],
                [1, 2]])
    """
    if x._value.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(x, 0)


def roll(x, shifts, dims=None):
    """x's elements shifted by ``shifts`` along ``dims``, those pushed out at one end coming
    back at the other (without ``dims``, along the flattened tensor).  ``grad_fn``:
    ``<RollBackward0>``.

    Example:
        >>> tg.arange(5).roll(2)
        tensor([3, 4, 0, 1, 2])
    """
    shifts = (shifts,) if isinstance(shifts, (int, np.integer)) else tuple(shifts)
    flat = _flat_index(x)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                               "dims:0")
        return _gathered(x, np.roll(flat.reshape(-1), shifts[0]).reshape(flat.shape), V_ROLL)
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    nd = x._value.ndim
    ds = tuple(_wrap_dim(d, builtins.max(nd, 1)) for d in dims)
    return _gathered(x, np.roll(flat, shifts, ds) if nd else flat, V_ROLL)


def repeat(x, *sizes, **named):
    """x tiled ``sizes[k]`` times along each dimension k (more sizes than dimensions add
    leading ones): a new tensor.  ``grad_fn``: ``<RepeatBackward0>``.

    Example:
        >>> tg.tensor([1, 2]).repeat(2, 2)
        tensor([[1, 2, 1, 2],
                [1, 2, 1, 2]])
    """
    if named:
        sizes = _keyword_sizes(sizes, named, "repeats", "repeat")
    sizes = _int_sizes(sizes, "repeat", "repeats")
    nd = x._value.ndim
    if len(sizes) < nd:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    shape = (1,) * (len(sizes) - nd) + x._value.shape
    result = [n * k for n, k in zip(shape, sizes)]
    if builtins.any(k < 0 for k in sizes):
        bad = next(n for n in result if n < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {bad}: {result}")
    return _gathered(x, np.tile(_flat_index(x).reshape(shape), sizes), V_REPEAT)


def tile(x, dims):
    """``repeat`` with ones prepended to ``dims`` when it has fewer entries than x has
    dimensions.  ``grad_fn``: ``<RepeatBackward0>``.

    Example:
        >>> tg.tensor([[1, 2]]).tile((2,))
        tensor([[1, 2, 1, 2]])
    """
    dims = _shape_args((dims,) if isinstance(dims, (int, np.integer)) else tuple(dims))
    dims = (1,) * (x._value.ndim - len(dims)) + tuple(dims)
    return repeat(x, *dims)


def gather(x, dim, index):
    """``out[i][j] = x[i][index[i][j]]`` for ``dim=1`` (and so on for other dims): the
    elements picked along ``dim`` by an integer tensor of as many dimensions as x.
    Shape: ``index``'s.  ``grad_fn``: ``<GatherBackward0>``.

    Example:
        >>> tg.gather(tg.tensor([[1, 2], [3, 4]]), 1, tg.tensor([[0, 0], [1, 0]]))
        tensor([[1, 1],
                [4, 3]])
    """
    idx = _index_values(index, "gather(): Expected dtype int32/int64 for index")
    nd = x._value.ndim
    d = _wrap_dim(dim, builtins.max(nd, 1))
    shape = x._value.shape if nd else (1,)
    if idx.ndim != builtins.max(nd, 1) and not (nd == 0 and idx.ndim == 0):
        raise RuntimeError("Index tensor must have the same number of dimensions as input "
                           "tensor")
    idx = idx.reshape(idx.shape if idx.ndim else (1,))
    for k in range(len(shape)):
        if k != d and idx.shape[k] > shape[k]:
            raise RuntimeError(f"Size does not match at dimension {k} expected index "
                               f"{list(idx.shape)} to be smaller than self {list(shape)} "
                               f"apart from dimension {d}")
    bad = idx[(idx < 0) | (idx >= shape[d])]
    if bad.size:
        raise RuntimeError(f"index {bad[0]} is out of bounds for dimension {d} with size "
                           f"{shape[d]}")
    coords = list(np.indices(idx.shape, dtype=np.int64))
    coords[d] = idx
    positions = np.ravel_multi_index(tuple(coords), shape) if idx.size else \
        np.zeros(idx.shape, np.int64)
    return _gathered(x, positions.reshape(idx.shape if nd else ()), V_GATHER)


def take(x, index):
    """The elements of the flattened x at ``index`` (negative counts from the end).
    Shape: ``index``'s.  ``grad_fn``: ``<TakeBackward0>``.

    Example:
        >>> tg.arange(6).reshape(2, 3).take(tg.tensor([0, -1]))
        tensor([0, 5])
    """
    idx = _index_values(index, "take(): Expected a long tensor for index, but got Float")
    n = x._value.size
    bad = idx[(idx < -n) | (idx >= n)]
    if bad.size:
        raise IndexError(f"out of range: tried to access index {bad[0]} on a tensor of {n} "
                         "elements.")
    return _gathered(x, np.where(idx < 0, idx + n, idx), V_TAKE)


def movedim(x, source, destination):
    """x with dimensions ``source`` moved to positions ``destination`` (ints or sequences),
    the others in order: a view, as ``permute``.  Also ``moveaxis``.

    Example:
        >>> tg.zeros(2, 3, 4).movedim(0, -1).shape
        tapegrad.Size([3, 4, 2])
    """
    nd = x._value.ndim
    src = (source,) if isinstance(source, (int, np.integer)) else tuple(source)
    dst = (destination,) if isinstance(destination, (int, np.integer)) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} "
                           f"dims) should contain the same number of dims as destination "
                           f"({list(dst)} dims)")
    src = [_wrap_dim(s_, builtins.max(nd, 1)) for s_ in src]
    dst = [_wrap_dim(d_, builtins.max(nd, 1)) for d_ in dst]
    if len(set(src)) < len(src):
        raise RuntimeError(f"movedim: repeated dim in `source` ({list(source)})")
    if len(set(dst)) < len(dst):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({list(destination)})")
    if not nd:
        return permute(x)
    order = [None] * nd
    for s_, d_ in zip(src, dst):
        order[d_] = s_
    rest = iter(k for k in range(nd) if k not in src)
    return permute(x, *[k if k is not None else next(rest) for k in order])


def swapaxes(x, axis0, axis1):
    """``transpose``: dimensions ``axis0`` and ``axis1`` swapped (a view).  Also ``swapdims``.

    Example:
        >>> tg.zeros(2, 3).swapaxes(0, 1).shape
        tapegrad.Size([3, 2])
    """
    return transpose(x, axis0, axis1)


moveaxis = movedim
swapdims = swapaxes


def _int_arg(n):
    """A Python int from an int, a NumPy integer or a one-element integer tensor."""
    if isinstance(n, Tensor):
        n = n._value.item()
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"expected an integer, got {type(n).__name__}")
    return int(n)


def permute(x, *dims, **named):
    """``x`` with its dims reordered: dim ``i`` of the result is dim ``dims[i]`` of ``x``.

    ``dims`` is a tuple, or separate ints.  Shape: ``tuple(x.shape[d] for d in dims)``.
    The result is a view of ``x``.

    Example:
        >>> tg.permute(tg.zeros(2, 3, 4), (2, 0, 1)).shape
        tapegrad.Size([4, 2, 3])
    """
    if named:
        dims = _keyword_sizes(dims, named, "dims", "permute")
    dims = _shape_args(dims)
    nd = x._value.ndim
    if len(dims) != nd:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
            f"length of the desired ordering of dimensions i.e. input.dim() = {nd} is not equal "
            f"to len(dims) = {len(dims)}")
    ds = [_wrap_dim(d, nd) for d in dims]
    if len(set(ds)) != nd:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    v = x._value
    return _gathered(x, _positions(v.shape, v.size).transpose(ds), V_PERMUTE, False, True)


def transpose(x, dim0, dim1):
    """``x`` with dims ``dim0`` and ``dim1`` swapped; a view of ``x``.

    Example:
        >>> tg.transpose(tg.zeros(2, 3, 4), 0, 2).shape
        tapegrad.Size([4, 3, 2])
    """
    v = x._value
    nd = v.ndim
    if nd == 0:
        _wrap_dim(dim0, 0), _wrap_dim(dim1, 0)
        return _gathered(x, _flat_index(x), V_TRANSPOSE)
    d0, d1 = _wrap_dim(dim0, nd), _wrap_dim(dim1, nd)
    return _gathered(x, _positions(v.shape, v.size).swapaxes(d0, d1), V_TRANSPOSE, False,
                     True)


def t(x):
    """The transpose of a matrix; a 0-d or 1-D tensor is returned as it is (a view).

    More than 2 dims raise, as in PyTorch (use ``transpose`` or ``x.mT``).

    Example:
        >>> tg.t(tg.tensor([[1, 2, 3]]))
        tensor([[1],
                [2],
                [3]])
    """
    v = x._value
    if v.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                           f"{v.ndim}D")
    return _gathered(x, _positions(v.shape, v.size).T, V_T, False, True)


def numpy_T(x):
    if x._value.ndim != 2 and x._value.ndim != 0:
        _frames.warn_program(
            "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is "
            "deprecated and it will throw an error in a future release. Consider `x.mT` to "
            "transpose batches of matrices or `x.permute(*tapegrad.arange(x.ndim - 1, -1, -1))` "
            "to reverse the dimensions of a tensor.", once="x.T")
    return _gathered(x, _flat_index(x).T, V_PERMUTE)


def mT(x):
    if x._value.ndim == 0:
        # PyTorch still accepts a 0-d tensor, returned as it is, with a warning
        warnings.warn("Tensor.mT is deprecated on 0-D tensors. This function is the identity "
                      "in these cases.", UserWarning, stacklevel=2)
        return x
    if x._value.ndim < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {x._value.ndim}-D tensor.")
    return _gathered(x, np.swapaxes(_flat_index(x), -1, -2), V_TRANSPOSE)


def expand(x, *sizes, **named):
    if named:
        sizes = _keyword_sizes(sizes, named, "size", "expand")
    sizes = _int_sizes(sizes, "expand", "size")
    s = x._value.shape
    if len(sizes) < len(s):
        raise RuntimeError(
            f"expand({x.dtype!r}{{{list(s)}}}, size={list(sizes)}): the number of sizes "
            f"provided ({len(sizes)}) must be greater or equal to the number of dimensions in "
            f"the tensor ({len(s)})".replace("tapegrad.float64", "tapegrad.DoubleTensor"))
    lead = len(sizes) - len(s)
    target = []
    # from the last dimension, as PyTorch checks them (the first mismatch it names)
    for i in reversed(range(len(sizes))):
        want = sizes[i]
        have = s[i - lead] if i >= lead else None
        if want == -1:
            if have is None:
                raise RuntimeError(
                    f"The expanded size of the tensor (-1) isn't allowed in a leading, "
                    f"non-existing dimension {i}")
            want = have
        if have is not None and have != want and have != 1:
            raise RuntimeError(
                f"The expanded size of the tensor ({want}) must match the existing size "
                f"({have}) at non-singleton dimension {i}.  Target sizes: {list(sizes)}.  "
                f"Tensor sizes: {list(s)}")
        target.append(int(want))
    idx = np.broadcast_to(_flat_index(x), tuple(reversed(target)))
    # a copy, not ascontiguousarray: that would make a 0-d index 1-D
    return _gathered(x, idx.copy(), V_EXPAND)


def broadcast_to(x, shape):
    """``x`` expanded to ``shape`` by broadcasting, as ``x.expand(*shape)``: a view of ``x``
    whose gradient sums over the broadcast dims.

    Example:
        >>> tg.broadcast_to(tg.tensor([1.0, 2.0]), (2, 2))
        tensor([[1., 2.],
                [1., 2.]])
    """
    return expand(x, *tuple(shape))


def expand_as(x, other):
    return expand(x, *other.shape)


def clone(x, *, memory_format=None):
    """A copy of ``x`` that stays in the graph (``grad_fn``: ``<CloneBackward0>``), unlike
    ``x.detach()``; same shape and dtype (``memory_format``: see ``tapegrad.memory_format``).

    Example:
        >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> y = tg.clone(x)
        >>> y
        tensor([1., 2.], grad_fn=<CloneBackward0>)
    """
    if memory_format is not None:
        _device.check_memory_format(memory_format, x._value.ndim, "clone")
    return _reshaped(x, x._value.shape, V_CLONE) if _records(x) else _plain(x._value.copy())


def _index_key(key, shape):
    """Translate a PyTorch index into a NumPy one; returns (key, grad_fn variant).

    The variant is the node of the last step PyTorch takes (select, slice, unsqueeze), or
    IndexBackward0 with an advanced index.  In a tuple key, a slice that spans its whole dim
    with step 1 is skipped, as PyTorch skips it; a key that does nothing gives an alias.
    """
    bare = not isinstance(key, tuple)
    if bare:
        key = (key,)
    out = []
    labels = []  # the grad_fn variant of each part's step (None: no step of its own)
    advanced = False
    for k in key:
        label = None
        if isinstance(k, Tensor):
            read_value(k, "indexing with a tensor")
            kv = k._value
            if kv.dtype.kind == "f" or (kv.ndim and kv.dtype in (np.int8, np.int16)):
                raise IndexError(
                    "tensors used as indices must be long, int, byte or bool tensors")
            kv = _byte_mask(kv)
            if kv.ndim == 0 and kv.dtype.kind in "iu":
                out.append(int(kv))
                labels.append(V_SELECT)
                continue
            out.append(kv)
            advanced = True
        elif isinstance(k, (list, np.ndarray)):
            arr = _byte_mask(np.asarray(k))
            if arr.dtype.kind == "f" and (arr.size or not isinstance(k, list)):
                # (an empty list is an empty index, as in PyTorch: NumPy makes it float)
                raise IndexError(
                    "tensors used as indices must be long, int, byte or bool tensors")
            out.append(arr if arr.size or arr.dtype.kind == "b" else arr.astype(np.int64))
            advanced = True
        elif isinstance(k, bool):
            out.append(k)
            advanced = True
        elif isinstance(k, (int, np.integer)):
            out.append(int(k))
            label = V_SELECT
        elif k is None:
            out.append(None)
            label = V_UNSQUEEZE
        elif k is Ellipsis:
            out.append(k)
        elif isinstance(k, slice):
            for part in (k.start, k.stop, k.step):
                if part is not None and not isinstance(part, (int, np.integer, Tensor)):
                    raise TypeError("slice indices must be integers or None")
            if k.step is not None and int(k.step) == 0:
                raise ValueError("slice step cannot be zero")
            if k.step is not None and int(k.step) < 0:
                raise ValueError("step must be greater than zero")
            out.append(slice(*(int(p) if p is not None else None
                               for p in (k.start, k.stop, k.step))))
            label = V_SLICE
        else:
            raise IndexError(
                "only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                "Variables are valid indices (got " + type(k).__name__ + ")")
        labels.append(label)
    if not bare:
        # x[:] is a SliceBackward0, but x[:, :] and x[(slice(None),)] an AliasBackward0.
        # PyTorch skips by the slice as written: start 0 or None (not -len), stop None or at
        # least the length, step 1 or None
        for pos, d in enumerate(_key_dims(out, len(shape))):
            sl = out[pos]
            if isinstance(sl, slice) and d is not None and d < len(shape) and \
                    sl.start in (None, 0) and sl.step in (None, 1) and \
                    (sl.stop is None or sl.stop >= shape[d]):
                labels[pos] = None
    last = [v for v in labels if v is not None]
    variant = V_INDEX if advanced else (last[-1] if last else V_ALIAS)
    return tuple(out), variant


def _byte_mask(kv):
    """A uint8 index is a mask, as it was before bool tensors existed (PyTorch warns)."""
    if kv.dtype != np.uint8:
        return kv
    warnings.warn("indexing with dtype tapegrad.uint8 is now deprecated, please use a dtype "
                  "tapegrad.bool instead.", UserWarning, stacklevel=4)
    return kv.astype(np.bool_)


def _key_width(k):
    """How many dims of the indexed tensor a translated key part consumes."""
    if isinstance(k, np.ndarray):
        return k.ndim if k.dtype.kind == "b" else 1
    return 1 if isinstance(k, (int, slice)) and not isinstance(k, bool) else 0


def _key_dims(np_key, ndim):
    """The first dim of the indexed tensor each translated key part applies to (the parts
    after an ellipsis count from the end)."""
    dims = []
    d = 0
    for pos, k in enumerate(np_key):
        if k is Ellipsis:
            d = ndim - builtins.sum(_key_width(j) for j in np_key[pos + 1:])
            dims.append(None)
            continue
        dims.append(d)
        d += _key_width(k)
    return dims


def _check_index(np_key, key, shape):
    """PyTorch's errors for keys that do not fit the tensor (before NumPy words them)."""
    if not shape and not isinstance(key, tuple):
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            raise IndexError(
                "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
        if isinstance(key, slice):
            raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    used = builtins.sum(_key_width(k) for k in np_key)
    if used > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    index_shapes = []
    for k, d in zip(np_key, _key_dims(np_key, len(shape))):
        if isinstance(k, np.ndarray) and k.dtype.kind == "b":
            for i, m in enumerate(k.shape):
                if m != shape[d + i]:
                    raise IndexError(
                        f"The shape of the mask {list(k.shape)} at index {i} does not match the "
                        f"shape of the indexed tensor {list(shape)} at index {d + i}")
            index_shapes += [(int(np.count_nonzero(k)),)] * k.ndim
        elif isinstance(k, np.ndarray):
            index_shapes.append(k.shape)
    try:
        np.broadcast_shapes(*index_shapes)
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                         "with shapes " + ", ".join(str(list(s)) for s in index_shapes)) from None


def _basic_then_advanced(np_key):
    """The key as PyTorch applies it: ints, slices and None first (advanced parts kept as
    full slices), then the advanced parts on that result.  NumPy would count an int as an
    advanced index too, and move the indexed dims to the front when an int separates it
    from an array (x[0, :, [1, 2]]); PyTorch selects first, so they stay in place."""
    first, second = [], []
    for k in np_key:
        if isinstance(k, np.ndarray):
            first += [slice(None)] * (k.ndim if k.dtype.kind == "b" else 1)
            second.append(k)
        elif isinstance(k, bool):
            second.append(k)
        elif isinstance(k, int):
            first.append(k)
        elif k is Ellipsis:
            first.append(k)
            second.append(k)
        else:  # None or a slice: a dim of the intermediate result
            first.append(k)
            second.append(slice(None))
    return tuple(first), tuple(second)


def select_positions(key, shape):
    """The flat positions of ``x[key]`` for a key of plain ints (a loop's ``x[j]``,
    ``x[i, j]``), found in time proportional to the result instead of to x; None for any
    other key, or for an int out of range (the general path words PyTorch's error)."""
    if type(key) is not tuple:
        key = (key,)
    if not key or len(key) > len(shape) or key[0].__class__ is slice:
        return None     # (x[()] is an alias, not a select; a slice is no int)
    offset = 0
    stride = math.prod(shape)
    for d, k in enumerate(key):
        if type(k) is not int and not isinstance(k, np.integer):
            return None
        n = shape[d]
        if not -n <= k < n:
            return None
        stride //= n
        offset += (k + n if k < 0 else k) * stride
    rest = shape[len(key):]
    return np.arange(offset, offset + stride, dtype=np.int64).reshape(rest)


def basic_positions(key, shape):
    """(flat positions, grad_fn variant) of ``x[key]`` for a key of ints in range and
    slices of int bounds and positive (or no) step, alone or in a tuple no longer than x
    has dims: the everyday ``x[1:3]``, ``x[:, 1:3]``, ``x[i, :k]``.  None for any other key,
    which ``_index_key`` translates and ``_check_index`` words PyTorch's errors for: their
    general path cost a slice 10 us.  The variant is ``_index_key``'s: the step of the
    last part that takes one (a slice of a whole dim in a tuple takes none)."""
    bare = type(key) is not tuple
    parts = (key,) if bare else key
    if len(parts) > len(shape):
        return None
    variant = V_ALIAS
    for d, k in enumerate(parts):
        kind = type(k)
        if kind is int:
            if not -shape[d] <= k < shape[d]:
                return None
            variant = V_SELECT
        elif kind is slice:
            start, stop, step = k.start, k.stop, k.step
            if not ((start is None or type(start) is int) and (stop is None or type(stop) is int)
                    and (step is None or (type(step) is int and step > 0))):
                return None
            if bare or not (start in (None, 0) and step in (None, 1) and
                            (stop is None or stop >= shape[d])):
                variant = V_SLICE
        else:
            return None
    flat = _positions(shape, math.prod(shape))
    return np.asarray(flat[key]), variant


def getitem(x, key):
    if key.__class__ is int:
        # x[i], the commonest key: select_positions' answer, worked out here
        v = x._value
        shape = v.shape
        if shape and -shape[0] <= key < shape[0]:
            n = v.size
            if n <= _POSITIONS_UP_TO:
                # (``, ...`` keeps a 1-D tensor's one position an array)
                return _gathered(x, _positions(shape, n)[key, ...], V_SELECT, False, True)
            # (a row of a large tensor: positions in proportion to the row, not to x)
            stride = n // shape[0]
            start = (key + shape[0] if key < 0 else key) * stride
            return _gathered(x, np.arange(start, start + stride, dtype=np.int64)
                             .reshape(shape[1:]), V_SELECT, False, True)
    shape = x._value.shape
    if key.__class__ is not slice:     # (select_positions takes no slice)
        idx = select_positions(key, shape)
        if idx is not None:
            return _gathered(x, idx, V_SELECT, False, True)
    basic = basic_positions(key, shape)
    if basic is not None:
        return _gathered(x, basic[0], basic[1], False, True)
    np_key, variant = _index_key(key, x._value.shape)
    _check_index(np_key, key, x._value.shape)
    flat = _flat_index(x)
    try:
        if variant == V_INDEX:
            first, second = _basic_then_advanced(np_key)
            idx = flat[first][second]
        else:
            idx = flat[np_key]
    except IndexError as e:
        raise IndexError(_torch_index_message(str(e), np_key, x._value.ndim)) from None
    return _gathered(x, np.asarray(idx), variant)


def _torch_index_message(msg, np_key, ndim):
    """NumPy names the input axis of a bad integer index; PyTorch names the dimension of the
    partly indexed tensor (Nones before it count, integers before it do not)."""
    found = re.match(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)", msg)
    if found is None:
        return msg.replace("axis", "dimension")
    bad_axis = int(found.group(2))
    consuming = builtins.sum(1 for k in np_key if k is not None and k is not Ellipsis)
    axis = dim = 0
    for k in np_key:
        if k is None:
            dim += 1
        elif k is Ellipsis:
            axis += ndim - consuming
            dim += ndim - consuming
        elif isinstance(k, int) and not isinstance(k, bool):
            if axis == bad_axis:
                return (f"index {found.group(1)} is out of bounds for dimension {dim} with "
                        f"size {found.group(3)}")
            axis += 1
        else:
            axis += 1
            dim += 1
    return msg.replace("axis", "dimension")


def _cat_check(tensors, name):
    if isinstance(tensors, Tensor):
        raise TypeError(f"{name}(): argument 'tensors' must be tuple of Tensors, not Tensor")
    tensors = [as_tensor_arg(t) for t in tensors]
    if not tensors:
        if name == "stack":
            raise RuntimeError("stack expects a non-empty TensorList")
        raise ValueError(f"tapegrad.{name}(): expected a non-empty list of Tensors")
    return tensors


def cat(tensors, dim=0):
    """Tensors joined along an existing dim; also ``tg.concat`` and ``tg.concatenate``.

    All must have the same shape except along ``dim``.  Shape: that shape, with the sizes
    along ``dim`` added up.  As in PyTorch, 1-D empty tensors are skipped.

    Example:
        >>> a, b = tg.ones(1, 2), tg.zeros(2, 2)
        >>> tg.cat([a, b]).shape, tg.cat([a.t(), b.t()], dim=1).shape
        (tapegrad.Size([3, 2]), tapegrad.Size([2, 3]))
    """
    joined = _joined(K.CAT, tensors, dim)
    if joined is not None:
        return joined
    tensors = _cat_check(tensors, "cat")
    # PyTorch skips 1-D empty tensors in cat (legacy behaviour)
    parts = [t for t in tensors if not (t._value.ndim == 1 and t._value.size == 0)] or tensors[:1]
    for j, t in enumerate(parts):
        if t._value.ndim == 0:
            raise RuntimeError(
                f"zero-dimensional tensor (at position {j}) cannot be concatenated")
    ref = parts[0]._value
    d = _wrap_dim(dim, ref.ndim)
    for j, t in enumerate(parts):
        v = t._value
        if v.ndim != ref.ndim:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {ref.ndim} and {v.ndim}")
        for ax in range(ref.ndim):
            if ax != d and v.shape[ax] != ref.shape[ax]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size "
                    f"{ref.shape[ax]} but got size {v.shape[ax]} for tensor number {j} in the "
                    "list.")
    values = [t._value for t in parts]
    kinds = {v.dtype.kind for v in values}
    value = np.concatenate(values, axis=d)
    if "f" in kinds:
        value = value.astype(np.float64, copy=False)
    # the skipped empty tensors stay inputs (of width 0): they get an empty gradient
    kept = {id(t) for t in parts}
    widths = [math.prod(t._value.shape[d:]) if id(t) in kept else 0
              for t in tensors]
    return _stacked(K.CAT, tensors, value, d, widths)


def stack(tensors, dim=0):
    """Tensors of one shape joined along a new dim inserted at ``dim``.

    Shape: ``shape[:dim] + (len(tensors),) + shape[dim:]``.

    Example:
        >>> tg.stack([tg.tensor([1, 2]), tg.tensor([3, 4])], dim=1)
        tensor([[1, 3],
                [2, 4]])
    """
    joined = _joined(K.STACK, tensors, dim)
    if joined is not None:
        return joined
    tensors = _cat_check(tensors, "stack")
    ref = tensors[0]._value
    d = _wrap_dim(dim, ref.ndim + 1)
    for j, t in enumerate(tensors):
        if t._value.shape != ref.shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(ref.shape)} at "
                f"entry 0 and {list(t._value.shape)} at entry {j}")
    value = np.stack([t._value for t in tensors], axis=d)
    width = math.prod(ref.shape[d:])
    return _stacked(K.STACK, tensors, value, d, [width] * len(tensors))


def _joined(code, tensors, dim):
    """``cat`` (code CAT) or ``stack`` (STACK) of non-empty float64 tensors, one of which
    requires grad, with grad mode on, that fit together, along a plain int dim in range:
    the records ``_stacked`` makes, the values joined straight into the arena.  None for
    any other call, which the general path checks and words PyTorch's errors for."""
    if tensors.__class__ is not list and tensors.__class__ is not tuple or not tensors \
            or not state.grad_enabled:
        return None
    rg = False
    for t in tensors:
        if not isinstance(t, Tensor) or t._value.dtype is not _F64 or not t._value.size:
            return None
        rg = rg or t._rg
    if not rg:
        return None
    ref = tensors[0]._value.shape
    nd = len(ref)
    stacking = code == K.STACK
    if not nd or dim.__class__ is not int:
        return None
    k = nd + 1 if stacking else nd
    if not -k <= dim < k:
        return None
    d = dim + k if dim < 0 else dim
    head, tail = ref[:d], ref[d + 1:] if not stacking else ref[d:]
    inner = math.prod(tail)
    if stacking:
        values = []
        for t in tensors:
            v = t._value
            if v.shape != ref:
                return None
            values.append(v.reshape(head + (1,) + tail))
        widths = [inner] * len(tensors)    # (tail is all of ref from d on)
        shape = head + (len(tensors),) + tail
    else:
        values = []
        widths = []
        along = 0
        for t in tensors:
            v = t._value
            s = v.shape
            if len(s) != nd or s[:d] != head or s[d + 1:] != tail:
                return None
            values.append(v)
            widths.append(s[d] * inner)
            along += s[d]
        shape = head + (along,) + tail
    n = math.prod(shape)
    tape = recording_tape(3 * n)
    rows = []
    start = 0
    for t, w in zip(tensors, widths):
        rows.extend((_ref(tape, t), start, w))
        start += w
    ip = tape.put_aux([len(tensors)] + rows + [math.prod(head), start])
    off = tape.alloc(n)
    out = tape.vals[off:off + n].reshape(shape)
    np.concatenate(values, axis=d, out=out)
    return _emit(tape, code, rows[0], -1, off, n, ip, 0.0, out)


def _stacked(code, parts, value, d, widths):
    if not _records(*parts):
        return _plain(value)
    n = value.size
    tape = recording_tape(2 * n + builtins.sum(t._value.size for t in parts))
    rows = []
    start = 0
    for t, w in zip(parts, widths):
        rows.extend((_ref(tape, t), start, w))
        start += w
    outer = math.prod(value.shape[:d])
    ip = tape.put_aux([len(parts)] + rows + [outer, start])
    off, out = _out(tape, value.shape, n)
    np.copyto(out, value)
    return _result(tape, tape.push(code, rows[0], -1, off, n, ip), out)



# ---------------------------------------------------------------------------------------------
# Scans and sorts (#16): cumsum, cumprod, logcumsumexp, cummax/cummin, diff, sort, argsort,
# msort, topk, kthvalue, median, nanmedian, mode
# ---------------------------------------------------------------------------------------------
def _return_type(name):
    return return_type(name, ["values", "indices"])


SortResult = _return_type("sort")
TopkResult = _return_type("topk")
KthvalueResult = _return_type("kthvalue")
MedianResult = _return_type("median")
NanmedianResult = _return_type("nanmedian")
ModeResult = _return_type("mode")
CummaxResult = _return_type("cummax")
CumminResult = _return_type("cummin")

# GATHER variants of selections by value (structure._GATHER_NAMES)
V_SORT, V_SORT_STABLE, V_TOPK, V_KTHVALUE, V_MEDIAN_DIM, V_NANMEDIAN_DIM, V_MODE = range(29, 36)
V_CUMMAX, V_CUMMIN = 36, 37
_UNSET = object()


def _scan_dim(x, dim):
    """dim wrapped (a 0-d tensor takes 0 and -1), and x's (O, R, I) along it."""
    shape = x._value.shape
    d = _wrap_dim(dim, len(shape))
    if not shape:
        return 0, 1, 1, 1
    o = math.prod(shape[:d])
    i = math.prod(shape[d + 1:])
    return d, o, shape[d], i


def _scan(code, x, dim, value):
    """Record a scan along ``dim`` whose value NumPy already computed (x's shape)."""
    value = np.asarray(value)
    if not _records(x):
        return _plain(value)
    d, o, red, i = _scan_dim(x, dim)
    n = value.size
    tape = recording_tape(2 * n + x._value.size)
    r0 = _ref(tape, x)
    ip = tape.put_aux((o, red, i))
    off, out = _out(tape, value.shape, n)
    np.copyto(out, value)
    # traced integer or bool data keeps its eager dtype on the handle
    return _result(tape, tape.push(code, r0, -1, off, n, ip),
                   out if value.dtype.kind == "f" else value)


def _integer_scan_value(v):
    # bool and integer inputs scan in int64, as PyTorch's do
    return v.astype(np.int64) if v.dtype.kind in "biu" else v


def cumsum(x, dim, *, dtype=None):
    """Running sum along ``dim``: element k of the result is the sum of elements 0 to k.

    Shape: that of ``x``.  Bool and integer tensors sum in int64 unless ``dtype`` is given.
    ``grad_fn``: ``<CumsumBackward0>``; the gradient is a running sum from the end.

    Example:
        >>> x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
        >>> tg.cumsum(x, 0)
        tensor([1., 3., 6.], grad_fn=<CumsumBackward0>)
    """
    x = _reduce_as(x, dtype)
    d = _scan_dim(x, dim)[0]
    v = _integer_scan_value(x._value)
    value = np.cumsum(v, axis=d) if v.ndim else v.copy()
    return _scan(K.CUMSUM, x, dim, value)


def cumprod(x, dim, *, dtype=None):
    """Running product along ``dim``.

    Shape: that of ``x``; bool and integer tensors multiply in int64 unless ``dtype`` is
    given.  ``grad_fn``: ``<CumprodBackward0>``; the gradient is exact where entries are zero
    (no division by the input).

    Example:
        >>> x = tg.tensor([2.0, 0.0, 3.0], requires_grad=True)
        >>> y = tg.cumprod(x, 0)
        >>> y
        tensor([2., 0., 0.], grad_fn=<CumprodBackward0>)
        >>> y.sum().backward()
        >>> x.grad
        tensor([1., 8., 0.])
    """
    x = _reduce_as(x, dtype)
    d = _scan_dim(x, dim)[0]
    v = _integer_scan_value(x._value)
    value = _quietly(np.cumprod, v, axis=d) if v.ndim else v.copy()
    return _scan(K.CUMPROD, x, dim, value)


def logcumsumexp(x, dim):
    """``log(cumsum(exp(x), dim))``, computed without overflow.

    Shape: that of ``x``; floating inputs only (PyTorch raises for integers).
    ``grad_fn``: ``<LogcumsumexpBackward0>``.

    Example:
        >>> tg.logcumsumexp(tg.tensor([1000.0, 1000.0]), 0)
        tensor([1000.0000, 1000.6931])
    """
    d = _scan_dim(x, dim)[0]
    v = x._value
    if v.dtype.kind != "f":
        raise NotImplementedError(
            f'"logcumsumexp_out_cpu" not implemented for \'{x.dtype.scalar_name}\'')
    # np.logaddexp's formula is the compiled forward's (scan.py), so replay agrees
    value = _quietly(np.logaddexp.accumulate, v, axis=d) if v.ndim and v.size else v.copy()
    return _scan(K.LOGCUMSUMEXP, x, dim, value)


def _select_by_value(x, idx, variant, what):
    """x's entries at the flat positions ``idx``, chosen by looking at x's values: while
    ``compile`` traces, x's values are guarded (a replay with other values records again)."""
    read_value(x, what)
    # (np.asarray: ascontiguousarray would make a 0-d index 1-d)
    return _gathered(x, np.asarray(idx, dtype=np.int64), variant)


def _flat_positions(shape, d, arg):
    """Flat positions in an array of ``shape`` of the entries at ``arg`` (indices along d,
    shaped like the result with d kept)."""
    flat = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    return np.take_along_axis(flat, arg, axis=d)


def _cum_extreme(x, dim, is_max):
    name = "cummax" if is_max else "cummin"
    d = _wrap_dim(dim, x._value.ndim)
    v = x._value
    if v.ndim == 0:
        arg = np.zeros((), dtype=np.int64)
        values = _select_by_value(x, arg, V_CUMMAX if is_max else V_CUMMIN, f"{name}()")
        return (CummaxResult if is_max else CumminResult)(values, _plain(arg))
    w = np.moveaxis(v, d, -1)
    arg = np.zeros(w.shape, dtype=np.int64)
    if w.size:
        best = w[..., 0].copy()
        cur = np.zeros(w.shape[:-1], dtype=np.int64)
        floating = v.dtype.kind == "f"
        for k in range(w.shape[-1]):
            col = w[..., k]
            # PyTorch's rule: a later equal value takes over, and so does any nan
            take = col >= best if is_max else col <= best
            if floating:
                take = np.isnan(col) | (take & ~np.isnan(best))
            if k == 0:
                take = np.ones_like(take)
            best = np.where(take, col, best)
            cur = np.where(take, k, cur)
            arg[..., k] = cur
    arg = np.moveaxis(arg, -1, d)
    values = _select_by_value(x, _flat_positions(v.shape, d, arg),
                              V_CUMMAX if is_max else V_CUMMIN, f"{name}()")
    return (CummaxResult if is_max else CumminResult)(values, _plain(arg))


def cummax(x, dim):
    """Running maximum along ``dim`` and where it was taken: a named tuple
    ``(values, indices)``, both of ``x``'s shape.

    A later entry equal to the running maximum takes over its index, and a nan takes over
    for good, as in PyTorch.  ``grad_fn`` of ``values``: ``<CummaxBackward0>``; each entry's
    gradient goes to the entry its index names.

    Example:
        >>> tg.cummax(tg.tensor([1.0, 3.0, 2.0, 3.0]), 0)
        tapegrad.return_types.cummax(
        values=tensor([1., 3., 3., 3.]),
        indices=tensor([0, 1, 1, 3]))
    """
    return _cum_extreme(x, dim, True)


def cummin(x, dim):
    """Running minimum along ``dim`` and where it was taken: a named tuple
    ``(values, indices)``; as ``cummax``.

    Example:
        >>> tg.cummin(tg.tensor([3.0, 1.0, 2.0, 1.0]), 0).indices
        tensor([0, 1, 1, 3])
    """
    return _cum_extreme(x, dim, False)


def diff(x, n=1, dim=-1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim``: ``x[1:] - x[:-1]`` applied ``n`` times,
    after ``prepend`` and ``append`` are concatenated to ``x`` along ``dim``.

    Shape: ``x``'s with ``dim`` shorter by ``n`` (never below 0).  Bool tensors take the
    logical xor, as in PyTorch.  Recorded as slices and a subtraction (``<SubBackward0>``).

    Example:
        >>> tg.diff(tg.tensor([1.0, 4.0, 9.0, 16.0]))
        tensor([3., 5., 7.])
        >>> tg.diff(tg.tensor([1.0, 4.0, 9.0, 16.0]), n=2)
        tensor([2., 2.])
    """
    if x._value.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = _wrap_dim(dim, x._value.ndim)
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = cat([as_tensor_arg(p) for p in parts], d)
    for _ in range(n):
        length = x._value.shape[d]
        if length == 0:
            break
        hi = narrow(x, d, 1, length - 1)
        lo = narrow(x, d, 0, length - 1)
        x = logical_xor(hi, lo) if x._value.dtype.kind == "b" else sub(hi, lo)
    return x


def _order(v, d, descending):
    """Indices that sort v along d stably, nan last (first when descending): equal entries
    keep their order, as PyTorch's CPU sort does (also without ``stable=True``)."""
    if not descending:
        return np.argsort(v, axis=d, kind="stable")
    # a stable ascending sort of the reversed slices, reversed again: descending, ties in
    # their original order, nan first (works for every dtype, where negation would not)
    r = v.shape[d]
    back = np.argsort(np.flip(v, d), axis=d, kind="stable")
    return np.flip(r - 1 - back, d)


def _check_sortable(x, name):
    if x._value.dtype.kind == "c":
        raise RuntimeError(f"{name}(): complex tensors are not supported")


def sort(x, dim=-1, descending=False, stable=_UNSET):
    """x sorted along ``dim`` (ascending unless ``descending``) and where each value came
    from: a named tuple ``(values, indices)``, both of ``x``'s shape.

    nan sorts as the largest value.  Equal entries keep their order (the sort is stable, also
    without ``stable=True``, as PyTorch's CPU sort is).  ``grad_fn`` of ``values``:
    ``<SortBackward0>`` (``<SortBackward1>`` when ``stable`` is given); ``indices`` are int64.

    Example:
        >>> values, indices = tg.sort(tg.tensor([3.0, 1.0, 2.0]))
        >>> values, indices
        (tensor([1., 2., 3.]), tensor([1, 2, 0]))
        >>> tg.sort(tg.tensor([3.0, 1.0, 2.0]), descending=True).indices
        tensor([0, 2, 1])
    """
    _check_sortable(x, "sort")
    v = x._value
    variant = V_SORT if stable is _UNSET else V_SORT_STABLE
    if v.ndim == 0:
        _wrap_dim(dim, 0)
        arg = np.zeros((), dtype=np.int64)
        return SortResult(_select_by_value(x, arg, variant, "sort()"), _plain(arg))
    d = _wrap_dim(dim, v.ndim)
    arg = _order(v, d, descending).astype(np.int64)
    values = _select_by_value(x, _flat_positions(v.shape, d, arg), variant, "sort()")
    return SortResult(values, _plain(arg))


def argsort(x, dim=-1, descending=False, stable=False):
    """The indices that sort x along ``dim``: ``sort(x, dim, descending).indices`` (int64, no
    gradient).

    Example:
        >>> tg.argsort(tg.tensor([[3, 1, 2], [0, 5, 4]]), dim=1)
        tensor([[1, 2, 0],
                [0, 2, 1]])
    """
    _check_sortable(x, "argsort")
    _opaque_if_traced(x, "argsort of traced values")
    v = x._value
    if v.ndim == 0:
        _wrap_dim(dim, 0)
        return _plain(np.zeros((), dtype=np.int64))
    return _plain(_order(v, _wrap_dim(dim, v.ndim), descending).astype(np.int64))


def msort(x):
    """x sorted along its first dim: ``sort(x, 0).values`` (``<SortBackward0>``).

    Example:
        >>> tg.msort(tg.tensor([[3.0, 1.0], [2.0, 4.0]]))
        tensor([[2., 1.],
                [3., 4.]])
    """
    return sort(x, 0).values


def topk(x, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (smallest unless ``largest``) entries along ``dim`` and their indices:
    a named tuple ``(values, indices)`` of ``x``'s shape with ``k`` along ``dim``.

    nan counts as the largest value.  The entries come in sorted order (also with
    ``sorted=False``).  ``grad_fn`` of ``values``: ``<TopkBackward0>``.  Among equal entries
    tapegrad takes the first ones; PyTorch's choice among ties is its selection algorithm's.

    Example:
        >>> tg.topk(tg.tensor([1.0, 5.0, 3.0, 4.0]), 2)
        tapegrad.return_types.topk(
        values=tensor([5., 4.]),
        indices=tensor([1, 3]))
    """
    _check_sortable(x, "topk")
    v = x._value
    d = _wrap_dim(dim, v.ndim)
    length = v.shape[d] if v.ndim else 1
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"topk(): argument 'k' must be int, not {type(k).__name__}")
    if k < 0 or k > length:
        raise RuntimeError("selected index k out of range")
    if v.ndim == 0:
        # (a 0-d tensor gives its one value for k = 0 too, as PyTorch's topk does)
        arg = np.zeros((), dtype=np.int64)
        return TopkResult(_select_by_value(x, arg, V_TOPK, "topk()"), _plain(arg))
    order = _order(v, d, largest).astype(np.int64)
    arg = np.take(order, np.arange(k), axis=d)
    values = _select_by_value(x, _flat_positions(v.shape, d, arg), V_TOPK, "topk()")
    return TopkResult(values, _plain(arg))


def _one_per_slice(x, dim, keepdim, pick, variant, name, result):
    """A selection of one entry per slice along ``dim``: ``pick(sorted_order, slice_len)``
    gives the position in ascending order, per slice (an int array shaped like the result
    with ``dim`` kept)."""
    v = x._value
    if v.ndim == 0:
        _wrap_dim(dim, 0)
        arg = np.zeros((), dtype=np.int64)
        return result(_select_by_value(x, arg, variant, f"{name}()"), _plain(arg))
    d = _wrap_dim(dim, v.ndim)
    if v.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    order = np.moveaxis(_order(v, d, False).astype(np.int64), d, -1)
    sorted_v = np.take_along_axis(np.moveaxis(v, d, -1), order, axis=-1)
    pos = pick(order, sorted_v)        # (..., ) positions into each sorted slice
    arg = np.take_along_axis(order, pos[..., None], axis=-1)
    arg = np.moveaxis(arg, -1, d)
    positions = _flat_positions(v.shape, d, arg)
    if not keepdim:    # gathered straight into the result's shape: one node, as PyTorch's
        arg = arg.reshape(arg.shape[:d] + arg.shape[d + 1:])
        positions = positions.reshape(arg.shape)
    values = _select_by_value(x, positions, variant, f"{name}()")
    return result(values, _plain(arg))


def kthvalue(x, k, dim=-1, keepdim=False):
    """The ``k``-th smallest entry (k from 1) along ``dim`` and its index: a named tuple
    ``(values, indices)`` of ``x``'s shape without ``dim`` (size 1 with ``keepdim``).

    ``grad_fn`` of ``values``: ``<KthvalueBackward0>``.  Among equal entries tapegrad names
    the first in sorted order; PyTorch's choice is its selection algorithm's.

    Example:
        >>> tg.kthvalue(tg.tensor([4.0, 1.0, 3.0]), 2)
        tapegrad.return_types.kthvalue(
        values=tensor(3.),
        indices=tensor(2))
    """
    _check_sortable(x, "kthvalue")
    v = x._value
    d = _wrap_dim(dim, v.ndim)
    length = v.shape[d] if v.ndim else 1
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= length:
        if not isinstance(k, (int, np.integer)):
            raise TypeError(f"kthvalue(): argument 'k' must be int, not {type(k).__name__}")
        raise RuntimeError(
            f"kthvalue(): selected number k out of range for dimension {d}")

    def pick(order, sorted_v):
        return np.full(order.shape[:-1], k - 1, dtype=np.int64)
    return _one_per_slice(x, dim, keepdim, pick, V_KTHVALUE, "kthvalue", KthvalueResult)


def _median_all(x, skip_nan):
    name = "nanmedian" if skip_nan else "median"
    v = x._value
    if v.dtype.kind == "b":
        raise RuntimeError(f'"{name}_cpu" not implemented for \'Bool\'')
    flat = np.sort(v.reshape(-1))     # nan sorts last
    if v.dtype.kind == "f":
        nans = int(np.isnan(flat).sum())
        count = flat.size - nans
        value = math.nan if (nans and not skip_nan) or count == 0 else flat[(count - 1) // 2]
    elif flat.size == 0:
        raise IndexError(f"{name}(): Expected reduction dim to be specified for "
                         "input.numel() == 0.")
    else:
        value = flat[(flat.size - 1) // 2]
    value = np.asarray(value, dtype=v.dtype)
    if not _records(x):
        return _plain(value.reshape(()))
    n = v.size
    tape = recording_tape(n + 2)
    r0 = _ref(tape, x)
    ip = tape.put_aux((1, n, 1))
    off, out = _out(tape, (), 1)
    out[...] = value
    return _result(tape, tape.push(K.NANMEDIAN if skip_nan else K.MEDIAN, r0, -1, off, 1, ip),
                   out.reshape(()) if value.dtype.kind == "f" else value.reshape(()))


def _median_dim(x, dim, keepdim, skip_nan):
    name = "nanmedian" if skip_nan else "median"

    def pick(order, sorted_v):
        length = sorted_v.shape[-1]
        if sorted_v.dtype.kind != "f":
            return np.full(sorted_v.shape[:-1], (length - 1) // 2, dtype=np.int64)
        nans = np.isnan(sorted_v).sum(axis=-1)
        if skip_nan:
            # the lower median of the numbers; a slice of nan only: its first nan
            count = length - nans
            return np.where(count > 0, (count - 1) // 2, 0).astype(np.int64)
        # nan anywhere makes the median nan: the first nan (sorted after every number)
        return np.where(nans > 0, length - nans, (length - 1) // 2).astype(np.int64)
    return _one_per_slice(x, dim, keepdim, pick,
                          V_NANMEDIAN_DIM if skip_nan else V_MEDIAN_DIM, name,
                          NanmedianResult if skip_nan else MedianResult)


def median(x, dim=None, keepdim=False):
    """The lower median: of all entries (a 0-d tensor), or along ``dim`` with its index (a
    named tuple ``(values, indices)``).

    Of an even count it is the lower of the two middle values, as in PyTorch; a nan makes it
    nan.  ``grad_fn``: ``<MedianBackward0>`` (all entries: the gradient is shared among the
    entries equal to the median) or ``<MedianBackward1>`` (with ``dim``).  With ``dim``, among
    equal entries tapegrad names the first in sorted order; PyTorch's choice may differ.

    Example:
        >>> tg.median(tg.tensor([4.0, 1.0, 3.0, 2.0]))
        tensor(2.)
        >>> tg.median(tg.tensor([[4.0, 1.0, 3.0]]), dim=1)
        tapegrad.return_types.median(
        values=tensor([3.]),
        indices=tensor([2]))
    """
    _check_sortable(x, "median")
    if dim is None:
        return _median_all(x, False)
    return _median_dim(x, dim, keepdim, False)


def nanmedian(x, dim=None, keepdim=False):
    """``median`` ignoring nan: the lower median of the entries that are numbers (nan where
    there is none).  ``grad_fn``: ``<NanmedianBackward0>`` / ``<NanmedianBackward1>``.

    Example:
        >>> tg.nanmedian(tg.tensor([4.0, float("nan"), 1.0, 3.0]))
        tensor(3.)
    """
    _check_sortable(x, "nanmedian")
    if dim is None:
        return _median_all(x, True)
    return _median_dim(x, dim, keepdim, True)


def mode(x, dim=-1, keepdim=False):
    """The most frequent value along ``dim`` (the smallest of equally frequent ones) and an
    index where it occurs: a named tuple ``(values, indices)``.

    ``grad_fn`` of ``values``: ``<ModeBackward0>``.  tapegrad's index is the last occurrence
    in the slice; PyTorch's choice among occurrences may differ.

    Example:
        >>> tg.mode(tg.tensor([2.0, 1.0, 2.0, 3.0]))
        tapegrad.return_types.mode(
        values=tensor(2.),
        indices=tensor(2))
    """
    _check_sortable(x, "mode")

    def pick(order, sorted_v):
        # runs of equal values in each sorted slice: the longest, the first such run wins
        shape = sorted_v.shape[:-1]
        flat_v = sorted_v.reshape(-1, sorted_v.shape[-1])
        res = np.empty(flat_v.shape[0], dtype=np.int64)
        for row, s in enumerate(flat_v):
            best_len, best_end, start = 0, 0, 0
            for j in range(1, len(s) + 1):
                # nan equals nothing, itself included: each nan is a run of its own
                if j == len(s) or not s[j] == s[start]:
                    if j - start > best_len:
                        best_len, best_end = j - start, j - 1
                    start = j
            res[row] = best_end
        return res.reshape(shape)
    if x._value.ndim and x._value.shape[_wrap_dim(dim, x._value.ndim)] == 0:
        raise IndexError(
            f"mode(): Expected reduction dim {_wrap_dim(dim, x._value.ndim)} to have "
            "non-zero size.")
    return _one_per_slice(x, dim, keepdim, pick, V_MODE, "mode", ModeResult)
