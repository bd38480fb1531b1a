"""Schedules: the order in which the solvers visit states and arcs.

A schedule is computed once per graph and direction (and cached on the
machine).  States are renumbered into *positions*: strongly connected
components (Tarjan 1972) in topological order of the direction of flow, the
states of each component in depth-first discovery order (so that tree arcs
point forward, which suits Gauss-Seidel sweeps).  Arcs are split into

* external arcs, between components, ordered by the position of their tail
  (the state a value flows from), pushed once when the tail is final;
* internal arcs, inside a component, grouped by head (the state a value flows
  into) for pull-form Gauss-Seidel sweeps;
* self-loops, folded into each state as a Kleene star.

A graph whose arcs all satisfy ``src < dst`` is acyclic in identity order;
its schedule needs no renumbering (the fast path for topologically numbered
machines such as lattices and the benchmark).

Public names: Schedule, schedule_for, graph_is_forward_ordered.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np


@nb.njit(cache=True)
def graph_is_forward_ordered(arc_src, dst):
    """True when every arc goes from a lower to a higher state number."""
    for a in range(dst.shape[0]):
        if dst[a] <= arc_src[a]:
            return False
    return True


@nb.njit(cache=True)
def _tarjan(n, start, adj):
    """SCCs of the graph (CSR start/adj).

    Returns (order, comp_ptr, comp): states in emission order (sinks first),
    each component contiguous with its states in discovery order; component
    boundaries in ``order``; component id of each state.
    """
    index = np.full(n, -1, np.int64)
    low = np.zeros(n, np.int64)
    onstack = np.zeros(n, np.bool_)
    stack = np.empty(n, np.int32)
    cs_state = np.empty(n, np.int32)
    cs_edge = np.empty(n, np.int64)
    comp = np.full(n, -1, np.int32)
    order = np.empty(n, np.int32)
    comp_ptr = np.empty(n + 1, np.int64)
    comp_ptr[0] = 0
    ncomp = 0
    op = 0
    sp = 0
    counter = 0
    for root in range(n):
        if index[root] != -1:
            continue
        index[root] = counter
        low[root] = counter
        counter += 1
        stack[sp] = root
        sp += 1
        onstack[root] = True
        cs_state[0] = root
        cs_edge[0] = start[root]
        csp = 1
        while csp > 0:
            v = cs_state[csp - 1]
            e = cs_edge[csp - 1]
            if e < start[v + 1]:
                cs_edge[csp - 1] = e + 1
                w = adj[e]
                if index[w] == -1:
                    index[w] = counter
                    low[w] = counter
                    counter += 1
                    stack[sp] = w
                    sp += 1
                    onstack[w] = True
                    cs_state[csp] = w
                    cs_edge[csp] = start[w]
                    csp += 1
                elif onstack[w]:
                    if index[w] < low[v]:
                        low[v] = index[w]
            else:
                csp -= 1
                if csp > 0:
                    u = cs_state[csp - 1]
                    if low[v] < low[u]:
                        low[u] = low[v]
                if low[v] == index[v]:
                    j = sp - 1
                    while stack[j] != v:
                        j -= 1
                    for i in range(j, sp):
                        x = stack[i]
                        order[op] = x
                        op += 1
                        onstack[x] = False
                        comp[x] = ncomp
                    sp = j
                    ncomp += 1
                    comp_ptr[ncomp] = op
    return order, comp_ptr[:ncomp + 1].copy(), comp


@nb.njit(cache=True)
def _positions(order, comp_ptr, backward):
    """Processing order of states for one direction.

    forward: components reversed (sources first), states in discovery order;
    backward: components in emission order, states in reverse discovery order.
    """
    n = order.shape[0]
    C = comp_ptr.shape[0] - 1
    proc = np.empty(n, np.int32)
    scc_ptr = np.empty(C + 1, np.int64)
    scc_ptr[0] = 0
    p = 0
    for k in range(C):
        c = k if backward else C - 1 - k
        lo = comp_ptr[c]
        hi = comp_ptr[c + 1]
        if backward:
            for i in range(hi - 1, lo - 1, -1):
                proc[p] = order[i]
                p += 1
        else:
            for i in range(lo, hi):
                proc[p] = order[i]
                p += 1
        scc_ptr[k + 1] = p
    pos = np.empty(n, np.int32)
    for i in range(n):
        pos[proc[i]] = i
    return proc, pos, scc_ptr


@nb.njit(cache=True)
def _split_arcs(arc_src, dst, pos, scc_ptr, backward):
    n = pos.shape[0]
    E = dst.shape[0]
    C = scc_ptr.shape[0] - 1
    scc_of = np.empty(n, np.int32)
    for c in range(C):
        for p in range(scc_ptr[c], scc_ptr[c + 1]):
            scc_of[p] = c
    kind = np.empty(E, np.int8)  # 0 ext, 1 int, 2 self
    n_ext = np.zeros(n + 1, np.int64)
    n_int = np.zeros(n + 1, np.int64)
    n_self = np.zeros(n + 1, np.int64)
    for a in range(E):
        if backward:
            tp = pos[dst[a]]
            hp = pos[arc_src[a]]
        else:
            tp = pos[arc_src[a]]
            hp = pos[dst[a]]
        if tp == hp:
            kind[a] = 2
            n_self[hp + 1] += 1
        elif scc_of[tp] == scc_of[hp]:
            kind[a] = 1
            n_int[hp + 1] += 1
        else:
            kind[a] = 0
            n_ext[tp + 1] += 1
    for p in range(n):
        n_ext[p + 1] += n_ext[p]
        n_int[p + 1] += n_int[p]
        n_self[p + 1] += n_self[p]
    ext_tail = np.empty(n_ext[n], np.int32)
    ext_head = np.empty(n_ext[n], np.int32)
    ext_arc = np.empty(n_ext[n], np.int64)
    int_tail = np.empty(n_int[n], np.int32)
    int_head = np.empty(n_int[n], np.int32)
    int_arc = np.empty(n_int[n], np.int64)
    self_pos = np.empty(n_self[n], np.int32)
    self_arc = np.empty(n_self[n], np.int64)
    fe = n_ext[:-1].copy()
    fi = n_int[:-1].copy()
    fs = n_self[:-1].copy()
    for a in range(E):
        if backward:
            tp = pos[dst[a]]
            hp = pos[arc_src[a]]
        else:
            tp = pos[arc_src[a]]
            hp = pos[dst[a]]
        k = kind[a]
        if k == 0:
            i = fe[tp]
            fe[tp] += 1
            ext_tail[i] = tp
            ext_head[i] = hp
            ext_arc[i] = a
        elif k == 1:
            i = fi[hp]
            fi[hp] += 1
            int_tail[i] = tp
            int_head[i] = hp
            int_arc[i] = a
        else:
            i = fs[hp]
            fs[hp] += 1
            self_pos[i] = hp
            self_arc[i] = a
    ext_ptr = np.empty(C + 1, np.int64)
    int_ptr = np.empty(C + 1, np.int64)
    self_ptr = np.empty(C + 1, np.int64)
    trivial = np.empty(C, np.bool_)
    for c in range(C + 1):
        p = scc_ptr[c]
        ext_ptr[c] = n_ext[p]
        int_ptr[c] = n_int[p]
        self_ptr[c] = n_self[p]
    for c in range(C):
        trivial[c] = int_ptr[c + 1] == int_ptr[c] and self_ptr[c + 1] == self_ptr[c]
    return (ext_tail, ext_head, ext_arc, ext_ptr, int_tail, int_head, int_arc, int_ptr, n_int,
            self_pos, self_arc, self_ptr, trivial)


@dataclass(frozen=True)
class Schedule:
    """Processing order of one graph in one direction (see the module doc).

    Attributes:
        n: number of states.
        identity: positions are state numbers (acyclic, forward-ordered graph).
        proc: int32 [N] state at each position (None when identity).
        pos: int32 [N] position of each state (None when identity).
        scc_ptr: int64 [C+1] position boundaries of the components.
        trivial: bool [C] component is one state without a self-loop.
        ext_tail, ext_head: int32 positions of external arcs, by tail position.
        ext_arc: int64 arc ids of external arcs.
        ext_ptr: int64 [C+1] external arcs of each component's tails.
        int_tail, int_head, int_arc, int_ptr: internal arcs, by head position.
        int_row: int64 [N+1] internal arcs of each head position.
        self_pos, self_arc, self_ptr: self-loops.
        cyclic: some component is non-trivial.
    """
    n: int
    identity: bool
    proc: np.ndarray | None
    pos: np.ndarray | None
    scc_ptr: np.ndarray
    trivial: np.ndarray
    ext_tail: np.ndarray
    ext_head: np.ndarray
    ext_arc: np.ndarray
    ext_ptr: np.ndarray
    int_tail: np.ndarray
    int_head: np.ndarray
    int_arc: np.ndarray
    int_ptr: np.ndarray
    int_row: np.ndarray
    self_pos: np.ndarray
    self_arc: np.ndarray
    self_ptr: np.ndarray

    @property
    def cyclic(self) -> bool:
        return not bool(np.all(self.trivial))

    @property
    def num_components(self) -> int:
        return int(self.trivial.shape[0])


_E32 = np.empty(0, np.int32)
_E64 = np.empty(0, np.int64)


def _identity_schedule(n: int, arc_src: np.ndarray, dst: np.ndarray, backward: bool) -> Schedule:
    E = dst.shape[0]
    if backward:
        tail = np.ascontiguousarray(dst[::-1])
        head = np.ascontiguousarray(arc_src[::-1])
        arcs = np.arange(E - 1, -1, -1, dtype=np.int64)
    else:
        tail, head = arc_src, dst
        arcs = np.arange(E, dtype=np.int64)
    return Schedule(n=n, identity=True, proc=None, pos=None,
                    scc_ptr=np.array([0, n], np.int64), trivial=np.ones(1, np.bool_),
                    ext_tail=tail, ext_head=head, ext_arc=arcs, ext_ptr=np.array([0, E], np.int64),
                    int_tail=_E32, int_head=_E32, int_arc=_E64, int_ptr=np.zeros(2, np.int64),
                    int_row=np.zeros(n + 1, np.int64), self_pos=_E32, self_arc=_E64,
                    self_ptr=np.zeros(2, np.int64))


def build_schedule(n: int, src_start: np.ndarray, arc_src: np.ndarray, dst: np.ndarray,
                   backward: bool, tarjan=None) -> Schedule:
    """Schedule of the graph with CSR arcs (src_start, dst) for one direction.

    Args:
        n: number of states.
        src_start: int64 [N+1] CSR offsets (arcs sorted by source).
        arc_src: int32 [E] source of each arc.
        dst: int32 [E] destination of each arc.
        backward: schedule for values flowing from dst to src.
        tarjan: a callable returning the ``_tarjan`` result of this graph
            (so that both directions share one), or None.
    """
    if graph_is_forward_ordered(arc_src, dst):
        return _identity_schedule(n, arc_src, dst, backward)
    order, comp_ptr, _ = tarjan() if tarjan is not None else _tarjan(n, src_start, dst)
    proc, pos, scc_ptr = _positions(order, comp_ptr, backward)
    (ext_tail, ext_head, ext_arc, ext_ptr, int_tail, int_head, int_arc, int_ptr, int_row,
     self_pos, self_arc, self_ptr, trivial) = _split_arcs(arc_src, dst, pos, scc_ptr, backward)
    return Schedule(n=n, identity=False, proc=proc, pos=pos, scc_ptr=scc_ptr, trivial=trivial,
                    ext_tail=ext_tail, ext_head=ext_head, ext_arc=ext_arc, ext_ptr=ext_ptr,
                    int_tail=int_tail, int_head=int_head, int_arc=int_arc, int_ptr=int_ptr,
                    int_row=int_row, self_pos=self_pos, self_arc=self_arc, self_ptr=self_ptr)


def schedule_for(graph, backward: bool) -> Schedule:
    """The cached schedule of a machine or linear system for one direction.

    ``graph`` needs ``num_states``, ``src_start``, ``arc_src``, ``dst`` and
    ``cached(key, build)`` (a :class:`~fsmlearn.fsm.Machine` has them).
    """
    def tarjan():
        return graph.cached("tarjan", lambda: _tarjan(graph.num_states, graph.src_start, graph.dst))

    return graph.cached("schedule_bwd" if backward else "schedule_fwd",
                        lambda: build_schedule(graph.num_states, graph.src_start, graph.arc_src,
                                               graph.dst, backward, tarjan))
