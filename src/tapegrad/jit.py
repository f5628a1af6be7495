"""``tapegrad.jit``: the names PyTorch programs use from ``torch.jit``, working eagerly.

tapegrad does not compile TorchScript.  ``script`` and ``trace`` give back the function or
module they are handed (``trace`` runs it once on the example inputs, as PyTorch's tracer
does), so a program that scripts its model runs it as ordinary Python with tapegrad's numbers.
The compiled path of tapegrad is ``tapegrad.compile``, which records a function's tape once
and replays it.  The decorators (``ignore``, ``unused``, ``export``) mark a function as
PyTorch's do and return it; ``is_scripting()`` and ``is_tracing()`` are False, so the eager
branch of a program is the one taken.  ``save`` and ``load`` raise: there is no TorchScript
archive to write or read (save a ``state_dict`` with ``tapegrad.save``).

As PyTorch 2.13's, ``script``, ``trace``, ``fork``, ``wait``, ``freeze`` and
``optimize_for_inference`` warn that they are deprecated (a ``DeprecationWarning``, which
Python shows only in ``__main__`` by default) and pointing to ``tapegrad.compile``.
"""
import contextlib
import enum
import inspect
import os
import typing
import warnings

from .nn.modules import Module

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "is_scripting",
           "is_tracing", "annotate", "Final", "fork", "wait", "Future", "freeze",
           "optimize_for_inference", "enable_onednn_fusion", "onednn_fusion_enabled",
           "optimized_execution", "script_if_tracing", "interface", "save", "load"]

# a Python annotation, as in PyTorch (``torch.jit.Final is typing.Final``)
Final = typing.Final

# what PyTorch's FunctionModifiers say of a marked function (its ``_torchscript_modifier``),
# word for word: values a program may compare, not messages
_UNUSED = "unused (ignored and replaced with raising of an exception)"
_IGNORE = "ignore (leave as a call to Python, cannot be torch.jit.save'd)"
_EXPORT = "export (compile this function even if nothing calls it)"

# set on a module handed to script or trace: freeze and optimize_for_inference take only those
_SCRIPTED = "_tapegrad_jit_scripted"
_onednn_fusion = False


def _deprecated(name, alternative="Please switch to `tapegrad.compile`."):
    warnings.warn(f"`tapegrad.jit.{name}` is deprecated. {alternative}", DeprecationWarning,
                  stacklevel=3)


def _optimize_deprecated(optimize):
    if optimize is not None:
        warnings.warn("`optimize` is deprecated and has no effect. Use `with "
                      "tapegrad.jit.optimized_execution()` instead", FutureWarning,
                      stacklevel=3)


def _mark(module):
    object.__setattr__(module, _SCRIPTED, True)
    return module


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """``obj`` itself, to run eagerly: tapegrad does not compile TorchScript (its compiled
    path is ``tapegrad.compile``).  Usable as a decorator.  PyTorch's refusals are kept: a
    module class (rather than an instance), a lambda, a value of a built-in type and a
    function decorated with ``autocast`` raise as they do in PyTorch.  A dict or a list is
    copied, as PyTorch copies it into a scripted container.

    Example:
        >>> import warnings
        >>> warnings.simplefilter("ignore", DeprecationWarning)
        >>> @tg.jit.script
        ... def f(x):
        ...     return x * 2
        >>> f(tg.tensor([1.0, 2.0]))
        tensor([2., 4.])
        >>> lin = nn.Linear(2, 1)
        >>> tg.jit.script(lin) is lin
        True
    """
    _deprecated("script")
    _optimize_deprecated(optimize)
    if isinstance(obj, Module):
        return _mark(obj)
    if isinstance(obj, dict):
        return dict(obj)
    if isinstance(obj, list):
        return list(obj)
    if inspect.isclass(obj):
        if issubclass(obj, Module):
            raise RuntimeError(f"Type '{obj}' cannot be compiled since it inherits from "
                               "nn.Module, pass an instance instead")
        if issubclass(obj, enum.Enum):
            return obj
        if len(obj.mro()) > 2:
            raise RuntimeError("TorchScript classes does not support inheritance yet. "
                               "Please directly inherit from 'object'.")
        return obj
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        if hasattr(obj, "__script_unsupported"):
            raise RuntimeError("TorchScript error: " + getattr(obj, "__script_unsupported"))
        if obj.__name__ == "<lambda>":
            code = obj.__code__
            raise RuntimeError("Expected a single top-level function: "
                               f"{code.co_filename}:{code.co_firstlineno}")
        return obj
    if type(obj).__module__ == "builtins":
        raise TypeError(f"{type(obj)} is a built-in class")
    return obj


