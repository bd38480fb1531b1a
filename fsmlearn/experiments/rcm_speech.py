"""``fsmlearn rcms speech`` and ``fsmlearn rcms words``: learning with a latent alignment
and precision at high confidence (Steinhardt and Liang 2015, sections 5 and 6).

**speech** (section 6, figure 4): the speech task rebuilt from Mixed-text and
cmudict (:func:`fsmlearn.data.speech.build_speech_task`: phonemes of a short
sentence -> its spelling, ``_`` for spaces, the alignment unobserved; 746
training and 253 test utterances).  An alignment RCM with 5-gram character
features and alignment-edge features (:class:`fsmlearn.rcm.align.AlignRCM`) is
trained by AdaGrad (0.2, 1e-4) under each strategy of
:mod:`fsmlearn.rcm.align_learn` (select-by-model, select-by-target, hybrid,
forced decoding, RCMS; size 20), pass by pass; after every pass the test set is
decoded (beam search for the beam strategies, RCMS for RCMS) and its character
error rate (an empty output counts 1.0) and exact-match accuracy recorded.  The
beam strategies run on one order of the data (figure 4 left); forced decoding
and RCMS on ``orders`` random orders (figure 4 middle and right, the median
solid).  The mass-weighted average context length is recorded every 100
updates as a cumulative average (figure 6).

**words** (section 5, figure 3; the paper's handwritten-word task is not in our
data, its analogue here is the single-word version of the speech task:
phonemes of one word -> its letters): the alignments are fixed first by the
forced-decoding imputation (so that, as in the paper's word task, training is
fully supervised), then three 4-gram models are trained with their own
inference, beam 10, RCMS 10 and beam 200 ("almost exact"), and each decodes
the test words with a confidence, p(y | x) under its contexts.  The report has
the precision-recall curve of each and the recall at 99% precision.

Each command writes a JSON report (updated as runs finish) and PNGs beside it.

Public names: SpeechConfig, WordsConfig, run_speech, run_words.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ArgumentError
from ..rcm.align import AlignRCM
from ..rcm.align_decode import decode
from ..rcm.align_learn import STRATEGIES, DenseAdaGrad, impute_alignments, train
from ..rcm.io import save_align_rcm
from .rcm_metrics import (plot_pass_curves, plot_pr_curves, precision_recall_curve, recall_at_precision,
                          transcription_scores)
from ..fsm.atomic import atomic_write
from .report import Stage, new_figure, save_figure, write_report

__all__ = ["SpeechConfig", "WordsConfig", "run_speech", "run_words"]

NAMES = {"model": "select-by-model", "target": "select-by-target", "hybrid": "hybrid", "forced": "forced decoding",
         "rcms": "RCMS"}


@dataclass
class SpeechConfig:
    strategies: tuple = STRATEGIES
    size: int = 20
    n: int = 4
    passes: int = 5
    orders: int = 5
    train: int = 746
    test: int = 253
    seed: int = 0
    hash_bits: int = 22
    report: str | None = None
    jobs: int = 1
    length_every: int = 100
    model_dir: str | None = None
    resume: bool = False


@dataclass
class WordsConfig:
    runs: list = field(default_factory=lambda: [("beam", 10), ("rcms", 10), ("beam", 200)])
    n: int = 3
    passes: int = 3
    train: int = 6000
    test: int = 1000
    seed: int = 0
    hash_bits: int = 22
    precision: float = 0.99
    report: str | None = None
    jobs: int = 1
    model_dir: str | None = None
    length_every: int = 50
    resume: bool = False


def _num(v):
    """A float for the JSON report (None for -inf: an update without signal)."""
    return float(v) if math.isfinite(v) else None


def _check_common(passes, train_n, test_n, jobs, hash_bits):
    for name, v, lo in (("passes", passes, 1), ("train", train_n, 1), ("test", test_n, 1), ("jobs", jobs, 1),
                        ("hash_bits", hash_bits, 8)):
        if not isinstance(v, (int, np.integer)) or v < lo:
            raise ArgumentError(f"--{name.replace('_', '-')} must be an integer >= {lo}, got {v!r}")


def _recorder(report: dict, path, done: dict | None = None):
    """record(k, run): keep the run as the k-th of the report's runs and rewrite the report
    (``done``: runs already finished, by index)."""
    done = dict(done or {})

    def record(k, run):
        done[k] = run
        report["runs"] = [done[j] for j in sorted(done)]
        if path is not None:
            write_report(path, report)
    return record


def _pool_map(fn, items, jobs, record, indices=None):
    """fn over items, in ``jobs`` forked processes when jobs > 1; record(k, result) as each ends
    (k: the item's position, or its entry of ``indices``)."""
    pairs = list(zip(range(len(items)) if indices is None else indices, items))
    if jobs > 1 and len(pairs) > 1:
        import multiprocessing as mp
        with mp.get_context("fork").Pool(min(jobs, len(pairs))) as pool:
            for k, res in pool.imap_unordered(fn, pairs):
                record(k, res)
    else:
        for pair in pairs:
            record(*fn(pair))


_RESUME_KEYS = ("command", "task", "size", "n", "passes", "seed")
_WORDS_RESUME_KEYS = ("command", "task", "n", "passes", "precision")


def _speech_spec(run):
    return run["strategy"], int(run["order"])


def _words_spec(run):
    return run["method"], int(run["size"])


def _read_report(path: Path):
    """The earlier report at ``path`` to resume from (None when there is none), read before
    any work so that a file that is no report is refused at once."""
    import json
    from ..errors import FsmError
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise FsmError(f"{path}: cannot resume from this report: {e.strerror or e}") from None
    if not text.strip():
        raise FsmError(f"{path}: cannot resume from this report: the file is empty")
    try:
        return json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FsmError(f"{path}: cannot resume from this report: not a JSON report ({e})") from None


def _finished_runs(path: Path, old, report: dict, specs: list, say, keys=_RESUME_KEYS, spec_of=_speech_spec) -> dict:
    """The runs of an earlier report ``old`` (read by :func:`_read_report` from ``path``; None:
    no report) that this one would repeat: {spec index: run}, said when there are any.
    The report must have been written with the same task and settings (``keys``; else a
    located error); a run counts when it has every pass; ``spec_of(run)`` is its spec."""
    from ..errors import FsmError
    if old is None:
        return {}
    if not isinstance(old, dict) or not isinstance(old.get("runs"), list):
        raise FsmError(f"{path}: cannot resume: not a report of {report['command']} (no list of runs)")
    for key in keys:
        if old.get(key) != report[key]:
            raise FsmError(f"{path}: cannot resume: {key} was {old.get(key)!r}, this run has {report[key]!r}")
    index = {spec: k for k, spec in enumerate(specs)}
    done = {}
    for j, run in enumerate(old["runs"]):
        try:
            spec = spec_of(run)
            complete = len(run["passes"]) == report["passes"]
        except (TypeError, KeyError, ValueError):
            raise FsmError(f"{path}: cannot resume: run {j} has no spec and passes") from None
        if complete and spec in index:
            done[index[spec]] = run
    if done:
        say(f"resuming {path}: {len(done)} of {len(specs)} runs already finished "
            f"({', '.join(done[k]['name'] for k in sorted(done))})")
    return done


def _start(cfg, task, name: str, say):
    """(the report's path or None, the earlier report to resume from or None, the task): ``task``,
    else the ``name`` task ("speech" or "word") built from Mixed-text and cmudict with ``cfg``'s
    sizes and seed."""
    path = Path(cfg.report) if cfg.report else None
    old = _read_report(path) if cfg.resume and path is not None else None
    if task is None:
        from ..data.speech import build_speech_task, build_word_task
        say(f"building the {name} task from Mixed-text and cmudict")
        build = build_speech_task if name == "speech" else build_word_task
        task = build(train=cfg.train, test=cfg.test, seed=cfg.seed)
    return path, old, task


def _run_all(run, specs: list, done: dict, todo: list, report: dict, path, cfg, **shared) -> None:
    """``run`` over the specs still to do (``todo``, in ``cfg.jobs`` processes; ``shared``: what
    they read from :data:`_SHARED`), the report holding every finished run (rewritten at ``path``
    as each ends) and, at the end, ``complete``."""
    _SHARED.update(cfg=cfg, **shared)
    record = _recorder(report, path, done)
    if done:
        record(*next(iter(sorted(done.items()))))      # the report holds the finished runs from the start
    _pool_map(run, [specs[k] for k in todo], cfg.jobs, record, indices=todo)
    report["complete"] = True
    if path is not None:
        write_report(path, report)


_SHARED: dict = {}     # a run's data, inherited by forked workers


def _within(say, name: str, p: int, passes: int):
    """Progress inside one pass of a run: train()'s messages (utterances done, rate, ETA) named
    by the run and its pass, the pass summaries left to the caller."""
    def progress(message: str) -> None:
        if "utterances" in message:
            say(f"{name}: pass {p}/{passes}: {message.split(': ', 1)[-1]}")
    return progress


def _imputed(task, seed: int, folder, say):
    """Forced decoding's alignments of the training data (:func:`impute_alignments`), kept in
    ``folder``/imputed-alignments.npz with the task and seed they were made for (a
    :class:`~fsmlearn.experiments.report.Stage`): a later run of the same task reads them back
    instead of imputing again.  Returns (alignments, seconds spent imputing; 0.0 when read)."""
    data = list(zip(task.train.x, task.train.y))
    stage = None
    if folder:
        stage = Stage(Path(folder) / "imputed-alignments.npz",
                      {"task": task.stats()["config"], "train": len(data), "seed": seed,
                       "imputation": "exact first order, 1 pass"})
        if stage.fresh():
            with np.load(stage.path) as z:
                flat, off, ok = z["flat"], z["offsets"], z["aligned"]
            if ok.size == len(data):
                say(f"forced decoding: the imputed alignments read from {stage.path}")
                return [flat[off[j]:off[j + 1]].astype(np.int64) if ok[j] else None for j in range(ok.size)], 0.0
    t0 = time.time()
    _, alignments = impute_alignments(data, len(task.chars), len(task.phonemes), seed=seed, progress=say)
    seconds = time.time() - t0
    say(f"forced decoding: alignments imputed by an exact first-order model in {seconds:.0f} s")
    if stage is not None:
        stage.start()
        ok = np.array([a is not None for a in alignments])
        parts = [np.asarray(a, np.int8) if a is not None else np.zeros(0, np.int8) for a in alignments]
        off = np.zeros(len(parts) + 1, np.int64)
        np.cumsum([p.size for p in parts], out=off[1:])
        flat = np.concatenate(parts) if parts else np.zeros(0, np.int8)
        stage.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(stage.path, lambda f: np.savez(f, flat=flat, offsets=off, aligned=ok))
        stage.done()
    return alignments, seconds


def _save(model, folder, name, task):
    """Write a trained model (atomically, :func:`fsmlearn.rcm.io.save_align_rcm`); its path or None."""
    if not folder:
        return None
    path = Path(folder) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    save_align_rcm(model, path, task.chars, task.phonemes)
    return str(path)


def _evaluate(model, xs, refs, B, method):
    hyps, conf = [], []
    for x in xs:
        chars, c = decode(model, x, B, method)
        hyps.append(chars)
        conf.append(c)
    return hyps, np.array(conf)


def _length_tracker(every: int):
    """(on_update, points): the cumulative average of the updates' mean context lengths, taken
    every ``every`` updates (section 7: every 50 words, every 100 utterances)."""
    points, total, steps = [], [0.0], [0]

    def on_update(step, info):
        steps[0] += 1
        total[0] += info["mean_context_length"]
        if steps[0] % every == 0:
            points.append({"updates": steps[0], "cumulative_mean_context_length": total[0] / steps[0]})
    return on_update, points


def _plot_lengths(runs, path: Path, title: str) -> None:
    fig, ax = new_figure(1, figsize=(7, 4))
    for r in runs:
        if r.get("context_length"):
            ax.plot([c["updates"] for c in r["context_length"]],
                    [c["cumulative_mean_context_length"] for c in r["context_length"]], label=r["name"])
    ax.set_xlabel("learning updates")
    ax.set_ylabel("average context length (cumulative)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    save_figure(fig, path)


def _fresh_model(cfg, task):
    """(the training pairs, an untrained AlignRCM of ``cfg``'s n and hash bits, its AdaGrad)."""
    data = list(zip(task.train.x, task.train.y))
    model = AlignRCM(len(task.chars), len(task.phonemes), n=cfg.n, hash_bits=cfg.hash_bits)
    return data, model, DenseAdaGrad(model.theta.size)


def _speech_run(item):
    k, (strategy, order) = item
    cfg, task, alignments, say = (_SHARED[x] for x in ("cfg", "task", "alignments", "say"))
    data, model, opt = _fresh_model(cfg, task)
    method = "rcms" if strategy == "rcms" else "beam"
    name = f"{NAMES[strategy]} order {order}"
    on_update, lengths = _length_tracker(cfg.length_every)
    run = {"name": name, "strategy": strategy, "order": order, "size": cfg.size, "passes": []}
    for p in range(1, cfg.passes + 1):
        t0 = time.time()
        st = train(model, data, strategy, cfg.size, passes=1, seed=cfg.seed + 1000 * order + p,
                   optimizer=opt, on_update=on_update, alignments=alignments if strategy == "forced" else None,
                   progress=_within(say, name, p, cfg.passes), progress_every=250)[0]
        t1 = time.time()
        hyps, conf = _evaluate(model, task.test.x, task.test.y, cfg.size, method)
        sc = transcription_scores(hyps, task.test.y)
        run["passes"].append({"pass": p, "train_loglik": _num(st["loglik"]), "train_signal": st["signal"],
                              "cer": sc["cer"], "exact_match": sc["exact_match"],
                              "empty_outputs": sc["empty_outputs"], "train_seconds": t1 - t0,
                              "test_seconds": time.time() - t1,
                              "examples": [task.spell(h) for h in hyps[:3]]})
        say(f"{name}: pass {p}/{cfg.passes}: test CER {sc['cer']:.3f}, exact match {100 * sc['exact_match']:.1f}%, "
            f"training signal {st['signal']}/{len(data)}, {t1 - t0:.0f} s training, {time.time() - t1:.0f} s test")
    run["context_length"] = lengths
    run["model"] = _save(model, cfg.model_dir, f"{strategy}-order{order}", task)
    return k, run


def run_speech(cfg: SpeechConfig, progress=None, task=None) -> dict:
    """Train and test every strategy (see the module docstring); returns the report (also
    written when ``cfg.report``).  ``task`` replaces the built task (tests)."""
    say = progress or (lambda m: None)
    _check_common(cfg.passes, cfg.train, cfg.test, cfg.jobs, cfg.hash_bits)
    if cfg.orders < 1 or cfg.size < 1 or cfg.n < 0:
        raise ArgumentError(f"--orders and --size must be >= 1 and n >= 0, got {cfg.orders}, {cfg.size}, {cfg.n}")
    bad = [s for s in cfg.strategies if s not in STRATEGIES]
    if bad or not cfg.strategies:
        raise ArgumentError(f"strategies must be among {', '.join(STRATEGIES)}; got {bad or 'none'}")
    path, old, task = _start(cfg, task, "speech", say)
    stats = task.stats()
    say(f"speech task: {len(task.train)} training and {len(task.test)} test utterances, "
        f"{stats['train']['mean_phonemes']:.1f} phonemes and {stats['train']['mean_chars']:.1f} characters "
        f"on average, {len(task.phonemes)} phonemes, {len(task.chars)} characters")
    alignments = None
    report = {"command": "fsmlearn rcms speech", "task": stats, "size": cfg.size, "n": cfg.n, "passes": cfg.passes,
              "orders": cfg.orders, "seed": cfg.seed, "runs": [], "complete": False}
    specs = [(s, 0) for s in cfg.strategies]
    specs += [(s, o) for s in cfg.strategies if s in ("forced", "rcms") for o in range(1, cfg.orders)]
    done = _finished_runs(path, old, report, specs, say)
    todo = [k for k in range(len(specs)) if k not in done]
    if any(specs[k][0] == "forced" for k in todo):
        alignments, report["impute_seconds"] = _imputed(task, cfg.seed, cfg.model_dir, say)
    _run_all(_speech_run, specs, done, todo, report, path, cfg, task=task, alignments=alignments, say=say)
    if path is not None:
        _plot_speech(report, path)
        say(f"wrote {path} and its PNGs")
    return report


def _plot_speech(report: dict, path: Path) -> None:
    runs = report["runs"]
    first = {r["strategy"]: r for r in runs if r["order"] == 0}
    left = {NAMES[s]: [p["cer"] for p in r["passes"]] for s, r in first.items() if s != "rcms"}
    panels = {"test CER, beam strategies (one order)": left} if left else {}
    for measure, label in (("cer", "test CER"), ("exact_match", "test exact match")):
        series = {}
        for s in ("forced", "rcms"):
            rows = [[p[measure] for p in r["passes"]] for r in runs if r["strategy"] == s]
            if rows:
                series[NAMES[s]] = np.array(rows)
        if series:
            panels[f"{label} over the data orders"] = series
    plot_pass_curves(panels, path.with_suffix(".png"), title="speech task (figure 4)")
    _plot_lengths([r for r in runs if r["order"] == 0], path.with_name(path.stem + "-context-length.png"),
                  "speech task: context length during training (figure 6)")


def _words_run(item):
    k, (method, size) = item
    cfg, task, alignments, say = (_SHARED[x] for x in ("cfg", "task", "alignments", "say"))
    data, model, opt = _fresh_model(cfg, task)
    name = f"{'RCMS' if method == 'rcms' else 'beam'} {size}"
    strategy = "rcms" if method == "rcms" else "forced"
    on_update, lengths = _length_tracker(cfg.length_every)
    run = {"name": name, "method": method, "size": size, "passes": [], "context_length": lengths}
    for p in range(1, cfg.passes + 1):
        # the alignments are given (forced decoding's imputation): RCMS trains on p(z | x, y) under
        # its contexts, beam search on the fixed path against its beam
        st = train(model, data, strategy, size, passes=1, seed=cfg.seed + p, optimizer=opt, on_update=on_update,
                   alignments=alignments if strategy == "forced" else None,
                   progress=_within(say, name, p, cfg.passes), progress_every=1000)[0]
        run["passes"].append({"pass": p, "train_loglik": _num(st["loglik"]), "seconds": st["seconds"]})
        say(f"{name}: pass {p}/{cfg.passes}: training log-likelihood {st['loglik']:.3f}, {st['seconds']:.0f} s")
    run["model"] = _save(model, cfg.model_dir, f"{method}-{size}", task)
    t0 = time.time()
    hyps, conf = _evaluate(model, task.test.x, task.test.y, size, method)
    correct = np.array([h.size == y.size and bool(np.all(h == y)) for h, y in zip(hyps, task.test.y)])
    curve = precision_recall_curve(conf, correct)
    run.update(accuracy=float(correct.mean()), recall_at_precision=recall_at_precision(conf, correct, cfg.precision),
               test_seconds=time.time() - t0, confidence=conf.tolist(), correct=correct.tolist(),
               curve={"recall": curve.recall.tolist(), "precision": curve.precision.tolist()})
    say(f"{name}: test accuracy {100 * run['accuracy']:.1f}%, recall at {100 * cfg.precision:.0f}% precision "
        f"{100 * run['recall_at_precision']:.1f}%")
    return k, run


def run_words(cfg: WordsConfig, progress=None, task=None) -> dict:
    """Precision at high confidence on the single-word task (see the module docstring)."""
    say = progress or (lambda m: None)
    _check_common(cfg.passes, cfg.train, cfg.test, cfg.jobs, cfg.hash_bits)
    if not 0 < cfg.precision < 1 or not cfg.runs or any(m not in ("beam", "rcms") or s < 1 for m, s in cfg.runs):
        raise ArgumentError(f"precision must be in (0, 1) and runs (beam|rcms):size with size >= 1; got "
                            f"{cfg.precision} and {cfg.runs}")
    path, old, task = _start(cfg, task, "word", say)
    stats = task.stats()
    say(f"word task: {len(task.train)} training and {len(task.test)} test words, "
        f"{stats['train']['mean_phonemes']:.2f} phonemes and {stats['train']['mean_chars']:.2f} letters on average")
    report = {"command": "fsmlearn rcms words", "task": stats, "n": cfg.n, "passes": cfg.passes,
              "precision": cfg.precision, "impute_seconds": 0.0, "runs": [], "complete": False}
    specs = [(m, int(b)) for m, b in cfg.runs]
    done = _finished_runs(path, old, report, specs, say, _WORDS_RESUME_KEYS, _words_spec)
    todo = [k for k in range(len(specs)) if k not in done]
    alignments = None
    if todo:
        alignments, report["impute_seconds"] = _imputed(task, cfg.seed, cfg.model_dir, say)
    _run_all(_words_run, specs, done, todo, report, path, cfg, task=task, alignments=alignments, say=say)
    if path is not None:
        curves = {r["name"]: precision_recall_curve(np.array(r["confidence"]), np.array(r["correct"]))
                  for r in report["runs"]}
        plot_pr_curves(curves, path.with_suffix(".png"), precision_line=cfg.precision,
                       title="word task: precision against recall (figure 3)")
        _plot_lengths(report["runs"], path.with_name(path.stem + "-context-length.png"),
                      "word task: context length during training (figure 6)")
        say(f"wrote {path} and {path.with_suffix('.png')}")
    return report


def parse_word_runs(text: str) -> list:
    """'beam:10,rcms:10,beam:200' -> [("beam", 10), ...]."""
    out = []
    for part in text.split(","):
        f = part.strip().split(":")
        try:
            method, size = f[0], int(f[1])
        except (IndexError, ValueError):
            raise ArgumentError(f"bad run {part!r}: expected beam:SIZE or rcms:SIZE") from None
        if method not in ("beam", "rcms") or size < 1 or len(f) != 2:
            raise ArgumentError(f"bad run {part!r}: expected beam:SIZE or rcms:SIZE with SIZE >= 1")
        out.append((method, size))
    return out

