"""``fsmlearn rcms``: reified context models on the command line."""

from __future__ import annotations

from .common import DATASET_NAMES, Progress, add_quiet, add_workers


def _decipher_own(args) -> int:
    import sys
    from ..experiments.rcm_decipher import parse_runs
    from collections import Counter
    from ..data.text import read_token_lines
    from ..errors import ArgumentError
    from ..fsm.atomic import atomic_write
    from ..rcm.decipher import decipher
    say = Progress(args.quiet)
    if not (args.cipher and args.plain):
        raise ArgumentError("--cipher and --plain go together: your ciphertext and plaintext of its language")
    run = parse_runs(args.runs or "rcms:2:60")
    if len(run) != 1:
        raise ArgumentError(f"--runs {args.runs!r}: one run (method:order[:size]) for your own cipher")
    method, order, size = run[0]
    plain_lines = read_token_lines([args.plain])
    cipher_lines = read_token_lines([args.cipher])
    if not cipher_lines:
        raise ArgumentError(f"{args.cipher}: no ciphertext in it")
    counts = Counter(w for s in plain_lines for w in s)
    words = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:args.vocab]]
    wid = {w: i for i, w in enumerate(words)}
    plain = [[wid[w] for w in s] for s in plain_lines if all(w in wid for w in s)]
    if not plain:
        raise ArgumentError(f"{args.plain}: no line consists of its {args.vocab} most frequent words")
    symbols = sorted({c for s in cipher_lines for c in s})
    sid = {c: i for i, c in enumerate(symbols)}
    cipher = [[sid[c] for c in s] for s in cipher_lines]
    say(f"{len(cipher):,} ciphertext lines ({sum(map(len, cipher)):,} tokens, {len(symbols):,} symbols); "
        f"plaintext LM of order {order} on {len(plain):,} lines of the {len(words):,} most frequent words")
    log_emit, best, _ = decipher(cipher, plain, len(words), order=order, size=size or 60, method=method,
                                 iterations=args.iterations, discount=args.discount, seed=args.seed, progress=say)
    key = "".join(f"{c}\t{words[int(log_emit[:, j].argmax())]}\n" for j, c in enumerate(symbols))
    if args.key:
        atomic_write(args.key, lambda f: f.write(key.encode("utf-8")))
        say(f"wrote the key to {args.key}: {len(symbols):,} cipher symbols")
    else:
        sys.stdout.write(key + "\n")
    for ws in best:
        sys.stdout.write(" ".join(words[int(w)] for w in ws) + "\n")
    sys.stdout.flush()
    return 0


def _decipher(args) -> int:
    from ..experiments.rcm_decipher import DEFAULT_RUNS, DecipherConfig, parse_runs, run_decipher
    if args.cipher or args.plain:
        return _decipher_own(args)
    cfg = DecipherConfig(data=args.dataset, vocab=args.vocab, ciphertexts=args.ciphertexts,
                         iterations=args.iterations, seed=args.seed, runs=parse_runs(args.runs or DEFAULT_RUNS),
                         report=args.report, jobs=args.jobs, plaintext=args.plaintext,
                         discount=args.discount, segments=args.segments)
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


def _train(args) -> int:
    import time
    from ..rcm.io import save_align_rcm
    from ..rcm.transduce import error_rates, fit_transducer, read_pairs, transduce
    say = Progress(args.quiet)
    pairs = read_pairs(args.pairs, args.chars)
    dev = read_pairs(args.dev, args.chars) if args.dev else None
    say(f"{args.pairs}: {len(pairs):,} pairs, {sum(len(p[0]) for p in pairs):,} input and "
        f"{sum(len(p[1]) for p in pairs):,} output tokens" + (", alignments given" if len(pairs[0]) == 3 else ""))
    t0 = time.time()
    method = "rcms" if (args.strategy or ("forced" if len(pairs[0]) == 3 else "rcms")) == "rcms" else "beam"

    def on_pass(p, model, st, inputs, outputs):
        line = f"pass {p}/{args.passes}: log-likelihood {st['loglik']:.1f}, {time.time() - t0:.0f} s"
        if dev is not None:
            hyps = [transduce(model, inputs, outputs, p[0], args.size, method)[0]
                    if not inputs.unknown(p[0]) else [] for p in dev]
            r = error_rates(hyps, [p[1] for p in dev])
            line += f"; {args.dev}: CER {r['cer']:.3f}, exact match {100 * r['exact_match']:.1f}%"
        say(line)

    model, inputs, outputs = fit_transducer(pairs, strategy=args.strategy, size=args.size, order=args.order,
                                            passes=args.passes, max_advance=args.max_advance, seed=args.seed,
                                            hash_bits=args.hash_bits, on_pass=on_pass)
    save_align_rcm(model, args.output, outputs.symbols, inputs.symbols)
    say(f"wrote {args.output}: {len(inputs.symbols)} input and {len(outputs.symbols)} output symbols, "
        f"{args.passes} passes in {time.time() - t0:.0f} s")
    return 0


