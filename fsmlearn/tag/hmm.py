"""Hidden Markov model taggers as weighted transducers.

A first-order (``order=2``, bigram) or second-order (``order=3``, trigram)
HMM over T tags and a vocabulary of V words (word id V is the unknown word)
compiles itself into machines of layer 1 and is decoded and trained with the
generic algorithms of layer 3; this module holds no dynamic programme of its
own (Viterbi is :func:`fsmlearn.algo.best_path`, expected counts are
:func:`fsmlearn.algo.forward_backward`).

* :meth:`HMM.tagger_transducer` is the word:tag transducer whose states are
  tag histories (``<s>`` and the previous tag, or the previous two tags); an
  arc ``h --w:t--> h'`` weighs ``-ln p(t | h) - ln p(w | t)`` and a state's
  final weight is ``-ln p(</s> | h)``.  The tagging lattice of a sentence is
  the composition of the sentence's acceptor with it (Mohri, Pereira and
  Riley 2002, section 4; Jurafsky and Martin, ch. 8 for the HMM itself).
* :func:`lattice` builds that composition directly, for *many* sentences at
  once, as one acyclic machine: the concatenation of the sentence lattices,
  where each sentence's last states lead by ``</s>`` arcs (label epsilon,
  weight ``-ln p(</s> | h)``) to one boundary state that starts the next
  sentence.  Its total weight is the sum of the sentences' ``-ln p(words)``
  and its arc posteriors are the per-sentence posteriors.  States are
  numbered in topological order (every arc goes up), so the engine solves
  it in one flat pass.  A numba kernel writes the CSR arrays from integer
  arrays (sentence offsets, word ids, the allowed tags of each word).
* :func:`viterbi`, :func:`tag_sentences` and :func:`accuracy` decode with
  ``best_path`` on such lattices (a concatenation's best path is the
  concatenation of the sentences' best paths).

Conventions of the arrays (natural logs, ``-inf`` = probability zero)::

    log_trans   [T+1, T+1]        ln p(t | t_prev); row T = <s>, column T = </s>,
                                  [T, T] = -inf (no empty sentence)
    log_trans3  [T+1, T+1, T+1]   ln p(t | t_prevprev, t_prev) (order 3), the same
                                  boundary convention, [:, T, T] = -inf
    log_emit    [T, V+1]          ln p(word | t); column V = the unknown word

Public names: HMM, OovTags, Lattice, build_lattice, lattice, encode_sentences, sentence_lattice,
viterbi, tag_sentences, accuracy, FORMAT, VERSION.
"""

from __future__ import annotations

import functools
import json
import math
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import numba as nb
import numpy as np

from ..algo import best_path
from ..errors import FsmError, ModelError, ModelFormatError
from ..fsm.machine import Machine
from ..fsm.strings import pack_strings, unpack_strings
from ..fsm.symbols import SymbolTable
from .unknown import SuffixModel
from ..fsm.atomic import atomic_write

__all__ = ["HMM", "OovTags", "Lattice", "build_lattice", "lattice", "encode_sentences", "sentence_lattice", "viterbi",
           "tag_sentences", "accuracy", "FORMAT", "VERSION", "UNK", "EPS"]

FORMAT = "fsmlearn-hmm"
VERSION = 1
UNK = "<unk>"
EPS = "<eps>"
_ROW_TOL = 1e-6


