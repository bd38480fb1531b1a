"""The alignment-aware RCMS model of the speech task (Steinhardt and Liang 2015, section 6): its
labels (a character and an advance, ``label = a * num_chars + char``), the alignment
constraints, the hashed features of the output n-grams and alignment edges (equation 6 and
section 4.2's edges; computed in numba) and :class:`AlignRCM`, the weights.  The contexts,
lattice and decoding are in :mod:`fsmlearn.rcm.align` (which re-exports these names),
:mod:`~fsmlearn.rcm.align_lattice` and :mod:`~fsmlearn.rcm.align_decode`.

Public names: AlignRCM, feature_id, label_of, advances_valid, allowed_labels, method_outside,
default_max_len, STAR, BOS, EOS, TEMPLATES.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from ..errors import ArgumentError

__all__ = ["AlignRCM", "feature_id", "label_of", "advances_valid", "allowed_labels", "method_outside",
           "default_max_len", "STAR", "BOS", "EOS", "TEMPLATES"]

STAR = -1   #: an undetermined position (characters, labels)
BOS = -2    #: before the sequence (characters, labels, phonemes)
EOS = -3    #: after the input (phonemes)

#: template ids mixed first into every feature's hash
TEMPLATES = {"ngram": 1, "end": 2, "edge": 3, "edge_left": 4, "edge_right": 5, "edge_bigram": 6}
_T_NGRAM, _T_END, _T_EDGE, _T_LEFT, _T_RIGHT, _T_BIGRAM = 1, 2, 3, 4, 5, 6

_SEED = np.uint64(0x243F6A8885A308D3)
_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_S32 = np.uint64(32)
_S29 = np.uint64(29)


def default_max_len(num_phonemes: int) -> int:
    """The default number of output positions for an input of this length: 2 L' + 2."""
    return 2 * int(num_phonemes) + 2


# ----------------------------------------------------------------------------- hashing
@nb.njit(cache=True, inline="always")
def _mix(h, v):
    x = (h ^ np.uint64(v + 1024)) * _M1
    x ^= x >> _S32
    x *= _M2
    x ^= x >> _S29
    return x


@nb.njit(cache=True, inline="always")
def _fin(h, mask):
    return np.int64(h & np.uint64(mask))


@nb.njit(cache=True)
def _hash_values(template, vals, mask):
    h = _mix(_SEED, template)
    for v in vals:
        h = _mix(h, v)
    return _fin(h, mask)


def feature_id(hash_bits: int, template: str, *values: int) -> int:
    """The id of a feature: ``template`` (a key of :data:`TEMPLATES`) and its integer values
    (characters, advances, phonemes, :data:`STAR`, :data:`BOS`, :data:`EOS`), hashed and masked
    to ``hash_bits`` bits.  The kernels hash the same tuples the same way; the key of each
    template is described in the module docstring (the n-gram and end templates carry the
    number of preceding characters first)."""
    if template not in TEMPLATES:
        raise ArgumentError(f"unknown feature template {template!r}; expected one of {sorted(TEMPLATES)}")
    vals = np.asarray(values, np.int64).reshape(-1)
    if vals.size and vals.min() < -1000:
        raise ArgumentError(f"feature values must be >= -1000, got {int(vals.min())}")
    return int(_hash_values(TEMPLATES[template], vals, (1 << int(hash_bits)) - 1))


@nb.njit(cache=True, inline="always")
def _ch(h, C):
    """The character of a history entry (a label, STAR or BOS)."""
    return h % C if h >= 0 else h


@nb.njit(cache=True, inline="always")
def _context_hash(template, j, hist, k, C):
    """The running hash of ``template``, j and the last j characters of context k (a row of
    ``hist``): the key of the n-gram and end templates before what follows it."""
    W = hist.shape[1]
    h = _mix(_mix(_SEED, template), j)
    for t in range(W - j, W):
        h = _mix(h, _ch(hist[k, t], C))
    return h


@nb.njit(cache=True)
def _ngram_ids(hist, C, n, backoff, mask):
    """[K, C, G] ids of the n-gram features of each context (a row of ``hist``) and character."""
    K = hist.shape[0]
    G = n + 1 if backoff else 1
    out = np.empty((K, C, G), np.int64)
    for k in range(K):
        for gi in range(G):
            h = _context_hash(_T_NGRAM, n - gi, hist, k, C)
            for c in range(C):
                out[k, c, gi] = _fin(_mix(h, c), mask)
    return out


