"""`uwsgitune watch --replay FILE --plain | head`: the reader leaves, the command ends
quietly (exit 0, nothing on stderr)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RECORDING = Path(__file__).resolve().parents[1] / "data" / "recordings" / "healthy.jsonl"


def _long_recording(path: Path, rounds: int = 200) -> Path:
    """The recording's polls again and again, a second apart: far more lines than a pipe
    holds, so the writer meets the closed pipe."""
    header, *lines = RECORDING.read_text().splitlines()
    polls = [json.loads(line) for line in lines if line.strip()]
    with path.open("w") as out:
        out.write(header + "\n")
        for i in range(rounds * len(polls)):
            rec = dict(polls[i % len(polls)], t=1.0e9 + i, mono=1000.0 + i)
            out.write(json.dumps(rec) + "\n")
    return path


def test_a_replay_piped_into_head_ends_quietly(tmp_path: Path) -> None:
    recording = _long_recording(tmp_path / "long.jsonl")
    cmd = [sys.executable, "-m", "uwsgitune", "watch", "--replay", str(recording), "--plain"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        proc.stdout.close()  # as `head -1` does
        err = proc.stderr.read().decode()
        assert proc.wait(60) == 0, err
    assert b"live=" in first and err == ""
