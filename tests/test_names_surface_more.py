"""More of PyTorch's surface, compared with PyTorch: ``F.multi_head_attention_forward``
(and ``nn.MultiheadAttention`` running on it, with ``kdim``/``vdim``, ``add_bias_kv`` and
``add_zero_attn``), ``nn.AdaptiveLogSoftmaxWithLoss``, ``nn.DataParallel`` and
``nn.SyncBatchNorm`` on a CPU-only machine, ``Tensor.as_strided_`` and the overload error
of ``repeat_interleave``.  Values in float64, gradients, grad_fn names, error texts."""
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
from oracle import same

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-10, 1e-12


def close(ours, theirs, what=""):
    """Two results (tensors, or None) hold the same values and grad_fn name."""
    if theirs is None:
        assert ours is None, what
        return
    assert tuple(ours.shape) == tuple(theirs.shape), (what, ours.shape, theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=RTOL,
                               atol=ATOL, err_msg=what)
    names = [None if t.grad_fn is None else t.grad_fn.name().replace("torch::", "tapegrad::")
             for t in (ours, theirs)]
    assert names[0] == names[1], (what, names)


def grads_close(ours, theirs):
    """Every tensor in ``ours`` has the gradient its counterpart in ``theirs`` has."""
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if b.grad is None:
            assert a.grad is None, f"a gradient for input {i}, where PyTorch has none"
        else:
            assert a.grad is not None, f"no gradient for input {i}"
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=RTOL, atol=ATOL,
                                       err_msg=f"gradient of input {i}")


def backward_both(outputs, seed):
    """Backpropagate the same random weighting of each library's outputs (pairs of
    (ours, theirs), either may be None)."""
    gen = np.random.default_rng(seed)
    ours_total = theirs_total = 0
    for ours, theirs in outputs:
        if theirs is None or not theirs.requires_grad:
            continue
        weight = gen.standard_normal(tuple(theirs.shape))
        # a masked weight may be nan in both: leave it out of the sum
        keep = ~np.isnan(theirs.detach().numpy())
        ours_total = ours_total + (tg.where(tg.tensor(keep), ours, 0.0) * tg.tensor(weight)).sum()
        theirs_total = theirs_total + (torch.where(torch.tensor(keep), theirs, 0.0)
                                       * torch.tensor(weight)).sum()
    ours_total.backward()
    theirs_total.backward()


# =============================================================================================
# multi_head_attention_forward and MultiheadAttention
# =============================================================================================


def attention_weights(gen, embed, kdim, vdim, bias, bias_kv, separate):
    """Random weights for one attention call, as numpy arrays by argument name."""
    w = {"out_proj_weight": gen.standard_normal((embed, embed)) * 0.4,
         "out_proj_bias": gen.standard_normal(embed) * 0.3 if bias else None,
         "in_proj_bias": gen.standard_normal(3 * embed) * 0.3 if bias else None,
         "bias_k": gen.standard_normal((1, 1, embed)) if bias_kv else None,
         "bias_v": gen.standard_normal((1, 1, embed)) if bias_kv else None}
    if separate:
        w.update(in_proj_weight=None, q_proj_weight=gen.standard_normal((embed, embed)) * 0.4,
                 k_proj_weight=gen.standard_normal((embed, kdim)) * 0.4,
                 v_proj_weight=gen.standard_normal((embed, vdim)) * 0.4)
    else:
        w["in_proj_weight"] = gen.standard_normal((3 * embed, embed)) * 0.4
    return w


def to_lib(lib, value, grad=True):
    if value is None:
        return None
    if value.dtype == np.bool_:
        return lib.tensor(value)
    return lib.tensor(value, requires_grad=grad)


@st.composite
def attention_cases(draw):
    heads = draw(st.sampled_from([1, 2, 3]))
    embed = heads * draw(st.integers(1, 3))
    separate = draw(st.booleans())
    kdim = draw(st.integers(1, 4)) if separate else embed
    vdim = draw(st.integers(1, 4)) if separate else embed
    case = dict(heads=heads, embed=embed, separate=separate, kdim=kdim, vdim=vdim,
                length=draw(st.integers(1, 4)), source=draw(st.integers(1, 4)),
                batch=draw(st.sampled_from([None, 1, 2])), bias=draw(st.booleans()),
                bias_kv=draw(st.booleans()), zero_attn=draw(st.booleans()),
                need_weights=draw(st.booleans()), average=draw(st.booleans()),
                attn_mask=draw(st.sampled_from([None, "bool", "float", "bool3"])),
                padding=draw(st.sampled_from([None, "bool", "float"])),
                self_attention=draw(st.booleans()) and not separate,
                seed=draw(st.integers(0, 2 ** 16)))
    if case["self_attention"]:
        case["source"] = case["length"]
    return case


