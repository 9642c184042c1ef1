"""bench/thirdparty/grid.py writes its page beside the raw file it was given: a scratch run
(`--out /tmp/x.json`) never rewrites bench/results/thirdparty.md."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _grid():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(
        "thirdparty_grid", ROOT / "bench/thirdparty/grid.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_page_goes_beside_the_raw_file(tmp_path: Path) -> None:
    grid = _grid()
    assert grid.report_path(grid.OUT) == ROOT / "bench" / "results" / "thirdparty.md"
    assert grid.report_path(tmp_path / "tune.json") == tmp_path / "tune.md"
