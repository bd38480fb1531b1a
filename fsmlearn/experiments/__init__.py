"""Layer 5: the experiments of the papers, one module each.

Each module prepares its data, runs the experiment through the library
(layers 1-4), and writes a JSON report and a PNG plot with the shared helpers
of :mod:`.report` (machine description, peak memory, cached stages, atomic
report and figure writing).  The library below never plots or reads /proc.

Modules:

- :mod:`.giga200`: ``make tagger-giga200``, a tagger trained from n-grams alone
  (Smith and Eisner), against EM on the sampled corpus.
- :mod:`.tag_em`: ``fsmlearn tag em``, an HMM tagger by EM under the 17-tag
  dictionary, with a report and plot of every iteration.
- :mod:`.rcm_decipher`: ``fsmlearn rcms decipher`` (``make rcms-decipher``), decipherment
  by EM with exact, beam and RCMS contexts (Steinhardt and Liang, section 6).
- :mod:`.demo`: ``fsmlearn demo``, a machine composed in pynini run through
  the engine.
- :mod:`.report`: the shared helpers.
"""