# --------------------------------------------------------------------------- model

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
            or an :class:`OovTags`.  The model keeps (and saves) only what
            concerns unknown words: the entries of the words outside its
            vocabulary and the open-class tags, so tagging needs no corpus.
        check: validate shapes, values and row sums.

    Attributes:
        tags, vocab, order, log_trans, log_emit, log_trans3, unknown,
        tagdict (an :class:`OovTags` or None).

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
        kind, add = _parse_smoothing(smoothing)
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
        if order == 2:
            c2 = tc
            c1 = c2.sum(axis=0)
            p2 = _trans_bigram(c2, c1, kind, add, T)
            p3 = None
        else:
            c3 = tc
            c2 = c3.sum(axis=0)
            c1 = c2.sum(axis=0)
            p2 = _trans_bigram(c2, c1, kind, add, T)
            p3 = _trans_trigram(c3, c2, c1, kind, add, T)
        with np.errstate(divide="ignore"):
            lt = np.log(p2)
            lt3 = None if p3 is None else np.log(p3)
        return cls(tags, vocab, lt, log_emit, order=order, log_trans3=lt3, unknown=unknown, tagdict=tagdict)

    # ------------------------------------------------------------ files
    def save(self, path) -> None:
        """Save as ``.npz`` (format ``fsmlearn-hmm``), atomically.

        The arrays go to a temporary file in the same folder, which is
        flushed, fsync'ed and renamed over ``path``: a crash mid-save leaves
        the old file (and no temporary file).

        Args:
            path: the file name (any suffix).
        """
        meta = {"format": FORMAT, "version": VERSION, "order": self.order, "num_tags": self.T,
                "vocab_size": self.V, "tagdict": self.tagdict.name if self.tagdict else None,
                "unknown": self.unknown is not None}
        arrays = {"log_trans": self.log_trans, "log_emit": self.log_emit}
        if self.order == 3:
            arrays["log_trans3"] = self.log_trans3
        for name, strings in (("tags", self.tags), ("vocab", self.vocab)):
            arrays[name + "_blob"], arrays[name + "_offsets"] = pack_strings(strings)
        if self.tagdict is not None:
            arrays["oov_blob"], arrays["oov_offsets"] = pack_strings(self.tagdict.words)
            arrays["oov_mask"] = self.tagdict.mask
            arrays["oov_open"] = self.tagdict.open_mask
        if self.unknown is not None:
            u = self.unknown.to_arrays()
            arrays["unk_suffix_blob"], arrays["unk_suffix_offsets"] = pack_strings(u.pop("unk_suffix"))
            arrays.update(u)
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        atomic_write(path, lambda f: np.savez(f, **arrays))

    @classmethod
    def load(cls, path) -> "HMM":
        """Load a model written by :meth:`save`, validating everything.

        Raises:
            ModelFormatError: missing or unreadable file, not a zip, not an
                fsmlearn HMM, another version, a missing array, a wrong shape or
                dtype, NaN or rows that do not sum to one (the message names
                the file and the problem).
        """
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except FileNotFoundError:
            raise ModelFormatError("no such file", path) from None
        except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as e:
            raise ModelFormatError(f"corrupt or not a model file ({type(e).__name__}: {e})", path) from None
        if "meta" not in arrays:
            raise ModelFormatError("not a fsmlearn HMM (no 'meta' array)", path)
        try:
            meta = json.loads(arrays["meta"].tobytes().decode())
        except (ValueError, UnicodeDecodeError) as e:
            raise ModelFormatError(f"corrupt metadata: {e}", path) from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            got = meta.get("format") if isinstance(meta, dict) else None
            raise ModelFormatError(f"not a fsmlearn HMM (format {got!r}, expected {FORMAT!r})", path)
        if meta.get("version") != VERSION:
            raise ModelFormatError(f"unsupported HMM file version {meta.get('version')!r} "
                                   f"(this fsmlearn reads version {VERSION})", path)

        def need(name, kind, ndim):
            if name not in arrays:
                raise ModelFormatError(f"missing array {name!r}", path)
            a = arrays[name]
            if a.dtype.kind != kind or a.ndim != ndim:
                raise ModelFormatError(f"array {name!r} has dtype {a.dtype} and {a.ndim} dimensions; "
                                       f"expected kind {kind!r} with {ndim}", path)
            return a

        try:
            tags = unpack_strings(need("tags_blob", "u", 1), need("tags_offsets", "i", 1), error=ModelFormatError, path=path)
            vocab = unpack_strings(need("vocab_blob", "u", 1), need("vocab_offsets", "i", 1), error=ModelFormatError, path=path)
            order = meta.get("order")
            T, V = len(tags), len(vocab)
            if meta.get("num_tags") != T or meta.get("vocab_size") != V:
                raise ModelFormatError(f"metadata says {meta.get('num_tags')} tags and {meta.get('vocab_size')} "
                                       f"words; the file holds {T} and {V}", path)
            unknown = None
            if meta.get("unknown"):
                u = {k: arrays[k] for k in ("unk_class", "unk_ptr", "unk_tag", "unk_count", "unk_scalars",
                                             "unk_p_rare") if k in arrays}
                u["unk_suffix"] = unpack_strings(need("unk_suffix_blob", "u", 1), need("unk_suffix_offsets", "i", 1), error=ModelFormatError, path=path)
                _check_unknown_arrays(u, T, path)
                unknown = SuffixModel.from_arrays(T, u)
            tagdict = None
            if meta.get("tagdict") is not None:
                words = unpack_strings(need("oov_blob", "u", 1), need("oov_offsets", "i", 1), error=ModelFormatError, path=path)
                mask = need("oov_mask", "b", 2)
                open_mask = need("oov_open", "b", 1)
                if mask.shape != (len(words), T) or open_mask.shape != (T,):
                    raise ModelFormatError(f"tag dictionary arrays have shapes {mask.shape} and "
                                           f"{open_mask.shape}; expected {(len(words), T)} and {(T,)}", path)
                tagdict = OovTags(str(meta["tagdict"]), words, mask, open_mask)
            return cls(tags, vocab, need("log_trans", "f", 2), need("log_emit", "f", 2), order=order,
                       log_trans3=need("log_trans3", "f", 3) if order == 3 else None, unknown=unknown,
                       tagdict=tagdict)
        except ModelFormatError:
            raise
        except ModelError as e:
            raise ModelFormatError(str(e), path) from None
        except (ValueError, UnicodeDecodeError, TypeError) as e:
            raise ModelFormatError(f"corrupt model arrays: {e}", path) from None

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


