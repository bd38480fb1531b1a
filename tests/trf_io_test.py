"""Saving and loading TRF models (fsmlearn.trf.io): round trips, hand-edited, truncated and
foreign files, failed saves, models the saver refuses, and the fuzz harness of the readers
(tests/fuzz.py) on byte-level and array-level mutations."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzz import check_reader, fuzz_settings, mutated
from fsmlearn.errors import ArgumentError, ModelError, ModelFormatError
from fsmlearn.trf.features import as_corpus, build_features, make_templates
from fsmlearn.trf.io import load_trf, save_trf
from fsmlearn.trf.model import TRF

VOCAB = ["the", "cat", "sat"]


def toy(long=True, types="w+c", order=3, m=4, seed=0, meta=None):
    """A small TRF over 3 tokens in 2 classes (pi and zeta of length m+2 with long, else m+1)."""
    fs = build_features(as_corpus([[0, 1, 2], [2, 1]]), 3, make_templates(types, order),
                        classes=np.array([0, 1, 1]))
    rng = np.random.default_rng(seed)
    G = m + (1 if long else 0)
    pi = np.r_[0.0, rng.random(G) + 0.1]
    pi /= pi.sum()
    zeta = np.r_[0.0, 0.0, rng.normal(size=G - 1)]
    return TRF(fs, rng.normal(size=fs.num_features), m, long, pi, zeta,
               {"training": {"rate": 0.5, "types": types}, "iterations_run": 7} if meta is None else meta)


def random_sentences(rng, n=40, V=3, longest=7):
    return as_corpus([rng.integers(0, V, rng.integers(1, longest + 1)) for _ in range(n)])


# ------------------------------------------------------------------ round trips
@pytest.mark.parametrize("make, vocab", [
    (lambda: toy(long=True), VOCAB),
    (lambda: toy(long=False, m=7), None),
    (lambda: toy(types="w+c+ws+cs+wsh+csh+cpw+tied", order=2, m=3), ["a", "b", "ö"]),
    (lambda: toy(types="cpw+ws", order=4, meta={}), None),
])
def test_round_trip(tmp_path, make, vocab):
    model = make()
    p = tmp_path / "model.trf.npz"
    save_trf(model, p, vocab)
    got, words = load_trf(p)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["model.trf.npz"]       # no temporary left
    fs, ref = got.features, model.features
    assert words == vocab
    assert got.m == model.m and got.long == model.long and got.meta == model.meta
    assert fs.vocab_size == ref.vocab_size and fs.n_classes == ref.n_classes
    assert fs.templates.names == ref.templates.names and fs.templates.label == ref.templates.label
    for k in ("tid", "length", "offset", "kind"):
        np.testing.assert_array_equal(getattr(fs.templates, k), getattr(ref.templates, k))
    np.testing.assert_array_equal(fs.classes, ref.classes)
    np.testing.assert_array_equal(fs.keys, ref.keys)
    np.testing.assert_array_equal(got.lam, model.lam)
    np.testing.assert_array_equal(got.pi, model.pi)
    np.testing.assert_array_equal(got.zeta, model.zeta)
    np.testing.assert_array_equal(fs.lookup(ref.keys), np.arange(ref.num_features))
    sents = random_sentences(np.random.default_rng(1), longest=model.m + (3 if model.long else 0))
    np.testing.assert_array_equal(fs.scores(sents, got.lam), ref.scores(sents, model.lam))
    np.testing.assert_array_equal(got.log_probs(sents), model.log_probs(sents))


def test_saving_over_a_model_replaces_it(tmp_path):
    p = tmp_path / "m.npz"
    save_trf(toy(seed=0), p)
    save_trf(toy(seed=5), p, VOCAB)
    got, words = load_trf(p)
    np.testing.assert_array_equal(got.lam, toy(seed=5).lam)
    assert words == VOCAB


# ------------------------------------------------------------------ hand-edited files
def _arrays(model=None, vocab=VOCAB):
    with tempfile.TemporaryDirectory() as d:
        save_trf(model or toy(), Path(d) / "m.npz", vocab)
        with np.load(Path(d) / "m.npz") as z:
            return {k: z[k].copy() for k in z.files}


def _write(path, arrays):
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _meta(a, **changes):
    d = json.loads(a["meta"].tobytes().decode())
    d.update(changes)
    for k in [k for k, v in changes.items() if v is ...]:
        del d[k]
    a["meta"] = np.frombuffer(json.dumps(d).encode(), dtype=np.uint8)


def _set(name, i, value):
    def edit(a):
        a[name][i] = value
    return edit


def _key(a, i, slot=None, value=None, tid=None):
    """Key i with one slot (or the template id) replaced."""
    k = int(a["keys"][i])
    if tid is not None:
        k = (k & ((1 << 56) - 1)) | (tid << 56)
    if slot is not None:
        shift = 14 * (3 - slot)
        k = (k & ~(((1 << 14) - 1) << shift)) | (value << shift)
    return k


def _first_key(a, label_len):
    """Index of the first key whose template has ``label_len`` used slots (w+c order 3: template
    ids 0-2 are w n-grams of lengths 1-3, 3-5 c n-grams)."""
    tid = a["keys"] >> 56
    return int(np.flatnonzero(tid == label_len - 1)[0])


def _edit_key(which):
    def edit(a):
        keys = a["keys"].copy()
        i = _first_key(a, 2)
        if which == "word":
            keys[i] = _key(a, i, slot=1, value=5)            # V + 2 = 5: one past </s>
        elif which == "class":
            j = int(np.flatnonzero((a["keys"] >> 56) == 3)[0])   # c unigram
            keys[j] = _key(a, j, slot=0, value=4)            # C + 2 = 4
        elif which == "unused":
            keys[i] = _key(a, i, slot=3, value=1)
        elif which == "tid":
            keys[-1] = _key(a, len(keys) - 1, tid=6)         # templates have ids 0..5
        elif which == "negative":
            keys[0] = -1
        a["keys"] = np.sort(keys) if which != "negative" else keys
    return edit


EDITS = [
    # lambda
    (_set("lam", 17, np.nan), r"array 'lam' entry 17: nan is not finite"),
    (_set("lam", 3, -np.inf), r"array 'lam' entry 3: -inf is not finite"),
    (lambda a: a.__setitem__("lam", a["lam"][:-1]), r"array 'lam' has shape \(\d+,\); expected"),
    (lambda a: a.__setitem__("lam", a["lam"].astype(np.float32)), r"array 'lam' has dtype float32"),
    (lambda a: a.__setitem__("lam", a["lam"].reshape(1, -1)), r"array 'lam' has dtype float64 and 2 dim"),
    # keys
    (lambda a: a.__setitem__("keys", a["keys"][::-1].copy()), r"array 'keys' entry 1: \d+ is not above entry 0"),
    (_set("keys", 4, 0), r"array 'keys' entry \d+: .*not above"),
    (lambda a: a["keys"].__setitem__(5, a["keys"][4]), r"array 'keys' entry 5: \d+ is not above entry 4"),
    (_edit_key("word"), r"array 'keys' entry \d+: key \d+ \(template w-1w0\): slot 1 holds word id 5; "
                        r"expected 0..4"),
    (_edit_key("class"), r"array 'keys' entry \d+: key \d+ \(template c0\): slot 0 holds class id 4; "
                         r"expected 0..3"),
    (_edit_key("unused"), r"array 'keys' entry \d+: key \d+ \(template w-1w0\): unused slot 3 holds 1"),
    (_edit_key("tid"), r"array 'keys' entry \d+: key \d+ has template id 6, not one of"),
    (_edit_key("negative"), r"array 'keys' entry 0: key -1 has template id -1"),
    (lambda a: a.__setitem__("keys", a["keys"].astype(np.int32)), r"array 'keys' has dtype int32"),
    # classes
    (_set("classes", 1, 2), r"array 'classes' entry 1: class 2 is outside 0..1"),
    (_set("classes", 0, -1), r"array 'classes' entry 0: class -1 is outside"),
    (_set("classes", 3, 3), r"array 'classes' entry 3: class 3 of <s>; expected 2"),
    (_set("classes", 4, 0), r"array 'classes' entry 4: class 0 of </s>; expected 3"),
    (lambda a: a.__setitem__("classes", a["classes"][:-1]), r"array 'classes' has shape \(4,\); expected \(5,\)"),
    (lambda a: a.__setitem__("classes", a["classes"].astype(np.int64)), r"array 'classes' has dtype int64"),
    # pi
    (_set("pi", 2, -0.1), r"array 'pi' entry 2: -0.1 is negative"),
    (_set("pi", 1, np.nan), r"array 'pi' entry 1: nan is not finite"),
    (lambda a: a.__setitem__("pi", np.r_[0.1, a["pi"][1:] * 0.9]), r"array 'pi' entry 0: 0.1; expected 0"),
    (lambda a: a["pi"].__setitem__(1, a["pi"][1] + 1e-6), r"array 'pi': entries sum to 1.000001"),
    (lambda a: a.__setitem__("pi", np.r_[a["pi"], 0.0]), r"array 'pi' has shape \(7,\); expected \(6,\)"),
    # zeta
    (_set("zeta", 1, 0.5), r"array 'zeta' entry 1: 0.5; expected 0"),
    (_set("zeta", 4, np.inf), r"array 'zeta' entry 4: inf is not finite"),
    (lambda a: a.__setitem__("zeta", a["zeta"][:-1]), r"array 'zeta' has shape \(5,\); expected \(6,\)"),
    # the vocabulary
    (lambda a: a.update(zip(("vocab_blob", "vocab_offsets"), _packed(["x", "y"]))),
     r"array 'vocab_offsets': holds 2 words; expected vocab_size 3"),
    (lambda a: a.update(zip(("vocab_blob", "vocab_offsets"), _packed(["x", "y", "x"]))),
     r"array 'vocab_blob' entry 2: word 'x' repeats entry 0"),
    (lambda a: a.pop("vocab_offsets"), r"missing array 'vocab_offsets'"),
    (lambda a: a["vocab_offsets"].__setitem__(1, 99), r"array 'vocab_offsets'"),
    # arrays missing or unexpected
    (lambda a: a.pop("zeta"), r"missing array 'zeta'"),
    (lambda a: a.pop("keys"), r"missing array 'keys'"),
    (lambda a: a.__setitem__("extra", np.zeros(2)), r"unexpected array 'extra'"),
    # metadata
    (lambda a: a.pop("meta"), r"no 'meta' array"),
    (lambda a: _meta(a, format="fsmlearn-mrf"), r"format 'fsmlearn-mrf'"),
    (lambda a: _meta(a, version=2), r"version 2"),
    (lambda a: _meta(a, types=["w", "q"]), r"metadata 'types' is \['w', 'q'\]"),
    (lambda a: _meta(a, types=["w", "w"]), r"metadata 'types' is \['w', 'w'\]"),
    (lambda a: _meta(a, types="w+c"), r"metadata 'types' is 'w\+c'"),
    (lambda a: _meta(a, order=5), r"metadata 'order' is 5"),
    (lambda a: _meta(a, order=2), r"array 'keys' entry \d+: key \d+ has template id"),
    (lambda a: _meta(a, vocab_size="3"), r"metadata 'vocab_size' is '3'"),
    (lambda a: _meta(a, vocab_size=4), r"array 'classes' has shape \(5,\); expected \(6,\)"),
    (lambda a: _meta(a, n_classes=0), r"metadata 'n_classes' is 0"),
    (lambda a: _meta(a, n_classes=3), r"array 'classes' entry 3: class 2 of <s>; expected 3"),
    (lambda a: _meta(a, num_features=-1), r"metadata 'num_features' is -1"),
    (lambda a: _meta(a, num_features=5), r"array 'keys' has shape \(\d+,\); expected \(5,\)"),
    (lambda a: _meta(a, m=0), r"metadata 'm' is 0"),
    (lambda a: _meta(a, m=True), r"metadata 'm' is True"),
    (lambda a: _meta(a, long=1), r"metadata 'long' is 1"),
    (lambda a: _meta(a, long=False), r"array 'pi' has shape \(6,\); expected \(5,\)"),
    (lambda a: _meta(a, model_meta=[1]), r"metadata 'model_meta' is \[1\]"),
    (lambda a: _meta(a, order=...), r"metadata 'order' is None"),
    (lambda a: a.__setitem__("meta", np.frombuffer(b"{not json", np.uint8)), r"array 'meta': corrupt metadata"),
]


def _packed(words):
    from fsmlearn.fsm.strings import pack_strings
    return pack_strings(words)


@pytest.mark.parametrize("edit, match", EDITS)
def test_hand_edited_files_name_the_file_the_array_and_the_value(tmp_path, edit, match):
    a = _arrays()
    assert len(a["lam"]) > 17 and len(a["pi"]) == 6             # the edits' indices exist
    edit(a)
    p = tmp_path / "edited.trf.npz"
    _write(p, a)
    with pytest.raises(ModelFormatError, match=match) as e:
        load_trf(p)
    assert str(e.value).startswith(f"{p}: ")


def test_the_unedited_arrays_load(tmp_path):
    """The edits above start from arrays that load as they are (each test's error is its edit's)."""
    p = tmp_path / "plain.npz"
    _write(p, _arrays())
    model, words = load_trf(p)
    assert words == VOCAB and model.features.num_features == toy().features.num_features


# ------------------------------------------------------------------ truncated and foreign files
def test_truncated_foreign_and_missing_files(tmp_path):
    p = tmp_path / "m.npz"
    save_trf(toy(), p, VOCAB)
    data = p.read_bytes()
    cuts = sorted({0, 1, 4, 30, 100, len(data) // 3, len(data) // 2, len(data) - 100, len(data) - 22,
                   len(data) - 1})
    for cut in cuts:
        q = tmp_path / f"cut{cut}.npz"
        q.write_bytes(data[:cut])
        with pytest.raises(ModelFormatError, match=f"cut{cut}.npz: "):
            load_trf(q)
    q = tmp_path / "text.npz"
    q.write_text("w c 0.5\n")
    with pytest.raises(ModelFormatError, match="text.npz: corrupt or not a fsmlearn TRF model file"):
        load_trf(q)
    q = tmp_path / "machine.npz"
    np.savez(q, meta=np.frombuffer(json.dumps({"format": "fsmlearn-fsm", "version": 1}).encode(), np.uint8))
    with pytest.raises(ModelFormatError, match=r"machine.npz: not a fsmlearn TRF model \(format 'fsmlearn-fsm'"):
        load_trf(q)
    with pytest.raises(ModelFormatError, match="absent.npz: no such file"):
        load_trf(tmp_path / "absent.npz")


# ------------------------------------------------------------------ failed saves
def test_a_save_failing_mid_way_leaves_no_file_and_no_temporary(tmp_path, monkeypatch):
    real = np.savez

    def half(f, **arrays):          # write part of the archive, then fail
        real(f, **{k: arrays[k] for k in list(arrays)[:2]})
        raise OSError("disk full")
    monkeypatch.setattr(np, "savez", half)
    with pytest.raises(OSError, match="disk full"):
        save_trf(toy(), tmp_path / "m.npz", VOCAB)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_save_leaves_the_old_file(tmp_path, monkeypatch):
    p = tmp_path / "m.npz"
    save_trf(toy(seed=3), p)
    before = p.read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(np, "savez", boom)
    with pytest.raises(OSError):
        save_trf(toy(seed=4), p, VOCAB)
    assert p.read_bytes() == before and sorted(x.name for x in tmp_path.iterdir()) == ["m.npz"]


def test_a_save_failing_at_the_rename_leaves_no_temporary(tmp_path):
    """The archive is written whole, then cannot replace the target (a folder): the
    temporary file goes and the folder stays as it was."""
    (tmp_path / "m.npz").mkdir()
    with pytest.raises(OSError):
        save_trf(toy(), tmp_path / "m.npz", VOCAB)
    assert [x.name for x in tmp_path.iterdir()] == ["m.npz"] and list((tmp_path / "m.npz").iterdir()) == []


def _bad(model, **changes):
    for k, v in changes.items():
        setattr(model, k, v)
    return model


@pytest.mark.parametrize("make, vocab, err, match", [
    (lambda: _bad(toy(), lam=np.r_[np.nan, toy().lam[1:]]), None, ModelError,
     r"array 'lam' entry 0: nan is not finite"),
    (lambda: _bad(toy(), lam=toy().lam[:-1]), None, ModelError, r"array 'lam' has shape"),
    (lambda: _bad(toy(), pi=toy().pi * 2), None, ModelError, r"array 'pi': entries sum to"),
    (lambda: _bad(toy(), zeta=toy().zeta + 1), None, ModelError, r"array 'zeta' entry 1: 1.0; expected 0"),
    (lambda: _bad(toy(), m=3), None, ModelError, r"array 'pi' has shape \(6,\); expected \(5,\)"),
    (lambda: _bad(toy(), m=np.int64(0)), None, ModelError, r"metadata 'm' is 0"),
    (lambda: _bad(toy(), meta={"x": object()}), None, ArgumentError, r"model.meta is not JSON"),
    (lambda: _bad(toy(), meta=[1]), None, ArgumentError, r"model.meta must be a dict"),
    (lambda: toy(), ["a", "b"], ArgumentError, r"vocab has 2 entries; the model's vocabulary size is 3"),
    (lambda: toy(), ["a", "b", "a"], ArgumentError, r"vocab entry 2 \('a'\) repeats entry 0"),
    (lambda: toy(), ["a", "b", 3], ArgumentError, r"vocab entry 2 is 3; expected a string"),
    (lambda: toy(), "abc", ArgumentError, r"not one string"),
    (lambda: "not a model", None, ArgumentError, r"expected a TRF model, got str"),
])
def test_models_the_loader_would_refuse_are_not_saved(tmp_path, make, vocab, err, match):
    with pytest.raises(err, match=match):
        save_trf(make(), tmp_path / "m.npz", vocab)
    assert list(tmp_path.iterdir()) == []


def test_keys_out_of_order_and_templates_not_from_make_templates_are_not_saved(tmp_path):
    from dataclasses import replace
    m = toy()
    m.features.keys = m.features.keys[::-1].copy()
    with pytest.raises(ModelError, match=r"array 'keys' entry 1: .* not above entry 0"):
        save_trf(m, tmp_path / "m.npz")
    m = toy()
    t = m.features.templates
    m.features.templates = replace(t, offset=t.offset + 0)     # equal: still saved
    save_trf(m, tmp_path / "ok.npz")
    m.features.templates = replace(t, length=t.length[:-1])
    with pytest.raises(ArgumentError, match=r"templates \(w\+c\) are not ones make_templates creates"):
        save_trf(m, tmp_path / "m.npz")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["ok.npz"]


# ------------------------------------------------------------------ fuzzing
def _valid_bytes():
    with tempfile.TemporaryDirectory() as d:
        save_trf(toy(m=3), Path(d) / "m.npz", VOCAB)
        return (Path(d) / "m.npz").read_bytes()


VALID = _valid_bytes()
SENTENCES = random_sentences(np.random.default_rng(7), n=20, longest=6)


def _check(result):
    """A loaded model is usable: finite parameters, normalised pi, finite log-probabilities."""
    model, words = result
    fs = model.features
    assert np.isfinite(model.lam).all() and np.isfinite(model.zeta).all() and model.zeta[1] == 0
    assert (model.pi >= 0).all() and abs(model.pi.sum() - 1) <= 1e-9 and model.pi[0] == 0
    assert np.all(np.diff(fs.keys) > 0) and len(model.lam) == fs.num_features
    assert fs.classes.shape == (fs.vocab_size + 2,)
    np.testing.assert_array_equal(fs.lookup(fs.keys), np.arange(fs.num_features))
    assert np.isfinite(fs.scores(SENTENCES, model.lam)).all()
    assert words is None or (len(words) == fs.vocab_size and len(set(words)) == len(words))


@fuzz_settings()
@given(data=mutated(VALID, numbers=False))
def test_fuzz_trf_files(data):
    """Byte flips, truncations, random bytes: a located error (file named), or a usable model."""
    check_reader("TRF model", load_trf, data, "m.trf.npz", binary=True, check=_check)


ARRAY_VALUES = [np.nan, np.inf, -np.inf, -1, 0, 1, 2, 3, 4, 5, 1e300, -(2**62), 2**62, 2**31 - 1, 16383,
                1 << 56, 6 << 56, 0.5]


@st.composite
def edited_arrays(draw):
    """The valid file's arrays with one or two entries (or the metadata) replaced."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.npz"
        p.write_bytes(VALID)
        with np.load(p) as z:
            a = {k: z[k].copy() for k in z.files}
    for _ in range(draw(st.integers(1, 2))):
        name = draw(st.sampled_from(["classes", "keys", "lam", "pi", "zeta", "vocab_offsets", "meta"]))
        if name == "meta":
            key = draw(st.sampled_from(["types", "order", "vocab_size", "n_classes", "num_features", "m",
                                        "long", "model_meta"]))
            value = draw(st.sampled_from([None, 0, 1, 2, 3, 4, 5, -1, True, "w", ["w"], ["c", "w"], {}, 1.5]))
            _meta(a, **{key: value})
            continue
        arr = a[name]
        i = draw(st.integers(0, len(arr) - 1))
        v = draw(st.sampled_from(ARRAY_VALUES))
        try:
            with np.errstate(all="ignore"):
                arr[i] = v
        except (OverflowError, ValueError):
            pass
    return a


@fuzz_settings()
@given(arrays=edited_arrays())
def test_fuzz_trf_arrays(arrays):
    """Values set in the arrays and metadata (saved again by numpy): a located error naming
    the file, or a usable model."""
    import io
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    check_reader("TRF model (arrays)", load_trf, buf.getvalue(), "m.trf.npz", binary=True, check=_check)
