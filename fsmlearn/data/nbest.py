"""N-best lists: reading them, word error rates, and choosing by a log-linear combination.

Two layouts, told apart per line:

* Moses: ``id ||| hypothesis ||| features ... ||| score`` (the last field the list's total);
* plain: ``id<TAB>hypothesis<TAB>score``.

A list's ids keep the order of their first appearance; a reference file holds one reference
per id, in that order.  Rescoring (the TRF paper's use, Wang, Ou and Tan, section 7) picks per
id the hypothesis of the largest sum of feature scores times weights; weights are tuned on a
development list by word error rate over a grid.

Public names: NBest, read_nbest, read_references, word_errors, choose, error_rate, tune_weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ArgumentError, CorpusFormatError

__all__ = ["NBest", "read_nbest", "read_references", "word_errors", "choose", "error_rate", "tune_weights"]


@dataclass
class NBest:
    """ids [n]; hyps: every hypothesis's tokens; scores: float64 [H] the list's scores; ptr:
    int64 [n + 1], id i's hypotheses at ptr[i]..ptr[i + 1]."""
    ids: list
    hyps: list
    scores: np.ndarray
    ptr: np.ndarray


def read_nbest(path) -> NBest:
    """An n-best list (either layout, the lines of one id together).

    Raises:
        CorpusFormatError: a line of neither layout or of the other layout than the first line's,
            a score that is not a finite number, or an id whose lines are not together (file and
            line named).
    """
    from .text import strict_file_lines
    ids, hyps, scores, starts = [], [], [], []
    seen = set()
    layout = None
    for ln, line in strict_file_lines(path):
        if not line.strip():
            continue
        this = "Moses (id ||| hypothesis ||| ... ||| score)" if " ||| " in line else "tab (id<TAB>hypothesis<TAB>score)"
        if layout is None:
            layout = this
        elif this != layout:
            raise CorpusFormatError(f"a line of the {this} layout in a list of the {layout} layout: {line!r}",
                                    Path(path), ln)
        if " ||| " in line:
            fields = [x.strip() for x in line.split("|||")]
            if len(fields) < 3:
                raise CorpusFormatError(f"a Moses n-best line needs id ||| hypothesis ||| ... ||| score: "
                                        f"{line!r}", Path(path), ln)
        else:
            fields = line.split("\t")
            if len(fields) != 3:
                raise CorpusFormatError(f"expected id<TAB>hypothesis<TAB>score or id ||| hypothesis ||| ... ||| "
                                        f"score: {line!r}", Path(path), ln)
        i, hyp, sc = fields[0], fields[1].split(), fields[-1]
        try:
            s = float(sc)
        except ValueError:
            s = float("nan")
        if not np.isfinite(s):
            raise CorpusFormatError(f"the score {sc!r} is not a finite number", Path(path), ln)
        if not ids or ids[-1] != i:
            if i in seen:
                raise CorpusFormatError(f"id {i!r} again after other ids: an id's hypotheses must be together",
                                        Path(path), ln)
            seen.add(i)
            ids.append(i)
            starts.append(len(hyps))
        hyps.append(hyp)
        scores.append(s)
    if not ids:
        raise ArgumentError(f"{path}: no hypothesis in it")
    return NBest(ids, hyps, np.array(scores), np.array(starts + [len(hyps)], np.int64))


def read_references(path, n: int) -> list[list[str]]:
    """One reference per line (tokens separated by spaces) for the ``n`` ids of a list."""
    from .text import strict_file_lines
    refs = [line.split() for _, line in strict_file_lines(path)]
    if len(refs) != n:
        raise ArgumentError(f"{path}: {len(refs)} references for a list of {n} ids (one per id, in its order)")
    return refs


def word_errors(hyp, ref) -> int:
    """The Levenshtein distance between two token lists (substitutions, insertions, deletions)."""
    prev = list(range(len(ref) + 1))
    for i, h in enumerate(hyp, 1):
        cur = [i] + [0] * len(ref)
        for j, r in enumerate(ref, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (h != r))
        prev = cur
    return prev[-1]


def choose(features: np.ndarray, weights, ptr: np.ndarray) -> np.ndarray:
    """Per id, the index of the hypothesis with the largest ``features @ weights`` (the first
    on a tie)."""
    total = features @ np.asarray(weights, np.float64)
    return np.array([a + int(np.argmax(total[a:b])) for a, b in zip(ptr[:-1], ptr[1:])], np.int64)


def error_rate(errors: np.ndarray, picked: np.ndarray, ref_words: int) -> float:
    """Word error rate of the picked hypotheses (``errors``: each hypothesis's word errors)."""
    return float(errors[picked].sum()) / max(ref_words, 1)


def tune_weights(features: np.ndarray, ptr: np.ndarray, errors: np.ndarray, ref_words: int,
                 grid=np.linspace(0.0, 2.0, 21)):
    """Weights (the first, the list's own score, fixed at 1) of the lowest error rate over the
    grid for every other feature; the smallest weights on a tie.  Returns (weights, rate)."""
    F = features.shape[1]
    best = (np.inf, None)
    mesh = np.stack(np.meshgrid(*([grid] * (F - 1)), indexing="ij"), -1).reshape(-1, F - 1) if F > 1 else \
        np.zeros((1, 0))
    for rest in mesh:
        w = np.concatenate([[1.0], rest])
        rate = error_rate(errors, choose(features, w, ptr), ref_words)
        if rate < best[0] - 1e-12:
            best = (rate, w)
    return best[1], best[0]
