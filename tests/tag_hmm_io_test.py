"""Saving and loading taggers (fsmlearn.tag.hmm_io): round trips, atomic saves, every
malformed file raising ModelFormatError naming the file."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from fsmlearn.errors import ModelFormatError
from fsmlearn.tag import HMM
from tag_common import random_hmm, supervised, wsj  # noqa: F401 (fixtures)


def test_save_load_round_trip(tmp_path, supervised):
    rng = np.random.default_rng(2)
    for h in (random_hmm(rng, order=2), random_hmm(rng, order=3), supervised[0]):
        p = tmp_path / "m.hmm"
        h.save(p)
        g = HMM.load(p)
        assert (g.tags, g.vocab, g.order) == (h.tags, h.vocab, h.order)
        np.testing.assert_array_equal(g.log_trans, h.log_trans)
        np.testing.assert_array_equal(g.log_emit, h.log_emit)
        if h.order == 3:
            np.testing.assert_array_equal(g.log_trans3, h.log_trans3)
        if h.unknown is not None:
            words = ["Frobnicated", "unbelievably", "1.5-million", "re-election", "zz"]
            np.testing.assert_array_equal(g.unknown_scores(words), h.unknown_scores(words))
            assert g.unknown.theta == h.unknown.theta
        assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_save_is_atomic(tmp_path, monkeypatch):
    rng = np.random.default_rng(4)
    old, new = random_hmm(rng), random_hmm(rng, T=2)
    p = tmp_path / "m.hmm"
    old.save(p)
    before = p.read_bytes()

    def crash(f, **arrays):        # write part of the archive, then fail
        f.write(b"PK\x03\x04 partial data")
        raise OSError("disk full (simulated)")
    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(OSError, match="simulated"):
        new.save(p)
    assert p.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.hmm"]          # no temporary file left
    monkeypatch.undo()
    assert HMM.load(p).T == old.T


def test_load_errors(tmp_path):
    rng = np.random.default_rng(6)
    h = random_hmm(rng)
    good = tmp_path / "good.hmm"
    h.save(good)
    with np.load(good) as z:
        arrays = {k: z[k] for k in z.files}

    def write(name, **changes):
        a = dict(arrays)
        a.update(changes)
        for k in [k for k, v in changes.items() if v is None]:
            del a[k]
        p = tmp_path / name
        with open(p, "wb") as f:
            np.savez(f, **a)
        return p

    cases = [
        (tmp_path / "missing.hmm", "no such file"),
        (write("shape.hmm", log_emit=arrays["log_emit"][:, :-1]), r"array 'log_emit': has shape \(3, 4\); expected \(3, 5\)"),
        (write("trans.hmm", log_trans=arrays["log_trans"][:-1]), r"array 'log_trans': has shape \(3, 4\); expected \(4, 4\)"),
        (write("rows.hmm", log_emit=arrays["log_emit"] + 0.1), "sums to"),
        (write("nan.hmm", log_trans=np.full_like(arrays["log_trans"], np.nan)), "not a log probability"),
        (write("nometa.hmm", meta=None), "no 'meta' array"),
        (write("noemit.hmm", log_emit=None), "missing array 'log_emit'"),
        (write("format.hmm", meta=np.frombuffer(b'{"format": "other", "version": 1}', np.uint8)),
         "not a fsmlearn HMM"),
        (write("version.hmm", meta=np.frombuffer(
            arrays["meta"].tobytes().replace(b'"version": 1', b'"version": 99'), np.uint8)), "version 99"),
        (write("dtype.hmm", log_emit=np.zeros(arrays["log_emit"].shape, np.int64)), "dtype"),
    ]
    corrupt = tmp_path / "corrupt.hmm"
    corrupt.write_bytes(good.read_bytes()[:200])
    cases.append((corrupt, "corrupt"))
    text = tmp_path / "text.hmm"
    text.write_text("not a model\n")
    cases.append((text, "corrupt or not a fsmlearn HMM file"))
    for path, msg in cases:
        with pytest.raises(ModelFormatError, match=msg) as e:
            HMM.load(path)
        assert str(path) in str(e.value)


# ------------------------------------------------- inputs that once broke the reader
# (found by tests/fuzz_models_test.py; kept in tests/data/fuzz/models/)
STORED = Path(__file__).parent / "data" / "fuzz" / "models"


@pytest.mark.parametrize("name, match", [
    # were loaded as models that score unknown words with -inf/NaN arithmetic
    ("hmm-theta-inf.hmm", r"array 'unk_scalars': entry 0 \(theta\) is -inf; must be finite and >= 0"),
    ("hmm-negative-count.hmm", r"array 'unk_count': entry 15 is -1.0; counts must be finite and > 0"),
    # was an OverflowError from int(inf)
    ("hmm-max-suffix-inf.hmm", r"array 'unk_scalars': entry 1 \(max_suffix\) is inf; must be a whole number"),
    # was a RecursionError from json
    ("hmm-deep-json.hmm", r"array 'meta': corrupt metadata: maximum recursion depth"),
])
def test_stored_inputs_raise_located_errors(name, match):
    with pytest.raises(ModelFormatError, match=match) as e:
        HMM.load(STORED / name)
    assert str(STORED / name) in str(e.value)
