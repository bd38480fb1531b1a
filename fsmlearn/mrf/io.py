"""Saving and loading MRF models (format ``fsmlearn-mrf``, version 1).

A model is an uncompressed ``.npz`` archive written atomically
(:func:`fsmlearn.fsm.atomic.atomic_write`) and read through the checked reader
:class:`fsmlearn.fsm.npz.NpzFile`: a JSON ``meta`` array ``{"format": "fsmlearn-mrf",
"version": 1, "num_states": C, "order": K, "rank": D or null}``, the float64 arrays
``theta0`` [C] and either ``pair`` [K, C, C] (full rank) or ``U`` [C, D] and ``W``
[K, C, D] (low rank, eq. 5), and optionally the state names as ``symbols_blob`` /
``symbols_offsets``.  The loader checks every array's dtype and shape against the metadata
and every value for finiteness, and names the file, the array, the index and the value of
the first fault (:class:`~fsmlearn.errors.ModelFormatError`).

A tagger (:class:`~fsmlearn.mrf.tagger.TaggerMRF`, format ``fsmlearn-mrf-tagger``, version
1) is saved the same way: ``meta`` ``{"num_tags": T, "order": K, "vocab_size": V,
"num_features": F}``, the string tables ``tags``, ``vocab`` and ``features`` (feature names
in column order), and the float64 arrays ``theta0`` [T], ``trans`` [K, T, T] and ``U`` [T, F].
A window tagger (L = |offsets| > 1, section 6's L nearest words) also has ``"offsets"`` in
``meta`` (the window M: L distinct integers, 0 first, each within +-MAX_WINDOW) and the
float64 array ``context_U`` [L - 1, T, F] (U^m of offsets[1:]); an L = 1 tagger is saved
with ``"offsets": [0]`` and no ``context_U``.  A file without ``"offsets"`` (written before
the window existed) reads as L = 1.

Public names: save_mrf, load_mrf, save_tagger, load_tagger.
"""

from __future__ import annotations

import json

import numpy as np

from ..errors import ModelFormatError
from ..fsm.atomic import atomic_write
from ..fsm.npz import NpzFile
from ..fsm.strings import pack_strings
from .model import MRFModel

__all__ = ["save_mrf", "load_mrf", "save_tagger", "load_tagger"]

FORMAT, VERSION = "fsmlearn-mrf", 1
TAGGER_FORMAT = "fsmlearn-mrf-tagger"
_MAX_C, _MAX_K, _MAX_D = 10**7, 64, 10**5


def save_mrf(model: MRFModel, path) -> None:
    """Write ``model`` to ``path`` (``.npz``) atomically: a crash leaves the old file or none."""
    meta = {"format": FORMAT, "version": VERSION, "num_states": model.C, "order": model.K,
            "rank": model.rank}
    arrays = {"theta0": model.theta0}
    if model.pair is not None:
        arrays["pair"] = model.pair
    else:
        arrays["U"], arrays["W"] = model.U, model.W
    if model.symbols is not None:
        arrays["symbols_blob"], arrays["symbols_offsets"] = pack_strings(model.symbols)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    atomic_write(path, lambda f: np.savez(f, **arrays))


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _finite(f: NpzFile, name: str, shape) -> np.ndarray:
    a = f.need(name, np.float64, len(shape))
    if a.shape != tuple(shape):
        raise f.bad(name, f"has shape {a.shape}; expected {tuple(shape)}")
    bad = np.flatnonzero(~np.isfinite(a.ravel()))
    if bad.size:
        i = tuple(int(j) for j in np.unravel_index(int(bad[0]), a.shape))
        raise f.bad(name, f"entry {list(i)} is {float(a[i])!r}; expected a finite potential")
    return a


def _distinct(f: NpzFile, name: str, n: int) -> list:
    xs = f.strings(name)
    if len(xs) != n:
        raise f.bad(name + "_offsets", f"holds {len(xs)} strings; the metadata says {n}")
    seen = set()
    for i, x in enumerate(xs):
        if x in seen:
            raise f.bad(name + "_blob", f"string {i} ({x!r}) repeats an earlier one")
        seen.add(x)
    return xs


def save_tagger(model, path) -> None:
    """Write a :class:`~fsmlearn.mrf.tagger.TaggerMRF` to ``path`` (``.npz``) atomically."""
    feats = sorted(model.features, key=model.features.get)
    meta = {"format": TAGGER_FORMAT, "version": VERSION, "num_tags": len(model.tags), "order": model.K,
            "vocab_size": len(model.vocab), "num_features": len(feats)}
    meta["offsets"] = [int(m) for m in model.offsets]
    arrays = {"theta0": model.theta0, "trans": model.trans, "U": model.U}
    if model.L > 1:
        arrays["context_U"] = model.context_U
    for name, xs in (("tags", model.tags), ("vocab", model.vocab), ("features", feats)):
        arrays[name + "_blob"], arrays[name + "_offsets"] = pack_strings(list(xs))
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    atomic_write(path, lambda f: np.savez(f, **arrays))


