"""The tied product: a failure-arc machine times tag blocks tied to its labels.

The engine's tagged product (:mod:`fsmlearn.algo.product`) where each arc's block
lists the tags its label's class allows (a tag dictionary), normalised and
independent of the previous tag (or conditioned on it for chosen states): the
variational family q_phi of Smith and Eisner, "Unsupervised learning on an
approximate corpus", sections 2-3.5, here for any machine and dictionary.  The
vocabulary of the modules is the paper's: c (the machine), words (label
classes), theta (the target: a bigram HMM's ``log theta(t | t')`` on the
transitions and ``log theta(w | t)`` on the entries), the bound (5).

One idea per module:

* :mod:`~fsmlearn.algo.tied.structure`: the structure (:class:`TiedStructure`): c's
  forward values, its exclusion arcs and the blocks, which training does not change.
* :mod:`~fsmlearn.algo.tied.kernels`: the per-event sums over it, on one thread or several.
* :mod:`~fsmlearn.algo.tied.arith`: per-block arithmetic written once for the CPU and the
  device kernels (:mod:`fsmlearn.algo.cuda.tied`).
* :mod:`~fsmlearn.algo.tied.objective`: the bound, its expected counts, gradient and
  parallel block update for n_q = 1, by the per-event sums.
* :mod:`~fsmlearn.algo.tied.sweep`: the update and the statistics fused into three
  passes over a part of the machine (the one-process path is the one-part case).
* :mod:`~fsmlearn.algo.tied.shards`: those passes on parts held by Dask workers.
* :mod:`~fsmlearn.algo.tied.cond`: blocks conditioned on the previous tag (footnote 7).
* :mod:`~fsmlearn.algo.tied.general`: the same quantities from the engine's generic
  product routines (the reference schedule).
* :mod:`~fsmlearn.algo.tied.materialise`: the tied product built as an explicit machine
  (a reference for tests).
* :mod:`~fsmlearn.algo.tied.estep`: :class:`TiedEStep`, the entry point: the blocks,
  their statistics and update, on the schedule the engine picks.

The device kernels are :mod:`fsmlearn.algo.cuda.tied`.

Public names: TiedStructure, TiedEStep, CondBlocks, Stats, SCHEDULES.
"""

from .cond import CondBlocks
from .estep import SCHEDULES, TiedEStep
from .objective import Stats
from .structure import TiedStructure

__all__ = ["TiedStructure", "TiedEStep", "CondBlocks", "Stats", "SCHEDULES"]