class OovTags:
    """The part of a tag dictionary that concerns words outside a model's vocabulary.

    Attributes:
        name: a label, e.g. ``"tag17, min_count 5"``.
        words: the covered words outside the vocabulary.
        mask: bool [len(words), T] their allowed tags.
        open_mask: bool [T] the tags of every other unknown word (open class).
    """

    __slots__ = ("name", "words", "mask", "open_mask", "_index")

    def __init__(self, name: str, words, mask, open_mask):
        self.name = str(name)
        self.words = tuple(words)
        self.mask = np.ascontiguousarray(mask, dtype=bool).reshape(len(self.words), -1)
        self.open_mask = np.ascontiguousarray(open_mask, dtype=bool)
        if self.mask.shape[1] != self.open_mask.shape[0]:
            raise ModelError(f"tag dictionary masks have {self.mask.shape[1]} and {self.open_mask.shape[0]} tags")
        if not self.open_mask.any() or (self.mask.size and not self.mask.any(axis=1).all()):
            raise ModelError("the tag dictionary allows some unknown word no tag")
        self._index = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def make(cls, tagdict, hmm: "HMM") -> "OovTags":
        """From an :class:`OovTags`, a TagDictionary or a ``(tagset, min_count)`` pair."""
        if isinstance(tagdict, OovTags):
            if tagdict.open_mask.shape[0] != hmm.T:
                raise ModelError(f"the tag dictionary has {tagdict.open_mask.shape[0]} tags; the model {hmm.T}")
            return tagdict
        if isinstance(tagdict, (tuple, list)):
            if len(tagdict) != 2:
                raise ModelError(f"tagdict must be (tagset, min_count), got {tagdict!r}")
            tagdict = _tag_dictionary(str(tagdict[0]), int(tagdict[1]))
        if not hasattr(tagdict, "open_class"):
            raise ModelError(f"tagdict must be a TagDictionary, (tagset, min_count) or OovTags, "
                             f"got {type(tagdict).__name__}")
        ti = hmm.tag_index
        open_mask = np.zeros(hmm.T, bool)
        for t in tagdict.open_class:
            if t in ti:
                open_mask[ti[t]] = True
        vocab = hmm.word_index
        words = [w for w in dict.keys(tagdict) if w not in vocab]
        mask = np.zeros((len(words), hmm.T), bool)
        for j, w in enumerate(words):
            for t in tagdict[w]:
                if t in ti:
                    mask[j, ti[t]] = True
        name = f"{getattr(tagdict, 'tagset', '?')}, min_count {getattr(tagdict, 'min_count', '?')}"
        return cls(name, words, mask, open_mask)

    def masks(self, words) -> np.ndarray:
        """bool [len(words), T]: the allowed tags of each (unknown) word."""
        out = np.broadcast_to(self.open_mask, (len(words), self.open_mask.shape[0])).copy()
        for j, w in enumerate(words):
            i = self._index.get(w)
            if i is not None:
                out[j] = self.mask[i]
        return out


