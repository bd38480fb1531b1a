"""What the subcommand modules share: progress lines and number formatting.

Public names: Progress, percent.
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
