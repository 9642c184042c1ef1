"""The exporter tests' certificates (a CA, a server and a client certificate), for the
Prometheus client's TLS tests."""

from tests.exporter.conftest import certs

__all__ = ["certs"]
