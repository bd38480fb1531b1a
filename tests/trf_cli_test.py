"""``fsmlearn trf``: scoring text with a saved model, and refused inputs (exit 2, one line)."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest

from fsmlearn.cli.main import main
from fsmlearn.errors import ArgumentError
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
    rows = [line.split("\t") for line in out.out.splitlines()]
    ids = [[0, 1, 2, 3], [3, 3], [0, 4, 1, 2, 3, 0, 1]]
    want = model.log_probs(as_corpus(ids))
    assert np.allclose([float(a) for a, _ in rows], want / math.log(10), atol=1e-5)     # log10 by default
    assert [int(b) for _, b in rows] == [0, 0, 1]                                        # <unk> per line
    ppl = math.exp(-want.sum() / (13 + 3))
    assert f"perplexity {ppl:.2f}" in out.err and "1 <unk>" in out.err
    assert main(["trf", "score", str(path), str(text), "--sentences", "--base", "e", "--threads", "2"]) == 0
    out = capsys.readouterr()
    assert np.allclose([float(x.split("\t")[0]) for x in out.out.splitlines()], want, atol=1e-5)
    assert f"perplexity {ppl:.2f}" in out.err and "ln p" in out.err


def test_score_reads_stdin_scores_empty_lines_and_unknown_bytes(model_file, tmp_path, monkeypatch, capsys):
    path, model, vocab = model_file
    data = b"the house\n\nthe caf\xe9 \x00 red\nred"       # an empty line, bytes not UTF-8, a NUL, no last newline
    for argv in (["trf", "score", str(path), "--sentences"], ["trf", "score", str(path), "-", "--sentences"]):
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
        assert main(argv) == 0
        out = capsys.readouterr()
        rows = [line.split("\t") for line in out.out.splitlines()]
        assert len(rows) == 4
        want = model.log_probs(as_corpus([[0, 1], [0, 4, 4, 3], [3]])) / math.log(10)
        assert float(rows[1][0]) == -math.inf and rows[1][1] == "0"      # length 0: probability 0 under a TRF
        assert np.allclose([float(rows[i][0]) for i in (0, 2, 3)], want, atol=1e-5)
        assert [r[1] for r in rows] == ["0", "0", "2", "0"]
        assert "<stdin>: 4 sentences" in out.err and "1 sentences of probability 0" in out.err
        ppl = math.exp(-(want.sum() * math.log(10)) / (2 + 4 + 1 + 3))
        assert f"perplexity inf" in out.err and f"perplexity of the others {ppl:.2f}" in out.err


def test_threads_give_the_same_scores(model_file, tmp_path):
    from fsmlearn.trf.score import TRFScorer, PARALLEL_TOKENS
    path, model, vocab = model_file
    rng = np.random.default_rng(1)
    corpus = as_corpus([rng.integers(0, 5, rng.integers(1, 4)) for _ in range(PARALLEL_TOKENS)])
    one = TRFScorer(model, 1).log_probs(corpus)
    assert np.allclose(one, model.log_probs(corpus), atol=1e-9)
    assert np.allclose(TRFScorer(model, 2).log_probs(corpus), one, atol=1e-12)
    with pytest.raises(ArgumentError):
        TRFScorer(model, -1)


@pytest.mark.parametrize("content,match", [(b"", ": the file is empty"),
                                           (b"the \x00 house\n", ":1: binary data, not text")])
def test_bad_text_is_refused_with_file_and_line(model_file, tmp_path, capsys, content, match):
    text = tmp_path / "bad.txt"
    text.write_bytes(content)
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


def test_trf_train_on_own_text_scores_and_resumes(tmp_path, capsys):
    """fsmlearn trf train on a toy text (two word classes in fixed slots): the model is written,
    trf score reads it, a sentence in the text's word order scores above its reversal, and
    --resume goes on from the checkpoint (a text of another vocabulary is refused: the feature
    keys are word ids, which another text can reuse)."""
    import random
    r = random.Random(3)
    A, F = ["cat", "dog", "cow"], ["bread", "rice", "soup"]
    lines = [f"the {r.choice(A)} eats {r.choice(F)}" + (" today" if r.random() < .3 else "") for _ in range(300)]
    (tmp_path / "t.txt").write_text("\n".join(lines) + "\n")
    args = ["trf", "train", str(tmp_path / "t.txt"), "-o", str(tmp_path / "m.npz"), "--features", "class",
            "--classes", "3", "--samples", "20", "--chains", "2", "--iterations", "30", "--eval-every", "10",
            "--refine-iterations", "5", "--max-length", "10", "-q"]
    assert main(args + ["--threads", "1"]) == 0
    from fsmlearn.trf.io import load_trf
    model, vocab = load_trf(tmp_path / "m.npz")
    assert vocab[-1] == "<unk>" and set(vocab[:-1]) == {"the", "eats", "today"} | set(A) | set(F)
    assert [c["iteration"] for c in model.meta["curve"]] == [10, 20, 30]
    assert model.features.templates.names == ("w", "c")       # the preset "class"
    (tmp_path / "s.txt").write_text("the cat eats rice\nrice eats the cat\n")
    capsys.readouterr()
    assert main(["trf", "score", str(tmp_path / "m.npz"), str(tmp_path / "s.txt"), "--sentences"]) == 0
    scores = [float(x.split("\t")[0]) for x in capsys.readouterr().out.splitlines()]
    assert scores[0] > scores[1]
    first = np.array(model.lam)
    assert main(args[:4] + [str(tmp_path / "m2.npz")] + args[5:] + ["--threads", "2"]) == 0
    assert np.array_equal(load_trf(tmp_path / "m2.npz")[0].lam, first)     # the chains do not depend on threads
    assert main(args[:-1] + ["--iterations", "40", "--resume", "-q"]) == 0
    assert [c["iteration"] for c in load_trf(tmp_path / "m.npz")[0].meta["curve"]] == [10, 20, 30, 40]
    (tmp_path / "o.txt").write_text("\n".join(x.replace("cat", "lion") for x in lines) + "\n")
    capsys.readouterr()
    assert main(["trf", "train", str(tmp_path / "o.txt")] + args[3:] + ["--resume"]) == 2
    assert "another vocabulary" in capsys.readouterr().err


def test_trf_rescore_picks_what_the_model_prefers(tmp_path, capsys):
    """A made-up n-best list (both layouts) whose own scores prefer scrambled word orders: with
    the TRF's score added the grammatical hypotheses win; weights tuned on a development list
    find that; --ref and --oracle print the WERs."""
    import random
    r = random.Random(3)
    A, F = ["cat", "dog", "cow"], ["bread", "rice", "soup"]
    lines = [f"the {r.choice(A)} eats {r.choice(F)}" for _ in range(300)]
    (tmp_path / "t.txt").write_text("\n".join(lines) + "\n")
    assert main(["trf", "train", str(tmp_path / "t.txt"), "-o", str(tmp_path / "m.npz"), "--features", "w+c",
                 "--classes", "3", "--samples", "20", "--chains", "2", "--iterations", "30", "--eval-every", "10",
                 "--refine-iterations", "5", "--max-length", "10", "-q"]) == 0
    (tmp_path / "nb.txt").write_text("a ||| rice eats the cat ||| f=1 ||| -1.0\na ||| the cat eats rice ||| f=2 ||| -1.5\n"
                                     "b ||| soup the eats dog ||| f=1 ||| -2.0\nb ||| the dog eats soup ||| f=2 ||| -2.2\n")
    (tmp_path / "nb.tsv").write_text("a\trice eats the cat\t-1.0\na\tthe cat eats rice\t-1.5\n"
                                     "b\tsoup the eats dog\t-2.0\nb\tthe dog eats soup\t-2.2\n")
    (tmp_path / "ref.txt").write_text("the cat eats rice\nthe dog eats soup\n")
    capsys.readouterr()
    nb, ref = str(tmp_path / "nb.txt"), str(tmp_path / "ref.txt")
    assert main(["trf", "rescore", str(tmp_path / "m.npz"), nb, "--ref", ref, "--oracle"]) == 0
    out = capsys.readouterr()
    assert out.out == "a\tthe cat eats rice\nb\tthe dog eats soup\n"
    assert "WER 0.00% (8 reference words), oracle WER 0.00%, the list's first 87.50%" in out.err
    assert main(["trf", "rescore", str(tmp_path / "m.npz"), str(tmp_path / "nb.tsv")]) == 0     # the tab layout
    assert capsys.readouterr().out == "a\tthe cat eats rice\nb\tthe dog eats soup\n"
    (tmp_path / "one.txt").write_text("the cat eats rice\n")
    assert main(["trf", "rescore", str(tmp_path / "m.npz"), nb, "--ref", str(tmp_path / "one.txt")]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "1 references for a list of 2 ids" in out.err       # checked before any output
    assert main(["trf", "rescore", str(tmp_path / "m.npz"), nb, "--weights", "1,0"]) == 0
    assert capsys.readouterr().out == "a\trice eats the cat\nb\tsoup the eats dog\n"
    assert main(["trf", "rescore", str(tmp_path / "m.npz"), nb, "--dev", nb, "--dev-ref", ref]) == 0
    out = capsys.readouterr()
    assert out.out == "a\tthe cat eats rice\nb\tthe dog eats soup\n" and "WER 0.00%" in out.err
    (tmp_path / "bad.txt").write_text("a\tthe cat\t-1\nb\tthe dog\tnan\n")
    assert main(["trf", "rescore", str(tmp_path / "m.npz"), str(tmp_path / "bad.txt")]) == 2
    err = capsys.readouterr().err
    assert "bad.txt" in err and ":2" in err and "finite" in err


def test_nbest_word_errors_and_layouts(tmp_path):
    from itertools import product

    from fsmlearn.data.nbest import read_nbest, word_errors
    from fsmlearn.errors import CorpusFormatError

    def brute(h, r):            # the fewest edits, by trying every alignment recursively
        if not h or not r:
            return len(h) + len(r)
        return min(brute(h[1:], r) + 1, brute(h, r[1:]) + 1, brute(h[1:], r[1:]) + (h[0] != r[0]))
    for h, r in product([[], ["a"], ["a", "b"], ["b", "a", "a"]], repeat=2):
        assert word_errors(h, r) == brute(h, r)
    (tmp_path / "l.txt").write_text("x ||| a b ||| f=1 ||| -1\nx ||| b ||| -2\ny ||| c ||| 0\n")
    nb = read_nbest(tmp_path / "l.txt")
    assert nb.ids == ["x", "y"] and nb.hyps == [["a", "b"], ["b"], ["c"]] and nb.ptr.tolist() == [0, 2, 3]
    assert nb.scores.tolist() == [-1.0, -2.0, 0.0]
    (tmp_path / "t.txt").write_text("x\ta b\t-1\nx\tb\t-2\ny\tc\t0\n")
    assert read_nbest(tmp_path / "t.txt").hyps == nb.hyps
    (tmp_path / "m.txt").write_text("x ||| a b ||| -1\nx\tb\t-2\n")
    with pytest.raises(CorpusFormatError, match=r"m\.txt.*2.*tab .* Moses"):
        read_nbest(tmp_path / "m.txt")
    (tmp_path / "s.txt").write_text("x\ta\t-1\ny\tb\t-1\nx\tc\t-1\n")
    with pytest.raises(CorpusFormatError, match="together"):
        read_nbest(tmp_path / "s.txt")


def test_trf_train_lower_is_recorded_and_applied_by_score(tmp_path, capsys):
    """--lower: the model's words are lower-case, and trf score lower-cases the text it reads
    (no <unk> for a capitalised known word) and says so."""
    lines = ["The Cat eats Rice", "the dog eats soup", "A cat eats soup"] * 40
    (tmp_path / "t.txt").write_text("\n".join(lines) + "\n")
    assert main(["trf", "train", str(tmp_path / "t.txt"), "-o", str(tmp_path / "m.npz"), "--features", "ngram",
                 "--classes", "2", "--samples", "10", "--chains", "1", "--iterations", "10", "--eval-every", "10",
                 "--refine-iterations", "0", "--max-length", "6", "--lower", "-q"]) == 0
    from fsmlearn.trf.io import load_trf
    model, vocab = load_trf(tmp_path / "m.npz")
    assert model.meta["lower"] is True and "cat" in vocab and "Cat" not in vocab
    (tmp_path / "s.txt").write_text("THE CAT EATS RICE\n")
    capsys.readouterr()
    assert main(["trf", "score", str(tmp_path / "m.npz"), str(tmp_path / "s.txt")]) == 0
    out = capsys.readouterr().out
    assert "0 <unk> (lower-cased, as the model's text was)" in out



def test_trf_lm_kn_comparison_leaves_no_arpa_unless_asked(tmp_path):
    """trf lm's KN5 comparison scores lmplz's model and removes its ARPA (about 100 MB on
    Brown-LM) unless --kn-arpa names a place to keep it."""
    import random
    from fsmlearn.experiments.trf_lm import LMConfig, _kn5
    from fsmlearn.trf.features import as_corpus
    r = random.Random(1)
    vocab = ["the", "cat", "dog", "eats", "rice", "<unk>"]
    sents = [[0, r.choice([1, 2]), 3, r.choice([4, 5])] for _ in range(200)]
    data = {k: as_corpus(sents[i::3]) for i, k in enumerate(("train", "valid", "test"))}
    out = _kn5(LMConfig(kn_order=3), vocab, data, tmp_path, lambda m: None)
    assert list(tmp_path.iterdir()) == [] and out["arpa"] is None
    assert out["test"].shape == (len(data["test"]),) and np.all(out["test"] < 0)
    kept = _kn5(LMConfig(kn_order=3, kn_arpa=str(tmp_path / "kn.arpa")), vocab, data, tmp_path, lambda m: None)
    assert [p.name for p in tmp_path.iterdir()] == ["kn.arpa"]
    assert np.array_equal(kept["test"], out["test"])
