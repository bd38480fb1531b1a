"""n-gram EM: a bigram HMM tagger trained on an approximate corpus (Smith and Eisner,
"Unsupervised learning on an approximate corpus", sections 2-3.5).

One idea per module:

* :mod:`~fsmlearn.tag.ngram.structure`: the structure of c and of q_phi's tag blocks
  (:class:`CqStructure`), which training does not change.
* :mod:`~fsmlearn.tag.ngram.kernels`: the per-event sums over that structure, on one
  thread or several (the reference the conditioned path and the gradient use).
* :mod:`~fsmlearn.tag.ngram.objective`: the bound (5), its expected counts, gradient,
  E-step and M-step for n_q = 1.
* :mod:`~fsmlearn.tag.ngram.cond`: blocks conditioned on the previous tag (footnote 7).
* :mod:`~fsmlearn.tag.ngram.cuda`: the device kernels.
* :mod:`~fsmlearn.tag.ngram.materialise`: the tagged machine cq materialised (a reference).
* :mod:`~fsmlearn.tag.ngram.em`: training (:class:`NGramEM`).
* :mod:`~fsmlearn.tag.ngram.approx`: setting it up from a compiled LM and evaluating
  each iteration's tagger (:func:`setup_from_lm`, :func:`train_ngram_em`).
"""

from .approx import NGramSetup, initial_theta, setup_from_lm, to_hmm, train_ngram_em
from .cond import CondBlocks
from .em import IterationRecord, NGramEM
from .structure import CqStructure

__all__ = ["CqStructure", "CondBlocks", "NGramEM", "IterationRecord", "NGramSetup", "setup_from_lm",
           "initial_theta", "to_hmm", "train_ngram_em"]
