"""Best paths (tropical semiring) and random paths (log semiring).

:func:`best_path` runs the tropical solver with back-pointers and follows them
from the best final state.  :func:`sample_paths` draws paths with probability
proportional to their weight: with backward values beta, a path at state s
stops with probability ``f(s) / beta(s)`` and takes arc a with probability
``w_a beta(dst) / beta(s)``.

:func:`k_best_paths` gives the k paths of least cost of an acyclic machine
(the k-best Viterbi recursion: in topological order every state keeps the k
cheapest prefixes that reach it, each with the arc and the rank of the prefix
at that arc's source it extends).

On a phi machine sampling follows failure semantics exactly.  A state's
events are its own arcs, its own final weight and its phi arc, whose
probability is the mass its own events leave.  Having taken the phi arc from
q to q', the walk must draw an event of q' whose label q does not have;
draws from q' that violate this are rejected and redrawn at q' (the
constraint of each level of the backoff chain is checked from the innermost
level out, and a violation restarts the draw at the level that imposed it).

A machine that is already locally normalised under failure semantics (a
backoff LM: each state's arcs, final weight and phi mass sum to one) can be
sampled with ``normalised=True``: its backward values are taken as one and
the walk is the machine's own generative process, with no solve.

:func:`label_strings` turns paths (a :class:`Samples`, a :class:`Path`, or arc
ids) into strings of their input or output labels, through the machine's
symbol tables (label ids where it has none), epsilon and phi skipped.

Public names: Path, best_path, k_best_paths, sample_paths, Samples, label_strings.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba as nb
import numpy as np

from ..errors import ArgumentError, FsmError, MachineError, NoAcceptingPathError, SemiringError
from ..fsm.batch import MachineBatch
from ..fsm.buffers import upper_bound
from ..fsm.chain import ChainBatch
from ..fsm.machine import EPSILON, PHI, Machine
from ._check import require_machine
from .score import label_hash, probe_arc_hash
from .phi import phi_structure
from .shortest import solve_values


@dataclass
class Path:
    """A path through a machine.

    Attributes:
        arcs: int64 [L] arc ids in order.
        states: int64 [L+1] states visited (start first).
        weight: float, the path weight in the machine's convention
            (negative log for log/tropical machines), final weight included.
        ilabels, olabels: int32 [L] labels of the arcs (epsilon and phi
            included).
    """
    arcs: np.ndarray
    states: np.ndarray
    weight: float
    ilabels: np.ndarray
    olabels: np.ndarray

    def input_string(self, m: Machine, sep: str = " ") -> str:
        """The input symbols of the path, epsilon and phi skipped (label ids without a table)."""
        return label_strings(m, self, "input", sep)[0]

    def output_string(self, m: Machine, sep: str = " ") -> str:
        """The output symbols of the path, epsilon and phi skipped (label ids without a table)."""
        return label_strings(m, self, "output", sep)[0]


def best_path(m: Machine) -> Path:
    """The path of least cost (tropical semiring; weights as negative logs).

    Returns:
        A :class:`Path`; :func:`label_strings` (or ``Path.input_string``) gives its labels.
        For a :class:`~fsmlearn.fsm.MachineBatch`, a list with each machine's best path
        in its own numbering (:func:`fsmlearn.algo.batch.batch_best_path`); for a
        :class:`~fsmlearn.fsm.ChainBatch`, a :class:`~fsmlearn.algo.chain.ChainPaths` (each
        chain's cost and each position's label, by the Viterbi recursion over its tables).

    Raises:
        NoAcceptingPathError: (a MachineError) the machine accepts no string.
        MachineError: its back-pointers form a cycle.
        SemiringError: the machine has phi arcs (use phi_expand first).
        DivergenceError: a negative cycle.
        NotAMachineError: ``m`` is not a Machine (convert a pynini.Fst with Machine.from_pynini).
    """
    if isinstance(m, ChainBatch):
        from .chain import chain_best_paths
        return chain_best_paths(m)
    if isinstance(m, MachineBatch):
        from .batch import batch_best_path
        return batch_best_path(m)
    require_machine(m, "best_path", "m")
    if m.has_phi:
        raise SemiringError("best_path over a phi machine needs its phi-free expansion: "
                            "best_path(phi_expand(m))")
    _, V, _, ex = solve_values(m, "tropical", False)
    bp = ex["bp"]
    w, f = m.neglog_weights()
    total = V[:, 0] + f
    if m.num_states == 0 or not np.isfinite(total).any():
        raise NoAcceptingPathError("best_path: the machine accepts no string (no path of nonzero weight "
                                   "reaches a final state): there is no best path")
    q = int(np.argmin(total))
    arcs = []
    s = q
    src = m.arc_src
    while bp[s] >= 0:
        a = int(bp[s])
        arcs.append(a)
        s = int(src[a])
        if len(arcs) > m.num_states:
            raise MachineError("back-pointers form a cycle (zero-weight cycle ties)")
    if s != m.start:
        raise FsmError(f"internal error: back-pointers end at state {s}, not the start state")
    arcs = np.asarray(arcs[::-1], dtype=np.int64)
    states = np.concatenate([[m.start], m.dst[arcs]]).astype(np.int64)
    return Path(arcs, states, float(total[q]), m.ilabel[arcs].copy(), m.olabel[arcs].copy())


@nb.njit(cache=True)
def _kbest_kernel(order, src_start, dst, w, start, k):
    """The k cheapest prefixes of every state of an acyclic machine: ``order`` a topological
    order of the states; per state, costs ascending, with the arc and the source's rank each
    extends (ties keep the order they arrive in: sources in ``order``, arcs by id)."""
    n = src_start.shape[0] - 1
    cost = np.full((n, k), np.inf)
    arc_bp = np.full((n, k), -1, np.int64)
    rank_bp = np.full((n, k), -1, np.int64)
    cnt = np.zeros(n, np.int64)
    cost[start, 0] = 0.0
    cnt[start] = 1
    for oi in range(order.shape[0]):
        s = order[oi]
        for a in range(src_start[s], src_start[s + 1]):
            d = dst[a]
            wa = w[a]
            if not wa < np.inf:
                continue
            for r in range(cnt[s]):
                c = cost[s, r] + wa
                m = cnt[d]
                if m == k and c >= cost[d, k - 1]:
                    break       # the source's later prefixes cost no less
                j = m if m < k else k - 1
                while j > 0 and cost[d, j - 1] > c:
                    cost[d, j] = cost[d, j - 1]
                    arc_bp[d, j] = arc_bp[d, j - 1]
                    rank_bp[d, j] = rank_bp[d, j - 1]
                    j -= 1
                cost[d, j] = c
                arc_bp[d, j] = a
                rank_bp[d, j] = r
                if m < k:
                    cnt[d] = m + 1
    return cost, arc_bp, rank_bp, cnt


def k_best_paths(m: Machine, k: int) -> list[Path]:
    """The ``k`` paths of least cost of an acyclic machine, cheapest first (fewer when it has
    fewer accepting paths of finite cost; weights as negative logs, the tropical semiring).

    The k-best Viterbi recursion over a topological order: d_k(q) = the k smallest of
    {d_r(p) + w(a) : a = p -> q, r < k}, then the k smallest d_r(q) + f(q) over all q.  Every
    path is a distinct arc sequence (an ambiguous machine may give one label string several
    times: :func:`label_strings` of the result shows it); ties are broken by the order of
    states and arcs, so the result is deterministic.  ``k_best_paths(m, 1)[0]`` has the cost
    of :func:`best_path`.

    Raises:
        ArgumentError: ``k`` < 1, or the machine has a cycle (the k cheapest paths of a cyclic
            machine are not this recursion's).
        NoAcceptingPathError: the machine accepts no string.
        SemiringError: the machine has phi arcs (use phi_expand first).
        NotAMachineError: ``m`` is not a Machine.
    """
    from .schedule import schedule_for
    require_machine(m, "k_best_paths", "m")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ArgumentError(f"k_best_paths: k must be an integer >= 1, got {k!r}")
    if m.has_phi:
        raise SemiringError("k_best_paths over a phi machine needs its phi-free expansion: "
                            "k_best_paths(phi_expand(m), k)")
    if m.num_states == 0:
        raise NoAcceptingPathError("k_best_paths: the machine has no states")
    sch = schedule_for(m, False)
    if sch.cyclic:
        raise ArgumentError("k_best_paths: the machine has a cycle; the k-best recursion needs an acyclic "
                            "machine (best_path handles cyclic ones)")
    w, f = m.neglog_weights()
    k = int(k)
    cost, arc_bp, rank_bp, cnt = _kbest_kernel(sch.comp_states.astype(np.int64), m.src_start, m.dst,
                                               np.ascontiguousarray(w, np.float64), int(m.start), k)
    ranks = np.arange(k)[None, :] < cnt[:, None]
    tot = np.where(ranks, cost + f[:, None], np.inf).ravel()
    ok = np.flatnonzero(tot < np.inf)
    if ok.size == 0:
        raise NoAcceptingPathError("k_best_paths: the machine accepts no string (no path of finite cost "
                                   "reaches a final state)")
    pick = ok[np.argsort(tot[ok], kind="stable")[:k]]
    src = m.arc_src
    out = []
    for flat in pick:
        q, r = divmod(int(flat), k)
        arcs = []
        s = q
        while arc_bp[s, r] >= 0:
            a = int(arc_bp[s, r])
            arcs.append(a)
            r = int(rank_bp[s, r])
            s = int(src[a])
        if s != m.start:
            raise FsmError(f"internal error: back-pointers end at state {s}, not the start state")
        arcs = np.asarray(arcs[::-1], dtype=np.int64)
        states = np.concatenate([[m.start], m.dst[arcs]]).astype(np.int64)
        out.append(Path(arcs, states, float(tot[flat]), m.ilabel[arcs].copy(), m.olabel[arcs].copy()))
    return out


@dataclass
class Samples:
    """Sampled paths in CSR form.

    Attributes:
        ptr: int64 [S+1]; path i is ``arcs[ptr[i]:ptr[i+1]]``.
        arcs: int64 arc ids (phi arcs included on phi machines).
    """
    ptr: np.ndarray
    arcs: np.ndarray

    def __len__(self) -> int:
        return self.ptr.shape[0] - 1

    def path(self, i: int) -> np.ndarray:
        return self.arcs[self.ptr[i]:self.ptr[i + 1]]

    def label_sequences(self, m: Machine, side: str = "input") -> list[np.ndarray]:
        """Label sequence of each path, epsilon and phi arcs dropped."""
        lab = m.ilabel if side == "input" else m.olabel
        out = []
        for i in range(len(self)):
            x = lab[self.path(i)]
            out.append(x[(x != EPSILON) & (x != PHI)])
        return out


def label_strings(m: Machine, paths, side: str = "input", sep: str = " ") -> list[str]:
    """The label strings of paths through ``m``, one per path.

    Args:
        m: the machine the paths are paths of.
        paths: a :class:`Samples` (from :func:`sample_paths`), a :class:`Path`
            (from :func:`best_path`), or a sequence of Paths or of int arc-id arrays.
        side: "input" or "output": which labels.
        sep: the separator between symbols.

    Returns:
        list of str: each path's labels, epsilon and phi arcs skipped, as symbols
        of the machine's input table (side "input") or output table (side
        "output"; an acceptor without one uses its input table), or as decimal
        label ids where that table is absent.

    Raises:
        ArgumentError: ``side`` is not "input" or "output", or an arc id is out of range.
        SymbolTableError: a label is not in the symbol table.
        NotAMachineError: ``m`` is not a Machine.
    """
    require_machine(m, "label_strings", "m")
    if side not in ("input", "output"):
        raise ArgumentError(f"label_strings: side must be 'input' or 'output', got {side!r}")
    if isinstance(paths, Samples):
        ptr = np.asarray(paths.ptr, np.int64)
        arcs = np.asarray(paths.arcs, np.int64)
    else:
        seq = [paths] if isinstance(paths, Path) else list(paths)
        parts = [np.asarray(p.arcs if isinstance(p, Path) else p, np.int64).ravel() for p in seq]
        ptr = np.zeros(len(parts) + 1, np.int64)
        np.cumsum([x.size for x in parts], out=ptr[1:])
        arcs = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    bad = np.flatnonzero((arcs < 0) | (arcs >= m.num_arcs))
    if bad.size:
        raise ArgumentError(f"label_strings: arc id {int(arcs[bad[0]])} is out of range for a machine "
                            f"with {m.num_arcs} arcs")
    lab = (m.ilabel if side == "input" else m.olabel)[arcs]
    table = m.isyms if side == "input" else m.output_symbols
    keep = (lab != EPSILON) & (lab != PHI)
    uniq, inv = np.unique(lab, return_inverse=True)
    real = uniq > 0
    words = np.full(uniq.size, "", dtype=object)
    words[real] = table.decode(uniq[real]) if table is not None else [str(int(x)) for x in uniq[real]]
    tok = words[inv.ravel()]
    out = []
    for i in range(ptr.size - 1):
        lo, hi = int(ptr[i]), int(ptr[i + 1])
        out.append(sep.join(tok[lo:hi][keep[lo:hi]]))
    return out


@nb.njit(cache=True)
def _grow(buf, need):
    if need <= buf.shape[0]:
        return buf
    nb_ = np.empty(max(need, 2 * buf.shape[0]), buf.dtype)
    nb_[:buf.shape[0]] = buf
    return nb_


@nb.njit(cache=True)
def _cumulative(src_start, arc_p, final_p):
    cum = np.empty(arc_p.shape[0])
    for s in range(src_start.shape[0] - 1):
        acc = final_p[s]
        for a in range(src_start[s], src_start[s + 1]):
            acc += arc_p[a]
            cum[a] = acc
    return cum


@nb.njit(cache=True, nogil=True)
def _sample_kernel(num, seed, start, src_start, dst, ilabel, arc_p, arc_cum, final_p, phi_arc, phi_p,
                   has_final, T, mask, L, max_len, phi_final):
    """Draw ``num`` paths.

    arc_p[a], final_p[s], phi_p[s] are local probabilities; arc_cum[a] is
    final_p[src] plus arc_p of the non-phi arcs of src up to and including a.
    """
    np.random.seed(seed)
    ptr = np.zeros(num + 1, np.int64)
    out = np.empty(1024, np.int64)
    n_out = 0
    chain = np.empty(64, np.int64)     # states of the current backoff chain
    chain_arc = np.empty(64, np.int64)  # phi arc taken from each level
    for i in range(num):
        s = start
        length = 0
        while True:
            # draw one event of s under failure semantics
            depth = 0
            chain[0] = s
            level = 0
            ev_arc = -1
            ev_final = False
            while True:
                r = chain[level]
                u = np.random.random()
                ev_arc = -1
                ev_final = False
                go_phi = False
                lo = src_start[r]
                hi = src_start[r + 1]
                if u < final_p[r]:
                    ev_final = True
                else:
                    # first arc whose cumulative probability exceeds u
                    a_lo = upper_bound(arc_cum, lo, hi, u)
                    while a_lo < hi and ilabel[a_lo] == PHI:
                        a_lo += 1
                    if a_lo < hi:
                        ev_arc = a_lo
                    elif phi_arc[r] >= 0 and phi_p[r] > 0.0:
                        go_phi = True
                    else:
                        # rounding: take the last option with mass
                        for a in range(src_start[r + 1] - 1, src_start[r] - 1, -1):
                            if ilabel[a] != PHI and arc_p[a] > 0.0:
                                ev_arc = a
                                break
                        if ev_arc < 0:
                            ev_final = final_p[r] > 0.0
                            if not ev_final:
                                return ptr, out[:n_out], i, 1
                if go_phi:
                    if level + 1 >= chain.shape[0]:
                        return ptr, out[:n_out], i, 2
                    chain_arc[level] = phi_arc[r]
                    level += 1
                    chain[level] = dst[phi_arc[r]]
                    continue
                # check the constraints from the innermost level out
                bad_level = -1
                for j in range(level, 0, -1):
                    parent = chain[j - 1]
                    if ev_final:
                        if phi_final and has_final[parent]:
                            bad_level = j
                            break
                    else:
                        x = ilabel[ev_arc]
                        if x != EPSILON and probe_arc_hash(T, mask, parent * L + x) >= 0:
                            bad_level = j
                            break
                if bad_level >= 0:
                    level = bad_level
                    continue
                break
            # record the phi arcs taken, then the event
            need = n_out + level + 1
            out = _grow(out, need)
            for j in range(level):
                out[n_out] = chain_arc[j]
                n_out += 1
            if ev_final:
                break
            out[n_out] = ev_arc
            n_out += 1
            s = dst[ev_arc]
            length += 1
            if max_len > 0 and length > max_len:
                return ptr, out[:n_out], i, 3
        ptr[i + 1] = n_out
    return ptr, out[:n_out], num, 0


_PARALLEL_MIN = 10_000


class _Sampler:
    """Local probabilities of a machine's events, computed once (see sample_paths)."""

    def __init__(self, m: Machine, phi_final: bool, normalised: bool = False, starts=None):
        from ..semiring.ops import scaled_to_neglog
        if normalised:
            beta = np.zeros(m.num_states)
        else:
            _, Bt, _, _ = solve_values(m, "log", True, phi_final=phi_final)
            beta = np.empty(m.num_states)
            scaled_to_neglog(Bt, beta)
        if starts is None:
            if m.start < 0 or not np.isfinite(beta[m.start]):
                raise NoAcceptingPathError("sample_paths: the machine accepts no string (its total weight is "
                                           "Z = 0): nothing to sample")
        else:       # a batch's union: every machine's own start
            ok = starts >= 0
            ok[ok] = np.isfinite(beta[starts[ok]])
            bad = np.flatnonzero(~ok)
            if bad.size:
                raise NoAcceptingPathError(f"sample_paths: machine {int(bad[0])} of the batch accepts no string "
                                           f"({bad.size} of {len(starts)} such; its total weight is Z = 0): "
                                           "nothing to sample")
        w, f = m.neglog_weights()
        with np.errstate(over="ignore", invalid="ignore"):
            arc_p = np.exp(beta[m.arc_src] - w - beta[m.dst])
            arc_p = np.where(np.isfinite(arc_p), arc_p, 0.0)
            final_p = np.where(np.isfinite(f), np.exp(beta - f), 0.0)
            final_p = np.where(np.isfinite(final_p), final_p, 0.0)
        phi = np.full(m.num_states, -1, np.int64)
        phi_p = np.zeros(m.num_states)
        has_final = np.isfinite(f)
        if m.has_phi:
            st = phi_structure(m, phi_final)
            phi = st.phi_arc
            own = np.bincount(m.arc_src, weights=np.where(m.ilabel == PHI, 0.0, arc_p),
                              minlength=m.num_states) + final_p
            phi_p = np.where(phi >= 0, np.maximum(1.0 - own, 0.0), 0.0)
            if not phi_final:
                has_final = np.zeros(m.num_states, bool)
        self.arc_p = arc_p
        self.arc_cum = _cumulative(m.src_start, np.where(m.ilabel == PHI, 0.0, arc_p), final_p)
        self.final_p = final_p
        self.phi = phi
        self.phi_p = phi_p
        self.has_final = has_final


