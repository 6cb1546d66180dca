"""A node's state on the site's disk, so that a SuperNode that restarts takes its client back where it was.

A node whose config names a ``state-dir`` keeps a copy of its ``context.state`` there, one file per
run, written atomically before each reply leaves, and takes it back when it starts a run's message
with an empty state. How it combines with authentication: docs/deployment.md. The file is
:mod:`.state_codec`'s (no pickle).
"""

from __future__ import annotations

import os
from logging import INFO
from pathlib import Path

from flwr.app import Context, Message
from flwr.clientapp.typing import ClientAppCallable
from flwr.common import log

from pfxab_flower.client_apps import state_codec
from pfxab_flower.errors import ConfigError
from pfxab_flower.storage.outputs import OutputError, atomic_file

#: The node-config key naming the directory of the node's state copies.
STATE_DIR = "state-dir"


def state_file(context: Context) -> Path | None:
    """The file that keeps this node's state for the context's run (``None``: the node config names no directory)."""
    directory = context.node_config.get(STATE_DIR)
    if directory is None:
        return None
    if not isinstance(directory, str) or not directory:
        raise ConfigError(f"{STATE_DIR}={directory!r} is invalid; allowed: a directory path in quotes "
                          f"(--node-config '{STATE_DIR}=\"/path\"')")
    return Path(directory).expanduser() / f"run-{int(context.run_id)}.state"


def restore_state(context: Context, path: Path) -> bool:
    """Fill an empty ``context.state`` from ``path`` if it exists; whether it did (one line if it is unreadable)."""
    if len(context.state) > 0 or not path.is_file():
        return False
    try:
        saved = state_codec.decode(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{STATE_DIR}={str(path.parent)!r} is invalid: {path.name} cannot be read "
                          f"({getattr(exc, 'strerror', None) or exc}); allowed: a directory whose run files this "
                          "node wrote") from None
    for key, record in saved.items():
        context.state[key] = record
    return True


def save_state(context: Context, path: Path) -> None:
    """Write ``context.state`` to ``path`` atomically (the old copy stays whole if the write fails)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path) as tmp:
            tmp.write_bytes(state_codec.encode(context.state))
        os.chmod(path, 0o600)  # a client's history is the site's own
    except (OSError, OutputError) as exc:
        raise ConfigError(f"{STATE_DIR}={str(path.parent)!r} is invalid: {path.name} could not be written "
                          f"({getattr(exc, 'strerror', None) or exc}); allowed: a writable directory") from None


def keep_state_on_disk(message: Message, context: Context, call_next: ClientAppCallable) -> Message:
    """A mod: restore the node's state from its ``state-dir`` copy after a restart, save it after each answer.

    A message answered with an error (an objective that raised) leaves the copy as it was,
    as Flower leaves no trace of the failed message's work either.
    """
    path = state_file(context)
    if path is None:
        return call_next(message, context)
    if restore_state(context, path):
        log(INFO, "pfxab: Flower node %s took its state for run %s back from %s", context.node_id, context.run_id,
            path)
    reply = call_next(message, context)
    if not reply.has_error():
        save_state(context, path)
    return reply
