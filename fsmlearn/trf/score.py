"""Scoring text with a saved TRF language model.

Each line is a sentence of words separated by ASCII whitespace, taken as bytes (as KenLM
takes them): a word outside the model's vocabulary, bytes that are not UTF-8 included, is
``<unk>`` when the vocabulary has it.  ln p(j, x^j) is equation (2) with the model's
estimated zeta (section 4), computed by the compiled rescorer
(:func:`fsmlearn.trf.rescore.compile_rescorer`), on several threads for long inputs.  A
sentence the model gives no probability gets -inf: an empty line (a TRF's lengths start at
1; an n-gram LM gives it p(</s> | <s>)) or, without the long-sentence sub-model, a line
longer than the model's largest length.  The perplexity counts </s> as a token (KenLM's
convention, so it compares with ``lm ppl`` and kenlm's query); it is infinite when a
sentence has probability 0, and is then also given over the other sentences.

Public names: UNK, BASES, TRFScorer, read_sentences, score_corpus, score_text.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numba as nb
import numpy as np

from ..errors import ArgumentError, CorpusFormatError
from ..data.textin import STDIN, byte_lines
from .features import Corpus
from .model import TRF
from .rescore import PREFETCH, _rescore, compile_rescorer

__all__ = ["UNK", "BASES", "TRFScorer", "read_sentences", "score_corpus", "score_text"]

UNK = "<unk>"

#: the log bases ``score_text`` writes: "10" (log10, as ``lm score``) or "e" (natural logs)
BASES = ("10", "e")

#: sentences per call of the rescorer when text is read
BATCH = 100_000

#: below this many tokens a batch is scored on one thread
PARALLEL_TOKENS = 20_000


@nb.njit(parallel=True, cache=True)
def _rescore_parts(cuts, tokens, ptr, bos, eos, cls, n_c, tid, length, offset, kind, minoff, mode, base, dense,
                   table, table_lam, mask, ahead, out):
    """:func:`fsmlearn.trf.rescore._rescore` of the sentence ranges cuts[j]..cuts[j+1]-1 on
    numba's threads (each range is scored alone, into its own part of ``out``)."""
    for j in nb.prange(cuts.shape[0] - 1):
        a = cuts[j]
        b = cuts[j + 1]
        if b > a:
            p = ptr[a:b + 1] - ptr[a]
            _rescore(tokens[ptr[a]:ptr[b]], p, bos, eos, cls, n_c, tid, length, offset, kind, minoff, mode, base,
                     dense, table, table_lam, mask, ahead, out[a:b])


class TRFScorer:
    """ln p of sentences under a TRF, on ``threads`` threads (0: all of numba's).

    Args:
        model: the :class:`~fsmlearn.trf.model.TRF`.
        threads: threads for a batch of at least :data:`PARALLEL_TOKENS` tokens.
    """

    def __init__(self, model: TRF, threads: int = 1):
        if not isinstance(threads, (int, np.integer)) or isinstance(threads, bool) or threads < 0:
            raise ArgumentError(f"threads must be an integer >= 0, got {threads!r}")
        self.model = model
        self.rescorer = compile_rescorer(model)
        self.threads = nb.config.NUMBA_NUM_THREADS if threads == 0 else min(int(threads),
                                                                            nb.config.NUMBA_NUM_THREADS)

    def log_probs(self, corpus: Corpus) -> np.ndarray:
        """float64 [n]: ln p(j, x^j) of each sentence; -inf where the model gives none (an
        empty sentence; one longer than the model's largest length without the long
        sub-model)."""
        m = self.model
        lens = corpus.lengths
        ok = (lens >= 1) & (m.long | (lens <= m.m))
        out = np.full(len(corpus), -np.inf)
        if not ok.any():
            return out
        if not ok.all():
            keep = np.flatnonzero(ok)
            ptr = np.zeros(keep.size + 1, np.int64)
            np.cumsum(lens[keep], out=ptr[1:])
            out[keep] = self.log_probs(Corpus(corpus.tokens[np.repeat(ok, lens)], ptr))
            return out
        r = self.rescorer
        if self.threads <= 1 or corpus.tokens.size < PARALLEL_TOKENS:
            return r.log_probs(corpus)
        from .model import length_groups
        fs = r.features
        t = fs.templates
        n = len(corpus)
        k = min(4 * self.threads, n)
        cuts = np.searchsorted(corpus.ptr, np.linspace(0, corpus.tokens.size, k + 1)).astype(np.int64)
        cuts[0], cuts[-1] = 0, n
        cuts = np.maximum.accumulate(np.minimum(cuts, n))
        scores = np.zeros(n)
        before = nb.get_num_threads()
        nb.set_num_threads(self.threads)
        try:
            _rescore_parts(cuts, corpus.tokens, corpus.ptr, fs.bos, fs.eos, fs.classes, fs.n_classes + 2, t.tid,
                           t.length, t.offset, t.kind, t.minoff, r.mode, r.base, r.dense, r.table, r.table_lam,
                           r.mask, PREFETCH, scores)
        finally:
            nb.set_num_threads(before)
        return r.length_term[length_groups(lens, r.m, r.long)] + scores


