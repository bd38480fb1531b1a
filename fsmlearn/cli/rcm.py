"""``fsmlearn rcms``: reified context models on the command line."""

from __future__ import annotations

from .common import Progress, add_quiet


def _decipher(args) -> int:
    from ..experiments.rcm_decipher import DecipherConfig, parse_runs, run_decipher
    cfg = DecipherConfig(data=args.dataset, vocab=args.vocab, ciphertexts=args.ciphertexts,
                         iterations=args.iterations, seed=args.seed, runs=parse_runs(args.runs),
                         report=args.report, jobs=args.jobs)
    run_decipher(cfg, progress=Progress(args.quiet))
    return 0


def add_parser(sub) -> None:
    from ..experiments.rcm_decipher import DEFAULT_RUNS
    rcm = sub.add_parser("rcms", help="reified context models (Steinhardt and Liang 2015)")
    rsub = rcm.add_subparsers(dest="rcm_command", metavar="command", required=True)
    p = rsub.add_parser("decipher", help="decipherment by EM (section 6): exact, beam and RCMS contexts")
    p.add_argument("--dataset", default="mixed-text", help="the text whose frequent words are enciphered")
    p.add_argument("--vocab", type=int, default=500, help="the most frequent words kept (default 500)")
    p.add_argument("--ciphertexts", type=int, default=2000, help="sentences enciphered (default 2000)")
    p.add_argument("--iterations", type=int, default=20, help="EM iterations per run (default 20)")
    p.add_argument("--runs", default=DEFAULT_RUNS,
                   help=f"method (exact, beam or rcms):order[:size],... (default: the paper's {DEFAULT_RUNS})")
    p.add_argument("--jobs", type=int, default=1, help="runs at once, in forked processes (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", default="reports/rcm-decipher.json", help="JSON report (PNG beside it)")
    add_quiet(p)
    p.set_defaults(func=_decipher)
