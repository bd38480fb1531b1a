"""A file of named arrays that is memory-mapped, not read: the container of a
compiled language model (:meth:`fsmlearn.lm.model.CompiledLM.save`).

Layout (all integers little-endian)::

    bytes 0-7     magic b"\\x89FSMAP\\r\\n" (a byte above 127 and CR LF, so that a
                  text-mode copy or a 7-bit transfer shows)
    bytes 8-15    H, uint64: the length of the JSON header
    bytes 16..    the header, UTF-8 JSON: {"format": str, "version": int,
                  "size": the file's length in bytes, "meta": {...},
                  "arrays": {name: {"dtype": numpy dtype str, "shape": [...],
                  "offset": int}}}
    then          each array's bytes, C order, at an offset that is a multiple
                  of 64 (a cache line), zero padding between

Opening one (:class:`MappedFile`) reads the 16 bytes and the header, checks
the magic, the format and version, the file's size against the header's,
and maps the file read-only; :meth:`MappedFile.need` hands out an array as a
read-only view of the mapping after checking its dtype and shape against the
caller's expectation and its byte range against the file, so that nothing a
file says can make a reader touch memory outside it.  Only the pages a
computation reads are brought in: opening costs the same for any file size.
What the arrays hold is for the caller to check (cheaply where it can, and
where the kernels read it otherwise).

Writes are atomic (:func:`fsmlearn.fsm.atomic.atomic_write`).

Public names: MappedFile, write_mapped, write_mapped_with, is_mapped_file, MAGIC, ALIGN.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from pathlib import Path

import numpy as np

from ..errors import FileFormatError
from ..fsm.atomic import atomic_write
from ..fsm.npz import check_format_version

__all__ = ["MappedFile", "write_mapped", "write_mapped_with", "is_mapped_file", "MAGIC", "ALIGN"]

MAGIC = b"\x89FSMAP\r\n"
#: arrays start at multiples of this many bytes
ALIGN = 64
#: the largest header a reader accepts
MAX_HEADER = 1 << 20
_KINDS = "biuf"


def _dtype_ok(dt: np.dtype) -> bool:
    return dt.kind in _KINDS and dt.byteorder in ("<", "|", "=") and not dt.fields and dt.shape == ()


def write_mapped(path, fmt: str, version: int, meta: dict, arrays: dict) -> int:
    """Write ``arrays`` (name -> numpy array) and ``meta`` (JSON-able) atomically; the file's size.

    Raises:
        FileFormatError: an array of a dtype the format does not hold (not a
            little-endian bool, int, uint or float).
    """
    items = []
    for name, a in arrays.items():
        a = np.asarray(a)
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        if not _dtype_ok(dt):
            raise FileFormatError(f"array {name!r}: dtype {a.dtype} cannot be stored (bool, int, uint, float only)",
                                  path)
        items.append((name, np.ascontiguousarray(a, dtype=dt)))
    start, head, specs, size = _layout(path, fmt, version, meta, [(n, a.dtype, a.shape) for n, a in items])

    def write(f):
        f.write(MAGIC + struct.pack("<Q", len(head)) + head)
        f.write(b"\0" * (start - 16 - len(head)))
        for name, a in items:
            if a.nbytes:
                f.write(memoryview(a.reshape(-1)).cast("B"))
            pad = -(-a.nbytes // ALIGN) * ALIGN - a.nbytes
            f.write(b"\0" * pad)
    atomic_write(path, write)
    return size


def _layout(path, fmt: str, version: int, meta: dict, arrays):
    """(data start, header bytes, specs, file size) for arrays given as (name, dtype, shape)."""
    # the header's length depends on the offsets, which depend on the header's length: lay out
    # again until the data start (the header padded to a multiple of ALIGN) no longer moves
    start = 0
    for _ in range(16):
        off = start
        specs = {}
        for name, dt, shape in arrays:
            nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize
            specs[name] = {"dtype": np.dtype(dt).str, "shape": [int(x) for x in shape], "offset": off}
            off += -(-nbytes // ALIGN) * ALIGN
        size = off
        head = json.dumps({"format": fmt, "version": version, "size": size, "meta": meta, "arrays": specs},
                          separators=(",", ":")).encode()
        need = -(-(16 + len(head)) // ALIGN) * ALIGN
        if need == start:
            return start, head, specs, size
        start = need
    raise FileFormatError("could not lay out the header", path)


def write_mapped_with(path, fmt: str, version: int, meta: dict, arrays: dict, fill) -> int:
    """Write a mapped-arrays file whose arrays are filled in place: ``arrays`` gives each one's
    (dtype, shape); the file is made at its full size beside ``path``, mapped, and
    ``fill(views)`` (name -> writable array over the file) writes them, so that no array
    needs to be in memory but the pages being written; the file appears (atomically) only
    when ``fill`` returns.  The file's size.

    Raises:
        FileFormatError: a dtype the format does not hold.
    """
    from ..fsm.atomic import atomic_path
    lay = []
    for name, (dt, shape) in arrays.items():
        dt = np.dtype(dt)
        if not _dtype_ok(dt):
            raise FileFormatError(f"array {name!r}: dtype {dt} cannot be stored (bool, int, uint, float only)", path)
        lay.append((name, dt, tuple(shape)))
    start, head, specs, size = _layout(path, fmt, version, meta, lay)
    with atomic_path(Path(path)) as tmp:
        with open(tmp, "wb") as f:
            f.write(MAGIC + struct.pack("<Q", len(head)) + head)
            f.truncate(size)
        with open(tmp, "r+b") as f:
            mm = mmap.mmap(f.fileno(), 0) if size else None
            try:
                views = {}
                for name, dt, shape in lay:
                    n = int(np.prod(shape, dtype=np.int64))
                    views[name] = (np.frombuffer(mm, dt, n, specs[name]["offset"]).reshape(shape) if n
                                   else np.zeros(shape, dt))
                fill(views)
                del views
                if mm is not None:
                    mm.flush()
            finally:
                if mm is not None:
                    mm.close()
    return size


def is_mapped_file(path) -> bool:
    """Whether ``path`` starts with :data:`MAGIC` (False when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


class MappedFile:
    """A file written by :func:`write_mapped`, mapped read-only.

    Args:
        path: the file.
        error: the FileFormatError subclass to raise (it names the file).
        kind: what the file holds, for messages.
        fmt, version: the format and version the header must give; ``older``: earlier
            versions also read.

    Attributes:
        path (Path), meta (dict, the header's ``meta``), version (the file's), size (bytes).

    Raises:
        error: no such file, not a mapped-arrays file, a corrupt header,
            another format or version, a size other than the header's
            (a truncated or extended file).
    """

    def __init__(self, path, error: type[FileFormatError], *, kind: str, fmt: str, version: int,
                 older: tuple = ()):
        self.path = path = Path(path)
        self.error = error
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            raise error("no such file", path) from None
        except OSError as e:
            raise error(f"cannot read: {e.strerror}", path) from None
        with f:
            first = f.read(16)
            if len(first) < 16 or first[:8] != MAGIC:
                raise error(f"not a fsmlearn {kind} (no {MAGIC!r} magic)", path)
            (H,) = struct.unpack("<Q", first[8:])
            size = os.fstat(f.fileno()).st_size
            if H > MAX_HEADER or 16 + H > size:
                raise error(f"header length {H} is more than the file's {size} bytes hold", path)
            try:
                head = json.loads(f.read(H).decode())
            except (ValueError, UnicodeDecodeError, RecursionError) as e:
                raise error(f"corrupt header: {e}", path) from None
            check_format_version(head, path, error, kind=kind, fmt=fmt, version=version, older=older)
            if head.get("size") != size:
                raise error(f"the file has {size} bytes; its header says {head.get('size')!r} "
                            f"(truncated or extended)", path)
            if not isinstance(head.get("meta"), dict) or not isinstance(head.get("arrays"), dict):
                raise error("corrupt header: no 'meta' or 'arrays' object", path)
            self._data_start = 16 + H
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        self.meta = head["meta"]
        self.version = head["version"]
        self.size = size
        self._specs = head["arrays"]

    def release(self) -> bool:
        """Tell the kernel that the mapping's pages are not needed now (``MADV_DONTNEED``): they
        leave this process's resident memory and are read again from the file (or the page
        cache) when an array touches them.  False where the system cannot."""
        if self._map is None or not hasattr(mmap, "MADV_DONTNEED"):
            return False
        try:
            self._map.madvise(mmap.MADV_DONTNEED)
            return True
        except (OSError, ValueError):
            return False

    def bad(self, name: str, message: str) -> FileFormatError:
        """The file's error (not raised) saying that array ``name`` is at fault."""
        return self.error(f"array {name!r}: {message}", self.path)

    def fail(self, message: str) -> FileFormatError:
        """The file's error (not raised) with ``message``."""
        return self.error(message, self.path)

    def integer(self, key: str, lo: int, hi: int) -> int:
        """``meta[key]``, checked to be an int in [lo, hi]."""
        v = self.meta.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise self.fail(f"header value {key!r} is {v!r}; expected an integer in [{lo}, {hi}]")
        return v

    def need(self, name: str, dtype, shape) -> np.ndarray:
        """Array ``name`` as a read-only view of the mapping, its dtype (exactly) and shape
        (a tuple; ``None`` in a place accepts any length there) checked, and its bytes
        within the file."""
        spec = self._specs.get(name)
        if not isinstance(spec, dict):
            raise self.fail(f"missing array {name!r}")
        want = np.dtype(dtype)
        try:
            dt = np.dtype(spec["dtype"])
            got_shape = tuple(spec["shape"])
            off = spec["offset"]
        except (KeyError, TypeError, ValueError):
            raise self.bad(name, f"corrupt description {spec!r}") from None
        if dt != want or not _dtype_ok(dt):
            raise self.bad(name, f"has dtype {dt}; expected {want}")
        if (len(got_shape) != len(shape) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                    for d in got_shape)
                or any(w is not None and g != w for g, w in zip(got_shape, shape))):
            raise self.bad(name, f"has shape {got_shape}; expected {tuple('*' if w is None else w for w in shape)}")
        if not isinstance(off, int) or isinstance(off, bool) or off < self._data_start or off % ALIGN:
            raise self.bad(name, f"offset {off!r} is not a multiple of {ALIGN} after the header")
        count = int(np.prod(got_shape, dtype=object)) if got_shape else 1
        nbytes = count * dt.itemsize
        if off + nbytes > self.size:
            raise self.bad(name, f"bytes {off}..{off + nbytes} lie beyond the file's {self.size}")
        if count == 0:
            a = np.zeros(got_shape, dt)
            a.setflags(write=False)
            return a
        return np.frombuffer(self._map, dtype=dt, count=count, offset=off).reshape(got_shape)
