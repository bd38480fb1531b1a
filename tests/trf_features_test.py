"""TRF features (Table 2), the feature acceptor and the exact normalisers by the engine."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fsmlearn.algo import score_sequences
from fsmlearn.errors import ArgumentError
from fsmlearn.trf.acceptor import LengthProduct, compile_acceptor
from fsmlearn.trf.features import as_corpus, build_features, make_templates


def _toy(seed=0, V=3, n=60, maxlen=7):
    rng = np.random.default_rng(seed)
    return rng, as_corpus([rng.integers(0, V, rng.integers(1, maxlen)) for _ in range(n)])


def _direct_score(fs, x, lam):
    """lambda . f(x) by the definition: every template at every padded position, by hand."""
    t = fs.templates
    y = [fs.bos] + [int(v) for v in x] + [fs.eos]
    keys = {int(k): f for f, k in enumerate(fs.keys)}
    total = 0.0
    for i in range(1, len(y)):
        for r in range(len(t.tid)):
            L = int(t.length[r])
            offs = [int(o) for o in t.offset[r, :L]]
            if i + min(offs) < 0 or (L == 1 and i == len(y) - 1):
                continue
            k = int(t.tid[r])
            for q, o in enumerate(offs):
                tok = y[i + o]
                k = (k << 14) | (int(fs.classes[tok]) if t.kind[r, q] else tok)
            k <<= 14 * (4 - L)
            if k in keys:
                total += lam[keys[k]]
    return total


def test_table_2_templates():
    t = make_templates("w+c+ws+cs+wsh+csh+cpw+tied")
    assert t.label[:4] == ("w0", "w-1w0", "w-2w-1w0", "w-3w-2w-1w0")
    assert "c-3c-1c0" in t.label and "w-5w0" in t.label and "c-3c-2c-1w0" in t.label
    tied = [r for r, lab in enumerate(t.label) if lab in ("w-6w0", "w-7w0", "w-8w0", "w-9w0")]
    assert len(tied) == 4 and len({int(t.tid[r]) for r in tied}) == 1      # one shared parameter
    assert t.span == 9 and t.uses_classes
    assert make_templates("w", 3).label == ("w0", "w-1w0", "w-2w-1w0") and not make_templates("w").uses_classes


def test_feature_presets_name_the_papers_sets():
    assert make_templates("paper").label == make_templates("w+c+ws+cs+wsh+csh+tied").label      # Table 3
    assert make_templates("previous").names == ("w", "c", "ws", "cs", "cpw")
    assert make_templates("class", 2).label == ("w0", "w-1w0", "c0", "c-1c0")
    assert make_templates("ngram").names == ("w",) and not make_templates("ngram").uses_classes
    with pytest.raises(ArgumentError, match="preset .*paper"):
        make_templates("papers")


@pytest.mark.parametrize("bad", ["w+x", "w+w", ""])
def test_bad_templates_are_refused(bad):
    with pytest.raises(ArgumentError):
        make_templates(bad)
    with pytest.raises(ArgumentError):
        make_templates("w", order=5)


def test_character_features_are_the_papers_begin_end_ngrams():
    # training word "ab" (a=0, b=1): unigrams a, b; bigrams <s>a, ab, b</s>; trigrams <s>ab, ab</s>
    fs = build_features(as_corpus([[0, 1]]), 2, make_templates("w", 3))
    assert sorted(fs.describe(f) for f in range(fs.num_features)) == sorted(
        ["w0:0", "w0:1", "w-1w0:2,0", "w-1w0:0,1", "w-1w0:1,3", "w-2w-1w0:2,0,1", "w-2w-1w0:0,1,3"])


@pytest.mark.parametrize("types", ["w", "w+c+ws+cs", "w+c+wsh+csh+cpw+tied"])
def test_scores_equal_the_direct_sum_and_the_acceptors_path_weight(types):
    rng, train = _toy(1, V=3, maxlen=12)
    fs = build_features(train, 3, make_templates(types, 3), classes=np.array([0, 1, 1]))
    lam = rng.normal(size=fs.num_features)
    test = as_corpus([rng.integers(0, 3, rng.integers(1, 13)) for _ in range(40)])
    s = fs.scores(test, lam)
    assert np.allclose(s, fs.scores_walk(test, lam), atol=1e-12)
    direct = np.array([_direct_score(fs, test.sentence(i), lam) for i in range(len(test))])
    assert np.allclose(s, direct, atol=1e-12)
    if fs.templates.span <= 3:
        acc = compile_acceptor(fs)
        w = score_sequences(acc.weighted(lam), test.ptr, (test.tokens + 1).astype(np.int32)).weight
        assert np.allclose(-w, s, atol=1e-12)


def test_feature_counts_match_the_scores():
    rng, train = _toy(2)
    fs = build_features(train, 3, make_templates("w+ws", 3))
    lam = rng.normal(size=fs.num_features)
    idx, ptr = fs.feature_counts(train)
    by_counts = np.array([lam[idx[ptr[i]:ptr[i + 1]]].sum() for i in range(len(train))])
    assert np.allclose(by_counts, fs.scores(train, lam))


@pytest.mark.parametrize("seed", range(3))
def test_normalisers_and_expected_features_equal_enumeration(seed):
    rng, train = _toy(seed, V=3)
    fs = build_features(train, 3, make_templates("w+c+ws", 3), classes=np.array([0, 1, 1]))
    lam = rng.normal(size=fs.num_features)
    m = 5
    lp = LengthProduct(compile_acceptor(fs), m)
    logz = lp.log_normalisers(lam)
    pi = np.r_[0.0, rng.dirichlet(np.ones(m))]
    pi[2] = 0.0
    pi /= pi.sum()
    with np.errstate(divide="ignore"):
        E, _ = lp.expected_features(lam, np.log(pi))
    brute = np.zeros(fs.num_features)
    for j in range(1, m + 1):
        xs = as_corpus([list(x) for x in itertools.product(range(3), repeat=j)])
        s = fs.scores(xs, lam)
        assert logz[j] == pytest.approx(np.log(np.exp(s).sum()), abs=1e-10)
        p = np.exp(s - logz[j])
        idx, ptr = fs.feature_counts(xs)
        for k in range(len(xs)):
            np.add.at(brute, idx[ptr[k]:ptr[k + 1]], pi[j] * p[k])
    assert np.allclose(E, brute, atol=1e-10)


def test_bad_corpora_and_vocabularies_are_refused():
    with pytest.raises(ArgumentError, match="sentence 1 has token id 5"):
        build_features(as_corpus([[0, 1], [5]]), 3, make_templates("w"))
    with pytest.raises(ArgumentError, match="empty"):
        build_features(as_corpus([[0], []]), 3, make_templates("w"))
    with pytest.raises(ArgumentError, match="class"):
        build_features(as_corpus([[0]]), 3, make_templates("c"), classes=np.array([0, 1]))
    with pytest.raises(ArgumentError, match="vocabulary"):
        build_features(as_corpus([[0]]), 20_000, make_templates("w"))


def _fired(fs, window, at_eos):
    """The features firing at the last position of ``window`` (padded tokens, -1 before <s>),
    by the templates' definition, one Python loop per row."""
    t = fs.templates
    s = len(window) - 1
    y = [fs.bos if v == -1 else v for v in window]
    out = []
    for r in range(len(t.tid)):
        L = int(t.length[r])
        if (L == 1 and at_eos) or any(window[s + int(t.offset[r, q])] == -1 for q in range(L)):
            continue
        k = int(t.tid[r])
        for q in range(L):
            tok = y[s + int(t.offset[r, q])]
            k = (k << 14) | (int(fs.classes[tok]) if t.kind[r, q] == 1 else tok)
        out.append(k << (14 * (4 - L)))
    idx = fs.lookup(np.array(out, np.int64)) if out else np.zeros(0, np.int64)
    return sorted(int(f) for f in idx[idx >= 0])


