"""Partitioned n-gram counting and Web1T files written by the workers.

The input is read where it lies, one partition per task (:func:`text_parts`): a byte
range of an uncompressed file (cut at line starts), a whole compressed file, or a
block of lines the client read from stdin or a named dataset; a Web1T directory's
own files are its partitions (:func:`web1t_parts`).  Nothing the client keeps
grows with the number of n-grams:

1. *vocabulary* (one task per partition): its words and their counts; the client merges
   them (words and unigram counts only) and numbers the words in Web1T's byte order, so
   that the numeric order of id rows is the byte order of their lines;
2. *count and route* (one task per partition, the text read a second time): the
   partition's n-grams of orders 1..N counted with its own word ids
   (:func:`fsmlearn.lm.counts.count_ngrams`: few enough ids for its packed keys whatever
   the whole vocabulary's size), put in global ids and split into B ranges of their
   first word (for Web1T files) or of their last word (for estimation, :mod:`.kn`);
3. *merge* (one task per range): the pieces of a range from every partition, sorted
   and summed (exact integer counts), and for Web1T written as that range's file of
   every order (``Kgms/Kgm-BBBB.gz``) into a temporary directory beside the output,
   which the client completes (``1gms/vocab``, ``total``, the ``.idx`` files) and puts
   in the output's place in one rename.

A task that is run twice (a worker lost, Dask recomputing) writes the same bytes.

Public names: text_parts, web1t_parts, vocab_part, count_route, count_parts, read_web1t_parts, GlobalVocab,
route, merge_range, write_web1t_dist, count_to_web1t, count_ids_to_web1t, reweb1t.
"""

from __future__ import annotations

import gzip
import functools
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import numba as nb
import numpy as np

from ...errors import ArgumentError, CorpusFormatError
from ...fsm.hashing import hash64, same_rows, same_run, table_capacity
from ..counts import count_ngrams
from ..vocab import BOS, EOS, UNK, scan_token, word_bytes
from ..web1t import _TO_OURS, _TO_WEB1T, new_output_folder   # Web1T's spelling of <s>, </s>, <unk>



# --- input partitions -------------------------------------------------------------------------

@dataclass(frozen=True)
class TextPart:
    """One partition of text: ``path``'s bytes ``start``..``end`` (lines that start there),
    the whole (compressed) file when ``end`` is -1, or ``lines`` read by the client (str lines,
    or a dataset's sentences as tuples of tokens; their first line number ``first``)."""
    path: str
    start: int = 0
    end: int = -1
    lines: tuple | None = None
    first: int = 1


def _compressed(path: str) -> bool:
    return path.endswith((".gz", ".bz2", ".xz"))


def text_parts(paths, part_bytes: int, dataset: str | None = None) -> list:
    """The partitions of text files (or of a named dataset), ``part_bytes`` of text each.

    Uncompressed files are cut into byte ranges (each task finds its first line start);
    compressed files are one partition each; stdin (``-``) and datasets are read here and
    cut into blocks of lines.

    Raises:
        CorpusNotFoundError, CorpusFormatError: a missing file, a directory, an empty file.
    """
    from ...data.textin import byte_lines, open_input
    parts = []
    if dataset is not None:
        from ...data import iter_dataset_words
        block, size = [], 0
        for s in iter_dataset_words(dataset):
            block.append(tuple(s))          # the tokens as the corpus has them (count_ngrams takes lists)
            size += sum(len(w) + 1 for w in s)
            if size >= part_bytes:
                parts.append(TextPart(dataset, lines=tuple(block)))
                block, size = [], 0
        if block:
            parts.append(TextPart(dataset, lines=tuple(block)))
        return parts
    for p in paths:
        p = str(p) if str(p) == "-" else os.path.abspath(str(p))     # workers may run elsewhere
        if p == "-":
            block, size, first = [], 0, 1
            for n, line in byte_lines("-", utf8=True):
                if not block:
                    first = n
                block.append(line.decode("utf-8"))
                size += len(line) + 1
                if size >= part_bytes:
                    parts.append(TextPart("<stdin>", lines=tuple(block), first=first))
                    block, size = [], 0
            if block:
                parts.append(TextPart("<stdin>", lines=tuple(block), first=first))
            continue
        open_input(p).close()                   # missing, a directory, unreadable: named here
        if _compressed(p):
            parts.append(TextPart(p))
            continue
        size = os.path.getsize(p)
        if size == 0:
            raise CorpusFormatError("the file is empty", p)
        for start in range(0, size, part_bytes):
            parts.append(TextPart(p, start, min(size, start + part_bytes)))
    return parts


def _line_number(path: str, pos: int) -> int:
    """The number (from 1) of the line holding byte ``pos`` of ``path``."""
    n = 1
    with open(path, "rb") as f:
        left = pos
        while left > 0:
            b = f.read(min(left, 1 << 22))
            if not b:
                break
            n += b.count(b"\n")
            left -= len(b)
    return n


def _check(line: bytes, path: str, where) -> str:
    """``line`` decoded; a NUL byte or bytes that are not UTF-8 raise, naming the file and line
    (``where()`` gives the line number, computed only when needed)."""
    if b"\0" in line:
        col = line.find(b"\0") + 1
        raise CorpusFormatError(f"binary data, not text (a NUL byte at column {col})", path, where())
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorpusFormatError(f"bytes that are not UTF-8 at column {e.start + 1}: "
                                f"{line[e.start:e.start + 8]!r}", path, where()) from None


