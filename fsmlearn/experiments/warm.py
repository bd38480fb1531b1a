"""Compile (and so cache on disk) the numba kernels that users hit: ``make warm``.

Every kernel of the package is a module-level ``@numba.njit(cache=True)``
function, so a process that finds it in numba's on-disk cache loads it instead
of compiling it.  This module fills that cache once, at install time, by running
each code path on tiny synthetic inputs (built in a temporary directory that is
removed afterwards; no corpus is read, so it runs before ``../shared`` exists),
so that a fresh install never pays the compilation at first use.  Families, in
the order they run:

* ``engine``: :mod:`fsmlearn.algo` on small random machines, acyclic and cyclic,
  with and without failure (phi) arcs, in every semiring the public functions
  take (real, log, tropical, expectation with one and two values per arc):
  shortest distance, forward-backward, posteriors, expectation, entropy, best
  path, sampling, composition, intersection, trim, sequence scoring, the dense
  chains, pynini conversion and the machine files (the README's quick start).
* ``lm``: backoff LMs on a few hundred synthetic sentences: counting, Web1T
  counts, estimation by each method, ARPA files plain and gzipped, compiling,
  scoring (one and two threads), KenLM's query figures, perplexity, sampling, on
  a model compiled in the process, one mapped from its file and one of the
  previous file format.
* ``tag``: HMM taggers trained on a synthetic tagged sample, saved, loaded,
  tagging and accuracy; EM on raw text; n-gram EM on a tiny backoff LM.
* ``rcm``, ``trf``, ``mrf``: the smallest realistic training, decoding and
  scoring calls of the reified context models, the TRF LMs and the MRF LMs and
  tagger.
* ``cli``: every user command (``fsmlearn demo``, ``lm count/web1t/estimate/
  compile/score/query/ppl/sample/check``, ``tag train/tag/eval``, ``trf score``)
  once, each in a fresh process as a user runs it (``python -m
  fsmlearn.cli.main``: this layer does not import the CLI), after the families
  above have filled the cache.

The CUDA kernels (:mod:`fsmlearn.algo.cuda`, :mod:`fsmlearn.algo.cuda.tied`)
are left out: they compile for the device they run on.

Each family prints one line with its seconds to stderr, and the total at the
end.  Run ``python -m fsmlearn.experiments.warm`` (``--only engine,lm`` for some
families); numba caches beside the package's sources, or under
``NUMBA_CACHE_DIR`` when that is set.

Public names: FAMILIES, synthetic_sentences, synthetic_tagged, warm_engine,
warm_lm, warm_tag, warm_rcm, warm_trf, warm_mrf, warm_cli, run, main.
"""

from __future__ import annotations

import argparse
import io
import itertools
import math
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..testing.machines import backoff_machine, random_machine

# --------------------------------------------------------------------- helpers


def _random_machine(rng, n, E, cyclic=True, mass=0.9, labels=5, semiring="log"):
    return random_machine(rng, n, E, cyclic=cyclic, mass=mass, labels=labels, semiring=semiring)


# ---------------------------------------------------------------------- engine