def _parse_smoothing(smoothing):
    if smoothing is None or smoothing == "none":
        return "ml", 0.0
    if smoothing in ("interpolate", "interpolation", "deleted-interpolation"):
        return "interp", 0.0
    if isinstance(smoothing, str) and smoothing.startswith("add:"):
        smoothing = smoothing[4:]
    try:
        a = float(smoothing)
    except (TypeError, ValueError):
        raise ModelError(f"unknown smoothing {smoothing!r}; expected None, 'none', a number, 'add:A' "
                         "or 'interpolate'") from None
    if not (a >= 0 and math.isfinite(a)):
        raise ModelError(f"additive smoothing must be a finite number >= 0, got {a!r}")
    return ("add", a) if a > 0 else ("ml", 0.0)


def _normalise_rows(c: np.ndarray, possible: np.ndarray) -> np.ndarray:
    """Rows of c over its last axis, uniform over the possible entries where a row is empty."""
    c = np.where(possible, c, 0.0)
    tot = c.sum(axis=-1, keepdims=True)
    uni = possible / possible.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tot > 0, c / np.where(tot > 0, tot, 1.0), uni)


def _lambdas(counts_list, hist_list, n_total):
    """TnT's deleted interpolation weights.

    For each n-gram of the highest order with count f > 0, the order k whose
    leave-one-out estimate (f_k - 1) / (h_k - 1) is largest gets f.
    counts_list[k] / hist_list[k] are the counts and history counts of order k
    (k = 0 unigram) broadcast to the highest order's shape.
    """
    top = counts_list[-1]
    f = top.ravel()
    pos = f > 0
    cases = []
    for k, (c, h) in enumerate(zip(counts_list, hist_list)):
        c = np.broadcast_to(c, top.shape).ravel()[pos]
        h = np.broadcast_to(h, top.shape).ravel()[pos]
        with np.errstate(divide="ignore", invalid="ignore"):
            cases.append(np.where(h > 1, (c - 1) / np.where(h > 1, h - 1, 1), 0.0))
    best = np.argmax(np.stack(cases[::-1]), axis=0)          # ties go to the higher order
    best = len(cases) - 1 - best
    lam = np.bincount(best, f[pos], minlength=len(cases))
    if lam.sum() <= 0:
        lam = np.ones(len(cases))
    return lam / lam.sum()


def _trans_bigram(c2, c1, kind, add, T):
    possible = np.ones((T + 1, T + 1), bool)
    possible[T, T] = False
    if kind == "ml":
        return _normalise_rows(c2, possible)
    if kind == "add":
        return _normalise_rows(c2 + add, possible)
    p1 = _normalise_rows(c1, np.arange(T + 1) >= 0)                  # unigram over T tags + </s>
    h2 = c2.sum(axis=1, keepdims=True)
    p2 = _normalise_rows(c2, possible)
    lam = _lambdas([c1[None, :], c2], [np.full((1, 1), c1.sum()), h2], c1.sum())
    p = lam[0] * p1[None, :] + lam[1] * np.where(h2 > 0, p2, 0.0)
    p = np.where(h2 > 0, p, p1[None, :])
    return _normalise_rows(p, possible)


