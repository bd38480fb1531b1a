"""Layer 1 (data/): a user's tagged files (word/TAG and CoNLL-U), their errors, tagged output,
strictly checked stdin lines, and load_tagged's choice between a dataset and a file."""

from __future__ import annotations

import bz2
import gzip
import io

import pytest

from fsmlearn.data import load_tagged
from fsmlearn.data import tagged as D
from fsmlearn.data.tagsets import PENN_TAGS, input_tags, tag_mapper
from fsmlearn.data.text import iter_strict_lines
from fsmlearn.errors import ArgumentError, CorpusFormatError, CorpusNotFoundError, DatasetError

WORD_TAG = "The/DT dog/NN barks/VBZ ./.\n\n  1/2/CD of/IN it/PRP \n"
CONLLU = ("# sent_id = 1\n# text = The dog barks.\n"
          "1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n"
          "2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_\n"
          "3-4\tbarks.\t_\t_\t_\t_\t_\t_\t_\t_\n"
          "3\tbarks\tbark\tVERB\tVBZ\t_\t0\troot\t_\t_\n"
          "4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_\n\n"
          "1\twell\twell\tINTJ\tUH\t_\t0\troot\t_\t_\n"
          "2\t-\t-\tPUNCT\tHYPH\t_\t1\tpunct\t_\t_\n\n")


def one_line_error(e, path, line=None):
    """The error names the file (and the line) and is one line of text."""
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 400, msg
    assert msg.startswith(f"{path}:{line}: " if line else f"{path}"), msg
    return msg


def test_word_tag_lines():
    sents = list(D.parse_word_tag_lines("f", WORD_TAG.split("\n")))
    assert sents == [[("The", "DT"), ("dog", "NN"), ("barks", "VBZ"), (".", ".")],
                     [("1/2", "CD"), ("of", "IN"), ("it", "PRP")]]
    for bad, needle in [("a/DT dog", "no tag separator"), ("a/DT /NN", "empty word"), ("a/ b/NN", "empty tag"),
                        ("a/DT d\x00g/NN", "control character U+0000")]:
        with pytest.raises(CorpusFormatError) as e:
            list(D.parse_word_tag_lines("f.txt", ["x/NN", bad]))
        assert one_line_error(e, "f.txt", 2) and needle in str(e.value)
    with pytest.raises(CorpusFormatError) as e:
        list(D.parse_word_tag_lines("f.txt", ["x/NN", "", "a/DT -/HYPH"], tags=PENN_TAGS,
                                    tagset_name="the 45 Penn tags"))
    assert one_line_error(e, "f.txt", 3).endswith("tag 'HYPH' of token '-/HYPH' is not one of the 45 Penn tags")


def test_format_by_extension():
    assert [D.tagged_format(n) for n in ("a.conllu", "a.CoNLLU.gz", "a.conllu.xz", "a.txt", "conllu", "a.pos")] \
        == ["conllu", "conllu", "conllu", "word/tag", "word/tag", "word/tag"]


def test_read_files(tmp_path):
    wt = tmp_path / "a.txt"
    wt.write_text(WORD_TAG)
    assert D.read_tagged_file(wt)[1][0] == ("1/2", "CD")
    cu = tmp_path / "a.conllu"
    cu.write_text(CONLLU)
    upos = D.read_tagged_file(cu)
    assert upos == [[("The", "DET"), ("dog", "NOUN"), ("barks", "VERB"), (".", "PUNCT")],
                    [("well", "INTJ"), ("-", "PUNCT")]]
    assert D.read_tagged_file(cu, column="xpos")[1] == [("well", "UH"), ("-", "HYPH")]
    # any XPOS but '_' when no tag set is asked for; the tag set asked for is checked at its line
    odd = tmp_path / "odd.conllu"
    odd.write_text(CONLLU.replace("\tHYPH\t", "\tNN:sg\t"))
    assert D.read_tagged_file(odd, column="xpos")[1][1] == ("-", "NN:sg")
    odd.write_text(CONLLU.replace("\tHYPH\t", "\t_\t"))
    with pytest.raises(CorpusFormatError) as e:
        D.read_tagged_file(odd, column="xpos")
    assert "XPOS '_' of FORM '-'" in one_line_error(e, odd, 10)
    with pytest.raises(CorpusFormatError) as e:
        D.read_tagged_file(cu, column="xpos", tags=PENN_TAGS)
    assert "XPOS 'HYPH' of FORM '-' is not one of the 45 tags asked for" in one_line_error(e, cu, 10)
    with pytest.raises(CorpusFormatError) as e:       # UPOS is checked against the 17 UD tags
        D.read_tagged_file(wt, format="conllu")
    one_line_error(e, wt, 1)
    # the format by option over the extension, and compressed files
    gz = tmp_path / "b.gz"
    gz.write_bytes(gzip.compress(CONLLU.encode()))
    assert D.read_tagged_file(gz, format="conllu") == upos
    bz = tmp_path / "b.conllu.bz2"
    bz.write_bytes(bz2.compress(CONLLU.encode()))
    assert D.read_tagged_file(bz) == upos
    with pytest.raises(ArgumentError, match="unknown tagged-file format 'csv'"):
        D.read_tagged_file(wt, format="csv")


