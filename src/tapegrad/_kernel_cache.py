"""Where numba caches tapegrad's compiled kernels, and the digest of the sources they are
compiled from.

No numba here: ``_compile_helper`` asks both at the very start of ``import tapegrad``,
before numba is imported, to tell whether this machine has compiled the kernels yet.
"""
import hashlib
import os
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))
# the files the kernels are compiled from (rules inline across them: see _config.py)
_KERNEL_SOURCES = ("_config.py", "_blas.py", "ops")
_digest = None
_fallback = False   # (not decided yet)


def fallback_dir():
    """The directory numba must be told to cache in, or None where its own choice works:
    ``NUMBA_CACHE_DIR`` is set, or the package's ``__pycache__`` is writable.  On a
    read-only install numba raises at import time instead, so a per-user temp directory
    (created here) takes its place."""
    global _fallback
    if _fallback is not False:
        return _fallback
    _fallback = None
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    probe = os.path.join(_HERE, "__pycache__")
    try:
        os.makedirs(probe, exist_ok=True)
        test = os.path.join(probe, f".write_probe{os.getpid()}")
        with open(test, "w"):
            pass
        os.remove(test)
        return None
    except OSError:
        pass
    _fallback = os.path.join(tempfile.gettempdir(), f"tapegrad-numba-{os.getuid()}")
    os.makedirs(_fallback, exist_ok=True)
    return _fallback


def cache_dir():
    """The base directory of the kernel cache (numba's ``CACHE_DIR``, or the package's
    ``__pycache__`` beside which numba caches by default)."""
    return (os.environ.get("NUMBA_CACHE_DIR") or fallback_dir()
            or os.path.join(_HERE, "__pycache__"))


def kernel_sources_digest():
    """A digest of the source files tapegrad's kernels are compiled from."""
    global _digest
    if _digest is None:
        h = hashlib.sha256()
        for entry in _KERNEL_SOURCES:
            path = os.path.join(_HERE, entry)
            files = ([os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".py")]
                     if os.path.isdir(path) else [path])
            for name in files:
                with open(name, "rb") as f:
                    h.update(os.path.relpath(name, _HERE).encode() + b"\0" + f.read() + b"\0")
        _digest = h.hexdigest()
    return _digest