def warm_engine(tmp: Path) -> None:
    """The engine's public functions on small random machines (acyclic, cyclic, one big
    component, self-loops only; backoff machines with failure arcs, log and real weights) in
    every semiring, the README's quick start, the demo, pynini conversion and the files."""
    from ..algo import (arc_posteriors, backward, best_path, compose,
                       entropy, expectation, final_posteriors, forward, forward_backward, intersect,
                       label_strings, linear_system, log_partition_gradient, phi_expand, phi_structure,
                       product_expectation, product_expectation_gradient, product_log_partition_gradient,
                       product_posteriors, sample_paths, score_sequences, shortest_distance, tag_product,
                       total_weight, trim)
    rng = np.random.default_rng(0)
    machines = []
    for cyclic in (False, True):
        for sr in ("log", "real", "tropical"):
            machines.append(_random_machine(rng, 12, 30, cyclic=cyclic, mass=0.8, semiring=sr))
    machines.append(_random_machine(rng, 300, 2000, cyclic=True, mass=0.9))      # one big component
    machines.append(_random_machine(rng, 1, 2, cyclic=True, mass=0.5))           # self-loops only
    # past the size where the schedule finds a large component by reachability sweeps
    big = _random_machine(np.random.default_rng(1), 5000, 30000, cyclic=True, mass=0.9)
    for reverse in (False, True):
        shortest_distance(big, "log", reverse=reverse)
    # those sweeps one after the other, as a process with one of numba's threads runs them
    from ..algo.schedule import _pull_on, _reached_from, _reaching
    _reached_from(big.num_states, big.src_start, big.dst, 0, 8)
    bits, _ = _reaching(big.num_states, big.src_start, big.dst, 0, 1)
    _pull_on(big.num_states, big.src_start, big.dst, 7, bits, 1)
    # the cache bands' layout kernels (only components of 2**18 states get bands: lowered here)
    from ..algo import bands
    keep = bands.BAND_BITS, bands.BAND_MIN_STATES
    bands.BAND_BITS, bands.BAND_MIN_STATES = 8, 1000
    try:
        for reverse in (False, True):
            shortest_distance(big.replace(), "log", reverse=reverse)
    finally:
        bands.BAND_BITS, bands.BAND_MIN_STATES = keep
    # the two-thread acyclic pass (machines of 2**20 arcs or more: lowered here), solved three
    # times (no copy, the copy made on the way, the copy read), and -log over the threads
    from ..algo import shortest as shortest_module
    from ..semiring.ops import scaled_to_neglog_par
    keep_pipe = shortest_module._PIPE_MIN_ARCS, shortest_module._PIPE_MIN_THREADS
    shortest_module._PIPE_MIN_ARCS = shortest_module._PIPE_MIN_THREADS = 1
    try:
        for reverse in (False, True):
            dag = _random_machine(np.random.default_rng(2), 3000, 20000, cyclic=False, mass=0.9)
            for _ in range(3):
                shortest_distance(dag, "log", reverse=reverse)
    finally:
        shortest_module._PIPE_MIN_ARCS, shortest_module._PIPE_MIN_THREADS = keep_pipe
    scaled_to_neglog_par(np.ones((10, 2)), np.empty(10))
    # the threaded gather and conversions of a large machine's weights (from PAR_ROWS arcs)
    from ..algo.solve_linear import gather_par
    from ..semiring.ops import neglog_to_scaled_at_par, neglog_to_scaled_par
    w, idx = np.ones(10), np.arange(10, dtype=np.int64)
    gather_par(w, idx)
    neglog_to_scaled_par(w, np.empty((10, 2)), 0, 1, 1.0)
    neglog_to_scaled_at_par(w, idx, np.empty((10, 2)), 0, 1, 1.0)
    # normalised backoff machines whose backoff weights stay below 1 and which also converge
    # with failure arcs read as epsilons (the warm step runs that too): seeds found so
    phis = [backoff_machine(np.random.default_rng(seed), V=V, order=3, p_final=0.3)
            for seed, V in ((23, 3), (13, 4))]
    phis.append(phis[0].replace(weight=np.exp(-phis[0].weight), final=np.exp(-phis[0].final),
                                semiring="real"))
    for m in machines + phis:
        E = m.num_arcs
        for reverse in (False, True):
            for sr in ("real", "log", "tropical"):
                # the tropical semiring takes failure arcs as epsilons (it cannot subtract)
                shortest_distance(m, sr, reverse, phi="epsilon" if m.has_phi and sr == "tropical" else "failure")
            for R in (1, 2):
                vals = rng.random((E, R)) if R > 1 else rng.random(E)
                shortest_distance(m, "expectation", reverse, arc_values=vals)
        forward(m)
        backward(m, "real")
        total_weight(m)
        fb = forward_backward(m)
        _ = fb.alpha, fb.beta                           # computed on first use
        arc_posteriors(m)
        final_posteriors(m)
        log_partition_gradient(m)
        expectation(m, rng.random(E))
        expectation(m, rng.random((E, 2)), rng.random((m.num_states, 2)))
        entropy(m)
        p = best_path(phi_expand(m) if m.has_phi else m)
        label_strings(m, p)
        s = sample_paths(m, 20, seed=1)
        label_strings(m, s)
        trim(m)
    for m in phis:
        forward_backward(m, phi="epsilon")
        shortest_distance(m, "log", phi="epsilon")
        sample_paths(m, 20, seed=2, normalised=True)
        phi_expand(m)
        linear_system(m)
        phi_structure(m, phi_final=False)
        forward_backward(m, phi_final=False)
        lab = rng.integers(1, 4, 30).astype(np.int32)
        ptr = np.array([0, 5, 5, 12, 30], np.int64)
        score_sequences(m, ptr, lab)
        score_sequences(m, ptr, lab, per_word=True)
        score_sequences(m, ptr, lab, threads=2)
        a = _random_machine(rng, 5, 12, cyclic=True, labels=3)
        compose(a, m)
        compose(a, m, return_pairs=True)
        intersect(a, m)
    # tagged products: blocks by previous tag or not, with and without a transition factor
    for m in phis:
        T = 2
        lab = np.asarray(m.ilabel)
        n = np.where(lab > 0, 1 + (np.arange(m.num_arcs) % T), 0)
        ptr = np.concatenate([[0], np.cumsum(n)]).astype(np.int64)
        tags = np.concatenate([np.arange(k) for k in n]).astype(np.int64)
        for W, H in ((1, None), (T + 1, rng.uniform(0.1, 0.5, (T + 1, T + 1)))):
            w = rng.uniform(0.1, 0.5, (ptr[-1], W))
            p = tag_product(m, T, ptr, tags, w, H)
            product_posteriors(p)
            product_log_partition_gradient(p)
            product_expectation(p, rng.random(ptr[-1]), rng.random((T + 1, T + 1)), rng.random(m.num_states))
            product_expectation_gradient(p, rng.random((ptr[-1], W)), rng.random((T + 1, T + 1)))
    a, b = machines[0], machines[4]
    compose(a, b)
    intersect(b, a, connect=False)
    compose(machines[2], machines[5])            # tropical o tropical
    # warm starts (the phi solver turns a forward start into its own variables)
    for m in (machines[4], phis[0]):
        fb = forward_backward(m)
        forward_backward(m, init_alpha=fb.alpha, init_beta=fb.beta)
        shortest_distance(m, "log", init=fb.alpha)
    # many sequences: the parallel scorer
    lab = rng.integers(1, 4, 30_000).astype(np.int32)
    ptr = np.arange(0, 30_001, 10, dtype=np.int64)
    score_sequences(phis[0], ptr, lab, threads=2)
    score_sequences(phis[0], ptr, lab, threads=2, per_word=True)
    # symbol tables, pynini and the file formats (the README's demo)
    from ..fsm import Machine, SymbolTable
    from .demo import build_demo_machine, run_demo
    syms = SymbolTable(["<eps>", "a", "b", "c"])
    m = Machine.from_arcs(3, 0, [np.inf, 1.0, 0.5], [0, 0, 1, 1], [1, 2, 2, 1], [1, 2, 3, 1],
                          weight=[0.5, 1.0, 0.2, 2.0], isyms=syms, osyms=syms)
    compose(m, m)
    # the README's quick start: a pynini machine, its posteriors, entropy and sampled strings
    import pynini
    a = pynini.accep("a", weight=pynini.Weight("log64", -math.log(0.5)), arc_type="log64")
    b = pynini.accep("b", weight=pynini.Weight("log64", -math.log(0.25)), arc_type="log64")
    fst = pynini.concat(a, b.closure()).closure().optimize()
    m = Machine.from_pynini(fst)
    forward_backward(m)
    entropy(m)
    m = m.replace(isyms=SymbolTable(["a", "b"], keys=[ord("a"), ord("b")]))
    label_strings(m, sample_paths(m, 5, seed=1), sep="")
    m.to_pynini()
    for cyclic in (True, False):
        run_demo(io.StringIO(), cyclic=cyclic)
        dm = Machine.from_pynini(build_demo_machine(cyclic))
        dm.write(tmp / "demo.fst")
        Machine.read(tmp / "demo.fst")
        dm.save(tmp / "demo.npz")
        Machine.load(tmp / "demo.npz")
        dm.to_pynini()
        best_path(dm).input_string(dm)
    # chains of label layers: the dense-chain schedule in both semirings, and their arcs written out
    from ..fsm import ChainBatch
    V = 4
    init = np.log(rng.dirichlet(np.ones(V)))
    trans = np.log(rng.dirichlet(np.ones(V), size=V))
    un = [np.log(rng.random((L, V))) for L in (1, 3, 3, 6)]
    for cb in (ChainBatch.dense(init, trans, un),
               ChainBatch([0, 2], [0, 0], [0, 2], [0, 1], [0.5, 0.25], np.full((3, 3), 0.5), "real")):
        forward_backward(cb)
        total_weight(cb)
        best_path(cb)
        forward_backward(cb.materialise()[0])


