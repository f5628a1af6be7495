"""In-place operations and the saved-value checks that make them safe.

An in-place op on a tensor that is being recorded is recorded like its out-of-place twin:
the handle is moved to the new record, and the old record keeps its value, so the records
that saved it still hold what they saw.  Like PyTorch, we still refuse to backward through a
record whose saved value was *logically* modified (the version it saw is older than the
current one), and we add what PyTorch cannot say without a second run in anomaly mode: which
in-place op made the change, and where in the user's code.

Without recording (``no_grad``, or nothing requires grad) the op writes into the tensor's
memory and bumps its version.
"""
import builtins
import os
import re
import sys
import weakref

import numpy as np

from . import autograd
from . import functional as F
from . import ops as K
from ._quiet import quiet_begin, quiet_end
from .tape import state
from .tensor import Tensor
from .tensor import _shared as _tensor_shared

_LEAF_IN_PLACE = "a leaf Variable that requires grad is being used in an in-place operation."
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
# id(leaf) -> (weak ref, op name, "file:line") of its last change.  Not a WeakKeyDictionary:
# that compares keys with ==, which is elementwise for tensors.
_leaf_sites = {}


_inside = {}  # code filename -> whether it belongs to tapegrad (abspath is slow: cache it)


def user_site():
    """'file:line' of the innermost frame outside tapegrad."""
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        inside = _inside.get(name)
        if inside is None:
            inside = _inside[name] = os.path.abspath(name).startswith(_PKG_DIR + os.sep)
        if not inside:
            return f"{name}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


def _storage(tape, r):
    return tape.storage_of.get(r, r)


# id(t) -> (weak ref to t, t's value, tape weak ref or None, record or leaf) for a tensor t
# that shares the memory of a recorded value or of a leaf (``detach()``, ``detach_()``):
# writing into it changes that value, which backward must notice, as PyTorch does.
_shared = _tensor_shared


def share_memory(t, src):
    """Note that t's value is src's memory (t = src.detach(), or src itself before detach_())."""
    if src._tape is not None:
        target = (weakref.ref(src._tape), src._r)
    elif src._rg:
        target = (None, src)
    else:
        hit = _shared.get(id(src))
        if hit is None or hit[0]() is not src or hit[1] is not src._value:
            return
        target = hit[2:]
    key = id(t)
    _shared[key] = (weakref.ref(t, lambda _, k=key: _shared.pop(k, None)), t._value) + target


# tensor.py cannot import this module (it is imported from here): hand it the function
sys.modules[Tensor.__module__]._share_memory = share_memory


def _log(t, name):
    """Record that t's storage changes now (a later backward checks who saw the old one)."""
    if t._tape is not None:
        tape = t._tape
        tape.inplace.append((_storage(tape, t._r), len(tape), name, user_site(),
                             tuple(t._value.shape)))
    elif t._rg:
        key = id(t)
        _leaf_sites[key] = (weakref.ref(t, lambda _, k=key: _leaf_sites.pop(k, None)), name,
                            user_site())
    else:
        hit = _shared.get(id(t))
        if hit is None or hit[0]() is not t or hit[1] is not t._value:
            return
        tape_ref, src = hit[2:]
        if tape_ref is None:      # a leaf's own value changed
            src._version += 1
            _log(src, name)
            return
        tape = tape_ref()
        if tape is not None:
            tape.inplace.append((_storage(tape, src), len(tape), name, user_site(),
                                 tuple(t._value.shape)))


