"""A real Flower deployment on loopback: ``flower-superlink``, M ``flower-supernode``s, ``flwr run``.

Once insecure (legacy API, with injected dropouts) and once with TLS (certificates made by the
test, Message API) and authenticated SuperNodes (a registered key per site); each run's results
must equal the in-process engine's for the same seed. Every process is stopped by PID (and any
leftover by our FLWR_HOME) even on failure. The TLS run is the default tier's deployment smoke
test; the others are the slow tier (``exhaustive``), each with its cheaper proof named where marked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pfxab_flower.faults import FaultPlan
from pfxab_flower.problems import build_federation
from pfxab_flower.running.engine import run_config
from pfxab_flower.running.results import RECOMMENDATION_KEYS
from pfxab_flower.schema.run_config import AppOptions, RunConfig
from pfxab_flower.simulations.flower import local_deployment as dep
from pfxab_flower.simulations.flower.flwr_run_launcher import run_config_argument
from pfxab_flower.simulations.flower.leftover_processes import processes_with_marker
from tests.deployment_tools import flwr_run_streaming, kill_node, log_tail
from tests.patience import patient

ROOT = Path(__file__).resolve().parents[1]
SAME_KEYS = (
    "algorithm", "problem", "regret", "regret_per_client", "final_nodes", "final_points", "phases",
    "communication_rounds", "values_down", "values_up", "rejected_replies", "failures",
    *RECOMMENDATION_KEYS,
)

pytestmark = [pytest.mark.slow, pytest.mark.loopback, pytest.mark.timeout(200)]


def run_deployment(tmp_path: Path, tls: bool, options: AppOptions, config: RunConfig,
                   authenticate: bool = False) -> dict:
    out = tmp_path / "out"
    options = AppOptions(**{**options.__dict__, "out_dir": str(out)})
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    with dep.deployment(config.num_clients, tmp_path / "deploy", tls=tls, startup_timeout=patient(60),
                        authenticate=authenticate) as running:
        home = str(running.home)
        registered = [running.node_ids[f"site-{i}"] for i in range(config.num_clients)] if authenticate else None
        done = running.flwr_run(ROOT, run_config_argument(config, options), timeout=patient(150))
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:] + log_tail(running)
        assert (out / "summary.json").exists(), done.stdout[-3000:] + log_tail(running)
        if tls:
            assert "insecure" not in (running.home / "config.toml").read_text()
            assert "--ssl-certfile" in " ".join(running.processes[0].args)
    assert processes_with_marker(home) == []  # SuperLink, SuperNodes and their children all stopped
    assert all(p.poll() is not None for p in running.processes)
    assert (ROOT / "pyproject.toml").read_bytes() == pyproject
    summary = json.loads((out / "summary.json").read_text())
    if registered is not None:  # each client held by its registered site's SuperNode
        assert summary["flower_nodes"] == registered
        assert summary["sites"] == [f"site-{i}" for i in range(config.num_clients)]
    return summary


def assert_same_as_inprocess(summary: dict, config: RunConfig, options: AppOptions) -> None:
    from pfxab_flower.running import engine
    from pfxab_flower.running.engine import describe_problem

    expected = engine.run(
        build_federation(config), algorithm=config.algorithm, alpha=config.alpha, horizon=config.horizon,
        seed=config.seed, describe=describe_problem(config), faults=options.faults(config.seed),
        min_fraction=options.min_fraction,
    ).summary
    for key in SAME_KEYS:
        assert summary[key] == expected[key], key
    assert summary["engine"] == "flower"


@pytest.mark.exhaustive  # default tier: the same dropouts through Flower's legacy loop (tests/test_dropouts.py)
def test_insecure_deployment_with_dropouts_matches_inprocess(tmp_path: Path) -> None:
    config = RunConfig(problem="doublesine", algorithm="fed-pne", num_clients=3, alpha=0.5, horizon=3000, seed=1)
    options = AppOptions(fail_rate=0.3, min_fraction=0.3, api="legacy")
    plan = FaultPlan(config.seed, 0.3)
    assert any(plan.misses(m, p) for m in range(3) for p in (1, 2))  # the seed really drops someone
    summary = run_deployment(tmp_path, tls=False, options=options, config=config)
    assert summary["failures"] > 0
    assert_same_as_inprocess(summary, config, options)


def test_tls_deployment_of_registered_sites_matches_inprocess(tmp_path: Path) -> None:
    """The default tier's deployment smoke test: a SuperLink and SuperNodes over TLS, each SuperNode authenticated
    by its site's registered key (tests/test_supernode_auth.py: the rest of authentication), ``flwr run``, the
    result equal to the in-process run's."""
    config = RunConfig(problem="garland", algorithm="pf-xab", num_clients=2, alpha=0.5, horizon=3000, seed=0)
    summary = run_deployment(tmp_path, tls=True, options=AppOptions(), config=config, authenticate=True)
    assert summary == {**summary, "failures": 0}
    assert summary == {**summary, **{k: run_config(config).summary[k] for k in SAME_KEYS}}


