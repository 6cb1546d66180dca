"""A federation: ``M`` local objectives on one domain, with a noise model and an evaluation mode.

The ground truth of a simulation: clients only draw rewards through their environment, and the
regret oracle (:mod:`pfxab_flower.running.accounting`) scores against it. ``evaluation`` says what a pull
is (docs/flower.md#evaluation-modes).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np

from pfxab_flower.arms.domain import Bounds, Domain
from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.arms.partition import Partition
from pfxab_flower.errors import ConfigError, ObjectiveError
from pfxab_flower.limits import MAX_CLIENTS, REWARD_LIMIT
from pfxab_flower.parameter import Parameter, between, check_against, choice
from pfxab_flower.problems.optimum import Optimum, maximise_personalised
from pfxab_flower.processes.deadline import call_within

#: How many clients a federation (a run) has: ``M``.
NUM_CLIENTS = Parameter("num_clients", int, 10, f"an integer in [1, {MAX_CLIENTS}]",
                        f"number of clients M, at most {MAX_CLIENTS}", between(1, MAX_CLIENTS), every_algorithm=True)
#: What a pull is (docs/flower.md#evaluation-modes): objective + synthetic noise, an exact value, or one real call.
EVALUATIONS = ("simulated", "deterministic", "stochastic")
EVALUATION = replace(choice("evaluation", "simulated", "what a pull is: simulated, deterministic or stochastic",
                            EVALUATIONS), late=True)

#: An objective maps points of shape ``(n, d)`` (user units) to ``n`` values.
Objective = Callable[[np.ndarray], np.ndarray]


def _format_point(domain: Domain, point: np.ndarray) -> str:
    return "{" + ", ".join(f"{n}={v:.6g}" for n, v in zip(domain.names, point, strict=True)) + "}"


def _read_only(points: np.ndarray) -> np.ndarray:
    """A read-only copy of ``points`` (shape ``(n, d)``) for an objective.

    An objective that wrote into its input (``x -= 0.1``) changed the points the
    optimiser and the regret oracle then used (Garland's optimum 0.95 became 0.875);
    now such a write raises, and is reported as that objective's error.
    """
    copy = np.array(np.atleast_2d(points), dtype=float)
    copy.flags.writeable = False
    return copy


#: The largest objective magnitude: half the widest reward range a server accepts (the rest is room for noise).
VALUE_LIMIT = REWARD_LIMIT / 2


def check_value_range(value_range: object) -> tuple[float, float]:
    """``(low, high)`` objective values lie in, as floats; a one-line :class:`ConfigError` for anything else."""
    if isinstance(value_range, tuple | list) and len(value_range) == 2 and all(
            isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool) for v in value_range):
        low, high = value_range
        if -VALUE_LIMIT <= low < high <= VALUE_LIMIT:
            return float(low), float(high)
    raise ConfigError(f"value_range={value_range!r} is invalid; allowed: (low, high), two numbers with "
                      f"{-VALUE_LIMIT:g} <= low < high <= {VALUE_LIMIT:g}")


def _check_reference(reference: object, num_clients: int) -> list[Objective]:
    """``reference`` as a list of ``num_clients`` callables; a one-line :class:`ConfigError` for anything else."""
    if isinstance(reference, str | bytes) or not isinstance(reference, Sequence) or len(reference) != num_clients \
            or not all(callable(fn) for fn in reference):
        raise ConfigError(f"reference={reference!r} is invalid; allowed: None or {num_clients} callables, "
                          "each client's mean reward f(x)")
    return reference if isinstance(reference, list) else list(reference)


def check_sites(sites: object, num_clients: int | None = None) -> list[str]:
    """``sites`` as a list of site names (``num_clients`` of them, if given); else one :class:`ConfigError` line."""
    count = "" if num_clients is None else f"{num_clients} "
    if isinstance(sites, str | bytes) or not isinstance(sites, Sequence) or len(sites) != (
            len(sites) if num_clients is None else num_clients) or not sites or not all(
            isinstance(name, str) and name.strip() and name.isprintable() and len(name) <= SITE_CHARS
            for name in sites):
        raise ConfigError(f"sites={sites!r} is invalid; allowed: None or {count}site names (printable text, "
                          f"1 to {SITE_CHARS} characters), client m's at position m")
    return list(sites)


#: Longest site name (a label for tables and log lines, not a document).
SITE_CHARS = 100


def takes_rng(objective: Callable[..., object]) -> bool:
    """Whether ``objective`` has a parameter named ``rng`` (it is then given the run's per-evaluation stream)."""
    try:
        parameters = inspect.signature(objective).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return "rng" in parameters and parameters["rng"].kind in kinds


def _real_values(raw: object, client: int) -> np.ndarray:
    """An objective's values as float64, if they are real numbers (complex ones and text are refused, not cast)."""
    values = np.asarray(raw)
    if values.dtype.kind not in "biuf":
        raise ObjectiveError(f"objective of client {client} returned values of type {values.dtype}; "
                             "allowed: real numbers (float or int)")
    return values.astype(float)


@dataclass(eq=False)
class Federation:
    """``M`` clients' local objectives ``mu_m`` on a shared domain, plus the noise model.

    ``kinks`` optionally returns unit-cube points where some objective is not
    smooth (cusps): the optimiser evaluates them exactly, which is how the
    built-in problems reach their optima to 1e-6. ``optimum_is_estimate`` tells
    whether the reported optimum is an estimate (user objectives) or computed
    with a verified method (built-ins). ``batch``, when given, evaluates all
    ``M`` objectives at once (shape ``(M, n)``): a speed-up for the regret oracle
    and the optimiser, which must agree with the per-client objectives.
    """

    objectives: Sequence[Objective]
    domain: Domain
    noise: NoiseModel = field(default_factory=NoiseModel)
    name: str = "custom"
    kinks: Callable[[], np.ndarray] | None = None
    optimum_is_estimate: bool = True
    refine_optimum: bool = True
    batch: Callable[[np.ndarray], np.ndarray] | None = None
    #: Where the objectives' values lie (checked on every evaluation); the server rejects means outside
    #: :attr:`reward_range`. The default is the widest allowed: ``[-VALUE_LIMIT, VALUE_LIMIT]``.
    value_range: tuple[float, float] = (-VALUE_LIMIT, VALUE_LIMIT)
    #: Longest one call of an objective may take, in seconds (``None``: no limit);
    #: see :mod:`pfxab_flower.processes.deadline`.
    objective_timeout: float | None = None
    #: What the objectives are (:data:`EVALUATIONS`); the real modes add no noise.
    evaluation: str = "simulated"
    #: The real modes' scoring: each client's mean reward (the objectives' own, for a cheap deterministic
    #: one), or ``None``: no regret, the objectives are called only for the pulls.
    reference: Sequence[Objective] | None = None
    #: ``exact_optimum(alpha)``: a problem's known personalised optimum (e.g. a separable one's, from its
    #: 1-D factor), used instead of the grid search of :mod:`.optimum`.
    exact_optimum: Callable[[float], Optimum] | None = None
    #: Each client's site name (``sites[m]`` is client ``m``'s), or ``None``: the names its results carry
    #: (``clients.csv``, ``summary.json``'s ``sites``, the log), as a Flower node's ``site`` label does.
    sites: Sequence[str] | None = None
    _optima: dict[float, Optimum] = field(default_factory=dict, init=False, repr=False)
    _truth: Federation | None = field(default=None, init=False, repr=False)
    #: Client -> (its objective, whether that takes ``rng``): looked up once, not on every evaluation
    #: (``inspect.signature`` costs ~40 us; a default run evaluates ~200 times).
    _takes_rng: dict[int, tuple[Callable[..., Any], bool]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        check_against(NUM_CLIENTS, len(self.objectives))  # at least one, at most the declared limit
        for m, fn in enumerate(self.objectives):
            if not callable(fn):
                raise ConfigError(f"objective of client {m} is {type(fn).__name__}; allowed: a callable")
        self.value_range = check_value_range(self.value_range)
        if self.objective_timeout is not None and not (
                isinstance(self.objective_timeout, int | float) and not isinstance(self.objective_timeout, bool)
                and 0 < self.objective_timeout < math.inf):
            raise ConfigError(f"objective_timeout={self.objective_timeout!r} is invalid; "
                              "allowed: a number of seconds > 0, or None for no limit")
        self.evaluation = check_against(EVALUATION, self.evaluation)
        if self.reference is not None:
            self.reference = _check_reference(self.reference, len(self.objectives))
        if self.sites is not None:
            self.sites = check_sites(self.sites, len(self.objectives))
        if self.evaluation != "simulated":
            self.noise = NoiseModel("none", 0.0)  # a real value is the reward: nothing synthetic is added

    @classmethod
    def from_callables(
        cls,
        objectives: Sequence[Objective],
        domain: Domain | Mapping[str, Bounds],
        noise_sigma: float = 0.1,
        noise: str = "uniform",
        name: str = "custom",
        value_range: tuple[float, float] = (-VALUE_LIMIT, VALUE_LIMIT),
        objective_timeout: float | None = None,
        evaluation: str = "simulated",
        reference: Sequence[Objective] | None = None,
        sites: Sequence[str] | None = None,
    ) -> Federation:
        """A user-defined federation; its optimum is estimated (see :mod:`.optimum`).

        ``objectives[m]`` is client ``m``'s ``f(x)``: an ``(n, d)`` array of points in the domain's
        units to ``n`` values. The list says which function is which client, so ``f`` needs no
        client argument; a Flower ``ClientApp`` is instead one program that every node runs, so
        ``objective_client_app`` takes one ``objective(points, partition_id)`` and each node passes
        its own ``partition-id`` (``functools.partial(objective, partition_id=m)`` turns one into
        the other). ``noise`` and ``noise_sigma`` are checked as the run parameters of the same
        names are; ``value_range`` is where the objectives' values lie (checked on every
        evaluation; a server rejects local means outside it, widened by the noise).
        ``objective_timeout`` (seconds) stops the run with one line when one call of an objective
        takes longer (an objective that never returns would otherwise hang the run); with it, each
        objective runs in a process of its own that the limit ends (:mod:`pfxab_flower.processes.deadline`).

        ``evaluation`` says what an objective is: ``"simulated"`` (its mean reward, ``noise`` added),
        ``"deterministic"`` (exact: each point evaluated once) or ``"stochastic"`` (one real trial per
        call: every pull is one row of a batch). The real modes ignore ``noise`` and ``noise_sigma``,
        and score regret only against ``reference`` (one mean function per client) if given.
        ``sites`` names the clients (``sites[m]`` is client ``m``'s site) in the results and the log.

        An objective that has a parameter named ``rng`` is given a ``numpy.random.Generator`` on every call
        made for the run's pulls, drawn from ``(seed, client, phase)`` as the built-in noise is: its own
        randomness then gives the same numbers on every engine (:meth:`evaluate`).
        """
        if isinstance(objectives, str | bytes) or not isinstance(objectives, Sequence):
            raise ConfigError(f"objectives={objectives!r} is invalid; allowed: a sequence of callables")
        if not isinstance(domain, Domain):
            domain = Domain.from_mapping(domain)
        return cls(list(objectives), domain, NoiseModel(noise, noise_sigma), name=name, value_range=value_range,
                   objective_timeout=objective_timeout, evaluation=evaluation, reference=reference, sites=sites)

    def with_evaluation(self, evaluation: str) -> Federation:
        """This federation with another evaluation mode; a real mode is scored against its own objectives.

        For the built-in problems (``RunConfig.evaluation``), whose objectives are the true means and cheap.
        """
        if check_against(EVALUATION, evaluation) == self.evaluation:
            return self
        return replace(self, evaluation=evaluation, reference=self.reference or self.objectives)

    @property
    def cached(self) -> bool:
        """Whether a point's value never changes, so a client evaluates each point once and keeps its value."""
        return self.evaluation == "deterministic" or (self.evaluation == "simulated" and self.noise.deterministic)

    def truth(self) -> Federation | None:
        """The federation regret is scored against: this one when simulated, else its ``reference`` (or ``None``).

        Built once: its optimum (a grid of up to ``2**16`` points per client) is cached with it.
        """
        if self.evaluation == "simulated":
            return self
        if self.reference is None:
            return None
        if self._truth is None:
            own = self.reference is self.objectives
            self._truth = replace(self, objectives=list(self.reference), evaluation="simulated", reference=None,
                                  noise=NoiseModel("none", 0.0), batch=self.batch if own else None)
        return self._truth

    @property
    def num_clients(self) -> int:
        return len(self.objectives)

    @property
    def reward_range(self) -> tuple[float, float]:
        """Where a reward, objective plus noise, can lie: what the server accepts as a local mean."""
        return self.noise.reward_range(self.value_range)

    @property
    def partition(self) -> Partition:
        return Partition(self.domain)

    def evaluate(self, client: int, points: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """Noise-free ``mu_client`` at ``points`` (user units), checked: finite, one value per point.

        An objective with an ``rng`` parameter gets ``rng`` (a run's pulls pass the stream of their client and
        phase; without one, a stream of the client alone: the same on every call).
        """
        points = _read_only(points)
        fn: Callable[..., Any] = self.objectives[client]
        known = self._takes_rng.get(client)
        if known is None or known[0] is not fn:  # first call, or the objective was swapped since
            known = self._takes_rng[client] = (fn, takes_rng(fn))
        if known[1]:
            fn = partial(fn, rng=rng if rng is not None else np.random.default_rng([client]))
        try:
            raw = call_within(self.objective_timeout, fn, points, f"objective of client {client}")
        except ObjectiveError:
            raise
        except Exception as exc:  # a user's objective may raise anything: name where it failed
            raise ObjectiveError(self._locate_failure(client, points, exc, fn)) from exc
        values = _real_values(raw, client)
        if values.shape not in ((len(points),), (len(points), 1)):
            raise ObjectiveError(
                f"objective of client {client} returned shape {values.shape} for {len(points)} points; "
                f"allowed: ({len(points)},)"
            )
        values = values.reshape(-1)
        low, high = self.value_range
        bad = np.flatnonzero(~(np.isfinite(values) & (values >= low) & (values <= high)))
        if bad.size:
            i = int(bad[0])
            raise ObjectiveError(
                f"objective of client {client} returned {values[i]} at point "
                f"{_format_point(self.domain, points[i])}; allowed: finite values in [{low:g}, {high:g}]"
            )
        return values

    def _locate_failure(self, client: int, points: np.ndarray, exc: Exception, fn: Callable[..., Any]) -> str:
        for point in points:
            try:  # within the limit too: an objective that raised on the batch may hang on one point
                call_within(self.objective_timeout, fn, point[None, :], f"objective of client {client}")
            except ObjectiveError:
                raise
            except Exception as inner:
                return (
                    f"objective of client {client} raised {type(inner).__name__}: {inner} at point "
                    f"{_format_point(self.domain, point)}"
                )
        return f"objective of client {client} raised {type(exc).__name__}: {exc} on a batch of {len(points)} points"

    def local_values(self, points: np.ndarray) -> np.ndarray:
        """Every client's ``mu_m`` at ``points``: shape ``(M, n)``."""
        if self.batch is None:
            return np.stack([self.evaluate(m, points) for m in range(self.num_clients)])
        points = _read_only(points)
        values = _real_values(self.batch(points), 0)
        if not np.isfinite(values).all():
            m, i = np.argwhere(~np.isfinite(values))[0]
            raise ObjectiveError(
                f"objective of client {m} returned {values[m, i]} at point "
                f"{_format_point(self.domain, points[i])}; allowed: finite values"
            )
        return values

    def start_scoring(self) -> None:
        """Called before a run's pulls are scored: a federation whose optimum is estimated from the points it
        has evaluated forgets those of earlier runs (landmine), so a run's regret depends on that run alone."""

    def optimum(self, alpha: float) -> Optimum:
        """Each client's maximum of ``alpha mu_m + (1 - alpha) mu`` over the whole domain (cached)."""
        key = float(alpha)
        if key not in self._optima:
            self._optima[key] = self.exact_optimum(key) if self.exact_optimum else maximise_personalised(self, key)
        return self._optima[key]
