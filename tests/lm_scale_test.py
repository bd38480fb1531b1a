"""The partitioned LM pipeline (fsmlearn.lm.scale) against the in-memory one.

The one-process twins are ``count_ngrams`` + ``write_web1t`` (counting), ``read_web1t`` +
``write_web1t`` (Web1T rewriting) and ``estimate`` (every estimator, with and without
cutoffs, from text and from counts cut before estimation).  Counts and Web1T lines must be
the same exactly; log10 probabilities too (the same formulas in the same order of
operations; asserted to 1e-9), backoff weights within 1e-6 (a pruned context's sums are
taken in another order).

Partitionings run in this process (``synchronous``) from byte ranges smaller than one
line to one partition for the whole file; then the same on a real ``LocalCluster`` of
two worker processes whose memory target is so small that they spill what they hold,
with a worker killed in the middle of a count and of an estimate.
"""

from __future__ import annotations

import gzip
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fsmlearn.lm.arpa import read_arpa
from fsmlearn.lm.counts import count_ngrams
from fsmlearn.lm.estimate import estimate
from fsmlearn.lm.scale.cluster import open_runner
from fsmlearn.lm.scale.count import count_to_web1t, reweb1t, text_parts
from fsmlearn.lm.scale.kn import estimate_text, estimate_web1t
from fsmlearn.lm.web1t import read_web1t, write_web1t

FSMLEARN = [sys.executable, "-m", "fsmlearn.cli.main"]


def _corpus(seed: int = 2, n: int = 300):
    rng = random.Random(seed)
    W = "a b c d e f g h the of x é".split()
    return [" ".join(rng.choice(W[:rng.randint(3, len(W))]) for _ in range(rng.randint(0, 12)))
            for _ in range(n)]


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    d = tmp_path_factory.mktemp("scale")
    lines = _corpus()
    p = d / "in.txt"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p, lines


def _lines(root):
    """Every file's decompressed bytes per folder (the n-gram files of an order joined in order)."""
    out = {}
    for d in sorted(Path(root).iterdir()):
        fs = sorted(d.glob("*gm-*")) + sorted(d.glob("vocab*"))
        out[d.name] = b"".join(gzip.open(f).read() for f in fs)
    out["total"] = (Path(root) / "1gms" / "total").read_bytes()
    return out


def _table(lm):
    out = {}
    for k in range(lm.order):
        for row, lp, bo, hb in zip(lm.ngrams[k], lm.logprob[k], lm.backoff[k], lm.has_backoff[k]):
            out[tuple(lm.vocab[w] for w in row)] = (float(lp), float(bo) if hb else None)
    return out


def assert_same_model(ref, path):
    got = read_arpa(path)
    A, B = _table(ref), _table(got)
    assert set(A) == set(B)
    assert ref.counts == got.counts
    for g, (lp, bo) in A.items():
        lp2, bo2 = B[g]
        assert abs(lp - lp2) <= 1e-9, (g, lp, lp2)
        assert (bo is None) == (bo2 is None), g
        if bo is not None:
            assert abs(bo - bo2) <= 1e-6, (g, bo, bo2)


# --- in this process, several partitionings -----------------------------------------------------

@pytest.mark.parametrize("part_bytes,ranges", [(7, 3), (100, 1), (333, 5), (1 << 20, 2)])
def test_count_matches_in_memory_web1t(text, tmp_path, part_bytes, ranges):
    path, lines = text
    cut = [1, 2, 2, 3]
    write_web1t(count_ngrams(lines, 4), tmp_path / "ref", cutoffs=cut)
    with open_runner("synchronous") as r:
        parts = text_parts([path], part_bytes)
        if part_bytes == 7:
            assert len(parts) > len(lines)              # partitions smaller than one sentence
        count_to_web1t(r, parts, 4, tmp_path / "out", cutoffs=cut, ranges=ranges)
    assert _lines(tmp_path / "out") == _lines(tmp_path / "ref")
    a, b = read_web1t(tmp_path / "out"), read_web1t(tmp_path / "ref")
    for x, y in zip(a.counts, b.counts):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("extra", ["", "a\xa0b c\x1cd", "x\ty\r", "\u3000 é"])
def test_fast_and_python_tokenisers_count_alike(tmp_path, extra, monkeypatch):
    """Partitions tokenised in numba (ASCII whitespace) or, for text holding whitespace that
    only str.split knows, in Python: both give count_ngrams' counts; the numba path is taken
    on plain text."""
    from fsmlearn.lm.scale import count as cmod
    lines = _corpus(5, 120) + [extra, "", "  a  b  "]
    p = tmp_path / "in.txt"
    p.write_bytes(("\n".join(lines)).encode("utf-8"))             # no final newline
    write_web1t(count_ngrams(p.read_text(encoding="utf-8").split("\n"), 3), tmp_path / "ref")
    taken = []
    fast = cmod._count_fast
    monkeypatch.setattr(cmod, "_count_fast", lambda *a: taken.append(fast(*a)) or taken[-1])
    with open_runner("synchronous") as r:
        count_to_web1t(r, text_parts([p], 150), 3, tmp_path / "out", ranges=3)
    assert _lines(tmp_path / "out") == _lines(tmp_path / "ref")
    assert any(t is not None for t in taken)
    assert all(t is not None for t in taken) == (extra in ("", "x\ty\r"))


