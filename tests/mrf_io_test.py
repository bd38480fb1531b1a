"""Saving and loading MRF models (fsmlearn.mrf.io): round trips, hand-edited and truncated
files, and the fuzz harness of the readers (tests/fuzz.py)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

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


def _arrays(m, save=save_mrf):
    """The arrays of ``m`` as ``save`` writes them, to edit by hand."""
    with tempfile.TemporaryDirectory() as d:
        save(m, Path(d) / "m.npz")
        with np.load(Path(d) / "m.npz") as z:
            return {k: z[k].copy() for k in z.files}


def _write(path, arrays):
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _refused_when_edited(tmp_path, arrays, load, match):
    """``load`` of ``arrays`` written to edited.npz raises a ModelFormatError matching ``match``
    that names the file."""
    p = tmp_path / "edited.npz"
    _write(p, arrays)
    with pytest.raises(ModelFormatError, match=match) as e:
        load(p)
    assert "edited.npz" in str(e.value)


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
    _refused_when_edited(tmp_path, a, load_mrf, match)


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


def _valid_bytes(save, model):
    """The bytes of ``model`` saved by ``save`` (the fuzz tests' starting files)."""
    with tempfile.TemporaryDirectory() as d:
        save(model, Path(d) / "m.npz")
        return (Path(d) / "m.npz").read_bytes()


VALID = _valid_bytes(save_mrf, low_rank(3))


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


def _save_tagger(model, path):
    from fsmlearn.mrf import save_tagger
    save_tagger(model, path)


VALID_TAGGER = _valid_bytes(_save_tagger, toy_tagger(1))


def _check_tagger(m):
    assert np.isfinite(m.to_vector()).all() and m.tags[0] == "<S>" and len(set(m.vocab)) == len(m.vocab)
    assert m.U.shape == (len(m.tags), len(m.features))


@fuzz_settings()
@given(data=mutated(VALID_TAGGER, numbers=False))
def test_fuzz_mrf_tagger_files(data):
    from fsmlearn.mrf import load_tagger
    check_reader("MRF tagger", load_tagger, data, "t.npz", binary=True, check=_check_tagger)


def window_tagger(seed=2, window=3):
    from fsmlearn.mrf import TaggerMRF
    m = TaggerMRF.init(["A", "B", "C"], ["x", "Yy", "a-b", "z1"], window=window)
    return m.with_vector(np.random.default_rng(seed).normal(size=m.to_vector().size))


@pytest.mark.parametrize("window", [2, 3, 5])
def test_window_tagger_round_trip(tmp_path, window):
    from fsmlearn.mrf import decode, load_tagger, save_tagger
    m = window_tagger(window=window)
    assert m.L == window and np.abs(m.context_U).sum() > 0
    p = tmp_path / "w.npz"
    save_tagger(m, p)
    with np.load(p) as z:
        assert json.loads(z["meta"].tobytes().decode())["offsets"] == list(m.offsets)
        assert z["context_U"].shape == (window - 1, len(m.tags), len(m.features))
    r = load_tagger(p)
    assert r.offsets == m.offsets and r.L == window
    np.testing.assert_array_equal(r.context_U, m.context_U)
    np.testing.assert_array_equal(r.to_vector(), m.to_vector())
    sents = [["x", "Zz", "a-b", "Yy"], ["z1"], ["Qq-r", "x", "x", "Yy", "a-b"]]
    assert decode(r, sents) == decode(m, sents)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["w.npz"]


def test_l1_tagger_saves_offsets_and_no_context(tmp_path):
    from fsmlearn.mrf import load_tagger, save_tagger
    p = tmp_path / "t.npz"
    save_tagger(toy_tagger(), p)
    with np.load(p) as z:
        assert json.loads(z["meta"].tobytes().decode())["offsets"] == [0] and "context_U" not in z.files
    assert load_tagger(p).offsets == (0,)


def test_old_format_tagger_still_loads(tmp_path):
    """A file written before the window (no 'offsets' in the metadata, no context_U) is L = 1."""
    from fsmlearn.mrf import decode, load_tagger
    m = toy_tagger(4)
    a = _arrays(m, _save_tagger)
    d = json.loads(a["meta"].tobytes().decode())
    del d["offsets"]
    assert set(d) == {"format", "version", "num_tags", "order", "vocab_size", "num_features"}
    a["meta"] = np.frombuffer(json.dumps(d).encode(), dtype=np.uint8)
    _write(tmp_path / "old.npz", a)
    r = load_tagger(tmp_path / "old.npz")
    assert r.offsets == (0,) and r.L == 1 and r.context_U.shape == (0, len(r.tags), len(r.features))
    np.testing.assert_array_equal(r.to_vector(), m.to_vector())
    assert decode(r, [["x", "Zz", "Yy"]]) == decode(m, [["x", "Zz", "Yy"]])


@pytest.mark.parametrize("edit, match", [
    (lambda a: a.__setitem__("meta", _meta(a, offsets=[0, 1, 1])),
     r"metadata 'offsets' entry 2 \(1\) repeats an earlier one"),
    (lambda a: a.__setitem__("meta", _meta(a, offsets=[1, 0, -1])), r"metadata 'offsets' entry 0 is 1"),
    (lambda a: a.__setitem__("meta", _meta(a, offsets=[0, 1, 99])), r"metadata 'offsets' entry 2 is 99"),
    (lambda a: a.__setitem__("meta", _meta(a, offsets=[0, 1.0, -1])), r"metadata 'offsets' entry 1 is 1\.0"),
    (lambda a: a.__setitem__("meta", _meta(a, offsets=[0, True, -1])), r"metadata 'offsets' entry 1 is True"),
    (lambda a: a.__setitem__("meta", _meta(a, offsets=[])), r"metadata 'offsets' is \[\]"),
    (lambda a: a.__setitem__("meta", _meta(a, offsets="0,1,-1")), r"metadata 'offsets' is '0,1,-1'"),
    (lambda a: a.__setitem__("meta", _meta(a, offsets=[0, 1])),
     r"array 'context_U': has shape \(2, 4, \d+\); expected \(1, 4, \d+\)"),
    (lambda a: a.__setitem__("context_U", a["context_U"][:, :3]),
     r"array 'context_U': has shape \(2, 3, \d+\); expected \(2, 4, \d+\)"),
    (lambda a: a.__setitem__("context_U", a["context_U"][0]), r"array 'context_U' has dtype float64 and 2 dim"),
    (lambda a: a["context_U"].__setitem__((1, 2, 3), np.nan), r"array 'context_U': entry \[1, 2, 3\] is nan"),
    (lambda a: a["context_U"].__setitem__((0, 0, 0), -np.inf), r"array 'context_U': entry \[0, 0, 0\] is -inf"),
    (lambda a: a.pop("context_U"), r"missing array 'context_U'"),
    (lambda a: a.__setitem__("meta", _meta(a, offsets=[0])), r"array 'context_U': present in an L = 1 tagger"),
])
def test_bad_window_fields_name_the_file_the_field_and_the_value(tmp_path, edit, match):
    from fsmlearn.mrf import load_tagger
    a = _arrays(window_tagger(), _save_tagger)
    edit(a)
    _refused_when_edited(tmp_path, a, load_tagger, match)


VALID_WINDOW_TAGGER = _valid_bytes(_save_tagger, window_tagger(5))


def _check_window_tagger(m):
    _check_tagger(m)
    assert m.offsets[0] == 0 and len(set(m.offsets)) == m.L
    assert m.context_U.shape == (m.L - 1, len(m.tags), len(m.features)) and np.isfinite(m.context_U).all()


@fuzz_settings()
@given(data=mutated(VALID_WINDOW_TAGGER, numbers=False))
def test_fuzz_mrf_window_tagger_files(data):
    """The window fields (metadata 'offsets', array context_U) under the same mutations."""
    from fsmlearn.mrf import load_tagger
    check_reader("MRF window tagger", load_tagger, data, "w.npz", binary=True, check=_check_window_tagger)


_JSON_LEAF = st.none() | st.booleans() | st.integers(-20, 20) | st.floats(allow_nan=False) | st.text(max_size=3)
_JSON = st.recursive(_JSON_LEAF, lambda xs: st.lists(xs, max_size=4), max_leaves=8)


@fuzz_settings()
@given(offsets=st.lists(st.integers(-12, 12), min_size=0, max_size=11) | _JSON
       | st.lists(st.integers(-10, 10).filter(bool), min_size=2, max_size=2, unique=True).map(lambda xs: [0] + xs))
def test_fuzz_window_offsets_metadata(offsets):
    """Any JSON value as the metadata's 'offsets': a located error naming 'offsets' or
    'context_U', or a tagger whose window is that list (distinct, 0 first, in range)."""
    from fsmlearn.mrf import load_tagger
    a = _arrays(window_tagger(6), _save_tagger)
    a["meta"] = _meta(a, offsets=offsets)
    data = _npz_bytes(a)
    m = check_reader("MRF tagger offsets", load_tagger, data, "o.npz", binary=True, check=_check_window_tagger)
    if m is None:
        with tempfile.TemporaryDirectory() as d, \
                pytest.raises(ModelFormatError, match=r"o\.npz.*('offsets'|'context_U')"):
            (Path(d) / "o.npz").write_bytes(data)
            load_tagger(Path(d) / "o.npz")
    else:
        assert list(m.offsets) == offsets and m.L == 3 and max(abs(x) for x in offsets) <= 9


def _npz_bytes(arrays):
    import io
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()
