"""Unsupervised HMM training by EM (Baum-Welch) under a tag dictionary.

The setup of Merialdo (1994), "Tagging English text with a probabilistic
model", Computational Linguistics 20(2), as used by Smith and Eisner (2005)
with the 17-tag set: a bigram (or trigram) HMM whose emissions are
constrained by a tag dictionary (``allowed`` [V+1, T]: a word may only be
emitted by the tags the dictionary lists for it), trained on untagged text.

* **Initialisation** (:func:`uniform_hmm`): uniform transitions (each
  history's row uniform over the T tags and ``</s>``; the ``<s>`` row over
  the T tags) and, for each tag, uniform emissions over the training words
  the dictionary allows it.
* **E-step** (:func:`expected_counts`): the corpus is cut into chunks of
  about ``chunk_tokens`` tokens (whole sentences).  A bigram HMM's chunk is a
  :class:`~fsmlearn.fsm.ChainBatch` (:func:`fsmlearn.tag.lattice.build_chains`:
  a chain of allowed-tag layers per sentence, the transition and emission
  tables as its weights, in the real convention so that no exp/log is taken
  per arc), which the engine solves by its dense-chain schedule
  (:func:`fsmlearn.algo.chain.chain_forward_backward`): every sentence's
  likelihood, and the expected use of each transition and of each (word, tag)
  emission entry, added into the iteration's totals, never writing an arc.  A
  trigram HMM's chunk is a batch of lattices, a machine per sentence
  (:func:`fsmlearn.tag.lattice.build_lattice`), whose arc and final-weight
  posteriors from :func:`~fsmlearn.algo.forward_backward` ``np.bincount`` sums by
  transition index, and a numba scatter adds the state posteriors to the
  emission counts at each state's (tag, word) index.  Memory is bounded by the
  chunk; the corpus itself can be memory-mapped (:meth:`Corpus.load`).
* **M-step**: :meth:`HMM.from_counts` without smoothing (relative
  frequencies), so each iteration cannot lower the training likelihood.
* **Unknown words** at evaluation (:func:`evaluation_model`): the training
  model gives the unknown word (id V) no mass.  For held-out text we derive
  a model whose unknown-word emission is the mass the tag gives to the
  training singletons, ``p(<unk> | t) = sum_{w: c(w)=1} p(w | t)`` (Good-Turing's
  estimate of the unseen mass, floored at 1e-6), the known words' emissions
  scaled by ``1 - p(<unk> | t)``; an unknown word may take only the tags the
  tag dictionary allows it (its entry if it has one, else the open-class
  tags), with that emission, the same for every unknown word.  Transitions
  are mixed with 1e-6 of the uniform distribution so that no held-out tag
  sequence has probability zero.  This is the model :func:`em` evaluates and
  returns.

Public names: Corpus, encode_corpus, dictionary_mask, uniform_hmm,
expected_counts, log_likelihood, evaluation_model, em, EMRecord,
training_mask.
"""

from __future__ import annotations

import array
import json
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numba as nb
import numpy as np

from ..algo import forward_backward, total_weight
from ..algo.chain import chain_forward_backward, chain_total_weight
from ..errors import ArgumentError, ModelError, ModelFormatError
from ..fsm.atomic import atomic_write
from ..fsm.strings import pack_strings, unpack_strings
from .evaluate import accuracy
from .hmm import HMM
from .lattice import build_chains, build_lattice, encode_sentences, sentence_batches, unknown_rows

__all__ = ["Corpus", "encode_corpus", "dictionary_mask", "uniform_hmm", "expected_counts",
           "log_likelihood", "evaluation_model", "em", "EMRecord", "training_mask"]

_CORPUS_FORMAT = "fsmlearn-corpus"
_UNK_FLOOR = 1e-6
_TRANS_FLOOR = 1e-6


# --------------------------------------------------------------------------- corpus

