"""``tapegrad.autograd.gradcheck`` and ``gradgradcheck``: PyTorch's checks of a function's
gradients against central differences, with its arguments, its order of checks and its
messages.

``gradcheck(func, inputs)`` perturbs every element of every input that requires grad by
``eps`` in place (through ``.data``, so the function reads the perturbed values), builds the
numerical Jacobian column by column and the analytical one row by row from ``autograd.grad``,
and compares them with ``allclose(analytical, numerical, rtol, atol)``.  ``fast_mode=True``
compares one number per input and output instead, ``v^T J u`` for random unit vectors drawn
from a fresh ``Generator`` as PyTorch draws them (float32 uniforms widened to float64), so the
vectors, and a failure's numbers, are PyTorch's.  Backward is run twice and must agree within
``nondet_tol``; a zero cotangent must give zero gradients.  ``check_forward_ad`` uses
tapegrad's forward mode (``func.jvp``) and ``check_batched_grad`` its ``vmap``.

tapegrad has no undefined gradients: a zero cotangent stands wherever PyTorch passes an
undefined one, so ``check_undefined_grad`` checks that backward turns zeros into zeros (and
has nothing more to check in forward mode, where a missing tangent is a zero tangent).
Registered by the package as the module ``tapegrad.autograd.gradcheck``; the names
``tapegrad.autograd.gradcheck`` and ``gradgradcheck`` are the functions, as in PyTorch.
"""
import itertools
import warnings

import numpy as np

