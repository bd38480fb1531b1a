"""Saving and loading HMM taggers (format ``fsmlearn-hmm``, version 1).

A tagger is one uncompressed ``.npz``: its parameter arrays (``log_trans``,
``log_emit``, ``log_trans3`` for order 3), its tags and vocabulary as UTF-8
blobs with offsets (:mod:`fsmlearn.fsm.strings`), the unknown-word model's
arrays, the out-of-vocabulary part of its tag dictionary, and a JSON ``meta``
array (format, version, order, sizes).  Loading validates every array and
raises :class:`~fsmlearn.errors.ModelFormatError` naming the file.

Public names: save_hmm, load_hmm, FORMAT, VERSION.
"""

from __future__ import annotations

import json
import math

import numpy as np

from ..errors import ModelError, ModelFormatError
from ..fsm.atomic import atomic_write
from ..fsm.npz import NpzFile
from ..fsm.strings import pack_strings
from .oov_tags import OovTags
from .unknown import SHAPE_CLASSES, SuffixModel

__all__ = ["save_hmm", "load_hmm", "FORMAT", "VERSION"]

FORMAT = "fsmlearn-hmm"
VERSION = 1
#: the longest suffix a saved unknown-word model may use (letters)
_MAX_SUFFIX = 1000
#: how far a row of probabilities may sum from one (as the model's own check)
_ROW_TOL = 1e-6


def save_hmm(hmm, path) -> None:
    """Save an :class:`~fsmlearn.tag.hmm.HMM` as ``.npz``, atomically.

    The arrays go to a temporary file in the same folder, which is
    flushed, fsync'ed and renamed over ``path``: a crash mid-save leaves
    the old file (and no temporary file).

    Args:
        hmm: the model.
        path: the file name (any suffix).
    """
    meta = {"format": FORMAT, "version": VERSION, "order": hmm.order, "num_tags": hmm.T,
            "vocab_size": hmm.V, "tagdict": hmm.tagdict.name if hmm.tagdict else None,
            "unknown": hmm.unknown is not None}
    arrays = {"log_trans": hmm.log_trans, "log_emit": hmm.log_emit}
    if hmm.order == 3:
        arrays["log_trans3"] = hmm.log_trans3
    for name, strings in (("tags", hmm.tags), ("vocab", hmm.vocab)):
        arrays[name + "_blob"], arrays[name + "_offsets"] = pack_strings(strings)
    if hmm.tagdict is not None:
        arrays["oov_blob"], arrays["oov_offsets"] = pack_strings(hmm.tagdict.words)
        arrays["oov_mask"] = hmm.tagdict.mask
        arrays["oov_open"] = hmm.tagdict.open_mask
    if hmm.unknown is not None:
        u = hmm.unknown.to_arrays()
        arrays["unk_suffix_blob"], arrays["unk_suffix_offsets"] = pack_strings(u.pop("unk_suffix"))
        arrays.update(u)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    atomic_write(path, lambda f: np.savez(f, **arrays))


def load_hmm(path, make):
    """Read a model written by :func:`save_hmm`, validating everything.

    Args:
        path: the file.
        make: the model's constructor, called as ``make(tags, vocab, log_trans,
            log_emit, order=, log_trans3=, unknown=, tagdict=)`` (the
            :class:`~fsmlearn.tag.hmm.HMM` class; it validates the arrays).

    Returns:
        What ``make`` returns.

    Raises:
        ModelFormatError: missing or unreadable file, not a zip, a corrupt or
            truncated member, not an fsmlearn HMM, another version, a missing
            array, a wrong shape or dtype, lengths that disagree (emission
            table and vocabulary, transitions and tags, the unknown-word
            model's arrays), NaN or positive log probabilities, rows that do
            not sum to one, tags out of range (the message names the file,
            the array and the entry at fault).
    """
    f = NpzFile(path, ModelFormatError, kind="HMM", fmt=FORMAT, version=VERSION)
    path, meta = f.path, f.meta
    tags = _unique_strings(f, "tags", "tag")
    vocab = _unique_strings(f, "vocab", "word")
    T, V = len(tags), len(vocab)
    if T < 1:
        raise f.bad("tags_offsets", "holds no tags (a model needs at least one)")
    if meta.get("num_tags") != T or meta.get("vocab_size") != V:
        raise f.fail(f"metadata says {meta.get('num_tags')!r} tags and {meta.get('vocab_size')!r} words; "
                     f"arrays 'tags_blob' and 'vocab_blob' hold {T} and {V}")
    order = meta.get("order")
    if order not in (2, 3) or isinstance(order, bool):
        raise f.fail(f"metadata 'order' is {order!r}; expected 2 or 3")
    log_trans = f.need("log_trans", "f", 2)
    log_emit = f.need("log_emit", "f", 2)
    log_trans3 = f.need("log_trans3", "f", 3) if order == 3 else None
    for name, a, shape, what in (("log_trans", log_trans, (T + 1, T + 1), "T + 1 = {T1} rows and columns"),
                                 ("log_emit", log_emit, (T, V + 1), "T = {T} rows and V + 1 = {V1} columns"),
                                 ("log_trans3", log_trans3, (T + 1,) * 3, "T + 1 = {T1} in each dimension")):
        if a is not None and a.shape != shape:
            raise f.bad(name, f"has shape {a.shape}; expected {shape}: " + what.format(T=T, T1=T + 1, V1=V + 1)
                        + f" for the {T} tags and {V} words of arrays 'tags_blob' and 'vocab_blob'")
    if order == 3:
        bad = np.flatnonzero(log_trans3[:, T, T] != -np.inf)
        if bad.size:
            i = int(bad[0])
            raise f.bad("log_trans3", f"entry [{i}, {T}, {T}] (<s> -> </s>) is {float(log_trans3[i, T, T])!r}; "
                                      "must be -inf")
    unknown = None
    if meta.get("unknown"):
        unknown = SuffixModel.from_arrays(T, _unknown_arrays(f, T))
    tagdict = None
    if meta.get("tagdict") is not None:
        tagdict = _oov_tags(f, str(meta["tagdict"]), T)
    try:
        return make(tags, vocab, log_trans, log_emit, order=order, log_trans3=log_trans3, unknown=unknown,
                    tagdict=tagdict)
    except ModelError as e:      # a value or a row sum: locate it
        raise _value_fault(f, e, {"log_trans": log_trans, "log_emit": log_emit, "log_trans3": log_trans3},
                           T) from None


