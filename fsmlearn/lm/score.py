"""Scoring text with a backoff LM: opening a model from either file kind, perplexity.

Public names: load_lm, ARPA_SUFFIXES, perplexity.
"""

from __future__ import annotations

import math

from .arpa import read_arpa
from .mapfile import is_mapped_file
from .compiled import CompiledLM
from .model import compile_lm

__all__ = ["load_lm", "ARPA_SUFFIXES", "perplexity"]

#: file names read as ARPA text (compiled on the fly), unless the file is a compiled LM; anything
#: else is a compiled model
ARPA_SUFFIXES = (".arpa", ".arpa.gz", ".arpa.bz2", ".arpa.xz", ".lm", ".lm.gz")


def load_lm(path, progress=None) -> CompiledLM:
    """A compiled model from a file :meth:`CompiledLM.save` wrote (recognised by its
    first bytes, mapped, whatever its name), else an ARPA file (by its suffix,
    :data:`ARPA_SUFFIXES`; compiled in memory), else a compiled model of the
    previous format (a machine ``.npz``)."""
    p = str(path)
    if not is_mapped_file(p) and p.endswith(ARPA_SUFFIXES):
        return compile_lm(read_arpa(p, progress=progress), progress=progress)
    return CompiledLM.load(p)


def perplexity(model: CompiledLM, lines, batch: int = 100_000) -> dict:
    """Perplexity of sentences (one per string, tokens separated by whitespace).

    Every sentence is scored with ``</s>`` and counts one token more than its
    words; perplexity = 10 ** (-log10 probability / tokens), as KenLM's query
    reports it with ``</s>`` included.

    Args:
        model: the compiled LM.
        lines: an iterable of sentences (str).
        batch: sentences scored per call of :meth:`CompiledLM.score`.

    Returns:
        dict with ``sentences``, ``tokens`` (``</s>`` included), ``oovs``,
        ``log10prob`` and ``perplexity`` (inf for no tokens).
    """
    tot = 0.0
    tokens = sents = oovs = 0
    buf = []

    def flush():
        nonlocal tot, tokens, sents, oovs
        lp, oov = model.score(buf)
        tot += float(lp.sum())
        tokens += sum(len(s.split()) + 1 for s in buf)
        sents += len(buf)
        oovs += int(oov.sum())
        buf.clear()

    for line in lines:
        buf.append(line)
        if len(buf) >= batch:
            flush()
    if buf:
        flush()
    return {"sentences": sents, "tokens": tokens, "oovs": oovs, "log10prob": tot,
            "perplexity": 10 ** (-tot / tokens) if tokens else math.inf}
