"""Layer 4 (models): HMM taggers as weighted transducers, trained on a tagged
corpus, by EM on raw text, or by n-gram EM on an approximate corpus (a backoff
LM of :mod:`fsmlearn.lm`).

Modules:

* :mod:`~fsmlearn.tag.hmm`: the model and its parameters (:class:`HMM`).
* :mod:`~fsmlearn.tag.smoothing`: transition estimates (add-a, deleted interpolation).
* :mod:`~fsmlearn.tag.oov_tags`: the tag dictionary's unknown words (:class:`OovTags`).
* :mod:`~fsmlearn.tag.unknown`: the suffix model of unknown words (:class:`SuffixModel`).
* :mod:`~fsmlearn.tag.hmm_io`: saving and loading taggers.
* :mod:`~fsmlearn.tag.lattice`: the tagging lattices of many sentences and their kernels.
* :mod:`~fsmlearn.tag.decode`: tagging (:func:`viterbi`, :func:`tag_sentences`).
* :mod:`~fsmlearn.tag.evaluate`: accuracy against gold tags.
* :mod:`~fsmlearn.tag.train`: supervised training from tagged sentences.
* :mod:`~fsmlearn.tag.em`: EM on a corpus (Merialdo's set-up).
* n-gram EM (Smith and Eisner, "Unsupervised learning on an approximate corpus"):
  :mod:`~fsmlearn.tag.ngram.em` (training, :class:`NGramEM`: theta, the M-step, the
  iterations) over the engine's tied product (:mod:`fsmlearn.algo.tied`: q_phi's
  blocks, their statistics and update); :mod:`~fsmlearn.tag.ngram.approx` sets it up
  from an LM.
"""

from .decode import tag_sentences, viterbi
from .em import Corpus, EMRecord, dictionary_mask, em, encode_corpus, evaluation_model, expected_counts, \
    log_likelihood, uniform_hmm
from .evaluate import accuracy
from .hmm import EPS, HMM, UNK
from .hmm_io import load_hmm, save_hmm
from .ngram import CondBlocks, TiedStructure, IterationRecord, NGramEM, NGramSetup, setup_from_lm, train_ngram_em
from .lattice import Lattice, build_lattice, encode_sentences, lattice, sentence_lattice
from .oov_tags import OovTags
from .train import TaggedCounts, count_tagged, train_supervised
from .unknown import SuffixModel

__all__ = ["HMM", "UNK", "EPS", "OovTags", "SuffixModel", "save_hmm", "load_hmm",
           "Lattice", "build_lattice", "lattice", "sentence_lattice", "encode_sentences",
           "viterbi", "tag_sentences", "accuracy",
           "TaggedCounts", "count_tagged", "train_supervised",
           "Corpus", "EMRecord", "encode_corpus", "dictionary_mask", "uniform_hmm", "expected_counts",
           "log_likelihood", "evaluation_model", "em",
           "TiedStructure", "CondBlocks", "NGramEM", "IterationRecord", "NGramSetup", "setup_from_lm",
           "train_ngram_em"]