def attention_arguments(case):
    """The inputs of one case as numpy arrays (query, key, value, masks, weights)."""
    gen = np.random.default_rng(case["seed"])
    lead = lambda n: (n,) if case["batch"] is None else (n, case["batch"])  # noqa: E731
    length, source = case["length"], case["source"]
    query = gen.standard_normal(lead(length) + (case["embed"],))
    key = query if case["self_attention"] else gen.standard_normal(lead(source) + (case["kdim"],))
    value = key if case["self_attention"] else gen.standard_normal(lead(source) + (case["vdim"],))
    masks = {}
    batch_heads = (case["batch"] or 1) * case["heads"]
    if case["attn_mask"] == "bool":
        masks["attn_mask"] = gen.random((length, source)) < 0.3
    elif case["attn_mask"] == "bool3":
        masks["attn_mask"] = gen.random((batch_heads, length, source)) < 0.3
    elif case["attn_mask"] == "float":
        masks["attn_mask"] = gen.standard_normal((length, source))
    padding_shape = (source,) if case["batch"] is None else (case["batch"], source)
    if case["padding"] == "bool":
        masks["key_padding_mask"] = gen.random(padding_shape) < 0.3
    elif case["padding"] == "float":
        masks["key_padding_mask"] = gen.standard_normal(padding_shape)
    weights = attention_weights(gen, case["embed"], case["kdim"], case["vdim"], case["bias"],
                                case["bias_kv"], case["separate"])
    return query, key, value, masks, weights


