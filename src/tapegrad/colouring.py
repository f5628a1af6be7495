"""Graph colourings that compress a sparse Jacobian or Hessian into a few dense sweeps.

Columns of a Jacobian that share no row can be seeded together in one forward sweep: the
sum of their columns still shows each entry alone, since no row holds two of them.  So the
columns are coloured so that two columns sharing a row differ in colour (a distance-1
colouring of the column intersection graph), and one tangent seed per colour recovers J.
Rows are coloured likewise for reverse sweeps.

For a symmetric Hessian a star colouring uses the symmetry: an entry may be read from either
of its two places in H S, so fewer colours suffice than for a column colouring of H (a
distance-2 colouring), which is kept when it happens to need fewer.  Both recover every entry
directly (no substitution).

Colouring is greedy over a vertex order; this module tries the natural order, largest-first
and smallest-last and keeps the fewest colours (all three are cheap next to a sweep).
What is not here: acyclic colourings (fewer colours still, but recovery by substitution),
and bidirectional colouring of Jacobians (rows and columns together).
"""
import numpy as np
import scipy.sparse as sp

from ._config import kernel

__all__ = ["colour_columns", "colour_rows", "colour_symmetric", "is_column_colouring",
           "seed_matrix", "star_sources"]


@kernel
def _greedy(adj_ptr, adj_idx, order):
    """Colour the vertices in ``order`` with the smallest colour no coloured neighbour has."""
    n = order.size
    colour = np.full(n, -1, dtype=np.int64)
    # forbidden[c] == v: colour c is taken by a neighbour of v (a stamp, never cleared)
    forbidden = np.full(n + 1, -1, dtype=np.int64)
    for v in order:
        for p in range(adj_ptr[v], adj_ptr[v + 1]):
            c = colour[adj_idx[p]]
            if c >= 0:
                forbidden[c] = v
        c = 0
        while forbidden[c] == v:
            c += 1
        colour[v] = c
    return colour


@kernel
def _smallest_last(adj_ptr, adj_idx):
    """The smallest-last order: repeatedly take out a vertex of least remaining degree and
    put it before those taken out already (Matula and Beck; buckets by degree)."""
    n = adj_ptr.size - 1
    deg = np.empty(n, dtype=np.int64)
    for v in range(n):
        deg[v] = adj_ptr[v + 1] - adj_ptr[v]
    top = 0
    for v in range(n):
        top = max(top, deg[v])
    head = np.full(top + 1, -1, dtype=np.int64)
    nxt = np.full(n, -1, dtype=np.int64)
    prv = np.full(n, -1, dtype=np.int64)
    for v in range(n):
        nxt[v] = head[deg[v]]
        if head[deg[v]] >= 0:
            prv[head[deg[v]]] = v
        head[deg[v]] = v
    gone = np.zeros(n, dtype=np.bool_)
    order = np.empty(n, dtype=np.int64)
    low = 0
    for pos in range(n - 1, -1, -1):
        while head[low] < 0:
            low += 1
        v = head[low]
        head[low] = nxt[v]
        if nxt[v] >= 0:
            prv[nxt[v]] = -1
        gone[v] = True
        order[pos] = v
        for p in range(adj_ptr[v], adj_ptr[v + 1]):
            u = adj_idx[p]
            if gone[u]:
                continue
            d = deg[u]
            # unlink u from bucket d, push it onto bucket d - 1
            if prv[u] >= 0:
                nxt[prv[u]] = nxt[u]
            else:
                head[d] = nxt[u]
            if nxt[u] >= 0:
                prv[nxt[u]] = prv[u]
            deg[u] = d - 1
            prv[u] = -1
            nxt[u] = head[d - 1]
            if head[d - 1] >= 0:
                prv[head[d - 1]] = u
            head[d - 1] = u
        low = max(low - 1, 0)
    return order


@kernel
def _greedy_star(adj_ptr, adj_idx, order):
    """A star colouring, greedy over ``order`` (Gebremedhin, Manne and Pothen 2005, their
    first algorithm): neighbours differ, and every path on four vertices gets at least three
    colours, so each two-coloured part of the graph is a star."""
    n = order.size
    colour = np.full(n, -1, dtype=np.int64)
    forbidden = np.full(n + 1, -1, dtype=np.int64)
    for v in order:
        for p in range(adj_ptr[v], adj_ptr[v + 1]):
            w = adj_idx[p]
            if colour[w] >= 0:
                forbidden[colour[w]] = v
            for q in range(adj_ptr[w], adj_ptr[w + 1]):
                x = adj_idx[q]
                if x == v or colour[x] < 0:
                    continue
                if colour[w] < 0:
                    # v - w - x with w still open: v must not repeat x's colour
                    forbidden[colour[x]] = v
                    continue
                # v - w - x - y with y coloured like w: v taking x's colour would make the
                # path two-coloured
                for t in range(adj_ptr[x], adj_ptr[x + 1]):
                    y = adj_idx[t]
                    if y != w and colour[y] == colour[w]:
                        forbidden[colour[x]] = v
                        break
        c = 0
        while forbidden[c] == v:
            c += 1
        colour[v] = c
    return colour


def _adjacency(pattern):
    """Adjacency (CSR, no self loops) of a symmetric pattern's graph."""
    g = sp.csr_matrix(pattern, dtype=bool).astype(np.int8).tocsr()
    g.setdiag(0)
    g.eliminate_zeros()
    g.sort_indices()
    return g.indptr.astype(np.int64), g.indices.astype(np.int64)


