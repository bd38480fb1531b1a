"""Reading the ``.npz`` files fsmlearn writes: arrays plus a JSON ``meta`` array.

Machines (:meth:`fsmlearn.fsm.machine.Machine.load`) and HMM taggers
(:func:`fsmlearn.tag.hmm_io.load_hmm`) are saved as uncompressed numpy
archives without pickles, with a ``meta`` array holding UTF-8 JSON that names
the format and its version.  :class:`NpzFile` opens one, checks the format
and version, and hands out arrays checked for dtype and dimensions; every
problem is raised as the caller's :class:`~fsmlearn.errors.FileFormatError`
subclass naming the file (and the array at fault).

The archive is read member by member rather than through ``np.load``, so
that a corrupt or forged file cannot make the reader allocate more than the
file holds: members must be stored uncompressed (as ``np.savez`` writes them),
every member's size is checked against the file's size, and every array's
declared shape and dtype against its member's size, before a byte of data is
read.  Only plain numeric dtypes are accepted (no objects,
no pickles, no structured or string arrays); big-endian arrays are converted
to the machine's byte order.

Public names: NpzFile, check_format_version.
"""

from __future__ import annotations

import json
import math
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np

from ..errors import FileFormatError
from .strings import unpack_strings

__all__ = ["NpzFile", "check_format_version"]

#: dtype kinds an fsmlearn archive may hold: bool, signed and unsigned ints, floats
_KINDS = "biuf"
_CHUNK = 1 << 24
_MAX_HEADER = 10000
# what the zip and npy layers raise on a corrupt archive (FileFormatError is caught first)
_CORRUPT = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, struct.error, EOFError, OSError,
            ValueError, KeyError, IndexError, TypeError, OverflowError, RuntimeError,
            NotImplementedError, RecursionError, SyntaxError)


def check_format_version(meta, path, error: type[FileFormatError], *, kind: str, fmt: str, version: int,
                         older: tuple = ()) -> None:
    """Raise ``error`` naming ``path`` unless ``meta`` (a file's decoded JSON header) is a dict of
    format ``fmt`` and version ``version`` or one of the ``older`` versions still read (an int,
    not a bool)."""
    if not isinstance(meta, dict) or meta.get("format") != fmt:
        got = meta.get("format") if isinstance(meta, dict) else None
        raise error(f"not a fsmlearn {kind} (format {got!r}, expected {fmt!r})", path)
    got = meta.get("version")
    if isinstance(got, bool) or got not in (version, *older):
        reads = f"version {version}" if not older else f"versions {', '.join(map(str, sorted(older)))} and {version}"
        raise error(f"unsupported {kind} file version {got!r} (this fsmlearn reads {reads})", path)


class NpzFile:
    """An fsmlearn ``.npz`` file, read whole and its metadata checked.

    Args:
        path: the file.
        error: the FileFormatError subclass to raise (it names the file).
        kind: what the file holds, for messages ("machine", "HMM").
        fmt, version: the ``format`` and ``version`` that ``meta`` must give.

    Attributes:
        path: the file (a Path); arrays: name -> array; meta: the decoded dict;
        error: the error class.

    Raises:
        error: a missing file, not a zip archive, a corrupt or truncated
            member (named), an array whose header does not match its data,
            an unsupported dtype, no or corrupt ``meta``, another format or
            version.
    """

    def __init__(self, path, error: type[FileFormatError], *, kind: str, fmt: str, version: int):
        self.path = path = Path(path)
        self.error = error
        self.arrays = _read_archive(path, error, kind)
        if "meta" not in self.arrays:
            raise error(f"not a fsmlearn {kind} (no 'meta' array)", path)
        m = self.arrays["meta"]
        if m.dtype != np.uint8 or m.ndim != 1:
            raise error(f"array 'meta' has dtype {m.dtype} and {m.ndim} dimensions; expected uint8 with 1",
                        path)
        try:
            meta = json.loads(m.tobytes().decode())
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise error(f"array 'meta': corrupt metadata: {e}", path) from None
        check_format_version(meta, path, error, kind=kind, fmt=fmt, version=version)
        self.meta = meta

    # ------------------------------------------------------------ errors
    def fail(self, message: str) -> FileFormatError:
        """The file's error (not raised) with ``message``, naming the file."""
        return self.error(message, self.path)

    def bad(self, name: str, message: str) -> FileFormatError:
        """The file's error (not raised) saying that array ``name`` is at fault."""
        return self.error(f"array {name!r}: {message}", self.path)

    # ------------------------------------------------------------ arrays
    def need(self, name: str, dtype, ndim: int = 1) -> np.ndarray:
        """Array ``name``, checked: ``dtype`` is a numpy dtype (matched exactly) or a
        dtype kind character ('i', 'u', 'f', 'b': matched by kind); ``ndim`` its
        number of dimensions.  Raises the file's error when it is missing or differs."""
        if name not in self.arrays:
            raise self.fail(f"missing array {name!r}")
        a = self.arrays[name]
        if isinstance(dtype, str) and len(dtype) == 1:
            ok, want = a.dtype.kind == dtype, f"kind {dtype!r}"
        else:
            ok, want = a.dtype == dtype, str(np.dtype(dtype))
        if not ok or a.ndim != ndim:
            raise self.fail(f"array {name!r} has dtype {a.dtype} and {a.ndim} dimensions; "
                            f"expected {want} with {ndim}")
        return a

    def strings(self, name: str) -> list[str]:
        """The strings stored as ``<name>_blob`` (uint8) and ``<name>_offsets`` (int64),
        see :mod:`fsmlearn.fsm.strings`; every offset and byte is checked and a fault
        is named (array, index, value)."""
        blob = self.need(name + "_blob", np.uint8)
        offs = self.need(name + "_offsets", np.int64)
        on = name + "_offsets"
        if offs.size == 0:
            raise self.bad(on, "is empty (n strings need n + 1 offsets)")
        if offs[0] != 0:
            raise self.bad(on, f"entry 0 is {int(offs[0])}; must be 0")
        fall = np.flatnonzero(offs[1:] < offs[:-1])
        if fall.size:
            i = int(fall[0]) + 1
            raise self.bad(on, f"entry {i} is {int(offs[i])}, below entry {i - 1} ({int(offs[i - 1])})")
        if offs[-1] != blob.size:
            raise self.bad(on, f"last entry (index {offs.size - 1}) is {int(offs[-1])}; must be the "
                               f"{blob.size} bytes of array {name + '_blob'!r}")
        try:
            return unpack_strings(blob, offs, error=self.error, path=self.path)
        except FileFormatError as e:
            raise self.bad(name + "_blob", e.reason) from None