def test_dataset_sentences_keep_their_tokens(tmp_path):
    """A named dataset's sentences reach the counter as token lists, as count_ngrams gets them in
    memory: a token holding a space (or none at all) stays one token."""
    from fsmlearn.lm.scale.count import TextPart
    sents = [("a b", "c"), ("c", ""), ("c", "a b", "a")] * 3
    write_web1t(count_ngrams([list(x) for x in sents], 3), tmp_path / "ref")
    with open_runner("synchronous") as r:
        count_to_web1t(r, [TextPart("toy", lines=tuple(sents[:4])), TextPart("toy", lines=tuple(sents[4:]))], 3,
                       tmp_path / "out", ranges=2)
    assert _lines(tmp_path / "out") == _lines(tmp_path / "ref")


def test_reweb1t_matches_in_memory(text, tmp_path):
    _, lines = text
    write_web1t(count_ngrams(lines, 4), tmp_path / "w")
    write_web1t(read_web1t(tmp_path / "w"), tmp_path / "ref", cutoffs=3)
    with open_runner("synchronous") as r:
        V, order, per, sizes = reweb1t(r, tmp_path / "w", tmp_path / "out", cutoffs=3, ranges=3)
    assert _lines(tmp_path / "out") == _lines(tmp_path / "ref")
    c = read_web1t(tmp_path / "w")
    assert (V, order) == (len(c.vocab), c.order)
    assert [per[k][0] for k in sorted(per)] == c.sizes
    # a vocabulary without the sentence markers: counted as read_web1t counts them (added, count 0)
    vocab = tmp_path / "w" / "1gms" / "vocab.gz"
    kept = [ln for ln in gzip.open(vocab).read().decode().splitlines() if not ln.startswith(("<S>", "</S>"))]
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "1gms").mkdir()
    (tmp_path / "v" / "1gms" / "vocab").write_text("\n".join(kept) + "\n")
    with open_runner("synchronous") as r:
        V2, _, per2, _ = reweb1t(r, tmp_path / "v", None)
    c2 = read_web1t(tmp_path / "v")
    assert (V2, per2[1][0]) == (len(c2.vocab), c2.sizes[0])


@pytest.mark.parametrize("tokens_per_part,ranges", [(40, 3), (1000, 2), (10 ** 6, 1)])
def test_integer_coded_corpus_counts_match_count_corpus(tmp_path, tokens_per_part, ranges):
    """The counting stage of make tagger-giga200: sentence ranges of a memory-mapped corpus."""
    from fsmlearn.lm.counts import count_corpus
    from fsmlearn.lm.scale.count import count_ids_to_web1t
    rng = np.random.default_rng(0)
    vocab = tuple(f"w{i}" for i in range(40)) + ("<unk>", "é")
    ptr = np.concatenate([[0], np.cumsum(rng.integers(0, 15, 400))]).astype(np.int64)
    ids = (rng.zipf(1.5, int(ptr[-1])).clip(1, len(vocab)) - 1).astype(np.int32)
    np.save(tmp_path / "ptr.npy", ptr)
    np.save(tmp_path / "ids.npy", ids)
    write_web1t(count_corpus(ptr, ids, vocab, 5, 3, keep_bigrams=True), tmp_path / "ref")
    with open_runner("synchronous") as r:
        count_ids_to_web1t(r, tmp_path / "ptr.npy", tmp_path / "ids.npy", vocab, 5, tmp_path / "out", cutoffs=3,
                           keep_bigrams=True, ranges=ranges, tokens_per_part=tokens_per_part)
    assert _lines(tmp_path / "out") == _lines(tmp_path / "ref")


METHODS = [("kneser-ney", None), ("kneser-ney", [1, 2, 2, 3]), ("witten-bell", None),
           ("witten-bell", [1, 1, 3]), ("absolute", 2)]


@pytest.mark.parametrize("method,cut", METHODS)
@pytest.mark.parametrize("part_bytes,ranges", [(50, 3), (300, 7), (1 << 20, 1)])
def test_estimate_from_text_matches_in_memory(text, tmp_path, method, cut, part_bytes, ranges):
    path, lines = text
    ref = estimate(count_ngrams(lines, 4), method, cutoffs=cut)
    with open_runner("synchronous") as r:
        estimate_text(r, text_parts([path], part_bytes), 4, tmp_path / "o.arpa", method=method, cutoffs=cut,
                      ranges=ranges)
    assert_same_model(ref, tmp_path / "o.arpa")


def test_arpa_written_in_place_and_again_from_pieces_when_a_task_ran_twice(text, tmp_path, monkeypatch):
    """A plain ARPA file on one host is written in place (each partition's lines appended); the
    same model as the in-memory path and as the file joined from pieces (a .gz output).  A task
    that appended its lines twice (a rerun after a lost worker) makes the file's size wrong:
    it is written again from pieces, and the model is still exact."""
    import gzip

    import fsmlearn.lm.scale.kn as kn
    path, lines = text
    cut = [1, 1, 2, 2]
    ref = estimate(count_ngrams(lines, 4), "kneser-ney", cutoffs=cut)
    calls = []
    once = kn.append_order

    def counted(*args):
        calls.append(args[-1])
        return once(*args)
    monkeypatch.setattr(kn, "append_order", counted)
    with open_runner("synchronous") as r:
        estimate_text(r, text_parts([path], 300), 4, tmp_path / "a.arpa", cutoffs=cut, ranges=3, leaf_rows=40)
    assert_same_model(ref, tmp_path / "a.arpa")
    assert sorted(set(calls)) == [1, 2, 3, 4]           # written in place, order by order
    with open_runner("synchronous") as r:
        estimate_text(r, text_parts([path], 300), 4, tmp_path / "b.arpa.gz", cutoffs=cut, ranges=3, leaf_rows=40)
    (tmp_path / "b.arpa").write_bytes(gzip.open(tmp_path / "b.arpa.gz").read())
    assert_same_model(ref, tmp_path / "b.arpa")
    assert sorted((tmp_path / "a.arpa").read_text().splitlines()) == \
        sorted((tmp_path / "b.arpa").read_text().splitlines())
    calls = []

    def twice(*args):
        out = once(*args)
        if out[1] and not calls:
            calls.append(args[-1])
            once(*args)             # the first task with lines appends them twice
        return out
    monkeypatch.setattr(kn, "append_order", twice)
    said = []
    with open_runner("synchronous", progress=said.append) as r:
        estimate_text(r, text_parts([path], 300), 4, tmp_path / "c.arpa", cutoffs=cut, ranges=3, leaf_rows=40)
    assert any("ran twice" in m for m in said), (calls, said)
    assert_same_model(ref, tmp_path / "c.arpa")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.arpa", "b.arpa", "b.arpa.gz", "c.arpa"]


