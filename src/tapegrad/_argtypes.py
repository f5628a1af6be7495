"""PyTorch's TypeError for an argument that must be a tensor and is not.

PyTorch's argument parser refuses ``torch.sin([1.0])`` with ``TypeError: sin(): argument
'input' (position 1) must be Tensor, not list`` before the op runs.  tapegrad's functions read
``x._value`` first thing, so the same call used to end in an AttributeError deep inside, or a
list was quietly made a tensor where PyTorch refuses it.  One mechanism fixes both:

* ``install`` puts a guard in front of each public function that ``_argtable.ARGS`` lists: it
  looks at the listed arguments only (``type(a) is Tensor`` each, when all is well) and
  raises PyTorch's text for a wrong one.  The guard's code is generated once per tuple of
  argument positions, with the positions as literals, so a call with tensors pays one small
  frame and no loop.
* the elementwise front door (``functional._unary``), which the hot one-line ops such as
  ``tapegrad.sin`` are, gets no guard (a frame there is a measurable share of a call on a
  one-element tensor): it catches the AttributeError of its first ``x._value`` and calls
  ``not_tensor`` -- free while nothing raises (Python 3.11's zero-cost ``try``).

Methods get the same guards (``install_methods``), but for the operators: ``x + y`` and
``x * 2.0`` keep their paths as they were (Python's own TypeError covers ``x + "a"``).
"""
import builtins
import functools
import inspect
import numbers
import types

import numpy as np

from .tensor import Tensor

_MISSING = object()


def type_name(obj):
    """How PyTorch names the type of a wrong argument: ``list``, ``numpy.ndarray``."""
    t = type(obj)
    if t.__module__ == "builtins" or isinstance(obj, Tensor):
        return t.__name__   # (PyTorch's own: "Tensor", not "torch.Tensor")
    # PyTorch writes the top-level package (numpy.ndarray, not numpy.core...ndarray)
    return f"{t.__module__.split('.')[0]}.{t.__qualname__}"


def not_tensor(fname, arg, pos, obj):
    """PyTorch's TypeError: argument ``arg`` of ``fname`` (at 1-based ``pos``, or None when it
    was passed by keyword) is ``obj``, which is not a tensor."""
    where = "" if pos is None else f" (position {pos})"
    return TypeError(f"{fname}(): argument '{arg}'{where} must be Tensor, not "
                     f"{type_name(obj)}")


def _kind(obj):
    """The letter ``_argtable`` uses for what ``obj`` is (see its docstring)."""
    if obj is None:
        return "n"
    t = type(obj)
    # (an ndarray goes where a list goes: PyTorch reads both as nested sequences)
    if t is list or t is np.ndarray:
        return "l"
    if t is tuple:
        return "t"
    # (an integer apart from a float: a dim goes where a float does not, x.max(0))
    if t is int or t is bool or isinstance(obj, (np.integer, np.bool_)):
        return "i"
    # NumPy scalars count as numbers where PyTorch takes numbers (where it takes tensors
    # only, it refuses them by their own name, numpy.float64)
    if isinstance(obj, (numbers.Number, np.generic)):
        return "f"
    return "s"


def _refuse(entry, obj, positional):
    """Raise PyTorch's TypeError for ``obj`` in ``entry``'s argument, unless PyTorch takes
    what it is there (a number where an overload takes a Scalar, a subclass of Tensor)."""
    _, _, fname, arg, pos, accepts = entry
    if obj is _MISSING or isinstance(obj, Tensor) or _kind(obj) in accepts:
        return
    raise not_tensor(fname, arg, pos if positional else None, obj)


