"""Best paths against pynini; sampling against exact path probabilities; label strings of paths."""

from __future__ import annotations

import numpy as np
import pynini
import pytest

from conftest import backoff_machine, random_machine
from fsmlearn.algo import (arc_posteriors, best_path, compose, k_best_paths, label_strings, sample_paths,
                           total_weight)
from fsmlearn.errors import ArgumentError, NoAcceptingPathError
from fsmlearn.fsm import PHI, Machine, SymbolTable
from fsmlearn.testing import chi2_sf, enumerate_paths


@pytest.mark.parametrize("cyclic", [False, True])
def test_best_path_matches_pynini(rng, cyclic):
    for _ in range(5):
        m = random_machine(rng, 60, 300, cyclic=cyclic, semiring="tropical", arc_type="log64")
        p = best_path(m)
        f = m.to_pynini("standard")
        sp = pynini.shortestpath(f)
        ref = float(pynini.shortestdistance(sp, reverse=True)[sp.start()].to_string())
        assert p.weight == pytest.approx(ref, rel=1e-5)
        w, fin = m.neglog_weights()
        assert p.weight == pytest.approx(w[p.arcs].sum() + fin[p.states[-1]], abs=1e-9)
        assert p.states[0] == m.start


def test_k_best_paths_are_the_cheapest_paths_by_enumeration(rng):
    for trial in range(6):
        m = random_machine(rng, 9, 18, cyclic=False, semiring="tropical", arc_type="log64")
        w, f = m.neglog_weights()
        costs = sorted(-np.log(p) for _, p in enumerate_paths(m))
        for k in (1, 3, len(costs) + 2):
            got = k_best_paths(m, k)
            assert len(got) == min(k, len(costs))
            assert [p.weight for p in got] == pytest.approx(costs[:len(got)], abs=1e-9)
            for p in got:       # each a path of the machine with the cost it says
                assert p.states[0] == m.start and np.all(m.arc_src[p.arcs] == p.states[:-1])
                assert p.weight == pytest.approx(w[p.arcs].sum() + f[p.states[-1]], abs=1e-9)
            assert len({tuple(p.arcs) for p in got}) == len(got)
        assert k_best_paths(m, 1)[0].weight == pytest.approx(best_path(m).weight, abs=1e-9)


def test_k_best_paths_match_pynini_nshortest(rng):
    for _ in range(4):
        m = random_machine(rng, 40, 160, cyclic=False, semiring="tropical", arc_type="log64")
        sp = pynini.shortestpath(m.to_pynini("standard"), nshortest=7)
        ref = sorted(-np.log(p) for _, p in enumerate_paths(Machine.from_pynini(sp, semiring="tropical")))
        assert len(ref) == 7
        got = [p.weight for p in k_best_paths(m, 7)]
        assert got == pytest.approx(ref, rel=1e-5)


def test_k_best_paths_refuses_cycles_and_bad_k(rng):
    m = random_machine(rng, 8, 30, cyclic=True, semiring="tropical", arc_type="log64")
    with pytest.raises(ArgumentError, match="cycle"):
        k_best_paths(m, 2)
    with pytest.raises(ArgumentError, match="k must be an integer"):
        k_best_paths(m, 0)
    empty = Machine.from_arcs(2, 0, {}, [0], [1], [1], weight=[0.0])
    with pytest.raises(NoAcceptingPathError, match="accepts no string"):
        k_best_paths(empty, 3)


def test_best_path_of_empty_language():
    m = Machine.from_arcs(2, 0, {}, [0], [1], [1], weight=[0.0])
    with pytest.raises(NoAcceptingPathError, match="accepts no string"):
        best_path(m)
    with pytest.raises(NoAcceptingPathError, match="accepts no string"):
        sample_paths(m, 3)


def test_sampling_matches_path_probabilities(rng):
    m = random_machine(rng, 8, 14, cyclic=False, mass=0.8)
    paths = list(enumerate_paths(m))
    probs = {arcs: p for arcs, p in paths}
    z = sum(probs.values())
    S = sample_paths(m, 40000, seed=3)
    counts = {}
    for i in range(len(S)):
        k = tuple(int(a) for a in S.path(i))
        counts[k] = counts.get(k, 0) + 1
    assert set(counts) <= set(probs)
    keys = list(probs)
    obs = np.array([counts.get(k, 0) for k in keys], float)
    exp_ = np.array([probs[k] / z for k in keys]) * len(S)
    keep = exp_ >= 5
    obs = np.r_[obs[keep], obs[~keep].sum()]
    exp_ = np.r_[exp_[keep], exp_[~keep].sum()]
    stat = float(((obs - exp_) ** 2 / np.maximum(exp_, 1e-12)).sum())
    assert chi2_sf(stat, len(obs) - 1) > 1e-3


def test_sampling_arc_frequencies_on_a_cyclic_machine(rng):
    m = random_machine(rng, 30, 150, cyclic=True, mass=0.85)
    S = sample_paths(m, 30000, seed=9)
    freq = np.bincount(S.arcs, minlength=m.num_arcs) / len(S)
    post = arc_posteriors(m)
    # binomial-ish standard error of a count per path, generous factor
    se = np.sqrt(np.maximum(post, 1e-4) * 4 / len(S))
    assert np.all(np.abs(freq - post) < 6 * se)


