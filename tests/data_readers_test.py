"""Layer 1 (data/): the corpus readers, on the shared corpora and on malformed input.

Real-data tests read the shared corpora (``$FSMLEARN_DATA`` or ``../shared/data``);
error tests write small synthetic archives in a tmp dir.
"""

from __future__ import annotations

import gzip
import zipfile
import pytest

from fsmlearn.data import readers as C
from fsmlearn.errors import ArgumentError, CorpusFormatError, CorpusNotFoundError, DatasetError


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
    with pytest.raises(DatasetError, match="'brown' is not a raw-text"):
        next(C.iter_text("brown"))
    with pytest.raises(DatasetError, match="'cmudict'"):
        next(C.iter_words("cmudict"))


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
    with pytest.raises(ArgumentError, match="'lemma'"):
        next(C.iter_conllu(p, column="lemma"))


def test_text_decoding_falls_back_per_line(tmp_path):
    d = _zip(tmp_path, "webtext", {"a.txt": "caf\u00e9 ok\r\n".encode() + b"na\xefve \x99 x\n"})
    assert list(C.iter_text("webtext", data_dir=d)) == [["caf\u00e9", "ok"],
                                                        ["na\u00efve", "\u2122", "x"]]


def test_missing_member_or_archive(tmp_path):
    d = _zip(tmp_path, "brown", {"ca01": "a/at\n"})
    with pytest.raises(CorpusNotFoundError, match="ca02"):
        list(C.iter_brown(["ca02"], data_dir=d))
    with pytest.raises(CorpusNotFoundError, match="treebank"):
        list(C.iter_treebank(data_dir=d))
    with pytest.raises(FileNotFoundError, match="treebank"):   # still a FileNotFoundError
        list(C.iter_treebank(data_dir=d))
