"""The pure core: no sockets, no files, no clock. Time arrives inside the samples."""