def _apply(t, name, compute, write):
    """Run one in-place op: ``compute()`` gives the out-of-place result (recorded), or
    ``write()`` mutates t's memory when nothing is recorded."""
    records = state.grad_enabled and (t._rg or compute.other_rg)
    if records:
        if t._tape is None and t._rg:
            raise RuntimeError(_LEAF_IN_PLACE)
        res = compute()
        if res._tape is None:  # nothing needed recording after all
            np.copyto(t._value, res._value, casting="same_kind")
            t._version += 1
            return t
        old_tape, old_r = t._tape, t._r
        if old_tape is not None:
            s = _storage(old_tape, old_r)
            old_tape.inplace.append((s, res._r if res._tape is old_tape else len(old_tape),
                                     name, user_site(), tuple(t._value.shape)))
            if res._tape is old_tape:
                old_tape.storage_of[res._r] = s
        t._value = res._value
        t._tape, t._r, t._rg = res._tape, res._r, True
        t._version += 1
        return t
    write()
    _log(t, name)
    t._version += 1
    return t


class _Compute:
    __slots__ = ("fn", "other_rg")

    def __init__(self, fn, other):
        self.fn = fn
        self.other_rg = isinstance(other, Tensor) and other._rg

    def __call__(self):
        return self.fn()


def _check_cast(t, other_value):
    if t._value.dtype.kind in "iub":
        kind = np.asarray(other_value).dtype.kind
        if kind == "f" or (t._value.dtype.kind == "b" and kind in "iu"):
            names = {"f": "Float", "i": "Long", "u": "Long", "b": "Bool"}
            raise RuntimeError(
                f"result type {names[kind] if kind != 'f' else 'Double'} can't be cast to the "
                f"desired output type {names[t._value.dtype.kind]}")


def _value_of(other):
    return other._value if isinstance(other, Tensor) else other


def _arith_(name, out_of_place, ufunc):
    def method(self, other, **kw):
        if kw:
            alpha = kw.pop("alpha", 1)
            if alpha != 1:
                other = F.mul(F.as_tensor_arg(other), alpha) if isinstance(other, Tensor) \
                    else other * alpha
        ov = _value_of(other)
        if isinstance(ov, np.ndarray) and ov.shape != self._value.shape:
            shape = F.broadcast_shape(self._value.shape, ov.shape)
            if shape != self._value.shape:
                raise RuntimeError(
                    f"output with shape {list(self._value.shape)} doesn't match the broadcast "
                    f"shape {list(shape)}")
        _check_cast(self, ov)

        def write():
            tok = quiet_begin()   # inf * 0 is nan without a NumPy warning, as in PyTorch
            try:
                ufunc(self._value, ov, out=self._value, casting="same_kind")
            finally:
                quiet_end(tok)
        return _apply(self, name, _Compute(lambda: out_of_place(self, other), other), write)
    method.__name__ = name
    return method


add_ = _arith_("add_", F.add, np.add)
sub_ = _arith_("sub_", F.sub, np.subtract)
mul_ = _arith_("mul_", F.mul, np.multiply)
div_ = _arith_("div_", F.div, np.true_divide)
pow_ = _arith_("pow_", F.pow, np.power)


def _unary_(name, out_of_place, write_fn):
    def method(self, *args, **kwargs):
        def write():
            write_fn(self._value, *args, **kwargs)
        return _apply(self, name, _Compute(lambda: out_of_place(self, *args, **kwargs), None),
                      write)
    method.__name__ = name
    return method


def _clamp_write(v, min=None, max=None):
    np.clip(v, -np.inf if min is None else min, np.inf if max is None else max, out=v)


clamp_ = _unary_("clamp_", F.clamp, _clamp_write)
relu_ = _unary_("relu_", F.relu, lambda v: np.maximum(v, 0, out=v))
exp_ = _unary_("exp_", F.exp, lambda v: np.exp(v, out=v))
tanh_ = _unary_("tanh_", F.tanh, lambda v: np.tanh(v, out=v))
sigmoid_ = _unary_("sigmoid_", F.sigmoid, lambda v: F._sigmoid(v, v))
neg_ = _unary_("neg_", F.neg, lambda v: np.negative(v, out=v))
zero_ = _unary_("zero_", lambda t: F.mul(t, 0.0), lambda v: v.fill(0))


