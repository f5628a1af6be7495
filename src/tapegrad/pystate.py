"""The Python state a compiled function reads besides its arguments, and the guards that tell
a replay whether it still holds.

A replay runs the recorded tape, not the function's Python, so whatever the function read
while it was recorded is baked into the tape: a closed-over float became a record's constant,
a module-level flag picked a branch, a closed-over tensor that requires no gradient was copied
into the arena, a module's parameter was bound as a leaf.  Before each recording, ``capture``
walks what the function can name and keeps what it finds:

* its closure cells, the globals its code names (its nested functions' too) and its default
  arguments; recursively the same of the Python functions found there.  Library functions
  (tapegrad's, NumPy's, the standard library's, ...) are kept by identity only;
* ``nn.Module`` trees: each module's ``training`` flag, its parameters, buffers and submodules,
  its other attributes, and its class's ``forward`` and the methods the walked code names;
* other objects and classes: the attributes the walked code names (``self.alpha``,
  ``cfg.lr``), and the methods of their class named there; Python modules other than
  libraries alike (``config.SCALE``);
* what a ``functools.partial`` or a bound method holds.

Each is checked as it can change: numbers, strings, ``None`` and tuples of them by value (floats
by bit pattern: -0.0 is not 0.0), after a cheap identity test; tensors by identity, those that
require grad by shape and flag (a replay reads their values afresh), those that do not by their
values too (which may be baked into the tape, and which a write through ``.numpy()`` changes
without a version); NumPy arrays by identity and values; lists and dicts by identity, length
and each element; functions, modules, classes and other objects by identity.

The guards are compiled into one Python function, ``Snapshot.changed``, that a replay calls
before it runs (the generated fast call, ``_fastcall.replayer``, calls it too).  A recording
during which any of it changed runs eagerly (a replay would not repeat the change), and so does
one that drew from a random generator found on the way (``Snapshot.drew_random``).
"""
import array
import collections
import copy
import functools
import math
import random
import sys
import types
from collections import namedtuple

import numpy as np

from ._generator import Generator
from ._random_stream import RandomStream

from .tensor import Tensor

# Packages whose functions and objects are taken as they are: their code does not read user
# state that changes between calls (tapegrad's own random state is watched by replay.py).
_LIBRARIES = frozenset({"tapegrad", "numpy", "scipy", "numba", "torch", "jax", "jaxlib",
                        "builtins", "_thread"}) | frozenset(sys.stdlib_module_names)
# Arrays of at most this many bytes are compared through ``tobytes()`` (one allocation, about
# 0.1 us); larger ones with NumPy against a kept copy.
_SMALL_BYTES = 4096
# A function reading more than this is not replayed: checking it would cost more than it saves
_MAX_TESTS = 20000
_MISSING = object()   # what getattr gives for a method deleted from its class


class _Where(namedtuple("_Where", "path origin")):
    """What a test watches, for the stats: ``path`` (``'w'[1]``, ``model.lin.weight``) and
    where its root was found (closed over by f, a global of m, ...)."""

    __slots__ = ()

    def child(self, suffix):
        return _Where(self.path + suffix, self.origin)

    def part(self, words):
        return _Where(f"{words} {self.path}", self.origin)

    def __str__(self):
        return f"{self.path} ({self.origin})"


class Unguarded(Exception):
    """State that cannot be guarded: too much of it, nested too deeply, or an object that
    fails when looked into.  Its text says which."""


def _is_library(obj):
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str):
        return True   # builtins and C extension objects without a home
    return _is_library_name(module)


def _is_library_name(module_name):
    return module_name.partition(".")[0] in _LIBRARIES


def _is_stdlib_name(module_name):
    return isinstance(module_name, str) and (
        module_name.partition(".")[0].lstrip("_") in sys.stdlib_module_names
        or module_name.partition(".")[0] in sys.stdlib_module_names)


_PLAIN_TYPES = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis))


def is_plain(v, depth=0):
    """Immutable data compared by value: numbers, strings, None, NumPy scalars, and tuples
    and frozensets of them."""
    if isinstance(v, _PLAIN_TYPES):
        return True
    if isinstance(v, np.generic):
        return v.dtype.kind != "O"
    if isinstance(v, (tuple, frozenset)) and depth < 8:
        return all(is_plain(x, depth + 1) for x in v)
    return False


