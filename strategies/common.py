"""What both Flower strategy trees share: the driver built from checked keywords, node checks, decoding.

Both trees are thin codecs over a :class:`~pfxab_flower.running.driver.ServerDriver`; their classes by
algorithm name (:class:`StrategyClasses`) are the ones written in ``strategies/named.py``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from pfxab_flower.algorithms import registry
from pfxab_flower.algorithms.phased import Settings
from pfxab_flower.errors import ClientFailedError, ConfigError, UnknownAlgorithmError
from pfxab_flower.faults import DEFAULT_MIN_FRACTION, DEFAULT_ROUND_TIMEOUT, required_replies
from pfxab_flower.flower_shared import flower_internals
from pfxab_flower.problems.federation import Federation
from pfxab_flower.running.driver import ServerDriver
from pfxab_flower.running.exchanges import Exchange, Failure, Unreadable
from pfxab_flower.running.wire import codec
from pfxab_flower.schema.catalogue import PARAMETERS, check
from pfxab_flower.schema.spec import AlgorithmSpec
from pfxab_flower.strategies import ray_diagnosis

LOGGER = logging.getLogger("pfxab_flower")

#: Flower's own strategies log their configuration with this tree (``FedAvg.summary``).
SUMMARY_FORMAT = "\t├──> %s: %s"
#: How Flower's legacy client proxy wraps the reason of an error reply (``GridClientProxy``).
LEGACY_ERROR = ("Message contains an Error (reason: ", "). It originated during client-side execution")
#: Flower's text of the exception a ClientApp raised, in its error reply: ``<class 'T'>:<'text'>``.
FLOWER_ERROR = re.compile(r"<class '(?P<type>[^']+)'>:<'(?P<text>.*)'>", re.DOTALL)
FLOWER_ERROR_END = "'>"
#: The ServerApp-side metrics of a finished run whose federation is known (simulation): Message API
#: ``Result.evaluate_metrics_serverapp``, legacy ``History.metrics_centralized``.
SCORE_KEYS = ("regret", "mean_reward_personalised", "mean_reward_global", "mean_reward_local")
#: What an unscored run (real evaluations, no reference: ``regret`` null) reports there instead.
OBSERVED_KEYS = ("mean_observed_reward", "evaluations")


def score_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """A finished run's ServerApp-side metrics: its scores, or what was observed when it has none."""
    keys = SCORE_KEYS if summary["regret"] is not None else OBSERVED_KEYS
    return {key: float(summary[key]) for key in keys if summary[key] is not None}


def make_driver(
    algorithm: str,
    *,
    min_fraction: float,
    round_timeout: float,
    federation: Federation | None,
    reward_range: tuple[float, float] | None = None,
    spec: AlgorithmSpec | None = None,
    **parameters: Any,
) -> ServerDriver:
    """The driver of a strategy's arguments, checked once here (a one-line ``ConfigError`` names a bad one).

    ``parameters`` are the spec's keywords (``num_clients``, ``horizon``, ``alpha``, ... and
    ``algorithm``'s own, e.g. ``candidates``); or ``spec`` is a checked spec (e.g. of a
    :class:`~pfxab_flower.schema.run_config.RunConfig`), taken as it is.
    """
    min_fraction = check("min_fraction", min_fraction, label="min_fraction")
    check("round_timeout", round_timeout, label="round_timeout")
    if spec is None:
        if "num_clients" not in parameters:
            raise ConfigError(f"num_clients is missing; allowed: {PARAMETERS['num_clients'].allowed}")
        if reward_range is None and federation is not None:
            reward_range = federation.reward_range
        if federation is not None and "dimensions" not in parameters:
            parameters["dimensions"] = federation.domain.ndim
        spec = AlgorithmSpec.build(algorithm, reward_range=reward_range, **parameters)
    elif parameters or reward_range is not None or spec.algorithm != algorithm:
        given = ", ".join([*parameters, *(["reward_range"] if reward_range is not None else [])])
        raise ConfigError(f"spec={spec.algorithm!r} with {given or 'another algorithm'} is invalid; allowed: a spec "
                          f"of {algorithm!r} alone (its parameters are in it)")
    if federation is not None and federation.num_clients != spec.num_clients:
        raise ConfigError(f"num_clients={spec.num_clients!r} is invalid; allowed: {federation.num_clients} "
                          "(the number of objectives of the federation given)")
    return ServerDriver(spec.algorithm, Settings(spec, min_fraction=min_fraction), federation)


