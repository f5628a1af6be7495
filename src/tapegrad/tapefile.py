"""Saving a recorded tape to ``.npz`` and replaying it in another process.

The file holds plain arrays only (read without pickle): the record columns, the side arrays,
the value arena (constants live there), which records are the arguments and the outputs (and
their shapes), the file format's version, what each opcode the tape uses meant when it was
written (name and record layout), and a SHA-256 digest of all of it.  Loading checks the
digest, then every index a kernel would follow before anything
runs, so a corrupted, truncated, edited or foreign file is refused with a ValueError instead
of crashing the compiled replay or computing something else.

A file is read from a path, from bytes or from a binary file object, and never asks for more
memory than it holds: members are stored uncompressed (as ``save`` writes them), and every
size a zip header or an array header declares is checked against the bytes really there
before anything is allocated; the whole file, and the gradient arena a replay of it would
need, may not exceed ``max_bytes`` (``MAX_TAPE_BYTES``, 1 GiB, unless raised).
"""
import hashlib
import io
import math
import os
import threading
import zipfile

import numpy as np

from . import ops as K
from .ops import custom
from .ops import table as T
from . import replay
from .tape import Tape
from .tensor import Tensor

# 2: digest, argument shapes; PROD and VAR/STD records carry mode flags
# 3: the opcodes the tape uses, with their names and layouts, instead of a digest of the table
FORMAT_VERSION = 3
# What a tape file may make ``load_tape`` hold, by default: its own bytes, and the gradient
# arena one backward sweep of it allocates.  W3's tape (a 784-256-256-10 MLP step) is 8 MB.
MAX_TAPE_BYTES = 1 << 30
_COLUMNS = ("op", "a0", "a1", "voff", "size", "ip")
# Version 2 files name the whole op table by a digest.  Opcodes are append-only, so a file
# written with a table still known here means today what it meant then (every op of it has
# layout 1).
_LEGACY_TABLES = {"a9664050b583bc8a": "the op table of tapegrad 0.1.0 (64 opcodes)"}


def _op_table_rows(op):
    """The table rows of the opcodes in column ``op``: (codes, names, layouts)."""
    used = sorted(set(np.asarray(op).tolist()))
    return (np.array(used, dtype=np.int64), np.array([K.OPS[c].name for c in used]),
            np.array([K.OPS[c].layout for c in used], dtype=np.int64))


def save_variant(variant, target):
    """Write one recorded variant of a compiled function to ``target``: a path, or a binary
    file object (written from its current position, left open)."""
    tape = variant.template
    outs = variant.outputs
    td = variant.treedef
    if td is not None and (td[0] is dict or not all(d is None for d, _ in td[1])):
        raise ValueError("only functions returning a tensor or a flat tuple of tensors can be "
                         "saved")
    if any(r is None for r, _, _ in outs):
        raise ValueError("only functions whose outputs are all computed tensors can be saved")
    if any(type(k) is not int for k in variant.arg_records):
        raise ValueError("only functions whose tensor arguments are positional (not keywords, "
                         "not inside lists, tuples or dicts) can be saved")
    shapes = _padded([s for _, s, _ in outs])
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
    arrays["arg_shape"] = _padded([variant.arg_shapes[i] for i, _ in args])
    arrays["out_rec"] = np.array([r for r, _, _ in outs], dtype=np.int64)
    arrays["out_shape"] = shapes
    arrays["tuple_out"] = np.array([td is not None])
    arrays["format_version"] = np.array([FORMAT_VERSION], dtype=np.int64)
    arrays["opcodes"], arrays["opnames"], arrays["oplayouts"] = _op_table_rows(arrays["op"])
    arrays["digest"] = np.array([digest(arrays)])
    if hasattr(target, "write"):
        np.savez(target, **arrays)
        return
    with open(target, "wb") as fh:
        np.savez(fh, **arrays)


def variant_bytes(variant):
    """The ``.npz`` file ``save_variant`` would write, as bytes."""
    buffer = io.BytesIO()
    save_variant(variant, buffer)
    return buffer.getvalue()


