"""Layer 5: corpus readers, named datasets, tokeniser, malformed input.

Real-data tests read the shared corpora (``$FSMLEARN_DATA`` or ``../shared/data``);
each named dataset is streamed once per module (fixtures below) to keep the file
well under a minute.  Error tests write small synthetic archives in a tmp dir.
"""

from __future__ import annotations

import gzip
import time
import types
import zipfile
import pytest

from fsmlearn.data import corpora as C
from fsmlearn.errors import CorpusFormatError

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


# --------------------------------------------------------------------------- named datasets

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


# --------------------------------------------------------------------------- readers on real data

def test_data_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv("FSMLEARN_DATA", raising=False)
    default = C.data_dir()
    import fsmlearn
    assert default == type(tmp_path)(fsmlearn.__file__).resolve().parents[2] / "shared" / "data"
    monkeypatch.setenv("FSMLEARN_DATA", str(tmp_path))
    assert C.data_dir() == tmp_path
    assert C.data_dir("/x/y") == type(tmp_path)("/x/y")
    with pytest.raises(FileNotFoundError, match="FSMLEARN_DATA"):
        C.corpus_path("treebank")
    with pytest.raises(ValueError, match="unknown corpus"):
        C.corpus_path("penn")


def test_fileids():
    assert len(C.fileids("treebank")) == 199
    assert C.fileids("conll2000") == ["test.txt", "train.txt"]
    assert len(C.fileids("masc_tagged")) == 392
    assert C.fileids("abc") == ["rural.txt", "science.txt"]
    assert len(C.fileids("movie_reviews")) == 2000
    assert len(C.fileids("webtext")) == 6


def test_treebank_reader_real():
    sents = list(C.iter_treebank(["tagged/wsj_0001.pos"]))
    assert [len(s) for s in sents] == [18, 13]
    assert sents[1][-2:] == [("group", "NN"), (".", ".")]
    all_sents = list(C.iter_treebank())
    assert len(all_sents) == 3946 and sum(map(len, all_sents)) == 94200
    words = {w for s in all_sents for w, _ in s}
    assert "1/2" in words and "1\\/2" not in words
    assert not {"[", "]"} & {t for s in all_sents for _, t in s}
    # the quote closing a sentence is not left at the start of the next one
    assert not any(s[0][1] == "''" for s in all_sents)
    raw = {t for s in C.iter_treebank(normalize=False) for _, t in s}
    assert {"(", ")", "VBG|NN"} <= raw


def test_conll2000_reader_real():
    first = next(C.iter_conll2000(["train.txt"], chunks=True))
    assert first[:2] == [("Confidence", "NN", "B-NP"), ("in", "IN", "B-PP")]
    test = list(C.iter_conll2000(["test.txt"]))
    assert len(test) == 2012 and sum(map(len, test)) == 47377
    words = {w for s in test for w, _ in s}
    assert "(" in words and "-LRB-" not in words
    raw = {w for s in C.iter_conll2000(["test.txt"], normalize=False) for w, _ in s}
    assert "-LRB-" in raw


def test_masc_reader_real():
    sents = list(C.iter_masc(["written/wsj_0187.txt"]))
    assert sents[0][:2] == [("The", "DT"), ("Finnish", "JJ")]
    for s in C.iter_masc(["spoken/3rd_Bush-Kerry.txt"]):
        assert all(w and not any(c.isspace() for c in w) for w, _ in s)


def test_brown_and_conllu_readers_real():
    first = next(C.iter_brown(["ca01"]))
    assert first[:3] == [("The", "at"), ("Fulton", "np-tl"), ("County", "nn-tl")]
    ud = list(C.iter_conllu())
    assert len(ud) == 2001 and sum(map(len, ud)) == 25147
    assert ud[0] == [("From", "IN"), ("the", "DT"), ("AP", "NNP"), ("comes", "VBZ"),
                     ("this", "DT"), ("story", "NN"), (":", ":")]
    assert next(C.iter_conllu(column="upos"))[0] == ("From", "ADP")


