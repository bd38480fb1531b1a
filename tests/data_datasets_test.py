"""Layer 1 (data/): the named datasets and splits, streamed from the shared corpora.

Real-data tests read the shared corpora (``$FSMLEARN_DATA`` or ``../shared/data``);
each named dataset is streamed once per module (fixtures below) to keep the file
well under a minute.
"""

from __future__ import annotations

import time
import types
import zipfile
import pytest

from fsmlearn import data as C
from fsmlearn.errors import DatasetError, FsmError

# Token counts measured on the shared data (NLTK data commit 5db857e, UD EWT 15d613d).
COUNTS = {
    ("wsj-small", None): (1927, 46461),
    ("wsj-train", None): (12967, 306843),
    ("mixed-text", None): (243516, 4749234),
    ("brown-lm", "train"): (42017, 921394),
    ("brown-lm", "valid"): (8051, 119418),
    ("brown-lm", "test"): (7272, 120380),
}
# The README's figures and how close we must be.
README = {
    ("wsj-train", None): (310_000, 0.03),
    ("mixed-text", None): (4_500_000, 0.06),   # README counts raw text by whitespace
    ("brown-lm", "train"): (921_000, 0.01),
    ("brown-lm", "valid"): (119_000, 0.01),
    ("brown-lm", "test"): (120_000, 0.01),
}
NGRAM = 10


def _ngrams(words, n=NGRAM):
    return {tuple(words[k:k + n]) for k in range(len(words) - n + 1)}


@pytest.fixture(scope="module")
def wsj_small_grams():
    """WSJ-small's 10-grams, per Treebank file."""
    return {fid: set().union(*(_ngrams([w for w, _ in s]) for s in C.iter_treebank([fid])))
            for _, fid in C.dataset_fileids("wsj-small")}


@pytest.fixture(scope="module")
def stats(wsj_small_grams):
    """Stream every named dataset once: sentence and token counts, time, overlaps."""
    all_grams = set().union(*wsj_small_grams.values())
    out = {}
    for key in COUNTS:
        t0 = time.perf_counter()
        n_sent = n_tok = 0
        shared = set()
        first = None
        for sent in C.iter_sentences(*key):
            n_sent += 1
            n_tok += len(sent)
            if first is None:
                first = sent
            if key[0] == "mixed-text":
                shared |= _ngrams(sent) & all_grams
        out[key] = dict(sentences=n_sent, tokens=n_tok, seconds=time.perf_counter() - t0,
                        shared=shared, first=first)
    return out


@pytest.mark.parametrize("key", list(COUNTS))
def test_dataset_counts_are_the_measured_ones(stats, key):
    assert (stats[key]["sentences"], stats[key]["tokens"]) == COUNTS[key]


@pytest.mark.parametrize("key", list(README))
def test_dataset_counts_match_the_readme(stats, key):
    target, tol = README[key]
    assert abs(stats[key]["tokens"] - target) <= tol * target, stats[key]["tokens"]


def test_brown_lm_token_counts_are_exactly_the_file_ranges():
    # The README's 921k / 119k / 120k: every whitespace token of the file ranges.
    ids = C.fileids("brown")
    assert len(ids) == 500 and ids[0] == "ca01" and ids[399] == "ck26"
    assert ids[400] == "ck27" and ids[449] == "cn17" and ids[450] == "cn18" and ids[-1] == "cr09"
    parts = {s: [f for _, f in C.dataset_fileids("brown-lm", s)] for s in ("train", "valid", "test")}
    assert parts["train"] == ids[:400] and parts["valid"] == ids[400:450] and parts["test"] == ids[450:]


def test_mixed_text_streams_fast(stats):
    # 4.7M tokens; about 5 s on the development machine, far below a minute.
    assert stats[("mixed-text", None)]["seconds"] < 60


def test_iter_sentences_streams():
    it = C.iter_sentences("mixed-text")
    assert isinstance(it, types.GeneratorType)
    first = next(it)
    assert first and all(isinstance(w, str) for w in first)
    it.close()


