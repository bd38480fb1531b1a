"""Layer 1 (data/): the corpus readers on the bad inputs kept under tests/data/fuzz/corpora.

Each file is an input that broke a reader before issue 16's hardening, found by
the fuzz suite (``tests/fuzz_corpora_test.py``: an exception escaped, or a
result with a tag outside the tag set, a control character in a word, a bad
chunk tag) or, for the cases a result check cannot see (an empty sentence
skipped in silence, an ID out of sequence, ...), by reading the readers.  Each
must now raise a CorpusFormatError naming the file, the line (text formats) and
the offending value.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fsmlearn.data import readers as R
from fsmlearn.data.locate import strict_lines
from fsmlearn.errors import CorpusFormatError

BAD = Path(__file__).resolve().parent / "data" / "fuzz" / "corpora"


def _parse(parse, path, **kw):
    return list(parse(str(path), strict_lines(str(path), path.read_bytes()), **kw))


READERS = {
    "treebank": lambda p: _parse(R.parse_treebank_lines, p),
    "conll2000": lambda p: _parse(R.parse_conll2000_lines, p, chunks=True),
    "masc": lambda p: _parse(R.parse_masc_lines, p),
    "brown": lambda p: _parse(R.parse_brown_lines, p),
    "conllu": lambda p: list(R.iter_conllu(p)),
    "conllu-upos": lambda p: list(R.iter_conllu(p, column="upos")),
}

# file -> (reader, line, substrings of the message: the offending value quoted)
TEXT_CASES = {
    "treebank-tag-outside.pos": ("treebank", 1, ["tag 'NQ'", "'dog/NQ'", "Penn tag"]),
    "treebank-control.pos": ("treebank", 1, ["control character U+0000", "d\\x00g/NN"]),
    "treebank-compound-empty.pos": ("treebank", 1, ["tag '|NN'", "'x/|NN'"]),
    "treebank-empty-chunk.pos": ("treebank", 2, ["empty chunk", "'[ ]'"]),
    "conll2000-bad-chunk.txt": ("conll2000", 1, ["chunk tag 'B'", "'Northwind'"]),
    "conll2000-tag-outside.txt": ("conll2000", 2, ["tag 'PQS'", "\"'s\"", "Penn tag"]),
    "conll2000-control.txt": ("conll2000", 1, ["control character U+0010", "No\\x10rthwind"]),
    "conll2000-empty-sentence.txt": ("conll2000", 3, ["empty sentence", "blank line after a blank"]),
    "masc-control.txt": ("masc", 1, ["control character U+001B", "'\\x1b'"]),
    "masc-empty-sentence.txt": ("masc", 2, ["empty sentence", "'_UH _UH'"]),
    "masc-compound-empty.txt": ("masc", 1, ["compound tag '|NN'", "'x_|NN'"]),
    "brown-tag-outside": ("brown", 3, ["tag 'np-'", "'Lakeside/np-'", "Brown tag"]),
    "brown-control": ("brown", 3, ["control character U+0000", "Spr\\x00ngfield"]),
    "conllu-xpos-outside.conllu": ("conllu", 2, ["XPOS 'RQ'", "FORM 'there'"]),
    "conllu-upos-outside.conllu": ("conllu-upos", 2, ["UPOS 'ADVERB'", "FORM 'there'"]),
    "conllu-control.conllu": ("conllu", 1, ["control character U+0001", "H\\x01i"]),
    "conllu-id-sequence.conllu": ("conllu", 2, ["token ID '3' out of sequence", "expected '2'"]),
    "conllu-empty-sentence.conllu": ("conllu", 4, ["empty sentence", "lines 4-5"]),
    "conllu-unicode-digit-id.conllu": ("conllu", 1, ["bad token ID '\u0661'"]),
}


@pytest.mark.parametrize("name", sorted(TEXT_CASES))
def test_bad_text_input_raises_a_located_error(name):
    reader, line, quoted = TEXT_CASES[name]
    path = BAD / name
    with pytest.raises(CorpusFormatError) as excinfo:
        READERS[reader](path)
    e = excinfo.value
    assert e.path == str(path) and e.line == line
    msg = str(e)
    assert msg.startswith(f"{path}:{line}: ")
    for q in quoted:
        assert q in msg, (q, msg)


# compressed files: no line; the file and the decompressor's complaint are named
GZ_CASES = {
    "conllu-gz-not-gzip.conllu.gz": "Not a gzipped file",
    "conllu-gz-truncated.conllu.gz": "ended before the end-of-stream marker",
    "conllu-gz-crc.conllu.gz": "CRC check failed",
    "conllu-gz-bad-deflate.conllu.gz": "invalid distance too far back",
    "conllu-gz-bad-method.conllu.gz": "Unknown compression method",
}


@pytest.mark.parametrize("name", sorted(GZ_CASES))
def test_corrupt_gzip_raises_a_located_error(name):
    path = BAD / name
    with pytest.raises(CorpusFormatError) as excinfo:
        list(R.iter_conllu(path))
    e = excinfo.value
    assert e.path == str(path) and e.line is None
    assert str(e).startswith(f"{path}: cannot decompress gzip data: ")
    assert GZ_CASES[name] in str(e)


# zip archives (a treebank.zip with members tagged/wsj_0001.pos, wsj_0002.pos):
# name -> (the member named, or None for the archive itself; the complaint)
ZIP_CASES = {
    "treebank-zip-empty.zip": (None, "BadZipFile: File is not a zip file"),
    "treebank-zip-bad-crc.zip": ("wsj_0001.pos", "BadZipFile: Bad CRC-32"),
    "treebank-zip-bad-deflate.zip": ("wsj_0001.pos", "error: Error -3 while decompressing"),
    "treebank-zip-bad-header.zip": ("wsj_0001.pos", "BadZipFile: Bad magic number for file header"),
    "treebank-zip-einval.zip": ("wsj_0001.pos", "OSError: [Errno 22] Invalid argument"),
    "treebank-zip-flag-bit5.zip": ("wsj_0002.pos", "NotImplementedError: compressed patched data"),
}


@pytest.mark.parametrize("name", sorted(ZIP_CASES))
def test_corrupt_zip_raises_a_located_error(tmp_path, name):
    member, complaint = ZIP_CASES[name]
    (tmp_path / "corpora").mkdir()
    archive = tmp_path / "corpora" / "treebank.zip"
    shutil.copyfile(BAD / name, archive)
    with pytest.raises(CorpusFormatError) as excinfo:
        list(R.iter_treebank(data_dir=tmp_path))
    e = excinfo.value
    where = str(archive) if member is None else f"{archive}/treebank/tagged/{member}"
    assert e.path == where and e.line is None
    assert str(e).startswith(f"{where}: cannot decompress") and complaint in str(e)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["corpora", "treebank.zip"]


def test_stored_inputs_all_have_a_test():
    tested = set(TEXT_CASES) | set(GZ_CASES) | set(ZIP_CASES)
    assert {p.name for p in BAD.iterdir()} == tested


def test_invalid_utf8_names_the_encoding_line_and_bytes(tmp_path):
    path = tmp_path / "x.conllu"
    path.write_bytes(b"1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n\n1\tcaf\xe9\tx\tNOUN\tNN\t_\t0\troot\t_\t_\n")
    with pytest.raises(CorpusFormatError) as excinfo:
        list(R.iter_conllu(path))
    e = excinfo.value
    assert e.line == 3 and e.path == str(path)
    assert "not UTF-8" in str(e) and "0xe9" in str(e) and "caf\\xe9" in str(e)


def test_accepted_forms_still_read():
    """Forms the hardening must keep: ( ) and A|B Penn tags, -NONE-, trailing blank lines,
    multiword tokens and empty nodes, MASC's noisy tags and untagged pieces, Brown's
    compound tags."""
    tb = list(R.parse_treebank_lines("x", ["(/( x/VBG|NN *T*/-NONE- )/) ", "", "", ""]))
    assert tb == [[("(", "-LRB-"), ("x", "VBG"), (")", "-RRB-")]]
    raw = list(R.parse_treebank_lines("x", ["(/( x/VBG|NN"], normalize=False))
    assert raw == [[("(", "("), ("x", "VBG|NN")]]
    co = list(R.parse_conll2000_lines("x", ["a DT B-NP", "", "b NN O", "", "", ""]))
    assert co == [[("a", "DT")], [("b", "NN")]]
    ma = list(R.parse_masc_lines("x", ["a_PP b_UH` c_... www.x.org"]))
    assert ma == [[("a", "PP"), ("b", "UH`"), ("c", "..."), ("www.x.org", None)]]
    br = list(R.parse_brown_lines("x", ["\tI'm/ppss+bem ok/jj-tl-hl ./."]))
    assert br == [[("I'm", "ppss+bem"), ("ok", "jj-tl-hl"), (".", ".")]]
    assert not R.is_brown_tag("NN") and not R.is_brown_tag("np-") and R.is_brown_tag("fw-in+at-tl")
    cu = list(R.parse_conllu_lines("x", [
        "# c", "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_", "1\tdo\tdo\tAUX\tVBP\t_\t0\troot\t_\t_",
        "2\tn't\tnot\tPART\tRB\t_\t1\tadvmod\t_\t_", "2.1\tgo\tgo\tVERB\tVB\t_\t_\t_\t_\t_",
        "3\t-\t-\tPUNCT\tHYPH\t_\t1\tpunct\t_\t_", "", ""]))
    assert cu == [[("do", "VBP"), ("n't", "RB"), ("-", "HYPH")]]