@dataclass
class Corpus:
    """An integer-coded corpus.

    Attributes:
        ptr: int64 [S+1] sentence offsets.
        ids: int32 [N] word ids (``len(vocab)`` = a word outside the vocabulary).
        vocab: tuple of V words.
    """
    ptr: np.ndarray
    ids: np.ndarray
    vocab: tuple

    @property
    def num_tokens(self) -> int:
        return int(self.ids.shape[0])

    @property
    def num_sentences(self) -> int:
        return int(self.ptr.shape[0] - 1)

    def word_counts(self) -> np.ndarray:
        """int64 [V+1]: each word id's count (streamed in chunks)."""
        V = len(self.vocab)
        out = np.zeros(V + 1, np.int64)
        step = 1 << 24
        for i in range(0, self.num_tokens, step):
            out += np.bincount(self.ids[i:i + step], minlength=V + 1)
        return out

    def save(self, folder) -> None:
        """Write ``ptr.npy``, ``ids.npy``, ``vocab.npy`` (packed UTF-8) and
        ``vocab_offsets.npy`` plus ``corpus.json`` into ``folder`` (each file atomically).

        ``corpus.json`` marks a complete corpus: an old one is removed first and the
        new one written last, so that a save that fails half-way (over an old corpus
        too) leaves a folder that :meth:`load` refuses, never a mixture of two corpora.
        """
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "corpus.json").unlink(missing_ok=True)
        blob, offs = pack_strings(self.vocab)
        for name, a in (("ptr", self.ptr), ("ids", self.ids), ("vocab", blob), ("vocab_offsets", offs)):
            atomic_write(folder / f"{name}.npy", lambda f, a=a: np.save(f, np.asarray(a)))
        meta = {"format": _CORPUS_FORMAT, "version": 1, "sentences": self.num_sentences,
                "tokens": self.num_tokens, "vocab_size": len(self.vocab)}
        atomic_write(folder / "corpus.json", lambda f: f.write(json.dumps(meta).encode()))

    @classmethod
    def load(cls, folder, mmap: bool = True) -> "Corpus":
        """Read a corpus written by :meth:`save`; ``ids`` is memory-mapped by default.

        Raises:
            ModelFormatError: a missing or malformed file (named in the message).
        """
        folder = Path(folder)
        try:
            meta = json.loads((folder / "corpus.json").read_text())
        except (OSError, ValueError) as e:
            raise ModelFormatError(f"not a corpus folder ({e})", folder / "corpus.json") from None
        if not isinstance(meta, dict) or meta.get("format") != _CORPUS_FORMAT:
            raise ModelFormatError("not a fsmlearn corpus", folder / "corpus.json")

        def arr(name, mode=None):
            try:
                return np.load(folder / f"{name}.npy", mmap_mode=mode, allow_pickle=False)
            except (OSError, ValueError) as e:
                raise ModelFormatError(f"cannot read ({e})", folder / f"{name}.npy") from None
        ptr = np.asarray(arr("ptr"))
        ids = arr("ids", "r" if mmap else None)
        vocab = tuple(unpack_strings(arr("vocab"), arr("vocab_offsets"), error=ModelFormatError,
                                     path=folder / "vocab.npy"))
        if ptr.dtype != np.int64 or ptr.ndim != 1 or ids.dtype != np.int32 or ids.ndim != 1 \
                or ptr.size < 1 or ptr[0] != 0 or ptr[-1] != ids.shape[0]:
            raise ModelFormatError("ptr.npy and ids.npy do not form a corpus (dtypes int64/int32, "
                                   "offsets from 0 to the number of tokens)", folder)
        return cls(ptr, ids, vocab)


def encode_corpus(sentences: Iterable[Sequence[str]], vocab: Sequence[str] | None = None,
                  progress=None) -> Corpus:
    """Integer-code sentences (lists of words); empty sentences are dropped.

    Args:
        sentences: an iterable of word lists (streamed once).
        vocab: a fixed vocabulary (other words get id ``len(vocab)``); default
            the corpus's own words, most frequent first (ties by first occurrence).
        progress: optional callable receiving progress lines.

    Returns:
        A :class:`Corpus`.
    """
    ids = array.array("i")
    lens = array.array("q")
    t0 = time.time()
    if vocab is not None:
        vocab = tuple(vocab)
        index = {w: i for i, w in enumerate(vocab)}
        V = len(vocab)
        get = index.get
        for s in sentences:
            if s:
                ids.extend([get(w, V) for w in s])
                lens.append(len(s))
                if progress and len(lens) % 200_000 == 0:
                    progress(f"encoded {len(ids):,} tokens ({len(ids) / (time.time() - t0):,.0f}/s)")
        ids_a = np.frombuffer(ids, dtype=np.int32).copy()
    else:
        index = {}
        setd = index.setdefault
        for s in sentences:
            if s:
                ids.extend([setd(w, len(index)) for w in s])
                lens.append(len(s))
                if progress and len(lens) % 200_000 == 0:
                    progress(f"encoded {len(ids):,} tokens ({len(ids) / (time.time() - t0):,.0f}/s)")
        first = np.frombuffer(ids, dtype=np.int32)
        words = list(index)
        counts = np.bincount(first, minlength=len(words))
        order = np.argsort(-counts, kind="stable")
        remap = np.empty(len(words), np.int32)
        remap[order] = np.arange(len(words), dtype=np.int32)
        ids_a = remap[first]
        vocab = tuple(words[i] for i in order)
    ptr = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(np.frombuffer(lens, dtype=np.int64), out=ptr[1:])
    return Corpus(ptr, ids_a, vocab)


