"""Layer 3: generic algorithms over the semirings of layer 2.

Modules: shortest (forward, backward, total weight: the algebraic path
problem over a schedule), schedule (SCCs and sweep order), solve_linear (the
relaxation of linear semirings), bands (a large component's arcs in cache-sized bands for its sweeps), solve_phi (phi systems), solve_tropical
(Bellman-Ford), solve_acyclic (one pass), convergence (the one stopping
rule and the errors it ends in), product (the product of a phi machine with
a first-order tag factor, never materialised: forward, backward, posteriors,
expectations and their gradients, and the solver of its systems with
matrix-valued rows over a phi forest), phi (failure-arc machines as linear systems),
posteriors (forward-backward, arc posteriors, expectations, entropy, gradients),
paths (best path, k best paths, sampling, label strings of paths), compose (composition, intersection), score
(scoring label sequences without a product), chain (the dense-chain schedule:
forward-backward, total weight and Viterbi over a ChainBatch of label layers
with tied weights, no arc written), batch (the routines
over a MachineBatch), flow_arith (the arc flows' arithmetic for both targets).

Every public function checks that its machine is a :class:`~fsmlearn.fsm.Machine`
(:func:`~fsmlearn.algo._check.require_machine`: a ``pynini.Fst`` gets a ``TypeError``
saying to convert it with ``Machine.from_pynini``).

Public names: shortest_distance, forward, backward, total_weight, SolveInfo,
forward_backward, ForwardBackward, arc_posteriors, final_posteriors,
log_partition_gradient, expectation, entropy, phi_expand, phi_structure, linear_system,
relax_block_system, phi_pass_rows, TagProduct, tag_product, product_forward,
product_backward, product_total, product_posteriors, product_log_partition_gradient,
product_expectation, product_expectation_gradient, product_block_update, Path, Samples, best_path, k_best_paths, sample_paths,
label_strings, compose, intersect, score_sequences, ScoreResult, trim, ChainForwardBackward,
ChainPaths, chain_forward_backward, chain_best_paths, chain_total_weight, chain_expectation,
chain_entropy, BatchForwardBackward.

Every routine that a batch of machines needs takes a
:class:`~fsmlearn.fsm.MachineBatch` in place of a machine (``forward``,
``backward``, ``shortest_distance``, ``total_weight``, ``forward_backward``,
``arc_posteriors``, ``final_posteriors``, ``expectation``, ``entropy``,
``best_path``, ``sample_paths``) and answers for each machine in one call
(module batch); ``forward_backward``, ``total_weight``, ``best_path``, ``expectation`` and
``entropy`` also take a
:class:`~fsmlearn.fsm.ChainBatch` and solve it by the dense-chain schedule (module chain).
"""

from .._lazy import lazy_exports

#: public name -> the module of this package that defines it; each module is imported
#: on first use (PEP 562), so that a command that needs one kernel (``lm score`` needs
#: :mod:`.score`) does not import and register every kernel of the engine at start-up
_LAZY = {
    "shortest_distance": "shortest", "forward": "shortest", "backward": "shortest",
    "total_weight": "shortest", "SolveInfo": "shortest",
    "forward_backward": "posteriors", "ForwardBackward": "posteriors", "arc_posteriors": "posteriors",
    "final_posteriors": "posteriors", "log_partition_gradient": "posteriors", "expectation": "posteriors",
    "entropy": "posteriors",
    "phi_expand": "phi", "phi_structure": "phi", "linear_system": "phi",
    "relax_block_system": "product", "phi_pass_rows": "product",
    "TagProduct": "product", "tag_product": "product", "product_forward": "product", "product_backward": "product",
    "product_total": "product", "product_posteriors": "product", "product_log_partition_gradient": "product",
    "product_expectation": "product", "product_expectation_gradient": "product", "product_block_update": "product",
    "Path": "paths", "Samples": "paths", "best_path": "paths", "k_best_paths": "paths", "sample_paths": "paths",
    "label_strings": "paths",
    "score_sequences": "score", "ScoreResult": "score",
    "ChainForwardBackward": "chain", "ChainPaths": "chain", "chain_forward_backward": "chain",
    "chain_best_paths": "chain", "chain_total_weight": "chain", "chain_expectation": "chain",
    "chain_entropy": "chain",
    "BatchForwardBackward": "batch",
}

# compose, intersect and trim are imported now: the submodule ``compose`` shares the function's
# name, and importing the submodule (lm.compiled does) would otherwise bind the package's
# attribute ``compose`` to the module
from .compose import compose, intersect, trim  # noqa: E402

__all__ = list(_LAZY) + ["compose", "intersect", "trim"]
_MODULES = ("bands", "batch", "chain", "compose", "convergence", "cuda", "flow_arith", "paths", "phi", "posteriors", "product", "product_entry",
            "schedule", "score", "shortest", "solve_acyclic", "solve_linear", "solve_phi", "solve_tropical", "tied")


# imported on first use (PEP 562)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), _MODULES)
