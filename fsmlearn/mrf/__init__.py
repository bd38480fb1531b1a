"""Layer 4: Markov random field language models and taggers trained by lifted variational
inference (Jernite, Rush and Sontag 2015, "A Fast Variational Approach for Learning Markov
Random Field Language Models", ICML).

Modules: model (the cyclic order-K Markov sequence model of section 4.1, full-rank and
low-rank potentials of eq. 5, the corpus sequence and its pairwise moments), lifted (the
lifted TRW bound of eqs. 11-17: belief propagation on the (K+1)-node star, the tightening of
the dual variables delta by Algorithm 1, the gradients of eqs. 18-19), exact (the cyclic
model compiled into a machine: its log-partition and expected moments by the engine's
forward-backward, the paper's conditional likelihood of eq. 3), train (Algorithm 2: L-BFGS
over theta with the bound), io (saving and loading models atomically with a validating
loader), tagger (the MRF part-of-speech tagger of section 6: its lifted tree, training, and
decoding by the engine's best path).

Public names: SEP, MRFModel, Moments, corpus_sequence, collect_moments, StarResult, star_bp,
LiftedBound, lifted_bound, tighten, TightenState, cycle_machine, exact_log_partition,
exact_moments, conditional_log_likelihood, TrainResult, train_lifted, train_exact,
save_mrf, load_mrf, TaggerMRF, train_tagger, decode, save_tagger, load_tagger.

Every public name is imported on first use, so that ``import fsmlearn.mrf`` does not
load scipy.optimize; the main classes are :class:`MRFModel` (with :func:`load_mrf`)
and :class:`TaggerMRF` (with :func:`load_tagger`).
"""

from __future__ import annotations

from .._lazy import lazy_exports

# public name -> the module (of this package) that defines it, imported on first use
_LAZY = {
    "SEP": "model",
    "Moments": "model",
    "MRFModel": "model",
    "collect_moments": "model",
    "corpus_sequence": "model",
    "LiftedBound": "lifted",
    "StarResult": "lifted",
    "TightenState": "lifted",
    "lifted_bound": "lifted",
    "star_bp": "lifted",
    "tighten": "lifted",
    "conditional_log_likelihood": "exact",
    "cycle_machine": "exact",
    "exact_log_partition": "exact",
    "exact_moments": "exact",
    "TrainResult": "train",
    "train_exact": "train",
    "train_lifted": "train",
    "load_mrf": "io",
    "load_tagger": "io",
    "save_mrf": "io",
    "save_tagger": "io",
    "TaggerMRF": "tagger",
    "decode": "tagger",
    "train_tagger": "tagger",
}


# imported on first use (PEP 562)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
