"""``fsmlearn lm``: backoff language models on the command line.

Subcommands:
    count     text -> n-gram counts in Google Web1T format (with cutoffs)
    web1t     Web1T counts -> Web1T counts with new cutoffs (and statistics)
    estimate  text or counts -> ARPA (modified Kneser-Ney, Witten-Bell, absolute)
    compile   ARPA -> compiled failure-arc acceptor
    score     sentences on stdin -> log10 probability and OOV count per line
    query     sentences on stdin -> KenLM query's output (per word: id, n-gram length,
              log10 probability; per sentence: total and OOVs; perplexity)
    ppl       perplexity of text files, with and without OOVs (KenLM query's summary)
    sample    sample sentences (a synthetic corpus) from a model
    check     validate an ARPA file (exit 0 valid, 2 with FILE:LINE: reason)
"""

from __future__ import annotations

import os

import sys
import time
from pathlib import Path

from ..errors import ArgumentError
from .common import (DATASET_NAMES, positive_int, Progress, add_quiet, add_scale, add_threads, check_scale,
                     check_threads, ngram_sizes)


def _cutoffs(text):
    if text is None:
        return None
    try:
        parts = [int(x) for x in str(text).replace(",", " ").split()]
    except ValueError:
        parts = [0]
    if not parts or any(c < 1 for c in parts):
        raise ArgumentError(f"cutoffs must be >= 1, got {text!r}")
    return parts[0] if len(parts) == 1 else parts


def _sentences(args):
    from ..data import iter_dataset_words
    from ..data.textin import read_lines
    if getattr(args, "dataset", None):
        if args.text:
            raise ArgumentError("give text files or --dataset NAME, not both")
        return iter_dataset_words(args.dataset)
    if not args.text:
        raise ArgumentError("give text files or --dataset NAME")
    return read_lines(args.text)


def _scale(args, say, input_bytes: int | None = None):
    """The runner for ``--scheduler``/``--memory``/``--tmp``/``--workers`` (None: the in-memory
    path); by default, inputs under SMALL_INPUT bytes take the in-memory path (a cluster would
    only add its start-up)."""
    from ..lm.scale.cluster import SMALL_INPUT, open_runner
    memory = check_scale(args)
    scheduler = args.scheduler
    if scheduler == "in-memory":
        return None
    if scheduler == "local" and input_bytes is not None and input_bytes < SMALL_INPUT and not args.workers \
            and not args.memory:
        return None
    return open_runner(scheduler, memory=memory, tmp=args.tmp, workers=args.workers,
                       threads=args.worker_threads, progress=say)


def _input_bytes(args) -> int | None:
    """The size of the text files; 0 for a named dataset (small) and for stdin (which the client
    reads itself: the in-memory path unless --workers or --memory ask for a cluster)."""
    import os
    if getattr(args, "dataset", None) or not getattr(args, "text", None) or "-" in args.text:
        return 0
    return sum(os.path.getsize(p) for p in args.text if os.path.isfile(p))


def _parts(args, runner):
    from ..lm.scale.count import text_parts
    from ..lm.scale.cluster import part_bytes
    if getattr(args, "dataset", None):
        if args.text:
            raise ArgumentError("give text files or --dataset NAME, not both")
        return text_parts([], part_bytes(runner.task_memory), dataset=args.dataset)
    if not args.text:
        raise ArgumentError("give text files or --dataset NAME")
    return text_parts(args.text, part_bytes(runner.task_memory, _input_bytes(args), runner.slots))