# --------------------------------------------------------------------------- model set-up

def dictionary_mask(vocab: Sequence[str], tags: Sequence[str], tagdict) -> np.ndarray:
    """bool [V+1, T]: the tags the dictionary allows each word (row V: open class).

    Args:
        vocab: V words.
        tags: T tag names.
        tagdict: a :class:`~fsmlearn.data.tagsets.TagDictionary` (``d[w]`` never raises).
    """
    ti = {t: i for i, t in enumerate(tags)}
    V, T = len(vocab), len(tags)
    out = np.zeros((V + 1, T), bool)
    open_row = np.zeros(T, bool)
    for t in tagdict.open_class:
        if t in ti:
            open_row[ti[t]] = True
    out[:] = open_row
    for i, w in enumerate(vocab):
        if w in tagdict:
            out[i] = False
            for t in tagdict[w]:
                k = ti.get(t)
                if k is not None:
                    out[i, k] = True
    if not out.any(axis=1).all():
        i = int(np.flatnonzero(~out.any(axis=1))[0])
        raise ModelError(f"the tag dictionary allows word {vocab[i] if i < V else '<unk>'!r} no tag of the model")
    return out


def uniform_hmm(tags: Sequence[str], vocab: Sequence[str], allowed, order: int = 2, tagdict=None) -> HMM:
    """Merialdo's starting point: uniform transitions and, per tag, uniform
    emissions over the training words the dictionary allows it (the unknown
    word, column V, gets none: no training token has it; a tag that may emit
    no training word emits only the unknown word).

    Args:
        tags: T tag names; vocab: V words; allowed: bool [V+1, T].
        order: 2 or 3.
        tagdict: optional tag dictionary kept on the model for unknown words
            (see :class:`~fsmlearn.tag.hmm.HMM`).
    """
    T, V = len(tags), len(vocab)
    allowed = np.asarray(allowed, dtype=bool)
    if allowed.shape != (V + 1, T):
        raise ModelError(f"allowed has shape {allowed.shape}; expected {(V + 1, T)}")
    trans = np.ones((T + 1,) * order)
    mask = training_mask(allowed, V)
    return HMM.from_counts(tags, vocab, trans, mask.T.astype(np.float64), allowed=mask, tagdict=tagdict)


# --------------------------------------------------------------------------- E-step

@nb.njit(cache=True)
def _add_emissions(ec, state_post, state_tok, state_tag, ids, V1):
    """ec[tag * (V+1) + word] += posterior of each lattice state (the sentences' start states skipped).

    A scatter into the [T, V+1] table: ``np.bincount`` with ``minlength=T*(V+1)``
    would allocate and add the whole table once per chunk, which for the
    vocabulary of a 200M-token corpus costs more than the chunk itself.
    """
    for q in range(state_post.shape[0]):
        i = state_tok[q]
        if i >= 0:
            ec[state_tag[q] * V1 + ids[i]] += state_post[q]


