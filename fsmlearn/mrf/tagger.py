"""The MRF part-of-speech tagger of Jernite, Rush and Sontag (2015, section 6 and appendix B),
trained on the joint likelihood of tags and words by the lifted bound.

The model.  A cyclic MRF over the tagged corpus (P >= K separators ``<S>``/``<S>`` before
each sentence, as in :mod:`fsmlearn.mrf.model`; P = max(K, max |m|) so that no potential
joins two sentences and Lemma 1 still applies): tag T_i is joined to the next K tags by
theta^l[t, t'] = V^l g(t, t') (g the tag-pair indicators, i.e. full rank) and, section 6,
to its L nearest words W_{i+m}, m in the window M (|M| = L), by

    theta^{w,m}[t, w] = U^m f_m(w)                       (section 6, the paper's U^m f(t_i, w_{i+m}))

with a parameter matrix per offset.  f are appendix B's features: the word itself, its
prefixes and suffixes up to length 4, and for m = 0 only ("when m = 0, i.e. the potential
with the tag directly above a word") the eight morphology tests (all upper case, first
letter upper case, ends in 's', both, all upper case ending in 'S', has a digit, all
digits, has a hyphen); tags also have a unary theta^0.  The paper does not list the offsets of its "L
nearest words" (Figure 7 draws K = 2, L = 3); we take them by distance, the next word
before the previous one on a tie: M = (0, +1, -1, +2, -2, ...)[:L] (:func:`window_offsets`),
so L = 3 is the symmetric window of Figure 7 and L = 1 the word under the tag.

The lifted bound (section 4.4 extended to the word window).  A word W_j hangs from the L
tags T_{j-m}, m in M: with L > 1 two of them lie in one tag star (e.g. W_j - T_j - T_{j+1}
- W_j for M = {0, -1} in the star T_j..T_{j+1}), so a forest may not hold all of a word's
edges.  Take instead the L (K + 1) forests F_{m,r} (m in M, r = 0..K): the rotated tag
stars of rotation r (Figure 3: star centres T_{r + s(K+1)}, each tag edge in exactly one
rotation) with every word W_j hanging as a leaf from the one tag T_{j-m}.  A leaf never
closes a cycle, so each F_{m,r} is a forest.  With weights rho_F = p_m / (K+1) (p_m > 0,
sum_m p_m = 1; default p_m = 1/L, :func:`tree_weights`)

    rho(tag edge, distance l) = sum_m p_m / (K+1) = 1/(K+1),   rho(word edge, offset m) = (K+1) p_m / (K+1) = p_m,

valid edge appearance probabilities (section 4.2), symmetric under rotation as section 4.3
requires.  The TRW bound A(theta) <= sum_F rho_F A(theta^F) holds for any split with
sum_F rho_F theta^F = theta; the edges take theta_e / rho_e: (K+1) theta^l on tag edges
and theta^{w,m} / p_m on the word edges of the forests F_{m,.}.  Each F_{m,r} is N/(K+1)
copies of one tree, the star of Figure 4 over tag copies T^{m,0..K} (edges (K+1) theta^l,
centre T^{m,0}) with a word copy W^{m,j} hanging from each T^{m,j} (edge theta^{w,m} /
p_m), the same tree for every rotation r, so

    A(theta) <= N / (K+1) * sum_m p_m log Z_m,

log Z_m the tree's log-partition by exact BP (O(K T^2 + (K+1) T V)).  Eq. 12 becomes the
Bethe problem of the L trees with the node constraints of eq. 13 tying all C = L(K+1) tag
copies (and all C word copies) to copy 0 = (m = 0, j = 0); their multipliers delta [C - 1,
T + V] enter as in eqs. 14 and 17: copy c >= 1 of tree m has unary theta^0 + delta_c / p_m
(words delta_c / p_m), copy 0 has theta^0 - sum_c delta_c / p_0 (words -sum_c delta_c /
p_0).  These keep sum_F rho_F theta^F = theta on every node (sum_m p_m sum_j unary^{m,j} =
(K+1) theta^0, words 0), so the bound holds for every delta (eq. 15's analogue), and the
derivative of sum_m p_m log Z_m in delta_c is mu_c - mu_0 (eq. 16) as in
:func:`fsmlearn.mrf.lifted.tighten` (Algorithm 1).  No edge-level multipliers are needed
although each tag edge class has L copies (one per tree) and each word edge class K + 1
(one per tag copy): all copies of a class carry the same potential, so at a point where
the node copies agree, replacing the copies' edge marginals by their mean keeps every
constraint and, -I(mu_E) being concave in mu_E for fixed node marginals, does not lower
the objective; the node-tied maximum is the lifted TRW value with the rho above (strong
duality as in section 4.4).  The per-position bound is <hat-mu, theta> - sum_m p_m log
Z_m / (K+1), and eq. 18 gives

    dL/dtheta^0 = hat-mu_T - sum_{m,j} p_m mu_{T^{m,j}} / (K+1),   dL/dtheta^l = hat-mu^l - sum_m p_m mu_E^{m,l},
    dL/dtheta^{w,m} = hat-mu^{w,m} - mean_j mu_{T^{m,j} W^{m,j}},   dL/dU^m = (dL/dtheta^{w,m}) F_m,

hat-mu^{w,m}[t, w] the corpus's frequency of (T_i = t, W_{i+m} = w).  L-BFGS trains
(theta^0, theta^l, U^m) (Algorithm 2).  With L = 1 there is one tree, p_0 = 1, and every
number is the L = 1 construction's (the star with one word leaf per tag copy, rho = 1 on
the word edges).  The price of L > 1: the word under the tag is joined with rho = p_0 < 1
instead of 1, so the entropy bound counts only p_0 of the tag-word mutual information and
the bound is looser than L = 1's for the same theta (on three toy models, L = 3 with p_m =
1/3 and the context potentials zero, the tightened bound's gap to the exact log Z grows
from 0.00-0.13 to 0.11-0.41 nats per position); the trees' weights (p_0 against the
context edges' rho) trade the two.

Decoding is the engine's best path (:func:`fsmlearn.algo.best_path`) on each sentence's
tagging lattice: with the words observed, each window potential is a unary on its tag, so
for K = 1 the conditional p(tags | words) of a sentence between its separators is a
first-order chain with arc weights -(theta^1[t', t] + theta^0[t] + sum_m theta^{w,m}[t,
w_{i+m}]), the words beyond the sentence being separators.

Public names: fit_tagger, tagging_accuracy, TaggerMRF, window_offsets, word_features, tagged_sequence,
TaggerMoments, tagger_moments, tree_weights, tree_potentials, tree_bp, tagger_bound, train_tagger,
sentence_lattice_machine, decode, joint_log_partition (the exact log Z the bound bounds, by the
engine on the cycle of (tag, word) symbols).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..algo import best_path
from ..errors import ArgumentError, ModelError, NotConvergedError
from ..fsm import Machine
from .exact import cycle_log_partition
from .lifted import TightenState, copies_gap, star_marginals, tighten
from .model import SEP
from .train import _lbfgs

__all__ = ["fit_tagger", "tagging_accuracy", "TaggerMRF", "window_offsets", "word_features", "tagged_sequence",
           "TaggerMoments", "tagger_moments",
           "tree_weights", "tree_potentials", "tree_bp", "tagger_bound", "train_tagger", "sentence_lattice_machine",
           "decode", "joint_log_partition"]


#: the longest prefix or suffix a feature index may hold (an index built with a smaller
#: ``max_affix`` simply lacks the longer ones)
MAX_AFFIX = 10

#: the morphology tests, conjoined with the tag only for the word under it (offset 0)
MORPHOLOGY = ("allcaps", "initcap", "ends-s", "initcap-ends-s", "allcaps-ends-S", "has-digit", "all-digits",
              "has-hyphen")

#: the widest window :func:`window_offsets` builds
MAX_WINDOW = 9


def window_offsets(L: int) -> tuple:
    """The offsets m of a tag's L nearest words, by distance, the next word first on a tie:
    (0, 1, -1, 2, -2, ...)[:L].

    Raises:
        ArgumentError: L outside 1..MAX_WINDOW.
    """
    if not (isinstance(L, (int, np.integer)) and 1 <= L <= MAX_WINDOW):
        raise ArgumentError(f"window L = {L!r}; expected an integer 1..{MAX_WINDOW}")
    out = [0]
    d = 1
    while len(out) < L:
        out.append(d)
        if len(out) < L:
            out.append(-d)
        d += 1
    return tuple(out)


def _features_of(word: str, max_affix: int = MAX_AFFIX) -> list[str]:
    if word == SEP:
        return ["w=" + SEP]
    out = ["w=" + word]
    for k in range(1, max_affix + 1):
        if len(word) >= k:
            out.append(f"p{k}={word[:k]}")
            out.append(f"s{k}={word[-k:]}")
    up = word.isupper()
    first = word[:1].isupper()
    ends_s = word.endswith("s")
    for name, on in zip(MORPHOLOGY, (up, first, ends_s, first and ends_s, up and word.endswith("S"),
                                     any(c.isdigit() for c in word), word.isdigit(), "-" in word)):
        if on:
            out.append(name)
    return out


def word_features(words, index: dict | None = None, max_affix: int = 4):
    """Appendix B's features of each word type.

    Args:
        words: the word types.
        index: feature name -> column (None: built from ``words``; features outside a given
            index are dropped, so an unseen word keeps its affix and shape features).
        max_affix: the longest prefix and suffix (appendix B: 4) when the index is built;
            with a given index every affix it holds is used.

    Returns:
        (CSR float64 [len(words), F] of 0/1, the feature index).
    """
    build = index is None
    index = {} if build else index
    rows, cols = [], []
    for i, w in enumerate(words):
        for f in _features_of(w, max_affix if build else MAX_AFFIX):
            j = index.get(f)
            if j is None:
                if not build:
                    continue
                j = index[f] = len(index)
            rows.append(i)
            cols.append(j)
    F = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(words), len(index)))
    return F, index


@dataclass
class TaggerMRF:
    """The tagging MRF's parameters.

    Attributes:
        tags: T tag names, ``<S>`` first.
        vocab: V word types of the training corpus, ``<S>`` first (the word nodes' states).
        features: feature name -> column of U.
        theta0: float64 [T]; trans: float64 [K, T, T]; U: float64 [T, F], U^0 (the word
            under the tag).
        offsets: the window M, 0 first (:func:`window_offsets`; default (0,), L = 1).
        context_U: float64 [L - 1, T, F], U^m for offsets[1:] (columns of the morphology
            tests unused: those features are the word under the tag's only); None for zeros.
    """
    tags: list
    vocab: list
    features: dict
    theta0: np.ndarray
    trans: np.ndarray
    U: np.ndarray
    offsets: tuple = (0,)
    context_U: np.ndarray | None = None
    _F: sp.csr_matrix | None = field(default=None, repr=False)

    def __post_init__(self):
        T, F = len(self.tags), len(self.features)
        self.offsets = tuple(int(m) for m in self.offsets)
        if self.context_U is None:
            self.context_U = np.zeros((len(self.offsets) - 1, T, F))
        if self.theta0.shape != (T,) or self.trans.ndim != 3 or self.trans.shape[1:] != (T, T) \
                or self.U.shape != (T, F) or self.context_U.shape != (len(self.offsets) - 1, T, F):
            raise ModelError(f"tagger shapes: theta0 {self.theta0.shape}, trans {self.trans.shape}, U "
                             f"{self.U.shape}, context_U {self.context_U.shape} for {T} tags, {F} features "
                             f"and offsets {self.offsets}")
        if not self.offsets or self.offsets[0] != 0 or len(set(self.offsets)) != len(self.offsets):
            raise ModelError(f"tagger window offsets {self.offsets}: expected distinct offsets, 0 first")
        if self.tags[0] != SEP or self.vocab[0] != SEP:
            raise ModelError(f"the first tag and word must be {SEP!r}")

    @property
    def K(self) -> int:
        return int(self.trans.shape[0])

    @property
    def L(self) -> int:
        """The window's width (words joined to each tag)."""
        return len(self.offsets)

    @property
    def pad(self) -> int:
        """Separators before each sentence: max(K, max |m|)."""
        return max(self.K, max(abs(m) for m in self.offsets))

    def context_mask(self) -> np.ndarray:
        """float64 [F]: 1 on the columns the context offsets (m != 0) use, 0 on the morphology tests."""
        mask = np.ones(len(self.features))
        for name in MORPHOLOGY:
            j = self.features.get(name)
            if j is not None:
                mask[j] = 0.0
        return mask

    @property
    def word_matrix(self) -> sp.csr_matrix:
        """F [V, F]: the features of the vocabulary."""
        if self._F is None:
            self._F, _ = word_features(self.vocab, self.features)
        return self._F

    def emission(self, F=None, k: int = 0) -> np.ndarray:
        """theta^{w,m} [T, V] (or [T, rows of F]) of the window's offset m = ``offsets[k]``."""
        F = self.word_matrix if F is None else F
        if k == 0:
            return np.asarray((F @ self.U.T).T)
        # the context offsets do not use the morphology tests: their columns of U^m masked
        return np.asarray((F @ (self.context_U[k - 1] * self.context_mask()).T).T)

    @classmethod
    def init(cls, tags, vocab, K: int = 1, max_affix: int = 4, window: int = 1) -> "TaggerMRF":
        if not 1 <= max_affix <= MAX_AFFIX:
            raise ArgumentError(f"max_affix = {max_affix}; expected 1..{MAX_AFFIX}")
        offsets = window_offsets(window)
        tags, vocab = [SEP] + [t for t in tags if t != SEP], [SEP] + [w for w in vocab if w != SEP]
        F, index = word_features(vocab, max_affix=max_affix)
        T = len(tags)
        return cls(tags, vocab, index, np.zeros(T), np.zeros((K, T, T)), np.zeros((T, len(index))), offsets,
                   np.zeros((len(offsets) - 1, T, len(index))), F)

    def to_vector(self) -> np.ndarray:
        """(theta^0, theta^1..K, U^0, U^m for the context offsets), flattened."""
        return np.concatenate([self.theta0, self.trans.ravel(), self.U.ravel(), self.context_U.ravel()])

    def with_vector(self, v) -> "TaggerMRF":
        T, K, Fn = len(self.tags), self.K, len(self.features)
        a, b = T, T + K * T * T
        c = b + T * Fn
        return TaggerMRF(self.tags, self.vocab, self.features, v[:a].copy(), v[a:b].reshape(K, T, T).copy(),
                         v[b:c].reshape(T, Fn).copy(), self.offsets, v[c:].reshape(-1, T, Fn).copy(), self._F)


def tagged_sequence(sentences, tag_index: dict, word_index: dict, K: int, pad: int | None = None):
    """The cyclic (tag, word) sequence: P = max(K, pad) (``<S>``, ``<S>``) before each sentence
    (``pad``: the window's widest offset, :attr:`TaggerMRF.pad`), padded to a multiple of
    K + 1.  Returns int64 arrays (tags [N], words [N]).

    Raises:
        ArgumentError: a tag or word not in its index (sentence and position named).
    """
    P = K if pad is None else max(K, int(pad))
    ts, ws = [], []
    for s, sent in enumerate(sentences):
        ts.extend([0] * P)
        ws.extend([0] * P)
        for j, (w, t) in enumerate(sent):
            if t not in tag_index or w not in word_index:
                raise ArgumentError(f"sentence {s}, token {j}: ({w!r}, {t!r}) has a word or tag outside the model")
            ts.append(tag_index[t])
            ws.append(word_index[w])
    while len(ts) % (K + 1) or len(ts) < 2 * K + 1:
        ts.append(0)
        ws.append(0)
    return np.asarray(ts, np.int64), np.asarray(ws, np.int64)


@dataclass
class TaggerMoments:
    """Observed moments per position: tag unary [T], tag pairs [K, T, T], and per window
    offset m (in the model's order) the CSR [T, V] frequency of (T_i, W_{i+m})."""
    N: int
    tag: np.ndarray
    pairs: np.ndarray
    emit: tuple


def tagger_moments(tags, words, T: int, V: int, K: int, offsets=(0,)) -> TaggerMoments:
    """The moments of the cyclic sequence (:func:`tagged_sequence`) for order K and window ``offsets``."""
    N = tags.size
    pairs = np.zeros((K, T, T))
    for l in range(1, K + 1):
        np.add.at(pairs[l - 1], (tags, np.roll(tags, -l)), 1.0)
    emit = []
    for m in offsets:
        e = sp.csr_matrix((np.ones(N), (tags, np.roll(words, -int(m)))), shape=(T, V))
        e.sum_duplicates()
        emit.append(e / N)
    return TaggerMoments(N, np.bincount(tags, minlength=T) / N, pairs / N, tuple(emit))


@dataclass
class TreeResult:
    """BP on the tagger's lifted trees: log-partition (sum_m p_m log Z_m over the L trees), node marginals of
    the C = L(K+1) copies (tags then words, [C, T+V]; copy m(K+1) + j is tag copy j of the
    tree of offset ``offsets[m]``, copy 0 the first tree's centre), tag-pair edge marginals
    (sum_m p_m mu_E^{m,l}, [K, T, T]), tag-word edge marginals per tree (mean over its copies,
    [L, T, V]); ``delta`` [C - 1, T+V]."""
    log_partition: float
    mu: np.ndarray
    pair: np.ndarray
    emit: np.ndarray
    delta: np.ndarray

    @property
    def gap(self) -> float:
        """:func:`~fsmlearn.mrf.lifted.copies_gap` of the node marginals."""
        return copies_gap(self.mu)


@dataclass
class TreePotentials:
    theta0: np.ndarray        # [T]
    logE: np.ndarray          # [K, T, T]: (K+1) theta^l
    E: np.ndarray             # [K, T, T]: exp(logE - Eshift), the star's scaled edge potentials
    Eshift: np.ndarray        # [K]
    Ew: np.ndarray            # [L, T, V]: exp(theta^{w,m} / p_m - shift[m])
    shift: np.ndarray         # [L]
    weights: np.ndarray       # [L]: p_m, the trees' weights (rho of the offset-m word edges), sum 1

    @property
    def T(self):
        return self.theta0.size


def tree_weights(L: int, centre: float | None = None) -> np.ndarray:
    """The trees' weights p [L]: uniform 1/L (``centre`` None), or p_0 = ``centre`` for the word
    under the tag and (1 - centre)/(L - 1) for each other offset.

    Raises:
        ArgumentError: ``centre`` outside (0, 1], or 1 with L > 1, or not 1 with L = 1.
    """
    if centre is None:
        return np.full(L, 1.0 / L)
    if L == 1:
        if centre != 1.0:
            raise ArgumentError(f"centre weight {centre} with L = 1; expected 1")
        return np.ones(1)
    if not 0.0 < centre < 1.0:
        raise ArgumentError(f"centre weight {centre!r}; expected 0 < p_0 < 1 for L = {L}")
    return np.concatenate([[centre], np.full(L - 1, (1.0 - centre) / (L - 1))])


def tree_potentials(model: TaggerMRF, weights=None) -> TreePotentials:
    """The lifted trees' potentials: tag edges (K+1) theta^l, word edges theta^{w,m} / p_m
    (``weights`` p [L], default uniform 1/L)."""
    L = model.L
    p = tree_weights(L) if weights is None else np.asarray(weights, np.float64)
    if p.shape != (L,) or not np.all(p > 0) or abs(p.sum() - 1.0) > 1e-12:
        raise ArgumentError(f"tree weights {p}; expected {L} positive weights summing to 1")
    Ew, shift = [], []
    for k in range(L):
        th = model.emission(k=k) if L == 1 else model.emission(k=k) / p[k]
        s = float(th.max())
        Ew.append(np.exp(th - s))
        shift.append(s)
    logE = (model.K + 1) * model.trans
    Eshift = logE.reshape(model.K, -1).max(axis=1)
    E = np.exp(logE - Eshift[:, None, None])
    return TreePotentials(model.theta0.copy(), logE, E, Eshift, np.stack(Ew), np.array(shift), p)


def tree_bp(pot: TreePotentials, delta) -> TreeResult:
    """Exact BP on the lifted trees (per offset, a tag star with one word leaf per tag copy) for
    duals ``delta`` [C - 1, T + V]."""
    L, T, V = pot.Ew.shape
    K = pot.E.shape[0]
    C = L * (K + 1)
    delta = np.asarray(delta, np.float64)
    if delta.shape != (C - 1, T + V):
        raise ArgumentError(f"delta has shape {delta.shape}; expected [{C - 1}, {T + V}]")
    dT, dW = delta[:, :T], delta[:, T:]
    if L > 1:                                   # copy c of tree m carries delta_c / p_m
        inv = 1.0 / np.repeat(pot.weights, K + 1)                                 # [C]
        tag_pot = np.vstack([pot.theta0 - inv[0] * dT.sum(axis=0), pot.theta0 + inv[1:, None] * dT])
        word_pot = np.vstack([-inv[0] * dW.sum(axis=0), inv[1:, None] * dW])
    else:
        tag_pot = np.vstack([pot.theta0 - dT.sum(axis=0), pot.theta0 + dT])      # [C, T]
        word_pot = np.vstack([-dW.sum(axis=0), dW])                               # [C, V]
    wmax = word_pot.max(axis=1, keepdims=True)
    wexp = np.exp(word_pot - wmax)
    wmsg = np.empty((C, T))                                                       # word copy c -> tag copy c
    with np.errstate(divide="ignore"):
        for m in range(L):
            c = slice(m * (K + 1), (m + 1) * (K + 1))
            wmsg[c] = np.log(wexp[c] @ pot.Ew[m].T) + wmax[c] + pot.shift[m]
    psi = tag_pot + wmsg
    logz = 0.0
    muT = np.empty((C, T))
    pair = np.zeros((K, T, T))
    for m in range(L):
        o = m * (K + 1)
        # the tag star of this tree, the word messages in its unaries (the lifted bounds' one star routine)
        lz, mu, a, b = star_marginals(psi[o:o + K + 1], pot.E, pot.Eshift)
        logz += lz if L == 1 else pot.weights[m] * lz
        muT[o:o + K + 1] = mu
        for l in range(K):
            p = a[l][:, None] * pot.E[l] * b[l][None, :]
            pair[l] = p if L == 1 else pair[l] + pot.weights[m] * p
    # tag copy c -> its word: its marginal without the word's message (up to a constant per copy)
    with np.errstate(divide="ignore"):
        out = np.log(muT) - wmsg                                                 # [C, T]
    omax = out.max(axis=1, keepdims=True)
    oexp = np.exp(out - omax)
    q = np.empty((C, V))
    emit = np.empty((L, T, V))
    for m in range(L):
        c = slice(m * (K + 1), (m + 1) * (K + 1))
        q[c] = (oexp[c] @ pot.Ew[m]) * wexp[c]                                   # [K+1, V]
        # tag-word edge marginal of copy j: oexp[j, t] Ew[t, w] wexp[j, w] / sum; their mean
        scale = 1.0 / q[c].sum(axis=1)
        emit[m] = ((oexp[c] * scale[:, None]).T @ wexp[c]) * pot.Ew[m] / (K + 1)  # [T, V]
    muW = q / q.sum(axis=1, keepdims=True)
    if not np.isfinite(logz) or not np.isfinite(muW).all():
        raise NotConvergedError("the tagger's tree messages underflow (potentials too far apart)")
    return TreeResult(logz, np.hstack([muT, muW]), pair, emit, delta.copy())


def tagger_bound(model: TaggerMRF, mom: TaggerMoments, pot: TreePotentials, res: TreeResult):
    """(per-position bound <hat-mu, theta> - sum_m p_m log Z_m / (K+1), its gradient in the
    parameter vector)."""
    K, T, L = model.K, len(model.tags), model.L
    if len(mom.emit) != L:
        raise ArgumentError(f"moments for {len(mom.emit)} window offsets; the model has {L}")
    dot = float(mom.tag @ model.theta0 + (mom.pairs * model.trans).sum())
    gU = []
    for k in range(L):
        th_w = np.log(pot.Ew[k]) + pot.shift[k]                                   # theta^{w,m} / p_m
        dot += float((mom.emit[k].multiply(th_w if L == 1 else th_w * pot.weights[k])).sum())
        gw = mom.emit[k].toarray() - res.emit[k]
        g = np.asarray(model.word_matrix.T @ gw.T).T                             # [T, F], eq. 19's analogue
        gU.append(g if k == 0 else g * model.context_mask())
    value = dot - res.log_partition / (K + 1)
    if L == 1:
        g0 = mom.tag - res.mu[:, :T].mean(axis=0)
    else:
        g0 = mom.tag - (np.repeat(pot.weights, K + 1)[:, None] * res.mu[:, :T]).sum(axis=0) / (K + 1)
    gp = mom.pairs - res.pair
    return value, np.concatenate([g0, gp.ravel()] + [g.ravel() for g in gU])


def joint_log_partition(model: TaggerMRF, N: int) -> float:
    """The exact log-partition of the cyclic joint model of tags and words over N positions,
    by the engine: the log Z that :func:`tagger_bound` bounds (times N).

    Each position's (tag, word) pair is one symbol of a cyclic MRF over T V symbols of order
    K' = max(K, max |m|) (:func:`fsmlearn.mrf.exact.cycle_log_partition`): its unary is
    theta^0[t] + theta^{w,0}[t, w]; the pair potential at distance l joins theta^l[t, t']
    (l <= K), theta^{w,l}[t, w'] (the word l after the tag, l in M) and theta^{w,-l}[t', w]
    (the word l before it, -l in M).  Small T V and K' only (the unrolled cycle has
    (T V)^{2K'} N states).

    Raises:
        ArgumentError: N < 2 K', or a cycle too large to unroll.
    """
    T, V, K = len(model.tags), len(model.vocab), model.K
    Kp = max(K, max(abs(m) for m in model.offsets))
    em = {m: model.emission(k=k) for k, m in enumerate(model.offsets)}           # theta^{w,m} [T, V]
    unary = (model.theta0[:, None] + em[0]).ravel()                               # symbol t V + w
    pair = np.zeros((Kp, T, V, T, V))
    for l in range(1, Kp + 1):
        if l <= K:
            pair[l - 1] += model.trans[l - 1][:, None, :, None]
        if l in em:
            pair[l - 1] += em[l][:, None, None, :]                                 # tag i, word i+l
        if -l in em:
            pair[l - 1] += em[-l].T[None, :, :, None]                              # word i, tag i+l
    return cycle_log_partition(unary, pair.reshape(Kp, T * V, T * V), N)


def train_tagger(model: TaggerMRF, mom: TaggerMoments, *, max_iter: int = 100, l2: float = 1e-6,
                 tighten_iter: int = 50, tighten_tol: float = 1e-3, tighten_method: str = "lbfgs",
                 weights=None, on_iteration=None):
    """Algorithm 2 for the tagger: L-BFGS over (theta^0, theta^l, U^m) on the lifted bound with an
    L2 penalty (l2/2 ||theta^l, U^m||^2 per position).  ``mom`` from :func:`tagger_moments` with
    the model's K and offsets; ``weights`` the trees' p [L] (:func:`tree_weights`, default
    uniform).  Returns (model, history)."""
    T, V = len(model.tags), len(model.vocab)
    state = TightenState.zeros(model.L * (model.K + 1) - 1, T + V)
    anchor = {"delta": state.delta.copy(), "alpha": state.alpha}
    mask = np.ones(model.to_vector().size)
    mask[:T] = 0.0
    last: dict = {}

    def evaluate(v):
        m = model.with_vector(v)
        pot = tree_potentials(m, weights)
        state.delta, state.alpha = anchor["delta"].copy(), anchor["alpha"]
        before = state.iterations
        try:
            res = tighten(pot, state, max_iter=tighten_iter, tol=tighten_tol, method=tighten_method, bp=tree_bp)
        except NotConvergedError:
            if "g" not in anchor:
                raise
            return -anchor["objective"] + 1e3 * (1 + abs(anchor["objective"])), anchor["g"]
        value, g = tagger_bound(m, mom, pot, res)
        obj = value - 0.5 * l2 * float((mask * v) @ v)
        g = g - l2 * mask * v
        last.update(v=v.copy(), model=m, bound=value, objective=obj, gap=res.gap, g=-g,
                    delta=state.delta.copy(), alpha=state.alpha, bp=state.iterations - before)
        return -obj, -g

    def fields():
        return {"bound": last["bound"], "objective": last["objective"], "gap": last["gap"], "bp_passes": last["bp"]}

    options = {"maxiter": max_iter, "ftol": 1e-12, "gtol": 1e-10}
    v, history, _ = _lbfgs(evaluate, model.to_vector(), last, fields, options, on_iteration, anchor)
    return model.with_vector(v), history


def _window_emissions(model: TaggerMRF, words):
    """({word: column}, [theta^{w,m} [T, D] per offset]) over the distinct words (and the
    separator): the window's emissions computed once for every sentence that uses them."""
    distinct = list(dict.fromkeys([SEP, *words]))
    F, _ = word_features(distinct, model.features)
    return {w: j for j, w in enumerate(distinct)}, [model.emission(F, k) for k in range(len(model.offsets))]


def sentence_lattice_machine(model: TaggerMRF, words, emissions=None) -> Machine:
    """The tagging lattice of one sentence (K = 1) as a tropical machine: state 0 the start
    (the separator before it), one state per (position, tag), arcs (i-1, t') -> (i, t) labelled
    t (output) and i+1 (input), weight -(theta^1[t', t] + theta^0[t] + sum_m theta^{w,m}[t,
    w_{i+m}]), the words beyond the sentence being separators; final weights -theta^1[t, <S>].
    Words outside the vocabulary get their features' emission.  ``emissions``: what
    :func:`_window_emissions` returns for words including these (decode computes it once for
    all the sentences); None computes it for this sentence."""
    if model.K != 1:
        raise ArgumentError(f"decoding needs K = 1 (a first-order chain); the model has K = {model.K}")
    n = len(words)
    if n == 0:
        raise ArgumentError("an empty sentence has no tagging lattice")
    P = model.pad
    padded = [SEP] * P + list(words) + [SEP] * P
    col, E = _window_emissions(model, words) if emissions is None else emissions
    cols = np.array([col[w] for w in padded], np.int64)
    tr = model.trans[0]
    T1 = len(model.tags) - 1
    unary = np.repeat(model.theta0[1:, None], n, axis=1)          # [T-1, n]: real tags only
    for k, m in enumerate(model.offsets):
        unary += E[k][1:, cols[P + m:P + m + n]]
    src, dst, lab, w = [], [], [], []
    tags = np.arange(T1)
    # position 0: from the start (tag <S>)
    src.append(np.zeros(T1, np.int64))
    dst.append(1 + tags)
    lab.append(tags + 1)
    w.append(-(tr[0, 1:] + unary[:, 0]))
    for i in range(1, n):
        a = np.repeat(tags, T1)
        b = np.tile(tags, T1)
        src.append(1 + (i - 1) * T1 + a)
        dst.append(1 + i * T1 + b)
        lab.append(b + 1)
        w.append(-(tr[1:, 1:][a, b] + unary[b, i]))
    S = 1 + n * T1
    final = np.full(S, np.inf)
    final[1 + (n - 1) * T1:] = -tr[1:, 0]
    return Machine.from_arcs(S, 0, final, np.concatenate(src), np.concatenate(dst), np.concatenate(lab),
                             weight=np.concatenate(w), semiring="tropical")


def decode(model: TaggerMRF, sentences) -> list[list[str]]:
    """The best tagging of each sentence: the engine's best path on its lattice."""
    sentences = [list(words) for words in sentences]
    emissions = _window_emissions(model, [w for words in sentences for w in words])
    out = []
    for words in sentences:
        if not words:
            out.append([])
            continue
        p = best_path(sentence_lattice_machine(model, words, emissions))
        out.append([model.tags[int(x)] for x in p.ilabels])
    return out


def fit_tagger(sents, *, window: int = 1, centre_weight: float | None = None, max_iter: int = 150,
               l2: float = 1e-6, tighten_iter: int = 30, tighten_method: str = "lbfgs", max_affix: int = 4,
               on_iteration=None, progress=None):
    """A tagger trained on tagged sentences (lists of (word, tag)): tags joined to the next tag
    (K = 1, what decoding takes) and to their ``window`` nearest words (:func:`window_offsets`;
    the tree of the word under the tag weighted ``centre_weight``, :func:`tree_weights`), by
    Algorithm 2 on the lifted bound (:func:`train_tagger`).  ``on_iteration(model, entry)``
    returns True to stop.  Returns (model, history, moments)."""
    if not 1 <= window <= MAX_WINDOW:
        raise ArgumentError(f"window {window}: expected 1..{MAX_WINDOW}")
    if max_iter < 1 or l2 < 0 or max_affix < 0:
        raise ArgumentError(f"max_iter {max_iter} (at least 1), l2 {l2} (not negative), max_affix {max_affix}")
    sents = [s for s in sents if s]
    if not sents:
        raise ArgumentError("no tagged sentence to train on")
    say = progress or (lambda msg: None)
    tags = sorted({t for s in sents for _, t in s})
    vocab = sorted({w for s in sents for w, _ in s})
    model = TaggerMRF.init(tags, vocab, K=1, max_affix=max_affix, window=window)
    weights = tree_weights(model.L, centre_weight)
    ts, ws = tagged_sequence(sents, {t: i for i, t in enumerate(model.tags)},
                             {w: i for i, w in enumerate(model.vocab)}, 1, pad=model.pad)
    mom = tagger_moments(ts, ws, len(model.tags), len(model.vocab), 1, model.offsets)
    say(f"{len(sents):,} sentences, N = {mom.N:,}, {len(tags)} tags, {len(vocab):,} words, "
        f"{len(model.features):,} features, window offsets {model.offsets}, tree weights "
        f"{np.round(weights, 4).tolist()}")
    trained, history = train_tagger(model, mom, max_iter=max_iter, l2=l2, tighten_iter=tighten_iter,
                                    tighten_method=tighten_method, weights=weights, on_iteration=on_iteration)
    return trained, history, mom


def tagging_accuracy(pred, gold_sents, known) -> dict:
    """Total, known-word and unknown-word accuracy (fractions; NaN without tokens) and token
    counts of the taggings ``pred`` against ``gold_sents`` (lists of (word, tag)); ``known``:
    the words seen in training."""
    ok, unk = [], []
    for p, g in zip(pred, gold_sents):
        for t, (w, gt) in zip(p, g):
            ok.append(t == gt)
            unk.append(w not in known)
    ok, unk = np.array(ok, np.bool_), np.array(unk, np.bool_)

    def frac(a):
        return float(a.mean()) if a.size else float("nan")
    return {"total": frac(ok), "known": frac(ok[~unk]), "unknown": frac(ok[unk]), "tokens": int(ok.size),
            "unknown_tokens": int(unk.sum())}
