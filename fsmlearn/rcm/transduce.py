"""Transductions of the user's own sequence pairs with the latent-alignment RCMS model: the
library side of ``fsmlearn rcms train / decode / eval``.

Steinhardt and Liang (2015), section 6 (speech: phonemes -> characters, alignments unobserved):
an :class:`~fsmlearn.rcm.align.AlignRCM` whose input symbols are the pairs' input tokens (the
paper's phonemes) and whose output symbols are their output tokens (its characters), each
output token covering 1..``max_advance`` input tokens; trained by AdaGrad on the approximate
log-likelihood with one of the paper's strategies (RCMS contexts, beam search selecting by
model, target or hybrid score, forced decoding from imputed alignments;
:func:`~fsmlearn.rcm.align_learn.train`), decoded by the engine's best path over the RCMS or
beam contexts (:func:`~fsmlearn.rcm.align.decode`).

Public names: read_pairs, Alphabet, fit_transducer, transduce, error_rates.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ArgumentError, CorpusFormatError

__all__ = ["read_pairs", "Alphabet", "fit_transducer", "transduce", "error_rates"]


def _split(text: str, chars: bool) -> list[str]:
    return list(text.strip()) if chars else text.split()


def read_pairs(path, chars: bool = False) -> list[tuple[list[str], list[str]]]:
    """Input/output pairs, one a line: ``input<TAB>output``, tokens separated by spaces (or every
    character a token, ``chars``).

    Raises:
        CorpusFormatError: a line without exactly one tab, or with an empty side (file, line).
    """
    from ..data.text import iter_strict_lines, open_text
    try:
        f = open_text(path, "rb")
    except OSError as e:
        raise ArgumentError(f"{path}: cannot read: {e.strerror or e}") from None
    out = []
    with f:
        for ln, line in iter_strict_lines(f, str(path)):
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) != 2:
                raise CorpusFormatError(f"expected input<TAB>output, got {len(parts) - 1} tabs: {line!r}", Path(path), ln)
            x, y = _split(parts[0], chars), _split(parts[1], chars)
            if not x or not y:
                raise CorpusFormatError(f"an empty {'input' if not x else 'output'}: {line!r}", Path(path), ln)
            out.append((x, y))
    if not out:
        raise ArgumentError(f"{path}: no pair in it")
    return out


class Alphabet:
    """Symbols of one side (sorted), with ``<unk>``-free lookup: an unseen input symbol is an
    error the caller names."""

    def __init__(self, symbols):
        self.symbols = list(symbols)
        self.index = {s: i for i, s in enumerate(self.symbols)}

    def ids(self, tokens) -> np.ndarray:
        return np.array([self.index[t] for t in tokens], np.int64)

    def unknown(self, tokens) -> list:
        return [t for t in tokens if t not in self.index]


def fit_transducer(pairs, *, strategy: str = "rcms", size: int = 20, order: int = 4, passes: int = 5,
                   max_advance: int = 2, hash_bits: int = 20, seed: int = 0, on_pass=None, progress=None):
    """An :class:`~fsmlearn.rcm.align.AlignRCM` trained on ``pairs`` (token lists): ``size``
    contexts per position (B), character ``order`` n (features on (n + 1)-grams), ``passes``
    over the data.  ``on_pass(p, model, stats, inputs, outputs)`` after each pass.  Returns (model, inputs,
    outputs) (the :class:`Alphabet` of each side)."""
    from .align import AlignRCM
    from .align_learn import STRATEGIES, DenseAdaGrad, impute_alignments, train
    if strategy not in STRATEGIES:
        raise ArgumentError(f"strategy {strategy!r}: one of {', '.join(STRATEGIES)}")
    if size < 1 or passes < 1 or order < 0 or not 1 <= max_advance <= 20 or not 4 <= hash_bits <= 30:
        raise ArgumentError(f"size {size} and passes {passes} (>= 1), order {order} (>= 0), max_advance "
                            f"{max_advance} (1..20), hash_bits {hash_bits} (4..30)")
    inputs = Alphabet(sorted({t for x, _ in pairs for t in x}))
    outputs = Alphabet(sorted({t for _, y in pairs for t in y}))
    data = [(inputs.ids(x), outputs.ids(y)) for x, y in pairs]
    model = AlignRCM(len(outputs.symbols), len(inputs.symbols), n=order, max_advance=max_advance, hash_bits=hash_bits)
    opt = DenseAdaGrad(model.theta.size)
    alignments = None
    if strategy == "forced":
        _, alignments = impute_alignments(data, model.num_chars, model.num_phonemes, max_advance=max_advance,
                                          seed=seed, progress=progress)
    for p in range(1, passes + 1):
        st = train(model, data, strategy, size, passes=1, seed=seed + p, optimizer=opt, alignments=alignments,
                   progress=progress)[0]
        if on_pass is not None:
            on_pass(p, model, st, inputs, outputs)
    return model, inputs, outputs


def transduce(model, inputs: Alphabet, outputs: Alphabet, x, size: int = 20, method: str = "rcms"):
    """The best output tokens for the input tokens ``x`` and their probability p(y | x)."""
    from .align import decode
    bad = inputs.unknown(x)
    if bad:
        raise ArgumentError(f"input symbols the model never saw: {' '.join(dict.fromkeys(bad))}")
    y, conf = decode(model, inputs.ids(x), size, method)
    return [outputs.symbols[int(c)] for c in y], float(conf)


def error_rates(hyps, refs) -> dict:
    """Token error rate (edit distance over reference tokens, the paper's CER for characters)
    and exact match of outputs against references."""
    from ..data.nbest import word_errors
    edits = sum(word_errors(h, r) for h, r in zip(hyps, refs))
    n = sum(len(r) for r in refs)
    return {"cer": edits / max(n, 1), "exact_match": float(np.mean([h == r for h, r in zip(hyps, refs)])) if refs
            else float("nan"), "pairs": len(refs), "reference_tokens": n}
