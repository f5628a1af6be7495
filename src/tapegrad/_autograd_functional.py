"""``tapegrad.autograd.functional``: ``jacobian``, ``hessian``, ``vjp``, ``jvp``, ``hvp`` and
``vhp`` with ``torch.autograd.functional``'s conventions: ``inputs`` is a tensor or a tuple
of tensors, results are nested the same way (``jacobian`` of a tuple of outputs with respect
to a tuple of inputs is a tuple of tuples), the products return ``(func_output, product)``,
``create_graph=True`` gives results differentiable again and ``strict=True`` refuses outputs
independent of an input, with PyTorch's messages.

Without ``create_graph`` or ``strict`` the numbers come from the compiled sweeps over one
recorded tape (``_transform_core.Recorded``, ``higher``'s forward over reverse); with them,
from ``autograd.grad`` with recorded gradients, step by step as PyTorch computes them.
(The module is registered as ``tapegrad.autograd.functional`` by the package.)
"""
import numpy as np

from . import _transform_core as core
from . import functional as F
from .autograd import enable_grad
from .tensor import Tensor

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


# ---------------------------------------------------------------------------------------------
# Arguments and results, as PyTorch shapes them
# ---------------------------------------------------------------------------------------------
def _as_tuple(value, arg_name, fn_name):
    """(whether ``value`` was a tuple, it as a tuple of tensors)."""
    is_tuple = isinstance(value, tuple)
    items = value if is_tuple else (value,)
    for i, el in enumerate(items):
        if not isinstance(el, Tensor):
            where = f"the value at index {i}" if is_tuple else f"the given {arg_name}"
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                            f"tuple of Tensors but {where} has type {type(el)}.")
    return is_tuple, items


def _outputs(value, fn_name):
    return _as_tuple(value, "outputs of the user-provided function", fn_name)


def _check_float(inputs):
    """``inputs``, checked to be floating point (the differentiated inputs must be)."""
    core.check_inputs(inputs)
    return inputs


def _prepare(inputs, create_graph, need_graph=True):
    """What the function is called with (PyTorch's ``_grad_preprocess``): with
    ``create_graph``, a recorded copy of an input that requires grad (results stay
    differentiable with respect to it); otherwise a fresh tensor holding its value."""
    if need_graph:
        _check_float(inputs)
    return tuple(F.clone(x) if create_graph and x._rg else Tensor._make(x._value, need_graph)
                 for x in inputs)


def _finish(values, create_graph):
    """Results as PyTorch returns them: constants unless ``create_graph``."""
    if create_graph:
        return tuple(values)
    return tuple(core.constant(v) if isinstance(v, Tensor) else _finish(v, False)
                 for v in values)


def _unpack(result, is_tuple):
    """``result`` (a tuple) as PyTorch returns it: its only element unless ``is_tuple``."""
    return result if is_tuple else result[0]


def _unpack2(result, is_outer_tuple, is_inner_tuple):
    if not is_inner_tuple:
        result = tuple(r[0] for r in result)
    return result if is_outer_tuple else result[0]


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got "
                               f"{len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if el_v._value.shape != el_other._value.shape:
            prefix = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be {el_other.size()} but got "
                               f"{el_v.size()}.")


def _v_or_ones(v, fn_name, like, like_tuple, create_graph, what):
    """``v`` as a tuple checked against ``like``, or ones when ``like`` is one element."""
    if v is not None:
        _, v = _as_tuple(v, "v", fn_name)
        v = _prepare(v, create_graph, need_graph=False)
        _validate_v(v, like, like_tuple)
        return v
    if len(like) != 1 or like[0]._value.size != 1:
        raise RuntimeError(f"The vector v can only be None if {what} a single Tensor with a "
                           "single element.")
    return (Tensor._make(np.ones(like[0]._value.shape)),)


