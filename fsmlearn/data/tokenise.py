"""The tokeniser and sentence splitter for raw text (one line at a time).

:func:`tokenize` applies a simple PTB-like regular expression to one line: URLs and e-mail addresses stay whole;
letter-dot abbreviations (``U.S.``, ``e.g.``), common titles and month
abbreviations (``Mr.``, ``Dr.``, ``Inc.``, ``Jan.``, ...) and single capital
initials followed by a capitalised word (``J. Smith``) keep their period;
numbers keep inner ``. , : /`` (``3.5``, ``30,000``, ``10:30``, ``1/2``);
words keep inner hyphens and apostrophes (``state-owned``, ``O'Connor``);
the clitics ``n't``, ``'s``, ``'re``, ``'ve``, ``'ll``, ``'d``, ``'m`` (any
case, straight or curly apostrophe) are split off as in the Treebank
(``don't`` -> ``do n't``, ``can't`` -> ``ca n't``, ``John's`` -> ``John 's``);
runs of ``.`` / ``!`` / ``?`` and ``--`` are one token; every other
punctuation character is a token of its own.  Quotes are kept as written
(not rewritten to `````/``''``).  :func:`split_sentences` ends a sentence
after a token made of ``.!?`` (plus any closing quotes or brackets after
it; a straight quote closes only an open quotation, by parity) when the
next token does not start with a lower-case letter and is not more of the
same punctuation.  Each line is its own paragraph: the readers
(:func:`fsmlearn.data.readers.iter_text`) split each line on its own, so
sentences never cross a line.

Public names: tokenize, split_sentences.
"""

from __future__ import annotations

import re

__all__ = ["tokenize", "split_sentences"]

_APOS = "'\u2019"
_ABBREV = ("Mr|Mrs|Ms|Messrs|Dr|Prof|Rev|Gen|Gov|Sen|Rep|Capt|Col|Lt|Sgt|St|Mt|Jr|Sr|"
           "Inc|Co|Corp|Ltd|Bros|vs|etc|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|No")
_TOKEN_RE = re.compile(rf"""
    (?:https?://|www\.)\S*[^\s.,;:!?'"()\[\]<>]            # URL (trailing punctuation split off)
  | [\w.+-]+@[\w-]+(?:\.[\w-]+)+                          # e-mail address
  | (?<!\w)(?:[^\W\d_]\.){{2,}}                            # U.S.  e.g.
  | (?<!\w)(?:{_ABBREV})\.                                 # Mr.  Inc.  Jan.
  | (?<!\w)[A-Z]\.(?=\s+[A-Z])                             # initial: J. Smith
  | \d+(?:[.,:/]\d+)+                                      # 3.5  30,000  10:30  1/2
  | \w+(?=[nN][{_APOS}][tT]\b)                             # do|n't
  | [nN][{_APOS}][tT]\b                                    # n't
  | [{_APOS}](?:[sS]|[rR][eE]|[vV][eE]|[lL][lL]|[dD]|[mM])\b   # 's 're 've 'll 'd 'm
  | \w+(?:-\w+|[{_APOS}](?!(?:[sS]|[rR][eE]|[vV][eE]|[lL][lL]|[dD]|[mM]|[tT])\b)\w+)*
  | [.!?]+ | -{{2,}}                                       # ...  ?!  --
  | \S                                                     # any other character
""", re.VERBOSE)
_TERMINAL = re.compile(r"[.!?]+")
_CLOSING = frozenset({"''", ")", "]", "}", "\u2019", "\u201d", "\u00bb"})


def tokenize(text: str) -> list[str]:
    """Tokenise one line of raw text with the PTB-like rules of the module docstring.

    Args:
        text: a str (no sentence splitting is done here).

    Returns:
        The tokens, a list of non-empty str without whitespace.

    Example:
        >>> tokenize("Mr. O'Connor's dog didn't bark -- at 10:30 in the U.S.!")
        ['Mr.', "O'Connor", "'s", 'dog', 'did', "n't", 'bark', '--', 'at', '10:30', 'in', 'the', 'U.S.', '!']
    """
    return _TOKEN_RE.findall(text)


def split_sentences(tokens: list[str]) -> list[list[str]]:
    """Split a tokenised paragraph into sentences (rule in the module docstring).

    A straight quote (``"`` or ``'``) after the final punctuation closes the
    sentence only if an odd number of the same quote came before it in the
    paragraph (it closes an open quotation); otherwise it opens the next one.

    Args:
        tokens: tokens of one line, as from :func:`tokenize`.

    Returns:
        A list of non-empty token lists (empty if ``tokens`` is empty).
    """
    out = []
    start = 0
    n = len(tokens)
    quotes = {'"': 0, "'": 0}
    i = 0
    while i < n:
        tok = tokens[i]
        if tok in quotes:
            quotes[tok] += 1
            i += 1
        elif _TERMINAL.fullmatch(tok):
            j = i + 1
            while j < n:
                t = tokens[j]
                if t in quotes:
                    if quotes[t] % 2 == 0:
                        break
                    quotes[t] += 1
                elif not (t in _CLOSING or _TERMINAL.fullmatch(t)):
                    break
                j += 1
            if j < n and not tokens[j][0].islower():
                out.append(tokens[start:j])
                start = j
            i = j
        else:
            i += 1
    if start < n:
        out.append(tokens[start:])
    return out

