"""The random numbers of PyTorch's CPU generator, drawn the way its kernels draw them.

A seeded PyTorch program (``manual_seed(0)``, then ``randn``, ``nn.Linear``'s init,
``dropout``, a shuffled ``DataLoader``) prints the same float64 numbers here: the stream is
a 32-bit Mersenne Twister (NumPy's ``MT19937`` bit generator, its state set as
``std::mt19937(seed)`` sets it, which is how PyTorch seeds its own), and each draw turns its
words into values with PyTorch's formulas, in PyTorch's order:

- a double in [0, 1) takes two words, the first as the high half of 64 bits, and keeps 53
  of them (``rand``, ``uniform_``, ``bernoulli``, ``exponential_``, ...);
- ``normal_`` of 16 values or more fills the tensor with uniforms and turns each block of
  16 into normals by Box-Muller (the last, partial block is drawn again as a whole block);
  fewer than 16 values are drawn one at a time, two uniforms giving a pair whose second
  value is kept for the next draw (also across calls, until the next ``manual_seed``);
- integers in a range take one word (two for ranges of 2**32 or more), modulo the range;
- ``randperm`` swaps each position with one drawn from the rest (Fisher-Yates from the
  front, one word a step).

PyTorch's kernels are compiled for the CPU they run on; on one with fused multiply-add (any
x86 CPU with AVX2) ``x * scale + shift`` is rounded once, so the affine steps here are an exact
``fma`` (NumPy has none: ``fma`` below builds it from exact products and sums).
Transcendental functions are the C library's (``log``, ``sin``, ``cos``...), as PyTorch's
scalar kernels call them; NumPy's are used where they give the same bits (checked on first
use), the C library's through ``math`` one value at a time where they do not.
"""
import copy
import math

import numpy as np

from ._config import kernel

_MASK32 = 0xFFFFFFFF
_MASK53 = np.uint64((1 << 53) - 1)
_TO_UNIT = 2.0 ** -53
_NORMAL_BLOCK = 16


def _two_sum(a, b):
    """(s, t) with s = a + b rounded and s + t = a + b exactly (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


_SPLITTER = 134217729.0     # 2**27 + 1 (Veltkamp)
_FMA_CHUNK = 1 << 13
_FMA_IN_PYTHON = 32


def _split(a):
    c = _SPLITTER * a
    hi = c - (c - a)
    return hi, a - hi


def fma(x, a, b):
    """x * a + b rounded once, for an array x and numbers a and b (NumPy has no fma).

    The product is exact as p + e (Dekker); then s + t = p + b, v + w = t + e and z + r = s +
    v exactly (2Sum), so the exact value is z + r + w with z = round(s + v).  z is its
    correct rounding unless s + v lies exactly halfway between z and its neighbour towards r,
    where w, beyond the last bit, decides: the rest (s + v, r, w) are multiples of v's last
    place, so no other halfway point lies between s + v and the exact value.  Exact for
    products without overflow or underflow, which the draws' values and scales are."""
    x = np.asarray(x, dtype=np.float64)
    if a == 1.0 and b == 0.0:
        return x + 0.0          # (fma(-0.0, 1, 0) is +0.0)
    a, b = float(a), float(b)
    if x.size <= _FMA_IN_PYTHON:
        # (a dozen NumPy calls cost more than a few values done one at a time)
        return np.array([_fma_number(v, a, b) for v in x.reshape(-1).tolist()],
                        dtype=np.float64).reshape(x.shape)
    with np.errstate(all="ignore"):     # (inf and NaN go through as IEEE says)
        return _fma_array(x, a, b)


def _fma_array(x, a, b):
    if x.size > _FMA_CHUNK:
        # in pieces: the dozen temporaries of a piece stay in the cache (and NumPy reuses
        # their memory) where those of a whole large array cost a page fault a page
        flat = x.reshape(-1)
        out = np.empty_like(flat)
        for i in range(0, flat.size, _FMA_CHUNK):
            out[i:i + _FMA_CHUNK] = _fma_array(flat[i:i + _FMA_CHUNK], a, b)
        return out.reshape(x.shape)
    return _fma_exact(x, a, b)


def fma_elementwise(x, a, b):
    """x * a + b rounded once, element by element, for arrays (or numbers) that broadcast:
    the contraction a compiled kernel makes of a product and a sum."""
    x, a, b = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (x, a, b)))
    flat = [v.reshape(-1) for v in (x, a, b)]
    out = np.empty(x.size)
    with np.errstate(all="ignore"):
        for i in range(0, x.size, _FMA_CHUNK):
            out[i:i + _FMA_CHUNK] = _fma_exact(*(v[i:i + _FMA_CHUNK] for v in flat))
    return out.reshape(x.shape)


