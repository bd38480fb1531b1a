"""Phonemes to spelling: the speech and word tasks of Steinhardt and Liang (2015), rebuilt from
cmudict and Mixed-text.

The paper's speech task (section 2) maps the phones of 999 Switchboard
utterances (746 train, 253 test; 26 phones on average) to their spelling,
``yeah_it's_weird``, with the alignment unobserved; its section 5 measures
precision at high confidence on a word task.  Switchboard is not among the
shared corpora, so both are rebuilt here from what is: the pronunciations of
cmudict (:mod:`.cmudict`) and the sentences of Mixed-text
(:func:`~fsmlearn.data.datasets.iter_dataset_words`; Mixed-text already
leaves WSJ-small out, the only part of the shared data the README holds back,
and reserves no part of itself).

Words (:func:`spoken_words`): a sentence's tokens are lower-cased (the curly
apostrophe becomes ``'``), tokens without a letter or digit (punctuation) are
dropped, and the clitics the tokeniser splits off (``n't 's 're 've 'll 'd
'm``) are joined back to the word before them (``do n't`` -> ``don't``, ``ca
n't`` -> ``can't``), so that the words are the spellings cmudict lists.  A
word is *speakable* when it is made of the letters a-z and ``'`` only, has a
letter, and is in the lexicon; its pronunciation is the lexicon's first.

- :func:`build_speech_task` (section 2): the sentences all of whose words are
  speakable, with ``min_words``-``max_words`` words (default 3-10) and
  ``min_phonemes``-``max_phonemes`` phonemes in all (default 17-37, chosen
  so that the pool averages the paper's 26 phonemes: 25.9, where 16-36
  gives 25.1 and 3-8 words without a phoneme window 23.6); a sentence's input is the concatenation of its
  words' pronunciations (no word boundary in the input), its output the
  words joined by ``_``.  Distinct outputs only (the first sentence of each
  spelling), sorted by spelling; a seeded permutation of this pool gives the
  746 training then the 253 test utterances, disjoint.
- :func:`build_word_task` (section 5 analogue): the distinct speakable words
  of the sentences with 2-12 characters, sorted; a seeded permutation gives
  6,000 training then 1,000 test words (uniform over word types); input the
  word's pronunciation, output its letters.

Measured on the shared data with seed 0 (about 10-11 s each on this
machine's 2 cores, most of it reading Mixed-text's 243,516 sentences, 8 s,
and cmudict, 1.3 s):

- speech: a pool of 32,111 sentences; train 746 / test 253 utterances, mean
  26.0 / 25.8 phonemes (17-37), 37.6 / 37.0 characters, 7.1 / 6.9 words;
  39 phonemes, 28 characters (``'``, ``_``, a-z);
- word: a pool of 50,393 words; train 6,000 / test 1,000, mean 6.28 / 6.26
  phonemes (1-13), 7.41 / 7.37 letters; 39 phonemes, 27 characters (``'``,
  a-z).

:meth:`TranscriptionTask.stats` recomputes these figures.

Each builder returns a :class:`TranscriptionTask`: the symbol tables
(``phonemes`` and ``chars``, the symbols occurring in the task's utterances,
in :data:`~fsmlearn.data.cmudict.PHONEMES` order and by code point; ids are
positions, ``0 .. |Y| - 1``) and two :class:`Transcriptions` (train, test)
holding int32 id arrays and the raw strings.

Public names: Transcriptions, TranscriptionTask, spoken_words, build_speech_task,
build_word_task, SPEECH_TRAIN, SPEECH_TEST, WORD_TRAIN, WORD_TEST.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import ArgumentError, DatasetError
from .cmudict import PHONEMES, read_cmudict
from .datasets import iter_dataset_words

__all__ = ["Transcriptions", "TranscriptionTask", "spoken_words", "build_speech_task",
           "build_word_task", "SPEECH_TRAIN", "SPEECH_TEST", "WORD_TRAIN", "WORD_TEST"]

#: The paper's split of the speech task (section 2).
SPEECH_TRAIN, SPEECH_TEST = 746, 253
#: The split of the word task here (the paper's word recognition had 6,876 words in 10 folds).
WORD_TRAIN, WORD_TEST = 6000, 1000

_CLITICS = frozenset({"n't", "'s", "'re", "'ve", "'ll", "'d", "'m"})
_SPEAKABLE = re.compile(r"[a-z']*[a-z][a-z']*")


@dataclass(frozen=True)
class Transcriptions:
    """One split of a task: parallel lists, one item per utterance.

    Attributes:
        x: int32 arrays of phoneme ids, shape (n_i,).
        y: int32 arrays of character ids, shape (m_i,).
        inputs: the phonemes, tuples of str (``("HH", "AH", "L", "OW")``).
        outputs: the spellings, str (``"hello_world"``; ``_`` between words).
        words: the words, tuples of str.
        word_starts: int32 arrays, shape (len(words_i),): where in ``x`` each word's
            pronunciation starts (the hidden segmentation; the input does not show it).
    """

    x: list[np.ndarray]
    y: list[np.ndarray]
    inputs: list[tuple[str, ...]]
    outputs: list[str]
    words: list[tuple[str, ...]]
    word_starts: list[np.ndarray]

    def __len__(self) -> int:
        return len(self.outputs)


@dataclass(frozen=True)
class TranscriptionTask:
    """A phonemes-to-spelling task: symbol tables and the train and test splits.

    Attributes:
        name: ``"speech"`` or ``"word"``.
        phonemes: the input symbols; a phoneme's id is its position.
        chars: the output symbols (``_`` for a space); a character's id is its position.
        train, test: the splits (disjoint: no output is in both).
        pool: how many candidates the splits were drawn from.
        config: the selection's parameters (seed, windows, source) as JSON-ready values.
    """

    name: str
    phonemes: tuple[str, ...]
    chars: tuple[str, ...]
    train: Transcriptions
    test: Transcriptions
    pool: int
    config: dict = field(default_factory=dict)

    def spell(self, ids) -> str:
        """The string of a sequence of character ids (e.g. a model's output)."""
        return "".join(self.chars[int(i)] for i in ids)

    def stats(self) -> dict:
        """Sizes, mean lengths and alphabet sizes, JSON-ready.

        Returns:
            dict with ``task``, ``pool``, ``phonemes`` and ``chars`` (alphabet sizes),
            ``chars_missing_from_train`` (output symbols seen only in test), and per split
            (``train``, ``test``): ``utterances``, ``mean_phonemes``, ``mean_chars``,
            ``mean_words``, ``min_phonemes``, ``max_phonemes``, ``phoneme_tokens``,
            ``char_tokens``.
        """
        out = {"task": self.name, "pool": self.pool, "phonemes": len(self.phonemes),
               "chars": len(self.chars), "config": dict(self.config)}
        for name, part in (("train", self.train), ("test", self.test)):
            nx = np.array([len(a) for a in part.x], dtype=np.int64)
            ny = np.array([len(a) for a in part.y], dtype=np.int64)
            nw = np.array([len(w) for w in part.words], dtype=np.int64)
            out[name] = {"utterances": len(part), "mean_phonemes": float(nx.mean()) if len(nx) else 0.0,
                         "mean_chars": float(ny.mean()) if len(ny) else 0.0,
                         "mean_words": float(nw.mean()) if len(nw) else 0.0,
                         "min_phonemes": int(nx.min()) if len(nx) else 0,
                         "max_phonemes": int(nx.max()) if len(nx) else 0,
                         "phoneme_tokens": int(nx.sum()), "char_tokens": int(ny.sum())}
        seen = set("".join(self.train.outputs))
        out["chars_missing_from_train"] = sorted(set(self.chars) - seen)
        return out


def spoken_words(tokens: Iterable[str]) -> list[str]:
    """A sentence's tokens as the words one would say (see the module docstring).

    Args:
        tokens: the tokens of one sentence (str).

    Returns:
        The lower-cased words, punctuation dropped, clitics joined to the word before
        them (a list of str; possibly empty).
    """
    out: list[str] = []
    for t in tokens:
        w = t.lower().replace("\u2019", "'")
        if not any(c.isalnum() for c in w):
            continue
        if w in _CLITICS and out:
            out[-1] += w
        else:
            out.append(w)
    return out


def _check_int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ArgumentError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def _sources(sentences, lexicon, data_dir):
    if lexicon is None:
        lexicon = read_cmudict(data_dir, lowercase=True)
    elif not isinstance(lexicon, Mapping):
        raise ArgumentError(f"lexicon must be a mapping word -> pronunciations, got {type(lexicon).__name__}")
    source = "mixed-text" if sentences is None else "given sentences"
    if sentences is None:
        sentences = iter_dataset_words("mixed-text", data_dir=data_dir)
    return sentences, lexicon, source


def _first(lexicon: Mapping, w: str) -> tuple[str, ...] | None:
    if not _SPEAKABLE.fullmatch(w):
        return None
    prons = lexicon.get(w)
    if not prons:
        return None
    return tuple(prons[0])


def _draw(pool: list, train: int, test: int, seed: int, what: str) -> tuple[list, list]:
    if len(pool) < train + test:
        raise DatasetError(f"only {len(pool)} {what} qualify, fewer than train + test = "
                           f"{train} + {test}")
    order = np.random.default_rng(seed).permutation(len(pool))
    return [pool[i] for i in order[:train]], [pool[i] for i in order[train:train + test]]


def _task(name, items_train, items_test, pool, config) -> TranscriptionTask:
    """items: (words tuple, list of pronunciations per word)."""
    items = items_train + items_test
    used = {p for _, prons in items for pr in prons for p in pr}
    # a lexicon other than cmudict may hold other symbols: they follow, by code point
    phon = [p for p in PHONEMES if p in used] + sorted(used - set(PHONEMES))
    chars = sorted({c for words, _ in items for c in "_".join(words)})
    pid = {p: i for i, p in enumerate(phon)}
    cid = {c: i for i, c in enumerate(chars)}

    def split(part) -> Transcriptions:
        x, y, inputs, outputs, words, starts = [], [], [], [], [], []
        for ws, prons in part:
            seq = tuple(p for pr in prons for p in pr)
            text = "_".join(ws)
            x.append(np.fromiter((pid[p] for p in seq), dtype=np.int32, count=len(seq)))
            y.append(np.fromiter((cid[c] for c in text), dtype=np.int32, count=len(text)))
            inputs.append(seq)
            outputs.append(text)
            words.append(tuple(ws))
            starts.append(np.cumsum([0] + [len(pr) for pr in prons[:-1]]).astype(np.int32))
        return Transcriptions(x, y, inputs, outputs, words, starts)

    return TranscriptionTask(name, tuple(phon), tuple(chars), split(items_train), split(items_test),
                             pool, config)


def build_speech_task(sentences: Iterable[Sequence[str]] | None = None, lexicon: Mapping | None = None, *,
                      train: int = SPEECH_TRAIN, test: int = SPEECH_TEST, seed: int = 0,
                      min_words: int = 3, max_words: int = 10, min_phonemes: int = 17,
                      max_phonemes: int = 37, data_dir=None) -> TranscriptionTask:
    """The speech task of section 2 rebuilt: sentences' phonemes (no word boundaries) to spelling.

    Selection: see the module docstring.

    Args:
        sentences: token lists (default: Mixed-text, read from ``data_dir``).
        lexicon: lower-case word -> list of pronunciations (tuples of phonemes), the first
            used (default: cmudict, ``read_cmudict(data_dir, lowercase=True)``).
        train, test: the split sizes (default 746 and 253, the paper's).
        seed: the seed of the permutation that draws the splits.
        min_words, max_words: the sentence length window, in words (inclusive).
        min_phonemes, max_phonemes: the input length window, in phonemes (inclusive).
        data_dir: the data folder.

    Returns:
        A :class:`TranscriptionTask` named ``"speech"``.

    Raises:
        ArgumentError: a size, window or seed that is not an int in range.
        DatasetError: fewer than ``train + test`` sentences qualify.
        CorpusFormatError, CorpusNotFoundError: from the corpus readers.
    """
    train, test, seed = _check_int("train", train, 1), _check_int("test", test, 1), _check_int("seed", seed, 0)
    min_words, max_words = _check_int("min_words", min_words, 1), _check_int("max_words", max_words, 1)
    min_phonemes = _check_int("min_phonemes", min_phonemes, 1)
    max_phonemes = _check_int("max_phonemes", max_phonemes, 1)
    if min_words > max_words or min_phonemes > max_phonemes:
        raise ArgumentError(f"empty window: words {min_words}-{max_words}, phonemes "
                            f"{min_phonemes}-{max_phonemes}")
    sentences, lexicon, source = _sources(sentences, lexicon, data_dir)
    found: dict[tuple[str, ...], list] = {}
    for sent in sentences:
        words = spoken_words(sent)
        if not min_words <= len(words) <= max_words:
            continue
        key = tuple(words)
        if key in found:
            continue
        prons = []
        for w in words:
            pr = _first(lexicon, w)
            if pr is None:
                break
            prons.append(pr)
        else:
            if min_phonemes <= sum(len(p) for p in prons) <= max_phonemes:
                found[key] = prons
    pool = sorted(found.items(), key=lambda kv: "_".join(kv[0]))
    tr, te = _draw(pool, train, test, seed, "sentences")
    config = {"source": source, "seed": seed, "train": train, "test": test, "min_words": min_words,
              "max_words": max_words, "min_phonemes": min_phonemes, "max_phonemes": max_phonemes,
              "pronunciation": "first"}
    return _task("speech", tr, te, len(pool), config)


def build_word_task(sentences: Iterable[Sequence[str]] | None = None, lexicon: Mapping | None = None, *,
                    train: int = WORD_TRAIN, test: int = WORD_TEST, seed: int = 0,
                    min_length: int = 2, max_length: int = 12, data_dir=None) -> TranscriptionTask:
    """The word task (section 5 analogue): a word's phonemes to its letters.

    Selection: see the module docstring.

    Args:
        sentences: token lists whose words are the candidates (default: Mixed-text).
        lexicon: as for :func:`build_speech_task` (default cmudict).
        train, test: the split sizes (default 6,000 and 1,000).
        seed: the seed of the permutation that draws the splits.
        min_length, max_length: the word length window, in characters (inclusive).
        data_dir: the data folder.

    Returns:
        A :class:`TranscriptionTask` named ``"word"`` (one word per utterance).

    Raises:
        ArgumentError: a size, window or seed that is not an int in range.
        DatasetError: fewer than ``train + test`` words qualify.
        CorpusFormatError, CorpusNotFoundError: from the corpus readers.
    """
    train, test, seed = _check_int("train", train, 1), _check_int("test", test, 1), _check_int("seed", seed, 0)
    min_length, max_length = _check_int("min_length", min_length, 1), _check_int("max_length", max_length, 1)
    if min_length > max_length:
        raise ArgumentError(f"empty window: word lengths {min_length}-{max_length}")
    sentences, lexicon, source = _sources(sentences, lexicon, data_dir)
    seen: set[str] = set()
    found: dict[str, tuple[str, ...]] = {}
    for sent in sentences:
        for w in spoken_words(sent):
            if w in seen:
                continue
            seen.add(w)
            if min_length <= len(w) <= max_length:
                pr = _first(lexicon, w)
                if pr is not None:
                    found[w] = pr
    pool = [((w,), [found[w]]) for w in sorted(found)]
    tr, te = _draw(pool, train, test, seed, "words")
    config = {"source": source, "seed": seed, "train": train, "test": test, "min_length": min_length,
              "max_length": max_length, "pronunciation": "first"}
    return _task("word", tr, te, len(pool), config)
