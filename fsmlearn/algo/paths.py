"""Best paths (tropical semiring) and random paths (log semiring).

:func:`best_path` runs the tropical solver with back-pointers and follows them
from the best final state.  :func:`sample_paths` draws paths with probability
proportional to their weight: with backward values beta, a path at state s
stops with probability ``f(s) / beta(s)`` and takes arc a with probability
``w_a beta(dst) / beta(s)``.

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

Public names: Path, best_path, sample_paths, Samples, label_strings.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba as nb
import numpy as np

from ..errors import ArgumentError, FsmError, MachineError, NoAcceptingPathError, SemiringError
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

    Raises:
        NoAcceptingPathError: (a MachineError) the machine accepts no string.
        MachineError: its back-pointers form a cycle.
        SemiringError: the machine has phi arcs (use phi_expand first).
        DivergenceError: a negative cycle.
        NotAMachineError: ``m`` is not a Machine (convert a pynini.Fst with Machine.from_pynini).
    """
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
                    a_lo = lo
                    a_hi = hi
                    while a_lo < a_hi:
                        mid = (a_lo + a_hi) >> 1
                        if arc_cum[mid] <= u:
                            a_lo = mid + 1
                        else:
                            a_hi = mid
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

    def __init__(self, m: Machine, phi_final: bool, normalised: bool = False):
        from ..semiring.ops import scaled_to_neglog
        if normalised:
            beta = np.zeros(m.num_states)
        else:
            _, Bt, _, _ = solve_values(m, "log", True, phi_final=phi_final)
            beta = np.empty(m.num_states)
            scaled_to_neglog(Bt, beta)
        if m.start < 0 or not np.isfinite(beta[m.start]):
            raise NoAcceptingPathError("sample_paths: the machine accepts no string (its total weight is "
                                       "Z = 0): nothing to sample")
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

    Raises:
        NoAcceptingPathError: (a MachineError) the machine accepts nothing.
        MachineError: a path reaches a dead end.
        ArgumentError: num < 0, or max_length was exceeded.
        NotAMachineError: ``m`` is not a Machine (convert a pynini.Fst with Machine.from_pynini).
    """
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
