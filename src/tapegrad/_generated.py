"""Python modules that tapegrad writes itself (the op dispatchers, generated replay code).

numba caches only functions defined in files, so generated source is written to a file
named by its hash, in a folder beside numba's cache, and imported from there; the same
source in a later process finds the file and numba's cache for it.
"""
import hashlib
import importlib.util
import os
import pathlib
import sys
import threading

from ._config import generated_dir

# One import at a time: a module is registered in sys.modules only once it has loaded, and
# threads that want the same module wait for the first to finish (without this, a thread found
# the half-loaded module of another: "has no attribute 'forward'").
_IMPORT_LOCK = threading.Lock()


def module_name(prefix, source):
    """The name generated ``source`` is imported under: ``prefix`` and its hash."""
    return f"{prefix}_{hashlib.sha256(source.encode()).hexdigest()[:24]}"


def module_path(prefix, source):
    """The file generated ``source`` is written to, beside numba's cache."""
    return os.path.join(generated_dir(), module_name(prefix, source) + ".py")


def load_module(prefix, source):
    """The module ``source`` defines, named ``{prefix}_{hash}``: imported once per process,
    written to disk once per machine.  Safe to call from several threads and processes: the
    file is written whole under a name of its own and renamed into place, and the module is
    made visible in ``sys.modules`` only once it has finished executing."""
    name = module_name(prefix, source)
    mod = sys.modules.get(name)
    if mod is not None:
        return mod
    with _IMPORT_LOCK:
        mod = sys.modules.get(name)
        if mod is not None:   # another thread loaded it while this one waited
            return mod
        path = module_path(prefix, source)
        if not os.path.exists(path):
            tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
            try:
                pathlib.Path(tmp).write_text(source)   # closes the file on every path
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.remove(tmp)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules[name] = mod
        return mod
