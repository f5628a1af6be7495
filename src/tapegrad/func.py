"""``tapegrad.func``: PyTorch's composable function transforms (``torch.func``) under their
names, with their argument and return conventions: ``grad``, ``grad_and_value``, ``vjp``,
``jvp``, ``jacrev``, ``jacfwd``, ``hessian``, ``vmap``, ``functional_call`` and
``stack_module_state``.

Arguments may be tensors or nested tuples, lists and dicts of them; ``argnums`` picks the
ones to differentiate, ``has_aux`` lets the function return ``(output, aux)``.  Transforms
compose (``hessian`` is ``jacfwd(jacrev(f))``, ``vmap(grad(f))`` gives per-sample
gradients); how they are computed is in ``_transform_core``.  ``vmap`` replays one recorded
tape for the whole batch where it can (``tapegrad.compile``'s batched replay), else calls
the function once per sample and stacks the results.
"""
import functools

import numpy as np

from . import _transform_core as core
from . import functional as F
from .autograd import enable_grad, is_grad_enabled
from .replay import Compiled, _batched, _EagerWhile, _flatten, _is_sequence, _unflatten
from .tape import state
from .tensor import Tensor

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap",
           "functional_call", "stack_module_state"]


# ---------------------------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------------------------
def _argnums(argnums, n_args):
    """``argnums`` checked as PyTorch checks it, as a tuple of non-negative indices."""
    if isinstance(argnums, int) and not isinstance(argnums, bool):
        nums = (argnums,)
    elif isinstance(argnums, tuple) and all(isinstance(a, int) for a in argnums):
        if not argnums:
            raise RuntimeError("argnums must be non-empty")
        if len(set(argnums)) != len(argnums):
            raise RuntimeError(f"argnums elements must be unique, got {argnums}")
        nums = argnums
    else:
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    for a in nums:
        if not -n_args <= a < n_args:
            raise RuntimeError(f"Got argnum={a}, but only {n_args} positional inputs")
    return tuple(a % n_args for a in nums)


class _Differentiated:
    """The arguments a transform differentiates: their tensors, flattened in order, and how
    to put tensors standing for them (or results about them) back in their places."""

    def __init__(self, args, nums, int_argnums):
        self.args, self.nums, self.int_argnums = args, nums, int_argnums
        self.layout = []
        self.tensors = []
        for i in nums:
            leaves, spec = _flatten(args[i])
            core.check_inputs(leaves)
            self.layout.append((len(leaves), spec))
            self.tensors.extend(leaves)

    def _groups(self, flat):
        groups, k = [], 0
        for n, spec in self.layout:
            groups.append(_unflatten(spec, flat[k:k + n]))
            k += n
        return groups

    def call_args(self, replacements):
        """The arguments with the differentiated tensors replaced."""
        call = list(self.args)
        for i, group in zip(self.nums, self._groups(list(replacements))):
            call[i] = group
        return call

    def per_argnum(self, flat):
        """Results aligned with ``tensors`` in the structure of the differentiated arguments:
        one argument's for an int ``argnums``, a tuple of them for a tuple."""
        groups = self._groups(list(flat))
        return groups[0] if self.int_argnums else tuple(groups)

    def tracked(self):
        """Whether an outer computation tracks an input: results must then be recorded."""
        return any(x._rg for x in self.tensors)


def _split_aux(out, has_aux, api):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if "
                           "has_aux is True")
    return out


def _constants(tree):
    """``tree`` with every tensor in it replaced by its value, untracked."""
    leaves, spec = _flatten(tree)
    return _unflatten(spec, [core.constant(x) if isinstance(x, Tensor) else x for x in leaves])


def _zeros_for_none(grads, like):
    return [core.zeros_like(x) if g is None else g for g, x in zip(grads, like)]


def _output_tensors(output, api):
    """The tensors of a function's output, flattened, and its structure."""
    leaves, spec = _flatten(output)
    if not leaves or (len(leaves) == 1 and leaves[0] is None):
        raise RuntimeError(f"{api}: Expected f to be a function that has non-empty output (got "
                           f"output = {leaves})")
    for o in leaves:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"{api}: expected f(*primals) to return only tensors, got "
                               f"unsupported type {type(o)}")
    return leaves, spec


def _describe(tree):
    """A structure for error messages: ``*`` for each leaf."""
    leaves, spec = _flatten(tree)
    return repr(_unflatten(spec, ["*"] * len(leaves))).replace("'*'", "*")


