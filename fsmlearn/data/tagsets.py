"""Part-of-speech tag sets: the 45 Penn Treebank tags, the reduced 17-tag set, tag dictionaries.

This module is the single source of truth for the tag sets.  The pynini
grammar ``grammars/tagset17.py`` builds its tag-mapping transducer from
:data:`TAG17_OF` below, so the transducer and the dictionary cannot drift
apart.

The reduced set is the 17-tag set of Smith and Eisner (2005), "Contrastive
estimation: training log-linear models on unlabeled data", ACL, section 6
(the coarse tag set of their unsupervised tagging experiments).  The mapping
from Penn tags is

==========  ===========================
reduced      Penn tags
==========  ===========================
ADJ          CD JJ JJR JJS PRP$
ADV          RB RBR RBS
CONJ         CC
DET          DT PDT
ENDPUNC      .
INPUNC       , : LS SYM UH
LPUNC        `` -LRB-
N            EX FW NN NNP NNPS NNS PRP
POS          POS
PREP         IN
PRT          RP
RPUNC        '' -RRB-
TO           TO
V            MD VB VBD VBP VBZ
VBG          VBG
VBN          VBN
W            WDT WP WP$ WRB
==========  ===========================

Choices for tags outside that list (each is in :data:`TAG17_OF`):

- ``$`` and ``#`` -> ``N``.  In the Treebank they head the noun phrase
  ("$ 1.5 billion" is "1.5 billion dollars"), and ``%``, the same kind of
  unit symbol, is tagged ``NN`` and so already maps to ``N``.  Mapping them
  to ``INPUNC`` would put a noun head among the punctuation.
- ``(`` and ``)``, the older spelling of ``-LRB-`` / ``-RRB-`` used by the
  Treebank sample's tagged files, CoNLL-2000 and MASC -> ``LPUNC`` /
  ``RPUNC``, like the tags they spell.  (The corpus readers in
  :mod:`fsmlearn.data.readers` already rewrite them to ``-LRB-`` / ``-RRB-``.)
- UD English XPOS tags that are not Penn tags: ``HYPH`` (hyphen) and ``NFP``
  (superfluous punctuation) -> ``INPUNC``; ``ADD`` (e-mail, URL) -> ``N``;
  ``AFX`` (a separated prefix such as "pre") -> ``ADJ`` (it modifies the
  following noun or adjective); ``GW`` (the non-final part of a word split in
  the text) and ``XX`` (unknown) -> ``N``, the most frequent class.
- Compound tags ``A|B`` (the Treebank's "alternate tags in cases of
  uncertainty", e.g. ``VBG|NN``): :func:`to_tag17` maps the first
  alternative; the readers also keep only the first one.
- ``-NONE-`` (empty elements, traces) has no image: traces are not words, and
  the readers drop them.  Every other tag is an error
  (:class:`~fsmlearn.errors.TagError`, a ``KeyError``).

Open-class tags (the tags a word the tag dictionary does not cover may take):

- Penn: the noun, non-modal verb, adjective, non-wh adverb and cardinal
  number tags, :data:`PENN_OPEN_CLASS` (17 tags).  ``FW``, ``UH``, ``SYM``
  and ``LS`` are not included: they are rare in newswire and would only add
  ambiguity.
- 17-tag set: the images of those, :data:`TAG17_OPEN_CLASS` =
  ``ADJ ADV N V VBG VBN``.

Public names: PENN_TAGS, TAG17_TAGS, TAG17_OF, PENN_OPEN_CLASS,
TAG17_OPEN_CLASS, TAGSETS, tagset_tags, open_class_tags, to_tag17,
map_tags, input_tags, tag_mapper, TagDictionary, tag_dictionary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ..errors import ArgumentError, DatasetError, TagError
from .datasets import iter_wsj_tagged

__all__ = ["PENN_TAGS", "TAG17_TAGS", "TAG17_OF", "PENN_OPEN_CLASS", "TAG17_OPEN_CLASS",
           "TAGSETS", "tagset_tags", "open_class_tags", "to_tag17", "map_tags",
           "input_tags", "tag_mapper", "TagDictionary", "tag_dictionary"]

#: The 45 Penn Treebank part-of-speech tags (brackets spelled ``-LRB-``/``-RRB-``).
PENN_TAGS: tuple[str, ...] = (
    "CC", "CD", "DT", "EX", "FW", "IN", "JJ", "JJR", "JJS", "LS", "MD", "NN", "NNS",
    "NNP", "NNPS", "PDT", "POS", "PRP", "PRP$", "RB", "RBR", "RBS", "RP", "SYM", "TO",
    "UH", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "WDT", "WP", "WP$", "WRB",
    "#", "$", ".", ",", ":", "``", "''", "-LRB-", "-RRB-")

#: The 17 reduced tags of Smith and Eisner (2005), sorted.
TAG17_TAGS: tuple[str, ...] = (
    "ADJ", "ADV", "CONJ", "DET", "ENDPUNC", "INPUNC", "LPUNC", "N", "POS", "PREP",
    "PRT", "RPUNC", "TO", "V", "VBG", "VBN", "W")

_GROUPS = {
    "ADJ": "CD JJ JJR JJS PRP$",
    "ADV": "RB RBR RBS",
    "CONJ": "CC",
    "DET": "DT PDT",
    "ENDPUNC": ".",
    "INPUNC": ", : LS SYM UH",
    "LPUNC": "`` -LRB-",
    "N": "EX FW NN NNP NNPS NNS PRP",
    "POS": "POS",
    "PREP": "IN",
    "PRT": "RP",
    "RPUNC": "'' -RRB-",
    "TO": "TO",
    "V": "MD VB VBD VBP VBZ",
    "VBG": "VBG",
    "VBN": "VBN",
    "W": "WDT WP WP$ WRB",
}
# Documented choices for tags outside Smith and Eisner's list (see the module docstring).
_EXTRA = {
    "$": "N", "#": "N",                       # noun-phrase heads, like % (tagged NN)
    "(": "LPUNC", ")": "RPUNC",               # older spelling of -LRB- / -RRB-
    "HYPH": "INPUNC", "NFP": "INPUNC",        # UD English XPOS extensions
    "ADD": "N", "AFX": "ADJ", "GW": "N", "XX": "N",
}

#: Penn tag (and the variants listed in the module docstring) -> reduced tag.
TAG17_OF: dict[str, str] = {penn: red for red, tags in _GROUPS.items() for penn in tags.split()}
TAG17_OF.update(_EXTRA)

#: Open-class Penn tags: nouns, non-modal verbs, adjectives, non-wh adverbs, cardinals.
PENN_OPEN_CLASS: frozenset[str] = frozenset(
    "CD JJ JJR JJS NN NNS NNP NNPS RB RBR RBS VB VBD VBG VBN VBP VBZ".split())

#: Open-class reduced tags: the images of :data:`PENN_OPEN_CLASS`.
TAG17_OPEN_CLASS: frozenset[str] = frozenset({"ADJ", "ADV", "N", "V", "VBG", "VBN"})

#: Names of the tag sets accepted by :func:`tag_dictionary` and friends.
TAGSETS: tuple[str, ...] = ("penn45", "tag17")


def _check_tagset(tagset: str) -> str:
    if tagset not in TAGSETS:
        raise DatasetError(f"unknown tag set {tagset!r}; expected one of {', '.join(TAGSETS)}")
    return tagset


def tagset_tags(tagset: str = "penn45") -> tuple[str, ...]:
    """The tags of a tag set.

    Args:
        tagset: ``"penn45"`` or ``"tag17"``.

    Returns:
        The 45 Penn tags or the 17 reduced tags, as a tuple of str.

    Raises:
        DatasetError: unknown tag set (a ``ValueError``).
    """
    return PENN_TAGS if _check_tagset(tagset) == "penn45" else TAG17_TAGS


def open_class_tags(tagset: str = "penn45") -> frozenset[str]:
    """The open-class tags of a tag set (see the module docstring for the definition).

    Args:
        tagset: ``"penn45"`` or ``"tag17"``.

    Returns:
        A frozenset of tag strings.

    Raises:
        DatasetError: unknown tag set (a ``ValueError``).
    """
    return PENN_OPEN_CLASS if _check_tagset(tagset) == "penn45" else TAG17_OPEN_CLASS


def to_tag17(tag: str) -> str:
    """The reduced tag of one Penn tag.

    A compound tag ``A|B`` maps as its first alternative ``A``.

    Args:
        tag: a Penn tag, or one of the variants listed in the module docstring.

    Returns:
        One of :data:`TAG17_TAGS`.

    Raises:
        TagError: the tag (e.g. ``-NONE-``) has no reduced tag; the message quotes it.
    """
    try:
        return TAG17_OF[tag]
    except KeyError:
        first = tag.split("|", 1)[0]
        if first != tag and first in TAG17_OF:
            return TAG17_OF[first]
        raise TagError(f"Penn tag {tag!r} has no tag in the 17-tag set") from None


def input_tags(tagset: str) -> frozenset[str]:
    """The tags a tagged file may hold to train a model of ``tagset``.

    Args:
        tagset: ``"penn45"`` (the 45 Penn tags) or ``"tag17"`` (the 17 reduced
            tags themselves and every tag :func:`to_tag17` maps: the Penn tags,
            ``(``, ``)`` and the UD English XPOS extensions).

    Returns:
        A frozenset of tag strings.

    Raises:
        DatasetError: unknown tag set (a ``ValueError``).
    """
    if _check_tagset(tagset) == "penn45":
        return frozenset(PENN_TAGS)
    return frozenset(TAG17_TAGS) | frozenset(TAG17_OF)


def _into_tag17(tag: str) -> str:
    return tag if tag in _TAG17_SET else to_tag17(tag)


_TAG17_SET = frozenset(TAG17_TAGS)


def tag_mapper(tagset: str):
    """The function that maps a file's tag (one of :func:`input_tags`) into ``tagset``.

    Args:
        tagset: ``"penn45"`` or ``"tag17"``.

    Returns:
        None for ``penn45`` (tags are kept); for ``tag17`` a function that keeps a
        reduced tag and maps any other with :func:`to_tag17`.

    Raises:
        DatasetError: unknown tag set (a ``ValueError``).
    """
    return None if _check_tagset(tagset) == "penn45" else _into_tag17


def map_tags(sentence: Iterable[tuple[str, str]], tagset: str = "tag17") -> list[tuple[str, str]]:
    """Map the tags of one tagged sentence into a tag set.

    Args:
        sentence: (word, Penn tag) pairs.
        tagset: ``"tag17"`` maps with :func:`to_tag17`; ``"penn45"`` returns the
            pairs unchanged.

    Returns:
        A list of (word, tag) pairs.

    Raises:
        DatasetError: unknown tag set (a ``ValueError``).
        TagError: a tag with no reduced tag (a ``KeyError``).
    """
    if _check_tagset(tagset) == "penn45":
        return list(sentence)
    return [(w, to_tag17(t)) for w, t in sentence]


class TagDictionary(dict):
    """A tag dictionary: word -> frozenset of allowed tags, open class for the rest.

    It is a plain ``dict`` holding the words the rule covers, with one
    addition: indexing a word that is not a key returns :attr:`open_class`
    (``d[word]`` never raises), while ``word in d``, ``len(d)`` and
    ``d.get(word)`` see only the covered words.

    Attributes:
        tagset: ``"penn45"`` or ``"tag17"``.
        open_class: the frozenset of open-class tags of that tag set.
        min_count: the count a word needed to be covered.
    """

    def __init__(self, entries, tagset: str, min_count: int):
        super().__init__(entries)
        self.tagset = tagset
        self.open_class = open_class_tags(tagset)
        self.min_count = min_count

    def __missing__(self, word):
        return self.open_class

    def allowed(self, word: str) -> frozenset[str]:
        """The tags ``word`` may take (the same as ``self[word]``)."""
        return self[word]


def tag_dictionary(tagset: str = "penn45", min_count: int = 5, sentences=None,
                   data_dir=None) -> TagDictionary:
    """The tag dictionary of the shared corpora's README.

    A word's allowed tags are the tags it was seen with anywhere in the WSJ data
    (WSJ-small and WSJ-train), if it was seen at least ``min_count`` times;
    other words may take any open-class tag (:func:`open_class_tags`).  Words
    are compared case-sensitively.  With ``tagset="tag17"`` each seen Penn tag
    is mapped by :func:`to_tag17` before the sets are formed.

    Args:
        tagset: ``"penn45"`` or ``"tag17"``.
        min_count: how often a word must occur to get its own entry (>= 1).
        sentences: an iterable of sentences of (word, Penn tag) pairs to build
            the dictionary from instead of the WSJ data (for tests and other
            corpora).
        data_dir: the shared data folder (see
            :func:`fsmlearn.data.locate.data_dir`); used when ``sentences`` is None.

    Returns:
        A :class:`TagDictionary` mapping each covered word (str) to a frozenset of tags.

    Raises:
        DatasetError: unknown tag set (a ``ValueError``).
        ArgumentError: ``min_count`` is not an integer >= 1 (a ``ValueError``).
        TagError: a tag with no reduced tag when ``tagset="tag17"`` (a ``KeyError``).
        CorpusFormatError: a corpus file is malformed.
    """
    _check_tagset(tagset)
    try:
        ok = not isinstance(min_count, bool) and int(min_count) == min_count and min_count >= 1
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ArgumentError(f"min_count must be a positive integer, got {min_count!r}")
    if sentences is None:
        sentences = iter_wsj_tagged(data_dir=data_dir)
    counts: Counter = Counter()
    seen: dict[str, set] = {}
    for sent in sentences:
        for word, tag in sent:
            counts[word] += 1
            tags = seen.get(word)
            if tags is None:
                seen[word] = {tag}
            else:
                tags.add(tag)
    entries = {}
    for word, n in counts.items():
        if n >= min_count:
            tags = seen[word]
            if tagset == "tag17":
                tags = {to_tag17(t) for t in tags}
            entries[word] = frozenset(tags)
    return TagDictionary(entries, tagset, int(min_count))