from . import autograd as _autograd
from . import comparison as _comparison
from . import creation as _creation
from . import func as _func
from . import functional as _functional
from ._dtype import float64
from ._generator import Generator
from .tensor import Tensor

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised by ``gradcheck`` and ``gradgradcheck`` when a check fails (a RuntimeError, as
    PyTorch's ``torch.autograd.gradcheck.GradcheckError``)."""


_NONDET_ADVICE = """\n
NOTE: a backward that sums in an order that changes between runs (atomic or threaded
accumulation) can make this check fail.  If that is expected, call gradcheck/gradgradcheck
with `nondet_tol=<tol>` as a keyword argument.
"""

_BATCHED_ADVICE = """
gradcheck or gradgradcheck failed while testing batched gradient computation.
Batched gradients are computed by mapping the backward computation over a batch of
cotangents with vmap; call gradcheck/gradgradcheck with `check_batched_grad=False` to skip
this check.""".strip()

_BATCHED_FORWARD_ADVICE = """
gradcheck failed while testing batched gradient computation with forward-mode AD.
This test runs when both `check_batched_grad=True` and `check_forward_ad=True`; call
gradcheck/gradgradcheck with `check_batched_forward_grad=False` to skip it.
"""

_FAST_FAIL_SLOW_OK = """
Fast gradcheck failed but element-wise differences are small. This means that the
test might've passed in slow_mode!

Call gradcheck/gradgradcheck with `fast_mode=False` as a keyword argument to compare the
Jacobians element by element.""".strip()


# ---------------------------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------------------------
def _as_tuple(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _differentiable_outputs(x):
    return tuple(o for o in _as_tuple(x) if o.requires_grad)


def _is_float(x):
    return isinstance(x, Tensor) and x.is_floating_point()


def _requiring_grad(inputs):
    """(their positions, the inputs) of the tensors that require grad."""
    pairs = [(i, t) for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    return [i for i, _ in pairs], [t for _, t in pairs]


def _check_inputs(inputs):
    any_requiring_grad = False
    for idx, inp in enumerate(inputs):
        if isinstance(inp, Tensor) and inp.requires_grad:
            if inp.dtype != float64:
                warnings.warn(
                    f"Input #{idx} requires gradient and is not a double precision floating "
                    "point or complex. This check will likely fail if all the inputs are not "
                    "of double precision floating point or complex. ", stacklevel=3)
            if not all(st > 0 or sz <= 1 for st, sz in zip(inp.stride(), inp.size())):
                raise RuntimeError(
                    f"The {idx}th input has a dimension with stride 0. gradcheck only supports "
                    "inputs that are non-overlapping to be able to compute the numerical "
                    "gradients correctly. You should call .contiguous on the input before "
                    "passing it to gradcheck.")
            any_requiring_grad = True
    if not any_requiring_grad:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of them have requires_grad=True.")


def _mismatch(analytical, numerical, output_idx, input_idx, forward=False):
    mode = "computed with forward mode " if forward else ""
    return (f"Jacobian {mode}mismatch for output {output_idx:d} with respect to input "
            f"{input_idx:d},\nnumerical:{numerical}\nanalytical:{analytical}\n")


def _tensor(array):
    return _creation.tensor(np.array(array, dtype=np.float64))   # 0-d stays 0-d


# ---------------------------------------------------------------------------------------------
# Numerical derivatives: central differences through the inputs' own storage
# ---------------------------------------------------------------------------------------------
def _same_shape_and_dtype(a, b, eps, idx=None):
    on_index = f"on index {idx} " if idx is not None else ""
    if a.shape != b.shape:
        raise AssertionError(
            f"Expected `func` to return outputs with the same shape when inputs are perturbed "
            f"{on_index}by {eps}, but got: shapes {a.shape} and {b.shape}.")
    if a.dtype != b.dtype:
        raise AssertionError(
            f"Expected `func` to return outputs with the same dtype when inputs are perturbed "
            f"{on_index}by {eps}, but got: dtypes {a.dtype} and {b.dtype}.")


def _outputs_of(func, inputs):
    """The outputs of ``func(*inputs)`` as a tuple of copies (a later perturbation must not
    reach a value the function handed back without copying)."""
    return tuple(o.clone() for o in _as_tuple(func(*inputs)))


def _central_difference(func, inputs, write, minus, plus, restore, eps, idx=None):
    """(f(x + d) - f(x - d)) / (2 eps) for each output, flattened, where ``write`` puts the
    perturbed values in place."""
    write(minus)
    below = _outputs_of(func, inputs)
    write(plus)
    above = _outputs_of(func, inputs)
    write(restore)
    columns = []
    for a, b in zip(below, above):
        _same_shape_and_dtype(a, b, eps, idx)
        columns.append(((b - a) / (2 * eps)).detach().reshape(-1))
    return columns


def _numerical_jacobians(func, inputs, outputs, eps):
    """For each input that requires grad, a tuple with one (input numel, output numel)
    Jacobian per float output, from one central difference per input element."""
    _, targets = _requiring_grad(inputs)
    float_outputs = [o for o in outputs if _is_float(o)]
    jacobians = []
    for target in targets:
        entry = target.data                      # the same storage, outside the graph
        per_output = [np.zeros((target.numel(), o.numel())) for o in float_outputs]
        for k, idx in enumerate(itertools.product(*[range(m) for m in target.shape])):
            orig = float(entry[idx])

            def write(value, idx=idx):
                entry[idx] = value
            columns = _central_difference(func, inputs, write, orig - eps, orig + eps, orig,
                                          eps, idx)
            columns = [c for c, o in zip(columns, outputs) if _is_float(o)]
            for jac, col in zip(per_output, columns):
                jac[k] = col.numpy()
        jacobians.append(tuple(_tensor(j) for j in per_output))
    return jacobians


def _numerical_directional(func, inputs, position, u, eps):
    """J u for the input at ``position`` (``u`` flat, unit length): one central difference
    along ``u`` for the whole input."""
    entry = inputs[position].data
    orig = entry.clone()
    step = u.reshape(entry.shape) * eps

    def write(value):
        entry.copy_(value)
    return _central_difference(func, inputs, write, orig - step, orig + step, orig, eps)


# ---------------------------------------------------------------------------------------------
# Analytical derivatives from backward
# ---------------------------------------------------------------------------------------------
def _vjp_rows(output, targets, cotangents):
    """One ``autograd.grad`` per cotangent; rows[i][j] is input i's gradient for the j-th."""
    rows = [[] for _ in targets]
    for cot in cotangents:
        grads = _autograd.grad(output, targets, cot, retain_graph=True, allow_unused=True)
        for i, g in enumerate(grads):
            rows[i].append(None if g is None else g.clone())
    return rows


def _stack_rows(rows, targets, n_rows):
    """(Jacobians of shape (input numel, n_rows), sizes ok, dtypes ok); a missing gradient
    is a zero column."""
    sizes_ok = dtypes_ok = True
    jacobians = []
    for target, target_rows in zip(targets, rows):
        jac = np.zeros((target.numel(), n_rows))
        for j, g in enumerate(target_rows):
            if g is None:
                continue
            if g.size() != target.size():
                sizes_ok = False
            elif g.dtype != target.dtype:
                dtypes_ok = False
            if g.numel() != target.numel():
                raise AssertionError(f"Expected out_jacobian column to have {g.numel()} "
                                     f"elements, but got {target.numel()}")
            jac[:, j] = g.detach().reshape(-1).numpy()
        jacobians.append(jac)
    return jacobians, sizes_ok, dtypes_ok


def _analytical_jacobians(inputs, output, nondet_tol, check_grad_dtypes, v=None):
    """The Jacobian of ``output`` for each input that requires grad (its rows, or with ``v``
    the single row ``v^T J``), computed twice to check that backward repeats itself."""
    _, targets = _requiring_grad(inputs)
    if v is None:
        n_rows = output.numel()
        cotangents = []
        for j in range(n_rows):
            basis = np.zeros(n_rows)
            basis[j] = 1.0
            cotangents.append(_tensor(basis.reshape(output.shape)))
    else:
        n_rows = 1
        cotangents = [v.reshape(output.shape)]
    first, sizes_ok, dtypes_ok = _stack_rows(_vjp_rows(output, targets, cotangents), targets,
                                             n_rows)
    second, _, _ = _stack_rows(_vjp_rows(output, targets, cotangents), targets, n_rows)
    reentrant = all(a.size == 0 or np.abs(a - b).max() <= nondet_tol
                    for a, b in zip(first, second))
    if not dtypes_ok and check_grad_dtypes:
        raise GradcheckError("Gradient has dtype mismatch")
    if not sizes_ok:
        raise GradcheckError("Analytical gradient has incorrect size")
    if not reentrant:
        raise GradcheckError(
            "Backward is not reentrant, i.e., running backward with same input and "
            "grad_output multiple times gives different values, although analytical gradient "
            "matches numerical gradient."
            f"The tolerance for nondeterminism was {nondet_tol}." + _NONDET_ADVICE)
    return [_tensor(j) for j in first]


def _forward_jacobians(func, inputs, u_per_input=None):
    """J (column by column, or J u with ``u_per_input``) from tapegrad's forward mode, for
    each input that requires grad: a tuple over the float outputs."""
    positions, targets = _requiring_grad(inputs)
    primals = tuple(t.detach() for t in targets)

    def of_targets(*values):
        args = list(inputs)
        for p, value in zip(positions, values):
            args[p] = value
        return tuple(o for o in _as_tuple(func(*args)) if _is_float(o))

    jacobians = []
    for i, target in enumerate(targets):
        if u_per_input is not None:
            directions = [u_per_input[i].reshape(target.shape)]
        else:
            directions = []
            for k in range(target.numel()):
                basis = np.zeros(target.numel())
                basis[k] = 1.0
                directions.append(_tensor(basis.reshape(target.shape)))
        columns = []
        for d in directions:
            tangents = tuple(d if j == i else _creation.zeros_like(t)
                             for j, t in enumerate(primals))
            _, out_tangents = _func.jvp(of_targets, primals, tangents)
            columns.append([t.detach().reshape(-1).numpy() for t in out_tangents])
        n_outputs = len(columns[0]) if columns else len(of_targets(*primals))
        if u_per_input is not None:
            jacobians.append(tuple(_tensor(columns[0][o]) for o in range(n_outputs)))
        else:
            per_output = []
            for o in range(n_outputs):
                stacked = np.array([c[o] for c in columns]) if columns else np.zeros((0, 0))
                per_output.append(_tensor(stacked))
            jacobians.append(tuple(per_output))
    return jacobians


# ---------------------------------------------------------------------------------------------
# Slow mode: whole Jacobians
# ---------------------------------------------------------------------------------------------
def _no_differentiable_outputs(func, inputs, func_out, eps):
    for per_input in _numerical_jacobians(func, inputs, func_out, eps):
        for jac in per_input:
            if bool((jac != 0).any()):
                raise GradcheckError("Numerical gradient for function expected to be zero")


def _slow_check(func, func_out, inputs, outputs, eps, rtol, atol, check_grad_dtypes,
                nondet_tol, use_forward_ad=False):
    func_out = _as_tuple(func_out)
    if not outputs:
        _no_differentiable_outputs(func, inputs, func_out, eps)
        return
    numerical = list(zip(*_numerical_jacobians(func, inputs, func_out, eps)))
    numerical = [nj for o, nj in zip([o for o in func_out if _is_float(o)], numerical)
                 if o.requires_grad]
    if use_forward_ad:
        analytical = _forward_jacobians(func, inputs)
        for i, per_output in enumerate(numerical):
            for j, n in enumerate(per_output):
                a = analytical[j][i]
                if not _comparison.allclose(a, n, rtol, atol):
                    raise GradcheckError(_mismatch(a, n, i, j, forward=True))
        return
    for i, o in enumerate(outputs):
        analytical = _analytical_jacobians(inputs, o, nondet_tol, check_grad_dtypes)
        for j, (a, n) in enumerate(zip(analytical, numerical[i])):
            if not _comparison.allclose(a, n, rtol, atol):
                raise GradcheckError(_mismatch(a, n, i, j))


# ---------------------------------------------------------------------------------------------
# Fast mode: v^T J u for random unit vectors
# ---------------------------------------------------------------------------------------------
def _unit_vector(numel, generator):
    """A random unit vector as PyTorch's fast gradcheck draws it: float32 uniforms (one 32-bit
    word each, 24 bits kept), widened to float64, divided by their norm."""
    vec = _creation.tensor(generator._rng.float32_uniforms(numel))
    return vec / vec.norm()


def _fast_check(func, func_out, inputs, outputs, eps, rtol, atol, check_grad_dtypes,
                nondet_tol, use_forward_ad=False):
    positions, targets = _requiring_grad(inputs)
    generator = Generator()
    all_u = [_unit_vector(t.numel(), generator) for t in targets]
    all_v = None if use_forward_ad else [_unit_vector(o.numel(), generator) for o in outputs]
    func_out = _as_tuple(func_out)
    numerical = []
    for position, u in zip(positions, all_u):
        ju = [c for c, o in zip(_numerical_directional(func, inputs, position, u, eps),
                                func_out) if _is_float(o)]
        if all_v is None:
            numerical.append(ju)
        else:
            numerical.append([(v * c).sum() for v, c in zip(all_v, ju)])
    if use_forward_ad:
        analytical = _forward_jacobians(func, inputs, all_u)
    else:
        if not outputs:
            for position, u in zip(positions, all_u):
                for c in _numerical_directional(func, inputs, position, u, eps):
                    if c.numel() and float(c.abs().max()) > nondet_tol:
                        raise GradcheckError(
                            "Numerical gradient for function expected to be zero")
        analytical = []
        for o, v in zip(outputs, all_v):
            rows = _analytical_jacobians(inputs, o, nondet_tol, check_grad_dtypes, v=v)
            # (a sum of products: tapegrad's sum adds in PyTorch's order, its dot in BLAS's)
            analytical.append([(r.reshape(-1) * u).sum() for r, u in zip(rows, all_u)])
    for i, per_output in enumerate(numerical):
        for j, n in enumerate(per_output):
            a = analytical[i][j] if use_forward_ad else analytical[j][i]
            scale = float(all_u[i].sum()) * (1.0 if all_v is None else float(all_v[j].sum()))
            if not _comparison.allclose(a, n, rtol, atol * scale):
                raise GradcheckError(
                    _mismatch(a, n, j, i, forward=use_forward_ad)
                    + _slow_mode_report(func, inputs, outputs, i, j, rtol, atol, eps,
                                        use_forward_ad))


def _slow_mode_report(func, inputs, outputs, input_idx, output_idx, rtol, atol, eps,
                      forward):
    """After a fast-mode failure: the whole Jacobian of that pair, numerically and
    analytically, and whether they agree element by element."""
    numerical = _numerical_jacobians(func, inputs, outputs, eps)[input_idx][output_idx]
    if forward:
        analytical = _forward_jacobians(func, inputs)[input_idx][output_idx]
    else:
        analytical = _analytical_jacobians(inputs, outputs[output_idx], float("inf"),
                                           False)[input_idx]
    max_diff = (numerical - analytical).abs().max()
    msg = ("\nThe above quantities relating the numerical and analytical jacobians are "
           "computed \nin fast mode. Below, we recompute numerical and analytical jacobians in "
           "slow mode:\n\n"
           f"Numerical:\n {numerical}\nAnalytical:\n{analytical}\n\n"
           f"The max per-element difference (slow mode) is: {max_diff}.\n")
    if _comparison.allclose(analytical, numerical, rtol, atol):
        msg += _FAST_FAIL_SLOW_OK
    return msg


# ---------------------------------------------------------------------------------------------
# The checks that follow the Jacobians
# ---------------------------------------------------------------------------------------------
def _batched_failure(output_idx, input_idx, result, expected, forward=False):
    advice = _BATCHED_FORWARD_ADVICE if forward else _BATCHED_ADVICE
    return (f"For output {output_idx} and input {input_idx}:\n\n{advice}\n\nGot:\n{result}"
            f"\n\nExpected:\n{expected}").strip()


def _check_batched_grad(inputs, output, output_idx):
    """Two cotangents (drawn from the global generator, as PyTorch draws them) through backward
    one at a time, and both at once through ``vmap``: the same gradients."""
    _, targets = _requiring_grad(inputs)

    def vjp(v):
        grads = _autograd.grad(output, targets, v, retain_graph=True, allow_unused=True)
        return tuple(_creation.zeros_like(t) if g is None else g
                     for g, t in zip(grads, targets))
    cotangents = [_creation.randn_like(output) for _ in range(2)]
    _one_by_one_as_batched(vjp, cotangents, _BATCHED_ADVICE,
                           lambda i, res, exp: _batched_failure(output_idx, i, res, exp))


def _one_by_one_as_batched(fn, samples, advice, failure):
    """``fn`` of each sample, stacked, must equal ``vmap(fn)`` of the stacked samples."""
    expected = [_functional.stack(shards) for shards in zip(*[fn(s) for s in samples])]
    try:
        result = _func.vmap(fn)(_functional.stack(samples))
    except RuntimeError as ex:
        raise GradcheckError(f"While computing batched gradients, got: {ex}\n\n"
                             f"{advice}") from ex
    for i, (res, exp) in enumerate(zip(result, expected)):
        if not _comparison.allclose(res, exp):
            raise GradcheckError(failure(i, res, exp))


def _check_batched_forward_grad(func, inputs):
    for position, current in enumerate(inputs):
        if not (isinstance(current, Tensor) and current.requires_grad):
            continue

        def jvp(tangent, position=position, current=current):
            args = [a.detach() if isinstance(a, Tensor) else a for a in inputs]

            def of_input(value):
                args[position] = value
                return tuple(o for o in _as_tuple(func(*args)) if isinstance(o, Tensor))
            return _func.jvp(of_input, (current.detach(),), (tangent,))[1]
        if not _is_float(current):
            continue
        tangents = [_creation.randn_like(current) for _ in range(2)]
        _one_by_one_as_batched(
            jvp, tangents, _BATCHED_FORWARD_ADVICE,
            lambda i, res, exp: _batched_failure(i, i, res, exp, forward=True))


def _check_backward_scales_with_cotangent(outputs, inputs):
    """A zero cotangent gives zero gradients of the inputs' types and sizes."""
    _, targets = _requiring_grad(inputs)
    if not targets:
        raise GradcheckError("no Tensors requiring grad found in input")
    grads = _autograd.grad(outputs, targets, [_creation.zeros_like(o) for o in outputs],
                           allow_unused=True)
    for g, t in zip(grads, targets):
        if g is None:
            continue
        if not bool(g.eq(0).all()):
            raise GradcheckError("backward not multiplied by grad_output")
        if g.dtype != t.dtype:
            raise GradcheckError("grad is incorrect type")
        if g.size() != t.size():
            raise GradcheckError("grad is incorrect size")


def _warn_undefined_check():
    warnings.warn(
        "Backwards compatibility: New undefined gradient support checking feature is enabled "
        "by default, but it may break existing callers of this function. If this is true for "
        'you, you can call this function with "check_undefined_grad=False" to disable the '
        "feature", stacklevel=4)


def _check_zero_cotangents(func, inputs):
    """Fresh outputs through backward with zero cotangents (tapegrad's stand-in for PyTorch's
    undefined ones): it must run and give zeros."""
    _, targets = _requiring_grad(inputs)
    if not targets:
        raise GradcheckError("no Tensors requiring grad found in input")
    outputs = [o for o in _differentiable_outputs(func(*inputs)) if isinstance(o, Tensor)]
    try:
        grads = _autograd.grad(outputs, targets, [_creation.zeros_like(o) for o in outputs],
                               allow_unused=True)
    except RuntimeError as e:
        _warn_undefined_check()
        raise GradcheckError("Expected backward function to handle undefined output grads. "
                             "Zero (undefined) output gradients must give zero input "
                             "gradients.") from e
    for g in grads:
        if g is not None and not bool(g.eq(0).all()):
            _warn_undefined_check()
            raise GradcheckError("Expected all input grads to be undefined or zero when all "
                                 "output grads are undefined or zero.")


# ---------------------------------------------------------------------------------------------
# The public checks
# ---------------------------------------------------------------------------------------------
def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False, masked=None):
    """Checks ``func``'s gradients with respect to the ``inputs`` that require grad against
    central differences of step ``eps``, as PyTorch's ``torch.autograd.gradcheck``.

    ``inputs`` is a tensor or a tuple of them (other values are passed through).  Returns True
    when every Jacobian entry satisfies ``allclose(analytical, numerical, rtol, atol)`` and
    the further checks pass; otherwise raises ``GradcheckError`` (with the two Jacobians), or
    returns False with ``raise_exception=False``.  ``fast_mode`` compares ``v^T J u`` for
    random unit ``u``, ``v`` instead of whole Jacobians; ``check_forward_ad`` checks forward
    mode as well, ``check_backward_ad=False`` only it.  The inputs are perturbed in place and
    restored.  ``masked`` concerns sparse inputs, which tapegrad does not have.

    Example:
        >>> x = tg.tensor([0.5, 1.5], requires_grad=True)
        >>> tg.autograd.gradcheck(lambda a: (a.sin() * a).sum(), (x,))
        True
        >>> tg.autograd.gradcheck(lambda a: a.exp(), x, fast_mode=True)
        True
    """
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError(
            "Expected at least one of check_forward_ad or check_backward_ad to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError(
            "Setting check_batched_grad=True requires check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError(
            "Setting check_batched_forward_grad=True requires check_forward_ad to be True")
    try:
        return _gradcheck(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
                          check_grad_dtypes, check_batched_grad, check_batched_forward_grad,
                          check_forward_ad, check_backward_ad, fast_mode)
    except GradcheckError:
        if raise_exception:
            raise
        return False


def _gradcheck(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
               check_grad_dtypes, check_batched_grad, check_batched_forward_grad,
               check_forward_ad, check_backward_ad, fast_mode):
    inputs = _as_tuple(inputs)
    _check_inputs(inputs)
    func_out = func(*inputs)
    outputs = _differentiable_outputs(func_out)
    check = _fast_check if fast_mode else _slow_check
    if check_backward_ad:
        check(func, func_out, inputs, outputs, eps, rtol, atol, check_grad_dtypes, nondet_tol)
    if check_forward_ad:
        check(func, func_out, inputs, outputs, eps, rtol, atol, check_grad_dtypes, nondet_tol,
              use_forward_ad=True)
    if check_batched_forward_grad:
        _check_batched_forward_grad(func, inputs)
    if not check_backward_ad:
        return True
    if check_batched_grad:
        for i, o in enumerate(outputs):
            _check_batched_grad(inputs, o, i)
    _check_backward_scales_with_cotangent(outputs, inputs)
    if check_undefined_grad:
        _check_zero_cotangents(func, inputs)
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """Checks the gradients of ``func``'s gradients, as PyTorch's
    ``torch.autograd.gradgradcheck``: ``gradcheck`` of the function that maps the inputs and
    the output cotangents ``grad_outputs`` to ``autograd.grad(func(inputs), inputs,
    grad_outputs, create_graph=True)``.

    Without ``grad_outputs``, cotangents are drawn uniformly from [-1, 1) with the global
    generator (``manual_seed``), as PyTorch's ``make_tensor`` draws them, and require grad.
    ``gen_non_contig_grad_outputs`` changes no value (tapegrad does not lay them out
    differently).  Other arguments as ``gradcheck``.

    Example:
        >>> x = tg.tensor([0.5, 1.5], requires_grad=True)
        >>> tg.autograd.gradgradcheck(lambda a: (a ** 3).sum(), (x,))
        True
    """
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError(
            "Expected at least one of check_fwd_over_rev or check_rev_over_rev to be True")
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError(
            "Setting check_undefined_grad=True requires check_rev_over_rev to be True")
    if check_batched_grad and not check_rev_over_rev:
        raise AssertionError(
            "Setting check_batched_grad=True requires check_rev_over_rev to be True")
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        grad_outputs = tuple(
            _creation.empty(o.shape).uniform_(-1, 1).requires_grad_()
            for o in _differentiable_outputs(func(*inputs)))
    else:
        grad_outputs = _as_tuple(grad_outputs)
    n_outputs = len(grad_outputs)
    # gradcheck perturbs and differentiates copies of the arguments: which of them took part
    # is remembered here
    input_positions = {i for i, x in enumerate(inputs)
                       if isinstance(x, Tensor) and x.requires_grad}
    cotangent_positions = {i for i, x in enumerate(grad_outputs) if x.requires_grad}

    def gradients(*args):
        xs = tuple(x.requires_grad_() if i in input_positions else x
                   for i, x in enumerate(args[:-n_outputs]))
        outs = _differentiable_outputs(func(*xs))
        cots = tuple(x.requires_grad_() if i in cotangent_positions else x
                     for i, x in enumerate(args[-n_outputs:]))
        wrt = tuple(x for i, x in enumerate(xs) if i in input_positions)
        grads = _autograd.grad(outs, wrt, cots, create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(gradients, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes,
                     check_batched_grad=check_batched_grad, fast_mode=fast_mode,
                     check_forward_ad=check_fwd_over_rev,
                     check_backward_ad=check_rev_over_rev, masked=masked)


# named by the module users import them from, as PyTorch's are (and GradcheckError pickles)
for _public in (gradcheck, gradgradcheck, GradcheckError):
    _public.__module__ = "tapegrad.autograd.gradcheck"
del _public

from ._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())
