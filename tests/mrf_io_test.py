"""Saving and loading MRF models (fsmlearn.mrf.io): round trips, hand-edited and truncated
files, and the fuzz harness of the readers (tests/fuzz.py)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given

from fuzz import check_reader, fuzz_settings, mutated
from fsmlearn.errors import ModelFormatError
from fsmlearn.mrf import MRFModel, load_mrf, save_mrf


def low_rank(seed=0, symbols=True):
    rng = np.random.default_rng(seed)
    return MRFModel(rng.normal(size=4), U=rng.normal(size=(4, 2)), W=rng.normal(size=(2, 4, 2)),
                    symbols=["<S>", "a", "b", "c"] if symbols else None)


def full_rank(seed=1):
    rng = np.random.default_rng(seed)
    return MRFModel(rng.normal(size=3), pair=rng.normal(size=(1, 3, 3)), symbols=None)


@pytest.mark.parametrize("make", [low_rank, full_rank, lambda: low_rank(symbols=False)])
def test_round_trip(tmp_path, make):
    m = make()
    p = tmp_path / "m.npz"
    save_mrf(m, p)
    r = load_mrf(p)
    np.testing.assert_array_equal(r.to_vector(), m.to_vector())
    assert r.symbols == m.symbols and r.rank == m.rank and r.K == m.K
    assert sorted(x.name for x in tmp_path.iterdir()) == ["m.npz"]      # no temporary left


def _arrays(m):
    with tempfile.TemporaryDirectory() as d:
        save_mrf(m, Path(d) / "m.npz")
        with np.load(Path(d) / "m.npz") as z:
            return {k: z[k].copy() for k in z.files}


def _write(path, arrays):
    with open(path, "wb") as f:
        np.savez(f, **arrays)


@pytest.mark.parametrize("edit, match", [
    (lambda a: a["theta0"].__setitem__(2, np.nan), r"array 'theta0': entry \[2\] is nan"),
    (lambda a: a["W"].__setitem__((1, 3, 0), np.inf), r"array 'W': entry \[1, 3, 0\] is inf"),
    (lambda a: a.__setitem__("U", a["U"][:3]), r"array 'U': has shape \(3, 2\); expected \(4, 2\)"),
    (lambda a: a.__setitem__("U", a["U"].astype(np.float32)), r"array 'U' has dtype float32"),
    (lambda a: a.pop("W"), r"missing array 'W'"),
    (lambda a: a.__setitem__("pair", np.zeros((2, 4, 4))), r"array 'pair': present in a low-rank model"),
    (lambda a: a.__setitem__("meta", _meta(a, order=0)), r"metadata 'order' is 0"),
    (lambda a: a.__setitem__("meta", _meta(a, rank=True)), r"metadata 'rank' is True"),
    (lambda a: a.__setitem__("meta", _meta(a, num_states="4")), r"metadata 'num_states' is '4'"),
    (lambda a: a.__setitem__("meta", _meta(a, format="fsmlearn-hmm")), r"format 'fsmlearn-hmm'"),
    (lambda a: a.__setitem__("meta", _meta(a, version=2)), r"version 2"),
])
def test_hand_edited_files_name_the_file_the_array_and_the_value(tmp_path, edit, match):
    a = _arrays(low_rank())
    edit(a)
    p = tmp_path / "edited.npz"
    _write(p, a)
    with pytest.raises(ModelFormatError, match=match) as e:
        load_mrf(p)
    assert "edited.npz" in str(e.value)


def _meta(a, **changes):
    d = json.loads(a["meta"].tobytes().decode())
    d.update(changes)
    return np.frombuffer(json.dumps(d).encode(), dtype=np.uint8)


def test_repeated_symbol_and_wrong_symbol_count(tmp_path):
    m = low_rank()
    m.symbols = ["<S>", "a", "a", "c"]
    p = tmp_path / "rep.npz"
    save_mrf(m, p)
    with pytest.raises(ModelFormatError, match=r"rep.npz: array 'symbols_blob': name 2 \('a'\) repeats"):
        load_mrf(p)


def test_truncated_and_missing_files(tmp_path):
    p = tmp_path / "m.npz"
    save_mrf(low_rank(), p)
    data = p.read_bytes()
    for cut in (0, 10, len(data) // 2, len(data) - 5):
        q = tmp_path / f"cut{cut}.npz"
        q.write_bytes(data[:cut])
        with pytest.raises(ModelFormatError, match=f"cut{cut}.npz"):
            load_mrf(q)
    with pytest.raises(ModelFormatError, match="no such file"):
        load_mrf(tmp_path / "absent.npz")


def test_a_failed_save_leaves_the_old_file(tmp_path, monkeypatch):
    p = tmp_path / "m.npz"
    save_mrf(full_rank(), p)
    before = p.read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(np, "savez", boom)
    with pytest.raises(OSError):
        save_mrf(low_rank(), p)
    assert p.read_bytes() == before and sorted(x.name for x in tmp_path.iterdir()) == ["m.npz"]


def _valid_bytes():
    with tempfile.TemporaryDirectory() as d:
        save_mrf(low_rank(3), Path(d) / "m.npz")
        return (Path(d) / "m.npz").read_bytes()


VALID = _valid_bytes()


def _check(m):
    assert isinstance(m, MRFModel) and np.isfinite(m.to_vector()).all()
    assert m.symbols is None or len(m.symbols) == m.C


@fuzz_settings()
@given(data=mutated(VALID, numbers=False))
def test_fuzz_mrf_files(data):
    """A located error (file and array named), or a model whose potentials are finite."""
    check_reader("MRF model", load_mrf, data, "m.npz", binary=True, check=_check)


def toy_tagger(seed=0):
    from fsmlearn.mrf import TaggerMRF
    m = TaggerMRF.init(["A", "B"], ["x", "Yy"])
    return m.with_vector(np.random.default_rng(seed).normal(size=m.to_vector().size))


def test_tagger_round_trip_and_edits(tmp_path):
    from fsmlearn.mrf import decode, load_tagger, save_tagger
    m = toy_tagger()
    p = tmp_path / "t.npz"
    save_tagger(m, p)
    r = load_tagger(p)
    np.testing.assert_array_equal(r.to_vector(), m.to_vector())
    assert r.tags == m.tags and r.vocab == m.vocab and r.features == m.features
    assert decode(r, [["x", "Zz"]]) == decode(m, [["x", "Zz"]])
    with np.load(p) as z:
        a = {k: z[k].copy() for k in z.files}
    a["trans"][0, 1, 2] = np.inf
    _write(tmp_path / "bad.npz", a)
    with pytest.raises(ModelFormatError, match=r"bad.npz: array 'trans': entry \[0, 1, 2\] is inf"):
        load_tagger(tmp_path / "bad.npz")
    with pytest.raises(ModelFormatError, match="format 'fsmlearn-mrf-tagger'"):
        load_mrf(p)


def _valid_tagger_bytes():
    from fsmlearn.mrf import save_tagger
    with tempfile.TemporaryDirectory() as d:
        save_tagger(toy_tagger(1), Path(d) / "t.npz")
        return (Path(d) / "t.npz").read_bytes()


VALID_TAGGER = _valid_tagger_bytes()


def _check_tagger(m):
    assert np.isfinite(m.to_vector()).all() and m.tags[0] == "<S>" and len(set(m.vocab)) == len(m.vocab)
    assert m.U.shape == (len(m.tags), len(m.features))


@fuzz_settings()
@given(data=mutated(VALID_TAGGER, numbers=False))
def test_fuzz_mrf_tagger_files(data):
    from fsmlearn.mrf import load_tagger
    check_reader("MRF tagger", load_tagger, data, "t.npz", binary=True, check=_check_tagger)