@pytest.mark.parametrize("method,cut", METHODS)
@pytest.mark.parametrize("n,leaf_rows", [(80, 4), (300, 40)])
def test_divided_partitions_match_in_memory(tmp_path, method, cut, n, leaf_rows):
    """Partitions of frequent last words divided by the words before them (down to suffixes of
    N - 1 words, whose copies several partitions hold): the same model."""
    lines = _corpus(n=n)
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    ref = estimate(count_ngrams(lines, 4), method, cutoffs=cut)
    with open_runner("synchronous") as r:
        estimate_text(r, text_parts([tmp_path / "in.txt"], 300), 4, tmp_path / "o.arpa", method=method, cutoffs=cut,
                      ranges=3, leaf_rows=leaf_rows)
    assert_same_model(ref, tmp_path / "o.arpa")


def test_layout_puts_every_row_with_its_suffixes():
    """Every n-gram's leaf holds its suffixes: the leaf's suffix ends the row and the word
    before it lies in the leaf's range; a row that is a split suffix goes to its node's owner,
    and every leaf under that node holds a copy."""
    from fsmlearn.lm.scale.layout import Layout
    V = 6
    # last words 0..2 | 3..5; word 1 split by the word before it ({0, 1} | {2} | {3..5}); (2, 1) split again
    lay = Layout(np.array([0, 3, 6]), {(0,): np.array([0, 1, 2, 3]), (0, 1): np.array([0, 2, 3, 6]),
                                       (0, 1, 1): np.array([0, 4, 6])})
    rng = np.random.default_rng(0)
    for m in (1, 2, 3, 4):
        rows = rng.integers(0, V, (300, m)).astype(np.int32)
        leaf, node = lay.leaf_of(rows)
        for row, lf, nd in zip(rows.tolist(), leaf.tolist(), node.tolist()):
            s, lo, hi = lay.leaves[lf]
            if nd >= 0:
                suffix = lay.nodes[nd][1]
                assert tuple(row) == suffix and lf == lay.owner[nd]
                assert all(lay.leaves[u][0][-len(suffix):] == suffix for u in lay.under[nd])
            else:
                d = len(s)
                assert len(row) > d and tuple(row[len(row) - d:]) == s and lo <= row[-d - 1] < hi
                assert lay.dest(np.array([row], np.int32))[0] == lf
    assert lay.nodes[2][1] == (1,) and lay.own[lay.owner[2]] == (True,)
    assert lay.nodes[3][1] == (2, 1) and lay.own[lay.owner[3]] == (False, True)
    assert [s for s, _, _ in lay.leaves].count((2, 1)) == 2


@pytest.mark.parametrize("method", ["kneser-ney", "witten-bell", "absolute"])
def test_sentence_markers_inside_a_line_match_in_memory(tmp_path, method):
    """A literal <s> or </s> inside a sentence: a context's raw count exceeds its extensions'
    (those ending in <s> are not counted), and lm.estimate renormalises it, cutoffs or not."""
    lines = ["a <s> b", "b a", "a b </s> a", "<s> a b"] * 3 + ["b b a"]
    (tmp_path / "m.txt").write_text("\n".join(lines) + "\n")
    ref = estimate(count_ngrams(lines, 3), method)
    for leaf_rows in (None, 1):
        with open_runner("synchronous") as r:
            estimate_text(r, text_parts([tmp_path / "m.txt"], 10), 3, tmp_path / "o.arpa", method=method, ranges=2,
                          leaf_rows=leaf_rows)
        assert_same_model(ref, tmp_path / "o.arpa")


def test_compiled_scores_match_in_memory(text, tmp_path):
    """The model from the partitioned path, compiled, scores sentences as the in-memory one does."""
    from fsmlearn.lm.model import compile_lm
    path, lines = text
    ref = compile_lm(estimate(count_ngrams(lines, 4), "kneser-ney", cutoffs=[1, 1, 2, 2]))
    with open_runner("synchronous") as r:
        estimate_text(r, text_parts([path], 120), 4, tmp_path / "o.arpa", cutoffs=[1, 1, 2, 2], ranges=5)
    got = compile_lm(read_arpa(tmp_path / "o.arpa"))
    probe = lines[:50] + ["the of x unseen-word a", "", "é é é"]
    a, oov_a = ref.score(probe)
    b, oov_b = got.score(probe)
    assert np.array_equal(oov_a, oov_b)
    assert np.allclose(a, b, rtol=0, atol=1e-9)


def _scores(lm, probe):
    return lm.score(probe)


