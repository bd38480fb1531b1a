"""The MRF part-of-speech tagger of Jernite, Rush and Sontag (2015, section 6 and appendix B),
trained on the joint likelihood of tags and words by the lifted bound.

The model is a cyclic MRF over the tagged corpus (K separators ``<S>``/``<S>`` before each
sentence, as in :mod:`fsmlearn.mrf.model`): each tag T_i is joined to the next K tags by
tag-pair potentials theta^l[t, t'] (indicator features g, i.e. full rank) and to its word
W_i by theta^w[t, w] = U_t . f(w) (section 6 with L = 1: the word under the tag), where f
are appendix B's features: the word itself, its prefixes and suffixes up to length 4, and
the seven morphology tests (all upper case, first letter upper case, ends in 's', both,
all upper case ending in 'S', has a digit, all digits); tags also have a unary theta^0.

The lifted bound (the construction of section 4.4 extended to the word nodes): the
forests of rotated tag stars (each tag edge in one of K + 1) with every word attached to
its tag as a leaf are valid covering forests (a leaf never closes a cycle), so rho = 1/(K+1)
on tag edges and 1 on word edges, and the lifted tree is the star of Figure 4 over the tag
copies T^0..T^K (edges (K+1) theta^l) with one word copy W^j hanging from each tag copy
(edge theta^w).  Dual variables delta [K, T + V] tie T^j to T^0 and W^j to W^0 (eq. 13);
Algorithm 1 (:func:`fsmlearn.mrf.lifted.tighten`) tightens them, eq. 18 gives the gradient
per position,

    dL/dtheta^0 = hat-mu_T - mean_j mu_{T^j},  dL/dtheta^l = hat-mu^l - mu_E^l,
    dL/dtheta^w = hat-mu_TW - mean_j mu_{T^j W^j},   dL/dU = (dL/dtheta^w) F,

and L-BFGS trains theta (Algorithm 2).  Decoding is the engine's best path
(:func:`fsmlearn.algo.best_path`) on each sentence's tagging lattice: with K = 1 the
conditional p(tags | words) of a sentence between its separators is a first-order chain
with arc weights -(theta^1[t', t] + theta^0[t] + theta^w[t, w_i]).

Public names: TaggerMRF, word_features, tagged_sequence, TaggerMoments, tagger_moments,
tree_bp, tagger_bound, train_tagger, sentence_lattice_machine, decode.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize

from ..algo import best_path
from ..errors import ArgumentError, ModelError, NotConvergedError
from ..fsm import Machine
from .lifted import TightenState, tighten
from .model import SEP

__all__ = ["TaggerMRF", "word_features", "tagged_sequence", "TaggerMoments", "tagger_moments", "tree_bp",
           "tagger_bound", "train_tagger", "sentence_lattice_machine", "decode"]


#: the longest prefix or suffix a feature index may hold (an index built with a smaller
#: ``max_affix`` simply lacks the longer ones)
MAX_AFFIX = 10


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
    for name, on in (("allcaps", up), ("initcap", first), ("ends-s", ends_s), ("initcap-ends-s", first and ends_s),
                     ("allcaps-ends-S", up and word.endswith("S")), ("has-digit", any(c.isdigit() for c in word)),
                     ("all-digits", word.isdigit())):
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
        theta0: float64 [T]; trans: float64 [K, T, T]; U: float64 [T, F].
    """
    tags: list
    vocab: list
    features: dict
    theta0: np.ndarray
    trans: np.ndarray
    U: np.ndarray
    _F: sp.csr_matrix | None = field(default=None, repr=False)

    def __post_init__(self):
        T, F = len(self.tags), len(self.features)
        if self.theta0.shape != (T,) or self.trans.ndim != 3 or self.trans.shape[1:] != (T, T) \
                or self.U.shape != (T, F):
            raise ModelError(f"tagger shapes: theta0 {self.theta0.shape}, trans {self.trans.shape}, U "
                             f"{self.U.shape} for {T} tags and {F} features")
        if self.tags[0] != SEP or self.vocab[0] != SEP:
            raise ModelError(f"the first tag and word must be {SEP!r}")

    @property
    def K(self) -> int:
        return int(self.trans.shape[0])

    @property
    def word_matrix(self) -> sp.csr_matrix:
        """F [V, F]: the features of the vocabulary."""
        if self._F is None:
            self._F, _ = word_features(self.vocab, self.features)
        return self._F

    def emission(self, F=None) -> np.ndarray:
        """theta^w [T, V] (or [T, rows of F])."""
        F = self.word_matrix if F is None else F
        return np.asarray((F @ self.U.T).T)

    @classmethod
    def init(cls, tags, vocab, K: int = 1, max_affix: int = 4) -> "TaggerMRF":
        if not 1 <= max_affix <= MAX_AFFIX:
            raise ArgumentError(f"max_affix = {max_affix}; expected 1..{MAX_AFFIX}")
        tags, vocab = [SEP] + [t for t in tags if t != SEP], [SEP] + [w for w in vocab if w != SEP]
        F, index = word_features(vocab, max_affix=max_affix)
        T = len(tags)
        return cls(tags, vocab, index, np.zeros(T), np.zeros((K, T, T)), np.zeros((T, len(index))), F)

    def to_vector(self) -> np.ndarray:
        return np.concatenate([self.theta0, self.trans.ravel(), self.U.ravel()])

    def with_vector(self, v) -> "TaggerMRF":
        T, K, Fn = len(self.tags), self.K, len(self.features)
        a, b = T, T + K * T * T
        return TaggerMRF(self.tags, self.vocab, self.features, v[:a].copy(), v[a:b].reshape(K, T, T).copy(),
                         v[b:].reshape(T, Fn).copy(), self._F)