def _trans_trigram(c3, c2, c1, kind, add, T):
    possible = np.ones((T + 1, T + 1, T + 1), bool)
    possible[:, T, T] = False
    if kind == "ml":
        return _normalise_rows(c3, possible)
    if kind == "add":
        return _normalise_rows(c3 + add, possible)
    p1 = _normalise_rows(c1, np.ones(T + 1, bool))
    h2 = c2.sum(axis=1)                                               # [T+1] counts of b as history
    p2 = _normalise_rows(c2, possible[0])
    h3 = c3.sum(axis=2)                                               # [T+1, T+1]
    p3 = _normalise_rows(c3, possible)
    lam = _lambdas([c1[None, None, :], c2[None, :, :], c3],
                   [np.full((1, 1, 1), c1.sum()), h2[None, :, None], h3[:, :, None]], c1.sum())
    low = lam[0] * p1[None, None, :] + lam[1] * np.where(h2[None, :, None] > 0, p2[None, :, :], 0.0)
    low_w = lam[0] + lam[1] * (h2[None, :, None] > 0)
    p = np.where(h3[:, :, None] > 0, low + lam[2] * p3, low / low_w)
    return _normalise_rows(np.broadcast_to(p, possible.shape), possible)


def _check_unknown_arrays(u: dict, T: int, path) -> None:
    spec = {"unk_class": ("i", 1), "unk_ptr": ("i", 1), "unk_tag": ("i", 1), "unk_count": ("f", 1),
            "unk_scalars": ("f", 1), "unk_p_rare": ("f", 1)}
    for k, (kind, ndim) in spec.items():
        if k not in u:
            raise ModelFormatError(f"missing array {k!r} of the unknown-word model", path)
        if u[k].dtype.kind != kind or u[k].ndim != ndim:
            raise ModelFormatError(f"array {k!r} has dtype {u[k].dtype}; expected kind {kind!r}", path)
    n = len(u["unk_suffix"])
    ptr = u["unk_ptr"]
    if u["unk_class"].shape != (n,) or ptr.shape != (n + 1,) or ptr[0] != 0 \
            or np.any(np.diff(ptr) < 0) or ptr[-1] != u["unk_tag"].size or u["unk_tag"].size != u["unk_count"].size:
        raise ModelFormatError("the unknown-word model's suffix arrays do not agree in size", path)
    if u["unk_tag"].size and (u["unk_tag"].min() < 0 or u["unk_tag"].max() >= T):
        raise ModelFormatError("the unknown-word model names a tag out of range", path)
    if u["unk_p_rare"].shape != (T,) or u["unk_scalars"].shape != (2,) \
            or not np.all(np.isfinite(u["unk_p_rare"])) or not np.all(np.isfinite(u["unk_count"])):
        raise ModelFormatError("the unknown-word model's distribution or scalars are malformed", path)


@functools.lru_cache(maxsize=4)
def _tag_dictionary(tagset: str, min_count: int):
    from ..data.tagsets import tag_dictionary
    return tag_dictionary(tagset, min_count)


# --------------------------------------------------------------------------- lattice kernels

@nb.njit(cache=True)
def _sizes(ptr, tok_row, row_ptr, order):
    """(states, arcs) of the concatenated lattice; -1 arcs if a token has no tag."""
    n_states = 1
    n_arcs = 0
    for s in range(ptr.shape[0] - 1):
        lo = ptr[s]
        hi = ptr[s + 1]
        if hi == lo:
            continue
        prev_states = 1      # states of the previous position (the boundary)
        prev_k = 1           # tags of the previous position
        for i in range(lo, hi):
            r = tok_row[i]
            k = row_ptr[r + 1] - row_ptr[r]
            if k == 0:
                return i, -1
            n_arcs += prev_states * k
            if order == 2:
                cur = k
            else:
                cur = prev_k * k
            n_states += cur
            prev_states = cur
            prev_k = k
        n_arcs += prev_states
        n_states += 1
    return n_states, n_arcs


