"""Fuzzing the readers of binary model files (issue 16): Machine.load (.npz),
load_hmm (an HMM tagger's .npz) and Machine.read (OpenFst binary).

Each reader gets mutations of a valid file drawn by the shared harness
(tests/fuzz.py: truncation at any byte, byte flips, random bytes, the empty
file, ...) and *structured* ones: the valid archive's arrays are loaded, one
is dropped, retyped, reshaped or given an out-of-range state or label, a
NaN, infinite, negative or overflowing value (the JSON ``meta`` array gets
missing keys and values of the wrong type), and the arrays are saved again
with numpy; OpenFst data gets a 4- or 8-byte field overwritten with such a
value.  The property (tests/fuzz.py's check_reader): the reader raises a
located FsmError (the file and the array, state or byte at fault) or returns
a valid object, equal to the saved one when the file is unchanged.

Inputs that once broke a reader are kept under tests/data/fuzz/models/ and
replayed by the regression tests of tests/fsm_machine_test.py,
tests/tag_hmm_io_test.py and tests/fsm_npz_test.py.  The tests after the fuzz
tests name particular faults and try every truncation of every valid file.
"""

from __future__ import annotations

import io
import json
import struct
import warnings
import zipfile
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import random_machine
from fsmlearn import Machine, SymbolTable
from fsmlearn.errors import ModelFormatError, NpzFormatError, OpenFstFormatError
from fsmlearn.tag import HMM, OovTags, SuffixModel, load_hmm
from fuzz import check_reader, fuzz_settings, mutated
from tag_common import random_hmm

