"""Layer 2: semirings, as small interchangeable classes.

Every semiring offers the same interface: ``zero``, ``one``, ``plus``,
``times`` on Python values (for users and brute-force checks), and the
conversions the generic algorithms need between a machine's weights and the
rows their numba kernels work on (see :mod:`fsmlearn.semiring.ops`).

===============  ==========================  ================================
semiring          Python value                 arrays returned by algorithms
===============  ==========================  ================================
``real``          a non-negative float         the value
``log``           -ln of a value               -ln (as OpenFst's log weights)
``tropical``      a cost; plus is min          the cost
``expectation``   ``(p, r)``, r an R-vector    column 0: -ln p; then r / p
===============  ==========================  ================================

The expectation semiring <p, r> (Eisner 2002; Li and Eisner 2009) has
``(p1, r1) + (p2, r2) = (p1 + p2, r1 + r2)`` and
``(p1, r1) x (p2, r2) = (p1 p2, p1 r2 + r1 p2)``.  An arc of weight ``k``
carrying an additive value ``v`` becomes ``(k, k v)``, so the total over all
paths is ``(Z, Z E[sum of v])``; algorithms report ``r / p``, which is the
expectation itself and never underflows.

Public names: Semiring, Real, Log, Tropical, Expectation, get_semiring.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import SemiringError
from .ops import (EXP_UNSET, PAR_ROWS, neglog_to_scaled, neglog_to_scaled_at_par, neglog_to_scaled_par,
                  real_to_scaled, scaled_ops, scaled_to_neglog, scaled_to_neglog_par, scaled_to_real, tropical_ops)


def _logaddexp_neg(a: float, b: float) -> float:
    if a == math.inf:
        return b
    if b == math.inf:
        return a
    m = min(a, b)
    return m - math.log1p(math.exp(-abs(a - b)))


class Semiring:
    """Interface of the semirings (see the module docstring)."""

    name = "semiring"
    linear = False      # supports scaling, subtraction (phi) and extrapolation
    idempotent = False
    R = 0               # expectation components

    zero: object
    one: object

    def plus(self, a, b):
        raise SemiringError(f"{self.name}: plus is not defined")

    def times(self, a, b):
        raise SemiringError(f"{self.name}: times is not defined")

    def sum(self, values):
        acc = self.zero
        for v in values:
            acc = self.plus(acc, v)
        return acc

    def product(self, values):
        acc = self.one
        for v in values:
            acc = self.times(acc, v)
        return acc

    def __repr__(self):
        return f"{type(self).__name__}()"

    def __eq__(self, other):
        return type(self) is type(other) and self.R == other.R

    def __hash__(self):
        return hash((type(self).__name__, self.R))


class _LinearBase(Semiring):
    linear = True

    @property
    def ops(self):
        return scaled_ops(self.R)

    @property
    def K(self) -> int:
        return self.R + 2

    def arc_rows(self, weight: np.ndarray, convention: str, values: np.ndarray | None = None) -> np.ndarray:
        """Scaled rows [E, K] of arc weights given in a machine's convention."""
        out = np.empty((weight.shape[0], self.K))
        if convention == "real":
            real_to_scaled(weight, out, 0, self.K - 1)
        else:
            (neglog_to_scaled_par if weight.shape[0] >= PAR_ROWS else neglog_to_scaled)(weight, out, 0,
                                                                                       self.K - 1, 1.0)
        if self.R:
            if values is None:
                out[:, 1:self.K - 1] = 0.0
            else:
                out[:, 1:self.K - 1] = values * out[:, :1]
        return out

    def arc_rows_at(self, weight: np.ndarray, idx: np.ndarray, convention: str) -> np.ndarray:
        """``arc_rows(weight[idx], convention)``: many -log weights are gathered and
        converted in one pass on numba's threads (the same rows)."""
        if convention == "real" or idx.shape[0] < PAR_ROWS:
            return self.arc_rows(weight[idx], convention, None)
        out = np.empty((idx.shape[0], self.K))
        neglog_to_scaled_at_par(np.ascontiguousarray(weight), idx, out, 0, self.K - 1, 1.0)
        if self.R:
            out[:, 1:self.K - 1] = 0.0
        return out

    def final_rows(self, final: np.ndarray, convention: str) -> np.ndarray:
        return self.arc_rows(final, convention, None)

    def one_row(self) -> np.ndarray:
        r = np.zeros(self.K)
        r[0] = 0.5
        r[-1] = 1.0
        return r

    def zero_rows(self, n: int) -> np.ndarray:
        V = np.zeros((n, self.K))
        V[:, -1] = EXP_UNSET
        return V

    def rows_from_output(self, x: np.ndarray) -> np.ndarray:
        """Scaled rows of values in this semiring's output convention (warm starts)."""
        x = np.asarray(x, dtype=np.float64)
        if self.R:
            if x.ndim != 2 or x.shape[1] != self.R + 1:
                raise SemiringError(f"{self.name}: expected an array of shape (N, {self.R + 1})")
            out = np.empty((x.shape[0], self.K))
            neglog_to_scaled(np.ascontiguousarray(x[:, 0]), out, 0, self.K - 1, 1.0)
            out[:, 1:self.K - 1] = x[:, 1:] * out[:, :1]
            return out
        out = np.empty((x.shape[0], self.K))
        if self.name == "real":
            real_to_scaled(np.ascontiguousarray(x), out, 0, 1)
        else:
            neglog_to_scaled(np.ascontiguousarray(x), out, 0, 1, 1.0)
        return out


