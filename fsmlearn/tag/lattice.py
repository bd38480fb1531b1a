"""Tagging lattices: many sentences' compositions with an HMM as one batch of machines.

:func:`lattice` builds the composition of sentence acceptors with
:meth:`fsmlearn.tag.hmm.HMM.tagger_transducer` directly, for *many*
sentences at once, as a :class:`~fsmlearn.fsm.MachineBatch`: each sentence's
lattice is a machine of its own (its start state, then one state per allowed
tag, or (previous tag, tag) pair, per position; the last position's states are
final with weight ``p(</s> | h)``), all laid out in one set of arrays (Mohri,
Pereira and Riley 2002, section 4, for the lattice as a composition).  The
engine's routines answer per sentence in one call: ``forward_backward(lat.batch)``
gives each sentence's ``-ln p(words)`` and its arcs' posteriors,
``best_path(lat.batch)`` each sentence's best tagging.  States are numbered in
topological order (every arc goes up), so the engine solves the batch in one flat
pass.  A numba kernel writes the arrays from integer arrays (sentence offsets,
word ids, the allowed tags of each word).

A first-order HMM's lattices have the shape the engine's dense-chain schedule
solves without writing arcs (:mod:`fsmlearn.algo.chain`): a chain of layers of
allowed tags whose arc weights are products of a transition and an emission.
:func:`build_chains` gives them as a :class:`~fsmlearn.fsm.ChainBatch` (a
sentence a chain, a word id a row of allowed tags), and EM, the likelihood and
Viterbi of a bigram HMM use it; a trigram HMM's states are tag pairs, so it
keeps the lattice of arcs.

Public names: Lattice, build_lattice, build_chains, lattice, sentence_lattice,
encode_sentences, check_sentences, unknown_rows, sentence_batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numba as nb
import numpy as np

from ..errors import ArgumentError, ModelError
from ..fsm.batch import MachineBatch
from ..fsm.chain import ChainBatch
from ..fsm.machine import Machine
from .hmm import HMM, UNK

__all__ = ["Lattice", "build_lattice", "build_chains", "lattice", "sentence_lattice", "encode_sentences", "check_sentences",
           "unknown_rows", "sentence_batches"]


class Lattice:
    """The tagging lattices of a batch of sentences, one machine each.

    Attributes:
        batch: the :class:`~fsmlearn.fsm.MachineBatch` (input labels word id + 1,
            output labels tag + 1); machine b is the b-th non-empty sentence.
        arc_trans: int32 [E] flat index of each arc's transition into the
            model's transition array (``hmm.trans.ravel()``).
        final_state: int64 [F] the final states (each sentence's last position);
        final_trans: int32 [F] the flat index of each one's final weight (its
            ``</s>`` transition).
        state_tok: int64 [Q] token (0..N-1 within the batch) of each state, -1
            for the sentences' start states.
        state_tag: int32 [Q] tag of each state (the last tag of its history),
            -1 for the start states.
        ptr: int64 [S+1] sentence offsets; ids: int32 [N] word ids.
        num_tags: T.
    """

    __slots__ = ("batch", "arc_trans", "final_state", "final_trans", "state_tok", "state_tag", "ptr", "ids",
                 "num_tags")

    def __init__(self, batch, arc_trans, final_state, final_trans, state_tok, state_tag, ptr, ids, num_tags):
        self.batch = batch
        self.arc_trans = arc_trans
        self.final_state = final_state
        self.final_trans = final_trans
        self.state_tok = state_tok
        self.state_tag = state_tag
        self.ptr = ptr
        self.ids = ids
        self.num_tags = num_tags

    @property
    def machine(self) -> Machine:
        """The lattice of a single sentence as a :class:`Machine`.

        Raises:
            ArgumentError: the lattice holds several sentences (their machines are
                ``batch``; the union's own start reaches only the first).
        """
        if len(self.batch) != 1:
            raise ArgumentError(f"this lattice holds {len(self.batch)} sentences, one machine each: pass "
                                "lat.batch to the engine (or lat.batch[b] for sentence b)")
        return self.batch.machine

    def transition_counts(self, posteriors: np.ndarray, final_posteriors: np.ndarray, size: int) -> np.ndarray:
        """float64 [size]: expected count of each transition (flat, as ``hmm.trans.ravel()``):
        the arcs' posteriors and the final weights' (the ``</s>`` transitions)."""
        return (np.bincount(self.arc_trans, posteriors, minlength=size)
                + np.bincount(self.final_trans, final_posteriors[self.final_state], minlength=size))

    def state_posteriors(self, arc_posteriors: np.ndarray) -> np.ndarray:
        """float64 [Q]: posterior of each state (the sum over its incoming arcs)."""
        m = self.batch.machine
        return np.bincount(m.dst, arc_posteriors, minlength=m.num_states)

    def position_posteriors(self, arc_posteriors: np.ndarray) -> np.ndarray:
        """float64 [N, T]: posterior probability that token n has tag t."""
        sp = self.state_posteriors(arc_posteriors)
        m = self.state_tok >= 0
        N = self.ids.shape[0]
        out = np.bincount(self.state_tok[m] * self.num_tags + self.state_tag[m], sp[m],
                          minlength=N * self.num_tags)
        return out.reshape(N, self.num_tags)

    def arc_tags(self, arcs: np.ndarray) -> np.ndarray:
        """int32 [N]: the tag of each token on the paths through these arcs (the union's
        arc ids of every sentence's path, as :func:`fsmlearn.algo.batch.batch_best_paths`
        gives them)."""
        st = self.batch.machine.dst[arcs]
        st = st[self.state_tok[st] >= 0]
        out = np.full(self.ids.shape[0], -1, np.int32)      # -1: a token on none of the paths
        out[self.state_tok[st]] = self.state_tag[st]
        return out

    def path_tags(self, path) -> np.ndarray:
        """int32 [N]: the tag of each token on the best paths (from :func:`best_path`): the list
        that ``best_path(lat.batch)`` returns (a None, a sentence without a path, leaves its
        tokens -1), or one Path of a one-sentence lattice.

        Raises:
            ArgumentError: a single Path for a lattice of several sentences (its arc numbers
                are those of one sentence's machine: give the list for the whole batch).
        """
        if isinstance(path, list):
            if len(path) != len(self.batch):
                raise ArgumentError(f"{len(path)} paths for a lattice of {len(self.batch)} sentences")
            parts = [p.arcs + self.batch.arc_ptr[b] for b, p in enumerate(path) if p is not None]
            return self.arc_tags(np.concatenate(parts) if parts else np.empty(0, np.int64))
        if len(self.batch) != 1:
            raise ArgumentError(f"one path for a lattice of {len(self.batch)} sentences: pass the list that "
                                "best_path(lat.batch) returns")
        return self.arc_tags(path.arcs)


def check_sentences(ptr, ids, V: int):
    """Validated (ptr int64 [S+1], ids int32 [N]) of a batch of encoded sentences.

    Raises:
        ArgumentError: offsets that do not rise from 0 to N, or word ids outside 0..V.
    """
    ptr = np.ascontiguousarray(ptr, dtype=np.int64)
    ids = np.asarray(ids)
    if ids.dtype != np.int32:
        ids = ids.astype(np.int32)
    ids = np.ascontiguousarray(ids)
    if ptr.ndim != 1 or ptr.size < 1 or ptr[0] != 0 or ptr[-1] != ids.shape[0] or np.any(np.diff(ptr) < 0):
        raise ArgumentError(f"sentence offsets must rise from 0 to the number of tokens ({ids.shape[0]})")
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) > V):
        raise ArgumentError(f"word ids must lie in 0..{V} (V is the unknown word), got {int(ids.min())}.."
                       f"{int(ids.max())}")
    return ptr, ids


def _with_extra(csr, ids, extra):
    """(row_ptr, row_tag, row_logp, tok_row): the emission rows with one row appended per
    token whose scores ``extra`` gives, and each token's row."""
    row_ptr, row_tag, row_lp = csr
    tok_row = ids.astype(np.int64)
    if extra is not None and len(extra[0]):
        tok, scores = extra
        fin = np.isfinite(scores)
        r, t = np.nonzero(fin)
        nV = row_ptr.shape[0] - 1
        xptr = np.zeros(len(tok) + 1, np.int64)
        np.cumsum(fin.sum(axis=1), out=xptr[1:])
        row_ptr = np.concatenate([row_ptr, row_ptr[-1] + xptr[1:]])
        row_tag = np.concatenate([row_tag, t.astype(np.int32)])
        row_lp = np.concatenate([row_lp, scores[r, t]])
        tok_row[np.asarray(tok, dtype=np.int64)] = nV + np.arange(len(tok))
    return row_ptr, row_tag, row_lp, tok_row


def build_chains(hmm: HMM, ptr, ids, csr, *, extra=None, semiring: str = "log", row_weight=None) -> ChainBatch:
    """A bigram HMM's sentence lattices as a :class:`~fsmlearn.fsm.ChainBatch`.

    Chain s is the s-th non-empty sentence; position i takes the tags its word allows, with
    ``p(t_i | t_{i-1})`` as the transition (``<s>`` and ``</s>`` as row and column T) and
    ``p(w_i | t_i)`` as the row weight.  The engine's ``forward_backward``, ``best_path`` and
    ``total_weight`` solve it by the dense-chain schedule; its ``materialise()`` is the
    arc-by-arc lattice of :func:`build_lattice`: the same states, arcs, output labels and
    weights, with row numbers + 1 as input labels (the word ids + 1, except for unknown
    words given rows of their own).

    Args:
        hmm: a bigram model (``order == 2``).
        ptr, ids, csr, extra: as :func:`build_lattice`; the rows of ``csr`` are the word ids.
        semiring: ``"log"`` (costs) or ``"real"`` (probabilities).
        row_weight: the rows' weights in that semiring when the caller has them already
            (EM converts them once per iteration, not once per batch).

    Raises:
        ArgumentError: a trigram model, or a semiring other than log or real.
        ModelError: a token with no possible tag (the message names it).
    """
    if hmm.order != 2:
        raise ArgumentError(f"build_chains: a chain of tag layers is a bigram HMM's lattice; this model has "
                            f"order {hmm.order} (use build_lattice)")
    if semiring not in ("log", "real"):
        raise ArgumentError(f"lattice semiring must be 'log' or 'real', got {semiring!r}")
    real = semiring == "real"
    if extra is not None and len(extra[0]):
        row_weight = None
    row_ptr, row_tag, row_lp, tok_row = _with_extra(csr, ids, extra)
    if row_weight is None:
        row_weight = np.exp(row_lp) if real else -row_lp
    empty = np.flatnonzero(np.diff(row_ptr)[tok_row] == 0)
    if empty.size:
        i = int(empty[0])
        wid = int(ids[i])
        word = hmm.vocab[wid] if wid < hmm.V else UNK
        raise ModelError(f"token {i} ({word!r}) has no possible tag under the model")
    keep = np.flatnonzero(np.diff(ptr) > 0)
    chain_ptr = np.empty(keep.size + 1, np.int64)
    chain_ptr[:-1] = ptr[keep]
    chain_ptr[-1] = ptr[-1]
    T1 = hmm.T + 1
    return ChainBatch.trusted(chain_ptr, tok_row, row_ptr, row_tag, row_weight,
                              hmm.transition_weights(real).reshape(T1, T1), semiring)


def build_lattice(hmm: HMM, ptr, ids, csr, *, extra=None, semiring: str = "log",
                  symbols: bool = False) -> Lattice:
    """The batch of sentence lattices from prepared emission rows (the fast path of EM).

    Args:
        hmm: the model.
        ptr: int64 [S+1] sentence offsets; ids: int32 [N] word ids (V unknown).
        csr: (row_ptr, row_tag, row_logp) of the word ids, from
            :meth:`HMM.emission_csr`.
        extra: optional (tok int64 [M], scores float64 [M, T]): tokens whose
            emission row is given explicitly (unknown words).
        semiring: ``"log"`` (weights -ln p) or ``"real"`` (weights p; no
            exp/log per arc in the engine).
        symbols: attach :meth:`HMM.word_symbols` / :meth:`HMM.tag_symbols`.

    Returns:
        A :class:`Lattice`.

    Raises:
        ArgumentError: a semiring other than log or real, or too many states.
        ModelError: a token with no possible tag (the message names it).
    """
    real = semiring == "real"
    if semiring not in ("log", "real"):
        raise ArgumentError(f"lattice semiring must be 'log' or 'real', got {semiring!r}")
    row_ptr, row_tag, row_lp, tok_row = _with_extra(csr, ids, extra)
    tw = hmm.transition_weights(real)
    row_w = np.exp(row_lp) if real else -row_lp
    n_states, n_arcs, n_mach, n_fin = _sizes(ptr, tok_row, row_ptr, hmm.order)
    if n_arcs < 0:
        i = int(n_states)
        wid = int(ids[i])
        word = hmm.vocab[wid] if wid < hmm.V else UNK
        raise ModelError(f"token {i} ({word!r}) has no possible tag under the model")
    if n_states >= 2**31 - 1:
        raise ArgumentError(f"the lattice has {n_states} states, too many for one machine; use smaller batches")
    src_start = np.empty(n_states + 1, np.int64)
    dst = np.empty(n_arcs, np.int32)
    il = np.empty(n_arcs, np.int32)
    ol = np.empty(n_arcs, np.int32)
    w = np.empty(n_arcs, np.float64)
    final = np.full(n_states, 0.0 if real else np.inf)
    arc_trans = np.empty(n_arcs, np.int32)
    final_state = np.empty(n_fin, np.int64)
    final_trans = np.empty(n_fin, np.int32)
    state_tok = np.empty(n_states, np.int64)
    state_tag = np.empty(n_states, np.int32)
    state_ptr = np.empty(n_mach + 1, np.int64)
    _fill(ptr, ids, tok_row, row_ptr, row_tag, row_w, tw, hmm.T, hmm.order, real,
          src_start, dst, il, ol, w, final, arc_trans, final_state, final_trans, state_tok, state_tag, state_ptr)
    if n_states == 0:
        src_start[0] = 0
    for x in (src_start, dst, il, ol, w, final):
        x.setflags(write=False)
    m = Machine(start=0 if n_states else -1, final=final, src_start=src_start, dst=dst, ilabel=il, olabel=ol,
                weight=w, isyms=hmm.word_symbols() if symbols else None,
                osyms=hmm.tag_symbols() if symbols else None, semiring=semiring, check_symbols=False)
    # the kernel lays each sentence out in its own states (tests/tag_lattice_test.py checks
    # that MachineBatch's validation accepts the layout), so the O(E) check is skipped here
    batch = MachineBatch.trusted(m, state_ptr, state_ptr[:-1])
    return Lattice(batch, arc_trans, final_state, final_trans, state_tok, state_tag, ptr, ids, hmm.T)


def encode_sentences(hmm: HMM, sentences: Iterable[Sequence[str]]):
    """Word ids of sentences (lists of words) under the model's vocabulary.

    Returns:
        (ptr int64 [S+1], ids int32 [N], oov_words list[str]): ``oov_words``
        holds the words of the tokens with id V, in token order.
    """
    idx = hmm.word_index
    V = hmm.V
    lens = []
    ids = []
    oov = []
    for s in sentences:
        lens.append(len(s))
        for w in s:
            i = idx.get(w, V)
            ids.append(i)
            if i == V:
                oov.append(w)
    ptr = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    return ptr, np.asarray(ids, dtype=np.int32), oov


def unknown_rows(hmm: HMM, ids: np.ndarray, oov_words):
    """Word-specific emission rows of the unknown tokens, for :func:`build_lattice`'s ``extra``.

    Args:
        hmm: the model.
        ids: int32 [N] word ids (V: unknown).
        oov_words: the words of the tokens with id V, in order, or None.

    Returns:
        None (no unknown token, or no words given), or (tok int64 [M], scores
        float64 [M, T]): the unknown tokens and their rows
        (:meth:`~fsmlearn.tag.hmm.HMM.unknown_scores`, computed once per distinct word).

    Raises:
        ArgumentError: not one word per token with id V.
    """
    tok = np.flatnonzero(ids == hmm.V)
    if tok.size == 0 or (oov_words is None and hmm.tagdict is None and hmm.unknown is None):
        return None
    if oov_words is None:
        return None
    if len(oov_words) != tok.size:
        raise ArgumentError(f"{len(oov_words)} unknown words given for {tok.size} tokens with the unknown id")
    distinct = {}
    inv = np.fromiter((distinct.setdefault(w, len(distinct)) for w in oov_words), np.int64, count=tok.size)
    scores = hmm.unknown_scores(list(distinct))
    return tok, scores[inv]


def lattice(hmm: HMM, ptr, ids, *, oov_words=None, allowed=None, semiring: str = "log",
            symbols: bool = False) -> Lattice:
    """The tagging lattices of a batch of sentences: their compositions with
    :meth:`HMM.tagger_transducer`, one machine each (see the module docstring).

    Args:
        hmm: the model.
        ptr: int64 [S+1] sentence offsets into ``ids`` (empty sentences are skipped).
        ids: int32 [N] word ids, V for unknown words.
        oov_words: optional list of the words of the tokens with id V, in
            order; with it unknown words get word-specific emissions
            (:meth:`HMM.unknown_scores`).  Without it they use column V.
        allowed: optional bool [V+1, T] mask of allowed (word id, tag) pairs.
        semiring: weight convention of the machine, ``"log"`` or ``"real"``.
        symbols: attach the word and tag symbol tables.

    Returns:
        A :class:`Lattice`.

    Raises:
        ArgumentError: bad offsets or ids, or not one unknown word per token with id V.
        ModelError: a token with no possible tag.
    """
    ptr, ids = check_sentences(ptr, ids, hmm.V)
    return build_lattice(hmm, ptr, ids, hmm.emission_csr(allowed), extra=unknown_rows(hmm, ids, oov_words),
                         semiring=semiring, symbols=symbols)


def sentence_lattice(hmm: HMM, words: Sequence[str], **kwargs) -> Lattice:
    """The lattice of one sentence (a list of words); see :func:`lattice`."""
    ptr, ids, oov = encode_sentences(hmm, [list(words)])
    return lattice(hmm, ptr, ids, oov_words=oov, **kwargs)


def sentence_batches(ptr: np.ndarray, tokens: int):
    """(first, last+1) sentence ranges of about ``tokens`` tokens each."""
    S = ptr.shape[0] - 1
    tokens = max(int(tokens), 1)
    s0 = 0
    while s0 < S:
        s1 = int(np.searchsorted(ptr, ptr[s0] + tokens, side="right")) - 1
        s1 = min(max(s1, s0 + 1), S)
        yield s0, s1
        s0 = s1


# --------------------------------------------------------------------------- kernels

@nb.njit(cache=True)
def _sizes(ptr, tok_row, row_ptr, order):
    """(states, arcs, machines, final states) of the batch of sentence lattices; arcs -1 (and
    the token in states) if a token has no tag."""
    n_states = 0
    n_arcs = 0
    n_mach = 0
    n_fin = 0
    for s in range(ptr.shape[0] - 1):
        lo = ptr[s]
        hi = ptr[s + 1]
        if hi == lo:
            continue
        n_mach += 1
        n_states += 1        # the sentence's start state
        prev_states = 1      # states of the previous position (the start)
        prev_k = 1           # tags of the previous position
        for i in range(lo, hi):
            r = tok_row[i]
            k = row_ptr[r + 1] - row_ptr[r]
            if k == 0:
                return i, -1, 0, 0
            n_arcs += prev_states * k
            if order == 2:
                cur = k
            else:
                cur = prev_k * k
            n_states += cur
            prev_states = cur
            prev_k = k
        n_fin += prev_states
    return n_states, n_arcs, n_mach, n_fin


@nb.njit(cache=True)
def _fill(ptr, ids, tok_row, row_ptr, row_tag, row_w, trans, T, order, real,
          src_start, dst, il, ol, w, final, arc_trans, final_state, final_trans, state_tok, state_tag,
          state_ptr):
    """Write the batch of sentence lattices (each sentence a machine of its own, states in
    topological order, arcs by source); the arc count.

    Each non-empty sentence starts at a start state of its own; position i has one
    state per allowed tag (order 2) or per (previous tag, tag) pair (order 3), and an
    arc from every state of position i-1 to every state of i it may follow, labelled
    word id + 1 : tag + 1; the last position's states are final with weight
    p(</s> | h).

    Inputs:
        ptr: int64 [S+1] sentence offsets; ids: int32 [N] word ids.
        tok_row: int64 [N] each token's emission row (its word id, or a row
            appended for an unknown word with its own scores).
        row_ptr: int64 [R+1], row_tag: int32 [nnz], row_w: float64 [nnz]: the
            tags each row allows (ascending) and their emission weights.
        trans: float64 [(T+1)**order] the flattened transition array
            (``hmm.trans.ravel()``); trans and row_w hold probabilities when
            ``real``, else costs (-ln p).
        T: number of tags; order: 2 or 3; real: the weight convention.

    Outputs (preallocated by :func:`_sizes`' counts: Q states, E arcs, B machines, F finals):
        src_start: int64 [Q+1]; dst, il, ol: int32 [E]; w: float64 [E];
        final: float64 [Q] (filled with the semiring's zero by the caller).
        arc_trans: int32 [E] flat index of each arc's transition in ``trans``;
        final_state: int64 [F] the final states, final_trans: int32 [F] the index of
            each one's final weight (its ``</s>`` transition).
        state_tok: int64 [Q] each state's token (-1 at the starts);
        state_tag: int32 [Q] its tag (-1 at the starts).
        state_ptr: int64 [B+1] each machine's first state (its start).
    """
    T1 = T + 1
    a = 0
    q = 0                                   # the current sentence's start state
    b = 0
    f = 0
    for s in range(ptr.shape[0] - 1):
        lo = ptr[s]
        hi = ptr[s + 1]
        if hi == lo:
            continue
        state_ptr[b] = q
        b += 1
        state_tok[q] = -1
        state_tag[q] = -1
        base_prev = q
        n_prev = 1
        k_prev = 1
        r_prev = -1
        r_prev2 = -1
        base = q + 1
        for i in range(lo, hi):
            r = tok_row[i]
            r0 = row_ptr[r]
            k = row_ptr[r + 1] - r0
            lab = ids[i] + 1
            if order == 2:
                for j in range(k):
                    state_tok[base + j] = i
                    state_tag[base + j] = row_tag[r0 + j]
                for p in range(n_prev):
                    sp = base_prev + p
                    src_start[sp] = a
                    tp = T if r_prev < 0 else row_tag[row_ptr[r_prev] + p]
                    for j in range(k):
                        c = row_tag[r0 + j]
                        tw = trans[tp * T1 + c]
                        dst[a] = base + j
                        il[a] = lab
                        ol[a] = c + 1
                        w[a] = tw * row_w[r0 + j] if real else tw + row_w[r0 + j]
                        arc_trans[a] = tp * T1 + c
                        a += 1
                n_cur = k
            else:
                # states of position i: (index of the previous tag) * k + (index of the tag)
                for pi in range(k_prev):
                    for j in range(k):
                        state_tok[base + pi * k + j] = i
                        state_tag[base + pi * k + j] = row_tag[r0 + j]
                for p in range(n_prev):
                    sp = base_prev + p
                    src_start[sp] = a
                    if r_prev < 0:
                        tx = T
                        ta = T
                        pa = 0
                    else:
                        pa = p % k_prev                      # index of the previous tag
                        ta = row_tag[row_ptr[r_prev] + pa]
                        tx = T if r_prev2 < 0 else row_tag[row_ptr[r_prev2] + p // k_prev]
                    h = (tx * T1 + ta) * T1
                    for j in range(k):
                        c = row_tag[r0 + j]
                        tw = trans[h + c]
                        dst[a] = base + pa * k + j
                        il[a] = lab
                        ol[a] = c + 1
                        w[a] = tw * row_w[r0 + j] if real else tw + row_w[r0 + j]
                        arc_trans[a] = h + c
                        a += 1
                n_cur = k_prev * k
            base_prev = base
            base += n_cur
            n_prev = n_cur
            k_prev = k
            r_prev2 = r_prev
            r_prev = r
        for p in range(n_prev):              # the last position: final weights p(</s> | h)
            sp = base_prev + p
            src_start[sp] = a
            if order == 2:
                h = row_tag[row_ptr[r_prev] + p] * T1
            else:
                pa = p % k_prev
                ta = row_tag[row_ptr[r_prev] + pa]
                tx = T if r_prev2 < 0 else row_tag[row_ptr[r_prev2] + p // k_prev]
                h = (tx * T1 + ta) * T1
            final[sp] = trans[h + T]
            final_state[f] = sp
            final_trans[f] = h + T
            f += 1
        q = base
    state_ptr[b] = q
    src_start[q] = a
    return a