def _count(args) -> int:
    from ..lm.web1t import check_output_dir, cutoff_list, write_web1t
    from ..lm.counts import count_ngrams
    say = Progress(args.quiet)
    cutoffs = _cutoffs(args.cutoffs)
    cutoff_list(cutoffs, args.order, args.keep_bigrams)      # refused before counting
    check_output_dir(args.output)
    scale = _scale(args, say, _input_bytes(args))
    if scale is None:
        c = count_ngrams(_sentences(args), args.order, progress=say)
        sizes = write_web1t(c, args.output, cutoffs=cutoffs, keep_bigrams=args.keep_bigrams, progress=say)
    else:
        from ..lm.scale.count import count_to_web1t
        with scale as runner:
            sizes = count_to_web1t(runner, _parts(args, runner), args.order, args.output, cutoffs=cutoffs,
                                   keep_bigrams=args.keep_bigrams)
    say(f"wrote {args.output}: " + ngram_sizes(sizes))
    return 0


def _web1t(args) -> int:
    from ..lm.web1t import check_output_dir, read_web1t, write_web1t
    say = Progress(args.quiet)
    cutoffs = _cutoffs(args.cutoffs)
    if args.output:
        check_output_dir(args.output)                        # refused before reading
    scale = _scale(args, say, _dir_bytes(args.counts))
    if scale is not None:
        from ..lm.scale.count import reweb1t
        with scale as runner:
            V, order, per, sizes = reweb1t(runner, args.counts, args.output, max_order=args.order,
                                           cutoffs=cutoffs, keep_bigrams=args.keep_bigrams)
        print(f"{args.counts}: order {order}, {V:,} words, " + ngram_sizes([per[k][0] for k in sorted(per)]) +
              f", smallest counts {[1] + [per[k][1] for k in sorted(per)][1:]}")
        if args.output:
            print(f"wrote {args.output}: " + ngram_sizes(sizes))
        return 0
    c = read_web1t(args.counts, max_order=args.order, progress=say)
    print(f"{args.counts}: order {c.order}, {len(c.vocab):,} words, " +
          ngram_sizes(c.sizes) +
          f", smallest counts {c.cutoffs}")
    if args.output:
        sizes = write_web1t(c, args.output, cutoffs=cutoffs, keep_bigrams=args.keep_bigrams, progress=say)
        print(f"wrote {args.output}: " + ngram_sizes(sizes))
    return 0


def _dir_bytes(root) -> int | None:
    import os
    if not os.path.isdir(root):
        return None
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)


def _estimate(args) -> int:
    from ..lm.arpa import write_arpa
    from ..lm.counts import count_ngrams
    from ..lm.estimate import check_kn_discounts, estimate
    say = Progress(args.quiet)
    cutoffs = _cutoffs(args.cutoffs)
    kn = None
    if args.kn_discounts:                                   # refused before counting
        try:
            vals = [float(x) for x in args.kn_discounts.replace(",", " ").split()]
        except ValueError:
            vals = [0.0]
        if not vals or len(vals) % 3:
            raise ArgumentError("--kn-discounts takes three numbers (D1 D2 D3+) per order")
        kn = [tuple(vals[i:i + 3]) for i in range(0, len(vals), 3)]
        check_kn_discounts(kn, args.order if args.order is not None else (None if args.counts else 5))
    if args.output is None and args.compiled is None:
        raise ArgumentError("give -o MODEL.arpa, --compiled MODEL.fsm or both")
    opts = dict(discounts=kn, discount=args.discount, smoothing=args.smoothing, cutoffs=cutoffs,
                keep_bigrams=args.keep_bigrams, cut_mass=args.cut_mass)
    if args.counts:
        from ..lm.web1t import _layout
        if args.text or getattr(args, "dataset", None):
            raise ArgumentError("give text files, --dataset NAME or --counts DIR, not two of them")
        present = max(_layout(Path(args.counts), None))
        if args.order is not None and present < args.order:
            raise ArgumentError(f"{args.counts}: the counts go up to {present}-grams; --order {args.order} "
                                f"asks for {args.order}-grams (give --order {present} or less)")
    scale = _scale(args, say, _dir_bytes(args.counts) if args.counts else _input_bytes(args))
    if scale is not None:
        from ..lm.scale.kn import estimate_text, estimate_web1t
        with scale as runner:
            if args.counts:
                sizes = estimate_web1t(runner, args.counts, args.output, max_order=args.order,
                                       method=args.method, compiled=args.compiled, **opts)
            else:
                sizes = estimate_text(runner, _parts(args, runner), args.order or 5, args.output,
                                      method=args.method, compiled=args.compiled, **opts)
        say(f"wrote {args.output or args.compiled}: " + ngram_sizes(sizes))
        return 0
    if args.counts:
        from ..lm.web1t import read_web1t
        c = read_web1t(args.counts, max_order=args.order, progress=say)
    else:
        c = count_ngrams(_sentences(args), args.order or 5, progress=say)
    lm = estimate(c, args.method, progress=say, **opts)
    if args.output is not None:
        write_arpa(lm, args.output, progress=say)
        say(f"wrote {args.output}: " + ngram_sizes(lm.counts))
    if args.compiled is not None:
        from ..lm.model import compile_lm
        m = compile_lm(lm, progress=say)
        del lm
        m.save(args.compiled)
        say(f"wrote {args.compiled}: {m.machine.num_states:,} states, {m.machine.num_arcs:,} arcs")
    return 0


