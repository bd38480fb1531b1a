"""Layer 1 (data/): the raw-text tokeniser and sentence splitter."""

from __future__ import annotations

import pytest

from fsmlearn.data import tokenise as C


@pytest.mark.parametrize("text,tokens", [
    ("Mr. O'Connor's dog didn't bark.", ["Mr.", "O'Connor", "'s", "dog", "did", "n't", "bark", "."]),
    ("I can't, won't -- and they're 3.5% of $30,000...",
     ["I", "ca", "n't", ",", "wo", "n't", "--", "and", "they", "'re", "3.5", "%", "of", "$",
      "30,000", "..."]),
    ("the U.S. and e.g. J. Smith at 10:30", ["the", "U.S.", "and", "e.g.", "J.", "Smith", "at", "10:30"]),
    ("see http://x.org/a, or mail a.b@c.com.", ["see", "http://x.org/a", ",", "or", "mail",
                                                "a.b@c.com", "."]),
    ("I\u2019m DON'T state-owned (1/2)", ["I", "\u2019m", "DO", "N'T", "state-owned", "(", "1/2", ")"]),
    ("", []),
])
def test_tokenize(text, tokens):
    assert C.tokenize(text) == tokens


def test_split_sentences():
    toks = C.tokenize('He left. "Why?" she asked. It was 5 p.m. today... and then 3 more! OK')
    assert C.split_sentences(toks) == [
        ["He", "left", "."], ['"', "Why", "?", '"', "she", "asked", "."],
        ["It", "was", "5", "p.m.", "today", "...", "and", "then", "3", "more", "!"], ["OK"]]
    assert C.split_sentences([]) == []
    assert C.split_sentences(". . .".split()) == [[".", ".", "."]]
