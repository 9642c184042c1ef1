"""The request log receiver's cost per line (issue 38: uwsgitune's CPU per ingested request
≤ 5 µs at 10k requests/s, of which this is the I/O part; the parser's is its own).

    .venv/bin/python bench/reqlog_bench.py                  # 10k lines/s for 10 s
    .venv/bin/python bench/reqlog_bench.py --rate 20000 --seconds 5

A separate process sends uWSGI-shaped lines (about 150 bytes) over UDP on loopback at a
steady rate, in bursts every millisecond; this process drains every `--every` seconds and
measures its own CPU (thread time) per line drained, the lines the kernel dropped, and the
receive buffer granted. Results: bench/results/reqlog.md.
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from uwsgitune.sources.reqlog import Receiver  # noqa: E402

LINE = (
    b"[pid: 1209|app: -|req: -/-] 127.0.0.1 (-) {26 vars in 308 bytes} "
    b"uwt1 1795732529283382 2451 200 3 1209 GET [t=1795732529.280] /api/items/42?page=3\n"
)


def send(address: tuple[str, int], rate: float, seconds: float) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        start = time.monotonic()
        sent = 0
        while (now := time.monotonic() - start) < seconds:
            due = int(now * rate)
            while sent < due:
                tx.sendto(LINE, address)
                sent += 1
            time.sleep(0.001)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=10_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--every", type=float, default=0.1, help="seconds between drains")
    args = ap.parse_args()
    with Receiver("127.0.0.1:0") as rx:
        sender = multiprocessing.Process(target=send, args=(rx.address, args.rate, args.seconds))
        sender.start()
        cpu = 0.0
        lines = drains = 0
        while sender.is_alive() or lines == 0:
            time.sleep(args.every)
            t0 = time.thread_time()
            got = rx.drain()
            cpu += time.thread_time() - t0
            lines += got.received
            drains += 1
        sender.join()
        time.sleep(args.every)
        t0 = time.thread_time()
        lines += rx.drain().received
        cpu += time.thread_time() - t0
        rx.drain()
        print(
            f"rate {args.rate:.0f}/s for {args.seconds:g} s, a drain every {args.every:g} s: "
            f"{lines} lines in {drains} drains, {cpu / max(lines, 1) * 1e6:.2f} µs CPU per line, "
            f"kernel drops {rx.totals.kernel_drops}, receive buffer {rx.rcvbuf} bytes"
        )


if __name__ == "__main__":
    main()
