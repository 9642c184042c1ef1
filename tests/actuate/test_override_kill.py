"""The daemon killed in the middle of writing the override: the file is always the old or
the new complete version, and the next writer removes the temporaries left behind."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from uwsgitune.actuate.override import Override, read_override, write_atomic

WRITER = """
import sys
from pathlib import Path
from uwsgitune.actuate.override import Override, write_atomic
path = Path(sys.argv[1])
n = 0
while True:
    n = n % 60 + 2
    write_atomic(path, Override(n, 1, n).render())
    if n == 2:  # one write done (the previous version kept): the parent may kill from now
        print("writing", flush=True)
"""


def test_kill_during_write_never_leaves_a_partial_file(tmp_path: Path) -> None:
    path = tmp_path / "o.ini"
    write_atomic(path, Override(4, 1, 2).render())
    rng = random.Random(7)
    kills = 0
    for _ in range(25):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        # killed while writing, however long its imports take on a busy machine (a fixed
        # sleep killed a writer still importing, before it had kept any previous version)
        assert proc.stdout is not None and proc.stdout.readline() == "writing\n"
        time.sleep(rng.random() * 0.05)  # thousands of writes a second: any instant of one
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        kills += 1
        for f in (path, path.with_name("o.ini.prev")):
            ov = read_override(f)
            assert ov is not None, f.read_text()
            assert f.read_text() == ov.render()  # complete, byte for byte
    assert kills == 25
    write_atomic(path, Override(8, 1, 3).render())  # the next start cleans up
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.ini", "o.ini.prev"]
    assert read_override(path) == Override(8, 1, 3)
