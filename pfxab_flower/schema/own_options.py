"""Which runs take an algorithm's or a problem's own parameter: a value given to runs that ignore it is refused.

``pfxab run --algorithm pf-xab --candidates 10`` ran PF-XAB and dropped the flag (Python refuses the keyword),
and ``--problem garland --fields 1,2`` dropped landmine's: one run takes its algorithm's and its problem's own
parameters only. A sweep or comparison of several gives each run those it declares, and refuses a value
that no run of it would read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pfxab_flower.algorithms import registry as algorithms
from pfxab_flower.errors import spelled
from pfxab_flower.parameter import refuse
from pfxab_flower.problems import registry as problems


def takers(name: str) -> list[str]:
    """The algorithms or problems that declare the own parameter ``name`` (spelled for a line)."""
    return ([f"{spelled('algorithm')} {a}" for a in algorithms.algorithm_names() if name in algorithms.options_of(a)]
            + [f"{spelled('problem')} {p}" for p in problems.problem_names()
               if name in {q.name for q in problems.problem(p).parameters}])


def declares(name: str, algorithm: str, problem: str) -> bool:
    """Whether a run of ``algorithm`` on ``problem`` reads the own parameter ``name`` (common ones: always)."""
    if name in algorithms.declared_options():
        return name in algorithms.options_of(algorithm)
    if name in problems.declared_options():
        return name in {p.name for p in problems.problem(problem).parameters}
    return True


def away_from_default(options: Mapping[str, Any]) -> list[str]:
    """The own parameters in ``options`` (a RunConfig's) set to something other than their declared default."""
    declared = {**algorithms.declared_options(), **problems.declared_options()}
    return [name for name, value in options.items() if name in declared and value != declared[name].default]


def refuse_foreign(algorithm: str, problem: str, options: Mapping[str, Any], given: Iterable[str]) -> None:
    """One line for an own parameter ``given`` to one run whose algorithm and problem do not declare it."""
    for name in given:
        if not declares(name, algorithm, problem):
            refuse(name, options[name], f"only with {' or '.join(takers(name))}, whose parameter it is (this run is "
                                        f"{algorithm} on {problem})")


def refuse_unread(runs: Iterable[tuple[str, str]], options: Mapping[str, Any], given: Iterable[str]) -> None:
    """One line for an own parameter ``given`` to several runs (algorithm, problem) none of which reads it."""
    runs = list(runs)
    for name in given:
        if not any(declares(name, algorithm, problem) for algorithm, problem in runs):
            refuse(name, options[name], f"only with {' or '.join(takers(name))}, whose parameter it is (none of "
                                        "these runs would read it)")
