"""The tuner's I/O shell: the master FIFO, the override ini, reloads, the audit log, doctor."""