@pytest.mark.parametrize("method,cut,part_bytes,ranges,leaf_rows", [
    ("kneser-ney", None, 120, 5, None), ("kneser-ney", [1, 1, 2, 2], 7, 3, None),
    ("witten-bell", [1, 2, 2, 2], 333, 1, None), ("absolute", None, 1 << 20, 4, None),
    ("kneser-ney", [1, 1, 2, 2], 120, 3, 30), ("witten-bell", None, 333, 2, 60)])
def test_compiled_by_partitions_scores_as_compile_lm(text, tmp_path, method, cut, part_bytes, ranges, leaf_rows):
    """The compiled file written by the partitions (some divided by the words before their last)
    scores every sentence exactly as compile_lm's of the same ARPA file, and within 1e-9 of the
    in-memory model's; it passes verify()."""
    from fsmlearn.lm.compiled import CompiledLM
    from fsmlearn.lm.model import compile_lm
    path, lines = text
    with open_runner("synchronous") as r:
        estimate_text(r, text_parts([path], part_bytes), 4, tmp_path / "o.arpa", method=method, cutoffs=cut,
                      ranges=ranges, compiled=tmp_path / "o.fsm", leaf_rows=leaf_rows)
    got = CompiledLM.load(tmp_path / "o.fsm", verify=True)
    same = compile_lm(read_arpa(tmp_path / "o.arpa"))
    ref = compile_lm(estimate(count_ngrams(lines, 4), method, cutoffs=cut))
    probe = lines + ["the of x unseen-word a", "", "é é é", "<s> a </s> b"]
    a, oa = got.score(probe)
    b, ob = same.score(probe)
    c, oc = ref.score(probe)
    assert np.array_equal(oa, ob) and np.array_equal(oa, oc)
    assert np.array_equal(a, b)
    assert np.allclose(a, c, rtol=0, atol=1e-9)
    assert got.tables.num_states == same.machine.num_states and got._file["num_arcs"] == same.machine.num_arcs
    assert got.tables.max_back == same.tables.max_back and got.order == 4


@pytest.mark.parametrize("name,cut,part_bytes", [("m.arpa", None, 64), ("m.arpa", [1, 2, 2, 3], 700),
                                                  ("m.arpa.gz", [1, 1, 2, 2], 1 << 20)])
def test_arpa_compiled_by_partitions_scores_as_compile_lm(text, tmp_path, name, cut, part_bytes):
    from fsmlearn.lm.arpa import write_arpa
    from fsmlearn.lm.compiled import CompiledLM
    from fsmlearn.lm.model import compile_lm
    from fsmlearn.lm.scale.arpa import compile_arpa
    _, lines = text
    write_arpa(estimate(count_ngrams(lines, 4), cutoffs=cut), tmp_path / name)
    with open_runner("synchronous") as r:
        states, arcs, sizes = compile_arpa(r, tmp_path / name, tmp_path / "o.fsm", part_bytes)
    ref = compile_lm(read_arpa(tmp_path / name))
    got = CompiledLM.load(tmp_path / "o.fsm", verify=True)
    probe = lines + ["the of x unseen-word a", ""]
    a, oa = ref.score(probe)
    b, ob = got.score(probe)
    assert np.array_equal(a, b) and np.array_equal(oa, ob)
    assert (states, arcs) == (ref.machine.num_states, ref.machine.num_arcs)
    assert sorted(os.listdir(tmp_path)) == sorted([name, "o.fsm"])


@pytest.mark.parametrize("edit,kind,expect", [
    (lambda t: t.replace("\n-1", "\nx1", 1), "ArpaValueError", "not a number"),
    (lambda t: t.replace("ngram 3=", "ngram 3=1", 1), "ArpaCountError", "the header declares 1"),
    (lambda t: t.replace("\tthe of\t", "\tthe zzz\t", 1), "ArpaFormatError", "'zzz' is not among the 1-grams"),
])
def test_arpa_compiled_by_partitions_names_the_bad_line(text, tmp_path, edit, kind, expect):
    from fsmlearn.errors import ArpaFormatError
    from fsmlearn.lm.arpa import write_arpa
    from fsmlearn.lm.scale.arpa import compile_arpa
    _, lines = text
    write_arpa(estimate(count_ngrams(lines, 3)), tmp_path / "ok.arpa")
    bad = edit((tmp_path / "ok.arpa").read_text())
    (tmp_path / "bad.arpa").write_text(bad)
    with pytest.raises(ArpaFormatError) as e:
        read_arpa(tmp_path / "bad.arpa")
    ref = e.value
    with pytest.raises(ArpaFormatError) as e:
        with open_runner("synchronous") as r:
            compile_arpa(r, tmp_path / "bad.arpa", tmp_path / "o.fsm", 300)
    assert type(e.value).__name__ == kind and expect in str(e.value)
    assert e.value.path == ref.path and e.value.line == ref.line, (str(e.value), str(ref))
    assert not (tmp_path / "o.fsm").exists()


def test_compiled_only_without_arpa(text, tmp_path):
    from fsmlearn.lm.compiled import CompiledLM
    from fsmlearn.lm.model import compile_lm
    path, lines = text
    with open_runner("synchronous") as r:
        sizes = estimate_text(r, text_parts([path], 200), 3, None, ranges=2, compiled=tmp_path / "o.fsm")
    ref = estimate(count_ngrams(lines, 3))
    assert sizes == ref.counts
    assert os.listdir(tmp_path) == ["o.fsm"]
    a, _ = CompiledLM.load(tmp_path / "o.fsm").score(lines)
    b, _ = compile_lm(ref).score(lines)
    assert np.allclose(a, b, rtol=0, atol=1e-9)