def _is_plain_container(v, depth=0):
    """A list or dict (or tuple of them) holding only plain data: compared as a whole."""
    if is_plain(v, depth):
        return True
    if depth >= 8:
        return False
    if isinstance(v, (list, tuple)):
        return all(_is_plain_container(x, depth + 1) for x in v)
    if isinstance(v, dict):
        return all(is_plain(k) and _is_plain_container(x, depth + 1) for k, x in v.items())
    return False


def _holds_floats(v, depth=0):
    if isinstance(v, (float, complex, np.floating, np.complexfloating)):
        return True
    if depth >= 8:
        return False
    if isinstance(v, dict):
        v = list(v.values())
    return isinstance(v, (list, tuple, frozenset)) and any(
        _holds_floats(x, depth + 1) for x in v)


def filled(cell):
    """Whether a closure cell holds a value (it is empty until its variable is assigned)."""
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def same(a, b):
    """Whether two plain values are the same, exactly: same types, floats by bit pattern
    (-0.0 is not 0.0, a NaN is itself)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (a == b and math.copysign(1.0, a) == math.copysign(1.0, b)) or (
            a != a and b != b)
    if isinstance(a, complex):
        return same(a.real, b.real) and same(a.imag, b.imag)
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def same_bits(value, kept):
    """Whether array ``value`` has the shape, dtype and bytes of the copy ``kept``."""
    if value.shape != kept.shape or value.dtype != kept.dtype:
        return False
    return np.array_equal(np.ascontiguousarray(value).reshape(-1).view(np.uint8),
                          kept.reshape(-1).view(np.uint8))


def _random_state(gen):
    if isinstance(gen, RandomStream):      # (a tapegrad.Generator's)
        return gen.fingerprint()
    if isinstance(gen, np.random.Generator):
        return gen.bit_generator.state
    if isinstance(gen, np.random.RandomState):
        state = gen.get_state()
        return (state[0], state[1].tobytes()) + tuple(state[2:])
    return gen.getstate()   # random.Random


def _progress(it):
    """How far iterator ``it`` has gone, comparable before and after a call (None when that
    cannot be read): a generator's position, or what ``__reduce__`` tells of a builtin
    iterator (a list's or a range's: its index)."""
    if isinstance(it, types.GeneratorType):
        return -1 if it.gi_frame is None else it.gi_frame.f_lasti
    try:
        reduced = it.__reduce__()
    except Exception:  # noqa: BLE001 - not every iterator can say
        return None
    # the parts that are plain data (an index); nested iterators cannot be compared
    parts = reduced[1:] if isinstance(reduced, tuple) else ()
    if not all(is_plain(p) or isinstance(p, (tuple, list)) for p in parts):
        return None
    flat = [p for p in parts if is_plain(p)]
    return None if len(flat) == 0 else tuple(flat)


class Snapshot:
    """What one recording read of Python state, as it was before the call."""

    def __init__(self, tests, descriptions, namespace, generators, iterators=()):
        self.descriptions = descriptions
        self.generators = generators    # (generator, its state before the call)
        self.iterators = iterators      # (iterator, how far it was before the call)
        self.count = len(tests)
        lines = ["def changed():"]
        if tests:
            lines.append("    try:")
            lines += [f"        if {t}:\n            return {i}" for i, t in enumerate(tests)]
            # a read that fails (a deleted global or attribute: KeyError) is a change too
            lines.append("    except Exception:\n        return -2")
        lines.append("    return None")
        namespace = dict(namespace, same=same, same_bits=same_bits, filled=filled,
                         MISSING=_MISSING)
        exec(compile("\n".join(lines) + "\n", "<tapegrad state guards>", "exec"), namespace)
        # taken out of its globals: left there, function and namespace would be a cycle
        self.check = namespace.pop("changed")

    def changed(self):
        """None while everything read holds, else a description of what changed."""
        return self.describe(self.check())

    def describe(self, found):
        """What ``check()``'s result ``found`` (not None) says changed."""
        if found is None:
            return None
        if found < 0:
            return "Python state it reads could not be read again"
        return f"{self.descriptions[found]}: changed"

    def advanced_iterator(self):
        """The type of an iterator found in the state that the call advanced (or may have:
        its progress cannot be read), or None."""
        for it, before in self.iterators:
            now = _progress(it)
            if before is None or now != before:
                return type(it).__name__
        return None

    def drew_random(self):
        """The random generator found in the state that the call drew from, or None."""
        for gen, state in self.generators:
            if _random_state(gen) != state:
                return type(gen).__name__
        return None


