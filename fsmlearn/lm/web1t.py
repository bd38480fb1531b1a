"""Google Web1T-style n-gram count directories: reader and writer.

Layout (as in LDC2006T13, Web 1T 5-gram)::

    DIR/1gms/vocab[.gz]          word <TAB> count
    DIR/2gms/2gm-0000[.gz] ...   w1 w2 <TAB> count
    ...
    DIR/Ngms/Ngm-NNNN[.gz]

Sentence markers may be written ``<S>``/``</S>`` (Web1T) or ``<s>``/``</s>``
and the unknown word ``<UNK>`` or ``<unk>``; fsmlearn reads both and writes
Web1T's spelling.  The writer sorts n-grams in byte order of their words,
splits files every 10M lines (like Web1T), writes an ``Ngm.idx`` listing each
file's first n-gram, applies per-order count cutoffs and replaces the target
directory only when everything is written.

Public names: read_web1t, read_vocab, write_web1t, cutoff_list, check_output_dir.
"""

from __future__ import annotations

import array
import gzip
import os
import re
import shutil
import tempfile
import zlib
from pathlib import Path

import numba as nb
import numpy as np

from ..errors import ArgumentError, CorpusFormatError
from .counts import NGramCounts
from .vocab import BOS, EOS, UNK
from .vocab import DIGIT_0, NEWLINE, SPACE, TAB

_TO_OURS = {"<S>": BOS, "</S>": EOS, "<UNK>": UNK}
_TO_WEB1T = {BOS: "<S>", EOS: "</S>", UNK: "<UNK>"}
_LINES_PER_FILE = 10_000_000


_ONE_GMS_EXTRA = {"total", "vocab_cs", "vocab_cs.gz", "vocab.idx"}
_ASCII_SPACE = re.compile(r"[ \t\r\n\x0b\x0c]")
_COUNT = re.compile(rb"[0-9]+")


