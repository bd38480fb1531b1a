"""Layer 1 (data/): the data folder, corpus paths, file ids and reading archive members."""

from __future__ import annotations

import zipfile

import pytest

from fsmlearn import data as C
from fsmlearn.data import locate
from fsmlearn.errors import CorpusFormatError, CorpusNotFoundError, DatasetError, FsmError


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


def test_missing_corpus_raises_corpus_not_found_naming_the_path(tmp_path):
    with pytest.raises(CorpusNotFoundError) as excinfo:
        C.corpus_path("brown", data_dir=tmp_path)
    e = excinfo.value
    where = tmp_path / "corpora" / "brown.zip"
    assert isinstance(e, FsmError) and isinstance(e, FileNotFoundError)
    assert e.path == str(where) and str(where) in str(e)
    with pytest.raises(CorpusNotFoundError, match="brown"):
        C.fileids("brown", data_dir=tmp_path)


def test_missing_member_raises_corpus_not_found(tmp_path):
    (tmp_path / "corpora").mkdir()
    with zipfile.ZipFile(tmp_path / "corpora" / "brown.zip", "w") as zf:
        zf.writestr("brown/ca01", b"a/at\n")
    assert [w for w, _ in locate.read_members("brown", None, tmp_path)][0].endswith("brown/ca01")
    with pytest.raises(CorpusNotFoundError, match="'brown/ca02'") as excinfo:
        list(locate.read_members("brown", ["ca01", "ca02"], tmp_path))
    assert excinfo.value.path.endswith("brown.zip/brown/ca02")


def test_unknown_corpus_names_raise_dataset_errors():
    with pytest.raises(DatasetError, match="'penn'"):
        C.corpus_path("penn")
    with pytest.raises(DatasetError, match="ud_english_ewt"):
        C.fileids("ud_english_ewt")


def test_strict_and_lenient_lines():
    assert locate.strict_lines("x", b"a\r\nb\n") == ["a", "b", ""]
    with pytest.raises(CorpusFormatError, match="not UTF-8") as excinfo:
        locate.strict_lines("x", b"ok\nb\xe9\n")
    assert excinfo.value.line == 2
    assert locate.lenient_lines(b"caf\xc3\xa9\r\nna\xefve \x99\n") == ["caf\u00e9", "na\u00efve \u2122", ""]
