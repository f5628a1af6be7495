"""What ``dir()`` and ``help()`` show of a tapegrad module: its public names, not its imports.

Tab completion (IPython, Jupyter, the REPL) lists ``dir(module)``, and ``help(module)`` lists
the functions and classes named in ``__all__``.  A module's ``__dir__`` (PEP 562) built here
lists ``__all__`` and the module's public submodules only; every other attribute stays
reachable by its name, as before.
"""
import types

__all__ = ["public_dir", "defined_public_names"]


def defined_public_names(namespace):
    """The names of ``namespace`` (a module's globals) that a user calls: not starting with
    an underscore, not a module, and defined in tapegrad (a function, a class, or an
    instance of one, such as a dtype) rather than imported from NumPy or the standard
    library.  For a package that re-exports: a name added to it is public without a list to
    keep in step."""
    names = []
    for name, obj in namespace.items():
        if name.startswith("_") or isinstance(obj, types.ModuleType):
            continue
        home = getattr(obj, "__module__", None)
        if not isinstance(home, str):
            home = type(obj).__module__
        if home == "tapegrad" or home.startswith("tapegrad."):
            names.append(name)
    return sorted(names)


def public_dir(namespace, extra=()):
    """A ``__dir__`` for the module whose globals are ``namespace``: its ``__all__`` (read
    when called, so later additions show) and the ``extra`` names: public submodules, and
    names shown but left out of ``__all__`` (documented where they are defined)."""
    def __dir__():
        return sorted(set(namespace["__all__"]) | set(extra))
    return __dir__