@nb.njit(cache=True)
def _end_ids(hist, C, n, backoff, mask):
    """[K, G] ids of the end features of each context."""
    K = hist.shape[0]
    G = n + 1 if backoff else 1
    out = np.empty((K, G), np.int64)
    for k in range(K):
        for gi in range(G):
            out[k, gi] = _fin(_context_hash(_T_END, n - gi, hist, k, C), mask)
    return out


@nb.njit(cache=True)
def _edge_ids(xe, C, A, mask):
    """[(L'+1) * V, 3] ids of the edge features of (z_{i-1}, label) (0 where z_i is out of range)."""
    Lp = xe.size - 2
    V = C * (A + 1)
    out = np.zeros(((Lp + 1) * V, 3), np.int64)
    for zs in range(Lp + 1):
        for v in range(V):
            a = v // C
            c = v % C
            z = zs + a
            if z < 1 or z > Lp:
                continue
            r = zs * V + v
            out[r, 0] = _fin(_mix(_mix(_mix(_mix(_SEED, _T_EDGE), c), a), xe[z]), mask)
            m = max(a - 1, 1)
            h = _mix(_mix(_mix(_SEED, _T_LEFT), c), a)
            for t in range(z - m, z + 1):
                h = _mix(h, xe[t])
            out[r, 1] = _fin(h, mask)
            out[r, 2] = _fin(_mix(_mix(_mix(_mix(_mix(_SEED, _T_RIGHT), c), a), xe[z]), xe[z + 1]), mask)
    return out


@nb.njit(cache=True)
def _bigram_ids(xe, C, A, mask):
    """[(L'+1) * (V+2) * V] ids of the edge-bigram features of (z_{i-1}, previous label, label);
    previous label V is STAR, V + 1 is BOS."""
    Lp = xe.size - 2
    V = C * (A + 1)
    out = np.zeros((Lp + 1) * (V + 2) * V, np.int64)
    for zs in range(Lp + 1):
        for p in range(V + 2):
            if p < V:
                pc = p % C
                pa = p // C
            elif p == V:
                pc = STAR
                pa = STAR
            else:
                pc = BOS
                pa = BOS
            h0 = _mix(_mix(_mix(_mix(_SEED, _T_BIGRAM), pc), pa), xe[zs])
            for v in range(V):
                a = v // C
                z = zs + a
                if z < 1 or z > Lp:
                    continue
                out[(zs * (V + 2) + p) * V + v] = _fin(_mix(_mix(_mix(h0, v % C), a), xe[z]), mask)
    return out