@nb.njit(cache=True)
def _fill(ptr, ids, tok_row, row_ptr, row_tag, row_w, trans, T, order, real,
          src_start, dst, il, ol, w, arc_trans, state_tok, state_tag):
    """Write the concatenated lattice (states in topological order, arcs by source).

    trans is [T+1, T+1] (order 2) or [T+1, T+1, T+1] flattened (order 3),
    holding probabilities (real) or costs; row_w likewise.
    """
    T1 = T + 1
    a = 0
    q = 0                                   # the current boundary state
    state_tok[0] = -1
    state_tag[0] = -1
    for s in range(ptr.shape[0] - 1):
        lo = ptr[s]
        hi = ptr[s + 1]
        if hi == lo:
            continue
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
        nq = base                            # the next boundary
        for p in range(n_prev):
            sp = base_prev + p
            src_start[sp] = a
            if order == 2:
                h = row_tag[row_ptr[r_prev] + p] * T1
            else:
                pa = p % k_prev
                ta = row_tag[row_ptr[r_prev] + pa]
                tx = T if r_prev2 < 0 else row_tag[row_ptr[r_prev2] + p // k_prev]
                h = (tx * T1 + ta) * T1
            dst[a] = nq
            il[a] = 0
            ol[a] = 0
            w[a] = trans[h + T]
            arc_trans[a] = h + T
            a += 1
        q = nq
        state_tok[q] = -1
        state_tag[q] = -1
    src_start[q] = a
    src_start[q + 1] = a
    return a


# --------------------------------------------------------------------------- lattices

class Lattice:
    """The concatenated tagging lattice of a batch of sentences.

    Attributes:
        machine: the acyclic :class:`~fsmlearn.fsm.Machine` (input labels word
            id + 1, output labels tag + 1, epsilon on the ``</s>`` arcs);
            state 0 is the start and the last state the only final one.
        arc_trans: int32 [E] flat index of each arc's transition into the
            model's transition array (``hmm.trans.ravel()``).
        state_tok: int64 [Q] token (0..N-1 within the batch) of each state, -1
            for the sentence boundaries.
        state_tag: int32 [Q] tag of each state (the last tag of its history),
            -1 for the boundaries.
        ptr: int64 [S+1] sentence offsets; ids: int32 [N] word ids.
        num_tags: T.
    """

    __slots__ = ("machine", "arc_trans", "state_tok", "state_tag", "ptr", "ids", "num_tags")

    def __init__(self, machine, arc_trans, state_tok, state_tag, ptr, ids, num_tags):
        self.machine = machine
        self.arc_trans = arc_trans
        self.state_tok = state_tok
        self.state_tag = state_tag
        self.ptr = ptr
        self.ids = ids
        self.num_tags = num_tags

    def state_posteriors(self, arc_posteriors: np.ndarray) -> np.ndarray:
        """float64 [Q]: posterior of each state (the sum over its incoming arcs)."""
        return np.bincount(self.machine.dst, arc_posteriors, minlength=self.machine.num_states)

    def position_posteriors(self, arc_posteriors: np.ndarray) -> np.ndarray:
        """float64 [N, T]: posterior probability that token n has tag t."""
        sp = self.state_posteriors(arc_posteriors)
        m = self.state_tok >= 0
        N = self.ids.shape[0]
        out = np.bincount(self.state_tok[m] * self.num_tags + self.state_tag[m], sp[m],
                          minlength=N * self.num_tags)
        return out.reshape(N, self.num_tags)

    def path_tags(self, path) -> np.ndarray:
        """int32 [N]: the tag of each token on a path (from :func:`best_path`)."""
        st = path.states
        st = st[self.state_tok[st] >= 0]
        out = np.empty(self.ids.shape[0], np.int32)
        out[self.state_tok[st]] = self.state_tag[st]
        return out


def _check_ptr_ids(ptr, ids, V):
    ptr = np.ascontiguousarray(ptr, dtype=np.int64)
    ids = np.asarray(ids)
    if ids.dtype != np.int32:
        ids = ids.astype(np.int32)
    ids = np.ascontiguousarray(ids)
    if ptr.ndim != 1 or ptr.size < 1 or ptr[0] != 0 or ptr[-1] != ids.shape[0] or np.any(np.diff(ptr) < 0):
        raise FsmError(f"sentence offsets must rise from 0 to the number of tokens ({ids.shape[0]})")
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) > V):
        raise FsmError(f"word ids must lie in 0..{V} (V is the unknown word), got {int(ids.min())}.."
                       f"{int(ids.max())}")
    return ptr, ids