def _check_requires_grad(values, kind, strict):
    if not strict:
        return
    for i, x in enumerate(values):
        if x is None:
            raise RuntimeError(f"The output of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode.")
        if x._rg:
            continue
        if kind == "hessian":
            raise RuntimeError(
                f"The hessian of the user-provided function with respect to input {i} is "
                "independent of the input. This is not allowed in strict mode. You should "
                "ensure that your function is thrice differentiable and that the hessian "
                "depends on the inputs.")
        if kind == "jacobian":
            raise RuntimeError(
                "While computing the hessian, found that the jacobian of the user-provided "
                f"function with respect to input {i} is independent of the input. This is not "
                "allowed in strict mode. You should ensure that your function is twice "
                "differentiable and that the jacobian depends on the inputs (this would be "
                "violated by a linear function for example).")
        if kind == "grad_inputs":
            raise RuntimeError(
                f"The gradient with respect to input {i} is independent of the inputs of the "
                "user-provided function. This is not allowed in strict mode.")
        raise RuntimeError(
            f"Output {i} of the user-provided function does not require gradients. The outputs "
            "must be computed in a differentiable manner from the input when running in strict "
            "mode.")


_INDEPENDENT = {
    "back": "The output of the user-provided function is independent of input {i}. This is "
            "not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
                  "grad_outputs when using the double backward trick to compute forward mode "
                  "gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. "
                   "This is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry "
                         "{i} in the grad_jacobian. This is not allowed in strict mode as it "
                         "prevents from using the double backward trick to replace forward "
                         "mode AD.",
}


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    out = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_INDEPENDENT[stage].format(i=i))
            g = core.zeros_like(refs[i])
        elif strict and create_graph and not g._rg:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(f"The {what} of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode when "
                               "create_graph=True.")
        out.append(g)
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# vjp, jvp
# ---------------------------------------------------------------------------------------------
def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``: the vector-Jacobian product for the cotangent ``v``
    (optional when the output has one element), shaped as the inputs.

    Example:
        >>> from tapegrad.autograd.functional import vjp
        >>> vjp(lambda x: x ** 2, tg.tensor([1.0, 2.0]), tg.tensor([1.0, 1.0]))
        (tensor([1., 4.]), tensor([2., 4.]))
    """
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        xs = _prepare(inputs, create_graph)
        is_outputs_tuple, outputs = _outputs(func(*xs), "vjp")
        _check_requires_grad(outputs, "outputs", strict)
        v = _v_or_ones(v, "vjp", outputs, is_outputs_tuple, create_graph,
                       "the user-provided function returns")
    grads = core.reverse(outputs, v, xs, graph=create_graph, retain=False)
    result = _fill_in_zeros(grads, xs, strict, create_graph, "back")
    return (_unpack(_finish(outputs, create_graph), is_outputs_tuple),
            _unpack(_finish(result, create_graph), is_inputs_tuple))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)``: the Jacobian-vector product for the tangent ``v`` (optional
    when the input has one element), shaped as the outputs.  By forward mode (compiled
    tangent sweep), or with ``create_graph``/``strict`` by PyTorch's double-backward trick.

    Example:
        >>> from tapegrad.autograd.functional import jvp
        >>> jvp(lambda x: x ** 2, tg.tensor([1.0, 2.0]), tg.tensor([1.0, 0.0]))
        (tensor([1., 4.]), tensor([2., 0.]))
    """
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
    if not (create_graph or strict):
        v = _v_or_ones(v, "jvp", inputs, is_inputs_tuple, False,
                       "the input to the user-provided function is")
        held = {}

        def flat_fn(*pieces):
            is_tuple, outs = _outputs(func(*pieces), "jvp")
            held["tuple"] = is_tuple
            return list(outs)
        recorded = core.Recorded(flat_fn, list(_check_float(inputs)))
        products = recorded.jvp([t._value for t in v])
        return (_unpack(tuple(recorded.outputs), held["tuple"]),
                _unpack(tuple(products), held["tuple"]))
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        v = _v_or_ones(v, "jvp", xs, is_inputs_tuple, create_graph,
                       "the input to the user-provided function is")
        is_outputs_tuple, outputs = _outputs(func(*xs), "jvp")
        _check_requires_grad(outputs, "outputs", strict)
        dummies = tuple(Tensor._make(np.zeros(o._value.shape), True) for o in outputs)
        grad_inputs = core.reverse(outputs, dummies, xs, graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict)
    grads = core.reverse(grad_inputs, v, dummies, graph=create_graph)
    result = _fill_in_zeros(grads, outputs, strict, create_graph, "back_trick")
    return (_unpack(_finish(outputs, create_graph), is_outputs_tuple),
            _unpack(_finish(result, create_graph), is_outputs_tuple))


