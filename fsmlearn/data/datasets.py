"""The named datasets and splits of ``../shared/data/README.md``.

The datasets (:data:`DATASETS`, :data:`SPLITS`) are streamed by
:func:`iter_sentences` (or loaded whole by :func:`load_dataset`) and read
the files :func:`dataset_fileids` lists.  Measured token counts (on
the shared data, commit 5db857e of the NLTK data index):

- ``wsj-small``: Treebank sample wsj_0001-wsj_0099, tagged (Penn tags,
  normalised): 1,927 sentences, 46,461 tokens.
- ``wsj-train``: CoNLL-2000 ``train.txt`` + ``test.txt`` and Treebank
  wsj_0100-wsj_0199, tagged: 12,967 sentences, 306,843 tokens (README:
  about 310k).
- ``mixed-text``: plain words (tags dropped) of every text corpus but
  cmudict: Treebank wsj_0100-wsj_0199 (47,739 tokens), CoNLL-2000
  train+test (259,104), MASC (591,604; all files except its copies of
  WSJ-small, ``written/wsj_0006, 0026, 0027, 0032, 0068, 0073``), Brown,
  all 500 files (1,161,192), abc (751,820), movie_reviews (1,527,573),
  webtext (385,055) and the UD English EWT dev file (25,147; it is in the
  README's table of text corpora, so it is in).  WSJ-small
  (wsj_0001-wsj_0099) is out.  4,749,234 tokens in 243,516 sentences,
  streamed in about 5 s.  The README says about 4.5M: its per-corpus
  figures count whitespace-separated pieces of the raw text (abc 664k,
  movie_reviews 1.49M, webtext 301k) and round MASC down to 500k, while
  the tokeniser here also splits punctuation and clitics.
- ``brown-lm``: the 500 ``brown/c*`` files sorted by name, ca01-ck26 train,
  ck27-cn17 valid, cn18-cr09 test; words lower-cased, tags dropped, one
  sentence per item; every word outside the vocabulary
  (:func:`brown_lm_vocabulary`: the 10,000 most frequent training words,
  ties broken by the word's string order) becomes ``<unk>``.  Train
  921,394 tokens (42,017 sentences), valid 119,418 (8,051), test 120,380
  (7,272): exactly the README's 921k / 119k / 120k.

Public names: DATASETS, SPLITS, BROWN_LM_VOCAB_SIZE, UNK, dataset_fileids,
iter_sentences, iter_dataset_words, iter_wsj_tagged, load_dataset, load_tagged,
TAGGED_DATASETS, token_count,
brown_lm_vocabulary.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import Counter
from collections.abc import Iterator

from ..errors import DatasetError
from .locate import corpus_path, data_dir as _resolve_data_dir, fileids
from .readers import iter_conll2000, iter_treebank, iter_words

__all__ = ["DATASETS", "SPLITS", "BROWN_LM_VOCAB_SIZE", "UNK", "dataset_fileids", "iter_sentences", "iter_dataset_words",
           "iter_wsj_tagged", "load_dataset", "load_tagged", "TAGGED_DATASETS", "token_count", "brown_lm_vocabulary"]

#: The named datasets of the shared README.
DATASETS: tuple[str, ...] = ("wsj-small", "wsj-train", "mixed-text", "brown-lm")
#: Dataset name -> its split names (datasets not listed have no splits).
SPLITS: dict[str, tuple[str, ...]] = {"brown-lm": ("train", "valid", "test")}

#: Size of the Brown-LM vocabulary (without ``<unk>``).
BROWN_LM_VOCAB_SIZE = 10_000
#: The out-of-vocabulary token of Brown-LM.
UNK = "<unk>"


def _wsj_ids(first: int, last: int) -> list[str]:
    return [f"tagged/wsj_{i:04d}.pos" for i in range(first, last + 1)]


_WSJ_SMALL_MASC = re.compile(r"written/wsj_00\d\d\.txt")   # MASC's copies of wsj_0001-wsj_0099


def dataset_fileids(name: str, split: str | None = None, data_dir=None) -> list[tuple[str, str | None]]:
    """The files a named dataset reads, in reading order.

    Args:
        name: one of :data:`DATASETS`.
        split: ``"train"``, ``"valid"`` or ``"test"`` for ``brown-lm``; None otherwise.
        data_dir: the data folder (needed to list MASC and the text corpora).

    Returns:
        A list of (corpus, file id) pairs; the file id is None for ``ud_english_ewt``.

    Raises:
        DatasetError: unknown dataset or split (a ``ValueError``).
    """
    _check_dataset(name, split)
    if name == "wsj-small":
        return [("treebank", f) for f in _wsj_ids(1, 99)]
    if name == "wsj-train":
        return ([("conll2000", "train.txt"), ("conll2000", "test.txt")]
                + [("treebank", f) for f in _wsj_ids(100, 199)])
    if name == "brown-lm":
        ids = fileids("brown", data_dir)
        if len(ids) != 500:
            raise DatasetError(f"brown-lm needs the 500 Brown files, found {len(ids)} in "
                               f"{corpus_path('brown', data_dir)}")
        part = {"train": ids[:400], "valid": ids[400:450], "test": ids[450:]}[split]
        return [("brown", f) for f in part]
    # mixed-text
    out = [("treebank", f) for f in _wsj_ids(100, 199)]
    out += [("conll2000", "train.txt"), ("conll2000", "test.txt")]
    out += [("masc_tagged", f) for f in fileids("masc_tagged", data_dir)
            if not _WSJ_SMALL_MASC.fullmatch(f)]
    for corpus in ("brown", "abc", "movie_reviews", "webtext"):
        out += [(corpus, f) for f in fileids(corpus, data_dir)]
    out.append(("ud_english_ewt", None))
    return out


def _check_dataset(name: str, split):
    if name not in DATASETS:
        raise DatasetError(f"unknown dataset {name!r}; expected one of {', '.join(DATASETS)}")
    splits = SPLITS.get(name)
    if splits is None:
        if split is not None:
            raise DatasetError(f"dataset {name!r} has no splits, got split={split!r}")
    elif split not in splits:
        raise DatasetError(f"dataset {name!r} needs split in {splits}, got {split!r}")


def _read_parts(parts, data_dir, words_only: bool) -> Iterator[list]:
    """Read (corpus, file id) pairs in order, grouping consecutive ids of one corpus."""
    for corpus, group in itertools.groupby(parts, key=lambda p: p[0]):
        ids = [f for _, f in group]
        if words_only:
            yield from iter_words(corpus, None if corpus == "ud_english_ewt" else ids, data_dir)
        elif corpus == "treebank":
            yield from iter_treebank(ids, data_dir)
        elif corpus == "conll2000":
            yield from iter_conll2000(ids, data_dir)
        else:
            raise DatasetError(f"no tagged reader for {corpus!r} in a tagged dataset")


def iter_sentences(name: str, split: str | None = None, data_dir=None) -> Iterator[list]:
    """Stream the sentences of a named dataset (definitions in the module docstring).

    Args:
        name: ``"wsj-small"``, ``"wsj-train"``, ``"mixed-text"`` or ``"brown-lm"``.
        split: for ``brown-lm`` one of ``"train"``, ``"valid"``, ``"test"``; else None.
        data_dir: the data folder.

    Yields:
        For the WSJ datasets a list of (word, Penn tag) str pairs per sentence; for
        ``mixed-text`` and ``brown-lm`` a list of str words.

    Raises:
        DatasetError: unknown dataset or split (a ``ValueError``).
        CorpusFormatError: a malformed corpus file.
        CorpusNotFoundError: a missing archive (a ``FileNotFoundError``).
    """
    parts = dataset_fileids(name, split, data_dir)
    if name == "brown-lm":
        vocab = set(brown_lm_vocabulary(data_dir))
        for sent in iter_words("brown", [f for _, f in parts], data_dir):
            yield [w if w in vocab else UNK for w in (x.lower() for x in sent)]
        return
    yield from _read_parts(parts, data_dir, words_only=(name == "mixed-text"))


def iter_dataset_words(name: str, split: str | None = None, data_dir=None) -> Iterator[list[str]]:
    """The words of a named dataset's sentences, tags dropped (see :func:`iter_sentences`).

    Yields:
        One list of str per sentence.
    """
    for s in iter_sentences(name, split, data_dir):
        yield [w if isinstance(w, str) else w[0] for w in s]


def iter_wsj_tagged(data_dir=None) -> Iterator[list[tuple[str, str]]]:
    """All the WSJ tagged data, WSJ-small then WSJ-train (the tag dictionary's source).

    Args:
        data_dir: the data folder.

    Yields:
        One list of (word, Penn tag) str pairs per sentence.
    """
    yield from iter_sentences("wsj-small", data_dir=data_dir)
    yield from iter_sentences("wsj-train", data_dir=data_dir)


def load_dataset(name: str, split: str | None = None, data_dir=None) -> list[list]:
    """A named dataset as a list of sentences (use :func:`iter_sentences` to stream).

    Args:
        name, split, data_dir: as for :func:`iter_sentences`.

    Returns:
        The list of sentences :func:`iter_sentences` yields.
    """
    return list(iter_sentences(name, split, data_dir))


#: the named datasets with part-of-speech tags
TAGGED_DATASETS = ("wsj-small", "wsj-train")


def load_tagged(name, data_dir=None, *, format: str | None = None, column: str = "upos",
                tags=None, tagset_name: str | None = None) -> list[list[tuple[str, str]]]:
    """A tagged dataset's sentences, or a user's tagged file's.

    ``name`` is taken for a dataset if it is one of :data:`DATASETS` (to read a
    file named like a dataset, write it as ``./NAME``), else for a file, read by
    :func:`~fsmlearn.data.tagged.read_tagged_file` (``word/TAG`` or CoNLL-U).

    Args:
        name: one of :data:`TAGGED_DATASETS`, or a file (str or Path).
        data_dir: the data folder (datasets only).
        format, column, tags, tagset_name: for a file, as for
            :func:`~fsmlearn.data.tagged.read_tagged_file` (ignored for a dataset,
            whose tags are Penn tags).

    Returns:
        A list of sentences, lists of (word, tag) str pairs.

    Raises:
        DatasetError: ``name`` is a dataset without tags, or neither an existing
            file nor a known dataset (the message lists the tagged datasets).
        CorpusFormatError: a bad file (see :mod:`fsmlearn.data.tagged`).
    """
    from pathlib import Path
    from .tagged import read_tagged_file
    key = str(name)
    if key in TAGGED_DATASETS:
        return load_dataset(key, None, data_dir)
    if key in DATASETS:
        raise DatasetError(f"dataset {key!r} is not tagged; the tagged datasets are "
                           f"{', '.join(TAGGED_DATASETS)} (or give a tagged file)")
    if not Path(key).exists():
        raise DatasetError(f"{key}: neither a file nor a known dataset (the tagged datasets are "
                           f"{', '.join(TAGGED_DATASETS)})")
    return read_tagged_file(key, format, column, tags, tagset_name)


def token_count(name: str, split: str | None = None, data_dir=None) -> int:
    """The number of tokens of a named dataset (counted by streaming it).

    Args:
        name, split, data_dir: as for :func:`iter_sentences`.

    Returns:
        The token count, an int.
    """
    return sum(len(s) for s in iter_sentences(name, split, data_dir))


def brown_lm_vocabulary(data_dir=None) -> list[str]:
    """The Brown-LM vocabulary: the 10,000 most frequent lower-cased training words.

    Ties in frequency are broken by the words' string order, so the list is
    reproducible.  ``<unk>`` is not in it.  Computed once per data folder per
    process (kept in memory, never on disk).

    Args:
        data_dir: the data folder.

    Returns:
        A list of 10,000 str, most frequent first.
    """
    key = str(_resolve_data_dir(data_dir).resolve())
    return list(_brown_vocab(key))


@functools.lru_cache(maxsize=4)
def _brown_vocab(key: str) -> tuple[str, ...]:
    train = [f for _, f in dataset_fileids("brown-lm", "train", key)]
    counts: Counter = Counter()
    for sent in iter_words("brown", train, key):
        counts.update(w.lower() for w in sent)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple(w for w, _ in ranked[:BROWN_LM_VOCAB_SIZE])

