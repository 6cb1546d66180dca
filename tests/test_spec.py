"""The algorithm registry and the spec: a new algorithm with its own parameter in one place; checks made once.

A fourth algorithm registered here (a PF-XAB whose clients add a slack of their own to the
elimination rule) runs through ``engine.run``, ``compare``, a RunConfig-free Message-API
strategy and the wire, without any other file knowing of it.
"""

from __future__ import annotations

import cloudpickle
import numpy as np
import pytest
from flwr.app import Context, RecordDict

from pfxab_flower.algorithms import PFXAB, registry
from pfxab_flower.algorithms.phased import ClientView, Settings
from pfxab_flower.client_apps import federation_sessions, legacy_client_app, message_client_app
from pfxab_flower.errors import ConfigError
from pfxab_flower.flower_shared import records
from pfxab_flower.parameter import Parameter
from pfxab_flower.problems import build_federation
from pfxab_flower.running import client_session as session
from pfxab_flower.running import engine
from pfxab_flower.running.wire import codec
from pfxab_flower.schema import catalogue as config
from pfxab_flower.schema import spec as spec_module
from pfxab_flower.schema.run_config import RunConfig
from pfxab_flower.schema.spec import AlgorithmSpec
from pfxab_flower.strategies import LEGACY_STRATEGIES, STRATEGIES
from pfxab_flower.strategies.generate import package_algorithms
from pfxab_flower.strategies.message import PhasedEliminationStrategy
from pfxab_flower.strategies.secure import run_legacy_workflow
from pfxab_flower.studies.comparison import compare
from tests.message_loopback import LoopbackGrid, run_loopback


class SlackPFXAB(PFXAB):
    """PF-XAB whose clients keep a node unless it is ``slack`` worse than needed (slack 0: PF-XAB itself)."""

    name = "pf-xab-slack"
    label = "PF-XAB+slack"
    description = "PF-XAB with an extra elimination slack"
    parameters = (Parameter("slack", float, 0.0, "a number >= 0", "extra elimination slack >= 0",
                            lambda value: value >= 0),)

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        bound = settings.bound
        slack = settings.schedule.smoothness(view.phase) + settings.options["slack"]
        return bound.keep(self.score(settings, view), bound.personalised_widths(settings, view), slack=slack)


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> type[SlackPFXAB]:
    """The fourth algorithm, registered for one test only (the registry is restored after it)."""
    monkeypatch.setattr(registry, "_ALGORITHMS", dict(registry._ALGORITHMS))
    return registry.register_algorithm(SlackPFXAB)


FED = build_federation(RunConfig(problem="doublesine", num_clients=3, horizon=200_000, seed=2))
RUN = {"alpha": 0.5, "horizon": 200_000, "seed": 2}


def test_a_registered_algorithm_is_everywhere_names_are_listed(slack) -> None:
    package = package_algorithms()  # the package's own, from the registry (pf-xab first): a test list would drift
    assert package[0] == "pf-xab" and "pf-xab-slack" not in package
    assert (*package, "pf-xab-slack") == config.ALGORITHMS
    assert config.parse_algorithms("pf-xab,pf-xab-slack") == ["pf-xab", "pf-xab-slack"]
    assert config.check("algorithm", "pf-xab-slack") == "pf-xab-slack"
    assert STRATEGIES["pf-xab-slack"].__name__ == "PFXABslack" and STRATEGIES["pf-xab-slack"].algorithm == slack.name
    assert issubclass(STRATEGIES["pf-xab-slack"], PhasedEliminationStrategy)
    assert registry.label("pf-xab-slack") == "PF-XAB+slack"


