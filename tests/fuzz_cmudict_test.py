"""Fuzzing the cmudict reader (issue 16's harness, tests/fuzz.py): a located error or a correct lexicon.

The valid files are invented entries in the two layouts the reader accepts (no
line of the dictionary is committed; the data tests read the real archive in
place): the NLTK layout with a word's pronunciations on non-adjacent lines, a
vowel without stress, words of punctuation and apostrophes; the CMU layout
with ``;;;`` comments, ``(k)`` alternates and a trailing ``#`` comment.  The
archive reader is fuzzed on mutated zip bytes too.  A correct result: every
word a non-empty string without whitespace or control characters, every
pronunciation a non-empty tuple of the 39 phonemes (stress removed), none
listed twice for a word.
"""

from __future__ import annotations

import io
import re
import zipfile

from hypothesis import given
from hypothesis import strategies as st

from fuzz import check_reader, fuzz_settings, mutated

from fsmlearn.data.cmudict import PHONEMES, parse_cmudict_lines, read_cmudict
from fsmlearn.data.locate import strict_lines

NLTK = (b"ZOGBLAT 1 Z AA1 G B L AE2 T\n"
        b"ZOGBLAT. 1 Z AA1 G B L AE2 T\n"
        b"ZOGBLAT 2 Z OW1 G B L AH0 T\n"
        b"ZOGBLAT'S 1 Z AA1 G B L AE2 T S\n"
        b"QUIMBERLY 1 K W IH1 M B ER0 L IY0\n"
        b"QUIMBERLY 2 K W IH1 M B ER0 L IY\n"
        b"%FLORP-SIGN 1 F L AO1 R P S AY1 N\n"
        b"VRENDO's 1 V R EH1 N D OW0 Z\n")
CMU = (b";;; invented entries in the layout of the CMU releases\n"
       b"ZOGBLAT  Z AA1 G B L AE2 T\n"
       b"ZOGBLAT(1)  Z OW1 G B L AH0 T\n"
       b"ZOGBLAT(3)  Z OW1 G B L AE0 T # fast speech\n"
       b"(FLORP  F L AO1 R P\n"
       b"\n"
       b"NYTHE  N AY1 DH\n")


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in {"": b"", "README": b"invented\n", **members}.items():
            info = zipfile.ZipInfo(f"cmudict/{name}", date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if data else zipfile.ZIP_STORED
            zf.writestr(info, data)
    return buf.getvalue()


NLTK_ZIP = _zip({"cmudict": NLTK})
PHONES = frozenset(PHONEMES)
CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")


def read_lines(path):
    return parse_cmudict_lines(strict_lines(str(path), path.read_bytes()), str(path))


def read_zip(path):               # path is <folder>/corpora/cmudict.zip
    return read_cmudict(path.parent.parent)


def check(lex):
    assert isinstance(lex, dict)
    for word, prons in lex.items():
        assert isinstance(word, str) and word and not any(c.isspace() for c in word), word
        assert not CONTROL.search(word), word
        assert prons and len(set(prons)) == len(prons), (word, prons)
        for p in prons:
            assert isinstance(p, tuple) and p and all(x in PHONES for x in p), (word, p)


def test_valid_files_parse():
    nltk = check_reader("cmudict:nltk", read_lines, NLTK, "cmudict", check=check)
    assert nltk["ZOGBLAT"] == [("Z", "AA", "G", "B", "L", "AE", "T"), ("Z", "OW", "G", "B", "L", "AH", "T")]
    assert nltk["QUIMBERLY"] == [("K", "W", "IH", "M", "B", "ER", "L", "IY")]     # equal without stress
    assert len(nltk) == 6
    cmu = check_reader("cmudict:cmu", read_lines, CMU, "cmudict", check=check)
    assert cmu["ZOGBLAT"] == [("Z", "AA", "G", "B", "L", "AE", "T"), ("Z", "OW", "G", "B", "L", "AH", "T"),
                              ("Z", "OW", "G", "B", "L", "AE", "T")]
    assert list(cmu) == ["ZOGBLAT", "(FLORP", "NYTHE"]
    assert check_reader("cmudict:zip", read_zip, NLTK_ZIP, "corpora/cmudict.zip", check=check) == nltk


@fuzz_settings()
@given(data=mutated(NLTK))
def test_fuzz_nltk_layout(data):
    check_reader("cmudict:nltk", read_lines, data, "cmudict", check=check)


@fuzz_settings()
@given(data=mutated(CMU))
def test_fuzz_cmu_layout(data):
    check_reader("cmudict:cmu", read_lines, data, "cmudict", check=check)


@fuzz_settings()
@given(data=mutated(NLTK_ZIP))
def test_fuzz_archive(data):
    check_reader("cmudict:zip", read_zip, data, "corpora/cmudict.zip", check=check)


@fuzz_settings()
@given(data=st.binary(max_size=600), fmt=st.sampled_from(["lines", "zip"]))
def test_fuzz_random_bytes(data, fmt):
    if fmt == "lines":
        check_reader("cmudict:nltk", read_lines, data, "cmudict", check=check)
    else:
        check_reader("cmudict:zip", read_zip, data, "corpora/cmudict.zip", check=check)