# -------------------------------------------------------------------------- lm


def synthetic_sentences(n: int = 400, vocab: int = 60, seed: int = 0) -> list[list[str]]:
    """``n`` sentences of a random bigram chain over ``vocab`` words with Zipf-like
    frequencies (3 to 15 words each): text with repeated n-grams of every order."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(vocab)]
    zipf = 1.0 / np.arange(1, vocab + 1)
    trans = rng.dirichlet(np.full(vocab, 0.3), size=vocab) * 0.5 + 0.5 * zipf / zipf.sum()
    out = []
    for _ in range(n):
        L = int(rng.integers(3, 16))
        x = int(rng.choice(vocab, p=zipf / zipf.sum()))
        sent = [words[x]]
        for _ in range(L - 1):
            x = int(rng.choice(vocab, p=trans[x]))
            sent.append(words[x])
        out.append(sent)
    return out


def _write_text(path: Path, sentences) -> Path:
    path.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
    return path


def warm_lm(tmp: Path) -> None:
    """The LM library on a few hundred synthetic sentences: counting (text, ids, Web1T),
    estimation by each method (ARPA plain and gzipped), compiling, scoring, KenLM's query
    figures, perplexity and sampling, on a model compiled in this process, one mapped from
    its file and one of the previous file format."""
    from ..algo import sample_paths
    from ..lm.arpa import check_arpa, read_arpa, write_arpa
    from ..lm.compiled import CompiledLM
    from ..lm.counts import count_corpus, count_ngrams
    from ..lm.estimate import estimate
    from ..lm.model import check_normalised, compile_lm, epsilon_approximation, event_mass
    from ..lm.query import score_blocks, score_words, stream_blocks, summary_lines, write_query
    from ..lm.sample import sample_sentences, sample_text
    from ..lm.score import load_lm, perplexity
    from ..lm.web1t import read_web1t, write_web1t
    sents = synthetic_sentences(400)
    train = sents[:350]
    counts = count_ngrams(train, 3)
    count_ngrams(train, 3, chunk_tokens=500)               # several runs, merged
    counts4 = count_ngrams(train, 4)
    write_web1t(counts, tmp / "counts")
    write_web1t(counts4, tmp / "cut", cutoffs=[1, 1, 2], keep_bigrams=True)
    web = read_web1t(tmp / "counts")
    cut = read_web1t(tmp / "cut", max_order=4)
    vocab = sorted({w for x in sents for w in x})
    wid = {w: i for i, w in enumerate(vocab)}
    ids = np.array([wid[w] for x in sents for w in x], np.int32)
    ptr = np.concatenate([[0], np.cumsum([len(x) for x in sents])]).astype(np.int64)
    count_corpus(ptr, ids, vocab, 3, cutoffs=2, keep_bigrams=True)
    arpas = []
    for method in ("kneser-ney", "witten-bell", "absolute"):
        lm = estimate(counts, method)
        for ext in (".arpa", ".arpa.gz"):
            arpas.append(tmp / f"{method}{ext}")
            write_arpa(lm, arpas[-1])
    estimate(counts4, cutoffs=[1, 1, 2], keep_bigrams=True)
    estimate(web, "absolute", discount=0.5, smoothing=0.1)
    estimate(cut, cut_mass="interpolate")
    estimate(counts, discounts=[(0.5, 1.0, 1.5)] * 3)
    # the partitioned passes (lm.scale), in this process: the kernels the workers run
    from ..lm.scale.cluster import open_runner
    from ..lm.scale.count import count_ids_to_web1t, count_to_web1t, text_parts
    from ..lm.scale.kn import estimate_text, estimate_web1t
    (tmp / "train.txt").write_text("\n".join(" ".join(x) for x in train) + "\n", encoding="utf-8")
    np.save(tmp / "ptr.npy", ptr)
    np.save(tmp / "ids.npy", ids)
    with open_runner("synchronous", tmp=str(tmp)) as runner:
        parts = text_parts([tmp / "train.txt"], 2000)
        count_to_web1t(runner, parts, 4, tmp / "scaled", cutoffs=[1, 1, 2], keep_bigrams=True, ranges=2)
        count_ids_to_web1t(runner, tmp / "ptr.npy", tmp / "ids.npy", vocab, 3, tmp / "scaled-ids", cutoffs=2,
                           keep_bigrams=True, ranges=2, tokens_per_part=1000)
        estimate_text(runner, parts, 3, tmp / "scaled.arpa", ranges=2, cutoffs=[1, 1, 2], compiled=tmp / "scaled.fsm",
                      leaf_rows=50)             # ranges divided by the words before their last (layout.py)
        estimate_web1t(runner, tmp / "cut", tmp / "scaled-web1t.arpa.gz", ranges=2)
    for a in arpas:
        check_arpa(a)
    bo = read_arpa(arpas[0])
    bo.index.find(bo.ngrams[1][0])
    built = compile_lm(bo)                      # compiled in this process: writable tables
    built.save(tmp / "m.lm")
    built.machine.save(tmp / "old.fsm")         # the file format before the mapped one
    lines = [" ".join(x) for x in sents[350:]] + ["unseen w1 words", "", "<unk> w0"]
    text = ("\n".join(lines) + "\n").encode()
    many = [" ".join(x) for x in sents] * 100    # over a megabyte: the threaded encoder and blocks
    big = ("\n".join(many) + "\n").encode()
    for c in (built, CompiledLM.load(tmp / "m.lm", verify=True), load_lm(tmp / "old.fsm"), load_lm(arpas[1])):
        c.score(lines)
        c.score(many, threads=2)
        c.score_bytes(text)
        c.score_bytes(big, threads=2)
        c.hist_len
        p, labels, _ = c.encode(lines)
        c.walk(p, labels, per_word=True)
        for context in (True, False):
            score_words(c, text, sentence_context=context).sentence_totals()
        score_words(c, big, threads=0)
        for verbosity in ("word", "sentence", "summary"):
            write_query(c, io.BytesIO(text), io.BytesIO(), verbosity=verbosity)
        write_query(c, io.BytesIO(big), io.BytesIO(), verbosity="summary", threads=2)
        write_query(c, io.BytesIO(text), io.BytesIO(), sentence_context=False)
        summary_lines(score_blocks(c, stream_blocks(io.BytesIO(big)), threads=2))
        perplexity(c, lines)
        sample_sentences(c, 5, seed=3)
        sample_text(c, io.BytesIO(), sentences=5, seed=1)
        sample_text(c, io.BytesIO(), tokens=50, seed=2, threads=1)
        sample_paths(c.machine, 5, seed=4)
        event_mass(c)
        check_normalised(c)
        epsilon_approximation(c)
        c.save(tmp / "again.lm")


# ------------------------------------------------------------------------- tag

# a toy grammar of Penn-tagged sentences whose tags map onto all 17 reduced tags:
# tag -> words (some words take two tags), tag -> the tags that may follow it
_TOY_WORDS = {
    "DT": ["the", "a", "this", "some"],
    "JJ": ["big", "red", "old", "new", "fast", "light"],
    "NN": ["dog", "ball", "man", "house", "run", "light", "walk", "city"],
    "NNS": ["dogs", "balls", "men", "houses", "runs", "walks"],
    "VBZ": ["runs", "walks", "sees", "likes"],
    "VBD": ["ran", "walked", "saw", "liked"],
    "VB": ["run", "walk", "see"],
    "VBG": ["running", "seeing"],
    "VBN": ["seen", "walked", "liked"],
    "IN": ["in", "on", "with", "of", "that"],
    "RB": ["fast", "slowly", "often"],
    "RP": ["up", "out"],
    "TO": ["to"],
    "PRP": ["he", "she", "it"],
    "POS": ["'s"],
    "CC": ["and", "but"],
    "WDT": ["which", "that"],
    ",": [","],
    "``": ["``"],
    "''": ["''"],
    ".": [".", "!"],
}
_TOY_NEXT = {
    "<s>": ["DT", "PRP", "NNS", "``"], "``": ["DT", "PRP"], "DT": ["JJ", "NN", "NNS"],
    "JJ": ["NN", "NNS", "JJ"], "NN": ["VBZ", "VBD", "IN", ".", "POS", "CC", ",", "WDT"],
    "NNS": ["VBD", "IN", ".", "CC", "''"], "POS": ["NN", "JJ"], "CC": ["DT", "PRP"],
    ",": ["DT", "PRP", "WDT"], "WDT": ["VBZ", "VBD"], "PRP": ["VBZ", "VBD"],
    "VBZ": ["DT", "RB", "IN", ".", "VBG", "VBN", "TO"], "VBD": ["DT", "RB", "IN", ".", "RP", "VBN"],
    "VBG": ["DT", "IN", "."], "VBN": ["IN", ".", "RB"], "RP": ["DT", "."], "TO": ["VB"],
    "VB": ["DT", "."], "IN": ["DT", "PRP"], "RB": [".", "IN"], "''": ["."],
}


def synthetic_tagged(n: int = 300, seed: int = 0) -> list[list[tuple[str, str]]]:
    """``n`` sentences of (word, Penn tag) pairs from a toy grammar (fixed seed)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        sent, t = [], "<s>"
        while t != "." and len(sent) < 25:
            nxt = _TOY_NEXT[t]
            t = nxt[int(rng.integers(len(nxt)))]
            words = _TOY_WORDS[t]
            sent.append((words[int(rng.integers(len(words)))], t))
        out.append(sent)
    return out


