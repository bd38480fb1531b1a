"""Composition and intersection with failure (phi) arcs on the right machine.

``compose(a, b)`` matches each output label of ``a`` against the input labels
of ``b``; where a state of ``b`` lacks the label, its phi arc is followed
(accumulating the phi weight) until a state has it, exactly as failure
semantics require (Allauzen, Mohri and Roark 2003).  The result is phi-free.
Final weights of ``b`` fail over the same way when ``phi_final`` is true.

The special case of a straight-line ``a`` (scoring label sequences without
building the product) is :mod:`fsmlearn.algo.score`.

Epsilon outputs of ``a`` move ``a`` alone; epsilon inputs of ``b`` move ``b``
alone.  Both at once would need an epsilon filter (Mohri, Pereira and Riley
2000) and are refused.

Labels are matched by id, so the ids must mean the same symbols on both
sides: ``a``'s output table and ``b``'s input table must both be absent or
equal; one without the other, or two that differ, is a
:class:`~fsmlearn.errors.SymbolTableError` naming the first symbol that
differs.

Public names: compose, intersect, trim, check_tables, neglog_arrays.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import types
from numba.typed import Dict

from ..errors import MachineError, SymbolTableError
from ..fsm.buffers import grow
from ..fsm.machine import EPSILON, PHI, Machine
from ..fsm.symbols import SymbolTable
from ._check import require_machine
from .phi import label_index, phi_structure, phi_walk


@nb.njit(cache=True)
def _final_fail(q, b_final, b_has_final, b_phi, b_dst, b_w, phi_final):
    """Final weight of b's state q under failure semantics (inf if none)."""
    if b_has_final[q]:
        return b_final[q]
    if not phi_final:
        return np.inf
    acc = 0.0
    r = q
    steps = 0
    while b_phi[r] >= 0:
        a = b_phi[r]
        acc += b_w[a]
        r = b_dst[a]
        steps += 1
        if b_has_final[r]:
            return acc + b_final[r]
        if steps > b_final.shape[0]:
            return np.inf
    return np.inf


@nb.njit(inline="always")
def _pair_state(ids, qa, qb, nb_states, qa_of, qb_of, n_states):
    """The id of the result state (qa, qb), created (appended to qa_of, qb_of) if new;
    returns (id, qa_of, qb_of, n_states)."""
    key = qa * nb_states + qb
    if key in ids:
        return ids[key], qa_of, qb_of, n_states
    d = n_states
    ids[key] = d
    qa_of = grow(qa_of, d)
    qb_of = grow(qb_of, d)
    qa_of[d] = qa
    qb_of[d] = qb
    return d, qa_of, qb_of, n_states + 1


@nb.njit(inline="always")
def _add_arc(r_src, r_dst, r_il, r_ol, r_w, n, src, dst, il, ol, w):
    """Arc n of the result (the arrays grown as needed); returns the arrays."""
    r_src = grow(r_src, n)
    r_dst = grow(r_dst, n)
    r_il = grow(r_il, n)
    r_ol = grow(r_ol, n)
    r_w = grow(r_w, n)
    r_src[n] = src
    r_dst[n] = dst
    r_il[n] = il
    r_ol[n] = ol
    r_w[n] = w
    return r_src, r_dst, r_il, r_ol, r_w