# ------------------------------------------------------------------ valid files
def _saved(save) -> bytes:
    """The bytes ``save(path)`` writes."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "x"
        save(p)
        return p.read_bytes()


@lru_cache(maxsize=None)
def machines() -> tuple:
    """Small valid machines: a log acceptor with an input symbol table, a tropical
    transducer with both tables and a phi arc, a real-weight acceptor."""
    rng = np.random.default_rng(16)
    words = SymbolTable.from_symbols([f"w{i}" for i in range(1, 7)], name="words")
    a = random_machine(rng, 5, 12, labels=5).replace(isyms=words)
    t = random_machine(rng, 4, 9, labels=4, semiring="tropical")
    ol = rng.integers(1, 5, t.num_arcs).astype(np.int32)
    il = t.ilabel.copy()
    il[0] = -2                                  # PHI
    t = t.replace(ilabel=il, olabel=ol, isyms=words, osyms=SymbolTable.from_symbols("abcd", name="out"))
    r = random_machine(rng, 4, 7, semiring="real")
    return a, t, r


@lru_cache(maxsize=None)
def openfst_machines() -> tuple:
    """The machines written as OpenFst binary: the acceptor, and the transducer without
    its phi arc (whose OpenFst label is in no symbol table)."""
    a, t, _ = machines()
    il = t.ilabel.copy()
    il[il == -2] = 1
    return a, t.replace(ilabel=il)


@lru_cache(maxsize=None)
def hmms() -> tuple:
    """Small valid taggers: order 2 with an unknown-word model and a tag dictionary,
    order 3 without."""
    rng = np.random.default_rng(16)
    h = random_hmm(rng, T=3, V=4)
    tagged = [("Foo", 0), ("bar-baz", 1), ("x1", 2), ("quux", 1), ("Zed", 0), ("runs", 2)]
    unk = SuffixModel.train(tagged, {w: 1 for w, _ in tagged}, 3, np.array([5.0, 3.0, 2.0]), max_suffix=3,
                            theta=0.5)
    oov = OovTags("tiny", ["dog", "cat"], np.array([[1, 0, 1], [0, 1, 0]], bool), np.array([1, 1, 0], bool))
    h2 = HMM(h.tags, h.vocab, h.log_trans, h.log_emit, unknown=unk, tagdict=oov)
    h3 = random_hmm(rng, T=2, V=3, order=3)
    return h2, h3


@lru_cache(maxsize=None)
def machine_files() -> tuple:
    return tuple(_saved(m.save) for m in machines())


@lru_cache(maxsize=None)
def hmm_files() -> tuple:
    return tuple(_saved(h.save) for h in hmms())


@lru_cache(maxsize=None)
def openfst_files() -> tuple:
    a, t = openfst_machines()
    return (_saved(lambda p: a.write(p, arc_type="log64")), _saved(lambda p: a.write(p, arc_type="log")),
            _saved(lambda p: t.write(p, arc_type="standard")))


# ------------------------------------------------------------------ checks of a result
ARRAYS = ("final", "src_start", "dst", "ilabel", "olabel", "weight")


def same_machine(m: Machine, ref: Machine) -> bool:
    return (m.start == ref.start and m.semiring == ref.semiring and m.is_acceptor == ref.is_acceptor
            and all(np.array_equal(getattr(m, k), getattr(ref, k)) for k in ARRAYS)
            and (m.isyms is None) == (ref.isyms is None) and (m.isyms is None or m.isyms.same_as(ref.isyms)))


def valid_machine(m: Machine) -> None:
    """A machine that the constructor accepts again, with arrays in range."""
    assert isinstance(m, Machine)
    n = m.num_states
    assert m.src_start.shape == (n + 1,) and m.src_start[0] == 0 and m.src_start[-1] == m.num_arcs
    assert np.all(np.diff(m.src_start) >= 0)
    assert np.all((m.dst >= 0) & (m.dst < n)) and -1 <= m.start < n
    for lab in (m.ilabel, m.olabel):
        assert np.all((lab >= 0) | (lab == -2))
    if m.semiring == "real":
        assert np.all(np.isfinite(m.weight) & (m.weight >= 0)) and np.all(np.isfinite(m.final) & (m.final >= 0))
    else:
        assert not np.any(np.isnan(m.weight) | (m.weight == -np.inf))
        assert not np.any(np.isnan(m.final) | (m.final == -np.inf))
    Machine(start=m.start, final=m.final, src_start=m.src_start, dst=m.dst, ilabel=m.ilabel,
            olabel=None if not m.stores_olabel else m.olabel, weight=m.weight, isyms=m.isyms, osyms=m.osyms,
            semiring=m.semiring)


def valid_hmm(h: HMM) -> None:
    """A tagger that validates again and scores unknown words without NaN."""
    assert isinstance(h, HMM)
    HMM(h.tags, h.vocab, h.log_trans, h.log_emit, order=h.order, log_trans3=h.log_trans3)
    s = h.unknown_scores(["Frob", "dog", "x-ray", "42", "cat", ""])
    assert s.shape == (6, h.T) and not np.any(np.isnan(s)) and not np.any(s == np.inf)
    u = h.unknown
    if u is not None:
        assert u.p_rare.shape == (h.T,) and np.all((u.p_rare >= 0) & (u.p_rare <= 1)) and u.p_rare.sum() > 0
        assert 0 <= u.theta < np.inf and u.max_suffix >= 0
        for row in u.table.values():
            assert row.shape == (h.T,) and np.all(np.isfinite(row) & (row >= 0)) and row.sum() > 0
    if h.tagdict is not None:
        assert h.tagdict.mask.shape == (len(h.tagdict.words), h.T) and h.tagdict.open_mask.any()
        assert h.tagdict.mask.any(axis=1).all()


# ------------------------------------------------------------------ structured mutations
INT_VALUES = [-1, -2, -3, 0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 99, 2**31 - 1, -2**31, 2**31 - 2, 2**62, -2**63,
              2**63 - 1, 255, 127, -128]
FLOAT_VALUES = [np.nan, np.inf, -np.inf, -1.0, -1e-300, 0.0, 1.0, 0.5, 5.0, 1e308, -1e308, 1e-320]
DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint32", "uint64", "float16", "float32", "float64",
          "bool", ">i4", ">i8", ">f8", "complex128", "U3", "S2", "O"]
META_VALUES = [None, "x", "", -1, 0, 1, 2, 3, 99, 1.5, 2**70, -2**70, [], {}, True, False, float("nan"),
               float("inf"), "log", "real", "tropical", "log64", "standard", "fsmlearn-machine", "fsmlearn-hmm"]


def _arrays(data: bytes) -> dict:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _savez(arrays: dict) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _set_value(draw, a: np.ndarray) -> np.ndarray:
    a = a.copy()
    i = draw(st.integers(0, a.size - 1))
    if a.dtype.kind in "iu":
        v = draw(st.sampled_from(INT_VALUES))
        info = np.iinfo(a.dtype)
        v = min(max(v, info.min), info.max)           # the type's overflow value at worst
    elif a.dtype.kind == "f":
        v = draw(st.sampled_from(FLOAT_VALUES))
    else:
        v = draw(st.booleans())
    a.flat[i] = v
    return a


def _mutate_meta(draw, meta: dict) -> np.ndarray:
    meta = dict(meta)
    keys = sorted(meta) + ["extra"]
    key = draw(st.sampled_from(keys))
    if draw(st.booleans()) and key in meta:
        del meta[key]
    else:
        meta[key] = draw(st.sampled_from(META_VALUES))
    text = json.dumps(meta)
    if draw(st.integers(0, 9)) == 0:
        text = draw(st.sampled_from(["[", "{}", "[[[[" * 3000, '{"format": 1}', "\"x\"", "nul", "\udc80"]))
    return np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)


@st.composite
def npz_mutation(draw, valid: bytes) -> bytes:
    """One or two structured mutations of the arrays of ``valid`` (see the module docstring)."""
    arrays = _arrays(valid)
    for _ in range(draw(st.integers(1, 2))):
        name = draw(st.sampled_from(sorted(arrays)))
        a = arrays[name]
        kind = draw(st.sampled_from(["drop", "dtype", "shape", "value", "value", "value", "swap", "meta"]))
        if kind == "meta" or (name == "meta" and kind == "value"):
            try:
                meta = json.loads(arrays["meta"].tobytes())
            except (KeyError, ValueError, RecursionError):      # dropped or mangled before
                continue
            if isinstance(meta, dict):
                arrays["meta"] = _mutate_meta(draw, meta)
        elif kind == "drop":
            del arrays[name]
        elif kind == "dtype":
            dt = draw(st.sampled_from(DTYPES))
            try:
                with np.errstate(invalid="ignore", over="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    arrays[name] = a.astype(object) if dt == "O" else a.astype(dt)
            except (ValueError, TypeError, OverflowError):        # e.g. '2.3' as an int
                pass
        elif kind == "shape":
            how = draw(st.sampled_from(["cut", "grow", "2d", "empty", "scalar", "flat"]))
            if how == "cut":
                arrays[name] = a[:-1] if a.ndim else a
            elif how == "grow":
                arrays[name] = np.concatenate([a, a[:1]]) if a.ndim and a.size else a
            elif how == "2d":
                arrays[name] = a.reshape(1, -1) if a.ndim == 1 else a.reshape(-1)
            elif how == "empty":
                arrays[name] = a[:0] if a.ndim else a
            elif how == "scalar":
                arrays[name] = np.asarray(a.flat[0] if a.size else 0, a.dtype)
            else:
                arrays[name] = a.ravel()
        elif kind == "value" and a.size:
            arrays[name] = _set_value(draw, a)
        elif kind == "swap":
            other = draw(st.sampled_from(sorted(arrays)))
            arrays[name], arrays[other] = arrays[other], a
    return _savez(arrays)


OPENFST_FIELDS = {"<i": [-1, -2, 0, 1, 3, 4, 5, 7, 2**31 - 1, -2**31, 2**31 - 2],
                  "<q": [-1, 0, 1, 2, 5, 99, 2**31, 2**62, 2**63 - 1, -2**63],
                  "<f": [float("nan"), float("inf"), float("-inf"), -1.0, 0.0, 3.4e38],
                  "<d": [float("nan"), float("inf"), float("-inf"), -1.0, 0.0, 1e308]}


@st.composite
def openfst_mutation(draw, valid: bytes) -> bytes:
    """A 4- or 8-byte field of ``valid`` overwritten with a bad int or float."""
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 2))):
        fmt = draw(st.sampled_from(sorted(OPENFST_FIELDS)))
        size = struct.calcsize(fmt)
        pos = draw(st.integers(0, len(data) - size))
        data[pos:pos + size] = struct.pack(fmt, draw(st.sampled_from(OPENFST_FIELDS[fmt])))
    return bytes(data)


def _choose(draw, files, structured):
    i = draw(st.integers(0, len(files) - 1))
    valid = files[i]
    family = draw(st.sampled_from(["text", "structured", "structured", "both"]))
    if family == "text":
        data = draw(mutated(valid, numbers=False))
    else:
        data = draw(structured(valid))
        if family == "both":
            data = draw(mutated(data, numbers=False))
    return i, valid, data


# ------------------------------------------------------------------ the fuzz tests
@fuzz_settings()
@given(st.data())
def test_fuzz_machine_load(data):
    i, valid, b = _choose(data.draw, machine_files(), npz_mutation)
    ref = machines()[i]

    def check(m):
        valid_machine(m)
        if b == valid:
            assert same_machine(m, ref)
    check_reader("Machine.load", Machine.load, b, "m.npz", binary=True, check=check)


@fuzz_settings()
@given(st.data())
def test_fuzz_load_hmm(data):
    i, valid, b = _choose(data.draw, hmm_files(), npz_mutation)
    ref = hmms()[i]

    def check(h):
        valid_hmm(h)
        if b == valid:
            assert h.tags == ref.tags and h.vocab == ref.vocab
            assert np.array_equal(h.log_emit, ref.log_emit) and np.array_equal(h.log_trans, ref.log_trans)
    check_reader("load_hmm", lambda p: load_hmm(p, HMM), b, "t.hmm", binary=True, check=check)


@fuzz_settings()
@given(st.data())
def test_fuzz_machine_read(data):
    i, valid, b = _choose(data.draw, openfst_files(), openfst_mutation)

    def check(m):
        valid_machine(m)
        if b == valid:
            ref = openfst_machines()[0 if i < 2 else 1]
            assert m.num_states == ref.num_states and np.array_equal(m.dst, ref.dst)
            assert np.array_equal(m.ilabel, ref.ilabel) and np.array_equal(m.olabel, ref.olabel)
            assert np.allclose(m.weight, ref.weight, rtol=1e-6) and m.isyms == ref.isyms
    check_reader("Machine.read", Machine.read, b, "m.fst", binary=True, check=check)


# ------------------------------------------------------------------ named mutations
def test_valid_files_load_back():
    def same(ref):
        def check(m):
            valid_machine(m)
            assert same_machine(m, ref)
        return check
    for m, b in zip(machines(), machine_files()):
        assert check_reader("valid files", Machine.load, b, "m.npz", binary=True, check=same(m)) is not None
    for b in hmm_files():
        assert check_reader("valid files", lambda p: load_hmm(p, HMM), b, "t.hmm", binary=True,
                            check=valid_hmm) is not None
    for b in openfst_files():
        assert check_reader("valid files", Machine.read, b, "m.fst", binary=True, check=valid_machine) is not None


def _located(read, data: bytes, filename: str, error, match: str, tmp_path):
    p = tmp_path / filename
    p.write_bytes(data)
    with pytest.raises(error, match=match) as e:
        read(p)
    assert str(p) in str(e.value)


def _with(valid: bytes, **changes) -> bytes:
    a = _arrays(valid)
    for k, v in changes.items():
        if v is None:
            a.pop(k, None)
        else:
            a[k] = v
    return _savez(a)


def test_machine_arrays_name_the_fault(tmp_path):
    valid = machine_files()[0]
    a = _arrays(valid)
    n = a["final"].size
    dst = a["dst"].copy()
    dst[5] = 99
    w = a["weight"].copy()
    w[2] = np.nan
    lab = a["ilabel"].copy()
    lab[1] = 77
    ss = a["src_start"].copy()
    ss[2] = ss[3] + 1
    load = Machine.load
    for data, match in [
        (_with(valid, dst=dst), rf"array 'dst': arc 5 \(state \d\) has destination 99, out of range for {n} states"),
        (_with(valid, weight=w), r"array 'weight': arc 2 \(state \d\) has weight nan"),
        (_with(valid, ilabel=lab), r"array 'ilabel': arc 1 .* label 77, which is not a key .* 'isyms_keys'"),
        (_with(valid, src_start=ss), r"array 'src_start': entry 3 is \d+, below entry 2"),
        (_with(valid, weight=None), "missing array 'weight'"),
        (_with(valid, dst=a["dst"].astype(np.int64)), "array 'dst' has dtype int64"),
        (_with(valid, weight=a["weight"][:-1]), r"array 'weight': has \d+ entries; expected \d+ like array 'dst'"),
        (_with(valid, final=np.full(n, -np.inf)), r"array 'final': state 0 has final weight -inf"),
        (_with(valid, isyms_keys=np.full(a["isyms_keys"].size, 2**40)), r"array 'isyms_keys': key 0 .* outside"),
        (_with(valid, isyms_offsets=a["isyms_offsets"][::-1].copy()), r"array 'isyms_offsets': entry 0"),
        (_with(valid, dst=a["dst"].astype(object)), "array 'dst' has dtype object"),
    ]:
        _located(load, data, "m.npz", NpzFormatError, match, tmp_path)


def test_hmm_arrays_name_the_fault(tmp_path):
    valid = hmm_files()[0]
    a = _arrays(valid)
    tag = a["unk_tag"].copy()
    tag[0] = 3
    pr = a["unk_p_rare"].copy()
    pr[1] = np.nan
    mask = a["oov_mask"].copy()
    mask[1] = False
    em = a["log_emit"].copy()
    em[1, 2] = np.nan
    cnt = a["unk_count"].copy()
    cnt[0] = -1.0
    load = lambda p: load_hmm(p, HMM)
    for data, match in [
        (_with(valid, log_emit=a["log_emit"][:, :-1]), r"array 'log_emit': has shape \(3, 4\); expected \(3, 5\)"),
        (_with(valid, log_trans=a["log_trans"][:, :-1]), r"array 'log_trans': has shape"),
        (_with(valid, log_emit=em), r"array 'log_emit': entry \[1, 2\] is nan, not a log probability"),
        (_with(valid, log_emit=a["log_emit"] - 1.0), r"array 'log_emit': row \[0\] sums to 0.36"),
        (_with(valid, unk_tag=tag), r"array 'unk_tag': entry 0 is tag 3, out of range for 3 tags"),
        (_with(valid, unk_p_rare=pr), r"array 'unk_p_rare': entry 1 is nan"),
        (_with(valid, unk_count=cnt), r"array 'unk_count': entry 0 is -1.0"),
        (_with(valid, oov_mask=mask), r"array 'oov_mask': row 1 \(word 'cat'\) allows no tag"),
        (_with(valid, unk_scalars=np.array([0.5, np.inf])), r"array 'unk_scalars': entry 1 \(max_suffix\) is inf"),
        (_with(valid, unk_ptr=a["unk_ptr"][:-1]), r"array 'unk_ptr': has \d+ entries"),
        (_with(valid, vocab_offsets=np.array([0, 2, 4, 6, 6])), r"array 'vocab_offsets': last entry"),
    ]:
        _located(load, data, "t.hmm", ModelFormatError, match, tmp_path)


def _forge_shape(valid: bytes, member: str, shape: bytes) -> bytes:
    """``valid`` with the .npy header of ``member`` declaring ``shape`` (its CRC made good,
    so that only the header is wrong)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(valid)) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == member:
                i = data.index(b"'shape': (")
                j = data.index(b")", i) + 1
                end = data.index(b"\n", j)                 # the header's padding absorbs the change
                head = (data[:i] + b"'shape': " + shape + b", }").ljust(end)
                assert len(head) == end
                data = head + data[end:]
            zout.writestr(info.filename, data)
    return out.getvalue()


