"""Numbers as people read them: the one place that decides how many digits a printed number gets.

Why a module of its own: ``pfxab compare`` prints a text table and ``pfxab report``
prints Markdown tables of the same kind of numbers (means and standard deviations
over seeds), and both must agree. Raw ``{:g}`` printing gave ``257482 ± 3.25391e-11``
and ``2.40998e+06 ± 0``: a meaningless spread at full precision next to a truncated mean.

The rules:

* A mean and its standard deviation share one number of decimals, chosen so that the
  larger of the two shows :data:`SIGNIFICANT_DIGITS` significant digits, and never
  more decimals than needed for its integer part (``2,082,003``, not ``2,082,000``).
  So an sd far below the mean's precision prints as ``0`` at that precision
  (``257,482 ± 0``), and an sd of ``0.0834`` next to a mean of ``0.3612`` keeps its digits.
* Whole numbers (Python or NumPy integers, or floats holding one, with a whole or no
  spread) print as integers: ``6 ± 0``, ``13``.
* A caller with a column of numbers on one scale (a sweep's table, scaled by a power
  of ten) fixes ``decimals`` for all of them instead.
* Thousands are separated by commas; a missing value (NaN) is ``n/a``.
"""

from __future__ import annotations

import math
from numbers import Integral

#: Significant digits of a printed mean (or of its spread, whichever is larger).
SIGNIFICANT_DIGITS = 4
#: The most decimals ever printed (a float has about 16 significant digits).
MAX_DECIMALS = 15


def _whole(value: float) -> bool:
    return isinstance(value, Integral) or (math.isfinite(value) and float(value).is_integer())


def decimals_for(value: float, digits: int = SIGNIFICANT_DIGITS) -> int:
    """Decimals that show ``value`` with ``digits`` significant digits (0 for ``|value| >= 10**(digits - 1)``)."""
    magnitude = abs(float(value))
    if magnitude == 0 or not math.isfinite(magnitude):
        return 0
    return min(MAX_DECIMALS, max(0, digits - 1 - math.floor(math.log10(magnitude))))


def _fixed(value: float, decimals: int) -> str:
    text = f"{float(value):,.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text[1:].replace(",", "")) == 0 else text  # no "-0"


def format_number(value: float, decimals: int | None = None, digits: int = SIGNIFICANT_DIGITS) -> str:
    """One number: an integer as an integer, otherwise ``digits`` significant digits (or ``decimals`` if given)."""
    if isinstance(value, Integral):
        return f"{int(value):,}"
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if decimals is None:
        decimals = 0 if _whole(value) else decimals_for(value, digits)
    return _fixed(value, decimals)


def format_mean_sd(mean: float, sd: float, decimals: int | None = None, digits: int = SIGNIFICANT_DIGITS) -> str:
    """``mean ± sd`` with one number of decimals for both (see the module docstring); ``n/a`` for a NaN sd."""
    if not math.isfinite(mean):
        return f"{format_number(mean)} ± {format_number(sd)}"
    has_sd = math.isfinite(sd)
    if decimals is None:
        if _whole(mean) and (not has_sd or _whole(sd)):
            decimals = 0
        else:
            decimals = decimals_for(max(abs(float(mean)), float(sd) if has_sd else 0.0), digits)
    spread = _fixed(sd, decimals) if has_sd else format_number(sd)
    return f"{_fixed(mean, decimals)} ± {spread}"
