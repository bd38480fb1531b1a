"""fsmlearn: learning weighted finite-state machines.

Models compile themselves into weighted FSMs (:class:`Machine`) and one set of
semiring-generic algorithms runs over all of them.

This module is the public facade: it re-exports the machine and the engine.
The packages are layered, each importing only from the layers before it
(``../shared/DESIGN.md``; ``tests/layers_test.py`` checks it): 1 ``errors``
and ``fsm/`` (the machine), with ``data/`` (corpora, tag sets, splits) beside
them; 2 ``semiring/``; 3 ``algo/`` (the engine); 4 the models, ``lm/`` then
``tag/``; 5 ``experiments/``; 6 ``cli/``.
"""

from .algo import (arc_posteriors, backward, expectation, forward, forward_backward, logz_gradient,
                   phi_expand, shortest_distance, total_weight)
from .errors import FsmError
from .fsm import DEFAULT_OPENFST_PHI, EPSILON, PHI, Machine, SymbolTable

__version__ = "0.1.0"
__all__ = ["Machine", "SymbolTable", "EPSILON", "PHI", "DEFAULT_OPENFST_PHI", "FsmError",
           "shortest_distance", "forward", "backward", "total_weight", "forward_backward",
           "arc_posteriors", "logz_gradient", "expectation", "phi_expand"]
