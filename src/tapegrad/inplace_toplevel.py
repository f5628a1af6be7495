"""PyTorch's top-level in-place forms of Tensor methods: ``torch.exp_(x)`` is ``x.exp_()``,
``torch.clamp_(x, min=0)`` is ``x.clamp_(min=0)``.  Each name here hands its call to the
Tensor method of the same name, which does the work and raises PyTorch's errors; only the
check that ``input`` is a tensor (PyTorch's argument parser) happens here.
"""
from ._argtypes import not_tensor as _not_tensor
from .tensor import Tensor

# the in-place ops that take the tensor alone: PyTorch's parser counts their arguments
_UNARY = ["abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_",
          "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "cos_", "cosh_",
          "deg2rad_", "detach_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fix_", "floor_",
          "frac_", "i0_", "log10_", "log1p_", "log2_", "log_", "neg_", "negative_",
          "rad2deg_", "reciprocal_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_",
          "square_", "tan_", "tanh_", "trunc_", "zero_"]
# those that take more arguments, passed on to the method as they came
_WITH_ARGUMENTS = ["addmv_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "fill_", "ldexp_",
                   "logit_", "nan_to_num_", "resize_as_", "round_", "xlogy_"]

__all__ = _UNARY + _WITH_ARGUMENTS

_MISSING = object()


def _in_place_form(name, unary):
    """``torch.<name>(input, ...)``: ``input.<name>(...)``."""
    def in_place(*args, **kwargs):
        if args:
            input, rest = args[0], args[1:]  # noqa: A001 - PyTorch's argument name
            position = 1
        else:
            input, rest = kwargs.pop("input", _MISSING), ()
            position = None
        if input is _MISSING:
            raise TypeError(f'{name}() missing 1 required positional arguments: "input"')
        if unary and rest:
            raise TypeError(f"{name}() takes 1 positional argument but {len(args)} were given")
        if unary and kwargs:
            raise TypeError(f"{name}() got an unexpected keyword argument '{next(iter(kwargs))}'")
        if not isinstance(input, Tensor):
            raise _not_tensor(name, "input", position, input)
        return getattr(input, name)(*rest, **kwargs)
    in_place.__name__ = in_place.__qualname__ = name
    in_place.__module__ = __name__
    in_place.__doc__ = (f"``input.{name}(...)``: ``{name[:-1]}`` written into ``input``, "
                        "which is returned.")
    return in_place


globals().update({name: _in_place_form(name, name in _UNARY) for name in __all__})
