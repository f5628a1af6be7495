"""``Module``, ``Parameter`` and the layers and losses built on them, as in ``torch.nn``."""
import math
import operator
import sys
import warnings
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

import numpy as np

import tapegrad as tg
from tapegrad import _device, _dtype
from tapegrad._hooks import RemovableHandle
from tapegrad._methods import parse_to
from tapegrad.function import Function
from tapegrad.tensor import Tensor, _typename, _wrap_dim

from . import functional as F
from . import init

__all__ = [
    "Parameter", "Module", "Sequential", "Linear", "Identity", "Flatten", "Unflatten", "ReLU",
    "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d",
    "AlphaDropout", "FeatureAlphaDropout", "MSELoss", "L1Loss", "NLLLoss",
    "CrossEntropyLoss", "BCELoss", "BCEWithLogitsLoss",
]


# ---------------------------------------------------------------------------------------------
# Parameter
# ---------------------------------------------------------------------------------------------


class Parameter(Tensor):
    """A leaf tensor that a ``Module`` registers when it is assigned as an attribute.

    ``Parameter(data)`` shares ``data``'s storage when ``data`` is a contiguous float64 leaf
    (as in PyTorch) and requires grad unless ``requires_grad=False``.

    Example:
        >>> class Scale(nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.w = nn.Parameter(tg.ones(2))
        >>> [name for name, _ in Scale().named_parameters()]
        ['w']
        >>> nn.Parameter(tg.zeros(2))
        Parameter containing:
        tensor([0., 0.], requires_grad=True)
    """

    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            value = np.empty((0,), dtype=np.float64)
        elif isinstance(data, Tensor):
            value = data._value
            # a recorded result's value is a view into its tape: give the parameter its own
            if not data.is_leaf or not value.flags.c_contiguous:
                value = np.array(value, order="C")
        else:
            raise TypeError(
                f"Parameter(): argument 'data' must be Tensor, not {type(data).__name__}")
        p = Tensor._make(value, cls=cls)
        if requires_grad:
            if value.dtype.kind != "f":
                raise RuntimeError(
                    "Only Tensors of floating point and complex dtype can require gradients")
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad=True):
        pass  # everything happens in __new__ (Tensor.__init__ refuses direct construction)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        # the values only, as PyTorch's Parameter: a copy starts without a gradient (copies
        # of a trained layer, as TransformerEncoder makes, must not inherit its .grad)
        p = Parameter(tg.from_numpy(self._value.copy()), self.requires_grad)
        memo[id(self)] = p
        return p

    def __reduce__(self):
        return (_rebuild_parameter, (self._value, self.requires_grad))


def _rebuild_parameter(value, requires_grad):
    return Parameter(tg.from_numpy(value), requires_grad)


class Buffer(Tensor):
    """A tensor that a ``Module`` registers as a buffer when it is assigned as an attribute
    (``self.running = nn.Buffer(tg.zeros(3))``): state that is not a parameter, saved by
    ``state_dict`` unless ``persistent=False``.  ``Buffer(data)`` is ``data.detach()``
    requiring grad as ``data`` does; once registered it is a plain tensor, as in PyTorch.

    Example:
        >>> class Stats(nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.mean = nn.Buffer(tg.zeros(2))
        ...         self.scratch = nn.Buffer(tg.ones(1), persistent=False)
        >>> m = Stats()
        >>> list(m.state_dict()), type(m.mean).__name__, len(list(m.buffers()))
        (['mean'], 'Tensor', 2)
    """

    __slots__ = ()
    persistent = True

    def __new__(cls, data, *, persistent=True):
        if not isinstance(data, Tensor):
            raise AttributeError(f"'{type(data).__name__}' object has no attribute 'detach'")
        t = data.detach()
        if data.requires_grad:
            t.requires_grad_(True)
        # the persistence is the class: a Tensor has no room for another attribute
        t.__class__ = cls if persistent else _NonPersistentBuffer
        return t

    def __init__(self, data, *, persistent=True):
        pass  # everything happens in __new__ (Tensor.__init__ refuses direct construction)


class _NonPersistentBuffer(Buffer):
    """A ``Buffer(..., persistent=False)``: left out of ``state_dict``."""

    __slots__ = ()
    persistent = False


# ---------------------------------------------------------------------------------------------
# Module
# ---------------------------------------------------------------------------------------------


# the state_dict key of what a module's get_extra_state returns ("0._extra_state")
_EXTRA_STATE_KEY = "_extra_state"


def _overrides(module, method):
    """Whether ``module``'s class defines its own ``method`` (get_extra_state and
    set_extra_state take part in state dicts only then)."""
    base = getattr(Module, method)
    return getattr(type(module), method, base) is not base


class _HookWithModule:
    """A load_state_dict pre-hook that is given its module first; the module is held
    weakly, so that registering a hook does not keep the module alive through its own
    hook dict."""

    def __init__(self, hook, module):
        self.hook = hook
        self.module = weakref.ref(module)

    def __call__(self, *args, **kwargs):
        module = self.module()
        if module is None:
            raise RuntimeError("You are trying to call the hook of a dead Module!")
        return self.hook(module, *args, **kwargs)

    # a copy (deepcopy, pickle) holds the module itself, so that the copied module's hook
    # is given the copied module
    def __getstate__(self):
        return {"hook": self.hook, "module": self.module()}

    def __setstate__(self, state):
        if state["module"] is None:
            raise RuntimeError("You are trying to revive the hook of a dead Module!")
        self.hook = state["hook"]
        self.module = weakref.ref(state["module"])


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns: the keys it could not match."""

    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(text, spaces):
    """Indent every line of ``text`` but the first."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    pad = " " * spaces
    return lines[0] + "\n" + "\n".join(pad + line for line in lines[1:])


# --- global module hooks (torch.nn.modules.module.register_module_forward_*hook) -----------
# hook id -> callable; run before every module's own hooks, for debugging and profiling
_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()
_global_forward_hooks_with_kwargs = set()
_global_forward_hooks_always_called = set()


def register_module_forward_pre_hook(hook):
    """Call ``hook(module, args)`` before the ``forward`` of every module, ahead of the
    module's own forward pre-hooks; a result other than None replaces the positional
    arguments.  Returns a handle whose ``remove()`` unregisters it.

    Example:
        >>> seen = []
        >>> handle = nn.modules.module.register_module_forward_pre_hook(
        ...     lambda module, args: seen.append(type(module).__name__))
        >>> _ = nn.Sequential(nn.Tanh())(tg.ones(1))
        >>> handle.remove()
        >>> seen
        ['Sequential', 'Tanh']
    """
    handle = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    return handle


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """Call ``hook(module, args, output)`` after the ``forward`` of every module, ahead of
    the module's own forward hooks; a result other than None replaces the output.
    ``with_kwargs`` and ``always_call`` as for ``Module.register_forward_hook``.  Returns a
    handle whose ``remove()`` unregisters it.

    Example:
        >>> seen = []
        >>> handle = nn.modules.module.register_module_forward_hook(
        ...     lambda module, args, out: seen.append(tuple(out.shape)))
        >>> _ = nn.Linear(2, 3)(tg.ones(1, 2))
        >>> handle.remove()
        >>> seen
        [(1, 3)]
    """
    handle = RemovableHandle(_global_forward_hooks,
                             extra_dict=[_global_forward_hooks_with_kwargs,
                                         _global_forward_hooks_always_called])
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs.add(handle.id)
    if always_call:
        _global_forward_hooks_always_called.add(handle.id)
    return handle


