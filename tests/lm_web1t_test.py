"""Google Web1T-style count directories."""

from __future__ import annotations

import gzip

import pytest

from conftest import bigram_count_dir
from fsmlearn.lm.web1t import read_web1t, write_web1t
from fsmlearn.errors import CorpusFormatError
from fsmlearn.lm.counts import count_ngrams


def test_round_trip_and_cutoffs(tmp_path):
    sents = ["the cat sat", "the cat ran", "a dog sat", "the cat sat"] * 3 + ["once only"]
    c = count_ngrams(sents, 3)
    d = tmp_path / "w"
    sizes = write_web1t(c, d)
    assert (d / "1gms" / "vocab.gz").exists() and (d / "3gms" / "3gm-0000.gz").exists()
    with gzip.open(d / "2gms" / "2gm-0000.gz", "rt") as f:
        lines = f.read().splitlines()
    assert "<S> the\t9" in lines and lines == sorted(lines, key=lambda s: s.split("\t")[0].encode())
    back = read_web1t(d)
    assert back.sizes == c.sizes == sizes
    for k in range(3):
        a = {tuple(back.vocab[w] for w in r): int(n) for r, n in zip(back.ngrams[k], back.counts[k])}
        b = {tuple(c.vocab[w] for w in r): int(n) for r, n in zip(c.ngrams[k], c.counts[k])}
        assert a == b
    cut = write_web1t(c, d, cutoffs=3)            # replaces the directory
    assert cut[1] < sizes[1] and cut[2] < sizes[2]
    back = read_web1t(d)
    assert back.cutoffs[1] >= 3 and back.sizes == cut
    kb = write_web1t(c, tmp_path / "kb", cutoffs=3, keep_bigrams=True)
    assert kb[1] == sizes[1] and kb[2] == cut[2]


def test_reader_errors(tmp_path):
    d = bigram_count_dir(tmp_path / "w", "<S> the\t2\nthe cat\t3\n")
    with pytest.raises(CorpusFormatError) as e:
        read_web1t(d)
    assert e.value.line == 2 and "word 'cat' is not in 1gms/vocab" in str(e.value)
    (d / "2gms" / "2gm-0000").write_text("<S> the\t2\nthe </S>\tmany\n")
    with pytest.raises(CorpusFormatError, match="count 'many' is not a positive integer"):
        read_web1t(d)
    with pytest.raises(CorpusFormatError, match="not a directory"):
        read_web1t(tmp_path / "nothing")


@pytest.mark.parametrize("change,where,line,needle", [
    (("2gms/2gm-0000", "<S> the\t2\nthe </S>\t0\n"), "2gms/2gm-0000", 2, "count '0' is not a positive"),
    (("2gms/2gm-0000", "the </S>\t2\n<S> the\t2\n"), "2gms/2gm-0000", 2, "out of order"),
    (("2gms/2gm-0000", "<S> the\t2\n<S> the\t2\n"), "2gms/2gm-0000", 2, "listed twice"),
    (("2gms/2gm-0000", "<S> the\t2\nthe </S>\t9\n"), "2gms/2gm-0000", 2, "count 9 exceeds"),
    (("2gms/2gm-0000", "<S> the the\t2\n"), "2gms/2gm-0000", 1, "expected 2 words"),
    (("2gms/2gm-0000", "<S> the\t2\t3\n"), "2gms/2gm-0000", 1, "with one TAB"),
    (("2gms/2gm-0000", b"<S> th\xe9\t2\n"), "2gms/2gm-0000", 1, "not UTF-8 text (tried utf-8; byte 0xe9)"),
    (("1gms/vocab", "the\t5\n<S>\t2\nthe\t1\n"), "1gms/vocab", 3, "word 'the' listed twice"),
    (("1gms/vocab", "the\t-5\n"), "1gms/vocab", 1, "count '-5' is not a positive integer"),
    (("2gms/2gm-0002", "x\t1\n"), "2gms", None, "2gm-0001 is missing"),
    (("2gms/notes.txt", "x"), "2gms", None, "unexpected file 'notes.txt'"),
    (("4gms/4gm-0000", "a b c d\t1\n"), "", None, "3gms/ is missing but 4gms/ is present"),
    (("2gms/2gm.idx", "2gm-0000\t<S> the\n2gm-0001\tthe cat\n"), "2gms/2gm.idx", None, "the index lists"),
    (("2gms/2gm-0000.gz", b"\x1f\x8b\x08\x00garbage"), "2gms", None, "same file number"),
])
def test_every_problem_of_a_count_directory_is_named(tmp_path, change, where, line, needle):
    d = bigram_count_dir(tmp_path / "w", "<S> the\t2\nthe </S>\t2\n")
    name, content = change
    (d / name).parent.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(CorpusFormatError) as e:
        read_web1t(d)
    assert needle in str(e.value), str(e.value)
    assert e.value.path == str(d / where).rstrip("/") and e.value.line == line, str(e.value)