def test_a_registered_algorithm_runs_with_its_own_parameter(slack) -> None:
    plain = engine.run(FED, "pf-xab", **RUN).summary
    same = engine.run(FED, "pf-xab-slack", **RUN).summary  # slack 0: PF-XAB's numbers
    wide = engine.run(FED, "pf-xab-slack", slack=2.0, **RUN).summary
    assert same["regret"] == plain["regret"] and same["algorithm"] == "pf-xab-slack" and same["slack"] == 0.0
    assert wide["slack"] == 2.0 and wide["regret"] != plain["regret"]
    with pytest.raises(ConfigError, match=r"^slack=-1\.0 is invalid; allowed: a number >= 0$"):
        engine.run(FED, "pf-xab-slack", slack=-1.0, **RUN)
    runs = compare(FED, ["pf-xab", "pf-xab-slack"], [0], slack=2.0, progress=False, alpha=0.5, horizon=200_000).runs
    assert runs.set_index("algorithm").loc["pf-xab-slack", "regret"] == pytest.approx(
        engine.run(FED, "pf-xab-slack", slack=2.0, **{**RUN, "seed": 0}).summary["regret"], rel=0, abs=0)


def test_a_registered_algorithm_runs_on_the_message_api_as_in_process(slack) -> None:
    strategy = STRATEGIES["pf-xab-slack"](num_clients=3, federation=FED, slack=2.0, **RUN)
    grid = LoopbackGrid(3, message_client_app(federation_sessions(FED)), 0, None)
    result = run_loopback(strategy, grid)
    inprocess = engine.run(FED, "pf-xab-slack", slack=2.0, **RUN).summary
    assert strategy.run_result().summary["regret"] == inprocess["regret"]
    np.testing.assert_array_equal(result.arrays["final-points"].numpy(), np.array(inprocess["final_points"]))


class RayWorker:
    """A ClientApp as Flower's Ray engine runs it: pickled for each message into a process that imported the
    package afresh (only the package's own algorithms registered), whose registry persists across messages."""

    def __init__(self, app: object) -> None:
        self.blob = cloudpickle.dumps(app)
        self.registry = {name: policy for name, policy in registry._ALGORITHMS.items()
                         if policy.__module__.startswith("pfxab_flower.")}

    def __call__(self, message: object, context: object) -> object:
        server = registry._ALGORITHMS
        registry._ALGORITHMS = self.registry  # the worker's registry while it handles the message
        try:
            return cloudpickle.loads(self.blob)(message, context)
        finally:
            registry._ALGORITHMS = server


def test_a_client_app_carries_the_registry_to_the_process_it_is_unpickled_in(slack) -> None:
    inprocess = engine.run(FED, "pf-xab-slack", slack=2.0, **RUN).summary
    strategy = STRATEGIES["pf-xab-slack"](num_clients=3, federation=FED, slack=2.0, **RUN)
    worker = RayWorker(message_client_app(federation_sessions(FED)))
    assert SlackPFXAB.name not in worker.registry
    run_loopback(strategy, LoopbackGrid(3, worker, 0, None))  # a client that cannot read the algorithm stops the run
    assert worker.registry[SlackPFXAB.name] is slack and strategy.run_result().summary["regret"] == inprocess["regret"]

    legacy = LEGACY_STRATEGIES["pf-xab-slack"](num_clients=3, federation=FED, slack=2.0, **RUN)
    worker = RayWorker(legacy_client_app(federation_sessions(FED)))
    context = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
    run_legacy_workflow(LoopbackGrid(3, worker), context, legacy, legacy.num_rounds, 60.0)  # type: ignore[arg-type]
    assert worker.registry[SlackPFXAB.name] is slack
    assert legacy.stop_reason is None and legacy.run_result().summary["regret"] == inprocess["regret"]


def test_a_carried_registry_is_the_drivers_in_the_worker(slack, monkeypatch) -> None:
    class Earlier(PFXAB):  # what a Ray worker kept from an earlier run under the same name
        name = SlackPFXAB.name

    carried = cloudpickle.loads(cloudpickle.dumps(registry.CarriedAlgorithms()))
    assert slack in carried.policies and registry.policy_class("pf-xab") in carried.policies
    assert registry.CarriedAlgorithms().policies == ()  # made in its own process, it carries nothing
    monkeypatch.setattr(registry, "_ALGORITHMS", {**registry._ALGORITHMS, SlackPFXAB.name: Earlier})
    carried.register()
    assert registry.policy_class(SlackPFXAB.name) is slack
    assert registry.algorithm_names()[:5] == ("pf-xab", "fed-pne", "pf-pne", "local-only", "random-search")