def warm_tag(tmp: Path) -> None:
    """HMM taggers: supervised training (the data's own tags, the Penn tags, the 17 tags), saving,
    loading, tagging and accuracy; EM on raw text; n-gram EM on a tiny backoff LM."""
    from ..data import tokenize
    from ..data.tagsets import tag_dictionary, tagset_tags, to_tag17
    from ..lm.counts import count_ngrams
    from ..lm.estimate import estimate
    from ..lm.model import compile_lm
    from ..tag import (HMM, NGramEM, accuracy, dictionary_mask, em, encode_corpus, setup_from_lm,
                       tag_sentences, train_ngram_em, train_supervised, uniform_hmm)
    from ..tag.ngram.approx import initial_theta
    from ..algo.tied.materialise import bound_materialised
    tagged = synthetic_tagged(300)
    train, held = tagged[:250], tagged[250:]
    raw = [[w for w, _ in s] for s in held] + [tokenize("the zebra quickly ran. He doesn't like it, does he?")]
    own = sorted({t for s in train for _, t in s})
    for order in (2, 3):
        for tags, map_tag in ((own, None), (None, None), (tagset_tags("tag17"), to_tag17)):
            h = train_supervised(train, tags, order=order, map_tag=map_tag)
            h.save(tmp / "hmm")
            h = HMM.load(tmp / "hmm")
            tag_sentences(h, raw)
            accuracy(h, held)
            h.unknown_scores(["zebra"])
    # EM on raw text under a tag dictionary built from the toy data
    tags = tagset_tags("tag17")
    # (a dictionary word outside the corpus: OovTags cannot yet hold an empty list of them)
    td = tag_dictionary("tag17", min_count=1, sentences=train + [[("zebra", "NN"), ("sings", "VBZ")]])
    words = [[w for w, _ in s] for s in train]
    corpus = encode_corpus(words)
    A = dictionary_mask(corpus.vocab, tags, td)
    for order in (2, 3):
        h0 = uniform_hmm(tags, corpus.vocab, A, order=order, tagdict=td)
        em(h0, corpus, A, 2, eval=held, heldout=[[w for w, _ in s] for s in held], chunk_tokens=500)
    # n-gram EM on a tiny backoff LM of the same text
    lm = compile_lm(estimate(count_ngrams(words, 3), cutoffs=[1, 1, 2], keep_bigrams=True))
    st = setup_from_lm(lm, tagdict=td)
    train_ngram_em(st, 2, eval=held, tagdict=td, heldout=[[w for w, _ in s] for s in held])
    for kw in (dict(optimizer="gradient"), dict(cond="roots"), dict(cond="all"),
               dict(threads=1), dict(estep_passes=2)):
        lt, le = initial_theta(st)
        NGramEM(st.cs, st.allowed, lt, le, **kw).run(2)
    lt, le = initial_theta(st)
    bound_materialised(st.cs, st.cs.uniform_phi(), lt, le)
    _warm_parts(st, lt, le)
    from ..algo.tied.general import bound_product, d_bound_d_phi_product, stats_product
    stats_product(st.cs, st.cs.uniform_phi(), lt, le)
    bound_product(st.cs, st.cs.uniform_phi(), lt, le)
    d_bound_d_phi_product(st.cs, st.cs.uniform_phi(), lt, le)
    from ..algo.tied import TiedEStep
    TiedEStep(st.cs, schedule="general").update(lt, le)


