"""``fsmlearn rcms``: reified context models on the command line."""

from __future__ import annotations

from .common import DATASET_NAMES, Progress, add_quiet


def _decipher(args) -> int:
    from ..experiments.rcm_decipher import DecipherConfig, parse_runs, run_decipher
    cfg = DecipherConfig(data=args.dataset, vocab=args.vocab, ciphertexts=args.ciphertexts,
                         iterations=args.iterations, seed=args.seed, runs=parse_runs(args.runs),
                         report=args.report, jobs=args.jobs, plaintext=args.plaintext,
                         discount=args.discount)
    run_decipher(cfg, progress=Progress(args.quiet))
    return 0


def _speech(args) -> int:
    from ..experiments.rcm_speech import SpeechConfig, run_speech
    from ..rcm.align_learn import STRATEGIES
    strategies = tuple(s.strip() for s in args.strategies.split(",")) if args.strategies else STRATEGIES
    cfg = SpeechConfig(strategies=strategies, size=args.size, passes=args.passes, orders=args.orders,
                       train=args.train, test=args.test, seed=args.seed, report=args.report, jobs=args.jobs,
                       model_dir=args.models, resume=args.resume)
    run_speech(cfg, progress=Progress(args.quiet))
    return 0


def _words(args) -> int:
    from ..experiments.rcm_speech import WordsConfig, parse_word_runs, run_words
    cfg = WordsConfig(runs=parse_word_runs(args.runs), passes=args.passes, train=args.train, test=args.test,
                      seed=args.seed, precision=args.precision, report=args.report, jobs=args.jobs,
                      model_dir=args.models, resume=args.resume)
    run_words(cfg, progress=Progress(args.quiet))
    return 0


def _add_run_options(p, name: str, pngs: str) -> None:
    """The options speech and words share: seed, jobs, report, models, resume, quiet."""
    p.add_argument("--seed", type=int, default=0, help="random seed of the data orders and the task (default 0)")
    p.add_argument("--jobs", type=int, default=1, help="runs at once, in forked processes (default 1)")
    p.add_argument("--report", default=f"reports/rcms-{name}.json",
                   help=f"JSON report ({pngs} beside it; read first with --resume) (default: %(default)s)")
    p.add_argument("--models", default=f"models/rcms-{name}",
                   help="folder for the trained models ('' for none) (default: %(default)s)")
    p.add_argument("--resume", action="store_true",
                   help="keep the finished runs of an existing --report made with the same task and settings, "
                        "run only the others")
    add_quiet(p)


def add_parser(sub) -> None:
    from ..experiments.rcm_decipher import DEFAULT_RUNS
    rcm = sub.add_parser("rcms", help="reified context models (Steinhardt and Liang 2015)")
    rsub = rcm.add_subparsers(dest="rcm_command", metavar="command", required=True)
    p = rsub.add_parser("decipher", help="decipherment by EM (section 6): exact, beam and RCMS contexts")
    p.add_argument("--dataset", default="mixed-text", choices=DATASET_NAMES,
                   help="the text whose frequent words are enciphered (default: mixed-text)")
    p.add_argument("--vocab", type=int, default=500, help="the most frequent words kept (default 500)")
    p.add_argument("--ciphertexts", type=int, default=2000, help="sentences enciphered (default 2000)")
    p.add_argument("--iterations", type=int, default=20, help="EM iterations per run (default 20)")
    p.add_argument("--plaintext", type=int, default=None,
                   help="use only the first N plaintext sentences for the transition LMs (default all)")
    p.add_argument("--discount", type=float, default=0.25,
                   help="absolute discount of the plaintext LMs (default 0.25, the paper's)")
    p.add_argument("--runs", default=DEFAULT_RUNS,
                   help=f"method (exact, beam or rcms):order[:size],... (default: the paper's {DEFAULT_RUNS})")
    p.add_argument("--jobs", type=int, default=1, help="runs at once, in forked processes (default 1)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the cipher and the runs (default 0)")
    p.add_argument("--report", default="reports/rcm-decipher.json",
                   help="JSON report (PNG beside it) (default: %(default)s)")
    add_quiet(p)
    p.set_defaults(func=_decipher)

    p = rsub.add_parser("speech", help="latent alignments (section 6, figure 4): the beam strategies, forced "
                                       "decoding and RCMS on phonemes -> spelling")
    p.add_argument("--strategies", default="", help="comma-separated among model, target, hybrid, forced, rcms "
                                                    "(default all)")
    p.add_argument("--size", type=int, default=20, help="beam size / contexts per position and z (default 20)")
    p.add_argument("--passes", type=int, default=5, help="passes over the training data (default 5)")
    p.add_argument("--orders", type=int, default=5, help="random data orders for forced decoding and RCMS (default 5)")
    p.add_argument("--train", type=int, default=746, help="training utterances (default 746)")
    p.add_argument("--test", type=int, default=253, help="test utterances (default 253)")
    _add_run_options(p, "speech", "PNGs")
    p.set_defaults(func=_speech)

    p = rsub.add_parser("words", help="precision at high confidence (section 5, figure 3) on phonemes -> letters "
                                      "of single words")
    p.add_argument("--runs", default="beam:10,rcms:10,beam:200", help="method:size,... (default beam:10,rcms:10,"
                                                                      "beam:200)")
    p.add_argument("--passes", type=int, default=3, help="passes over the training words (default 3)")
    p.add_argument("--train", type=int, default=6000, help="training words (default 6000)")
    p.add_argument("--test", type=int, default=1000, help="test words (default 1000)")
    p.add_argument("--precision", type=float, default=0.99, help="the precision of the recall figure (default 0.99)")
    _add_run_options(p, "words", "PNG")
    p.set_defaults(func=_words)
