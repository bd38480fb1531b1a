"""Many machines in one set of arrays: :class:`MachineBatch`.

A batch is the disjoint union of B machines laid out one after the other in a
single :class:`~fsmlearn.fsm.Machine` (machine b owns the states
``state_ptr[b]:state_ptr[b+1]`` and, arcs being sorted by source, the arcs
``arc_ptr[b]:arc_ptr[b+1]``; no arc leaves its machine), with each machine's
own start state in ``starts``.  This is the layout of k2's ``FsaVec`` and of a
batch of sentence lattices; the engine's ``forward``, ``backward``,
``total_weight``, ``forward_backward``, ``arc_posteriors``, ``expectation``,
``entropy``, ``best_path`` and ``sample_paths`` take a batch and answer for
every machine in one call (:mod:`fsmlearn.algo.batch`).

Public names: MachineBatch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba as nb
import numpy as np

from ..errors import ArgumentError
from .machine import Machine

__all__ = ["MachineBatch"]


@nb.njit(cache=True)
def _first_crossing_arc(state_ptr, src_start, dst):
    """The first arc whose destination lies outside its source's machine, or -1."""
    for b in range(state_ptr.shape[0] - 1):
        lo = state_ptr[b]
        hi = state_ptr[b + 1]
        for a in range(src_start[lo], src_start[hi]):
            if dst[a] < lo or dst[a] >= hi:
                return a
    return -1


@nb.njit(cache=True)
def _owner(ptr, total):
    """int64 [total]: the machine that owns each item, from the offsets ptr [B+1]."""
    out = np.empty(total, np.int64)
    for b in range(ptr.shape[0] - 1):
        for i in range(ptr[b], ptr[b + 1]):
            out[i] = b
    return out


