"""The fast path of a compiled call with positional float64 tensors (``replay.Variant.
replay_args`` with its generated ``_fastcall`` functions) and of ``backward()`` after it.

It must behave exactly as the general path does: same values and gradients as eager mode,
same statistics, and every case it does not handle (other dtypes, shapes, flags, keywords,
a tensor passed twice, hooks, existing gradients, in-place changes) handed on untouched.
"""
from types import SimpleNamespace

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.tape import NO_EXT
from tapegrad import _fastcall, replay


def program(v, w, data, s):
    """A vector read element by element, a number, data that requires no grad, and a scale:
    scalar records only, so that codegen=True generates code for it."""
    u = w
    for j in range(6):
        u = u * v[j] + w * data[j % 3]
    return u * s


def _args(seed, rg_data=False):
    rng = np.random.default_rng(seed)
    return [tg.tensor(rng.uniform(-1, 1, 6), requires_grad=True),
            tg.tensor(rng.uniform(0.5, 1.0), requires_grad=True),
            tg.tensor(rng.uniform(-1, 1, 3), requires_grad=rg_data),
            tg.tensor(rng.uniform(0.5, 2.0), requires_grad=True)]


def _eager(seed, **kw):
    args = _args(seed, **kw)
    out = program(*args)
    out.backward()
    return out.item(), [None if a.grad is None else a.grad.numpy() for a in args]


def _check(got_out, got_args, want):
    np.testing.assert_allclose(got_out.item(), want[0], rtol=1e-12)
    for a, g in zip(got_args, want[1]):
        if g is None:
            assert a.grad is None
        else:
            assert a.grad.shape == a.shape
            np.testing.assert_allclose(a.grad.numpy(), g, rtol=1e-12)


@pytest.fixture
def paths(monkeypatch):
    """Which way each replay went: "fast" (replay_args) or "general" (replay)."""
    taken = []
    make, general = _fastcall.replayer, replay.Variant.replay

    def fast_spy(*a):
        fast = make(*a)

        def spying(args):
            res = fast(args)
            if res is not None:
                taken.append("fast")
            return res

        return spying

    def general_spy(self, *a, **k):
        taken.append("general")
        return general(self, *a, **k)

    monkeypatch.setattr(_fastcall, "replayer", fast_spy)
    monkeypatch.setattr(replay.Variant, "replay", general_spy)
    return taken


@pytest.fixture
def handed_out(monkeypatch):
    """How many backward() calls handed gradients out through generated code."""
    counted = []
    make = _fastcall.backward_for

    def spy(*a):
        backward = make(*a)

        def counting(*b):
            done = backward(*b)
            counted.extend([1] if done else [])
            return done

        return counting

    monkeypatch.setattr(_fastcall, "backward_for", spy)
    return counted


@pytest.mark.parametrize("codegen", [True, False])
def test_positional_tensors_replay_on_the_fast_path(codegen, paths, handed_out):
    fn = tg.compile(program, codegen=codegen)
    for seed in range(5):
        args = _args(seed)
        out = fn(*args)
        out.backward()
        _check(out, args, _eager(seed))
    assert (fn.stats.calls, fn.stats.records, fn.stats.replays) == (5, 1, 4)
    assert paths == ["fast"] * 4
    # generated on the first replay; the recording call's backward is eager mode's
    assert fn.stats.generated == int(codegen)
    assert len(handed_out) == (4 if codegen else 0)


@pytest.mark.parametrize("change", ["integer", "shape", "requires_grad", "keyword", "number",
                                    "parameter"])
def test_calls_the_fast_path_cannot_take_go_the_general_way(change, paths):
    fn = tg.compile(program, codegen=True)
    for seed in range(3):
        args = _args(seed)
        fn(*args).backward()
    args = _args(7)
    if change == "integer":
        args[2] = tg.tensor([1, -2, 3])
    elif change == "shape":
        args[2] = tg.tensor([0.3, -0.2, 0.9, 0.4])
    elif change == "requires_grad":
        args[2].requires_grad_(True)
    elif change == "parameter":
        args[1] = tg.nn.Parameter(args[1])
    before = len(paths)
    if change == "keyword":
        out = fn(*args[:3], s=args[3])
    elif change == "number":
        out = fn(*args[:3], 1.25)
    else:
        out = fn(*args)
    out.backward()
    assert "fast" not in paths[before:]     # recorded anew, or replayed the general way
    eager_args = [tg.tensor(a.detach().numpy(), dtype=a.dtype, requires_grad=a.requires_grad)
                  for a in args]
    if change == "number":
        eager_args[3] = 1.25
    eager = program(*eager_args)
    eager.backward()
    np.testing.assert_allclose(out.item(), eager.item(), rtol=1e-12)
    for a, e in zip(args, eager_args):
        if isinstance(e, tg.Tensor) and e.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), e.grad.numpy(), rtol=1e-12)
    # and the next ordinary call is on the fast path again
    args = _args(8)
    before = len(paths)
    out = fn(*args)
    out.backward()
    _check(out, args, _eager(8))
    assert paths[before:] == ["fast"]


