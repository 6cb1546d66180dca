"""One validated run configuration: every error message about a parameter lives here.

Command-line flags, Flower run-config keys (kebab-case) and sweep rows all
become a :class:`RunConfig`. Validation happens in ``__post_init__``, before
any work starts (and before Ray starts), and raises :class:`ConfigError` with
one line naming the parameter, the bad value and what is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from pfxab_flower.errors import ConfigError
from pfxab_flower.noise import NOISE_KINDS

PROBLEMS = ("garland", "doublesine", "landmine")
ALGORITHMS = ("pf-xab", "fed-pne", "pf-pne")
ENGINES = ("inprocess", "flower")
#: The landmine data set's fields (0-based) and the default clients: both terrain types.
LANDMINE_FIELD_COUNT = 29
DEFAULT_LANDMINE_FIELDS = tuple(range(0, LANDMINE_FIELD_COUNT, 3))


def _fail(name: str, value: object, allowed: str) -> None:
    raise ConfigError(f"{name.replace('_', '-')}={value!r} is invalid; allowed: {allowed}")


def validate_algorithm_parameters(
    algorithm: str,
    alpha: float,
    horizon: int,
    seed: int,
    nu1: float,
    rho: float,
    max_depth: int | None,
    pf_pne_eps: float,
) -> None:
    """Check the parameters of the algorithm itself (shared by RunConfig and ``engine.run``)."""
    if algorithm not in ALGORITHMS:
        _fail("algorithm", algorithm, ", ".join(ALGORITHMS))
    for name, value in (("horizon", horizon), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(name, value, "an integer")
    for name, value in (("alpha", alpha), ("nu1", nu1), ("rho", rho), ("pf_pne_eps", pf_pne_eps)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            _fail(name, value, "a finite number")
    if not 0.0 <= alpha <= 1.0:
        _fail("alpha", alpha, "a number in [0, 1]")
    if horizon < 1:
        _fail("horizon", horizon, "an integer >= 1")
    if seed < 0:
        _fail("seed", seed, "an integer >= 0")
    if not nu1 > 0:
        _fail("nu1", nu1, "a number > 0")
    if not 0.0 < rho < 1.0:
        _fail("rho", rho, "a number in (0, 1)")
    if max_depth is not None and (isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1):
        _fail("max_depth", max_depth, "an integer >= 1 (or unset for no limit)")
    if not pf_pne_eps >= 0:
        _fail("pf_pne_eps", pf_pne_eps, "a number >= 0")


@dataclass(frozen=True)
class RunConfig:
    """Parameters of one run. Field names are the CLI flags (``--noise-sigma``) in snake case."""

    problem: str = "garland"
    algorithm: str = "pf-xab"
    clients: int = 10
    alpha: float = 0.5
    horizon: int = 2_000_000
    seed: int = 0
    nu1: float = 1.0
    rho: float = 0.5
    noise: str = "uniform"
    noise_sigma: float = 0.1
    spread: float = 0.3
    max_depth: int | None = None
    pf_pne_eps: float = 0.1
    landmine_data: str | None = None
    fields: str | None = None

    def __post_init__(self) -> None:
        self._check_types()
        if self.problem not in PROBLEMS:
            _fail("problem", self.problem, ", ".join(PROBLEMS))
        validate_algorithm_parameters(**self.algorithm_parameters())
        if self.clients < 1:
            _fail("clients", self.clients, "an integer >= 1")
        if self.noise not in NOISE_KINDS:
            _fail("noise", self.noise, ", ".join(NOISE_KINDS))
        if not self.noise_sigma >= 0:
            _fail("noise_sigma", self.noise_sigma, "a number >= 0")
        if not 0.0 <= self.spread < 1.0:
            _fail("spread", self.spread, "a number in [0, 1)")
        chosen = self._chosen_fields()
        if self.problem == "landmine" and self.clients > len(chosen):
            _fail("clients", self.clients, f"at most {len(chosen)}, the number of landmine fields chosen by --fields")

    def _chosen_fields(self) -> tuple[int, ...]:
        if self.fields is None:
            return DEFAULT_LANDMINE_FIELDS
        allowed = f"distinct comma-separated integers in 0..{LANDMINE_FIELD_COUNT - 1}"
        try:
            chosen = tuple(int(part) for part in self.fields.split(","))
        except ValueError:
            _fail("fields", self.fields, allowed)
        if len(set(chosen)) != len(chosen) or not all(0 <= f < LANDMINE_FIELD_COUNT for f in chosen):
            _fail("fields", self.fields, allowed)
        return chosen

    @property
    def landmine_fields(self) -> tuple[int, ...]:
        """The landmine fields of the clients: the first ``clients`` of ``fields`` (default 0, 3, ..., 27)."""
        return self._chosen_fields()[: self.clients]

    def _check_types(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and "None" in str(f.type):
                continue
            if "int" in str(f.type) and (isinstance(value, bool) or not isinstance(value, int)):
                _fail(f.name, value, "an integer")
            not_number = isinstance(value, bool) or not isinstance(value, int | float)
            if f.type == "float" and (not_number or not math.isfinite(value)):
                _fail(f.name, value, "a finite number")
            if "str" in str(f.type) and not isinstance(value, str):
                _fail(f.name, value, "a string")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> RunConfig:
        """Build from Flower-style (``noise-sigma``) or Python-style (``noise_sigma``) keys.

        Strings are converted to the field's type, so a run config or a CSV row
        can be passed as is; unknown keys are an error.
        """
        known = {f.name: f for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in values.items():
            name = key.replace("-", "_")
            if name not in known:
                allowed = ", ".join(sorted(k.replace("_", "-") for k in known))
                raise ConfigError(f"unknown parameter {key!r}; allowed: {allowed}")
            kwargs[name] = _coerce(name, str(known[name].type), value)
        return cls(**kwargs)

    def algorithm_parameters(self) -> dict[str, Any]:
        """The parameters of the algorithm itself (``engine.run``'s keyword arguments)."""
        return {
            "algorithm": self.algorithm,
            "alpha": self.alpha,
            "horizon": self.horizon,
            "seed": self.seed,
            "nu1": self.nu1,
            "rho": self.rho,
            "max_depth": self.max_depth,
            "pf_pne_eps": self.pf_pne_eps,
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def replace(self, **changes: Any) -> RunConfig:
        return RunConfig(**{**asdict(self), **changes})


def _coerce(name: str, type_name: str, value: Any) -> Any:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
        return None if "None" in type_name else value
    try:
        if type_name.startswith("int"):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            if isinstance(value, str):
                number = float(value)
                return int(number) if number.is_integer() else value
            return value
        if type_name == "float" and isinstance(value, str):
            return float(value)
    except ValueError:
        return value  # left for __post_init__ to reject with the standard message
    return value


_SEEDS_ALLOWED = "an integer, a range like 0-9, or a comma-separated list like 0,3,5 (integers >= 0, no repeats)"


def _is_uint(text: str) -> bool:
    return text.isascii() and text.isdecimal()


def parse_seeds(text: str) -> list[int]:
    """The seeds of ``--seeds``: ``7``, ``0-9`` (inclusive) or ``0,3,5`` (items may be ranges), in order."""
    seeds: list[int] = []
    for item in str(text).split(","):
        lo, sep, hi = item.strip().partition("-")
        if not (_is_uint(lo) and (_is_uint(hi) if sep else True)):
            _fail("seeds", text, _SEEDS_ALLOWED)
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            _fail("seeds", text, _SEEDS_ALLOWED)
        seeds.extend(range(first, last + 1))
    if len(set(seeds)) != len(seeds):
        _fail("seeds", text, _SEEDS_ALLOWED)
    return seeds


def parse_algorithms(text: str) -> list[str]:
    """The algorithms of ``--algorithms``: a comma-separated list of names, in order, no repeats."""
    names = [name.strip() for name in str(text).split(",")]
    if any(name not in ALGORITHMS for name in names) or len(set(names)) != len(names):
        _fail("algorithms", text, f"a comma-separated list of distinct names from {', '.join(ALGORITHMS)}")
    return names


def parse_workers(text: str | int) -> int:
    """The number of worker processes of ``--workers``: an integer >= 1."""
    value = str(text).strip()
    if not _is_uint(value) or int(value) < 1:
        _fail("workers", text, "an integer >= 1")
    return int(value)