def _padded(shapes):
    """Shapes as the rows of an int64 matrix, padded with -1."""
    out = np.full((len(shapes), max([len(s) for s in shapes] + [1])), -1, dtype=np.int64)
    for j, s in enumerate(shapes):
        out[j, :len(s)] = s
    return out


def digest(arrays):
    """SHA-256 of every array but ``digest`` itself: names, dtypes, shapes and bytes."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        if name == "digest":
            continue
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


class _Refused(ValueError):
    """A file ``load_tape`` refuses (raised as the ValueError it is)."""


def _fail(why):
    raise _Refused(f"not a valid tapegrad tape file: {why}")


# Arrays a tape file holds; an archive with more members than this is not one
_MAX_MEMBERS = 32


def _open_source(source, max_bytes):
    """``source`` as a seekable binary file, its size, and whether to close it after."""
    if isinstance(source, (bool, int)):
        # open(fd) would close the caller's descriptor when done; numpy.load refuses ints too
        raise TypeError("load_tape() takes a path, bytes or a binary file object, not an int "
                        "(for a file descriptor pass os.fdopen(fd, 'rb', closefd=False))")
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = memoryview(source).cast("B")
        return io.BytesIO(data), data.nbytes, True
    if isinstance(source, (str, os.PathLike)):
        fh = open(source, "rb")   # a missing file is an OSError, as for open()
        return fh, os.fstat(fh.fileno()).st_size, True
    if hasattr(source, "read"):
        # from its current position, as numpy.load reads a file object; it may be a pipe or
        # a socket, so it is read to its end (or one byte past the limit) rather than sought,
        # in as many reads as a raw stream needs
        data = bytearray()
        while len(data) <= max_bytes:
            part = source.read(max_bytes + 1 - len(data))
            if not isinstance(part, (bytes, bytearray)):
                if part is None:   # a non-blocking stream with nothing to read yet
                    raise TypeError("load_tape() needs a blocking binary file object")
                raise TypeError("load_tape() needs a file opened in binary mode ('rb')")
            if not part:
                break
            data += part
        return io.BytesIO(data), len(data), True
    raise TypeError(f"load_tape() takes a path, bytes or a binary file object, not "
                    f"{type(source).__name__}")


def _load_arrays(source, max_bytes):
    fh, size, owned = _open_source(source, max_bytes)
    try:
        if size > max_bytes:
            _fail(f"it holds more than max_bytes={max_bytes} bytes")
        try:
            return _read_archive(fh, size)
        except _Refused:
            raise
        except Exception as e:  # noqa: BLE001 - whatever a damaged archive makes zipfile raise
            _fail(f"{type(e).__name__}: {e}")
    finally:
        if owned:
            fh.close()


def _read_archive(fh, size):
    """The arrays of an uncompressed ``.npz`` archive, each checked against the bytes its
    member really holds before it is read."""
    if not zipfile.is_zipfile(fh):
        _fail("not an .npz archive")
    with zipfile.ZipFile(fh) as archive:
        members = archive.infolist()
        if len(members) > _MAX_MEMBERS:
            _fail(f"{len(members)} members (a tape has {len(_ALL_ARRAYS)})")
        names = [m.filename for m in members]
        if len(set(names)) != len(names):
            _fail("a member name appears twice")
        for m in members:
            if not m.filename.endswith(".npy"):
                _fail(f"member {m.filename!r} is not an array")
            if m.compress_type != zipfile.ZIP_STORED:
                # a compressed member can ask for a thousand times its size: a zip bomb
                _fail(f"member {m.filename!r} is compressed (tape files store arrays "
                      "uncompressed, as save writes them)")
            if m.flag_bits & 1:
                _fail(f"member {m.filename!r} is encrypted")
            if m.file_size != m.compress_size:
                _fail(f"member {m.filename!r} declares {m.file_size} bytes but stores "
                      f"{m.compress_size}")
        if sum(m.file_size for m in members) > size:
            _fail("its members declare more bytes than the file holds")
        arrays = {}
        for m in members:
            with archive.open(m) as member:
                arrays[m.filename[:-4]] = _read_npy(member, m.file_size, m.filename)
        return arrays


def _read_npy(member, nbytes, name):
    """One ``.npy`` member of ``nbytes`` bytes, whose header must describe exactly the data
    that follows it (numpy.load allocates what the header says before reading)."""
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
    else:
        _fail(f"array {name!r} has .npy version {version}")
    if dtype.kind not in "biufU" or dtype.fields is not None or dtype.itemsize == 0:
        _fail(f"array {name!r} has dtype {dtype}")
    data_bytes = nbytes - member.tell()
    if math.prod(shape) * dtype.itemsize != data_bytes:   # Python ints: no wrap-around
        _fail(f"array {name!r} declares shape {shape} of {dtype} but holds {data_bytes} bytes")
    data = member.read(data_bytes)
    if len(data) != data_bytes:
        _fail(f"array {name!r} is truncated")
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")


_INT_ARRAYS = _COLUMNS + ("aux", "arg_pos", "arg_rec", "arg_shape", "out_rec", "out_shape")
_MATRICES = ("arg_shape", "out_shape")
_FLOAT_ARRAYS = ("fp", "faux", "vals")
_ALL_ARRAYS = _INT_ARRAYS + _FLOAT_ARRAYS + ("tuple_out", "opcodes", "opnames", "oplayouts",
                                             "digest", "format_version")


def _check(arrays, max_bytes):
    fv = arrays.get("format_version")
    if fv is None:
        _fail("no format version")
    if fv.shape != (1,) or fv.dtype != np.int64 or int(fv[0]) not in (2, FORMAT_VERSION):
        _fail(f"format version {fv.tolist()} (this tapegrad reads versions 2 and "
              f"{FORMAT_VERSION})")
    table = {"optable"} if int(fv[0]) == 2 else {"opcodes", "opnames", "oplayouts"}
    need = set(_INT_ARRAYS) | set(_FLOAT_ARRAYS) | {"tuple_out", "digest"} | table
    missing = need - set(arrays)
    if missing:
        _fail(f"missing arrays {sorted(missing)}")
    unknown = set(arrays) - need - {"format_version"}
    if unknown:
        _fail(f"unknown arrays {sorted(unknown)}")
    # the digest first: an edited file is refused as edited, whatever the edit touched (its
    # op table included), and only an intact file is read as coming from another tapegrad
    dg = arrays["digest"]
    if dg.shape != (1,) or dg.dtype.kind != "U" or str(dg[0]) != digest(arrays):
        _fail("its contents do not match their digest (the file was damaged or edited)")
    if int(fv[0]) == 2:
        ot = arrays["optable"]
        if ot.shape != (1,) or ot.dtype.kind != "U" or str(ot[0]) not in _LEGACY_TABLES:
            _fail("it was written with an op table this tapegrad does not know")
    else:
        _check_op_table(arrays)
    for name in _INT_ARRAYS:
        if arrays[name].dtype != np.int64:
            _fail(f"column {name} has dtype {arrays[name].dtype}")
    for name in _FLOAT_ARRAYS:
        if arrays[name].dtype != np.float64:
            _fail(f"column {name} has dtype {arrays[name].dtype}")
    for name in _INT_ARRAYS + _FLOAT_ARRAYS + ("tuple_out",):
        if arrays[name].ndim != (2 if name in _MATRICES else 1):
            _fail(f"array {name} has {arrays[name].ndim} dimensions")
    n = len(arrays["op"])
    for name in _COLUMNS + ("fp",):
        if arrays[name].shape != (n,):
            _fail(f"column {name} has shape {arrays[name].shape}, expected ({n},)")
    to = arrays["tuple_out"]
    if to.shape != (1,) or to.dtype != np.bool_:
        _fail("tuple_out is not one boolean")
    outs = arrays["out_rec"]
    if arrays["out_shape"].shape[0] != len(outs):
        _fail("output shapes do not match the outputs")
    if not to[0] and len(outs) != 1:
        _fail("a single output expected")
    if arrays["arg_pos"].shape != arrays["arg_rec"].shape or \
            arrays["arg_shape"].shape[0] != len(arrays["arg_rec"]):
        _fail("argument tables differ in length")
    pos, recs = arrays["arg_pos"].tolist(), arrays["arg_rec"].tolist()
    if any(p < 0 for p in pos) or len(set(pos)) != len(pos) or len(set(recs)) != len(recs):
        _fail("argument positions must be distinct and non-negative, records distinct")
    if np.any(arrays["op"] == K.CUSTOM):
        arrays["aux"] = np.array(arrays["aux"])   # custom records are relinked in it
    _check_records(arrays)
    # a backward sweep gives each record's values a gradient: a few records claiming the
    # whole arena each must not make it allocate what the file never held
    gradient_bytes = 8 * sum(arrays["size"].tolist())
    if gradient_bytes > max_bytes:
        _fail(f"its records need a gradient arena of {gradient_bytes} bytes, over "
              f"max_bytes={max_bytes}")
    size = arrays["size"]
    for what in ("arg", "out"):
        for r, row in zip(arrays[f"{what}_rec"].tolist(), arrays[f"{what}_shape"].tolist()):
            _shape_of(row, int(size[r]), f"{what} record {r}")


def _check_op_table(arrays):
    """Every opcode the file uses must mean today what it meant when the file was written."""
    codes, names, layouts = arrays["opcodes"], arrays["opnames"], arrays["oplayouts"]
    if codes.ndim != 1 or codes.dtype != np.int64 or names.dtype.kind != "U" or \
            layouts.dtype != np.int64 or names.shape != codes.shape or \
            layouts.shape != codes.shape:
        _fail("its op table is malformed")
    listed = {}
    for code, name, layout in zip(codes.tolist(), names.tolist(), layouts.tolist()):
        info = K.OPS.get(code)
        if info is None:
            _fail(f"opcode {code} ({name}) is not known to this tapegrad")
        if info.name != name or info.layout != layout:
            _fail(f"its op table differs: opcode {code} was {name} (layout {layout}) when "
                  f"written; here it is {info.name} (layout {info.layout})")
        listed[code] = name
    op = np.asarray(arrays["op"])
    if op.ndim != 1:        # (the column checks below would say so too, but after this one)
        _fail("its op column is malformed")
    if not set(op.tolist()) <= set(listed):
        _fail("records use opcodes its op table does not list")


def _shape_of(row, n, what):
    """A padded shape row as a tuple, checked to hold n values."""
    dims = [d for d in row if d != -1]
    if any(d < 0 for d in dims) or row[:len(dims)] != dims:
        _fail(f"{what} has a malformed shape {row}")
    if math.prod(dims) != n:
        _fail(f"{what} has shape {tuple(dims)} but {n} values")
    return tuple(dims)


class _Records:
    """A file's records as Python ints (sums and products of hostile values must not wrap
    around), with the checks the op table's ``check`` functions call."""

    def __init__(self, a):
        self.op, self.a0, self.a1, self.voff, self.size, self.ip = \
            (a[c].tolist() for c in _COLUMNS)
        self.aux, self.faux = a["aux"], a["faux"]

    def record(self, x, r, what):
        if not (0 <= x < r):
            _fail(f"record {r} ({what}) refers to record {x}")

    def aux_span(self, r, start, length):
        if start < 0 or length < 0 or start + length > len(self.aux):
            _fail(f"record {r} reads aux[{start}:{start + length}] of {len(self.aux)}")


