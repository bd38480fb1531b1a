"""Alignment RCMs (fsmlearn.rcm.align, align_learn) against brute force and their definitions.

The references here are written from the definitions, not from the code under test: every
alignment as a bipartite graph, every (y, z) scored feature by feature with
:func:`feature_id` from the full history, per-z beam search over explicit prefixes, and the
least ancestor f(c, y) from the sets the contexts stand for.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmlearn.algo import forward_backward
from fsmlearn.errors import ArgumentError, NoAcceptingPathError
from fsmlearn.rcm.align import BOS, EOS, AlignRCM, advances_valid, feature_id, rcms_align
from fsmlearn.rcm.align_decode import best_alignment, decode, decode_kbest, output_marginals
from fsmlearn.rcm.align_learn import (STRATEGIES, average_context_length, impute_alignments, prepare_update,
                                      sequence_gradient, train)

BIG = 10 ** 6   # room for every suffix


# ----------------------------------------------------------------------------- references
def random_model(rng, C, P, n=2, A=2, bits=12, backoff=False, edge_bigram=True, scale=1.0):
    m = AlignRCM(C, P, n=n, max_advance=A, hash_bits=bits, backoff=backoff, edge_bigram=edge_bigram)
    m.theta[:] = scale * rng.normal(size=m.theta.size)
    return m


def pos_score(model, x, labels, i):
    """theta . phi_i of position i (1-based) of the full label sequence ``labels[:i]``."""
    C, bits, n, th = model.num_chars, model.hash_bits, model.n, model.theta
    xe = [BOS] + list(x) + [EOS]
    chars = [l % C for l in labels]
    z_prev = sum(l // C for l in labels[:i - 1])
    c, a = chars[i - 1], labels[i - 1] // C
    z = z_prev + a
    ch = lambda j: BOS if j < 1 else chars[j - 1]
    s = 0.0
    for j in (range(n, -1, -1) if model.backoff else [n]):
        s += th[feature_id(bits, "ngram", j, *[ch(t) for t in range(i - j, i)], c)]
    s += th[feature_id(bits, "edge", c, a, xe[z])]
    s += th[feature_id(bits, "edge_left", c, a, *xe[z - max(a - 1, 1):z + 1])]
    s += th[feature_id(bits, "edge_right", c, a, xe[z], xe[z + 1])]
    if model.edge_bigram:
        pc, pa = (BOS, BOS) if i == 1 else (chars[i - 2], labels[i - 2] // C)
        s += th[feature_id(bits, "edge_bigram", pc, pa, xe[z_prev], c, a, xe[z])]
    return s


def end_score(model, labels):
    C, n = model.num_chars, model.n
    chars = [l % C for l in labels]
    L = len(labels)
    ch = lambda j: BOS if j < 1 else chars[j - 1]
    return sum(model.theta[feature_id(model.hash_bits, "end", j, *[ch(t) for t in range(L - j + 1, L + 1)])]
               for j in (range(n, -1, -1) if model.backoff else [n]))


def path_score(model, x, labels):
    return sum(pos_score(model, x, labels, i) for i in range(1, len(labels) + 1)) + end_score(model, labels)


def allowed_next(prefix, v, C, Lp):
    """Whether label v may follow ``prefix`` (the alignment constraints, z <= L')."""
    a = v // C
    if not prefix and a == 0:
        return False
    if prefix and a == 0 and prefix[-1] // C >= 2:
        return False
    return sum(l // C for l in prefix) + a <= Lp


def all_paths(C, A, Lp, max_len):
    """Every label sequence of length <= max_len that is a complete alignment onto Lp phonemes."""
    V = C * (A + 1)
    out = []

    def rec(pre, z):
        if pre and z == Lp:
            out.append(tuple(pre))
        if len(pre) == max_len:
            return
        for v in range(V):
            if allowed_next(pre, v, C, Lp):
                rec(pre + [v], z + v // C)
    rec([], 0)
    return out


def graph_of(advances):
    """The edges (i, j) (1-based) of the alignment the advances encode."""
    edges, z = set(), 0
    for i, a in enumerate(advances, 1):
        if a == 0:
            edges.add((i, z))
        for j in range(z + 1, z + a + 1):
            edges.add((i, j))
        z += a
    return frozenset(edges)


def is_alignment(edges, L, Lp, A):
    """The direct definition: no crossing edges, every node of degree >= 1, no many-to-many
    group (each connected component has one character or one phoneme), at most A phonemes
    per character."""
    for (i, j), (k, m) in itertools.combinations(edges, 2):
        if (i - k) * (j - m) < 0:
            return False
    deg_out = {i: 0 for i in range(1, L + 1)}
    deg_in = {j: 0 for j in range(1, Lp + 1)}
    for i, j in edges:
        deg_out[i] += 1
        deg_in[j] += 1
    if min(deg_out.values()) < 1 or min(deg_in.values()) < 1 or max(deg_out.values()) > A:
        return False
    # components by union-find over ('y', i) and ('x', j)
    parent = {}

    def find(u):
        while parent.setdefault(u, u) != u:
            u = parent[u]
        return u
    for i, j in edges:
        parent[find(("y", i))] = find(("x", j))
    comps = {}
    for i, j in edges:
        ys, xs = comps.setdefault(find(("y", i)), (set(), set()))
        ys.add(i)
        xs.add(j)
    return all(len(ys) == 1 or len(xs) == 1 for ys, xs in comps.values())


def walk(lat, labels):
    """The contexts a label sequence passes through (None where no arc carries it)."""
    states = [0]
    for i, v in enumerate(labels, 1):
        s = states[-1]
        arcs = np.flatnonzero((lat.arc_src == s) & (lat.arc_label == v))
        if arcs.size == 0:
            return None
        assert arcs.size == 1
        states.append(int(lat.arc_dst[arcs[0]]))
    return states


# ----------------------------------------------------------------------------- alignments
@pytest.mark.parametrize("L,Lp,A", [(1, 1, 1), (2, 3, 2), (3, 2, 2), (3, 3, 2), (4, 3, 2), (4, 2, 1), (3, 4, 3),
                                    (4, 4, 2)])
def test_the_advance_encoding_is_exactly_the_alignments(L, Lp, A):
    """The label sequences that pass the constraints (advances_valid) are in one-to-one
    correspondence with the bipartite graphs that are alignments by the direct definition."""
    encoded = {}
    for adv in itertools.product(range(A + 1), repeat=L):
        if advances_valid(adv, Lp, A):
            g = graph_of(adv)
            assert g not in encoded
            encoded[g] = adv
    pairs = [(i, j) for i in range(1, L + 1) for j in range(1, Lp + 1)]
    direct = set()
    for mask in range(1 << len(pairs)):
        edges = frozenset(p for b, p in enumerate(pairs) if mask >> b & 1)
        if is_alignment(edges, L, Lp, A):
            direct.add(edges)
    assert set(encoded) == direct


def test_the_machine_accepts_exactly_the_alignments():
    """With room for every suffix, the label sequences with a path to a final state are the
    complete alignments of length <= max_len (all_paths), no more and no fewer."""
    model = AlignRCM(2, 3, n=1, max_advance=2, hash_bits=8)
    x, ML = np.array([0, 2, 1]), 5
    lat = rcms_align(model, x, BIG, max_len=ML)
    _, fin = lat.scores()
    accepted = set()
    for L in range(1, ML + 1):
        for labels in itertools.product(range(model.num_labels), repeat=L):
            states = walk(lat, labels)
            if states is not None and np.isfinite(fin[states[-1]]):
                accepted.add(labels)
    assert accepted == set(all_paths(2, 2, 3, ML))


# ----------------------------------------------------------------------------- exact inference
CASES = [  # C, A, L', max_len, n, backoff, edge_bigram
    (2, 2, 3, 5, 2, False, True),
    (2, 2, 2, 5, 1, True, True),
    (3, 1, 2, 4, 3, False, True),
    (2, 3, 3, 4, 0, True, False),
    (1, 2, 3, 6, 4, False, True),
]


@pytest.mark.parametrize("C,A,Lp,ML,n,backoff,bigram", CASES)
def test_with_room_for_every_suffix_inference_is_exact(C, A, Lp, ML, n, backoff, bigram):
    """B larger than any context set: log Z, the label marginals, the length distribution, the
    best path, the target normaliser log sum_z exp(score(y, z)) and the target's advance
    marginals all equal brute force over every (y, z) (1e-9)."""
    rng = np.random.default_rng(C * 100 + A * 10 + Lp)
    model = random_model(rng, C, 4, n=n, A=A, backoff=backoff, edge_bigram=bigram)
    x = rng.integers(0, 4, Lp)
    paths = all_paths(C, A, Lp, ML)
    sc = np.array([path_score(model, x, p) for p in paths])
    logz = np.logaddexp.reduce(sc)
    V = model.num_labels
    lat = rcms_align(model, x, BIG, max_len=ML)
    m, pool = lat.machine()
    fb = forward_backward(m)
    assert abs(fb.log_partition - logz) < 1e-9
    prob = np.exp(sc - logz)
    marg = np.zeros((ML, V))
    length = np.zeros(ML + 1)
    for p, w in zip(paths, prob):
        for i, v in enumerate(p):
            marg[i, v] += w
        length[len(p)] += w
    got = np.zeros((ML, V))
    np.add.at(got, (lat.arc_layer - 1, lat.arc_label), pool.element_posteriors(fb.posteriors))
    assert np.abs(got - marg).max() < 1e-9
    got_len = np.bincount(lat.ctx_layer, weights=fb.final_posteriors, minlength=ML + 1)
    assert np.abs(got_len - length).max() < 1e-9
    from fsmlearn.algo import best_path
    bp = best_path(pool.best_machine(m))
    assert tuple(np.asarray(bp.ilabels) - 1) == paths[int(np.argmax(sc))]
    # the target: every alignment of one y
    y = np.array([v % C for v in paths[len(paths) // 2]])
    of_y = [k for k, p in enumerate(paths) if len(p) == y.size and all(v % C == c for v, c in zip(p, y))]
    lt = rcms_align(model, x, BIG, y=y, max_len=ML)
    mt, pt = lt.target_machine()
    fbt = forward_backward(mt)
    logzy = np.logaddexp.reduce(sc[of_y])
    assert abs(fbt.log_partition - logzy) < 1e-9
    adv = np.zeros((y.size, A + 1))
    for k in of_y:
        for i, v in enumerate(paths[k]):
            adv[i, v // C] += math.exp(sc[k] - logzy)
    got = np.zeros((ML, A + 1))       # elements past the target's length have posterior 0
    np.add.at(got, (lt.arc_layer - 1, lt.arc_label // C), pt.element_posteriors(fbt.posteriors))
    assert np.abs(got[:y.size] - adv).max() < 1e-9 and not got[y.size:].any()
    # decode: the best (y, z)'s characters and p(y | x) = sum_z
    chars, conf = decode(model, x, BIG, max_len=ML)
    best = paths[int(np.argmax(sc))]
    assert tuple(chars) == tuple(v % C for v in best)
    same = [k for k, p in enumerate(paths) if tuple(v % C for v in p) == tuple(chars)]
    assert abs(conf - np.exp(sc[same] - logz).sum()) < 1e-9
    # the k best outputs: distinct y in the order of their best (y, z), each with p(y | x)
    best_of: dict = {}
    for k in np.argsort(-sc, kind="stable"):
        best_of.setdefault(tuple(v % C for v in paths[k]), []).append(k)
    want = list(best_of)[:4]
    got = decode_kbest(model, x, 4, BIG, max_len=ML)
    assert len(got) == min(4, len(best_of))
    for (chars_k, p_y, lp), y_k in zip(got, want):
        ks = best_of[y_k]
        assert abs(lp - (sc[ks].max() - logz)) < 1e-9       # its best alignment's log p(y, z | x)
        assert abs(p_y - np.exp(sc[ks] - logz).sum()) < 1e-9
        if len({round(sc[j], 9) for j in range(len(paths))}) == len(paths):      # no ties: the same order
            assert tuple(chars_k) == y_k
    # the posterior marginals of the characters by position; row i sums to P(|y| >= i)
    char_marg = np.zeros((ML, C))
    for v in range(V):
        char_marg[:, v % C] += marg[:, v]
    om = output_marginals(model, x, BIG, max_len=ML)
    assert om.shape == (ML, C) and np.abs(om - char_marg).max() < 1e-9
    assert np.abs(om.sum(axis=1) - length[::-1].cumsum()[::-1][1:]).max() < 1e-9
    # the lattice's own element machine is the reference's
    em, _ = element_machine(lat)
    lem = lat.element_machine()
    assert np.array_equal(lem.dst, em.dst) and np.array_equal(lem.weight, em.weight)


def element_machine(lat, allowed=None, length=None):
    """The machine with one arc per lattice element (no pooling), built directly."""
    from fsmlearn.fsm.machine import Machine
    s, fin = lat.scores()
    keep = np.ones(lat.num_arcs, bool)
    final = -fin
    if allowed is not None:
        keep = (lat.arc_layer <= length) & allowed[np.minimum(lat.arc_layer, length) - 1, lat.arc_label]
        final = np.full(lat.num_contexts, np.inf)
        a, b = lat.layer_start[length], lat.layer_start[length + 1]
        final[a:b] = -fin[a:b]
    src = lat.arc_src[keep]
    start = np.zeros(lat.num_contexts + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=lat.num_contexts), out=start[1:])
    return Machine(start=0, final=final, src_start=start, dst=lat.arc_dst[keep], ilabel=lat.arc_ilabel[keep],
                   weight=-s[keep], semiring="log"), keep


@pytest.mark.parametrize("B", [1, 3])
def test_pooled_machine_equals_the_element_machine(B):
    """RCMS with few contexts: the elements of a context that land in one root are one arc; log Z,
    element posteriors (model and target) and the best path are those of one arc per element."""
    from fsmlearn.algo import best_path
    rng = np.random.default_rng(40 + B)
    model = random_model(rng, 3, 4, n=2, A=2)
    x = rng.integers(0, 4, 4)
    lat = rcms_align(model, x, B, max_len=6)
    m, pool = lat.machine()
    assert m.num_arcs < lat.num_arcs
    em, _ = element_machine(lat)
    fb, efb = forward_backward(m), forward_backward(em)
    assert abs(fb.log_partition - efb.log_partition) < 1e-9
    assert np.abs(pool.element_posteriors(fb.posteriors) - efb.posteriors).max() < 1e-9
    assert np.abs(fb.final_posteriors - efb.final_posteriors).max() < 1e-9
    assert abs(best_path(pool.best_machine(m)).weight - best_path(em).weight) < 1e-9
    y = rng.integers(0, 3, 3)
    lt = rcms_align(model, x, B, y=y, max_len=6)
    mt, pt = lt.target_machine()
    et, keep = element_machine(lt, lt.target, y.size)
    fbt, efbt = forward_backward(mt), forward_backward(et)
    assert abs(fbt.log_partition - efbt.log_partition) < 1e-9
    full = np.zeros(lt.num_arcs)
    full[keep] = efbt.posteriors
    assert np.abs(pt.element_posteriors(fbt.posteriors) - full).max() < 1e-9


def test_a_target_that_cannot_be_aligned_has_no_mass():
    model = random_model(np.random.default_rng(0), 2, 4, n=1)
    lat = rcms_align(model, np.array([0, 1, 2, 3, 0]), BIG, y=np.array([1, 0]))   # 2 chars, 5 phonemes, A = 2
    m, _ = lat.target_machine()
    with pytest.raises(NoAcceptingPathError, match="no accepting path"):
        forward_backward(m)
    fb = forward_backward(m, allow_empty=True)
    assert fb.log_partition == -math.inf and fb.cost == math.inf and not fb.posteriors.any()


def test_best_alignment_of_a_first_order_model_with_exact_contexts_is_viterbi():
    rng = np.random.default_rng(5)
    model = random_model(rng, 2, 3, n=1, A=2)
    x, y = np.array([0, 2, 1, 1]), np.array([1, 0, 0, 1])
    cands = [a for a in itertools.product(range(3), repeat=4) if advances_valid(a, 4, 2)]
    scores = [path_score(model, x, [a * 2 + c for a, c in zip(adv, y)]) for adv in cands]
    got = best_alignment(model, x, y, exact_order=1)
    assert tuple(got) == cands[int(np.argmax(scores))]
    assert tuple(best_alignment(model, x, y, B=BIG)) == tuple(got)


def test_exact_order_one_is_the_exact_first_order_model():
    """exact_order=1 keeps every (z, previous label): for a first-order model (n = 1) log Z is
    exact although far fewer contexts are kept than with room for every suffix."""
    rng = np.random.default_rng(9)
    model = random_model(rng, 2, 3, n=1, A=2)
    x, ML = np.array([1, 0, 2]), 5
    logz = np.logaddexp.reduce([path_score(model, x, p) for p in all_paths(2, 2, 3, ML)])
    lat = rcms_align(model, x, 0, exact_order=1, max_len=ML)
    m, _ = lat.machine()
    assert abs(forward_backward(m).log_partition - logz) < 1e-9
    assert lat.num_contexts < rcms_align(model, x, BIG, max_len=ML).num_contexts


# ----------------------------------------------------------------------------- context sets
def contains(lat, k, prefix, C):
    """Whether context k (of the layer len(prefix)) holds the prefix, by the set it stands for."""
    z = sum(v // C for v in prefix)
    if z != lat.ctx_z[k]:
        return False
    if lat.ctx_root[k]:
        g = 1 if not prefix else int(prefix[-1] // C >= 2)
        return g == lat.ctx_g[k]
    suf = lat.suffix(k)
    return len(suf) <= len(prefix) and tuple(prefix[len(prefix) - len(suf):]) == suf


def score_by_definition(model, x, lat, k, v):
    """theta . phi(c_k, v) from the set c_k stands for (equation 6 with STAR where c_k does not
    determine a character, BOS before the start) plus the outside weight on leaving a root."""
    C, n, bits, th = model.num_chars, model.n, model.hash_bits, model.theta
    i = int(lat.ctx_layer[k]) + 1
    suf = lat.suffix(k)
    xe = [BOS] + list(x) + [EOS]

    def ch(j):   # the character at position j as c_k knows it
        if j < 1:
            return BOS
        back = i - 1 - j
        return suf[len(suf) - 1 - back] % C if back < len(suf) else -1
    c, a = v % C, v // C
    zs = int(lat.ctx_z[k])
    z = zs + a
    s = sum(th[feature_id(bits, "ngram", j, *[ch(t) for t in range(i - j, i)], c)]
            for j in (range(n, -1, -1) if model.backoff else [n]))
    s += th[feature_id(bits, "edge", c, a, xe[z])]
    s += th[feature_id(bits, "edge_left", c, a, *xe[z - max(a - 1, 1):z + 1])]
    s += th[feature_id(bits, "edge_right", c, a, xe[z], xe[z + 1])]
    if model.edge_bigram:
        pc, pa = (BOS, BOS) if i == 1 else ((suf[-1] % C, suf[-1] // C) if suf else (-1, -1))
        s += th[feature_id(bits, "edge_bigram", pc, pa, xe[zs], c, a, xe[z])]
    if lat.ctx_root[k] and i >= 2:
        s += lat.outside
    return s


def end_by_definition(model, lat, k):
    C, n = model.num_chars, model.n
    L = int(lat.ctx_layer[k])
    suf = lat.suffix(k)
    ch = lambda j: BOS if j < 1 else (suf[len(suf) - 1 - (L - j)] % C if L - j < len(suf) else -1)
    s = sum(model.theta[feature_id(model.hash_bits, "end", j, *[ch(t) for t in range(L - j + 1, L + 1)])]
            for j in (range(n, -1, -1) if model.backoff else [n]))
    return s + (lat.outside if lat.ctx_root[k] else 0.0)


def f_by_definition(lat, k, v, C):
    """The smallest context of the next layer holding c_k x {v}."""
    i = int(lat.ctx_layer[k]) + 1
    zn = int(lat.ctx_z[k]) + v // C
    gn = int(v // C >= 2)
    grown = (lat.suffix(k) if not lat.ctx_root[k] else ()) + (v,)
    best, best_len = None, -1
    for q in range(lat.layer_start[i], lat.layer_start[i + 1]):
        if lat.ctx_z[q] != zn:
            continue
        if lat.ctx_root[q]:
            if lat.ctx_g[q] == gn and best_len < 0:
                best, best_len = q, 0
            continue
        s = lat.suffix(q)
        if len(s) <= len(grown) and grown[len(grown) - len(s):] == s and len(s) > best_len:
            best, best_len = q, len(s)
    return best


@settings(max_examples=30, deadline=None)
@given(C=st.integers(1, 3), A=st.integers(1, 3), Lp=st.integers(1, 4), extra=st.integers(0, 3), n=st.integers(0, 3),
       B=st.integers(0, 4), select=st.sampled_from(["model", "target", "both"]), beam=st.booleans(),
       backoff=st.booleans(), seed=st.integers(0, 2 ** 31))
def test_context_sets_have_coverage_and_closure_and_f_is_the_least_ancestor(C, A, Lp, extra, n, B, select, beam,
                                                                           backoff, seed):
    """At every position, per z: at most B selected non-root contexts per rule, distinct and
    consistent with their g, sorted lexicographically from the last label back with a true lcs
    array, the selected the B heaviest of their z; every arc goes to f(c, v) by definition
    (closure makes it unique); each context's forward mass is the log-sum over its in-arcs
    (equation 8 and the merge); every arc's and final weight's score is the features of the
    set its context stands for (STAR where undetermined); and every valid prefix is held by the
    contexts it walks through (coverage; without the beam every valid prefix has its path)."""
    rng = np.random.default_rng(seed)
    model = random_model(rng, C, 3, n=n, A=A, bits=10, backoff=backoff)
    x = rng.integers(0, 3, Lp)
    ML = -(-Lp // A) + extra
    paths = all_paths(C, A, Lp, ML)
    y = None
    if select != "model":
        if not paths:
            return
        y = np.array([v % C for v in paths[rng.integers(len(paths))]])
    lat = rcms_align(model, x, B, y=y, select=select, outside=-np.inf if beam else 0.0, max_len=ML,
                     keep_elements=True)
    sc, fin = lat.scores()
    for a in range(lat.num_arcs):
        assert abs(sc[a] - score_by_definition(model, x, lat, int(lat.arc_src[a]), int(lat.arc_label[a]))) < 1e-9
    for k in range(lat.num_contexts):
        if lat.ctx_z[k] == Lp and lat.ctx_layer[k] >= 1:
            assert abs(fin[k] - end_by_definition(model, lat, k)) < 1e-9
        else:
            assert fin[k] == -np.inf
    per_rule = 2 * B if select == "both" else B
    for i in range(1, ML + 1):
        ks = range(lat.layer_start[i], lat.layer_start[i + 1])
        el = lat.elements[i - 1]
        for zz in set(lat.ctx_z[list(ks)].tolist()):
            zk = [k for k in ks if lat.ctx_z[k] == zz]
            nonroot = [k for k in zk if not lat.ctx_root[k]]
            roots = [k for k in zk if lat.ctx_root[k]]
            assert zk == nonroot + roots and len(nonroot) <= per_rule
            assert len({int(lat.ctx_g[k]) for k in roots}) == len(roots) and not (beam and roots)
            sufs = [lat.suffix(k) for k in nonroot]
            assert len(set(sufs)) == len(sufs)
            for k, s in zip(nonroot, sufs):
                assert len(s) == lat.ctx_len[k] >= 1 and lat.ctx_g[k] == int(s[-1] // C >= 2)
            keys = [tuple(reversed(s)) + (math.inf,) for s in sufs]
            assert keys == sorted(keys)
            for k1, k2, s1, s2 in zip(nonroot, nonroot[1:], sufs, sufs[1:]):
                common = 0
                while common < min(len(s1), len(s2)) and s1[-1 - common] == s2[-1 - common]:
                    common += 1
                assert lat.ctx_lcs[k1] == common
            # the selected are the heaviest of their z, by the rule's mass
            if select != "both":
                mass = el["mass"] if select == "model" else el["target_mass"]
                seg = (el["z"] == zz) & np.isfinite(mass)
                act = seg & el["active"]
                assert act.sum() == min(B, seg.sum())
                if act.any() and (seg & ~el["active"]).any():
                    assert mass[act].min() >= mass[seg & ~el["active"]].max()
        # arcs: f by definition, forward masses
        arcs = np.flatnonzero(lat.arc_layer == i)
        for a in arcs:
            assert lat.arc_dst[a] == f_by_definition(lat, int(lat.arc_src[a]), int(lat.arc_label[a]), C)
        for k in ks:
            into = arcs[lat.arc_dst[arcs] == k]
            want = np.logaddexp.reduce(lat.ctx_forward[lat.arc_src[into]] + sc[into]) if into.size else -np.inf
            assert np.isclose(lat.ctx_forward[k], want, rtol=1e-9, atol=1e-9)
    for p in paths[:60]:
        states = walk(lat, p)
        if states is None:
            assert beam        # only a beam loses outputs: RCMS contexts cover every prefix
            continue
        for i, s in enumerate(states):
            assert contains(lat, s, p[:i], C)


def per_z_beam(model, x, B, ML):
    """Reference beam search with a beam per z: the B best prefixes of each z by exact score
    (prefixes that can no longer reach z = L' by position ML dropped)."""
    C, A, Lp, V = model.num_chars, model.max_advance, len(x), model.num_labels
    layer = {(): 0.0}
    beams = [layer]
    for i in range(1, ML + 1):
        grown = {}
        for pre, s in layer.items():
            for v in range(V):
                if allowed_next(pre, v, C, Lp) and sum(u // C for u in pre) + v // C >= Lp - A * (ML - i):
                    grown[pre + (v,)] = s + pos_score(model, x, pre + (v,), i)
        layer = {}
        for zz in set(sum(u // C for u in p) for p in grown):
            mine = sorted((p for p in grown if sum(u // C for u in p) == zz), key=lambda p: -grown[p])[:B]
            layer.update({p: grown[p] for p in mine})
        beams.append(layer)
    return beams


@pytest.mark.parametrize("seed,B", [(0, 1), (1, 2), (2, 3)])
def test_beam_search_gives_no_mass_outside_the_beam(seed, B):
    """outside = -inf: the contexts are the per-z beams of a reference beam search, log Z sums
    the complete outputs in the beams, an output in them has probability exp(score - log Z),
    and every (y, z) outside them has probability 0 (its restricted machine is empty), also
    for decode(method='beam')'s confidence."""
    rng = np.random.default_rng(seed)
    model = random_model(rng, 2, 3, n=2, A=2)
    x, ML = rng.integers(0, 3, 3), 5
    lat = rcms_align(model, x, B, outside=-np.inf, max_len=ML)
    beams = per_z_beam(model, x, B, ML)
    for i in range(1, ML + 1):
        ks = range(lat.layer_start[i], lat.layer_start[i + 1])
        assert {lat.suffix(k) for k in ks} == set(beams[i])
    m, _ = lat.machine()
    logz = forward_backward(m).log_partition
    paths = all_paths(2, 2, 3, ML)
    inside = [p for p in paths if p in beams[len(p)]]
    sc = {p: path_score(model, x, p) for p in paths}
    assert 0 < len(inside) < len(paths)
    assert abs(logz - np.logaddexp.reduce([sc[p] for p in inside])) < 1e-9
    for p in paths:
        allowed = np.zeros((len(p), model.num_labels), bool)
        allowed[np.arange(len(p)), list(p)] = True
        mp, _ = lat.machine(allowed=allowed, length=len(p))
        lz = forward_backward(mp, allow_empty=True).log_partition
        if p in inside:
            assert abs(lz - sc[p]) < 1e-9
        else:
            assert lz == -math.inf
    chars, conf = decode(model, x, B, method="beam", max_len=ML)
    spell = lambda p: tuple(v % 2 for v in p)
    assert abs(conf - sum(math.exp(sc[p] - logz) for p in inside if spell(p) == tuple(chars))) < 1e-9


def test_average_context_length_with_full_and_with_no_contexts():
    """With room for every suffix c_{i-1} determines all i - 1 labels, so the average is
    E[sum_i (i - 1)] / E[L] (brute force); with B = 0 every context is a root: 0."""
    rng = np.random.default_rng(2)
    model = random_model(rng, 2, 3, n=1)
    x, ML = np.array([0, 1, 2]), 5
    paths = all_paths(2, 2, 3, ML)
    sc = np.array([path_score(model, x, p) for p in paths])
    w = np.exp(sc - np.logaddexp.reduce(sc))
    L = np.array([len(p) for p in paths])
    want = (w * L * (L - 1) / 2).sum() / (w * L).sum()
    assert abs(average_context_length(model, x, B=BIG, max_len=ML) - want) < 1e-9
    assert average_context_length(model, x, B=0, max_len=ML) == 0.0


# ----------------------------------------------------------------------------- learning
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_gradient_matches_central_differences(strategy):
    """Contexts held fixed, the gradient (equation 7) of log Z_target - log Z is the derivative:
    along a random direction and along the largest coordinates (1e-6), for three context
    sizes."""
    rng = np.random.default_rng(STRATEGIES.index(strategy))
    model = random_model(rng, 2, 3, n=2, A=2, bits=10)
    x, y, ML = np.array([0, 2, 1]), np.array([1, 0, 1, 1]), 6
    align = np.array([1, 1, 0, 1])
    checked = 0
    for B in (1, 3, BIG):
        prob = prepare_update(model, x, y, strategy, B, alignment=align, max_len=ML)
        ll, ids, vals, info = prob.gradient()
        if not math.isfinite(ll):
            assert strategy == "model" and ids.size == 0 and not info["signal"]
            continue
        assert ll <= 1e-12 or strategy == "forced"
        eps = 1e-5
        d = rng.normal(size=model.theta.size)
        fd = (prob.loglik(model.theta + eps * d) - prob.loglik(model.theta - eps * d)) / (2 * eps)
        assert abs(fd - (vals * d[ids]).sum()) < 1e-6 * max(1.0, abs(fd))
        for f in ids[np.argsort(-np.abs(vals))[:3]]:
            e = np.zeros(model.theta.size)
            e[f] = eps
            fd = (prob.loglik(model.theta + e) - prob.loglik(model.theta - e)) / (2 * eps)
            assert abs(fd - vals[ids == f][0]) < 1e-6
        checked += 1
    assert checked >= 1


def test_select_by_model_gives_no_signal_when_y_falls_out_of_the_beam():
    rng = np.random.default_rng(4)
    model = random_model(rng, 3, 3, n=2)
    x, y = np.array([0, 1, 2]), np.array([2, 2, 2, 2, 2, 2])
    ll, ids, vals, info = sequence_gradient(model, x, y, "model", B=1)
    assert ll == -math.inf and ids.size == 0 and not info["signal"]
    ll, ids, vals, info = sequence_gradient(model, x, y, "rcms", B=1)
    assert math.isfinite(ll) and ids.size > 0 and info["signal"]


UNITS = [([0], [0]), ([1], [1, 2]), ([2, 3], [3])]   # phoneme 0 -> a, 1 -> bc (one-to-two), 2 3 -> d


def toy_data(rng, k):
    out = []
    for _ in range(k):
        units = [UNITS[u] for u in rng.integers(0, 3, rng.integers(2, 4))]
        out.append((np.array(sum((u[0] for u in units), [])), np.array(sum((u[1] for u in units), []))))
    return out


@pytest.mark.parametrize("strategy", ["rcms", "forced"])
def test_a_tiny_alignment_problem_is_learned(strategy):
    """Phoneme 0 spells a, 1 spells bc, and the pair 2 3 spells d: after four passes RCMS and
    forced decoding decode every training utterance exactly (RCMS contexts, B = 4)."""
    data = toy_data(np.random.default_rng(0), 8)
    model = AlignRCM(4, 4, n=2, hash_bits=14)
    seen, lines = [], []
    stats = train(model, data, strategy, B=4, passes=4, seed=0, on_update=lambda s, info: seen.append(info),
                  progress=lines.append, progress_every=4)
    assert len(stats) == 4 and len(seen) == 32 and len(lines) == 4 * 3
    assert stats[-1]["loglik"] > stats[0]["loglik"] and stats[-1]["signal"] == 8
    assert all(np.array_equal(decode(model, x, 4)[0], y) for x, y in data)


def test_imputed_alignments_are_alignments_and_match_the_units():
    data = toy_data(np.random.default_rng(1), 8)
    _, aligns = impute_alignments(data, 4, 4, passes=3)
    for (x, y), a in zip(data, aligns):
        assert advances_valid(a, x.size, 2)
    # an utterance that cannot be aligned (3 phonemes, 1 character, A = 2) gets None and is skipped
    _, more = impute_alignments(data[:1] + [(np.array([0, 1, 0]), np.array([0]))], 4, 4, passes=1)
    assert more[1] is None and advances_valid(more[0], data[0][0].size, 2)
    stats = train(AlignRCM(4, 4, n=1, hash_bits=10), data[:1] + [(np.array([0, 1, 0]), np.array([0]))], "forced",
                  B=2, alignments=more)
    assert stats[0]["signal"] == 1 and stats[0]["utterances"] == 2
    # the unit structure: b opens phoneme 1 and c shares it, d covers 2 3
    for (x, y), a in zip(data, aligns):
        for i, c in enumerate(y):
            if c == 2:
                assert a[i] == 0
            if c == 3:
                assert a[i] == 2


# ----------------------------------------------------------------------------- errors
def test_bad_arguments_are_named():
    model = AlignRCM(3, 4, n=1, hash_bits=8)
    x, y = np.array([0, 1]), np.array([0, 2])
    with pytest.raises(ArgumentError, match="character 3 at output position 2"):
        sequence_gradient(model, x, np.array([0, 3]), "rcms", 2)
    with pytest.raises(ArgumentError, match="character -1 at output position 1"):
        rcms_align(model, x, 2, y=np.array([-1]))
    with pytest.raises(ArgumentError, match="phoneme 4 at input position 2"):
        decode(model, np.array([1, 4]), 2)
    with pytest.raises(ArgumentError, match=r"x must be a non-empty .* shape \(0,\)"):
        rcms_align(model, np.array([], np.int64), 2)
    with pytest.raises(ArgumentError, match="y must be a non-empty"):
        sequence_gradient(model, x, np.array([], np.int64), "rcms", 2)
    with pytest.raises(ArgumentError, match="B must be an integer >= 0, got -1"):
        rcms_align(model, x, -1)
    with pytest.raises(ArgumentError, match="B must be an integer >= 0, got -2"):
        train(model, [(x, y)], "rcms", B=-2)
    with pytest.raises(ArgumentError, match="strategy must be one of .* got 'greedy'"):
        sequence_gradient(model, x, y, "greedy", 2)
    with pytest.raises(ArgumentError, match="strategy must be one of .* got 'beam'"):
        train(model, [(x, y)], "beam")
    with pytest.raises(ArgumentError, match="method must be 'rcms' or 'beam', got 'viterbi'"):
        decode(model, x, 2, method="viterbi")
    with pytest.raises(ArgumentError, match="select must be .* got 'y'"):
        rcms_align(model, x, 2, select="y")
    with pytest.raises(ArgumentError, match="needs the alignment"):
        sequence_gradient(model, x, y, "forced", 2)
    with pytest.raises(ArgumentError, match=r"advances \[0, 2\] are not an alignment"):
        sequence_gradient(model, x, y, "forced", 2, alignment=np.array([0, 2]))
    with pytest.raises(ArgumentError, match="max_len must be an integer >= max.* got 1"):
        rcms_align(model, x, 2, y=y, max_len=1)
    with pytest.raises(ArgumentError, match=r"data\[1\]: character 7"):
        train(model, [(x, y), (x, np.array([7]))], "rcms")
    with pytest.raises(ArgumentError, match="max_advance must be an integer >= 1, got 0"):
        AlignRCM(3, 4, max_advance=0)
    with pytest.raises(ArgumentError, match="unknown feature template 'bigram'"):
        feature_id(8, "bigram", 1)
    with pytest.raises(ArgumentError, match="no alignment of 1 characters onto 2 phonemes"):
        best_alignment(AlignRCM(3, 4, max_advance=1, hash_bits=8), x, np.array([0]))


# ----------------------------------------------------------------------------- kernels against numpy
def _select_by_partition(seg, vals, B):
    """The B highest finite values per segment, ties to the earlier: a stable sort by value."""
    active = np.zeros(vals.size, bool)
    for s in range(seg.size - 1):
        idx = np.arange(seg[s], seg[s + 1])
        idx = idx[vals[idx] > -np.inf]
        order = idx[np.argsort(-vals[idx], kind="stable")]
        active[order[:B]] = True
    return active


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(0, 7), st.integers(0, 60))
def test_heap_selection_keeps_the_b_heaviest_ties_to_the_earlier(seed, B, n):
    from fsmlearn.rcm.align_kernels import _select_segments
    rng = np.random.default_rng(seed)
    vals = rng.integers(-3, 4, n).astype(float)          # many ties
    vals[rng.random(n) < 0.3] = -np.inf
    cuts = np.sort(rng.integers(0, n + 1, rng.integers(0, 4)))
    seg = np.concatenate([[0], cuts, [n]]).astype(np.int64)
    got = np.zeros(n, np.bool_)
    _select_segments(seg, vals, B, got)
    np.testing.assert_array_equal(got, _select_by_partition(seg, vals, B))


def test_pool_kernels_and_restriction_match_numpy():
    from fsmlearn.rcm.align_lattice import _pool, _pool_total, _restrict_elems
    rng = np.random.default_rng(3)
    M = 50
    arc = np.sort(rng.integers(0, M, 400))
    score = rng.normal(size=400)
    score[rng.random(400) < 0.2] = -np.inf
    label = rng.integers(0, 9, 400).astype(np.int32)
    bounds = np.array([0, 0, 120, 400], np.int64)
    bounds[2] = np.searchsorted(arc, arc[120])          # no arc straddles a block
    top, best, diff = _pool(score, arc, label, M, bounds)
    for g in range(M):
        js = np.flatnonzero(arc == g)
        t = score[js].max() if js.size else -np.inf
        assert top[g] == t
        assert best[g] == (label[js[np.argmax(score[js])]] if t > -np.inf else -1)
    safe = np.where(top > -np.inf, top, 0.0)
    np.testing.assert_array_equal(diff, score - safe[arc])
    scale = np.exp(diff)
    np.testing.assert_array_equal(_pool_total(arc, scale, M), np.bincount(arc, weights=scale, minlength=M))
    starts = np.array([0, 0, 100, 250, 400], np.int64)
    layer = np.repeat(np.arange(4), np.diff(starts))
    allowed = rng.random((3, 9)) < 0.4
    for L in (1, 2, 3):
        want = np.flatnonzero((layer >= 1) & (layer <= L) & allowed[np.minimum(np.maximum(layer, 1), L) - 1, label])
        np.testing.assert_array_equal(_restrict_elems(starts, label, allowed, L), want)


def test_scores_reuse_the_build_scores_only_for_the_same_tables():
    rng = np.random.default_rng(4)
    model = random_model(rng, 3, 4, n=2)
    x = rng.integers(0, 4, 5)
    lat = rcms_align(model, x, 2)
    fresh = lat.scores(model.theta.copy())[0]           # the same values: the build scores
    assert fresh is lat.built.scores
    lat.built = None
    np.testing.assert_array_equal(lat.scores()[0], fresh)
    lat = rcms_align(model, x, 2)
    plain = rcms_align(model, x, 2)
    plain.built = None                                  # always computed
    model.theta[:] += 0.5                               # changed in place: other tables
    got = lat.scores()[0]
    assert got is not lat.built.scores
    np.testing.assert_array_equal(got, plain.scores()[0])
    assert not np.array_equal(got, lat.built.scores)


def test_the_build_pool_gives_the_machine_computed_afresh():
    rng = np.random.default_rng(5)
    model = random_model(rng, 3, 4, n=2)
    x, y = rng.integers(0, 4, 5), rng.integers(0, 3, 6)
    lat = rcms_align(model, x, 2, y=y)
    plain = rcms_align(model, x, 2, y=y)
    plain.built = None
    for allowed in (None, lat.target):
        kw = {} if allowed is None else dict(allowed=allowed, length=allowed.shape[0])
        for _ in range(2):                                   # the second call reuses the first's pool
            m, p = lat.machine(**kw)
            m0, p0 = plain.machine(**kw)
            for a, b in ((m.weight, m0.weight), (m.final, m0.final), (m.src_start, m0.src_start), (m.dst, m0.dst),
                         (m.ilabel, m0.ilabel), (p.arc, p0.arc), (p.scale, p0.scale), (p.top, p0.top),
                         (p.total, p0.total), (p.best_label, p0.best_label)):
                np.testing.assert_array_equal(a, b)