class _BackwardHook:
    """What a module with full backward (pre-)hooks wraps one call in, as PyTorch's
    ``BackwardHook``: its tensor inputs and its outputs each pass through one identity
    ``BackwardHookFunction``, whose backward is where the hooks run -- the outputs' one sees
    all of ``grad_output`` at once (the pre-hooks run there), the inputs' one all of
    ``grad_input`` (the hooks run there, with the ``grad_output`` kept from before)."""

    def __init__(self, module, hooks, pre_hooks):
        self.module, self.hooks, self.pre_hooks = module, hooks, pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = -1
        self.input_index = self.output_index = None

    @staticmethod
    def _pack(indices, values, size):
        res = [None] * size
        for i, v in zip(indices, values):
            res[i] = v
        return tuple(res)

    def _wrap(self, args, on_backward):
        """``args`` with its tensors passed through one BackwardHookFunction (unchanged
        when none needs grad, or grad mode is off), and the tensors' positions (None then)."""
        index = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in index]
        if not (any(t.requires_grad for t in tensors) and tg.is_grad_enabled()):
            return args, None
        new = _BackwardHookFunction.apply(on_backward, *tensors)
        out = list(args)
        for i, t in zip(index, new):
            out[i] = t
        return tuple(out), index

    def setup_input_hook(self, args):
        def on_backward(grads):
            # PyTorch materialises here: a tensor input whose gradient backward never
            # reached (one that needs no grad, or went unused) shows zeros, not None
            grads = tuple(tg.zeros(t.shape, dtype=t.dtype) if g is None else g
                          for g, t in zip(grads, tensors))
            if self.grad_outputs is None:
                return grads
            res = self._pack(self.input_index, grads, self.n_inputs)
            for hook in self.hooks:
                out = hook(self.module, res, self.grad_outputs)
                if out is None:
                    continue
                if len(out) != len(res):
                    raise RuntimeError("Backward hook returned an invalid number of "
                                       f"grad_input, got {len(out)}, but expected {len(res)}")
                res = out
            self.grad_outputs = None
            return tuple(res[i] for i in self.input_index)

        tensors = [a for a in args if isinstance(a, Tensor)]
        res, self.input_index = self._wrap(args, on_backward)
        self.n_inputs = len(args)
        return res

    def setup_output_hook(self, result):
        def on_backward(grads):
            self.grad_outputs = self._pack(self.output_index, grads, self.n_outputs)
            for pre_hook in self.pre_hooks:
                out = pre_hook(self.module, self.grad_outputs)
                if out is None:
                    continue
                if len(out) != len(self.grad_outputs):
                    raise RuntimeError(
                        "Backward pre hook returned an invalid number of grad_output, got "
                        f"{len(out)}, but expected {len(self.grad_outputs)}")
                self.grad_outputs = out
            local = self.grad_outputs
            if self.input_index is None:
                # no input needs grad: the inputs' function never runs, so the hooks run
                # here, with grad_input all None
                warnings.warn(
                    "Full backward hook is firing when gradients are computed with respect to "
                    "module outputs since no inputs require gradients. See "
                    "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
                    "#torch.nn.Module.register_full_backward_hook for more details.",
                    stacklevel=2)
                grad_inputs = (None,) * self.n_inputs
                for hook in self.hooks:
                    res = hook(self.module, grad_inputs, self.grad_outputs)
                    if res is not None and not (isinstance(res, tuple)
                                                and all(g is None for g in res)):
                        raise RuntimeError(
                            "Backward hook for Modules where no input requires gradient "
                            "should always return None or None for all gradients.")
                self.grad_outputs = None
            return tuple(local[i] for i in self.output_index)

        single = not isinstance(result, tuple)
        args = (result,) if single else result
        res, self.output_index = self._wrap(args, on_backward)
        self.n_outputs = len(args)
        return res[0] if single else res


class _BackwardHookFunction(Function):
    """The identity whose backward runs a module's backward hooks (see ``_BackwardHook``);
    its outputs' ``grad_fn`` is ``BackwardHookFunctionBackward``, as in PyTorch."""

    @staticmethod
    def forward(ctx, on_backward, *args):
        ctx.on_backward = on_backward
        ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
        # the hooks see None for an output's gradient that backward never reached
        ctx.set_materialize_grads(False)
        return args

    @staticmethod
    def backward(ctx, *grads):
        return (None,) + tuple(ctx.on_backward(grads))


# PyTorch's class is torch.nn.modules._functions.BackwardHookFunction: the node's name
_BackwardHookFunction.__name__ = _BackwardHookFunction.__qualname__ = "BackwardHookFunction"
_BackwardHookFunction._backward_cls.__name__ = "BackwardHookFunctionBackward"
_BackwardHookFunction._backward_cls.__qualname__ = "BackwardHookFunctionBackward"


