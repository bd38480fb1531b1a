"""``fsmlearn trf``: scoring text with a saved model, and refused inputs (exit 2, one line)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fsmlearn.cli.main import main
from fsmlearn.trf.augsa import AugSAConfig, train_augsa
from fsmlearn.trf.features import as_corpus, build_features, make_templates
from fsmlearn.trf.io import save_trf


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    vocab = ["the", "house", "is", "red", "<unk>"]
    train = as_corpus([rng.integers(0, 5, rng.integers(1, 6)) for _ in range(200)])
    fs = build_features(train, 5, make_templates("w+c", 2), classes=np.array([0, 1, 0, 1, 1]))
    cfg = AugSAConfig(samples=20, chains=2, iterations=30, t_c=10, t0=10, max_length=4, long=True)
    model, _ = train_augsa(fs, train, cfg)
    path = tmp_path_factory.mktemp("trf") / "m.npz"
    save_trf(model, path, vocab)
    return path, model, vocab


def test_score_prints_the_models_perplexity(model_file, tmp_path, capsys):
    path, model, vocab = model_file
    text = tmp_path / "t.txt"
    text.write_text("the house is red\nred red\nthe blue house is red the house\n")
    assert main(["trf", "score", str(path), str(text), "--sentences"]) == 0
    out = capsys.readouterr()
    lps = [float(x) for x in out.out.split()]
    ids = [[0, 1, 2, 3], [3, 3], [0, 4, 1, 2, 3, 0, 1]]
    want = model.log_probs(as_corpus(ids))
    assert np.allclose(lps, want, atol=1e-5)
    ppl = math.exp(-want.sum() / (13 + 3))
    assert f"perplexity {ppl:.2f}" in out.err and "1 <unk>" in out.err


@pytest.mark.parametrize("content,match", [("the house\n\nred\n", ":2: an empty sentence"),
                                           (b"the \xff house\n", ":1: bytes that are not UTF-8")])
def test_bad_text_is_refused_with_file_and_line(model_file, tmp_path, capsys, content, match):
    text = tmp_path / "bad.txt"
    text.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert main(["trf", "score", str(model_file[0]), str(text)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fsmlearn: error: ") and match in err[0] and str(text) in err[0]


@pytest.mark.parametrize("argv,match", [(["trf", "lm", "--hours", "-1"], "hours = -1.0"),
                                        (["trf", "lm", "--classes", "1"], "classes = 1"),
                                        (["trf", "morph", "--runs", "augsa,xx"], "unknown runs"),
                                        (["trf", "morph", "--max-length", "0"], "max_length = 0")])
def test_options_out_of_range_are_refused(argv, match, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1


def test_a_damaged_model_file_is_refused(model_file, tmp_path, capsys):
    bad = tmp_path / "cut.npz"
    bad.write_bytes(model_file[0].read_bytes()[:500])
    text = tmp_path / "t.txt"
    text.write_text("the house\n")
    assert main(["trf", "score", str(bad), str(text)]) == 2
    assert str(bad) in capsys.readouterr().err
