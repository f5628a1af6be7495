"""``tapegrad.autocast``: PyTorch's automatic mixed precision region, on a float64 library.

PyTorch's autocast runs listed ops of an enabled region in a lower precision: it casts their
``float32`` (and ``float16``/``bfloat16``) inputs and leaves ``float64`` tensors as they are.
tapegrad's only floating dtype is float64, so an enabled region changes no value and no dtype,
exactly as PyTorch's autocast does to float64 tensors.  What the region does keep is PyTorch's
state and checks: ``is_autocast_enabled``/``get_autocast_dtype`` read inside it, the warnings
that disable it (CUDA unavailable, an unsupported dtype) and the errors of a wrong device.
"""
import functools
import threading
import warnings

from .. import _device
from .._dtype import bfloat16, float16

__all__ = ["autocast", "is_autocast_available", "custom_fwd", "custom_bwd",
           "is_autocast_enabled", "get_autocast_dtype", "is_autocast_cache_enabled"]

# the device types PyTorch's autocast takes, and each one's default lower-precision dtype
_AVAILABLE = ("cpu", "cuda", "ipu", "xpu", "maia", "xla", "mps", "hpu", "mtia",
              "privateuseone")
_DEFAULT_DTYPE = {"cpu": bfloat16, "cuda": float16, "ipu": float16, "xpu": float16,
                  "hip": float16, "maia": bfloat16, "xla": bfloat16, "mps": float16,
                  "hpu": bfloat16, "mtia": float16, "privateuseone": float16}


class _State(threading.local):
    """The autocast state of a thread, as PyTorch keeps it (thread-local)."""

    def __init__(self):
        self.enabled = {}
        self.dtype = dict(_DEFAULT_DTYPE)
        self.cache_enabled = True
        self.nesting = 0


_state = _State()


def _device_type(device_type):
    """The device type of a device string (``'cuda:0'`` -> ``'cuda'``), with PyTorch's errors."""
    return _device._parse(device_type, None)[0]


def is_autocast_available(device_type):
    """Whether autocast can be used on ``device_type`` (a device string), as in PyTorch:
    True for ``'cpu'`` and ``'cuda'`` (and the other accelerators PyTorch lists), False for
    ``'meta'`` and the like.  A CUDA region is still disabled with a warning when it is entered:
    there is no CUDA.

    Example:
        >>> tg.amp.is_autocast_available("cpu"), tg.amp.is_autocast_available("meta")
        (True, False)
    """
    if not isinstance(device_type, str):
        raise TypeError("_is_autocast_available(): argument 'device_type' (position 1) must "
                        f"be str, not {type(device_type).__name__}")
    return _device_type(device_type) in _AVAILABLE


def _known(device_type):
    kind = _device_type(device_type)
    if kind not in _AVAILABLE:
        raise RuntimeError("unknown device type for autocast in "
                           "get_autocast_dispatch_key_from_device_type")
    return kind


def is_autocast_enabled(device_type=None):
    """Whether an enabled autocast region of ``device_type`` is open in this thread; without
    an argument, of CUDA (PyTorch's older form).

    Example:
        >>> with tg.autocast("cpu"):
        ...     tg.is_autocast_enabled("cpu"), tg.is_autocast_enabled()
        (True, False)
        >>> tg.is_autocast_enabled("cpu")
        False
    """
    kind = "cuda" if device_type is None else _known(device_type)
    return _state.enabled.get(kind, False)


def get_autocast_dtype(device_type):
    """The lower-precision dtype autocast names for ``device_type``: ``bfloat16`` for the CPU
    and ``float16`` for CUDA unless a region chose another.  tapegrad computes in float64
    whatever it is (see ``autocast``).

    Example:
        >>> tg.get_autocast_dtype("cpu"), tg.get_autocast_dtype("cuda")
        (tapegrad.bfloat16, tapegrad.float16)
    """
    kind = _device_type(device_type)
    if kind not in _state.dtype:
        raise RuntimeError("unsupported scalarType")
    return _state.dtype[kind]


def is_autocast_cache_enabled():
    """Whether autocast's weight cache is on (True unless a region passed
    ``cache_enabled=False``); tapegrad casts nothing, so nothing is cached either way.

    Example:
        >>> tg.is_autocast_cache_enabled()
        True
    """
    return _state.cache_enabled


def _cuda_definitely_not_available():
    # tapegrad has no CUDA (tapegrad.cuda.is_available() is False), and no torch_xla either
    return True


