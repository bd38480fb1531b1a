"""Scoring text files with a saved TRF language model.

Each line is a sentence of whitespace-separated words; a word outside the model's
vocabulary is ``<unk>`` when the vocabulary has it.  ln p(j, x^j) is equation (2) with the
model's estimated zeta (section 4), the perplexity counts </s> as a token (KenLM's
convention, so it compares with ``lm ppl`` and kenlm's query).

Public names: read_sentences, score_corpus.
"""

from __future__ import annotations

import math

import numpy as np

from ..data.text import open_text
from ..errors import CorpusFormatError
from .features import Corpus
from .model import TRF

UNK = "<unk>"


def read_sentences(path, vocab: list[str]) -> tuple[Corpus, int]:
    """(sentences as ids, number of <unk> replacements) of a text file.

    Raises:
        CorpusFormatError: an empty line, or a word outside a vocabulary without ``<unk>``,
            or bytes that are not UTF-8 (file, line and the value).
    """
    index = {w: i for i, w in enumerate(vocab)}
    unk = index.get(UNK)
    toks, ptr, oov = [], [0], 0
    with open_text(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise CorpusFormatError(f"bytes that are not UTF-8 at column {e.start + 1}: "
                                        f"{raw[e.start:e.start + 8]!r}", path, n) from None
            words = line.split()
            if not words:
                raise CorpusFormatError("an empty sentence (a TRF gives lengths 1 and up a probability)", path, n)
            for w in words:
                i = index.get(w)
                if i is None:
                    if unk is None:
                        raise CorpusFormatError(f"word {w!r} is not in the model's vocabulary (which has no "
                                                f"{UNK})", path, n)
                    i = unk
                    oov += 1
                toks.append(i)
            ptr.append(len(toks))
    return Corpus(np.array(toks, np.int32), np.array(ptr, np.int64)), oov


def score_corpus(model: TRF, corpus: Corpus) -> dict:
    """ln p of each sentence, their sum, the tokens (</s> included) and the perplexity."""
    lp = model.log_probs(corpus)
    tokens = int(corpus.lengths.sum() + len(corpus))
    total = float(lp.sum())
    return {"log_probs": lp, "total": total, "sentences": len(corpus), "tokens": tokens,
            "perplexity": math.exp(-total / tokens) if tokens else math.inf}
