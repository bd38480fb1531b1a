"""Layer 1 (beside fsm/): corpora, tokenising, tag sets and the named splits; knows no model.

It imports nothing from fsmlearn but :mod:`fsmlearn.errors`.
"""
