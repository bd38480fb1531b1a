"""Saving and loading TRF language models (format ``fsmlearn-trf``, version 1).

A model (:class:`fsmlearn.trf.model.TRF`) is one uncompressed ``.npz`` archive, written
atomically (:func:`fsmlearn.fsm.atomic.atomic_write`: a failed save leaves the old file, or
none, and no temporary file) and read through the checked reader
:class:`fsmlearn.fsm.npz.NpzFile`.  It holds:

- ``meta``: uint8, UTF-8 JSON ``{"format": "fsmlearn-trf", "version": 1, "types": [...],
  "order": n, "vocab_size": V, "n_classes": C, "num_features": d, "m": m, "long": bool,
  "model_meta": {...}}``: the feature types of Table 2 and the n-gram order from which
  :func:`fsmlearn.trf.features.make_templates` re-creates the templates, the sizes, the
  length groups (G = m, or m + 1 with the long-sentence sub-model) and the model's own
  free-form ``meta`` (JSON: tuples come back as lists);
- ``classes``: int32 [V+2], the class of each token, 0..C-1 for the real tokens, C for
  <s> and C+1 for </s>;
- ``keys``: int64 [d], the feature keys, strictly increasing; each key's template id
  (``key >> 56``) is one of the templates' ids, each used slot holds a word id below V+2
  (word slots) or a class id below C+2 (class slots), each unused slot 0;
- ``lam``: float64 [d], lambda, finite;
- ``pi``: float64 [G+1], the length-group probabilities: non-negative, ``pi[0] == 0``,
  summing to 1 within 1e-9;
- ``zeta``: float64 [G+1], the log normaliser ratios: finite, ``zeta[1] == 0``;
- optionally the vocabulary, V distinct strings, as ``vocab_blob`` / ``vocab_offsets``
  (:mod:`fsmlearn.fsm.strings`).

The loader checks all of it, rebuilds the feature set's lookup table from the keys, and
raises :class:`~fsmlearn.errors.ModelFormatError` naming the file, the array (or metadata
field), the entry and the offending value, e.g.
``model.trf.npz: array 'lam' entry 17: nan is not finite``.  The saver runs the same
checks on the model before it writes anything, so it never writes a file the loader
refuses.

Public names: save_trf, load_trf.
"""

from __future__ import annotations

import json

import numpy as np

from ..errors import ArgumentError, ModelError, ModelFormatError
from ..fsm.atomic import atomic_write
from ..fsm.npz import NpzFile
from ..fsm.strings import pack_strings
from .features import (HOLE, ID_BITS, KIND_W, MAX_ID, MAX_SLOTS, TEMPLATE_TYPES, FeatureSet, Templates,
                       _build_table, make_templates, new_table)
from .model import TRF

__all__ = ["save_trf", "load_trf"]

FORMAT, VERSION = "fsmlearn-trf", 1
#: the bit position of a key's template id
_TID_SHIFT = ID_BITS * MAX_SLOTS
_MAX_M = 10**7
_PI_TOL = 1e-9
_ARRAYS = ("meta", "classes", "keys", "lam", "pi", "zeta")
_VOCAB = ("vocab_blob", "vocab_offsets")


# ------------------------------------------------------------------ saving
def _plain(v):
    """numpy scalars as the Python ones (for JSON and the metadata checks)."""
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


def _same_templates(a: Templates, b: Templates) -> bool:
    return (tuple(a.names) == tuple(b.names) and all(
        np.array_equal(getattr(a, k), getattr(b, k)) for k in ("tid", "length", "offset", "kind")))


def _template_order(t: Templates) -> int:
    """The n-gram order with which :func:`make_templates` re-creates ``t``.

    Raises:
        ArgumentError: no order does (templates not made by :func:`make_templates`).
    """
    for order in range(MAX_SLOTS, 0, -1):
        try:
            if _same_templates(make_templates(t.names, order), t):
                return order
        except ArgumentError:
            break
    raise ArgumentError(f"save_trf: the model's templates ({'+'.join(map(str, t.names))}) are not ones "
                        "make_templates creates; they cannot be saved")


