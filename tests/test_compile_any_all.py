"""``any()`` / ``all()`` (and ``isnan``) inside ``tapegrad.compile``: recorded as comparisons
a replay recomputes, so a call replays whatever the input's values, a Python ``if`` on the
result guards only that one bool (the branch is checked each call, never baked in), and every
call gives eager mode's value, dtype and gradient."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg

torch = pytest.importorskip("torch")

BODIES = {
    "if x.any()": lambda lib, x: x * 2 if x.any() else x * 3,
    "if x.all()": lambda lib, x: x.sin() if x.all() else x.cos(),
    "if (x > 0).any()": lambda lib, x: x * x if (x > 0).any() else -x,
    "if (x > 0).all()": lambda lib, x: x * 2 if (x > 0).all() else x - 1,
    "if torch.any(x < 0)": lambda lib, x: x * 2 if lib.any(x < 0) else x * 3,
    "if isnan(x).any()": lambda lib, x: x * 0 if lib.isnan(x).any() else x * 5,
    "x.all() as a value": lambda lib, x: x.all() * x,
    "(x > 0).any() as a value": lambda lib, x: (x > 0).any() + x,
    "any over a dim": lambda lib, x: (x.reshape(2, 3) > 0).any(0) * x.reshape(2, 3),
    "all over dims, kept": lambda lib, x: x.reshape(2, 3).all((0, 1), keepdim=True) * x,
    "while not x.all()": lambda lib, x: _until_all(x),
}


def _until_all(x):
    steps = 0
    while not (x > 0).all() and steps < 4:
        x = x + 1
        steps += 1
    return x


# six values drawn from a few, so zeros, negatives and nans come often and branches flip
VALUES = st.lists(st.sampled_from([0.0, 1.5, -2.0, 0.25, float("nan")]), min_size=6,
                  max_size=6)


@pytest.mark.parametrize("name", sorted(BODIES))
@settings(max_examples=12, deadline=None)
@given(calls=st.lists(VALUES, min_size=4, max_size=8))
def test_compiled_any_all_match_eager_and_pytorch(name, calls):
    body = BODIES[name]
    compiled = tg.compile(lambda x: body(tg, x))
    for values in calls:
        data = np.array(values)
        results = []
        for run in (compiled, lambda x: body(tg, x), lambda x: body(torch, x)):
            lib = torch if len(results) == 2 else tg
            x = lib.tensor(data, requires_grad=True)
            y = run(x)
            y.sum().backward()
            results.append((y.detach().numpy(), str(y.dtype).split(".")[1], tuple(y.shape),
                            x.grad.numpy()))
        for got in results[:2]:
            for a, b in zip(got, results[2]):
                if isinstance(a, np.ndarray):
                    np.testing.assert_array_equal(a, b)
                else:
                    assert a == b


def test_any_all_replay_when_the_values_change():
    for name in ("if x.any()", "if x.all()", "if isnan(x).any()", "x.all() as a value",
                 "any over a dim"):
        body = BODIES[name]
        compiled = tg.compile(lambda x: body(tg, x))
        rng = np.random.default_rng(3)
        for _ in range(5):
            x = tg.tensor(rng.normal(size=6) + 5.0, requires_grad=True)
            compiled(x).sum().backward()
        # values that change every call, branch the same: one recording, the rest replays
        assert compiled.stats.records == 1, (name, compiled.stats.as_dict())
        assert compiled.stats.replays == 4, (name, compiled.stats.as_dict())


def test_any_branch_flips_are_guarded():
    compiled = tg.compile(lambda x: x * 2 if x.any() else x - 7)
    for data, want in (([0.0, 1.0], [0.0, 2.0]), ([0.0, 3.0], [0.0, 6.0]),
                       ([0.0, 0.0], [-7.0, -7.0]), ([0.0, 0.0], [-7.0, -7.0]),
                       ([4.0, 0.0], [8.0, 0.0])):
        np.testing.assert_array_equal(compiled(tg.tensor(data)).numpy(), want)
    # each branch recorded once, then replayed; a flip back replays the first recording
    assert compiled.stats.replays >= 2, compiled.stats.as_dict()