# ---------------------------------------------------------------------------------------------
# jacobian, hessian
# ---------------------------------------------------------------------------------------------
_FORWARD_WITH_CREATE_GRAPH = (
    "tapegrad.autograd.functional.jacobian: `create_graph=True` and "
    '`strategy="forward-mode"` are not supported together (yet). Please either set '
    '`create_graph=False` or `strategy="reverse-mode"`.')
_FORWARD_WITH_STRICT = (
    "tapegrad.autograd.functional.jacobian: `strict=True` and "
    '`strategy="forward-mode"` are not supported together (yet). Please either set '
    '`strict=False` or `strategy="reverse-mode"`.')


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: a tensor of shape ``output.shape +
    input.shape``, or tuples of them (over outputs, then inputs) where ``func`` returns a
    tuple or ``inputs`` is one.  ``strategy="reverse-mode"`` sweeps back once per output
    element, ``"forward-mode"`` (which PyTorch allows with ``vectorize=True`` only) pushes
    tangents, many per sweep; ``vectorize`` changes nothing else.

    Example:
        >>> from tapegrad.autograd.functional import jacobian
        >>> jacobian(lambda x: x ** 2, tg.tensor([1.0, 2.0]))
        tensor([[2., 0.],
                [0., 4.]])
        >>> dx, dy = jacobian(lambda x, y: x * y, (tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0])))
        >>> dy
        tensor([[1., 0.],
                [0., 2.]])
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
            'function has more outputs than inputs, "forward-mode" tends to be more '
            'performant. Otherwise, prefer to use "reverse-mode".')
    forward = strategy == "forward-mode"
    if forward:
        if create_graph:
            raise NotImplementedError(_FORWARD_WITH_CREATE_GRAPH)
        if strict:
            raise RuntimeError(_FORWARD_WITH_STRICT)
        if not vectorize:
            # (PyTorch's text, its missing space included)
            raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-"
                                      "reverse Hessian isonly implemented for "
                                      "`vectorize=True`.")
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    if not (create_graph or strict):
        held = {}

        def flat_fn(*pieces):
            is_tuple, outs = _outputs(func(*pieces), "jacobian")
            held["tuple"] = is_tuple
            return list(outs)
        recorded = core.Recorded(flat_fn, list(_check_float(inputs)))
        blocks = recorded.jacobian(forward)
        # PyTorch's forward-mode result is nested in lists, its reverse-mode one in tuples
        if not forward:
            blocks = tuple(tuple(row) for row in blocks)
        return _unpack2(blocks, held["tuple"], is_inputs_tuple)
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        is_outputs_tuple, outputs = _outputs(func(*xs), "jacobian")
        _check_requires_grad(outputs, "outputs", strict)
        if vectorize and strict:
            raise RuntimeError("tapegrad.autograd.functional.jacobian: `strict=True` and "
                               "`vectorized=True` are not supported together. Please either "
                               "set `strict=False` or `vectorize=False`.")
        blocks, reached = core.jacobian_by_rows(outputs, xs, graph=create_graph)
    for i, (row, hits) in enumerate(zip(blocks, reached)):
        for j, (block, hit) in enumerate(zip(row, hits)):
            if not hit and strict:
                raise RuntimeError(f"Output {i} of the user-provided function is independent "
                                   f"of input {j}. This is not allowed in strict mode.")
            if hit and strict and create_graph and not block._rg:
                raise RuntimeError(f"The jacobian of the user-provided function is "
                                   f"independent of input {i}. This is not allowed in strict "
                                   "mode when create_graph=True.")
    blocks = tuple(_finish(row, create_graph) for row in blocks)
    return _unpack2(blocks, is_outputs_tuple, is_inputs_tuple)