def _vocab_strings(vocab, V: int) -> list[str]:
    """``vocab`` as a list of V distinct strings, or ArgumentError."""
    if isinstance(vocab, str):
        raise ArgumentError("save_trf: vocab must be a sequence of V strings, not one string")
    try:
        words = list(vocab)
    except TypeError:
        raise ArgumentError(f"save_trf: vocab must be a sequence of strings, got {type(vocab).__name__}") \
            from None
    if len(words) != V:
        raise ArgumentError(f"save_trf: vocab has {len(words)} entries; the model's vocabulary size is {V}")
    seen: dict[str, int] = {}
    for i, w in enumerate(words):
        if not isinstance(w, str):
            raise ArgumentError(f"save_trf: vocab entry {i} is {w!r}; expected a string")
        if w in seen:
            raise ArgumentError(f"save_trf: vocab entry {i} ({w!r}) repeats entry {seen[w]}")
        seen[w] = i
    return words


def save_trf(model: TRF, path, vocab=None) -> None:
    """Write ``model`` (and optionally its vocabulary) to ``path`` atomically.

    Args:
        model: the :class:`~fsmlearn.trf.model.TRF`; its templates must be ones
            :func:`~fsmlearn.trf.features.make_templates` creates and its ``meta`` a JSON-able
            dict.
        path: the file to write (conventionally ``*.trf.npz``); an existing file is replaced
            only once the new one is complete.
        vocab: None, or V distinct strings: the word of each token id 0..V-1.

    Raises:
        ArgumentError: not a TRF, templates that cannot be re-created, a ``meta`` that is not
            a JSON-able dict, or a vocabulary that is not V distinct strings.
        ModelError: a parameter the loader would refuse (e.g. a lambda that is not finite, pi
            that does not sum to 1, keys out of order); the message names the array, entry
            and value.  Nothing is written.
        OSError: the file could not be written (the old file, if any, is left as it was).
    """
    if not isinstance(model, TRF) or not isinstance(getattr(model, "features", None), FeatureSet):
        raise ArgumentError(f"save_trf: expected a TRF model, got {type(model).__name__}")
    fs = model.features
    order = _template_order(fs.templates)
    if not isinstance(model.meta, dict):
        raise ArgumentError(f"save_trf: model.meta must be a dict, got {type(model.meta).__name__}")
    try:
        model_meta = json.loads(json.dumps(model.meta))
    except (TypeError, ValueError, RecursionError) as e:
        raise ArgumentError(f"save_trf: model.meta is not JSON-serialisable ({e})") from None
    V = _plain(fs.vocab_size)
    meta = {"format": FORMAT, "version": VERSION, "types": list(fs.templates.names), "order": order,
            "vocab_size": V, "n_classes": _plain(fs.n_classes), "num_features": int(len(fs.keys)),
            "m": _plain(model.m), "long": _plain(model.long), "model_meta": model_meta}
    where = f"TRF model (not saved to {path})"

    def fail(msg):
        return ModelError(f"{where}: {msg}")

    arrays = {}
    for name, src, dtype in (("classes", fs.classes, np.int32), ("keys", fs.keys, np.int64),
                             ("lam", model.lam, np.float64), ("pi", model.pi, np.float64),
                             ("zeta", model.zeta, np.float64)):
        try:
            a = np.asarray(src)
            c = np.ascontiguousarray(a, dtype)
        except (TypeError, ValueError, OverflowError) as e:
            raise fail(f"array {name!r}: cannot be stored as {np.dtype(dtype)} ({e})") from None
        if c.dtype.kind in "iu" and not np.array_equal(c, a):
            raise fail(f"array {name!r}: holds values outside {np.dtype(dtype)} (dtype {a.dtype})")
        arrays[name] = c
    words = None if vocab is None else _vocab_strings(vocab, V if isinstance(V, int) else -1)
    _check(meta, arrays, words, fail)          # refuse now what load_trf would refuse
    if words is not None:
        arrays["vocab_blob"], arrays["vocab_offsets"] = pack_strings(words)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    atomic_write(path, lambda f: np.savez(f, **arrays))


