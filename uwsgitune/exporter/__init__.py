"""Prometheus scrape target: uwsgi_exporter's metrics, the ones no exporter has, and
uwsgitune's own. A custom collector over the latest snapshot of each instance."""