@nb.njit(cache=True)
def _compose_kernel(a_start, a_src_start, a_dst, a_il, a_ol, a_w, a_final,
                    b_start, b_src_start, b_dst, b_il, b_ol, b_w, b_final, b_has_final, b_perm, b_phi,
                    phi_final, b_eps):
    """The reachable part of a o b by breadth-first search over state pairs, -log weights.

    a: start, CSR arcs (src_start int64 [na+1]; dst, il, ol int32; w float64 [Ea]) and final
    float64 [na]; b: the same plus has_final bool [nb], perm int64 [Eb] (arcs sorted by input
    label per state) and phi int64 [nb] (each state's phi arc, -1: none).  An arc of a with
    output x meets b's arcs labelled x at b's state or, failing that, at the first state down
    its phi chain that has them (the chain's weights added); a's epsilon outputs move a alone,
    b's epsilon inputs (``b_eps``) b alone.  Returns the pairs (qa_of, qb_of int64), the final
    weights and the arcs (src, dst int64; il, ol int32; w float64) with their counts
    (-1, -1 for a phi cycle in b).
    """
    nb_states = b_final.shape[0]
    ids = Dict.empty(key_type=types.int64, value_type=types.int64)
    qa_of = np.empty(16, np.int64)
    qb_of = np.empty(16, np.int64)
    r_src = np.empty(16, np.int64)
    r_dst = np.empty(16, np.int64)
    r_il = np.empty(16, np.int32)
    r_ol = np.empty(16, np.int32)
    r_w = np.empty(16, np.float64)
    n_arcs = 0
    key0 = a_start * nb_states + b_start
    ids[key0] = 0
    qa_of[0] = a_start
    qb_of[0] = b_start
    n_states = 1
    head = 0
    finals = np.empty(16, np.float64)
    chain = np.empty(nb_states + 2, np.int64)
    while head < n_states:
        qa = qa_of[head]
        qb = qb_of[head]
        finals = grow(finals, head)
        finals[head] = a_final[qa] + _final_fail(qb, b_final, b_has_final, b_phi, b_dst, b_w, phi_final) \
            if a_final[qa] < np.inf else np.inf
        for e in range(a_src_start[qa], a_src_start[qa + 1]):
            x = a_ol[e]
            if x == EPSILON:
                d, qa_of, qb_of, n_states = _pair_state(ids, a_dst[e], qb, nb_states, qa_of, qb_of, n_states)
                r_src, r_dst, r_il, r_ol, r_w = _add_arc(r_src, r_dst, r_il, r_ol, r_w, n_arcs, head, d, a_il[e],
                                                         EPSILON, a_w[e])
                n_arcs += 1
                continue
            # b's arcs labelled x, failing over phi arcs where b's state has none
            r, k, L = phi_walk(b_src_start, b_perm, b_il, b_phi, b_dst, qb, x, chain, 0, nb_states)
            if L < 0:
                return qa_of, qb_of, finals, r_src, r_dst, r_il, r_ol, r_w, -1, -1
            if k < 0:
                continue
            acc = 0.0
            for t in range(L):
                acc += b_w[chain[t]]
            hi = b_src_start[r + 1]
            while k < hi and b_il[b_perm[k]] == x:
                f = b_perm[k]
                d, qa_of, qb_of, n_states = _pair_state(ids, a_dst[e], b_dst[f], nb_states, qa_of, qb_of, n_states)
                r_src, r_dst, r_il, r_ol, r_w = _add_arc(r_src, r_dst, r_il, r_ol, r_w, n_arcs, head, d, a_il[e],
                                                         b_ol[f], a_w[e] + acc + b_w[f])
                n_arcs += 1
                k += 1
        if b_eps:
            for f in range(b_src_start[qb], b_src_start[qb + 1]):
                if b_il[f] != EPSILON:
                    continue
                d, qa_of, qb_of, n_states = _pair_state(ids, qa, b_dst[f], nb_states, qa_of, qb_of, n_states)
                r_src, r_dst, r_il, r_ol, r_w = _add_arc(r_src, r_dst, r_il, r_ol, r_w, n_arcs, head, d, EPSILON,
                                                         b_ol[f], b_w[f])
                n_arcs += 1
        head += 1
    return qa_of, qb_of, finals, r_src, r_dst, r_il, r_ol, r_w, n_states, n_arcs


def neglog_arrays(m: Machine):
    """The machine's arc and final weights as contiguous float64 -log weights."""
    w, f = m.neglog_weights()
    return np.ascontiguousarray(w, dtype=np.float64), np.ascontiguousarray(f, dtype=np.float64)


def _b_structures(b: Machine, phi_final: bool):
    perm = label_index(b)
    phi = phi_structure(b, phi_final).phi_arc if b.has_phi else np.full(b.num_states, -1, np.int64)
    return perm, phi


def _table_name(t: SymbolTable) -> str:
    return f"{t.name!r}, {len(t)} symbols" if t.name else f"{len(t)} symbols"


