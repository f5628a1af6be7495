"""PyTorch's argument parsing for the tensor factories (``zeros``, ``rand``, ``arange``,
``zeros_like``, ``tensor``, ``x.new_zeros``, ...): the slow path.

Each factory in creation.py takes its common calls (``zeros(2, 3)``, ``zeros((2, 3),
dtype=float64)``, ``randn(4, requires_grad=True)``) on a fast path of its own and hands every
other call here: the rare keywords (``out=``, ``layout=``, ``pin_memory=``, ``size=``,
``memory_format=``), wrong types, wrong counts.  ``parse`` binds the call as PyTorch's C++
argument parser (torch/csrc/utils/python_arg_parser.cpp) binds it -- overloads tried in
order, a size given as numbers or as one sequence -- and raises its TypeErrors, word for
word.

The overloads are PyTorch's own signature texts, as its "invalid combination of arguments"
error prints them (``torch.`` spelled ``tapegrad.``): the same text is parsed into parameters
and printed in that error, so each signature is written once.
"""
import numbers
import os

import numpy as np

from . import _device, _dtype
from ._argtypes import type_name
from ._generator import Generator
from .tensor import Tensor

# the keywords every factory takes after its own arguments.  A ``?`` marks a parameter that
# takes None for "not given" besides its default (PyTorch's schemas' ``bool?``); PyTorch's
# messages print the type without it
_OPTIONS = ("tapegrad.dtype dtype = None, tapegrad.layout layout = None, tapegrad.device "
            "device = None, bool? pin_memory = False, bool? requires_grad = False")
_OUT = "Tensor out = None, " + _OPTIONS
_LIKE = "tapegrad.memory_format memory_format = None, " + _OPTIONS
_GEN = "tapegrad.Generator? generator, "

# PyTorch 2.13's overloads of each factory, in the order it tries them
SIGNATURES = {
    "zeros": [f"(tuple of ints size, *, {_OUT})"],
    "ones": [f"(tuple of ints size, *, {_OUT})"],
    "empty": [f"(tuple of ints size, *, tapegrad.memory_format memory_format = None, {_OUT})"],
    "full": [f"(tuple of ints size, Number fill_value, *, {_OUT})"],
    "rand": [f"(tuple of ints size, *, {_GEN}{_OUT})", f"(tuple of ints size, *, {_OUT})"],
    "randn": [f"(tuple of ints size, *, {_GEN}{_OUT})", f"(tuple of ints size, *, {_OUT})"],
    "randint": [f"(int high, tuple of ints size, *, {_GEN}{_OUT})",
                f"(int high, tuple of ints size, *, {_OUT})",
                f"(int low, int high, tuple of ints size, *, {_GEN}{_OUT})",
                f"(int low, int high, tuple of ints size, *, {_OUT})"],
    "randperm": [f"(int n, *, {_GEN}{_OUT})", f"(int n, *, {_OUT})"],
    "arange": [f"(Number end, *, {_OUT})", f"(Number start, Number end, *, {_OPTIONS})",
               f"(Number start, Number end, Number step = 1, *, {_OUT})"],
    "linspace": [f"(Tensor start, Tensor end, int steps, *, {_OUT})",
                 f"(Number start, Tensor end, int steps, *, {_OUT})",
                 f"(Tensor start, Number end, int steps, *, {_OUT})",
                 f"(Number start, Number end, int steps, *, {_OUT})"],
    "logspace": [f"(Tensor start, Tensor end, int steps, float base = 10.0, *, {_OUT})",
                 f"(Number start, Tensor end, int steps, float base = 10.0, *, {_OUT})",
                 f"(Tensor start, Number end, int steps, float base = 10.0, *, {_OUT})",
                 f"(Number start, Number end, int steps, float base = 10.0, *, {_OUT})"],
    "eye": [f"(int n, *, {_OUT})", f"(int n, int m, *, {_OUT})"],
    "zeros_like": [f"(Tensor input, *, {_LIKE})"],
    "ones_like": [f"(Tensor input, *, {_LIKE})"],
    "empty_like": [f"(Tensor input, *, {_LIKE})"],
    "full_like": [f"(Tensor input, Number fill_value, *, {_LIKE})"],
    "rand_like": [f"(Tensor input, *, {_GEN}{_LIKE})", f"(Tensor input, *, {_LIKE})"],
    "randn_like": [f"(Tensor input, *, {_GEN}{_LIKE})", f"(Tensor input, *, {_LIKE})"],
    "randint_like": [f"(Tensor input, int low, int high, *, {_GEN}{_LIKE})",
                     f"(Tensor input, int low, int high, *, {_LIKE})",
                     f"(Tensor input, Tensor high, *, {_GEN}{_LIKE})",
                     f"(Tensor input, Tensor high, *, {_LIKE})",
                     f"(Tensor input, int high, *, {_GEN}{_LIKE})",
                     f"(Tensor input, int high, *, {_LIKE})"],
    "tensor": ["(object data, *, tapegrad.dtype dtype = None, tapegrad.device device = None, "
               "bool pin_memory = False, bool requires_grad = False)"],
    "as_tensor": ["(object data, *, tapegrad.dtype dtype = None, "
                  "tapegrad.device device = None)"],
    "new_zeros": [f"(tuple of ints size, *, {_OPTIONS})"],
    "new_ones": [f"(tuple of ints size, *, {_OPTIONS})"],
    "new_empty": [f"(tuple of ints size, *, {_OPTIONS})"],
    "new_full": [f"(tuple of ints size, Number fill_value, *, {_OPTIONS})"],
    "new_tensor": ["(object data, *, tapegrad.dtype dtype = None, tapegrad.device device = "
                   "None, bool requires_grad = False)"],
    # (not a factory: a function whose wrong calls get the same parser's errors)
    "repeat_interleave": ["(Tensor input, Tensor repeats, int dim = None, *, int output_size = "
                          "None)",
                          "(Tensor repeats, *, int output_size = None)",
                          "(Tensor input, int repeats, int dim = None, *, int output_size = "
                          "None)"],
    # the method's overloads, self not among them; its errors are named repeat_interleave()
    "Tensor.repeat_interleave": ["(Tensor repeats, int dim = None, *, int output_size = None)",
                                 "(int repeats, int dim = None, *, int output_size = None)"],
}


