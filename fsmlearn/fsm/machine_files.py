"""The machine's files: fsmlearn's ``.npz`` format and OpenFst binary, validated at the boundary.

Loading checks every array once (dtype, shape, states and labels in range,
weights valid for the semiring, symbol tables) and names the file, the array
(or the byte offset of an OpenFst arc) and the entry at fault; kernels then
trust what passed.  :class:`~fsmlearn.fsm.machine.Machine`'s ``save``,
``load`` and ``read`` call these.

Public names: save_npz, load_npz, read_openfst.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import MachineError, NpzFormatError, OpenFstFormatError, SymbolTableError
from .atomic import atomic_write
from .machine import DEFAULT_OPENFST_PHI, EPSILON, PHI, WEIGHT_CONVENTIONS, Machine
from .npz import NpzFile
from .openfst_io import WEIGHT_BYTES, arc_byte, decode_vector_fst
from .strings import pack_strings
from .symbols import SymbolTable

__all__ = ["save_npz", "load_npz", "read_openfst"]

_NPZ_FORMAT = "fsmlearn-machine"
_NPZ_VERSION = 1
_INT32_MAX = 2**31 - 1


def save_npz(m: Machine, path) -> None:
    """Save in numpy's ``.npz`` format (uncompressed arrays), atomically: the arrays
    plus a JSON ``meta`` array (format ``fsmlearn-machine``, version 1).

    Any file name is accepted (numpy appends nothing when given a file object).
    """
    meta = dict(format=_NPZ_FORMAT, version=_NPZ_VERSION, start=m.start,
                semiring=m.semiring, arc_type=m.arc_type, openfst_phi=m.openfst_phi,
                acceptor=not m.stores_olabel, isyms=m.isyms is not None,
                osyms=m.osyms is not None)
    arrays = dict(final=m.final, src_start=m.src_start, dst=m.dst,
                  ilabel=m.ilabel, weight=m.weight)
    if m.stores_olabel:
        arrays["olabel"] = m.olabel
    for side, table in (("isyms", m.isyms), ("osyms", m.osyms)):
        if table is not None:
            meta[side + "_name"] = table.name
            meta[side + "_available"] = table.available_key
            arrays[side + "_keys"] = table.keys
            blob, offs = pack_strings(table.symbols)
            arrays[side + "_blob"] = blob
            arrays[side + "_offsets"] = offs
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    path = Path(path)

    def write(f):
        np.savez(f, **arrays)
    atomic_write(path, write)


def load_npz(path) -> Machine:
    """Load a ``.npz`` written by :func:`save_npz`; every array is validated.

    Raises:
        NpzFormatError: a missing, unreadable, truncated or corrupt file, a
            missing or mistyped array, bad metadata, or arrays that do not
            form a valid machine; the message names the file, the array and
            the entry at fault, e.g. ``m.npz: array 'dst': arc 17 (state 3)
            has destination 99, out of range for 10 states``.
    """
    f = NpzFile(path, NpzFormatError, kind="machine", fmt=_NPZ_FORMAT, version=_NPZ_VERSION)
    start = _meta(f, "start", _is_int, "an integer")
    semiring = _meta(f, "semiring", lambda v: v in WEIGHT_CONVENTIONS,
                     f"one of {', '.join(WEIGHT_CONVENTIONS)}", "log")
    arc_type = _meta(f, "arc_type", lambda v: v is None or v in WEIGHT_BYTES,
                     f"one of {', '.join(WEIGHT_BYTES)}", None)
    openfst_phi = _meta(f, "openfst_phi", lambda v: _is_int(v) and 0 < v <= _INT32_MAX,
                        f"an OpenFst label, 1..{_INT32_MAX}", DEFAULT_OPENFST_PHI)
    acceptor = _meta(f, "acceptor", lambda v: isinstance(v, bool), "true or false", True)
    tables = {}
    for side in ("isyms", "osyms"):
        if _meta(f, side, lambda v: isinstance(v, bool), "true or false", False):
            tables[side] = _load_table(f, side)
    arrays = dict(final=f.need("final", np.float64), src_start=f.need("src_start", np.int64),
                  dst=f.need("dst", np.int32), ilabel=f.need("ilabel", np.int32),
                  olabel=None if acceptor else f.need("olabel", np.int32),
                  weight=f.need("weight", np.float64))
    try:
        return Machine(start=start, **arrays, isyms=tables.get("isyms"), osyms=tables.get("osyms"),
                   semiring=semiring, arc_type=arc_type, openfst_phi=openfst_phi)
    except (MachineError, SymbolTableError) as e:
        raise _npz_fault(f, e, start, semiring, tables, arrays) from None


def read_openfst(path, phi_label: int | None = None, semiring: str | None = None) -> Machine:
    """Read an OpenFst binary VectorFst file (standard, log or log64 arcs).

    Raises:
        OpenFstFormatError: an unreadable, truncated or corrupt file, or one
            whose arcs do not form a valid machine (a destination out of
            range, a negative label, a NaN or -inf weight, a label missing
            from its symbol table); the message names the file, the state
            or arc, its byte offset and the value.
        MachineError: ``semiring`` is not "log" or "tropical".
    """
    if semiring is not None and semiring not in ("log", "tropical"):
        raise MachineError(f"an OpenFst machine holds negative-log weights; semiring {semiring!r} "
                           "does not fit (use 'log' or 'tropical')")
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise OpenFstFormatError(f"cannot read: {e.strerror}", path) from None
    d = decode_vector_fst(data, str(path))
    for side in ("ilabel", "olabel"):       # OpenFst labels are >= 0 (PHI is fsmlearn's own)
        neg = np.flatnonzero(d[side] < 0)
        if neg.size:
            a = int(neg[0])
            s = int(np.searchsorted(d["src_start"], a, side="right") - 1)
            raise OpenFstFormatError(f"arc {a} of state {s} (byte {arc_byte(d, a, s)}): "
                                     f"{'input' if side == 'ilabel' else 'output'} label "
                                     f"{int(d[side][a])} is negative", path)
    try:
        return Machine.from_decoded(d, phi_label, semiring, True)
    except (MachineError, SymbolTableError) as e:
        raise _openfst_fault(d, e, path, phi_label) from None


def _is_int(v) -> bool:
    """Whether a JSON metadata value is an integer (not a bool, float or string)."""
    return isinstance(v, int) and not isinstance(v, bool)


def _meta(f: NpzFile, key: str, ok, want: str, *default):
    """``f.meta[key]`` checked by ``ok`` (``default`` when absent, if given)."""
    if key not in f.meta:
        if default:
            return default[0]
        raise f.fail(f"metadata lacks {key!r}")
    v = f.meta[key]
    try:
        good = ok(v)
    except TypeError:          # e.g. a list where a name was expected: unhashable in ``v in SET``
        good = False
    if not good:
        raise f.fail(f"metadata {key!r} is {v!r}; expected {want}")
    return v


def _load_table(f: NpzFile, side: str) -> SymbolTable:
    """The symbol table ``side`` ("isyms", "osyms") of a machine file, checked."""
    syms = f.strings(side)
    kn = side + "_keys"
    keys = f.need(kn, np.int64)
    if keys.size != len(syms):
        raise f.bad(kn, f"has {keys.size} keys for the {len(syms)} symbols of array {side + '_blob'!r}")
    out = np.flatnonzero((keys < 0) | (keys > _INT32_MAX))
    if out.size:
        i = int(out[0])
        raise f.bad(kn, f"key {i} (of symbol {syms[i]!r}) is {int(keys[i])}, outside 0..{_INT32_MAX}")
    name = _meta(f, side + "_name", lambda v: isinstance(v, str), "a string", "")
    available = _meta(f, side + "_available", lambda v: v is None or (_is_int(v) and 0 <= v < 2**63),
                      "a key (an integer >= 0)", None)
    try:
        return SymbolTable(syms, keys, name=name, available_key=available)
    except SymbolTableError as e:
        raise f.fail(f"arrays {kn!r} and {side + '_blob'!r}: {e}") from None


def _weight_fault(w: np.ndarray, real: bool) -> np.ndarray:
    """Indices of the invalid weights of ``w`` in the real or a negative-log convention."""
    return np.flatnonzero(~((w >= 0) & (w < np.inf)) if real else ~(w > -np.inf))


def _npz_fault(f: NpzFile, e: Exception, start: int, semiring: str, tables: dict, arrays: dict):
    """The NpzFormatError locating what made the constructor raise ``e`` (array, entry, value)."""
    final, src_start, dst, ilabel, weight = (arrays[k] for k in ("final", "src_start", "dst", "ilabel",
                                                                  "weight"))
    olabel = arrays["olabel"]
    n, E = final.size, dst.size
    if src_start.size != n + 1:
        return f.bad("src_start", f"has {src_start.size} entries; expected {n + 1} for the {n} states "
                                  "of array 'final'")
    if n == 0 and E:
        return f.bad("dst", f"holds {E} arcs but array 'final' holds no states")
    if n:
        if src_start[0] != 0:
            return f.bad("src_start", f"entry 0 is {int(src_start[0])}; must be 0")
        fall = np.flatnonzero(src_start[1:] < src_start[:-1])
        if fall.size:
            i = int(fall[0]) + 1
            return f.bad("src_start", f"entry {i} is {int(src_start[i])}, below entry {i - 1} "
                                      f"({int(src_start[i - 1])})")
        if src_start[-1] != E:
            return f.bad("src_start", f"last entry (index {n}) is {int(src_start[-1])}; must be the "
                                      f"number of arcs, {E} (the length of array 'dst')")
    labels = [("ilabel", "input", ilabel, tables.get("isyms"))]
    if olabel is not None:
        labels.append(("olabel", "output", olabel, tables.get("osyms")))
    for name, arr in [(k, a) for k, _, a, _ in labels] + [("weight", weight)]:
        if arr.size != E:
            return f.bad(name, f"has {arr.size} entries; expected {E} like array 'dst'")
    if not -1 <= start < n:
        return f.fail(f"metadata 'start' is {start}: out of range for the {n} states of array 'final'")
    src = np.repeat(np.arange(n), np.diff(src_start))
    bad = np.flatnonzero((dst < 0) | (dst >= n))
    if bad.size:
        a = int(bad[0])
        return f.bad("dst", f"arc {a} (state {src[a]}) has destination {int(dst[a])}, out of range "
                            f"for {n} states")
    for name, side, arr, _ in labels:
        bad = np.flatnonzero((arr < 0) & (arr != PHI))
        if bad.size:
            a = int(bad[0])
            return f.bad(name, f"arc {a} (state {src[a]}) has {side} label {int(arr[a])}: negative "
                               f"(only PHI={PHI} may be)")
    real = semiring == "real"
    why = "must be finite and >= 0" if real else "NaN and -inf are invalid"
    bad = _weight_fault(weight, real)
    if bad.size:
        a = int(bad[0])
        return f.bad("weight", f"arc {a} (state {src[a]}) has weight {float(weight[a])!r}, not a valid "
                               f"{semiring} weight ({why})")
    bad = _weight_fault(final, real)
    if bad.size:
        q = int(bad[0])
        return f.bad("final", f"state {q} has final weight {float(final[q])!r}, not a valid {semiring} "
                              f"weight ({why})")
    for name, side, arr, table in labels:
        if table is None:
            continue
        bad = np.flatnonzero(~np.isin(arr, table.keys) & (arr != EPSILON) & (arr != PHI))
        if bad.size:
            a = int(bad[0])
            tn = "isyms" if side == "input" else "osyms"
            return f.bad(name, f"arc {a} (state {src[a]}) has {side} label {int(arr[a])}, which is not a "
                               f"key of the {side} symbol table (array {tn + '_keys'!r})")
    return f.fail(str(e))


def _openfst_fault(d: dict, e: Exception, path, phi_label) -> OpenFstFormatError:
    """The OpenFstFormatError locating what made the constructor raise ``e`` (state or
    arc, byte offset, value) in the data :func:`decode_vector_fst` parsed into ``d``."""
    final, src_start, dst, weight = d["final"], d["src_start"], d["dst"], d["weight"]
    n = final.size
    src = np.repeat(np.arange(n), np.diff(src_start))

    def at(a):
        s = int(src[a])
        return f"arc {a} of state {s} (byte {arc_byte(d, a, s)})"
    bad = np.flatnonzero((dst < 0) | (dst >= n))
    if bad.size:
        a = int(bad[0])
        return OpenFstFormatError(f"{at(a)}: destination state {int(dst[a])} is out of range for {n} states",
                                  path)
    bad = _weight_fault(weight, False)
    if bad.size:
        a = int(bad[0])
        return OpenFstFormatError(f"{at(a)}: weight {float(weight[a])!r} is invalid (NaN or -inf)", path)
    bad = _weight_fault(final, False)
    if bad.size:
        q = int(bad[0])
        return OpenFstFormatError(f"state {q} (byte {int(d['state_offset'][q])}): final weight "
                                  f"{float(final[q])!r} is invalid (NaN or -inf)", path)
    for name, side, table in (("ilabel", "input", d["isyms"]), ("olabel", "output", d["osyms"])):
        if table is None:
            continue
        arr = d[name]
        bad = np.flatnonzero(~np.isin(arr, table.keys) & (arr != EPSILON)
                             & (arr != (PHI if phi_label is None else phi_label)))
        if bad.size:
            a = int(bad[0])
            return OpenFstFormatError(f"{at(a)}: {side} label {int(arr[a])} is not in the {side} symbol "
                                      f"table {table.name!r}", path)
    return OpenFstFormatError(str(e), path)