def _read_archive(path: Path, error, kind: str) -> dict:
    """name -> array of every member of the zip archive ``path`` (see the module docstring)."""
    try:
        size = path.stat().st_size
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise error("no such file", path) from None
    except FileFormatError:
        raise
    except OSError as e:
        raise error(f"cannot read: {e.strerror or e}", path) from None
    except _CORRUPT as e:
        raise error(f"corrupt or not a fsmlearn {kind} file ({type(e).__name__}: {e})", path) from None
    with zf:
        try:
            infos = zf.infolist()
        except _CORRUPT as e:    # pragma: no cover - infolist reads nothing
            raise error(f"corrupt or not a fsmlearn {kind} file ({type(e).__name__}: {e})", path) from None
        members = {}
        total = 0
        for info in infos:
            name = info.filename
            if not name.endswith(".npy"):
                raise error(f"corrupt or not a fsmlearn {kind} file (member {name!r} is not a .npy array)",
                            path)
            key = name[:-4]
            if key in members:
                raise error(f"array {key!r}: the archive holds two members {name!r}", path)
            if info.flag_bits & 0x1:
                raise error(f"array {key!r}: member {name!r} is encrypted", path)
            if info.compress_type != zipfile.ZIP_STORED:    # (and no zip bombs)
                raise error(f"array {key!r}: member {name!r} is compressed (method {info.compress_type}); "
                            "fsmlearn files hold uncompressed members", path)
            if info.file_size != info.compress_size:
                raise error(f"array {key!r}: member {name!r} declares {info.file_size} bytes but occupies "
                            f"{info.compress_size}", path)
            total += info.compress_size
            if info.header_offset + info.compress_size > size or total > size:
                raise error(f"array {key!r}: member {name!r} ({info.compress_size} bytes at byte "
                            f"{info.header_offset}) does not fit in the file's {size} bytes (truncated?)",
                            path)
            members[key] = info
        arrays = {}
        for key, info in members.items():
            try:
                arrays[key] = _read_member(zf, info, key, error, path)
            except FileFormatError:
                raise
            except _CORRUPT as e:
                raise error(f"array {key!r}: corrupt member {info.filename!r} ({type(e).__name__}: {e})",
                            path) from None
        return arrays


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, key: str, error, path) -> np.ndarray:
    """One ``.npy`` member, its header checked against its size before its data is read."""
    fmt = np.lib.format
    with zf.open(info) as fp:
        version = fmt.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(fp, max_header_size=_MAX_HEADER)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(fp, max_header_size=_MAX_HEADER)
        else:
            raise error(f"array {key!r}: unsupported .npy format version {version}", path)
        if dtype.hasobject or dtype.kind not in _KINDS or dtype.fields is not None or dtype.subdtype:
            raise error(f"array {key!r} has dtype {dtype}, which fsmlearn does not store "
                        "(bool, integer or float only)", path)
        if any(d < 0 for d in shape):
            raise error(f"array {key!r}: the header declares the negative shape {shape}", path)
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        held = info.file_size - fp.tell()
        if nbytes != held:
            raise error(f"array {key!r}: the header declares shape {shape} of {dtype} ({nbytes} bytes) "
                        f"but the member holds {held} bytes", path)
        out = np.empty(count, dtype)
        raw = out.view(np.uint8)
        for i in range(0, nbytes, _CHUNK):
            n = min(_CHUNK, nbytes - i)
            data = fp.read(n)
            if len(data) != n:
                raise error(f"array {key!r}: member {info.filename!r} ends after {i + len(data)} of its "
                            f"{nbytes} data bytes", path)
            raw[i:i + n] = np.frombuffer(data, np.uint8)
        if fp.read(1):                 # reading to the end also checks the CRC
            raise error(f"array {key!r}: member {info.filename!r} holds more than its declared size", path)
    if not out.dtype.isnative:
        out = out.byteswap().view(out.dtype.newbyteorder("="))
    if out.dtype.kind == "b":          # any byte but 0 is True: store 0/1 only
        out = out.view(np.uint8) != 0
    if fortran:
        return out.reshape(shape[::-1]).T
    return out.reshape(shape)