def test_a_fast_replays_leaves_are_there_when_asked_for():
    fn = tg.compile(program, codegen=True)
    for seed in range(3):
        fn(*_args(seed)).backward()
    args, eager_args = _args(4), _args(4)
    out = fn(*args)
    # grad_fn walks to the caller's tensors (that builds the tape's leaves on demand), and
    # to the same ones as in eager mode: not to the data, which requires no grad
    assert _leaves_reached(out, args) == _leaves_reached(program(*eager_args), eager_args)
    assert _leaves_reached(out, args) == [0, 1, 3]
    out.backward()      # the general sweep now (the leaves were built), same gradients
    _check(out, args, _eager(4))


def _leaves_reached(out, args):
    """Which of args grad_fn.next_functions reaches, as positions."""
    seen = []
    stack = [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        if type(node).__name__ == "AccumulateGrad":
            seen.append(node.variable)
        else:
            stack.extend(f for f, _ in node.next_functions)
    return sorted({i for i, a in enumerate(args) for v in seen if v is a})


def test_a_tensor_passed_twice_gets_both_gradients(handed_out):
    fn = tg.compile(program, codegen=True)
    for seed in range(3):
        fn(*_args(seed)).backward()
    v, w, data, _ = _args(5)
    out = fn(v, w, data, w)
    out.backward()
    ve, we, de, _ = _args(5)
    eager = program(ve, we, de, we)
    eager.backward()
    np.testing.assert_allclose(out.item(), eager.item(), rtol=1e-12)
    np.testing.assert_allclose(v.grad.numpy(), ve.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), we.grad.numpy(), rtol=1e-12)
    assert len(handed_out) == 2    # the two calls before: not this one


@pytest.mark.parametrize("what", ["changed data in place", "changed a leaf in place",
                                  "no longer requires grad", "existing grad", "hook"])
def test_backward_after_a_fast_replay_hands_on_what_it_does_not_handle(what):
    fn = tg.compile(program, codegen=True)
    for seed in range(3):
        fn(*_args(seed)).backward()
    got_args, want_args = _args(6), _args(6)
    results = []
    for args, run in ((got_args, fn), (want_args, program)):
        out = run(*args)
        if what == "changed data in place":
            args[2].add_(1.0)
        elif what == "changed a leaf in place":
            with tg.no_grad():
                args[1].mul_(2.0)
        elif what == "no longer requires grad":
            args[3].requires_grad_(False)
        elif what == "existing grad":
            args[0].grad = tg.ones(6)
        elif what == "hook":
            args[1].register_hook(lambda g: g * 3.0)
        try:
            out.backward()
            results.append(("ok", [None if a.grad is None else a.grad.numpy()
                                   for a in args]))
        except RuntimeError as e:
            results.append(("error", str(e)))
    got, want = results
    assert got[0] == want[0]
    if got[0] == "error":
        assert got[1] == want[1]
    else:
        for g, w in zip(got[1], want[1]):
            assert (g is None) == (w is None)
            if g is not None:
                np.testing.assert_allclose(g, w, rtol=1e-12)


def _replayed_tape(args, vals, **changed):
    """What the generated backward reads of a fast replay's tape (replay._Instance)."""
    tape = SimpleNamespace(hooks={}, custom={}, inplace=[], freed=None, consts=[],
                           args=args, arg_versions=(0,) * len(args or ()), arena=vals, ext=NO_EXT,
                           finished=False)
    for name, value in changed.items():
        setattr(tape, name, value)
    return tape