def star_sources(pattern, colours):
    """Where each stored entry (i, j) of a symmetric pattern is read from H S when ``colours``
    is a star colouring: (colour row, entry) pairs into the compressed product laid out as
    (colours, n), i.e. H[i, j] = HS[c, e].  Entry (i, j) is H S's entry (i, colour of j) when
    j is the only neighbour of i in its colour, else (by symmetry) H S's entry (j, colour
    of i).  None when neither holds for some entry: not a star colouring of this pattern."""
    p = sp.csr_matrix(pattern, dtype=bool)
    p.sort_indices()
    n = p.shape[0]
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(p.indptr))
    cols = p.indices.astype(np.int64)
    colours = np.asarray(colours, dtype=np.int64)
    k = int(colours.max()) + 1 if colours.size else 1
    # how many of row i's entries have each colour
    per_colour = np.bincount(rows * k + colours[cols], minlength=n * k)
    alone = per_colour[rows * k + colours[cols]] == 1
    flipped = per_colour[cols * k + colours[rows]] == 1
    if not np.all(alone | flipped):
        return None
    src_colour = np.where(alone, colours[cols], colours[rows])
    src_entry = np.where(alone, rows, cols)
    return src_colour, src_entry


def _intersection_graph(pattern):
    """Adjacency (CSR, no self loops) of the columns of ``pattern``: two columns are
    neighbours when some row holds both."""
    p = sp.csr_matrix(pattern, dtype=bool).astype(np.int32)
    g = (p.T @ p).tocsr()
    g.setdiag(0)
    g.eliminate_zeros()
    g.sort_indices()
    return g.indptr.astype(np.int64), g.indices.astype(np.int64)


def _best_colouring(adj_ptr, adj_idx):
    n = adj_ptr.size - 1
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    degree = np.diff(adj_ptr)
    orders = (np.arange(n, dtype=np.int64),
              np.argsort(-degree, kind="stable").astype(np.int64),
              _smallest_last(adj_ptr, adj_idx))
    best = None
    for order in orders:
        colour = _greedy(adj_ptr, adj_idx, order)
        if best is None or colour.max() < best.max():
            best = colour
    return best


def colour_columns(pattern):
    """Colours of the columns of a sparsity pattern (any ``scipy.sparse`` matrix or array)
    such that no two columns sharing a row have one colour: an int array, colours 0..k-1.

    Example:
        >>> import scipy.sparse as sp
        >>> tg.colouring.colour_columns(sp.eye(3) + sp.eye(3, k=1)).tolist()
        [0, 1, 0]
    """
    return _best_colouring(*_intersection_graph(pattern))


def colour_rows(pattern):
    """Colours of the rows of a pattern such that no two rows sharing a column have one
    colour (the column colouring of the transpose)."""
    return colour_columns(sp.csr_matrix(pattern).T)


def colour_symmetric(pattern):
    """Colours of the columns of a symmetric pattern for direct recovery from H S: the
    fewer-coloured of a star colouring (which uses the symmetry: each entry is read from
    H S at (i, colour of j) or at (j, colour of i), see ``star_sources``) and a distance-2
    colouring (the column colouring of H, each entry read at (i, colour of j)).

    Example:
        >>> import scipy.sparse as sp
        >>> star = sp.csr_matrix(np.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 1, 0],
        ...                                [1, 0, 0, 1]]))
        >>> int(tg.colouring.colour_symmetric(star).max()) + 1   # distance-2 needs 4
        2
    """
    distance_two = colour_columns(pattern)
    adj_ptr, adj_idx = _adjacency(pattern)
    n = adj_ptr.size - 1
    if n == 0:
        return distance_two
    degree = np.diff(adj_ptr)
    best = distance_two
    for order in (np.arange(n, dtype=np.int64),
                  np.argsort(-degree, kind="stable").astype(np.int64),
                  _smallest_last(adj_ptr, adj_idx)):
        star = _greedy_star(adj_ptr, adj_idx, order)
        # the greedy rule guarantees a star colouring; recovery is checked anyway, so that
        # a flaw here costs colours, never a wrong entry
        if star.max() < best.max() and star_sources(pattern, star) is not None:
            best = star
    return best


def is_column_colouring(pattern, colours):
    """Whether no two columns sharing a row of ``pattern`` have the same colour."""
    p = sp.coo_matrix(pattern)
    colours = np.asarray(colours, dtype=np.int64)
    if colours.shape != (p.shape[1],) or (colours.size and colours.min() < 0):
        return False
    mask = p.data != 0
    rows, cols = p.row[mask].astype(np.int64), p.col[mask].astype(np.int64)
    # distinct (row, colour) pairs as many as distinct (row, column) pairs
    k = int(colours.max()) + 1 if colours.size else 1
    pairs = np.unique(rows * p.shape[1] + cols).size
    return np.unique(rows * k + colours[cols]).size == pairs


def seed_matrix(colours):
    """The n x k 0/1 matrix S with S[j, colours[j]] = 1 (one seed per colour)."""
    n = colours.size
    k = int(colours.max()) + 1 if n else 0
    s = np.zeros((n, k))
    s[np.arange(n), colours] = 1.0
    return s


from ._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
