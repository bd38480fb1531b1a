"""Thin wrappers around KenLM's command-line tools.

KenLM's ``lmplz`` estimates a modified Kneser-Ney backoff model from text and
writes it in ARPA format (Heafield, Pouzyrevsky, Clark and Koehn, "Scalable
Modified Kneser-Ney Language Model Estimation", ACL 2013); ``build_binary``
turns an ARPA file into KenLM's binary format; ``query`` scores text with a
model.  ``make install`` builds the three from the kenlm source distribution
(``scripts/build_kenlm.sh``) into the virtual environment's ``bin``.

Public functions:
    find_tool(name): the path of ``lmplz``, ``build_binary`` or ``query``.
    run_lmplz(text, order, arpa_out, ...): estimate an ARPA model with lmplz.
    run_build_binary(arpa, out, ...): convert an ARPA file with build_binary.

Public exceptions (both subclasses of :class:`fsmlearn.errors.FsmError`):
    ToolFailedError: a tool ran and failed; carries its stderr tail.
    ToolUsageError: a wrapper was given bad arguments.

Outputs are written atomically: to a temporary file beside the destination,
renamed into place only when the tool succeeded, so a failed or interrupted
run never leaves a partial model behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from ..errors import ToolFailedError, ToolNotFoundError, ToolUsageError

__all__ = ["find_tool", "run_lmplz", "run_build_binary", "ToolFailedError", "ToolUsageError"]

TOOLS = ("lmplz", "build_binary", "query")
"""The KenLM programs that :func:`find_tool` knows."""

_STDERR_TAIL_LINES = 20


def find_tool(name: str) -> str:
    """Return the path of one of KenLM's programs.

    Looks first in the directory of ``sys.executable`` (the virtual
    environment's ``bin``, where ``make install`` puts the tools), then on
    ``$PATH``.

    Args:
        name: ``"lmplz"``, ``"build_binary"`` or ``"query"``.

    Returns:
        The path of an executable file (str).

    Raises:
        ToolNotFoundError: ``name`` is not one of the three, or the program
            is in neither place; the message says how to build it.
    """
    if name not in TOOLS:
        raise ToolNotFoundError(f"unknown KenLM tool {name!r}; expected one of {', '.join(TOOLS)}")
    searched = []
    if sys.executable:
        bin_dir = os.path.dirname(sys.executable)  # not resolved: a venv's python is a symlink
        candidate = os.path.join(bin_dir, name)
        searched.append(bin_dir)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found is not None:
        return found
    searched.append("$PATH")
    raise ToolNotFoundError(
        f"KenLM's {name!r} was not found (looked in {' and '.join(searched)}); "
        f"build it with `make install` (runs scripts/build_kenlm.sh .venv/bin), "
        f"or put KenLM's {name} on $PATH")


def run_lmplz(text, order: int, arpa_out, *, discount_fallback: bool = True, prune=None,
              memory="1G", extra_args=()) -> Path:
    """Estimate a modified Kneser-Ney backoff model with KenLM's ``lmplz``.

    Args:
        text: a path (str or ``os.PathLike``) of a text file with one
            whitespace-tokenised sentence per line, or an iterable of sentence
            strings (each one line; a single trailing newline is allowed),
            which is piped to lmplz's stdin.
        order: the n-gram order, an int >= 1.  lmplz itself has no upper
            bound, but build_binary, query and ``kenlm.Model`` load orders only
            up to the KENLM_MAX_ORDER they were compiled with (6 here).
        arpa_out: where to write the ARPA file (str or ``os.PathLike``); it is
            replaced atomically and only when lmplz succeeds.
        discount_fallback: pass ``--discount_fallback``, needed on small or
            deduplicated corpora where the closed-form discount estimates fail.
            Set it to False when ``extra_args`` gives its own discounts.
        prune: None, or a sequence of non-negative, non-decreasing count
            thresholds, one per order from unigrams on (``--prune``): n-grams
            seen at most that often are dropped; the last value applies to
            the remaining orders, so ``(0, 0, 1)`` drops singleton trigrams
            and above.
        memory: lmplz's sorting memory (``-S``): a str with a KenLM suffix
            (``"1G"``, ``"500M"``, ``"20%"``) or an int number of bytes.
        extra_args: further lmplz arguments (iterable of str), e.g.
            ``("-T", "/scratch/")`` or ``("--skip_symbols",)``.

    Returns:
        ``Path(arpa_out)``.

    Raises:
        ToolNotFoundError: lmplz is not installed.
        ToolUsageError: a bad argument, a missing text file, or a sentence
            that is not a str or spans lines.
        ToolFailedError: lmplz failed; the message holds its stderr tail.
    """
    if isinstance(order, bool) or not isinstance(order, int) or order < 1:
        raise ToolUsageError(f"order must be an int >= 1, got {order!r}")
    if isinstance(memory, bool) or not isinstance(memory, (str, int)):
        raise ToolUsageError(f"memory must be a str such as '1G' or an int of bytes, got {memory!r}")
    if isinstance(memory, int):
        if memory <= 0:
            raise ToolUsageError(f"memory must be positive, got {memory!r}")
        memory = f"{memory}b"
    args = ["-o", str(order), "-S", memory, *_str_args(extra_args)]
    if prune is not None:
        args += ["--prune", *_prune_args(prune)]
    if discount_fallback:
        args.append("--discount_fallback")

    if isinstance(text, (str, os.PathLike)):
        text_path = Path(text)
        if not text_path.is_file():
            raise ToolUsageError(f"text file not found: {text_path}")
        with open(text_path, "rb") as stdin:
            return _run_to_file("lmplz", args, arpa_out, stdin=stdin)
    if isinstance(text, (bytes, bytearray)) or not isinstance(text, Iterable):
        raise ToolUsageError(
            f"text must be a file path or an iterable of sentence strings, got {type(text).__name__}")
    return _run_to_file("lmplz", args, arpa_out, lines=text)


def run_build_binary(arpa, out, *, extra_args=()) -> Path:
    """Convert an ARPA model into KenLM's binary format with ``build_binary``.

    Args:
        arpa: the ARPA file (str or ``os.PathLike``; KenLM also reads .gz,
            .bz2 and .xz).
        out: where to write the binary model; replaced atomically and only
            when build_binary succeeds.
        extra_args: options placed before the file names (iterable of str),
            e.g. ``("-q", "8", "trie")`` for a quantised trie; the default is
            KenLM's probing hash table.

    Returns:
        ``Path(out)``.

    Raises:
        ToolNotFoundError: build_binary is not installed.
        ToolUsageError: the ARPA file does not exist.
        ToolFailedError: build_binary failed; the message holds its stderr tail.
    """
    arpa = Path(arpa)
    if not arpa.is_file():
        raise ToolUsageError(f"ARPA file not found: {arpa}")
    extra = _str_args(extra_args)
    return _run_to_file("build_binary", extra, out, out_arg_after=[str(arpa)])


# --------------------------------------------------------------------------- helpers

def _str_args(extra_args) -> list[str]:
    if isinstance(extra_args, (str, bytes)):
        raise ToolUsageError(f"extra_args must be a sequence of str, not one string: {extra_args!r}")
    out = list(extra_args)
    for a in out:
        if not isinstance(a, str):
            raise ToolUsageError(f"extra_args must hold str, got {a!r}")
    return out


def _prune_args(prune) -> list[str]:
    if isinstance(prune, (str, bytes)) or not isinstance(prune, Iterable):
        raise ToolUsageError(f"prune must be a sequence of ints, got {prune!r}")
    values = list(prune)
    if not values:
        raise ToolUsageError("prune must hold at least one threshold")
    prev = 0
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or v < prev:
            raise ToolUsageError(f"prune must be non-negative, non-decreasing ints, got {values!r}")
        prev = v
    return [str(v) for v in values]


def _tail(path: str, n: int = _STDERR_TAIL_LINES) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - 16384))
        data = f.read().decode("utf-8", errors="replace")
    return "\n".join(data.rstrip().splitlines()[-n:])


def _feed(proc: subprocess.Popen, lines) -> None:
    """Write the sentences in ``lines`` to ``proc``'s stdin, one per line.

    Stops quietly when the tool closes its stdin (it failed; its exit status
    and stderr tell why).  Raises ToolUsageError on a bad sentence (the
    caller then kills the tool).
    """
    stdin = proc.stdin
    try:
        for i, s in enumerate(lines):
            if not isinstance(s, str):
                raise ToolUsageError(f"sentence {i} is not a str: {s!r}")
            if s.endswith("\n"):
                s = s[:-1]
            if "\n" in s or "\r" in s:
                raise ToolUsageError(f"sentence {i} spans several lines: {s!r}")
            stdin.write(s.encode("utf-8"))
            stdin.write(b"\n")
    except BrokenPipeError:
        pass
    finally:
        try:
            stdin.close()
        except BrokenPipeError:
            pass


def _run_to_file(tool: str, args: list[str], out, *, stdin=None, lines=None,
                 out_arg_after=None) -> Path:
    """Run ``tool`` writing ``out`` atomically.

    With ``out_arg_after`` (the input file names) the temporary output path is
    passed as the last argument; otherwise the tool's stdout goes to it.
    stderr goes to a temporary file (no pipe to drain, so no deadlock while
    feeding stdin) and its tail is reported on failure.
    """
    exe = find_tool(tool)
    out = Path(out)
    out_dir = out.parent
    if not out_dir.is_dir():
        raise ToolUsageError(f"output directory does not exist: {out_dir}")
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out_dir)
    err_fd, err_path = tempfile.mkstemp(prefix=f"fsmlearn-{tool}-", suffix=".log")
    ok = False
    try:
        if out_arg_after is not None:
            os.close(fd)
            fd = None
            cmd = [exe, *args, *out_arg_after, tmp]
            stdout = subprocess.DEVNULL
        else:
            cmd = [exe, *args]
            stdout = fd
        try:
            proc = subprocess.Popen(
                cmd, stdout=stdout, stderr=err_fd,
                stdin=subprocess.PIPE if lines is not None else (stdin if stdin is not None
                                                                 else subprocess.DEVNULL))
        except OSError as exc:  # found but not runnable (bad binary, missing shared library)
            raise ToolNotFoundError(f"could not start {exe}: {exc}; rebuild it with `make install`") from exc
        try:
            if lines is not None:
                _feed(proc, lines)
            returncode = proc.wait()
        except BaseException:  # a bad sentence, KeyboardInterrupt, ...: stop the tool
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            raise
        if returncode != 0:
            raise ToolFailedError(tool, cmd, returncode, _tail(err_path))
        if fd is not None:
            os.fsync(fd)
        # mkstemp made the file private (0600); give it an ordinary file's mode.
        os.chmod(tmp, (out.stat().st_mode & 0o777) if out.exists() else 0o644)
        os.replace(tmp, out)
        ok = True
        return out
    finally:
        if fd is not None:
            os.close(fd)
        os.close(err_fd)
        os.unlink(err_path)
        if not ok:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