def _as_tuple(example_inputs):
    # PyTorch's make_tuple: one tensor (or dict) is one argument; anything else is iterated
    from .tensor import Tensor
    if isinstance(example_inputs, (Tensor, dict)):
        return (example_inputs,)
    if not isinstance(example_inputs, tuple):
        return tuple(example_inputs)
    return example_inputs


def _run(func, example_inputs, kwarg_inputs):
    if kwarg_inputs:
        func(**example_inputs)
    else:
        func(*_as_tuple(example_inputs))


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None,
          check_tolerance=1e-5, strict=True, _force_outplace=False, _module_class=None,
          _compilation_unit=None, example_kwarg_inputs=None, _store_inputs=True):
    """Run ``func`` once on ``example_inputs`` (a tensor or a tuple of arguments; or the
    keyword arguments ``example_kwarg_inputs``) and give it back: a module (or a module's
    bound ``forward``) gives the module, a function the function.  The result runs eagerly
    on any input, with its Python control flow (PyTorch's trace freezes the branches taken).
    The ``check_*`` options are accepted; PyTorch's check runs the function again, tapegrad
    does not.

    Example:
        >>> import warnings
        >>> warnings.simplefilter("ignore", DeprecationWarning)
        >>> lin = nn.Linear(3, 2)
        >>> tg.jit.trace(lin, tg.ones(1, 3)) is lin
        True
        >>> double = tg.jit.trace(lambda x: 2 * x, (tg.ones(2),))
        >>> double(tg.tensor([1.0, 5.0]))
        tensor([ 2., 10.])
    """
    _deprecated("trace")
    _optimize_deprecated(optimize)
    if isinstance(func, Module) or (getattr(func, "__name__", None) == "forward"
                                    and isinstance(getattr(func, "__self__", None), Module)):
        module = func if isinstance(func, Module) else func.__self__
        kwarg_inputs = example_inputs is None
        if kwarg_inputs:
            if not isinstance(example_kwarg_inputs, dict):
                raise RuntimeError("example_kwarg_inputs should be a dict")
            example_inputs = example_kwarg_inputs
        # PyTorch traces a module's forward through trace_module (its warning), and its
        # check traces once more (the warning again): tapegrad runs the module once
        _deprecated("trace_method")
        _run(module, example_inputs, kwarg_inputs)
        if check_trace:
            _deprecated("trace_method")
        return _mark(module)
    if not callable(func):
        raise RuntimeError("Could not get name of python class object")
    kwarg_inputs = isinstance(example_kwarg_inputs, dict)
    _run(func, example_kwarg_inputs if kwarg_inputs else example_inputs, kwarg_inputs)
    if check_trace:
        _deprecated("trace")
    return func


def trace_module(mod, inputs, optimize=None, check_trace=True, check_inputs=None,
                 check_tolerance=1e-5, strict=True, _force_outplace=False,
                 _module_class=None, _compilation_unit=None, example_inputs_is_kwarg=False,
                 _store_inputs=True):
    """Run each method named in ``inputs`` (``{"forward": example_input, ...}``) once on its
    example inputs and give back the module, eagerly (see ``trace``).

    Example:
        >>> import warnings
        >>> warnings.simplefilter("ignore", DeprecationWarning)
        >>> lin = nn.Linear(3, 2)
        >>> tg.jit.trace_module(lin, {"forward": tg.ones(3)}) is lin
        True
    """
    _deprecated("trace_method")
    _optimize_deprecated(optimize)
    if not isinstance(mod, Module):
        raise AttributeError("expected tapegrad.nn.Module as the first argument")
    if not isinstance(inputs, dict):
        raise AttributeError("expected a dictionary of (method_name, input) pairs")
    for name, example in inputs.items():
        _run(getattr(mod, name), example, example_inputs_is_kwarg)
    return _mark(mod)


