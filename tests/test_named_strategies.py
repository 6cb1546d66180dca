"""The strategy classes written out in ``strategies/named.py``: generated from the registry, found by a reader.

``python -m pfxab_flower.strategies.generate`` writes the file; these tests fail when it drifts from the
registry (an algorithm added, renamed or re-described without running it).
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

from pfxab_flower.algorithms import registry
from pfxab_flower.errors import ConfigError, UnknownAlgorithmError
from pfxab_flower.strategies import (
    LEGACY_STRATEGIES,
    PFXAB,
    STRATEGIES,
    LegacyPhasedEliminationStrategy,
    PFXABStrategy,
    PhasedEliminationStrategy,
    generate,
    named,
)

ROOT = Path(__file__).resolve().parents[1]
NAMED = ROOT / "strategies" / "named.py"
BUILT_IN = generate.package_algorithms()


def test_the_written_classes_are_what_the_registry_generates() -> None:
    assert NAMED.read_text(encoding="utf-8") == generate.source(), f"strategies/named.py is stale: {generate.COMMAND}"
    assert generate.main(["--check"]) == 0


def test_the_generator_sees_a_drift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    stale = tmp_path / "named.py"
    stale.write_text(generate.source().replace('algorithm = "pf-sh"', 'algorithm = "pf-xab"'), encoding="utf-8")
    monkeypatch.setattr(generate, "TARGET", stale)
    assert generate.main(["--check"]) == 1
    assert capsys.readouterr().err.strip() == f"{stale} is stale; run: {generate.COMMAND}"
    assert generate.main([]) == 0 and stale.read_text(encoding="utf-8") == generate.source()


def test_every_algorithm_of_the_package_has_a_class_a_reader_finds() -> None:
    """``grep "^class PFSH" strategies/`` finds the strategy; its name, module and pickling are a real class's."""
    assert len(BUILT_IN) >= 10 and list(registry.algorithm_names())[:len(BUILT_IN)] == BUILT_IN
    text = NAMED.read_text(encoding="utf-8")
    for name in BUILT_IN:
        for table, base, suffix in ((STRATEGIES, PhasedEliminationStrategy, ""),
                                    (LEGACY_STRATEGIES, LegacyPhasedEliminationStrategy, "Strategy")):
            cls = table[name]
            class_name = registry.class_name(name) + suffix
            assert re.search(rf"^class {class_name}\({base.__name__}\):$", text, re.MULTILINE), class_name
            assert cls is getattr(named, class_name) and cls.algorithm == name
            assert (cls.__name__, cls.__qualname__, cls.__module__) == (class_name, class_name, named.__name__)
            assert pickle.loads(pickle.dumps(cls)) is cls
            assert registry.policy_class(name).description.rstrip(".") in " ".join(cls.__doc__.split())
    assert (PFXAB, PFXABStrategy) == (named.PFXAB, named.PFXABStrategy)


def test_the_api_base_takes_the_algorithm_as_a_keyword() -> None:
    run = {"num_clients": 3, "horizon": 1000, "seed": 4}
    base = PhasedEliminationStrategy(algorithm="pf-sh", **run)
    written = STRATEGIES["pf-sh"](**run)
    assert base.algorithm == written.algorithm == "pf-sh"
    assert base.driver.settings == written.driver.settings
    assert repr(base) == "PhasedEliminationStrategy(algorithm='pf-sh', num_clients=3, horizon=1000)"
    assert repr(written) == "PFSH(num_clients=3, horizon=1000)"
    assert LegacyPhasedEliminationStrategy(algorithm="fed-pne", **run).driver.algorithm == "fed-pne"
    with pytest.raises(ConfigError, match=r"^algorithm is missing; allowed: pf-xab, fed-pne, "):
        PhasedEliminationStrategy(**run)
    with pytest.raises(ConfigError, match=r"^algorithm='pf-sh' is invalid; allowed: 'pf-xab' \(the algorithm of "
                                          r"PFXAB\), or the base, PhasedEliminationStrategy\(algorithm=\.\.\.\)$"):
        PFXAB(algorithm="pf-sh", **run)
    with pytest.raises(ConfigError, match=r"^algorithm='pf-xba' is invalid; allowed: pf-xab, "):
        PhasedEliminationStrategy(algorithm="pf-xba", **run)


def test_an_unknown_name_is_one_line_and_an_algorithm_registered_at_run_time_gets_a_class(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UnknownAlgorithmError, match=r"^algorithm='pf-xba' is invalid; allowed: pf-xab, fed-pne, "):
        LEGACY_STRATEGIES["pf-xba"]
    monkeypatch.setattr(registry, "_ALGORITHMS", dict(registry._ALGORITHMS))

    class Later(registry.policy_class("pf-xab")):  # type: ignore[misc]
        name = "pf-xab-later"
        label = "PF-XAB-Later"
        description = "PF-XAB registered after the package was imported"

    registry.register_algorithm(Later)
    made, legacy = STRATEGIES["pf-xab-later"], LEGACY_STRATEGIES["pf-xab-later"]
    assert (made.__name__, legacy.__name__) == ("PFXABLater", "PFXABLaterStrategy")
    assert made is STRATEGIES["pf-xab-later"] and made.algorithm == legacy.algorithm == "pf-xab-later"
    assert issubclass(made, PhasedEliminationStrategy) and issubclass(legacy, LegacyPhasedEliminationStrategy)
    assert "pf-xab-later" not in generate.package_algorithms()  # a user's algorithm is never written out
    assert made(num_clients=2, horizon=500).driver.algorithm == "pf-xab-later"
