"""Prometheus scrape target: uwsgi_exporter's metrics, the ones no exporter has, and
uwsgitune's own, from the latest state of each instance.

- `metrics.py`: what a state becomes as metric families (a custom collector);
- `exposition.py`: those families as text, rendered once per poll and shared by scrapes;
- `server.py`: the HTTP/1.1 server (sockets, h11 parsing, answers, time bounds);
- `admission.py`: who may hold a connection, and how much memory answers may hold;
- `site.py`: the daemon's routes, built from `EndpointSettings`; `auth.py`: basic auth;
- `webconfig.py`: exporter-toolkit's web config (TLS, basic auth, headers);
- `probe.py`: `/probe`, one read of an allow-listed instance;
- `serve.py`: `watch --metrics-listen`.
The exporter never imports the daemon: the daemon builds the site from plain settings.
"""