def test_wsj_datasets_are_tagged_with_the_45_penn_tags(stats):
    from fsmlearn.data.tagsets import PENN_TAGS
    tags = {t for key in [("wsj-small", None), ("wsj-train", None)]
            for s in C.iter_sentences(*key) for _, t in s}
    assert tags == set(PENN_TAGS)
    assert stats[("wsj-small", None)]["first"][:3] == [("Pierre", "NNP"), ("Vinken", "NNP"), (",", ",")]
    assert stats[("wsj-train", None)]["first"][:2] == [("Confidence", "NN"), ("in", "IN")]


def test_wsj_small_and_mixed_text_are_disjoint(stats, wsj_small_grams):
    small = set(C.dataset_fileids("wsj-small"))
    mixed = C.dataset_fileids("mixed-text")
    assert small and not small & set(mixed)
    assert all(f"wsj_{i:04d}" not in (fid or "") for _, fid in mixed for i in range(1, 100))
    # Content: WSJ repeats boilerplate ("The Wall Street Journal will report events of the
    # past century ..."), so a few 10-grams recur, but no WSJ-small file is in Mixed-text.
    # (MASC's copies of wsj_0006 ... wsj_0073 would share 80-100% of their 10-grams.)
    shared = stats[("mixed-text", None)]["shared"]
    for fid, grams in wsj_small_grams.items():
        if len(grams) >= 20:
            assert len(grams & shared) <= 0.25 * len(grams), fid
    total = set().union(*wsj_small_grams.values())
    assert len(shared) < 0.005 * len(total)


def test_mixed_text_includes_every_text_corpus_but_cmudict():
    corpora = {c for c, _ in C.dataset_fileids("mixed-text")}
    assert corpora == set(C.CORPORA) - {"cmudict"}
    treebank = [f for c, f in C.dataset_fileids("mixed-text") if c == "treebank"]
    assert treebank == [f"tagged/wsj_{i:04d}.pos" for i in range(100, 200)]


def test_brown_lm_vocabulary_and_unk(stats):
    vocab = C.brown_lm_vocabulary()
    assert len(vocab) == C.BROWN_LM_VOCAB_SIZE == len(set(vocab))
    assert vocab[:3] == ["the", ",", "."] and C.UNK not in vocab
    allowed = set(vocab) | {C.UNK}
    for split in ("train", "valid", "test"):
        sents = C.iter_sentences("brown-lm", split)
        for s in sents:
            assert set(s) <= allowed
            assert all(w == w.lower() for w in s)
    assert stats[("brown-lm", "train")]["first"][:3] == ["the", "fulton", "county"]


def test_load_dataset_and_token_count_agree(stats):
    sents = C.load_dataset("brown-lm", "valid")
    assert isinstance(sents, list) and len(sents) == stats[("brown-lm", "valid")]["sentences"]
    assert C.token_count("wsj-small") == stats[("wsj-small", None)]["tokens"]


@pytest.mark.parametrize("name,split", [("nope", None), ("brown-lm", None), ("brown-lm", "dev"),
                                        ("wsj-small", "train")])
def test_bad_dataset_or_split(name, split):
    with pytest.raises(ValueError, match=repr(name) if name == "nope" else "split"):
        next(C.iter_sentences(name, split))


def test_unknown_dataset_raises_a_dataset_error_naming_it():
    with pytest.raises(DatasetError, match="unknown dataset 'bogus'") as excinfo:
        next(C.iter_sentences("bogus"))
    assert isinstance(excinfo.value, FsmError) and isinstance(excinfo.value, ValueError)
    with pytest.raises(DatasetError, match="'dev'"):
        C.dataset_fileids("brown-lm", "dev")


def test_brown_lm_needs_the_500_brown_files(tmp_path):
    (tmp_path / "corpora").mkdir()
    with zipfile.ZipFile(tmp_path / "corpora" / "brown.zip", "w") as zf:
        zf.writestr("brown/ca01", b"a/at\n")
    with pytest.raises(DatasetError, match="brown-lm needs the 500"):
        C.dataset_fileids("brown-lm", "train", data_dir=tmp_path)