def _open(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _layout(root: Path, max_order: int | None) -> dict:
    """{order: [files]} of a Web1T directory, checked: the vocabulary, orders 2.. without a
    gap, each order's files numbered 0000.. without a gap, no file the layout does not have,
    and each ``Ngm.idx`` listing exactly the order's files."""
    if not root.is_dir():
        raise CorpusFormatError("not a directory (a Web1T count directory holds 1gms/, 2gms/, ...)", root)
    one = root / "1gms"
    if not one.is_dir():
        raise CorpusFormatError("no 1gms/ folder", root)
    vocab = [one / n for n in ("vocab", "vocab.gz") if (one / n).exists()]
    if len(vocab) != 1:
        raise CorpusFormatError("expected exactly one of 1gms/vocab and 1gms/vocab.gz, found "
                                f"{len(vocab)}", one)
    for p in sorted(one.iterdir()):
        if p.name not in _ONE_GMS_EXTRA and p != vocab[0]:
            raise CorpusFormatError(f"unexpected file {p.name!r} in 1gms/ (expected vocab[.gz], "
                                    f"vocab_cs[.gz], total)", one)
    present = sorted(int(m.group(1)) for p in root.iterdir()
                     if p.is_dir() and (m := re.fullmatch(r"(\d+)gms", p.name)))
    orders = list(range(1, len(present) + 1))
    if present != orders:
        missing = min(set(range(1, max(present) + 1)) - set(present))
        raise CorpusFormatError(f"{missing}gms/ is missing but {max(present)}gms/ is present", root)
    files = {1: vocab}
    for k in orders[1:]:
        if max_order is not None and k > max_order:
            break
        d = root / f"{k}gms"
        pat = re.compile(rf"^{k}gm-(\d{{4}})(\.gz)?$")
        numbered = {}
        for p in sorted(d.iterdir()):
            m = pat.match(p.name)
            if m:
                i = int(m.group(1))
                if i in numbered:
                    raise CorpusFormatError(f"{numbered[i].name} and {p.name} are the same file number", d)
                numbered[i] = p
            elif p.name != f"{k}gm.idx":
                raise CorpusFormatError(f"unexpected file {p.name!r} in {k}gms/ (expected "
                                        f"{k}gm-NNNN[.gz] and {k}gm.idx)", d)
        if not numbered:
            raise CorpusFormatError(f"no n-gram files ({k}gm-0000[.gz], ...)", d)
        for i in range(len(numbered)):
            if i not in numbered:
                raise CorpusFormatError(f"{k}gm-{i:04d} is missing (files up to "
                                        f"{k}gm-{max(numbered):04d} are present)", d)
        files[k] = [numbered[i] for i in range(len(numbered))]
        idx = d / f"{k}gm.idx"
        if idx.exists():
            listed = [ln.split(b"\t", 1)[0] for ln in idx.read_bytes().split(b"\n") if ln.strip()]
            names = [p.name.encode() for p in files[k]]
            if listed != names:
                raise CorpusFormatError(f"the index lists {[n.decode('utf-8', 'replace') for n in listed][:5]} "
                                        f"but the folder holds {[n.decode() for n in names][:5]}", idx)
    return files


def _lines(path: Path):
    """(line number, text without its newline) of a count file; invalid UTF-8 and a broken
    compressed stream are named errors."""
    try:
        with _open(path) as f:
            for ln, raw in enumerate(f, 1):
                try:
                    yield ln, raw.rstrip(b"\n").decode("utf-8")
                except UnicodeDecodeError as e:
                    raise CorpusFormatError(f"not UTF-8 text (tried utf-8; byte {raw[e.start]:#04x}): "
                                            f"{raw[:200]!r}", path, ln) from None
    except (OSError, EOFError, zlib.error) as e:
        raise CorpusFormatError(f"cannot decompress or read: {e}", path) from None


def _count(text: str, path, ln, line) -> int:
    c = text.encode()
    if not _COUNT.fullmatch(c) or int(c) < 1:
        raise CorpusFormatError(f"count {text[:40]!r} is not a positive integer: {line[:200]!r}", path, ln)
    if len(c) > 18 and int(c) >= 2**63:
        raise CorpusFormatError(f"count {text[:40]!r} is larger than a 64-bit count can hold: {line[:200]!r}",
                                path, ln)
    return int(c)


def read_vocab(vpath):
    """(words, int64 counts) of a Web1T vocabulary file (``1gms/vocab[.gz]``), in its order, words
    in our spelling (``<s>``, ``</s>``, ``<unk>``).

    Raises:
        CorpusFormatError: a line without one TAB, an empty word or one holding whitespace, a
            word listed twice, a bad count, an empty vocabulary (file and line named).
    """
    vpath = Path(vpath)
    vocab, counts1 = [], []
    wid = {}
    for ln, line in _lines(vpath):
        parts = line.split("\t")
        if len(parts) != 2:
            raise CorpusFormatError(f"expected 'word<TAB>count': {line[:200]!r}", vpath, ln)
        w = _TO_OURS.get(parts[0], parts[0])
        if not w or _ASCII_SPACE.search(w):
            raise CorpusFormatError(f"word {parts[0]!r} is empty or holds whitespace", vpath, ln)
        if w in wid:
            raise CorpusFormatError(f"word {w!r} listed twice", vpath, ln)
        counts1.append(_count(parts[1], vpath, ln, line))
        wid[w] = len(vocab)
        vocab.append(w)
    if not vocab:
        raise CorpusFormatError("the vocabulary is empty", vpath, 1)
    return vocab, np.asarray(counts1, np.int64)


def read_web1t(root, max_order: int | None = None, progress=None) -> NGramCounts:
    """Read a Web1T-style count directory, checking all of it.

    Accepted forms (those of LDC2006T13 and :func:`write_web1t`):

    - ``1gms/vocab`` or ``1gms/vocab.gz`` (one of them), lines ``word<TAB>count``;
      ``1gms/`` may also hold ``total`` and ``vocab_cs[.gz]`` (not read);
    - ``Kgms/Kgm-NNNN[.gz]`` for K = 2, 3, ... without a gap in the orders,
      files numbered from 0000 without a gap, and an optional ``Kgm.idx``
      that lists exactly those files; nothing else in these folders;
    - n-gram lines ``w1 w2 .. wK<TAB>count``, words separated by one space,
      every word listed in the vocabulary, the lines of an order (across
      its files) in strictly increasing byte order of their words (no
      n-gram twice), every n-gram's first K - 1 words listed among the
      (K-1)-grams (its prefix, whose count is at least its own);
    - counts: decimal integers >= 1; an n-gram's count is at most the
      vocabulary's count of each of its words;
    - words: non-empty UTF-8 without ASCII whitespace, each listed once in
      the vocabulary; ``<S>``/``</S>``/``<UNK>`` or ``<s>``/``</s>``/``<unk>``.

    Args:
        root: the directory.
        max_order: read orders up to this one (default: every order present).
        progress: optional callable(str).

    Returns:
        NGramCounts; ``<s>`` and ``</s>`` are added with count 0 when the
        vocabulary lacks them; ``cutoffs`` hold the smallest count seen per order.

    Raises:
        CorpusFormatError: naming the file (or folder), the line and the
            offending text: a missing or extra file, a gap in the orders or
            the file numbers, a line without a TAB or a count, a count that is
            not a positive integer or exceeds a word's count, an n-gram of the
            wrong order, a word not in the vocabulary or listed twice there,
            lines out of order, an n-gram whose prefix is not listed, invalid
            UTF-8, a broken compressed file.
    """
    root = Path(root)
    say = progress or (lambda msg: None)
    layout = _layout(root, max_order)
    vpath = layout[1][0]
    vocab, c1 = read_vocab(vpath)
    wid = {w: i for i, w in enumerate(vocab)}
    ngrams = [np.arange(len(vocab), dtype=np.int32)[:, None]]
    cs = [c1]
    for k in sorted(layout)[1:]:
        rows, cnt = array.array("i"), array.array("q")
        where = []           # (file, first row, line of that row) per file
        for p in layout[k]:
            where.append((p, len(cnt)))
            for ln, line in _lines(p):
                tab = line.find("\t")
                if tab < 0 or line.find("\t", tab + 1) >= 0:
                    raise CorpusFormatError(f"expected 'w1 .. w{k}<TAB>count' with one TAB: {line[:200]!r}",
                                            p, ln)
                words = line[:tab].split(" ")
                if len(words) != k:
                    raise CorpusFormatError(f"expected {k} words separated by single spaces: {line[:200]!r}",
                                            p, ln)
                try:
                    rows.extend([wid[_TO_OURS.get(w, w)] for w in words])
                except KeyError as e:
                    raise CorpusFormatError(f"word {e.args[0]!r} is not in {vpath.parent.name}/{vpath.name}: "
                                            f"{line[:200]!r}", p, ln) from None
                cnt.append(_count(line[tab + 1:], p, ln, line))
            say(f"read {p.name}: {len(cnt):,} {k}-grams so far")
        arr = np.frombuffer(rows, np.int32).reshape(-1, k).copy() if cnt else np.zeros((0, k), np.int32)
        c = np.frombuffer(cnt, np.int64).copy() if cnt else np.zeros(0, np.int64)
        del rows, cnt
        _check_order_and_counts(arr, c, c1, vocab, k, where)
        order = np.lexsort(arr.T[::-1])
        if k > 2:
            bad = _first_missing_prefix(arr[order], ngrams[-1])
            if bad >= 0:
                i = int(order[bad])
                prefix = " ".join(_TO_WEB1T.get(vocab[w], vocab[w]) for w in arr[i, :-1])
                held = layout[k - 1]
                files = ", ".join(f"{q.parent.name}/{q.name}" for q in held[:2]) + (", ..." if len(held) > 2 else "")
                raise _locate(arr, i, where, vocab, f"{k}-gram without its prefix {prefix!r} among the "
                                                    f"{k - 1}-grams ({files}; a prefix's count is at least the "
                                                    f"n-gram's)")
        ngrams.append(arr[order])
        cs.append(c[order])
    for w in (BOS, EOS):
        if w not in wid:
            wid[w] = len(vocab)
            vocab.append(w)
            ngrams[0] = np.arange(len(vocab), dtype=np.int32)[:, None]
            cs[0] = np.append(cs[0], 0)
    cut = [int(c.min()) if c.size else 1 for c in cs]
    cut[0] = 1
    return NGramCounts(vocab, ngrams, cs, cut)


def _locate(arr, i, where, vocab, reason) -> CorpusFormatError:
    """The error for row ``i`` of an order's rows as read (``where``: (file, first row) per file)."""
    f = max(j for j in range(len(where)) if where[j][1] <= i)
    p, first = where[f]
    # line numbers count the file's lines; row i is line i - first + 1
    words = " ".join(_TO_WEB1T.get(vocab[w], vocab[w]) for w in arr[i])
    return CorpusFormatError(f"{reason}: {words!r}", p, int(i - first + 1))


@nb.njit(cache=True)
def _first_missing_prefix(rows, prev):
    """The first of ``rows`` (int32 [M, k], sorted lexicographically) whose first k - 1 words
    are not a row of ``prev`` (int32 [P, k - 1], sorted the same way), or -1."""
    j = 0
    P, k1 = prev.shape
    for i in range(rows.shape[0]):
        while j < P:
            c = 0
            for t in range(k1):
                if prev[j, t] != rows[i, t]:
                    c = -1 if prev[j, t] < rows[i, t] else 1
                    break
            if c < 0:
                j += 1
            else:
                break
        if j == P:
            return i
        for t in range(k1):
            if prev[j, t] != rows[i, t]:
                return i
    return -1


def _check_order_and_counts(arr, c, c1, vocab, k, where, ranked: bool = False) -> None:
    """Rows in strictly increasing byte order of their words, counts at most each word's
    (``ranked``: the word ids are already in byte order of the words' Web1T spelling)."""
    def locate(i, reason):
        return _locate(arr, i, where, vocab, reason)
    if arr.shape[0] == 0:
        return
    too_big = c > c1[arr].min(axis=1)
    if too_big.any():
        i = int(np.argmax(too_big))
        raise locate(i, f"count {int(c[i])} exceeds the vocabulary's count of one of its words")
    if ranked:
        r = arr
    else:
        enc = [_TO_WEB1T.get(w, w).encode("utf-8") for w in vocab]
        rank = np.empty(len(enc), np.int64)
        rank[sorted(range(len(enc)), key=enc.__getitem__)] = np.arange(len(enc))
        r = rank[arr]
    undecided = np.ones(r.shape[0] - 1, bool)
    bad = np.zeros(r.shape[0] - 1, bool)
    for j in range(k):
        a, b = r[:-1, j], r[1:, j]
        bad |= undecided & (a > b)
        undecided &= a == b
    if bad.any() or undecided.any():
        i = int(np.argmax(bad | undecided)) + 1
        reason = "listed twice" if undecided[i - 1] else "out of order (the lines must be in byte order)"
        raise locate(i, reason)


@nb.njit(cache=True)
def _render_lines(rows, cnt, wbuf, woff):
    """Bytes of "w1 w2 ... wk<TAB>count<NEWLINE>" lines."""
    n, k = rows.shape
    size = 0
    for i in range(n):
        for j in range(k):
            w = rows[i, j]
            size += woff[w + 1] - woff[w] + 1
        size += 21
    out = np.empty(size, np.uint8)
    digits = np.empty(20, np.uint8)
    p = 0
    for i in range(n):
        for j in range(k):
            w = rows[i, j]
            for q in range(woff[w], woff[w + 1]):
                out[p] = wbuf[q]
                p += 1
            out[p] = SPACE if j < k - 1 else TAB
            p += 1
        c = cnt[i]
        nd = 0
        while True:
            digits[nd] = DIGIT_0 + c % 10
            nd += 1
            c //= 10
            if c == 0:
                break
        for q in range(nd - 1, -1, -1):
            out[p] = digits[q]
            p += 1
        out[p] = NEWLINE
        p += 1
    return out[:p]


_GMS = re.compile(r"^[1-9][0-9]*gms$")


def check_output_dir(root) -> None:
    """Refuse an output path whose replacement would destroy something that is not a count
    directory: the new directory takes the place of ``root`` as a whole, so ``root`` must not
    exist, or be a Web1T directory (only ``Ngms/`` folders, ``1gms/vocab[.gz]`` among them,
    as this writer leaves it), and must not hold the current working directory.

    Raises:
        ArgumentError: naming ``root`` and what is there.
    """
    root = Path(root)
    if not os.path.lexists(root):
        return
    if not root.is_dir():
        raise ArgumentError(f"{root}: exists and is not a count directory (a file); the output must be a new "
                            "path or an earlier Web1T output, which is replaced")
    here = Path.cwd().resolve()
    full = root.resolve()
    if here == full or full in here.parents:
        raise ArgumentError(f"{root}: is or holds the current directory; write the counts elsewhere")
    entries = sorted(p.name for p in root.iterdir())
    if not entries:
        return
    web1t = all(_GMS.match(n) and (root / n).is_dir() for n in entries) and "1gms" in entries and \
        any((root / "1gms" / v).exists() for v in ("vocab", "vocab.gz"))
    if not web1t:
        shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
        raise ArgumentError(f"{root}: exists and is not a Web1T count directory (it holds {shown}); the "
                            "output must be a new path or an earlier Web1T output, which is replaced")


def new_output_folder(root) -> Path:
    """A new empty folder beside ``root`` (checked by :func:`check_output_dir`; its parents made)
    that will take ``root``'s place by :func:`_replace_dir`, with an ordinary folder's mode."""
    root = Path(root)
    check_output_dir(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=root.name + ".", suffix=".tmp", dir=root.parent))
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o777 & ~mask)          # mkdtemp's 0700 would make the counts private
    return tmp