def test_sampling_is_reproducible(rng):
    m = random_machine(rng, 30, 150)
    a = sample_paths(m, 100, seed=42)
    b = sample_paths(m, 100, seed=42)
    c = sample_paths(m, 100, seed=43)
    assert np.array_equal(a.arcs, b.arcs) and not np.array_equal(a.arcs, c.arcs)


def test_threaded_sampling_is_reproducible_and_well_formed(rng):
    m = random_machine(rng, 30, 150, cyclic=True, mass=0.85)
    a = sample_paths(m, 50000, seed=42, threads=2)
    b = sample_paths(m, 50000, seed=42, threads=2)
    assert np.array_equal(a.arcs, b.arcs) and np.array_equal(a.ptr, b.ptr)
    assert len(a) == 50000 and a.ptr[-1] == a.arcs.size
    for i in (0, 24999, 25000, 49999):   # paths on both sides of the split are paths
        p = a.path(i)
        if p.size:
            assert m.arc_src[p[0]] == m.start
            assert np.array_equal(m.dst[p[:-1]], m.arc_src[p[1:]])
    freq = np.bincount(a.arcs, minlength=m.num_arcs) / len(a)
    post = arc_posteriors(m)
    se = np.sqrt(np.maximum(post, 1e-4) * 4 / len(a))
    assert np.all(np.abs(freq - post) < 6 * se)


def test_compose_matches_pynini(rng):
    # an epsilon-free weighted acceptor composed with a rewrite transducer
    words = ["xxy", "yx", "xyxy", "yyy", "x"]
    a = pynini.union(*[pynini.accep(w, weight=pynini.Weight("log64", 0.3 * i + 0.1), arc_type="log64")
                       for i, w in enumerate(words)]).optimize()
    sigma = pynini.union("x", "y").closure()
    b = pynini.cdrewrite(pynini.cross("x", "z"), "y", "", sigma).optimize()
    b = pynini.arcmap(b, map_type="to_log64")
    ours = compose(Machine.from_pynini(a), Machine.from_pynini(b))
    ref = pynini.compose(a, b)
    z = float(pynini.shortestdistance(ref, reverse=True)[ref.start()].to_string())
    assert total_weight(ours) == pytest.approx(z, abs=1e-7)
    assert pynini.equivalent(pynini.determinize(ours.to_pynini()).optimize(),
                             pynini.determinize(ref).optimize())


# ---------------------------------------------------------------- label strings


def test_label_strings_of_samples_and_paths():
    rng = np.random.default_rng(8)
    m = backoff_machine(rng, V=4, order=3)            # phi arcs: sampled paths include them
    table = SymbolTable(["<eps>", "w", "x", "y", "z"], name="words")
    mt = m.replace(isyms=table)
    S = sample_paths(mt, 300, seed=4)
    assert PHI in mt.ilabel[S.arcs]                    # (the failure arcs are in the arcs)
    seqs = S.label_sequences(mt)
    got = label_strings(mt, S)
    assert got == [" ".join(table.symbol(int(x)) for x in s) for s in seqs]
    assert all("<eps>" not in s for s in got)
    # without a table: label ids; an acceptor's output side is its input side
    assert label_strings(m, S, sep="-") == ["-".join(str(int(x)) for x in s) for s in seqs]
    assert label_strings(mt, S, side="output") == got
    # a list of arc-id arrays, or of Paths, gives the same strings
    assert label_strings(mt, [S.path(i) for i in range(len(S))]) == got
    assert label_strings(mt, []) == []
    assert label_strings(mt, sample_paths(mt, 0)) == []


def test_label_strings_of_a_transducers_best_path():
    rng = np.random.default_rng(9)
    base = random_machine(rng, 12, 40, cyclic=False, labels=3)
    isyms = SymbolTable(["<eps>", "a", "b", "c"], name="in")
    osyms = SymbolTable(["<eps>", "A", "B", "C"], name="out")
    ol = np.where(np.arange(base.num_arcs) % 4 == 0, 0, base.ilabel % 3 + 1)      # some epsilon outputs
    m = Machine.from_arcs(base.num_states, base.start, base.final, base.arc_src, base.dst, base.ilabel, ol,
                          base.weight, isyms=isyms, osyms=osyms)
    p = best_path(m)
    assert label_strings(m, p) == [" ".join(isyms.symbol(int(x)) for x in p.ilabels)] == [p.input_string(m)]
    assert label_strings(m, p, side="output", sep="") == \
        ["".join(osyms.symbol(int(x)) for x in p.olabels if x != 0)] == [p.output_string(m, sep="")]
    assert label_strings(m, [p, p.arcs]) == label_strings(m, p) * 2
    with pytest.raises(ArgumentError, match="side must be 'input' or 'output'"):
        label_strings(m, p, side="both")
    with pytest.raises(ArgumentError, match=f"arc id {m.num_arcs} is out of range"):
        label_strings(m, [np.array([0, m.num_arcs])])
