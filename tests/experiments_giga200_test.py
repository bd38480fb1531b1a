"""The tagger-giga200 pipeline end to end, at toy scale (seed LM of WSJ-small)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from fsmlearn.errors import FsmError
from fsmlearn.experiments.giga200 import Giga200Config, run_giga200
from fsmlearn.tag.hmm import HMM


def test_pipeline_caches_its_stages_and_writes_report_model_and_plot(tmp_path):
    cfg = Giga200Config(cache=str(tmp_path / "cache"), report=str(tmp_path / "rep.json"),
                        model=str(tmp_path / "tagger"), tokens=30_000, seed=5, order=3, cutoff=2,
                        iterations=2, corpus_em_iterations=1, seed_text="wsj-small", seed_order=3)
    log = []
    rep = run_giga200(cfg, progress=log.append)
    on_disk = json.loads((tmp_path / "rep.json").read_text())
    assert on_disk["complete"] and on_disk["ngrams"] == rep["ngrams"] == sum(rep["ngrams_by_order"])
    assert 30_000 <= on_disk["tokens"] < 31_000
    assert [r["iteration"] for r in on_disk["iterations"]] == [0, 1, 2]
    for r in on_disk["iterations"]:
        assert {"iteration", "accuracy", "bound", "seconds", "heldout_loglik"} <= r.keys()
        assert 0.3 < r["accuracy"] < 1.0 and r["bound"] < 0 and r["heldout_loglik"] < 0
    # variational EM never lowers the bound
    b = [r["bound"] for r in on_disk["iterations"]]
    assert b[1] >= b[0] - 1e-9 and b[2] >= b[1] - 1e-9
    assert [r["iteration"] for r in on_disk["corpus_em"]] == [0, 1]
    for r in on_disk["corpus_em"]:
        # the split by the training vocabulary brackets the total
        lo, hi = sorted((r["accuracy_known"], r["accuracy_unknown"]))
        assert lo - 1e-12 <= r["accuracy"] <= hi + 1e-12
    assert on_disk["peak_rss_mb"] > 0 and on_disk["device"].startswith("cpu")
    assert (tmp_path / "rep.png").stat().st_size > 1000
    h = HMM.load(tmp_path / "tagger.hmm")
    assert h.T == 17 and (tmp_path / "tagger.fsm").exists()
    assert not any("cached" in m for m in log)
    # a second run reuses the seed LM, the sampled corpus and the counts
    log2 = []
    rep2 = run_giga200(cfg, progress=log2.append)
    assert sum("cached" in m for m in log2) == 2 and rep2["ngrams"] == rep["ngrams"]
    assert rep2["iterations"][-1]["accuracy"] == pytest.approx(rep["iterations"][-1]["accuracy"])
    # NGRAMS=<dir>: a count directory instead of the stand-in; no corpus EM then
    cfg3 = Giga200Config(cache=str(tmp_path / "none"), report=str(tmp_path / "rep3.json"),
                         model=str(tmp_path / "t3"), ngrams=str(tmp_path / "cache" / "web1t"), order=3,
                         iterations=1)
    rep3 = run_giga200(cfg3)
    assert rep3["ngrams"] == rep["ngrams"] and "corpus_em" not in rep3
    assert not (tmp_path / "none").exists()
    # the n-gram EM stage reports its own peak; one process unless a scheduler is given
    assert on_disk["ngram_em_peak_rss_mb"] > 0 and on_disk["ngram_em_bytes_per_ngram"] > 0
    assert "ngram_em_scheduler" not in on_disk
    # a scheduler given: n-gram EM's passes on two Dask worker processes, the same run
    cfg4 = replace(cfg, report=str(tmp_path / "rep4.json"), model=str(tmp_path / "t4"), corpus_em=False,
                   ngram_em_scheduler="local", workers=2, memory="1G")
    rep4 = run_giga200(cfg4)
    assert rep4["ngram_em_scheduler"] == "local"
    assert [r["bound"] for r in rep4["iterations"]] == pytest.approx([r["bound"] for r in rep2["iterations"]],
                                                                     rel=1e-9)
    assert [r["accuracy"] for r in rep4["iterations"]] == [r["accuracy"] for r in rep2["iterations"]]


def test_bad_ngram_directory_is_named(tmp_path):
    cfg = Giga200Config(ngrams=str(tmp_path / "missing"), report=str(tmp_path / "r.json"))
    with pytest.raises(FsmError, match="missing: not a directory"):
        run_giga200(cfg)
    assert not (tmp_path / "r.json").exists()


def test_device_is_checked_before_any_work(tmp_path, monkeypatch):
    from fsmlearn.errors import ArgumentError
    cfg = Giga200Config(cache=str(tmp_path / "cache"), report=str(tmp_path / "r.json"), device="tpu")
    with pytest.raises(ArgumentError, match="device"):
        run_giga200(cfg)
    import fsmlearn.algo.cuda as fc
    monkeypatch.setattr(fc, "cuda_available", lambda: False)
    cfg = Giga200Config(cache=str(tmp_path / "cache"), report=str(tmp_path / "r.json"), device="cuda")
    with pytest.raises(FsmError, match="CUDA"):
        run_giga200(cfg)
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "cache").exists()
    # a scheduler partitions n-gram EM over CPU workers: refused with the device before any work
    monkeypatch.setattr(fc, "cuda_available", lambda: True)
    cfg = Giga200Config(cache=str(tmp_path / "cache"), report=str(tmp_path / "r.json"), device="cuda",
                        ngram_em_scheduler="local")
    with pytest.raises(ArgumentError, match="--scheduler local .* --device cuda"):
        run_giga200(cfg)
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "cache").exists()


@pytest.mark.parametrize("argv, lm_stages, ngram_em", [
    ([], "local", None),
    (["--scheduler", "local"], "local", "local"),
    (["--scheduler", "in-memory"], "in-memory", None),
    (["--scheduler", "synchronous"], "synchronous", None)])
def test_giga200_runs_ngram_em_in_one_process_unless_a_cluster_is_given(monkeypatch, tmp_path, argv, lm_stages,
                                                                          ngram_em):
    import fsmlearn.experiments.giga200 as g
    from fsmlearn.cli.main import main
    seen = {}

    def fake(cfg, progress=None):
        seen["cfg"] = cfg
        return {"iterations": [{"iteration": 0, "accuracy": 0.5, "bound": -1.0}], "ngrams": 1,
                "ngram_em_seconds_per_iteration": 1.0}
    monkeypatch.setattr(g, "run_giga200", fake)
    assert main(["tag", "giga200", "--cache", str(tmp_path), "-q"] + argv) == 0
    assert seen["cfg"].scheduler == lm_stages and seen["cfg"].ngram_em_scheduler == ngram_em