def _warm_parts(st, lt, le) -> None:
    """The passes as a Dask worker runs them (:mod:`fsmlearn.algo.tied.shards`): on one
    thread, over a part whose arrays, tables and inputs are read-only (mapped files), a
    signature of its own for numba."""
    from ..tag.ngram.em import NGramEM
    from ..algo.tied.sweep import pass1, pass2, pass3, pass_inputs, part_of, tables_of

    def ro(a):
        a = np.array(a)
        a.setflags(write=False)
        return a

    cs = st.cs
    tb = tables_of(cs)
    for n in vars(tb):
        if isinstance(getattr(tb, n), np.ndarray):
            setattr(tb, n, ro(getattr(tb, n)))
    N = cs.machine.num_states
    part = part_of(cs, tb, 0, N, 1, copy=True)
    for n in ("src_start", "ilabel", "weight", "wsrc", "pair", "ex_ptr", "ex_sid"):
        setattr(part, n, ro(getattr(part, n)))
    tr = NGramEM(cs, st.allowed, lt, le)
    tr.run(1)
    M, UE = pass_inputs(cs, tr.stats, tr.log_trans, tr.log_emit)
    M, UE = ro(M), ro(UE)
    Bx = ro(pass1(part, M))
    phi = cs.uniform_phi()
    for update in (True, False):
        _, G, _, _ = pass2(part, phi, M, UE, Bx, update)
        pass3(part, G, np.zeros(tb.sh_off[-1]))


# ------------------------------------------------------------------------- rcm