def _value_fault(f: NpzFile, e: ModelError, arrays: dict, T: int) -> ModelFormatError:
    """The ModelFormatError naming the array and entry that made the model raise ``e``:
    a NaN, +inf or positive log probability, a boundary entry that must be -inf, or
    a row that does not sum to one."""
    arrays = {k: None if a is None else np.asarray(a, dtype=np.float64) for k, a in arrays.items()}
    for name, a in arrays.items():
        if a is None:
            continue
        bad = np.flatnonzero(np.isnan(a) | (a > 1e-9))
        if bad.size:
            idx = [int(x) for x in np.unravel_index(bad[0], a.shape)]
            return f.bad(name, f"entry {idx} is {float(a.flat[bad[0]])!r}, not a log probability")
    if arrays["log_trans"][T, T] != -np.inf:
        return f.bad("log_trans", f"entry [{T}, {T}] (<s> -> </s>) is {float(arrays['log_trans'][T, T])!r}; "
                                  "must be -inf")
    for name, a in arrays.items():
        if a is None:
            continue
        m = np.max(a, axis=-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        with np.errstate(under="ignore"):
            s = np.sum(np.exp(a - m), axis=-1) * np.exp(m[..., 0])
        bad = np.flatnonzero(np.abs(s - 1.0) > _ROW_TOL)
        if bad.size:
            idx = [int(x) for x in np.unravel_index(bad[0], s.shape)]
            return f.bad(name, f"row {idx} sums to {float(s.flat[bad[0]])!r}, not 1")
    return f.fail(str(e))


def _unique_strings(f: NpzFile, name: str, what: str) -> list[str]:
    """The strings ``name`` of an HMM file; a repeated one is an error naming both entries."""
    out = f.strings(name)
    seen: dict[str, int] = {}
    for i, s in enumerate(out):
        j = seen.setdefault(s, i)
        if j != i:
            raise f.bad(name + "_blob", f"{what} {i} ({s!r}) repeats {what} {j}")
    return out


def _unknown_arrays(f: NpzFile, T: int) -> dict:
    """The unknown-word model's arrays (for :meth:`SuffixModel.from_arrays`), every
    size, index and value checked."""
    u = {k: f.need(k, kind, 1) for k, kind in (("unk_class", "i"), ("unk_ptr", "i"), ("unk_tag", "i"),
                                               ("unk_count", "f"), ("unk_scalars", "f"),
                                               ("unk_p_rare", "f"))}
    sufs = f.strings("unk_suffix")
    n = len(sufs)
    cls_, ptr, tag, cnt = u["unk_class"], u["unk_ptr"], u["unk_tag"], u["unk_count"]
    if cls_.size != n:
        raise f.bad("unk_class", f"has {cls_.size} entries for the {n} suffixes of array 'unk_suffix_blob'")
    bad = np.flatnonzero((cls_ < 0) | (cls_ >= len(SHAPE_CLASSES)))
    if bad.size:
        i = int(bad[0])
        raise f.bad("unk_class", f"entry {i} is {int(cls_[i])}, not a shape class (0..{len(SHAPE_CLASSES) - 1})")
    seen: dict = {}
    for i, key in enumerate(zip(cls_.tolist(), sufs)):
        j = seen.setdefault(key, i)
        if j != i:
            raise f.bad("unk_suffix_blob", f"suffix {i} ({key[1]!r}, class {key[0]}) repeats suffix {j}")
    if ptr.size != n + 1:
        raise f.bad("unk_ptr", f"has {ptr.size} entries; expected {n + 1} for the {n} suffixes")
    if ptr[0] != 0:
        raise f.bad("unk_ptr", f"entry 0 is {int(ptr[0])}; must be 0")
    flat = np.flatnonzero(ptr[1:] <= ptr[:-1])
    if flat.size:
        i = int(flat[0]) + 1
        raise f.bad("unk_ptr", f"entry {i} is {int(ptr[i])}, not above entry {i - 1} ({int(ptr[i - 1])}): "
                               f"suffix {i - 1} would have no counts")
    if tag.size != cnt.size:
        raise f.bad("unk_count", f"has {cnt.size} entries; array 'unk_tag' has {tag.size}")
    if ptr[-1] != tag.size:
        raise f.bad("unk_ptr", f"last entry (index {n}) is {int(ptr[-1])}; must be the {tag.size} entries "
                               "of arrays 'unk_tag' and 'unk_count'")
    bad = np.flatnonzero((tag < 0) | (tag >= T))
    if bad.size:
        i = int(bad[0])
        raise f.bad("unk_tag", f"entry {i} is tag {int(tag[i])}, out of range for {T} tags")
    row = np.repeat(np.arange(n), np.diff(ptr))
    order = np.lexsort((tag, row))
    dup = np.flatnonzero((row[order][1:] == row[order][:-1]) & (tag[order][1:] == tag[order][:-1]))
    if dup.size:
        i = int(order[dup[0] + 1])
        raise f.bad("unk_tag", f"entry {i} repeats tag {int(tag[i])} within suffix {int(row[i])}")
    bad = np.flatnonzero(~((cnt > 0) & (cnt < np.inf)))
    if bad.size:
        i = int(bad[0])
        raise f.bad("unk_count", f"entry {i} is {float(cnt[i])!r}; counts must be finite and > 0")
    sc = u["unk_scalars"]
    if sc.size != 2:
        raise f.bad("unk_scalars", f"has {sc.size} entries; expected 2 (theta, max_suffix)")
    theta, max_suffix = float(sc[0]), float(sc[1])
    if not (0 <= theta < math.inf):
        raise f.bad("unk_scalars", f"entry 0 (theta) is {theta!r}; must be finite and >= 0")
    if not (0 <= max_suffix <= _MAX_SUFFIX and max_suffix == int(max_suffix)):
        raise f.bad("unk_scalars", f"entry 1 (max_suffix) is {max_suffix!r}; must be a whole number "
                                   f"0..{_MAX_SUFFIX}")
    p = u["unk_p_rare"]
    if p.size != T:
        raise f.bad("unk_p_rare", f"has {p.size} entries; expected one per tag ({T})")
    bad = np.flatnonzero(~((p >= 0) & (p <= 1)))
    if bad.size:
        i = int(bad[0])
        raise f.bad("unk_p_rare", f"entry {i} is {float(p[i])!r}, not a probability")
    total = float(np.sum(p, dtype=np.float64))
    if not 0 < total <= 1 + 1e-6:
        raise f.bad("unk_p_rare", f"sums to {total!r}; must be a distribution over the tags (in (0, 1])")
    u["unk_suffix"] = sufs
    return u


def _oov_tags(f: NpzFile, name: str, T: int) -> OovTags:
    """The saved part of the tag dictionary, checked (shapes, every word allowed a tag)."""
    words = _unique_strings(f, "oov", "word")
    mask = f.need("oov_mask", "b", 2)
    open_mask = f.need("oov_open", "b", 1)
    if mask.shape != (len(words), T):
        raise f.bad("oov_mask", f"has shape {mask.shape}; expected {(len(words), T)} for the {len(words)} "
                                f"words of array 'oov_blob' and the {T} tags")
    if open_mask.shape != (T,):
        raise f.bad("oov_open", f"has shape {open_mask.shape}; expected {(T,)} for the {T} tags")
    if not open_mask.any():
        raise f.bad("oov_open", "allows no tag (unknown words outside the dictionary could not be tagged)")
    none = np.flatnonzero(~mask.any(axis=1))
    if none.size:
        i = int(none[0])
        raise f.bad("oov_mask", f"row {i} (word {words[i]!r}) allows no tag")
    try:
        return OovTags(name, words, mask, open_mask)
    except ModelError as e:                 # pragma: no cover - checked above
        raise f.fail(str(e)) from None
