"""Command-line flags, derived from each parameter's one declaration (:func:`pfxab_flower.schema.catalogue.declared`).

Flags keep the user's text for the declared check, so a bad value gets the same one line from every
entry point; help, defaults and a choice's ``{a,b}`` list are the declaration's.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from pfxab_flower.errors import SPELLINGS
from pfxab_flower.parameter import Parameter
from pfxab_flower.schema.catalogue import RENAMED, declared, run_config_value
from pfxab_flower.schema.own_options import refuse_foreign
from pfxab_flower.schema.run_config import RunConfig


def add_run_options(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """One ``--flag`` per parameter of a :class:`RunConfig` (defaults shown from the declaration)."""
    for name in RunConfig.names():
        if name not in skip:
            add_parameter_flag(parser, name)
    for former, name in RENAMED.items():
        if name in RunConfig.names() and name not in skip:
            parser.add_argument(SPELLINGS["flag"](former), dest=name, action=RenamedFlag)


class RenamedFlag(argparse.Action):
    """A former flag (``--clients N``): read as the flag it became (``--num-clients N``), with a one-line warning on
    stderr naming the new flag, and not listed by ``--help``.

    Only the command line keeps its former flag (commands in scripts, notes and shell histories outlive a rename);
    a former keyword, run-config or sweep key is refused in one line (:func:`~pfxab_flower.schema.catalogue.
    refuse_renamed`). The value is checked as the new flag's is; given with the new flag, the last one given wins,
    as for any repeated flag."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        former = option_string or self.option_strings[0]
        new = SPELLINGS["flag"](self.dest)
        print(f"{parser.prog}: warning: {former} is deprecated, read as {new} {values}; use {new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_parameter_flag(parser: argparse.ArgumentParser, name: str, *, flag: str | None = None,
                       dest: str | None = None, typed: bool = False, default: object = None) -> None:
    """The ``--flag`` of the declared parameter ``name`` (kebab-case and ``args.name`` unless ``flag``/``dest``).

    By default the flag keeps the user's text (``None`` if not given) for :func:`~pfxab_flower.schema.catalogue.parse`
    to check; with ``typed`` it holds the declared default and argparse converts it to the declared type.
    ``default``: this command's own default (as text, checked like a given value), e.g. ``sweep --workers``.
    """
    p = declared(name)
    shown = run_config_value(name, p.default if default is None else default)
    extra = ({"type": p.kind, "default": p.default} if typed else
             {"default": None if default is None else str(default)})
    parser.add_argument(flag or "--" + p.key, dest=dest or name, metavar=_metavar(p),
                        help=f"{p.help}{_described(p)} (default: {shown if shown != '' else p.unset})", **extra)


def _metavar(p: Parameter) -> str:
    """``{a,b,c}`` for a choice parameter (as argparse shows ``choices``), else the name in capitals."""
    return "{" + ",".join(p.choices()) + "}" if p.choices is not None else p.name.upper()


def _described(p: Parameter) -> str:
    """``" (a: what a is; b: ...)"`` when a choice parameter's choices carry descriptions (the problems do)."""
    described = {name: text for name, text in p.choices().items() if text} if p.choices is not None else {}
    return " (" + "; ".join(f"{name}: {text}" for name, text in described.items()) + ")" if described else ""


def add_replace_flag(parser: argparse.ArgumentParser) -> None:
    """``--replace``: the one way a command replaces another kind's result (a run over a sweep, ...)."""
    parser.add_argument("--replace", action="store_true",
                        help="replace another kind's result in --out (a sweep's, a run's or a comparison's; never "
                             "files pfxab did not write, nor a directory a running sweep holds), and say what")


def config_from_args(args: argparse.Namespace, **overrides: object) -> RunConfig:
    """The validated :class:`RunConfig` of the flags the user gave.

    A command of one run (its ``--algorithm`` flag) refuses another algorithm's or problem's own flag
    (``pfxab run --algorithm pf-xab --candidates 10``, ``--problem garland --fields 1,2``) as Python
    refuses the keyword; a command of several runs, one that none of its runs reads.
    """
    given = {name: getattr(args, name) for name in RunConfig.names() if getattr(args, name, None) is not None}
    given.update(overrides)
    config = RunConfig.from_mapping(given)
    if hasattr(args, "algorithm"):
        refuse_foreign(config.algorithm, config.problem, config.options, given)
    return config