def fill_(self, value):
    v = _value_of(value)
    return _apply(self, "fill_", _Compute(lambda: F.add(F.mul(self, 0.0), value), value),
                  lambda: self._value.fill(v))


def copy_(self, src):
    src = F.as_tensor_arg(src)
    F.broadcast_shape(self._value.shape, src._value.shape)

    def compute():
        return F.add(F.mul(self, 0.0), F.expand(src, *self._value.shape))
    return _apply(self, "copy_", _Compute(compute, src),
                  lambda: np.copyto(self._value, np.broadcast_to(src._value, self._value.shape),
                                    casting="unsafe"))


def setitem(self, key, value):
    """``self[key] = value``: a gather from [self, value] that picks value at ``key``."""
    value_t = value if isinstance(value, Tensor) else None
    vv = _value_of(value)
    np_key, variant = F._index_key(key, self._value.shape)
    target = np.arange(self._value.size, dtype=np.int64).reshape(self._value.shape)
    try:
        picked = target[np_key]
    except IndexError as e:
        raise IndexError(str(e).replace("axis", "dimension")) from None
    if (state.grad_enabled and self._tape is None and self._rg
            and _makes_view(key, self._value.shape)):
        raise RuntimeError("a view of " + _LEAF_IN_PLACE)
    vshape = np.shape(picked)
    # PyTorch drops the value's leading 1s, then expands it to the indexed part
    vshape_in = np.shape(vv)
    lead = next((i for i, d in enumerate(vshape_in) if d != 1), len(vshape_in))
    if vshape_in != vshape and variant != F.V_INDEX:
        # a basic index writes through a view: PyTorch's expand errors
        F.expand(Tensor._make(np.zeros(vshape_in[lead:])), *vshape)
    elif vshape_in != vshape:
        try:
            np.broadcast_shapes(np.shape(vv), vshape)
        except ValueError:
            raise RuntimeError(
                f"shape mismatch: value tensor of shape {list(np.shape(vv))} cannot be broadcast "
                f"to indexing result of shape {list(vshape)}") from None

    def compute():
        src = value_t if value_t is not None else F.as_tensor_arg(
            np.asarray(vv, dtype=np.float64))
        if src._value.ndim > len(vshape) and lead:
            src = F.reshape(src, *src._value.shape[lead:])
        src = F.expand(src, *vshape) if src._value.shape != vshape else src
        n = self._value.size
        combined = F.cat([F.reshape(self, -1), F.reshape(src, -1)])
        idx = np.arange(n, dtype=np.int64)
        idx[np.asarray(picked).reshape(-1)] = n + np.arange(np.size(picked), dtype=np.int64)
        return F._gathered(combined, idx.reshape(self._value.shape), V_COPY_SLICES)

    def write():
        self._value[np_key] = vv
    _apply(self, "__setitem__", _Compute(compute, value), write)


V_COPY_SLICES = 14


def _makes_view(key, shape):
    """Whether PyTorch writes ``x[key] = v`` through a view of x (a basic index that picks
    less than all of x) rather than into x itself; the leaf error then says so."""
    key = key if isinstance(key, tuple) else (key,)

    def dims(k):
        if k is None or k is Ellipsis or isinstance(k, bool):
            return 0
        v = k._value if isinstance(k, Tensor) else k
        if isinstance(v, (np.ndarray, list)) and np.asarray(v).dtype.kind == "b":
            return np.ndim(v)
        return 1
    d = 0
    for i, k in enumerate(key):
        if k is Ellipsis:
            d = len(shape) - builtins.sum(dims(j) for j in key[i + 1:])
            continue
        if k is None or (isinstance(k, (int, np.integer)) and not isinstance(k, bool)):
            return True
        if isinstance(k, Tensor) and k._value.ndim == 0 and k._value.dtype.kind in "iu":
            return True
        if isinstance(k, slice):
            n = shape[d] if d < len(shape) else 0
            if k.indices(n) != (0, n, 1):
                return True
        d += dims(k)
    return False


