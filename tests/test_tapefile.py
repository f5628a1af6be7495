"""Saved tapes (``Compiled.tape.save`` / ``tapegrad.load_tape``).

A saved tape replays with the values and gradients of the compiled function, in this process
and in a fresh one, and is read without pickle.  Anything else handed to ``load_tape`` -- a
truncated or corrupted file, another format version or op table, bytes flipped at random,
arrays edited and written back with ``np.savez`` (out-of-range indices, other dtypes and
shapes, negative sizes), even with the digest recomputed -- is refused with a ValueError:
never a crash, never a different result.
"""
import copy
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import strategies as S  # noqa: F401 - makes the source tree importable
import tapegrad as tg
from tapegrad import ops as K
from tapegrad import tapefile as TF

SRC = Path(__file__).resolve().parents[1] / "src"
W = np.linspace(-1.0, 1.0, 12).reshape(3, 4)


def model(x, y):
    """Many kinds of record: matmul, broadcasting, gathers, cat, reductions, softmax, clamp,
    comparisons (where) and a parameter the function closes over."""
    w = _PARAM
    h = (x @ w).tanh() + y
    z = tg.cat([h, h[:, ::2] * 2.0], 1).softmax(1)
    loss = (z * x.sum()).sum() + y.var() + (x.clamp(-0.5, 0.5) ** 2).mean()
    loss = loss + tg.where(h > 0, h, h * 0.1).amax(0).sum() + h.norm() + h.prod(1).sum()
    return loss, h.log_softmax(0)


_PARAM = tg.tensor(W, requires_grad=True)


def inputs(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((2, 3)), rng.standard_normal((2, 4))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The compiled model, recorded on inputs(0), and the file its tape was saved to."""
    compiled = tg.compile(model)
    x, y = inputs(0)
    compiled(tg.tensor(x, requires_grad=True), tg.tensor(y, requires_grad=True))
    path = tmp_path_factory.mktemp("tapes") / "model.npz"
    compiled.tape.save(path)
    return compiled, path


def run(fn, x, y):
    """Values and input gradients of fn's outputs (loss, then the second output summed)."""
    xt, yt = tg.tensor(x, requires_grad=True), tg.tensor(y, requires_grad=True)
    loss, h = fn(xt, yt)
    (loss + h.sum()).backward()
    return [loss._value.copy(), h._value.copy(), xt.grad._value.copy(), yt.grad._value.copy()]


def assert_identical(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def read_arrays(path):
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k].copy() for k in z.files}


def write_arrays(path, arrays, resign=True):
    arrays = dict(arrays)
    if resign:
        arrays["digest"] = np.array([TF.digest(arrays)])
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


# ---------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------
def test_round_trip_gives_the_compiled_values_and_gradients(saved):
    compiled, path = saved
    loaded = tg.load_tape(path)
    for seed in range(1, 6):
        x, y = inputs(seed)
        assert_identical(run(loaded, x, y), run(compiled, x, y))
        # and both are the eager values, to rounding
        for g, w in zip(run(loaded, x, y), run(model, x, y)):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    stats = loaded.stats()
    want = compiled.tape.stats()
    del want["records_recorded"]
    assert stats == want


def test_loaded_results_are_ordinary_tensors(saved):
    _, path = saved
    loaded = tg.load_tape(path)
    x, y = inputs(3)
    out = loaded(tg.tensor(x, requires_grad=True), tg.tensor(y))
    assert isinstance(out, tuple) and len(out) == 2
    assert out[0].shape == () and out[1].shape == (2, 4)
    assert out[0].grad_fn is not None
    assert out[1].grad_fn.name() == "LogSoftmaxBackward0"
    kept = out[1]._value.copy()
    loaded(tg.tensor(x + 1.0), tg.tensor(y))  # a later call leaves earlier results alone
    np.testing.assert_array_equal(out[1]._value, kept)