class Real(_LinearBase):
    """The real semiring (+, x) on non-negative reals."""
    name = "real"
    zero = 0.0
    one = 1.0

    def plus(self, a, b):
        return a + b

    def times(self, a, b):
        return a * b

    def output(self, V: np.ndarray) -> np.ndarray:
        out = np.empty(V.shape[0])
        scaled_to_real(V, out)
        return out


class Log(_LinearBase):
    """The log semiring on negative logs: plus = -ln(e^-a + e^-b), times = +."""
    name = "log"
    zero = math.inf
    one = 0.0

    def plus(self, a, b):
        return _logaddexp_neg(a, b)

    def times(self, a, b):
        return a + b

    def output(self, V: np.ndarray) -> np.ndarray:
        out = np.empty(V.shape[0])
        (scaled_to_neglog_par if V.shape[0] >= PAR_ROWS else scaled_to_neglog)(V, out)
        return out


class Expectation(_LinearBase):
    """The first-order expectation semiring <p, r> with an R-vector r.

    Args:
        R: the number of additive arc values (columns of ``arc_values``).
    """
    name = "expectation"

    def __init__(self, R: int = 1):
        if int(R) < 1:
            raise SemiringError(f"expectation semiring needs R >= 1 components, got {R}")
        self.R = int(R)

    @property
    def zero(self):
        return (0.0, np.zeros(self.R))

    @property
    def one(self):
        return (1.0, np.zeros(self.R))

    def plus(self, a, b):
        return (a[0] + b[0], np.asarray(a[1]) + np.asarray(b[1]))

    def times(self, a, b):
        return (a[0] * b[0], a[0] * np.asarray(b[1]) + np.asarray(a[1]) * b[0])

    def lift(self, weight: float, value) -> tuple:
        """The semiring value <k, k v> of an arc with real weight k and values v."""
        return (weight, weight * np.asarray(value, dtype=np.float64))

    def output(self, V: np.ndarray) -> np.ndarray:
        out = np.empty((V.shape[0], self.R + 1))
        col = np.empty(V.shape[0])
        scaled_to_neglog(V, col)
        out[:, 0] = col
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, 1:] = np.where(V[:, :1] != 0, V[:, 1:self.K - 1] / np.where(V[:, :1] != 0, V[:, :1], 1), 0.0)
        return out

    def __repr__(self):
        return f"Expectation(R={self.R})"


class Tropical(Semiring):
    """The tropical semiring (min, +) on costs, with back-pointers for best paths."""
    name = "tropical"
    idempotent = True
    zero = math.inf
    one = 0.0

    def plus(self, a, b):
        return min(a, b)

    def times(self, a, b):
        return a + b

    @property
    def ops(self):
        return tropical_ops()

    def arc_rows(self, weight: np.ndarray, convention: str, values=None) -> np.ndarray:
        if convention == "real":
            with np.errstate(divide="ignore"):
                return (-np.log(weight))[:, None].copy()
        return np.ascontiguousarray(weight, dtype=np.float64)[:, None].copy()

    def final_rows(self, final, convention):
        return self.arc_rows(final, convention)

    def one_row(self):
        return np.zeros(1)

    def zero_rows(self, n):
        return np.full((n, 1), math.inf)

    def output(self, V):
        return V[:, 0].copy()

    def rows_from_output(self, x):
        return np.asarray(x, dtype=np.float64)[:, None].copy()


_NAMED = {"real": Real, "log": Log, "tropical": Tropical}


def get_semiring(spec, arc_values: np.ndarray | None = None) -> Semiring:
    """A semiring instance from a name or instance.

    Args:
        spec: "real", "log", "tropical", "expectation", or a Semiring.
        arc_values: for "expectation", the [E, R] additive arc values; R is
            taken from it.

    Raises:
        SemiringError: an unknown name.
    """
    if isinstance(spec, Semiring):
        return spec
    if spec == "expectation":
        if arc_values is None:
            raise SemiringError("the expectation semiring needs arc_values (an [E, R] array)")
        v = np.asarray(arc_values)
        return Expectation(1 if v.ndim == 1 else v.shape[1])
    cls = _NAMED.get(spec)
    if cls is None:
        raise SemiringError(f"unknown semiring {spec!r}; expected one of real, log, tropical, expectation")
    return cls()


__all__ = ["Semiring", "Real", "Log", "Tropical", "Expectation", "get_semiring"]