def part_lines(part: TextPart):
    """The lines (str) of a partition, checked as :func:`fsmlearn.data.textin.read_lines` checks them."""
    if part.lines is not None:
        yield from part.lines
        return
    if part.end < 0:
        from ...data.textin import byte_lines
        for n, line in byte_lines(part.path, utf8=False):
            yield _check(line, part.path, lambda n=n: n)
        return
    with open(part.path, "rb") as f:
        pos = part.start
        if pos > 0:
            f.seek(pos - 1)
            if f.read(1) != b"\n":              # inside a line: it belongs to the partition before
                rest = f.readline()
                pos += len(rest)
        f.seek(pos)
        while pos < part.end:
            line = f.readline()
            if not line:
                break
            start = pos
            pos += len(line)
            yield _check(line.rstrip(b"\n"), part.path, lambda s=start: _line_number(part.path, s))


def count_part(part: TextPart, order: int):
    """Task: (words, unigram counts by word, [rows int32 [M_k, k], counts int64 [M_k]] for k = 2..N)
    of one partition, in the partition's own word ids."""
    c = count_ngrams(part_lines(part), order)
    words = list(c.vocab)
    uni = np.zeros(len(words), np.int64)
    uni[c.ngrams[0][:, 0]] = c.counts[0]
    return words, uni, [(c.ngrams[k], c.counts[k]) for k in range(1, order)]


# --- the global vocabulary --------------------------------------------------------------------

class GlobalVocab:
    """The words of every partition, numbered in the byte order of their Web1T spelling (so that
    id rows sort like their lines), with their unigram counts.

    Attributes:
        words: list of str (ours: ``<s>``, ``</s>``, ``<unk>``).
        counts: int64 [V] unigram counts.
        id: dict word -> id.
    """

    def __init__(self, counts: dict):
        for w in (BOS, EOS, UNK):
            counts.setdefault(w, 0)
        self.words = sorted(counts, key=lambda w: _TO_WEB1T.get(w, w).encode("utf-8"))
        self.id = {w: i for i, w in enumerate(self.words)}
        self.counts = np.array([counts[w] for w in self.words], np.int64)

    @property
    def size(self) -> int:
        return len(self.words)

    def web1t_bytes(self):
        """(wbuf, woff) of the words in Web1T's spelling (for rendering lines)."""
        return word_bytes([_TO_WEB1T.get(w, w) for w in self.words])

    def bounds(self, ranges: int, weights=None) -> np.ndarray:
        """int64 [B + 1]: B word-id ranges of about equal ``weights`` (default: the counts)."""
        w = (self.counts if weights is None else weights).astype(np.float64) + 1.0
        cum = np.cumsum(w)
        cuts = np.searchsorted(cum, cum[-1] * np.arange(1, ranges) / ranges, side="right")
        b = np.unique(np.concatenate([[0], np.minimum(cuts, self.size), [self.size]]))
        return b.astype(np.int64)


# --- routing and merging ----------------------------------------------------------------------

@nb.njit(cache=True)
def _route_kernel(rows, cnt, trans, use_trans, range_of, col, B):
    """Rows translated to global ids (``trans``, when ``use_trans``) and laid out by the range of
    their word in column ``col`` (a counting sort: stable, one pass to count and one to place);
    (rows int32 [n, k], counts, int64 [B + 1] the ranges' starts)."""
    n, k = rows.shape
    rr = np.empty(n, np.int32)
    starts = np.zeros(B + 1, np.int64)
    for i in range(n):
        w = rows[i, col]
        b = range_of[trans[w] if use_trans else w]
        rr[i] = b
        starts[b + 1] += 1
    for b in range(B):
        starts[b + 1] += starts[b]
    pos = starts[:B].copy()
    out = np.empty((n, k), np.int32)
    oc = np.empty(n, cnt.dtype)
    for i in range(n):
        j = pos[rr[i]]
        pos[rr[i]] = j + 1
        for c in range(k):
            out[j, c] = trans[rows[i, c]] if use_trans else rows[i, c]
        oc[j] = cnt[i]
    return out, oc, starts


def route(counted, trans, bounds, key: int):
    """Task: the partition's n-grams (orders 2..N) in global ids, split by ``key`` word (0 the
    first, -1 the last) into the ranges ``bounds``; per range, per order (rows, counts), each
    range's rows in the partition's order."""
    B = bounds.size - 1
    out = [[] for _ in range(B)]
    # each word's range, looked up (a gather, not a binary search per row)
    range_of = np.repeat(np.arange(B, dtype=np.int32), np.diff(bounds))
    use = trans is not None
    tr = np.ascontiguousarray(trans, np.int32) if use else np.zeros(0, np.int32)
    for rows, cnt in counted:
        rows = np.ascontiguousarray(rows, np.int32)
        k = rows.shape[1]
        gs, cs, edges = _route_kernel(rows, np.ascontiguousarray(cnt), tr, use, range_of,
                                      0 if key == 0 else k - 1, B)
        for b in range(B):
            out[b].append((gs[edges[b]:edges[b + 1]], cs[edges[b]:edges[b + 1]]))
    return out


def row_order(rows: np.ndarray) -> np.ndarray:
    """The permutation that sorts int32 rows (non-negative) lexicographically: the rows packed
    into two 64-bit keys (as many words as fit in each) and sorted by those, which is several
    times faster than sorting by every column."""
    n, k = rows.shape
    if n == 0 or k == 0:
        return np.arange(n)
    bits = max(1, int(rows.max()).bit_length())
    per = 63 // bits
    if k > 2 * per:
        return np.lexsort(rows.T[::-1])
    def pack(cols):
        key = np.zeros(n, np.uint64)
        for j in cols:
            key = (key << np.uint64(bits)) | rows[:, j].astype(np.uint64)
        return key
    lo_cols = range(max(0, k - per), k)
    lo = pack(lo_cols)
    if k <= per:
        return np.argsort(lo, kind="stable")
    return np.lexsort((lo, pack(range(0, k - per))))


