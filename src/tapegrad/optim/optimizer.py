"""The ``Optimizer`` base class and the helpers every algorithm's step uses.

A step touches each parameter once: one call of the algorithm's compiled kernel on flat
float64 views of the parameter, its gradient and its state buffers, updating them in place.
The kernels follow PyTorch's operation order (``p + (-lr) * d``, ``m + w * (g - m)``, ...);
rounding differs from ``torch.optim`` only where PyTorch's CPU kernels fuse a multiply-add, and
100-step trajectories agree with it to about 1e-13 relative.

Parameters whose ``.grad`` is None are skipped and get no state, as in PyTorch.
"""
import warnings
from collections import defaultdict
from copy import deepcopy
from itertools import chain

import numpy as np

import tapegrad as tg

from ..tape import in_arena
from ..tensor import _typename

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Marks a hyperparameter that every param group must set."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _flat(t):
    """The (n,) float64 view of a tensor's value that the kernels update in place."""
    v = t._value
    if not v.flags.c_contiguous or v.dtype != np.float64:
        raise RuntimeError("optimizers update float64 C-contiguous tensors in place")
    return v.reshape(-1)


def _flat_grad(p):
    """The gradient of ``p`` as (n,) float64, checked against the parameter's size."""
    g = np.ascontiguousarray(p.grad._value, dtype=np.float64).reshape(-1)
    if g.size != p._value.size:
        raise RuntimeError(
            f"gradient has {g.size} elements but the parameter has {p._value.size}")
    return g


# the state buffer of a kernel argument that an option leaves unused (no momentum, no amsgrad)
_EMPTY = np.empty(0)


def _buffer(shape):
    """A fresh zero-filled state tensor (exp_avg, momentum_buffer, step, ...)."""
    return tg.from_numpy(np.zeros(shape, dtype=np.float64))


def _advance_step(state):
    """Count one more step in a parameter's 0-d ``step`` tensor (made a tensor first if it
    was loaded as a plain number); returns the new count as a float."""
    step = state["step"]
    if not isinstance(step, tg.Tensor):
        step = state["step"] = tg.from_numpy(np.array(float(step)))
    step._value += 1.0
    step._bump_version()
    return float(step._value)


def _check_lr(lr):
    """PyTorch's checks of a learning rate, which may be a one-element tensor."""
    if isinstance(lr, tg.Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def _check_flags(name, differentiable=False, capturable=False):
    """Options of torch.optim that tapegrad's compiled steps do not have: a step recorded
    for autograd (``differentiable``) and CUDA-graph capture (``capturable``)."""
    if differentiable:
        raise NotImplementedError(
            f"{name}(differentiable=True): tapegrad's optimizers update parameters in "
            "compiled code, outside autograd; a differentiable step is not supported")
    if capturable:
        raise NotImplementedError(
            f"{name}(capturable=True) is for CUDA graphs; tapegrad runs on the CPU only")


def _check_fused(fused, foreach, differentiable):
    """PyTorch's refusals of ``fused`` with the other kernel choices."""
    if fused:
        if differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        if foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def _fill_group_defaults(optimizer, **defaults):
    """Give every group the options a state dict saved by an older version may lack."""
    for group in optimizer.param_groups:
        for key, value in defaults.items():
            group.setdefault(key, value)


def _loaded_state_value(value):
    """A loaded state entry as the optimizer keeps it.  A float64 tensor the kernels can update
    in place is kept itself, as PyTorch keeps it (its ``.to()`` of the same dtype returns the
    tensor): the optimizer's steps then change the loaded dict's tensors too, as they change
    the dict ``state_dict()`` returns.  Anything else is copied to float64 storage of its own
    -- an integer tensor, as PyTorch's ``.to(float64)`` copies it, and a view or a recorded
    value, which the kernels' writes would reach around the version counts that guard them."""
    if isinstance(value, tg.Tensor):
        v = value._value
        if (v.dtype == np.float64 and v.flags.c_contiguous and v.flags.writeable
                and value._alias is None and not value._rg and not in_arena(v)):
            return value
        return tg.from_numpy(np.array(v, dtype=np.float64, order="C"))
    if isinstance(value, np.ndarray):
        return tg.from_numpy(np.array(value, dtype=np.float64, order="C"))
    if isinstance(value, dict):
        return {k: _loaded_state_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_loaded_state_value(v) for v in value)
    return deepcopy(value)


class Optimizer:
    """Base class: holds ``param_groups`` (dicts with every default filled in) and ``state``
    (a dict per parameter, created lazily by ``step``).

    ``params`` is an iterable of tensors, or of dicts each holding ``"params"`` and per-group
    overrides of ``defaults``.

    Example:
        >>> w, b = tg.zeros(3, requires_grad=True), tg.zeros(1, requires_grad=True)
        >>> opt = tg.optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.5}], lr=0.1)
        >>> [group["lr"] for group in opt.param_groups]
        [0.1, 0.5]
    """

    def __init__(self, params, defaults):
        self.defaults = defaults
        if isinstance(params, tg.Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                "dicts, but got " + _typename(params))
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        text = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"

    def add_param_group(self, param_group):
        """Append a group; hyperparameters it leaves out take the optimizer's defaults."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, tg.Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)

        for p in param_group["params"]:
            if not isinstance(p, tg.Tensor):
                raise TypeError(
                    "optimizer can only optimize Tensors, but one of the params is " + _typename(p))
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    "parameter group didn't specify a value of required optimization "
                    f"parameter {name}")
            param_group.setdefault(name, default)

        params = param_group["params"]
        if len(params) != len({id(p) for p in params}):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, "
                "this will cause an error", stacklevel=3)
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        """Drop every parameter's gradient (``set_to_none``), or zero it in place."""
        for group in self.param_groups:
            for p in group["params"]:
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

    def step(self, closure=None):
        """Update every parameter that has a gradient; returns ``closure()``'s loss if given."""
        raise NotImplementedError

    def _closure_loss(self, closure):
        if closure is None:
            return None
        with tg.enable_grad():
            return closure()

    def state_dict(self):
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}``.

        Parameters are numbered in order of appearance across groups; the state tensors are
        the optimizer's own (not copies), as in PyTorch.
        """
        index = {}
        packed_groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            packed_groups.append(packed)
        packed_state = {
            (index[id(k)] if isinstance(k, tg.Tensor) else k): v for k, v in self.state.items()}
        return {"state": packed_state, "param_groups": packed_groups}

    def load_state_dict(self, state_dict):
        """Restore hyperparameters and state saved by ``state_dict``; group and parameter
        counts must match.  The state's float64 tensors are kept, not copied, as PyTorch keeps
        them (``_loaded_state_value``)."""
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the size of "
                "optimizer's group")
        id_map = dict(zip(chain.from_iterable(s["params"] for s in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                state[id_map[k]] = _loaded_state_value(v)
            else:
                state[k] = v
        for group, saved in zip(groups, saved_groups):
            saved["params"] = group["params"]
        self.__setstate__({"state": state, "param_groups": saved_groups})