def test_a_broken_gzip_file_is_named(tmp_path):
    import gzip
    d = tmp_path / "w"
    (d / "1gms").mkdir(parents=True)
    (d / "1gms" / "vocab").write_text("the\t5\n<S>\t2\n</S>\t2\n")
    (d / "2gms").mkdir()
    data = gzip.compress(b"<S> the\t2\nthe </S>\t2\n" * 50)
    (d / "2gms" / "2gm-0000.gz").write_bytes(data[:len(data) // 2])
    with pytest.raises(CorpusFormatError, match="cannot decompress or read") as e:
        read_web1t(d)
    assert e.value.path == str(d / "2gms" / "2gm-0000.gz")


def test_lines_are_in_byte_order_with_prefixes_and_unicode(tmp_path):
    import gzip
    sents = ["a a! ab", "ab a", "é a!", "a é é", "a! a", "b a a!"] * 2
    c = count_ngrams(sents, 3)
    write_web1t(c, tmp_path / "w")
    for k in (2, 3):
        with gzip.open(tmp_path / "w" / f"{k}gms" / f"{k}gm-0000.gz", "rb") as f:
            lines = f.read().split(b"\n")[:-1]
        keys = [ln.split(b"\t")[0] for ln in lines]
        assert keys == sorted(keys) and len(keys) == c.sizes[k - 1]
        idx = (tmp_path / "w" / f"{k}gms" / f"{k}gm.idx").read_text(encoding="utf-8")
        assert idx == f"{k}gm-0000.gz\t{keys[0].decode()}\n"
    back = read_web1t(tmp_path / "w")
    for k in range(3):
        a = {tuple(c.vocab[i] for i in r): int(n) for r, n in zip(c.ngrams[k], c.counts[k])}
        b = {tuple(back.vocab[i] for i in r): int(n) for r, n in zip(back.ngrams[k], back.counts[k])}
        assert a == b


def test_fuzz_found_a_count_beyond_int64():
    """tests/data/fuzz/lm/web1t-count-overflow: a vocabulary count of 23 digits ended in an
    OverflowError from the count array; now a located error."""
    from pathlib import Path
    d = Path(__file__).parent / "data" / "fuzz" / "lm" / "web1t-count-overflow"
    with pytest.raises(CorpusFormatError, match="larger than a 64-bit count can hold") as e:
        read_web1t(d)
    assert e.value.path == str(d / "1gms" / "vocab") and e.value.line == 1


def test_a_failed_write_leaves_nothing_behind(tmp_path):
    c = count_ngrams(["a b c", "b c a"], 3)
    out = tmp_path / "w"

    def fail(msg):
        raise KeyboardInterrupt(msg)
    with pytest.raises(KeyboardInterrupt):
        write_web1t(c, out, progress=fail)
    assert list(tmp_path.iterdir()) == []
    write_web1t(c, out)
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    with pytest.raises(KeyboardInterrupt):
        write_web1t(c, out, cutoffs=2, progress=fail)
    assert [p.name for p in tmp_path.iterdir()] == ["w"]
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before


def test_a_written_count_directory_gets_an_ordinary_folder_mode(tmp_path):
    import os
    import stat
    from fsmlearn.lm.counts import count_ngrams
    from fsmlearn.lm.web1t import write_web1t
    mask = os.umask(0o022)
    try:
        write_web1t(count_ngrams([["a", "b"], ["b", "a"]], 2), tmp_path / "c")
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "c").stat().st_mode) == 0o755
