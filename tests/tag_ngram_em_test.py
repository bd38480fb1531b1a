"""n-gram EM training (fsmlearn.tag.ngram.em): variational EM raises the bound and stays
below the likelihood."""

from __future__ import annotations

from fsmlearn.tag.ngram.em import NGramEM
from tag_ngram_common import brute, tiny


def test_variational_em_improves_the_bound_and_stays_below_the_likelihood():
    rng, c, cs, allowed, lt, le = tiny(6, V=2, T=2, p_final=0.85)
    for opt in ("vem", "gradient"):
        tr = NGramEM(cs, allowed, lt, le, optimizer=opt)
        hist = tr.run(6)
        b = [h.bound for h in hist]
        assert b[-1] > b[0] + 1e-3
        _, ll = brute(cs, c, 2, 2, tr.phi, tr.log_trans, tr.log_emit)
        assert b[-1] <= ll + 1e-9
