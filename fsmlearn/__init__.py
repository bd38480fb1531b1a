"""fsmlearn: learning weighted finite-state machines.

Models compile themselves into weighted FSMs (:class:`Machine`) and one set of
semiring-generic algorithms runs over all of them.

This module is the public facade: it re-exports the machine and the engine
(the functions of :mod:`fsmlearn.algo`, which has the rest).  Every engine
function takes a :class:`Machine` (a ``pynini.Fst`` gets a ``TypeError``:
convert it with ``Machine.from_pynini``).  Names say their sign: ``cost`` is
-ln, ``log_partition`` is ln Z.

The machine:
    Machine, MachineBatch, ChainBatch, SymbolTable, EPSILON, PHI, DEFAULT_OPENFST_PHI.
Sums over paths (negative logs in the log and tropical semirings):
    shortest_distance, forward, backward, total_weight.
Posteriors and expectations:
    forward_backward (a ForwardBackward: ``log_partition`` ln Z, ``cost`` -ln Z,
    ``posteriors``), arc_posteriors, final_posteriors, log_partition_gradient,
    expectation (values on arcs and on final weights), entropy (of the paths,
    final weights included).
Paths:
    best_path (a Path), k_best_paths (the k cheapest of an acyclic machine),
    sample_paths (a Samples), label_strings (the symbols of either, through the
    symbol tables).
Operations on machines:
    compose, intersect (failure arcs on the right machine), trim, phi_expand.
Errors (all in :mod:`fsmlearn.errors`):
    FsmError, NoAcceptingPathError, NotAMachineError, SymbolTableError.

The models live in their packages, each with its main classes at the package:
:mod:`fsmlearn.lm` (``CompiledLM``, ``BackoffLM``), :mod:`fsmlearn.tag`
(``HMM``, ``HMM.load``), :mod:`fsmlearn.rcm` (``NGramRCM``, ``AlignRCM``),
:mod:`fsmlearn.trf` (``TRF``), :mod:`fsmlearn.mrf` (``MRFModel``, ``TaggerMRF``).

The packages are layered, each importing only from the layers before it
(``../shared/DESIGN.md``; ``tests/layers_test.py`` checks it): 1 ``errors``
and ``fsm/`` (the machine), with ``data/`` (corpora, tag sets, splits) beside
them; 2 ``semiring/``; 3 ``algo/`` (the engine); 4 the models, ``lm/``,
``tag/``, ``rcm/``, ``trf/``, ``mrf/``; 5 ``experiments/``; 6 ``cli/``.
"""

from ._threads import load_tbb

load_tbb()       # numba's fork-safe TBB layer loadable, before any parallel kernel runs

from ._lazy import lazy_exports  # noqa: E402
from .errors import FsmError, NoAcceptingPathError, NotAMachineError, SymbolTableError  # noqa: E402
from .fsm import DEFAULT_OPENFST_PHI, EPSILON, PHI, ChainBatch, Machine, MachineBatch, SymbolTable  # noqa: E402

__version__ = "0.1.0"

#: the engine's names, imported from :mod:`fsmlearn.algo` on first use (PEP 562): ``import
#: fsmlearn`` stays cheap for commands that need one part of the engine
_ENGINE = ("shortest_distance", "forward", "backward", "total_weight", "forward_backward", "ForwardBackward",
           "arc_posteriors", "final_posteriors", "log_partition_gradient", "expectation", "entropy",
           "best_path", "k_best_paths", "Path", "sample_paths", "Samples", "label_strings", "compose", "intersect",
           "trim", "phi_expand")
__all__ = ["Machine", "MachineBatch", "ChainBatch", "SymbolTable", "EPSILON", "PHI", "DEFAULT_OPENFST_PHI",
           "FsmError", "NoAcceptingPathError", "NotAMachineError", "SymbolTableError",
           "shortest_distance", "forward", "backward", "total_weight",
           "forward_backward", "ForwardBackward", "arc_posteriors", "final_posteriors",
           "log_partition_gradient", "expectation", "entropy",
           "best_path", "k_best_paths", "Path", "sample_paths", "Samples", "label_strings",
           "compose", "intersect", "trim", "phi_expand"]


_PACKAGES = ("algo", "semiring", "lm", "tag", "rcm", "trf", "mrf", "data", "experiments", "cli")

# the engine's names from fsmlearn.algo, and the packages after a bare ``import fsmlearn``,
# imported on first use (PEP 562)
__getattr__, __dir__ = lazy_exports(__name__, {name: "algo" for name in _ENGINE}, globals(), _PACKAGES)
