"""Writes ``strategies/named.py``, the strategy classes of the package's algorithms, from the algorithm registry.

``python -m pfxab_flower.strategies.generate`` rewrites the file (``--check``: exit 1 if it is stale, writing
nothing). Run it after registering, renaming or re-describing an algorithm; ``tests/test_named_strategies.py``
fails until it is run. Each class only fixes ``algorithm``: the loop is the API base's, the algorithm its policy's.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from pfxab_flower.algorithms import registry
from pfxab_flower.storage.generated_files import regenerate

#: The generated module, beside this one.
TARGET = Path(__file__).with_name("named.py")
COMMAND = "python -m pfxab_flower.strategies.generate"
#: Each API: its base class, the suffix of its class names (``PFXAB``, ``PFXABStrategy``), its table's name.
APIS = (("Message API", "PhasedEliminationStrategy", "", "MESSAGE_API"),
        ("legacy API", "LegacyPhasedEliminationStrategy", "Strategy", "LEGACY_API"))
WIDTH = 116

HEADER = f'''"""The strategy class of every algorithm the package registers, on both Flower APIs: ``class PFXAB`` & co.

Generated from the algorithm registry by ``{COMMAND}``: do not edit; run it after
registering, renaming or re-describing an algorithm (a test fails until then). Each class fixes ``algorithm``
only: the round loop is its base's (:mod:`.message`, :mod:`.legacy`), the algorithm its registered policy's.
"""

from __future__ import annotations

from pfxab_flower.strategies.legacy import LegacyPhasedEliminationStrategy
from pfxab_flower.strategies.message import PhasedEliminationStrategy
'''


def package_algorithms() -> list[str]:
    """The algorithms the package itself registers (not a user's or a test's, registered at run time), in order."""
    return [name for name in registry.algorithm_names()
            if registry.policy_class(name).__module__.split(".")[0] == "pfxab_flower"]


def docstring(summary: str, detail: str, indent: str = "    ") -> str:
    """A class's docstring: ``summary`` (wrapped to the line length), a blank line, ``detail``."""
    if '"""' in summary or "\\" in summary:
        raise ValueError(f"description={summary!r} cannot be written in a docstring; allowed: no triple quote, no \\")
    lines = textwrap.wrap(summary if summary.endswith(".") else summary + ".", WIDTH - len(indent) - 3)
    return f'{indent}"""' + f"\n{indent}".join(lines) + f"\n\n{indent}{detail}\n{indent}" + '"""\n'


def strategy_class(name: str, api: str, base: str, suffix: str) -> str:
    """The source of one algorithm's strategy class on one API."""
    description = registry.policy_class(name).description
    return (f"\n\nclass {registry.class_name(name)}{suffix}({base}):\n"
            + docstring(description, f"The {api}'s strategy of ``{name}``.")
            + f'\n    algorithm = "{name}"\n')


def source() -> str:
    """The text of ``named.py`` for the registry as it is now (the package's algorithms only)."""
    names = package_algorithms()
    parts = [HEADER]
    parts += [strategy_class(name, api, base, suffix) for name in names for api, base, suffix, _ in APIS]
    for api, base, suffix, table in APIS:
        rows = "".join(f'    "{name}": {registry.class_name(name)}{suffix},\n' for name in names)
        parts.append(f"\n#: The {api}'s strategy class of each algorithm above, by name.\n"
                     f"{table}: dict[str, type[{base}]] = {{\n{rows}}}\n")
    return "".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    def say(rewritten: bool) -> None:
        print(f"{TARGET}: {len(package_algorithms())} algorithms, {'rewritten' if rewritten else 'unchanged'}")

    return regenerate(argv, command=COMMAND, description=__doc__.splitlines()[0], target=TARGET,
                      render=lambda _current: source(), what="named.py", stale=f"{TARGET} is stale; run: {COMMAND}",
                      written=say)


if __name__ == "__main__":
    sys.exit(main())
