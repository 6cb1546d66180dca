"""Only registered sites join: authenticated SuperNodes, each bound to its client, and a restart that takes it back.

The real test (slow, loopback) runs a SuperLink with TLS and ``--enable-supernode-auth``,
three registered SuperNodes (a key pair each, registered with ``flwr supernode register``)
and a fourth one whose key was never registered, then ``flwr run`` on the bundled app:

* the stranger is refused by the SuperLink (its process exits, it is never listed) and the
  run never counts it;
* site 1's SuperNode is stopped (SIGTERM) during the run and started again with its key: it
  comes back under its registered node id and, with its state in its ``state-dir``, takes
  its client back: not lost, every one of its ``T`` pulls scored;
* site 2 is unregistered during the run (``flwr supernode unregister``): its client is lost,
  named in the summary with its registered node id.

The fast tests check the pieces without processes: the key files, the state kept on disk
(over the in-process loopback grid, a node that comes back with an empty state), and the
one-line errors.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_ssh_private_key, load_ssh_public_key
from flwr.app import Context, RecordDict

from pfxab_flower.client_apps import federation_sessions, message_client_app
from pfxab_flower.client_apps.site_state import STATE_DIR, state_file
from pfxab_flower.errors import ConfigError
from pfxab_flower.problems import build_federation
from pfxab_flower.running.trust import pull_log_rewritten
from pfxab_flower.schema.run_config import AppOptions, RunConfig
from pfxab_flower.simulations.flower import local_deployment as dep
from pfxab_flower.simulations.flower.flwr_run_launcher import run_config_argument
from pfxab_flower.simulations.flower.leftover_processes import processes_with_marker
from pfxab_flower.strategies import PFXAB
from tests.deployment_tools import flwr_run_streaming, log_tail, node_status, sign_off, start_until_accepted
from tests.message_loopback import LoopbackGrid, run_loopback
from tests.patience import patient

ROOT = Path(__file__).resolve().parents[1]


# -- the pieces -------------------------------------------------------------------------------------
def test_site_keys_are_p384_openssh_pairs_with_a_private_file_only_the_owner_reads(tmp_path: Path) -> None:
    made = dep.make_site_keys(tmp_path, ["clinic-a", "clinic-b"])
    assert [keys.site for keys in made] == ["clinic-a", "clinic-b"]
    for keys in made:
        private = load_ssh_private_key(keys.private_key.read_bytes(), None)
        public = load_ssh_public_key(keys.public_key.read_bytes())
        assert isinstance(private, ec.EllipticCurvePrivateKey) and private.curve.name == "secp384r1"
        assert private.public_key().public_numbers() == public.public_numbers()  # type: ignore[union-attr]
        assert keys.private_key.stat().st_mode & 0o777 == 0o600
        assert keys.public_key.read_text().startswith("ecdsa-sha2-nistp384 ")
    assert made[0].public_key.read_bytes() != made[1].public_key.read_bytes()


@pytest.mark.parametrize("sites, bad", [(["ok", "../etc"], "site='../etc'"), (["a b"], "site='a b'"),
                                        (["x", "x"], "repeat a name")])
def test_bad_site_names_are_refused_in_one_line_before_any_file(tmp_path: Path, sites: list[str], bad: str) -> None:
    with pytest.raises(ConfigError, match="allowed") as caught:
        dep.make_site_keys(tmp_path / "keys", sites)
    assert bad in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "keys").exists()


def test_authentication_without_tls_is_refused_before_any_process(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="authenticate=True without tls is invalid"), \
            dep.deployment(2, tmp_path, authenticate=True, startup_timeout=patient(60)):
        pass
    assert not (tmp_path / "flwr-home").exists()


def test_the_keys_command_makes_one_pair_per_site(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert dep.main(["keys", str(tmp_path), "site-0", "site-1"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site-0", "site-0.pub", "site-1", "site-1.pub"]
    assert "flwr supernode register" in capsys.readouterr().out
    assert dep.main(["keys", str(tmp_path / "no"), "bad name"]) == 2
    assert "site='bad name' is invalid" in capsys.readouterr().err


def test_an_existing_key_is_never_replaced(tmp_path: Path) -> None:
    """Making keys again for a site that has them refuses, before any file is written: its key may be registered."""
    (first,) = dep.make_site_keys(tmp_path, ["site-0"])
    before = {path: path.read_bytes() for path in (first.private_key, first.public_key)}
    with pytest.raises(ConfigError, match=r"site-0. exists; allowed: key files that do not exist yet"):
        dep.make_site_keys(tmp_path, ["site-1", "site-0"])
    assert {path: path.read_bytes() for path in before} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site-0", "site-0.pub"]  # site-1's pair not begun


def test_a_state_dir_that_is_not_a_string_is_named() -> None:
    context = Context(run_id=7, node_id=1, node_config={STATE_DIR: 3}, state=RecordDict(), run_config={})
    with pytest.raises(ConfigError, match="state-dir=3 is invalid; allowed: a directory path"):
        state_file(context)


class RestartingGrid(LoopbackGrid):
    """Node 102 (client 2) is not listed during phase 2, then comes back with an empty state: a restarted SuperNode.

    Four clients: phase 1 is messages 1-8; phase 2's two exchanges go to the three other
    nodes (messages 9-14); from message 15 on, node 102 is listed again, with a new
    ``Context`` whose state is empty, as a SuperNode process that started again.
    """

    def __init__(self, *args, state_dir: Path | None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.state_dir = state_dir
        for node, context in self.contexts.items():
            if state_dir is not None:
                context.node_config[STATE_DIR] = str(state_dir / str(node))
        self.restarted = False

    def get_node_ids(self) -> Iterable[int]:
        if self.sent >= 14 and not self.restarted:
            old = self.contexts[102]
            self.contexts[102] = Context(run_id=1, node_id=102, node_config=dict(old.node_config), state=RecordDict(),
                                         run_config={})
            self.restarted = True
        return [node for node in self.contexts if not (node == 102 and 8 <= self.sent < 14)]


def run_with_a_restart(state_dir: Path | None) -> tuple[PFXAB, dict]:
    config = RunConfig(problem="garland", num_clients=4, horizon=20_000, seed=1)
    federation = build_federation(config)
    strategy = PFXAB(num_clients=4, horizon=config.horizon, seed=config.seed, federation=federation)
    grid = RestartingGrid(4, message_client_app(federation_sessions(federation)), state_dir=state_dir)
    run_loopback(strategy, grid)
    return strategy, strategy.run_result().summary


def test_a_node_back_under_its_id_with_its_state_dir_takes_its_client_back(tmp_path: Path, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="pfxab_flower"):
        _, summary = run_with_a_restart(tmp_path)
    messages = [r.getMessage() for r in caplog.records]
    assert "phase 2: client 2 (Flower node 102) is gone (no heartbeat, or unregistered); it counts as failed " \
           "from now on" in messages
    assert "phase 3: client 2 (Flower node 102) is back; it gets this exchange's message" in messages
    assert summary["lost_clients"] == []
    assert summary["pulls_scored"] == [20_000] * 4  # client 2 went on from its saved state: every pull scored
    assert summary["failures"] == 2  # both exchanges of phase 2, nothing else
    assert summary["flower_nodes"] == [100, 101, 102, 103]
    assert sorted(p.name for p in (tmp_path / "102").iterdir()) == ["run-1.state"]


def test_without_a_state_dir_the_node_back_cannot_be_its_client(tmp_path: Path) -> None:
    """The same restart with no copy of the state: the client's history is gone, so it cannot be scored as one."""
    _, summary = run_with_a_restart(None)
    (lost,) = summary["lost_clients"]
    assert (lost["client"], lost["flower_node"], lost["phase"]) == (2, 102, 2)
    assert lost["reason"].startswith("pull log of ") and "does not continue the client's earlier one of 100" in \
        lost["reason"]
    assert summary["pulls_scored"] == [20_000, 20_000, 100, 20_000]  # scored on its last usable log (phase 1)


