"""uwsgitune daemon against the Go uwsgi_exporter on the same uWSGI: scrape cost and output.

    nice -n 19 .venv/bin/python bench/exporter_vs_go.py                  # 64 workers
    nice -n 19 .venv/bin/python bench/exporter_vs_go.py --workers 4 --scrapes 50

Both serve the same instance on loopback; scrapes alternate between them, each as
Prometheus sends it (`Accept-Encoding: gzip`, `X-Prometheus-Scrape-Timeout-Seconds`), at
`--rate` per second. For each: the wall time of a scrape (median, p90, max), the CPU the
process used over the run divided by the scrapes (uwsgitune's includes its own polls at
1 s, which the Go exporter does on every scrape instead; the next column takes off what the
process uses in 20 s without scrapes), the bytes on the wire and the RSS.
Then the two outputs are compared name by name, label set by label set, and value by value
for the values that cannot move between two reads of an idle instance.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.uwsgi_harness import url, uwsgi_instance  # noqa: E402
from uwsgitune.launch import free_port  # noqa: E402
from uwsgitune.loadgen import run_closed  # noqa: E402

GO = ROOT.parent / "shared" / "tools" / "uwsgi_exporter" / "uwsgi_exporter"
UWSGITUNE = str(Path(sys.executable).parent / "uwsgitune")
HEADERS = {"Accept-Encoding": "gzip", "X-Prometheus-Scrape-Timeout-Seconds": "10"}
# Values that change between two reads of an idle instance, or are each process's own.
MOVING = ("uwsgi_exporter_", "process_", "go_", "promhttp_", "uwsgi_worker_rss_bytes",
          "uwsgi_worker_vsz_bytes", "uwsgitune_")  # fmt: skip


def scrape(port: int, path: str = "/metrics") -> tuple[float, int, str]:
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path, headers=HEADERS)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    took = time.perf_counter() - t0
    body = gzip.decompress(raw) if resp.getheader("Content-Encoding") == "gzip" else raw
    return took, len(raw), body.decode()


def wait_ready(port: int, timeout: float = 60.0) -> None:
    """Until the exporter answers and, for uwsgitune, has polled the instance once."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if "uwsgi_up{stats_uri=" not in (text := scrape(port)[2]) and "uwsgi_up 1" in text:
                return
            if 'uwsgi_up{stats_uri="' in text and '"} 1.0' in text.split("uwsgi_up{", 1)[1]:
                return
        except (OSError, IndexError):
            pass
        if time.monotonic() > deadline:
            sys.exit(f"the exporter on port {port} did not come up in {timeout:g} s")
        time.sleep(0.5)


def cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return float(t.user + t.system)


def idle_cpu(procs: dict[str, psutil.Process], seconds: float) -> dict[str, float]:
    """CPU seconds per second of each process with no scrape at all (uwsgitune's polls)."""
    cpu0 = {k: cpu(p) for k, p in procs.items()}
    time.sleep(seconds)
    return {k: (cpu(p) - cpu0[k]) / seconds for k, p in procs.items()}


def measure(ports: dict[str, int], procs: dict[str, psutil.Process], n: int, rate: float) -> None:
    base = idle_cpu(procs, 20.0)
    times: dict[str, list[float]] = {k: [] for k in ports}
    sizes: dict[str, int] = {}
    cpu0 = {k: cpu(p) for k, p in procs.items()}
    t0 = time.monotonic()
    for i in range(n):
        for name, port in ports.items():
            took, size, _ = scrape(port)
            times[name].append(took * 1000)
            sizes[name] = size
        time.sleep(max(0.0, t0 + (i + 1) / rate - time.monotonic()))
    elapsed = time.monotonic() - t0
    floor = statistics.median(scrape(ports["uwsgitune daemon"], "/-/healthy")[0] for _ in range(n))
    print(f"{n} scrapes each over {elapsed:.1f} s; the HTTP floor (uwsgitune's /-/healthy, "
          f"the same client, median): {floor * 1000:.2f} ms\n")  # fmt: skip
    print(
        "| exporter | median ms | p90 ms | max ms | CPU ms/scrape | CPU ms/scrape net of "
        "idle | gzip bytes | RSS MiB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, data in times.items():
        data.sort()
        used = cpu(procs[name]) - cpu0[name]
        net = max(0.0, used - base[name] * elapsed)  # uwsgitune's polls go on without scrapes
        rss = procs[name].memory_info().rss / 2**20
        print(f"| {name} | {statistics.median(data):.2f} | {data[int(0.9 * len(data))]:.2f} "
              f"| {data[-1]:.2f} | {used * 1000 / n:.2f} | {net * 1000 / n:.2f} "
              f"| {sizes[name]} | {rss:.1f} |")  # fmt: skip


def steady(ports: dict[str, int], procs: dict[str, psutil.Process], seconds: float) -> None:
    """CPU of each process over `seconds` with Prometheus's default 15 s scrape interval:
    the Go exporter reads uWSGI per scrape, uwsgitune polls every second whatever the scrapes."""
    cpu0 = {k: cpu(p) for k, p in procs.items()}
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for port in ports.values():
            scrape(port)
        time.sleep(min(15.0, max(0.0, seconds - (time.monotonic() - t0))))
    elapsed = time.monotonic() - t0
    print(f"\nSteady state, one scrape every 15 s for {elapsed:.0f} s (uwsgitune polls at 1 s):\n")
    print("| exporter | CPU s | % of a core |\n|---|---|---|")
    for name, p in procs.items():
        used = cpu(p) - cpu0[name]
        print(f"| {name} | {used:.2f} | {100 * used / elapsed:.2f} |")


def families(text: str) -> dict[str, tuple[str, dict[tuple[tuple[str, str], ...], float]]]:
    out: dict[str, tuple[str, dict[tuple[tuple[str, str], ...], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, (fam.type, {}))[1][tuple(sorted(s.labels.items()))] = s.value
    return out


def compare(go_text: str, ours_text: str) -> None:
    go, ours = families(go_text), families(ours_text)
    print("\n| name | Go | uwsgitune |\n|---|---|---|")
    same = 0
    for name in sorted(set(go) | set(ours)):
        if name.startswith(("go_", "uwsgitune_")):
            continue
        if name not in ours or name not in go:
            where = "absent" if name not in ours else "-"
            print(f"| {name} | {go[name][0] if name in go else '-'} | {where} |")
            continue
        (gt, gs), (ot, os_) = go[name], ours[name]
        glabels = {tuple(k for k, _ in key) for key in gs}
        olabels = {tuple(k for k, _ in key) for key in os_}
        diffs = []
        if gt != ot:
            diffs.append(f"type {gt} vs {ot}")
        if glabels != olabels:
            diffs.append(f"labels {sorted(glabels)} vs {sorted(olabels)}")
        elif not name.startswith(MOVING):
            bad = [k for k in gs if os_.get(k) != gs[k]]
            if bad or len(gs) != len(os_):
                diffs.append(f"{len(bad)} of {len(gs)} values differ, e.g. {bad[:1]}")
        if diffs:
            print(f"| {name} | {gt} | {'; '.join(diffs)} |")
        else:
            same += 1
    print(f"\n{same} names identical in type, label names and label sets (values too, "
          f"except {', '.join(MOVING)}); not compared: go_* (Go runtime).")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--scrapes", type=int, default=200)
    parser.add_argument("--rate", type=float, default=5.0, help="scrape rounds per second")
    parser.add_argument("--steady", type=float, default=60.0, help="seconds (0: skip)")
    args = parser.parse_args()
    if not GO.exists():
        sys.exit(f"the Go exporter is not at {GO}")
    with uwsgi_instance(processes=args.workers) as u:
        run_closed(url(u, "/"), concurrency=4, duration=2.0, max_requests=2000)
        ports = {"uwsgi_exporter (Go)": free_port(), "uwsgitune daemon": free_port()}
        go_port, our_port = ports.values()
        uri = f"--stats.uri=unix://{u.stats}"
        procs = [
            subprocess.Popen([str(GO), uri, f"--web.listen-address=127.0.0.1:{go_port}"],
                             stderr=subprocess.DEVNULL),
            subprocess.Popen([UWSGITUNE, "daemon", uri,
                              f"--web.listen-address=127.0.0.1:{our_port}"],
                             stderr=subprocess.DEVNULL),
        ]  # fmt: skip
        try:
            for port in ports.values():
                wait_ready(port)
            ps = {k: psutil.Process(p.pid) for k, p in zip(ports, procs, strict=True)}
            print(f"uWSGI {args.workers} workers, unix stats socket; {time.strftime('%F %T')}\n")
            measure(ports, ps, args.scrapes, args.rate)
            if args.steady > 0:
                steady(ports, ps, args.steady)
            compare(scrape(go_port)[2], scrape(our_port)[2])
        finally:
            for p in procs:
                p.send_signal(2)
            for p in procs:
                try:
                    p.wait(60)  # a starved nice-19 process can take a while
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


if __name__ == "__main__":
    main()
