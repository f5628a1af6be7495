"""tapegrad: reverse-mode automatic differentiation on a flat Wengert tape.

The forward pass runs eagerly on NumPy values and appends one record per op to a
struct-of-arrays tape; ``backward()`` replays the tape in reverse in one compiled sweep.
The user-facing behaviour follows PyTorch's autograd.
"""
import sys as _sys

# First, before numba is imported: on a fresh machine a second process starts compiling the
# first backward's kernels while this one imports (see _compile_helper).
from . import _compile_helper
_compile_helper.start()

from . import _dtype
from ._dtype import bool_ as bool  # noqa: A001 - PyTorch spells it tapegrad.bool
from ._blas import blas
from ._device import device, layout, sparse_coo, sparse_csr, strided
from ._device import (channels_last, channels_last_3d, contiguous_format, memory_format,
                      preserve_format)
from ._dtype import (bfloat16, dtype, float16, float32, float64, get_default_dtype, int8, int16,
                     int32, int64, set_default_dtype, uint8)
from ._methods import install as _install
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from ._anomaly import is_anomaly_check_nan_enabled, is_anomaly_enabled, set_anomaly_enabled
from ._format import set_printoptions
from .creation import (arange, as_tensor, default_generator, empty, empty_like, eye, from_numpy,
                       full, full_like, linspace, logspace, manual_seed, ones, ones_like, rand,
                       rand_like, randint, randint_like, randn, randn_like, randperm, tensor,
                       zeros, zeros_like)
from .functional import (abs, amax, amin, argmax, argmin, broadcast_to, cat, clamp, clamp_max,
                         clamp_min, clone, cos, exp, expm1, flatten, log, log1p, log_softmax,
                         logsumexp, matmul, max, maximum, mean, min, minimum, neg, norm,
                         permute, pow, prod, reciprocal, relu, reshape, sigmoid, sin, sinh, softmax,
                         sqrt, squeeze, stack, std, sum, t, tan, tanh, transpose, unsqueeze, var,
                         where)
from .functional import add, div, mul, sub
from .functional import chunk, diagonal, narrow, select, split, unbind
from .functional import (flip, fliplr, flipud, gather, index_select, moveaxis, movedim, repeat,
                         roll, swapaxes, swapdims, take, tile)
from .functional import (acos, acosh, arccos, arccosh, arcsin, arcsinh, arctan, arctanh, asin,
                         asinh, atan, atanh, cosh, erf, erfc, exp2, log2, log10, rsqrt, square)
from .functional import ceil, fix, floor, frac, round, sign, trunc  # noqa: A004 - PyTorch's
from .functional import (ger, isfinite, isinf, isnan, isneginf, isposinf, logical_and,
                         logical_not, logical_or, logical_xor, outer)
from .functional import (arctan2, atan2, copysign, floor_divide, fmod, hypot, logaddexp,
                         remainder, xlogy)
from .functional import digamma, erfinv, i0, lgamma, mvlgamma, polygamma
from .derived import *  # noqa: F401,F403 - ops built from others; derived.__all__ names them
from .more_ops import *  # noqa: F401,F403 - gcd, nextafter, angle, gradient, ... (its __all__)
from .strided_views import *  # noqa: F401,F403 - as_strided, empty_strided, the *_copy names
from .histograms import *  # noqa: F401,F403 - histogram, histogramdd
from .functional import (argsort, cummax, cummin, cumprod, cumsum, diff,  # scans, sorts
                         kthvalue, logcumsumexp, median, mode, msort, nanmedian, sort, topk)
from .tensor import Size, Tensor
from .comparison import (allclose, equal, get_device, is_complex, is_conj,
                         is_floating_point, is_neg, is_same_size, is_signed, is_tensor, isclose,
                         numel)

_install()
_compile_helper.connect()

double = float64
long = int64
int = int32  # noqa: A001 - PyTorch's alias
short = int16
half = float16
# PyTorch's tapegrad.float is float32, which tapegrad does not have: programs write it (and
# .float()) for "the floating type", so it names the floating type tapegrad computes in
float = float64  # noqa: A001
clip = clamp
subtract = sub
multiply = mul
divide = div
true_divide = div
concat = cat
concatenate = cat

from . import autograd  # noqa: E402
from .replay import compile, per_sample_value_and_grad  # noqa: E402,A001
from .tapefile import load_tape  # noqa: E402
from .serialization import load, save  # noqa: E402
from . import cuda  # noqa: E402,F401
from .transforms import grad, value_and_grad  # noqa: E402
from .higher import hessian, hvp, jacobian, jvp  # noqa: E402
from .sparsity import hessian_sparsity, jacobian_sparsity  # noqa: E402
from .compressed import sparse_hessian, sparse_jacobian  # noqa: E402
from .custom_ops import CustomOp, custom_op, elementwise_op  # noqa: E402
from . import colouring, optimize, special  # noqa: E402,F401
from . import linalg  # noqa: E402
from .linalg import _TOP_LEVEL as _LINALG_TOP  # noqa: E402

det, inverse, logdet, slogdet = (_LINALG_TOP[k] for k in ("det", "inverse", "logdet", "slogdet"))
cholesky, cross, trace = (_LINALG_TOP[k] for k in ("cholesky", "cross", "trace"))
matrix_power = linalg.matrix_power
pinverse, matrix_exp, cholesky_solve = (_LINALG_TOP[k] for k in ("pinverse", "matrix_exp",
                                                                 "cholesky_solve"))
