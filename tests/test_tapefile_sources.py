"""Tape files from bytes and file objects, files that ask for more memory than they hold, and
loaded tapes replayed over a batch.

``load_tape`` reads a path, bytes or a binary file object; a tape's file comes as bytes
without touching the disk (``to_bytes``, ``save`` into a file object).  A crafted file --
an array header declaring half a gigabyte, a compressed member that inflates a thousandfold,
zip headers that lie about sizes, thousands of members, bytes flipped or cut at random -- is
refused with a ValueError while the loader's peak memory stays under a fixed cap.  A loaded
tape replays a batch in one compiled call, bit for bit as ``vmap`` replays the function it
was recorded from, and reports the samples whose control flow differs instead of computing
them on the wrong tape.
"""
import io
import os
import struct
import tracemalloc
import zipfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import strategies as S  # noqa: F401 - makes the source tree importable
import tapegrad as tg
from tapegrad import tapefile as TF

# What loading one small tape file (9 KB) may allocate at its peak, whatever its bytes say.
MEMORY_CAP = 16 << 20


def scalar_model(x, w):
    """Branches on a value: replay guards which branch was recorded."""
    y = tg.tanh(x * w + 0.5) * x
    if y.sum() > 0:
        return (y * y).sum() + tg.sin(x).sum()
    return (y - 1.0).sum() * tg.exp(w).sum()


def batch(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 5)), rng.normal(size=(n, 5))


def positive_branch(xs, ws):
    return (np.tanh(xs * ws + 0.5) * xs).sum(1) > 0


def on_recorded_branch(seed):
    """One sample (x, w) that takes the branch the tape was recorded on."""
    xs, ws = batch(50, seed)
    k = int(np.flatnonzero(positive_branch(xs, ws))[0])
    return xs[k], ws[k]


@pytest.fixture(scope="module")
def recorded():
    """A compiled function recorded on the first sample of batch(0) (its positive branch),
    and its tape's bytes."""
    compiled = tg.compile(scalar_model)
    xs, ws = batch(1)
    assert positive_branch(xs, ws)[0]
    compiled(tg.tensor(xs[0], requires_grad=True), tg.tensor(ws[0], requires_grad=True))
    return compiled, compiled.tape.to_bytes()