def _check_records(arrays):
    """Every index the forward and backward kernels follow stays inside its array: the
    checks every record gets, its family's, and its op's own (the table's ``check``)."""
    a = _Records(arrays)
    nvals = len(arrays["vals"])
    size = a.size
    for r, code in enumerate(a.op):
        info = K.OPS.get(code)
        if info is None:
            _fail(f"record {r} has unknown opcode {code}")
        if size[r] < 0 or a.voff[r] < 0 or a.voff[r] + size[r] > nvals:
            _fail(f"record {r} has values [{a.voff[r]}, {a.voff[r] + size[r]}) outside the "
                  "arena")
        if code in (K.LEAF, K.CONST):
            if a.a0[r] != -1 or a.a1[r] != -1:
                _fail(f"record {r}: a value record has inputs")
            continue
        if code == K.EXTERN:
            _fail(f"record {r} refers to another tape")
        if code == K.CUSTOM:
            # ids and kernel addresses are this process's: found again by name and digest
            custom.relink(a, r, _fail)
        if info.variants is not None:
            a.aux_span(r, a.ip[r], 1)
            if int(a.aux[a.ip[r]]) not in info.variants:
                _fail(f"record {r} has an unknown variant {int(a.aux[a.ip[r]])}")
        if code in K.MANY_INPUTS:
            info.check(a, r, _fail)
            continue
        a.record(a.a0[r], r, "first input")
        if info.arity == 2:
            a.record(a.a1[r], r, "second input")
        elif a.a1[r] != -1 and code not in (K.CMP, K.CUSTOM):
            # backward rules shared with binary ops would write a gradient there
            _fail(f"record {r}: a one-input op has a second input")
        s0 = size[a.a0[r]]
        if info.family == T.ELEMENTWISE:
            if info.condition:
                a.record(a.ip[r], r, "condition")
                if size[a.ip[r]] != size[r]:
                    _fail(f"record {r}: condition differs in size")
            if info.arity == 2 and (size[a.a1[r]] != size[r] or s0 != size[r]):
                _fail(f"record {r}: elementwise operands differ in size")
            if s0 != size[r]:
                _fail(f"record {r}: input and output differ in size")
            if info.params and (a.ip[r] < 0 or a.ip[r] + info.params > len(a.faux)):
                _fail(f"record {r}: parameters out of range")
        elif code in K.REDUCTIONS:
            a.aux_span(r, a.ip[r], 3)
            o, red, i = (int(x) for x in a.aux[a.ip[r]: a.ip[r] + 3])
            if min(o, red, i) < 0 or o * red * i != s0:
                _fail(f"record {r}: reduction shape does not match its input")
            if code not in (K.SOFTMAX, K.LOG_SOFTMAX) and o * i != size[r]:
                _fail(f"record {r}: reduction output size does not match")
        elif info.check is None and s0 != size[r]:
            _fail(f"record {r}: input and output differ in size")
        if info.check is not None:
            info.check(a, r, _fail)
    n = len(a.op)
    for r in arrays["out_rec"]:
        if not (0 <= r < n):
            _fail(f"output record {r} out of range")
    for r in arrays["arg_rec"]:
        if not (0 <= r < n) or a.op[r] != K.LEAF:
            _fail(f"argument record {r} is not a leaf")


