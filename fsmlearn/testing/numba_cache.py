"""numba's on-disk cache against edited sources (for the test suite and ``make warm``).

numba keys a cached kernel on its own file only: a kernel that calls or inlines a kernel of
another module (every solver inlines :mod:`fsmlearn.semiring.ops`, the relaxations call
:mod:`fsmlearn.algo.convergence`) keeps its old machine code when only that other module
changes, so a test run after such an edit can pass or fail on code that is no longer there.
:func:`clear_stale_cache` compares a stamp of every fsmlearn module that uses numba (path,
modification time, size) with the one recorded when the cache was last filled and, when
they differ, removes every cached kernel, so that the next process compiles from the
sources as they are.  An installed package's sources do not change: this is for a
working tree.

Public names: numba_sources_stamp, cache_files, clear_stale_cache, record_sources.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["numba_sources_stamp", "cache_files", "clear_stale_cache", "record_sources"]

PACKAGE = Path(__file__).resolve().parents[1]
_STAMP_NAME = "fsmlearn-numba-sources.stamp"


def _numba_modules(package: Path):
    for p in sorted(package.rglob("*.py")):
        if "__pycache__" in p.parts:
            continue
        try:
            if "numba" in p.read_text(encoding="utf-8", errors="replace"):
                yield p
        except OSError:
            continue


def numba_sources_stamp(package: Path = PACKAGE) -> str:
    """A digest of (path, mtime, size) of every module of ``package`` that mentions numba."""
    h = hashlib.sha1()
    for p in _numba_modules(package):
        st = p.stat()
        h.update(f"{p.relative_to(package)}\0{st.st_mtime_ns}\0{st.st_size}\n".encode())
    return h.hexdigest()


def _cache_dirs(package: Path):
    """Where numba keeps the kernels of each folder of ``package``: its ``__pycache__``, or
    under ``$NUMBA_CACHE_DIR`` the folder numba names after it (``<name>_<sha1 of its path>``,
    numba.core.caching's ``get_suitable_cache_subpath``), so that other projects' kernels
    in a shared cache folder are left alone."""
    folders = sorted({p.parent for p in package.rglob("*.py") if "__pycache__" not in p.parts})
    user = os.environ.get("NUMBA_CACHE_DIR")
    for d in folders:
        if user:
            yield Path(user) / f"{d.name}_{hashlib.sha1(str(d.resolve()).encode()).hexdigest()}"
        else:
            yield d / "__pycache__"


def cache_files(package: Path = PACKAGE) -> list[Path]:
    """numba's index and data files of ``package``'s kernels."""
    out = []
    for d in _cache_dirs(package):
        if d.is_dir():
            out += [p for p in d.iterdir() if p.suffix in (".nbi", ".nbc") and p.is_file()]
    return out


def _stamp_path(package: Path) -> Path:
    user = os.environ.get("NUMBA_CACHE_DIR")
    if user:
        return Path(user) / f"{_STAMP_NAME}.{hashlib.sha1(str(package.resolve()).encode()).hexdigest()[:12]}"
    return package / "__pycache__" / _STAMP_NAME


def record_sources(package: Path = PACKAGE) -> None:
    """Record the sources the cache was filled from (after ``make warm``)."""
    path = _stamp_path(package)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(numba_sources_stamp(package) + "\n")


def clear_stale_cache(package: Path = PACKAGE) -> int:
    """Remove every cached kernel when a numba module changed since :func:`record_sources`
    (or nothing was recorded); record the sources as they are.  Returns the number of
    files removed."""
    path = _stamp_path(package)
    now = numba_sources_stamp(package)
    try:
        if path.read_text().strip() == now:
            return 0
    except OSError:
        pass
    removed = 0
    for f in cache_files(package):
        try:
            f.unlink()
            removed += 1
        except OSError:
            pass
    record_sources(package)
    return removed
