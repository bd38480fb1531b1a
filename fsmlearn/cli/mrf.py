"""``fsmlearn mrf``: Markov random field language models by lifted variational inference
(Jernite, Rush and Sontag 2015) on the command line."""

from __future__ import annotations

from pathlib import Path

from .common import Progress, add_quiet
from .tag import OUTPUT_FORMATS


def _synthetic(args) -> int:
    from ..experiments.mrf_synthetic import SyntheticConfig, run_synthetic
    cfg = SyntheticConfig(length=args.length, K=args.order, seeds=args.seeds, max_iter=args.max_iter,
                          tighten_iter=args.tighten_iter, tighten_method=args.tighten, report=Path(args.report))
    run_synthetic(cfg, progress=Progress(args.quiet))
    return 0


def _lm(args) -> int:
    from ..errors import ArgumentError
    from ..experiments.mrf_lm import LMConfig, run_lm
    rank = None if args.rank == 0 else args.rank
    own = bool(args.text)
    if own and args.data_dir:
        raise ArgumentError("--data-dir is for the Brown-LM run; TEXT is your own text")
    if args.dev and not own:
        raise ArgumentError("--dev is the held-out text of your own TEXT; the Brown-LM run has its own")
    model = args.model if args.model is not None else (None if own else "models/mrf-lm.npz")
    if own and not model:
        raise ArgumentError("give -o MODEL: where the model of your text goes")
    report = args.report if args.report is not None else (
        str(Path(model).with_suffix(".json")) if own else "reports/mrf-lm.json")
    cfg = LMConfig(K=args.order, rank=rank, vocab=args.vocab, max_iter=args.max_iter, minutes=args.minutes,
                   patience=args.patience, tighten_iter=args.tighten_iter, tighten_tol=args.tighten_tol,
                   tighten_method=args.tighten, l2=args.l2, seed=args.seed, init=args.init,
                   report=Path(report) if report else None,
                   model=Path(model) if model else None, data_dir=args.data_dir,
                   text=tuple(args.text), dev=tuple(args.dev or ()))
    say = Progress(args.quiet)
    rep = run_lm(cfg, progress=say)
    if model:
        say(f"wrote {model}: C = {rep['C']:,} states, K = {args.order}, best held-out bound "
            f"{rep['best']['valid_bound']:.4f} nats/position at iteration {rep['best']['iteration']}")
    return 0


def _neighbours(args) -> int:
    from ..errors import ArgumentError
    from ..experiments.mrf_lm import nearest_neighbours
    from ..mrf.io import load_mrf
    model = load_mrf(args.model)
    if model.U is None:
        raise ArgumentError(f"{args.model}: a full-rank model has no word embedding U (train with --rank D)")
    symbols = list(model.symbols)
    missing = [w for w in args.words if w not in set(symbols)]
    if missing:
        raise ArgumentError(f"{args.model}: not in the model's vocabulary: {', '.join(missing)}")
    if args.k < 1:
        raise ArgumentError(f"-k {args.k}: expected at least 1")
    near = nearest_neighbours(model.U, symbols, args.words, k=args.k)
    for w in args.words:
        print(w + "\t" + "  ".join(f"{v} {s:.3f}" for v, s in near[w]))
    return 0


def _read_tagged(args, data):
    from ..data import load_tagged
    from ..errors import ArgumentError
    sents = [s for s in load_tagged(data, format=args.format, column=args.conllu_tags or "upos") if s]
    if not sents:
        raise ArgumentError(f"{data}: no tagged sentence in it")
    return sents


def _train_tagger(args) -> int:
    import time
    from ..mrf.io import save_tagger
    from ..mrf.tagger import decode, fit_tagger, tagging_accuracy
    say = Progress(args.quiet)
    sents = _read_tagged(args, args.data)
    dev = _read_tagged(args, args.dev) if args.dev else None
    known = {w for s in sents for w, _ in s}
    t0 = time.perf_counter()

    def on_iteration(m, e):
        say(f"iteration {e['iteration']}: bound {e['bound']:.4f} nats/position, gap {e['gap']:.1e}, "
            f"{e['seconds']:.0f} s")
        stop = e["seconds"] > 60 * args.minutes
        if dev is not None and (e["iteration"] % args.eval_every == 0 or stop):
            a = tagging_accuracy(decode(m, [[w for w, _ in s] for s in dev]), dev, known)
            say(f"  {args.dev}: total {_pct(a['total'])}, known {_pct(a['known'])}, unknown {_pct(a['unknown'])}")
        return stop

    model, history, mom = fit_tagger(sents, window=args.window, centre_weight=args.centre_weight,
                                     max_iter=args.max_iter, l2=args.l2, tighten_iter=args.tighten_iter,
                                     tighten_method=args.tighten, max_affix=args.max_affix,
                                     on_iteration=on_iteration, progress=lambda m: say(f"{args.data}: {m}"))
    save_tagger(model, args.output)
    say(f"wrote {args.output}: {len(model.tags) - 1} tags, {len(model.vocab) - 1:,} words, window {model.L}, "
        f"{len(history)} iterations in {time.perf_counter() - t0:.1f} s")
    return 0