def ignore(drop=False, **kwargs):
    """Mark a function or method as left to Python by the TorchScript compiler; it runs as
    it is (everything does in tapegrad).  ``@ignore``, ``@ignore()`` and ``@ignore(True)``
    (deprecated in PyTorch, with its ``FutureWarning``) all return the function.

    Example:
        >>> @tg.jit.ignore
        ... def debug(x):
        ...     return x + 1
        >>> debug(1), debug._torchscript_modifier
        (2, "ignore (leave as a call to Python, cannot be torch.jit.save'd)")
    """
    if callable(drop):
        drop._torchscript_modifier = _IGNORE
        return drop
    if not isinstance(drop, bool):
        raise RuntimeError("Argument to @tapegrad.jit.ignore must be a bool or a function but "
                           f"got {drop}")
    drop_on_export = kwargs.pop("drop_on_export", None)
    if drop_on_export:
        warnings.warn("ignore(drop_on_export=True) has been deprecated. TorchScript will now "
                      "drop the function call on compilation. Use tapegrad.jit.unused now. {}",
                      stacklevel=2, category=FutureWarning)
        drop = drop_on_export
    elif drop:
        warnings.warn("ignore(True) has been deprecated. TorchScript will now drop the "
                      "function call on compilation. Use tapegrad.jit.unused now. {}",
                      stacklevel=2, category=FutureWarning)

    def decorator(fn):
        fn._torchscript_modifier = _UNUSED if drop else _IGNORE
        return fn

    return decorator


def unused(fn):
    """Mark a function, method or property as not to be compiled by TorchScript; it is
    returned unchanged and runs as it is.

    Example:
        >>> @tg.jit.unused
        ... def slow_path(x):
        ...     return x
        >>> slow_path(3)
        3
    """
    if isinstance(fn, property):
        fn.fget._torchscript_modifier = _UNUSED
        if fn.fset:
            fn.fset._torchscript_modifier = _UNUSED
        return fn
    fn._torchscript_modifier = _UNUSED
    return fn


def export(fn):
    """Mark a method as one TorchScript compiles even if ``forward`` does not call it; it is
    returned unchanged.

    Example:
        >>> @tg.jit.export
        ... def helper(x):
        ...     return x * 3
        >>> helper(2)
        6
    """
    fn._torchscript_modifier = _EXPORT
    return fn


def is_scripting():
    """Whether the code runs inside TorchScript: never in tapegrad, so False (and a
    program's eager branch is taken).

    Example:
        >>> tg.jit.is_scripting()
        False
    """
    return False


def is_tracing():
    """Whether the code runs under ``torch.jit.trace``: never in tapegrad, so False.

    Example:
        >>> tg.jit.is_tracing()
        False
    """
    return False


def annotate(the_type, the_value):
    """``the_value``: a type hint for the TorchScript compiler, a no-op in Python.

    Example:
        >>> tg.jit.annotate(list, [])
        []
    """
    return the_value


class Future:
    """The result of ``fork``: the call has run already, and ``wait()`` (or ``value()``)
    returns what it returned.

    Example:
        >>> import warnings
        >>> warnings.simplefilter("ignore", DeprecationWarning)
        >>> fut = tg.jit.fork(max, 2, 5)
        >>> fut.done(), fut.wait()
        (True, 5)
    """

    def __init__(self, result):
        self._result = result

    def wait(self):
        """What the forked call returned."""
        return self._result

    def value(self):
        """What the forked call returned."""
        return self._result

    def done(self):
        """True: the forked call ran when it was forked."""
        return True


def fork(func, *args, **kwargs):
    """Run ``func(*args, **kwargs)`` now and return a ``Future`` holding its result (PyTorch
    may run it asynchronously in TorchScript; in Python it too runs at once).

    Example:
        >>> import warnings
        >>> warnings.simplefilter("ignore", DeprecationWarning)
        >>> tg.jit.wait(tg.jit.fork(lambda x: x + 1, tg.tensor([1.0])))
        tensor([2.])
    """
    _deprecated("fork", "Please use `tapegrad.compile` instead.")
    return Future(func(*args, **kwargs))


def wait(future):
    """The result of a ``fork``.

    Example:
        >>> import warnings
        >>> warnings.simplefilter("ignore", DeprecationWarning)
        >>> tg.jit.wait(tg.jit.fork(abs, -3))
        3
    """
    _deprecated("wait", "Please use `tapegrad.compile` instead.")
    return future.wait()


def _check_scripted(mod, what):
    if not (isinstance(mod, Module) and mod.__dict__.get(_SCRIPTED, False)):
        raise RuntimeError(f"{what} expects a ScriptModule as input. Please use "
                           "tapegrad.jit.script or tapegrad.jit.trace to script your "
                           "'nn.Module'.")


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    """The scripted (or traced) module ``mod`` itself, after PyTorch's checks: it must have
    come from ``script`` or ``trace`` and be in eval mode.  PyTorch makes a new module whose
    weights are constants; tapegrad's runs as it is.

    Example:
        >>> import warnings
        >>> warnings.simplefilter("ignore", DeprecationWarning)
        >>> lin = tg.jit.script(nn.Linear(2, 1).eval())
        >>> tg.jit.freeze(lin) is lin
        True
    """
    _deprecated("freeze", "Please use `tapegrad.compile` instead.")
    _check_scripted(mod, "Freezing")
    if mod.training:
        raise RuntimeError("Freezing is currently only implemented for modules in eval mode. "
                           "Please call .eval() on your module before freezing.")
    return mod


