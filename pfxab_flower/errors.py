"""Exceptions that the command line turns into one-line messages (exit status 2), and how they name a value."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class ConfigError(ValueError):
    """A parameter or input is invalid; the message names the value and what is allowed."""


class ObjectiveError(ValueError):
    """A user objective raised or returned a non-finite value or a wrong shape."""


class UnknownAlgorithmError(ConfigError, KeyError):
    """A name no algorithm is registered under, looked up in a mapping of algorithms (``STRATEGIES[name]``).

    A ``KeyError``, as a mapping's lookup must raise, whose text is the one line naming the registered
    algorithms (a plain ``KeyError`` would print only the quoted name).
    """

    __str__ = Exception.__str__


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


class ClientFailedError(RuntimeError):
    """A node failed to answer a message; the message is :func:`client_failure_text` (client, site, exception).

    A ClientApp raises it in place of what its session raised, so that whatever Flower does to
    the exception on its way to the server (its simulation keeps only ``str(exception)``, a
    SuperNode adds the class name) the server reads the type, the message and the site.
    """


def client_failure_text(exc: BaseException, client: int | None, site: str | None) -> str:
    """One line for a client's failure: ``client 1 (site 'lab-a'): KeyError: 'data-dir'``.

    The exception keeps its type and message (``str(KeyError('data-dir'))`` alone is
    ``'data-dir'``); pfxab-flower's own errors are already one line that says what failed, so
    they keep their message only. The client index (``None``: not known yet) and the node's
    ``site`` label name where it failed. The one place that writes a client failure's text
    (escaping what a peer sent is the server's job, where the text enters).
    """
    if isinstance(exc, ClientFailedError):
        return str(exc)
    message = " ".join(str(exc).split())
    own = type(exc).__module__.split(".")[0] == "pfxab_flower"
    what = message if own and message else f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    where = "" if client is None else f"client {client}"
    if site is not None:
        where = f"{where} (site {site!r})" if where else f"site {site!r}"
    if not where:
        return what
    if client is not None and what.startswith(f"client {client}: "):  # e.g. an injected failure names its client
        what = what[len(f"client {client}: "):]
    return f"{where}: {what}"


#: :func:`client_failure_text`'s line read back: ``client N`` and/or ``(site 'label')``, then what failed.
_FAILURE_LINE = re.compile(r"^(?:client (?P<client>\d{1,9})(?: \(site (?P<site>'[^']*'|\"[^\"]*\")\))?"
                           r"|site (?P<only_site>'[^']*'|\"[^\"]*\")): (?P<what>.+)$", re.DOTALL)


def read_client_failure(text: str) -> tuple[int | None, str | None, str] | None:
    """The client index, site label and what failed in a :func:`client_failure_text` line, or ``None`` if ``text``
    is not one (a peer's other text). Only for naming a failure: what a failing node claims is never trusted more."""
    found = _FAILURE_LINE.match(text)
    if found is None:
        return None
    quoted = found["site"] or found["only_site"]
    return (int(found["client"]) if found["client"] else None, quoted[1:-1] if quoted else None, found["what"])