def check_tables(ta: SymbolTable | None, tb: SymbolTable | None, func: str, what_a: str, what_b: str) -> None:
    """Raise SymbolTableError unless the two tables are both absent or equal.

    Args:
        ta, tb: the tables whose ids must agree (a's output, b's input for compose).
        func: the public function, for the message.
        what_a, what_b: what each table is, for the message.

    Raises:
        SymbolTableError: one table is absent and the other is not, or they
            differ; the message names the first key (in key order) that
            differs and its two symbols.
    """
    if ta is tb:
        return
    if ta is None or tb is None:
        have, lack = (what_b, what_a) if ta is None else (what_a, what_b)
        t = tb if ta is None else ta
        raise SymbolTableError(f"{func}: the {lack} have no symbol table but the {have} do "
                               f"({_table_name(t)}), so their label ids cannot be matched safely; give "
                               "both machines the same table (or neither)")
    if ta == tb:
        return
    da, db = {k: x for k, x in ta}, {k: x for k, x in tb}
    for k in sorted(set(da) | set(db)):
        x, y = da.get(k), db.get(k)
        if x != y:
            sx = "no symbol" if x is None else repr(x)
            sy = "no symbol" if y is None else repr(y)
            raise SymbolTableError(f"{func}: the symbol tables differ at label id {k}: {sx} in the {what_a} "
                                   f"({_table_name(ta)}), {sy} in the {what_b} ({_table_name(tb)})")


def compose(a: Machine, b: Machine, phi_final: bool = True, connect: bool = True,
            return_pairs: bool = False):
    """The composition a o b, with failure semantics for b's phi arcs.

    Args:
        a: left machine (no phi arcs).
        b: right machine; phi arcs (input label PHI) are failure arcs.
        phi_final: b's final weights fail over like labels.
        connect: drop states that cannot reach a final state.
        return_pairs: also return, for each state of the result, the pair of
            states of a and b it stands for.

    Returns:
        A phi-free Machine with weights as negative logs (semiring "tropical"
        if both inputs are tropical, else "log"); input symbols of a, output
        symbols of b.  With ``return_pairs``, ``(machine, pairs)`` where
        ``pairs`` is int64 [num_states, 2]: row q holds (state of a, state of b).

    Raises:
        SymbolTableError: a's output symbol table and b's input symbol table
            are not both absent or equal (one is missing, or they differ: the
            message names the first label id whose symbols differ).
        MachineError: a has phi arcs, or a has epsilon outputs while b has
            epsilon inputs.
        NotAMachineError: a or b is not a Machine (convert a pynini.Fst with
            ``Machine.from_pynini``).
    """
    return _compose(a, b, phi_final, connect, return_pairs, "compose")


def _compose(a: Machine, b: Machine, phi_final: bool, connect: bool, return_pairs: bool, func: str):
    require_machine(a, func, "a")
    require_machine(b, func, "b")
    if a.has_phi or np.any(a.olabel == PHI):
        raise MachineError(f"the left machine of {func} has phi arcs; only the right one may")
    if func == "intersect":
        check_tables(a.output_symbols, b.isyms, func, "left machine's labels", "right machine's labels")
    else:
        check_tables(a.output_symbols, b.isyms, func, "left machine's outputs", "right machine's inputs")
    b_eps = bool(np.any(b.ilabel == EPSILON))
    if b_eps and np.any(a.olabel == EPSILON):
        raise MachineError("compose: the left machine has epsilon outputs and the right one epsilon inputs; "
                           "this needs an epsilon filter, which compose does not implement")
    semiring = "tropical" if (a.semiring == "tropical" and b.semiring == "tropical") else "log"
    if a.start < 0 or b.start < 0:
        empty = Machine(start=-1, final=np.zeros(0), src_start=np.zeros(1, np.int64), dst=np.zeros(0, np.int32),
                        ilabel=np.zeros(0, np.int32), weight=np.zeros(0), semiring=semiring)
        return (empty, np.zeros((0, 2), np.int64)) if return_pairs else empty
    aw, af = neglog_arrays(a)
    bw, bf = neglog_arrays(b)
    perm, phi = _b_structures(b, phi_final)
    out = _compose_kernel(a.start, a.src_start, a.dst, a.ilabel, a.olabel, aw, af,
                          b.start, b.src_start, b.dst, b.ilabel, b.olabel, bw, bf,
                          np.isfinite(bf), perm, phi, phi_final, b_eps)
    qa_of, qb_of, finals, r_src, r_dst, r_il, r_ol, r_w, n, E = out
    if n < 0:
        raise MachineError("compose: the phi arcs of the right machine form a cycle")
    acceptor = a.is_acceptor and b.is_acceptor
    m = Machine.from_arcs(n, 0, finals[:n], r_src[:E], r_dst[:E], r_il[:E],
                          None if acceptor and np.array_equal(r_il[:E], r_ol[:E]) else r_ol[:E],
                          r_w[:E], isyms=a.isyms, osyms=b.output_symbols if not acceptor else None,
                          semiring=semiring)
    if not return_pairs:
        return trim(m) if connect else m
    pairs = np.stack([qa_of[:n], qb_of[:n]], axis=1)
    if not connect:
        return m, pairs
    keep = _trim_keep(m)
    return _trim_by(m, keep), (pairs[keep] if keep[m.start] else np.zeros((0, 2), np.int64))


