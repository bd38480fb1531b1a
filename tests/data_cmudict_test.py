"""Layer 1 (data/): the cmudict reader, on the shared archive read in place and on invented lines.

The real archive (``../shared/data/corpora/cmudict.zip``, or ``$FSMLEARN_DATA``) is
read where it lies; the bad inputs are invented lines, each of which must raise a
CorpusFormatError naming the file (and member), the line and the offending value.
"""

from __future__ import annotations

import io
import zipfile

import pytest

from fsmlearn.data.cmudict import PHONEMES, VOWELS, parse_cmudict_lines, read_cmudict
from fsmlearn.data.locate import corpus_path
from fsmlearn.errors import CorpusFormatError, CorpusNotFoundError

# --------------------------------------------------------------------------- the real archive


@pytest.fixture(scope="module")
def stressed():
    return read_cmudict(keep_stress=True)


def test_the_shared_archive_has_its_entries(stressed):
    assert len(stressed) == 123_455                              # distinct words
    assert sum(len(v) for v in stressed.values()) == 133_737     # entries: one a line
    assert stressed["NATURAL"][0] == ("N", "AE1", "CH", "ER0", "AH0", "L")   # the README's example
    assert stressed["A"] == [("AH0",), ("EY1",)]                 # 'A 1' and 'A 2' are not adjacent
    assert stressed["JUANITA"][1] == ("JH", "UW", "AH0", "N", "IY1", "T", "AH0")   # a vowel without stress


def test_stress_removed_and_pronunciations_that_become_equal_kept_once(stressed):
    plain = read_cmudict()
    assert list(plain) == list(stressed)                         # same words, file order
    assert plain["NATURAL"] == [("N", "AE", "CH", "ER", "AH", "L"), ("N", "AE", "CH", "R", "AH", "L")]
    assert plain["READ"] == [("R", "EH", "D"), ("R", "IY", "D")]
    assert plain["CAT"] == [("K", "AE", "T")]
    assert {p for v in plain.values() for pr in v for p in pr} == set(PHONEMES)
    n_plain = sum(len(v) for v in plain.values())
    assert 133_000 < n_plain < 133_737                           # a few hundred differ only in stress
    for w, prons in stressed.items():
        stripped = [tuple(p.rstrip("012") for p in pr) for pr in prons]
        assert plain[w] == list(dict.fromkeys(stripped))


def test_lowercase_keys():
    low = read_cmudict(lowercase=True)
    assert low["natural"][0] == ("N", "AE", "CH", "ER", "AH", "L")
    assert low["don't"] == [("D", "OW", "N", "T"), ("D", "OW", "N")]
    assert low["babar's"] == [("B", "AA", "B", "AA", "R", "Z")]   # written BABAR's in the file
    assert all(w == w.lower() for w in low)


def test_the_archive_is_read_in_place():
    z = corpus_path("cmudict")
    with zipfile.ZipFile(z) as zf:
        assert "cmudict/cmudict" in zf.namelist()


# --------------------------------------------------------------------------- invented archives


