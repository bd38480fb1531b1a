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

Public names: read_web1t, write_web1t.
"""

from __future__ import annotations

import array
import gzip
import os
import re
import shutil
import tempfile
from pathlib import Path

import numba as nb
import numpy as np

from ..errors import CorpusFormatError
from .counts import NGramCounts
from .model import BOS, EOS, UNK
from .vocab import DIGIT_0, NEWLINE, SPACE, TAB

_TO_OURS = {"<S>": BOS, "</S>": EOS, "<UNK>": UNK}
_TO_WEB1T = {BOS: "<S>", EOS: "</S>", UNK: "<UNK>"}
_LINES_PER_FILE = 10_000_000


def _open(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def _order_files(root: Path, k: int) -> list[Path]:
    if k == 1:
        for name in ("vocab.gz", "vocab"):
            p = root / "1gms" / name
            if p.exists():
                return [p]
        return []
    d = root / f"{k}gms"
    if not d.is_dir():
        return []
    pat = re.compile(rf"^{k}gm-\d+(\.gz)?$")
    return sorted(p for p in d.iterdir() if pat.match(p.name))


def read_web1t(root, max_order: int | None = None, progress=None) -> NGramCounts:
    """Read a Web1T-style count directory.

    Args:
        root: the directory (with ``1gms/vocab[.gz]`` and ``Ngms/Ngm-NNNN[.gz]``).
        max_order: read orders up to this one (default: every order present).
        progress: optional callable(str).

    Returns:
        NGramCounts; ``cutoffs`` hold the smallest count seen per order.

    Raises:
        CorpusFormatError: a missing vocabulary, a line without a count, a
            wrong number of words, an unknown word (file and line).
    """
    root = Path(root)
    say = progress or (lambda msg: None)
    files = _order_files(root, 1)
    if not files:
        raise CorpusFormatError("no 1gms/vocab or 1gms/vocab.gz", root)
    vocab, counts1 = [], []
    wid = {}
    with _open(files[0]) as f:
        for ln, line in enumerate(f, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 2 or not parts[1].strip().isdigit():
                raise CorpusFormatError(f"expected 'word<TAB>count': {line.rstrip()[:200]!r}", files[0], ln)
            w = _TO_OURS.get(parts[0], parts[0])
            if w in wid:
                raise CorpusFormatError(f"word {w!r} listed twice", files[0], ln)
            wid[w] = len(vocab)
            vocab.append(w)
            counts1.append(int(parts[1]))
    for w in (BOS, EOS):
        if w not in wid:
            wid[w] = len(vocab)
            vocab.append(w)
            counts1.append(0)
    ngrams = [np.arange(len(vocab), dtype=np.int32)[:, None]]
    cs = [np.asarray(counts1, np.int64)]
    k = 2
    while max_order is None or k <= max_order:
        files = _order_files(root, k)
        if not files:
            break
        rows, cnt = array.array("i"), array.array("q")
        for p in files:
            with _open(p) as f:
                for ln, line in enumerate(f, 1):
                    tab = line.rfind("\t")
                    if tab < 0:
                        raise CorpusFormatError(f"no TAB before the count: {line.rstrip()[:200]!r}", p, ln)
                    words = line[:tab].split(" ")
                    if len(words) != k:
                        raise CorpusFormatError(f"expected {k} words: {line.rstrip()[:200]!r}", p, ln)
                    try:
                        row = [wid[_TO_OURS.get(w, w)] for w in words]
                    except KeyError as e:
                        raise CorpusFormatError(f"word {e.args[0]!r} is not in 1gms/vocab", p, ln) from None
                    c = line[tab + 1:].strip()
                    if not c.isdigit():
                        raise CorpusFormatError(f"bad count {c!r}", p, ln)
                    rows.extend(row)
                    cnt.append(int(c))
            say(f"read {p.name}: {len(cnt):,} {k}-grams so far")
        arr = np.frombuffer(rows, np.int32).reshape(-1, k).copy() if cnt else np.zeros((0, k), np.int32)
        c = np.frombuffer(cnt, np.int64).copy() if cnt else np.zeros(0, np.int64)
        del rows, cnt
        order = np.lexsort(arr.T[::-1])
        ngrams.append(arr[order])
        cs.append(c[order])
        k += 1
    cut = [int(c.min()) if c.size else 1 for c in cs]
    cut[0] = 1
    return NGramCounts(vocab, ngrams, cs, cut)


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
    """
    root = Path(root)
    say = progress or (lambda msg: None)
    N = counts.order
    if cutoffs is None:
        cut = [1] * N
    elif isinstance(cutoffs, (int, np.integer)):
        cut = [1] + [int(cutoffs)] * (N - 1)
    else:
        cut = list(cutoffs) + [list(cutoffs)[-1]] * (N - len(list(cutoffs)))
    cut[0] = 1
    if keep_bigrams and N >= 2:
        cut[1] = 1
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=root.name + ".", suffix=".tmp", dir=root.parent))
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
                if part.size:
                    first = data[:int(np.argmax(data == TAB))].tobytes().decode("utf-8")
                    idx_lines.append(f"{name}\t{first}\n")
                if not order.size:
                    break
            (d / f"{k}gm.idx").write_text("".join(idx_lines), encoding="utf-8")
            written.append(int(keep.sum()))
            say(f"wrote {written[-1]:,} {k}-grams (cutoff {cut[k - 1]})")
        if root.exists():
            old = Path(tempfile.mkdtemp(prefix=root.name + ".", suffix=".old", dir=root.parent))
            os.rename(root, old / "x")
            os.rename(tmp, root)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return written