class _Param:
    """One parameter of a signature text: ``type name[ = default]``."""

    __slots__ = ("type", "name", "optional", "default", "allow_none", "keyword_only")

    def __init__(self, text, keyword_only):
        declared, _, default = text.partition(" = ")
        kind, _, self.name = declared.rpartition(" ")
        self.type = kind.rstrip("?")
        self.optional = bool(default)
        self.default = None if default in ("", "None") else _DEFAULTS[default]
        # a default of None takes None; so does a ``?`` type (see _OPTIONS); a positional
        # default (``Number step = 1``) does not
        self.allow_none = default == "None" or kind.endswith("?")
        self.keyword_only = keyword_only


_DEFAULTS = {"False": False, "1": 1, "10.0": 10.0}


class _Signature:
    __slots__ = ("text", "params", "min_args", "max_args", "max_pos_args", "varargs")

    def __init__(self, text):
        self.text = text.replace("?", "")     # as PyTorch prints it
        params, keyword_only = [], False
        for part in text[1:-1].split(", "):
            if part == "*":
                keyword_only = True
            else:
                params.append(_Param(part, keyword_only))
        self.params = params
        self.min_args = sum(not p.optional for p in params)
        self.max_args = len(params)
        self.max_pos_args = sum(not p.keyword_only for p in params)
        # a lone positional size may be given as numbers: zeros(2, 3) for zeros((2, 3))
        self.varargs = self.max_pos_args == 1 and params[0].type == "tuple of ints"


_PARSED = {}


def _signatures(fname):
    found = _PARSED.get(fname)
    if found is None:
        found = _PARSED[fname] = [_Signature(text) for text in SIGNATURES[fname]]
    return found


# --- what PyTorch takes for each type -----------------------------------------------------
def _is_int(obj):
    """An integer as PyTorch's ``int`` takes it: not a bool; a 0-d integer tensor counts."""
    if isinstance(obj, (int, np.integer)):
        return not isinstance(obj, bool)
    return isinstance(obj, Tensor) and obj.ndim == 0 and obj.dtype.np.kind in "iu"


def _is_number(obj):
    if isinstance(obj, Tensor):
        return obj.ndim == 0
    return isinstance(obj, (numbers.Number, np.generic)) and not isinstance(obj, (str, bytes))