def _compile(args) -> int:
    from ..lm.arpa import read_arpa
    from ..lm.model import compile_lm
    say = Progress(args.quiet)
    try:
        size = os.path.getsize(args.model)
    except OSError:
        size = 0                    # the reader names what is wrong with the file
    scale = _scale(args, say, size)
    if scale is not None:
        from ..lm.scale.arpa import compile_arpa
        from ..lm.scale.cluster import part_bytes
        with scale as runner:
            states, arcs, sizes = compile_arpa(runner, args.model, args.output,
                                               part_bytes(runner.task_memory, size, runner.slots))
        say(f"wrote {args.output}: {states:,} states, {arcs:,} arcs ({ngram_sizes(sizes)})")
        return 0
    lm = read_arpa(args.model, progress=say)
    c = compile_lm(lm, progress=say)
    del lm      # the n-gram tables and their index: freed before the arc hash is built
    say(f"writing {args.output}: {c.machine.num_states:,} states, {c.machine.num_arcs:,} arcs")
    size = c.save(args.output)
    say(f"wrote {args.output}: {c.machine.num_states:,} states, {c.machine.num_arcs:,} arcs, {size / 1e6:,.0f} MB")
    return 0


def _score(args) -> int:
    from ..lm.score import load_lm
    from ..data.textin import read_blocks
    threads = check_threads(args.threads)
    c = load_lm(args.model)
    out = sys.stdout
    for block in read_blocks(["-"], block=1 << 22):
        lp, oov = c.score_bytes(block, threads)
        out.write("".join(f"{x:.6f}\t{n}\n" for x, n in zip(lp.tolist(), oov.tolist())))
    out.flush()
    return 0


def _query(args) -> int:
    from ..lm.query import write_query
    from ..lm.score import load_lm
    threads = check_threads(args.threads)
    write_query(load_lm(args.model), sys.stdin.buffer, sys.stdout.buffer, sentence_context=not args.n,
                verbosity=args.verbosity, threads=threads)
    sys.stdout.flush()
    return 0


def _ppl(args) -> int:
    from ..lm.query import kenlm_float, score_blocks, summary_lines
    from ..lm.score import load_lm
    from ..data.textin import open_input, read_blocks
    threads = check_threads(args.threads)
    for path in args.text:          # a missing or unreadable file is named before the model loads
        if path != "-":
            open_input(path).close()
    r = score_blocks(load_lm(args.model, Progress(args.quiet)), read_blocks(args.text), threads=threads)
    sys.stdout.write(summary_lines(r) + f"Sentences:\t{r['sentences']}\n"
                     f"Log10 probability:\t{kenlm_float(r['log10prob'], False)}\n")
    return 0