@pytest.mark.parametrize("types,V,cls", [("w+c", 3, [0, 1, 1]), ("w+ws", 4, None), ("cpw+w", 3, [0, 1, 1]),
                                          ("w+wsh", 3, None)])
def test_the_acceptor_is_its_histories_breadth_first(types, V, cls):
    """The compiled acceptor against its definition: the states are the padded histories
    reachable from <s>, found breadth first, each with an arc per token to the history it
    shifts to, firing the features the templates give (and the finals those on </s>)."""
    rng, train = _toy(V, V=V, n=80, maxlen=12)
    fs = build_features(train, V, make_templates(types, 3), classes=None if cls is None else np.array(cls))
    acc = compile_acceptor(fs)
    span = max(fs.templates.span, 1)
    hist = [(-1,) * (span - 1) + (fs.bos,)]
    index = {hist[0]: 0}
    q = 0
    while q < len(hist):
        h = hist[q]
        for a in range(V):
            e = q * V + a
            nh = (h + (a,))[1:]
            if nh not in index:
                index[nh] = len(hist)
                hist.append(nh)
            assert acc.machine.dst[e] == index[nh]
            got = acc.arc_features[e]
            assert sorted(np.repeat(got.indices, got.data.astype(int)).tolist()) == _fired(fs, h + (a,), False)
        got = acc.final_features[q]
        assert sorted(np.repeat(got.indices, got.data.astype(int)).tolist()) == _fired(fs, h + (fs.eos,), True)
        q += 1
    assert acc.machine.num_states == len(hist)
    assert [tuple(r) for r in acc.histories.tolist()] == hist
    with pytest.raises(ArgumentError, match="more than 2 states"):
        compile_acceptor(fs, max_states=2)
