"""Saving a recorded tape to ``.npz`` and replaying it in another process.

The file holds plain arrays only (loaded with ``allow_pickle=False``): the record columns,
the side arrays, the value arena (constants live there), which records are the arguments and
the outputs, and two versions: the file format's and the op table's.  Loading checks every
index a kernel would follow before anything runs, so a corrupted, truncated or foreign file
is refused with a ValueError instead of crashing the compiled replay.
"""
import hashlib
import zipfile

import numpy as np

from . import ops as K
from .tape import Tape
from .tensor import Tensor

FORMAT_VERSION = 1
_COLUMNS = ("op", "a0", "a1", "voff", "size", "ip")


def optable_version():
    """A digest of the op table (codes and names): files from another table are refused."""
    text = ";".join(f"{c}:{K.OPS[c].name}" for c in sorted(K.OPS))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def save_variant(variant, path):
    """Write one recorded variant of a compiled function."""
    tape = variant.template
    outs = variant.outputs
    if variant.treedef is not None and not all(d is None for d, _ in variant.treedef[1]):
        raise ValueError("only functions returning a tensor or a flat tuple of tensors can be "
                         "saved")
    if any(r is None for r, _, _ in outs):
        raise ValueError("only functions whose outputs are all computed tensors can be saved")
    shapes = np.full((len(outs), max([len(s) for _, s, _ in outs] + [1])), -1, dtype=np.int64)
    for j, (_, s, _) in enumerate(outs):
        shapes[j, :len(s)] = s
    arrays = {name: np.frombuffer(getattr(tape, name), dtype=np.int64) for name in _COLUMNS}
    arrays["fp"] = np.frombuffer(tape.fp, dtype=np.float64)
    arrays["aux"] = np.frombuffer(tape.aux, dtype=np.int64) if len(tape.aux) else \
        np.zeros(0, np.int64)
    arrays["faux"] = np.frombuffer(tape.faux, dtype=np.float64) if len(tape.faux) else \
        np.zeros(0)
    arrays["vals"] = np.array(tape.vals[:tape.top])
    args = sorted(variant.arg_records.items())
    arrays["arg_pos"] = np.array([i for i, _ in args], dtype=np.int64)
    arrays["arg_rec"] = np.array([r for _, r in args], dtype=np.int64)
    arrays["out_rec"] = np.array([r for r, _, _ in outs], dtype=np.int64)
    arrays["out_shape"] = shapes
    arrays["tuple_out"] = np.array([variant.treedef is not None])
    arrays["format_version"] = np.array([FORMAT_VERSION])
    arrays["optable"] = np.array([optable_version()])
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def _fail(why):
    raise ValueError(f"not a valid tapegrad tape file: {why}")


def _load_arrays(path):
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, ValueError) as e:
        _fail(f"{type(e).__name__}: {e}")


def _check(arrays):
    need = set(_COLUMNS) | {"fp", "aux", "faux", "vals", "arg_pos", "arg_rec", "out_rec",
                            "out_shape", "tuple_out", "format_version", "optable"}
    missing = need - set(arrays)
    if missing:
        _fail(f"missing arrays {sorted(missing)}")
    fv = arrays["format_version"]
    if fv.shape != (1,) or fv.dtype.kind not in "iu" or int(fv[0]) != FORMAT_VERSION:
        _fail(f"format version {fv.tolist()} (this tapegrad reads version {FORMAT_VERSION})")
    ot = arrays["optable"]
    if ot.shape != (1,) or ot.dtype.kind != "U" or str(ot[0]) != optable_version():
        _fail("it was written with a different op table")
    for name in _COLUMNS + ("aux", "arg_pos", "arg_rec", "out_rec", "out_shape"):
        if arrays[name].dtype != np.int64:
            _fail(f"column {name} has dtype {arrays[name].dtype}")
    for name in ("fp", "faux", "vals"):
        if arrays[name].dtype != np.float64:
            _fail(f"column {name} has dtype {arrays[name].dtype}")
    n = len(arrays["op"])
    for name in _COLUMNS + ("fp",):
        if arrays[name].shape != (n,):
            _fail(f"column {name} has shape {arrays[name].shape}, expected ({n},)")
    if arrays["out_shape"].ndim != 2 or arrays["out_shape"].shape[0] != len(arrays["out_rec"]):
        _fail("output shapes do not match the outputs")
    if arrays["arg_pos"].shape != arrays["arg_rec"].shape:
        _fail("argument tables differ in length")
    _check_records(arrays)


