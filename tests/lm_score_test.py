"""lm.score: a model from either file kind, and perplexity as KenLM computes it."""

import math

import kenlm
import pytest

from lm_model_test import conll_sentences
from fsmlearn.lm.model import CompiledLM
from fsmlearn.lm.score import load_lm, perplexity
from fsmlearn.lm.tools import run_lmplz


@pytest.fixture(scope="module")
def arpa(tmp_path_factory):
    d = tmp_path_factory.mktemp("score")
    run_lmplz(conll_sentences()[:2000], 3, d / "m.arpa", discount_fallback=True)
    return d / "m.arpa"


def test_load_lm_reads_arpa_and_compiled_models(arpa, tmp_path):
    a = load_lm(arpa)
    a.save(tmp_path / "m.fsm")
    b = load_lm(tmp_path / "m.fsm")
    assert isinstance(b, CompiledLM) and b.machine.num_arcs == a.machine.num_arcs


def test_perplexity_matches_kenlm(arpa):
    held = conll_sentences()[2000:2100] + ["words never seen xyzzy"]
    r = perplexity(load_lm(arpa), held, batch=7)          # several batches
    k = kenlm.Model(str(arpa))
    lp = sum(k.score(s, bos=True, eos=True) for s in held)
    n = sum(len(s.split()) + 1 for s in held)
    assert r["sentences"] == len(held) and r["tokens"] == n and r["oovs"] >= 1
    assert r["log10prob"] == pytest.approx(lp, rel=1e-6)
    assert r["perplexity"] == pytest.approx(10 ** (-lp / n), rel=1e-6)


def test_perplexity_of_nothing_is_infinite(arpa):
    r = perplexity(load_lm(arpa), [])
    assert r["tokens"] == 0 and math.isinf(r["perplexity"])
