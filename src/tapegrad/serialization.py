"""``tapegrad.save`` and ``tapegrad.load``: tensors, state dicts, optimizer state and
checkpoints in a file that loading never runs code from.

PyTorch pickles; a pickle can run any code when it is loaded.  tapegrad writes a zip archive
of plain data instead:

- ``tapegrad_save/structure.json`` -- the object as JSON: numbers, strings, booleans and None
  as themselves; everything else as a one-key object naming what it is (``{"list": [...]}``,
  ``{"tuple": [...]}``, ``{"dict": [[key, value], ...]}``, ``{"tensor": 0, "requires_grad":
  false}``, ...), so that tuples, integer dict keys, ``OrderedDict``, ``Parameter`` and the
  uninitialized parameters and buffers of lazy modules come back as they went in;
- ``tapegrad_save/arrays/<n>.npy`` -- the values of the tensors (and NumPy arrays), read back
  with ``allow_pickle=False``.

A tensor that appears twice in the object is stored once and loads as one tensor again.
Loading checks every part before it builds anything and refuses anything else (a PyTorch
pickle, a damaged or edited file) with a ``LoadError``.
"""
import io
import json
import math
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np

from . import _device, _dtype
from .tensor import Size, Tensor

__all__ = ["save", "load", "LoadError"]

FORMAT = "tapegrad.save"
VERSION = 1
_ROOT = "tapegrad_save/"
_STRUCTURE = _ROOT + "structure.json"
_ARRAYS = _ROOT + "arrays/"
_ALLOWED_DTYPES = frozenset(d.np for d in _dtype.SUPPORTED)


class LoadError(pickle.UnpicklingError, ValueError):
    """A file ``tapegrad.load`` refuses.  It is also an ``UnpicklingError`` (what
    ``torch.load`` raises for a file it cannot read) and a ``ValueError``.

    Example:
        >>> import io
        >>> try:
        ...     tg.load(io.BytesIO(b"not a checkpoint"))
        ... except tg.serialization.LoadError as e:
        ...     print(e)
        not a tapegrad.save file: not a zip archive (File is not a zip file)
    """


# ---------------------------------------------------------------------------------------------
# Saving
# ---------------------------------------------------------------------------------------------


class _Writer:
    """Turns an object into its JSON structure, collecting the arrays it holds."""

    def __init__(self):
        self.arrays = []
        self.seen = {}     # id(tensor or array) -> its node, so a shared one is stored once
        self.keep = []     # the objects seen, alive until the file is written (ids stay unique)

    def node(self, x, where):
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, np.bool_):
            return bool(x)
        if isinstance(x, (int, np.integer)):
            return int(x)
        if isinstance(x, (float, np.floating)):
            x = float(x)
            return x if math.isfinite(x) else {"float": repr(x)}
        if isinstance(x, Tensor):
            return self._array_node(x, where)
        if isinstance(x, np.ndarray):
            return self._array_node(x, where)
        if isinstance(x, _dtype.dtype):
            return {"dtype": x.name}
        if isinstance(x, _device.device):
            return {"device": str(x)}
        if isinstance(x, Size):
            return {"size": [int(d) for d in x]}
        kind = type(x)
        if kind is list or kind is tuple:
            return {kind.__name__: [self.node(v, f"{where}[{i}]") for i, v in enumerate(x)]}
        if kind is dict or kind is OrderedDict:
            items = [[self.node(k, f"{where} (a key)"), self.node(v, f"{where}[{k!r}]")]
                     for k, v in x.items()]
            return {"dict" if kind is dict else "ordered_dict": items}
        raise TypeError(
            f"tapegrad.save cannot store {where} of type {_qualname(x)}: it stores tensors, "
            "NumPy arrays, numbers, strings, None, dtypes, devices, Sizes, and lists, tuples "
            "and dicts of them (a file that loading never runs code from: no pickle)")

    def _array_node(self, x, where):
        known = self.seen.get(id(x))
        if known is not None:
            return known
        if isinstance(x, Tensor):
            value = x._value
            from .nn import Parameter
            from .nn.parameter import UninitializedBuffer, UninitializedParameter
            # (an uninitialized one, a lazy module's before its first call, keeps its class
            # and dtype, as PyTorch's pickle keeps them)
            kind = "uninitialized_parameter" if isinstance(x, UninitializedParameter) else \
                "uninitialized_buffer" if isinstance(x, UninitializedBuffer) else \
                "parameter" if isinstance(x, Parameter) else "tensor"
            node = {kind: len(self.arrays), "requires_grad": bool(x.requires_grad)}
        else:
            value = x
            node = {"ndarray": len(self.arrays)}
        if value.dtype not in _ALLOWED_DTYPES:
            raise TypeError(f"tapegrad.save cannot store {where}: an array of dtype "
                            f"{value.dtype} (tapegrad has no such dtype)")
        # np.ascontiguousarray would make a 0-d value 1-d
        self.arrays.append(value if value.flags.c_contiguous else value.copy(order="C"))
        self.seen[id(x)] = node
        self.keep.append(x)
        return node


