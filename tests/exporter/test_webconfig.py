"""The web config (exporter-toolkit's format): a good file loads into a TLS context and
users; a bad one gives one line per problem, through `config check` and `daemon` alike."""

from __future__ import annotations

import base64
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from tests.exporter.conftest import HASH, PASSWORD, Certs, web_config
from uwsgitune.errors import ConfigError
from uwsgitune.exporter.auth import BasicAuth, credentials
from uwsgitune.exporter.webconfig import load_web_config

UWSGITUNE = str(Path(sys.executable).parent / "uwsgitune")
BAD = """\
tls_server_config:
  cert_file: missing.crt
  client_auth_type: RequireAnyClientCert
  min_version: TLS14
  cipher_suites: [TLS_AES_128_GCM_SHA256]
basic_auth_users:
  alice: plaintext-password
rate_limit: {interval: 1s}
"""


def test_a_good_file_gives_tls_that_requires_a_client_cert_and_users(
    certs: Certs, tmp_path: Path
) -> None:
    path = tmp_path / "web.yml"
    path.write_text(web_config(certs))
    web = load_web_config(path)
    assert web.tls is not None and web.tls.verify_mode == ssl.CERT_REQUIRED
    assert web.tls.minimum_version == ssl.TLSVersion.TLSv1_2
    assert set(web.users) == {"prometheus"}
    assert web.headers == {"X-Content-Type-Options": "nosniff"}


def test_relative_paths_are_relative_to_the_file(certs: Certs) -> None:
    path = certs.dir / "web.yml"
    path.write_text("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")
    web = load_web_config(path)
    assert web.tls is not None and web.tls.verify_mode == ssl.CERT_NONE and not web.users


def test_every_problem_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "web.yml"
    path.write_text(BAD)
    with pytest.raises(ConfigError) as info:
        load_web_config(path)
    lines = info.value.lines()
    assert all(line.startswith(f"{path}: ") and "\n" not in line for line in lines)
    text = "\n".join(lines)
    for needle in (
        "rate_limit: not supported",
        "cipher_suites: not supported",
        "cert_file: no such file",
        "key_file: required",
        "RequireAnyClientCert",
        "min_version: 'TLS14'",
        "alice: not a bcrypt hash",
    ):
        assert needle in text, needle
    assert len(lines) == 7


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("tls_server_config: [\n", "invalid YAML at line"),
        ("- a\n- b\n", "must be a mapping"),
        ("basic_auth_users: nobody\n", "basic_auth_users: must map"),
        (
            "tls_server_config:\n  client_auth_type: VerifyClientCertIfGiven\n",
            "client_ca_file: required by VerifyClientCertIfGiven",
        ),
    ],
)
def test_malformed_files_are_named(tmp_path: Path, body: str, needle: str) -> None:
    path = tmp_path / "web.yml"
    path.write_text(body)
    with pytest.raises(ConfigError) as info:
        load_web_config(path)
    assert needle in str(info.value)


def test_a_key_that_does_not_match_the_cert(certs: Certs, tmp_path: Path) -> None:
    path = tmp_path / "web.yml"
    path.write_text(
        f"tls_server_config:\n  cert_file: {certs.server_crt}\n  key_file: {certs.client_key}\n"
    )
    with pytest.raises(ConfigError, match="cert_file and key_file do not load"):
        load_web_config(path)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([UWSGITUNE, *args], capture_output=True, text=True, timeout=180)


def test_config_check_and_daemon_report_a_bad_web_config(tmp_path: Path) -> None:
    web = tmp_path / "web.yml"
    web.write_text(BAD)
    toml = tmp_path / "u.toml"
    toml.write_text(
        f'[daemon]\nweb_config_file = "{web}"\n[[instance]]\nname = "a"\nstats = "/x.sock"\n'
    )
    for args in (
        ["config", "check", str(toml), "--no-env"],
        ["daemon", "--stats.uri", "unix:///x.sock", "--web.config.file", str(web)],
    ):
        out = _run(*args)
        assert out.returncode == 2, out
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 7 and "Traceback" not in out.stderr, out.stderr
        assert all(line.startswith(f"uwsgitune: {web}: ") for line in lines), lines


def test_config_check_accepts_a_good_web_config(certs: Certs, tmp_path: Path) -> None:
    web = tmp_path / "web.yml"
    web.write_text(web_config(certs))
    toml = tmp_path / "u.toml"
    toml.write_text(
        f'[daemon]\nweb_config_file = "{web}"\nprobe_targets = ["tcp://127.0.0.1:1717"]\n'
    )
    out = _run("config", "check", str(toml), "--no-env")
    assert out.returncode == 0 and out.stdout.startswith("ok: 0 instances"), out


def test_basic_auth_checks_bcrypt() -> None:
    auth = BasicAuth({"prometheus": HASH.encode()})
    good = "Basic " + base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()
    bad = "Basic " + base64.b64encode(b"prometheus:wrong").decode()
    assert auth.check(good) and auth.check(good)
    assert not auth.check(bad) and not auth.check(None) and not auth.check("Bearer x")
    assert not auth.check("Basic !!!notbase64")
    nobody = "Basic " + base64.b64encode(f"nobody:{PASSWORD}".encode()).decode()
    assert not auth.check(nobody)
    assert credentials("Basic " + "YTpiOmM=") == ("a", "b:c")