def tagged_sequence(sentences, tag_index: dict, word_index: dict, K: int):
    """The cyclic (tag, word) sequence: K (``<S>``, ``<S>``) before each sentence, padded to a
    multiple of K + 1.  Returns int64 arrays (tags [N], words [N]).

    Raises:
        ArgumentError: a tag or word not in its index (sentence and position named).
    """
    ts, ws = [], []
    for s, sent in enumerate(sentences):
        ts.extend([0] * K)
        ws.extend([0] * K)
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
    """Observed moments per position: tag unary [T], tag pairs [K, T, T], tag-word CSR [T, V]."""
    N: int
    tag: np.ndarray
    pairs: np.ndarray
    emit: sp.csr_matrix


def tagger_moments(tags, words, T: int, V: int, K: int) -> TaggerMoments:
    N = tags.size
    pairs = np.zeros((K, T, T))
    for l in range(1, K + 1):
        np.add.at(pairs[l - 1], (tags, np.roll(tags, -l)), 1.0)
    emit = sp.csr_matrix((np.ones(N), (tags, words)), shape=(T, V))
    emit.sum_duplicates()
    return TaggerMoments(N, np.bincount(tags, minlength=T) / N, pairs / N, emit / N)


def _lse(v):
    m = float(v.max())
    return m + math.log(float(np.exp(v - m).sum()))


@dataclass
class TreeResult:
    """BP on the tagger's lifted tree: log-partition, node marginals (tags then words per copy,
    [K+1, T+V]), tag-pair edge marginals [K, T, T], tag-word edge marginals (mean over copies,
    [T, V]); ``delta`` [K, T+V]."""
    logz: float
    mu: np.ndarray
    pair: np.ndarray
    emit: np.ndarray
    delta: np.ndarray

    @property
    def gap(self) -> float:
        return float(np.abs(self.mu[1:] - self.mu[0]).sum(axis=1).max())


@dataclass
class TreePotentials:
    theta0: np.ndarray        # [T]
    logE: np.ndarray          # [K, T, T]: (K+1) theta^l
    Ew: np.ndarray            # [T, V]: exp(theta^w - shift)
    shift: float

    @property
    def T(self):
        return self.theta0.size


def tree_potentials(model: TaggerMRF) -> TreePotentials:
    th = model.emission()
    s = float(th.max())
    return TreePotentials(model.theta0.copy(), (model.K + 1) * model.trans, np.exp(th - s), s)


def tree_bp(pot: TreePotentials, delta) -> TreeResult:
    """Exact BP on the lifted tree (tag star, one word leaf per tag copy) for duals ``delta``."""
    T, V = pot.Ew.shape
    K = pot.logE.shape[0]
    delta = np.asarray(delta, np.float64)
    if delta.shape != (K, T + V):
        raise ArgumentError(f"delta has shape {delta.shape}; expected [{K}, {T + V}]")
    dT, dW = delta[:, :T], delta[:, T:]
    tag_pot = np.vstack([pot.theta0 - dT.sum(axis=0), pot.theta0 + dT])          # [K+1, T]
    word_pot = np.vstack([-dW.sum(axis=0), dW])                                   # [K+1, V]
    wmax = word_pot.max(axis=1, keepdims=True)
    wexp = np.exp(word_pot - wmax)
    with np.errstate(divide="ignore"):
        wmsg = np.log(wexp @ pot.Ew.T) + wmax + pot.shift                         # [K+1, T] word j -> tag j
    psi = tag_pot + wmsg
    # tag leaves -> centre through (K+1) theta^l
    lmsg = np.empty((K, T))
    for l in range(K):
        lmsg[l] = _logmatvec(pot.logE[l], psi[l + 1])
    b0 = psi[0] + lmsg.sum(axis=0)
    logz = _lse(b0)
    belief = np.empty((K + 1, T))
    belief[0] = b0
    pair = np.empty((K, T, T))
    for l in range(K):
        c = psi[0] + np.delete(lmsg, l, axis=0).sum(axis=0)                      # centre -> leaf l
        belief[l + 1] = psi[l + 1] + _logmatvec(pot.logE[l].T, c)
        pair[l] = np.exp(c[:, None] + pot.logE[l] + psi[l + 1][None, :] - logz)
    muT = np.exp(belief - logz)
    # tag copy j -> its word: belief without the word's message
    out = belief - wmsg                                                          # [K+1, T]
    omax = out.max(axis=1, keepdims=True)
    oexp = np.exp(out - omax)
    r = oexp @ pot.Ew                                                            # [K+1, V]
    q = r * wexp
    muW = q / q.sum(axis=1, keepdims=True)
    # tag-word edge marginal of copy j: oexp[j, t] Ew[t, w] wexp[j, w] / sum; their mean
    scale = 1.0 / q.sum(axis=1)
    emit = ((oexp * scale[:, None]).T @ wexp) * pot.Ew / (K + 1)                 # [T, V]
    if not np.isfinite(logz) or not np.isfinite(muW).all():
        raise NotConvergedError("the tagger's tree messages underflow (potentials too far apart)")
    return TreeResult(logz, np.hstack([muT, muW]), pair, emit, delta.copy())


