"""The search space: a box whose dimensions are linear or log10-scaled.

The partition works in the unit cube ``[0, 1]^d``; a :class:`Domain` maps unit coordinates to the
user's units and back (a ``log`` dimension is halved in log10 space, as an SVM's ``C`` needs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from pfxab_flower.errors import ConfigError
from pfxab_flower.limits import MAX_DIMENSIONS
from pfxab_flower.parameter import Parameter, between, check_against

SCALES = ("linear", "log")
#: How many dimensions a search space may have: at least one, and few enough to partition (``--dimensions``).
DIMENSIONS = Parameter("dimensions", int, 1, f"an integer in [1, {MAX_DIMENSIONS}] (dimensions of the domain)",
                       "dimensions of a search space", between(1, MAX_DIMENSIONS), scope="other")
#: Names a dimension cannot have: a result's per-client table has a column ``final_<name>``, ``best_<name>`` and
#: ``optimum_<name>`` per dimension, beside ``final_node``, ``best_node``, ``best_observed_mean``,
#: ``best_observed_pulls``, ``best_simple_regret`` and ``optimum_personalised``
#: (:func:`pfxab_flower.running.results.build_result`); a dimension of one of these names overwrote that column.
RESERVED_NAMES = ("node", "personalised", "observed_mean", "observed_pulls", "simple_regret")


def _number(value: object) -> float | None:
    """``value`` as a finite float if it is a real number (numpy ones too, never a bool or a string)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


#: One dimension of a domain given as a mapping: ``(low, high)`` or ``(low, high, scale)``.
Bounds = tuple[float, float] | tuple[float, float, str]


@dataclass(frozen=True)
class Dimension:
    """One named axis of the box, with its bounds in user units and its scale."""

    name: str
    low: float
    high: float
    scale: str = "linear"

    def __post_init__(self) -> None:
        if self.name in RESERVED_NAMES:
            raise ConfigError(f"dimension name {self.name!r} is invalid (a result's column is named after it); "
                              f"allowed: any name but {', '.join(RESERVED_NAMES)}")
        low, high = _number(self.low), _number(self.high)
        if low is None or high is None or not low < high or not math.isfinite(high - low):
            raise ConfigError(
                f"dimension {self.name!r}: bounds ({self.low!r}, {self.high!r}) are invalid; "
                "allowed: finite numbers with low < high and a finite width high - low"
            )
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)
        if self.scale not in SCALES:
            raise ConfigError(
                f"dimension {self.name!r}: scale={self.scale!r} is invalid; allowed: {', '.join(SCALES)}"
            )
        if self.scale == "log" and self.low <= 0:
            raise ConfigError(
                f"dimension {self.name!r}: low={self.low} is invalid for a log scale; allowed: low > 0"
            )


@dataclass(frozen=True)
class Domain:
    """An ordered box of :class:`Dimension` objects."""

    dimensions: tuple[Dimension, ...]

    def __post_init__(self) -> None:
        check_against(DIMENSIONS, len(self.dimensions))
        names = [d.name for d in self.dimensions]
        if len(set(names)) != len(names):
            raise ConfigError(f"domain dimension names {names} repeat; allowed: distinct names")

    @classmethod
    def from_mapping(cls, spec: Mapping[str, Bounds]) -> Domain:
        """Build from ``{"C": (1e-4, 1e4, "log"), "x": (0, 1)}`` (scale defaults to linear)."""
        if not isinstance(spec, Mapping):
            raise ConfigError(f"domain={spec!r} is invalid; allowed: a mapping of names to (low, high[, scale])")
        dims = []
        for name, bounds in spec.items():
            if not isinstance(bounds, tuple | list) or len(bounds) not in (2, 3):
                raise ConfigError(
                    f"domain dimension {name!r}: {bounds!r} is invalid; allowed: (low, high) or (low, high, scale)"
                )
            dims.append(Dimension(str(name), *bounds))
        return cls(tuple(dims))

    @classmethod
    def unit_interval(cls, name: str = "x") -> Domain:
        """The domain ``[0, 1]`` of the synthetic problems."""
        return cls((Dimension(name, 0.0, 1.0),))

    @property
    def ndim(self) -> int:
        return len(self.dimensions)

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.dimensions]

    def _affine(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        lows = np.array([np.log10(d.low) if d.scale == "log" else d.low for d in self.dimensions])
        highs = np.array([np.log10(d.high) if d.scale == "log" else d.high for d in self.dimensions])
        is_log = np.array([d.scale == "log" for d in self.dimensions])
        return lows, highs - lows, is_log

    def to_user(self, unit: np.ndarray) -> np.ndarray:
        """Map points of shape ``(n, d)`` in the unit cube to user units."""
        unit = np.asarray(unit, dtype=float)
        lows, widths, is_log = self._affine()
        scaled = lows + unit * widths
        user: np.ndarray = np.where(is_log, 10.0**scaled, scaled)
        return user

    def to_unit(self, user: np.ndarray) -> np.ndarray:
        """Map points of shape ``(n, d)`` in user units into the unit cube."""
        user = np.asarray(user, dtype=float)
        lows, widths, is_log = self._affine()
        scaled = np.where(is_log, np.log10(np.where(is_log, user, 1.0)), user)
        unit: np.ndarray = (scaled - lows) / widths
        return unit
