"""Layer 4 (models): reified context models (Steinhardt and Liang 2015, "Reified
context models").

Contexts chosen at run time by RCMS (:mod:`~fsmlearn.rcm.contexts`: expand,
select the B heaviest, merge the rest into their least ancestors) compile into
a layered acyclic machine (:mod:`~fsmlearn.rcm.model`), on which the engine's
forward-backward, posteriors and best path do all inference; beam search is
the degenerate case with weight -inf on the root context; learning by AdaGrad
on the approximate log-likelihood (:mod:`~fsmlearn.rcm.learn`); the decipherment
HMM of section 6 and its EM (:mod:`~fsmlearn.rcm.decipher`); model files,
written atomically and checked when read (:mod:`~fsmlearn.rcm.io`).  Imports ``errors``,
``fsm/`` and ``algo/`` only.
"""

from .contexts import ContextLayer
from .learn import AdaGrad, sequence_gradient, train_supervised
from .model import BOS, STAR, NGramRCM, RCMSResult, rcms

__all__ = ["ContextLayer", "NGramRCM", "RCMSResult", "rcms", "STAR", "BOS", "AdaGrad", "sequence_gradient",
           "train_supervised"]
