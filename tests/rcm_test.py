"""Reified context models: RCMS contexts against their definition, inference against brute force."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmlearn.errors import ArgumentError
from fsmlearn.rcm import BOS, STAR, NGramRCM, rcms
from fsmlearn.rcm.contexts import (ContextLayer, expand, f_lookup, merge, merge_dense, merge_sparse, select_top,
                                   top_dense)


def random_model(rng, Y, n, outside=0.0, scale=1.0):
    symbols = list(range(Y)) + [STAR, BOS]
    theta = {k: scale * rng.normal() for k in itertools.product(symbols, repeat=n)
             for k in [k + (y,) for y in range(Y)]}
    return NGramRCM(Y, n, theta, outside)


def exact_scores(model, L, unary=None):
    """Every labelling of length L and its score under the exact n-th order model."""
    out = {}
    for ys in itertools.product(range(model.num_labels), repeat=L):
        s = 0.0
        for i in range(1, L + 1):
            s += model.theta.get(model.key(tuple(ys[:i - 1]), i, ys[i - 1]), 0.0)
            if unary is not None:
                s += unary[i - 1, ys[i - 1]]
        out[ys] = s
    return out


@pytest.mark.parametrize("Y,n,L", [(2, 1, 5), (3, 2, 4), (2, 3, 6)])
def test_with_room_for_every_suffix_rcms_is_exact_inference(Y, n, L):
    """B >= |Y|^L: every context is a whole prefix, no feature sees a star, and the
    normaliser and marginals are those of the n-th order model (brute force, 1e-9)."""
    rng = np.random.default_rng(Y * 10 + n)
    model = random_model(rng, Y, n)
    unary = rng.normal(size=(L, Y))
    r = rcms(model, L, B=Y ** L, unary=unary)
    scores = exact_scores(model, L, unary)
    logz = np.logaddexp.reduce(list(scores.values()))
    assert abs(r.log_partition() - logz) < 1e-9
    marg = np.zeros((L, Y))
    for ys, s in scores.items():
        for i, y in enumerate(ys):
            marg[i, y] += np.exp(s - logz)
    assert np.abs(r.marginals() - marg).max() < 1e-9
    best = max(scores, key=scores.get)
    labels, score = r.best()
    assert tuple(labels) == best and abs(score - scores[best]) < 1e-9


@settings(max_examples=40, deadline=None)
@given(Y=st.integers(1, 4), n=st.integers(0, 3), L=st.integers(1, 6), B=st.integers(0, 12),
       seed=st.integers(0, 2**31))
def test_contexts_have_coverage_closure_and_f_is_the_least_ancestor(Y, n, L, B, seed):
    """At every position: the root is present (coverage); contexts are distinct suffix sets
    (closure: two suffixes' sets are nested or disjoint); the depth-first merge sends each
    expanded element to its least ancestor (f_lookup, by definition); the lcs array is the
    true common suffix length; and every labelling's context chain holds its prefix."""
    rng = np.random.default_rng(seed)
    model = random_model(rng, Y, n)
    prev = ContextLayer.initial()
    layers = [prev]
    for i in range(1, L + 1):
        S = np.array([model.scores(s, i, k == len(prev) - 1, None) for k, s in enumerate(prev.suffixes)])
        parent, label, lens, lcs = expand(prev, Y)
        suffixes = [prev.suffixes[p] + (int(y),) for p, y in zip(parent, label)]
        assert lens.tolist() == [len(t) for t in suffixes]
        logf = prev.forward[parent] + S[parent, label]
        active = select_top(logf, B)
        layer, owner = merge(prev, parent, label, lens, lcs, active, logf)
        assert layer.suffixes[-1] == () and len(set(layer.suffixes)) == len(layer.suffixes)
        assert len(layer) == int(active.sum()) + 1 and active.sum() <= B
        for e, suf in enumerate(suffixes):
            assert owner[e] == f_lookup(layer, suf)
        for k in range(len(layer) - 1):
            a, b = layer.suffixes[k], layer.suffixes[k + 1]
            common = 0
            while common < min(len(a), len(b)) and a[-1 - common] == b[-1 - common]:
                common += 1
            assert layer.lcs[k] == common
        # forward mass: each context's is the log-sum of what it absorbed
        for k in range(len(layer)):
            got = logf[owner == k]
            assert np.isclose(layer.forward[k], np.logaddexp.reduce(got) if got.size else -np.inf)
        layers.append(layer)
        prev = layer
    r = rcms(model, L, B)
    for ys in itertools.islice(itertools.product(range(Y), repeat=L), 50):
        state = 0
        for i, y in enumerate(ys, 1):
            e = r.element(i, state, y)
            assert r.el_label[e] == y and r.el_src[e] == state
            state = int(r.el_dst[e])
            suf = r.layers[i].suffixes[state - r.layer_start[i]]
            assert tuple(ys[i - len(suf):i]) == suf        # the context holds y_{1:i}


@settings(max_examples=25, deadline=None)
@given(Y=st.integers(1, 4), n=st.integers(0, 2), L=st.integers(1, 7), B=st.integers(0, 6),
       seed=st.integers(0, 2**31))
def test_marginals_sum_to_one(Y, n, L, B, seed):
    rng = np.random.default_rng(seed)
    r = rcms(random_model(rng, Y, n), L, B, unary=rng.normal(size=(L, Y)))
    m = r.marginals()
    assert m.shape == (L, Y) and np.allclose(m.sum(axis=1), 1.0, atol=1e-9) and (m >= 0).all()


def beam_search(model, L, B, unary):
    """Plain beam search: the B best prefixes at every position by their exact scores."""
    beam = {(): 0.0}
    for i in range(1, L + 1):
        grown = {}
        for pre, s in beam.items():
            for y in range(model.num_labels):
                grown[pre + (y,)] = s + model.theta.get(model.key(pre, i, y), 0.0) + unary[i - 1, y]
        best = sorted(grown.items(), key=lambda kv: -kv[1])[:B]
        beam = dict(best)
    return beam


@pytest.mark.parametrize("seed", range(6))
def test_beam_search_is_rcms_with_minus_infinity_outside_the_beam(seed):
    """Section 4.1: weight -inf on the root context makes RCMS beam search: the contexts are
    the beam's prefixes and the normaliser sums the final beam."""
    rng = np.random.default_rng(seed)
    Y, n, L, B = 3, 2, 6, 4
    model = random_model(rng, Y, n, outside=-np.inf)
    unary = rng.normal(size=(L, Y))
    r = rcms(model, L, B, unary=unary)
    beam = beam_search(model, L, B, unary)
    assert set(r.layers[L].suffixes[:-1]) == set(beam)
    assert abs(r.log_partition() - np.logaddexp.reduce(list(beam.values()))) < 1e-9
    labels, score = r.best()
    assert tuple(labels) == max(beam, key=beam.get)


def test_a_learned_outside_weight_moves_mass_between_the_beam_and_the_rest():
    rng = np.random.default_rng(3)
    base = random_model(rng, 3, 2)
    z = [rcms(NGramRCM(3, 2, base.theta, w), 6, 3).log_partition() for w in (-np.inf, -2.0, 0.0, 2.0)]
    assert z[0] < z[1] < z[2] < z[3]


def test_bad_arguments_are_named():
    m = NGramRCM(2, 1, {})
    with pytest.raises(ArgumentError, match="length must be >= 1"):
        rcms(m, 0, 3)
    with pytest.raises(ArgumentError, match=r"unary has shape \(2, 3\); expected \(2, 2\)"):
        rcms(m, 2, 3, unary=np.zeros((2, 3)))
    with pytest.raises(ArgumentError, match="num_labels must be >= 1"):
        NGramRCM(0, 1, {})


# ----------------------------------------------------------------------------- learning
@pytest.mark.parametrize("B,outside", [(3, 0.0), (2, -1.5), (100, 0.0)])
def test_the_gradient_matches_finite_differences(B, outside):
    """d log p(y) / d theta_k and d / d outside against central differences (contexts held by
    the selection, which a step of 1e-6 does not change here)."""
    from fsmlearn.rcm.learn import OUTSIDE, sequence_gradient
    rng = np.random.default_rng(7)
    Y, n, L = 3, 2, 5
    model = random_model(rng, Y, n, outside=outside)
    y = rng.integers(0, Y, L)
    unary = rng.normal(size=(L, Y))
    ll, g = sequence_gradient(model, y, B, unary)
    assert ll < 0
    keys = sorted((k for k in g if k != OUTSIDE), key=lambda k: -abs(g[k]))[:6] + [OUTSIDE]
    eps = 1e-6
    for k in keys:
        def at(delta):
            m = NGramRCM(Y, n, dict(model.theta), model.outside)
            if k == OUTSIDE:
                m.outside += delta
            else:
                m.theta[k] = m.theta.get(k, 0.0) + delta
            return sequence_gradient(m, y, B, unary)[0]
        fd = (at(eps) - at(-eps)) / (2 * eps)
        assert abs(fd - g.get(k, 0.0)) < 1e-5, (k, fd, g.get(k))


def test_adagrad_raises_the_likelihood_of_the_training_data():
    from fsmlearn.rcm.learn import train_supervised
    rng = np.random.default_rng(1)
    Y, n = 3, 2
    teacher = random_model(rng, Y, n, scale=2.0)
    data = []
    for _ in range(30):
        r = rcms(teacher, 6, 50)
        data.append(r.best()[0] if rng.random() < 0.3 else rng.integers(0, Y, 6))
    student = NGramRCM(Y, n, {}, 0.0)
    curve = train_supervised(student, data, B=4, passes=4)
    assert curve[-1] > curve[0] + 0.5 and all(np.isfinite(curve))
    with pytest.raises(ArgumentError, match="labels must be a non-empty sequence of labels 0..2"):
        train_supervised(student, [[0, 3]], B=4)


# ------------------------------------------------------------------------- decipherment
def test_the_plaintext_lm_is_a_distribution_for_every_history():
    from fsmlearn.rcm.decipher import AbsoluteDiscountLM
    rng = np.random.default_rng(0)
    seqs = [rng.integers(0, 5, rng.integers(1, 8)) for _ in range(40)]
    lm = AbsoluteDiscountLM(seqs, 5, 2)
    for h in [(), (0,), (-2,), (-2, 3), (1, 2), (4, 4), (-2, 0)]:
        p = lm.prob(h)
        assert p.shape == (5,) and abs(p.sum() - 1) < 1e-12 and (p > 0).all()
    with pytest.raises(ArgumentError, match="outside 0..4"):
        AbsoluteDiscountLM([[0, 5]], 5, 2)


@pytest.mark.parametrize("n", [0, 1, 2])
def test_the_plaintext_lm_is_lm_estimates_backoff_model_given_a_label_next(n):
    """The rows read from the compiled model's states are lm.estimate's absolute-discounting
    model (its ARPA tables, backed off by hand: p(w | h) listed, else bo(h) p(w | h')),
    renormalised over the labels."""
    from fsmlearn.lm.counts import count_corpus
    from fsmlearn.lm.estimate import estimate
    from fsmlearn.rcm.decipher import AbsoluteDiscountLM
    rng = np.random.default_rng(10 + n)
    V = 5
    seqs = [rng.integers(0, V, rng.integers(1, 8)) for _ in range(30)]
    lm = AbsoluteDiscountLM(seqs, V, n, discount=0.25, smoothing=0.01)
    ptr = np.zeros(len(seqs) + 1, np.int64)
    np.cumsum([len(x) for x in seqs], out=ptr[1:])
    ref = estimate(count_corpus(ptr, np.concatenate(seqs).astype(np.int32), [str(y) for y in range(V)], n + 1),
                   "absolute", discount=0.25, smoothing=0.01)
    wid = {w: i for i, w in enumerate(ref.vocab)}
    table = {}
    for g, lp, bo in zip(ref.ngrams, ref.logprob, ref.backoff):
        for row, a, b in zip(g, lp, bo):
            table[tuple(int(x) for x in row)] = (10.0 ** a, 10.0 ** b)

    def p(w, h):
        if (*h, w) in table:
            return table[(*h, w)][0]
        return (table[h][1] if h in table else 1.0) * p(w, h[1:])
    words = [wid[str(y)] for y in range(V)]
    for h in [(), (0,), (-2,), (-2, 3), (1, 2), (4, 4), (-2, 0), (3, 3)]:
        hh = tuple(h[-n:]) if n else ()
        key = tuple(wid["<s>"] if y == -2 else words[y] for y in hh)
        want = np.array([p(w, key) for w in words])
        np.testing.assert_allclose(lm.prob(h), want / want.sum(), rtol=1e-12)
    assert np.allclose(lm.base, lm.prob(()))


def test_with_room_for_every_suffix_the_decipherment_model_is_the_exact_hmm():
    """RCMS with B >= |Y|^L on the decipherment model equals the exact second-order HMM
    (transitions from the LM by the full history, emissions as unary): brute force."""
    from fsmlearn.rcm.decipher import AbsoluteDiscountLM, DecipherModel
    rng = np.random.default_rng(2)
    V, L = 3, 4
    lm = AbsoluteDiscountLM([rng.integers(0, V, 6) for _ in range(20)], V, 2)
    log_emit = np.log(rng.dirichlet(np.ones(V), size=V))
    x = rng.integers(0, V, L)
    unary = log_emit[:, x].T
    r = rcms(DecipherModel(lm), L, V ** L, unary)
    tot = []
    for ys in itertools.product(range(V), repeat=L):
        s, hist = 0.0, (-2,)
        for i, y in enumerate(ys):
            s += np.log(lm.prob(hist)[y]) + unary[i, y]
            hist = hist + (y,)
        tot.append(s)
    assert abs(r.log_partition() - np.logaddexp.reduce(tot)) < 1e-9


def test_em_with_rcms_recovers_a_substitution_cipher():
    """A 1:1 substitution of text from a peaked second-order chain: EM (Laplace 0.01) with
    RCMS contexts (B = 8) raises the likelihood, and the best of four restarts maps every
    cipher symbol right."""
    from fsmlearn.rcm.decipher import AbsoluteDiscountLM, DecipherModel, em_step, mapping_accuracy
    rng = np.random.default_rng(5)
    V = 5
    T = rng.dirichlet(np.full(V, 0.15), size=(V, V))
    def sample(m):
        out = []
        a, b = rng.integers(V), rng.integers(V)
        for _ in range(m):
            c = rng.choice(V, p=T[a, b])
            out.append(c)
            a, b = b, c
        return out
    plain = [sample(8) for _ in range(200)]
    key = rng.permutation(V)
    cipher = [[int(key[y]) for y in sample(8)] for _ in range(60)]
    lm = AbsoluteDiscountLM(plain, V, 2)
    model = DecipherModel(lm)
    truth = np.argsort(key)                                              # cipher symbol x was plaintext truth[x]
    runs = []
    for _ in range(4):                                                   # EM has local optima: restarts
        log_emit = np.log(rng.dirichlet(np.ones(V), size=V))
        lls = []
        for _ in range(20):
            log_emit, ll, counts = em_step(model, cipher, log_emit, B=8)
            lls.append(ll)
        assert lls[-1] >= lls[0]
        runs.append((lls[-1], mapping_accuracy(counts, truth)))
    best_ll, best_acc = max(runs)
    assert best_acc == 1.0, runs


# ------------------------------------------------------------------------------ files
def test_a_saved_model_loads_as_it_was(tmp_path):
    from fsmlearn.rcm.io import load_rcm, save_rcm
    rng = np.random.default_rng(0)
    for outside in (0.0, -1.25, -np.inf):
        m = random_model(rng, 3, 2, outside=outside)
        save_rcm(m, tmp_path / "m.rcm", labels=["a", "b", "c"])
        back, labels = load_rcm(tmp_path / "m.rcm")
        assert back == m and labels == ["a", "b", "c"]
        assert [p.name for p in tmp_path.iterdir()] == ["m.rcm"]


@pytest.mark.parametrize("edit,line,needle", [
    (lambda t: t.replace("[-2, -2, 0, ", "[-2, -2, 7, ", 1), 2, "symbols [-2, -2, 7]"),
    (lambda t: t.replace("[-2, -2, 0, ", "[-2, -2, 0, NaN, ", 1), 2, "expected 3 symbols and a weight"),
    (lambda t: t.replace(', "n": 2', ', "n": "two"', 1), 1, "field 'n' is 'two'"),
    (lambda t: t.replace('"format": "fsmlearn-rcm"', '"format": "x"', 1), 1, "not a fsmlearn RCM"),
    (lambda t: t[:len(t) // 2], None, "not JSON"),
])
def test_a_bad_model_file_is_a_located_error(tmp_path, edit, line, needle):
    from fsmlearn.errors import ModelFormatError
    from fsmlearn.rcm.io import load_rcm, save_rcm
    save_rcm(random_model(np.random.default_rng(1), 3, 2), tmp_path / "m.rcm")
    p = tmp_path / "m.rcm"
    p.write_text(edit(p.read_text()))
    with pytest.raises(ModelFormatError, match=re.escape(needle)) as e:
        load_rcm(p)
    assert e.value.path == str(p) and e.value.line is not None
    if line is not None:
        assert e.value.line == line, str(e.value)


@settings(max_examples=200, deadline=None)
@given(x=st.lists(st.sampled_from([-np.inf, -2.0, -1.0, 0.0, 0.5, 3.0]), max_size=40), B=st.integers(0, 45))
def test_selection_is_the_b_heaviest_ties_by_position(x, B):
    """select_top (linear time) picks what a stable sort by mass would: the B heaviest, ties
    to the earlier element, never an element of zero mass."""
    x = np.asarray(x, float)
    ref = np.zeros(x.size, bool)
    if B > 0 and x.size:
        order = np.argsort(-x, kind="stable")[:B]
        ref[order[np.isfinite(x[order])]] = True
    assert (select_top(x, B) == ref).all()


@settings(max_examples=300, deadline=None)
@given(K=st.integers(1, 6), Y=st.integers(1, 7), B=st.integers(0, 45), seed=st.integers(0, 2**31))
def test_the_heap_selection_on_the_score_matrix_is_select_top(K, Y, B, seed):
    """top_dense(S, forward, B) selects what select_top does from the label-major forward masses
    (forward[k] + S[k, y] at y K + k): ties by position, never zero mass (coarse values: ties)."""
    rng = np.random.default_rng(seed)
    S = rng.choice([-np.inf, -2.0, -1.0, 0.0, 0.5, 3.0], size=(K, Y))
    fwd = rng.choice([-np.inf, -1.0, 0.0, 1.0], size=K)
    assert np.array_equal(top_dense(S, fwd, B), np.flatnonzero(select_top((fwd[None, :] + S.T).ravel(), B)))
    S = rng.normal(size=(K, Y))
    assert np.array_equal(top_dense(S, fwd, B), np.flatnonzero(select_top((fwd[None, :] + S.T).ravel(), B)))


@settings(max_examples=60, deadline=None)
@given(Y=st.integers(1, 4), n=st.integers(0, 3), L=st.integers(1, 6), B=st.integers(0, 12),
       seed=st.integers(0, 2**31))
def test_the_merge_over_selected_blocks_is_the_dense_merge(Y, n, L, B, seed):
    """merge_sparse (only the label blocks with a selected element) gives the dense merge's
    owners, singles, pooled scales and first labels, C_i's lcs and exp(S - top) on the pooled
    elements, on the context sets RCMS builds."""
    rng = np.random.default_rng(seed)
    model = random_model(rng, Y, n)
    r = rcms(model, L, B)
    for i in range(1, L + 1):
        prev = r.layers[i - 1]
        K = len(prev)
        S = np.array([model.scores(s, i, k == K - 1, None) for k, s in enumerate(prev.suffixes)])
        S[rng.random(S.shape) < 0.2] = -np.inf
        plen = np.array([len(t) for t in prev.suffixes], np.int64)
        act = select_top((prev.forward[None, :] + S.T).ravel(), B)
        out_e, out_lcs, owner, single, pooled, top, arg = merge_dense(plen, prev.lcs, S, act)
        sel = top_dense(S, prev.forward, B)
        (parent, label, plen_out, lcs_out, blocks, block_owner, single2, s_owner, s_score, shift, finite,
         all_finite, diff, best, arg2, D) = merge_sparse(plen, prev.lcs, S, prev.forward, sel)
        m = out_e.size
        ref_owner = np.where(owner == m, m, m - 1 - owner)
        full = np.full(K * Y, m)
        full.reshape(Y, K)[blocks] = block_owner
        assert np.array_equal(full, ref_owner) and np.array_equal(single2, single)
        assert np.array_equal(s_owner, ref_owner[single]) and np.array_equal(s_score, S.T.ravel()[single])
        assert np.array_equal(best, top) and np.array_equal(arg2, arg)
        assert np.array_equal(sel, out_e[::-1]) and np.array_equal(parent, sel % K)
        assert np.array_equal(label, sel // K) and np.array_equal(plen_out[:-1], plen[sel % K] + 1)
        ref_lcs = np.zeros(m + 1, np.int64)
        if m:
            ref_lcs[:m] = out_lcs[::-1]
            ref_lcs[m - 1] = 0
        assert np.array_equal(lcs_out, ref_lcs)
        with np.errstate(invalid="ignore"):
            EP = np.exp(S - np.where(np.isfinite(top), top, 0.0)[:, None])
        EP[~pooled] = 0.0
        assert np.array_equal(np.exp(D), EP)


def test_the_decipherment_score_matrix_is_its_rows():
    """DecipherModel.scores_matrix (the LM's cached rows stacked, unary and the root's outside
    weight added at once) equals scores() row by row, for contexts that reach the start or not,
    and the generic scores_matrix falls back to scores() for a model without it."""
    from fsmlearn.rcm.decipher import AbsoluteDiscountLM, DecipherModel
    from fsmlearn.rcm.model import scores_matrix
    rng = np.random.default_rng(4)
    V = 6
    for order in (0, 1, 2, 3):
        lm = AbsoluteDiscountLM([rng.integers(0, V, 7) for _ in range(30)], V, order)
        for outside in (0.0, -1.5, -np.inf):
            model = DecipherModel(lm, outside)
            for i in (1, 2, 3, 5):
                suffixes = [tuple(int(v) for v in rng.integers(0, V, int(rng.integers(1, i + 1))))
                            for _ in range(5)]
                suffixes = [s for s in suffixes if len(s) <= i - 1] + [()]
                for unary in (None, rng.normal(size=V)):
                    K = len(suffixes)
                    ref = np.array([model.scores(s, i, k == K - 1, unary) for k, s in enumerate(suffixes)])
                    assert np.array_equal(model.scores_matrix(suffixes, i, unary), ref)
                    assert np.array_equal(scores_matrix(model, suffixes, i, unary), ref)
    ngram = random_model(rng, 3, 2, outside=-0.5)
    suffixes = [(0, 1), (2,), ()]
    ref = np.array([ngram.scores(s, 3, k == 2, None) for k, s in enumerate(suffixes)])
    assert np.array_equal(scores_matrix(ngram, suffixes, 3), ref)


@pytest.mark.parametrize("n", [1, 2])
def test_exact_order_contexts_give_the_exact_nth_order_model(n):
    """exact_order = n keeps every suffix of n labels: the n-th order model's exact normaliser."""
    rng = np.random.default_rng(n)
    Y, L = 3, 5
    model = random_model(rng, Y, n)
    unary = rng.normal(size=(L, Y))
    r = rcms(model, L, 0, unary=unary, exact_order=n)
    logz = np.logaddexp.reduce(list(exact_scores(model, L, unary).values()))
    assert abs(r.log_partition() - logz) < 1e-9
    assert max(len(c) for c in r.layers) <= sum(Y ** k for k in range(n + 1))


def test_exact_first_order_em_on_the_dense_chain_equals_the_exact_context_machine():
    """em_step(exact_order=1) with a bigram LM runs on the dense chain; its expected counts and
    log-likelihood are those of the exact first-order context machine (rcms, exact_order=1)."""
    from fsmlearn.rcm.decipher import AbsoluteDiscountLM, DecipherModel, em_step
    rng = np.random.default_rng(11)
    V = 6
    plain = [list(rng.integers(0, V, int(rng.integers(1, 7)))) for _ in range(40)]
    model = DecipherModel(AbsoluteDiscountLM(plain, V, 1))
    log_emit = np.log(rng.dirichlet(np.ones(V), size=V))
    cipher = [list(rng.integers(0, V, int(rng.integers(1, 6)))) for _ in range(12)]
    new, ll, counts = em_step(model, cipher, log_emit, 0, exact_order=1)
    ref_counts, ref_ll = np.zeros((V, V)), 0.0
    for x in cipher:
        r = rcms(model, len(x), 0, log_emit[:, x].T, exact_order=1)
        np.add.at(ref_counts.T, x, r.marginals())
        ref_ll += r.log_partition()
    assert abs(ll - ref_ll) < 1e-9 * abs(ref_ll)
    assert np.abs(counts - ref_counts).max() < 1e-9
    assert np.allclose(np.exp(new).sum(axis=1), 1.0)


def test_mean_context_length_on_known_context_sets():
    """Section 7's statistic: with every suffix kept, c_{i-1} is the whole prefix (length i - 1,
    mean (L - 1) / 2); exact first order keeps one label (mean (L - 1) / L); beam search with
    B = 1 keeps one full prefix at every position (mean (L - 1) / 2 as well)."""
    rng = np.random.default_rng(3)
    Y, L = 3, 4
    model = NGramRCM(Y, 2, {k: float(rng.normal()) for k in itertools.product([BOS, STAR, 0, 1, 2], repeat=3)})
    unary = rng.normal(size=(L, Y))
    assert abs(rcms(model, L, Y ** L, unary).mean_context_length() - (L - 1) / 2) < 1e-12
    assert abs(rcms(model, L, 0, unary, exact_order=1).mean_context_length() - (L - 1) / L) < 1e-12
    beam = NGramRCM(Y, 2, model.theta, -np.inf)
    assert abs(rcms(beam, L, 1, unary).mean_context_length() - (L - 1) / 2) < 1e-12
    r = rcms(model, L, 2, unary)                       # RCMS in between
    assert 0 < r.mean_context_length() < (L - 1) / 2


def test_alignment_models_round_trip_and_bad_files_are_located(tmp_path):
    from fsmlearn.errors import ModelFormatError
    from fsmlearn.rcm.align import AlignRCM
    from fsmlearn.rcm.io import load_align_rcm, save_align_rcm
    rng = np.random.default_rng(0)
    m = AlignRCM(5, 4, n=2, hash_bits=10)
    m.theta[rng.choice(1024, 40, replace=False)] = rng.normal(size=40)
    save_align_rcm(m, tmp_path / "a.json", "abcde", ["P", "Q", "R", "S"])
    back, chars, phon = load_align_rcm(tmp_path / "a.json")
    assert np.array_equal(back.theta, m.theta) and chars == list("abcde") and phon == ["P", "Q", "R", "S"]
    assert (back.n, back.max_advance, back.hash_bits, back.edge_bigram) == (2, m.max_advance, 10, m.edge_bigram)
    lines = (tmp_path / "a.json").read_text().splitlines()
    for k, bad, msg in ((1, "[5000, 1.0],", "feature id 5000"), (1, "[1, 0.0],", "weight 0.0"),
                        (2, "[1, 1.0],", "after 48"), (1, '[1, "x"],', "weight 'x'")):
        edited = lines[:k] + [bad] + lines[k + 1:]
        (tmp_path / "b.json").write_text("\n".join(edited))
        with pytest.raises(ModelFormatError, match=re.escape(msg)) as e:
            load_align_rcm(tmp_path / "b.json")
        assert f"b.json:{k + 1}:" in str(e.value)
    (tmp_path / "c.json").write_bytes((tmp_path / "a.json").read_bytes()[:200])
    with pytest.raises(ModelFormatError, match="not JSON"):
        load_align_rcm(tmp_path / "c.json")
