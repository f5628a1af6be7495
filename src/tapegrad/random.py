"""``torch.random``: the generator's seed and state under the module PyTorch keeps them in,
and ``fork_rng``, which runs a block on a copy of the generator's state.

Example:
    >>> _ = tg.random.manual_seed(0)
    >>> with tg.random.fork_rng():
    ...     _ = tg.rand(3)             # draws inside the block ...
    >>> tg.rand(1)                     # ... leave the numbers after it as they were
    tensor([0.9701])
"""
import contextlib

from ._generator import Generator
from .creation import default_generator, manual_seed
from .derived import get_rng_state, initial_seed, seed, set_rng_state

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state", "fork_rng"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type="cuda"):
    """Run the block with the generator's state saved, and restore it afterwards: the
    numbers drawn after the block are those that would have been drawn without it.
    ``devices`` names accelerator devices, of which tapegrad has none (an empty list or
    None); ``enabled=False`` does nothing.

    Example:
        >>> _ = tg.manual_seed(1)
        >>> with tg.random.fork_rng():
        ...     _ = tg.manual_seed(5)
        >>> tg.rand(1)
        tensor([0.0611])
    """
    if not enabled:
        yield
        return
    if devices:
        raise RuntimeError(f"{_caller}: {_devices_kw} {list(devices)} name accelerator devices; "
                           "tapegrad runs on the CPU only")
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


from ._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
