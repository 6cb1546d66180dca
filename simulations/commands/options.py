"""Command-line flags, derived from the one declaration of the parameters (:data:`pfxab_flower.config.PARAMETERS`).

Flags are read as strings and converted by :class:`~pfxab_flower.config.RunConfig`
(or :func:`~pfxab_flower.config.parse`), so a bad value gets the same one-line
message from every entry point; their help text and defaults are the declaration's.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from pfxab_flower.config import PARAMETERS, RunConfig, run_config_value


def add_run_options(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """One ``--flag`` per :class:`RunConfig` field (defaults shown from the declaration)."""
    for f in fields(RunConfig):
        if f.name not in skip:
            add_parameter_flag(parser, f.name)


def add_parameter_flag(parser: argparse.ArgumentParser, name: str, *, flag: str | None = None,
                       dest: str | None = None, typed: bool = False, default: object = None) -> None:
    """The ``--flag`` of the declared parameter ``name`` (kebab-case and ``args.name`` unless ``flag``/``dest``).

    By default the flag keeps the user's text (``None`` if not given) for :func:`~pfxab_flower.config.parse`
    to check; with ``typed`` it holds the declared default and argparse converts it to the declared type.
    ``default``: this command's own default (as text, checked like a given value), e.g. ``sweep --workers``.
    """
    p = PARAMETERS[name]
    shown = run_config_value(name, p.default if default is None else default)
    extra = ({"type": p.kind, "default": p.default} if typed else
             {"default": None if default is None else str(default)})
    parser.add_argument(flag or "--" + p.key, dest=dest or name, metavar=name.upper(),
                        help=f"{p.help} (default: {shown if shown != '' else p.unset})", **extra)


def config_from_args(args: argparse.Namespace, **overrides: object) -> RunConfig:
    """The validated :class:`RunConfig` of the flags the user gave."""
    given = {f.name: getattr(args, f.name) for f in fields(RunConfig) if getattr(args, f.name, None) is not None}
    given.update(overrides)
    return RunConfig.from_mapping(given)
