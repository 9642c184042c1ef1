"""The I/O shell: stats sockets, the host, recordings. Thin; the logic lives in `core`."""
