"""The exception hierarchy of fsmlearn.

Every error that fsmlearn raises on bad input or on a failed computation is a
subclass of :class:`FsmError`.  Subclasses also derive from the matching
built-in exception (``ValueError``, ``ArithmeticError``, ``OSError``) so that
callers who do not know fsmlearn can still catch them.

Public names: FsmError, MachineError, NoAcceptingPathError, NotAMachineError,
SymbolTableError, FileFormatError,
NpzFormatError, OpenFstFormatError, SemiringError, DivergenceError,
NotConvergedError, ArpaFormatError (ArpaCountError, ArpaSectionError,
ArpaValueError, ArpaDuplicateError, ArpaContextError), CorpusFormatError, CorpusNotFoundError,
DatasetError, TagError, ArgumentError, ModelError,
ModelFormatError, ToolNotFoundError, ToolFailedError, ToolUsageError.
"""

from __future__ import annotations


class FsmError(Exception):
    """Base class of every fsmlearn error."""


class MachineError(FsmError, ValueError):
    """A machine is malformed: a state or arc out of range, a bad weight, ...

    The message names the offending state or arc and value.
    """


class NoAcceptingPathError(MachineError):
    """The machine has no accepting path of nonzero weight (its total weight Z is 0), so a
    quantity defined under its path distribution (an expectation, an entropy, posteriors, a
    best or a random path) does not exist."""


class NotAMachineError(FsmError, TypeError):
    """An engine function was given something that is not a :class:`fsmlearn.Machine` (a
    ``pynini.Fst``, say: convert it with ``Machine.from_pynini``); the message names the
    function and the type."""


class SymbolTableError(FsmError, ValueError):
    """Symbol tables are missing, malformed or do not match."""


class SemiringError(FsmError, ValueError):
    """An unknown semiring, or an operation the semiring does not support."""


class FileFormatError(FsmError, ValueError):
    """A file could not be parsed.

    Attributes:
        path: the file (a string, or ``None`` for in-memory data).
        line: the 1-based line number for text files, else ``None``.
    """

    def __init__(self, message: str, path=None, line=None):
        self.path = None if path is None else str(path)
        self.line = line
        self.reason = message
        if self.path is not None and line is not None:
            full = f"{self.path}:{line}: {message}"
        elif self.path is not None:
            full = f"{self.path}: {message}"
        else:
            full = message
        super().__init__(full)


class NpzFormatError(FileFormatError):
    """A ``.npz`` machine file is corrupt or is not a fsmlearn machine."""


class OpenFstFormatError(FileFormatError):
    """OpenFst binary data could not be parsed."""


class ArpaFormatError(FileFormatError):
    """An ARPA language-model file is malformed (carries file and line).

    The subclasses name the kinds of problem a reader of the format must
    tell apart (as KenLM's reader does); a line that does not parse is an
    ``ArpaFormatError`` itself.
    """


class ArpaCountError(ArpaFormatError):
    """A header count disagrees with its section, or is more than the file can hold."""


class ArpaSectionError(ArpaFormatError):
    """A section is missing, out of order, or the file ends before ``\\end\\``."""


class ArpaValueError(ArpaFormatError):
    """A number that is not one, a log10 probability that is not finite or above 0,
    or a backoff weight that is not finite."""


class ArpaDuplicateError(ArpaFormatError):
    """An n-gram (or a word among the 1-grams) listed twice."""


class ArpaContextError(ArpaFormatError):
    """An n-gram whose context (its first k - 1 words) is not listed, or a model
    without ``<s>``, ``</s>`` or ``<unk>`` among its 1-grams."""


class CorpusFormatError(FileFormatError):
    """A corpus file is malformed (carries file and line)."""


class CorpusNotFoundError(FsmError, FileNotFoundError):
    """A corpus file, or a member of a corpus archive, is not where it was looked for.

    Attributes:
        path: the file looked for (a string; for a member, ``<archive>/<member>``).
    """

    def __init__(self, message: str, path):
        self.path = str(path)
        super().__init__(message)


class DatasetError(FsmError, ValueError):
    """An unknown corpus, dataset, split or tag-set name, or a corpus that does not
    make the dataset asked for (the message names the value and the choices)."""


class TagError(FsmError, KeyError):
    """A tag has no image in the tag set it is mapped into (the message quotes it)."""


class ArgumentError(FsmError, ValueError):
    """A function was called with a bad or conflicting argument (the value is in the
    message)."""


class ModelError(FsmError, ValueError):
    """A model's parameters are malformed: wrong shapes, NaN, rows that do not
    sum to one, ... (the message names the array and the value)."""


class ModelFormatError(FileFormatError):
    """A saved model (an HMM tagger, ...) is corrupt, of another format or version,
    or holds arrays of the wrong shape or values (the message names the array)."""


class DivergenceError(FsmError, ArithmeticError):
    """The weights of a cyclic machine diverge: the total mass is unbounded."""


class NotConvergedError(FsmError, ArithmeticError):
    """An iterative solver did not reach its tolerance within its sweep limit."""


class ToolNotFoundError(FsmError, OSError):
    """An external tool (KenLM's lmplz, build_binary, query) was not found."""


class ToolFailedError(FsmError, RuntimeError):
    """An external tool ran but failed (non-zero exit status or a signal).

    Attributes:
        tool: the program's name, e.g. ``"lmplz"``.
        command: the full command line (list of str).
        returncode: the exit status (negative: killed by that signal).
        stderr_tail: the last lines the tool wrote to stderr.
    """

    def __init__(self, tool: str, command: list[str], returncode: int, stderr_tail: str):
        self.tool = tool
        self.command = list(command)
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        how = (f"was killed by signal {-returncode}" if returncode < 0
               else f"exited with status {returncode}")
        msg = f"{tool} {how}; command: {' '.join(self.command)}"
        if stderr_tail:
            msg += f"\n--- last lines of {tool}'s stderr ---\n{stderr_tail}"
        super().__init__(msg)


class ToolUsageError(FsmError, ValueError):
    """A tool wrapper was called with bad arguments (the value is in the message)."""
