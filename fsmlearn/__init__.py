"""fsmlearn: learning weighted finite-state machines.

Models compile themselves into weighted FSMs (:class:`Machine`) and one set of
semiring-generic algorithms runs over all of them.
"""

from .algo import (arc_posteriors, backward, expectation, forward, forward_backward, logz_gradient,
                   phi_expand, shortest_distance, total_weight)
from .errors import FsmError
from .fsm import DEFAULT_OPENFST_PHI, EPSILON, PHI, Machine, SymbolTable

__version__ = "0.1.0"
__all__ = ["Machine", "SymbolTable", "EPSILON", "PHI", "DEFAULT_OPENFST_PHI", "FsmError",
           "shortest_distance", "forward", "backward", "total_weight", "forward_backward",
           "arc_posteriors", "logz_gradient", "expectation", "phi_expand"]