def run_attention(lib, case, arrays):
    """``multi_head_attention_forward`` of one case in ``lib``: (inputs, outputs, warnings)."""
    query, key, value, masks, weights = arrays
    q = to_lib(lib, query)
    k = q if key is query else to_lib(lib, key)
    v = k if value is key else to_lib(lib, value)
    w = {name: to_lib(lib, a) for name, a in weights.items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = lib.nn.functional.multi_head_attention_forward(
            q, k, v, case["embed"], case["heads"], w["in_proj_weight"], w["in_proj_bias"],
            w["bias_k"], w["bias_v"], case["zero_attn"], 0.0, w["out_proj_weight"],
            w["out_proj_bias"], need_weights=case["need_weights"],
            average_attn_weights=case["average"], use_separate_proj_weight=case["separate"],
            q_proj_weight=w.get("q_proj_weight"), k_proj_weight=w.get("k_proj_weight"),
            v_proj_weight=w.get("v_proj_weight"),
            **{name: to_lib(lib, m, grad=False) for name, m in masks.items()})
    leaves = [t for t in [q, k, v, *w.values()] if t is not None]
    return leaves, out, [str(c.message) for c in caught]


@given(attention_cases())
def test_multi_head_attention_forward_matches_torch(case):
    arrays = attention_arguments(case)
    ours_in, ours, our_warnings = run_attention(tg, case, arrays)
    theirs_in, theirs, their_warnings = run_attention(torch, case, arrays)
    assert our_warnings == their_warnings
    close(ours[0], theirs[0], "output")
    close(ours[1], theirs[1], "weights")
    backward_both(zip(ours, theirs), case["seed"])
    grads_close(ours_in, theirs_in)


MODULE_OPTIONS = [
    {},
    {"kdim": 3, "vdim": 5},
    {"add_bias_kv": True, "add_zero_attn": True},
    {"batch_first": True, "kdim": 2, "bias": False, "add_zero_attn": True},
    {"batch_first": True, "add_bias_kv": True},
]


MODULE_CASES = [(options, False) for options in MODULE_OPTIONS] + [
    (options, True) for options in MODULE_OPTIONS if "kdim" not in options]   # one tensor


@pytest.mark.parametrize("options, self_attention", MODULE_CASES, ids=str)
def test_multihead_attention_module_matches_torch(options, self_attention):
    tg.manual_seed(5)
    torch.manual_seed(5)
    ours, theirs = tg.nn.MultiheadAttention(6, 2, **options), \
        torch.nn.MultiheadAttention(6, 2, **options)
    # PyTorch's parameters and their initial draws, in its order
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for name, value in theirs.state_dict().items():
        np.testing.assert_array_equal(ours.state_dict()[name].numpy(), value.numpy(), name)
    assert repr(ours) == repr(theirs).replace("torch", "tapegrad")
    gen = np.random.default_rng(3)
    batch_first = options.get("batch_first", False)
    query = gen.standard_normal((2, 4, 6) if batch_first else (4, 2, 6))
    key = gen.standard_normal((2, 3, options.get("kdim", 6)) if batch_first
                              else (3, 2, options.get("kdim", 6)))
    value = gen.standard_normal((2, 3, options.get("vdim", 6)) if batch_first
                                else (3, 2, options.get("vdim", 6)))
    padding = np.array([[False, False, True], [False, False, False]])

    def run(lib, module):
        q = lib.tensor(query, requires_grad=True)
        k, v = (q, q) if self_attention else (lib.tensor(key, requires_grad=True),
                                             lib.tensor(value, requires_grad=True))
        mask = lib.tensor(padding if not self_attention else np.zeros((2, 4), dtype=bool))
        out, weights = module(q, k, v, key_padding_mask=mask, average_attn_weights=False)
        return [q, k, v, *module.parameters()], (out, weights)

    ours_in, ours_out = run(tg, ours)
    theirs_in, theirs_out = run(torch, theirs)
    for a, b in zip(ours_out, theirs_out):
        close(a, b)
    backward_both(zip(ours_out, theirs_out), 8)
    grads_close(ours_in, theirs_in)


def test_multihead_attention_loads_a_torch_state_dict_with_separate_weights():
    theirs = torch.nn.MultiheadAttention(4, 2, kdim=3, vdim=5, add_bias_kv=True)
    ours = tg.nn.MultiheadAttention(4, 2, kdim=3, vdim=5, add_bias_kv=True)
    ours.load_state_dict({k: tg.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    gen = np.random.default_rng(4)
    q, k, v = gen.standard_normal((2, 4)), gen.standard_normal((3, 3)), \
        gen.standard_normal((3, 5))
    out, weights = ours(tg.tensor(q), tg.tensor(k), tg.tensor(v))
    tout, tweights = theirs(torch.tensor(q), torch.tensor(k), torch.tensor(v))
    close(out, tout)
    close(weights, tweights)


def _mha(lib, query=(3, 2, 4), key=(5, 2, 4), value=(5, 2, 4), heads=2, embed=4, **kwargs):
    """One ``multi_head_attention_forward`` call of ones with the given shapes."""
    defaults = dict(in_proj_weight=lib.ones(3 * embed, embed), in_proj_bias=None,
                    bias_k=None, bias_v=None, add_zero_attn=False, dropout_p=0.0,
                    out_proj_weight=lib.ones(embed, embed), out_proj_bias=None)
    defaults.update(kwargs)
    return lib.nn.functional.multi_head_attention_forward(
        lib.ones(query), lib.ones(key), lib.ones(value), embed, heads, **defaults)


BAD_ATTENTION = {
    "4-D query": lambda m: _mha(m, query=(1, 3, 2, 4)),
    "2-D key for 3-D query": lambda m: _mha(m, key=(5, 4)),
    "3-D key padding for 3-D query": lambda m: _mha(m, key_padding_mask=m.ones(1, 2, 5) > 0),
    "4-D attn_mask": lambda m: _mha(m, attn_mask=m.ones(1, 1, 3, 5)),
    "3-D key for 2-D query": lambda m: _mha(m, query=(3, 4), value=(5, 4)),
    "2-D key padding for 2-D query": lambda m: _mha(m, query=(3, 4), key=(5, 4), value=(5, 4),
                                                    key_padding_mask=m.ones(1, 5) > 0),
    "wrong 3-D mask for 2-D query": lambda m: _mha(m, query=(3, 4), key=(5, 4), value=(5, 4),
                                                   attn_mask=m.ones(4, 3, 5)),
    "wrong embed": lambda m: _mha(m, embed=4, query=(3, 2, 6), key=(5, 2, 6), value=(5, 2, 6),
                                  in_proj_weight=m.ones(12, 6)),
    "indivisible heads": lambda m: _mha(m, heads=3),
    "key and value shapes": lambda m: _mha(m, value=(4, 2, 4)),
    "separate: key and value lengths": lambda m: _mha(
        m, value=(4, 2, 4), use_separate_proj_weight=True, q_proj_weight=m.ones(4, 4),
        k_proj_weight=m.ones(4, 4), v_proj_weight=m.ones(4, 4)),
    "separate: no k weight": lambda m: _mha(
        m, use_separate_proj_weight=True, q_proj_weight=m.ones(4, 4), v_proj_weight=m.ones(4, 4)),
    "separate: wrong v weight": lambda m: _mha(
        m, use_separate_proj_weight=True, q_proj_weight=m.ones(4, 4),
        k_proj_weight=m.ones(4, 4), v_proj_weight=m.ones(4, 3)),
    "separate: wrong bias": lambda m: _mha(
        m, use_separate_proj_weight=True, q_proj_weight=m.ones(4, 4),
        k_proj_weight=m.ones(4, 4), v_proj_weight=m.ones(4, 4), in_proj_bias=m.ones(9)),
    "no in_proj_weight": lambda m: _mha(m, in_proj_weight=None),
    "integer mask": lambda m: _mha(m, attn_mask=m.ones(3, 5, dtype=m.int64)),
    "integer padding": lambda m: _mha(m, key_padding_mask=m.ones(2, 5, dtype=m.int64)),
    "wrong 2-D mask": lambda m: _mha(m, attn_mask=m.ones(3, 4)),
    "wrong 3-D mask": lambda m: _mha(m, attn_mask=m.ones(2, 3, 5)),
    "wrong padding batch": lambda m: _mha(m, key_padding_mask=m.ones(3, 5) > 0),
    "wrong padding length": lambda m: _mha(m, key_padding_mask=m.ones(2, 4) > 0),
    "causal without mask": lambda m: _mha(m, is_causal=True),
    "bias_k alone": lambda m: _mha(m, bias_k=m.ones(1, 1, 4)),
    "bias_v alone": lambda m: _mha(m, bias_v=m.ones(1, 1, 4)),
    "bias with static key": lambda m: _mha(m, bias_k=m.ones(1, 1, 4), bias_v=m.ones(1, 1, 4),
                                           static_k=m.ones(4, 5, 2)),
    "static_k batch": lambda m: _mha(m, static_k=m.ones(3, 5, 2)),
    "static_v head size": lambda m: _mha(m, static_v=m.ones(4, 5, 3)),
}


@pytest.mark.parametrize("name", BAD_ATTENTION)
def test_multi_head_attention_forward_errors_match_torch(name):
    outcome = same(BAD_ATTENTION[name], torch)
    assert outcome[0] == "error"


def test_multi_head_attention_forward_static_keys_and_causal_match_torch():
    gen = np.random.default_rng(12)
    static_k, static_v = gen.standard_normal((4, 6, 2)), gen.standard_normal((4, 6, 2))
    mask = ~np.tril(np.ones((3, 5), dtype=bool))
    for need_weights in (True, False):
        def call(m):
            return _mha(m, static_k=m.tensor(static_k), static_v=m.tensor(static_v),
                        attn_mask=m.tensor(np.pad(mask, ((0, 0), (0, 1)))),
                        need_weights=need_weights)
        same(call, torch)
        same(lambda m: _mha(m, query=(3, 2, 4), key=(3, 2, 4), value=(3, 2, 4),
                            attn_mask=m.tensor(~np.tril(np.ones((3, 3), dtype=bool))),
                            is_causal=True, need_weights=need_weights), torch)


def test_multi_head_attention_forward_dropout_draws_as_torch():
    def call(m):
        m.manual_seed(9)
        gen = np.random.default_rng(2)
        x = m.tensor(gen.standard_normal((3, 2, 4)))
        return _mha(m, x.shape, dropout_p=0.4, in_proj_weight=m.tensor(
            gen.standard_normal((12, 4))))
    same(call, torch)
    same(lambda m: _mha(m, dropout_p=0.4, training=False), torch)


# =============================================================================================
# AdaptiveLogSoftmaxWithLoss
# =============================================================================================


def build_both(name, *args, **kwargs):
    """The module ``name`` built by both libraries, with the warnings each gave (a zero-size
    cluster warns) compared."""
    built, said = [], []
    for lib in (tg, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            built.append(getattr(lib.nn, name)(*args, **kwargs))
        said.append([str(w.message) for w in caught])
    assert said[0] == said[1]
    return built


def torch_state_into(ours, theirs):
    """Load PyTorch's module's state into ours (PyTorch's keys and shapes must fit)."""
    ours.load_state_dict({k: tg.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})


@st.composite
def adaptive_cases(draw):
    n_classes = draw(st.integers(3, 12))
    cutoffs = sorted(draw(st.sets(st.integers(1, n_classes - 1), min_size=1, max_size=3)))
    batch = draw(st.sampled_from([None, 1, 2, 5]))
    count = 1 if batch is None else batch
    targets = draw(st.lists(st.integers(0, n_classes - 1), min_size=count, max_size=count))
    return dict(in_features=draw(st.integers(1, 6)), n_classes=n_classes, cutoffs=cutoffs,
                div_value=draw(st.sampled_from([1.0, 2.0, 4.0])), head_bias=draw(st.booleans()),
                batch=batch, targets=targets, seed=draw(st.integers(0, 2 ** 16)))


@given(adaptive_cases())
def test_adaptive_log_softmax_matches_torch(case):
    options = {k: case[k] for k in ("in_features", "n_classes", "cutoffs", "div_value",
                                    "head_bias")}
    ours, theirs = build_both("AdaptiveLogSoftmaxWithLoss", **options)
    assert repr(ours) == repr(theirs)
    torch_state_into(ours, theirs)
    gen = np.random.default_rng(case["seed"])
    shape = (case["in_features"],) if case["batch"] is None else \
        (case["batch"], case["in_features"])
    x = gen.standard_normal(shape)
    target = np.array(case["targets"][0] if case["batch"] is None else case["targets"])

    def run(lib, module):
        inp = lib.tensor(x, requires_grad=True)
        result = module(inp, lib.tensor(target))
        return inp, result

    ours_in, ours_out = run(tg, ours)
    theirs_in, theirs_out = run(torch, theirs)
    assert type(ours_out).__name__ == "_ASMoutput" and ours_out._fields == ("output", "loss")
    close(ours_out.output, theirs_out.output, "output")
    close(ours_out.loss, theirs_out.loss, "loss")
    backward_both(zip(ours_out, theirs_out), case["seed"])
    grads_close([ours_in, *ours.parameters()], [theirs_in, *theirs.parameters()])
    if case["batch"] is not None:
        rows = np.concatenate([x, gen.standard_normal((4, case["in_features"])) * 3])
        close(ours.log_prob(tg.tensor(rows)), theirs.log_prob(torch.tensor(rows)), "log_prob")
        np.testing.assert_array_equal(ours.predict(tg.tensor(rows)).numpy(),
                                      theirs.predict(torch.tensor(rows)).numpy())


def test_adaptive_log_softmax_predict_takes_each_branch_as_torch():
    # head scores forced so that no row, every row, or some rows pick a cluster
    ours, theirs = build_both("AdaptiveLogSoftmaxWithLoss", 2, 6, [2], div_value=1.0,
                              head_bias=True)
    for bias in ([5.0, 0.0, -5.0], [-5.0, -5.0, 5.0], [0.0, 0.0, 0.0]):
        with torch.no_grad():
            theirs.head.bias.copy_(torch.tensor(bias))
            theirs.head.weight.copy_(torch.tensor([[0.0, 0.0], [0.0, 0.0], [3.0, 0.0]]))
        torch_state_into(ours, theirs)
        rows = np.array([[1.0, 0.5], [-1.0, 2.0], [2.0, -1.0]])
        mine, theirs_predicted = ours.predict(tg.tensor(rows)), theirs.predict(torch.tensor(rows))
        assert mine.dtype == tg.int64
        np.testing.assert_array_equal(mine.numpy(), theirs_predicted.numpy())


BAD_ADAPTIVE = {
    "no cutoffs": lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(4, 10, []),
    "unsorted cutoffs": lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [5, 2]),
    "cutoff of n_classes": lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [10]),
    "zero cutoff": lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [0, 3]),
    "repeated cutoff": lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3, 3]),
    "fractional cutoff": lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [2.5]),
    "batch sizes": lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3])(
        m.ones(3, 4), m.tensor([1, 2])),
    "1-D target, 3-D input": lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3])(
        m.ones(2, 1, 4), m.tensor([1, 2])),
    "0-D target, 2-D input": lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3])(
        m.ones(2, 4), m.tensor(1)),
    "2-D target": lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3])(
        m.ones(2, 4), m.tensor([[1, 2]])),
    "target out of range": lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3])(
        m.ones(2, 4), m.tensor([-1, 12])),
}