@pytest.mark.parametrize("cut_mass", ["backoff", "interpolate"])
@pytest.mark.parametrize("method", ["kneser-ney", "witten-bell", "absolute"])
def test_estimate_from_cut_web1t_matches_in_memory(text, tmp_path, method, cut_mass):
    _, lines = text
    write_web1t(count_ngrams(lines, 4), tmp_path / "w", cutoffs=[1, 2, 2, 3])
    ref = estimate(read_web1t(tmp_path / "w"), method, cut_mass=cut_mass, smoothing=0.01)
    for leaf_rows in (None, 25):
        with open_runner("synchronous") as r:
            estimate_web1t(r, tmp_path / "w", tmp_path / "o.arpa.gz", method=method, cut_mass=cut_mass,
                           smoothing=0.01, ranges=4, leaf_rows=leaf_rows)
        assert_same_model(ref, tmp_path / "o.arpa.gz")


def test_kenlm_lmplz_agrees(text, tmp_path):
    """lmplz on the same text: the same n-grams, log10 probabilities and backoffs within its
    float precision (it computes in float32: 1e-4 is a few of its units at these magnitudes)."""
    lmplz = Path(sys.executable).parent / "lmplz"
    if not lmplz.exists():
        pytest.fail(f"KenLM's lmplz is not at {lmplz}: run make install")
    path, _ = text
    with open(path, "rb") as f:
        subprocess.run([str(lmplz), "-o", "3", "--discount_fallback", "-S", "100M", "-T", str(tmp_path)],
                       stdin=f, stdout=open(tmp_path / "k.arpa", "wb"), stderr=subprocess.DEVNULL, check=True)
    with open_runner("synchronous") as r:
        estimate_text(r, text_parts([path], 200), 3, tmp_path / "o.arpa", ranges=3)
    A, B = _table(read_arpa(tmp_path / "k.arpa")), _table(read_arpa(tmp_path / "o.arpa"))
    assert set(A) == set(B)
    for g in A:
        assert abs(A[g][0] - B[g][0]) < 1e-4, g
        assert abs((A[g][1] or 0.0) - (B[g][1] or 0.0)) < 1e-4, g


# --- a real LocalCluster of two worker processes --------------------------------------------------

@pytest.fixture(scope="module")
def cluster():
    import dask
    from distributed import Client, LocalCluster
    # a managed-memory target of one byte: every result goes to the spill folder
    # (held while the cluster lives: a worker the nanny restarts after a kill reads it again)
    # (and no nanny closed while it restarts a killed worker: see test_the_local_cluster_keeps_...)
    with dask.config.set({"distributed.worker.memory.target": 1e-9,
                          "distributed.worker.memory.spill": 1e-9,
                          "distributed.deploy.lost-worker-timeout": "30 days"}):
        lc = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="1GiB",
                          dashboard_address=":0")
        client = Client(lc)
        yield lc, client
        client.close()
        lc.close()


def _spilled(client) -> int:
    return sum(client.run(lambda dask_worker: int(dask_worker.data.spilled_total.disk)).values())


class _KillOnce:
    """A progress callable that kills one worker process when the stage named ``at`` reports,
    and records how much the workers hold on disk at each report."""

    def __init__(self, client, at: str):
        self.client, self.at, self.killed, self.spilled = client, at, None, 0

    def __call__(self, msg: str) -> None:
        self.spilled = max(self.spilled, _spilled(self.client))
        if self.killed is None and msg.startswith(self.at):
            pids = self.client.run(os.getpid)
            addr, pid = sorted(pids.items())[0]
            os.kill(pid, signal.SIGKILL)
            self.killed = addr


def test_count_on_a_local_cluster_with_a_worker_killed(cluster, text, tmp_path):
    lc, client = cluster
    path, lines = text
    write_web1t(count_ngrams(lines, 4), tmp_path / "ref", cutoffs=2)
    say = _KillOnce(client, "counting:")
    with open_runner(lc.scheduler_address, memory=1 << 30, progress=say) as r:
        count_to_web1t(r, text_parts([path], 500), 4, tmp_path / "out", cutoffs=2, ranges=4)
    assert say.killed is not None
    assert say.spilled > 0
    assert _lines(tmp_path / "out") == _lines(tmp_path / "ref")
    assert sorted(os.listdir(tmp_path)) == ["out", "ref"]          # no temporary folder left


@pytest.mark.parametrize("method,cut,leaf_rows,at", [("kneser-ney", [1, 2, 2, 3], None, "estimation: merging"),
                                                     ("witten-bell", None, None, "estimation: merging"),
                                                     ("kneser-ney", [1, 1, 2, 2], 60, "estimation: dividing")])
def test_estimate_on_a_local_cluster_with_a_worker_killed(cluster, text, tmp_path, method, cut, leaf_rows, at):
    lc, client = cluster
    path, lines = text
    ref = estimate(count_ngrams(lines, 4), method, cutoffs=cut)
    say = _KillOnce(client, at)
    with open_runner(lc.scheduler_address, memory=1 << 30, progress=say) as r:
        estimate_text(r, text_parts([path], 400), 4, tmp_path / "o.arpa", method=method, cutoffs=cut, ranges=3,
                      compiled=tmp_path / "o.fsm", leaf_rows=leaf_rows)
    assert say.killed is not None
    assert say.spilled > 0
    assert_same_model(ref, tmp_path / "o.arpa")
    from fsmlearn.lm.compiled import CompiledLM
    from fsmlearn.lm.model import compile_lm
    a, _ = CompiledLM.load(tmp_path / "o.fsm", verify=True).score(lines)
    b, _ = compile_lm(read_arpa(tmp_path / "o.arpa")).score(lines)
    assert np.array_equal(a, b)
    assert sorted(os.listdir(tmp_path)) == ["o.arpa", "o.fsm"]      # the workers' pieces are gone


