"""NpzFile: the shared reader of fsmlearn's .npz files (machines, HMM taggers)."""

import json
from pathlib import Path

import numpy as np
import pytest

from fsmlearn.errors import NpzFormatError
from fsmlearn.fsm.npz import NpzFile


def _write(path, meta, **arrays):
    if meta is not None:
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def _open(path):
    return NpzFile(path, NpzFormatError, kind="thing", fmt="fsmlearn-thing", version=2)


def test_reads_meta_and_checked_arrays(tmp_path):
    p = _write(tmp_path / "ok.npz", {"format": "fsmlearn-thing", "version": 2, "n": 3},
               a=np.arange(3, dtype=np.int64), b=np.zeros((2, 2), np.float32))
    f = _open(p)
    assert f.meta["n"] == 3
    assert f.need("a", np.int64).tolist() == [0, 1, 2]
    assert f.need("b", "f", 2).shape == (2, 2)            # by dtype kind
    with pytest.raises(NpzFormatError, match=r"ok.npz: array 'a' has dtype int64 .* expected int32"):
        f.need("a", np.int32)
    with pytest.raises(NpzFormatError, match=r"array 'b' has .* 2 dimensions; expected kind 'f' with 1"):
        f.need("b", "f", 1)
    with pytest.raises(NpzFormatError, match="missing array 'c'"):
        f.need("c", np.int64)


@pytest.mark.parametrize("meta, message", [
    (None, "no 'meta' array"),
    ({"format": "other", "version": 2}, "format 'other', expected 'fsmlearn-thing'"),
    ({"format": "fsmlearn-thing", "version": 1}, "unsupported thing file version 1"),
    ([1, 2], "format None"),
])
def test_bad_metadata_is_named(tmp_path, meta, message):
    p = _write(tmp_path / "m.npz", meta, a=np.zeros(1))
    with pytest.raises(NpzFormatError, match=message) as e:
        _open(p)
    assert str(p) in str(e.value)


def test_missing_truncated_and_foreign_files(tmp_path):
    with pytest.raises(NpzFormatError, match="no such file"):
        _open(tmp_path / "absent.npz")
    good = _write(tmp_path / "good.npz", {"format": "fsmlearn-thing", "version": 2}, a=np.zeros(100))
    cut = tmp_path / "cut.npz"
    cut.write_bytes(good.read_bytes()[:150])
    with pytest.raises(NpzFormatError, match="cut.npz: corrupt or not a fsmlearn thing file"):
        _open(cut)
    text = tmp_path / "text.npz"
    text.write_text("hello\n")
    with pytest.raises(NpzFormatError, match="corrupt or not a fsmlearn thing file"):
        _open(text)
    raw = tmp_path / "meta.npz"
    with open(raw, "wb") as fh:
        np.savez(fh, meta=np.frombuffer(b"\xff{", np.uint8))
    with pytest.raises(NpzFormatError, match="corrupt metadata"):
        _open(raw)


# ------------------------------------------------- inputs that once broke the reader
# (found by tests/fuzz_models_test.py; kept in tests/data/fuzz/models/)
STORED = Path(__file__).parent / "data" / "fuzz" / "models"


def _machine_file(path):
    return NpzFile(path, NpzFormatError, kind="machine", fmt="fsmlearn-machine", version=1)


def test_forged_header_is_refused_before_allocating():
    """A member's .npy header declaring 999999999999999 int32 (4 PB): np.load allocated
    them (MemoryError); the reader compares the declared size with the member's first."""
    p = STORED / "machine-forged-shape.npz"
    with pytest.raises(NpzFormatError, match=r"array 'dst': the header declares shape \(999999999999999,\) "
                                             r"of int32 \(3999999999999996 bytes\) but the member holds 48"):
        _machine_file(p)


def test_deeply_nested_metadata_is_a_format_error():
    """'[[[[...' in the meta array: json raised RecursionError."""
    with pytest.raises(NpzFormatError, match=r"machine-deep-json.npz: array 'meta': corrupt metadata"):
        _machine_file(STORED / "machine-deep-json.npz")


def test_member_checks(tmp_path):
    """Object, string and complex arrays, members that are not .npy, big-endian arrays."""
    meta = {"format": "fsmlearn-thing", "version": 2}
    for arr, msg in [(np.array(["ab"]), r"array 'a' has dtype <U2, which fsmlearn does not store"),
                     (np.zeros(2, complex), "array 'a' has dtype complex128"),
                     (np.array([1, None], dtype=object), "array 'a' has dtype object")]:
        p = _write(tmp_path / "x.npz", meta, a=arr)
        with pytest.raises(NpzFormatError, match=msg):
            _open(p)
    p = _write(tmp_path / "be.npz", meta, a=np.arange(3, dtype=">i8"), b=np.array([1, 2, 0], np.uint8) > 0)
    f = _open(p)
    assert f.need("a", np.int64).tolist() == [0, 1, 2] and f.need("b", "b").tolist() == [True, True, False]
    import zipfile
    with zipfile.ZipFile(tmp_path / "other.npz", "w") as z:
        z.writestr("notes.txt", "hello")
    with pytest.raises(NpzFormatError, match="member 'notes.txt' is not a .npy array"):
        _open(tmp_path / "other.npz")
    with pytest.raises(NpzFormatError, match="cannot read"):
        _open(tmp_path)                                       # a folder


def test_strings_name_the_offset_at_fault(tmp_path):
    meta = {"format": "fsmlearn-thing", "version": 2}
    blob = np.frombuffer(b"abcd", np.uint8)
    for offs, msg in [([0, 3, 2, 4], r"array 's_offsets': entry 2 is 2, below entry 1 \(3\)"),
                      ([1, 4], r"array 's_offsets': entry 0 is 1; must be 0"),
                      ([0, 2, 3], r"array 's_offsets': last entry \(index 2\) is 3; must be the 4 bytes"),
                      ([], r"array 's_offsets': is empty")]:
        p = _write(tmp_path / "s.npz", meta, s_blob=blob, s_offsets=np.array(offs, np.int64))
        with pytest.raises(NpzFormatError, match=msg):
            _open(p).strings("s")
    p = _write(tmp_path / "s.npz", meta, s_blob=np.frombuffer(b"a\xffb", np.uint8),
               s_offsets=np.array([0, 1, 3], np.int64))
    with pytest.raises(NpzFormatError, match=r"array 's_blob': string 1 is not UTF-8"):
        _open(p).strings("s")
    p = _write(tmp_path / "s.npz", meta, s_blob=blob, s_offsets=np.array([0, 1, 4], np.int64))
    assert _open(p).strings("s") == ["a", "bcd"]


def test_compressed_members_are_refused(tmp_path):
    """fsmlearn writes stored members; a deflated one (np.savez_compressed) could be a
    zip bomb, and is refused before it is decompressed."""
    p = tmp_path / "z.npz"
    with open(p, "wb") as fh:
        np.savez_compressed(fh, a=np.zeros(1000), meta=np.frombuffer(b'{"format": "fsmlearn-thing", '
                                                                      b'"version": 2}', np.uint8))
    with pytest.raises(NpzFormatError, match=r"z.npz: array '(a|meta)': member '(a|meta).npy' is compressed"):
        _open(p)
