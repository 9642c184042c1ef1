"""What a user sees of each recording is pinned: every frame's `--json` and the findings.

An optimisation must not change a number a user sees (issue 15), nor a restructuring
(issue 37). Each recording in tests/data/recordings is replayed through the pipeline (each
instance's driver: the real tracker and window), and the rules run on every frame so far;
a digest of every frame's JSON form and of the findings is compared with
tests/data/replay-digests.json.
A change that means to alter what is shown regenerates it on purpose:

    .venv/bin/python -m tests.pipeline.test_replay_golden --update
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from tests.support.instances import replayed
from uwsgitune.pipeline.rules import RulesRunner
from uwsgitune.render.jsonview import dumps
from uwsgitune.rules.facts import Facts

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDINGS = sorted((DATA / "recordings").glob("*.jsonl"))
DIGESTS = DATA / "replay-digests.json"


def digest(recording: Path) -> str:
    """sha256 of every frame's JSON (one line each) and of the findings after each poll."""
    h = hashlib.sha256()
    frames = []
    rules = RulesRunner(Facts())
    for frame in replayed(recording):
        frames.append(frame)
        h.update(dumps([frame], indent=None).encode() + b"\n")
        h.update(repr(rules.run(frames)).encode() + b"\n")
    return h.hexdigest()


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.stem)
def test_a_recording_replays_to_the_same_frames_and_findings(recording: Path) -> None:
    want = json.loads(DIGESTS.read_text())
    assert digest(recording) == want[recording.name], (
        f"what `watch --replay {recording.name} --json` and the rules show changed; if that "
        "is meant, run: python -m tests.pipeline.test_replay_golden --update"
    )


def test_every_recording_has_a_digest() -> None:
    assert sorted(json.loads(DIGESTS.read_text())) == [p.name for p in RECORDINGS]


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    DIGESTS.write_text(json.dumps({p.name: digest(p) for p in RECORDINGS}, indent=1) + "\n")
    print(f"wrote {DIGESTS}")