@nb.njit(cache=True)
def _group_kernel(rows, table, mask, gid, first):
    """Hash every row (its words mixed with splitmix64's finaliser); equal rows share a group:
    ``gid[i]`` its group, ``first[g]`` the first row of group g (groups numbered in order of
    first appearance); returns the number of groups."""
    M, m = rows.shape
    G = 0
    for i in range(M):
        h = np.uint64(0x9E3779B97F4A7C15)
        for j in range(m):
            h = hash64(h ^ np.uint64(rows[i, j]))
        s = np.int64(h & np.uint64(mask))
        while True:
            g = table[s]
            if g < 0:
                table[s] = G
                first[G] = i
                gid[i] = G
                G += 1
                break
            if same_rows(rows, first[g], i, m):
                gid[i] = g
                break
            s = (s + 1) & mask
    return G


def group_rows(rows: np.ndarray):
    """(gid int64 [M], first int64 [G]): equal rows of int32 ``rows`` [M, m] grouped by hashing,
    groups in order of first appearance (linear time: no sort)."""
    M = rows.shape[0]
    gid = np.empty(M, np.int64)
    first = np.empty(M, np.int64)
    if M == 0:
        return gid, first
    table = np.full(table_capacity(M), -1, np.int32)      # group ids: half the memory of int64
    G = _group_kernel(np.ascontiguousarray(rows), table, table.size - 1, gid, first)
    return gid, first[:G]


@nb.njit(cache=True)
def _sum_by(gid, cnt, G):
    out = np.zeros(G, np.int64)
    for i in range(gid.shape[0]):
        out[gid[i]] += cnt[i]
    return out


def unique_sum(rows: np.ndarray, cnt: np.ndarray):
    """Distinct rows (in order of first appearance) and their summed int64 counts."""
    gid, first = group_rows(rows)
    return np.ascontiguousarray(rows[first]), _sum_by(gid, np.asarray(cnt, np.int64), first.size)