def sample_paths(m: Machine, num: int, seed: int = 0, max_length: int | None = None,
                 phi_final: bool = True, normalised: bool = False, threads: int = 1) -> Samples:
    """Draw ``num`` paths with probability proportional to their weight.

    The backward values and local probabilities are computed once per machine
    (cached), so repeated calls cost only the drawing.

    Args:
        m: the machine (log or real weights; phi arcs with failure semantics).
        num: number of paths.
        seed: random seed (the result is a function of the seed).
        max_length: raise if a path grows longer than this many events.
        phi_final: final weights fail over like labels (see algo.phi).
        normalised: the machine is locally normalised (each state's events,
            phi mass included, sum to one): skip the backward solve and
            sample its generative process.  A state whose own events exceed
            one gives its phi arc no mass.
        threads: draw in this many threads (sub-batches with seeds derived
            from ``seed``; batches under 20,000 paths use one thread).  The
            result depends on (seed, num, threads).

    Returns:
        A :class:`Samples` of arc ids; :func:`label_strings` turns it into strings.
        For a :class:`~fsmlearn.fsm.MachineBatch`, a list of B Samples, ``num`` paths of
        each machine in its own numbering (:func:`fsmlearn.algo.batch.batch_sample_paths`;
        ``threads`` is not used).

    Raises:
        NoAcceptingPathError: (a MachineError) the machine accepts nothing.
        MachineError: a path reaches a dead end.
        ArgumentError: num < 0, or max_length was exceeded.
        NotAMachineError: ``m`` is not a Machine (convert a pynini.Fst with Machine.from_pynini).
    """
    if isinstance(m, MachineBatch):
        from .batch import batch_sample_paths
        return batch_sample_paths(m, num, seed, max_length, phi_final, normalised)
    require_machine(m, "sample_paths", "m")
    if num < 0:
        raise ArgumentError(f"num must be >= 0, got {num}")
    sp = m.cached(("sampler", bool(phi_final), bool(normalised)),
                  lambda: _Sampler(m, phi_final, bool(normalised)))
    T, mask, L = label_hash(m) if m.has_phi else (np.full((1, 3), -1.0), 0, 1)
    num = int(num)
    seed = int(seed) & 0xFFFFFFFF

    def run(n, sd):
        return _sample_kernel(n, sd, m.start, m.src_start, m.dst, m.ilabel, sp.arc_p, sp.arc_cum,
                              sp.final_p, sp.phi, sp.phi_p, sp.has_final, T, mask, L,
                              int(max_length or 0), bool(phi_final))

    if num < 2 * _PARALLEL_MIN or threads <= 1:
        parts = [run(num, seed)]
        offsets = [0]
    else:
        # independent sub-batches with derived seeds, one thread each (the
        # kernel releases the GIL); the result is a function of (seed, num)
        k = int(threads)
        sizes = [num // k + (1 if i < num % k else 0) for i in range(k)]
        offsets = list(np.cumsum([0] + sizes[:-1]))
        seeds = [(seed * 2654435761 + 97 * (i + 1)) & 0xFFFFFFFF for i in range(k)]
        with ThreadPoolExecutor(k) as ex:
            parts = list(ex.map(run, sizes, seeds))
    for (ptr, arcs, done, err), off in zip(parts, offsets):
        if err:
            done = int(off) + int(done)
            break
    else:
        err = 0
    if len(parts) == 1:
        ptr, arcs = parts[0][0], parts[0][1]
    else:
        arcs = np.concatenate([p[1] for p in parts])
        ptr = np.zeros(num + 1, np.int64)
        base = 0
        for (p_, a_, _, _), off, n in zip(parts, offsets, sizes):
            ptr[off + 1:off + n + 1] = p_[1:] + base
            base += a_.shape[0]
    if err == 1:
        raise MachineError(f"sample {done}: reached a state with no way to continue (weights do not sum "
                       "to the backward value; is the machine consistent?)")
    if err == 2:
        raise MachineError("phi chain longer than 63 levels while sampling")
    if err == 3:
        raise ArgumentError(f"sample {done}: path longer than max_length={max_length}")
    return Samples(ptr, arcs)
