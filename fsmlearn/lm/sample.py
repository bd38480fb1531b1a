"""Sampling sentences from a compiled backoff LM.

Sentences are random paths of the acceptor drawn with failure semantics
(:func:`fsmlearn.algo.sample_paths` with ``normalised=True``: a backoff LM is
its own generative process, so no backward solve is needed), in batches; each batch's seed is derived
from the user's seed and the batch number, so the output is a function of
(seed, batch size).  Text is assembled in numba from a byte table of the
vocabulary and written as one line per sentence, tokens separated by spaces.

Public names: sample_sentences, sample_text, sample_corpus.
"""

from __future__ import annotations

import time

import numba as nb
import numpy as np

from ..algo.paths import sample_paths
from ..errors import ArgumentError
from ..fsm.machine import EPSILON, PHI
from .compiled import CompiledLM
from .vocab import NEWLINE, SPACE, word_bytes

DEFAULT_BATCH = 200_000


@nb.njit(cache=True)
def _render(ptr, arcs, ilabel, wbuf, woff):
    """Bytes of the sentences: labels - 1 index the word table; phi/epsilon skipped."""
    size = 0
    ntok = 0
    for a in arcs:
        x = ilabel[a]
        if x != PHI and x != EPSILON:
            size += woff[x] - woff[x - 1] + 1
            ntok += 1
    size += ptr.shape[0] - 1
    out = np.empty(size, np.uint8)
    p = 0
    for i in range(ptr.shape[0] - 1):
        first = True
        for j in range(ptr[i], ptr[i + 1]):
            x = ilabel[arcs[j]]
            if x == PHI or x == EPSILON:
                continue
            if not first:
                out[p] = SPACE
                p += 1
            first = False
            s = woff[x - 1]
            e = woff[x]
            for q in range(s, e):
                out[p] = wbuf[q]
                p += 1
        out[p] = NEWLINE
        p += 1
    return out[:p], ntok


def sample_sentences(lm: CompiledLM, num: int, seed: int = 0) -> list[list[str]]:
    """``num`` sentences (lists of words) drawn from the model."""
    S = sample_paths(lm.machine, num, seed=seed, normalised=True)
    vocab = lm.vocab
    out = []
    for lab in S.label_sequences(lm.machine):
        out.append([vocab[x - 1] for x in lab])
    return out


def _word_lengths(ptr, arcs, ilabel):
    """Words per sampled sentence (phi and epsilon arcs are not words)."""
    lab = ilabel[arcs]
    words = (lab != PHI) & (lab != EPSILON)
    cs = np.zeros(arcs.size + 1, np.int64)
    np.cumsum(words, out=cs[1:])
    return cs[ptr[1:]] - cs[ptr[:-1]], words


def _sample_batches(lm: CompiledLM, tokens, sentences, seed, batch, threads, progress):
    """Batches of sampled paths (ptr, arcs, words per sentence) up to the budget.

    The last batch is cut to whole sentences within a token budget."""
    if (tokens is None) == (sentences is None):
        raise ArgumentError(f"give exactly one of tokens= and sentences=, got tokens={tokens!r}, "
                            f"sentences={sentences!r}")
    m = lm.machine
    n_sent = 0
    n_tok = 0
    b = 0
    t0 = time.time()
    last = t0
    while True:
        if sentences is not None:
            want = min(batch, sentences - n_sent)
        elif n_sent:   # size the batch to the tokens still wanted (5% spare)
            avg = n_tok / n_sent
            want = min(batch, int((tokens - n_tok) / max(avg, 1e-9) * 1.05) + 16)
        else:
            want = batch
        if want <= 0:
            return
        S = sample_paths(m, want, seed=(int(seed) * 1_000_003 + b) & 0x7FFFFFFF, normalised=True,
                         threads=threads)
        per, _ = _word_lengths(S.ptr, S.arcs, m.ilabel)
        ntok = int(per.sum())
        if tokens is not None and n_tok + ntok > tokens:
            # keep whole sentences up to the token budget
            keep = int(np.searchsorted(np.cumsum(per), tokens - n_tok, side="right")) + 1
            keep = min(keep, want)
            yield S.ptr[:keep + 1], S.arcs[:S.ptr[keep]], per[:keep]
            return
        yield S.ptr, S.arcs, per
        n_sent += want
        n_tok += ntok
        b += 1
        now = time.time()
        if progress and now - last > 10:
            rate = n_tok / (now - t0)
            msg = f"sampled {n_tok:,} tokens ({rate / 1e6:.1f}M tokens/s)"
            if tokens:
                msg += f", ETA {(tokens - n_tok) / max(rate, 1):.0f} s"
            progress(msg)
            last = now
        if tokens is not None and n_tok >= tokens:
            return


def sample_text(lm: CompiledLM, out, *, tokens: int | None = None, sentences: int | None = None,
                seed: int = 0, batch: int = DEFAULT_BATCH, progress=None,
                threads: int = 2) -> tuple[int, int]:
    """Write sampled sentences to a binary file object until enough are written.

    Args:
        lm: the compiled model.
        out: a binary file object.
        tokens: stop once this many tokens (``</s>`` not counted) are written.
        sentences: or stop after this many sentences.
        seed: random seed.
        batch: sentences per batch (part of what the seed determines).
        progress: optional callable(str), called about every 10 seconds.
        threads: sampling threads (fixed, not the machine's core count, so
            that the text is a function of (seed, batch, threads) only).

    Returns:
        (sentences, tokens) written.

    Raises:
        ArgumentError: not exactly one of ``tokens`` and ``sentences`` given (a ``ValueError``).
    """
    wbuf, woff = word_bytes(lm.vocab)
    n_sent = n_tok = 0
    for ptr, arcs, per in _sample_batches(lm, tokens, sentences, seed, batch, threads, progress):
        data, ntok = _render(ptr, arcs, lm.machine.ilabel, wbuf, woff)
        out.write(data.tobytes())
        n_sent += ptr.size - 1
        n_tok += ntok
    return n_sent, n_tok


def sample_corpus(lm: CompiledLM, *, tokens: int | None = None, sentences: int | None = None,
                  seed: int = 0, batch: int = DEFAULT_BATCH, progress=None, threads: int = 2):
    """The sentences :func:`sample_text` writes for the same arguments, as word ids.

    Returns:
        (ptr int64 [S+1], ids int32 [N]): ids index ``lm.vocab``.

    Raises:
        ArgumentError: not exactly one of ``tokens`` and ``sentences`` given (a ``ValueError``).
    """
    ids_parts, len_parts = [], []
    lab_of = lm.machine.ilabel
    for ptr, arcs, per in _sample_batches(lm, tokens, sentences, seed, batch, threads, progress):
        _, words = _word_lengths(ptr, arcs, lab_of)
        ids_parts.append((lab_of[arcs[words]] - 1).astype(np.int32))
        len_parts.append(per)
    lens = np.concatenate(len_parts) if len_parts else np.zeros(0, np.int64)
    ptr = np.zeros(lens.size + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    ids = np.concatenate(ids_parts) if ids_parts else np.zeros(0, np.int32)
    return ptr, ids