class autocast:
    """A region (``with`` block or decorated function) where PyTorch runs listed ops in a
    lower precision: ``autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``.

    PyTorch casts only the ``float32`` (and half-precision) inputs of those ops; ``float64``
    tensors pass unchanged.  tapegrad's floating tensors are all float64, so the values and
    dtypes inside the region are the ones outside it, as PyTorch's are for float64.  The
    region keeps PyTorch's state (``tapegrad.is_autocast_enabled(device_type)``,
    ``get_autocast_dtype``) and its checks: a CUDA region warns ``"CUDA is not available or
    torch_xla is imported. Disabling autocast."`` and is disabled, a dtype other than
    ``bfloat16``/``float16`` elsewhere warns and disables the region, an unknown device type
    raises.  ``tapegrad.autocast`` and ``tapegrad.amp.autocast`` are this class.

    Example:
        >>> x = tg.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> with tg.autocast("cpu"):
        ...     y = x @ x
        >>> y.dtype, tg.is_autocast_enabled("cpu")
        (tapegrad.float64, False)
        >>> @tg.autocast("cpu", enabled=False)
        ... def f(a):
        ...     return tg.is_autocast_enabled("cpu")
        >>> f(x)
        False
    """

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(
                f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        self.device = device_type
        if not is_autocast_available(self.device):
            raise RuntimeError(
                f"User specified an unsupported autocast device_type '{self.device}'")
        self.custom_backend_name = "privateuseone"
        self._cache_enabled = (is_autocast_cache_enabled() if cache_enabled is None
                               else cache_enabled)
        supported = (bfloat16, float16)
        name = self.device.upper()
        if enabled:
            if self.device == "cuda":
                if _cuda_definitely_not_available():
                    warnings.warn("CUDA is not available or torch_xla is imported. Disabling "
                                  "autocast.", stacklevel=2)
                    enabled = False
            elif self.fast_dtype not in supported:
                warnings.warn(f"In {name} autocast, but the target dtype is not supported. "
                              f"Disabling autocast.\n{name} Autocast only supports dtypes of "
                              + ", ".join(map(str, supported)) + " currently.", stacklevel=2)
                enabled = False
        self._enabled = enabled

    def __enter__(self):
        kind = _device_type(self.device)
        self.prev_cache_enabled = _state.cache_enabled
        self.prev = _state.enabled.get(kind, False)
        self.prev_fastdtype = _state.dtype[kind]
        _state.enabled[kind] = self._enabled
        _state.dtype[kind] = self.fast_dtype
        _state.nesting += 1
        _state.cache_enabled = self._cache_enabled
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        kind = _device_type(self.device)
        _state.nesting -= 1
        _state.enabled[kind] = self.prev
        _state.dtype[kind] = self.prev_fastdtype
        _state.cache_enabled = self.prev_cache_enabled
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError(
                f"autocast()(func) requires a callable, but got {type(func).__name__}. "
                f"Did you mean to use autocast as a context manager? For example:\n"
                f"    with tapegrad.autocast(device_type=...):\n"
                f"        output = model(input)")
        region = self

        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with region:
                return func(*args, **kwargs)

        # what tapegrad.jit.script refuses, as PyTorch's does
        setattr(decorate_autocast, "__script_unsupported",
                "@autocast() decorator is not supported in script mode")
        return decorate_autocast


def _check_device_type(device_type):
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator for the ``forward`` of an ``autograd.Function``, as PyTorch's
    ``torch.amp.custom_fwd``: records whether autocast was on (for ``custom_bwd``) and, with
    ``cast_inputs``, runs ``forward`` with autocast off.  PyTorch's cast of the inputs leaves
    float64 tensors alone, so tapegrad's inputs pass unchanged.

    Example:
        >>> class Double(tg.autograd.Function):
        ...     @staticmethod
        ...     @tg.amp.custom_fwd(device_type="cpu")
        ...     def forward(ctx, x):
        ...         return 2 * x
        ...     @staticmethod
        ...     @tg.amp.custom_bwd(device_type="cpu")
        ...     def backward(ctx, g):
        ...         return 2 * g
        >>> Double.apply(tg.tensor([1.0, 2.0]))
        tensor([2., 4.])
    """
    _check_device_type(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        args[0]._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            args[0]._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        on = is_autocast_enabled(device_type)
        args[0]._fwd_used_autocast = False
        if on:
            with autocast(device_type=device_type, enabled=False):
                return fwd(*args, **kwargs)
        return fwd(*args, **kwargs)

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator for the ``backward`` of an ``autograd.Function``, as PyTorch's
    ``torch.amp.custom_bwd``: runs it with the autocast state its ``forward`` had (see
    ``custom_fwd``, whose example uses both).

    Example:
        >>> tg.amp.custom_bwd(lambda ctx, g: g, device_type="cpu").__name__
        '<lambda>'
    """
    _check_device_type(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        with autocast(device_type=device_type, enabled=args[0]._fwd_used_autocast,
                      dtype=args[0]._dtype):
            return bwd(*args, **kwargs)

    return decorate_bwd


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