def test_forged_npy_header_allocates_nothing(tmp_path):
    """A member whose header declares a huge shape is refused before anything is allocated."""
    valid = machine_files()[0]
    for shape, what in [(b"(999999999999999,)", r"declares shape \(999999999999999,\) of int32 "
                                                r"\(3999999999999996 bytes\) but the member holds \d+ bytes"),
                        (b"(3,)", r"declares shape \(3,\) of int32 \(12 bytes\) but the member holds \d+"),
                        (b"(-5,)", r"negative shape")]:
        _located(Machine.load, _forge_shape(valid, "dst.npy", shape), "huge.npz", NpzFormatError,
                 r"array 'dst': .*" + what, tmp_path)


def test_openfst_faults_give_the_byte(tmp_path):
    data = openfst_files()[0]
    for cut in (0, 3, 30, len(data) // 2, len(data) - 1):
        _located(Machine.read, data[:cut], "m.fst", OpenFstFormatError, "truncated|magic|bytes", tmp_path)
    _located(Machine.read, data + b"\0", "m.fst", OpenFstFormatError, r"1 bytes follow the last state", tmp_path)


def test_every_truncation_and_some_flips(tmp_path):
    """Every prefix of every valid file, and each byte of the OpenFst files set to 0x00,
    0x80 and 0xff: a located error or a valid machine, never anything else."""
    readers = [("Machine.load", Machine.load, machine_files(), "m.npz", valid_machine),
               ("load_hmm", lambda p: load_hmm(p, HMM), hmm_files(), "t.hmm", valid_hmm),
               ("Machine.read", Machine.read, openfst_files(), "m.fst", valid_machine)]
    for name, read, files, filename, check in readers:
        p = tmp_path / filename
        for data in files:
            inputs = [data[:n] for n in range(len(data))]
            if name == "Machine.read":
                inputs += [data[:i] + bytes([b]) + data[i + 1:] for i in range(len(data)) for b in (0, 0x80, 0xff)]
            for b in inputs:
                p.write_bytes(b)
                try:
                    check(read(p))
                except (NpzFormatError, ModelFormatError, OpenFstFormatError) as e:
                    assert str(p) in str(e), e
