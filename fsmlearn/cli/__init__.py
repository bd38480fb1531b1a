"""Layer 6: the command line, ``fsmlearn <command> ...`` (see ``fsmlearn --help``).

Argument parsing and calls into the models (layer 4) and experiments
(layer 5), nothing else: :mod:`.main` (the command and its error handling:
every :class:`~fsmlearn.errors.FsmError` becomes one line and exit code 2),
:mod:`.lm` (``fsmlearn lm``), :mod:`.tag` (``fsmlearn tag``), :mod:`.rcm`
(``fsmlearn rcm``), :mod:`.common`
(progress lines).
"""