def _qualname(x):
    kind = type(x)
    return kind.__qualname__ if kind.__module__ == "builtins" else \
        f"{kind.__module__}.{kind.__qualname__}"


def save(obj, f):
    """Write ``obj`` -- a tensor, or dicts, lists and tuples of tensors, numbers and strings
    (a ``state_dict()``, an optimizer's ``state_dict()``, a checkpoint) -- to ``f``, a path or
    a binary file object.

    The file is a zip of ``.npy`` arrays and a JSON structure, not a pickle: ``torch.load``
    cannot read it, and anything besides tensors, arrays, numbers, strings, None, dtypes,
    devices, ``Size`` and containers of them raises a ``TypeError``.

    Example:
        >>> import io
        >>> buf = io.BytesIO()
        >>> tg.save({"w": tg.tensor([1.0, 2.0]), "step": 3}, buf)
        >>> _ = buf.seek(0)
        >>> tg.load(buf)
        {'w': tensor([1., 2.]), 'step': 3}
    """
    writer = _Writer()
    structure = {"format": FORMAT, "version": VERSION, "root": writer.node(obj, "the object")}
    text = json.dumps(structure, allow_nan=False)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            _write(fh, text, writer.arrays)
    else:
        _write(f, text, writer.arrays)


def _write(fh, text, arrays):
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr(_STRUCTURE, text)
        for i, a in enumerate(arrays):
            with zf.open(f"{_ARRAYS}{i}.npy", "w", force_zip64=True) as entry:
                np.lib.format.write_array(entry, a, allow_pickle=False)


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


def _fail(why):
    raise LoadError(f"not a tapegrad.save file: {why}")


class _Reader:
    """Builds the object back from its structure, checking each node and array."""

    def __init__(self, zf, names):
        self.zf = zf
        self.names = names
        self.built = {}    # array index -> the object made from it (shared ones stay shared)
        self.kinds = {}    # array index -> the node kind that first referred to it

    def node(self, n):
        if n is None or isinstance(n, (bool, int, str)):
            return n
        if isinstance(n, float):
            return n
        if not isinstance(n, dict) or not n:
            _fail(f"a node of type {type(n).__name__} in its structure")
        kind = next(iter(n))
        if kind in ("list", "tuple"):
            items = self._only(n, kind, list)
            values = [self.node(v) for v in items]
            return values if kind == "list" else tuple(values)
        if kind in ("dict", "ordered_dict"):
            out = {} if kind == "dict" else OrderedDict()
            for pair in self._only(n, kind, list):
                if not isinstance(pair, list) or len(pair) != 2:
                    _fail("a dict entry that is not a [key, value] pair")
                key = self.node(pair[0])
                try:
                    hash(key)
                except TypeError:
                    _fail(f"an unhashable dict key of type {type(key).__name__}")
                out[key] = self.node(pair[1])
            return out
        if kind in ("tensor", "parameter", "uninitialized_parameter", "uninitialized_buffer"):
            if set(n) != {kind, "requires_grad"} or not isinstance(n["requires_grad"], bool):
                _fail(f"a malformed {kind} node")
            return self._array(n[kind], kind, n["requires_grad"])
        if kind == "ndarray":
            return self._array(self._only(n, kind, int), kind, False)
        if kind == "float":
            text = self._only(n, kind, str)
            if text not in ("nan", "inf", "-inf"):
                _fail(f"a float node {text!r}")
            return float(text)
        if kind == "dtype":
            name = self._only(n, kind, str)
            try:
                return _dtype.by_name(name)
            except KeyError:
                _fail(f"an unknown dtype {name!r}")
        if kind == "device":
            text = self._only(n, kind, str)
            try:
                return _device.device(text)
            except (RuntimeError, TypeError):
                _fail(f"an invalid device {text!r}")
        if kind == "size":
            dims = self._only(n, kind, list)
            if not all(type(d) is int and d >= 0 for d in dims):
                _fail("a Size whose dims are not non-negative integers")
            return Size(dims)
        _fail(f"an unknown node kind {kind!r}")

    @staticmethod
    def _only(n, kind, expected):
        if len(n) != 1 or type(n[kind]) is not expected:
            _fail(f"a malformed {kind} node")
        return n[kind]

    def _array(self, index, kind, requires_grad):
        if type(index) is not int:
            _fail(f"a {kind} node without an array number")
        if index in self.built:
            if self.kinds[index] != kind:
                _fail(f"array {index} used as both {self.kinds[index]} and {kind}")
            return self.built[index]
        name = f"{_ARRAYS}{index}.npy"
        if name not in self.names:
            _fail(f"it refers to array {index}, which it does not hold")
        try:
            with self.zf.open(name) as entry:
                value = np.lib.format.read_array(entry, allow_pickle=False)
        except Exception as e:  # noqa: BLE001 - whatever a damaged .npy makes NumPy raise
            _fail(f"array {index} cannot be read ({type(e).__name__}: {e})")
        if value.dtype not in _ALLOWED_DTYPES:
            _fail(f"array {index} has dtype {value.dtype}")
        if not value.flags.c_contiguous:   # a Fortran-order .npy
            value = value.copy(order="C")
        if kind == "ndarray":
            obj = value
        elif kind == "parameter":
            from .nn import Parameter
            obj = Parameter(Tensor._make(value), requires_grad)
        elif kind.startswith("uninitialized_"):
            from .nn.parameter import UninitializedBuffer, UninitializedParameter
            if value.size or value.dtype.kind != "f":
                _fail(f"array {index} of an uninitialized tensor holds values")
            made = UninitializedParameter if kind == "uninitialized_parameter" else \
                UninitializedBuffer
            obj = made(requires_grad, dtype=_dtype.from_numpy_dtype(value.dtype))
        else:
            if requires_grad and value.dtype.kind != "f":
                _fail(f"an integer tensor (array {index}) marked as requiring grad")
            obj = Tensor._make(value, requires_grad)
        self.built[index] = obj
        self.kinds[index] = kind
        return obj