# ------------------------------------------------------------------ loading
def load_trf(path):
    """Read a model written by :func:`save_trf`.

    Args:
        path: the ``.npz`` file.

    Returns:
        (model, vocab): the :class:`~fsmlearn.trf.model.TRF` (its feature set's lookup table
        rebuilt) and the list of V words, or None when the file holds no vocabulary.

    Raises:
        ModelFormatError: a missing, truncated or corrupt file, not an npz archive, another
            format or version, a metadata field of the wrong type or out of range, a missing,
            unexpected, mistyped or misshapen array, or a value breaking one of the rules of
            the module docstring; the message names the file, the array or field, the entry
            and the value.
    """
    f = NpzFile(path, ModelFormatError, kind="TRF model", fmt=FORMAT, version=VERSION)
    extra = sorted(set(f.arrays) - set(_ARRAYS) - set(_VOCAB))
    if extra:
        raise f.fail(f"unexpected array {extra[0]!r} (a fsmlearn-trf file holds {', '.join(_ARRAYS)} "
                     "and optionally vocab_blob, vocab_offsets)")
    arrays = {"classes": f.need("classes", np.int32), "keys": f.need("keys", np.int64),
              "lam": f.need("lam", np.float64), "pi": f.need("pi", np.float64),
              "zeta": f.need("zeta", np.float64)}
    words = None
    if any(n in f.arrays for n in _VOCAB):
        words = f.strings("vocab")
    return _check(f.meta, arrays, words, f.fail), words


# ------------------------------------------------------------------ the checks, shared
def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _first(mask: np.ndarray) -> int:
    """The index of the first True in ``mask``, or -1."""
    hit = np.flatnonzero(mask)
    return int(hit[0]) if hit.size else -1


