"""n-gram EM (Smith and Eisner): the bound, its counts and gradient, against
brute-force enumeration, the engine's expectation semiring on the materialised
machine, finite differences, and ordinary EM on a corpus."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from conftest import backoff_machine
from fsmlearn.errors import MachineError, NotConvergedError
from fsmlearn.fsm import PHI, Machine
from fsmlearn.tag.ngram_cond import (CondBlocks, d_bound_d_phi_cond, estep_parallel_cond, expected_stats_cond,
                                     phi_gradient_cond)
from fsmlearn.tag.ngram_em import NGramEM
from fsmlearn.tag.ngram_materialise import bound_materialised, joint_posterior_phi, stats_materialised
from fsmlearn.tag.ngram_objective import d_bound_d_phi, estep_parallel, expected_stats, mstep
from fsmlearn.tag.ngram_structure import CqStructure


def random_theta(rng, T, V, allowed):
    lt = np.log(rng.dirichlet(np.ones(T + 1), size=T + 1))
    le = np.log(rng.dirichlet(np.ones(V + 1), size=T))
    return lt, np.where(allowed.T, le, -np.inf)


def random_phi(rng, cs):
    phi = cs.uniform_phi() * rng.uniform(0.3, 1.7, cs.num_params)
    arc_of = np.repeat(np.arange(cs.machine.num_arcs), np.diff(cs.blk_start))
    z = np.zeros(cs.machine.num_arcs)
    np.add.at(z, arc_of, phi)
    return phi / z[arc_of]


def tiny(seed, V=2, T=2, p_final=0.75):
    rng = np.random.default_rng(seed)
    c = backoff_machine(rng, V=V, order=3, normalised=True, p_final=p_final)
    allowed = np.ones((V + 1, T), bool)
    allowed[0, T - 1] = False          # word 0 (label 1) may not take the last tag
    cs = CqStructure.build(c, np.maximum(c.ilabel - 1, 0), allowed)
    lt, le = random_theta(rng, T, V, allowed)
    return rng, c, cs, allowed, lt, le


# -------------------------------------------------------------- brute force
def walk(c, word_labels):
    """(probability, arcs used per word) of a string under failure semantics."""
    q = c.start
    p = 1.0
    arcs = []
    for x in word_labels:
        while True:
            lo, hi = c.src_start[q], c.src_start[q + 1]
            hit = [a for a in range(lo, hi) if c.ilabel[a] == x]
            if hit:
                a = hit[0]
                p *= math.exp(-c.weight[a])
                arcs.append(a)
                q = c.dst[a]
                break
            phi = [a for a in range(lo, hi) if c.ilabel[a] == PHI]
            if not phi:
                return 0.0, None
            p *= math.exp(-c.weight[phi[0]])
            q = c.dst[phi[0]]
    while c.final[q] == np.inf:
        lo, hi = c.src_start[q], c.src_start[q + 1]
        phi = [a for a in range(lo, hi) if c.ilabel[a] == PHI]
        if not phi:
            return 0.0, None
        p *= math.exp(-c.weight[phi[0]])
        q = c.dst[phi[0]]
    return p * math.exp(-c.final[q]), arcs


def strings(c, V, mass_left=1e-9, max_len=40):
    """All strings by increasing length until the unenumerated mass is below mass_left."""
    out = []
    total = 0.0
    for n in range(max_len + 1):
        for w in itertools.product(range(1, V + 1), repeat=n):
            p, arcs = walk(c, w)
            if p > 0:
                out.append((w, p, arcs))
                total += p
        if 1.0 - total < mass_left:
            return out, total
    raise AssertionError(f"mass left {1 - total} after length {max_len}")


def per_string(cs, w, arcs, phi, lt, le, T):
    """(E_q[log p - log q], log sum_t p(w, t)) for one string, by dense formulas."""
    n = len(w)
    Q = np.zeros((n, T))
    for i, a in enumerate(arcs):
        for j in range(cs.blk_start[a], cs.blk_start[a + 1]):
            Q[i, cs.blk_tag[j]] = phi[j]
    words = [x - 1 for x in w]
    LT = np.where(np.isfinite(lt), lt, -1e300)
    LE = np.where(np.isfinite(le), le, -1e300)
    with np.errstate(divide="ignore"):
        logQ = np.where(Q > 0, np.log(np.where(Q > 0, Q, 1)), 0.0)
    if n == 0:
        val = lt[T, T]
        ll = lt[T, T]
        return val, ll
    val = float((Q[0] * LT[T, :T]).sum())
    for i in range(1, n):
        val += float(Q[i - 1] @ LT[:T, :T] @ Q[i])
    val += float((Q[-1] * LT[:T, T]).sum())
    for i in range(n):
        val += float((Q[i] * (LE[:, words[i]] - logQ[i])).sum())
    # exact log-likelihood: by enumeration of taggings for short strings, else
    # by the dense HMM forward recursion (checked against enumeration below)
    P = np.exp(lt)
    Em = np.exp(le)
    f = P[T, :T] * Em[:, words[0]]
    for i in range(1, n):
        f = (f @ P[:T, :T]) * Em[:, words[i]]
    ll = math.log(float(f @ P[:T, T]))
    if n <= 4:
        tot = 0.0
        for tags in itertools.product(range(T), repeat=n):
            lp = lt[T, tags[0]] + lt[tags[-1], T]
            for i in range(n):
                lp += le[tags[i], words[i]]
                if i:
                    lp += lt[tags[i - 1], tags[i]]
            tot += math.exp(lp) if np.isfinite(lp) else 0.0
        assert math.log(tot) == pytest.approx(ll, abs=1e-12)
    return val, ll


_STRINGS = {}


def brute(cs, c, V, T, phi, lt, le):
    key = id(c)
    if key not in _STRINGS:
        _STRINGS[key] = (c, strings(c, V, mass_left=1e-11))
    S, total = _STRINGS[key][1]
    bound = 0.0
    ll = 0.0
    brute.tail = 1.0 - total
    for w, p, arcs in S:
        v, l = per_string(cs, w, arcs, phi, lt, le, T)
        bound += p * v
        ll += p * l
    return bound, ll


# -------------------------------------------------------------------- tests
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bound_counts_and_gradient_match_the_materialised_machine(seed):
    rng, c, cs, allowed, lt, le = tiny(seed, V=3, T=3, p_final=0.3)
    phi = random_phi(rng, cs)
    st = expected_stats(cs, phi, lt, le)
    # the engine's expectation-semiring relaxation over the (state, tag) machine
    assert st.bound == pytest.approx(bound_materialised(cs, phi, lt, le), rel=1e-9, abs=1e-9)
    tr, em, _ = stats_materialised(cs, phi, lt, le)
    assert np.allclose(st.trans, tr, atol=1e-10) and np.allclose(st.emit, em, atol=1e-10)
    # alpha: c's own forward, total final mass 1
    assert float((cs.fin_k * cs.alpha[cs.fin_state]).sum()) == pytest.approx(1.0, abs=1e-9)
    # gradient against central finite differences
    g = d_bound_d_phi(cs, phi, lt, le)
    eps = 1e-6
    for j in rng.choice(phi.size, size=min(12, phi.size), replace=False):
        p1, p2 = phi.copy(), phi.copy()
        p1[j] += eps
        p2[j] -= eps
        fd = (expected_stats(cs, p1, lt, le).bound - expected_stats(cs, p2, lt, le).bound) / (2 * eps)
        assert g[j] == pytest.approx(fd, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("seed", [4, 5])
def test_bound_matches_enumeration_and_is_a_lower_bound(seed):
    rng, c, cs, allowed, lt, le = tiny(seed, V=2, T=2, p_final=0.85)
    for trial in range(2):
        phi = random_phi(rng, cs)
        b_enum, ll = brute(cs, c, 2, 2, phi, lt, le)
        st = expected_stats(cs, phi, lt, le)
        # the strings left out carry < 1e-11 of the mass, each with |value| < 200
        assert st.bound == pytest.approx(b_enum, abs=1e-10 + 200 * brute.tail)
        assert st.bound <= ll + 1e-9
        # theta gradient = expected counts: d r / d log theta(t | t')
        eps = 1e-6
        lt1 = lt.copy()
        lt1[0, 1] += eps
        lt2 = lt.copy()
        lt2[0, 1] -= eps
        fd = (brute(cs, c, 2, 2, phi, lt1, le)[0] - brute(cs, c, 2, 2, phi, lt2, le)[0]) / (2 * eps)
        assert st.trans[0, 1] == pytest.approx(fd, rel=1e-5, abs=1e-8)
    # the phi gradient against finite differences of the enumerated bound
    g = d_bound_d_phi(cs, phi, lt, le)
    j = int(np.argmax(np.abs(g)))
    p1, p2 = phi.copy(), phi.copy()
    p1[j] += 1e-6
    p2[j] -= 1e-6
    fd = (brute(cs, c, 2, 2, p1, lt, le)[0] - brute(cs, c, 2, 2, p2, lt, le)[0]) / 2e-6
    assert g[j] == pytest.approx(fd, rel=1e-5)


def test_variational_em_improves_the_bound_and_stays_below_the_likelihood():
    rng, c, cs, allowed, lt, le = tiny(6, V=2, T=2, p_final=0.85)
    for opt in ("vem", "gradient"):
        tr = NGramEM(cs, allowed, lt, le, optimizer=opt)
        hist = tr.run(6)
        b = [h.bound for h in hist]
        assert b[-1] > b[0] + 1e-3
        _, ll = brute(cs, c, 2, 2, tr.phi, tr.log_trans, tr.log_emit)
        assert b[-1] <= ll + 1e-9


def test_block_update_is_the_block_optimum():
    rng, c, cs, allowed, lt, le = tiny(7, V=3, T=3, p_final=0.3)
    phi = random_phi(rng, cs)
    new = estep_parallel(cs, phi, lt, le)
    # change one block only: the bound must not go down, and perturbing that block hurts.
    # Exact for an arc whose destination does not back off to its source (else
    # the block also feeds its own source's tag mass and the update is the
    # stationary point of the linearised objective).
    def chain(q):
        out = {q}
        while cs.phi_dst[q] >= 0:
            q = int(cs.phi_dst[q])
            out.add(q)
        return out
    cands = [a for a in range(c.num_arcs) if cs.blk_start[a + 1] - cs.blk_start[a] > 1
             and int(c.arc_src[a]) not in chain(int(c.dst[a]))]
    assert cands
    a = cands[int(np.argmax([cs.alpha[c.arc_src[a]] for a in cands]))]
    lo, hi = cs.blk_start[a], cs.blk_start[a + 1]
    one = phi.copy()
    one[lo:hi] = new[lo:hi]
    b0 = expected_stats(cs, phi, lt, le).bound
    b1 = expected_stats(cs, one, lt, le).bound
    assert b1 >= b0 - 1e-12
    for _ in range(5):
        pert = one.copy()
        x = rng.dirichlet(np.ones(hi - lo))
        pert[lo:hi] = 0.9 * one[lo:hi] + 0.1 * x
        assert expected_stats(cs, pert, lt, le).bound <= b1 + 1e-12


def corpus_machine(sentences, V):
    """c = the empirical distribution of a corpus: a union of straight-line sentences, 1/N each."""
    N = len(sentences)
    src, dst, lab, wt = [], [], [], []
    final = {}
    nxt = 1
    for s in sentences:
        q = 0
        for i, x in enumerate(s):
            src.append(q)
            dst.append(nxt)
            lab.append(x)
            wt.append(math.log(N) if i == 0 else 0.0)
            q = nxt
            nxt += 1
        final[q] = 0.0
    return Machine.from_arcs(nxt, 0, final, src, dst, lab, weight=wt)


def test_reduces_to_em_on_a_corpus_when_nq_equals_np():
    rng = np.random.default_rng(8)
    V, T = 4, 3
    sents = [list(rng.integers(1, V + 1, size=rng.integers(1, 6))) for _ in range(7)]
    c = corpus_machine(sents, V)
    allowed = np.ones((V + 1, T), bool)
    allowed[1, 0] = False
    allowed[3, 2] = False
    cs = CqStructure.build(c, np.maximum(c.ilabel - 1, 0), allowed)
    lt, le = random_theta(rng, T, V, allowed)
    lt[T, T] = -np.inf
    # ordinary EM by enumeration of every tagging of every sentence
    ll = 0.0
    trans = np.zeros((T + 1, T + 1))
    emit = np.zeros((T, V + 1))
    for s in sents:
        w = [x - 1 for x in s]
        tot = 0.0
        rows = []
        for tags in itertools.product(range(T), repeat=len(s)):
            lp = lt[T, tags[0]] + lt[tags[-1], T] + sum(le[t, x] for t, x in zip(tags, w))
            lp += sum(lt[a, b] for a, b in zip(tags, tags[1:]))
            if np.isfinite(lp):
                rows.append((tags, math.exp(lp)))
                tot += math.exp(lp)
        ll += math.log(tot)
        for tags, p in rows:
            r = p / tot
            trans[T, tags[0]] += r
            trans[tags[-1], T] += r
            for a, b in zip(tags, tags[1:]):
                trans[a, b] += r
            for t, x in zip(tags, w):
                emit[t, x] += r
    # n_q = n_p = 2 at the optimal phi (posteriors of c * p_theta)
    phi2 = joint_posterior_phi(cs, lt, le)
    tr, em, bound = stats_materialised(cs, phi2, lt, le)
    N = len(sents)
    assert bound * N == pytest.approx(ll, abs=1e-8)
    assert np.allclose(tr * N, trans, atol=1e-9) and np.allclose(em * N, emit, atol=1e-9)
    lt1, le1 = mstep(tr, em, allowed)
    lt2, le2 = mstep(trans, emit, allowed)
    fin = np.isfinite(lt2)
    assert np.array_equal(fin, np.isfinite(lt1)) and np.allclose(np.exp(lt1), np.exp(lt2), atol=1e-6)
    assert np.allclose(np.exp(le1), np.exp(le2), atol=1e-6)
    # and n_q = 1 is a bound below it
    st = expected_stats(cs, estep_parallel(cs, cs.uniform_phi(), lt, le), lt, le)
    assert st.bound * N <= ll + 1e-9


def random_phi2(rng, cs, cb):
    phi2 = cb.uniform(cs) * rng.uniform(0.3, 1.7, (cb.K2, cs.T + 1))
    for a in np.flatnonzero(cb.crow >= 0):
        r, n = cb.crow[a], cs.blk_start[a + 1] - cs.blk_start[a]
        phi2[r:r + n] /= phi2[r:r + n].sum(0)
    return phi2


@pytest.mark.parametrize("seed,which", [(1, "roots"), (2, "roots"), (3, "all")])
def test_blocks_conditioned_on_the_previous_tag_match_the_materialised_machine(seed, which):
    rng, c, cs, allowed, lt, le = tiny(seed, V=3, T=3, p_final=0.3)
    cb = CondBlocks.build(cs, which)
    assert cb.K2 > 0
    phi = random_phi(rng, cs)
    phi2 = random_phi2(rng, cs, cb)
    st = expected_stats_cond(cs, cb, phi, phi2, lt, le)
    full = cb.full(cs, phi, phi2)
    tr, em, b = stats_materialised(cs, full, lt, le)
    assert st.bound == pytest.approx(b, rel=1e-9, abs=1e-9)
    assert np.allclose(st.trans, tr, atol=1e-10) and np.allclose(st.emit, em, atol=1e-10)
    # with nothing conditioned it is the n_q = 1 computation
    none = CondBlocks.build(cs, "none")
    assert expected_stats_cond(cs, none, phi, np.zeros((0, cs.T + 1)), lt, le).bound == pytest.approx(
        expected_stats(cs, phi, lt, le).bound, rel=1e-12)
    # gradients against central finite differences
    g, g2 = d_bound_d_phi_cond(cs, cb, phi, phi2, lt, le)
    eps = 1e-6
    for i in rng.choice(cb.K2, size=min(4, cb.K2), replace=False):
        for tp in range(cs.T + 1):
            p1, p2 = phi2.copy(), phi2.copy()
            p1[i, tp] += eps
            p2[i, tp] -= eps
            fd = (expected_stats_cond(cs, cb, phi, p1, lt, le).bound
                  - expected_stats_cond(cs, cb, phi, p2, lt, le).bound) / (2 * eps)
            assert g2[i, tp] == pytest.approx(fd, rel=1e-5, abs=1e-7)
    for j in rng.choice(phi.size, size=min(6, phi.size), replace=False):
        p1, p2 = phi.copy(), phi.copy()
        p1[j] += eps
        p2[j] -= eps
        fd = (expected_stats_cond(cs, cb, p1, phi2, lt, le).bound
              - expected_stats_cond(cs, cb, p2, phi2, lt, le).bound) / (2 * eps)
        assert g[j] == pytest.approx(fd, rel=1e-5, abs=1e-7)


def test_conditioned_blocks_bound_is_below_the_likelihood_and_vem_raises_it():
    rng, c, cs, allowed, lt, le = tiny(6, V=2, T=2, p_final=0.85)
    for which in ("roots", "all"):
        tr = NGramEM(cs, allowed, lt, le, cond=which)
        hist = tr.run(6)
        b = [h.bound for h in hist]
        assert b[-1] > b[0] + 1e-3
        assert all(y >= x - 1e-9 for x, y in zip(b[1:], b[2:]))
        _, ll = brute(cs, c, 2, 2, cs.uniform_phi(), tr.log_trans, tr.log_emit)
        assert b[-1] <= ll + 1e-9
        full = tr.cond.full(cs, tr.phi, tr.phi2)
        assert bound_materialised(cs, full, tr.log_trans, tr.log_emit) == pytest.approx(b[-1], rel=1e-8)
    # a conditioned block update never does worse than leaving phi2 alone, here
    cb = CondBlocks.build(cs, "all")
    phi, phi2 = random_phi(rng, cs), random_phi2(rng, cs, cb)
    b0 = expected_stats_cond(cs, cb, phi, phi2, lt, le).bound
    new, new2, _ = estep_parallel_cond(cs, cb, phi, phi2, lt, le)
    assert expected_stats_cond(cs, cb, new, new2, lt, le).bound >= b0 - 1e-12
    with pytest.raises(ValueError, match="vem"):
        NGramEM(cs, allowed, lt, le, optimizer="gradient", cond="roots")
    with pytest.raises(ValueError, match="conditioned"):
        CondBlocks.build(cs, "some")


def test_relaxations_stopped_at_their_sweep_limit_raise():
    """Every fixed point of n-gram EM raises NotConvergedError at its sweep limit: alpha2 and U of
    the conditioned path, and the plain path's alpha (the engine's forward on c)."""
    rng, c, cs, allowed, lt, le = tiny(1, V=3, T=3, p_final=0.3)
    cb = CondBlocks.build(cs, "roots")
    phi, phi2 = random_phi(rng, cs), random_phi2(rng, cs, cb)
    st = expected_stats_cond(cs, cb, phi, phi2, lt, le)
    assert st.solve_info.sweeps > 1
    with pytest.raises(NotConvergedError, match="alpha2.*within 1 sweeps"):
        expected_stats_cond(cs, cb, phi, phi2, lt, le, max_sweeps=1)
    *_, info = phi_gradient_cond(cs, cb, phi, phi2, lt, le, st.alpha2)
    assert info.sweeps > 1
    with pytest.raises(NotConvergedError, match="U .*within 1 sweeps"):
        phi_gradient_cond(cs, cb, phi, phi2, lt, le, st.alpha2, max_sweeps=1)
    with pytest.raises(NotConvergedError):
        CqStructure.build(c, np.maximum(c.ilabel - 1, 0), allowed, max_sweeps=1)


def test_bad_inputs_raise():
    rng, c, cs, allowed, lt, le = tiny(9)
    with pytest.raises(MachineError, match="no allowed tag"):
        CqStructure.build(c, np.maximum(c.ilabel - 1, 0), np.zeros_like(allowed))
    with pytest.raises(MachineError, match="shape"):
        CqStructure.build(c, np.zeros(3, np.int32), allowed)
    eps = c.replace(ilabel=np.where(c.ilabel == 1, 0, c.ilabel))
    with pytest.raises(MachineError, match="epsilon"):
        CqStructure.build(eps, np.maximum(c.ilabel - 1, 0), allowed)


@pytest.mark.parametrize("threads", [2, 3])
def test_threaded_kernels_give_the_single_threaded_sums(threads):
    """The multi-threaded kernels (one part per thread, arc-major block scores)
    compute the same counts, bound, gradient and block update as the serial ones,
    on an LM of real text with failure arcs, whatever the number of parts."""
    from fsmlearn.data import iter_sentences
    from fsmlearn.data.tagsets import tag_dictionary
    from fsmlearn.lm.counts import count_ngrams
    from fsmlearn.lm.estimate import estimate
    from fsmlearn.lm.model import compile_lm
    from fsmlearn.tag.approx import setup_from_lm
    from fsmlearn.tag.ngram_objective import phi_gradient
    from fsmlearn.tag.ngram_par import ParIndex
    sents = [[w for w, _ in s] for s in iter_sentences("wsj-small")][:300]
    lm = compile_lm(estimate(count_ngrams(sents, 3), "absolute"))
    st = setup_from_lm(lm, tagdict=tag_dictionary("tag17"))
    cs = st.cs
    rng = np.random.default_rng(threads)
    T, V = len(st.tags), len(st.vocab)
    lt, le = random_theta(rng, T, V, st.allowed)
    phi = random_phi(rng, cs)
    px = ParIndex(cs, threads)
    assert px.threads == threads and px.ev_bounds[-1] == cs.ev_src.size
    a, b = expected_stats(cs, phi, lt, le), expected_stats(cs, phi, lt, le, px)
    for x, y in ((a.trans, b.trans), (a.emit, b.emit), (a.alpha2, b.alpha2)):
        assert np.allclose(x, y, rtol=1e-12, atol=1e-14)
    assert b.bound == pytest.approx(a.bound, rel=1e-12)
    (A1, B1), (A2, B2) = phi_gradient(cs, phi, lt, le, a.alpha2), phi_gradient(cs, phi, lt, le, a.alpha2, px)
    assert np.allclose(A1, A2, rtol=1e-12, atol=1e-14) and np.allclose(B1, B2, rtol=1e-12, atol=1e-12)
    p1 = estep_parallel(cs, phi, lt, le, a.alpha2)
    p2 = estep_parallel(cs, phi, lt, le, a.alpha2, px)
    assert np.allclose(p1, p2, rtol=1e-10, atol=1e-14)
    runs = []
    for th in (1, threads):
        tr = NGramEM(cs, st.allowed, lt, le, threads=th)
        assert (tr.px is None) == (th == 1)
        tr.run(3)
        runs.append([r.bound for r in tr.history])
    assert np.allclose(runs[0], runs[1], rtol=1e-10)