def test_text_reader_real():
    first = list(C.iter_text("abc", ["rural.txt"]))[:2]
    assert first[0] == "PM denies knowledge of AWB kickbacks".split()
    assert first[1][-3:] == ["wheat", "sales", "."]
    # science.txt is Latin-1: decoded, not rejected
    assert any("\u00b0" in s for s in C.iter_text("abc", ["science.txt"]))
    with pytest.raises(ValueError, match="raw-text"):
        next(C.iter_text("brown"))


# --------------------------------------------------------------------------- tokeniser

@pytest.mark.parametrize("text,tokens", [
    ("Mr. O'Connor's dog didn't bark.", ["Mr.", "O'Connor", "'s", "dog", "did", "n't", "bark", "."]),
    ("I can't, won't -- and they're 3.5% of $30,000...",
     ["I", "ca", "n't", ",", "wo", "n't", "--", "and", "they", "'re", "3.5", "%", "of", "$",
      "30,000", "..."]),
    ("the U.S. and e.g. J. Smith at 10:30", ["the", "U.S.", "and", "e.g.", "J.", "Smith", "at", "10:30"]),
    ("see http://x.org/a, or mail a.b@c.com.", ["see", "http://x.org/a", ",", "or", "mail",
                                                "a.b@c.com", "."]),
    ("I\u2019m DON'T state-owned (1/2)", ["I", "\u2019m", "DO", "N'T", "state-owned", "(", "1/2", ")"]),
    ("", []),
])
def test_tokenize(text, tokens):
    assert C.tokenize(text) == tokens


def test_split_sentences():
    toks = C.tokenize('He left. "Why?" she asked. It was 5 p.m. today... and then 3 more! OK')
    assert C.split_sentences(toks) == [
        ["He", "left", "."], ['"', "Why", "?", '"', "she", "asked", "."],
        ["It", "was", "5", "p.m.", "today", "...", "and", "then", "3", "more", "!"], ["OK"]]
    assert C.split_sentences([]) == []
    assert C.split_sentences(". . .".split()) == [[".", ".", "."]]


# --------------------------------------------------------------------------- malformed input

def _zip(tmp_path, corpus, members):
    """A data folder holding corpora/<corpus>.zip with the NLTK layout."""
    (tmp_path / "corpora").mkdir(exist_ok=True)
    with zipfile.ZipFile(tmp_path / "corpora" / f"{corpus}.zip", "w") as zf:
        zf.writestr(f"{corpus}/", b"")
        for name, data in members.items():
            zf.writestr(f"{corpus}/{name}", data)
    return tmp_path


def _check_error(excinfo, member, line, quoted):
    e = excinfo.value
    assert e.line == line
    assert e.path.endswith(member)
    msg = str(e)
    assert f"{member}:{line}:" in msg and quoted in msg


def test_treebank_synthetic_rules(tmp_path):
    text = ("\n[ The/DT cat/NN ]\n\n[ it/PRP ]\nsat/VBD *T*-1/-NONE- ./. \n\n"
            "''/'' \n[ A/DT dog\\/cat/NN ]\n\nran/VBD ./. \n\n\n[ End/NN ]\n"
            "======================================\n(/( x/NN )/) \n")
    d = _zip(tmp_path, "treebank", {"tagged/wsj_0001.pos": text})
    sents = list(C.iter_treebank(["tagged/wsj_0001.pos"], data_dir=d))
    assert sents == [
        [("The", "DT"), ("cat", "NN"), ("it", "PRP"), ("sat", "VBD"), (".", "."), ("''", "''")],
        [("A", "DT"), ("dog/cat", "NN"), ("ran", "VBD"), (".", ".")],
        [("End", "NN")],
        [("(", "-LRB-"), ("x", "NN"), (")", "-RRB-")]]
    raw = list(C.iter_treebank(["tagged/wsj_0001.pos"], data_dir=d, normalize=False))
    assert raw[1][1] == ("dog\\/cat", "NN") and raw[3][0] == ("(", "(")