def _python_int(obj):
    return int(obj.item()) if isinstance(obj, Tensor) else int(obj)


def _first_int_of(seq):
    """PyTorch looks at a size sequence's first element only before it unpacks it: the
    index of a bad first element (-1 when it is an int or the sequence is empty)."""
    return -1 if not len(seq) or _is_int(seq[0]) else 0


_ACCEPTS = {
    "int": _is_int,
    "Number": _is_number,
    "float": lambda o: isinstance(o, (numbers.Real, np.floating, np.integer)),
    "bool": lambda o: isinstance(o, bool),
    "Tensor": lambda o: isinstance(o, Tensor),
    "object": lambda o: True,
    # Python's float, int and bool stand for dtypes too: zeros(2, dtype=float)
    "tapegrad.dtype": lambda o: isinstance(o, _dtype.dtype) or o in (float, int, bool),
    "tapegrad.device": _device.is_device,
    "tapegrad.layout": lambda o: isinstance(o, _device.layout),
    "tapegrad.memory_format": lambda o: isinstance(o, _device.memory_format),
    "tapegrad.Generator": lambda o: isinstance(o, Generator),
}

# the C type names PyTorch's messages give tapegrad's classes' counterparts
_C_NAMES = {Generator: "tapegrad._C.Generator", _dtype.dtype: "tapegrad.dtype",
            _device.device: "tapegrad.device", _device.layout: "tapegrad.layout",
            _device.memory_format: "tapegrad.memory_format"}


def _tp_name(obj):
    return _C_NAMES.get(type(obj)) or type_name(obj)


_ABSENT = object()


class _Mismatch(Exception):
    """A signature that does not take the call (when another one may)."""


def _bind(sig, fname, args, kwargs, raising):
    """``{name: value}`` for ``sig`` taking ``args`` and ``kwargs``, as PyTorch's
    ``FunctionSignature::parse``: with ``raising``, PyTorch's TypeError where it does not
    take them, else ``_Mismatch``."""
    def fail(text):
        raise TypeError(text) if raising else _Mismatch()

    nargs = len(args)
    if nargs > sig.max_pos_args and not sig.varargs:
        fail(_extra_args(sig, fname, nargs))
    bound, pos, used_kwargs = {}, 0, 0
    for i, param in enumerate(sig.params):
        is_kwd = pos >= nargs
        if not is_kwd:
            if param.keyword_only:     # positional numbers after a varargs size
                fail(_extra_args(sig, fname, nargs))
            obj = args[pos]
        else:
            obj = kwargs.get(param.name, _ABSENT)
            used_kwargs += obj is not _ABSENT
        if obj is _ABSENT and param.optional or obj is None and param.allow_none:
            bound[param.name] = param.default
        elif obj is _ABSENT:
            fail(_missing_args(sig, fname, i))
        elif param.type == "tuple of ints":
            bad_at = (_first_int_of(obj) if isinstance(obj, (tuple, list)) else -2)
            if bad_at == -1:
                bound[param.name] = obj
            elif sig.varargs and pos == 0 and not is_kwd and _is_int(obj):
                bound[param.name] = args   # zeros(2, 3)
                pos = nargs
                continue
            elif is_kwd:
                fail(_wrong_type(fname, param, obj, None))
            elif nargs > sig.max_pos_args:     # zeros(2.0, 3): not a size in numbers
                fail(_extra_args(sig, fname, nargs))
            elif bad_at == 0:
                fail(f"{fname}(): argument '{param.name}' (position {pos + 1}) must be "
                     f"{param.type}, but found element of type {_tp_name(obj[0])} at pos 0")
            else:
                fail(_wrong_type(fname, param, obj, pos + 1))
        elif _ACCEPTS[param.type](obj):
            # (an int as a Python int: a 0-d tensor or a NumPy integer may stand for one)
            bound[param.name] = _python_int(obj) if param.type == "int" else obj
        else:
            fail(_wrong_type(fname, param, obj, None if is_kwd else pos + 1))
        if not is_kwd:
            pos += 1
    if used_kwargs < len(kwargs):
        fail(_extra_kwargs(sig, fname, kwargs, nargs))
    # the sizes' elements after the first are read once the signature took the call, as
    # PyTorch reads them (its errors for them come after those above)
    for param in sig.params:
        if param.type == "tuple of ints" and bound[param.name] is not None:
            bound[param.name] = _unpacked(fname, param, bound[param.name])
    return bound


