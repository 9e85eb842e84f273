"""Exact rounding of rationals to binary floating-point formats (test reference for the CPU device's
conversions and directed-rounding arithmetic): the value computed with Fractions, rounded once."""

from __future__ import annotations

import math
from fractions import Fraction

RN, RZ, RD, RU = 0, 1, 2, 3


class Format:
    """A binary floating-point format: significand bits (with the hidden one) and the smallest normal exponent."""

    def __init__(self, bits: int, emin: int, emax: int) -> None:
        self.p, self.emin, self.emax = bits, emin, emax
        self.max = Fraction(2 ** bits - 1) * Fraction(2) ** (emax - bits + 1)


HALF, BF16, F32, F64 = Format(11, -14, 15), Format(8, -126, 127), Format(24, -126, 127), Format(53, -1022, 1023)


def round_exact(x: Fraction, fmt: Format, mode: int) -> float:
    """``x`` rounded to ``fmt`` by ``mode`` (as a Python float; inf on overflow where the mode says so)."""
    if x == 0:
        return 0.0
    neg = x < 0
    a = -x if neg else x
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    q = Fraction(2) ** (max(e, fmt.emin) - fmt.p + 1)
    m = a / q
    lo = math.floor(m)
    frac = m - lo
    if mode == RN:
        up = frac > Fraction(1, 2) or (frac == Fraction(1, 2) and lo % 2 == 1)
    elif mode == RZ:
        up = False
    elif mode == RD:
        up = neg and frac != 0
    else:
        up = (not neg) and frac != 0
    r = (lo + up) * q
    if r > fmt.max:
        away = mode == RN or (mode == RU and not neg) or (mode == RD and neg)
        r_float = math.inf if away else float(fmt.max)
        return -r_float if neg else r_float
    return -float(r) if neg else float(r)
