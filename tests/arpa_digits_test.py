"""The ARPA writer's shortest round-trip digits (fsmlearn.lm.arpa._digits): byte for byte what
numpy's ``astype("S32")`` writes (Python's repr), by the numba kernel where it handles the number
(0 and about 1e-6 <= |x| < 1e17) and through numpy's fallback elsewhere."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmlearn.lm.arpa import _digits, _digits_kernel

LO, HI = 1e-6, 1e17  # the kernel's range, about: |x| in [1e-6, 1e17)


def reference(x):
    return np.asarray(x, np.float64).astype("S32").view(np.uint8).reshape(-1, 32)


def kernel_flags(x):
    """The indices the kernel hands to numpy."""
    x = np.ascontiguousarray(x, np.float64)
    out = np.empty(x.size * 32, np.uint8)
    flagged = np.empty(x.size, np.int64)
    nf = _digits_kernel(x, x.view(np.int64), np.ones(x.size, np.bool_), out, flagged)
    return flagged[:nf]


def check(x, handled=None):
    """_digits(x) equals numpy's text for every row, and each text parses back to x (bits)."""
    x = np.ascontiguousarray(x, np.float64)
    got = _digits(x, np.ones(x.size, np.bool_))
    assert got.shape == (x.size, 32) and got.dtype == np.uint8
    ref = reference(x)
    bad = np.flatnonzero((got != ref).any(axis=1))
    assert bad.size == 0, [(repr(x[i]), bytes(got[i]), bytes(ref[i])) for i in bad[:10]]
    back = got.view("S32").reshape(-1).astype(np.float64)
    fin = ~np.isnan(x)
    assert np.array_equal(back[fin].view(np.int64), x[fin].view(np.int64))
    assert np.isnan(back[~fin]).all()
    if handled is not None:  # the kernel itself wrote these (no fallback)
        assert kernel_flags(x[handled]).size == 0
    return got


def in_range(x):
    a = np.abs(x)
    return (a >= LO) & (a < HI)


def random_bits(rng, n, lo=LO, hi=HI):
    """Doubles with uniformly random bit patterns whose magnitudes lie in [lo, hi)."""
    be_lo = int(np.frexp(lo)[1]) + 1022
    be_hi = int(np.frexp(hi)[1]) + 1022
    be = rng.integers(be_lo, be_hi + 1, n, dtype=np.int64)
    mant = rng.integers(0, 1 << 52, n, dtype=np.int64)
    sign = rng.integers(0, 2, n, dtype=np.int64) << 63
    x = (sign | (be << 52) | mant).view(np.float64)
    a = np.abs(x)
    return x[(a >= lo) & (a < hi)]


def test_examples():
    x = np.array([-0.5, -1.0, -12.0, 123.456, -99.0, 0.0001, 1e-05, -3.2e-05, 1e16, 1e15, 1.5e-07,
                  -7.0, 2.0, 1200.0, 0.1, -1.25, 1.5, -0.30103, 9999999999999998.0, 2.0 ** 53,
                  123456789012345.6, 1234567890123456.7, 0.1 + 0.2, 1.2345678901234567e-5,
                  0.00012345, 5e16, 9.9e16, 1e-6, 0.0, -0.0])
    got = check(x)
    want = [b"-0.5", b"-1.0", b"-12.0", b"123.456", b"-99.0", b"0.0001", b"1e-05", b"-3.2e-05", b"1e+16",
            b"1000000000000000.0", b"1.5e-07", b"-7.0", b"2.0", b"1200.0", b"0.1", b"-1.25", b"1.5",
            b"-0.30103", b"9999999999999998.0", b"9007199254740992.0", b"123456789012345.6",
            b"1234567890123456.8", b"0.30000000000000004", b"1.2345678901234568e-05", b"0.00012345",
            b"5e+16", b"9.9e+16", b"1e-06", b"0.0", b"-0.0"]
    assert [bytes(r).rstrip(b"\0") for r in got] == want


def test_random_bits():
    rng = np.random.default_rng(1)
    x = random_bits(rng, 2_000_000)
    check(x, handled=np.arange(x.size))


def test_log10_probabilities():
    rng = np.random.default_rng(2)
    p = rng.random(1_000_000)
    x = np.concatenate([np.log10(p), np.log10(p ** 8), np.log10(1.0 - p[:200_000] * 1e-5),
                        -np.log10(p[:100_000])])
    x = x[np.isfinite(x) & (x != 0.0)]
    check(x, handled=np.flatnonzero(in_range(x)))


