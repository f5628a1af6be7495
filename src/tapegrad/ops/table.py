"""The op table's registry: ``declare`` and the facts every pass reads about an opcode.

Each op is declared once, in the module of its family, in one block that holds all of its
rules (see ``elementwise.py`` for the shape of a block).  This module knows nothing of numba:
it keeps the declarations, and the dispatchers (``dispatch.py``) are written from them.

Opcodes are append-only: saved tapes store them.  An op whose record layout (what ``aux``,
``faux`` or ``fp`` hold) changes gets ``layout`` bumped, so that tape files written with the
old layout are refused rather than misread.
"""
READS_X0, READS_X1, READS_OUT = 1, 2, 4

# Families: how the dispatchers call an op's rules.
DATA = "data"                # brings a value onto the tape, or reads one; no gradient rule
ELEMENTWISE = "elementwise"  # scalar rules, looped over the elements by the family's loops
ARRAY = "array"              # whole-record rules (reductions, linear algebra, structure)

# A curvature (forward-over-reverse) entry for ops whose local derivative is constant where
# it exists (linear and piecewise linear ops): nothing to add.
LINEAR = "linear"


class OpInfo:
    """Everything the engine knows about one opcode.

    ``name``: PyTorch's grad_fn class name; ``variants`` maps a variant number (``aux[ip]``)
    to a name when one opcode stands for several PyTorch nodes.  ``reads``: which saved values
    the backward reads; ``reads_for``: the same per input, for the gradient of that input
    (None: ``reads`` for each); ``frees``: whether a second backward without ``retain_graph``
    fails.
    ``rules``: the family's rules by pass name (see the family modules); ``static``: constant
    arguments the dispatcher passes after the record's columns (flags shared rules take).
    ``python``/``numpy``: the eager forward's scalar and vectorised twins where they are plain
    functions (one-element tensors use the first, large replayed records the second).
    ``masks``: the backward reads masks, signs or tie shares from values (a create_graph
    gradient through it would freeze them).  ``graph``: the create_graph (differentiable)
    backward, ``graph(F, g, x0, x1, out, c) -> (gx0, gx1)`` in tapegrad functions ``F``.
    """

    __slots__ = ("code", "name", "reads", "frees", "variants", "family", "arity", "params",
                 "rules", "static", "python", "numpy", "masks", "first_write", "layout",
                 "graph", "check", "condition", "const", "frees_for", "hot", "reads_for")

    def __init__(self, code, name, reads, frees, variants, family, arity, params, rules,
                 static, python, numpy, masks, first_write, layout, graph, check, condition):
        self.code, self.name, self.reads, self.frees = code, name, reads, frees
        self.variants, self.family, self.arity, self.params = variants, family, arity, params
        self.rules, self.static = rules, static
        self.python, self.numpy, self.masks = python, numpy, masks
        self.first_write, self.layout, self.graph, self.check = first_write, layout, graph, check
        self.condition = condition
        self.const = None   # the module-level constant name, set by ``constants``
        # per input: whether the record frees saved values when that input needs a gradient
        # (PyTorch saves only what the gradients asked for need); None: ``frees`` alone
        self.frees_for = None
        self.hot = False   # scalar rules inlined in the sweeps (see ``declare``)
        self.reads_for = None

    def rule(self, pass_name):
        return self.rules.get(pass_name)

    def reads_when(self, grad0, grad1):
        """The ``READS_*`` flags of the values PyTorch saves when input 0 (``grad0``) and
        input 1 (``grad1``) need a gradient: of its inputs what those gradients read, and its
        output whichever reads it (PyTorch guards only its inputs' saving).  Those are the
        values a change in place may not reach before the backward."""
        if self.reads_for is None:
            return self.reads
        return ((self.reads & READS_OUT) | (self.reads_for[0] if grad0 else 0)
                | (self.reads_for[1] if grad1 else 0))

    def __repr__(self):
        return f"<op {self.code} {self.name} ({self.family})>"


OPS = {}
MAX_OPCODES = 512   # opcodes are 0 .. MAX_OPCODES - 1

# the rules each family needs, by pass (``None`` allowed where listed in ``OPTIONAL``)
REQUIRED = {
    DATA: (),
    ELEMENTWISE: ("forward", "vjp0"),
    ARRAY: ("backward", "forward", "tangent", "curvature"),
}
# passes whose rule may be None: the pass then reports the record as unsupported
OPTIONAL = ("curvature",)