def intersect(a: Machine, b: Machine, phi_final: bool = True, connect: bool = True,
              return_pairs: bool = False):
    """Intersection of two acceptors (b may have phi arcs): ``compose(a, b)``.

    Args and result as :func:`compose`.

    Raises:
        SymbolTableError: the two machines' symbol tables are not both absent
            or equal (the message names the first label id that differs).
        MachineError, NotAMachineError: as :func:`compose`.
    """
    return _compose(a, b, phi_final, connect, return_pairs, "intersect")


@nb.njit(cache=True)
def _reach(n, start, src_start, dst):
    seen = np.zeros(n, np.bool_)
    stack = np.empty(n, np.int64)
    sp = 0
    for s in range(n):
        if start[s]:
            seen[s] = True
            stack[sp] = s
            sp += 1
    while sp > 0:
        sp -= 1
        s = stack[sp]
        for a in range(src_start[s], src_start[s + 1]):
            d = dst[a]
            if not seen[d]:
                seen[d] = True
                stack[sp] = d
                sp += 1
    return seen


def _trim_keep(m: Machine) -> np.ndarray:
    """bool [num_states]: the states on a path from the start to a final state."""
    n = m.num_states
    if n == 0 or m.start < 0:
        return np.ones(n, bool)
    init = np.zeros(n, bool)
    init[m.start] = True
    acc = _reach(n, init, m.src_start, m.dst)
    # coaccessible: reachability on the reversed graph
    order = np.argsort(m.dst, kind="stable")
    rstart = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(m.dst, minlength=n), out=rstart[1:])
    w, f = m.neglog_weights()
    co = _reach(n, np.isfinite(f), rstart, m.arc_src[order].astype(np.int32))
    return acc & co


def trim(m: Machine) -> Machine:
    """Remove states not on a path from the start to a final state (renumbered in order).

    Raises:
        NotAMachineError: ``m`` is not a Machine.
    """
    require_machine(m, "trim", "m")
    if m.num_states == 0 or m.start < 0:
        return m
    return _trim_by(m, _trim_keep(m))


def _trim_by(m: Machine, keep: np.ndarray) -> Machine:
    """The machine restricted to the states in ``keep``, renumbered in order."""
    if keep.all():
        return m
    if not keep[m.start]:
        return Machine(start=-1, final=np.zeros(0), src_start=np.zeros(1, np.int64), dst=np.zeros(0, np.int32),
                       ilabel=np.zeros(0, np.int32), weight=np.zeros(0), semiring=m.semiring,
                       isyms=m.isyms, osyms=m.osyms)
    new_id = np.cumsum(keep) - 1
    arcs = keep[m.arc_src] & keep[m.dst]
    return Machine.from_arcs(int(keep.sum()), int(new_id[m.start]), m.final[keep], new_id[m.arc_src[arcs]],
                             new_id[m.dst[arcs]], m.ilabel[arcs], m.olabel[arcs] if m.stores_olabel else None,
                             m.weight[arcs], isyms=m.isyms, osyms=m.osyms, semiring=m.semiring,
                             arc_type=m.arc_type, openfst_phi=m.openfst_phi)
