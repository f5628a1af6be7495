"""PyTorch's top-level in-place forms of Tensor methods: ``torch.exp_(x)`` is ``x.exp_()``,
``torch.clamp_(x, min=0)`` is ``x.clamp_(min=0)``.  Each name here hands its call to the
Tensor method of the same name, which does the work and raises PyTorch's errors; only the
check that ``input`` is a tensor (PyTorch's argument parser) happens here.  Also the
in-place forms without a Tensor method: the ``dropout_`` family (``torch.dropout``'s
arguments, written into ``input``), ``embedding_renorm_`` and ``conj_physical_``.
"""
import numpy as np

from ._argtypes import not_tensor as _not_tensor
from .autograd import is_grad_enabled as _is_grad_enabled
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

__all__ = _UNARY + _WITH_ARGUMENTS + ["dropout_", "alpha_dropout_", "feature_dropout_",
                                     "feature_alpha_dropout_", "embedding_renorm_",
                                     "conj_physical_"]

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


globals().update({name: _in_place_form(name, name in _UNARY)
                  for name in _UNARY + _WITH_ARGUMENTS})


def _tensor_argument(fname, name, position, value):
    if not isinstance(value, Tensor):
        raise _not_tensor(fname, name, position, value)


def _dropout_form(fname, feature, alpha):
    """``torch.<fname>(input, p, train)``: ``torch.dropout``'s family, written into input."""
    def in_place(input, p, train):  # noqa: A002 - PyTorch's argument name
        from .toplevel import _dropped
        _tensor_argument(fname, "input", 1, input)
        return _dropped(input, p, train, feature, alpha, fname, inplace=True)
    in_place.__name__ = in_place.__qualname__ = fname
    in_place.__doc__ = (f"``torch.{fname[:-1]}(input, p, train)`` written into ``input``, "
                        "which is returned.")
    return in_place


dropout_ = _dropout_form("dropout_", False, False)
alpha_dropout_ = _dropout_form("alpha_dropout_", False, True)
feature_dropout_ = _dropout_form("feature_dropout_", True, False)
feature_alpha_dropout_ = _dropout_form("feature_alpha_dropout_", True, True)


def embedding_renorm_(input, indices, max_norm, norm_type):  # noqa: A002
    """The rows of ``input`` (an embedding's weight) named in ``indices`` rescaled, in
    place, to norm ``max_norm`` where their ``norm_type``-norm exceeds it (what
    ``embedding(..., max_norm=...)`` does first); returns ``input``."""
    from .nn.functional import _renorm_rows
    _tensor_argument("embedding_renorm_", "input", 1, input)
    _tensor_argument("embedding_renorm_", "indices", 2, indices)
    if indices.dtype.is_floating_point or indices._value.dtype.kind not in "iu":
        raise RuntimeError("Expected tensor for argument #2 'indices' to have one of the "
                           "following scalar types: Long, Int; but got "
                           f"tapegrad.{indices.dtype.scalar_name}Tensor instead (while "
                           "checking arguments for embedding_renorm_)")
    if _is_grad_enabled() and input.requires_grad and input.is_leaf:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    _renorm_rows(input, np.unique(indices._value), max_norm, norm_type)
    return input


def conj_physical_(input):  # noqa: A002
    """The complex conjugate of ``input`` in place: tapegrad's tensors are real, so
    ``input`` itself, unchanged, as PyTorch's for a real tensor."""
    _tensor_argument("conj_physical_", "input", 1, input)
    return input
