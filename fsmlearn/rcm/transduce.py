"""Transductions of the user's own sequence pairs with the latent-alignment RCMS model: the
library side of ``fsmlearn rcms train / decode / eval``.

Steinhardt and Liang (2015), section 6 (speech: phonemes -> characters, alignments unobserved):
an :class:`~fsmlearn.rcm.align.AlignRCM` whose input symbols are the pairs' input tokens (the
paper's phonemes) and whose output symbols are their output tokens (its characters), each
output token covering 1..``max_advance`` input tokens; trained by AdaGrad on the approximate
log-likelihood with one of the paper's strategies (RCMS contexts, beam search selecting by
model, target or hybrid score, forced decoding from imputed alignments;
:func:`~fsmlearn.rcm.align_learn.train`), decoded by the engine's best path over the RCMS or
beam contexts (:func:`~fsmlearn.rcm.align_decode.decode`).

Public names: read_pairs, Alphabet, fit_transducer, transduce, transduce_kbest, marginals, error_rates.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ArgumentError, CorpusFormatError

__all__ = ["read_pairs", "Alphabet", "fit_transducer", "transduce", "transduce_kbest", "marginals", "error_rates"]


def _split(text: str, chars: bool) -> list[str]:
    return list(text.strip()) if chars else text.split()


def read_pairs(path, chars: bool = False) -> list[tuple]:
    """Input/output pairs, one a line: ``input<TAB>output``, tokens separated by spaces (or every
    character a token, ``chars``), optionally ``<TAB>alignment``: how many new input tokens each
    output token covers (space-separated integers, one per output token, summing to the input's
    length; 0: the token shares the previous output token's input token, which must then cover
    just one; the first >= 1: :func:`~fsmlearn.rcm.align.advances_valid`).  Returns (x, y) or
    (x, y, advances) per line.

    Raises:
        CorpusFormatError: a line with neither 1 nor 2 tabs, an empty side, or an alignment that
            does not fit its pair (file, line).
    """
    from ..data.text import strict_file_lines
    out = []
    for ln, line in strict_file_lines(path):
        if not line.strip() and "\t" not in line:
            continue
        parts = line.split("\t")
        if len(parts) not in (2, 3):
            raise CorpusFormatError(f"expected input<TAB>output[<TAB>alignment], got {len(parts) - 1} tabs: "
                                    f"{line!r}", Path(path), ln)
        x, y = _split(parts[0], chars), _split(parts[1], chars)
        if not x or not y:
            raise CorpusFormatError(f"an empty {'input' if not x else 'output'}: {line!r}", Path(path), ln)
        if len(parts) == 3:
            try:
                adv = [int(a) for a in parts[2].split()]
            except ValueError:
                adv = []
            from .align_model import advances_valid
            if len(adv) != len(y) or not advances_valid(adv, len(x), max(adv, default=0)):
                raise CorpusFormatError(f"the alignment {parts[2]!r} must give each of the {len(y)} output tokens "
                                        f"the number of new input tokens it covers, {len(x)} in all, the first at "
                                        "least 1, and 0 (sharing the previous token's input token) only after a "
                                        "token that covers one", Path(path), ln)
            out.append((x, y, adv))
        else:
            out.append((x, y))
        if len(out[-1]) != len(out[0]):
            raise CorpusFormatError("some lines give an alignment and others do not: all or none", Path(path), ln)
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


def fit_transducer(pairs, *, strategy: str | None = None, size: int = 20, order: int = 4, passes: int = 5,
                   max_advance: int = 2, hash_bits: int = 20, seed: int = 0, on_pass=None, progress=None):
    """An :class:`~fsmlearn.rcm.align.AlignRCM` trained on ``pairs`` (token lists, and with a
    third item the given alignments, which forced decoding then trains on; ``strategy``
    default: "forced" with alignments, else "rcms"): ``size``
    contexts per position (B), character ``order`` n (features on (n + 1)-grams), ``passes``
    over the data.  ``on_pass(p, model, stats, inputs, outputs)`` after each pass.  Returns (model, inputs,
    outputs) (the :class:`Alphabet` of each side)."""
    from .align_model import AlignRCM
    from .align_learn import STRATEGIES, DenseAdaGrad, impute_alignments, train
    given = len(pairs[0]) == 3
    strategy = strategy or ("forced" if given else "rcms")
    if given and strategy != "forced":
        raise ArgumentError(f"alignments are given: they train forced decoding, not strategy {strategy!r}")
    if strategy not in STRATEGIES:
        raise ArgumentError(f"strategy {strategy!r}: one of {', '.join(STRATEGIES)}")
    bad = [f"{name} {value} (expected {want})" for name, value, ok, want in (
        ("size", size, size >= 1, ">= 1"), ("passes", passes, passes >= 1, ">= 1"), ("order", order, order >= 0, ">= 0"),
        ("max_advance", max_advance, 1 <= max_advance <= 20, "1..20"),
        ("hash_bits", hash_bits, 4 <= hash_bits <= 30, "4..30")) if not ok]
    if bad:
        raise ArgumentError("out of range: " + "; ".join(bad))
    inputs = Alphabet(sorted({t for p in pairs for t in p[0]}))
    outputs = Alphabet(sorted({t for p in pairs for t in p[1]}))
    data = [(inputs.ids(p[0]), outputs.ids(p[1])) for p in pairs]
    if given and max(max(p[2]) for p in pairs) > max_advance:
        raise ArgumentError(f"a given alignment covers more than max_advance = {max_advance} input tokens with one "
                            "output token")
    model = AlignRCM(len(outputs.symbols), len(inputs.symbols), n=order, max_advance=max_advance, hash_bits=hash_bits)
    opt = DenseAdaGrad(model.theta.size)
    alignments = [np.asarray(p[2], np.int64) for p in pairs] if given else None
    if strategy == "forced" and not given:
        _, alignments = impute_alignments(data, model.num_chars, model.num_phonemes, max_advance=max_advance,
                                          seed=seed, progress=progress)
    for p in range(1, passes + 1):
        st = train(model, data, strategy, size, passes=1, seed=seed + p, optimizer=opt, alignments=alignments,
                   progress=progress)[0]
        if on_pass is not None:
            on_pass(p, model, st, inputs, outputs)
    return model, inputs, outputs


def _ids(inputs: Alphabet, x) -> np.ndarray:
    bad = inputs.unknown(x)
    if bad:
        raise ArgumentError(f"input symbols the model never saw: {' '.join(dict.fromkeys(bad))}")
    return inputs.ids(x)


def transduce(model, inputs: Alphabet, outputs: Alphabet, x, size: int = 20, method: str = "rcms"):
    """The best output tokens for the input tokens ``x`` and their probability p(y | x)."""
    from .align_decode import decode
    y, conf = decode(model, _ids(inputs, x), size, method)
    return [outputs.symbols[int(c)] for c in y], float(conf)


def transduce_kbest(model, inputs: Alphabet, outputs: Alphabet, x, k: int, size: int = 20,
                    method: str = "rcms") -> list:
    """The k best distinct outputs for ``x`` (:func:`~fsmlearn.rcm.align_decode.decode_kbest`):
    a list of (output tokens, p(y | x)), best first."""
    from .align_decode import decode_kbest
    return [([outputs.symbols[int(c)] for c in y], p) for y, p, _ in
            decode_kbest(model, _ids(inputs, x), k, size, method)]


def marginals(model, inputs: Alphabet, outputs: Alphabet, x, size: int = 20, method: str = "rcms",
              threshold: float = 0.0) -> list:
    """Per output position i = 1, 2, ...: the output tokens t with P(y_i = t | x) > ``threshold``
    and that probability, most probable first (:func:`~fsmlearn.rcm.align_decode.output_marginals`);
    positions up to the last one with P(|y| >= i | x) > ``threshold``."""
    from .align_decode import output_marginals
    P = output_marginals(model, _ids(inputs, x), size, method)
    rows = []
    for i in range(P.shape[0]):
        if P[i].sum() <= threshold:
            break
        order = np.argsort(-P[i], kind="stable")
        rows.append([(outputs.symbols[int(c)], float(P[i, c])) for c in order if P[i, c] > threshold])
    return rows


def error_rates(hyps, refs) -> dict:
    """Token error rate (edit distance over reference tokens, the paper's CER for characters)
    and exact match of outputs against references."""
    from ..data.nbest import word_errors
    edits = sum(word_errors(h, r) for h, r in zip(hyps, refs))
    n = sum(len(r) for r in refs)
    return {"cer": edits / max(n, 1), "exact_match": float(np.mean([h == r for h, r in zip(hyps, refs)])) if refs
            else float("nan"), "pairs": len(refs), "reference_tokens": n}
