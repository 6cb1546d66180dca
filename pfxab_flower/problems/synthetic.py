"""The shifted Garland and DoubleSine federations of the specification, on ``[0, 1]``.

Client ``m`` of ``M`` sees ``mu_m(x) = g((x - s_m) mod 1)`` with
``s_m = spread * (m / (M - 1) - 1/2)`` (``s_0 = 0`` when ``M = 1``), so every local
optimum is distinct and the global optimum is sub-optimal for every client.
Both ``g`` vanish at 0 and 1, so ``mu_m`` is continuous across the wrap.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from pfxab_flower.arms.domain import Domain
from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.errors import ConfigError
from pfxab_flower.parameter import check_against
from pfxab_flower.problems.federation import NUM_CLIENTS, Federation
from pfxab_flower.problems.registry import SPREAD, ProblemRun

# DoubleSine constants (rho1 = 0.3, rho2 = 0.8, tmax = 0.5).
_E1 = -np.log2(0.3)
_E2 = -np.log2(0.8)
_TMAX = 0.5


def garland(x: np.ndarray) -> np.ndarray:
    """``x (1 - x) (4 - sqrt|sin(60 x)|)``; maximum ``0.997772...`` at the cusp ``x = pi/6``."""
    return x * (1.0 - x) * (4.0 - np.sqrt(np.abs(np.sin(60.0 * x))))


def doublesine(x: np.ndarray) -> np.ndarray:
    """DoubleSine shifted into ``[0, 1]``; maximum ``1`` at ``x = 0.5``."""
    u = 2.0 * np.abs(x - _TMAX)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = (np.sin(2.0 * np.pi * np.log2(u) / 2.0) + 1.0) / 2.0
        value = 1.0 + s * (u**_E2 - u**_E1) - u**_E2
    return np.where(u > 0, value, 1.0)


def _garland_kinks() -> np.ndarray:
    """Zeros of ``sin(60 x)`` in ``[0, 1]``: Garland's cusps."""
    return np.arange(0, int(60 / np.pi) + 1) * np.pi / 60.0


def _doublesine_kinks() -> np.ndarray:
    return np.array([_TMAX])


#: The base functions :func:`synthetic_federation` shifts, with their cusps. The problems of these names are
#: registered in :mod:`pfxab_flower.problems.registry` (their builders are the two functions at the end).
BASE_FUNCTIONS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], Callable[[], np.ndarray]]] = {
    "garland": (garland, _garland_kinks),
    "doublesine": (doublesine, _doublesine_kinks),
}


def shifts(num_clients: int, spread: float) -> np.ndarray:
    """The clients' shifts ``s_m``."""
    if num_clients == 1:
        return np.zeros(1)
    return spread * (np.arange(num_clients) / (num_clients - 1) - 0.5)


def shifted(g: Callable[[np.ndarray], np.ndarray], shift: float, points: np.ndarray) -> np.ndarray:
    """``mean_i g((x_i - shift) mod 1)`` over the coordinates of each point (in 1-D, ``g`` itself, exactly)."""
    values: np.ndarray = g(np.mod(points - shift, 1.0)).mean(axis=1)
    return values


def all_shifted(g: Callable[[np.ndarray], np.ndarray], all_shifts: np.ndarray, points: np.ndarray) -> np.ndarray:
    """:func:`shifted` for every shift at once: shape ``(len(all_shifts), n)``."""
    values: np.ndarray = g(np.mod(points[None, :, :] - all_shifts[:, None, None], 1.0)).mean(axis=2)
    return values


def _shifted_kinks(base_kinks: Callable[[], np.ndarray], all_shifts: np.ndarray) -> np.ndarray:
    kinks: np.ndarray = np.mod(base_kinks()[None, :] + all_shifts[:, None], 1.0).reshape(-1, 1)
    return kinks


def synthetic_federation(
    name: str, num_clients: int = 10, spread: float = 0.3, noise: NoiseModel | None = None
) -> Federation:
    """The shifted ``garland`` or ``doublesine`` federation of ``num_clients`` clients."""
    if name not in BASE_FUNCTIONS:
        raise ConfigError(f"problem={name!r} is invalid; allowed: {', '.join(BASE_FUNCTIONS)}")
    num_clients, spread = check_against(NUM_CLIENTS, num_clients), check_against(SPREAD, spread)
    g, base_kinks = BASE_FUNCTIONS[name]
    all_shifts = shifts(num_clients, spread)
    return Federation(
        objectives=[partial(shifted, g, float(s)) for s in all_shifts],
        domain=Domain.unit_interval(),
        noise=noise or NoiseModel(),
        name=name,
        kinks=partial(_shifted_kinks, base_kinks, all_shifts),
        optimum_is_estimate=False,
        batch=partial(all_shifted, g, all_shifts),
        value_range=(0.0, 1.0),  # both base functions map [0, 1] into [0, 1]
    )


def garland_federation(config: ProblemRun, noise: NoiseModel) -> Federation:
    """The registered problem ``garland``: ``config.num_clients`` clients, shifts spread by ``config.spread``."""
    return synthetic_federation("garland", config.num_clients, config.spread, noise)


def doublesine_federation(config: ProblemRun, noise: NoiseModel) -> Federation:
    """The registered problem ``doublesine``: ``config.num_clients`` clients, shifts spread by ``config.spread``."""
    return synthetic_federation("doublesine", config.num_clients, config.spread, noise)