def test_web1t_input_on_a_local_cluster(cluster, text, tmp_path):
    """Web1T files read by the workers: rewritten with a cutoff, and estimated (counts cut before)."""
    lc, client = cluster
    _, lines = text
    write_web1t(count_ngrams(lines, 4), tmp_path / "w", cutoffs=2)
    write_web1t(read_web1t(tmp_path / "w"), tmp_path / "ref", cutoffs=3)
    ref = estimate(read_web1t(tmp_path / "w"), "kneser-ney")
    with open_runner(lc.scheduler_address, memory=1 << 30) as r:
        reweb1t(r, tmp_path / "w", tmp_path / "out", cutoffs=3, ranges=3)
        estimate_web1t(r, tmp_path / "w", tmp_path / "o.arpa.gz", ranges=3)
    assert _lines(tmp_path / "out") == _lines(tmp_path / "ref")
    assert_same_model(ref, tmp_path / "o.arpa.gz")
    assert sorted(os.listdir(tmp_path)) == ["o.arpa.gz", "out", "ref", "w"]


def test_workers_paused_too_long_end_the_job_with_one_line(cluster, monkeypatch):
    """The watchdog of Runner.wait: every worker paused (over 80 % of its budget) and nothing
    finishing for PAUSED_LIMIT seconds is an ArgumentError naming the budget."""
    import time as _time
    from fsmlearn.errors import ArgumentError
    from fsmlearn.lm.scale import cluster as cl
    lc, client = cluster
    monkeypatch.setattr(cl, "PAUSED_LIMIT", 1)
    with open_runner(lc.scheduler_address, memory=1 << 30) as r:
        assert r._all_paused() is False                 # a real answer from the scheduler: running
        monkeypatch.setattr(r, "_all_paused", lambda: True)
        f = r.submit(_time.sleep, 30)
        t0 = _time.time()
        with pytest.raises(ArgumentError, match=r"paused for 1 s, over 80 % of its memory budget of 1.0 GiB"):
            r.wait([f], "sleeping")
        assert _time.time() - t0 < 20
        client.cancel(f)


# --- the command line ----------------------------------------------------------------------------

def _run(args, **kw):
    return subprocess.run(FSMLEARN + args, capture_output=True, text=True, **kw)


def test_the_local_cluster_keeps_a_worker_killed_while_a_lost_worker_timer_runs():
    """Dask's SpecCluster closes a worker's nanny when, lost-worker-timeout after a worker of
    that name left, none of that name is registered: a timer left by one kill fired while the
    nanny restarted its worker after the next (reproduced with kills 14.7 s apart) and the
    cluster lost the worker for good. With the timeout at zero the timer fires before any
    restart can register; the embedded cluster must still get its worker back."""
    import dask
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "0s"}):
        with open_runner("local", workers=2, memory=1 << 30) as r:
            client = r.client
            addr, pid = sorted(client.run(os.getpid).items())[0]
            os.kill(pid, signal.SIGKILL)
            deadline = time.time() + 60
            while addr in client.scheduler_info()["workers"] and time.time() < deadline:
                time.sleep(0.05)
            assert addr not in client.scheduler_info()["workers"]
            client.wait_for_workers(2, timeout=60)
            time.sleep(0.5)             # a nanny closed late would leave by now
            assert len(client.scheduler_info()["workers"]) == 2
        assert dask.config.get("distributed.deploy.lost-worker-timeout") == "0s"


def test_runners_open_at_once_share_the_lost_worker_setting_and_the_last_gives_it_back():
    import dask
    from fsmlearn.lm.scale import cluster as C
    key = "distributed.deploy.lost-worker-timeout"
    with dask.config.set({key: "7s"}):
        C._keep_lost_workers()
        C._keep_lost_workers()
        assert dask.config.get(key) == "30 days"
        C._release_lost_workers()                   # the first closed: the other still lives
        assert dask.config.get(key) == "30 days"
        C._release_lost_workers()
        assert dask.config.get(key) == "7s"


@pytest.mark.parametrize("workers,threads", [(2, 1), (1, 2)])
def test_cli_count_on_a_local_cluster_matches_in_memory(text, tmp_path, workers, threads):
    path, _ = text
    a = _run(["lm", "count", str(path), "-o", str(tmp_path / "a"), "--order", "3", "--workers", str(workers),
              "--worker-threads", str(threads), "--memory", "1G", "--tmp", str(tmp_path)])
    assert a.returncode == 0, a.stderr
    assert f"Dask LocalCluster: {workers} worker processes x {threads} thread(s)" in a.stderr
    b = _run(["lm", "count", str(path), "-o", str(tmp_path / "b"), "--order", "3", "--scheduler", "in-memory"])
    assert b.returncode == 0, b.stderr
    assert _lines(tmp_path / "a") == _lines(tmp_path / "b")
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]               # the scratch folder is gone


