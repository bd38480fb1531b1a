"""Layer 3: generic algorithms over the semirings of layer 2.

Modules: shortest (forward, backward, total weight: the algebraic path
problem over a schedule), schedule (SCCs and sweep order), solve_linear (the
relaxation of linear semirings), solve_phi (phi systems), solve_tropical
(Bellman-Ford), solve_acyclic (one pass), convergence (the one stopping
rule and the errors it ends in), relax_blocks (systems with matrix-valued
rows over a phi forest), phi (failure-arc machines as linear systems),
posteriors (forward-backward, arc posteriors, expectations, entropy, gradients),
paths (best path, sampling, label strings of paths), compose (composition, intersection), score
(scoring label sequences without a product), chain (forward-backward and
Viterbi over dense first-order chains given as matrices).

Every public function checks that its machine is a :class:`~fsmlearn.fsm.Machine`
(:func:`~fsmlearn.algo._check.require_machine`: a ``pynini.Fst`` gets a ``TypeError``
saying to convert it with ``Machine.from_pynini``).

Public names: shortest_distance, forward, backward, total_weight, SolveInfo,
forward_backward, ForwardBackward, arc_posteriors, final_posteriors,
log_partition_gradient, expectation, entropy, phi_expand, phi_structure, linear_system,
relax_block_system, phi_pass_rows, Path, Samples, best_path, sample_paths,
label_strings, compose, intersect, score_sequences, ScoreResult, trim, ChainResult,
chain_forward_backward, chain_best.
"""

from .chain import ChainResult, chain_best, chain_forward_backward
from .compose import compose, intersect, trim
from .score import ScoreResult, score_sequences
from .paths import Path, Samples, best_path, label_strings, sample_paths
from .phi import linear_system, phi_expand, phi_structure
from .posteriors import (ForwardBackward, arc_posteriors, entropy, expectation, final_posteriors,
                         forward_backward, log_partition_gradient)
from .relax_blocks import phi_pass_rows, relax_block_system
from .shortest import SolveInfo, backward, forward, shortest_distance, total_weight

__all__ = ["shortest_distance", "forward", "backward", "total_weight", "SolveInfo",
           "forward_backward", "ForwardBackward", "arc_posteriors", "final_posteriors",
           "log_partition_gradient", "expectation", "entropy", "phi_expand", "phi_structure", "linear_system",
           "relax_block_system", "phi_pass_rows",
           "Path", "Samples", "best_path", "sample_paths", "label_strings",
           "compose", "intersect", "score_sequences", "ScoreResult", "trim",
           "ChainResult", "chain_forward_backward", "chain_best"]