def _check_records(a):
    """Every index the forward and backward kernels follow stays inside its array."""
    op, a0, a1, voff, size, ip = (a[c] for c in _COLUMNS)
    aux, faux, nvals = a["aux"], a["faux"], len(a["vals"])
    n = len(op)

    def rec(x, r, what):
        if not (0 <= x < r):
            _fail(f"record {r} ({what}) refers to record {x}")

    def aux_span(r, start, length):
        if start < 0 or length < 0 or start + length > len(aux):
            _fail(f"record {r} reads aux[{start}:{start + length}] of {len(aux)}")

    for r in range(n):
        code = int(op[r])
        if code not in K.OPS:
            _fail(f"record {r} has unknown opcode {code}")
        if size[r] < 0 or voff[r] < 0 or voff[r] + size[r] > nvals:
            _fail(f"record {r} has values [{voff[r]}, {voff[r] + size[r]}) outside the arena")
        if code in (K.LEAF, K.CONST):
            continue
        if code == K.EXTERN:
            _fail(f"record {r} refers to another tape")
        if code in (K.CAT, K.STACK):
            aux_span(r, ip[r], 1)
            k = int(aux[ip[r]])
            aux_span(r, ip[r] + 1, 3 * k + 2)
            outer, block = aux[ip[r] + 1 + 3 * k], aux[ip[r] + 2 + 3 * k]
            if outer * block != size[r]:
                _fail(f"record {r}: concatenation sizes do not add up")
            for j in range(k):
                src, start, width = aux[ip[r] + 1 + 3 * j: ip[r] + 4 + 3 * j]
                rec(int(src), r, "concatenation input")
                if start < 0 or width < 0 or start + width > block or \
                        outer * width != size[src]:
                    _fail(f"record {r}: concatenation input {j} does not fit")
            continue
        rec(int(a0[r]), r, "first input")
        if a1[r] != -1:
            rec(int(a1[r]), r, "second input")
        s0 = size[a0[r]]
        if code == K.WHERE:
            rec(int(ip[r]), r, "condition")
            if size[ip[r]] != size[r]:
                _fail(f"record {r}: condition differs in size")
        if code in (K.ADD, K.SUB, K.MUL, K.DIV, K.POW, K.MAXIMUM, K.MINIMUM, K.WHERE) or (
                code == K.CMP and a1[r] != -1):
            if a1[r] == -1 or size[a1[r]] != size[r] or s0 != size[r]:
                _fail(f"record {r}: elementwise operands differ in size")
        elif code == K.GUARD:
            if size[r] != s0 or ip[r] < 0 or ip[r] + size[r] > len(faux):
                _fail(f"record {r}: guard values out of range")
        elif code in (K.SOFTPLUS, K.CLAMP):
            if s0 != size[r] or ip[r] < 0 or ip[r] + 2 > len(faux):
                _fail(f"record {r}: parameters out of range")
        elif code == K.MATMUL:
            aux_span(r, ip[r], 5)
            b, m, kk, nn = (int(x) for x in aux[ip[r] + 1: ip[r] + 5])
            if min(b, m, kk, nn) < 0 or b * m * kk != s0 or b * kk * nn != size[a1[r]] or \
                    b * m * nn != size[r]:
                _fail(f"record {r}: matrix sizes do not match")
        elif code in (K.GATHER, K.BCAST):
            aux_span(r, ip[r], 2)
            if aux[ip[r] + 1] != size[r]:
                _fail(f"record {r}: index length does not match")
            aux_span(r, ip[r] + 2, int(size[r]))
            idx = aux[ip[r] + 2: ip[r] + 2 + size[r]]
            if idx.size and (idx.min() < 0 or idx.max() >= s0):
                _fail(f"record {r}: index out of range")
        elif code == K.EXPAND_S:
            aux_span(r, ip[r], 1)
            nd = int(aux[ip[r]])
            aux_span(r, ip[r] + 1, 2 * nd)
            shp = aux[ip[r] + 1: ip[r] + 1 + nd]
            strides = aux[ip[r] + 1 + nd: ip[r] + 1 + 2 * nd]
            if nd < 0 or (shp < 0).any() or (strides < 0).any() or \
                    int(np.prod(shp)) != size[r]:
                _fail(f"record {r}: expansion shape does not match")
            if size[r] and int(((shp - 1) * strides).sum()) >= s0:
                _fail(f"record {r}: expansion reads outside its input")
        elif code == K.SCATTER:
            aux_span(r, ip[r], 2)
            if aux[ip[r] + 1] != s0:
                _fail(f"record {r}: index length does not match")
            aux_span(r, ip[r] + 2, int(s0))
            idx = aux[ip[r] + 2: ip[r] + 2 + s0]
            if idx.size and (idx.min() < 0 or idx.max() >= size[r]):
                _fail(f"record {r}: index out of range")
        elif code == K.RESHAPE:
            aux_span(r, ip[r], 1)
            if s0 != size[r]:
                _fail(f"record {r}: reshape changes the size")
        elif code in _REDUCTIONS:
            aux_span(r, ip[r], 4 if code in (K.VAR, K.STD) else 3)
            o, red, i = (int(x) for x in aux[ip[r]: ip[r] + 3])
            if min(o, red, i) < 0 or o * red * i != s0:
                _fail(f"record {r}: reduction shape does not match its input")
            if code in (K.SOFTMAX, K.LOG_SOFTMAX):
                if s0 != size[r]:
                    _fail(f"record {r}: softmax changes the size")
            elif o * i != size[r]:
                _fail(f"record {r}: reduction output size does not match")
            if code in (K.MAX_DIM, K.MIN_DIM):
                aux_span(r, ip[r] + 3, o * i)
                idx = aux[ip[r] + 3: ip[r] + 3 + o * i]
                if idx.size and (idx.min() < 0 or idx.max() >= red):
                    _fail(f"record {r}: argmax index out of range")
        elif s0 != size[r]:
            _fail(f"record {r}: input and output differ in size")
    for r in a["out_rec"]:
        if not (0 <= r < n):
            _fail(f"output record {r} out of range")
    for r in a["arg_rec"]:
        if not (0 <= r < n) or op[r] != K.LEAF:
            _fail(f"argument record {r} is not a leaf")


