"""Hypothesis strategies for the op tests.

Shapes include 0-d tensors and size-1 sides; values are float64 and restricted to where the
op under test is smooth enough for central differences (``eps = 1e-6``): positive for
log/sqrt, away from 0 for abs/relu and divisors, away from the bounds for clamp, well
separated for max/min so that no tie is within reach of a finite-difference step.
"""
import sys
from pathlib import Path

import numpy as np
from hypothesis import assume, strategies as st
from hypothesis.extra import numpy as hnp

try:
    import tapegrad  # noqa: F401
except ModuleNotFoundError as exc:  # a source checkout that is not installed
    if exc.name != "tapegrad":
        raise
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

MAX_DIMS = 3
MAX_SIDE = 4
# separation kept between a value and any kink of the op: far larger than a difference step
GAP = 0.05


# ---------------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------------
def shapes(min_dims=0, max_dims=MAX_DIMS, min_side=1, max_side=MAX_SIDE):
    """Tensor shapes; ``()`` and sides of length 1 come up often."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def broadcast_shapes(num_shapes=2, min_dims=0, max_dims=MAX_DIMS, max_side=MAX_SIDE):
    """``num_shapes`` shapes that broadcast together, as a tuple of tuples."""
    return hnp.mutually_broadcastable_shapes(
        num_shapes=num_shapes, min_dims=min_dims, max_dims=max_dims, min_side=1,
        max_side=max_side).map(lambda b: b.input_shapes)


@st.composite
def squashed(draw, shape):
    """A shape that broadcasts to ``shape`` without widening it: leading dims dropped, some
    sides set to 1."""
    keep = draw(st.integers(0, len(shape)))
    tail = shape[len(shape) - keep:]
    return tuple(1 if draw(st.booleans()) else s for s in tail)


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------
def reals(low=-3.0, high=3.0):
    """Finite float64 values in [low, high], no subnormals."""
    return st.floats(low, high, allow_nan=False, allow_infinity=False, allow_subnormal=False,
                     width=64)


def positive(low=0.1, high=4.0):
    return reals(low, high)


def nonzero(low=GAP, high=3.0):
    """Values with ``low <= |x| <= high``: away from the kink or pole at 0."""
    return st.one_of(reals(low, high), reals(-high, -low))


def avoiding(points, low=-3.0, high=3.0, gap=GAP):
    """Values in [low, high] at least ``gap`` away from every one of ``points``."""
    points = tuple(float(p) for p in points)
    return reals(low, high).filter(lambda v: all(abs(v - p) >= gap for p in points))


def arrays(shape, elements=None):
    """float64 arrays of ``shape`` (a tuple or a strategy) with the given elements."""
    return hnp.arrays(np.float64, shape, elements=elements if elements is not None else reals())


@st.composite
def distinct(draw, shape, low=-3.0, high=3.0, magnitudes=False):
    """An array whose values are pairwise at least ``GAP`` apart, in random order.

    With ``magnitudes`` the absolute values are distinct and at least ``GAP`` from 0 (for
    the inf-norm), signs drawn separately.
    """
    if not isinstance(shape, tuple):
        shape = draw(shape)
    n = int(np.prod(shape, dtype=np.int64))
    if n == 0:
        return np.zeros(shape)
    order = np.array(draw(st.permutations(range(n))), dtype=np.float64)
    jitter = np.array(draw(st.lists(reals(0.0, 0.5), min_size=n, max_size=n)))
    if magnitudes:
        step = (high - GAP) / n
        values = GAP + (order + jitter) * step
        signs = np.array(draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=n, max_size=n)))
        values = values * signs
    else:
        step = (high - low) / n
        values = low + (order + jitter) * step
    # pairwise gaps are at least step/2 >= (high - low) / (2 * 64)
    return values.reshape(shape)


@st.composite
def separated_pair(draw, shapes_strategy=None):
    """Two broadcastable arrays that differ by at least ``GAP`` wherever they meet.

    ``a`` takes fractional parts in [0, 0.4], ``b`` in [0.5, 0.9] above integers drawn in
    [-3, 3]; ``a - b`` then always lies at least 0.1 away from 0.
    """
    sa, sb = draw(shapes_strategy if shapes_strategy is not None else broadcast_shapes())
    ints = st.integers(-3, 2).map(float)
    a = draw(arrays(sa, ints)) + draw(arrays(sa, reals(0.0, 0.4)))
    b = draw(arrays(sb, ints)) + draw(arrays(sb, reals(0.5, 0.9)))
    return a, b


def pair(elements_a=None, elements_b=None, shapes_strategy=None):
    """Two broadcastable arrays with the given elements."""
    @st.composite
    def build(draw):
        sa, sb = draw(shapes_strategy if shapes_strategy is not None else broadcast_shapes())
        return draw(arrays(sa, elements_a)), draw(arrays(sb, elements_b))
    return build()


# ---------------------------------------------------------------------------------------------
# Call forms
# ---------------------------------------------------------------------------------------------
@st.composite
def dims(draw, ndim, allow_none=True, allow_tuple=True, allow_empty_tuple=False):
    """A reduction ``dim`` argument for a tensor of ``ndim`` dimensions: None, an int
    (possibly negative) or a tuple/list of distinct dims in any order and sign."""
    kinds = ["int"]
    if allow_none:
        kinds.append("none")
    if allow_tuple and ndim >= 1:
        kinds.append("tuple")
    kind = draw(st.sampled_from(kinds))
    span = max(ndim, 1)  # a 0-d tensor accepts dim 0 and -1
    if kind == "none":
        return None
    if kind == "int":
        d = draw(st.integers(0, span - 1))
        return d - span if draw(st.booleans()) else d
    chosen = draw(st.lists(st.integers(0, ndim - 1), unique=True,
                           min_size=0 if allow_empty_tuple else 1, max_size=ndim))
    signed = [d - ndim if draw(st.booleans()) else d for d in chosen]
    return tuple(signed) if draw(st.booleans()) else list(signed)


def reduced_count(shape, dim):
    """How many elements one output element of a reduction over ``dim`` gathers."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return int(np.prod(shape, dtype=np.int64))
    if not shape:
        return 1
    ds = [dim] if isinstance(dim, int) else list(dim)
    return int(np.prod([shape[d % len(shape)] for d in ds], dtype=np.int64))


