"""sources/_recvlines.c: the request log's datagrams read in C (Linux's recvmmsg)."""

def recv(
    fd: int, ask: int, slot: int, /
) -> tuple[int, list[tuple[int, list[bytes]]], int, int, int, int, int] | None: ...
