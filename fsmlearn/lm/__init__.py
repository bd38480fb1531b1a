"""Layer 4 (models): backoff LMs and their file formats.

Backoff n-gram language models compiled into failure-arc (phi) acceptors
(:mod:`.model`), the compiled model and its memory-mapped file
(:mod:`.compiled`, :mod:`.mapfile`), their n-gram index and byte vocabulary
(:mod:`.index`, :mod:`.vocab`), counting (:mod:`.counts`), estimation
(:mod:`.estimate`), sampling (:mod:`.sample`), scoring text and perplexity
(:mod:`.score`), per-word scores as KenLM's query prints them (:mod:`.query`),
KenLM's tools (:mod:`.tools`), and the file formats ARPA (:mod:`.arpa`) and
Google Web1T counts (:mod:`.web1t`).  It imports from
``errors``, ``fsm/``, ``data/`` (text files) and ``algo/`` only.
"""
