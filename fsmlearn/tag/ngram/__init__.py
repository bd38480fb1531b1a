"""n-gram EM: a bigram HMM tagger trained on an approximate corpus (Smith and Eisner,
"Unsupervised learning on an approximate corpus", sections 2-3.5).

The model compiles the corpus LM c and the tag dictionary into the engine's tied
product (:mod:`fsmlearn.algo.tied`), whose E-step (the blocks q_phi, their expected
counts, the bound and the parallel block update, on the schedule the engine picks)
is :class:`fsmlearn.algo.tied.TiedEStep`.  Here:

* :mod:`~fsmlearn.tag.ngram.em`: training (:class:`NGramEM`: theta, the M-step, the
  iterations, vEM or gradient ascent).
* :mod:`~fsmlearn.tag.ngram.approx`: setting it up from a compiled LM and evaluating
  each iteration's tagger (:func:`setup_from_lm`, :func:`train_ngram_em`).
"""

from ...algo.tied import CondBlocks, TiedStructure
from .approx import NGramSetup, initial_theta, setup_from_lm, to_hmm, train_ngram_em
from .em import IterationRecord, NGramEM, mstep

__all__ = ["TiedStructure", "CondBlocks", "NGramEM", "IterationRecord", "NGramSetup", "setup_from_lm",
           "initial_theta", "to_hmm", "train_ngram_em", "mstep"]
