"""An existing Ray cluster as the place where runs, Flower clients and SVM fits execute (``--ray-address``).

The one place that talks to a user's cluster: it checks an address before any work, connects, and
plugs a job runner and a fit mapper into the core's hooks (:mod:`pfxab_flower.processes.remote`); the driver
still writes every result itself. Ray places the tasks. See docs/scaling.md.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import Any

from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.processes.remote import TASK_ENV, FitMapper, JobRunner, fits_with
from pfxab_flower.simulations.flower.simulation_environment import RAY_NO_FAILURE_HANDLER, our_signal_handlers

#: How long the check waits for the head node's answer (seconds).
CONNECT_TIMEOUT = 5.0
#: Environment every connection sets for Ray's processes: no usage stats, no log deduplication.
QUIET = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DEDUP_LOGS": "0", "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
         RAY_NO_FAILURE_HANDLER: "1"}


#: Longest host name (DNS: 253 characters); a longer one broke the socket layer's IDNA encoding with a traceback.
MAX_HOST_LENGTH = 253


def parse_ray_address(text: object) -> str:
    """``HOST:PORT`` of a Ray head node, checked for form only; one-line :class:`ConfigError` otherwise."""
    value = str(text).strip()
    host, sep, port = value.rpartition(":")
    if (not sep or not host or len(host) > MAX_HOST_LENGTH or not port.isascii() or not port.isdecimal()
            or not 0 < int(port) < 65536):
        shown = value if len(value) <= 80 else value[:60] + "..."
        raise ConfigError(f"{spelled('ray_address')}={shown!r} is invalid; allowed: HOST:PORT of a running Ray head "
                          f"node (the address `ray start --head` prints, e.g. 127.0.0.1:6379; a host of at most "
                          f"{MAX_HOST_LENGTH} characters)")
    return value


def check_ray_address(text: object, timeout: float = CONNECT_TIMEOUT) -> str:
    """The address, once a Ray head node answers there as Ray; a one-line :class:`ConfigError` if it does not.

    Before Ray or any run starts, the GCS (the head node's control service) is asked
    ``CheckAlive`` over gRPC, bounded by ``timeout``: ``ray.init`` on a dead address
    retried for a minute, and on a port that accepts TCP but is not Ray (an HTTP server)
    for 200 s and more, then raised a multi-line error. An answer names Ray's version.
    """
    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    address = parse_ray_address(text)
    host, _, port = address.rpartition(":")
    target = f"{host}:{port}" if not host.startswith("[") else address
    try:
        host.strip("[]").encode("idna")
        with grpc.insecure_channel(target) as channel:
            reply = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).CheckAlive(  # type: ignore[no-untyped-call]
                gcs_service_pb2.CheckAliveRequest(), timeout=timeout)  # type: ignore[attr-defined]  # generated
        if not reply.ray_version:
            raise ValueError("the service there did not say which Ray it runs")
    except UnicodeError:
        raise ConfigError(f"{spelled('ray_address')}={address!r} is invalid (the host is not a valid name); allowed: "
                          "HOST:PORT of a running Ray head node") from None
    except (grpc.RpcError, ValueError) as exc:
        reason = _rpc_reason(exc)
        raise ConfigError(f"{spelled('ray_address')}={address!r} cannot be reached as a Ray head node ({reason}); "
                          "allowed: the HOST:PORT of a running Ray head node (start one with `ray start --head`)"
                          ) from None
    return address


def _rpc_reason(exc: Exception) -> str:
    """Why the GCS check failed, in a few words (gRPC's details name the transport error)."""
    import grpc

    if not isinstance(exc, grpc.RpcError):
        return str(exc)
    details = " ".join(str(exc.details() or "").split())
    code = exc.code()
    if "Connection refused" in details:
        return "Connection refused"
    if "HTTP/2" in details or code.name == "UNIMPLEMENTED":
        return "something answers on that port, but not Ray's GCS"
    if code.name == "DEADLINE_EXCEEDED":
        return "no answer in time"
    return details.rsplit(": ", 1)[-1][:120] or code.name


def executor_address(executor: object, ray_address: object) -> str | None:
    """The checked cluster address runs go to (``--executor ray --ray-address A``), or ``None`` for local processes.

    One-line :class:`ConfigError` for an unknown executor, ``ray`` without an address (or
    an address without ``ray``), or an address that cannot be reached; all before any work.
    """
    from pfxab_flower.schema.catalogue import parse

    kind = parse("executor", "processes" if executor is None else executor)
    if kind == "processes":
        if ray_address is not None:
            raise ConfigError(f"{spelled('ray_address')}={ray_address!r} is invalid with {spelled('executor')}="
                              f"'processes'; allowed: no {spelled('ray_address')}, or {spelled('executor')}='ray' to "
                              "run on that cluster")
        return None
    if ray_address is None:
        raise ConfigError(f"{spelled('executor')}='ray' is invalid without a {spelled('ray_address')}; allowed: "
                          f"{spelled('executor')}='processes', or {spelled('ray_address')}=HOST:PORT of a running "
                          "Ray head node")
    return check_ray_address(ray_address)


@contextmanager
def connected(address: str) -> Iterator[Any]:
    """A driver connection to the cluster at ``address`` (``ray`` module yielded), closed afterwards.

    If this process is already connected (e.g. Flower's engine did it), that connection is used.
    """
    import ray

    if ray.is_initialized():
        yield ray
        return
    for key, value in QUIET.items():
        os.environ.setdefault(key, value)
    with our_signal_handlers():  # SIGTERM stays pfxab's: an interrupt cleans up
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False,
                 runtime_env={"env_vars": {TASK_ENV: "1", **QUIET}})
    try:
        yield ray
    finally:
        ray.shutdown()


def cluster_cpus(address: str) -> float:
    """The most CPUs any alive node of the cluster has (what one Flower client may ask for)."""
    with connected(address) as ray:
        return max((node["Resources"].get("CPU", 0.0) for node in ray.nodes() if node.get("Alive")), default=0.0)


def run_on_ray(
    fn: Callable[..., Any],
    jobs: Sequence[tuple[Any, ...]],
    on_done: Callable[[int, Any, BaseException | None], None],
    address: str,
) -> None:
    """Call ``fn(*job)`` for every job as a Ray task (one CPU each) on the cluster at ``address``.

    ``on_done(index, result, error)`` is called in this process as each task ends, in
    completion order; a task's exception is passed on (as its original type when Ray
    can give it), not raised, so one failing run loses no other. Ctrl-C cancels the
    queued and running tasks and re-raises. ``fn`` must be importable on the workers
    (a module-level function of an installed package).
    """
    with connected(address) as ray:
        task = ray.remote(num_cpus=1, max_retries=0)(fn)
        pending = {task.remote(*job): index for index, job in enumerate(jobs)}
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    index = pending.pop(ref)
                    try:
                        result, error = ray.get(ref), None
                    except ray.exceptions.RayTaskError as exc:
                        result, error = None, _cause(exc)
                    except ray.exceptions.RayError as exc:  # a worker died, the task was cancelled, ...
                        result, error = None, RuntimeError(str(exc).splitlines()[0] if str(exc) else repr(exc))
                    on_done(index, result, error)
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise


def ray_runner(address: str) -> JobRunner:
    """The core's job runner for the cluster at ``address`` (:func:`run_on_ray`)."""
    return partial(run_on_ray, address=address)


def ray_fit_mapper(address: str) -> FitMapper:
    """The core's fit mapper for the cluster at ``address``: each call a task, results in order."""

    def mapper(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> Iterator[Any]:
        with connected(address) as ray:
            task = ray.remote(num_cpus=1, max_retries=0)(fn)
            refs = [task.remote(*call) for call in calls]
            try:
                for ref in refs:
                    yield ray.get(ref)
            except BaseException:  # Ctrl-C or a failed fit: drop the queued fits instead of finishing them
                for ref in refs:
                    ray.cancel(ref, force=True)
                raise

    return mapper


def fits_on(address: str | None) -> AbstractContextManager[None]:
    """Within the block, this process's landmine SVM fits run on the cluster at ``address`` (``None``: locally)."""
    return fits_with(ray_fit_mapper(address) if address is not None else None)


def _cause(exc: BaseException) -> BaseException:
    """The exception a task raised, as its own type where Ray can rebuild it."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else RuntimeError(str(exc).splitlines()[0])
