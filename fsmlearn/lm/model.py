"""Backoff n-gram language models and their compilation to failure-arc acceptors.

A :class:`BackoffLM` holds an ARPA-style model as arrays: for each order k, the
k-grams (word ids), their log10 probabilities and log10 backoff weights.
:func:`compile_lm` turns it into a weighted acceptor with exact failure
semantics (Allauzen, Mohri and Roark 2003; as used by Smith and Eisner,
"Unsupervised learning on an approximate corpus", section 3.1):

* one state per history: the empty history and every n-gram that is the
  context of a higher-order n-gram;
* an arc per n-gram ``h w`` from state ``h`` to the state of the longest
  suffix of ``h w`` that is a history, labelled ``w``, weighted
  ``-ln p(w | h)``;
* a phi arc from each non-empty history to the state of its longest proper
  suffix that is a history, weighted ``-ln backoff(h)``;
* ``<s>`` is the start state (the history ``<s>``); ``p(</s> | h)`` is the
  final weight of ``h`` when the model lists ``h </s>``, and reached through
  the phi arcs otherwise (final weights fail over like labels).

Labels are word ids plus one (label 0 is epsilon).  Out-of-vocabulary words
score as ``<unk>``, as KenLM does.

The compiled model, its file and its scoring are :mod:`fsmlearn.lm.compiled`
(:class:`CompiledLM`, imported here too).

Public names: BackoffLM, compile_lm, epsilon_approximation, event_mass, check_normalised,
IMPOSSIBLE; BOS, EOS, UNK, LN10 (from :mod:`fsmlearn.lm.vocab`) and CompiledLM
(from :mod:`fsmlearn.lm.compiled`) for callers that import them from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba as nb
import numpy as np

from ..errors import MachineError
from ..fsm.machine import PHI, Machine
from ..fsm.symbols import SymbolTable
from .compiled import CompiledLM, sort_arcs
from .index import NGramIndex, NGramIndexError
from .vocab import BOS, EOS, LN10, UNK, NGramTables

#: log10 probability that marks an impossible n-gram (KenLM writes -99 for <s>)
IMPOSSIBLE = -99.0


@dataclass
class BackoffLM(NGramTables):
    """An n-gram backoff model (the contents of an ARPA file).

    Attributes:
        vocab: list of words; word id = index.  Contains ``<s>``, ``</s>`` and
            ``<unk>``.
        ngrams: per order k = 1..N, int32 [M_k, k] word ids.
        logprob: per order, float64 [M_k] log10 probabilities.
        backoff: per order, float64 [M_k] log10 backoff weights (0 when the
            file gives none; always 0 for the highest order).
        has_backoff: per order, bool [M_k], whether the file gave a backoff.
    """
    vocab: list
    ngrams: list
    logprob: list
    backoff: list
    has_backoff: list = field(default_factory=list)
    #: the n-grams' hash index when the reader built it (read_arpa does, to check
    #: contexts and duplicates); compile_lm reuses it instead of building another
    index: object = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if not self.has_backoff:
            self.has_backoff = [np.zeros(len(p), bool) for p in self.logprob]

    @property
    def counts(self) -> list[int]:
        """The number of n-grams of each order (the ARPA header's counts)."""
        return self.sizes

    def __repr__(self) -> str:
        return f"BackoffLM(order={self.order}, vocab={len(self.vocab)}, ngrams={self.counts})"


@nb.njit(cache=True)
def _state_of(g, is_ctx, suffix, state_id):
    """State of the longest suffix (of the n-gram with id g, itself included) that is a history."""
    while g >= 0 and not is_ctx[g]:
        g = suffix[g]
    if g < 0:
        return 0
    return state_id[g]


@nb.njit(cache=True)
def _build_arcs(order_of, prefix, last_word, suffix, is_ctx, state_id, logprob, backoff, bos, eos,
                N, n_states):
    """The acceptor's arcs and final weights, unsorted (the construction of the module docstring).

    Every n-gram ``h w`` but those ending in ``<s>`` or ``</s>`` and the
    :data:`IMPOSSIBLE` ones gives an arc from the state of ``h`` labelled
    ``w + 1``; ``h </s>`` gives the final weight of ``h``'s state; every
    history gives a phi arc to the state of its longest proper suffix that is
    a history.  Weights are ``-ln`` of the ARPA's log10 values.

    Args:
        order_of: int8 [G], each n-gram's order (G n-grams over all orders,
            global ids of :class:`~fsmlearn.lm.index.NGramIndex`).
        prefix, suffix: int64 [G], global id of the n-gram without its last
            (prefix) or first (suffix) word, -1 for unigrams.
        last_word: int64 [G], each n-gram's last word id.
        is_ctx: bool [G], the n-gram is a history (has a state).
        state_id: int64 [G], the state of each history (-1 for the others).
        logprob, backoff: float64 [G], log10 probability and backoff weight.
        bos, eos: word ids of ``<s>`` and ``</s>``; N: the model's order.
        n_states: int, states (histories plus the empty history, state 0).

    Returns:
        (src int64 [E], dst int64 [E], label int32 [E], weight float64 [E],
        final float64 [n_states], ``inf`` where the state is not final).
    """
    G = order_of.shape[0]
    n_arc = 0
    for g in range(G):
        w = last_word[g]
        if w != bos and w != eos and logprob[g] > IMPOSSIBLE:
            n_arc += 1
    src = np.empty(n_arc + n_states, np.int64)
    dst = np.empty(n_arc + n_states, np.int64)
    lab = np.empty(n_arc + n_states, np.int32)
    wt = np.empty(n_arc + n_states, np.float64)
    final = np.full(n_states, np.inf)
    ln10 = LN10
    a = 0
    for g in range(G):
        w = last_word[g]
        h = prefix[g]
        s = 0 if h < 0 else state_id[h]
        if w == eos:
            final[s] = -logprob[g] * ln10
            continue
        if w == bos or logprob[g] <= IMPOSSIBLE:
            continue
        if order_of[g] < N and is_ctx[g]:
            d = state_id[g]
        else:
            d = _state_of(suffix[g], is_ctx, suffix, state_id)
        src[a] = s
        dst[a] = d
        lab[a] = w + 1
        wt[a] = -logprob[g] * ln10
        a += 1
    # phi arcs: each history to its longest proper suffix that is a history
    for g in range(G):
        if is_ctx[g]:
            src[a] = state_id[g]
            dst[a] = _state_of(suffix[g], is_ctx, suffix, state_id)
            lab[a] = PHI
            wt[a] = -backoff[g] * ln10
            a += 1
    return src[:a], dst[:a], lab[:a], wt[:a], final


def compile_lm(lm: BackoffLM, progress=None) -> CompiledLM:
    """Compile a backoff model into an acceptor with exact failure semantics.

    Args:
        lm: the model.
        progress: optional callable(str) for progress messages.

    Raises:
        MachineError: the model lacks ``<s>`` or ``</s>``, an n-gram's context
            is missing, or an n-gram is listed twice.
    """
    say = progress or (lambda msg: None)
    V = len(lm.vocab)
    wid = lm.word_ids
    for w in (BOS, EOS):
        if w not in wid:
            raise MachineError(f"the model has no {w} unigram")
    bos, eos = wid[BOS], wid[EOS]
    N = lm.order
    try:
        idx = lm.index if isinstance(lm.index, NGramIndex) else NGramIndex(lm.ngrams, V)
    except NGramIndexError as e:
        words = " ".join(lm.vocab[int(x)] for x in e.row)
        k = len(e.row)
        if e.kind == "missing":
            raise MachineError(f"{k}-gram '{words}' has no context {k - 1}-gram in the model") from None
        raise MachineError(f"{k}-gram '{words}' is listed twice") from None
    total = idx.total
    uni = idx.uni
    prefix = idx.prefix
    suffix = idx.suffix
    order_of = idx.order_of
    last_word = np.concatenate([g[:, -1].astype(np.int64) for g in lm.ngrams])
    say("indexed n-grams")
    is_ctx = np.zeros(total, bool)
    has_pre = prefix >= 0
    is_ctx[prefix[has_pre]] = True
    if not is_ctx[uni[bos]]:
        is_ctx[uni[bos]] = True   # the start state, even in a unigram model
    ctx = np.flatnonzero(is_ctx)
    n_states = ctx.size + 1
    state_id = np.full(total, -1, np.int64)
    state_id[ctx] = np.arange(1, n_states)
    logprob = np.concatenate(lm.logprob)
    backoff = np.concatenate(lm.backoff)
    src, dst, lab, wt, final = _build_arcs(order_of, prefix, last_word, suffix, is_ctx, state_id, logprob,
                                           backoff, bos, eos, N, n_states)
    say(f"built {src.size} arcs over {n_states} states")
    if n_states >= 2**31:
        raise MachineError(f"{n_states} states: more than a machine's int32 state ids can hold")
    # arcs sorted by (state, label): phi (label PHI = -2) first in each state
    counts = np.bincount(src, minlength=n_states)
    src_start = np.zeros(n_states + 1, np.int64)
    np.cumsum(counts, out=src_start[1:])
    dst, lab, wt = sort_arcs(src, dst, lab, wt, src_start)
    del src
    syms = SymbolTable(["<eps>"] + list(lm.vocab), name="words")
    start = int(state_id[uni[bos]])
    # fresh arrays that nothing else holds, handed over read-only so that the machine need not copy them
    arrays = dict(final=final, src_start=src_start, dst=dst, ilabel=lab, weight=wt)
    for a in arrays.values():
        a.setflags(write=False)
    m = Machine(start=start, isyms=syms, semiring="log", arc_type="log64", check_symbols=False, **arrays)
    gid_of_state = np.empty(n_states, np.int64)
    gid_of_state[0] = -1
    gid_of_state[1:] = ctx
    flat = np.concatenate([g.ravel() for g in lm.ngrams], dtype=np.int32)
    ptr = np.zeros(total + 1, np.int64)
    np.cumsum(order_of.astype(np.int64), out=ptr[1:])
    unk = wid.get(UNK)
    if unk is None:
        raise MachineError("the model has no <unk> unigram")
    hist_len = np.zeros(n_states, np.int8)
    hist_len[1:] = order_of[ctx]
    hist_len.setflags(write=False)
    return CompiledLM(m, list(lm.vocab), unk + 1, N, gid_of_state, flat, ptr, hist_len=hist_len)


def epsilon_approximation(lm: CompiledLM) -> CompiledLM:
    """An approximation of the model with its phi arcs read as epsilon arcs.

    Reading a failure arc as an epsilon arc lets a word that the state has
    itself also be reached through the backoff state, which double-counts
    paths (what k2 and Kaldi do).  Here the backoff weights are recomputed so
    that each state stays normalised under epsilon semantics: the epsilon arc
    of state q carries 1 - (its own arcs' and final mass), so that, with the
    backoff states normalised first, every state's total mass is 1.  The
    result is a proper distribution that differs from the exact model; it is
    never used unless asked for.  Its ``score`` sums over paths (compose).
    """
    m = lm.machine
    w, f = m.neglog_weights()
    is_phi = m.ilabel == PHI
    with np.errstate(over="ignore"):
        own = np.bincount(m.arc_src, np.where(is_phi, 0.0, np.exp(-w)), minlength=m.num_states) + np.exp(-f)
    if np.any(own > 1.0 + 1e-9):
        q = int(np.argmax(own))
        raise MachineError(f"state {q} has outgoing mass {own[q]:.6f} > 1: the model is not normalised")
    with np.errstate(divide="ignore"):
        new_w = np.where(is_phi, -np.log(np.maximum(1.0 - own[m.arc_src], 0.0)), w)
    em = m.replace(ilabel=np.where(is_phi, 0, m.ilabel).astype(np.int32), weight=new_w)
    out = CompiledLM(em, lm.vocab, lm.unk_label, lm.order, lm.state_gid, lm.ngram_words, lm.ngram_ptr)
    out.epsilon = True
    return out


def event_mass(c: CompiledLM) -> np.ndarray:
    """Total probability of the next event (a word or the end) at each state.

    Every non-phi arc is redirected to a sink whose final weight is one, the
    phi arcs are kept, and the backward value of each state is then the sum
    of its events' probabilities under failure semantics: 1 everywhere for a
    normalised model.  One pass over an acyclic machine (the phi forest).

    Returns:
        float64 [N] per-state event mass.
    """
    from ..algo.shortest import backward
    m = c.machine
    n = m.num_states
    sink = n
    is_phi = m.ilabel == PHI
    dst = np.where(is_phi, m.dst, sink).astype(np.int64)
    final = np.concatenate([m.final, [0.0]])
    src_start = np.concatenate([m.src_start, [m.src_start[-1]]])
    mm = Machine(start=m.start, final=final, src_start=src_start, dst=dst, ilabel=m.ilabel, weight=m.weight,
                 semiring="log", check_symbols=False)
    return np.exp(-backward(mm)[:n])


def check_normalised(lm) -> float:
    """Largest |1 - sum_w p(w | h)| over the histories of a model (BackoffLM or CompiledLM)."""
    c = lm if isinstance(lm, CompiledLM) else compile_lm(lm)
    return float(np.max(np.abs(1.0 - event_mass(c))))