def _pct(x: float) -> str:
    return "n/a" if x != x else f"{100 * x:.2f}%"


def _tag_stdin(args) -> int:
    from ..mrf.io import load_tagger
    from ..mrf.tagger import decode
    from .tag import tag_stdin
    model = load_tagger(args.model)
    return tag_stdin(lambda sents: decode(model, sents), model.tags[1:], args, batch_tokens=20_000)


def _eval_tagger(args) -> int:
    import time
    from ..mrf.io import load_tagger
    from ..mrf.tagger import decode, tagging_accuracy
    say = Progress(args.quiet)
    model = load_tagger(args.model)
    sents = _read_tagged(args, args.data)
    t0 = time.perf_counter()
    pred = decode(model, [[w for w, _ in s] for s in sents])
    dt = time.perf_counter() - t0
    a = tagging_accuracy(pred, sents, set(model.vocab[1:]))
    say(f"tagged {a['tokens']:,} tokens in {dt:.2f} s ({a['tokens'] / max(dt, 1e-9):,.0f} tokens/s)")
    unknown_tags = sorted({t for s in sents for _, t in s} - set(model.tags[1:]))
    line = (f"{args.data}: total {_pct(a['total'])} ({a['tokens']} tokens)  known {_pct(a['known'])} "
            f"({a['tokens'] - a['unknown_tokens']})  unknown {_pct(a['unknown'])} ({a['unknown_tokens']})")
    if unknown_tags:
        line += (f"  gold tags unknown to the model (counted as errors): {', '.join(unknown_tags[:10])}"
                 + (", ..." if len(unknown_tags) > 10 else ""))
    print(line)
    return 0


def _tag(args) -> int:
    from ..experiments.mrf_tag import TagConfig, run_tag
    cfg = TagConfig(window=args.window, centre_weight=args.centre_weight, max_iter=args.max_iter, l2=args.l2,
                    tighten_iter=args.tighten_iter, tighten_method=args.tighten, eval_every=args.eval_every,
                    minutes=args.minutes, hmm=not args.no_hmm, report=Path(args.report), data_dir=args.data_dir,
                    model=Path(args.model) if args.model else None, max_affix=args.max_affix)
    run_tag(cfg, progress=Progress(args.quiet))
    return 0


def _tagged_file_options(p) -> None:
    from .tag import TAGGED_FORMATS
    p.add_argument("--format", choices=list(TAGGED_FORMATS),
                   help="the tagged file's format (default: by its name: .conllu is CoNLL-U, else word/tag)")
    p.add_argument("--conllu-tags", choices=["upos", "xpos"], help="CoNLL-U: which tag column (default upos)")


def _tighten_options(p, iters: int, default: str = "subgradient") -> None:
    p.add_argument("--tighten", choices=("subgradient", "lbfgs"), default=default,
                   help="how Algorithm 1 minimises the dual: subgradient steps with the section 6 schedule "
                        f"or L-BFGS (the authors' appendix B); default {default}")
    p.add_argument("--tighten-iter", type=int, default=iters, help=f"BP passes per tightening (default {iters})")