def expected_counts(hmm: HMM, corpus: Corpus, allowed=None, chunk_tokens: int = 200_000,
                    progress=None, timings: dict | None = None):
    """Expected transition and emission counts and the log-likelihood.

    Args:
        hmm: the current model.
        corpus: the training corpus (its word ids must be the model's).
        allowed: optional bool [V+1, T] emission mask (the model's zeros
            already exclude disallowed pairs; this restricts further).
        chunk_tokens: tokens per lattice (whole sentences; memory is
            proportional to it).  Measured on Mixed-text (17 tags): 150k-250k
            tokens per chunk is fastest; 1M-token chunks take about twice as
            long, as their arrays (over 32 MB) are mapped afresh by the
            allocator for every chunk and page-faulted in again.
        progress: optional callable receiving progress lines (at most one
            every 10 s, with rate and ETA).
        timings: optional dict; seconds spent building lattices
            (``"lattice"``), in forward-backward (``"forward_backward"``) and
            accumulating counts (``"counts"``) are added to it.

    Returns:
        (trans_counts float64 [T+1]*order, emit_counts float64 [T, V+1],
        loglik float, the natural-log likelihood of the corpus).

    Raises:
        ModelError: the corpus has probability zero under the model (a sentence
            has no tagging).
        ArgumentError: mismatched vocabularies.
    """
    T, V = hmm.T, hmm.V
    if len(corpus.vocab) != V:
        raise ArgumentError(f"the corpus has {len(corpus.vocab)} words; the model {V}")
    csr = hmm.emission_csr(allowed)
    T1 = T + 1
    n_trans = T1 ** hmm.order
    tc = np.zeros(n_trans)
    ec = np.zeros(T * (V + 1))
    chains = hmm.order == 2
    if chains:                  # the dense-chain schedule: counts by table entry, no arcs written
        row_p = np.exp(csr[2])
        entry_counts = np.zeros(csr[1].shape[0])
        tc2 = tc.reshape(T1, T1)
    loglik = 0.0
    ptr = np.asarray(corpus.ptr, dtype=np.int64)
    t_start = last = time.time()
    done = 0
    N = corpus.num_tokens
    for s0, s1 in sentence_batches(ptr, chunk_tokens):
        t0, t1 = int(ptr[s0]), int(ptr[s1])
        c0 = time.perf_counter()
        ids = np.ascontiguousarray(corpus.ids[t0:t1], dtype=np.int32)
        if chains:
            cb = build_chains(hmm, ptr[s0:s1 + 1] - t0, ids, csr, semiring="real", row_weight=row_p)
            c1 = time.perf_counter()
            fb = chain_forward_backward(cb, node_posteriors=False, allow_empty=True, add_to=(tc2, entry_counts))
        else:
            lat = build_lattice(hmm, ptr[s0:s1 + 1] - t0, ids, csr, semiring="real")
            c1 = time.perf_counter()
            fb = forward_backward(lat.batch, allow_empty=True)
        c2 = time.perf_counter()
        dead = np.flatnonzero(~np.isfinite(fb.cost))
        if dead.size:
            b = int(dead[0])
            sent = s0 + int(np.flatnonzero(np.diff(ptr[s0:s1 + 1]) > 0)[b])
            raise ModelError(f"sentence {sent} has probability zero under the model"
                             + (f" ({dead.size} sentences of {s0}..{s1 - 1} have)" if dead.size > 1 else ""))
        loglik -= float(fb.cost.sum())
        if not chains:
            post = fb.posteriors
            tc += lat.transition_counts(post, fb.final_posteriors, n_trans)
            sp = lat.state_posteriors(post)
            _add_emissions(ec, sp, lat.state_tok, lat.state_tag, ids, V + 1)
        if timings is not None:
            c3 = time.perf_counter()
            for k, v in (("lattice", c1 - c0), ("forward_backward", c2 - c1), ("counts", c3 - c2)):
                timings[k] = timings.get(k, 0.0) + v
        done = t1
        if progress is not None and (time.time() - last >= 10.0 and done < N):
            last = time.time()
            dt = last - t_start
            rate = done / max(dt, 1e-9)
            progress(f"E-step {done:,}/{N:,} tokens ({rate:,.0f} tokens/s, ETA {(N - done) / max(rate, 1e-9):.0f} s)")
    if chains:
        c3 = time.perf_counter()
        row_ptr, row_tag = csr[0], csr[1]
        word = np.repeat(np.arange(row_ptr.shape[0] - 1, dtype=np.int64), np.diff(row_ptr))
        ec += np.bincount(row_tag.astype(np.int64) * (V + 1) + word, entry_counts, minlength=T * (V + 1))
        if timings is not None:
            timings["counts"] = timings.get("counts", 0.0) + time.perf_counter() - c3
    return tc.reshape((T1,) * hmm.order), ec.reshape(T, V + 1), loglik