def test_generated_backward_for_many_arguments_finds_a_repeated_one():
    # more arguments than the pairwise `is` checks cover: a set of ids instead
    def sweep(vals, ext, grads, scale):
        grads[10:19] = vals[:9] * scale

    freed = np.ones(3, dtype=bool)
    program = SimpleNamespace(leaf_slots=tuple((r, 10 + r, 1) for r in range(9)),
                              backward=sweep, backward_params=(2.0,), seed=40, seed_offset=0,
                              total=20, freed=freed)
    spec = tuple(((), True, i, -1, False) for i in range(9))
    finished = []
    backward = _fastcall.backward_for(spec, tuple(range(9)), program, lambda n: arena[:n],
                                      SimpleNamespace(maybe_any=lambda: False),
                                      finished.append)
    arena = np.full(30, np.nan)
    vals = np.arange(9.0)
    args = [tg.tensor(float(i), requires_grad=True) for i in range(9)]
    out = SimpleNamespace(_r=40)
    # None: a case for program_backward's own way (a repeated argument, a replay the
    # general way), nothing written
    assert backward(out, _replayed_tape(args[:8] + [args[0]], vals), None) is None
    assert backward(out, _replayed_tape(None, vals), None) is None
    assert np.isnan(arena).all()      # refused before anything was written
    assert all(a.grad is None for a in args)
    tape = _replayed_tape(args, vals)
    assert backward(out, tape, None) is True
    assert arena[0] == 1.0            # the seed
    assert [a.grad.item() for a in args] == [2.0 * i for i in range(9)]
    assert tape.freed is freed and tape.finished
    assert finished == []             # (not the tape recorded on: nothing more to do)
    # gradients of numbers are views of one array: each still changes on its own
    args[1].grad.add_(1.0)
    assert [a.grad.item() for a in args[:3]] == [0.0, 3.0, 4.0]
    assert backward(out, _replayed_tape(args, vals), None) is None   # they have a .grad now


@pytest.mark.parametrize("case", ["other output", "hooks", "custom", "inplace", "freed",
                                  "constant changed"])
def test_generated_backward_leaves_what_run_backward_does_untouched(case):
    """False where autograd.program_backward's checks send backward() the general way."""
    def sweep(vals, ext, grads, scale):
        grads[1] = vals[0] * scale

    program = SimpleNamespace(leaf_slots=((0, 1, 1),), backward=sweep, backward_params=(2.0,),
                              seed=5, seed_offset=0, total=2, freed=None)
    arena = np.full(4, np.nan)
    backward = _fastcall.backward_for((((), True, 0, -1, False),), (0,), program,
                                      lambda n: arena[:n],
                                      SimpleNamespace(maybe_any=lambda: False), None)
    a = tg.tensor(3.0, requires_grad=True)
    constant = tg.tensor(1.0)
    changed = {"hooks": {"hooks": {0: [print]}}, "custom": {"custom": {0: None}},
               "inplace": {"inplace": [(0, 0, "add_", "", ())]},
               "freed": {"freed": np.ones(1, dtype=bool)},
               "constant changed": {"consts": [(1, 7, 0, ()), (2, constant, 0, ())]}}
    if case == "constant changed":
        constant.add_(1.0)
    out = SimpleNamespace(_r=4 if case == "other output" else 5)
    tape = _replayed_tape([a], np.array([3.0]), **changed.get(case, {}))
    assert backward(out, tape, None) is False
    assert np.isnan(arena).all() and a.grad is None
    # the same tape with nothing changed is the fast path's
    assert backward(SimpleNamespace(_r=5), _replayed_tape([a], np.array([3.0])), True) is True
    assert a.grad.item() == 6.0


