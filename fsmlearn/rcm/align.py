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

import math

import numpy as np

from ..errors import ArgumentError
from .align_kernels import _arcs, _expand, _finish, _layer_scores, _log_sums, _select_segments, _z_lists
from .align_lattice import AlignLattice, ArcPool, _BuildTables
from .align_model import (BOS, EOS, STAR, TEMPLATES, AlignRCM, _bigram_ids, _edge_ids, _end_ids, _ngram_ids,
                          advances_valid, allowed_labels, default_max_len, feature_id, label_of, method_outside)
from .contexts import _merge_kernel

__all__ = ["AlignRCM", "AlignLattice", "ArcPool", "rcms_align", "feature_id", "label_of", "advances_valid",
           "method_outside", "allowed_labels", "STAR", "BOS", "EOS", "TEMPLATES", "default_max_len"]


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