def build_lattice(hmm: HMM, ptr, ids, csr, *, extra=None, semiring: str = "log",
                  symbols: bool = False) -> Lattice:
    """The concatenated lattice from prepared emission rows (the fast path of EM).

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
        FsmError: a token with no possible tag (the message names it).
    """
    real = semiring == "real"
    if semiring not in ("log", "real"):
        raise FsmError(f"lattice semiring must be 'log' or 'real', got {semiring!r}")
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
    key = ("trans_w", real)
    tw = hmm._cached(key, lambda: (np.exp(hmm.trans) if real else -hmm.trans).ravel().copy())
    row_w = np.exp(row_lp) if real else -row_lp
    n_states, n_arcs = _sizes(ptr, tok_row, row_ptr, hmm.order)
    if n_arcs < 0:
        i = int(n_states)
        wid = int(ids[i])
        word = hmm.vocab[wid] if wid < hmm.V else UNK
        raise FsmError(f"token {i} ({word!r}) has no possible tag under the model")
    if n_states >= 2**31 - 1:
        raise FsmError(f"the lattice has {n_states} states, too many for one machine; use smaller batches")
    src_start = np.empty(n_states + 1, np.int64)
    dst = np.empty(n_arcs, np.int32)
    il = np.empty(n_arcs, np.int32)
    ol = np.empty(n_arcs, np.int32)
    w = np.empty(n_arcs, np.float64)
    arc_trans = np.empty(n_arcs, np.int32)
    state_tok = np.empty(n_states, np.int64)
    state_tag = np.empty(n_states, np.int32)
    _fill(ptr, ids, tok_row, row_ptr, row_tag, row_w, tw, hmm.T, hmm.order, real,
          src_start, dst, il, ol, w, arc_trans, state_tok, state_tag)
    final = np.full(n_states, 0.0 if real else np.inf)
    final[n_states - 1] = 1.0 if real else 0.0
    for x in (src_start, dst, il, ol, w, final):
        x.setflags(write=False)
    m = Machine(start=0, final=final, src_start=src_start, dst=dst, ilabel=il, olabel=ol, weight=w,
                isyms=hmm.word_symbols() if symbols else None, osyms=hmm.tag_symbols() if symbols else None,
                semiring=semiring, check_symbols=False)
    return Lattice(m, arc_trans, state_tok, state_tag, ptr, ids, hmm.T)


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
    """Word-specific emission rows of the unknown tokens (one row per distinct word)."""
    tok = np.flatnonzero(ids == hmm.V)
    if tok.size == 0 or (oov_words is None and hmm.tagdict is None and hmm.unknown is None):
        return None
    if oov_words is None:
        return None
    if len(oov_words) != tok.size:
        raise FsmError(f"{len(oov_words)} unknown words given for {tok.size} tokens with the unknown id")
    distinct = {}
    inv = np.fromiter((distinct.setdefault(w, len(distinct)) for w in oov_words), np.int64, count=tok.size)
    scores = hmm.unknown_scores(list(distinct))
    return tok, scores[inv]