class _Walker:
    """Collects the tests of one ``capture``."""

    def __init__(self):
        self.tests = []          # source of each test, true when it changed
        self.descriptions = []   # what each test watches
        self.namespace = {}
        self.names = set()       # every name the walked code reads (globals and attributes)
        self.objects = []        # (object, its name, description) walked for attributes
        self.attrs_read = set()  # (id(object), attribute) already guarded
        self.walked = set()      # ids of objects whose contents are guarded (all are bound
                                 # in the namespace: their ids stay theirs)
        self.generators = []
        self.iterators = []

    def bind(self, value, prefix="O"):
        name = f"{prefix}{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def test(self, source, description):
        if len(self.tests) >= _MAX_TESTS:
            raise Unguarded(f"more than {_MAX_TESTS} items of Python state (at {description})")
        self.tests.append(source)
        self.descriptions.append(description)

    # --- a place holding a value: a cell, a global, an attribute, an element ----------------
    def slot(self, access, value, description):
        """Guard the value read by the expression ``access``, and what it holds."""
        if is_plain(value):
            name = self.bind(value)
            # identity first: the usual case, an unchanged binding, costs one comparison
            self.test(f"(v := {access}) is not {name} and not same(v, {name})", description)
            return
        name = self.bind(value)
        self.test(f"{access} is not {name}", description)
        self.contents(value, name, description)

    # --- what a value holds -------------------------------------------------------------------
    def contents(self, value, name, description):
        if is_plain(value) or id(value) in self.walked:
            return
        self.walked.add(id(value))
        if isinstance(value, Tensor):
            self.tensor(value, name, description)
        elif isinstance(value, np.ndarray):
            self.array(f"{name}", value, description)
        elif isinstance(value, (set, frozenset)) and all(is_plain(x) for x in value):
            self.test(f"{name} != {self.bind(frozenset(value), 'K')}", description)
        elif isinstance(value, (list, tuple, dict)) and _is_plain_container(value):
            kept = self.bind(copy.deepcopy(value), "K")
            # == sees 0.0 and -0.0 as one, and two NaNs as two: then same() decides
            exact = f" or not same({name}, {kept})" if _holds_floats(value) else ""
            self.test(f"{name} != {kept}{exact}", description)
        elif isinstance(value, (list, tuple, collections.deque)):
            if not isinstance(value, tuple):
                self.test(f"len({name}) != {len(value)}", description.part("the length of"))
            for i, item in enumerate(value):
                self.slot(f"{name}[{i}]", item, description.child(f"[{i}]"))
        elif isinstance(value, (array.array, bytearray)):
            # mutable buffers of numbers: by value (== sees 0.0 and -0.0 as one; the bytes
            # do not)
            self.test(f"bytes({name}) != {self.bind(bytes(value), 'K')}", description)
        elif isinstance(value, dict):
            keys = self.bind(list(value), "K")
            self.test(f"list({name}) != {keys}", description.part("the keys of"))
            for key, item in value.items():
                self.slot(f"{name}[{self.bind(key, 'K')}]", item, description.child(f"[{key!r}]"))
        elif isinstance(value, Generator):
            # tapegrad's own: its draws come from the NumPy generator inside
            self.generators.append((value._rng, _random_state(value._rng)))
        elif isinstance(value, (np.random.Generator, np.random.RandomState, random.Random)):
            # the random module's shared generator is watched by the recording itself, which
            # tells this thread's draws from other threads' (they draw from it all the time)
            if value is not random._inst:
                self.generators.append((value, _random_state(value)))
        elif hasattr(type(value), "__next__"):
            # an iterator: next() on it during the recording is a change of state
            self.iterators.append((value, _progress(value)))
        elif isinstance(value, types.FunctionType):
            self.function(value, name, description)
        elif isinstance(value, types.MethodType):
            self.contents(value.__self__, self.bind(value.__self__), description)
            self.contents(value.__func__, self.bind(value.__func__), description)
        elif isinstance(value, functools.partial):
            self.contents(value.func, self.bind(value.func), description)
            for i, a in enumerate(value.args):
                self.contents(a, self.bind(a), description.child(f" (argument {i})"))
            for k, a in value.keywords.items():
                self.contents(a, self.bind(a), description.child(f" (argument {k})"))
        elif _is_module(value):
            self.module(value, name, description)
        elif isinstance(value, types.ModuleType):
            if not _is_library_name(value.__name__):
                self.objects.append((value, name, description))
        elif hasattr(value, "__wrapped__") and callable(value):
            # tapegrad.compile's own functions (and functools.wraps wrappers)
            wrapped = value.__wrapped__
            self.contents(wrapped, self.bind(wrapped), description)
        elif not _is_library(value if isinstance(value, type) else type(value)):
            self.objects.append((value, name, description))
            if not isinstance(value, type):
                cls = type(value)
                self.objects.append((cls, self.bind(cls), _Where(cls.__name__, "a class")))
                self.method(cls, "__call__", _Where(f"{cls.__name__}.__call__", "a method"))
        elif (not isinstance(value, type) and _is_stdlib_name(type(value).__module__)
              and _attribute_dict(value) is not None):
            # a standard-library object holding data in attributes (types.SimpleNamespace,
            # argparse.Namespace, ...): the attributes the walked code names are guarded,
            # as a user object's (its class's methods are the library's)
            self.objects.append((value, name, description))

    def tensor(self, t, name, description):
        v = t._value
        if t._rg:
            # its values are read afresh by each replay (a leaf) or guarded where Python read
            # them; what the tape was made for is its shape and that it requires grad
            self.test(f"{name}._rg is not True or {name}._value.shape != {v.shape!r}",
                      description.part("the shape or requires_grad of"))
        else:
            self.array(f"{name}._value", v, description, f"{name}._rg or ")

    def array(self, access, v, description, first=""):
        """Guard the values of the array ``access`` gives (now ``v``); ``first``: a test to
        put before, in the same condition."""
        values = self.bind(v, "K")
        if v.nbytes > _SMALL_BYTES:
            kept = self.bind(np.array(v), "K")
            self.test(f"{first}not same_bits({access}, {kept})", description.part("the values of"))
            return
        # the same array object keeps its shape and dtype; another one is compared in full
        layout = (f"(a := {access}) is not {values} and (a.shape != {v.shape!r} "
                  f"or a.dtype != {self.bind(v.dtype, 'K')})")
        if v.size == 1 and v.dtype.kind == "f" and v.item() == v.item() and v.item() != 0.0:
            # a number (not 0.0, whose sign == ignores, nor NaN): == tells its bits apart
            data = f"a.item() != {self.bind(v.item(), 'K')}"
        else:
            data = f"a.tobytes() != {self.bind(v.tobytes(), 'K')}"
        self.test(f"{first}{layout} or {data}", description.part("the values of"))

    def function(self, fn, name, description):
        own = fn.__module__ if isinstance(fn.__module__, str) else ""
        if _is_library(fn) and not own.startswith("tapegrad"):
            return
        code = fn.__code__
        where = getattr(fn, "__qualname__", "a function")
        for var, cell in zip(code.co_freevars, fn.__closure__ or ()):
            cell_name = self.bind(cell, "C")
            try:
                value = cell.cell_contents
            except ValueError:   # not assigned yet: guarded to stay so
                self.test(f"filled({cell_name})", _Where(var, f"closed over by {where}"))
                continue
            self.slot(f"{cell_name}.cell_contents", value,
                      _Where(var, f"closed over by {where}"))
        if _is_library(fn):
            # tapegrad's own functions: only what they close over (a transform's closure
            # holds the user's function); their globals are the library's
            return
        self.names.update(_code_names(code))
        glob = fn.__globals__
        module = glob.get("__name__", "?")
        glob_name = None
        for var in sorted(_code_names(code)):
            if var in glob and (id(glob), var) not in self.attrs_read:
                self.attrs_read.add((id(glob), var))
                glob_name = glob_name or self.bind(glob, "G")
                self.slot(f"{glob_name}[{var!r}]", glob[var],
                          _Where(var, f"a global of {module}, read by {where}"))
        if fn.__defaults__:
            self.slot(f"{name}.__defaults__", fn.__defaults__,
                      _Where("the defaults", f"of {where}"))
        if fn.__kwdefaults__:
            self.slot(f"{name}.__kwdefaults__", fn.__kwdefaults__,
                      _Where("the keyword defaults", f"of {where}"))

    def module(self, m, name, description):
        """An nn.Module: its flag, parameters, buffers, submodules, attributes, methods."""
        d = m.__dict__
        if "training" in d:
            self.test(f"{name}.__dict__.get('training') is not {d['training']!r}",
                      description.child(".training"))
        for kind in ("_parameters", "_buffers", "_modules"):
            members = d.get(kind)
            if not isinstance(members, dict):
                continue
            keys = self.bind(list(members), "K")
            self.test(f"list({name}.{kind}) != {keys}", description.part(f"the {kind[1:]} of"))
            for key, value in members.items():
                self.slot(f"{name}.{kind}[{key!r}]", value, description.child(f".{key}"))
        for key, value in d.items():
            if key not in _MODULE_INTERNALS:
                self.slot(f"{name}.__dict__[{key!r}]", value,
                          description.child(f".{key}"))
        cls = type(m)
        if not _is_library(cls):
            self.objects.append((cls, self.bind(cls), _Where(cls.__name__, "a class")))
            self.method(cls, "forward", _Where(f"{cls.__name__}.forward", "a method"))

    def method(self, cls, attr, description):
        """A method (or a property's getter) of ``cls`` named by the walked code."""
        fn = getattr(cls, attr, None)
        if (id(cls), attr) in self.attrs_read or _is_library(cls):
            return
        if isinstance(fn, property) and isinstance(fn.fget, types.FunctionType):
            self.attrs_read.add((id(cls), attr))
            self.slot(f"getattr({self.bind(cls)}, {attr!r}, MISSING)", fn, description)
            self.contents(fn.fget, self.bind(fn.fget), description)
        elif isinstance(fn, types.FunctionType):
            self.attrs_read.add((id(cls), attr))
            self.slot(f"getattr({self.bind(cls)}, {attr!r}, MISSING)", fn, description)

    def attributes(self):
        """Guard the attributes the walked code names on the objects found.  Guarding them
        finds more objects, and the methods found bring code, and with it names, of their
        own: scan each new object once, and all of them again only when new names came."""
        scanned, names = 0, len(self.names)
        while True:
            while scanned < len(self.objects):
                self.object_attributes(*self.objects[scanned])
                scanned += 1
            if len(self.names) == names:
                return
            scanned, names = 0, len(self.names)

    def object_attributes(self, obj, name, description):
        d = _attribute_dict(obj)
        if d is None:
            return
        for attr in sorted(self.names):
            if attr in d and (id(obj), attr) not in self.attrs_read:
                self.attrs_read.add((id(obj), attr))
                self.slot(f"{name}.__dict__[{attr!r}]", d[attr],
                          description.child(f".{attr}"))
        if not isinstance(obj, (type, types.ModuleType)) and not _is_library(type(obj)):
            for attr in sorted(self.names):
                self.method(type(obj), attr, _Where(f"{type(obj).__name__}.{attr}", "a method"))


