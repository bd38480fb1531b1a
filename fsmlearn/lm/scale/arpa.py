"""An ARPA file compiled by partitions (``fsmlearn lm compile --scheduler``): the twin of
:func:`~fsmlearn.lm.arpa.read_arpa` followed by :func:`~fsmlearn.lm.model.compile_lm` and
:meth:`~fsmlearn.lm.compiled.CompiledLM.save`, for a model no process need hold.

1. *layout* (the client): the ``\\data\\`` header, read and checked as ``read_arpa`` reads
   it, then one scan of the file for the lines that start with a backslash: the byte range
   and first line of each order's section (a compressed file is first decompressed by a
   worker into the scratch folder, so that it can be cut);
2. *unigrams*: the section cut into byte ranges, parsed by the workers; the client joins
   the words (word id = position, as ``read_arpa`` numbers them) and checks their count and
   that none is listed twice;
3. *n-grams*: every higher section cut into byte ranges; each range parsed (words looked up
   in the unigrams; numbers and fields checked; a bad line names the file and line) and
   split by last word into the ranges the client chose from the parsers' histograms of last
   words;
4. *partitions*: each range's pieces of every order merged, rows given suffix indices
   (a model whose n-grams lack a suffix, which ``compile_lm`` accepts, is refused with a
   line saying so), duplicates refused;
5. :func:`~fsmlearn.lm.scale.compile.compile_parts`.

Numbers are parsed by Python's ``float`` (correctly rounded, as ``read_arpa``'s parser
is): the compiled file's weights are ``compile_lm``'s to the bit.

Public names: compile_arpa.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import numpy as np

from ...errors import (ArgumentError, ArpaContextError, ArpaCountError, ArpaDuplicateError, ArpaFormatError,
                       ArpaSectionError, ArpaValueError)
from .cluster import _load
from .compile import compile_parts
from .layout import Layout
from .count import Words, _line_number
from .kn import _find, _missing

#: buckets of word ids in the parsers' histograms of last words (the ranges' bounds fall between)
_BUCKETS = 4096


def _decompress(src: str, dst: str) -> str:
    """Task: a compressed ARPA file written out plain (so that it can be cut into ranges)."""
    from ...data.text import open_text
    with open_text(src, "rb") as f, open(dst + ".part", "wb") as out:
        shutil.copyfileobj(f, out, 1 << 22)
    os.replace(dst + ".part", dst)
    return dst


def arpa_layout(path: str, shown: str):
    """(counts {k: c}, {k: (start byte, end byte, first line)}) of a plain ARPA file; ``shown``
    names it in errors."""
    from ..arpa import _Lines, _read_header, _SECTION_RE
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        counts, _ = _read_header(_Lines(f), Path(shown), size)
    N = len(counts)
    marks = []                                   # (byte, line, text) of every line starting with '\'
    with open(path, "rb") as f:
        pos, line, at_start = 0, 1, True
        while True:
            b = f.read(1 << 24)
            if not b:
                break
            starts = ([0] if at_start and b[:1] == b"\\" else [])
            i = b.find(b"\n\\")
            while i >= 0:
                starts.append(i + 1)
                i = b.find(b"\n\\", i + 1)
            seen = 0
            for i in starts:
                line += b.count(b"\n", seen, i)
                seen = i
                j = b.find(b"\n", i)
                if j < 0:                        # the line goes on in the next block
                    f.seek(pos + i)
                    text = f.readline()
                    f.seek(pos + len(b))
                else:
                    text = b[i:j + 1]
                marks.append((pos + i, line, text.strip(), len(text)))
            line += b.count(b"\n", seen)
            pos += len(b)
            at_start = b.endswith(b"\n")
    secs = {}
    heads = [(p, ln, t, n) for p, ln, t, n in marks if t != b"\\data\\"]
    for k in range(1, N + 1):
        if k - 1 >= len(heads):
            raise ArpaSectionError(f"the file ends before the \\{k}-grams: section", Path(shown), line)
        p, ln, t, n = heads[k - 1]
        m = _SECTION_RE.match(t)
        if not m or int(m.group(1)) != k:
            raise ArpaSectionError(f"expected the \\{k}-grams: section: {t.decode('utf-8', 'replace')[:200]!r}",
                                   Path(shown), ln)
        secs[k] = (p + n, None, ln + 1)
    if len(heads) <= N or heads[N][2] != b"\\end\\":
        where = heads[N][1] if len(heads) > N else line
        raise ArpaSectionError("expected \\end\\", Path(shown), where)
    for k in range(1, N + 1):
        start, _, first = secs[k]
        secs[k] = (min(start, heads[k][0]), heads[k][0], first)
    return counts, secs


def _lines_of(path: str, start: int, end: int):
    """(byte offset, line) of the lines that start in ``start``..``end`` (a line cut by ``start``
    belongs to the range before)."""
    with open(path, "rb") as f:
        pos = start
        if pos > 0:
            f.seek(pos - 1)
            if f.read(1) != b"\n":
                pos += len(f.readline())
        f.seek(pos)
        while pos < end:
            line = f.readline()
            if not line:
                break
            yield pos, line
            pos += len(line)


def parse_range(path: str, shown: str, start: int, end: int, k: int, N: int, words):
    """Task: the k-gram lines starting in bytes ``start``..``end``: (words joined by newlines,
    or for k >= 2 rows int32 [M, k] of unigram ids), log10 probabilities, backoffs (0 where
    none), and for k >= 2 a histogram of the last words over :data:`_BUCKETS` id buckets."""
    wid = words.ids() if k > 1 else None
    V = len(wid) if wid is not None else 1
    toks, lps, bos = [], [], []

    def fail(pos, line, reason, kind=ArpaFormatError):
        text = line.decode("utf-8", "replace").rstrip("\r\n")
        return kind(f"{reason}: {text[:200]!r}", Path(shown), _line_number(path, pos))

    for pos, line in _lines_of(path, start, end):
        fields = line.split()
        if not fields:
            continue
        if b"\0" in line:
            raise fail(pos, line, "binary data (a NUL byte)")
        if len(fields) != k + 1 and len(fields) != k + 2:
            raise fail(pos, line, f"expected 'logprob w1 .. w{k} [backoff]' ({k + 1} or {k + 2} fields)")
        if len(fields) == k + 2 and k == N:
            raise fail(pos, line, f"a {k}-gram of the highest order has a backoff weight")
        try:
            lp = float(fields[0])
            bo = float(fields[k + 1]) if len(fields) == k + 2 else 0.0
        except ValueError:
            raise fail(pos, line, "not a number", ArpaValueError) from None
        if not (math.isfinite(lp) and lp <= 0.0):
            raise fail(pos, line, f"log10 probability {lp!r} of a {k}-gram is not finite and at most 0",
                       ArpaValueError)
        if not math.isfinite(bo):
            raise fail(pos, line, f"backoff weight {bo!r} of a {k}-gram is not finite", ArpaValueError)
        try:
            ws = [w.decode("utf-8") for w in fields[1:k + 1]]
        except UnicodeDecodeError as e:
            raise fail(pos, line, f"word is not UTF-8 (byte {e.object[e.start]:#04x})") from None
        if k == 1:
            toks.append(ws[0])
        else:
            try:
                toks.extend(wid[w] for w in ws)
            except KeyError as e:
                raise fail(pos, line, f"word {e.args[0]!r} is not among the 1-grams") from None
        lps.append(lp)
        bos.append(bo)
    lp = np.array(lps, np.float64)
    bo = np.array(bos, np.float64)
    if k == 1:
        return "\n".join(toks), lp, bo
    rows = np.array(toks, np.int32).reshape(-1, k)
    hist = np.bincount(rows[:, -1].astype(np.int64) * _BUCKETS // max(V, 1), minlength=_BUCKETS)
    return rows, lp, bo, hist


def route_model(parsed, bounds):
    """Task: a parsed range split by last word into the ranges ``bounds``: per range (rows, lp, bo)."""
    rows, lp, bo = parsed[0], parsed[1], parsed[2]
    r = np.searchsorted(bounds, rows[:, -1], side="right") - 1
    o = np.argsort(r, kind="stable")
    edges = np.searchsorted(r[o], np.arange(bounds.size))
    return [(rows[o[a:b]], lp[o[a:b]], bo[o[a:b]]) for a, b in zip(edges[:-1], edges[1:])]


def model_build(lo: int, hi: int, lp1, bo1, pieces, N: int, V: int, words, shown: str):
    """Task: the model partition of last words ``lo``..``hi`` (rows, log10 probabilities,
    backoffs, suffix indices and keys per order), as :func:`~fsmlearn.lm.scale.compile.model_from_estimate`
    gives it.  ``pieces``: per order 2..N, the ranges' (rows, lp, bo)."""
    w = np.arange(lo, hi, dtype=np.int32)
    st = {"lo": lo, "hi": hi, "N": N, "V": V, "rows": {1: w[:, None]}, "lp": {1: np.asarray(lp1, np.float64)},
          "bo": {1: np.asarray(bo1, np.float64)}, "suf": {}}
    for k in range(2, N + 1):
        got = [p for p in pieces[k - 2] if p[0].shape[0]]
        rows = np.concatenate([p[0] for p in got]) if got else np.zeros((0, k), np.int32)
        lp = np.concatenate([p[1] for p in got]) if got else np.zeros(0)
        bo = np.concatenate([p[2] for p in got]) if got else np.zeros(0)
        suf = _find(st, np.ascontiguousarray(rows[:, 1:]))
        if (suf < 0).any():
            e = _missing("suffix", words, rows[int(np.argmax(suf < 0))])
            raise ArgumentError(f"{e}; this model lacks suffixes that a compiled model by partitions needs: "
                                "compile it with --scheduler in-memory")
        key = suf * V + rows[:, 0].astype(np.int64)
        o = np.argsort(key, kind="stable")
        key = key[o]
        dup = np.flatnonzero(key[1:] == key[:-1])
        if dup.size:
            ws = words.list() if isinstance(words, str) else words
            row = rows[o[int(dup[0])]]
            raise ArpaDuplicateError(f"{k}-gram {' '.join(ws[int(x)] for x in row)!r} is listed twice", shown)
        st["rows"][k], st["lp"][k], st["bo"][k] = np.ascontiguousarray(rows[o]), lp[o], bo[o]
        st["suf"][k] = suf[o].astype(np.int32)
    st.pop("_tab", None)
    return st


