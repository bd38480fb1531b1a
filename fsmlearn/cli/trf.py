"""``fsmlearn trf``: trans-dimensional random field LMs on the command line."""

from __future__ import annotations

from .common import Progress, add_quiet, add_threads


def _morph(args) -> int:
    from ..experiments.trf_morph import MorphConfig, run_morph
    runs = tuple(r.strip() for r in args.runs.split(",") if r.strip())
    cfg = MorphConfig(max_length=args.max_length, seed=args.seed, iterations=args.iterations,
                      samples=args.samples, chains=args.chains, lbfgs_iterations=args.lbfgs_iterations, runs=runs,
                      report=args.report,
                      t_c=args.t_c, beta_lambda=args.beta_lambda, beta_zeta=args.beta_zeta, t0=args.t0)
    run_morph(cfg, progress=Progress(args.quiet))
    return 0


def _score(args) -> int:
    import sys
    from ..trf.io import load_trf
    from ..trf.score import TRFScorer, score_text
    from .common import check_threads
    threads = check_threads(args.threads)
    model, vocab = load_trf(args.model)
    if vocab is None:
        from ..errors import ArgumentError
        raise ArgumentError(f"{args.model}: the model has no vocabulary, so it cannot read text")
    scorer = TRFScorer(model, threads)
    log = "log10 p" if args.base == "10" else "ln p"
    summary_to = sys.stderr if args.sentences else sys.stdout
    for path in args.text or ["-"]:
        r = score_text(model, vocab, path, out=sys.stdout if args.sentences else None, base=args.base,
                       scorer=scorer)
        name = "<stdin>" if path == "-" else path
        line = (f"{name}: {r['sentences']:,} sentences, {r['tokens']:,} tokens (</s> included), {r['oovs']:,} <unk>"
                + (" (lower-cased, as the model's text was)" if model.meta.get("lower") else "") + ", "
                f"{log} {r['log_prob']:.2f}, perplexity {r['perplexity']:.2f}")
        if r["zero"]:
            line += (f" ({r['zero']:,} sentences of probability 0: empty, or longer than the model's lengths; "
                     f"perplexity of the others {r['perplexity_nonzero']:.2f})")
        sys.stdout.flush()
        print(line, file=summary_to, flush=True)
    return 0


def _train(args) -> int:
    from ..data.text import held_out, read_token_lines
    from .common import check_threads
    from ..errors import ArgumentError
    from ..trf.fit import FitConfig, fit_trf, to_corpus, vocabulary
    say = Progress(args.quiet)
    sents = read_token_lines(args.text)
    train_s, dev_s = held_out(sents, read_token_lines(args.dev) if args.dev else None)
    if args.lower:
        train_s = [[w.lower() for w in x] for x in train_s]
        dev_s = [[w.lower() for w in x] for x in dev_s]
    if not train_s or not dev_s:
        raise ArgumentError(f"{', '.join(args.text)}: {len(sents)} sentences; training needs some and held-out "
                            "text for the stop rule (--dev, or at least 20 sentences to hold every 20th out)")
    words = None
    size = None
    if args.vocab is not None:
        if args.vocab.isdigit():
            size = int(args.vocab)
            if size < 1:
                raise ArgumentError(f"--vocab {args.vocab}: expected a positive number or a file of words")
        else:
            words = [w for line in read_token_lines([args.vocab]) for w in line]
    vocab = vocabulary(train_s, size, words)
    train, oov_t = to_corpus(train_s, vocab)
    dev, oov_d = to_corpus(dev_s, vocab)
    say(f"{len(train):,} training sentences ({int(train.lengths.sum()):,} tokens, {oov_t:,} <unk>), {len(dev):,} "
        f"held-out ({'--dev' if args.dev else 'every 20th'}; {oov_d:,} <unk>); vocabulary {len(vocab):,} with <unk>")
    cfg = FitConfig(features=args.features, order=args.order, classes=args.classes, samples=args.samples,
                    chains=args.chains, iterations=args.iterations, hours=args.hours, eval_every=args.eval_every,
                    refine_iterations=args.refine_iterations, seed=args.seed, max_length=args.max_length,
                    threads=check_threads(args.threads))
    _, summary = fit_trf(train, dev, vocab, cfg, model_path=args.output, resume=args.resume, progress=say,
                         lower=args.lower)
    say(f"wrote {args.output}: {summary['features']:,} features, {summary['iterations']:,} iterations in "
        f"{summary['seconds']:.0f} s, held-out perplexity {summary['dev_ppl']:.1f}")
    return 0


