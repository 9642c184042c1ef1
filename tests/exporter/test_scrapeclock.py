"""When a scrape is expected: from the median gap between the last scrapes."""

from __future__ import annotations

from uwsgitune.exporter.exposition import ScrapeClock


def clock_of(*times: float) -> ScrapeClock:
    clock = ScrapeClock()
    for t in times:
        clock.scraped(t)
    return clock


def test_due_one_interval_after_the_last_scrape() -> None:
    clock = clock_of(0, 15, 30)
    assert not clock.due(43.0, 1.2) and clock.due(44.0, 1.2) and clock.due(45.0, 1.2)
    assert clock.due(50.0, 1.2)  # late: still expected
    assert not clock.due(30 + 3 * 15 + 0.1, 1.2)  # three intervals without one: gone


def test_scraped_faster_than_polled_every_poll_renders() -> None:
    clock = clock_of(0, 0.2, 0.4, 0.6)
    assert all(clock.due(0.6 + dt, 1.2) for dt in (0.0, 0.1, 1.0, 3.0))
    assert not clock.due(0.6 + 3.7, 1.2)  # 3 x the poll's 1.2 s without a scrape


def test_one_scrape_says_nothing_of_the_next() -> None:
    assert not clock_of().due(5, 1.2) and not clock_of(0).due(5, 100)


def test_an_odd_gap_does_not_move_the_interval() -> None:
    clock = clock_of(0, 15, 30, 31, 45, 60)  # someone ran curl once
    assert not clock.due(72.0, 1.2) and clock.due(74.0, 1.2)
