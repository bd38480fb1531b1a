"""TRF feature templates (Wang, Ou and Tan, Table 2) and the feature set of a training corpus.

A sentence x of length j is padded as y = <s> x_1 ... x_j </s> (padded positions 0..j+1).
A template is a set of offsets o_1 < ... < o_L = 0 with a kind per offset (word ``w`` or
class ``c``); it *fires* at padded position i in 1..j+1 when every i + o lies in 0..j+1,
except that one-token templates do not fire on </s> (their count would be the constant 1:
absorbed by Z_j).  Each firing is the binary feature f_i(x^j, k) of section 3 and the
feature's value f_i(x^j) is its count over positions (position- and length-independent).
Begin and end features are the firings that include <s> or </s> (for characters with
orders 1-3 the f_{i=0,v}, f_{i=end,v}, f_{i=0,vw}, f_{i=end,vw} of section 6, plus the
trigram <s> v </s> of one-letter words).

Types (Table 2): ``w`` / ``c`` n-grams up to ``order`` (default 4), ``ws`` / ``cs``
skipping n-grams (w-3 w0)(w-3 w-2 w0)(w-3 w-1 w0)(w-2 w0), ``wsh`` / ``csh`` (w-4 w0)(w-5 w0),
``cpw`` (c-3 c-2 c-1 w0)(c-2 c-1 w0)(c-1 w0), ``tied``: (c_{-9:-6}, c0) and (w_{-9:-6}, w0),
the skip-bigrams at distances 6 to 9 sharing one parameter per token pair.

A feature is stored as one int64 key: the template id (5 bits) above four 14-bit slots
holding its token (or class) ids left-aligned (unused slots 0), so keys are exact (no
hashing collisions) for ids up to 16,382 (vocabularies up to 16,380 tokens).

Feature sets by name (:data:`FEATURE_PRESETS`): ``paper`` (w+c+ws+cs+wsh+csh+tied, Table 3's
TRFs of this work), ``previous`` (w+c+ws+cs+cpw, Table 3's best TRF of the previous work),
``class`` (w+c) and ``ngram`` (w).

Public names: TEMPLATE_TYPES, FEATURE_PRESETS, resolve_features, Templates, make_templates,
FeatureSet, build_features, Corpus, as_corpus, HOLE, MAX_ID.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from ..errors import ArgumentError
from ..fsm.hashing import hash64, hash_insert, hash_lookup, new_table

#: bits per token id in a key, the largest usable id and the hole marker of conditionals
ID_BITS = 14
HOLE = (1 << ID_BITS) - 1
MAX_ID = HOLE - 1
MAX_SLOTS = 4
#: offset marking an unused slot of a template row
UNUSED = 1
KIND_W, KIND_C = 0, 1

TEMPLATE_TYPES = ("w", "c", "ws", "cs", "wsh", "csh", "cpw", "tied")

#: the feature sets of the paper by name (section 6, Table 3) and two smaller ones
FEATURE_PRESETS = {
    "paper": "w+c+ws+cs+wsh+csh+tied",      # Table 3's 10 TRFs of this work (and sections 6-7's runs)
    "previous": "w+c+ws+cs+cpw",            # Table 3's best TRF of the previous work [21]
    "class": "w+c",                         # word and class n-grams
    "ngram": "w",                           # word n-grams only
}


def resolve_features(types) -> str:
    """The ``+``-joined feature types of a preset name (:data:`FEATURE_PRESETS`) or of types
    given directly (returned as they are)."""
    if isinstance(types, str) and types.strip() in FEATURE_PRESETS:
        return FEATURE_PRESETS[types.strip()]
    return types if isinstance(types, str) else "+".join(types)


@dataclass(frozen=True)
class Templates:
    """Template rows as arrays for numba.

    Attributes:
        names: tuple of str, the feature types in order.
        tid: int64 [R], the template id (the key prefix; the four rows of a tied type share one).
        length: int64 [R], number of slots (1..4).
        offset: int64 [R, 4], offsets (ascending, the last used one 0; unused slots UNUSED).
        kind: int64 [R, 4], KIND_W or KIND_C per slot.
        minoff: int64 [R], the smallest offset.
        label: tuple of str [R], a readable name per row, e.g. ``w-2w-1w0``.
    """
    names: tuple
    tid: np.ndarray
    length: np.ndarray
    offset: np.ndarray
    kind: np.ndarray
    minoff: np.ndarray
    label: tuple

    @property
    def uses_classes(self) -> bool:
        return bool(np.any((self.kind == KIND_C) & (self.offset != UNUSED)))

    @property
    def span(self) -> int:
        """The largest distance back any row looks (history length of the feature acceptor)."""
        return int(-self.minoff.min()) if len(self.minoff) else 0


def _type_rows(t: str, order: int):
    """[(kinds, offsets), ...] for one feature type of Table 2, and whether its rows are tied."""
    if t in ("w", "c"):
        return [((t,) * n, tuple(range(-n + 1, 1))) for n in range(1, order + 1)], False
    if t in ("ws", "cs"):
        k = t[0]
        return [((k, k), (-3, 0)), ((k, k, k), (-3, -2, 0)), ((k, k, k), (-3, -1, 0)), ((k, k), (-2, 0))], False
    if t in ("wsh", "csh"):
        k = t[0]
        return [((k, k), (-4, 0)), ((k, k), (-5, 0))], False
    if t == "cpw":
        return [(("c", "c", "c", "w"), (-3, -2, -1, 0)), (("c", "c", "w"), (-2, -1, 0)), (("c", "w"), (-1, 0))], False
    if t == "tied":
        return [(("c", "c"), (-d, 0)) for d in range(6, 10)] + [(("w", "w"), (-d, 0)) for d in range(6, 10)], True
    raise ArgumentError(f"unknown TRF feature type {t!r}; expected a preset ({', '.join(FEATURE_PRESETS)}) or "
                        f"types among {', '.join(TEMPLATE_TYPES)} joined by +")


def make_templates(types, order: int = 4) -> Templates:
    """The template rows of feature types such as ``"w+c+ws+cs+wsh+csh+tied"`` or of a preset.

    Args:
        types: a ``+``-separated string or a sequence of type names (:data:`TEMPLATE_TYPES`), or
            the name of a preset (:data:`FEATURE_PRESETS`: ``paper`` is Table 3's set).
        order: the largest n of the ``w`` and ``c`` n-gram types (1..4).

    Raises:
        ArgumentError: an unknown type, a repeated type, or ``order`` outside 1..4.
    """
    types = resolve_features(types)
    names = tuple(s.strip() for s in types.split("+") if s.strip())
    if not names:
        raise ArgumentError("no TRF feature types given")
    if len(set(names)) != len(names):
        raise ArgumentError(f"TRF feature types repeated in {'+'.join(names)!r}")
    if not 1 <= int(order) <= MAX_SLOTS:
        raise ArgumentError(f"TRF n-gram order must be 1..{MAX_SLOTS}, got {order!r}")
    rows, tids = [], []
    tid = 0
    for t in names:
        rs, tied = _type_rows(t, int(order))
        if tied:
            # one id per kind: the class rows share one, the word rows another
            for kinds in ("c", "w"):
                for r in rs:
                    if r[0][0] == kinds:
                        rows.append(r)
                        tids.append(tid)
                tid += 1
        else:
            for r in rs:
                rows.append(r)
                tids.append(tid)
                tid += 1
    if tid > 31:
        raise ArgumentError(f"too many TRF templates ({tid}; at most 31)")
    R = len(rows)
    length = np.array([len(o) for _, o in rows], np.int64)
    offset = np.full((R, MAX_SLOTS), UNUSED, np.int64)
    kind = np.zeros((R, MAX_SLOTS), np.int64)
    labels = []
    for r, (ks, os_) in enumerate(rows):
        offset[r, :len(os_)] = os_
        kind[r, :len(ks)] = [KIND_W if k == "w" else KIND_C for k in ks]
        labels.append("".join(f"{k}{o}" for k, o in zip(ks, os_)))
    return Templates(names, np.array(tids, np.int64), length, offset, kind, offset.min(axis=1) if R else
                     np.zeros(0, np.int64), tuple(labels))


@dataclass
class Corpus:
    """Sentences as flat int32 token ids with CSR offsets (no padding).

    Attributes:
        tokens: int32 [T]; ptr: int64 [n+1]; sentence s is tokens[ptr[s]:ptr[s+1]].
    """
    tokens: np.ndarray
    ptr: np.ndarray

    def __len__(self) -> int:
        return len(self.ptr) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.ptr)

    def sentence(self, s: int) -> np.ndarray:
        return self.tokens[self.ptr[s]:self.ptr[s + 1]]


def as_corpus(sentences) -> Corpus:
    """A :class:`Corpus` from a list of int sequences (each non-empty)."""
    lens = np.array([len(s) for s in sentences], np.int64)
    ptr = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    toks = np.concatenate([np.asarray(s, np.int32) for s in sentences]) if len(sentences) else np.zeros(0, np.int32)
    return Corpus(toks.astype(np.int32), ptr)


# ---------------------------------------------------------------------------------------
# kernels: keys of the features that fire in a padded sentence


@nb.njit(cache=True)
def _token(y, cls, p, kind):
    return y[p] if kind == 0 else cls[y[p]]


@nb.njit(cache=True)
def _fires(r, i, n_pad, minoff, length):
    """Whether row r fires at padded position i of a padded sentence of n_pad tokens."""
    if i < 1 or i > n_pad - 1 or i + minoff[r] < 0:
        return False
    if length[r] == 1 and i == n_pad - 1:
        return False
    return True


@nb.njit(cache=True)
def _key(y, cls, i, r, tid, length, offset, kind, hole_slot):
    """The key of row r firing at position i (slot ``hole_slot`` replaced by HOLE; -1: none)."""
    k = tid[r]
    for s in range(length[r]):
        if s == hole_slot:
            t = HOLE
        else:
            t = _token(y, cls, i + offset[r, s], kind[r, s])
        k = (k << ID_BITS) | t
    return k << (ID_BITS * (MAX_SLOTS - length[r]))


@nb.njit(cache=True, inline="always")
def _row_key(y, yc, i, r, tid, length, offset, kind):
    """The key of row r firing at position i of the padded sentence y (yc: its classes)."""
    L = length[r]
    k = tid[r]
    for q in range(L):
        p = i + offset[r, q]
        k = (k << ID_BITS) | (y[p] if kind[r, q] == KIND_W else yc[p])
    return k << (ID_BITS * (MAX_SLOTS - L))


@nb.njit(cache=True)
def _pad(tokens, a, b, bos, eos, y):
    y[0] = bos
    for t in range(a, b):
        y[t - a + 1] = tokens[t]
    y[b - a + 1] = eos
    return b - a + 2


@nb.njit(cache=True)
def _row_range(r, n_pad, minoff, length):
    """The padded positions lo..hi-1 at which row r fires in a sentence of n_pad tokens."""
    lo = max(1, -minoff[r])
    hi = n_pad - 1 if length[r] == 1 else n_pad
    return lo, hi


@nb.njit(cache=True)
def _corpus_keys(tokens, ptr, bos, eos, cls, tid, length, offset, kind, minoff):
    """Every firing key of every sentence (sentence by sentence, row by row, position by
    position), and the per-sentence CSR offsets into them."""
    n = ptr.shape[0] - 1
    R = tid.shape[0]
    kptr = np.zeros(n + 1, np.int64)
    maxlen = 0
    for s in range(n):
        n_pad = ptr[s + 1] - ptr[s] + 2
        maxlen = max(maxlen, n_pad)
        c = 0
        for r in range(R):
            lo, hi = _row_range(r, n_pad, minoff, length)
            if hi > lo:
                c += hi - lo
        kptr[s + 1] = kptr[s] + c
    out = np.empty(kptr[n], np.int64)
    y = np.empty(maxlen, np.int32)
    yc = np.empty(maxlen, np.int32)
    for s in range(n):
        n_pad = _pad(tokens, ptr[s], ptr[s + 1], bos, eos, y)
        for p in range(n_pad):
            yc[p] = cls[y[p]]
        m = kptr[s]
        for r in range(R):
            lo, hi = _row_range(r, n_pad, minoff, length)
            for i in range(lo, hi):
                out[m] = _row_key(y, yc, i, r, tid, length, offset, kind)
                m += 1
    return out, kptr


@nb.njit(cache=True)
def _build_table(keys, tkeys, tvals, mask):
    for f in range(keys.shape[0]):
        hash_insert(tkeys, tvals, mask, keys[f], f)


@nb.njit(cache=True)
def _lookup_all(keys, tkeys, tvals, mask, out):
    """out[k] = the value of keys[k] (-1 if absent).  The keys are visited in the order of
    their table slots (a counting sort on the slot's top 16 bits), so the probes walk the
    table from one end to the other instead of jumping at random: several times faster for
    large tables than looking the keys up in their own order."""
    n = keys.shape[0]
    cap = mask + 1
    shift = 0
    while (cap >> shift) > 65536:
        shift += 1
    nbk = (cap >> shift) + 1
    slot = np.empty(n, np.int64)
    start = np.zeros(nbk + 1, np.int64)
    for i in range(n):
        s = np.int64(hash64(keys[i]) & np.uint64(mask))
        slot[i] = s
        start[(s >> shift) + 1] += 1
    for b in range(nbk):
        start[b + 1] += start[b]
    order = np.empty(n, np.int64)
    for i in range(n):
        b = slot[i] >> shift
        order[start[b]] = i
        start[b] += 1
    for k in range(n):
        i = order[k]
        s = slot[i]
        key = keys[i]
        while True:
            kk = tkeys[s]
            if kk == -1:
                out[i] = -1
                break
            if kk == key:
                out[i] = tvals[s]
                break
            s = (s + 1) & mask


@nb.njit(cache=True)
def _sum_found(lam, idx, kptr, out):
    for s in range(kptr.shape[0] - 1):
        acc = 0.0
        for k in range(kptr[s], kptr[s + 1]):
            if idx[k] >= 0:
                acc += lam[idx[k]]
        out[s] = acc


@nb.njit(cache=True)
def _corpus_scores(tokens, ptr, bos, eos, cls, tid, length, offset, kind, minoff, tkeys, tvals, mask, lam, out):
    """lambda . f(x) of every sentence (features not in the set contribute nothing)."""
    n = ptr.shape[0] - 1
    maxlen = 0
    for s in range(n):
        maxlen = max(maxlen, ptr[s + 1] - ptr[s])
    y = np.empty(maxlen + 2, np.int32)
    R = tid.shape[0]
    for s in range(n):
        n_pad = _pad(tokens, ptr[s], ptr[s + 1], bos, eos, y)
        acc = 0.0
        for i in range(1, n_pad):
            for r in range(R):
                if _fires(r, i, n_pad, minoff, length):
                    f = hash_lookup(tkeys, tvals, mask, _key(y, cls, i, r, tid, length, offset, kind, -1))
                    if f >= 0:
                        acc += lam[f]
        out[s] = acc


@dataclass
class FeatureSet:
    """The features seen in training, their keys and the lookup table.

    Attributes:
        templates: the :class:`Templates`.
        vocab_size: V, the real tokens 0..V-1; <s> is V and </s> is V+1.
        classes: int32 [V+2], the class of each token (<s> and </s> in classes C and C+1).
        n_classes: C, the real classes 0..C-1.
        keys: int64 [d], sorted feature keys; feature i is keys[i].
        table: (keys, vals, mask), the open-addressing table key -> feature index.
    """
    templates: Templates
    vocab_size: int
    classes: np.ndarray
    n_classes: int
    keys: np.ndarray
    table: tuple

    @property
    def bos(self) -> int:
        return self.vocab_size

    @property
    def eos(self) -> int:
        return self.vocab_size + 1

    @property
    def num_features(self) -> int:
        return len(self.keys)

    def _t(self):
        t = self.templates
        return t.tid, t.length, t.offset, t.kind, t.minoff

    def corpus_keys(self, corpus: Corpus):
        """(keys int64 [F], ptr int64 [n+1]): every firing of every sentence."""
        check_corpus(corpus, self.vocab_size)
        return _corpus_keys(corpus.tokens, corpus.ptr, self.bos, self.eos, self.classes, *self._t())

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """int64 feature index of each key (-1 where the key is not a feature)."""
        out = np.empty(len(keys), np.int64)
        _lookup_all(np.ascontiguousarray(keys, np.int64), *self.table, out)
        return out

    def feature_counts(self, corpus: Corpus):
        """(idx int64 [F], ptr int64 [n+1]): the feature index of every firing per sentence
        (firings of unknown features dropped)."""
        keys, kptr = self.corpus_keys(corpus)
        idx = self.lookup(keys)
        ok = idx >= 0
        cs = np.zeros(len(ok) + 1, np.int64)
        np.cumsum(ok, out=cs[1:])
        return idx[ok], cs[kptr]

    def scores(self, corpus: Corpus, lam: np.ndarray) -> np.ndarray:
        """float64 [n]: lambda . f(x) of each sentence (the feature acceptor's path weight):
        every firing's key, looked up in slot order, summed per sentence."""
        keys, kptr = self.corpus_keys(corpus)
        idx = self.lookup(keys)
        out = np.empty(len(corpus))
        _sum_found(np.ascontiguousarray(lam, np.float64), idx, kptr, out)
        return out

    def scores_walk(self, corpus: Corpus, lam: np.ndarray) -> np.ndarray:
        """The same as :meth:`scores`, sentence by sentence: each firing looked up as the
        walk reaches it (the reference for :meth:`scores`)."""
        check_corpus(corpus, self.vocab_size)
        out = np.empty(len(corpus))
        _corpus_scores(corpus.tokens, corpus.ptr, self.bos, self.eos, self.classes, *self._t(), *self.table,
                       np.ascontiguousarray(lam, np.float64), out)
        return out

    def describe(self, f: int) -> str:
        """A readable form of feature f: its template and token (or class) ids."""
        k = int(self.keys[f])
        toks = []
        t = self.templates
        tid = k >> (ID_BITS * MAX_SLOTS)
        r = int(np.flatnonzero(t.tid == tid)[0])
        L = int(t.length[r])
        for s in range(L):
            toks.append((k >> (ID_BITS * (MAX_SLOTS - 1 - s))) & HOLE)
        return f"{t.label[r]}:{','.join(map(str, toks))}"


def check_corpus(corpus: Corpus, vocab_size: int) -> None:
    """Raise ArgumentError for an empty sentence or a token id outside 0..V-1."""
    lens = corpus.lengths
    if len(lens) and lens.min() < 1:
        s = int(np.argmin(lens))
        raise ArgumentError(f"TRF corpus: sentence {s} is empty")
    if len(corpus.tokens):
        lo, hi = int(corpus.tokens.min()), int(corpus.tokens.max())
        if lo < 0 or hi >= vocab_size:
            bad = lo if lo < 0 else hi
            s = int(np.searchsorted(corpus.ptr, int(np.flatnonzero(corpus.tokens == bad)[0]), side="right") - 1)
            raise ArgumentError(f"TRF corpus: sentence {s} has token id {bad} outside 0..{vocab_size - 1}")


def build_features(corpus: Corpus, vocab_size: int, templates: Templates, classes=None,
                   n_classes: int | None = None) -> FeatureSet:
    """The features of ``templates`` that fire in the training ``corpus`` (section 7: only
    features observed in training are used).

    Args:
        corpus: the training sentences (token ids 0..V-1).
        vocab_size: V (at most 16,380: the ids, the two boundary tokens and the hole marker fit
            14 bits).
        templates: from :func:`make_templates`.
        classes: int [V], the class of each token (0..C-1); None puts every token in one class
            (then the class types fire but carry no information).
        n_classes: C (default: max class + 1).

    Raises:
        ArgumentError: V too large, a class id out of range, a bad corpus.
    """
    V = int(vocab_size)
    if not 1 <= V <= MAX_ID - 2:
        raise ArgumentError(f"TRF vocabulary size must be 1..{MAX_ID - 2}, got {vocab_size}")
    check_corpus(corpus, V)
    if classes is None:
        classes = np.zeros(V, np.int32)
    classes = np.asarray(classes)
    if classes.shape != (V,):
        raise ArgumentError(f"TRF classes: expected {V} class ids, got shape {classes.shape}")
    C = int(classes.max()) + 1 if n_classes is None else int(n_classes)
    if classes.min() < 0 or classes.max() >= C or C + 2 > MAX_ID:
        raise ArgumentError(f"TRF classes: ids must be 0..{C - 1} (at most {MAX_ID - 2} classes), "
                            f"got {int(classes.min())}..{int(classes.max())}")
    cls = np.concatenate([classes, [C, C + 1]]).astype(np.int32)
    t = templates
    keys, _ = _corpus_keys(corpus.tokens, corpus.ptr, V, V + 1, cls, t.tid, t.length, t.offset, t.kind, t.minoff)
    keys = np.unique(keys)
    tk, tv, mask = new_table(len(keys))
    _build_table(keys, tk, tv, mask)
    return FeatureSet(t, V, cls, C, keys, (tk, tv, mask))
