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


def program_site(frame):
    """'file:line' of ``frame`` or the innermost frame behind it that is not tapegrad's;
    "<unknown>" if none is.  (The cache is read here directly: an optimizer's update logs a
    site for each parameter it changes, and a call per frame was most of that cost.)"""
    own = _own
    while frame is not None:
        code = frame.f_code
        mine = own.get(code.co_filename)
        if mine is None:
            mine = is_own_code(code.co_filename)
        if not mine:
            return f"{code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"
