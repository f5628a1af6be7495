"""The named tuples some ops return (``max(dim)``, ``sort``, ``linalg.slogdet``, ...), as
PyTorch's ``torch.return_types``: each type is named after its op, unpacks and indexes as a
tuple, has its fields by name, and prints as PyTorch's does, one field a line::

    tapegrad.return_types.max(
    values=tensor([5., 7.]),
    indices=tensor([1, 0]))
"""
from collections import namedtuple

# (the types are attributes of this module as they are made, ``tapegrad.return_types.sort``;
# none is a public name of its own to document: each is documented with its op)
__all__ = []


def _repr(self):
    fields = ",\n".join(f"{name}={value!r}" for name, value in zip(self._fields, self))
    return f"tapegrad.return_types.{type(self).__name__}(\n{fields})"


def return_type(name, fields):
    """The result type of op ``name`` with ``fields``, made once and kept here by its name
    (so that a pickled result finds its type again)."""
    existing = globals().get(name)
    if existing is not None:
        return existing
    cls = namedtuple(name, fields, module=__name__)
    cls.__repr__ = _repr
    cls.__str__ = _repr
    globals()[name] = cls
    return cls