def _single_output(func, fn_name, strict=False):
    """``func`` checked to return one tensor of one element (PyTorch's checks and words)."""
    def checked(*inputs):
        out = func(*inputs)
        is_tuple, outs = _outputs(out, fn_name)
        _check_requires_grad(outs, "outputs", strict)
        if is_tuple or not isinstance(out, Tensor):
            raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
        if out._value.size != 1:
            raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should "
                               "contain a single element")
        return out
    return checked


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a function with one output element: shape ``input.shape +
    input.shape``, or a tuple of tuples of blocks for a tuple of inputs.  By compiled
    forward over reverse (all unit seeds, many per sweep); with ``create_graph``/``strict``
    as the Jacobian of the recorded Jacobian, as PyTorch computes it.

    Example:
        >>> from tapegrad.autograd.functional import hessian
        >>> hessian(lambda x: (x ** 3).sum(), tg.tensor([1.0, 2.0]))
        tensor([[ 6.,  0.],
                [ 0., 12.]])
    """
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    scalar = _single_output(func, "hessian", strict)
    forward = outer_jacobian_strategy == "forward-mode"
    if not (create_graph or strict):
        if forward and not vectorize:
            jacobian(func, inputs, strategy="forward-mode")   # PyTorch's error
        inputs = list(_check_float(inputs))
        n = sum(x._value.size for x in inputs)
        _, products = core.hessian_products(lambda *p: F.reshape(scalar(*p), ()), inputs,
                                            np.eye(n))
        # row k of ``products`` is H e_k, column k of H; nested in lists after a
        # forward-mode outer Jacobian, as PyTorch's are
        blocks = core.blocks(products.T, inputs, inputs)
        if not forward:
            blocks = tuple(tuple(row) for row in blocks)
        return _unpack2(blocks, is_inputs_tuple, is_inputs_tuple)

    def jac_func(*inp):
        if outer_jacobian_strategy == "forward-mode":
            inp = tuple(t.requires_grad_(True) for t in inp)
        jac = jacobian(lambda *a: F.reshape(scalar(*a), ()), inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    result = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict,
                      vectorize=vectorize, strategy=outer_jacobian_strategy)
    return _unpack2(result, is_inputs_tuple, is_inputs_tuple)


# ---------------------------------------------------------------------------------------------
# hvp, vhp
# ---------------------------------------------------------------------------------------------
def _hessian_product(func, inputs, v, create_graph, strict, fn_name, transposed):
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    scalar = _single_output(func, fn_name, strict)
    if not (create_graph or strict):
        v = _v_or_ones(v, fn_name, inputs, is_inputs_tuple, False,
                       "the input to the user-provided function is")
        seed = np.concatenate([t._value.reshape(-1) for t in v]).reshape(1, -1)
        value, products = core.hessian_products(scalar, list(_check_float(inputs)), seed)
        result = core.split_flat(products[0], inputs)
        return Tensor._make(value), _unpack(tuple(result), is_inputs_tuple)
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        v = _v_or_ones(v, fn_name, xs, is_inputs_tuple, create_graph,
                       "the input to the user-provided function is")
        output = scalar(*xs)
        jac = core.reverse([output], [None], xs, graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        if transposed:
            grads = core.reverse(jac, v, xs, graph=create_graph)
            result = _fill_in_zeros(grads, xs, strict, create_graph, "double_back")
        else:
            grad_jac = tuple(Tensor._make(np.zeros(x._value.shape), True) for x in xs)
            double_back = core.reverse(jac, grad_jac, xs, graph=True)
            _check_requires_grad(jac, "hessian", strict)
            grads = core.reverse(double_back, v, grad_jac, graph=create_graph)
            result = _fill_in_zeros(grads, xs, strict, create_graph, "double_back_trick")
    return (_finish((output,), create_graph)[0],
            _unpack(_finish(result, create_graph), is_inputs_tuple))


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)`` for a function with one output element.

    Example:
        >>> from tapegrad.autograd.functional import hvp
        >>> hvp(lambda x: (x ** 3).sum(), tg.tensor([1.0, 2.0]), tg.tensor([1.0, 1.0]))
        (tensor(9.), tensor([ 6., 12.]))
    """
    return _hessian_product(func, inputs, v, create_graph, strict, "hvp", transposed=False)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T H)`` for a function with one output element (equal to ``H v``
    where the Hessian is symmetric).

    Example:
        >>> from tapegrad.autograd.functional import vhp
        >>> vhp(lambda x: (x ** 3).sum(), tg.tensor([1.0, 2.0]), tg.tensor([1.0, 1.0]))
        (tensor(9.), tensor([ 6., 12.]))
    """
    return _hessian_product(func, inputs, v, create_graph, strict, "vhp", transposed=True)

