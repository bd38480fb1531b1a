"""Layer 4 (models): trans-dimensional random field LMs (Wang, Ou and Tan, "Learning
trans-dimensional random fields with applications to language modeling",
``../shared/papers/wang-ou-tan-trans-dimensional-random-fields.txt``).

p(j, x^j) = pi_j / Z_j(lambda) exp(lambda . f(x^j))  (equation 2), with the features of
Table 2 compiled into a deterministic weighted acceptor (path weight lambda . f(x)),
trained by augmented stochastic approximation with trans-dimensional mixture sampling.

Modules: features (templates and the feature set), acceptor (the feature acceptor and the
exact per-length normalisers by the engine), classes (exchange word clustering).

Main classes and functions, imported on first use (``import fsmlearn.trf`` stays
cheap): :class:`TRF` (the model), :func:`load_trf` / :func:`save_trf` (its files;
``load_trf`` returns ``(model, vocab)``), :class:`FeatureSet`, :func:`build_features`,
:func:`make_templates`, :class:`Templates`, :class:`Corpus`, :func:`as_corpus`,
:class:`FeatureAcceptor`, :func:`compile_acceptor`, :class:`AugSAConfig`,
:func:`train_augsa`, :class:`Sampler`, :class:`Rescorer`, :func:`compile_rescorer`,
:func:`exchange_clusters`.
"""

from __future__ import annotations

from .._lazy import lazy_exports

# public name -> the module (of this package) that defines it, imported on first use
_LAZY = {
    "TRF": "model",
    "load_trf": "io",
    "save_trf": "io",
    "FeatureSet": "features",
    "build_features": "features",
    "make_templates": "features",
    "Templates": "features",
    "Corpus": "features",
    "as_corpus": "features",
    "FeatureAcceptor": "acceptor",
    "compile_acceptor": "acceptor",
    "AugSAConfig": "config",
    "train_augsa": "augsa",
    "Sampler": "sampler",
    "Rescorer": "rescore",
    "compile_rescorer": "rescore",
    "exchange_clusters": "classes",
}


# imported on first use (PEP 562)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
