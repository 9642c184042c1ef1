"""A stuck request's path is shown as its route: no query, no token (issue 14, 5). The frame
is built through the real Tracker from a document whose request vars hold the raw PATH_INFO,
so the finding, its evidence and what the TUI and the daemon's log read (`RequestView.path`)
are the one trimmed value."""

from __future__ import annotations

import pytest

import uwsgitune.core.route as route_module
from tests.support.frames import frame, series, stuck
from uwsgitune.core.route import route
from uwsgitune.rules import evaluate

TOKEN = "9f86d081884c7d659a2feaa0bb8e4f7c"  # 32 hex: a reset token


CASES = [
    (f"/reset/{TOKEN}/confirm?token=s3cr3t", "/reset/…/confirm"),
    ("/report?api_key=abc", "/report"),
    ("/account;jsessionid=A1B2C3", "/account"),
    ("/invite/aB3dE5gH", "/invite/…"),  # short, but letters and digits: a code
    ("/io/0", "/io/0"),
    ("/api/v1/users/42/orders/7", "/api/v1/users/…"),
    ("/static/", "/static/"),
    ("/", "/"),
    ("", ""),
]


@pytest.mark.parametrize(("raw", "shown"), CASES)
def test_route(raw: str, shown: str) -> None:
    assert route(raw) == shown


def test_stuck_request_finding_shows_the_route() -> None:
    raw = f"/reset/{TOKEN}/confirm?token=s3cr3t"
    last = frame(29, worker=stuck(45.0, "POST", raw))
    (r,) = {v.path for w in last.workers for v in w.requests_in_flight}
    assert r == "/reset/…/confirm"  # the TUI panes and the daemon read this
    found = evaluate([*series(29), last])[0]
    (f,) = [f for f in found if f.id == "health.stuck_requests"]
    assert f.value("path") == "POST /reset/…/confirm"
    assert "the oldest, POST /reset/…/confirm, for 45 s" in f.reason
    text = f"{f.reason} {f.evidence}"
    assert TOKEN not in text and "s3cr3t" not in text and "token" not in text


@pytest.mark.parametrize(("raw", "shown"), CASES)
def test_a_path_seen_again_is_shown_the_same_and_only_shown_paths_are_kept(
    raw: str, shown: str
) -> None:
    assert route(raw) == route(raw) == shown  # the second time from what the first kept
    assert (raw in route_module._SAME) == (raw == shown)  # a path that lost something: never