def check_saved_versions(tape, need, op, a0, a1):
    """Raise PyTorch's error when a record about to be swept saw an older version of a value."""
    entries = tape.inplace
    by_storage = {}
    for s, at, name, where, shape in entries:
        by_storage.setdefault(s, []).append((at, name, where, shape))
    needed = np.nonzero(need)[0]
    # newest first: the order the sweep reaches them, so the error is PyTorch's first one
    for r in needed[::-1]:
        code = int(op[r])
        reads = K.OPS[code].reads
        if not reads:
            continue
        read = []
        # an in-place op reads the value it replaces as its self: PyTorch saves a copy of that
        # (and tapegrad keeps it untouched), so only its other reads are checked
        if reads & K.READS_X0 and a0[r] >= 0 and (
                tape.storage_of.get(int(r), -1) != _storage(tape, int(a0[r]))):
            read.append(int(a0[r]))
        if reads & K.READS_X1 and a1[r] >= 0:
            read.append(int(a1[r]))
        if reads & K.READS_OUT:
            read.append(int(r))
        for s in read:
            while int(op[s]) in (K.BCAST, K.EXPAND_S):  # a broadcast copy stands for its source
                s = int(a0[s])
            changes = by_storage.get(_storage(tape, s))
            if not changes:
                continue
            # r saw the changes made before it was recorded; its own output (s == r) also
            # includes the change that produced it
            seen = sum(1 for at, *_ in changes if at < r or (s == r and at == r))
            current = len(changes)
            if seen != current:
                at, name, where, shape = changes[seen]
                # PyTorch names the node that made r's own output, or else the tensor's
                # grad_fn now: the last recorded in-place op on it
                producer = _producer_name(tape, s if s == r else _current_record(tape, s))
                producer = f", which is output 0 of {producer}," if producer else ""
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by "
                    f"an inplace operation: [tapegrad.DoubleTensor {list(shape)}]{producer} is at "
                    f"version {current}; expected version {seen} instead. It was modified by "
                    f"{name} at {where}.")


def _current_record(tape, s):
    """The record that last wrote the storage record s's value lives in."""
    root = _storage(tape, s)
    return builtins.max([root] + [x for x, st in tape.storage_of.items() if st == root])


def _producer_name(tape, rec):
    """The grad_fn name PyTorch's version error shows for record rec ('' for leaves):
    ``ExpBackward0`` -> ``Exp``, ``ClampBackward1`` -> ``Clamp1``."""
    Node, _node_of_input = autograd.Node, autograd._node_of_input
    node = _node_of_input(tape, rec)
    if not isinstance(node, Node):
        return ""
    name = node.name()
    m = re.fullmatch(r"(.+)Backward(\d+)", name)
    if m is None:
        return name
    return m.group(1) + ("" if m.group(2) == "0" else m.group(2))


def leaf_site(leaf):
    """(op name, 'file:line') of the last in-place change of a leaf, or None."""
    hit = _leaf_sites.get(id(leaf))
    if hit is None or hit[0]() is not leaf:
        return None
    return hit[1], hit[2]


METHODS = {
    "add_": add_, "sub_": sub_, "mul_": mul_, "div_": div_, "pow_": pow_,
    "__iadd__": add_, "__isub__": sub_, "__imul__": mul_, "__itruediv__": div_,
    "__ipow__": pow_, "clamp_": clamp_, "clip_": clamp_, "relu_": relu_, "exp_": exp_,
    "tanh_": tanh_, "sigmoid_": sigmoid_, "neg_": neg_, "zero_": zero_, "fill_": fill_,
    "copy_": copy_, "__setitem__": setitem,
}


# the driver calls these through its seam (autograd.ABOVE): it sits below this module
autograd.ABOVE.check_saved_versions = check_saved_versions
autograd.ABOVE.leaf_site = leaf_site