@pytest.mark.parametrize("content,needle,line", [
    (None, "no such file", None),
    ("dir", "is a directory", None),
    (b"", "no tagged sentences (empty file)", None),
    (b"\n  \n\n", "no tagged sentences (only blank lines)", None),
    (b"a/DT\ncaf\xe9/NN\n", "not UTF-8", 2),
    (b"a/DT\n" + bytes(b for b in range(256) if b not in (0, 10)) * 20, "not UTF-8", 2),   # a long binary "line"
    (b"a/DT b/NN\nx/NN \x7fELF\x02\x01\x01\x00\x00\n", "NUL byte at byte 13 of the line: binary data", 2),
    (b"a/DT b/NN\n\x01\x02 x/NN\n", "control character U+0001", 2),
    (b"\x1f\x8b\x08\x00garbage", "cannot decompress", None),
])
def test_bad_files(tmp_path, content, needle, line):
    p = tmp_path / ("f.txt.gz" if needle == "cannot decompress" else "f.txt")
    if content == "dir":
        p.mkdir()
    elif content is not None:
        p.write_bytes(content)
    with pytest.raises((CorpusFormatError, CorpusNotFoundError)) as e:
        D.read_tagged_file(p)
    assert needle in one_line_error(e, p, line)


def test_load_tagged_file_or_dataset(tmp_path, monkeypatch):
    f = tmp_path / "mine.txt"
    f.write_text("a/X b/Y\n")
    assert load_tagged(f) == load_tagged(str(f)) == [[("a", "X"), ("b", "Y")]]
    with pytest.raises(DatasetError) as e:
        load_tagged(tmp_path / "nope.txt")
    assert str(e.value) == (f"{tmp_path / 'nope.txt'}: neither a file nor a known dataset "
                            f"(the tagged datasets are wsj-small, wsj-train)")
    with pytest.raises(DatasetError, match="dataset 'mixed-text' is not tagged; the tagged datasets are "
                                           "wsj-small, wsj-train"):
        load_tagged("mixed-text")
    # a file named like a dataset is read as ./NAME
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mixed-text").write_text("c/Z\n")
    assert load_tagged("./mixed-text") == [[("c", "Z")]]


def test_tag17_input_tags_and_mapper():
    assert input_tags("penn45") == frozenset(PENN_TAGS)
    t17 = input_tags("tag17")
    assert {"N", "ENDPUNC", "NN", "HYPH", "("} <= t17 and "NOUN" not in t17
    m = tag_mapper("tag17")
    assert [m(t) for t in ("NN", "N", "HYPH", "VBG", "(")] == ["N", "N", "INPUNC", "VBG", "LPUNC"]
    assert tag_mapper("penn45") is None


def test_format_tagged_and_read_back(tmp_path):
    words, tags = ["I", "ca", "n't", "1/2"], ["PRP", "MD", "RB", "CD"]
    assert D.format_tagged(words, tags) == "PRP MD RB CD\n"
    assert D.format_tagged(words, tags, "word/tag") == "I/PRP ca/MD n't/RB 1/2/CD\n"
    block = D.format_tagged(words, tags, "conllu", sent_id=7, text="I  can't 1/2")
    assert block.splitlines()[:3] == ["# sent_id = 7", "# text = I can't 1/2", "1\tI\t_\t_\tPRP\t_\t_\t_\t_\t_"]
    assert block.endswith("\t_\n\n")
    assert D.format_tagged([], [], "conllu") == "" and D.format_tagged([], [], "word/tag") == "\n"
    for fmt, name, column in (("word/tag", "o.txt", "upos"), ("conllu", "o.conllu", "xpos")):
        (tmp_path / name).write_text(D.format_tagged(words, tags, fmt, column=column) * 2)
        assert D.read_tagged_file(tmp_path / name, column=column) == [list(zip(words, tags))] * 2
    upos = D.format_tagged(["Hi"], ["INTJ"], "conllu", column="upos")
    (tmp_path / "u.conllu").write_text(upos)
    assert D.read_tagged_file(tmp_path / "u.conllu") == [[("Hi", "INTJ")]]
    with pytest.raises(ArgumentError, match="2 words but 1 tags"):
        D.format_tagged(["a", "b"], ["X"])
    with pytest.raises(ArgumentError, match="unknown output format 'xml'"):
        D.format_tagged(["a"], ["X"], "xml")
    assert D.tags_of([[("a", "X"), ("b", "A")], [("c", "X")]]) == ("A", "X")


def test_strict_stdin_lines():
    assert list(iter_strict_lines(io.BytesIO(b"a b\r\nc\n\nd"))) == [(1, "a b"), (2, "c"), (3, ""), (4, "d")]
    assert list(iter_strict_lines(io.StringIO("a\nb\n"))) == [(1, "a"), (2, "b")]
    for data, needle in [(b"ok\ncaf\xe9\n", "not UTF-8"), (b"ok\na\x00b\n", "NUL byte at byte 2 of the line"),
                         (b"ok\n" + b"\x7fELF" + bytes(range(1, 10)) * 500 + b"\n", "control character U+007F")]:
        with pytest.raises(CorpusFormatError) as e:
            list(iter_strict_lines(io.BytesIO(data)))
        assert needle in one_line_error(e, "<stdin>", 2)
