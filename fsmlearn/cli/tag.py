"""``fsmlearn tag``: HMM part-of-speech taggers on the command line.

Subcommands:
    train  supervised HMM (TnT-style) from a tagged dataset -> MODEL
    em     unsupervised HMM by EM under the 17-tag dictionary -> MODEL, a JSON
           report of every iteration and a PNG plot beside it
    giga200  the tagger-giga200 pipeline: n-gram EM on a sampled 200M-token corpus's counts
    eval   accuracy (total, known words, unknown words) of MODEL on a tagged dataset
    tag    tag sentences from stdin (one per line, tokens separated by spaces):
           one line of tags per sentence
"""

from __future__ import annotations

import sys
import time

from .common import Progress, add_quiet, percent as _pct

def _train(args) -> int:
    from ..data import load_tagged
    from ..data.tagsets import tagset_tags, to_tag17
    from ..tag import train_supervised
    say = Progress(args.quiet)
    t0 = time.time()
    sents = load_tagged(args.data)
    say(f"read {args.data}: {len(sents):,} sentences, {sum(map(len, sents)):,} tokens")
    hmm = train_supervised(sents, tagset_tags(args.tagset), order=args.order,
                           map_tag=to_tag17 if args.tagset == "tag17" else None, progress=say)
    hmm.save(args.output)
    say(f"wrote {args.output}: order {hmm.order}, {hmm.T} tags, {hmm.V:,} words ({time.time() - t0:.1f} s)")
    return 0


def _eval(args) -> int:
    from ..data import load_tagged
    from ..tag import HMM, accuracy
    say = Progress(args.quiet)
    hmm = HMM.load(args.model)
    sents = load_tagged(args.data)
    t0 = time.time()
    a = accuracy(hmm, sents)
    dt = time.time() - t0
    say(f"tagged {a['tokens']:,} tokens in {dt:.2f} s ({a['tokens'] / max(dt, 1e-9):,.0f} tokens/s)")
    print(f"{args.data}: total {_pct(a['total'])} ({a['tokens']} tokens)  known {_pct(a['known'])} "
          f"({a['known_tokens']})  unknown {_pct(a['unknown'])} ({a['unknown_tokens']})")
    return 0


def _tag(args) -> int:
    from ..tag import HMM, tag_sentences
    hmm = HMM.load(args.model)
    out = sys.stdout
    batch = []

    def flush():
        for tags in tag_sentences(hmm, batch):
            out.write(" ".join(tags) + "\n")
        batch.clear()

    for line in sys.stdin:
        batch.append(line.split())
        if sum(map(len, batch)) >= 100_000:
            flush()
    if batch:
        flush()
    out.flush()
    return 0


def _em(args) -> int:
    from ..experiments.tag_em import TagEMConfig, run_tag_em
    run_tag_em(TagEMConfig(output=args.output, iterations=args.iterations, data=args.data, text=args.text,
                           corpus=args.corpus, report=args.report, order=args.order,
                           eval_data=args.eval_data or None, min_count=args.min_count,
                           chunk_tokens=args.chunk_tokens), progress=Progress(args.quiet))
    return 0


def _giga200(args) -> int:
    from ..experiments.giga200 import Giga200Config, run_giga200
    say = Progress(args.quiet)
    cfg = Giga200Config(cache=args.cache, report=args.report, model=args.model, ngrams=args.ngrams or None,
                        tokens=args.tokens, seed=args.seed, order=args.order, cutoff=args.cutoff,
                        iterations=args.iterations, corpus_em=not args.no_corpus_em,
                        method=args.method, discount=args.discount, cut_mass=args.cut_mass,
                        corpus_em_iterations=args.corpus_em_iterations, device=args.device)
    rep = run_giga200(cfg, progress=say)
    it = rep["iterations"][-1]
    line = (f"n-gram EM ({rep['ngrams']:,} n-grams): after {it['iteration']} iterations accuracy "
            f"{_pct(it['accuracy'])}, bound {it['bound']:.3f}, {rep['ngram_em_seconds_per_iteration']:.1f} s/iteration")
    if rep.get("corpus_em"):
        ce = rep["corpus_em"][-1]
        line += (f"; corpus EM ({rep['tokens']:,} tokens): accuracy {_pct(ce['accuracy'])}, "
                 f"{rep['corpus_em_seconds_per_iteration']:.1f} s/iteration")
    print(line)
    return 0


