"""The CMU Pronouncing Dictionary: a strict reader of ``corpora/cmudict.zip``, read in place.

The shared archive is the NLTK data package (``cmudict/cmudict``, 133,737
lines, ``cmudict/README``; cmudict 0.7a), one entry per line::

    WORD N PH1 PH2 ...        e.g.  NATURAL 1 N AE1 CH ER0 AH0 L

where ``N`` numbers a word's pronunciations 1, 2, 3, ... (the NLTK copy
keeps them in order but not always on adjacent lines: ``A 1``, ``A. 1``,
``A 2``).  The layout of the CMU releases is accepted too::

    ;;; a comment
    WORD  PH1 PH2 ...
    WORD(2)  PH1 PH2 ...      (0.7b numbers the alternates from (1), later releases from (2))

A file is in one layout or the other, decided by its first entry (a second
field of digits is the NLTK counter; phonemes are never digits).  Lines are
split at whitespace; blank lines, lines starting with ``;;;`` and a trailing
``# ...`` (the comments of the later CMU releases) are skipped.

Accepted values, everything else being a
:class:`~fsmlearn.errors.CorpusFormatError` whose message reads
``<archive>/<member>:<line>: <what> <quoted value>`` (file, member, the
1-based line and the offending field or line):

- the word: any non-empty run of characters without whitespace or control
  characters (the dictionary holds ``'S``, ``A.``, ``#SHARP-SIGN``,
  ``BABAR's``), kept as written unless ``lowercase``;
- the NLTK counter: ``1`` for a word's first entry, then exactly one more than
  the word's previous entry (written without leading zeros); the CMU suffix
  ``(k)``: none on a word's first entry, then a positive number (at most 9
  digits, no leading zeros) above the previous entry's (0 for none);
- the pronunciation: at least one phoneme, each one of the 39 ARPAbet
  phonemes of :data:`PHONEMES`, a vowel (:data:`VOWELS`) with an optional
  stress digit 0, 1 or 2 (every vowel has one but for one ``UW`` of
  ``JUANITA 2``), a consonant without one;
- the text: UTF-8 without control characters (U+0000-U+0008, U+000E-U+001B,
  U+007F-U+009F but U+0085).

Stress digits are removed unless ``keep_stress``; pronunciations of a word
that become equal are kept once (first occurrence order).  With
``lowercase`` the words are lower-cased and the pronunciations of words
that then coincide (``BABAR'S`` / ``BABAR's``) merged in file order.  The
shared archive gives 133,737 entries, 123,455 words, 39 phonemes.

Public names: PHONEMES, VOWELS, read_cmudict, parse_cmudict_lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..errors import CorpusFormatError
from .locate import read_members, strict_lines

__all__ = ["PHONEMES", "VOWELS", "read_cmudict", "parse_cmudict_lines"]

#: The 39 ARPAbet phonemes of cmudict (its README's table), sorted.
PHONEMES: tuple[str, ...] = tuple(
    "AA AE AH AO AW AY B CH D DH EH ER EY F G HH IH IY JH K L M N NG OW OY P R S SH T TH UH UW "
    "V W Y Z ZH".split())
#: The vowels among :data:`PHONEMES` (the phonemes that carry a stress digit).
VOWELS: frozenset[str] = frozenset("AA AE AH AO AW AY EH ER EY IH IY OW OY UH UW".split())

_PHONEMES = frozenset(PHONEMES)
_PHONE = re.compile(r"([A-Z]{1,2})([012]?)")
_COUNTER = re.compile(r"[0-9]+")
_ALTERNATE = re.compile(r"(.+)\(([0-9]{1,9})\)")
_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
_MEMBER = "cmudict"


def read_cmudict(data_dir=None, *, keep_stress: bool = False, lowercase: bool = False
                 ) -> dict[str, list[tuple[str, ...]]]:
    """The pronunciations of the shared ``corpora/cmudict.zip`` (member ``cmudict/cmudict``).

    The archive is read in place (nothing is extracted); accepted forms in the
    module docstring.  About 1.5 s.

    Args:
        data_dir: the data folder (default ``$FSMLEARN_DATA`` or ``../shared/data``).
        keep_stress: keep the vowels' stress digits (``AH0``); default ``AH``.
        lowercase: lower-case the words (merging the pronunciations of words that
            then coincide).

    Returns:
        A dict, in file order, word (str) -> list of its distinct pronunciations,
        each a non-empty tuple of phoneme str, in the dictionary's order (the
        first is the dictionary's first).

    Raises:
        CorpusNotFoundError: the archive or its member is missing.
        CorpusFormatError: a malformed line (names archive, member, line and value),
            text that is not UTF-8, a corrupt archive, or a member without entries.
    """
    for where, data in read_members("cmudict", _MEMBER, data_dir):
        lex = parse_cmudict_lines(strict_lines(where, data), where, keep_stress=keep_stress,
                                  lowercase=lowercase)
        if not lex:
            raise CorpusFormatError("the dictionary is empty: no entry line", where)
        return lex
    raise AssertionError("unreachable: read_members yields the one member or raises")


def parse_cmudict_lines(lines: Iterable[str], source: str = "<lines>", *, keep_stress: bool = False,
                        lowercase: bool = False) -> dict[str, list[tuple[str, ...]]]:
    """Parse cmudict lines (either layout of the module docstring).

    Args:
        lines: the decoded lines, without line ends (a str with newlines is split).
        source: the file's name for error messages (``<archive>/<member>`` for the archive).
        keep_stress: keep the stress digits.
        lowercase: lower-case the words.

    Returns:
        As for :func:`read_cmudict` (an empty dict when there is no entry line).

    Raises:
        CorpusFormatError: the first malformed line: a control character, a word
            without a pronunciation, a bad or out-of-order counter or ``(k)``
            suffix, a phoneme outside the 39 or a misplaced stress digit, a line
            of the other layout; names ``source``, the line and the value.
    """
    if isinstance(lines, str):
        lines = lines.split("\n")
    nltk = None                      # the layout, decided by the first entry
    count: dict[str, int] = {}       # written word -> entries so far (NLTK) / last alternate (CMU)
    out: dict[str, list[tuple[str, ...]]] = {}
    for lineno, line in enumerate(lines, 1):
        if line.startswith(";;;"):
            continue
        fields = line.split()
        if "#" in line:
            for i, f in enumerate(fields[1:], 1):
                if f.startswith("#"):
                    fields = fields[:i]
                    break
        if not fields:
            continue
        m = _CONTROL.search(line)
        if m is not None:
            raise CorpusFormatError(f"control character U+{ord(m.group()):04X} in line {line!r}",
                                    source, lineno)
        word = fields[0]
        is_nltk = len(fields) > 1 and _COUNTER.fullmatch(fields[1]) is not None
        if nltk is None:
            nltk = is_nltk
        elif is_nltk != nltk:
            layout = "'WORD N PHONEMES' (NLTK)" if nltk else "'WORD PHONEMES' / 'WORD(k) PHONEMES' (CMU)"
            raise CorpusFormatError(f"line in the other layout: the file's first entry is "
                                    f"{layout}: {line!r}", source, lineno)
        if nltk:
            seen = count.get(word, 0)
            if fields[1] != str(seen + 1):
                raise CorpusFormatError(
                    f"pronunciation number {fields[1]!r} of {word!r} out of order (expected "
                    f"'{seen + 1}': {seen} earlier entries): {line!r}", source, lineno)
            count[word] = seen + 1
            phones = fields[2:]
        else:
            alt = _ALTERNATE.fullmatch(word)
            k = 0
            if alt is not None:
                word, k = alt.group(1), int(alt.group(2))
            last = count.get(word)
            if alt is not None and (alt.group(2) != str(k) or k < 1):
                what = "alternate number not a positive integer without leading zeros"
            elif last is None and k != 0:
                what = "first entry of the word has an alternate number"
            elif last is not None and k <= last:
                what = f"alternate number not above the previous entry's ({'none' if last == 0 else last})"
            else:
                what = None
            if what is not None:
                raise CorpusFormatError(f"{what}: {fields[0]!r} in line {line!r}", source, lineno)
            count[word] = k
            phones = fields[1:]
        if not phones:
            raise CorpusFormatError(f"no pronunciation for {word!r}: {line!r}", source, lineno)
        pron = []
        for p in phones:
            pm = _PHONE.fullmatch(p)
            if pm is None or pm.group(1) not in _PHONEMES or (pm.group(2) and pm.group(1) not in VOWELS):
                raise CorpusFormatError(
                    f"phoneme {p!r} of {word!r} is not an ARPAbet phoneme (one of the 39; a vowel "
                    f"with an optional stress digit 0, 1 or 2, a consonant without): {line!r}",
                    source, lineno)
            pron.append(p if keep_stress else pm.group(1))
        key = word.lower() if lowercase else word
        prons = out.setdefault(key, [])
        t = tuple(pron)
        if t not in prons:
            prons.append(t)
    return out