def sum_rows(rows: np.ndarray, cnt: np.ndarray):
    """Rows sorted lexicographically with equal rows merged (their counts summed)."""
    if rows.shape[0] == 0:
        return rows, cnt
    o = row_order(rows)
    rows = rows[o]
    cnt = cnt[o]
    new = np.ones(rows.shape[0], bool)
    new[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    starts = np.flatnonzero(new)
    return np.ascontiguousarray(rows[starts]), np.add.reduceat(cnt, starts)


def merge_range(pieces):
    """Task: one range's pieces from every partition, per order (rows sorted, counts summed)."""
    if not pieces:
        return []
    N1 = len(pieces[0])
    out = []
    for j in range(N1):
        rows = np.concatenate([p[j][0] for p in pieces])
        cnt = np.concatenate([p[j][1] for p in pieces])
        out.append(sum_rows(rows, cnt))
    return out


# --- Web1T written by the workers -------------------------------------------------------------

def write_range(merged, b: int, cut, wb, tmpdir: str, gzip_files: bool):
    """Task: range ``b``'s file of each order 2..N (counts at least the order's cutoff ``cut[k - 1]``)
    under ``tmpdir``; returns per order (lines written, the first n-gram's text)."""
    return [_write_file(rows, cnt, j + 2, b, cut[j + 1], wb, tmpdir, gzip_files)
            for j, (rows, cnt) in enumerate(merged)]


def write_web1t_dist(runner, vocab: GlobalVocab, routed, B: int, order: int, root, cut, gzip_files: bool = True,
                     stage: str = "merging and writing") -> list[int]:
    """Merge routed pieces (by first word) range by range into a Web1T directory ``root``,
    replacing it atomically; the client writes only ``1gms/`` and the index files.

    Returns:
        The n-grams written per order.
    """
    def submit(tmp, wb):
        writes = [runner.submit(write_range, runner.submit(merge_range, [runner.piece(r, b) for r in routed]),
                                b, cut, wb, tmp, gzip_files) for b in range(B)]
        return writes, lambda got, k, b: got[b][k - 2]
    return _web1t_job(runner, vocab, order, B, root, gzip_files, submit, stage)


def _web1t_job(runner, vocab: GlobalVocab, order: int, B: int, root, gzip_files: bool, submit, stage: str):
    """A Web1T directory the workers fill: a temporary folder beside ``root`` (removed on failure,
    and after the workers stop whatever happens), ``submit(folder, word bytes)`` giving the
    writing tasks and how to read (lines, first n-gram) of order k's file b from their results,
    then :func:`_finish`."""
    root = Path(root)
    tmp = Path(os.path.abspath(new_output_folder(root)))   # workers may run elsewhere
    runner.leftovers.append(str(tmp))
    try:
        for k in range(2, order + 1):
            (tmp / f"{k}gms").mkdir()
        writes, result = submit(str(tmp), runner.share(vocab.web1t_bytes()))
        runner.wait(writes, stage, "files")
        got = runner.gather(writes)
        return _finish(tmp, root, vocab, order, B, lambda k, b: result(got, k, b), gzip_files)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        runner.release()


def _finish(tmp: Path, root: Path, vocab: GlobalVocab, order: int, B: int, result, gzip_files: bool) -> list[int]:
    """The client's part of a Web1T directory the workers filled: ``1gms/``, each order's ``.idx``
    (``result(k, b)``: (lines, first n-gram) of range b's file of order k), then the folder put in
    ``root``'s place; returns the n-grams written per order."""
    from ..web1t import _replace_dir
    ext = ".gz" if gzip_files else ""
    for stray in tmp.glob("*gms/*.part"):      # a file a worker was writing when it was lost
        stray.unlink()
    sizes = [_write_vocab(tmp, vocab, ext)]
    for k in range(2, order + 1):
        lines = [f"{k}gm-{b:04d}{ext}\t{result(k, b)[1]}\n" for b in range(B)]
        (tmp / f"{k}gms" / f"{k}gm.idx").write_text("".join(lines), encoding="utf-8")
        sizes.append(sum(result(k, b)[0] for b in range(B)))
    _replace_dir(tmp, root)
    return sizes


def _write_vocab(tmp: Path, vocab: GlobalVocab, ext: str) -> int:
    """``1gms/vocab`` (count descending, then byte order, as :func:`~fsmlearn.lm.web1t.write_web1t`)
    and ``1gms/total``; returns the words written."""
    (tmp / "1gms").mkdir()
    names = [_TO_WEB1T.get(w, w) for w in vocab.words]
    c1 = vocab.counts
    order1 = np.lexsort((np.array(names, dtype=object).astype(str), -c1))
    opener = (lambda p: gzip.open(p, "wb", compresslevel=1)) if ext else (lambda p: open(p, "wb"))
    with opener(tmp / "1gms" / f"vocab{ext}") as f:
        f.write("".join(f"{names[i]}\t{c1[i]}\n" for i in order1 if c1[i] > 0).encode("utf-8"))
    bos = vocab.id[BOS]
    (tmp / "1gms" / "total").write_text(f"{int(c1.sum() - c1[bos])}\n")
    return int(np.count_nonzero(c1 > 0))


@nb.njit(cache=True)
def _vocab_kernel(buf):
    """(starts, lengths, counts, lines) of the distinct whitespace-separated tokens of UTF-8 text
    ``buf`` (uint8), in order of first appearance, and its lines (a last line without a newline
    counted): one scan of the tokeniser (:func:`~fsmlearn.lm.vocab.scan_token`, each token
    hashed as its end is found) into an open-addressing table that doubles when half full."""
    cap = 1 << 12
    mask = cap - 1
    table = np.full(cap, -1, np.int64)
    starts = np.empty(cap, np.int64)
    lens = np.empty(cap, np.int64)
    hashes = np.empty(cap, np.uint64)
    counts = np.empty(cap, np.int64)
    U = 0
    lines = 0
    n = buf.shape[0]
    i = 0
    while i < n:
        while True:
            a, i, h = scan_token(buf, i, n)
            if a == i:
                break
            L = i - a
            slot = np.int64(h & np.uint64(mask))
            while True:
                u = table[slot]
                if u < 0:
                    starts[U] = a
                    lens[U] = L
                    hashes[U] = h
                    counts[U] = 1
                    table[slot] = U
                    U += 1
                    if 2 * U > cap:             # half full: double the table and the entries
                        cap *= 2
                        mask = cap - 1
                        table = np.full(cap, -1, np.int64)
                        for v in range(U):
                            s2 = np.int64(hashes[v] & np.uint64(mask))
                            while table[s2] >= 0:
                                s2 = (s2 + 1) & mask
                            table[s2] = v
                        starts = np.concatenate((starts, np.empty(cap - starts.shape[0], np.int64)))
                        lens = np.concatenate((lens, np.empty(cap - lens.shape[0], np.int64)))
                        hashes = np.concatenate((hashes, np.empty(cap - hashes.shape[0], np.uint64)))
                        counts = np.concatenate((counts, np.empty(cap - counts.shape[0], np.int64)))
                    break
                if hashes[u] == h and lens[u] == L and same_run(buf, starts[u], buf, a, L):
                    counts[u] += 1
                    break
                slot = (slot + 1) & mask
        lines += 1
        i += 1
    return starts[:U].copy(), lens[:U].copy(), counts[:U].copy(), lines


def _vocab_fast(part: TextPart):
    """(words, counts, lines) of an uncompressed partition by :func:`_vocab_kernel`; None when the
    text needs the Python path (a NUL byte, bytes that are not UTF-8, whitespace that
    ``bytes.split`` does not know), which then gives the same words or the located error."""
    blob = _part_bytes(part)
    if blob is None or not _plain(blob):
        return None
    starts, lens, counts, lines = _vocab_kernel(np.frombuffer(blob, np.uint8))
    words = [blob[s:s + n].decode("utf-8") for s, n in zip(starts.tolist(), lens.tolist())]
    return words, counts, lines


def vocab_part(part: TextPart) -> dict:
    """Task: the words of a partition (joined by newlines; a word holds no whitespace) and their
    counts (int64), ``<s>`` and ``</s>`` once per sentence (the unigram counts
    :func:`~fsmlearn.lm.counts.count_ngrams` gives), words in order of first appearance."""
    from collections import Counter
    fast = _vocab_fast(part)
    if fast is not None:
        words, counts, n = fast
        c = dict(zip(words, counts.tolist()))
        for w in (BOS, EOS):
            c[w] = c.get(w, 0) + n
        return "\n".join(c), np.fromiter(c.values(), np.int64, len(c))
    c = Counter()
    n = 0
    for line in part_lines(part):
        c.update(line.split() if isinstance(line, str) else line)
        n += 1
    for w in (BOS, EOS):
        c[w] += n
    # one string and one array, not a dict of a word per entry: Dask moves and sizes those
    # element by element, which took seconds per partition
    return "\n".join(c), np.fromiter(c.values(), np.int64, len(c))


class Words(str):
    """A vocabulary as it travels to the workers: its words joined by newlines (one string: Dask
    moves and sizes a dict or list element by element, seconds for a large vocabulary), with
    the word-to-id table built once per worker process."""

    def ids(self) -> dict:
        return _ids_of(str(self))

    def list(self) -> list:
        return str(self).split("\n")


@functools.lru_cache(maxsize=2)
def _ids_of(joined: str) -> dict:
    return {w: i for i, w in enumerate(joined.split("\n"))}


#: whitespace that ``str.split`` splits at and ``bytes.split`` does not: a text holding any takes
#: the Python tokeniser, so that both paths cut the same tokens
_UNICODE_SPACE = re.compile("[\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")


_ASCII_SPACE = re.compile(b"[\x1c-\x1f]")


def _plain(blob: bytes) -> bool:
    """Whether text can take the byte tokeniser: no NUL, UTF-8, and no whitespace that
    ``str.split`` splits at and ``bytes.split`` does not (ASCII text needs one search for the
    four ASCII ones; other text is decoded and searched)."""
    if b"\0" in blob:
        return False
    if blob.isascii():
        return _ASCII_SPACE.search(blob) is None
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _UNICODE_SPACE.search(text) is None


@functools.lru_cache(maxsize=2)
def _byte_vocab(joined: str):
    from ..vocab import ByteVocab
    return ByteVocab(joined.split("\n"))


def _part_bytes(part: TextPart):
    """The bytes of the lines that start in an uncompressed partition (``part_lines``'s lines,
    newlines kept), or None for other partitions."""
    if part.lines is not None or part.end < 0:
        return None
    with open(part.path, "rb") as f:
        start = part.start
        if start > 0:
            f.seek(start - 1)
            if f.read(1) != b"\n":
                start += len(f.readline())
        end = max(part.end, start)
        f.seek(end - 1 if end > 0 else 0)
        tail = f.readline() if end > 0 else b""       # the rest of the line holding byte end - 1
        stop = (end - 1 + len(tail)) if end > 0 else 0
        if stop <= start:
            return b""
        f.seek(start)
        return f.read(stop - start)


@nb.njit(cache=True)
def _pad(ptr, ids, bos, eos):
    """Sentences ``ids[ptr[s]:ptr[s + 1]]`` laid end to end as ``<s> ... </s>``; their starts."""
    S = ptr.shape[0] - 1
    out = np.empty(ids.shape[0] + 2 * S, np.int32)
    starts = np.empty(S + 1, np.int64)
    j = 0
    for s in range(S):
        starts[s] = j
        out[j] = bos
        j += 1
        for i in range(ptr[s], ptr[s + 1]):
            out[j] = ids[i]
            j += 1
        out[j] = eos
        j += 1
    starts[S] = j
    return out, starts


def _count_fast(part: TextPart, order: int, words):
    """(local words as global ids, [(rows, counts)] for orders 2..N in local ids) of an
    uncompressed partition tokenised in numba with the global vocabulary's byte hash; None
    when the text needs the Python path (a NUL byte, bytes that are not UTF-8, whitespace
    ``bytes.split`` does not know, a token outside the vocabulary): that path then gives the
    same counts or the located error."""
    blob = _part_bytes(part)
    if blob is None or not _plain(blob):
        return None
    bv = _byte_vocab(str(words))
    ptr, ids, oov = bv.encode(blob, -1)
    if oov.any():
        return None
    ids_w = words.ids()
    # local ids (the partition's words, <s> and </s>): few enough for the packed keys
    uniq = np.union1d(np.unique(ids), np.array([ids_w[BOS], ids_w[EOS]], np.int32))
    from ..counts import key_bits
    if uniq.size > (1 << key_bits(order)):
        return None                     # the Python path says the vocabulary is too large
    lut = np.empty(len(ids_w), np.int32)
    lut[uniq] = np.arange(uniq.size, dtype=np.int32)
    local = lut[ids]
    bos, eos = int(np.searchsorted(uniq, ids_w[BOS])), int(np.searchsorted(uniq, ids_w[EOS]))
    # chunks of about 5M tokens, cut between sentences (count_ngrams' chunk size)
    S = ptr.size - 1
    cuts = np.unique(np.concatenate([[0], np.searchsorted(ptr, np.arange(5_000_000, ids.size, 5_000_000)), [S]]))

    def chunks():
        for a, b in zip(cuts[:-1], cuts[1:]):
            yield _pad(ptr[a:b + 1] - ptr[a], local[ptr[a]:ptr[b]], bos, eos)

    return uniq.astype(np.int32), _count_hashed(chunks(), order)


@nb.njit(cache=True)
def _count_pairs(hi, lo, table, mask):
    """The distinct (hi, lo) keys in order of first appearance and how often each occurs, by an
    open-addressing table of int32 group ids (-1 free; reset here, so one table serves many
    calls); (first int64 [G], counts int64 [G])."""
    n = hi.shape[0]
    table[:] = -1
    first = np.empty(n, np.int64)
    counts = np.empty(n, np.int64)
    G = 0
    for i in range(n):
        h, l = hi[i], lo[i]
        s = np.int64(hash64(h ^ hash64(l)) & np.uint64(mask))
        while True:
            g = table[s]
            if g < 0:
                table[s] = G
                first[G] = i
                counts[G] = 1
                G += 1
                break
            f = first[g]
            if hi[f] == h and lo[f] == l:
                counts[g] += 1
                break
            s = (s + 1) & mask
    return first[:G], counts[:G]


def _count_hashed(chunks, order: int) -> list:
    """[(rows int32 [M_k, k], counts int64 [M_k]) for k = 2..N] of padded token chunks, n-grams
    in no particular order (grouped by hashing, not sorted: the partitions sort them)."""
    from ..counts import _unpack, _windows, key_bits
    bits = key_bits(order)
    acc = {k: [] for k in range(2, order + 1)}
    table = np.empty(0, np.int32)
    for tokens, starts in chunks:
        for k in range(2, order + 1):
            hi = np.empty(tokens.size, np.uint64)
            lo = np.empty(tokens.size, np.uint64)
            n = _windows(tokens, starts, k, bits, hi, lo)
            hi, lo = hi[:n], lo[:n]
            cap = table_capacity(n)
            if table.size < cap:        # one table for every order and chunk, grown when needed
                table = np.empty(cap, np.int32)
            first, cnt = _count_pairs(hi, lo, table[:cap], cap - 1)
            acc[k].append((_unpack(hi[first], lo[first], k, bits), cnt))
    out = []
    for k in range(2, order + 1):
        if len(acc[k]) == 1:
            out.append(acc[k][0])
        elif acc[k]:
            out.append(unique_sum(np.concatenate([r for r, _ in acc[k]]), np.concatenate([c for _, c in acc[k]])))
        else:
            out.append((np.zeros((0, k), np.int32), np.zeros(0, np.int64)))
    return out


def count_route(part: TextPart, order: int, wid, bounds, key: int):
    """Task: a partition counted (in its own word ids, few enough for the packed keys whatever
    the whole vocabulary's size), put in global ids and split into the ranges ``bounds`` of its
    ``key`` word: :func:`count_part` and :func:`route` in one task, so that the cluster holds
    the partition's n-grams once."""
    fast = _count_fast(part, order, wid) if isinstance(wid, Words) else None
    if fast is not None:
        trans, orders = fast
        return route(orders, trans, bounds, key)
    words, _, orders = count_part(part, order)
    wid = wid.ids() if isinstance(wid, Words) else wid
    trans = np.array([wid[w] for w in words], np.int32)
    return route(orders, trans, bounds, key)


#: Web1T numbers its files with four digits
WEB1T_FILES = 9999


def count_parts(runner, parts, order: int, key: int, ranges: int | None = None, most: int | None = None,
                divided: bool = False):
    """The vocabulary of every partition (one pass), then every partition counted and routed by
    its ``key`` word (a second pass over the text).

    Returns:
        (vocab, range bounds, routed futures: per partition, per range, per order (rows, counts)).
    """
    heads = [runner.submit(vocab_part, p) for p in parts]
    runner.wait(heads, "reading the vocabulary", "partitions")
    total: dict = {}
    for joined, cnt in runner.gather(heads):
        for w, c in zip(joined.split("\n"), cnt.tolist()):
            total[w] = total.get(w, 0) + c
    vocab = GlobalVocab(total)
    bounds = vocab.bounds(min(ranges_for(runner, vocab, order, ranges, divided), most or 1 << 62))
    wid = runner.share(Words("\n".join(vocab.words)))
    routed = [runner.submit(count_route, p, order, wid, bounds, key) for p in parts]
    runner.wait(routed, "counting", "partitions")
    return vocab, bounds, runner.checkpoint(routed)


#: rows of a last-word range the estimation aims at (the 30M- and 200M-token runs of
#: docs/bench-scale.md were fastest with ranges of this size, not with the largest that fit)
RANGE_ROWS = 4_000_000


def ranges_for(runner, vocab: GlobalVocab, order: int, ranges: int | None, divided: bool = False) -> int:
    """The number of merge ranges: ``ranges``, or enough that one range's n-grams fit a task.

    ``divided`` (the estimation, whose ranges of frequent last words are divided later,
    :mod:`~fsmlearn.lm.scale.layout`): about :data:`RANGE_ROWS` rows a range when the n-grams
    spread evenly (a counting task has at most one n-gram of each order per token), fewer
    if a task's budget at :data:`~fsmlearn.lm.scale.kn.ROW_BYTES` a row asks for it: the
    passes' hash tables then stay near the processor's caches.  Otherwise (Web1T files, never
    divided): about ``3 x`` the tokens per order, 4 bytes a word and 8 a count, fill a tenth
    of a task's budget."""
    if ranges:
        return ranges
    tokens = int(vocab.counts.sum())
    if divided:
        from .kn import ROW_BYTES
        rows = tokens * max(1, order - 1)
        return max(4 * runner.slots, -(-rows // RANGE_ROWS), -(-rows * ROW_BYTES // max(1, runner.task_memory)))
    est = tokens * sum(4 * k + 8 for k in range(2, order + 1)) * 3
    return max(2 * runner.slots, -(-est // max(1, runner.task_memory // 10)))


def count_to_web1t(runner, parts, order: int, root, cutoffs=None, keep_bigrams: bool = False,
                   ranges: int | None = None, gzip_files: bool = True) -> list[int]:
    """Text partitions -> a Web1T directory (the distributed twin of ``count_ngrams`` followed by
    ``write_web1t``: the same lines in each order, cut the same way).

    Returns:
        The n-grams written per order.
    """
    from ..web1t import cutoff_list
    cut = cutoff_list(cutoffs, order, keep_bigrams)
    vocab, bounds, routed = count_parts(runner, parts, order, 0, ranges, most=WEB1T_FILES)
    return write_web1t_dist(runner, vocab, routed, bounds.size - 1, order, root, cut, gzip_files)


# --- integer-coded corpora (memory-mapped .npy arrays) -------------------------------------------

def count_ids_part(ptr_path: str, ids_path: str, s0: int, s1: int, trans, bos: int, eos: int, V: int,
                   order: int):
    """Task: sentences ``s0``..``s1`` of an integer-coded corpus (``ptr.npy``, ``ids.npy``, read
    memory-mapped where they lie), counted in global ids (``trans``: corpus id -> global id);
    (unigram counts int64 [V], [(rows, counts) for orders 2..N])."""
    from ..counts import count_token_ids
    ptr = np.load(ptr_path, mmap_mode="r")
    ids = np.load(ids_path, mmap_mode="r")
    a, b = int(ptr[s0]), int(ptr[s1])
    lens = np.diff(np.asarray(ptr[s0:s1 + 1], np.int64))
    S = lens.size
    starts = np.zeros(S + 1, np.int64)
    np.cumsum(lens + 2, out=starts[1:])
    tokens = np.empty(int(starts[-1]), np.int32)
    tokens[starts[:-1]] = bos
    tokens[starts[1:] - 1] = eos
    inner = np.ones(tokens.size, bool)
    inner[starts[:-1]] = False
    inner[starts[1:] - 1] = False
    part = np.asarray(ids[a:b])
    if part.size and (int(part.min()) < 0 or int(part.max()) >= trans.size):
        bad = int(part.min()) if int(part.min()) < 0 else int(part.max())
        raise ArgumentError(f"{ids_path}: token id {bad} at position {a + int(np.flatnonzero(part == bad)[0])} is "
                            f"outside the vocabulary of {trans.size} words")
    tokens[inner] = trans[part]
    words = [None] * V              # count_token_ids reads only len(words)
    c = count_token_ids([(tokens, starts)], words, order)
    uni = np.zeros(V, np.int64)
    uni[c.ngrams[0][:, 0]] = c.counts[0]
    return uni, [(c.ngrams[k], c.counts[k]) for k in range(1, order)]


def count_ids_to_web1t(runner, ptr_path, ids_path, corpus_vocab, order: int, root, cutoffs=None,
                       keep_bigrams: bool = False, ranges: int | None = None, tokens_per_part: int | None = None,
                       gzip_files: bool = True) -> list[int]:
    """An integer-coded corpus (each sentence padded with ``<s>``/``</s>``; ids index
    ``corpus_vocab``) -> a Web1T directory, counted by sentence ranges on the workers: the
    twin of :func:`~fsmlearn.lm.counts.count_corpus` + ``write_web1t``.

    Returns:
        The n-grams written per order.
    """
    from ..web1t import cutoff_list
    cut = cutoff_list(cutoffs, order, keep_bigrams)
    ptr_path, ids_path = os.path.abspath(ptr_path), os.path.abspath(ids_path)
    ptr = np.load(ptr_path, mmap_mode="r")
    S = ptr.shape[0] - 1
    N = int(ptr[-1])
    vocab = GlobalVocab({w: 0 for w in corpus_vocab})
    trans = np.array([vocab.id[w] for w in corpus_vocab], np.int32)
    per = tokens_per_part or max(100_000, runner.task_memory // 400)
    cuts = np.unique(np.searchsorted(np.asarray(ptr), np.arange(0, N, per), side="left").clip(0, S))
    bounds_s = [int(x) for x in cuts] + [S]
    bounds_s = sorted(set(bounds_s))
    tf = runner.share(trans)
    counted = [runner.submit(count_ids_part, str(ptr_path), str(ids_path), a, b, tf, vocab.id[BOS], vocab.id[EOS],
                             vocab.size, order) for a, b in zip(bounds_s[:-1], bounds_s[1:]) if b > a]
    runner.wait(counted, "counting", "partitions")
    uni = np.zeros(vocab.size, np.int64)
    for u in runner.gather([runner.piece(c, 0) for c in counted]):
        uni += u
    vocab.counts = uni
    bounds = vocab.bounds(min(ranges_for(runner, vocab, order, ranges), WEB1T_FILES))
    routed = [runner.submit(route, runner.piece(c, 1), None, bounds, 0) for c in counted]
    return write_web1t_dist(runner, vocab, routed, bounds.size - 1, order, root, cut, gzip_files)


# --- Web1T directories as partitions ----------------------------------------------------------

def web1t_parts(root, max_order: int | None = None):
    """(vocab, {order: [files]}) of a Web1T directory: the vocabulary read here (it is checked as
    :func:`~fsmlearn.lm.web1t.read_web1t` checks it), the files left where they lie."""
    from ..web1t import _layout, read_vocab
    root = Path(os.path.abspath(root))
    layout = _layout(root, max_order)
    words, c1 = read_vocab(layout[1][0])
    counts = dict(zip(words, c1.tolist()))
    listed = len(words) + sum(w not in counts for w in (BOS, EOS))         # as read_web1t counts them
    vocab = GlobalVocab(counts)
    vocab.listed = listed
    return vocab, {k: [str(p) for p in v] for k, v in layout.items() if k > 1}


def read_shard(path: str, k: int, words, c1):
    """Task: (rows int32 [M, k] in global ids, counts int64 [M]) of one Web1T file, checked line
    by line (errors name the file and line) and in order within the file (``words``: the
    vocabulary, a :class:`Words`)."""
    from ..web1t import _check_order_and_counts, _count, _lines
    wid = words.ids()
    rows, cnt = [], []
    p = Path(path)
    for ln, line in _lines(p):
        tab = line.find("\t")
        if tab < 0 or line.find("\t", tab + 1) >= 0:
            raise CorpusFormatError(f"expected 'w1 .. w{k}<TAB>count' with one TAB: {line[:200]!r}", p, ln)
        ws = line[:tab].split(" ")
        if len(ws) != k:
            raise CorpusFormatError(f"expected {k} words separated by single spaces: {line[:200]!r}", p, ln)
        try:
            rows.extend([wid[_TO_OURS.get(w, w)] for w in ws])
        except KeyError as e:
            raise CorpusFormatError(f"word {e.args[0]!r} is not in 1gms/vocab: {line[:200]!r}", p, ln) from None
        cnt.append(_count(line[tab + 1:], p, ln, line))
    arr = np.array(rows, np.int32).reshape(-1, k)
    c = np.array(cnt, np.int64)
    # global ids are in the byte order of the words' Web1T spelling: no ranking to compute
    _check_order_and_counts(arr, c, c1, words.list(), k, [(p, 0)], ranked=True)
    return [(arr, c)]


def read_web1t_parts(runner, root, max_order: int | None = None):
    """Every file of a Web1T directory read as a task.

    Returns:
        (vocab, order, {order: [futures of [(rows, counts)]]}).
    """
    vocab, files = web1t_parts(root, max_order)
    order = max(files) if files else 1
    c1 = runner.share(vocab.counts)
    words = runner.share(Words("\n".join(vocab.words)))
    reads = {k: [runner.submit(read_shard, f, k, words, c1) for f in fs] for k, fs in files.items()}
    runner.wait([f for fs in reads.values() for f in fs], "reading Web1T files", "files")
    for k, fs in reads.items():             # each file is in order; so must be the files
        prev = None
        for i, (first, last) in enumerate(runner.gather([runner.submit(_ends, f) for f in fs])):
            if first is None:
                continue
            if prev is not None and first <= prev:
                words = " ".join(_TO_WEB1T.get(vocab.words[w], vocab.words[w]) for w in first)
                why = "listed twice" if first == prev else "out of order (the lines must be in byte order)"
                raise CorpusFormatError(f"{why}: {words!r}", files[k][i], 1)
            prev = last
    return vocab, order, reads


def _ends(pieces):
    """Task: the first and last rows of a file's rows (tuples of ids; None when empty)."""
    rows = pieces[0][0]
    if rows.shape[0] == 0:
        return None, None
    return tuple(int(x) for x in rows[0]), tuple(int(x) for x in rows[-1])


def reweb1t(runner, root, out, max_order: int | None = None, cutoffs=None, keep_bigrams: bool = False,
            ranges: int | None = None, gzip_files: bool = True):
    """A Web1T directory read as partitions, its statistics, and (``out``) written again with
    ``cutoffs``.

    Returns:
        (vocab size, order, per order (n-grams, smallest count), sizes written or None).
    """
    from ..web1t import cutoff_list
    vocab, order, reads = read_web1t_parts(runner, root, max_order)
    stats = runner.gather([runner.submit(_stats, f) for k in sorted(reads) for f in reads[k]])
    per = {1: (vocab.listed, int(vocab.counts[vocab.counts > 0].min(initial=1)))}
    i = 0
    for k in sorted(reads):
        n = sum(s[0] for s in stats[i:i + len(reads[k])])
        m = min((s[1] for s in stats[i:i + len(reads[k])] if s[0]), default=1)
        per[k] = (n, m)
        i += len(reads[k])
    sizes = None
    if out is not None:
        cut = cutoff_list(cutoffs, order, keep_bigrams)
        bounds = vocab.bounds(min(ranges_for(runner, vocab, order, ranges), WEB1T_FILES))
        B = bounds.size - 1
        # one routing task per file: its rows as the only order present, then the orders joined
        routed = []
        for k in range(2, order + 1):
            for f in reads[k]:
                routed.append((k, runner.submit(route, f, None, bounds, 0)))
        sizes = _write_orders(runner, vocab, routed, order, out, cut, B, gzip_files)
    return vocab.listed, order, per, sizes


def _stats(pieces):
    rows, c = pieces[0]
    return int(c.size), int(c.min()) if c.size else 0


def _merge_order(pieces):
    """Task: one range of one order: every file's piece, sorted and summed."""
    rows = np.concatenate([p[0][0] for p in pieces])
    cnt = np.concatenate([p[0][1] for p in pieces])
    return [sum_rows(rows, cnt)]


def _write_orders(runner, vocab, routed, order, root, cut, B, gzip_files):
    """Like :func:`write_web1t_dist` for pieces that each hold one order (Web1T files)."""
    def submit(tmp, wb):
        keys, writes = [], []
        for k in range(2, order + 1):
            mine = [f for kk, f in routed if kk == k]
            for b in range(B):
                merged = runner.submit(_merge_order, [runner.piece(f, b) for f in mine])
                keys.append((k, b))
                writes.append(runner.submit(_write_one, merged, k, b, cut[k - 1], wb, tmp, gzip_files))
        where = {key: i for i, key in enumerate(keys)}
        return writes, lambda got, k, b: got[where[k, b]]
    return _web1t_job(runner, vocab, order, B, root, gzip_files, submit, "merging and writing")


def _write_one(merged, k, b, cut, wb, tmpdir, gzip_files):
    """Task: one order's file of range ``b`` (n-grams counted at least ``cut``)."""
    return _write_file(merged[0][0], merged[0][1], k, b, cut, wb, tmpdir, gzip_files)


def _write_file(rows, cnt, k, b, cut, wb, tmpdir, gzip_files):
    from ..web1t import _render_lines
    wbuf, woff = wb
    ext = ".gz" if gzip_files else ""
    keep = cnt >= cut
    data = _render_lines(rows[keep], cnt[keep], wbuf, woff)
    path = Path(tmpdir) / f"{k}gms" / f"{k}gm-{b:04d}{ext}"
    part = path.with_name(path.name + f".{uuid.uuid4().hex}.part")   # _finish removes any a lost worker left
    with open(part, "wb") as raw:
        if gzip_files:              # no name, no time in the header: a rerun writes the same bytes
            with gzip.GzipFile(filename="", mode="wb", compresslevel=1, fileobj=raw, mtime=0) as f:
                f.write(data.tobytes())
        else:
            raw.write(data.tobytes())
    os.replace(part, path)
    first = data[:int(np.argmax(data == 9))].tobytes().decode("utf-8") if data.size else ""
    return int(keep.sum()), first
