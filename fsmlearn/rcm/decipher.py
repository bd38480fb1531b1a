"""Decipherment with reified context models (Steinhardt and Liang 2015, section 6).

The plaintext is an n-th order Markov chain over words, estimated from
plaintext by absolute discounting (discount 0.25, smoothing 0.01 of the
unigram base, as in the paper) with :mod:`fsmlearn.lm`'s estimator and read
from its compiled model (:class:`AbsoluteDiscountLM`); the ciphertext is the plaintext under an
unknown 1:1 substitution, modelled as an emission table p(x | y) learned by
EM with Laplace smoothing 0.01.  RCMS chooses contexts per ciphertext
sequence; a context's history for the transition is its determined suffix
(the whole prefix with ``<s>`` before it when it reaches the start), so a
context with a star backs off to the lower-order estimate: the n-gram
features of equation 6 with weights log p(y | history).  The E-step's
posteriors are the engine's marginals on the RCMS machine.

Public names: AbsoluteDiscountLM, DecipherModel, em_step, mapping_accuracy, decipher.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..algo.chain import chain_forward_backward
from ..errors import ArgumentError
from ..fsm.chain import ChainBatch
from .model import rcms

__all__ = ["AbsoluteDiscountLM", "DecipherModel", "em_step", "mapping_accuracy", "decipher"]

_BOS = -2


class AbsoluteDiscountLM:
    """The plaintext LM: absolute discounting over labels 0..V-1 with histories of up to n
    labels (``<s>`` = -2 may start a history), estimated and compiled by :mod:`fsmlearn.lm`
    and read from the compiled model's states.

    The sequences are counted as sentences (:func:`fsmlearn.lm.counts.count_corpus`, label y
    as the word "y", ``<s>`` and ``</s>`` around each), and
    :func:`fsmlearn.lm.estimate.estimate` with ``method="absolute"`` gives the interpolated
    model p(w | h) = max(c(h w) - D, 0) / c(h) + D N1+(h .) / c(h) p(w | h') (h' = h without
    its first word; Ney, Essen and Kneser 1994) over unigrams smoothed additively by s;
    section 6 of the paper takes D = 0.25 and s = 0.01.  A history never seen backs off
    whole.  The decipherment's chains have no end, so each history's distribution is the
    model's conditioned on a label coming next: renormalised over the labels, without
    ``</s>`` and ``<unk>``.  :meth:`log_prob` reads a history's row from the compiled model's
    state for it (:meth:`fsmlearn.lm.compiled.CompiledLM.advance` and
    :meth:`~fsmlearn.lm.compiled.CompiledLM.next_costs`), once per history.

    Attributes:
        model: the :class:`~fsmlearn.lm.compiled.CompiledLM` (order n + 1).
        base: float64 [V], the empty history's distribution.
    """

    def __init__(self, sequences, num_labels: int, n: int, discount: float = 0.25, smoothing: float = 0.01):
        if num_labels < 1 or n < 0 or not 0 < discount < 1 or smoothing <= 0:
            raise ArgumentError(f"need num_labels >= 1, n >= 0, 0 < discount < 1, smoothing > 0; got "
                                f"{num_labels}, {n}, {discount}, {smoothing}")
        self.V, self.n, self.D = num_labels, n, discount
        seqs = [np.asarray(seq, np.int64).ravel() for seq in sequences]
        for seq in seqs:
            if seq.size and (seq.min() < 0 or seq.max() >= num_labels):
                raise ArgumentError(f"a sequence holds a label outside 0..{num_labels - 1}: {seq[:20].tolist()}")
        self.model = _label_model(seqs, num_labels, n, discount, smoothing)
        self._word = np.array([self.model.word_id(str(y)) for y in range(num_labels)], np.int64)   # label -> word id
        self._row_of: dict = {}                  # history -> its row of _table
        self._table = np.empty((0, num_labels))
        self.base = np.exp(self.log_prob(()))

    def prob(self, history: tuple) -> np.ndarray:
        """p(. | history), float64 [V] (a distribution)."""
        return np.exp(self.log_prob(history))

    def log_prob_table(self, suffixes, start_len: int):
        """(table, rows): ln p(. | h) for each suffix is ``table[rows[k]]`` (the same values as
        :meth:`log_prob`), h the suffix with ``<s>`` before it when it holds ``start_len`` or more
        labels (the whole prefix).  The table grows as new histories are asked for."""
        n = self.n
        get = self._row_of.get
        rows = []
        for suf in suffixes:
            h = ((_BOS,) + suf if len(suf) >= start_len else suf)[-n:] if n else ()
            r = get(h)
            rows.append(r if r is not None else self._new_row(h))
        return self._table, rows

    def _new_row(self, history: tuple) -> int:
        r = len(self._row_of)
        if r == self._table.shape[0]:
            grown = np.empty((max(16, 2 * r), self.V))
            grown[:r] = self._table[:r]
            self._table = grown
        m = self.model
        if history and history[0] == _BOS:
            state = m.advance(m.machine.start, self._word[list(history[1:])])
        else:
            state = m.advance(0, self._word[list(history)])
        lp = -m.next_costs([state])[0, self._word]
        self._table[r] = lp - np.logaddexp.reduce(lp)        # renormalised over the labels
        self._row_of[history] = r
        return r

    def log_prob(self, history: tuple) -> np.ndarray:
        """ln p(. | history), float64 [V] (kept once computed)."""
        history = tuple(int(x) for x in history[-self.n:]) if self.n else ()
        r = self._row_of.get(history)
        if r is None:
            r = self._new_row(history)
        return self._table[r]


def _label_model(seqs, V: int, n: int, discount: float, smoothing: float):
    """The compiled absolute-discounting model of label sequences (label y is the word "y")."""
    from ..lm.counts import count_corpus
    from ..lm.estimate import estimate
    from ..lm.model import compile_lm
    ptr = np.zeros(len(seqs) + 1, np.int64)
    np.cumsum([x.size for x in seqs], out=ptr[1:])
    ids = np.concatenate(seqs).astype(np.int32) if seqs else np.zeros(0, np.int32)
    # a hash table for every window of the plaintext at once (count_corpus's default, 1 GB, is sized
    # for corpora of billions of tokens and would take seconds to allocate here)
    table_mb = 48 * (ids.size + len(seqs) + 1) * (n + 1) / (1 << 20)
    counts = count_corpus(ptr, ids, [str(y) for y in range(V)], n + 1, table_mb=table_mb)
    return compile_lm(estimate(counts, "absolute", discount=discount, smoothing=smoothing))


@nb.njit(cache=True)
def _rows_plus(table, rows, u):
    """table[rows] + u[None, :] in one pass."""
    S = np.empty((rows.size, u.size))
    for k in range(rows.size):
        r = rows[k]
        for y in range(u.size):
            S[k, y] = table[r, y] + u[y]
    return S


class DecipherModel:
    """The decipherment HMM seen by :func:`fsmlearn.rcm.model.rcms`: transitions from the
    plaintext LM by each context's determined history, plus the per-position emission scores
    passed as ``unary`` (log p(x_i | y))."""

    def __init__(self, lm: AbsoluteDiscountLM, outside: float = 0.0):
        self.lm = lm
        self.num_labels = lm.V
        self.outside = outside

    def transition_matrices(self):
        """The first-order chain of a bigram LM (``lm.n == 1``): ln p(y | <s>) [V] and
        ln p(y | y') [V, V] (rows y')."""
        if self.lm.n != 1:
            raise ArgumentError(f"a dense first-order chain needs a bigram LM, not order {self.lm.n}")
        return self.lm.log_prob((_BOS,)), np.stack([self.lm.log_prob((y,)) for y in range(self.num_labels)])

    def scores(self, suffix: tuple, i: int, is_root: bool, unary_row) -> np.ndarray:
        """log p(y | history of the context) (+ unary, + the outside weight on the root at i >= 2)."""
        hist = suffix if len(suffix) < i - 1 else (_BOS,) + tuple(suffix)
        s = self.lm.log_prob(hist)
        if unary_row is not None:
            s = s + unary_row
        if is_root and i >= 2 and self.outside != 0.0:
            s = s + self.outside
        return s

    def scores_matrix(self, suffixes, i: int, unary_row) -> np.ndarray:
        """float64 [K, V]: :meth:`scores` of every context of C_{i-1} (``suffixes``, the root
        last) at once: the LM's cached rows stacked, the unary row added to all."""
        table, rows = self.lm.log_prob_table(suffixes, i - 1)
        rows = np.array(rows, np.int64)
        if unary_row is None:
            S = table[rows]
        else:
            S = _rows_plus(table, rows, np.asarray(unary_row, np.float64))
        if i >= 2 and self.outside != 0.0:
            S[-1] += self.outside
        return S