# ---------------------------------------------------------------------------------------------
# Reverse mode
# ---------------------------------------------------------------------------------------------
def grad_and_value(func, argnums=0, has_aux=False):
    """``func(*args) -> 0-d tensor`` becomes ``(*args) -> (gradient, value)`` (with
    ``has_aux``: ``(gradient, (value, aux))``); the gradient has the structure of
    ``args[argnums]`` (a tuple of them for a tuple of argnums).

    Example:
        >>> f = lambda x: (x ** 3).sum()
        >>> tg.func.grad_and_value(f)(tg.tensor([1.0, 2.0]))
        (tensor([ 3., 12.]), tensor(9.))
    """
    api = "grad_and_value(f)(*args)"

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        diff = _Differentiated(args, _argnums(argnums, len(args)), isinstance(argnums, int))
        outer = is_grad_enabled()
        with enable_grad():
            stand_ins = [core.stand_in(x) for x in diff.tensors]
            output, aux = _split_aux(func(*diff.call_args(stand_ins), **kwargs), has_aux, api)
            if not isinstance(output, Tensor):
                raise RuntimeError(f"{api}: Expected f(*args) to return a Tensor, got "
                                   f"{type(output)}")
            if output._value.ndim != 0:
                raise RuntimeError(
                    f"{api}: Expected f(*args) to return a scalar Tensor, got tensor with "
                    f"{output._value.ndim} dims. Maybe you wanted to use the vjp or jacrev "
                    "APIs instead?")
            graph = outer and (diff.tracked() or core.depends_on_others([output], stand_ins))
            grads = core.reverse([output], [None], stand_ins, graph, retain=False)
        grads = diff.per_argnum(_zeros_for_none(grads, stand_ins))
        if not graph:
            output, aux = core.constant(output), _constants(aux)
        return (grads, (output, aux)) if has_aux else (grads, output)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """``func(*args) -> 0-d tensor`` becomes ``(*args) -> gradient`` (with ``has_aux``:
    ``(gradient, aux)``); see ``grad_and_value``.

    Example:
        >>> f = lambda x, y: (x * y).sum()
        >>> x, y = tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0])
        >>> tg.func.grad(f)(x, y)
        tensor([3., 4.])
        >>> tg.func.grad(f, argnums=(0, 1))(x, y)
        (tensor([3., 4.]), tensor([1., 2.]))
    """
    both = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        grads, value = both(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads
    return wrapper


def vjp(func, *primals, has_aux=False):
    """``(func(*primals), vjp_fn)``: ``vjp_fn(cotangents)`` (structured as the output) gives
    the vector-Jacobian products, a tuple with one entry per primal.  With ``has_aux``,
    ``(output, vjp_fn, aux)``.

    Example:
        >>> out, vjp_fn = tg.func.vjp(lambda x: x ** 2, tg.tensor([1.0, 2.0]))
        >>> out, vjp_fn(tg.tensor([1.0, 1.0]))
        (tensor([1., 4.]), (tensor([2., 4.]),))
    """
    api = "vjp(f, *primals)"
    diff = _Differentiated(primals, tuple(range(len(primals))), False)
    outer = is_grad_enabled()
    with enable_grad():
        stand_ins = [core.stand_in(x) for x in diff.tensors]
        output, aux = _split_aux(func(*diff.call_args(stand_ins)), has_aux, api)
        outs, spec = _output_tensors(output, api)
        graph = outer and (diff.tracked() or core.depends_on_others(outs, stand_ins))

    def vjp_fn(cotangents, retain_graph=True, create_graph=None):
        cots, cot_spec = _flatten(cotangents)
        if cot_spec != spec or len(cots) != len(outs):
            raise RuntimeError(
                "Expected pytree structure of cotangents to be the same as pytree structure of "
                f"outputs to the function. cotangents: {_describe(cotangents)}, primal output: "
                f"{_describe(output)}")
        for j, (c, o) in enumerate(zip(cots, outs)):
            if not isinstance(c, Tensor):
                raise RuntimeError(f"{api}: expected cotangents to be tensors, got {type(c)}")
            if c._value.shape != o._value.shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{j}] has a shape of tapegrad.Size("
                    f"{list(c._value.shape)}) and output[{j}] has a shape of tapegrad.Size("
                    f"{list(o._value.shape)}).")
        grads = core.reverse(outs, cots, stand_ins, graph or bool(create_graph))
        return diff.per_argnum(_zeros_for_none(grads, stand_ins))

    if not graph:
        output, aux = _constants(output), _constants(aux)
    return (output, vjp_fn, aux) if has_aux else (output, vjp_fn)