def _load(path):
    from ..errors import ArgumentError
    from ..rcm.io import load_align_rcm
    from ..rcm.transduce import Alphabet
    model, outs, ins = load_align_rcm(path)
    if outs is None or ins is None:
        raise ArgumentError(f"{path}: the model has no symbol tables (written by the speech experiment without "
                            "them?): it cannot read text")
    return model, Alphabet(ins), Alphabet(outs)


#: the model of this process's decoding workers (ordered_map's init sets it)
_WORKER: dict = {}


def _init_worker(path: str, chars: bool, size: int, method: str, kbest=None, marginals: bool = False,
                 threshold: float = 0.0, probability: bool = False) -> None:
    _WORKER.update(model=_load(path), chars=chars, size=size, method=method, kbest=kbest, marginals=marginals,
                   threshold=threshold, probability=probability)


def _decode_one(item):
    """(line number, text) -> ("ok", output text) or ("error", the line's message)."""
    from ..errors import ArgumentError
    from ..rcm.transduce import marginals, transduce, transduce_kbest
    ln, line = item
    w = _WORKER
    model, inputs, outputs = w["model"]
    x = list(line.strip()) if w["chars"] else line.split()
    if not x:
        return "ok", "\n"
    join = "" if w["chars"] else " "
    try:
        if w["kbest"]:
            rows = transduce_kbest(model, inputs, outputs, x, w["kbest"], w["size"], w["method"])
            return "ok", "".join(f"{r + 1}\t{join.join(y)}\t{p:.6g}\n" for r, (y, p) in enumerate(rows)) + "\n"
        if w["marginals"]:
            rows = marginals(model, inputs, outputs, x, w["size"], w["method"], w["threshold"])
            return "ok", "".join(f"{i + 1}\t" + "\t".join(f"{t} {p:.4g}" for t, p in row) + "\n"
                                 for i, row in enumerate(rows)) + "\n"
        y, p = transduce(model, inputs, outputs, x, w["size"], w["method"])
        return "ok", join.join(y) + (f"\t{p:.6g}" if w["probability"] else "") + "\n"
    except ArgumentError as e:
        return "error", f"<stdin>:{ln}: {e}"


def _best_one(item):
    """(input tokens) -> the best output tokens ([] for an input with unseen symbols)."""
    from ..rcm.transduce import transduce
    model, inputs, outputs = _WORKER["model"]
    if inputs.unknown(item):
        return []
    return transduce(model, inputs, outputs, item, _WORKER["size"], _WORKER["method"])[0]


def _decode(args) -> int:
    import sys
    from ..data import iter_strict_lines
    from ..errors import ArgumentError
    from .common import check_threads, ordered_map
    if args.kbest is not None and args.kbest < 1:
        raise ArgumentError(f"--kbest must be at least 1, got {args.kbest}")
    if not 0.0 <= args.min_probability < 1.0:
        raise ArgumentError(f"--min-probability must be in [0, 1), got {args.min_probability}")
    workers = check_threads(args.threads)
    _WORKER.clear()
    if workers != 1:
        _load(args.model)       # a bad model file: one line here, before any worker starts
    method = "beam" if args.beam else "rcms"
    init_args = (args.model, args.chars, args.size, method, args.kbest, args.marginals, args.min_probability,
                 args.probability)
    lines = iter_strict_lines(getattr(sys.stdin, "buffer", sys.stdin), "<stdin>")
    for status, text in ordered_map(_init_worker, init_args, _decode_one, lines, workers):
        if status == "error":
            raise ArgumentError(text)
        sys.stdout.write(text)
    sys.stdout.flush()
    return 0


