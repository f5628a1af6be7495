"""The dispatchers, written from the table: no pass holds a hand-kept list of ops.

Two generated modules:

* the one-element chains (``one_element_module``): for records of one value, which scalar
  code and per-op loops are made of, ``backward_one``, ``forward_one``, ``tangent_one`` and
  ``curvature_one`` -- ``if o == CODE: <the family's scalar path with the op's rules>`` --
  inlined into the sweeps: such a record costs a few nanoseconds and no call;
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
# what each entry unpacks from its context (entries.<pass>_columns), in that order
_UNPACKED = {
    "backward": "a0, a1, voff, goff, size, ip, fp, aux, faux, vals, ext, grads, need",
    "forward": "a0, a1, voff, size, ip, fp, aux, faux, vals, ext",
    "tangent": "a0, a1, voff, size, ip, fp, aux, faux, vals, tans, dep",
    "curvature": "a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, tans, dg, need",
}
# the elementwise family's loops (elementwise.py) take fewer
_EW = {
    "backward": "a0, a1, voff, goff, size, ip, fp, aux, faux, vals, grads, need, x, y",
    "forward": "a0, a1, voff, size, ip, fp, faux, vals",
    "tangent": "a0, a1, voff, size, ip, fp, faux, vals, tans, b, d0, d1",
    "curvature": "a0, voff, goff, size, ip, fp, faux, vals, grads, tans, b, dg",
    "backward_one": "a0, a1, voff, goff, ip, fp, faux, vals, grads, need",
    "forward_one": "a0, a1, voff, ip, fp, faux, vals",
    "tangent_one": "a0, a1, voff, ip, fp, faux, vals, tans, n_seeds, stride, d0, d1",
    "curvature_one": "a0, voff, goff, ip, fp, faux, vals, grads, tans, stride, dgrads",
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


# The family's one-element paths, written out per op with its rules: called directly, the
# scalar rules inline cheaply, where passing them as function arguments to a shared helper
# made numba take twenty seconds to compile the sweep.
_LOAD_ONE = """\
s0 = a0[r]
x0 = vals[voff[s0]]
x1 = {x1}
x2 = {x2}
c = fp[r]
p0, p1 = {params}
out = vals[voff[r]]"""
_ONE_PATH = {
    "backward_one": """\
g = grads[goff[r]]
if need[s0]:
    grads[goff[s0]] += {vjp0}(g, x0, x1, x2, out, c, p0, p1)
{binary}""",
    "forward_one": "vals[voff[r]] = {forward}(x0, x1, x2, c, p0, p1)",
    "tangent_one": """\
for s in range(n_seeds):
    b = s * stride
    {tangent}""",
    "curvature_one": """\
d = {d2}(x0, out, c, p0, p1)
for s in range(dgrads.shape[0]):
    dgrads[s, goff[s0]] += grads[goff[r]] * d * tans[s * stride + voff[s0]]""",
}


def _one_element_body(info, name, ref):
    """The source of op ``info``'s one-element path in chain ``name``, or None."""
    if info.family != T.ELEMENTWISE or (name == "curvature_one" and "d2" not in info.rules):
        return None
    rules, binary = info.rules, info.arity == 2
    load = _LOAD_ONE.format(
        x1="vals[voff[a1[r]]]" if binary else "x0",
        x2="vals[voff[ip[r]]]" if info.condition else "x0",
        params="faux[ip[r]], faux[ip[r] + 1]" if info.params else "0.0, 0.0")
    if name == "forward_one":
        load = load.replace("out = vals[voff[r]]", "")
    fields = dict(forward=ref(rules["forward"]), vjp0=ref(rules["vjp0"]), binary="",
                  d2=ref(rules["d2"]) if "d2" in rules else "")
    if binary:
        fields["binary"] = ("s1 = a1[r]\nif need[s1]:\n    grads[goff[s1]] += "
                            f"{ref(rules['vjp1'])}(g, x0, x1, x2, out, c, p0, p1)")
        fields["tangent"] = (
            "acc = 0.0\n    if d0:\n        acc += "
            f"{ref(rules['vjp0'])}(tans[b + voff[s0]], x0, x1, x2, out, c, p0, p1)\n"
            "    if d1:\n        acc += "
            f"{ref(rules['vjp1'])}(tans[b + voff[a1[r]]], x0, x1, x2, out, c, p0, p1)\n"
            "    tans[b + voff[r]] = acc")
    else:
        fields["tangent"] = (f"tans[b + voff[r]] = {ref(rules['vjp0'])}(tans[b + voff[s0]], "
                             "x0, x1, x2, out, c, p0, p1)")
    return load + "\n" + _ONE_PATH[name].format(**fields)


def one_element_source():
    """The one-element chains' module source, from the table as declared now."""
    ref = _Names()
    body = []
    for name in ("backward_one", "forward_one", "tangent_one", "curvature_one"):
        body += ["", "", "@inline", f"def {name}(o, r, {_EW[name]}):"]
        first = True
        for code in T.codes():
            text = _one_element_body(T.OPS[code], name, ref)
            if text is None:
                continue
            body.append(f"    {'if' if first else 'elif'} o == {code}:  # {T.OPS[code].const}")
            body += ["        " + line for line in text.split("\n") if line.strip()]
            first = False
        body += ["    else:", "        return False", "    return True"]
    head = ['"""tapegrad\'s one-element dispatchers, generated by tapegrad/ops/dispatch.py."""',
            "from tapegrad._config import inline"]
    return "\n".join(head + ref.imports() + body) + "\n"


def entries_source():
    """The entries' module source: one function per op and pass that has a rule."""
    ref = _Names()
    body = []
    for pass_ in ("backward", "forward", "tangent", "curvature"):
        for code in T.codes():
            stmt = _array_call(T.OPS[code], pass_, ref)
            if stmt is None:
                continue
            body += ["", "", f"def {pass_}_{code}(r, context, x, y, b, flags):  "
                             f"# {T.OPS[code].const}",
                     f"    {_UNPACKED[pass_]} = _E.{pass_}_columns(context)"]
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