# ---------------------------------------------------------------------------------------------
# Forward mode and Jacobians
# ---------------------------------------------------------------------------------------------
def _needs_graph(diff, recorded):
    """Whether results must be recorded: an input or a parameter the function reads is
    tracked by an outer computation (only while grad mode is on)."""
    return is_grad_enabled() and (diff.tracked() or recorded.needs_graph())


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``(func(*primals), J tangents)`` by forward mode; ``primals`` is a tuple (of tensors or
    nested structures) and ``tangents`` has its structure.  With ``has_aux``,
    ``(output, jvp_out, aux)``.

    Example:
        >>> x, v = tg.tensor([1.0, 2.0]), tg.tensor([1.0, 0.0])
        >>> tg.func.jvp(lambda x: x ** 2, (x,), (v,))
        (tensor([1., 4.]), tensor([2., 0.]))
    """
    api = "jvp(f, primals, tangents)"
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{api}: Expected primals to be a tuple. E.g. it should be valid to "
                           "call f(*primals).")
    flat_primals, primals_spec = _flatten(primals)
    flat_tangents, tangents_spec = _flatten(tangents)
    if primals_spec != tangents_spec:
        raise RuntimeError(
            f"{api}: Expected primals and tangents to have the same python structure. For "
            "example, if primals is a tuple of 3 tensors, tangents also must be. Got primals "
            f"with structure {_describe(primals)} and tangents with structure "
            f"{_describe(tangents)}")
    for name, flat in (("primals", flat_primals), ("tangents", flat_tangents)):
        if not flat:
            raise RuntimeError(f"{api}: Expected {name} to contain at least one Tensor.")
        for x in flat:
            if not isinstance(x, Tensor):
                raise RuntimeError(f"{api}: Expected {name} to only contain Tensors, got "
                                   f"{type(x)}")
    for p, t in zip(flat_primals, flat_tangents):
        if p._value.shape != t._value.shape:
            raise RuntimeError(
                "Trying to set a forward gradient that has a different size than that of the "
                f"original Tensor, this is not supported. Tensor is of size "
                f"{list(p._value.shape)} while the given forward gradient is of size "
                f"{list(t._value.shape)}.")
    diff = _Differentiated(primals, tuple(range(len(primals))), False)
    held = {}

    def flat_fn(*pieces):
        output, aux = _split_aux(func(*diff.call_args(pieces)), has_aux, api)
        outs, spec = _output_tensors(output, api)
        held.update(spec=spec, aux=aux)
        return outs

    graph = is_grad_enabled() and diff.tracked()
    if not graph:
        recorded = core.Recorded(flat_fn, diff.tensors, forward_only=True)
        graph = _needs_graph(diff, recorded)
    if graph:
        with enable_grad():
            stand_ins = [core.stand_in(x) for x in diff.tensors]
            outs = flat_fn(*stand_ins)
            products = core.jvp_by_double_backward(outs, stand_ins, flat_tangents, graph=True)
        independent = [p is None for p in products]
        products = _zeros_for_none(products, outs)
        aux = held["aux"]
    else:
        outs = recorded.outputs
        independent = [not o._rg for o in recorded.raw_outputs]
        products = recorded.jvp([t._value for t in flat_tangents])
        aux = _constants(held["aux"])
    if strict and any(independent):
        raise RuntimeError("jvp(f, primals, tangents, strict=True): The output of f is "
                           "independent of the inputs. This is not allowed with strict=True.")
    spec = held["spec"]
    result = (_unflatten(spec, outs), _unflatten(spec, products))
    return result + (aux,) if has_aux else result


def _jacobian_transform(func, argnums, has_aux, forward):
    api = "jvp(f, primals, tangents)" if forward else "vjp(f, *primals)"

    @functools.wraps(func)
    def wrapper(*args):
        diff = _Differentiated(args, _argnums(argnums, len(args)), isinstance(argnums, int))
        held = {}

        def flat_fn(*pieces):
            output, aux = _split_aux(func(*diff.call_args(pieces)), has_aux, api)
            outs, spec = _output_tensors(output, api)
            held.update(spec=spec, aux=aux)
            return outs

        graph = is_grad_enabled() and diff.tracked()
        if not graph:
            recorded = core.Recorded(flat_fn, diff.tensors, forward_only=forward)
            graph = _needs_graph(diff, recorded)
        if graph:
            # recorded results, differentiable again (jacfwd too: reverse rows then)
            with enable_grad():
                stand_ins = [core.stand_in(x) for x in diff.tensors]
                blocks, _ = core.jacobian_by_rows(flat_fn(*stand_ins), stand_ins, graph=True)
            aux = held["aux"]
        else:
            blocks = recorded.jacobian(forward)
            aux = _constants(held["aux"])
        result = _unflatten(held["spec"], [diff.per_argnum(row) for row in blocks])
        return (result, aux) if has_aux else result
    return wrapper


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """``(*args) -> Jacobian`` of ``func`` with respect to ``args[argnums]`` by reverse mode:
    for each output, the derivative with respect to each input, of shape
    ``output.shape + input.shape`` (nested as the outputs, then as the arguments).
    ``chunk_size`` is accepted; the rows are computed one by one in any case.

    Example:
        >>> tg.func.jacrev(lambda x: x ** 2)(tg.tensor([1.0, 2.0]))
        tensor([[2., 0.],
                [0., 4.]])
    """
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")
    return _jacobian_transform(func, argnums, has_aux, forward=False)


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian as ``jacrev`` gives it, by forward mode (tangent sweeps, many columns
    per sweep).

    Example:
        >>> tg.func.jacfwd(lambda x: x[0] * x)(tg.tensor([2.0, 3.0]))
        tensor([[4., 0.],
                [3., 2.]])
    """
    _check_randomness(randomness)
    return _jacobian_transform(func, argnums, has_aux, forward=True)


