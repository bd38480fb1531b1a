"""Fuzz suite of the corpus readers (issue 16): every reader answers a located error or a correct result.

Each corpus format gets a small valid file in its real shape (copied from the
shared corpora), and hypothesis feeds the reader mutations of it
(:func:`fuzz.mutated`) and random bytes; :func:`fuzz.check_reader` holds the
reader to the property (a located :class:`~fsmlearn.errors.FsmError` or a
result, nothing written) and the ``check`` functions below to a correct
result: every sentence non-empty, every word a non-empty string without
whitespace or control characters, every tag in the format's tag set.  The
archive and ``.gz`` readers are fuzzed on mutated archive bytes too.
``FSMLEARN_FUZZ_EXAMPLES`` sets the examples per test (default 150).
"""

from __future__ import annotations

import gzip
import io
import re
import zipfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzz import check_reader, fuzz_settings, mutated

from fsmlearn.data import readers as R
from fsmlearn.data.locate import lenient_lines, strict_lines
from fsmlearn.data.tagsets import PENN_TAGS

PENN = frozenset(PENN_TAGS)
XPOS = PENN | {"HYPH", "NFP", "ADD", "AFX", "GW", "XX"}
UPOS = frozenset("ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ SYM "
                 "VERB X".split())
CHUNK = re.compile(r"O|[BI]-(ADJP|ADVP|CONJP|INTJ|LST|NP|PP|PRT|SBAR|UCP|VP)")
CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")

# --------------------------------------------------------------------------- valid files

# Invented sentences in each corpus's format (no corpus text is committed; the shared
# corpora are read in place by the data tests).
TREEBANK = (b"\n\n\n\n[ Anna/NNP Berg/NNP ]\n,/, \n[ 42/CD years/NNS ]\nold/JJ ,/, will/MD "
            b"paint/VB \n[ the/DT barn/NN ]\nin/IN \n[ a/DT bright/JJ red/JJ color/NN Dec./NNP "
            b"3/CD ]\n./. \n\n[ Ms./NNP Berg/NNP ]\nis/VBZ \n[ director/NN ]\nof/IN \n"
            b"[ Northfield/NNP Ltd./NNP ]\n,/, \n[ the/DT Danish/NNP printing/VBG|NN firm/NN ]\n"
            b"./. \n\n''/'' \n[ 1\\/2/CD (/( -LRB-/-LRB- )/) ]\n======================================\n"
            b"*T*-1/-NONE- says/VBZ \n")
CONLL2000 = (b"Northwind NNP B-NP\nTrading NNP I-NP\nCo. NNP I-NP\n's POS B-NP\n"
             b"Denver NNP I-NP\noffice NN I-NP\nreported VBD B-VP\n. . O\n\n"
             b"-LRB- ( O\n1\\/2 CD B-NP\n-RRB- ) O\nthat IN B-SBAR\n'' '' O\n\n")
MASC = ("Meeting_NN Minutes_NNP March_NNP 4_CD ,_, 2019_CD The_DT Second_NNP\n"
        "\n"
        "So_IN D. C._NNP ,_, _UH . . ._... end_NN\n"
        "www.example.com\n"
        "(_( x_NN|VB )_) caf\u00e9_NN soft\u00adhyphen_NN\n").encode()
BROWN = (b"\n\n\tThe/at Lakeside/np-tl Town/nn-tl Planning/jj-tl Board/nn-tl said/vbd Monday/nr "
         b"an/at inquiry/nn of/in Springfield's/np$ new/jj zoning/nn plan/nn "
         b"produced/vbd ``/`` no/at objection/nn ''/'' that/cs any/dti residents/nns "
         b"voiced/vbd concern/nn ./.\n\n\n\tHe/pps didn't/dod* 1/2/cd go/vb-hl ;/. fw/fw-at+nn-tl\n\n")