# ----------------------------------------------------------------------------- the model
@dataclass
class AlignRCM:
    """An alignment RCM: hashed features over (characters, advances, phonemes) and their weights.

    Attributes:
        num_chars: |Y|, characters 0..num_chars-1.
        num_phonemes: phonemes 0..num_phonemes-1.
        n: the character n-gram order (features on (n + 1)-grams; 4: the paper's 5-gram).
        max_advance: A, the most phonemes one character may cover (>= 1).
        hash_bits: theta has 2 ** hash_bits entries.
        backoff: also every shorter character suffix gram (k = 1..n) as a feature.
        edge_bigram: the alignment-edge bigram feature.
        theta: float64 [2 ** hash_bits] (zeros when not given).
    """
    num_chars: int
    num_phonemes: int
    n: int = 4
    max_advance: int = 2
    hash_bits: int = 22
    backoff: bool = False
    edge_bigram: bool = True
    theta: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        for name, lo in (("num_chars", 1), ("num_phonemes", 1), ("n", 0), ("max_advance", 1), ("hash_bits", 4)):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < lo:
                raise ArgumentError(f"{name} must be an integer >= {lo}, got {v!r}")
        if self.hash_bits > 30:
            raise ArgumentError(f"hash_bits must be <= 30, got {self.hash_bits}")
        size = 1 << int(self.hash_bits)
        if self.theta is None:
            self.theta = np.zeros(size)
        else:
            th = np.asarray(self.theta)
            if th.shape != (size,) or th.dtype != np.float64:
                raise ArgumentError(f"theta must be float64 of shape ({size},), got {th.dtype} {th.shape}")
            if not np.isfinite(th).all():
                raise ArgumentError(f"theta has a non-finite entry at {int(np.flatnonzero(~np.isfinite(th))[0])}")
            self.theta = th

    @property
    def num_labels(self) -> int:
        """|Y| (A + 1): the labels (char, advance), ``advance * num_chars + char``."""
        return self.num_chars * (self.max_advance + 1)

    @property
    def width(self) -> int:
        """The labels of history a context row keeps: max(n, 1)."""
        return max(self.n, 1)

    def check_x(self, x) -> np.ndarray:
        """x as int64 [L'], or ArgumentError naming the bad value."""
        return _checked(x, "x", "phoneme", "input", self.num_phonemes)

    def check_y(self, y) -> np.ndarray:
        """y (characters) as int64 [L], or ArgumentError naming the bad value."""
        return _checked(y, "y", "character", "output", self.num_chars)

    def check_advances(self, advances, L: int, Lp: int) -> np.ndarray:
        """An alignment (advances a_1..a_L) as int64, or ArgumentError unless it is valid for x of
        length Lp (see :func:`advances_valid`)."""
        arr = np.asarray(advances)
        if arr.ndim != 1 or arr.size != L or not np.issubdtype(arr.dtype, np.integer):
            raise ArgumentError(f"advances must be {L} integers, got {arr.dtype} {arr.shape}")
        arr = arr.astype(np.int64)
        if not advances_valid(arr, Lp, self.max_advance):
            raise ArgumentError(f"advances {arr.tolist()[:40]} are not an alignment onto {Lp} phonemes "
                                f"with at most {self.max_advance} per character")
        return arr


def _checked(seq, name: str, what: str, side: str, size: int) -> np.ndarray:
    """``seq`` as int64 [L] of symbols 0..size-1, or ArgumentError naming the bad value."""
    arr = np.asarray(seq)
    if arr.ndim != 1 or arr.size == 0:
        raise ArgumentError(f"{name} must be a non-empty 1-d sequence of {what}s, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ArgumentError(f"{name} must hold integers, got dtype {arr.dtype}")
    bad = np.flatnonzero((arr < 0) | (arr >= size))
    if bad.size:
        raise ArgumentError(f"{what} {int(arr[bad[0]])} at {side} position {int(bad[0]) + 1} is out of "
                            f"range 0..{size - 1}")
    return arr.astype(np.int64)


def label_of(char, advance, num_chars: int):
    """The label id(s) of (char, advance): ``advance * num_chars + char``."""
    return np.asarray(advance) * num_chars + np.asarray(char)


def advances_valid(advances, num_phonemes: int, max_advance: int) -> bool:
    """Whether a_1..a_L encode an alignment onto num_phonemes phonemes: a_1 >= 1, every
    a_i in 0..max_advance, no a_i = 0 right after an a_{i-1} >= 2, and sum = num_phonemes."""
    a = np.asarray(advances, np.int64)
    if a.ndim != 1 or a.size == 0 or a[0] < 1 or (a < 0).any() or (a > max_advance).any():
        return False
    if ((a[1:] == 0) & (a[:-1] >= 2)).any():
        return False
    return int(a.sum()) == int(num_phonemes)


def allowed_labels(model: AlignRCM, y, advances=None) -> np.ndarray:
    """bool [L, V]: the labels that spell y (with ``advances``, only those advances) at each position."""
    V = model.num_labels
    C = model.num_chars
    L = y.size
    allowed = np.zeros((L, V), bool)
    if advances is None:
        for a in range(model.max_advance + 1):
            allowed[np.arange(L), a * C + y] = True
    else:
        allowed[np.arange(L), advances * C + y] = True
    return allowed




def method_outside(method: str) -> float:
    """The outside weight of a decoding method: 0 for "rcms" (RCMS contexts), -inf for "beam"."""
    if method == "rcms":
        return 0.0
    if method == "beam":
        return -math.inf
    raise ArgumentError(f"method must be 'rcms' or 'beam', got {method!r}")