def test_round_trip_in_a_fresh_process(saved, tmp_path):
    compiled, path = saved
    cases = [inputs(seed) for seed in (7, 8)]
    np.savez(tmp_path / "in.npz", **{f"x{i}": x for i, (x, _) in enumerate(cases)},
             **{f"y{i}": y for i, (_, y) in enumerate(cases)})
    script = f"""
import json, sys
import numpy as np
import tapegrad as tg
loaded = tg.load_tape({str(path)!r})
data = np.load({str(tmp_path / "in.npz")!r}, allow_pickle=False)
out = []
for i in range({len(cases)}):
    x = tg.tensor(data[f"x{{i}}"], requires_grad=True)
    y = tg.tensor(data[f"y{{i}}"], requires_grad=True)
    loss, h = loaded(x, y)
    (loss + h.sum()).backward()
    out.append([v.hex() for a in (loss, h, x.grad, y.grad) for v in np.ravel(a._value).tolist()])
json.dump(out, sys.stdout)
"""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC)] + [p for p in [env.get("PYTHONPATH")] if p])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    for (x, y), bits in zip(cases, got):
        want = [v.hex() for a in run(compiled, x, y) for v in np.ravel(a).tolist()]
        assert bits == want


def test_the_file_holds_plain_arrays_only(saved, tmp_path, monkeypatch):
    _, path = saved
    with np.load(path, allow_pickle=False) as z:
        for name in z.files:
            assert z[name].dtype.kind in "biufU", (name, z[name].dtype)

    def no_unpickling(*args, **kwargs):
        raise AssertionError("load_tape unpickled something")

    monkeypatch.setattr(pickle, "load", no_unpickling)
    monkeypatch.setattr(pickle, "loads", no_unpickling)
    tg.load_tape(path)
    # an object array (pickled inside the .npy) is refused by its dtype, never unpickled
    arrays = read_arrays(path)
    arrays["opnames"] = arrays["opnames"].astype(object)
    write_arrays(tmp_path / "obj.npz", arrays, resign=False)
    with pytest.raises(ValueError, match="dtype object"):
        tg.load_tape(tmp_path / "obj.npz")


def test_single_output_and_positional_scalars(tmp_path):
    compiled = tg.compile(lambda c, x: (x * c).exp().sum())
    compiled(2.0, tg.tensor([1.0, 2.0], requires_grad=True))
    compiled.tape.save(tmp_path / "one.npz")
    loaded = tg.load_tape(tmp_path / "one.npz")
    x = tg.tensor([0.5, -1.0], requires_grad=True)
    out = loaded(None, x)       # the scalar was baked in when recording
    assert isinstance(out, tg.Tensor)
    np.testing.assert_array_equal(out._value, (x * 2.0).exp().sum()._value)


def test_what_cannot_be_saved(tmp_path):
    def record(fn, *args, **kwargs):
        compiled = tg.compile(fn)
        compiled(*args, **kwargs)
        return compiled.tape

    x = tg.tensor([1.0, 2.0], requires_grad=True)
    refused = [
        record(lambda xs: xs[0] * 2, [x]),
        record(lambda x, *, k: x * k, x, k=tg.tensor([1.0, 1.0])),
        record(lambda x: {"y": x * 2}, x),
        record(lambda x: (x * 2, 3.0), x),
        record(lambda x: ((x * 2, x * 3), x * 4), x),
    ]
    for tape in refused:
        with pytest.raises(ValueError):
            tape.save(tmp_path / "no.npz")


def test_calling_a_loaded_tape_with_wrong_arguments(saved):
    _, path = saved
    loaded = tg.load_tape(path)
    x, y = inputs(1)
    with pytest.raises(TypeError):
        loaded(tg.tensor(x))
    with pytest.raises(ValueError):
        loaded(tg.tensor(x[:1]), tg.tensor(y))
    with pytest.raises(ValueError):
        loaded(tg.tensor(x.reshape(3, 2)), tg.tensor(y))   # same size, other shape
    with pytest.raises(ValueError):
        loaded(tg.tensor(x).long(), tg.tensor(y))


# ---------------------------------------------------------------------------------------------
# Damaged and foreign files
# ---------------------------------------------------------------------------------------------
def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        tg.load_tape(tmp_path / "absent.npz")


@pytest.mark.parametrize("kind", ["empty", "text", "npy", "pickle", "npz of other arrays",
                                  "zip of text"])
def test_foreign_files_are_refused(tmp_path, kind):
    path = tmp_path / "f.npz"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("op,a0,a1\n1,2,3\n")
    elif kind == "npy":
        np.save(path.with_suffix(".npy"), np.arange(5))
        path.write_bytes(path.with_suffix(".npy").read_bytes())
    elif kind == "pickle":
        path.write_bytes(pickle.dumps({"op": np.arange(3)}))
    elif kind == "npz of other arrays":
        np.savez(path, a=np.arange(3))
    else:
        import zipfile
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("op.npy", "not an array")
    with pytest.raises(ValueError, match="not a valid tapegrad tape file"):
        tg.load_tape(path)


