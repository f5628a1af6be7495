"""``tapegrad.Generator``: a random number generator of its own, to pass as ``generator=``
(``rand``, ``randn``, ``randint``, ``randperm``, ``nn.init``'s random fills, ``DataLoader``,
``random_split``, samplers), as ``torch.Generator`` is.

It draws from a NumPy PCG64 generator, so its numbers are not PyTorch's (no program can get
PyTorch's random numbers without PyTorch's generator); what carries over is the contract:
the same seed gives the same numbers, and a generator's draws do not disturb the global
generator behind ``tapegrad.manual_seed``.
"""
import copy
import secrets

import numpy as np

# torch.Generator()'s seed before manual_seed (c10's default_rng_seed_val)
_DEFAULT_SEED = 67280421310721


class Generator:
    """A random number generator of its own, to pass as ``generator=`` to ``rand``,
    ``randn``, ``randint``, ``randperm``, ``nn.init``'s random fills and
    ``tapegrad.utils.data`` (``random_split``, ``RandomSampler``, ``DataLoader``).

    A new generator starts from a fixed seed; ``manual_seed`` reseeds it and returns it.
    It draws with NumPy's PCG64, so the same seed gives other orders than PyTorch's.

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
        self.manual_seed(_DEFAULT_SEED)

    def manual_seed(self, seed):
        """Reseed from ``seed`` (an int; negative seeds wrap modulo 2**64); returns self."""
        self._seed = int(seed) % (1 << 64)
        self._rng = np.random.default_rng(self._seed)
        return self

    def seed(self):
        """Reseed from the operating system's entropy; returns the new seed."""
        self.manual_seed(secrets.randbits(63))
        return self._seed

    def initial_seed(self):
        return self._seed

    def get_state(self):
        """An opaque copy of the generator's state, for ``set_state``."""
        return copy.deepcopy(self._rng.bit_generator.state)

    def set_state(self, new_state):
        self._rng.bit_generator.state = copy.deepcopy(new_state)
        return self

    def __repr__(self):
        return f"<tapegrad.Generator object at {hex(id(self))}>"
