"""The ``pfxab`` command line: one sub-command per module in :mod:`pfxab_flower.simulations.cli.commands`.

Every error a user can cause is one line on stderr with exit status 2, before any work starts, the
value named by its flag (:func:`pfxab_flower.errors.spelled_as`).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import signal
import sys
import warnings
from collections.abc import Collection, Iterator, Sequence
from typing import Any

import pfxab_flower
from pfxab_flower.errors import ConfigError, ObjectiveError, RunStoppedError, WorkerLostError, spelled_as
from pfxab_flower.printable import shown
from pfxab_flower.simulations.flower.leftover_processes import Interrupted, exit_on_signals

#: Each sub-command: the module that adds its arguments (``add_arguments(parser)``) and runs it
#: (``handle(args)``), and its one-line help. Order is ``pfxab --help``'s.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "run one algorithm on one federation"),
    "compare": ("compare", "run every algorithm on the same federation and seeds; print mean and sd per algorithm"),
    "calibrate": ("calibrate",
                  "sample each site's objective and propose nu1 and rho that eliminate within the horizon"),
    "sweep": ("sweep", "run every configuration of an experiment TOML (resumable)"),
    "plot": ("plot", "draw the figure of a finished sweep or comparison directory"),
    "report": ("report", "print Markdown tables of a finished sweep or comparison directory"),
    "simulate": ("simulate", "run on Flower's Ray simulation engine through `flwr run .`"),
    "landmine-table": ("landmine_table", "compute the landmine reward table shipped in the package"),
}
COMMANDS_PACKAGE = "pfxab_flower.simulations.cli.commands"


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (no usage block) and exit 2.

    Abbreviated flags are refused (``allow_abbrev=False``): ``--alph 0.3`` silently
    meaning ``--alpha`` today would silently mean something else once a flag
    sharing the prefix is added.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # also for every sub-parser (they are built with this class)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


class VersionAction(argparse.Action):
    """``--version``: print ``pfxab VERSION`` and exit; the version is read only then (``pfxab_flower.__version__``)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"pfxab {pfxab_flower.__version__}")
        parser.exit()


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The ``pfxab`` parser; only the sub-commands in ``commands`` (default: all) get their arguments.

    A sub-command's module (and what it imports: numpy, the algorithms, ...) is imported
    only to add its arguments, so ``pfxab --version`` and ``pfxab --help`` import none of
    them and answer at once (``benchmarks/cli_startup.py``).
    """
    parser = OneLineParser(prog="pfxab", description="Personalised federated X-armed bandits on Flower.")
    parser.add_argument("--version", action=VersionAction, help="show program's version number and exit")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for name, (module_name, help_text) in COMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text)
        if commands is None or name in commands:
            module = importlib.import_module(f"{COMMANDS_PACKAGE}.{module_name}")
            module.add_arguments(sub)
            sub.set_defaults(handler=module.handle)
    return parser


def chosen_command(argv: Sequence[str]) -> str | None:
    """The sub-command ``argv`` names: its first word that is not an option (``pfxab`` has no option with a value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def one_line_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                     line: str | None = None) -> str:
    """A warning as ``pfxab: warning: <message>``: one line, not the file, line number and source line."""
    return f"pfxab: warning: {message}\n"


@contextlib.contextmanager
def one_line_warnings() -> Iterator[None]:
    """Within the block, warnings are printed as :func:`one_line_warning` makes them."""
    previous, warnings.formatwarning = warnings.formatwarning, one_line_warning
    try:
        yield
    finally:
        warnings.formatwarning = previous


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``pfxab`` command; its exit status.

    Whatever happens, the command ends with its result or one line on stderr: an error a user
    can cause (status 2), an interrupt (Ctrl-C, SIGTERM, SIGHUP: status 128 + the signal's
    number, after the clean-up has stopped everything the command started), output that went
    away (``| head``: status 141, silently), or memory or open files running out (status 2).
    """
    words = sys.argv[1:] if argv is None else list(argv)
    command = chosen_command(words)
    if command in COMMANDS and (short := resources_short()) is not None:  # before the command loads numpy
        print(f"pfxab {command}: error: {short}", file=sys.stderr)
        return 2
    parser = build_parser(commands=[command] if command in COMMANDS else [])
    args = parser.parse_args(words)
    with one_line_warnings(), exit_on_signals(label=f"pfxab {args.command}"):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    def fail(why: str) -> int:  # one printable line, whatever a path or value in it holds (escapes, newlines)
        print(f"pfxab {args.command}: error: {shown(why)}", file=sys.stderr)
        return 2

    try:
        with spelled_as("flag"):
            status = int(args.handler(args) or 0)
        sys.stdout.flush()  # here, where a reader that has gone is one more case below, not a warning at exit
        return status
    except (ConfigError, ObjectiveError, RunStoppedError, WorkerLostError) as exc:
        return fail(str(exc))
    except KeyboardInterrupt as exc:
        stop = exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)
        print(f"pfxab {args.command}: interrupted ({stop.name})", file=sys.stderr)
        return stop.status
    except BrokenPipeError:  # whoever read our output has gone (`| head -2`): nothing more to say
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the final flush at exit cannot fail again
        return BROKEN_PIPE_STATUS
    except MemoryError:
        return fail("out of memory (the process's address-space limit, `ulimit -v`, or the machine's memory); "
                    "allowed: a smaller run (fewer clients, a shorter horizon, fewer workers) or more memory")
    except ImportError as exc:  # a library that cannot be loaded: too little memory to map it, or a broken install
        return fail(f"a library could not be loaded ({exc}); allowed: more memory (`ulimit -v`), or a complete "
                    "install (pip install pfxab-flower)")
    except OSError as exc:  # what the machine refused where no check could foresee it: said, not a traceback
        if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN):
            return fail(f"the system refused a resource ({exc.strerror}); allowed: more open files (`ulimit -n`), "
                        "processes or memory, or fewer workers")
        where = f" ({exc.filename})" if exc.filename else ""
        return fail(f"the system refused: {exc.strerror or exc}{where}; allowed: a working file system, device "
                    "or output (stdout too)")


def resources_short() -> str | None:
    """Why this process has too few open files or too little address space for any command; ``None`` if not."""
    import resource

    from pfxab_flower.limits import MIN_ADDRESS_SPACE, MIN_OPEN_FILES

    files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if files != resource.RLIM_INFINITY and files < MIN_OPEN_FILES:
        return f"the open-file limit is {files} (`ulimit -n`); allowed: at least {MIN_OPEN_FILES}"
    space = resource.getrlimit(resource.RLIMIT_AS)[0]
    if space != resource.RLIM_INFINITY and space < MIN_ADDRESS_SPACE:
        return (f"the address-space limit is {space >> 20} MiB (`ulimit -v {space >> 10}`); allowed: at least "
                f"{MIN_ADDRESS_SPACE >> 20} MiB")
    return None


#: The exit status of a command whose output was closed (a shell's status for SIGPIPE).
BROKEN_PIPE_STATUS = 128 + signal.SIGPIPE


def console() -> None:
    """The ``pfxab`` program: :func:`main`, then an immediate exit after an interrupt.

    Once an interrupted or failed command has cleaned up (every process it started stopped,
    its temporary files removed) and said so, nothing may keep it alive: a Flower ServerApp
    thread waiting for replies or Ray's exit handlers held it 40-120 s, a half-started pool
    (too few open files) for ever.
    """
    status = main()
    if status != 0:  # an interrupt or an error: said, cleaned up; nothing may hold the process now
        with contextlib.suppress(OSError):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":
    console()
