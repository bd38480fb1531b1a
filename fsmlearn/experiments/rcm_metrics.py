"""The measures of the speech and word experiments of Steinhardt and Liang (2015): character error
rate, exact match, precision at high confidence, and their plots.

- Character error rate (section 6, Figure 4): the Levenshtein distance
  (unit-cost insertions, deletions and substitutions; :func:`edit_distance`)
  between a hypothesis and its reference over the reference's length.
  :func:`utterance_cer` gives one utterance's; :func:`corpus_cer` the
  corpus-level rate, the summed distances over the summed reference lengths.
  An empty output (``""`` or ``None``, e.g. when no labelling was found) has
  CER 1.0: its distance is the reference's length.  A CER can exceed 1 (an
  output longer than its reference).  :func:`exact_match` is the fraction of
  outputs equal to their reference; :func:`transcription_scores` gathers the
  three.
- Precision at high confidence (section 5, Figure 3): each example has a
  confidence (the probability of the predicted output) and whether it is
  correct.  Sorted by confidence, descending, the method answers the first
  k examples: the recall is k / n (the fraction answered) and the precision
  the fraction of those k that are correct.  Examples of equal confidence
  are answered together, so the curve has one point per distinct confidence
  (:func:`precision_recall_curve`).  :func:`recall_at_precision` is the
  largest recall whose precision is at least P (``rule="max"``, the usual
  reading; the paper's 16 % / 82 % / 86 % at P = 0.99), or, with
  ``rule="first"``, the recall reached before the precision first drops
  below P (the literal reading of "what fraction R of examples we can answer
  before our accuracy drops below P").  The two differ only when the
  precision climbs back above P after dropping below it.
- Plots (PNG, through :func:`~fsmlearn.experiments.report.new_figure` and
  :func:`~fsmlearn.experiments.report.save_figure`): :func:`plot_pr_curves`
  (Figure 3: precision against recall, one line per method, a dotted line
  at P) and :func:`plot_pass_curves` (Figure 4: a measure per training pass,
  one panel per measure; a method run several times, e.g. over permutations
  of the data, is drawn thin per run with its median solid).

Public names: edit_distance, utterance_cer, corpus_cer, exact_match,
transcription_scores, PRCurve, precision_recall_curve, recall_at_precision,
plot_pr_curves, plot_pass_curves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numba as nb
import numpy as np

from ..errors import ArgumentError
from .report import new_figure, save_figure

__all__ = ["edit_distance", "utterance_cer", "corpus_cer", "exact_match", "transcription_scores",
           "PRCurve", "precision_recall_curve", "recall_at_precision", "plot_pr_curves",
           "plot_pass_curves"]

# --------------------------------------------------------------------------- edit distance


@nb.njit(cache=True)
def _levenshtein(a, b):
    """Unit-cost edit distance of two int64 arrays (two rows of the table, the shorter inside)."""
    if len(a) < len(b):
        a, b = b, a
    m = len(b)
    prev = np.arange(m + 1)
    cur = np.empty(m + 1, dtype=np.int64)
    for i in range(1, len(a) + 1):
        cur[0] = i
        ai = a[i - 1]
        for j in range(1, m + 1):
            c = prev[j - 1] + (1 if ai != b[j - 1] else 0)
            d = prev[j] + 1
            if d < c:
                c = d
            d = cur[j - 1] + 1
            if d < c:
                c = d
            cur[j] = c
        prev, cur = cur, prev
    return prev[m]


def _codes(s: str) -> np.ndarray:
    return np.frombuffer(s.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)


def _as_arrays(a, b) -> tuple[np.ndarray, np.ndarray]:
    a = "" if a is None else a
    b = "" if b is None else b
    if isinstance(a, str) and isinstance(b, str):
        return _codes(a), _codes(b)
    if isinstance(a, str) or isinstance(b, str):
        raise ArgumentError(f"edit_distance compares two str or two sequences, got "
                            f"{type(a).__name__} and {type(b).__name__}")
    if (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.ndim == b.ndim == 1
            and np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer)):
        return a.astype(np.int64), b.astype(np.int64)
    ids: dict = {}
    try:
        xa = np.array([ids.setdefault(s, len(ids)) for s in a], dtype=np.int64)
        xb = np.array([ids.setdefault(s, len(ids)) for s in b], dtype=np.int64)
    except TypeError:
        raise ArgumentError(f"edit_distance needs sequences of hashable symbols, got "
                            f"{type(a).__name__} and {type(b).__name__}") from None
    return xa, xb


def edit_distance(a, b) -> int:
    """The Levenshtein distance: the fewest insertions, deletions and substitutions from a to b.

    Args:
        a, b: two str (compared by character), two 1-D integer arrays, or two
            sequences of hashable symbols (phoneme tuples, word lists); ``None``
            is the empty output.

    Returns:
        An int, 0 <= d <= max(len(a), len(b)).

    Raises:
        ArgumentError: a str against a non-str, or unhashable symbols.
    """
    xa, xb = _as_arrays(a, b)
    return int(_levenshtein(xa, xb))


def _ref_len(ref) -> int:
    if ref is None or len(ref) == 0:
        raise ArgumentError(f"a reference must be non-empty (a CER divides by its length), got {ref!r}")
    return len(ref)


def utterance_cer(hypothesis, reference) -> float:
    """One utterance's character error rate: edit distance over the reference's length.

    Args:
        hypothesis: the output (str; ``""`` or ``None`` for no output, CER 1.0).
        reference: the correct output, non-empty.

    Returns:
        A float >= 0 (above 1 when the output is much longer than the reference).

    Raises:
        ArgumentError: an empty reference.
    """
    return edit_distance(hypothesis, reference) / _ref_len(reference)


def _pairs(hypotheses, references) -> tuple[list, list]:
    hyps, refs = list(hypotheses), list(references)
    if len(hyps) != len(refs):
        raise ArgumentError(f"{len(hyps)} hypotheses for {len(refs)} references")
    if not refs:
        raise ArgumentError("no utterances to score")
    return hyps, refs


def corpus_cer(hypotheses: Sequence, references: Sequence) -> float:
    """The corpus-level character error rate: summed edit distances over summed reference lengths.

    Args:
        hypotheses: the outputs (``""`` or ``None`` where there is none).
        references: the correct outputs, as many, each non-empty.

    Returns:
        A float >= 0.

    Raises:
        ArgumentError: different lengths, no utterance, or an empty reference.
    """
    return transcription_scores(hypotheses, references)["cer"]


def exact_match(hypotheses: Sequence, references: Sequence) -> float:
    """The fraction of outputs equal to their reference (edit distance 0; ``None`` is ``""``).

    Raises:
        ArgumentError: different lengths or no utterance, or as for :func:`edit_distance`.
    """
    hyps, refs = _pairs(hypotheses, references)
    return sum(1 for h, r in zip(hyps, refs) if edit_distance(h, r) == 0) / len(refs)


def transcription_scores(hypotheses: Sequence, references: Sequence) -> dict:
    """CER (corpus and per utterance) and exact match of a set of outputs.

    Args:
        hypotheses: the outputs (``""`` or ``None`` where there is none).
        references: the correct outputs, as many, each non-empty.

    Returns:
        dict, JSON-ready: ``cer`` (corpus level), ``mean_utterance_cer``,
        ``exact_match``, ``edits`` (summed distances), ``reference_chars``,
        ``utterances``, ``empty_outputs``, and ``utterance_cer`` (list of float).

    Raises:
        ArgumentError: different lengths, no utterance, or an empty reference.
    """
    hyps, refs = _pairs(hypotheses, references)
    dist = [edit_distance(h, r) for h, r in zip(hyps, refs)]
    lens = [_ref_len(r) for r in refs]
    per = [d / n for d, n in zip(dist, lens)]
    return {"cer": sum(dist) / sum(lens), "mean_utterance_cer": float(np.mean(per)),
            "exact_match": sum(1 for d in dist if d == 0) / len(refs),
            "edits": int(sum(dist)), "reference_chars": int(sum(lens)), "utterances": len(refs),
            "empty_outputs": sum(1 for h in hyps if h is None or len(h) == 0), "utterance_cer": per}

# --------------------------------------------------------------------------- precision and recall


class PRCurve(NamedTuple):
    """A precision-recall curve, one point per distinct confidence (descending).

    Attributes:
        recall: float64 (k,), the fraction of examples answered, increasing to 1.
        precision: float64 (k,), the fraction correct among them.
        threshold: float64 (k,), the confidence down to which the examples are answered.
    """

    recall: np.ndarray
    precision: np.ndarray
    threshold: np.ndarray


def _check_pr(confidence, correct) -> tuple[np.ndarray, np.ndarray]:
    try:
        conf = np.asarray(confidence, dtype=np.float64)
    except (TypeError, ValueError):
        raise ArgumentError(f"confidences must be numbers, got {confidence!r:.200}") from None
    ok = np.asarray(correct)
    if conf.ndim != 1 or ok.ndim != 1 or len(conf) != len(ok):
        raise ArgumentError(f"confidence and correct must be 1-D and as long, got shapes "
                            f"{conf.shape} and {ok.shape}")
    if len(conf) == 0:
        raise ArgumentError("no examples: a precision-recall curve needs at least one")
    if np.isnan(conf).any():
        raise ArgumentError(f"confidence {float(conf[np.isnan(conf)][0])!r} at index "
                            f"{int(np.flatnonzero(np.isnan(conf))[0])} is not a number")
    if ok.dtype != np.bool_:
        bad = ~np.isin(ok, (0, 1)) if np.issubdtype(ok.dtype, np.number) else np.ones(len(ok), bool)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ArgumentError(f"correct must hold booleans (or 0/1), got {ok[i].item()!r} at index {i}")
    return conf, ok.astype(bool)


def precision_recall_curve(confidence, correct) -> PRCurve:
    """Precision against recall when answering the most confident examples first.

    Args:
        confidence: (n,) numbers, higher is surer (a probability, or its log); no NaN.
        correct: (n,) booleans (or 0/1): whether each example's prediction is right.

    Returns:
        A :class:`PRCurve`; ``precision[-1]`` is the accuracy on all examples.

    Raises:
        ArgumentError: no examples, lengths that differ, a NaN, or a non-boolean.
    """
    conf, ok = _check_pr(confidence, correct)
    order = np.argsort(-conf, kind="stable")
    c, k = conf[order], ok[order]
    hits = np.cumsum(k)
    last = np.flatnonzero(np.append(c[1:] != c[:-1], True))   # the last example of each tie group
    answered = last + 1
    return PRCurve(answered / len(c), hits[last] / answered, c[last])


def recall_at_precision(confidence, correct, precision: float, rule: str = "max") -> float:
    """The fraction of examples answerable at precision ``precision`` (0.0 if none).

    Args:
        confidence, correct: as for :func:`precision_recall_curve`.
        precision: P in [0, 1].
        rule: ``"max"``: the largest recall of a point whose precision is >= P;
            ``"first"``: the recall of the last point before the precision first drops below P.

    Returns:
        A float in [0, 1].

    Raises:
        ArgumentError: P outside [0, 1], an unknown rule, or as for
            :func:`precision_recall_curve`.
    """
    if rule not in ("max", "first"):
        raise ArgumentError(f"rule must be 'max' or 'first', got {rule!r}")
    try:
        p = float(precision)
    except (TypeError, ValueError):
        raise ArgumentError(f"precision must be a number in [0, 1], got {precision!r}") from None
    if not 0.0 <= p <= 1.0:
        raise ArgumentError(f"precision must be a number in [0, 1], got {precision!r}")
    curve = precision_recall_curve(confidence, correct)
    good = curve.precision >= p
    if rule == "first":
        below = np.flatnonzero(~good)
        good = good[:below[0]] if len(below) else good
    idx = np.flatnonzero(good)
    return float(curve.recall[idx[-1]]) if len(idx) else 0.0

# --------------------------------------------------------------------------- plots


def plot_pr_curves(curves: Mapping[str, PRCurve], path, *, precision_line: float | None = 0.99,
                   title: str | None = None) -> None:
    """Figure 3: precision against recall, one step line per method, written as a PNG.

    Args:
        curves: label -> :class:`PRCurve` (e.g. ``{"beam 10": ..., "RCMS 10": ...}``).
        path: the PNG to write (atomically; its folder is created).
        precision_line: draw a dotted line at this precision (None: none); the legend
            gives each method's recall there (``rule="max"``).
        title: the plot's title.

    Raises:
        ArgumentError: no curves.
    """
    if not curves:
        raise ArgumentError("plot_pr_curves needs at least one curve")
    fig, ax = new_figure(1, figsize=(6, 4.5))
    for label, c in curves.items():
        r, p = np.concatenate([[0.0], c.recall]), np.concatenate([[c.precision[0]], c.precision])
        text = label
        if precision_line is not None:
            idx = np.flatnonzero(c.precision >= precision_line)
            text += f" (R = {c.recall[idx[-1]] if len(idx) else 0.0:.2f} at P = {precision_line:g})"
        ax.step(r, p, where="post", label=text)
    if precision_line is not None:
        ax.axhline(precision_line, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("recall (fraction of examples answered)")
    ax.set_ylabel("precision")
    ax.set_xlim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    save_figure(fig, path)


def plot_pass_curves(panels: Mapping[str, Mapping[str, Sequence]], path, *, first_pass: int = 1,
                     xlabel: str = "pass over the training data", title: str | None = None) -> None:
    """Figure 4: a measure per training pass, one panel per measure, written as a PNG.

    Args:
        panels: y-label -> (label -> values): a 1-D sequence (one value per pass) for a
            single run, or a 2-D array (runs, passes), e.g. one row per permutation of
            the data, drawn thin per run with the median over runs solid.
            E.g. ``{"CER": {"RCMS": cer_rcms, "forced": cer_forced},
            "exact match": {...}}``.
        path: the PNG to write.
        first_pass: the number of the first value's pass (0 if it is before training).
        xlabel, title: the axis label and the figure's title.

    Raises:
        ArgumentError: no panel, an empty series, or one with more than two dimensions.
    """
    if not panels or not all(panels.values()):
        raise ArgumentError("plot_pass_curves needs at least one panel, each with a series")
    fig, axes = new_figure(len(panels), figsize=(5 * len(panels), 4))
    from matplotlib.ticker import MaxNLocator        # imported by new_figure already
    axes = np.atleast_1d(axes)
    for ax, (ylabel, series) in zip(axes, panels.items()):
        for n, (label, values) in enumerate(series.items()):
            v = np.asarray(values, dtype=np.float64)
            if v.ndim == 1:
                v = v[None, :]
            if v.ndim != 2 or v.shape[1] == 0:
                raise ArgumentError(f"series {label!r} of panel {ylabel!r} must be 1-D or 2-D "
                                    f"(runs, passes) and non-empty, got shape {v.shape}")
            x = np.arange(first_pass, first_pass + v.shape[1])
            colour = f"C{n % 10}"
            if v.shape[0] > 1:
                for row in v:
                    ax.plot(x, row, color=colour, alpha=0.3, linewidth=0.8)
                label = f"{label} (median of {v.shape[0]})"
            ax.plot(x, np.median(v, axis=0), color=colour, marker="o", markersize=3, label=label)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)
