"""The machine: an immutable, array-backed weighted finite-state machine.

Arcs are stored in CSR form sorted by source state: the arcs of state ``s``
are ``src_start[s]:src_start[s+1]`` of the int32 arrays ``dst``, ``ilabel``,
``olabel`` and the float64 array ``weight``.  ``final`` holds one final weight
per state and ``start`` the start state (-1 for the empty machine).

Weights follow the machine's *weight convention* ``semiring``:

* ``"log"`` and ``"tropical"``: weights are negative natural logs (costs), as
  in OpenFst's ``log``/``log64`` and ``standard`` arc types; ``+inf`` is the
  semiring zero (no weight), ``-inf`` and NaN are invalid.
* ``"real"``: weights are non-negative reals; ``0`` is the zero; negative,
  infinite and NaN weights are invalid.

Label 0 is epsilon and label :data:`PHI` (-2) marks failure arcs: a phi arc
leaving ``q`` is followed for a label only when ``q`` has no arc with that
label (Allauzen, Mohri and Roark 2003).  Converting to pynini maps
:data:`PHI` to a configurable OpenFst label.

Public names: Machine, EPSILON, PHI, DEFAULT_OPENFST_PHI.
"""

from __future__ import annotations

import math
from typing import Any

import numba as nb
import numpy as np

from ..errors import MachineError, SymbolTableError
from .openfst_io import decode_vector_fst, encode_vector_fst
from .symbols import SymbolTable
from .atomic import atomic_write

EPSILON = 0
PHI = -2
#: OpenFst label used for phi arcs when a machine has no label of its own
DEFAULT_OPENFST_PHI = 2**31 - 2
WEIGHT_CONVENTIONS = ("log", "tropical", "real")

# reason codes of the validation kernel
_OK, _BAD_DST, _BAD_ILABEL, _BAD_OLABEL, _BAD_WEIGHT = 0, 1, 2, 3, 4


@nb.njit(cache=True)
def _validate_arcs(src_start, dst, ilabel, olabel, weight, n, real):
    """First bad arc, its state and a reason code (0 = all good), and whether some arc's
    input label is PHI (counted on the way: the machine's ``has_phi``)."""
    phi = False
    for s in range(src_start.shape[0] - 1):
        for a in range(src_start[s], src_start[s + 1]):
            d = dst[a]
            if d < 0 or d >= n:
                return a, s, _BAD_DST, phi
            if ilabel[a] < 0:
                if ilabel[a] != PHI:
                    return a, s, _BAD_ILABEL, phi
                phi = True
            if olabel[a] < 0 and olabel[a] != PHI:
                return a, s, _BAD_OLABEL, phi
            w = weight[a]
            if real:
                if not (w >= 0.0 and w < np.inf):
                    return a, s, _BAD_WEIGHT, phi
            else:
                if not (w > -np.inf):
                    return a, s, _BAD_WEIGHT, phi
    return -1, -1, _OK, phi


@nb.njit(cache=True)
def _first_label_missing(labels, keys_sorted):
    for a in range(labels.shape[0]):
        x = labels[a]
        if x == PHI or x == EPSILON:
            continue
        i = np.searchsorted(keys_sorted, x)
        if i >= keys_sorted.shape[0] or keys_sorted[i] != x:
            return a
    return -1