@given(data=st.data())
def test_truncated_files_are_refused(saved, tmp_path_factory, data):
    _, path = saved
    raw = path.read_bytes()
    cut = data.draw(st.integers(0, len(raw) - 1), label="cut")
    bad = tmp_path_factory.mktemp("cut") / "t.npz"
    bad.write_bytes(raw[:cut])
    with pytest.raises(ValueError):
        tg.load_tape(bad)


@pytest.mark.parametrize("version", [np.array([1]), np.array([TF.FORMAT_VERSION + 1]),
                                     np.array([[TF.FORMAT_VERSION]]),
                                     np.array([str(TF.FORMAT_VERSION)]),
                                     np.array([float(TF.FORMAT_VERSION)]), None])
def test_other_format_versions_are_refused(saved, tmp_path, version):
    _, path = saved
    arrays = read_arrays(path)
    if version is None:
        del arrays["format_version"]
    else:
        arrays["format_version"] = version
    write_arrays(tmp_path / "v.npz", arrays)
    with pytest.raises(ValueError, match="version"):
        tg.load_tape(tmp_path / "v.npz")


def test_an_op_table_where_an_opcode_means_something_else_is_refused(saved, monkeypatch):
    """Adding ops keeps files readable (test_op_table.py); an opcode the file uses that now
    names another op, or lays its record out differently, does not."""
    _, path = saved
    changed = copy.copy(K.OPS[K.SOFTMAX])
    changed.name = "NewBackward0"
    monkeypatch.setitem(K.OPS, K.SOFTMAX, changed)
    with pytest.raises(ValueError, match="op table"):
        tg.load_tape(path)


@given(data=st.data())
def test_flipped_bytes_never_change_a_result(saved, tmp_path_factory, data):
    compiled, path = saved
    raw = bytearray(path.read_bytes())
    edits = data.draw(st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(0, 255)),
                               min_size=1, max_size=8), label="edits")
    for pos, byte in edits:
        raw[pos] = byte
    bad = tmp_path_factory.mktemp("flip") / "f.npz"
    bad.write_bytes(bytes(raw))
    try:
        loaded = tg.load_tape(bad)
    except ValueError:
        return
    # the edit hit bytes that carry no data (zip timestamps, ...): the tape is unchanged
    x, y = inputs(11)
    assert_identical(run(loaded, x, y), run(compiled, x, y))


# ---------------------------------------------------------------------------------------------
# Edited arrays, written back with np.savez
# ---------------------------------------------------------------------------------------------
HOSTILE = [-1, -2, -(2 ** 31), -(2 ** 63), 2 ** 31, 2 ** 62, 2 ** 63 - 1]
INT_COLUMNS = ("op", "a0", "a1", "voff", "size", "ip")
# records whose ip is an offset (aux, faux) or a record, not a flag
USES_IP = {K.SUM, K.SUM_DIM, K.MEAN, K.MEAN_DIM, K.PROD, K.PROD_DIM, K.MAX, K.MIN, K.AMAX,
           K.AMIN, K.MAX_DIM, K.MIN_DIM, K.VAR, K.STD, K.LOGSUMEXP, K.SOFTMAX, K.LOG_SOFTMAX,
           K.NORM, K.MATMUL, K.GATHER, K.BCAST, K.RESHAPE, K.CAT, K.STACK, K.EXPAND_S,
           K.SCATTER, K.GUARD, K.SOFTPLUS, K.CLAMP, K.CLAMP_MIN, K.CLAMP_MAX, K.WHERE}


