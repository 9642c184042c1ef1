"""systemd units: `systemd-analyze verify` when it is installed, and what they must say."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SYSTEMD = Path(__file__).resolve().parents[2] / "systemd"
UNITS = ("uwsgitune.service", "uwsgitune@.service")


@pytest.mark.parametrize("unit", UNITS)
def test_unit_has_the_contract(unit: str) -> None:
    text = (SYSTEMD / unit).read_text()
    for line in (
        "Type=notify",
        "WatchdogSec=",
        "Restart=on-failure",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "PrivateTmp=yes",
        "ReadWritePaths=/var/lib/uwsgitune",
        "RuntimeDirectory=uwsgitune",  # the apply lock, seen past PrivateTmp (issue 14.3)
        "RuntimeDirectoryPreserve=yes",
        "TimeoutStopSec=30",  # an apply in flight: 10 s grace, rollback, 20 s wait (issue 14.2)
        "ExecReload=/bin/kill -HUP $MAINPID",
        "User=",
        "Group=",
    ):
        assert f"\n{line}" in text, line


@pytest.mark.parametrize("unit", UNITS)
def test_unit_bounds_resources_and_says_why(unit: str) -> None:
    """Issue 14: the network and resource limits are there, each under its own comment,
    and loopback (the default metrics address, 127.0.0.1:9117) stays reachable."""
    lines = (SYSTEMD / unit).read_text().splitlines()
    limits = ("IPAddressDeny=any", "IPAddressAllow=localhost", "MemoryMax=", "TasksMax=")
    for key in (*limits, "LimitNOFILE="):
        at = next((i for i, line in enumerate(lines) if line.startswith(key)), None)
        assert at is not None, key
        above = lines[at - 1] if key != "IPAddressAllow=localhost" else lines[at - 2]
        assert above.startswith("# "), f"{key}: say in the unit why it is there"
    text = "\n".join(lines)
    assert "AF_NETLINK" in text and "IPAddressAllow=" in text.split("IPAddressDeny=any")[0]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "uwsgitune"  # verify checks that ExecStart exists
    paths = []
    for unit in UNITS:
        text = (SYSTEMD / unit).read_text().replace("/usr/bin/uwsgitune", str(exe))
        name = unit.replace("@.", "@app.")  # a template is verified as an instance
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    out = subprocess.run(
        ["systemd-analyze", "verify", *paths],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    # verify exits 0 on unknown keys and bad values; it only warns. Any output is a finding.
    assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), out


def test_the_daemon_never_imports_textual() -> None:
    code = (
        "import sys\n"
        "from uwsgitune.cli.main import build_parser\n"
        "build_parser()\n"
        "import uwsgitune.daemon.runtime, uwsgitune.exporter.serve\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'textual'], 'textual'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