@pytest.mark.parametrize("name", BAD_ADAPTIVE)
def test_adaptive_log_softmax_errors_match_torch(name):
    assert same(BAD_ADAPTIVE[name], torch)[0] == "error"


def test_adaptive_log_softmax_draws_as_torch():
    tg.manual_seed(21)
    torch.manual_seed(21)
    ours = tg.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [4, 9], div_value=2.0, head_bias=True)
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [4, 9], div_value=2.0, head_bias=True)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for name, value in theirs.state_dict().items():
        np.testing.assert_array_equal(ours.state_dict()[name].numpy(), value.numpy(), name)
    ours.reset_parameters()
    theirs.reset_parameters()
    for name, value in theirs.state_dict().items():
        np.testing.assert_array_equal(ours.state_dict()[name].numpy(), value.numpy(), name)


# =============================================================================================
# DataParallel and SyncBatchNorm on a machine without accelerators
# =============================================================================================


def test_data_parallel_calls_the_module_as_torch_does_without_gpus():
    tg.manual_seed(2)
    torch.manual_seed(2)
    ours = tg.nn.DataParallel(tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.Tanh()),
                              device_ids=[0, 1], output_device=1, dim=1)
    theirs = torch.nn.DataParallel(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh()),
                                   device_ids=[0, 1], output_device=1, dim=1)
    assert repr(ours) == repr(theirs)
    assert ours.device_ids == theirs.device_ids == []
    assert hasattr(ours, "dim") == hasattr(theirs, "dim")
    assert hasattr(ours, "output_device") == hasattr(theirs, "output_device")
    assert isinstance(ours.module, tg.nn.Sequential)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    # a PyTorch checkpoint of the wrapped model loads into the wrapped model
    ours.load_state_dict({k: tg.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(6).standard_normal((5, 3))
    a, b = tg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, tout = ours(a), theirs(b)
    close(out, tout)
    backward_both([(out, tout)], 1)
    grads_close([a, *ours.parameters()], [b, *theirs.parameters()])
    # and its keyword arguments reach the module
    ours_attention = tg.nn.DataParallel(tg.nn.MultiheadAttention(4, 2))
    q = tg.ones(2, 1, 4)
    assert ours_attention(q, q, q, need_weights=False)[1] is None


def test_data_parallel_function_raises_as_torch_without_gpus():
    same(lambda m: m.nn.parallel.data_parallel(m.nn.Linear(2, 1), m.ones(1, 2)), torch)


SYNC_SHAPES = [(4, 3), (2, 3, 5), (2, 3, 2, 2), (3, 3, 1, 2, 2)]


@pytest.mark.parametrize("shape", SYNC_SHAPES, ids=str)
@pytest.mark.parametrize("options", [{}, {"momentum": None}, {"affine": False},
                                     {"track_running_stats": False}, {"bias": False}], ids=str)
def test_sync_batch_norm_is_batch_norm_without_a_process_group(shape, options):
    ours, theirs = build_both("SyncBatchNorm", 3, **options)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    gen = np.random.default_rng(len(shape))
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.tensor(gen.standard_normal(tuple(p.shape))))
    torch_state_into(ours, theirs)
    for training in (True, True, False):
        ours.train(training)
        theirs.train(training)
        x = gen.standard_normal(shape) * 2 + 1
        a, b = tg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out, tout = ours(a), theirs(b)
        close(out, tout, f"training={training}")
        backward_both([(out, tout)], 3)
        grads_close([a, *ours.parameters()], [b, *theirs.parameters()])
        for name, value in theirs.state_dict().items():
            np.testing.assert_allclose(ours.state_dict()[name].numpy(), value.numpy(),
                                       rtol=RTOL, atol=ATOL, err_msg=name)


BAD_SYNC = {
    "1-D input": lambda m: m.nn.SyncBatchNorm(3)(m.ones(3)),
    "0-d input": lambda m: m.nn.SyncBatchNorm(3)(m.ones(())),
    "no channels": lambda m: m.nn.SyncBatchNorm(0)(m.ones(2, 0, 4)),
    "wrong channels": lambda m: m.nn.SyncBatchNorm(3)(m.ones(2, 4)),
    "eval, wrong channels": lambda m: m.nn.SyncBatchNorm(3).eval()(m.ones(2, 4, 2)),
    "one value per channel": lambda m: m.nn.SyncBatchNorm(3)(m.ones(1, 3)),
}


@pytest.mark.parametrize("name", BAD_SYNC)
def test_sync_batch_norm_errors_match_torch(name):
    assert same(BAD_SYNC[name], torch)[0] == "error"


def test_convert_sync_batchnorm_matches_torch():
    def build(lib):
        nn = lib.nn
        model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3, momentum=None),
                              nn.InstanceNorm1d(3, affine=True),
                              nn.Sequential(nn.BatchNorm2d(2, affine=False)),
                              nn.ModuleList([nn.BatchNorm3d(4, eps=1e-3,
                                                            track_running_stats=False)]))
        model[1].eval()
        return model

    ours, theirs = build(tg), build(torch)
    ours_bn, ours_inner = ours[1], ours[3][0]
    converted, tconverted = tg.nn.SyncBatchNorm.convert_sync_batchnorm(ours, "group"), \
        torch.nn.SyncBatchNorm.convert_sync_batchnorm(theirs, "group")
    assert converted is ours                # the model itself, its layers replaced
    assert repr(converted) == repr(tconverted)
    assert list(converted.state_dict()) == list(tconverted.state_dict())
    # the same tensors (shared, not copied), mode and process group
    assert converted[1].weight is ours_bn.weight and converted[1].bias is ours_bn.bias
    assert converted[1].running_mean is ours_bn.running_mean
    assert converted[1].num_batches_tracked is ours_bn.num_batches_tracked
    assert [m.training for m in converted.modules()] == [m.training for m in tconverted.modules()]
    assert converted[1].process_group == tconverted[1].process_group == "group"
    assert type(converted[2]).__name__ == type(tconverted[2]).__name__ == "InstanceNorm1d"
    assert converted[3][0] is not ours_inner
    # a batch norm on its own comes back as a new layer
    lone = tg.nn.BatchNorm2d(2)
    assert isinstance(tg.nn.SyncBatchNorm.convert_sync_batchnorm(lone), tg.nn.SyncBatchNorm)