def test_log10_ratios_of_small_integers():
    a, b = np.meshgrid(np.arange(1, 400.0), np.arange(1, 400.0))
    x = np.log10(a / b).ravel()
    x = np.concatenate([x, x / 2, np.log10(a.ravel()) - np.log10(b.ravel())])
    x = x[x != 0.0]
    check(x, handled=np.arange(x.size))


def test_near_powers_of_ten_and_two():
    steps = np.arange(-64, 65)
    base = [10.0 ** k for k in range(-7, 18)] + [2.0 ** e for e in range(-22, 58)]
    base += [float(f"{m}e{k}") for k in range(-7, 17) for m in (5, 9.5, 9.99, 9.999999999999999)]
    x = []
    for v in base:
        bits = np.int64(np.float64(v).view(np.int64)) + steps
        x.append(bits.view(np.float64))
    x = np.concatenate(x)
    x = np.concatenate([x, -x])
    check(x, handled=np.flatnonzero(in_range(x)))


def test_few_digit_decimals():
    """Decimals with 1..17 significant digits at every exponent of the range (correctly rounded by
    numpy's parser), small integers, halves and quarters, -99."""
    rng = np.random.default_rng(3)
    parts = [np.arange(-1000, 1001.0), np.arange(-1000, 1001.0) / 4, np.arange(-100, 101.0) / 10,
             np.array([-99.0, 99.0, -99.5, -9.9, -0.99])]
    for nd in range(1, 18):
        m = rng.integers(10 ** (nd - 1), 10 ** nd, 20_000, dtype=np.int64)
        ex = rng.integers(-6 - nd, 17 - nd, m.size)
        s = np.char.add(np.char.add(m.astype("S17"), b"e"), ex.astype("S4"))
        parts.append(s.astype(np.float64) * rng.choice([-1.0, 1.0], m.size))
    x = np.concatenate(parts)
    x = x[x != 0.0]
    check(x, handled=np.flatnonzero(in_range(x)))


def test_outside_the_range_goes_through_numpy():
    x = np.array([1e-300, -1e-300, 5e-324, -5e-324, 2.2250738585072014e-308, 1e300, -1e300,
                  np.finfo(np.float64).max, np.inf, -np.inf, np.nan, -np.nan, 1e-7, -9.99e-7, 1e17,
                  1.5e17, 1e22, 1e23, -3e-100, 0.0, -0.0])
    rng = np.random.default_rng(4)
    x = np.concatenate([x, random_bits(rng, 100_000, 5e-324, LO), random_bits(rng, 100_000, HI, 1.7e308),
                        (rng.integers(1, 1 << 52, 1000, dtype=np.int64)).view(np.float64)])  # subnormals
    check(x)
    assert kernel_flags(np.array([0.0, -0.0])).size == 0
    flagged = kernel_flags(x)
    assert not in_range(x[flagged]).any()


def test_need_is_respected():
    rng = np.random.default_rng(5)
    x = np.concatenate([np.log10(rng.random(200_000)), [np.nan, np.inf, 1e-300, 0.0, -99.0] * 20])
    rng.shuffle(x)
    need = rng.random(x.size) < 0.5
    got = _digits(x, need)
    ref = reference(x)
    assert np.array_equal(got[need], ref[need])
    assert _digits(x, np.zeros(x.size, np.bool_)).shape == (x.size, 32)
    assert _digits(x[:0], need[:0]).shape == (0, 32)
    # a strided slice and a boolean mask built from comparisons, as arpa_lines passes them
    xs = x[::3]
    got = _digits(xs, xs != 0.0)
    assert np.array_equal(got[xs != 0.0], reference(xs)[xs != 0.0])


_in_range = st.floats(min_value=LO, max_value=HI, exclude_max=True, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_in_range, st.booleans()), min_size=1, max_size=200))
def test_hypothesis_in_range(vals):
    x = np.array([v if neg else -v for v, neg in vals])
    check(x, handled=np.arange(x.size))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=100))
def test_hypothesis_any_double(vals):
    check(np.array(vals, np.float64))


@pytest.mark.parametrize("w", [1, 5, 17])
def test_random_decimal_strings(w):
    """Random w-significant-digit decimal strings in the log-probability range [-10, 0)."""
    rng = np.random.default_rng(10 + w)
    m = rng.integers(10 ** (w - 1), 10 ** w, 200_000, dtype=np.int64)
    ex = rng.integers(-w - 10, -w + 1, m.size)
    s = np.char.add(np.char.add(b"-", m.astype("S17")), np.char.add(b"e", ex.astype("S4")))
    check(s.astype(np.float64))
