"""The loopback-only network namespace the suite runs in (``tests/loopback_namespace.py``)."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests import loopback_namespace
from tests.patience import patient

HELPER = Path(loopback_namespace.__file__)


def test_a_session_in_the_namespace_reaches_nothing_but_loopback() -> None:
    reason = loopback_namespace.loopback_only_reason()
    if reason is not None:
        pytest.skip(f"this session does not run in a loopback-only network namespace ({reason})")
    assert loopback_namespace.interfaces_up() == ["lo"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe, pytest.raises(OSError) as refused:
        probe.connect(("192.0.2.1", 9))  # any outward address (TEST-NET-1): no route from here
    assert refused.value.errno == errno.ENETUNREACH


def test_without_unshare_the_reason_is_named(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert loopback_namespace.unshare_prefix() == "no unshare command (util-linux)"


def test_an_unshare_that_is_refused_is_named_with_its_message(monkeypatch, tmp_path) -> None:
    refusing = tmp_path / "unshare"
    refusing.write_text("#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n")
    refusing.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert loopback_namespace.unshare_prefix() == (
        "--net --map-root-user failed: unshare: unshare failed: Operation not permitted"
    )


@pytest.mark.loopback
def test_the_command_line_runs_a_command_inside_or_says_what_is_wrong_in_one_line() -> None:
    inside = subprocess.run([sys.executable, str(HELPER), sys.executable, "-c", "print('ran')"],
                            capture_output=True, text=True, timeout=patient(60))
    assert inside.returncode == 0 and inside.stdout == "ran\n", inside.stderr
    empty = subprocess.run([sys.executable, str(HELPER)], capture_output=True, text=True, timeout=patient(60))
    assert empty.returncode == 2 and empty.stdout == ""
    assert empty.stderr.splitlines() == [
        "loopback_namespace: error: no command given; usage: python tests/loopback_namespace.py COMMAND [ARGS...]"
    ]