def test_generated_replay_refuses_without_copying_on_a_mismatch():
    constant = tg.tensor(7.0)
    instance = SimpleNamespace(arena=np.zeros(4))
    runs = []

    def run(inst, args, kwargs):
        runs.append((inst.arena.tolist(), inst.arg_versions, inst.arg_records))
        return "replayed"

    python_state = SimpleNamespace(count=1, check=lambda: changed[0])
    changed = [None]
    variant = SimpleNamespace(arg_spec=(((), True, 0, -1, False), ((2,), False, 1, 3, False)),
                              arg_spec_records=(0, 1), constants=[(constant, 0)],
                              program=None, single_out=None, state=python_state)
    replay_args = _fastcall.replayer(variant, lambda: instance, run, None)
    good = (tg.tensor(1.5, requires_grad=True), tg.tensor([2.0, 3.0]))
    assert replay_args(good) == "replayed"
    assert runs == [([1.5, 2.0, 3.0, 0.0], (0, 0), (0, 1))]
    instance.arena[:] = 0.0
    for bad in [good[:1], good + good[:1], (good[0], [2.0, 3.0]),
                (good[0], tg.tensor([2.0, 3.0], requires_grad=True)),
                (good[0], tg.tensor([2.0, 3.0, 4.0])),
                (good[0], tg.tensor([2, 3])),
                (tg.tensor(1.5), good[1])]:
        assert replay_args(bad) is None
    changed[0] = 3         # Python state the function read changed (pystate.py)
    assert replay_args(good) is None
    changed[0] = None
    constant.add_(1.0)     # a tensor read as a constant changed: the tape no longer holds
    assert replay_args(good) is None
    assert instance.arena.tolist() == [0.0] * 4
    assert len(runs) == 1


def test_a_failed_guard_on_the_fast_path_is_counted_once_and_not_run_again(monkeypatch):
    def branchy(x, w):
        h = x * w
        if h.sum() > 0:
            return (h * h).sum()
        return (h - 1.0).abs().sum()

    runs = []      # the variant of each forward run, counted by the instances it takes
    make = _fastcall.replayer

    def counting(variant, take, *rest):
        return make(variant, lambda: runs.append(variant) or take(), *rest)

    monkeypatch.setattr(_fastcall, "replayer", counting)
    fn = tg.compile(branchy)
    w = tg.tensor([0.5, 2.0], requires_grad=True)
    xs = [tg.tensor([1.0, 2.0]), tg.tensor([-1.0, -2.0])]
    for x in xs * 2:          # both branches recorded, then replayed
        fn(x, w).backward()
    rerecords = len(fn.stats.rerecords)
    for i in range(4):
        before = len(runs)
        x = xs[i % 2]
        w.grad = None
        out = fn(x, w)
        out.backward()
        we = tg.tensor([0.5, 2.0], requires_grad=True)
        eager = branchy(x, we)
        eager.backward()
        assert out.item() == eager.item()
        np.testing.assert_allclose(w.grad.numpy(), we.grad.numpy(), rtol=1e-12)
        # the previous call's variant fails its guard once, the other one replays
        assert len(runs) - before == 2
        assert runs[-2] is not runs[-1]
    assert len(fn.stats.rerecords) == rerecords + 4
    assert fn.stats.records == 2


@pytest.mark.parametrize("bound", ["signatures", "variants"])
def test_a_variant_the_cache_drops_is_freed_at_once(bound):
    import gc
    import weakref

    def branchy(x, w):
        h = x * w
        return (h * h).sum() if h.sum() > 0 else (h - 1.0).abs().sum()

    limit = {"max_signatures": 1} if bound == "signatures" else {"max_variants": 1}
    fn = tg.compile(branchy, **limit)
    w = tg.tensor([0.5, 2.0], requires_grad=True)
    first = tg.tensor([1.0, 2.0])
    fn(first, w).backward()
    fn(first, w).backward()             # replayed on the fast path
    (recorded,) = fn.variants()
    gone = weakref.ref(recorded)
    del recorded
    # another signature (max_signatures=1) or another branch (max_variants=1) takes its place
    other = tg.tensor([1.0, 2.0, 3.0]) if bound == "signatures" else tg.tensor([-1.0, -2.0])
    w = tg.tensor([0.5, 2.0, 1.0] if bound == "signatures" else [0.5, 2.0],
                  requires_grad=True)
    gc.disable()
    try:
        out = fn(other, w)
        assert gone() is None           # no cycle kept it: freed without a collection
    finally:
        gc.enable()
    out.backward()
    we = tg.tensor(w.detach().numpy(), requires_grad=True)
    branchy(other, we).backward()
    np.testing.assert_allclose(w.grad.numpy(), we.grad.numpy(), rtol=1e-12)
    assert fn.stats.records == 2


def test_a_compiled_function_that_goes_frees_its_variants_at_once():
    import gc
    import weakref

    fn = tg.compile(program, codegen=True)
    for seed in range(3):
        fn(*_args(seed)).backward()
    gone = [weakref.ref(v) for v in fn.variants()]
    assert gone
    gc.disable()
    try:
        del fn
        assert all(v() is None for v in gone)
    finally:
        gc.enable()