class LoadedTape:
    """A tape read from a file, callable like the function it was recorded from.

    Parameters the function closed over are frozen at the values they had when it was saved;
    gradients flow to the arguments.
    """

    def __init__(self, arrays):
        Variant = replay.Variant
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
        # qr records may be of modes whose backward raises: the backward looks (autograd)
        tape.refused = bool(np.any(arrays["op"] == K.LINALG_QR))
        arg_records = {int(i): int(r) for i, r in zip(arrays["arg_pos"], arrays["arg_rec"])}
        frozen = {int(r) for r in np.nonzero(arrays["op"] == K.LEAF)[0]} - set(
            arg_records.values())
        for r in frozen:
            off, n = int(arrays["voff"][r]), int(arrays["size"][r])
            tape.leaves[r] = Tensor._make(np.array(arrays["vals"][off:off + n]))
        size = arrays["size"]
        outputs = [(int(r), _shape_of(row, int(size[r]), "output"), None)
                   for r, row in zip(arrays["out_rec"].tolist(), arrays["out_shape"].tolist())]
        tuple_out = bool(arrays["tuple_out"][0])
        treedef = (tuple, [(None, 1)] * len(outputs)) if tuple_out else None
        self.n_args = (max(arg_records) + 1) if arg_records else 0
        self.arg_shapes = {int(i): _shape_of(row, int(size[r]), "argument")
                           for i, r, row in zip(arrays["arg_pos"].tolist(),
                                                arrays["arg_rec"].tolist(),
                                                arrays["arg_shape"].tolist())}
        self._variant = Variant(tape, arg_records, outputs, treedef, {})
        self._variant.arg_shapes = self.arg_shapes
        self._batch_variants = {}   # (arguments that get gradients, thread) -> Variant

    def save(self, target):
        """Write the tape again (a path or a binary file object), as it was loaded."""
        save_variant(self._variant, target)

    def to_bytes(self):
        """The tape's ``.npz`` file as bytes: what ``load_tape`` reads back."""
        return variant_bytes(self._variant)

    def __call__(self, *args):
        if len(args) < self.n_args:
            raise TypeError(f"the tape takes {self.n_args} tensor arguments, got {len(args)}")
        for i, shape in self.arg_shapes.items():
            a = args[i]
            if not isinstance(a, Tensor) or a._value.shape != shape or \
                    a._value.dtype.kind != "f":
                raise ValueError(f"argument {i} must be a float tensor of shape {list(shape)}")
            if a._tape is not None:
                # its record here is a leaf: the gradient would stop there, silently
                raise ValueError(
                    f"argument {i} has a history (it was computed from tensors that require "
                    "grad), and a loaded tape's gradients stop at its arguments: pass a "
                    "leaf (t.detach().requires_grad_()) and carry its .grad on yourself")
        _Miss = replay._Miss
        res = self._variant.replay(args)
        if type(res) is _Miss:
            raise RuntimeError("a guard recorded with the tape failed for these inputs: the "
                               "function would take another branch; record it again")
        return res

    def stats(self):
        tape_stats = replay.tape_stats
        return tape_stats(self._variant.template)

    def replay_batch(self, *arrays, grad_args=(), parallel=None):
        """Replay the tape for every sample (leading axis) of ``arrays`` in one compiled call.

        ``arrays`` are the positional arguments, each with a leading batch axis; the tape
        must have one output, of one element when ``grad_args`` (the positions of the
        arguments to differentiate) is not empty.  Returns ``(values, grads, status)``:
        NumPy arrays of the per-sample values (batch size + output shape), one gradient array
        per entry of ``grad_args``, and per sample -1 where the tape replayed it, else the
        GUARD record that failed (its control flow takes another branch than the recorded
        one): for those samples nothing was computed, and values and gradients are NaN.
        ``parallel`` as for ``tapegrad.vmap``.
        """
        _replay_variant = replay._replay_variant
        grad_args = tuple(grad_args)
        args = self._batch_args(arrays, grad_args)
        bsz = args[0].shape[0] if args else 0
        variant = self._batch_variant(grad_args)
        out_rec, out_shape, _ = variant.outputs[0]
        values = np.full((bsz,) + out_shape, np.nan)
        per_arg = {i: np.full(a.shape, np.nan) for i, a in enumerate(args)}
        if bsz:
            status = _replay_variant(variant, [Tensor._make(a) for a in args],
                                     np.arange(bsz), bool(grad_args), parallel, values, per_arg)
        else:
            status = np.empty(0, dtype=np.int64)
        return values, tuple(per_arg[i] for i in grad_args), status

    def _batch_args(self, arrays, grad_args):
        if self._variant.treedef is not None:
            raise ValueError("batched replay needs a tape with one output, not a tuple")
        if len(arrays) < self.n_args:
            raise TypeError(f"the tape takes {self.n_args} tensor arguments, got {len(arrays)}")
        args = [np.asarray(a._value if isinstance(a, Tensor) else a) for a in arrays]
        sizes = {a.shape[0] for a in args if a.ndim}
        if len(sizes) > 1 or any(a.ndim == 0 for a in args):
            raise ValueError("every argument needs the same leading batch size; got shapes "
                             f"{[list(a.shape) for a in args]}")
        for i, a in enumerate(args):
            if a.dtype.kind != "f":
                raise TypeError("batched arguments must be float tensors")
            shape = self.arg_shapes.get(i)
            if shape is not None and a.shape[1:] != shape:
                raise ValueError(f"argument {i} must hold samples of shape {list(shape)}, got "
                                 f"{list(a.shape[1:])}")
        for i in grad_args:
            if i not in self.arg_shapes:
                raise ValueError(f"argument {i} is not an argument the tape reads")
        if grad_args and self._variant.cols[4][self._variant.outputs[0][0]] != 1:
            raise RuntimeError("per-sample gradients need a one-element output")
        return [a.astype(np.float64, copy=False) for a in args]

    def _batch_variant(self, grad_args):
        """The tape's variant whose arguments outside ``grad_args`` are constants to the
        sweep, as ``vmap`` replays a recorded function's (no gradient planned for them).
        One per thread: the forward of max(dim) writes its argmax into the variant's copy of
        ``aux``, and a Dask worker may run two tasks on one tape at once (``compile`` runs
        max(dim) eagerly, but a file may hold such records)."""
        Variant = replay.Variant
        key = (grad_args, threading.get_ident())
        variant = self._batch_variants.get(key)
        if variant is None:
            v = self._variant
            variant = Variant(v.template, v.arg_records, v.outputs, v.treedef, {})
            for i, r in v.arg_records.items():
                if i not in grad_args:
                    variant.cols[0][r] = K.CONST
            self._batch_variants[key] = variant
        return variant

    def _batched_run(self, argnums, want_grad, parallel):
        """``vmap`` / ``per_sample_value_and_grad`` of a loaded tape: there is no function to
        record again, so samples whose guards fail are an error naming them."""
        nums = () if not want_grad else ((argnums,) if isinstance(argnums, int) else
                                         tuple(argnums) if argnums is not None else
                                         tuple(sorted(self.arg_shapes)))

        def run(*batched):
            values, grads, status = self.replay_batch(*batched, grad_args=nums,
                                                      parallel=parallel)
            failed = np.flatnonzero(status != -1)
            if failed.size:
                raise RuntimeError(
                    f"a guard recorded with the tape failed for {failed.size} of "
                    f"{status.size} samples (the first: {failed[:5].tolist()}): their control "
                    "flow takes another branch; record the function for them")
            if not want_grad:
                return Tensor._make(values)
            gs = tuple(Tensor._make(g) for g in grads)
            return Tensor._make(values), (gs[0] if isinstance(argnums, int) else gs)
        return run


