"""Tagging: the best tag sequence of each sentence under an HMM.

The engine's best path over a batch of sentences gives every sentence's best
tagging at once, so :func:`viterbi` decodes chunks of sentences one batch at a
time: a bigram HMM's as a chain of allowed-tag layers
(:func:`fsmlearn.algo.chain.chain_best_paths`, the Viterbi recursion over the
tables), a trigram HMM's as a batch of lattices
(:func:`fsmlearn.algo.batch.batch_best_paths`, one tropical solve).

Public names: viterbi, tag_sentences.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ..algo.batch import batch_best_paths
from ..algo.chain import chain_best_paths
from .hmm import HMM
from .lattice import build_chains, build_lattice, check_sentences, encode_sentences, sentence_batches, unknown_rows

__all__ = ["viterbi", "tag_sentences"]


def viterbi(hmm: HMM, ptr, ids, *, oov_words=None, batch_tokens: int = 100_000) -> np.ndarray:
    """The best tag sequence of every sentence, by the engine's best paths over batches of lattices.

    Args:
        hmm, ptr, ids, oov_words: as for :func:`fsmlearn.tag.lattice.lattice`.
        batch_tokens: tokens per batch of lattices (sentences are never split).

    Returns:
        int32 [N] tag ids.
    """
    ptr, ids = check_sentences(ptr, ids, hmm.V)
    out = np.empty(ids.shape[0], np.int32)
    oov_pos = np.cumsum(ids == hmm.V) if oov_words is not None else None
    csr = hmm.emission_csr()
    for s0, s1 in sentence_batches(ptr, batch_tokens):
        t0, t1 = int(ptr[s0]), int(ptr[s1])
        if t1 == t0:
            continue
        sub_ids = ids[t0:t1]
        words = None
        if oov_words is not None:
            k0 = int(oov_pos[t0 - 1]) if t0 else 0
            words = oov_words[k0:int(oov_pos[t1 - 1])]
        extra = unknown_rows(hmm, sub_ids, words)
        if hmm.order == 2:
            chains = build_chains(hmm, ptr[s0:s1 + 1] - ptr[s0], sub_ids, csr, extra=extra)
            out[t0:t1] = chain_best_paths(chains).labels
            continue
        lat = build_lattice(hmm, ptr[s0:s1 + 1] - ptr[s0], sub_ids, csr, extra=extra)
        _, arcs, _ = batch_best_paths(lat.batch)
        out[t0:t1] = lat.arc_tags(arcs)
    return out


def tag_sentences(hmm: HMM, sentences: Iterable[Sequence[str]]) -> list[list[str]]:
    """Tag sentences (lists of words) with the Viterbi tag sequence.

    Returns:
        One list of tag names per sentence.
    """
    sentences = [list(s) for s in sentences]
    ptr, ids, oov = encode_sentences(hmm, sentences)
    tags = viterbi(hmm, ptr, ids, oov_words=oov)
    names = hmm.tags
    return [[names[t] for t in tags[ptr[i]:ptr[i + 1]]] for i in range(len(sentences))]