def _wrong_type(fname, param, obj, position):
    """PyTorch's text for ``obj`` given for ``param`` at ``position`` (counted from 1; None
    for a keyword)."""
    where = "" if position is None else f" (position {position})"
    return (f"{fname}(): argument '{param.name}'{where} must be {param.type}, not "
            f"{_tp_name(obj)}")


def _unpacked(fname, param, seq):
    """The ints of a size sequence whose first element is one; PyTorch's text for a later
    element that is not (it counts them from 1 here)."""
    sizes = []
    for i, s in enumerate(seq):
        # (unpacking takes a bool as the int it is -- zeros(2, True) has shape (2, 1) --
        # where the check of the first element refuses one)
        if not (_is_int(s) or isinstance(s, bool)):
            raise TypeError(f"{fname}(): argument '{param.name}' failed to unpack the object at "
                            f"pos {i + 1} with error \"type must be tuple of ints,but got "
                            f"{_tp_name(s)}\"")
        sizes.append(_python_int(s))
    return tuple(sizes)


def _missing_args(sig, fname, first):
    names = [f'"{p.name}"' for p in sig.params[first:] if not p.optional]
    # (PyTorch's plural is the wrong way round: "1 required positional arguments")
    plural = "s" if len(names) == 1 else ""
    return (f"{fname}() missing {len(names)} required positional argument{plural}: "
            f"{', '.join(names)}")


def _extra_args(sig, fname, nargs):
    most = sig.max_pos_args
    if sig.min_args != most:
        return (f"{fname}() takes from {sig.min_args} to {most} positional arguments but "
                f"{nargs} were given")
    return (f"{fname}() takes {most} positional argument{'' if most == 1 else 's'} but "
            f"{nargs} {'was' if nargs == 1 else 'were'} given")


def _extra_kwargs(sig, fname, kwargs, nargs):
    names = [p.name for p in sig.params]
    for key in kwargs:
        if key not in names:
            return f"{fname}() got an unexpected keyword argument '{key}'"
        if names.index(key) < nargs:
            return f"{fname}() got multiple values for argument '{key}'"
    return "invalid keyword arguments"


def _shown_parts(sig):
    """A signature's text read as PyTorch's message reads it back (invalid_arguments.cpp):
    ``(type, name)`` per piece between ", ", the ``*`` a piece of its own, and a default's
    ``= value`` taken into the type (``int dim = None``: type ``int dim =``, name ``None``)."""
    parts = []
    for piece in sig.text[1:-1].split(", "):
        kind, _, name = piece.rpartition(" ")
        parts.append((kind or piece, name))
    return parts


def _shown_match(kind, obj):
    """Whether ``obj`` is of ``kind`` as that reading takes it: by the type's name, a float
    also taking an int."""
    name = _tp_name(obj)
    if kind == "float":
        return name in ("float", "int")
    if kind == "int":
        return name == "int"
    return name == kind


def _described(obj):
    """An argument's type as that line gives it: a tuple or list with its elements' types
    (``tuple of (int, float)``, ``list of [int]``)."""
    if type(obj) not in (tuple, list):
        return _tp_name(obj)
    inner = ", ".join(_tp_name(o) for o in obj)
    if type(obj) is list:
        return f"list of [{inner}]"
    return f"tuple of ({inner}{',' if len(obj) == 1 else ''})"


def _why_not(sig, args, kwargs, keys):
    """PyTorch's line saying why ``sig`` did not take the call, printed under a signature
    with as many pieces as the call has arguments; None under the others."""
    parts = _shown_parts(sig)
    if len(args) + len(kwargs) != len(parts):
        return None
    tail = {name for _, name in parts[max(len(parts) - len(kwargs), 0):]}
    unknown = [key for key in keys if key not in tail]
    if unknown:
        return ("      didn't match because some of the keywords were incorrect: "
                + ", ".join(unknown))
    # (a terminal shows the mismatches in red, anything else between "!")
    marks = ("\33[31;1m", "\33[0m", "\33[32;1m", "\33[0m") if os.isatty(1) and os.isatty(2) \
        else ("!", "!", "", "")
    shown = []
    for i, (kind, name) in enumerate(parts):
        keyword = i >= len(args)
        obj = kwargs.get(name) if keyword else args[i]
        opening, closing = (marks[2:] if _shown_match(kind, obj) else marks[:2])
        shown.append(f"{opening}{name + '=' if keyword else ''}{_described(obj)}{closing}")
    inside = ", ".join(shown) if args else "".join(f"{s}, " for s in shown)
    return f"      didn't match because some of the arguments have invalid types: ({inside})"


