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
import copy
import sys

from ..errors import FsmError


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, adding ``(default: X)`` to an option's help that does not say
    its default already (nothing for flags and options without a default)."""

    def _get_help_string(self, action):
        text = action.help or ""
        d = action.default
        if (not action.option_strings or d is None or d is False or d is argparse.SUPPRESS
                or isinstance(action, (argparse._StoreConstAction, argparse._CountAction))
                or "default" in text):
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"

    def _format_action(self, action):
        if not action.help and self._get_help_string(action):     # argparse shows no line for no help
            action = copy.copy(action)
            action.help = self._get_help_string(action)
        return super()._format_action(action)


class Parser(argparse.ArgumentParser):
    """argparse's parser with :class:`HelpFormatter`, and usage errors in one line
    (``fsmlearn: error: lm count: argument --order: ...``, exit 2) like every other error;
    the subcommands' parsers are of this class too."""

    def __init__(self, *args, formatter_class=HelpFormatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        """A command's parser (one without subcommands) takes its options and its file arguments
        in any order (``trf score MODEL --base e A.txt B.txt``): argparse's intermixed parsing,
        else a list of files after an option would be refused."""
        has_sub = any(isinstance(a, argparse._SubParsersAction) for a in self._actions)
        if has_sub or getattr(self, "_intermixing", False):
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False

    def error(self, message):
        sub = self.prog.partition(" ")[2]
        where = f"{sub}: " if sub else ""
        self.exit(2, f"fsmlearn: error: {where}{message} (see {self.prog} --help)\n")


def _demo(args) -> int:
    from ..experiments.demo import run_demo
    run_demo(out=sys.stdout, cyclic=not args.acyclic)
    return 0


#: the command groups and the modules of this package that build their parsers
_GROUPS = {"lm": "lm", "tag": "tag", "rcms": "rcm", "trf": "trf", "mrf": "mrf"}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``fsmlearn`` parser; ``only``: build just that command group's subcommands (what
    ``main`` does when the command line names one, so that a command does not import what
    the other groups' options need, such as the dataset list or an experiment's defaults)."""
    # the version lives in the facade, fsmlearn/__init__.py, which Python loaded before this
    # package; it is read there, not imported (a layer imports the packages it needs, not the facade)
    import importlib
    version = sys.modules["fsmlearn"].__version__
    p = Parser(prog="fsmlearn", description="Learning weighted finite-state machines.")
    p.add_argument("--version", action="version", version=f"fsmlearn {version}",
                   help="print fsmlearn's version and exit")
    sub = p.add_subparsers(dest="command", metavar="command")
    if only is None or only == "demo":
        d = sub.add_parser("demo", help="compose a machine in pynini and run forward-backward on it")
        d.add_argument("--acyclic", action="store_true", help="use an acyclic grammar instead of a cyclic one")
        d.set_defaults(func=_demo)
    for name, module in _GROUPS.items():
        if only is None or only == name:
            importlib.import_module(f"{__package__}.{module}").add_parser(sub)
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    group = argv[0] if argv and (argv[0] in _GROUPS or argv[0] == "demo") else None
    parser = build_parser(group)
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
    except KeyboardInterrupt:
        # Ctrl-C: one line, the shell's code for SIGINT; files are written atomically, so
        # nothing half-written is left
        print("fsmlearn: interrupted", file=sys.stderr)
        return 130
    except OSError as e:
        # the last resort: readers name their files in FsmErrors; anything they missed still
        # gets one line (with the file when the error has one), not a traceback
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"fsmlearn: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