def _logmatvec(logA, v):
    """log sum_j exp(logA[i, j] + v[j])."""
    x = logA + v[None, :]
    m = x.max(axis=1)
    return m + np.log(np.exp(x - m[:, None]).sum(axis=1))


def tagger_bound(model: TaggerMRF, mom: TaggerMoments, pot: TreePotentials, res: TreeResult):
    """(per-position bound <hat-mu, theta> - log Z / (K+1), its gradient in the parameter vector)."""
    K, T = model.K, len(model.tags)
    th_w = np.log(pot.Ew) + pot.shift
    dot = float(mom.tag @ model.theta0 + (mom.pairs * model.trans).sum()
                + (mom.emit.multiply(th_w)).sum())
    value = dot - res.logz / (K + 1)
    g0 = mom.tag - res.mu[:, :T].mean(axis=0)
    gp = mom.pairs - res.pair
    gw = mom.emit.toarray() - res.emit
    gU = np.asarray(model.word_matrix.T @ gw.T).T                                # [T, F], eq. 19's analogue
    return value, np.concatenate([g0, gp.ravel(), gU.ravel()])


def train_tagger(model: TaggerMRF, mom: TaggerMoments, *, max_iter: int = 100, l2: float = 1e-6,
                 tighten_iter: int = 50, tighten_tol: float = 1e-3, tighten_method: str = "lbfgs",
                 on_iteration=None):
    """Algorithm 2 for the tagger: L-BFGS over (theta^0, theta^l, U) on the lifted bound with an
    L2 penalty (l2/2 ||theta^l, U||^2 per position).  Returns (model, history)."""
    T, V = len(model.tags), len(model.vocab)
    state = TightenState.zeros(model.K, T + V)
    anchor = {"delta": state.delta.copy(), "alpha": state.alpha}
    mask = np.ones(model.to_vector().size)
    mask[:T] = 0.0
    last: dict = {}
    history: list = []
    t0 = time.perf_counter()

    def evaluate(v):
        m = model.with_vector(v)
        pot = tree_potentials(m)
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

    def record(v):
        if "v" not in last or not np.array_equal(v, last["v"]):
            evaluate(v)
        anchor.update(delta=last["delta"], alpha=last["alpha"], g=last["g"], objective=last["objective"])
        e = {"iteration": len(history) + 1, "bound": last["bound"], "objective": last["objective"],
             "gap": last["gap"], "bp_passes": last["bp"], "seconds": time.perf_counter() - t0}
        history.append(e)
        if on_iteration is not None and on_iteration(last["model"], e):
            raise StopIteration

    v0 = model.to_vector()
    try:
        res = minimize(evaluate, v0, jac=True, method="L-BFGS-B", callback=record,
                       options={"maxiter": max_iter, "ftol": 1e-12, "gtol": 1e-10})
        v = res.x
    except StopIteration:
        v = last["v"]
    return model.with_vector(v), history


def sentence_lattice_machine(model: TaggerMRF, words) -> Machine:
    """The tagging lattice of one sentence (K = 1) as a tropical machine: state 0 the start
    (the separator before it), one state per (position, tag), arcs (i-1, t') -> (i, t) labelled
    t (output) and i+1 (input), weight -(theta^1[t', t] + theta^0[t] + theta^w[t, w_i]); final
    weights -theta^1[t, <S>].  Words outside the vocabulary get their features' emission."""
    if model.K != 1:
        raise ArgumentError(f"decoding needs K = 1 (a first-order chain); the model has K = {model.K}")
    n = len(words)
    if n == 0:
        raise ArgumentError("an empty sentence has no tagging lattice")
    F, _ = word_features(list(words), model.features)
    em = model.emission(F)[1:]                                    # [T-1, n]: real tags only
    tr = model.trans[0]
    T1 = len(model.tags) - 1
    unary = model.theta0[1:, None] + em                           # [T-1, n]
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
    out = []
    for words in sentences:
        if not words:
            out.append([])
            continue
        p = best_path(sentence_lattice_machine(model, words))
        out.append([model.tags[int(x)] for x in p.ilabels])
    return out