def _sample(args) -> int:
    from ..lm.sample import sample_text
    from ..lm.score import load_lm
    say = Progress(args.quiet)
    c = load_lm(args.model, say)
    out_path = Path(args.output) if args.output != "-" else None
    t0 = time.time()
    if out_path is None:
        n_s, n_t = sample_text(c, sys.stdout.buffer, tokens=args.tokens, sentences=args.sentences,
                               seed=args.seed, progress=say)
    else:
        from ..fsm.atomic import atomic_path
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(out_path) as tmp:
            with open(tmp, "wb") as f:
                n_s, n_t = sample_text(c, f, tokens=args.tokens, sentences=args.sentences, seed=args.seed,
                                       progress=say)
    dt = time.time() - t0
    say(f"sampled {n_s:,} sentences, {n_t:,} tokens in {dt:.1f} s ({n_t / max(dt, 1e-9) / 1e6:.1f}M tokens/s)")
    return 0


def _check(args) -> int:
    from ..lm.arpa import check_arpa
    from ..errors import ArpaFormatError
    try:
        lm = check_arpa(args.file)
    except ArpaFormatError as e:
        where = f"{e.path}:{e.line}" if e.line is not None else f"{e.path}"
        print(f"{where}: {e.reason}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(f"{args.file}: valid ARPA, order {lm.order}, " +
              ngram_sizes(lm.counts))
    return 0


def _add_cutoffs(p) -> None:
    p.add_argument("--cutoffs", help="minimum count per order, from the 1-grams: e.g. '1 1 3 3 3', or one "
                                     "number for orders >= 2 (1-grams are never cut) (default: none, keep "
                                     "every n-gram)")
    p.add_argument("--keep-bigrams", action="store_true", help="keep every 2-gram whatever the cutoff")