def test_certificates_name_loopback(tmp_path: Path) -> None:
    from cryptography import x509

    files = dep.make_certificates(tmp_path)
    server = x509.load_pem_x509_certificate(files.server_cert.read_bytes())
    ca = x509.load_pem_x509_certificate(files.ca.read_bytes())
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1"}
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    server.verify_directly_issued_by(ca)
    assert dep.config_toml("127.0.0.1:1", files).count(str(files.ca)) == 1
    assert "insecure = true" in dep.config_toml("127.0.0.1:1", None)


@pytest.mark.parametrize("ca", ["/tmp/plain/ca.pem", '/tmp/a "quoted" dir/ca.pem', "C:\\certs\\ca.pem"])
def test_the_flower_config_reads_back_as_written(ca: str) -> None:
    """``$FLWR_HOME/config.toml`` is TOML for any CA path (a quote or a backslash in it made the file unreadable)."""
    import tomllib

    files = dep.Certificates(ca=Path(ca), server_cert=Path("s.pem"), server_key=Path("s.key"))
    assert tomllib.loads(dep.config_toml("127.0.0.1:9093", files)) == {"superlink": {
        "default": dep.FEDERATION, dep.FEDERATION: {"address": "127.0.0.1:9093", "root-certificates": ca}}}
    assert tomllib.loads(dep.config_toml("127.0.0.1:9093", None))["superlink"][dep.FEDERATION] == {
        "address": "127.0.0.1:9093", "insecure": True}