def hessian(func, argnums=0):
    """``jacfwd(jacrev(func, argnums), argnums)``: second derivatives of shape
    ``output.shape + input.shape + input.shape``.

    Example:
        >>> tg.func.hessian(lambda x: (x ** 3).sum())(tg.tensor([1.0, 2.0]))
        tensor([[ 6.,  0.],
                [ 0., 12.]])
    """
    return jacfwd(jacrev(func, argnums), argnums)


# ---------------------------------------------------------------------------------------------
# vmap
# ---------------------------------------------------------------------------------------------
def _check_randomness(randomness):
    if randomness not in ("error", "different", "same"):
        raise RuntimeError("Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")
    if randomness == "same":
        raise NotImplementedError("randomness='same' (one random draw shared by the whole "
                                  "batch) is not supported by tapegrad's vmap")


def _name(func):
    return getattr(func, "__name__", type(func).__name__)


class _Mismatch(Exception):
    """``in_dims`` does not follow the structure of the arguments."""


def _leaf_dims(dims, tree):
    """The dim of each leaf of ``tree``: ``dims`` is an int or None for a whole subtree, or
    a tuple, list or dict following the tree's own structure."""
    if dims is None or isinstance(dims, int):
        return [dims] * len(_flatten(tree)[0])
    if isinstance(dims, dict) and type(tree) is dict and dims.keys() == tree.keys():
        return [d for key in tree for d in _leaf_dims(dims[key], tree[key])]
    if isinstance(dims, (tuple, list)) and _is_sequence(tree) and len(dims) == len(tree):
        return [d for sub_dims, sub in zip(dims, tree) for d in _leaf_dims(sub_dims, sub)]
    raise _Mismatch


def _select(x, dim, b):
    """Sample ``b`` of ``x`` along ``dim``, recorded (differentiable)."""
    return F.getitem(x, (slice(None),) * dim + (b,))


