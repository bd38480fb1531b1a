"""Google Web1T-style count directories."""

from __future__ import annotations

import gzip

import pytest

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
    d = tmp_path / "w"
    (d / "1gms").mkdir(parents=True)
    (d / "1gms" / "vocab").write_text("the\t5\n<S>\t2\n</S>\t2\n")
    (d / "2gms").mkdir()
    (d / "2gms" / "2gm-0000").write_text("<S> the\t2\nthe cat\t3\n")
    with pytest.raises(CorpusFormatError) as e:
        read_web1t(d)
    assert e.value.line == 2 and "word 'cat' is not in 1gms/vocab" in str(e.value)
    (d / "2gms" / "2gm-0000").write_text("<S> the\t2\nthe </S>\tmany\n")
    with pytest.raises(CorpusFormatError, match="bad count 'many'"):
        read_web1t(d)
    with pytest.raises(CorpusFormatError, match="no 1gms/vocab"):
        read_web1t(tmp_path / "nothing")


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
