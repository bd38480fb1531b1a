"""Learning alignment RCMs with indirect supervision (Steinhardt and Liang 2015, section 6).

For an utterance (x, y) with the alignment z unobserved, the approximate log-likelihood
under a set of contexts C (held fixed, as the paper does) is

    log p(y | x) ≈ log Z_target(C) - log Z(C),

Z(C) the total weight of the lattice's machine (all outputs and alignments) and
Z_target(C) that of its restriction to y (every alignment of y); its gradient is
equation 7, E_target[phi] - E_model[phi], the expectations from the engine's arc and
final posteriors (:func:`fsmlearn.algo.forward_backward`) gathered per feature id.
AdaGrad (step 0.2, delta 1e-4, section 6) ascends it one utterance at a time.

The strategies choose C (:data:`STRATEGIES`):

- ``"model"`` (select-by-model): beam search, the B best contexts per z by the model's
  forward mass (outside weight -inf); the target is that beam restricted to y, so an
  utterance whose y falls out of the beam gives no signal (log-likelihood -inf, gradient 0);
- ``"target"`` (select-by-target): beam search with the beams chosen by the forward mass
  of the target-restricted model q(z | x, y); both terms on those beams, so the model term
  only sees outputs the target kept (which is why it does not learn to keep y on the beam);
- ``"hybrid"``: beam search on the union of the model's and the target's B best per z,
  taken at every position (appendix B), both terms on it;
- ``"forced"`` (forced decoding): z is fixed first (:func:`impute_alignments`: a bigram
  model with exact inference, its Viterbi alignment of (x, y)); then the target term is the
  features of the one path (y, z) with its full history, and the model term beam search;
- ``"rcms"``: RCMS contexts (outside weight 0) chosen by the model's mass; the target is
  p(z | x, y) under those contexts.

Public names: STRATEGIES, UpdateProblem, prepare_update, sequence_gradient, DenseAdaGrad,
train, impute_alignments, average_context_length.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numba as nb
import numpy as np

from ..algo import forward_backward
from ..errors import ArgumentError
from .align import AlignLattice, AlignRCM, default_max_len, rcms_align
from .align_decode import best_alignment

__all__ = ["STRATEGIES", "UpdateProblem", "prepare_update", "sequence_gradient", "DenseAdaGrad", "train",
           "impute_alignments", "average_context_length"]

STRATEGIES = ("model", "target", "hybrid", "forced", "rcms")


# ----------------------------------------------------------------------------- expectations
@nb.njit(cache=True)
def _aggregate(arc_src, arc_lab, idx, use_idx, factor, arc, scale, ctx_z, ctx_prev, C, V, use_big, sign, ng_acc,
               edge_acc, big_acc):
    """Element posteriors summed into the feature tables: element j (lattice arc idx[j], or j
    without use_idx) has posterior factor[arc[j]] * scale[j] (see ArcPool.element_posteriors)."""
    for j in range(arc.size):
        p = factor[arc[j]] * scale[j]
        if p == 0.0:
            continue
        a = idx[j] if use_idx else j
        k = arc_src[a]
        v = arc_lab[a]
        zk = ctx_z[k]
        ng_acc[k * C + v % C] += sign * p
        edge_acc[zk * V + v] += sign * p
        if use_big:
            big_acc[(zk * (V + 2) + ctx_prev[k]) * V + v] += sign * p


@nb.njit(cache=True)
def _scatter(ids, acc, dense, flag, touched, nt):
    """dense[ids[r, g]] += acc[r] for every table row with a non-zero sum; new ids go to touched."""
    R, G = ids.shape
    for r in range(R):
        w = acc[r]
        if w == 0.0:
            continue
        for gi in range(G):
            f = ids[r, gi]
            if not flag[f]:
                flag[f] = True
                touched[nt] = f
                nt += 1
            dense[f] += w
    return nt


class _Accumulator:
    """A sparse gradient gathered in a dense buffer of theta's size (kept between calls)."""

    def __init__(self, size: int):
        self.dense = np.zeros(size)
        self.flag = np.zeros(size, np.bool_)
        self.touched = np.empty(1 << 16, np.int64)
        self.nt = 0

    def add(self, ids2d, acc):
        need = self.nt + ids2d.size
        if need > self.touched.size:
            grown = np.empty(max(need, 2 * self.touched.size), np.int64)
            grown[:self.nt] = self.touched[:self.nt]
            self.touched = grown
        self.nt = _scatter(ids2d, acc, self.dense, self.flag, self.touched, self.nt)

    def take(self):
        ids = np.sort(self.touched[:self.nt])
        vals = self.dense[ids].copy()
        self.dense[ids] = 0.0
        self.flag[ids] = False
        self.nt = 0
        keep = vals != 0.0
        return ids[keep], vals[keep]