def _guard_code(positions):
    """The code of a guard that checks the arguments at ``positions`` (a tuple of indices),
    compiled once per tuple: compiling a guard's source costs ~70 us, and ~450 guards made
    at ``import tapegrad`` took ~30 ms that way, while the table has three tuples, (0,), (1,)
    and (0, 1).  What differs between guards of one tuple -- the function, its rows, the
    keyword names -- the code reads as globals (``fn``, ``E0``, ``K0``...) of a namespace of
    the guard's own, so a guard runs the same instructions as one compiled for it alone."""
    code = _CODE.get(positions)
    if code is None:
        lines = ["def guarded(*args, **kwargs):",
                 # (PyTorch's other names for an argument: see keyword_aliases)
                 "    if kwargs and ALIASES is not None:",
                 "        kwargs = renamed(ALIASES, kwargs, fn.__name__)",
                 "    n = len(args)"]
        for k, i in enumerate(positions):
            # (K{k} is None for a positional-only parameter: kwargs.get(None) is MISSING)
            lines += [f"    a = args[{i}] if n > {i} else kwargs.get(K{k}, MISSING)",
                      "    if type(a) is not Tensor:",
                      f"        refuse(E{k}, a, n > {i})"]
        lines.append("    return fn(*args, **kwargs)")
        module = compile("\n".join(lines) + "\n", "<tapegrad argument check>", "exec")
        code = _CODE[positions] = next(c for c in module.co_consts
                                       if isinstance(c, types.CodeType))
    return code


_CODE = {}


def keyword_aliases(fn, entries=()):
    """``{PyTorch's keyword: fn's parameter}`` for the keywords PyTorch also takes for an
    argument of ``fn`` that fn calls otherwise, or None: NumPy's ``axis`` and ``keepdims``
    (PyTorch's parser takes them for every ``dim`` and ``keepdim``: ``x.sum(axis=1)``), and
    PyTorch's own name of an argument ``entries`` (rows of ``_argtable``) list under another
    name here (``tapegrad.sum(input=x)``, whose parameter is x)."""
    code = inspect.unwrap(fn).__code__
    params = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    aliases = {}
    for numpy_name, name in (("axis", "dim"), ("keepdims", "keepdim")):
        if name in params and numpy_name not in params:
            aliases[numpy_name] = name
    for entry in entries:
        mine, theirs = entry[1], entry[3]
        if mine is not None and theirs != mine and theirs not in params:
            aliases[theirs] = mine
    return aliases or None


def renamed(aliases, kwargs, fname):
    """``kwargs`` with the keywords ``aliases`` names under the function's own names; an
    argument given under both names raises PyTorch's TypeError (of function ``fname``),
    which names the alias."""
    out = {}
    for key, value in kwargs.items():
        mine = aliases.get(key)
        if mine is not None and mine in kwargs:
            raise TypeError(f"{fname}() got an unexpected keyword argument '{key}'")
        out[key if mine is None else mine] = value
    return out


def guard(fn, entries):
    """``fn`` behind a check of the arguments ``entries`` (rows of ``_argtable.ARGS``) name:
    same name, docstring, signature (``__wrapped__``) and module."""
    # (``__builtins__`` as ``exec`` puts it in a namespace: ``len`` and ``type`` are found)
    namespace = {"fn": fn, "Tensor": Tensor, "refuse": _refuse, "MISSING": _MISSING,
                 "ALIASES": keyword_aliases(fn, entries), "renamed": renamed,
                 "__builtins__": builtins.__dict__}
    for k, entry in enumerate(entries):
        namespace[f"E{k}"] = entry
        namespace[f"K{k}"] = entry[1]
    code = _guard_code(tuple(entry[0] for entry in entries))
    # (a traceback names the function the guard stands in front of, as when each guard
    # was compiled from a source of its own)
    code = code.replace(co_filename=f"<tapegrad argument check {fn.__name__}>")
    guarded = functools.wraps(fn)(types.FunctionType(code, namespace, "guarded"))
    guarded._argument_check = True
    return guarded


def _element_error(i, obj):
    return TypeError(f"expected Tensor as element {i} in argument 0, but got {type_name(obj)}")


def _check_tensors(mode, fname, args, kwargs):
    """PyTorch's TypeError for a function taking several tensors (``_argtable.SEQUENCES``)
    when one of ``args`` (or ``kwargs['tensors']``) is not a tensor."""
    if mode == "seq":
        positional = bool(args)
        seq = args[0] if positional else kwargs.get("tensors", _MISSING)
        if seq is _MISSING:
            return
        if type(seq) is not list and type(seq) is not tuple:
            where = " (position 1)" if positional else ""
            raise TypeError(f"{fname}(): argument 'tensors'{where} must be tuple of Tensors, "
                            f"not {type_name(seq)}")
    elif mode == "unpack" and len(args) == 1 and type(args[0]) in (list, tuple):
        seq = args[0]
    else:
        seq = args
    for i, a in enumerate(seq):
        if not isinstance(a, Tensor):
            raise _element_error(i, a)