def warm_rcm(tmp: Path) -> None:
    """Reified context models: RCMS inference and learning, decipherment EM, alignment RCMs."""
    from ..rcm import BOS, STAR, NGramRCM, rcms
    from ..rcm.align import AlignRCM, feature_id, rcms_align
    from ..rcm.align_decode import best_alignment, decode, decode_kbest, output_marginals
    from ..rcm.align_learn import STRATEGIES, average_context_length, impute_alignments, train
    from ..rcm.decipher import AbsoluteDiscountLM, DecipherModel, em_step, mapping_accuracy
    from ..rcm.io import load_align_rcm, load_rcm, save_align_rcm, save_rcm
    from ..rcm.learn import sequence_gradient, train_supervised
    from .rcm_metrics import corpus_cer, edit_distance, exact_match
    rng = np.random.default_rng(0)
    Y, n, L = 3, 2, 6
    symbols = list(range(Y)) + [STAR, BOS]
    theta = {k + (y,): float(rng.normal()) for k in itertools.product(symbols, repeat=n) for y in range(Y)}
    model = NGramRCM(Y, n, theta, 0.0)
    unary = rng.normal(size=(L, Y))
    for B, outside, exact in ((4, 0.0, None), (4, -np.inf, None), (0, 0.0, 1), (0, 0.0, 2), (Y ** L, 0.0, None)):
        m = NGramRCM(Y, n, theta, outside)
        r = rcms(m, L, B, unary=unary, exact_order=exact)
        r.marginals()
        r.log_partition()
        r.best()
        r.mean_context_length()
    rcms(model, L, 4)
    sequence_gradient(model, [0, 1, 2, 1], 4, unary[:4])
    data = [rcms(model, 6, 20).best()[0] for _ in range(3)] + [rng.integers(0, Y, 6) for _ in range(5)]
    train_supervised(NGramRCM(Y, n, {}, 0.0), data, B=4, passes=1)
    save_rcm(model, tmp / "m.rcm", labels=["a", "b", "c"])
    load_rcm(tmp / "m.rcm")
    # decipherment: EM with RCMS contexts and on the exact first-order chain
    V = 5
    plain = [list(rng.integers(0, V, int(rng.integers(2, 9)))) for _ in range(40)]
    cipher = [list(rng.integers(0, V, int(rng.integers(2, 9)))) for _ in range(12)]
    for order in (1, 2):
        dm = DecipherModel(AbsoluteDiscountLM(plain, V, order))
        log_emit = np.log(rng.dirichlet(np.ones(V), size=V))
        _, _, counts = em_step(dm, cipher, log_emit, B=8)
        em_step(dm, cipher, log_emit, 0, exact_order=1)
        mapping_accuracy(counts, rng.permutation(V))
    # alignment RCMs on a toy spelling problem (phoneme 0 -> a, 1 -> bc, 2 3 -> d)
    units = [([0], [0]), ([1], [1, 2]), ([2, 3], [3])]
    pairs = []
    for _ in range(6):
        us = [units[u] for u in rng.integers(0, 3, rng.integers(2, 4))]
        pairs.append((np.array(sum((u[0] for u in us), [])), np.array(sum((u[1] for u in us), []))))
    for kw in (dict(n=2), dict(n=1, backoff=True, edge_bigram=False)):
        am = AlignRCM(4, 4, hash_bits=12, **kw)
        for strategy in STRATEGIES:
            train(am, pairs, strategy, B=4, passes=1, seed=0)
        x, y = pairs[0]
        hyp = [decode(am, x, 4)[0], decode(am, x, 4, method="beam")[0]]
        best_alignment(am, x, y, B=4)
        best_alignment(am, x, y, exact_order=1)
        decode_kbest(am, x, 3, 4)
        output_marginals(am, x, 4)
        average_context_length(am, x, y, B=4)
        lat = rcms_align(am, x, 4)
        lat.scores(am.theta + 0.1)                       # new weights on built contexts
        feature_id(am.hash_bits, "ngram", 0, 1)
        corpus_cer(hyp, [y, y])
        exact_match(hyp, [y, y])
        edit_distance("abc", "abd")
    impute_alignments(pairs, 4, 4, passes=1)
    save_align_rcm(am, tmp / "a.rcm")
    load_align_rcm(tmp / "a.rcm")


# ------------------------------------------------------------------------- trf


def warm_trf(tmp: Path) -> None:
    """TRF LMs: word classes, features, AugSA training, exact normalisers, sampling, scoring."""
    from ..trf.acceptor import LengthProduct, compile_acceptor
    from ..trf.augsa import AugSAConfig, empirical_stats, refine_zeta, train_augsa
    from ..trf.classes import exchange_clusters
    from ..trf.exact import exact_zeta, fit_exact
    from ..trf.features import as_corpus, build_features, make_templates
    from ..trf.io import load_trf, save_trf
    from ..trf.model import TRF, empirical_pi, length_groups
    from ..trf.rescore import compile_rescorer
    from ..trf.sampler import Sampler
    from ..trf.score import PARALLEL_TOKENS, TRFScorer, score_text
    from ..algo import score_sequences
    rng = np.random.default_rng(0)
    V = 6
    vocab = [f"w{i}" for i in range(V - 1)] + ["<unk>"]
    sents = [rng.integers(0, V, int(rng.integers(1, 9))) for _ in range(200)]
    train, dev = as_corpus(sents[:160]), as_corpus(sents[160:])
    classes, _ = exchange_clusters(sents, V, 3, max_passes=2)
    model = None
    for types, order in (("w+c+ws+cs+wsh+csh+cpw+tied", 3), ("w", 2)):
        fs = build_features(train, V, make_templates(types, order), classes=np.asarray(classes))
        lam = rng.normal(size=fs.num_features) * 0.1
        fs.scores(dev, lam)
        fs.scores_walk(dev, lam)
        fs.feature_counts(dev)
        cfg = AugSAConfig(samples=20, chains=2, iterations=30, t_c=10, t0=10, max_length=4, long=True, stop=True,
                          stop_window=5, eval_every=5, gap_every=5, eval_sentences=40)
        model, _ = train_augsa(fs, train, cfg, dev=dev)
        model.log_probs(dev)
        compile_rescorer(model).log_probs(dev)
        Sampler(fs, 7, chains=2, seed=1).sample(10, model.lam, np.zeros(8))
    # exact normalisers through the feature acceptor (short sentences, short spans)
    m = 4
    short = as_corpus([x for x in sents if len(x) <= m])
    fs = build_features(short, V, make_templates("w+c", 2), classes=np.asarray(classes))
    lam = rng.normal(size=fs.num_features) * 0.1
    acc = compile_acceptor(fs)
    score_sequences(acc.weighted(lam), short.ptr, (short.tokens + 1).astype(np.int32))
    lp = LengthProduct(acc, m)
    lp.log_normalisers(lam)
    _, pi = empirical_pi(short.lengths, m, False)
    ftilde, _ = empirical_stats(fs, short, length_groups(short.lengths, m, False))
    lp.expected_features(lam, np.log(np.where(pi > 0, pi, 1e-300)))
    lam_hat, _ = fit_exact(lp, ftilde, pi, max_iterations=5)
    TRF(fs, lam_hat, m, False, pi, exact_zeta(lp, lam_hat)).log_probs(short)
    refine_zeta(model, 5, samples=20)
    path = tmp / "trf.npz"
    save_trf(model, path, vocab)
    load_trf(path)
    big = as_corpus([rng.integers(0, V, int(rng.integers(1, 4))) for _ in range(PARALLEL_TOKENS)])
    TRFScorer(model, 1).log_probs(big)
    TRFScorer(model, 2).log_probs(big)
    text = tmp / "text.txt"
    text.write_text("w0 w1 w2\n\nw3 zebra w4\nw1\n", encoding="utf-8")
    model, vocab = load_trf(path)
    score_text(model, vocab, text, out=io.StringIO())
    score_text(model, vocab, text, base="e", threads=2)