@st.composite
def one_dim(draw, ndim):
    """A single dim for an op on a tensor of ``ndim`` dimensions (0-d: 0 or -1)."""
    span = max(ndim, 1)
    d = draw(st.integers(0, span - 1))
    return d - span if draw(st.booleans()) else d


@st.composite
def index_keys(draw, shape):
    """A PyTorch indexing key for a tensor of ``shape``.

    Mixes ints (negative too), slices (any start/stop, positive steps), None, one Ellipsis,
    and advanced indices: integer arrays (with repeats, so gradients scatter-add) that all
    share one shape, or a single boolean mask.  Advanced indices come as lists or as
    NumPy arrays; the tests turn them into each library's tensors where needed.
    """
    nd = len(shape)
    parts = []
    d = 0
    ellipsis_used = False
    advanced = draw(st.sampled_from(["none", "none", "ints", "mask"]))
    adv_shape = draw(hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=3))
    mask_used = False
    while True:
        options = ["none_idx", "stop"]
        if d < nd:
            options += ["int", "slice", "slice"]
            if advanced == "ints":
                options.append("array")
            if advanced == "mask" and not mask_used:
                options.append("mask")
        if not ellipsis_used:
            options.append("ellipsis")
        kind = draw(st.sampled_from(options))
        if kind == "stop" or len(parts) >= 6:
            break
        if kind == "none_idx":
            parts.append(None)
        elif kind == "ellipsis":
            ellipsis_used = True
            # the ellipsis stands for the dims the rest of the key leaves over; choose
            # how many by how many parts are drawn after it
            parts.append(Ellipsis)
            d = max(d, nd - draw(st.integers(0, nd - d)))
        elif kind == "int":
            s = shape[d]
            parts.append(draw(st.integers(-s, s - 1)))
            d += 1
        elif kind == "slice":
            s = shape[d]
            bound = st.one_of(st.none(), st.integers(-s - 2, s + 2))
            step = draw(st.one_of(st.none(), st.integers(1, 3)))
            parts.append(slice(draw(bound), draw(bound), step))
            d += 1
        elif kind == "array":
            s = shape[d]
            idx = draw(hnp.arrays(np.int64, adv_shape, elements=st.integers(-s, s - 1)))
            # nested lists as keys are deprecated in PyTorch (it warns): only flat ones
            parts.append(idx.tolist() if idx.ndim == 1 and draw(st.booleans()) else idx)
            d += 1
        else:
            m = draw(st.integers(1, nd - d))
            mask = draw(hnp.arrays(np.bool_, shape[d:d + m]))
            parts.append(mask if m > 1 or draw(st.booleans()) else mask.tolist())
            mask_used = True
            d += m
    # a key that stops early leaves the ellipsis more dims than planned, which can move an
    # int onto a smaller dim: both libraries reject such keys, so they are not drawn
    try:
        np.zeros(shape)[tuple(parts)]
    except IndexError:
        assume(False)
    if len(parts) == 1 and draw(st.booleans()):
        return parts[0]
    return tuple(parts)


def key_for(lib, key):
    """``key`` with its NumPy arrays turned into tensors of ``lib`` (tapegrad or torch)."""
    def conv(k):
        if isinstance(k, np.ndarray):
            return lib.tensor(k)
        return k
    if isinstance(key, tuple):
        return tuple(conv(k) for k in key)
    return conv(key)


@st.composite
def matmul_shapes(draw):
    """Shapes (sa, sb) that ``matmul`` accepts, with the form's name.

    Forms: dot (1-D @ 1-D), mv (2-D @ 1-D), vm (1-D @ 2-D), mm (2-D @ 2-D), batched with
    broadcast batch dims (N-D @ N-D), N-D @ 2-D, 2-D @ N-D, N-D @ 1-D and 1-D @ N-D.
    """
    side = st.integers(1, MAX_SIDE)
    m, k, n = draw(side), draw(side), draw(side)
    form = draw(st.sampled_from(["dot", "mv", "vm", "mm", "batched", "nd@2d", "2d@nd",
                                 "nd@1d", "1d@nd"]))
    batch_a, batch_b = draw(broadcast_shapes(min_dims=1, max_dims=2, max_side=3))
    if form == "dot":
        return form, (k,), (k,)
    if form == "mv":
        return form, (m, k), (k,)
    if form == "vm":
        return form, (k,), (k, n)
    if form == "mm":
        return form, (m, k), (k, n)
    if form == "batched":
        return form, batch_a + (m, k), batch_b + (k, n)
    if form == "nd@2d":
        return form, batch_a + (m, k), (k, n)
    if form == "2d@nd":
        return form, (m, k), batch_b + (k, n)
    if form == "nd@1d":
        return form, batch_a + (m, k), (k,)
    return form, (k,), batch_b + (k, n)
