"""Run the current command inside a network namespace that has only loopback.

Why: Ray replaces ``127.0.0.1`` in an address with the machine's outward address
(``ray._private.services.resolve_ip_for_localhost``), so a Ray cluster "on loopback"
and every Flower simulation (GCS, raylet, workers, driver) talk over the external
interface. In a network namespace whose only interface is ``lo``, Ray's node address
is 127.0.0.1, nothing can leave the machine, and the ports are private to the run (no
clash with another job's Ray or SuperLink).

How: :func:`enter` re-executes the running command under ``unshare --net`` (as root)
or ``unshare --net --map-root-user`` (any user, where unprivileged user namespaces
are allowed), with ``PFXAB_NETNS=inside`` in its environment so that the new process
does not do it again; that process brings ``lo`` up (an ioctl, the same call that
reads the interface flags, so no ``ip`` command is needed) and goes on. Where no
namespace can be made, :func:`enter` returns the reason and the caller decides: the
test suite skips what starts Ray or Flower's servers, ``python -m benchmarks``
refuses those sections. ``PFXAB_NETNS=off`` opts out (as if none could be made).

Used by ``tests/conftest.py`` (the README's ``pytest``), ``benchmarks/__main__.py`` and
``.ci/wheel-check``: ``python tests/loopback_namespace.py COMMAND [ARGS...]`` runs
COMMAND inside such a namespace or refuses with one line. It lives with the tests
because the tests are its main user (the benchmarks already borrow the tests' helpers);
it imports only the standard library, so it runs under any Python 3.11, outside the
project's virtual environment too.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import struct
import subprocess
import sys
from collections.abc import Callable, Sequence

#: ``off``: never re-execute (developers); ``inside``: set by the re-execution (stops a loop).
ENV_VAR = "PFXAB_NETNS"
OFF, INSIDE = "off", "inside"
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = "16sH"  # struct ifreq: the interface name, then ifr_flags (the rest of the union is unused)


def _flags(sock: socket.socket, name: str) -> int:
    request = struct.pack(_IFREQ, name.encode(), 0)
    return struct.unpack(_IFREQ, fcntl.ioctl(sock, _SIOCGIFFLAGS, request)[: struct.calcsize(_IFREQ)])[1]


def interfaces_up() -> list[str]:
    """The interfaces of this process's network namespace that are up.

    Asked of the kernel (``if_nameindex`` and ``SIOCGIFFLAGS``), never of ``/sys/class/net``,
    which shows the namespace sysfs was mounted in, not the process's own.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        return [name for _, name in socket.if_nameindex() if _flags(sock, name) & _IFF_UP]


def bring_loopback_up() -> None:
    """Set ``lo`` up (a new namespace starts with it down); needs CAP_NET_ADMIN there, which unshare gives."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        flags = _flags(sock, "lo")
        if not flags & _IFF_UP:
            fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))


def loopback_only_reason() -> str | None:
    """``None`` if this process can use 127.0.0.1 and nothing else, else why not (one phrase)."""
    up = interfaces_up()
    outward = [name for name in up if name != "lo"]
    if outward:
        return f"interfaces other than lo are up: {', '.join(outward)}"
    if "lo" not in up:
        try:
            bring_loopback_up()
        except OSError as exc:
            return f"lo is down and cannot be brought up ({exc.strerror})"
    return None


def unshare_prefix() -> list[str] | str:
    """The ``unshare`` command line that makes a namespace here, or why none does.

    As root ``unshare --net`` suffices; otherwise (or where root may not, as in some
    containers) ``--map-root-user`` adds a user namespace in which we may. Each candidate is
    tried with ``true`` first: a refusal must not replace the running process.
    """
    unshare = shutil.which("unshare")
    if unshare is None:
        return "no unshare command (util-linux)"
    candidates = ([[unshare, "--net"]] if os.geteuid() == 0 else []) + [[unshare, "--net", "--map-root-user"]]
    failure = ""
    for prefix in candidates:
        probe = subprocess.run([*prefix, "true"], capture_output=True, text=True, check=False)
        if probe.returncode == 0:
            return prefix
        failure = (probe.stderr.strip().splitlines() or [f"exit status {probe.returncode}"])[-1]
    return f"{' '.join(candidates[-1][1:])} failed: {failure}"


def enter(command: Sequence[str], who: str, before_exec: Callable[[], None] | None = None) -> str | None:
    """Make sure this process runs where only loopback exists: ``None`` once it does, else the reason it cannot.

    If it does not yet and a namespace can be made, this does not return: ``command`` (the
    full command line of this process, interpreter first) is executed again inside one,
    after ``before_exec`` (e.g. handing pytest's captured file descriptors back) and one
    line on stderr saying so.
    """
    state = os.environ.get(ENV_VAR, "")
    if state == INSIDE or not [name for name in interfaces_up() if name != "lo"]:
        return loopback_only_reason()
    if state == OFF:
        return f"{ENV_VAR}={OFF}"
    prefix = unshare_prefix()
    if isinstance(prefix, str):
        return prefix
    if before_exec is not None:
        before_exec()
    print(f"{who}: running inside a loopback-only network namespace ({' '.join(prefix[1:])}), so Ray and Flower "
          f"stay on 127.0.0.1 ({ENV_VAR}={OFF} to run here)", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os.execve(prefix[0], [*prefix, *command], {**os.environ, ENV_VAR: INSIDE})
    raise AssertionError("unreachable: execve returned")


def main(argv: Sequence[str]) -> int:
    """``python tests/loopback_namespace.py COMMAND [ARGS...]``: COMMAND in a loopback-only namespace, or one line."""
    if not argv:
        print("loopback_namespace: error: no command given; usage: "
              "python tests/loopback_namespace.py COMMAND [ARGS...]", file=sys.stderr)
        return 2
    reason = enter([sys.executable, os.path.abspath(__file__), *argv], "loopback_namespace")
    if reason is not None:
        print(f"loopback_namespace: error: cannot run {argv[0]} in a loopback-only network namespace: {reason}",
              file=sys.stderr)
        return 2
    os.execvp(argv[0], list(argv))
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
