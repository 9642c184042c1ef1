"""Issue 36.3: applying over a TCP or HTTP stats address only when the listener is proved to be
the master's (actuate/peer.py: its inode, from inet_diag, among /proc/<master>/fd). Against a
real uWSGI with `stats = HOST:PORT`: proven (raw, `--stats-http`, IPv6) applies; a stranger's
listener serving a recorded document that names the real master is refused in one line that
names the opt-in, and with the opt-in applies; /proc/<master>/fd unreadable (the check run as
uid 65534) is refused naming the opt-in. The rules themselves, on injected tables and /proc."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import stats_fixture
from tests.support.instances import fake_server, send
from tests.support.tuned import doc, service, wait_for
from tests.sweep.test_real import SHORT, one_line_error, sweep_cmd
from uwsgitune.actuate.peer import PeerCheck, host_listeners, reaching
from uwsgitune.cli.main import build_parser
from uwsgitune.cli.watch import _tuned
from uwsgitune.core.address import parse_address
from uwsgitune.core.model import parse_stats
from uwsgitune.core.samples import Poll
from uwsgitune.daemon.config import InstanceConfig
from uwsgitune.daemon.instance import InstanceRunner
from uwsgitune.launch import UwsgiProcess, free_port
from uwsgitune.pipeline import InstanceState, PollCounts
from uwsgitune.sources.netlink import TcpListener
from uwsgitune.tuner.result import StepResult

Start = Callable[..., UwsgiProcess]
NOBODY = 65534
FIX = (
    "; not applying over TCP: use a unix stats socket, or pass --trust-tcp-stats to trust "
    "whoever answers on that port"
)


def _instance(uwsgi: Start, host: str = "127.0.0.1", http: bool = False) -> UwsgiProcess:
    port = free_port()
    stats = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return uwsgi(
        stats=stats,
        stats_http=http or None,
        processes=4,
        cheaper=1,
        cheaper_algo="manual",
        cheaper_initial=2,
    )


def _tune(address: str, proc: UwsgiProcess, tmp_path: Path, *extra: str) -> list[str]:
    """`tune --mode apply` for a few polls, with a floor of 3 (2 live: "up 2->3" via the FIFO);
    the lines it printed, without their time."""
    audit = str(tmp_path / "audit.jsonl")
    cmd = [sys.executable, "-m", "uwsgitune", "tune", address, "--fifo", proc.fifo]
    cmd += ["--mode", "apply", "--min-workers", "3", "--interval", "0.5", "--duration", "4"]
    cmd += ["--audit", audit, *extra]
    env = {**os.environ, "UWSGITUNE_LOCK_DIR": str(tmp_path / "locks")}
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stdout + res.stderr
    return [line.split(" ", 1)[1] for line in res.stdout.splitlines()]  # without the time


def _live(proc: UwsgiProcess) -> int:
    return len(doc(proc).live_workers)


@pytest.mark.uwsgi
@pytest.mark.parametrize(
    ("host", "http"), [("127.0.0.1", False), ("127.0.0.1", True), ("::1", False)]
)
def test_a_listener_the_master_holds_is_proved_and_applied_over(
    uwsgi: Start, tmp_path: Path, host: str, http: bool
) -> None:
    proc = _instance(uwsgi, host, http)
    lines = _tune(proc.stats, proc, tmp_path)
    assert any("apply: up 2 → 3 live workers (FIFO) [floor]" in line for line in lines), lines
    assert not any("refused" in line for line in lines), lines
    assert wait_for(lambda: _live(proc) == 3)


def _stranger_document(pid: int) -> bytes:
    """A recorded stats document (2 live of 4) that names the real master's pid."""
    data = json.loads(stats_fixture("cheaper.json"))
    data["pid"] = pid
    return json.dumps(data).encode()