class MachineBatch:
    """B machines laid out in one :class:`Machine` with offsets.

    Attributes:
        machine: the disjoint union (its own ``start`` is the first start of a machine
            that has one; the engine reads ``starts``).
        state_ptr: int64 [B+1]: machine b's states are ``state_ptr[b]:state_ptr[b+1]``.
        arc_ptr: int64 [B+1]: machine b's arcs are ``arc_ptr[b]:arc_ptr[b+1]``.
        starts: int64 [B]: each machine's start state in the union's numbering
            (-1: that machine has none).
    """

    __slots__ = ("machine", "state_ptr", "arc_ptr", "starts", "_cache")

    def __init__(self, machine: Machine, state_ptr, starts):
        """A batch over an existing union (k2's ``FsaVec`` layout).

        Args:
            machine: a Machine whose states are grouped by machine.
            state_ptr: int [B+1] offsets rising from 0 to ``machine.num_states``.
            starts: int [B]: machine b's start state (a state of machine b, in the
                union's numbering), or -1 for none.

        Raises:
            ArgumentError: not a Machine, offsets that do not rise from 0 to the
                number of states, a start outside its machine (the message names it),
                or an arc that leaves its machine (named by arc, source and destination).
        """
        if not isinstance(machine, Machine):
            raise ArgumentError(f"MachineBatch: machine must be a fsmlearn.Machine, got {type(machine).__name__}")
        sp = np.ascontiguousarray(state_ptr, dtype=np.int64)
        n = machine.num_states
        if sp.ndim != 1 or sp.size < 1 or sp[0] != 0 or sp[-1] != n or np.any(sp[1:] < sp[:-1]):
            raise ArgumentError(f"MachineBatch: state_ptr must rise from 0 to the number of states ({n}), "
                                f"got {sp[:3].tolist()}..{sp[-3:].tolist()}")
        st = np.ascontiguousarray(starts, dtype=np.int64)
        B = sp.size - 1
        if st.shape != (B,):
            raise ArgumentError(f"MachineBatch: starts has shape {st.shape}; expected ({B},), one per machine")
        bad = np.flatnonzero((st != -1) & ((st < sp[:-1]) | (st >= sp[1:])))
        if bad.size:
            b = int(bad[0])
            raise ArgumentError(f"MachineBatch: machine {b}'s start state {int(st[b])} is not one of its states "
                                f"{int(sp[b])}..{int(sp[b + 1]) - 1}")
        a = int(_first_crossing_arc(sp, machine.src_start, machine.dst))
        if a >= 0:
            s = int(machine.arc_src[a])
            b = int(np.searchsorted(sp, s, side="right") - 1)
            raise ArgumentError(f"MachineBatch: arc {a} from state {s} (machine {b}) goes to state "
                                f"{int(machine.dst[a])}, outside machine {b}'s states "
                                f"{int(sp[b])}..{int(sp[b + 1]) - 1}")
        self.machine = machine
        self.state_ptr = sp
        self.arc_ptr = np.ascontiguousarray(machine.src_start[sp], dtype=np.int64)
        self.starts = st
        self._cache = {}

    @classmethod
    def trusted(cls, machine: Machine, state_ptr, starts) -> MachineBatch:
        """A batch over a layout its builder guarantees (no arc leaves its machine, every
        start inside its machine), without :meth:`__init__`'s O(E) checks: for model code
        whose kernels write the layout (the tagger's lattices).  Anything else should use
        the checked constructor."""
        self = cls.__new__(cls)
        self.machine = machine
        self.state_ptr = np.ascontiguousarray(state_ptr, dtype=np.int64)
        self.arc_ptr = np.ascontiguousarray(machine.src_start[self.state_ptr], dtype=np.int64)
        self.starts = np.ascontiguousarray(starts, dtype=np.int64)
        self._cache = {}
        return self

    @classmethod
    def from_machines(cls, machines: Sequence[Machine]) -> MachineBatch:
        """The batch of the given machines, in order (each keeps its own numbering inside).

        The machines must share a weight convention; symbol tables are kept when every
        machine has the same ones, else dropped.  No machines give the empty batch.

        Raises:
            ArgumentError: something that is not a Machine, mixed weight conventions (the
                message names the first machine that differs), or more states than one
                Machine holds.
        """
        ms = list(machines)
        if not ms:          # the empty batch
            empty = Machine(start=-1, final=np.zeros(0), src_start=np.zeros(1, np.int64),
                            dst=np.zeros(0, np.int32), ilabel=np.zeros(0, np.int32), weight=np.zeros(0))
            return cls(empty, np.zeros(1, np.int64), np.zeros(0, np.int64))
        for i, m in enumerate(ms):
            if not isinstance(m, Machine):
                raise ArgumentError(f"MachineBatch.from_machines: item {i} is a {type(m).__name__}, "
                                    "not a fsmlearn.Machine")
            if m.semiring != ms[0].semiring:
                raise ArgumentError(f"MachineBatch.from_machines: machine {i} has {m.semiring!r} weights, "
                                    f"machine 0 {ms[0].semiring!r}: a batch has one weight convention")
        ns = np.array([m.num_states for m in ms], np.int64)
        es = np.array([m.num_arcs for m in ms], np.int64)
        sp = np.zeros(len(ms) + 1, np.int64)
        np.cumsum(ns, out=sp[1:])
        if sp[-1] >= 2**31 - 1:
            raise ArgumentError(f"MachineBatch.from_machines: {int(sp[-1])} states in all, more than one "
                                "Machine holds (2**31 - 1): make several batches")
        ap = np.zeros(len(ms) + 1, np.int64)
        np.cumsum(es, out=ap[1:])
        src_start = np.concatenate([m.src_start[:-1] + ap[i] for i, m in enumerate(ms)] + [ap[-1:]])
        dst = np.concatenate([m.dst.astype(np.int64) + sp[i] for i, m in enumerate(ms)]).astype(np.int32)
        acceptor = all(m.olabel is m.ilabel or np.array_equal(m.olabel, m.ilabel) for m in ms)
        same_syms = all(m.isyms is ms[0].isyms and m.osyms is ms[0].osyms for m in ms)
        starts = np.array([m.start + sp[i] if m.start >= 0 else -1 for i, m in enumerate(ms)], np.int64)
        valid = starts[starts >= 0]
        union = Machine(start=int(valid[0]) if valid.size else -1,
                        final=np.concatenate([m.final for m in ms]), src_start=src_start, dst=dst,
                        ilabel=np.concatenate([m.ilabel for m in ms]),
                        olabel=None if acceptor else np.concatenate([m.olabel for m in ms]),
                        weight=np.concatenate([m.weight for m in ms]), semiring=ms[0].semiring,
                        isyms=ms[0].isyms if same_syms else None, osyms=ms[0].osyms if same_syms else None,
                        arc_type=ms[0].arc_type, openfst_phi=ms[0].openfst_phi)
        return cls(union, sp, starts)

    # ------------------------------------------------------------------ shape

    def __len__(self) -> int:
        return self.state_ptr.shape[0] - 1

    @property
    def num_machines(self) -> int:
        return len(self)

    @property
    def num_states(self) -> int:
        return self.machine.num_states

    @property
    def num_arcs(self) -> int:
        return self.machine.num_arcs

    @property
    def has_phi(self) -> bool:
        return self.machine.has_phi

    def __repr__(self) -> str:
        return (f"MachineBatch({len(self)} machines, {self.num_states} states, {self.num_arcs} arcs, "
                f"{self.machine.semiring})")

    def cached(self, key, build):
        """Like :meth:`Machine.cached`: derived structures of this (immutable) batch."""
        v = self._cache.get(key)
        if v is None:
            v = self._cache[key] = build()
        return v

    def machine_of_states(self) -> np.ndarray:
        """int64 [Q]: the machine that owns each state."""
        return self.cached("state_owner", lambda: _owner(self.state_ptr, self.num_states))

    def machine_of_arcs(self) -> np.ndarray:
        """int64 [E]: the machine that owns each arc."""
        return self.cached("arc_owner", lambda: _owner(self.arc_ptr, self.num_arcs))

    def split(self, values, over: str = "states") -> list[np.ndarray]:
        """Views of a flat per-state (``over="states"``) or per-arc (``"arcs"``) array, one per machine."""
        ptr = {"states": self.state_ptr, "arcs": self.arc_ptr}.get(over)
        if ptr is None:
            raise ArgumentError(f"split: over must be 'states' or 'arcs', got {over!r}")
        values = np.asarray(values)
        if values.shape[0] != ptr[-1]:
            raise ArgumentError(f"split: {values.shape[0]} values for {int(ptr[-1])} {over}")
        return [values[ptr[b]:ptr[b + 1]] for b in range(len(self))]

    def __getitem__(self, b: int) -> Machine:
        """Machine b on its own (its states and arcs renumbered from 0)."""
        B = len(self)
        if not -B <= b < B:
            raise IndexError(f"machine {b} of a batch of {B}")
        b %= B
        m = self.machine
        s0, s1 = int(self.state_ptr[b]), int(self.state_ptr[b + 1])
        a0, a1 = int(self.arc_ptr[b]), int(self.arc_ptr[b + 1])
        start = int(self.starts[b])
        return Machine(start=start - s0 if start >= 0 else -1, final=m.final[s0:s1],
                       src_start=m.src_start[s0:s1 + 1] - a0, dst=m.dst[a0:a1] - s0, ilabel=m.ilabel[a0:a1],
                       olabel=None if m.olabel is m.ilabel else m.olabel[a0:a1], weight=m.weight[a0:a1],
                       semiring=m.semiring, isyms=m.isyms, osyms=m.osyms, arc_type=m.arc_type,
                       openfst_phi=m.openfst_phi)

    def __iter__(self):
        return (self[b] for b in range(len(self)))