def add_parser(sub) -> None:
    lm = sub.add_parser("lm", help="backoff n-gram language models")
    lsub = lm.add_subparsers(dest="lm_command", metavar="command")

    p = lsub.add_parser("count", help="count n-grams of a text into a Web1T-format directory")
    p.add_argument("text", nargs="*", help="text files, one sentence per line, UTF-8 (.gz/.bz2/.xz; - for stdin)")
    p.add_argument("--dataset", choices=DATASET_NAMES, help="a named dataset instead of files (default: none)")
    p.add_argument("-o", "--output", required=True, help="output directory")
    p.add_argument("--order", type=positive_int, default=5, help="highest n-gram order (default: 5)")
    _add_cutoffs(p)
    add_scale(p)
    add_quiet(p)
    p.set_defaults(func=_count)

    p = lsub.add_parser("web1t", help="read Web1T-format counts, print statistics, rewrite with cutoffs")
    p.add_argument("counts", help="Web1T-format directory")
    p.add_argument("-o", "--output", help="write the (cut) counts here (default: write nothing)")
    p.add_argument("--order", type=positive_int, default=None, help="read orders up to this one (default: all)")
    _add_cutoffs(p)
    add_scale(p)
    add_quiet(p)
    p.set_defaults(func=_web1t)

    p = lsub.add_parser("estimate", help="estimate an ARPA model from text or counts")
    p.add_argument("text", nargs="*", help="text files, one sentence per line, UTF-8 (.gz/.bz2/.xz; - for stdin)")
    p.add_argument("--counts", help="a Web1T-format count directory instead of text (default: none)")
    p.add_argument("--dataset", choices=DATASET_NAMES, help="a named dataset instead of files (default: none)")
    p.add_argument("-o", "--output", help="output ARPA (.gz/.bz2/.xz compress) (default: none; give -o, "
                                          "--compiled or both)")
    p.add_argument("--compiled", help="also (or only) write the compiled model, as `lm compile` would, "
                                      "compiled where the estimate runs (default: none)")
    p.add_argument("--order", type=positive_int, default=None,
                   help="highest n-gram order; with --counts at most the counts' order "
                        "(default: 5 from text, the counts' order with --counts)")
    p.add_argument("--method", choices=["kneser-ney", "witten-bell", "absolute"], default="kneser-ney",
                   help="smoothing: modified Kneser-Ney, Witten-Bell or absolute discounting "
                        "(default: kneser-ney)")
    p.add_argument("--kn-discounts", help="Kneser-Ney discounts 'D1 D2 D3+' for order 1, then order 2, ... "
                                          "(0 <= Dj <= j; orders not given are estimated) (default: estimated)")
    p.add_argument("--discount", type=float, default=0.25, help="absolute discounting's D (default: 0.25)")
    p.add_argument("--smoothing", type=float, default=0.0,
                   help="absolute discounting's unigram additive smoothing (default: 0.0)")
    _add_cutoffs(p)
    p.add_argument("--cut-mass", choices=["backoff", "interpolate"], default="backoff",
                   help="counts cut before estimation (Web1T): where a context's cut extensions' mass "
                        "goes: its backoff weight, as for --cutoffs, or its interpolation weight "
                        "(default: backoff)")
    add_scale(p)
    add_quiet(p)
    p.set_defaults(func=_estimate)

    p = lsub.add_parser("compile", help="compile an ARPA model to a failure-arc acceptor")
    p.add_argument("model", help="MODEL.arpa[.gz|.bz2|.xz]")
    p.add_argument("-o", "--output", required=True, help="the compiled model to write")
    add_scale(p)
    add_quiet(p)
    p.set_defaults(func=_compile)

    p = lsub.add_parser("score", help="score sentences from stdin: log10 prob (with </s>) TAB OOVs",
                        description="Score each line of stdin (words separated by spaces; bytes that are "
                                    "not UTF-8 make an unknown word, as in KenLM; an empty line scores "
                                    "</s>): its log10 probability with </s>, TAB, its OOV count.")
    p.add_argument("model", help="a compiled model (or an .arpa file)")
    add_threads(p)
    p.set_defaults(func=_score)

    p = lsub.add_parser("query", help="score sentences from stdin as KenLM's query prints them: "
                                      "word=id n-gram-length log10prob per word, Total and OOV per line")
    p.add_argument("model", help="a compiled model (or an .arpa file)")
    p.add_argument("-n", action="store_true", help="do not wrap the input in <s> and </s>")
    p.add_argument("-v", "--verbosity", choices=["word", "sentence", "summary"], default="word",
                   help="word: each word, each line's total and the summary; sentence: the totals; "
                        "summary: the perplexities and counts (default: word)")
    add_threads(p)
    p.set_defaults(func=_query)

    p = lsub.add_parser("ppl", help="perplexity of a text, with and without OOVs (KenLM query's summary)",
                        description="Perplexity of text files as KenLM's query reports it: including OOVs "
                                    "10^(-log10 p / tokens), excluding OOVs with the OOV tokens and their "
                                    "probabilities left out; tokens count </s>.  Prints query's summary "
                                    "lines, then the sentences and the total log10 probability.")
    p.add_argument("model", help="a compiled model (or an .arpa file)")
    p.add_argument("text", nargs="+", help="text files, one sentence per line (.gz/.bz2/.xz; - for stdin)")
    add_threads(p)
    add_quiet(p)
    p.set_defaults(func=_ppl)

    p = lsub.add_parser("sample", help="sample sentences from a model")
    p.add_argument("model", help="a compiled model (or an .arpa file)")
    p.add_argument("-o", "--output", default="-", help="output text file, - for stdout (default: -)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--tokens", type=positive_int, help="sample until this many tokens (</s> not counted)")
    g.add_argument("--sentences", type=positive_int, help="sample this many sentences")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    add_quiet(p)
    p.set_defaults(func=_sample)

    p = lsub.add_parser("check", help="validate an ARPA file (exit 0 valid; 2 and FILE:LINE: reason)")
    p.add_argument("file", help="MODEL.arpa[.gz|.bz2|.xz]")
    add_quiet(p)
    p.set_defaults(func=_check)
    lm.set_defaults(func=lambda a: (lm.print_help(), 2)[1])
