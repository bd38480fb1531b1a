"""AugSA's settings (:class:`AugSAConfig`), apart from the algorithm (:mod:`fsmlearn.trf.augsa`),
so that a module that only needs the paper's defaults (:mod:`fsmlearn.trf.fit`'s ``FitConfig``)
does not import the sampler and its kernels.

Public names: AugSAConfig.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ArgumentError

__all__ = ["AugSAConfig"]


@dataclass
class AugSAConfig:
    """Settings of AugSA (defaults: the rates, K, L2 and pi0 of the paper's PTB language-modelling
    run, section 7; m = 100 with the long-sentence group as its section 8; the stop rule off).

    Attributes:
        samples: K, samples per iteration.
        chains: parallel chains (K / chains steps each).
        iterations: t_max.
        t_c, beta_lambda, beta_zeta, t0: the learning-rate constants of (24)-(25).
        l2: mu of equation (38).
        pi0: ``"eq26"`` or ``"empirical"``.
        var_floor: the floor of the empirical variances.
        max_length: m; lengths above it form the long sub-model when ``long``.
        long: use the long-sentence sub-model (section 5.4).
        stop: apply the stop rule of Appendix E (needs a development corpus).
        stop_window: H; stop_threshold: the threshold on S_t; gap_every: iterations between
            evaluations of D (1: every iteration, as the paper); eval_sentences: the sizes of the
            training and development subsets D is computed on; eval_every: iterations between
            progress lines.
        length_add: added to each length group's count for pi (0: pi_j = n_j / n; a language
            model needs every length it may score to have a probability).
        seed: seed of the sampler.
    """
    samples: int = 300
    chains: int = 2
    iterations: int = 1000
    t_c: float = 3000.0
    beta_lambda: float = 0.8
    beta_zeta: float = 0.6
    t0: int = 2000
    l2: float = 4e-5
    pi0: str = "eq26"
    var_floor: float = 1e-15
    max_length: int = 100
    long: bool = True
    stop: bool = False
    stop_window: int = 100
    stop_threshold: float = 1e-4
    eval_every: int = 10
    gap_every: int = 1
    eval_sentences: int = 2000
    length_add: float = 0.0
    seed: int = 0

    def check(self) -> None:
        """Raise ArgumentError for a setting out of range (the option and the value)."""
        def bad(name, v, why):
            raise ArgumentError(f"TRF training: {name} = {v!r} {why}")
        if self.samples < 1:
            bad("samples", self.samples, "must be >= 1")
        if not 1 <= self.chains <= self.samples:
            bad("chains", self.chains, "must be 1..samples")
        if self.samples % self.chains:
            bad("samples", self.samples, f"must be a multiple of chains ({self.chains})")
        if self.iterations < 1:
            bad("iterations", self.iterations, "must be >= 1")
        if self.t_c < 0 or self.t0 < 1:
            bad("t_c/t0", (self.t_c, self.t0), "must be >= 0 and >= 1")
        for name in ("beta_lambda", "beta_zeta"):
            v = getattr(self, name)
            if not 0 <= v < 1:
                bad(name, v, "must be in [0, 1) (the paper: 0.5 < beta < 1; its section 8 uses beta_lambda = 0)")
        if self.l2 < 0 or not math.isfinite(self.l2):
            bad("l2", self.l2, "must be finite and >= 0")
        if self.length_add < 0 or not math.isfinite(self.length_add):
            bad("length_add", self.length_add, "must be finite and >= 0")
        if self.pi0 not in ("eq26", "empirical"):
            bad("pi0", self.pi0, "must be 'eq26' or 'empirical'")
        if self.max_length < 1:
            bad("max_length", self.max_length, "must be >= 1")
        if self.stop_window < 1 or self.eval_every < 1 or self.eval_sentences < 1 or self.gap_every < 1:
            bad("stop_window/eval_every/eval_sentences", (self.stop_window, self.eval_every, self.eval_sentences),
                "must be >= 1")