def load_tape(source, *, max_bytes=MAX_TAPE_BYTES):
    """Read a tape written by ``tape.save(target)`` / ``tape.to_bytes()``.

    ``source`` is a path, the file's bytes (``bytes``, ``bytearray``, ``memoryview``) or a
    binary file object, read from its current position and left open.  A file descriptor
    (an int) is refused with a TypeError, as ``numpy.load`` refuses it: wrap it with
    ``os.fdopen(fd, "rb", closefd=False)``.

    A file larger than ``max_bytes``, or whose replay would need a gradient arena larger than
    that, is refused; so is any damaged, edited or foreign file (ValueError).

    The result is callable like the function the tape was recorded from, for arguments of
    the recorded shapes, and gradients flow to them.

    Example:
        >>> f = tg.compile(lambda x: (x.sin() * x).sum())
        >>> x = tg.tensor([0.5, 1.0], requires_grad=True)
        >>> _ = f(x)
        >>> g = tg.load_tape(f.tape.to_bytes())
        >>> g(x).backward(); x.grad
        tensor([0.9182, 1.3818])
    """
    arrays = _load_arrays(source, max_bytes)
    _check(arrays, max_bytes)
    return LoadedTape(arrays)


# compiled functions save through replay's seam (replay.FILES): this module sits above it
replay.FILES.save_variant = save_variant
replay.FILES.variant_bytes = variant_bytes
