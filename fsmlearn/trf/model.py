"""The TRF model: feature weights, length probabilities and log normaliser ratios.

p(j, x^j; lambda, zeta) = pi_j exp(lambda . f(x^j) - zeta_j) / Z_1(lambda)   (equation 2 with
zeta_j = ln Z_j / Z_1, zeta_1 = 0; section 4.1), where Z_1 is exact (one sum over the
vocabulary).  With the long-sentence sub-model of section 5.4 (equation 27), every length
j > m shares the probability pi_{m+} = n_{m+} / n and one log ratio zeta_{m+}.

Arrays are indexed by length group: group j = 1..m is length j, group m+1 (when ``long``)
is every length above m; index 0 is unused.

Public names: TRF, length_groups, pi0_from_counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ArgumentError
from .features import Corpus, FeatureSet, as_corpus


def length_groups(lengths: np.ndarray, m: int, long: bool) -> np.ndarray:
    """int64 group of each length (m+1 for lengths above m when ``long``).

    Raises:
        ArgumentError: a length above m without the long sub-model.
    """
    lengths = np.asarray(lengths, np.int64)
    if not long and len(lengths) and lengths.max() > m:
        raise ArgumentError(f"TRF: a sentence of length {int(lengths.max())} is longer than the model's "
                            f"largest length {m} (and the model has no long-sentence sub-model)")
    return np.minimum(lengths, m + 1)


def pi0_from_counts(counts: np.ndarray, rule: str = "eq26", c: float = 1e-5) -> np.ndarray:
    """The sampling length probabilities pi0 over groups 1..G (index 0 unused).

    Args:
        counts: float [G+1], training sentences per group (index 0 ignored).
        rule: ``"empirical"`` (pi0_j = n_j / n) or ``"eq26"`` (equation 26: u_j = n_max / n up
            to the most frequent length, n_j / n after it, floored at c, normalised).
        c: the floor of equation (26).
    """
    n = np.asarray(counts, np.float64)[1:]
    tot = n.sum()
    if tot <= 0:
        raise ArgumentError("TRF: no training sentences to take length probabilities from")
    if rule == "empirical":
        p = n / tot
    elif rule == "eq26":
        u = n / tot
        jmax = int(np.argmax(n))
        u[:jmax + 1] = n.max() / tot
        u = np.maximum(u, c)
        p = u / u.sum()
    else:
        raise ArgumentError(f"TRF: unknown pi0 rule {rule!r}; expected 'empirical' or 'eq26'")
    return np.r_[0.0, p]


@dataclass
class TRF:
    """A trans-dimensional random field over token sequences.

    Attributes:
        features: the :class:`FeatureSet`.
        lam: float64 [d], lambda.
        m: the largest length modelled separately.
        long: whether lengths above m form the sub-model of equation (27).
        pi: float64 [G+1], the empirical length-group probabilities (G = m, or m+1 with long).
        zeta: float64 [G+1], the estimated ln Z_j / Z_1 per group (zeta[1] = 0).
        meta: free-form JSON-able information (training settings, vocabulary name, ...).
    """
    features: FeatureSet
    lam: np.ndarray
    m: int
    long: bool
    pi: np.ndarray
    zeta: np.ndarray
    meta: dict = field(default_factory=dict)

    @property
    def groups(self) -> int:
        return self.m + (1 if self.long else 0)

    def log_z1(self) -> float:
        """ln Z_1(lambda): the exact sum over every one-token sentence."""
        V = self.features.vocab_size
        one = Corpus(np.arange(V, dtype=np.int32), np.arange(V + 1, dtype=np.int64))
        s = self.features.scores(one, self.lam)
        mx = s.max()
        return float(mx + np.log(np.exp(s - mx).sum()))

    def log_probs(self, corpus: Corpus, zeta=None, log_z1: float | None = None) -> np.ndarray:
        """float64 [n]: ln p(j, x^j) of each sentence (equation 2 with the estimated zeta, or
        ``zeta`` when given: e.g. exact log ratios)."""
        if not isinstance(corpus, Corpus):
            corpus = as_corpus(corpus)
        g = length_groups(corpus.lengths, self.m, self.long)
        z = self.zeta if zeta is None else np.asarray(zeta, np.float64)
        lz1 = self.log_z1() if log_z1 is None else log_z1
        with np.errstate(divide="ignore"):
            lp = np.log(self.pi)
        return lp[g] + self.features.scores(corpus, self.lam) - z[g] - lz1

    def nll(self, corpus: Corpus, zeta=None) -> float:
        """Mean negative log-likelihood per sentence."""
        return float(-self.log_probs(corpus, zeta).mean())

    def perplexity(self, corpus: Corpus, zeta=None) -> float:
        """exp(-sum ln p / number of tokens counting </s>), the LM convention."""
        lp = self.log_probs(corpus, zeta)
        if not isinstance(corpus, Corpus):
            corpus = as_corpus(corpus)
        return float(np.exp(-lp.sum() / (corpus.lengths.sum() + len(corpus))))


def empirical_pi(lengths: np.ndarray, m: int, long: bool, add: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(counts [G+1], pi [G+1]) of the training lengths per group.

    Args:
        add: added to every group's count for pi (0: the maximum-likelihood pi_j = n_j / n of
            Proposition 1; a positive value gives the lengths that training lacks a probability,
            which a language model scoring other text needs).
    """
    g = length_groups(lengths, m, long)
    counts = np.bincount(g, minlength=m + 2 if long else m + 1).astype(np.float64)
    counts[0] = 0
    smoothed = counts + add
    smoothed[0] = 0
    return counts, smoothed / smoothed.sum()