def test_a_keyword_the_algorithm_does_not_declare_is_one_line_naming_what_it_takes() -> None:
    for call in (lambda: engine.run(FED, "pf-xab", pf_pne_eps=0.2, **RUN),
                 lambda: STRATEGIES["fed-pne"](num_clients=3, pf_pne_eps=0.2, **RUN),
                 lambda: AlgorithmSpec.build("pf-xab", num_clients=3, pf_pne_eps=0.2)):
        with pytest.raises(ConfigError) as info:
            call()
        assert str(info.value).startswith("unknown keyword 'pf_pne_eps' for algorithm ")
        assert str(info.value).endswith("; allowed: " + ", ".join(config.COMMON))  # num_clients, alpha, ...
        assert list(config.COMMON)[:3] == ["num_clients", "alpha", "horizon"]
    spec = AlgorithmSpec.build("pf-pne", num_clients=3, pf_pne_eps=np.float32(0.25))
    assert spec.options == {"pf_pne_eps": 0.25} and type(spec.options["pf_pne_eps"]) is float
    assert AlgorithmSpec.build("pf-pne", num_clients=3).options == {"pf_pne_eps": 0.1}  # the declared default


def test_registering_a_bad_or_clashing_declaration_is_refused(slack) -> None:
    class Clash(PFXAB):
        name = "pf-xab-slack"

    class Shadow(PFXAB):
        name = "shadow"
        parameters = (Parameter("alpha", float, 0.5, "x", "x"),)

    with pytest.raises(ConfigError, match="already registered"):
        registry.register_algorithm(Clash)
    with pytest.raises(ConfigError, match=r"parameter 'alpha' of algorithm 'shadow' is invalid \(the name of a common"):
        registry.register_algorithm(Shadow)
    assert registry.register_algorithm(SlackPFXAB) is SlackPFXAB  # the same class again: nothing changes


def test_the_spec_travels_the_wire_with_its_options(slack) -> None:
    spec = AlgorithmSpec.build("pf-xab-slack", num_clients=4, horizon=5000, alpha=0.25, seed=9, max_depth=7,
                               slack=0.75, confidence="bernstein", reward_range=(-1.0, 2.0))
    wire = spec.to_wire()
    assert wire["param-slack"] == 0.75 and wire["param-pf-pne-eps"] == 0.1  # sent by every algorithm, as before
    _, values = records.from_record(records.to_record({}, wire))
    assert AlgorithmSpec.from_wire(values) == spec
    with pytest.raises(ConfigError, match=r"^slack=-0\.5 is invalid; allowed: a number >= 0$"):
        AlgorithmSpec.from_wire({**wire, "param-slack": -0.5})  # the client's one check is the decoding
    with pytest.raises(KeyError):
        AlgorithmSpec.from_wire({k: v for k, v in wire.items() if k != "param-slack"})
    with pytest.raises(codec.WireError, match="not float"):
        codec.read_broadcast({codec.NODE_IDS: np.array([1])},
                             {**wire, "param-slack": "wide", "phase": 1, "global-pulls": 1, "local-pulls": 1})


def test_a_run_checks_its_parameters_once_and_the_sessions_not_again(monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[str] = []
    real = config.check_against

    def counting(p: Parameter, value: object, label: str | None = None) -> object:
        checked.append(p.name)
        return real(p, value, label)

    monkeypatch.setattr(config, "check_against", counting)
    monkeypatch.setattr(spec_module, "check_against", counting)
    result = engine.run(FED, "pf-pne", **RUN)
    assert result.summary["phases"] >= 3  # many messages went to every session
    # the algorithm, every common keyword's declaration (COMMON: num_clients, ..., confidence), pf-pne's own, the quorum
    assert sorted(checked) == sorted(["algorithm", *config.COMMON, "pf_pne_eps", "min_fraction"])
    assert not hasattr(session, "check_parameters")