def log_likelihood(hmm: HMM, ptr, ids, oov_words=None, chunk_tokens: int = 200_000) -> float:
    """ln p(sentences) under the model (forward values only).

    Args:
        hmm: the model.
        ptr, ids, oov_words: as for :func:`fsmlearn.tag.lattice.lattice`.
        chunk_tokens: tokens per lattice.

    Returns:
        The natural-log likelihood (-inf if some sentence has probability zero).
    """
    ptr = np.asarray(ptr, dtype=np.int64)
    csr = hmm.emission_csr()
    oov_pos = np.cumsum(np.asarray(ids) == hmm.V) if oov_words is not None else None
    total = 0.0
    for s0, s1 in sentence_batches(ptr, chunk_tokens):
        t0, t1 = int(ptr[s0]), int(ptr[s1])
        sub = np.ascontiguousarray(ids[t0:t1], dtype=np.int32)
        words = None
        if oov_words is not None and t1 > t0:
            k0 = int(oov_pos[t0 - 1]) if t0 else 0
            words = oov_words[k0:int(oov_pos[t1 - 1])]
        try:
            if hmm.order == 2:
                costs = chain_total_weight(build_chains(hmm, ptr[s0:s1 + 1] - t0, sub, csr,
                                                        extra=unknown_rows(hmm, sub, words), semiring="real"))
            else:
                costs = total_weight(build_lattice(hmm, ptr[s0:s1 + 1] - t0, sub, csr,
                                                   extra=unknown_rows(hmm, sub, words), semiring="real").batch)
        except ModelError:                  # a token with no possible tag
            return -math.inf
        total -= float(np.sum(costs))
    return total


def evaluation_model(hmm: HMM, singletons: np.ndarray, tagdict=None) -> HMM:
    """The model with an unknown-word emission learned from the training singletons.

    Args:
        hmm: a model trained by EM (column V unused).
        singletons: bool [V] (or int ids) of the words seen once in training.
        tagdict: tag dictionary restricting unknown words' tags (default the
            model's own).

    Returns:
        A new :class:`HMM` (see the module docstring).
    """
    V = hmm.V
    s = np.asarray(singletons)
    if s.dtype == bool:
        mask = np.zeros(V + 1, bool)
        mask[:V] = s[:V]
    else:
        mask = np.zeros(V + 1, bool)
        mask[s] = True
    pe = np.exp(hmm.log_emit)
    pe[:, V] = 0.0
    known = pe.sum(axis=1, keepdims=True)
    has = known[:, 0] > 0                 # a tag with no training word keeps only the unknown word
    pe = np.where(has[:, None], pe / np.where(has[:, None], known, 1.0), 0.0)
    unk = np.where(has, np.maximum(pe[:, mask].sum(axis=1), _UNK_FLOOR), 1.0)
    pe *= (1.0 - unk)[:, None]
    pe[:, V] = unk
    def mix(lt, last_axis_possible):
        p = np.exp(lt)
        u = last_axis_possible / last_axis_possible.sum(axis=-1, keepdims=True)
        return (1 - _TRANS_FLOOR) * p + _TRANS_FLOOR * u
    T = hmm.T
    poss2 = np.ones((T + 1, T + 1))
    poss2[T, T] = 0
    with np.errstate(divide="ignore"):
        lt = np.log(mix(hmm.log_trans, poss2))
        lt3 = None
        if hmm.order == 3:
            poss3 = np.ones((T + 1,) * 3)
            poss3[:, T, T] = 0
            lt3 = np.log(mix(hmm.log_trans3, poss3))
        le = np.log(pe)
    return HMM(hmm.tags, hmm.vocab, lt, le, order=hmm.order, log_trans3=lt3, unknown=hmm.unknown,
               tagdict=tagdict if tagdict is not None else hmm.tagdict)


# --------------------------------------------------------------------------- EM