class _Vmapped:
    """``func`` mapped over a dimension of its inputs (see ``vmap``)."""

    def __init__(self, func, in_dims, out_dims, parallel):
        self.func, self.in_dims, self.out_dims, self.parallel = func, in_dims, out_dims, parallel
        self.compiled = None          # the batched replay's compiled function, once used
        self.replayable = True        # False once the batched replay does not apply
        self.out_spec = None
        functools.update_wrapper(self, func, updated=())

    def __call__(self, *args, **kwargs):
        in_dims = self.in_dims
        if not (isinstance(in_dims, int) or isinstance(in_dims, tuple)):
            raise ValueError(
                f"vmap({_name(self.func)}, in_dims={in_dims}, ...)(<inputs>): expected "
                "`in_dims` to be int or a (potentially nested) tuple matching the structure of "
                f"inputs, got: {type(in_dims)}.")
        leaves = _flatten(args)[0]
        try:
            dims = _leaf_dims(in_dims, args)
        except _Mismatch:
            raise ValueError(
                f"vmap({_name(self.func)}, in_dims={in_dims}, ...)(<inputs>): in_dims is not "
                "compatible with the structure of `inputs`. in_dims has structure "
                f"{_describe(in_dims)} but inputs has structure {_describe(args)}.") from None
        sizes, norm = [], []
        for x, d in zip(leaves, dims):
            if d is None:
                norm.append(None)
                continue
            if not isinstance(x, Tensor):
                raise ValueError(
                    f"vmap({_name(self.func)}, in_dims={in_dims}, ...)(<inputs>): Got "
                    f"in_dim={d} for an input but the input is of type {type(x)}. We cannot "
                    "vmap over non-Tensor arguments, please use None as the respective in_dim")
            n = x._value.ndim
            if not -n <= d < n:
                raise ValueError(
                    f"vmap({_name(self.func)}, in_dims={in_dims}, ...)(<inputs>): Got "
                    f"in_dim={d} for some input, but that input is a Tensor of dimensionality "
                    f"{n} so expected in_dim to satisfy -{n} <= in_dim < {n}.")
            norm.append(d % n)
            sizes.append(x._value.shape[d])
        if not sizes:
            raise ValueError("vmap: Expected at least one Tensor to vmap over")
        if len(set(sizes)) > 1:
            raise ValueError("vmap: Expected all tensors to have the same size in the mapped "
                             f"dimension, got sizes {sizes} for the mapped dimension")
        size = sizes[0]
        if size == 0:
            raise ValueError("vmap: a mapped dimension of size 0 is not supported (the "
                             "function is called once per sample, and there is none)")
        if self._replayable(args, kwargs, norm):
            got = self._replay(args, size)
            if got is not None:
                return got
        return self._loop(args, kwargs, leaves, norm, size)

    # --- one recorded tape replayed for the whole batch ---------------------------------------
    def _replayable(self, args, kwargs, dims):
        return (self.replayable and not kwargs and self.out_dims == 0 and
                state.trace is None and is_grad_enabled() and
                len(dims) == len(args) and all(d == 0 for d in dims) and
                all(isinstance(a, Tensor) and a._value.dtype.kind == "f" and not a._rg
                    for a in args))

    def _replay(self, args, size):
        """The batched replay of ``tapegrad.compile`` (one tensor out: the outputs are
        joined into one and cut apart again); None where it does not apply: outputs that
        are not float tensors, or a function that reads a tensor requiring grad (the results
        must then be recorded, which the per-sample path does)."""
        if self.compiled is None:
            def joined(*xs):
                outs, spec = _flatten(self.func(*xs))
                if not outs or not all(isinstance(o, Tensor) and o._value.dtype.kind == "f"
                                       for o in outs):
                    raise _NotJoinable
                self.out_spec = (spec, [o._value.shape for o in outs])
                return outs[0] if spec is None else F.cat([F.reshape(o, -1) for o in outs])
            self.compiled = Compiled(joined)
        try:
            values = _batched(self.compiled, None, False, self.parallel)(*args)
        except _NotJoinable:
            self.replayable = False
            return None
        if any(rg for variants in self.compiled._cache.values() if isinstance(variants, list)
               for v in variants if not isinstance(v, _EagerWhile)
               for (_, _, rg) in v.closure.values()):
            self.replayable = False
            return None
        spec, shapes = self.out_spec
        if spec is None:
            return values
        flat = values._value.reshape(size, -1)
        parts, offset = [], 0
        for shape in shapes:
            n = int(np.prod(shape, dtype=np.int64))
            parts.append(Tensor._make(np.ascontiguousarray(
                flat[:, offset:offset + n]).reshape((size,) + tuple(shape))))
            offset += n
        return _unflatten(spec, parts)

    # --- one call per sample, results stacked (recorded: differentiable) ---------------------
    def _loop(self, args, kwargs, leaves, dims, size):
        _, arg_spec = _flatten(args)
        results, spec = [], None
        for b in range(size):
            sample = [x if d is None else _select(x, d, b) for x, d in zip(leaves, dims)]
            out = self.func(*_unflatten(arg_spec, sample), **kwargs)
            outs, out_spec = _flatten(out)
            if spec is None:
                spec = out_spec
            elif out_spec != spec:
                raise ValueError(f"vmap({_name(self.func)}, ...): the function returned "
                                 "outputs of different structures for different samples")
            results.append(outs)
        out_dims = self.out_dims
        if isinstance(out_dims, int) or out_dims is None:
            out_dims = [out_dims] * len(results[0])
        else:
            dim_leaves, dim_spec = _flatten(out_dims)
            if dim_spec != spec:
                raise ValueError(
                    f"vmap({_name(self.func)}, ..., out_dims={self.out_dims})(<inputs>): "
                    "out_dims is not compatible with the structure of `outputs`. out_dims has "
                    f"structure {_describe(self.out_dims)} but outputs has structure "
                    f"{_describe(_unflatten(spec, ['*'] * len(results[0])))}.")
            out_dims = dim_leaves
        stacked = []
        for j, d in enumerate(out_dims):
            column = [r[j] for r in results]
            first = column[0]
            if d is None:
                if isinstance(first, Tensor) and not all(
                        c is first or np.array_equal(c._value, first._value) for c in column):
                    raise ValueError(f"vmap({_name(self.func)}, ...): `{_name(self.func)}` can "
                                     "not return a BatchedTensor when out_dim is None")
                stacked.append(first)
                continue
            if not isinstance(first, Tensor):
                raise ValueError(f"vmap({_name(self.func)}, ...): `{_name(self.func)}` must only "
                                 f"return Tensors, got type {type(first)}. Did you mean to set "
                                 "out_dims= to None for output?")
            stacked.append(F.stack(column, d))
        return _unflatten(spec, stacked)


