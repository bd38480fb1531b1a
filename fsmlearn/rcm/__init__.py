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

Every public name is imported on first use (``import fsmlearn.rcm`` stays cheap); the
main classes are :class:`NGramRCM` (the sequence model, run by :func:`rcms`),
:class:`AlignRCM` (the alignment model), :class:`DecipherModel`, and their files
(:func:`load_rcm`, :func:`save_rcm`, :func:`load_align_rcm`, :func:`save_align_rcm`).
"""

from __future__ import annotations

from .._lazy import lazy_exports

# public name -> the module (of this package) that defines it, imported on first use
_LAZY = {
    "ContextLayer": "contexts",
    "AdaGrad": "learn",
    "sequence_gradient": "learn",
    "train_supervised": "learn",
    "BOS": "model",
    "STAR": "model",
    "NGramRCM": "model",
    "RCMSResult": "model",
    "rcms": "model",
    "AlignRCM": "align_model",
    "DecipherModel": "decipher",
    "load_rcm": "io",
    "save_rcm": "io",
    "load_align_rcm": "io",
    "save_align_rcm": "io",
}


# imported on first use (PEP 562)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
