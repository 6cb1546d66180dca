"""Exceptions that the command line turns into one-line messages (exit status 2)."""


class ConfigError(ValueError):
    """A parameter or input is invalid; the message names the value and what is allowed."""


class ObjectiveError(ValueError):
    """A user objective raised or returned a non-finite value or a wrong shape."""


class RunStoppedError(RuntimeError):
    """The server stopped the run on purpose (e.g. too few clients answered); the message says why."""