def _fma_exact(x, a, b):
    """The rounding argument of ``fma``, for x an array and a, b numbers or arrays like x."""
    p = x * a
    xh, xl = _split(x)
    ah, al = _split(np.asarray(a, dtype=np.float64))
    e = ((xh * ah - p) + xh * al + xl * ah) + xl * al
    s, t = _two_sum(p, b)
    v, w = _two_sum(t, e)
    z, r = _two_sum(s, v)
    toward = np.nextafter(z, np.copysign(np.inf, r))
    halfway = (r != 0.0) & (np.abs(r) * 2.0 == np.abs(toward - z)) & \
        (w != 0.0) & ((w > 0.0) == (r > 0.0))
    if halfway.any():
        z = np.where(halfway, toward, z)
    finite = np.isfinite(p) & np.isfinite(b)
    if not (finite.all() and np.isfinite(a).all()):
        z = np.where(finite, z, p + b)      # (inf and NaN as IEEE says)
    return z


def _fma_number(x, a, b):
    """fma for Python floats: the product split exactly into p + e (Dekker), and the sum
    p + e + b rounded once by ``math.fsum``."""
    p = x * a
    if not (math.isfinite(p) and math.isfinite(b)):
        return p + b
    c = _SPLITTER * x
    xh = c - (c - x)
    xl = x - xh
    c = _SPLITTER * a
    ah = c - (c - a)
    al = a - ah
    e = ((xh * ah - p) + xh * al + xl * ah) + xl * al
    return math.fsum((p, e, b))


def _libm_agrees():
    """Whether NumPy's float64 log, log1p, sin, cos and tan give the C library's bits here
    (they call it on most CPUs; on some, NumPy's own vectorised versions differ in the last
    bit), judged on values spread over the ranges the draws use."""
    u = np.linspace(1e-9, 1.0 - 1e-9, 513)
    t = 2.0 * math.pi * u
    pairs = ((np.log, math.log, u), (np.log1p, math.log1p, -u), (np.sin, math.sin, t),
             (np.cos, math.cos, t), (np.tan, math.tan, math.pi * (u - 0.5)))
    return all(np.array_equal(f(x), np.array([g(v) for v in x.tolist()]))
               for f, g, x in pairs)


_LIBM = []


def _libm():
    """(log, log1p, sin, cos, tan) over arrays with the C library's bits: NumPy's where they
    agree (decided on first use, not at import), else the C library's one value at a time."""
    if not _LIBM:
        if _libm_agrees():
            _LIBM.extend((np.log, np.log1p, np.sin, np.cos, np.tan))
        else:
            def elementwise(fn):
                return lambda x: np.fromiter(map(fn, np.asarray(x).reshape(-1).tolist()),
                                             np.float64, np.size(x)).reshape(np.shape(x))
            _LIBM.extend(elementwise(f) for f in (math.log, math.log1p, math.sin, math.cos,
                                                  math.tan))
    return _LIBM


_TWO_PI = 2.0 * math.pi


def _normal_blocks(u, n, std, mean):
    """normal_ of n >= 16 values from n uniforms (and 16 more when n is not a multiple of
    16, which replace the last 16): over each block of 16, Box-Muller of 1 - u[j] and
    u[j + 8] gives values j and j + 8."""
    d = u[:n].copy()
    full = n // 16
    blocks = d[:full * 16].reshape(full, 2, 8)
    if n % 16:
        # the last, partial block is drawn again as a whole one, after the full blocks
        # were computed from the values it overwrites
        last = u[n:].reshape(1, 2, 8)
        blocks = np.concatenate([blocks, last])
    log, _, sin, cos, _ = _libm()
    radius = np.sqrt(-2.0 * log(1.0 - blocks[:, 0]))
    theta = _TWO_PI * blocks[:, 1]
    out = np.empty_like(blocks)
    out[:, 0] = fma(radius * cos(theta), std, mean)
    out[:, 1] = fma(radius * sin(theta), std, mean)
    if n % 16:
        d[:full * 16] = out[:full].reshape(-1)
        d[n - 16:] = out[full].reshape(-1)
        return d
    return out.reshape(-1)