@st.composite
def structural_edits(draw, arrays):
    """An edit that makes the file invalid: (description, function editing arrays)."""
    op = arrays["op"]
    n = len(op)
    nvals = len(arrays["vals"])
    kind = draw(st.sampled_from(["dtype", "ndim", "length", "negative size", "a0", "a1",
                                 "voff", "ip", "opcode", "arg_rec", "out_rec", "arg_pos",
                                 "out_shape", "arg_shape", "missing", "extra", "tuple_out"]))
    names = sorted(arrays)
    if kind == "dtype":
        name = draw(st.sampled_from([k for k in names if k != "digest"]))
        old = arrays[name].dtype
        new = draw(st.sampled_from(["<i4", "<u8", "<f8", "<f4", ">i8", ">f8", "?", "<c16",
                                    "S16"]).filter(lambda d: np.dtype(d) != old))

        def edit(a):
            try:
                a[name] = a[name].astype(str).astype(new) if new == "S16" else \
                    a[name].astype(new)
            except ValueError:   # text that is no number
                a[name] = np.zeros(a[name].shape, dtype=new)
        return f"{name} as {new}", edit
    if kind == "ndim":
        name = draw(st.sampled_from([k for k in names if k not in ("digest", "opnames")]))
        zero_d = draw(st.booleans())

        def edit(a):
            v = a[name]
            a[name] = v.reshape(-1) if v.ndim != 1 else v.reshape(-1, 1)
            if v.ndim == 1 and v.size == 1 and zero_d:
                a[name] = v.reshape(())
        return f"{name} reshaped", edit
    if kind == "length":
        name = draw(st.sampled_from(INT_COLUMNS + ("fp",)))
        longer = draw(st.booleans())

        def edit(a):
            a[name] = np.concatenate([a[name], a[name][:1]]) if longer else a[name][:-1]
        return f"{name} {'longer' if longer else 'shorter'}", edit
    if kind == "negative size":
        r = draw(st.integers(0, n - 1))
        v = draw(st.integers(-(2 ** 63), -1))
        return f"size[{r}] = {v}", lambda a: a["size"].__setitem__(r, v)
    if kind in ("a0", "a1"):
        recs = [r for r in range(n) if op[r] not in (K.CONST,)]
        r = draw(st.sampled_from(recs))
        # at or after the record itself, or negative (-1 only where the op has no such input)
        v = draw(st.sampled_from([r, r + 1, n, n + 7, 2 ** 62, 2 ** 63 - 1, -2, -(2 ** 63)]))
        return f"{kind}[{r}] = {v}", lambda a: a[kind].__setitem__(r, v)
    if kind == "voff":
        r = draw(st.integers(0, n - 1))
        v = draw(st.sampled_from([-1, -(2 ** 63), nvals, nvals + 3, 2 ** 62, 2 ** 63 - 1]))
        return f"voff[{r}] = {v}", lambda a: a["voff"].__setitem__(r, v)
    if kind == "ip":
        recs = [r for r in range(n) if op[r] in USES_IP]
        r = draw(st.sampled_from(recs))
        v = draw(st.sampled_from([-1, -(2 ** 63), 2 ** 62, 2 ** 63 - 1,
                                  len(arrays["aux"]) + len(arrays["faux"]) + n]))
        return f"ip[{r}] = {v}", lambda a: a["ip"].__setitem__(r, v)
    if kind == "opcode":
        r = draw(st.integers(0, n - 1))
        v = draw(st.sampled_from([-1, 3, 9, 999, 2 ** 62]).filter(lambda c: c not in K.OPS))
        return f"op[{r}] = {v}", lambda a: a["op"].__setitem__(r, v)
    if kind in ("arg_rec", "out_rec"):
        j = draw(st.integers(0, len(arrays[kind]) - 1))
        leaves = [r for r in range(n) if op[r] == K.LEAF]
        bad = [n, 2 ** 62, -1, -(2 ** 63)] + ([r for r in range(n) if r not in leaves][:3]
                                               if kind == "arg_rec" else [])
        v = draw(st.sampled_from(bad))
        return f"{kind}[{j}] = {v}", lambda a: a[kind].__setitem__(j, v)
    if kind == "arg_pos":
        j = draw(st.integers(0, len(arrays["arg_pos"]) - 1))
        v = draw(st.sampled_from([-1, -(2 ** 63)]))
        return f"arg_pos[{j}] = {v}", lambda a: a["arg_pos"].__setitem__(j, v)
    if kind in ("out_shape", "arg_shape"):
        j = draw(st.integers(0, arrays[kind].shape[0] - 1))
        k = draw(st.integers(0, arrays[kind].shape[1] - 1))
        old = int(arrays[kind][j, k])
        v = draw(st.sampled_from([-2, -(2 ** 63), 2 ** 62, 0 if old > 1 else 5,
                                  old + 1 if old >= 0 else 3]))
        return f"{kind}[{j}, {k}] = {v}", lambda a: a[kind].__setitem__((j, k), v)
    if kind == "missing":
        name = draw(st.sampled_from(names))
        return f"no {name}", lambda a: a.pop(name)
    if kind == "extra":
        return "an extra array", lambda a: a.__setitem__("extra", np.zeros(3))
    return "tuple_out twice", lambda a: a.__setitem__("tuple_out", np.array([True, True]))