@pytest.mark.parametrize("tls", [False, True])
def test_the_health_probe_waits_for_an_answer_on_http_and_https(tmp_path: Path, tls: bool) -> None:
    """One probe serves both SuperLink starts: ``pfxab simulate``'s (http) and the deployment's (https, its CA)."""
    import http.server
    import ssl
    import subprocess
    import sys
    import threading

    from pfxab_flower.simulations.flower.flwr_run_launcher import free_port, wait_for_health

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    files = dep.make_certificates(tmp_path) if tls else None
    port = free_port()
    server = http.server.HTTPServer(("127.0.0.1", port), Health)
    if files is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(files.server_cert, files.server_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    superlink = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    serving: threading.Thread | None = None
    try:
        with pytest.raises(TimeoutError, match=f"did not answer on port {port} within 1 s"):
            wait_for_health(port, superlink, 1.0, files.ca if files else None)  # nothing listens yet
        serving = threading.Thread(target=server.serve_forever, daemon=True)
        serving.start()
        wait_for_health(port, superlink, 30.0, files.ca if files else None)
    finally:
        if serving is not None:
            server.shutdown()
        server.server_close()
        superlink.communicate(b"")
    with pytest.raises(RuntimeError, match="flower-superlink exited with status 0"):
        wait_for_health(port, superlink, 30.0)


def test_a_port_handed_out_is_never_handed_out_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel may give the same free port twice before the first taker binds it (one SuperNode of a
    deployment then failed with "address already in use"): a number handed out recently is asked for again."""
    from pfxab_flower.simulations.flower import flwr_run_launcher

    kernel = iter([41001, 41002, 41001, 41002, 41003])  # what bind(port 0) answers, in turn

    class Socket:
        def __enter__(self) -> Socket:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def bind(self, address: tuple[str, int]) -> None:
            assert address == ("127.0.0.1", 0)
            self.port = next(kernel)

        def getsockname(self) -> tuple[str, int]:
            return "127.0.0.1", self.port

    monkeypatch.setattr(flwr_run_launcher, "_HANDED_OUT", flwr_run_launcher.collections.deque(maxlen=1024))
    monkeypatch.setattr(flwr_run_launcher.socket, "socket", Socket)
    assert [flwr_run_launcher.free_port() for _ in range(3)] == [41001, 41002, 41003]


def test_existing_certificates_are_never_replaced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A CA the SuperNodes already trust is kept: making certificates again in its directory writes nothing."""
    files = dep.make_certificates(tmp_path)
    before = {path: path.read_bytes() for path in (files.ca, files.server_cert, files.server_key)}
    assert dep.main(["certificates", str(tmp_path)]) == 2
    assert "ca.pem' exists; allowed: certificate files that do not exist yet" in capsys.readouterr().err
    assert {path: path.read_bytes() for path in before} == before


@pytest.mark.exhaustive  # default tier: lost clients over Flower's loops (tests/test_lost_clients.py)
@pytest.mark.timeout(400)  # 111-119 s measured (round timeouts and heartbeats): twice that, and more, for a hang
def test_supernodes_killed_mid_phase_and_between_phases_lose_nothing_else(tmp_path: Path) -> None:
    """Two of four SuperNodes die by SIGKILL: one while it holds a phase message, one while idle.

    Client 1 answers every message 4 s late (an injected straggler, well inside the round
    timeout), so killing it 1.5 s after phase 1 closes kills it while it works on phase 2;
    client 3 has answered phase 2 by then and waits, idle. The run must go on with the
    two others (min-fraction 0.5), finish, write its result, and say which clients were
    lost and how far their regret goes.
    """
    import threading

    config = RunConfig(problem="garland", algorithm="pf-xab", num_clients=4, alpha=0.5, horizon=200_000, seed=0)
    out = tmp_path / "out"
    # the survivors must answer within the round timeout: 20 s on an idle machine, more on a busy one
    options = AppOptions(out_dir=str(out), round_timeout=patient(20.0), min_fraction=0.5, fail_rate=1.0,
                         fail_clients=(1,), straggle_seconds=4.0)
    killed: list[float] = []

    with dep.deployment(config.num_clients, tmp_path / "deploy", startup_timeout=patient(60)) as running:
        home = str(running.home)

        def kill_after_phase_one() -> None:
            kill_node(running, 1)  # mid-phase: inside its 4 s straggle on phase 2
            kill_node(running, 3)  # between messages: it has answered phase 2, waits for the update
            killed.append(1.0)

        def on_line(line: str) -> None:
            if "phase 1 (depth 1)" in line and not killed:
                threading.Timer(1.5, kill_after_phase_one).start()

        code, log = flwr_run_streaming(running, ROOT, run_config_argument(config, options), timeout=patient(400),
                                       on_line=on_line)
        assert killed, log[-3000:]
        assert code == 0, log[-3000:] + log_tail(running)
        assert (out / "summary.json").exists(), log[-3000:] + log_tail(running)
    assert processes_with_marker(home) == []
    summary = json.loads((out / "summary.json").read_text())
    T = config.horizon
    assert [lost["client"] for lost in summary["lost_clients"]] == [1, 3]
    # lost in the phase they were killed in: 2, or later if the log line that times the kill came late
    assert all(2 <= lost["phase"] <= summary["phases"] and isinstance(lost["flower_node"], int)
               for lost in summary["lost_clients"]), summary["lost_clients"]
    assert summary["pulls_scored"][0] == summary["pulls_scored"][2] == T
    assert 0 < summary["pulls_scored"][1] < T and 0 < summary["pulls_scored"][3] < T
    assert summary["final_nodes"][1] is None and summary["final_points"][3] is None
    assert summary["final_nodes"][0] is not None and summary["phases"] >= 3
    assert summary["failures"] >= 4  # both lost clients missed at least the rest of phase 2
    for lost in summary["lost_clients"]:
        assert f"client {lost['client']} (Flower node {lost['flower_node']}) was lost in phase {lost['phase']}" in log