_MODULE_INTERNALS = frozenset({"training", "_parameters", "_buffers", "_modules",
                               "_non_persistent_buffers_set"})


def _attribute_dict(obj):
    try:
        d = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None
    return d if isinstance(d, (dict, types.MappingProxyType)) else None


def _code_names(code, depth=0):
    """The global and attribute names ``code`` reads, its nested functions' included."""
    names = set(code.co_names)
    if depth < 8:
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                names |= _code_names(const, depth + 1)
    return names


_module_class = []


def _is_module(value):
    if not _module_class:
        from .nn.modules import Module
        _module_class.append(Module)
    return isinstance(value, _module_class[0])


def capture(fn, arguments=()):
    """The Python state ``fn`` reads, as it is now: a Snapshot.  ``arguments``: (value, what
    it is) of the arguments a signature tells apart by identity (a module passed to a method
    compiled with ``@tapegrad.compile``), whose contents are state too.  Raises Unguarded.
    """
    walker = _Walker()
    try:
        root = walker.bind(fn)
        walker.contents(fn, root, _Where(getattr(fn, "__qualname__", type(fn).__name__),
                                         "the compiled function"))
        for value, what in arguments:
            walker.contents(value, walker.bind(value), _Where(what, "an argument"))
        walker.attributes()
    except RecursionError:
        raise Unguarded("Python state nested too deeply") from None
    except Unguarded:
        raise
    except Exception as exc:  # noqa: BLE001 - an object whose attributes or state fail
        raise Unguarded(f"Python state that could not be looked into "
                        f"({type(exc).__name__}: {exc})") from None
    return Snapshot(walker.tests, walker.descriptions, walker.namespace, walker.generators,
                    walker.iterators)