@given(data=st.data(), resign=st.booleans())
def test_invalid_edits_are_refused(saved, tmp_path_factory, data, resign):
    _, path = saved
    arrays = read_arrays(path)
    what, edit = data.draw(structural_edits(arrays), label="edit")
    edit(arrays)
    bad = tmp_path_factory.mktemp("edit") / "e.npz"
    write_arrays(bad, arrays, resign=resign and "digest" in arrays)
    try:
        tg.load_tape(bad)
    except ValueError:
        return
    pytest.fail(f"a file with {what} was accepted")


@given(data=st.data())
def test_any_edit_without_a_new_digest_is_refused(saved, tmp_path_factory, data):
    _, path = saved
    arrays = read_arrays(path)
    name = data.draw(st.sampled_from(sorted(set(arrays) - {"digest", "format_version"})))
    flat = arrays[name].reshape(-1)
    if flat.dtype.kind == "U":
        arrays[name] = np.array([str(flat[0])[::-1] + "0"])
    else:
        j = data.draw(st.integers(0, flat.size - 1)) if flat.size else None
        if j is None:
            arrays[name] = np.zeros(1, dtype=flat.dtype)
        else:
            flat[j] = flat[j] + 1 if flat.dtype.kind != "b" else not flat[j]
    bad = tmp_path_factory.mktemp("sig") / "s.npz"
    write_arrays(bad, arrays, resign=False)
    with pytest.raises(ValueError, match="digest|op table"):
        tg.load_tape(bad)


@given(data=st.data())
def test_edits_with_a_new_digest_never_crash(saved, tmp_path_factory, data):
    """Edits of in-range-looking values, digest recomputed: the loader either refuses the
    file or it replays some other valid tape -- it never reads or writes out of bounds."""
    _, path = saved
    arrays = read_arrays(path)
    n_edits = data.draw(st.integers(1, 4))
    for _ in range(n_edits):
        name = data.draw(st.sampled_from(INT_COLUMNS + ("aux", "arg_rec", "out_rec",
                                                        "out_shape", "arg_shape")))
        flat = arrays[name].reshape(-1)
        if not flat.size:
            continue
        j = data.draw(st.integers(0, flat.size - 1))
        flat[j] = data.draw(st.integers(-3, max(8, len(arrays["op"]) + 3)))
    bad = tmp_path_factory.mktemp("resign") / "r.npz"
    write_arrays(bad, arrays)
    try:
        loaded = tg.load_tape(bad)
    except ValueError:
        return
    x, y = inputs(5)
    xt, yt = tg.tensor(x, requires_grad=True), tg.tensor(y, requires_grad=True)
    try:
        out = loaded(xt, yt)
    except (ValueError, RuntimeError):
        return   # e.g. a guard, or an output shape the arguments do not fill
    outs = out if isinstance(out, tuple) else (out,)
    total = outs[0].sum()
    for o in outs[1:]:
        total = total + o.sum()
    try:
        total.backward()
    except (ValueError, RuntimeError):
        pass   # e.g. an output that no longer depends on an argument


@pytest.mark.parametrize("where", ["voff", "size", "ip", "aux"])
@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_integers_are_refused(saved, tmp_path, where, value):
    """Values whose sums and products wrap around in int64 must not pass the range checks."""
    _, path = saved
    arrays = read_arrays(path)
    op = arrays["op"]
    if where == "aux":
        # the index table of the first gather, or the (O, R, I) triple of the first reduction
        r = next(r for r in range(len(op)) if op[r] in (K.GATHER, K.SUM, K.SOFTMAX))
        arrays["aux"][arrays["ip"][r] + 2] = value
    else:
        r = next(r for r in range(len(op)) if op[r] == K.MATMUL)
        arrays[where][r] = value
    write_arrays(tmp_path / "h.npz", arrays)
    with pytest.raises(ValueError):
        tg.load_tape(tmp_path / "h.npz")


def test_a_two_dimensional_op_column_is_refused(saved, tmp_path):
    # (found by the edit test above: it stopped on a TypeError inside the op-table check)
    _, path = saved
    arrays = read_arrays(path)
    arrays["op"] = arrays["op"].reshape(1, -1)
    bad = tmp_path / "op2d.npz"
    write_arrays(bad, arrays, resign=True)
    with pytest.raises(ValueError, match="op column is malformed"):
        tg.load_tape(bad)
