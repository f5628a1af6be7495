"""Devices: ``tapegrad.device('cpu')``, printed and compared as PyTorch's ``torch.device``.

tapegrad runs on the CPU only.  A device object for another type can be made (it is only a
name, as in PyTorch), but creating a tensor there or moving one there raises: for CUDA the
``AssertionError`` a CPU-only PyTorch raises, for the others a ``RuntimeError``.
"""
import re

# PyTorch's device types, in the order its error message lists them
_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve",
          "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")
# an index is "0" or a number without leading zeros, as PyTorch parses it
_DEVICE_STRING = re.compile(r"([a-zA-Z_]+)(?::(0|[1-9][0-9]*))?\Z")


def _typename(x):
    return type(x).__name__


def _parse(text, index):
    """(type, index) from a device string, with PyTorch's errors."""
    if not text:
        raise RuntimeError("Device string must not be empty")
    found = _DEVICE_STRING.match(text)
    if found is None:
        raise RuntimeError(f"Invalid device string: '{text}'")
    head = found.group(1)
    if head not in _TYPES:
        raise RuntimeError(
            f"Expected one of {', '.join(_TYPES)} device type at start of device string: {text}")
    if found.group(2) is not None:
        if index is not None:
            raise RuntimeError("type (string) must not include an index because index was "
                               f"passed explicitly: {text}")
        index = int(found.group(2))
    if index is not None and index < 0:
        raise RuntimeError("Device index must not be negative")
    return head, index


class device:
    """A device type and an optional index: ``device('cpu')``, ``device('cpu', 0)``,
    ``device('cpu:0')``.  Equal to another device of the same type and index only (as in
    PyTorch, ``device('cpu') != 'cpu'``).  Only the CPU exists: a CUDA device raises the
    ``AssertionError`` of a CPU-only PyTorch, other types a ``RuntimeError``.

    Example:
        >>> d = tg.device("cpu:0")
        >>> d, d.type, d.index, str(d)
        (device(type='cpu', index=0), 'cpu', 0, 'cpu:0')
        >>> tg.zeros(2, device=tg.device("cpu")).device
        device(type='cpu')
    """

    __slots__ = ("_type", "_index")

    def __init__(self, type, index=None):  # noqa: A002 - PyTorch's keyword names
        if isinstance(type, device):
            if index is not None:
                raise TypeError("device(): argument 'type' (position 1) must be str, not "
                                "tapegrad.device")
            self._type, self._index = type._type, type._index
            return
        if isinstance(type, int) and not isinstance(type, bool):
            # PyTorch reads a bare number as an accelerator index; there is no accelerator
            raise RuntimeError("Cannot access accelerator device when none is available.")
        if not isinstance(type, str):
            raise TypeError(f"device() received an invalid combination of arguments - got "
                            f"({_typename(type)}), but expected one of: (tapegrad.device "
                            "device) or (str type, int index = -1)")
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
            raise TypeError(f"device(): argument 'index' (position 2) must be int, not "
                            f"{_typename(index)}")
        self._type, self._index = _parse(type, index)

    @property
    def type(self):
        return self._type

    @property
    def index(self):
        return self._index

    def __repr__(self):
        if self._index is None:
            return f"device(type='{self._type}')"
        return f"device(type='{self._type}', index={self._index})"

    def __str__(self):
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __eq__(self, other):
        if not isinstance(other, device):
            return NotImplemented
        return self._type == other._type and self._index == other._index

    def __hash__(self):
        return hash((self._type, self._index))

    def __reduce__(self):
        return (device, (self._type, self._index))


CPU = device("cpu")


def _foreign(where):
    """Whether ``where`` is another library's device object (a ``torch.device`` in a program
    that uses both): a ``type`` name and an ``index``, taken as tapegrad's device of them."""
    return (isinstance(getattr(where, "type", None), str) and hasattr(where, "index")
            and not isinstance(where, str))


def is_device(where):
    """Whether ``where`` names a device as PyTorch's ``device=`` takes one: a device, a
    device string, an index, or another library's device object."""
    return (isinstance(where, (device, str)) or _foreign(where)
            or isinstance(where, int) and not isinstance(where, bool))


def check(where):
    """The device a tensor is to live on, given as PyTorch takes it (None, 'cpu', 'cpu:0',
    a device); raises for any device but the CPU."""
    if where is None:
        return CPU
    if isinstance(where, device):
        d = where
    elif _foreign(where):
        d = device(where.type, where.index)
    else:
        d = device(where)
    if d.type == "cuda":
        # PyTorch's own error on a machine without CUDA
        raise AssertionError("tapegrad not compiled with CUDA enabled (tapegrad runs on the "
                             "CPU only)")
    if d.type != "cpu":
        raise RuntimeError(f"tapegrad runs on the CPU only: device '{d}' is not supported")
    return d


class _NamedConstant:
    """A constant known by its name (``tapegrad.strided``): printed as that name and
    unpickled as the same object (each subclass keeps its constants in ``_by_name``)."""

    __slots__ = ("_name",)
    _by_name = None

    def __init__(self, name):
        self._name = name
        type(self)._by_name[name] = self

    def __repr__(self):
        return f"tapegrad.{self._name}"

    def __reduce__(self):
        return (_constant_named, (type(self), self._name))


def _constant_named(cls, name):
    return cls._by_name[name]


class layout(_NamedConstant):
    """How a tensor's elements are laid out: ``tapegrad.strided`` for every tapegrad tensor
    (``x.layout``); ``sparse_coo`` and ``sparse_csr`` exist to be compared with.

    Example:
        >>> tg.zeros(2).layout, tg.zeros(2).layout == tg.strided
        (tapegrad.strided, True)
    """

    __slots__ = ()
    _by_name = {}


def _layout_named(name):      # (what pickles made before _NamedConstant name)
    return layout._by_name[name]


strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")


class memory_format(_NamedConstant):
    """How a tensor's elements are ordered in memory, as programs pass it to ``contiguous``,
    ``clone`` and the ``*_like`` creators: ``contiguous_format``, ``channels_last`` (4-d),
    ``channels_last_3d`` (5-d) and ``preserve_format``.  Every tapegrad tensor is stored in
    row-major order, so a format changes no value, only what PyTorch checks: the
    channels-last formats need a tensor of their rank, with PyTorch's error otherwise.

    Example:
        >>> x = tg.ones(2, 3, 4, 5)
        >>> tg.channels_last, bool((x.contiguous(memory_format=tg.channels_last) == x).all())
        (tapegrad.channels_last, True)
    """

    __slots__ = ()
    _by_name = {}


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
# the rank each channels-last format is defined for (PyTorch refuses it on any other)
_FORMAT_RANK = {"channels_last": 4, "channels_last_3d": 5}


def check_memory_format(fmt, ndim, fn):
    """Validate ``memory_format=fmt`` given to ``fn`` for a tensor of ``ndim`` dims, with
    PyTorch's errors; the values never depend on it (see ``memory_format``)."""
    if fmt is None:
        return
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{fn}(): argument 'memory_format' must be tapegrad.memory_format, "
                        f"not {_typename(fmt)}")
    rank = _FORMAT_RANK.get(fmt._name)
    if rank is not None and ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt._name} format")