def _replace_dir(new: Path, root: Path) -> None:
    """Put folder ``new`` in the place of ``root``: one atomic exchange where the system has
    it (Linux renameat2 RENAME_EXCHANGE), else the old folder moved aside and moved back
    if the second rename fails."""
    if not root.exists():
        os.rename(new, root)
        return
    if _exchange(new, root):
        shutil.rmtree(new, ignore_errors=True)     # ``new`` now holds the old folder
        return
    old = Path(tempfile.mkdtemp(prefix=root.name + ".", suffix=".old", dir=root.parent))
    os.rename(root, old / "x")
    try:
        os.rename(new, root)
    except BaseException:
        os.rename(old / "x", root)
        shutil.rmtree(old, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically with renameat2(RENAME_EXCHANGE); False where unsupported."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    return fn(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0


def cutoff_list(cutoffs, order: int, keep_bigrams: bool = False) -> list[int]:
    """The minimum count of each order 1..``order`` that :func:`write_web1t` applies.

    Args:
        cutoffs: None (keep everything), an int for orders >= 2, or a list from the
            1-grams (its last value repeated for the higher orders); 1-grams are never cut.
        order: the highest order.
        keep_bigrams: keep every 2-gram (cutoff 1).

    Raises:
        ArgumentError: cutoffs that fall with the order from the 2-grams on: an n-gram's
            prefix has at least its count, so such cutoffs would keep n-grams whose prefix
            they drop (which :func:`read_web1t` refuses).
    """
    if cutoffs is None:
        cut = [1] * order
    elif isinstance(cutoffs, (int, np.integer)):
        cut = [1] + [int(cutoffs)] * (order - 1)
    else:
        cutoffs = [int(c) for c in cutoffs]
        cut = (cutoffs + [cutoffs[-1]] * (order - len(cutoffs)))[:order]
    cut[0] = 1
    if keep_bigrams and order >= 2:
        cut[1] = 1
    for k in range(2, len(cut)):
        if cut[k] < cut[k - 1]:
            raise ArgumentError(f"cutoffs {' '.join(map(str, cut))}: the {k + 1}-gram cutoff {cut[k]} is below the "
                                f"{k}-gram cutoff {cut[k - 1]}, which would keep {k + 1}-grams whose prefix is "
                                f"dropped; cutoffs must not fall with the order")
    return cut


def write_web1t(counts: NGramCounts, root, cutoffs=None, keep_bigrams: bool = False,
                gzip_files: bool = True, progress=None) -> list[int]:
    """Write counts as a Web1T-style directory, replacing ``root`` atomically.

    Args:
        counts: the counts.
        root: the output directory.
        cutoffs: minimum count per order (int for orders >= 2, or a list);
            unigrams are all written.
        keep_bigrams: write every 2-gram whatever the cutoff.
        gzip_files: compress the files.
        progress: optional callable(str).

    Returns:
        The number of n-grams written per order.

    Raises:
        ArgumentError: cutoffs that fall with the order (:func:`cutoff_list`), an output
            path that is neither new nor a Web1T directory (:func:`check_output_dir`).
    """
    root = Path(root)
    say = progress or (lambda msg: None)
    N = counts.order
    cut = cutoff_list(cutoffs, N, keep_bigrams)
    tmp = new_output_folder(root)
    names = [_TO_WEB1T.get(w, w) for w in counts.vocab]
    ext = ".gz" if gzip_files else ""
    opener = (lambda p: gzip.open(p, "wb", compresslevel=1)) if gzip_files else (lambda p: open(p, "wb"))
    written = []
    try:
        (tmp / "1gms").mkdir()
        c1 = counts.counts[0]
        w1 = counts.ngrams[0][:, 0]
        order1 = np.lexsort((np.array([names[w] for w in w1], dtype=object).astype(str), -c1))
        with opener(tmp / "1gms" / f"vocab{ext}") as f:
            f.write("".join(f"{names[w1[i]]}\t{c1[i]}\n" for i in order1 if c1[i] > 0).encode("utf-8"))
        (tmp / "1gms" / "total").write_text(f"{int(counts.total_tokens())}\n")
        written.append(int(np.count_nonzero(c1 > 0)))
        # byte order of "w1 w2 ..." = lexicographic order of the words' byte ranks
        # (no word holds a byte below the space)
        enc = [w.encode("utf-8") for w in names]
        rank = np.empty(len(enc), np.int64)
        rank[sorted(range(len(enc)), key=enc.__getitem__)] = np.arange(len(enc))
        wbuf = np.frombuffer(b"".join(enc), np.uint8)
        woff = np.zeros(len(enc) + 1, np.int64)
        np.cumsum([len(b) for b in enc], out=woff[1:])
        for k in range(2, N + 1):
            d = tmp / f"{k}gms"
            d.mkdir()
            keep = counts.counts[k - 1] >= cut[k - 1]
            rows = counts.ngrams[k - 1][keep]
            cnt = counts.counts[k - 1][keep]
            order = np.lexsort(rank[rows].T[::-1]) if rows.shape[0] else np.zeros(0, np.int64)
            idx_lines = []
            for fi, start in enumerate(range(0, max(order.size, 1), _LINES_PER_FILE)):
                part = order[start:start + _LINES_PER_FILE]
                name = f"{k}gm-{fi:04d}{ext}"
                data = _render_lines(rows[part], cnt[part], wbuf, woff)
                with opener(d / name) as f:
                    f.write(data.tobytes())
                first = data[:int(np.argmax(data == TAB))].tobytes().decode("utf-8") if part.size else ""
                idx_lines.append(f"{name}\t{first}\n")        # an empty order's one empty file too
                if not order.size:
                    break
            (d / f"{k}gm.idx").write_text("".join(idx_lines), encoding="utf-8")
            written.append(int(keep.sum()))
            say(f"wrote {written[-1]:,} {k}-grams (cutoff {cut[k - 1]})")
        _replace_dir(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return written