class _NotJoinable(Exception):
    """A vmapped function's outputs cannot be joined into one float tensor for replay."""


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None, parallel=None):
    """``func`` mapped over dimension ``in_dims`` of its inputs (an int for all, None for an
    input that is not mapped, or a structure matching the arguments), its outputs stacked
    along ``out_dims``.

    Float tensors mapped along dimension 0 into a function of tensors only replay one
    recorded tape over the whole batch in compiled code (``parallel`` as for
    ``tapegrad.compile``'s batched replay: True/False/None for numba's threads, the same
    numbers either way); anything else, or inputs that require grad (the results are then
    recorded, differentiable), calls ``func`` once per sample.  ``randomness``: random
    numbers drawn inside are different for each sample (``"error"`` does not detect them;
    ``"same"`` is not supported).  ``chunk_size`` is accepted and changes nothing.

    Example:
        >>> rows = tg.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> tg.vmap(lambda r: r.dot(r))(rows)
        tensor([ 5., 25.])
        >>> tg.vmap(lambda a, b: a * b, in_dims=(0, None))(rows, tg.tensor([10.0, 100.0]))
        tensor([[ 10., 200.],
                [ 30., 400.]])
    """
    _check_randomness(randomness)
    if getattr(func, "_batched_run", None) is not None and in_dims == 0 and out_dims == 0:
        # a tape loaded from a file: its own batched replay (there is no function to call
        # per sample, and samples it cannot replay are named in the error)
        return _batched(func, None, False, parallel)
    return _Vmapped(func, in_dims, out_dims, parallel)