def test_cli_estimate_compiled_on_a_local_cluster_scores_as_in_memory(text, tmp_path):
    from fsmlearn.lm.compiled import CompiledLM
    path, lines = text
    a = _run(["lm", "estimate", str(path), "--compiled", str(tmp_path / "a.fsm"), "--order", "3", "--workers", "2",
              "--memory", "1G", "-q"])
    assert a.returncode == 0, a.stderr
    b = _run(["lm", "estimate", str(path), "--compiled", str(tmp_path / "b.fsm"), "-o", str(tmp_path / "b.arpa"),
              "--order", "3", "--scheduler", "in-memory", "-q"])
    assert b.returncode == 0, b.stderr
    sa, _ = CompiledLM.load(tmp_path / "a.fsm", verify=True).score(lines)
    sb, _ = CompiledLM.load(tmp_path / "b.fsm", verify=True).score(lines)
    assert np.allclose(sa, sb, rtol=0, atol=1e-9)
    assert sorted(os.listdir(tmp_path)) == ["a.fsm", "b.arpa", "b.fsm"]
    r = _run(["lm", "estimate", str(path), "--order", "3"])
    assert r.returncode == 2 and "give -o MODEL.arpa, --compiled MODEL.fsm or both" in r.stderr


def test_cli_compile_on_a_local_cluster_scores_as_in_memory(text, tmp_path):
    from fsmlearn.lm.arpa import write_arpa
    from fsmlearn.lm.compiled import CompiledLM
    _, lines = text
    write_arpa(estimate(count_ngrams(lines, 3), cutoffs=[1, 2, 2]), tmp_path / "m.arpa.gz")
    a = _run(["lm", "compile", str(tmp_path / "m.arpa.gz"), "-o", str(tmp_path / "a.fsm"), "--workers", "2",
              "--memory", "1G"])
    assert a.returncode == 0, a.stderr
    assert "Dask LocalCluster: 2 worker processes" in a.stderr
    b = _run(["lm", "compile", str(tmp_path / "m.arpa.gz"), "-o", str(tmp_path / "b.fsm"), "-q"])
    assert b.returncode == 0, b.stderr
    sa, _ = CompiledLM.load(tmp_path / "a.fsm", verify=True).score(lines)
    sb, _ = CompiledLM.load(tmp_path / "b.fsm", verify=True).score(lines)
    assert np.array_equal(sa, sb)
    bad = tmp_path / "bad.arpa"
    bad.write_text(gzip.open(tmp_path / "m.arpa.gz", "rt").read().replace("\n-", "\n+x", 3))
    r = _run(["lm", "compile", str(bad), "-o", str(tmp_path / "c.fsm"), "--workers", "2", "-q"])
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and f"{bad}:" in r.stderr and "not a number" in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["a.fsm", "b.fsm", "bad.arpa", "m.arpa.gz"]


def test_cli_bad_line_found_by_a_worker_is_located(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"a b c\n" * 40 + b"a \xff b\n" + b"c d\n" * 10)
    out = tmp_path / "o"
    r = _run(["lm", "count", str(p), "-o", str(out), "--order", "3", "--scheduler", "synchronous"])
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == (f"fsmlearn: error: {p}:41: bytes that are not UTF-8 at column 3: "
                                                  "b'\\xff b'")
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["bad.txt"]


@pytest.mark.parametrize("args,expect", [
    (["--scheduler", "tcp://127.0.0.1"], "expected local, synchronous, in-memory or a scheduler address"),
    (["--scheduler", "tcp://127.0.0.1:9/x"], "expected local, synchronous, in-memory or a scheduler address"),
    (["--scheduler", "in-memory", "--workers", "2"], "--workers starts that many local workers"),
    (["--scheduler", "in-memory", "--memory", "2G"], "the in-memory path has no workers"),
    (["--memory", "lots"], "expected a size such as 2G"),
    (["--tmp", "IN"], "not a folder"),
    (["--tmp", "/nonexistent/x"], "no such folder"),
    (["--workers", "2", "--memory", "1000T"], "is more than this machine's"),
    (["--scheduler", "synchronous", "--worker-threads", "2"], "--worker-threads sets the threads of local workers")])
def test_cli_scale_options_are_checked_on_every_path(text, tmp_path, args, expect):
    path, _ = text
    args = [str(path) if a == "IN" else a for a in args]
    r = _run(["lm", "estimate", str(path), "-o", str(tmp_path / "o.arpa"), "-q"] + args)
    assert r.returncode == 2 and expect in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "o.arpa").exists()


def test_cli_bad_line_found_by_a_cluster_worker_is_one_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"a b c\n" * 40 + b"a \xff b\n" + b"c d\n" * 10)
    r = _run(["lm", "estimate", str(p), "-o", str(tmp_path / "o.arpa"), "--order", "3", "--workers", "2", "-q"])
    assert r.returncode == 2
    assert r.stderr == f"fsmlearn: error: {p}:41: bytes that are not UTF-8 at column 3: b'\\xff b'\n", r.stderr
    assert sorted(os.listdir(tmp_path)) == ["bad.txt"]


def test_cli_unreachable_scheduler_is_one_line(text, tmp_path):
    path, _ = text
    r = _run(["lm", "estimate", str(path), "-o", str(tmp_path / "o.arpa"), "--scheduler", "tcp://127.0.0.1:9"])
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "cannot reach the Dask scheduler" in r.stderr
    assert not (tmp_path / "o.arpa").exists()


@pytest.mark.parametrize("bad,expect", [("--memory=1M", "a worker needs at least 1024 MB"),
                                        ("--memory=lots", "expected a size such as 2G"),
                                        ("--scheduler=nowhere", "expected local, synchronous")])
def test_cli_bad_scale_options(text, tmp_path, bad, expect):
    path, _ = text
    r = _run(["lm", "count", str(path), "-o", str(tmp_path / "o"), bad])
    assert r.returncode == 2 and expect in r.stderr and r.stderr.count("\n") == 1


