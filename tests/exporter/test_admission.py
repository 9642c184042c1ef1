"""Admission without sockets: peers keyed as the caps count them (IPv6 by /64), and the
standing of connections that logged in against a flood of ones that never do."""

from __future__ import annotations

import pytest

from uwsgitune.exporter.admission import TRUST_SECONDS, Conn, Slots, peer_key


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def conn(peer: str, dropped: list[str] | None = None, idle: bool = False) -> Conn:
    c = Conn(peer, lambda: dropped.append(peer) if dropped is not None else None)
    c.idle = idle
    return c


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
        ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("fe80::1%eth0", "fe80::/64"),
        ("::1", "::/64"),
        ("", ""),
    ],
)
def test_a_peer_is_an_ipv4_address_or_an_ipv6_64(address: str, key: str) -> None:
    assert peer_key(address) == key


def test_the_per_peer_cap_counts_an_ipv6_64_as_one_peer() -> None:
    slots = Slots(total=64, per_peer=2)
    assert slots.admit(conn("2001:db8:1:2::1")) and slots.admit(conn("2001:db8:1:2::2"))
    assert not slots.admit(conn("2001:db8:1:2:ffff::3"))  # a third address of that /64
    assert slots.admit(conn("2001:db8:1:3::1"))  # the next /64 is another peer
    assert slots.admit(conn("192.0.2.7")) and slots.admit(conn("::ffff:192.0.2.7"))
    assert not slots.admit(conn("192.0.2.7"))  # mapped or not, one IPv4 peer
    assert slots.refused == 2


def test_unprotected_newcomers_never_evict_an_authenticated_idle_connection() -> None:
    clock, dropped = Clock(), []
    slots = Slots(total=4, per_peer=4, reserve=1, clock=clock)
    scraper = conn("10.0.0.1", dropped)
    assert slots.admit(scraper)
    scraper.authenticated()
    scraper.idle = True  # kept alive between scrapes
    for i in range(2, 5):  # the room left but the reserve: three idle ones, not logged in
        assert slots.admit(conn(f"10.0.1.{i}", dropped, idle=True))
    assert len(slots) == 4
    flood = [conn(f"10.0.2.{i}", dropped, idle=True) for i in range(8)]
    assert all(slots.admit(c) for c in flood)  # each in, an older idle stranger out
    assert len(dropped) == 8 and "10.0.0.1" not in dropped  # never the idle scraper
    assert len(slots) == 4 and not any(c.protected for c in flood)


def test_room_is_kept_for_a_trusted_peer_and_it_may_evict_a_busy_stranger() -> None:
    clock, dropped = Clock(), []
    slots = Slots(total=8, per_peer=8, reserve=2, clock=clock)
    first = conn("10.0.0.1")
    assert slots.admit(first)
    first.authenticated()
    slots.release(first)  # it logged in, and went: its peer is trusted
    strangers = [conn(f"10.0.1.{i}", dropped) for i in range(12)]
    admitted = [slots.admit(c) for c in strangers]
    assert sum(admitted) == 8 - 2 and len(slots) == 6  # the reserve stays free for it
    assert slots.admit(conn("10.0.0.1")) and slots.admit(conn("10.0.0.1"))
    assert not dropped
    again = conn("10.0.0.1")
    assert slots.admit(again) and again.vip and dropped == ["10.0.1.0"]  # busy, oldest
    assert len(slots) == 8


def test_nothing_is_reserved_until_someone_logs_in_and_trust_expires() -> None:
    clock = Clock()
    slots = Slots(total=4, per_peer=4, reserve=2, clock=clock)
    assert all(slots.admit(conn(f"10.0.1.{i}")) for i in range(4))  # auth off: all 4
    slots = Slots(total=4, per_peer=4, reserve=2, clock=clock)
    slots.trust("10.0.0.1")
    assert [slots.admit(conn(f"10.0.1.{i}")) for i in range(3)] == [True, True, False]
    clock.now += TRUST_SECONDS + 1
    assert slots.admit(conn("10.0.1.9")) and not slots.trusted("10.0.0.1")