CONLLU = ("# newdoc id = example-doc-0001\n"
          "# sent_id = example-0001\n"
          "# text = Into the lake falls this stream :\n"
          "1\tInto\tinto\tADP\tIN\t_\t3\tcase\t3:case\t_\n"
          "2\tthe\tthe\tDET\tDT\tDefinite=Def|PronType=Art\t3\tdet\t3:det\t_\n"
          "3\tlake\tlake\tNOUN\tNN\tNumber=Sing\t4\tobl\t4:obl:into\t_\n"
          "4\tfalls\tfall\tVERB\tVBZ\tMood=Ind|Number=Sing|Person=3|Tense=Pres|VerbForm=Fin\t0\troot\t0:root\t_\n"
          "5\tthis\tthis\tDET\tDT\tNumber=Sing|PronType=Dem\t6\tdet\t6:det\t_\n"
          "6\tstream\tstream\tNOUN\tNN\tNumber=Sing\t4\tnsubj\t4:nsubj\t_\n"
          "7\t:\t:\tPUNCT\t:\t_\t4\tpunct\t4:punct\t_\n"
          "\n"
          "# sent_id = example-0002\n"
          "# text = You don't x-ray\n"
          "1\tYou\tyou\tPRON\tPRP\tCase=Nom\t4\tnsubj\t4:nsubj\t_\n"
          "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
          "2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t4:aux\t_\n"
          "3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t4:advmod\t_\n"
          "4\tx\tx\tNOUN\tNN\t_\t0\troot\t0:root\t_\n"
          "4.1\tgo\tgo\tVERB\tVB\t_\t_\t_\t4:conj\t_\n"
          "5\t-\t-\tPUNCT\tHYPH\t_\t4\tpunct\t4:punct\tSpaceAfter=No\n"
          "6\tray\tray\tNOUN\tNN\tNumber=Sing\t4\tcompound\t4:compound\t_\n"
          "\n").encode()
TEXT = ("Council approves new bridge plan\n"
        "The Mayor has said she knew the council was planning a bridge. Mr. O'Connor's dog "
        "didn't bark -- at 10:30 in the U.S.!\n\n"
        "caf\u00e9 na\u00efve \u201cquoted\u201d (1/2)\r\n").encode() + b"na\xefve \x99 x\n"


