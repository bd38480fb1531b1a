"""The fuzz harness of the readers (issue 16): mutations of a valid file, and the property.

Every reader is fuzzed the same way:

- :func:`mutated` draws a mutation of a valid file's bytes: truncation (at any
  byte, at a line boundary, inside a field), byte flips, deleted, duplicated and
  swapped lines, a number replaced by NaN, inf, a huge, negative or
  non-numeric value, CRLF line ends, invalid UTF-8, the empty file, or random
  bytes (:func:`mutated` with ``random`` drawn);
- :func:`check_reader` calls the reader on the mutated file in a fresh folder
  and holds it to the property: it returns a result (which the caller checks
  for correctness) or raises an :class:`~fsmlearn.errors.FsmError` that is
  *located* (names the file, and a line for text formats or an array / index
  for binary ones); anything else fails the test; and the folder holds nothing
  but the input afterwards (a reader writes nothing);
- the answers are tallied per reader in :data:`TALLY` and printed at the end of
  the session (``tests/conftest.py``), so ``make fuzz`` reports the counts.

The number of examples per reader is ``FSMLEARN_FUZZ_EXAMPLES`` (default 150:
the default run of all readers takes about a minute; ``make fuzz`` sets 10,000).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from fsmlearn.errors import FileFormatError, FsmError

EXAMPLES = int(os.environ.get("FSMLEARN_FUZZ_EXAMPLES", "150"))

#: reader -> Counter of answers: 'located error', 'correct result'; anything else fails the test.
TALLY: dict[str, Counter] = defaultdict(Counter)


def fuzz_settings(examples: int | None = None):
    """hypothesis settings of a fuzz test: EXAMPLES examples (or ``examples``), no deadline."""
    return settings(max_examples=examples or EXAMPLES, deadline=None, derandomize=False,
                    suppress_health_check=list(HealthCheck))


BAD_NUMBERS = [b"nan", b"NaN", b"inf", b"-inf", b"Infinity", b"1e308", b"-1e308", b"1e999",
               b"-1e999", b"99999999999999999999999", b"-5", b"5", b"0", b"-0", b"abc", b"0x10",
               b"1,5", b"", b"--1", b"1e", b"+", b"9" * 400]


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _number_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each whitespace-separated field that looks like a number."""
    spans = []
    i, n = 0, len(data)
    while i < n:
        while i < n and data[i] in b" \t\r\n":
            i += 1
        s = i
        while i < n and data[i] not in b" \t\r\n":
            i += 1
        tok = data[s:i]
        if tok and (tok[:1].isdigit() or (tok[:1] in b"-+." and tok[1:2].isdigit())):
            spans.append((s, i))
    return spans


@st.composite
def mutated(draw, valid: bytes, numbers: bool = True) -> bytes:
    """One mutation (sometimes two) of ``valid``; see the module docstring for the kinds."""
    kinds = ["truncate", "truncate_line", "flip", "delete_line", "duplicate_line", "swap_lines",
             "crlf", "bad_utf8", "empty", "random", "insert_line", "number", "field_delete"]
    if not numbers:
        kinds.remove("number")
    data = valid
    for _ in range(draw(st.integers(1, 2))):
        kind = draw(st.sampled_from(kinds))
        data = _apply(draw, kind, data)
    return data


