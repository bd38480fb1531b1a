"""The part of a tag dictionary that an HMM tagger keeps: its unknown words.

A model trained by EM under a tag dictionary (Merialdo 1994) tags words
outside its vocabulary with the dictionary's tags for them, or with the
open-class tags.  :class:`OovTags` holds just that (so a saved tagger needs no
corpus to tag).

Public names: OovTags.
"""

from __future__ import annotations

import functools

import numpy as np

from ..data.tagsets import tag_dictionary
from ..errors import ModelError

__all__ = ["OovTags"]


class OovTags:
    """The part of a tag dictionary that concerns words outside a model's vocabulary.

    Attributes:
        name: a label, e.g. ``"tag17, min_count 5"``.
        words: the covered words outside the vocabulary.
        mask: bool [len(words), T] their allowed tags.
        open_mask: bool [T] the tags of every other unknown word (open class).
    """

    __slots__ = ("name", "words", "mask", "open_mask", "_index")

    def __init__(self, name: str, words, mask, open_mask):
        self.name = str(name)
        self.words = tuple(words)
        self.open_mask = np.ascontiguousarray(open_mask, dtype=bool)
        # [words, T]; no covered word outside the vocabulary is an empty [0, T] mask
        self.mask = np.ascontiguousarray(mask, dtype=bool).reshape(len(self.words), self.open_mask.shape[0])
        if self.mask.shape[1] != self.open_mask.shape[0]:
            raise ModelError(f"tag dictionary masks have {self.mask.shape[1]} and {self.open_mask.shape[0]} tags")
        if not self.open_mask.any() or (self.mask.size and not self.mask.any(axis=1).all()):
            raise ModelError("the tag dictionary allows some unknown word no tag")
        self._index = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def make(cls, tagdict, hmm) -> "OovTags":
        """From an :class:`OovTags`, a TagDictionary or a ``(tagset, min_count)`` pair.

        Args:
            tagdict: the dictionary.
            hmm: the :class:`~fsmlearn.tag.hmm.HMM` it is for (its tags and vocabulary).

        Raises:
            ModelError: a dictionary of another tag count, or of another type.
        """
        if isinstance(tagdict, OovTags):
            if tagdict.open_mask.shape[0] != hmm.T:
                raise ModelError(f"the tag dictionary has {tagdict.open_mask.shape[0]} tags; the model {hmm.T}")
            return tagdict
        if isinstance(tagdict, (tuple, list)):
            if len(tagdict) != 2:
                raise ModelError(f"tagdict must be (tagset, min_count), got {tagdict!r}")
            tagdict = _tag_dictionary(str(tagdict[0]), int(tagdict[1]))
        if not hasattr(tagdict, "open_class"):
            raise ModelError(f"tagdict must be a TagDictionary, (tagset, min_count) or OovTags, "
                             f"got {type(tagdict).__name__}")
        ti = hmm.tag_index
        open_mask = np.zeros(hmm.T, bool)
        for t in tagdict.open_class:
            if t in ti:
                open_mask[ti[t]] = True
        vocab = hmm.word_index
        words = [w for w in dict.keys(tagdict) if w not in vocab]
        mask = np.zeros((len(words), hmm.T), bool)
        for j, w in enumerate(words):
            for t in tagdict[w]:
                if t in ti:
                    mask[j, ti[t]] = True
        name = f"{getattr(tagdict, 'tagset', '?')}, min_count {getattr(tagdict, 'min_count', '?')}"
        return cls(name, words, mask, open_mask)

    def masks(self, words) -> np.ndarray:
        """bool [len(words), T]: the allowed tags of each (unknown) word."""
        out = np.broadcast_to(self.open_mask, (len(words), self.open_mask.shape[0])).copy()
        for j, w in enumerate(words):
            i = self._index.get(w)
            if i is not None:
                out[j] = self.mask[i]
        return out


@functools.lru_cache(maxsize=4)
def _tag_dictionary(tagset: str, min_count: int):
    return tag_dictionary(tagset, min_count)