def _check(meta: dict, arrays: dict, words, fail) -> TRF:
    """The TRF of checked metadata and arrays (see the module docstring); ``fail(message)``
    makes the exception to raise (messages start with the field or array at fault)."""
    def field(name, ok, want):
        v = meta.get(name)
        if not ok(v):
            raise fail(f"metadata {name!r} is {v!r}; expected {want}")
        return v

    types = field("types", lambda v: isinstance(v, list) and len(v) > 0 and all(
        isinstance(t, str) and t in TEMPLATE_TYPES for t in v) and len(set(v)) == len(v),
        f"a non-empty list of distinct feature types from {', '.join(TEMPLATE_TYPES)}")
    order = field("order", lambda v: _is_int(v) and 1 <= v <= MAX_SLOTS, f"an integer 1..{MAX_SLOTS}")
    V = field("vocab_size", lambda v: _is_int(v) and 1 <= v <= MAX_ID - 2, f"an integer 1..{MAX_ID - 2}")
    C = field("n_classes", lambda v: _is_int(v) and 1 <= v <= MAX_ID - 2, f"an integer 1..{MAX_ID - 2}")
    d = field("num_features", lambda v: _is_int(v) and v >= 0, "a non-negative integer")
    m = field("m", lambda v: _is_int(v) and 1 <= v <= _MAX_M, f"an integer 1..{_MAX_M}")
    long = field("long", lambda v: isinstance(v, bool), "true or false")
    model_meta = field("model_meta", lambda v: isinstance(v, dict), "a JSON object")
    try:
        templates = make_templates(types, order)
    except ArgumentError as e:
        raise fail(f"metadata 'types' is {types!r}: {e}") from None
    G = m + (1 if long else 0)
    groups = f"m {m} + {int(long)} (long {str(long).lower()}) + 1"
    shapes = {"classes": (V + 2, f"vocab_size {V} + 2"), "keys": (d, f"num_features {d}"),
              "lam": (d, f"num_features {d}"), "pi": (G + 1, groups), "zeta": (G + 1, groups)}
    for name, (n, what) in shapes.items():
        a = arrays[name]
        if a.shape != (n,):
            raise fail(f"array {name!r} has shape {a.shape}; expected ({n},): {what}")

    def entry(name, i, msg):
        return fail(f"array {name!r} entry {i}: {msg}")

    # classes: 0..C-1 for the real tokens, C and C+1 for <s> and </s>
    cls = arrays["classes"]
    i = _first((cls[:V] < 0) | (cls[:V] >= C))
    if i >= 0:
        raise entry("classes", i, f"class {int(cls[i])} is outside 0..{C - 1} (n_classes {C})")
    for i, want, tok in ((V, C, "<s>"), (V + 1, C + 1, "</s>")):
        if cls[i] != want:
            raise entry("classes", i, f"class {int(cls[i])} of {tok}; expected {want} "
                                      f"(n_classes {C}{' + 1' if want > C else ''})")

    # keys: strictly increasing, known template ids, slots in range
    keys = arrays["keys"]
    i = _first(keys[1:] <= keys[:-1])
    if i >= 0:
        raise entry("keys", i + 1, f"{int(keys[i + 1])} is not above entry {i} ({int(keys[i])}); keys "
                                   "must be sorted and distinct")
    row_of = np.full(1 << (63 - _TID_SHIFT), -1, np.int64)
    for r in range(len(templates.tid) - 1, -1, -1):
        row_of[templates.tid[r]] = r
    tid = keys >> _TID_SHIFT
    row = row_of[np.clip(tid, 0, len(row_of) - 1)]
    i = _first((tid < 0) | (row < 0))
    if i >= 0:
        raise entry("keys", i, f"key {int(keys[i])} has template id {int(tid[i])}, not one of the "
                               f"templates' ids {sorted(set(templates.tid.tolist()))}")
    length = templates.length[row]
    for s in range(MAX_SLOTS):
        v = (keys >> (ID_BITS * (MAX_SLOTS - 1 - s))) & HOLE
        used = s < length
        word = templates.kind[row, s] == KIND_W
        limit = np.where(word, V + 2, C + 2)
        i = _first((used & (v >= limit)) | (~used & (v != 0)))
        if i >= 0:
            lab = templates.label[int(row[i])]
            if not used[i]:
                msg = f"unused slot {s} holds {int(v[i])}; expected 0"
            elif word[i]:
                msg = f"slot {s} holds word id {int(v[i])}; expected 0..{V + 1} (vocab_size {V} + <s>, </s>)"
            else:
                msg = f"slot {s} holds class id {int(v[i])}; expected 0..{C + 1} (n_classes {C} + 2)"
            raise entry("keys", i, f"key {int(keys[i])} (template {lab}): {msg}")

    # lambda, pi, zeta
    lam, pi, zeta = arrays["lam"], arrays["pi"], arrays["zeta"]
    for name, a in (("lam", lam), ("pi", pi), ("zeta", zeta)):
        i = _first(~np.isfinite(a))
        if i >= 0:
            raise entry(name, i, f"{float(a[i])!r} is not finite")
    i = _first(pi < 0)
    if i >= 0:
        raise entry("pi", i, f"{float(pi[i])!r} is negative")
    if pi[0] != 0:
        raise entry("pi", 0, f"{float(pi[0])!r}; expected 0 (index 0 is no length group)")
    total = float(pi.sum())
    if abs(total - 1.0) > _PI_TOL:
        raise fail(f"array 'pi': entries sum to {total!r}; expected 1 (within {_PI_TOL})")
    if zeta[1] != 0:
        raise entry("zeta", 1, f"{float(zeta[1])!r}; expected 0 (zeta_1 = ln Z_1 / Z_1)")

    # the vocabulary
    if words is not None:
        if len(words) != V:
            raise fail(f"array 'vocab_offsets': holds {len(words)} words; expected vocab_size {V}")
        seen: dict[str, int] = {}
        for i, w in enumerate(words):
            if w in seen:
                raise entry("vocab_blob", i, f"word {w!r} repeats entry {seen[w]}")
            seen[w] = i

    keys = np.ascontiguousarray(keys, np.int64)
    tk, tv, mask = new_table(len(keys))
    _build_table(keys, tk, tv, mask)
    fs = FeatureSet(templates, V, np.ascontiguousarray(cls, np.int32), C, keys, (tk, tv, mask))
    return TRF(fs, np.ascontiguousarray(lam, np.float64), m, long, np.ascontiguousarray(pi, np.float64),
               np.ascontiguousarray(zeta, np.float64), model_meta)
