"""``fsmlearn mrf``: Markov random field language models by lifted variational inference
(Jernite, Rush and Sontag 2015) on the command line."""

from __future__ import annotations

from pathlib import Path

from .common import Progress, add_quiet


def _synthetic(args) -> int:
    from ..experiments.mrf_synthetic import SyntheticConfig, run_synthetic
    cfg = SyntheticConfig(length=args.length, K=args.order, seeds=args.seeds, max_iter=args.max_iter,
                          tighten_iter=args.tighten_iter, tighten_method=args.tighten, report=Path(args.report))
    run_synthetic(cfg, progress=Progress(args.quiet))
    return 0


def _lm(args) -> int:
    from ..experiments.mrf_lm import LMConfig, run_lm
    rank = None if args.rank == 0 else args.rank
    cfg = LMConfig(K=args.order, rank=rank, vocab=args.vocab, max_iter=args.max_iter, minutes=args.minutes,
                   patience=args.patience, tighten_iter=args.tighten_iter, tighten_tol=args.tighten_tol,
                   tighten_method=args.tighten, l2=args.l2, seed=args.seed, init=args.init,
                   report=Path(args.report),
                   model=Path(args.model) if args.model else None, data_dir=args.data_dir)
    run_lm(cfg, progress=Progress(args.quiet))
    return 0


def _tag(args) -> int:
    from ..experiments.mrf_tag import TagConfig, run_tag
    cfg = TagConfig(window=args.window, centre_weight=args.centre_weight, max_iter=args.max_iter, l2=args.l2,
                    tighten_iter=args.tighten_iter, tighten_method=args.tighten, eval_every=args.eval_every,
                    minutes=args.minutes, hmm=not args.no_hmm, report=Path(args.report), data_dir=args.data_dir,
                    model=Path(args.model) if args.model else None, max_affix=args.max_affix)
    run_tag(cfg, progress=Progress(args.quiet))
    return 0


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

    p = msub.add_parser("lm", help="section 6, Figure 6 and Table 1: the MRF LM on Brown-LM")
    p.add_argument("--order", type=int, default=2, help="K (default 2)")
    p.add_argument("--rank", type=int, default=30, help="D of theta^l = U W^l (eq. 5); 0 for full rank (default 30)")
    p.add_argument("--vocab", type=int, default=None,
                   help="keep only the most frequent training words (default: the 10,000 of Brown-LM; "
                        "full rank needs <= 3000)")
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
    p.add_argument("--report", default="reports/mrf-lm.json", help="JSON report (PNG beside it) (default: %(default)s)")
    p.add_argument("--model", default="models/mrf-lm.npz",
                   help="where the best model goes ('' for nowhere) (default: %(default)s)")
    add_quiet(p)
    p.set_defaults(func=_lm)

    p = msub.add_parser("tag", help="section 6, Table 2: the MRF POS tagger, WSJ-train -> WSJ-small, against "
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