def optimize_for_inference(mod, other_methods=None):
    """The scripted (or traced) module ``mod``, put in eval mode and frozen (see ``freeze``),
    as PyTorch's does; nothing is rewritten.

    Example:
        >>> import warnings
        >>> warnings.simplefilter("ignore", DeprecationWarning)
        >>> lin = tg.jit.script(nn.Linear(2, 1))
        >>> tg.jit.optimize_for_inference(lin).training
        False
    """
    _deprecated("optimize_for_inference", "Please use `tapegrad.compile` instead.")
    _check_scripted(mod, "optimize_for_inference")
    if hasattr(mod, "training"):
        mod = freeze(mod.eval(), preserved_attrs=other_methods or [])
    return mod


def enable_onednn_fusion(enabled):
    """Turn PyTorch's oneDNN graph fusion on or off: kept and read back by
    ``onednn_fusion_enabled``, with no effect on tapegrad.

    Example:
        >>> tg.jit.enable_onednn_fusion(True); tg.jit.onednn_fusion_enabled()
        True
        >>> tg.jit.enable_onednn_fusion(False)
    """
    global _onednn_fusion
    _onednn_fusion = bool(enabled)


def onednn_fusion_enabled():
    """Whether ``enable_onednn_fusion(True)`` was called (False at start, as in PyTorch).

    Example:
        >>> tg.jit.onednn_fusion_enabled()
        False
    """
    return _onednn_fusion


@contextlib.contextmanager
def optimized_execution(should_optimize):
    """A region where PyTorch turns its TorchScript optimisations on or off: nothing to
    turn in tapegrad.

    Example:
        >>> with tg.jit.optimized_execution(False):
        ...     tg.tensor([1.0]) + 1
        tensor([2.])
    """
    yield


def script_if_tracing(fn):
    """``fn``, to run eagerly (PyTorch scripts it only when it is called during a trace).

    Example:
        >>> tg.jit.script_if_tracing(abs)(-2)
        2
    """
    return fn


def interface(obj):
    """``obj``: a class PyTorch declares a TorchScript interface with, a plain class here.

    Example:
        >>> import warnings
        >>> warnings.simplefilter("ignore", DeprecationWarning)
        >>> @tg.jit.interface
        ... class Shape:
        ...     def area(self) -> float:
        ...         pass
        >>> Shape.__name__
        'Shape'
    """
    _deprecated("interface", "Please use `tapegrad.compile` instead.")
    return obj


_NO_ARCHIVE = ("tapegrad does not compile TorchScript, so there is no scripted module to "
               "{}: save the model's state_dict with tapegrad.save(model.state_dict(), f) and "
               "load it with model.load_state_dict(tapegrad.load(f))")


def save(m, f, _extra_files=None):
    """Raises ``NotImplementedError``: there is no TorchScript archive in tapegrad.  Save
    the module's ``state_dict`` with ``tapegrad.save`` instead.

    Example:
        >>> tg.jit.save(nn.Linear(2, 1), "model.pt")
        Traceback (most recent call last):
        ...
        NotImplementedError: tapegrad does not compile TorchScript, ...
    """
    raise NotImplementedError(_NO_ARCHIVE.format("save"))


def load(f, map_location=None, _extra_files=None, _restore_shapes=False):
    """Raises: a missing path or a directory with PyTorch's ``ValueError``, anything else
    with ``NotImplementedError`` (tapegrad reads no TorchScript archive; load a
    ``state_dict`` saved by ``tapegrad.save`` with ``tapegrad.load``).

    Example:
        >>> tg.jit.load("no-such-file.pt")
        Traceback (most recent call last):
        ...
        ValueError: The provided filename no-such-file.pt does not exist
    """
    if isinstance(f, (str, os.PathLike)):
        if not os.path.exists(f):
            raise ValueError(f"The provided filename {f} does not exist")
        if os.path.isdir(f):
            raise ValueError(f"The provided filename {f} is a directory")
    raise NotImplementedError(_NO_ARCHIVE.format("load"))


from ._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