def test_cli_web1t_without_a_prefix_is_located_by_the_partitioned_path(tmp_path):
    d = tmp_path / "w"
    for sub, name, body in [("1gms", "vocab", "<S>\t3\nthe\t3\ncat\t3\n</S>\t3\n"),
                            ("2gms", "2gm-0000", "<S> the\t3\nthe cat\t2\n"),
                            ("3gms", "3gm-0000", "<S> the cat\t2\nthe cat </S>\t2\n")]:
        (d / sub).mkdir(parents=True, exist_ok=True)
        (d / sub / name).write_text(body)
    r = _run(["lm", "estimate", "--counts", str(d), "-o", str(tmp_path / "m.arpa"), "--scheduler", "synchronous"])
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        f"fsmlearn: error: {d / '3gms' / '3gm-0000'}:2: 3-gram without its suffix 'cat </S>' among the 2-grams "
        "(a suffix's count is at least the n-gram's): 'the cat </S>'")
    assert sorted(os.listdir(tmp_path)) == ["w"]


def test_cli_ctrl_c_on_a_local_cluster_leaves_nothing(tmp_path):
    """SIGINT to the whole process group (a terminal's Ctrl-C) once the counting has started:
    exit 130 with one line, no worker traceback, no output, no temporary folder, no worker left."""
    rng = random.Random(5)
    words = [f"w{i}" for i in range(3000)]
    big = tmp_path / "big.txt"
    with open(big, "w") as f:
        for _ in range(150_000):
            f.write(" ".join(rng.choice(words) for _ in range(rng.randint(1, 15))) + "\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    p = subprocess.Popen(FSMLEARN + ["lm", "estimate", str(big), "-o", str(tmp_path / "o.arpa"), "--order", "4",
                                     "--workers", "2", "--tmp", str(scratch)],
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         # as a terminal starts it: SIGINT at its default (a test run in the background
                         # inherits it ignored, and Python then installs no KeyboardInterrupt handler)
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    for line in p.stderr:
        lines.append(line)
        if "counting:" in line or "estimation:" in line:
            break
    os.killpg(p.pid, signal.SIGINT)
    rest = p.stderr.read()
    assert p.wait(timeout=60) == 130, "".join(lines) + rest
    assert rest.strip().splitlines()[-1] == "fsmlearn: interrupted", rest
    assert "Traceback" not in rest and "ERROR" not in rest, rest
    assert sorted(os.listdir(tmp_path)) == ["big.txt", "scratch"] and os.listdir(scratch) == []


@pytest.mark.parametrize("second,why", [("a b\t1\nb </S>\t2\n", "1: listed twice: 'a b'"),
                                        ("<S> b\t1\n", "1: out of order (the lines must be in byte order): '<S> b'"),
                                        ("b a\t1\nb </S>\t2\n", "2: out of order (the lines must be in byte "
                                                                  "order): 'b </S>'"),
                                        ("b </S>\t9\n", "1: count 9 exceeds the vocabulary's count of one of its "
                                                         "words: 'b </S>'")])
def test_web1t_files_out_of_order_across_files_are_located(tmp_path, second, why):
    """Each file is checked in a task; the order across files by the client, as read_web1t checks
    the order's lines as a whole."""
    from fsmlearn.errors import CorpusFormatError
    d = tmp_path / "w"
    (d / "1gms").mkdir(parents=True)
    (d / "2gms").mkdir()
    (d / "1gms" / "vocab").write_text("<S>\t3\na\t3\nb\t3\n</S>\t3\n")
    (d / "2gms" / "2gm-0000").write_text("<S> a\t2\na b\t1\n")
    (d / "2gms" / "2gm-0001").write_text(second)
    with pytest.raises(CorpusFormatError) as ref:
        read_web1t(d)
    with open_runner("synchronous") as r:
        with pytest.raises(CorpusFormatError) as got:
            estimate_web1t(r, d, tmp_path / "o.arpa")
    assert str(got.value) == f"{d / '2gms' / '2gm-0001'}:{why}"
    assert str(ref.value) == str(got.value)
    assert sorted(os.listdir(tmp_path)) == ["w"]


def test_task_results_travel_as_files_and_read_back_exactly(tmp_path):
    """A task's large arrays leave it as one file (a tuple's items: one file each), small values
    inline; reading back gives the arrays bit for bit; discarding removes the files."""
    from fsmlearn.lm.scale.cluster import FILE_BYTES, Saved, _load, _paths, _save
    rng = np.random.default_rng(1)
    big = rng.random(FILE_BYTES // 8 + 3)
    rows = rng.integers(0, 1 << 30, (FILE_BYTES // 8, 3)).astype(np.int32)
    empty = np.zeros((0, 4), np.int32)
    small = np.arange(5)
    x = ({"p": {1: big, 2: rows}, "n": 3, "e": empty}, [(rows[:, 1:], small)], "words")
    saved = _save(x, str(tmp_path))
    assert isinstance(saved[0]["p"][1], Saved) and isinstance(saved[1][0][0], Saved)
    assert saved[0]["e"] is empty and saved[1][0][1] is small and saved[2] == "words"
    files = _paths(saved, set())
    assert len(files) == 2 and sorted(os.listdir(tmp_path)) == sorted(os.path.basename(f) for f in files)
    back = _load(saved)
    assert back[0]["p"][1].tobytes() == big.tobytes() and back[0]["p"][1].dtype == big.dtype
    assert np.array_equal(back[0]["p"][2], rows) and back[0]["p"][2].dtype == np.int32
    assert np.array_equal(back[1][0][0], rows[:, 1:]) and back[0]["n"] == 3
    with open_runner("synchronous", tmp=str(tmp_path)) as r:
        r.discard(saved)
    assert os.listdir(tmp_path) == []