class StrategyClasses(Mapping[str, type]):
    """The strategy class of every registered algorithm on one API, by name: the class ``written`` for it.

    ``STRATEGIES["pf-xab"]`` is ``PFXAB`` of ``strategies/named.py`` (``PFXABStrategy`` on the legacy API). An
    algorithm registered at run time (a user's, not written there) gets one made on first use from ``base``, named
    from its label plus ``suffix``, with nothing else to write.
    """

    def __init__(self, base: type, written: Mapping[str, type], suffix: str = "") -> None:
        self.base, self.written, self.suffix = base, written, suffix
        self._made: dict[type, type] = {}

    def __getitem__(self, algorithm: str) -> type:
        if algorithm not in registry.algorithm_names():  # one line naming the registered algorithms
            raise UnknownAlgorithmError(f"algorithm={algorithm!r} is invalid; allowed: "
                                        f"{', '.join(registry.algorithm_names())}")
        if algorithm in self.written:
            return self.written[algorithm]
        policy = registry.policy_class(algorithm)
        if policy not in self._made:
            name = registry.class_name(algorithm) + self.suffix
            self._made[policy] = type(name, (self.base,), {
                "algorithm": algorithm, "__doc__": f"{policy.description} ({self.base.__name__}).",
                "__module__": self.base.__module__, "__qualname__": name,
            })
        return self._made[policy]

    def __iter__(self) -> Iterator[str]:
        return iter(registry.algorithm_names())

    def __len__(self) -> int:
        return len(registry.algorithm_names())


def summary_lines(driver: ServerDriver) -> list[tuple[str, Any]]:
    """The configuration a strategy logs in ``summary()``."""
    s = driver.settings
    schedule = s.schedule
    return [
        ("Algorithm", driver.algorithm),
        ("Clients", f"{s.num_clients} (min-fraction {s.min_fraction:g} must answer every exchange)"),
        ("Horizon", f"{s.horizon} pulls per client: {driver.describe_rounds()}"),
        ("Personalisation alpha", s.alpha),
        ("Smoothness", f"nu1={schedule.nu1:g}, rho={schedule.rho:g}, max depth {schedule.max_depth or 'none'}"),
        ("Seed", s.seed),
        ("Scored against a known federation", driver.federation is not None),
    ]


def log_summary(driver: ServerDriver, name: str) -> None:
    LOGGER.info("%s:", name)
    for key, value in summary_lines(driver):
        LOGGER.info(SUMMARY_FORMAT, key, value)


class Reply(NamedTuple):
    """A reply's payload as a transport decoded it (named arrays, config), and the Flower node it came from."""

    arrays: Mapping[str, np.ndarray]
    config: Mapping[str, Any]
    node: int | None = None


def decode_replies(
    driver: ServerDriver,
    payloads: Iterable[Reply | Unreadable | Failure],
    expected: type,
    standby: set[int],
) -> Exchange:
    """Turn decoded payloads (or unreadable replies, or failures) into an :class:`Exchange`, in a fixed order.

    Arrival order is random in Flower: sorting by the partition id a reply claims makes
    every number reproducible. Standby replies (nodes beyond ``num_clients``) are noted once.
    """
    exchange = Exchange()
    readable = []
    for payload in payloads:
        if isinstance(payload, Failure):
            exchange.failures.append(payload)  # its reason unwrapped where the transport made it (failure_reason)
        elif isinstance(payload, Unreadable):
            exchange.unreadable.append(payload)
        else:
            readable.append(payload)
    for arrays, config, node in sorted(readable, key=lambda p: repr(p.config.get(codec.PARTITION_ID))):
        claimed = config.get(codec.PARTITION_ID)
        if codec.is_standby(config):
            if claimed not in standby:
                standby.add(claimed)  # type: ignore[arg-type]
                LOGGER.info("a node with partition-id %r stands by: the run has %d clients",
                            claimed, driver.num_clients)
            continue
        try:
            report = codec.read_reply(arrays, config, expected, driver.settings.bound.statistics)
        except codec.WireError as exc:
            exchange.unreadable.append(Unreadable(claimed, str(exc), node))
            continue
        exchange.add(report, node, codec.read_harness(config), codec.site_of(config))
    return exchange