svd, qr, adjoint, renorm = (_LINALG_TOP[k] for k in ("svd", "qr", "adjoint", "renorm"))
lu, lu_solve, lu_unpack = _LINALG_TOP["lu"], _LINALG_TOP["lu_solve"], linalg.lu_unpack
cholesky_inverse, triangular_solve = linalg.cholesky_inverse, linalg.triangular_solve
from . import backends, nn, optim, utils  # noqa: E402
from .nn.utils import _weight_norm  # noqa: E402 - torch._weight_norm, weight_norm's op
# torch.selu, torch.dropout, torch.conv2d, ...: nn.functional's, under their top-level
# signatures (toplevel.__all__ names them); after nn, which they call
from .toplevel import *  # noqa: E402,F401,F403
from .inplace_toplevel import *  # noqa: E402,F401,F403 - torch.exp_(x), torch.clamp_(x, ...)
from ._generator import Generator  # noqa: E402
from . import func  # noqa: E402
from .func import vmap  # noqa: E402 - torch.vmap is torch.func.vmap

# tapegrad.autograd is a module, and torch.autograd.functional a submodule of a package:
# registering the module under that name makes ``import tapegrad.autograd.functional`` and
# ``from tapegrad.autograd.functional import jacobian`` work without turning autograd.py
# into a package
from . import _autograd_functional  # noqa: E402
from . import function as _function  # noqa: E402,F401 - tapegrad.autograd.Function

autograd.functional = _autograd_functional
_sys.modules[__name__ + ".autograd.functional"] = _autograd_functional
_sys.modules[__name__ + ".autograd.anomaly_mode"] = autograd.anomaly_mode
# torch.autograd.gradcheck is the function, and the module of that name holds it and
# GradcheckError: the same here (after func, whose jvp and vmap it uses)
from . import _gradcheck  # noqa: E402

autograd.gradcheck, autograd.gradgradcheck = _gradcheck.gradcheck, _gradcheck.gradgradcheck
_sys.modules[__name__ + ".autograd.gradcheck"] = _gradcheck
from . import testing  # noqa: E402,F401
from . import viz  # noqa: E402,F401 - imports graphviz only when a graph is drawn
from . import distributions  # noqa: E402,F401
# torch.binomial, torch.igamma/igammac and the private samplers torch.distributions calls
from .distributions._ops import binomial  # noqa: E402,F401
from .distributions._ops import dirichlet_grad as _dirichlet_grad  # noqa: E402,F401
from .distributions._ops import sample_dirichlet as _sample_dirichlet  # noqa: E402,F401
from .distributions._ops import standard_gamma as _standard_gamma  # noqa: E402,F401
from .distributions._ops import standard_gamma_grad as _standard_gamma_grad  # noqa: E402,F401
from .special import gammainc as igamma, gammaincc as igammac  # noqa: E402,F401
from . import random, version  # noqa: E402,F401,A004 - torch.random, torch.version
from .settings import *  # noqa: E402,F401,F403 - set_default_device, ... (its __all__)
from .legacy import *  # noqa: E402,F401,F403 - DoubleTensor, LongTensor, ... (its __all__)
from .settings import e, inf, nan, newaxis, pi  # noqa: E402,F401 - PyTorch's constants
from . import amp, cpu, jit  # noqa: E402,F401 - torch.amp, torch.cpu, torch.jit
from .amp import GradScaler, autocast  # noqa: E402 - torch.autocast is torch.amp.autocast
from .amp.autocast_mode import (get_autocast_dtype, is_autocast_cache_enabled,  # noqa: E402
                                is_autocast_enabled)
from .version import __version__  # noqa: E402,F401

from .legacy import Variable as _Variable, variable as _variable  # noqa: E402

autograd.Variable = _Variable   # (from torch.autograd import Variable: older programs)
autograd.variable = _variable
# torch.autograd.inference_mode is torch.inference_mode (derived.py, which imports autograd)
autograd.inference_mode = inference_mode  # noqa: F405 - derived.__all__ names it
# PyTorch's module paths for names defined elsewhere here (from torch.nn.modules.loss import
# _Loss, from torch.distributions.normal import Normal, ...), once every name is bound
from . import _module_paths  # noqa: E402

_module_paths.install(_sys.modules[__name__])

# PyTorch's TypeError for a list, a number, None, ... where a function takes tensors only
# (_argtypes.py): guards in front of the public functions and methods, put in last, once
# every name is bound
from . import _argtypes as _argtypes  # noqa: E402
from ._argtable import ARGS as _ARGS  # noqa: E402
from ._argtable import METHODS as _METHODS, SEQUENCES as _SEQUENCES  # noqa: E402

_argtypes.install(globals(), _ARGS[""], _SEQUENCES[""])
for _name, _module in (("nn.functional", nn.functional), ("linalg", linalg),
                       ("special", special)):
    _argtypes.install(vars(_module), _ARGS[_name], _SEQUENCES[_name], hot=False)
del _name, _module
_argtypes.install_methods(Tensor, _METHODS)

# help(tapegrad) lists the functions and classes named here, and dir(tapegrad) (what tab
# completion offers) these and the public submodules: not the internal modules the package
# is built from (tapegrad.replay, tapegrad.ops, ...), which stay importable by name
from ._public import defined_public_names as _defined_public_names  # noqa: E402
from ._public import public_dir as _public_dir  # noqa: E402

__all__ = _defined_public_names(globals())
_PUBLIC_SUBMODULES = ("amp", "autograd", "backends", "colouring", "cpu", "cuda",
                      "distributions", "func", "jit", "linalg", "nn",
                      "optim",
                      "optimize", "random", "special", "testing", "utils", "version", "viz")
__dir__ = _public_dir(globals(), _PUBLIC_SUBMODULES)
