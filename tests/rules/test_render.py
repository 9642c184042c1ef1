"""What a person reads of a finding: advice that says what happens, evidence in human units.

The recommendation's data (setting, value, current, route) is what `--json` carries; the
advice line says what the change does to the instance. Over every recording, the text
`recommend` prints holds no raw unit, while `--json` keeps them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from uwsgitune.cli.main import main
from uwsgitune.rules.finding import Apply, Direction, Recommendation
from uwsgitune.rules.render import change_text, recommendation_text

RECORDINGS = sorted((Path(__file__).resolve().parents[1] / "data" / "recordings").glob("*.jsonl"))


def _rec(
    setting: str,
    current: int | str | None,
    value: int | str | None,
    apply: Apply = "reload",
    *together: tuple[str, int | str],
    direction: Direction = "raise",
) -> Recommendation:
    return Recommendation(setting, direction, value, apply, "", current, tuple(together))


ADVICE = {
    "4 → 8 live workers (FIFO)": _rec("cheaper-initial", 4, 8, "fifo"),
    "6 → 2 live workers (FIFO)": _rec("cheaper", 6, 2, "fifo", direction="lower"),
    "6 → 2 live workers (reload)": _rec("cheaper-initial", 6, 2, direction="lower"),
    "2 → 1 live worker (FIFO)": _rec("cheaper", 2, 1, "fifo", direction="lower"),
    "processes 8 → 16, then 16 live workers (reload)": _rec(
        "processes", 8, 16, "reload", ("cheaper-initial", 16)
    ),
    "processes 2 → 7 (reload)": _rec("processes", 2, 7),
    "listen 100 → 1024 (restart)": _rec("listen", 100, 1024, "restart"),
    "threads 4 → 1 per worker, processes = 4 (reload)": _rec(
        "threads", 4, 1, "reload", ("processes", 4), direction="lower"
    ),
    "net.core.somaxconn 128 → 1024 (sysctl), then listen = 1024 (restart)": _rec(
        "net.core.somaxconn", 128, 1024, "sysctl", ("listen", 1024)
    ),
    "cheaper 0 → 2, cheaper-algo = manual, then 8 live workers (reload)": _rec(
        "cheaper", 0, 2, "reload", ("cheaper-algo", "manual"), ("cheaper-initial", 8)
    ),
    "enable memory-report (reload)": _rec("memory-report", None, "true", direction="enable"),
    "harakiri = 30 (reload)": _rec("harakiri", None, 30),
    "cpu (outside uWSGI)": _rec("outside:cpu", "2 cpus", None, "outside"),
}


@pytest.mark.parametrize(("text", "rec"), ADVICE.items(), ids=list(ADVICE))
def test_advice_says_what_happens(text: str, rec: Recommendation) -> None:
    assert change_text(rec) == text


def test_advice_ends_with_its_effect() -> None:
    rec = Recommendation("listen", "raise", 32, "restart", "bursts wait", current=8)
    assert recommendation_text(rec) == "listen 8 → 32 (restart): bursts wait"


READS = {
    "ratio": r"-?(<)?[\d.]+%",
    "bytes": r"-?[\d.]+ (B|KiB|MiB|GiB|TiB)",
    "ms": r"[\d.]+ (µs|ms|s|min)",
    "s": r"[\d.]+ (ms|s|min|h)",
    "connections": r"[\d.]+ connections?",
    "workers": r"[\d.]+ workers?",
    "requests": r"[\d.]+ requests?",
    "cpus": r"[\d.]+ CPUs?",
    "req/s": r"[\d.]+ req/s",
}


def _evidence(line: str) -> dict[str, str]:
    """`  evidence (...): a 1 MiB, b 2%` -> {"a": "1 MiB", "b": "2%"}."""
    items = line.split("): ", 1)[1].split(", ")
    return dict(item.split(" ", 1) for item in items)


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.stem)
def test_recommend_text_reads_human_units_and_json_keeps_raw_ones(
    recording: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["recommend", "--replay", str(recording), "--json"])
    doc = json.loads(capsys.readouterr().out)
    main(["recommend", "--replay", str(recording)])
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("  evidence (")]
    findings = [f for inst in doc["instances"] for f in inst["findings"]]
    assert len(lines) == len(findings)
    for line, f in zip(lines, findings, strict=True):
        shown = _evidence(line)
        assert list(shown) == list(f["evidence"])
        for name, raw in f["evidence"].items():
            pattern = READS.get(raw["unit"])
            if pattern is not None and raw["value"] is not None:
                assert re.fullmatch(pattern, shown[name]), (name, raw, shown[name])
            if raw["unit"] == "ratio" and raw["value"]:
                assert shown[name] != "0%", (name, raw)  # a share that is there shows
        if "memory_per_worker" in f["evidence"]:  # --json: raw bytes, as before
            raw = f["evidence"]["memory_per_worker"]
            assert raw["unit"] == "bytes" and isinstance(raw["value"], int)
            assert raw["value"] > 2**20
