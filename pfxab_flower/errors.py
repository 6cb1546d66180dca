"""Exceptions that the command line turns into one-line messages (exit status 2), and how they name a value."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class ConfigError(ValueError):
    """A parameter or input is invalid; the message names the value and what is allowed."""


class ObjectiveError(ValueError):
    """A user objective raised or returned a non-finite value or a wrong shape."""


class RunStoppedError(RuntimeError):
    """The server stopped the run on purpose (e.g. too few clients answered); the message says why."""


class WorkerLostError(RuntimeError):
    """A worker process running some of the jobs died (killed, out of memory, a crash); the message names them."""


class IncompleteRunError(RuntimeError):
    """A run lacks what its result needs; the message says what.

    Either the run ended without every client's final report and pull log (the server
    driver cannot score it), or a run directory on disk misses a file or holds a damaged
    one (a sweep then runs it again).
    """


#: How an error spells a parameter, by where its value came from: a Python keyword argument or attribute
#: (``noise_sigma``, the default), a Flower run-config or TOML key (``noise-sigma``), a flag (``--noise-sigma``).
SPELLINGS: dict[str, Callable[[str], str]] = {
    "keyword": lambda name: name,
    "key": lambda name: name.replace("_", "-"),
    "flag": lambda name: "--" + name.replace("_", "-"),
}
_SPELLING: ContextVar[str | None] = ContextVar("pfxab_flower_spelling", default=None)


@contextmanager
def spelled_as(spelling: str, *, unless_set: bool = False) -> Iterator[None]:
    """Inside, errors name parameters as ``spelling`` (a key of :data:`SPELLINGS`): the entry point's.

    The checks are the same from everywhere; only the name in the one-line error follows
    where the value came from, so the user can find it: ``pfxab`` says ``"flag"``, a sweep's
    TOML file and a Flower run config ``"key"``; Python needs nothing (``"keyword"``).
    With ``unless_set`` an entry point further out keeps its spelling (``pfxab simulate``
    passes its flags on as a run config).
    """
    if spelling not in SPELLINGS:
        raise ValueError(f"spelling={spelling!r} is invalid; allowed: {', '.join(SPELLINGS)}")
    token = None if unless_set and _SPELLING.get() is not None else _SPELLING.set(spelling)
    try:
        yield
    finally:
        if token is not None:
            _SPELLING.reset(token)


def spelled(name: str) -> str:
    """The parameter ``name`` (snake_case) as the current entry point spells it (:func:`spelled_as`)."""
    return SPELLINGS[_SPELLING.get() or "keyword"](name)