@dataclass
class EMRecord:
    """One model of an EM run (iteration 0 is the initial model).

    Attributes:
        iteration: k.
        loglik: training log-likelihood (natural log) of model k.
        loglik_per_token: loglik / tokens.
        heldout_loglik: held-out log-likelihood per token of the evaluation
            model of k (NaN without held-out data).
        accuracy: tagging accuracy (fraction) of that model on the
            evaluation data (NaN without it); accuracy_known /
            accuracy_unknown split it by the training vocabulary.
        seconds: wall time of the EM iteration that produced model k
            (E-step of k-1 plus M-step; 0 for k = 0), evaluation excluded.
        tokens_per_second: training tokens / seconds.
    """
    iteration: int
    loglik: float = math.nan
    loglik_per_token: float = math.nan
    heldout_loglik: float = math.nan
    accuracy: float = math.nan
    accuracy_known: float = math.nan
    accuracy_unknown: float = math.nan
    seconds: float = 0.0
    tokens_per_second: float = math.nan

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def em(hmm0: HMM, corpus: Corpus, allowed, iterations: int, *, eval=None, heldout=None,
       chunk_tokens: int = 200_000, progress=None, on_record=None):
    """Run EM and evaluate every model on the way.

    Args:
        hmm0: the initial model (e.g. :func:`uniform_hmm`).
        corpus: training corpus over ``hmm0.vocab``.
        allowed: bool [V+1, T] emission mask (the tag dictionary).
        iterations: number of EM iterations.
        eval: optional tagged sentences ((word, gold tag) lists) for accuracy;
            gold Penn tags are mapped to a 17-tag model's tags.
        heldout: optional sentences (word lists) for the held-out
            log-likelihood per token.
        chunk_tokens: tokens per lattice.
        progress: optional callable receiving progress lines.
        on_record: optional callable receiving each completed :class:`EMRecord`.

    Returns:
        (final evaluation model, list of :class:`EMRecord` for models 0..iterations).
    """
    say = progress or (lambda msg: None)
    allowed = np.asarray(allowed, dtype=bool)
    counts = corpus.word_counts()
    singletons = counts[:hmm0.V] == 1
    N = corpus.num_tokens
    held = None
    if heldout is not None:
        held = encode_sentences(hmm0, [list(s) for s in heldout])
    eval_sents = [list(s) for s in eval] if eval is not None else None
    records = []

    def evaluate(h, k, seconds):
        rec = EMRecord(iteration=k, seconds=seconds,
                       tokens_per_second=(N / seconds) if seconds > 0 else math.nan)
        ev = evaluation_model(h, singletons)
        if held is not None:
            ptr, ids, oov = held
            rec.heldout_loglik = log_likelihood(ev, ptr, ids, oov, chunk_tokens) / max(int(ids.size), 1)
        if eval_sents is not None:
            a = accuracy(ev, eval_sents)
            rec.accuracy, rec.accuracy_known, rec.accuracy_unknown = a["total"], a["known"], a["unknown"]
        records.append(rec)
        return ev

    hmm = hmm0
    ev = evaluate(hmm, 0, 0.0)
    for k in range(1, iterations + 1):
        t0 = time.time()
        tc, ec, ll = expected_counts(hmm, corpus, allowed, chunk_tokens, progress=progress)
        hmm = HMM.from_counts(hmm.tags, hmm.vocab, tc, ec, allowed=training_mask(allowed, hmm.V),
                              tagdict=hmm.tagdict)
        dt = time.time() - t0
        prev = records[-1]
        prev.loglik, prev.loglik_per_token = ll, ll / max(N, 1)
        if on_record is not None:
            on_record(prev)
        ev = evaluate(hmm, k, dt)
        say(f"iteration {k}/{iterations}: loglik of model {k - 1} {ll:,.1f} ({ll / max(N, 1):.4f}/token), "
            f"{dt:.2f} s ({N / max(dt, 1e-9):,.0f} tokens/s); model {k}: held-out "
            f"{records[-1].heldout_loglik:.4f}/token, accuracy {100 * records[-1].accuracy:.2f}%")
    ll = log_likelihood(hmm, corpus.ptr, corpus.ids, None, chunk_tokens)
    records[-1].loglik, records[-1].loglik_per_token = ll, ll / max(N, 1)
    if on_record is not None:
        on_record(records[-1])
    return ev, records


def training_mask(allowed: np.ndarray, V: int) -> np.ndarray:
    """The allowed mask of the M-step: without the unknown word's row (no training
    token has it), except for tags that may emit no training word (they keep only that row).

    Args:
        allowed: bool [V+1, T] the allowed (word id, tag) pairs.
        V: the vocabulary size (row V is the unknown word).

    Returns:
        bool [V+1, T], a copy.
    """
    m = allowed.copy()
    m[V] = False
    empty = ~m.any(axis=0)
    m[V, empty] = True
    return m
