"""``fsmlearn mrf synthetic``: the synthetic experiment of Jernite, Rush and Sontag (2015),
section 6 and Figure 5.

A corpus of one sentence of N = 12 tokens drawn uniformly from {a, b, c, d} (appendix B),
K = 1, so C = 5 states with ``<S>``.  Two full-rank models start from zero potentials:

- *exact*: L-BFGS on the exact conditional log-likelihood of eq. 3 (the engine's
  forward-backward over the unrolled cycle with the separators fixed,
  :func:`fsmlearn.mrf.train.train_exact`);
- *lifted*: Algorithm 2 on the lifted TRW bound (:func:`fsmlearn.mrf.train.train_lifted`),
  with the exact conditional log-likelihood of its parameters computed after each
  iteration, and the exact unconditional cyclic log p_cycl(x) (what the bound bounds; the
  difference to the conditional one is log p_cycl(x in S), Lemma 1).

The paper's shape: the bound lies below the likelihood, and the lifted parameters' exact
log-likelihood ends close to the exact optimum.  Several seeds (corpora) are run; the report
holds every run's curves and final figures, the plot the first seed's curves.

Public names: SyntheticConfig, run_synthetic.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..errors import ArgumentError
from ..mrf import MRFModel, SEP, collect_moments, conditional_log_likelihood, corpus_sequence, train_exact, train_lifted
from ..mrf.exact import CycleStructure, separator_mask
from .report import device, new_figure, peak_rss_mb, save_figure, write_report

__all__ = ["SyntheticConfig", "run_synthetic"]


@dataclass
class SyntheticConfig:
    """Settings of the synthetic experiment (defaults: the paper's)."""
    length: int = 12
    K: int = 1
    symbols: str = "abcd"
    seeds: int = 5
    max_iter: int = 200
    tighten_iter: int = 200
    tighten_method: str = "subgradient"
    report: Path = Path("build/mrf/synthetic.json")

    def check(self) -> None:
        if self.length < 1 or self.K < 1 or self.seeds < 1 or self.max_iter < 1 or len(set(self.symbols)) < 2:
            raise ArgumentError(f"synthetic settings out of range: length {self.length}, K {self.K}, seeds "
                                f"{self.seeds}, max_iter {self.max_iter}, symbols {self.symbols!r}")


def _one(cfg: SyntheticConfig, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    syms = list(dict.fromkeys(cfg.symbols))
    tokens = [syms[i] for i in rng.integers(0, len(syms), cfg.length)]
    index = {SEP: 0, **{s: i + 1 for i, s in enumerate(syms)}}
    C, K = len(index), cfg.K
    x = corpus_sequence([tokens], index, K)
    N = int(x.size)
    moments = collect_moments(x, C, K)
    structure = CycleStructure(C, K, N, separator_mask(x, C, 0))
    free = CycleStructure(C, K, N)          # every symbol anywhere: the unconditional cyclic model
    t = time.perf_counter()
    exact = train_exact(MRFModel.init(C, K), x, 0, max_iter=cfg.max_iter)
    t_exact = time.perf_counter() - t

    def track(m, entry):
        entry["exact_log_likelihood"] = conditional_log_likelihood(m, x, 0, structure) / N
        entry["exact_cyclic_log_likelihood"] = (m.score(x) - free.log_partition(m)) / N
    t = time.perf_counter()
    lifted = train_lifted(MRFModel.init(C, K), moments, max_iter=cfg.max_iter, tighten_iter=cfg.tighten_iter,
                          tighten_tol=1e-6, tighten_method=cfg.tighten_method, on_iteration=track)
    t_lifted = time.perf_counter() - t
    ex_curve = [N * e["log_likelihood"] for e in exact.history]
    bound_curve = [N * e["bound"] for e in lifted.history]
    lifted_exact = [N * e["exact_log_likelihood"] for e in lifted.history]
    lifted_cyclic = [N * e["exact_cyclic_log_likelihood"] for e in lifted.history]
    return {"seed": seed, "corpus": " ".join(tokens), "N": N, "C": C, "K": K,
            "exact_training": {"log_likelihood": ex_curve, "iterations": len(ex_curve), "seconds": t_exact,
                               "message": exact.message},
            "lifted_training": {"bound": bound_curve, "exact_log_likelihood": lifted_exact,
                                "exact_cyclic_log_likelihood": lifted_cyclic,
                                "iterations": len(bound_curve), "seconds": t_lifted, "message": lifted.message,
                                "tighten_iterations": int(lifted.state.iterations),
                                "final_gap": lifted.history[-1]["gap"] if lifted.history else None},
            "final": {"exact_optimum": ex_curve[-1] if ex_curve else None,
                      "lifted_bound": bound_curve[-1] if bound_curve else None,
                      "lifted_exact_log_likelihood": lifted_exact[-1] if lifted_exact else None,
                      "lifted_exact_cyclic_log_likelihood": lifted_cyclic[-1] if lifted_cyclic else None}}


def _plot(run: dict, path: Path) -> None:
    fig, ax = new_figure(1, figsize=(7, 4.5))
    ax.plot(range(1, len(run["exact_training"]["log_likelihood"]) + 1), run["exact_training"]["log_likelihood"],
            color="green", label="exact training: exact log-likelihood")
    lt = run["lifted_training"]
    ax.plot(range(1, len(lt["bound"]) + 1), lt["bound"], color="red", label="lifted training: lifted bound")
    ax.plot(range(1, len(lt["exact_log_likelihood"]) + 1), lt["exact_log_likelihood"], color="blue",
            label="lifted training: exact log-likelihood")
    ax.plot(range(1, len(lt["exact_cyclic_log_likelihood"]) + 1), lt["exact_cyclic_log_likelihood"],
            color="purple", ls="--", label="lifted training: exact cyclic log p(x) (what the bound bounds)")
    ax.set_xscale("log")
    ax.set_xlabel("L-BFGS iteration")
    ax.set_ylabel("log-likelihood (nats, whole corpus)")
    ax.set_title(f"Synthetic MRF (N = {run['N']}, K = {run['K']}, C = {run['C']}; seed {run['seed']})")
    ax.legend(loc="center right", fontsize=8)
    ax.grid(alpha=0.3)
    save_figure(fig, path)


def run_synthetic(cfg: SyntheticConfig, progress=None) -> dict:
    """Run the experiment; write ``cfg.report`` (JSON) and the PNG beside it.

    Returns:
        The report dict.
    """
    cfg.check()
    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    runs = []
    for s in range(cfg.seeds):
        runs.append(_one(cfg, s))
        f = runs[-1]["final"]
        say(f"seed {s}: exact optimum {f['exact_optimum']:.4f}, lifted bound {f['lifted_bound']:.4f}, "
            f"lifted parameters' exact log-likelihood {f['lifted_exact_log_likelihood']:.4f} nats")
    gaps = [r["final"]["exact_optimum"] - r["final"]["lifted_exact_log_likelihood"] for r in runs]
    under = [r["final"]["lifted_exact_log_likelihood"] - r["final"]["lifted_bound"] for r in runs]
    cfgd = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()}
    report = {"experiment": "mrf-synthetic (Jernite, Rush and Sontag 2015, section 6, Figure 5)",
              "config": cfgd, "device": device(), "runs": runs,
              "summary": {"mean_exact_optimum": float(np.mean([r["final"]["exact_optimum"] for r in runs])),
                          "mean_lifted_exact_log_likelihood": float(np.mean(
                              [r["final"]["lifted_exact_log_likelihood"] for r in runs])),
                          "mean_lifted_bound": float(np.mean([r["final"]["lifted_bound"] for r in runs])),
                          "mean_optimum_minus_lifted_exact": float(np.mean(gaps)),
                          "max_optimum_minus_lifted_exact": float(np.max(gaps)),
                          "mean_bound_underestimate": float(np.mean(under)),
                          "mean_trw_gap": float(np.mean([r["final"]["lifted_exact_cyclic_log_likelihood"]
                                                         - r["final"]["lifted_bound"] for r in runs])),
                          "mean_log_p_S": float(np.mean([r["final"]["lifted_exact_cyclic_log_likelihood"]
                                                         - r["final"]["lifted_exact_log_likelihood"] for r in runs]))},
              "seconds": time.perf_counter() - t0, "peak_rss_mb": peak_rss_mb()}
    path = Path(cfg.report)
    write_report(path, report)
    _plot(runs[0], path.with_suffix(".png"))
    return report