class Module:
    """Base class of layers and models.

    Assigning a ``Parameter`` or a ``Module`` to an attribute registers it (in assignment
    order), which is what ``parameters()``, ``state_dict()``, ``train()``/``eval()`` and
    ``repr`` walk. Subclasses call ``super().__init__()`` first and define ``forward``;
    calling the module calls ``forward``.

    Example:
        >>> class Affine(nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.scale = nn.Parameter(tg.ones(3))
        ...         self.inner = nn.Linear(3, 3)
        ...     def forward(self, x):
        ...         return self.inner(x) * self.scale
        >>> [name for name, _ in Affine().named_parameters()]
        ['scale', 'inner.weight', 'inner.bias']
        >>> Affine()(tg.ones(4, 3)).shape
        tapegrad.Size([4, 3])
    """

    # the version state_dict records in its _metadata (a class whose saved layout changed
    # raises it and reads it back in _load_from_state_dict)
    _version = 1

    def __init__(self):
        # object.__setattr__: our own __setattr__ looks these dicts up
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())
        # hook id -> callable, run in order by __call__ (weight_norm, spectral_norm)
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks_with_kwargs", set())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks_with_kwargs", set())
        object.__setattr__(self, "_forward_hooks_always_called", set())
        object.__setattr__(self, "_backward_hooks", OrderedDict())
        object.__setattr__(self, "_backward_pre_hooks", OrderedDict())
        # hook id -> callable: state_dict's (pre-)hooks and load_state_dict's
        object.__setattr__(self, "_state_dict_hooks", OrderedDict())
        object.__setattr__(self, "_state_dict_pre_hooks", OrderedDict())
        object.__setattr__(self, "_load_state_dict_pre_hooks", OrderedDict())
        object.__setattr__(self, "_load_state_dict_post_hooks", OrderedDict())

    def __setstate__(self, state):
        self.__dict__.update(state)
        # a module pickled by an earlier tapegrad lacks the state-dict hook dicts, which
        # state_dict and load_state_dict read: it starts with none, as PyTorch's does
        for name in ("_state_dict_hooks", "_state_dict_pre_hooks",
                     "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks"):
            self.__dict__.setdefault(name, OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        # .get: a module whose __init__ skipped ours still calls (it has no hooks)
        d = self.__dict__
        if not (d.get("_forward_pre_hooks") or d.get("_forward_hooks")
                or d.get("_backward_hooks") or d.get("_backward_pre_hooks")
                or _global_forward_hooks or _global_forward_pre_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args, kwargs):
        """``__call__`` as PyTorch's ``_call_impl`` orders it: forward pre-hooks, the
        backward hooks' wrapping of the inputs, forward, forward hooks, then the wrapping of
        the outputs (so a forward hook sees the unwrapped result)."""
        if "_forward_hooks" not in self.__dict__:
            # a module whose __init__ skipped ours (only global hooks could be set)
            return self.forward(*args, **kwargs)
        result = None
        called_always = set()
        try:
            if self._forward_pre_hooks or _global_forward_pre_hooks:
                args, kwargs = self._run_forward_pre_hooks(args, kwargs)
            bw_hook = None
            if self._backward_hooks or self._backward_pre_hooks:
                bw_hook = _BackwardHook(self, list(self._backward_hooks.values()),
                                        list(self._backward_pre_hooks.values()))
                args = bw_hook.setup_input_hook(args)
            result = self.forward(*args, **kwargs)
            # a copy: a hook may remove itself (or another) while they run
            for key, hook in [*_global_forward_hooks.items(), *self._forward_hooks.items()]:
                if key in self._forward_hooks_always_called or \
                        key in _global_forward_hooks_always_called:
                    called_always.add(key)
                if key in self._forward_hooks_with_kwargs or \
                        key in _global_forward_hooks_with_kwargs:
                    hook_result = hook(self, args, kwargs, result)
                else:
                    hook_result = hook(self, args, result)
                if hook_result is not None:
                    result = hook_result
            if bw_hook is not None:
                if not isinstance(result, (Tensor, tuple)):
                    warnings.warn("For backward hooks to be called, module output should be a "
                                  f"Tensor or a tuple of Tensors but received {type(result)}",
                                  stacklevel=2)
                result = bw_hook.setup_output_hook(result)
            return result
        except Exception:
            # always_call hooks still run when forward (or an earlier hook) raised; what
            # they raise themselves is only warned about, the first error propagates
            for key, hook in [*_global_forward_hooks.items(),
                              *self.__dict__.get("_forward_hooks", {}).items()]:
                if key in called_always or not (key in self._forward_hooks_always_called or
                                                key in _global_forward_hooks_always_called):
                    continue
                try:
                    if key in self._forward_hooks_with_kwargs or \
                            key in _global_forward_hooks_with_kwargs:
                        hook_result = hook(self, args, kwargs, result)
                    else:
                        hook_result = hook(self, args, result)
                    if hook_result is not None:
                        result = hook_result
                except Exception as e:
                    warnings.warn("module forward hook with ``always_call=True`` raised an "
                                  "exception that was silenced as another error was raised "
                                  f"in forward: {e}", stacklevel=2)
            raise

    def _run_forward_pre_hooks(self, args, kwargs):
        with_kwargs = self._forward_pre_hooks_with_kwargs
        # a copy: a hook may remove itself (or another) while they run
        for key, hook in [*_global_forward_pre_hooks.items(), *self._forward_pre_hooks.items()]:
            if key in with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(
                            "forward pre-hook must return None or a tuple of (new_args, "
                            f"new_kwargs), but got {result}.")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        return args, kwargs

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args)`` before every ``forward``; a result other than None
        replaces the positional arguments (a non-tuple is made a 1-tuple).  With
        ``with_kwargs=True`` it is ``hook(module, args, kwargs)`` and returns None or
        ``(args, kwargs)``.  Returns a handle whose ``remove()`` unregisters the hook.

        Example:
            >>> lin = nn.Linear(2, 1)
            >>> handle = lin.register_forward_pre_hook(lambda module, args: args[0] * 0.0)
            >>> lin(tg.ones(1, 2)).detach() == lin.bias.detach()
            tensor([[True]])
            >>> handle.remove()
        """
        handle = RemovableHandle(self._forward_pre_hooks,
                                 extra_dict=[self._forward_pre_hooks_with_kwargs])
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """Call ``hook(module, args, output)`` after every ``forward``; a result other than
        None replaces the output.  With ``with_kwargs=True`` it is ``hook(module, args,
        kwargs, output)``; with ``always_call=True`` it runs even when forward raised;
        ``prepend=True`` runs it before the hooks already registered.  Returns a handle
        whose ``remove()`` unregisters the hook.

        Example:
            >>> lin = nn.Linear(2, 1)
            >>> handle = lin.register_forward_hook(lambda module, args, out: out * 0.0)
            >>> lin(tg.ones(1, 2)).detach()
            tensor([[0.]])
            >>> handle.remove()
        """
        handle = RemovableHandle(self._forward_hooks,
                                 extra_dict=[self._forward_hooks_with_kwargs,
                                             self._forward_hooks_always_called])
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        if always_call:
            self._forward_hooks_always_called.add(handle.id)
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook, prepend=False):
        """Call ``hook(module, grad_input, grad_output)`` during backward, once the
        gradients with respect to the module's positional inputs are known:
        ``grad_input`` has one entry per positional argument (None for one that is not a
        tensor or needs no grad), ``grad_output`` one per output.  A result other than
        None replaces ``grad_input``.  Returns a handle whose ``remove()`` unregisters it.

        Example:
            >>> lin = nn.Linear(2, 1)
            >>> seen = []
            >>> handle = lin.register_full_backward_hook(
            ...     lambda module, gin, gout: seen.append(gout[0].shape))
            >>> lin(tg.ones(1, 2, requires_grad=True)).sum().backward()
            >>> seen
            [tapegrad.Size([1, 1])]
        """
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """Call ``hook(module, grad_output)`` during backward, when the gradients with
        respect to the module's outputs are known and before those of its inputs are
        computed; a result other than None replaces ``grad_output``.  Returns a handle
        whose ``remove()`` unregisters it.

        Example:
            >>> lin = nn.Linear(2, 1)
            >>> x = tg.ones(1, 2, requires_grad=True)
            >>> handle = lin.register_full_backward_pre_hook(
            ...     lambda module, gout: (gout[0] * 2.0,))
            >>> lin(x).sum().backward()
            >>> x.grad.equal(2.0 * lin.weight.detach())
            True
        """
        handle = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[handle.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    # --- registration -------------------------------------------------------------------
    def _check_name(self, kind, name):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
        if "." in name:
            # PyTorch names the module in this one
            got = f", got: {name}" if kind == "module" else ""
            raise KeyError(f'{kind} name can\'t contain "."{got}')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')

    def register_parameter(self, name, param):
        """Register ``param`` (a Parameter, or None for an absent one) under ``name``."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name("parameter", name)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                "(tapegrad.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Register a tensor that is state but not a parameter (saved by ``state_dict``
        unless ``persistent=False``)."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name("buffer", name)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                "(tapegrad Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Register ``module`` (or None) as a child under ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        self._check_name("module", name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, keep="_parameters")
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as parameter '{name}' "
                    "(tapegrad.nn.Parameter or None expected)")
            params[name] = None
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, keep="_modules")
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as child module '{name}' "
                    "(tapegrad.nn.Module or None expected)")
            modules[name] = None
            return
        buffers = d.get("_buffers")
        if isinstance(value, Buffer):
            if buffers is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            persistent = value.persistent
            value.__class__ = Tensor     # registered, it is a plain tensor (as in PyTorch)
            if name not in buffers:
                self._forget(name, keep="_buffers")
            self.register_buffer(name, value, persistent)
            return
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as buffer '{name}' "
                    "(tapegrad.Tensor or None expected)")
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def _forget(self, name, keep):
        """Drop ``name`` wherever else it was registered, so it lives in one place; in its
        own dict (``keep``) a replaced member keeps its position, as in PyTorch."""
        self.__dict__.pop(name, None)
        for key in ("_parameters", "_buffers", "_modules"):
            if key != keep:
                self.__dict__[key].pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __getattr__(self, name):
        # only reached when normal lookup fails: registered members live in the dicts
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            members = d.get(key)
            if members is not None and name in members:
                return members[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for key in ("_parameters", "_buffers", "_modules"):
            members = self.__dict__.get(key)
            if members is not None and name in members:
                del members[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = set(super().__dir__())
        for key in ("_parameters", "_buffers", "_modules"):
            keys.update(self.__dict__.get(key, ()))
        return sorted(k for k in keys if not k[0].isdigit())

    # --- traversal ----------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(qualified name, module) for this module and every descendant, depth first."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def _named_members(self, kind, prefix, recurse, remove_duplicate):
        seen = set()
        owners = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for owner_prefix, owner in owners:
            for name, value in owner.__dict__[kind].items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield owner_prefix + ("." if owner_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(qualified name, Parameter): each module's own parameters in registration order,
        modules visited depth first; a shared parameter is yielded once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # --- members by qualified name ("block.0.weight") ---------------------------------
    def get_submodule(self, target):
        """The descendant named by ``target`` ("net_b.linear"; "" is this module), one
        attribute at a time: AttributeError names the first step that is missing or is not
        a module.

        Example:
            >>> model = nn.Sequential(nn.Sequential(nn.Tanh()))
            >>> model.get_submodule("0.0")
            Tanh()
        """
        if target == "":
            return self
        owner = self
        for step in target.split("."):
            # hasattr/getattr as PyTorch does: a method's name is found, and then refused as
            # not a module
            if not hasattr(owner, step):
                raise AttributeError(f"{owner._get_name()} has no attribute `{step}`")
            owner = getattr(owner, step)
            if not isinstance(owner, Module):
                raise AttributeError(f"`{step}` is not an nn.Module")
        return owner

    def set_submodule(self, target, module, strict=False):
        """Put ``module`` at ``target`` ("net_b.conv"): the owner must exist; with
        ``strict`` so must the child being replaced.  What is there already must be a module
        (or missing); a parameter or a plain attribute is not replaced.

        Example:
            >>> model = nn.Sequential(nn.Tanh())
            >>> model.set_submodule("0", nn.ReLU())
            >>> model
            Sequential(
              (0): ReLU()
            )
        """
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        owner_path, _, name = target.rpartition(".")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        owner = self.get_submodule(owner_path)
        if not hasattr(owner, name):
            if strict:
                raise AttributeError(f"{owner._get_name()} has no attribute `{name}`")
        elif not isinstance(getattr(owner, name), Module):
            raise AttributeError(f"`{name}` is not an nn.Module")
        setattr(owner, name, module)

    def get_parameter(self, target):
        """The parameter named by ``target`` ("0.weight"); AttributeError when the path is
        missing or ends in something that is not a Parameter.

        Example:
            >>> nn.Sequential(nn.BatchNorm1d(3)).get_parameter("0.bias").shape
            tapegrad.Size([3])
        """
        owner_path, _, name = target.rpartition(".")
        owner = self.get_submodule(owner_path)
        if not hasattr(owner, name):
            raise AttributeError(f"{owner._get_name()} has no attribute `{name}`")
        param = getattr(owner, name)
        if not isinstance(param, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return param

    def get_buffer(self, target):
        """The buffer named by ``target`` ("0.running_mean"); AttributeError when the path
        is missing or ends in something that is not a registered buffer.

        Example:
            >>> nn.Sequential(nn.BatchNorm1d(2)).get_buffer("0.running_var")
            tensor([1., 1.])
        """
        owner_path, _, name = target.rpartition(".")
        owner = self.get_submodule(owner_path)
        if not hasattr(owner, name):
            raise AttributeError(f"{owner._get_name()} has no attribute `{name}`")
        buffer = getattr(owner, name)
        if name not in owner._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return buffer

    def apply(self, fn):
        """Call ``fn`` on every child (recursively), then on this module; returns self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # --- modes and gradients -----------------------------------------------------------
    def train(self, mode=True):
        """Set training mode here and in every descendant (Dropout reads it); returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Drop every parameter's gradient (``set_to_none``), or zero it in place."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
                continue
            if p.grad.grad_fn is not None:
                p.grad.detach_()
            else:
                p.grad.requires_grad_(False)
            p.grad.zero_()

    def _apply(self, fn, recurse=True):
        """Replace every parameter's and buffer's value by ``fn`` of it (the descendants'
        first, unless not ``recurse``), as PyTorch's conversions do: a parameter keeps its
        identity (an optimizer holding it still sees it) and takes the new value as its
        ``.data``, its gradient likewise; a buffer is replaced by the result.  Returns
        self."""
        if recurse:
            for module in self.children():
                module._apply(fn)
        for param in self._parameters.values():
            if param is None:
                continue
            with tg.no_grad():
                applied = fn(param)
            if applied is not param:
                param.data = applied
            grad = param.grad
            if grad is not None:
                with tg.no_grad():
                    applied = fn(grad)
                if applied is not grad:
                    grad.data = applied
        for name, buffer in self._buffers.items():
            if buffer is not None:
                self._buffers[name] = fn(buffer)
        return self

    def type(self, dst_type):
        """Every parameter and buffer converted with ``tensor.type(dst_type)`` (a dtype or a
        type name such as "torch.DoubleTensor"), in place; returns self.

        Example:
            >>> bn = nn.BatchNorm1d(2).type(tg.float64)
            >>> bn.num_batches_tracked.dtype
            tapegrad.float64
        """
        return self._apply(lambda t: t.type(dst_type))

    def to_empty(self, *, device, recurse=True):
        """Every parameter and buffer given new, uninitialised memory of its shape and
        dtype on ``device`` (for a module built without real values, filled afterwards by
        ``load_state_dict`` or ``reset_parameters``); returns self."""
        return self._apply(lambda t: tg.empty_like(t, device=device), recurse=recurse)

    def share_memory(self):
        """``share_memory_()`` of every parameter and buffer (tapegrad keeps them in this
        process: they are only marked shared); returns self."""
        return self._apply(lambda t: t.share_memory_())

    # everything is float64 on the CPU already: these exist so ported scripts run unchanged,
    # and raise where a script asks for what tapegrad does not have
    def double(self):
        return self

    def float(self):
        """Itself: tapegrad's floating type is float64 (its ``float`` names float64)."""
        return self

    def half(self):
        _dtype.resolve(_dtype.float16)   # raises: tapegrad has no float16

    def cpu(self):
        return self

    def cuda(self, device=None):
        _device.check("cuda")

    def to(self, *args, **kwargs):
        """Itself, after checking the device and dtype asked for (PyTorch's forms: ``to(device,
        dtype)``, ``to(dtype)``, ``to(tensor)``): parameters are float64 on the CPU already."""
        _, dt, _, _ = parse_to(args, kwargs)
        if dt is not None and not dt.is_floating_point:
            raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but got "
                            f"desired dtype={dt!r}")
        return self

    # --- state_dict ---------------------------------------------------------------------
    def get_extra_state(self):
        """What this module saves in ``state_dict`` besides its tensors, under the key
        ``"_extra_state"``: override it (and ``set_extra_state``) to use it.  Only an
        overriding class has the key; this one is never called then, so it raises."""
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called. "
            "Please file an issue at https://github.com/pytorch/pytorch/issues/new?template="
            "bug-report.yml to report this bug.")

    def set_extra_state(self, state):
        """Take back what ``get_extra_state`` returned, from ``load_state_dict``: override it
        along with ``get_extra_state``."""
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called. "
            "Please file an issue at https://github.com/pytorch/pytorch/issues/new?template="
            "bug-report.yml to report this bug.")

    def register_state_dict_pre_hook(self, hook):
        """Call ``hook(module, prefix, keep_vars)`` when ``state_dict`` reaches this module,
        before it saves anything.  Returns a handle whose ``remove()`` unregisters it."""
        handle = RemovableHandle(self._state_dict_pre_hooks)
        self._state_dict_pre_hooks[handle.id] = hook
        return handle

    def register_state_dict_post_hook(self, hook):
        """Call ``hook(module, state_dict, prefix, local_metadata)`` once this module and its
        descendants are saved; it may change ``state_dict`` in place and must return None.
        Returns a handle whose ``remove()`` unregisters it.

        Example:
            >>> def drop_count(module, state, prefix, local_metadata):
            ...     del state[prefix + "num_batches_tracked"]
            >>> bn = nn.BatchNorm1d(2)
            >>> handle = bn.register_state_dict_post_hook(drop_count)
            >>> list(bn.state_dict())
            ['weight', 'bias', 'running_mean', 'running_var']
        """
        # the mark, on the hook itself as PyTorch puts it, is what tells state_dict that
        # this hook may not return a replacement (the private registration's may)
        hook._from_public_api = True
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    def _register_state_dict_hook(self, hook):
        """The older post-hook: as ``register_state_dict_post_hook``, but a result other
        than None replaces the state dict (when this module is the one asked for it)."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError(
                "Cannot register the same function as the state dict post hook that was "
                "previously registered via register_state_dict_post_hook")
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    def register_load_state_dict_pre_hook(self, hook):
        """Call ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` when ``load_state_dict`` reaches this module, before
        it loads anything (it may edit ``state_dict``, a copy of the one given).  Returns a
        handle whose ``remove()`` unregisters it."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """As ``register_load_state_dict_pre_hook``; without ``with_module`` the hook is
        not given the module."""
        if with_module:
            hook = _HookWithModule(hook, self)
        handle = RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[handle.id] = hook
        return handle

    def register_load_state_dict_post_hook(self, hook):
        """Call ``hook(module, incompatible_keys)`` once this module and its descendants
        are loaded.  ``incompatible_keys.missing_keys`` and ``.unexpected_keys`` are the
        lists gathered so far, which the hook may edit in place (what ``strict`` then
        reports); it must return None.  Returns a handle whose ``remove()`` unregisters it.

        Example:
            >>> bn = nn.BatchNorm1d(2)
            >>> handle = bn.register_load_state_dict_post_hook(
            ...     lambda module, keys: keys.missing_keys.clear())
            >>> bn.load_state_dict({})
            <All keys matched successfully>
        """
        handle = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[handle.id] = hook
        return handle

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An OrderedDict name -> tensor of every parameter and persistent buffer, with
        qualified names ("0.weight"), and the ``"_extra_state"`` of each module whose class
        overrides ``get_extra_state``.  Values share storage with the module (detached unless
        ``keep_vars``).  Its ``_metadata`` holds each module's ``{"version": ...}`` by
        qualified name, as PyTorch's does."""
        if args:
            # the old positional form (destination, prefix, keep_vars), deprecated
            warnings.warn(
                "Positional args are being deprecated, use kwargs instead. Refer to "
                "https://pytorch.org/docs/main/generated/torch.nn.Module.html"
                "#torch.nn.Module.state_dict for details.", FutureWarning, stacklevel=2)
            if destination is None:
                destination = args[0]
            if len(args) > 1 and prefix == "":
                prefix = args[1]
            if len(args) > 2 and keep_vars is False:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            result = hook(self, destination, prefix, local_metadata)
            if getattr(hook, "_from_public_api", False):
                if result is not None:
                    raise RuntimeError("state_dict post-hook must return None")
            elif result is not None:
                # (in a descendant the replacement is lost: its parent keeps its own dict,
                # as in PyTorch)
                destination = result
        return destination

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """This module's own parameters, persistent buffers and extra state into
        ``destination`` (a lazy module overrides it to keep its uninitialized ones as they
        are)."""
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if _overrides(self, "get_extra_state"):
            destination[prefix + _EXTRA_STATE_KEY] = self.get_extra_state()

    def _local_state(self):
        state = OrderedDict((k, v) for k, v in self._parameters.items() if v is not None)
        state.update((k, v) for k, v in self._buffers.items()
                     if v is not None and k not in self._non_persistent_buffers_set)
        return state

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Load this module's own members from ``state_dict`` (its descendants are loaded
        by their own calls), with PyTorch's arguments, so that a subclass written for it
        overrides this one: keys not found go to ``missing_keys`` and keys not wanted to
        ``unexpected_keys`` (with ``strict``), other problems to ``error_msgs``."""
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                 error_msgs)
        assign = local_metadata.get("assign_to_params_buffers", False)
        local = self._local_state()
        for name, target in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            source = state_dict[key]
            if getattr(source, "cls_to_become", None) is not None and \
                    getattr(target, "cls_to_become", None) is None:
                source.shape    # an uninitialized source has no shape: PyTorch's error
            if isinstance(source, Tensor):
                value = source._value
            elif isinstance(source, np.ndarray):
                value = source
            else:
                error_msgs.append(
                    f'While copying the parameter named "{key}", expected tapegrad.Tensor or '
                    f"Tensor-like object from checkpoint but received {type(source)}")
                continue
            scalar_of_one = target._value.ndim == 0 and value.ndim == 1 and value.size == 1
            if scalar_of_one:
                value = value[0]   # PyTorch reads checkpoints that stored scalars as (1,)
            if value.shape != target._value.shape:
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape "
                    f"{tg.Size(value.shape)} from checkpoint, the shape in current model is "
                    f"{target.shape}.")
                continue
            if assign:
                # the state dict's own tensor takes the member's place, as PyTorch's assign
                # does (a Parameter around it where the member is one, keeping the member's
                # requires_grad): writes through either are seen by both
                given = tg.tensor(value) if scalar_of_one or not isinstance(source, Tensor) \
                    else source
                if name in self._parameters:
                    if isinstance(given, Parameter):
                        given.requires_grad_(target.requires_grad)
                    else:
                        given = Parameter(given, target.requires_grad)
                    self._parameters[name] = given
                else:
                    self._buffers[name] = given
            else:
                with tg.no_grad():
                    target.copy_(tg.from_numpy(np.asarray(value)))
        extra_key = prefix + _EXTRA_STATE_KEY
        if _overrides(self, "set_extra_state"):
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if not strict:
            return
        for key in state_dict:
            if key.startswith(prefix) and key != extra_key:
                # a dotted rest must name a child module, a plain one a local member
                parts = key[len(prefix):].split(".", 1)
                if (parts[0] not in self._modules) if len(parts) > 1 else \
                        (parts[0] not in local):
                    unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy values from ``state_dict`` into the parameters and buffers, in place, and
        hand each ``"_extra_state"`` to its module's ``set_extra_state``.

        With ``strict``, missing or unexpected keys raise; a shape mismatch always raises.
        Returns ``(missing_keys, unexpected_keys)``.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        # a copy, which the pre-hooks may edit; it keeps the metadata the saving attached
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module, local_state_dict, prefix):
            local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            # strict is always passed on: the lists are trimmed here, not in each module
            module._load_from_state_dict(local_state_dict, prefix, local_metadata, True,
                                         missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    load(child, {k: v for k, v in local_state_dict.items()
                                 if k.startswith(child_prefix)}, child_prefix)
            # the hooks see (and may edit) the lists as gathered so far
            incompatible = _IncompatibleKeys(missing, unexpected)
            for hook in module._load_state_dict_post_hooks.values():
                if hook(module, incompatible) is not None:
                    raise AssertionError(
                        "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                        "expected to return new values, if incompatible_keys need to be "
                        "modified, it should be done inplace.")

        load(self, state_dict, "")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # --- repr ---------------------------------------------------------------------------
    def extra_repr(self):
        """The text inside the parentheses of this module's repr line (override it)."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _addindent(repr(module), 2)
                       for name, module in self._modules.items()]
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                text += extra_lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"


# ---------------------------------------------------------------------------------------------
# Containers
# ---------------------------------------------------------------------------------------------


class Sequential(Module):
    """Modules applied one after another; ``Sequential(a, b)`` names them "0", "1", and
    ``Sequential(OrderedDict(...))`` keeps the given names.

    Shape: the first module's input -> the last module's output.

    Example:
        >>> model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
        >>> model
        Sequential(
          (0): Linear(in_features=3, out_features=4, bias=True)
          (1): Tanh()
          (2): Linear(in_features=4, out_features=1, bias=True)
        )
        >>> model(tg.ones(5, 3)).shape
        tapegrad.Size([5, 1])
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._key_at(idx)]

    def __setitem__(self, idx, module):
        setattr(self, self._key_at(idx), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for key in list(self._modules)[idx]:
                delattr(self, key)
        else:
            delattr(self, self._key_at(idx))
        # renumbered, so that the names stay "0".."n-1" (names given by an OrderedDict too,
        # as in PyTorch)
        self._modules = OrderedDict(
            (str(i), module) for i, module in enumerate(self._modules.values()))

    def _key_at(self, idx):
        """The name of the module at position ``idx`` (negative counts from the end)."""
        n = len(self._modules)
        idx = operator.index(idx)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range")
        return list(self._modules)[idx % n]

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        return Sequential(*self, *other)

    def __iadd__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        offset = len(self)
        for i, module in enumerate(other):
            self.add_module(str(offset + i), module)
        return self

    def _check_factor(self, other):
        # (bool passes, being an int, as it does in PyTorch)
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")

    def __mul__(self, other):
        """A new Sequential of ``other`` repeats of these modules: the same module objects
        (so the repeats share parameters), renumbered "0", "1", ..."""
        self._check_factor(other)
        return Sequential(*(list(self) * other))

    def __rmul__(self, other):
        return self.__mul__(other)

    def __imul__(self, other):
        """These modules repeated ``other`` times in place, as the same objects."""
        self._check_factor(other)
        original = list(self)
        for module in original * (other - 1):
            self.add_module(str(len(self)), module)
        return self

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index, module):
        """Put ``module`` at position ``index`` (negative counts from the end; ``len(self)``
        appends), moving the later ones up by one; returns self.

        Example:
            >>> nn.Sequential(nn.Tanh(), nn.ReLU()).insert(-1, nn.Sigmoid())
            Sequential(
              (0): Tanh()
              (1): Sigmoid()
              (2): ReLU()
            )
        """
        if not isinstance(module, Module):
            # the class as PyTorch names its own, at its home nn.modules.module
            raise AssertionError(
                "module should be of type: <class 'tapegrad.nn.modules.module.Module'>")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        # shifted by name from the end, as PyTorch does: a name given by an OrderedDict
        # stays, and the new module takes the name str(index)
        for i in range(n, index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module
        return self

    def pop(self, key):
        """Remove and return the module at ``key`` (a position or a slice, which returns a
        Sequential); the rest are renumbered."""
        module = self[key]
        del self[key]
        return module

    def extend(self, sequential):
        """Append every module of ``sequential`` (any iterable of modules); returns self."""
        for module in sequential:
            self.append(module)
        return self


class Identity(Module):
    """Returns its input unchanged (arguments are accepted and ignored, as in PyTorch): a
    placeholder where a model takes a layer.

    Example:
        >>> x = tg.ones(2)
        >>> nn.Identity(54, unused="argument")(x) is x
        True
    """

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Flatten(Module):
    """Flattens dims ``start_dim`` to ``end_dim`` into one (by default all but the batch
    dim).

    Shape: ``(N, *rest)`` to ``(N, product of rest)`` with the defaults.

    Example:
        >>> nn.Flatten()(tg.zeros(8, 2, 3)).shape
        tapegrad.Size([8, 6])
    """

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dim ``dim`` into ``unflattened_size`` (which may hold one -1).

    Shape: ``(..., n, ...)`` to ``(..., *unflattened_size, ...)`` at ``dim``, with ``n`` the
    product of ``unflattened_size``.

    Example:
        >>> nn.Unflatten(1, (2, -1))(tg.zeros(8, 6)).shape
        tapegrad.Size([8, 2, 3])
    """

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError("unflattened_size must be a tuple of ints, but found type "
                            f"{type(unflattened_size).__name__}")
        for i, size in enumerate(unflattened_size):
            if not isinstance(size, int):
                raise TypeError("unflattened_size must be tuple of ints, but found element of "
                                f"type {type(size).__name__} at pos {i}")
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input):
        sizes = list(self.unflattened_size)
        if not sizes:
            raise RuntimeError("unflatten: sizes must be non-empty")
        shape = input.shape
        d = _wrap_dim(self.dim, len(shape))
        known = math.prod(s for s in sizes if s != -1)
        if (known != shape[d]) if -1 not in sizes else (known == 0 or shape[d] % known):
            raise RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size "
                               f"of dim {d} ({shape[d]}) in the input tensor")
        # a reshape of the same elements: PyTorch's unflatten is a view (ViewBackward0) too
        return input.reshape(*shape[:d], *sizes, *shape[d + 1:])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


# ---------------------------------------------------------------------------------------------
# Layers
# ---------------------------------------------------------------------------------------------


class Linear(Module):
    """``y = x @ weight.T + bias``, with a weight and a bias that training adjusts.

    weight (out_features, in_features) and bias (out_features,) start as PyTorch's do:
    U(-1/sqrt(in_features), 1/sqrt(in_features)) (``kaiming_uniform_`` with ``a = sqrt(5)``),
    weight drawn first, from tapegrad's generator.

    Shape: input ``(*, in_features)`` -> ``(*, out_features)``.

    Example:
        >>> layer = nn.Linear(3, 2)
        >>> layer.weight.shape, layer.bias.shape
        (tapegrad.Size([2, 3]), tapegrad.Size([2]))
        >>> layer(tg.ones(4, 3)).shape
        tapegrad.Size([4, 2])
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(tg.empty(out_features, in_features, dtype=dtype))
        if bias:
            self.bias = Parameter(tg.empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class ReLU(Module):
    """``max(x, 0)`` elementwise; with ``inplace`` the input is overwritten.

    Shape: that of the input.

    Example:
        >>> nn.ReLU()(tg.tensor([-1.0, 2.0]))
        tensor([0., 2.])
    """

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    """``tanh(x)`` elementwise.

    Shape: that of the input.

    Example:
        >>> nn.Tanh()(tg.tensor([0.0, 1.0]))
        tensor([0.0000, 0.7616])
    """
    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    """``1 / (1 + exp(-x))`` elementwise.

    Shape: that of the input.

    Example:
        >>> nn.Sigmoid()(tg.tensor([0.0, 2.0]))
        tensor([0.5000, 0.8808])
    """
    def forward(self, input):
        return F.sigmoid(input)


class Softmax(Module):
    """Softmax along ``dim``: ``nn.functional.softmax``.

    Shape: that of the input.

    Example:
        >>> nn.Softmax(dim=1)(tg.tensor([[1.0, 2.0, 3.0]]))
        tensor([[0.0900, 0.2447, 0.6652]])
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Log-softmax along ``dim``: ``nn.functional.log_softmax``.

    Shape: that of the input.

    Example:
        >>> nn.LogSoftmax(dim=1)(tg.tensor([[1.0, 2.0, 3.0]]))
        tensor([[-2.4076, -1.4076, -0.4076]])
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class _DropoutNd(Module):
    """What PyTorch's dropout modules share: ``p`` checked, ``inplace``, their repr."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zeroes elements with probability ``p`` while training (scaling the rest by
    1 / (1 - p)); the identity after ``eval()``.

    Shape: that of the input.

    Example:
        >>> drop = nn.Dropout(p=0.5)
        >>> _ = drop.eval()
        >>> drop(tg.ones(3))
        tensor([1., 1., 1.])
    """

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of a (N, C, L) or (C, L) input while training: ``F.dropout1d``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> nn.Dropout1d()(tg.ones(1, 3, 1)).reshape(-1)
        tensor([0., 0., 2.])
    """

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of a (N, C, H, W) input while training: ``F.dropout2d``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> nn.Dropout2d()(tg.ones(1, 3, 1, 1)).reshape(-1)
        tensor([0., 0., 2.])
    """

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of a (N, C, D, H, W) or (C, D, H, W) input while training:
    ``F.dropout3d``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> nn.Dropout3d()(tg.ones(1, 3, 1, 1, 1)).reshape(-1)
        tensor([0., 0., 2.])
    """

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Alpha dropout while training (keeps a SELU network's mean and variance):
    ``F.alpha_dropout``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> nn.AlphaDropout()(tg.ones(3))
        tensor([-0.7792, -0.7792,  1.6656])
    """

    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels while training: ``F.feature_alpha_dropout``.

    Example:
        >>> _ = tg.manual_seed(0)
        >>> nn.FeatureAlphaDropout()(tg.ones(1, 3, 1)).reshape(-1)
        tensor([-0.7792, -0.7792,  1.6656])
    """

    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training, self.inplace)


# ---------------------------------------------------------------------------------------------
# Losses: modules holding the options of the matching functional
# ---------------------------------------------------------------------------------------------


class _Loss(Module):
    """The base of the loss layers, as PyTorch's (custom losses subclass it): it holds
    ``reduction``, which PyTorch's deprecated ``size_average`` and ``reduce`` override (with
    its warning) when given."""

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)


class _WeightedLoss(_Loss):
    """A loss with an optional per-class ``weight``, held as a buffer as in PyTorch (so it
    is in ``state_dict()`` and follows ``.to()``)."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class MSELoss(_Loss):
    """Mean squared error: ``nn.functional.mse_loss`` with this module's ``reduction``.

    Shape: input and target of one shape -> ``()`` (the input's shape with ``"none"``).

    Example:
        >>> nn.MSELoss()(tg.tensor([1.0, 2.0]), tg.zeros(2))
        tensor(2.5000)
    """
    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error: ``nn.functional.l1_loss`` with this module's ``reduction``.

    Shape: as for ``MSELoss``.

    Example:
        >>> nn.L1Loss(reduction="sum")(tg.tensor([1.0, -2.0]), tg.zeros(2))
        tensor(3.)
    """
    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of class indices given log-probabilities:
    ``nn.functional.nll_loss`` with this module's options.

    Shape: input ``(N, C)``, target ``(N,)`` int64 -> ``()`` (``(N,)`` with ``"none"``).

    Example:
        >>> logp = nn.LogSoftmax(dim=1)(tg.tensor([[2.0, 0.0, 0.0]]))
        >>> nn.NLLLoss()(logp, tg.tensor([0]))
        tensor(0.2395)
    """
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Softmax cross-entropy of unnormalised scores: ``nn.functional.cross_entropy`` with
    this module's options.

    Shape: input ``(N, C)``, target ``(N,)`` class indices (or ``(N, C)`` probabilities) ->
    ``()`` (``(N,)`` with ``"none"``).

    Example:
        >>> loss = nn.CrossEntropyLoss()(tg.tensor([[2.0, 0.0, 0.0]]), tg.tensor([0]))
        >>> print(f"{loss.item():.4f}")
        0.2395
    """
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class BCELoss(_WeightedLoss):
    """Binary cross-entropy of probabilities: ``nn.functional.binary_cross_entropy``.

    Shape: input and target of one shape -> ``()`` (the input's shape with ``"none"``).

    Example:
        >>> nn.BCELoss()(tg.tensor([0.9, 0.2]), tg.tensor([1.0, 0.0]))
        tensor(0.1643)
    """
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight,
                                      reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy of logits, computed stably:
    ``nn.functional.binary_cross_entropy_with_logits``.

    Shape: as for ``BCELoss``.

    Example:
        >>> nn.BCEWithLogitsLoss()(tg.tensor([2.0, -1.0]), tg.tensor([1.0, 0.0]))
        tensor(0.2201)
    """
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean",
                 pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, weight=self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class Upsample(Module):
    """``F.interpolate`` as a layer: ``mode`` ``"nearest"``, ``"nearest-exact"``,
    ``"linear"``, ``"bilinear"``, ``"bicubic"``, ``"trilinear"`` or ``"area"``.

    Example:
        >>> nn.Upsample(scale_factor=2)(tg.zeros(1, 3, 4, 4)).shape
        tapegrad.Size([1, 3, 8, 8])
        >>> nn.Upsample(scale_factor=2, mode="linear")(tg.tensor([[[1.0, 2.0]]]))
        tensor([[[1.0000, 1.2500, 1.7500, 2.0000]]])
    """

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        # stored as PyTorch stores it: floats, a tuple kept a tuple (a list is refused), and
        # a zero factor taken as none
        if isinstance(scale_factor, tuple):
            scale_factor = tuple(float(factor) for factor in scale_factor)
        else:
            scale_factor = float(scale_factor) if scale_factor else None
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)

    def extra_repr(self):
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return f"{info}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of ``(N, C, H, W)`` to ``size`` or by ``scale_factor``:
    ``Upsample`` with ``mode="nearest"``.

    Example:
        >>> up = nn.UpsamplingNearest2d(scale_factor=2)
        >>> up
        UpsamplingNearest2d(scale_factor=2.0, mode='nearest')
        >>> up(tg.tensor([[[[1.0, 2.0]]]]))
        tensor([[[[1., 1., 2., 2.],
                  [1., 1., 2., 2.]]]])
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling of ``(N, C, H, W)`` to ``size`` or by ``scale_factor`` with the
    corner pixels aligned: ``Upsample`` with ``mode="bilinear"`` and ``align_corners=True``.

    Example:
        >>> up = nn.UpsamplingBilinear2d(scale_factor=2)
        >>> up
        UpsamplingBilinear2d(scale_factor=2.0, mode='bilinear')
        >>> up(tg.tensor([[[[1.0, 2.0]]]]))
        tensor([[[[1.0000, 1.3333, 1.6667, 2.0000],
                  [1.0000, 1.3333, 1.6667, 2.0000]]]])
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    """Rearranges ``(*, C r^2, H, W)`` into ``(*, C, H r, W r)`` for ``r`` the
    ``upscale_factor``: ``F.pixel_shuffle``, the sub-pixel upsampling of super-resolution
    networks.

    Example:
        >>> shuffle = nn.PixelShuffle(2)
        >>> shuffle
        PixelShuffle(upscale_factor=2)
        >>> shuffle(tg.ones(1, 8, 3, 3)).shape
        tapegrad.Size([1, 2, 6, 6])
    """

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """Rearranges ``(*, C, H r, W r)`` into ``(*, C r^2, H, W)`` for ``r`` the
    ``downscale_factor``: ``F.pixel_unshuffle``, the inverse of ``PixelShuffle``.

    Example:
        >>> unshuffle = nn.PixelUnshuffle(2)
        >>> unshuffle
        PixelUnshuffle(downscale_factor=2)
        >>> unshuffle(tg.ones(1, 2, 6, 6)).shape
        tapegrad.Size([1, 8, 3, 3])
    """

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """Splits the channels (dim 1) of ``(N, C, *)`` into ``groups`` groups and interleaves
    them: ``F.channel_shuffle(input, groups)``, ShuffleNet's mixing of grouped convolutions.

    Example:
        >>> shuffle = nn.ChannelShuffle(2)
        >>> shuffle
        ChannelShuffle(groups=2)
        >>> shuffle(tg.arange(4.0).reshape(1, 4, 1)).reshape(-1)
        tensor([0., 2., 1., 3.])
    """

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


class ZeroPad2d(Module):
    """Pads the last two dimensions with zeros: ``padding`` is one int for all four sides or
    ``(left, right, top, bottom)``.

    Example:
        >>> nn.ZeroPad2d(1)(tg.ones(1, 2, 2)).shape
        tapegrad.Size([1, 4, 4])
    """

    def __init__(self, padding):
        super().__init__()
        self.padding = (padding,) * 4 if isinstance(padding, int) else tuple(padding)

    def forward(self, input):
        return F.pad(input, self.padding, "constant", 0.0)

    def extra_repr(self):
        return f"{self.padding}"


# PyTorch's home of Module and the global hooks is torch.nn.modules.module; here it is this
# file, under that name too (nn.modules.module.register_module_forward_hook)
module = sys.modules[__name__]
sys.modules[__name__ + ".module"] = module
