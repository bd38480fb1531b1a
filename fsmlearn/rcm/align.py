"""Alignment-aware reified context models: the speech task of Steinhardt and Liang (2015).

The input is a phoneme sequence x_1..x_L', the output its spelling y_1..y_L over
characters, and the alignment z between them is unobserved (section 2, "Speech
recognition"; section 4.2, "Alignments").  The model is

    p(y, z, c | x) ∝ exp(sum_i theta . phi_i(x, c_{i-1}, (y_i, a_i)) + theta . phi_end(c_L)) * kappa(y, c)

**Alignments.**  An alignment is a bipartite graph between output positions
1..L and input positions 1..L' with no crossing edges, every node of degree at
least one, and no many-to-many group (each connected component has a single
character or a single phoneme).  It is written as one label per *output*
position: ``label = a * num_chars + char`` with the *advance* a in 0..A (A =
``max_advance``), the number of new phonemes character i covers.  a_i >= 1:
character i covers phonemes z_{i-1}+1 .. z_i (a_i >= 2: many-to-one); a_i = 0:
character i shares phoneme z_i = z_{i-1} with character i - 1 (one-to-many).
Here z_i = a_1 + ... + a_i.  The constraints (tested against the direct
definition by enumeration) are exactly: a_1 >= 1; a_i = 0 is forbidden when
a_{i-1} >= 2 (phoneme z_{i-1} would be shared by two characters, one of which
covers two phonemes: a many-to-many group) -- every other pair of neighbours is
allowed, a_{i-1} = 0 followed by a_i >= 2 included, since character i's
phonemes are all new; and z_L = L'.  Encoded this way the alignments of (x, y)
with at most A phonemes per character are in one-to-one correspondence with
the label sequences over y that satisfy the constraints.

**Contexts** (section 4.2: "we augment the context c_i to keep track of what y_i
most recently aligned to ... maintain the B best contexts at position i
separately for each of the L' possible values of z_i").  A context at output
position i is a value of the alignment state (z_i, g_i) -- z_i the phoneme y_i
last aligned to, g_i = [a_i >= 2] the one bit the constraint needs -- and a
determined suffix of labels: the set of prefixes in that state that end in the
suffix.  For every z there are two roots, (z, g = 0, ()) and (z, g = 1, ()),
which together cover every prefix with z_i = z (coverage); a non-root context's
last label fixes its g, and suffix sets are nested or disjoint (closure).
RCMS (section 4, appendix A) per position: expand every context of C_{i-1} by
every allowed label, keep the expanded elements sorted lexicographically from
the last label back with their longest-common-suffix array (labels ordered by
id, so the g = 0 labels come first), select the B heaviest by forward mass
separately for each new z, and merge the rest into their least selected
ancestor, or into the root of their (z, g) when there is none, by the
depth-first pass of appendix A (the kernel of :mod:`fsmlearn.rcm.contexts`,
run once over the whole position: the groups are separated by a zero lcs).
The two elements root(z, 0) x {l} and root(z, 1) x {l} have the same
determined suffix (l); they are one element (their union, with both roots as
parents).  Beam search is the outside weight -inf on arcs leaving roots (and
on their final weights), as in :mod:`fsmlearn.rcm.model`; its roots are then
dropped.  Elements that cannot reach z = L' within ``max_len`` positions are
never made.

**Variable length.**  Positions run 1..max_len (default 2 L' + 2); every
context with z = L' is final, its final weight the end feature, so the machine
sums over all output lengths up to max_len.

**Machine.**  The contexts of all positions are the states of one layered
acyclic machine (log semiring, weights -score): from each context c of
C_{i-1} one arc per allowed label to f_i(c, label), labelled label + 1.  All
inference is the engine's: log Z and arc posteriors by
:func:`fsmlearn.algo.forward_backward`, the best output by
:func:`fsmlearn.algo.best_path`.  p(z | x, y) under the same contexts is the
same machine restricted to the arcs that spell y (arcs of position i <= L with
character y_i; final weights only at position L), :meth:`AlignLattice.machine`
with ``allowed``.

**Features** (hashed: ids are a fixed splitmix-style hash of integer tuples
computed in numba, masked to ``2 ** hash_bits``; theta is a dense float64
array of that size):

- ``ngram``: the (n + 1)-gram of characters sigma(c_{i-1}, y_i) over Y ∪ {★}
  with BOS before the start (equation 6; n = 4 is the paper's 5-gram); with
  ``backoff`` also every shorter suffix gram;
- ``edge``: (y_i, a_i, x_{z_i}); ``edge_left``: (y_i, a_i, x_{z_i-m..z_i}) with
  m = max(a_i - 1, 1): every phoneme a many-to-one character covers, or the
  left neighbour of the phoneme a character aligns to; ``edge_right``:
  (y_i, a_i, x_{z_i}, x_{z_i+1}) (BOS and EOS phonemes at the ends);
- ``edge_bigram`` (the alignment 2-gram: the previous edge and this one):
  (y_{i-1}, a_{i-1}, x_{z_{i-1}}, y_i, a_i, x_{z_i}), with ★ for the previous
  label where the context does not determine it (BOS at i = 1);
- ``end``: the final n-gram (y_{L-n+1..L}, EOS) on the extended alphabet.

Decoding (the best output, the k best, posterior marginals, the best alignment) is
:mod:`fsmlearn.rcm.align_decode`.

Public names: AlignRCM, AlignLattice, ArcPool, rcms_align, feature_id, label_of,
advances_valid, method_outside, allowed_labels, STAR, BOS, EOS, TEMPLATES, default_max_len.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from ..errors import ArgumentError
from ..fsm.machine import Machine
from .contexts import _heap_replace_root, _heap_sift_up, _merge_kernel

__all__ = ["AlignRCM", "AlignLattice", "ArcPool", "rcms_align", "feature_id", "label_of", "advances_valid",
           "method_outside", "allowed_labels", "STAR", "BOS", "EOS", "TEMPLATES", "default_max_len"]

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


@nb.njit(cache=True)
def _ngram_ids(hist, C, n, backoff, mask):
    """[K, C, G] ids of the n-gram features of each context (a row of ``hist``) and character."""
    K, W = hist.shape
    G = n + 1 if backoff else 1
    out = np.empty((K, C, G), np.int64)
    for k in range(K):
        for gi in range(G):
            j = n - gi
            h = _mix(_mix(_SEED, _T_NGRAM), j)
            for t in range(W - j, W):
                h = _mix(h, _ch(hist[k, t], C))
            for c in range(C):
                out[k, c, gi] = _fin(_mix(h, c), mask)
    return out


@nb.njit(cache=True)
def _end_ids(hist, C, n, backoff, mask):
    """[K, G] ids of the end features of each context."""
    K, W = hist.shape
    G = n + 1 if backoff else 1
    out = np.empty((K, G), np.int64)
    for k in range(K):
        for gi in range(G):
            j = n - gi
            h = _mix(_mix(_SEED, _T_END), j)
            for t in range(W - j, W):
                h = _mix(h, _ch(hist[k, t], C))
            out[k, gi] = _fin(h, mask)
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
        arr = np.asarray(x)
        if arr.ndim != 1 or arr.size == 0:
            raise ArgumentError(f"x must be a non-empty 1-d sequence of phonemes, got shape {arr.shape}")
        if not np.issubdtype(arr.dtype, np.integer):
            raise ArgumentError(f"x must hold integers, got dtype {arr.dtype}")
        bad = np.flatnonzero((arr < 0) | (arr >= self.num_phonemes))
        if bad.size:
            raise ArgumentError(f"phoneme {int(arr[bad[0]])} at input position {int(bad[0]) + 1} is out of "
                                f"range 0..{self.num_phonemes - 1}")
        return arr.astype(np.int64)

    def check_y(self, y) -> np.ndarray:
        """y (characters) as int64 [L], or ArgumentError naming the bad value."""
        arr = np.asarray(y)
        if arr.ndim != 1 or arr.size == 0:
            raise ArgumentError(f"y must be a non-empty 1-d sequence of characters, got shape {arr.shape}")
        if not np.issubdtype(arr.dtype, np.integer):
            raise ArgumentError(f"y must hold integers, got dtype {arr.dtype}")
        bad = np.flatnonzero((arr < 0) | (arr >= self.num_chars))
        if bad.size:
            raise ArgumentError(f"character {int(arr[bad[0]])} at output position {int(bad[0]) + 1} is out of "
                                f"range 0..{self.num_chars - 1}")
        return arr.astype(np.int64)

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


# ----------------------------------------------------------------------------- RCMS kernels
@nb.njit(cache=True, inline="always")
def _lae(a, b):
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@nb.njit(cache=True)
def _layer_scores(z, g, root, prev, ngs, edge_s, big_s, use_big, C, A, Lp, lo, outside, out_on):
    """S[k, v]: the score of label v after context k (natural log), -inf where not allowed
    (a = 0 after g = 1, z + a beyond L' or below ``lo``, leaving a root under outside -inf)."""
    K = z.size
    V = C * (A + 1)
    S = np.empty((K, V))
    for k in range(K):
        zk = z[k]
        dead = root[k] and out_on and outside == -np.inf
        for v in range(V):
            a = v // C
            zn = zk + a
            if dead or (a == 0 and g[k] == 1) or zn > Lp or zn < lo:
                S[k, v] = -np.inf
                continue
            s = ngs[k, v % C] + edge_s[zk * V + v]
            if use_big:
                s += big_s[(zk * (V + 2) + prev[k]) * V + v]
            if root[k] and out_on:
                s += outside
            S[k, v] = s
    return S


@nb.njit(cache=True)
def _expand(pz, plen, plcs, pm, pt, zoff, znr, zr0, zr1, S, tallow, lo_t, last, lo, Lp, C, A, target_only):
    """Step 1 of appendix A for one position, per new z: the expanded elements in sorted order
    (z' ascending, then label, then the parent's order; the root pair last in a label block)
    with lens, lcs, forward masses (model, target), validity, segment starts per z' and the
    block start of each (source z, label)."""
    V = C * (A + 1)
    blk = np.full((Lp + 1, V), -1, np.int64)
    E = 0
    for zn in range(lo, Lp + 1):
        for v in range(V):
            zs = zn - v // C
            if zs < 0 or zoff[zs + 1] == zoff[zs]:
                continue
            blk[zs, v] = E
            E += znr[zs] + 1
    e_z = np.empty(E, np.int64)
    e_v = np.empty(E, np.int64)
    e_par = np.empty(E, np.int64)
    lens = np.empty(E, np.int64)
    lcs = np.empty(E, np.int64)
    m = np.full(E, -np.inf)
    t = np.full(E, -np.inf)
    valid = np.zeros(E, np.bool_)
    seg = np.empty(Lp + 2 - lo, np.int64)
    e = 0
    for zn in range(lo, Lp + 1):
        seg[zn - lo] = e
        for v in range(V):
            zs = zn - v // C
            if zs < 0 or zoff[zs + 1] == zoff[zs]:
                continue
            # the target's mass: y_i allowed, and y can still be finished (enough phonemes left, and
            # not at z = L' before position L after a >= 2, where only a = 0 could follow)
            tok = tallow[v] and zn >= lo_t and not (zn == Lp and not last and v // C >= 2)
            nr = znr[zs]
            for r in range(nr + 1):
                e_z[e] = zn
                e_v[e] = v
                if r < nr:
                    k = zoff[zs] + r
                    e_par[e] = k
                    lens[e] = plen[k] + 1
                    lcs[e] = plcs[k] + 1 if r < nr - 1 else 1
                    s = S[k, v]
                    if s > -np.inf and (tok or not target_only):
                        valid[e] = True
                        m[e] = pm[k] + s
                        if tok:
                            t[e] = pt[k] + s
                else:
                    e_par[e] = -1
                    lens[e] = 1
                    lcs[e] = 0
                    for rr in (zr0[zs], zr1[zs]):
                        if rr < 0:
                            continue
                        s = S[rr, v]
                        if s > -np.inf and (tok or not target_only):
                            valid[e] = True
                            m[e] = _lae(m[e], pm[rr] + s)
                            if tok:
                                t[e] = _lae(t[e], pt[rr] + s)
                e += 1
    seg[Lp + 1 - lo] = e
    return e_z, e_v, e_par, lens, lcs, m, t, valid, seg, blk


@nb.njit(cache=True)
def _select_segments(seg, vals, B, active):
    """Step 2, per segment: mark the B elements of highest finite value (ties to the earlier).

    One pass per segment with a heap of the B best so far, its root the worst (the least value,
    of those the latest element): a later element displaces it only with a strictly larger
    value, so the kept set is that of a sort by (value descending, position ascending)."""
    if B <= 0:
        return
    hv = np.empty(B)
    hi = np.empty(B, np.int64)
    for s in range(seg.size - 1):
        n = 0
        for e in range(seg[s], seg[s + 1]):
            x = vals[e]
            if not x > -np.inf:
                continue
            if n < B:            # push
                _heap_sift_up(hv, hi, n, x, e)
                n += 1
            elif x > hv[0]:      # replace the root (a later element only with a larger value)
                _heap_replace_root(hv, hi, B, x, e)
        for j in range(n):
            active[hi[j]] = True


@nb.njit(cache=True)
def _finish(i, out_e, out_lcs, owner_rev, e_z, e_v, e_par, lens, m, t, valid, phist, C, A, Lp, keep_roots):
    """Step 3's bookkeeping: the new contexts in order (per z: the live selected elements in
    sorted order, then the roots (z, 0) and (z, 1) when they absorbed a valid element), their
    attributes, lcs within each z list, forward masses, and each element's context (-1: none)."""
    n_act = out_e.size
    E = lens.size
    W = phist.shape[1]
    big = np.int64(1) << 62
    sel = out_e[::-1].copy()
    owner = np.full(E, -1, np.int64)
    for e in range(E):
        if owner_rev[e] >= 0:
            owner[e] = n_act - 1 - owner_rev[e]
    live = np.zeros(n_act, np.bool_)
    root_live = np.zeros((Lp + 1, 2), np.bool_)
    for e in range(E):
        if not valid[e]:
            continue
        if owner[e] >= 0:
            live[owner[e]] = True
        elif keep_roots:
            root_live[e_z[e], 1 if e_v[e] // C >= 2 else 0] = True
    new_sel = np.full(n_act, -1, np.int64)
    root_idx = np.full((Lp + 1, 2), -1, np.int64)
    cnt = 0
    j = 0
    for zz in range(Lp + 1):
        while j < n_act and e_z[sel[j]] == zz:
            if live[j]:
                new_sel[j] = cnt
                cnt += 1
            j += 1
        for gg in range(2):
            if root_live[zz, gg]:
                root_idx[zz, gg] = cnt
                cnt += 1
    nz = np.empty(cnt, np.int64)
    ng = np.empty(cnt, np.int64)
    nroot = np.zeros(cnt, np.bool_)
    nlen = np.zeros(cnt, np.int64)
    npar = np.full(cnt, -1, np.int64)
    nlab = np.full(cnt, -1, np.int64)
    nlcs = np.zeros(cnt, np.int64)
    nhist = np.empty((cnt, W), np.int64)
    fm = np.full(cnt, -np.inf)
    ft = np.full(cnt, -np.inf)
    for j in range(n_act):
        q = new_sel[j]
        if q < 0:
            continue
        e = sel[j]
        v = e_v[e]
        nz[q] = e_z[e]
        ng[q] = 1 if v // C >= 2 else 0
        nlen[q] = lens[e]
        npar[q] = e_par[e]
        nlab[q] = v
        for s in range(W - 1):
            if e_par[e] >= 0:
                nhist[q, s] = phist[e_par[e], s + 1]
            else:
                nhist[q, s] = BOS if i - W + 1 + s <= 0 else STAR
        nhist[q, W - 1] = v
    for zz in range(Lp + 1):
        for gg in range(2):
            q = root_idx[zz, gg]
            if q < 0:
                continue
            nz[q] = zz
            ng[q] = gg
            nroot[q] = True
            for s in range(W):
                nhist[q, s] = BOS if i - W + 1 + s <= 0 else STAR
    # lcs of consecutive live contexts of one z: the least lcs between them in the sorted list
    last_q = -1
    run = big
    prev_z = -1
    for j in range(n_act):
        zz = e_z[sel[j]]
        if zz != prev_z:
            last_q = -1
            run = big
            prev_z = zz
        if live[j]:
            if last_q >= 0:
                nlcs[last_q] = run
            last_q = new_sel[j]
            run = big
        if j < n_act - 1:
            run = min(run, out_lcs[n_act - 1 - j])
    ctx = np.full(E, -1, np.int64)
    for e in range(E):
        o = owner[e]
        if o >= 0:
            q = new_sel[o]
        else:
            q = root_idx[e_z[e], 1 if e_v[e] // C >= 2 else 0]
        ctx[e] = q
        # the largest term of each context's log-sum (the sums are taken by numpy: _log_sums)
        if q >= 0 and valid[e]:
            if m[e] > fm[q]:
                fm[q] = m[e]
            if t[e] > ft[q]:
                ft[q] = t[e]
    # the terms of the log-sums in element order, each less its context's largest: (context, term)
    # of every valid element with a context and a finite mass, model and target
    mq = np.empty(E, np.int64)
    md = np.empty(E)
    tq = np.empty(E, np.int64)
    td = np.empty(E)
    nm = 0
    nt = 0
    for e in range(E):
        q = ctx[e]
        if q < 0 or not valid[e]:
            continue
        if m[e] > -np.inf:
            mq[nm] = q
            md[nm] = m[e] - fm[q]
            nm += 1
        if t[e] > -np.inf:
            tq[nt] = q
            td[nt] = t[e] - ft[q]
            nt += 1
    return nz, ng, nroot, nlen, npar, nlab, nlcs, nhist, fm, ft, ctx, sel, mq[:nm], md[:nm], tq[:nt], td[:nt]


def _log_sums(q, d, top):
    """log sum of exp per context: the terms ``d`` (each less its context's largest term
    ``top``, in element order) of contexts ``q`` (vectorised: numpy's exp is several times
    numba's here)."""
    s = np.bincount(q, weights=np.exp(d), minlength=top.size)
    with np.errstate(divide="ignore"):
        return np.where(top > -np.inf, top + np.log(s), -np.inf)


@nb.njit(cache=True)
def _arcs(pz, proot, zoff, znr, S, blk, ctx, nroot, tallow, lo_t, last, C, A, Lp, target_only, src_off, dst_off,
          n, ng, src, dst, lab, grp, sc, diff, gsrc, gdst, glab, gtop, gbest):
    """The arcs (elements) of one position in source order, context k --v--> f(k, v), and their
    machine arcs: the elements of one source that land in the same root are one machine arc
    (label 0), an element that lands in a selected context is one of its own (label v + 1).
    Written into the lattice-wide buffers from arc n and machine arc ng (room for K * V of each):
    source, destination, label, machine arc and score S[k, v] of each arc;
    source, destination and label of each machine arc.  Also the machine's pool of these
    scores (see :func:`_pool`): per machine arc the largest score and the label of the first
    element that has it, per arc its score less that.  Returns the new (n, ng)."""
    K, V = S.shape
    rq = np.empty(V, np.int64)      # the roots this source reached so far, and their machine arcs
    rg = np.empty(V, np.int64)
    for k in range(K):
        zs = pz[k]
        rank = znr[zs] if proot[k] else k - zoff[zs]
        nr = 0
        n0 = n
        for v in range(V):
            if not S[k, v] > -np.inf:
                continue
            zn = zs + v // C
            if target_only and not (tallow[v] and zn >= lo_t and not (zn == Lp and not last and v // C >= 2)):
                continue
            b = blk[zs, v]
            if b < 0:
                continue
            q = ctx[b + rank]
            if q < 0:
                continue
            src[n] = src_off + k
            dst[n] = dst_off + q
            lab[n] = v
            sc[n] = S[k, v]
            gi = -1
            if nroot[q]:
                for j in range(nr):
                    if rq[j] == q:
                        gi = rg[j]
                        break
            if gi < 0:
                gi = ng
                gsrc[ng] = src_off + k
                gdst[ng] = dst_off + q
                glab[ng] = 0 if nroot[q] else v + 1
                gtop[ng] = -np.inf
                gbest[ng] = -1
                ng += 1
                if nroot[q]:
                    rq[nr] = q
                    rg[nr] = gi
                    nr += 1
            grp[n] = gi
            if sc[n] > gtop[gi]:
                gtop[gi] = sc[n]
                gbest[gi] = v
            n += 1
        for j in range(n0, n):        # this source's machine arcs are complete
            t = gtop[grp[j]]
            diff[j] = sc[j] - (t if t > -np.inf else 0.0)
    return n, ng


@nb.njit(cache=True)
def _z_lists(z, root, g, Lp):
    """Per z: the offset of its list, its number of non-roots, and its roots' indices (-1: none)."""
    zoff = np.zeros(Lp + 2, np.int64)
    znr = np.zeros(Lp + 1, np.int64)
    zr0 = np.full(Lp + 1, -1, np.int64)
    zr1 = np.full(Lp + 1, -1, np.int64)
    for k in range(z.size):
        zoff[z[k] + 1] += 1
        if root[k]:
            if g[k] == 0:
                zr0[z[k]] = k
            else:
                zr1[z[k]] = k
        else:
            znr[z[k]] += 1
    for zz in range(Lp + 1):
        zoff[zz + 1] += zoff[zz]
    return zoff, znr, zr0, zr1


@nb.njit(cache=True)
def _arc_scores(arc_src, arc_lab, ctx_z, ctx_prev, ctx_root_out, ngs, edge_s, big_s, use_big, C, V, outside):
    E = arc_src.size
    out = np.empty(E)
    for a in range(E):
        k = arc_src[a]
        v = arc_lab[a]
        zk = ctx_z[k]
        s = ngs[k, v % C] + edge_s[zk * V + v]
        if use_big:
            s += big_s[(zk * (V + 2) + ctx_prev[k]) * V + v]
        if ctx_root_out[k]:
            s += outside
        out[a] = s
    return out


@nb.njit(cache=True)
def _weighted_length(p, arc_src, ctx_len):
    tot = 0.0
    acc = 0.0
    for a in range(p.size):
        tot += p[a]
        acc += p[a] * ctx_len[arc_src[a]]
    return acc / tot if tot > 0 else 0.0


@nb.njit(cache=True)
def _pool(score, arc, label, M, bounds):
    """Per machine arc, the largest score of its elements and the label of the first element
    that has it (elements of one arc come in label order; -1 where none is finite); and per
    element score - top[arc] (top 0 where -inf), the exponent of its share.  ``bounds`` cut the
    elements into blocks that no machine arc straddles (the positions), done one at a time
    while they are in cache."""
    top = np.full(M, -np.inf)
    arg = np.full(M, -1, np.int64)
    diff = np.empty(score.size)
    for blk in range(bounds.size - 1):
        a = bounds[blk]
        b = bounds[blk + 1]
        for j in range(a, b):
            g = arc[j]
            if score[j] > top[g]:
                top[g] = score[j]
                arg[g] = label[j]
        for j in range(a, b):
            t = top[arc[j]]
            diff[j] = score[j] - (t if t > -np.inf else 0.0)
    return top, arg, diff


@nb.njit(cache=True)
def _pool_total(arc, scale, M):
    """Per machine arc the sum of its elements' scale, in element order (np.bincount's sum)."""
    total = np.zeros(M)
    for j in range(arc.size):
        total[arc[j]] += scale[j]
    return total


def _src_start(gsrc, N):
    out = np.zeros(N + 1, np.int64)
    np.cumsum(np.bincount(gsrc, minlength=N), out=out[1:])
    return out


@nb.njit(cache=True)
def _restrict_groups(arc_group, elems, M):
    """The machine arcs that carry some of ``elems`` (ascending) and each element's arc among them."""
    used = np.zeros(M, np.bool_)
    for j in range(elems.size):
        used[arc_group[elems[j]]] = True
    renum = np.empty(M, np.int64)
    n = 0
    for g in range(M):
        if used[g]:
            renum[g] = n
            n += 1
    kept = np.empty(n, np.int64)
    for g in range(M):
        if used[g]:
            kept[renum[g]] = g
    arc = np.empty(elems.size, np.int64)
    for j in range(elems.size):
        arc[j] = renum[arc_group[elems[j]]]
    return kept, arc


@nb.njit(cache=True)
def _restrict_elems(arc_layer_start, arc_lab, allowed, L):
    """The arcs of positions 1..L whose label is allowed at their position, ascending."""
    out = np.empty(arc_layer_start[L + 1], np.int64)
    n = 0
    for i in range(1, L + 1):
        for a in range(arc_layer_start[i], arc_layer_start[i + 1]):
            if allowed[i - 1, arc_lab[a]]:
                out[n] = a
                n += 1
    return out[:n].copy()


# ----------------------------------------------------------------------------- the lattice
@dataclass
class ArcPool:
    """How a machine of an :class:`AlignLattice` carries the lattice's arcs (the elements).

    The machine has one arc per (source context, destination) pair: the elements of a context
    that land in the same root of the next layer (most of them under RCMS) are one arc, labelled
    0 and weighted -log sum exp(their scores); an element that lands in a selected context is an
    arc of its own, labelled label + 1.  Path sums are unchanged, so log Z and the final
    posteriors are the element machine's; an element's posterior is its arc's times its share
    exp(score - log-sum) (:meth:`element_posteriors`), and the best path is that of the same arcs
    weighted by each one's best element (:meth:`best_machine`).

    Attributes:
        num_lattice_arcs: E, the lattice's arcs.
        elements: int64 [E'], the lattice arcs in the machine (ascending), or None when it has
            all E of them (then E' = E, in the lattice's order).
        arc: int64 [E'], the machine arc that carries each.
        label: int32 [E'], each element's label (0-based).
        scale: float64 [E'], exp(score - top[arc]).
        top: float64 [M], per machine arc the largest score of its elements.
        total: float64 [M], per machine arc the sum of its elements' scale (its weight is
            -(top + log total)).
        best_label: int64 [M], the label of the first element with the largest score.
    """
    num_lattice_arcs: int
    elements: np.ndarray | None
    arc: np.ndarray
    label: np.ndarray
    scale: np.ndarray
    top: np.ndarray
    total: np.ndarray
    best_label: np.ndarray

    @property
    def num_machine_arcs(self) -> int:
        return int(self.top.size)

    def arc_factor(self, arc_posteriors) -> np.ndarray:
        """float64 [M]: arc posterior / total, the factor of each element's scale in its posterior."""
        p = np.asarray(arc_posteriors, np.float64)
        if p.shape != self.top.shape:
            raise ArgumentError(f"arc posteriors have shape {p.shape}; expected {self.top.shape}")
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.total > 0, p / np.where(self.total > 0, self.total, 1.0), 0.0)

    def element_posteriors(self, arc_posteriors) -> np.ndarray:
        """float64 [E] over the lattice's arcs: each element's posterior (its machine arc's
        posterior times its share of the arc's weight; 0 for elements not in the machine)."""
        q = self.arc_factor(arc_posteriors)
        post = q[self.arc] * self.scale
        if self.elements is None:
            return post
        out = np.zeros(self.num_lattice_arcs)
        out[self.elements] = post
        return out

    def best_machine(self, machine: Machine) -> Machine:
        """The machine with each arc weighted by its best element and labelled with its label + 1
        (its best path is the best element path)."""
        if machine.num_arcs != self.top.size:
            raise ArgumentError(f"the machine has {machine.num_arcs} arcs; this pool has {self.top.size}")
        return machine.replace(weight=-self.top, ilabel=(self.best_label + 1).astype(np.int32))


@dataclass
class AlignLattice:
    """The contexts RCMS chose for one input, all positions, and their arcs.

    Contexts are numbered globally, position by position (``layer_start``), and within a
    position per z: the non-root contexts in sorted order, then the roots.

    Attributes:
        model: the :class:`AlignRCM` (its sizes and feature settings; scores take any theta).
        x: int64 [L'].
        max_len: the number of output positions.
        outside: the weight on leaving a root (0: RCMS; -inf: beam search).
        layer_start: int64 [max_len + 2], the first context of each position.
        ctx_z, ctx_g, ctx_len, ctx_parent, ctx_label, ctx_lcs: int64 [N] per context: z, the
            constraint bit g, the number of determined labels, the context it was expanded from
            (-1 for roots and the root pair's elements), its last label (-1 for roots), the lcs
            with the next context of its z list (0 for the last non-root and the roots).
        ctx_root: bool [N].
        ctx_hist: int64 [N, max(n, 1)]: the last labels (STAR, BOS where not determined).
        ctx_forward, ctx_forward_target: float64 [N], the forward masses (model; target when a
            target was given) that selected them.
        arc_src: int64 [E], arc_dst: int32 [E]; arc_label: int32 [E] (0-based labels; the
            properties arc_ilabel = label + 1 and arc_layer, int32 [E], the position i of each arc);
            arc_layer_start: int64 [max_len + 2], the first arc of each position; arcs are sorted by
            source, then label.  These are the *elements* (one per context and allowed label).
        arc_group: int64 [E], the arc of the machine (:meth:`machine`) that carries each element;
        group_src: int64 [M], group_dst: int32 [M], group_ilabel: int32 [M]: the machine's arcs,
            one per (source, destination) pair (sorted by source): label 0 where the destination
            is a root (the pooled elements), the element's label + 1 where it is a selected
            context (one element); see :class:`ArcPool`.
        target: bool [L, V] of the labels allowed at each position of the target, or None.
        elements: with ``keep_elements``, per position a dict of the expanded elements
            (z, label, parent, lens, lcs, mass, target_mass, valid, active, context).
        built: the score tables and arc scores of the theta the lattice was built with
            (rcms_align's; :meth:`scores` reuses the arc scores while the tables are the same).
    """
    model: AlignRCM
    x: np.ndarray
    max_len: int
    outside: float
    layer_start: np.ndarray
    ctx_z: np.ndarray
    ctx_g: np.ndarray
    ctx_root: np.ndarray
    ctx_len: np.ndarray
    ctx_parent: np.ndarray
    ctx_label: np.ndarray
    ctx_lcs: np.ndarray
    ctx_hist: np.ndarray
    ctx_forward: np.ndarray
    ctx_forward_target: np.ndarray
    arc_src: np.ndarray
    arc_dst: np.ndarray
    arc_label: np.ndarray
    arc_layer_start: np.ndarray
    arc_group: np.ndarray
    group_src: np.ndarray
    group_dst: np.ndarray
    group_ilabel: np.ndarray
    ng_ids: np.ndarray
    end_ids: np.ndarray
    edge_ids: np.ndarray
    big_ids: np.ndarray
    target: np.ndarray | None = None
    elements: list | None = None
    built: _BuildTables | None = field(default=None, repr=False)

    def __post_init__(self):
        self.arc_dst = self.arc_dst.astype(np.int32, copy=False)
        self.group_dst = self.group_dst.astype(np.int32, copy=False)
        self.group_ilabel = self.group_ilabel.astype(np.int32, copy=False)
        if self.built is not None:
            self.built.scores.setflags(write=False)
        self.ctx_prev_index = self.ctx_prev
        for a in (self.arc_src, self.arc_dst, self.arc_label, self.arc_layer_start, self.arc_group,
                  self.group_src, self.group_dst, self.group_ilabel):
            a.setflags(write=False)      # read-only: machines share them instead of copying

    @property
    def num_contexts(self) -> int:
        return int(self.ctx_z.size)

    @functools.cached_property
    def _src_start(self) -> np.ndarray:
        """The model machine's CSR starts (read-only)."""
        out = _src_start(self.group_src, self.num_contexts)
        out.setflags(write=False)
        return out

    @functools.cached_property
    def arc_ilabel(self) -> np.ndarray:
        """int32 [E]: arc_label + 1, the machine's labels (read-only)."""
        out = (self.arc_label + 1).astype(np.int32)
        out.setflags(write=False)
        return out

    @functools.cached_property
    def arc_layer(self) -> np.ndarray:
        """int32 [E]: the position i of each arc (read-only)."""
        out = np.repeat(np.arange(self.max_len + 1, dtype=np.int32), np.diff(self.arc_layer_start))
        out.setflags(write=False)
        return out

    @property
    def num_arcs(self) -> int:
        """The lattice's arcs (elements)."""
        return int(self.arc_src.size)

    @property
    def num_machine_arcs(self) -> int:
        """The arcs of the model's machine (one per source and destination)."""
        return int(self.group_src.size)

    @property
    def ctx_layer(self) -> np.ndarray:
        """int64 [N]: the position of each context."""
        return np.repeat(np.arange(self.max_len + 1), np.diff(self.layer_start))

    @property
    def ctx_prev(self) -> np.ndarray:
        """int64 [N]: the previous-label index of the edge bigram (a label, V for STAR, V+1 for BOS)."""
        h = self.ctx_hist[:, -1]
        V = self.model.num_labels
        return np.where(h >= 0, h, np.where(h == STAR, V, V + 1))

    def suffix(self, k: int) -> tuple:
        """The determined suffix of context k (labels, oldest first)."""
        out = []
        q = int(k)
        for _ in range(int(self.ctx_len[k])):
            out.append(int(self.ctx_label[q]))
            q = int(self.ctx_parent[q])
        return tuple(out[::-1])

    def _tables(self, theta):
        th = self.model.theta if theta is None else np.asarray(theta, np.float64)
        if th.shape != self.model.theta.shape:
            raise ArgumentError(f"theta has shape {th.shape}; expected {self.model.theta.shape}")
        ngs = th[self.ng_ids].sum(axis=2)
        edge_s = th[self.edge_ids].sum(axis=1)
        big_s = th[self.big_ids] if self.model.edge_bigram else np.zeros(1)
        ends = th[self.end_ids].sum(axis=1)
        return ngs, edge_s, big_s, ends

    def scores(self, theta=None):
        """(arc scores float64 [E], end scores float64 [N]): theta . phi of every arc (the outside
        weight included) and of stopping at every context (-inf where it may not stop: z < L',
        position 0, or a root under outside -inf)."""
        ngs, edge_s, big_s, ends = self._tables(theta)
        root_out = self.ctx_root & (self.ctx_layer >= 1)
        out = self.outside if np.isfinite(self.outside) else 0.0
        b = self.built
        if (b is not None and _same_bits(edge_s, b.edge_s) and _same_bits(big_s, b.big_s)
                and _same_bits(ngs[:b.ngs.shape[0]], b.ngs)):
            s = b.scores        # the same tables: the same scores (read-only)
        else:
            s = _arc_scores(self.arc_src, self.arc_label, self.ctx_z, self.ctx_prev_index, root_out, ngs, edge_s,
                            big_s, self.model.edge_bigram, self.model.num_chars, self.model.num_labels, out)
        fin = np.full(self.num_contexts, -np.inf)
        stop = (self.ctx_z == self.x.size) & (self.ctx_layer >= 1)
        fin[stop] = ends[stop] + np.where(root_out[stop], self.outside, 0.0)
        return s, fin

    def machine(self, theta=None, allowed=None, length: int | None = None, scores=None):
        """The layered acyclic machine of these contexts (log semiring, start 0): the model's, or
        with ``allowed`` (bool [length, V]) its restriction to the elements of positions
        i <= length whose label is allowed at i, final only at position ``length``.

        The machine has one arc per (source context, destination) pair of the elements it keeps:
        the kept elements of a context that land in one root are one arc (label 0, weight
        -log sum exp of their scores; under a restriction only the allowed ones are summed), one
        that lands in a selected context an arc of its own (label + 1, weight -score).  Every
        path sum is the element machine's (see :class:`ArcPool`).

        Returns:
            (Machine, :class:`ArcPool`: which lattice arcs each machine arc carries, and their
            shares).
        """
        s, fin = self.scores(theta) if scores is None else scores
        N = self.num_contexts
        if allowed is None:
            elems = None
            final = -fin
            arc = self.arc_group
            M = self.group_src.size
            gsrc, dst, ilabel = self.group_src, self.group_dst, self.group_ilabel
            es, lab = s, self.arc_label
        else:
            allowed = np.asarray(allowed, bool)
            L = int(length)
            if allowed.shape != (L, self.model.num_labels) or not 1 <= L <= self.max_len:
                raise ArgumentError(f"allowed has shape {allowed.shape}; expected ({L}, {self.model.num_labels}) "
                                    f"with 1 <= {L} <= max_len {self.max_len}")
            elems = _restrict_elems(self.arc_layer_start, self.arc_label, allowed, L)
            final = np.full(N, np.inf)
            a, b = self.layer_start[L], self.layer_start[L + 1]
            final[a:b] = -fin[a:b]
            kept, arc = _restrict_groups(self.arc_group, elems, self.group_src.size)   # renumbered in order
            M = kept.size
            gsrc, dst, ilabel = self.group_src[kept], self.group_dst[kept], self.group_ilabel[kept]
            es, lab = s[elems], self.arc_label[elems]
        bt = self.built
        if elems is None and bt is not None and s is bt.scores:
            if bt.pooled is None:       # the build's pool of these very scores: complete it once
                scale = np.exp(bt.diff)
                total = _pool_total(arc, scale, M)
                with np.errstate(divide="ignore"):
                    w = -(np.where(bt.top > -np.inf, bt.top, 0.0) + np.log(total))
                for arr in (scale, total, w, bt.top, bt.best):
                    arr.setflags(write=False)
                bt.pooled = (scale, total, w)
            top, best = bt.top, bt.best
            scale, total, w = bt.pooled
        else:
            bounds = self.arc_layer_start if elems is None else np.array([0, es.size], np.int64)
            top, best, scale = _pool(es, arc, lab, M, bounds)
            np.exp(scale, out=scale)
            total = _pool_total(arc, scale, M)
            safe = np.where(top > -np.inf, top, 0.0)
            with np.errstate(divide="ignore"):
                w = -(safe + np.log(total))
        src_start = self._src_start if elems is None else _src_start(gsrc, N)
        for arr in (src_start, dst, ilabel, w, final):
            arr.setflags(write=False)    # fresh or the lattice's: the machine may share them
        m = Machine(start=0, final=final, src_start=src_start, dst=dst, ilabel=ilabel, weight=w, semiring="log")
        return m, ArcPool(self.num_arcs, elems, arc, lab, scale, top, total, best)

    def element_machine(self, theta=None, scores=None) -> Machine:
        """The machine with one arc per element (lattice arc), labelled label + 1 and weighted
        -score, arcs in the lattice's order: every (y, z) of the contexts is one path of it (the
        pooled :meth:`machine` has the same path sums with fewer arcs; this one is what the k best
        paths need, since a pooled arc keeps only its best element's label)."""
        s, fin = self.scores(theta) if scores is None else scores
        src_start = _src_start(self.arc_src, self.num_contexts)
        return Machine(start=0, final=-fin, src_start=src_start, dst=self.arc_dst, ilabel=self.arc_ilabel,
                       weight=-s, semiring="log")

    def target_machine(self, theta=None, scores=None):
        """The machine restricted to the target the lattice was built with."""
        if self.target is None:
            raise ArgumentError("this lattice was built without a target (y)")
        return self.machine(theta, self.target, self.target.shape[0], scores=scores)

    def mean_context_length(self, posteriors, machine: Machine | None = None) -> float:
        """The average number of determined labels of c_{i-1}, weighted by the arc posteriors of
        a machine of this lattice over all arcs (the statistic of section 7); ``posteriors`` is
        float64 [E] over the lattice's arcs (element posteriors), or with ``machine`` (one of
        :meth:`machine`'s) over that machine's arcs (the same figure: an arc's elements share
        its source)."""
        p = np.asarray(posteriors, np.float64)
        src = self.arc_src if machine is None else machine.arc_src
        if p.shape != src.shape:
            raise ArgumentError(f"posteriors have shape {p.shape}; expected {src.shape}")
        if machine is not None and machine.num_states != self.num_contexts:
            raise ArgumentError(f"the machine has {machine.num_states} states; the lattice {self.num_contexts} "
                                f"contexts")
        return _weighted_length(p, src, self.ctx_len)


def _same_bits(a, b) -> bool:
    """Whether two float64 arrays are the same bit for bit (signed zeros and NaNs included)."""
    return a.shape == b.shape and np.array_equal(np.ascontiguousarray(a).view(np.int64),
                                                 np.ascontiguousarray(b).view(np.int64))


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


class _ArcBuffers:
    """The lattice-wide arc buffers rcms_align's positions write into, grown (doubled) as
    needed; the lattice keeps views of them."""
    ARC = (np.int64, np.int32, np.int32, np.int64, np.float64, np.float64)   # src dst lab grp score diff
    GROUP = (np.int64, np.int32, np.int32, np.float64, np.int64)             # src dst ilabel top best

    def __init__(self, cap: int):
        cap = max(int(cap), 1024)
        self.arc = [np.empty(cap, t) for t in self.ARC]
        self.group = [np.empty(cap, t) for t in self.GROUP]
        self.arrays = (*self.arc, *self.group)

    @staticmethod
    def _grow(arrs, used, need):
        if need <= arrs[0].size:
            return arrs
        new = max(need, 2 * arrs[0].size)
        out = []
        for a in arrs:
            b = np.empty(new, a.dtype)
            b[:used] = a[:used]
            out.append(b)
        return out

    def reserve(self, used_arcs, used_groups, more):
        """Room for ``more`` arcs and machine arcs after the used ones."""
        if used_arcs + more > self.arc[0].size or used_groups + more > self.group[0].size:
            self.arc = self._grow(self.arc, used_arcs, used_arcs + more)
            self.group = self._grow(self.group, used_groups, used_groups + more)
            self.arrays = (*self.arc, *self.group)

    def take(self, n, ng):
        return [a[:n] for a in self.arc], [a[:ng] for a in self.group]


@dataclass
class _BuildTables:
    """What the lattice's arc scores were made of when it was built (the n-gram score of every
    context below the last position, the edge and edge-bigram tables) and those scores:
    :meth:`AlignLattice.scores` returns them again when the tables it computes have the same
    bits (the scores are a function of the tables: bit for bit what it would compute).  With
    them the pool of the model's machine (:func:`_pool`'s top, best and exponents, made by
    _arcs), whose shares, sums and weights the first :meth:`AlignLattice.machine` on these
    scores completes (``pooled``) and later ones reuse."""
    ngs: np.ndarray
    edge_s: np.ndarray
    big_s: np.ndarray
    scores: np.ndarray
    top: np.ndarray
    best: np.ndarray
    diff: np.ndarray
    pooled: tuple | None = None


def rcms_align(model: AlignRCM, x, B: int, *, y=None, advances=None, select: str = "model",
               outside: float = 0.0, max_len: int | None = None, exact_order: int | None = None,
               target_only: bool = False, keep_elements: bool = False) -> AlignLattice:
    """Choose contexts by RCMS with per-z context sets and build their lattice.

    Args:
        model: the features and weights.
        x: int [L'] phonemes.
        B: contexts kept per position and per z besides the roots (per selection rule).
        y: optional int [L] characters: the target (p(z | x, y)), needed by ``select`` "target"
            and "both" and by :meth:`AlignLattice.target_machine`.
        advances: optional int [L], a fixed alignment of y: the target is then the single (y, z).
        select: "model" (the B heaviest by the model's forward mass), "target" (by the mass of
            the target-restricted model), "both" (the union of the two, at every position).
        outside: weight on leaving a root context (0: RCMS, -inf: beam search).
        max_len: the number of output positions (default :func:`default_max_len`, at least len(y)).
        exact_order: keep every element of at most this many determined labels instead (the
            exact model of that order; B and select are then ignored).
        target_only: make only the arcs of the target (the restricted machine, cheaper).
        keep_elements: keep every position's expanded elements (for tests).

    Returns:
        :class:`AlignLattice`.

    Raises:
        ArgumentError: bad x, y, advances, B < 0, an unknown ``select``, max_len < len(y), ...
    """
    xa = model.check_x(x)
    Lp = xa.size
    if not isinstance(B, (int, np.integer)) or B < 0:
        raise ArgumentError(f"B must be an integer >= 0, got {B!r}")
    if select not in ("model", "target", "both"):
        raise ArgumentError(f"select must be 'model', 'target' or 'both', got {select!r}")
    if exact_order is not None and exact_order < 0:
        raise ArgumentError(f"exact_order must be >= 0, got {exact_order}")
    outside = float(outside)
    if math.isnan(outside) or outside == math.inf:
        raise ArgumentError(f"outside must be a number or -inf, got {outside}")
    ya = None
    if y is not None:
        ya = model.check_y(y)
    elif advances is not None:
        raise ArgumentError("advances given without y")
    if (select != "model" or target_only) and ya is None:
        raise ArgumentError(f"select={select!r} / target_only need the target y")
    L = 0 if ya is None else ya.size
    if max_len is None:
        max_len = L if target_only else max(default_max_len(Lp), L)
    if not isinstance(max_len, (int, np.integer)) or max_len < max(1, L):
        raise ArgumentError(f"max_len must be an integer >= max(1, len(y) = {L}), got {max_len!r}")
    max_len = int(max_len)
    C, A, V, W, n = model.num_chars, model.max_advance, model.num_labels, model.width, model.n
    allowed = None
    if ya is not None:
        adv = None if advances is None else model.check_advances(advances, L, Lp)
        allowed = allowed_labels(model, ya, adv)
    mask = (1 << model.hash_bits) - 1
    theta = model.theta
    xe = np.concatenate([[BOS], xa, [EOS]]).astype(np.int64)
    edge_ids = _edge_ids(xe, C, A, mask)
    edge_s = theta[edge_ids].sum(axis=1)
    if model.edge_bigram:
        big_ids = _bigram_ids(xe, C, A, mask)
        big_s = theta[big_ids]
    else:
        big_ids = np.zeros(1, np.int64)
        big_s = np.zeros(1)
    keep_roots = math.isfinite(outside)
    no_allow = np.zeros(V, np.bool_)

    # position 0: the empty prefix, a root with z = 0 and g = 1 (so that a_1 >= 1)
    z = np.zeros(1, np.int64)
    g = np.ones(1, np.int64)
    root = np.ones(1, np.bool_)
    ln = np.zeros(1, np.int64)
    par = np.full(1, -1, np.int64)
    lab = np.full(1, -1, np.int64)
    lcs = np.zeros(1, np.int64)
    hist = np.full((1, W), BOS, np.int64)
    fm = np.zeros(1)
    ft = np.zeros(1) if ya is not None else np.full(1, -np.inf)
    parts = {k: [] for k in ("z", "g", "root", "len", "par", "lab", "lcs", "hist", "fm", "ft", "ng", "ngs")}
    # every position has at most (L' + 1) (B r + 2) contexts (B per rule r and z, and the roots), each with at
    # most V arcs: room for all (never copied; untouched pages cost nothing, and malloc reuses what it has)
    rules = 2 if select == "both" else 1
    buf = _ArcBuffers(max_len * (Lp + 1) * (B * rules + 2) * V if exact_order is None else 1 << 16)
    n_arcs = 0
    n_groups = 0
    arc_starts = [0, 0]
    sizes = [1]
    elements = [] if keep_elements else None
    offset = 0
    for i in range(1, max_len + 2):
        ng_ids = _ngram_ids(hist, C, n, model.backoff, mask)
        for key, val in (("z", z), ("g", g), ("root", root), ("len", ln), ("par", par), ("lab", lab),
                         ("lcs", lcs), ("hist", hist), ("fm", fm), ("ft", ft), ("ng", ng_ids)):
            parts[key].append(val)
        if i == max_len + 1:
            break
        K = z.size
        ngs = theta[ng_ids].sum(axis=2)
        parts["ngs"].append(ngs)
        prev_idx = np.where(hist[:, -1] >= 0, hist[:, -1], np.where(hist[:, -1] == STAR, V, V + 1))
        lo = max(1, Lp - A * (max_len - i))
        S = _layer_scores(z, g, root, prev_idx, ngs, edge_s, big_s, model.edge_bigram, C, A, Lp, lo, outside,
                          i >= 2)
        zoff, znr, zr0, zr1 = _z_lists(z, root, g, Lp)
        if ya is not None and i <= L:
            tallow = allowed[i - 1]
            lo_t = max(1, Lp - A * (L - i))
        else:
            tallow = no_allow
            lo_t = Lp + 1
        e_z, e_v, e_par, lens, e_lcs, m, t, valid, seg, blk = _expand(
            z, ln, lcs, fm, ft, zoff, znr, zr0, zr1, S, tallow, lo_t, i == L, lo, Lp, C, A, target_only)
        if exact_order is not None:
            active = lens <= exact_order
        else:
            active = np.zeros(e_z.size, np.bool_)
            if select in ("model", "both"):
                _select_segments(seg, m, B, active)
            if select in ("target", "both"):
                _select_segments(seg, t, B, active)
        out_e, out_lcs, owner_rev, _ = _merge_kernel(lens, e_lcs, active, m)
        (nz, ngg, nroot, nlen, npar, nlab, nlcs, nhist, nfm, nft, ctx, sel, mq, md, tq, td) = _finish(
            i, out_e, out_lcs, owner_rev, e_z, e_v, e_par, lens, m, t, valid, hist, C, A, Lp, keep_roots)
        nfm = _log_sums(mq, md, nfm)
        if ya is not None:
            nft = _log_sums(tq, td, nft)
        new_off = offset + K
        buf.reserve(n_arcs, n_groups, K * V)
        n_arcs, n_groups = _arcs(z, root, zoff, znr, S, blk, ctx, nroot, tallow, lo_t, i == L, C, A, Lp,
                                 target_only, offset, new_off, n_arcs, n_groups, *buf.arrays)
        arc_starts.append(n_arcs)
        if keep_elements:
            elements.append(dict(z=e_z, label=e_v, parent=np.where(e_par >= 0, e_par + offset, -1), lens=lens,
                                 lcs=e_lcs, mass=m, target_mass=t, valid=valid, active=active,
                                 context=np.where(ctx >= 0, ctx + new_off, -1)))
        npar = np.where(npar >= 0, npar + offset, -1)
        offset = new_off
        z, g, root, ln, par, lab, lcs, hist, fm, ft = nz, ngg, nroot, nlen, npar, nlab, nlcs, nhist, nfm, nft
        sizes.append(z.size)
    layer_start = np.zeros(max_len + 2, np.int64)
    np.cumsum(sizes, out=layer_start[1:])
    cat = {k: np.concatenate(v) for k, v in parts.items()}
    hist_all = cat["hist"].reshape(-1, W)
    (a_src, a_dst, a_lab, a_grp, a_sc, a_diff), (g_src, g_dst, g_lab, g_top, g_best) = buf.take(n_arcs, n_groups)
    return AlignLattice(
        model=model, x=xa, max_len=max_len, outside=outside, layer_start=layer_start,
        ctx_z=cat["z"], ctx_g=cat["g"], ctx_root=cat["root"], ctx_len=cat["len"], ctx_parent=cat["par"],
        ctx_label=cat["lab"], ctx_lcs=cat["lcs"], ctx_hist=hist_all, ctx_forward=cat["fm"],
        ctx_forward_target=cat["ft"],
        arc_src=a_src, arc_dst=a_dst, arc_label=a_lab, arc_layer_start=np.array(arc_starts, np.int64), arc_group=a_grp,
        group_src=g_src, group_dst=g_dst, group_ilabel=g_lab,
        ng_ids=cat["ng"].reshape(-1, C, model.n + 1 if model.backoff else 1),
        end_ids=_end_ids(hist_all, C, n, model.backoff, mask), edge_ids=edge_ids, big_ids=big_ids,
        target=allowed, elements=elements,
        built=_BuildTables(cat["ngs"], edge_s, big_s, a_sc, g_top, g_best, a_diff))


# ----------------------------------------------------------------------------- inference


def method_outside(method: str) -> float:
    """The outside weight of a decoding method: 0 for "rcms" (RCMS contexts), -inf for "beam"."""
    if method == "rcms":
        return 0.0
    if method == "beam":
        return -math.inf
    raise ArgumentError(f"method must be 'rcms' or 'beam', got {method!r}")