def em_step(model: DecipherModel, ciphertexts, log_emit: np.ndarray, B: int, laplace: float = 0.01,
            exact_order: int | None = None, stats: dict | None = None):
    """One EM iteration for the substitution table.

    Args:
        model: transitions.
        ciphertexts: sequences of cipher symbols 0..C-1.
        log_emit: float64 [V, C], log p(x | y).
        B: RCMS context size.
        laplace: add-``laplace`` smoothing of the expected counts.
        exact_order: exact k-th order contexts instead of RCMS (see :func:`rcms`); exact first
            order with a bigram LM is a :class:`~fsmlearn.fsm.ChainBatch` (a cipher symbol a row of
            every word with its emission score) that the engine solves by its dense-chain schedule
            (:func:`fsmlearn.algo.chain.chain_forward_backward`: the same quantities as the
            exact-order machine without building its V^2 arcs per position).
        stats: when given, ``stats["context_length"]`` is set to the average length of c_{i-1}
            (its determined labels) weighted by its mass, over all cipher tokens (section 7).

    Returns:
        (new log_emit [V, C], total log-likelihood under the RCMS contexts, expected counts [V, C]).
    """
    V, C = log_emit.shape
    counts = np.zeros((V, C))
    ll = 0.0
    if exact_order == 1 and model.lm.n == 1:
        initial, trans = model.transition_matrices()
        xs = [np.asarray(x, np.int64) for x in ciphertexts if len(x)]
        table = np.full((V + 1, V + 1), np.inf)          # costs; row V: <s>, column V: the end (weight 1)
        table[:V, :V] = -trans
        table[V, :V] = -initial
        table[:V, V] = 0.0
        ptr = np.zeros(len(xs) + 1, np.int64)
        np.cumsum([x.size for x in xs], out=ptr[1:])
        chains = ChainBatch(ptr, np.concatenate(xs) if xs else np.zeros(0, np.int64),
                            np.arange(C + 1, dtype=np.int64) * V, np.tile(np.arange(V, dtype=np.int32), C),
                            -log_emit.T.ravel(), table, "log")
        res = chain_forward_backward(chains, node_posteriors=False)
        counts = res.entry_posteriors.reshape(C, V).T.copy()      # counts[y, x] = sum_i p(y_i = y, x_i = x)
        if stats is not None:       # c_0 is the root (length 0), every later context one label
            stats["context_length"] = sum(x.size - 1 for x in xs) / max(sum(x.size for x in xs), 1)
        sm = counts + laplace
        return np.log(sm / sm.sum(axis=1, keepdims=True)), float(res.log_partition.sum()), counts
    length_sum, tokens = 0.0, 0
    for x in ciphertexts:
        x = np.asarray(x, np.int64)
        unary = log_emit[:, x].T
        r = rcms(model, x.size, B, unary, exact_order=exact_order)
        marg = r.marginals()
        np.add.at(counts.T, x, marg)          # counts[y, x_i] += p(y_i = y)
        ll += r.log_partition()
        if stats is not None:
            length_sum += r.mean_context_length() * x.size
            tokens += x.size
    if stats is not None:
        stats["context_length"] = length_sum / max(tokens, 1)
    sm = counts + laplace
    return np.log(sm / sm.sum(axis=1, keepdims=True)), ll, counts