def compile_arpa(runner, path, output, part_bytes: int) -> tuple[int, int, list]:
    """Compile the ARPA file ``path`` (plain or ``.gz``/``.bz2``/``.xz``) into ``output``.

    Returns:
        (states, arcs, n-grams per order).

    Raises:
        ArpaFormatError (and its subclasses): as ``read_arpa`` words them, with file and line.
        ArgumentError: a model without some n-gram's suffix (compile it in memory).
    """
    from .kn import check_output
    check_output(output)
    shown = str(path)
    plain = os.path.abspath(path)
    if plain.endswith((".gz", ".bz2", ".xz")):
        dst = os.path.join(runner.data, "model.arpa")
        runner.wait([f := runner.submit(_decompress, plain, dst)], "decompressing the ARPA file", "files")
        plain = runner.gather([f])[0]
    counts, secs = arpa_layout(plain, shown)
    N = len(counts)
    runner.say(f"ARPA file: order {N}, " + ", ".join(f"{c:,} {k}-grams" for k, c in counts.items()))

    def ranges(k):
        a, b, _ = secs[k]
        step = max(64, part_bytes)
        return [(s, min(b, s + step)) for s in range(a, b, step)] or [(a, a)]

    uni = [runner.submit(parse_range, plain, shown, a, b, 1, N, None) for a, b in ranges(1)]
    runner.wait(uni, "reading the 1-grams", "ranges")
    got = runner.gather(uni)
    words = [w for joined, lp, _ in got if lp.size for w in joined.split("\n")]
    lp1 = np.concatenate([g[1] for g in got])
    bo1 = np.concatenate([g[2] for g in got])
    if len(words) != counts[1]:
        raise ArpaCountError(f"the header declares {counts[1]:,} 1-grams but the section has {len(words):,}",
                             Path(shown), secs[1][2] + len(words))     # the line after them, as read_arpa
    if len(set(words)) != len(words):
        seen = set()
        r = next(i for i, w in enumerate(words) if w in seen or seen.add(w))
        raise ArpaDuplicateError(f"1-gram {words[r]!r} is listed twice", Path(shown), secs[1][2] + r)
    from ..vocab import BOS, EOS, UNK
    for w in (BOS, EOS, UNK):
        if w not in set(words):
            raise ArpaContextError(f"no {w} among the 1-grams", Path(shown), secs[1][2] - 1)
    V = len(words)
    wf = runner.share(Words("\n".join(words)))
    parsed = {k: [runner.submit(parse_range, plain, shown, a, b, k, N, wf) for a, b in ranges(k)]
              for k in range(2, N + 1)}
    runner.wait([f for fs in parsed.values() for f in fs], "reading the n-grams", "ranges")
    parsed = {k: runner.checkpoint(fs) for k, fs in parsed.items()}
    hist = np.zeros(_BUCKETS, np.int64)
    for k in range(2, N + 1):
        n = 0
        for p in parsed[k]:
            hist += _load(p[3])
            n += p[0].shape[0]
        if n != counts[k]:
            raise ArpaCountError(f"the header declares {counts[k]:,} {k}-grams but the section has {n:,}",
                                 Path(shown), secs[k][2] + n)
    # ranges of last words holding about equal numbers of n-grams (bucket edges), as many as
    # the budget asks for
    total = sum(counts.values())
    P = max(2 * runner.slots, -(-total * 60 // max(1, runner.task_memory // 10)))
    cum = np.cumsum(hist + 1)
    cuts = np.searchsorted(cum, cum[-1] * np.arange(1, P) / P, side="right")
    edges = np.unique(np.concatenate([[0], (cuts * V + _BUCKETS - 1) // _BUCKETS, [V]]).clip(0, V))
    bounds = edges.astype(np.int64)
    P = bounds.size - 1
    routed = {k: [runner.submit(route_model, p, bounds) for p in parsed[k]] for k in range(2, N + 1)}
    runner.wait([f for fs in routed.values() for f in fs], "splitting the n-grams by last word", "ranges")
    routed = {k: runner.checkpoint(fs) for k, fs in routed.items()}
    runner.discard([p for fs in parsed.values() for p in fs])
    mp = [runner.submit(model_build, int(bounds[p]), int(bounds[p + 1]), lp1[bounds[p]:bounds[p + 1]],
                        bo1[bounds[p]:bounds[p + 1]], [[r[p] for r in routed[k]] for k in range(2, N + 1)],
                        N, V, wf, shown) for p in range(P)]
    runner.wait(mp, "compiling: the model's partitions", "partitions")
    mp = runner.checkpoint(mp)
    runner.discard([r for fs in routed.values() for r in fs])
    try:
        states, arcs = compile_parts(runner, words, N, Layout(bounds), mp, output)
    finally:
        runner.release()
    return states, arcs, [counts[k] for k in range(1, N + 1)]
