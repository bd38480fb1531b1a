"""Saving and loading reified context models: n-gram RCMs (format ``fsmlearn-rcm``, version 1)
and alignment RCMs (format ``fsmlearn-align-rcm``, version 1).

A model is a JSON file (written atomically)::

    {"format": "fsmlearn-rcm", "version": 1, "num_labels": Y, "n": n,
     "outside": w or "-inf", "labels": [names...] or null,
     "theta": [[s_{i-n}, ..., s_{i-1}, y, weight], ...]}

one theta entry per line, each key symbol a label 0..Y-1, -1 (the star) or
-2 (before the sequence; positions before a label only), the last symbol a
label, the weight finite.  The loader checks all of it and names the file,
the line and the offending value.

An alignment RCM (:class:`fsmlearn.rcm.align.AlignRCM`, hashed features) is a
JSON file of the same kind::

    {"format": "fsmlearn-align-rcm", "version": 1, "num_chars": C, "num_phonemes": P,
     "n": n, "max_advance": A, "hash_bits": b, "backoff": false, "edge_bigram": true,
     "chars": [...] or null, "phonemes": [...] or null,
     "theta": [[feature id, weight], ...]}

with the nonzero weights only, one per line, ids 0..2^b - 1 in increasing order.

Public names: save_rcm, load_rcm, save_align_rcm, load_align_rcm.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..errors import ModelFormatError
from ..fsm.atomic import atomic_write
from .model import BOS, STAR, NGramRCM

__all__ = ["save_rcm", "load_rcm", "save_align_rcm", "load_align_rcm"]

FORMAT, VERSION = "fsmlearn-rcm", 1
ALIGN_FORMAT = "fsmlearn-align-rcm"


def save_rcm(model: NGramRCM, path, labels=None) -> None:
    """Write ``model`` (and optional label names) to ``path`` atomically."""
    head = {"format": FORMAT, "version": VERSION, "num_labels": model.num_labels, "n": model.n,
            "outside": model.outside if math.isfinite(model.outside) else "-inf",
            "labels": None if labels is None else [str(x) for x in labels]}
    lines = [json.dumps(head)[:-1] + ', "theta": [']
    items = sorted(model.theta.items())
    for j, (k, w) in enumerate(items):
        lines.append(json.dumps([int(v) for v in k] + [float(w)]) + ("," if j < len(items) - 1 else ""))
    lines.append("]}")
    text = "\n".join(lines) + "\n"
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def _entry_lines(text: str) -> list[int]:
    """The line of each entry of the "theta" list (whatever the layout): a scan of the
    brackets after the key, outside strings."""
    start = text.find('"theta"')
    out: list[int] = []
    if start < 0:
        return out
    depth, in_str, esc, line = 0, False, False, text.count("\n", 0, start) + 1
    for c in text[start + 7:]:
        if c == "\n":
            line += 1
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
            continue
        if c == '"':
            in_str = True
        elif c == "[":
            depth += 1
            if depth == 2:
                out.append(line)
        elif c == "]":
            depth -= 1
            if depth == 0:
                break
    return out


def _read_json(path: Path, fmt: str):
    """The text and parsed JSON of a model file of format ``fmt`` (version checked)."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ModelFormatError(f"cannot read: {e.strerror}", path) from None
    if raw[:1] != b"{" and not raw.lstrip()[:1] == b"{":
        kind = ("a zip or .npz file" if raw[:2] == b"PK" else "a compressed file" if raw[:2] in (b"\x1f\x8b", b"BZ")
                else "binary data" if b"\0" in raw[:1024] else "text that is not a JSON object")
        raise ModelFormatError(f"not a fsmlearn RCM model ({kind}; the models are JSON files written by "
                               f"'fsmlearn rcms train' or the rcms experiments)", path, 1)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelFormatError(f"not UTF-8 (tried utf-8; byte {raw[e.start]:#04x})", path,
                               raw.count(b"\n", 0, e.start) + 1) from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise ModelFormatError(f"not JSON: {e.msg}", path, e.lineno) from None
    except RecursionError:
        raise ModelFormatError("not a fsmlearn RCM (nested too deeply)", path, 1) from None
    if not isinstance(d, dict) or d.get("format") != fmt:
        got = d.get("format") if isinstance(d, dict) else type(d).__name__
        raise ModelFormatError(f"not a fsmlearn RCM (format {got!r}, expected {fmt!r})", path, 1)
    if d.get("version") != VERSION:
        raise ModelFormatError(f"unsupported version {d.get('version')!r} (this fsmlearn reads {VERSION})", path, 1)
    return text, d


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _fields(d: dict, path: Path):
    def field(name, ok, want):
        v = d.get(name)
        good = False
        try:
            good = ok(v)
        except TypeError:
            pass
        if not good:
            raise ModelFormatError(f"field {name!r} is {v!r}; expected {want}", path, 1)
        return v
    return field


