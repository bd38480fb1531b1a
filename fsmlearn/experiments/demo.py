"""The demo job: a weighted machine composed in pynini, forward-backward on it.

A small weighted grammar of English determiner-noun phrases, spelled out
character by character (with a loop over adjectives, so the machine is
cyclic), is built from pynini unions, concatenations and a closure, converted
to a fsmlearn Machine and run through the engine: total weight, forward and
backward values checked against OpenFst's shortest distance, the best path in
the tropical semiring, and the arc posteriors.

Public names: build_demo_machine, run_demo.
"""

from __future__ import annotations

import math

import numpy as np

from ..algo import forward_backward, shortest_distance
from ..fsm import Machine
from ..testing import openfst_distances


def build_demo_machine(cyclic: bool = True):
    """The weighted phrase acceptor, built with pynini (log64 arcs)."""
    import pynini

    def w(x: float):
        return pynini.Weight("log64", -math.log(x))

    def acc(s: str, p: float):
        return pynini.accep(s, weight=w(p), arc_type="log64")

    det = pynini.union(acc("the ", 0.6), acc("a ", 0.4))
    adj = pynini.union(acc("big ", 0.5), acc("red ", 0.5))
    noun = pynini.union(acc("dog ", 0.7), acc("ball ", 0.3))
    if cyclic:
        adjs = pynini.concat(adj, pynini.accep("", weight=w(0.3), arc_type="log64")).closure()
        adjs = pynini.concat(adjs, pynini.accep("", weight=w(0.7), arc_type="log64"))
    else:
        adjs = pynini.union(pynini.accep("", weight=w(0.7), arc_type="log64"),
                            pynini.concat(adj, pynini.accep("", weight=w(0.3), arc_type="log64")))
    phrase = pynini.concat(pynini.concat(det, adjs), noun).optimize()
    return phrase


def run_demo(out, cyclic: bool = True) -> None:
    fst = build_demo_machine(cyclic)
    m = Machine.from_pynini(fst)
    print(f"machine: {m}", file=out)
    fb = forward_backward(m)
    print(f"total weight Z = {math.exp(fb.log_partition):.12f}  (-ln Z = {fb.cost:.12f})", file=out)
    ref_a = openfst_distances(fst, reverse=False)
    ref_b = openfst_distances(fst, reverse=True)
    err = max(float(np.max(np.abs(fb.alpha - ref_a))), float(np.max(np.abs(fb.beta - ref_b))))
    print(f"forward/backward vs OpenFst shortest distance: max |difference| = {err:.2e}", file=out)
    trop = shortest_distance(m, "tropical", reverse=True)
    print(f"best path weight (tropical) = {math.exp(-trop[m.start]):.6f}", file=out)
    print("arc posteriors (expected number of uses of each arc):", file=out)
    print(f"  {'state':>5} {'->':>3} {'label':<8} {'weight':>8} {'posterior':>10}", file=out)
    for s in range(m.num_states):
        for a in m.out_arcs(s):
            lab = chr(m.ilabel[a]) if 32 <= m.ilabel[a] < 127 else str(m.ilabel[a])
            print(f"  {s:>5} {int(m.dst[a]):>3} {lab!r:<8} {math.exp(-m.weight[a]):>8.4f} "
                  f"{fb.posteriors[a]:>10.6f}", file=out)
