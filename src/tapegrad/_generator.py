"""``tapegrad.Generator``: a random number generator of its own, to pass as ``generator=``
(``rand``, ``randn``, ``randint``, ``randperm``, ``nn.init``'s random fills, ``DataLoader``,
``random_split``, samplers), as ``torch.Generator`` is; ``tapegrad.default_generator`` is the
one ``manual_seed`` seeds.

Each draws PyTorch's CPU generator's numbers (``_random_stream.py``): the same seed gives
the same float64 values as PyTorch's, and a generator's draws do not disturb the global one.
"""
import secrets

import numpy as np

from ._random_stream import RandomStream

# torch.Generator()'s seed before manual_seed (c10's default_rng_seed_val)
_DEFAULT_SEED = 67280421310721


class Generator:
    """A random number generator of its own, to pass as ``generator=`` to ``rand``,
    ``randn``, ``randint``, ``randperm``, ``nn.init``'s random fills and
    ``tapegrad.utils.data`` (``random_split``, ``RandomSampler``, ``DataLoader``).

    A new generator starts from PyTorch's default seed; ``manual_seed`` reseeds it and
    returns it.  Its numbers are PyTorch's for the same seed.

    Example:
        >>> from tapegrad.utils.data import random_split
        >>> def split(seed):
        ...     g = tg.Generator().manual_seed(seed)
        ...     return [list(part) for part in random_split(range(6), [3, 3], generator=g)]
        >>> split(42) == split(42), tg.Generator().manual_seed(42).initial_seed()
        (True, 42)
    """

    def __init__(self, device="cpu"):
        if str(device) != "cpu":
            raise RuntimeError(f"tapegrad.Generator: device {str(device)!r} is not available; "
                               "tapegrad runs on the CPU only")
        self.device = "cpu"
        self._rng = RandomStream(_DEFAULT_SEED)
        self._seed = _DEFAULT_SEED

    def manual_seed(self, seed):
        """Reseed from ``seed`` (an int; negative seeds wrap modulo 2**64); returns self."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"manual_seed expected a long, but got {type(seed).__name__}")
        self._seed = int(seed) % (1 << 64)
        self._rng.seed(self._seed)       # (in place: a replay watches this object)
        return self

    def seed(self):
        """Reseed from the operating system's entropy; returns the new seed."""
        self.manual_seed(secrets.randbits(63))
        return self._seed

    def initial_seed(self):
        return self._seed

    def get_state(self):
        """A copy of the generator's state as a uint8 tensor, for ``set_state`` (its layout
        is tapegrad's own: the twister's 624 words, its position, the kept normal and the
        seed)."""
        from .tensor import Tensor
        # and the seed, last, which PyTorch's state carries too (initial_seed() after
        # set_state is the seed of the state restored)
        raw = self._rng.to_bytes() + np.uint64(self._seed).tobytes()
        return Tensor._make(np.frombuffer(raw, dtype=np.uint8).copy())

    def set_state(self, new_state):
        """Restore a state from ``get_state()`` (this generator's or another's)."""
        from .tensor import Tensor
        v = new_state._value if isinstance(new_state, Tensor) else None
        if v is None or v.dtype != np.uint8 or v.ndim != 1:
            raise TypeError("expected a torch.ByteTensor, but got "
                            f"{type(new_state).__name__}".replace("torch.", "tapegrad."))
        raw = v.tobytes()
        try:
            if len(raw) < 8:
                raise ValueError(f"a generator state has more than 8 bytes, not {len(raw)}")
            self._rng.from_bytes(raw[:-8])
        except ValueError as e:
            raise RuntimeError(f"Invalid mt19937 state: {e}") from None
        self._seed = int(np.frombuffer(raw[-8:], dtype=np.uint64)[0])
        return self

    def __repr__(self):
        return f"<tapegrad.Generator object at {hex(id(self))}>"