def guard_tensors(fn, mode, fname):
    """``fn`` behind the check of ``_check_tensors``; same name, docstring and signature."""
    aliases = keyword_aliases(fn)

    def guarded(*args, **kwargs):
        if kwargs and aliases is not None:
            kwargs = renamed(aliases, kwargs, fname)   # (torch.cat(xs, axis=0))
        _check_tensors(mode, fname, args, kwargs)
        return fn(*args, **kwargs)
    guarded = functools.wraps(fn)(guarded)
    guarded._argument_check = True
    return guarded


def _hot(fn):
    # the one-line elementwise ops (``sin = lambda x: _unary(...)``) check in _unary itself
    return getattr(fn, "__name__", "") == "<lambda>"


def warns(fn, depth=2, memo=None):
    """Whether ``fn`` or a function of its module it calls (to ``depth`` levels) warns: a
    warning names the caller's line (stacklevel), which a guard's frame in between would
    take, and Python's once-per-line rule would then silence every later call's warning --
    such a function keeps its own checks.  ``memo``: answers known already (a dict), as
    many functions call the same helpers."""
    key = (fn, depth)
    if memo is not None and key in memo:
        return memo[key]
    # (the names joined by a space: no "warn" spans two of them; _frames.warn_program finds
    # the program's line itself, past a guard's frame)
    names = [n for n in fn.__code__.co_names if n != "warn_program"]
    answer = "warn" in " ".join(names) or depth > 1 and any(
        inspect.isfunction(g) and warns(g, depth - 1, memo)
        for g in map(fn.__globals__.get, names))
    if memo is not None:
        memo[key] = answer
    return answer


def _guarded(fn):
    # (a name installed twice keeps its one guard)
    return getattr(fn, "_argument_check", False)


def _guards(get, names, make):
    """``{name: guard}`` for the ``names`` whose function (``get(name)``) is a plain Python
    function not guarded yet; ``make(name, fn)`` makes a guard.  A function known by two
    names (``clip`` is ``clamp``) gets one guard for both, made for the name it was defined
    under where that is listed: ``tapegrad.clip is tapegrad.clamp`` stays true (its text
    then says ``clamp()``, where PyTorch's says ``clip()``)."""
    by_fn, memo = {}, {}
    for name in names:
        fn = get(name)
        if inspect.isfunction(fn) and not _guarded(fn) and not warns(fn, memo=memo):
            by_fn.setdefault(id(fn), (fn, []))[1].append(name)
    made = {}
    for fn, aliases in by_fn.values():
        first = fn.__name__ if fn.__name__ in aliases else aliases[0]
        guarded = make(first, fn)
        if guarded is not None:
            made.update(dict.fromkeys(aliases, guarded))
    return made


def install(namespace, rows, sequences, hot=True):
    """Put a guard in front of each function of ``namespace`` (a module's globals) that
    ``rows`` (one module's part of ``_argtable.ARGS``) lists.  ``sequences`` (that module's
    part of ``_argtable.SEQUENCES``): the functions that take several tensors.  ``hot``:
    leave the one-line elementwise ops to ``functional._unary`` (for the package's own
    names; a submodule's alias of one, ``special.expm1``, is guarded)."""
    def make(name, fn):
        if name in sequences:   # (checked element by element)
            return guard_tensors(fn, *sequences[name])
        return None if hot and _hot(fn) else guard(fn, rows[name])
    namespace.update(_guards(namespace.get, [*rows, *sequences], make))


def install_methods(cls, rows):
    """The same guards for the methods of ``cls`` (Tensor) that ``rows``
    (``_argtable.METHODS``) lists: ``x.add([1])`` as ``tapegrad.add(x, [1])``."""
    for name, guarded in _guards(cls.__dict__.get, rows,
                                 lambda name, fn: guard(fn, rows[name])).items():
        setattr(cls, name, guarded)