def _tls_with_ca(certs: Certs, auth: str) -> str:
    return (
        f"tls_server_config:\n  cert_file: {certs.server_crt}\n  key_file: {certs.server_key}\n"
        f"  client_ca_file: {certs.ca}\n{auth}"
    )


@pytest.mark.parametrize("auth", ["", "  client_auth_type: NoClientCert\n"])
def test_a_client_ca_without_a_client_auth_type_that_verifies_is_refused(
    certs: Certs, tmp_path: Path, auth: str
) -> None:
    """Before: the CA was loaded, and verify_mode stayed CERT_NONE (no certificate asked)."""
    path = tmp_path / "web.yml"
    path.write_text(_tls_with_ca(certs, auth))
    with pytest.raises(ConfigError) as info:
        load_web_config(path)
    (line,) = info.value.lines()
    assert "client_ca_file: given without a client_auth_type that verifies" in line
    assert "RequireAndVerifyClientCert" in line and "remove client_ca_file" in line
    for verifying in ("RequireAndVerifyClientCert", "VerifyClientCertIfGiven"):
        path.write_text(_tls_with_ca(certs, f"  client_auth_type: {verifying}\n"))
        tls = load_web_config(path).tls
        assert tls is not None and tls.verify_mode != ssl.CERT_NONE


BAD_VALUES = [
    "deny\u2014",
    "deny\u00e9",
    "a\rb",
    "a\nb",
    "a\x00b",
    "a\tb",
    "a\x7fb",
    " deny",
    "deny ",
]


@pytest.mark.parametrize("bad", BAD_VALUES)
def test_a_header_value_that_is_not_printable_ascii_is_refused(tmp_path: Path, bad: str) -> None:
    """Before: `\\r`, NUL, tabs, spaces at the ends and any letter passed; one outside
    Latin-1 made every answer raise, /-/healthy included."""
    path = tmp_path / "web.yml"
    value = bad.encode("unicode_escape").decode().replace('"', '\\"')
    path.write_text(f'http_server_config:\n  headers:\n    X-Frame-Options: "{value}"\n')
    with pytest.raises(ConfigError) as info:
        load_web_config(path)
    (line,) = info.value.lines()
    assert "http_server_config.headers.X-Frame-Options: the value must be printable ASCII" in line


def test_printable_header_values_load(tmp_path: Path) -> None:
    path = tmp_path / "web.yml"
    path.write_text(
        "http_server_config:\n  headers:\n    X-Frame-Options: deny\n"
        "    Content-Security-Policy: \"default-src 'none'; frame-ancestors 'none'\"\n"
    )
    headers = load_web_config(path).headers
    assert headers["Content-Security-Policy"] == "default-src 'none'; frame-ancestors 'none'"


def test_config_check_refuses_a_bare_client_ca_and_a_bad_header_in_one_line_each(
    certs: Certs, tmp_path: Path
) -> None:
    web = tmp_path / "web.yml"
    web.write_text(
        _tls_with_ca(certs, "") + 'http_server_config:\n  headers:\n    X-Frame-Options: "a\\rb"\n'
    )
    toml = tmp_path / "u.toml"
    toml.write_text(f'[daemon]\nweb_config_file = "{web}"\nprobe_targets = ["tcp://127.0.0.1:1"]\n')
    out = _run("config", "check", str(toml), "--no-env")
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 2 and "Traceback" not in out.stderr, out
    assert "client_ca_file: given without" in lines[0] + lines[1]
    assert "headers.X-Frame-Options: the value must be printable ASCII" in lines[0] + lines[1]


COST_13 = HASH.replace("$04$", "$13$", 1)  # a valid hash's shape; config check never runs it


def test_a_bcrypt_cost_above_12_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  alice: '{COST_13}'\n  bob: '{HASH}'\n")
    with pytest.raises(ConfigError) as info:
        load_web_config(path)
    (line,) = info.value.lines()
    assert "basic_auth_users.alice: bcrypt cost 13 is above 12" in line
    assert "htpasswd -nbBC 10 alice PASSWORD" in line and "rounds=10" in line
    path.write_text(f"basic_auth_users:\n  alice: '{HASH.replace('$04$', '$12$', 1)}'\n")
    assert set(load_web_config(path).users) == {"alice"}


def test_config_check_refuses_a_bcrypt_cost_of_13_in_one_line(tmp_path: Path) -> None:
    web = tmp_path / "web.yml"
    web.write_text(f"basic_auth_users:\n  prometheus: '{COST_13}'\n")
    toml = tmp_path / "u.toml"
    toml.write_text(
        f'[daemon]\nweb_config_file = "{web}"\n[[instance]]\nname = "a"\nstats = "/x.sock"\n'
    )
    out = _run("config", "check", str(toml), "--no-env")
    assert out.returncode != 0 and "Traceback" not in out.stderr, out
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"uwsgitune: {web}: basic_auth_users.prometheus: bcrypt cost 13")
    assert "htpasswd -nbBC 10 prometheus PASSWORD" in line
