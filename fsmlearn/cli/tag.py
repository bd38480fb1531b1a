"""``fsmlearn tag``: HMM part-of-speech taggers on the command line.

Subcommands:
    train  supervised HMM (TnT-style) from a tagged dataset or file -> MODEL
    em     unsupervised HMM by EM under the 17-tag dictionary -> MODEL, a JSON
           report of every iteration and a PNG plot beside it
    giga200  the tagger-giga200 pipeline: n-gram EM on a sampled 200M-token corpus's counts
    eval   accuracy (total, known words, unknown words) of MODEL on a tagged dataset or
           file; gold tags the model does not know count as errors, and are reported
    tag    tag sentences from stdin (one per line, tokens separated by spaces, or
           --tokenize): one line of tags (or word/TAG, or a CoNLL-U block) per sentence

Tagged files (train, eval): ``word/TAG`` tokens one sentence a line, or CoNLL-U,
chosen by --format or the name's extension (:mod:`fsmlearn.data.tagged`).
"""

from __future__ import annotations

import sys
import time

from .common import Progress, add_quiet, add_scale, check_scale, percent as _pct

# fsmlearn.data.tagged's TAGGED_FORMATS and OUTPUT_FORMATS (a test checks they agree), spelled out
# here so that building the parser does not import the corpus readers
TAGGED_FORMATS = ("word/tag", "conllu")
OUTPUT_FORMATS = ("tags", "word/tag", "conllu")


def _check_file_options(args) -> None:
    from ..data import TAGGED_DATASETS
    from ..errors import ArgumentError
    if args.data in TAGGED_DATASETS and (args.format or args.conllu_tags):
        raise ArgumentError(f"--format and --conllu-tags are for tagged files; {args.data!r} is a "
                            f"named dataset (give a file that exists as ./{args.data} to read it)")


def _train(args) -> int:
    from ..data import TAGGED_DATASETS, load_tagged, tags_of
    from ..data.tagsets import input_tags, tag_mapper, tagset_tags
    from ..tag import train_supervised
    _check_file_options(args)
    say = Progress(args.quiet)
    t0 = time.time()
    tagset = args.tagset or ("penn45" if args.data in TAGGED_DATASETS else None)
    sents = load_tagged(args.data, format=args.format, column=args.conllu_tags or "upos",
                        tags=input_tags(tagset) if tagset else None,
                        tagset_name=f"the tags of --tagset {tagset}" if tagset else None)
    tags = tagset_tags(tagset) if tagset else tags_of(sents)
    say(f"read {args.data}: {len(sents):,} sentences, {sum(map(len, sents)):,} tokens, "
        + (f"tag set {tagset}" if tagset else f"{len(tags)} tags of its own"))
    hmm = train_supervised(sents, tags, order=args.order,
                           map_tag=tag_mapper(tagset) if tagset else None, progress=say)
    hmm.save(args.output)
    say(f"wrote {args.output}: order {hmm.order}, {hmm.T} tags, {hmm.V:,} words ({time.time() - t0:.1f} s)")
    return 0


def _eval(args) -> int:
    from ..data import load_tagged
    from ..tag import HMM, accuracy
    _check_file_options(args)
    say = Progress(args.quiet)
    hmm = HMM.load(args.model)
    sents = load_tagged(args.data, format=args.format, column=args.conllu_tags or "upos")
    t0 = time.time()
    a = accuracy(hmm, sents)
    dt = time.time() - t0
    say(f"tagged {a['tokens']:,} tokens in {dt:.2f} s ({a['tokens'] / max(dt, 1e-9):,.0f} tokens/s)")
    n_bad = a["unknown_gold_tokens"]
    line = (f"{args.data}: total {_pct(a['total'])} ({a['tokens']} tokens)  known {_pct(a['known'])} "
            f"({a['known_tokens']})  unknown {_pct(a['unknown'])} ({a['unknown_tokens']})  "
            f"gold tags unknown to the model: {n_bad} tokens")
    if n_bad:
        items = list(a["unknown_gold_tags"].items())
        line += (" (" + ", ".join(f"{t} {c}" for t, c in items[:10]) + (", ..." if len(items) > 10 else "")
                 + "; counted as errors)")
        if 2 * n_bad > a["tokens"]:
            line += "; most gold tags are not the model's: another tag set? (CoNLL-U: see --conllu-tags)"
    print(line)
    return 0


