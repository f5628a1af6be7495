"""The dispatchers, written from the table: no pass holds a hand-kept list of ops.

Two generated modules:

* the one-element chains (``one_element_module``): for records of one value of the hot ops
  (``declare(hot=True)``: the everyday arithmetic scalar code and per-op loops are made of),
  ``vjp_one``, ``forward_one`` and ``d2_one`` --
  ``if o == CODE: return <the op's scalar rule>(numbers)`` -- inlined into the sweeps: such
  a record costs a few nanoseconds and no call;
* the entries (``entries_module``): one function per op and pass, ``backward_39(r, context,
  x, y, b, flags)``, that views the columns again and calls the op's whole-record rule.
  ``entries.ensure`` compiles one of them as a C entry point the first time a tape holds a
  record of that op, and the sweeps call it through ``entries.TABLE``.

Generated, not hand-kept, so that declaring an op is all it takes to put it in every pass,
and no chain can miss an op or hand one op another's rule: an opcode without a branch makes
a chain return False and has no entry, which the sweeps report as an unsupported record.
The sources are plain Python modules written to tapegrad's generated-code folder under
names made from their hash (``_generated.py``).
"""
import functools

from .. import _generated
from . import table as T

# the record columns each whole-record rule takes, after ``r``
_ARRAY = {
    "backward": "a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, x, y",
    "forward": "a0, a1, voff, size, ip, fp, aux, faux, vals, ext",
    "tangent": "a0, a1, voff, size, ip, fp, aux, faux, vals, tans, b, d0, d1, dep",
    "curvature": "a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, tans, b, dg, need",
}
# what each entry unpacks from its context (its pass's ``_columns`` function), in that order
_UNPACKED = {
    "backward": "a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need",
    "forward": "a0, a1, voff, size, ip, fp, aux, faux, vals, ext",
    "tangent": "a0, a1, voff, size, ip, fp, aux, faux, vals, tans, dep",
    "curvature": "a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, tans, dg, need",
}
# the elementwise family's loops (elementwise.py) take fewer
_EW = {
    "backward": "a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need, x, y",
    "forward": "a0, a1, voff, size, ip, fp, faux, vals",
    "tangent": "a0, a1, voff, size, ip, fp, faux, vals, tans, b, d0, d1",
    "curvature": "a0, voff, goff, size, ip, fp, faux, vals, grads, tans, b, dg",
}


class _Names:
    """Module aliases for generated source: each rule is called as ``_mK.name``."""

    def __init__(self):
        self.modules = {}

    def __call__(self, fn):
        mod = fn.py_func.__module__ if hasattr(fn, "py_func") else fn.__module__
        alias = self.modules.setdefault(mod, f"_m{len(self.modules)}")
        return f"{alias}.{fn.__name__}"

    def imports(self):
        return [f"import {mod} as {alias}" for mod, alias in self.modules.items()]


def _split(entry):
    """A rule entry ``fn`` or ``(fn, flag, ...)`` as (fn, extra argument source)."""
    if isinstance(entry, tuple):
        return entry[0], "".join(f", {a!r}" for a in entry[1:])
    return entry, ""


def _ew():
    from . import elementwise
    return elementwise


def _elementwise_call(info, loop, ref):
    """The call of the elementwise family's ``loop`` with op ``info``'s scalar rules."""
    ew, rules = _ew(), info.rules
    flags = f"{info.arity == 2}, {bool(info.params)}, {info.condition}"
    if loop == "backward":
        # one loop per input the op has: no loop it never runs is compiled
        name = "backward1" if info.arity == 1 else "backward2"
        head = f"{ref(getattr(ew, name))}(r, {_EW[loop]}"
        if info.arity == 1:
            return f"{head}, {ref(rules['vjp0'])}, {bool(info.params)})"
        return f"{head}, {ref(rules['vjp0'])}, {ref(rules['vjp1'])}, {info.condition})"
    head = f"{ref(getattr(ew, loop))}(r, {_EW[loop]}"
    if loop.startswith("curvature"):
        return f"{head}, {ref(rules['d2'])}, {bool(info.params)})"
    if loop.startswith("forward"):
        return f"{head}, {ref(rules['forward'])}, {flags})"
    return f"{head}, {ref(rules['vjp0'])}, {ref(rules.get('vjp1', ew.no_vjp))}, {flags})"


def _array_call(info, pass_, ref):
    """The statement that runs op ``info``'s whole-record rule for ``pass_``, or None."""
    if info.family == T.ELEMENTWISE:
        if pass_ == "curvature" and "d2" not in info.rules:
            entry = info.rules.get("curvature")
        else:
            return _elementwise_call(info, pass_, ref)
    else:
        entry = info.rules.get(pass_)
    if entry is None or entry == T.LINEAR:
        return None
    fn, extra = _split(entry)
    return f"{ref(fn)}(r, {_ARRAY[pass_]}{extra})"