def load_tagger(path):
    """Read a tagger written by :func:`save_tagger`.

    Raises:
        ModelFormatError: as :func:`load_mrf` (file, array, index and value named); also
            string tables of the wrong size or with repeats, or a first tag or word that is
            not the separator; window offsets that are not distinct integers in range with 0
            first, or a ``context_U`` of the wrong shape, with a non-finite entry, or present
            in an L = 1 tagger.
    """
    from .tagger import TaggerMRF
    f = NpzFile(path, ModelFormatError, kind="MRF tagger", fmt=TAGGER_FORMAT, version=VERSION)
    meta = f.meta
    sizes = {}
    for key, hi in (("num_tags", 10**5), ("order", _MAX_K), ("vocab_size", _MAX_C), ("num_features", _MAX_C)):
        v = meta.get(key)
        if not (_int(v) and 1 <= v <= hi):
            raise f.fail(f"metadata {key!r} is {v!r}; expected an integer 1..{hi}")
        sizes[key] = v
    T, K, V, Fn = sizes["num_tags"], sizes["order"], sizes["vocab_size"], sizes["num_features"]
    tags, vocab = _distinct(f, "tags", T), _distinct(f, "vocab", V)
    feats = _distinct(f, "features", Fn)
    for name, xs in (("tags", tags), ("vocab", vocab)):
        if xs[0] != "<S>":
            raise f.bad(name + "_blob", f"string 0 is {xs[0]!r}; expected the separator '<S>'")
    offsets = _offsets(f, meta.get("offsets", [0]))
    theta0, trans, U = _finite(f, "theta0", (T,)), _finite(f, "trans", (K, T, T)), _finite(f, "U", (T, Fn))
    L = len(offsets)
    if L > 1:
        context_U = _finite(f, "context_U", (L - 1, T, Fn))
    elif "context_U" in f.arrays:
        raise f.bad("context_U", f"present in an L = 1 tagger (metadata 'offsets' is {offsets})")
    else:
        context_U = None
    return TaggerMRF(tags, vocab, {x: i for i, x in enumerate(feats)}, theta0, trans, U, tuple(offsets),
                     context_U)


def _offsets(f: NpzFile, v) -> list:
    """The metadata's window offsets, checked: a list of 1..MAX_WINDOW distinct integers within
    +-MAX_WINDOW, 0 first."""
    from .tagger import MAX_WINDOW
    want = f"expected a list of 1..{MAX_WINDOW} distinct integers in -{MAX_WINDOW}..{MAX_WINDOW}, 0 first"
    if not (isinstance(v, list) and 1 <= len(v) <= MAX_WINDOW):
        raise f.fail(f"metadata 'offsets' is {v!r}; {want}")
    for i, m in enumerate(v):
        if not (_int(m) and -MAX_WINDOW <= m <= MAX_WINDOW):
            raise f.fail(f"metadata 'offsets' entry {i} is {m!r}; {want}")
        if m in v[:i]:
            raise f.fail(f"metadata 'offsets' entry {i} ({m}) repeats an earlier one; {want}")
    if v[0] != 0:
        raise f.fail(f"metadata 'offsets' entry 0 is {v[0]!r}; {want}")
    return v


def load_mrf(path) -> MRFModel:
    """Read a model written by :func:`save_mrf`.

    Raises:
        ModelFormatError: a missing, truncated or corrupt file, another format or version,
            metadata out of range, a missing array or one of the wrong dtype or shape, a value
            that is not finite (array, index and value named), or state names that are not
            C distinct strings.
    """
    f = NpzFile(path, ModelFormatError, kind="MRF model", fmt=FORMAT, version=VERSION)
    meta = f.meta
    C, K, D = meta.get("num_states"), meta.get("order"), meta.get("rank")
    if not (_int(C) and 1 <= C <= _MAX_C):
        raise f.fail(f"metadata 'num_states' is {C!r}; expected an integer 1..{_MAX_C}")
    if not (_int(K) and 1 <= K <= _MAX_K):
        raise f.fail(f"metadata 'order' is {K!r}; expected an integer 1..{_MAX_K}")
    if not (D is None or (_int(D) and 1 <= D <= _MAX_D)):
        raise f.fail(f"metadata 'rank' is {D!r}; expected null (full rank) or an integer 1..{_MAX_D}")
    want = {"theta0": (C,)}
    if D is None:
        want["pair"] = (K, C, C)
        for extra in ("U", "W"):
            if extra in f.arrays:
                raise f.bad(extra, "present in a full-rank model (metadata 'rank' is null)")
    else:
        want["U"], want["W"] = (C, D), (K, C, D)
        if "pair" in f.arrays:
            raise f.bad("pair", f"present in a low-rank model (metadata 'rank' is {D})")
    got = {}
    for name, shape in want.items():
        a = f.need(name, np.float64, len(shape))
        if a.shape != shape:
            raise f.bad(name, f"has shape {a.shape}; expected {shape} (num_states {C}, order {K}, rank {D})")
        bad = np.flatnonzero(~np.isfinite(a.ravel()))
        if bad.size:
            i = tuple(int(j) for j in np.unravel_index(int(bad[0]), shape))
            raise f.bad(name, f"entry {list(i)} is {float(a[i])!r}; expected a finite potential")
        got[name] = a
    symbols = None
    if "symbols_blob" in f.arrays or "symbols_offsets" in f.arrays:
        symbols = f.strings("symbols")
        if len(symbols) != C:
            raise f.bad("symbols_offsets", f"holds {len(symbols)} names for {C} states")
        if len(set(symbols)) != C:
            seen = set()
            for i, s in enumerate(symbols):
                if s in seen:
                    raise f.bad("symbols_blob", f"name {i} ({s!r}) repeats an earlier one")
                seen.add(s)
    if D is None:
        return MRFModel(got["theta0"], pair=got["pair"], symbols=symbols)
    return MRFModel(got["theta0"], U=got["U"], W=got["W"], symbols=symbols)
