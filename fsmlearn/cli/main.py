"""The ``fsmlearn`` command.

Subcommands:
    demo   build a weighted machine with pynini, run forward-backward on it and
           print its total weight, state values and arc posteriors.
    lm     backoff n-gram language models (count, web1t, estimate, compile,
           score, ppl, sample, check).
    tag    HMM part-of-speech taggers (train, em, eval, tag).
    rcms   reified context models (decipher, speech, words).
    trf    trans-dimensional random field LMs (morph, lm, score).
    mrf    MRF language models and tagger by lifted inference (synthetic, lm, tag).
"""

from __future__ import annotations

import argparse
import sys

from ..errors import FsmError


def _demo(args) -> int:
    from ..experiments.demo import run_demo
    run_demo(out=sys.stdout, cyclic=not args.acyclic)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fsmlearn", description="Learning weighted finite-state machines.")
    sub = p.add_subparsers(dest="command", metavar="command")
    d = sub.add_parser("demo", help="compose a machine in pynini and run forward-backward on it")
    d.add_argument("--acyclic", action="store_true", help="use an acyclic grammar instead of a cyclic one")
    d.set_defaults(func=_demo)
    from . import lm
    lm.add_parser(sub)
    from . import tag
    tag.add_parser(sub)
    from . import rcm
    rcm.add_parser(sub)
    from . import trf
    trf.add_parser(sub)
    from . import mrf
    mrf.add_parser(sub)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except FsmError as e:
        print(f"fsmlearn: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