def peak_bytes(fn):
    """Peak memory Python and NumPy allocate while ``fn`` runs (tracemalloc sees both)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def refused_within_cap(raw, match=None):
    def load():
        with pytest.raises(ValueError, match=match):
            tg.load_tape(raw)
    peak = peak_bytes(load)
    assert peak < MEMORY_CAP, f"refusing the file took {peak / 2**20:.0f} MiB"


def call(fn, x, w):
    xt, wt = tg.tensor(x, requires_grad=True), tg.tensor(w, requires_grad=True)
    out = fn(xt, wt)
    out.backward()
    return [out._value.copy(), xt.grad._value.copy(), wt.grad._value.copy()]


# ---------------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------------
def test_bytes_file_objects_and_paths_give_the_same_tape(recorded, tmp_path):
    compiled, raw = recorded
    path = tmp_path / "t.npz"
    compiled.tape.save(path)
    assert path.read_bytes() == raw
    buffer = io.BytesIO()
    compiled.tape.save(buffer)
    assert buffer.getvalue() == raw
    x, w = on_recorded_branch(3)
    want = call(compiled, x, w)
    with open(path, "rb") as fh:
        from_file = tg.load_tape(fh)
        assert not fh.closed   # the caller's file object stays open
    sources = [raw, bytearray(raw), memoryview(raw), io.BytesIO(raw), path, str(path)]
    for loaded in [tg.load_tape(s) for s in sources] + [from_file]:
        for got, w_ in zip(call(loaded, x, w), want):
            np.testing.assert_array_equal(got, w_)
    # a loaded tape's bytes are the file it came from
    assert tg.load_tape(raw).to_bytes() == raw


def test_a_file_object_is_read_from_its_position(recorded):
    _, raw = recorded
    stream = io.BytesIO(b"header bytes of some container" + raw)
    stream.seek(30)
    tg.load_tape(stream)


def test_a_stream_that_cannot_seek(recorded):
    _, raw = recorded
    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "wb") as w:
        w.write(raw)
    with os.fdopen(read_end, "rb") as r:
        assert not r.seekable()
        tg.load_tape(r)


def test_a_raw_stream_that_returns_short_reads(recorded):
    _, raw = recorded

    class Trickle(io.RawIOBase):
        """Hands out at most 100 bytes per read, as a socket may."""

        def __init__(self):
            self.pos = 0

        def readable(self):
            return True

        def readinto(self, buffer):
            n = min(len(buffer), 100, len(raw) - self.pos)
            buffer[:n] = raw[self.pos:self.pos + n]
            self.pos += n
            return n

    tg.load_tape(Trickle())
    with pytest.raises(ValueError, match="max_bytes"):
        tg.load_tape(Trickle(), max_bytes=len(raw) // 2)


def test_a_text_file_is_a_type_error(recorded, tmp_path):
    _, raw = recorded
    (tmp_path / "t.npz").write_bytes(raw)
    with open(tmp_path / "t.npz", encoding="latin-1") as fh:
        with pytest.raises(TypeError, match="binary mode"):
            tg.load_tape(fh)


@pytest.mark.parametrize("bad", [None, 3.5, ["t.npz"]])
def test_other_sources_are_a_type_error(bad):
    with pytest.raises(TypeError, match="path, bytes or a binary file object"):
        tg.load_tape(bad)


def test_a_file_descriptor_is_refused_and_left_open(recorded, tmp_path):
    # numpy.load refuses an int as well; open(fd) would have closed the caller's descriptor
    _, raw = recorded
    (tmp_path / "t.npz").write_bytes(raw)
    fd = os.open(tmp_path / "t.npz", os.O_RDONLY)
    try:
        with pytest.raises(TypeError, match="os.fdopen"):
            tg.load_tape(fd)
        with pytest.raises(TypeError):
            np.load(fd)
        os.fstat(fd)   # still open
        with os.fdopen(fd, "rb", closefd=False) as fh:
            tg.load_tape(fh)
        assert os.read(fd, 1) == b""   # read to its end, and still open
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# Files that ask for more memory than they hold
# ---------------------------------------------------------------------------------------------
def members(raw):
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def zip_of(parts, compression=zipfile.ZIP_STORED):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as z:
        for name, data in parts.items():
            z.writestr(name, data)
    return out.getvalue()


def npy_header(shape, descr="<f8"):
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        out, {"descr": descr, "fortran_order": False, "shape": shape})
    return out.getvalue()


def test_an_array_header_declaring_half_a_gigabyte(recorded):
    # the reported file: numpy.load allocates what the header says before reading anything
    _, raw = recorded
    parts = members(raw)
    parts["vals.npy"] = npy_header((1 << 26,)) + b"\0" * 64
    bomb = zip_of(parts)

    def numpy_load():
        with pytest.raises(ValueError):
            with np.load(io.BytesIO(bomb)) as z:
                z["vals"]
    assert peak_bytes(numpy_load) > 1 << 29   # what the cap below protects against
    refused_within_cap(bomb, match="declares shape")


def test_a_compressed_member_is_refused_before_it_inflates(recorded):
    _, raw = recorded
    parts = members(raw)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in parts.items():
            if name != "vals.npy":
                z.writestr(name, data)
        with z.open("vals.npy", "w", force_zip64=True) as member:
            member.write(npy_header((1 << 25,)))
            zeros = bytes(1 << 20)
            for _ in range(256):   # 256 MiB of zeros, a quarter of a megabyte deflated
                member.write(zeros)
    bomb = out.getvalue()
    assert len(bomb) < 1 << 20
    refused_within_cap(bomb, match="compressed")


def test_zip_headers_that_lie_about_sizes(recorded):
    _, raw = recorded
    name = b"vals.npy"
    # the central directory entry of vals.npy: its sizes sit 20 and 24 bytes in
    entry = raw.index(b"PK\x01\x02")
    while raw[entry + 46:entry + 46 + len(name)] != name:
        entry = raw.index(b"PK\x01\x02", entry + 1)
    for compressed, uncompressed in [(0x7FFFFFFF, 0x7FFFFFFF), (None, 0x7FFFFFFF)]:
        bad = bytearray(raw)
        if compressed is not None:
            bad[entry + 20:entry + 24] = struct.pack("<I", compressed)
        bad[entry + 24:entry + 28] = struct.pack("<I", uncompressed)
        refused_within_cap(bytes(bad))


def test_thousands_of_members(recorded):
    parts = {f"a{i}.npy": npy_header((0,)) for i in range(5000)}
    refused_within_cap(zip_of(parts), match="members")


def test_a_file_larger_than_max_bytes(recorded, tmp_path):
    _, raw = recorded
    (tmp_path / "t.npz").write_bytes(raw)
    for source in (raw, io.BytesIO(raw), tmp_path / "t.npz"):
        with pytest.raises(ValueError, match="max_bytes"):
            tg.load_tape(source, max_bytes=len(raw) - 1)
    tg.load_tape(raw, max_bytes=len(raw) + 1000)


def test_records_that_would_need_a_huge_gradient_arena():
    # records whose values overlap in the arena: valid indices, signed afresh, a file of a
    # few kilobytes, but a backward sweep gives each record a gradient of its own
    def chain(x):
        for _ in range(50):
            x = x * 1.5
        return x.sum()

    compiled = tg.compile(chain)
    n = 1000
    compiled(tg.ones(n, requires_grad=True))
    arrays = TF._load_arrays(compiled.tape.to_bytes(), TF.MAX_TAPE_BYTES)
    arrays = {k: np.array(v) for k, v in arrays.items()}
    arrays["vals"] = arrays["vals"][:n]
    arrays["voff"][:] = 0
    arrays["digest"] = np.array([TF.digest(arrays)])
    out = io.BytesIO()
    np.savez(out, **arrays)
    raw = out.getvalue()
    assert 8 * int(arrays["size"].sum()) > 20 * len(raw)
    tg.load_tape(raw)   # within the default limit
    with pytest.raises(ValueError, match="gradient arena"):
        tg.load_tape(raw, max_bytes=4 * len(raw))


@given(data=st.data())
def test_flipped_and_cut_bytes_stay_under_the_cap(recorded, data):
    compiled, raw = recorded
    bad = bytearray(raw)
    for pos, byte in data.draw(st.lists(st.tuples(st.integers(0, len(raw) - 1),
                                                  st.integers(0, 255)), max_size=8)):
        bad[pos] = byte
    cut = data.draw(st.one_of(st.none(), st.integers(0, len(raw))), label="cut")
    if cut is not None:
        bad = bad[:cut]
    loaded = []

    def load():
        try:
            loaded.append(tg.load_tape(bytes(bad)))
        except ValueError:
            pass
    assert peak_bytes(load) < MEMORY_CAP
    if loaded:
        # the edits hit bytes that carry no data (zip timestamps, ...): the same tape
        x, w = on_recorded_branch(9)
        for got, want in zip(call(loaded[0], x, w), call(compiled, x, w)):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [(2**40,), (2**31, 2**31, 4), (-1,), (3, -5)])
def test_array_headers_with_impossible_shapes(recorded, shape):
    _, raw = recorded
    parts = members(raw)
    try:
        header = npy_header(shape)
    except ValueError:
        header = npy_header((1,)).replace(b"(1,)", repr(shape).encode())
    parts["op.npy"] = header + b"\0" * 16
    refused_within_cap(zip_of(parts))


# ---------------------------------------------------------------------------------------------
# A loaded tape replayed over a batch
# ---------------------------------------------------------------------------------------------
def test_loaded_tape_replays_a_batch_as_vmap_does(recorded):
    compiled, raw = recorded
    loaded = tg.load_tape(raw)
    xs, ws = batch(64, seed=1)
    keep = positive_branch(xs, ws)
    assert keep.any() and not keep.all()
    values, (gx, gw), status = loaded.replay_batch(xs, ws, grad_args=(0, 1))
    assert status.dtype == np.int64 and np.array_equal(status == -1, keep)
    assert np.isnan(values[~keep]).all() and np.isnan(gx[~keep]).all()
    # the samples on the recorded branch: bit for bit what per_sample_value_and_grad gives
    want_v, (want_gx, want_gw) = tg.per_sample_value_and_grad(compiled, argnums=(0, 1))(
        tg.tensor(xs[keep]), tg.tensor(ws[keep]))
    np.testing.assert_array_equal(values[keep], want_v.numpy())
    np.testing.assert_array_equal(gx[keep], want_gx.numpy())
    np.testing.assert_array_equal(gw[keep], want_gw.numpy())
    # one argument differentiated, and no gradient at all
    v1, (g1,), _ = loaded.replay_batch(xs[keep], ws[keep], grad_args=(1,))
    np.testing.assert_array_equal(v1, want_v.numpy())
    np.testing.assert_array_equal(g1, want_gw.numpy())
    v0, grads, _ = loaded.replay_batch(xs[keep], ws[keep])
    assert grads == ()
    np.testing.assert_array_equal(v0, tg.vmap(compiled)(tg.tensor(xs[keep]),
                                                        tg.tensor(ws[keep])).numpy())


def test_vmap_of_a_loaded_tape(recorded):
    compiled, raw = recorded
    loaded = tg.load_tape(raw)
    xs, ws = batch(40, seed=2)
    keep = positive_branch(xs, ws)
    xs, ws = xs[keep], ws[keep]
    np.testing.assert_array_equal(tg.vmap(loaded)(tg.tensor(xs), tg.tensor(ws)).numpy(),
                                  tg.vmap(compiled)(tg.tensor(xs), tg.tensor(ws)).numpy())
    v, g = tg.per_sample_value_and_grad(loaded)(tg.tensor(xs), tg.tensor(ws))
    want_v, want_g = tg.per_sample_value_and_grad(compiled)(tg.tensor(xs), tg.tensor(ws))
    np.testing.assert_array_equal(v.numpy(), want_v.numpy())
    np.testing.assert_array_equal(g.numpy(), want_g.numpy())


def test_vmap_of_a_loaded_tape_names_the_samples_it_cannot_replay(recorded):
    _, raw = recorded
    xs, ws = batch(30, seed=4)
    first_other = int(np.flatnonzero(~positive_branch(xs, ws))[0])
    with pytest.raises(RuntimeError, match=rf"the first: \[{first_other}[,\]]"):
        tg.vmap(tg.load_tape(raw))(tg.tensor(xs), tg.tensor(ws))


def test_batched_replay_of_a_loaded_tape_checks_its_arguments(recorded):
    _, raw = recorded
    loaded = tg.load_tape(raw)
    xs, ws = batch(4)
    with pytest.raises(ValueError, match="same leading batch size"):
        loaded.replay_batch(xs, ws[:3])
    with pytest.raises(ValueError, match="samples of shape"):
        loaded.replay_batch(xs[:, :4], ws[:, :4])
    with pytest.raises(TypeError, match="float"):
        loaded.replay_batch(xs.astype(np.int64), ws)
    with pytest.raises(TypeError, match="2 tensor arguments"):
        loaded.replay_batch(xs)
    values, grads, status = loaded.replay_batch(xs[:0], ws[:0], grad_args=(0,))
    assert values.shape == (0,) and grads[0].shape == (0, 5) and status.shape == (0,)