def tag_stdin(tag_batch, tags, args, batch_tokens: int = 100_000) -> int:
    """Tag stdin's lines (``--tokenize``, ``--format`` of ``args``) in batches of about
    ``batch_tokens`` tokens with ``tag_batch`` (lists of words -> lists of tags), one tagged
    sentence per line to stdout; ``tags``: the model's tags (UD tags go in CoNLL-U's UPOS
    column, others in XPOS)."""
    from ..data import format_tagged, iter_strict_lines, tokenize
    from ..data.readers import UPOS_TAGS
    column = "upos" if set(tags) <= set(UPOS_TAGS) else "xpos"
    split = tokenize if args.tokenize else str.split
    out = sys.stdout
    batch = []
    tokens = 0

    def flush():
        for (lineno, line, words), tagged in zip(batch, tag_batch([words for _, _, words in batch])):
            out.write(format_tagged(words, tagged, args.format, column=column, sent_id=lineno, text=line))
        batch.clear()

    for lineno, line in iter_strict_lines(getattr(sys.stdin, "buffer", sys.stdin), "<stdin>"):
        words = split(line)
        batch.append((lineno, line, words))
        tokens += len(words)
        if tokens >= batch_tokens:
            flush()
            tokens = 0
    if batch:
        flush()
    out.flush()
    return 0


def _tag(args) -> int:
    from ..tag import HMM, tag_sentences
    hmm = HMM.load(args.model)
    return tag_stdin(lambda sents: tag_sentences(hmm, sents), hmm.tags, args)


def _em(args) -> int:
    from ..experiments.tag_em import TagEMConfig, run_tag_em
    run_tag_em(TagEMConfig(output=args.output, iterations=args.iterations, data=args.data, text=args.text,
                           corpus=args.corpus, report=args.report, order=args.order,
                           eval_data=args.eval_data or None, min_count=args.min_count,
                           chunk_tokens=args.chunk_tokens), progress=Progress(args.quiet))
    return 0


def _giga200(args) -> int:
    from ..experiments.giga200 import Giga200Config, run_giga200
    # --scheduler given: n-gram EM runs partitioned on that cluster too (not given: the LM
    # stages on a local cluster, n-gram EM in this process)
    shard = args.scheduler is not None and args.scheduler not in ("in-memory", "synchronous")
    ngram_em_scheduler = args.scheduler if shard else None
    if args.scheduler is None:
        args.scheduler = "local"
    check_scale(args)
    say = Progress(args.quiet)
    cfg = Giga200Config(cache=args.cache, report=args.report, model=args.model, ngrams=args.ngrams or None,
                        tokens=args.tokens, seed=args.seed, order=args.order, cutoff=args.cutoff,
                        iterations=args.iterations, corpus_em=not args.no_corpus_em,
                        method=args.method, discount=args.discount, cut_mass=args.cut_mass,
                        corpus_em_iterations=args.corpus_em_iterations, device=args.device,
                        scheduler=args.scheduler, memory=args.memory, tmp=args.tmp, workers=args.workers,
                        worker_threads=args.worker_threads, ngram_em_scheduler=ngram_em_scheduler)
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


_FILES_HELP = ("A tagged file is word/TAG tokens, one sentence per line (the tag after the last '/'), or "
               "CoNLL-U (UPOS, or XPOS with --conllu-tags xpos), chosen by --format or else by the name "
               "(.conllu, .conllu.gz: CoNLL-U; anything else: word/TAG); .gz/.bz2/.xz are read compressed.  "
               "A dataset's name wins over a file of that name (write ./NAME for the file).")


def _add_file_options(p) -> None:
    p.add_argument("--format", choices=list(TAGGED_FORMATS),
                   help="the tagged file's format (default: by its name: .conllu is CoNLL-U, else word/tag)")
    p.add_argument("--conllu-tags", choices=["upos", "xpos"],
                   help="the CoNLL-U column to read: upos (column 4, default) or xpos (column 5)")