def has_entry(info, pass_):
    """Whether op ``info`` has an entry (a whole-record rule) for ``pass_``."""
    return _array_call(info, pass_, _Names()) is not None


# The one-element chains take and return numbers only: a chain that took the arenas paid
# numba's reference counting of every array on every record (50 ns a record, against 7 for
# the arithmetic), and one that passed the rules as function arguments to a shared helper
# took numba twenty seconds to compile.
_ONE_CHAINS = {
    # name: (parameters, what the op's branch returns, what an unknown op returns)
    "vjp_one": ("g, x0, x1, x2, out, c, p0, p1",
                "{vjp0}(g, x0, x1, x2, out, c, p0, p1), {vjp1}(g, x0, x1, x2, out, c, p0, p1)",
                "nan, nan"),
    "forward_one": ("x0, x1, x2, c, p0, p1", "{forward}(x0, x1, x2, c, p0, p1)", "nan"),
    "d2_one": ("x0, out, c, p0, p1", "{d2}(x0, out, c, p0, p1)", "nan"),
}


def _one_element_return(info, name, ref):
    """What op ``info``'s branch of chain ``name`` returns, or None (no branch)."""
    if not info.hot or (name == "d2_one" and "d2" not in info.rules):
        return None
    rules = info.rules
    return _ONE_CHAINS[name][1].format(
        vjp0=ref(rules["vjp0"]), vjp1=ref(rules.get("vjp1", _ew().no_vjp)),
        forward=ref(rules["forward"]), d2=ref(rules["d2"]) if "d2" in rules else "")


def one_element_source():
    """The one-element chains' module source, from the table as declared now: for each
    elementwise op, its scalar rules on the record's numbers (``vjp_one`` gives both inputs'
    contributions, also the tangent's terms; ``forward_one`` the value; ``d2_one`` the second
    derivative).  The sweeps load the numbers and store the results."""
    ref = _Names()
    body = []
    for name, (params, _, unknown) in _ONE_CHAINS.items():
        body += ["", "", "@inline", f"def {name}(o, {params}):"]
        for k, code in enumerate(c for c in T.codes()
                                 if _one_element_return(T.OPS[c], name, ref) is not None):
            body += [f"    {'if' if k == 0 else 'elif'} o == {code}:  # {T.OPS[code].const}",
                     f"        return {_one_element_return(T.OPS[code], name, ref)}"]
        body += [f"    return {unknown}"]
    head = ['"""tapegrad\'s one-element dispatchers, generated by tapegrad/ops/dispatch.py."""',
            "from numpy import nan", "from tapegrad._config import inline"]
    return "\n".join(head + ref.imports() + body) + "\n"


# the view each column is read through (entries.py); the others are int64
_VIEWS = {"fp": "view_f64", "faux": "view_f64", "vals": "view_f64", "grads": "view_f64",
          "tans": "view_f64", "dg": "view_f64", "need": "view_u8", "dep": "view_u8"}


def _columns_function(pass_):
    """The lines of ``_<pass>_columns(address)``: the views of the columns ``pass_``'s
    entries unpack (``_UNPACKED``), each from its context slot (``entries.A0``, ...).  Each
    view is written out: numba inlines a helper by copying and retyping its code at every
    call, and a helper per view cost every entry's first compile about a tenth of a second."""
    views = []
    for name in _UNPACKED[pass_].split(", "):
        slot = f"_E.{name.upper()}"
        views.append(f"_E.{_VIEWS.get(name, 'view_i64')}(c[2 * {slot}], c[2 * {slot} + 1])")
    return ["", "", "@_E.inline", f"def _{pass_}_columns(address):",
            "    c = _E.view_i64(address, _E.CONTEXT)",
            "    return (" + ",\n            ".join(views) + ")"]


def entries_source():
    """The entries' module source: one function per op and pass that has a rule."""
    ref = _Names()
    body = []
    for pass_ in ("backward", "forward", "tangent", "curvature"):
        body += _columns_function(pass_)
        for code in T.codes():
            stmt = _array_call(T.OPS[code], pass_, ref)
            if stmt is None:
                continue
            body += ["", "", f"def {pass_}_{code}(r, context, x, y, b, flags):  "
                             f"# {T.OPS[code].const}",
                     f"    {_UNPACKED[pass_]} = _{pass_}_columns(context)"]
            if pass_ == "tangent":
                body.append("    d0, d1 = (flags & 1) != 0, (flags & 2) != 0")
            body += [f"    {stmt}", "    return 0"]
    head = ['"""tapegrad\'s op entries, generated by tapegrad/ops/dispatch.py from the table: '
            'each is compiled as a C entry point on first use (ops/entries.py)."""',
            "import tapegrad.ops.entries as _E"]
    return "\n".join(head + ref.imports() + body) + "\n"


@functools.lru_cache(maxsize=None)
def one_element_module():
    return _generated.load_module("tapegrad_one_element", one_element_source())


@functools.lru_cache(maxsize=None)
def entries_module():
    return _generated.load_module("tapegrad_entries", entries_source())