def _normal_pairs(u, n, std, mean, kept):
    """n normals drawn one at a time: ``kept`` (NaN: none) first, then each pair of uniforms
    (u1, u2) gives r cos(t) and r sin(t); returns them and the second value of a last pair
    that was only half used (NaN otherwise)."""
    _, log1p, sin, cos, _ = _libm()
    first = [] if math.isnan(kept) or not n else [kept]
    r = np.sqrt(-2.0 * log1p(-u[1::2]))
    theta = _TWO_PI * u[0::2]
    pairs = np.empty(2 * r.size)
    pairs[0::2] = r * cos(theta)
    pairs[1::2] = r * sin(theta)
    values = np.concatenate([first, pairs])
    kept = float(values[n]) if values.size > n else math.nan
    return fma(values[:n], std, mean), kept


# below this many positions randperm's swaps run in Python: a DataLoader's shuffle of a small
# dataset should not wait for a compile
_PERMUTE_IN_PYTHON = 1 << 16


@kernel
def _shuffle_from_front(words, n):
    """randperm(n): position i swaps with i + (word % (n - i)), i = 0 .. n - 2."""
    r = np.arange(n)
    for i in range(n - 1):
        z = i + np.int64(words[i] % np.uint64(n - i))
        r[i], r[z] = r[z], r[i]
    return r


def _state_key(seed):
    """The 624 words std::mt19937 starts from for ``seed`` (its low 32 bits, as PyTorch
    seeds its engine)."""
    x = seed & _MASK32
    key = [x]
    for i in range(1, 624):
        x = (1812433253 * (x ^ (x >> 30)) + i) & _MASK32
        key.append(x)
    return np.array(key, dtype=np.uint32)