def _rescore(args) -> int:
    import sys

    import numpy as np

    from ..data.nbest import choose, error_rate, read_nbest, read_references, tune_weights, word_errors
    from ..errors import ArgumentError
    from ..trf.fit import to_corpus
    from ..trf.io import load_trf
    from ..trf.score import TRFScorer
    from .common import check_threads
    if (args.dev is None) != (args.dev_ref is None):
        raise ArgumentError("--dev and --dev-ref go together: a development list and its references")
    if args.oracle and not args.ref:
        raise ArgumentError("--oracle needs --ref: the references of the list")
    if args.dev and args.weights:
        raise ArgumentError("--weights or --dev (tuned weights), not both")
    model, vocab = load_trf(args.model)
    if vocab is None:
        raise ArgumentError(f"{args.model}: the model has no vocabulary, so it cannot read text")
    scorer = TRFScorer(model, check_threads(args.threads))
    lm = None
    if args.lm:
        from ..lm.compiled import CompiledLM
        lm = CompiledLM.load(args.lm)
    say = Progress(args.quiet)

    lower = bool(model.meta.get("lower", False))

    def features(nb):
        corpus, _ = to_corpus([([w.lower() for w in h] if lower else h) or ["<unk>"] for h in nb.hyps], vocab)
        trf = scorer.log_probs(corpus) / np.log(10.0)
        cols = [nb.scores, np.where(np.isfinite(trf), trf, -1e9)]
        if lm is not None:
            cols.append(lm.score([" ".join(h) for h in nb.hyps])[0])
        return np.stack(cols, 1)

    def errors(nb, refs):
        e = np.array([word_errors(h, refs[i]) for i in range(len(nb.ids)) for h in nb.hyps[nb.ptr[i]:nb.ptr[i + 1]]])
        return e, sum(len(r) for r in refs)

    names = ["list", "trf"] + (["lm"] if lm is not None else [])
    if args.weights:
        try:
            w = np.array([float(x) for x in args.weights.split(",")])
        except ValueError:
            raise ArgumentError(f"--weights {args.weights!r}: numbers separated by commas") from None
        if w.size != len(names) or not np.isfinite(w).all():
            raise ArgumentError(f"--weights {args.weights!r}: {len(names)} finite numbers ({', '.join(names)})")
    elif args.dev:
        dev = read_nbest(args.dev)
        e, n = errors(dev, read_references(args.dev_ref, len(dev.ids)))
        w, rate = tune_weights(features(dev), dev.ptr, e, n)
        say(f"weights tuned on {args.dev}: " + ", ".join(f"{k} {v:g}" for k, v in zip(names, w))
            + f" (WER {100 * rate:.2f}%, {n:,} reference words)")
    else:
        w = np.ones(len(names))
    nb = read_nbest(args.nbest)
    refs = read_references(args.ref, len(nb.ids)) if args.ref else None     # checked before any output
    picked = choose(features(nb), w, nb.ptr)
    for i, j in zip(nb.ids, picked):
        sys.stdout.write(f"{i}\t{' '.join(nb.hyps[j])}\n")
    sys.stdout.flush()
    if refs is not None:
        e, n = errors(nb, refs)
        line = f"{args.nbest}: WER {100 * error_rate(e, picked, n):.2f}% ({n:,} reference words)"
        if args.oracle:
            oracle = np.array([a + int(np.argmin(e[a:b])) for a, b in zip(nb.ptr[:-1], nb.ptr[1:])])
            line += f", oracle WER {100 * error_rate(e, oracle, n):.2f}%, the list's first {100 * error_rate(e, nb.ptr[:-1], n):.2f}%"
        print(line, file=sys.stderr)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("trf", help="trans-dimensional random field LMs (Wang, Ou and Tan)")
    tsub = p.add_subparsers(dest="trf_command", metavar="command")
    m = tsub.add_parser("morph", help="word morphology (section 6): AugSA against L-BFGS and WB3 on cmudict words")
    m.add_argument("--iterations", type=int, default=1000, help="AugSA iterations (default 1000)")
    m.add_argument("--samples", type=int, default=100, help="samples per AugSA iteration (default 100)")
    m.add_argument("--chains", type=int, default=2, help="parallel sampling chains (default 2)")
    m.add_argument("--t0", type=int, default=200, help="AugSA burn-in t0 of (24)-(25) (default 200, the paper's)")
    m.add_argument("--t-c", type=float, default=100.0, help="AugSA offset t_c of (24) (default 100)")
    m.add_argument("--beta-lambda", type=float, default=0.8, help="first-stage exponent for lambda (default 0.8)")
    m.add_argument("--beta-zeta", type=float, default=0.6, help="first-stage exponent for zeta (default 0.6)")
    m.add_argument("--lbfgs-iterations", type=int, default=1000, help="L-BFGS iteration limit (default 1000)")
    m.add_argument("--max-length", type=int, default=20, help="longest word kept (default 20)")
    m.add_argument("--runs", default="augsa-empirical,augsa-eq26,lbfgs,wb3",
                   help="comma-separated runs (default: all four)")
    m.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    m.add_argument("--report", default="reports/trf-morph.json",
                   help="JSON report (a PNG is written beside it) (default: %(default)s)")
    add_quiet(m)
    m.set_defaults(func=_morph)
    add_lm_parser(tsub)
    t = tsub.add_parser("train", help="train a TRF LM on your own text (AugSA, section 7's settings)",
                        description="Train a trans-dimensional random field LM (Wang, Ou and Tan) on TEXT (one "
                                    "sentence a line, tokens separated by spaces): a vocabulary (--vocab), word "
                                    "classes by exchange clustering, the features of --features that fire in "
                                    "training (section 7), AugSA (Figure 1) with the stop rule of Appendix E on "
                                    "held-out text (--dev, or every 20th sentence).  The model is written "
                                    "atomically to -o at every evaluation (so --resume continues a run) and at "
                                    "the end; 'fsmlearn trf score' applies it.  Defaults: the paper's PTB "
                                    "settings.")
    t.add_argument("text", nargs="+", help="training text files (.gz/.bz2/.xz too)")
    t.add_argument("-o", "--output", required=True, help="the model file (.npz)")
    t.add_argument("--dev", nargs="+", help="held-out text files (default: every 20th sentence of TEXT)")
    t.add_argument("--vocab", help="the vocabulary: a number (the most frequent training words) or a file of "
                                   "words; the rest are <unk> (default: every training word)")
    t.add_argument("--features", default="paper",
                   help="a feature set by name: paper (w+c+ws+cs+wsh+csh+tied, Table 3's TRFs; the default), "
                        "previous (w+c+ws+cs+cpw, Table 3's TRF of the earlier work), class (w+c), ngram (w); or "
                        "feature types of Table 2 joined by +")
    t.add_argument("--order", type=int, default=4, help="the largest n of the w and c n-gram features (default 4)")
    t.add_argument("--classes", type=int, default=200, help="word classes (default 200)")
    t.add_argument("--samples", type=int, default=300, help="samples per AugSA iteration (default 300)")
    t.add_argument("--chains", type=int, default=10, help="sampling chains (default 10)")
    t.add_argument("--iterations", type=int, default=50_000, help="AugSA iteration limit (default 50000)")
    t.add_argument("--hours", type=float, default=2.75, help="training time limit in hours (default 2.75)")
    t.add_argument("--eval-every", type=int, default=100,
                   help="iterations between held-out perplexities and checkpoints (default 100)")
    t.add_argument("--max-length", type=int, default=100, help="m: the longest length modelled (default 100)")
    t.add_argument("--refine-iterations", type=int, default=1000,
                   help="iterations re-estimating zeta with lambda fixed after training (default 1000; 0: none)")
    t.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    t.add_argument("--resume", action="store_true", help="continue from the model file's last checkpoint")
    t.add_argument("--lower", action="store_true",
                   help="lower-case the text (recorded in the model: trf score and rescore lower-case theirs too)")
    t.add_argument("--threads", type=int, default=0,
                   help="threads running the sampling chains; 0 for all of numba's (default 0; the result does not "
                        "depend on it: each chain draws from its own generator)")
    add_quiet(t)
    t.set_defaults(func=_train)
    r = tsub.add_parser("rescore", help="rescore an n-best list with a TRF (and an n-gram LM): section 7's use",
                        description="Pick, for each id of an n-best list, the hypothesis of the largest weighted "
                                    "sum of the list's own score, the TRF's log10 p and, with --lm, a compiled "
                                    "n-gram LM's log10 p (section 7: rescoring a recogniser's n-best lists).  "
                                    "Lines are 'id ||| hypothesis ||| ... ||| score' (Moses) or "
                                    "'id<TAB>hypothesis<TAB>score', an id's lines together.  Weights: --weights, "
                                    "or tuned on a development list (--dev, --dev-ref) by word error rate over "
                                    "a grid 0..2 (the list's weight stays 1), or all 1.  Prints 'id<TAB>best "
                                    "hypothesis' per id; with --ref, the WER on stderr, and with --oracle the "
                                    "list's oracle WER beside it.")
    r.add_argument("model", help="a TRF model written by fsmlearn trf train (or trf lm)")
    r.add_argument("nbest", help="the n-best list")
    r.add_argument("--lm", help="a compiled n-gram LM (fsmlearn lm compile) as a third feature")
    r.add_argument("--weights", help="weights of list,trf[,lm] (default: 1 each, or tuned with --dev)")
    r.add_argument("--dev", help="a development n-best list to tune the weights on")
    r.add_argument("--dev-ref", help="its references, one line per id in its order")
    r.add_argument("--ref", help="references of NBEST (one line per id in its order): print the WER")
    r.add_argument("--oracle", action="store_true", help="with --ref: print the list's oracle WER too")
    add_threads(r)
    add_quiet(r)
    r.set_defaults(func=_rescore)
    sc = tsub.add_parser("score", help="log probability and perplexity of text under a saved TRF model",
                         description="Score text under p(x) of a TRF (Wang, Ou and Tan, section 3, equation 2, "
                                     "with the model's estimated normalisers zeta; section 7's perplexity): text "
                                     "files, or stdin when no file or - is given, one sentence a "
                                     "line, words separated by spaces; words outside the model's vocabulary "
                                     "count as <unk>.  Prints a summary per input; with --sentences each "
                                     "line's log probability and <unk> count (as lm score prints them) on "
                                     "stdout and the summary on stderr.  An empty line has probability 0 "
                                     "under a TRF (-inf).")
    sc.add_argument("model", help="a model saved by fsmlearn trf train or trf lm (.npz)")
    sc.add_argument("text", nargs="*", help="text files, one sentence per line (.gz/.bz2/.xz read too; "
                                            "- or none: stdin)")
    sc.add_argument("--sentences", action="store_true",
                    help="print each sentence's log probability TAB <unk> count (summary on stderr)")
    sc.add_argument("--base", choices=("10", "e"), default="10",
                    help="log base of the printed figures: 10 (as lm score and KenLM) or e (natural logs) "
                         "(default: 10)")
    add_threads(sc)
    sc.set_defaults(func=_score)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def _lm(args) -> int:
    from ..experiments.trf_lm import LMConfig, run_lm
    cfg = LMConfig(features=args.features, classes=args.classes, iterations=args.iterations, hours=args.hours,
                   samples=args.samples, chains=args.chains, eval_every=args.eval_every, seed=args.seed,
                   report=args.report, model=args.model, resume=args.resume,
                   refine_iterations=args.refine_iterations, stop_window=args.stop_window, kn_arpa=args.kn_arpa)
    run_lm(cfg, progress=Progress(args.quiet))
    return 0


