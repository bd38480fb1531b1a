"""Hidden Markov model taggers: the model, its parameters and its transducer.

A first-order (``order=2``, bigram) or second-order (``order=3``, trigram)
HMM over T tags and a vocabulary of V words (word id V is the unknown word)
compiles itself into machines of layer 1 and is decoded and trained with the
generic algorithms of layer 3; the tag package holds no dynamic programme of
its own (Viterbi is :func:`fsmlearn.algo.best_path`, expected counts are
:func:`fsmlearn.algo.forward_backward`; Jurafsky and Martin, ch. 8 for the
HMM itself).

* :meth:`HMM.tagger_transducer` is the word:tag transducer whose states are
  tag histories (``<s>`` and the previous tag, or the previous two tags); an
  arc ``h --w:t--> h'`` weighs ``-ln p(t | h) - ln p(w | t)`` and a state's
  final weight is ``-ln p(</s> | h)``.  The tagging lattice of a sentence is
  the composition of the sentence's acceptor with it (Mohri, Pereira and
  Riley 2002, section 4); :mod:`fsmlearn.tag.lattice` builds that
  composition directly for many sentences at once.
* :meth:`HMM.from_counts` is the closed-form M-step (transition smoothing in
  :mod:`fsmlearn.tag.smoothing`); :meth:`HMM.save` and :meth:`HMM.load` are
  :mod:`fsmlearn.tag.hmm_io`.

Conventions of the arrays (natural logs, ``-inf`` = probability zero)::

    log_trans   [T+1, T+1]        ln p(t | t_prev); row T = <s>, column T = </s>,
                                  [T, T] = -inf (no empty sentence)
    log_trans3  [T+1, T+1, T+1]   ln p(t | t_prevprev, t_prev) (order 3), the same
                                  boundary convention, [:, T, T] = -inf
    log_emit    [T, V+1]          ln p(word | t); column V = the unknown word

Public names: HMM, UNK, EPS.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ModelError
from ..fsm.machine import Machine
from ..fsm.symbols import SymbolTable
from .hmm_io import load_hmm, save_hmm
from .oov_tags import OovTags
from .smoothing import parse_smoothing, transition_probs
from .unknown import SuffixModel

__all__ = ["HMM", "UNK", "EPS"]

UNK = "<unk>"
EPS = "<eps>"
_ROW_TOL = 1e-6


def _logsumexp_rows(x: np.ndarray) -> np.ndarray:
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(under="ignore"):
        return (np.log(np.sum(np.exp(x - m), axis=-1)) + m[..., 0])


def _check_log_array(name: str, a, shape) -> np.ndarray:
    a = np.asarray(a)
    if a.shape != shape:
        raise ModelError(f"{name} has shape {a.shape}; expected {shape}")
    if not np.issubdtype(a.dtype, np.floating):
        raise ModelError(f"{name} has dtype {a.dtype}; expected float64")
    a = np.ascontiguousarray(a, dtype=np.float64)
    bad = np.flatnonzero(np.isnan(a) | (a == np.inf) | (a > 1e-9))
    if bad.size:
        idx = np.unravel_index(bad[0], shape)
        raise ModelError(f"{name}{list(map(int, idx))} = {a.flat[bad[0]]!r} is not a log probability")
    return a


def _check_rows(name: str, a: np.ndarray) -> None:
    s = _logsumexp_rows(a)
    bad = np.flatnonzero(np.abs(np.exp(s) - 1.0) > _ROW_TOL)
    if bad.size:
        idx = np.unravel_index(bad[0], s.shape)
        raise ModelError(f"row {list(map(int, idx))} of {name} sums to {float(np.exp(s.flat[bad[0]]))!r}, "
                         "not 1")


class HMM:
    """A bigram or trigram HMM tagger.

    Args:
        tags: the T tag names.
        vocab: the V known words (word id i is ``vocab[i]``, id V unknown).
        log_trans: float64 [T+1, T+1], see the module docstring.
        log_emit: float64 [T, V+1].
        order: 2 (bigram) or 3 (trigram).
        log_trans3: float64 [T+1, T+1, T+1] for order 3.
        unknown: an optional :class:`~fsmlearn.tag.unknown.SuffixModel`
            refining the unknown-word column for each unknown word.
        tagdict: optional tag dictionary restricting the tags of words
            outside the vocabulary (a model trained by EM under it): a
            :class:`~fsmlearn.data.tagsets.TagDictionary`, a ``(tagset,
            min_count)`` pair naming one (:func:`fsmlearn.data.tagsets.tag_dictionary`),
            or an :class:`~fsmlearn.tag.oov_tags.OovTags`.  The model keeps (and saves) only what
            concerns unknown words: the entries of the words outside its
            vocabulary and the open-class tags, so tagging needs no corpus.
        check: validate shapes, values and row sums.

    Attributes:
        tags, vocab, order, log_trans, log_emit, log_trans3, unknown,
        tagdict (an :class:`~fsmlearn.tag.oov_tags.OovTags` or None).

    Raises:
        ModelError: a wrong shape, a NaN or positive log, a row that does not
            sum to one, duplicate tags or words.
    """

    def __init__(self, tags: Sequence[str], vocab: Sequence[str], log_trans, log_emit, *, order: int = 2,
                 log_trans3=None, unknown: SuffixModel | None = None, tagdict=None, check: bool = True):
        self.tags = tuple(str(t) for t in tags)
        self.vocab = tuple(vocab)
        if order not in (2, 3):
            raise ModelError(f"order must be 2 or 3, got {order!r}")
        self.order = int(order)
        T, V = len(self.tags), len(self.vocab)
        if T < 1:
            raise ModelError("an HMM needs at least one tag")
        if check:
            if len(set(self.tags)) != T:
                raise ModelError("duplicate tags in " + repr(self.tags))
            if len(set(self.vocab)) != V:
                raise ModelError("duplicate words in the vocabulary")
            log_trans = _check_log_array("log_trans", log_trans, (T + 1, T + 1))
            log_emit = _check_log_array("log_emit", log_emit, (T, V + 1))
            if log_trans[T, T] != -np.inf:
                raise ModelError(f"log_trans[{T}, {T}] (<s> -> </s>) = {log_trans[T, T]!r}; must be -inf")
            _check_rows("log_trans", log_trans)
            _check_rows("log_emit", log_emit)
            if order == 3:
                if log_trans3 is None:
                    raise ModelError("an order-3 HMM needs log_trans3")
                log_trans3 = _check_log_array("log_trans3", log_trans3, (T + 1, T + 1, T + 1))
                if np.any(log_trans3[:, T, T] != -np.inf):
                    raise ModelError("log_trans3[:, T, T] (<s> -> </s>) must be -inf")
                _check_rows("log_trans3", log_trans3)
        else:
            log_trans = np.ascontiguousarray(log_trans, dtype=np.float64)
            log_emit = np.ascontiguousarray(log_emit, dtype=np.float64)
            if log_trans3 is not None:
                log_trans3 = np.ascontiguousarray(log_trans3, dtype=np.float64)
        if order == 2:
            log_trans3 = None
        self.log_trans = log_trans
        self.log_emit = log_emit
        self.log_trans3 = log_trans3
        self.unknown = unknown
        self._cache: dict = {}
        self.tagdict = OovTags.make(tagdict, self) if tagdict is not None else None

    # ------------------------------------------------------------ basics
    @property
    def T(self) -> int:
        """Number of tags."""
        return len(self.tags)

    @property
    def V(self) -> int:
        """Number of known words (the unknown word has id V)."""
        return len(self.vocab)

    @property
    def trans(self) -> np.ndarray:
        """The transition array of the model's order: log_trans or log_trans3."""
        return self.log_trans3 if self.order == 3 else self.log_trans

    def __repr__(self) -> str:
        return (f"HMM(order={self.order}, {self.T} tags, {self.V} words"
                f"{', suffix model' if self.unknown is not None else ''}"
                f"{', tag dictionary ' + self.tagdict.name if self.tagdict else ''})")

    def _cached(self, key, build):
        v = self._cache.get(key)
        if v is None:
            v = self._cache[key] = build()
        return v

    def transition_weights(self, real: bool) -> np.ndarray:
        """The transition scores as flat arc weights (built once per semiring):
        float64, :attr:`trans` raveled: probabilities
        when ``real`` (real semiring), else negated log-probabilities (tropical)."""
        return self._cached(("trans_w", real),
                            lambda: (np.exp(self.trans) if real else -self.trans).ravel().copy())

    @property
    def word_index(self) -> dict:
        """dict word -> id (built once)."""
        return self._cached("word_index", lambda: {w: i for i, w in enumerate(self.vocab)})

    @property
    def tag_index(self) -> dict:
        return self._cached("tag_index", lambda: {t: i for i, t in enumerate(self.tags)})

    def word_symbols(self) -> SymbolTable:
        """Input symbols: 0 ``<eps>``, word id i -> key i+1, ``<unk>`` -> V+1.

        When ``<unk>`` is itself a vocabulary word (a tagger trained on an
        LM's vocabulary), the out-of-vocabulary symbol is ``<oov>`` instead."""
        def build():
            oov = UNK if UNK not in self.word_index else "<oov>"
            return SymbolTable([EPS, *self.vocab, oov], name="words")
        return self._cached("isyms", build)

    def tag_symbols(self) -> SymbolTable:
        """Output symbols: 0 ``<eps>``, tag id t -> key t+1."""
        return self._cached("osyms", lambda: SymbolTable([EPS, *self.tags], name="tags"))

    # ------------------------------------------------------------ estimation
    @classmethod
    def from_counts(cls, tags: Sequence[str], vocab: Sequence[str], trans_counts, emit_counts, *,
                    allowed=None, smoothing=None, unknown: SuffixModel | None = None,
                    tagdict=None) -> "HMM":
        """The closed-form M-step: normalised (expected or observed) counts.

        Args:
            tags: T tag names.
            vocab: V words.
            trans_counts: float [T+1, T+1] bigram counts (row = previous tag,
                T = ``<s>`` / ``</s>``), or [T+1, T+1, T+1] trigram counts for
                an order-3 model (its lower orders are its marginals).
            emit_counts: float [T, V+1] counts of (tag, word); column V holds
                the unknown word's count (e.g. the hapaxes, see
                :mod:`fsmlearn.tag.train`).
            allowed: optional bool [V+1, T]: the tags each word may take; the
                other emissions get -inf.
            smoothing: transitions only.  None or ``"none"``: relative
                frequencies; a number ``a`` (or ``"add:a"``): add ``a`` to every
                possible transition; ``"interpolate"``: deleted interpolation of
                the unigram, bigram (and trigram) relative frequencies with
                TnT's weights (Brants 2000, section 2.2).  A history (row)
                with no count gets the uniform distribution (ML, add) or the
                lower orders (interpolation).  Emission rows are relative
                frequencies over the allowed entries; a tag with no count emits
                uniformly over its allowed words.
            unknown: optional suffix model kept on the HMM.
            tagdict: optional tag dictionary for unknown words (see :class:`HMM`).

        Returns:
            An :class:`HMM` (order 2 or 3 by the shape of ``trans_counts``).

        Raises:
            ModelError: shapes, negative or non-finite counts, a bad smoothing.
        """
        T, V = len(tags), len(vocab)
        tc = np.asarray(trans_counts, dtype=np.float64)
        ec = np.array(emit_counts, dtype=np.float64)
        if tc.shape not in ((T + 1, T + 1), (T + 1, T + 1, T + 1)):
            raise ModelError(f"trans_counts has shape {tc.shape}; expected {(T + 1, T + 1)} or "
                             f"{(T + 1, T + 1, T + 1)}")
        if ec.shape != (T, V + 1):
            raise ModelError(f"emit_counts has shape {ec.shape}; expected {(T, V + 1)}")
        for name, c in (("trans_counts", tc), ("emit_counts", ec)):
            if not np.all(np.isfinite(c)) or np.any(c < 0):
                raise ModelError(f"{name} must be finite and >= 0")
        order = tc.ndim
        kind, add = parse_smoothing(smoothing)
        if allowed is not None:
            allowed = np.asarray(allowed, dtype=bool)
            if allowed.shape != (V + 1, T):
                raise ModelError(f"allowed has shape {allowed.shape}; expected {(V + 1, T)}")
            ok = allowed.T
            if not np.all(ok.any(axis=1)):
                t = int(np.flatnonzero(~ok.any(axis=1))[0])
                raise ModelError(f"tag {tags[t]!r} may emit no word under the allowed mask")
            ec[~ok] = 0.0
        else:
            ok = np.ones((T, V + 1), bool)
        # emissions
        tot = ec.sum(axis=1, keepdims=True)
        uni = ok / ok.sum(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            pe = np.where(tot > 0, ec / np.where(tot > 0, tot, 1.0), uni)
            log_emit = np.log(pe)
        # transitions
        p2, p3 = transition_probs(tc, kind, add, T)
        with np.errstate(divide="ignore"):
            lt = np.log(p2)
            lt3 = None if p3 is None else np.log(p3)
        return cls(tags, vocab, lt, log_emit, order=order, log_trans3=lt3, unknown=unknown, tagdict=tagdict)

    # ------------------------------------------------------------ files
    def save(self, path) -> None:
        """Save as ``.npz`` (format ``fsmlearn-hmm``), atomically (:func:`fsmlearn.tag.hmm_io.save_hmm`).

        Args:
            path: the file name (any suffix).
        """
        save_hmm(self, path)

    @classmethod
    def load(cls, path) -> "HMM":
        """Load a model written by :meth:`save`, validating everything
        (:func:`fsmlearn.tag.hmm_io.load_hmm`).

        Raises:
            ModelFormatError: missing or unreadable file, not a zip, not an
                fsmlearn HMM, another version, a missing array, a wrong shape or
                dtype, NaN or rows that do not sum to one (the message names
                the file and the problem).
        """
        return load_hmm(path, cls)

    # ------------------------------------------------------------ machines
    def tagger_transducer(self) -> Machine:
        """The word:tag transducer (log semiring) whose states are tag histories.

        Order 2: state 0 is ``<s>``, state 1+t follows tag t.  Order 3: state
        0 is (``<s>``, ``<s>``), 1+b is (``<s>``, b) and 1+T+a*T+b is (a, b).
        An arc ``h --w:t--> h'`` for every word w (key w+1; ``<unk>`` is V+1)
        and tag t with p(w | t) > 0 weighs ``-ln p(t | h) - ln p(w | t)``; a
        state's final weight is ``-ln p(</s> | h)``.  Symbol tables:
        :meth:`word_symbols`, :meth:`tag_symbols`.
        """
        T, V = self.T, self.V
        le = self.log_emit
        et, ew = np.nonzero(np.isfinite(le))
        elp = le[et, ew]
        if self.order == 2:
            hist = np.concatenate([[T], np.arange(T)])                     # state -> history tag
            lt = self.log_trans[hist][:, et]                              # [H, nnz]
            dst_of = 1 + et
            final = -self.log_trans[hist, T]
        else:
            ha = np.concatenate([[T], np.full(T, T), np.repeat(np.arange(T), T)])
            hb = np.concatenate([[T], np.arange(T), np.tile(np.arange(T), T)])
            lt = self.log_trans3[ha, hb][:, et]
            final = -self.log_trans3[ha, hb, T]
            dst_of = None
        H = lt.shape[0]
        w = -(lt + elp[None, :])
        keep = np.isfinite(w)
        src = np.repeat(np.arange(H), et.size).reshape(H, -1)[keep]
        ts = np.broadcast_to(et, (H, et.size))[keep]
        if self.order == 2:
            dst = dst_of[np.broadcast_to(np.arange(et.size), (H, et.size))[keep]]
        else:
            b_of_src = hb[src]
            dst = np.where(b_of_src == T, 1 + ts, 1 + T + b_of_src * T + ts)
        il = np.broadcast_to(ew + 1, (H, et.size))[keep]
        final = np.where(np.isfinite(final), final, np.inf)
        return Machine.from_arcs(H, 0, final, src, dst, il, ts + 1, w[keep], isyms=self.word_symbols(),
                                 osyms=self.tag_symbols(), semiring="log")

    def sentence_acceptor(self, words: Sequence[str]) -> Machine:
        """The straight-line acceptor of one sentence over :meth:`word_symbols`
        (unknown words become ``<unk>``)."""
        ids = self.encode_words(words)
        n = len(ids)
        return Machine.from_arcs(n + 1, 0, {n: 0.0}, np.arange(n), np.arange(1, n + 1), ids + 1,
                                 isyms=self.word_symbols(), semiring="log")

    def encode_words(self, words: Sequence[str]) -> np.ndarray:
        """int32 word ids of a token list (V for unknown words)."""
        idx = self.word_index
        V = self.V
        return np.fromiter((idx.get(w, V) for w in words), dtype=np.int32, count=len(words))

    # ------------------------------------------------------------ emissions
    def emission_csr(self, allowed=None):
        """The nonzero emissions of each word id as CSR arrays (cached without ``allowed``).

        Args:
            allowed: optional bool [V+1, T] further restricting the tags.

        Returns:
            (row_ptr int64 [V+2], row_tag int32 [nnz], row_logp float64 [nnz]):
            the tags of word id w are ``row_tag[row_ptr[w]:row_ptr[w+1]]``
            (ascending) with ``ln p(w | t)``.
        """
        def build(mask=None):
            ok = np.isfinite(self.log_emit.T)
            if mask is not None:
                ok &= mask
            w, t = np.nonzero(ok)
            ptr = np.zeros(self.V + 2, np.int64)
            np.cumsum(np.bincount(w, minlength=self.V + 1), out=ptr[1:])
            return ptr, t.astype(np.int32), np.ascontiguousarray(self.log_emit.T[w, t])
        if allowed is None:
            return self._cached("emission_csr", build)
        allowed = np.asarray(allowed, dtype=bool)
        if allowed.shape != (self.V + 1, self.T):
            raise ModelError(f"allowed has shape {allowed.shape}; expected {(self.V + 1, self.T)}")
        return build(allowed)

    def unknown_scores(self, words: Sequence[str]) -> np.ndarray:
        """ln p(w | t) of unknown words, float64 [len(words), T].

        The unknown-word column, refined by the suffix model (if any) and
        restricted by the tag dictionary (if any).
        """
        base = np.broadcast_to(self.log_emit[:, self.V], (len(words), self.T)).copy()
        if self.unknown is not None and len(words):
            base += self.unknown.log_ratio(words)
        if self.tagdict is not None and len(words):
            base[~self.tagdict.masks(words)] = -np.inf
        base[np.isnan(base)] = -np.inf
        return base
