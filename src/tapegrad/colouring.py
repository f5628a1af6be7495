"""Graph colourings that compress a sparse Jacobian or Hessian into a few dense sweeps.

Columns of a Jacobian that share no row can be seeded together in one forward sweep: the
sum of their columns still shows each entry alone, since no row holds two of them.  So the
columns are coloured so that two columns sharing a row differ in colour (a distance-1
colouring of the column intersection graph), and one tangent seed per colour recovers J.
Rows are coloured likewise for reverse sweeps.

For a symmetric Hessian this module colours the columns of H the same way (a distance-2
colouring of H's adjacency graph), which recovers every entry directly from H S.  It is not
yet a star colouring, which would use the symmetry to need fewer colours (e.g. on 2-D
stencils); the direct recovery is the simple and safe one.

Colouring is greedy over a vertex order; this module tries the natural order, largest-first
and smallest-last and keeps the fewest colours (all three are cheap next to a sweep).
"""
import numpy as np
import scipy.sparse as sp

from ._config import kernel

__all__ = ["colour_columns", "colour_rows", "colour_symmetric", "is_column_colouring",
           "seed_matrix"]


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
    """Colours of the columns of a symmetric pattern for direct recovery from H S: a
    distance-2 colouring (the column colouring of H).  Not a star colouring yet."""
    return colour_columns(pattern)


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