def add_lm_parser(tsub) -> None:
    p = tsub.add_parser("lm", help="Brown-LM: TRF (AugSA) against lmplz's KN5 and their interpolations")
    p.add_argument("--features", default="w+c+ws+cs+wsh+csh+tied",
                   help="feature types of Table 2, joined by +, or a set by name (paper, previous, class, ngram; "
                        "see trf train) (default: %(default)s, the paper's full model)")
    p.add_argument("--classes", type=int, default=200, help="word classes (default 200)")
    p.add_argument("--iterations", type=int, default=50_000, help="AugSA iteration limit (default 50000)")
    p.add_argument("--hours", type=float, default=2.75, help="training time limit in hours (default 2.75)")
    p.add_argument("--samples", type=int, default=300, help="samples per iteration (default 300)")
    p.add_argument("--chains", type=int, default=10,
                   help="sampling chains, run on the numba threads (default 10: 30 steps each per iteration)")
    p.add_argument("--eval-every", type=int, default=100,
                   help="iterations between validation perplexities and checkpoints (default 100)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--report", default="reports/trf-lm.json",
                   help="JSON report (a PNG is written beside it) (default: %(default)s)")
    p.add_argument("--model", default="models/trf-lm.npz",
                   help="the model file (saved at every evaluation; read first with --resume) (default: %(default)s)")
    p.add_argument("--resume", action="store_true", help="continue from the model file's last checkpoint")
    p.add_argument("--stop-window", type=int, default=1000,
                   help="H of the stop rule (Appendix E), in iterations (default 1000)")
    p.add_argument("--refine-iterations", type=int, default=1000,
                   help="iterations re-estimating zeta with lambda fixed after training (default 1000; 0: none)")
    p.add_argument("--kn-arpa", help="keep lmplz's KN5 ARPA (about 100 MB) at this path (default: a temporary file, "
                                     "removed once the comparison is scored)")
    add_quiet(p)
    p.set_defaults(func=_lm)
