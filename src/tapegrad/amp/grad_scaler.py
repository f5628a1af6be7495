"""``tapegrad.amp.GradScaler``: PyTorch's dynamic loss scaling, with its numbers.

The scale is a float32 number in PyTorch (a float32 tensor); tapegrad keeps it in a float64
tensor whose value is always rounded to float32 first, so that every product and every update
gives PyTorch's values: the loss times the scale, the gradients times the float32 reciprocal,
the growth and back-off of ``update()`` rounded to float32 as PyTorch's kernel rounds them.
"""
import inspect
import math
import warnings
from collections import abc, defaultdict
from enum import Enum

import numpy as np

from ..autograd import no_grad
from .._dtype import int32
from ..creation import full
from ..tensor import Tensor
from .autocast_mode import _cuda_definitely_not_available

__all__ = ["OptState", "GradScaler"]


def _f32(x):
    """``x`` rounded to float32, as a Python float (what PyTorch's float32 scale holds)."""
    with np.errstate(over="ignore"):       # a growth past float32's range is infinite
        return float(np.float32(x))


class OptState(Enum):
    """Where an optimizer is in a GradScaler's iteration: ready, unscaled or stepped.

    Example:
        >>> tg.amp.grad_scaler.OptState.READY.value
        0
    """

    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state():
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    """Dynamic loss scaling, as ``torch.amp.GradScaler(device="cuda", init_scale=2.**16,
    growth_factor=2.0, backoff_factor=0.5, growth_interval=2000, enabled=True)``.

    ``scale(loss)`` multiplies the loss by the scale; ``step(optimizer)`` divides the
    gradients by it (``unscale_``) and runs ``optimizer.step()`` unless a gradient is
    infinite or NaN; ``update()`` halves the scale after a skipped step and doubles it after
    ``growth_interval`` good ones.  The numbers are PyTorch's: the scale is rounded to
    float32 as PyTorch's float32 scale is.  The default device is CUDA, which tapegrad does
    not have: like a CPU-only PyTorch, ``GradScaler()`` then warns ``"tapegrad.cuda.amp.
    GradScaler is enabled, but CUDA is not available.  Disabling."`` and does nothing
    (``scale`` returns the loss, ``step`` just steps).  ``GradScaler("cpu")`` scales.

    Example:
        >>> w = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> opt = tg.optim.SGD([w], lr=0.1)
        >>> scaler = tg.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=1)
        >>> scaler.scale((w * w).sum()).backward()
        >>> w.grad
        tensor([2048., 4096.])
        >>> scaler.step(opt)
        >>> scaler.update()
        >>> w, scaler.get_scale()
        (tensor([0.8000, 1.6000], requires_grad=True), 2048.0)
    """

    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = enabled
        if self._device == "cuda" and enabled and _cuda_definitely_not_available():
            warnings.warn("tapegrad.cuda.amp.GradScaler is enabled, but CUDA is not "
                          "available.  Disabling.", stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale = None            # made by the first scale()
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker = None
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _check_scale_growth_tracker(self, funcname):
        fix = ("This may indicate your script did not use scaler.scale(loss or outputs) "
               "earlier in the iteration.")
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, dev):
        if self._growth_tracker is not None:
            raise AssertionError("_growth_tracker initialized before _scale")
        self._scale = full((), _f32(self._init_scale), device=dev)
        self._growth_tracker = full((), self._init_growth_tracker, dtype=int32, device=dev)

    def scale(self, outputs):
        """The outputs (a tensor, or a list or tuple of them, nested) times the scale; the
        outputs themselves when the scaler is disabled.

        Example:
            >>> tg.amp.GradScaler("cpu", init_scale=8.0).scale(tg.tensor(0.5))
            tensor(4.)
        """
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            return outputs * self._scale

        def apply_scale(val):
            if isinstance(val, Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker(val.device)
                return val * self._scale
            if isinstance(val, abc.Iterable):
                scaled = map(apply_scale, val)
                if isinstance(val, (list, tuple)):
                    return type(val)(scaled)
                return scaled
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply_scale(outputs)

    def _unscale_grads_(self, optimizer, inv_scale, found_inf):
        """Multiply every gradient of ``optimizer`` by ``inv_scale`` (unless it is 1) and set
        ``found_inf`` to 1 if one of them holds an infinity or a NaN."""
        grads = []
        with no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if not isinstance(param, Tensor):
                        raise AssertionError("expected param to be tapegrad.Tensor, got "
                                             f"{type(param).__name__}")
                    if param.grad is not None:
                        grads.append(param.grad)
            if not grads:
                return {}
            if not all(bool(g.isfinite().all()) for g in grads):
                found_inf.fill_(1.0)
            if inv_scale != 1.0:
                for g in grads:
                    g.mul_(inv_scale)
        return {grads[0].device: found_inf}

    def unscale_(self, optimizer):
        """Divide the gradients of ``optimizer`` by the scale (multiply them by its float32
        reciprocal, as PyTorch does), once per iteration, before ``step``: for clipping or
        reading unscaled gradients.

        Example:
            >>> w = tg.tensor([3.0], requires_grad=True)
            >>> opt, scaler = tg.optim.SGD([w], lr=0.1), tg.amp.GradScaler("cpu")
            >>> scaler.scale(w.sum()).backward()
            >>> scaler.unscale_(opt)
            >>> w.grad
            tensor([1.])
        """
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = _f32(1.0 / self._scale.item())
        found_inf = full((), 0.0, device=self._scale.device)
        optimizer_state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale,
                                                                       found_inf)
        optimizer_state["stage"] = OptState.UNSCALED

    def _maybe_opt_step(self, optimizer, optimizer_state, *args, **kwargs):
        if not sum(v.item() for v in optimizer_state["found_inf_per_device"].values()):
            return optimizer.step(*args, **kwargs)
        return None

    def _check_inf_per_device(self, optimizer):
        self._check_scale_growth_tracker("_check_inf_per_device")
        found_inf = full((), 0.0, device=self._scale.device)
        state = self._per_optimizer_states[id(optimizer)]
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, 1.0, found_inf)
        return state["found_inf_per_device"]

    def _found_inf_per_device(self, optimizer):
        return self._per_optimizer_states[id(optimizer)]["found_inf_per_device"]

    def step(self, optimizer, *args, **kwargs):
        """``unscale_(optimizer)`` if it was not called, then ``optimizer.step(*args,
        **kwargs)`` unless a gradient is infinite or NaN (then the step is skipped and
        ``update`` backs the scale off).  Returns what ``optimizer.step`` returned, or None.

        Example:
            >>> w = tg.tensor([1.0], requires_grad=True)
            >>> opt, scaler = tg.optim.SGD([w], lr=1.0), tg.amp.GradScaler("cpu")
            >>> scaler.scale(w.sum() * float("inf")).backward()
            >>> scaler.step(opt), w          # skipped: the gradient is infinite
            (None, tensor([1.], requires_grad=True))
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        self._check_scale_growth_tracker("step")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if getattr(optimizer, "_step_supports_amp_scaling", False):
            return self._step_scaling_optimizer(optimizer, optimizer_state, args, kwargs)
        if optimizer_state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(optimizer_state["found_inf_per_device"]) == 0:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = self._maybe_opt_step(optimizer, optimizer_state, *args, **kwargs)
        optimizer_state["stage"] = OptState.STEPPED
        return retval

    def _step_scaling_optimizer(self, optimizer, optimizer_state, args, kwargs):
        """PyTorch's contract with an optimizer that unscales by itself
        (``_step_supports_amp_scaling``): it is handed ``grad_scale`` and ``found_inf``, or
        the scaler as its ``grad_scaler`` keyword."""
        has_kwarg = "grad_scaler" in inspect.signature(optimizer.step).parameters
        if has_kwarg:
            warnings.warn(
                "GradScaler is going to stop passing itself as a keyword argument to the "
                "passed optimizer. In the near future GradScaler registers `grad_scale: "
                "Tensor` and `found_inf: Tensor` to the passed optimizer and let the optimizer "
                "use them directly.", FutureWarning, stacklevel=3)
            kwargs.update({"grad_scaler": self})
        else:
            if optimizer_state["stage"] is OptState.READY:
                self._check_inf_per_device(optimizer)
            found_inf = sum(optimizer_state["found_inf_per_device"].values())
            optimizer.grad_scale = (getattr(optimizer, "grad_scale", None)
                                    if optimizer_state["stage"] == OptState.UNSCALED
                                    else self._scale * getattr(optimizer, "grad_scale", 1))
            optimizer.found_inf = found_inf
        retval = optimizer.step(*args, **kwargs)
        optimizer_state["stage"] = OptState.STEPPED
        if not has_kwarg:
            del optimizer.grad_scale
            del optimizer.found_inf
        return retval

    def update(self, new_scale=None):
        """End the iteration: multiply the scale by ``backoff_factor`` if a step was skipped,
        by ``growth_factor`` after ``growth_interval`` good steps in a row (each product
        rounded to float32, and a growth to infinity not taken), or set it to ``new_scale``.

        Example:
            >>> w = tg.tensor([1.0], requires_grad=True)
            >>> opt, scaler = tg.optim.SGD([w], lr=1.0), tg.amp.GradScaler("cpu")
            >>> scaler.scale(w.sum() * float("nan")).backward()
            >>> scaler.step(opt)
            >>> scaler.update()
            >>> scaler.get_scale()
            32768.0
        """
        if not self._enabled:
            return
        scale, tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                scale.fill_(_f32(new_scale))
            else:
                reason = ("new_scale should be a float or a 1-element tapegrad.cuda.FloatTensor "
                          "or tapegrad.FloatTensor with requires_grad=False.")
                if new_scale.device.type != self._device:
                    raise AssertionError(reason)
                if new_scale.numel() != 1:
                    raise AssertionError(reason)
                if new_scale.requires_grad is True:
                    raise AssertionError(reason)
                if new_scale.dim() > 0:          # PyTorch's copy_ into its 0-d scale
                    shape = ", ".join(map(str, new_scale.shape))
                    raise RuntimeError(f"output with shape [] doesn't match the broadcast "
                                       f"shape [{shape}]")
                scale.fill_(_f32(new_scale.item()))
        else:
            found_infs = [found_inf.item() for state in self._per_optimizer_states.values()
                          for found_inf in state["found_inf_per_device"].values()]
            if len(found_infs) == 0:
                raise AssertionError("No inf checks were recorded prior to update.")
            # PyTorch's _amp_update_scale_: products in double, stored in the float32 scale
            if sum(found_infs):
                scale.fill_(_f32(scale.item() * self._backoff_factor))
                tracker.fill_(0)
            else:
                successful = int(tracker.item()) + 1
                if successful == self._growth_interval:
                    grown = _f32(scale.item() * self._growth_factor)
                    if math.isfinite(grown):
                        scale.fill_(grown)
                    tracker.fill_(0)
                else:
                    tracker.fill_(successful)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _get_scale_async(self):
        return self._scale

    def get_scale(self):
        """The scale as a Python float (the initial scale before the first ``scale``); 1.0
        when the scaler is disabled.

        Example:
            >>> tg.amp.GradScaler("cpu").get_scale()
            65536.0
        """
        if self._enabled:
            return self._init_scale if self._scale is None else self._scale.item()
        return 1.0

    def get_growth_factor(self):
        """The factor ``update`` grows the scale by.

        Example:
            >>> tg.amp.GradScaler("cpu").get_growth_factor()
            2.0
        """
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        """Set the factor ``update`` grows the scale by.

        Example:
            >>> s = tg.amp.GradScaler("cpu"); s.set_growth_factor(4.0); s.get_growth_factor()
            4.0
        """
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        """The factor ``update`` shrinks the scale by after a skipped step.

        Example:
            >>> tg.amp.GradScaler("cpu").get_backoff_factor()
            0.5
        """
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        """Set the factor ``update`` shrinks the scale by.

        Example:
            >>> s = tg.amp.GradScaler("cpu"); s.set_backoff_factor(0.25); s.get_backoff_factor()
            0.25
        """
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        """How many good steps in a row make ``update`` grow the scale.

        Example:
            >>> tg.amp.GradScaler("cpu").get_growth_interval()
            2000
        """
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        """Set how many good steps in a row make ``update`` grow the scale.

        Example:
            >>> s = tg.amp.GradScaler("cpu"); s.set_growth_interval(10); s.get_growth_interval()
            10
        """
        self._growth_interval = new_interval

    def _get_growth_tracker(self):
        if self._enabled:
            return (self._init_growth_tracker if self._growth_tracker is None
                    else int(self._growth_tracker.item()))
        return 0

    def is_enabled(self):
        """Whether the scaler scales (False after ``enabled=False``, and for CUDA).

        Example:
            >>> tg.amp.GradScaler("cpu").is_enabled()
            True
        """
        return self._enabled

    def state_dict(self):
        """``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval`` and
        ``_growth_tracker``, as PyTorch's; empty for a disabled scaler.

        Example:
            >>> tg.amp.GradScaler("cpu").state_dict()["scale"]
            65536.0
        """
        if self._enabled:
            return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                    "backoff_factor": self._backoff_factor,
                    "growth_interval": self._growth_interval,
                    "_growth_tracker": self._get_growth_tracker()}
        return {}

    def load_state_dict(self, state_dict):
        """Take the state ``state_dict()`` returned (nothing happens when disabled).

        Example:
            >>> s = tg.amp.GradScaler("cpu")
            >>> s.load_state_dict({**s.state_dict(), "scale": 8.0}); s.get_scale()
            8.0
        """
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(_f32(state_dict["scale"]))
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])

    def __getstate__(self):
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise AssertionError("A GradScaler instance may only be pickled at the "
                                     "beginning of an iteration, or at the end after "
                                     "scaler.update().")
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)


class _DeprecatedDeviceGradScaler(GradScaler):
    """What ``tapegrad.cpu.amp.GradScaler`` and ``tapegrad.cuda.amp.GradScaler`` share: PyTorch's
    deprecated per-device spellings, which warn (a ``FutureWarning`` naming the
    ``tapegrad.amp`` form) and then are ``GradScaler(device, ...)`` for the subclass's
    ``_deprecated_device``."""
    _deprecated_device = None

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        device = self._deprecated_device
        warnings.warn(f"`tapegrad.{device}.amp.GradScaler(args...)` is deprecated. Please use "
                      f"`tapegrad.amp.GradScaler('{device}', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__(device, init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