class RandomStream:
    """One generator's state: the Mersenne Twister and the normal kept from the last pair.
    Its draws are named after the NumPy ``Generator`` methods tapegrad used before
    (``random``, ``standard_normal``, ``integers``, ...) and compute PyTorch's values."""

    __slots__ = ("bit_generator", "kept_normal")

    def __init__(self, seed):
        self.bit_generator = np.random.MT19937()
        self.seed(seed)

    def seed(self, seed):
        self.bit_generator.state = {"bit_generator": "MT19937",
                                    "state": {"key": _state_key(int(seed)), "pos": 624}}
        self.kept_normal = math.nan

    # --- state -------------------------------------------------------------------------
    def get_state(self):
        return (copy.deepcopy(self.bit_generator.state), self.kept_normal)

    def set_state(self, state):
        mt, kept = state
        self.bit_generator.state = copy.deepcopy(mt)
        self.kept_normal = float(kept)

    def fingerprint(self):
        """Something that changes with every draw (a replay tells by it whether a recorded
        call drew numbers)."""
        st = self.bit_generator.state["state"]
        return (st["pos"], st["key"].tobytes(), repr(self.kept_normal))

    def to_bytes(self):
        st = self.bit_generator.state["state"]
        return (st["key"].astype("<u4").tobytes() + np.int64(st["pos"]).tobytes()
                + np.float64(self.kept_normal).tobytes())

    def from_bytes(self, raw):
        if len(raw) != 624 * 4 + 16:
            raise ValueError(f"a generator state has {624 * 4 + 16} bytes, not {len(raw)}")
        key = np.frombuffer(raw[:2496], dtype="<u4").astype(np.uint32)
        pos = int(np.frombuffer(raw[2496:2504], dtype=np.int64)[0])
        if not 0 <= pos <= 624:
            raise ValueError("not a generator state")
        self.bit_generator.state = {"bit_generator": "MT19937",
                                    "state": {"key": key, "pos": pos}}
        self.kept_normal = float(np.frombuffer(raw[2504:], dtype=np.float64)[0])

    # --- words ---------------------------------------------------------------------------
    def words(self, n):
        """n 32-bit words (uint64)."""
        return self.bit_generator.random_raw(n) if n else np.zeros(0, np.uint64)

    def words64(self, n):
        w = self.words(2 * n)
        return (w[0::2] << np.uint64(32)) | w[1::2]

    def float32_uniforms(self, n):
        """n draws of U[0, 1) as PyTorch makes float32 ones: a 32-bit word each, its low 24
        bits scaled by 2**-24 (exact in float64)."""
        return (self.words(n) & np.uint64(0xFFFFFF)).astype(np.float64) * 2.0 ** -24

    def _unit(self, n):
        return (self.words64(n) & _MASK53).astype(np.float64) * _TO_UNIT

    # --- draws ---------------------------------------------------------------------------
    def random(self, shape=()):
        """Uniform in [0, 1): ``rand``."""
        shape = _shape(shape)
        return self._unit(math.prod(shape)).reshape(shape)

    def uniform(self, low=0.0, high=1.0, shape=()):
        """``uniform_(low, high)``: u * (high - low) + low."""
        shape = _shape(shape)
        u = self._unit(math.prod(shape))
        return fma(u, float(high) - float(low), float(low)).reshape(shape)

    def standard_normal(self, shape=()):
        return self.normal(0.0, 1.0, shape)

    def normal(self, mean=0.0, std=1.0, shape=()):
        """``normal_(mean, std)`` of a contiguous tensor of ``shape``."""
        shape = _shape(shape)
        n = math.prod(shape)
        mean, std = float(mean), float(std)
        if n >= _NORMAL_BLOCK:
            # (the uniforms of the whole tensor, then a block's more for a partial last one)
            u = self._unit(n + (_NORMAL_BLOCK if n % _NORMAL_BLOCK else 0))
            return _normal_blocks(u, n, std, mean).reshape(shape)
        return self.normals_one_at_a_time(n, mean, std).reshape(shape)

    def normals_one_at_a_time(self, n, mean=0.0, std=1.0):
        fresh = n - (0 if math.isnan(self.kept_normal) or not n else 1)
        u = self._unit(2 * ((fresh + 1) // 2))
        out, self.kept_normal = _normal_pairs(u, n, float(std), float(mean), self.kept_normal)
        return out

    def lognormal(self, mean, std, shape=()):
        shape = _shape(shape)
        normals = self.normals_one_at_a_time(math.prod(shape), mean, std)
        # exp of each draw by the C library's exp, as PyTorch's serial kernel takes it:
        # NumPy's vectorised exp (AVX-512 where the CPU has it) differs from it in the last
        # bit for some values
        return np.array([math.exp(v) for v in normals.tolist()],
                        dtype=np.float64).reshape(shape)

    def integers(self, low, high, size=(), dtype=np.int64):
        """``randint(low, high)``: (word % range) + low, a 64-bit word for ranges of 2**32
        or more."""
        shape = _shape(size)
        n = math.prod(shape)
        span = int(high) - int(low)
        w = self.words64(n) if span >= 1 << 32 else self.words(n)
        # (word % range) + low in 64-bit unsigned arithmetic, read as signed
        drawn = (w % np.uint64(span)) + np.uint64(int(low) & 0xFFFFFFFFFFFFFFFF)
        return drawn.view(np.int64).astype(dtype).reshape(shape)

    def full_range(self, shape, dtype):
        """``random_()`` without bounds, in ``dtype``: a 64-bit word modulo 2**63 (int64) or
        2**53 + 1 (float64, whose integers are exact up to 2**53); a 32-bit word modulo the
        largest value + 1 for narrower integers, its lowest bit for bool."""
        shape = _shape(shape)
        n = math.prod(shape)
        dtype = np.dtype(dtype)
        if dtype == np.int64 or dtype.kind == "f":
            top = (1 << 63) if dtype == np.int64 else (1 << 53) + 1
            return (self.words64(n) % np.uint64(top)).astype(dtype).reshape(shape)
        top = 2 if dtype.kind == "b" else int(np.iinfo(dtype).max) + 1
        return (self.words(n) % np.uint64(top)).astype(dtype).reshape(shape)

    def permutation(self, n):
        """``randperm(n)``."""
        n = int(n)
        if n <= 1:
            return np.arange(n)
        words = self.words(n - 1)
        if n >= _PERMUTE_IN_PYTHON:
            return _shuffle_from_front(words, n)
        r = list(range(n))
        for i, w in enumerate(words.tolist()):
            z = i + w % (n - i)
            r[i], r[z] = r[z], r[i]
        return np.array(r, dtype=np.int64)

    def bernoulli(self, p, shape=()):
        """1.0 where a uniform draw is below p (a number, or an array broadcast to shape)."""
        return (self.random(shape) < p).astype(np.float64)

    def exponential(self, lambd, shape=()):
        shape = _shape(shape)
        log1p = _libm()[1]
        return (-1.0 / float(lambd)) * log1p(-self._unit(math.prod(shape))).reshape(shape)

    def cauchy(self, median, sigma, shape=()):
        shape = _shape(shape)
        t = _libm()[4](math.pi * (self._unit(math.prod(shape)) - 0.5))
        return fma(t, float(sigma), float(median)).reshape(shape)

    def geometric(self, p, shape=()):
        shape = _shape(shape)
        u = self._unit(math.prod(shape))
        return np.ceil(_libm()[0](u) / math.log1p(-float(p))).reshape(shape)


def _shape(shape):
    if shape is None:
        return ()
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(d) for d in shape)