# ------------------------------------------------------------------------- mrf


def warm_mrf(tmp: Path) -> None:
    """MRF LMs and the MRF tagger: exact cycle sums, the lifted bound and its training, decoding."""
    from ..mrf import (MRFModel, TightenState, collect_moments, conditional_log_likelihood, exact_log_partition,
                       exact_moments, lifted_bound, load_mrf, load_tagger, save_mrf, save_tagger, star_bp, tighten,
                       train_exact, train_lifted)
    from ..mrf.lifted import star_potentials
    from ..mrf.tagger import TaggerMRF, decode, tagged_sequence, tagger_moments, train_tagger
    rng = np.random.default_rng(0)
    C, K, N = 3, 2, 6
    for rank in (None, 2):
        m = (MRFModel(rng.normal(size=C), pair=rng.normal(size=(K, C, C))) if rank is None else
             MRFModel(rng.normal(size=C), U=rng.normal(size=(C, rank)), W=rng.normal(size=(K, C, rank))))
        allowed = rng.random((N, C)) < 0.7
        allowed[:, 0] = True
        exact_log_partition(m, N)
        exact_log_partition(m, N, allowed)
        exact_moments(m, N, allowed)
        x = np.array([0, 1, 2, 1, 0, 2, 2, 1])
        conditional_log_likelihood(m, x, 0, gradient=True)
        pot = star_potentials(m)
        star_bp(pot, np.zeros((K, C)))
        for method in ("subgradient", "lbfgs"):
            tighten(pot, TightenState.zeros(K, C), max_iter=20, tol=1e-6, method=method)
        lifted_bound(m, collect_moments(rng.integers(0, C, 30), C, K), rng.normal(0, 0.5, (K, C)))
    x = np.array([0] + list(rng.integers(1, 3, 7)))
    mom = collect_moments(x, 3, 1)
    train_lifted(MRFModel.init(3, 1), mom, max_iter=3, tighten_iter=30)
    train_lifted(MRFModel.init(3, 1, rank=2), mom, max_iter=3, tighten_iter=30)
    res = train_exact(MRFModel.init(3, 1), x, 0, max_iter=3)
    save_mrf(res.model, tmp / "mrf.npz")
    load_mrf(tmp / "mrf.npz")
    # the tagger, with a one-word and a three-word window
    data = [[("x", "A"), ("y", "C")], [("x", "B"), ("z", "C")], [("Yy", "A"), ("z1", "B"), ("x", "C")]] * 3
    for window in (1, 3):
        t = TaggerMRF.init(["A", "B", "C"], ["x", "y", "z", "Yy", "z1"], window=window)
        ti = {tag: i for i, tag in enumerate(t.tags)}
        wi = {w: i for i, w in enumerate(t.vocab)}
        ts, ws = tagged_sequence(data, ti, wi, 1, pad=t.pad)
        trained, _ = train_tagger(t, tagger_moments(ts, ws, len(t.tags), len(t.vocab), 1, t.offsets),
                                  max_iter=3, l2=1e-3)
        decode(trained, [["x", "y"], ["x", "Zz", "z1"], []])
        save_tagger(trained, tmp / "tagger.npz")
        load_tagger(tmp / "tagger.npz")


# ------------------------------------------------------------------------- cli


def _run_commands(commands, cwd: Path) -> None:
    """Run ``fsmlearn`` commands, each in a fresh process as a user runs it, up to one per core
    at a time; raises naming the commands that did not exit 0.

    Args:
        commands: (argv list, stdin path or None) pairs.
    """
    # the children import this very package (a source checkout, or an installed one)
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root] + [p for p in [os.environ.get("PYTHONPATH")] if p]))

    def one(cmd):
        argv, stdin = cmd
        argv = [str(a) for a in argv]
        with open(stdin, "rb") if stdin is not None else open(os.devnull, "rb") as fin:
            r = subprocess.run([sys.executable, "-m", "fsmlearn.cli.main", *argv], stdin=fin, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd, timeout=900)
        return argv, r.returncode, r.stderr.decode("utf-8", "replace").strip()

    with ThreadPoolExecutor(max_workers=max(1, min(len(commands), os.cpu_count() or 1))) as pool:
        results = list(pool.map(one, commands))
    bad = [f"fsmlearn {' '.join(argv)}: exit {rc}: {err[-300:]}" for argv, rc, err in results if rc != 0]
    if bad:
        raise RuntimeError("; ".join(bad))