def test_a_pull_log_must_continue_the_clients_earlier_one() -> None:
    def log(nodes: list[int], counts: list[int]) -> dict[str, np.ndarray]:
        return {"pull-nodes": np.array(nodes), "pull-counts": np.array(counts)}

    earlier = log([2, 3], [10, 5])
    assert pull_log_rewritten(log([2, 3], [10, 5]), earlier) is None
    assert pull_log_rewritten(log([2, 3, 6], [10, 9, 4]), earlier) is None  # its last segment went on
    assert pull_log_rewritten(log([2, 3], [10, 5]), None) is None
    assert "does not continue" in str(pull_log_rewritten(log([3, 6], [40, 4]), earlier))  # started over
    assert "does not continue" in str(pull_log_rewritten(log([2, 3], [9, 50]), earlier))  # rewrote a count
    assert "does not continue" in str(pull_log_rewritten(log([2], [10]), earlier))  # lost its tail


# -- the real processes -----------------------------------------------------------------------------
# default tier: the restart and the state dir over the loopback grid (above), registered SuperNodes joining over TLS
# in the deployment smoke test (tests/test_flower_deployment.py)
@pytest.mark.exhaustive
@pytest.mark.slow
@pytest.mark.loopback
@pytest.mark.timeout(300)
def test_only_registered_sites_join_and_a_restarted_site_takes_its_client_back(tmp_path: Path) -> None:
    T = 500_000
    config = RunConfig(problem="garland", algorithm="pf-xab", num_clients=3, alpha=0.5, horizon=T, seed=0)
    out = tmp_path / "out"
    options = AppOptions(out_dir=str(out), round_timeout=patient(30.0), min_fraction=0.3)
    node_configs = [f'{dep.default_node_config(i, 3, f"site-{i}")} {STATE_DIR}="{tmp_path / "state" / str(i)}"'
                    for i in range(3)]
    events: list[str] = []

    with dep.deployment(3, tmp_path / "deploy", tls=True, authenticate=True, node_configs=node_configs,
                        startup_timeout=patient(60)) as running:
        home = str(running.home)
        registered = [running.node_ids[f"site-{i}"] for i in range(3)]
        (stranger,) = dep.make_site_keys(tmp_path / "stranger", ["stranger"])
        intruder = running.start_supernode("stranger", 'site="stranger"', stranger)
        assert intruder.wait(timeout=patient(60)) != 0  # the SuperLink refused it
        assert "Failed to activate SuperNode" in (running.logs / "stranger.log").read_text()

        def restart_site_1_then_unregister_site_2() -> None:
            sign_off(running.processes[2])  # processes[0] is the SuperLink, [1 + i] SuperNode i
            events.append("site-1 stopped")
            start_until_accepted(running, "supernode-1-again", node_configs[1], running.keys["site-1"])
            events.append("site-1 back")
            running.unregister("site-2")
            events.append("site-2 unregistered")

        def on_line(line: str) -> None:
            if "phase 1 (depth 1)" in line and not events:
                events.append("phase 1 done")
                threading.Thread(target=restart_site_1_then_unregister_site_2, daemon=True).start()

        code, log = flwr_run_streaming(running, ROOT, run_config_argument(config, options), timeout=patient(250),
                                       on_line=on_line)
        assert code == 0, log[-3000:] + log_tail(running)
        assert events == ["phase 1 done", "site-1 stopped", "site-1 back", "site-2 unregistered"], \
            str(events) + log[-3000:] + log_tail(running)
        listed = {int(node["node-id"]) for node in running.flwr("supernode", "list")["nodes"]}
        assert node_status(running, registered[1]) == "online"
        assert listed <= set(registered)  # the stranger was never listed
    assert processes_with_marker(home) == []
    summary = json.loads((out / "summary.json").read_text())
    assert summary["flower_nodes"] == registered
    assert summary["sites"] == ["site-0", "site-1", "site-2"]
    (lost,) = summary["lost_clients"]
    assert (lost["client"], lost["flower_node"]) == (2, registered[2]), summary["lost_clients"]
    assert summary["final_nodes"][1] is not None and summary["pulls_scored"][:2] == [T, T]
    assert 0 < summary["pulls_scored"][2] < T
    assert f"client 2 (site 'site-2', Flower node {registered[2]}) was lost in phase {lost['phase']}" in log
