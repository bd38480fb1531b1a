"""Scoring text with a backoff LM: opening a model from either file kind, perplexity.

Public names: load_lm, ARPA_SUFFIXES, perplexity.
"""

from __future__ import annotations

import math

from ..errors import ArgumentError
from .mapfile import is_mapped_file
from .compiled import CompiledLM
from .query import score_blocks

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
        from .arpa import read_arpa        # (here: a compiled model's commands need neither)
        from .model import compile_lm
        return compile_lm(read_arpa(p, progress=progress), progress=progress)
    return CompiledLM.load(p)


def perplexity(model: CompiledLM, lines, batch: int = 100_000, threads: int = 1) -> dict:
    """Perplexity of sentences (one per string or bytes, tokens separated by ASCII whitespace),
    with and without OOVs, as KenLM's ``query`` computes them.

    Every sentence is scored with ``</s>`` and counts one token more than its
    words; perplexity = 10 ** (-log10 probability / tokens), and excluding
    OOVs 10 ** (-(log10 probability - the OOV tokens' log10 probabilities) /
    (tokens - OOVs)), KenLM's "Perplexity including OOVs" and "excluding OOVs"
    (:func:`fsmlearn.lm.query.score_blocks`: the same float32 arithmetic, so
    the same figures).

    Args:
        model: the compiled LM (not an epsilon approximation).
        lines: an iterable of sentences (str or UTF-8 bytes; a trailing newline
            is dropped, another newline is an error).
        batch: sentences scored per block.
        threads: as for :meth:`CompiledLM.walk`.

    Returns:
        dict with ``sentences``, ``tokens`` (``</s>`` included), ``oovs``,
        ``log10prob``, ``perplexity`` and ``perplexity_excluding_oovs`` (inf for
        no tokens).

    Raises:
        ArgumentError: a sentence holding a newline, or an epsilon approximation.
    """
    r = score_blocks(model, _line_blocks(lines, batch), threads=threads)
    for k in ("perplexity", "perplexity_excluding_oovs"):
        if math.isnan(r[k]):
            r[k] = math.inf
    return r


def _line_blocks(lines, batch: int):
    buf = []
    for line in lines:
        b = line.encode("utf-8") if isinstance(line, str) else bytes(line)
        if b.endswith(b"\n"):
            b = b[:-1]
        if b"\n" in b:
            raise ArgumentError("a sentence contains a newline; give one sentence per string")
        buf.append(b)
        if len(buf) >= batch:
            yield b"\n".join(buf) + b"\n"
            buf = []
    if buf:
        yield b"\n".join(buf) + b"\n"