def warm_cli(tmp: Path) -> None:
    """Every user command (``fsmlearn demo``, ``lm ...``, ``tag train/tag/eval``, ``trf score``)
    once on the synthetic data, each in a fresh process: the first use of each command loads
    its kernels from the cache that the families before filled (or compiles what they missed)."""
    from ..trf.augsa import AugSAConfig, train_augsa
    from ..trf.features import as_corpus, build_features, make_templates
    from ..trf.io import save_trf
    sents = synthetic_sentences(400)
    train = _write_text(tmp / "train.txt", sents[:350])
    held = _write_text(tmp / "held.txt", sents[350:] + [["unseen", "w1", "words"], [], ["w0"]])
    tagged = synthetic_tagged(300)
    for name, part in (("train.tagged", tagged[:250]), ("held.tagged", tagged[250:])):
        (tmp / name).write_text("".join(" ".join(f"{w}/{t}" for w, t in s) + "\n" for s in part),
                                encoding="utf-8")
    raw = _write_text(tmp / "raw.txt", [[w for w, _ in s] for s in tagged[250:]] + [["The zebra doesn't run, does it?"]])
    rng = np.random.default_rng(0)
    corpus = as_corpus([rng.integers(0, 6, int(rng.integers(1, 6))) for _ in range(100)])
    fs = build_features(corpus, 6, make_templates("w+c", 2), classes=np.array([0, 1, 0, 1, 2, 2]))
    cfg = AugSAConfig(samples=20, chains=2, iterations=10, t_c=10, t0=5, max_length=4, long=True)
    save_trf(train_augsa(fs, corpus, cfg)[0], tmp / "trf.npz", [f"w{i}" for i in range(5)] + ["<unk>"])
    _run_commands([
        (["demo"], None),
        (["lm", "count", "-q", "--order", 3, "-o", "counts", train], None),
        (["lm", "estimate", "-q", "--order", 3, "-o", "m.arpa.gz", train], None),
        (["tag", "train", "-q", "--data", "train.tagged", "-o", "hmm"], None),
        (["trf", "score", "trf.npz", held, "--sentences"], None),
    ], tmp)
    _run_commands([
        (["lm", "web1t", "-q", "counts"], None),
        (["lm", "check", "-q", "m.arpa.gz"], None),
        (["lm", "compile", "-q", "m.arpa.gz", "-o", "m.fsm"], None),
        (["tag", "tag", "--tokenize", "hmm"], raw),
        (["tag", "eval", "-q", "hmm", "--data", "held.tagged"], None),
    ], tmp)
    _run_commands([
        (["lm", "score", "m.fsm"], held),
        (["lm", "query", "m.fsm"], held),
        (["lm", "ppl", "-q", "m.fsm", held], None),
        (["lm", "sample", "-q", "--sentences", 5, "m.fsm"], None),
    ], tmp)


# ------------------------------------------------------------------- the runner

FAMILIES = {
    "engine": warm_engine,
    "lm": warm_lm,
    "tag": warm_tag,
    "rcm": warm_rcm,
    "trf": warm_trf,
    "mrf": warm_mrf,
    "cli": warm_cli,
}


def run(families=None, out=None) -> dict:
    """Run the named families (default all, in the order of :data:`FAMILIES`) in a temporary
    directory that is removed afterwards, printing one line per family and the total to ``out``
    (default stderr).  A family that fails is named with its error and the others still run.

    Returns:
        {family: seconds, or the exception it raised}.

    Raises:
        ValueError: an unknown family name.
    """
    out = out if out is not None else sys.stderr
    names = list(FAMILIES) if not families else [n for n in FAMILIES if n in set(families)]
    unknown = sorted(set(families or ()) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown family {unknown[0]!r}; expected some of {', '.join(FAMILIES)}")
    result = {}
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fsmlearn-warm-") as d:
        for n in names:
            t0 = time.perf_counter()
            work = Path(d) / n
            work.mkdir()
            try:
                FAMILIES[n](work)
            except Exception as e:          # report it and go on: the other families still warm
                result[n] = e
                print(f"warm: {n:<7} FAILED after {time.perf_counter() - t0:.1f} s: {type(e).__name__}: {e}",
                      file=out, flush=True)
                continue
            result[n] = time.perf_counter() - t0
            print(f"warm: {n:<7} {result[n]:7.1f} s", file=out, flush=True)
    print(f"warm: total   {time.perf_counter() - t_all:7.1f} s", file=out, flush=True)
    return result


def main(argv=None) -> int:
    """``python -m fsmlearn.experiments.warm [--only FAMILY,...]``; exit 0, or 1 if a family failed."""
    p = argparse.ArgumentParser(prog="python -m fsmlearn.experiments.warm",
                                description="Compile fsmlearn's numba kernels into numba's on-disk cache "
                                            "by running each family's code paths once on tiny synthetic inputs.")
    p.add_argument("--only", default="", metavar="FAMILY,...",
                   help=f"comma-separated families to run (default: all of {','.join(FAMILIES)})")
    args = p.parse_args(argv)
    names = [x for x in args.only.replace(" ", "").split(",") if x]
    bad = [x for x in names if x not in FAMILIES]
    if bad:
        p.error(f"unknown family {bad[0]!r} (choose from {', '.join(FAMILIES)})")
    from ..testing.numba_cache import clear_stale_cache
    removed = clear_stale_cache()      # kernels compiled from sources edited since (numba cannot tell)
    if removed:
        print(f"warm: removed {removed} cached kernel files compiled from older sources", file=sys.stderr)
    result = run(names)
    return 1 if any(isinstance(v, Exception) for v in result.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
