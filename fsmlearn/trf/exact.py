"""Exact maximum-likelihood training of small-alphabet TRFs by quasi-Newton (L-BFGS).

The objective is the negative log-likelihood per sentence of equation (2) with the exact
normalisers,  L(lambda) = -p~[f] . lambda + sum_j pi_j ln Z_j(lambda) - sum_j pi_j ln pi_j
(+ mu/2 |lambda|^2), and its gradient  -p~[f] + sum_j pi_j E_{p_j}[f] (+ mu lambda)
(equation 6): both from the engine on the feature acceptor intersected with the lengths
(:class:`fsmlearn.trf.acceptor.LengthProduct`: forward for ln Z_j, forward-backward for the
expected features).  This is the quasi-Newton baseline of section 6.

Public names: fit_exact, exact_zeta.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import minimize

from ..errors import ArgumentError
from .acceptor import LengthProduct


def exact_zeta(lp: LengthProduct, lam) -> np.ndarray:
    """float64 [m+1]: the exact zeta_j = ln Z_j / Z_1 (entry 0 set to 0)."""
    lz = lp.log_normalisers(lam)
    z = lz - lz[1]
    z[0] = 0.0
    return z


def fit_exact(lp: LengthProduct, ftilde: np.ndarray, pi: np.ndarray, *, l2: float = 0.0,
              max_iterations: int = 300, lam0=None, callback=None, tol: float = 1e-9):
    """Minimise the exact negative log-likelihood per sentence by L-BFGS.

    Args:
        lp: the length product of the feature acceptor (lengths 1..m).
        ftilde: float64 [d], p~[f], the mean feature counts per training sentence.
        pi: float64 [m+1], the empirical length probabilities (pi[0] = 0).
        l2: mu, an optional L2 penalty.
        max_iterations: the L-BFGS iteration limit.
        lam0: the starting lambda (default 0).
        callback: called as ``callback(k, lam, nll)`` after each L-BFGS iteration.
        tol: scipy's ``ftol``/``gtol``.

    Returns:
        (lambda, history): history is a list of (iteration, seconds, nll) per L-BFGS
        iteration, the nll without the L2 term.
    """
    pi = np.asarray(pi, np.float64)
    if len(pi) != lp.m + 1 or abs(pi.sum() - 1) > 1e-9:
        raise ArgumentError(f"TRF exact training: pi must have {lp.m + 1} entries summing to 1")
    with np.errstate(divide="ignore"):
        log_pi = np.log(pi)
    const = -float(np.sum(pi[pi > 0] * log_pi[pi > 0]))
    lam = np.zeros(len(ftilde)) if lam0 is None else np.array(lam0, np.float64)
    last = {}

    def fg(x):
        E, logz = lp.expected_features(x, log_pi)
        ok = pi > 0
        nll = -float(ftilde @ x) + float(np.sum(pi[ok] * logz[ok])) + const
        last["nll"] = nll
        return nll + 0.5 * l2 * float(x @ x), (E - ftilde) + l2 * x

    hist = []
    t0 = time.time()

    def cb(xk):
        k = len(hist) + 1
        hist.append((k, time.time() - t0, last["nll"]))
        if callback is not None:
            callback(k, xk, last["nll"])

    res = minimize(fg, lam, jac=True, method="L-BFGS-B", callback=cb,
                   options={"maxiter": max_iterations, "ftol": tol, "gtol": tol, "maxcor": 20})
    return res.x, hist