def _zip(corpus: str, members: dict[str, bytes]) -> bytes:
    """An NLTK-style archive (top folder ``<corpus>/``), deflated, with fixed timestamps."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in {"": b"", **members}.items():
            info = zipfile.ZipInfo(f"{corpus}/{name}", date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if data else zipfile.ZIP_STORED
            zf.writestr(info, data)
    return buf.getvalue()


TREEBANK_ZIP = _zip("treebank", {"tagged/wsj_0001.pos": TREEBANK,
                                 "tagged/wsj_0002.pos": b"\n[ Carla/NNP Mendes/NNP ]\n./. \n"})
CONLLU_GZ = gzip.compress(CONLLU, mtime=0)

# --------------------------------------------------------------------------- readers on a file


def _lines(path):
    return strict_lines(str(path), path.read_bytes())


def read_treebank(path):
    return list(R.parse_treebank_lines(str(path), _lines(path)))


def read_treebank_zip(path):      # path is <folder>/corpora/treebank.zip
    return list(R.iter_treebank(data_dir=path.parent.parent))


def read_conll2000(path):
    return list(R.parse_conll2000_lines(str(path), _lines(path), chunks=True))


def read_masc(path):
    return list(R.parse_masc_lines(str(path), _lines(path)))


def read_brown(path):
    return list(R.parse_brown_lines(str(path), _lines(path)))


def read_conllu(path):
    return list(R.iter_conllu(path))


def read_conllu_upos(path):
    return list(R.iter_conllu(path, column="upos"))


def read_text(path):
    return list(R.parse_text_lines(lenient_lines(path.read_bytes())))

# --------------------------------------------------------------------------- correct results


def _word_ok(w, control=True):
    assert isinstance(w, str) and w, f"empty or non-str word {w!r}"
    assert not any(c.isspace() for c in w), f"word with whitespace {w!r}"
    if control:
        assert not CONTROL.search(w), f"word with a control character {w!r}"


def _tagged_check(tag_ok, width=2):
    def check(sents):
        assert isinstance(sents, list)
        for s in sents:
            assert isinstance(s, list) and s, f"empty sentence {s!r}"
            for tok in s:
                assert isinstance(tok, tuple) and len(tok) == width, tok
                _word_ok(tok[0])
                assert tag_ok(tok[1]), f"tag outside the tag set: {tok!r}"
                if width == 3:
                    assert CHUNK.fullmatch(tok[2]), f"bad chunk tag: {tok!r}"
    return check


def _masc_tag_ok(t):
    return t is None or (isinstance(t, str) and t != "" and not any(c.isspace() for c in t))


def check_text(sents):
    assert isinstance(sents, list)
    for s in sents:
        assert isinstance(s, list) and s, f"empty sentence {s!r}"
        for w in s:
            _word_ok(w, control=False)


check_penn = _tagged_check(PENN.__contains__)
check_conll = _tagged_check(PENN.__contains__, width=3)
check_masc = _tagged_check(_masc_tag_ok)
check_brown = _tagged_check(lambda t: isinstance(t, str) and R.is_brown_tag(t))
check_xpos = _tagged_check(XPOS.__contains__)
check_upos = _tagged_check(UPOS.__contains__)

FORMATS = {   # name: (reader, valid bytes, file name, check)
    "treebank": (read_treebank, TREEBANK, "wsj_0001.pos", check_penn),
    "treebank-zip": (read_treebank_zip, TREEBANK_ZIP, "corpora/treebank.zip", check_penn),
    "conll2000": (read_conll2000, CONLL2000, "train.txt", check_conll),
    "masc": (read_masc, MASC, "written/x.txt", check_masc),
    "brown": (read_brown, BROWN, "ca01", check_brown),
    "conllu": (read_conllu, CONLLU, "x.conllu", check_xpos),
    "conllu-upos": (read_conllu_upos, CONLLU, "x.conllu", check_upos),
    "conllu-gz": (read_conllu, CONLLU_GZ, "x.conllu.gz", check_xpos),
    "text": (read_text, TEXT, "a.txt", check_text),
}


def _run(fmt, data):
    read, _, filename, check = FORMATS[fmt]
    return check_reader(f"corpus:{fmt}", read, data, filename, check=check)

# --------------------------------------------------------------------------- the valid files parse


def test_valid_files_parse_to_the_expected_sentences():
    counts = {fmt: len(_run(fmt, valid)) for fmt, (_, valid, _, _) in FORMATS.items()}
    assert counts == {"treebank": 4, "treebank-zip": 5, "conll2000": 2, "masc": 4, "brown": 2,
                      "conllu": 2, "conllu-upos": 2, "conllu-gz": 2, "text": 5}
    assert _run("treebank", TREEBANK)[1:] == [
        [("Ms.", "NNP"), ("Berg", "NNP"), ("is", "VBZ"), ("director", "NN"), ("of", "IN"),
         ("Northfield", "NNP"), ("Ltd.", "NNP"), (",", ","), ("the", "DT"), ("Danish", "NNP"),
         ("printing", "VBG"), ("firm", "NN"), (".", "."), ("''", "''")],
        [("1/2", "CD"), ("(", "-LRB-"), ("(", "-LRB-"), (")", "-RRB-")],
        [("says", "VBZ")]]
    assert _run("conll2000", CONLL2000)[1][:2] == [("(", "-LRB-", "O"), ("1/2", "CD", "B-NP")]
    assert _run("conllu", CONLLU)[1] == [("You", "PRP"), ("do", "VBP"), ("n't", "RB"), ("x", "NN"),
                                         ("-", "HYPH"), ("ray", "NN")]
    assert _run("brown", BROWN)[1][-2:] == [(";", "."), ("fw", "fw-at+nn-tl")]

# --------------------------------------------------------------------------- mutations


@fuzz_settings()
@given(data=mutated(TREEBANK))
def test_fuzz_treebank(data):
    _run("treebank", data)


@fuzz_settings()
@given(data=mutated(TREEBANK_ZIP))
def test_fuzz_treebank_zip(data):
    _run("treebank-zip", data)


@fuzz_settings()
@given(data=mutated(CONLL2000))
def test_fuzz_conll2000(data):
    _run("conll2000", data)


@fuzz_settings()
@given(data=mutated(MASC))
def test_fuzz_masc(data):
    _run("masc", data)


@fuzz_settings()
@given(data=mutated(BROWN))
def test_fuzz_brown(data):
    _run("brown", data)


@fuzz_settings()
@given(data=mutated(CONLLU))
def test_fuzz_conllu(data):
    _run("conllu", data)


@fuzz_settings()
@given(data=mutated(CONLLU))
def test_fuzz_conllu_upos(data):
    _run("conllu-upos", data)


@fuzz_settings()
@given(data=mutated(CONLLU_GZ))
def test_fuzz_conllu_gz(data):
    _run("conllu-gz", data)


@fuzz_settings()
@given(data=mutated(TEXT))
def test_fuzz_text(data):
    _run("text", data)

# --------------------------------------------------------------------------- random bytes


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@fuzz_settings()
@given(data=st.binary(max_size=600))
def test_fuzz_random_bytes(fmt, data):
    _run(fmt, data)
