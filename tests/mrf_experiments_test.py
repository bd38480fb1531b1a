"""The MRF experiments and their CLI at toy scale: reports, plots, saved models."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from fsmlearn.cli import mrf as cli_mrf
from fsmlearn.errors import ArgumentError
from fsmlearn.experiments.mrf_lm import LMConfig, nearest_neighbours, pmi_init, run_lm
from fsmlearn.experiments.mrf_synthetic import SyntheticConfig, run_synthetic
from fsmlearn.experiments.mrf_tag import TagConfig, accuracy_of, run_tag
from fsmlearn.mrf import MRFModel, collect_moments, load_mrf


def test_synthetic_report_has_figure_5s_shape(tmp_path):
    r = run_synthetic(SyntheticConfig(length=6, seeds=2, max_iter=40, report=tmp_path / "s.json"))
    assert (tmp_path / "s.png").stat().st_size > 0
    saved = json.loads((tmp_path / "s.json").read_text())
    assert saved["summary"] == r["summary"] and len(saved["runs"]) == 2
    for run in r["runs"]:
        lt = run["lifted_training"]
        # the bound is below the exact likelihood of the same parameters at every iteration
        assert all(b <= e + 1e-9 for b, e in zip(lt["bound"], lt["exact_log_likelihood"]))
        # and exact training reaches at least what the lifted parameters get
        assert run["final"]["exact_optimum"] >= run["final"]["lifted_exact_log_likelihood"] - 1e-6
        assert run["exact_training"]["log_likelihood"][-1] > run["exact_training"]["log_likelihood"][0]
    with pytest.raises(ArgumentError):
        SyntheticConfig(seeds=0).check()


def test_lm_on_a_small_vocabulary(tmp_path):
    cfg = LMConfig(rank=3, vocab=30, max_iter=3, tighten_iter=20, report=tmp_path / "lm.json",
                   model=tmp_path / "lm.npz")
    r = run_lm(cfg)
    assert r["C"] == 32 and 1 <= len(r["history"]) <= 3
    assert all(np.isfinite(e["valid_bound"]) and e["bound"] < 0 for e in r["history"])
    assert r["best"]["valid_bound"] == max(e["valid_bound"] for e in r["history"])
    m = load_mrf(tmp_path / "lm.npz")
    assert m.symbols[0] == "<S>" and m.rank == 3 and m.C == 32
    assert (tmp_path / "lm.png").exists() and set(r["nearest_neighbours"]) <= set(m.symbols)
    with pytest.raises(ArgumentError, match="full-rank"):
        LMConfig(rank=None).check()


def test_nearest_neighbours_by_cosine():
    U = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [-1.0, 0.0]])
    nn = nearest_neighbours(U, ["a", "b", "c", "d"], ["a", "zz"], k=2)
    assert [w for w, _ in nn["a"]] == ["b", "c"] and "zz" not in nn


def test_cli_parses_and_runs_synthetic(tmp_path):
    p = argparse.ArgumentParser(prog="fsmlearn")
    sub = p.add_subparsers(dest="command")
    cli_mrf.add_parser(sub)
    args = p.parse_args(["mrf", "synthetic", "--length", "5", "--seeds", "1", "--max-iter", "5", "-q",
                         "--report", str(tmp_path / "s.json")])
    assert args.func(args) == 0 and (tmp_path / "s.json").exists()
    args = p.parse_args(["mrf", "lm", "--rank", "0", "--vocab", "100"])
    assert args.rank == 0 and args.vocab == 100 and args.tighten == "subgradient"
    args = p.parse_args(["mrf", "tag-wsj", "--max-iter", "7", "--no-hmm"])
    assert args.max_iter == 7 and args.no_hmm and args.tighten == "lbfgs"


def test_tag_experiment_on_a_toy_treebank(tmp_path):
    rng = np.random.default_rng(0)
    lex = {"D": ["the", "a"], "N": ["dog", "cat", "dogs"], "V": ["runs", "sees"]}
    def sent():
        return [(rng.choice(lex["D"]), "D"), (rng.choice(lex["N"]), "N"), (rng.choice(lex["V"]), "V")]
    train = [sent() for _ in range(40)]
    test = [[("the", "D"), ("cats", "N"), ("sees", "V")]]          # "cats": unknown, suffix -s
    r = run_tag(TagConfig(max_iter=40, eval_every=20, hmm=False, l2=1e-4, report=tmp_path / "t.json",
                          model=tmp_path / "t.npz"), train=train, test=test)
    from fsmlearn.mrf import decode, load_tagger
    assert decode(load_tagger(tmp_path / "t.npz"), [["a", "cats", "runs"]]) == [["D", "N", "V"]]
    assert r["mrf"]["total"] == 1.0 and r["mrf"]["unknown_tokens"] == 1
    assert json.loads((tmp_path / "t.json").read_text())["mrf"] == r["mrf"] and (tmp_path / "t.png").exists()
    a = accuracy_of([["D", "V"]], [[("the", "D"), ("zz", "N")]], {"the"})
    assert a["total"] == 0.5 and a["unknown"] == 0.0 and a["known"] == 1.0
    with pytest.raises(ArgumentError):
        TagConfig(K=2).check()
    r3 = run_tag(TagConfig(window=3, centre_weight=0.8, max_iter=30, eval_every=30, hmm=False, l2=1e-4,
                           report=tmp_path / "w.json", model=tmp_path / "w.npz"), train=train, test=test)
    w = load_tagger(tmp_path / "w.npz")                              # a window tagger is saved whole
    assert w.offsets == (0, 1, -1) == tuple(r3["offsets"]) and np.abs(w.context_U).sum() > 0
    got = accuracy_of(decode(w, [[x for x, _ in s] for s in test]), test, {x for s in train for x, _ in s})
    assert got == r3["mrf"]


def test_pmi_init_is_the_positive_pmi_or_its_svd():
    rng = np.random.default_rng(2)
    C, K = 5, 2
    x = rng.integers(0, C, 60)
    mom = collect_moments(x, C, K)
    full = pmi_init(MRFModel.init(C, K), mom, scale=0.5)
    for l in range(1, K + 1):
        want = np.zeros((C, C))
        for u in range(C):
            for v in range(C):
                c = np.sum((x == u) & (np.roll(x, -l) == v))
                if c:
                    want[u, v] = max(0.0, 0.5 * np.log(c * 60 / (np.sum(x == u) * np.sum(x == v))))
        np.testing.assert_allclose(full.pairwise(l), want, atol=1e-12)
    low = pmi_init(MRFModel.init(C, K, rank=C - 1), mom, scale=0.5)     # svds needs k < min(shape)
    err = max(np.abs(low.pairwise(l) - full.pairwise(l)).max() for l in (1, 2))
    assert low.rank == C - 1 and err < np.abs(full.pair).max()
