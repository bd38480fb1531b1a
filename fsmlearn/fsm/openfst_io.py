"""OpenFst binary (VectorFst) serialisation without per-arc Python loops.

pynini offers no bulk access to arcs, so fsmlearn converts machines by
writing and parsing OpenFst's binary format directly (the format written by
``VectorFst::Write``: an ``FstHeader``, optional symbol tables, then for each
state its final weight, its arc count and its arcs), in numba.

Public names: encode_vector_fst, decode_vector_fst, arc_byte, WEIGHT_BYTES.
"""

from __future__ import annotations

import struct

import numba as nb
import numpy as np

from ..errors import OpenFstFormatError, SymbolTableError
from .symbols import SymbolTable

FST_MAGIC = 2125659606
SYMTAB_MAGIC = 2125658996
HAS_ISYMBOLS = 0x1
HAS_OSYMBOLS = 0x2
#: bytes of one weight for each arc type fsmlearn reads and writes
WEIGHT_BYTES = {"standard": 4, "log": 4, "log64": 8}
# kExpanded | kMutable: say nothing else, so OpenFst computes what it needs.
_PROPS_UNKNOWN = 0x3


class _Reader:
    def __init__(self, buf: bytes, what: str):
        self.buf = buf
        self.pos = 0
        self.what = what

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise OpenFstFormatError(f"truncated at byte {self.pos} (wanted {n} more bytes)", self.what)
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def i32(self) -> int:
        return struct.unpack("<i", self.take(4))[0]

    def i64(self) -> int:
        return struct.unpack("<q", self.take(8))[0]

    def u64(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def string(self) -> str:
        n = self.i32()
        if n < 0 or n > 1 << 20:
            raise OpenFstFormatError(f"bad string length {n} at byte {self.pos - 4}", self.what)
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise OpenFstFormatError(f"string at byte {self.pos - n} is not UTF-8: {e}", self.what) from None


def _read_symtab(r: _Reader) -> SymbolTable:
    at = r.pos
    magic = r.i32()
    if magic != SYMTAB_MAGIC:
        raise OpenFstFormatError(f"bad symbol table magic {magic} at byte {r.pos - 4}", r.what)
    name = r.string()
    available = r.i64()
    size = r.i64()
    left = len(r.buf) - r.pos
    if size < 0 or size > left // 12:      # each symbol takes at least 12 bytes
        raise OpenFstFormatError(f"symbol table {name!r} at byte {at} declares {size} symbols; "
                                 f"{left} bytes follow (truncated or corrupt)", r.what)
    syms = []
    keys = []
    for _ in range(size):
        syms.append(r.string())
        keys.append(r.i64())
    try:
        return SymbolTable(syms, keys, name=name, available_key=available)
    except SymbolTableError as e:
        raise OpenFstFormatError(f"symbol table at byte {at}: {e}", r.what) from None


def _write_string(out: list, s: str) -> None:
    b = s.encode("utf-8")
    out.append(struct.pack("<i", len(b)))
    out.append(b)


def _write_symtab(out: list, t: SymbolTable) -> None:
    out.append(struct.pack("<i", SYMTAB_MAGIC))
    _write_string(out, t.name)
    out.append(struct.pack("<qq", t.available_key, len(t)))
    for k, s in t:
        _write_string(out, s)
        out.append(struct.pack("<q", k))


@nb.njit(cache=True)
def _scan_states(buf, pos, nstates, wbytes):
    """Byte offsets of each state's record (and of the end) and its arc count, and
    the number of states read: less than ``nstates`` when state ``s`` is truncated
    (its arc count is negative or needs more bytes than follow)."""
    offs = np.empty(nstates + 1, np.int64)
    narcs = np.empty(nstates, np.int64)
    rec = 12 + wbytes
    n = buf.shape[0]
    for s in range(nstates):
        offs[s] = pos
        if pos + wbytes + 8 > n:
            return offs, narcs, s
        k = buf[pos + wbytes:pos + wbytes + 8].view(np.int64)[0]
        if k < 0 or k > (n - pos - wbytes - 8) // rec:    # (no overflow: k is bounded first)
            return offs, narcs, s
        narcs[s] = k
        pos += wbytes + 8 + k * rec
    offs[nstates] = pos
    return offs, narcs, nstates


@nb.njit(cache=True)
def _decode_states(buf, offs, narcs, wbytes, final, src_start, ilabel, olabel, weight, dst):
    rec = 12 + wbytes
    a = 0
    src_start[0] = 0
    for s in range(narcs.shape[0]):
        p = offs[s]
        if wbytes == 4:
            final[s] = buf[p:p + 4].view(np.float32)[0]
        else:
            final[s] = buf[p:p + 8].view(np.float64)[0]
        p += wbytes + 8
        for _ in range(narcs[s]):
            ilabel[a] = buf[p:p + 4].view(np.int32)[0]
            olabel[a] = buf[p + 4:p + 8].view(np.int32)[0]
            if wbytes == 4:
                weight[a] = buf[p + 8:p + 12].view(np.float32)[0]
            else:
                weight[a] = buf[p + 8:p + 16].view(np.float64)[0]
            dst[a] = buf[p + 8 + wbytes:p + 12 + wbytes].view(np.int32)[0]
            p += rec
            a += 1
        src_start[s + 1] = a


@nb.njit(cache=True)
def _encode_states(out, pos, wbytes, final, src_start, ilabel, olabel, weight, dst):
    n = final.shape[0]
    for s in range(n):
        if wbytes == 4:
            out[pos:pos + 4].view(np.float32)[0] = np.float32(final[s])
        else:
            out[pos:pos + 8].view(np.float64)[0] = final[s]
        pos += wbytes
        out[pos:pos + 8].view(np.int64)[0] = src_start[s + 1] - src_start[s]
        pos += 8
        for a in range(src_start[s], src_start[s + 1]):
            out[pos:pos + 4].view(np.int32)[0] = ilabel[a]
            out[pos + 4:pos + 8].view(np.int32)[0] = olabel[a]
            if wbytes == 4:
                out[pos + 8:pos + 12].view(np.float32)[0] = np.float32(weight[a])
            else:
                out[pos + 8:pos + 16].view(np.float64)[0] = weight[a]
            out[pos + 8 + wbytes:pos + 12 + wbytes].view(np.int32)[0] = dst[a]
            pos += 12 + wbytes
    return pos


def decode_vector_fst(data: bytes, what: str = "<OpenFst data>") -> dict:
    """Parse OpenFst binary data of a VectorFst.

    Args:
        data: the bytes (``pynini.Fst.write_to_string()`` or a ``.fst`` file).
        what: a name for error messages (the file path).

    Returns:
        dict with ``arc_type`` (str), ``start`` (int), ``final`` (float64 [N]),
        ``src_start`` (int64 [N+1]), ``ilabel``, ``olabel``, ``dst`` (int32 [E]),
        ``weight`` (float64 [E]), ``isyms``, ``osyms`` (SymbolTable or None),
        ``state_offset`` (int64 [N+1]: the byte offset of each state's record,
        for messages; see :func:`arc_byte`).

    Raises:
        OpenFstFormatError: bad magic, unsupported FST or arc type, a corrupt
            symbol table, a count of states or arcs that the data cannot hold,
            a start state out of range, truncation, bytes after the last state
            (the message gives the byte offset).  Arcs and weights are checked
            by the :class:`~fsmlearn.fsm.machine.Machine` built from the result.
    """
    r = _Reader(data, what)
    magic = r.i32()
    if magic != FST_MAGIC:
        raise OpenFstFormatError(f"not OpenFst binary data (magic {magic})", what)
    fst_type = r.string()
    arc_type = r.string()
    if fst_type != "vector":
        raise OpenFstFormatError(f"FST type {fst_type!r} is not supported (only 'vector')", what)
    if arc_type not in WEIGHT_BYTES:
        raise OpenFstFormatError(f"arc type {arc_type!r} is not supported (standard, log, log64)", what)
    r.i32()  # version
    flags = r.i32()
    r.u64()  # properties
    start = r.i64()
    nstates = r.i64()
    r.i64()  # numarcs (0 for VectorFst)
    if nstates < 0:
        raise OpenFstFormatError(f"unknown number of states ({nstates})", what)
    isyms = _read_symtab(r) if flags & HAS_ISYMBOLS else None
    osyms = _read_symtab(r) if flags & HAS_OSYMBOLS else None
    wbytes = WEIGHT_BYTES[arc_type]
    left = len(data) - r.pos
    if nstates > left // (wbytes + 8):       # each state takes at least wbytes + 8 bytes
        raise OpenFstFormatError(f"the header declares {nstates} states; the {left} bytes from byte {r.pos} "
                                 f"hold at most {left // (wbytes + 8)} (truncated or corrupt)", what)
    if not -1 <= start < nstates:
        raise OpenFstFormatError(f"the header's start state {start} is out of range for {nstates} states", what)
    buf = np.frombuffer(data, dtype=np.uint8)
    offs, narcs, done = _scan_states(buf, r.pos, nstates, wbytes)
    if done != nstates:
        at = int(offs[done])
        if at + wbytes + 8 > len(data):
            raise OpenFstFormatError(f"truncated in state {done} of {nstates} (its record at byte {at})", what)
        k = struct.unpack_from("<q", data, at + wbytes)[0]
        raise OpenFstFormatError(f"truncated or corrupt in state {done} of {nstates}: its record at byte {at} "
                                 f"declares {k} arcs of {12 + wbytes} bytes; {len(data) - at - wbytes - 8} "
                                 "bytes follow", what)
    if offs[nstates] != len(data):
        raise OpenFstFormatError(f"{len(data) - int(offs[nstates])} bytes follow the last state "
                                 f"(from byte {int(offs[nstates])})", what)
    E = int(narcs.sum())
    final = np.empty(nstates, np.float64)
    src_start = np.empty(nstates + 1, np.int64)
    ilabel = np.empty(E, np.int32)
    olabel = np.empty(E, np.int32)
    weight = np.empty(E, np.float64)
    dst = np.empty(E, np.int32)
    _decode_states(buf, offs, narcs, wbytes, final, src_start, ilabel, olabel, weight, dst)
    return dict(arc_type=arc_type, start=int(start), final=final, src_start=src_start,
                ilabel=ilabel, olabel=olabel, weight=weight, dst=dst, isyms=isyms, osyms=osyms,
                state_offset=offs)


def arc_byte(d: dict, a: int, s: int) -> int:
    """The byte offset of arc ``a`` (of state ``s``) in the data :func:`decode_vector_fst`
    parsed into ``d``: its input label; the output label, weight and destination follow."""
    wbytes = WEIGHT_BYTES[d["arc_type"]]
    return int(d["state_offset"][s]) + wbytes + 8 + (a - int(d["src_start"][s])) * (12 + wbytes)


def encode_vector_fst(arc_type: str, start: int, final: np.ndarray, src_start: np.ndarray,
                      ilabel: np.ndarray, olabel: np.ndarray, weight: np.ndarray, dst: np.ndarray,
                      isyms: SymbolTable | None = None, osyms: SymbolTable | None = None) -> bytes:
    """OpenFst binary data of a VectorFst with these arrays (inverse of decode)."""
    if arc_type not in WEIGHT_BYTES:
        raise OpenFstFormatError(f"arc type {arc_type!r} is not supported (standard, log, log64)")
    head = [struct.pack("<i", FST_MAGIC)]
    _write_string(head, "vector")
    _write_string(head, arc_type)
    flags = (HAS_ISYMBOLS if isyms is not None else 0) | (HAS_OSYMBOLS if osyms is not None else 0)
    n = final.shape[0]
    head.append(struct.pack("<iiQqqq", 2, flags, _PROPS_UNKNOWN, start, n, 0))
    if isyms is not None:
        _write_symtab(head, isyms)
    if osyms is not None:
        _write_symtab(head, osyms)
    head_b = b"".join(head)
    wbytes = WEIGHT_BYTES[arc_type]
    E = dst.shape[0]
    size = len(head_b) + n * (wbytes + 8) + E * (12 + wbytes)
    out = np.empty(size, np.uint8)
    out[:len(head_b)] = np.frombuffer(head_b, np.uint8)
    end = _encode_states(out, len(head_b), wbytes, final, src_start, ilabel, olabel, weight, dst)
    if end != size:  # cannot happen unless the arrays disagree in length
        raise OpenFstFormatError(f"internal error: wrote {end} of {size} bytes")
    return out.tobytes()
