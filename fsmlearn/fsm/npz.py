"""Reading the ``.npz`` files fsmlearn writes: arrays plus a JSON ``meta`` array.

Machines (:meth:`fsmlearn.fsm.machine.Machine.load`) and HMM taggers
(:func:`fsmlearn.tag.hmm_io.load_hmm`) are saved as uncompressed numpy
archives without pickles, with a ``meta`` array holding UTF-8 JSON that names
the format and its version.  :class:`NpzFile` opens one, checks the format
and version, and hands out arrays checked for dtype and dimensions; every
problem is raised as the caller's :class:`~fsmlearn.errors.FileFormatError`
subclass naming the file.

Public names: NpzFile.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from ..errors import FileFormatError

__all__ = ["NpzFile"]


class NpzFile:
    """An fsmlearn ``.npz`` file, read whole and its metadata checked.

    Args:
        path: the file.
        error: the FileFormatError subclass to raise (it names the file).
        kind: what the file holds, for messages ("machine", "HMM").
        fmt, version: the ``format`` and ``version`` that ``meta`` must give.

    Attributes:
        path: the file (a Path); arrays: name -> array; meta: the decoded dict.

    Raises:
        error: a missing file, not a zip archive, no or corrupt ``meta``,
            another format or version.
    """

    def __init__(self, path, error: type[FileFormatError], *, kind: str, fmt: str, version: int):
        self.path = path = Path(path)
        self.error = error
        try:
            with np.load(path, allow_pickle=False) as z:
                self.arrays = {k: z[k] for k in z.files}
        except FileNotFoundError:
            raise error("no such file", path) from None
        except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as e:
            raise error(f"corrupt or not a fsmlearn {kind} file ({type(e).__name__}: {e})", path) from None
        if "meta" not in self.arrays:
            raise error(f"not a fsmlearn {kind} (no 'meta' array)", path)
        try:
            meta = json.loads(self.arrays["meta"].tobytes().decode())
        except (ValueError, UnicodeDecodeError) as e:
            raise error(f"corrupt metadata: {e}", path) from None
        if not isinstance(meta, dict) or meta.get("format") != fmt:
            got = meta.get("format") if isinstance(meta, dict) else None
            raise error(f"not a fsmlearn {kind} (format {got!r}, expected {fmt!r})", path)
        if meta.get("version") != version:
            raise error(f"unsupported {kind} file version {meta.get('version')!r} "
                        f"(this fsmlearn reads version {version})", path)
        self.meta = meta

    def need(self, name: str, dtype, ndim: int = 1) -> np.ndarray:
        """Array ``name``, checked: ``dtype`` is a numpy dtype (matched exactly) or a
        dtype kind character ('i', 'u', 'f', 'b': matched by kind); ``ndim`` its
        number of dimensions.  Raises the file's error when it is missing or differs."""
        if name not in self.arrays:
            raise self.error(f"missing array {name!r}", self.path)
        a = self.arrays[name]
        if isinstance(dtype, str) and len(dtype) == 1:
            ok, want = a.dtype.kind == dtype, f"kind {dtype!r}"
        else:
            ok, want = a.dtype == dtype, str(np.dtype(dtype))
        if not ok or a.ndim != ndim:
            raise self.error(f"array {name!r} has dtype {a.dtype} and {a.ndim} dimensions; "
                             f"expected {want} with {ndim}", self.path)
        return a
