"""The cyclic order-K Markov sequence model and the corpus moments it is trained from
(Jernite, Rush and Sontag 2015, sections 3 and 4.1).

A corpus of sentences becomes one cyclic sequence x_1 .. x_N over the states
X = T + {<S>} (:func:`corpus_sequence`): K separators ``<S>`` before every sentence, and
filler separators at the end so that N is a multiple of K + 1 (section 4.4).  The model
scores a sequence y (indices taken modulo N) by

    sum_i ( theta^0[y_i] + sum_{l=1..K} theta^l[y_i, y_{i+l}] )             (section 4.1)

with a unary theta^0 [C] and distance-l pairwise potentials theta^l [C, C], either free
("full rank") or low rank, theta^l[u, v] = U_u . W^l_v (eq. 5).  Everything the bound and
its gradient need from the corpus is its moments (:func:`collect_moments`): the unary
counts and, for each distance l, the sparse counts of the pairs (x_i, x_{i+l}); training
never reads the corpus again.

Public names: SEP, MRFModel, Moments, corpus_sequence, collect_moments.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..errors import ArgumentError, ModelError

__all__ = ["SEP", "MRFModel", "Moments", "corpus_sequence", "collect_moments"]

#: the separator symbol of section 4.1
SEP = "<S>"


@dataclass
class MRFModel:
    """The potentials of a cyclic order-K Markov sequence model over C states.

    Attributes:
        theta0: float64 [C], unary potentials theta^0.
        pair: float64 [K, C, C], the full-rank pairwise potentials theta^l (index l - 1),
            or None for a low-rank model.
        U: float64 [C, D] (low rank; None for full rank), the left embeddings of eq. 5.
        W: float64 [K, C, D] (low rank; None for full rank), the right embeddings W^l.
        symbols: the C state names (None: unnamed).

    Raises:
        ModelError: shapes that disagree, or values that are not finite (names the array).
    """
    theta0: np.ndarray
    pair: np.ndarray | None = None
    U: np.ndarray | None = None
    W: np.ndarray | None = None
    symbols: list | None = None

    def __post_init__(self):
        self.theta0 = np.ascontiguousarray(self.theta0, np.float64)
        if self.theta0.ndim != 1 or self.theta0.size == 0:
            raise ModelError(f"theta0 has shape {self.theta0.shape}; expected [C >= 1]")
        C = self.theta0.size
        if (self.pair is None) == (self.U is None):
            raise ModelError("give either pair (full rank) or U and W (low rank), not both or neither")
        if self.pair is not None:
            self.pair = np.ascontiguousarray(self.pair, np.float64)
            if self.pair.ndim != 3 or self.pair.shape[1:] != (C, C) or self.pair.shape[0] < 1:
                raise ModelError(f"pair has shape {self.pair.shape}; expected [K >= 1, {C}, {C}]")
        else:
            if self.W is None:
                raise ModelError("a low-rank model needs W as well as U")
            self.U = np.ascontiguousarray(self.U, np.float64)
            self.W = np.ascontiguousarray(self.W, np.float64)
            if self.U.ndim != 2 or self.U.shape[0] != C or self.U.shape[1] < 1:
                raise ModelError(f"U has shape {self.U.shape}; expected [{C}, D >= 1]")
            if self.W.ndim != 3 or self.W.shape[1:] != self.U.shape or self.W.shape[0] < 1:
                raise ModelError(f"W has shape {self.W.shape}; expected [K >= 1, {C}, {self.U.shape[1]}]")
        for name in ("theta0", "pair", "U", "W"):
            a = getattr(self, name)
            if a is not None and not np.isfinite(a).all():
                i = np.unravel_index(int(np.argmin(np.isfinite(a))), a.shape)
                raise ModelError(f"{name}{list(map(int, i))} is {a[i]!r}; expected finite potentials")
        if self.symbols is not None:
            self.symbols = [str(s) for s in self.symbols]
            if len(self.symbols) != C:
                raise ModelError(f"{len(self.symbols)} symbols for {C} states")

    # ------------------------------------------------------------------ shape
    @property
    def C(self) -> int:
        return int(self.theta0.size)

    @property
    def K(self) -> int:
        return int(self.pair.shape[0] if self.pair is not None else self.W.shape[0])

    @property
    def rank(self) -> int | None:
        """D for a low-rank model, None for full rank."""
        return None if self.U is None else int(self.U.shape[1])

    @classmethod
    def init(cls, C: int, K: int, rank: int | None = None, seed: int = 0, scale: float = 0.01,
             symbols=None) -> "MRFModel":
        """A model with zero potentials (full rank) or small random embeddings (low rank:
        N(0, scale^2) entries, so that U W^T starts near zero but the gradient of eq. 19 is
        not zero)."""
        if not (isinstance(C, (int, np.integer)) and C >= 1 and isinstance(K, (int, np.integer)) and K >= 1):
            raise ArgumentError(f"C = {C!r} and K = {K!r}; expected integers >= 1")
        if rank is None:
            return cls(np.zeros(C), pair=np.zeros((K, C, C)), symbols=symbols)
        if not (isinstance(rank, (int, np.integer)) and rank >= 1):
            raise ArgumentError(f"rank = {rank!r}; expected an integer >= 1 or None (full rank)")
        rng = np.random.default_rng(seed)
        return cls(np.zeros(C), U=rng.normal(0, scale, (C, rank)), W=rng.normal(0, scale, (K, C, rank)),
                   symbols=symbols)

    def pairwise(self, l: int, dtype=np.float64) -> np.ndarray:
        """theta^l [C, C] (l = 1..K) in ``dtype`` (eq. 5 for a low-rank model)."""
        if not 1 <= l <= self.K:
            raise ArgumentError(f"distance l = {l}; expected 1..{self.K}")
        if self.pair is not None:
            return self.pair[l - 1].astype(dtype, copy=False)
        return self.U.astype(dtype, copy=False) @ self.W[l - 1].astype(dtype, copy=False).T

    def score(self, x) -> float:
        """The unnormalised log-score of one cyclic sequence x (int [N], indices mod N)."""
        x = np.asarray(x, np.int64)
        s = float(self.theta0[x].sum())
        for l in range(1, self.K + 1):
            y = np.roll(x, -l)
            if self.pair is not None:
                s += float(self.pair[l - 1][x, y].sum())
            else:
                s += float(np.einsum("id,id->", self.U[x], self.W[l - 1][y]))
        return s

    # ------------------------------------------------------------ parameters
    def to_vector(self) -> np.ndarray:
        """All free parameters as one float64 vector (theta0, then pair or U and W)."""
        parts = [self.theta0.ravel()]
        parts += [self.pair.ravel()] if self.pair is not None else [self.U.ravel(), self.W.ravel()]
        return np.concatenate(parts)

    def with_vector(self, v: np.ndarray) -> "MRFModel":
        """A model of the same shape whose parameters are ``v`` (the order of :meth:`to_vector`)."""
        v = np.asarray(v, np.float64)
        C, K = self.C, self.K
        if v.shape != (self.num_params,):
            raise ArgumentError(f"parameter vector has shape {v.shape}; expected ({self.num_params},)")
        t0 = v[:C]
        if self.pair is not None:
            return MRFModel(t0, pair=v[C:].reshape(K, C, C), symbols=self.symbols)
        D = self.rank
        U = v[C:C + C * D].reshape(C, D)
        W = v[C + C * D:].reshape(K, C, D)
        return MRFModel(t0, U=U, W=W, symbols=self.symbols)

    @property
    def num_params(self) -> int:
        C, K = self.C, self.K
        return C + (K * C * C if self.pair is not None else C * self.rank * (K + 1))


@dataclass
class Moments:
    """The moments of a cyclic corpus sequence (counts; divide by N for the means).

    Attributes:
        N: the length of the cyclic sequence (a multiple of K + 1 when built by
            :func:`corpus_sequence`).
        C: the number of states.
        K: the order.
        unary: int64 [C], how often each state occurs.
        pairs: K scipy.sparse CSR int64 [C, C] matrices, pairs[l-1][u, v] = #{i: x_i = u,
            x_{i+l} = v} (i + l mod N).
    """
    N: int
    C: int
    K: int
    unary: np.ndarray
    pairs: list = field(default_factory=list)

    def means(self):
        """(mu0 float64 [C], [K CSR float64 [C, C]]): the observed moments hat-mu of section 5."""
        return self.unary / self.N, [p.astype(np.float64) / self.N for p in self.pairs]

    def dot(self, model: MRFModel) -> float:
        """<hat-mu, theta> per position: (1/N) sum_i (theta^0[x_i] + sum_l theta^l[x_i, x_{i+l}])."""
        if model.C != self.C or model.K != self.K:
            raise ArgumentError(f"moments of C = {self.C}, K = {self.K} against a model of C = {model.C}, "
                                f"K = {model.K}")
        s = float(self.unary @ model.theta0)
        for l, P in enumerate(self.pairs, 1):
            P = P.tocoo()
            if model.pair is not None:
                s += float(P.data @ model.pair[l - 1][P.row, P.col])
            else:
                s += float(P.data @ np.einsum("nd,nd->n", model.U[P.row], model.W[l - 1][P.col]))
        return s / self.N


def corpus_sequence(sentences, index, K: int, unk: str | None = None) -> np.ndarray:
    """The cyclic sequence x(t^c) of section 4.1: K separators before each sentence, then
    filler separators until N is a multiple of K + 1 (section 4.4).

    Args:
        sentences: an iterable of lists of str tokens.
        index: dict str -> state id; it must hold :data:`SEP`.
        K: the order (>= 1).
        unk: a token of ``index`` that stands for tokens not in it (None: such a token is
            an error).

    Returns:
        int32 [N].

    Raises:
        ArgumentError: a token not in ``index`` (its sentence and position named), no
            :data:`SEP` in the index, or K < 1.
    """
    if not isinstance(K, (int, np.integer)) or K < 1:
        raise ArgumentError(f"K = {K!r}; expected an integer >= 1")
    if SEP not in index:
        raise ArgumentError(f"the index has no separator {SEP!r}")
    sep = index[SEP]
    unk_id = None
    if unk is not None:
        if unk not in index:
            raise ArgumentError(f"the unknown-word token {unk!r} is not in the index")
        unk_id = index[unk]
    out: list[int] = []
    for s, sent in enumerate(sentences):
        out.extend([sep] * K)
        for j, w in enumerate(sent):
            i = index.get(w, unk_id)
            if i is None:
                raise ArgumentError(f"sentence {s}, token {j}: {w!r} is not in the vocabulary")
            out.append(i)
    if not out:
        out = [sep] * K
    while len(out) % (K + 1) or len(out) < 2 * K + 1:
        out.append(sep)
    return np.asarray(out, np.int32)


def collect_moments(x, C: int, K: int) -> Moments:
    """Unary and distance-l pair counts of the cyclic sequence ``x`` (section 5, Algorithm 2's
    first step): one pass, sparse, O(N log N).

    Args:
        x: int [N] states 0..C-1.
        C: the number of states.
        K: the order.

    Raises:
        ArgumentError: a state out of range, or N < 2K + 1 (the cycle would join a node to
            itself or join one pair twice).
    """
    x = np.asarray(x, np.int64)
    if x.ndim != 1 or x.size < 2 * K + 1:
        raise ArgumentError(f"a cyclic sequence of order K = {K} needs N >= {2 * K + 1} positions; "
                            f"got shape {x.shape}")
    if x.min() < 0 or x.max() >= C:
        bad = int(np.flatnonzero((x < 0) | (x >= C))[0])
        raise ArgumentError(f"position {bad}: state {int(x[bad])} is out of range 0..{C - 1}")
    unary = np.bincount(x, minlength=C).astype(np.int64)
    pairs = []
    for l in range(1, K + 1):
        y = np.roll(x, -l)
        keys, counts = np.unique(x * C + y, return_counts=True)
        pairs.append(sp.csr_matrix((counts.astype(np.int64), (keys // C, keys % C)), shape=(C, C)))
    return Moments(int(x.size), int(C), int(K), unary, pairs)