class Machine:
    """An immutable weighted finite-state machine (acceptor or transducer).

    Build one with :meth:`from_arcs` (arcs in any order), :meth:`from_pynini`,
    :meth:`load` (``.npz``) or :meth:`read` (OpenFst binary).  The constructor
    takes CSR arrays directly and validates them.

    Args:
        start: start state, or -1 for the empty machine.
        final: float64 [N] final weights.
        src_start: int64 [N+1] CSR offsets of each state's arcs.
        dst: int32 [E] destination of each arc.
        ilabel: int32 [E] input labels (0 epsilon, PHI failure).
        olabel: int32 [E] output labels, or None for an acceptor.
        weight: float64 [E] arc weights in the ``semiring`` convention.
        isyms, osyms: optional symbol tables.
        semiring: the weight convention, "log", "tropical" or "real".
        arc_type: OpenFst arc type used by :meth:`to_pynini` by default.
        openfst_phi: OpenFst label that PHI maps to in :meth:`to_pynini`.
        check_symbols: check that every label is a key of its symbol table.

    Raises:
        MachineError: shapes, a state out of range, a bad label or weight;
            the message names the arc (state, index, labels) and the value.
    """

    __slots__ = ("num_states", "start", "final", "src_start", "dst", "ilabel", "olabel",
                 "weight", "isyms", "osyms", "semiring", "arc_type", "openfst_phi",
                 "_acceptor", "_has_phi", "_cache", "__weakref__")

    def __init__(self, *, start: int, final, src_start, dst, ilabel, olabel=None, weight,
                 isyms: SymbolTable | None = None, osyms: SymbolTable | None = None,
                 semiring: str = "log", arc_type: str | None = None,
                 openfst_phi: int = DEFAULT_OPENFST_PHI, check_symbols: bool = True):
        if semiring not in WEIGHT_CONVENTIONS:
            raise MachineError(f"unknown weight convention {semiring!r}; expected one of {WEIGHT_CONVENTIONS}")
        final = _as_array(final, np.float64, "final")
        src_start = _as_array(src_start, np.int64, "src_start")
        dst = _as_array(dst, np.int32, "dst")
        ilabel = _as_array(ilabel, np.int32, "ilabel")
        acceptor = olabel is None
        olabel = ilabel if acceptor else _as_array(olabel, np.int32, "olabel")
        weight = _as_array(weight, np.float64, "weight")
        n = final.shape[0]
        E = dst.shape[0]
        if src_start.shape != (n + 1,):
            raise MachineError(f"src_start has shape {src_start.shape}; expected ({n + 1},) for {n} states")
        # (compared pairwise, not by np.diff, which wraps around for extreme int64 values)
        falls = src_start[1:] < src_start[:-1]
        if n and (src_start[0] != 0 or src_start[-1] != E or np.any(falls)):
            bad = int(np.argmax(falls)) if np.any(falls) else None
            raise MachineError(
                f"src_start must rise from 0 to the number of arcs ({E}); "
                + (f"it falls at state {bad}" if bad is not None else f"got {src_start[0]}..{src_start[-1]}"))
        if n == 0 and E:
            raise MachineError(f"a machine with no states has {E} arcs")
        for name, arr in (("ilabel", ilabel), ("olabel", olabel), ("weight", weight)):
            if arr.shape != (E,):
                raise MachineError(f"{name} has shape {arr.shape}; expected ({E},) like dst")
        start = int(start)
        if not -1 <= start < n:
            raise MachineError(f"start state {start} is out of range for {n} states")
        real = semiring == "real"
        a, s, why, phi = _validate_arcs(src_start, dst, ilabel, olabel, weight, n, real)
        if why != _OK:
            desc = _describe_arc(a, s, dst, ilabel, olabel, isyms, osyms, acceptor)
            if why == _BAD_DST:
                raise MachineError(f"{desc}: destination state {dst[a]} is out of range for {n} states")
            if why == _BAD_ILABEL:
                raise MachineError(f"{desc}: input label {ilabel[a]} is negative (only PHI={PHI} may be)")
            if why == _BAD_OLABEL:
                raise MachineError(f"{desc}: output label {olabel[a]} is negative (only PHI={PHI} may be)")
            raise MachineError(f"{desc}: weight {float(weight[a])!r} is not a valid {semiring} weight"
                               + (" (must be finite and >= 0)" if real else " (NaN and -inf are invalid)"))
        bad_final = np.flatnonzero(~((final >= 0) & (final < np.inf)) if real else ~(final > -np.inf))
        if bad_final.size:
            q = int(bad_final[0])
            raise MachineError(f"state {q}: final weight {float(final[q])!r} is not a valid {semiring} weight")
        if check_symbols:
            for side, labels, table in (("input", ilabel, isyms), ("output", olabel, osyms)):
                if table is None or E == 0:
                    continue
                if not isinstance(table, SymbolTable):
                    raise SymbolTableError(f"{side} symbol table must be a fsmlearn SymbolTable, got {type(table).__name__}")
                a = _first_label_missing(labels, np.sort(table.keys))
                if a >= 0:
                    s = int(np.searchsorted(src_start, a, side="right") - 1)
                    desc = _describe_arc(a, s, dst, ilabel, olabel, None, None, acceptor)
                    raise SymbolTableError(
                        f"{desc}: {side} label {labels[a]} is not in the {side} symbol table {table.name!r}")
        for arr in (final, src_start, dst, ilabel, olabel, weight):
            arr.setflags(write=False)
        self.num_states = n
        self.start = start
        self.final = final
        self.src_start = src_start
        self.dst = dst
        self.ilabel = ilabel
        self.olabel = olabel
        self.weight = weight
        self.isyms = isyms
        self.osyms = osyms
        self.semiring = semiring
        self.arc_type = arc_type or {"log": "log64", "tropical": "standard", "real": "log64"}[semiring]
        self.openfst_phi = int(openfst_phi)
        self._acceptor = acceptor
        self._has_phi = bool(phi)
        self._cache: dict[str, Any] = {}

    # ------------------------------------------------------------------ basic
    @property
    def num_arcs(self) -> int:
        return int(self.dst.shape[0])

    @property
    def is_acceptor(self) -> bool:
        """True when input and output labels agree on every arc."""
        return self._acceptor or bool(np.array_equal(self.ilabel, self.olabel))

    @property
    def stores_olabel(self) -> bool:
        """False for an acceptor built without output labels (``olabel`` is ``ilabel``)."""
        return not self._acceptor

    @property
    def has_phi(self) -> bool:
        """True when some arc has input label PHI (found by the checks of the arcs when
        the machine was built)."""
        return self._has_phi

    @property
    def arc_src(self) -> np.ndarray:
        """int32 [E]: the source state of each arc (cached)."""
        v = self._cache.get("arc_src")
        if v is None:
            v = np.repeat(np.arange(self.num_states, dtype=np.int32), np.diff(self.src_start))
            v.setflags(write=False)
            self._cache["arc_src"] = v
        return v

    def cached(self, key, build):
        """Return ``self._cache[key]``, building it with ``build()`` once.

        Machines are immutable, so derived structures (schedules, converted
        weights) are computed once per machine.
        """
        v = self._cache.get(key)
        if v is None:
            v = self._cache[key] = build()
        return v

    def cached_value(self, key):
        """What :meth:`cached` holds under ``key``, or None when nothing is built yet."""
        return self._cache.get(key)

    def forget_cached(self) -> int:
        """Drop every derived structure :meth:`cached` holds (they are rebuilt on demand);
        returns how many there were.  For a large machine whose schedules and signed
        system are no longer needed: they can take more memory than its arcs."""
        n = len(self._cache)
        self._cache.clear()
        return n

    def out_arcs(self, state: int) -> range:
        """Arc indices leaving ``state``."""
        if not 0 <= state < self.num_states:
            raise MachineError(f"state {state} is out of range for {self.num_states} states")
        return range(int(self.src_start[state]), int(self.src_start[state + 1]))

    def __repr__(self) -> str:
        kind = "acceptor" if self._acceptor else "transducer"
        return (f"Machine({kind}, {self.num_states} states, {self.num_arcs} arcs, "
                f"semiring={self.semiring!r}, start={self.start}{', phi' if self.has_phi else ''})")

    # ------------------------------------------------------------ construction
    @classmethod
    def from_arcs(cls, num_states: int, start: int, final, src, dst, ilabel, olabel=None,
                  weight=None, **kwargs) -> "Machine":
        """Build a machine from arc lists in any order (sorted stably by source).

        Args:
            num_states: number of states N.
            start: start state (-1 for none).
            final: [N] final weights, or a dict {state: weight} (others zero).
            src, dst, ilabel: [E] arrays; olabel: [E] or None for an acceptor.
            weight: [E] arc weights (default: the semiring one).
            **kwargs: passed to the constructor (isyms, osyms, semiring, ...).

        Raises:
            MachineError: a source state out of range, or any constructor check.
        """
        semiring = kwargs.get("semiring", "log")
        zero = 0.0 if semiring == "real" else math.inf
        one = 1.0 if semiring == "real" else 0.0
        num_states = int(num_states)
        if isinstance(final, dict):
            f = np.full(num_states, zero)
            for q, w in final.items():
                if not 0 <= int(q) < num_states:
                    raise MachineError(f"final state {q} is out of range for {num_states} states")
                f[int(q)] = w
            final = f
        src = _as_array(src, np.int64, "src")
        E = src.shape[0]
        if weight is None:
            weight = np.full(E, one)
        bad = np.flatnonzero((src < 0) | (src >= num_states))
        if bad.size:
            raise MachineError(f"arc {int(bad[0])}: source state {int(src[bad[0]])} is out of range "
                               f"for {num_states} states")
        order = np.argsort(src, kind="stable")
        counts = np.bincount(src, minlength=num_states) if E else np.zeros(num_states, np.int64)
        src_start = np.zeros(num_states + 1, np.int64)
        np.cumsum(counts, out=src_start[1:])
        take = lambda x, dt, nm: _as_array(x, dt, nm)[order] if E else _as_array(x, dt, nm)
        return cls(start=start, final=final, src_start=src_start, dst=take(dst, np.int64, "dst"),
                   ilabel=take(ilabel, np.int32, "ilabel"),
                   olabel=None if olabel is None else take(olabel, np.int32, "olabel"),
                   weight=take(weight, np.float64, "weight"), **kwargs)

    def replace(self, **changes) -> "Machine":
        """A new machine sharing this one's arrays except those in ``changes``.

        Typical use: ``m.replace(weight=new_weights)`` for re-weighting the same
        topology (validated like any new machine).
        """
        fields = dict(start=self.start, final=self.final, src_start=self.src_start, dst=self.dst,
                      ilabel=self.ilabel, olabel=None if self._acceptor else self.olabel,
                      weight=self.weight, isyms=self.isyms,
                      osyms=self.osyms, semiring=self.semiring,
                      arc_type=self.arc_type, openfst_phi=self.openfst_phi)
        fields.update(changes)
        m = Machine(**fields)
        # structures that depend only on the topology carry over (schedules and
        # their cache bands, components, label index); failure structures also need the same
        # pattern of final weights that are zero
        same_graph = m.src_start is self.src_start and m.dst is self.dst
        if same_graph:
            for key in ("arc_src", "components", "forward_ordered", "schedule_fwd", "schedule_bwd"):
                if key in self._cache:
                    m._cache[key] = self._cache[key]
            for key, v in self._cache.items():
                if isinstance(key, tuple) and key[0] == "bands":      # the schedules' cache bands
                    m._cache[key] = v
            if m.ilabel is self.ilabel:
                if "label_index" in self._cache:
                    m._cache["label_index"] = self._cache["label_index"]
                zero = 0.0 if self.semiring == "real" else np.inf
                if m.semiring == self.semiring and (m.final is self.final or
                                                    np.array_equal(m.final == zero, self.final == zero)):
                    for key, v in self._cache.items():
                        if isinstance(key, tuple) and key[0] in ("phi_structure", "linear_system"):
                            m._cache[key] = v
        return m

    def neglog_weights(self) -> tuple[np.ndarray, np.ndarray]:
        """(arc, final) weights as negative natural logs, whatever the convention."""
        if self.semiring != "real":
            return self.weight, self.final
        with np.errstate(divide="ignore"):
            return -np.log(self.weight), -np.log(self.final)

    # ------------------------------------------------------------------ pynini
    @classmethod
    def from_pynini(cls, fst, phi_label: int | None = None, semiring: str | None = None,
                    check_symbols: bool = True) -> "Machine":
        """Convert a ``pynini.Fst`` (arc types standard, log, log64) losslessly.

        Args:
            fst: the pynini (or pywrapfst) FST; any FST type is converted
                through a VectorFst.
            phi_label: OpenFst label of failure arcs; arcs with it become PHI.
            semiring: weight convention; default "tropical" for standard arcs
                and "log" for log/log64 arcs (weights stay negative logs).
            check_symbols: check labels against the FST's symbol tables.

        Raises:
            OpenFstFormatError: an unsupported arc type.
            MachineError: as the constructor.
        """
        import pywrapfst
        if fst.fst_type() != "vector":
            fst = pywrapfst.convert(fst, "vector")
        d = decode_vector_fst(fst.write_to_string(), "<pynini.Fst>")
        return cls.from_decoded(d, phi_label, semiring, check_symbols)

    @classmethod
    def from_decoded(cls, d: dict, phi_label, semiring, check_symbols) -> "Machine":
        """A machine from the arrays of :func:`fsmlearn.fsm.openfst_io.decode_vector_fst`
        (OpenFst labels ``phi_label`` become :data:`PHI`; ``semiring`` None: by arc type)."""
        if semiring is None:
            semiring = "tropical" if d["arc_type"] == "standard" else "log"
        if semiring not in ("log", "tropical"):
            raise MachineError(f"a pynini machine holds negative-log weights; semiring {semiring!r} "
                               "does not fit (use 'log' or 'tropical')")
        il, ol = d["ilabel"], d["olabel"]
        if phi_label is not None:
            il = np.where(il == phi_label, PHI, il).astype(np.int32)
            ol = np.where(ol == phi_label, PHI, ol).astype(np.int32)
        acceptor = np.array_equal(il, ol)
        return cls(start=d["start"], final=d["final"], src_start=d["src_start"], dst=d["dst"],
                   ilabel=il, olabel=None if acceptor else ol, weight=d["weight"],
                   isyms=d["isyms"], osyms=d["osyms"],
                   semiring=semiring, arc_type=d["arc_type"],
                   openfst_phi=DEFAULT_OPENFST_PHI if phi_label is None else phi_label,
                   check_symbols=check_symbols)

    def _encode(self, arc_type: str | None, phi_label: int | None) -> bytes:
        arc_type = arc_type or self.arc_type
        phi = self.openfst_phi if phi_label is None else int(phi_label)
        il, ol = self.ilabel, self.olabel
        if self.has_phi or np.any(ol == PHI):
            il = np.where(il == PHI, phi, il).astype(np.int32)
            ol = np.where(ol == PHI, phi, ol).astype(np.int32)
        w, f = self.neglog_weights()
        osyms = self.osyms
        return encode_vector_fst(arc_type, self.start, f, self.src_start, il, ol, w, self.dst,
                                 self.isyms, osyms)

    def to_pynini(self, arc_type: str | None = None, phi_label: int | None = None):
        """Convert to a ``pynini.Fst`` with the same states, arcs and symbols.

        Args:
            arc_type: "standard", "log" or "log64"; default the machine's own
                (from_pynini remembers it; "log64" for log and real machines,
                "standard" for tropical ones).  log and standard store float32.
            phi_label: OpenFst label for PHI arcs (default the machine's).
        """
        import pynini
        return pynini.Fst.read_from_string(self._encode(arc_type, phi_label))

    # ------------------------------------------------------------------ files
    def write(self, path, arc_type: str | None = None, phi_label: int | None = None) -> None:
        """Write OpenFst binary (readable by ``fstprint``/``pynini.Fst.read``), atomically."""
        data = self._encode(arc_type, phi_label)
        atomic_write(path, lambda f: f.write(data))

    @classmethod
    def read(cls, path, phi_label: int | None = None, semiring: str | None = None) -> "Machine":
        """Read an OpenFst binary VectorFst file (standard, log or log64 arcs), validated:
        see :func:`fsmlearn.fsm.machine_files.read_openfst`.

        Raises:
            OpenFstFormatError: naming the file, the state or arc, its byte offset and the value.
            MachineError: ``semiring`` is not "log" or "tropical".
        """
        from .machine_files import read_openfst
        return read_openfst(path, phi_label, semiring)

    def save(self, path) -> None:
        """Save in numpy's ``.npz`` format (uncompressed arrays), atomically
        (:func:`fsmlearn.fsm.machine_files.save_npz`)."""
        from .machine_files import save_npz
        save_npz(self, path)

    @classmethod
    def load(cls, path) -> "Machine":
        """Load a ``.npz`` written by :meth:`save`, every array validated
        (:func:`fsmlearn.fsm.machine_files.load_npz`).

        Raises:
            NpzFormatError: naming the file, the array and the entry at fault.
        """
        from .machine_files import load_npz
        return load_npz(path)

    # --------------------------------------------------------------- helpers
    @property
    def output_symbols(self) -> SymbolTable | None:
        """The output symbol table (an acceptor without one uses its input table)."""
        return self.osyms if (self.osyms is not None or not self._acceptor) else self.isyms


