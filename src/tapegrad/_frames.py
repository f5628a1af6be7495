"""Telling tapegrad's own frames from the program's: warnings and errors name the program's
line (``inplace.user_site``, ``warn_program``), and anomaly mode keeps the program's stack
(``_anomaly``)."""
import os
import sys
import warnings

from . import settings

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


def warn_program(message, category=UserWarning, once=None, through_own=False):
    """Warn as PyTorch warns of a form it deprecates (``torch.tensor(t)`` of a tensor, ``x.T``
    of a 3-D one), naming the line that called the public function this is called from --
    when a program called it: tapegrad's own use of the form is not the program's, and warns
    of nothing (nor, with filters that raise, breaks the call it serves).  ``once``: a key
    warned of at most once per process, as PyTorch's TORCH_WARN_ONCE warnings are.
    ``through_own``: called from a helper that several public functions reach by paths of
    different depths (``tensor``, ``as_tensor`` and the legacy constructors all convert
    nested lists in one place): warn at the program's line past every tapegrad frame."""
    if once is not None and once in _warned_once and not settings.is_warn_always_enabled():
        return      # (set_warn_always(True) makes PyTorch's once-warnings warn every time)
    frame = sys._getframe(2)        # the public function's caller
    level = 3
    while frame is not None and (frame.f_code.co_filename.startswith("<tapegrad ")
                                 or frame.f_code.co_name == "guarded"
                                 and is_own_code(frame.f_code.co_filename)
                                 or through_own and is_own_code(frame.f_code.co_filename)):
        frame = frame.f_back        # (an argument check in front of it: _argtypes)
        level += 1
    if frame is None or is_own_code(frame.f_code.co_filename):
        return
    if once is not None:
        _warned_once.add(once)
    warnings.warn(message, category, stacklevel=level)


_warned_once = set()