def load_rcm(path):
    """Read a model written by :func:`save_rcm`.

    Returns:
        (model, labels or None).

    Raises:
        ModelFormatError: a missing file, invalid UTF-8 or JSON (with its line), another
            format or version, a field of the wrong type or out of range, a theta entry of
            the wrong length, with a symbol out of range or a weight that is not finite
            (with its line and value).
    """
    path = Path(path)
    text, d = _read_json(path, FORMAT)
    field = _fields(d, path)
    Y = field("num_labels", lambda v: _is_int(v) and 1 <= v <= 10**7, "an integer 1..10^7")
    n = field("n", lambda v: _is_int(v) and 0 <= v <= 20, "an integer 0..20")
    outside = field("outside", lambda v: v == "-inf" or (isinstance(v, (int, float)) and not isinstance(v, bool)
                                                          and math.isfinite(v)), "a finite number or \"-inf\"")
    labels = field("labels", lambda v: v is None or (isinstance(v, list) and len(v) == Y
                                                      and all(isinstance(x, str) for x in v)),
                   f"null or a list of {Y} strings")
    entries = field("theta", lambda v: isinstance(v, list), "a list of [symbols..., weight] entries")
    theta = {}
    where = _entry_lines(text)
    for j, e in enumerate(entries):
        line = where[j] if j < len(where) else 1
        bad = None
        if not isinstance(e, list) or len(e) != n + 2:
            bad = f"theta entry {j} is {e!r}; expected {n + 1} symbols and a weight"
        elif not all(_is_int(s) for s in e[:-1]) or not all(BOS <= s < Y for s in e[:-1]) or not 0 <= e[-2] < Y:
            bad = (f"theta entry {j} has symbols {e[:-1]!r}; expected labels 0..{Y - 1}, {STAR} (star) or "
                   f"{BOS} (before the sequence), the last a label")
        elif not isinstance(e[-1], (int, float)) or isinstance(e[-1], bool) or not math.isfinite(e[-1]):
            bad = f"theta entry {j} has weight {e[-1]!r}; expected a finite number"
        if bad:
            raise ModelFormatError(bad, path, line)
        key = tuple(e[:-1])
        if key in theta:
            raise ModelFormatError(f"theta entry {j} repeats the key {list(key)!r}", path, line)
        theta[key] = float(e[-1])
    model = NGramRCM(Y, n, theta, -math.inf if outside == "-inf" else float(outside))
    return model, labels


def save_align_rcm(model, path, chars=None, phonemes=None) -> None:
    """Write an :class:`~fsmlearn.rcm.align.AlignRCM` (its nonzero weights) and optional symbol
    names to ``path`` atomically."""
    head = {"format": ALIGN_FORMAT, "version": VERSION, "num_chars": int(model.num_chars),
            "num_phonemes": int(model.num_phonemes), "n": int(model.n), "max_advance": int(model.max_advance),
            "hash_bits": int(model.hash_bits), "backoff": bool(model.backoff), "edge_bigram": bool(model.edge_bigram),
            "chars": None if chars is None else [str(c) for c in chars],
            "phonemes": None if phonemes is None else [str(p) for p in phonemes]}
    ids = np.flatnonzero(model.theta)
    lines = [json.dumps(head)[:-1] + ', "theta": [']
    for j, f in enumerate(ids):
        lines.append(json.dumps([int(f), float(model.theta[f])]) + ("," if j < ids.size - 1 else ""))
    lines.append("]}")
    text = "\n".join(lines) + "\n"
    atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))


def load_align_rcm(path):
    """Read a model written by :func:`save_align_rcm`.

    Returns:
        (model, chars or None, phonemes or None).

    Raises:
        ModelFormatError: as :func:`load_rcm`; also a feature id out of range, repeated or
            out of order, or a weight that is zero or not finite (with its line and value).
    """
    from .align_model import AlignRCM
    path = Path(path)
    text, d = _read_json(path, ALIGN_FORMAT)
    field = _fields(d, path)
    C = field("num_chars", lambda v: _is_int(v) and 1 <= v <= 10**6, "an integer 1..10^6")
    P = field("num_phonemes", lambda v: _is_int(v) and 1 <= v <= 10**6, "an integer 1..10^6")
    n = field("n", lambda v: _is_int(v) and 0 <= v <= 20, "an integer 0..20")
    A = field("max_advance", lambda v: _is_int(v) and 1 <= v <= 20, "an integer 1..20")
    bits = field("hash_bits", lambda v: _is_int(v) and 4 <= v <= 30, "an integer 4..30")
    backoff = field("backoff", lambda v: isinstance(v, bool), "true or false")
    edge_bigram = field("edge_bigram", lambda v: isinstance(v, bool), "true or false")
    names = {}
    for name, size in (("chars", C), ("phonemes", P)):
        names[name] = field(name, lambda v, k=size: v is None or (isinstance(v, list) and len(v) == k
                                                                  and all(isinstance(x, str) for x in v)),
                            f"null or a list of {size} strings")
    entries = field("theta", lambda v: isinstance(v, list), "a list of [feature id, weight] entries")
    theta = np.zeros(1 << bits)
    where = _entry_lines(text)
    last = -1
    for j, e in enumerate(entries):
        line = where[j] if j < len(where) else 1
        bad = None
        if not isinstance(e, list) or len(e) != 2:
            bad = f"theta entry {j} is {e!r}; expected [feature id, weight]"
        elif not _is_int(e[0]) or not 0 <= e[0] < (1 << bits):
            bad = f"theta entry {j} has feature id {e[0]!r}; expected an integer 0..{(1 << bits) - 1}"
        elif e[0] <= last:
            bad = f"theta entry {j} has feature id {e[0]} after {last}; expected increasing ids"
        elif (not isinstance(e[1], (int, float)) or isinstance(e[1], bool) or not math.isfinite(e[1])
              or e[1] == 0):
            bad = f"theta entry {j} has weight {e[1]!r}; expected a finite nonzero number"
        if bad:
            raise ModelFormatError(bad, path, line)
        theta[e[0]] = float(e[1])
        last = e[0]
    model = AlignRCM(C, P, n=n, max_advance=A, hash_bits=bits, backoff=backoff, edge_bigram=edge_bigram,
                     theta=theta)
    return model, names["chars"], names["phonemes"]
