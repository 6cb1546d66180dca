"""The process environment of a Flower/Ray simulation: quiet, offline, cleaned up.

Telemetry and update checks off, Flower logs at WARNING, Ray usage stats off, and a private
``RAY_TMPDIR`` removed afterwards (Ray never removes its session directories).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from pfxab_flower.errors import ConfigError
from pfxab_flower.parameter import check_against
from pfxab_flower.schema.catalogue import PARAMETERS, check
from pfxab_flower.simulations.flower.leftover_processes import (
    exits_at_once,
    owner_gone,
    owner_token,
    processes_with_marker,
    stop_processes,
)

#: Set for Ray's processes: without it, SIGTERM to a process running Ray's driver core (``pfxab run --engine
#: flower``, ``--executor ray``) met Ray's C++ failure handler, which printed its stack and aborted (SIGABRT)
#: before any clean-up; Ray's crash reports of its workers lose that stack too.
RAY_NO_FAILURE_HANDLER = "RAY_DISABLE_FAILURE_SIGNAL_HANDLER"

QUIET_ENV = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "FLWR_LOG_LEVEL": "WARNING",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
    "RAY_DEDUP_LOGS": "0",
    RAY_NO_FAILURE_HANDLER: "1",
}


@contextmanager
def logger_settings(names: Sequence[str], level: int,
                    filters: Sequence[Callable[[logging.LogRecord], bool]] = ()) -> Iterator[None]:
    """For the block, the loggers ``names`` log at ``level`` through ``filters``; afterwards as they were.

    One place for a simulation's changes to its loggers (Flower's at WARNING for the run, silent after an
    interrupt), so that nothing a run sets outlives it, however it ends.
    """
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(level)
        for keep in filters:
            logger.addFilter(keep)
    try:
        yield
    finally:
        for logger, was in zip(loggers, levels, strict=True):
            for keep in filters:
                logger.removeFilter(keep)
            logger.setLevel(was)


@contextmanager
def our_signal_handlers(ray_dir: Path | None = None) -> Iterator[None]:
    """Within the block, Ray in this process leaves interrupts to ``pfxab`` (see :data:`RAY_NO_FAILURE_HANDLER`).

    ``ray.init`` in the main thread replaces the SIGTERM handler with one that calls ``sys.exit``,
    whose ``SystemExit`` skips the clean-up of an interrupt; Ray offers no switch, so its
    ``set_sigterm_handler`` is made a no-op for the block. And Ray's start (``ray.init``, ``ray.nodes``)
    runs in :func:`~pfxab_flower.simulations.flower.leftover_processes.exits_at_once`: an interrupt unwinding through it
    deadlocked the process for good, so there the interrupt stops the processes carrying ``ray_dir``
    (this run's Ray), removes it and exits at once. (Where Ray has none of these, nothing is changed.)
    """
    try:
        import ray
        import ray._private.utils as ray_utils
    except ImportError:
        yield
        return
    saved = {name: getattr(owner, name) for owner, name in ((ray_utils, "set_sigterm_handler"), (ray, "init"),
                                                             (ray, "nodes")) if hasattr(owner, name)}
    if "set_sigterm_handler" in saved:
        ray_utils.set_sigterm_handler = lambda handler: None
    for name in ("init", "nodes"):
        if name in saved:
            setattr(ray, name, _exiting_at_once(saved[name], ray_dir))
    try:
        yield
    finally:
        if "set_sigterm_handler" in saved:
            ray_utils.set_sigterm_handler = saved["set_sigterm_handler"]
        for name in ("init", "nodes"):
            if name in saved:
                setattr(ray, name, saved[name])


def _exiting_at_once(call: Callable[..., Any], ray_dir: Path | None) -> Callable[..., Any]:
    """``call`` run in :func:`exits_at_once`: interrupted, this run's Ray processes and directory go, then we exit."""
    def clean_up() -> None:
        if ray_dir is not None:
            stop_processes(str(ray_dir))
            shutil.rmtree(ray_dir, ignore_errors=True)

    @functools.wraps(call)
    def at_once(*args: Any, **kwargs: Any) -> Any:
        with exits_at_once(clean_up):
            return call(*args, **kwargs)

    return at_once


def check_num_cpus(num_cpus: float, ray_address: str | None = None) -> float:
    """CPUs per simulated client: Ray waits forever for a client that needs more than a node has.

    On this machine the limit is its cores; on a Ray cluster (``ray_address``, already
    checked reachable) it is the largest alive node's CPUs, asked of the cluster.
    """
    if ray_address is None:
        checked: float = check("num_cpus", num_cpus)
        return checked
    from pfxab_flower.simulations.flower.ray_cluster import cluster_cpus

    largest = cluster_cpus(ray_address)
    cpus = f"{largest:g} CPU" + ("" if largest == 1 else "s")
    on_cluster = replace(PARAMETERS["num_cpus"], valid=lambda value: 0 < value <= largest,
                         rule=f"a number in (0, {largest:g}] (the largest node of the Ray cluster at "
                              f"{ray_address} has {cpus})")
    fits: float = check_against(on_cluster, num_cpus)
    return fits


def backend_config(num_cpus: float, ray_dir: Path, ray_address: str | None = None) -> dict[str, Any]:
    """Flower's Ray backend config: client resources that fit a node, and where Ray runs.

    Without ``ray_address`` Flower starts a private Ray on this machine's cores with its
    files in ``ray_dir`` (address ``local``: a new one, even when ``RAY_ADDRESS`` names a
    cluster, which ``ray.init`` would otherwise join, and refuse ``num_cpus`` for); with it,
    ``init_args`` make ``ray.init`` join that cluster (whose resources are its own: giving
    ``num_cpus`` there is an error in Ray).
    """
    init_args: dict[str, Any] = ({"address": ray_address} if ray_address is not None else
                       {"address": "local", "num_cpus": os.cpu_count() or 1, "num_gpus": 0, "_temp_dir": str(ray_dir)})
    return {"client_resources": {"num_cpus": float(num_cpus), "num_gpus": 0.0}, "init_args": init_args}


#: The longest unix-socket path Linux takes (``sun_path`` holds 108 bytes with the final NUL).
SOCKET_PATH_MAX = 107
#: What Ray adds below a temporary root before its longest socket, measured with Ray 2.55 (a ``TMPDIR`` of 28
#: characters failed, ``AF_UNIX path length cannot exceed 107 bytes``, and hung ``flwr.simulation``):
#: ``ROOT/pfxab-ray-XXXXXXXX[/ray]/session_%Y-%m-%d_%H-%M-%S_%f_PID/sockets/plasma_store`` (``/ray`` when Ray is
#: given the directory as ``RAY_TMPDIR``, as ``pfxab simulate`` does; a ``.N`` suffix if the name is taken).
RAY_BELOW_ROOT = (len("/pfxab-ray-") + 8 + len("/ray") + len("/session_2026-11-27_13-04-41_423260_")
                  + len("/sockets/plasma_store.1"))


def longest_temp_root() -> int:
    """The longest temporary root (bytes) under which every socket Ray makes fits :data:`SOCKET_PATH_MAX`.

    The session directory carries the pid of the process starting Ray: as many digits as this machine's
    largest pid (``/proc/sys/kernel/pid_max``; 7 where it cannot be read).
    """
    try:
        with open("/proc/sys/kernel/pid_max", encoding="ascii") as limit:
            digits = len(limit.read().strip())
    except OSError:
        digits = 7
    return SOCKET_PATH_MAX - RAY_BELOW_ROOT - digits


def short_temp_root() -> str:
    """Where temporary run directories go: ``$TMPDIR`` (or the system's) if Ray's sockets fit below it, else ``/tmp``.

    One line (:class:`ConfigError`, before Ray starts) when neither is short enough and writable:
    a ``TMPDIR`` too long made Ray fail to bind its sockets and the simulation hang.
    """
    root, longest = tempfile.gettempdir(), longest_temp_root()
    for candidate in (root, "/tmp"):
        fits = len(os.fsencode(candidate)) <= longest
        if fits and os.path.isdir(candidate) and os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    raise ConfigError(f"TMPDIR={root!r} is invalid ({len(os.fsencode(root))} bytes: Ray's sockets below it would be "
                      f"longer than {SOCKET_PATH_MAX} bytes, and /tmp is not a writable directory); allowed: a TMPDIR "
                      f"of at most {longest} bytes, or a writable /tmp")


#: The file in each of our temporary directories naming the process that made it (:func:`owner_token`).
OWNER_FILE = ".pfxab-owner"


@contextmanager
def temporary_directory(prefix: str) -> Iterator[Path]:
    """A short-named temporary directory (Ray's socket paths must stay short), removed afterwards.

    It goes under ``$TMPDIR`` when Ray's sockets fit below it (:func:`short_temp_root`), else ``/tmp``. It
    names its owner (:data:`OWNER_FILE`); first, the directories of this prefix whose owner died
    without removing them (SIGKILLed together with its watcher) are removed, once no process uses
    them any more.
    """
    parent = short_temp_root()
    remove_abandoned(Path(parent), prefix)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        (path / OWNER_FILE).write_text(owner_token() + "\n", encoding="ascii")
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def remove_abandoned(parent: Path, prefix: str) -> list[Path]:
    """Remove ``parent/<prefix>*`` directories of ours whose owner has ended and that no process uses; the removed.

    Only directories holding :data:`OWNER_FILE` are candidates (others are not provably ours),
    owned by this user, never followed through links.
    """
    removed = []
    for path in parent.glob(f"{prefix}*"):
        try:
            if path.is_symlink() or not path.is_dir() or path.stat().st_uid != os.getuid():
                continue
            token = (path / OWNER_FILE).read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError):
            continue
        if owner_gone(token) and not processes_with_marker(str(path)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


@contextmanager
def patched_environ(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of the block, then restore them."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def ray_environment() -> Iterator[Path]:
    """Quiet environment variables and a private Ray temp dir (yielded), for an in-process simulation.

    On exit, any process still carrying the temp dir (Ray's GCS, raylet and workers
    take a few seconds to exit after ``ray.shutdown``; some ignore SIGTERM) is
    stopped before the directory is removed.
    """
    with temporary_directory("pfxab-ray-") as ray_dir:
        try:
            with patched_environ({**QUIET_ENV, "RAY_TMPDIR": str(ray_dir)}):
                yield ray_dir
        finally:
            stop_processes(str(ray_dir))