def failure_reason(failure: BaseException | str) -> str:
    """A client failure as one line: the client's own text, without Ray's or Flower's wrapping.

    Flower's error reply reads ``<class 'T'>:<'text'>``; its simulation's ``T`` is its
    ``ClientAppException``, whose text ends ``Message: <the ClientApp's exception, as str>``.
    Exactly that wrapping is taken off (a quote that ends the text stays: ``KeyError: 'data-dir'``);
    a foreign exception keeps its class name. Ours (:class:`~pfxab_flower.errors.ClientFailedError`)
    already names the client, its site and the exception.
    """
    text = str(failure)
    if text.startswith(LEGACY_ERROR[0]) and LEGACY_ERROR[1] in text:  # the legacy proxy's wrapping of an error reply
        text = text[len(LEGACY_ERROR[0]):text.rindex(LEGACY_ERROR[1])]
    if "Message: " in text:  # Flower's simulation: ClientAppException(str(exception)), maybe in a Ray traceback
        text = text.rsplit("Message: ", 1)[1]
        text = text.rsplit(FLOWER_ERROR_END, 1)[0]
    elif wrapped := FLOWER_ERROR.fullmatch(text.strip()):  # a SuperNode's: the class and the text
        name = wrapped["type"].rsplit(".", 1)[-1]
        text = wrapped["text"] if name == ClientFailedError.__name__ else f"{name}: {wrapped['text']}"
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


def too_few_nodes(driver: ServerDriver, nodes: int, waited: float) -> str:
    """The one line that stops a run whose federation has fewer nodes than clients."""
    M = driver.num_clients
    return (f"only {nodes} of the {M} nodes the run needs are connected (waited {waited:.0f} s); allowed: at "
            f"least num_clients={M} SuperNodes (simulation: num-supernodes={M}), or num_clients={nodes}")


def stop_on_foreign_ray(driver: ServerDriver, grid: object) -> None:
    """At the start of a run: stop it (one line, cause and fix) if its simulation's Ray is someone else's cluster.

    ``grid`` is the run's Flower grid; only the simulation's in-memory grid runs in the
    process of Flower's Ray backend, so anything else is not checked.
    """
    if not driver.running:  # already stopped (too few nodes): nothing to add
        return
    reason = ray_diagnosis.foreign_cluster(flower_internals.is_simulation(grid))
    if reason is not None:
        driver.stop(reason)


#: How a node that sent nothing back shows: Flower's legacy client proxy's failure, and our Message-API strategy's.
NO_REPLY = ("Expected one Message but got: 0", "no reply within the round timeout")


def explain_silence(driver: ServerDriver, phase: int, exchange: Exchange) -> None:
    """The first exchange, answered by nobody (no reply, no error): stop with what was seen, not just a count."""
    no_reply = all(any(text in f.reason for text in NO_REPLY) for f in exchange.failures)
    silent = not (exchange.reports or exchange.unreadable) and no_reply
    if phase == 1 and silent and required_replies(driver.settings.min_fraction, driver.num_clients) > 0:
        driver.stop(f"phase 1: none of the {driver.num_clients} clients replied within the round timeout; "
                    f"{ray_diagnosis.silence_cause()}")


__all__ = [
    "DEFAULT_MIN_FRACTION",
    "DEFAULT_ROUND_TIMEOUT",
    "Reply",
    "StrategyClasses",
    "decode_replies",
    "explain_silence",
    "failure_reason",
    "make_driver",
    "stop_on_foreign_ray",
]
