"""Numbers as people read them: the one place that decides how many digits a printed number gets.

``pfxab compare`` and ``pfxab report`` print the same kind of numbers (means and sds over seeds)
and must agree: a mean and its sd share one number of decimals (:data:`SIGNIFICANT_DIGITS`
significant digits for the larger), whole numbers print as integers, NaN as ``n/a``.
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
