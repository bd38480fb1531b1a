"""``fsmlearn tag em``: an HMM tagger trained by EM on raw text under the 17-tag
dictionary (Merialdo's set-up), evaluated after every iteration.

The training text is a named dataset, text files, or a saved integer-coded
corpus (reloaded memory-mapped, written on the first run when ``corpus`` is
given).  The report (JSON, kept current after every iteration) and a PNG of
accuracy and log-likelihood per iteration are written beside each other.

Public names: TagEMConfig, run_tag_em.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data import iter_dataset_words, load_tagged
from ..data.tagsets import tag_dictionary, tagset_tags
from ..errors import ArgumentError, CorpusFormatError, DatasetError
from ..data.textin import read_lines
from ..tag import Corpus, dictionary_mask, em, encode_corpus, uniform_hmm
from .report import new_figure, save_figure, write_report

__all__ = ["TagEMConfig", "run_tag_em", "TEXT_DATASETS"]

#: datasets EM can train on (tags dropped)
TEXT_DATASETS = ("wsj-train", "wsj-small", "mixed-text")


@dataclass
class TagEMConfig:
    output: str                        # the model file to write
    iterations: int
    data: str | None = None            # a named dataset (TEXT_DATASETS) ...
    text: list | None = None           # ... or text files, one sentence per line
    corpus: str | None = None          # a saved encoded corpus folder (loaded if present, else written)
    report: str | None = None          # JSON report; the PNG goes beside it
    order: int = 2
    eval_data: str | None = "wsj-small"
    min_count: int = 5
    chunk_tokens: int = 200_000


def _training_corpus(cfg: TagEMConfig, say) -> Corpus:
    t0 = time.time()
    if cfg.corpus and Path(cfg.corpus).exists() and not Path(cfg.corpus).is_dir():
        raise CorpusFormatError("not a directory (--corpus names the folder of a saved encoded corpus)", cfg.corpus)
    if cfg.corpus and (Path(cfg.corpus) / "corpus.json").exists():
        corpus = Corpus.load(cfg.corpus)
        say(f"loaded corpus {cfg.corpus} (memory-mapped): {corpus.num_tokens:,} tokens")
        return corpus
    if cfg.data and cfg.text:
        raise ArgumentError("give --data NAME or --text FILE..., not both")
    if cfg.text:
        source, name = (line.split() for line in read_lines(cfg.text)), " ".join(cfg.text)
    elif cfg.data:
        if cfg.data not in TEXT_DATASETS:
            raise DatasetError(f"unknown dataset {cfg.data!r}; expected one of {', '.join(TEXT_DATASETS)}")
        source, name = iter_dataset_words(cfg.data), cfg.data
    else:
        raise ArgumentError("give --data NAME, --text FILE... or --corpus DIR holding a saved corpus")
    corpus = encode_corpus(source, progress=say)
    say(f"encoded {name}: {corpus.num_sentences:,} sentences, {corpus.num_tokens:,} tokens, "
        f"{len(corpus.vocab):,} words ({time.time() - t0:.1f} s)")
    if cfg.corpus:
        corpus.save(cfg.corpus)
        say(f"saved the encoded corpus to {cfg.corpus}")
    return corpus


def _nan(x):
    return math.nan if x is None else x


def _plot(records: list, path: Path, title: str) -> None:
    """Accuracy and log-likelihood (training and held-out) per iteration."""
    it = [r["iteration"] for r in records]
    fig, ax = new_figure(2)
    ax[0].plot(it, [100 * _nan(r["accuracy"]) for r in records], "o-")
    ax[0].set_xlabel("iteration")
    ax[0].set_ylabel("accuracy on the evaluation data (%)")
    ax[0].grid(alpha=0.3)
    ax[1].plot(it, [_nan(r["loglik_per_token"]) for r in records], "o-", label="training")
    ax[1].plot(it, [_nan(r["heldout_loglik"]) for r in records], "s-", label="held-out")
    ax[1].set_xlabel("iteration")
    ax[1].set_ylabel("log-likelihood per token (nats)")
    ax[1].legend()
    ax[1].grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)


def run_tag_em(cfg: TagEMConfig, progress=None):
    """Train by EM as configured; writes the model, the report and its plot.

    Returns:
        (the trained HMM, the list of :class:`~fsmlearn.tag.EMRecord`).

    Raises:
        ArgumentError: bad settings; DatasetError: an unknown dataset.
    """
    say = progress or (lambda m: None)
    if cfg.iterations < 0:
        raise ArgumentError(f"--iterations must be >= 0, got {cfg.iterations}")
    if cfg.chunk_tokens < 1:
        raise ArgumentError(f"--chunk-tokens must be >= 1, got {cfg.chunk_tokens}")
    corpus = _training_corpus(cfg, say)
    tags = tagset_tags("tag17")
    td = tag_dictionary("tag17", cfg.min_count)
    allowed = dictionary_mask(corpus.vocab, tags, td)
    hmm0 = uniform_hmm(tags, corpus.vocab, allowed, order=cfg.order, tagdict=td)
    ev = load_tagged(cfg.eval_data) if cfg.eval_data else None
    held = [[w for w, _ in s] for s in ev] if ev is not None else None
    say(f"EM: order {cfg.order}, 17 tags, {len(corpus.vocab):,} words, {cfg.iterations} iterations, "
        f"chunks of {cfg.chunk_tokens:,} tokens")
    report_path = Path(cfg.report) if cfg.report else None
    done = []

    def report(records, final=False):
        if report_path is None:
            return
        write_report(report_path, {
            "command": "fsmlearn tag em", "data": cfg.data or cfg.text or str(cfg.corpus), "order": cfg.order,
            "tags": list(tags), "tag_dictionary": {"tagset": "tag17", "min_count": cfg.min_count},
            "tokens": corpus.num_tokens, "sentences": corpus.num_sentences, "vocab_size": len(corpus.vocab),
            "eval_data": cfg.eval_data, "chunk_tokens": cfg.chunk_tokens, "complete": final,
            "iterations": [r.to_dict() for r in records]})

    def on_record(rec):          # a model's record is complete: keep the report current
        done.append(rec)
        report(done)

    model, records = em(hmm0, corpus, allowed, cfg.iterations, eval=ev, heldout=held,
                        chunk_tokens=cfg.chunk_tokens, progress=say, on_record=on_record)
    model.save(cfg.output)
    say(f"wrote {cfg.output}")
    report(records, final=True)
    if report_path is not None:
        png = report_path.with_suffix(".png")
        _plot([r.to_dict() for r in records], png,
              f"EM, {cfg.data or ('text files' if cfg.text else cfg.corpus)}: "
              f"{corpus.num_tokens:,} tokens, 17 tags, order {cfg.order}")
        say(f"wrote {report_path} and {png}")
    secs = [r.seconds for r in records[1:]]
    if secs:
        say(f"mean {np.mean(secs):.2f} s per iteration ({corpus.num_tokens / np.mean(secs):,.0f} tokens/s)")
    return model, records
