"""A real Flower deployment on this machine: one ``flower-superlink``, ``M`` ``flower-supernode``s, ``flwr run``.

The recipe of docs/deployment.md as code, for the tests and for trying a deployment locally: loopback
only, free ports, a private ``FLWR_HOME``, optional TLS and SuperNode authentication, and every process
started under :func:`~pfxab_flower.processes.lifetime.with_parent` and stopped on exit, even on failure.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from pfxab_flower.errors import ConfigError
from pfxab_flower.processes.lifetime import with_parent
from pfxab_flower.simulations.flower.flwr_run_launcher import flwr_executable, free_port, wait_for_health
from pfxab_flower.simulations.flower.leftover_processes import stop_processes
from pfxab_flower.simulations.flower.simulation_environment import QUIET_ENV

FEDERATION = "deployment"


@dataclass(frozen=True)
class Certificates:
    """PEM files: a CA, and a server certificate it signed for ``127.0.0.1`` and ``localhost``."""

    ca: Path
    server_cert: Path
    server_key: Path


def refuse_existing(paths: Sequence[Path], what: str) -> None:
    """One ``ConfigError`` line naming the first of ``paths`` that exists: a credential is never replaced
    (a CA the SuperNodes trust, a registered site's key), so nothing is written if any is there."""
    existing = [str(path) for path in paths if path.exists()]
    if existing:
        raise ConfigError(f"{existing[0]!r} exists; allowed: {what} files that do not exist yet (never replaced: "
                          "remove it yourself, or choose another directory or name)")


def make_certificates(directory: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> Certificates:
    """A throw-away CA and a server certificate for ``hosts`` (valid for one day); existing files are never replaced."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    files = Certificates(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    refuse_existing([files.ca, files.server_cert, files.server_key], "certificate")
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder().subject_name(name("pfxab test CA")).issuer_name(name("pfxab test CA"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    alt_names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt_names.append(x509.DNSName(host))
    server = (
        x509.CertificateBuilder().subject_name(name(hosts[0])).issuer_name(ca.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    for path, content in ((files.ca, ca.public_bytes(serialization.Encoding.PEM)),
                          (files.server_cert, server.public_bytes(serialization.Encoding.PEM)),
                          (files.server_key, key.private_bytes(serialization.Encoding.PEM,
                                                               serialization.PrivateFormat.PKCS8,
                                                               serialization.NoEncryption()))):
        with open(path, "xb") as written:
            written.write(content)
    return files


#: What a site name may hold: it names key files and goes into a node config as the ``site`` label.
SITE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class SiteKeys:
    """A site's SuperNode key pair: the private key its SuperNode signs with, the public key the SuperLink registers."""

    site: str
    private_key: Path
    public_key: Path


def make_site_keys(directory: Path, sites: Sequence[str]) -> list[SiteKeys]:
    """An ECDSA P-384 key pair per site, in OpenSSH format (``ssh-keygen -t ecdsa -b 384`` makes the same).

    The private key is written readable by its owner only (0600): it is the site's identity.
    An existing key file is never replaced (it may be a registered site's only key): if any of
    the files exists, nothing is written and the one-line error names it.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    for site in sites:
        if not isinstance(site, str) or not SITE_NAME.fullmatch(site):
            raise ConfigError(f"site={site!r} is invalid; allowed: 1-64 letters, digits, '_', '.' or '-', "
                              "starting with a letter or digit")
    if len(set(sites)) != len(sites):
        raise ConfigError(f"sites={list(sites)!r} repeat a name; allowed: one key pair per distinct site")
    pairs = [SiteKeys(site, directory / site, directory / f"{site}.pub") for site in sites]
    refuse_existing([path for files in pairs for path in (files.private_key, files.public_key)], "key")
    directory.mkdir(parents=True, exist_ok=True)
    made = []
    for files in pairs:
        key = ec.generate_private_key(ec.SECP384R1())
        descriptor = os.open(files.private_key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as private:
            private.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                            serialization.NoEncryption()))
        public_key = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        with open(files.public_key, "xb") as public:
            public.write(public_key + f" {files.site}\n".encode())
        made.append(files)
    return made


def config_toml(address: str, certificates: Certificates | None) -> str:
    """``$FLWR_HOME/config.toml``: the federation ``flwr run . deployment`` submits to."""
    security = {"root-certificates": str(certificates.ca)} if certificates is not None else {"insecure": True}
    return tomli_w.dumps({"superlink": {"default": FEDERATION, FEDERATION: {"address": address, **security}}})


@dataclass
class Deployment:
    """A running SuperLink and SuperNodes (see :func:`deployment`).

    ``node_ids`` maps each registered site to the Flower node id its registration gave it
    (empty without authentication); ``keys`` holds each site's key pair.
    """

    home: Path
    address: str
    env: dict[str, str]
    logs: Path
    workdir: Path
    node_security: list[str]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    keys: dict[str, SiteKeys] = field(default_factory=dict)
    node_ids: dict[str, int] = field(default_factory=dict)

    def flwr_run(self, app_dir: Path, run_config: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """``flwr run APP_DIR deployment --stream --run-config ...`` against this SuperLink."""
        command = [flwr_executable(), "run", str(app_dir), FEDERATION, "--stream", "--run-config", run_config]
        return subprocess.run(with_parent(command), cwd=app_dir, env=self.env, capture_output=True, text=True,
                              timeout=timeout, start_new_session=True)

    def flwr(self, *arguments: str, timeout: float = 60.0) -> dict[str, Any]:
        """``flwr ARGUMENTS... deployment --format json`` against this SuperLink: its JSON answer.

        Raises ``RuntimeError`` with Flower's own message when the command fails.
        """
        command = [flwr_executable(), *arguments, FEDERATION, "--format", "json"]
        done = subprocess.run(with_parent(command), cwd=self.workdir, env=self.env, capture_output=True, text=True,
                              timeout=timeout, start_new_session=True)
        try:
            answer = json.loads(done.stdout)
        except json.JSONDecodeError:
            answer = {"success": False, "error-message": (done.stdout + done.stderr).strip()[-500:]}
        if done.returncode != 0 or not answer.get("success", False):
            raise RuntimeError(f"flwr {' '.join(arguments)} failed: {answer.get('error-message', answer)}")
        return dict(answer)

    def register(self, keys: SiteKeys) -> int:
        """Register a site's public key with the SuperLink (``flwr supernode register``); its Flower node id."""
        node_id = int(self.flwr("supernode", "register", str(keys.public_key))["node-id"])
        self.keys[keys.site], self.node_ids[keys.site] = keys, node_id
        return node_id

    def unregister(self, site: str) -> None:
        """Remove a registered site (``flwr supernode unregister NODE_ID``): its SuperNode is refused from now on."""
        self.flwr("supernode", "unregister", str(self.node_ids[site]))

    def start_supernode(self, name: str, node_config: str, keys: SiteKeys | None = None) -> subprocess.Popen[bytes]:
        """Start one ``flower-supernode`` (with ``keys``, authenticated by its private key); its log is ``name.log``."""
        authentication = ["--auth-supernode-private-key", str(keys.private_key)] if keys is not None else []
        return self._start(name, [
            str(Path(flwr_executable()).parent / "flower-supernode"), *self.node_security, *authentication,
            "--superlink", self.address, "--host", "127.0.0.1", "--port", str(free_port()),
            "--node-config", node_config,
        ])

    def _start(self, name: str, command: list[str]) -> subprocess.Popen[bytes]:
        """Start ``command`` (a Flower console script), logging to ``name.log``; it ends when this process does."""
        with open(self.logs / f"{name}.log", "ab") as log:
            process = subprocess.Popen(with_parent(command), env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                       cwd=self.workdir, start_new_session=True)
        self.processes.append(process)
        return process


def default_node_config(index: int, num_nodes: int, site: str | None = None) -> str:
    """SuperNode ``index``'s ``--node-config``: its ``partition-id`` (and its ``site`` label, if it has one)."""
    config = f"partition-id={index} num-partitions={num_nodes}"
    return config if site is None else f'{config} site="{site}"'


@contextlib.contextmanager
def deployment(
    num_nodes: int, workdir: Path, *, tls: bool = False, startup_timeout: float = 60.0,
    node_configs: Sequence[str] | None = None, authenticate: bool = False,
) -> Iterator[Deployment]:
    """Start a SuperLink and ``num_nodes`` SuperNodes on loopback; stop all of them on exit.

    ``node_configs[i]`` is SuperNode ``i``'s ``--node-config`` (default: its ``partition-id``
    and, when authenticated, its ``site`` label ``site-i``; a node config without a
    ``partition-id`` lets the server assign the node its client index). ``authenticate``
    (needs ``tls``: Flower refuses SuperNode authentication without it) makes a key pair per
    site in ``workdir/keys``, registers each, and starts each SuperNode with its key.
    """
    if node_configs is not None and len(node_configs) != num_nodes:
        raise ConfigError(f"node_configs has {len(node_configs)} entries; allowed: one per node ({num_nodes})")
    if authenticate and not tls:
        raise ConfigError("authenticate=True without tls is invalid; allowed: authenticate=True with tls=True "
                          "(Flower's SuperNode authentication runs on TLS only)")
    home = workdir / "flwr-home"
    logs = workdir / "logs"
    home.mkdir(parents=True)
    logs.mkdir()
    certificates = make_certificates(workdir / "certs") if tls else None
    port = free_port()
    address = f"127.0.0.1:{port}"
    (home / "config.toml").write_text(config_toml(address, certificates), encoding="utf-8")
    env = {
        **os.environ,
        **QUIET_ENV,
        "FLWR_LOG_LEVEL": "INFO",
        "FLWR_HOME": str(home),
        "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    bin_dir = Path(flwr_executable()).parent
    if certificates is None:
        link_security = ["--insecure"]
        node_security = ["--insecure"]
    else:
        server_files = ["--ssl-ca-certfile", str(certificates.ca), "--ssl-certfile", str(certificates.server_cert),
                        "--ssl-keyfile", str(certificates.server_key)]
        link_security = server_files
        node_security = ["--root-certificates", str(certificates.ca), *server_files]
    dep = Deployment(home, address, env, logs, workdir, node_security)
    sites = [f"site-{i}" for i in range(num_nodes)] if authenticate else [None] * num_nodes
    try:
        dep._start("superlink", [str(bin_dir / "flower-superlink"), *link_security, "--host", "127.0.0.1",
                                 "--port", str(port), "--database", ":flwr-in-memory:",
                                 *(["--enable-supernode-auth"] if authenticate else [])])
        wait_for_health(port, dep.processes[0], startup_timeout, certificates.ca if certificates else None)
        keys = make_site_keys(workdir / "keys", [s for s in sites if s is not None]) if authenticate else []
        for site_keys in keys:
            dep.register(site_keys)
        for i, site in enumerate(sites):
            node_config = node_configs[i] if node_configs is not None else default_node_config(i, num_nodes, site)
            dep.start_supernode(f"supernode-{i}", node_config, dep.keys.get(site) if site is not None else None)
        yield dep
    finally:
        stop(dep)


def stop(dep: Deployment, grace: float = 5.0) -> list[int]:
    """Stop every process we started (its process group, by PID), then any leftover carrying our FLWR_HOME."""
    for process in dep.processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in dep.processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    for process in dep.processes:  # children that left the group but are still alive
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    return stop_processes(str(dep.home), grace=grace)


USAGE = ("usage: python -m pfxab_flower.simulations.flower.local_deployment certificates DIR\n"
         "       python -m pfxab_flower.simulations.flower.local_deployment keys DIR SITE [SITE...]")


def main(argv: list[str] | None = None) -> int:
    """The recipe's files: ``certificates DIR`` (TLS) or ``keys DIR SITE...`` (a SuperNode key pair per site)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "certificates":
        try:
            files = make_certificates(Path(args[1]))
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"CA {files.ca}, server certificate {files.server_cert} and key {files.server_key} "
              "(for 127.0.0.1 and localhost, valid one day)")
        return 0
    if len(args) >= 3 and args[0] == "keys":
        try:
            made = make_site_keys(Path(args[1]), args[2:])
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for keys in made:
            print(f"{keys.site}: private key {keys.private_key} (keep it on the site), public key {keys.public_key} "
                  "(flwr supernode register it)")
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