def _add_expectations(acc: _Accumulator, lat: AlignLattice, pool, factor, final_post, sign: float):
    m = lat.model
    C, V = m.num_chars, m.num_labels
    N = lat.num_contexts
    ng_acc = np.zeros(N * C)
    edge_acc = np.zeros(lat.edge_ids.shape[0])
    big_acc = np.zeros(lat.big_ids.size if m.edge_bigram else 1)
    idx = pool.elements
    _aggregate(lat.arc_src, lat.arc_label, np.zeros(0, np.int64) if idx is None else idx, idx is not None, factor,
               pool.arc, pool.scale, lat.ctx_z, lat.ctx_prev_index, C, V, m.edge_bigram,
               sign, ng_acc, edge_acc, big_acc)
    acc.add(lat.ng_ids.reshape(N * C, -1), ng_acc)
    acc.add(lat.edge_ids, edge_acc)
    if m.edge_bigram:
        acc.add(lat.big_ids.reshape(-1, 1), big_acc)
    acc.add(lat.end_ids, sign * final_post)


# ----------------------------------------------------------------------------- one update
@dataclass
class UpdateProblem:
    """The approximate log-likelihood of one utterance with its contexts held fixed.

    Attributes:
        model: the model (its theta is the default point).
        strategy: one of :data:`STRATEGIES`.
        lattice: the contexts of the model term.
        target_lattice: the contexts of the target term (``lattice`` itself but for "forced").
    """
    model: AlignRCM
    strategy: str
    lattice: AlignLattice
    target_lattice: AlignLattice

    def _solve(self, theta):
        sc = self.lattice.scores(theta)
        mm, pool_m = self.lattice.machine(scores=sc)
        fb_m = forward_backward(mm, allow_empty=True)
        tsc = sc if self.target_lattice is self.lattice else self.target_lattice.scores(theta)
        mt, pool_t = self.target_lattice.target_machine(scores=tsc)
        fb_t = forward_backward(mt, allow_empty=True)
        return fb_m, (mm, pool_m), fb_t, (mt, pool_t)

    @staticmethod
    def _ll(fb_m, fb_t) -> float:
        if not (math.isfinite(fb_t.log_partition) and math.isfinite(fb_m.log_partition)):
            return -math.inf
        return float(fb_t.log_partition - fb_m.log_partition)

    def loglik(self, theta=None) -> float:
        """log Z_target - log Z under ``theta`` (default: the model's); -inf without signal."""
        fb_m, _, fb_t, _ = self._solve(theta)
        return self._ll(fb_m, fb_t)

    def gradient(self, theta=None, acc: _Accumulator | None = None):
        """The log-likelihood and its gradient (equation 7).

        Returns:
            (log-likelihood, ids int64 [F] sorted, values float64 [F], info dict with
            ``signal`` (False: no target mass, gradient empty), ``mean_context_length`` (the
            average determined labels of c_{i-1} under the model's arc posteriors),
            ``contexts`` and ``arcs``).
        """
        fb_m, (mm, pool_m), fb_t, (_, pool_t) = self._solve(theta)
        ll = self._ll(fb_m, fb_t)
        info = {"contexts": self.lattice.num_contexts, "arcs": self.lattice.num_arcs,
                "machine_arcs": mm.num_arcs, "signal": math.isfinite(ll),
                "mean_context_length": self.lattice.mean_context_length(fb_m.posteriors, machine=mm)
                if math.isfinite(fb_m.log_partition) else 0.0}
        if not math.isfinite(ll):
            return ll, np.zeros(0, np.int64), np.zeros(0), info
        if acc is None:
            acc = _Accumulator(self.model.theta.size)
        for lat, pool, fb, sign in ((self.target_lattice, pool_t, fb_t, 1.0), (self.lattice, pool_m, fb_m, -1.0)):
            _add_expectations(acc, lat, pool, pool.arc_factor(fb.posteriors), fb.final_posteriors, sign)
        ids, vals = acc.take()
        return ll, ids, vals, info