def declare(code, name, *, family, reads=0, frees=None, variants=None, arity=1, params=0,
            static=(), python=None, numpy=None, masks=False, first_write=False, layout=1,
            graph=None, check=None, condition=False, hot=False, reads_for=None, **rules):
    """Register opcode ``code`` with all of its rules; returns the code.

    ``family`` decides which rules are required (``REQUIRED``); an elementwise op gives
    scalar rules (``forward``, ``vjp0`` and, with ``arity=2``, ``vjp1``; for second order
    either a scalar second derivative ``d2`` or a ``curvature`` that is an array rule,
    ``LINEAR`` or None), an array op whole-record rules.  ``params``: how many ``faux`` values an elementwise op's rules read (0 or 2).
    ``first_write``: the backward may write its inputs' first gradient (betas of 0).
    ``reads_for``: per input, the ``READS_*`` flags of the values its gradient reads (mul's
    gradient for x0 reads x1 only), where that is less than ``reads`` for each.
    ``frees``: a bool, or one per input: the saved values are freed (a second backward
    fails) only when an input marked True needs a gradient; by default, with ``reads_for``,
    the inputs whose gradient reads an input (any, if the backward reads the output).
    ``condition``: an elementwise op that reads a third value, the record ``ip`` names
    (``where``'s condition).  ``hot``: an elementwise op whose one-element records run its
    scalar rules inlined in the compiled sweeps (a few nanoseconds a record, no call: scalar
    code); every hot op adds about half a second to the first compile of each sweep on a
    fresh machine, so only everyday arithmetic is hot, and other ops' one-element records
    call their entry like larger records.  ``check``: ``check(record, fail)`` validates a record read from a tape file beyond the
    family's own checks.
    """
    if code in OPS:
        raise ValueError(f"opcode {code} declared twice")
    if family not in REQUIRED:
        raise ValueError(f"opcode {code}: unknown family {family!r}")
    missing = [p for p in REQUIRED[family] if p not in rules]
    if family == ELEMENTWISE and arity == 2 and "vjp1" not in rules:
        missing.append("vjp1")
    if family == ELEMENTWISE and "d2" not in rules and "curvature" not in rules:
        missing.append("d2 or curvature")
    if missing:
        raise ValueError(f"opcode {code} ({name}) lacks the rules {missing}")
    if family == ELEMENTWISE and params not in (0, 2):
        raise ValueError(f"opcode {code}: params is 0 or 2")
    if hot and family != ELEMENTWISE:
        raise ValueError(f"opcode {code}: only elementwise ops are hot")
    if reads_for is not None and (len(reads_for) != arity
                                  or any(f & ~reads for f in reads_for)):
        raise ValueError(f"opcode {code}: reads_for gives, per input, flags among reads")
    if not 0 <= code < MAX_OPCODES:
        raise ValueError(f"opcode {code}: opcodes are 0 to {MAX_OPCODES - 1}")
    frees_for = None
    if frees is None and reads_for is not None:
        frees = tuple(bool(f or reads & READS_OUT) for f in reads_for)
    if isinstance(frees, tuple):
        frees_for, frees = frees, any(frees)
    OPS[code] = OpInfo(code, name, reads, bool(reads) if frees is None else frees, variants,
                       family, arity, params, rules, tuple(static), python, numpy, masks,
                       first_write, layout, graph, check, condition)
    OPS[code].frees_for = frees_for
    OPS[code].hot = hot
    OPS[code].reads_for = reads_for
    return code


def constants(namespace):
    """Name each declared op after the module constant that holds its code (for messages and
    for the generated dispatchers' comments)."""
    # this module's own flags are not op names, though READS_OUT is 4 like an opcode; nor
    # are private constants (BLAS's _T is 84)
    flags = {k for k in globals() if k.isupper()}
    for key, value in namespace.items():
        if (key.isupper() and not key.startswith("_") and key not in flags
                and type(value) is int and value in OPS and OPS[value].const is None):
            OPS[value].const = key


def codes(family=None):
    """The declared opcodes, in order (of one family)."""
    return [c for c in sorted(OPS) if family is None or OPS[c].family == family]