def mapping_accuracy(counts: np.ndarray, truth: np.ndarray, weights=None) -> float:
    """The fraction of cipher symbols whose most expected plaintext (the argmax over y of the
    expected counts [V, C]) is the true one (``truth[x]``), weighted by ``weights`` (e.g. token
    counts) when given."""
    guess = counts.argmax(axis=0)
    ok = (guess == np.asarray(truth)).astype(float)
    w = np.ones_like(ok) if weights is None else np.asarray(weights, float)
    return float((ok * w).sum() / w.sum())


def decipher(ciphertexts, plain, num_words: int, *, order: int = 2, size: int = 60, method: str = "rcms",
             iterations: int = 20, discount: float = 0.25, seed: int = 0, progress=None):
    """Learn a substitution table from ``ciphertexts`` (sequences of cipher symbols 0..C-1) by EM
    (:func:`em_step`) under the plaintext LM of ``plain`` (sequences of words 0..num_words-1;
    :class:`AbsoluteDiscountLM` of ``order``), from a near-uniform start (``seed``), with
    ``method`` "rcms", "beam" (RCMS with weight -inf outside the ``size`` contexts) or "exact"
    (exact ``order``-th order contexts), as section 6's decipherment does.

    Returns:
        (log_emit float64 [num_words, C]: log p(cipher symbol | word), the words each cipher
        token most probably stands for (per sequence, int64), the log-likelihood per iteration).
    """
    if method not in ("rcms", "beam", "exact") or order < 1 or size < 1 or iterations < 1:
        raise ArgumentError(f"method {method!r} (rcms, beam or exact), order {order} (>= 1), size {size} and "
                            f"iterations {iterations} (>= 1)")
    say = progress or (lambda m: None)
    C = 1 + max((int(np.max(x)) for x in ciphertexts if len(x)), default=-1)
    if C < 1:
        raise ArgumentError("the ciphertext is empty")
    lm = AbsoluteDiscountLM(plain, num_words, order, discount=discount)
    model = DecipherModel(lm, outside=-np.inf if method == "beam" else 0.0)
    rng = np.random.default_rng(seed)
    log_emit = np.log(np.full((num_words, C), 1.0 / C) * (1 + 0.01 * rng.random((num_words, C))))
    log_emit -= np.logaddexp.reduce(log_emit, axis=1, keepdims=True)
    exact = order if method == "exact" else None
    history = []
    for it in range(1, iterations + 1):
        log_emit, ll, _ = em_step(model, ciphertexts, log_emit, size, exact_order=exact)
        history.append(ll)
        say(f"EM iteration {it}/{iterations}: log-likelihood {ll:,.1f}")
    words = []
    for x in ciphertexts:
        x = np.asarray(x, np.int64)
        if not x.size:
            words.append(np.zeros(0, np.int64))
            continue
        r = rcms(model, x.size, size, log_emit[:, x].T, exact_order=exact)
        words.append(np.argmax(r.marginals(), axis=1).astype(np.int64))
    return log_emit, words, history
