"""Layer 3: generic algorithms over the semirings of layer 2.

Public names: shortest_distance, forward, backward, total_weight,
forward_backward, arc_posteriors, final_posteriors, logz_gradient,
expectation, phi_expand, phi_structure, linear_system.
"""

from .phi import linear_system, phi_expand, phi_structure
from .posteriors import (ForwardBackward, arc_posteriors, expectation, final_posteriors,
                         forward_backward, logz_gradient)
from .shortest import SolveInfo, backward, forward, shortest_distance, total_weight

__all__ = ["shortest_distance", "forward", "backward", "total_weight", "SolveInfo",
           "forward_backward", "ForwardBackward", "arc_posteriors", "final_posteriors",
           "logz_gradient", "expectation", "phi_expand", "phi_structure", "linear_system"]
from .paths import Path, Samples, best_path, sample_paths  # noqa: E402

__all__ += ["Path", "Samples", "best_path", "sample_paths"]
from .compose import ScoreResult, compose, intersect, score_sequences, trim  # noqa: E402

__all__ += ["compose", "intersect", "score_sequences", "ScoreResult", "trim"]