@pytest.mark.parametrize("corpus,member,text,line,quoted", [
    ("treebank", "tagged/wsj_0001.pos", "\n[ a/DT ]\nbroken ./. \n", 3, "'broken'"),
    ("treebank", "tagged/wsj_0001.pos", "[ a/DT dog/NN \n", 1, "'[ a/DT dog/NN '"),
    ("treebank", "tagged/wsj_0001.pos", "a/DT\n\ndog/ \n", 3, "'dog/'"),
    ("conll2000", "train.txt", "A DT B-NP\n\nthe DT\n", 3, "'the DT'"),
    ("masc_tagged", "written/x.txt", "The_DT\nbad_ line_NN\n", 2, "'bad_'"),
    ("brown", "ca01", "\n\n\tThe/at dog/nn\n\tcat/nn dog ./.\n", 4, "'dog'"),
    ("treebank", "tagged/wsj_0001.pos", b"a/DT\nb\xe9/NN\n", 2, "b'b\\xe9/NN'"),
])
def test_malformed_input_names_member_and_line(tmp_path, corpus, member, text, line, quoted):
    d = _zip(tmp_path, corpus, {member: text})
    reader = {"treebank": C.iter_treebank, "conll2000": C.iter_conll2000,
              "masc_tagged": C.iter_masc, "brown": C.iter_brown}[corpus]
    with pytest.raises(CorpusFormatError) as excinfo:
        list(reader([member], data_dir=d))
    _check_error(excinfo, f"{corpus}.zip/{corpus}/{member}", line, quoted)


def test_masc_synthetic_repairs(tmp_path):
    text = "So_IN D. C._NNP ,_, _UH . . ._... end_NN\n\nwww.example.com\n(_( x_NN )_)\n"
    d = _zip(tmp_path, "masc_tagged", {"spoken/a.txt": text})
    assert list(C.iter_masc(["spoken/a.txt"], data_dir=d)) == [
        [("So", "IN"), ("D.", "NNP"), ("C.", "NNP"), (",", ","), (".", "..."), (".", "..."),
         (".", "..."), ("end", "NN")],
        [("www.example.com", None)],
        [("(", "-LRB-"), ("x", "NN"), (")", "-RRB-")]]


def test_conllu_synthetic(tmp_path):
    rows = ["# sent_id = 1", "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_",
            "1\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_", "2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_",
            "2.1\tgo\tgo\tVERB\tVB\t_\t_\t_\t_\t_", "3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_", "",
            "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_", ""]
    p = tmp_path / "t.conllu.gz"
    p.write_bytes(gzip.compress("\n".join(rows).encode()))
    assert list(C.iter_conllu(p)) == [[("do", "VBP"), ("n't", "RB"), ("go", "VB")], [("Hi", "UH")]]
    assert list(C.iter_conllu(p, column="upos"))[1] == [("Hi", "INTJ")]
    bad = tmp_path / "bad.conllu"
    bad.write_text("# c\n1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n2\tthere\tthere\n")
    with pytest.raises(CorpusFormatError) as excinfo:
        list(C.iter_conllu(bad))
    _check_error(excinfo, "bad.conllu", 3, "'2\\tthere\\tthere'")
    bad.write_text("x\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n")
    with pytest.raises(CorpusFormatError, match="bad token ID 'x'"):
        list(C.iter_conllu(bad))
    with pytest.raises(ValueError, match="column"):
        next(C.iter_conllu(p, column="lemma"))


def test_text_decoding_falls_back_per_line(tmp_path):
    d = _zip(tmp_path, "webtext", {"a.txt": "caf\u00e9 ok\r\n".encode() + b"na\xefve \x99 x\n"})
    assert list(C.iter_text("webtext", data_dir=d)) == [["caf\u00e9", "ok"],
                                                        ["na\u00efve", "\u2122", "x"]]


def test_missing_member_or_archive(tmp_path):
    d = _zip(tmp_path, "brown", {"ca01": "a/at\n"})
    with pytest.raises(FileNotFoundError, match="ca02"):
        list(C.iter_brown(["ca02"], data_dir=d))
    with pytest.raises(FileNotFoundError, match="treebank"):
        list(C.iter_treebank(data_dir=d))
    with pytest.raises(ValueError, match="brown-lm needs the 500"):
        C.dataset_fileids("brown-lm", "train", data_dir=d)