@pytest.mark.uwsgi
def test_a_strangers_listener_is_refused_naming_the_opt_in_which_then_applies(
    uwsgi: Start, tmp_path: Path
) -> None:
    """Someone else's socket on a port, serving documents that name the real master (whose
    FIFO passes every FIFO guard): refused in one line; with --trust-tcp-stats, its
    documents steer a `+` into the real master, as they did for every TCP address before."""
    proc = _instance(uwsgi)
    pid = doc(proc).pid
    with fake_server(send(_stranger_document(pid))) as addr:
        lines = _tune(addr, proc, tmp_path)
        refused = [line for line in lines if "refused" in line]
        assert len(refused) == 1, lines
        head = f"ERROR: up 2 → 3 live workers (FIFO) refused: {addr}: its listener (socket inode "
        assert refused[0].startswith(head), refused[0]
        tail = f"is not held by master {pid}, whose pid the stats name: another process may "
        assert tail + "have taken the stats port" + FIX + ". STOPPED APPLYING" in refused[0]
        assert _live(proc) == 2  # nothing was written
        lines = _tune(addr, proc, tmp_path, "--trust-tcp-stats", "--resume-apply")
    assert any("apply: up 2 → 3 live workers (FIFO) [floor]" in line for line in lines), lines
    assert not any("refused" in line for line in lines), lines
    assert wait_for(lambda: _live(proc) == 3)


CHECK_AS_NOBODY = """
import os, sys
from uwsgitune.actuate.peer import PeerCheck
from uwsgitune.core.address import parse_address
from uwsgitune.pipeline import live_source, poll_once
address = parse_address(sys.argv[1])
state = poll_once(live_source(address))
assert state.up
os.setgroups([])
os.setgid(int(sys.argv[2]))
os.setuid(int(sys.argv[2]))  # from here on, another uid than the master's
print(PeerCheck().refusal(address, state.poll))
print(PeerCheck(trust_tcp=True).refusal(address, state.poll))
"""


@pytest.mark.uwsgi
def test_an_unreadable_master_fd_dir_is_refused_naming_the_opt_in(uwsgi: Start) -> None:
    """uwsgitune not root, the master another user's: /proc/<master>/fd cannot be read, so
    nothing proves the listener is the master's. The check runs in a process that polled,
    then took uid 65534 (os.setuid)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run the check as another uid than the master's")
    proc = _instance(uwsgi)
    pid, port = doc(proc).pid, proc.stats.rsplit(":", 1)[1]
    cmd = [sys.executable, "-c", CHECK_AS_NOBODY, proc.stats, str(NOBODY)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        f"{proc.stats}: cannot read /proc/{pid}/fd (Permission denied) to prove "
        f"127.0.0.1:{port} is master {pid}'s (run uwsgitune as root or as the master's "
        f"user){FIX}",
        "None",  # the opt-in trusts whoever answers
    ]


@pytest.fixture
def stranger(uwsgi: Start) -> Iterator[tuple[UwsgiProcess, str]]:
    """A real instance (TCP stats), and a stranger's listener on another port serving a
    recorded document that names that instance's master."""
    proc = _instance(uwsgi)
    with fake_server(send(_stranger_document(doc(proc).pid))) as addr:
        yield proc, addr


REFUSED = "is not held by master {pid}, whose pid the stats name"


@pytest.mark.uwsgi
def test_sweep_refuses_a_strangers_listener(
    stranger: tuple[UwsgiProcess, str], tmp_path: Path
) -> None:
    proc, addr = stranger
    out = tmp_path / "out"
    cmd = sweep_cmd(proc, "/io/20", "1..2", out, "--concurrency", "4", *SHORT)
    cmd[cmd.index("--stats") + 1] = addr
    env = {**os.environ, "UWSGITUNE_LOCK_DIR": str(tmp_path / "locks")}
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    one_line_error(res, f"{addr}: its listener", REFUSED.format(pid=doc(proc).pid), FIX)
    assert res.returncode == 1 and "step 1" not in res.stdout and _live(proc) == 2


