"""Sampling sentences from a compiled backoff LM.

Sentences are random paths of the acceptor drawn with failure semantics
(:func:`fsmlearn.algo.sample_paths` with ``normalised=True``: a backoff LM is
its own generative process, so no backward solve is needed), in batches; each batch's seed is derived
from the user's seed and the batch number, so the output is a function of
(seed, batch size).  Text is assembled in numba from a byte table of the
vocabulary and written as one line per sentence, tokens separated by spaces.

Public names: sample_sentences, sample_text.
"""

from __future__ import annotations

import time

import numba as nb
import numpy as np

from ..algo.paths import sample_paths
from ..fsm.machine import EPSILON, PHI
from .model import CompiledLM

DEFAULT_BATCH = 200_000


def _word_bytes(vocab):
    enc = [w.encode("utf-8") for w in vocab]
    off = np.zeros(len(enc) + 1, np.int64)
    np.cumsum([len(b) for b in enc], out=off[1:])
    return np.frombuffer(b"".join(enc), np.uint8).copy(), off


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
                out[p] = 32
                p += 1
            first = False
            s = woff[x - 1]
            e = woff[x]
            for q in range(s, e):
                out[p] = wbuf[q]
                p += 1
        out[p] = 10
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
    """
    if (tokens is None) == (sentences is None):
        raise ValueError("give exactly one of tokens= and sentences=")
    wbuf, woff = _word_bytes(lm.vocab)
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
            break
        S = sample_paths(m, want, seed=(int(seed) * 1_000_003 + b) & 0x7FFFFFFF, normalised=True,
                         threads=threads)
        data, ntok = _render(S.ptr, S.arcs, m.ilabel, wbuf, woff)
        if tokens is not None and n_tok + ntok > tokens:
            # keep whole sentences up to the token budget
            lens = np.diff(S.ptr)
            lab = m.ilabel[S.arcs]
            words = (lab != PHI) & (lab != EPSILON)
            per = np.add.reduceat(words.astype(np.int64), S.ptr[:-1]) if S.arcs.size else np.zeros(want, np.int64)
            per[lens == 0] = 0
            keep = int(np.searchsorted(np.cumsum(per), tokens - n_tok, side="right")) + 1
            keep = min(keep, want)
            data, ntok = _render(S.ptr[:keep + 1], S.arcs[:S.ptr[keep]], m.ilabel, wbuf, woff)
            out.write(data.tobytes())
            n_sent += keep
            n_tok += ntok
            break
        out.write(data.tobytes())
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
            break
    return n_sent, n_tok