def _check_map_location(map_location):
    """Every tensor loads on the CPU; a map_location that asks for another device raises."""
    if map_location is None or isinstance(map_location, (str, _device.device)):
        _device.check(map_location)
    elif isinstance(map_location, dict):
        for target in map_location.values():
            _device.check(target)
    else:
        raise TypeError(
            "tapegrad.load: map_location must be None, a device, a device string or a dict "
            f"of them, not {type(map_location).__name__} (tapegrad has no storages for a "
            "function to map: every tensor loads on the CPU)")


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """Read an object written by ``tapegrad.save`` from ``f`` (a path or a binary file
    object).  Nothing in the file is run: it holds only data.  ``map_location`` may name the
    CPU; ``weights_only`` is accepted (the file holds only data either way).  A file
    written by ``torch.save``, or a damaged one, raises ``LoadError``.

    Example:
        >>> import io
        >>> buf = io.BytesIO()
        >>> tg.save([tg.tensor([1, 2]), "note"], buf)
        >>> _ = buf.seek(0)
        >>> tg.load(buf, map_location="cpu")
        [tensor([1, 2]), 'note']
    """
    if pickle_module is not None or pickle_load_args:
        raise TypeError("tapegrad.load reads no pickle: pickle_module and pickle arguments "
                        "are not supported")
    _check_map_location(map_location)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:   # a missing file is an OSError, as for open()
            return _read(fh)
    if not (hasattr(f, "seekable") and f.seekable()):
        f = io.BytesIO(f.read())
    return _read(f)


def _read(fh):
    try:
        zf = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        _fail(f"not a zip archive ({e})")
    with zf:
        names = set(zf.namelist())
        if any(name.endswith("data.pkl") for name in names):
            raise LoadError(
                "this looks like a file written by torch.save, which holds a pickle; "
                "tapegrad.load reads only files written by tapegrad.save (loading them never "
                "runs code). Convert it where PyTorch is installed: load it with "
                "torch.load(path, weights_only=True) and save its tensors as NumPy arrays, or "
                "load it into a tapegrad model with load_state_dict and tapegrad.save that.")
        if _STRUCTURE not in names:
            _fail(f"no {_STRUCTURE}")
        extra = {n for n in names if n != _STRUCTURE
                 and not (n.startswith(_ARRAYS) and n.endswith(".npy"))}
        if extra:
            _fail(f"unexpected entries {sorted(extra)}")
        try:
            structure = json.loads(zf.read(_STRUCTURE).decode("utf-8"),
                                   parse_constant=_no_constant)
        except (ValueError, UnicodeDecodeError, RecursionError, zipfile.BadZipFile) as e:
            if isinstance(e, LoadError):
                raise
            _fail(f"its structure cannot be read ({type(e).__name__}: {e})")
        if not isinstance(structure, dict) or set(structure) != {"format", "version", "root"} \
                or structure["format"] != FORMAT:
            _fail("its structure is not a tapegrad.save structure")
        if structure["version"] != VERSION:
            _fail(f"format version {structure['version']!r} (this tapegrad reads version "
                  f"{VERSION})")
        try:
            return _Reader(zf, names).node(structure["root"])
        except RecursionError:
            _fail("its structure is nested too deeply")


def _no_constant(name):
    _fail(f"a bare {name} in its structure")
