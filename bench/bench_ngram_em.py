"""n-gram EM against corpus EM (Smith and Eisner, Figure 2) on our data.

Settings (``--settings 1 2``): 1 = WSJ-train text, 5-grams at cutoff 3;
2 = Mixed-text, 5-grams at cutoff 10 (2-grams always kept).  For each: count
n-grams (Web1T-style cutoffs), estimate modified Kneser-Ney, compile, run
n-gram EM and corpus EM on the same text from the same uniform start
(17 tags, tag dictionary), evaluating on WSJ-small after every iteration.
Writes reports/bench_ngram_em.json and a PNG beside it.  Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from fsmlearn.data import iter_sentences
from fsmlearn.data.tagsets import tag_dictionary, tagset_tags
from fsmlearn.lm.counts import count_ngrams
from fsmlearn.lm.estimate import estimate
from fsmlearn.lm.model import compile_lm
from fsmlearn.tag.ngram.approx import setup_from_lm, train_ngram_em
from fsmlearn.tag.em import dictionary_mask, em, encode_corpus, uniform_hmm

SETTINGS = {1: ("wsj-train", 3), 2: ("mixed-text", 10)}


def say(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def words_of(name):
    for s in iter_sentences(name):
        yield [w if isinstance(w, str) else w[0] for w in s]


def run(setting, iterations, optimizer, method="kneser-ney", cond="none"):
    name, cutoff = SETTINGS[setting]
    td = tag_dictionary("tag17")
    tags = tagset_tags("tag17")
    ev = list(iter_sentences("wsj-small"))
    sents = list(words_of(name))
    out = {"setting": setting, "text": name, "cutoff": cutoff, "tokens": sum(map(len, sents))}
    t0 = time.time()
    counts = count_ngrams(sents, 5)
    lm = estimate(counts, method, cutoffs=[1, 1, cutoff, cutoff, cutoff], keep_bigrams=True)
    out["method"] = method
    out["ngrams_by_order"] = lm.counts
    out["ngrams"] = int(sum(lm.counts))
    c = compile_lm(lm)
    out["lm_seconds"] = time.time() - t0
    say(f"setting {setting}: {out['ngrams']:,} n-grams {lm.counts}, LM in {out['lm_seconds']:.1f} s")
    st = setup_from_lm(c, tagdict=td, progress=say)
    out["setup_seconds"] = st.seconds
    cnt = Counter(w for s in sents for w in s)
    sing = np.array([cnt.get(w, 0) == 1 for w in st.vocab])
    held = [[w for w, _ in s] for s in ev]
    _, recs = train_ngram_em(st, iterations, optimizer=optimizer, eval=ev, heldout=held, progress=say, tagdict=td,
                             singletons=sing, cond=cond)
    out["cond"] = cond
    out["iterations"] = recs
    corpus = encode_corpus(sents)
    allowed = dictionary_mask(corpus.vocab, tags, td)
    h0 = uniform_hmm(tags, corpus.vocab, allowed, tagdict=td)
    _, crecs = em(h0, corpus, allowed, iterations, eval=ev, heldout=held, progress=say)
    out["corpus_em"] = [{"iteration": r.iteration, "accuracy": r.accuracy, "loglik": r.loglik,
                         "heldout_loglik": r.heldout_loglik, "seconds": r.seconds} for r in crecs]
    return out


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4), squeeze=False)
    for ax, r in zip(axes[0], results):
        it = [x["iteration"] for x in r["iterations"]]
        ax.plot(it, [100 * x["accuracy"] for x in r["iterations"]], "o-", label="n-gram EM")
        ax.plot([x["iteration"] for x in r["corpus_em"]], [100 * x["accuracy"] for x in r["corpus_em"]],
                "s-", label="corpus EM")
        ax.set_title(f"setting {r['setting']}: {r['text']}, cutoff {r['cutoff']}")
        ax.set_xlabel("iteration")
        ax.set_ylabel("accuracy on WSJ-small (%)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--settings", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--optimizer", default="vem")
    ap.add_argument("--method", default="kneser-ney", choices=["kneser-ney", "witten-bell", "absolute"],
                    help="LM estimator for c (default kneser-ney)")
    ap.add_argument("--cond", default="none",
                    help="phi blocks also conditioned on the previous tag: none (the paper's n_q = 1), "
                         "roots (arcs leaving the backoff roots) or all (n_q = 2)")
    ap.add_argument("--out", default="reports/bench_ngram_em.json")
    a = ap.parse_args(argv)
    results = [run(s, a.iterations, a.optimizer, method=a.method, cond=a.cond) for s in a.settings]
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    rep = {"results": results, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "cpus": os.cpu_count()}
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rep, f, indent=1)
    os.replace(tmp, a.out)
    plot(results, str(Path(a.out).with_suffix(".png")))
    for r in results:
        n, c = r["iterations"][-1], r["corpus_em"][-1]
        sec_n = np.median([x["seconds"] for x in r["iterations"][1:]])
        sec_c = np.median([x["seconds"] for x in r["corpus_em"][1:]])
        print(f"setting {r['setting']} ({r['text']}, {r['ngrams']:,} n-grams): after {n['iteration']} iterations "
              f"n-gram EM {100 * n['accuracy']:.2f}% vs corpus EM {100 * c['accuracy']:.2f}%; "
              f"s/iteration {sec_n:.2f} vs {sec_c:.2f}; held-out log-likelihood per token "
              f"{n['heldout_loglik']:.4f} vs {c['heldout_loglik']:.4f}")


if __name__ == "__main__":
    main()
