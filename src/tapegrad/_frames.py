"""Telling tapegrad's own frames from the program's: warnings and errors name the program's
line (``inplace.user_site``), and anomaly mode keeps the program's stack (``_anomaly``)."""
import os

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_own = {}   # code filename -> whether it is tapegrad's (abspath is slow: cached)


def is_own_code(filename):
    """Whether code from ``filename`` is tapegrad's: a file of the package, or code it
    generates (the argument check in front of a method, ``<tapegrad ...>``)."""
    own = _own.get(filename)
    if own is None:
        own = _own[filename] = filename.startswith("<tapegrad ") or \
            os.path.abspath(filename).startswith(_PKG_DIR + os.sep)
    return own
