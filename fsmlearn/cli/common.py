"""What the subcommand modules share: progress lines and number formatting.

Public names: Progress, percent, add_quiet, ngram_sizes.
"""

from __future__ import annotations

import math
import sys
import time


class Progress:
    """Progress lines on stderr with elapsed time (nothing when ``quiet``)."""

    def __init__(self, quiet: bool = False):
        self.t0 = time.time()
        self.quiet = quiet

    def __call__(self, msg: str) -> None:
        if not self.quiet:
            print(f"[{time.time() - self.t0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def percent(x) -> str:
    """``x`` (a fraction) as a percentage with two decimals; ``n/a`` for None or NaN."""
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f}%"


def add_quiet(parser) -> None:
    """The ``-q/--quiet`` flag every long-running subcommand takes."""
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress messages")


def ngram_sizes(sizes) -> str:
    """``1-grams 1,234, 2-grams 5,678, ...``"""
    return ", ".join(f"{k + 1}-grams {n:,}" for k, n in enumerate(sizes))
