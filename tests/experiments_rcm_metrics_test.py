"""Layer 5 (experiments/): the speech and word measures: edit distance and CER, exact match, the
precision-recall curve and recall at a precision (Steinhardt and Liang, sections 5 and 6), and the plots.

The edit distance is checked against the textbook recurrence on random strings;
the curve and recall at P on hand-made cases and against a direct enumeration
of the confidence thresholds.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fsmlearn.errors import ArgumentError
from fsmlearn.experiments.rcm_metrics import (PRCurve, corpus_cer, edit_distance, exact_match,
                                              plot_pass_curves, plot_pr_curves, precision_recall_curve,
                                              recall_at_precision, transcription_scores, utterance_cer)


def reference_distance(a, b) -> int:
    """The Levenshtein recurrence, memoised, as written in any textbook."""
    @functools.lru_cache(maxsize=None)
    def d(i, j):
        if i == 0:
            return j
        if j == 0:
            return i
        return min(d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] != b[j - 1]))
    return d(len(a), len(b))


short = st.text(alphabet="ab_c'", max_size=9)


@given(short, short)
def test_edit_distance_is_the_recurrence(a, b):
    d = edit_distance(a, b)
    assert d == reference_distance(a, b) == edit_distance(b, a)
    assert abs(len(a) - len(b)) <= d <= max(len(a), len(b))
    assert (d == 0) == (a == b)


@given(short, short, short)
def test_edit_distance_triangle(a, b, c):
    assert edit_distance(a, c) <= edit_distance(a, b) + edit_distance(b, c)


@given(st.lists(st.integers(0, 3), max_size=8), st.lists(st.integers(0, 3), max_size=8))
def test_edit_distance_on_arrays_and_symbol_sequences(a, b):
    want = reference_distance(a, b)
    assert edit_distance(np.array(a, dtype=np.int32), np.array(b, dtype=np.int64)) == want
    sa, sb = tuple(f"P{x}" for x in a), [f"P{x}" for x in b]        # phonemes, words
    assert edit_distance(sa, sb) == want


def test_edit_distance_known_values():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "abc") == edit_distance(None, "abc") == 3
    assert edit_distance("na\u00efve", "naive") == 1               # by character, not byte
    assert edit_distance("yeah_it's_weird", "yeah_its_weird") == 1
    with pytest.raises(ArgumentError, match="two str"):
        edit_distance("abc", ["a", "b", "c"])
    with pytest.raises(ArgumentError, match="hashable"):
        edit_distance([[1]], [[2]])

# --------------------------------------------------------------------------- CER and exact match


def test_an_empty_output_has_cer_one():
    assert utterance_cer("", "hello_world") == 1.0
    assert utterance_cer(None, "a") == 1.0
    assert transcription_scores(["", None], ["abc", "de"])["cer"] == 1.0


def test_cer_corpus_and_per_utterance():
    s = transcription_scores(["abed", "", "xy"], ["abcd", "ab", "xy"])
    assert s["edits"] == 1 + 2 + 0 and s["reference_chars"] == 8
    assert s["cer"] == pytest.approx(3 / 8) == corpus_cer(["abed", "", "xy"], ["abcd", "ab", "xy"])
    assert s["utterance_cer"] == [0.25, 1.0, 0.0]
    assert s["mean_utterance_cer"] == pytest.approx(1.25 / 3)
    assert s["exact_match"] == pytest.approx(1 / 3) == exact_match(["abed", "", "xy"], ["abcd", "ab", "xy"])
    assert s["empty_outputs"] == 1 and s["utterances"] == 3
    assert utterance_cer("abcabc", "a") == 5.0                      # longer than the reference: above 1


def test_cer_bad_arguments():
    with pytest.raises(ArgumentError, match="2 hypotheses for 1 references"):
        corpus_cer(["a", "b"], ["a"])
    with pytest.raises(ArgumentError, match="no utterances"):
        corpus_cer([], [])
    with pytest.raises(ArgumentError, match="non-empty"):
        utterance_cer("a", "")
    with pytest.raises(ArgumentError, match="non-empty"):
        transcription_scores(["a", "b"], ["a", ""])

# --------------------------------------------------------------------------- precision and recall


def test_pr_curve_by_hand():
    c = precision_recall_curve([0.6, 0.9, 0.7, 0.8], [1, 1, 0, 1])    # sorted: 0.9 0.8 0.7 0.6 -> 1 1 0 1
    assert isinstance(c, PRCurve)
    assert c.recall.tolist() == [0.25, 0.5, 0.75, 1.0]
    assert c.precision.tolist() == pytest.approx([1.0, 1.0, 2 / 3, 0.75])
    assert c.threshold.tolist() == [0.9, 0.8, 0.7, 0.6]
    conf, ok = [0.6, 0.9, 0.7, 0.8], [True, True, False, True]
    assert recall_at_precision(conf, ok, 1.0) == 0.5
    assert recall_at_precision(conf, ok, 0.8) == 0.5
    assert recall_at_precision(conf, ok, 0.75) == 1.0                  # precision climbs back to 0.75
    assert recall_at_precision(conf, ok, 0.75, rule="first") == 0.5   # ... after dropping to 2/3
    assert recall_at_precision(conf, ok, 0.6, rule="first") == 1.0
    assert recall_at_precision(conf, ok, 0.0) == 1.0


def test_ties_are_answered_together():
    c = precision_recall_curve([0.9, 0.9, 0.5], [True, False, True])
    assert c.recall.tolist() == pytest.approx([2 / 3, 1.0]) and c.precision.tolist() == pytest.approx([0.5, 2 / 3])
    assert recall_at_precision([0.9, 0.9, 0.5], [True, False, True], 1.0) == 0.0
    assert recall_at_precision([0.9, 0.9, 0.5], [False, True, True], 1.0) == 0.0   # order within a tie irrelevant


def test_all_right_and_all_wrong():
    assert recall_at_precision([0.1, 0.2, 0.3], [1, 1, 1], 0.99) == 1.0
    assert recall_at_precision([0.1, 0.2, 0.3], [0, 0, 0], 0.01) == 0.0
    assert recall_at_precision([-3.0, -np.inf, -0.5], [1, 0, 1], 1.0) == pytest.approx(2 / 3)   # log-probabilities


@given(st.lists(st.tuples(st.integers(0, 4), st.booleans()), min_size=1, max_size=12),
       st.sampled_from([0.0, 0.5, 0.6, 2 / 3, 0.75, 0.9, 0.99, 1.0]))
def test_recall_at_precision_by_enumeration(pairs, p):
    conf = [c / 4 for c, _ in pairs]
    ok = [k for _, k in pairs]
    n = len(pairs)
    points = []                                  # answer every example at least as confident as t
    for t in sorted(set(conf), reverse=True):
        ans = [k for c, k in zip(conf, ok) if c >= t]
        points.append((len(ans) / n, sum(ans) / len(ans)))
    curve = precision_recall_curve(conf, ok)
    assert curve.recall.tolist() == pytest.approx([r for r, _ in points])
    assert curve.precision.tolist() == pytest.approx([q for _, q in points])
    assert recall_at_precision(conf, ok, p) == pytest.approx(max([r for r, q in points if q >= p], default=0.0))
    first = 0.0
    for r, q in points:
        if q < p:
            break
        first = r
    assert recall_at_precision(conf, ok, p, rule="first") == pytest.approx(first)
    assert curve.precision[-1] == pytest.approx(sum(ok) / n)          # precision at R = 1 is accuracy


@pytest.mark.parametrize("args, match", [
    (([], []), "no examples"),
    (([0.5, 0.4], [True]), "as long"),
    (([0.5, float("nan")], [True, False]), "index 1 is not a number"),
    (([0.5, 0.4], [1, 2]), "got 2 at index 1"),
    (([0.5], ["yes"]), "booleans"),
    (([[0.5]], [[True]]), "1-D"),
])
def test_pr_bad_arguments(args, match):
    with pytest.raises(ArgumentError, match=match):
        precision_recall_curve(*args)


def test_recall_at_precision_bad_arguments():
    with pytest.raises(ArgumentError, match="1.5"):
        recall_at_precision([0.5], [True], 1.5)
    with pytest.raises(ArgumentError, match="'best'"):
        recall_at_precision([0.5], [True], 0.9, rule="best")

# --------------------------------------------------------------------------- plots


def _is_png(path):
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plots_write_pngs(tmp_path):
    rng = np.random.default_rng(0)
    conf = rng.random(50)
    curves = {"beam 10": precision_recall_curve(conf, rng.random(50) < 0.8),
              "RCMS 10": precision_recall_curve(conf, conf > 0.2)}
    plot_pr_curves(curves, tmp_path / "pr" / "fig3.png", title="word task")
    assert _is_png(tmp_path / "pr" / "fig3.png")
    panels = {"CER": {"RCMS": rng.random((5, 4)), "forced decoding": [0.9, 0.6, 0.5, 0.45]},
              "exact match": {"RCMS": rng.random((5, 4))}}
    plot_pass_curves(panels, tmp_path / "fig4.png", first_pass=1, title="speech task")
    assert _is_png(tmp_path / "fig4.png")
    plot_pass_curves({"CER": {"beam": [1.0, 1.0]}}, tmp_path / "one.png", first_pass=0)
    assert sorted(p.name for p in tmp_path.rglob("*.png")) == ["fig3.png", "fig4.png", "one.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig4.png", "one.png", "pr"]   # nothing else left


def test_plot_bad_arguments(tmp_path):
    with pytest.raises(ArgumentError, match="at least one curve"):
        plot_pr_curves({}, tmp_path / "x.png")
    with pytest.raises(ArgumentError, match="at least one panel"):
        plot_pass_curves({}, tmp_path / "x.png")
    with pytest.raises(ArgumentError, match="shape"):
        plot_pass_curves({"CER": {"a": np.zeros((2, 2, 2))}}, tmp_path / "x.png")
    with pytest.raises(ArgumentError, match="shape"):
        plot_pass_curves({"CER": {"a": []}}, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()