def _archive(tmp_path, members: dict[str, bytes]):
    folder = tmp_path / "corpora"
    folder.mkdir()
    with zipfile.ZipFile(folder / "cmudict.zip", "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return tmp_path


def test_an_archive_in_the_nltk_layout(tmp_path):
    root = _archive(tmp_path, {"cmudict/README": b"x", "cmudict/cmudict": b"ZOG 1 Z AA1 G\nZOG 2 Z OW1 G\n"})
    assert read_cmudict(root) == {"ZOG": [("Z", "AA", "G"), ("Z", "OW", "G")]}
    assert sorted(tmp_path.rglob("*")) == [tmp_path / "corpora", tmp_path / "corpora" / "cmudict.zip"]


def test_a_bad_line_in_the_archive_names_archive_member_line_and_value(tmp_path):
    root = _archive(tmp_path, {"cmudict/cmudict": b"ZOG 1 Z AA1 G\nZOG 3 Z OW1 G\n"})
    with pytest.raises(CorpusFormatError) as ei:
        read_cmudict(root)
    where = f"{root / 'corpora' / 'cmudict.zip'}/cmudict/cmudict"
    assert ei.value.path == where and ei.value.line == 2
    assert str(ei.value).startswith(f"{where}:2: ") and "'3'" in str(ei.value)


def test_an_empty_member_and_missing_files(tmp_path):
    root = _archive(tmp_path, {"cmudict/cmudict": b";;; nothing but a comment\n\n"})
    with pytest.raises(CorpusFormatError, match="empty"):
        read_cmudict(root)
    with pytest.raises(CorpusNotFoundError):
        read_cmudict(tmp_path / "nowhere")
    other = tmp_path / "other"
    other.mkdir()
    root = _archive(other, {"cmudict/README": b"x"})
    with pytest.raises(CorpusNotFoundError, match="cmudict/cmudict"):
        read_cmudict(root)

# --------------------------------------------------------------------------- invented lines


def test_both_layouts_comments_and_blank_lines():
    nltk = ["ZOG 1 Z AA1 G", "", "ZOGS 1 Z AA1 G Z", "ZOG 2 Z AA2 G", "ZOG 3 Z OW1 G  # fast speech"]
    assert parse_cmudict_lines(nltk) == {"ZOG": [("Z", "AA", "G"), ("Z", "OW", "G")],
                                         "ZOGS": [("Z", "AA", "G", "Z")]}
    assert parse_cmudict_lines(nltk, keep_stress=True)["ZOG"] == [("Z", "AA1", "G"), ("Z", "AA2", "G"),
                                                                  ("Z", "OW1", "G")]
    cmu = ";;; header\nZOG  Z AA1 G\nZOG(1)  Z OW1 G\nZOG(3)  Z AO1 G\n;;; ZOG(2) X\nzog  Z UW1\n"
    assert parse_cmudict_lines(cmu) == {"ZOG": [("Z", "AA", "G"), ("Z", "OW", "G"), ("Z", "AO", "G")],
                                        "zog": [("Z", "UW")]}
    merged = parse_cmudict_lines(cmu, lowercase=True)
    assert merged == {"zog": [("Z", "AA", "G"), ("Z", "OW", "G"), ("Z", "AO", "G"), ("Z", "UW")]}
    assert parse_cmudict_lines([]) == {}


def test_words_with_parentheses_in_the_cmu_layout():
    lex = parse_cmudict_lines(["(PAREN  P ER0 EH1 N", "(PAREN(2)  P EH1 R AH0 N"])
    assert lex == {"(PAREN": [("P", "ER", "EH", "N"), ("P", "EH", "R", "AH", "N")]}


# source, lines, the line of the error, substrings of the message (the offending value quoted)
BAD = {
    "counter-not-first": (["ZOG 2 Z AA1 G"], 1, ["'2'", "'ZOG'", "expected '1'"]),
    "counter-repeated": (["ZOG 1 Z AA1 G", "ZOG 1 Z OW1 G"], 2, ["'1'", "expected '2'"]),
    "counter-skips": (["ZOG 1 Z AA1 G", "ZAP 1 Z AE1 P", "ZOG 3 Z OW1 G"], 3, ["'3'", "expected '2'"]),
    "counter-leading-zero": (["ZOG 01 Z AA1 G"], 1, ["'01'"]),
    "unknown-phoneme": (["ZOG 1 Z AA1 GX"], 1, ["phoneme 'GX'", "'ZOG'"]),
    "stress-on-consonant": (["ZOG 1 Z1 AA1 G"], 1, ["phoneme 'Z1'"]),
    "stress-digit-3": (["ZOG 1 Z AA3 G"], 1, ["phoneme 'AA3'"]),
    "lowercase-phoneme": (["ZOG 1 z AA1 G"], 1, ["phoneme 'z'"]),
    "phoneme-with-punctuation": (["ZOG 1 Z AA1, G"], 1, ["phoneme 'AA1,'"]),
    "no-pronunciation-nltk": (["ZOG 1 Z AA1 G", "ZAP 1"], 2, ["no pronunciation", "'ZAP'"]),
    "no-pronunciation-cmu": (["ZOG  Z AA1 G", "ZAP"], 2, ["no pronunciation", "'ZAP'"]),
    "control-character": (["Z\x01OG 1 Z AA1 G"], 1, ["control character U+0001", "'Z\\x01OG 1 Z AA1 G'"]),
    "other-layout": (["ZOG 1 Z AA1 G", "ZAP  Z AE1 P"], 2, ["other layout", "'ZAP  Z AE1 P'"]),
    "other-layout-cmu-first": (["ZAP  Z AE1 P", "ZOG 1 Z AA1 G"], 2, ["other layout", "'ZOG 1 Z AA1 G'"]),
    "alternate-first": (["ZOG(2)  Z AA1 G"], 1, ["first entry", "'ZOG(2)'"]),
    "alternate-not-increasing": (["ZOG  Z AA1 G", "ZOG(2)  Z OW1 G", "ZOG(2)  Z AO1 G"], 3,
                                 ["not above", "'ZOG(2)'"]),
    "unnumbered-repeated": (["ZOG  Z AA1 G", "ZOG  Z OW1 G"], 2, ["not above", "'ZOG'"]),
    "alternate-leading-zero": (["ZOG  Z AA1 G", "ZOG(02)  Z OW1 G"], 2, ["leading zeros", "'ZOG(02)'"]),
    "alternate-zero": (["ZOG  Z AA1 G", "ZOG(0)  Z OW1 G"], 2, ["positive", "'ZOG(0)'"]),
    "lines-counted-through-comments": ([";;; c", "", "ZOG  Z AA9 G"], 3, ["phoneme 'AA9'"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_lines_raise_a_located_error(case):
    lines, line, quoted = BAD[case]
    source = f"/invented/{case}.zip/cmudict/cmudict"
    with pytest.raises(CorpusFormatError) as ei:
        parse_cmudict_lines(lines, source)
    e = ei.value
    assert e.path == source and e.line == line
    msg = str(e)
    assert msg.startswith(f"{source}:{line}: "), msg
    for q in quoted:
        assert q in msg, (q, msg)


def test_the_vowels_are_phonemes():
    assert VOWELS < set(PHONEMES) and len(PHONEMES) == 39 and len(VOWELS) == 15


def test_a_string_is_split_into_lines():
    with pytest.raises(CorpusFormatError) as ei:
        parse_cmudict_lines("ZOG 1 Z AA1 G\nZOG 2 Q\n", "x")
    assert ei.value.line == 2 and "'Q'" in str(ei.value)
    assert parse_cmudict_lines(io.StringIO("ZOG 1 Z AA1 G\n").read()) == {"ZOG": [("Z", "AA", "G")]}
