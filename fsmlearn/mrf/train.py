"""Algorithm 2 of Jernite, Rush and Sontag (2015): L-BFGS over theta on the lifted bound, and
the exact-likelihood baseline of their Figure 5.

:func:`train_lifted` maximises the per-position bound L(theta; delta*(theta)) of section 5
(:mod:`fsmlearn.mrf.lifted`) with scipy's L-BFGS-B; each function evaluation builds the
star's potentials (eq. 17), tightens delta by Algorithm 1 warm-started from the previous
evaluation's delta, and returns the gradient of eq. 18 (eq. 19 for a low-rank model).
Nothing in a step depends on the corpus length: the corpus enters only through its moments.
An optional L2 penalty (l2/2 ||pairwise parameters||^2) regularises the pairwise part.

:func:`train_exact` maximises the exact conditional log-likelihood of eq. 3 (small C only),
its value and gradient from the engine over the unrolled cycle
(:func:`fsmlearn.mrf.exact.conditional_log_likelihood`).

Both, and :func:`fsmlearn.mrf.tagger.train_tagger`, run one L-BFGS-B loop (``_lbfgs``) that
records one history entry per iteration and calls ``on_iteration(model, entry)`` (which may
add fields, e.g. a held-out figure, or return True to stop).

Public names: TrainResult, train_lifted, train_exact.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from ..errors import ArgumentError, NotConvergedError
from .exact import CycleStructure, conditional_log_likelihood, separator_mask
from .lifted import TightenState, lifted_bound, star_potentials, tighten
from .model import Moments, MRFModel

__all__ = ["TrainResult", "train_lifted", "train_exact"]


@dataclass
class TrainResult:
    """A trained model and its history.

    Attributes:
        model: the last accepted parameters.
        history: one dict per L-BFGS iteration (iteration, evaluations, objective, seconds,
            and the method's own fields).
        state: the dual variables at the end (lifted training), else None.
        message: the optimiser's stopping message.
    """
    model: MRFModel
    history: list = field(default_factory=list)
    state: TightenState | None = None
    message: str = ""


class _Stop(Exception):
    pass


def _lbfgs(evaluate, v0, last: dict, fields, options: dict, on_iteration=None, anchor: dict | None = None):
    """L-BFGS-B on ``evaluate`` (which stores each iterate's ``v``, ``model`` and figures in ``last``),
    one history entry per iteration (``fields()`` between its number and its seconds); ``anchor``
    takes each accepted iterate's dual variables.  Returns (last vector, history, message)."""
    history: list = []
    t0 = time.perf_counter()

    def record(v):
        if "v" not in last or not np.array_equal(v, last["v"]):
            evaluate(v)
        if anchor is not None:
            anchor.update(delta=last["delta"], alpha=last["alpha"], g=last["g"], objective=last["objective"])
        entry = {"iteration": len(history) + 1, **fields(), "seconds": time.perf_counter() - t0}
        history.append(entry)
        if on_iteration is not None and on_iteration(last["model"], entry):
            raise _Stop

    try:
        res = minimize(evaluate, v0, jac=True, method="L-BFGS-B", callback=record, options=options)
        return res.x, history, str(res.message)
    except _Stop:
        return last["v"], history, "stopped by on_iteration"


def _pair_mask(model: MRFModel) -> np.ndarray:
    m = np.ones(model.num_params)
    m[:model.C] = 0.0
    return m


def train_lifted(model: MRFModel, moments: Moments, *, max_iter: int = 100, dtype=np.float64,
                 tighten_iter: int = 200, tighten_tol: float = 1e-3, alpha0: float = 1e3,
                 tighten_method: str = "subgradient", l2: float = 0.0, state: TightenState | None = None,
                 on_iteration=None, lbfgs_memory: int = 10) -> TrainResult:
    """Algorithm 2: maximise the lifted bound over theta by L-BFGS.

    Args:
        model: the starting parameters (full or low rank).
        moments: the training moments.
        max_iter: L-BFGS iterations.
        dtype: of the star's dense potentials (np.float32 for large C).
        tighten_iter, tighten_tol, alpha0, tighten_method: Algorithm 1's settings
            (:func:`~fsmlearn.mrf.lifted.tighten`).
        l2: L2 penalty on the pairwise parameters (per position).
        state: dual variables to start from (default zeros).
        on_iteration: called as ``on_iteration(model, entry)`` after each iteration; a true
            return value stops training.
        lbfgs_memory: the number of L-BFGS corrections kept.

    Returns:
        :class:`TrainResult`; each history entry has ``bound`` (the per-position bound without
        the penalty), ``objective``, ``gap``, ``tighten_iterations``, ``evaluations``,
        ``seconds``.
    """
    if max_iter < 0 or l2 < 0:
        raise ArgumentError(f"max_iter = {max_iter}, l2 = {l2}; expected >= 0")
    K, C = model.K, model.C
    state = state if state is not None else TightenState.zeros(K, C, alpha0)
    mask = _pair_mask(model) if l2 else None
    last: dict = {}
    counters = {"evals": 0}

    # every evaluation starts from the dual variables of the last accepted iterate, so that a
    # wild trial point of the line search does not spoil the next warm start
    anchor = {"delta": state.delta.copy(), "alpha": state.alpha}

    def evaluate(v):
        m = model.with_vector(v)
        pot = star_potentials(m, dtype)
        before = state.iterations
        state.delta, state.alpha = anchor["delta"].copy(), anchor["alpha"]
        try:
            star = tighten(pot, state, max_iter=tighten_iter, tol=tighten_tol, alpha0=alpha0,
                           method=tighten_method)
        except NotConvergedError:
            # a trial point so wild that the star's float messages underflow: report it as far
            # worse than the accepted point, so that the line search steps back
            counters["evals"] += 1
            if "g" not in anchor:
                raise
            return -anchor["objective"] + 1e3 * (1.0 + abs(anchor["objective"])), anchor["g"]
        lb = lifted_bound(m, moments, pot=pot, star=star)
        del pot
        obj = lb.value
        g = lb.grad
        if l2:
            obj -= 0.5 * l2 * float((mask * v) @ v)
            g = g - l2 * mask * v
        counters["evals"] += 1
        last.update(v=v.copy(), model=m, bound=lb.value, objective=obj, gap=star.gap, log_z_star=star.log_partition,
                    tighten=state.iterations - before, delta=state.delta.copy(), alpha=state.alpha, g=-g)
        return -obj, -g

    def fields():
        return {"evaluations": counters["evals"], "bound": last["bound"], "objective": last["objective"],
                "gap": last["gap"], "log_z_star": last["log_z_star"], "tighten_iterations": last["tighten"]}

    v0 = model.to_vector()
    best_v, history, message = v0, [], "max_iter = 0"
    if max_iter > 0:
        options = {"maxiter": max_iter, "maxcor": lbfgs_memory, "ftol": 1e-12, "gtol": 1e-9}
        best_v, history, message = _lbfgs(evaluate, v0, last, fields, options, on_iteration, anchor)
    state.delta, state.alpha = anchor["delta"].copy(), anchor["alpha"]
    return TrainResult(model.with_vector(best_v), history, state, message)


def train_exact(model: MRFModel, x, sep: int, *, max_iter: int = 100, on_iteration=None) -> TrainResult:
    """Maximise the exact conditional log-likelihood (eq. 3) of the sequence ``x`` by L-BFGS
    (small C and K: the unrolled cycle has up to C^{2K} N states).

    Returns:
        :class:`TrainResult`; history entries have ``log_likelihood`` (per position).
    """
    x = np.asarray(x, np.int64)
    N = x.size
    structure = CycleStructure(model.C, model.K, N, separator_mask(x, model.C, sep))
    last: dict = {}
    counters = {"evals": 0}

    def evaluate(v):
        m = model.with_vector(v)
        ll, g = conditional_log_likelihood(m, x, sep, structure, gradient=True)
        counters["evals"] += 1
        last.update(v=v.copy(), model=m, ll=ll / N)
        return -ll / N, -g / N

    def fields():
        return {"evaluations": counters["evals"], "log_likelihood": last["ll"]}

    v0 = model.to_vector()
    best_v, history, message = v0, [], "max_iter = 0"
    if max_iter > 0:
        options = {"maxiter": max_iter, "ftol": 1e-14, "gtol": 1e-10}
        best_v, history, message = _lbfgs(evaluate, v0, last, fields, options, on_iteration)
    return TrainResult(model.with_vector(best_v), history, None, message)