def _eval(args) -> int:
    from ..rcm.transduce import error_rates, read_pairs
    from .common import check_threads, ordered_map
    workers = check_threads(args.threads)
    _WORKER.clear()
    pairs = read_pairs(args.pairs, args.chars)
    method = "beam" if args.beam else "rcms"
    hyps = list(ordered_map(_init_worker, (args.model, args.chars, args.size, method), _best_one, [p[0] for p in pairs],
                            workers))
    _, inputs, _ = _WORKER["model"] if "model" in _WORKER else _load(args.model)   # read here once already?
    unseen = sum(1 for p in pairs if inputs.unknown(p[0]))
    r = error_rates(hyps, [p[1] for p in pairs])
    print(f"{args.pairs}: CER {r['cer']:.4f} ({r['reference_tokens']:,} reference tokens), exact match "
          f"{100 * r['exact_match']:.2f}% ({r['pairs']:,} pairs"
          + (f"; {unseen} with input symbols the model never saw, counted as empty outputs)" if unseen else ")"))
    return 0


def _add_transducer_options(p) -> None:
    p.add_argument("--chars", action="store_true", help="every character a token (default: tokens separated by "
                                                        "spaces)")
    p.add_argument("--size", type=int, default=20, help="B: contexts per position (default 20, the paper's)")


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
    p = rsub.add_parser("decipher", help="decipherment by EM (section 6): exact, beam and RCMS contexts; your own "
                                         "cipher with --cipher and --plain",
                        description="Without --cipher: the paper's experiment (section 6, figure 5) on a dataset's "
                                    "most frequent words, enciphered by a seeded substitution, every run of "
                                    "--runs.  With --cipher FILE --plain FILE: decipher your own word-"
                                    "substitution cipher (ciphertext lines of space-separated symbols) by EM "
                                    "under an absolute-discounting LM of the plaintext's --vocab most frequent "
                                    "words, with the one run --runs names (default rcms:2:60); prints the "
                                    "learned key (symbol TAB word; to --key FILE instead) and the deciphered "
                                    "lines (each token's most probable word).")
    p.add_argument("--cipher", help="your ciphertext: one line per sentence, symbols separated by spaces")
    p.add_argument("--plain", help="plaintext of the cipher's language for the LM, one sentence a line")
    p.add_argument("--key", help="with --cipher: write the key here (default: stdout, before the text)")
    p.add_argument("--dataset", default="mixed-text", choices=DATASET_NAMES,
                   help="the text whose frequent words are enciphered (default: mixed-text)")
    p.add_argument("--vocab", type=int, default=500, help="the most frequent words kept (default 500)")
    p.add_argument("--ciphertexts", type=int, default=2000, help="sentences enciphered (default 2000)")
    p.add_argument("--iterations", type=int, default=20, help="EM iterations per run (default 20)")
    p.add_argument("--plaintext", type=int, default=None,
                   help="use only the first N plaintext sentences for the transition LMs (default all)")
    p.add_argument("--discount", type=float, default=0.25,
                   help="absolute discount of the plaintext LMs (default 0.25, the paper's)")
    p.add_argument("--segments", choices=["sentences", "clauses"], default="sentences",
                   help="the units of cipher and plaintext: sentences made only of the --vocab words (the "
                        "paper's; 6,241 in Mixed-text at 500 words), or clauses (runs of two or more words "
                        "between punctuation tokens) made only of them (33,440): more plaintext for the "
                        "2nd-order LM (default: sentences)")
    p.add_argument("--runs", default=None,
                   help=f"method (exact, beam or rcms):order[:size],... (default: the paper's {DEFAULT_RUNS}; "
                        "with --cipher one run, default rcms:2:60)")
    p.add_argument("--jobs", type=int, default=1, help="runs at once, in forked processes (default 1)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the cipher and the runs (default 0)")
    p.add_argument("--report", default="reports/rcm-decipher.json",
                   help="JSON report (PNG beside it) (default: %(default)s)")
    add_quiet(p)
    p.set_defaults(func=_decipher)

    p = rsub.add_parser("train", help="train a latent-alignment transducer on your input/output pairs (section 6)",
                        description="Train the latent-alignment model of section 6 (the speech task: each output "
                                    "token covers 1..--max-advance new input tokens, or 0: it shares the input "
                                    "token of the output token before it (one input token spelled by several), "
                                    "alignments unobserved; features "
                                    "on output (n+1)-grams and alignment edges) on PAIRS, one 'input<TAB>output' "
                                    "a line, tokens separated by spaces (--chars: every character a token), by "
                                    "AdaGrad with a learning strategy of the paper: RCMS contexts (rcms), beam "
                                    "search selecting by model, target or hybrid score, or forced decoding of "
                                    "imputed alignments.  The model (with its symbol tables) is written "
                                    "atomically to -o; 'fsmlearn rcms decode' and 'fsmlearn rcms eval' apply it.")
    p.add_argument("pairs", help="training pairs, input<TAB>output per line, optionally <TAB>alignment: the new input "
                                 "tokens each output token covers (e.g. 1 2 1, or 1 0 1: the second output token "
                                 "shares the first's input token)")
    p.add_argument("-o", "--output", required=True, help="the model file to write")
    p.add_argument("--strategy", choices=["rcms", "model", "target", "hybrid", "forced"], default=None,
                   help="learning strategy (default rcms; forced, on them, when the pairs give alignments)")
    p.add_argument("--order", type=int, default=4, help="n: features on output (n+1)-grams (default 4: 5-grams)")
    p.add_argument("--passes", type=int, default=5, help="passes over the pairs (default 5)")
    p.add_argument("--max-advance", type=int, default=2, help="new input tokens one output token may cover (default 2)")
    p.add_argument("--dev", help="pairs scored after every pass (CER, exact match)")
    p.add_argument("--hash-bits", type=int, default=20,
                   help="the feature weights' hash table has 2^BITS entries (default 20; the paper's runs: 22)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the data order (default 0)")
    _add_transducer_options(p)
    add_quiet(p)
    p.set_defaults(func=_train)

    p = rsub.add_parser("decode", help="the best output for each input line (stdin) of a trained transducer",
                        description="Read inputs from stdin, one a line, and write the best output of each "
                                    "(Steinhardt and Liang 2015, section 6: the engine's best path over the RCMS "
                                    "contexts, B = --size per position and alignment state, or the beam's with "
                                    "--beam), with --probability its p(y | x) = sum over alignments after a tab.  "
                                    "--kbest K: per input, K lines 'rank<TAB>output<TAB>p(y | x)' (the distinct "
                                    "outputs of the cheapest output-alignment paths, in the order of their best "
                                    "alignment) and a blank line.  --marginals: per input, one line per output "
                                    "position 'i<TAB>token p<TAB>token p ...' (P(y_i = token | x), most probable "
                                    "first, above --min-probability; a row sums to P(|y| >= i)) and a blank line.")
    p.add_argument("model", help="a model written by fsmlearn rcms train")
    p.add_argument("--beam", action="store_true", help="beam contexts instead of RCMS contexts")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--probability", action="store_true", help="print p(y | x) after each output")
    how.add_argument("--kbest", type=int, metavar="K", help="the K best distinct outputs per input, with p(y | x)")
    how.add_argument("--marginals", action="store_true", help="the posterior marginals of each output position")
    p.add_argument("--min-probability", type=float, default=0.001,
                   help="with --marginals, the tokens printed have P(y_i = token | x) above this (default 0.001)")
    _add_transducer_options(p)
    add_workers(p)
    p.set_defaults(func=_decode)

    p = rsub.add_parser("eval", help="CER and exact match of a trained transducer on pairs",
                        description="Decode the inputs of PAIRS and print the token (character) error rate "
                                    "against their outputs and the exact-match rate (Steinhardt and Liang 2015, "
                                    "section 6: CER, the paper's measure of the speech task).")
    p.add_argument("model", help="a model written by fsmlearn rcms train")
    p.add_argument("pairs", help="input<TAB>output per line")
    p.add_argument("--beam", action="store_true", help="beam contexts instead of RCMS contexts")
    _add_transducer_options(p)
    add_workers(p)
    p.set_defaults(func=_eval)

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