def _check_strategy(strategy):
    if strategy not in STRATEGIES:
        raise ArgumentError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")


def prepare_update(model: AlignRCM, x, y, strategy: str, B: int = 20, alignment=None,
                   max_len: int | None = None) -> UpdateProblem:
    """Choose the contexts of one utterance for a strategy (see the module docstring).

    Args:
        model: the model (its current theta chooses the contexts).
        x: int [L'] phonemes; y: int [L] characters.
        strategy: one of :data:`STRATEGIES`.
        B: contexts per position and z.
        alignment: the advances a_1..a_L of the fixed alignment (needed by "forced").
        max_len: output positions (default 2 L' + 2, at least L).

    Raises:
        ArgumentError: an unknown strategy, a missing or invalid alignment, bad x, y or B.
    """
    _check_strategy(strategy)
    if strategy == "forced":
        if alignment is None:
            raise ArgumentError("strategy 'forced' needs the alignment (see impute_alignments)")
        xa, ya = model.check_x(x), model.check_y(y)
        if max_len is None:
            max_len = max(default_max_len(xa.size), ya.size)
        elif not isinstance(max_len, (int, np.integer)) or max_len < ya.size:
            raise ArgumentError(f"max_len must be an integer >= len(y) = {ya.size}, got {max_len!r}")
        gold = rcms_align(model, xa, 1, y=ya, advances=alignment, select="target", target_only=True)
        beam = rcms_align(model, xa, B, outside=-math.inf, max_len=max_len)
        return UpdateProblem(model, strategy, beam, gold)
    select, outside = {"model": ("model", -math.inf), "target": ("target", -math.inf),
                       "hybrid": ("both", -math.inf), "rcms": ("model", 0.0)}[strategy]
    lat = rcms_align(model, x, B, y=y, select=select, outside=outside, max_len=max_len)
    return UpdateProblem(model, strategy, lat, lat)


def sequence_gradient(model: AlignRCM, x, y, strategy: str, B: int = 20, alignment=None,
                      max_len: int | None = None):
    """The approximate log-likelihood of (x, y) and its gradient under a strategy's contexts.

    Returns:
        (log-likelihood, ids int64 [F], values float64 [F], info dict); see
        :meth:`UpdateProblem.gradient`.
    """
    return prepare_update(model, x, y, strategy, B, alignment, max_len).gradient()


class DenseAdaGrad:
    """AdaGrad ascent on a dense theta, touching only the given coordinates:
    theta[f] += step * g / sqrt(delta + sum of g^2) (section 6: step 0.2, delta 1e-4)."""

    def __init__(self, size: int, step: float = 0.2, delta: float = 1e-4):
        if not (step > 0 and delta > 0):
            raise ArgumentError(f"step and delta must be > 0, got {step} and {delta}")
        self.step = float(step)
        self.delta = float(delta)
        self.sums = np.zeros(int(size))

    def update(self, theta: np.ndarray, ids, grad) -> None:
        if ids.size == 0:
            return
        s = self.sums[ids] + grad * grad
        self.sums[ids] = s
        theta[ids] += self.step * grad / np.sqrt(self.delta + s)


def _check_data(model: AlignRCM, data):
    if len(data) == 0:
        raise ArgumentError("data is empty")
    out = []
    for j, item in enumerate(data):
        try:
            x, y = item
        except (TypeError, ValueError):
            raise ArgumentError(f"data[{j}] must be a pair (x, y), got {type(item).__name__}") from None
        try:
            out.append((model.check_x(x), model.check_y(y)))
        except ArgumentError as e:
            raise ArgumentError(f"data[{j}]: {e}") from None
    return out