def lattice(hmm: HMM, ptr, ids, *, oov_words=None, allowed=None, semiring: str = "log",
            symbols: bool = False) -> Lattice:
    """The tagging lattice of a batch of sentences: their concatenated
    compositions with :meth:`HMM.tagger_transducer` (see the module docstring).

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
        FsmError: bad offsets or ids, or a token with no possible tag.
    """
    ptr, ids = _check_ptr_ids(ptr, ids, hmm.V)
    return build_lattice(hmm, ptr, ids, hmm.emission_csr(allowed), extra=unknown_rows(hmm, ids, oov_words),
                         semiring=semiring, symbols=symbols)


def sentence_lattice(hmm: HMM, words: Sequence[str], **kwargs) -> Lattice:
    """The lattice of one sentence (a list of words); see :func:`lattice`."""
    ptr, ids, oov = encode_sentences(hmm, [list(words)])
    return lattice(hmm, ptr, ids, oov_words=oov, **kwargs)


# --------------------------------------------------------------------------- decoding

def viterbi(hmm: HMM, ptr, ids, *, oov_words=None, batch_tokens: int = 100_000) -> np.ndarray:
    """The best tag sequence of every sentence, by ``best_path`` on lattices.

    Args:
        hmm, ptr, ids, oov_words: as for :func:`lattice`.
        batch_tokens: tokens per lattice (sentences are never split).

    Returns:
        int32 [N] tag ids.
    """
    ptr, ids = _check_ptr_ids(ptr, ids, hmm.V)
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
        lat = build_lattice(hmm, ptr[s0:s1 + 1] - ptr[s0], sub_ids, csr,
                            extra=unknown_rows(hmm, sub_ids, words))
        out[t0:t1] = lat.path_tags(best_path(lat.machine))
    return out


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


def _gold_mapper(hmm: HMM, gold_tags):
    tags = set(hmm.tags)
    if all(t in tags for t in gold_tags):
        return lambda t: t
    from ..data.tagsets import TAG17_TAGS, to_tag17
    if tags == set(TAG17_TAGS):
        return to_tag17
    missing = sorted(t for t in gold_tags if t not in tags)[:5]
    raise FsmError(f"gold tags {missing} are not tags of the model and cannot be mapped to them")


def accuracy(hmm: HMM, tagged_sentences: Iterable[Sequence[tuple[str, str]]]) -> dict:
    """Tagging accuracy against gold tags.

    Gold tags that are not the model's are mapped with
    :func:`fsmlearn.data.tagsets.to_tag17` when the model has the 17-tag set.

    Args:
        hmm: the model.
        tagged_sentences: lists of (word, gold tag) pairs.

    Returns:
        dict with ``total``, ``known`` and ``unknown`` accuracies (fractions
        in [0, 1]; unknown = words outside ``hmm.vocab``; NaN when there are
        no such tokens) and the token counts ``tokens``, ``known_tokens``,
        ``unknown_tokens``.
    """
    tagged = [list(s) for s in tagged_sentences]
    words = [[w for w, _ in s] for s in tagged]
    gold = [t for s in tagged for _, t in s]
    conv = _gold_mapper(hmm, set(gold))
    ti = hmm.tag_index
    gold_ids = np.fromiter((ti[conv(t)] for t in gold), np.int32, count=len(gold))
    ptr, ids, oov = encode_sentences(hmm, words)
    pred = viterbi(hmm, ptr, ids, oov_words=oov)
    ok = pred == gold_ids
    unk = ids == hmm.V
    n, nu = ok.size, int(unk.sum())

    def frac(a, b):
        return float(a) / b if b else math.nan
    return {"total": frac(ok.sum(), n), "known": frac(ok[~unk].sum(), n - nu),
            "unknown": frac(ok[unk].sum(), nu), "tokens": int(n), "known_tokens": int(n - nu),
            "unknown_tokens": nu}
