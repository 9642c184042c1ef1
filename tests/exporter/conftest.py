"""Shared by the exporter tests: certificates made with the openssl CLI, web configs, and the
real Prometheus server from Debian's `prometheus` package."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import pytest

from tests.daemon.helpers import wait_for
from tests.exporter.test_http import registry
from uwsgitune.exporter.server import MetricsServer
from uwsgitune.launch import free_port

PASSWORD = "s3cret-scraper"
# cost 4: the tests check many times; the daemon caches a good check anyway
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()


@dataclass(frozen=True)
class Certs:
    dir: Path
    ca: Path
    server_crt: Path
    server_key: Path
    client_crt: Path
    client_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _signed(d: Path, name: str, cn: str, ext: str, ca: str = "ca") -> None:
    _openssl(
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.csr",
        "-subj",
        f"/CN={cn}",
        cwd=d,
    )
    (d / f"{name}.ext").write_text(ext)
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        f"{ca}.crt",
        "-CAkey",
        f"{ca}.key",
        "-CAcreateserial",
        "-out",
        f"{name}.crt",
        "-days",
        "2",
        "-extfile",
        f"{name}.ext",
        cwd=d,
    )


def _ca(d: Path, name: str) -> None:
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.crt",
        "-days",
        "2",
        "-subj",
        f"/CN={name}",
        # Python 3.13 verifies strictly (VERIFY_X509_STRICT): a CA must carry key usage
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        cwd=d,
    )


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A self-signed CA, a server certificate for 127.0.0.1/localhost and a client one."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is not installed (apt-get install openssl)")
    d = tmp_path_factory.mktemp("certs")
    _ca(d, "ca")
    _signed(d, "server", "localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _signed(d, "client", "prometheus", "extendedKeyUsage=clientAuth\n")
    return Certs(
        d,
        d / "ca.crt",
        d / "server.crt",
        d / "server.key",
        d / "client.crt",
        d / "client.key",
    )


def web_config(certs: Certs, *, client_auth: str = "RequireAndVerifyClientCert") -> str:
    return (
        "tls_server_config:\n"
        f"  cert_file: {certs.server_crt}\n"
        f"  key_file: {certs.server_key}\n"
        f"  client_auth_type: {client_auth}\n"
        f"  client_ca_file: {certs.ca}\n"
        "  min_version: TLS12\n"
        "http_server_config:\n"
        "  headers:\n"
        "    X-Content-Type-Options: nosniff\n"
        "basic_auth_users:\n"
        f"  prometheus: '{HASH}'\n"
    )


def _install_prometheus() -> str | None:
    """Debian's prometheus package, installed when missing and we may (root, apt-get)."""
    found = shutil.which("prometheus")
    if found or os.geteuid() != 0 or shutil.which("apt-get") is None:
        return found
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "--no-install-recommends", "prometheus"]
    done = subprocess.run(cmd, env=env, capture_output=True, timeout=600)
    if done.returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600)
        subprocess.run(cmd, env=env, capture_output=True, timeout=600)
    # the package starts a service on :9090 where systemd runs; the tests use their own
    return shutil.which("prometheus")


@pytest.fixture(scope="session")
def prometheus_bin() -> Iterator[str]:
    found = _install_prometheus()
    if found is None:
        pytest.skip(
            "Prometheus is not installed and cannot be here (needs root and apt-get: "
            "apt-get install -y prometheus)"
        )
    yield found


@pytest.fixture
def prometheus(prometheus_bin: str, tmp_path: Path) -> Iterator[Callable[[str], int]]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(config: str) -> int:
        port = free_port()
        path = tmp_path / "prometheus.yml"
        path.write_text(config)
        argv = [
            prometheus_bin,
            f"--config.file={path}",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            "--log.level=warn",
        ]
        with (tmp_path / "prometheus.log").open("wb") as log:
            procs.append(subprocess.Popen(argv, stdout=log, stderr=log))
        wait_for(lambda: _ready(port, "/-/ready") == "ready", timeout=60, step=0.3)
        return port

    yield start
    for p in procs:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def _ready(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
        return resp.read().decode().strip().split()[-1].lower().rstrip(".")


# The real daemon, as tests/daemon starts it.
from tests.daemon.conftest import DaemonProc, start_daemon  # noqa: E402


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[MetricsServer]]]:
    """Start the real metrics server on a free loopback port (closed after the test)."""
    servers: list[MetricsServer] = []

    async def start(**kw: object) -> MetricsServer:
        srv = MetricsServer(registry(), **kw)  # type: ignore[arg-type]
        await srv.start("127.0.0.1:0")
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        await srv.close()


__all__ = ["DaemonProc", "start_daemon"]
