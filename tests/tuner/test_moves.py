"""The route tables (tuner/moves.py): each route's phases follow only the steps its table
allows, and every final phase is a result the audit log knows."""

from __future__ import annotations

from typing import get_args

import pytest

from uwsgitune.tuner.moves import FINAL, ROUTES, Move, MoveError, Phase
from uwsgitune.tuner.result import Result

PATHS = [
    ("fifo", ["sent", "verified"]),
    ("fifo", ["sent", "unconfirmed"]),
    ("fifo", ["refused"]),
    ("reload", ["intent", "sent", "verified"]),
    ("reload", ["intent", "sent", "failed"]),
    ("reload", ["intent", "sent", "interrupted"]),
    ("reload", ["intent", "refused"]),
    ("reload", ["refused"]),
    ("restart", ["intent", "sent", "verified"]),
]


@pytest.mark.parametrize(("route", "path"), PATHS)
def test_a_route_goes_where_its_table_allows(route: str, path: list[Phase]) -> None:
    move = Move(route)  # type: ignore[arg-type]
    for phase in path:
        move.to(phase)
    assert move.done and move.record().phases == ("decided", *path)


@pytest.mark.parametrize(
    ("route", "path"),
    [
        ("fifo", ["intent"]),  # a FIFO move writes no intent: nothing to roll back
        ("fifo", ["verified"]),  # verified before it was sent
        ("reload", ["sent"]),  # a reload never writes before its intent is on disk
        ("reload", ["intent", "verified"]),
        ("reload", ["intent", "sent", "verified", "failed"]),  # nothing after the end
        ("restart", ["intent", "sent", "unconfirmed"]),
    ],
)
def test_a_step_the_table_does_not_allow_is_a_bug(route: str, path: list[Phase]) -> None:
    move = Move(route)  # type: ignore[arg-type]
    with pytest.raises(MoveError):
        for phase in path:
            move.to(phase)


def test_every_phase_a_change_can_end_at_is_an_audit_result() -> None:
    ends = {p for table in ROUTES.values() for nexts in table.values() for p in nexts}
    assert ends - {"intent"} <= set(get_args(Result))
    assert ends >= FINAL
