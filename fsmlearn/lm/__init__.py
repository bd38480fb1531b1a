"""Layer 4 (models): backoff LMs and their file formats.

Backoff n-gram language models compiled into failure-arc (phi) acceptors
(:mod:`.model`), the compiled model and its memory-mapped file
(:mod:`.compiled`, :mod:`.mapfile`), their n-gram index and byte vocabulary
(:mod:`.index`, :mod:`.vocab`), counting (:mod:`.counts`), estimation
(:mod:`.estimate`), sampling (:mod:`.sample`), scoring text and perplexity
(:mod:`.score`), per-word scores as KenLM's query prints them (:mod:`.query`),
KenLM's tools (:mod:`.tools`), the file formats ARPA (:mod:`.arpa`) and
Google Web1T counts (:mod:`.web1t`); text named on the command line is read by
:mod:`fsmlearn.data.textin`.  It imports from
``errors``, ``fsm/``, ``data/`` (text files) and ``algo/`` only.

Main classes and functions, imported on first use (``import fsmlearn.lm`` stays
cheap): :class:`CompiledLM` (the compiled model: ``CompiledLM.load(path)``, scoring,
sampling; its acceptor is ``.machine``), :class:`BackoffLM` (the model's n-gram
tables), :func:`compile_lm`, :func:`load_lm` (an ARPA or compiled file),
:func:`read_arpa`, :func:`write_arpa`, :func:`count_ngrams`, :class:`NGramCounts`,
:func:`perplexity`, :func:`sample_sentences`, :func:`read_web1t`, :func:`write_web1t`.
(Estimation is :func:`fsmlearn.lm.estimate.estimate`.)
"""

from __future__ import annotations

from .._lazy import lazy_exports

# public name -> the module (of this package) that defines it, imported on first use
_LAZY = {
    "CompiledLM": "compiled",
    "BackoffLM": "model",
    "compile_lm": "model",
    "load_lm": "score",
    "read_arpa": "arpa",
    "write_arpa": "arpa",
    "count_ngrams": "counts",
    "NGramCounts": "counts",
    "perplexity": "score",
    "sample_sentences": "sample",
    "read_web1t": "web1t",
    "write_web1t": "web1t",
}


# imported on first use (PEP 562)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
