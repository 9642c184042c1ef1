"""`uwsgitune daemon`: watch instances under systemd and serve their metrics to Prometheus.

Never imports textual: the daemon runs on servers without a terminal.
"""