def _eta(progress, p, passes, done, n, t0, extra=""):
    rate = done / max(time.perf_counter() - t0, 1e-9)
    progress(f"pass {p + 1}/{passes}: {done}/{n} utterances, {rate:.2f}/s, ETA {(n - done) / max(rate, 1e-9):.0f} s"
             + extra)


def train(model: AlignRCM, data, strategy: str, B: int = 20, passes: int = 1, seed: int = 0, progress=None,
          on_update=None, max_len: int | None = None, alignments=None, optimizer: DenseAdaGrad | None = None,
          impute_passes: int = 1, impute_order: int = 1, progress_every: int = 50) -> list[dict]:
    """AdaGrad on the approximate log-likelihood, one utterance at a time, shuffled per pass.

    Args:
        model: updated in place.
        data: list of (x, y): int phonemes, int characters.
        strategy: one of :data:`STRATEGIES`.
        B: contexts per position and z.
        passes: passes over the data (order shuffled by ``seed``).
        progress: optional callable(str), called every ``progress_every`` updates and per pass.
        on_update: optional callable(step, info) after every update; info holds the utterance's
            index, ``loglik``, ``signal``, ``mean_context_length``, ``contexts``, ``arcs``,
            ``seconds``.
        max_len: output positions (default 2 L' + 2 per utterance).
        alignments: for "forced", the advances per utterance (default: :func:`impute_alignments`
            with ``impute_passes`` and ``impute_order``); an utterance whose alignment is None
            is skipped (counted without signal).
        optimizer: a :class:`DenseAdaGrad` to continue with (default: a new one).

    Returns:
        Per pass a dict: ``pass``, ``loglik`` (mean over utterances with signal, before each
        update), ``signal`` (how many had one), ``utterances``, ``mean_context_length`` (mean
        over utterances), ``seconds``; and for "forced" the first dict also has
        ``impute_seconds``.
    """
    _check_strategy(strategy)
    if not isinstance(passes, (int, np.integer)) or passes < 1:
        raise ArgumentError(f"passes must be an integer >= 1, got {passes!r}")
    if not isinstance(B, (int, np.integer)) or B < 0:
        raise ArgumentError(f"B must be an integer >= 0, got {B!r}")
    items = _check_data(model, data)
    impute_seconds = None
    if strategy == "forced":
        if alignments is None:
            t0 = time.perf_counter()
            _, alignments = impute_alignments(items, model.num_chars, model.num_phonemes,
                                              max_advance=model.max_advance, passes=impute_passes,
                                              order=impute_order, seed=seed, progress=progress)
            impute_seconds = time.perf_counter() - t0
        if len(alignments) != len(items):
            raise ArgumentError(f"{len(alignments)} alignments for {len(items)} utterances")
    opt = optimizer if optimizer is not None else DenseAdaGrad(model.theta.size)
    acc = _Accumulator(model.theta.size)
    rng = np.random.default_rng(seed)
    stats = []
    step = 0
    for p in range(passes):
        t0 = time.perf_counter()
        total, signal, ctx_len = 0.0, 0, 0.0
        order = rng.permutation(len(items))
        for done, j in enumerate(order, 1):
            t1 = time.perf_counter()
            x, y = items[j]
            if strategy == "forced" and alignments[j] is None:      # nothing to force: no signal
                ll, info = -math.inf, {"contexts": 0, "arcs": 0, "signal": False, "mean_context_length": 0.0}
            else:
                prob = prepare_update(model, x, y, strategy, B, None if alignments is None else alignments[j],
                                      max_len)
                ll, ids, vals, info = prob.gradient(acc=acc)
                opt.update(model.theta, ids, vals)
            if info["signal"]:
                total += ll
                signal += 1
            ctx_len += info["mean_context_length"]
            step += 1
            if on_update is not None:
                on_update(step, dict(info, index=int(j), loglik=ll, seconds=time.perf_counter() - t1))
            if progress is not None and progress_every and done % progress_every == 0:
                _eta(progress, p, passes, done, len(items), t0)
        s = {"pass": p + 1, "loglik": total / signal if signal else -math.inf, "signal": signal,
             "utterances": len(items), "mean_context_length": ctx_len / len(items),
             "seconds": time.perf_counter() - t0}
        if impute_seconds is not None and p == 0:
            s["impute_seconds"] = impute_seconds
        stats.append(s)
        if progress is not None:
            progress(f"pass {p + 1}/{passes} ({strategy}, B={B}): log-likelihood {s['loglik']:.4f} per utterance "
                     f"with signal ({signal}/{len(items)}), context length {s['mean_context_length']:.3f}, "
                     f"{s['seconds']:.1f} s")
    return stats


