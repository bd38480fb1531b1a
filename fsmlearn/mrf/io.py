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

Public names: save_mrf, load_mrf.
"""

from __future__ import annotations

import json

import numpy as np

from ..errors import ModelFormatError
from ..fsm.atomic import atomic_write
from ..fsm.npz import NpzFile
from ..fsm.strings import pack_strings
from .model import MRFModel

__all__ = ["save_mrf", "load_mrf"]

FORMAT, VERSION = "fsmlearn-mrf", 1
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