# =============================================================================================
# repeat_interleave's wrong calls: PyTorch's parser's TypeError
# =============================================================================================

# values of each kind a call may get, made per library (a tensor is made when called)
VALUES = {"int": lambda m: 2, "float": lambda m: 1.5, "bool": lambda m: True,
          "zero": lambda m: 0, "none": lambda m: None, "str": lambda m: "a",
          "list": lambda m: [1, 2], "tuple": lambda m: (2,),
          "counts": lambda m: m.tensor([1, 0, 2]), "float tensor": lambda m: m.tensor(2.0),
          "numpy int": lambda m: np.int64(2)}


@given(st.booleans(), st.lists(st.sampled_from(sorted(VALUES)), max_size=3),
       st.lists(st.sampled_from(["repeats", "dim", "output_size", "input", "foo"]),
                max_size=3, unique=True),
       st.lists(st.sampled_from(sorted(VALUES)), min_size=3, max_size=3))
def test_repeat_interleave_calls_bind_as_torch(method, positional, names, named):
    def call(m):
        x = m.arange(3.0)
        args = [VALUES[k](m) for k in positional]
        kwargs = {name: VALUES[k](m) for name, k in zip(names, named)}
        if method:
            return x.repeat_interleave(*args, **kwargs)
        return m.repeat_interleave(x, *args, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # (PyTorch warns of a float tensor's counts)
        same(call, torch)


REPEAT_CALLS = {
    "float count": lambda m: m.repeat_interleave(m.arange(3.0), 1.5),
    "bool count": lambda m: m.repeat_interleave(m.arange(3.0), True),
    "method, float count": lambda m: m.arange(3.0).repeat_interleave(2.0),
    "method, bool count": lambda m: m.arange(3.0).repeat_interleave(False, 0),
    "float count and dim": lambda m: m.repeat_interleave(m.arange(3.0), 1.5, 0),
    "float count, dim by name": lambda m: m.repeat_interleave(m.arange(3.0), 1.5, dim=0),
    "float dim": lambda m: m.repeat_interleave(m.arange(3.0), m.tensor([1, 1, 1]), 0.5),
    "counts alone, float": lambda m: m.repeat_interleave(1.5),
    "all by name": lambda m: m.repeat_interleave(input=m.arange(3.0), repeats=1.5),
    "method, float output_size": lambda m: m.arange(3.0).repeat_interleave(
        repeats=2, dim=0, output_size=6.0),
    "list input": lambda m: m.repeat_interleave([1.0], 2),
}


@pytest.mark.parametrize("name", REPEAT_CALLS)
def test_repeat_interleave_wrong_calls_raise_torchs_type_error(name):
    outcome = same(REPEAT_CALLS[name], torch)
    assert outcome[:2] == ("error", "TypeError")


def test_repeat_interleave_right_calls_still_work():
    x = np.arange(6.0).reshape(2, 3)
    for fn in (lambda m, t: m.repeat_interleave(t, 2), lambda m, t: t.repeat_interleave(3, 1),
               lambda m, t: m.repeat_interleave(t, repeats=m.tensor([1, 2]), dim=0),
               lambda m, t: t.repeat_interleave(np.int64(2), dim=-1, output_size=12),
               lambda m, t: m.repeat_interleave(m.tensor([2, 0, 1]))):
        same(lambda m: fn(m, m.tensor(x, requires_grad=True)), torch)


def test_map_order_is_the_order_pytorch_lists_keywords_in():
    from tapegrad._factory_args import _map_order
    for keys in (["dim", "output_size", "repeats"], ["input", "repeats", "output_size", "dim"],
                 ["dim", "output_size", "repeats", "input", "out", "foo", "bar", "a", "bb",
                  "dtype"]):
        try:
            torch.repeat_interleave(**dict.fromkeys(keys, 1))
        except TypeError as e:
            listed = str(e).split("got (")[1].split(")")[0]
        assert _map_order(keys) == [p.split("=")[0] for p in listed.split(", ") if p]


# =============================================================================================
# Tensor.as_strided_
# =============================================================================================


@st.composite
def strided_layouts_of_a_view(draw):
    """A view ``arange(n)[start:]`` and a layout inside its elements without repeats."""
    n = draw(st.integers(2, 12))
    start = draw(st.integers(0, n - 1))
    rank = draw(st.integers(1, 2))
    size = [draw(st.integers(1, 3)) for _ in range(rank)]
    stride = [draw(st.integers(1, 4)) for _ in range(rank)]
    offset = draw(st.one_of(st.none(), st.integers(start, n - 1)))
    return n, start, size, stride, offset


def _positions(size, stride, offset):
    grid = np.full(size, offset)
    for d, (k, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = k
        grid = grid + np.arange(k).reshape(shape) * s
    return grid.reshape(-1)


@given(strided_layouts_of_a_view())
def test_as_strided_in_place_on_a_view_matches_torch(layout):
    n, start, size, stride, offset = layout
    at = _positions(size, stride, start if offset is None else offset)
    # the layouts tapegrad holds: distinct elements of the view (else it refuses, below)
    fits = at.max() < n and np.unique(at).size == at.size
    gen = np.random.default_rng(n)
    weights = gen.standard_normal(size)

    def run(m):
        a = m.tensor(np.arange(n, dtype=np.float64) + 1.0, requires_grad=True)
        b = a * 3.0
        view = b[start:]
        extra = () if offset is None else (offset,)
        out = view.as_strided_(size, stride, *extra)
        assert out is view
        (view * m.tensor(weights)).sum().backward()
        # (the stride of a dimension of size 1 is not kept by tapegrad, which reads strides
        # off the elements' positions)
        strides = tuple(s for s, k in zip(view.stride(), size) if k > 1)
        return view, strides, view.storage_offset(), a.grad, b._version

    if fits:
        same(run, torch)
    else:
        with pytest.raises(RuntimeError):
            run(tg)


@pytest.mark.parametrize("size, stride", [((2, 3), (1, 2)), ((3, 2), (2, 1)), ((6,), (1,)),
                                          ((1, 6), (6, 1))], ids=str)
def test_as_strided_in_place_permuting_a_tensor_matches_torch(size, stride):
    def run(m, grad):
        a = m.arange(6.0, requires_grad=grad)
        x = a * 2.0 if grad else a
        y = x.as_strided_(size, stride)
        return y is x, x, x._version, x.shape
    same(lambda m: run(m, False), torch)
    same(lambda m: run(m, True), torch)


BAD_AS_STRIDED_ = {
    "leaf": lambda m: m.arange(6.0, requires_grad=True).as_strided_((2,), (1,)),
    "leaf, bad layout": lambda m: m.arange(6.0, requires_grad=True).as_strided_((7,), (1,)),
    "view of a leaf": lambda m: m.arange(6.0, requires_grad=True)[1:].as_strided_((2,), (1,)),
    "float size": lambda m: m.arange(6.0).as_strided_([1.5], [1]),
    "int size": lambda m: m.arange(6.0).as_strided_(2, (1,)),
    "float offset": lambda m: m.arange(6.0).as_strided_((2,), (1,), 1.5),
    "lengths": lambda m: m.arange(6.0).as_strided_((2,), (1, 2)),
    "negative stride": lambda m: m.arange(6.0).as_strided_((2,), (-1,)),
    "out of bounds": lambda m: m.arange(6.0).as_strided_((7,), (1,)),
    "negative offset": lambda m: m.arange(6.0).as_strided_((2,), (1,), -1),
}


@pytest.mark.parametrize("name", BAD_AS_STRIDED_)
def test_as_strided_in_place_errors_match_torch(name):
    assert same(BAD_AS_STRIDED_[name], torch)[0] == "error"


def test_as_strided_in_place_refuses_what_tapegrad_cannot_hold():
    # PyTorch takes these; tapegrad says so rather than give other values later
    for call in (lambda: tg.arange(6.0).as_strided_((3,), (0,)),
                 lambda: tg.arange(6.0).as_strided_((2,), (2,)),
                 lambda: tg.arange(6.0)[2:].as_strided_((2,), (1,), 0)):
        with pytest.raises(RuntimeError, match="as_strided_: tapegrad"):
            call()