def _as_array(x, dtype, name: str) -> np.ndarray:
    """A contiguous 1-D array of ``dtype`` that the machine owns.

    Writable inputs are copied (the machine is immutable and must not freeze
    or alias the caller's arrays); read-only ones (another machine's) are shared.
    """
    if isinstance(x, np.ndarray) and x.dtype == dtype and x.ndim == 1 and x.flags.c_contiguous:
        return x if not x.flags.writeable else x.copy()
    a = np.asarray(x)
    if a.ndim != 1:
        raise MachineError(f"{name} must be one-dimensional, got shape {a.shape}")
    if a.dtype != dtype:
        if np.issubdtype(np.dtype(dtype), np.integer):
            if a.size and not np.issubdtype(a.dtype, np.integer):
                if not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
                    raise MachineError(f"{name} must hold integers, got {a.dtype}")
            info = np.iinfo(dtype)
            if a.size and (a.min() < info.min or a.max() > info.max):
                raise MachineError(f"{name} holds {a.min()}..{a.max()}, outside {np.dtype(dtype)}")
        a = a.astype(dtype)
    return np.ascontiguousarray(a)


def _describe_arc(a, s, dst, ilabel, olabel, isyms, osyms, acceptor) -> str:
    def lab(x, t):
        if x == PHI:
            return "phi"
        if t is not None and t.has_key(x):
            return f"{x} {t.symbol(x)!r}"
        return str(x)
    labels = lab(ilabel[a], isyms) if acceptor else f"{lab(ilabel[a], isyms)}:{lab(olabel[a], osyms)}"
    return f"arc {a} (state {s} -> {dst[a]}, label {labels})"
