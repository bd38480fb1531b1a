"""Lists of strings as two flat arrays, for ``.npz`` files (no pickling).

A list of n strings is stored as their UTF-8 bytes concatenated into one
uint8 array (the *blob*) and n + 1 int64 offsets: string i is
``blob[offsets[i]:offsets[i + 1]]``.  Machines (symbol tables), HMM taggers
(tags, vocabulary, unknown-word suffixes) and encoded corpora save their
strings this way.

Public names: pack_strings, unpack_strings.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..errors import FileFormatError

__all__ = ["pack_strings", "unpack_strings"]


def pack_strings(strings: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
    """The blob and offsets of a list of strings.

    Args:
        strings: the strings (any, including empty and non-ASCII ones).

    Returns:
        (blob uint8 [total bytes], offsets int64 [n + 1]) with ``offsets[0] == 0``
        and ``offsets[-1] == blob.size``.
    """
    enc = [s.encode("utf-8") for s in strings]
    offs = np.zeros(len(enc) + 1, np.int64)
    np.cumsum([len(b) for b in enc], out=offs[1:])
    return np.frombuffer(b"".join(enc), dtype=np.uint8).copy(), offs


def unpack_strings(blob: np.ndarray, offs: np.ndarray, *, error=FileFormatError, path=None) -> list[str]:
    """The strings of a blob and its offsets (the inverse of :func:`pack_strings`).

    Args:
        blob: uint8 [B] the concatenated UTF-8 bytes.
        offs: int [n + 1] offsets into ``blob``, rising from 0 to B.
        error: the :class:`~fsmlearn.errors.FileFormatError` subclass to raise
            (e.g. ``NpzFormatError`` for machines, ``ModelFormatError`` for models).
        path: the file the arrays came from, named in the error.

    Returns:
        The n strings.

    Raises:
        FileFormatError: (the class ``error``) offsets that do not rise from 0
            to the blob's size, or bytes that are not UTF-8.
    """
    blob = np.asarray(blob)
    offs = np.asarray(offs)
    if blob.ndim != 1 or offs.ndim != 1 or offs.size == 0:
        raise error(f"strings need a 1-d blob and at least one offset; got shapes {blob.shape} and "
                    f"{offs.shape}", path)
    if offs[0] != 0 or offs[-1] != blob.size or np.any(np.diff(offs) < 0):
        raise error(f"string offsets do not rise from 0 to the blob's {blob.size} bytes "
                    f"(first {int(offs[0])}, last {int(offs[-1])})", path)
    b = blob.tobytes()
    o = offs.tolist()
    out = []
    for i in range(len(o) - 1):
        try:
            out.append(b[o[i]:o[i + 1]].decode("utf-8"))
        except UnicodeDecodeError as e:
            raise error(f"string {i} is not UTF-8 ({e.reason} at byte {o[i] + e.start} of the blob)",
                        path) from None
    return out
