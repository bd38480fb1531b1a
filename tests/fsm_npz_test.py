"""NpzFile: the shared reader of fsmlearn's .npz files (machines, HMM taggers)."""

import json

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
