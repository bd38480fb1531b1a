"""Training a tagger from n-gram statistics alone: the pieces around n-gram EM.

:func:`setup_from_lm` turns a compiled backoff LM into the n-gram EM problem
(the tagger's vocabulary is the LM's, ``<s>``/``</s>`` excluded; the tag
dictionary gives the allowed tags; theta starts uniform over what the
dictionary allows, as :func:`fsmlearn.tag.em.uniform_hmm` does for corpus
EM).  :func:`train_ngram_em` runs :class:`fsmlearn.tag.ngram.em.NGramEM` and
evaluates each iteration's model like corpus EM does.  Unknown words at
evaluation time take the tag distribution learned for the LM's ``<unk>``
(the n-grams' own stand-in for rare words).

Public names: NGramSetup, setup_from_lm, to_hmm, train_ngram_em.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ...data.tagsets import tag_dictionary, tagset_tags
from ...errors import MachineError
from ...lm.model import BOS, EOS, UNK, CompiledLM
from ..em import dictionary_mask, evaluation_model, log_likelihood, uniform_hmm
from ..evaluate import accuracy
from ..hmm import HMM
from ..lattice import encode_sentences
from .em import NGramEM
from ...algo.tied import TiedStructure

_UNK_FLOOR = 1e-6


@dataclass
class NGramSetup:
    lm: CompiledLM
    tags: tuple
    vocab: tuple          # tagger vocabulary (V words)
    allowed: np.ndarray   # bool [V+1, T]
    cs: TiedStructure
    unk: int              # word id of <unk> in vocab, or -1
    seconds: float        # preparation time (alpha solve included)


def setup_from_lm(lm: CompiledLM, tagset: str = "tag17", tagdict=None, progress=None,
                  device: str = "cpu") -> NGramSetup:
    """Prepare n-gram EM on a compiled LM (solves c's forward values once, on ``device``)."""
    say = progress or (lambda m: None)
    t0 = time.time()
    tags = tagset_tags(tagset)
    if tagdict is None:
        tagdict = tag_dictionary(tagset)
    lv = lm.vocab
    keep = [i for i, w in enumerate(lv) if w not in (BOS, EOS)]
    vocab = tuple(lv[i] for i in keep)
    wid = np.full(len(lv) + 1, -1, np.int64)          # by label = LM word id + 1
    wid[np.array(keep) + 1] = np.arange(len(keep))
    m = lm.machine
    lm.release_pages()      # n-gram EM reads the machine alone: the mapped tables need not stay resident
    arc_word = np.where(m.ilabel > 0, wid[np.maximum(m.ilabel, 0)], -1).astype(np.int32)
    bad = np.flatnonzero((m.ilabel > 0) & (arc_word < 0))
    if bad.size:
        raise MachineError(f"the LM has an arc labelled {lv[m.ilabel[bad[0]] - 1]!r}")
    allowed = dictionary_mask(vocab, tags, tagdict)
    say(f"solving the forward values of c ({m.num_states:,} states, {m.num_arcs:,} arcs)")
    cs = TiedStructure.build(m, arc_word, allowed, tol=1e-9, device=device)
    say(f"cq: {cs.num_params:,} variational parameters, {cs.num_exclusions:,} exclusion arcs; "
        f"alpha solved in {cs.solve_seconds:.1f} s")
    unk = vocab.index(UNK) if UNK in vocab else -1
    return NGramSetup(lm, tags, vocab, allowed, cs, unk, time.time() - t0)


def initial_theta(setup: NGramSetup):
    """Uniform transitions (start -> end included) and uniform allowed emissions."""
    h = uniform_hmm(setup.tags, setup.vocab, setup.allowed)
    lt = h.log_trans.copy()
    T = len(setup.tags)
    lt[T, :] = math.log(1.0 / (T + 1))   # the LM gives empty sentences some mass
    return lt, h.log_emit.copy()


def _transition_probs(log_trans, T: int):
    """Row-normalised transition probabilities without the start -> stop arc (an empty
    sentence); a tag that received no expected transitions (a row of zeros) gets a uniform
    row instead of 0/0, so that the tagger stays a distribution."""
    p = np.exp(log_trans)
    p[T, T] = 0.0
    tot = p.sum(1, keepdims=True)
    empty = tot[:, 0] <= 0.0
    if empty.any():
        p[empty] = 1.0
        p[T, T] = 0.0
        tot = p.sum(1, keepdims=True)
    return p / tot


def to_hmm(setup: NGramSetup, log_trans, log_emit, tagdict=None, singletons=None) -> HMM:
    """The trained tagger: the <unk> word's tags become the unknown-word column.

    With ``singletons`` (bool [V], e.g. the words of count 1 when counts are
    known) the unknown-word column is built as corpus EM builds it
    (:func:`fsmlearn.tag.em.evaluation_model`), for like-for-like comparisons.
    """
    if singletons is not None:
        T = len(setup.tags)
        lt = np.array(log_trans, np.float64)
        p = _transition_probs(lt, T)
        with np.errstate(divide="ignore"):
            h = HMM(setup.tags, setup.vocab, np.log(p), log_emit, order=2, tagdict=tagdict, check=False)
        return evaluation_model(h, singletons, tagdict)
    T = len(setup.tags)
    V = len(setup.vocab)
    pe = np.exp(log_emit)
    pe[:, V] = 0.0
    if setup.unk >= 0:
        pe[:, V] = pe[:, setup.unk]
    # every tag keeps a little unknown-word mass: an out-of-vocabulary word that the
    # dictionary covers may only take its (possibly closed-class) dictionary tags
    pe[:, V] = np.maximum(pe[:, V], _UNK_FLOOR)
    pe /= pe.sum(1, keepdims=True)
    lt = np.array(log_trans, np.float64)
    # the tagger never emits an empty sentence
    p = _transition_probs(lt, T)
    with np.errstate(divide="ignore"):
        return HMM(setup.tags, setup.vocab, np.log(p), np.log(pe), order=2,
                   tagdict=tagdict)


def train_ngram_em(setup: NGramSetup, iterations: int, *, optimizer: str = "vem", eval=None,
                   progress=None, on_record=None, tagdict=None, singletons=None, estep_passes: int = 1,
                   cond: str = "none", heldout=None, device: str = "cpu", scheduler=None, workers=None,
                   memory=None, tmp=None):
    """Run n-gram EM and evaluate each iteration's model.

    ``eval``: tagged sentences for accuracy; ``heldout``: word lists for the
    held-out log-likelihood per token (as corpus EM reports it); ``device``:
    "cpu" or "cuda" (the E-step, the counts and the bound on a CUDA device,
    :mod:`fsmlearn.algo.cuda.tied`); ``scheduler`` (with ``workers``, ``memory``, ``tmp``):
    the passes partitioned over a Dask cluster (:class:`fsmlearn.tag.ngram.em.NGramEM`).

    Returns:
        (final HMM, list of dict records {iteration, bound, accuracy, seconds, ...}).
    """
    say = progress or (lambda m: None)
    lt, le = initial_theta(setup)
    tr = NGramEM(setup.cs, setup.allowed, lt, le, optimizer=optimizer, estep_passes=estep_passes, cond=cond,
                 device=device, scheduler=scheduler, workers=workers, memory=memory, tmp=tmp, progress=progress)
    eval_sents = [list(s) for s in eval] if eval is not None else None
    held_words = [list(s) for s in heldout] if heldout is not None else None
    records = []
    enc = {}

    def cb(rec, trainer):
        out = {"iteration": rec.iteration, "bound": rec.bound, "seconds": rec.seconds}
        h = None
        if eval_sents is not None or held_words is not None:
            h = to_hmm(setup, trainer.log_trans, trainer.log_emit, tagdict, singletons)
        if held_words is not None:
            if "held" not in enc:
                enc["held"] = encode_sentences(h, held_words)
            ptr, ids, oov = enc["held"]
            out["heldout_loglik"] = log_likelihood(h, ptr, ids, oov) / max(int(ids.size), 1)
        if eval_sents is not None:
            a = accuracy(h, eval_sents)
            out.update(accuracy=a["total"], accuracy_known=a["known"], accuracy_unknown=a["unknown"])
        records.append(out)
        say(f"n-gram EM iteration {rec.iteration}: bound {rec.bound:.4f} per sentence, "
            f"{rec.seconds:.2f} s" + (f", accuracy {100 * out['accuracy']:.2f}%" if "accuracy" in out else ""))
        if on_record:
            on_record(out)

    with tr:
        tr.run(iterations, cb)
    return to_hmm(setup, tr.log_trans, tr.log_emit, tagdict, singletons), records