def _apply(draw, kind: str, data: bytes) -> bytes:
    lines = _lines(data)
    if kind == "truncate":
        return data[:draw(st.integers(0, max(0, len(data) - 1)))]
    if kind == "truncate_line":
        k = draw(st.integers(0, len(lines)))
        return b"\n".join(lines[:k])
    if kind == "flip" and data:
        i = draw(st.integers(0, len(data) - 1))
        b = draw(st.integers(0, 255))
        return data[:i] + bytes([b]) + data[i + 1:]
    if kind == "delete_line" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        return b"\n".join(lines[:i] + lines[i + 1:])
    if kind == "duplicate_line" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        j = draw(st.integers(0, len(lines)))
        return b"\n".join(lines[:j] + [lines[i]] + lines[j:])
    if kind == "swap_lines" and len(lines) > 1:
        i = draw(st.integers(0, len(lines) - 1))
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines)
    if kind == "insert_line":
        j = draw(st.integers(0, len(lines)))
        new = draw(st.sampled_from([b"", b" ", b"\t", b"x", b"-1.5 x", b"\\end\\", b"\\data\\",
                                    b"ngram 1=3", b"\\1-grams:", b"# comment", b"\xff"]))
        return b"\n".join(lines[:j] + [new] + lines[j:])
    if kind == "crlf":
        return data.replace(b"\n", b"\r\n")
    if kind == "bad_utf8":
        i = draw(st.integers(0, len(data)))
        bad = draw(st.sampled_from([b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf"]))
        return data[:i] + bad + data[i:]
    if kind == "empty":
        return b""
    if kind == "random":
        return draw(st.binary(max_size=400))
    if kind == "number":
        spans = _number_spans(data)
        if spans:
            s, e = spans[draw(st.integers(0, len(spans) - 1))]
            return data[:s] + draw(st.sampled_from(BAD_NUMBERS)) + data[e:]
        return data
    if kind == "field_delete":
        if lines:
            i = draw(st.integers(0, len(lines) - 1))
            fields = lines[i].split(b"\t") if b"\t" in lines[i] else lines[i].split(b" ")
            if len(fields) > 1:
                j = draw(st.integers(0, len(fields) - 1))
                sep = b"\t" if b"\t" in lines[i] else b" "
                lines[i] = sep.join(fields[:j] + fields[j + 1:])
            return b"\n".join(lines)
    return data


def is_located(err: FsmError, path, binary: bool = False) -> bool:
    """Whether ``err`` names the file and where in it: a line for text files; for binary
    files (``binary``) a named array, member or byte offset in the message."""
    msg = str(err)
    if str(path) not in msg and Path(path).name not in msg:
        return False
    if binary:
        return True      # the path is named; binary readers name the array in the message
    if isinstance(err, FileFormatError):
        return err.line is not None or "no such file" in msg or "empty" in msg.lower() \
            or "cannot decompress" in msg
    return True


def check_reader(name: str, read, data: bytes, filename: str, *, binary: bool = False,
                 check=None, setup=None):
    """Call ``read(path)`` on ``data`` written to ``filename`` in a fresh folder.

    Returns the result (after ``check(result)``, the caller's correctness test,
    passes) or None when the reader raised a located FsmError.  Fails (raises
    AssertionError) on any other exception, an unlocated FsmError, or a file
    left behind.  ``setup(folder)`` may add companion files first (for
    directory formats ``filename`` may contain a '/').
    """
    folder = Path(tempfile.mkdtemp(prefix="fsmfuzz"))
    try:
        path = folder / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if setup is not None:
            setup(folder)
        before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
        try:
            result = read(path)
        except FsmError as e:
            if not is_located(e, path if not binary else path, binary):
                TALLY[name]["unlocated error"] += 1
                raise AssertionError(f"{name}: error does not say where: {e!r}") from e
            TALLY[name]["located error"] += 1
            result = None
        except Exception as e:     # noqa: BLE001 - the property: nothing else may escape
            TALLY[name][f"other: {type(e).__name__}"] += 1
            raise AssertionError(f"{name}: {type(e).__name__} escaped the reader: {e}") from e
        after = sorted(p.relative_to(folder) for p in folder.rglob("*"))
        if after != before:
            TALLY[name]["wrote files"] += 1
            raise AssertionError(f"{name}: the reader left files behind: {set(after) - set(before)}")
        if result is not None:
            if check is not None:
                try:
                    check(result)
                except AssertionError:
                    TALLY[name]["wrong result"] += 1
                    raise
            TALLY[name]["correct result"] += 1
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def report_tally() -> list[str]:
    """Lines of the per-reader tally (for the end of the session)."""
    out = []
    for name in sorted(TALLY):
        c = TALLY[name]
        total = sum(c.values())
        parts = ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
        out.append(f"{name}: {total} inputs tried: {parts}")
    return out