def add_parser(sub) -> None:
    mrf = sub.add_parser("mrf", help="MRF language models by lifted variational inference (Jernite et al. 2015)")
    msub = mrf.add_subparsers(dest="mrf_command", metavar="command", required=True)

    p = msub.add_parser("synthetic", help="section 6, Figure 5: exact-gradient against lifted-bound training "
                                          "on a 12-token corpus (K = 1, C = 4)")
    p.add_argument("--length", type=int, default=12, help="tokens in the corpus (default 12)")
    p.add_argument("--order", type=int, default=1, help="K (default 1)")
    p.add_argument("--seeds", type=int, default=5, help="corpora drawn, one run each (default 5)")
    p.add_argument("--max-iter", type=int, default=200, help="L-BFGS iterations (default 200)")
    _tighten_options(p, 200)
    p.add_argument("--report", default="reports/mrf-synthetic.json",
                   help="JSON report (PNG beside it) (default: %(default)s)")
    add_quiet(p)
    p.set_defaults(func=_synthetic)

    p = msub.add_parser("lm", help="the MRF LM (section 6, Figure 6 and Table 1) on your own text, or on Brown-LM",
                        description="Train the low-rank MRF language model of section 6 (eq. 5, theta^l = U W^l; "
                                    "Algorithm 2: L-BFGS on the lifted bound) on TEXT (one sentence a line, tokens "
                                    "separated by spaces) and write it to -o; without TEXT, the paper's run on "
                                    "Brown-LM (Figure 6, Table 1).  Every 20th sentence is held out for the "
                                    "held-out bound unless --dev is given; training stops at --max-iter, "
                                    "--minutes, or --patience iterations without a better held-out bound, and "
                                    "the best model is written.  'fsmlearn mrf neighbours MODEL WORD' then "
                                    "lists a word's nearest words in U.")
    p.add_argument("text", nargs="*", help="your text files (.gz/.bz2/.xz too); none: Brown-LM")
    p.add_argument("--dev", nargs="+", help="held-out text files (default: every 20th sentence of TEXT)")
    p.add_argument("--order", type=int, default=2, help="K (default 2)")
    p.add_argument("--rank", type=int, default=30, help="D of theta^l = U W^l (eq. 5); 0 for full rank (default 30)")
    p.add_argument("--vocab", type=int, default=None,
                   help="keep only the most frequent training words, the rest <unk> (default: 10,000; "
                        "Brown-LM's own 10,000; full rank needs <= 3000)")
    p.add_argument("--max-iter", type=int, default=300, help="L-BFGS iterations at most (default 300)")
    p.add_argument("--minutes", type=float, default=40.0, help="time budget in minutes (default 40)")
    p.add_argument("--patience", type=int, default=8,
                   help="stop after this many iterations without a better held-out bound (default 8)")
    p.add_argument("--tighten-tol", type=float, default=1e-3,
                   help="stop tightening when max_l ||mu^l - mu^0||_1 is below this (default 1e-3)")
    _tighten_options(p, 50)
    p.add_argument("--l2", type=float, default=0.0, help="L2 penalty on the pairwise parameters (default 0)")
    p.add_argument("--init", choices=("pmi", "random"), default="pmi",
                   help="theta^l from the corpus's positive PMI (its SVD for low rank) or small random U, W "
                        "(default: pmi)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the SVD and the random start (default 0)")
    p.add_argument("--data-dir", default=None, help="the corpora folder (default ../shared/data or $FSMLEARN_DATA)")
    p.add_argument("--report", default=None,
                   help="JSON report (PNG beside it) (default: beside the model; Brown-LM: reports/mrf-lm.json; "
                        "'' for none)")
    p.add_argument("-o", "--model", default=None,
                   help="where the best model goes (required with TEXT; Brown-LM: models/mrf-lm.npz, '' for "
                        "nowhere)")
    add_quiet(p)
    p.set_defaults(func=_lm)

    p = msub.add_parser("neighbours", help="the nearest words of words in a low-rank MRF LM's embedding U "
                                           "(section 6, Table 1)",
                        description="For each WORD, the K words whose rows of U (theta^l = U W^l, eq. 5) are "
                                    "nearest by cosine similarity, the similarity printed beside each: one line "
                                    "per word, tab after the word (section 6, Table 1).")
    p.add_argument("model", help="a model written by fsmlearn mrf lm")
    p.add_argument("words", nargs="+", help="words of the model's vocabulary")
    p.add_argument("-k", type=int, default=5, help="neighbours per word (default 5)")
    p.set_defaults(func=_neighbours)

    p = msub.add_parser("train-tagger", help="train the MRF tagger (section 6, Table 2) on your tagged file",
                        description="Train the MRF POS tagger of section 6 (tags joined to the next tag and to "
                                    "their --window nearest words with appendix B's features; Algorithm 2 on the "
                                    "lifted bound) on DATA: word/TAG tokens, one sentence a line, or CoNLL-U "
                                    "(UPOS, or XPOS with --conllu-tags xpos), by --format or the name's "
                                    "extension, as 'fsmlearn tag train' reads it.  The tagger is written "
                                    "atomically to -o; 'fsmlearn mrf tag' and 'fsmlearn mrf eval' apply it.")
    p.add_argument("data", help="a tagged file (or a tagged dataset: wsj-train, wsj-small)")
    p.add_argument("-o", "--output", required=True, help="the tagger file (.npz) to write")
    p.add_argument("--dev", help="a tagged file scored every --eval-every iterations while training")
    p.add_argument("--eval-every", type=int, default=25, help="iterations between --dev scores (default 25)")
    p.add_argument("--window", type=int, default=1,
                   help="L: the words joined to each tag, nearest first (default 1, the word under the tag)")
    p.add_argument("--centre-weight", type=float, default=None,
                   help="with L > 1: p_0, the weight of the tree of the word under the tag (default 1/L)")
    p.add_argument("--max-iter", type=int, default=150, help="L-BFGS iterations (default 150)")
    p.add_argument("--minutes", type=float, default=60.0, help="time budget in minutes (default 60)")
    p.add_argument("--l2", type=float, default=1e-6, help="L2 penalty per position (default 1e-6)")
    p.add_argument("--max-affix", type=int, default=4, help="longest prefix and suffix feature (default 4)")
    _tighten_options(p, 30, "lbfgs")
    _tagged_file_options(p)
    add_quiet(p)
    p.set_defaults(func=_train_tagger)

    p = msub.add_parser("tag", help="tag sentences from stdin with an MRF tagger",
                        description="Tag stdin, one sentence per line (tokens separated by spaces unless "
                                    "--tokenize), with a tagger written by 'fsmlearn mrf train-tagger' (Jernite, "
                                    "Rush and Sontag 2015, section 6 and Table 2: the lifted MRF tagger; the best "
                                    "path on each sentence's lattice), writing one tagged "
                                    "sentence per line, as 'fsmlearn tag tag' does.")
    p.add_argument("model", help="a tagger written by fsmlearn mrf train-tagger (or mrf tag-wsj --model)")
    p.add_argument("--tokenize", action="store_true",
                   help="tokenise each line first, Penn Treebank style (one line stays one sentence)")
    p.add_argument("--format", choices=list(OUTPUT_FORMATS), default="tags",
                   help="output: tags (default), word/tag, or conllu")
    p.set_defaults(func=_tag_stdin)

    p = msub.add_parser("eval", help="accuracy of an MRF tagger on a tagged file: total, known, unknown words",
                        description="Tag DATA's words with MODEL and print the accuracy in total, on known words "
                                    "(seen in training) and on unknown words, as 'fsmlearn tag eval' does (the "
                                    "accuracies of Jernite, Rush and Sontag 2015, section 6, Table 2: total and "
                                    "unseen words).")
    p.add_argument("model", help="a tagger written by fsmlearn mrf train-tagger")
    p.add_argument("data", help="a tagged file (or a tagged dataset: wsj-train, wsj-small)")
    _tagged_file_options(p)
    add_quiet(p)
    p.set_defaults(func=_eval_tagger)

    p = msub.add_parser("tag-wsj", help="section 6, Table 2: the MRF POS tagger, WSJ-train -> WSJ-small, against "
                                        "the supervised HMMs")
    p.add_argument("--window", type=int, default=1,
                   help="L: the words joined to each tag, nearest first (offsets 0, +1, -1, +2, ...; the "
                        "morphology tests on the word under the tag only); default 1, the word under the tag")
    p.add_argument("--centre-weight", type=float, default=None,
                   help="with L > 1: p_0, the weight of the lifted tree of the word under the tag (its edges' "
                        "appearance probability rho); the other offsets share 1 - p_0 (default 1/L each)")
    p.add_argument("--max-iter", type=int, default=400, help="L-BFGS iterations (default 400)")
    p.add_argument("--l2", type=float, default=1e-6, help="L2 penalty per position (default 1e-6)")
    _tighten_options(p, 30, "lbfgs")
    p.add_argument("--eval-every", type=int, default=100, help="score WSJ-small every N iterations (default 100)")
    p.add_argument("--minutes", type=float, default=25.0, help="time budget in minutes (default 25)")
    p.add_argument("--no-hmm", action="store_true", help="skip the HMM baselines")
    p.add_argument("--max-affix", type=int, default=4,
                   help="longest prefix and suffix feature (default 4, appendix B's)")
    p.add_argument("--data-dir", default=None, help="the corpora folder (default ../shared/data or $FSMLEARN_DATA)")
    p.add_argument("--report", default="reports/mrf-tag.json", help="JSON report (PNG beside it) (default: %(default)s)")
    p.add_argument("--model", default="models/mrf-tag.npz",
                   help="where the trained tagger goes ('' for nowhere) (default: %(default)s)")
    add_quiet(p)
    p.set_defaults(func=_tag)