def add_parser(sub) -> None:
    tg = sub.add_parser("tag", help="HMM part-of-speech taggers (train, em, eval, tag)")
    tsub = tg.add_subparsers(dest="tag_command", metavar="command")

    p = tsub.add_parser("train", help="train a supervised (TnT-style) HMM tagger on a tagged dataset or file",
                        description="Train a supervised (TnT-style) HMM tagger on a named dataset or on your "
                                    "own tagged file.  " + _FILES_HELP + "  A file's model learns the file's "
                                    "own tags unless --tagset is given; then a tag outside that set is an "
                                    "error naming the file, line and tag.")
    p.add_argument("--data", default="wsj-train",
                   help="a tagged dataset (wsj-train, wsj-small) or a tagged file (default wsj-train)")
    _add_file_options(p)
    p.add_argument("-o", "--output", required=True, help="model file to write")
    p.add_argument("--order", type=int, choices=[2, 3], default=2, help="2 = bigram (default), 3 = trigram")
    p.add_argument("--tagset", choices=["penn45", "tag17"],
                   help="the model's tags: penn45 (the 45 Penn tags) or tag17 (the 17-tag set: Penn and "
                        "UD XPOS tags are mapped).  Default: penn45 for a named dataset, the file's own "
                        "tags for a file")
    add_quiet(p)
    p.set_defaults(func=_train)

    p = tsub.add_parser("em", help="train an HMM by EM under the 17-tag dictionary (Merialdo setup)")
    p.add_argument("--data", help="training text, tags dropped: wsj-train, wsj-small or mixed-text")
    p.add_argument("--text", nargs="+", help="training text files instead, one sentence per line, tokens "
                                             "separated by spaces (.gz/.bz2/.xz; - for stdin)")
    p.add_argument("--corpus", help="folder of a saved encoded corpus: loaded (memory-mapped) if present, "
                                    "else written from --data")
    p.add_argument("--iterations", type=int, required=True, help="EM iterations to run")
    p.add_argument("-o", "--output", required=True, help="model file to write")
    p.add_argument("--report", help="JSON report of every iteration (a PNG plot is written beside it)")
    p.add_argument("--order", type=int, choices=[2, 3], default=2, help="HMM order: 2 = bigram, 3 = trigram")
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
    p.add_argument("--order", type=int, default=5, help="n-gram order of the counts and of the backoff LM c")
    p.add_argument("--cutoff", type=int, default=20, help="count cutoff of orders >= 3 (default 20)")
    p.add_argument("--iterations", type=int, default=10, help="n-gram EM iterations")
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
    add_scale(p, default=None, extra="(default: the counting and LM stages on a local cluster, n-gram EM in "
                                    "this process; given: n-gram EM's passes run partitioned on that cluster too, "
                                    "docs/ngram-em-scale.md)")
    add_quiet(p)
    p.set_defaults(func=_giga200)

    p = tsub.add_parser("eval", help="accuracy of a model on a tagged dataset or file",
                        description="Accuracy of MODEL on a named dataset or on your own tagged file: total, "
                                    "known words, unknown words (words the model never saw).  "
                                    + _FILES_HELP + "  A token whose gold tag the model does not know (a "
                                    "17-tag model first maps Penn and UD XPOS tags) counts as an error of "
                                    "the model; the output says how many tokens had such tags, and which.")
    p.add_argument("model", help="a tagger written by tag train, tag em or tag giga200")
    p.add_argument("--data", default="wsj-small",
                   help="a tagged dataset (wsj-small, wsj-train) or a tagged file (default wsj-small)")
    _add_file_options(p)
    add_quiet(p)
    p.set_defaults(func=_eval)

    p = tsub.add_parser("tag", help="tag sentences from stdin (one per line) to stdout",
                        description="Tag stdin, one sentence per line (UTF-8 text; binary input is refused), "
                                    "writing one tagged sentence per line to stdout.  Without --tokenize the "
                                    "input must be tokenised already: tokens separated by spaces, as in the "
                                    "training data (\"can't\" is then one token).")
    p.add_argument("model", help="a tagger written by tag train, tag em or tag giga200")
    p.add_argument("--tokenize", action="store_true",
                   help="tokenise each line first, Penn Treebank style (can't -> ca n't, punctuation split "
                        "off; no sentence splitting: one line stays one sentence)")
    p.add_argument("--format", choices=list(OUTPUT_FORMATS), default="tags",
                   help="output: tags (the tags, one line per sentence; default), word/tag (word/TAG "
                        "tokens, one line per sentence) or conllu (CoNLL-U: the tag in the UPOS column "
                        "if the model's tags are UD tags, else in XPOS; # sent_id is the input line; an "
                        "empty line gives no sentence)")
    p.set_defaults(func=_tag)
    tg.set_defaults(func=lambda a: (tg.print_help(), 2)[1])