_REDUCTIONS = frozenset({K.SUM, K.SUM_DIM, K.MEAN, K.MEAN_DIM, K.PROD, K.PROD_DIM, K.MAX,
                         K.MIN, K.AMAX, K.AMIN, K.MAX_DIM, K.MIN_DIM, K.VAR, K.STD,
                         K.LOGSUMEXP, K.SOFTMAX, K.LOG_SOFTMAX, K.NORM})


class LoadedTape:
    """A tape read from a file, callable like the function it was recorded from.

    Parameters the function closed over are frozen at the values they had when it was saved;
    gradients flow to the arguments.
    """

    def __init__(self, arrays):
        from .replay import Variant
        tape = Tape(len(arrays["vals"]) + 1)
        for name in _COLUMNS:
            getattr(tape, name).frombytes(arrays[name].tobytes())
        tape.fp.frombytes(arrays["fp"].tobytes())
        tape.aux.frombytes(arrays["aux"].tobytes())
        tape.faux.frombytes(arrays["faux"].tobytes())
        nv = len(arrays["vals"])
        tape.vals[:nv] = arrays["vals"]
        tape.top = nv
        tape.finished = True
        arg_records = {int(i): int(r) for i, r in zip(arrays["arg_pos"], arrays["arg_rec"])}
        frozen = {int(r) for r in np.nonzero(arrays["op"] == K.LEAF)[0]} - set(
            arg_records.values())
        for r in frozen:
            off, n = int(arrays["voff"][r]), int(arrays["size"][r])
            tape.leaves[r] = Tensor._make(np.array(arrays["vals"][off:off + n]))
        outputs = []
        for r, row in zip(arrays["out_rec"], arrays["out_shape"]):
            outputs.append((int(r), tuple(int(s) for s in row if s >= 0), None))
        tuple_out = bool(arrays["tuple_out"][0])
        treedef = (tuple, [(None, 1)] * len(outputs)) if tuple_out else None
        self.n_args = (max(arg_records) + 1) if arg_records else 0
        self.arg_shapes = {i: int(arrays["size"][r]) for i, r in arg_records.items()}
        self._variant = Variant(tape, arg_records, outputs, treedef, {})

    def __call__(self, *args):
        if len(args) < self.n_args:
            raise TypeError(f"the tape takes {self.n_args} tensor arguments, got {len(args)}")
        for i, n in self.arg_shapes.items():
            a = args[i]
            if not isinstance(a, Tensor) or a._value.size != n or a._value.dtype.kind != "f":
                raise ValueError(f"argument {i} must be a float tensor of {n} elements")
        from .replay import _Miss
        res = self._variant.replay(args)
        if type(res) is _Miss:
            raise RuntimeError("a guard recorded with the tape failed for these inputs: the "
                               "function would take another branch; record it again")
        return res

    def stats(self):
        from .replay import tape_stats
        return tape_stats(self._variant.template)


def load_tape(path):
    """Read a tape written by ``tape.save(path)`` / ``Compiled.save(path)``."""
    arrays = _load_arrays(path)
    _check(arrays)
    return LoadedTape(arrays)
