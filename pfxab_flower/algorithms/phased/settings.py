"""What every machine of one run shares, and how it travels to the clients with every message."""

from __future__ import annotations

from dataclasses import dataclass

from pfxab_flower.algorithms.bounds import ConfidenceBound, bound_named
from pfxab_flower.algorithms.messages import AlgorithmParameters
from pfxab_flower.algorithms.schedule import Schedule
from pfxab_flower.config import REWARD_LIMIT
from pfxab_flower.faults import DEFAULT_MIN_FRACTION


@dataclass(frozen=True)
class Settings:
    """What every machine of one run shares."""

    schedule: Schedule
    alpha: float
    seed: int
    pf_pne_eps: float = 0.1
    min_fraction: float = DEFAULT_MIN_FRACTION  # share of the M clients an exchange needs (ServerMachine)
    #: Where a reward (and so a local mean) can lie: the server rejects a report outside it (ServerMachine).
    reward_range: tuple[float, float] = (-REWARD_LIMIT, REWARD_LIMIT)
    #: The confidence bound's name (:data:`~pfxab_flower.algorithms.bounds.BOUNDS`): ``hoeffding``, the paper's.
    confidence: str = "hoeffding"

    @classmethod
    def from_parameters(cls, parameters: AlgorithmParameters, min_fraction: float = DEFAULT_MIN_FRACTION) -> Settings:
        """The settings of the parameters a server sends (``min_fraction`` is the server's own)."""
        schedule = Schedule(
            horizon=parameters.horizon, num_clients=parameters.num_clients, nu1=parameters.nu1, rho=parameters.rho,
            max_depth=parameters.max_depth or None,
        )
        return cls(schedule=schedule, alpha=parameters.alpha, seed=parameters.seed,
                   pf_pne_eps=parameters.pf_pne_eps, min_fraction=min_fraction,
                   reward_range=(parameters.reward_low, parameters.reward_high), confidence=parameters.confidence)

    def parameters(self, algorithm: str, report_pulls: bool = False) -> AlgorithmParameters:
        """What the server sends every client: these settings (but the quorum) and the algorithm."""
        schedule = self.schedule
        # the reward range travels only where a client needs it: for a bound whose widths use it
        low, high = self.reward_range if self.bound.uses_reward_range else (-REWARD_LIMIT, REWARD_LIMIT)
        return AlgorithmParameters(
            algorithm=algorithm, num_clients=schedule.num_clients, horizon=schedule.horizon, alpha=self.alpha,
            seed=self.seed, nu1=schedule.nu1, rho=schedule.rho, max_depth=schedule.max_depth or 0,
            pf_pne_eps=self.pf_pne_eps, report_pulls=report_pulls, confidence=self.confidence,
            reward_low=float(low), reward_high=float(high),
        )

    @property
    def bound(self) -> ConfidenceBound:
        """The run's confidence bound: its widths, phase lengths and the statistics its clients report."""
        return bound_named(self.confidence)

    @property
    def reward_span(self) -> float:
        """``b``: the span of the reward range (e.g. the range term of the Bernstein width)."""
        return self.reward_range[1] - self.reward_range[0]

    @property
    def num_clients(self) -> int:
        return self.schedule.num_clients

    @property
    def horizon(self) -> int:
        return self.schedule.horizon