def _tui(addr: str, proc: UwsgiProcess, tmp_path: Path, *extra: str) -> str:
    """`watch ADDR --fifo` as the TUI builds its tuner; `a` confirmed on the advice "up
    2->3": what became of it."""
    argv = ["watch", addr, "--fifo", proc.fifo, "--min-workers", "3", "--interval", "0.5"]
    args = build_parser().parse_args([*argv, "--audit", str(tmp_path / "audit.jsonl"), *extra])
    driver = _tuned(parse_address(addr), args)
    try:
        driver.run(until=_advised, deadline=time.monotonic() + 10)
        service(driver).request("up", 3)  # the `a` confirmed
        state = driver.run(until=_served, deadline=time.monotonic() + 10)
    finally:
        driver.close()
    assert state.tuning is not None and state.tuning.requested is not None, state.tuning
    return state.tuning.requested.text


def _advised(state: InstanceState) -> bool:
    d = state.tuning.decision if state.tuning is not None else None
    return d is not None and d.is_change


def _served(state: InstanceState) -> bool:
    return state.tuning is not None and state.tuning.requested is not None


@pytest.mark.uwsgi
def test_the_tuis_apply_key_refuses_a_strangers_listener_unless_trusted(
    stranger: tuple[UwsgiProcess, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UWSGITUNE_LOCK_DIR", str(tmp_path / "locks"))
    proc, addr = stranger
    outcome = _tui(addr, proc, tmp_path)
    assert outcome.startswith(f"not applied: refused: {addr}: its listener"), outcome
    assert REFUSED.format(pid=doc(proc).pid) in outcome and outcome.endswith(FIX)
    assert _live(proc) == 2
    outcome = _tui(addr, proc, tmp_path / "trusted", "--trust-tcp-stats")
    assert outcome.startswith("applied: up 2 → 3 live workers (FIFO)"), outcome
    assert wait_for(lambda: _live(proc) == 3)


@pytest.mark.uwsgi
@pytest.mark.parametrize("trusted", [False, True])
def test_the_daemon_refuses_a_strangers_listener_naming_its_key(
    stranger: tuple[UwsgiProcess, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    trusted: bool,
) -> None:
    monkeypatch.setenv("UWSGITUNE_LOCK_DIR", str(tmp_path / "locks"))
    proc, addr = stranger
    spec = InstanceConfig(
        name="app",
        stats=addr,
        fifo=Path(proc.fifo),
        mode="apply",
        min_workers=3,
        interval=0.5,
        trust_tcp_stats=trusted,
    )
    runner = InstanceRunner(spec, tmp_path)  # its driver, as the daemon builds it
    said: list[str] = []
    last: list[StepResult | None] = [None]

    def notes(state: InstanceState) -> None:  # each step's notes once
        result = state.tuning
        if result is not None and result is not last[0]:
            last[0] = result
            said.extend(n.text for n in result.notes)

    runner.driver.subscribe(notes)
    try:
        runner.driver.run(until=lambda state: (state.counts or PollCounts()).polls >= 5)
    finally:
        runner.driver.close()
    refused = [line for line in said if "refused" in line]
    if trusted:
        assert not refused and wait_for(lambda: _live(proc) == 3), said
        return
    assert len(refused) == 1 and REFUSED.format(pid=doc(proc).pid) in refused[0], said
    assert refused[0].startswith(
        f"ERROR: up 2 → 3 live workers (FIFO) refused: {addr}: its listener"
    ), refused
    assert (
        "; not applying over TCP: use a unix stats socket, or set trust_tcp_stats = true for "
        "instance app (--trust-tcp-stats) to trust whoever answers on that port."
    ) in refused[0]
    assert _live(proc) == 2


# --- the rules, on injected listener tables and /proc ----------------------------------------


def _poll(address: str, pid: int) -> Poll:
    return Poll(address, 1.0, 1.0, doc=parse_stats(_stranger_document(pid)))


def _proc(tmp_path: Path, pid: int, inodes: list[int]) -> Path:
    fd = tmp_path / "proc" / str(pid) / "fd"
    fd.mkdir(parents=True)
    for n, inode in enumerate(inodes):
        os.symlink(f"socket:[{inode}]", fd / str(n))
    os.symlink("pipe:[1]", fd / "99")
    return tmp_path / "proc"


def test_the_proof_on_injected_tables(tmp_path: Path) -> None:
    proc = _proc(tmp_path, 42, [7, 8])
    poll = _poll("127.0.0.1:9191", 42)

    def check(table: list[TcpListener], trust: bool = False) -> str | None:
        peer = PeerCheck(trust_tcp=trust, proc=proc, listeners=lambda: table)
        return peer.refusal("127.0.0.1:9191", poll)

    ours = TcpListener("127.0.0.1", 9191, 0, 100, 0, 7)
    assert check([ours]) is None
    assert check([TcpListener("0.0.0.0", 9191, 0, 100, 0, 8)]) is None
    stranger = TcpListener("::", 9191, 0, 100, 1000, 9)  # a wildcard beside ours: it may answer
    said = check([ours, stranger])
    assert said is not None and said.startswith(
        "127.0.0.1:9191: the listener on [::]:9191 (socket inode 9, uid 1000) is not held by "
        "master 42"
    ), said
    assert said.endswith(FIX)
    assert check([stranger], trust=True) is None
    assert check([TcpListener("127.0.0.1", 9192, 0, 100, 0, 7)]) == (
        "127.0.0.1:9191: no TCP socket listens on 127.0.0.1:9191 in this network namespace, "
        "so it cannot be proved master 42's" + FIX
    )

    def broken() -> list[TcpListener]:
        raise PermissionError(1, "Operation not permitted")

    said = PeerCheck(proc=proc, listeners=broken).refusal("127.0.0.1:9191", poll)
    assert said == (
        "127.0.0.1:9191: cannot list the TCP listeners (netlink sock_diag: Operation not "
        "permitted) to prove 127.0.0.1:9191 is master 42's" + FIX
    )
    gone = PeerCheck(proc=proc, listeners=lambda: [ours]).refusal("127.0.0.1:9191", _poll("x", 43))
    assert gone == "127.0.0.1:9191: the stats name master pid 43, which is not running here" + FIX
    (proc / "44").mkdir()
    (proc / "44" / "fd").write_text("")  # unreadable as a directory
    said = PeerCheck(proc=proc, listeners=lambda: [ours]).refusal("127.0.0.1:9191", _poll("x", 44))
    assert said is not None and said.startswith(f"127.0.0.1:9191: cannot read {proc}/44/fd (")
    daemon = PeerCheck(proc=proc, listeners=lambda: [stranger], opt_in="set trust_tcp_stats")
    said = daemon.refusal("http://127.0.0.1:9191", poll)
    assert said is not None and "; not applying over HTTP: " in said
    assert said.endswith("or set trust_tcp_stats to trust whoever answers on that port")
    # Observing, a unix socket (SO_PEERCRED), a replay: not this check's.
    assert PeerCheck(listeners=broken).refusal("127.0.0.1:9191", None) is None
    assert PeerCheck(listeners=broken).refusal("/run/stats.sock", poll) is None


def test_which_listeners_a_connection_may_reach() -> None:
    table = [
        TcpListener("127.0.0.1", 9191, 0, 1, 0, 1),
        TcpListener("0.0.0.0", 9191, 0, 1, 0, 2),
        TcpListener("::ffff:127.0.0.1", 9191, 0, 1, 0, 3),
        TcpListener("10.0.0.5", 9191, 0, 1, 0, 4),
        TcpListener("127.0.0.1", 9192, 0, 1, 0, 5),
        TcpListener("::1", 9191, 0, 1, 0, 6),
    ]
    inodes = lambda host, ips: [t.inode for t in reaching(host, 9191, table, ips)]  # noqa: E731
    assert inodes("127.0.0.1", {"127.0.0.1"}) == [1, 2, 3]
    assert inodes("localhost", {"127.0.0.1", "::1"}) == [1, 2, 3, 6]
    assert inodes("0.0.0.0", {"0.0.0.0"}) == [1, 2, 3, 4, 6]  # any of them may answer
    assert inodes("nowhere.invalid", set()) == [2]


def test_the_listener_table_names_owner_and_inode() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        ino = os.fstat(s.fileno()).st_ino
        mine = [t for t in host_listeners() if t.port == port]
    assert [(t.address, t.uid, t.inode) for t in mine] == [("127.0.0.1", os.geteuid(), ino)]
