"""Per-word scores of sentences, and KenLM's ``query`` output.

:func:`score_words` gives, for every token of every sentence (and ``</s>``),
its log10 probability, the length of the n-gram that scored it and whether
it is out of the vocabulary, as ``kenlm.Model.full_scores`` does.
:func:`write_query` reads text and prints what KenLM's ``query`` program
prints (``fsmlearn lm query``)::

    word=id ngram_length log10prob<TAB>... </s>=id ngram_length log10prob<TAB>Total: log10prob OOV: count

one line per sentence, then the summary (``-v word``)::

    Perplexity including OOVs:<TAB>...
    Perplexity excluding OOVs:<TAB>...
    OOVs:<TAB>...
    Tokens:<TAB>...

Numbers are written as KenLM writes them (the shortest representation of
the float32 value, fixed notation for decimal exponents -6 to 20, no
trailing ``.0``; the perplexities as doubles).  The id printed is KenLM's (:func:`kenlm_ids`):
``<unk>`` is 0 and the other words count from 1 in the order of the ARPA
file's 1-grams (``<s>`` = 1, ``</s>`` = 2 in lmplz's files); an OOV token
prints 0 and counts as OOV, as does a literal ``<unk>`` (as in KenLM).
The printed figures are computed as KenLM computes them: each word's
float32 log10 probability plus the float32 backoff weights, added in
float32 (:attr:`WordScores.log10prob32`), the line's total in float32, the
perplexities from float64 sums of the totals; so the output is KenLM's to
the byte, as long as the ARPA values round to the same float32 (our float64
figures, :attr:`WordScores.log10prob`, are closer to the ARPA's).  Unlike KenLM, a last line without a newline is scored like the
others (KenLM prints its words without ``</s>`` or a total).

Public names: WordScores, score_words, score_blocks, stream_blocks, summary_lines, write_query,
kenlm_float, kenlm_ids, VERBOSITY.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba as nb
import numpy as np

from ..algo.score import probe_arc_hash
from ..errors import ArgumentError
from .compiled import CompiledLM
from .vocab import EOS, LN10

__all__ = ["WordScores", "score_words", "score_blocks", "stream_blocks", "summary_lines", "write_query",
           "kenlm_float", "kenlm_ids", "VERBOSITY"]

#: KenLM query's verbosity levels: per word and sentence, per sentence, the summary only
VERBOSITY = ("word", "sentence", "summary")


@dataclass
class WordScores:
    """Per-word scores of S sentences (T entries in all).

    Attributes:
        ptr: int64 [S+1], sentence i's entries are ptr[i]..ptr[i+1]-1: its
            tokens, then ``</s>`` when scored with sentence context.
        word_id: int64 [T], the model's word id (``<unk>``'s for an OOV token).
        log10prob: float64 [T], log10 p(word | context) (-inf when the model
            cannot score it).
        ngram_length: int64 [T], the length of the n-gram matched (0 when none).
        oov: bool [T], the token is ``<unk>`` to the model.
        log10prob32: float32 [T], the same figure in KenLM's arithmetic: the
            matched n-gram's float32 log10 probability plus the float32 backoff
            weights of the longer contexts, shortest first, added in float32
            (what KenLM's ``query`` prints and ``full_scores`` returns).
    """
    ptr: np.ndarray
    word_id: np.ndarray
    log10prob: np.ndarray
    ngram_length: np.ndarray
    oov: np.ndarray
    log10prob32: np.ndarray

    @property
    def num_sentences(self) -> int:
        return int(self.ptr.size - 1)

    def sentence_totals(self, float32: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(log10 probability [S], OOV count int64 [S]) of each sentence: float64 sums of
        :attr:`log10prob`, or with ``float32`` the :attr:`log10prob32` values added one
        by one in float32, as KenLM does (its ``Total`` and ``Model.score``)."""
        return _segment_sums(self.log10prob32 if float32 else self.log10prob, self.oov, self.ptr)


@nb.njit(cache=True)
def _segment_sums(values, flags, ptr):
    """(sum of values[ptr[i]:ptr[i + 1]] added one by one in values' dtype, count of flags there)."""
    S = ptr.shape[0] - 1
    tot = np.zeros(S, values.dtype)
    cnt = np.zeros(S, np.int64)
    for i in range(S):
        t = tot[i]
        for j in range(ptr[i], ptr[i + 1]):
            t += values[j]
            cnt[i] += flags[j]
        tot[i] = t
    return tot, cnt


@nb.njit(inline="always")
def _f32(cost):
    """A -ln weight as KenLM's float32 log10 value."""
    return np.float32(-cost / LN10)


@nb.njit(cache=True)
def _kenlm_sums(ptr, labels, word_state, start, T, mask, L, back, back_cost, final, max_back, context):
    """Each word's log10 probability in KenLM's float32 arithmetic (:attr:`WordScores.log10prob32`).

    Walks each sentence again along the states the scoring walk recorded
    (``word_state``: the state whose arc or final weight served each entry,
    laid out as :class:`WordScores`): from the current state down its
    failure chain to that state, the chain's backoff weights are added to the
    arc's (or final) weight shortest context first, in float32.
    """
    out = np.full(word_state.shape[0], -np.inf, np.float32)
    chain = np.zeros(max_back + 1, np.float32)
    for i in range(ptr.shape[0] - 1):
        r = start
        o = ptr[i] + i if context else ptr[i]
        for p in range(ptr[i], ptr[i + 1] + (1 if context else 0)):
            q = word_state[o]
            if q < 0:
                break
            k = 0
            while r != q and k <= max_back:
                chain[k] = _f32(back_cost[r])
                r = back[r]
                k += 1
            if r != q:
                break
            if p < ptr[i + 1]:
                row = probe_arc_hash(T, mask, q * L + labels[p])
                if row < 0:
                    break
                v = _f32(T[row, 2])
                r = np.int64(T[row, 1])
            else:
                v = _f32(final[q])
            for j in range(k - 1, -1, -1):
                v += chain[j]
            out[o] = v
            o += 1
    return out


def score_words(model: CompiledLM, text: bytes, sentence_context: bool = True, threads: int = 1) -> WordScores:
    """Per-word scores of UTF-8 text, one sentence per line, tokens split at ASCII whitespace.

    Args:
        model: the compiled LM.
        text: the sentences (a last line without a newline counts).
        sentence_context: start each sentence at ``<s>`` and score ``</s>``
            at its end (KenLM's default); False starts at the empty history
            and scores no ``</s>`` (``query -n``).
        threads: as for :meth:`CompiledLM.walk`.

    Returns:
        :class:`WordScores`; the same figures as ``kenlm.Model.full_scores(
        sentence, bos=sentence_context, eos=sentence_context)``.

    Raises:
        ArgumentError: an :func:`~fsmlearn.lm.model.epsilon_approximation` (its
            sentence probability is a sum over paths, not a product of word scores).
    """
    if model.epsilon:
        raise ArgumentError("per-word scores of an epsilon approximation are not defined (its sentence "
                            "probability is a sum over paths); use CompiledLM.score")
    ptr, labels, _ = model.encode_bytes(text, threads)
    r = model.walk(ptr, labels, final=sentence_context, threads=threads, per_word=True,
                   null_context=not sentence_context)
    S = ptr.size - 1
    ids = labels.astype(np.int64) - 1
    if sentence_context:
        wptr = ptr + np.arange(S + 1)
        word_id = np.empty(ids.size + S, np.int64)
        is_end = np.zeros(ids.size + S, bool)
        is_end[wptr[1:] - 1] = True
        word_id[~is_end] = ids
        eos = model.word_id(EOS)
        word_id[is_end] = eos
    else:
        wptr, word_id, is_end = ptr, ids, np.zeros(ids.size, bool)
    state = r.word_state
    hist = np.asarray(model.hist_len)
    length = np.where(state >= 0, hist[np.maximum(state, 0)].astype(np.int64) + 1, 0)
    oov = (word_id == model.unk_label - 1) & ~is_end
    with np.errstate(invalid="ignore"):
        lp = -r.word_weight / LN10
    t = model.tables
    lp32 = _kenlm_sums(ptr, labels, state, 0 if not sentence_context else t.start, t.arcs, t.mask, t.num_labels,
                       t.back, t.back_cost, t.final, t.max_back, sentence_context)
    return WordScores(wptr, word_id, lp, length, oov, lp32)


def kenlm_float(x: float, single: bool = True) -> str:
    """``x`` as KenLM's query writes it: the shortest digits that give back the float32
    (``single``) or float64 value, fixed notation for decimal exponents -6..20, else
    ``1.5e-7``; no trailing ``.0``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "-inf" if x < 0 else "inf"
    s = np.format_float_scientific(np.float32(x) if single else np.float64(x), unique=True, trim="-")
    return _from_scientific(s)


def _from_scientific(s: str) -> str:
    sign = ""
    if s.startswith("-"):
        sign, s = "-", s[1:]
    mant, _, e = s.partition("e")
    exp = int(e)
    digits = mant.replace(".", "")
    if digits.strip("0") == "":
        return sign + "0"
    if -6 <= exp < 21:
        if exp < 0:
            return sign + "0." + "0" * (-exp - 1) + digits
        if len(digits) <= exp + 1:
            return sign + digits + "0" * (exp + 1 - len(digits))
        return sign + digits[:exp + 1] + "." + digits[exp + 1:]
    return sign + digits[0] + ("." + digits[1:] if len(digits) > 1 else "") + "e" + str(exp)


def _floats32(a: np.ndarray) -> list[str]:
    """kenlm_float of many values: numpy's shortest float32 strings, fixed up where they differ."""
    out = np.asarray(a, np.float32).astype(str).tolist()
    for i, s in enumerate(out):
        if s.endswith(".0"):
            out[i] = s[:-2] if s not in ("-0.0", "0.0") else "0"
        elif "e" in s or "n" in s:
            out[i] = kenlm_float(float(a[i]))
    return out


def kenlm_ids(model: CompiledLM, word_id: np.ndarray) -> np.ndarray:
    """KenLM's vocabulary ids of the model's word ids: ``<unk>`` is 0 and the other words
    are numbered from 1 in the order of the ARPA file's 1-grams (KenLM's probing
    vocabulary; so ``<s>`` = 1 and ``</s>`` = 2 in a file lmplz wrote, whatever the
    order of fsmlearn's own files)."""
    ids = np.asarray(word_id, np.int64)
    unk = model.unk_label - 1
    return np.where(ids == unk, 0, np.where(ids < unk, ids + 1, ids))


def stream_blocks(inp, block: int = 1 << 24):
    """Blocks of whole lines (a last line without a newline too) of a binary stream."""
    rest = b""
    while True:
        chunk = inp.read(block)
        data = rest + chunk
        if chunk:
            cut = data.rfind(b"\n") + 1
            data, rest = data[:cut], data[cut:]
        if data:
            yield data
        if not chunk:
            return


def score_blocks(model: CompiledLM, blocks, sentence_context: bool = True, threads: int = 1, emit=None) -> dict:
    """Score blocks of whole lines and sum what KenLM's ``query`` sums.

    Args:
        model: the compiled LM.
        blocks: an iterable of bytes, each holding whole lines.
        sentence_context: as for :func:`score_words`.
        threads: as for :meth:`CompiledLM.walk`.
        emit: optional callable(block, :class:`WordScores`, totals, oovs) given
            each block's scores (the totals float32 as KenLM adds them).

    Returns:
        dict with ``sentences``, ``tokens`` (``</s>`` included), ``oovs``,
        ``log10prob`` (KenLM's: float32 per line, the lines added in float64),
        ``perplexity`` (KenLM's "including OOVs": 10 ** (-log10prob / tokens)) and
        ``perplexity_excluding_oovs`` (10 ** (-(log10prob - the OOV tokens' log10
        probabilities) / (tokens - oovs))), NaN where the count is 0 (as KenLM).
    """
    tot = tot_oov = 0.0
    n_tok = n_oov = n_sent = 0
    for data in blocks:
        ws = score_words(model, data, sentence_context, threads)
        # KenLM's figures: float32 words added in float32 per line, the lines in float64
        totals, oovs = ws.sentence_totals(float32=True)
        n_sent += ws.num_sentences
        n_tok += int(ws.ptr[-1])
        n_oov += int(oovs.sum())
        tot += math.fsum(totals.tolist())
        tot_oov += math.fsum(ws.log10prob32[ws.oov].tolist())
        if emit is not None:
            emit(data, ws, totals, oovs)
    return {"sentences": n_sent, "tokens": n_tok, "oovs": n_oov, "log10prob": tot,
            "perplexity": 10 ** (-tot / n_tok) if n_tok else math.nan,
            "perplexity_excluding_oovs": 10 ** (-(tot - tot_oov) / (n_tok - n_oov)) if n_tok > n_oov else math.nan}


def summary_lines(summary: dict) -> str:
    """KenLM query's summary (``-v summary``): the two perplexities, OOVs and tokens."""
    return (f"Perplexity including OOVs:\t{kenlm_float(summary['perplexity'], False)}\n"
            f"Perplexity excluding OOVs:\t{kenlm_float(summary['perplexity_excluding_oovs'], False)}\n"
            f"OOVs:\t{summary['oovs']}\nTokens:\t{summary['tokens']}\n")


def write_query(model: CompiledLM, inp, out, sentence_context: bool = True, verbosity: str = "word",
                threads: int = 1, block: int = 1 << 24) -> dict:
    """Score the lines of a binary stream and write KenLM ``query``'s output to ``out`` (binary).

    Args:
        model: the compiled LM.
        inp: a binary file object (one sentence per line).
        out: a binary file object.
        sentence_context: as for :func:`score_words` (False: ``query -n``).
        verbosity: ``"word"`` (each word, each sentence's total, the summary),
            ``"sentence"`` (totals only) or ``"summary"``.
        threads: as for :meth:`CompiledLM.walk`.
        block: bytes read at a time (whole lines are scored together).

    Returns:
        the summary of :func:`score_blocks`.
    """
    if verbosity not in VERBOSITY:
        raise ArgumentError(f"verbosity must be one of {', '.join(VERBOSITY)}; got {verbosity!r}")
    eos = int(kenlm_ids(model, [model.word_id(EOS)])[0])

    def emit(data, ws, totals, oovs):
        out.write(_render(data, ws, kenlm_ids(model, ws.word_id), totals, oovs, eos, verbosity == "word",
                          sentence_context))

    summary = score_blocks(model, stream_blocks(inp, block), sentence_context, threads,
                           emit if verbosity != "summary" else None)
    if verbosity != "sentence":
        out.write(summary_lines(summary).encode())
    return summary


def _render(data: bytes, ws: WordScores, word_ids, totals, oovs, eos: int, words: bool,
            sentence_context: bool) -> bytes:
    """The query lines of one block of text (``data``, whole lines) and its scores (``word_ids``:
    the ids to print)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    tot_s = _floats32(totals)
    oov_s = oovs.tolist()
    if not words:
        return "".join(f"Total: {t} OOV: {o}\n" for t, o in zip(tot_s, oov_s)).encode()
    probs = _floats32(ws.log10prob32)
    ids = word_ids.tolist()
    lens = ws.ngram_length.tolist()
    ptr = ws.ptr.tolist()
    parts = []
    for i, line in enumerate(lines):
        p = ptr[i]
        toks = line.split()
        for t in toks:
            parts.append(b"%s=%d %d %s\t" % (t, ids[p], lens[p], probs[p].encode()))
            p += 1
        if sentence_context:
            parts.append(b"</s>=%d %d %s\t" % (eos, lens[p], probs[p].encode()))
        parts.append(b"Total: %s OOV: %d\n" % (tot_s[i].encode(), oov_s[i]))
    return b"".join(parts)
