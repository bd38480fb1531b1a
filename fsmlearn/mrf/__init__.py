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
"""

from .model import SEP, Moments, MRFModel, collect_moments, corpus_sequence
from .lifted import LiftedBound, StarResult, TightenState, lifted_bound, star_bp, tighten
from .exact import conditional_log_likelihood, cycle_machine, exact_log_partition, exact_moments
from .train import TrainResult, train_exact, train_lifted
from .io import load_mrf, load_tagger, save_mrf, save_tagger
from .tagger import TaggerMRF, decode, train_tagger

__all__ = ["SEP", "MRFModel", "Moments", "corpus_sequence", "collect_moments",
           "StarResult", "star_bp", "LiftedBound", "lifted_bound", "tighten", "TightenState",
           "cycle_machine", "exact_log_partition", "exact_moments", "conditional_log_likelihood",
           "TrainResult", "train_lifted", "train_exact", "save_mrf", "load_mrf", "TaggerMRF", "train_tagger",
           "decode", "save_tagger", "load_tagger"]
