"""Atomic file writes: a temporary file in the target's folder, renamed into place.

A crash or an exception mid-write leaves the old file (if any) intact and no
temporary file behind.

Public names: atomic_path, atomic_write.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path, suffix: str = ".tmp"):
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    The caller writes the temporary file (by name, e.g. through a compressing
    opener); on an exception the file is removed and the exception re-raised.
    """
    path = Path(path)
    if path.is_dir():
        # (the rename at the end would fail on the temporary file's name)
        raise IsADirectoryError(21, "cannot write here: a directory is in the way", str(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=suffix, dir=str(path.parent or "."))
    except OSError as e:
        # name the file the caller asked for, not the temporary one (a missing or
        # read-only folder, a path through a file)
        why = "no such folder" if isinstance(e, FileNotFoundError) else (e.strerror or str(e))
        raise type(e)(e.errno, f"cannot write here: {why} ({path.parent or '.'})", str(path)) from None
    os.close(fd)
    try:
        yield tmp
        # mkstemp makes the file private (0600): give it the old file's mode,
        # or an ordinary new file's (0666 less the umask)
        if path.exists():
            mode = path.stat().st_mode & 0o777
        else:
            mask = os.umask(0)
            os.umask(mask)
            mode = 0o666 & ~mask
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write(path, writer) -> None:
    """Call ``writer(f)`` on a binary file, fsync it, and rename it onto ``path``."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            writer(f)
            f.flush()
            os.fsync(f.fileno())
