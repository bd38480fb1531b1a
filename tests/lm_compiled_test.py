"""The compiled-LM file (mapped, scored at once), per-word scores against KenLM's
``full_scores``, the parallel batch scorer, and located errors on corrupt files."""

from __future__ import annotations

import json
import os
import struct

import kenlm
import numpy as np
import pytest

from conftest import backoff_machine
from lm_model_test import conll_sentences
from fsmlearn.algo.score import PARALLEL_MIN_LABELS, ScoreTables, score_sequences, score_tables
from fsmlearn.errors import ArgumentError, MachineError, ModelFormatError
from fsmlearn.lm.arpa import read_arpa
from fsmlearn.lm.mapfile import MAGIC
from fsmlearn.lm.compiled import LM_FORMAT, CompiledLM
from fsmlearn.lm.model import compile_lm, epsilon_approximation
from fsmlearn.lm.query import kenlm_float, score_words
from fsmlearn.lm.score import load_lm
from fsmlearn.lm.tools import run_lmplz

EXTRA = ["zyzzyva qwerty the", "", "the the the", "unknownword", "<unk> the", "  spaced\tout  words  "]


@pytest.fixture(scope="module")
def sents():
    s = conll_sentences()
    return s[:5000], s[5000:5400] + EXTRA


@pytest.fixture(scope="module", params=[3, 5])
def model(request, sents, tmp_path_factory):
    """(ARPA path, the model compiled in memory, the saved file)."""
    d = tmp_path_factory.mktemp("compiled")
    arpa = d / f"ken{request.param}.arpa"
    run_lmplz(sents[0], request.param, arpa, discount_fallback=True)
    c = compile_lm(read_arpa(arpa))
    path = d / f"ken{request.param}.fsm"
    size = c.save(path)
    assert size == path.stat().st_size
    return arpa, c, path


def test_the_file_is_mapped_and_scores_like_the_compiled_model(model, sents):
    arpa, c, path = model
    lm = CompiledLM.load(path)
    held = sents[1]
    ours, oov = lm.score(held)
    ref, ref_oov = c.score(held)
    assert np.array_equal(ours, ref) and np.array_equal(oov, ref_oov)
    # nothing was read whole: the tables are views of the mapping, the machine and word list not made
    assert not lm.tables.arcs.flags.owndata and not lm.tables.arcs.flags.writeable
    assert lm._machine is None and lm._vocab is None
    k = kenlm.Model(str(arpa))
    full = np.array([sum(p for p, _, _ in k.full_scores(s, bos=True, eos=True)) for s in held])
    assert np.max(np.abs(ours - full)) < 1e-4
    assert lm.order == c.order and lm.num_words == len(c.vocab) and lm.unk_label == c.unk_label
    assert np.array_equal(lm.hist_len, c.hist_len)
    assert lm.word_id("the") == c.word_id("the") >= 0 and lm.word_id("zyzzyva") == -1
    lm.verify()


