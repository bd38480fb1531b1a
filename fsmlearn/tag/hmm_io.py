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
from pathlib import Path

import numpy as np

from ..errors import ModelError, ModelFormatError
from ..fsm.atomic import atomic_write
from ..fsm.npz import NpzFile
from ..fsm.strings import pack_strings, unpack_strings
from .oov_tags import OovTags
from .unknown import SuffixModel

__all__ = ["save_hmm", "load_hmm", "FORMAT", "VERSION"]

FORMAT = "fsmlearn-hmm"
VERSION = 1


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
        ModelFormatError: missing or unreadable file, not a zip, not an
            fsmlearn HMM, another version, a missing array, a wrong shape or
            dtype, NaN or rows that do not sum to one (the message names
            the file and the problem).
    """
    f = NpzFile(path, ModelFormatError, kind="HMM", fmt=FORMAT, version=VERSION)
    path, meta, arrays, need = f.path, f.meta, f.arrays, f.need

    def strings(name):
        return unpack_strings(need(name + "_blob", "u", 1), need(name + "_offsets", "i", 1),
                              error=ModelFormatError, path=path)

    try:
        tags = strings("tags")
        vocab = strings("vocab")
        order = meta.get("order")
        T, V = len(tags), len(vocab)
        if meta.get("num_tags") != T or meta.get("vocab_size") != V:
            raise ModelFormatError(f"metadata says {meta.get('num_tags')} tags and {meta.get('vocab_size')} "
                                   f"words; the file holds {T} and {V}", path)
        unknown = None
        if meta.get("unknown"):
            u = {k: arrays[k] for k in ("unk_class", "unk_ptr", "unk_tag", "unk_count", "unk_scalars",
                                         "unk_p_rare") if k in arrays}
            u["unk_suffix"] = strings("unk_suffix")
            _check_unknown_arrays(u, T, path)
            unknown = SuffixModel.from_arrays(T, u)
        tagdict = None
        if meta.get("tagdict") is not None:
            words = strings("oov")
            mask = need("oov_mask", "b", 2)
            open_mask = need("oov_open", "b", 1)
            if mask.shape != (len(words), T) or open_mask.shape != (T,):
                raise ModelFormatError(f"tag dictionary arrays have shapes {mask.shape} and "
                                       f"{open_mask.shape}; expected {(len(words), T)} and {(T,)}", path)
            tagdict = OovTags(str(meta["tagdict"]), words, mask, open_mask)
        return make(tags, vocab, need("log_trans", "f", 2), need("log_emit", "f", 2), order=order,
                   log_trans3=need("log_trans3", "f", 3) if order == 3 else None, unknown=unknown,
                   tagdict=tagdict)
    except ModelFormatError:
        raise
    except ModelError as e:
        raise ModelFormatError(str(e), path) from None
    except (ValueError, UnicodeDecodeError, TypeError) as e:
        raise ModelFormatError(f"corrupt model arrays: {e}", path) from None


def _check_unknown_arrays(u: dict, T: int, path) -> None:
    spec = {"unk_class": ("i", 1), "unk_ptr": ("i", 1), "unk_tag": ("i", 1), "unk_count": ("f", 1),
            "unk_scalars": ("f", 1), "unk_p_rare": ("f", 1)}
    for k, (kind, ndim) in spec.items():
        if k not in u:
            raise ModelFormatError(f"missing array {k!r} of the unknown-word model", path)
        if u[k].dtype.kind != kind or u[k].ndim != ndim:
            raise ModelFormatError(f"array {k!r} has dtype {u[k].dtype}; expected kind {kind!r}", path)
    n = len(u["unk_suffix"])
    ptr = u["unk_ptr"]
    if u["unk_class"].shape != (n,) or ptr.shape != (n + 1,) or ptr[0] != 0 \
            or np.any(np.diff(ptr) < 0) or ptr[-1] != u["unk_tag"].size or u["unk_tag"].size != u["unk_count"].size:
        raise ModelFormatError("the unknown-word model's suffix arrays do not agree in size", path)
    if u["unk_tag"].size and (u["unk_tag"].min() < 0 or u["unk_tag"].max() >= T):
        raise ModelFormatError("the unknown-word model names a tag out of range", path)
    if u["unk_p_rare"].shape != (T,) or u["unk_scalars"].shape != (2,) \
            or not np.all(np.isfinite(u["unk_p_rare"])) or not np.all(np.isfinite(u["unk_count"])):
        raise ModelFormatError("the unknown-word model's distribution or scalars are malformed", path)