# --- the order PyTorch lists keywords in: its std::unordered_map's (libstdc++) ---------------
_WORD = (1 << 64) - 1
_HASH_MUL = (0xc6a4a793 << 32) + 0x5bd1e995


def _shift_mix(v):
    return v ^ (v >> 47)


def _string_hash(text):
    """libstdc++'s ``std::hash<std::string>`` (``_Hash_bytes``, 64-bit, its seed)."""
    data = text.encode()
    whole = len(data) & ~7
    h = (0xc70f6907 ^ (len(data) * _HASH_MUL)) & _WORD
    for at in range(0, whole, 8):
        word = int.from_bytes(data[at:at + 8], "little")
        h = ((h ^ (_shift_mix(word * _HASH_MUL & _WORD) * _HASH_MUL & _WORD)) * _HASH_MUL
             & _WORD)
    if len(data) & 7:
        h = (h ^ int.from_bytes(data[whole:], "little")) * _HASH_MUL & _WORD
    return _shift_mix(_shift_mix(h) * _HASH_MUL & _WORD)


def _map_order(keys):
    """The order a libstdc++ ``unordered_map`` filled with ``keys`` (in that order) walks
    them: its first insertion makes 13 buckets, and a key goes first in its bucket's run of
    the one list, or first in the list when its bucket is empty.  (Over 13 keys it would
    rehash; no call has that many.)"""
    order, before = [], {}      # bucket -> the key before its run (None: the list's head)
    for key in keys:
        bucket = _string_hash(key) % 13
        if bucket in before:
            order.insert(0 if before[bucket] is None else order.index(before[bucket]) + 1,
                         key)
            continue
        if order:
            before[_string_hash(order[0]) % 13] = key
        order.insert(0, key)
        before[bucket] = None
    return order


def _invalid_combination(fname, sigs, args, kwargs, kwargs_as_given):
    got = [_tp_name(a) for a in args]
    # PyTorch copies the keywords into a C++ map and lists them in its order, which follows
    # the order they were given in; where a factory's fast path has rebuilt ``kwargs`` that
    # order is lost, and sorted is the map's order for the few short names tested
    keys = _map_order(list(kwargs)) if kwargs_as_given else sorted(kwargs)
    named = [f"{key}={_tp_name(kwargs[key])}" for key in keys]
    if args:
        inside = ", ".join(got + named)
    else:   # PyTorch ends keywords-only with a separator
        inside = "".join(f"{n}, " for n in named)
    options = ""
    for sig in sigs:
        options += f" * {sig.text}\n"
        reason = _why_not(sig, args, kwargs, keys)
        if reason is not None:
            options += reason + "\n"
    return TypeError(f"{fname}() received an invalid combination of arguments - got "
                     f"({inside}), but expected one of:\n{options}")


def parse(fname, args, kwargs, overloads=None, kwargs_as_given=False):
    """``{name: value}`` for the factory ``fname`` called with ``args`` and ``kwargs``, by the
    first of its overloads (``SIGNATURES[overloads or fname]``) that takes them; sizes as
    tuples of ints, missing keywords as their defaults.  PyTorch's TypeError when none does:
    the one overload's when only one takes that many arguments, else the list of all of
    them (``kwargs_as_given``: ``kwargs`` is the caller's, in the caller's order)."""
    sigs = _signatures(overloads or fname)
    for sig in sigs:
        try:
            return _bind(sig, fname, args, kwargs, raising=False)
        except _Mismatch:
            pass
    count = len(args) + len(kwargs)
    # (a function of one signature has its errors from it, whatever the count)
    plausible = sigs if len(sigs) == 1 else [
        s for s in sigs if s.min_args <= count <= s.max_args]
    if len(plausible) == 1:
        _bind(plausible[0], fname, args, kwargs, raising=True)
    raise _invalid_combination(fname, sigs, args, kwargs, kwargs_as_given)