# ---------------------------------------------------------------------------------------------
# functional_call
# ---------------------------------------------------------------------------------------------
def _owner(module, name):
    """(the submodule holding ``name``'s last part, that part)."""
    *path, attr = name.split(".")
    for part in path:
        module = getattr(module, part)
    return module, attr


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """Call ``module(*args, **kwargs)`` with some of its parameters and buffers replaced by
    the tensors in ``parameter_and_buffer_dicts`` (a dict of qualified names, or a tuple of
    dicts), then put the originals back.  With ``tie_weights`` a parameter registered under
    several names is replaced under all of them; ``strict`` requires every parameter and
    buffer and nothing else.

    Example:
        >>> m = nn.Linear(2, 1)
        >>> params = {"weight": tg.tensor([[1.0, 2.0]]), "bias": tg.tensor([0.5])}
        >>> tg.func.functional_call(m, params, (tg.tensor([[1.0, 1.0]]),))
        tensor([[3.5000]])
        >>> m.weight.shape    # the module's own parameters are back
        tapegrad.Size([1, 2])
    """
    if isinstance(parameter_and_buffer_dicts, dict):
        replacements = dict(parameter_and_buffer_dicts)
    else:
        replacements = {}
        seen = set()
        for d in parameter_and_buffer_dicts:
            repeated = [k for k in d if k in seen]
            if repeated:
                raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of "
                                 "functional call is ambiguous")
            seen.update(d)
            replacements.update(d)
    members = dict(module.named_parameters(remove_duplicate=False))
    members.update(module.named_buffers(remove_duplicate=False))
    if tie_weights:
        by_identity = {}
        for name, t in members.items():
            by_identity.setdefault(id(t), []).append(name)
        for names in by_identity.values():
            given = [n for n in names if n in replacements]
            if len(given) > 1 and any(replacements[n] is not replacements[given[0]]
                                      for n in given):
                raise ValueError(f"functional_call got multiple values for keys "
                                 f"{sorted(names)}, which are tied. Consider using "
                                 "tie_weights=False")
            if given:
                for n in names:
                    replacements.setdefault(n, replacements[given[0]])
    if strict:
        missing = sorted(n for n in members if n not in replacements)
        unexpected = sorted(n for n in replacements if n not in members)
        if missing or unexpected:
            lines = [f"Error(s) in reparametrizing for {type(module).__name__}:"]
            if unexpected:
                lines.append("\tUnexpected key(s): " + ", ".join(f"'{k}'" for k in unexpected)
                             + ".")
            if missing:
                lines.append("\tMissing key(s): " + ", ".join(f"'{k}'" for k in missing) + ".")
            raise RuntimeError("\n".join(lines))

    restore = []
    try:
        for name, value in replacements.items():
            owner, attr = _owner(module, name)
            for kind in ("_parameters", "_buffers"):
                store = owner.__dict__[kind]
                if attr in store:
                    restore.append((store, attr, store[attr]))
                    store[attr] = value
                    break
            else:
                # not a parameter or buffer: an attribute for the duration of the call
                restore.append((owner.__dict__, attr, owner.__dict__.get(attr, _ABSENT)))
                owner.__dict__[attr] = value
        if args is None:
            args = ()
        elif not isinstance(args, tuple):
            args = (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for store, attr, old in reversed(restore):
            if old is _ABSENT:
                del store[attr]
            else:
                store[attr] = old


_ABSENT = object()


# ---------------------------------------------------------------------------------------------
# stack_module_state
# ---------------------------------------------------------------------------------------------
def _stacked_leaf(tensors, name):
    """``tensors`` stacked along a new first dimension.  Stacked parameters become new leaves
    that require grad, unconnected to the models' own, so an optimizer can take them as they
    are; tensors that do not require grad stay that way."""
    requiring = [t.requires_grad for t in tensors]
    if any(requiring) and not all(requiring):
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    stacked = F.stack(tuple(tensors))
    if all(requiring):
        stacked = stacked.detach().requires_grad_()
    return stacked


def stack_module_state(models):
    """``(params, buffers)``: dicts, by qualified name, of the parameters and buffers of
    ``models`` (modules of one class, in one training mode) stacked along a new first
    dimension, for ensembling with ``vmap`` and ``functional_call``.

    Example:
        >>> models = [nn.Linear(3, 2) for _ in range(4)]
        >>> params, buffers = tg.func.stack_module_state(models)
        >>> params["weight"].shape, params["weight"].requires_grad, buffers
        (tapegrad.Size([4, 2, 3]), True, {})
    """
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    training = {bool(m.training) for m in models}
    if len(training) > 1:
        raise RuntimeError("stack_module_state: Expected all models to have the same "
                           "training/eval mode.")
    if any(type(m) is not type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    # names come from the first model; a model without one of them fails with KeyError,
    # as PyTorch's does
    all_params = [dict(m.named_parameters()) for m in models]
    params = {name: _stacked_leaf([p[name] for p in all_params], name)
              for name in all_params[0]}
    all_buffers = [dict(m.named_buffers()) for m in models]
    buffers = {name: _stacked_leaf([b[name] for b in all_buffers], name)
               for name in all_buffers[0]}
    return params, buffers


from ._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
