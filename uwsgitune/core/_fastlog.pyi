"""core/_fastlog.c: the request log's common batch, parsed and recorded in C."""

from array import array
from collections.abc import Callable
from typing import Any

def scan(
    lines: list[bytes], /
) -> list[tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes]] | None: ...
def record(
    lines: list[bytes],
    service: Any,
    queue: Any,
    whole: Any,
    wcache: dict[int, Any],
    wresolve: Callable[[int], Any],
    rcache: dict[bytes, Any],
    rresolve: Callable[[bytes], Any],
    inv: float,
    zero: int,
    max_wait: int,
    cache_cap: int,
    /,
) -> (
    tuple[
        tuple[int, int, int, int, int, int],
        int,
        int,
        list[tuple[int, bytes, int]],
        list[tuple[int, int]],
    ]
    | None
): ...
def merge_frozen(
    hist: dict[int, int], keys: array[int], counts: array[int], sign: int, /
) -> None: ...
def keys_at_ranks(hist: dict[int, int], ranks: list[int], /) -> list[int]: ...
def cum_counts(hist: dict[int, int], lasts: tuple[int, ...], /) -> list[int]: ...
