"""TnT-style unknown-word model: suffix tries with successive abstraction.

Brants (2000), "TnT - a statistical part-of-speech tagger", ANLP, section 2.3:
the tag distribution of an unknown word is read from the suffixes of the rare
words of the training data (words seen at most ``rare_max`` = 10 times),
smoothed by *successive abstraction* over the suffix lengths ``i = 1..m``
(``m`` <= 10 letters, stopping at the longest suffix seen in training)::

    P(t | l_{n-i+1} .. l_n) = (P^(t | l_{n-i+1} .. l_n) + theta P(t | l_{n-i+2} .. l_n)) / (1 + theta)

with ``P^`` the relative frequency among the rare words with that suffix.
TnT sets ``theta`` to the standard deviation of the tags' unconditioned
relative frequencies (0.03 on WSJ-train); we choose it instead by held-out
likelihood (``theta="auto"``: every 10th rare word type is held out of the
counts, and the theta of :data:`THETA_GRID` under which the others' suffixes
best predict its tags wins), which picks a far larger value (1.5 on
WSJ-train) and gains about 3 points of unknown-word accuracy on a WSJ-train
development split; ``theta="std"`` gives TnT's choice.  The recursion starts
at the tag distribution of the rare words of the word's *shape class*,
itself smoothed with the distribution of all rare words (one more level of
the same recursion).

Shape classes (TnT keeps separate tries for capitalised and lower-case
words; digits and hyphens get their own, as in later TnT-like taggers):

=========  =====================================================
``digit``  the word contains a digit ("1.5", "1980s", "B-52")
``cap``    otherwise, the first character is upper case
``hyphen`` otherwise, the word contains a hyphen ("well-known")
``lower``  every other word
=========  =====================================================

The emission of an unknown word ``w`` under tag ``t`` is then, by Bayes,

    log p(w | t) = log p(<unk> | t) + log P(t | suffix(w), class(w)) - log P_rare(t)

where ``p(<unk> | t)`` is the HMM's unknown-word column (see
:mod:`fsmlearn.tag.train`) and ``P_rare`` the tag distribution of all rare
words; the constant ``p(w | <unk>)`` is left out (it does not depend on the
tag).  :meth:`SuffixModel.log_ratio` returns the last two terms.

Public names: SHAPE_CLASSES, THETA_GRID, shape_class, SuffixModel.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from ..errors import ArgumentError

__all__ = ["SHAPE_CLASSES", "THETA_GRID", "shape_class", "SuffixModel"]

#: The shape classes, in the order their index is stored.
SHAPE_CLASSES: tuple[str, ...] = ("lower", "cap", "digit", "hyphen")
_LOWER, _CAP, _DIGIT, _HYPHEN = range(4)
#: Candidate abstraction weights for ``theta="auto"``.
THETA_GRID: tuple[float, ...] = (0.01, 0.03, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0)


def shape_class(word: str) -> int:
    """The shape class index of a word (see the module docstring).

    Args:
        word: a token.

    Returns:
        An index into :data:`SHAPE_CLASSES`.
    """
    if any(ch.isdigit() for ch in word):
        return _DIGIT
    if word[:1].isupper():
        return _CAP
    if "-" in word:
        return _HYPHEN
    return _LOWER


def _abstraction_weights(theta: np.ndarray, levels: int) -> np.ndarray:
    """Weights [G, levels] of the successive-abstraction recursion
    P_j = (c_j + theta P_{j-1}) / (1 + theta), P_0 = c_0, unrolled for each theta."""
    g = theta[:, None]
    j = np.arange(levels)[None, :]
    up = levels - 1 - j                                   # steps above level j
    w = g ** up / (1.0 + g) ** (up + 1)
    w[:, 0] = (g[:, 0] / (1.0 + g[:, 0])) ** (levels - 1)
    return w


class SuffixModel:
    """Suffix counts of the rare words, per shape class, and the abstraction weight.

    Attributes:
        num_tags: T.
        max_suffix: the longest suffix used (letters).
        theta: the successive-abstraction weight.
        p_rare: float64 [T], the tag distribution of all rare-word tokens.
        table: dict mapping (class index, suffix str) -> float64 [T] counts
            (the empty suffix holds the class's own counts).
    """

    def __init__(self, num_tags: int, table: dict, theta: float, p_rare: np.ndarray, max_suffix: int = 10):
        self.num_tags = int(num_tags)
        self.table = table
        self.theta = float(theta)
        self.p_rare = np.asarray(p_rare, dtype=np.float64)
        self.max_suffix = int(max_suffix)
        with np.errstate(divide="ignore"):
            self._log_p_rare = np.log(self.p_rare)

    # ------------------------------------------------------------ training
    @classmethod
    def train(cls, tagged: Iterable[tuple[str, int]], word_counts: Counter, num_tags: int,
              tag_freq: np.ndarray, rare_max: int = 10, max_suffix: int = 10,
              theta="auto") -> "SuffixModel":
        """Count the suffixes of the rare-word tokens.

        Args:
            tagged: (word, tag id) pairs of every training token.
            word_counts: each word's training count.
            num_tags: T.
            tag_freq: float64 [T] tag counts of all training tokens.
            rare_max: words seen at most this often are rare.
            max_suffix: longest suffix, in letters.
            theta: the abstraction weight: a number; ``"std"`` for TnT's
                standard deviation of the tags' relative frequencies; or
                ``"auto"`` (default): the value of :data:`THETA_GRID` that
                maximises the likelihood of the tags of held-out rare words
                (every 10th rare word type, by sorted order, is held out of the
                counts and tagged by the model of the others).

        Returns:
            A :class:`SuffixModel`.
        """
        rare = [(w, t) for w, t in tagged if word_counts[w] <= rare_max]
        f = np.asarray(tag_freq, dtype=np.float64)
        p = f / max(f.sum(), 1.0)
        std = float(np.std(p, ddof=1)) if num_tags > 1 else 1.0
        if theta == "std":
            theta = std
        elif theta == "auto":
            types = sorted({w for w, _ in rare})
            held = set(types[5::10])
            model = cls._count([x for x in rare if x[0] not in held], num_tags, tag_freq, 1.0, max_suffix)
            test = Counter(x for x in rare if x[0] in held)
            grid = np.asarray(THETA_GRID)
            ll = np.zeros(grid.size)
            for (w, t), n in test.items():
                chain = model._chain(w)                      # [L+1, T]: p_rare, class, suffixes
                ll += n * np.log(np.maximum(_abstraction_weights(grid, chain.shape[0]) @ chain[:, t], 1e-300))
            theta = float(grid[int(np.argmax(ll))]) if test else std
        theta = float(theta)
        if not (theta >= 0 and math.isfinite(theta)):
            raise ArgumentError(f"theta must be a finite number >= 0, got {theta!r}")
        return cls._count(rare, num_tags, tag_freq, theta, max_suffix)

    @classmethod
    def _count(cls, rare, num_tags, tag_freq, theta, max_suffix) -> "SuffixModel":
        counts: Counter = Counter()
        for word, t in rare:
            k = shape_class(word)
            counts[(k, "", t)] += 1
            for i in range(1, min(max_suffix, len(word)) + 1):
                counts[(k, word[-i:], t)] += 1
        table: dict = {}
        for (k, suf, t), c in counts.items():
            row = table.get((k, suf))
            if row is None:
                row = table[(k, suf)] = np.zeros(num_tags)
            row[t] += c
        p_rare = np.zeros(num_tags)
        for k in range(len(SHAPE_CLASSES)):
            row = table.get((k, ""))
            if row is not None:
                p_rare += row
        if p_rare.sum() > 0:
            p_rare /= p_rare.sum()
        else:   # no rare words at all: any tag in proportion to its frequency
            p_rare = np.asarray(tag_freq, dtype=np.float64) / max(float(np.sum(tag_freq)), 1.0)
        return cls(num_tags, table, theta, p_rare, max_suffix)

    # ------------------------------------------------------------ scoring
    def _chain(self, word: str) -> np.ndarray:
        """The relative-frequency rows the recursion combines, [L+1, T]:
        P_rare, the word's class, then its suffixes of length 1, 2, ..."""
        k = shape_class(word)
        rows = [self.p_rare]
        base = self.table.get((k, ""))
        if base is not None:
            rows.append(base / base.sum())
            for i in range(1, min(self.max_suffix, len(word)) + 1):
                row = self.table.get((k, word[-i:]))
                if row is None:
                    break
                rows.append(row / row.sum())
        return np.array(rows)

    def tag_distribution(self, word: str) -> np.ndarray:
        """P(t | suffix, class) of one word, float64 [T] (sums to 1)."""
        k = shape_class(word)
        th = self.theta
        P = self.p_rare
        base = self.table.get((k, ""))
        if base is not None:
            P = (base / base.sum() + th * P) / (1.0 + th)
        for i in range(1, min(self.max_suffix, len(word)) + 1):
            row = self.table.get((k, word[-i:]))
            if row is None:
                break
            P = (row / row.sum() + th * P) / (1.0 + th)
        return P

    def log_ratio(self, words: Sequence[str]) -> np.ndarray:
        """log P(t | suffix(w), class(w)) - log P_rare(t) for each word.

        Args:
            words: the unknown words.

        Returns:
            float64 [len(words), T]; -inf where P_rare(t) = 0 (tags never seen
            on a rare word).
        """
        out = np.empty((len(words), self.num_tags))
        with np.errstate(divide="ignore", invalid="ignore"):
            for j, w in enumerate(words):
                out[j] = np.log(self.tag_distribution(w)) - self._log_p_rare
        out[~np.isfinite(out)] = -math.inf
        return out

    # ------------------------------------------------------------ storage
    def to_arrays(self) -> dict:
        """The model as arrays (for an ``.npz``): keys, classes, CSR counts, scalars."""
        keys = sorted(self.table)
        cls_ = np.array([k for k, _ in keys], np.int8)
        sufs = [s for _, s in keys]
        rows = np.array([self.table[k] for k in keys]).reshape(len(keys), self.num_tags)
        nz = rows > 0
        ptr = np.zeros(len(keys) + 1, np.int64)
        np.cumsum(nz.sum(axis=1), out=ptr[1:])
        r, t = np.nonzero(nz)
        return {"unk_class": cls_, "unk_suffix": sufs, "unk_ptr": ptr, "unk_tag": t.astype(np.int32),
                "unk_count": rows[r, t].astype(np.float64),
                "unk_scalars": np.array([self.theta, float(self.max_suffix)]), "unk_p_rare": self.p_rare}

    @classmethod
    def from_arrays(cls, num_tags: int, a: dict) -> "SuffixModel":
        """Inverse of :meth:`to_arrays` (the caller has checked shapes and dtypes)."""
        table = {}
        ptr, tag, cnt = a["unk_ptr"], a["unk_tag"], a["unk_count"]
        for j, (k, s) in enumerate(zip(a["unk_class"].tolist(), a["unk_suffix"])):
            row = np.zeros(num_tags)
            row[tag[ptr[j]:ptr[j + 1]]] = cnt[ptr[j]:ptr[j + 1]]
            table[(int(k), s)] = row
        theta, max_suffix = a["unk_scalars"].tolist()
        return cls(num_tags, table, theta, a["unk_p_rare"], int(max_suffix))