def test_the_machine_is_rebuilt_exactly(model):
    _, c, path = model
    lm = CompiledLM.load(path)
    a, b = c.machine, lm.machine
    assert a.start == b.start and a.num_states == b.num_states
    for name in ("src_start", "dst", "ilabel", "weight", "final"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert lm.vocab == c.vocab and b.isyms.find("the") == a.isyms.find("the")
    # the machine uses the mapped arc hash (sampling, paths) instead of building one
    from fsmlearn.algo.score import label_hash
    assert label_hash(b)[0] is lm.tables.arcs


def test_released_pages_are_read_again_when_touched(model, sents):
    """release_pages drops the mapping's resident pages (n-gram EM keeps the machine alone);
    the machine, its arcs and scoring still read the same values afterwards."""
    _, c, path = model
    lm = CompiledLM.load(path)
    m = lm.machine
    before = lm.score(sents[1])[0]
    final = m.final.copy()
    assert lm.release_pages() is True
    assert np.array_equal(m.final, final) and np.array_equal(lm.score(sents[1])[0], before)
    assert c.release_pages() is False       # a model made in memory maps nothing


def test_saving_a_loaded_model_and_the_old_format(model, sents, tmp_path):
    _, c, path = model
    lm = CompiledLM.load(path)
    lm.save(tmp_path / "again.fsm")
    assert (tmp_path / "again.fsm").read_bytes() == path.read_bytes()
    c.machine.save(tmp_path / "old.fsm")          # fsmlearn lm compile's output before this format
    old = load_lm(tmp_path / "old.fsm")
    assert old.order == c.order and np.array_equal(old.hist_len, c.hist_len)
    assert np.array_equal(old.score(sents[1])[0], c.score(sents[1])[0])
    # a compiled LM is recognised by its bytes, whatever its name (".lm" is an ARPA suffix)
    os.link(path, tmp_path / "model.lm")
    assert load_lm(tmp_path / "model.lm").path == tmp_path / "model.lm"


@pytest.mark.parametrize("context", [True, False])
def test_per_word_scores_equal_kenlm_full_scores(model, sents, context):
    arpa, c, path = model
    lm = CompiledLM.load(path)
    held = sents[1]
    ws = score_words(lm, ("\n".join(held) + "\n").encode(), sentence_context=context)
    assert ws.num_sentences == len(held)
    k = kenlm.Model(str(arpa))
    worst = 0.0
    for i, s in enumerate(held):
        ref = list(k.full_scores(s, bos=context, eos=context))
        lo, hi = ws.ptr[i], ws.ptr[i + 1]
        assert hi - lo == len(ref)
        for j, (p, n, oov) in enumerate(ref):
            assert ws.ngram_length[lo + j] == n, (s, j)
            assert bool(ws.oov[lo + j]) == oov or s.split()[j] == "<unk>", (s, j)
            assert ws.log10prob32[lo + j] == np.float32(p), (s, j)      # KenLM's float32 arithmetic, exactly
            worst = max(worst, abs(ws.log10prob[lo + j] - p))
    assert worst < 2e-6         # the float64 figures: within KenLM's float32 rounding
    tot, cnt = ws.sentence_totals()
    if context:
        assert np.allclose(tot, lm.score(held)[0], rtol=0, atol=1e-9)
    assert cnt[held.index("<unk> the")] == 1          # a literal <unk> counts as OOV, as in KenLM's query


def test_threads_give_the_same_figures(model, sents):
    _, c, path = model
    lm = CompiledLM.load(path)
    many = sents[0] * 3 + ["", "last"]
    for a, b in zip(lm.encode(many), lm.encode(many, threads=2)):       # parallel encoding (text > 1 MB)
        assert np.array_equal(a, b)
    one, oov1 = lm.score(many, threads=1)
    two, oov2 = lm.score(many, threads=2)
    assert np.array_equal(one, two) and np.array_equal(oov1, oov2)
    text = ("\n".join(sents[0]) + "\n").encode()
    a, b = score_words(lm, text, threads=1), score_words(lm, text, threads=0)
    assert np.array_equal(a.log10prob, b.log10prob) and np.array_equal(a.ngram_length, b.ngram_length)
    assert np.array_equal(a.log10prob32, b.log10prob32)


def test_encode_takes_strings_token_lists_and_iterables_alike(model, sents):
    """The fast path (strings joined as they are) and the careful one (token lists, strings
    ending in a newline) give the same labels; a newline inside a sentence is refused."""
    _, c, path = model
    lm = CompiledLM.load(path)
    many = sents[1][:300] + ["", "last"]
    ref = lm.encode(many)
    for other in (tuple(many), iter(many), [s.split() for s in many], [s + "\n" for s in many],
                  many[:-1] + [many[-1].split()]):
        for a, b in zip(ref, lm.encode(other)):
            assert np.array_equal(a, b)
    for a, b in zip(lm.encode(many * 40, threads=2), lm.encode([s.split() for s in many * 40], threads=2)):
        assert np.array_equal(a, b)
    with pytest.raises(ArgumentError, match="contains a newline"):
        lm.encode(["a b", "c\nd"])
    assert lm.encode([])[0].tolist() == [0] and lm.encode(iter([]))[1].size == 0


def test_score_sequences_on_tables_threads_and_per_word():
    rng = np.random.default_rng(3)
    m = backoff_machine(rng, V=5, order=3)
    S = 8000           # more labels than PARALLEL_MIN_LABELS: the parallel path runs
    lens = rng.integers(0, 9, S)
    ptr = np.zeros(S + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    labels = rng.integers(1, 6, ptr[-1]).astype(np.int32)
    assert labels.size > PARALLEL_MIN_LABELS
    r1 = score_sequences(m, ptr, labels)
    r2 = score_sequences(None, ptr, labels, tables=score_tables(m), threads=2, per_word=True)
    assert np.array_equal(r1.weight, r2.weight) and np.array_equal(r1.failed_at, r2.failed_at)
    ok = np.isfinite(r2.weight)
    sums = np.add.reduceat(r2.word_weight, (ptr + np.arange(S + 1))[:-1])
    assert np.allclose(sums[ok], r2.weight[ok])
    r3 = score_sequences(m, ptr, labels, final=False, per_word=True)
    assert r3.word_weight.size == labels.size and np.all(r3.word_state[np.isfinite(r3.word_weight)] >= 0)


def test_corrupt_tables_raise_a_located_error_not_a_crash():
    rng = np.random.default_rng(4)
    m = backoff_machine(rng, V=4, order=3)
    t = score_tables(m)
    ptr = np.array([0, 3], np.int64)
    labels = np.array([1, 2, 3], np.int32)
    bad = t.arcs.copy()
    used = np.flatnonzero(bad[:, 0] >= 0)
    bad[used, 1] = 10**6
    with pytest.raises(MachineError) as e:
        score_sequences(None, ptr, labels, tables=ScoreTables(t.start, bad, t.mask, t.num_labels, t.back,
                                                              t.back_cost, t.final, t.max_back))
    assert e.value.array == "arcs" and e.value.value == 1e6
    has = t.back >= 0
    loop = np.where(has, np.arange(t.num_states), -1).astype(np.int32)      # each failure arc to itself
    q = int(np.flatnonzero(has)[0])
    with pytest.raises(MachineError, match="cycle") as e:
        score_sequences(None, np.array([0, 3]), np.array([99, 99, 99], np.int32), tables=ScoreTables(
            q, t.arcs, t.mask, t.num_labels, loop, t.back_cost, t.final, t.max_back))
    assert e.value.array == "back" and e.value.index == q
    with pytest.raises(MachineError, match="arcs has shape"):
        ScoreTables(t.start, t.arcs[:3], t.mask, t.num_labels, t.back, t.back_cost, t.final, t.max_back)


def _header(path):
    data = path.read_bytes()
    (H,) = struct.unpack("<Q", data[8:16])
    return data, json.loads(data[16:16 + H]), H


def _rewrite(path, out, head=None, patch=None):
    """A copy of ``path`` with another header (in the space before the first array) or bytes patched."""
    data, h, H = _header(path)
    data = bytearray(data)
    if head is not None:
        new = json.dumps(head, separators=(",", ":")).encode()
        room = min(a["offset"] for a in h["arrays"].values()) - 16
        assert len(new) <= room
        data[8:16] = struct.pack("<Q", room)
        data[16:16 + room] = new + b" " * (room - len(new))
    for off, b in (patch or []):
        data[off:off + len(b)] = b
    out.write_bytes(bytes(data))
    return out


def test_bad_files_are_named_errors(model, tmp_path):
    _, c, path = model
    data, h, H = _header(path)
    arr = h["arrays"]

    def load_err(p, match):
        with pytest.raises(ModelFormatError, match=match) as e:
            CompiledLM.load(p)
        assert str(p) in str(e.value)

    load_err(tmp_path / "absent.fsm", "no such file")
    t = tmp_path / "trunc.fsm"
    t.write_bytes(data[:len(data) // 2])
    load_err(t, "truncated")
    for key, val, match in (("format", "other", "format 'other'"),
                            ("version", 9, r"version 9 \(this fsmlearn reads versions 1 and 2\)")):
        load_err(_rewrite(path, tmp_path / f"{key}.fsm", dict(h, **{key: val})), match)
    h2 = json.loads(json.dumps(h))
    h2["arrays"]["back"]["dtype"] = "<i8"
    load_err(_rewrite(path, tmp_path / "dtype.fsm", h2), "array 'back': has dtype int64; expected int32")
    h2 = json.loads(json.dumps(h))
    h2["meta"]["num_states"] += 1
    load_err(_rewrite(path, tmp_path / "states.fsm", h2), "array 'back': has shape")
    h2 = json.loads(json.dumps(h))
    del h2["arrays"]["final"]
    load_err(_rewrite(path, tmp_path / "missing.fsm", h2), "missing array 'final'")
    h2 = json.loads(json.dumps(h))
    h2["arrays"]["arcs"]["offset"] = len(data) - 64
    load_err(_rewrite(path, tmp_path / "beyond.fsm", h2), "array 'arcs': bytes")
    off = arr["word_offsets"]["offset"]
    load_err(_rewrite(path, tmp_path / "woff.fsm", patch=[(off + 8 * 3, struct.pack("<q", -5))]),
             r"array 'word_offsets': entry 3 is -5")
    off = arr["word_table"]["offset"]
    load_err(_rewrite(path, tmp_path / "wtab.fsm", patch=[(off, struct.pack("<q", 10**9))]),
             r"array 'word_table': entry 0 is 1000000000")
    assert not (tmp_path / "x.fsm").exists() and MAGIC == data[:8] and h["format"] == LM_FORMAT


def _fnv1a_table(words: list[bytes], size: int) -> np.ndarray:
    """The word table of a version-1 file: FNV-1a of each word's bytes, linear probing."""
    table = np.full(size, -1, np.int64)
    for w, b in enumerate(words):
        h = 1469598103934665603
        for c in b:
            h = ((h ^ c) * 1099511628211) % 2**64
        j = h & (size - 1)
        while table[j] >= 0:
            j = (j + 1) & (size - 1)
        table[j] = w
    return table


def test_a_version_1_file_is_read_with_its_word_table_built_again(model, sents, tmp_path):
    """Version 1 hashed the words by FNV-1a; its table is rebuilt at load, and the file scores
    as the version-2 file it was made from."""
    _, c, path = model
    data, h, H = _header(path)
    arr = h["arrays"]
    V, size = h["meta"]["vocab_size"], h["meta"]["word_table_mask"] + 1
    woff = np.frombuffer(data, np.int64, count=V + 1, offset=arr["word_offsets"]["offset"])
    words_at = arr["words"]["offset"]
    words = [data[words_at + int(woff[w]):words_at + int(woff[w + 1])] for w in range(V)]
    table = _fnv1a_table(words, size)
    h1 = dict(h, version=1)
    old = _rewrite(path, tmp_path / "v1.fsm", h1, patch=[(arr["word_table"]["offset"], table.tobytes())])
    assert _header(old)[1]["version"] == 1
    new = CompiledLM.load(path)
    v1 = CompiledLM.load(old)
    lines = sents[1]
    w2, o2 = new.score(lines)
    w1, o1 = v1.score(lines)
    np.testing.assert_array_equal(w1, w2)
    np.testing.assert_array_equal(o1, o2)
    assert all(v1.word_id(x.decode()) == i for i, x in enumerate(words))
    again = tmp_path / "v1-saved.fsm"       # saved by this fsmlearn: version 2, the new table
    v1.save(again)
    assert _header(again)[1]["version"] == 2
    np.testing.assert_array_equal(CompiledLM.load(again).score(lines)[0], w2)


def test_corrupt_values_are_found_where_read_or_by_verify(model, sents, tmp_path):
    _, c, path = model
    data, h, H = _header(path)
    arcs = np.frombuffer(data, np.float64, count=(h["meta"]["hash_mask"] + 1) * 3,
                         offset=h["arrays"]["arcs"]["offset"]).reshape(-1, 3)
    buf = bytearray(data)
    arcs = np.frombuffer(buf, np.float64, count=arcs.size, offset=h["arrays"]["arcs"]["offset"]).reshape(-1, 3)
    arcs[arcs[:, 0] >= 0, 1] = 1e12        # every destination out of range: the first word reads one
    p = tmp_path / "dst.fsm"
    p.write_bytes(bytes(buf))
    lm = CompiledLM.load(p)
    with pytest.raises(ModelFormatError, match=r"array 'arcs' at index \(\d+, 1\): value 1000000000000.0") as e:
        lm.score(sents[1][:3])
    assert str(p) in str(e.value)
    with pytest.raises(ModelFormatError, match="array 'arcs': row"):
        CompiledLM.load(p, verify=True)
    with pytest.raises(ModelFormatError, match="array 'arcs': row"):
        CompiledLM.load(p).machine
    n = h["meta"]["num_states"]
    p = _rewrite(path, tmp_path / "hist.fsm", patch=[(h["arrays"]["hist_len"]["offset"] + n - 1, b"\x7f")])
    with pytest.raises(ModelFormatError, match=f"array 'hist_len': entry {n - 1} is 127"):
        CompiledLM.load(p, verify=True)


def test_save_is_atomic_and_refuses_what_the_format_cannot_hold(model, tmp_path):
    _, c, path = model
    out = tmp_path / "m.fsm"
    out.write_bytes(b"old")
    with pytest.raises(ArgumentError, match="epsilon"):
        epsilon_approximation(c).save(out)
    assert out.read_bytes() == b"old" and os.listdir(tmp_path) == ["m.fsm"]
    c.save(out)
    assert out.read_bytes() == path.read_bytes() and os.listdir(tmp_path) == ["m.fsm"]


def test_kenlm_float_formats_numbers_as_kenlm():
    assert [kenlm_float(x) for x in (0.0, -1.0, -0.3659708, -99.0, -1.5e-7, -2.5e-6, 1e21, -12.5)] == \
        ["0", "-1", "-0.3659708", "-99", "-1.5e-7", "-0.0000025", "1e21", "-12.5"]
    assert kenlm_float(4.463928416632886, single=False) == "4.463928416632886"


@pytest.mark.parametrize("array,value,match", [
    ("arcs", float("nan"), r"array 'arcs': row \d+: cost nan is not a -ln probability"),
    ("arcs", -1.0, r"array 'arcs': row \d+: cost -1.0 is not a -ln probability"),
    ("final", float("nan"), r"array 'final': entry \d+ is nan"),
    ("back_cost", float("inf"), r"array 'back_cost': entry \d+ is inf"),
])
def test_verify_checks_the_weights(model, tmp_path, array, value, match):
    """NaN, negative or infinite costs where a -ln probability or weight must be: verify names
    the array and entry (they would otherwise turn into NaN or wrong scores silently)."""
    _, c, path = model
    data, h, H = _header(path)
    buf = bytearray(data)
    off = h["arrays"][array]["offset"]
    if array == "arcs":
        a = np.frombuffer(buf, np.float64, count=(h["meta"]["hash_mask"] + 1) * 3, offset=off).reshape(-1, 3)
        a[np.flatnonzero(a[:, 0] >= 0)[0], 2] = value
    else:
        n = h["meta"]["num_states"]
        a = np.frombuffer(buf, np.float64, count=n, offset=off)
        back = np.frombuffer(buf, np.int32, count=n, offset=h["arrays"]["back"]["offset"])
        a[int(np.flatnonzero(back >= 0)[0])] = value
    p = tmp_path / "w.fsm"
    p.write_bytes(bytes(buf))
    with pytest.raises(ModelFormatError, match=match) as e:
        CompiledLM.load(p, verify=True)
    assert str(p) in str(e.value)