def add_parser(sub) -> None:
    tg = sub.add_parser("tag", help="HMM part-of-speech taggers (train, em, eval, tag)")
    tsub = tg.add_subparsers(dest="tag_command", metavar="command")

    p = tsub.add_parser("train", help="train a supervised (TnT-style) HMM tagger on a tagged dataset")
    p.add_argument("--data", default="wsj-train", help="tagged dataset (default wsj-train)")
    p.add_argument("-o", "--output", required=True, help="model file to write")
    p.add_argument("--order", type=int, choices=[2, 3], default=2, help="2 = bigram (default), 3 = trigram")
    p.add_argument("--tagset", choices=["penn45", "tag17"], default="penn45",
                   help="penn45 (default) or the 17-tag set")
    add_quiet(p)
    p.set_defaults(func=_train)

    p = tsub.add_parser("em", help="train an HMM by EM under the 17-tag dictionary (Merialdo setup)")
    p.add_argument("--data", help="training text, tags dropped: wsj-train, wsj-small or mixed-text")
    p.add_argument("--text", nargs="+", help="training text files instead, one sentence per line, tokens "
                                             "separated by spaces (.gz/.bz2/.xz; - for stdin)")
    p.add_argument("--corpus", help="folder of a saved encoded corpus: loaded (memory-mapped) if present, "
                                    "else written from --data")
    p.add_argument("--iterations", type=int, required=True)
    p.add_argument("-o", "--output", required=True, help="model file to write")
    p.add_argument("--report", help="JSON report of every iteration (a PNG plot is written beside it)")
    p.add_argument("--order", type=int, choices=[2, 3], default=2)
    p.add_argument("--eval-data", default="wsj-small",
                   help="tagged data for accuracy and held-out likelihood (default wsj-small; '' for none)")
    p.add_argument("--min-count", type=int, default=5, help="tag dictionary: words seen this often (default 5)")
    p.add_argument("--chunk-tokens", type=int, default=200_000, help="tokens per lattice (default 200000)")
    add_quiet(p)
    p.set_defaults(func=_em)

    p = tsub.add_parser("giga200", help="train a tagger from n-grams alone (make tagger-giga200)",
                        description="Sample (once, cached) a 200M-token stand-in for Gigaword from a 5-gram "
                                    "of Mixed-text, count its n-grams into a Web1T directory, estimate and "
                                    "compile the backoff LM, train the tagger by n-gram EM, compare with "
                                    "EM on the sampled corpus, evaluate on WSJ-small.")
    p.add_argument("--cache", default="data/cache/giga200", help="where the sampled corpus and its counts are "
                                                                "kept (default data/cache/giga200)")
    p.add_argument("--ngrams", help="a Web1T-format count directory (e.g. real Gigaword or Web1T counts) "
                                    "instead of the sampled stand-in; corpus EM is then skipped")
    p.add_argument("--report", default="reports/tagger-giga200.json", help="JSON report (PNG beside it)")
    p.add_argument("--model", default="models/tagger-giga200",
                   help="tagger path without extension: MODEL.hmm and MODEL.fsm are written")
    p.add_argument("--tokens", type=int, default=200_000_000, help="tokens to sample (default 200M)")
    p.add_argument("--seed", type=int, default=200, help="sampling seed (default 200)")
    p.add_argument("--order", type=int, default=5)
    p.add_argument("--cutoff", type=int, default=20, help="count cutoff of orders >= 3 (default 20)")
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--corpus-em-iterations", type=int, help="default: --iterations")
    p.add_argument("--method", choices=["absolute", "witten-bell", "kneser-ney"], default="absolute",
                   help="LM estimator (default absolute discounting: least mass moved to unseen events)")
    p.add_argument("--discount", type=float, default=0.25, help="absolute discounting's D (default 0.25)")
    p.add_argument("--cut-mass", choices=["backoff", "interpolate"], default="backoff",
                   help="where each context's cut extensions' mass goes (default: its backoff weight)")
    p.add_argument("--no-corpus-em", action="store_true", help="skip EM on the sampled corpus")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where n-gram EM and c's forward values run (default cpu; cuda: a CUDA GPU through "
                        "numba.cuda, see docs/cuda.md)")
    add_quiet(p)
    p.set_defaults(func=_giga200)

    p = tsub.add_parser("eval", help="accuracy of a model on a tagged dataset")
    p.add_argument("model")
    p.add_argument("--data", default="wsj-small", help="tagged dataset (default wsj-small)")
    add_quiet(p)
    p.set_defaults(func=_eval)

    p = tsub.add_parser("tag", help="tag sentences from stdin (one per line) to stdout (one tag per token)")
    p.add_argument("model")
    p.set_defaults(func=_tag)
    tg.set_defaults(func=lambda a: (tg.print_help(), 2)[1])