def read_sentences(path, vocab: list[str], batch: int = BATCH, lower: bool = False) -> Iterator[tuple[Corpus, np.ndarray]]:
    """Batches of sentences of a text file or stdin (``-``) as word ids.

    Args:
        path: the file (.gz/.bz2/.xz read too), or ``-`` for stdin.
        vocab: the model's words.
        batch: sentences per batch.
        lower: lower-case each line first (a model trained on lower-cased text).

    Yields:
        (corpus, int64 [n] ``<unk>`` replacements per sentence); an empty line is a
        sentence of length 0.

    Raises:
        CorpusNotFoundError, CorpusFormatError: a missing, unreadable, empty or binary
            file (stdin may be empty or hold any bytes), or a word outside a vocabulary
            without ``<unk>`` (file, line and word).
    """
    index = {w.encode("utf-8"): i for i, w in enumerate(vocab)}
    unk = index.get(UNK.encode())
    stdin = str(path) == "-"
    name = STDIN if stdin else str(path)
    toks, ptr, oov = [], [0], []
    for n, line in byte_lines(path, utf8=False, binary=stdin, empty=stdin):
        if lower:
            line = line.decode("utf-8", "surrogateescape").lower().encode("utf-8", "surrogateescape")
        k = 0
        for w in line.split():
            i = index.get(w)
            if i is None:
                if unk is None:
                    raise CorpusFormatError(f"word {w.decode('utf-8', 'backslashreplace')!r} is not in the model's "
                                            f"vocabulary (which has no {UNK})", name, n)
                i = unk
                k += 1
            toks.append(i)
        ptr.append(len(toks))
        oov.append(k)
        if len(oov) >= batch:
            yield Corpus(np.array(toks, np.int32), np.array(ptr, np.int64)), np.array(oov, np.int64)
            toks, ptr, oov = [], [0], []
    if oov:
        yield Corpus(np.array(toks, np.int32), np.array(ptr, np.int64)), np.array(oov, np.int64)


def score_corpus(model: TRF, corpus: Corpus, threads: int = 1) -> dict:
    """ln p of each sentence (-inf where the model gives none), their sum, the tokens (</s>
    included) and the perplexity."""
    lp = TRFScorer(model, threads).log_probs(corpus)
    tokens = int(corpus.lengths.sum() + len(corpus))
    total = float(lp.sum())
    return {"log_probs": lp, "total": total, "sentences": len(corpus), "tokens": tokens,
            "perplexity": math.exp(-total / tokens) if tokens else math.inf}


def score_text(model: TRF, vocab: list[str], path, out=None, base: str = "10", threads: int = 1,
               scorer: TRFScorer | None = None) -> dict:
    """Score the lines of a text file or stdin (``-``), writing each line's log probability
    and ``<unk>`` count (``log_prob<TAB>unks``, as ``lm score`` writes them) to ``out``.

    Args:
        model: the TRF; vocab: its words (lines are lower-cased first when the model was
            trained on lower-cased text, ``model.meta["lower"]``).
        path: the file, or ``-`` for stdin.
        out: a text stream for the per-line figures, or None.
        base: ``"10"`` (log10) or ``"e"`` (ln).
        threads: as for :class:`TRFScorer`.
        scorer: a :class:`TRFScorer` to reuse (else one is built).

    Returns:
        dict: ``sentences``, ``tokens`` (</s> included), ``oovs`` (``<unk>``
        replacements), ``log_prob`` (the sum, in ``base``), ``perplexity``,
        ``zero`` (sentences of probability 0) and ``perplexity_nonzero`` (over the
        others; equal to ``perplexity`` when ``zero`` is 0).

    Raises:
        as :func:`read_sentences`; ArgumentError: an unknown base.
    """
    if base not in BASES:
        raise ArgumentError(f"base must be one of {', '.join(BASES)}; got {base!r}")
    scorer = scorer or TRFScorer(model, threads)
    scale = 1 / math.log(10) if base == "10" else 1.0
    sents = tokens = oovs = zero = tokens_nz = 0
    total = total_nz = 0.0
    for corpus, oov in read_sentences(path, vocab, lower=bool(model.meta.get("lower", False))):
        lp = scorer.log_probs(corpus)
        lens = corpus.lengths + 1
        fin = np.isfinite(lp)
        sents += len(corpus)
        tokens += int(lens.sum())
        oovs += int(oov.sum())
        zero += int((~fin).sum())
        total += float(lp.sum())
        total_nz += float(lp[fin].sum())
        tokens_nz += int(lens[fin].sum())
        if out is not None:
            out.write("".join(f"{x:.6f}\t{k}\n" for x, k in zip((lp * scale).tolist(), oov.tolist())))
    return {"sentences": sents, "tokens": tokens, "oovs": oovs, "log_prob": total * scale,
            "perplexity": math.exp(-total / tokens) if tokens else math.inf, "zero": zero,
            "perplexity_nonzero": math.exp(-total_nz / tokens_nz) if tokens_nz else math.inf}