def _exact_problem(model: AlignRCM, x, y, order: int, max_len) -> UpdateProblem:
    lat = rcms_align(model, x, 0, y=y, exact_order=order, outside=0.0, max_len=max_len)
    return UpdateProblem(model, "rcms", lat, lat)


def impute_alignments(data, num_chars: int, num_phonemes: int, *, max_advance: int = 2, passes: int = 1,
                      order: int = 1, hash_bits: int = 20, seed: int = 0, progress=None,
                      max_len_slack: int = 2):
    """Forced decoding's first step: train a simple model with exact inference, then take the
    best alignment of every (x, y) under it.

    The model has first-order features (``order`` = 1: the character bigram, the edges and the
    edge bigram) on exact contexts (every (z, previous label)), or with ``order`` = 0 only the
    edges and character unigrams on the roots (z, g); training is AdaGrad on the exact
    log-likelihood.  To keep the exact first-order lattice affordable its outputs are limited
    to len(y) + ``max_len_slack`` positions.

    Returns:
        (the trained :class:`AlignRCM`, list of int64 advances per utterance; None for an
        utterance whose y cannot be aligned onto its x).
    """
    if order not in (0, 1):
        raise ArgumentError(f"order must be 0 or 1, got {order!r}")
    if not isinstance(passes, (int, np.integer)) or passes < 0:
        raise ArgumentError(f"passes must be an integer >= 0, got {passes!r}")
    bigram = AlignRCM(num_chars, num_phonemes, n=order, max_advance=max_advance, hash_bits=hash_bits,
                      edge_bigram=order == 1)
    items = _check_data(bigram, data)
    opt = DenseAdaGrad(bigram.theta.size)
    acc = _Accumulator(bigram.theta.size)
    rng = np.random.default_rng(seed)
    for p in range(passes):
        t0 = time.perf_counter()
        for done, j in enumerate(rng.permutation(len(items)), 1):
            x, y = items[j]
            prob = _exact_problem(bigram, x, y, order, y.size + max_len_slack)
            ll, ids, vals, _ = prob.gradient(acc=acc)
            opt.update(bigram.theta, ids, vals)
            if progress is not None and done % 50 == 0:
                _eta(progress, p, passes, done, len(items), t0, " (imputation model)")
    out = []
    for x, y in items:
        try:
            out.append(best_alignment(bigram, x, y, exact_order=order))
        except ArgumentError:       # y cannot be aligned onto x (too short for A phonemes per character)
            out.append(None)
    return bigram, out


def average_context_length(model: AlignRCM, x, y=None, B: int = 20, strategy: str = "rcms",
                           max_len: int | None = None) -> float:
    """Section 7's statistic for one utterance: the number of determined labels of c_{i-1},
    averaged over positions weighted by the model's arc posteriors, under the contexts a
    strategy chooses ("rcms" needs no y: the decoder's RCMS contexts; "forced" uses the beam)."""
    _check_strategy(strategy)
    if y is None:
        if strategy not in ("rcms", "model", "forced"):
            raise ArgumentError(f"strategy {strategy!r} needs y")
        lat = rcms_align(model, x, B, outside=0.0 if strategy == "rcms" else -math.inf, max_len=max_len)
    else:
        lat = prepare_update(model, x, y, "model" if strategy == "forced" else strategy, B,
                             max_len=max_len).lattice
    m, _ = lat.machine()
    fb = forward_backward(m, allow_empty=True)
    return lat.mean_context_length(fb.posteriors, machine=m) if math.isfinite(fb.log_partition) else 0.0
